/*
 * probe.c: a static program the tests run inside sandboxes to try what the
 * sandbox must refuse, and to check what it must still allow.
 *
 *   probe TEST [ARG] [TEST [ARG] ...]
 *   probe -- PROGRAM [ARGS...]	(stand-in for sbx-init: fork, exec, wait)
 *
 * Each test runs in a child of its own, so one that the kernel kills (a
 * seccomp SIGSYS, the OOM killer) cannot hide the others, and prints one
 * line:
 *   PROBE <name> denied <ERRNO or SIGNAL>	the attempt failed, as required
 *   PROBE <name> ALLOWED [detail]		the attempt worked: a hole
 *   PROBE <name> ok <detail>			a thing that must work, works
 *   PROBE <name> FAILED <detail>		it does not, or the test broke
 * The exit status is the number of tests that were not "denied" or "ok"
 * (at most 100), so 0 means the sandbox held everywhere.
 *
 * Invariant: a test says "denied" only when the system call actually
 * failed; anything unclear is FAILED, never a pass.
 */
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include <arpa/inet.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <netinet/in.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mqueue.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define V_DENIED	0
#define V_ALLOWED	1
#define V_OK		2
#define V_FAILED	3

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP	0x02000000
#endif
#define X32_SYSCALL_BIT	0x40000000
#define KEY_SPEC_SESSION_KEYRING	(-3)
#define KEY_SPEC_PROCESS_KEYRING	(-2)
#define KEYCTL_GET_KEYRING_ID		0
#define UFFD_USER_MODE_ONLY		1
#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP			262
#endif
#define INODES_MAX			10000	/* "inodes": ALLOWED at this */

extern char **environ;

static const char *
ename(int e)
{
	const char	*n = strerrorname_np(e);

	return n != NULL ? n : "E?";
}

static int
say(const char *name, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
say(const char *name, int r, const char *fmt, ...)
{
	static const char *const words[] = { "denied", "ALLOWED", "ok",
	    "FAILED" };
	va_list			 ap;

	printf("PROBE %s %s", name, words[r]);
	if (fmt != NULL && fmt[0] != '\0') {
		putchar(' ');
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	putchar('\n');
	fflush(stdout);
	return r;
}

/* The usual verdict of one system call: -1 is a denial, anything else a
 * hole. */
static int
verdict(const char *name, long rc)
{
	if (rc == -1)
		return say(name, V_DENIED, "%s", ename(errno));
	return say(name, V_ALLOWED, "returned %ld", rc);
}

/* For clone-like calls: a child that appears is reaped, and is a hole. */
static int
verdict_clone(const char *name, long rc)
{
	int	st;

	if (rc == 0)
		_exit(0);
	if (rc == -1)
		return say(name, V_DENIED, "%s", ename(errno));
	(void)waitpid((pid_t)rc, &st, 0);
	return say(name, V_ALLOWED, "child %ld", rc);
}

static int
t_unshare(const char *n, const char *a)
{
	(void)a;
	return verdict(n, unshare(CLONE_NEWUSER | CLONE_NEWNS));
}

static int
t_unshare_net(const char *n, const char *a)
{
	(void)a;
	return verdict(n, unshare(CLONE_NEWNET));
}

static int
t_setns(const char *n, const char *a)
{
	int	fd;

	(void)a;
	if ((fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) == -1)
		return say(n, V_FAILED, "open /proc/self/ns/net: %s",
		    ename(errno));
	return verdict(n, syscall(SYS_setns, fd, CLONE_NEWNET));
}

static int
t_clone_flags(const char *n, unsigned long flags)
{
	return verdict_clone(n, syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0,
	    0));
}

static int
t_clone_newns(const char *n, const char *a)
{
	(void)a;
	return t_clone_flags(n, CLONE_NEWNS);
}

static int
t_clone_newuser(const char *n, const char *a)
{
	(void)a;
	return t_clone_flags(n, CLONE_NEWUSER);
}

static int
t_clone3(const char *n, const char *a)
{
	uint64_t	args[11];

	(void)a;
	memset(args, 0, sizeof(args));
	args[0] = CLONE_NEWUSER;	/* flags */
	args[4] = SIGCHLD;		/* exit_signal */
	return verdict_clone(n, syscall(SYS_clone3, args, 88));
}

static int
t_mount(const char *n, const char *a)
{
	(void)a;
	return verdict(n, mount("none", "/scratch", "tmpfs", 0, NULL));
}

static int
t_umount(const char *n, const char *a)
{
	(void)a;
	return verdict(n, umount2("/in", MNT_DETACH));
}

static int
t_fsopen(const char *n, const char *a)
{
	(void)a;
	return verdict(n, syscall(SYS_fsopen, "tmpfs", 0));
}

static int
t_chroot(const char *n, const char *a)
{
	(void)a;
	return verdict(n, chroot("/scratch"));
}

static int
t_keyctl(const char *n, const char *a)
{
	(void)a;
	return verdict(n, syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID,
	    KEY_SPEC_SESSION_KEYRING, 0));
}

static int
t_add_key(const char *n, const char *a)
{
	(void)a;
	return verdict(n, syscall(SYS_add_key, "user", "probe", "x", 1,
	    KEY_SPEC_PROCESS_KEYRING));
}

static int
t_request_key(const char *n, const char *a)
{
	(void)a;
	return verdict(n, syscall(SYS_request_key, "user", "probe", NULL,
	    KEY_SPEC_PROCESS_KEYRING));
}

