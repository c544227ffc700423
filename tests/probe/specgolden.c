/*
 * specgolden.c: write tests/golden/spec/<name>.json, the runtime spec
 * launchd-sbx renders for each parameter set of tests/unit/spec_cases.h,
 * exactly as it lands in config.json.  tests/unit/spec_golden_test.c
 * compares the renderer with these files; run this only when the spec is
 * meant to change, and review the diff.
 *
 *   specgolden DIR
 *
 * This version drives the jansson-based spec_build() and a copy of
 * pool.c's pool_respec(): it wrote the files the libc-only renderer has
 * to reproduce.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "launchd-sbx/spec.h"
#include "launchd-sbx/launchd.h"
#include "tests/unit/spec_cases.h"

#define POOL_RUN_DIR		"/run/sbx/pool"

/* pool.c's pool_respec() at 591472d, verbatim. */
static void
pool_respec(json_t *spec, const char *id, const char *key, const char *run,
    int egress, int warm)
{
	json_t	*proc = json_object_get(spec, "process");
	json_t	*env = json_object_get(proc, "env");
	json_t	*mounts = json_object_get(spec, "mounts");
	size_t	 i;

	json_t	*args = json_pack("[s]", SPEC_INIT);

	if (egress) {
		json_array_append_new(args, json_string("-s"));
		json_array_append_new(args,
		    json_string(POOL_RUN_DIR "/" POOL_EGRESS_SOCK));
		json_array_append_new(args, json_string("-c"));
		json_array_append_new(args, json_string(POOL_RUN_DIR "/" POOL_CA));
	}
	if (warm) {
		json_array_append_new(args, json_string("-w"));
		json_array_append_new(args, json_string("python3"));
	}
	json_array_append_new(args, json_string("-a"));
	json_array_append_new(args, json_string(POOL_RUN_DIR "/" POOL_ARGV));
	json_object_set_new(proc, "args", args);
	for (i = 0; i < json_array_size(env); ) {
		const char *e = json_string_value(json_array_get(env, i));

		if (e != NULL && strncmp(e, "SBX_", 4) == 0)
			json_array_remove(env, i);
		else
			i++;
	}
	for (i = 0; i < json_array_size(mounts); ) {
		const char *d = json_string_value(json_object_get(
		    json_array_get(mounts, i), "destination"));

		if (d != NULL && (strcmp(d, SPEC_EGRESS_SOCK) == 0 ||
		    strcmp(d, SPEC_CA_FILE) == 0))
			json_array_remove(mounts, i);
		else
			i++;
	}
	json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:[s,s,s,s,s]}",
	    "destination", POOL_RUN_DIR, "type", "bind", "source", run,
	    "options", "bind", "ro", "nosuid", "nodev", "noexec"));
	json_object_set_new(spec, "annotations", json_pack("{s:s, s:s}",
	    "sbx.pool_entry", id, "sbx.pool_key", key));
}

static char *
render(const struct spec_case *c, char *err, size_t errlen)
{
	Sbx__V1__Policy		 pol = SBX__V1__POLICY__INIT;
	Sbx__V1__Limits		 lim = SBX__V1__LIMITS__INIT;
	struct spec_params	 sp;
	json_t			*spec;
	char			*s, *text;

	lim.cpus_milli = c->cpus_milli;
	lim.memory_mb = c->memory_mb;
	lim.pids = c->pids;
	lim.scratch_mb = c->scratch_mb;
	lim.wall_seconds = 60;
	pol.name = (char *)c->policy_name;
	pol.version = c->policy_version;
	pol.limits = &lim;
	memset(&sp, 0, sizeof(sp));
	sp.policy = &pol;
	sp.policy_hash = c->policy_hash;
	sp.task_id = c->task_id;
	sp.execution_id = c->execution_id;
	sp.rootfs = c->rootfs;
	sp.in_dir = c->in_dir;
	sp.code_dir = c->code_dir;
	sp.scratch_dir = c->scratch_dir;
	sp.egress_sock = c->egress_sock;
	sp.ca_file = c->ca_file;
	sp.init_path = c->init_path;
	sp.cgroups_path = c->cgroups_path;
	sp.gid = (gid_t)c->gid;
	sp.argv = (char *const *)c->argv;
	sp.flavor = c->runsc ? SPEC_RUNSC : SPEC_RUNC;
	if ((spec = spec_build(&sp, err, errlen)) == NULL)
		return NULL;
	if (c->pool)
		pool_respec(spec, c->pool_entry_id, c->pool_key, c->pool_run,
		    c->pool_egress, c->pool_warm_python);
	if (c->no_annotations)
		json_object_del(spec, "annotations");
	s = json_dumps(spec, JSON_INDENT(1) | JSON_SORT_KEYS);
	json_decref(spec);
	if (s == NULL || asprintf(&text, "%s\n", s) == -1) {
		snprintf(err, errlen, "out of memory");
		free(s);
		return NULL;
	}
	free(s);
	return text;
}

int
main(int argc, char **argv)
{
	char	 path[4096], err[512], *text;
	FILE	*f;
	size_t	 i;

	if (argc != 2) {
		fprintf(stderr, "usage: specgolden DIR\n");
		return 2;
	}
	for (i = 0; i < SPEC_NCASES; i++) {
		const struct spec_case	*c = &spec_cases[i];

		if ((text = render(c, err, sizeof(err))) == NULL) {
			fprintf(stderr, "specgolden: %s: %s\n", c->name, err);
			return 1;
		}
		snprintf(path, sizeof(path), "%s/%s.json", argv[1], c->name);
		if ((f = fopen(path, "w")) == NULL ||
		    fwrite(text, 1, strlen(text), f) != strlen(text) ||
		    fclose(f) == EOF) {
			fprintf(stderr, "specgolden: %s: %s\n", path,
			    strerror(errno));
			return 1;
		}
		free(text);
	}
	printf("specgolden: wrote %zu files to %s\n", SPEC_NCASES, argv[1]);
	return 0;
}
