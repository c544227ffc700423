/*
 * peer.c: who may talk to a socket.  The kernel attests the credentials of
 * the process at the other end of a Unix socket (SO_PEERCRED, and
 * SO_PEERGROUPS for its supplementary groups, both captured at connect()).
 * A peer is allowed when its uid, its primary gid or any of its
 * supplementary gids is on the socket's allowlist; anything we cannot
 * establish counts as "not allowed" (DESIGN.md invariants 7 and 10).
 */
#include <sys/types.h>
#include <sys/socket.h>

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "peer.h"
#include "util.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS	59	/* Linux 4.13; older libc headers lack it */
#endif

/* Group lists larger than this are not worth believing. */
#define PEER_MAX_GROUPS	65536

int
peer_allow_uid(struct peer_allow *pa, uid_t uid)
{
	pa->uids = xreallocarray(pa->uids, pa->nuids + 1, sizeof(*pa->uids));
	pa->uids[pa->nuids++] = uid;
	return 0;
}

int
peer_allow_gid(struct peer_allow *pa, gid_t gid)
{
	pa->gids = xreallocarray(pa->gids, pa->ngids + 1, sizeof(*pa->gids));
	pa->gids[pa->ngids++] = gid;
	return 0;
}

/*
 * A name made only of digits is taken as a number when no such name
 * exists, the way chown(1) does, so "1000" works in a config file.
 */
static int
peer_numeric(const char *s, unsigned long *out)
{
	char		*end;
	unsigned long	 v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v >= (unsigned long)UINT32_MAX)
		return -1;
	*out = v;
	return 0;
}

int
peer_allow_user(struct peer_allow *pa, const char *name)
{
	struct passwd	*pw;
	unsigned long	 n;

	if (name == NULL || *name == '\0') {
		errno = ENOENT;
		return -1;
	}
	errno = 0;
	if ((pw = getpwnam(name)) != NULL)
		return peer_allow_uid(pa, pw->pw_uid);
	if (peer_numeric(name, &n) == 0)
		return peer_allow_uid(pa, (uid_t)n);
	errno = ENOENT;
	return -1;
}

int
peer_allow_group(struct peer_allow *pa, const char *name)
{
	struct group	*gr;
	unsigned long	 n;

	if (name == NULL || *name == '\0') {
		errno = ENOENT;
		return -1;
	}
	errno = 0;
	if ((gr = getgrnam(name)) != NULL)
		return peer_allow_gid(pa, gr->gr_gid);
	if (peer_numeric(name, &n) == 0)
		return peer_allow_gid(pa, (gid_t)n);
	errno = ENOENT;
	return -1;
}

void
peer_allow_free(struct peer_allow *pa)
{
	if (pa == NULL)
		return;
	free(pa->uids);
	free(pa->gids);
	memset(pa, 0, sizeof(*pa));
}

int
peer_credentials(int fd, struct ucred *out)
{
	struct ucred	cred;
	socklen_t	len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1)
		return -1;
	if (len != sizeof(cred)) {
		errno = EPROTO;
		return -1;
	}
	*out = cred;
	return 0;
}

int
peer_uid_listed(const struct peer_allow *pa, uid_t uid)
{
	size_t	i;

	for (i = 0; i < pa->nuids; i++)
		if (pa->uids[i] == uid)
			return 1;
	return 0;
}

int
peer_gid_listed(const struct peer_allow *pa, gid_t gid)
{
	size_t	i;

	for (i = 0; i < pa->ngids; i++)
		if (pa->gids[i] == gid)
			return 1;
	return 0;
}

/*
 * Whether any of the peer's supplementary groups is listed: 1, 0, or -1
 * when the kernel would not tell us.  A kernel without SO_PEERGROUPS
 * (ENOPROTOOPT) means only the primary gid counts, which can only narrow
 * who gets in.
 */
static int
peer_groups_listed(int fd, const struct peer_allow *pa)
{
	gid_t		 stackbuf[64], *gids = stackbuf;
	socklen_t	 len = sizeof(stackbuf);
	size_t		 i, n;
	int		 rv = 0;

	while (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, gids, &len) == -1) {
		if (gids != stackbuf)
			free(gids);
		gids = NULL;
		if (errno == ENOPROTOOPT) {
			log_debug("peer: kernel lacks SO_PEERGROUPS; "
			    "checking the primary gid only");
			return 0;
		}
		/* ERANGE: len now holds the size the list needs. */
		if (errno != ERANGE || len == 0 ||
		    len / sizeof(gid_t) > PEER_MAX_GROUPS)
			return -1;
		gids = xmalloc(len);
	}
	n = len / sizeof(gid_t);
	for (i = 0; i < n; i++) {
		if (peer_gid_listed(pa, gids[i])) {
			rv = 1;
			break;
		}
	}
	if (gids != stackbuf)
		free(gids);
	return rv;
}

int
peer_allowed(int fd, const struct peer_allow *pa, struct ucred *out)
{
	struct ucred	cred;

	if (out != NULL) {
		/* Callers log these even on failure: make them recognisable. */
		out->pid = 0;
		out->uid = (uid_t)-1;
		out->gid = (gid_t)-1;
	}
	if (peer_credentials(fd, &cred) == -1)
		return -1;
	if (out != NULL)
		*out = cred;
	if (pa == NULL)
		return 0;
	if (peer_uid_listed(pa, cred.uid))
		return 1;
	if (pa->ngids == 0)
		return 0;
	if (peer_gid_listed(pa, cred.gid))
		return 1;
	return peer_groups_listed(fd, pa);
}

void
peer_actor(const struct ucred *cr, char *buf, size_t len)
{
	if (cr != NULL)
		snprintf(buf, len, "uid:%u", (unsigned)cr->uid);
	else
		snprintf(buf, len, "uid:?");
}

void
peer_refused_detail(const struct ucred *cr, const char *why,
    const char *sock, char *buf, size_t len)
{
	if (cr != NULL)
		bufprintf(buf, len, "%s socket: peer uid %u gid %u pid %ld "
		    "refused: %s", sock, (unsigned)cr->uid, (unsigned)cr->gid,
		    (long)cr->pid, strcmp(why, "not-allowed") == 0 ?
		    "not on the socket's allowlist" : "too many connections");
	else
		bufprintf(buf, len, "%s socket: a peer whose credentials "
		    "cannot be read was refused", sock);
}
