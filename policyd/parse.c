/*
 * parse.c: policyd.yaml into struct policyd_conf, with every check, as a
 * table common/config.c reads.  Every problem is recorded (never only the
 * first) as file:line:col: key: message, unknown keys are errors, and user
 * and group names are resolved here so a typo is reported at start-up
 * rather than when a peer connects.  Relative paths are relative to the
 * config file's directory.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "config.h"
#include "yaml.h"
#include "pg.h"
#include "policyd.h"

#define TTL_MIN		60
#define TTL_MAX		86400
#define TTL_DEFAULT	900
#define FRAME_KB_DEFAULT 1024

#define APPROVALD_USER_DEFAULT	"sbx-approve"
static const char *const type_keys[] = { "template", "version", "stable",
	"canary", "percent", NULL };
static const char *const roll_keys[] = { "threshold", "min_executions",
	NULL };
static const char *const type_required[] = { "template", NULL };
static const char *const orch_keys[] = { "user", "group", "tenants", NULL };
static const char *const orch_required[] = { "tenants", NULL };

/* Where templates is named, for messages about the templates in it. */
static void
parse_templates_at(struct ydoc *doc, const struct ynode *map,
    const char *key, void *conf)
{
	struct policyd_conf	*c = conf;
	const struct ynode	*n;

	(void)doc;
	(void)key;
	if ((n = ymap_get(map, "templates")) != NULL) {
		c->templates_line = n->line;
		c->templates_col = n->col;
	}
}

/* sockets.approvals, optional: only approvald's decisions come in here. */
static void
parse_approvals(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct policyd_conf	*c = conf;

	(void)key;
	if (n == NULL)
		return;
	cfg_socket(doc, n, "approvals", c->common.dir, &c->approvals);
	if (c->approvals.path != NULL &&
	    ((c->orch.path != NULL && strcmp(c->orch.path,
	    c->approvals.path) == 0) ||
	    (c->admin.path != NULL && strcmp(c->admin.path,
	    c->approvals.path) == 0)))
		yerr(doc, ymap_get(n, "path"), "sockets.approvals.path",
		    "same path as another of policyd's sockets");
}

static void
parse_approvals_free(void *conf)
{
	struct policyd_conf	*c = conf;

	cfg_socket_free(&c->approvals);
}

/*
 * approvald: {socket: PATH, user: sbx-approve}.  Where capability requests
 * outside the entitlements go; user is who must be listening there.
 * Without it such requests are denied ("no approver available").
 */
static void
parse_approvald(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct policyd_conf	*c = conf;

	(void)key;
	c->approvald_uid = (uid_t)-1;
	if (n == NULL)
		return;
	cfg_peer(doc, n, "approvald", APPROVALD_USER_DEFAULT,
	    " (the default; name the user approvald runs as)", c->common.dir,
	    &c->approvald_socket, &c->approvald_uid);
}

static void
parse_approvald_free(void *conf)
{
	struct policyd_conf	*c = conf;

	free(c->approvald_socket);
}

/*
 * store: {backend: sqlite | postgresql, conninfo: STRING, host: NAME}
 * (common/pg.c).  sqlite (the default) keeps everything in policyd.db;
 * postgresql also keeps the state a fleet shares in the database conninfo
 * names (fleet.c).  host names this replica there (default: the host
 * name).  conninfo is checked but never echoed, and holds no password.
 */
static void
parse_store(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	(void)key;
	pg_store_parse(doc, n, &((struct policyd_conf *)conf)->store);
}

static void
parse_store_free(void *conf)
{
	pg_store_free(&((struct policyd_conf *)conf)->store);
}

/*
 * A task type's rollout (rollout.c): {template: T, stable: S, canary: C,
 * percent: P} in place of version.  stable and canary are both required
 * and must differ; percent defaults to 0.  *version becomes S.  0, or -1
 * after recording the error.
 */