static int
t_bpf(const char *n, const char *a)
{
	union bpf_attr	attr;

	(void)a;
	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 4;
	attr.max_entries = 1;
	return verdict(n, syscall(SYS_bpf, BPF_MAP_CREATE, &attr,
	    sizeof(attr)));
}

static int
t_perf(const char *n, const char *a)
{
	struct perf_event_attr	attr;

	(void)a;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	return verdict(n, syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
}

static int
t_userfaultfd(const char *n, const char *a)
{
	(void)a;
	return verdict(n, syscall(SYS_userfaultfd, O_CLOEXEC |
	    UFFD_USER_MODE_ONLY));
}

static int
t_io_uring(const char *n, const char *a)
{
	unsigned char	params[120];

	(void)a;
	memset(params, 0, sizeof(params));
	return verdict(n, syscall(SYS_io_uring_setup, 4, params));
}

static int
t_ptrace(const char *n, const char *a)
{
	pid_t	pid;
	long	rc;
	int	st;

	(void)a;
	if ((pid = fork()) == -1)
		return say(n, V_FAILED, "fork: %s", ename(errno));
	if (pid == 0) {
		pause();
		_exit(0);
	}
	rc = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
	if (rc == -1) {
		rc = errno;
		kill(pid, SIGKILL);
		(void)waitpid(pid, &st, 0);
		return say(n, V_DENIED, "%s", ename((int)rc));
	}
	kill(pid, SIGKILL);
	(void)waitpid(pid, &st, 0);
	return say(n, V_ALLOWED, "attached to child %d", (int)pid);
}

static int
t_process_vm_readv(const char *n, const char *a)
{
	static volatile char	 secret[16] = "probe-target";
	char			 buf[16];
	struct iovec		 l = { buf, sizeof(buf) };
	struct iovec		 r = { (void *)secret, sizeof(secret) };

	(void)a;
	return verdict(n, process_vm_readv(getpid(), &l, 1, &r, 1, 0));
}

/*
 * PID 1 is sbx-init, the sandbox's only bridge to the egress socket: the
 * code (the same uid) must not be able to read or rewrite its memory,
 * trace it, or stop or kill it.  Only meaningful under the real sbx-init;
 * as PID 1 ourselves there is nothing to test.
 */
static int
t_pid1_mem(const char *n, const char *a)
{
	int	fd;

	(void)a;
	if (getpid() == 1)
		return say(n, V_FAILED, "the probe is PID 1");
	if ((fd = open("/proc/1/mem", O_RDWR | O_CLOEXEC)) == -1)
		return say(n, V_DENIED, "/proc/1/mem %s", ename(errno));
	close(fd);
	return say(n, V_ALLOWED, "opened /proc/1/mem read-write");
}

static int
t_pid1_ptrace(const char *n, const char *a)
{
	(void)a;
	if (getpid() == 1)
		return say(n, V_FAILED, "the probe is PID 1");
	if (ptrace(PTRACE_ATTACH, 1, NULL, NULL) == -1)
		return say(n, V_DENIED, "%s", ename(errno));
	(void)ptrace(PTRACE_DETACH, 1, NULL, NULL);
	return say(n, V_ALLOWED, "attached to PID 1");
}

/*
 * To address 0, never mapped: EFAULT means the access check passed (a
 * hole, though nothing was written), a refusal says EPERM or ENOSYS.
 */
static int
t_pid1_vm_write(const char *n, const char *a)
{
	char		 byte = 0;
	struct iovec	 l = { &byte, 1 };
	struct iovec	 r = { NULL, 1 };

	(void)a;
	if (getpid() == 1)
		return say(n, V_FAILED, "the probe is PID 1");
	if (process_vm_writev(1, &l, 1, &r, 1, 0) != -1)
		return say(n, V_ALLOWED, "wrote PID 1's memory");
	if (errno == EFAULT)
		return say(n, V_ALLOWED, "EFAULT: the access check passed");
	return say(n, V_DENIED, "%s", ename(errno));
}

/* PID 1's state letter from /proc/1/stat, or 0. */
static char
pid1_state(void)
{
	char	 buf[512], *p;
	ssize_t	 r;
	int	 fd;

	if ((fd = open("/proc/1/stat", O_RDONLY | O_CLOEXEC)) == -1)
		return 0;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return 0;
	buf[r] = '\0';
	if ((p = strrchr(buf, ')')) == NULL || p[1] != ' ')
		return 0;
	return p[2];
}

/* Send sig to PID 1 by one of the routes the kernel offers. */
static int
pid1_send(int how, int sig)
{
	siginfo_t	 si;
	pid_t		 pid;
	int		 fd, r, st;

	switch (how) {
	case 0:
		return kill(1, sig);
	case 1:
		return (int)syscall(SYS_tgkill, 1, 1, sig);
	case 2:
		return (int)syscall(SYS_tkill, 1, sig);
	case 3:
		memset(&si, 0, sizeof(si));
		si.si_signo = sig;
		si.si_code = SI_QUEUE;
		si.si_pid = getpid();
		si.si_uid = getuid();
		return (int)syscall(SYS_rt_sigqueueinfo, 1, sig, &si);
	case 4:
	case 5:
		fd = how == 4 ? (int)syscall(SYS_pidfd_open, 1, 0) :
		    open("/proc/1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd == -1)
			return -1;
		r = (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
		close(fd);
		return r;
	case 6:
		/* kill(-1): everyone but ourselves (and, in Linux, PID 1);
		 * a child sends it, so only the probe is stopped a while. */
		if ((pid = fork()) == -1)
			return -1;
		if (pid == 0) {
			r = kill(-1, sig);
			usleep(50 * 1000);
			st = r == -1 ? 1 : (pid1_state() == 'T' ||
			    pid1_state() == 't') ? 2 : 0;
			(void)kill(-1, SIGCONT);
			_exit(st);
		}
		if (waitpid(pid, &st, 0) == -1 || !WIFEXITED(st))
			return -1;
		return WEXITSTATUS(st) == 1 ? -1 : 0;
	}
	return -1;
}

/*
 * Signals PID 1 has no handler for must not reach it from the code, by
 * any route: Linux drops them for a namespace's init, gVisor does not,
 * and outside a pid namespace nothing would.  A refused send or one
 * without effect is a denial; a stopped PID 1 is a hole (continued
 * again), a killed one ends the sandbox and every verdict after this.
 */
static int
t_pid1_signal(const char *n, const char *a)
{
	static const char *const routes[] = { "kill", "tgkill", "tkill",
	    "rt_sigqueueinfo", "pidfd_open", "/proc/1 pidfd", "kill(-1)" };
	static const int	 sigs[] = { SIGTSTP, SIGSEGV, SIGKILL };
	char			 st = 0, what[512];
	size_t			 i, len = 0;
	int			 refused = 0, holes = 0;

	(void)a;
	if (getpid() == 1)
		return say(n, V_FAILED, "the probe is PID 1");
	what[0] = '\0';
	if (getpgid(0) == getpgid(1)) {
		holes++;
		len += (size_t)snprintf(what, sizeof(what),
		    " in PID 1's process group;");
	}
	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (pid1_send((int)i, SIGSTOP) == -1) {
			printf("# pid1-signal: SIGSTOP by %s: %s\n", routes[i],
			    ename(errno));
			refused++;
			continue;
		}
		usleep(50 * 1000);
		printf("# pid1-signal: SIGSTOP by %s: sent, state %c\n",
		    routes[i], pid1_state());
		if ((st = pid1_state()) == 'T' || st == 't') {
			(void)kill(1, SIGCONT);
			holes++;
			len += (size_t)snprintf(what + len, sizeof(what) - len,
			    " SIGSTOP by %s stopped it;", routes[i]);
			if (len >= sizeof(what))
				len = sizeof(what) - 1;
		}
	}
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		fflush(stdout);
		if (kill(1, sigs[i]) == -1) {
			printf("# pid1-signal: SIG%s: %s\n",
			    sigabbrev_np(sigs[i]), ename(errno));
			refused++;
			continue;
		}
		usleep(50 * 1000);
		printf("# pid1-signal: SIG%s: sent, state %c\n",
		    sigabbrev_np(sigs[i]), pid1_state());
		if ((st = pid1_state()) == 'T' || st == 't') {
			(void)kill(1, SIGCONT);
			holes++;
			len += (size_t)snprintf(what + len, sizeof(what) - len,
			    " SIG%s stopped it;", sigabbrev_np(sigs[i]));
			if (len >= sizeof(what))
				len = sizeof(what) - 1;
		} else if (st == 0 || st == 'Z' || st == 'X')
			return say(n, V_ALLOWED, "%s PID 1 is gone after SIG%s",
			    what, sigabbrev_np(sigs[i]));
	}
	if (holes > 0)
		return say(n, V_ALLOWED, "%s", what);
	return say(n, V_DENIED, "%d of %zu refused, the rest had no effect "
	    "(state %c)", refused, sizeof(routes) / sizeof(routes[0]) +
	    sizeof(sigs) / sizeof(sigs[0]), st ? st : '?');
}

static int
t_init_module(const char *n, const char *a)
{
	static char	img[64];

	(void)a;
	return verdict(n, syscall(SYS_init_module, img, sizeof(img), ""));
}

static int
t_kexec_load(const char *n, const char *a)
{
	(void)a;
	return verdict(n, syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0UL));
}

