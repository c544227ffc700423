/*
 * parse.c: approvald.yaml into struct approvald_conf, with every check, as
 * a table common/config.c reads.  Every problem is recorded (never only
 * the first) as file:line:col: key: message, unknown keys are errors, and
 * user and group names are resolved here so a typo is reported at
 * start-up rather than when the first request or approver arrives.
 * Relative paths are relative to the config file's directory.  The two
 * sockets must differ: policyd submits on one, people decide on the
 * other, and neither may stand in for the other.  approvers: names each
 * approver's Unix user, resolved here, with the tenant users that person
 * is, for separation of duties (aparse_own_task).
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"
#include "yaml.h"
#include "approvald/approvald.h"

#define FRAME_KB_DEFAULT	1024
#define FRAME_KB_MAX		4096
#define POLICYD_TIMEOUT_DEFAULT	30

/* approvald's own user: a name, since its group is needed too. */
static void
aparse_user(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct cfg_common	*c = conf;
	const char		*s;

	if (n == NULL || cfg_uid(doc, n, key, &c->uid, &c->gid) == -1)
		return;
	if (c->gid == (gid_t)-1) {
		yerr(doc, n, key, "give a user name, not a number: its group "
		    "is needed too");
		return;
	}
	if (yget_str(doc, n, key, &s) == 0)
		c->user = xstrdup(s);
}

/* One "TENANT/USER" (USER may be "*"): 0, or -1 after an error at n. */
static int
aparse_tenant_user(struct ydoc *doc, const struct ynode *n, const char *key)
{
	const char	*s, *slash;
	char		*tenant;
	int		 ok;

	if (n->type != YN_SCALAR) {
		yerr(doc, n, key, "give TENANT/USER (or a list of them)");
		return -1;
	}
	s = n->scalar;
	if ((slash = strchr(s, '/')) == NULL) {
		yerr(doc, n, key, "\"%s\" is not TENANT/USER", s);
		return -1;
	}
	xasprintf(&tenant, "%.*s", (int)(slash - s), s);
	ok = name_ok(tenant) && (strcmp(slash + 1, "*") == 0 ||
	    name_ok(slash + 1));
	free(tenant);
	if (!ok) {
		yerr(doc, n, key, "\"%s\": the tenant and the user must be "
		    "1..128 of [A-Za-z0-9._@:-] (the user may be *)", s);
		return -1;
	}
	return 0;
}

/*
 * approvers: {UNIX-USER: TENANT/USER | [TENANT/USER, ...], ...}.  Unix
 * users are resolved now (a name or a number), so a typo is an error at
 * start-up rather than a separation of duties that silently never
 * applies.
 */
static void
aparse_approvers(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct approvald_conf	*c = conf;
	struct aapprover	*a;
	const struct ynode	*v;
	char			 k[160];
	uid_t			 uid;

	if (n == NULL)
		return;
	if (n->type != YN_MAP) {
		yerr(doc, n, key, "give a map of Unix users to TENANT/USER");
		return;
	}
	c->approvers = xcalloc(n->n > 0 ? n->n : 1, sizeof(*c->approvers));
	for (size_t i = 0; i < n->n; i++) {
		snprintf(k, sizeof(k), "%s.%s", key, n->keys[i]->scalar != NULL ?
		    n->keys[i]->scalar : "?");
		if (cfg_uid(doc, n->keys[i], k, &uid, NULL) == -1)
			continue;
		v = n->items[i];
		if (v->type == YN_SEQ && v->n == 0) {
			yerr(doc, v, k, "name at least one TENANT/USER");
			continue;
		}
		a = &c->approvers[c->napprovers++];
		a->uid = uid;
		a->name = xstrdup(n->keys[i]->scalar);
		if (v->type == YN_SEQ) {
			a->users = xcalloc(v->n, sizeof(*a->users));
			for (size_t j = 0; j < v->n; j++)
				if (aparse_tenant_user(doc, v->items[j], k) == 0)
					a->users[a->nusers++] =
					    xstrdup(v->items[j]->scalar);
		} else if (aparse_tenant_user(doc, v, k) == 0) {
			a->users = xcalloc(1, sizeof(*a->users));
			a->users[a->nusers++] = xstrdup(v->scalar);
		}
	}
}

