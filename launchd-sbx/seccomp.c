/*
 * seccomp.c: the seccomp profile of every sandbox, as the OCI
 * linux.seccomp object.
 *
 * The profile is an allowlist in the manner of Docker's default: any
 * syscall not named below fails with EPERM, so a syscall the kernel gains
 * tomorrow is refused until someone allows it here (runc answers ENOSYS for
 * syscalls newer than its libseccomp, which libc treats as "not here").
 * Only the native architecture is listed, so a 32-bit (int $0x80) or x32
 * syscall meets libseccomp's bad-architecture action and kills the caller
 * instead of reaching a second, unfiltered syscall table.
 *
 * Invariant: nothing in seccomp_must_deny is allowed unconditionally, and
 * the conditional rules (clone, socket and socketpair, personality, the
 * signals of seccomp_not_pid1) never admit a namespace flag, a raw, packet
 * or netlink socket or a protocol besides TCP and UDP, an exotic persona,
 * or a signal to PID 1.
 * tests/unit/spec_test.c checks the profile against that list and
 * tests/probe/run-spec checks it against a real kernel.
 *
 * The profile is written as text into the spec's writer (jsonw.c), each
 * object's keys in sorted order, like the rest of the spec: plain libc,
 * for the root monitor.
 */
#include <sys/socket.h>

#include <netinet/in.h>

#include <errno.h>
#include <sched.h>
#include <stdint.h>

#include "launchd-sbx/jsonw.h"
#include "launchd-sbx/spec.h"

#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP	0x02000000
#endif

/* Every namespace flag clone(2) accepts in its first argument; clone is
 * allowed only when (flags & SECCOMP_CLONE_NS) == 0. */
#define SECCOMP_CLONE_NS \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | \
	 CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)

/* The socket type without SOCK_NONBLOCK and SOCK_CLOEXEC. */
#define SECCOMP_SOCK_TYPE_MASK	0xf

#if defined(__x86_64__)
#define SECCOMP_NATIVE_ARCH	"SCMP_ARCH_X86_64"
#elif defined(__aarch64__)
#define SECCOMP_NATIVE_ARCH	"SCMP_ARCH_AARCH64"
#else
#error "seccomp.c: name this architecture's SCMP_ARCH"
#endif

/*
 * Ordinary syscalls: files, memory, time, signals, processes without new
 * namespaces, sockets already made, System V and POSIX IPC (private to the
 * sandbox's IPC namespace).  Names the running libseccomp does not know are
 * skipped by runc, so x86_64 names that aarch64 lacks (open, stat, ...) do
 * no harm there.  Left out on purpose, besides seccomp_must_deny: io_uring
 * (a second syscall interface the filter cannot see into), modify_ldt,
 * memfd_secret, fanotify, the NUMA policy calls, the 32-bit compat names,
 * and mq_open: a POSIX message queue is kernel memory outside every file
 * system cap (spec.c also sets RLIMIT_MSGQUEUE to 0 for /dev/mqueue), and
 * gVisor, which ignores that limit, refuses it here too.
 */
