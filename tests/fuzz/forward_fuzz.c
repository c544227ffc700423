/*
 * forward_fuzz.c: libFuzzer target for what egressd forwards (invariant
 * 12: what egressd forwards is read by the upstream as egressd decided
 * it).  Requests, seeded from the differential corpus
 * (tests/differential/corpus.py --seeds), go through egressd's parser and
 * decision the way proxy.c drives them on a plain channel: the strict
 * head check, libhttp-parser with egressd's framing checks, the target
 * and its agreement with Host, decide_request against a fixed policy
 * before the body and again with the real sizes, one request after
 * another on the connection.  For every request the decision allows, the
 * head egressd would send (http_req_head) with its body must parse again,
 * with the same parser and checks, as exactly one whole request with the
 * same method, target, Host and body length, that the policy still
 * allows; and every header name in it must be an RFC 9110 token.  A
 * violation aborts with what broke, so libFuzzer keeps the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "egressd/egressd.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* The seeds are written for this host and port (Makefile, fuzz-seeds). */
#define FUZZ_HOST	"a.internal"
#define FUZZ_PORT	8080

static char *fuzz_methods[] = {
	"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"
};
static char *fuzz_paths[] = { "/v1/" };
static char *fuzz_cidrs[] = { "127.0.0.0/8" };

static Sbx__V1__AllowRule	 fuzz_rule = SBX__V1__ALLOW_RULE__INIT;
static Sbx__V1__AllowRule	*fuzz_rules[] = { &fuzz_rule };
static Sbx__V1__Network		 fuzz_net = SBX__V1__NETWORK__INIT;
static Sbx__V1__Policy		 fuzz_pol = SBX__V1__POLICY__INIT;

static void
fuzz_policy(void)
{
	if (fuzz_pol.network != NULL)
		return;
	fuzz_rule.host = (char *)FUZZ_HOST;
	fuzz_rule.methods = fuzz_methods;
	fuzz_rule.n_methods = sizeof(fuzz_methods) / sizeof(fuzz_methods[0]);
	fuzz_rule.paths = fuzz_paths;
	fuzz_rule.n_paths = 1;
	fuzz_rule.cidrs = fuzz_cidrs;
	fuzz_rule.n_cidrs = 1;
	fuzz_rule.port = FUZZ_PORT;
	fuzz_rule.max_request_kb = 64;
	fuzz_net.default_action = (char *)"deny";
	fuzz_net.allow = fuzz_rules;
	fuzz_net.n_allow = 1;
	fuzz_net.max_out_kb = 1048576;
	fuzz_pol.network = &fuzz_net;
}

struct fuzz_conn {
	struct decide_target	 t;
	int			 have_target;
};

static void __attribute__((noreturn))
fuzz_broken(const char *what, const char *head, size_t len)
{
	fprintf(stderr, "forward_fuzz: %s in the forwarded request:\n%.*s\n",
	    what, (int)(len > 2048 ? 2048 : len), head);
	abort();
}

/* proxy_on_head for a plain (not TLS, not CONNECT) channel. */
static int
fuzz_on_head(struct http_req *r, void *arg)
{
	struct fuzz_conn	*c = arg;
	const struct http_hdr	*h, *cl;
	struct decide_target	 ht;
	struct decide_req	 dr;
	struct decision		 d;
	const char		*why;

	if (r->p.method == HTTP_CONNECT || r->url == NULL ||
	    r->url_len > DECIDE_URL_MAX)
		return -1;
	if (decide_parse_target(r->url, r->url_len, 0, &c->t, &why) == -1)
		return -1;
	c->have_target = 1;
	if ((h = http_req_header(r, "Host", NULL)) != NULL) {
		if (decide_parse_authority(h->value, h->vlen, 0, &ht,
		    &why) == -1)
			return -1;
		if (strcmp(ht.host, c->t.host) != 0 || ht.port != c->t.port)
			return -1;
	}
	memset(&dr, 0, sizeof(dr));
	dr.method = r->method;
	dr.target = &c->t;
	dr.url_len = r->url_len;
	if ((cl = http_req_header(r, "Content-Length", NULL)) != NULL)
		dr.body_bytes = strtoull(cl->value, NULL, 10);
	decide_request(&fuzz_pol, &dr, 0, &d);
	if (d.rule != NULL)
		return -1;
	r->max_body = decide_max_request(d.allow);
	return 0;
}

