/*
 * jsonw.c: the JSON writer of the runtime spec (jsonw.h), libc only.
 *
 * Invariant: the text is what jansson 2.x's json_dumps() with
 * JSON_INDENT(1) | JSON_SORT_KEYS gives for the same document, byte for
 * byte (tests/unit/spec_golden_test.c holds it to files jansson wrote):
 * '"' and '\\' escaped, \b \f \n \r \t by name, every other control
 * character as \u00XX in upper-case hex, '/' and everything from 0x7f up
 * passed through.  A string that is not well-formed UTF-8, or a key out
 * of order, is never written: the writer fails instead.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"
#include "utf8.h"
#include "launchd-sbx/jsonw.h"

static void
jw_fail(struct jw *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
jw_fail(struct jw *w, const char *fmt, ...)
{
	va_list	 ap;

	if (w->error[0] != '\0')
		return;		/* the first failure is the one to tell */
	va_start(ap, fmt);
	vsnprintf(w->error, sizeof(w->error), fmt, ap);
	va_end(ap);
	if (w->error[0] == '\0')
		w->error[0] = '?';
}

static void
jw_put(struct jw *w, const char *s, size_t n)
{
	size_t	 cap;
	char	*b;

	if (w->error[0] != '\0')
		return;
	if (n > SIZE_MAX / 2 - w->len - 2) {
		jw_fail(w, "the spec is too large");
		return;
	}
	if (w->len + n + 2 > w->cap) {
		for (cap = w->cap ? w->cap : 4096; cap < w->len + n + 2;
		    cap *= 2)
			;
		if ((b = realloc(w->buf, cap)) == NULL) {
			jw_fail(w, "out of memory rendering the spec");
			return;
		}
		w->buf = b;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

static void
jw_indent(struct jw *w, int depth)
{
	static const char	 sp[JW_DEPTH + 1] = "                ";

	jw_put(w, "\n", 1);
	jw_put(w, sp, (size_t)depth);
}

/* What comes before a value, or a key: the comma and the line. */
static void
jw_item(struct jw *w)
{
	if (w->afterkey) {
		w->afterkey = 0;
		return;
	}
	if (w->depth == 0)
		return;
	if (!w->empty[w->depth])
		jw_put(w, ",", 1);
	w->empty[w->depth] = 0;
	jw_indent(w, w->depth);
}

int
jw_utf8_ok(const char *s)
{
	const uint8_t	*p = (const uint8_t *)s;
	size_t		 n = strlen(s), k;
	uint32_t	 cp;

	while (n > 0) {
		if ((k = utf8_decode(p, n, &cp)) == 0)
			return 0;
		p += k;
		n -= k;
	}
	return 1;
}

static void
jw_quoted(struct jw *w, const char *s)
{
	const char	*run = s, *p;
	char		 esc[8];

	if (!jw_utf8_ok(s)) {
		jw_fail(w, "a string is not valid UTF-8");
		return;
	}
	jw_put(w, "\"", 1);
	for (p = s; *p != '\0'; p++) {
		unsigned char	 c = (unsigned char)*p;
		const char	*e;

		switch (c) {
		case '"':	e = "\\\""; break;
		case '\\':	e = "\\\\"; break;
		case '\b':	e = "\\b"; break;
		case '\f':	e = "\\f"; break;
		case '\n':	e = "\\n"; break;
		case '\r':	e = "\\r"; break;
		case '\t':	e = "\\t"; break;
		default:
			if (c >= 0x20)
				continue;
			snprintf(esc, sizeof(esc), "\\u%04X", c);
			e = esc;
		}
		jw_put(w, run, (size_t)(p - run));
		jw_put(w, e, strlen(e));
		run = p + 1;
	}
	jw_put(w, run, (size_t)(p - run));
	jw_put(w, "\"", 1);
}

void
jw_init(struct jw *w)
{
	memset(w, 0, sizeof(*w));
	w->empty[0] = 1;
}

void
jw_free(struct jw *w)
{
	free(w->buf);
	jw_init(w);
}

char *
jw_finish(struct jw *w, size_t *len, char *err, size_t errlen)
{
	char	*text;

	if (w->depth != 0 || w->afterkey)
		jw_fail(w, "internal: the spec ends inside a value");
	jw_put(w, "\n", 1);
	if (w->error[0] != '\0') {
		errf(err, errlen, "%s", w->error);
		jw_free(w);
		errno = EINVAL;
		return NULL;
	}
	w->buf[w->len] = '\0';
	text = w->buf;
	if (len != NULL)
		*len = w->len;
	w->buf = NULL;
	jw_init(w);
	return text;
}

static void
jw_open(struct jw *w, const char *c)
{
	jw_item(w);
	if (w->depth + 1 >= JW_DEPTH) {
		jw_fail(w, "internal: the spec nests too deep");
		return;
	}
	jw_put(w, c, 1);
	w->depth++;
	w->empty[w->depth] = 1;
	w->key[w->depth] = NULL;
}

static void
jw_close(struct jw *w, const char *c)
{
	if (w->depth == 0 || w->afterkey) {
		jw_fail(w, "internal: %s without its opening", c);
		return;
	}
	w->depth--;
	if (!w->empty[w->depth + 1])
		jw_indent(w, w->depth);
	jw_put(w, c, 1);
}

void
jw_obj(struct jw *w)
{
	jw_open(w, "{");
}

void
jw_obj_end(struct jw *w)
{
	jw_close(w, "}");
}

void
jw_arr(struct jw *w)
{
	jw_open(w, "[");
}

void
jw_arr_end(struct jw *w)
{
	jw_close(w, "]");
}

void
jw_key(struct jw *w, const char *k)
{
	const char	*prev = w->key[w->depth];

	if (w->depth == 0 || w->afterkey) {
		jw_fail(w, "internal: key \"%s\" outside an object", k);
		return;
	}
	/* Sorted as jansson sorts them: a key out of order would change
	 * the text (and a duplicate the document). */
	if (prev != NULL && strcmp(prev, k) >= 0) {
		jw_fail(w, "internal: key \"%s\" after \"%s\"", k, prev);
		return;
	}
	w->key[w->depth] = k;
	jw_item(w);
	jw_quoted(w, k);
	jw_put(w, ": ", 2);
	w->afterkey = 1;
}

void
jw_str(struct jw *w, const char *s)
{
	jw_item(w);
	jw_quoted(w, s);
}

void
jw_strf(struct jw *w, const char *fmt, ...)
{
	va_list	 ap;
	char	*s;
	int	 n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n == -1) {
		jw_fail(w, "out of memory rendering the spec");
		return;
	}
	jw_str(w, s);
	free(s);
}

void
jw_int(struct jw *w, long long v)
{
	char	 b[32];
	int	 n;

	jw_item(w);
	n = snprintf(b, sizeof(b), "%lld", v);
	jw_put(w, b, (size_t)n);
}

void
jw_bool(struct jw *w, int v)
{
	jw_item(w);
	if (v)
		jw_put(w, "true", 4);
	else
		jw_put(w, "false", 5);
}

void
jw_strings(struct jw *w, const char *const *v)
{
	jw_arr(w);
	for (; *v != NULL; v++)
		jw_str(w, *v);
	jw_arr_end(w);
}
