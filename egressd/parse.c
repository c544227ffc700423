/*
 * parse.c: egressd.yaml into struct egressd_conf, with every check.
 * Every problem is recorded (never only the first) as file:line:col:
 * key: message; unknown keys are errors, and user and group names are
 * resolved here so a typo is reported at start-up rather than when a peer
 * connects.  Relative paths are relative to the config file's directory.
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
#include "yaml.h"
#include "egressd.h"

static const char *const top_keys[] = {
	"user", "state_dir", "run_dir", "public_key", "resolv_conf",
	"hosts_file", "upstream_cas", "broker", "limits", "sockets", NULL
};
static const char *const top_required[] = {
	"state_dir", "run_dir", "public_key", "sockets", NULL
};
static const char *const broker_keys[] = { "path", "user", NULL };
static const char *const broker_required[] = { "path", "user", NULL };
static const char *const limit_keys[] = {
	"max_conns_per_task", "header_timeout", "idle_timeout",
	"connect_timeout", "max_header_kb", "max_headers", NULL
};
static const char *const sockets_keys[] = { "control", "admin", NULL };
static const char *const sockets_required[] = { "control", "admin", NULL };
static const char *const sock_keys[] = {
	"path", "mode", "group", "allow", NULL
};
static const char *const sock_required[] = { "path", "allow", NULL };
static const char *const allow_keys[] = { "users", "groups", NULL };

static char *
parse_path(const char *dir, const char *path)
{
	char	*p;

	if (path[0] == '/' || dir == NULL || dir[0] == '\0')
		return xstrdup(path);
	xasprintf(&p, "%s/%s", dir, path);
	return p;
}

static char *
parse_dir(const char *file)
{
	char		 cwd[PATH_MAX];
	const char	*slash = strrchr(file, '/');
	char		*dir, *abs;

	if (slash == NULL)
		dir = xstrdup(".");
	else if (slash == file)
		dir = xstrdup("/");
	else {
		dir = xstrdup(file);
		dir[slash - file] = '\0';
	}
	if (dir[0] == '/' || getcwd(cwd, sizeof(cwd)) == NULL)
		return dir;
	if (strcmp(dir, ".") == 0)
		abs = xstrdup(cwd);
	else
		xasprintf(&abs, "%s/%s", cwd, dir);
	free(dir);
	return abs;
}

static int
parse_number(const char *s, unsigned long *out)
{
	char	*end;

	if (s[0] < '0' || s[0] > '9')
		return -1;
	errno = 0;
	*out = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || *out > INT_MAX)
		return -1;
	return 0;
}

static void
parse_pathkey(struct ydoc *doc, const struct ynode *map, const char *key,
    const char *dir, char **out)
{
	const struct ynode	*n = ymap_get(map, key);
	const char		*s = NULL;

	if (n == NULL || yget_str(doc, n, key, &s) == -1)
		return;
	if (s[0] == '\0') {
		yerr(doc, n, key, "empty path");
		return;
	}
	*out = parse_path(dir, s);
}

static void
parse_mode(struct ydoc *doc, const struct ynode *n, const char *key,
    mode_t *out)
{
	const char	*s, *p;
	unsigned long	 v = 0;

	if (n == NULL || yget_str(doc, n, key, &s) == -1)
		return;
	for (p = s; *p != '\0'; p++) {
		if (*p < '0' || *p > '7' || v > 07777) {
			yerr(doc, n, key, "bad mode \"%s\": want octal "
			    "digits such as 0660", s);
			return;
		}
		v = v * 8 + (unsigned long)(*p - '0');
	}
	if (p == s || v > 0777) {
		yerr(doc, n, key, "bad mode \"%s\": want octal 0000..0777", s);
		return;
	}
	*out = (mode_t)v;
}

static void
parse_allow(struct ydoc *doc, const struct ynode *n, const char *what,
    struct peer_allow *allow)
{
	const char	**names = NULL;
	size_t		  nnames = 0, i;
	unsigned long	  num;
	char		  key[128];

	if (n == NULL || ymap_check(doc, n, what, allow_keys, NULL) != 0)
		return;
	snprintf(key, sizeof(key), "%s.users", what);
	if (yget_strseq(doc, ymap_get(n, "users"), key, &names,
	    &nnames) == 0) {
		for (i = 0; i < nnames; i++) {
			if (parse_number(names[i], &num) == 0)
				peer_allow_uid(allow, (uid_t)num);
			else if (peer_allow_user(allow, names[i]) == -1)
				yerr(doc, ymap_get(n, "users"), key,
				    "no such user \"%s\"", names[i]);
		}
	}
	free(names);
	names = NULL;
	nnames = 0;
	snprintf(key, sizeof(key), "%s.groups", what);
	if (yget_strseq(doc, ymap_get(n, "groups"), key, &names,
	    &nnames) == 0) {
		for (i = 0; i < nnames; i++) {
			if (parse_number(names[i], &num) == 0)
				peer_allow_gid(allow, (gid_t)num);
			else if (peer_allow_group(allow, names[i]) == -1)
				yerr(doc, ymap_get(n, "groups"), key,
				    "no such group \"%s\"", names[i]);
		}
	}
	free(names);
	if (allow->nuids == 0 && allow->ngids == 0 &&
	    ymap_get(n, "users") == NULL && ymap_get(n, "groups") == NULL)
		yerr(doc, n, what, "names no user or group: nobody could "
		    "connect");
}

static void
parse_socket(struct ydoc *doc, const struct ynode *n, const char *name,
    const char *dir, struct egressd_sock_conf *sc)
{
	char		 what[64], key[96];
	const char	*g;
	unsigned long	 num;
	struct group	*gr;

	snprintf(what, sizeof(what), "sockets.%s", name);
	sc->mode = 0660;
	sc->group = (gid_t)-1;
	if (n == NULL)
		return;
	if (ymap_check(doc, n, what, sock_keys, sock_required) != 0)
		return;
	parse_pathkey(doc, n, "path", dir, &sc->path);
	snprintf(key, sizeof(key), "%s.mode", what);
	parse_mode(doc, ymap_get(n, "mode"), key, &sc->mode);
	snprintf(key, sizeof(key), "%s.group", what);
	if (ymap_get(n, "group") != NULL &&
	    yget_str(doc, ymap_get(n, "group"), key, &g) == 0) {
		if (parse_number(g, &num) == 0)
			sc->group = (gid_t)num;
		else if ((gr = getgrnam(g)) == NULL)
			yerr(doc, ymap_get(n, "group"), key,
			    "no such group \"%s\"", g);
		else
			sc->group = gr->gr_gid;
	}
	snprintf(key, sizeof(key), "%s.allow", what);
	parse_allow(doc, ymap_get(n, "allow"), key, &sc->allow);
}

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
	parse_pathkey(doc, n, "path", c->dir, &c->broker_path);
	if (yget_str(doc, ymap_get(n, "user"), "broker.user", &s) == 0) {
		if (parse_number(s, &num) == 0)
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
	const struct ynode	*root, *n, *socks;
	const char		*s, **cas = NULL;
	struct passwd		*pw;
	size_t			 nerr = errs->n, ncas = 0;

	if ((doc = yaml_load_file(file, errs)) == NULL)
		return NULL;
	c = xcalloc(1, sizeof(*c));
	c->file = xstrdup(file);
	c->dir = parse_dir(file);
	c->uid = (uid_t)-1;
	c->gid = (gid_t)-1;
	c->max_conns_per_task = 32;
	c->header_timeout = 10;
	c->idle_timeout = 60;
	c->connect_timeout = 10;
	c->max_header_kb = 16;
	c->max_headers = 64;
	root = doc->root;
	if (root == NULL) {
		yerr(doc, NULL, "egressd.yaml", "empty configuration");
		goto done;
	}
	if (ymap_check(doc, root, "", top_keys, top_required) != 0 &&
	    root->type != YN_MAP)
		goto done;
	if ((n = ymap_get(root, "user")) != NULL &&
	    yget_str(doc, n, "user", &s) == 0) {
		if ((pw = getpwnam(s)) == NULL)
			yerr(doc, n, "user", "no such user \"%s\"", s);
		else {
			c->user = xstrdup(s);
			c->uid = pw->pw_uid;
			c->gid = pw->pw_gid;
		}
	}
	parse_pathkey(doc, root, "state_dir", c->dir, &c->state_dir);
	parse_pathkey(doc, root, "run_dir", c->dir, &c->run_dir);
	parse_pathkey(doc, root, "public_key", c->dir, &c->public_key);
	parse_pathkey(doc, root, "resolv_conf", c->dir, &c->resolv_conf);
	parse_pathkey(doc, root, "hosts_file", c->dir, &c->hosts_file);
	if (yget_strseq(doc, ymap_get(root, "upstream_cas"), "upstream_cas",
	    &cas, &ncas) == 0 && ncas > 0) {
		c->upstream_cas = xcalloc(ncas, sizeof(*c->upstream_cas));
		for (size_t i = 0; i < ncas; i++) {
			c->upstream_cas[i] = parse_path(c->dir, cas[i]);
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
	    ymap_check(doc, socks, "sockets", sockets_keys,
	    sockets_required) == 0) {
		parse_socket(doc, ymap_get(socks, "control"), "control",
		    c->dir, &c->control);
		parse_socket(doc, ymap_get(socks, "admin"), "admin", c->dir,
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
	free(c->control.path);
	peer_allow_free(&c->control.allow);
	free(c->admin.path);
	peer_allow_free(&c->admin.allow);
	free(c);
}
