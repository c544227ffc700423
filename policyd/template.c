/*
 * template.c: the registry of policy templates.  Every *.yaml in the
 * templates directory is parsed with policy_parse_file(); a template is
 * identified by name and version, several versions may be loaded, and the
 * config binds each task type to one of them (the highest when no version
 * is named; a rollout binds its stable version here, and rollout.c sends
 * some tasks to the canary, which must be loaded too).  Templates are
 * parsed once, at start and on SIGHUP, and kept normalised, so a compile
 * copies a message and never reparses.  A reload that finds any error
 * keeps the registry it had.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"
#include "yaml.h"
#include "policyd.h"

struct tmpl_registry *
template_registry_new(void)
{
	return xcalloc(1, sizeof(struct tmpl_registry));
}

static void
template_free(struct tmpl *t)
{
	if (t == NULL)
		return;
	free(t->name);
	free(t->file);
	policy_free(t->policy);
	free(t->packed);
	free(t);
}

void
template_registry_free(struct tmpl_registry *r)
{
	size_t	 i;

	if (r == NULL)
		return;
	for (i = 0; i < r->n; i++)
		template_free(r->t[i]);
	free(r->t);
	for (i = 0; i < r->nactive; i++)
		free(r->active[i].type);
	free(r->active);
	free(r);
}

static int
template_cmp(const struct tmpl *a, const char *name, uint32_t version)
{
	int	 c = strcmp(a->name, name);

	if (c != 0)
		return c;
	return a->version < version ? -1 : a->version > version;
}

const struct tmpl *
template_find(const struct tmpl_registry *r, const char *name,
    uint32_t version)
{
	const struct tmpl	*best = NULL;
	size_t			 i;

	for (i = 0; i < r->n; i++) {
		if (strcmp(r->t[i]->name, name) != 0)
			continue;
		if (version == 0 || r->t[i]->version == version)
			best = r->t[i];	/* sorted: the last is highest */
	}
	return best;
}

static int
template_has_dataset_ref(const Sbx__V1__Policy *p)
{
	size_t	 i;

	for (i = 0; i < p->n_inputs; i++)
		if (strcmp(p->inputs[i]->dataset, "${task.dataset_ref}") == 0)
			return 1;
	return 0;
}

int
template_registry_add(struct tmpl_registry *r, Sbx__V1__Policy *p,
    const char *file)
{
	struct tmpl	*t;
	size_t		 i;

	if (template_find(r, p->name, p->version) != NULL)
		return -1;
	t = xcalloc(1, sizeof(*t));
	/* The template's own hash, listed by -n -v and template_list so an
	 * operator can tell which text is loaded. */
	if (policy_hash(p, t->hash) == -1) {
		free(t);
		return -1;
	}
	policy_normalize(p);
	t->name = xstrdup(p->name);
	t->version = p->version;
	t->file = xstrdup(file != NULL ? file : "");
	t->policy = p;
	/* Every compile starts from a copy: unpacked from these bytes,
	 * which stay as long as the policy (never changed once added). */
	t->packedlen = sbx__v1__policy__get_packed_size(p);
	t->packed = xmalloc(t->packedlen + 1);
	sbx__v1__policy__pack(p, t->packed);
	t->takes_datasets = template_has_dataset_ref(p);
	r->t = xreallocarray(r->t, r->n + 1, sizeof(*r->t));
	for (i = r->n; i > 0 && template_cmp(r->t[i - 1], t->name,
	    t->version) > 0; i--)
		r->t[i] = r->t[i - 1];
	r->t[i] = t;
	r->n++;
	return 0;
}

int
template_registry_activate(struct tmpl_registry *r, const char *type,
    const char *name, uint32_t version)
{
	const struct tmpl	*t;
	size_t			 i;

	if ((t = template_find(r, name, version)) == NULL)
		return -1;
	for (i = 0; i < r->nactive; i++) {
		if (strcmp(r->active[i].type, type) == 0) {
			r->active[i].tmpl = (struct tmpl *)t;
			return 0;
		}
	}
	r->active = xreallocarray(r->active, r->nactive + 1,
	    sizeof(*r->active));
	for (i = r->nactive; i > 0 &&
	    strcmp(r->active[i - 1].type, type) > 0; i--)
		r->active[i] = r->active[i - 1];
	r->active[i].type = xstrdup(type);
	r->active[i].tmpl = (struct tmpl *)t;
	r->nactive++;
	return 0;
}

