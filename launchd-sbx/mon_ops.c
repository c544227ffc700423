/*
 * mon_ops.c: what sbx-monitor does as root, one function a request
 * (monitor.h says what each does), plus the start-up reaping and the
 * teardown.  monitor.c has checked a request's size, descriptors, id and
 * state; what is left to check here is its fields, every one before
 * anything is done.  A field that no correct launcher sends is a
 * violation (MON_VIOLATION, and the monitor dies); a thing the system
 * refuses is an answer (MON_ERR with errno and a sentence).
 *
 * Invariant: no path the launcher wrote is ever resolved by root.  Every
 * path is run_dir/x-ID/<fixed name> (x-ID is root's, 0711, so only root
 * changes what is in it), an entry read out of a directory the monitor
 * has just made root's, or an image rootfs resolved beneath the cache
 * descriptor with openat2 and bound by descriptor; nothing is followed
 * through a symbolic link, and nothing is removed across a mount point.
 */
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "log.h"
#include "name.h"
#include "launchd-sbx/handover.h"
#include "launchd-sbx/mon.h"
#include "launchd-sbx/spec.h"

#define CG_ROOT		"/sys/fs/cgroup"
#define SEAL_DEPTH	64	/* deeper than this is not a staged tree */
#define RM_DEPTH	256
#define CMD_NS		((uint64_t)MON_CMD_SECONDS * 1000000000ULL)
#define MON_CG_TRIES	50	/* rmdir of a busy cgroup: half a second */

/*
 * Every hierarchy a runtime may make a cgroup in; "" is cgroup v2's root
 * (there only when it is a v2 host).  The shared ones are what the
 * launcher and egressd read: pids (cgroup.procs), cpuacct and memory
 * (usage), and v2's.
 */
static const char *const mon_ctrls[] = {
	"memory", "pids", "cpu", "cpuacct", "cpuset", "devices", "freezer",
	"blkio", "systemd", "net_cls", "net_prio", "perf_event", "hugetlb",
	"rdma", "misc", "unified", "", NULL
};
static const char *const mon_shared[] = {
	"pids", "cpuacct", "memory", "unified", "", NULL
};

/* snprintf: a path or a sentence, cut at size (each is sized to hold
 * what it is given, the sentences for the wire). */
static __attribute__((format(printf, 3, 4))) void
mon_fmt(char *buf, size_t size, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(buf, size, fmt, ap);
	va_end(ap);
}

/* An answer: MON_ERR with err, "what: strerror(err)". */
static __attribute__((format(printf, 3, 4))) int
mon_err(struct mon_req *a, int err, const char *fmt, ...)
{
	char	 what[MON_ERR_MAX - 50];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	a->err = err != 0 ? err : EIO;
	mon_fmt(a->msg, sizeof(a->msg), "%s: %s", what, strerror(a->err));
	log_warnx("%s", a->msg);
	return MON_ANSWERED;
}

/* A violation: no answer, the monitor dies with this reason. */
static __attribute__((format(printf, 2, 3))) int
mon_bad(struct mon_req *a, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(a->msg, sizeof(a->msg), fmt, ap);
	va_end(ap);
	return MON_VIOLATION;
}

static uint64_t
mon_now(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A container id: 1..MON_ID_MAX of [A-Za-z0-9_.-], not starting with
 * '.', NUL-terminated and NUL-padded. */
int
mon_id_ok(const char id[MON_ID_MAX + 1])
{
	static const char	 zero[MON_ID_MAX + 1];
	size_t			 n = strnlen(id, MON_ID_MAX + 1);

	return n > 0 && n <= MON_ID_MAX && id[0] != '.' && strspn(id,
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
	    == n && memcmp(id + n, zero, MON_ID_MAX + 1 - n) == 0;
}

/* A name sent as text: NUL-terminated within its array, relative, and
 * no ".." component. */
static int
mon_relpath_ok(const char *s, size_t size)
{
	return memchr(s, '\0', size) != NULL && s[0] != '/' &&
	    !path_has_dotdot(s);
}

static int
mon_xopen(const struct mon *m, const char *id)
{
	char	 x[MON_ID_MAX + 3];

	mon_fmt(x, sizeof(x), "x-%s", id);
	return openat(m->runfd, x, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
}

/* ---- runtime commands ---- */

/*
 * Fork and exec the tier's runtime: its path, its global args, --root
 * run_dir/runtime/NAME, then words.  The child starts with a plain
 * signal state, the given niceness, /dev/null on stdin (and on stdout
 * and stderr unless given), no other descriptor and a fixed environment.
 */
static pid_t
mon_spawn(const struct mon *m, uint32_t tier, const char *const words[],
    int fd1, int fd2, int nice)
{
	static char *const	 env[] = { (char *)"PATH=/usr/local/sbin:"
	    "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	const struct mon_tier	*t = &m->tiers[tier];
	const char		*av[MON_ARGS_MAX + 16];
	char			 root[PATH_MAX];
	sigset_t		 none;
	size_t			 n = 0;
	pid_t			 pid;
	int			 null;

	mon_fmt(root, sizeof(root), "%s/runtime/%s", m->rundir, t->name);
	av[n++] = t->path;
	for (size_t i = 0; i < t->nargs; i++)
		av[n++] = t->args[i];
	av[n++] = "--root";
	av[n++] = root;
	for (size_t i = 0; words[i] != NULL && n < MON_ARGS_MAX + 15; i++)
		av[n++] = words[i];
	av[n] = NULL;
	if ((pid = fork()) != 0)
		return pid;
	(void)setpriority(PRIO_PROCESS, 0, nice);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if ((null = open("/dev/null", O_RDWR)) == -1 || dup2(null, 0) == -1 ||
	    dup2(fd1 != -1 ? fd1 : null, 1) == -1 ||
	    dup2(fd2 != -1 ? fd2 : null, 2) == -1)
		_exit(127);
	/* Nothing of the monitor's reaches the runtime or the init. */
	close_range(3, ~0U, 0);
	execve(av[0], (char *const *)av, env);
	_exit(127);
}

/* Wait for pid until deadline, then kill it: its status, or -1. */
static int
mon_wait(pid_t pid, uint64_t deadline)
{
	struct timespec	 nap = { 0, 1000000 };
	int		 st;
	pid_t		 r;

	for (;;) {
		if ((r = waitpid(pid, &st, WNOHANG)) != 0)
			return r == pid ? st : -1;
		if (mon_now() >= deadline) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &st, 0);
			return -1;
		}
		nanosleep(&nap, NULL);
	}
}

/* `delete --force ID` with the tier's runtime, started. */
static pid_t
mon_delete_start(const struct mon *m, const struct mon_slot *s)
{
	const char	*w[] = { "delete", "--force", s->id, NULL };

	return mon_spawn(m, s->tier, w, -1, -1, 0);
}

/* ---- paths ---- */

/*
 * Remove name beneath dfd, never following a symbolic link and never
 * entering another mount: a rootfs still bound there is the launcher's
 * image cache, and RESOLVE_NO_XDEV stops the walk at it.
 */
static int
mon_rmtree(int dfd, const char *name, int depth)
{
	struct open_how	 how;
	struct dirent	*de;
	DIR		*d;
	int		 fd, rc = 0;

	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR || depth > RM_DEPTH)
		return -1;
	memset(&how, 0, sizeof(how));
	how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
	if ((fd = (int)syscall(SYS_openat2, dfd, name, &how, sizeof(how))) ==
	    -1)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 &&
		    strcmp(de->d_name, "..") != 0 &&
		    mon_rmtree(fd, de->d_name, depth + 1) == -1)
			rc = -1;
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) == -1)
		rc = -1;
	return rc;
}

