/*
 * egressd.c: main.  Reads like the daemon's table of contents: options,
 * config (every error reported, -n stops there), policyd's public key,
 * the state and run directories, the sockets, the audit log, the
 * resolver, the privilege drop, the event loop.  After the drop egressd
 * holds only its own files, the outbound network and, in memory, the
 * per-task CA keys.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <openssl/ssl.h>
#include <sodium.h>

#include "audit.h"
#include "auditq.h"
#include "daemon.h"
#include "log.h"
#include "sign.h"
#include "util.h"
#include "yaml.h"
#include "egressd.h"

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: egressd [-dnv] [-f file]\n");
	exit(1);
}

static void
egressd_signal(evutil_socket_t sig, short what, void *arg)
{
	struct egressd	*ed = arg;

	(void)what;
	log_info("exiting on signal %d", (int)sig);
	event_base_loopbreak(ed->base);
}

int
main(int argc, char *argv[])
{
	struct daemon_opts opts;
	struct egressd	 ed;
	struct yerrs	 errs = { NULL, 0 };
	struct event	*sigs[2];
	struct channel	*ch;
	const int	 signos[2] = { SIGTERM, SIGINT };
	char		 err[512];

	daemon_getopt(argc, argv, EGRESSD_CONF_DEFAULT, &opts, usage);
	log_init("egressd", 1, opts.noaction ? 0 : opts.verbose);

	memset(&ed, 0, sizeof(ed));
	TAILQ_INIT(&ed.channels);
	if ((ed.conf = parse_config(opts.file, &errs)) == NULL)
		return daemon_config_errors("egressd", opts.file, &errs);
	yerrs_free(&errs);
	if (sign_pubkey_load(ed.conf->public_key, ed.pk, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "egressd: public_key %s: %s\n",
		    ed.conf->public_key, err);
		parse_config_free(ed.conf);
		return 1;
	}
	if (opts.noaction) {
		/* The upstream CA files must load, not only be readable. */
		if ((ed.upstream_ctx = proxy_tls_upstream_ctx(ed.conf)) ==
		    NULL) {
			fprintf(stderr, "egressd: cannot set up TLS to "
			    "upstreams (system store, upstream_cas)\n");
			parse_config_free(ed.conf);
			return 1;
		}
		SSL_CTX_free(ed.upstream_ctx);
		printf("configuration OK\n");
		parse_config_free(ed.conf);
		return 0;
	}
	if (sodium_init() == -1)
		fatalx("libsodium cannot start");
	/* Where a channel's peer is checked (proxy_peer.c). */
	if (proxy_peer_init(err, sizeof(err)) == -1)
		fatalx("%s", err);
	signal(SIGPIPE, SIG_IGN);
	umask(077);
	daemon_state_dir(ed.conf->state_dir, ed.conf->user, ed.conf->uid,
	    ed.conf->gid);
	if (ed.conf->run_dir != NULL)
		log_warnx("%s: run_dir is no longer used: each channel's "
		    "socket comes from launchd-sbx as a descriptor",
		    ed.conf->file);

	if ((ed.base = event_base_new()) == NULL ||
	    (ed.scratch = evbuffer_new()) == NULL)
		fatalx("cannot create the event loop");
	if ((ed.ctl = control_start(&ed)) == NULL)
		fatalx("cannot listen on the sockets");
	if (!opts.debug) {
		if (daemon(1, 0) == -1)
			fatal("daemon");
		log_foreground(0);
		if (event_reinit(ed.base) == -1)
			fatalx("cannot reinitialise the event loop");
	}
	/* Every configured path is absolute (cfg_dir), so the database can
	 * be named relative to the state directory, as in every daemon. */
	if (chdir(ed.conf->state_dir) == -1)
		fatal("chdir %s", ed.conf->state_dir);
	if ((ed.audit = audit_open(EGRESSD_DB, "egressd", err,
	    sizeof(err))) == NULL)
		fatalx("%s/%s: %s", ed.conf->state_dir, EGRESSD_DB, err);
	daemon_chown_db(EGRESSD_DB, ed.conf->state_dir, ed.conf->user,
	    ed.conf->uid, ed.conf->gid);
	/* Denials are committed in groups off the event loop. */
	if ((ed.aq = auditq_new(ed.base, ed.audit, err, sizeof(err))) == NULL)
		fatalx("audit queue: %s", err);
	if ((ed.dns = resolve_init(ed.base, ed.conf)) == NULL)
		fatalx("cannot start the resolver");
	if ((ed.upstream_ctx = proxy_tls_upstream_ctx(ed.conf)) == NULL)
		fatalx("cannot set up TLS to upstreams (system store, "
		    "upstream_cas)");
	daemon_drop(ed.conf->file, ed.conf->user, ed.conf->uid, ed.conf->gid);

	for (int i = 0; i < 2; i++) {
		if ((sigs[i] = evsignal_new(ed.base, signos[i],
		    egressd_signal, &ed)) == NULL ||
		    event_add(sigs[i], NULL) == -1)
			fatalx("cannot handle signal %d", signos[i]);
	}
	log_info("started: control %s, admin %s, run_dir %s",
	    ed.conf->control.path, ed.conf->admin.path, ed.conf->run_dir);

	if (event_base_dispatch(ed.base) == -1)
		log_warnx("event loop failed");

	while ((ch = TAILQ_FIRST(&ed.channels)) != NULL)
		proxy_channel_close(ch);
	control_stop(ed.ctl);
	/* Every denial queued is on disk before egressd exits. */
	auditq_free(ed.aq);
	for (int i = 0; i < 2; i++)
		event_free(sigs[i]);
	evdns_base_free(ed.dns, 0);
	if (ed.upstream_ctx != NULL)
		SSL_CTX_free(ed.upstream_ctx);
	audit_close(ed.audit);
	parse_config_free(ed.conf);
	evbuffer_free(ed.scratch);
	event_base_free(ed.base);
	log_info("stopped");
	return 0;
}
