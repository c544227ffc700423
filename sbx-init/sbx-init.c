/*
 * sbx-init.c: PID 1 inside every sandbox.  It bridges 127.0.0.1:PORT to the
 * egress Unix socket launchd-sbx mounted in, exports the proxy and CA-bundle
 * variables, starts the task's program as its only child, forwards the
 * usual termination signals to it, reaps every process and exits with the
 * child's status.
 *
 * Invariants: the only route out of the sandbox this program ever opens is
 * the egress socket named with -s; a TCP connection it cannot pair with
 * that socket is reset, never served another way (fail closed).  When the
 * main child exits, nothing it started outlives sbx-init.  The binary is
 * linked statically against plain libc, because it runs inside images it
 * did not build, and its memory is fixed arrays plus one buffer mapping
 * per live relay.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/handoff.h"
#include "../common/version.h"

#define INIT_DEFAULT_SOCKET	"/run/sbx/egress.sock"
#define INIT_DEFAULT_CA		"/run/sbx/ca.pem"
#define INIT_DEFAULT_PORT	3128
#define INIT_MAX_RELAYS		256
#define INIT_BUFSZ		(64 * 1024)
#define INIT_RETRY_MS		10	/* egress backlog full: try again */
#define INIT_RENICE_MS		2000	/* a pool entry's renice, at most */
#define INIT_CONNECT_MS		10000	/* ... for this long at most */
#define INIT_EXIT_USAGE		2
#define INIT_EXIT_INTERNAL	1
#define INIT_EXIT_EXEC		127
#define INIT_ARGV_MAX		(64 * 1024)	/* -a file size */
#define INIT_ARGV_WORDS		256
#define INIT_HELLO_MS		1000	/* egressd's answer to the hello */

/* One direction of a relay: bytes read from one socket, not yet written. */
struct init_buf {
	size_t		 b_off;		/* first unwritten byte */
	size_t		 b_len;		/* end of the data read so far */
	bool		 b_eof;		/* the source sent EOF */
	bool		 b_shut;	/* EOF passed on with SHUT_WR */
};

/*
 * A relay pairs one accepted TCP connection with one connection to the
 * egress socket.  r_up carries tcp -> unix, r_down unix -> tcp.
 */
struct init_relay {
	int		 r_tcp;		/* -1 when the slot is free */
	int		 r_unx;		/* -1 while waiting for the egress */
	uint64_t	 r_deadline;	/* give up waiting at this time, ms */
	struct init_buf	 r_up;
	struct init_buf	 r_down;
	unsigned char	*r_mem;		/* both buffers, one mapping */
	uint32_t	 r_tev;		/* events r_tcp is in the epoll set */
	uint32_t	 r_uev;		/* for, 0 when it is not in it */
};

static struct init_relay init_relays[INIT_MAX_RELAYS];
static int		 init_maxrelays = INIT_MAX_RELAYS;
static int		 init_nrelays;	/* slots in use */
static int		 init_npending;	/* ... still waiting for the egress */
static bool		 init_accept_paused;

/*
 * One epoll set holds the signalfd, the listener while it may accept, and
 * every relay socket with something to wait for.  Interest changes only
 * when a relay's wants change (a short write, a full buffer, an EOF), so
 * a message costs one wakeup shared with whatever else is ready, a recv
 * and a send: no descriptor list is rebuilt or rescanned per wakeup.
 * Event tags: a relay socket is (slot << 1 | side), side 0 the TCP one.
 */
static int		 init_epfd = -1;
#define INIT_TAG_SIGNAL	UINT64_MAX
#define INIT_TAG_LISTEN	(UINT64_MAX - 1)
#define INIT_NEVENTS	128

static int		 init_verbose;
static const char	*init_sockpath = INIT_DEFAULT_SOCKET;
/* -s tcp:ADDR:PORT (the microvm tier: its egress is QEMU's guestfwd). */
static struct sockaddr_in init_egress_in;
static bool		 init_egress_tcp;
static const char	*init_capath = INIT_DEFAULT_CA;
static int		 init_port = INIT_DEFAULT_PORT;

/*
 * The handoff connection (common/handoff.h): when egressd takes them,
 * each accepted client connection goes to egressd as a descriptor and
 * is closed here, so its bytes no longer pass through us.  -1 when egressd
 * said no, or with -r; connections are then relayed.
 */
static int		 init_ho = -1;
static bool		 init_relay_only;

/* The signals passed on to the child; SIGCHLD is ours. */
static const int	 init_fwd_signals[] = {
	SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2
};
#define INIT_NFWD	(sizeof(init_fwd_signals) / sizeof(init_fwd_signals[0]))

/*
 * -w python3: a warm interpreter for a pre-started sandbox.  Before the
 * assignment arrives sbx-init starts `python3 -c INIT_WARM_PY FD`, which
 * loads its runtime and blocks reading FD; an assignment whose program is
 * that interpreter with a script goes down FD (the environment the program
 * would be started with, then the script and its arguments) and the script runs as
 * __main__ through runpy, with sys.argv and sys.path[0] as `python3
 * SCRIPT ARGS` would set them.  Any other program: the warm interpreter is
 * killed and the program started as usual.  The script runs in the
 * interpreter's __main__ (cleared first), its source compiled with its
 * own file name; an uncaught exception goes to sys.excepthook without the
 * bootstrap's frame and exits 1, a missing script exits 2, as with
 * `python3 SCRIPT`.
 *
 * -m NAME[,NAME...] (with -w): modules the interpreter imports before it
 * waits, so that a script that imports them finds them loaded.  The
 * names come from launchd-sbx's configuration (pool.warm_imports), never
 * from the task; one that fails to import is left for the script to
 * import (and fail) itself.  They run before the assignment: with the
 * entry's environment, not the execution's.
 */
