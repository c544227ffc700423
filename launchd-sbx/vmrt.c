/*
 * vmrt.c: sbx-vmrt, the microvm tier's runtime as sbx-monitor runs it.
 * It answers the runtime verbs the monitor's CMD request knows (create,
 * start, kill, delete: monitor.h), so the VM goes through the same
 * staging, wall clock, hand-over and audit as the container tiers, with
 * no new monitor request.  launchd-sbx names it as the tier's runtime and
 * passes QEMU, the kernel, the initramfs, the forwarder and the
 * accelerator as its global options (mon_client.c).
 *
 * create reads the bundle's config.json (spec.c rendered it): the staged
 * /in and /code become read-only erofs images (microvm_mkfs_argv), the
 * root image is rootfs-HEX.img next to the kernel (HEX: the image digest
 * of the bundle's root), and a supervisor is left as the "init" (its pid
 * in the pid file): it makes an empty network namespace, puts itself in
 * the spec's cgroups, drops to the spec's user and group with
 * no_new_privs, waits for start, runs QEMU (microvm_argv; killed with
 * the supervisor), then extracts the guest's output archive into the
 * execution's scratch (microvm_extract: plain regular files only), copies
 * the guest's stdout and stderr to its own and exits with the guest's
 * status.  kill and delete kill the supervisor's process group; the wall
 * clock is run.c's, through them.
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "version.h"
#include "launchd-sbx/microvm.h"

#define VMRT_QEMU_MB	256	/* QEMU's own memory over the guest's */
#define VMRT_QEMU_PIDS	"64"	/* QEMU's and the forwarders' tasks */
#define VMRT_CG		"/sys/fs/cgroup"

struct vmrt {
	const char	*qemu, *kernel, *initrd, *fwd, *root, *state;
	int		 accel;
};

static pid_t	 vmrt_child;	/* create's supervisor, until it is set up */

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	va_list	 ap;

	fprintf(stderr, "sbx-vmrt: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	if (vmrt_child > 0)
		(void)kill(vmrt_child, SIGKILL);
	exit(1);
}

static void
fmt(char *buf, size_t len, const char *f, ...)
{
	va_list	 ap;
	int	 n;

	va_start(ap, f);
	n = vsnprintf(buf, len, f, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len)
		die("path too long");
}

/* The id: the monitor's rule (monitor.h), checked again here. */
static const char *
vmrt_id(const char *id)
{
	size_t	 n = strlen(id);

	if (n == 0 || n > 64 || id[0] == '.' || strspn(id,
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	    "0123456789_.-") != n)
		die("bad id");
	return id;
}

/* The mount of config.json's at dest: its source, or NULL. */
static const char *
mount_src(json_t *cfg, const char *dest)
{
	json_t	*m;
	size_t	 i;

	json_array_foreach(json_object_get(cfg, "mounts"), i, m) {
		const char	*d = json_string_value(json_object_get(m,
		    "destination"));

		if (d != NULL && strcmp(d, dest) == 0)
			return json_string_value(json_object_get(m, "source"));
	}
	return NULL;
}

/*
 * The code the guest sees: the staged /code, and with an egress CA the
 * CA too, as /code/.sbx-ca.pem (sbx-vminit hands it to sbx-init there):
 * a copy, so the staged tree stays as launchd-sbx sealed it.
 */
static const char *
code_tree(const char *code, const char *ca, const char *dir, char *buf,
    size_t len)
{
	char	 src[PATH_MAX], dst[PATH_MAX];

	if (ca == NULL)
		return code;
	fmt(buf, len, "%s/code.d", dir);
	fmt(src, sizeof(src), "%s/.", code);
	fmt(dst, sizeof(dst), "%s/.sbx-ca.pem", buf);
	{
		char *const	 cp[] = { "/bin/cp", "-a", src, buf, NULL };
		char *const	 cpca[] = { "/bin/cp", (char *)ca, dst, NULL };

		if (mkdir(buf, 0755) == -1 || microvm_run_quiet(cp) == -1 ||
		    microvm_run_quiet(cpca) == -1 || chmod(dst, 0444) == -1)
			die("code with the egress CA in %s failed", buf);
	}
	return buf;
}