static int
parse_rollout(struct ydoc *doc, const struct ynode *e, const char *what,
    uint64_t *version, uint64_t *canary, uint64_t *pct)
{
	const struct ynode	*ns, *nc, *np;
	char			 key[256];
	uint64_t		 s = 0;

	*canary = 0;
	*pct = 0;
	ns = ymap_get(e, "stable");
	nc = ymap_get(e, "canary");
	np = ymap_get(e, "percent");
	if (ns == NULL && nc == NULL && np == NULL)
		return 0;
	if (ymap_get(e, "version") != NULL) {
		yerr(doc, ymap_get(e, "version"), what, "a rollout names "
		    "stable and canary, not version");
		return -1;
	}
	if (ns == NULL || nc == NULL) {
		yerr(doc, e, what, "a rollout needs both stable and canary "
		    "(versions of the template)");
		return -1;
	}
	snprintf(key, sizeof(key), "%s.stable", what);
	if (yget_uint(doc, ns, key, 1, UINT32_MAX, &s) == -1)
		return -1;
	snprintf(key, sizeof(key), "%s.canary", what);
	if (yget_uint(doc, nc, key, 1, UINT32_MAX, canary) == -1)
		return -1;
	snprintf(key, sizeof(key), "%s.percent", what);
	if (yget_uint(doc, np, key, 0, 100, pct) == -1)
		return -1;
	if (s == *canary) {
		snprintf(key, sizeof(key), "%s.canary", what);
		yerr(doc, nc, key, "canary is the stable version (%llu)",
		    (unsigned long long)s);
		return -1;
	}
	*version = s;
	return 0;
}

/*
 * rollout: {threshold: 0.2, min_executions: 5}.  A canary is halted when
 * one rule's denial rate under it differs from stable's by more than
 * threshold (either way), once each side has min_executions; threshold 0
 * never halts.
 */
static void
parse_roll(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct policyd_conf	*c = conf;
	uint64_t		 v;

	(void)key;
	c->roll_threshold = ROLL_THRESHOLD_DEFAULT;
	c->roll_min_exec = ROLL_MIN_EXEC_DEFAULT;
	if (n == NULL)
		return;
	/* An unknown key is reported, and so is every bad value. */
	(void)ymap_check(doc, n, "rollout", roll_keys, NULL);
	if (n->type != YN_MAP)
		return;
	v = c->roll_threshold;
	if (yget_milli(doc, ymap_get(n, "threshold"), "rollout.threshold", 0,
	    1000, &v) == 0)
		c->roll_threshold = (uint32_t)v;
	v = c->roll_min_exec;
	if (yget_uint(doc, ymap_get(n, "min_executions"),
	    "rollout.min_executions", 1, 1000000, &v) == 0)
		c->roll_min_exec = (uint32_t)v;
}

static void
parse_types(struct ydoc *doc, const struct ynode *n, const char *key0,
    void *conf)
{
	struct policyd_conf	*c = conf;
	const char	*tname;
	char		 what[192];
	uint64_t	 v, canary, pct;
	size_t		 i;

	(void)key0;
	if (n == NULL)
		return;
	if (n->type != YN_MAP) {
		yerr(doc, n, "task_types", "want a map of task type to "
		    "{template: NAME, version: N} or {template: NAME, "
		    "stable: N, canary: M, percent: P}");
		return;
	}
	if (n->n == 0) {
		yerr(doc, n, "task_types", "names no task type");
		return;
	}
	c->types = xcalloc(n->n, sizeof(*c->types));
	for (i = 0; i < n->n; i++) {
		struct policyd_task_type *tt = &c->types[c->ntypes];
		const struct ynode	*e = n->items[i];

		snprintf(what, sizeof(what), "task_types.%.128s",
		    n->keys[i]->scalar);
		if (!name_ok(n->keys[i]->scalar)) {
			yerr(doc, n->keys[i], what, "bad task type name: "
			    "want 1..128 of [A-Za-z0-9._@:-]");
			continue;
		}
		if (ymap_check(doc, e, what, type_keys, type_required) != 0)
			continue;
		char key[256];
		snprintf(key, sizeof(key), "%s.template", what);
		if (yget_str(doc, ymap_get(e, "template"), key, &tname) == -1)
			continue;
		if (!name_ok(tname)) {
			yerr(doc, ymap_get(e, "template"), key,
			    "bad template name \"%s\"", tname);
			continue;
		}
		snprintf(key, sizeof(key), "%s.version", what);
		v = 0;
		if (yget_uint(doc, ymap_get(e, "version"), key, 1, UINT32_MAX,
		    &v) == -1)
			continue;
		if (parse_rollout(doc, e, what, &v, &canary, &pct) == -1)
			continue;
		tt->type = xstrdup(n->keys[i]->scalar);
		tt->template = xstrdup(tname);
		tt->version = (uint32_t)v;
		tt->canary = (uint32_t)canary;
		tt->percent = (uint32_t)pct;
		tt->line = e->line;
		tt->col = e->col;
		c->ntypes++;
	}
}