#define INIT_WARM_PY \
	"def _sbx_run(fd, mods):\n" \
	"    import os, sys, builtins, importlib\n" \
	"    for m in mods.split(',') if mods else ():\n" \
	"        try:\n" \
	"            importlib.import_module(m)\n" \
	"        except Exception:\n" \
	"            pass\n" \
	"    data = bytearray()\n" \
	"    while True:\n" \
	"        b = os.read(fd, 65536)\n" \
	"        if not b:\n" \
	"            break\n" \
	"        data += b\n" \
	"    os.close(fd)\n" \
	"    words = bytes(data).split(b'\\0')\n" \
	"    i = 0\n" \
	"    while words[i]:\n" \
	"        k, _, v = words[i].partition(b'=')\n" \
	"        os.environb[k] = v\n" \
	"        i += 1\n" \
	"    sys.argv = [os.fsdecode(w) for w in words[i + 1:-1]]\n" \
	"    path = sys.argv[0]\n" \
	"    sys.path[0] = os.path.dirname(os.path.abspath(path))\n" \
	"    try:\n" \
	"        f = os.open(path, os.O_RDONLY | os.O_CLOEXEC)\n" \
	"        try:\n" \
	"            source = bytearray()\n" \
	"            while b := os.read(f, 65536):\n" \
	"                source += b\n" \
	"        finally:\n" \
	"            os.close(f)\n" \
	"    except OSError as e:\n" \
	"        sys.stderr.write(\"%s: can't open file %r: [Errno %d] %s\\n\" %\n" \
	"                         (sys.executable, path, e.errno, e.strerror))\n" \
	"        sys.exit(2)\n" \
	"    d = sys.modules['__main__'].__dict__\n" \
	"    d.clear()\n" \
	"    d.update(__name__='__main__', __doc__=None, __package__=None,\n" \
	"             __loader__=None, __spec__=None, __file__=path,\n" \
	"             __cached__=None, __builtins__=builtins)\n" \
	"    try:\n" \
	"        exec(compile(source, path, 'exec'), d)\n" \
	"    except SystemExit:\n" \
	"        raise\n" \
	"    except BaseException:\n" \
	"        t, v, tb = sys.exc_info()\n" \
	"        sys.excepthook(t, v.with_traceback(tb.tb_next), tb.tb_next)\n" \
	"        sys.exit(1)\n" \
	"_sbx_run(int(__import__('sys').argv[1]), __import__('sys').argv[2])\n"

