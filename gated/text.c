/*
 * text.c: what gated does to text before an agent sees it, pure functions
 * of their input.  Terminal control never survives: escape sequences (CSI,
 * OSC such as the clipboard write OSC 52, DCS, SOS, PM, APC and the short
 * ESC forms), C0 controls but newline and tab, DEL and C1 controls, in
 * their 7-bit and 8-bit (UTF-8 encoded U+0080..U+009F) forms; a byte that
 * is not valid UTF-8 becomes '?', so a raw 8-bit CSI cannot reach a
 * terminal either.  Truncation is visible ("[sbx: truncated N bytes]") and
 * never splits a character.  Code points a reader does not see but a
 * model does -- bidirectional controls, tag characters, zero-width
 * characters, the line and paragraph separators: the list in
 * common/utf8.c that approvald's quoting uses too -- are removed, so text
 * cannot carry instructions a person reviewing it would miss.  Remote
 * images and links are neutralised (markdown.c) unless the policy keeps
 * them.  What was removed is counted for the result.  The label marks the
 * text as data from the sandbox, and the body cannot close that label.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "utf8.h"
#include "util.h"
#include "gated/gated.h"

#define ESC	0x1b
#define BEL	0x07

/* A CSI's parameters, intermediates and final byte, from j. */
static size_t
text_skip_csi(const uint8_t *s, size_t len, size_t j)
{
	while (j < len && s[j] >= 0x20 && s[j] <= 0x3f)
		j++;
	if (j < len && s[j] >= 0x40 && s[j] <= 0x7e)
		j++;
	return j;
}

/* A control string (OSC, DCS, SOS, PM, APC) up to and including its
 * terminator: BEL, ESC \ or 8-bit ST; CAN and SUB abort it. */
static size_t
text_skip_string(const uint8_t *s, size_t len, size_t j)
{
	while (j < len) {
		if (s[j] == BEL)
			return j + 1;
		if (s[j] == 0x18 || s[j] == 0x1a)
			return j + 1;
		if (s[j] == ESC && j + 1 < len && s[j + 1] == '\\')
			return j + 2;
		if (s[j] == 0xc2 && j + 1 < len && s[j + 1] == 0x9c)
			return j + 2;
		j++;
	}
	return len;
}

/* An escape sequence starting at the ESC at i; returns where text resumes. */
static size_t
text_skip_esc(const uint8_t *s, size_t len, size_t i)
{
	size_t	j = i + 1;

	if (j >= len)
		return len;
	switch (s[j]) {
	case '[':
		return text_skip_csi(s, len, j + 1);
	case ']':
	case 'P':
	case 'X':
	case '^':
	case '_':
		return text_skip_string(s, len, j + 1);
	default:
		break;
	}
	if (s[j] >= 0x20 && s[j] <= 0x2f) {
		/* nF: intermediates, then one final byte (ESC ( B ...). */
		while (j < len && s[j] >= 0x20 && s[j] <= 0x2f)
			j++;
		if (j < len && s[j] >= 0x30 && s[j] <= 0x7e)
			j++;
		return j;
	}
	if (s[j] >= 0x30 && s[j] <= 0x7e)
		return j + 1;	/* ESC c, ESC 7, ESC M ... */
	return j;		/* a lone ESC */
}

size_t
text_strip(const uint8_t *in, size_t len, uint8_t *out, struct text_counts *tc)
{
	struct text_counts	 dummy;
	size_t			 i = 0, o = 0, n;
	uint32_t		 cp;

	if (tc == NULL)
		tc = &dummy;
	while (i < len) {
		if (in[i] == ESC) {
			i = text_skip_esc(in, len, i);
			tc->controls++;
			continue;
		}
		if (in[i] < 0x20 || in[i] == 0x7f) {
			if (in[i] == '\n' || in[i] == '\t')
				out[o++] = in[i];
			else
				tc->controls++;
			i++;
			continue;
		}
		if (in[i] < 0x80) {
			out[o++] = in[i++];
			continue;
		}
		if ((n = utf8_decode(in + i, len - i, &cp)) == 0) {
			/* Overlong forms, surrogates and a character cut
			 * short (at a capture or read cap) land here: each
			 * byte is shown as '?', never decoded into what it
			 * might have spelled. */
			out[o++] = '?';
			tc->invalid++;
			i++;
			continue;
		}
		if (cp >= 0x80 && cp <= 0x9f) {
			/* C1: 8-bit CSI and strings are whole sequences. */
			if (cp == 0x9b)
				i = text_skip_csi(in, len, i + n);
			else if (cp == 0x90 || cp == 0x98 || cp == 0x9d ||
			    cp == 0x9e || cp == 0x9f)
				i = text_skip_string(in, len, i + n);
			else
				i += n;
			tc->controls++;
			continue;
		}
		if (utf8_hidden(cp)) {
			i += n;
			tc->invisible++;
			continue;
		}
		memcpy(out + o, in + i, n);
		o += n;
		i += n;
	}
	return o;
}

uint8_t *
text_truncate(const uint8_t *in, size_t len, size_t max, size_t *outlen,
    int *truncated)
{
	return text_truncate_of(in, len, len, max, outlen, truncated);
}