const struct tmpl *
template_active(const struct tmpl_registry *r, const char *type)
{
	size_t	 lo = 0, hi = r->nactive, mid;
	int	 c;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		c = strcmp(r->active[mid].type, type);
		if (c == 0)
			return r->active[mid].tmpl;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

size_t
template_active_for(const struct tmpl_registry *r, const struct tmpl *t,
    const char ***out)
{
	size_t	 i, n = 0;

	*out = NULL;
	for (i = 0; i < r->nactive; i++) {
		if (r->active[i].tmpl != t)
			continue;
		*out = xreallocarray(*out, n + 1, sizeof(**out));
		(*out)[n++] = r->active[i].type;
	}
	return n;
}

static int
template_is_yaml(const struct dirent *d)
{
	size_t	 n = strlen(d->d_name);

	return d->d_name[0] != '.' && n > 5 &&
	    strcmp(d->d_name + n - 5, ".yaml") == 0;
}

struct tmpl_registry *
template_load(const struct policyd_conf *c, struct yerrs *errs)
{
	struct tmpl_registry	*r;
	struct dirent		**ents = NULL;
	struct stat		  st;
	int			  nodir = 0;
	Sbx__V1__Policy		 *p;
	const struct tmpl	 *other;
	char			 *path;
	size_t			  nerr = errs->n, i;
	int			  nents;

	r = template_registry_new();
	if ((nents = scandir(c->templates, &ents, template_is_yaml,
	    alphasort)) == -1) {
		yerrs_add(errs, "%s:%d:%d: templates: directory %s: %s",
		    c->common.file, c->templates_line, c->templates_col,
		    c->templates, strerror(errno));
		nents = 0;
		nodir = 1;
	}
	for (i = 0; i < (size_t)nents; i++) {
		path = cfg_path(c->templates, ents[i]->d_name);
		free(ents[i]);
		/* A directory or a socket named *.yaml is not a template. */
		if (stat(path, &st) == -1 || !S_ISREG(st.st_mode)) {
			yerrs_add(errs, "%s: not a regular file", path);
			free(path);
			continue;
		}
		if ((p = policy_parse_file(path, errs)) == NULL) {
			free(path);
			continue;
		}
		if ((other = template_find(r, p->name, p->version)) != NULL) {
			yerrs_add(errs, "%s: policy: %s version %u is also "
			    "defined in %s", path, p->name, p->version,
			    other->file);
			policy_free(p);
		} else if (template_registry_add(r, p, path) == -1) {
			yerrs_add(errs, "%s: cannot hash template %s", path,
			    p->name);
			policy_free(p);
		}
		free(path);
	}
	free(ents);
	if (nents == 0 && errs->n == nerr)
		yerrs_add(errs, "%s:%d:%d: templates: no *.yaml template in "
		    "%s", c->common.file, c->templates_line, c->templates_col,
		    c->templates);

	/* Without the directory every binding would fail too; the one
	 * error says it all. */
	for (i = 0; i < c->ntypes && !nodir; i++) {
		const struct policyd_task_type *tt = &c->types[i];

		if (template_registry_activate(r, tt->type, tt->template,
		    tt->version) == 0) {
			/* A rollout's canary must be loaded too: both
			 * versions serve tasks (rollout.c). */
			if (tt->canary != 0 && template_find(r, tt->template,
			    tt->canary) == NULL)
				yerrs_add(errs, "%s:%d:%d: task_types.%s: "
				    "rollout canary: template %s has no "
				    "version %u", c->common.file, tt->line,
				    tt->col, tt->type, tt->template,
				    tt->canary);
			continue;
		}
		if (tt->version != 0 &&
		    template_find(r, tt->template, 0) != NULL)
			yerrs_add(errs, "%s:%d:%d: task_types.%s: template %s "
			    "has no version %u", c->common.file, tt->line,
			    tt->col, tt->type, tt->template, tt->version);
		else
			yerrs_add(errs, "%s:%d:%d: task_types.%s: no template "
			    "named %s in %s", c->common.file, tt->line, tt->col,
			    tt->type, tt->template, c->templates);
	}
	if (errs->n != nerr) {
		template_registry_free(r);
		return NULL;
	}
	return r;
}

void
template_print(const struct tmpl_registry *r)
{
	const char	**types;
	size_t		  i, j, n;

	for (i = 0; i < r->n; i++) {
		const struct tmpl *t = r->t[i];

		printf("template %s version %u hash %s file %s active-for ",
		    t->name, t->version, t->hash, t->file);
		n = template_active_for(r, t, &types);
		if (n == 0)
			printf("-");
		for (j = 0; j < n; j++)
			printf("%s%s", j > 0 ? "," : "", types[j]);
		printf("\n");
		free(types);
	}
	for (i = 0; i < r->nactive; i++)
		printf("task-type %s -> %s@%u\n", r->active[i].type,
		    r->active[i].tmpl->name, r->active[i].tmpl->version);
}
