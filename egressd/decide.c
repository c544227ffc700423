/*
 * decide.c: the reference text's decide(), and the checks the issue adds
 * around it.  Pure: no I/O, no clock, no DNS, so every rule is unit-tested
 * on its own (tests/unit/decide_test.c).
 *
 * The invariant: a host is canonicalised exactly once, here, and the
 * canonical spelling is what is matched, resolved, dialled and sent as
 * Host.  Anything that two parsers could read two ways -- userinfo,
 * backslashes, percent-encoded or non-canonical IPv4 hosts, fragments,
 * encoded slashes or dot segments in paths -- is refused rather than
 * interpreted, because the upstream server might interpret it otherwise.
 *
 * Path rules (egressd.8): a prefix ending in "/" allows every path under
 * it; any other prefix allows itself and what is under it ("/v1/rates"
 * allows "/v1/rates", "/v1/rates/eur" and "/v1/rates?x", not
 * "/v1/ratesx").  Matching is on the path exactly as forwarded, without
 * decoding; a path with a "." or ".." segment (plain or percent-encoded)
 * or an encoded "/" or "\" is refused whatever the rules say.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <idn2.h>

#include "util.h"
#include "egressd.h"

void
decide_deny(struct decision *d, const char *rule, int status,
    const char *fmt, ...)
{
	va_list	 ap;

	d->rule = rule;
	d->status = status;
	va_start(ap, fmt);
	vsnprintf(d->detail, sizeof(d->detail), fmt, ap);
	va_end(ap);
}

void
decide_target_clear(struct decide_target *t)
{
	free(t->path);
	t->path = NULL;
}

/* A dotted quad in its one canonical spelling: four decimal parts, no
 * leading zeros, each at most 255. */
static int
decide_ipv4_canonical(const char *s)
{
	int		 parts = 0;
	const char	*p = s;

	while (*p != '\0') {
		const char	*start = p;
		unsigned	 v = 0;

		while (*p >= '0' && *p <= '9') {
			v = v * 10 + (unsigned)(*p - '0');
			if (v > 255)
				return 0;
			p++;
		}
		if (p == start || (p - start > 1 && *start == '0'))
			return 0;
		parts++;
		if (*p == '.') {
			p++;
			if (*p == '\0')
				return 0;
		} else if (*p != '\0')
			return 0;
	}
	return parts == 4;
}

/* The last label looks numeric, so a WHATWG URL parser (and most HTTP
 * libraries) would read the whole name as an IPv4 address. */
static int
decide_looks_ipv4(const char *s)
{
	const char	*last = strrchr(s, '.');

	last = last != NULL ? last + 1 : s;
	if (*last == '\0')
		return 0;
	if (last[0] == '0' && (last[1] == 'x' || last[1] == 'X'))
		return 1;
	for (; *last != '\0'; last++)
		if (*last < '0' || *last > '9')
			return 0;
	return 1;
}

