/*
 * mon_client.c: the launcher's side of the root monitor (monitor.h), as
 * OpenSSH's monitor_wrap.c is the unprivileged side of its monitor.  It
 * starts sbx-monitor while the launcher is still root, with the
 * configuration in its argument vector and one end of a SOCK_SEQPACKET
 * socketpair, and waits for its MON_READY (the monitor reaps whatever a
 * dead instance left first).  After that each request is one synchronous
 * call (mon_call and the mon_* wrappers): the request, and whatever
 * descriptors it carries, goes out, and the answer is read; a MON_EXIT
 * met on the way -- a runtime command or a container's init has ended --
 * is queued, and the queue is delivered from the event loop through the
 * hook main() sets (ld->child_exited), never from inside a call, so no
 * layer above sees an exit arrive in the middle of its own request.
 * MON_EXIT events that come on their own arrive through the socket's
 * event.  mon_wait_exit() waits for one pid's exit where the caller must
 * (shutdown, a synchronous delete).
 *
 * The monitor is an internal peer: a packet it sends that is not exactly
 * what monitor.h says, its socket's end or error, or its exit, and the
 * launcher exits (fail closed; it is restarted, and the new monitor reaps
 * every container the old one left).  It calls nothing above it by name.
 */
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "name.h"
#include "util.h"
#include "launchd-sbx/launchd.h"
#include "launchd-sbx/microvm.h"
#include "launchd-sbx/monitor.h"

#define MON_READY_SECONDS	120	/* start-up reaping runs runtimes */
#define MON_ANSWER_SECONDS	60	/* one request's answer */
#define MON_STOP_SECONDS	30	/* its cleanup at shutdown */
#define MON_ARGV_MAX		(32 + 4 * LAUNCHD_NTIERS * 32)

/* The largest packet the monitor sends. */
union mon_body {
	struct mon_ok	 ok;
	struct mon_err	 err;
	struct mon_exit	 ex;
};

struct mon_pkt {
	struct mon_hdr	 h;
	union mon_body	 b;
};

/* ---- the packets ---- */

static size_t
mon_answer_size(uint32_t type)
{
	switch (type) {
	case MON_READY:
		return 0;
	case MON_OK:
		return sizeof(struct mon_ok);
	case MON_ERR:
		return sizeof(struct mon_err);
	case MON_EXIT:
		return sizeof(struct mon_exit);
	default:
		return (size_t)-1;
	}
}

/*
 * One packet, checked against monitor.h.  1 with *p filled (and *fd, the
 * descriptor that came with it, or -1); 0 when none is waiting (flags has
 * MSG_DONTWAIT).  The socket's end or a damaged packet is fatal.
 */
static int
mon_recv(struct launchd *ld, int flags, struct mon_pkt *p, int *fd)
{
	union {
		struct cmsghdr	 hdr;
		char		 buf[CMSG_SPACE(sizeof(int) * MON_FDS_MAX)];
	}		 cm;
	struct msghdr	 msg;
	struct iovec	 iov;
	struct cmsghdr	*c;
	ssize_t		 n;
	int		 nfd = 0;

	*fd = -1;
	memset(p, 0, sizeof(*p));
	memset(&msg, 0, sizeof(msg));
	iov.iov_base = p;
	iov.iov_len = sizeof(*p);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cm.buf;
	msg.msg_controllen = sizeof(cm.buf);
	while ((n = recvmsg(ld->mon_fd, &msg, flags | MSG_CMSG_CLOEXEC)) ==
	    -1 && errno == EINTR)
		;
	if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n == -1)
		fatal("sbx-monitor's socket");
	if (n == 0)
		fatalx("sbx-monitor has gone; exiting (the next instance's "
		    "monitor reaps what is left)");
	for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfd = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < nfd; i++) {
			int	 f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
			if (i == 0)
				*fd = f;
			else
				close(f);
		}
	}
	if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    (size_t)n < sizeof(p->h) || p->h.magic != MON_MAGIC ||
	    p->h.pad != 0 || p->h.len != (size_t)n - sizeof(p->h) ||
	    p->h.len != mon_answer_size(p->h.type) || nfd > 1 ||
	    (nfd == 1 && p->h.type != MON_OK))
		fatalx("sbx-monitor sent a damaged packet (type %u, %zd "
		    "bytes, %d descriptors)", p->h.type, n, nfd);
	return 1;
}

