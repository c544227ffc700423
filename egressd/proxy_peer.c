/*
 * proxy_peer.c: who may use a channel (invariant 11: no one but the
 * sandbox itself -- no other host user, no other sandbox -- can reach an
 * execution's egress channel).
 *
 * The channel's socket is root's and the sandbox's own group's, mode 0660,
 * in a directory only root enters (launchd-sbx): that is the first gate.
 * This is the second, on every accepted connection before a byte is read:
 * the kernel's credentials of the peer (SO_PEERCRED) must carry the
 * sandbox's group unless the peer is root (gVisor's gofer connects on the
 * sandbox's behalf), and the peer's process must be in the sandbox's
 * cgroup, which only root can put a process in.  Membership is read from
 * the cgroup's own cgroup.procs (and its children's), not from
 * /proc/PID/cgroup, so it holds under systemd's ProtectProc=invisible and
 * hidepid.  The peer is taken as a pidfd at connect time (SO_PEERPIDFD,
 * Linux 6.5) and must still be alive after the membership was read: a pid
 * that was recycled between the connect and the read cannot pass for the
 * peer.  Older kernels have only the pid, and the window of its reuse.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "egressd.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD	77	/* Linux 6.5 */
#endif

/* The hierarchy's mount point and the cgroup path its root stands for. */
static char	*peer_mount;
static char	*peer_mroot;

int
proxy_peer_init(char *err, size_t errlen)
{
	FILE	*f;
	char	 line[4096], *v1 = NULL, *v1root = NULL, *v2 = NULL;
	char	*v2root = NULL;

	if ((f = fopen("/proc/self/mountinfo", "re")) == NULL) {
		snprintf(err, errlen, "/proc/self/mountinfo: %s",
		    strerror(errno));
		return -1;
	}
	/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS] - TYPE SRC SUPER */
	while (fgets(line, sizeof(line), f) != NULL) {
		char	*fld[6], *dash, *type, *super, *save = NULL;
		int	 n = 0;

		if ((dash = strstr(line, " - ")) == NULL)
			continue;
		*dash = '\0';
		for (char *t = strtok_r(line, " ", &save); t != NULL && n < 6;
		    t = strtok_r(NULL, " ", &save))
			fld[n++] = t;
		save = NULL;
		type = strtok_r(dash + 3, " ", &save);
		(void)strtok_r(NULL, " ", &save);
		super = strtok_r(NULL, " \n", &save);
		if (n < 5 || type == NULL)
			continue;
		if (strcmp(type, "cgroup") == 0 && super != NULL &&
		    v1 == NULL) {
			char	*o, *s2 = NULL;

			for (o = strtok_r(super, ",", &s2); o != NULL;
			    o = strtok_r(NULL, ",", &s2))
				if (strcmp(o, "pids") == 0) {
					v1 = xstrdup(fld[4]);
					v1root = xstrdup(fld[3]);
				}
		} else if (strcmp(type, "cgroup2") == 0 && v2 == NULL) {
			v2 = xstrdup(fld[4]);
			v2root = xstrdup(fld[3]);
		}
	}
	fclose(f);
	free(peer_mount);
	free(peer_mroot);
	if (v1 != NULL) {
		peer_mount = v1;
		peer_mroot = v1root;
		free(v2);
		free(v2root);
	} else {
		peer_mount = v2;
		peer_mroot = v2root;
	}
	if (peer_mount == NULL) {
		snprintf(err, errlen, "no pids cgroup hierarchy and no cgroup2 "
		    "is mounted: egressd cannot tell a sandbox's processes");
		return -1;
	}
	log_debug("channel peers: cgroups under %s (root %s)", peer_mount,
	    peer_mroot);
	return 0;
}

