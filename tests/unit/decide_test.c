/*
 * decide_test.c: egressd's pure decision (decide.c) and address
 * classification (resolve.c): host canonicalisation, URL parsing, path
 * rules and the canonical path form, each denial of decide_request in its
 * order, which headers are stripped or refused, redirect targets, which
 * addresses a rule lets egressd dial; and the HTTP parser's checks
 * (proxy_http.c): framing, field names, trailers, the rebuilt head.
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <event2/buffer.h>

#include "policy.h"
#include "util.h"
#include "egressd/egressd.h"

static char *
canon(const char *in, int *ip)
{
	static char	 out[DECIDE_HOST_MAX];
	const char	*why;
	int		 dummy;

	if (decide_host_canon(in, strlen(in), out, sizeof(out),
	    ip != NULL ? ip : &dummy, &why) == -1)
		return NULL;
	return out;
}

Test(decide, host_canonical_forms)
{
	int	 ip;

	cr_assert_str_eq(canon("API.Fx-Rates.Internal", NULL),
	    "api.fx-rates.internal");
	cr_assert_str_eq(canon("api.fx-rates.internal.", NULL),
	    "api.fx-rates.internal");
	cr_assert_str_eq(canon("bücher.example", NULL),
	    "xn--bcher-kva.example");
	cr_assert_str_eq(canon("BÜCHER.example", NULL),
	    "xn--bcher-kva.example");
	cr_assert_str_eq(canon("[::1]", &ip), "::1");
	cr_assert_eq(ip, 6);
	cr_assert_str_eq(canon("[0:0::1]", NULL), "::1");
	cr_assert_str_eq(canon("10.0.0.1", &ip), "10.0.0.1");
	cr_assert_eq(ip, 4);
}

/* Is a library whose file name has name mapped in this process? */
static int
mapped(const char *name)
{
	FILE	*f;
	char	 line[1024];
	int	 found = 0;

	cr_assert_not_null(f = fopen("/proc/self/maps", "re"));
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

/* libidn2 is loaded at the first non-ASCII host (idn.c), not linked: an
 * egressd whose hosts are ASCII never maps it or libunistring. */
Test(decide, idn_loaded_only_for_a_unicode_host)
{
	char	 err[512];

	cr_assert_not(mapped("libidn2"), "libidn2 mapped before any host");
	cr_assert_str_eq(canon("api.fx-rates.internal", NULL),
	    "api.fx-rates.internal");
	cr_assert_not(mapped("libidn2"), "libidn2 mapped for an ASCII host");
	/* The start-up check loads it and unloads it again. */
	cr_assert_eq(idn_check(NULL, err, sizeof(err)), 0, "%s", err);
	cr_assert_not(idn_loaded());
	cr_assert_not(mapped("libidn2"), "libidn2 left mapped by the check");
	cr_assert_not(mapped("libunistring"));
	cr_assert_str_eq(canon("bücher.example", NULL),
	    "xn--bcher-kva.example");
	cr_assert(idn_loaded());
	cr_assert(mapped("libidn2"));
	cr_assert_str_eq(canon("BÜCHER.example", NULL),
	    "xn--bcher-kva.example");
}

Test(decide, idn_check_names_what_is_wrong)
{
	char	 err[512];

	cr_assert_eq(idn_check("libsbx-no-such-idn.so.9", err, sizeof(err)),
	    -1);
	cr_assert(strstr(err, "cannot load libsbx-no-such-idn.so.9") != NULL,
	    "%s", err);
	/* A library that loads but is not libidn2. */
	cr_assert_eq(idn_check("libc.so.6", err, sizeof(err)), -1);
	cr_assert(strstr(err, "libc.so.6 has no idn2_lookup_u8") != NULL,
	    "%s", err);
	cr_assert_not(idn_loaded());
}

Test(decide, host_refusals)
{
	cr_assert_null(canon("", NULL));
	cr_assert_null(canon("user@host", NULL));
	cr_assert_null(canon("a\\b", NULL));
	cr_assert_null(canon("ex%61mple.com", NULL));
	cr_assert_null(canon("a..b", NULL));
	cr_assert_null(canon(".a", NULL));
	cr_assert_null(canon("a b", NULL));
	cr_assert_null(canon("0x7f.0.0.1", NULL));
	cr_assert_null(canon("0177.0.0.1", NULL));
	cr_assert_null(canon("2130706433", NULL));
	cr_assert_null(canon("127.1", NULL));
	cr_assert_null(canon("127.0.0.01", NULL));
	cr_assert_null(canon("256.0.0.1", NULL));
	cr_assert_null(canon("example.0x10", NULL));
	cr_assert_null(canon("[fe80::1%eth0]", NULL));
	cr_assert_null(canon("[::1", NULL));
}

static int
target(const char *url, struct decide_target *t)
{
	const char	*why;

	return decide_parse_target(url, strlen(url), 0, t, &why);
}

Test(decide, targets)
{
	struct decide_target	 t;

	cr_assert_eq(target("http://API.x.internal:8080/v1/a?b=c", &t), 0);
	cr_assert_str_eq(t.host, "api.x.internal");
	cr_assert_eq(t.port, 8080);
	cr_assert_str_eq(t.path, "/v1/a?b=c");
	decide_target_clear(&t);
	cr_assert_eq(target("http://x.internal", &t), 0);
	cr_assert_eq(t.port, 80);
	cr_assert_str_eq(t.path, "/");
	decide_target_clear(&t);
	cr_assert_eq(target("http://x.internal?q", &t), 0);
	cr_assert_str_eq(t.path, "/?q");
	decide_target_clear(&t);
	cr_assert_eq(target("http://[::1]:81/", &t), 0);
	cr_assert_str_eq(t.host, "::1");
	cr_assert_eq(t.port, 81);
	decide_target_clear(&t);

	cr_assert_eq(target("http://u:p@x.internal/", &t), -1);
	cr_assert_eq(target("http://x.internal\\@evil/", &t), -1);
	cr_assert_eq(target("http://x.internal/#frag", &t), -1);
	cr_assert_eq(target("http://x.internal:/", &t), -1);
	cr_assert_eq(target("http://x.internal:080/", &t), -1);
	cr_assert_eq(target("http://x.internal:65536/", &t), -1);
	cr_assert_eq(target("http://a:1:2/", &t), -1);
	cr_assert_eq(target("https://x.internal/", &t), -1);
	cr_assert_eq(target("/v1/a", &t), -1);
	cr_assert_eq(target("ftp://x/", &t), -1);
	cr_assert_eq(target("http://x.internal/p\xc3\xa4th", &t), -1);
}

static Sbx__V1__Policy *
pol_new(void)
{
	Sbx__V1__Policy		*p = policy_new();
	Sbx__V1__AllowRule	*r;

	p->network->allow = xcalloc(2, sizeof(*p->network->allow));
	r = xcalloc(1, sizeof(*r));
	sbx__v1__allow_rule__init(r);
	r->host = xstrdup("api.fx-rates.internal");
	r->methods = xcalloc(1, sizeof(char *));
	r->methods[0] = xstrdup("GET");
	r->n_methods = 1;
	r->paths = xcalloc(2, sizeof(char *));
	r->paths[0] = xstrdup("/v1/");
	r->paths[1] = xstrdup("/v2/rates");
	r->n_paths = 2;
	r->cidrs = xcalloc(1, sizeof(char *));
	r->cidrs[0] = xstrdup("127.0.0.0/8");
	r->n_cidrs = 1;
	p->network->allow[0] = r;
	p->network->n_allow = 1;
	p->network->max_out_kb = 4;
	return p;
}

static const char *
rule_of(const Sbx__V1__Policy *p, const char *method, const char *url,
    uint64_t body, uint64_t out, uint64_t used, int *status)
{
	static struct decision	 d;
	struct decide_target	 t;
	struct decide_req	 r;

	cr_assert_eq(target(url, &t), 0, "%s", url);
	memset(&r, 0, sizeof(r));
	r.method = method;
	r.target = &t;
	r.url_len = strlen(url);
	r.body_bytes = body;
	r.out_bytes = out;
	decide_request(p, &r, used, &d);
	decide_target_clear(&t);
	if (status != NULL)
		*status = d.status;
	return d.rule;
}

Test(decide, request_rules_in_order)
{
	Sbx__V1__Policy	*p = pol_new();
	char		 url[3000];
	int		 st;

	cr_assert_null(rule_of(p, "GET", "http://api.fx-rates.internal/v1/r",
	    0, 100, 0, NULL));
	cr_assert_str_eq(rule_of(p, "GET", "http://evil.example/v1/r", 0, 100,
	    0, &st), RULE_HOST);
	cr_assert_eq(st, 403);
	cr_assert_str_eq(rule_of(p, "GET",
	    "http://api.fx-rates.internal:8080/v1/r", 0, 100, 0, NULL),
	    RULE_HOST);
	cr_assert_str_eq(rule_of(p, "POST",
	    "http://api.fx-rates.internal/v1/r", 0, 100, 0, NULL),
	    RULE_METHOD);
	/* Host before method: a denied host never learns about methods. */
	cr_assert_str_eq(rule_of(p, "POST", "http://evil.example/", 0, 100, 0,
	    NULL), RULE_HOST);
	memset(url, 'a', sizeof(url) - 1);
	url[sizeof(url) - 1] = '\0';
	memcpy(url, "http://api.fx-rates.internal/v1/?", 33);
	cr_assert_str_eq(rule_of(p, "GET", url, 0, 100, 0, &st), RULE_URL);
	cr_assert_eq(st, 414);
	cr_assert_str_eq(rule_of(p, "GET", "http://api.fx-rates.internal/v3/",
	    0, 100, 0, NULL), RULE_PATH);
	cr_assert_str_eq(rule_of(p, "GET",
	    "http://api.fx-rates.internal/v1/../admin", 0, 100, 0, NULL),
	    RULE_PATH);
	cr_assert_str_eq(rule_of(p, "GET",
	    "http://api.fx-rates.internal/v1/%2E%2e/admin", 0, 100, 0, NULL),
	    RULE_PATH);
	cr_assert_str_eq(rule_of(p, "GET",
	    "http://api.fx-rates.internal/v1%2Fadmin", 0, 100, 0, NULL),
	    RULE_PATH);
	cr_assert_str_eq(rule_of(p, "GET",
	    "http://api.fx-rates.internal/v1/a", 16 * 1024 + 1, 100, 0, &st),
	    RULE_REQ_SIZE);
	cr_assert_eq(st, 413);
	cr_assert_null(rule_of(p, "GET", "http://api.fx-rates.internal/v1/a",
	    16 * 1024, 100, 0, NULL));
	cr_assert_str_eq(rule_of(p, "GET",
	    "http://api.fx-rates.internal/v1/a", 0, 1000, 3200, NULL),
	    RULE_BUDGET);
	cr_assert_null(rule_of(p, "GET", "http://api.fx-rates.internal/v1/a",
	    0, 1000, 3000, NULL));
	policy_free(p);
}

static void
pol_add_credential(Sbx__V1__Policy *p, Sbx__V1__CredentialScheme scheme)
{
	Sbx__V1__Credential	*c = xcalloc(1, sizeof(*c));

	sbx__v1__credential__init(c);
	c->host = xstrdup("api.fx-rates.internal");
	c->secret = xstrdup("fx-readonly");
	c->header = xstrdup("Authorization");
	c->scheme = scheme;
	p->credentials = xcalloc(1, sizeof(*p->credentials));
	p->credentials[0] = c;
	p->n_credentials = 1;
}

/* A request inside a CONNECT tunnel to host:443 (https:// in
 * absolute form is refused: TLS is always a tunnel egressd opens). */
static const char *
rule_of_tls(const Sbx__V1__Policy *p, const char *method, const char *url)
{
	static struct decision	 d;
	struct decide_target	 t;
	struct decide_req	 r;

	cr_assert_eq(target(url, &t), 0, "%s", url);
	t.tls = 1;
	t.port = 443;
	memset(&r, 0, sizeof(r));
	r.method = method;
	r.target = &t;
	r.url_len = strlen(url);
	r.out_bytes = 100;
	decide_request(p, &r, 0, &d);
	decide_target_clear(&t);
	return d.rule;
}

/* Issue 10, item 4: a credential crosses the network only inside TLS
 * egressd verified, unless it says scheme: http. */
Test(decide, credential_needs_tls)
{
	Sbx__V1__Policy	*p = pol_new();
	int		 st;

	pol_add_credential(p,
	    SBX__V1__CREDENTIAL_SCHEME__CREDENTIAL_SCHEME_HTTPS);
	cr_assert_str_eq(rule_of(p, "GET", "http://api.fx-rates.internal/v1/r",
	    0, 100, 0, &st), RULE_CRED_TLS);
	cr_assert_eq(st, 403);
	cr_assert_null(rule_of_tls(p, "GET",
	    "http://api.fx-rates.internal/v1/r"));
	/* The host, method and path rules still speak first. */
	cr_assert_str_eq(rule_of(p, "GET", "http://api.fx-rates.internal/v3/",
	    0, 100, 0, NULL), RULE_PATH);
	cr_assert_str_eq(rule_of(p, "POST",
	    "http://api.fx-rates.internal/v1/r", 0, 100, 0, NULL),
	    RULE_METHOD);
	p->credentials[0]->scheme =
	    SBX__V1__CREDENTIAL_SCHEME__CREDENTIAL_SCHEME_HTTP;
	cr_assert_null(rule_of(p, "GET", "http://api.fx-rates.internal/v1/r",
	    0, 100, 0, NULL));
	cr_assert_null(rule_of_tls(p, "GET",
	    "http://api.fx-rates.internal/v1/r"));
	policy_free(p);
}

/* Issue 10, items 6 and 7: the budget counts what earlier executions
 * spent, and a request's bytes are reserved when it is decided. */
Test(decide, budget_reserved_at_decision)
{
	Sbx__V1__Policy		*p = pol_new();	/* max_out_kb 4: 4096 bytes */
	struct decide_budget	 b = { 0, 0, 0 };
	int			 allowed = 0;

	/* 32 requests of 1100 bytes decided before any is written: each
	 * reserves, so only three fit. */
	for (int i = 0; i < 32; i++) {
		if (rule_of(p, "GET", "http://api.fx-rates.internal/v1/a", 0,
		    1100, decide_budget_used(&b), NULL) == NULL) {
			decide_budget_reserve(&b, 1100);
			allowed++;
		}
	}
	cr_assert_eq(allowed, 3);
	cr_assert_eq(decide_budget_used(&b), 3300);
	/* One is written (a little less than reserved), one fails before
	 * a byte goes out: the count is what was sent and still held. */
	decide_budget_settle(&b, 1100, 1000);
	decide_budget_settle(&b, 1100, 0);
	cr_assert_eq(b.sent, 1000);
	cr_assert_eq(b.reserved, 1100);
	cr_assert_eq(decide_budget_used(&b), 2100);
	cr_assert_null(rule_of(p, "GET", "http://api.fx-rates.internal/v1/a",
	    0, 1996, decide_budget_used(&b), NULL));
	cr_assert_str_eq(rule_of(p, "GET", "http://api.fx-rates.internal/v1/a",
	    0, 1997, decide_budget_used(&b), NULL), RULE_BUDGET);
	/* What earlier executions spent is spent. */
	b = (struct decide_budget){ 4000, 0, 0 };
	cr_assert_null(rule_of(p, "GET", "http://api.fx-rates.internal/v1/a",
	    0, 96, decide_budget_used(&b), NULL));
	cr_assert_str_eq(rule_of(p, "GET", "http://api.fx-rates.internal/v1/a",
	    0, 97, decide_budget_used(&b), NULL), RULE_BUDGET);
	/* More than the budget (a grant of a task already over): nothing
	 * passes, and nothing wraps. */
	b = (struct decide_budget){ UINT64_MAX - 10, 100, 100 };
	cr_assert_eq(decide_budget_used(&b), UINT64_MAX);
	cr_assert_str_eq(rule_of(p, "GET", "http://api.fx-rates.internal/v1/a",
	    0, 1, decide_budget_used(&b), NULL), RULE_BUDGET);
	policy_free(p);
}

Test(decide, path_prefixes)
{
	Sbx__V1__Policy			*p = pol_new();
	const Sbx__V1__AllowRule	*r = p->network->allow[0];
	const char			*why;

	cr_assert(decide_path(r, "/v1/", &why));
	cr_assert(decide_path(r, "/v1/rates?x=1", &why));
	cr_assert(decide_path(r, "/v2/rates", &why));
	cr_assert(decide_path(r, "/v2/rates/eur", &why));
	cr_assert(decide_path(r, "/v2/rates?d=1", &why));
	cr_assert_not(decide_path(r, "/v2/ratesx", &why));
	cr_assert_not(decide_path(r, "/v1", &why));
	cr_assert_not(decide_path(r, "/v1/./a", &why));
	cr_assert_not(decide_path(r, "/v1/..", &why));
	cr_assert_not(decide_path(r, "/v1/a%5c..", &why));
	/* Dots inside a segment are a name, not a dot segment. */
	cr_assert(decide_path(r, "/v1/a..b/.c", &why));
	policy_free(p);
}

/* Paths every server reads the same way: forwarded as written. */
Test(decide, canonical_paths_accepted)
{
	Sbx__V1__Policy			*p = pol_new();
	const Sbx__V1__AllowRule	*r = p->network->allow[0];
	const char *const ok[] = {
		"/v1/a%20b",			/* an encoded space */
		"/v1/caf%C3%A9",		/* UTF-8 in %XX */
		"/v1/%F0%9F%98%80",		/* four-byte UTF-8 */
		"/v1/%2541",			/* %25 before other things */
		"/v1/%2520x",			/* a space encoded twice */
		"/v1/100%25",			/* a literal % */
		"/v1/50%25off",
		"/v1/x;jsessionid=1",		/* ; on a normal segment */
		"/v1/x;a=1/y;b=2",
		"/v1//rates",			/* an empty segment */
		"/v1/a..b/.c/..d/d..",		/* dots inside names */
		"/v1/a%2eb",			/* an encoded dot in a name */
		"/v1/.well",
		"/v1/rates?next=/../admin&x=a.b", /* the query is not a path */
		"/v1/rates?p=%2e%2e%2f%5c..;%00",
		"/v1/%3bx",			/* %3b before a name */
		"/v1/a:b@c!$&'()*+,=~-_",	/* sub-delims, : and @ */
		"/v1/%7e",
		"/v1/",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		const char	*why = NULL;

		cr_assert(decide_path(r, ok[i], &why), "%s: %s", ok[i],
		    why != NULL ? why : "?");
	}
	policy_free(p);
}

/* Paths whose meaning depends on the server's decoding, each with the
 * reason the denial gives. */
Test(decide, canonical_paths_refused)
{
	Sbx__V1__Policy			*p = pol_new();
	const Sbx__V1__AllowRule	*r = p->network->allow[0];
	const char *const bad[][2] = {
		/* dot segments, plain, encoded, with parameters */
		{ "/v1/../admin", "dot segment" },
		{ "/v1/./admin", "dot segment" },
		{ "/v1/..", "dot segment" },
		{ "/v1/..;/admin", "dot segment" },
		{ "/v1/..;x=1/admin", "dot segment" },
		{ "/v1/.;/admin", "dot segment" },
		{ "/v1/..%3b/admin", "dot segment" },
		{ "/v1/%2e%2e%3B/admin", "dot segment" },
		{ "/v1/%2E%2e/admin", "dot segment" },
		{ "/v1/.%2e/admin", "dot segment" },
		{ "/v1/..%20/admin", "dot segment" },
		{ "/v1/.../admin", "dot segment" },
		/* double encoding of . / \ ; and more */
		{ "/v1/%252e%252e/admin", "double-encoded" },
		{ "/v1/%252E./admin", "double-encoded" },
		{ "/v1/a%252fb", "double-encoded" },
		{ "/v1/a%255cb", "double-encoded" },
		{ "/v1/..%253b/admin", "double-encoded" },
		{ "/v1/a%253fb", "double-encoded" },
		{ "/v1/a%2523b", "double-encoded" },
		{ "/v1/a%2500", "double-encoded" },
		{ "/v1/a%25252e", "double-encoded" },
		{ "/v1/%25c0%25ae", "not UTF-8" },
		{ "/v1/%%32%65%%32%65/admin", "malformed" },
		{ "/v1/%25%32%65", "double-encoded" },
		{ "/v1/%25%25%32%65", "double-encoded" },
		/* slashes, backslashes, NUL, controls */
		{ "/v1%2fadmin", "encoded /" },
		{ "/v1/..%2Fadmin", "encoded /" },
		{ "/v1/a%5cb", "encoded \\" },
		{ "/v1/..%5C..%5Cadmin", "encoded \\" },
		{ "/v1/a\\b", "backslash" },
		{ "/v1/a%00.json", "NUL" },
		{ "/v1/a%0d%0aX:1", "control" },
		/* spellings servers disagree on */
		{ "/v1/%u002e%u002e/admin", "malformed" },
		{ "/v1/a%zz", "malformed" },
		{ "/v1/a%2", "malformed" },
		{ "/v1/%c0%ae%c0%ae/admin", "not UTF-8" },
		{ "/v1/%c0%af", "not UTF-8" },
		{ "/v1/%e0%80%ae", "not UTF-8" },
		{ "/v1/%ed%a0%80", "not UTF-8" },
		{ "/v1/%c3", "not UTF-8" },
		{ "/v1/caf\xc3\xa9", "non-ASCII" },
		{ "/v1/a#b", "fragment" },
		{ "/v1/a b", "space" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char	*why = NULL;

		cr_assert_not(decide_path(r, bad[i][0], &why), "%s",
		    bad[i][0]);
		cr_assert_not_null(strstr(why, bad[i][1]), "%s: %s",
		    bad[i][0], why);
	}
	/* The check holds whatever the rules say: a rule with no paths
	 * allows every canonical path, and no other. */
	p->network->allow[0]->n_paths = 0;
	cr_assert(decide_path(r, "/anything/x", &(const char *){ NULL }));
	cr_assert_not(decide_path(r, "/a/..;/b", &(const char *){ NULL }));
	cr_assert_not(decide_path(r, "/a/%252e%252e/b",
	    &(const char *){ NULL }));
	p->network->allow[0]->n_paths = 2;
	policy_free(p);
}

/* A long path is checked without a fixed buffer in the way. */
Test(decide, canonical_long_path)
{
	Sbx__V1__Policy			*p = pol_new();
	const Sbx__V1__AllowRule	*r = p->network->allow[0];
	char				*path = xmalloc(20001);
	const char			*why;

	memcpy(path, "/v1/", 4);
	for (size_t i = 4; i + 3 <= 20000; i += 3)
		memcpy(path + i, "%41", 3);
	path[19999] = '\0';
	cr_assert(decide_path(r, path, &why));
	memcpy(path + 4 + 300, "/..;/", 5);
	cr_assert_not(decide_path(r, path, &why));
	free(path);
	policy_free(p);
}

Test(decide, header_classes)
{
	const char *const strip[] = {
		"X-Forwarded-For", "x-forwarded-for", "X_Forwarded_For",
		"Forwarded", "X-Real-IP", "Via", "X-Forwarded-Host",
		"X-Forwarded-Proto", "X-Forwarded-Port", "X-Forwarded-Prefix",
		"X-Client-IP", "True-Client-IP", "X-Cluster-Client-IP",
		"Client-IP", "CF-Connecting-IP", "Fastly-Client-IP",
		"X-Originating-IP", "X-Sbx-Rule", "X-SBX-anything",
		"Proxy-Authorization", "Proxy-Foo", "proxy_connection",
		"X-Host", "X-Original-URI",
	};
	const char *const fwd[] = {
		"User-Agent", "Accept", "X-Foo", "Authorization", "Cookie",
		"X-Forwarded", "Forwarded-For", "Viagra", "X-Sbx",
		"X-Real-IPs", "Proxy", "X-Original-URL-Not",
	};

	for (size_t i = 0; i < sizeof(strip) / sizeof(strip[0]); i++)
		cr_assert_eq(decide_header(strip[i]), DECIDE_HDR_STRIP, "%s",
		    strip[i]);
	for (size_t i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++)
		cr_assert_eq(decide_header(fwd[i]), DECIDE_HDR_FORWARD, "%s",
		    fwd[i]);
	cr_assert_eq(decide_header("X-Original-URL"), DECIDE_HDR_PATH);
	cr_assert_eq(decide_header("x-rewrite-url"), DECIDE_HDR_PATH);
	cr_assert_eq(decide_header("X_Original_URL"), DECIDE_HDR_PATH);
	cr_assert_eq(decide_header("X-HTTP-Method-Override"),
	    DECIDE_HDR_METHOD);
	cr_assert_eq(decide_header("X-HTTP-Method"), DECIDE_HDR_METHOD);
	cr_assert_eq(decide_header("X-Method-Override"), DECIDE_HDR_METHOD);
}

/* An override header is refused after host, method and path, so a
 * denied host still reads host-not-allowed. */
Test(decide, override_headers_refused)
{
	Sbx__V1__Policy		*p = pol_new();
	struct decide_target	 t;
	struct decide_req	 r;
	struct decision		 d;

	cr_assert_eq(target("http://api.fx-rates.internal/v1/a", &t), 0);
	memset(&r, 0, sizeof(r));
	r.method = "GET";
	r.target = &t;
	r.url_len = 10;
	r.override = "X-Original-URL";
	decide_request(p, &r, 0, &d);
	cr_assert_str_eq(d.rule, RULE_PATH);
	cr_assert_eq(d.status, 403);
	cr_assert_not_null(strstr(d.detail, "X-Original-URL would override "
	    "the path"), "%s", d.detail);
	r.override = "X-HTTP-Method-Override";
	decide_request(p, &r, 0, &d);
	cr_assert_str_eq(d.rule, RULE_METHOD);
	r.override = NULL;
	decide_request(p, &r, 0, &d);
	cr_assert_null(d.rule);
	decide_target_clear(&t);
	cr_assert_eq(target("http://evil.example/v1/a", &t), 0);
	r.override = "X-Rewrite-URL";
	decide_request(p, &r, 0, &d);
	cr_assert_str_eq(d.rule, RULE_HOST);
	decide_target_clear(&t);
	policy_free(p);
}

Test(decide, redirects)
{
	Sbx__V1__Policy		*p = pol_new();
	struct decide_target	 from;
	char			 d[300];

	cr_assert_eq(target("http://api.fx-rates.internal/v1/a/b", &from), 0);
	cr_assert_null(decide_redirect(p, &from, "/v1/c", d, sizeof(d)));
	cr_assert_null(decide_redirect(p, &from, "c?x", d, sizeof(d)));
	cr_assert_null(decide_redirect(p, &from,
	    "http://API.fx-rates.internal/v2/rates", d, sizeof(d)));
	cr_assert_null(decide_redirect(p, &from,
	    "//api.fx-rates.internal/v1/x", d, sizeof(d)));
	cr_assert_str_eq(decide_redirect(p, &from, "http://evil.example/x", d,
	    sizeof(d)), RULE_REDIRECT);
	cr_assert_str_eq(decide_redirect(p, &from, "//evil.example/x", d,
	    sizeof(d)), RULE_REDIRECT);
	cr_assert_str_eq(decide_redirect(p, &from, "/admin", d, sizeof(d)),
	    RULE_REDIRECT);
	cr_assert_null(decide_redirect(p, &from,
	    "https://api.fx-rates.internal/v1/x", d, sizeof(d)));
	cr_assert_str_eq(decide_redirect(p, &from,
	    "http://api.fx-rates.internal:81/v1/x", d, sizeof(d)),
	    RULE_REDIRECT);
	cr_assert_str_eq(decide_redirect(p, &from, "javascript:alert(1)", d,
	    sizeof(d)), RULE_REDIRECT);
	cr_assert_str_eq(decide_redirect(p, &from,
	    "http://user@api.fx-rates.internal/v1/", d, sizeof(d)),
	    RULE_REDIRECT);
	/* The canonical path applies to redirect targets too, in every
	 * form a Location takes. */
	cr_assert_str_eq(decide_redirect(p, &from, "/v1/..;/admin", d,
	    sizeof(d)), RULE_REDIRECT);
	cr_assert_not_null(strstr(d, "dot segment"), "%s", d);
	cr_assert_str_eq(decide_redirect(p, &from, "..;/..;/admin", d,
	    sizeof(d)), RULE_REDIRECT);
	cr_assert_str_eq(decide_redirect(p, &from,
	    "http://api.fx-rates.internal/v1/%252e%252e/admin", d, sizeof(d)),
	    RULE_REDIRECT);
	cr_assert_not_null(strstr(d, "double-encoded"), "%s", d);
	cr_assert_str_eq(decide_redirect(p, &from,
	    "https://api.fx-rates.internal/v1/..%3b/admin", d, sizeof(d)),
	    RULE_REDIRECT);
	cr_assert_str_eq(decide_redirect(p, &from,
	    "//api.fx-rates.internal/v1/%c0%ae%c0%ae/admin", d, sizeof(d)),
	    RULE_REDIRECT);
	cr_assert_str_eq(decide_redirect(p, &from, "/v1/a\\..\\..\\admin",
	    d, sizeof(d)), RULE_REDIRECT);
	cr_assert_null(decide_redirect(p, &from, "/v1/caf%C3%A9;v=1", d,
	    sizeof(d)));
	/* A fragment is the client's, not part of the path. */
	cr_assert_null(decide_redirect(p, &from,
	    "https://api.fx-rates.internal/v1/x#top", d, sizeof(d)));
	decide_target_clear(&from);
	/* A relative Location resolves against the path, not the query:
	 * from /v2/rates?next=/v1/ "x" is /v2/x, which no rule allows. */
	cr_assert_eq(target("http://api.fx-rates.internal/v2/rates?next=/v1/",
	    &from), 0);
	cr_assert_str_eq(decide_redirect(p, &from, "x", d, sizeof(d)),
	    RULE_REDIRECT);
	cr_assert_not_null(strstr(d, "/v2/x "), "%s", d);
	decide_target_clear(&from);
	policy_free(p);
}

static struct sockaddr_storage ss;

static const struct sockaddr *
sa(const char *a)
{
	memset(&ss, 0, sizeof(ss));
	if (strchr(a, ':') != NULL) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		cr_assert_eq(inet_pton(AF_INET6, a, &s6->sin6_addr), 1);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		cr_assert_eq(inet_pton(AF_INET, a, &s4->sin_addr), 1);
	}
	return (struct sockaddr *)&ss;
}

Test(resolve, address_classes)
{
	const char *const bad[][2] = {
		{ "127.0.0.1", "loopback" }, { "10.1.2.3", "private" },
		{ "172.16.0.1", "private" }, { "172.31.255.255", "private" },
		{ "192.168.1.1", "private" }, { "100.64.0.1", "cgnat" },
		{ "169.254.169.254", "metadata" },
		{ "169.254.1.1", "link-local" }, { "0.0.0.0", "unspecified" },
		{ "224.0.0.1", "multicast" }, { "255.255.255.255", "reserved" },
		{ "::1", "loopback" }, { "::", "unspecified" },
		{ "::ffff:127.0.0.1", "mapped" }, { "64:ff9b::a00:1", "nat64" },
		{ "2002:7f00:1::", "6to4" }, { "fd00::1", "private" },
		{ "fe80::1", "link-local" }, { "ff02::1", "multicast" },
		{ "fd00:ec2::254", "metadata" },
	};
	const char *const good[] = {
		"8.8.8.8", "172.32.0.1", "100.128.0.1", "1.1.1.1",
		"2606:4700::1111",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_str_eq(resolve_addr_class(sa(bad[i][0])),
		    bad[i][1], "%s", bad[i][0]);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert_null(resolve_addr_class(sa(good[i])), "%s", good[i]);
}

Test(resolve, rule_cidrs_allow_only_what_they_name)
{
	Sbx__V1__Policy			*p = pol_new();
	const Sbx__V1__AllowRule	*r = p->network->allow[0];

	cr_assert_null(resolve_addr_check(r, sa("127.0.0.1")));
	cr_assert_null(resolve_addr_check(r, sa("127.255.0.9")));
	cr_assert_null(resolve_addr_check(r, sa("8.8.8.8")));
	cr_assert_str_eq(resolve_addr_check(r, sa("10.0.0.1")), "private");
	cr_assert_str_eq(resolve_addr_check(r, sa("::1")), "loopback");
	cr_assert_str_eq(resolve_addr_check(r, sa("::ffff:127.0.0.1")),
	    "mapped");
	cr_assert(resolve_cidr_match("fd00::/8", sa("fd12::1")));
	cr_assert_not(resolve_cidr_match("fd00::/8", sa("fe80::1")));
	cr_assert_not(resolve_cidr_match("10.0.0.0/8", sa("fd12::1")));
	cr_assert_not(resolve_cidr_match("garbage", sa("10.0.0.1")));
	policy_free(p);
}

static long
feed(const char *s, struct http_req *r)
{
	http_req_init(r, 16);
	r->max_body = 100;
	return http_req_feed(r, s, strlen(s));
}

Test(http, framing_refusals)
{
	const char *const bad[] = {
		"POST http://a/ HTTP/1.1\r\nContent-Length: 1\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nContent-Length: 1\r\n"
		    "Content-Length: 1\r\n\r\na",
		"POST http://a/ HTTP/1.1\r\nContent-Length: 1x\r\n\r\na",
		"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "q\r\n",
		"GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET http://a/ HTTP/1.1\r\nUpgrade: h2c\r\n\r\n",
	};
	struct http_req	 r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(feed(bad[i], &r), -1, "%zu", i);
		cr_assert_str_eq(r.rule, RULE_BAD_REQUEST, "%zu", i);
		http_req_clear(&r);
	}
}

Test(http, chunked_body_is_counted_decoded)
{
	struct http_req	 r;
	const char	*s = "POST http://a/ HTTP/1.1\r\nHost: a\r\n"
			    "Transfer-Encoding: chunked\r\n\r\n"
			    "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";

	cr_assert_eq(feed(s, &r), (long)strlen(s));
	cr_assert(r.complete);
	cr_assert_eq(r.body_bytes, 11);
	cr_assert(r.chunked);
	http_req_clear(&r);

	http_req_init(&r, 16);
	r.max_body = 8;
	cr_assert_eq(http_req_feed(&r, s, strlen(s)), -1);
	cr_assert_str_eq(r.rule, RULE_REQ_SIZE);
	http_req_clear(&r);
}

Test(http, head_checks)
{
	const char	*why;

	cr_assert_eq(http_head_check("GET / HTTP/1.1\r\nA: b\r\n\r\n", 24,
	    &why), 0);
	cr_assert_eq(http_head_check("GET / HTTP/1.1\nA: b\r\n\r\n", 23,
	    &why), -1);
	cr_assert_eq(http_head_check("GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", 26,
	    &why), -1);
	cr_assert_eq(http_head_check("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
	    27, &why), -1);
	cr_assert_eq(http_head_check("GET / HTTP/1.1\r\nA: \x01\r\n\r\n", 23,
	    &why), -1);
}

Test(http, rebuilt_head_drops_hop_headers_and_the_credential)
{
	struct http_req		 r;
	struct decide_target	 t;
	struct evbuffer		*out = evbuffer_new();
	const char		*s = "GET http://API.a.internal:8080/v1 HTTP/1.1\r\n"
				    "Host: api.a.internal:8080\r\n"
				    "Authorization: Bearer forged\r\n"
				    "Proxy-Authorization: x\r\n"
				    "Connection: keep-alive, X-Secret-Hop\r\n"
				    "X-Secret-Hop: 1\r\nX-Keep: 2\r\n\r\n";
	char			*head;
	size_t			 n;

	cr_assert_eq(feed(s, &r), (long)strlen(s));
	cr_assert_eq(target(r.url, &t), 0);
	http_req_head(&r, &t, "authorization", out);
	n = evbuffer_get_length(out);
	head = xmalloc(n + 1);
	evbuffer_remove(out, head, n);
	head[n] = '\0';
	cr_assert_str_eq(head, "GET /v1 HTTP/1.1\r\n"
	    "Host: api.a.internal:8080\r\nX-Keep: 2\r\n");
	free(head);
	evbuffer_free(out);
	decide_target_clear(&t);
	http_req_clear(&r);
}

/* Field names that are not RFC 9110 tokens, in the head: refused before
 * libhttp-parser (which honours "Content-Length " as Content-Length) and
 * by the parser's own check, each naming the field. */
Test(http, field_names_must_be_tokens)
{
	const char *const bad[][2] = {
		{ "POST http://a/ HTTP/1.1\r\nContent-Length : 5\r\n\r\n"
		    "hello", "header name \"Content-Length \" is not a token" },
		{ "POST http://a/ HTTP/1.1\r\nTransfer-Encoding : chunked"
		    "\r\n\r\n0\r\n\r\n",
		    "header name \"Transfer-Encoding \" is not a token" },
		{ "GET http://a/ HTTP/1.1\r\nHost : b\r\n\r\n",
		    "header name \"Host \" is not a token" },
		{ "GET http://a/ HTTP/1.1\r\nHost\t: b\r\n\r\n",
		    "header name \"Host\\t\" is not a token" },
		{ "GET http://a/ HTTP/1.1\r\nX Forwarded: b\r\n\r\n",
		    "header name \"X Forwarded\" is not a token" },
		{ "GET http://a/ HTTP/1.1\r\nX\"Y: b\r\n\r\n",
		    "header name \"X\\\"Y\" is not a token" },
		{ "GET http://a/ HTTP/1.1\r\nX(Y): b\r\n\r\n",
		    "is not a token" },
		{ "GET http://a/ HTTP/1.1\r\nX\xc3\xa9: b\r\n\r\n",
		    "header name \"X\\xc3\\xa9\" is not a token" },
		{ "GET http://a/ HTTP/1.1\r\n: b\r\n\r\n",
		    "empty header name" },
		{ "GET http://a/ HTTP/1.1\r\n b: c\r\n\r\n",
		    "obs-fold" },
		{ "GET http://a/ HTTP/1.1\r\nNoColon\r\n\r\n",
		    "without a colon" },
	};
	const char	*why, *s;
	struct http_req	 r;
	char		 longname[600];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s = bad[i][0];
		why = NULL;
		cr_assert_eq(http_head_check(s, strlen(s), &why), -1, "%s", s);
		cr_assert_not_null(strstr(why, bad[i][1]), "%s: %s", s, why);
	}
	/* The parser refuses on its own what libhttp-parser accepts. */
	for (size_t i = 0; i < 3; i++) {
		cr_assert_eq(feed(bad[i][0], &r), -1, "%zu", i);
		cr_assert_str_eq(r.rule, RULE_BAD_REQUEST);
		cr_assert_str_eq(r.why, bad[i][1]);
		http_req_clear(&r);
	}
	/* A long name is cut in the detail. */
	snprintf(longname, sizeof(longname), "GET http://a/ HTTP/1.1\r\n"
	    "%0300d : b\r\n\r\n", 0);
	cr_assert_eq(http_head_check(longname, strlen(longname), &why), -1);
	cr_assert_lt(strlen(why), 120);
	/* Every tchar, and a head still arriving, are fine; so is an empty
	 * line before the request line. */
	const char *const good[] = {
		"GET http://a/ HTTP/1.1\r\n!#$%&'*+-.^_`|~09AZaz: v\r\n\r\n",
		"GET http://a/ HTTP/1.1\r\nHost",
		"GET http://a/ HTTP/1.1\r\nHost : b",	/* not a line yet */
		"\r\nGET http://a/ HTTP/1.1\r\nA: b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		why = NULL;
		cr_assert_eq(http_head_check(good[i], strlen(good[i]), &why),
		    0, "%s: %s", good[i], why);
	}
	/* The response side: a name that is not a token is refused. */
	s = "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n";
	cr_assert_eq(http_head_check(s, strlen(s), &why), -1);
}

