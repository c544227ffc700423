/*
 * decide.c: the reference text's decide(), and the checks the issue adds
 * around it.  Pure: no I/O, no clock, no DNS, so every rule is unit-tested
 * on its own (tests/unit/decide_test.c).
 *
 * The invariant: a host is canonicalised exactly once, here, and the
 * canonical spelling is what is matched, resolved, dialled and sent as
 * Host.  Anything that two parsers could read two ways -- userinfo,
 * backslashes, percent-encoded or non-canonical IPv4 hosts, fragments,
 * paths whose meaning depends on how the server decodes them -- is
 * refused rather than interpreted, because the upstream server might
 * interpret it otherwise.
 *
 * The canonical path (egressd.8).  egressd never rewrites a path: it
 * forwards the path exactly as the client wrote it, and only if it is in
 * the one form whose meaning every server agrees on.  The path is what
 * comes before the first "?"; the query after it is not examined here.
 * Call D1 the path percent-decoded once (what every server does) and D2
 * that decoded once more (what a server that decodes twice, or a
 * framework behind a server, sees).  A path is canonical when:
 *
 *  - it starts with "/" and holds only printable ASCII other than "\"
 *    and "#", with every "%" followed by two hex digits (no "%u002e",
 *    no raw UTF-8: percent-encode it);
 *  - D1 has no "/" or "\" that came from an escape (%2f, %5c), no NUL or
 *    other control character (%00, %0a, ...), and is valid UTF-8 in its
 *    shortest form (no overlong %c0%ae for ".");
 *  - a "%" in D1 that starts an escape (the path had "%25" before two hex
 *    digits: double encoding) does not decode to any of . / \ ; ? # %,
 *    to a control character, or to bytes that are not valid UTF-8;
 *    "%2520" (an encoded space, encoded again) and "%2541" are fine;
 *  - D2 has no escape left (nothing is encoded three times);
 *  - no segment of D1 or D2 has a name -- the part before its first ";",
 *    so "%3b" counts as ";" -- made only of dots and spaces: ".", "..",
 *    "..;x" (Tomcat and Spring strip the parameter, then resolve ".."),
 *    "%2e%2e", "..%20" and "..." (Windows trims the trailing dots and
 *    spaces of a name, so these are dot segments there).
 *
 * Everything else is ordinary and forwarded: %20, UTF-8 in %XX, ";"
 * parameters on other segments, empty segments ("//"), "%2e" inside a
 * name ("a%2eb"), and any query.  Path rules are then matched on the
 * path as forwarded, without decoding: a prefix ending in "/" allows
 * every path under it; any other prefix allows itself and what is under
 * it ("/v1/rates" allows "/v1/rates", "/v1/rates/eur" and "/v1/rates?x",
 * not "/v1/ratesx").  A percent-encoded spelling of a prefix's own
 * characters never matches it, which only ever denies.
 *
 * Headers (decide_header): identity and routing headers the sandbox
 * wrote are stripped, and headers that frameworks read as the request's
 * path or method instead of the request line's are refused.
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
	char		 buf[DECIDE_HOST_MAX], *p, *label;
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
	/* The punycode (xn--) form every rule is written in (idn.c). */
	if (nonascii && idn_to_ascii(buf, buf, sizeof(buf), why) == -1)
		return -1;
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

static int
decide_hex(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* An escape: "%" and two hex digits at s[i], with n bytes in s. */
static int
decide_escape(const char *s, size_t i, size_t n)
{
	return s[i] == '%' && i + 2 < n &&
	    decide_hex((unsigned char)s[i + 1]) >= 0 &&
	    decide_hex((unsigned char)s[i + 2]) >= 0;
}

/* Valid UTF-8 in its shortest form, no surrogates, at most U+10FFFF. */
static int
decide_utf8(const unsigned char *s, size_t n)
{
	size_t	 i = 0, k;

	while (i < n) {
		unsigned char	 c = s[i], lo = 0x80, hi = 0xbf;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1;
		else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			if (c == 0xe0)
				lo = 0xa0;
			else if (c == 0xed)
				hi = 0x9f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			if (c == 0xf0)
				lo = 0x90;
			else if (c == 0xf4)
				hi = 0x8f;
		} else
			return 0;
		if (n - i <= k)
			return 0;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return 0;
		for (size_t j = 2; j <= k; j++)
			if (s[i + j] < 0x80 || s[i + j] > 0xbf)
				return 0;
		i += k + 1;
	}
	return 1;
}