uint8_t *
text_truncate_of(const uint8_t *in, size_t len, size_t whole, size_t max,
    size_t *outlen, int *truncated)
{
	char	 marker[64];
	uint8_t	*out;
	size_t	 cut = len, mlen = 0;

	*truncated = 0;
	if (whole < len)
		whole = len;
	if (len > max) {
		cut = max;
		/* Back to the start of the character the cut falls in. */
		while (cut > 0 && (in[cut] & 0xc0) == 0x80)
			cut--;
		mlen = (size_t)snprintf(marker, sizeof(marker),
		    "%s[sbx: truncated %zu bytes]",
		    cut > 0 && in[cut - 1] != '\n' ? "\n" : "", whole - cut);
		*truncated = 1;
	}
	out = xmalloc(cut + mlen + 1);
	if (cut > 0)
		memcpy(out, in, cut);
	if (mlen > 0)
		memcpy(out + cut, marker, mlen);
	out[cut + mlen] = '\0';
	*outlen = cut + mlen;
	return out;
}

uint8_t *
text_clean(const uint8_t *in, size_t len, size_t max, int links,
    size_t *outlen, int *truncated, struct text_counts *tc)
{
	uint8_t	*tmp, *md, *out;
	size_t	 n;

	tmp = xmalloc(len + 1);
	n = text_strip(in, len, tmp, tc);
	/* After the strip: an ESC or a zero-width space inside "![" must
	 * not hide an image from the check. */
	if (links == TEXT_LINKS_NEUTRALISE) {
		md = markdown_neutralise(tmp, n, &n, tc != NULL ? &tc->links :
		    NULL);
		free(tmp);
		tmp = md;
	}
	out = text_truncate(tmp, n, max, outlen, truncated);
	free(tmp);
	return out;
}

static void
text_attr(char *dst, size_t dlen, const char *v)
{
	size_t	o = 0;

	for (; v != NULL && *v != '\0' && o + 1 < dlen; v++) {
		unsigned char	c = (unsigned char)*v;

		dst[o++] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		    c == ':' || c == '@' || c == '-') ? (char)c : '_';
	}
	dst[o] = '\0';
}

/* 1 if s (n bytes) begins with a tag that would open or close a label. */
static int
text_is_tag(const uint8_t *s, size_t n)
{
	static const char	open_[] = "<tool-output";
	static const char	close_[] = "</tool-output";

	if (n >= sizeof(open_) - 1 &&
	    strncasecmp((const char *)s, open_, sizeof(open_) - 1) == 0)
		return 1;
	if (n >= sizeof(close_) - 1 &&
	    strncasecmp((const char *)s, close_, sizeof(close_) - 1) == 0)
		return 1;
	return 0;
}

char *
text_label(const char *execution, const char *stream, const uint8_t *body,
    size_t len, size_t *outlen)
{
	char	 exe[160], st[32], head[256];
	char	*out;
	size_t	 hlen, i, o, ntags = 0;
	static const char tail[] = "\n</tool-output>";
	const char	*t;

	text_attr(exe, sizeof(exe), execution);
	text_attr(st, sizeof(st), stream);
	hlen = (size_t)snprintf(head, sizeof(head), "<tool-output "
	    "source=\"sbx\" execution=\"%s\" stream=\"%s\">\n", exe, st);
	for (i = 0; i < len; i++)
		if (body[i] == '<' && text_is_tag(body + i, len - i))
			ntags++;
	out = xmalloc(hlen + len + 3 * ntags + sizeof(tail));
	memcpy(out, head, hlen);
	o = hlen;
	for (i = 0; i < len; i++) {
		if (body[i] == '<' && text_is_tag(body + i, len - i)) {
			memcpy(out + o, "&lt;", 4);
			o += 4;
		} else
			out[o++] = (char)body[i];
	}
	/* A body ending in a newline closes on the next line as it is. */
	t = len > 0 && body[len - 1] == '\n' ? tail + 1 : tail;
	memcpy(out + o, t, strlen(t) + 1);
	o += strlen(t);
	*outlen = o;
	return out;
}

char *
text_name_clean(const char *name, size_t max, int links, int *cut)
{
	const uint8_t	*s = (const uint8_t *)name;
	size_t		 len = strlen(name), i = 0, o = 0, n, mlen;
	uint32_t	 cp;
	uint8_t		*out, *md;

	if (len > GATED_NAME_MAX)
		len = GATED_NAME_MAX;
	out = xmalloc(len + 1);
	/* A name is shown, not read: what would be removed from text is
	 * replaced, so two names never look the same. */
	while (i < len) {
		if (s[i] < 0x20 || s[i] == 0x7f) {
			out[o++] = '?';
			i++;
			continue;
		}
		if ((n = utf8_decode(s + i, len - i, &cp)) == 0 ||
		    utf8_hidden(cp)) {
			out[o++] = '?';
			i += n == 0 ? 1 : n;
			continue;
		}
		memcpy(out + o, s + i, n);
		o += n;
		i += n;
	}
	if (links == TEXT_LINKS_NEUTRALISE) {
		md = markdown_neutralise(out, o, &mlen, NULL);
		free(out);
		out = md;
		o = mlen;
	}
	if (cut != NULL)
		*cut = 0;
	if (o > max) {
		/* Back to the start of the character the cut falls in. */
		while (max > 0 && (out[max] & 0xc0) == 0x80)
			max--;
		o = max;
		if (cut != NULL)
			*cut = 1;
	}
	out[o] = '\0';
	return (char *)out;
}
