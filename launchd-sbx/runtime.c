/*
 * runtime.c: what the launcher itself runs and reads on the host, now
 * that everything root does (mounts, the OCI runtime's commands, specs,
 * cgroup sharing and removal, reaping a dead instance's containers) is
 * the monitor's (monitor.h, mon_client.c): run a tool with a plain signal
 * state and a time limit (the image store's umoci and tar, a runtime's
 * --version), write a staged file, read a container's cgroup statistics,
 * check the configured runtimes at start, and remove a tree of the
 * launcher's own.  It knows no protocol, policy or execution: the layers
 * above (run.c, pool.c, image.c) call down into it with paths and
 * argument vectors, and it calls none of them back.
 */
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
#include "launchd-sbx/microvm.h"

#define RUNTIME_CGROUP_ROOT	"/sys/fs/cgroup"
#define RUNTIME_KVM_DEV		"/dev/kvm"

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

/* fork and exec argv with stdin /dev/null, stdout fd1 and stderr fd2
 * (-1: /dev/null).  The pid or -1. */
static pid_t
runtime_spawn(char *const argv[], int fd1, int fd2)
{
	sigset_t	 all;
	pid_t		 pid;
	int		 null;

	if ((pid = fork()) == -1)
		return -1;
	if (pid != 0)
		return pid;
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

/*
 * microvm: its kernel, initramfs and forwarder are there, and its
 * accelerator runs guests or was allowed (microvm_accel_check): else the
 * tier is unavailable and a policy that asks for it is refused.
 */
static int
runtime_check_vm(const struct launchd_runtime *rt)
{
	const struct {
		const char	*key, *path;
	} need[] = {
		{ "kernel", rt->kernel },
		{ "initrd", rt->initrd },
		{ "forwarder", rt->fwd },
	};
	struct stat	 st;
	char		 err[256];

	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		if (need[i].path == NULL) {
			log_warnx("tier microvm unavailable: "
			    "runtimes.microvm.%s is not set", need[i].key);
			return -1;
		}
		if (access(need[i].path, R_OK) == -1) {
			log_warn("tier microvm unavailable: %s %s",
			    need[i].key, need[i].path);
			return -1;
		}
	}
	/* QEMU runs as the sandbox's user: it opens the device through its
	 * group (sbx-vmrt), never as root. */
	if (rt->accel == MICROVM_ACCEL_KVM && (stat(RUNTIME_KVM_DEV, &st) ==
	    -1 || st.st_gid == 0 || (st.st_mode & 060) != 060)) {
		log_warnx("tier microvm unavailable: accel kvm: %s is not "
		    "read-write for a group other than root's, so the "
		    "sandbox's QEMU cannot open it", RUNTIME_KVM_DEV);
		return -1;
	}
	if (microvm_accel_check(rt->accel, RUNTIME_KVM_DEV, err,
	    sizeof(err)) == -1) {
		log_warnx("tier microvm unavailable: %s", err);
		return -1;
	}
	return 0;
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
		if (t == SBX__V1__ISOLATION__ISOLATION_MICROVM) {
			if (runtime_check_vm(rt) == -1)
				continue;
			/* Launched by sbx-vmrt, which the monitor runs. */
			rt->available = 1;
			log_info("tier microvm: %s, accel %s", rt->path,
			    microvm_accel_name(rt->accel));
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