/* Unmount x/scratch and x/rootfs (stacked mounts too, detached: whoever
 * holds a descriptor keeps it), then remove x. */
static int
mon_remove(const struct mon *m, const char *x)
{
	static const char *const subs[] = { MON_SCRATCH, "rootfs", NULL };
	char	 path[PATH_MAX];

	for (size_t i = 0; subs[i] != NULL; i++) {
		mon_fmt(path, sizeof(path), "%s/%s/%s", m->rundir, x, subs[i]);
		for (int k = 0; k < 8; k++)
			if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == -1) {
				if (errno != EINVAL && errno != ENOENT)
					log_warn("umount %s", path);
				break;
			}
	}
	return mon_rmtree(m->runfd, x, 0);
}

/* CG_ROOT[/ctrl]/parent[/id]; -1 when the hierarchy is not there. */
static int
mon_cgpath(const struct mon *m, const char *ctrl, const char *id,
    char path[PATH_MAX])
{
	if (*ctrl == '\0' && access(CG_ROOT "/cgroup.controllers", F_OK) == -1)
		return -1;
	mon_fmt(path, PATH_MAX, "%s%s%s/%s%s%s", CG_ROOT, *ctrl ? "/" : "",
	    ctrl, m->cgparent, id != NULL ? "/" : "", id != NULL ? id : "");
	return 0;
}

/*
 * A created container's cgroups and x-ID/pid opened to reading (the
 * runtime made them under the monitor's umask, 077): egressd reads
 * cgroup.procs to tell a sandbox's processes, the launcher the usage and
 * the init's pid.  Random names and host pids, which every user sees in
 * /proc anyway.  With make, before a RUN (whose init starts the code
 * before the runtime exits, too early for the share after it): the
 * cgroups are made here first, so that egressd can read cgroup.procs at
 * the code's first connection; the runtime finds them empty and writes
 * every limit into them before its init runs the code.  A hierarchy not
 * mounted (ENOENT) is skipped; one that cannot be made otherwise is left
 * to the runtime, 0700, and egressd refuses the sandbox's connections.
 */
static void
mon_share(const struct mon *m, const char *id, int make)
{
	char	 path[PATH_MAX];
	int	 xfd;

	/* The parent (k 0), then the container's (k 1). */
	for (size_t i = 0; mon_shared[i] != NULL; i++)
		for (int k = 0; k < 2; k++) {
			if (mon_cgpath(m, mon_shared[i], k ? id : NULL, path) ==
			    -1 || (make && mkdir(path, 0755) == -1 &&
			    errno == ENOENT))
				break;
			if (chmod(path, 0755) == -1 && errno != ENOENT)
				log_warn("chmod %s", path);
		}
	if ((xfd = mon_xopen(m, id)) == -1)
		return;
	if (fchmodat(xfd, "pid", 0644, 0) == -1 && errno != ENOENT)
		log_warn("chmod x-%s/pid", id);
	close(xfd);
}

/* ---- STAGE ---- */

