/*
 * config.h: the pieces of a daemon's YAML configuration that every sbx
 * daemon shares: paths relative to the config file, octal modes, and the
 * `sockets:` entries with their peer allowlists.  User and group names are
 * resolved while parsing, so a typo is reported at start-up (with file,
 * line, column and key, as every yaml.h error is) rather than when a peer
 * is refused.
 *
 * A daemon describes its file as a table (Postfix's idea): one struct
 * cfg_key a key, naming its type, where it goes in the daemon's conf
 * struct, its default and bounds and whether it is required; cfg_parse
 * checks the keys and fills the struct, cfg_free releases it.
 */
#ifndef SBX_CONFIG_H
#define SBX_CONFIG_H

#include <sys/types.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdint.h>

#include "peer.h"

struct ydoc;
struct ynode;
struct yerrs;
struct frame_server_config;

/* One listening socket: {path, mode, group, allow: {users, groups}}. */
struct cfg_sock {
	char			*path;
	mode_t			 mode;		/* default 0660 */
	char			*group_name;	/* NULL: leave the group */
	gid_t			 group;		/* (gid_t)-1 when unset */
	struct peer_allow	 allow;
	unsigned		 max_conns_per_peer;	/* 0: the default */
};

/* sockets.NAME.max_conns_per_peer: at most the frame layer's whole-socket
 * cap (FRAME_CONNS_DEFAULT). */
#define CFG_CONNS_PER_PEER_MAX	1024

/* What every daemon's configuration holds, as the first member of its conf
 * struct: the skeleton (daemon.h) makes the state directory and drops to
 * the user from it. */
struct cfg_common {
	char			*file;		/* as given with -f */
	char			*dir;		/* its absolute directory */
	char			*user;		/* NULL: no drop */
	uid_t			 uid;		/* (uid_t)-1 when unset */
	gid_t			 gid;
	char			*state_dir;
	uint32_t		 max_frame_kb;	/* 0: frame.c's default */
	/* metrics: {listen, allow}: the opt-in Prometheus scrape listener
	 * (common/scrape.c).  listen NULL: none. */
	char			*metrics_listen;	/* "127.0.0.1:9417" */
	struct peer_allow	 metrics_allow;	/* empty: the admin socket's */
};

enum cfg_type {
	CFG_UINT,	/* uint32_t from min to max */
	CFG_BOOL,	/* int, 0 or 1 */
	CFG_STRING,	/* char * */
	CFG_PATH,	/* char *, relative to the file's directory; def_path
			 * ("$state_dir/store") when absent */
	CFG_USER,	/* the daemon's user, a name: struct cfg_common's */
	CFG_UID,	/* a peer's user, a name or a number: uid_t */
	CFG_SOCKET,	/* struct cfg_sock; only in the sockets: map, whose
			 * paths must differ */
	CFG_MAP,	/* a map whose keys are sub */
	CFG_FUNC,	/* the daemon's own reader (and free) */
	CFG_CHECK,	/* no key: parse checks the keys before it, in its
			 * place in the table (n: their map) */
};

#define CFG_REQUIRED	0x01	/* its absence is an error (ymap_check's) */
#define CFG_OPTIONAL	0x02	/* CFG_SOCKET: may be absent; else an absent
				 * socket is reported as "missing" */

struct cfg_key {
	const char		*name;
	enum cfg_type		 type;
	int			 flags;
	size_t			 off;		/* offsetof in the conf struct */
	uint64_t		 def;		/* CFG_UINT, CFG_BOOL, CFG_UID */
	uint64_t		 min;
	uint64_t		 max;
	const char		*def_path;	/* CFG_PATH: "$key/rest" */
	const struct cfg_key	*sub;		/* CFG_MAP */
	/* CFG_FUNC: n is the key's node (NULL when absent), key its
	 * name in messages ("policyd.user").  CFG_CHECK: n is the map. */
	void			(*parse)(struct ydoc *, const struct ynode *n,
				    const char *key, void *conf);
	void			(*free)(void *conf);
};

/* One line a key; a table ends with CFG_END. */
#define CFG_KEY(name, type, flags, st, field, def, min, max)		\
	{ (name), (type), (flags), offsetof(st, field), (def), (min),	\
	    (max), NULL, NULL, NULL, NULL }
#define CFG_U32(name, flags, st, field, def, min, max)			\
	CFG_KEY(name, CFG_UINT, flags, st, field, def, min, max)
#define CFG_PATHKEY(name, flags, st, field, def_path)			\
	{ (name), CFG_PATH, (flags), offsetof(st, field), 0, 0, 0,	\
	    (def_path), NULL, NULL, NULL }
#define CFG_SOCK(name, flags, st, field)				\
	CFG_KEY(name, CFG_SOCKET, flags, st, field, 0, 0, 0)
#define CFG_SUBMAP(name, flags, sub)					\
	{ (name), CFG_MAP, (flags), 0, 0, 0, 0, NULL, (sub), NULL, NULL }
