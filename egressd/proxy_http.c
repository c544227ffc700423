/*
 * proxy_http.c: HTTP/1.1 messages with libhttp-parser, and the framing
 * checks that keep egressd and the upstream server reading one request
 * the same way.  A request is refused (rule bad-request) when its framing
 * is ambiguous: Content-Length together with Transfer-Encoding, more than
 * one or a malformed Content-Length, a Transfer-Encoding other than
 * exactly "chunked", bad chunk sizes, bare CR or LF, obs-fold, control
 * bytes in a header, more than one Host, or an Upgrade.  The body is
 * decoded (chunked included) and counted as decoded bytes; what egressd
 * sends upstream is rebuilt from the parsed request, never the client's
 * bytes, so the upstream sees one canonical framing: Content-Length.
 *
 * Every field name, in a head or in a chunked body's trailers, must be an
 * RFC 9110 token.  libhttp-parser accepts a space in a name and still
 * honours "Content-Length " and "Transfer-Encoding " as framing, while
 * egressd's checks compare names exactly: a name that is not a token is
 * where the two would part, so it is refused.  Trailers are checked and
 * then dropped: the rebuilt request has no chunked coding to carry them,
 * and RFC 9112 7.1.2 forbids merging them into the head, so nothing a
 * trailer says (Host, Content-Length, Transfer-Encoding, anything) ever
 * reaches the upstream.  Identity and routing headers the sandbox wrote
 * (decide_header) are dropped from the rebuilt head as well.
 *
 * A response is relayed as the upstream sent it, so its cap counts what
 * is on the wire: every byte after the head, chunk-size lines, chunk
 * extensions and trailers included (a body of 1-byte chunks with long
 * extensions is as large as it is long), and a chunk-size line with its
 * extensions, or the trailers, may be at most HTTP_CHUNK_LINE_MAX bytes.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "util.h"
#include "egressd.h"

#define HTTP_URL_KEEP	(DECIDE_URL_MAX + 1)	/* bytes kept of a URL */
#define HTTP_NAME_SHOWN	32	/* bytes of a refused name in a denial */

/* RFC 9110 5.6.2: tchar, the bytes of a token. */
static int
http_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/*
 * NULL if name is a token; else a refusal that names it ("header name
 * \"Host \" is not a token"), written to buf.  Bytes a reader could not
 * see are shown escaped, and a long name is cut.
 */
static const char *
http_name_check(const char *what, const char *name, size_t len, char *buf,
    size_t buflen)
{
	char	 shown[HTTP_NAME_SHOWN * 4 + 1];
	size_t	 i, o = 0;

	for (i = 0; i < len && http_tchar((unsigned char)name[i]); i++)
		;
	/* libhttp-parser marks a message as transfer-coded as soon as a
	 * name's first 17 bytes match, before the name ends: it reads
	 * "Transfer-Encodingx: 1" as a Transfer-Encoding for its framing
	 * checks and a server built on it would refuse what egressd
	 * forwards.  Found by forward_fuzz. */
	if (len > 0 && i == len && len > 17 &&
	    strncasecmp(name, "Transfer-Encoding", 17) == 0) {
		snprintf(buf, buflen, "%s \"%.*s%s\" starts with "
		    "Transfer-Encoding", what, HTTP_NAME_SHOWN, name,
		    len > HTTP_NAME_SHOWN ? "..." : "");
		return buf;
	}
	if (len > 0 && i == len)
		return NULL;
	if (len == 0) {
		snprintf(buf, buflen, "empty %s", what);
		return buf;
	}
	for (i = 0; i < len && i < HTTP_NAME_SHOWN; i++) {
		unsigned char	 c = (unsigned char)name[i];

		if (c == '\t')
			o += (size_t)snprintf(shown + o, sizeof(shown) - o,
			    "\\t");
		else if (c < 0x20 || c >= 0x7f)
			o += (size_t)snprintf(shown + o, sizeof(shown) - o,
			    "\\x%02x", c);
		else if (c == '"' || c == '\\')
			o += (size_t)snprintf(shown + o, sizeof(shown) - o,
			    "\\%c", c);
		else
			shown[o++] = (char)c;
	}
	shown[o] = '\0';
	snprintf(buf, buflen, "%s \"%s%s\" is not a token", what, shown,
	    len > HTTP_NAME_SHOWN ? "..." : "");
	return buf;
}

/* Content-Length or Transfer-Encoding, the fields that frame a body. */
static int
http_framing_name(const char *name, size_t len)
{
	return (len == 14 && strncasecmp(name, "Content-Length", 14) == 0) ||
	    (len == 17 && strncasecmp(name, "Transfer-Encoding", 17) == 0);
}

