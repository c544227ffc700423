/*
 * microvm.c: the microvm tier's host side.  A VM per execution on
 * Debian's QEMU (-M microvm) and a Debian kernel: the image's root file
 * system, the inputs and the code reach the guest as read-only virtio
 * block devices, its one NIC is QEMU user networking with restrict=on and
 * a single guestfwd from the proxy address to the execution's egress
 * socket (invariant 3: the only route out), and the outputs come back as
 * an archive on a fourth device that microvm_extract.c extracts by
 * descriptor, never mounting a file system the guest wrote (invariant 9: nothing
 * leaves except through gated, which gets the extracted files like every
 * other tier's).  A tier whose accelerator is unusable is refused, never
 * downgraded to emulation the configuration did not allow (invariant 7).
 */
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <linux/kvm.h>
#include <net/if.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "name.h"
#include "util.h"
#include "launchd-sbx/microvm.h"

/* Fixed so that the same tree gives the same image, byte for byte. */
#define MICROVM_FS_UUID		"5b1c2a1e-0000-4000-8000-000000000516"
#define MICROVM_FS_TIME		"1767225600"	/* 2026-01-01 */

int
microvm_accel_parse(const char *s)
{
	if (s == NULL)
		return -1;
	if (strcmp(s, "kvm") == 0)
		return MICROVM_ACCEL_KVM;
	if (strcmp(s, "tcg") == 0)
		return MICROVM_ACCEL_TCG;
	return -1;
}

const char *
microvm_accel_name(int accel)
{
	switch (accel) {
	case MICROVM_ACCEL_KVM:
		return "kvm";
	case MICROVM_ACCEL_TCG:
		return "tcg";
	default:
		return "none";
	}
}

int
microvm_accel_check(int accel, const char *kvm_dev, char *err,
    size_t errlen)
{
	int	 fd, vm, v;

	switch (accel) {
	case MICROVM_ACCEL_TCG:
		/* The configuration said so explicitly: emulation is slow,
		 * not weaker (the same devices, the same network). */
		return 0;
	case MICROVM_ACCEL_KVM:
		break;
	default:
		bufprintf(err, errlen, "no accelerator configured: set "
		    "runtimes.microvm.accel to kvm, or to tcg to allow "
		    "emulation");
		return -1;
	}
	if ((fd = open(kvm_dev, O_RDWR | O_CLOEXEC)) == -1) {
		bufprintf(err, errlen, "accel kvm: %s: %s", kvm_dev,
		    strerror(errno));
		return -1;
	}
	if ((v = ioctl(fd, KVM_GET_API_VERSION, 0)) != KVM_API_VERSION) {
		bufprintf(err, errlen, "accel kvm: %s: API version %d, want "
		    "%d", kvm_dev, v, KVM_API_VERSION);
		close(fd);
		return -1;
	}
	/*
	 * A VM can be created on a host without nested VMX where the guest
	 * then hangs: that is not detectable without running one, so the
	 * configuration's "kvm" is the operator's word that it runs guests
	 * (and the wall clock still kills a guest that hangs).
	 */
	if ((vm = ioctl(fd, KVM_CREATE_VM, 0)) == -1) {
		bufprintf(err, errlen, "accel kvm: %s: cannot create a VM: %s",
		    kvm_dev, strerror(errno));
		close(fd);
		return -1;
	}
	close(vm);
	close(fd);
	return 0;
}

/*
 * A path QEMU takes inside a -drive/-netdev option string: ',' would
 * start another option and ' ' would split the forwarder's command, so
 * only a plain absolute path of [A-Za-z0-9/._-] passes, with no "..".
 */
static int
microvm_path_ok(const char *p)
{
	if (p == NULL || p[0] != '/' || strstr(p, "..") != NULL ||
	    strlen(p) >= PATH_MAX)
		return 0;
	for (; *p != '\0'; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '/' || *p == '.' ||
		    *p == '_' || *p == '-'))
			return 0;
	return 1;
}

struct microvm_av {
	char	**av;
	size_t	  n;
	char	 *buf;
	size_t	  len, off;
	int	  bad;
};

static void __attribute__((format(printf, 2, 3)))
microvm_add(struct microvm_av *a, const char *fmt, ...)
{
	va_list	 ap;
	int	 w;

	if (a->bad)
		return;
	if (a->n + 1 >= MICROVM_ARGV_MAX || a->off >= a->len) {
		a->bad = 1;
		return;
	}
	va_start(ap, fmt);
	w = vsnprintf(a->buf + a->off, a->len - a->off, fmt, ap);
	va_end(ap);
	if (w < 0 || (size_t)w >= a->len - a->off) {
		a->bad = 1;
		return;
	}
	a->av[a->n++] = a->buf + a->off;
	a->av[a->n] = NULL;
	a->off += (size_t)w + 1;
}

