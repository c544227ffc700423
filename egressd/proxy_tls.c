/*
 * proxy_tls.c: CONNECT interception -- not built yet.  A CONNECT is
 * decided on host and port (proxy.c) and, when allowed, still refused
 * here with bad-request: egressd never opens a tunnel it cannot look
 * inside.  The interface (proxy_tls_start, proxy_tls_upstream and the
 * verified upstream context) is what the interception will fill in, with
 * leaf certificates from ca.c.
 */
#include <stdlib.h>

#include "egressd.h"

void
proxy_tls_start(struct proxy_conn *c)
{
	proxy_deny(c, RULE_BAD_REQUEST, 400, "CONNECT is not available");
}

void
proxy_tls_upstream(struct proxy_conn *c)
{
	proxy_send_request(c);
}

void
proxy_tls_upstream_failed(struct proxy_conn *c, const char *detail)
{
	proxy_deny(c, RULE_UPSTREAM, 502, detail);
}

void
proxy_tls_clear(struct proxy_conn *c)
{
	(void)c;
}

struct ssl_ctx_st *
proxy_tls_upstream_ctx(const struct egressd_conf *conf)
{
	(void)conf;
	return NULL;
}
