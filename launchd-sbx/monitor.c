/*
 * monitor.c: sbx-monitor, the root half of launchd-sbx (monitor.h is the
 * wire).  The launcher, root for that moment, starts it with one end of
 * a SOCK_SEQPACKET socketpair and drops its privileges; from then on this
 * process is the only one of launchd-sbx that keeps root, and it does
 * only what a fixed table of requests allows, the way OpenSSH's privsep
 * monitor does.
 *
 * Invariant: a request is acted on only if its packet is whole (no
 * truncation), its header right, its body exactly its type's size, its
 * descriptors exactly those its type takes, its id a container id, and
 * its id's slot in a state the table allows (once where once is the
 * rule).  Anything else is a launcher that is broken or compromised: the
 * monitor kills every child it has (runtime commands, container inits),
 * deletes every container and removes every staging directory and cgroup
 * it made, answers nothing and exits 2.  On EOF (or SIGTERM, SIGINT) it
 * does the same teardown and exits 0.  Failures of the system (a mount
 * refused, a runtime missing) are answers, MON_ERR, and it serves on.
 */
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "name.h"
#include "version.h"
#include "launchd-sbx/mon.h"

/* Bit n of a rule's fds: n descriptors are allowed. */
#define FDS_0		(1u << 0)
#define FDS_2		(1u << 2)

enum mon_idrule {
	ID_NONE,	/* no id: a pid */
	ID_NEW,		/* an id with no slot yet: STAGE */
	ID_SLOT,	/* the id of a staged slot */
};

/*
 * The requests: type (and verb, for CMD), exact body size, how many
 * descriptors, which id, the state bits the slot must have (need) and
 * must not have (forbid), and the bit success sets (once: forbid holds
 * it too).  SEAL and SPEC depend on the pool flag as well, which
 * mon_seal() and mon_spec() check.
 */
static const struct mon_rule {
	const char	*name;
	uint32_t	 type, verb;
	size_t		 size;
	unsigned	 fds;
	enum mon_idrule	 id;
	uint32_t	 need, forbid, once;
	mon_op		*fn;
} mon_rules[] = {
	{ "STAGE", MON_STAGE, 0, sizeof(struct mon_stage), FDS_0, ID_NEW,
	    0, 0, ST_STAGED, mon_stage },
	{ "SEAL", MON_SEAL, 0, sizeof(struct mon_id), FDS_0, ID_SLOT,
	    ST_STAGED, ST_SEALED | ST_HANDOVER, ST_SEALED, mon_seal },
	{ "SPEC", MON_SPEC, 0, sizeof(struct mon_spec), FDS_0, ID_SLOT,
	    ST_STAGED, ST_SPEC, ST_SPEC, mon_spec },
	{ "CREATE", MON_CMD, MON_CREATE, sizeof(struct mon_cmd),
	    FDS_0 | FDS_2, ID_SLOT, ST_SPEC, ST_CREATE, ST_CREATE, mon_cmd },
	{ "START", MON_CMD, MON_START, sizeof(struct mon_cmd), FDS_0,
	    ID_SLOT, ST_CREATE, ST_START, ST_START, mon_cmd },
	{ "RUN", MON_CMD, MON_RUN, sizeof(struct mon_cmd), FDS_0 | FDS_2,
	    ID_SLOT, ST_SPEC, ST_CREATE, ST_CREATE | ST_START, mon_cmd },
	{ "KILL", MON_CMD, MON_KILL, sizeof(struct mon_cmd), FDS_0, ID_SLOT,
	    ST_CREATE, 0, 0, mon_cmd },
	{ "DELETE", MON_CMD, MON_DELETE, sizeof(struct mon_cmd), FDS_0,
	    ID_SLOT, ST_CREATE, 0, 0, mon_cmd },
	{ "SIGKILL", MON_SIGKILL, 0, sizeof(struct mon_pid), FDS_0, ID_NONE,
	    0, 0, 0, mon_pid },
	{ "RENICE", MON_RENICE, 0, sizeof(struct mon_pid), FDS_0, ID_NONE,
	    0, 0, 0, mon_pid },
	{ "HANDOVER", MON_HANDOVER, 0, sizeof(struct mon_handover), FDS_0,
	    ID_SLOT, ST_CREATE | ST_DEAD, ST_HANDOVER, ST_HANDOVER,
	    mon_handover },
	{ "CG_REMOVE", MON_CG_REMOVE, 0, sizeof(struct mon_id), FDS_0,
	    ID_SLOT, ST_STAGED, 0, 0, mon_cg_remove },
	{ "UNSTAGE", MON_UNSTAGE, 0, sizeof(struct mon_id), FDS_0, ID_SLOT,
	    ST_STAGED, 0, 0, mon_unstage },
};
#define MON_NRULES	(sizeof(mon_rules) / sizeof(mon_rules[0]))