static int
t_socket(const char *n, int dom, int type, int proto)
{
	return verdict(n, socket(dom, type | SOCK_CLOEXEC, proto));
}

static int
t_socket_raw(const char *n, const char *a)
{
	int	fd, e4, e6;

	(void)a;
	if ((fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP)) !=
	    -1)
		return say(n, V_ALLOWED, "AF_INET raw socket %d", fd);
	e4 = errno;
	if ((fd = socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC,
	    IPPROTO_ICMPV6)) != -1)
		return say(n, V_ALLOWED, "AF_INET6 raw socket %d", fd);
	e6 = errno;
	return say(n, V_DENIED, "%s %s", ename(e4), ename(e6));
}

static int
t_socket_packet(const char *n, const char *a)
{
	(void)a;
	return t_socket(n, AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
}

static int
t_socket_netlink(const char *n, const char *a)
{
	(void)a;
	return t_socket(n, AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
}

/*
 * socket(2) with a protocol the sandbox does not need: the filter must
 * refuse it (EPERM) before the kernel sees it, since a protocol the kernel
 * does not know yet may load its module.  Another errno means the call
 * reached the kernel; so does socketpair, which creates a socket too.
 */
static int
t_socket_proto(const char *n, const char *a)
{
	static const struct {
		const char	*name;
		int		 dom, type, proto, pair;
	} c[] = {
		{ "inet-sctp", AF_INET, SOCK_STREAM, IPPROTO_SCTP, 0 },
		{ "inet-sctp-seq", AF_INET, SOCK_SEQPACKET, IPPROTO_SCTP, 0 },
		{ "inet6-sctp", AF_INET6, SOCK_STREAM, IPPROTO_SCTP, 0 },
		{ "inet-mptcp", AF_INET, SOCK_STREAM, IPPROTO_MPTCP, 0 },
		{ "inet6-mptcp", AF_INET6, SOCK_STREAM, IPPROTO_MPTCP, 0 },
		{ "inet-udplite", AF_INET, SOCK_DGRAM, IPPROTO_UDPLITE, 0 },
		{ "inet-dccp", AF_INET, SOCK_DCCP, IPPROTO_DCCP, 0 },
		{ "inet-stream-udp", AF_INET, SOCK_STREAM, IPPROTO_UDP, 0 },
		{ "pair-inet-sctp", AF_INET, SOCK_STREAM, IPPROTO_SCTP, 1 },
	};
	size_t	 i;
	int	 fd, sv[2];

	(void)a;
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		if (c[i].pair)
			fd = socketpair(c[i].dom, c[i].type | SOCK_CLOEXEC,
			    c[i].proto, sv);
		else
			fd = socket(c[i].dom, c[i].type | SOCK_CLOEXEC,
			    c[i].proto);
		if (fd != -1)
			return say(n, V_ALLOWED, "%s: created", c[i].name);
		if (errno != EPERM)
			return say(n, V_ALLOWED, "%s: reached the kernel (%s)",
			    c[i].name, ename(errno));
	}
	return say(n, V_DENIED, "EPERM for all %zu", sizeof(c) / sizeof(c[0]));
}

/* What ordinary code creates must still work. */
static int
t_socket_ordinary(const char *n, const char *a)
{
	static const struct {
		const char	*name;
		int		 dom, type, proto;
	} c[] = {
		{ "inet-stream", AF_INET, SOCK_STREAM, 0 },
		{ "inet-tcp", AF_INET, SOCK_STREAM, IPPROTO_TCP },
		{ "inet-dgram", AF_INET, SOCK_DGRAM, 0 },
		{ "inet-udp", AF_INET, SOCK_DGRAM, IPPROTO_UDP },
		{ "inet6-stream", AF_INET6, SOCK_STREAM, 0 },
		{ "inet6-tcp", AF_INET6, SOCK_STREAM, IPPROTO_TCP },
		{ "inet6-dgram", AF_INET6, SOCK_DGRAM, 0 },
		{ "inet6-udp", AF_INET6, SOCK_DGRAM, IPPROTO_UDP },
		{ "unix-stream", AF_UNIX, SOCK_STREAM, 0 },
		{ "unix-dgram", AF_UNIX, SOCK_DGRAM, 0 },
		{ "unix-seqpacket", AF_UNIX, SOCK_SEQPACKET, 0 },
	};
	size_t	 i;
	int	 fd, sv[2];

	(void)a;
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		if ((fd = socket(c[i].dom, c[i].type | SOCK_CLOEXEC,
		    c[i].proto)) == -1)
			return say(n, V_FAILED, "%s: %s", c[i].name,
			    ename(errno));
		close(fd);
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1)
		return say(n, V_FAILED, "socketpair: %s", ename(errno));
	close(sv[0]);
	close(sv[1]);
	return say(n, V_OK, "%zu kinds and socketpair",
	    sizeof(c) / sizeof(c[0]));
}