int
decide_host_canon(const char *in, size_t len, char *out, size_t outlen,
    int *ip, const char **why)
{
	char		 buf[DECIDE_HOST_MAX], *res = NULL, *p, *label;
	int		 nonascii = 0;
	size_t		 i, n;

	*ip = 0;
	if (len == 0)
		return (*why = "empty host", -1);
	if (len >= sizeof(buf))
		return (*why = "host name too long", -1);
	if (in[0] == '[') {
		struct in6_addr	 a6;

		if (len < 3 || in[len - 1] != ']')
			return (*why = "unterminated IPv6 literal", -1);
		memcpy(buf, in + 1, len - 2);
		buf[len - 2] = '\0';
		/* A zone id (%eth0) names an interface of egressd's host. */
		if (inet_pton(AF_INET6, buf, &a6) != 1)
			return (*why = "bad IPv6 literal", -1);
		if (inet_ntop(AF_INET6, &a6, out, (socklen_t)outlen) == NULL)
			return (*why = "bad IPv6 literal", -1);
		*ip = 6;
		return 0;
	}
	for (i = 0; i < len; i++) {
		unsigned char	 c = (unsigned char)in[i];

		if (c == '\\')
			return (*why = "backslash in host", -1);
		if (c == '@')
			return (*why = "userinfo in host", -1);
		if (c == '%')
			return (*why = "percent-encoded host", -1);
		if (c <= 0x20 || c == 0x7f)
			return (*why = "control character or space in host", -1);
		if (c >= 0x80)
			nonascii = 1;
		else if (!isalnum(c) && c != '.' && c != '-' && c != '_')
			return (*why = "character not allowed in host", -1);
	}
	memcpy(buf, in, len);
	buf[len] = '\0';
	if (nonascii) {
		/* IDNA2008 with UTS#46 mapping, as browsers do; the result
		 * is the punycode (xn--) form every rule is written in. */
		if (idn2_lookup_u8((const uint8_t *)buf, (uint8_t **)&res,
		    IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL) != IDN2_OK)
			return (*why = "invalid internationalised host name",
			    -1);
		if (strlen(res) >= sizeof(buf)) {
			idn2_free(res);
			return (*why = "host name too long", -1);
		}
		snprintf(buf, sizeof(buf), "%s", res);
		idn2_free(res);
	}
	for (p = buf; *p != '\0'; p++)
		*p = (char)tolower((unsigned char)*p);
	n = strlen(buf);
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
	if (n == 0 || n > 253)
		return (*why = "bad host name length", -1);
	/* Every label 1..63 characters: "a..b" and ".a" are refused. */
	for (label = buf; label != NULL; ) {
		char	*dot = strchr(label, '.');
		size_t	 ll = dot != NULL ? (size_t)(dot - label) : strlen(label);

		if (ll == 0 || ll > 63)
			return (*why = "empty or over-long label in host", -1);
		label = dot != NULL ? dot + 1 : NULL;
	}
	if (decide_looks_ipv4(buf)) {
		if (!decide_ipv4_canonical(buf))
			return (*why = "non-canonical IPv4 address", -1);
		*ip = 4;
	}
	if (n + 1 > outlen)
		return (*why = "host name too long", -1);
	memcpy(out, buf, n + 1);
	return 0;
}

/* host[:port] or [v6][:port] into t->host and t->port. */
static int
decide_authority(const char *s, size_t len, int tls, struct decide_target *t,
    const char **why)
{
	const char	*hend, *colon = NULL;
	size_t		 i;
	unsigned long	 port = 0;

	if (memchr(s, '@', len) != NULL)
		return (*why = "userinfo in URL", -1);
	if (len > 0 && s[0] == '[') {
		const char	*rb = memchr(s, ']', len);

		if (rb == NULL)
			return (*why = "unterminated IPv6 literal", -1);
		hend = rb + 1;
		if (hend < s + len) {
			if (*hend != ':')
				return (*why = "junk after IPv6 literal", -1);
			colon = hend;
		}
	} else {
		colon = memchr(s, ':', len);
		if (colon != NULL && memchr(colon + 1, ':',
		    len - (size_t)(colon + 1 - s)) != NULL)
			return (*why = "more than one ':' in authority", -1);
		hend = colon != NULL ? colon : s + len;
	}
	if (colon != NULL) {
		const char	*pp = colon + 1;
		size_t		 pl = len - (size_t)(pp - s);

		if (pl == 0 || pl > 5 || (pl > 1 && pp[0] == '0'))
			return (*why = "non-canonical port", -1);
		for (i = 0; i < pl; i++) {
			if (pp[i] < '0' || pp[i] > '9')
				return (*why = "non-numeric port", -1);
			port = port * 10 + (unsigned long)(pp[i] - '0');
		}
		if (port == 0 || port > 65535)
			return (*why = "port out of range", -1);
		t->port = (uint16_t)port;
		t->port_given = 1;
	} else
		t->port = tls ? 443 : 80;
	if (decide_host_canon(s, (size_t)(hend - s), t->host, sizeof(t->host),
	    &t->ip, why) == -1)
		return -1;
	return 0;
}

