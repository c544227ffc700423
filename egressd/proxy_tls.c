/*
 * proxy_tls.c: CONNECT interception.  egressd never opens a tunnel it
 * cannot look inside: a CONNECT is decided on its host and port (before
 * any DNS query, proxy.c), answered 200, and the sandbox's TLS is then
 * terminated here with a leaf certificate for exactly that host, minted
 * from the task's own CA (ca.c).  Each request inside the tunnel then
 * goes through the same parser, framing checks and decide() as plain
 * HTTP, and is sent to the upstream over a TLS connection of egressd's
 * own, verified against the system trust store plus the CA files named
 * in egressd.yaml (upstream_cas), with the host as SNI and as the name
 * the certificate must carry.
 *
 * Invariants: the SNI the sandbox sends must name the CONNECT host (the
 * handshake is refused with a fatal unrecognized_name alert and an
 * audited sni-mismatch otherwise; the alert is held back until the
 * denial's record is on disk, as a 403 is), every Host inside must name
 * it too,
 * and no request byte reaches an upstream whose certificate did not
 * verify for that host (upstream-tls-failed, 502).
 *
 * Both sides switch from a plain socket bufferevent to an OpenSSL one on
 * the same descriptor, once the plain side has nothing left to say: the
 * 200 has been written (client) or the TCP connect is done (upstream).
 * For speed, records go out at once when nothing is queued
 * (proxy_tls_write_now) and are read ahead, one read per record
 * (proxy_tls_pending keeps libevent reading what OpenSSL holds); libevent
 * still owns every retry, error and timeout.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "log.h"
#include "util.h"
#include "egressd.h"

static const unsigned char proxy_tls_alpn[] = "\x08http/1.1";

static void
proxy_tls_timeouts(struct bufferevent *bev, uint32_t secs)
{
	struct timeval	 tv = { secs, 0 };

	bufferevent_set_timeouts(bev, secs ? &tv : NULL, secs ? &tv : NULL);
}

/*
 * The sandbox's SNI must be the CONNECT host.  A name the CONNECT did not
 * ask for was never decided: rather than finish a handshake for it (with
 * a certificate the client would reject anyway) the handshake is refused
 * with a fatal alert, and the denial is audited here.  No SNI is
 * accepted only for an IP-literal target, where clients send none.
 */
