/*
 * guest.c: sbx-vminit, PID 1 of a microvm tier guest (the initramfs's
 * /init).  It loads the few virtio modules the Debian cloud kernel builds
 * as modules (finit_module, from the initramfs), mounts the image's root
 * file system, the inputs and the code (erofs) from their read-only block
 * devices (vda, vdb, vdc), a tmpfs of the policy's size at /scratch (noexec,
 * nosuid, nodev), limits pids with a cgroup of its own, gives the one NIC
 * an address on QEMU's restricted user network with no default route,
 * and runs sbx-init in the new root as uid 65534 with no_new_privs,
 * bridging 127.0.0.1:3128 to the proxy's guestfwd address.  When the
 * code exits it writes the top-level regular files of /scratch, the
 * captured stdout and stderr and the exit status to the output device
 * (vdd) as a plain ustar archive, and powers off.
 *
 * It trusts nothing it did not get from the kernel command line QEMU was
 * given (launchd-sbx wrote it) and the devices: the host never mounts what
 * this writes; it reads the archive with libarchive under caps
 * (launchd-sbx/microvm.c).  The wall clock is enforced from outside, by
 * killing QEMU.
 */
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <seccomp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VM_ROOT		"/newroot"
#define VM_INIT		"/sbx-init"		/* in the initramfs */
#define VM_MODDIR	"/lib/modules"
#define VM_RUN_MB	16			/* /run: sbx-init, stdout */
#define VM_OUT_FILES	60			/* + stdout, stderr, exit */
#define VM_CMDLINE_MAX	4096
#define VM_NOBODY	65534

/* In dependency order; a module built in is simply absent. */
static const char *const vm_modules[] = {
	"virtio_ring", "virtio", "virtio_mmio", "virtio_blk", "failover",
	"net_failover", "virtio_net", "libcrc32c", "erofs", NULL
};

struct vm_args {
	unsigned long	 pids;
	unsigned long	 scratch_mb;
	int		 net;
	char		 code[129];
};

static void __attribute__((format(printf, 1, 2)))
vm_log(const char *fmt, ...)
{
	va_list	 ap;

	fputs("sbx-vminit: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void __attribute__((noreturn))
vm_poweroff(void)
{
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

static void __attribute__((noreturn, format(printf, 1, 2)))
vm_fatal(const char *fmt, ...)
{
	va_list	 ap;

	fputs("sbx-vminit: fatal: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	vm_poweroff();
}

/* A plain file name: the same rule as common/name.c's name_ok. */
static int
vm_name_ok(const char *s)
{
	size_t	 n = strlen(s);

	if (n == 0 || n > 128 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return 0;
	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		    (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' ||
		    *s == '-' || *s == '@' || *s == ':'))
			return 0;
	return 1;
}

static void
vm_parse_cmdline(struct vm_args *a)
{
	char	 buf[VM_CMDLINE_MAX], *tok, *save, *end;
	ssize_t	 n;
	int	 fd;

	memset(a, 0, sizeof(*a));
	if ((fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC)) == -1 ||
	    (n = read(fd, buf, sizeof(buf) - 1)) <= 0)
		vm_fatal("/proc/cmdline: %s", strerror(errno));
	close(fd);
	buf[n] = '\0';
	for (tok = strtok_r(buf, " \n", &save); tok != NULL;
	    tok = strtok_r(NULL, " \n", &save)) {
		if (strncmp(tok, "sbx.pids=", 9) == 0)
			a->pids = strtoul(tok + 9, &end, 10);
		else if (strncmp(tok, "sbx.scratch_mb=", 15) == 0)
			a->scratch_mb = strtoul(tok + 15, &end, 10);
		else if (strcmp(tok, "sbx.net=1") == 0)
			a->net = 1;
		else if (strncmp(tok, "sbx.code=", 9) == 0 &&
		    strlen(tok + 9) < sizeof(a->code))
			memcpy(a->code, tok + 9, strlen(tok + 9) + 1);
	}
	if (a->pids == 0 || a->scratch_mb == 0 || !vm_name_ok(a->code))
		vm_fatal("kernel command line lacks sbx.pids, sbx.scratch_mb "
		    "or a plain sbx.code");
}

static void
vm_modules_load(void)
{
	char	 path[128];
	int	 fd;

	for (size_t i = 0; vm_modules[i] != NULL; i++) {
		snprintf(path, sizeof(path), "%s/%s.ko", VM_MODDIR,
		    vm_modules[i]);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		if (syscall(SYS_finit_module, fd, "", 0) == -1 &&
		    errno != EEXIST)
			vm_fatal("finit_module %s: %s", path, strerror(errno));
		close(fd);
	}
}

static void
vm_mount(const char *src, const char *dst, const char *type,
    unsigned long flags, const char *data)
{
	(void)mkdir(dst, 0755);
	if (mount(src, dst, type, flags, data) == -1)
		vm_fatal("mount %s on %s (%s): %s", src, dst, type,
		    strerror(errno));
}

/* The block devices appear asynchronously after virtio_blk loads. */
static void
vm_wait_dev(const char *dev)
{
	for (int i = 0; i < 500; i++) {
		if (access(dev, F_OK) == 0)
			return;
		usleep(10000);
	}
	vm_fatal("%s never appeared", dev);
}

static void
vm_if(int s, const char *name, const char *addr, const char *mask)
{
	struct ifreq		 ifr;
	struct sockaddr_in	*sin = (struct sockaddr_in *)&ifr.ifr_addr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (addr != NULL) {
		sin->sin_family = AF_INET;
		inet_pton(AF_INET, addr, &sin->sin_addr);
		if (ioctl(s, SIOCSIFADDR, &ifr) == -1)
			vm_fatal("%s: address: %s", name, strerror(errno));
		inet_pton(AF_INET, mask, &sin->sin_addr);
		if (ioctl(s, SIOCSIFNETMASK, &ifr) == -1)
			vm_fatal("%s: netmask: %s", name, strerror(errno));
	}
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == -1)
		vm_fatal("%s: %s", name, strerror(errno));
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) == -1)
		vm_fatal("%s: up: %s", name, strerror(errno));
}