static void	init_warm_wait(void);
static pid_t	init_warm_start(const char *, const char *, int *);
static bool	init_mods_ok(const char *);
static pid_t	init_warm_go(pid_t, int, const char *, char **);
static void	init_usage(void) __attribute__((noreturn));
static void	init_usage_to(FILE *, int) __attribute__((noreturn));
static void	init_log(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
static void	init_debug(const char *, ...)
		    __attribute__((format(printf, 1, 2)));
static void	init_fatal(const char *, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
static int	init_loop(int, int, pid_t);
static int	init_listen(void);
static void	init_handoff_open(void);
static bool	init_handoff(int);
static void	init_set_maxrelays(void);
static pid_t	init_spawn(char **);
static void	init_child_env(void);
static char	**init_argv_file(const char *);
static int	init_status(int);
static bool	init_forwarded(int);
static void	init_accept(int);
static bool	init_parse_tcp(const char *);
static bool	init_relay_connect(struct init_relay *);
static void	init_relay_close(struct init_relay *, bool);
static bool	init_relay_arm(struct init_relay *);
static bool	init_epoll_set(int, uint64_t, uint32_t, uint32_t *);
static uint64_t	init_now_ms(void);
static bool	init_relay_io(struct init_relay *, uint32_t, uint32_t);
static bool	init_pump(int, int, struct init_buf *, unsigned char *,
		    uint32_t);
static void	init_kill_rest(bool);
static int	init_kill_children(void);

static void
init_usage_to(FILE *f, int status)
{
	fprintf(f, "usage: sbx-init [-rv] [-c cafile] [-p port] "
	    "[-s socket] -- program [arg ...]\n"
	    "       sbx-init [-rv] [-c cafile] [-p port] [-s socket] "
	    "[-w python3 [-m module,...]] -a argvfile\n"
	    "       sbx-init --help | --version\n");
	if (status == 0)
		fprintf(f, "PID 1 of an sbx sandbox (launchd-sbx puts it "
		    "there); see sbx-init(8).\n");
	exit(status);
}

static void
init_usage(void)
{
	init_usage_to(stderr, INIT_EXIT_USAGE);
}

static void
init_vlog(const char *fmt, va_list ap)
{
	char	 msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* One write, so lines from the child and from us do not interleave. */
	dprintf(STDERR_FILENO, "sbx-init: %s\n", msg);
}

static void
init_log(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	init_vlog(fmt, ap);
	va_end(ap);
}

static void
init_debug(const char *fmt, ...)
{
	va_list	 ap;

	if (!init_verbose)
		return;
	va_start(ap, fmt);
	init_vlog(fmt, ap);
	va_end(ap);
}

static void
init_fatal(const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	init_vlog(fmt, ap);
	va_end(ap);
	exit(INIT_EXIT_INTERNAL);
}

int
main(int argc, char *argv[])
{
	sigset_t		 mask;
	const char		*errstr = NULL, *portarg = NULL;
	const char		*argvfile = NULL, *warm = NULL, *mods = NULL;
	char			*end;
	pid_t			 warm_pid = -1;
	int			 warm_fd = -1;
	long			 l;
	bool			 pid1;
	pid_t			 child;
	int			 ch, sfd, lfd, status, i;

	if (argc == 2 && strcmp(argv[1], "--help") == 0)
		init_usage_to(stdout, 0);
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("sbx-init %s\n", SBX_VERSION);
		return 0;
	}

	/*
	 * The code runs under our uid: while we are dumpable it may open
	 * /proc/1/mem (and /proc/1/fd, /proc/1/environ) and rewrite the
	 * egress bridge, or trace us.  Not dumpable, only CAP_SYS_PTRACE
	 * could, and the sandbox has no capability.  The runtime's execve of
	 * us made us dumpable; we never exec or change credentials after
	 * this, so it holds (checked, not assumed).  Children are dumpable
	 * again after their own execve, as a fresh program expects.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1)
		init_fatal("prctl PR_SET_DUMPABLE: %s", strerror(errno));
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
		init_fatal("prctl PR_SET_DUMPABLE: still dumpable");

	while ((ch = getopt(argc, argv, "+a:c:m:p:rs:vw:")) != -1) {
		switch (ch) {
		case 'a':
			argvfile = optarg;
			break;
		case 'm':
			if (!init_mods_ok(optarg)) {
				init_log("-m %s: not a list of module names",
				    optarg);
				init_usage();
			}
			mods = optarg;
			break;
		case 'w':
			if (strcmp(optarg, "python3") != 0) {
				init_log("-w %s: only python3 can be warm",
				    optarg);
				init_usage();
			}
			warm = optarg;
			break;
		case 'c':
			init_capath = optarg;
			break;
		case 'p':
			portarg = optarg;
			errno = 0;
			l = strtol(optarg, &end, 10);
			if (errno != 0 || end == optarg || *end != '\0' ||
			    l < 1 || l > 65535)
				errstr = "port must be a number from 1 to 65535";
			else
				init_port = (int)l;
			break;
		case 'r':
			init_relay_only = true;
			break;
		case 's':
			init_sockpath = optarg;
			break;
		case 'v':
			init_verbose = 1;
			break;
		default:
			init_usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (errstr != NULL) {
		init_log("-p %s: %s", portarg, errstr);
		init_usage();
	}
	/* -a: the program comes from the file, read now, as the sandbox
	 * user, not from the command line (a pre-created sandbox). */
	if (argvfile != NULL) {
		if (argc != 0)
			init_usage();
		/* A peer that vanishes mid-write must cost a write, not
		 * PID 1 (the warm interpreter's pipe too). */
		signal(SIGPIPE, SIG_IGN);
		if (warm != NULL) {
			init_warm_wait();
			warm_pid = init_warm_start(warm, mods, &warm_fd);
		}
		argv = init_argv_file(argvfile);
		argc = 1;
	} else if (warm != NULL)
		init_usage();
	if (mods != NULL && warm == NULL)
		init_usage();
	if (argc < 1)
		init_usage();
	if (strncmp(init_sockpath, "tcp:", 4) == 0) {
		if (!init_parse_tcp(init_sockpath + 4)) {
			init_log("-s %s: want tcp:IPV4:PORT", init_sockpath);
			init_usage();
		}
	} else if (strlen(init_sockpath) >=
	    sizeof(((struct sockaddr_un *)0)->sun_path)) {
		init_log("-s %s: socket path longer than %zu bytes",
		    init_sockpath,
		    sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
		init_usage();
	}

	pid1 = getpid() == 1;
	if (!pid1) {
		/*
		 * Outside a pid namespace orphans would go to the host's
		 * init; as a subreaper they come to us, so reaping and the
		 * final kill behave as they do in the sandbox.
		 */
		init_debug("not PID 1 (pid %ld): acting as subreaper",
		    (long)getpid());
		if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == -1)
			init_log("prctl PR_SET_CHILD_SUBREAPER: %s",
			    strerror(errno));
	}

	/*
	 * Block every signal that can be blocked before anything else, so
	 * none is lost between here and the loop and none acts by its
	 * default: they all wait in the signalfd, where SIGCHLD and the
	 * forwarded ones are handled and the rest dropped.  As PID 1 under
	 * Linux the kernel drops a signal without a handler anyway, but
	 * gVisor does not, and outside a pid namespace nothing would: the
	 * code (our uid) could stop us or kill us with SIGSEGV.  SIGKILL and
	 * SIGSTOP cannot be blocked; launchd-sbx's seccomp profile keeps
	 * the code from sending signals to PID 1 at all.
	 */
	sigfillset(&mask);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) == -1)
		init_fatal("sigprocmask: %s", strerror(errno));
	if ((sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) == -1)
		init_fatal("signalfd: %s", strerror(errno));
	/* A peer that vanishes mid-write must cost a relay, not PID 1. */
	signal(SIGPIPE, SIG_IGN);

	for (i = 0; i < INIT_MAX_RELAYS; i++)
		init_relays[i].r_tcp = init_relays[i].r_unx = -1;
	init_set_maxrelays();

	/* Listen before the child exists, so its first connect finds us. */
	lfd = init_listen();

	if (!init_egress_tcp && access(init_sockpath, F_OK) == -1)
		init_debug("%s: %s: proxy connections will be refused",
		    init_sockpath, strerror(errno));
	/*
	 * Before the program exists: egressd grants the handoff only to
	 * the channel's first connection, and that must be ours.  A TCP
	 * egress (QEMU's guestfwd) cannot carry a descriptor: relay.
	 */
	else if (lfd != -1 && !init_relay_only && !init_egress_tcp)
		init_handoff_open();

	if (warm_pid > 0)
		child = init_warm_go(warm_pid, warm_fd, warm, argv);
	else
		child = init_spawn(argv);
	init_debug("started %s as pid %ld", argv[0], (long)child);

	status = init_loop(sfd, lfd, child);
	init_debug("pid %ld exited, status 0x%x", (long)child, status);
	init_kill_rest(pid1);
	return init_status(status);
}