static int
fuzz_tchar(unsigned char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
	    (ch >= 'A' && ch <= 'Z') || strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

/* Every field line of the head is NAME ":" with NAME a token. */
static void
fuzz_check_names(const char *head, size_t len)
{
	const char	*p = memchr(head, '\n', len), *end = head + len;

	while (p != NULL && p + 1 < end) {
		const char	*line = p + 1, *eol;
		size_t		 n = 0;

		eol = memchr(line, '\r', (size_t)(end - line));
		if (eol == NULL)
			eol = end;
		while (line + n < eol && line[n] != ':') {
			if (!fuzz_tchar((unsigned char)line[n]))
				fuzz_broken("a header name that is not a token",
				    head, len);
			n++;
		}
		if (n == 0 || line + n == eol)
			fuzz_broken("a field line without a name and colon",
			    head, len);
		p = memchr(eol, '\n', (size_t)(end - eol));
	}
}

/* The request as sent upstream, parsed again. */
static void
fuzz_reparse(const struct http_req *r, const struct decide_target *t,
    struct evbuffer *head)
{
	struct evbuffer		*wire = evbuffer_new();
	struct http_req		 again;
	struct decide_target	 at;
	const struct http_hdr	*h;
	char			 host[DECIDE_HOST_MAX + 16], *data;
	const char		*why;
	size_t			 len, hlen = evbuffer_get_length(head), n;
	long			 used;

	evbuffer_add(wire, evbuffer_pullup(head, -1), hlen);
	evbuffer_add(wire, "\r\n", 2);
	evbuffer_add(wire, evbuffer_pullup(r->body, -1),
	    evbuffer_get_length(r->body));
	len = evbuffer_get_length(wire);
	data = (char *)evbuffer_pullup(wire, -1);
	fuzz_check_names(data, hlen);
	if (http_head_check(data, hlen + 2, &why) == -1)
		fuzz_broken(why, data, hlen);
	http_req_init(&again, 1000);
	again.max_body = UINT64_MAX;
	used = http_req_feed(&again, data, len);
	if (used < 0)
		fuzz_broken(again.why != NULL ? again.why : "a parse error",
		    data, hlen);
	if (!again.complete || (size_t)used != len)
		fuzz_broken("not exactly one whole request", data, hlen);
	if (strcmp(again.method, r->method) != 0)
		fuzz_broken("another method", data, hlen);
	if (again.url == NULL || strcmp(again.url, t->path) != 0)
		fuzz_broken("another target", data, hlen);
	h = http_req_header(&again, "Host", &n);
	if (t->ip == 6)
		snprintf(host, sizeof(host), "[%s]", t->host);
	else
		snprintf(host, sizeof(host), "%s", t->host);
	if (t->port != 80)
		snprintf(host + strlen(host), sizeof(host) - strlen(host),
		    ":%u", t->port);
	if (n != 1 || strcmp(h->value, host) != 0)
		fuzz_broken("another Host", data, hlen);
	http_req_header(&again, "Content-Length", &n);
	if (n > 1 || again.chunked || http_req_header(&again,
	    "Transfer-Encoding", NULL) != NULL)
		fuzz_broken("another framing", data, hlen);
	if (again.body_bytes != r->body_bytes)
		fuzz_broken("another body length", data, hlen);
	/* What the upstream reads, the policy allows. */
	if (decide_parse_authority(h->value, h->vlen, 0, &at, &why) == -1 ||
	    strcmp(at.host, t->host) != 0 || at.port != t->port)
		fuzz_broken("a Host egressd would not accept", data, hlen);
	if (!decide_path(&fuzz_rule, again.url, &why))
		fuzz_broken("a target the rule does not allow", data, hlen);
	http_req_clear(&again);
	evbuffer_free(wire);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct fuzz_conn	 c;
	struct http_req		 r;
	struct evbuffer		*head = evbuffer_new();
	struct decide_req	 dr;
	struct decision		 d;
	const char		*p = (const char *)data, *end, *why;
	size_t			 off = 0, n;
	long			 used;

	fuzz_policy();
	memset(&c, 0, sizeof(c));
	http_req_init(&r, 64);
	r.on_head = fuzz_on_head;
	r.arg = &c;
	/* Requests one after another, as on a kept-alive connection: the
	 * head alone first (proxy.c's PC_IDLE), then what follows. */
	while (off < len) {
		end = memmem(p + off, len - off, "\r\n\r\n", 4);
		if (end == NULL)
			break;
		n = (size_t)(end - (p + off)) + 4;
		if (n > 16 * 1024 || http_head_check(p + off, n, &why) == -1)
			break;
		used = http_req_feed(&r, p + off, n);
		if (used < 0)
			break;
		off += (size_t)used;
		if (!r.complete && off < len) {
			used = http_req_feed(&r, p + off, len - off);
			if (used < 0)
				break;
			off += (size_t)used;
		}
		if (!r.complete)
			break;
		/* proxy_request_ready: decide again with the real sizes. */
		evbuffer_drain(head, evbuffer_get_length(head));
		http_req_head(&r, &c.t, NULL, head);
		memset(&dr, 0, sizeof(dr));
		dr.method = r.method;
		dr.target = &c.t;
		dr.url_len = r.url_len;
		dr.body_bytes = r.body_bytes;
		dr.out_bytes = evbuffer_get_length(head) + 2 + r.body_bytes;
		decide_request(&fuzz_pol, &dr, 0, &d);
		if (d.rule != NULL)
			break;
		fuzz_reparse(&r, &c.t, head);
		decide_target_clear(&c.t);
		c.have_target = 0;
		if (!r.keep_alive)
			break;
		http_req_reset(&r);
	}
	if (c.have_target)
		decide_target_clear(&c.t);
	http_req_clear(&r);
	evbuffer_free(head);
	return 0;
}
