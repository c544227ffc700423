/*
 * parse.c: launchd-sbx.yaml into struct launchd_conf, with every check, as
 * a table common/config.c reads.  Every problem is recorded (never only
 * the first) as file:line:col: key: message; unknown keys are errors,
 * users and groups are resolved here, and relative paths are relative to
 * the config file's directory.  A tier is only ever what the config
 * names: an absent tier stays absent, so a policy that asks for it is
 * refused rather than run under another.
 */
#include <sys/types.h>

#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "config.h"
#include "yaml.h"
#include "launchd-sbx/launchd.h"
#include "launchd-sbx/microvm.h"

#define FRAME_KB_DEFAULT	1024

static const char *const groups_keys[] = { "first", "count", NULL };
static const char *const groups_required[] = { "first", "count", NULL };
static const char *const tier_names[LAUNCHD_NTIERS + 1] = {
	NULL, "container", "gvisor", "microvm", NULL
};
static const char *const runtime_keys[] = { "path", "args", NULL };
static const char *const runtime_required[] = { "path", NULL };
/* microvm: QEMU at path, with its kernel, initramfs, forwarder and the
 * accelerator it may use (microvm.h). */
static const char *const vm_keys[] = { "path", "accel", "kernel", "initrd",
	"forwarder", NULL };
static const char *const pool_keys[] = { "size", "keys", "warm_python",
	"warm_imports", NULL };
static const char *const poolkey_keys[] = { "image", "tier", "cpus",
	"memory_mb", "pids", "scratch_mb", "size", NULL };
static const char *const poolkey_required[] = { "image", "cpus",
	"memory_mb", "pids", "scratch_mb", NULL };

/*
 * sandbox_groups: {first: GID, count: N}: the groups launchd-sbx gives its
 * sandboxes, one each, so that no host user and no other sandbox shares a
 * sandbox's credentials (its egress socket is that group's; ptrace and
 * /proc/PID need the same group).  No group or user of the system may
 * have an id in the range: it is refused, naming the first one found.
 */
static void	parse_groups_free(struct ydoc *, const struct ynode *,
		    const struct launchd_conf *);

static void
parse_groups(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct launchd_conf	*c = conf;
	uint64_t		 first, count;

	(void)key;
	c->sandbox_gid_first = LAUNCHD_GID_FIRST;
	c->sandbox_gid_count = LAUNCHD_GID_COUNT;
	if (n == NULL) {
		parse_groups_free(doc, NULL, c);
		return;
	}
	if (ymap_check(doc, n, "sandbox_groups", groups_keys,
	    groups_required) != 0)
		return;
	if (yget_uint(doc, ymap_get(n, "first"), "sandbox_groups.first",
	    65536, INT32_MAX, &first) != 0 || yget_uint(doc,
	    ymap_get(n, "count"), "sandbox_groups.count", 16, 1048576,
	    &count) != 0)
		return;
	if (first + count - 1 > INT32_MAX) {
		yerr(doc, ymap_get(n, "count"), "sandbox_groups.count",
		    "the range %llu..%llu goes past %d",
		    (unsigned long long)first,
		    (unsigned long long)(first + count - 1), INT32_MAX);
		return;
	}
	c->sandbox_gid_first = (gid_t)first;
	c->sandbox_gid_count = (uint32_t)count;
	parse_groups_free(doc, n, c);
}

/* No group or user of the system in the range (n: the config's node, or
 * NULL for the default range). */
