/*
 * yaml.c: configuration and template loading on libyaml's event API.  The
 * loader builds a small tree of ynodes that remember where they were
 * written (1-based line and column), and the accessors check types and
 * ranges against that tree.  The invariant it upholds: a document that
 * loads is plain data -- one document, no anchors or aliases, no tags, no
 * duplicate or non-scalar keys, at most YAML_MAX_DEPTH levels and at most
 * YAML_MAX_INPUT bytes -- and every problem found is reported with
 * "file:line:col: key: message", all of them rather than only the first,
 * so an operator fixes a file in one pass.
 *
 * struct yerrs is owned by the caller (usually on the stack, zeroed);
 * yerrs_free() releases the messages it holds and leaves it empty, it does
 * not free the struct itself.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libyaml's header shares our name; the build adds common/ with -iquote
 * only, so <yaml.h> is libyaml's and "yaml.h" is ours. */
#include <yaml.h>

#include "util.h"
#include "yaml.h"

#define YAML_MAX_INPUT	(1024 * 1024)
#define YAML_MAX_DEPTH	32

/* One open collection while the tree is being built. */
struct yframe {
	struct ynode	*node;
	char		*path;		/* key path of node, for messages */
};

struct ybuild {
	struct ydoc	*doc;
	struct yframe	 stack[YAML_MAX_DEPTH];
	int		 depth;
	size_t		 nerr;		/* errors recorded while loading */
};

void
yerrs_add(struct yerrs *errs, const char *fmt, ...)
{
	va_list	 ap;
	char	*msg;

	if (errs == NULL)
		return;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) == -1)
		msg = NULL;
	va_end(ap);
	if (msg == NULL)
		msg = xstrdup("out of memory formatting an error message");
	errs->msgs = xreallocarray(errs->msgs, errs->n + 1,
	    sizeof(*errs->msgs));
	errs->msgs[errs->n++] = msg;
}

void
yerrs_free(struct yerrs *errs)
{
	if (errs == NULL)
		return;
	for (size_t i = 0; i < errs->n; i++)
		free(errs->msgs[i]);
	free(errs->msgs);
	errs->msgs = NULL;
	errs->n = 0;
}

static void
yerr_va(struct ydoc *doc, const struct ynode *n, const char *key,
    const char *fmt, va_list ap)
{
	char		*msg;
	const char	*file = doc != NULL && doc->file != NULL ?
			    doc->file : "<input>";

	if (doc == NULL || doc->errs == NULL)
		return;
	if (vasprintf(&msg, fmt, ap) == -1)
		msg = NULL;
	if (n != NULL && key != NULL && *key != '\0')
		yerrs_add(doc->errs, "%s:%d:%d: %s: %s", file, n->line,
		    n->col, key, msg ? msg : "?");
	else if (n != NULL)
		yerrs_add(doc->errs, "%s:%d:%d: %s", file, n->line, n->col,
		    msg ? msg : "?");
	else if (key != NULL && *key != '\0')
		yerrs_add(doc->errs, "%s: %s: %s", file, key, msg ? msg : "?");
	else
		yerrs_add(doc->errs, "%s: %s", file, msg ? msg : "?");
	free(msg);
}

void
yerr(struct ydoc *doc, const struct ynode *n, const char *key,
    const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	yerr_va(doc, n, key, fmt, ap);
	va_end(ap);
}

