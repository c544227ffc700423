/*
 * parse.c: sbxctl's input files.  A task file (DESIGN.md) becomes a
 * Sbx__V1__Task carrying the code it names; an entitlements file becomes
 * the list that `entitlement import` sends.  Both go through common/yaml.h,
 * so unknown keys and bad values are refused, and every error is reported
 * as file:line:col: key: message, never only the first.  Nothing here
 * widens anything: the client only describes the task, policyd decides.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "trace.h"
#include "util.h"
#include "yaml.h"
#include "sbxctl.h"

static const char *const task_file_keys[] = {
	"task", "datasets", "code", "outputs", NULL
};
static const char *const task_file_required[] = { "task", NULL };
static const char *const task_keys[] = {
	"id", "type", "tenant", "user", "traceparent", NULL
};
static const char *const task_required[] = {
	"id", "type", "tenant", "user", NULL
};
static const char *const ent_file_keys[] = { "entitlements", NULL };
static const char *const ent_keys[] = {
	"tenant", "user", "datasets", "hosts", "plan", NULL
};
static const char *const ent_required[] = { "tenant", "user", NULL };
static const char *const plan_keys[] = {
	"cpus", "memory_mb", "pids", "wall_seconds", "scratch_mb", NULL
};

void
parse_strv_add(char ***v, size_t *n, const char *s)
{
	*v = xreallocarray(*v, *n + 1, sizeof(**v));
	(*v)[(*n)++] = xstrdup(s);
}

/* A required name: present, a string, and safe as an identifier. */
static char *
parse_name(struct ydoc *doc, const struct ynode *map, const char *field,
    const char *key, int star_ok)
{
	const struct ynode	*n = ymap_get(map, field);
	const char		*s = NULL;

	if (n == NULL || yget_str(doc, n, key, &s) == -1 || s == NULL)
		return NULL;
	if (!name_ok(s) && !(star_ok && strcmp(s, "*") == 0)) {
		yerr(doc, n, key, "\"%s\" is not a valid name (1-128 of "
		    "A-Z a-z 0-9 . _ - @ :)%s", s,
		    star_ok ? " or \"*\"" : "");
		return NULL;
	}
	return xstrdup(s);
}

/* task.traceparent, optional: checked here as policyd checks it. */
static void
parse_traceparent(struct ydoc *doc, const struct ynode *map, Sbx__V1__Task *t)
{
	const struct ynode	*n = ymap_get(map, "traceparent");
	const char		*s = NULL;
	char			 err[256];

	if (n == NULL || yget_str(doc, n, "task.traceparent", &s) == -1 ||
	    s == NULL)
		return;
	if (trace_parent_check(s, err, sizeof(err)) == -1) {
		yerr(doc, n, "task.traceparent", "%s", err);
		return;
	}
	t->traceparent = xstrdup(s);
}

/* A sequence of names; each bad one is an error of its own. */
static void
parse_names(struct ydoc *doc, const struct ynode *n, const char *key,
    char ***out, size_t *nout)
{
	const char	**v = NULL;
	size_t		  nv = 0;

	if (n == NULL || yget_strseq(doc, n, key, &v, &nv) == -1) {
		free(v);
		return;
	}
	for (size_t i = 0; i < nv; i++) {
		if (!name_ok(v[i])) {
			yerr(doc, n->type == YN_SEQ && i < n->n ?
			    n->items[i] : n, key, "\"%s\" is not a valid "
			    "name (1-128 of A-Z a-z 0-9 . _ - @ :)", v[i]);
			continue;
		}
		parse_strv_add(out, nout, v[i]);
	}
	free(v);
}

/* Read the code file named relative to the task file's directory. */
static void
parse_code(struct ydoc *doc, const struct ynode *n, const char *taskpath,
    Sbx__V1__Task *t)
{
	const char	*rel = NULL;
	char		*tcopy, *path, *ccopy, *data;
	size_t		 len;

	if (n == NULL || yget_str(doc, n, "code", &rel) == -1 || rel == NULL)
		return;
	if (*rel == '\0') {
		yerr(doc, n, "code", "empty file name");
		return;
	}
	tcopy = xstrdup(taskpath);
	if (rel[0] == '/')
		path = xstrdup(rel);
	else
		xasprintf(&path, "%s/%s", dirname(tcopy), rel);
	free(tcopy);
	ccopy = xstrdup(rel);
	if (!name_ok(basename(ccopy))) {
		yerr(doc, n, "code", "file name \"%s\" is not a valid name",
		    basename(ccopy));
		goto out;
	}
	if ((data = read_file(path, SBXCTL_CODE_MAX, &len)) == NULL) {
		yerr(doc, n, "code", "%s: %s", path, errno == EFBIG ?
		    "larger than 2 MiB" : errno == EINVAL ?
		    "not a regular file" : strerror(errno));
		goto out;
	}
	t->code_name = xstrdup(basename(ccopy));
	t->code.data = (uint8_t *)data;
	t->code.len = len;
 out:
	free(ccopy);
	free(path);
}