char *
proxy_peer_cgdir(const char *cgroup, char *err, size_t errlen)
{
	size_t	 rl;
	char	*dir;

	if (peer_mount == NULL) {
		snprintf(err, errlen, "egressd found no cgroup hierarchy at its "
		    "start: no channel can be checked, none is opened");
		return NULL;
	}
	if (cgroup == NULL || cgroup[0] != '/' || strlen(cgroup) < 2) {
		snprintf(err, errlen, "bad cgroup path");
		return NULL;
	}
	/* A mount of a sub-tree (egressd in a cgroup namespace): the path
	 * must be under it. */
	rl = strcmp(peer_mroot, "/") == 0 ? 0 : strlen(peer_mroot);
	if (rl > 0 && (strncmp(cgroup, peer_mroot, rl) != 0 ||
	    cgroup[rl] != '/')) {
		snprintf(err, errlen, "cgroup %s is outside what egressd sees "
		    "(%s)", cgroup, peer_mroot);
		return NULL;
	}
	xasprintf(&dir, "%s%s", peer_mount, cgroup + rl);
	return dir;
}

/* 1 if pid is listed in dir/cgroup.procs, 0 if not, -1 unreadable. */
static int
peer_listed(const char *dir, pid_t pid)
{
	char	 path[PATH_MAX], line[32];
	FILE	*f;
	int	 found = 0;

	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >=
	    (int)sizeof(path))
		return -1;
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strtol(line, NULL, 10) == (long)pid) {
			found = 1;
			break;
		}
	fclose(f);
	return found;
}

int
proxy_peer_member(const char *dir, pid_t pid)
{
	DIR		*d;
	struct dirent	*de;
	char		 sub[PATH_MAX];
	int		 r;

	if ((r = peer_listed(dir, pid)) != 0)
		return r;
	/* One level below: a runtime may keep its helpers in a child. */
	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name) >=
		    (int)sizeof(sub))
			continue;
		if (peer_listed(sub, pid) == 1) {
			r = 1;
			break;
		}
	}
	closedir(d);
	return r;
}

int
proxy_peer_check(const char *cgdir, gid_t gid, int fd, char *why,
    size_t whylen)
{
	struct ucred	 uc;
	socklen_t	 sl = sizeof(uc);
	int		 pidfd = -1, rc = -1, m;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &sl) == -1 ||
	    sl != sizeof(uc)) {
		snprintf(why, whylen, "no peer credentials: %s",
		    strerror(errno));
		return -1;
	}
	if (uc.uid != 0 && uc.gid != gid) {
		snprintf(why, whylen, "peer pid %ld uid %lu gid %lu is not the "
		    "sandbox (group %lu)", (long)uc.pid,
		    (unsigned long)uc.uid, (unsigned long)uc.gid,
		    (unsigned long)gid);
		return -1;
	}
	if (uc.pid <= 0) {
		snprintf(why, whylen, "the peer has no pid here");
		return -1;
	}
	sl = sizeof(pidfd);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &sl) == -1) {
		if (errno != ENOPROTOOPT && errno != EINVAL) {
			snprintf(why, whylen, "peer pid %ld: no pidfd: %s",
			    (long)uc.pid, strerror(errno));
			return -1;
		}
		pidfd = -1;
	}
	if ((m = proxy_peer_member(cgdir, uc.pid)) != 1) {
		snprintf(why, whylen, "peer pid %ld uid %lu is not in the "
		    "sandbox's cgroup%s", (long)uc.pid, (unsigned long)uc.uid,
		    m == -1 ? " (which cannot be read)" : "");
		goto out;
	}
	/* Signal 0 only asks whether it lives: EPERM (the gofer is
	 * root's) means it does; ESRCH that the pid read may be another's. */
	if (pidfd != -1 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL,
	    0) == -1 && errno == ESRCH) {
		snprintf(why, whylen, "peer pid %ld exited before it could "
		    "be checked", (long)uc.pid);
		goto out;
	}
	rc = 0;
 out:
	if (pidfd != -1)
		close(pidfd);
	return rc;
}
