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
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
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
static const char *const sock_keys[] = {
	"path", "mode", "group", "allow", NULL
};
static const char *const sock_required[] = { "path", "allow", NULL };
static const char *const allow_keys[] = { "users", "groups", NULL };

static char *
bparse_path(const char *dir, const char *path)
{
	char	*p;

	if (path[0] == '/' || dir == NULL || dir[0] == '\0')
		return xstrdup(path);
	xasprintf(&p, "%s/%s", dir, path);
	return p;
}

/* The directory of the config file, absolute, without resolving symlinks
 * (messages keep the path the operator wrote). */
static char *
bparse_dir(const char *file)
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
	if (dir[0] == '/')
		return dir;
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		return dir;
	if (strcmp(dir, ".") == 0)
		abs = xstrdup(cwd);
	else
		xasprintf(&abs, "%s/%s", cwd, dir);
	free(dir);
	return abs;
}

static int
bparse_number(const char *s, unsigned long *out)
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

/* An optional path key, joined to the config directory. */
static void
bparse_pathkey(struct ydoc *doc, const struct ynode *map, const char *key,
    const char *dir, char **out)
{
	const struct ynode	*n = ymap_get(map, key);
	const char		*s = NULL;

	if (n == NULL)
		return;
	if (yget_str(doc, n, key, &s) == -1)
		return;
	if (s[0] == '\0') {
		yerr(doc, n, key, "empty path");
		return;
	}
	*out = bparse_path(dir, s);
}

static void
bparse_mode(struct ydoc *doc, const struct ynode *n, const char *key,
    mode_t *out)
{
	const char	*s, *p;
	unsigned long	 v = 0;

	if (n == NULL)
		return;
	if (yget_str(doc, n, key, &s) == -1)
		return;
	/* Written as 0660 the YAML integer would be read as decimal 660 or
	 * octal by different parsers; the config means octal, always. */
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
bparse_allow(struct ydoc *doc, const struct ynode *n, const char *what,
    struct peer_allow *allow)
{
	const char	**names = NULL;
	size_t		  nnames = 0, i;
	unsigned long	  num;
	char		  key[128];

	if (n == NULL)
		return;
	if (ymap_check(doc, n, what, allow_keys, NULL) != 0)
		return;
	snprintf(key, sizeof(key), "%s.users", what);
	if (yget_strseq(doc, ymap_get(n, "users"), key, &names,
	    &nnames) == 0) {
		for (i = 0; i < nnames; i++) {
			if (bparse_number(names[i], &num) == 0)
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
			if (bparse_number(names[i], &num) == 0)
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
bparse_socket(struct ydoc *doc, const struct ynode *n, const char *name,
    const char *dir, struct brokerd_sock_conf *sc)
{
	char		 what[64], key[96];
	const char	*g;
	unsigned long	 num;
	struct group	*gr;

	snprintf(what, sizeof(what), "sockets.%s", name);
	sc->mode = 0660;
	sc->group = (gid_t)-1;
	if (n == NULL) {
		yerr(doc, NULL, what, "missing");
		return;
	}
	if (ymap_check(doc, n, what, sock_keys, sock_required) != 0)
		return;
	snprintf(key, sizeof(key), "%s.path", what);
	bparse_pathkey(doc, n, "path", dir, &sc->path);
	if (sc->path == NULL && ymap_get(n, "path") != NULL)
		return;
	snprintf(key, sizeof(key), "%s.mode", what);
	bparse_mode(doc, ymap_get(n, "mode"), key, &sc->mode);
	snprintf(key, sizeof(key), "%s.group", what);
	if (ymap_get(n, "group") != NULL &&
	    yget_str(doc, ymap_get(n, "group"), key, &g) == 0) {
		if (bparse_number(g, &num) == 0)
			sc->group = (gid_t)num;
		else if ((gr = getgrnam(g)) == NULL)
			yerr(doc, ymap_get(n, "group"), key,
			    "no such group \"%s\"", g);
		else
			sc->group = gr->gr_gid;
		sc->group_name = xstrdup(g);
	}
	snprintf(key, sizeof(key), "%s.allow", what);
	bparse_allow(doc, ymap_get(n, "allow"), key, &sc->allow);
}

struct brokerd_conf *
bparse_config(const char *file, struct yerrs *errs)
{
	struct ydoc		*doc;
	struct brokerd_conf	*c;
	const struct ynode	*root, *n, *socks;
	const char		*s;
	struct passwd		*pw;
	uint64_t		 v;
	size_t			 nerr = errs->n;

	if ((doc = yaml_load_file(file, errs)) == NULL)
		return NULL;
	c = xcalloc(1, sizeof(*c));
	c->file = xstrdup(file);
	c->dir = bparse_dir(file);
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
	bparse_pathkey(doc, root, "state_dir", c->dir, &c->state_dir);
	bparse_pathkey(doc, root, "master_key", c->dir, &c->master_key);
	bparse_pathkey(doc, root, "policy_public_key", c->dir,
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
		bparse_socket(doc, ymap_get(socks, "credential"), "credential",
		    c->dir, &c->credential);
		bparse_socket(doc, ymap_get(socks, "admin"), "admin", c->dir,
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

static void
bparse_sock_free(struct brokerd_sock_conf *sc)
{
	free(sc->path);
	free(sc->group_name);
	peer_allow_free(&sc->allow);
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
	bparse_sock_free(&c->credential);
	bparse_sock_free(&c->admin);
	free(c);
}