Sbx__V1__Task *
parse_task_file(const char *path, struct yerrs *errs)
{
	struct ydoc		*doc;
	const struct ynode	*root, *tn;
	Sbx__V1__Task		*t;
	size_t			 nerr = errs->n;

	if ((doc = yaml_load_file(path, errs)) == NULL)
		return NULL;
	if ((root = doc->root) == NULL) {
		yerrs_add(errs, "%s: empty task file", path);
		ydoc_free(doc);
		return NULL;
	}
	t = xmalloc(sizeof(*t));
	sbx__v1__task__init(t);
	/* Check every part even after an error, to report them all. */
	ymap_check(doc, root, "", task_file_keys, task_file_required);
	if (root->type == YN_MAP) {
		if ((tn = ymap_get(root, "task")) != NULL) {
			char	*s;

			ymap_check(doc, tn, "task", task_keys, task_required);

			if ((s = parse_name(doc, tn, "id", "task.id", 0)))
				t->id = s;
			if ((s = parse_name(doc, tn, "type", "task.type", 0)))
				t->type = s;
			if ((s = parse_name(doc, tn, "tenant", "task.tenant",
			    0)))
				t->tenant = s;
			if ((s = parse_name(doc, tn, "user", "task.user", 0)))
				t->user = s;
			parse_traceparent(doc, tn, t);
		}
		parse_names(doc, ymap_get(root, "datasets"), "datasets",
		    &t->datasets, &t->n_datasets);
		parse_names(doc, ymap_get(root, "outputs"), "outputs",
		    &t->outputs, &t->n_outputs);
		parse_code(doc, ymap_get(root, "code"), path, t);
	}
	ydoc_free(doc);
	if (errs->n != nerr) {
		sbx__v1__task__free_unpacked(t, NULL);
		return NULL;
	}
	return t;
}

Sbx__V1__Entitlement *
parse_entitlement_new(void)
{
	Sbx__V1__Entitlement	*e = xmalloc(sizeof(*e));

	sbx__v1__entitlement__init(e);
	e->max_limits = xmalloc(sizeof(*e->max_limits));
	sbx__v1__limits__init(e->max_limits);
	return e;
}

void
parse_entitlements_free(Sbx__V1__Entitlement **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sbx__v1__entitlement__free_unpacked(v[i], NULL);
	free(v);
}

static void
parse_plan(struct ydoc *doc, const struct ynode *pn, const char *what,
    Sbx__V1__Limits *l)
{
	static const char *const u32keys[] = {
		"memory_mb", "pids", "wall_seconds", "scratch_mb"
	};
	uint32_t	*u32dst[] = {
		&l->memory_mb, &l->pids, &l->wall_seconds, &l->scratch_mb
	};
	char		 key[160];
	uint64_t	 v;

	/* Unknown keys are reported; the known ones are still checked. */
	ymap_check(doc, pn, what, plan_keys, NULL);
	snprintf(key, sizeof(key), "%s.cpus", what);
	if (yget_milli(doc, ymap_get(pn, "cpus"), key, 0, 1024 * 1000,
	    &v) == 0 && ymap_get(pn, "cpus") != NULL)
		l->cpus_milli = (uint32_t)v;
	for (size_t i = 0; i < sizeof(u32keys) / sizeof(u32keys[0]); i++) {
		snprintf(key, sizeof(key), "%s.%s", what, u32keys[i]);
		if (yget_uint(doc, ymap_get(pn, u32keys[i]), key, 0,
		    UINT32_MAX, &v) == 0 && ymap_get(pn, u32keys[i]) != NULL)
			*u32dst[i] = (uint32_t)v;
	}
}

int
parse_entitlements_file(const char *path, Sbx__V1__Entitlement ***out,
    size_t *nout, struct yerrs *errs)
{
	struct ydoc		*doc;
	const struct ynode	*root, *list;
	Sbx__V1__Entitlement	**v = NULL;
	size_t			 nv = 0, nerr = errs->n;
	char			 what[64], key[96];

	*out = NULL;
	*nout = 0;
	if ((doc = yaml_load_file(path, errs)) == NULL)
		return -1;
	if ((root = doc->root) == NULL) {
		yerrs_add(errs, "%s: empty entitlements file", path);
		ydoc_free(doc);
		return -1;
	}
	if (ymap_check(doc, root, "", ent_file_keys, ent_file_keys) != 0 ||
	    (list = ymap_get(root, "entitlements")) == NULL)
		goto done;
	if (list->type != YN_SEQ) {
		yerr(doc, list, "entitlements", "expected a sequence of "
		    "entries");
		goto done;
	}
	for (size_t i = 0; i < list->n; i++) {
		const struct ynode	*en = list->items[i];
		Sbx__V1__Entitlement	*e;
		char			*s;

		snprintf(what, sizeof(what), "entitlements[%zu]", i);
		if (ymap_check(doc, en, what, ent_keys, ent_required) != 0 &&
		    en->type != YN_MAP)
			continue;
		e = parse_entitlement_new();
		e->replace = 1;
		snprintf(key, sizeof(key), "%s.tenant", what);
		if ((s = parse_name(doc, en, "tenant", key, 0)) != NULL)
			e->tenant = s;
		snprintf(key, sizeof(key), "%s.user", what);
		if ((s = parse_name(doc, en, "user", key, 1)) != NULL)
			e->user = s;
		snprintf(key, sizeof(key), "%s.datasets", what);
		parse_names(doc, ymap_get(en, "datasets"), key, &e->datasets,
		    &e->n_datasets);
		snprintf(key, sizeof(key), "%s.hosts", what);
		parse_names(doc, ymap_get(en, "hosts"), key, &e->hosts,
		    &e->n_hosts);
		if (ymap_get(en, "plan") != NULL) {
			snprintf(key, sizeof(key), "%s.plan", what);
			parse_plan(doc, ymap_get(en, "plan"), key,
			    e->max_limits);
		}
		v = xreallocarray(v, nv + 1, sizeof(*v));
		v[nv++] = e;
	}
 done:
	ydoc_free(doc);
	if (errs->n != nerr) {
		parse_entitlements_free(v, nv);
		return -1;
	}
	*out = v;
	*nout = nv;
	return 0;
}