static const char *const seccomp_allow[] = {
	"accept", "accept4", "access", "adjtimex", "alarm", "arch_prctl",
	"bind", "brk", "capget", "capset", "chdir", "chmod", "chown",
	"clock_adjtime", "clock_getres", "clock_gettime", "clock_nanosleep",
	"close", "close_range", "connect", "copy_file_range", "creat",
	"dup", "dup2", "dup3",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old",
	"epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old",
	"eventfd", "eventfd2", "execve", "execveat", "exit", "exit_group",
	"faccessat", "faccessat2", "fadvise64", "fallocate", "fchdir",
	"fchmod", "fchmodat", "fchown", "fchownat", "fcntl", "fdatasync",
	"fgetxattr", "flistxattr", "flock", "fork", "fremovexattr",
	"fsetxattr", "fstat", "fstatfs", "fsync", "ftruncate", "futex",
	"futex_waitv", "futimesat",
	"getcpu", "getcwd", "getdents", "getdents64", "getegid", "geteuid",
	"getgid", "getgroups", "getitimer", "getpeername", "getpgid",
	"getpgrp", "getpid", "getppid", "getpriority", "getrandom",
	"getresgid", "getresuid", "getrlimit", "get_robust_list", "getrusage",
	"getsid", "getsockname", "getsockopt", "get_thread_area", "gettid",
	"gettimeofday", "getuid", "getxattr",
	"inotify_add_watch", "inotify_init", "inotify_init1",
	"inotify_rm_watch", "io_cancel", "ioctl", "io_destroy",
	"io_getevents", "io_pgetevents", "ioprio_get", "ioprio_set",
	"io_setup", "io_submit",
	"landlock_add_rule", "landlock_create_ruleset",
	"landlock_restrict_self", "lchown", "lgetxattr", "link", "linkat",
	"listen", "listxattr", "llistxattr", "lremovexattr", "lseek",
	"lsetxattr", "lstat",
	"madvise", "membarrier", "memfd_create", "mincore", "mkdir",
	"mkdirat", "mknod", "mknodat", "mlock", "mlock2", "mlockall", "mmap",
	"mprotect", "mq_getsetattr", "mq_notify",
	"mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "msgctl",
	"msgget", "msgrcv", "msgsnd", "msync", "munlock", "munlockall",
	"munmap",
	"nanosleep", "newfstatat", "open", "openat", "openat2",
	"pause", "pidfd_send_signal", "pipe", "pipe2",
	"pkey_alloc", "pkey_free", "pkey_mprotect", "poll", "ppoll", "prctl",
	"pread64", "preadv", "preadv2", "prlimit64", "process_mrelease",
	"pselect6", "pwrite64", "pwritev", "pwritev2",
	"read", "readahead", "readlink", "readlinkat", "readv", "recvfrom",
	"recvmmsg", "recvmsg", "remap_file_pages", "removexattr", "rename",
	"renameat", "renameat2", "restart_syscall", "rmdir", "rseq",
	"rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigreturn",
	"rt_sigsuspend", "rt_sigtimedwait",
	"sched_getaffinity", "sched_getattr", "sched_getparam",
	"sched_get_priority_max", "sched_get_priority_min",
	"sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity",
	"sched_setattr", "sched_setparam", "sched_setscheduler",
	"sched_yield", "seccomp", "select", "semctl", "semget", "semop",
	"semtimedop", "sendfile", "sendmmsg", "sendmsg", "sendto",
	"setfsgid", "setfsuid", "setgid", "setgroups", "setitimer",
	"setpgid", "setpriority", "setregid", "setresgid", "setresuid",
	"setreuid", "setrlimit", "set_robust_list", "setsid", "setsockopt",
	"set_thread_area", "set_tid_address", "setuid", "setxattr", "shmat",
	"shmctl", "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd",
	"signalfd4", "splice", "stat", "statfs", "statx",
	"symlink", "symlinkat", "sync", "sync_file_range", "syncfs",
	"sysinfo",
	"tee", "time", "timer_create", "timer_delete",
	"timer_getoverrun", "timer_gettime", "timer_settime",
	"timerfd_create", "timerfd_gettime", "timerfd_settime", "times",
	"truncate",
	"umask", "uname", "unlink", "unlinkat", "utime", "utimensat",
	"utimes", "vfork", "vmsplice", "wait4", "waitid", "write", "writev",
	NULL
};

/*
 * The calls that signal one process (or open a pidfd to it) by number,
 * allowed for every number but 1: PID 1 is sbx-init, the egress bridge,
 * and gVisor, unlike Linux, lets a namespace's init be stopped or killed
 * from inside (sbx-init blocks every other signal).  kill(-1) spares
 * PID 1 in both kernels, and kill(0) the code's process group, which
 * sbx-init does not share.
 */
static const char *const seccomp_not_pid1[] = {
	"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
	"pidfd_open", NULL
};

/*
 * runsc reads linux.seccomp itself and looks every name up in gVisor's own
 * syscall table, where a few syscalls carry other names than the kernel
 * gives them; a name it does not know it skips with only a warning in its
 * debug log, so the allowed syscall falls to the default EPERM (Python's
 * select.select is pselect6).  For runsc the profile carries gVisor's name
 * beside the kernel's: a runsc that knows only one skips the other.
 *
 * The names of syscalls that gVisor does not implement at all
 * (Debian 12's runsc: futex_waitv, landlock_*, openat2, process_mrelease)
 * are skipped too; its kernel would answer ENOSYS, and there they fail
 * with EPERM instead (launchd-sbx(8), CAVEATS).  tests/probe/run-spec lists
 * every allowed name the installed runsc skips and fails on any other.
 */
