/*
 * runtime.c: the runtime driver, everything launchd-sbx does to the host
 * as root and nothing else: spawn the OCI runtime (and the few tools the
 * image store runs) with a plain signal state, wait for a command with a
 * time limit, mount and unmount an execution's scratch tmpfs, write staged
 * files, read, share and remove a container's cgroups, check the
 * configured runtimes at start and reap what a dead instance left
 * (containers, mounts, staging trees, cgroups, half-finished unpacks).
 * It knows no protocol, policy or execution: the layers above (run.c,
 * pool.c, image.c) call down into it with paths, ids and argument
 * vectors, and it calls none of them back.  It is the part of the daemon
 * the privilege split (issue 12) moves behind the root monitor.
 */
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

#define RUNTIME_CGROUP_ROOT	"/sys/fs/cgroup"

/* Every hierarchy the runtime may create a cgroup in, the cgroup v2
 * "unified" mount of a hybrid layout included (runc creates one there). */
static const char *const runtime_controllers[] = {
	"memory", "pids", "cpu", "cpuacct", "cpuset", "devices", "freezer",
	"blkio", "systemd", "net_cls", "net_prio", "perf_event", "hugetlb",
	"rdma", "misc", "unified", NULL
};

int
runtime_rmtree(const char *path)
{
	struct stat	 st;
	DIR		*d;
	struct dirent	*de;
	char		 sub[PATH_MAX];
	int		 rc = 0;

	if (lstat(path, &st) == -1)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlink(path);
	/* Read-only staging dirs (0555): root may still write them. */
	if ((d = opendir(path)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (bufprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >=
		    (int)sizeof(sub)) {
			rc = -1;
			continue;
		}
		if (runtime_rmtree(sub) == -1)
			rc = -1;
	}
	closedir(d);
	if (rmdir(path) == -1)
		rc = -1;
	return rc;
}

int
runtime_scratch_mount(const char *dir, uint32_t mb, gid_t gid)
{
	char	 path[PATH_MAX], opts[128];

	if (bufprintf(path, sizeof(path), "%s/%s", dir, LAUNCHD_SCRATCH) >=
	    (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (mkdir(path, 0700) == -1)
		return -1;
	/*
	 * Mode 0755 as the sandbox's own tmpfs had: the staging dir above is
	 * root's (0700), and gated, another user, must walk this one.
	 */
	bufprintf(opts, sizeof(opts), "size=%um,nr_inodes=%llu,mode=0755,uid=%d,"
	    "gid=%lu", mb, SPEC_SCRATCH_INODES(mb), SPEC_UID,
	    (unsigned long)gid);
	if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    opts) == -1) {
		int	 e = errno;

		(void)rmdir(path);
		errno = e;
		return -1;
	}
	return 0;
}

int
runtime_unstage(const char *dir)
{
	char	 path[PATH_MAX];

	bufprintf(path, sizeof(path), "%s/%s", dir, LAUNCHD_SCRATCH);
	/* Detached: whoever still holds a descriptor keeps it alive, and
	 * nothing is left in the mount table.  Stacked mounts: all. */
	for (int i = 0; i < 8; i++)
		if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == -1) {
			if (errno != EINVAL && errno != ENOENT)
				log_warn("umount %s", path);
			break;
		}
	return runtime_rmtree(dir);
}