/*
 * Decode s once into out (room for n bytes); level 1 or 2 says which
 * decoding this is, and so which decoded bytes are refused.  Returns the
 * length of out, or -1 with *why.
 */
static ssize_t
decide_pct_decode(const char *s, size_t n, char *out, int level,
    const char **why)
{
	size_t	 i, o = 0;

	for (i = 0; i < n; i++) {
		unsigned char	 c = (unsigned char)s[i];

		if (c != '%' || !decide_escape(s, i, n)) {
			/* A "%" without two hex digits: servers read
			 * "%u002e" and "%zz" differently.  After one
			 * decoding it is a literal "%". */
			if (c == '%' && level == 1)
				return (*why = "malformed percent-encoding "
				    "in path (\"%\" not followed by two hex "
				    "digits)", -1);
			out[o++] = (char)c;
			continue;
		}
		c = (unsigned char)(decide_hex((unsigned char)s[i + 1]) * 16 +
		    decide_hex((unsigned char)s[i + 2]));
		i += 2;
		if (level == 1) {
			if (c == '/')
				return (*why = "encoded / in path (%2f)", -1);
			if (c == '\\')
				return (*why = "encoded \\ in path (%5c)", -1);
			if (c < 0x20 || c == 0x7f)
				return (*why = "encoded NUL or control "
				    "character in path", -1);
		} else if (c < 0x20 || c == 0x7f || c == '%' ||
		    strchr("./\\;?#", c) != NULL)
			return (*why = "double-encoded . / \\ ; ? # % or "
			    "control character in path (%25 and its "
			    "encoding): servers that decode twice read it "
			    "otherwise", -1);
		out[o++] = (char)c;
	}
	return (ssize_t)o;
}

/* A segment name of D1 or D2 made only of dots and spaces (".", "..",
 * "..;x", ".. ", "..."): a dot segment to some server. */
static int
decide_dot_segments(const char *s, size_t n)
{
	size_t	 i = 0;

	while (i < n) {
		size_t	 dots = 0, other = 0;

		/* s[i] is "/": the name runs to the next "/" or ";". */
		for (i++; i < n && s[i] != '/' && s[i] != ';'; i++) {
			if (s[i] == '.')
				dots++;
			else if (s[i] != ' ')
				other++;
		}
		if (dots > 0 && other == 0)
			return 1;
		while (i < n && s[i] != '/')
			i++;
	}
	return 0;
}

/* The canonical form (the comment at the top): 1, or 0 with *why. */
static int
decide_path_canonical(const char *path, size_t plen, const char **why)
{
	char	 stack[2 * DECIDE_URL_MAX], *buf;
	char	*d1, *d2;
	ssize_t	 n1, n2;
	int	 ok = 0;

	for (size_t i = 0; i < plen; i++) {
		unsigned char	 c = (unsigned char)path[i];

		if (c == '\\')
			return (*why = "backslash in path", 0);
		if (c == '#')
			return (*why = "fragment in path", 0);
		if (c <= 0x20 || c == 0x7f)
			return (*why = "space or control character in path",
			    0);
		if (c >= 0x80)
			return (*why = "non-ASCII byte in path (percent-encode "
			    "it)", 0);
	}
	if (memchr(path, '%', plen) == NULL) {
		/* Nothing to decode: D1 and D2 are the path itself. */
		if (decide_dot_segments(path, plen))
			return (*why = "dot segment in path (a segment named "
			    ". or .., or only dots and spaces, before any ;)",
			    0);
		return 1;
	}
	buf = 2 * plen <= sizeof(stack) ? stack : xmalloc(2 * plen);
	d1 = buf;
	d2 = buf + plen;
	if ((n1 = decide_pct_decode(path, plen, d1, 1, why)) == -1)
		goto out;
	if (!decide_utf8((unsigned char *)d1, (size_t)n1)) {
		*why = "percent-encoded bytes in path are not UTF-8 in its "
		    "shortest form";
		goto out;
	}
	if ((n2 = decide_pct_decode(d1, (size_t)n1, d2, 2, why)) == -1)
		goto out;
	if (n2 != n1 && !decide_utf8((unsigned char *)d2, (size_t)n2)) {
		*why = "double-encoded bytes in path are not UTF-8 in its "
		    "shortest form";
		goto out;
	}
	for (ssize_t i = 0; i < n2; i++)
		if (decide_escape(d2, (size_t)i, (size_t)n2)) {
			*why = "percent-encoding in path nested more than "
			    "twice";
			goto out;
		}
	if (decide_dot_segments(d1, (size_t)n1) ||
	    decide_dot_segments(d2, (size_t)n2)) {
		*why = "dot segment in path, once decoded (a segment named . "
		    "or .., or only dots and spaces, before any ; or %3b)";
		goto out;
	}
	ok = 1;
 out:
	if (buf != stack)
		free(buf);
	return ok;
}