int
mon_stage(struct mon *m, struct mon_slot *s, struct mon_req *a)
{
	static const struct {
		const char	*name;
		mode_t		 mode;
	} subs[] = { { "in", 0700 }, { "code", 0700 }, { "run", 0755 } };
	const struct mon_stage	*r = a->body;
	const char		*what = "mkdir";
	char			 x[MON_ID_MAX + 3], path[PATH_MAX], opts[128];
	int			 xfd = -1, e;

	if (r->scratch_mb < 1 || r->scratch_mb > 1048576)
		return mon_bad(a, "STAGE %s: scratch_mb %u", r->id,
		    r->scratch_mb);
	if (r->gid < m->gid_first || r->gid - m->gid_first >= m->gid_count)
		return mon_bad(a, "STAGE %s: gid %u is not a sandbox group",
		    r->id, r->gid);
	for (size_t i = 0; i < m->gid_count; i++)
		if (m->slots[i].state != 0 && m->slots[i].gid == r->gid)
			return mon_err(a, EBUSY, "STAGE %s: group %u is staged "
			    "id %s's", r->id, r->gid, m->slots[i].id);
	mon_fmt(x, sizeof(x), "x-%s", r->id);
	if (mkdirat(m->runfd, x, 0700) == -1)
		return mon_err(a, errno, "STAGE %s: mkdir %s", r->id, x);
	if ((xfd = mon_xopen(m, r->id)) == -1 || fchown(xfd, 0, 0) == -1 ||
	    fchmod(xfd, 0711) == -1)
		goto fail;
	/* x-ID is root's and new: names in it are what they were made. */
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		what = subs[i].name;
		if (mkdirat(xfd, subs[i].name, 0700) == -1 ||
		    fchownat(xfd, subs[i].name, m->uid, m->gid,
		    AT_SYMLINK_NOFOLLOW) == -1 ||
		    fchmodat(xfd, subs[i].name, subs[i].mode, 0) == -1)
			goto fail;
	}
	what = "mkdir scratch";
	if (mkdirat(xfd, MON_SCRATCH, 0700) == -1)
		goto fail;
	what = "mount tmpfs on scratch";
	mon_fmt(path, sizeof(path), "%s/%s/%s", m->rundir, x,
	    MON_SCRATCH);
	mon_fmt(opts, sizeof(opts), "size=%um,nr_inodes=%llu,mode=0755,"
	    "uid=%d,gid=%u", r->scratch_mb, SPEC_SCRATCH_INODES(r->scratch_mb),
	    SPEC_UID, r->gid);
	if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    opts) == -1)
		goto fail;
	close(xfd);
	s->gid = r->gid;
	s->scratch_mb = r->scratch_mb;
	return MON_ANSWERED;
fail:
	e = errno;
	if (xfd != -1)
		close(xfd);
	(void)mon_remove(m, x);
	return mon_err(a, e, "STAGE %s: %s", r->id, what);
}

/* ---- SEAL ---- */

/* dfd/name, a regular file of the launcher's with one link and no
 * writer, becomes root:gid mode.  Both are checked again once it is
 * root's: no link can be made to it, and no writer open it, after that. */
static int
mon_seal_file(const struct mon *m, int dfd, const char *name, gid_t gid,
    mode_t mode)
{
	struct stat	 st;
	int		 fd, rc = -1;

	if ((fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_NOCTTY | O_CLOEXEC)) == -1)
		return -1;
	errno = EPERM;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    st.st_uid != m->uid || fchown(fd, 0, gid) == -1 ||
	    fchmod(fd, mode) == -1 || fstat(fd, &st) == -1)
		goto out;
	errno = EMLINK;
	/* A writer that opened (or mapped) it before stays one: the kernel
	 * refuses a read lease while anyone can write it. */
	if (st.st_nlink == 1 && fcntl(fd, F_SETLEASE, F_RDLCK) == 0)
		rc = fcntl(fd, F_SETLEASE, F_UNLCK);
out:
	close(fd);
	return rc;
}

/*
 * A tree of the launcher's, from the directory fd down: each directory is
 * made root's (0555) before it is read, so that the launcher can no
 * longer add, rename or remove what is in it; then each entry, by name
 * from the frozen directory, must be a directory (sealed in turn) or a
 * regular file with one link (root's, 0444).  The last name looked at
 * goes to bad.
 */
static int
mon_seal_dir(const struct mon *m, int fd, int depth, char *bad,
    size_t badlen)
{
	struct stat	 st;
	struct dirent	*de;
	DIR		*d;
	int		 sub, rc = 0;

	if (fstat(fd, &st) == -1)
		return -1;
	if (!S_ISDIR(st.st_mode) || st.st_uid != m->uid || depth > SEAL_DEPTH) {
		errno = depth > SEAL_DEPTH ? ELOOP : EPERM;
		return -1;
	}
	if (fchown(fd, 0, 0) == -1 || fchmod(fd, 0555) == -1)
		return -1;
	if ((sub = fcntl(fd, F_DUPFD_CLOEXEC, 0)) == -1)
		return -1;
	if ((d = fdopendir(sub)) == NULL) {
		close(sub);
		return -1;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		mon_fmt(bad, badlen, "%s", de->d_name);
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
			rc = -1;
		else if (S_ISREG(st.st_mode))
			rc = mon_seal_file(m, fd, de->d_name, 0, 0444);
		else if (!S_ISDIR(st.st_mode)) {
			errno = EPERM;
			rc = -1;
		} else if ((sub = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) == -1)
			rc = -1;
		else {
			rc = mon_seal_dir(m, sub, depth + 1, bad, badlen);
			close(sub);
		}
	}
	closedir(d);
	return rc;
}

/*
 * run/NAME, when the launcher put it there: a socket (or a file) of the
 * launcher's with one link.  A cold launch's moves up into x-ID, where
 * only root changes it; a pool entry's stays in run/, which its spec
 * binds.  It becomes root:gid mode, by descriptor.
 */
static int
mon_seal_run(const struct mon *m, const struct mon_slot *s, int xfd,
    int runfd, const char *name, int sock)
{
	struct stat	 st;
	char		 proc[64];
	int		 dfd = runfd, fd, rc = -1;

	if (fstatat(runfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1)
		return errno == ENOENT ? 0 : -1;
	if (!(s->state & ST_POOL)) {
		if (renameat2(runfd, name, xfd, name, RENAME_NOREPLACE) == -1)
			return -1;
		dfd = xfd;
	}
	if (!sock)
		return mon_seal_file(m, dfd, name, s->gid, 0440);
	if ((fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)) == -1)
		return -1;
	/* A socket cannot be opened: chown and chmod its O_PATH descriptor
	 * (chmod through /proc, glibc's own way to do it). */
	mon_fmt(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	errno = EPERM;
	if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_nlink == 1 &&
	    st.st_uid == m->uid && fchownat(fd, "", 0, s->gid,
	    AT_EMPTY_PATH) == 0 && chmod(proc, 0660) == 0)
		rc = 0;
	close(fd);
	return rc;
}

