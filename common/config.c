/*
 * config.c: configuration pieces shared by every daemon (config.h).  Each
 * problem is recorded through yaml.h as file:line:col: key: message and
 * parsing goes on, so an operator sees every mistake at once.  A socket
 * whose allowlist names nobody is an error: a daemon nobody may talk to is
 * a misconfiguration, not a secure default.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <netinet/in.h>
#include <arpa/inet.h>

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
	"path", "mode", "group", "allow", "max_conns_per_peer", NULL
};
static const char *const sock_required[] = { "path", "allow", NULL };
static const char *const allow_keys[] = { "users", "groups", NULL };
static const char *const metrics_keys[] = { "listen", "allow", NULL };
static const char *const metrics_required[] = { "listen", NULL };

static char	*cfg_keyname(const char *, const char *);

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
	uint64_t	 v = 0;
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
	/* Connections one peer uid may hold open at once (0: the frame
	 * layer's default, 64): an orchestrator with more executions in
	 * flight than that needs it raised, never past the whole socket's
	 * own cap. */
	snprintf(key, sizeof(key), "%s.max_conns_per_peer", what);
	if (yget_uint(doc, ymap_get(n, "max_conns_per_peer"), key, 1,
	    CFG_CONNS_PER_PEER_MAX, &v) == 0)
		sc->max_conns_per_peer = (unsigned)v;
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
	fc->max_conns_per_peer = sc->max_conns_per_peer;
}

void
cfg_peer(struct ydoc *doc, const struct ynode *n, const char *what,
    const char *def, const char *hint, const char *dir, char **path,
    uid_t *uid)
{
	static const char *const keys[] = { "socket", "user", NULL };
	static const char *const required[] = { "socket", NULL };
	const struct ynode	*un;
	const char		*u = def;
	char			*key;
	unsigned long		 num;
	struct passwd		*pw;

	if (ymap_check(doc, n, what, keys, required) != 0)
		return;
	key = cfg_keyname(what, "socket");
	cfg_pathkey(doc, n, "socket", key, dir, path);
	free(key);
	key = cfg_keyname(what, "user");
	if ((un = ymap_get(n, "user")) != NULL &&
	    yget_str(doc, un, key, &u) != 0) {
		free(key);
		return;
	}
	if (cfg_number(u, &num) == 0)
		*uid = (uid_t)num;
	else if ((pw = getpwnam(u)) != NULL)
		*uid = pw->pw_uid;
	else
		yerr(doc, un != NULL ? un : n, key, "no such user \"%s\"%s", u,
		    un == NULL ? hint : "");
	free(key);
}

int
cfg_uid(struct ydoc *doc, const struct ynode *n, const char *key,
    uid_t *uid, gid_t *gid)
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
	return 0;
}

/* ---- the declarative table ---- */

#define CFG_FIELD(conf, k, type)	((type *)(void *)((char *)(conf) + (k)->off))

static size_t
cfg_nkeys(const struct cfg_key *keys)
{
	size_t	 n = 0;

	while (keys[n].name != NULL)
		n++;
	return n;
}

/* "prefix.name", or name at the top. */
static char *
cfg_keyname(const char *prefix, const char *name)
{
	char	*s;

	if (prefix == NULL || prefix[0] == '\0')
		return xstrdup(name);
	xasprintf(&s, "%s.%s", prefix, name);
	return s;
}

static void
cfg_defaults(const struct cfg_key *keys, void *conf)
{
	for (const struct cfg_key *k = keys; k->name != NULL; k++) {
		switch (k->type) {
		case CFG_UINT:
			*CFG_FIELD(conf, k, uint32_t) = (uint32_t)k->def;
			break;
		case CFG_BOOL:
			*CFG_FIELD(conf, k, int) = k->def != 0;
			break;
		case CFG_UID:
			*CFG_FIELD(conf, k, uid_t) = (uid_t)k->def;
			break;
		case CFG_MAP:
			cfg_defaults(k->sub, conf);
			break;
		default:
			break;
		}
	}
}

/* A path key left unset whose default names another key of the same map
 * ("$state_dir/store"): that key's value joined to the rest. */
static void
cfg_default_paths(const struct cfg_key *keys, void *conf)
{
	const struct cfg_key	*ref;
	const char		*rest;
	char			**p;
	size_t			 len;

	for (const struct cfg_key *k = keys; k->name != NULL; k++) {
		if (k->type == CFG_MAP)
			cfg_default_paths(k->sub, conf);
		if (k->type != CFG_PATH || k->def_path == NULL ||
		    *(p = CFG_FIELD(conf, k, char *)) != NULL)
			continue;
		if (k->def_path[0] != '$') {
			*p = xstrdup(k->def_path);
			continue;
		}
		rest = strchr(k->def_path, '/');
		len = rest != NULL ? (size_t)(rest - k->def_path - 1) :
		    strlen(k->def_path + 1);
		for (ref = keys; ref->name != NULL; ref++)
			if (strlen(ref->name) == len &&
			    strncmp(ref->name, k->def_path + 1, len) == 0)
				break;
		if (ref->name == NULL || (ref->type != CFG_PATH &&
		    ref->type != CFG_STRING) ||
		    *CFG_FIELD(conf, ref, char *) == NULL)
			continue;
		xasprintf(p, "%s%s", *CFG_FIELD(conf, ref, char *),
		    rest != NULL ? rest : "");
	}
}