/* A loader error: counted so the load fails even when errs is NULL. */
static void
ybuild_err(struct ybuild *b, int line, int col, const char *key,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void
ybuild_err(struct ybuild *b, int line, int col, const char *key,
    const char *fmt, ...)
{
	struct ynode	 at = { .line = line, .col = col };
	va_list		 ap;

	b->nerr++;
	va_start(ap, fmt);
	yerr_va(b->doc, &at, key, fmt, ap);
	va_end(ap);
}

static void
ynode_free(struct ynode *n)
{
	if (n == NULL)
		return;
	free(n->scalar);
	for (size_t i = 0; i < n->n; i++) {
		if (n->keys != NULL)
			ynode_free(n->keys[i]);
		ynode_free(n->items[i]);
	}
	/* A map may hold one more key than values while it is built. */
	if (n->type == YN_MAP && n->keys != NULL && n->items != NULL &&
	    n->keys[n->n] != NULL)
		ynode_free(n->keys[n->n]);
	free(n->keys);
	free(n->items);
	free(n);
}

void
ydoc_free(struct ydoc *doc)
{
	if (doc == NULL)
		return;
	ynode_free(doc->root);
	free(doc->file);
	free(doc);
}

static struct ynode *
ynode_new(enum ynode_type type, const yaml_mark_t *mark)
{
	struct ynode	*n = xcalloc(1, sizeof(*n));

	n->type = type;
	n->line = (int)mark->line + 1;
	n->col = (int)mark->column + 1;
	return n;
}

/* The key path a new child of the innermost open collection gets. */
static char *
ybuild_childpath(struct ybuild *b)
{
	struct yframe	*f;
	struct ynode	*p;
	char		*s;

	if (b->depth == 0)
		return xstrdup("");
	f = &b->stack[b->depth - 1];
	p = f->node;
	if (p->type == YN_SEQ) {
		xasprintf(&s, "%s[%zu]", f->path, p->n);
		return s;
	}
	/* A map: the child is a key when keys and values are balanced. */
	if (p->keys[p->n] == NULL || p->keys[p->n]->scalar == NULL)
		return xstrdup(f->path);
	if (*f->path == '\0')
		return xstrdup(p->keys[p->n]->scalar);
	xasprintf(&s, "%s.%s", f->path, p->keys[p->n]->scalar);
	return s;
}

/*
 * Attach n to the innermost open collection (or make it the root).  In a
 * map, keys and values alternate: keys[n] holds a pending key until its
 * value arrives.  Arrays always have room for one more entry than n.
 */
static void
ybuild_attach(struct ybuild *b, struct ynode *n, const char *path)
{
	struct ynode	*p;

	if (b->depth == 0) {
		b->doc->root = n;
		return;
	}
	p = b->stack[b->depth - 1].node;
	if (p->type == YN_SEQ) {
		p->items = xreallocarray(p->items, p->n + 2, sizeof(*p->items));
		p->items[p->n++] = n;
		p->items[p->n] = NULL;
		return;
	}
	if (p->keys[p->n] == NULL) {
		/* n is a key. */
		if (n->type != YN_SCALAR) {
			ybuild_err(b, n->line, n->col, path,
			    "mapping keys must be plain strings, not %s",
			    n->type == YN_MAP ? "mappings" : "lists");
		} else {
			for (size_t i = 0; i < p->n; i++) {
				if (p->keys[i]->scalar != NULL &&
				    strcmp(p->keys[i]->scalar, n->scalar) == 0) {
					char	*kp;

					if (*path == '\0')
						kp = xstrdup(n->scalar);
					else
						xasprintf(&kp, "%s.%s", path,
						    n->scalar);
					ybuild_err(b, n->line, n->col, kp,
					    "duplicate key (first at line %d)",
					    p->keys[i]->line);
					free(kp);
					break;
				}
			}
		}
		p->keys[p->n] = n;
		return;
	}
	p->items[p->n++] = n;
	p->keys = xreallocarray(p->keys, p->n + 1, sizeof(*p->keys));
	p->items = xreallocarray(p->items, p->n + 1, sizeof(*p->items));
	p->keys[p->n] = NULL;
	p->items[p->n] = NULL;
}

static void
ybuild_open(struct ybuild *b, enum ynode_type type, const yaml_mark_t *mark)
{
	struct ynode	*n = ynode_new(type, mark);
	char		*path = ybuild_childpath(b);

	n->keys = type == YN_MAP ? xcalloc(1, sizeof(*n->keys)) : NULL;
	n->items = xcalloc(1, sizeof(*n->items));
	ybuild_attach(b, n, path);
	b->stack[b->depth].node = n;
	b->stack[b->depth].path = path;
	b->depth++;
}

static void
ybuild_close(struct ybuild *b)
{
	if (b->depth == 0)
		return;
	b->depth--;
	free(b->stack[b->depth].path);
	b->stack[b->depth].path = NULL;
}

static int
ybuild_check_props(struct ybuild *b, const yaml_event_t *ev,
    const yaml_char_t *anchor, const yaml_char_t *tag, int implicit)
{
	int	 line = (int)ev->start_mark.line + 1;
	int	 col = (int)ev->start_mark.column + 1;
	char	*path = ybuild_childpath(b);
	int	 bad = 0;

	if (anchor != NULL) {
		ybuild_err(b, line, col, path,
		    "anchors (&%s) are not allowed", (const char *)anchor);
		bad = 1;
	}
	if (tag != NULL && !implicit) {
		ybuild_err(b, line, col, path, "tags (%s) are not allowed",
		    (const char *)tag);
		bad = 1;
	}
	free(path);
	return bad;
}

static int
ybuild_event(struct ybuild *b, yaml_event_t *ev, int *ndocs)
{
	struct ynode	*n;
	char		*path;
	int		 line = (int)ev->start_mark.line + 1;
	int		 col = (int)ev->start_mark.column + 1;

	switch (ev->type) {
	case YAML_DOCUMENT_START_EVENT:
		if (++*ndocs > 1) {
			ybuild_err(b, line, col, NULL,
			    "only one YAML document is allowed");
			return -1;
		}
		return 0;
	case YAML_ALIAS_EVENT:
		path = ybuild_childpath(b);
		ybuild_err(b, line, col, path, "aliases (*%s) are not allowed",
		    (const char *)ev->data.alias.anchor);
		/* A placeholder keeps keys and values paired. */
		n = ynode_new(YN_SCALAR, &ev->start_mark);
		n->scalar = xstrdup("");
		ybuild_attach(b, n, path);
		free(path);
		return 0;
	case YAML_SCALAR_EVENT:
		ybuild_check_props(b, ev, ev->data.scalar.anchor,
		    ev->data.scalar.tag, ev->data.scalar.plain_implicit ||
		    ev->data.scalar.quoted_implicit);
		path = ybuild_childpath(b);
		n = ynode_new(YN_SCALAR, &ev->start_mark);
		if (memchr(ev->data.scalar.value, '\0',
		    ev->data.scalar.length) != NULL) {
			ybuild_err(b, line, col, path,
			    "strings must not contain NUL bytes");
			n->scalar = xstrdup("");
		} else {
			n->scalar = xmalloc(ev->data.scalar.length + 1);
			memcpy(n->scalar, ev->data.scalar.value,
			    ev->data.scalar.length);
			n->scalar[ev->data.scalar.length] = '\0';
		}
		n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
		ybuild_attach(b, n, path);
		free(path);
		return 0;
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT:
		if (ev->type == YAML_SEQUENCE_START_EVENT)
			ybuild_check_props(b, ev,
			    ev->data.sequence_start.anchor,
			    ev->data.sequence_start.tag,
			    ev->data.sequence_start.implicit);
		else
			ybuild_check_props(b, ev,
			    ev->data.mapping_start.anchor,
			    ev->data.mapping_start.tag,
			    ev->data.mapping_start.implicit);
		if (b->depth >= YAML_MAX_DEPTH) {
			path = ybuild_childpath(b);
			ybuild_err(b, line, col, path,
			    "nested deeper than %d levels", YAML_MAX_DEPTH);
			free(path);
			return -1;
		}
		ybuild_open(b, ev->type == YAML_SEQUENCE_START_EVENT ?
		    YN_SEQ : YN_MAP, &ev->start_mark);
		return 0;
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		ybuild_close(b);
		return 0;
	default:
		return 0;
	}
}

struct ydoc *
yaml_load_buf(const char *name, const char *buf, size_t len,
    struct yerrs *errs)
{
	yaml_parser_t	 parser;
	yaml_event_t	 ev;
	struct ybuild	 b;
	struct ydoc	*doc;
	int		 ndocs = 0, done = 0;

	doc = xcalloc(1, sizeof(*doc));
	doc->file = xstrdup(name != NULL ? name : "<input>");
	doc->errs = errs;
	memset(&b, 0, sizeof(b));
	b.doc = doc;

	if (len > YAML_MAX_INPUT) {
		yerr(doc, NULL, NULL, "larger than %d bytes (1 MiB), refused",
		    YAML_MAX_INPUT);
		ydoc_free(doc);
		return NULL;
	}
	if (!yaml_parser_initialize(&parser)) {
		yerr(doc, NULL, NULL, "cannot initialise the YAML parser");
		ydoc_free(doc);
		return NULL;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	while (!done) {
		if (!yaml_parser_parse(&parser, &ev)) {
			const char	*ctx = parser.context;

			b.nerr++;
			if (ctx != NULL)
				yerrs_add(errs, "%s:%d:%d: syntax error: %s %s",
				    doc->file,
				    (int)parser.problem_mark.line + 1,
				    (int)parser.problem_mark.column + 1,
				    parser.problem ? parser.problem : "?", ctx);
			else
				yerrs_add(errs, "%s:%d:%d: syntax error: %s",
				    doc->file,
				    (int)parser.problem_mark.line + 1,
				    (int)parser.problem_mark.column + 1,
				    parser.problem ? parser.problem :
				    "malformed YAML");
			break;
		}
		if (ev.type == YAML_STREAM_END_EVENT)
			done = 1;
		else if (ybuild_event(&b, &ev, &ndocs) == -1)
			done = 1;
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	while (b.depth > 0)
		ybuild_close(&b);
	if (b.nerr > 0) {
		ydoc_free(doc);
		return NULL;
	}
	return doc;
}

struct ydoc *
yaml_load_file(const char *path, struct yerrs *errs)
{
	struct ydoc	*doc;
	char		*buf;
	size_t		 len;

	if ((buf = read_file(path, YAML_MAX_INPUT, &len)) == NULL) {
		if (errno == EFBIG)
			yerrs_add(errs, "%s: larger than %d bytes (1 MiB), "
			    "refused", path, YAML_MAX_INPUT);
		else
			yerrs_add(errs, "%s: %s", path, strerror(errno));
		return NULL;
	}
	doc = yaml_load_buf(path, buf, len, errs);
	free(buf);
	return doc;
}

struct ynode *
ymap_get(const struct ynode *map, const char *key)
{
	if (map == NULL || map->type != YN_MAP)
		return NULL;
	for (size_t i = 0; i < map->n; i++)
		if (map->keys[i]->scalar != NULL &&
		    strcmp(map->keys[i]->scalar, key) == 0)
			return map->items[i];
	return NULL;
}

static char *
ykey_join(const char *what, const char *key)
{
	char	*s;

	if (what == NULL || *what == '\0')
		return xstrdup(key);
	xasprintf(&s, "%s.%s", what, key);
	return s;
}

int
ymap_check(struct ydoc *doc, const struct ynode *map, const char *what,
    const char *const allowed[], const char *const required[])
{
	int	 nerr = 0;
	char	*kp;

	if (map == NULL)
		return 0;
	if (map->type != YN_MAP) {
		yerr(doc, map, what != NULL && *what != '\0' ? what : "document",
		    "must be a mapping of keys to values");
		return 1;
	}
	for (size_t i = 0; i < map->n; i++) {
		const char	*k = map->keys[i]->scalar;
		int		 ok = 0;

		for (size_t j = 0; allowed != NULL && allowed[j] != NULL; j++)
			if (strcmp(allowed[j], k) == 0)
				ok = 1;
		if (ok)
			continue;
		kp = ykey_join(what, k);
		yerr(doc, map->keys[i], kp, "unknown key \"%s\"%s%s", k,
		    what != NULL && *what != '\0' ? " in " : "",
		    what != NULL ? what : "");
		free(kp);
		nerr++;
	}
	for (size_t j = 0; required != NULL && required[j] != NULL; j++) {
		if (ymap_get(map, required[j]) != NULL)
			continue;
		kp = ykey_join(what, required[j]);
		yerr(doc, map, kp, "required key is missing");
		free(kp);
		nerr++;
	}
	return nerr;
}

/* A plain scalar that YAML reads as null: an empty value, ~ or null. */
static int
yscalar_isnull(const struct ynode *n)
{
	if (n->quoted)
		return 0;
	return *n->scalar == '\0' || strcmp(n->scalar, "~") == 0 ||
	    strcmp(n->scalar, "null") == 0 || strcmp(n->scalar, "Null") == 0 ||
	    strcmp(n->scalar, "NULL") == 0;
}

static const char *
ytype_name(const struct ynode *n)
{
	switch (n->type) {
	case YN_MAP:
		return "a mapping";
	case YN_SEQ:
		return "a list";
	default:
		return yscalar_isnull(n) ? "nothing" : "a string";
	}
}

int
yget_str(struct ydoc *doc, const struct ynode *n, const char *key,
    const char **out)
{
	if (n == NULL)
		return 0;
	if (n->type != YN_SCALAR || yscalar_isnull(n)) {
		yerr(doc, n, key, "must be a string, got %s", ytype_name(n));
		return -1;
	}
	*out = n->scalar;
	return 0;
}

/* Strict unsigned decimal: digits only, no sign, no leading zeros. */
static int
yparse_uint(const char *s, uint64_t *out)
{
	uint64_t	 v = 0;

	if (*s == '\0' || (s[0] == '0' && s[1] != '\0'))
		return -1;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

int
yget_uint(struct ydoc *doc, const struct ynode *n, const char *key,
    uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t	 v;

	if (n == NULL)
		return 0;
	if (n->type != YN_SCALAR) {
		yerr(doc, n, key, "must be an integer from %ju to %ju, got %s",
		    (uintmax_t)min, (uintmax_t)max, ytype_name(n));
		return -1;
	}
	if (n->quoted || yparse_uint(n->scalar, &v) == -1 || v < min ||
	    v > max) {
		yerr(doc, n, key, "must be an integer from %ju to %ju, got "
		    "\"%s\"", (uintmax_t)min, (uintmax_t)max, n->scalar);
		return -1;
	}
	*out = v;
	return 0;
}

/* Print thousandths as a short decimal: 1500 -> "1.5". */
static void
ymilli_fmt(uint64_t m, char *buf, size_t len)
{
	uint64_t	 frac = m % 1000;

	if (frac == 0)
		snprintf(buf, len, "%ju", (uintmax_t)(m / 1000));
	else if (frac % 100 == 0)
		snprintf(buf, len, "%ju.%ju", (uintmax_t)(m / 1000),
		    (uintmax_t)(frac / 100));
	else if (frac % 10 == 0)
		snprintf(buf, len, "%ju.%02ju", (uintmax_t)(m / 1000),
		    (uintmax_t)(frac / 10));
	else
		snprintf(buf, len, "%ju.%03ju", (uintmax_t)(m / 1000),
		    (uintmax_t)frac);
}

static int
yparse_milli(const char *s, uint64_t *out)
{
	const char	*dot = strchr(s, '.');
	char		 ipart[32];
	uint64_t	 whole, frac = 0;
	size_t		 ilen, flen;

	ilen = dot != NULL ? (size_t)(dot - s) : strlen(s);
	if (ilen == 0 || ilen >= sizeof(ipart))
		return -1;
	memcpy(ipart, s, ilen);
	ipart[ilen] = '\0';
	if (yparse_uint(ipart, &whole) == -1)
		return -1;
	if (dot != NULL) {
		flen = strlen(dot + 1);
		if (flen == 0 || flen > 3)
			return -1;
		for (size_t i = 0; i < 3; i++) {
			char	 c = i < flen ? dot[1 + i] : '0';

			if (c < '0' || c > '9')
				return -1;
			frac = frac * 10 + (uint64_t)(c - '0');
		}
	}
	if (whole > (UINT64_MAX - frac) / 1000)
		return -1;
	*out = whole * 1000 + frac;
	return 0;
}

int
yget_milli(struct ydoc *doc, const struct ynode *n, const char *key,
    uint64_t min_milli, uint64_t max_milli, uint64_t *out)
{
	char		 lo[32], hi[32];
	uint64_t	 v;

	if (n == NULL)
		return 0;
	ymilli_fmt(min_milli, lo, sizeof(lo));
	ymilli_fmt(max_milli, hi, sizeof(hi));
	if (n->type != YN_SCALAR) {
		yerr(doc, n, key, "must be a number from %s to %s with at "
		    "most 3 decimals, got %s", lo, hi, ytype_name(n));
		return -1;
	}
	if (n->quoted || yparse_milli(n->scalar, &v) == -1 || v < min_milli ||
	    v > max_milli) {
		yerr(doc, n, key, "must be a number from %s to %s with at "
		    "most 3 decimals, got \"%s\"", lo, hi, n->scalar);
		return -1;
	}
	*out = v;
	return 0;
}

int
yget_bool(struct ydoc *doc, const struct ynode *n, const char *key, int *out)
{
	if (n == NULL)
		return 0;
	if (n->type == YN_SCALAR && !n->quoted) {
		if (strcmp(n->scalar, "true") == 0) {
			*out = 1;
			return 0;
		}
		if (strcmp(n->scalar, "false") == 0) {
			*out = 0;
			return 0;
		}
	}
	if (n->type == YN_SCALAR)
		yerr(doc, n, key, "must be true or false, got \"%s\"",
		    n->scalar);
	else
		yerr(doc, n, key, "must be true or false, got %s",
		    ytype_name(n));
	return -1;
}

int
yget_enum(struct ydoc *doc, const struct ynode *n, const char *key,
    const char *const choices[], int *out)
{
	char	*list = NULL, *tmp;

	if (n == NULL)
		return 0;
	if (n->type == YN_SCALAR) {
		for (int i = 0; choices[i] != NULL; i++) {
			if (strcmp(choices[i], n->scalar) == 0) {
				*out = i;
				return 0;
			}
		}
	}
	for (int i = 0; choices[i] != NULL; i++) {
		if (list == NULL) {
			list = xstrdup(choices[i]);
			continue;
		}
		xasprintf(&tmp, "%s, %s", list, choices[i]);
		free(list);
		list = tmp;
	}
	if (n->type == YN_SCALAR)
		yerr(doc, n, key, "must be one of %s, got \"%s\"",
		    list ? list : "", n->scalar);
	else
		yerr(doc, n, key, "must be one of %s, got %s",
		    list ? list : "", ytype_name(n));
	free(list);
	return -1;
}

int
yget_strseq(struct ydoc *doc, const struct ynode *n, const char *key,
    const char ***out, size_t *np)
{
	const char	**v;
	char		 *ik;
	int		  bad = 0;

	if (n == NULL)
		return 0;
	*out = NULL;
	*np = 0;
	if (n->type != YN_SEQ) {
		yerr(doc, n, key, "must be a list of strings, got %s",
		    ytype_name(n));
		return -1;
	}
	for (size_t i = 0; i < n->n; i++) {
		if (n->items[i]->type == YN_SCALAR &&
		    !yscalar_isnull(n->items[i]))
			continue;
		xasprintf(&ik, "%s[%zu]", key != NULL ? key : "", i);
		yerr(doc, n->items[i], ik, "must be a string, got %s",
		    ytype_name(n->items[i]));
		free(ik);
		bad = 1;
	}
	if (bad)
		return -1;
	if (n->n == 0)
		return 0;
	v = xreallocarray(NULL, n->n, sizeof(*v));
	for (size_t i = 0; i < n->n; i++)
		v[i] = n->items[i]->scalar;
	*out = v;
	*np = n->n;
	return 0;
}