static bool
init_forwarded(int sig)
{
	size_t	 k;

	for (k = 0; k < INIT_NFWD; k++)
		if (init_fwd_signals[k] == sig)
			return true;
	return false;
}

/*
 * Relay, forward signals and reap until the main child exits; return its
 * wait status.
 */
static int
init_loop(int sfd, int lfd, pid_t child)
{
	struct epoll_event	 ev[INIT_NEVENTS];
	struct init_relay	*r;
	struct signalfd_siginfo	 si;
	pid_t			 pid;
	uint64_t		 tag;
	uint32_t		 sigev = 0, lev = 0;
	int			 status, i, n, timeout;
	bool			 sigready, lready;

	if ((init_epfd = epoll_create1(EPOLL_CLOEXEC)) == -1)
		init_fatal("epoll_create1: %s", strerror(errno));
	if (!init_epoll_set(sfd, INIT_TAG_SIGNAL, EPOLLIN, &sigev))
		init_fatal("epoll_ctl signalfd: %s", strerror(errno));

	for (;;) {
		/*
		 * At the cap, new connections wait in the listen backlog.
		 * Out of descriptors, the listener sits out one short round
		 * rather than wake epoll at once, forever.  Level-triggered,
		 * it must leave the set for either.
		 */
		if (lfd != -1 && !init_epoll_set(lfd, INIT_TAG_LISTEN,
		    !init_accept_paused && init_nrelays < init_maxrelays ?
		    EPOLLIN : 0, &lev)) {
			init_log("epoll_ctl listener: %s", strerror(errno));
			init_accept_paused = true;
		}
		timeout = init_npending > 0 ? INIT_RETRY_MS : -1;
		if (init_accept_paused)
			timeout = init_npending > 0 ? INIT_RETRY_MS : 100;

		if ((n = epoll_wait(init_epfd, ev, INIT_NEVENTS,
		    timeout)) == -1) {
			if (errno == EINTR)
				continue;
			init_fatal("epoll_wait: %s", strerror(errno));
		}
		init_accept_paused = false;

		/*
		 * Relays first; accepting and signals wait until the batch
		 * is done, so no slot is freed and taken again while later
		 * events in this batch may still name it.
		 */
		sigready = lready = false;
		for (i = 0; i < n; i++) {
			tag = ev[i].data.u64;
			if (tag == INIT_TAG_SIGNAL) {
				sigready = true;
				continue;
			}
			if (tag == INIT_TAG_LISTEN) {
				lready = true;
				continue;
			}
			r = &init_relays[tag >> 1];
			/* Closed earlier in this batch. */
			if (r->r_tcp == -1 || r->r_unx == -1)
				continue;
			if (!init_relay_io(r, (tag & 1) ? 0 : ev[i].events,
			    (tag & 1) ? ev[i].events : 0))
				init_relay_close(r, false);
			else if (!init_relay_arm(r))
				init_relay_close(r, true);
		}
		for (i = 0; init_npending > 0 && i < init_maxrelays; i++) {
			r = &init_relays[i];
			if (r->r_tcp != -1 && r->r_unx == -1 &&
			    !init_relay_connect(r))
				init_relay_close(r, true);
		}
		if (lready)
			init_accept(lfd);

		if (!sigready)
			continue;
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			if (init_forwarded((int)si.ssi_signo)) {
				init_debug("forwarding signal %u to pid %ld",
				    si.ssi_signo, (long)child);
				if (kill(child, (int)si.ssi_signo) == -1 &&
				    errno != ESRCH)
					init_log("kill %ld: %s", (long)child,
					    strerror(errno));
				continue;
			}
			if (si.ssi_signo != SIGCHLD) {
				init_debug("dropped signal %u from pid %u",
				    si.ssi_signo, si.ssi_pid);
				continue;
			}
			/* SIGCHLDs merge: reap until nothing is left. */
			while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
				if (pid == child)
					return status;
			}
		}
	}
}

/*
 * Open the TCP listener on loopback only.  A failure is reported but not
 * fatal: the program still runs, and its proxy connections simply fail,
 * which is the closed side to fail on.
 */