/* Trailers: checked like a head's fields, then dropped, so nothing in
 * them reaches the rebuilt request. */
Test(http, trailers_checked_and_dropped)
{
	const char *const bad[] = {
		"POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
		    "\r\n3\r\nabc\r\n0\r\nContent-Length : 5\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
		    "\r\n3\r\nabc\r\n0\r\nX Y: 1\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
		    "\r\n3\r\nabc\r\n0\r\nHost\t: x\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nHost: a\r\n"
		    "Transfer-Encoding: chunked\r\n"
		    "\r\n3\r\nabc\r\n0\r\nContent-Length: 99\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nHost: a\r\n"
		    "Transfer-Encoding: chunked\r\n"
		    "\r\n3\r\nabc\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n",
	};
	const char	*ok = "POST http://a.internal/v1 HTTP/1.1\r\n"
			    "Host: a.internal\r\n"
			    "Transfer-Encoding: chunked\r\nX-Keep: 1\r\n\r\n"
			    "3\r\nabc\r\n0\r\nHost: evil.example\r\n"
			    "X-Trailer: t\r\n\r\n";
	struct http_req		 r;
	struct decide_target	 t;
	struct evbuffer		*out = evbuffer_new();
	char			*head;
	size_t			 n;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(feed(bad[i], &r), -1, "%zu", i);
		cr_assert_str_eq(r.rule, RULE_BAD_REQUEST, "%zu", i);
		cr_assert_not_null(r.why);
		http_req_clear(&r);
	}
	feed(bad[0], &r);
	cr_assert_str_eq(r.why, "trailer field name \"Content-Length \" is "
	    "not a token");
	http_req_clear(&r);

	cr_assert_eq(feed(ok, &r), (long)strlen(ok));
	cr_assert(r.complete);
	cr_assert_eq(r.nhdrs, 3);
	cr_assert_eq(target(r.url, &t), 0);
	http_req_head(&r, &t, NULL, out);
	n = evbuffer_get_length(out);
	head = xmalloc(n + 1);
	evbuffer_remove(out, head, n);
	head[n] = '\0';
	cr_assert_str_eq(head, "POST /v1 HTTP/1.1\r\nHost: a.internal\r\n"
	    "X-Keep: 1\r\nContent-Length: 3\r\n");
	free(head);
	evbuffer_free(out);
	decide_target_clear(&t);
	http_req_clear(&r);
}