/* connect with a deadline; 0 or an errno. */
static int
connect_to(int fd, const struct sockaddr *sa, socklen_t len, int ms)
{
	struct pollfd	pfd;
	socklen_t	elen = sizeof(int);
	int		e = 0;

	if (connect(fd, sa, len) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return errno;
	pfd.fd = fd;
	pfd.events = POLLOUT;
	if (poll(&pfd, 1, ms) != 1)
		return ETIMEDOUT;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) == -1)
		return errno;
	return e;
}

static int
t_tcp_connect(const char *n, const char *a)
{
	struct sockaddr_in	sin;
	char			host[64];
	const char		*colon;
	int			fd, e;

	if (a == NULL || (colon = strrchr(a, ':')) == NULL ||
	    (size_t)(colon - a) >= sizeof(host))
		return say(n, V_FAILED, "usage: tcp-connect A.B.C.D:PORT");
	memcpy(host, a, (size_t)(colon - a));
	host[colon - a] = '\0';
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
		return say(n, V_FAILED, "bad address %s", host);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) == -1)
		return say(n, V_DENIED, "socket: %s", ename(errno));
	e = connect_to(fd, (struct sockaddr *)&sin, sizeof(sin), 3000);
	close(fd);
	if (e != 0)
		return say(n, V_DENIED, "%s", ename(e));
	return say(n, V_ALLOWED, "connected to %s", a);
}

/* Loopback must work: sbx-init's proxy bridge listens there. */
static int
t_tcp_loopback(const char *n, const char *a)
{
	struct sockaddr_in	sin;
	socklen_t		len = sizeof(sin);
	int			ls, fd, e;

	(void)a;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((ls = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return say(n, V_FAILED, "socket: %s", ename(errno));
	if (bind(ls, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(ls, 1) == -1 ||
	    getsockname(ls, (struct sockaddr *)&sin, &len) == -1)
		return say(n, V_FAILED, "listen on 127.0.0.1: %s",
		    ename(errno));
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0)) == -1)
		return say(n, V_FAILED, "socket: %s", ename(errno));
	if ((e = connect_to(fd, (struct sockaddr *)&sin, sizeof(sin),
	    2000)) != 0)
		return say(n, V_FAILED, "connect 127.0.0.1: %s", ename(e));
	return say(n, V_OK, "127.0.0.1:%d", ntohs(sin.sin_port));
}