static void
mon_send(struct launchd *ld, uint32_t type, const void *body, size_t len,
    const int *fds, int nfds)
{
	union {
		struct cmsghdr	 hdr;
		char		 buf[CMSG_SPACE(sizeof(int) * MON_FDS_MAX)];
	}		 cm;
	struct mon_hdr	 h;
	struct msghdr	 msg;
	struct iovec	 iov[2];
	struct cmsghdr	*c;
	ssize_t		 n;

	memset(&h, 0, sizeof(h));
	h.magic = MON_MAGIC;
	h.type = type;
	h.len = (uint32_t)len;
	memset(&msg, 0, sizeof(msg));
	iov[0].iov_base = &h;
	iov[0].iov_len = sizeof(h);
	iov[1].iov_base = (void *)body;
	iov[1].iov_len = len;
	msg.msg_iov = iov;
	msg.msg_iovlen = 2;
	if (nfds > 0) {
		memset(&cm, 0, sizeof(cm));
		msg.msg_control = cm.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	while ((n = sendmsg(ld->mon_fd, &msg, MSG_NOSIGNAL)) == -1 &&
	    errno == EINTR)
		;
	if (n != (ssize_t)(sizeof(h) + len))
		fatal("sbx-monitor's socket: sending request %u", type);
}

/* ---- exits ---- */

static void
mon_queue(struct launchd *ld, const struct mon_exit *ex)
{
	if (ld->mon_nq == ld->mon_qcap) {
		ld->mon_qcap = ld->mon_qcap > 0 ? 2 * ld->mon_qcap : 16;
		ld->mon_q = xreallocarray(ld->mon_q, ld->mon_qcap,
		    sizeof(*ld->mon_q));
	}
	ld->mon_q[ld->mon_nq++] = *ex;
}

/* Take pid's exit out of the queue: 1 with *status, or 0. */
static int
mon_unqueue(struct launchd *ld, pid_t pid, int *status)
{
	for (size_t i = 0; i < ld->mon_nq; i++) {
		if (ld->mon_q[i].pid != pid)
			continue;
		*status = ld->mon_q[i].status;
		memmove(&ld->mon_q[i], &ld->mon_q[i + 1],
		    (ld->mon_nq - i - 1) * sizeof(*ld->mon_q));
		ld->mon_nq--;
		return 1;
	}
	return 0;
}

/* Every exit queued, oldest first, through the hook; an exit queued by
 * a request the hook makes is delivered in the same turn. */
static void
mon_deliver(struct launchd *ld)
{
	struct mon_exit	 ex;

	while (ld->mon_nq > 0) {
		ex = ld->mon_q[0];
		memmove(&ld->mon_q[0], &ld->mon_q[1],
		    (ld->mon_nq - 1) * sizeof(*ld->mon_q));
		ld->mon_nq--;
		if (ld->child_exited != NULL)
			ld->child_exited(ld, ex.pid, ex.status);
	}
}

/* What is waiting on the socket now, queued; an answer is fatal (no
 * request is outstanding). */
static void
mon_drain(struct launchd *ld)
{
	struct mon_pkt	 p;
	int		 fd;

	while (mon_recv(ld, MSG_DONTWAIT, &p, &fd) == 1) {
		if (p.h.type != MON_EXIT)
			fatalx("sbx-monitor answered a request never made "
			    "(type %u)", p.h.type);
		mon_queue(ld, &p.b.ex);
	}
}

static void
mon_read_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mon_drain(arg);
	mon_deliver(arg);
}

static void
mon_queue_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	mon_deliver(arg);
}

