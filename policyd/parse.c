/*
 * parse.c: policyd.yaml into struct policyd_conf, with every check.  Every
 * problem is recorded (never only the first) as file:line:col: key:
 * message, unknown keys are errors, and user and group names are resolved
 * here so a typo is reported at start-up rather than when a peer connects.
 * Relative paths are relative to the config file's directory.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "config.h"
#include "yaml.h"
#include "policyd.h"

#define TTL_MIN		60
#define TTL_MAX		86400
#define TTL_DEFAULT	900
#define FRAME_KB_DEFAULT 1024

static const char *const top_keys[] = {
	"user", "state_dir", "templates", "task_types", "signing_key",
	"public_key", "policy_ttl", "max_frame_kb", "sockets", "launchd",
	"approvald", NULL
};
static const char *const top_required[] = {
	"state_dir", "templates", "task_types", "sockets", NULL
};
static const char *const sockets_keys[] = {
	"orchestrator", "admin", "approvals", NULL
};
static const char *const approvald_keys[] = { "socket", "user", NULL };
static const char *const approvald_required[] = { "socket", NULL };
#define APPROVALD_USER_DEFAULT	"sbx-approve"
static const char *const launchd_keys[] = {
	"socket", "user", "timeout", NULL
};
static const char *const launchd_required[] = { "socket", NULL };
static const char *const type_keys[] = { "template", "version", NULL };
static const char *const type_required[] = { "template", NULL };

/*
 * launchd: {socket: PATH, user: root, timeout: 120}.  user is who must be
 * listening on the socket (checked with SO_PEERCRED on every connect);
 * timeout is the grace past the policy's wall clock before policyd gives
 * up on a reply.
 */
static void
parse_launchd(struct ydoc *doc, const struct ynode *n, struct policyd_conf *c)
{
	const char	*u;
	unsigned long	 num;
	struct passwd	*pw;
	uint64_t	 v;

	c->launchd_uid = 0;
	c->launchd_grace = LAUNCHD_GRACE_DEFAULT;
	if (n == NULL)
		return;
	if (ymap_check(doc, n, "launchd", launchd_keys, launchd_required) != 0)
		return;
	cfg_pathkey(doc, n, "socket", "launchd.socket", c->dir,
	    &c->launchd_socket);
	if (ymap_get(n, "user") != NULL &&
	    yget_str(doc, ymap_get(n, "user"), "launchd.user", &u) == 0) {
		if (cfg_number(u, &num) == 0)
			c->launchd_uid = (uid_t)num;
		else if ((pw = getpwnam(u)) == NULL)
			yerr(doc, ymap_get(n, "user"), "launchd.user",
			    "no such user \"%s\"", u);
		else
			c->launchd_uid = pw->pw_uid;
	}
	if (ymap_get(n, "timeout") != NULL &&
	    yget_uint(doc, ymap_get(n, "timeout"), "launchd.timeout", 1,
	    86400, &v) == 0)
		c->launchd_grace = (uint32_t)v;
}

/*
 * approvald: {socket: PATH, user: sbx-approve}.  Where capability requests
 * outside the entitlements go; user is who must be listening there.
 * Without it such requests are denied ("no approver available").
 */
static void
parse_approvald(struct ydoc *doc, const struct ynode *n,
    struct policyd_conf *c)
{
	const struct ynode	*un;
	const char		*u = APPROVALD_USER_DEFAULT;
	unsigned long		 num;
	struct passwd		*pw;

	c->approvald_uid = (uid_t)-1;
	if (n == NULL)
		return;
	if (ymap_check(doc, n, "approvald", approvald_keys,
	    approvald_required) != 0)
		return;
	cfg_pathkey(doc, n, "socket", "approvald.socket", c->dir,
	    &c->approvald_socket);
	if ((un = ymap_get(n, "user")) != NULL &&
	    yget_str(doc, un, "approvald.user", &u) == -1)
		return;
	if (cfg_number(u, &num) == 0)
		c->approvald_uid = (uid_t)num;
	else if ((pw = getpwnam(u)) == NULL)
		yerr(doc, un != NULL ? un : n, "approvald.user",
		    "no such user \"%s\"%s", u, un != NULL ? "" :
		    " (the default; name the user approvald runs as)");
	else
		c->approvald_uid = pw->pw_uid;
}

static void
parse_types(struct ydoc *doc, const struct ynode *n, struct policyd_conf *c)
{
	const char	*tname;
	char		 what[192];
	uint64_t	 v;
	size_t		 i;

	if (n == NULL)
		return;
	if (n->type != YN_MAP) {
		yerr(doc, n, "task_types", "want a map of task type to "
		    "{template: NAME, version: N}");
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
		tt->type = xstrdup(n->keys[i]->scalar);
		tt->template = xstrdup(tname);
		tt->version = (uint32_t)v;
		tt->line = e->line;
		tt->col = e->col;
		c->ntypes++;
	}
}