int
decide_parse_authority(const char *s, size_t len, int tls,
    struct decide_target *t, const char **why)
{
	memset(t, 0, sizeof(*t));
	t->tls = tls;
	for (size_t i = 0; i < len; i++)
		if (s[i] == '\\' || s[i] == '/' || s[i] == '?' ||
		    s[i] == '#' || (unsigned char)s[i] <= 0x20 ||
		    (unsigned char)s[i] == 0x7f)
			return (*why = "character not allowed in authority",
			    -1);
	return decide_authority(s, len, tls, t, why);
}

int
decide_parse_target(const char *url, size_t len, int authority_only,
    struct decide_target *t, const char **why)
{
	const char	*a, *end = url + len, *pend;
	size_t		 i;

	memset(t, 0, sizeof(*t));
	if (authority_only) {
		if (decide_parse_authority(url, len, 1, t, why) == -1)
			return -1;
		if (!t->port_given)
			return (*why = "CONNECT target has no port", -1);
		t->path = xstrdup("/");
		return 0;
	}
	for (i = 0; i < len; i++) {
		unsigned char	 c = (unsigned char)url[i];

		if (c == '\\')
			return (*why = "backslash in URL", -1);
		if (c == '#')
			return (*why = "fragment in URL", -1);
		if (c <= 0x20 || c == 0x7f)
			return (*why = "control character or space in URL",
			    -1);
	}
	if (len >= 7 && strncasecmp(url, "http://", 7) == 0)
		a = url + 7;
	else if (len >= 8 && strncasecmp(url, "https://", 8) == 0)
		return (*why = "https URLs go through CONNECT", -1);
	else if (len > 0 && url[0] == '/')
		return (*why = "origin-form request to a proxy: want "
		    "http://host/path", -1);
	else
		return (*why = "not an http:// URL", -1);
	for (pend = a; pend < end && *pend != '/' && *pend != '?'; pend++)
		;
	if (decide_authority(a, (size_t)(pend - a), 0, t, why) == -1)
		return -1;
	/* Non-ASCII is for IDN host names only (canonicalised above). */
	for (const char *q = pend; q < end; q++)
		if ((unsigned char)*q >= 0x80)
			return (*why = "non-ASCII byte in path", -1);
	if (pend == end)
		t->path = xstrdup("/");
	else if (*pend == '?')
		xasprintf(&t->path, "/%.*s", (int)(end - pend), pend);
	else {
		t->path = xmalloc((size_t)(end - pend) + 1);
		memcpy(t->path, pend, (size_t)(end - pend));
		t->path[end - pend] = '\0';
	}
	return 0;
}

const Sbx__V1__AllowRule *
decide_rule(const Sbx__V1__Policy *pol, const char *host)
{
	if (pol->network == NULL)
		return NULL;
	for (size_t i = 0; i < pol->network->n_allow; i++)
		if (strcmp(pol->network->allow[i]->host, host) == 0)
			return pol->network->allow[i];
	return NULL;
}

uint16_t
decide_rule_port(const Sbx__V1__AllowRule *r, int tls)
{
	if (r->port != 0)
		return (uint16_t)r->port;
	return tls ? 443 : 80;
}

uint64_t
decide_max_request(const Sbx__V1__AllowRule *r)
{
	return (uint64_t)(r->max_request_kb ? r->max_request_kb :
	    POLICY_DEFAULT_MAX_REQUEST_KB) * 1024;
}

uint64_t
decide_max_response(const Sbx__V1__AllowRule *r)
{
	return (uint64_t)(r->max_response_kb ? r->max_response_kb :
	    POLICY_DEFAULT_MAX_RESPONSE_KB) * 1024;
}