static void
parse_groups_free(struct ydoc *doc, const struct ynode *n,
    const struct launchd_conf *c)
{
	uint64_t		 first = c->sandbox_gid_first;
	uint64_t		 count = c->sandbox_gid_count;
	const char		*dflt = n == NULL ? " (the default range; "
				    "set sandbox_groups)" : "";
	struct group		*gr;
	struct passwd		*pw;

	setgrent();
	while ((gr = getgrent()) != NULL)
		if (gr->gr_gid >= first && gr->gr_gid - first < count) {
			yerr(doc, n, "sandbox_groups", "group \"%s\" (%lu) is "
			    "in the range %llu..%llu%s: sandboxes would share "
			    "it", gr->gr_name, (unsigned long)gr->gr_gid,
			    (unsigned long long)first,
			    (unsigned long long)(first + count - 1), dflt);
			break;
		}
	endgrent();
	setpwent();
	while ((pw = getpwent()) != NULL)
		if ((pw->pw_gid >= first && pw->pw_gid - first < count) ||
		    (pw->pw_uid >= first && pw->pw_uid - first < count)) {
			yerr(doc, n, "sandbox_groups", "user \"%s\" (uid %lu, "
			    "gid %lu) is in the range %llu..%llu%s: sandboxes "
			    "would share its credentials", pw->pw_name,
			    (unsigned long)pw->pw_uid,
			    (unsigned long)pw->pw_gid,
			    (unsigned long long)first,
			    (unsigned long long)(first + count - 1), dflt);
			break;
		}
	endpwent();
}

const char *
parse_tier_name(int tier)
{
	if (tier <= 0 || tier >= LAUNCHD_NTIERS)
		return NULL;
	return tier_names[tier];
}

static void
parse_runtime(struct ydoc *doc, const struct ynode *n, const char *tier,
    const char *dir, struct launchd_runtime *rt)
{
	char		  what[64], key[96];
	const char	**args = NULL, *base, *s;
	size_t		  nargs = 0;
	int		  vm;

	snprintf(what, sizeof(what), "runtimes.%s", tier);
	vm = strcmp(tier, "microvm") == 0;
	if (ymap_check(doc, n, what, vm ? vm_keys : runtime_keys,
	    runtime_required) != 0)
		return;
	snprintf(key, sizeof(key), "%s.path", what);
	cfg_pathkey(doc, n, "path", key, dir, &rt->path);
	if (vm) {
		/* No accel: the tier is refused at the start-up check, with
		 * a message that says so, rather than guessed. */
		rt->accel = MICROVM_ACCEL_NONE;
		if (ymap_get(n, "accel") != NULL &&
		    yget_str(doc, ymap_get(n, "accel"), "accel", &s) == 0 &&
		    s != NULL && (rt->accel = microvm_accel_parse(s)) == -1) {
			yerr(doc, ymap_get(n, "accel"), what, "accel \"%s\": "
			    "want kvm, or tcg to allow emulation", s);
			rt->accel = MICROVM_ACCEL_NONE;
		}
		snprintf(key, sizeof(key), "%s.kernel", what);
		cfg_pathkey(doc, n, "kernel", key, dir, &rt->kernel);
		snprintf(key, sizeof(key), "%s.initrd", what);
		cfg_pathkey(doc, n, "initrd", key, dir, &rt->initrd);
		snprintf(key, sizeof(key), "%s.forwarder", what);
		cfg_pathkey(doc, n, "forwarder", key, dir, &rt->fwd);
		rt->flavor = SPEC_RUNC;
		return;
	}
	snprintf(key, sizeof(key), "%s.args", what);
	if (yget_strseq(doc, ymap_get(n, "args"), key, &args, &nargs) == 0 &&
	    nargs > 0) {
		rt->args = xcalloc(nargs, sizeof(*rt->args));
		for (size_t i = 0; i < nargs; i++) {
			if (args[i][0] != '-')
				yerr(doc, ymap_get(n, "args"), key,
				    "\"%s\" is not an option: args are the "
				    "runtime's global options", args[i]);
			rt->args[i] = xstrdup(args[i]);
		}
		rt->nargs = nargs;
	}
	free(args);
	/* runsc takes a few spec fields its own way (spec.c). */
	if (rt->path != NULL) {
		base = strrchr(rt->path, '/');
		base = base != NULL ? base + 1 : rt->path;
		rt->flavor = strncmp(base, "runsc", 5) == 0 ? SPEC_RUNSC :
		    SPEC_RUNC;
	}
}