static void
run_mkfs(const char *dir, const char *img)
{
	if (microvm_mkfs(dir, img) == -1)
		die("mkfs.erofs %s failed", dir);
	if (chmod(img, 0444) == -1)
		die("chmod %s: %s", img, strerror(errno));
}

/* A file of the VM's, made by root and given to uid:gid. */
static void
vm_file(const char *path, off_t size, uid_t uid, gid_t gid)
{
	if (microvm_file(path, size, uid, gid) == -1)
		die("%s: %s", path, strerror(errno));
}

static void
cg_write(const char *dir, const char *file, const char *val)
{
	char	 path[PATH_MAX];
	int	 fd;

	fmt(path, sizeof(path), "%s/%s", dir, file);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1 ||
	    write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		die("cgroup %s: %s", path, strerror(errno));
	close(fd);
}

/*
 * The spec's cgroups, as runc makes them (cgroup v1, or v2's one
 * hierarchy): the guest's memory and QEMU's own, a task cap for QEMU and
 * its forwarders, the CPU share; the supervisor (and so QEMU) in them
 * before create exits, so the monitor shares them with their readers.
 */
static void
cg_join(json_t *cfg, uint32_t memory_mb, uint32_t cpus_milli, pid_t pid)
{
	const char	*cgp = json_string_value(json_object_get(
	    json_object_get(cfg, "linux"), "cgroupsPath"));
	static const char *const ctrls[] = { "memory", "pids", "cpu",
	    "cpuacct", "" };
	char		 dir[PATH_MAX], val[64], self[32];
	int		 v2 = access(VMRT_CG "/cgroup.controllers", F_OK) == 0;

	if (cgp == NULL || cgp[0] != '/' || strstr(cgp, "..") != NULL)
		die("config.json: linux.cgroupsPath");
	fmt(self, sizeof(self), "%ld", (long)pid);
	for (size_t i = 0; i < sizeof(ctrls) / sizeof(ctrls[0]); i++) {
		if ((ctrls[i][0] == '\0') != v2)
			continue;
		fmt(dir, sizeof(dir), "%s%s%s%s", VMRT_CG, v2 ? "" : "/",
		    ctrls[i], cgp);
		if (!v2) {
			char	 top[PATH_MAX];

			fmt(top, sizeof(top), "%s/%s", VMRT_CG, ctrls[i]);
			if (access(top, F_OK) == -1)
				continue;
		}
		/* runc makes the parent too: cgroup_parent/ID. */
		for (char *c = dir + strlen(VMRT_CG) + 1; ; c++) {
			char	 save;

			if (*c != '/' && *c != '\0')
				continue;
			save = *c;
			*c = '\0';
			if (mkdir(dir, 0755) == -1 && errno != EEXIST)
				die("cgroup %s: %s", dir, strerror(errno));
			if ((*c = save) == '\0')
				break;
		}
		if (v2 || strcmp(ctrls[i], "memory") == 0) {
			fmt(val, sizeof(val), "%llu", ((unsigned long long)
			    memory_mb + VMRT_QEMU_MB) << 20);
			cg_write(dir, v2 ? "memory.max" :
			    "memory.limit_in_bytes", val);
		}
		if (v2 || strcmp(ctrls[i], "pids") == 0)
			cg_write(dir, "pids.max", VMRT_QEMU_PIDS);
		if (!v2 && strcmp(ctrls[i], "cpu") == 0) {
			fmt(val, sizeof(val), "%u", cpus_milli * 100);
			cg_write(dir, "cpu.cfs_quota_us", val);
		}
		cg_write(dir, "cgroup.procs", self);
	}
}

/* name in dirfd copied to fd, then removed: the guest's stdout/stderr. */
static void
hand_out(int dirfd, const char *name, int fd)
{
	char	 buf[16384];
	ssize_t	 n;
	int	 in;

	if ((in = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) ==
	    -1)
		return;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n)
			break;
	close(in);
	(void)unlinkat(dirfd, name, 0);
}