static int
init_listen(void)
{
	struct sockaddr_in	 sin;
	int			 fd, one = 1;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)init_port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		init_log("socket: %s: no proxy bridge", strerror(errno));
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(fd, 128) == -1) {
		init_log("listen 127.0.0.1:%d: %s: no proxy bridge", init_port,
		    strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Each relay holds two descriptors.  Under a low RLIMIT_NOFILE (the policy
 * sets rlimits) the cap shrinks to what fits, so a burst of connections
 * waits in the backlog instead of failing on EMFILE.
 */
static void
init_set_maxrelays(void)
{
	struct rlimit	 rl;
	rlim_t		 fit;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur == RLIM_INFINITY)
		return;
	fit = rl.rlim_cur > 16 ? (rl.rlim_cur - 16) / 2 : 1;
	if (fit < (rlim_t)init_maxrelays) {
		init_maxrelays = fit > 0 ? (int)fit : 1;
		init_debug("RLIMIT_NOFILE %llu: at most %d relays",
		    (unsigned long long)rl.rlim_cur, init_maxrelays);
	}
}

/*
 * Fork and exec the program.  The child starts with the signal mask and
 * dispositions a fresh process expects, whatever sbx-init changed.
 */
static pid_t
init_spawn(char **argv)
{
	sigset_t	 none;
	pid_t		 pid;
	size_t		 k;

	if ((pid = fork()) == -1)
		init_fatal("fork: %s", strerror(errno));
	if (pid != 0)
		return pid;

	signal(SIGPIPE, SIG_DFL);
	for (k = 0; k < INIT_NFWD; k++)
		signal(init_fwd_signals[k], SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Its own process group: kill(0, sig) in the code must not reach
	 * PID 1, which gVisor would not protect. */
	(void)setpgid(0, 0);

	init_child_env();
	execvp(argv[0], argv);
	dprintf(STDERR_FILENO, "sbx-init: %s: %s\n", argv[0], strerror(errno));
	_exit(INIT_EXIT_EXEC);
}

/*
 * Point every common HTTP client at the bridge.  NO_PROXY is set, empty,
 * so that no host bypasses the proxy even if the image's defaults list
 * one; the CA variables appear only when a CA bundle was mounted.
 */
static void
init_child_env(void)
{
	static const char	*proxy[] = {
		"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"
	};
	static const char	*ca[] = {
		"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
		"PIP_CERT", "NODE_EXTRA_CA_CERTS"
	};
	struct stat		 st;
	char			 url[64];
	size_t			 k;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", init_port);
	for (k = 0; k < sizeof(proxy) / sizeof(proxy[0]); k++)
		setenv(proxy[k], url, 1);
	setenv("NO_PROXY", "", 1);
	setenv("no_proxy", "", 1);
	if (stat(init_capath, &st) == 0) {
		for (k = 0; k < sizeof(ca) / sizeof(ca[0]); k++)
			setenv(ca[k], init_capath, 1);
	}
}

/*
 * -a FILE: NUL-terminated strings, NAME=VALUE entries for the environment
 * first, then an empty string, then the program and its arguments.  A
 * pre-created sandbox's spec cannot name them: launchd-sbx writes the file
 * just before it starts the sandbox.  Never returns without a program.
 */
static char **
init_argv_file(const char *path)
{
	static char	 buf[INIT_ARGV_MAX + 1];
	static char	*av[INIT_ARGV_WORDS + 1];
	size_t		 len = 0, i, next, n = 0;
	ssize_t		 r;
	bool		 env = true;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		init_fatal("-a %s: %s", path, strerror(errno));
	while (len < INIT_ARGV_MAX &&
	    (r = read(fd, buf + len, INIT_ARGV_MAX - len)) != 0) {
		if (r == -1) {
			if (errno == EINTR)
				continue;
			init_fatal("-a %s: %s", path, strerror(errno));
		}
		len += (size_t)r;
	}
	close(fd);
	if (len == INIT_ARGV_MAX || len == 0 || buf[len - 1] != '\0')
		init_fatal("-a %s: want NUL-terminated strings, at most %d "
		    "bytes", path, INIT_ARGV_MAX - 1);
	for (i = 0; i < len; i = next) {
		char	*w = buf + i, *eq;

		/* Before the '=' below is cut. */
		next = i + strlen(w) + 1;
		if (env) {
			if (*w == '\0') {
				env = false;
				continue;
			}
			if ((eq = strchr(w, '=')) == NULL || eq == w)
				init_fatal("-a %s: \"%s\" is not NAME=VALUE",
				    path, w);
			*eq = '\0';
			if (setenv(w, eq + 1, 1) == -1)
				init_fatal("-a %s: setenv %s: %s", path, w,
				    strerror(errno));
			continue;
		}
		if (n == INIT_ARGV_WORDS)
			init_fatal("-a %s: more than %d arguments", path,
			    INIT_ARGV_WORDS);
		av[n++] = w;
	}
	if (n == 0 || av[0][0] == '\0')
		init_fatal("-a %s: names no program", path);
	av[n] = NULL;
	return av;
}

/*
 * A pool entry is created at launchd-sbx's background niceness (10), and
 * launchd-sbx has its init -- this process, alone -- set back to 0 once
 * the entry is started.  The warm interpreter would inherit whichever it
 * was forked under, and run the assigned script at 10 (about a tenth of
 * a busy CPU's share) if it came first: wait for the renice, a few
 * milliseconds, before forking it; after INIT_RENICE_MS it is started as
 * it is.
 */
static void
init_warm_wait(void)
{
	struct timespec	 ms = { 0, 1000000 };

	for (int i = 0; i < INIT_RENICE_MS; i++) {
		errno = 0;
		if (getpriority(PRIO_PROCESS, 0) <= 0 || errno != 0)
			return;
		nanosleep(&ms, NULL);
	}
	init_debug("warm: still at niceness %d", getpriority(PRIO_PROCESS, 0));
}

/* -m: dotted Python module names, comma-separated, 255 bytes at most. */
static bool
init_mods_ok(const char *s)
{
	bool	 start = true;

	if (*s == '\0' || strlen(s) > 255)
		return false;
	for (; *s != '\0'; s++) {
		if (*s == ',' || *s == '.') {
			if (start)
				return false;
			start = true;
			continue;
		}
		if (!(*s == '_' || (*s >= 'a' && *s <= 'z') ||
		    (*s >= 'A' && *s <= 'Z') || (!start && *s >= '0' &&
		    *s <= '9')))
			return false;
		start = false;
	}
	return !start;
}

/*
 * Start the warm interpreter: the environment a spawned program gets
 * (proxy variables; the CA's come with the assignment, the CA file does
 * not exist yet), reading its assignment from a pipe.  -1 when it cannot
 * be started: the program is then started cold.
 */
static pid_t
init_warm_start(const char *interp, const char *mods, int *wfd)
{
	char	 fdarg[16], *av[6];
	int	 p[2];
	pid_t	 pid;

	if (pipe2(p, O_CLOEXEC) == -1) {
		init_log("warm %s: pipe: %s", interp, strerror(errno));
		return -1;
	}
	if ((pid = fork()) == -1) {
		init_log("warm %s: fork: %s", interp, strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		/* Its end, kept across exec; sbx-init's end closed. */
		close(p[1]);
		if (fcntl(p[0], F_SETFD, 0) == -1)
			_exit(INIT_EXIT_EXEC);
		snprintf(fdarg, sizeof(fdarg), "%d", p[0]);
		av[0] = (char *)interp;
		av[1] = (char *)"-c";
		av[2] = (char *)INIT_WARM_PY;
		av[3] = fdarg;
		av[4] = (char *)(mods != NULL ? mods : "");
		av[5] = NULL;
		signal(SIGPIPE, SIG_DFL);
		(void)setpgid(0, 0);	/* as init_spawn's */
		init_child_env();
		execvp(av[0], av);
		_exit(INIT_EXIT_EXEC);
	}
	close(p[0]);
	*wfd = p[1];
	init_debug("warm %s: pid %ld", interp, (long)pid);
	return pid;
}

static bool
init_write_all(int fd, const char *p, size_t len)
{
	ssize_t	 n;

	while (len > 0) {
		if ((n = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return false;
		}
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/*
 * The assignment: to the warm interpreter when the program is that
 * interpreter with a script and it is still there, else (after killing
 * it) as usual.  Returns the program's pid.
 */
static pid_t
init_warm_go(pid_t warm, int wfd, const char *interp, char **argv)
{
	extern char	**environ;
	char		 *buf = NULL, *p;
	bool		  ok;
	size_t		  k, len = 1;
	int		  status;

	ok = strcmp(argv[0], interp) == 0 && argv[1] != NULL &&
	    waitpid(warm, &status, WNOHANG) == 0;
	/* The whole environment a spawned program would get: ours (with
	 * the assignment's entries) and the proxy and CA variables, the CA
	 * existing by now.  The interpreter sets each.  In one write: under
	 * gVisor's ptrace platform each system call is a round trip. */
	if (ok) {
		init_child_env();
		for (char **e = environ; *e != NULL; e++)
			len += strlen(*e) + 1;
		for (k = 1; argv[k] != NULL; k++)
			len += strlen(argv[k]) + 1;
		ok = (buf = malloc(len)) != NULL;
	}
	if (ok) {
		p = buf;
		for (char **e = environ; *e != NULL; e++)
			p = stpcpy(p, *e) + 1;
		*p++ = '\0';
		for (k = 1; argv[k] != NULL; k++)
			p = stpcpy(p, argv[k]) + 1;
		ok = init_write_all(wfd, buf, len);
		free(buf);
	}
	close(wfd);
	if (ok) {
		init_debug("warm %s (pid %ld) runs %s", interp, (long)warm,
		    argv[1]);
		return warm;
	}
	/* Not for it, or it died, or half an assignment went down: it
	 * must not run.  Start the program cold. */
	(void)kill(warm, SIGKILL);
	(void)waitpid(warm, &status, 0);
	return init_spawn(argv);
}

/* The shell's convention: the exit code, or 128 + the killing signal. */
static int
init_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return INIT_EXIT_INTERNAL;
}

/* Accept what is waiting and pair each connection with the egress socket. */
static void
init_accept(int lfd)
{
	struct init_relay	*r;
	int			 fd, i, one = 1;

	for (;;) {
		for (i = 0; i < init_maxrelays; i++)
			if (init_relays[i].r_tcp == -1)
				break;
		if (i == init_maxrelays)
			return;
		fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				init_accept_paused = true;
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR && errno != ECONNABORTED)
				init_log("accept: %s", strerror(errno));
			return;
		}
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		if (init_ho != -1 && init_handoff(fd))
			continue;
		r = &init_relays[i];
		memset(r, 0, sizeof(*r));
		r->r_tcp = fd;
		r->r_unx = -1;
		init_nrelays++;
		init_npending++;
		r->r_deadline = init_now_ms() + INIT_CONNECT_MS;
		/*
		 * Buffers are mapped per relay and unmapped on close, so
		 * memory (and address space, which rlimits may cap) follows
		 * the relays in use rather than the cap.
		 */
		r->r_mem = mmap(NULL, 2 * INIT_BUFSZ, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (r->r_mem == MAP_FAILED) {
			init_log("mmap relay buffers: %s", strerror(errno));
			r->r_mem = NULL;
			init_relay_close(r, true);
		} else if (!init_relay_connect(r))
			init_relay_close(r, true);
	}
}

/*
 * Offer egressd the handoff on a connection of its own.  The program does
 * not run yet, so blocking here for the answer costs it nothing; any
 * failure or a "no" means relaying, as before.
 */
static void
init_handoff_open(void)
{
	struct sockaddr_un	 sun;
	struct pollfd		 pfd;
	unsigned char		 b = HANDOFF_HELLO;
	int			 fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, init_sockpath, strlen(init_sockpath));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
	    send(fd, &b, 1, MSG_NOSIGNAL) != 1)
		goto relay;
	pfd.fd = fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, INIT_HELLO_MS) != 1 || recv(fd, &b, 1, 0) != 1 ||
	    b != HANDOFF_YES)
		goto relay;
	if (fcntl(fd, F_SETFL, O_NONBLOCK) == -1)
		goto relay;
	init_ho = fd;
	init_debug("egressd takes the connections: handing them over");
	return;
relay:
	init_debug("no handoff: relaying connections");
	close(fd);
}