#define CFG_OWN(name, flags, parse, free)				\
	{ (name), CFG_FUNC, (flags), 0, 0, 0, 0, NULL, NULL, (parse),	\
	    (free) }
#define CFG_CHECKS(parse)						\
	{ "", CFG_CHECK, 0, 0, 0, 0, 0, NULL, NULL, (parse), NULL }
#define CFG_END		{ NULL, CFG_UINT, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL }
/* The keys every daemon has, in struct cfg_common. */
#define CFG_COMMON_USER							\
	CFG_KEY("user", CFG_USER, 0, struct cfg_common, user, 0, 0, 0)
#define CFG_COMMON_STATE_DIR						\
	CFG_PATHKEY("state_dir", CFG_REQUIRED, struct cfg_common,	\
	    state_dir, NULL)
/* metrics: {listen: 127.0.0.1:PORT, allow: {users, groups}} (optional). */
#define CFG_COMMON_METRICS						\
	CFG_OWN("metrics", 0, cfg_metrics, cfg_metrics_free)
#define CFG_COMMON_MAX_FRAME_KB(def, min, max)				\
	CFG_U32("max_frame_kb", 0, struct cfg_common, max_frame_kb, def,	\
	    min, max)

struct cfg_table {
	const char		*name;		/* "gated.yaml": an empty file */
	size_t			 size;		/* of the conf struct */
	const struct cfg_key	*keys;
	/* Checks across keys, once all are read (may be NULL). */
	void			(*check)(struct ydoc *, const struct ynode *root,
				    void *conf);
};

/* The metrics: key (CFG_COMMON_METRICS): listen must be a loopback
 * address (IPv4 127.0.0.0/8 or [::1]) and a port, allow an allowlist. */
void	 cfg_metrics(struct ydoc *, const struct ynode *n, const char *key,
	    void *conf);
void	 cfg_metrics_free(void *conf);
/* "127.0.0.1:9417" or "[::1]:9417" into *ss and *len; 0, or -1 with why
 * (a static string) when it is not a loopback address and a port. */
int	 cfg_metrics_addr(const char *s, struct sockaddr_storage *ss,
	    socklen_t *len, const char **why);

/* Load file and fill a new conf struct (struct cfg_common first) by the
 * table: unknown keys, missing required ones and every bad value are
 * recorded in errs.  NULL if there was any. */
void	*cfg_parse(const char *file, const struct cfg_table *,
	    struct yerrs *);
/* Free what cfg_parse made (NULL is fine). */
void	 cfg_free(const struct cfg_table *, void *conf);

/* The top-level `user:` key of root, a user name, if present: *user
 * (malloc'd), *uid and *gid from its passwd entry; an unknown name is an
 * error and leaves all three untouched. */
void	 cfg_user(struct ydoc *, const struct ynode *root, char **user,
	    uid_t *uid, gid_t *gid);
/* A user as a name or a number: *uid, and *gid (if not NULL) from its
 * passwd entry, (gid_t)-1 for a number.  0, or -1 after an error. */
int	 cfg_uid(struct ydoc *, const struct ynode *, const char *key,
	    uid_t *uid, gid_t *gid);
/*
 * Another daemon's socket, the map n {socket: PATH, user: NAME} (what
 * names it in messages): *path, and *uid, who must be listening there, a
 * name or a number.  user defaults to def; an unknown default is reported
 * at n with hint added (" (the default; name the user)").  *uid is
 * untouched after an error.
 */
void	 cfg_peer(struct ydoc *, const struct ynode *n, const char *what,
	    const char *def, const char *hint, const char *dir, char **path,
	    uid_t *uid);
/* path joined to dir unless absolute (malloc'd). */
char	*cfg_path(const char *dir, const char *path);
/* The absolute directory of a config file, symlinks left as written. */
char	*cfg_dir(const char *file);
/* A plain decimal number up to INT_MAX; 0 or -1. */
int	 cfg_number(const char *s, unsigned long *out);
/* An optional path key of map, joined to dir; *out untouched if absent.
 * what names it in messages ("egress.socket"); NULL: the key itself. */
void	 cfg_pathkey(struct ydoc *, const struct ynode *map, const char *key,
	    const char *what, const char *dir, char **out);
/* An octal mode written as a string of digits ("0660"). */
void	 cfg_mode(struct ydoc *, const struct ynode *, const char *key,
	    mode_t *out);
/* {users: [...], groups: [...]}: names or numbers. */
void	 cfg_allow(struct ydoc *, const struct ynode *, const char *what,
	    struct peer_allow *);
/* sockets.<name>: a missing node is an error. */
void	 cfg_socket(struct ydoc *, const struct ynode *, const char *name,
	    const char *dir, struct cfg_sock *);
void	 cfg_socket_free(struct cfg_sock *);
/* Fill a frame server configuration from a parsed socket. */
void	 cfg_socket_server(const struct cfg_sock *, const char *name,
	    struct frame_server_config *);

#endif