static void
microvm_drive(struct microvm_av *a, const char *id, const char *img,
    int ro)
{
	microvm_add(a, "-drive");
	microvm_add(a, "file=%s,if=none,id=%s,format=raw,readonly=%s,"
	    "cache=none,aio=threads", img, id, ro ? "on" : "off");
	microvm_add(a, "-device");
	microvm_add(a, "virtio-blk-device,drive=%s", id);
}

int
microvm_argv(const struct microvm_params *p, char **av, char *buf,
    size_t buflen, char *err, size_t errlen)
{
	struct microvm_av	 a = { av, 0, buf, buflen, 0, 0 };
	const struct {
		const char	*what, *path;
		int		 need;
	} paths[] = {
		{ "qemu", p->qemu, 1 },
		{ "kernel", p->kernel, 1 },
		{ "initrd", p->initrd, 1 },
		{ "root image", p->root_img, 1 },
		{ "input image", p->in_img, 1 },
		{ "code image", p->code_img, 1 },
		{ "output image", p->out_img, 1 },
		{ "console log", p->console_log, 1 },
		{ "forwarder", p->fwd, p->egress_sock != NULL },
		{ "egress socket", p->egress_sock, p->egress_sock != NULL },
	};
	uint32_t		 cpus;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (paths[i].need && !microvm_path_ok(paths[i].path)) {
			bufprintf(err, errlen, "%s \"%s\": want an absolute "
			    "path of [A-Za-z0-9/._-] without \"..\" (QEMU's "
			    "option syntax would split it)", paths[i].what,
			    paths[i].path != NULL ? paths[i].path : "");
			return -1;
		}
	if (p->accel != MICROVM_ACCEL_KVM && p->accel != MICROVM_ACCEL_TCG) {
		bufprintf(err, errlen, "no accelerator");
		return -1;
	}
	if (p->code_name == NULL || !name_ok(p->code_name)) {
		bufprintf(err, errlen, "code name \"%s\" is not a plain name",
		    p->code_name != NULL ? p->code_name : "");
		return -1;
	}
	if (p->memory_mb < 64 || p->scratch_mb >= p->memory_mb) {
		bufprintf(err, errlen, "memory_mb %u: want 64 at least and "
		    "more than scratch_mb %u (the guest's tmpfs is in its "
		    "memory)", p->memory_mb, p->scratch_mb);
		return -1;
	}
	cpus = (p->cpus_milli + 999) / 1000;
	if (cpus == 0)
		cpus = 1;
	if (cpus > 64)
		cpus = 64;

	microvm_add(&a, "%s", p->qemu);
	/* Nothing QEMU would add by itself: no default devices, no user
	 * config file, no monitor, no display, no option ROMs. */
	microvm_add(&a, "-nodefaults");
	microvm_add(&a, "-no-user-config");
	microvm_add(&a, "-nographic");
	microvm_add(&a, "-no-reboot");
	microvm_add(&a, "-M");
	microvm_add(&a, "microvm,x-option-roms=off,isa-serial=on,rtc=on,"
	    "pit=on,pic=on");
	microvm_add(&a, "-accel");
	microvm_add(&a, "%s", microvm_accel_name(p->accel));
	microvm_add(&a, "-cpu");
	microvm_add(&a, "%s", p->accel == MICROVM_ACCEL_KVM ? "host" : "max");
	microvm_add(&a, "-smp");
	microvm_add(&a, "%u", cpus);
	microvm_add(&a, "-m");
	microvm_add(&a, "%u", p->memory_mb);
	/*
	 * seccomp on QEMU itself.  With a NIC, spawn stays allowed for the
	 * guestfwd forwarder alone (the guest cannot name what it runs),
	 * and so does elevateprivileges: the forwarder inherits the filter,
	 * and socat dies under it.  QEMU runs unprivileged with
	 * no_new_privs either way, so it has nothing to elevate to.
	 */
	microvm_add(&a, "-sandbox");
	microvm_add(&a, "on,obsolete=deny,resourcecontrol=deny,%s",
	    p->egress_sock != NULL ? "spawn=allow" :
	    "elevateprivileges=deny,spawn=deny");
	microvm_add(&a, "-kernel");
	microvm_add(&a, "%s", p->kernel);
	microvm_add(&a, "-initrd");
	microvm_add(&a, "%s", p->initrd);
	/* The timer options keep a TCG guest from stalling in TSC
	 * calibration (microvm has no HPET or PM timer to calibrate with). */
	microvm_add(&a, "-append");
	microvm_add(&a, "console=ttyS0 quiet panic=-1 reboot=t "
	    "tsc_early_khz=2000000 lpj=8000000 no_timer_check "
	    "sbx.vm=1 sbx.pids=%u sbx.scratch_mb=%u sbx.net=%d sbx.code=%s",
	    p->pids, p->scratch_mb, p->egress_sock != NULL, p->code_name);
	/* The console is a log the host reads afterwards, nothing more. */
	microvm_add(&a, "-serial");
	microvm_add(&a, "file:%s", p->console_log);
	microvm_drive(&a, "root", p->root_img, 1);
	microvm_drive(&a, "in", p->in_img, 1);
	microvm_drive(&a, "code", p->code_img, 1);
	microvm_drive(&a, "out", p->out_img, 0);
	if (p->egress_sock != NULL) {
		/*
		 * restrict=on: the guest reaches nothing through slirp but
		 * the guestfwd below; no DNS answer, no host port, no other
		 * address.  guestfwd's cmd: form runs one forwarder a
		 * connection (the chardev form serves one stream at a time).
		 */
		microvm_add(&a, "-netdev");
		microvm_add(&a, "user,id=net0,restrict=on,ipv6=off,net=%s,"
		    "host=%s,dns=%s,guestfwd=tcp:%s:%d-cmd:%s "
		    "STDIO UNIX-CONNECT:%s", MICROVM_NET, MICROVM_HOST, MICROVM_DNS,
		    MICROVM_PROXY, MICROVM_PROXY_PORT, p->fwd,
		    p->egress_sock);
		microvm_add(&a, "-device");
		microvm_add(&a, "virtio-net-device,netdev=net0");
	}
	if (a.bad) {
		bufprintf(err, errlen, "QEMU's command line does not fit");
		return -1;
	}
	return 0;
}