/* The largest request, and a byte more to tell a longer one. */
#define MON_PKT_MAX	(sizeof(struct mon_hdr) + sizeof(struct mon_handover))

/* On stdout for --help (exit 0), else on stderr (exit 2). */
static __attribute__((noreturn)) void
mon_usage_to(FILE *f, int status)
{
	fprintf(f, "usage: sbx-monitor -s fd -r run_dir -i cache_dir "
	    "-I init -c cgroup_parent\n\t-u uid:gid -G gate_uid -g first:count "
	    "[-t tier:flavor:name:path]...\n\t[-a tier:arg]... [-d]\n"
	    "       sbx-monitor --help | --version\n");
	if (status == 0)
		fprintf(f, "launchd-sbx starts it (as root, on a socketpair); "
		    "see launchd-sbx(8).\n");
	exit(status);
}

static __attribute__((noreturn)) void
mon_usage(void)
{
	mon_usage_to(stderr, 2);
}

/*
 * A decimal number in [min, max] at *s, ending at the end of the string
 * (rest NULL) or at a ':' (then *rest is what follows it).
 */
static uint64_t
mon_num(int opt, const char *s, const char **rest, uint64_t min,
    uint64_t max)
{
	uint64_t	 v = 0;
	const char	*p = s;

	for (; *p >= '0' && *p <= '9' && v <= max; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	if (p == s || v < min || v > max || (rest == NULL ? *p != '\0' :
	    *p != ':'))
		fatalx("-%c %s: want a number in %llu..%llu%s", opt, s,
		    (unsigned long long)min, (unsigned long long)max,
		    rest != NULL ? " and a ':'" : "");
	if (rest != NULL)
		*rest = p + 1;
	return v;
}

static const char *
mon_abs(int opt, const char *s)
{
	if (s[0] != '/' || strlen(s) >= 1024 || strpbrk(s, "\n\r") != NULL)
		fatalx("-%c %s: want an absolute path", opt, s);
	return s;
}

static void
mon_args(struct mon *m, int argc, char *argv[], const char **run,
    const char **cache, int *debug)
{
	static const char	 once[] = "sriIcuGg";
	const char		*rest, *p;
	uint64_t		 t;
	int			 ch, seen = 0;

	while ((ch = getopt(argc, argv, "s:r:i:I:c:u:G:g:t:a:d")) != -1) {
		/* Each of these once, and all of them. */
		if ((p = strchr(once, ch)) != NULL) {
			if (seen & (1 << (p - once)))
				fatalx("-%c given twice", ch);
			seen |= 1 << (p - once);
		}
		switch (ch) {
		case 's':
			m->sock = (int)mon_num(ch, optarg, NULL, 0, INT_MAX);
			break;
		case 'r':
			*run = mon_abs(ch, optarg);
			break;
		case 'i':
			*cache = mon_abs(ch, optarg);
			break;
		case 'I':
			m->init = mon_abs(ch, optarg);
			break;
		case 'c':
			if (!name_ok(optarg))
				fatalx("-c %s: want one cgroup name", optarg);
			m->cgparent = optarg;
			break;
		case 'u':
			m->uid = (uid_t)mon_num(ch, optarg, &rest, 0, INT32_MAX);
			m->gid = (gid_t)mon_num(ch, rest, NULL, 0, INT32_MAX);
			break;
		case 'G':
			m->gate_uid = (uid_t)mon_num(ch, optarg, NULL, 0,
			    INT32_MAX);
			break;
		case 'g':
			m->gid_first = (gid_t)mon_num(ch, optarg, &rest, 1,
			    INT32_MAX);
			m->gid_count = (uint32_t)mon_num(ch, rest, NULL, 1,
			    MON_SLOTS_MAX);
			if ((uint64_t)m->gid_first + m->gid_count - 1 > INT32_MAX)
				fatalx("-g %s: past %d", optarg, INT32_MAX);
			break;
		case 't':
			t = mon_num(ch, optarg, &rest, 1, MON_NTIERS - 1);
			if (m->tiers[t].path != NULL)
				fatalx("-t: tier %llu given twice",
				    (unsigned long long)t);
			m->tiers[t].flavor = (int)mon_num(ch, rest, &rest, 0, 1);
			if ((p = strchr(rest, ':')) == NULL)
				fatalx("-t %s: want tier:flavor:name:path",
				    optarg);
			*(char *)p = '\0';
			if (!name_ok(rest))
				fatalx("-t: bad state dir name \"%s\"", rest);
			m->tiers[t].name = rest;
			m->tiers[t].path = mon_abs(ch, p + 1);
			break;
		case 'a':
			t = mon_num(ch, optarg, &rest, 1, MON_NTIERS - 1);
			if (m->tiers[t].nargs == MON_ARGS_MAX)
				fatalx("-a: more than %d args for tier %llu",
				    MON_ARGS_MAX, (unsigned long long)t);
			m->tiers[t].args[m->tiers[t].nargs++] = rest;
			break;
		case 'd':
			*debug = 1;
			break;
		default:
			mon_usage();
		}
	}
	if (optind != argc || (seen & 0xff) != 0xff)
		mon_usage();
	for (t = 1; t < MON_NTIERS; t++)
		if (m->tiers[t].nargs > 0 && m->tiers[t].path == NULL)
			fatalx("-a: tier %llu is not configured (-t)",
			    (unsigned long long)t);
}

/*
 * The descriptors: the socket (AF_UNIX, SOCK_SEQPACKET), run_dir with its
 * runtime/ state directory, the image cache.  run_dir is root's and
 * written by root alone (the runtime reads bundles and keeps its state
 * there by path), and closed to other users: x-ID is 0711 and what SEAL
 * made is 0444, so run_dir is what keeps them from every execution's in/
 * and code/.  Its group, when it may enter, is the launcher's (or root).
 */
static void
mon_open(struct mon *m, const char *run, const char *cache)
{
	struct stat	 st;
	char		 proc[64];
	int		 v;
	socklen_t	 len = sizeof(v);
	ssize_t		 n;

	if (getsockopt(m->sock, SOL_SOCKET, SO_TYPE, &v, &len) == -1 ||
	    v != SOCK_SEQPACKET || getsockopt(m->sock, SOL_SOCKET, SO_DOMAIN,
	    &v, &len) == -1 || v != AF_UNIX ||
	    fcntl(m->sock, F_SETFD, FD_CLOEXEC) == -1)
		fatalx("-s %d: not an AF_UNIX SOCK_SEQPACKET socket", m->sock);
	if ((m->runfd = open(run, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		fatal("-r %s", run);
	if (fstat(m->runfd, &st) == -1 || st.st_uid != 0 ||
	    (st.st_mode & 027) != 0 || ((st.st_mode & 050) != 0 &&
	    st.st_gid != 0 && st.st_gid != m->gid))
		fatalx("-r %s: must be root's, closed to others and written by "
		    "root alone (mode 0750 at most, group root or %u)", run,
		    m->gid);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", m->runfd);
	if ((n = readlink(proc, m->rundir, sizeof(m->rundir) - 1)) <= 0 ||
	    (size_t)n >= sizeof(m->rundir) - 1)
		fatal("-r %s", run);
	m->rundir[n] = '\0';
	/* mountinfo escapes these: the reaping would not know the path. */
	if (strpbrk(m->rundir, " \t\n\\") != NULL)
		fatalx("-r %s: white space or '\\' in the path", run);
	if ((m->cachefd = open(cache, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		fatal("-i %s", cache);
	if (stat(m->init, &st) == -1 || !S_ISREG(st.st_mode))
		fatalx("-I %s: not a file", m->init);
	if ((mkdirat(m->runfd, "runtime", 0711) == -1 && errno != EEXIST) ||
	    fstatat(m->runfd, "runtime", &st, AT_SYMLINK_NOFOLLOW) == -1 ||
	    !S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0)
		fatalx("%s/runtime: must be a directory of root's, written by "
		    "root alone", m->rundir);
}

/* 0, 1 and 2 open, so that no descriptor of ours lands on them. */
static void
mon_stdfds(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) == -1 && open("/dev/null", O_RDWR) != fd)
			exit(1);
}

static void
mon_send(struct mon *m, uint32_t type, const void *body, uint32_t len,
    int fd)
{
	struct mon_hdr	 h = { MON_MAGIC, type, len, 0 };
	struct iovec	 iov[2] = { { &h, sizeof(h) }, { (void *)body, len } };
	union {
		struct cmsghdr	 c;
		char		 b[CMSG_SPACE(sizeof(int))];
	}		 cm = { .c = { .cmsg_len = CMSG_LEN(sizeof(int)),
	    .cmsg_level = SOL_SOCKET, .cmsg_type = SCM_RIGHTS } };
	struct msghdr	 msg = { .msg_iov = iov, .msg_iovlen = len > 0 ? 2 : 1,
	    .msg_control = fd != -1 ? cm.b : NULL,
	    .msg_controllen = fd != -1 ? sizeof(cm.b) : 0 };

	memcpy(CMSG_DATA(&cm.c), &fd, sizeof(int));
	if (sendmsg(m->sock, &msg, MSG_NOSIGNAL) == -1) {
		log_warn("send to the launcher");
		mon_teardown(m);
		exit(0);
	}
}

static __attribute__((format(printf, 2, 3), noreturn)) void
mon_die(struct mon *m, const char *fmt, ...)
{
	char	 why[512];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warnx("launcher violated the protocol (%s): killing every "
	    "container and exiting", why);
	(void)mon_kill_all(m, NULL);
	mon_teardown(m);
	exit(2);
}

static __attribute__((noreturn)) void
mon_eof(struct mon *m, const char *why)
{
	log_info("%s: deleting every container and staging directory", why);
	mon_teardown(m);
	exit(0);
}

/* The rule of a request: its type's, and for CMD its verb's too. */
static const struct mon_rule *
mon_rule(uint32_t type, const char *body)
{
	const struct mon_cmd	*c = (const struct mon_cmd *)body;

	for (size_t i = 0; i < MON_NRULES; i++)
		if (mon_rules[i].type == type && (type != MON_CMD ||
		    mon_rules[i].verb == c->verb))
			return &mon_rules[i];
	return NULL;
}

static struct mon_slot *
mon_slot(struct mon *m, const char *id)
{
	for (size_t i = 0; i < m->gid_count; i++)
		if (m->slots[i].state != 0 && strcmp(m->slots[i].id, id) == 0)
			return &m->slots[i];
	return NULL;
}

/* The answer, in order: MON_OK (with a descriptor) or MON_ERR.  Success
 * sets the slot's once bit. */
static void
mon_answer(struct mon *m, struct mon_slot *s, const struct mon_rule *r,
    struct mon_req *q)
{
	struct mon_ok	 ok = { q->value };
	struct mon_err	 e = { .err = q->err };

	if (q->err == 0) {
		if (s != NULL)
			s->state |= r->once;
		mon_send(m, MON_OK, &ok, sizeof(ok), q->fd);
	} else {
		memcpy(e.msg, q->msg, sizeof(e.msg));
		e.msg[sizeof(e.msg) - 1] = '\0';
		mon_send(m, MON_ERR, &e, sizeof(e), -1);
	}
	if (q->fd != -1)
		close(q->fd);
}

/* One packet from the launcher: checked, done, answered. */
static void
mon_request(struct mon *m)
{
	union {
		struct mon_hdr	 h;
		uint64_t	 align;
		char		 b[MON_PKT_MAX + 1];
	}			 pkt;
	union {
		struct cmsghdr	 c;
		char		 b[CMSG_SPACE(sizeof(int) * MON_FDS_MAX)];
	}			 cm;
	struct iovec		 iov = { pkt.b, sizeof(pkt.b) };
	struct msghdr		 msg = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = cm.b, .msg_controllen = sizeof(cm.b) };
	struct cmsghdr		*c;
	const struct mon_rule	*r;
	struct mon_slot		*s = NULL;
	struct mon_req		 q = { .fd = -1 };
	const char		*body = pkt.b + sizeof(struct mon_hdr);
	int			 fds[MON_FDS_MAX], nfds = 0, other = 0, rc;
	ssize_t			 n;

	if ((n = recvmsg(m->sock, &msg, MSG_CMSG_CLOEXEC)) == -1) {
		if (errno == EINTR || errno == EAGAIN)
			return;
		log_warn("receive from the launcher");
		mon_eof(m, "the launcher's socket failed");
	}
	for (c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
		size_t	 k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		other |= c->cmsg_level != SOL_SOCKET ||
		    c->cmsg_type != SCM_RIGHTS || nfds + k > MON_FDS_MAX;
		for (size_t i = 0; !other && i < k; i++)
			memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int),
			    sizeof(int));
	}
	if (n == 0 && nfds == 0 && !other)
		mon_eof(m, "the launcher closed its socket");
	if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC) || other)
		mon_die(m, "a truncated packet, or descriptors beyond %d",
		    MON_FDS_MAX);
	if ((size_t)n < sizeof(struct mon_hdr))
		mon_die(m, "a packet of %zd bytes", n);
	if (pkt.h.magic != MON_MAGIC || pkt.h.pad != 0)
		mon_die(m, "bad magic 0x%x or pad", pkt.h.magic);
	if ((r = mon_rule(pkt.h.type, body)) == NULL)
		mon_die(m, "unknown request type %u (or CMD verb)", pkt.h.type);
	if (pkt.h.len != r->size || (size_t)n != sizeof(pkt.h) + r->size)
		mon_die(m, "%s of %zd bytes, header says %u, want %zu", r->name,
		    n - (ssize_t)sizeof(pkt.h), pkt.h.len, r->size);
	if (!(r->fds & (1u << nfds)))
		mon_die(m, "%s with %d descriptors", r->name, nfds);
	if (r->id != ID_NONE) {
		if (!mon_id_ok(body))
			mon_die(m, "%s: not a container id", r->name);
		s = mon_slot(m, body);
		if (r->id == ID_NEW ? s != NULL : s == NULL)
			mon_die(m, "%s %s: %s", r->name, body, s != NULL ?
			    "staged already" : "not staged");
		if (s != NULL && ((s->state & r->need) != r->need ||
		    (s->state & r->forbid) != 0))
			mon_die(m, "%s %s: not allowed in state 0x%x", r->name,
			    body, s->state);
		for (size_t i = 0; s == NULL && i < m->gid_count; i++)
			if (m->slots[i].state == 0) {
				s = &m->slots[i];
				*s = (struct mon_slot){ .gen = ++m->gen };
				memcpy(s->id, body, sizeof(s->id));
			}
	}
	q.type = pkt.h.type;
	q.body = body;
	q.fds = fds;
	q.nfds = nfds;
	log_debug("%s %s", r->name, r->id != ID_NONE ? body : "");
	if (r->id != ID_NONE && s == NULL) {
		q.err = ENOSPC;
		snprintf(q.msg, sizeof(q.msg), "%s: every slot is in use",
		    r->name);
		rc = MON_ANSWERED;
	} else
		rc = r->fn(m, s, &q);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	if (rc == MON_VIOLATION)
		mon_die(m, "%s", q.msg);
	mon_answer(m, s, r, &q);
}

