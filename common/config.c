/*
 * config.c: configuration pieces shared by every daemon (config.h).  Each
 * problem is recorded through yaml.h as file:line:col: key: message and
 * parsing goes on, so an operator sees every mistake at once.  A socket
 * whose allowlist names nobody is an error: a daemon nobody may talk to is
 * a misconfiguration, not a secure default.
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

#include "config.h"
#include "frame.h"
#include "util.h"
#include "yaml.h"

static const char *const sock_keys[] = {
	"path", "mode", "group", "allow", NULL
};
static const char *const sock_required[] = { "path", "allow", NULL };
static const char *const allow_keys[] = { "users", "groups", NULL };

void
cfg_user(struct ydoc *doc, const struct ynode *root, char **user,
    uid_t *uid, gid_t *gid)
{
	const struct ynode	*n;
	const char		*s;
	struct passwd		*pw;

	if ((n = ymap_get(root, "user")) == NULL ||
	    yget_str(doc, n, "user", &s) != 0)
		return;
	if ((pw = getpwnam(s)) == NULL) {
		yerr(doc, n, "user", "no such user \"%s\"", s);
		return;
	}
	*user = xstrdup(s);
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
}

char *
cfg_path(const char *dir, const char *path)
{
	char	*p;

	if (path[0] == '/' || dir == NULL || dir[0] == '\0')
		return xstrdup(path);
	xasprintf(&p, "%s/%s", dir, path);
	return p;
}

char *
cfg_dir(const char *file)
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

int
cfg_number(const char *s, unsigned long *out)
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

void
cfg_pathkey(struct ydoc *doc, const struct ynode *map, const char *key,
    const char *what, const char *dir, char **out)
{
	const struct ynode	*n = ymap_get(map, key);
	const char		*s = NULL;

	if (what == NULL)
		what = key;
	if (n == NULL)
		return;
	if (yget_str(doc, n, what, &s) == -1)
		return;
	if (s[0] == '\0') {
		yerr(doc, n, what, "empty path");
		return;
	}
	free(*out);
	*out = cfg_path(dir, s);
}

void
cfg_mode(struct ydoc *doc, const struct ynode *n, const char *key,
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

/* users or groups: each a name or a number. */
static void
cfg_allow_list(struct ydoc *doc, const struct ynode *n, const char *what,
    const char *list, struct peer_allow *allow)
{
	const char	**names = NULL;
	size_t		  nnames = 0, i;
	unsigned long	  num;
	char		  key[128];
	int		  groups = strcmp(list, "groups") == 0;

	snprintf(key, sizeof(key), "%s.%s", what, list);
	if (yget_strseq(doc, ymap_get(n, list), key, &names, &nnames) != 0) {
		free(names);
		return;
	}
	for (i = 0; i < nnames; i++) {
		if (cfg_number(names[i], &num) == 0) {
			if (groups)
				peer_allow_gid(allow, (gid_t)num);
			else
				peer_allow_uid(allow, (uid_t)num);
		} else if (groups && peer_allow_group(allow, names[i]) == -1)
			yerr(doc, ymap_get(n, list), key,
			    "no such group \"%s\"", names[i]);
		else if (!groups && peer_allow_user(allow, names[i]) == -1)
			yerr(doc, ymap_get(n, list), key,
			    "no such user \"%s\"", names[i]);
	}
	free(names);
}

void
cfg_allow(struct ydoc *doc, const struct ynode *n, const char *what,
    struct peer_allow *allow)
{
	if (n == NULL)
		return;
	if (ymap_check(doc, n, what, allow_keys, NULL) != 0)
		return;
	cfg_allow_list(doc, n, what, "users", allow);
	cfg_allow_list(doc, n, what, "groups", allow);
	if (allow->nuids == 0 && allow->ngids == 0 &&
	    ymap_get(n, "users") == NULL && ymap_get(n, "groups") == NULL)
		yerr(doc, n, what, "names no user or group: nobody could "
		    "connect");
}

void
cfg_socket(struct ydoc *doc, const struct ynode *n, const char *name,
    const char *dir, struct cfg_sock *sc)
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
	cfg_pathkey(doc, n, "path", key, dir, &sc->path);
	if (sc->path == NULL && ymap_get(n, "path") != NULL)
		return;
	snprintf(key, sizeof(key), "%s.mode", what);
	cfg_mode(doc, ymap_get(n, "mode"), key, &sc->mode);
	snprintf(key, sizeof(key), "%s.group", what);
	if (ymap_get(n, "group") != NULL &&
	    yget_str(doc, ymap_get(n, "group"), key, &g) == 0) {
		if (cfg_number(g, &num) == 0)
			sc->group = (gid_t)num;
		else if ((gr = getgrnam(g)) == NULL)
			yerr(doc, ymap_get(n, "group"), key,
			    "no such group \"%s\"", g);
		else
			sc->group = gr->gr_gid;
		sc->group_name = xstrdup(g);
	}
	snprintf(key, sizeof(key), "%s.allow", what);
	cfg_allow(doc, ymap_get(n, "allow"), key, &sc->allow);
}

void
cfg_socket_free(struct cfg_sock *sc)
{
	free(sc->path);
	free(sc->group_name);
	peer_allow_free(&sc->allow);
	sc->path = NULL;
	sc->group_name = NULL;
}

void
cfg_socket_server(const struct cfg_sock *sc, const char *name,
    struct frame_server_config *fc)
{
	memset(fc, 0, sizeof(*fc));
	fc->name = name;
	fc->path = sc->path;
	fc->mode = sc->mode;
	fc->owner = (uid_t)-1;
	fc->group = sc->group;
	fc->allow = &sc->allow;
}
