/*
 * egressd.c: main, as a table for the skeleton in common/daemon.c.  Reads
 * like the daemon's table of contents: options, config (every error
 * reported, -n stops there), policyd's public key, the state and run
 * directories, the sockets, the audit log, the resolver, the privilege
 * drop, the event loop.  After the drop egressd holds only its own files,
 * the outbound network and, in memory, the per-task CA keys.
 */
#include <sys/queue.h>
#include <sys/types.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <openssl/ssl.h>
#include <sodium.h>

#include "audit.h"
#include "auditq.h"
#include "daemon.h"
#include "log.h"
#include "sign.h"
#include "util.h"
#include "egressd.h"

/* With -n too: the public key must load.  The upstream CA files are read
 * now (before the privilege drop) and must load, not only be readable: with -n the upstream
 * TLS context is made here; otherwise in a child process
 * (proxy_tls_upstream_check), egressd itself making it at its first
 * CONNECT. */
static int
egressd_check(void *arg, const struct daemon_opts *opts)
{
	struct egressd	*ed = arg;
	SSL_CTX		*ctx;
	char		 err[512];
	int		 ok;

	if (sign_trust_load(&ed->trust, ed->conf->public_key,
	    ed->conf->public_key_previous, err, sizeof(err)) == -1) {
		fprintf(stderr, "egressd: public_key %s: %s\n",
		    ed->conf->public_key, err);
		return -1;
	}
	/* Loaded at the first non-ASCII host (idn.c); checked now, as the
	 * dynamic linker did when egressd linked it. */
	if (idn_check(NULL, err, sizeof(err)) == -1) {
		fprintf(stderr, "egressd: %s\n", err);
		return -1;
	}
	if (proxy_tls_trust_read(ed, err, sizeof(err)) == -1) {
		fprintf(stderr, "egressd: %s\n", err);
		proxy_tls_trust_free(ed);
		return -1;
	}
	if (opts->noaction) {
		ok = (ctx = proxy_tls_upstream_ctx(ed)) != NULL;
		SSL_CTX_free(ctx);
		proxy_tls_trust_free(ed);
	} else
		ok = proxy_tls_upstream_check(ed) == 0;
	if (!ok) {
		fprintf(stderr, "egressd: cannot set up TLS to upstreams "
		    "(system store, upstream_cas)\n");
		proxy_tls_trust_free(ed);
		return -1;
	}
	return 0;
}

static void
egressd_init(void *arg)
{
	char	 err[512];

	(void)arg;
	if (sodium_init() == -1)
		fatalx("libsodium cannot start");
	/* libcrypto is loaded for TLS anyway (util.h). */
	if (sha256_use_openssl() == -1)
		log_warnx("OpenSSL's SHA-256 cannot be fetched: libsodium's");
	/* Where a channel's peer is checked (proxy_peer.c). */
	if (proxy_peer_init(err, sizeof(err)) == -1)
		fatalx("%s", err);
}

static void
egressd_prepare(void *arg)
{
	struct egressd	*ed = arg;

	if (ed->conf->run_dir != NULL)
		log_warnx("%s: run_dir is no longer used: each channel's "
		    "socket comes from launchd-sbx as a descriptor",
		    ed->conf->common.file);
	if ((ed->scratch = evbuffer_new()) == NULL)
		fatalx("cannot create the event loop");
}

/* Every configured path is absolute (cfg_dir), so the database can be
 * named relative to the state directory, as in every daemon. */
static void
egressd_open(void *arg)
{
	struct egressd	*ed = arg;
	char		 err[512];

	if ((ed->audit = audit_open(EGRESSD_DB, "egressd", err,
	    sizeof(err))) == NULL)
		fatalx("%s/%s: %s", ed->conf->common.state_dir, EGRESSD_DB,
		    err);
	/* Denials are committed in groups off the event loop. */
	if ((ed->aq = auditq_new(ed->base, ed->audit, err, sizeof(err))) ==
	    NULL)
		fatalx("audit queue: %s", err);
	if ((ed->dns = resolve_init(ed->base, ed->conf)) == NULL)
		fatalx("cannot start the resolver");
}

static void
egressd_start(void *arg)
{
	struct egressd	*ed = arg;

	log_info("started: control %s, admin %s, run_dir %s",
	    ed->conf->control.path, ed->conf->admin.path, ed->conf->run_dir);
}

static void
egressd_stop(void *arg)
{
	struct egressd	*ed = arg;
	struct channel	*ch;

	while ((ch = TAILQ_FIRST(&ed->channels)) != NULL)
		proxy_channel_close(ch);
}

static void
egressd_close(void *arg)
{
	struct egressd	*ed = arg;

	/* Every denial queued is on disk before egressd exits. */
	auditq_free(ed->aq);
	evdns_base_free(ed->dns, 0);
	if (ed->upstream_ctx != NULL)
		SSL_CTX_free(ed->upstream_ctx);
	proxy_tls_trust_free(ed);
	audit_close(ed->audit);
	evbuffer_free(ed->scratch);
}

/* What each socket serves, by Envelope body field: hello's answer. */
static const uint32_t egressd_serves_control[] = {
	SBX__V1__ENVELOPE__BODY_EGRESS_OPEN,
	SBX__V1__ENVELOPE__BODY_EGRESS_CLOSE,
	0
};
static const uint32_t egressd_serves_admin[] = {
	SBX__V1__ENVELOPE__BODY_METRICS_REQUEST,
	SBX__V1__ENVELOPE__BODY_AUDIT_QUERY,
	SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY,
	0
};

static const struct daemon_sock egressd_socks[] = {
	/* egress_open brings the channel's socket as a descriptor. */
	{ "control", offsetof(struct egressd_conf, control),
	    control_control_socket, NULL, 0, 1,
	    egressd_serves_control },
	{ "admin", offsetof(struct egressd_conf, admin),
	    control_admin_socket, NULL, 0, 0,
	    egressd_serves_admin },
	{ NULL, 0, NULL, NULL, 0, 0, NULL }
};

/* The scrape listener's text: the admin socket's. */
static char *
egressd_metrics_text(void *arg)
{
	return control_metrics(arg);
}

static const struct daemon_main egressd_main = {
	.name = "egressd",
	.conf_file = EGRESSD_CONF_DEFAULT,
	.db = EGRESSD_DB,
	.umask = 077,
	.conf_at = offsetof(struct egressd, conf),
	.base_at = offsetof(struct egressd, base),
	.config = &parse_table,
	.socks = egressd_socks,
	.metrics = egressd_metrics_text,
	.check = egressd_check,
	.init = egressd_init,
	.prepare = egressd_prepare,
	.open = egressd_open,
	.start = egressd_start,
	.stop = egressd_stop,
	.close = egressd_close,
};

int
main(int argc, char *argv[])
{
	struct egressd	 ed;

	memset(&ed, 0, sizeof(ed));
	TAILQ_INIT(&ed.channels);
	return daemon_main(argc, argv, &egressd_main, &ed);
}