/*
 * Hand one accepted connection to egressd and close our copy: true if
 * egressd has it.  A full handoff socket relays this one connection; a
 * broken one (egressd closed it) relays every one from now on.
 */
static bool
init_handoff(int fd)
{
	union {
		struct cmsghdr	 h;
		char		 buf[CMSG_SPACE(sizeof(int))];
	}		 cm;
	struct msghdr	 msg;
	struct cmsghdr	*cmsg;
	struct iovec	 iov;
	unsigned char	 b = HANDOFF_CONN;

	memset(&msg, 0, sizeof(msg));
	memset(&cm, 0, sizeof(cm));
	iov.iov_base = &b;
	iov.iov_len = 1;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cm.buf;
	msg.msg_controllen = sizeof(cm.buf);
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	if (sendmsg(init_ho, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
		close(fd);
		return true;
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		init_debug("handoff: %s: relaying from now on",
		    strerror(errno));
		close(init_ho);
		init_ho = -1;
	}
	return false;
}

/*
 * Connect a relay to the egress socket without blocking PID 1.  A Unix
 * stream connect completes at once or fails; EAGAIN means the egress
 * proxy's backlog is full, which a burst of connections can cause, so
 * the relay waits and tries again until its deadline.  Returns false
 * when the relay must be dropped: no egress socket, refused, or waited
 * too long.
 */
static bool
init_relay_connect(struct init_relay *r)
{
	struct sockaddr_un	 sun;
	int			 fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, init_sockpath, strlen(init_sockpath));

	fd = socket(init_egress_tcp ? AF_INET : AF_UNIX,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		init_log("socket: %s", strerror(errno));
		return false;
	}
	/* A TCP connect completes later: the relay's first write waits
	 * for it (EPOLLOUT), and a refused one ends the relay with a reset
	 * like a failed Unix connect. */
	if (init_egress_tcp ? connect(fd, (struct sockaddr *)&init_egress_in,
	    sizeof(init_egress_in)) == -1 && errno != EINPROGRESS :
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		close(fd);
		if (errno == EAGAIN && init_now_ms() < r->r_deadline)
			return true;
		init_debug("connect %s: %s", init_sockpath, strerror(errno));
		return false;
	}
	r->r_unx = fd;
	init_npending--;
	return init_relay_arm(r);
}