int
decide_path(const Sbx__V1__AllowRule *r, const char *path, const char **why)
{
	size_t		 plen = strcspn(path, "?");

	if (path[0] != '/')
		return (*why = "path does not start with /", 0);
	if (!decide_path_canonical(path, plen, why))
		return 0;
	if (r->n_paths == 0)
		return 1;
	for (size_t i = 0; i < r->n_paths; i++)
		if (policy_path_match(r->paths[i], path, plen))
			return 1;
	return (*why = "no path rule matches", 0);
}

/*
 * Request headers egressd does not pass on.  An upstream behind a proxy
 * commonly trusts these to say who the client is or where the request
 * was addressed; from the sandbox they are forgeries, so they are
 * stripped (ordinary clients and libraries add some of them, and nothing
 * the sandbox may rightly expect depends on them).  Names compare without
 * case and with "_" as "-": CGI and WSGI servers turn both into "_", so
 * X_Forwarded_For reaches an application as X-Forwarded-For would.
 */
static const char *const decide_strip_names[] = {
	"Forwarded", "Via", "X-Real-IP", "X-Client-IP", "True-Client-IP",
	"X-Cluster-Client-IP", "Client-IP", "CF-Connecting-IP",
	"CF-Connecting-IPv6", "Fastly-Client-IP", "X-Originating-IP",
	"X-Remote-IP", "X-Remote-Addr", "X-ProxyUser-IP", "X-Host",
	"X-Original-Host", "X-HTTP-Host-Override", "X-Original-URI",
	NULL
};
static const char *const decide_strip_prefixes[] = {
	"X-Forwarded-", "X-Sbx-", "Proxy-", NULL
};
/*
 * Headers that frameworks read as the request's path (Symfony, Zend and
 * IIS URL Rewrite: X-Original-URL, X-Rewrite-URL) or method (the
 * method-override conventions) in place of the request line's.  These are
 * refused, not stripped: the path or method the client meant is not the
 * one the policy decided, and forwarding the request without the header
 * would run a request the client did not ask for (a POST it believes was
 * a DELETE) with no trace; a refusal is audited and tells the agent why.
 */
static const char *const decide_path_overrides[] = {
	"X-Original-URL", "X-Rewrite-URL", NULL
};
static const char *const decide_method_overrides[] = {
	"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override", NULL
};

/* ASCII lower case, "_" as "-": how header names compare here. */
static int
decide_hdr_fold(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A' + 'a';
	return c == '_' ? '-' : c;
}

/* name equals pat (or, with prefix, starts with it), folded. */
static int
decide_hdr_match(const char *name, const char *pat, int prefix)
{
	for (; *pat != '\0'; name++, pat++)
		if (*name == '\0' ||
		    decide_hdr_fold(*name) != decide_hdr_fold(*pat))
			return 0;
	return prefix || *name == '\0';
}

