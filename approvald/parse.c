/*
 * parse.c: approvald.yaml into struct approvald_conf, with every check.
 * Every problem is recorded (never only the first) as file:line:col: key:
 * message, unknown keys are errors, and user and group names are resolved
 * here so a typo is reported at start-up rather than when the first
 * request or approver arrives.  Relative paths are relative to the config
 * file's directory.  The two sockets must differ: policyd submits on one,
 * people decide on the other, and neither may stand in for the other.
 */
#include <sys/types.h>

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "util.h"
#include "yaml.h"
#include "approvald/approvald.h"

#define FRAME_KB_DEFAULT	1024
#define FRAME_KB_MAX		4096
#define POLICYD_TIMEOUT_DEFAULT	30

static const char *const top_keys[] = {
	"user", "state_dir", "max_frame_kb", "policyd", "sockets", NULL
};
static const char *const top_required[] = {
	"state_dir", "policyd", "sockets", NULL
};
static const char *const policyd_keys[] = {
	"socket", "user", "timeout", NULL
};
static const char *const policyd_required[] = { "socket", "user", NULL };
static const char *const sockets_keys[] = { "submit", "console", NULL };

static int
aparse_uid(struct ydoc *doc, const struct ynode *n, const char *key,
    uid_t *uid, gid_t *gid, char **name)
{
	const char	*s;
	unsigned long	 num;
	struct passwd	*pw;

	if (yget_str(doc, n, key, &s) == -1)
		return -1;
	if (cfg_number(s, &num) == 0) {
		*uid = (uid_t)num;
		if (gid != NULL)
			*gid = (gid_t)-1;
	} else if ((pw = getpwnam(s)) == NULL) {
		yerr(doc, n, key, "no such user \"%s\"", s);
		return -1;
	} else {
		*uid = pw->pw_uid;
		if (gid != NULL)
			*gid = pw->pw_gid;
	}
	if (name != NULL)
		*name = xstrdup(s);
	return 0;
}

/* policyd: {socket: PATH, user: sbx-policy, timeout: 30}.  user is who
 * must be listening on the socket (SO_PEERCRED, on every connect). */
static void
aparse_policyd(struct ydoc *doc, const struct ynode *n,
    struct approvald_conf *c)
{
	uint64_t	 v;

	if (n == NULL)
		return;
	if (ymap_check(doc, n, "policyd", policyd_keys, policyd_required) != 0)
		return;
	cfg_pathkey(doc, n, "socket", "policyd.socket", c->dir,
	    &c->policyd_socket);
	if (ymap_get(n, "user") != NULL)
		(void)aparse_uid(doc, ymap_get(n, "user"), "policyd.user",
		    &c->policyd_uid, NULL, NULL);
	if (ymap_get(n, "timeout") != NULL &&
	    yget_uint(doc, ymap_get(n, "timeout"), "policyd.timeout", 1, 3600,
	    &v) == 0)
		c->policyd_timeout = (uint32_t)v;
}

struct approvald_conf *
aparse_config(const char *file, struct yerrs *errs)
{
	struct ydoc		*doc;
	struct approvald_conf	*c;
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
	c->max_frame_kb = FRAME_KB_DEFAULT;
	c->policyd_uid = (uid_t)-1;
	c->policyd_timeout = POLICYD_TIMEOUT_DEFAULT;
	root = doc->root;
	if (root == NULL) {
		yerr(doc, NULL, "approvald.yaml", "empty configuration");
		goto done;
	}
	if (ymap_check(doc, root, "", top_keys, top_required) != 0 &&
	    root->type != YN_MAP)
		goto done;

	if ((n = ymap_get(root, "user")) != NULL &&
	    aparse_uid(doc, n, "user", &c->uid, &c->gid, &c->user) == 0 &&
	    c->gid == (gid_t)-1) {
		yerr(doc, n, "user", "give a user name, not a number: its "
		    "group is needed too");
		free(c->user);
		c->user = NULL;
	}
	cfg_pathkey(doc, root, "state_dir", NULL, c->dir, &c->state_dir);
	if ((n = ymap_get(root, "max_frame_kb")) != NULL &&
	    yget_uint(doc, n, "max_frame_kb", 1, FRAME_KB_MAX, &v) == 0)
		c->max_frame_kb = (uint32_t)v;
	aparse_policyd(doc, ymap_get(root, "policyd"), c);
	if ((socks = ymap_get(root, "sockets")) != NULL &&
	    ymap_check(doc, socks, "sockets", sockets_keys, NULL) == 0) {
		cfg_socket(doc, ymap_get(socks, "submit"), "submit", c->dir,
		    &c->submit);
		cfg_socket(doc, ymap_get(socks, "console"), "console", c->dir,
		    &c->console);
		if (c->submit.path != NULL && c->console.path != NULL &&
		    strcmp(c->submit.path, c->console.path) == 0)
			yerr(doc, ymap_get(ymap_get(socks, "console"), "path"),
			    "sockets.console.path", "same path as the submit "
			    "socket");
	}
done:
	ydoc_free(doc);
	if (errs->n != nerr) {
		aparse_config_free(c);
		return NULL;
	}
	return c;
}

void
aparse_config_free(struct approvald_conf *c)
{
	if (c == NULL)
		return;
	free(c->file);
	free(c->dir);
	free(c->user);
	free(c->state_dir);
	free(c->policyd_socket);
	cfg_socket_free(&c->submit);
	cfg_socket_free(&c->console);
	free(c);
}