/* ---- requests ---- */

/*
 * One request and its answer.  0 on MON_OK (*value, and *fdout when the
 * answer carries a descriptor, which only HANDOVER's does), or -1 on
 * MON_ERR with errno and err set to what the monitor said.  Exits met on
 * the way are delivered from the loop, after this returns.
 */
int
mon_call(struct launchd *ld, uint32_t type, const void *body, size_t len,
    const int *fds, int nfds, int64_t *value, int *fdout, char *err,
    size_t errlen)
{
	struct mon_pkt	 p;
	struct pollfd	 pfd;
	uint64_t	 until;
	int		 fd, ms;

	if (fdout != NULL)
		*fdout = -1;
	if (ld->mon_fd == -1)
		fatalx("sbx-monitor is not running");
	mon_send(ld, type, body, len, fds, nfds);
	until = mono_ns() + (uint64_t)MON_ANSWER_SECONDS * 1000000000ULL;
	for (;;) {
		pfd.fd = ld->mon_fd;
		pfd.events = POLLIN;
		ms = (int)((until - mono_ns()) / 1000000);
		if (mono_ns() >= until || (poll(&pfd, 1, ms) == 0))
			fatalx("sbx-monitor did not answer request %u in %d s",
			    type, MON_ANSWER_SECONDS);
		if (mon_recv(ld, MSG_DONTWAIT, &p, &fd) == 0)
			continue;
		if (p.h.type == MON_EXIT) {
			mon_queue(ld, &p.b.ex);
			continue;
		}
		break;
	}
	/* Whatever came meanwhile, from the loop. */
	if (ld->mon_nq > 0 && ld->mon_qev != NULL)
		event_active(ld->mon_qev, EV_TIMEOUT, 0);
	if (fd != -1 && fdout == NULL)
		fatalx("sbx-monitor answered request %u with a descriptor",
		    type);
	if (p.h.type == MON_ERR) {
		p.b.err.msg[sizeof(p.b.err.msg) - 1] = '\0';
		errf(err, errlen, "%s", p.b.err.msg);
		errno = p.b.err.err > 0 ? p.b.err.err : EPERM;
		return -1;
	}
	if (p.h.type != MON_OK)
		fatalx("sbx-monitor answered request %u with type %u", type,
		    p.h.type);
	if (value != NULL)
		*value = p.b.ok.value;
	if (fdout != NULL)
		*fdout = fd;
	return 0;
}

/* A container id as the wire has it; -1 (EINVAL) when it is none. */
static int
mon_id(char out[MON_ID_MAX + 1], const char *id)
{
	size_t	 n = strlen(id);

	memset(out, 0, MON_ID_MAX + 1);
	if (n == 0 || n > MON_ID_MAX || id[0] == '.' || !name_ok(id) ||
	    strchr(id, ':') != NULL || strchr(id, '@') != NULL) {
		errno = EINVAL;
		return -1;
	}
	memcpy(out, id, n);
	return 0;
}

static int
mon_bad_id(const char *id, char *err, size_t errlen)
{
	errf(err, errlen, "\"%.80s\" is not a container id", id);
	errno = EINVAL;
	return -1;
}

int
mon_client_stage(struct launchd *ld, const char *id, uint32_t scratch_mb,
    gid_t gid, char *err, size_t errlen)
{
	struct mon_stage	 s;

	memset(&s, 0, sizeof(s));
	if (mon_id(s.id, id) == -1)
		return mon_bad_id(id, err, errlen);
	if (scratch_mb < 1 || scratch_mb > 1048576) {
		bufprintf(err, errlen, "scratch_mb %u is outside 1..1048576",
		    scratch_mb);
		errno = EINVAL;
		return -1;
	}
	s.scratch_mb = scratch_mb;
	s.gid = (uint32_t)gid;
	return mon_call(ld, MON_STAGE, &s, sizeof(s), NULL, 0, NULL, NULL,
	    err, errlen);
}