static int
t_write(const char *n, const char *a)
{
	int	fd;

	if (a == NULL)
		return say(n, V_FAILED, "usage: write PATH");
	if ((fd = open(a, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) ==
	    -1)
		return say(n, V_DENIED, "%s %s", a, ename(errno));
	if (write(fd, "x", 1) != 1) {
		close(fd);
		return say(n, V_DENIED, "%s write %s", a, ename(errno));
	}
	close(fd);
	return say(n, V_ALLOWED, "wrote %s", a);
}

/* The one writable place must be writable. */
static int
t_writable(const char *n, const char *a)
{
	int	fd;

	if (a == NULL)
		return say(n, V_FAILED, "usage: writable PATH");
	if ((fd = open(a, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) ==
	    -1)
		return say(n, V_FAILED, "%s %s", a, ename(errno));
	if (write(fd, "x", 1) != 1) {
		close(fd);
		return say(n, V_FAILED, "%s write %s", a, ename(errno));
	}
	close(fd);
	(void)unlink(a);
	return say(n, V_OK, "wrote %s", a);
}

static int
t_read(const char *n, const char *a)
{
	char	buf[64];
	ssize_t	r;
	int	fd;

	if (a == NULL)
		return say(n, V_FAILED, "usage: read PATH");
	if ((fd = open(a, O_RDONLY | O_CLOEXEC)) == -1)
		return say(n, V_FAILED, "%s %s", a, ename(errno));
	r = read(fd, buf, sizeof(buf));
	close(fd);
	if (r <= 0)
		return say(n, V_FAILED, "%s is empty", a);
	return say(n, V_OK, "%s", a);
}

/* The egress socket must be reachable as the sandbox user. */
static int
t_unix_connect(const char *n, const char *a)
{
	struct sockaddr_un	sun;
	int			fd;

	if (a == NULL || strlen(a) >= sizeof(sun.sun_path))
		return say(n, V_FAILED, "usage: unix-connect PATH");
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, a, strlen(a));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return say(n, V_FAILED, "socket: %s", ename(errno));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
		return say(n, V_FAILED, "connect %s: %s", a, ename(errno));
	close(fd);
	return say(n, V_OK, "%s", a);
}

/* Reading a masked path yields nothing, or cannot open at all. */
static int
t_masked(const char *n, const char *a)
{
	char	buf[64];
	ssize_t	r;
	int	fd;

	if (a == NULL)
		return say(n, V_FAILED, "usage: masked PATH");
	if ((fd = open(a, O_RDONLY | O_CLOEXEC)) == -1)
		return say(n, V_DENIED, "%s %s", a, ename(errno));
	r = read(fd, buf, sizeof(buf));
	close(fd);
	if (r <= 0)
		return say(n, V_DENIED, "%s reads empty", a);
	return say(n, V_ALLOWED, "%s read %zd bytes", a, r);
}

/* A masked directory lists nothing (or is not there at all). */
static int
t_masked_dir(const char *n, const char *a)
{
	struct dirent	*de;
	DIR		*d;
	int		 k = 0;

	if (a == NULL)
		return say(n, V_FAILED, "usage: masked-dir PATH");
	if ((d = opendir(a)) == NULL)
		return say(n, V_DENIED, "%s %s", a, ename(errno));
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			k++;
	closedir(d);
	if (k == 0)
		return say(n, V_DENIED, "%s lists nothing", a);
	return say(n, V_ALLOWED, "%s lists %d entries", a, k);
}

/*
 * Empty files cost no space but an inode each: create them under PATH
 * (PATH.0, PATH.1, ...) until the file system refuses, then remove them.
 * ENOSPC is a denial and says after how many; INODES_MAX files is a hole.
 */
static int
t_inodes(const char *n, const char *a)
{
	char	 path[PATH_MAX];
	long	 i, k;
	int	 fd, e = 0;

	if (a == NULL)
		return say(n, V_FAILED, "usage: inodes PATH");
	for (i = 0; i < INODES_MAX; i++) {
		snprintf(path, sizeof(path), "%s.%ld", a, i);
		if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		    0600)) == -1) {
			e = errno;
			break;
		}
		close(fd);
	}
	for (k = 0; k < i; k++) {
		snprintf(path, sizeof(path), "%s.%ld", a, k);
		(void)unlink(path);
	}
	if (e == ENOSPC)
		return say(n, V_DENIED, "%s ENOSPC after %ld files", a, i);
	if (e != 0)
		return say(n, V_FAILED, "%s %s after %ld files", a, ename(e),
		    i);
	return say(n, V_ALLOWED, "%s %ld files", a, i);
}

/* A POSIX message queue: kernel memory outside every file system cap. */
static int
t_mqueue(const char *n, const char *a)
{
	struct rlimit	 rl;
	mqd_t		 q;

	(void)a;
	q = mq_open("/probe", O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600,
	    NULL);
	if (q == (mqd_t)-1) {
		int	 e = errno;

		if (getrlimit(RLIMIT_MSGQUEUE, &rl) == 0)
			return say(n, V_DENIED, "%s (RLIMIT_MSGQUEUE %llu)",
			    ename(e), (unsigned long long)rl.rlim_cur);
		return say(n, V_DENIED, "%s", ename(e));
	}
	mq_close(q);
	(void)mq_unlink("/probe");
	return say(n, V_ALLOWED, "created a message queue");
}

