/*
 * parse.c: gated.yaml into struct gated_conf, with every check.  Every
 * problem is recorded (never only the first) as file:line:col: key:
 * message, unknown keys are errors, and user and group names are resolved
 * here so a typo is reported at start-up rather than when launchd-sbx
 * first hands over a directory.  Relative paths are relative to the config
 * file's directory.  The release socket must name at least one peer (in
 * production root, for launchd-sbx) and must not be the admin socket.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "util.h"
#include "yaml.h"
#include "gated/gated.h"

/* A release request carries stdout and stderr as captured. */
#define FRAME_KB_DEFAULT	8192
#define FRAME_KB_MIN		64
#define FRAME_KB_MAX		65536

static const char *const top_keys[] = {
	"user", "state_dir", "store_dir", "policy_public_key", "max_frame_kb",
	"sockets", NULL
};
static const char *const top_required[] = {
	"state_dir", "policy_public_key", "sockets", NULL
};
static const char *const sockets_keys[] = { "release", "admin", NULL };
static const char *const sockets_required[] = { "release", NULL };

struct gated_conf *
gparse_config(const char *file, struct yerrs *errs)
{
	struct ydoc		*doc;
	struct gated_conf	*c;
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
	root = doc->root;
	if (root == NULL) {
		yerr(doc, NULL, "gated.yaml", "empty configuration");
		goto done;
	}
	if (ymap_check(doc, root, "", top_keys, top_required) != 0 &&
	    root->type != YN_MAP)
		goto done;

	cfg_user(doc, root, &c->user, &c->uid, &c->gid);
	cfg_pathkey(doc, root, "state_dir", NULL, c->dir, &c->state_dir);
	cfg_pathkey(doc, root, "store_dir", NULL, c->dir, &c->store_dir);
	cfg_pathkey(doc, root, "policy_public_key", NULL, c->dir,
	    &c->policy_public_key);
	if (c->state_dir != NULL && c->store_dir == NULL)
		xasprintf(&c->store_dir, "%s/store", c->state_dir);
	if ((n = ymap_get(root, "max_frame_kb")) != NULL &&
	    yget_uint(doc, n, "max_frame_kb", FRAME_KB_MIN, FRAME_KB_MAX,
	    &v) == 0)
		c->max_frame_kb = (uint32_t)v;
	if ((socks = ymap_get(root, "sockets")) != NULL &&
	    ymap_check(doc, socks, "sockets", sockets_keys,
	    sockets_required) == 0) {
		cfg_socket(doc, ymap_get(socks, "release"), "release", c->dir,
		    &c->release);
		/* The admin socket (audit, metrics) is optional. */
		if (ymap_get(socks, "admin") != NULL)
			cfg_socket(doc, ymap_get(socks, "admin"), "admin",
			    c->dir, &c->admin);
		if (c->release.path != NULL && c->admin.path != NULL &&
		    strcmp(c->release.path, c->admin.path) == 0)
			yerr(doc, ymap_get(ymap_get(socks, "admin"), "path"),
			    "sockets.admin.path", "same path as the release "
			    "socket");
	}
done:
	ydoc_free(doc);
	if (errs->n != nerr) {
		gparse_config_free(c);
		return NULL;
	}
	return c;
}

void
gparse_config_free(struct gated_conf *c)
{
	if (c == NULL)
		return;
	free(c->file);
	free(c->dir);
	free(c->user);
	free(c->state_dir);
	free(c->store_dir);
	free(c->policy_public_key);
	cfg_socket_free(&c->release);
	cfg_socket_free(&c->admin);
	free(c);
}