int
mon_seal(struct mon *m, struct mon_slot *s, struct mon_req *a)
{
	static const char *const trees[] = { "in", "code", NULL };
	char	 bad[NAME_MAX + 1];
	int	 xfd, fd, rc = 0;

	if ((s->state & ST_SPEC) && !(s->state & ST_POOL))
		return mon_bad(a, "SEAL %s: after its SPEC", s->id);
	if ((xfd = mon_xopen(m, s->id)) == -1)
		return mon_err(a, errno, "SEAL %s: x-%s", s->id, s->id);
	for (size_t i = 0; trees[i] != NULL && rc == 0; i++) {
		bad[0] = '\0';
		if ((fd = openat(xfd, trees[i], O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) == -1 ||
		    mon_seal_dir(m, fd, 0, bad, sizeof(bad)) == -1) {
			mon_err(a, errno, "SEAL %s: %s/ at \"%.64s\" (directories "
			    "and one-link files of the launcher's only)",
			    s->id, trees[i], bad);
			rc = -1;
		}
		if (fd != -1)
			close(fd);
	}
	fd = -1;
	if (rc == 0 && ((fd = openat(xfd, "run", O_RDONLY | O_DIRECTORY |
	    O_NOFOLLOW | O_CLOEXEC)) == -1 ||
	    mon_seal_run(m, s, xfd, fd, POOL_EGRESS_SOCK, 1) == -1 ||
	    mon_seal_run(m, s, xfd, fd, POOL_CA, 0) == -1)) {
		mon_err(a, errno, "SEAL %s: run/%s or run/%s (a socket and a "
		    "one-link file of the launcher's)", s->id, POOL_EGRESS_SOCK,
		    POOL_CA);
		rc = -1;
	}
	if (fd != -1)
		close(fd);
	close(xfd);
	return MON_ANSWERED;
}

/* ---- SPEC ---- */

int
mon_spec(struct mon *m, struct mon_slot *s, struct mon_req *a)
{
	static const char *const names[] = { "rootfs", "in", "code",
	    MON_SCRATCH, "run", POOL_EGRESS_SOCK, POOL_CA };
	const struct mon_spec	*r = a->body;
	const char *const	 texts[] = { r->policy_name, r->policy_hash,
	    r->task_id, r->execution_id, r->interp, r->prog, r->pool_key };
	const uint32_t		 known = MON_SPEC_EGRESS | MON_SPEC_CA |
	    MON_SPEC_POOL | MON_SPEC_WARM_PYTHON | MON_SPEC_NO_ANNOTATIONS;
	const int		 pool = (r->flags & MON_SPEC_POOL) != 0;
	char			 p[7][PATH_MAX], cg[PATH_MAX];
	char			 err[MON_ERR_MAX], src[64], *argv[3], *text;
	struct spec_params	 sp;
	struct open_how		 how;
	size_t			 len;
	int			 xfd = -1, img = -1, mounted = 0, e;

	if (r->tier < 1 || r->tier >= MON_NTIERS ||
	    m->tiers[r->tier].path == NULL || (r->flags & ~known) != 0 ||
	    r->gid != s->gid)
		return mon_bad(a, "SPEC %s: tier %u not configured, flags 0x%x "
		    "or gid %u (staged with %u)", s->id, r->tier, r->flags,
		    r->gid, s->gid);
	if (pool == ((s->state & ST_SEALED) != 0))
		return mon_bad(a, "SPEC %s: a %s spec %s SEAL", s->id,
		    pool ? "pool" : "launch", pool ? "after" : "before");
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		if (memchr(texts[i], '\0', MON_TEXT_MAX) == NULL)
			return mon_bad(a, "SPEC %s: text field %zu is not "
			    "NUL-terminated", s->id, i);
	if (!mon_relpath_ok(r->image, sizeof(r->image)) || r->image[0] == '\0')
		return mon_bad(a, "SPEC %s: image is not a name beneath the "
		    "cache", s->id);

	/* Every path is the monitor's own: x-ID's and the parameters'. */
	for (size_t i = 0; i < 7; i++)
		mon_fmt(p[i], PATH_MAX, "%s/x-%s/%s", m->rundir, s->id,
		    names[i]);
	mon_fmt(cg, sizeof(cg), "/%s/%s", m->cgparent, s->id);
	argv[0] = (char *)r->interp;
	argv[1] = (char *)r->prog;
	argv[2] = NULL;
	sp = (struct spec_params){
		.policy_name = r->policy_name, .policy_hash = r->policy_hash,
		.policy_version = r->policy_version,
		.cpus_milli = r->cpus_milli, .memory_mb = r->memory_mb,
		.pids = r->pids, .scratch_mb = r->scratch_mb,
		.task_id = r->task_id, .execution_id = r->execution_id,
		.rootfs = p[0], .in_dir = p[1], .code_dir = p[2],
		.scratch_dir = p[3], .init_path = m->init, .cgroups_path = cg,
		.gid = s->gid, .argv = argv,
		.flavor = (enum spec_flavor)m->tiers[r->tier].flavor,
		.egress_sock = !pool && (r->flags & MON_SPEC_EGRESS) ? p[5] :
		    NULL,
		.ca_file = !pool && (r->flags & MON_SPEC_CA) ? p[6] : NULL,
		.pool = pool, .pool_run = p[4], .pool_entry_id = s->id,
		.pool_key = r->pool_key, .pool_warm_imports = r->warm_imports,
		.pool_egress = (r->flags & MON_SPEC_EGRESS) != 0,
		.pool_warm_python = (r->flags & MON_SPEC_WARM_PYTHON) != 0,
		.no_annotations = (r->flags & MON_SPEC_NO_ANNOTATIONS) != 0,
	};
	if ((text = spec_render(&sp, &len, err, sizeof(err))) == NULL) {
		a->err = EINVAL;
		mon_fmt(a->msg, sizeof(a->msg), "SPEC %s: %s", s->id, err);
		log_warnx("%s", a->msg);
		return MON_ANSWERED;
	}

	mon_fmt(err, sizeof(err), "x-%s: its %s or %s (SEAL moves them "
	    "there)", s->id, POOL_EGRESS_SOCK, POOL_CA);
	if ((xfd = mon_xopen(m, s->id)) == -1 || (sp.egress_sock != NULL &&
	    faccessat(xfd, POOL_EGRESS_SOCK, F_OK, AT_SYMLINK_NOFOLLOW) ==
	    -1) || (sp.ca_file != NULL && faccessat(xfd, POOL_CA, F_OK,
	    AT_SYMLINK_NOFOLLOW) == -1))
		goto fail;
	/* The launcher owns the cache: resolve the rootfs once, beneath it,
	 * and bind that directory, so that no later rename or link of its
	 * changes what the runtime mounts. */
	memset(&how, 0, sizeof(how));
	how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	    RESOLVE_NO_MAGICLINKS;
	mon_fmt(err, sizeof(err), "image %.128s", r->image);
	if ((img = (int)syscall(SYS_openat2, m->cachefd, r->image, &how,
	    sizeof(how))) == -1)
		goto fail;
	mon_fmt(err, sizeof(err), "bind %.128s on rootfs", r->image);
	mon_fmt(src, sizeof(src), "/proc/self/fd/%d", img);
	if (mkdirat(xfd, "rootfs", 0700) == -1 ||
	    mount(src, p[0], NULL, MS_BIND, NULL) == -1)
		goto fail;
	mounted = 1;
	if (spec_write_at(xfd, text, len, err, sizeof(err)) == -1)
		goto fail;
	s->state |= pool ? ST_POOL : 0;
	s->tier = r->tier;
	errno = 0;
fail:
	e = errno;
	free(text);
	if (e != 0 && mounted)
		(void)umount2(p[0], MNT_DETACH | UMOUNT_NOFOLLOW);
	if (e != 0 && xfd != -1)
		(void)unlinkat(xfd, "rootfs", AT_REMOVEDIR);
	if (xfd != -1)
		close(xfd);
	if (img != -1)
		close(img);
	return e == 0 ? MON_ANSWERED : mon_err(a, e, "SPEC %s: %s", s->id, err);
}

/* ---- CMD, SIGKILL, RENICE ---- */

int
mon_cmd(struct mon *m, struct mon_slot *s, struct mon_req *a)
{
	const struct mon_cmd	*r = a->body;
	const struct mon_tier	*t = &m->tiers[s->tier];
	char			 bundle[PATH_MAX], pidf[PATH_MAX];
	/*
	 * A pool entry's sbx-init opens its assignment FIFO in run/, which
	 * runsc's gofer refuses (EPERM) unless told to open host FIFOs:
	 * only a pool entry's create is told so (create, not create + 1).
	 * Its mounts hold no host FIFO but its own: SEAL allows only files
	 * and directories in /in and /code, image.c refuses a rootfs with
	 * one, and a FIFO it makes in /scratch is its own.
	 */
	const char *const	 create[] = { "--host-fifo=open", "create",
	    "--bundle", bundle, "--pid-file", pidf, s->id, NULL };
	const char *const	 start[] = { "start", s->id, NULL };
	const char *const	 killw[] = { "kill", "--all", s->id, "KILL", NULL };
	const char *const	 del[] = { "delete", "--force", s->id, NULL };
	const char *const	*words[] = { NULL, create + 1, start, killw, del,
	    (const char *const[]){ "run", "--detach", "--bundle", bundle,
	    "--pid-file", pidf, s->id, NULL } };
	const char *const	*w;
	struct mon_run		*run = NULL;
	struct stat		 st;
	pid_t			 pid;

	if (r->pad != 0 || r->nice < 0 || r->nice > 19 || r->tier != s->tier)
		return mon_bad(a, "CMD %s: tier %u (its spec's %u), nice %d or "
		    "pad", s->id, r->tier, s->tier, r->nice);
	for (int i = 0; i < a->nfds; i++)
		if (fstat(a->fds[i], &st) == -1 || !(S_ISFIFO(st.st_mode) ||
		    S_ISSOCK(st.st_mode) || S_ISREG(st.st_mode)))
			return mon_bad(a, "CMD %s: descriptor %d is not a pipe, "
			    "socket or file", s->id, i);
	if (access(t->path, X_OK) == -1)
		return mon_err(a, errno, "CMD %s: runtime %s", s->id, t->path);
	for (size_t i = 0; i < MON_CMDS_MAX && run == NULL; i++)
		if (m->runs[i].pid == 0)
			run = &m->runs[i];
	if (run == NULL)
		return mon_err(a, EAGAIN, "CMD %s: %d runtime commands are "
		    "running", s->id, MON_CMDS_MAX);
	mon_fmt(bundle, sizeof(bundle), "%s/x-%s", m->rundir, s->id);
	mon_fmt(pidf, sizeof(pidf), "%s/pid", bundle);
	if (r->verb == MON_RUN)
		mon_share(m, s->id, 1);
	/* monitor.c's table let only these verbs through */
	w = r->verb == MON_CREATE && (s->state & ST_POOL) &&
	    t->flavor == SPEC_RUNSC ? create : words[r->verb];
	if ((pid = mon_spawn(m, r->tier, w, a->nfds == 2 ? a->fds[0] : -1,
	    a->nfds == 2 ? a->fds[1] : -1, r->nice)) == -1)
		return mon_err(a, errno, "CMD %s: fork", s->id);
	*run = (struct mon_run){ .pid = pid, .verb = r->verb,
	    .slot = (size_t)(s - m->slots), .gen = s->gen,
	    .deadline = mon_now() + CMD_NS };
	log_debug("%s %s: %s pid %ld", w[w == create], s->id, t->path, (long)pid);
	a->value = pid;
	return MON_ANSWERED;
}

/* 1 when pid is a live (not yet a zombie) child of the monitor's. */
static int
mon_child(pid_t pid)
{
	char	 path[64], buf[512], *p, state;
	long	 ppid;
	ssize_t	 n;
	int	 fd;

	mon_fmt(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if (pid <= 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* pid (comm) state ppid: comm may hold anything, ')' too. */
	if ((p = strrchr(buf, ')')) == NULL ||
	    sscanf(p + 1, " %c %ld", &state, &ppid) != 2)
		return 0;
	return ppid == (long)getpid() && state != 'Z' && state != 'X';
}

/*
 * sig to every live child of the monitor's (id NULL: the runtime
 * commands and the inits, and runsc's sandbox and gofer, adopted as
 * their subreaper) or to every process in one of id's cgroups: how many
 * it reached (sig 0: how many there are).  A cgroup that cannot be read
 * counts as one that is not empty.
 */
static int
mon_signal(const struct mon *m, const char *id, int sig)
{
	char		 path[PATH_MAX], *end;
	struct dirent	*de;
	DIR		*d;
	FILE		*f;
	long		 pid;
	size_t		 len;
	int		 n = 0;

	if (id == NULL && (d = opendir("/proc")) != NULL) {
		while ((de = readdir(d)) != NULL)
			if ((pid = strtol(de->d_name, &end, 10)) > 0 &&
			    *end == '\0' && mon_child((pid_t)pid) &&
			    kill((pid_t)pid, sig) == 0)
				n++;
		closedir(d);
	}
	for (size_t i = 0; id != NULL && mon_ctrls[i] != NULL; i++) {
		if (mon_cgpath(m, mon_ctrls[i], id, path) == -1)
			continue;
		len = strlen(path);
		mon_fmt(path + len, PATH_MAX - len, "/cgroup.procs");
		if ((f = fopen(path, "re")) == NULL) {
			n += errno != ENOENT;
			continue;
		}
		while (fscanf(f, "%ld", &pid) == 1)
			n += pid > 0 && kill((pid_t)pid, sig) == 0;
		fclose(f);
	}
	return n;
}

/*
 * rmdir parent/id in every hierarchy, and again, up to tries times 10 ms
 * apart, while one is busy: what was killed in it may not have exited
 * yet, and whatever shows in it is killed (cgroup_parent is the
 * monitor's alone, and id one of its slots: mon_id_ok has no "..", and
 * a cgroup file system has no symbolic link).  id NULL: the parent, once
 * (tries 1).  0, or the errno of a failure, logged: what is left is the
 * next start's reaping's.
 */
static int
mon_cg_rmdirs(const struct mon *m, const char *id, int tries)
{
	struct timespec	 nap = { 0, 10000000 };
	char		 path[PATH_MAX];
	int		 err = EBUSY;

	for (int t = 0; t < tries && err == EBUSY; t++) {
		if (t > 0 && mon_signal(m, id, SIGKILL) >= 0)
			nanosleep(&nap, NULL);
		err = 0;
		for (size_t i = 0; mon_ctrls[i] != NULL; i++)
			if (mon_cgpath(m, mon_ctrls[i], id, path) == 0 &&
			    rmdir(path) == -1 && errno != ENOENT && err != EBUSY)
				err = errno;
	}
	if (err != 0)
		log_warnx("cgroup %s/%s: %s", m->cgparent, id ? id : "",
		    strerror(err));
	return err;
}

/*
 * SIGKILL with mon_signal() until none is left: 0, or -1 after a second.
 * Once one was killed, none must hold across a pause too: what a killed
 * command had started becomes ours, or shows in its cgroup, only late.
 */
int
mon_kill_all(const struct mon *m, const char *id)
{
	struct timespec	 nap = { 0, 10000000 };
	int		 n, killed = 0, quiet = 0;

	for (int pass = 0; pass < 100; pass++) {
		if (pass > 0)
			nanosleep(&nap, NULL);
		n = mon_signal(m, id, SIGKILL);
		killed |= n > 0;
		quiet = n > 0 ? 0 : quiet + 1;
		if (quiet > killed)
			return 0;
	}
	return -1;
}

/* SIGKILL and RENICE (to niceness 0): a live child of the monitor's
 * only, a runtime command or an adopted init. */
int
mon_pid(struct mon *m, struct mon_slot *s, struct mon_req *a)
{
	const struct mon_pid	*r = a->body;
	const char		*what = a->type == MON_SIGKILL ? "SIGKILL" :
	    "RENICE";

	(void)m;
	(void)s;
	if (r->pad != 0)
		return mon_bad(a, "%s: pad", what);
	if (!mon_child(r->pid))
		return mon_err(a, ESRCH, "%s %ld: not a live child of the "
		    "monitor", what, (long)r->pid);
	if ((a->type == MON_SIGKILL ? kill(r->pid, SIGKILL) :
	    setpriority(PRIO_PROCESS, (id_t)r->pid, 0)) == -1)
		return mon_err(a, errno, "%s %ld", what, (long)r->pid);
	return MON_ANSWERED;
}

/* ---- HANDOVER, CG_REMOVE, UNSTAGE ---- */

int
mon_handover(struct mon *m, struct mon_slot *s, struct mon_req *a)
{
	const struct mon_handover	*r = a->body;
	char				*names[MON_OUTPUTS_MAX];
	int				 xfd, fd;

	if (r->pad != 0 || r->n > MON_OUTPUTS_MAX)
		return mon_bad(a, "HANDOVER %s: %u names, or pad", s->id, r->n);
	for (uint32_t i = 0; i < r->n; i++) {
		if (!mon_relpath_ok(r->names[i], sizeof(r->names[i])))
			return mon_bad(a, "HANDOVER %s: name %u is not a relative "
			    "path without \"..\"", s->id, i);
		names[i] = (char *)r->names[i];
	}
	/* Its init's end is not enough: a CREATE the launcher killed before
	 * the runtime wrote the pid file leaves an init nobody knows of. */
	if (mon_signal(m, s->id, 0) > 0)
		return mon_err(a, EBUSY, "HANDOVER %s: processes of the "
		    "container still run", s->id);
	if ((xfd = mon_xopen(m, s->id)) == -1)
		return mon_err(a, errno, "HANDOVER %s: x-%s", s->id, s->id);
	fd = openat(xfd, MON_SCRATCH, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC);
	close(xfd);
	if (fd == -1)
		return mon_err(a, errno, "HANDOVER %s: x-%s/scratch", s->id,
		    s->id);
	handover_outputs(fd, names, r->n, m->gate_uid);
	a->fd = fd;
	return MON_ANSWERED;
}

int
mon_cg_remove(struct mon *m, struct mon_slot *s, struct mon_req *a)
{
	int	 e = mon_cg_rmdirs(m, s->id, 1);

	return e == 0 ? MON_ANSWERED : mon_err(a, e, "CG_REMOVE %s: rmdir "
	    "%s/%s", s->id, m->cgparent, s->id);
}

/*
 * What still runs of the id dies first: its runtime commands (a CREATE
 * in flight would race the delete and leave an init; the loop reaps
 * them and sends their MON_EXIT), the container (a delete, when created
 * and not yet deleted: the monitor never forgets a container), then
 * every process in its cgroups, and then the cgroups go too (a create
 * killed before the runtime wrote its state leaves cgroups that its
 * delete knows nothing of).  Only an empty container frees the slot
 * and its group; what cannot be removed then is left to the next
 * start's reaping.  (cgroup_parent is the monitor's alone: its start-up
 * reaping removes whatever is under it.)
 */
int
mon_unstage(struct mon *m, struct mon_slot *s, struct mon_req *a)
{
	struct timespec	 nap = { 0, 1000000 };
	char		 x[MON_ID_MAX + 3];
	pid_t		 pid;
	int		 rc;

	for (size_t i = 0; i < MON_CMDS_MAX; i++)
		if ((pid = m->runs[i].pid) != 0 && m->runs[i].gen == s->gen &&
		    kill(pid, SIGKILL) == 0)
			for (int k = 0; k < 1000 && mon_child(pid); k++)
				nanosleep(&nap, NULL);
	if ((s->state & (ST_CREATE | ST_DELETED)) == ST_CREATE &&
	    (pid = mon_delete_start(m, s)) != -1)
		(void)mon_wait(pid, mon_now() + CMD_NS);
	if ((s->state & ST_CREATE) && mon_kill_all(m, s->id) == -1)
		return mon_err(a, EBUSY, "UNSTAGE %s: a process runs", s->id);
	(void)mon_cg_rmdirs(m, s->id, MON_CG_TRIES);
	mon_fmt(x, sizeof(x), "x-%s", s->id);
	rc = mon_remove(m, x);
	memset(s, 0, sizeof(*s));
	return rc == -1 ? mon_err(a, errno, "UNSTAGE: removing %s", x) :
	    MON_ANSWERED;
}

/* ---- children ---- */

/*
 * After a CREATE: its init, from the pid file the runtime (root) wrote in
 * x-ID, if it is a live child of ours (adopted); none, and the container
 * is as dead as HANDOVER needs it.
 */
static void
mon_init(struct mon *m, struct mon_slot *s)
{
	char	 path[sizeof(m->rundir) + MON_ID_MAX + 8], buf[32];
	ssize_t	 n = -1;
	int	 fd;

	mon_fmt(path, sizeof(path), "%s/x-%s/pid", m->rundir, s->id);
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) != -1) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	buf[n > 0 ? n : 0] = '\0';
	s->init = (pid_t)strtol(buf, NULL, 10);
	if (s->init <= 0 || !mon_child(s->init))
		s->state |= ST_DEAD;
}

/* A child was reaped: a container's init, or a runtime command.  A
 * CREATE that exited 0 shares its cgroups and its pid file before its
 * MON_EXIT goes out. */
void
mon_reaped(struct mon *m, pid_t pid, int status)
{
	struct mon_slot	*s;

	for (size_t i = 0; i < m->gid_count; i++)
		if (m->slots[i].state != 0 && m->slots[i].init == pid)
			m->slots[i].state |= ST_DEAD;
	for (size_t i = 0; i < MON_CMDS_MAX; i++) {
		struct mon_run	*run = &m->runs[i];

		if (run->pid != pid)
			continue;
		s = &m->slots[run->slot];
		if (s->state != 0 && s->gen == run->gen) {
			if (run->verb == MON_CREATE || run->verb == MON_RUN) {
				if (status == 0)
					mon_share(m, s->id, 0);
				mon_init(m, s);
			}
			if (run->verb == MON_DELETE && status == 0)
				s->state |= ST_DELETED;
		}
		memset(run, 0, sizeof(*run));
		return;
	}
}

/* Milliseconds to the next command deadline, or -1. */
int
mon_timeout(const struct mon *m)
{
	uint64_t	 now = mon_now(), next = UINT64_MAX;

	for (size_t i = 0; i < MON_CMDS_MAX; i++)
		if (m->runs[i].pid != 0 && !m->runs[i].killed &&
		    m->runs[i].deadline < next)
			next = m->runs[i].deadline;
	if (next == UINT64_MAX)
		return -1;
	return next <= now ? 0 : (int)((next - now) / 1000000 + 1);
}

void
mon_expire(struct mon *m)
{
	uint64_t	 now = mon_now();

	for (size_t i = 0; i < MON_CMDS_MAX; i++) {
		struct mon_run	*run = &m->runs[i];

		if (run->pid == 0 || run->killed || run->deadline > now)
			continue;
		log_warnx("runtime command %ld ran over %d seconds: killed",
		    (long)run->pid, MON_CMD_SECONDS);
		kill(run->pid, SIGKILL);
		run->killed = 1;
	}
}

/*
 * The end, on EOF or after a violation: the launcher's commands killed,
 * every created container deleted (all at once, MON_CMD_SECONDS for all
 * of them), every cgroup and staging directory removed.
 */
void
mon_teardown(struct mon *m)
{
	uint64_t	 deadline = mon_now() + CMD_NS;
	char		 path[PATH_MAX];
	pid_t		*pids;

	/* A free run is all zero already: the loop's reaping clears it. */
	for (size_t i = 0; i < MON_CMDS_MAX; i++)
		if (m->runs[i].pid != 0 && kill(m->runs[i].pid, SIGKILL) == 0)
			(void)waitpid(m->runs[i].pid, NULL, 0);
	memset(m->runs, 0, sizeof(m->runs));
	if ((pids = calloc(m->gid_count, sizeof(*pids))) == NULL)
		fatal("teardown");
	for (size_t i = 0; i < m->gid_count; i++)
		if (m->slots[i].state & ST_CREATE)
			pids[i] = mon_delete_start(m, &m->slots[i]);
	for (size_t i = 0; i < m->gid_count; i++)
		if (pids[i] > 0 && mon_wait(pids[i], deadline) != 0)
			log_warnx("cannot delete container %s", m->slots[i].id);
	/* A delete that failed leaves its init to us: no sandbox outlives
	 * its monitor. */
	(void)mon_kill_all(m, NULL);
	for (size_t i = 0; i < m->gid_count; i++) {
		if (m->slots[i].state == 0)
			continue;
		(void)mon_cg_rmdirs(m, m->slots[i].id, MON_CG_TRIES);
		mon_fmt(path, sizeof(path), "x-%s", m->slots[i].id);
		if (mon_remove(m, path) == -1)
			log_warn("cannot remove %s", path);
		memset(&m->slots[i], 0, sizeof(m->slots[i]));
	}
	free(pids);
	/* The parent too, now empty (each deployment has its own: sbx-up
	 * names it after the state directory; a test's would stay). */
	(void)mon_cg_rmdirs(m, NULL, 1);
}

/* ---- start-up ---- */

/* Read what fd gives until EOF or the deadline, NUL-terminated. */
static void
mon_read_all(int fd, char *buf, size_t size, uint64_t deadline)
{
	struct pollfd	 pfd = { fd, POLLIN, 0 };
	size_t		 len = 0;
	ssize_t		 r;
	uint64_t	 now;

	while ((now = mon_now()) < deadline && len + 1 < size &&
	    poll(&pfd, 1, (int)((deadline - now) / 1000000 + 1)) > 0) {
		if ((r = read(fd, buf + len, size - 1 - len)) <= 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
}

/* Every mount a dead monitor left under run_dir/x-*; detaching one may
 * reveal another below it: rescan until clean. */
static void
mon_reap_mounts(const struct mon *m)
{
	char	 line[4096], pre[sizeof(m->rundir) + 4], mp[4096];
	FILE	*f;
	size_t	 plen;
	int	 again = 1;

	mon_fmt(pre, sizeof(pre), "%s/x-", m->rundir);
	plen = strlen(pre);
	for (int pass = 0; again && pass < 8; pass++) {
		again = 0;
		if ((f = fopen("/proc/self/mountinfo", "re")) == NULL)
			return;
		while (fgets(line, sizeof(line), f) != NULL) {
			if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
			    strncmp(mp, pre, plen) != 0 || strchr(mp, '\\'))
				continue;
			if (umount2(mp, MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
				log_info("unmounted leftover %s", mp);
				again = 1;
			} else
				log_warn("leftover mount %s", mp);
		}
		fclose(f);
	}
}

/*
 * What a dead monitor left: each configured runtime's containers, the
 * mounts and staging directories under run_dir, the cgroups under the
 * parent.  (Half-finished image unpacks are the launcher's own.)
 */
void
mon_reap_leftovers(struct mon *m)
{
	const char	*lw[] = { "list", "--quiet", NULL };
	char		 list[65536], *line, *save, dir[PATH_MAX], sub[PATH_MAX];
	struct dirent	*de;
	DIR		*d;
	uint64_t	 deadline;
	pid_t		 pid;
	int		 p[2], fd;

	for (uint32_t t = 1; t < MON_NTIERS; t++) {
		if (m->tiers[t].path == NULL ||
		    access(m->tiers[t].path, X_OK) == -1 ||
		    pipe2(p, O_CLOEXEC) == -1)
			continue;
		deadline = mon_now() + CMD_NS;
		pid = mon_spawn(m, t, lw, p[1], -1, 0);
		close(p[1]);
		list[0] = '\0';
		if (pid != -1)
			mon_read_all(p[0], list, sizeof(list), deadline);
		close(p[0]);
		if (pid == -1 || mon_wait(pid, deadline) != 0)
			continue;
		for (line = strtok_r(list, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save)) {
			struct mon_slot	 s;

			if (!name_ok(line) || strlen(line) > MON_ID_MAX)
				continue;
			memset(&s, 0, sizeof(s));
			memcpy(s.id, line, strlen(line));
			s.tier = t;
			if ((pid = mon_delete_start(m, &s)) != -1 &&
			    mon_wait(pid, mon_now() + CMD_NS) == 0)
				log_info("removed leftover container %s", line);
			else
				log_warnx("cannot remove leftover container %s",
				    line);
		}
	}
	mon_reap_mounts(m);
	if ((fd = fcntl(m->runfd, F_DUPFD_CLOEXEC, 0)) != -1 &&
	    (d = fdopendir(fd)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strncmp(de->d_name, "x-", 2) != 0)
				continue;
			if (mon_remove(m, de->d_name) == -1)
				log_warn("cannot remove leftover %s", de->d_name);
			else
				log_info("removed leftover staging %s",
				    de->d_name);
		}
		closedir(d);
	}
	for (size_t i = 0; mon_ctrls[i] != NULL; i++) {
		if (mon_cgpath(m, mon_ctrls[i], NULL, dir) == -1 ||
		    (d = opendir(dir)) == NULL)
			continue;
		while ((de = readdir(d)) != NULL) {
			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			mon_fmt(sub, sizeof(sub), "%s/%s", dir, de->d_name);
			/* Busy (a live process) is left, and logged. */
			if (rmdir(sub) == -1)
				log_warn("leftover cgroup %s", sub);
			else
				log_info("removed leftover cgroup %s", sub);
		}
		closedir(d);
	}
}
