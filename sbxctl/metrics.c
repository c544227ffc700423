/*
 * metrics.c: `sbxctl metrics --prometheus`, every daemon's counters as one
 * Prometheus text exposition (format 0.0.4) that a scraper or promtool
 * accepts.  Each daemon renders its own families; concatenated, two
 * daemons that name the same family would repeat its HELP and TYPE, which
 * the format forbids, and its samples would be split in two groups.  So
 * the texts are merged by family: each family once, its HELP and TYPE
 * (the first daemon's) before all its samples, in the order families
 * first appear.  Comments other than HELP and TYPE are dropped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "sbxctl.h"

struct mfam {
	char	*name;
	char	*help;		/* the whole "# HELP" line, or NULL */
	char	*type;		/* the whole "# TYPE" line, or NULL */
	char	*samples;	/* lines, each ending in '\n' */
	size_t	 len;
};

struct mset {
	struct mfam	*v;
	size_t		 n;
};

static char *
mstrndup(const char *s, size_t len)
{
	char	*t = xreallocarray(NULL, len + 1, 1);

	memcpy(t, s, len);
	t[len] = '\0';
	return t;
}

static struct mfam *
mset_get(struct mset *m, const char *name, size_t len)
{
	for (size_t i = 0; i < m->n; i++)
		if (strlen(m->v[i].name) == len &&
		    strncmp(m->v[i].name, name, len) == 0)
			return &m->v[i];
	m->v = xreallocarray(m->v, m->n + 1, sizeof(*m->v));
	memset(&m->v[m->n], 0, sizeof(m->v[m->n]));
	m->v[m->n].name = mstrndup(name, len);
	return &m->v[m->n++];
}

/* The family a sample of name belongs to: a declared one equal to the
 * name, or to the name less a histogram's or summary's suffix. */
static struct mfam *
mset_family(struct mset *m, const char *name, size_t len)
{
	static const char *const sfx[] = { "_bucket", "_sum", "_count" };

	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		size_t	 sl = strlen(sfx[i]);

		if (len <= sl || strncmp(name + len - sl, sfx[i], sl) != 0)
			continue;
		for (size_t j = 0; j < m->n; j++)
			if (m->v[j].type != NULL &&
			    strlen(m->v[j].name) == len - sl &&
			    strncmp(m->v[j].name, name, len - sl) == 0)
				return &m->v[j];
	}
	return mset_get(m, name, len);
}

static void
mfam_add(struct mfam *f, const char *line, size_t len)
{
	f->samples = xreallocarray(f->samples, f->len + len + 2, 1);
	memcpy(f->samples + f->len, line, len);
	f->len += len;
	f->samples[f->len++] = '\n';
	f->samples[f->len] = '\0';
}

/* "# HELP name ..." or "# TYPE name ...": the family, else NULL. */
static struct mfam *
mset_comment(struct mset *m, const char *line, size_t len, char ***slot)
{
	struct mfam	*f;
	const char	*name, *end;
	int		 help;

	if (len > 7 && strncmp(line, "# HELP ", 7) == 0)
		help = 1;
	else if (len > 7 && strncmp(line, "# TYPE ", 7) == 0)
		help = 0;
	else
		return NULL;
	name = line + 7;
	for (end = name; end < line + len && *end != ' '; end++)
		;
	f = mset_get(m, name, (size_t)(end - name));
	*slot = help ? &f->help : &f->type;
	return f;
}

void
metrics_merge(FILE *out, char *const *texts, size_t n)
{
	struct mset	 m = { NULL, 0 };

	for (size_t t = 0; t < n; t++) {
		const char	*p = texts[t], *nl, *e;
		size_t		 len;
		char		**slot;

		for (; p != NULL && *p != '\0'; p = *nl != '\0' ? nl + 1 : nl) {
			if ((nl = strchr(p, '\n')) == NULL)
				nl = p + strlen(p);
			len = (size_t)(nl - p);
			if (len == 0)
				continue;
			if (p[0] == '#') {
				if (mset_comment(&m, p, len, &slot) != NULL &&
				    *slot == NULL)
					*slot = mstrndup(p, len);
				continue;
			}
			for (e = p; e < nl && *e != '{' && *e != ' '; e++)
				;
			mfam_add(mset_family(&m, p, (size_t)(e - p)), p, len);
		}
	}
	for (size_t i = 0; i < m.n; i++) {
		struct mfam	*f = &m.v[i];

		if (f->samples != NULL || f->type != NULL) {
			if (f->help != NULL)
				fprintf(out, "%s\n", f->help);
			if (f->type != NULL)
				fprintf(out, "%s\n", f->type);
			if (f->samples != NULL)
				fputs(f->samples, out);
		}
		free(f->name);
		free(f->help);
		free(f->type);
		free(f->samples);
	}
	free(m.v);
}