/* The guest's own exit status (sbx-vminit's .sbx-exit), else 125. */
static int
guest_status(int dirfd)
{
	char	 buf[16];
	ssize_t	 n;
	int	 fd, st = 125;

	if ((fd = openat(dirfd, ".sbx-exit", O_RDONLY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		return st;
	if ((n = read(fd, buf, sizeof(buf) - 1)) > 0) {
		buf[n] = '\0';
		st = atoi(buf);
		if (st < 0 || st > 255)
			st = 125;
	}
	close(fd);
	(void)unlinkat(dirfd, ".sbx-exit", 0);
	return st;
}

/*
 * The supervisor, after create's fork: never returns.  Root until its
 * namespace and cgroups are made, then the spec's user for good.
 */
static void __attribute__((noreturn))
supervise(const struct microvm_params *p, json_t *cfg, const char *bundle,
    const char *fifo, const char *out_img, const char *scratch, int ready)
{
	struct microvm_caps	 caps = { MICROVM_OUT_FILES,
	    MICROVM_OUT_FILE_MAX, MICROVM_OUT_TOTAL_MAX };
	json_t			*user = json_object_get(json_object_get(cfg,
	    "process"), "user");
	uid_t			 uid = (uid_t)json_integer_value(
	    json_object_get(user, "uid"));
	gid_t			 gid = (gid_t)json_integer_value(
	    json_object_get(user, "gid"));
	char			*av[MICROVM_ARGV_MAX], buf[16384], err[512];
	size_t			 nfiles;
	pid_t			 pid;
	int			 st, fd, dfd, go, qerr;
	gid_t			 groups[2];
	pid_t			 self;
	size_t			 ngroups = 1;
	struct stat		 kst;
	char			 c;

	if (uid == 0 || gid == 0)
		die("config.json: process.user is root");
	if (microvm_argv(p, av, buf, sizeof(buf), err, sizeof(err)) == -1)
		die("%s", err);
	if ((dfd = open(scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		die("scratch %s: %s", scratch, strerror(errno));
	/* Everything of the spec's is in av and the descriptors now. */
	json_decref(cfg);
	cfg = NULL;
	/*
	 * Both ends of the FIFO: start's open finds a reader however soon
	 * it comes, and the read waits for its byte.  The output device
	 * read back after QEMU; the bundle as the cwd.  All as root.
	 */
	if ((go = open(fifo, O_RDWR | O_CLOEXEC)) == -1 ||
	    (fd = open(out_img, O_RDONLY | O_CLOEXEC)) == -1 ||
	    (qerr = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC,
	    0600)) == -1 ||
	    chdir(bundle) == -1)
		die("%s: %s", bundle, strerror(errno));
	/* No network of the host's: slirp's one forward is a Unix socket,
	 * its connections paired over this namespace's loopback. */
	if (microvm_netns() == -1)
		die("network namespace: %s", strerror(errno));
	/* KVM: /dev/kvm's group as well (as libvirt's qemu user has it),
	 * never root's; that device and nothing else is what it opens. */
	groups[0] = gid;
	if (p->accel == MICROVM_ACCEL_KVM && stat("/dev/kvm", &kst) == 0 &&
	    kst.st_gid != 0 && kst.st_gid != gid)
		groups[ngroups++] = kst.st_gid;
	if (setgroups(ngroups, groups) == -1 ||
	    setresgid(gid, gid, gid) == -1 ||
	    setresuid(uid, uid, uid) == -1 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		die("drop to %u:%u: %s", uid, gid, strerror(errno));
	/* The console log and anything else QEMU writes stay this size. */
	if (microvm_fsize_cap() == -1)
		die("RLIMIT_FSIZE: %s", strerror(errno));
	/* Set up: create may exit. */
	if (write(ready, "r", 1) != 1)
		die("ready: %s", strerror(errno));
	close(ready);
	if (read(go, &c, 1) != 1)
		die("start: %s", strerror(errno));
	close(go);
	self = getpid();
	if ((pid = fork()) == -1)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		int	 null = open("/dev/null", O_RDWR);

		/* Dies with the supervisor, even one killed before this. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 ||
		    getppid() != self || null == -1 || dup2(null, 0) == -1 ||
		    dup2(null, 1) == -1 || dup2(qerr, 2) == -1)
			_exit(126);
		execv(av[0], av);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		ssize_t	 n = pread(qerr, buf, 512, 0);

		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		die("qemu: status %d: %s", WIFEXITED(st) ? WEXITSTATUS(st) :
		    128 + WTERMSIG(st), buf);
	}
	if (microvm_extract(fd, dfd, &caps, &nfiles, err, sizeof(err)) == -1)
		die("output archive refused: %s", err);
	close(fd);
	hand_out(dfd, ".sbx-stdout", 1);
	hand_out(dfd, ".sbx-stderr", 2);
	exit(guest_status(dfd));
}

/*
 * The image digest of the rootfs the monitor bound at root: the mount's
 * source directory, cache/HEX/rootfs (/proc/self/mountinfo's 4th field).
 */
static void
root_hex(const char *root, char *hex, size_t len)
{
	char	*line = NULL, *f[5], *p, *slash;
	size_t	 cap = 0;
	FILE	*mi;
	int	 found = 0;

	if ((mi = fopen("/proc/self/mountinfo", "r")) == NULL)
		die("mountinfo: %s", strerror(errno));
	while (!found && getline(&line, &cap, mi) != -1) {
		p = line;
		for (int i = 0; i < 5; i++)
			f[i] = strsep(&p, " ");
		if (f[4] == NULL || strcmp(f[4], root) != 0)
			continue;
		if ((slash = strrchr(f[3], '/')) == NULL ||
		    strcmp(slash, "/rootfs") != 0)
			continue;
		*slash = '\0';
		slash = strrchr(f[3], '/');
		slash = slash != NULL ? slash + 1 : f[3];
		if (strlen(slash) == 64 && strspn(slash, "0123456789abcdef") ==
		    64) {
			fmt(hex, len, "%s", slash);
			found = 1;
		}
	}
	free(line);
	fclose(mi);
	if (!found)
		die("root %s: not an image's rootfs bound by the monitor", root);
}

static void	state_write(const struct vmrt *, const char *, pid_t,
	    const char *);

static void
vmrt_create(const struct vmrt *v, const char *bundle, const char *pidfile,
    const char *id)
{
	struct microvm_params	 p = { 0 };
	json_error_t		 jerr;
	json_t			*cfg, *args, *res;
	char			 path[PATH_MAX], dir[PATH_MAX], fifo[PATH_MAX];
	struct microvm_files	 vf, qf;
	char			 root_img[PATH_MAX], hex[80], pidbuf[32];
	char			 codebuf[PATH_MAX], c;
	char			 qdir[PATH_MAX], qsock[PATH_MAX];
	int			 ready[2];
	const char		*rootfs, *in, *code, *scratch, *prog;
	json_t			*user;
	long long		 quota, period;
	uid_t			 uid;
	gid_t			 gid;
	pid_t			 pid;
	struct statvfs		 sv;
	int			 fd;

	fmt(path, sizeof(path), "%s/config.json", bundle);
	if ((cfg = json_load_file(path, 0, &jerr)) == NULL)
		die("%s: %s", path, jerr.text);
	user = json_object_get(json_object_get(cfg, "process"), "user");
	uid = (uid_t)json_integer_value(json_object_get(user, "uid"));
	gid = (gid_t)json_integer_value(json_object_get(user, "gid"));
	args = json_object_get(json_object_get(cfg, "process"), "args");
	rootfs = json_string_value(json_object_get(json_object_get(cfg,
	    "root"), "path"));
	in = mount_src(cfg, "/in");
	code = mount_src(cfg, "/code");
	scratch = mount_src(cfg, "/scratch");
	/* sbx-init -- INTERP /code/NAME */
	prog = json_string_value(json_array_get(args,
	    json_array_size(args) - 1));
	if (rootfs == NULL || in == NULL || code == NULL || scratch == NULL ||
	    prog == NULL || strncmp(prog, "/code/", 6) != 0 ||
	    strchr(prog + 6, '/') != NULL || uid == 0 || gid == 0)
		die("%s: not a microvm tier spec (root, /in, /code, /scratch, "
		    "a /code/NAME program, a user)", path);
	/* The root image by the image's digest: the monitor bound
	 * cache/HEX/rootfs on the bundle's root. */
	root_hex(rootfs, hex, sizeof(hex));
	fmt(root_img, sizeof(root_img), "%s/rootfs-%s.img", v->root, hex);
	if (access(root_img, R_OK) == -1)
		die("root image %s: %s (deploy/microvm/rootfs makes it)",
		    root_img, strerror(errno));

	fmt(dir, sizeof(dir), "%s/vm-%s", bundle, id);
	if (mkdir(dir, 0711) == -1 || chmod(dir, 0711) == -1)
		die("%s: %s", dir, strerror(errno));
	if (microvm_files(&vf, dir, NULL) == -1)
		die("path too long");
	fmt(fifo, sizeof(fifo), "%s/start", dir);
	run_mkfs(in, vf.in_img);
	run_mkfs(code_tree(code, mount_src(cfg, "/run/sbx/ca.pem"), dir,
	    codebuf, sizeof(codebuf)), vf.code_img);
	vm_file(vf.out_img, (off_t)MICROVM_OUT_MB << 20, uid, gid);
	vm_file(vf.console_log, 0, uid, gid);
	if (mkfifo(fifo, 0600) == -1 || chown(fifo, uid, gid) == -1)
		die("%s: %s", fifo, strerror(errno));

	res = json_object_get(json_object_get(cfg, "linux"), "resources");
	p.qemu = v->qemu;
	p.accel = v->accel;
	p.kernel = v->kernel;
	p.initrd = v->initrd;
	p.memory_mb = (uint32_t)(json_integer_value(json_object_get(
	    json_object_get(res, "memory"), "limit")) >> 20);
	p.pids = (uint32_t)json_integer_value(json_object_get(
	    json_object_get(res, "pids"), "limit"));
	quota = json_integer_value(json_object_get(json_object_get(res, "cpu"),
	    "quota"));
	period = json_integer_value(json_object_get(json_object_get(res,
	    "cpu"), "period"));
	p.cpus_milli = period > 0 && quota > 0 ?
	    (uint32_t)(quota * 1000 / period) : 1000;
	/* The guest's scratch: the size of the host tmpfs made for it. */
	if (statvfs(scratch, &sv) == -1)
		die("scratch %s: %s", scratch, strerror(errno));
	p.scratch_mb = (uint32_t)(((uint64_t)sv.f_blocks * sv.f_frsize) >> 20);
	if (p.memory_mb < 64 || p.pids == 0)
		die("config.json: memory %u MB, pids %u", p.memory_mb, p.pids);
	/*
	 * QEMU runs as the sandbox's user in the bundle (the supervisor's
	 * cwd), under run_dir which that user cannot cross: its files are
	 * named through /proc/self/cwd, which its forwarder inherits too.
	 */
	p.root_img = root_img;
	fmt(qdir, sizeof(qdir), "/proc/self/cwd/vm-%s", id);
	if (microvm_files(&qf, qdir, &p) == -1)
		die("path too long");
	p.code_name = prog + 6;
	p.egress_sock = mount_src(cfg, "/run/sbx/egress.sock");
	if (p.egress_sock != NULL && strncmp(p.egress_sock, bundle,
	    strlen(bundle)) == 0 && p.egress_sock[strlen(bundle)] == '/') {
		fmt(qsock, sizeof(qsock), "/proc/self/cwd%s",
		    p.egress_sock + strlen(bundle));
		p.egress_sock = qsock;
	}
	p.fwd = p.egress_sock != NULL ? v->fwd : NULL;

	if (pipe2(ready, O_CLOEXEC) == -1 || (pid = fork()) == -1)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		close(ready[0]);
		if (setsid() == -1)
			_exit(126);
		supervise(&p, cfg, bundle, fifo, vf.out_img, scratch,
		    ready[1]);
	}
	close(ready[1]);
	vmrt_child = pid;
	cg_join(cfg, p.memory_mb, p.cpus_milli, pid);
	/* Set up, or dead with its reason on the run's stderr. */
	if (read(ready[0], &c, 1) != 1)
		die("the VM's supervisor failed before start");
	close(ready[0]);
	fmt(pidbuf, sizeof(pidbuf), "%ld\n", (long)pid);
	if ((fd = open(pidfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0600)) == -1 || write(fd, pidbuf, strlen(pidbuf)) !=
	    (ssize_t)strlen(pidbuf) || close(fd) == -1)
		die("%s: %s", pidfile, strerror(errno));
	json_decref(cfg);
	state_write(v, id, pid, bundle);
	vmrt_child = 0;
}

/* STATE/ID: the supervisor's pid and the bundle, for the other verbs. */
static void
state_write(const struct vmrt *v, const char *id, pid_t pid,
    const char *bundle)
{
	char	 path[PATH_MAX];
	FILE	*f;

	if (mkdir(v->state, 0700) == -1 && errno != EEXIST)
		die("%s: %s", v->state, strerror(errno));
	fmt(path, sizeof(path), "%s/%s", v->state, id);
	if ((f = fopen(path, "wx")) == NULL ||
	    fprintf(f, "%ld\n%s\n", (long)pid, bundle) < 0 || fclose(f) != 0)
		die("%s: %s", path, strerror(errno));
}

/* The supervisor's pid and the bundle of id: 0, or -1 when none. */
static int
state_read(const struct vmrt *v, const char *id, pid_t *pid, char *bundle,
    size_t len)
{
	char	 path[PATH_MAX], line[32];
	FILE	*f;
	size_t	 n;

	fmt(path, sizeof(path), "%s/%s", v->state, id);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	if (fgets(line, sizeof(line), f) == NULL ||
	    fgets(bundle, (int)len, f) == NULL) {
		fclose(f);
		return -1;
	}
	fclose(f);
	*pid = (pid_t)atol(line);
	n = strlen(bundle);
	if (n > 0 && bundle[n - 1] == '\n')
		bundle[n - 1] = '\0';
	return *pid > 1 ? 0 : -1;
}

static void
vmrt_start(const struct vmrt *v, const char *id)
{
	char	 bundle[PATH_MAX], fifo[PATH_MAX];
	pid_t	 pid;
	int	 fd;

	if (state_read(v, id, &pid, bundle, sizeof(bundle)) == -1)
		die("start %s: not created", id);
	fmt(fifo, sizeof(fifo), "%s/vm-%s/start", bundle, id);
	/* The supervisor is waiting on it (else: gone, and this fails). */
	if ((fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) == -1 ||
	    write(fd, "g", 1) != 1)
		die("start %s: %s", id, strerror(errno));
	close(fd);
}

/* 1 when pid is in a cgroup whose last component is id. */
static int
in_cgroup(pid_t pid, const char *id)
{
	char	 path[64], buf[4096], want[80];
	ssize_t	 n;
	int	 fd;

	fmt(path, sizeof(path), "/proc/%ld/cgroup", (long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	fmt(want, sizeof(want), "/%s\n", id);
	return strstr(buf, want) != NULL;
}

/* The supervisor's process group: it, and QEMU and its forwarders. */
static void
vmrt_kill(const struct vmrt *v, const char *id, int quiet)
{
	char	 bundle[PATH_MAX];
	pid_t	 pid;

	if (state_read(v, id, &pid, bundle, sizeof(bundle)) == -1) {
		if (quiet)
			return;
		die("kill %s: not created", id);
	}
	/* Only while pid is still the supervisor: in the id's cgroup (a
	 * reaped supervisor's pid may be anyone's by now). */
	if (!in_cgroup(pid, id))
		return;
	(void)kill(-pid, SIGKILL);
	(void)kill(pid, SIGKILL);
}

static void
vmrt_delete(const struct vmrt *v, const char *id)
{
	struct microvm_files	 vf;
	char			 bundle[PATH_MAX], dir[PATH_MAX];
	char			 path[PATH_MAX];
	pid_t			 pid;

	if (state_read(v, id, &pid, bundle, sizeof(bundle)) == -1)
		return;
	vmrt_kill(v, id, 1);
	fmt(dir, sizeof(dir), "%s/vm-%s", bundle, id);
	{
		char	 tree[PATH_MAX];
		char *const	 rm[] = { "/bin/rm", "-rf", tree, NULL };

		fmt(tree, sizeof(tree), "%s/code.d", dir);
		(void)microvm_run_quiet(rm);
	}
	if (microvm_files(&vf, dir, NULL) == 0)
		microvm_files_unlink(&vf);
	fmt(path, sizeof(path), "%s/start", dir);
	(void)unlink(path);
	(void)rmdir(dir);
	fmt(path, sizeof(path), "%s/%s", v->state, id);
	(void)unlink(path);
}

static void __attribute__((noreturn))
usage_to(FILE *f, int status)
{
	fprintf(f, "usage: sbx-vmrt --qemu=PATH --kernel=PATH "
	    "--initrd=PATH --accel=kvm|tcg [--forwarder=PATH] --root DIR\n"
	    "\tcreate --bundle DIR --pid-file FILE ID | start ID |\n"
	    "\tkill --all ID KILL | delete --force ID\n"
	    "       sbx-vmrt --help | --version\n");
	exit(status);
}

static void __attribute__((noreturn))
usage(void)
{
	usage_to(stderr, 2);
}

int
main(int argc, char *argv[])
{
	struct vmrt	 v = { .accel = -1 };
	char		 root[PATH_MAX], *slash;
	int		 i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char	*a = argv[i];

		if (strcmp(a, "--version") == 0) {
			printf("sbx-vmrt %s\n", SBX_VERSION);
			return 0;
		} else if (strcmp(a, "--help") == 0)
			usage_to(stdout, 0);
		else if (strncmp(a, "--qemu=", 7) == 0)
			v.qemu = a + 7;
		else if (strncmp(a, "--kernel=", 9) == 0)
			v.kernel = a + 9;
		else if (strncmp(a, "--initrd=", 9) == 0)
			v.initrd = a + 9;
		else if (strncmp(a, "--forwarder=", 12) == 0)
			v.fwd = a + 12;
		else if (strncmp(a, "--accel=", 8) == 0)
			v.accel = microvm_accel_parse(a + 8);
		else if (strcmp(a, "--root") == 0 && i + 1 < argc)
			v.state = argv[++i];
		else
			usage();
	}
	umask(022);
	if (v.qemu == NULL || v.kernel == NULL || v.initrd == NULL ||
	    v.accel <= 0 || v.state == NULL || i >= argc)
		usage();
	/* The root images lie next to the kernel. */
	fmt(root, sizeof(root), "%s", v.kernel);
	if ((slash = strrchr(root, '/')) == NULL)
		usage();
	*slash = '\0';
	v.root = root;
	argc -= i;
	argv += i;
	if (strcmp(argv[0], "create") == 0 && argc == 6 &&
	    strcmp(argv[1], "--bundle") == 0 &&
	    strcmp(argv[3], "--pid-file") == 0)
		vmrt_create(&v, argv[2], argv[4], vmrt_id(argv[5]));
	else if (strcmp(argv[0], "start") == 0 && argc == 2)
		vmrt_start(&v, vmrt_id(argv[1]));
	else if (strcmp(argv[0], "kill") == 0 && argc == 4 &&
	    strcmp(argv[1], "--all") == 0)
		vmrt_kill(&v, vmrt_id(argv[2]), 0);
	else if (strcmp(argv[0], "delete") == 0 && argc == 3 &&
	    strcmp(argv[1], "--force") == 0)
		vmrt_delete(&v, vmrt_id(argv[2]));
	else
		usage();
	return 0;
}