/* SEAL, CG_REMOVE, UNSTAGE: an id alone. */
static int
mon_id_call(struct launchd *ld, uint32_t type, const char *id, char *err,
    size_t errlen)
{
	struct mon_id	 m;

	if (mon_id(m.id, id) == -1)
		return mon_bad_id(id, err, errlen);
	return mon_call(ld, type, &m, sizeof(m), NULL, 0, NULL, NULL, err,
	    errlen);
}

int
mon_client_seal(struct launchd *ld, const char *id, char *err, size_t errlen)
{
	return mon_id_call(ld, MON_SEAL, id, err, errlen);
}

int
mon_client_cg_remove(struct launchd *ld, const char *id)
{
	char	 err[MON_ERR_MAX];

	if (mon_id_call(ld, MON_CG_REMOVE, id, err, sizeof(err)) == -1) {
		log_warnx("container %s: removing its cgroups: %s", id, err);
		return -1;
	}
	return 0;
}

int
mon_client_unstage(struct launchd *ld, const char *id)
{
	char	 err[MON_ERR_MAX];

	if (mon_id_call(ld, MON_UNSTAGE, id, err, sizeof(err)) == -1) {
		log_warnx("container %s: removing its staging: %s", id, err);
		return -1;
	}
	return 0;
}

int
mon_client_spec(struct launchd *ld, const struct mon_spec *s, char *err,
    size_t errlen)
{
	return mon_call(ld, MON_SPEC, s, sizeof(*s), NULL, 0, NULL, NULL, err,
	    errlen);
}

pid_t
mon_client_cmd(struct launchd *ld, const char *id, int tier, int verb, int nice,
    int fd1, int fd2, char *err, size_t errlen)
{
	struct mon_cmd	 c;
	int		 fds[2] = { fd1, fd2 };
	int64_t		 pid;

	memset(&c, 0, sizeof(c));
	if (mon_id(c.id, id) == -1)
		return mon_bad_id(id, err, errlen);
	c.tier = (uint32_t)tier;
	c.verb = (uint32_t)verb;
	c.nice = nice;
	if (mon_call(ld, MON_CMD, &c, sizeof(c), fds,
	    (verb == MON_CREATE || verb == MON_RUN) && fd1 != -1 && fd2 != -1 ?
	    2 : 0, &pid, NULL, err, errlen) == -1)
		return -1;
	if (pid <= 1 || pid > INT32_MAX)
		fatalx("sbx-monitor answered a command with pid %lld",
		    (long long)pid);
	return (pid_t)pid;
}

/* SIGKILL and RENICE: not for a pid whose exit has come already. */
static int
mon_pid_call(struct launchd *ld, uint32_t type, pid_t pid)
{
	struct mon_pid	 m;
	char		 err[MON_ERR_MAX];

	if (pid <= 1)
		return 0;
	mon_drain(ld);
	for (size_t i = 0; i < ld->mon_nq; i++)
		if (ld->mon_q[i].pid == pid) {
			if (ld->mon_qev != NULL)
				event_active(ld->mon_qev, EV_TIMEOUT, 0);
			errno = ESRCH;
			return -1;
		}
	memset(&m, 0, sizeof(m));
	m.pid = (int32_t)pid;
	if (mon_call(ld, type, &m, sizeof(m), NULL, 0, NULL, NULL, err,
	    sizeof(err)) == -1) {
		if (errno != ESRCH)
			log_warnx("pid %ld: %s: %s", (long)pid,
			    type == MON_SIGKILL ? "SIGKILL" : "renice", err);
		return -1;
	}
	return 0;
}

int
mon_client_sigkill(struct launchd *ld, pid_t pid)
{
	return mon_pid_call(ld, MON_SIGKILL, pid);
}

int
mon_client_renice(struct launchd *ld, pid_t pid)
{
	return mon_pid_call(ld, MON_RENICE, pid);
}

/* What HANDOVER takes as a name: a relative path with no ".." in it. */
static int
mon_relpath(const char *s)
{
	return s[0] != '\0' && s[0] != '/' && strlen(s) <= MON_OUTPUT_MAX &&
	    !path_has_dotdot(s);
}

