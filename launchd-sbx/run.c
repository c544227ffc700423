/*
 * run.c: one execution from a verified launch request to its result.  The
 * order is fixed and each step undoes what the earlier ones did when it
 * fails: verify the signed policy, pick the tier's runtime, resolve the
 * image, stage run_dir/x-<execution>/{in,code} (copies, root-owned, files
 * 0444, directories 0555), write the spec, record the launch in the audit
 * log, then `<runtime> create` with stdout and stderr on pipes and
 * `<runtime> start`.  launchd-sbx is a child subreaper, so the container's
 * init becomes its child and its real exit status comes to SIGCHLD.  The
 * wall clock is a libevent timer that kills the whole container from
 * outside.  When the init has exited the cgroup statistics are read (the
 * runtime removes the cgroup at delete), then `<runtime> delete --force`,
 * leftover cgroup directories and the staging tree are removed, the exit
 * is audited, and only then is the result sent: a reply means nothing of
 * the execution is left.
 */
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "audit.h"
#include "frame.h"
#include "log.h"
#include "policy.h"
#include "sign.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

/* snprintf for paths and messages: a truncated result is still
 * NUL-terminated, and a path that does not fit fails its open later. */
static int __attribute__((format(printf, 3, 4)))
run_fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list	 ap;
	int	 n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n;
}

#define RUN_CGROUP_ROOT		"/sys/fs/cgroup"
#define RUN_GRACE_MS		1000	/* output after the init exited */
#define RUN_ARGV_MAX		32

struct run_out {
	struct event	*ev;
	int		 fd;
	uint8_t		*buf;
	size_t		 len;
	int		 truncated;
	int		 eof;
};

struct run {
	struct run			*next;
	struct launchd			*ld;
	struct frame_conn		*conn;
	uint64_t			 request_id;
	Sbx__V1__PolicyGrant		*grant;
	const struct launchd_runtime	*rt;
	char				 rtroot[PATH_MAX];
	char				 id[160];
	char				 dir[PATH_MAX];
	pid_t				 pid;
	int				 exited;
	int				 status;
	int				 wall_hit;
	int				 finished;
	size_t				 cap;
	uint64_t			 start_ns;
	uint64_t			 end_ns;
	struct run_out			 out[2];	/* stdout, stderr */
	struct event			*wall_ev;
	struct event			*grace_ev;
};

static const char *const run_controllers[] = {
	"memory", "pids", "cpu", "cpuacct", "cpuset", "devices", "freezer",
	"blkio", "systemd", "net_cls", "net_prio", "perf_event", "hugetlb",
	"rdma", "misc", NULL
};

static void	run_finish(struct run *);

/* ---- helpers ---- */

int
run_rmtree(const char *path)
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
		if (run_fmt(sub, sizeof(sub), "%s/%s", path, de->d_name) >=
		    (int)sizeof(sub)) {
			rc = -1;
			continue;
		}
		if (run_rmtree(sub) == -1)
			rc = -1;
	}
	closedir(d);
	if (rmdir(path) == -1)
		rc = -1;
	return rc;
}

/* fork and exec argv with the given stdio (-1: /dev/null). */
static pid_t
run_spawn(char *const argv[], int fd1, int fd2)
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
run_wait(pid_t pid, int seconds)
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
run_cmd(char *const argv[], int seconds, char *out, size_t outlen)
{
	int	 p[2] = { -1, -1 }, st;
	size_t	 len = 0;
	ssize_t	 r;
	pid_t	 pid;
	char	*path = NULL;
	char	*av[RUN_ARGV_MAX];

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
	for (len = 0; argv[len] != NULL && len < RUN_ARGV_MAX - 1; len++)
		av[len] = argv[len];
	av[len] = NULL;
	if (path != NULL)
		av[0] = path;
	len = 0;
	if (out != NULL && pipe2(p, O_CLOEXEC) == -1) {
		free(path);
		return -1;
	}
	pid = run_spawn(av, p[1], -1);
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
	st = run_wait(pid, seconds);
	return st;
}