static void
parse_runtimes(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct launchd_conf	*c = conf;
	size_t			 i;
	int			 t, any = 0;

	(void)key;
	if (n == NULL)
		return;
	if (n->type != YN_MAP) {
		yerr(doc, n, "runtimes", "want a map of tier (container, "
		    "gvisor, microvm) to {path: RUNTIME}");
		return;
	}
	for (i = 0; i < n->n; i++) {
		const char *name = n->keys[i]->scalar;

		for (t = 1; t < LAUNCHD_NTIERS; t++)
			if (strcmp(tier_names[t], name) == 0)
				break;
		if (t == LAUNCHD_NTIERS) {
			yerr(doc, n->keys[i], "runtimes", "unknown tier "
			    "\"%s\": want container, gvisor or microvm", name);
			continue;
		}
		parse_runtime(doc, n->items[i], name, c->common.dir,
		    &c->runtimes[t]);
		any = 1;
	}
	if (!any && n->n == 0)
		yerr(doc, n, "runtimes", "names no tier: nothing could run");
}

static void
parse_runtimes_free(void *conf)
{
	struct launchd_conf	*c = conf;

	for (int t = 0; t < LAUNCHD_NTIERS; t++) {
		struct launchd_runtime *rt = &c->runtimes[t];

		for (size_t i = 0; i < rt->nargs; i++)
			free(rt->args[i]);
		free(rt->args);
		free(rt->path);
		free(rt->kernel);
		free(rt->initrd);
		free(rt->fwd);
	}
}

/* run_dir, read with the other paths: not state_dir. */
static void
parse_dirs(struct ydoc *doc, const struct ynode *map, const char *key,
    void *conf)
{
	struct launchd_conf	*c = conf;

	(void)key;
	if (c->common.state_dir != NULL && c->run_dir != NULL &&
	    strcmp(c->common.state_dir, c->run_dir) == 0)
		yerr(doc, ymap_get(map, "run_dir"), "run_dir",
		    "same directory as state_dir");
}

static void
parse_cgroup(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct launchd_conf	*c = conf;
	const char		*s;

	(void)key;
	c->cgroup_parent = xstrdup("sbx");
	if (n != NULL && yget_str(doc, n, "cgroup_parent", &s) == 0) {
		if (!name_ok(s))
			yerr(doc, n, "cgroup_parent", "bad cgroup name \"%s\": "
			    "want one path component of [A-Za-z0-9._@:-]", s);
		else {
			free(c->cgroup_parent);
			c->cgroup_parent = xstrdup(s);
		}
	}
}

static void
parse_cgroup_free(void *conf)
{
	struct launchd_conf	*c = conf;

	free(c->cgroup_parent);
}

/* pool.keys: the (image, tier, limits) the pool keeps entries for. */
static void
parse_pool_keys(struct ydoc *doc, const struct ynode *n,
    struct launchd_conf *c)
{
	static const char *const tiers[] = { "container", "gvisor",
	    "microvm", NULL };
	char		 what[64];
	uint64_t	 v;
	const char	*s;
	int		 t;

