/*
 * peer.h: who may talk to a socket.  Each listening socket has an allowlist
 * of uids and gids; the peer's kernel-attested credentials (SO_PEERCRED,
 * and SO_PEERGROUPS for supplementary groups) are checked on accept, before
 * a single byte is read (DESIGN.md invariant 10).
 */
#ifndef SBX_PEER_H
#define SBX_PEER_H

#include <sys/types.h>
#include <sys/socket.h>
#include <stddef.h>

struct peer_allow {
	uid_t	*uids;
	size_t	 nuids;
	gid_t	*gids;
	size_t	 ngids;
};

/* Add by number or by name; names are resolved now (getpwnam/getgrnam).
 * Return 0, or -1 when a name does not exist (errno ENOENT). */
int	peer_allow_uid(struct peer_allow *, uid_t);
int	peer_allow_gid(struct peer_allow *, gid_t);
int	peer_allow_user(struct peer_allow *, const char *name);
int	peer_allow_group(struct peer_allow *, const char *name);
void	peer_allow_free(struct peer_allow *);

/* The peer of a connected Unix socket. */
int	peer_credentials(int fd, struct ucred *out);

/* 1 if uid (gid) is on the list, else 0: for a peer known otherwise than
 * by a Unix socket's credentials (scrape.c's TCP peers). */
int	peer_uid_listed(const struct peer_allow *, uid_t);
int	peer_gid_listed(const struct peer_allow *, gid_t);

/* 1 if the peer's uid, primary gid or any supplementary gid is on the
 * list, 0 if not, -1 on error (treated as not allowed by callers). */
int	peer_allowed(int fd, const struct peer_allow *, struct ucred *out);

/* The actor recorded in audit events: "uid:N" ("uid:?" when unknown). */
void	peer_actor(const struct ucred *, char *buf, size_t len);
/* The audit detail of a peer refused at socket sock's check (why as
 * frame.h's refused hook has it): "admin socket: peer uid 5 gid 5 pid 9
 * refused: not on the socket's allowlist". */
void	peer_refused_detail(const struct ucred *, const char *why,
	    const char *sock, char *buf, size_t len);

#endif