/* "A.B.C.D:PORT" into init_egress_in. */
static bool
init_parse_tcp(const char *s)
{
	char		 addr[INET_ADDRSTRLEN];
	const char	*colon = strrchr(s, ':');
	char		*end;
	long		 port;

	if (colon == NULL || (size_t)(colon - s) >= sizeof(addr))
		return false;
	memcpy(addr, s, (size_t)(colon - s));
	addr[colon - s] = '\0';
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || end == colon + 1 || port < 1 ||
	    port > 65535)
		return false;
	memset(&init_egress_in, 0, sizeof(init_egress_in));
	init_egress_in.sin_family = AF_INET;
	init_egress_in.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, addr, &init_egress_in.sin_addr) != 1)
		return false;
	init_egress_tcp = true;
	return true;
}

/*
 * Free a relay's slot.  A client we could not connect gets a reset, which
 * tells it at once that the proxy failed rather than answered nothing.
 */
static void
init_relay_close(struct init_relay *r, bool reset)
{
	struct linger	 lg = { 1, 0 };

	if (reset)
		(void)setsockopt(r->r_tcp, SOL_SOCKET, SO_LINGER, &lg,
		    sizeof(lg));
	/*
	 * Closing leaves the epoll set too: no other descriptor refers to
	 * these sockets (the child was forked before any relay existed and
	 * every socket is close-on-exec), so no EPOLL_CTL_DEL is needed.
	 */
	close(r->r_tcp);
	if (r->r_unx != -1)
		close(r->r_unx);
	else
		init_npending--;
	init_nrelays--;
	r->r_tev = r->r_uev = 0;
	if (r->r_mem != NULL)
		munmap(r->r_mem, 2 * INIT_BUFSZ);
	r->r_mem = NULL;
	r->r_tcp = r->r_unx = -1;
}

/*
 * Bring a connected relay's two sockets in the epoll set in line with
 * what it waits for: room in a buffer and no EOF yet means reading, data
 * not yet delivered means writing.  A socket it waits for nothing from
 * leaves the set, because epoll reports a hung-up peer even for no
 * events, at once and forever.  Returns false when the set cannot be
 * changed; the relay must then go.
 */