enum decide_hdr
decide_header(const char *name)
{
	/* This runs for every header of every request: most names start
	 * with a letter no name in the tables starts with. */
	switch (decide_hdr_fold(name[0])) {
	case 'c': case 'f': case 'p': case 't': case 'v': case 'x':
		break;
	default:
		return DECIDE_HDR_FORWARD;
	}
	for (size_t i = 0; decide_path_overrides[i] != NULL; i++)
		if (decide_hdr_match(name, decide_path_overrides[i], 0))
			return DECIDE_HDR_PATH;
	for (size_t i = 0; decide_method_overrides[i] != NULL; i++)
		if (decide_hdr_match(name, decide_method_overrides[i], 0))
			return DECIDE_HDR_METHOD;
	for (size_t i = 0; decide_strip_names[i] != NULL; i++)
		if (decide_hdr_match(name, decide_strip_names[i], 0))
			return DECIDE_HDR_STRIP;
	for (size_t i = 0; decide_strip_prefixes[i] != NULL; i++)
		if (decide_hdr_match(name, decide_strip_prefixes[i], 1))
			return DECIDE_HDR_STRIP;
	return DECIDE_HDR_FORWARD;
}

void
decide_request(const Sbx__V1__Policy *pol, const struct decide_req *req,
    uint64_t bytes_out, struct decision *d)
{
	const struct decide_target	*t = req->target;
	const Sbx__V1__AllowRule	*r;
	const Sbx__V1__Credential	*cred;
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
	if (req->override != NULL) {
		if (decide_header(req->override) == DECIDE_HDR_METHOD) {
			decide_deny(d, RULE_METHOD, 403, "header %.64s would "
			    "override the method %s: the policy decides the "
			    "request line's", req->override, req->method);
			return;
		}
		decide_deny(d, RULE_PATH, 403, "header %.64s would override "
		    "the path %.128s: the policy decides the request "
		    "line's", req->override, t->path);
		return;
	}
	if ((cred = decide_credential(pol, t->host)) != NULL &&
	    !decide_credential_ok(cred, t)) {
		decide_deny(d, RULE_CRED_TLS, 403, "host %s has a credential, "
		    "which egressd adds only over TLS it verified: use "
		    "https://%s (the credential does not say scheme: http)",
		    t->host, t->host);
		return;
	}
	if (req->body_bytes > decide_max_request(r)) {
		decide_deny(d, RULE_REQ_SIZE, 413, "request body of %llu "
		    "bytes is over max_request_kb (%llu bytes)",
		    (unsigned long long)req->body_bytes,
		    (unsigned long long)decide_max_request(r));
		return;
	}
	if (bytes_out > decide_max_out(pol) ||
	    req->out_bytes > decide_max_out(pol) - bytes_out) {
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
		if (rc == 0) {
			t.path = xstrdup(a[al] == '/' ? a + al : "/");
			t.path[strcspn(t.path, "#")] = '\0';
		}
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
			/* Relative to the request's directory: its path up
			 * to the last "/" before any query. */
			const char	*slash = from->path;
			size_t		 plen = strcspn(from->path, "?");

			for (size_t i = 0; i < plen; i++)
				if (from->path[i] == '/')
					slash = from->path + i;
			xasprintf(&t.path, "%.*s%s",
			    (int)(slash - from->path) + 1, from->path, loc);
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

int
decide_credential_ok(const Sbx__V1__Credential *cred,
    const struct decide_target *t)
{
	return t->tls ||
	    cred->scheme == SBX__V1__CREDENTIAL_SCHEME__CREDENTIAL_SCHEME_HTTP;
}

uint64_t
decide_budget_used(const struct decide_budget *b)
{
	uint64_t	 u = b->before;

	/* Saturating: a grant may say more was spent than a budget. */
	u = u + b->sent < u ? UINT64_MAX : u + b->sent;
	u = u + b->reserved < u ? UINT64_MAX : u + b->reserved;
	return u;
}

void
decide_budget_reserve(struct decide_budget *b, uint64_t n)
{
	b->reserved += n;
}

void
decide_budget_settle(struct decide_budget *b, uint64_t reserved,
    uint64_t sent)
{
	b->reserved = reserved > b->reserved ? 0 : b->reserved - reserved;
	b->sent += sent;
}