/*
 * Loopback, and eth0 on QEMU's /24 with no default route: the proxy's
 * address is on the link, and nothing else is reachable anyway
 * (restrict=on drops everything but the guestfwd).
 */
static void
vm_net(int net)
{
	int	 s;

	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		vm_fatal("socket: %s", strerror(errno));
	vm_if(s, "lo", NULL, NULL);
	if (net) {
		for (int i = 0; i < 500 && if_nametoindex("eth0") == 0; i++)
			usleep(10000);
		vm_if(s, "eth0", "10.0.2.15", "255.255.255.0");
	}
	close(s);
}

static void
vm_write_file(const char *path, const char *text)
{
	int	 fd;

	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1 ||
	    write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		vm_fatal("%s: %s", path, strerror(errno));
	close(fd);
}

/*
 * The guest's kernel is the code's alone, but what the other tiers'
 * seccomp profile refuses should not be open here either: the switches
 * the guest kernel has, set for good before the code runs.  No user
 * namespaces (unshare, clone with CLONE_NEWUSER: no namespace then, as
 * every other needs a capability), no ptrace of anything, no unprivileged
 * bpf, perf or userfaultfd, no kernel log or pointers, and no module
 * loading after ours.  A switch that is missing stops the boot.
 * keyctl, userfaultfd and io_uring have none: vm_seccomp() below.
 */
static void
vm_harden(void)
{
	static const char *const sw[][2] = {
		{ "/proc/sys/user/max_user_namespaces", "0" },
		{ "/proc/sys/kernel/yama/ptrace_scope", "3" },
		{ "/proc/sys/kernel/unprivileged_bpf_disabled", "1" },
		{ "/proc/sys/kernel/perf_event_paranoid", "3" },
		{ "/proc/sys/vm/unprivileged_userfaultfd", "0" },
		{ "/proc/sys/kernel/dmesg_restrict", "1" },
		{ "/proc/sys/kernel/kptr_restrict", "2" },
		{ "/proc/sys/kernel/modules_disabled", "1" },
	};
	size_t	 i;

	for (i = 0; i < sizeof(sw) / sizeof(sw[0]); i++)
		vm_write_file(sw[i][0], sw[i][1]);
}