/* Two sockets of one map on the same path: the second, socket j, is the
 * error, reported as soon as it is read. */
static void
cfg_socket_paths(struct ydoc *doc, const struct ynode *map,
    const struct cfg_key *keys, const struct cfg_key *j, const char *prefix,
    void *conf)
{
	const struct cfg_sock	*a, *b = CFG_FIELD(conf, j, struct cfg_sock);
	char			*key, *path;

	for (const struct cfg_key *i = keys; i != j; i++) {
		a = CFG_FIELD(conf, i, struct cfg_sock);
		if (i->type != CFG_SOCKET || a->path == NULL ||
		    b->path == NULL || strcmp(a->path, b->path) != 0)
			continue;
		key = cfg_keyname(prefix, j->name);
		xasprintf(&path, "%s.path", key);
		yerr(doc, ymap_get(ymap_get(map, j->name), "path"), path,
		    "same path as the %s socket", i->name);
		free(path);
		free(key);
		break;
	}
}

static void	cfg_parse_map(struct ydoc *, const struct ynode *,
		    const struct cfg_key *, const char *prefix, int top,
		    void *conf);

static void
cfg_parse_key(struct ydoc *doc, const struct ynode *map,
    const struct cfg_key *k, const char *key, void *conf)
{
	struct cfg_common	*cm = conf;
	const struct ynode	*n = ymap_get(map, k->name);
	const char		*s;
	uint64_t		 v;
	int			 b;

	switch (k->type) {
	case CFG_UINT:
		if (n != NULL &&
		    yget_uint(doc, n, key, k->min, k->max, &v) == 0)
			*CFG_FIELD(conf, k, uint32_t) = (uint32_t)v;
		break;
	case CFG_BOOL:
		if (n != NULL && yget_bool(doc, n, key, &b) == 0)
			*CFG_FIELD(conf, k, int) = b;
		break;
	case CFG_STRING:
		if (n != NULL && yget_str(doc, n, key, &s) == 0) {
			free(*CFG_FIELD(conf, k, char *));
			*CFG_FIELD(conf, k, char *) = xstrdup(s);
		}
		break;
	case CFG_PATH:
		cfg_pathkey(doc, map, k->name, key, cm->dir,
		    CFG_FIELD(conf, k, char *));
		break;
	case CFG_USER:
		cfg_user(doc, map, &cm->user, &cm->uid, &cm->gid);
		break;
	case CFG_UID:
		if (n != NULL)
			(void)cfg_uid(doc, n, key, CFG_FIELD(conf, k, uid_t),
			    NULL);
		break;
	case CFG_SOCKET:
		if (n != NULL || !(k->flags & CFG_OPTIONAL))
			cfg_socket(doc, n, k->name, cm->dir,
			    CFG_FIELD(conf, k, struct cfg_sock));
		break;
	case CFG_MAP:
		if (n != NULL)
			cfg_parse_map(doc, n, k->sub, key, 0, conf);
		break;
	case CFG_FUNC:
		k->parse(doc, n, key, conf);
		break;
	case CFG_CHECK:
		k->parse(doc, map, key, conf);
		break;
	}
}

/* The keys of map by the table, in the table's order.  A map with an
 * unknown key or without a required one is not read further, except the
 * top one, which is as long as it is a map at all. */
static void
cfg_parse_map(struct ydoc *doc, const struct ynode *map,
    const struct cfg_key *keys, const char *prefix, int top, void *conf)
{
	size_t		 n = cfg_nkeys(keys), nreq = 0;
	const char	**allowed, **required;
	char		*key;
	int		 nerr;

	allowed = xcalloc(n + 1, sizeof(*allowed));
	required = xcalloc(n + 1, sizeof(*required));
	for (size_t i = 0, nallowed = 0; i < n; i++) {
		if (keys[i].type != CFG_CHECK)
			allowed[nallowed++] = keys[i].name;
		if (keys[i].flags & CFG_REQUIRED)
			required[nreq++] = keys[i].name;
	}
	nerr = ymap_check(doc, map, prefix, allowed, required);
	free(allowed);
	free(required);
	if (nerr != 0 && (!top || map->type != YN_MAP))
		return;
	for (const struct cfg_key *k = keys; k->name != NULL; k++) {
		key = cfg_keyname(prefix, k->name);
		cfg_parse_key(doc, map, k, key, conf);
		free(key);
		if (k->type == CFG_SOCKET)
			cfg_socket_paths(doc, map, keys, k, prefix, conf);
	}
}