int
mon_client_handover(struct launchd *ld, const char *id, char *const *names,
    size_t n, char *err, size_t errlen)
{
	struct mon_handover	*h;
	size_t			 used = 0, len;
	int			 fd = -1, e;

	h = xcalloc(1, sizeof(*h));
	if (mon_id(h->id, id) == -1) {
		free(h);
		return mon_bad_id(id, err, errlen);
	}
	/* A name that does not fit is left as the sandbox wrote it: gated
	 * then drops it with its own reason (handover.c's rule). */
	for (size_t i = 0; i < n && used < MON_OUTPUTS_MAX; i++) {
		if (names[i] == NULL || !mon_relpath(names[i])) {
			log_debug("output %.64s: not handed over", names[i] !=
			    NULL ? names[i] : "");
			continue;
		}
		len = strlen(names[i]);
		memcpy(h->names[used++], names[i], len);
	}
	if (n > MON_OUTPUTS_MAX)
		log_warnx("container %s: outputs past the first %d are not "
		    "handed over", id, MON_OUTPUTS_MAX);
	h->n = (uint32_t)used;
	if (mon_call(ld, MON_HANDOVER, h, sizeof(*h), NULL, 0, NULL, &fd, err,
	    errlen) == 0 && fd == -1)
		fatalx("sbx-monitor answered HANDOVER without a descriptor");
	e = errno;	/* EBUSY: a process of the container still runs */
	free(h);
	errno = e;
	return fd;
}

int
mon_wait_exit(struct launchd *ld, pid_t pid, int seconds)
{
	struct mon_pkt	 p;
	struct pollfd	 pfd;
	uint64_t	 until;
	int		 st, fd;

	if (pid <= 1)
		return -1;
	until = mono_ns() + (uint64_t)seconds * 1000000000ULL;
	for (;;) {
		if (mon_unqueue(ld, pid, &st))
			break;
		pfd.fd = ld->mon_fd;
		pfd.events = POLLIN;
		if (mono_ns() >= until || poll(&pfd, 1,
		    (int)((until - mono_ns()) / 1000000)) == 0)
			return -1;
		while (mon_recv(ld, MSG_DONTWAIT, &p, &fd) == 1) {
			if (p.h.type != MON_EXIT)
				fatalx("sbx-monitor answered a request never "
				    "made (type %u)", p.h.type);
			mon_queue(ld, &p.b.ex);
		}
	}
	if (ld->mon_nq > 0 && ld->mon_qev != NULL)
		event_active(ld->mon_qev, EV_TIMEOUT, 0);
	return st;
}

/* ---- start and stop ---- */

static void
mon_add(char **av, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
mon_add(char **av, size_t *n, const char *fmt, ...)
{
	va_list	 ap;

	if (*n >= MON_ARGV_MAX - 1)
		fatalx("sbx-monitor: too many arguments");
	va_start(ap, fmt);
	if (vasprintf(&av[*n], fmt, ap) == -1)
		fatal("vasprintf");
	va_end(ap);
	(*n)++;
	av[*n] = NULL;
}

/* sbx-monitor: the configuration's `monitor`, or next to this binary. */
static char *
mon_path(const struct launchd *ld)
{
	char	 self[PATH_MAX], *slash, *p;
	ssize_t	 n;

	if (ld->conf->monitor != NULL)
		return xstrdup(ld->conf->monitor);
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) == -1)
		fatal("readlink /proc/self/exe");
	self[n] = '\0';
	if ((slash = strrchr(self, '/')) != NULL)
		*slash = '\0';
	xasprintf(&p, "%s/%s", self, LAUNCHD_MONITOR);
	return p;
}

/* The directory of path (the monitor's: sbx-vmrt is installed beside it). */
static const char *
mon_dir(const char *path)
{
	static char	 dir[PATH_MAX];
	char		*slash;

	snprintf(dir, sizeof(dir), "%s", path);
	if ((slash = strrchr(dir, '/')) != NULL)
		*slash = '\0';
	return dir;
}