/* A 32-bit system call through int $0x80: getpid is i386 number 20. */
static int
t_int80(const char *n, const char *a)
{
#if defined(__x86_64__)
	long	rc;

	(void)a;
	__asm__ volatile ("int $0x80" : "=a"(rc) : "a"(20L) : "memory");
	if (rc < 0)
		return say(n, V_DENIED, "%s", ename((int)-rc));
	return say(n, V_ALLOWED, "i386 getpid returned %ld", rc);
#else
	(void)a;
	return say(n, V_DENIED, "not x86_64");
#endif
}

static int
t_x32(const char *n, const char *a)
{
	(void)a;
	return verdict(n, syscall(X32_SYSCALL_BIT | SYS_getpid));
}

static int
t_env(const char *n, const char *a)
{
	static const char *const bad[] = { "SECRET", "TOKEN", "KEY",
	    "PASSWORD", "AWS_", "API", NULL };
	char		 up[256];
	char		**e;
	size_t		 i, k, hits = 0;

	(void)a;
	for (e = environ; *e != NULL; e++) {
		/* Names only: a leaked value is a secret we must not print. */
		for (i = 0; (*e)[i] != '\0' && (*e)[i] != '=' &&
		    i < sizeof(up) - 1; i++)
			up[i] = (char)toupper((unsigned char)(*e)[i]);
		up[i] = '\0';
		printf("ENV %s\n", up);
		for (k = 0; bad[k] != NULL; k++)
			if (strstr(up, bad[k]) != NULL)
				hits++;
	}
	if (hits > 0)
		return say(n, V_ALLOWED, "%zu secret-like names", hits);
	return say(n, V_OK, "no secret-like names");
}

static int
t_identity(const char *n, const char *a)
{
	char	line[256];
	FILE	*f;
	int	bad = 0;

	(void)a;
	if (getuid() != 65534 || geteuid() != 65534 || getgid() != 65534 ||
	    getegid() != 65534) {
		printf("ID uid %d euid %d gid %d egid %d\n", (int)getuid(),
		    (int)geteuid(), (int)getgid(), (int)getegid());
		bad++;
	}
	if (getgroups(0, NULL) > 0) {
		printf("ID has supplementary groups\n");
		bad++;
	}
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1) {
		printf("ID no_new_privs is off\n");
		bad++;
	}
	if ((f = fopen("/proc/self/status", "r")) == NULL)
		return say(n, V_FAILED, "/proc/self/status: %s", ename(errno));
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strncmp(line, "Cap", 3) == 0 &&
		    strstr(line, "0000000000000000") == NULL) {
			printf("ID %s", line);
			bad++;
		}
		if (strncmp(line, "Seccomp:", 8) == 0)
			printf("ID %s", line);
	}
	fclose(f);
	if (bad)
		return say(n, V_FAILED, "%d identity problems", bad);
	return say(n, V_OK, "65534:65534, no capabilities, no_new_privs");
}

static int
t_hostname(const char *n, const char *a)
{
	struct utsname	u;

	(void)a;
	if (uname(&u) == -1 || strcmp(u.nodename, "sandbox") != 0)
		return say(n, V_FAILED, "hostname %s", u.nodename);
	return say(n, V_OK, "sandbox");
}

static int
t_fork(const char *n, const char *a)
{
	pid_t	pid;
	int	st;

	(void)a;
	if ((pid = fork()) == -1)
		return say(n, V_FAILED, "fork: %s", ename(errno));
	if (pid == 0)
		_exit(7);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 7)
		return say(n, V_FAILED, "child status %d", st);
	return say(n, V_OK, "fork and wait work");
}

static void *
thread_main(void *p)
{
	return p;
}

static int
t_thread(const char *n, const char *a)
{
	pthread_t	 t;
	void		*out = NULL;
	int		 e;

	(void)a;
	if ((e = pthread_create(&t, NULL, thread_main, (void *)n)) != 0)
		return say(n, V_FAILED, "pthread_create: %s", ename(e));
	if (pthread_join(t, &out) != 0 || out != n)
		return say(n, V_FAILED, "pthread_join");
	return say(n, V_OK, "threads work (clone3 falls back to clone)");
}

static int
t_fork_bomb(const char *n, const char *a)
{
	long	 max = a != NULL ? atol(a) : 5000, i;
	pid_t	*kids;
	pid_t	 pid;
	int	 e = 0, st;

	if ((kids = calloc((size_t)max, sizeof(*kids))) == NULL)
		return say(n, V_FAILED, "calloc");
	for (i = 0; i < max; i++) {
		if ((pid = fork()) == -1) {
			e = errno;
			break;
		}
		if (pid == 0) {
			for (;;)
				pause();
		}
		kids[i] = pid;
	}
	for (long j = 0; j < i; j++)
		kill(kids[j], SIGKILL);
	for (long j = 0; j < i; j++)
		(void)waitpid(kids[j], &st, 0);
	free(kids);
	if (e != 0)
		return say(n, V_DENIED, "%s after %ld forks", ename(e), i);
	return say(n, V_ALLOWED, "%ld forks", i);
}

