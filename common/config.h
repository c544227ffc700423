/*
 * config.h: the pieces of a daemon's YAML configuration that every sbx
 * daemon shares: paths relative to the config file, octal modes, and the
 * `sockets:` entries with their peer allowlists.  User and group names are
 * resolved while parsing, so a typo is reported at start-up (with file,
 * line, column and key, as every yaml.h error is) rather than when a peer
 * is refused.
 */
#ifndef SBX_CONFIG_H
#define SBX_CONFIG_H

#include <sys/types.h>

#include "peer.h"

struct ydoc;
struct ynode;
struct frame_server_config;

/* One listening socket: {path, mode, group, allow: {users, groups}}. */
struct cfg_sock {
	char			*path;
	mode_t			 mode;		/* default 0660 */
	char			*group_name;	/* NULL: leave the group */
	gid_t			 group;		/* (gid_t)-1 when unset */
	struct peer_allow	 allow;
};

/* The top-level `user:` key of root, a user name, if present: *user
 * (malloc'd), *uid and *gid from its passwd entry; an unknown name is an
 * error and leaves all three untouched. */
void	 cfg_user(struct ydoc *, const struct ynode *root, char **user,
	    uid_t *uid, gid_t *gid);
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