struct policyd_conf *
parse_config(const char *file, struct yerrs *errs)
{
	struct ydoc		*doc;
	struct policyd_conf	*c;
	const struct ynode	*root, *n, *socks;
	uint64_t		 v;
	size_t			 nerr = errs->n;

	if ((doc = yaml_load_file(file, errs)) == NULL)
		return NULL;
	c = xcalloc(1, sizeof(*c));
	c->file = xstrdup(file);
	c->dir = cfg_dir(file);
	c->uid = (uid_t)-1;
	c->gid = (gid_t)-1;
	c->policy_ttl = TTL_DEFAULT;
	c->max_frame_kb = FRAME_KB_DEFAULT;
	root = doc->root;
	if (root == NULL) {
		yerr(doc, NULL, "policyd.yaml", "empty configuration");
		goto done;
	}
	if (ymap_check(doc, root, "", top_keys,
	    top_required) != 0 && root->type != YN_MAP)
		goto done;

	cfg_user(doc, root, &c->user, &c->uid, &c->gid);
	cfg_pathkey(doc, root, "state_dir", NULL, c->dir, &c->state_dir);
	cfg_pathkey(doc, root, "templates", NULL, c->dir, &c->templates);
	if ((n = ymap_get(root, "templates")) != NULL) {
		c->templates_line = n->line;
		c->templates_col = n->col;
	}
	parse_types(doc, ymap_get(root, "task_types"), c);
	cfg_pathkey(doc, root, "signing_key", NULL, c->dir, &c->signing_key);
	cfg_pathkey(doc, root, "public_key", NULL, c->dir, &c->public_key);
	if (c->state_dir != NULL) {
		if (c->signing_key == NULL)
			xasprintf(&c->signing_key, "%s/signing.key",
			    c->state_dir);
		if (c->public_key == NULL)
			xasprintf(&c->public_key, "%s/policyd.pub",
			    c->state_dir);
	}
	if (yget_uint(doc, ymap_get(root, "policy_ttl"), "policy_ttl",
	    TTL_MIN, TTL_MAX, &v) == 0 && ymap_get(root, "policy_ttl") != NULL)
		c->policy_ttl = (uint32_t)v;
	if (yget_uint(doc, ymap_get(root, "max_frame_kb"), "max_frame_kb",
	    1, 65536, &v) == 0 && ymap_get(root, "max_frame_kb") != NULL)
		c->max_frame_kb = (uint32_t)v;
	if ((socks = ymap_get(root, "sockets")) != NULL &&
	    ymap_check(doc, socks, "sockets", sockets_keys, NULL) == 0) {
		cfg_socket(doc, ymap_get(socks, "orchestrator"),
		    "orchestrator", c->dir, &c->orch);
		cfg_socket(doc, ymap_get(socks, "admin"), "admin", c->dir,
		    &c->admin);
		if (c->orch.path != NULL && c->admin.path != NULL &&
		    strcmp(c->orch.path, c->admin.path) == 0)
			yerr(doc, ymap_get(ymap_get(socks, "admin"), "path"),
			    "sockets.admin.path", "same path as the "
			    "orchestrator socket");
		/* Optional: only approvald's decisions come in here. */
		if ((n = ymap_get(socks, "approvals")) != NULL) {
			cfg_socket(doc, n, "approvals", c->dir,
			    &c->approvals);
			if (c->approvals.path != NULL &&
			    ((c->orch.path != NULL && strcmp(c->orch.path,
			    c->approvals.path) == 0) ||
			    (c->admin.path != NULL && strcmp(c->admin.path,
			    c->approvals.path) == 0)))
				yerr(doc, ymap_get(n, "path"),
				    "sockets.approvals.path", "same path as "
				    "another of policyd's sockets");
		}
	}
	parse_launchd(doc, ymap_get(root, "launchd"), c);
	parse_approvald(doc, ymap_get(root, "approvald"), c);
done:
	ydoc_free(doc);
	if (errs->n != nerr) {
		parse_config_free(c);
		return NULL;
	}
	return c;
}

void
parse_config_free(struct policyd_conf *c)
{
	size_t	 i;

	if (c == NULL)
		return;
	for (i = 0; i < c->ntypes; i++) {
		free(c->types[i].type);
		free(c->types[i].template);
	}
	free(c->types);
	free(c->file);
	free(c->dir);
	free(c->user);
	free(c->state_dir);
	free(c->templates);
	free(c->signing_key);
	free(c->public_key);
	free(c->launchd_socket);
	cfg_socket_free(&c->orch);
	cfg_socket_free(&c->admin);
	cfg_socket_free(&c->approvals);
	free(c->approvald_socket);
	free(c);
}
