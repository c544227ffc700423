/*
 * quote.c: text from a capability request made safe to show a person in a
 * terminal.  The request's justification and source were written by code
 * an agent produced, so they may hold escape sequences that clear the
 * screen, rewrite the lines above, set the window title, or text that
 * reads differently than it is (bidirectional overrides, invisible
 * characters).  The console shows such bytes, never obeys them.
 *
 * Invariant: the output of aquote() contains no byte below 0x20 but
 * newline (only where a prefix is given) and tab (likewise), no DEL, no C1
 * control in any encoding, and only well-formed UTF-8; every byte of the
 * input is represented, so nothing is hidden from the approver.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"
#include "util.h"
#include "approvald/approvald.h"

struct aquote_buf {
	char	*p;
	size_t	 len;
	size_t	 cap;
};

static void
aquote_put(struct aquote_buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		while (b->len + n + 1 > b->cap)
			b->cap = b->cap == 0 ? 256 : b->cap * 2;
		b->p = xreallocarray(b->p, b->cap, 1);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
aquote_puts(struct aquote_buf *b, const char *s)
{
	aquote_put(b, s, strlen(s));
}

char *
aquote(const void *buf, size_t len, const char *prefix)
{
	const unsigned char	*s = buf;
	struct aquote_buf	 b = { NULL, 0, 0 };
	char			 tmp[16];
	uint32_t		 cp;
	size_t			 i, n;

	aquote_put(&b, "", 0);
	if (prefix != NULL)
		aquote_puts(&b, prefix);
	for (i = 0; i < len; i += n) {
		n = 1;
		if (s[i] == '\n') {
			if (prefix != NULL) {
				aquote_puts(&b, "\n");
				if (i + 1 < len)
					aquote_puts(&b, prefix);
			} else
				aquote_puts(&b, "\\n");
		} else if (s[i] == '\t')
			aquote_puts(&b, prefix != NULL ? "\t" : "\\t");
		else if (s[i] == '\\')
			aquote_puts(&b, "\\\\");
		else if (s[i] < 0x20) {
			/* Caret notation, as less -U and cat -v show it:
			 * ESC is ^[, BEL ^G, CR ^M. */
			tmp[0] = '^';
			tmp[1] = (char)(s[i] + 0x40);
			aquote_put(&b, tmp, 2);
		} else if (s[i] == 0x7f)
			aquote_puts(&b, "^?");
		else if (s[i] < 0x80)
			aquote_put(&b, (const char *)s + i, 1);
		else if ((n = utf8_decode(s + i, len - i, &cp)) == 0) {
			/* Not UTF-8: a raw 0x9b would be a CSI to an
			 * 8-bit terminal. */
			n = 1;
			snprintf(tmp, sizeof(tmp), "\\x%02x", s[i]);
			aquote_puts(&b, tmp);
		} else if (utf8_hidden(cp)) {
			/* The list gated removes from released text. */
			snprintf(tmp, sizeof(tmp), "\\u{%04X}", (unsigned)cp);
			aquote_puts(&b, tmp);
		} else
			aquote_put(&b, (const char *)s + i, n);
	}
	return b.p;
}

static void
aquote_list(struct aquote_buf *b, const char *label, char **v, size_t n)
{
	char	*q;

	if (n == 0)
		return;
	aquote_puts(b, label);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			aquote_puts(b, ",");
		q = aquote(v[i], strlen(v[i]), NULL);
		aquote_puts(b, q);
		free(q);
	}
}

char *
aquote_what(const Sbx__V1__CapabilityRequest *r)
{
	struct aquote_buf	 b = { NULL, 0, 0 };
	const Sbx__V1__AllowRule *h;
	char			*q;

	aquote_put(&b, "", 0);
	switch (r->what_case) {
	case SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET:
		q = aquote(r->dataset, strlen(r->dataset), NULL);
		aquote_puts(&b, "dataset ");
		aquote_puts(&b, q);
		free(q);
		break;
	case SBX__V1__CAPABILITY_REQUEST__WHAT_HOST:
		h = r->host;
		aquote_puts(&b, "host ");
		if (h == NULL || h->host == NULL) {
			aquote_puts(&b, "(none)");
			break;
		}
		q = aquote(h->host, strlen(h->host), NULL);
		aquote_puts(&b, q);
		free(q);
		aquote_list(&b, " methods ", h->methods, h->n_methods);
		if (h->n_paths == 0)
			aquote_puts(&b, " (any path)");
		aquote_list(&b, " paths ", h->paths, h->n_paths);
		break;
	default:
		aquote_puts(&b, "(nothing)");
		break;
	}
	return b.p;
}