/* Start-up: every mount a dead instance left under run_dir/x-*. */
static void
runtime_reap_mounts(const char *run_dir)
{
	char	 line[4096], pre[PATH_MAX], mp[PATH_MAX];
	FILE	*f;
	size_t	 plen;
	int	 again = 1;

	plen = (size_t)bufprintf(pre, sizeof(pre), "%s/x-", run_dir);
	/* Detaching one may reveal another below it: rescan until clean. */
	for (int pass = 0; again && pass < 8; pass++) {
		again = 0;
		if ((f = fopen("/proc/self/mountinfo", "re")) == NULL)
			return;
		while (fgets(line, sizeof(line), f) != NULL) {
			/* id parent major:minor root mountpoint ... */
			if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
				continue;
			if (strncmp(mp, pre, plen) != 0 || strchr(mp, '\\'))
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

static pid_t
runtime_spawn_prio(char *const argv[], int fd1, int fd2, int nice)
{
	sigset_t	 all;
	pid_t		 pid;
	int		 null;

	if ((pid = fork()) == -1)
		return -1;
	if (pid != 0)
		return pid;
	if (nice != 0)
		(void)setpriority(PRIO_PROCESS, 0, nice);
	/* The child: plain signal state, no inherited ignores. */
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	if ((null = open("/dev/null", O_RDWR)) == -1)
		_exit(127);
	if (dup2(null, 0) == -1 ||
	    dup2(fd1 != -1 ? fd1 : null, 1) == -1 ||
	    dup2(fd2 != -1 ? fd2 : null, 2) == -1)
		_exit(127);
	if (null > 2)
		close(null);
	execv(argv[0], argv);
	_exit(127);
}

pid_t
runtime_spawn(char *const argv[], int fd1, int fd2)
{
	return runtime_spawn_prio(argv, fd1, fd2, 0);
}

/*
 * Work no launch waits for -- a pool entry's create and start, the delete
 * after a result was sent -- runs at a lower priority, so that on a busy
 * machine the CPUs go to the programs being run first.  A pool entry's
 * init inherits it; pool.c gives it the normal priority back once the
 * entry is ready, before any program can be started in it.
 */
pid_t
runtime_spawn_bg(char *const argv[], int fd1, int fd2)
{
	return runtime_spawn_prio(argv, fd1, fd2, LAUNCHD_BG_NICE);
}

/* Wait for pid at most `seconds`; kill it after.  Status or -1. */
static int
runtime_wait(pid_t pid, int seconds)
{
	struct timespec	 ts;
	uint64_t	 until = mono_ns() + (uint64_t)seconds * 1000000000ULL;
	long		 nap = 100000;	/* 0.1 ms, doubling to 10 ms */
	pid_t		 r;
	int		 st;

	for (;;) {
		if ((r = waitpid(pid, &st, WNOHANG)) == pid)
			return st;
		if (r == -1 && errno != EINTR)
			return -1;
		if (mono_ns() >= until) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &st, 0);
			return -1;
		}
		ts.tv_sec = 0;
		ts.tv_nsec = nap;
		nanosleep(&ts, NULL);
		if (nap < 10000000)
			nap *= 2;
	}
}

int
runtime_cmd(char *const argv[], int seconds, char *out, size_t outlen)
{
	int	 p[2] = { -1, -1 }, st;
	size_t	 len = 0;
	ssize_t	 r;
	pid_t	 pid;
	char	*path = NULL;
	char	*av[RUNTIME_ARGV_MAX];

	/* A bare name is looked up in the usual system directories. */
	if (strchr(argv[0], '/') == NULL) {
		static const char *const dirs[] = { "/usr/sbin", "/usr/bin",
		    "/sbin", "/bin", "/usr/local/bin", NULL };
		for (size_t i = 0; dirs[i] != NULL; i++) {
			xasprintf(&path, "%s/%s", dirs[i], argv[0]);
			if (access(path, X_OK) == 0)
				break;
			free(path);
			path = NULL;
		}
		if (path == NULL)
			return -1;
	}
	for (len = 0; argv[len] != NULL && len < RUNTIME_ARGV_MAX - 1; len++)
		av[len] = argv[len];
	av[len] = NULL;
	if (path != NULL)
		av[0] = path;
	len = 0;
	if (out != NULL && pipe2(p, O_CLOEXEC) == -1) {
		free(path);
		return -1;
	}
	pid = runtime_spawn(av, p[1], -1);
	free(path);
	if (p[1] != -1)
		close(p[1]);
	if (pid == -1) {
		if (p[0] != -1)
			close(p[0]);
		return -1;
	}
	if (out != NULL) {
		struct pollfd pfd = { p[0], POLLIN, 0 };

		while (poll(&pfd, 1, seconds * 1000) > 0) {
			char	 junk[4096];

			if (len + 1 < outlen)
				r = read(p[0], out + len, outlen - 1 - len);
			else
				r = read(p[0], junk, sizeof(junk));
			if (r <= 0)
				break;
			if (len + 1 < outlen)
				len += (size_t)r;
		}
		out[len] = '\0';
		close(p[0]);
	}
	st = runtime_wait(pid, seconds);
	return st;
}

void
runtime_argv(const struct launchd_runtime *rt, const char *root,
    char *av[RUNTIME_ARGV_MAX], const char *const words[])
{
	size_t	 n = 0;

	av[n++] = rt->path;
	for (size_t i = 0; i < rt->nargs && n < RUNTIME_ARGV_MAX - 12; i++)
		av[n++] = rt->args[i];
	av[n++] = (char *)"--root";
	av[n++] = (char *)root;
	for (size_t i = 0; words[i] != NULL && n < RUNTIME_ARGV_MAX - 1; i++)
		av[n++] = (char *)words[i];
	av[n] = NULL;
}

void
runtime_state_dir(const struct launchd *ld, int tier, char out[PATH_MAX])
{
	bufprintf(out, PATH_MAX, "%s/%s", ld->runtime_root,
	    parse_tier_name(tier));
}

uint64_t
runtime_cg_read(const char *parent, const char *id, const char *ctrl,
    const char *file, const char *key)
{
	char		 path[PATH_MAX], line[256];
	FILE		*f;
	uint64_t	 v = 0;
	size_t		 klen = key != NULL ? strlen(key) : 0;

	bufprintf(path, sizeof(path), "%s/%s/%s/%s/%s", RUNTIME_CGROUP_ROOT, ctrl,
	    parent, id, file);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (key == NULL) {
			v = strtoull(line, NULL, 10);
			break;
		}
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
			v = strtoull(line + klen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

/*
 * egressd, another user, reads the cgroup.procs of a sandbox's cgroup to
 * tell its processes (proxy_peer.c): the runtime made the directories
 * under our umask (077), so open them to reading, in the hierarchies
 * egressd may read (v1 pids, the hybrid unified mount, or v2 alone).
 * What they show -- random container names, host pids -- every user
 * sees in /proc anyway.
 */
void
runtime_cg_share(const char *parent, const char *id)
{
	static const char *const h[] = { "pids", "unified", "", NULL };
	char	 path[PATH_MAX];

	for (size_t i = 0; h[i] != NULL; i++) {
		if (*h[i] == '\0' && access(RUNTIME_CGROUP_ROOT "/cgroup.controllers",
		    F_OK) == -1)
			continue;
		bufprintf(path, sizeof(path), "%s%s%s/%s", RUNTIME_CGROUP_ROOT,
		    *h[i] ? "/" : "", h[i], parent);
		if (chmod(path, 0755) == -1 && errno != ENOENT)
			log_warn("chmod %s", path);
		bufprintf(path, sizeof(path), "%s%s%s/%s/%s", RUNTIME_CGROUP_ROOT,
		    *h[i] ? "/" : "", h[i], parent, id);
		if (chmod(path, 0755) == -1 && errno != ENOENT)
			log_warn("chmod %s", path);
	}
}

void
runtime_cg_remove(const char *parent, const char *id)
{
	char	 path[PATH_MAX];

	for (size_t i = 0; runtime_controllers[i] != NULL; i++) {
		bufprintf(path, sizeof(path), "%s/%s/%s/%s", RUNTIME_CGROUP_ROOT,
		    runtime_controllers[i], parent, id);
		if (rmdir(path) == -1 && errno != ENOENT)
			log_warn("cgroup %s", path);
	}
}

int
runtime_write_file(const char *path, const uint8_t *p, size_t len)
{
	ssize_t	 w;
	int	 fd;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0444)) == -1)
		return -1;
	while (len > 0) {
		if ((w = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			close(fd);
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	/* The umask is 077; the sandbox user reads the code. */
	if (fchmod(fd, 0444) == -1) {
		close(fd);
		return -1;
	}
	return close(fd);
}

void
runtime_check(struct launchd *ld)
{
	for (int t = 1; t < LAUNCHD_NTIERS; t++) {
		struct launchd_runtime	*rt = &ld->conf->runtimes[t];
		char			*av[RUNTIME_ARGV_MAX];
		size_t			 n = 0;
		int			 st;

		if (rt->path == NULL)
			continue;
		rt->available = 0;
		if (access(rt->path, X_OK) == -1) {
			log_warn("tier %s unavailable: runtime %s",
			    parse_tier_name(t), rt->path);
			continue;
		}
		/* Without it runsc ignores the spec's seccomp profile
		 * without a word: the tier would not enforce the policy. */
		if (rt->flavor == SPEC_RUNSC) {
			size_t	 i;

			for (i = 0; i < rt->nargs; i++)
				if (strcmp(rt->args[i], "--oci-seccomp") == 0 ||
				    strcmp(rt->args[i],
				    "--oci-seccomp=true") == 0)
					break;
			if (i == rt->nargs) {
				log_warnx("tier %s unavailable: %s runs without "
				    "--oci-seccomp, which would ignore the "
				    "seccomp profile", parse_tier_name(t),
				    rt->path);
				continue;
			}
		}
		av[n++] = rt->path;
		/* runsc checks its flags too: pass them. */
		if (rt->flavor == SPEC_RUNSC)
			for (size_t i = 0; i < rt->nargs &&
			    n < RUNTIME_ARGV_MAX - 2; i++)
				av[n++] = rt->args[i];
		av[n++] = (char *)"--version";
		av[n] = NULL;
		if ((st = runtime_cmd(av, LAUNCHD_CHECK_SECONDS, NULL, 0)) != 0) {
			log_warnx("tier %s unavailable: %s --version failed "
			    "(status %d)", parse_tier_name(t), rt->path, st);
			continue;
		}
		rt->available = 1;
		log_info("tier %s: %s", parse_tier_name(t), rt->path);
	}
}

static void
runtime_reap_cgroups(const char *parent)
{
	char		 dir[PATH_MAX], sub[PATH_MAX];
	DIR		*d;
	struct dirent	*de;

	for (size_t i = 0; runtime_controllers[i] != NULL; i++) {
		bufprintf(dir, sizeof(dir), "%s/%s/%s", RUNTIME_CGROUP_ROOT,
		    runtime_controllers[i], parent);
		if ((d = opendir(dir)) == NULL)
			continue;
		while ((de = readdir(d)) != NULL) {
			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			bufprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
			/* Busy (a live process) is left, and logged. */
			if (rmdir(sub) == -1)
				log_warn("leftover cgroup %s", sub);
			else
				log_info("removed leftover cgroup %s", sub);
		}
		closedir(d);
	}
}

void
runtime_reap_leftovers(struct launchd *ld)
{
	char		 root[PATH_MAX], list[65536], path[PATH_MAX];
	char		*av[RUNTIME_ARGV_MAX], *line, *save;
	DIR		*d;
	struct dirent	*de;

	for (int t = 1; t < LAUNCHD_NTIERS; t++) {
		const struct launchd_runtime	*rt = &ld->conf->runtimes[t];
		const char			*w[] = { "list", "--quiet", NULL };

		if (rt->path == NULL || access(rt->path, X_OK) == -1)
			continue;
		runtime_state_dir(ld, t, root);
		runtime_argv(rt, root, av, w);
		if (runtime_cmd(av, LAUNCHD_CMD_SECONDS, list, sizeof(list)) != 0)
			continue;
		for (line = strtok_r(list, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save)) {
			const char *wd[] = { "delete", "--force", line, NULL };

			if (!name_ok(line))
				continue;
			runtime_argv(rt, root, av, wd);
			if (runtime_cmd(av, LAUNCHD_CMD_SECONDS, NULL, 0) == 0)
				log_info("removed leftover container %s", line);
			else
				log_warnx("cannot remove leftover container "
				    "%s", line);
		}
	}
	runtime_reap_mounts(ld->conf->run_dir);
	if ((d = opendir(ld->conf->run_dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strncmp(de->d_name, "x-", 2) != 0)
				continue;
			bufprintf(path, sizeof(path), "%s/%s",
			    ld->conf->run_dir, de->d_name);
			if (runtime_unstage(path) == -1)
				log_warn("cannot remove leftover %s", path);
			else
				log_info("removed leftover staging %s", path);
		}
		closedir(d);
	}
	runtime_reap_cgroups(ld->conf->cgroup_parent);
	/* Whatever the dead instance left of an unpack. */
	bufprintf(path, sizeof(path), "%s/cache", ld->conf->common.state_dir);
	if ((d = opendir(path)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			size_t n = strlen(de->d_name);

			if (n > 4 && strcmp(de->d_name + n - 4, ".tmp") == 0) {
				bufprintf(root, sizeof(root), "%s/%s", path,
				    de->d_name);
				(void)runtime_rmtree(root);
			}
		}
		closedir(d);
	}
}