Test(http, rebuilt_head_drops_identity_headers)
{
	struct http_req		 r;
	struct decide_target	 t;
	struct evbuffer		*out = evbuffer_new();
	const char		*s = "GET http://a.internal/v1 HTTP/1.1\r\n"
				    "Host: a.internal\r\n"
				    "User-Agent: ua\r\nX-Forwarded-For: 1.2.3.4\r\n"
				    "Forwarded: for=1.2.3.4\r\nX-Real-IP: 1\r\n"
				    "Via: 1.1 x\r\nX-Sbx-Rule: none\r\n"
				    "Proxy-Foo: 1\r\nX_Forwarded_Host: h\r\n"
				    "True-Client-IP: 1\r\nAccept: */*\r\n"
				    "X-Foo: bar\r\n\r\n";
	char			*head;
	size_t			 n;

	cr_assert_eq(feed(s, &r), (long)strlen(s));
	cr_assert_null(http_req_override(&r));
	cr_assert_eq(target(r.url, &t), 0);
	http_req_head(&r, &t, NULL, out);
	n = evbuffer_get_length(out);
	head = xmalloc(n + 1);
	evbuffer_remove(out, head, n);
	head[n] = '\0';
	cr_assert_str_eq(head, "GET /v1 HTTP/1.1\r\nHost: a.internal\r\n"
	    "User-Agent: ua\r\nAccept: */*\r\nX-Foo: bar\r\n");
	free(head);
	evbuffer_free(out);
	decide_target_clear(&t);
	http_req_clear(&r);

	s = "GET http://a.internal/v1 HTTP/1.1\r\nHost: a.internal\r\n"
	    "X-Foo: 1\r\nx-rewrite-url: /admin\r\n\r\n";
	cr_assert_eq(feed(s, &r), (long)strlen(s));
	cr_assert_str_eq(http_req_override(&r), "x-rewrite-url");
	http_req_clear(&r);
}