static void
mon_argv(const struct launchd *ld, const char *path, int fd, char **av)
{
	const struct launchd_conf	*c = ld->conf;
	size_t				 n = 0;
	uid_t				 uid = c->common.user != NULL ?
					    c->common.uid : geteuid();
	gid_t				 gid = c->common.user != NULL ?
					    c->common.gid : getegid();

	mon_add(av, &n, "%s", path);
	mon_add(av, &n, "-s");
	mon_add(av, &n, "%d", fd);
	mon_add(av, &n, "-r");
	mon_add(av, &n, "%s", c->run_dir);
	mon_add(av, &n, "-i");
	mon_add(av, &n, "%s/cache", c->common.state_dir);
	mon_add(av, &n, "-I");
	mon_add(av, &n, "%s", c->init);
	mon_add(av, &n, "-c");
	mon_add(av, &n, "%s", c->cgroup_parent);
	mon_add(av, &n, "-u");
	mon_add(av, &n, "%lu:%lu", (unsigned long)uid, (unsigned long)gid);
	mon_add(av, &n, "-G");
	mon_add(av, &n, "%lu", (unsigned long)c->gate_uid);
	mon_add(av, &n, "-g");
	mon_add(av, &n, "%lu:%u", (unsigned long)c->sandbox_gid_first,
	    c->sandbox_gid_count);
	for (int t = 1; t < LAUNCHD_NTIERS; t++) {
		const struct launchd_runtime	*rt = &c->runtimes[t];

		if (rt->path == NULL)
			continue;
		mon_add(av, &n, "-t");
		if (t == SBX__V1__ISOLATION__ISOLATION_MICROVM) {
			/* QEMU through sbx-vmrt, next to the monitor. */
			mon_add(av, &n, "%d:%d:%s:%s/sbx-vmrt", t,
			    (int)rt->flavor, parse_tier_name(t), mon_dir(path));
			mon_add(av, &n, "-a");
			mon_add(av, &n, "%d:--qemu=%s", t, rt->path);
			mon_add(av, &n, "-a");
			mon_add(av, &n, "%d:--kernel=%s", t, rt->kernel);
			mon_add(av, &n, "-a");
			mon_add(av, &n, "%d:--initrd=%s", t, rt->initrd);
			mon_add(av, &n, "-a");
			mon_add(av, &n, "%d:--forwarder=%s", t, rt->fwd);
			mon_add(av, &n, "-a");
			mon_add(av, &n, "%d:--accel=%s", t,
			    microvm_accel_name(rt->accel));
			continue;
		}
		mon_add(av, &n, "%d:%d:%s:%s", t, (int)rt->flavor,
		    parse_tier_name(t), rt->path);
		for (size_t i = 0; i < rt->nargs; i++) {
			mon_add(av, &n, "-a");
			mon_add(av, &n, "%d:%s", t, rt->args[i]);
		}
	}
	if (ld->debug)
		mon_add(av, &n, "-d");
}

