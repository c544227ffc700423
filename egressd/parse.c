/*
 * parse.c: egressd.yaml into struct egressd_conf, with every check.
 * Every problem is recorded (never only the first) as file:line:col:
 * key: message; unknown keys are errors, and user and group names are
 * resolved here so a typo is reported at start-up rather than when a peer
 * connects.  Relative paths are relative to the config file's directory;
 * the pieces every daemon shares (paths, sockets, peer allowlists) are
 * common/config.c's.
 */
#include <sys/types.h>

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "util.h"
#include "yaml.h"
#include "egressd.h"

static const char *const top_keys[] = {
	"user", "state_dir", "run_dir", "public_key", "resolv_conf",
	"hosts_file", "upstream_cas", "broker", "limits", "sockets", NULL
};
static const char *const top_required[] = {
	"state_dir", "public_key", "sockets", NULL
};
static const char *const broker_keys[] = { "path", "user", NULL };
static const char *const broker_required[] = { "path", "user", NULL };
static const char *const sockets_keys[] = { "control", "admin", NULL };
static const char *const limit_keys[] = {
	"max_conns_per_task", "header_timeout", "idle_timeout",
	"connect_timeout", "max_header_kb", "max_headers",
	"denials_per_second", NULL
};
static void
parse_u32(struct ydoc *doc, const struct ynode *map, const char *key,
    uint64_t min, uint64_t max, uint32_t *out)
{
	char		 k[64];
	uint64_t	 v;

	snprintf(k, sizeof(k), "limits.%s", key);
	if (ymap_get(map, key) != NULL &&
	    yget_uint(doc, ymap_get(map, key), k, min, max, &v) == 0)
		*out = (uint32_t)v;
}

static void
parse_limits(struct ydoc *doc, const struct ynode *n, struct egressd_conf *c)
{
	if (n == NULL || ymap_check(doc, n, "limits", limit_keys, NULL) != 0)
		return;
	parse_u32(doc, n, "max_conns_per_task", 1, 65536,
	    &c->max_conns_per_task);
	parse_u32(doc, n, "header_timeout", 1, 3600, &c->header_timeout);
	parse_u32(doc, n, "idle_timeout", 1, 86400, &c->idle_timeout);
	parse_u32(doc, n, "connect_timeout", 1, 3600, &c->connect_timeout);
	parse_u32(doc, n, "max_header_kb", 1, 1024, &c->max_header_kb);
	parse_u32(doc, n, "max_headers", 1, 1000, &c->max_headers);
	parse_u32(doc, n, "denials_per_second", 1, 100000,
	    &c->denials_per_second);
}

static void
parse_broker(struct ydoc *doc, const struct ynode *n, struct egressd_conf *c)
{
	const char	*s;
	unsigned long	 num;
	struct passwd	*pw;

	if (n == NULL || ymap_check(doc, n, "broker", broker_keys,
	    broker_required) != 0)
		return;
	cfg_pathkey(doc, n, "path", "broker.path", c->dir, &c->broker_path);
	if (yget_str(doc, ymap_get(n, "user"), "broker.user", &s) == 0) {
		if (cfg_number(s, &num) == 0)
			c->broker_uid = (uid_t)num;
		else if ((pw = getpwnam(s)) == NULL)
			yerr(doc, ymap_get(n, "user"), "broker.user",
			    "no such user \"%s\"", s);
		else
			c->broker_uid = pw->pw_uid;
	}
}

struct egressd_conf *
parse_config(const char *file, struct yerrs *errs)
{
	struct ydoc		*doc;
	struct egressd_conf	*c;
	const struct ynode	*root, *socks;
	const char		**cas = NULL;
	size_t			 nerr = errs->n, ncas = 0;

	if ((doc = yaml_load_file(file, errs)) == NULL)
		return NULL;
	c = xcalloc(1, sizeof(*c));
	c->file = xstrdup(file);
	c->dir = cfg_dir(file);
	c->uid = (uid_t)-1;
	c->gid = (gid_t)-1;
	c->max_conns_per_task = 32;
	c->header_timeout = 10;
	c->idle_timeout = 60;
	c->connect_timeout = 10;
	c->max_header_kb = 16;
	c->max_headers = 64;
	c->denials_per_second = 20;
	root = doc->root;
	if (root == NULL) {
		yerr(doc, NULL, "egressd.yaml", "empty configuration");
		goto done;
	}
	if (ymap_check(doc, root, "", top_keys, top_required) != 0 &&
	    root->type != YN_MAP)
		goto done;
	cfg_user(doc, root, &c->user, &c->uid, &c->gid);
	cfg_pathkey(doc, root, "state_dir", NULL, c->dir, &c->state_dir);
	cfg_pathkey(doc, root, "run_dir", NULL, c->dir, &c->run_dir);
	cfg_pathkey(doc, root, "public_key", NULL, c->dir, &c->public_key);
	cfg_pathkey(doc, root, "resolv_conf", NULL, c->dir, &c->resolv_conf);
	cfg_pathkey(doc, root, "hosts_file", NULL, c->dir, &c->hosts_file);
	if (yget_strseq(doc, ymap_get(root, "upstream_cas"), "upstream_cas",
	    &cas, &ncas) == 0 && ncas > 0) {
		c->upstream_cas = xcalloc(ncas, sizeof(*c->upstream_cas));
		for (size_t i = 0; i < ncas; i++) {
			c->upstream_cas[i] = cfg_path(c->dir, cas[i]);
			if (access(c->upstream_cas[i], R_OK) == -1)
				yerr(doc, ymap_get(root, "upstream_cas"),
				    "upstream_cas", "%s: %s",
				    c->upstream_cas[i], strerror(errno));
		}
		c->nupstream_cas = ncas;
	}
	free(cas);
	parse_broker(doc, ymap_get(root, "broker"), c);
	parse_limits(doc, ymap_get(root, "limits"), c);
	if ((socks = ymap_get(root, "sockets")) != NULL &&
	    ymap_check(doc, socks, "sockets", sockets_keys, NULL) == 0) {
		cfg_socket(doc, ymap_get(socks, "control"), "control",
		    c->dir, &c->control);
		cfg_socket(doc, ymap_get(socks, "admin"), "admin", c->dir,
		    &c->admin);
		if (c->control.path != NULL && c->admin.path != NULL &&
		    strcmp(c->control.path, c->admin.path) == 0)
			yerr(doc, ymap_get(ymap_get(socks, "admin"), "path"),
			    "sockets.admin.path", "same path as the control "
			    "socket");
	}
done:
	ydoc_free(doc);
	if (errs->n != nerr) {
		parse_config_free(c);
		return NULL;
	}
	return c;
}

void
parse_config_free(struct egressd_conf *c)
{
	if (c == NULL)
		return;
	free(c->file);
	free(c->dir);
	free(c->user);
	free(c->state_dir);
	free(c->run_dir);
	free(c->public_key);
	free(c->resolv_conf);
	free(c->hosts_file);
	for (size_t i = 0; i < c->nupstream_cas; i++)
		free(c->upstream_cas[i]);
	free(c->upstream_cas);
	free(c->broker_path);
	cfg_socket_free(&c->control);
	cfg_socket_free(&c->admin);
	free(c);
}