	if (n == NULL)
		return;
	if (n->type != YN_SEQ) {
		yerr(doc, n, "pool.keys", "want a list of {image, tier, cpus, "
		    "memory_mb, pids, scratch_mb, size}");
		return;
	}
	c->pool_keys = xcalloc(n->n > 0 ? n->n : 1, sizeof(*c->pool_keys));
	for (size_t i = 0; i < n->n; i++) {
		const struct ynode	*e = n->items[i];
		struct launchd_pool_key	*k = &c->pool_keys[c->npool_keys];

		snprintf(what, sizeof(what), "pool.keys[%zu]", i);
		/* Read on after a problem: report every one at once. */
		if (ymap_check(doc, e, what, poolkey_keys,
		    poolkey_required) != 0 && e->type != YN_MAP)
			continue;
		k->tier = 1;
		k->size = c->pool_size;
		if (yget_str(doc, ymap_get(e, "image"), "image", &s) == 0 &&
		    s != NULL) {
			if (strstr(s, "@sha256:") == NULL)
				yerr(doc, ymap_get(e, "image"), what, "image "
				    "\"%s\" is not pinned as name@sha256:<hex>",
				    s);
			k->image = xstrdup(s);
		}
		if (ymap_get(e, "tier") != NULL &&
		    yget_enum(doc, ymap_get(e, "tier"), "tier", tiers,
		    &t) == 0)
			k->tier = t + 1;
		if (yget_milli(doc, ymap_get(e, "cpus"), "cpus", 10,
		    1024000, &v) == 0)
			k->cpus_milli = (uint32_t)v;
		if (yget_uint(doc, ymap_get(e, "memory_mb"), "memory_mb", 1,
		    1048576, &v) == 0)
			k->memory_mb = (uint32_t)v;
		if (yget_uint(doc, ymap_get(e, "pids"), "pids", 1, 1048576,
		    &v) == 0)
			k->pids = (uint32_t)v;
		if (yget_uint(doc, ymap_get(e, "scratch_mb"), "scratch_mb", 1,
		    1048576, &v) == 0)
			k->scratch_mb = (uint32_t)v;
		if (ymap_get(e, "size") != NULL &&
		    yget_uint(doc, ymap_get(e, "size"), "size", 0, 1024,
		    &v) == 0)
			k->size = (uint32_t)v;
		c->npool_keys++;
	}
}

/*
 * pool.warm_imports: the modules each warm interpreter imports before its
 * assignment (sbx-init -m), the operator's choice for every warm entry,
 * never the task's: names only, joined with commas into 255 bytes at most.
 */
static void
parse_pool_imports(struct ydoc *doc, const struct ynode *n,
    struct launchd_conf *c)
{
	const char	**mods = NULL;
	char		 *s = NULL;
	size_t		  nmods = 0, len = 0;

	if (n == NULL || yget_strseq(doc, n, "pool.warm_imports", &mods,
	    &nmods) != 0)
		return;
	for (size_t i = 0; i < nmods; i++) {
		if (strchr(mods[i], ',') != NULL || !spec_mods_ok(mods[i])) {
			yerr(doc, n, "pool.warm_imports", "\"%s\" is not a "
			    "Python module name", mods[i]);
			goto done;
		}
		len += strlen(mods[i]) + 1;
	}
	if (nmods == 0)
		goto done;
	if (len > 256) {
		yerr(doc, n, "pool.warm_imports", "%zu bytes with their commas, "
		    "over 255", len - 1);
		goto done;
	}
	s = xcalloc(1, len);
	for (size_t i = 0, at = 0; i < nmods; i++)
		at += (size_t)snprintf(s + at, len - at, "%s%s", i > 0 ? "," :
		    "", mods[i]);
	free(c->pool_warm_imports);
	c->pool_warm_imports = s;
done:
	free(mods);
}

/* pool: {size, keys, warm_python, warm_imports}.  keys and warm_python
 * are read even after an unknown key, so that every problem is reported
 * at once. */