/* "key=value" for --limit; cpus takes up to three decimals. */
int
parse_limit(const char *kv, Sbx__V1__Limits *l, char *err, size_t errlen)
{
	const char	*eq = strchr(kv, '=');
	const char	*val, *p;
	size_t		 klen;
	uint64_t	 v = 0, frac = 0;
	int		 nfrac = 0;

	if (eq == NULL) {
		snprintf(err, errlen, "--limit %s: expected key=value", kv);
		return -1;
	}
	klen = (size_t)(eq - kv);
	val = eq + 1;
	if (*val < '0' || *val > '9')
		goto bad;
	for (p = val; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > UINT32_MAX)
			goto bad;
	}
	if (klen == 4 && strncmp(kv, "cpus", 4) == 0) {
		if (*p == '.') {
			for (p++; *p >= '0' && *p <= '9' && nfrac < 3; p++,
			    nfrac++)
				frac = frac * 10 + (uint64_t)(*p - '0');
			if (nfrac == 0)
				goto bad;
			for (; nfrac < 3; nfrac++)
				frac *= 10;
		}
		if (*p != '\0' || v * 1000 + frac > UINT32_MAX)
			goto bad;
		l->cpus_milli = (uint32_t)(v * 1000 + frac);
		return 0;
	}
	if (*p != '\0')
		goto bad;
	if (klen == 9 && strncmp(kv, "memory_mb", 9) == 0)
		l->memory_mb = (uint32_t)v;
	else if (klen == 4 && strncmp(kv, "pids", 4) == 0)
		l->pids = (uint32_t)v;
	else if (klen == 12 && strncmp(kv, "wall_seconds", 12) == 0)
		l->wall_seconds = (uint32_t)v;
	else if (klen == 10 && strncmp(kv, "scratch_mb", 10) == 0)
		l->scratch_mb = (uint32_t)v;
	else {
		snprintf(err, errlen, "--limit %s: unknown key \"%.*s\" "
		    "(cpus, memory_mb, pids, wall_seconds, scratch_mb)", kv,
		    (int)klen, kv);
		return -1;
	}
	return 0;
 bad:
	snprintf(err, errlen, "--limit %s: \"%s\" is not a valid value "
	    "(a whole number%s)", kv, val,
	    klen == 4 && strncmp(kv, "cpus", 4) == 0 ?
	    ", or a decimal with up to 3 digits" : "");
	return -1;
}

/* NAME or NAME@VERSION; version 0 means the highest loaded. */
int
parse_template_ref(const char *s, char **name, uint32_t *version,
    char *err, size_t errlen)
{
	const char	*at = strrchr(s, '@');
	char		*end;
	unsigned long	 v;

	*name = NULL;
	*version = 0;
	if (at == NULL) {
		if (!name_ok(s))
			goto badname;
		*name = xstrdup(s);
		return 0;
	}
	errno = 0;
	v = strtoul(at + 1, &end, 10);
	if (at[1] < '0' || at[1] > '9' || *end != '\0' || errno != 0 ||
	    v == 0 || v > UINT32_MAX) {
		snprintf(err, errlen, "%s: \"%s\" is not a template version "
		    "(a number from 1)", s, at + 1);
		return -1;
	}
	*name = xstrdup(s);
	(*name)[at - s] = '\0';
	if (!name_ok(*name)) {
		free(*name);
		*name = NULL;
		goto badname;
	}
	*version = (uint32_t)v;
	return 0;
 badname:
	snprintf(err, errlen, "%s: not a template name (NAME[@VERSION]) nor "
	    "a file", s);
	return -1;
}

/* A template argument is a file when it looks like one or exists. */
int
parse_is_path(const char *s)
{
	size_t	 n = strlen(s);

	if (strchr(s, '/') != NULL)
		return 1;
	if ((n > 5 && strcmp(s + n - 5, ".yaml") == 0) ||
	    (n > 4 && strcmp(s + n - 4, ".yml") == 0))
		return 1;
	return access(s, F_OK) == 0;
}