void
mon_client_start(struct launchd *ld)
{
	struct mon_pkt	 p;
	struct pollfd	 pfd;
	char		*av[MON_ARGV_MAX], *path;
	uint64_t	 until;
	sigset_t	 none;
	int		 sv[2], fd, st;
	pid_t		 pid;

	path = mon_path(ld);
	if (access(path, X_OK) == -1)
		fatal("monitor %s", path);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1)
		fatal("socketpair");
	av[0] = NULL;
	mon_argv(ld, path, sv[1], av);
	if ((pid = fork()) == -1)
		fatal("fork");
	if (pid == 0) {
		/* Its end survives the exec; nothing else of ours does.  A
		 * session of its own: a terminal's ^C is the launcher's to
		 * act on (it stops, and the monitor follows on EOF). */
		(void)setsid();
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		for (int s = 1; s < NSIG; s++)
			signal(s, SIG_DFL);
		if (fcntl(sv[1], F_SETFD, 0) == -1)
			_exit(127);
		if (sv[1] > 3)
			(void)close_range(3, (unsigned)sv[1] - 1, 0);
		(void)close_range((unsigned)sv[1] + 1, ~0U, 0);
		execv(path, av);
		_exit(127);
	}
	close(sv[1]);
	for (size_t i = 0; av[i] != NULL; i++)
		free(av[i]);
	ld->mon_fd = sv[0];
	ld->mon_pid = pid;
	log_debug("sbx-monitor %s started (pid %ld)", path, (long)pid);
	free(path);

	until = mono_ns() + (uint64_t)MON_READY_SECONDS * 1000000000ULL;
	for (;;) {
		pfd.fd = ld->mon_fd;
		pfd.events = POLLIN;
		if (mono_ns() >= until || poll(&pfd, 1,
		    (int)((until - mono_ns()) / 1000000)) == 0)
			fatalx("sbx-monitor was not ready in %d s",
			    MON_READY_SECONDS);
		if ((pfd.revents & (POLLHUP | POLLERR)) &&
		    !(pfd.revents & POLLIN)) {
			st = 0;
			(void)waitpid(pid, &st, 0);
			fatalx("sbx-monitor exited during its start (status "
			    "0x%x)", st);
		}
		if (mon_recv(ld, MSG_DONTWAIT, &p, &fd) == 0)
			continue;
		if (p.h.type == MON_READY)
			break;
		if (p.h.type != MON_EXIT)
			fatalx("sbx-monitor sent type %u before it was ready",
			    p.h.type);
	}
	mon_client_attach(ld, ld->mon_fd);
	log_info("sbx-monitor ready (pid %ld)", (long)pid);
}

void
mon_client_attach(struct launchd *ld, int fd)
{
	ld->mon_fd = fd;
	if ((ld->mon_ev = event_new(ld->base, ld->mon_fd, EV_READ | EV_PERSIST,
	    mon_read_cb, ld)) == NULL || event_add(ld->mon_ev, NULL) == -1 ||
	    (ld->mon_qev = event_new(ld->base, -1, 0, mon_queue_cb,
	    ld)) == NULL)
		fatalx("cannot watch sbx-monitor's socket");
}

int
mon_client_reaped(struct launchd *ld, pid_t pid, int status)
{
	if (ld->mon_pid <= 0 || pid != ld->mon_pid)
		return 0;
	ld->mon_pid = 0;
	fatalx("sbx-monitor exited (status 0x%x); exiting", status);
}

void
mon_client_child(struct launchd *ld)
{
	if (ld->mon_fd != -1)
		close(ld->mon_fd);
	ld->mon_fd = -1;
}

void
mon_client_stop(struct launchd *ld)
{
	uint64_t	 until;
	int		 st;
	pid_t		 r;

	if (ld->mon_ev != NULL)
		event_free(ld->mon_ev);
	if (ld->mon_qev != NULL)
		event_free(ld->mon_qev);
	ld->mon_ev = ld->mon_qev = NULL;
	free(ld->mon_q);
	ld->mon_q = NULL;
	ld->mon_nq = ld->mon_qcap = 0;
	/* Its end of the socket: it deletes what is left and exits. */
	if (ld->mon_fd != -1)
		close(ld->mon_fd);
	ld->mon_fd = -1;
	if (ld->mon_pid <= 0)
		return;
	until = mono_ns() + (uint64_t)MON_STOP_SECONDS * 1000000000ULL;
	while ((r = waitpid(ld->mon_pid, &st, WNOHANG)) == 0 &&
	    mono_ns() < until)
		usleep(20000);
	if (r == ld->mon_pid && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		log_warnx("sbx-monitor exited with status 0x%x", st);
	else if (r == 0)
		log_warnx("sbx-monitor still runs after %d s",
		    MON_STOP_SECONDS);
	ld->mon_pid = 0;
}