static void
parse_pool(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct launchd_conf	*c = conf;
	uint64_t		 v;

	(void)key;
	if (n != NULL &&
	    ymap_check(doc, n, "pool", pool_keys, NULL) == 0 &&
	    yget_uint(doc, ymap_get(n, "size"), "pool.size", 0, 1024,
	    &v) == 0 && ymap_get(n, "size") != NULL)
		c->pool_size = (uint32_t)v;
	/* After size: a key without its own size takes the global one. */
	if (n != NULL && n->type == YN_MAP) {
		parse_pool_keys(doc, ymap_get(n, "keys"), c);
		if (ymap_get(n, "warm_python") != NULL)
			(void)yget_bool(doc, ymap_get(n, "warm_python"),
			    "pool.warm_python", &c->pool_warm_python);
		parse_pool_imports(doc, ymap_get(n, "warm_imports"), c);
		if (c->pool_warm_imports != NULL && !c->pool_warm_python)
			yerr(doc, ymap_get(n, "warm_imports"),
			    "pool.warm_imports", "only with warm_python: true");
	}
}

static void
parse_pool_free(void *conf)
{
	struct launchd_conf	*c = conf;

	for (size_t i = 0; i < c->npool_keys; i++)
		free(c->pool_keys[i].image);
	free(c->pool_keys);
	free(c->pool_warm_imports);
	c->pool_warm_imports = NULL;
}

/*
 * egress: / gate: {socket: PATH, user: NAME}: another daemon's socket and
 * who must be listening there (SO_PEERCRED at every connect).  user
 * defaults to the account the daemon's manual names.
 */
static void
parse_peer(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct launchd_conf	*c = conf;
	int			 gate = strcmp(key, "gate") == 0;

	if (n != NULL)
		cfg_peer(doc, n, key, gate ? "sbx-gate" : "sbx-egress",
		    " (the default; name the user)", c->common.dir,
		    gate ? &c->gate_socket : &c->egress_socket,
		    gate ? &c->gate_uid : &c->egress_uid);
}

static void
parse_peer_free(void *conf)
{
	struct launchd_conf	*c = conf;

	free(c->egress_socket);
	free(c->gate_socket);
}

static const struct cfg_key parse_sockets[] = {
	CFG_SOCK("launch", 0, struct launchd_conf, launch),
	CFG_SOCK("admin", 0, struct launchd_conf, admin),
	CFG_END
};

static const struct cfg_key parse_keys[] = {
	CFG_COMMON_USER,
	CFG_COMMON_STATE_DIR,
	CFG_PATHKEY("run_dir", CFG_REQUIRED, struct launchd_conf, run_dir,
	    NULL),
	CFG_PATHKEY("policy_public_key", CFG_REQUIRED, struct launchd_conf,
	    policy_public_key, NULL),
	CFG_PATHKEY("policy_public_key_previous", 0, struct launchd_conf,
	    policy_public_key_previous, NULL),
	CFG_PATHKEY("init", CFG_REQUIRED, struct launchd_conf, init, NULL),
	/* sbx-monitor; absent: the one beside launchd-sbx. */
	CFG_PATHKEY("monitor", 0, struct launchd_conf, monitor, NULL),
	CFG_CHECKS(parse_dirs),
	CFG_OWN("runtimes", CFG_REQUIRED, parse_runtimes, parse_runtimes_free),
	CFG_OWN("cgroup_parent", 0, parse_cgroup, parse_cgroup_free),
	CFG_OWN("pool", 0, parse_pool, parse_pool_free),
	CFG_OWN("sandbox_groups", 0, parse_groups, NULL),
	/* One free for both. */
	CFG_OWN("egress", 0, parse_peer, parse_peer_free),
	CFG_OWN("gate", 0, parse_peer, NULL),
	CFG_COMMON_MAX_FRAME_KB(FRAME_KB_DEFAULT, 1, 65536),
	CFG_SUBMAP("sockets", CFG_REQUIRED, parse_sockets),
	CFG_COMMON_METRICS,
	CFG_END
};

static const struct cfg_table parse_table = {
	"launchd-sbx.yaml", sizeof(struct launchd_conf), parse_keys, NULL
};

void *
parse_launchd(const char *file, struct yerrs *errs)
{
	return cfg_parse(file, &parse_table, errs);
}

void
parse_launchd_free(void *c)
{
	cfg_free(&parse_table, c);
}