/* argv: runtime [global args] --root ROOT then the given words. */
static void
run_rtargv(const struct launchd_runtime *rt, const char *root,
    char *av[RUN_ARGV_MAX], const char *const words[])
{
	size_t	 n = 0;

	av[n++] = rt->path;
	for (size_t i = 0; i < rt->nargs && n < RUN_ARGV_MAX - 12; i++)
		av[n++] = rt->args[i];
	av[n++] = (char *)"--root";
	av[n++] = (char *)root;
	for (size_t i = 0; words[i] != NULL && n < RUN_ARGV_MAX - 1; i++)
		av[n++] = (char *)words[i];
	av[n] = NULL;
}

static void
run_rtroot(const struct launchd *ld, int tier, char out[PATH_MAX])
{
	run_fmt(out, PATH_MAX, "%s/%s", ld->runtime_root,
	    parse_tier_name(tier));
}

static uint64_t
run_cg_read(const char *parent, const char *id, const char *ctrl,
    const char *file, const char *key)
{
	char		 path[PATH_MAX], line[256];
	FILE		*f;
	uint64_t	 v = 0;
	size_t		 klen = key != NULL ? strlen(key) : 0;

	run_fmt(path, sizeof(path), "%s/%s/%s/%s/%s", RUN_CGROUP_ROOT, ctrl,
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

/* Remove what the runtime left of one execution's cgroups. */
static void
run_cg_remove(const char *parent, const char *id)
{
	char	 path[PATH_MAX];

	for (size_t i = 0; run_controllers[i] != NULL; i++) {
		run_fmt(path, sizeof(path), "%s/%s/%s/%s", RUN_CGROUP_ROOT,
		    run_controllers[i], parent, id);
		if (rmdir(path) == -1 && errno != ENOENT)
			log_warn("cgroup %s", path);
	}
}

/* ---- refusals before anything was created ---- */

static void
run_refuse(struct launchd *ld, struct frame_conn *c, uint64_t rid,
    const Sbx__V1__PolicyGrant *g, const char *rule, const char *msg)
{
	control_refuse(ld, c, rid, g != NULL ? g->task_id : "",
	    g != NULL ? g->execution_id : "", rule, msg);
}

/* ---- staging ---- */

static int
run_write_file(const char *path, const uint8_t *p, size_t len)
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

static int
run_stage(struct run *r, const Sbx__V1__LaunchRequest *l, const char **rule,
    char *err, size_t errlen)
{
	const Sbx__V1__Policy	*pol = r->grant->policy;
	char			 in[PATH_MAX], code[PATH_MAX], f[PATH_MAX];

	*rule = RULE_RUNTIME;
	run_fmt(in, sizeof(in), "%s/in", r->dir);
	run_fmt(code, sizeof(code), "%s/code", r->dir);
	if (mkdir(r->dir, 0700) == -1 || mkdir(in, 0700) == -1 ||
	    mkdir(code, 0700) == -1) {
		run_fmt(err, errlen, "staging %s: %s", r->dir,
		    strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < pol->n_inputs; i++) {
		if (dataset_stage(r->ld, pol->inputs[i]->dataset, in, err,
		    errlen) == -1) {
			if (errno == ENOENT || errno == EINVAL)
				*rule = RULE_DATASET;
			return -1;
		}
	}
	run_fmt(f, sizeof(f), "%s/%s", code, l->code_name);
	if (run_write_file(f, l->code.data, l->code.len) == -1) {
		run_fmt(err, errlen, "staging %s: %s", f, strerror(errno));
		return -1;
	}
	if (chmod(in, 0555) == -1 || chmod(code, 0555) == -1) {
		run_fmt(err, errlen, "staging %s: %s", r->dir,
		    strerror(errno));
		return -1;
	}
	*rule = NULL;
	return 0;
}

/* ---- output ---- */

static void
run_out_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run	*r = arg;
	struct run_out	*o = fd == r->out[0].fd ? &r->out[0] : &r->out[1];
	uint8_t		 junk[16384];
	ssize_t		 n;

	(void)what;
	for (;;) {
		if (o->len < r->cap)
			n = read(fd, o->buf + o->len, r->cap - o->len);
		else
			n = read(fd, junk, sizeof(junk));
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && errno == EAGAIN)
			return;
		if (n <= 0) {
			o->eof = 1;
			if (o->ev != NULL)
				event_del(o->ev);
			break;
		}
		if (o->len < r->cap)
			o->len += (size_t)n;
		else
			o->truncated = 1;
	}
	if (r->exited && r->out[0].eof && r->out[1].eof)
		run_finish(r);
}

static void
run_grace_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	run_finish(arg);
}