static void
parse_types_free(void *conf)
{
	struct policyd_conf	*c = conf;

	for (size_t i = 0; i < c->ntypes; i++) {
		free(c->types[i].type);
		free(c->types[i].template);
	}
	free(c->types);
}

/*
 * One orchestrators: entry, {user: NAME, tenants: [...]} or {group: NAME,
 * tenants: [...]}, into o.  0, or -1 after recording the problem.
 */
static int
parse_orch(struct ydoc *doc, const struct ynode *e, const char *what,
    struct policyd_orch *o)
{
	const struct ynode	*nu, *ng, *nt;
	const char		**names = NULL, *who;
	size_t			  nnames = 0, i;
	char			  key[160];

	if (ymap_check(doc, e, what, orch_keys, orch_required) != 0)
		return -1;
	nu = ymap_get(e, "user");
	ng = ymap_get(e, "group");
	if ((nu == NULL) == (ng == NULL)) {
		yerr(doc, e, what, "name either a user or a group (one "
		    "identity an entry)");
		return -1;
	}
	snprintf(key, sizeof(key), "%s.%s", what, nu != NULL ? "user" :
	    "group");
	if (yget_str(doc, nu != NULL ? nu : ng, key, &who) == -1)
		return -1;
	if (nu != NULL ? peer_allow_user(&o->who, who) == -1 :
	    peer_allow_group(&o->who, who) == -1) {
		yerr(doc, nu != NULL ? nu : ng, key, "no such %s \"%s\"",
		    nu != NULL ? "user" : "group", who);
		peer_allow_free(&o->who);
		return -1;
	}
	snprintf(key, sizeof(key), "%s.tenants", what);
	nt = ymap_get(e, "tenants");
	if (yget_strseq(doc, nt, key, &names, &nnames) != 0)
		goto bad;
	if (nnames == 0) {
		yerr(doc, nt, key, "names no tenant (leave the entry out to "
		    "refuse this orchestrator everything)");
		goto bad;
	}
	for (i = 0; i < nnames; i++) {
		if (strcmp(names[i], "*") == 0)
			continue;
		if (!name_ok(names[i])) {
			yerr(doc, nt, key, "bad tenant \"%.128s\": want \"*\" "
			    "or 1..128 of [A-Za-z0-9._@:-]", names[i]);
			goto bad;
		}
	}
	o->tenants = xcalloc(nnames, sizeof(*o->tenants));
	for (i = 0; i < nnames; i++) {
		if (strcmp(names[i], "*") == 0)
			o->all = 1;
		o->tenants[o->ntenants++] = xstrdup(names[i]);
	}
	xasprintf(&o->name, "%s %s", nu != NULL ? "user" : "group", who);
	free(names);
	return 0;
bad:
	free(names);
	peer_allow_free(&o->who);
	return -1;
}

/*
 * orchestrators: [{user: orch-acme, tenants: [acme]}, {group: sbx-orch,
 * tenants: ["*"]}].  Which tenants each peer of the orchestrator socket
 * may act for (orch.c); present, a peer no entry names may do nothing.
 */
static void
parse_orchs(struct ydoc *doc, const struct ynode *n, const char *key0,
    void *conf)
{
	struct policyd_conf	*c = conf;
	char			 what[64];

	(void)key0;
	if (n == NULL)
		return;
	c->orchs_set = 1;
	if (n->type != YN_SEQ || n->n == 0) {
		yerr(doc, n, "orchestrators", "want a list of {user: NAME, "
		    "tenants: [...]} or {group: NAME, tenants: [...]}");
		return;
	}
	c->orchs = xcalloc(n->n, sizeof(*c->orchs));
	for (size_t i = 0; i < n->n; i++) {
		snprintf(what, sizeof(what), "orchestrators[%zu]", i);
		if (parse_orch(doc, n->items[i], what,
		    &c->orchs[c->norchs]) == 0)
			c->norchs++;
	}
}