static const char *const seccomp_runsc_names[][2] = {
	{ "pselect6", "pselect" },
};

const char *const seccomp_must_deny[] = {
	/* namespaces: creating and joining */
	"unshare", "setns", "clone3",
	/* the mount family, old and new API */
	"mount", "umount2", "pivot_root", "chroot", "move_mount",
	"open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
	"mount_setattr",
	/* kernel keyrings */
	"keyctl", "add_key", "request_key",
	/* kernel attack surface that ordinary code does not need */
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	/* other processes' memory */
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
	"pidfd_getfd", "process_madvise",
	/* modules and kexec */
	"init_module", "finit_module", "delete_module", "kexec_load",
	"kexec_file_load",
	/* the machine's own state */
	"reboot", "swapon", "swapoff", "syslog", "acct", "settimeofday",
	"clock_settime", "sethostname", "setdomainname", "vhangup",
	"iopl", "ioperm", "modify_ldt", "quotactl", "quotactl_fd",
	"lookup_dcookie", "name_to_handle_at", "open_by_handle_at",
	"fanotify_init",
	NULL
};

/* One condition: arg index compared with op (MASKED_EQ: value is the
 * mask, value2 the datum). */
struct seccomp_cond {
	unsigned	 index;
	uint64_t	 value, value2;
	const char	*op;
};

/*
 * One rule: the action for the names, when every condition holds (n 0:
 * always).  Keys in sorted order: action, args, errnoRet, names.
 */
static void
seccomp_rule(struct jw *w, const char *action, const char *const *names,
    const struct seccomp_cond *c, size_t n, int errnoret)
{
	size_t	 i;

	jw_obj(w);
	jw_key(w, "action");
	jw_str(w, action);
	if (n > 0) {
		jw_key(w, "args");
		jw_arr(w);
		for (i = 0; i < n; i++) {
			jw_obj(w);
			jw_key(w, "index");
			jw_int(w, (long long)c[i].index);
			jw_key(w, "op");
			jw_str(w, c[i].op);
			jw_key(w, "value");
			jw_int(w, (long long)c[i].value);
			jw_key(w, "valueTwo");
			jw_int(w, (long long)c[i].value2);
			jw_obj_end(w);
		}
		jw_arr_end(w);
	}
	if (errnoret != 0) {
		jw_key(w, "errnoRet");
		jw_int(w, errnoret);
	}
	jw_key(w, "names");
	jw_strings(w, names);
	jw_obj_end(w);
}

/* Allow the one call name when arg 0 compares with op. */
static void
seccomp_arg0(struct jw *w, const char *const *names, uint64_t value,
    uint64_t value2, const char *op)
{
	const struct seccomp_cond	 c = { 0, value, value2, op };

	seccomp_rule(w, "SCMP_ACT_ALLOW", names, &c, 1, 0);
}

/*
 * socket(domain, type, protocol), or with type < 0 any type and protocol.
 * Equality on the whole register: a value with stray high bits matches
 * nothing and is refused.
 */
static void
seccomp_socket(struct jw *w, const char *name, int domain, int type,
    int protocol)
{
	const char			*names[] = { name, NULL };
	const struct seccomp_cond	 c[] = {
		{ 0, (uint64_t)domain, 0, "SCMP_CMP_EQ" },
		{ 1, SECCOMP_SOCK_TYPE_MASK, (uint64_t)type,
		    "SCMP_CMP_MASKED_EQ" },
		{ 2, (uint64_t)protocol, 0, "SCMP_CMP_EQ" },
	};

	seccomp_rule(w, "SCMP_ACT_ALLOW", names, c, type < 0 ? 1 : 3, 0);
}

/*
 * The calls of seccomp_not_pid1 when the low 32 bits of their first
 * argument are not 1: even, or odd with some other of those bits set.
 * The kernel reads a pid_t from the low half of the register only, so a
 * plain "not equal to 1" would let 0x100000001 through.  A rule's
 * conditions may not test the same argument twice (runc would OR them),
 * hence one rule per bit.
 */
static void
seccomp_signals(struct jw *w)
{
	unsigned	 k;

	seccomp_arg0(w, seccomp_not_pid1, 1, 0, "SCMP_CMP_MASKED_EQ");
	for (k = 1; k < 32; k++)
		seccomp_arg0(w, seccomp_not_pid1, (1ULL << k) | 1,
		    (1ULL << k) | 1, "SCMP_CMP_MASKED_EQ");
}