int
microvm_mkfs_argv(const char *mkfs, const char *dir, const char *img,
    char **av, char *buf, size_t buflen)
{
	struct microvm_av	 a = { av, 0, buf, buflen, 0, 0 };

	if (mkfs == NULL || dir == NULL || img == NULL)
		return -1;
	microvm_add(&a, "%s", mkfs);
	microvm_add(&a, "--quiet");
	/* Every inode's time and owner fixed, the UUID too: the same tree
	 * gives the same bytes, and the guest sees no lost+found (unlike an
	 * ext4 image), as the other tiers' /in and /code have none. */
	microvm_add(&a, "-T");
	microvm_add(&a, "%s", MICROVM_FS_TIME);
	microvm_add(&a, "--all-root");
	microvm_add(&a, "-U");
	microvm_add(&a, "%s", MICROVM_FS_UUID);
	microvm_add(&a, "%s", img);
	microvm_add(&a, "%s", dir);
	return a.bad ? -1 : 0;
}

/*
 * An empty network namespace for the calling process, its loopback up in QEMU's own empty network namespace: slirp pairs each
 * guestfwd connection with its forwarder over a 127.0.0.1 socket pair.
 * The namespace holds nothing else to reach.  0, or -1 with errno.
 */
int
microvm_netns(void)
{
	struct ifreq	 ifr;
	int		 s, rc = -1;

	if (unshare(CLONE_NEWNET) == -1)
		return -1;
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		rc = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
	return rc;
}

int
microvm_files(struct microvm_files *f, const char *dir,
    struct microvm_params *p)
{
	static const char *const names[] = { "in.img", "code.img",
	    "out.img", "console.log" };
	char *const	 paths[] = { f->in_img, f->code_img, f->out_img,
	    f->console_log };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (bufprintf(paths[i], PATH_MAX, "%s/%s", dir, names[i]) >=
		    PATH_MAX)
			return -1;
	if (p != NULL) {
		p->in_img = f->in_img;
		p->code_img = f->code_img;
		p->out_img = f->out_img;
		p->console_log = f->console_log;
	}
	return 0;
}

void
microvm_files_unlink(const struct microvm_files *f)
{
	(void)unlink(f->in_img);
	(void)unlink(f->code_img);
	(void)unlink(f->out_img);
	(void)unlink(f->console_log);
}

int
microvm_run_quiet(char *const av[])
{
	pid_t	 pid;
	int	 st;

	if ((pid = fork()) == -1)
		return -1;
	if (pid == 0) {
		int	 null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execv(av[0], av);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) == -1 || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		return -1;
	return 0;
}

int
microvm_mkfs(const char *dir, const char *img)
{
	char	*av[MICROVM_ARGV_MAX], buf[4096];

	if (microvm_mkfs_argv("/usr/bin/mkfs.erofs", dir, img, av, buf,
	    sizeof(buf)) == -1)
		return -1;
	return microvm_run_quiet(av);
}

int
microvm_file(const char *path, off_t size, uid_t uid, gid_t gid)
{
	int	 fd, saved;

	/* O_EXCL: a file or a link planted at path is refused. */
	if ((fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) ==
	    -1)
		return -1;
	if ((size > 0 && ftruncate(fd, size) == -1) ||
	    fchown(fd, uid, gid) == -1) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return close(fd);
}

int
microvm_fsize_cap(void)
{
	struct rlimit	 rl;

	rl.rlim_cur = rl.rlim_max = (rlim_t)MICROVM_OUT_MB << 20;
	if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR)
		return -1;
	return setrlimit(RLIMIT_FSIZE, &rl);
}