uint64_t
decide_max_out(const Sbx__V1__Policy *pol)
{
	uint32_t	 kb = pol->network != NULL ? pol->network->max_out_kb : 0;

	return (uint64_t)(kb ? kb : POLICY_DEFAULT_MAX_OUT_KB) * 1024;
}

/* A segment that is "." or "..", written plainly or percent-encoded. */
static int
decide_dot_segment(const char *s, size_t n)
{
	size_t	 dots = 0, i = 0;

	while (i < n) {
		if (s[i] == '.')
			i++;
		else if (n - i >= 3 && s[i] == '%' && s[i + 1] == '2' &&
		    (s[i + 2] == 'e' || s[i + 2] == 'E'))
			i += 3;
		else
			return 0;
		dots++;
	}
	return dots == 1 || dots == 2;
}

int
decide_path(const Sbx__V1__AllowRule *r, const char *path, const char **why)
{
	size_t		 plen = strcspn(path, "?");
	const char	*seg, *end = path + plen;

	if (path[0] != '/')
		return (*why = "path does not start with /", 0);
	for (const char *p = path; p + 2 < end; p++)
		if (p[0] == '%' && ((p[1] == '2' && (p[2] == 'f' ||
		    p[2] == 'F')) || (p[1] == '5' && (p[2] == 'c' ||
		    p[2] == 'C'))))
			return (*why = "encoded / or \\ in path", 0);
	for (seg = path + 1; seg <= end; ) {
		const char	*slash = memchr(seg, '/', (size_t)(end - seg));
		const char	*se = slash != NULL ? slash : end;

		if (decide_dot_segment(seg, (size_t)(se - seg)))
			return (*why = "dot segment in path", 0);
		if (slash == NULL)
			break;
		seg = slash + 1;
	}
	if (r->n_paths == 0)
		return 1;
	for (size_t i = 0; i < r->n_paths; i++) {
		const char	*pre = r->paths[i];
		size_t		 n = strlen(pre);

		if (n > plen || strncmp(path, pre, n) != 0)
			continue;
		if (pre[n - 1] == '/' || n == plen || path[n] == '/')
			return 1;
	}
	return (*why = "no path rule matches", 0);
}

void
decide_request(const Sbx__V1__Policy *pol, const struct decide_req *req,
    uint64_t bytes_out, struct decision *d)
{
	const struct decide_target	*t = req->target;
	const Sbx__V1__AllowRule	*r;
	const char			*why;
	size_t				 i;
	uint16_t			 want;

	memset(d, 0, sizeof(*d));
	if ((r = decide_rule(pol, t->host)) == NULL) {
		decide_deny(d, RULE_HOST, 403, "host %s is not in the "
		    "policy's allowlist", t->host);
		return;
	}
	d->allow = r;
	if (t->port != (want = decide_rule_port(r, t->tls))) {
		decide_deny(d, RULE_HOST, 403, "port %u is not allowed for "
		    "host %s (only %u)", t->port, t->host, want);
		return;
	}
	for (i = 0; i < r->n_methods; i++)
		if (strcmp(r->methods[i], req->method) == 0)
			break;
	if (i == r->n_methods) {
		decide_deny(d, RULE_METHOD, 403, "method %s is not allowed "
		    "for host %s", req->method, t->host);
		return;
	}
	if (req->url_len > DECIDE_URL_MAX) {
		decide_deny(d, RULE_URL, 414, "URL of %zu bytes is over the "
		    "%d-byte limit", req->url_len, DECIDE_URL_MAX);
		return;
	}
	if (!decide_path(r, t->path, &why)) {
		decide_deny(d, RULE_PATH, 403, "path %.128s is not allowed "
		    "for host %s: %s", t->path, t->host, why);
		return;
	}
	if (req->body_bytes > decide_max_request(r)) {
		decide_deny(d, RULE_REQ_SIZE, 413, "request body of %llu "
		    "bytes is over max_request_kb (%llu bytes)",
		    (unsigned long long)req->body_bytes,
		    (unsigned long long)decide_max_request(r));
		return;
	}
	if (bytes_out + req->out_bytes > decide_max_out(pol)) {
		decide_deny(d, RULE_BUDGET, 403, "sending %llu bytes would "
		    "exceed the task's egress budget (%llu of %llu bytes "
		    "used)", (unsigned long long)req->out_bytes,
		    (unsigned long long)bytes_out,
		    (unsigned long long)decide_max_out(pol));
		return;
	}
}