static bool
init_relay_arm(struct init_relay *r)
{
	uint64_t	 slot = (uint64_t)(r - init_relays) << 1;
	uint32_t	 ev;

	ev = 0;
	if (!r->r_up.b_eof && r->r_up.b_len < INIT_BUFSZ)
		ev |= EPOLLIN;
	if (r->r_down.b_off < r->r_down.b_len)
		ev |= EPOLLOUT;
	if (!init_epoll_set(r->r_tcp, slot, ev, &r->r_tev)) {
		init_log("epoll_ctl relay: %s", strerror(errno));
		return false;
	}
	ev = 0;
	if (!r->r_down.b_eof && r->r_down.b_len < INIT_BUFSZ)
		ev |= EPOLLIN;
	if (r->r_up.b_off < r->r_up.b_len)
		ev |= EPOLLOUT;
	if (!init_epoll_set(r->r_unx, slot | 1, ev, &r->r_uev)) {
		init_log("epoll_ctl relay: %s", strerror(errno));
		return false;
	}
	return true;
}

/*
 * Wait for events on fd, none meaning out of the set; *cur holds what it
 * is registered for now, so the steady state costs no system call.
 */
static bool
init_epoll_set(int fd, uint64_t tag, uint32_t want, uint32_t *cur)
{
	struct epoll_event	 e;
	int			 op;

	if (want == *cur)
		return true;
	if (*cur == 0)
		op = EPOLL_CTL_ADD;
	else if (want == 0)
		op = EPOLL_CTL_DEL;
	else
		op = EPOLL_CTL_MOD;
	memset(&e, 0, sizeof(e));
	e.events = want;
	e.data.u64 = tag;
	if (epoll_ctl(init_epfd, op, fd, &e) == -1)
		return false;
	*cur = want;
	return true;
}

static uint64_t
init_now_ms(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Move what can move in both directions.  Returns false when the relay is
 * finished: both sides sent EOF and everything was delivered, or a socket
 * failed.
 */
static bool
init_relay_io(struct init_relay *r, uint32_t tev, uint32_t uev)
{
	if (!init_pump(r->r_tcp, r->r_unx, &r->r_up, r->r_mem, tev))
		return false;
	if (!init_pump(r->r_unx, r->r_tcp, &r->r_down, r->r_mem + INIT_BUFSZ,
	    uev))
		return false;
	return !(r->r_up.b_shut && r->r_down.b_shut);
}

/*
 * One direction: read from src when epoll said so and there is room, then
 * write to dst whenever there is data (a full socket just says EAGAIN, and
 * trying at once saves a wakeup per chunk), and once src sent EOF and
 * the buffer is empty pass the EOF on with shutdown(SHUT_WR), keeping the
 * other direction open.
 */
static bool
init_pump(int src, int dst, struct init_buf *b, unsigned char *buf,
    uint32_t sev)
{
	ssize_t	 n;

	if (!b->b_eof && b->b_len < INIT_BUFSZ &&
	    (sev & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
		n = recv(src, buf + b->b_len, INIT_BUFSZ - b->b_len, 0);
		if (n == 0)
			b->b_eof = true;
		else if (n > 0)
			b->b_len += (size_t)n;
		else if (errno != EAGAIN && errno != EWOULDBLOCK &&
		    errno != EINTR)
			return false;
	}
	if (b->b_off < b->b_len) {
		n = send(dst, buf + b->b_off, b->b_len - b->b_off,
		    MSG_NOSIGNAL);
		if (n > 0)
			b->b_off += (size_t)n;
		else if (n == -1 && errno != EAGAIN && errno != EWOULDBLOCK &&
		    errno != EINTR)
			return false;
		if (b->b_off == b->b_len)
			b->b_off = b->b_len = 0;
	}
	if (b->b_eof && !b->b_shut && b->b_off == b->b_len) {
		if (shutdown(dst, SHUT_WR) == -1 && errno != ENOTCONN)
			return false;
		b->b_shut = true;
	}
	return true;
}

/*
 * The main child is gone: nothing it left behind may outlive it.  As PID 1
 * of the sandbox's pid namespace kill(-1) reaches every other process in
 * it; outside one (tests) kill(-1) would hit the whole uid, so the
 * subreaper walks its own children instead.  Then reap until none is left.
 */
static void
init_kill_rest(bool pid1)
{
	int	 status;

	for (;;) {
		if (pid1)
			(void)kill(-1, SIGKILL);
		else
			(void)init_kill_children();
		if (waitpid(-1, &status, 0) == -1 && errno == ECHILD)
			break;
	}
}

/*
 * Kill every process whose parent is sbx-init, found in /proc.  Their own
 * children are orphaned to us, the subreaper, and met on the next round.
 */
static int
init_kill_children(void)
{
	DIR		*d;
	struct dirent	*de;
	char		 path[sizeof(de->d_name) + 16], buf[512], *p;
	long		 ppid, self = (long)getpid();
	ssize_t		 n;
	int		 fd, killed = 0;

	if ((d = opendir("/proc")) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		/* "pid (comm) state ppid": comm may hold spaces and ')'. */
		if ((p = strrchr(buf, ')')) == NULL ||
		    sscanf(p + 1, " %*c %ld", &ppid) != 1 || ppid != self)
			continue;
		if (kill((pid_t)atol(de->d_name), SIGKILL) == 0)
			killed++;
	}
	closedir(d);
	return killed;
}