static void
parse_orchs_free(void *conf)
{
	struct policyd_conf	*c = conf;

	for (size_t i = 0; i < c->norchs; i++) {
		struct policyd_orch	*o = &c->orchs[i];

		peer_allow_free(&o->who);
		free(o->name);
		for (size_t j = 0; j < o->ntenants; j++)
			free(o->tenants[j]);
		free(o->tenants);
	}
	free(c->orchs);
}

static const struct cfg_key parse_sockets[] = {
	CFG_SOCK("orchestrator", 0, struct policyd_conf, orch),
	CFG_SOCK("admin", 0, struct policyd_conf, admin),
	CFG_OWN("approvals", 0, parse_approvals, parse_approvals_free),
	CFG_END
};

/*
 * launchd: {socket: PATH, user: root, timeout: 120}.  user is who must be
 * listening on the socket (checked with SO_PEERCRED on every connect);
 * timeout is the grace past the policy's wall clock before policyd gives
 * up on a reply.
 */
static const struct cfg_key parse_launchd[] = {
	CFG_PATHKEY("socket", CFG_REQUIRED, struct policyd_conf,
	    launchd_socket, NULL),
	CFG_KEY("user", CFG_UID, 0, struct policyd_conf, launchd_uid, 0, 0, 0),
	CFG_U32("timeout", 0, struct policyd_conf, launchd_grace,
	    LAUNCHD_GRACE_DEFAULT, 1, 86400),
	CFG_END
};

/*
 * security_review: {denials: N}.  Once one task's denials across its
 * executions reach N, policyd records a security-review event for it
 * (store.c); 0 never does.
 */
static const struct cfg_key parse_review[] = {
	CFG_U32("denials", 0, struct policyd_conf, review_denials,
	    REVIEW_DENIALS_DEFAULT, 0, 1000000),
	CFG_END
};

static const struct cfg_key parse_keys[] = {
	CFG_COMMON_USER,
	CFG_COMMON_STATE_DIR,
	CFG_PATHKEY("templates", CFG_REQUIRED, struct policyd_conf, templates,
	    NULL),
	CFG_CHECKS(parse_templates_at),
	CFG_OWN("task_types", CFG_REQUIRED, parse_types, parse_types_free),
	CFG_PATHKEY("signing_key", 0, struct policyd_conf, signing_key,
	    "$state_dir/signing.key"),
	CFG_PATHKEY("public_key", 0, struct policyd_conf, public_key,
	    "$state_dir/policyd.pub"),
	CFG_PATHKEY("previous_public_key", 0, struct policyd_conf,
	    previous_public_key, NULL),
	CFG_U32("policy_ttl", 0, struct policyd_conf, policy_ttl, TTL_DEFAULT,
	    TTL_MIN, TTL_MAX),
	CFG_COMMON_MAX_FRAME_KB(FRAME_KB_DEFAULT, 1, 65536),
	CFG_SUBMAP("sockets", CFG_REQUIRED, parse_sockets),
	CFG_COMMON_METRICS,
	CFG_SUBMAP("launchd", 0, parse_launchd),
	CFG_OWN("approvald", 0, parse_approvald, parse_approvald_free),
	CFG_SUBMAP("security_review", 0, parse_review),
	CFG_OWN("store", 0, parse_store, parse_store_free),
	CFG_OWN("rollout", 0, parse_roll, NULL),
	CFG_OWN("orchestrators", 0, parse_orchs, parse_orchs_free),
	CFG_END
};

static const struct cfg_table parse_table = {
	"policyd.yaml", sizeof(struct policyd_conf), parse_keys, NULL
};

void *
parse_config(const char *file, struct yerrs *errs)
{
	return cfg_parse(file, &parse_table, errs);
}

void
parse_config_free(void *c)
{
	cfg_free(&parse_table, c);
}