static int
proxy_tls_sni(SSL *ssl, int *al, void *arg)
{
	struct proxy_conn	*c = SSL_get_app_data(ssl);
	BIO			*mem;
	const char		*name, *why = NULL;
	char			 canon[DECIDE_HOST_MAX], detail[600];
	int			 ip;

	(void)arg;
	if (c == NULL)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	if (name == NULL) {
		if (c->tls_ip)
			return SSL_TLSEXT_ERR_OK;
		snprintf(detail, sizeof(detail), "no SNI in the TLS "
		    "handshake for CONNECT %s", c->tls_host);
	} else if (decide_host_canon(name, strlen(name), canon,
	    sizeof(canon), &ip, &why) == -1 ||
	    strcmp(canon, c->tls_host) != 0)
		snprintf(detail, sizeof(detail), "SNI %.200s does not match "
		    "the CONNECT host %s", name, c->tls_host);
	else
		return SSL_TLSEXT_ERR_OK;
	c->sni_denied = 1;
	/*
	 * The alert is the denial's answer, so it must wait for the
	 * record like a 403: OpenSSL writes it into memory instead of
	 * the socket, and proxy_tls_hold_alert() takes it from there.
	 * (Without the memory BIO the alert goes out at once.)
	 */
	if ((mem = BIO_new(BIO_s_mem())) != NULL) {
		SSL_set0_wbio(ssl, mem);
		c->alert_bio = mem;
	}
	proxy_deny_alert(c, RULE_SNI, detail);
	*al = SSL_AD_UNRECOGNIZED_NAME;
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/*
 * The handshake refused for the SNI has failed: keep the alert and a
 * descriptor of the socket, give the socket back to libevent (which
 * closes it through the SSL's write BIO), and answer once the record
 * is in (proxy_deny_release).
 */
static void
proxy_tls_hold_alert(struct proxy_conn *c)
{
	SSL		*ssl = c->client_ssl;
	BIO		*rb;
	char		*p;
	long		 n;
	evutil_socket_t	 fd = bufferevent_getfd(c->cbev);

	if (c->alert_bio != NULL &&
	    (n = BIO_get_mem_data(c->alert_bio, &p)) > 0) {
		c->alert = xmalloc((size_t)n);
		memcpy(c->alert, p, (size_t)n);
		c->alert_len = (size_t)n;
		log_debug("execution %s: a %zu-byte alert waits for its "
		    "record", c->ch->grant->execution_id, c->alert_len);
	}
	if (fd != -1)
		c->alert_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (c->alert_bio != NULL && ssl != NULL &&
	    (rb = SSL_get_rbio(ssl)) != NULL && BIO_up_ref(rb) == 1)
		SSL_set0_wbio(ssl, rb);
	c->alert_bio = NULL;
	bufferevent_free(c->cbev);
	c->cbev = NULL;
	c->client_ssl = NULL;
	if (c->deny_done)
		proxy_deny_release(c);
}

/* HTTP/1.1 only inside a tunnel: that is what egressd parses. */
static int
proxy_tls_alpn_select(SSL *ssl, const unsigned char **out,
    unsigned char *outlen, const unsigned char *in, unsigned int inlen,
    void *arg)
{
	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto((unsigned char **)out, outlen,
	    proxy_tls_alpn, sizeof(proxy_tls_alpn) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	return SSL_TLSEXT_ERR_OK;
}

static void
proxy_tls_client_event(struct bufferevent *bev, short what, void *arg)
{
	struct proxy_conn	*c = arg;
	unsigned long		 e;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		log_debug("execution %s: TLS with the sandbox for %s (%s)",
		    c->ch->grant->execution_id, c->tls_host,
		    SSL_get_version(c->client_ssl));
		proxy_tunnel_ready(c);
		return;
	}
	if (c->deny_alert) {
		proxy_tls_hold_alert(c);
		return;
	}
	if (!c->sni_denied) {
		e = bufferevent_get_openssl_error(c->cbev);
		log_debug("execution %s: TLS handshake with the sandbox for "
		    "%s failed: %s", c->ch->grant->execution_id, c->tls_host,
		    what & BEV_EVENT_TIMEOUT ? "timeout" : e != 0 ?
		    ERR_reason_error_string(e) : "connection closed");
	}
	proxy_conn_free(c);
}

/* The 200 is out: the sandbox's next bytes are its ClientHello. */
static void
proxy_tls_flushed(struct bufferevent *bev, void *arg)
{
	struct proxy_conn	*c = arg;
	const struct egressd_conf *conf = c->ch->ed->conf;
	SSL_CTX			*ctx;
	SSL			*ssl;
	evutil_socket_t		 fd;

	if (evbuffer_get_length(bufferevent_get_output(bev)) > 0)
		return;
	fd = bufferevent_getfd(bev);
	bufferevent_setfd(bev, -1);
	bufferevent_free(bev);
	c->cbev = NULL;
	/* The leaf found at the CONNECT may have been evicted since: the
	 * callbacks are set on whichever context serves the handshake. */
	if ((ctx = ca_leaf_ctx(c->ch->ca, c->tls_host)) != NULL) {
		SSL_CTX_set_tlsext_servername_callback(ctx, proxy_tls_sni);
		SSL_CTX_set_alpn_select_cb(ctx, proxy_tls_alpn_select, NULL);
	}
	if (ctx == NULL || (ssl = SSL_new(ctx)) == NULL) {
		log_warnx("execution %s: cannot serve TLS for %s",
		    c->ch->grant->execution_id, c->tls_host);
		close(fd);
		proxy_conn_free(c);
		return;
	}
	SSL_set_app_data(ssl, c);
	/* proxy_tls_write_now may leave a record to the bufferevent. */
	SSL_set_mode(ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_set_read_ahead(ssl, 1);
	if ((c->cbev = bufferevent_openssl_socket_new(c->ch->ed->base, fd,
	    ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		SSL_free(ssl);
		close(fd);
		proxy_conn_free(c);
		return;
	}
	c->client_ssl = ssl;
	bufferevent_openssl_set_allow_dirty_shutdown(c->cbev, 1);
	bufferevent_setcb(c->cbev, NULL, NULL, proxy_tls_client_event, c);
	proxy_tls_timeouts(c->cbev, conf->header_timeout);
	bufferevent_enable(c->cbev, EV_READ | EV_WRITE);
}

static void
proxy_tls_raw_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	proxy_conn_free(arg);
}

void
proxy_tls_start(struct proxy_conn *c)
{
	struct egressd	*ed = c->ch->ed;

	/* Made at the first CONNECT (see proxy_tls_upstream_ctx); the
	 * files' bytes are no longer needed once it holds them. */
	if (ed->upstream_ctx == NULL) {
		if ((ed->upstream_ctx = proxy_tls_upstream_ctx(ed)) == NULL) {
			proxy_deny(c, RULE_UPSTREAM_TLS, 502, "egressd cannot "
			    "set up TLS to upstreams (system store, "
			    "upstream_cas)");
			return;
		}
		proxy_tls_trust_free(ed);
	}
	if (evbuffer_get_length(bufferevent_get_input(c->cbev)) > 0) {
		/* The handshake must start on a clean stream: bytes sent
		 * before the 200 would be read as plain text. */
		proxy_deny(c, RULE_BAD_REQUEST, 400, "bytes sent after the "
		    "CONNECT before it was answered");
		return;
	}
	/* Mint (or find) the leaf now, so a failure is still a plain
	 * answer the client can read. */
	if (ca_leaf_ctx(c->ch->ca, c->target.host) == NULL) {
		proxy_deny(c, RULE_UPSTREAM_TLS, 502, "cannot mint a "
		    "certificate for the CONNECT host");
		return;
	}
	c->tls = 1;
	snprintf(c->tls_host, sizeof(c->tls_host), "%s", c->target.host);
	c->tls_ip = c->target.ip;
	c->tls_port = c->target.port;
	/* A plain upstream this connection used before is not the
	 * tunnel's. */
	if (c->ubev != NULL) {
		bufferevent_free(c->ubev);
		c->ubev = NULL;
		c->up_host[0] = '\0';
	}
	c->state = PC_TUNNEL;
	bufferevent_disable(c->cbev, EV_READ);
	bufferevent_setcb(c->cbev, NULL, proxy_tls_flushed,
	    proxy_tls_raw_event, c);
	proxy_tls_timeouts(c->cbev, ed->conf->header_timeout);
	evbuffer_add_printf(bufferevent_get_output(c->cbev),
	    "HTTP/1.1 200 Connection established\r\n\r\n");
	bufferevent_enable(c->cbev, EV_WRITE);
}

int
proxy_tls_upstream(struct proxy_conn *c)
{
	SSL			*ssl;
	evutil_socket_t		 fd;
	int			 ok;

	if ((ssl = SSL_new(c->ch->ed->upstream_ctx)) == NULL) {
		proxy_deny(c, RULE_UPSTREAM_TLS, 502, "cannot create a TLS "
		    "connection");
		return -1;
	}
	if (c->tls_ip)
		ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
		    c->tls_host) == 1;
	else
		ok = SSL_set_tlsext_host_name(ssl, c->tls_host) == 1 &&
		    SSL_set1_host(ssl, c->tls_host) == 1;
	if (!ok) {
		SSL_free(ssl);
		proxy_deny(c, RULE_UPSTREAM_TLS, 502, "cannot set the name to "
		    "verify");
		return -1;
	}
	SSL_set_mode(ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_set_read_ahead(ssl, 1);
	fd = bufferevent_getfd(c->ubev);
	bufferevent_setfd(c->ubev, -1);
	bufferevent_free(c->ubev);
	if ((c->ubev = bufferevent_openssl_socket_new(c->ch->ed->base, fd,
	    ssl, BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		SSL_free(ssl);
		close(fd);
		proxy_deny(c, RULE_UPSTREAM_TLS, 502, "cannot start TLS "
		    "upstream");
		return -1;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(c->ubev, 1);
	c->up_tls = 1;
	return 0;
}

void
proxy_tls_upstream_failed(struct proxy_conn *c)
{
	SSL		*ssl = bufferevent_openssl_get_ssl(c->ubev);
	long		 vr = ssl != NULL ? SSL_get_verify_result(ssl) :
			    X509_V_OK;
	unsigned long	 e = bufferevent_get_openssl_error(c->ubev);
	char		 detail[600];

	c->ch->ed->m.upstream_errors++;
	if (vr != X509_V_OK)
		snprintf(detail, sizeof(detail), "the certificate of %s:%u "
		    "does not verify: %s", c->tls_host, c->tls_port,
		    X509_verify_cert_error_string(vr));
	else
		snprintf(detail, sizeof(detail), "TLS handshake with %s:%u "
		    "failed: %s", c->tls_host, c->tls_port, e != 0 &&
		    ERR_reason_error_string(e) != NULL ?
		    ERR_reason_error_string(e) : "connection closed");
	proxy_deny(c, RULE_UPSTREAM_TLS, 502, detail);
}

void
proxy_tls_shutdown(struct proxy_conn *c)
{
	if (c->client_ssl != NULL && SSL_is_init_finished(c->client_ssl)) {
		(void)SSL_shutdown(c->client_ssl);
		ERR_clear_error();
	}
}

void
proxy_tls_clear(struct proxy_conn *c)
{
	/* The SSL went with the bufferevent that owned it. */
	c->client_ssl = NULL;
}

/*
 * libevent's TLS bufferevent writes on the loop pass after data is queued,
 * arming EPOLLOUT for it and disarming it after: two epoll_ctl calls and a
 * pass per message.  When nothing is queued the record can go out at once
 * instead.  If the socket does not take it, OpenSSL keeps the record and
 * wants the same bytes again on the retry: they stay at the head of data,
 * the caller queues them (the first chain unmoved, and the SSL accepts a
 * moved buffer anyway), and the bufferevent's own SSL_write retries them.
 * An error is met the same way, by the bufferevent's write.
 */
void
proxy_tls_write_now(struct bufferevent *bev, struct evbuffer *data,
    int coalesce)
{
	SSL			*ssl = bufferevent_openssl_get_ssl(bev);
	struct evbuffer_iovec	 v;
	size_t			 len;
	int			 n;

	if (ssl == NULL || !SSL_is_init_finished(ssl) ||
	    evbuffer_get_length(bufferevent_get_output(bev)) > 0)
		return;
	while ((len = evbuffer_get_length(data)) > 0) {
		if (len > SSL3_RT_MAX_PLAIN_LENGTH)
			len = SSL3_RT_MAX_PLAIN_LENGTH;
		if (coalesce)
			v.iov_base = evbuffer_pullup(data, (ssize_t)len);
		else if (evbuffer_peek(data, -1, NULL, &v, 1) < 1)
			return;
		else if (v.iov_len < len)
			len = v.iov_len;
		if (v.iov_base == NULL)
			return;
		ERR_clear_error();
		if ((n = SSL_write(ssl, v.iov_base, (int)len)) <= 0) {
			ERR_clear_error();
			return;
		}
		evbuffer_drain(data, (size_t)n);
	}
}

/*
 * With read-ahead (one read per record, not two), OpenSSL may hold whole
 * records it has read from the socket but not yet decrypted.  libevent's
 * TLS bufferevent stops reading once SSL_pending() is 0 and waits for the
 * socket, which may have nothing more to say: have it read again on the
 * next loop pass.  Called wherever reading starts or resumes.
 */
void
proxy_tls_pending(struct bufferevent *bev)
{
	SSL	*ssl;

	if (bev == NULL || (ssl = bufferevent_openssl_get_ssl(bev)) == NULL)
		return;
	if (SSL_has_pending(ssl) && (bufferevent_get_enabled(bev) & EV_READ))
		event_active(&bev->ev_read, EV_READ, 1);
}

/*
 * The trust for upstream TLS: the system store, as OpenSSL's default
 * paths name it, with its directory read by issuer hash when a chain
 * needs one instead of its whole bundle parsed at start-up
 * (SSL_CTX_set_default_verify_paths loads every certificate of the
 * default file: on Debian, cert.pem is the bundle update-ca-certificates
 * builds from that same directory's certificates, 0.9 MiB of heap in
 * egressd for the few CAs its upstreams use), plus the files of
 * upstream_cas.  An issuer read is kept in the store for the next
 * handshake.  SSL_CERT_DIR still replaces the directory, and
 * SSL_CERT_FILE, where it is set, is loaded as the default call would.
 *
 * The context is made at the first CONNECT, not at start-up: making it
 * (or parsing one certificate) initialises OpenSSL, about 2.5 MiB of
 * egressd's idle RSS (bench/README.md) that an egressd serving no TLS
 * yet need not hold.  So that nothing is lost: the files are read at
 * start-up, before the privilege drop, and only those bytes are loaded
 * later (a file
 * changed or made unreadable since is not looked at again); and the
 * context is made once at start-up in a child process, which exits, so
 * that a CA file that does not load still stops egressd at start naming
 * it.  The child does not read openssl.cnf (it checks the CA files;
 * the context made for use does).
 */
#define PROXY_TLS_PEM_MAX	(8 << 20)

static int
proxy_tls_pem_add(struct egressd *ed, const char *key, const char *name,
    char *err, size_t errlen)
{
	struct tls_pem	*p;
	char		*pem;
	size_t		 len;

	if ((pem = read_file(name, PROXY_TLS_PEM_MAX, &len)) == NULL) {
		snprintf(err, errlen, "%s: %s: %s", key, name,
		    errno == EFBIG ? "larger than 8 MiB" : errno == EINVAL ?
		    "not a regular file" : strerror(errno));
		return -1;
	}
	ed->upstream_pems = xreallocarray(ed->upstream_pems,
	    ed->nupstream_pems + 1, sizeof(*ed->upstream_pems));
	p = &ed->upstream_pems[ed->nupstream_pems++];
	(void)xasprintf(&p->name, "%s: %s", key, name);
	p->pem = pem;
	p->len = len;
	return 0;
}

int
proxy_tls_trust_read(struct egressd *ed, char *err, size_t errlen)
{
	const struct egressd_conf	*conf = ed->conf;
	const char			*file;

	if ((file = secure_getenv(X509_get_default_cert_file_env())) !=
	    NULL && proxy_tls_pem_add(ed, X509_get_default_cert_file_env(),
	    file, err, errlen) == -1)
		return -1;
	for (size_t i = 0; i < conf->nupstream_cas; i++)
		if (proxy_tls_pem_add(ed, "upstream_cas",
		    conf->upstream_cas[i], err, errlen) == -1)
			return -1;
	return 0;
}

void
proxy_tls_trust_free(struct egressd *ed)
{
	for (size_t i = 0; i < ed->nupstream_pems; i++) {
		free(ed->upstream_pems[i].name);
		free(ed->upstream_pems[i].pem);
	}
	free(ed->upstream_pems);
	ed->upstream_pems = NULL;
	ed->nupstream_pems = 0;
}

/* Every certificate and CRL of p into ctx's store, as
 * SSL_CTX_load_verify_file does for a file: at least one, else -1. */
static int
proxy_tls_pem_load(SSL_CTX *ctx, const struct tls_pem *p)
{
	STACK_OF(X509_INFO)	*infos = NULL;
	X509_STORE		*st = SSL_CTX_get_cert_store(ctx);
	X509_INFO		*xi;
	BIO			*bio;
	int			 n = 0, rc = 0;

	if (p->len > INT_MAX ||
	    (bio = BIO_new_mem_buf(p->pem, (int)p->len)) == NULL)
		return -1;
	infos = PEM_X509_INFO_read_bio(bio, NULL, NULL, "");
	BIO_free(bio);
	if (infos == NULL)
		return -1;
	for (int i = 0; i < sk_X509_INFO_num(infos) && rc == 0; i++) {
		xi = sk_X509_INFO_value(infos, i);
		if (xi->x509 != NULL) {
			if (X509_STORE_add_cert(st, xi->x509) != 1)
				rc = -1;
			n++;
		}
		if (xi->crl != NULL) {
			if (X509_STORE_add_crl(st, xi->crl) != 1)
				rc = -1;
			n++;
		}
	}
	sk_X509_INFO_pop_free(infos, X509_INFO_free);
	return rc == 0 && n > 0 ? 0 : -1;
}

struct ssl_ctx_st *
proxy_tls_upstream_ctx(const struct egressd *ed)
{
	SSL_CTX		*ctx;
	const char	*dir;

	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
		log_warnx("cannot create the upstream TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* An upstream that asks to renegotiate (TLS 1.2) is refused: no
	 * second handshake, and no new certificate, mid-connection.
	 * Buffers stay for the connection's life, not freed and
	 * allocated again between records. */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_clear_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_alpn_protos(ctx, proxy_tls_alpn,
	    sizeof(proxy_tls_alpn) - 1);
	if ((dir = secure_getenv(X509_get_default_cert_dir_env())) == NULL)
		dir = X509_get_default_cert_dir();
	if (SSL_CTX_load_verify_dir(ctx, dir) != 1) {
		log_warnx("cannot use the system trust store %s", dir);
		goto fail;
	}
	for (size_t i = 0; i < ed->nupstream_pems; i++)
		if (proxy_tls_pem_load(ctx, &ed->upstream_pems[i]) == -1) {
			log_warnx("%s: not a PEM CA file",
			    ed->upstream_pems[i].name);
			goto fail;
		}
	return ctx;
fail:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return NULL;
}

int
proxy_tls_upstream_check(const struct egressd *ed)
{
	pid_t	 pid;
	int	 status;

	if ((pid = fork()) == -1) {
		log_warn("fork");
		return -1;
	}
	if (pid == 0) {
		/* _exit: nothing of the parent's is flushed or freed. */
		if (OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, NULL) != 1 ||
		    proxy_tls_upstream_ctx(ed) == NULL)
			_exit(1);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR) {
			log_warn("waitpid");
			return -1;
		}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}