/* Signals: TERM and INT end it as EOF does, HUP is ignored; every child
 * that ended is reaped and reported. */
static void
mon_signals(struct mon *m)
{
	struct signalfd_siginfo	 si;
	struct mon_exit		 e;
	pid_t			 pid;
	int			 st;

	while (read(m->sigfd, &si, sizeof(si)) == sizeof(si))
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
			mon_eof(m, "signalled");
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		mon_reaped(m, pid, st);
		e = (struct mon_exit){ .pid = pid, .status = st };
		mon_send(m, MON_EXIT, &e, sizeof(e), -1);
	}
}

int
main(int argc, char *argv[])
{
	struct mon	 m;
	sigset_t	 set;
	const char	*run = NULL, *cache = NULL;
	int		 debug = 0, t;

	/* Before anything else (it needs root for the rest). */
	if (argc == 2 && strcmp(argv[1], "--help") == 0)
		mon_usage_to(stdout, 0);
	if (argc == 2 && strcmp(argv[1], "--version") == 0)
		return printf("sbx-monitor %s\n", SBX_VERSION) < 0;
	memset(&m, 0, sizeof(m));
	m.sock = m.sigfd = m.runfd = m.cachefd = -1;
	log_init("sbx-monitor", 1, 0);
	mon_stdfds();
	if (geteuid() != 0)
		fatalx("must run as root");
	mon_args(&m, argc, argv, &run, &cache, &debug);
	log_setverbose(debug);
	umask(077);
	mon_open(&m, run, cache);
	if ((m.slots = calloc(m.gid_count, sizeof(*m.slots))) == NULL)
		fatal("calloc");

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) == -1 ||
	    (m.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) == -1)
		fatal("signalfd");
	signal(SIGPIPE, SIG_IGN);
	/* The inits the runtime leaves behind become ours to reap. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1)
		fatal("PR_SET_CHILD_SUBREAPER");

	mon_reap_leftovers(&m);
	mon_send(&m, MON_READY, NULL, 0, -1);
	log_debug("serving run_dir %s", m.rundir);
	for (;;) {
		struct pollfd	 pfd[2] = { { m.sock, POLLIN, 0 },
		    { m.sigfd, POLLIN, 0 } };

		t = mon_timeout(&m);
		if (poll(pfd, 2, t) == -1 && errno != EINTR)
			fatal("poll");
		mon_expire(&m);
		if (pfd[1].revents != 0)
			mon_signals(&m);
		if (pfd[0].revents != 0)
			mon_request(&m);
	}
}