/*
 * What has no switch in the guest kernel, refused by a filter (libseccomp)
 * that the code and the bridge inherit: the keyring, userfaultfd and
 * io_uring (a second syscall interface no filter sees into), as the other
 * tiers' profile refuses them.  Only the native architecture: an int $0x80
 * or x32 call is killed rather than reaching a table the rules miss.
 * Returns -1 on any failure (the child then never runs the code).
 */
static int
vm_seccomp(void)
{
	static const int	 deny[] = { SCMP_SYS(keyctl),
	    SCMP_SYS(add_key), SCMP_SYS(request_key), SCMP_SYS(userfaultfd),
	    SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_enter),
	    SCMP_SYS(io_uring_register) };
	scmp_filter_ctx		 ctx;
	size_t			 i;
	int			 rc = -1;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL)
		return -1;
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
	    SCMP_ACT_KILL_PROCESS) != 0)
		goto out;
	for (i = 0; i < sizeof(deny) / sizeof(deny[0]); i++)
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), deny[i],
		    0) != 0)
			goto out;
	rc = seccomp_load(ctx) == 0 ? 0 : -1;
 out:
	seccomp_release(ctx);
	return rc;
}

/* A cgroup of its own with pids.max, which the code's process joins. */
static void
vm_cgroup(unsigned long pids)
{
	char	 v[32];

	vm_mount("cgroup2", "/sys/fs/cgroup", "cgroup2",
	    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	vm_write_file("/sys/fs/cgroup/cgroup.subtree_control", "+pids");
	if (mkdir("/sys/fs/cgroup/sbx", 0755) == -1 && errno != EEXIST)
		vm_fatal("mkdir cgroup: %s", strerror(errno));
	snprintf(v, sizeof(v), "%lu", pids);
	vm_write_file("/sys/fs/cgroup/sbx/pids.max", v);
}

static void
vm_copy(const char *src, const char *dst, mode_t mode)
{
	char	 buf[65536];
	ssize_t	 n;
	int	 in, out;

	if ((in = open(src, O_RDONLY | O_CLOEXEC)) == -1 ||
	    (out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    mode)) == -1)
		vm_fatal("copy %s to %s: %s", src, dst, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			vm_fatal("write %s: %s", dst, strerror(errno));
	close(in);
	close(out);
}

/* ---- the output archive: ustar, written raw ---- */

static int
vm_tar_header(int fd, const char *name, unsigned long long size)
{
	unsigned char	 h[512];
	unsigned int	 sum = 0;

	if (strlen(name) > 99)
		return 0;	/* no pax here: skipped, and gated never sees it */
	memset(h, 0, sizeof(h));
	memcpy(h, name, strlen(name));
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	snprintf((char *)h + 124, 12, "%011llo", size);
	memcpy(h + 136, "00000000000", 12);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	for (size_t i = 0; i < sizeof(h); i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	return write(fd, h, sizeof(h)) == (ssize_t)sizeof(h) ? 1 : -1;
}

/* One regular file of dirfd into the archive, at most its size now. */
static int
vm_tar_file(int out, int dirfd, const char *name, const char *as)
{
	static char	 buf[65536];
	char		 pad[512];
	struct stat	 st;
	unsigned long long left;
	ssize_t		 n;
	int		 fd, r;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
	    O_NONBLOCK);
	if (fd == -1 || fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		if (fd != -1)
			close(fd);
		return 0;
	}
	if ((r = vm_tar_header(out, as, (unsigned long long)st.st_size)) !=
	    1) {
		close(fd);
		return r;
	}
	for (left = (unsigned long long)st.st_size; left > 0;
	    left -= (unsigned long long)n) {
		n = read(fd, buf, left < sizeof(buf) ? left : sizeof(buf));
		if (n <= 0) {
			/* Shrunk under us: pad with zeros to the header's
			 * size so the archive stays well formed. */
			memset(buf, 0, sizeof(buf));
			n = (ssize_t)(left < sizeof(buf) ? left : sizeof(buf));
		}
		if (write(out, buf, (size_t)n) != n) {
			close(fd);
			return -1;
		}
	}
	close(fd);
	memset(pad, 0, sizeof(pad));
	if (st.st_size % 512 != 0 &&
	    write(out, pad, 512 - (size_t)(st.st_size % 512)) !=
	    (ssize_t)(512 - st.st_size % 512))
		return -1;
	return 1;
}

static void
vm_write_outputs(int out, int scratch, int run, int status)
{
	char		 zero[1024], st[32];
	DIR		*d;
	struct dirent	*de;
	int		 n = 0, fd;

	/* The status as a file of its own in /run, then the captures. */
	snprintf(st, sizeof(st), "%d\n", status);
	if ((fd = openat(run, "exit", O_WRONLY | O_CREAT | O_TRUNC |
	    O_CLOEXEC, 0600)) != -1) {
		if (write(fd, st, strlen(st)) != (ssize_t)strlen(st))
			vm_log("exit status: %s", strerror(errno));
		close(fd);
	}
	if (vm_tar_file(out, run, "exit", ".sbx-exit") == -1 ||
	    vm_tar_file(out, run, "stdout", ".sbx-stdout") == -1 ||
	    vm_tar_file(out, run, "stderr", ".sbx-stderr") == -1)
		vm_fatal("output device: %s", strerror(errno));
	if ((d = fdopendir(dup(scratch))) == NULL)
		vm_fatal("/scratch: %s", strerror(errno));
	while ((de = readdir(d)) != NULL && n < VM_OUT_FILES) {
		int	 r;

		if (!vm_name_ok(de->d_name) ||
		    strncmp(de->d_name, ".sbx-", 5) == 0)
			continue;
		if ((r = vm_tar_file(out, scratch, de->d_name,
		    de->d_name)) == -1)
			vm_fatal("output device: %s", strerror(errno));
		n += r;
	}
	closedir(d);
	memset(zero, 0, sizeof(zero));
	if (write(out, zero, sizeof(zero)) != (ssize_t)sizeof(zero) ||
	    fsync(out) == -1)
		vm_fatal("output device: %s", strerror(errno));
}

/* The child: into the cgroup, captures on, credentials dropped, exec. */
static void __attribute__((noreturn))
vm_child(const struct vm_args *a)
{
	char		 prog[160];
	int		 fd;
	char *const	 env[] = { "PATH=/usr/local/bin:/usr/bin:/bin",
	    "HOME=/scratch", "TMPDIR=/scratch", "LANG=C.UTF-8", NULL };

	vm_write_file("/sys/fs/cgroup/sbx/cgroup.procs", "0");
	if ((fd = open("/run/sbx/stdout", O_WRONLY | O_CREAT | O_TRUNC,
	    0600)) == -1 || dup2(fd, 1) == -1)
		_exit(126);
	close(fd);
	if ((fd = open("/run/sbx/stderr", O_WRONLY | O_CREAT | O_TRUNC,
	    0600)) == -1 || dup2(fd, 2) == -1)
		_exit(126);
	close(fd);
	if ((fd = open("/dev/null", O_RDONLY)) == -1 || dup2(fd, 0) == -1)
		_exit(126);
	close(fd);
	/* The captures are root's: sbx-init, running as nobody, inherits
	 * the open descriptors and cannot reopen or read back anything. */
	if (chdir("/scratch") == -1 || setgroups(0, NULL) == -1 ||
	    setgid(VM_NOBODY) == -1 || setuid(VM_NOBODY) == -1 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 || vm_seccomp() == -1)
		_exit(126);
	snprintf(prog, sizeof(prog), "/code/%s", a->code);
	{
		const char	*interp = strlen(a->code) > 3 &&
		    strcmp(a->code + strlen(a->code) - 3, ".py") == 0 ?
		    "/usr/bin/python3" : "/bin/sh";
		const char	*sock = a->net ? "tcp:10.0.2.100:3128" :
		    "/run/sbx/no-egress";
		char *const	 argv[] = { "sbx-init", "-s", (char *)sock,
		    "-c", "/code/.sbx-ca.pem", "--", (char *)interp, prog,
		    NULL };

		execve("/run/sbx/sbx-init", argv, env);
	}
	_exit(127);
}

int
main(void)
{
	struct vm_args	 a;
	char		 opts[64];
	pid_t		 pid;
	int		 st, out, scratch, run;

	if (getpid() != 1) {
		fprintf(stderr, "sbx-vminit: PID 1 of a microvm guest only\n");
		return 2;
	}
	vm_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL);
	vm_mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    NULL);
	vm_mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, NULL);
	vm_parse_cmdline(&a);
	vm_modules_load();
	vm_wait_dev("/dev/vda");
	vm_wait_dev("/dev/vdb");
	vm_wait_dev("/dev/vdc");
	vm_wait_dev("/dev/vdd");
	vm_cgroup(a.pids);
	vm_net(a.net);
	vm_harden();
	if ((out = open("/dev/vdd", O_WRONLY | O_CLOEXEC)) == -1)
		vm_fatal("/dev/vdd: %s", strerror(errno));

	vm_mount("/dev/vda", VM_ROOT, "erofs", MS_RDONLY | MS_NODEV, NULL);
	vm_mount("/dev/vdb", VM_ROOT "/in", "erofs",
	    MS_RDONLY | MS_NODEV | MS_NOSUID | MS_NOEXEC, NULL);
	vm_mount("/dev/vdc", VM_ROOT "/code", "erofs",
	    MS_RDONLY | MS_NODEV | MS_NOSUID | MS_NOEXEC, NULL);
	snprintf(opts, sizeof(opts), "size=%lum,mode=1777", a.scratch_mb);
	vm_mount("tmpfs", VM_ROOT "/scratch", "tmpfs",
	    MS_NODEV | MS_NOSUID | MS_NOEXEC, opts);
	snprintf(opts, sizeof(opts), "size=%dm,mode=0755", VM_RUN_MB);
	vm_mount("tmpfs", VM_ROOT "/run", "tmpfs", MS_NODEV | MS_NOSUID, opts);
	/* Read-only, as in the other tiers: the code writes /scratch
	 * alone, within the policy's scratch_mb (TMPDIR points there). */
	vm_mount("tmpfs", VM_ROOT "/tmp", "tmpfs",
	    MS_RDONLY | MS_NODEV | MS_NOSUID | MS_NOEXEC, "size=4k,mode=0755");
	vm_mount("proc", VM_ROOT "/proc", "proc",
	    MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	vm_mount("/dev", VM_ROOT "/dev", NULL, MS_BIND, NULL);
	vm_mount("/sys", VM_ROOT "/sys", NULL, MS_BIND | MS_REC, NULL);
	if (mkdir(VM_ROOT "/run/sbx", 0755) == -1)
		vm_fatal("/run/sbx: %s", strerror(errno));
	vm_copy(VM_INIT, VM_ROOT "/run/sbx/sbx-init", 0555);

	if (chdir(VM_ROOT) == -1 || chroot(".") == -1 || chdir("/") == -1)
		vm_fatal("chroot: %s", strerror(errno));
	if ((scratch = open("/scratch", O_RDONLY | O_DIRECTORY |
	    O_CLOEXEC)) == -1 || (run = open("/run/sbx", O_RDONLY |
	    O_DIRECTORY | O_CLOEXEC)) == -1)
		vm_fatal("/scratch: %s", strerror(errno));

	if ((pid = fork()) == -1)
		vm_fatal("fork: %s", strerror(errno));
	if (pid == 0)
		vm_child(&a);
	/* Reap everything; the code's own process ends the run. */
	for (;;) {
		pid_t	 r = wait(&st);

		if (r == pid)
			break;
		if (r == -1 && errno != EINTR)
			vm_fatal("wait: %s", strerror(errno));
	}
	/* Nothing of the code's may run on while the archive is written. */
	vm_write_file("/sys/fs/cgroup/sbx/cgroup.kill", "1");
	vm_write_outputs(out, scratch, run, WIFEXITED(st) ? WEXITSTATUS(st) :
	    128 + WTERMSIG(st));
	close(out);
	vm_poweroff();
}