static void
run_kill(struct run *r)
{
	const char	*w[] = { "kill", "--all", r->id, "KILL", NULL };
	char		*av[RUN_ARGV_MAX];

	run_rtargv(r->rt, r->rtroot, av, w);
	(void)run_cmd(av, LAUNCHD_CHECK_SECONDS, NULL, 0);
	/* The init's death ends the pid namespace and all in it. */
	if (!r->exited && r->pid > 0)
		kill(r->pid, SIGKILL);
}

static void
run_wall_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run	*r = arg;

	(void)fd;
	(void)what;
	if (r->exited)
		return;
	log_info("execution %s: wall_seconds %u reached; killing", r->id,
	    r->grant->policy->limits->wall_seconds);
	r->wall_hit = 1;
	r->ld->metrics.wall_kills++;
	run_kill(r);
}

/* ---- the end of an execution ---- */

static void
run_unlink(struct run *r)
{
	struct run	**pp;

	for (pp = &r->ld->runs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
}

static void
run_free(struct run *r)
{
	for (int i = 0; i < 2; i++) {
		if (r->out[i].ev != NULL)
			event_free(r->out[i].ev);
		if (r->out[i].fd != -1)
			close(r->out[i].fd);
		free(r->out[i].buf);
	}
	if (r->wall_ev != NULL)
		event_free(r->wall_ev);
	if (r->grace_ev != NULL)
		event_free(r->grace_ev);
	if (r->grant != NULL)
		sbx__v1__policy_grant__free_unpacked(r->grant, NULL);
	free(r);
}

/* Remove the container, its cgroups and its staging. */
static void
run_cleanup(struct run *r)
{
	const char	*w[] = { "delete", "--force", r->id, NULL };
	char		*av[RUN_ARGV_MAX];

	run_rtargv(r->rt, r->rtroot, av, w);
	if (run_cmd(av, LAUNCHD_CMD_SECONDS, NULL, 0) != 0)
		log_debug("execution %s: %s delete did not succeed", r->id,
		    r->rt->path);
	run_cg_remove(r->ld->conf->cgroup_parent, r->id);
	if (run_rmtree(r->dir) == -1)
		log_warn("execution %s: cannot remove %s", r->id, r->dir);
}

static void
run_audit(struct launchd *ld, const Sbx__V1__PolicyGrant *g,
    const char *action, const char *rule, const char *detail,
    const char *actor)
{
	Sbx__V1__AuditEvent	 ev;

	sbx__v1__audit_event__init(&ev);
	ev.task_id = g != NULL ? g->task_id : (char *)"";
	ev.execution_id = g != NULL ? g->execution_id : (char *)"";
	ev.policy_hash = g != NULL ? g->policy_hash : (char *)"";
	ev.action = (char *)action;
	ev.rule = (char *)(rule != NULL ? rule : "");
	ev.detail = (char *)detail;
	ev.actor = (char *)(actor != NULL ? actor : "");
	if (audit_append(ld->audit, &ev) == -1)
		log_warnx("audit: cannot record %s of %s", action,
		    ev.execution_id);
	else
		audit_event_clear(&ev);
}

static void
run_finish(struct run *r)
{
	struct launchd		*ld = r->ld;
	const char		*parent = ld->conf->cgroup_parent;
	Sbx__V1__ExecutionResult res = SBX__V1__EXECUTION_RESULT__INIT;
	Sbx__V1__Usage		 use = SBX__V1__USAGE__INIT;
	Sbx__V1__PolicyRef	 ref = SBX__V1__POLICY_REF__INIT;
	Sbx__V1__Envelope	 env;
	char			*limits[3], *detail;
	size_t			 nlim = 0;
	uint64_t		 oom, failcnt, pidsmax;
	int			 sig = 0, code = 0;

	if (r->finished)
		return;
	r->finished = 1;
	/* Drain what is already in the pipes: the init has exited. */
	for (int i = 0; i < 2; i++)
		if (!r->out[i].eof)
			run_out_cb(r->out[i].fd, EV_READ, r);
	if (WIFEXITED(r->status)) {
		code = WEXITSTATUS(r->status);
		/* sbx-init reports a signalled program as 128+signal. */
		if (code > 128)
			sig = code - 128;
	} else if (WIFSIGNALED(r->status)) {
		sig = WTERMSIG(r->status);
		code = 128 + sig;
	}

	/* Statistics before delete: the runtime removes the cgroup. */
	use.cpu_ms = run_cg_read(parent, r->id, "cpuacct", "cpuacct.usage",
	    NULL) / 1000000;
	use.peak_memory_kb = run_cg_read(parent, r->id, "memory",
	    "memory.max_usage_in_bytes", NULL) / 1024;
	use.wall_ms = (r->end_ns - r->start_ns) / 1000000;
	oom = run_cg_read(parent, r->id, "memory", "memory.oom_control",
	    "oom_kill");
	failcnt = run_cg_read(parent, r->id, "memory", "memory.failcnt",
	    NULL);
	pidsmax = run_cg_read(parent, r->id, "pids", "pids.events", "max");
	if (r->wall_hit)
		limits[nlim++] = (char *)"wall";
	if (oom > 0 || (failcnt > 0 && sig == SIGKILL && !r->wall_hit)) {
		limits[nlim++] = (char *)"memory";
		ld->metrics.memory_kills++;
	}
	if (pidsmax > 0) {
		limits[nlim++] = (char *)"pids";
		ld->metrics.pids_hits++;
	}

	run_cleanup(r);

	xasprintf(&detail, "exit %d signal %d wall_ms %llu cpu_ms %llu "
	    "peak_kb %llu%s%s%s", code, sig,
	    (unsigned long long)use.wall_ms, (unsigned long long)use.cpu_ms,
	    (unsigned long long)use.peak_memory_kb,
	    nlim > 0 ? " limits " : "", nlim > 0 ? limits[0] : "",
	    nlim > 1 ? ",..." : "");
	run_audit(ld, r->grant, "exit", "", detail, "");
	log_info("execution %s: %s", r->id, detail);
	free(detail);
	ld->metrics.completed++;

	ref.name = r->grant->policy->name;
	ref.version = r->grant->policy->version;
	ref.hash = r->grant->policy_hash;
	res.task_id = r->grant->task_id;
	res.execution_id = r->grant->execution_id;
	res.policy = &ref;
	res.exit_code = code;
	res.signal = sig;
	res.limits_hit = limits;
	res.n_limits_hit = nlim;
	res.usage = &use;
	res.stdout.data = r->out[0].buf;
	res.stdout.len = r->out[0].len;
	res.stderr.data = r->out[1].buf;
	res.stderr.len = r->out[1].len;
	res.stdout_truncated = r->out[0].truncated;
	res.stderr_truncated = r->out[1].truncated;
	frame_env_init(&env, r->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_RESULT;
	env.result = &res;
	if (!frame_conn_closed(r->conn))
		frame_conn_send(r->conn, &env);
	frame_conn_release(r->conn);
	run_unlink(r);
	run_free(r);
}

void
run_reap_children(struct launchd *ld)
{
	struct run	*r;
	pid_t		 pid;
	int		 st;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (r = ld->runs; r != NULL; r = r->next)
			if (r->pid == pid && !r->exited)
				break;
		if (r == NULL)
			continue;	/* an orphan the runtime left us */
		r->exited = 1;
		r->status = st;
		r->end_ns = mono_ns();
		if (r->wall_ev != NULL)
			event_del(r->wall_ev);
		if (r->out[0].eof && r->out[1].eof)
			run_finish(r);
		else {
			struct timeval tv = { 0, RUN_GRACE_MS * 1000 };

			evtimer_add(r->grace_ev, &tv);
		}
	}
}

/* ---- launch ---- */

static const char *
run_interpreter(const char *code_name)
{
	const char	*dot = strrchr(code_name, '.');

	if (dot == NULL)
		return NULL;
	if (strcmp(dot, ".py") == 0)
		return "python3";
	if (strcmp(dot, ".sh") == 0)
		return "/bin/sh";
	return NULL;
}

static pid_t
run_read_pid(const char *dir)
{
	char	 path[PATH_MAX], *s;
	long	 v;

	run_fmt(path, sizeof(path), "%s/pid", dir);
	if ((s = read_file(path, 64, NULL)) == NULL)
		return -1;
	v = strtol(s, NULL, 10);
	free(s);
	return v > 1 ? (pid_t)v : -1;
}

/* create + start.  0, or -1 with err (the runtime's own words). */
static int
run_start(struct run *r, char *err, size_t errlen)
{
	char		 pidf[PATH_MAX], *av[RUN_ARGV_MAX];
	int		 p1[2], p2[2], st;
	pid_t		 pid;

	run_fmt(pidf, sizeof(pidf), "%s/pid", r->dir);
	if (pipe2(p1, O_CLOEXEC) == -1)
		goto syserr;
	if (pipe2(p2, O_CLOEXEC) == -1) {
		close(p1[0]);
		close(p1[1]);
		goto syserr;
	}
	r->out[0].fd = p1[0];
	r->out[1].fd = p2[0];
	{
		const char *w[] = { "create", "--bundle", r->dir,
		    "--pid-file", pidf, r->id, NULL };
		run_rtargv(r->rt, r->rtroot, av, w);
	}
	pid = run_spawn(av, p1[1], p2[1]);
	close(p1[1]);
	close(p2[1]);
	if (pid == -1)
		goto syserr;
	st = run_wait(pid, LAUNCHD_CMD_SECONDS);
	if (st != 0 || (r->pid = run_read_pid(r->dir)) == -1) {
		char	 msg[512];
		ssize_t	 n;

		/* The runtime said why on stderr (our pipe). */
		fcntl(r->out[1].fd, F_SETFL, O_NONBLOCK);
		n = read(r->out[1].fd, msg, sizeof(msg) - 1);
		msg[n > 0 ? n : 0] = '\0';
		msg[strcspn(msg, "\n")] = '\0';
		run_fmt(err, errlen, "%s create failed (status %d): %s",
		    r->rt->path, st, msg);
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		fcntl(r->out[i].fd, F_SETFL, O_NONBLOCK);
		r->out[i].buf = xmalloc(r->cap > 0 ? r->cap : 1);
		if ((r->out[i].ev = event_new(r->ld->base, r->out[i].fd,
		    EV_READ | EV_PERSIST, run_out_cb, r)) == NULL ||
		    event_add(r->out[i].ev, NULL) == -1) {
			run_fmt(err, errlen, "cannot watch the output pipes");
			return -1;
		}
	}
	r->start_ns = mono_ns();
	{
		const char *w[] = { "start", r->id, NULL };
		run_rtargv(r->rt, r->rtroot, av, w);
	}
	if ((st = run_cmd(av, LAUNCHD_CMD_SECONDS, NULL, 0)) != 0) {
		run_fmt(err, errlen, "%s start failed (status %d)",
		    r->rt->path, st);
		return -1;
	}
	return 0;
syserr:
	run_fmt(err, errlen, "cannot start the runtime: %s",
	    strerror(errno));
	return -1;
}

void
run_launch(struct launchd *ld, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__LaunchRequest	*l = req->launch;
	Sbx__V1__PolicyGrant		*g;
	const Sbx__V1__Policy		*pol;
	struct spec_params		 sp;
	struct run			*r;
	const char			*rule, *interp;
	char				 err[1024], rootfs[PATH_MAX];
	char				 in[PATH_MAX], code[PATH_MAX];
	char				 cgpath[PATH_MAX], prog[PATH_MAX];
	char				*argv[3], *detail;
	json_t				*spec;
	struct stat			 st;
	int				 tier;

	if (l == NULL || l->signed_ == NULL) {
		run_refuse(ld, c, req->request_id, NULL, RULE_BAD_REQUEST,
		    "launch request carries no signed policy");
		return;
	}
	if ((g = sign_verify(ld->pk, l->signed_, now_s(), err,
	    sizeof(err))) == NULL) {
		run_refuse(ld, c, req->request_id, NULL,
		    strncmp(err, "policy expired", 14) == 0 ? RULE_EXPIRED :
		    RULE_SIGNATURE, err);
		return;
	}
	pol = g->policy;
	if (!name_ok(g->execution_id) || !name_ok(g->task_id) ||
	    pol->limits == NULL || pol->limits->wall_seconds == 0) {
		run_refuse(ld, c, req->request_id, g, RULE_BAD_REQUEST,
		    "grant has a bad execution or task id, or no limits");
		goto out;
	}
	if (l->code_name == NULL || !name_ok(l->code_name) ||
	    (interp = run_interpreter(l->code_name)) == NULL) {
		run_refuse(ld, c, req->request_id, g, RULE_BAD_REQUEST,
		    "code_name must be a plain file name ending in .py or .sh");
		goto out;
	}
	tier = (int)pol->isolation;
	if (tier <= 0 || tier >= LAUNCHD_NTIERS ||
	    ld->conf->runtimes[tier].path == NULL ||
	    !ld->conf->runtimes[tier].available) {
		run_fmt(err, sizeof(err), "isolation %s: %s",
		    policy_isolation_name(pol->isolation),
		    tier > 0 && tier < LAUNCHD_NTIERS &&
		    ld->conf->runtimes[tier].path != NULL ?
		    "its runtime failed the start-up check" :
		    "no runtime is configured for this tier");
		run_refuse(ld, c, req->request_id, g, RULE_TIER, err);
		goto out;
	}
	if (image_rootfs(ld, pol->image, rootfs, &rule, err,
	    sizeof(err)) == -1) {
		run_refuse(ld, c, req->request_id, g, rule, err);
		goto out;
	}

	r = xcalloc(1, sizeof(*r));
	r->ld = ld;
	r->conn = c;
	r->request_id = req->request_id;
	r->grant = g;
	r->rt = &ld->conf->runtimes[tier];
	r->out[0].fd = r->out[1].fd = -1;
	r->cap = (size_t)(pol->outputs != NULL && pol->outputs->max_text_kb ?
	    pol->outputs->max_text_kb : LAUNCHD_TEXT_KB_DEFAULT) * 1024;
	run_rtroot(ld, tier, r->rtroot);
	run_fmt(r->id, sizeof(r->id), "%s", g->execution_id);
	run_fmt(r->dir, sizeof(r->dir), "%s/x-%s", ld->conf->run_dir, r->id);
	if (lstat(r->dir, &st) == 0) {
		run_refuse(ld, c, req->request_id, g, RULE_BAD_REQUEST,
		    "this execution is already running or ran");
		r->grant = NULL;
		free(r);
		goto out;
	}
	if (run_stage(r, l, &rule, err, sizeof(err)) == -1)
		goto fail;

	run_fmt(in, sizeof(in), "%s/in", r->dir);
	run_fmt(code, sizeof(code), "%s/code", r->dir);
	run_fmt(cgpath, sizeof(cgpath), "/%s/%s", ld->conf->cgroup_parent,
	    r->id);
	run_fmt(prog, sizeof(prog), "/code/%s", l->code_name);
	argv[0] = (char *)interp;
	argv[1] = prog;
	argv[2] = NULL;
	memset(&sp, 0, sizeof(sp));
	sp.policy = pol;
	sp.policy_hash = g->policy_hash;
	sp.task_id = g->task_id;
	sp.execution_id = g->execution_id;
	sp.rootfs = rootfs;
	sp.in_dir = in;
	sp.code_dir = code;
	sp.egress_sock = ld->conf->egress_socket;
	sp.init_path = ld->conf->init;
	sp.cgroups_path = cgpath;
	sp.argv = argv;
	sp.flavor = r->rt->flavor;
	rule = RULE_BAD_REQUEST;
	if ((spec = spec_build(&sp, err, sizeof(err))) == NULL)
		goto fail;
	rule = RULE_RUNTIME;
	if (spec_write(r->dir, spec, err, sizeof(err)) == -1) {
		json_decref(spec);
		goto fail;
	}
	json_decref(spec);

	xasprintf(&detail, "%s@%u isolation %s image %s", pol->name,
	    pol->version, policy_isolation_name(pol->isolation), pol->image);
	run_audit(ld, g, "launch", "", detail, "");
	free(detail);

	if ((r->wall_ev = evtimer_new(ld->base, run_wall_cb, r)) == NULL ||
	    (r->grace_ev = evtimer_new(ld->base, run_grace_cb, r)) == NULL) {
		run_fmt(err, sizeof(err), "cannot create timers");
		goto fail_started;
	}
	frame_conn_hold(c);
	r->next = ld->runs;
	ld->runs = r;
	if (run_start(r, err, sizeof(err)) == -1) {
		run_unlink(r);
		frame_conn_release(c);
		goto fail_started;
	}
	{
		struct timeval tv = { (time_t)pol->limits->wall_seconds, 0 };

		/* create and start took a while: time the wall from now. */
		event_base_update_cache_time(ld->base);
		evtimer_add(r->wall_ev, &tv);
	}
	ld->metrics.launches++;
	log_info("execution %s (task %s) started: pid %ld, %s", r->id,
	    g->task_id, (long)r->pid, r->rt->path);
	return;

fail_started:
	rule = RULE_RUNTIME;
	if (r->pid > 0)
		run_kill(r);
fail:
	log_warnx("execution %s refused: %s", r->id, err);
	run_cleanup(r);
	run_refuse(ld, c, req->request_id, g, rule, err);
	run_free(r);	/* frees g */
	return;
out:
	sbx__v1__policy_grant__free_unpacked(g, NULL);
}

/* ---- start-up and shutdown ---- */

void
run_check_runtimes(struct launchd *ld)
{
	for (int t = 1; t < LAUNCHD_NTIERS; t++) {
		struct launchd_runtime	*rt = &ld->conf->runtimes[t];
		char			*av[RUN_ARGV_MAX];
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
		av[n++] = rt->path;
		/* runsc checks its flags too: pass them. */
		if (rt->flavor == SPEC_RUNSC)
			for (size_t i = 0; i < rt->nargs &&
			    n < RUN_ARGV_MAX - 2; i++)
				av[n++] = rt->args[i];
		av[n++] = (char *)"--version";
		av[n] = NULL;
		if ((st = run_cmd(av, LAUNCHD_CHECK_SECONDS, NULL, 0)) != 0) {
			log_warnx("tier %s unavailable: %s --version failed "
			    "(status %d)", parse_tier_name(t), rt->path, st);
			continue;
		}
		rt->available = 1;
		log_info("tier %s: %s", parse_tier_name(t), rt->path);
	}
}

static void
run_reap_cgroups(const char *parent)
{
	char		 dir[PATH_MAX], sub[PATH_MAX];
	DIR		*d;
	struct dirent	*de;

	for (size_t i = 0; run_controllers[i] != NULL; i++) {
		run_fmt(dir, sizeof(dir), "%s/%s/%s", RUN_CGROUP_ROOT,
		    run_controllers[i], parent);
		if ((d = opendir(dir)) == NULL)
			continue;
		while ((de = readdir(d)) != NULL) {
			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			run_fmt(sub, sizeof(sub), "%s/%s", dir, de->d_name);
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
run_reap_leftovers(struct launchd *ld)
{
	char		 root[PATH_MAX], list[65536], path[PATH_MAX];
	char		*av[RUN_ARGV_MAX], *line, *save;
	DIR		*d;
	struct dirent	*de;

	for (int t = 1; t < LAUNCHD_NTIERS; t++) {
		const struct launchd_runtime	*rt = &ld->conf->runtimes[t];
		const char			*w[] = { "list", "-q", NULL };

		if (rt->path == NULL || access(rt->path, X_OK) == -1)
			continue;
		run_rtroot(ld, t, root);
		run_rtargv(rt, root, av, w);
		if (run_cmd(av, LAUNCHD_CMD_SECONDS, list, sizeof(list)) != 0)
			continue;
		for (line = strtok_r(list, "\n", &save); line != NULL;
		    line = strtok_r(NULL, "\n", &save)) {
			const char *wd[] = { "delete", "--force", line, NULL };

			if (!name_ok(line))
				continue;
			run_rtargv(rt, root, av, wd);
			if (run_cmd(av, LAUNCHD_CMD_SECONDS, NULL, 0) == 0)
				log_info("removed leftover container %s", line);
			else
				log_warnx("cannot remove leftover container "
				    "%s", line);
		}
	}
	if ((d = opendir(ld->conf->run_dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (strncmp(de->d_name, "x-", 2) != 0)
				continue;
			run_fmt(path, sizeof(path), "%s/%s",
			    ld->conf->run_dir, de->d_name);
			if (run_rmtree(path) == -1)
				log_warn("cannot remove leftover %s", path);
			else
				log_info("removed leftover staging %s", path);
		}
		closedir(d);
	}
	run_reap_cgroups(ld->conf->cgroup_parent);
	/* Whatever the dead instance left of an unpack. */
	run_fmt(path, sizeof(path), "%s/cache", ld->conf->state_dir);
	if ((d = opendir(path)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			size_t n = strlen(de->d_name);

			if (n > 4 && strcmp(de->d_name + n - 4, ".tmp") == 0) {
				run_fmt(root, sizeof(root), "%s/%s", path,
				    de->d_name);
				(void)run_rmtree(root);
			}
		}
		closedir(d);
	}
}

size_t
run_count(const struct launchd *ld)
{
	size_t	 n = 0;

	for (const struct run *r = ld->runs; r != NULL; r = r->next)
		n++;
	return n;
}

void
run_stop_all(struct launchd *ld)
{
	while (ld->runs != NULL) {
		struct run *r = ld->runs;

		if (!r->exited) {
			run_kill(r);
			if (r->pid > 0 && waitpid(r->pid, &r->status, 0) > 0) {
				r->exited = 1;
				r->end_ns = mono_ns();
			}
		}
		r->exited = 1;
		if (r->end_ns == 0)
			r->end_ns = mono_ns();
		run_finish(r);
	}
}