static int
t_fill(const char *n, const char *a)
{
	static char	buf[1 << 20];
	long		mb = 0;
	ssize_t		w;
	int		fd, e;

	if (a == NULL)
		return say(n, V_FAILED, "usage: fill PATH");
	/* Seen as EFBIG rather than death, so a wrong RLIMIT_FSIZE shows. */
	signal(SIGXFSZ, SIG_IGN);
	memset(buf, 'x', sizeof(buf));
	if ((fd = open(a, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) ==
	    -1)
		return say(n, V_FAILED, "open %s: %s", a, ename(errno));
	for (;;) {
		w = write(fd, buf, sizeof(buf));
		if (w == -1) {
			e = errno;
			break;
		}
		if (w < (ssize_t)sizeof(buf)) {
			/* A short write: the next one says why. */
			continue;
		}
		if (++mb > 1 << 20) {
			e = 0;
			break;
		}
	}
	close(fd);
	(void)unlink(a);
	if (e == ENOSPC)
		return say(n, V_DENIED, "ENOSPC after %ld MiB", mb);
	return say(n, V_FAILED, "%s after %ld MiB", e ? ename(e) : "no error",
	    mb);
}

static int
t_balloon(const char *n, const char *a)
{
	long		 mb = a != NULL ? atol(a) : 1024;
	size_t		 len = (size_t)mb << 20, off;
	long		 pg = sysconf(_SC_PAGESIZE);
	char		*p;

	printf("PROBE %s allocating %ld MiB\n", n, mb);
	fflush(stdout);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return say(n, V_DENIED, "mmap %s", ename(errno));
	for (off = 0; off < len; off += (size_t)pg)
		p[off] = 1;
	return say(n, V_ALLOWED, "touched %ld MiB", mb);
}

/*
 * A file in PATH (a noexec mount) mapped executable: Linux refuses the
 * mapping (EPERM), and an mprotect to PROT_EXEC of a readable mapping of
 * it (EACCES), so code written there can run neither by execve nor by a
 * loader of its own.  gVisor releases before late 2023 map it all the
 * same; there the host's noexec mount under a bind still refuses to run
 * it, and the call faults (SIGSEGV, a denial: run_one).  So a mapping
 * that works is called, and only code that returns is ALLOWED.
 */
static int
t_mmap_exec(const char *n, const char *a)
{
	static const unsigned char ret[] = { 0xc3 };	/* a lone "ret" */
	void	*p;
	int	 fd, e;
	long	 pg = sysconf(_SC_PAGESIZE);

	if (a == NULL)
		return say(n, V_FAILED, "usage: %s PATH", n);
	if ((fd = open(a, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0700)) == -1)
		return say(n, V_FAILED, "%s %s", a, ename(errno));
	if (write(fd, ret, sizeof(ret)) != (ssize_t)sizeof(ret) ||
	    ftruncate(fd, pg) == -1) {
		e = errno;
		close(fd);
		return say(n, V_FAILED, "%s write %s", a, ename(e));
	}
	(void)unlink(a);
	if (strcmp(n, "mprotect-exec") == 0) {
		p = mmap(NULL, (size_t)pg, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			e = errno;
			close(fd);
			return say(n, V_FAILED, "%s mmap PROT_READ %s", a,
			    ename(e));
		}
		e = mprotect(p, (size_t)pg, PROT_READ | PROT_EXEC) == -1 ?
		    errno : 0;
	} else {
		p = mmap(NULL, (size_t)pg, PROT_READ | PROT_EXEC, MAP_PRIVATE,
		    fd, 0);
		e = p == MAP_FAILED ? errno : 0;
	}
	close(fd);
	if (e != 0)
		return say(n, V_DENIED, "%s %s", a, ename(e));
	printf("NOTE %s %s mapped executable; calling it\n", n, a);
	fflush(stdout);
	((void (*)(void))p)();
	return say(n, V_ALLOWED, "%s mapped executable and ran", a);
}

/* A device node the sandbox must not have: open fails (ENOENT when /dev
 * does not hold it at all). */
static int
t_dev_open(const char *n, const char *a)
{
	int	fd;

	if (a == NULL)
		return say(n, V_FAILED, "usage: %s PATH", n);
	if ((fd = open(a, O_RDWR | O_CLOEXEC)) == -1)
		return say(n, V_DENIED, "%s %s", a, ename(errno));
	close(fd);
	return say(n, V_ALLOWED, "%s opened read-write", a);
}

/*
 * select(2) and pselect6(2) on a pipe with a short timeout: ordinary code
 * (Python's select.select, subprocess) needs both, in every tier.
 */
static int
t_select(const char *n, const char *a)
{
	struct timeval	 tv = { 0, 50000 };
	struct timespec	 ts = { 0, 50000000 };
	fd_set		 rd;
	int		 p[2], r;

	(void)a;
	if (pipe(p) == -1)
		return say(n, V_FAILED, "pipe %s", ename(errno));
	FD_ZERO(&rd);
	FD_SET(p[0], &rd);
	if (strcmp(n, "pselect") == 0)
		r = (int)syscall(SYS_pselect6, p[0] + 1, &rd, NULL, NULL, &ts,
		    NULL);
	else
		r = (int)syscall(SYS_select, p[0] + 1, &rd, NULL, NULL, &tv);
	if (r == -1)
		return say(n, V_FAILED, "%s", ename(errno));
	close(p[0]);
	close(p[1]);
	return say(n, V_OK, "timed out on an empty pipe (%d ready)", r);
}

struct test {
	const char	*name;
	int		 takes_arg;
	int		(*fn)(const char *, const char *);
};

static const struct test tests[] = {
	{ "unshare", 0, t_unshare },
	{ "unshare-net", 0, t_unshare_net },
	{ "setns", 0, t_setns },
	{ "clone-newns", 0, t_clone_newns },
	{ "clone-newuser", 0, t_clone_newuser },
	{ "clone3", 0, t_clone3 },
	{ "mount", 0, t_mount },
	{ "umount", 0, t_umount },
	{ "fsopen", 0, t_fsopen },
	{ "chroot", 0, t_chroot },
	{ "keyctl", 0, t_keyctl },
	{ "add_key", 0, t_add_key },
	{ "request_key", 0, t_request_key },
	{ "bpf", 0, t_bpf },
	{ "perf_event_open", 0, t_perf },
	{ "userfaultfd", 0, t_userfaultfd },
	{ "io_uring_setup", 0, t_io_uring },
	{ "ptrace", 0, t_ptrace },
	{ "process_vm_readv", 0, t_process_vm_readv },
	{ "pid1-mem", 0, t_pid1_mem },
	{ "pid1-ptrace", 0, t_pid1_ptrace },
	{ "pid1-vm-write", 0, t_pid1_vm_write },
	{ "pid1-signal", 0, t_pid1_signal },
	{ "init_module", 0, t_init_module },
	{ "kexec_load", 0, t_kexec_load },
	{ "socket-raw", 0, t_socket_raw },
	{ "socket-packet", 0, t_socket_packet },
	{ "socket-netlink", 0, t_socket_netlink },
	{ "socket-proto", 0, t_socket_proto },
	{ "socket-ordinary", 0, t_socket_ordinary },
	{ "int80", 0, t_int80 },
	{ "x32", 0, t_x32 },
	{ "tcp-connect", 1, t_tcp_connect },
	{ "tcp-loopback", 0, t_tcp_loopback },
	{ "write", 1, t_write },
	{ "masked", 1, t_masked },
	{ "masked-dir", 1, t_masked_dir },
	{ "inodes", 1, t_inodes },
	{ "mqueue", 0, t_mqueue },
	{ "writable", 1, t_writable },
	{ "read", 1, t_read },
	{ "unix-connect", 1, t_unix_connect },
	{ "env", 0, t_env },
	{ "identity", 0, t_identity },
	{ "hostname", 0, t_hostname },
	{ "fork", 0, t_fork },
	{ "thread", 0, t_thread },
	{ "fork-bomb", 1, t_fork_bomb },
	{ "fill", 1, t_fill },
	{ "balloon", 1, t_balloon },
	{ "mmap-exec", 1, t_mmap_exec },
	{ "mprotect-exec", 1, t_mmap_exec },
	{ "dev-open", 1, t_dev_open },
	{ "select", 0, t_select },
	{ "pselect", 0, t_select },
};

static const char *
signame(int sig)
{
	const char	*s = sigabbrev_np(sig);

	return s != NULL ? s : "?";
}

/* One test in a child: a kill by signal (seccomp's SIGSYS, the OOM
 * killer's SIGKILL) is a denial of that attempt, said in one line. */
static int
run_one(const struct test *t, const char *arg)
{
	pid_t	pid;
	int	st;

	fflush(stdout);
	if ((pid = fork()) == -1)
		return say(t->name, V_FAILED, "fork: %s", ename(errno));
	if (pid == 0) {
		int	r = t->fn(t->name, arg);

		fflush(stdout);
		_exit(r);
	}
	if (waitpid(pid, &st, 0) == -1)
		return say(t->name, V_FAILED, "waitpid: %s", ename(errno));
	if (WIFSIGNALED(st))
		return say(t->name, V_DENIED, "SIG%s", signame(WTERMSIG(st)));
	if (!WIFEXITED(st) || WEXITSTATUS(st) > V_FAILED)
		return say(t->name, V_FAILED, "status %d", st);
	return WEXITSTATUS(st);
}

/* Stand-in for sbx-init: run the program as a child, reap, pass on. */
static int
init_main(char **argv)
{
	pid_t	pid, w;
	int	st;

	if (argv[0] == NULL) {
		fprintf(stderr, "probe: -- needs a program\n");
		return 127;
	}
	if ((pid = fork()) == -1) {
		perror("probe: fork");
		return 127;
	}
	if (pid == 0) {
		execv(argv[0], argv);
		perror(argv[0]);
		_exit(127);
	}
	for (;;) {
		w = wait(&st);
		if (w == -1 && errno == EINTR)
			continue;
		if (w == -1)
			return 127;
		if (w == pid)
			break;
	}
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

int
main(int argc, char **argv)
{
	size_t	i;
	int	a, bad = 0, r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && strcmp(argv[1], "--") == 0)
		return init_main(argv + 2);
	if (argc < 2) {
		fprintf(stderr, "usage: probe TEST [ARG] ...\ntests:");
		for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
			fprintf(stderr, " %s%s", tests[i].name,
			    tests[i].takes_arg ? " ARG" : "");
		fprintf(stderr, "\n");
		return 100;
	}
	for (a = 1; a < argc; a++) {
		for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
			if (strcmp(argv[a], tests[i].name) == 0)
				break;
		if (i == sizeof(tests) / sizeof(tests[0])) {
			say(argv[a], V_FAILED, "unknown test");
			bad++;
			continue;
		}
		if (tests[i].takes_arg && a + 1 >= argc) {
			say(argv[a], V_FAILED, "needs an argument");
			bad++;
			continue;
		}
		r = run_one(&tests[i], tests[i].takes_arg ? argv[a + 1] : NULL);
		if (tests[i].takes_arg)
			a++;
		if (r != V_DENIED && r != V_OK)
			bad++;
	}
	return bad > 100 ? 100 : bad;
}