const char *
decide_redirect(const Sbx__V1__Policy *pol, const struct decide_target *from,
    const char *loc, char *detail, size_t detaillen)
{
	struct decide_target	 t;
	const Sbx__V1__AllowRule *r;
	const char		*why = NULL;
	char			*url = NULL;
	size_t			 len = strlen(loc);
	int			 rc;

	memset(&t, 0, sizeof(t));
	if (len >= 8 && strncasecmp(loc, "https://", 8) == 0) {
		/* Check an https target as the CONNECT it will become. */
		const char	*a = loc + 8;
		size_t		 al = strcspn(a, "/?#");

		rc = decide_parse_authority(a, al, 1, &t, &why);
		if (rc == 0)
			t.path = xstrdup(a[al] == '/' ? a + al : "/");
	} else if (len >= 7 && strncasecmp(loc, "http://", 7) == 0) {
		rc = decide_parse_target(loc, strcspn(loc, "#"), 0, &t, &why);
		if (rc == 0)
			t.tls = 0;
	} else if (len >= 2 && loc[0] == '/' && loc[1] == '/') {
		xasprintf(&url, "%s:%s", from->tls ? "https" : "http", loc);
		rc = decide_redirect(pol, from, url, detail, detaillen) ==
		    NULL ? 1 : -1;
		free(url);
		return rc == 1 ? NULL : RULE_REDIRECT;
	} else if (strchr(loc, ':') != NULL &&
	    strcspn(loc, ":") < strcspn(loc, "/?#")) {
		snprintf(detail, detaillen, "redirect to a non-HTTP URL");
		return RULE_REDIRECT;
	} else {
		/* Same origin: only the path can change. */
		t = *from;
		if (loc[0] == '/')
			t.path = xstrdup(loc);
		else {
			const char	*slash = strrchr(from->path, '/');
			int		 dl = (int)(slash - from->path) + 1;

			xasprintf(&t.path, "%.*s%s", dl, from->path, loc);
		}
		t.path[strcspn(t.path, "#")] = '\0';
		rc = 0;
	}
	if (rc == -1) {
		snprintf(detail, detaillen, "redirect to a malformed URL: %s",
		    why != NULL ? why : "?");
		decide_target_clear(&t);
		return RULE_REDIRECT;
	}
	if ((r = decide_rule(pol, t.host)) == NULL)
		snprintf(detail, detaillen, "redirect to host %s, which is "
		    "not in the allowlist", t.host);
	else if (t.port != decide_rule_port(r, t.tls))
		snprintf(detail, detaillen, "redirect to %s port %u, which "
		    "is not allowed", t.host, t.port);
	else if (!decide_path(r, t.path, &why))
		snprintf(detail, detaillen, "redirect to path %.128s on %s: "
		    "%s", t.path, t.host, why);
	else {
		decide_target_clear(&t);
		return NULL;
	}
	decide_target_clear(&t);
	return RULE_REDIRECT;
}

const Sbx__V1__Credential *
decide_credential(const Sbx__V1__Policy *pol, const char *host)
{
	for (size_t i = 0; i < pol->n_credentials; i++)
		if (strcmp(pol->credentials[i]->host, host) == 0)
			return pol->credentials[i];
	return NULL;
}