static void
aparse_approvers_free(void *conf)
{
	struct approvald_conf	*c = conf;

	for (size_t i = 0; i < c->napprovers; i++) {
		for (size_t j = 0; j < c->approvers[i].nusers; j++)
			free(c->approvers[i].users[j]);
		free(c->approvers[i].users);
		free(c->approvers[i].name);
	}
	free(c->approvers);
	c->approvers = NULL;
	c->napprovers = 0;
}

int
aparse_own_task(const struct approvald_conf *c, uid_t uid, const char *name,
    const char *tenant, const char *user, char *why, size_t len)
{
	const struct aapprover	*a;
	const char		*u, *slash;
	size_t			 tl;

	if (tenant == NULL || user == NULL || user[0] == '\0')
		return 0;
	if (name != NULL && strcmp(name, user) == 0) {
		snprintf(why, len, "the task's user %s/%s has the approver's "
		    "own Unix user name", tenant, user);
		return 1;
	}
	tl = strlen(tenant);
	for (size_t i = 0; i < c->napprovers; i++) {
		a = &c->approvers[i];
		if (a->uid != uid)
			continue;
		for (size_t j = 0; j < a->nusers; j++) {
			u = a->users[j];
			slash = strchr(u, '/');
			if (slash == NULL || (size_t)(slash - u) != tl ||
			    strncmp(u, tenant, tl) != 0)
				continue;
			if (strcmp(slash + 1, "*") == 0 ||
			    strcmp(slash + 1, user) == 0) {
				snprintf(why, len, "the task's user %s/%s is "
				    "the approver's own (approvers: maps %s "
				    "to %s)", tenant, user, a->name, u);
				return 1;
			}
		}
	}
	return 0;
}

/* policyd: {socket: PATH, user: sbx-policy, timeout: 30}.  user is who
 * must be listening on the socket (SO_PEERCRED, on every connect). */
static const struct cfg_key aparse_policyd[] = {
	CFG_PATHKEY("socket", CFG_REQUIRED, struct approvald_conf,
	    policyd_socket, NULL),
	CFG_KEY("user", CFG_UID, CFG_REQUIRED, struct approvald_conf,
	    policyd_uid, (uid_t)-1, 0, 0),
	CFG_U32("timeout", 0, struct approvald_conf, policyd_timeout,
	    POLICYD_TIMEOUT_DEFAULT, 1, 3600),
	CFG_END
};

static const struct cfg_key aparse_sockets[] = {
	CFG_SOCK("submit", 0, struct approvald_conf, submit),
	CFG_SOCK("console", 0, struct approvald_conf, console),
	CFG_END
};

/* store: {backend, conninfo, host}: the queue in the fleet's database
 * (queue_pg.c, common/pg.c). */
static void
aparse_store(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	(void)key;
	pg_store_parse(doc, n, &((struct approvald_conf *)conf)->store);
}

static void
aparse_store_free(void *conf)
{
	pg_store_free(&((struct approvald_conf *)conf)->store);
}

static const struct cfg_key aparse_keys[] = {
	CFG_OWN("user", 0, aparse_user, NULL),
	CFG_COMMON_STATE_DIR,
	CFG_COMMON_MAX_FRAME_KB(FRAME_KB_DEFAULT, 1, FRAME_KB_MAX),
	CFG_SUBMAP("policyd", CFG_REQUIRED, aparse_policyd),
	CFG_SUBMAP("sockets", CFG_REQUIRED, aparse_sockets),
	CFG_OWN("approvers", 0, aparse_approvers, aparse_approvers_free),
	CFG_OWN("store", 0, aparse_store, aparse_store_free),
	CFG_END
};

const struct cfg_table aparse_table = {
	"approvald.yaml", sizeof(struct approvald_conf), aparse_keys, NULL
};