void
seccomp_render(struct jw *w, enum spec_flavor flavor)
{
	/* The personas Docker allows: Linux, Linux32, UNAME26 with either,
	 * and the 0xffffffff query.  Anything else could turn on
	 * READ_IMPLIES_EXEC or ADDR_NO_RANDOMIZE. */
	static const uint64_t	 personas[] = {
		0x0, 0x8, 0x20000, 0x20008, 0xffffffff
	};
	static const char *const clone[] = { "clone", NULL };
	static const char *const clone3[] = { "clone3", NULL };
	static const char *const personality[] = { "personality", NULL };
	size_t			 i;

	jw_obj(w);
	jw_key(w, "architectures");
	jw_arr(w);
	jw_str(w, SECCOMP_NATIVE_ARCH);
	jw_arr_end(w);
	jw_key(w, "defaultAction");
	jw_str(w, "SCMP_ACT_ERRNO");
	jw_key(w, "syscalls");
	jw_arr(w);

	jw_obj(w);
	jw_key(w, "action");
	jw_str(w, "SCMP_ACT_ALLOW");
	jw_key(w, "names");
	jw_arr(w);
	for (i = 0; seccomp_allow[i] != NULL; i++)
		jw_str(w, seccomp_allow[i]);
	if (flavor == SPEC_RUNSC)
		for (i = 0; i < sizeof(seccomp_runsc_names) /
		    sizeof(seccomp_runsc_names[0]); i++)
			jw_str(w, seccomp_runsc_names[i][1]);
	jw_arr_end(w);
	jw_obj_end(w);

	/* clone(2) without any namespace flag: fork, threads, vfork. */
	seccomp_arg0(w, clone, SECCOMP_CLONE_NS, 0, "SCMP_CMP_MASKED_EQ");

	/*
	 * clone3 passes its flags in memory, out of the filter's sight; ENOSYS
	 * makes glibc fall back to clone, which the rule above checks.
	 * gVisor ignores errnoRet and would answer EPERM, on which glibc
	 * does not fall back, so no thread could start; its own kernel
	 * answers ENOSYS to clone3 instead, so there the call goes to it.
	 * run-spec checks that clone3 still fails under runsc.
	 */
	if (flavor == SPEC_RUNSC)
		seccomp_rule(w, "SCMP_ACT_ALLOW", clone3, NULL, 0, 0);
	else
		seccomp_rule(w, "SCMP_ACT_ERRNO", clone3, NULL, 0, ENOSYS);

	/*
	 * Unix sockets (the egress channel) of any type, and TCP and UDP
	 * for loopback (sbx-init's proxy bridge), with protocol 0 or its
	 * own number: never raw, packet or netlink, nor another protocol
	 * (SCTP, MPTCP, UDP-Lite, DCCP), whose first socket may load a
	 * kernel module.  Anything else meets the default EPERM, which
	 * ordinary code reads as "not available" (Go's MPTCP probe, Python's
	 * tests).  socketpair creates its sockets the same way (a module
	 * may load before it fails) and works only for AF_UNIX anyway.
	 */
	seccomp_socket(w, "socket", AF_UNIX, -1, 0);
	seccomp_socket(w, "socket", AF_INET, SOCK_STREAM, 0);
	seccomp_socket(w, "socket", AF_INET, SOCK_STREAM, IPPROTO_TCP);
	seccomp_socket(w, "socket", AF_INET, SOCK_DGRAM, 0);
	seccomp_socket(w, "socket", AF_INET, SOCK_DGRAM, IPPROTO_UDP);
	seccomp_socket(w, "socket", AF_INET6, SOCK_STREAM, 0);
	seccomp_socket(w, "socket", AF_INET6, SOCK_STREAM, IPPROTO_TCP);
	seccomp_socket(w, "socket", AF_INET6, SOCK_DGRAM, 0);
	seccomp_socket(w, "socket", AF_INET6, SOCK_DGRAM, IPPROTO_UDP);
	seccomp_socket(w, "socketpair", AF_UNIX, -1, 0);

	seccomp_signals(w);

	for (i = 0; i < sizeof(personas) / sizeof(personas[0]); i++)
		seccomp_arg0(w, personality, personas[i], 0, "SCMP_CMP_EQ");

	jw_arr_end(w);
	jw_obj_end(w);
}
