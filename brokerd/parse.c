/*
 * parse.c: brokerd.yaml into struct brokerd_conf, with every check.  Every
 * problem is recorded (never only the first) as file:line:col: key:
 * message, unknown keys are errors, and user and group names are resolved
 * here so a typo is reported at start-up rather than when egressd first
 * asks for a credential.  Relative paths are relative to the config
 * file's directory.  The credential socket must name at least one peer
 * and must not be the admin socket: the two answer different people.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "config.h"
#include "yaml.h"
#include "brokerd/brokerd.h"

#define MINT_TTL_MIN		30
#define MINT_TTL_MAX		86400
#define FRAME_KB_DEFAULT	64
#define FRAME_KB_MAX		1024

static const char *const top_keys[] = {
	"user", "state_dir", "master_key", "policy_public_key", "mint_ttl",
	"max_frame_kb", "sockets", NULL
};
static const char *const top_required[] = {
	"state_dir", "policy_public_key", "sockets", NULL
};
static const char *const sockets_keys[] = { "credential", "admin", NULL };

struct brokerd_conf *
bparse_config(const char *file, struct yerrs *errs)
{
	struct ydoc		*doc;
	struct brokerd_conf	*c;
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
	c->mint_ttl = BROKERD_MINT_TTL;
	c->max_frame_kb = FRAME_KB_DEFAULT;
	root = doc->root;
	if (root == NULL) {
		yerr(doc, NULL, "brokerd.yaml", "empty configuration");
		goto done;
	}
	if (ymap_check(doc, root, "", top_keys, top_required) != 0 &&
	    root->type != YN_MAP)
		goto done;

	cfg_user(doc, root, &c->user, &c->uid, &c->gid);
	cfg_pathkey(doc, root, "state_dir", NULL, c->dir, &c->state_dir);
	cfg_pathkey(doc, root, "master_key", NULL, c->dir, &c->master_key);
	cfg_pathkey(doc, root, "policy_public_key", NULL, c->dir,
	    &c->policy_public_key);
	if (c->state_dir != NULL && c->master_key == NULL)
		xasprintf(&c->master_key, "%s/master.key", c->state_dir);
	if ((n = ymap_get(root, "mint_ttl")) != NULL &&
	    yget_uint(doc, n, "mint_ttl", MINT_TTL_MIN, MINT_TTL_MAX,
	    &v) == 0)
		c->mint_ttl = (uint32_t)v;
	if ((n = ymap_get(root, "max_frame_kb")) != NULL &&
	    yget_uint(doc, n, "max_frame_kb", 1, FRAME_KB_MAX, &v) == 0)
		c->max_frame_kb = (uint32_t)v;
	if ((socks = ymap_get(root, "sockets")) != NULL &&
	    ymap_check(doc, socks, "sockets", sockets_keys, NULL) == 0) {
		cfg_socket(doc, ymap_get(socks, "credential"), "credential",
		    c->dir, &c->credential);
		cfg_socket(doc, ymap_get(socks, "admin"), "admin", c->dir,
		    &c->admin);
		if (c->credential.path != NULL && c->admin.path != NULL &&
		    strcmp(c->credential.path, c->admin.path) == 0)
			yerr(doc, ymap_get(ymap_get(socks, "admin"), "path"),
			    "sockets.admin.path", "same path as the credential "
			    "socket");
	}
done:
	ydoc_free(doc);
	if (errs->n != nerr) {
		bparse_config_free(c);
		return NULL;
	}
	return c;
}

void
bparse_config_free(struct brokerd_conf *c)
{
	if (c == NULL)
		return;
	free(c->file);
	free(c->dir);
	free(c->user);
	free(c->state_dir);
	free(c->master_key);
	free(c->policy_public_key);
	cfg_socket_free(&c->credential);
	cfg_socket_free(&c->admin);
	free(c);
}
