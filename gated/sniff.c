/*
 * sniff.c: a file's type from its content (libmagic, on the bytes gated
 * read, never on a path), and the table that says which content types a
 * name's extension may hold.  A file is released only when the two agree,
 * so a PNG cannot leave as "report.csv" nor an ELF as "data.json".  The
 * type a file is released as is the extension's (a CSV that libmagic
 * calls text/plain leaves as text/csv); the policy's allowed_types is
 * checked against that.  Compressed content is not looked into: a gzip is
 * a gzip, whatever it holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <magic.h>

#include "util.h"
#include "gated/gated.h"

struct sniff {
	magic_t	 m;
};

struct sniff_ext {
	const char	*ext;		/* lower case, without the dot */
	const char	*type;		/* released as */
	const char	*content[5];	/* libmagic types that agree */
};

#define EMPTY	"application/x-empty"

static const struct sniff_ext sniff_table[] = {
	{ "csv", "text/csv",
	    { "text/csv", "text/plain", "application/csv", EMPTY, NULL } },
	{ "tsv", "text/tab-separated-values",
	    { "text/plain", "text/tab-separated-values", "text/csv", EMPTY,
	    NULL } },
	{ "txt", "text/plain", { "text/plain", EMPTY, NULL } },
	{ "log", "text/plain", { "text/plain", EMPTY, NULL } },
	{ "md", "text/markdown",
	    { "text/plain", "text/markdown", "text/x-markdown", EMPTY, NULL } },
	{ "json", "application/json",
	    { "application/json", "text/plain", EMPTY, NULL } },
	{ "jsonl", "application/x-ndjson",
	    { "application/json", "text/plain", "application/x-ndjson", EMPTY,
	    NULL } },
	{ "xml", "application/xml",
	    { "text/xml", "application/xml", EMPTY, NULL } },
	{ "png", "image/png", { "image/png", NULL } },
	{ "jpg", "image/jpeg", { "image/jpeg", NULL } },
	{ "jpeg", "image/jpeg", { "image/jpeg", NULL } },
	{ "gif", "image/gif", { "image/gif", NULL } },
	{ "pdf", "application/pdf", { "application/pdf", NULL } },
	{ "gz", "application/gzip",
	    { "application/gzip", "application/x-gzip", NULL } },
	{ "zip", "application/zip", { "application/zip", NULL } },
};

static const char *const sniff_text[] = {
	"text/csv", "text/tab-separated-values", "text/plain",
	"text/markdown", "application/json", "application/x-ndjson",
	"application/xml", NULL
};

struct sniff *
sniff_open(char *err, size_t errlen)
{
	struct sniff	*s;
	magic_t		 m;

	/* No decompression, no following, no looking into containers or
	 * executables: the type of the bytes as they are. */
	m = magic_open(MAGIC_MIME_TYPE | MAGIC_NO_CHECK_COMPRESS |
	    MAGIC_NO_CHECK_TAR | MAGIC_NO_CHECK_ELF | MAGIC_NO_CHECK_CDF |
	    MAGIC_ERROR);
	if (m == NULL) {
		snprintf(err, errlen, "libmagic cannot be opened");
		return NULL;
	}
	if (magic_load(m, NULL) == -1) {
		snprintf(err, errlen, "libmagic's database cannot be loaded: "
		    "%s", magic_error(m) != NULL ? magic_error(m) : "?");
		magic_close(m);
		return NULL;
	}
	s = xcalloc(1, sizeof(*s));
	s->m = m;
	return s;
}

void
sniff_close(struct sniff *s)
{
	if (s == NULL)
		return;
	magic_close(s->m);
	free(s);
}

const char *
sniff_type(struct sniff *s, const void *buf, size_t len)
{
	const char	*t;

	if (len == 0)
		return EMPTY;
	if ((t = magic_buffer(s->m, buf, len)) == NULL || t[0] == '\0')
		return "application/octet-stream";
	return t;
}

static const struct sniff_ext *
sniff_ext_of(const char *name)
{
	const char	*base, *dot;

	base = strrchr(name, '/');
	base = base != NULL ? base + 1 : name;
	if ((dot = strrchr(base, '.')) == NULL || dot == base)
		return NULL;
	for (size_t i = 0; i < sizeof(sniff_table) / sizeof(sniff_table[0]);
	    i++)
		if (strcasecmp(dot + 1, sniff_table[i].ext) == 0)
			return &sniff_table[i];
	return NULL;
}

int
sniff_known_ext(const char *name)
{
	return sniff_ext_of(name) != NULL;
}

const char *
sniff_agree(const char *name, const char *content_type)
{
	const struct sniff_ext	*e;

	if ((e = sniff_ext_of(name)) == NULL || content_type == NULL)
		return NULL;
	for (size_t i = 0; e->content[i] != NULL; i++)
		if (strcmp(e->content[i], content_type) == 0)
			return e->type;
	return NULL;
}

int
sniff_is_text(const char *type)
{
	for (size_t i = 0; sniff_text[i] != NULL; i++)
		if (strcmp(sniff_text[i], type) == 0)
			return 1;
	return 0;
}