void *
cfg_parse(const char *file, const struct cfg_table *t, struct yerrs *errs)
{
	struct ydoc		*doc;
	struct cfg_common	*cm;
	size_t			 nerr = errs->n;

	if ((doc = yaml_load_file(file, errs)) == NULL)
		return NULL;
	cm = xcalloc(1, t->size);
	cm->file = xstrdup(file);
	cm->dir = cfg_dir(file);
	cm->uid = (uid_t)-1;
	cm->gid = (gid_t)-1;
	cfg_defaults(t->keys, cm);
	if (doc->root == NULL)
		yerr(doc, NULL, t->name, "empty configuration");
	else {
		cfg_parse_map(doc, doc->root, t->keys, "", 1, cm);
		cfg_default_paths(t->keys, cm);
		if (t->check != NULL && doc->root->type == YN_MAP)
			t->check(doc, doc->root, cm);
	}
	ydoc_free(doc);
	if (errs->n != nerr) {
		cfg_free(t, cm);
		return NULL;
	}
	return cm;
}

static void
cfg_free_keys(const struct cfg_key *keys, void *conf)
{
	for (const struct cfg_key *k = keys; k->name != NULL; k++) {
		switch (k->type) {
		case CFG_STRING:
		case CFG_PATH:
			free(*CFG_FIELD(conf, k, char *));
			*CFG_FIELD(conf, k, char *) = NULL;
			break;
		case CFG_SOCKET:
			cfg_socket_free(CFG_FIELD(conf, k, struct cfg_sock));
			break;
		case CFG_MAP:
			cfg_free_keys(k->sub, conf);
			break;
		case CFG_FUNC:
			if (k->free != NULL)
				k->free(conf);
			break;
		default:
			break;
		}
	}
}

void
cfg_free(const struct cfg_table *t, void *conf)
{
	struct cfg_common	*cm = conf;

	if (cm == NULL)
		return;
	cfg_free_keys(t->keys, conf);
	free(cm->file);
	free(cm->dir);
	free(cm->user);
	free(cm);
}

int
cfg_metrics_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len,
    const char **why)
{
	struct sockaddr_in	*sin = (struct sockaddr_in *)(void *)ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)(void *)ss;
	const char		*colon;
	char			 host[64];
	unsigned long		 port;
	size_t			 hl;

	memset(ss, 0, sizeof(*ss));
	if ((colon = strrchr(s, ':')) == NULL || colon == s) {
		*why = "want ADDRESS:PORT (127.0.0.1:9417, [::1]:9417)";
		return -1;
	}
	if (cfg_number(colon + 1, &port) == -1 || port < 1 || port > 65535) {
		*why = "the port must be a number from 1 to 65535";
		return -1;
	}
	hl = (size_t)(colon - s);
	if (s[0] == '[') {
		if (hl < 3 || s[hl - 1] != ']' || hl - 2 >= sizeof(host)) {
			*why = "want [IPV6]:PORT";
			return -1;
		}
		memcpy(host, s + 1, hl - 2);
		host[hl - 2] = '\0';
		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1) {
			*why = "not an IPv6 address";
			return -1;
		}
		if (!IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr)) {
			*why = "not a loopback address (::1): the peer's user "
			    "can be checked only on this host";
			return -1;
		}
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*sin6);
		return 0;
	}
	if (hl >= sizeof(host)) {
		*why = "not an IPv4 address";
		return -1;
	}
	memcpy(host, s, hl);
	host[hl] = '\0';
	if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) {
		*why = "not an IPv4 address (a name is not resolved)";
		return -1;
	}
	if ((ntohl(sin->sin_addr.s_addr) >> 24) != 127) {
		*why = "not a loopback address (127.0.0.0/8): the peer's user "
		    "can be checked only on this host";
		return -1;
	}
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	*len = sizeof(*sin);
	return 0;
}

void
cfg_metrics(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct cfg_common	*c = conf;
	struct sockaddr_storage	 ss;
	socklen_t		 len;
	const char		*s, *why;
	char			 what[96];

	if (n == NULL)
		return;
	if (ymap_check(doc, n, key, metrics_keys, metrics_required) != 0)
		return;
	snprintf(what, sizeof(what), "%s.listen", key);
	if (yget_str(doc, ymap_get(n, "listen"), what, &s) != 0)
		return;
	if (cfg_metrics_addr(s, &ss, &len, &why) == -1) {
		yerr(doc, ymap_get(n, "listen"), what, "\"%s\": %s", s, why);
		return;
	}
	c->metrics_listen = xstrdup(s);
	snprintf(what, sizeof(what), "%s.allow", key);
	cfg_allow(doc, ymap_get(n, "allow"), what, &c->metrics_allow);
}

void
cfg_metrics_free(void *conf)
{
	struct cfg_common	*c = conf;

	free(c->metrics_listen);
	c->metrics_listen = NULL;
	peer_allow_free(&c->metrics_allow);
}