/* The field names of a head's complete lines: after the start line (and
 * the empty lines a server skips before it), up to the empty line.  The
 * caller has refused bare CR and LF, so every LF ends a line with CRLF. */
static int
http_head_names(const char *h, size_t len, const char **why)
{
	static char	 buf[192];
	const char	*p = h, *end = h + len, *eol, *colon, *w;

	while (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
		p += 2;
	if ((eol = memchr(p, '\n', (size_t)(end - p))) == NULL)
		return 0;
	for (p = eol + 1; p < end; p = eol + 1) {
		if ((eol = memchr(p, '\n', (size_t)(end - p))) == NULL ||
		    eol <= p + 1)
			break;		/* still arriving, or the end */
		/* The line is p up to the CR at eol - 1. */
		if ((colon = memchr(p, ':', (size_t)(eol - 1 - p))) == NULL)
			return (*why = "header line without a colon", -1);
		if ((w = http_name_check("header name", p,
		    (size_t)(colon - p), buf, sizeof(buf))) != NULL)
			return (*why = w, -1);
		/* nginx refuses a tab around a framing value; Node and
		 * Python (and libhttp-parser) skip it: the two would
		 * part.  libhttp-parser drops the leading whitespace before
		 * its callbacks, so it is looked for here. */
		if (http_framing_name(p, (size_t)(colon - p)) &&
		    memchr(colon, '\t', (size_t)(eol - colon)) != NULL) {
			snprintf(buf, sizeof(buf), "tab in the %.*s value",
			    (int)(colon - p), p);
			return (*why = buf, -1);
		}
	}
	return 0;
}

int
http_head_check(const char *h, size_t len, const char **why)
{
	size_t	 i;

	for (i = 0; i < len; i++) {
		unsigned char	 c = (unsigned char)h[i];

		if (c == '\r') {
			if (i + 1 >= len || h[i + 1] != '\n')
				return (*why = "bare CR in head", -1);
			i++;
			/* A line that starts with SP or HT continues the
			 * previous one (obs-fold): refused. */
			if (i + 1 < len && (h[i + 1] == ' ' ||
			    h[i + 1] == '\t'))
				return (*why = "obs-fold line in head", -1);
			continue;
		}
		if (c == '\n')
			return (*why = "bare LF in head", -1);
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return (*why = "control byte in head", -1);
	}
	return http_head_names(h, len, why);
}

/* ---- request ---- */

static struct http_req *
http_req_of(http_parser *p)
{
	return p->data;
}

static int
http_refuse(const char **rule, const char **why, const char *r,
    const char *w)
{
	*rule = r;
	*why = w;
	return -1;
}

static int
http_req_on_begin(http_parser *p)
{
	(void)p;
	return 0;
}

static int
http_req_on_url(http_parser *p, const char *at, size_t len)
{
	struct http_req	*r = http_req_of(p);
	size_t		 keep;

	if (r->url_buf == NULL)
		r->url_buf = xmalloc(HTTP_URL_KEEP + 1);
	r->url = r->url_buf;
	keep = r->url_len < HTTP_URL_KEEP ? HTTP_URL_KEEP - r->url_len : 0;
	if (keep > len)
		keep = len;
	memcpy(r->url + r->url_len, at, keep);
	r->url_len += len;
	r->url[r->url_len < HTTP_URL_KEEP ? r->url_len : HTTP_URL_KEEP] =
	    '\0';
	return 0;
}

static void
http_append(char **s, size_t *n, size_t *cap, const char *at, size_t len)
{
	if (*s == NULL || *n + len + 1 > *cap) {
		*cap = *n + len + 1 < 64 ? 64 : *n + len + 1;
		*s = realloc(*s, *cap);
		if (*s == NULL)
			abort();
	}
	memcpy(*s + *n, at, len);
	*n += len;
	(*s)[*n] = '\0';
}

static int
http_req_on_field(http_parser *p, const char *at, size_t len)
{
	struct http_req	*r = http_req_of(p);
	struct http_hdr	*h;

	if (r->nhdrs == 0 || r->in_value) {
		if (r->nhdrs >= r->max_headers)
			return http_refuse(&r->rule, &r->why, RULE_HEADERS,
			    "too many header fields");
		if (r->nhdrs == r->hcap) {
			r->hcap = r->hcap == 0 ? 16 : r->hcap * 2;
			r->hdrs = xreallocarray(r->hdrs, r->hcap,
			    sizeof(*r->hdrs));
			memset(&r->hdrs[r->nhdrs], 0, (r->hcap - r->nhdrs) *
			    sizeof(*r->hdrs));
		}
		h = &r->hdrs[r->nhdrs++];
		/* A slot a previous request used keeps its buffers: only
		 * what it held is forgotten. */
		h->nlen = 0;
		h->vlen = 0;
		if (h->value != NULL)
			h->value[0] = '\0';
		r->in_value = 0;
	}
	h = &r->hdrs[r->nhdrs - 1];
	http_append(&h->name, &h->nlen, &h->ncap, at, len);
	return 0;
}

static int
http_req_on_value(http_parser *p, const char *at, size_t len)
{
	struct http_req	*r = http_req_of(p);

	if (r->nhdrs == 0)
		return -1;
	r->in_value = 1;
	http_append(&r->hdrs[r->nhdrs - 1].value, &r->hdrs[r->nhdrs - 1].vlen,
	    &r->hdrs[r->nhdrs - 1].vcap, at, len);
	return 0;
}

const char *
http_req_override(const struct http_req *r)
{
	for (size_t i = 0; i < r->nhdrs; i++) {
		enum decide_hdr	 k;

		if (r->hdrs[i].name == NULL)
			continue;
		k = decide_header(r->hdrs[i].name);
		if (k == DECIDE_HDR_PATH || k == DECIDE_HDR_METHOD)
			return r->hdrs[i].name;
	}
	return NULL;
}

const struct http_hdr *
http_req_header(const struct http_req *r, const char *name, size_t *count)
{
	const struct http_hdr	*first = NULL;
	size_t			 n = 0;

	for (size_t i = 0; i < r->nhdrs; i++) {
		if (r->hdrs[i].name == NULL ||
		    strcasecmp(r->hdrs[i].name, name) != 0)
			continue;
		if (first == NULL)
			first = &r->hdrs[i];
		n++;
	}
	if (count != NULL)
		*count = n;
	return first;
}

/* Trim optional whitespace around a header value, in place. */
static void
http_trim(struct http_hdr *h)
{
	size_t	 s = 0, e;

	if (h->value == NULL) {
		http_append(&h->value, &h->vlen, &h->vcap, "", 0);
		return;
	}
	e = h->vlen;
	while (s < e && (h->value[s] == ' ' || h->value[s] == '\t'))
		s++;
	while (e > s && (h->value[e - 1] == ' ' || h->value[e - 1] == '\t'))
		e--;
	memmove(h->value, h->value + s, e - s);
	h->vlen = e - s;
	h->value[h->vlen] = '\0';
}

static int
http_req_on_headers(http_parser *p)
{
	struct http_req		*r = http_req_of(p);
	const struct http_hdr	*h;
	const char		*w;
	size_t			 n;

	/* What follows the head, until the message ends, is trailers. */
	r->nhead = r->nhdrs;
	for (size_t i = 0; i < r->nhdrs; i++) {
		/* http_head_check has seen the names already when proxy.c
		 * drives the parser; this holds for any other caller. */
		if ((w = http_name_check("header name", r->hdrs[i].name,
		    r->hdrs[i].nlen, r->why_buf, sizeof(r->why_buf))) != NULL)
			return http_refuse(&r->rule, &r->why,
			    RULE_BAD_REQUEST, w);
		http_trim(&r->hdrs[i]);
		if (memchr(r->hdrs[i].value, '\0', r->hdrs[i].vlen) != NULL ||
		    strpbrk(r->hdrs[i].value, "\r\n") != NULL)
			return http_refuse(&r->rule, &r->why,
			    RULE_BAD_REQUEST, "CR, LF or NUL in a header "
			    "value");
	}
	r->method = http_method_str((enum http_method)p->method);
	/* HTTP/0.9, 1.2 and 2.0 named in a request line: each server reads
	 * them its own way (505, 400, or as 1.1). */
	if (p->http_major != 1 || p->http_minor > 1)
		return http_refuse(&r->rule, &r->why, RULE_BAD_REQUEST,
		    "HTTP version other than 1.0 and 1.1");
	h = http_req_header(r, "Content-Length", &n);
	if (n > 1)
		return http_refuse(&r->rule, &r->why, RULE_BAD_REQUEST,
		    "more than one Content-Length");
	if (h != NULL && (h->vlen == 0 ||
	    strspn(h->value, "0123456789") != h->vlen || h->vlen > 18))
		return http_refuse(&r->rule, &r->why, RULE_BAD_REQUEST,
		    "malformed Content-Length");
	if (http_req_header(r, "Transfer-Encoding", &n) != NULL) {
		const struct http_hdr *te =
		    http_req_header(r, "Transfer-Encoding", NULL);

		if (h != NULL)
			return http_refuse(&r->rule, &r->why,
			    RULE_BAD_REQUEST, "both Content-Length and "
			    "Transfer-Encoding");
		if (n > 1 || strcasecmp(te->value, "chunked") != 0)
			return http_refuse(&r->rule, &r->why,
			    RULE_BAD_REQUEST, "Transfer-Encoding other than "
			    "chunked");
		/* HTTP/1.0 has no chunked coding: nginx refuses it, Node
		 * and Python decode it. */
		if (p->http_minor == 0)
			return http_refuse(&r->rule, &r->why,
			    RULE_BAD_REQUEST, "Transfer-Encoding in an "
			    "HTTP/1.0 request");
		r->chunked = 1;
	}
	http_req_header(r, "Host", &n);
	if (n > 1)
		return http_refuse(&r->rule, &r->why, RULE_BAD_REQUEST,
		    "more than one Host");
	/* RFC 9112 section 3.2: an HTTP/1.1 request without Host is a 400
	 * (nginx and Node refuse it, Python takes it).  CONNECT names its
	 * authority in its target. */
	if (n == 0 && p->http_minor == 1 && p->method != HTTP_CONNECT)
		return http_refuse(&r->rule, &r->why, RULE_BAD_REQUEST,
		    "HTTP/1.1 request without Host");
	if (http_req_header(r, "Upgrade", NULL) != NULL || p->upgrade)
		if (p->method != HTTP_CONNECT)
			return http_refuse(&r->rule, &r->why,
			    RULE_BAD_REQUEST, "protocol upgrades cannot be "
			    "decided per request");
	if ((h = http_req_header(r, "Expect", &n)) != NULL) {
		if (n > 1)
			return http_refuse(&r->rule, &r->why,
			    RULE_BAD_REQUEST, "more than one Expect");
		if (strcasecmp(h->value, "100-continue") != 0)
			return http_refuse(&r->rule, &r->why,
			    RULE_BAD_REQUEST, "unsupported Expect");
		r->expect_continue = 1;
	}
	r->keep_alive = http_should_keep_alive(p);
	r->headers_done = 1;
	if (r->on_head != NULL && r->on_head(r, r->arg) == -1) {
		if (r->rule == NULL)
			r->rule = RULE_BAD_REQUEST;
		return -1;
	}
	/* CONNECT has no body here: what follows is the tunnel. */
	return 0;
}

static int
http_req_on_body(http_parser *p, const char *at, size_t len)
{
	struct http_req	*r = http_req_of(p);

	r->body_bytes += len;
	if (r->body_bytes > r->max_body)
		return http_refuse(&r->rule, &r->why, RULE_REQ_SIZE,
		    "request body over max_request_kb");
	evbuffer_add(r->body, at, len);
	return 0;
}

static int
http_req_on_complete(http_parser *p)
{
	struct http_req	*r = http_req_of(p);
	const char	*w;

	/* A chunked body's trailers: names checked like a head's, then
	 * forgotten, so that nothing built from the headers later (the
	 * rebuilt head, its Content-Length, the hop-by-hop list) sees
	 * them. */
	for (size_t i = r->nhead; i < r->nhdrs; i++) {
		if ((w = http_name_check("trailer field name",
		    r->hdrs[i].name, r->hdrs[i].nlen, r->why_buf,
		    sizeof(r->why_buf))) != NULL)
			return http_refuse(&r->rule, &r->why,
			    RULE_BAD_REQUEST, w);
		/* Node refuses framing fields in trailers; nginx and
		 * Python ignore them. */
		if (strcasecmp(r->hdrs[i].name, "Content-Length") == 0 ||
		    strcasecmp(r->hdrs[i].name, "Transfer-Encoding") == 0) {
			snprintf(r->why_buf, sizeof(r->why_buf), "%s in the "
			    "trailers", r->hdrs[i].name);
			return http_refuse(&r->rule, &r->why,
			    RULE_BAD_REQUEST, r->why_buf);
		}
	}
	r->nhdrs = r->nhead;
	r->complete = 1;
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings http_req_settings = {
	.on_message_begin = http_req_on_begin,
	.on_url = http_req_on_url,
	.on_header_field = http_req_on_field,
	.on_header_value = http_req_on_value,
	.on_headers_complete = http_req_on_headers,
	.on_body = http_req_on_body,
	.on_message_complete = http_req_on_complete,
};

void
http_req_init(struct http_req *r, size_t max_headers)
{
	memset(r, 0, sizeof(*r));
	http_parser_init(&r->p, HTTP_REQUEST);
	r->p.data = r;
	r->max_headers = max_headers;
	r->body = evbuffer_new();
}

/* Ready for the next request on the same connection: the parsed fields
 * are forgotten, their storage is kept for the next request. */
void
http_req_reset(struct http_req *r)
{
	struct evbuffer	*body = r->body;
	struct http_hdr	*hdrs = r->hdrs;
	size_t		 maxh = r->max_headers, hcap = r->hcap;
	char		*url_buf = r->url_buf;
	http_parser	 p = r->p;
	int		(*on_head)(struct http_req *, void *) = r->on_head;
	void		*arg = r->arg;

	evbuffer_drain(body, evbuffer_get_length(body));
	memset(r, 0, sizeof(*r));
	r->p = p;
	r->p.data = r;
	r->max_headers = maxh;
	r->body = body;
	r->on_head = on_head;
	r->arg = arg;
	r->hdrs = hdrs;
	r->hcap = hcap;
	r->url_buf = url_buf;
}

void
http_req_clear(struct http_req *r)
{
	for (size_t i = 0; i < r->hcap; i++) {
		free(r->hdrs[i].name);
		free(r->hdrs[i].value);
	}
	free(r->hdrs);
	free(r->url_buf);
	r->hdrs = NULL;
	r->nhdrs = 0;
	r->hcap = 0;
	r->url = NULL;
	r->url_buf = NULL;
	if (r->body != NULL)
		evbuffer_free(r->body);
	r->body = NULL;
}

/*
 * The framing of a request, read a second time and strictly, over the
 * bytes libhttp-parser took for it.  libhttp-parser is lenient where the
 * servers behind egressd are not, or lenient differently: it takes
 * spaces after a chunk size or around an extension's "=", empty and
 * NUL-bearing extensions, anything in place of the CRLF after chunk
 * data, a bare LF ending the trailers, obs-fold in a trailer, and empty
 * lines before a request line (which Python's http.server does not
 * skip).  Where one server reads such bytes one way and another another,
 * egressd cannot forward them and know what the upstream read, so
 * anything outside the grammar of RFC 9112 (with no optional
 * whitespace, which llhttp refuses) is refused:
 *
 *   chunk      = 1*HEXDIG *( ";" token [ "=" ( token / quoted-string ) ] )
 *                CRLF data CRLF
 *   last-chunk = 1*"0" *( ext ) CRLF *( field-line CRLF ) CRLF
 *
 * where a field line neither starts with SP or HTAB nor holds a control
 * byte other than HTAB.  A chunk line, or the trailer section, may be at
 * most HTTP_CHUNK_LINE_MAX bytes.  A message's head ends at its first
 * CRLF CRLF (http_head_check has refused bare CR and LF in it).
 */
enum {
	FV_START,	/* the message's first byte */
	FV_HEAD,
	FV_OFF,		/* not chunked: nothing more to check */
	FV_SIZE,
	FV_EXT_NAME0, FV_EXT_NAME, FV_EXT_VAL0, FV_EXT_VAL,
	FV_EXT_QS, FV_EXT_QP, FV_EXT_QEND,
	FV_SIZE_LF,
	FV_DATA, FV_DATA_CR, FV_DATA_LF,
	FV_TRL0, FV_TRL, FV_TRL_LF, FV_END_LF,
	FV_DONE
};

static const char *
http_frame_check(struct http_req *r, const char *buf, size_t n)
{
	static const char	 crlf2[] = "\r\n\r\n";
	size_t			 i;

	for (i = 0; i < n; i++) {
		unsigned char	 c = (unsigned char)buf[i];
		int		 hex;

		switch (r->fv_state) {
		case FV_START:
			if (c == '\r' || c == '\n')
				return "empty line before the request line";
			r->fv_state = FV_HEAD;
			/* FALLTHROUGH */
		case FV_HEAD:
			/* Only a chunked body is read again: once the
			 * parser has the head and it is not chunked, the
			 * rest of it need not be scanned. */
			if (r->headers_done && !r->chunked) {
				r->fv_state = FV_OFF;
				return NULL;
			}
			r->fv_match = c == (unsigned char)crlf2[r->fv_match] ?
			    r->fv_match + 1 : (c == '\r' ? 1 : 0);
			if (r->fv_match == 4)
				r->fv_state = r->chunked ? FV_SIZE : FV_OFF;
			continue;
		case FV_OFF:
		case FV_DONE:
			return NULL;
		case FV_DATA: {
			size_t	 take = n - i;

			if (take > r->fv_size)
				take = (size_t)r->fv_size;
			r->fv_size -= take;
			i += take - 1;
			if (r->fv_size == 0)
				r->fv_state = FV_DATA_CR;
			continue;
		}
		default:
			break;
		}
		if (++r->fv_run > HTTP_CHUNK_LINE_MAX)
			return r->fv_state >= FV_TRL0 ? "chunked trailers over "
			    "4 KiB" : "chunk-size line over 4 KiB";
		switch (r->fv_state) {
		case FV_SIZE:
			hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
			    (c >= 'A' && c <= 'F');
			if (hex) {
				if (r->fv_size > (UINT64_MAX >> 4))
					return "chunk size too large";
				r->fv_size = r->fv_size * 16 + (uint64_t)(c <=
				    '9' ? c - '0' : (c | 0x20) - 'a' + 10);
				r->fv_digits++;
				break;
			}
			if (r->fv_digits == 0)
				return "chunk size is not a hex number";
			if (c == ';')
				r->fv_state = FV_EXT_NAME0;
			else if (c == '\r')
				r->fv_state = FV_SIZE_LF;
			else
				return "chunk size followed by other than "
				    "\";\" or CRLF";
			break;
		case FV_EXT_NAME0:
		case FV_EXT_NAME:
			if (http_tchar(c))
				r->fv_state = FV_EXT_NAME;
			else if (r->fv_state == FV_EXT_NAME0)
				return "chunk extension without a name";
			else if (c == '=')
				r->fv_state = FV_EXT_VAL0;
			else if (c == ';')
				r->fv_state = FV_EXT_NAME0;
			else if (c == '\r')
				r->fv_state = FV_SIZE_LF;
			else
				return "chunk extension name is not a token";
			break;
		case FV_EXT_VAL0:
			if (c == '"')
				r->fv_state = FV_EXT_QS;
			else if (http_tchar(c))
				r->fv_state = FV_EXT_VAL;
			else
				return "chunk extension without a value after "
				    "\"=\"";
			break;
		case FV_EXT_VAL:
		case FV_EXT_QEND:
			if (c == ';')
				r->fv_state = FV_EXT_NAME0;
			else if (c == '\r')
				r->fv_state = FV_SIZE_LF;
			else if (r->fv_state != FV_EXT_VAL || !http_tchar(c))
				return "chunk extension value is not a token "
				    "or a quoted string";
			break;
		case FV_EXT_QS:
			if (c == '"')
				r->fv_state = FV_EXT_QEND;
			else if (c == '\\')
				r->fv_state = FV_EXT_QP;
			else if ((c < 0x20 && c != '\t') || c == 0x7f)
				return "control byte in a chunk extension";
			break;
		case FV_EXT_QP:
			if ((c < 0x20 && c != '\t') || c == 0x7f)
				return "control byte in a chunk extension";
			r->fv_state = FV_EXT_QS;
			break;
		case FV_SIZE_LF:
			if (c != '\n')
				return "bare CR in a chunk-size line";
			r->fv_run = 0;
			r->fv_digits = 0;
			r->fv_state = r->fv_size == 0 ? FV_TRL0 : FV_DATA;
			break;
		case FV_DATA_CR:
			if (c != '\r')
				return "chunk data not followed by CRLF";
			r->fv_state = FV_DATA_LF;
			break;
		case FV_DATA_LF:
			if (c != '\n')
				return "chunk data not followed by CRLF";
			r->fv_run = 0;
			r->fv_state = FV_SIZE;
			break;
		case FV_TRL0:
			if (c == ' ' || c == '\t')
				return "obs-fold line in the trailers";
			if (c == '\r') {
				r->fv_state = FV_END_LF;
				break;
			}
			r->fv_state = FV_TRL;
			/* FALLTHROUGH */
		case FV_TRL:
			if (c == '\r')
				r->fv_state = FV_TRL_LF;
			else if (c == '\n')
				return "bare LF in the trailers";
			else if ((c < 0x20 && c != '\t') || c == 0x7f)
				return "control byte in the trailers";
			break;
		case FV_TRL_LF:
			if (c != '\n')
				return "bare CR in the trailers";
			r->fv_state = FV_TRL0;
			break;
		case FV_END_LF:
			if (c != '\n')
				return "bare CR ending the trailers";
			r->fv_state = FV_DONE;
			break;
		}
	}
	return NULL;
}

long
http_req_feed(struct http_req *r, const char *buf, size_t len)
{
	size_t	 n;
	enum http_errno e;
	const char *w;
	size_t	 pre;

	if (HTTP_PARSER_ERRNO(&r->p) == HPE_PAUSED)
		http_parser_pause(&r->p, 0);
	/* An empty line where a request line belongs is refused before the
	 * parser, which would skip it, sees it. */
	pre = r->fv_state == FV_START && len > 0;
	if (pre && (w = http_frame_check(r, buf, 1)) != NULL)
		return http_refuse(&r->rule, &r->why, RULE_BAD_REQUEST, w);
	n = http_parser_execute(&r->p, &http_req_settings, buf, len);
	e = HTTP_PARSER_ERRNO(&r->p);
	if ((e == HPE_OK || e == HPE_PAUSED) && r->rule == NULL) {
		/* The first byte was read above. */
		if (n > pre && (w = http_frame_check(r, buf + pre,
		    n - pre)) != NULL)
			return http_refuse(&r->rule, &r->why,
			    RULE_BAD_REQUEST, w);
		return (long)n;
	}
	if (r->rule == NULL) {
		r->rule = RULE_BAD_REQUEST;
		r->why = http_errno_description(e);
	}
	return -1;
}

/* Headers egressd sets itself, that concern only one hop, or that
 * the sandbox has no business telling the upstream (decide_header). */
static int
http_hop_header(const struct http_req *r, const char *name, const char *drop)
{
	static const char *const hop[] = {
		"Host", "Content-Length", "Transfer-Encoding", "Connection",
		"Proxy-Connection", "Keep-Alive", "Proxy-Authorization",
		"Proxy-Authenticate", "TE", "Trailer", "Upgrade", "Expect",
		NULL
	};
	const struct http_hdr	*conn;

	for (size_t i = 0; hop[i] != NULL; i++)
		if (strcasecmp(name, hop[i]) == 0)
			return 1;
	/* Identity and routing headers; an override of the path or method
	 * has been refused before this, and is never sent either. */
	if (decide_header(name) != DECIDE_HDR_FORWARD)
		return 1;
	if (drop != NULL && strcasecmp(name, drop) == 0)
		return 1;
	/* Headers the client named in Connection are hop-by-hop too. */
	for (size_t i = 0; i < r->nhdrs; i++) {
		const char	*v, *tok;
		size_t		 nl = strlen(name);

		conn = &r->hdrs[i];
		if (strcasecmp(conn->name, "Connection") != 0)
			continue;
		for (v = conn->value; *v != '\0'; v = tok) {
			while (*v == ' ' || *v == '\t' || *v == ',')
				v++;
			tok = v + strcspn(v, ", \t");
			if ((size_t)(tok - v) == nl &&
			    strncasecmp(v, name, nl) == 0)
				return 1;
			if (*tok == '\0')
				break;
		}
	}
	return 0;
}

void
http_req_head(const struct http_req *r, const struct decide_target *t,
    const char *drop, struct evbuffer *out)
{
	int	 dflt = t->port == (t->tls ? 443 : 80);
	char	 port[8], *pp = port + sizeof(port);
	unsigned v = t->port;

	/* Piece by piece rather than printf: this runs for every request. */
	evbuffer_add(out, r->method, strlen(r->method));
	evbuffer_add(out, " ", 1);
	evbuffer_add(out, t->path, strlen(t->path));
	evbuffer_add(out, " HTTP/1.1\r\nHost: ", 17);
	if (t->ip == 6)
		evbuffer_add(out, "[", 1);
	evbuffer_add(out, t->host, strlen(t->host));
	if (t->ip == 6)
		evbuffer_add(out, "]", 1);
	if (!dflt) {
		do
			*--pp = (char)('0' + v % 10);
		while ((v /= 10) > 0);
		*--pp = ':';
		evbuffer_add(out, pp, (size_t)(port + sizeof(port) - pp));
	}
	evbuffer_add(out, "\r\n", 2);
	for (size_t i = 0; i < r->nhdrs; i++) {
		if (http_hop_header(r, r->hdrs[i].name, drop))
			continue;
		evbuffer_add(out, r->hdrs[i].name, r->hdrs[i].nlen);
		evbuffer_add(out, ": ", 2);
		evbuffer_add(out, r->hdrs[i].value, r->hdrs[i].vlen);
		evbuffer_add(out, "\r\n", 2);
	}
	if (r->body_bytes > 0 || r->chunked ||
	    http_req_header(r, "Content-Length", NULL) != NULL)
		evbuffer_add_printf(out, "Content-Length: %llu\r\n",
		    (unsigned long long)r->body_bytes);
}

/* ---- response ---- */

static int
http_resp_on_field(http_parser *p, const char *at, size_t len)
{
	struct http_resp	*r = p->data;

	/* Names arrive whole: the head is fed only once it is complete. */
	if (r->nhdrs == 0 || r->in_location) {
		if (++r->nhdrs > r->max_headers) {
			r->rule = RULE_RESP_SIZE;
			r->why = "too many response header fields";
			return -1;
		}
		r->in_location = 0;
	}
	r->field_is_location = len == 8 && strncasecmp(at, "Location", 8) == 0;
	return 0;
}

static int
http_resp_on_value(http_parser *p, const char *at, size_t len)
{
	struct http_resp	*r = p->data;
	size_t			 n;

	r->in_location = 1;		/* "in a value" */
	if (!r->field_is_location)
		return 0;
	if (r->location != NULL) {
		r->rule = RULE_REDIRECT;
		r->why = "more than one Location";
		return -1;
	}
	while (len > 0 && (*at == ' ' || *at == '\t')) {
		at++;
		len--;
	}
	n = len;
	while (n > 0 && (at[n - 1] == ' ' || at[n - 1] == '\t'))
		n--;
	r->location = xmalloc(n + 1);
	memcpy(r->location, at, n);
	r->location[n] = '\0';
	r->field_is_location = 0;
	return 0;
}

static int
http_resp_on_headers(http_parser *p)
{
	struct http_resp	*r = p->data;

	r->status = p->status_code;
	r->keep_alive = http_should_keep_alive(p);
	r->headers_done = 1;
	http_parser_pause(p, 1);
	/* 1: no body (HEAD, 1xx, 204 and 304 are known to the parser). */
	return r->head_request ? 1 : 0;
}

static int
http_resp_on_body(http_parser *p, const char *at, size_t len)
{
	struct http_resp	*r = p->data;

	/* The framing since the last body byte: a chunk's CRLF, the next
	 * size line and its extensions. */
	if (r->cursor != NULL && at > r->cursor)
		r->framing_run += (size_t)(at - r->cursor);
	r->cursor = at + len;
	if (r->framing_run > HTTP_CHUNK_LINE_MAX) {
		r->rule = RULE_RESP_SIZE;
		r->why = "chunk-size line or extension over the cap";
		return -1;
	}
	r->framing_run = 0;
	r->body_bytes += len;
	if (r->body_bytes > r->max_body) {
		r->rule = RULE_RESP_SIZE;
		r->why = "response body over max_response_kb";
		return -1;
	}
	return 0;
}

static int
http_resp_on_complete(http_parser *p)
{
	struct http_resp	*r = p->data;

	r->complete = 1;
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings http_resp_settings = {
	.on_header_field = http_resp_on_field,
	.on_header_value = http_resp_on_value,
	.on_headers_complete = http_resp_on_headers,
	.on_body = http_resp_on_body,
	.on_message_complete = http_resp_on_complete,
};

void
http_resp_init(struct http_resp *r, size_t max_headers, int head_request,
    uint64_t max_body)
{
	memset(r, 0, sizeof(*r));
	http_parser_init(&r->p, HTTP_RESPONSE);
	r->p.data = r;
	r->max_headers = max_headers;
	r->head_request = head_request;
	r->max_body = max_body;
}

void
http_resp_clear(struct http_resp *r)
{
	free(r->location);
	r->location = NULL;
}

long
http_resp_feed(struct http_resp *r, const char *buf, size_t len)
{
	size_t		 n, skip = 0;
	enum http_errno	 e;
	int		 body = r->headers_done;

	if (HTTP_PARSER_ERRNO(&r->p) == HPE_PAUSED)
		http_parser_pause(&r->p, 0);
	if (body) {
		/* The parser stops at the head's last LF and reads it
		 * again on the next feed: that byte is still the head's. */
		skip = r->head_left < len ? r->head_left : len;
		r->head_left -= skip;
		r->cursor = buf + skip;
	}
	n = http_parser_execute(&r->p, &http_resp_settings, buf, len);
	e = HTTP_PARSER_ERRNO(&r->p);
	if (body && (e == HPE_OK || e == HPE_PAUSED) && n > skip) {
		r->wire_bytes += n - skip;
		/* And the framing after this feed's last body byte. */
		if (buf + n > r->cursor)
			r->framing_run += (size_t)(buf + n - r->cursor);
	}
	r->cursor = NULL;
	if (!body && r->headers_done)
		r->head_left = len - n;
	if (e == HPE_OK || e == HPE_PAUSED) {
		if (r->wire_bytes > r->max_body) {
			r->rule = RULE_RESP_SIZE;
			r->why = "response over max_response_kb as sent "
			    "(chunk framing included)";
			return -1;
		}
		if (r->framing_run > HTTP_CHUNK_LINE_MAX) {
			r->rule = RULE_RESP_SIZE;
			r->why = "chunk-size line, extension or trailers over "
			    "the cap";
			return -1;
		}
		return (long)n;
	}
	if (r->rule == NULL) {
		r->rule = RULE_UPSTREAM;
		r->why = http_errno_description(e);
	}
	return -1;
}
