/*
 * run.c: one execution from a verified launch request to its result, as a
 * small state machine driven by the event loop, so that no execution waits
 * for another.  The order is fixed and each step undoes what the earlier ones
 * did when it fails: verify the signed policy, pick the tier's runtime,
 * resolve the image (waiting, queued, while it is being prepared: image.c),
 * have the monitor stage run_dir/x-<execution> (STAGE: the staging dir and
 * its scratch tmpfs) and fill its in/ and code/ (copies, files 0444) -- or
 * take a pre-started container from the pool (pool.c) and fill its staging --
 * then, at once, open the egress channel at egressd (when egress is
 * configured; egressd down refuses the launch; its socket and CA go into
 * run/) and record the launch (the audit group commit on its writer
 * thread, record.c); with both done, the monitor seals the staging (SEAL:
 * root's from then on, files 0444, directories 0555) and, for a cold launch,
 * writes the spec (SPEC) -- a cold launch whose channel is open does both
 * while its record commits -- and runs
 * `runc run --detach` (CMD RUN) under the runc flavor, `<runtime> create`
 * and `<runtime> start` under runsc (CMD, each a child of the monitor's
 * whose exit comes back as a MON_EXIT event), or for a pool entry
 * the launcher writes once into the FIFO its sbx-init waits on.  The monitor
 * is a child subreaper, so the container's init becomes its child and its
 * real exit status comes back as a MON_EXIT too (run_child_exited).  The wall
 * clock is a libevent timer that kills the whole container from outside (CMD
 * kill, and SIGKILL of the init).  When the init has exited the cgroup
 * statistics are read (the runtime removes the cgroup at delete) and
 * `<runtime> delete --force` starts (CMD delete).  Under runc the init is PID
 * 1 of the container's pid namespace, which the kernel lets it leave only
 * once every other process in it has exited: with every process of the
 * sandbox dead, the boundaries get their turn at once -- the egress channel
 * is closed and its usage and denials kept, the scratch tmpfs (mounted on the
 * host in the staging dir and bound into the sandbox so that it outlives it)
 * goes to gated as a descriptor, and the exit is recorded -- and the result
 * is sent when all three are done; only what gated releases reaches it (no
 * gate, or gated down: stdout and stderr withheld, nothing released).  The
 * delete's end then has the monitor detach the scratch, remove the
 * staging tree and the leftover cgroup directories (UNSTAGE), after the
 * result if it came first (sbx_launchd_cleanups_pending).  Under
 * runsc the same holds once the monitor has proved nothing of the sandbox
 * left (run_gone); without that proof, and for a failed execution, the
 * delete comes first and the rest follows in order.  Every failure path
 * runs the same teardown.
 *
 * It sits in the middle of launchd-sbx's layers (tests/layers.py): called
 * by control.c, it calls down into the pool (pool.c), the image store
 * (image.c), the root monitor's client (mon_client.c), the little the
 * launcher does to the host itself (runtime.c), the egressd and gated
 * clients (egress_client.c, gate_client.c) and the audit group commit
 * (record.c), and none of them calls it back by name: an image ready and
 * a child's end reach it through the hooks main() sets, a peer's reply
 * through the handler it gives the client.
 */
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
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

#include "audit.h"
#include "frame.h"
#include "log.h"
#include "policy.h"
#include "sign.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

#define RUN_GRACE_MS		1000	/* output after the init exited */
#define RUN_GONE_MS		1000	/* runsc: the proof's wait, at most */
#define RUN_GONE_POLL_MS	5	/* ... asked again this often */
#define RUN_ARGV_FILE		"argv"	/* in a pool entry's run/ */

enum run_state {
	RUN_IMAGE,		/* waiting for its image to be prepared */
	RUN_EGRESS_OPEN,	/* waiting for egressd's egress_opened */
	RUN_RECORD_LAUNCH,	/* waiting for the launch record to commit */
	RUN_CREATE,		/* <runtime> create (or run --detach) running */
	RUN_START,		/* <runtime> start running */
	RUN_RUNNING,		/* started; waiting for the init to exit */
	RUN_DELETE,		/* <runtime> delete running */
	RUN_EGRESS_CLOSE,	/* waiting for egressd's egress_usage */
	RUN_RELEASE,		/* waiting for gated's ReleaseResult */
	RUN_RECORD_EXIT,	/* waiting for the exit record to commit */
	RUN_CLEANUP,		/* replied; the runtime's delete still runs */
};

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
	enum run_state			 state;
	char				 hex[65];	/* the image */
	char				 rootfs[PATH_MAX];
	char				*code_name;
	uint8_t				*code;
	size_t				 code_len;
	const char			*interp;
	int				 tier;
	char				 id[160];	/* the container */
	char				 dir[PATH_MAX];
	char				 pool_key[65];	/* "" unless pooled */
	int				 staged;	/* the monitor staged it */
	int				 cg;		/* CREATE was accepted:
							 * cgroups may exist */
	int				 created;	/* runtime state may exist */
	pid_t				 pid;		/* the container's init */
	int				 one_step;	/* RUN, not CREATE + START */
	uint64_t			 spawn_ns;	/* when RUN was asked for */
	pid_t				 cmd_pid;	/* a runtime command */
	pid_t				 kill_pid;	/* <runtime> kill */
	int				 delete_pending;	/* after the kill */
	pid_t				 del_pid;	/* delete, after reaping */
	int				 del_wait;	/* ... once kill is done */
	int				 host_pending;	/* cleanup after delete */
	struct event			*clean_ev;	/* ... in the background */
	int				 clean_wait;
	int				 replied;
	int				 exited;
	int				 status;
	int				 wall_hit;
	int				 finished;
	const char			*fail_rule;	/* refused after all */
	char				*fail_msg;
	Sbx__V1__ErrorCode		 fail_code;	/* 0: ERROR_LAUNCH */
	char				 traceparent[TRACE_PARENT_LEN + 1];
	Sbx__V1__SignedPolicy		*signed_;	/* for egressd, gated */
	char				**outputs;	/* declared names */
	size_t				 noutputs;
	struct frame_client		*peer;		/* egressd */
	struct frame_client		*gpeer;		/* gated */
	int				 par;		/* the tail in parallel */
	int				 tail;		/* TAIL_* still under way */
	int				 need;		/* NEED_* before the start */
	int				 egress_open;	/* a channel to close */
	int				 specd;		/* sealed, spec written */
	gid_t				 gid;		/* its own group; 0: none */
	char				 ca[PATH_MAX];	/* its CA, staged */
	char				 scratch[PATH_MAX];
	/* What egressd and gated said, merged into the result. */
	uint64_t			 eg_out;
	uint64_t			 eg_in;
	uint64_t			 eg_req;
	/* A channel was asked for, and egressd's usage came back: unless
	 * both, policyd cannot know what the execution sent and counts
	 * its whole egress allowance against the task. */
	int				 eg_tried;
	int				 eg_known;
	Sbx__V1__Denial			**denials;
	size_t				 ndenials;
	Sbx__V1__ReleaseResult		*released;	/* gated's answer */
	Sbx__V1__DroppedOutput		**nogate;	/* no gate: all dropped */
	size_t				 nnogate;
	int				 withheld;	/* no stdout/stderr */
	size_t				 cap;
	uint64_t			 start_ns;
	uint64_t			 end_ns;
	struct run_out			 out[2];	/* stdout, stderr */
	struct event			*wall_ev;
	struct event			*grace_ev;
	struct event			*cmd_ev;	/* command timeout */
	struct event			*go_ev;		/* pool start retry */
	int				 go_tries;
	int				 go_fd;		/* FIFO, until read */
	uint64_t			 go_ns;		/* when written */
	/* runsc: waiting for the monitor's proof that nothing of the
	 * sandbox is left (run_gone), and the scratch it handed over. */
	struct event			*gone_ev;
	int				 gone_wait;
	uint64_t			 gone_ns;
	int				 scratch_fd;
	/* The result, gathered before delete. */
	int				 code_exit;
	int				 sig;
	char				*limits[3];
	size_t				 nlim;
	uint64_t			 cpu_ms;
	uint64_t			 peak_kb;
	uint64_t			 wall_ms;
};

static void	run_finish(struct run *);
static void	run_fail(struct run *, const char *rule, const char *fmt, ...)
		    __attribute__((format(printf, 3, 4)));
static void	run_teardown(struct run *);
static void	run_gone(struct run *);
static void	run_gone_cb(evutil_socket_t, short, void *);
static void	run_gone_retry(struct launchd *);
static void	run_cleanup_host(struct run *);
static void	run_cleanup_later(struct run *);
static void	run_record_exit(struct run *);
static void	run_egress_close(struct run *);
static void	run_tail_done(struct run *, int);
static void	run_gate_done(struct run *);
static void	run_reply(struct run *);
static void	run_release(struct run *);

/* The end of an execution, in parallel (run_deleted). */
#define TAIL_EGRESS	0x1	/* egressd's usage */
#define TAIL_GATE	0x2	/* gated's release */
#define TAIL_RECORD	0x4	/* the exit record */
#define TAIL_SETUP	0x8	/* run_deleted still starting them */
static void	run_need_done(struct run *, int);
static void	run_begin(struct run *);
static int	run_spec(struct run *);

/* Before the start, in parallel (run_begin). */
#define NEED_EGRESS	0x1	/* egressd's egress_opened */
#define NEED_RECORD	0x2	/* the launch record, durable */
#define NEED_SETUP	0x4	/* run_begin still asking */
static void	run_egress_close_sync(struct run *);
static void	run_after_egress(struct run *);
static void	run_no_release(struct run *, const char *why);
static void	run_denial(struct run *, const char *rule,
		    const char *boundary, const char *fmt, ...)
		    __attribute__((format(printf, 4, 5)));

/* ---- helpers ---- */

/*
 * A container's name: random, never the execution id.  It is what the
 * runtime's command lines, the staging directory and the cgroup tree show
 * to every user of the host, and nothing there may name the execution
 * (the launch record ties the two together for operators).
 */
static int
run_container_id(char *buf, size_t len)
{
	unsigned char	 b[12];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -1;
	if (len < 2 * sizeof(b) + 1)
		return -1;
	hex_encode(b, sizeof(b), buf);
	return 0;
}

/* ---- the list of executions ---- */

static void
run_unlink(struct run *r)
{
	struct run	**pp;

	for (pp = &r->ld->runs; *pp != NULL; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	r->next = NULL;
}

static void
run_free(struct run *r)
{
	/* Nothing is lost: a cleanup still to come is done now. */
	if (r->clean_wait) {
		r->clean_wait = 0;
		run_cleanup_host(r);
	}
	if (r->clean_ev != NULL)
		event_free(r->clean_ev);
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
	if (r->cmd_ev != NULL)
		event_free(r->cmd_ev);
	if (r->go_ev != NULL)
		event_free(r->go_ev);
	if (r->go_fd != -1)
		close(r->go_fd);
	if (r->gone_ev != NULL)
		event_free(r->gone_ev);
	if (r->scratch_fd != -1)
		close(r->scratch_fd);
	if (r->grant != NULL)
		sbx__v1__policy_grant__free_unpacked(r->grant, NULL);
	if (r->conn != NULL)
		frame_conn_release(r->conn);
	if (r->peer != NULL)
		frame_client_free(r->peer);
	if (r->gpeer != NULL)
		frame_client_free(r->gpeer);
	if (r->signed_ != NULL)
		sbx__v1__signed_policy__free_unpacked(r->signed_, NULL);
	for (size_t i = 0; i < r->noutputs; i++)
		free(r->outputs[i]);
	free(r->outputs);
	for (size_t i = 0; i < r->ndenials; i++) {
		free(r->denials[i]->rule);
		free(r->denials[i]->boundary);
		free(r->denials[i]->detail);
		free(r->denials[i]);
	}
	free(r->denials);
	for (size_t i = 0; i < r->nnogate; i++) {
		free(r->nogate[i]->name);
		free(r->nogate[i]);
	}
	free(r->nogate);
	if (r->released != NULL)
		sbx__v1__release_result__free_unpacked(r->released, NULL);
	/* Nothing of the sandbox is left by now: its group is free. */
	if (r->gid != 0)
		ident_give(r->ld, r->gid);
	free(r->code_name);
	free(r->code);
	free(r->fail_msg);
	free(r);
}

/* Refuse and forget an execution that has nothing left on the system. */
static void
run_abort(struct run *r, const char *rule, const char *msg)
{
	const Sbx__V1__PolicyGrant	*g = r->grant;

	log_warnx("execution %s refused: %s", g->execution_id, msg);
	/* A pool entry it took is gone: its replacement, as after a result. */
	if (r->pool_key[0] != '\0' && !r->ld->stopping)
		pool_fill_soon(r->ld);
	record_refuse_code(r->ld, r->conn, r->request_id, r->fail_code != 0 ?
	    r->fail_code : SBX__V1__ERROR_CODE__ERROR_LAUNCH, g->task_id,
	    g->execution_id, rule, msg);
	run_unlink(r);
	run_free(r);
}

/* The lines of an event loop callback about r carry its ids and trace. */
static void
run_ctx(const struct run *r)
{
	const Sbx__V1__PolicyGrant	*g = r->grant;

	log_ctx_set(g->task_id, g->execution_id, g->policy_hash,
	    r->traceparent);
}

static void
run_audit(struct run *r, const char *action, const char *detail,
    record_cb cb, void *arg)
{
	const Sbx__V1__PolicyGrant	*g = r->grant;
	Sbx__V1__AuditEvent		 ev;

	sbx__v1__audit_event__init(&ev);
	ev.traceparent = r->traceparent;
	ev.task_id = g->task_id;
	ev.execution_id = g->execution_id;
	ev.policy_hash = g->policy_hash;
	ev.action = (char *)action;
	ev.rule = (char *)"";
	ev.detail = (char *)detail;
	ev.actor = (char *)"";
	record_audit(r->ld, &ev, cb, arg);
}

/* ---- staging ---- */

/* Fill dir/{in,code}, ours until the monitor's SEAL makes them root's
 * (directories 0555, files 0444). */
static int
run_stage(struct run *r, const char **rule, char *err, size_t errlen)
{
	const Sbx__V1__Policy	*pol = r->grant->policy;
	char			 in[PATH_MAX], code[PATH_MAX], f[PATH_MAX];

	*rule = RULE_RUNTIME;
	bufprintf(in, sizeof(in), "%s/in", r->dir);
	bufprintf(code, sizeof(code), "%s/code", r->dir);
	for (size_t i = 0; i < pol->n_inputs; i++) {
		if (dataset_stage(r->ld, pol->inputs[i]->dataset, in, err,
		    errlen) == -1) {
			if (errno == ENOENT || errno == EINVAL)
				*rule = RULE_DATASET;
			return -1;
		}
	}
	bufprintf(f, sizeof(f), "%s/%s", code, r->code_name);
	if (runtime_write_file(f, r->code, r->code_len) == -1) {
		bufprintf(err, errlen, "staging %s: %s", f, strerror(errno));
		return -1;
	}
	*rule = NULL;
	return 0;
}

/*
 * Start a pool entry: its sbx-init waits in open(2) on run/argv, a FIFO.
 * Written in one go: NUL-terminated strings, NAME=VALUE entries, an empty
 * string, then the argv (sbx-init -a).  The write end stays open
 * (r->go_fd) until the pipe is empty, that is until sbx-init has read it
 * all (run_go): a reader other than sbx-init's may hold the FIFO -- under
 * runsc the gofer's own descriptor, opened O_NONBLOCK when sbx-init's
 * open(2) looks the name up, before the open that sbx-init reads from --
 * and a write end closed before that open would leave it waiting for a
 * writer for good, the assignment in the pipe.  Returns 0, 1 when nothing
 * holds the FIFO for reading yet (try again), -1 on an error (errno).
 */
static int
run_write_argv(struct run *r)
{
	const Sbx__V1__PolicyGrant	*g = r->grant;
	char				 path[PATH_MAX], *buf;
	int				 n, fd;
	ssize_t				 w;

	bufprintf(path, sizeof(path), "%s/run/%s", r->dir, POOL_ARGV);
	n = asprintf(&buf, "SBX_TASK_ID=%s%cSBX_EXECUTION_ID=%s%c"
	    "SBX_POLICY_HASH=%s%c%c%s%c/code/%s%c", g->task_id, 0,
	    g->execution_id, 0, g->policy_hash, 0, 0, r->interp, 0,
	    r->code_name, 0);
	if (n < 0)
		return -1;
	if ((fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) == -1) {
		free(buf);
		return errno == ENXIO ? 1 : -1;
	}
	/* Under PIPE_BUF (ids are short names): one atomic write. */
	w = write(fd, buf, (size_t)n);
	free(buf);
	if (w != n) {
		if (w >= 0)
			errno = EIO;
		close(fd);
		return -1;
	}
	r->go_fd = fd;
	r->go_ns = mono_ns();
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
	if (r->state == RUN_RUNNING && r->exited && r->out[0].eof &&
	    r->out[1].eof)
		run_finish(r);
}

static int
run_watch_output(struct run *r)
{
	for (int i = 0; i < 2; i++) {
		fcntl(r->out[i].fd, F_SETFL, O_NONBLOCK);
		r->out[i].buf = xmalloc(r->cap > 0 ? r->cap : 1);
		if ((r->out[i].ev = event_new(r->ld->base, r->out[i].fd,
		    EV_READ | EV_PERSIST, run_out_cb, r)) == NULL ||
		    event_add(r->out[i].ev, NULL) == -1)
			return -1;
	}
	return 0;
}

static void
run_grace_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	run_finish(arg);
}

/* Kill the container from outside: the runtime's kill (a command whose
 * exit we do not wait for here) and the init itself, whose death ends
 * its pid namespace. */
static void
run_kill(struct run *r)
{
	char	 err[MON_ERR_MAX];

	/* Delete waits for it: both take the runtime's state lock. */
	if (r->kill_pid <= 0 && (r->kill_pid = mon_client_cmd(r->ld, r->id,
	    r->tier, MON_KILL, 0, -1, -1, err, sizeof(err))) == -1) {
		log_warnx("execution %s: kill: %s", r->id, err);
		r->kill_pid = 0;
	}
	if (!r->exited && r->pid > 0)
		(void)mon_client_sigkill(r->ld, r->pid);
}

static void
run_wall_cb_1(evutil_socket_t fd, short what, void *arg)
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

static void
run_wall_cb(evutil_socket_t fd, short what, void *arg)
{
	run_ctx(arg);
	run_wall_cb_1(fd, what, arg);
	log_ctx_clear();
}

/* The init exited and the runtime's start has returned: finish as soon
 * as the output is read. */
static void
run_exited(struct run *r)
{
	struct timeval	 tv = { 0, RUN_GRACE_MS * 1000 };

	if (r->wall_ev != NULL)
		event_del(r->wall_ev);
	if (r->out[0].eof && r->out[1].eof)
		run_finish(r);
	else
		evtimer_add(r->grace_ev, &tv);
}

/* ---- runtime commands, one at a time per execution ---- */

static void
run_orphan_keep(struct launchd *ld, pid_t pid, int st)
{
	struct launchd_orphan	*o = &ld->orphans[ld->norphan++ %
				    LAUNCHD_ORPHANS];

	o->pid = pid;
	o->status = st;
	o->ns = mono_ns();
}

/*
 * A RUN has told r's init's pid: if that pid's exit came already (after
 * the RUN was asked for), it is the init's.  Another process's with the
 * same pid would have to be reaped and its pid given out again within
 * that window: the kernel hands pids out in turn, so only a wrap of the
 * pid counter in between could do it.
 */
static void
run_orphan_claim(struct run *r)
{
	struct launchd_orphan	*o;

	for (size_t i = 0; i < LAUNCHD_ORPHANS; i++) {
		o = &r->ld->orphans[i];
		if (o->pid != r->pid || o->ns < r->spawn_ns)
			continue;
		o->pid = 0;
		r->exited = 1;
		r->status = o->status;
		r->end_ns = o->ns;
		log_debug("execution %s: its init %ld ended before the run "
		    "command did", r->id, (long)r->pid);
		return;
	}
}

static void
run_cmd_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run	*r = arg;

	(void)fd;
	(void)what;
	if (r->cmd_pid > 0 || r->del_pid > 0) {
		pid_t	 pid = r->cmd_pid > 0 ? r->cmd_pid : r->del_pid;

		log_warnx("execution %s: runtime command %ld took over %d s; "
		    "killing it", r->id, (long)pid, LAUNCHD_CMD_SECONDS);
		(void)mon_client_sigkill(r->ld, pid);
	}
}

/* Have the monitor run a runtime command (enum mon_verb) for r; its exit
 * comes to run_cmd_done.  -1 with err filled. */
static int
run_cmd_spawn(struct run *r, int verb, int fd1, int fd2, char *err,
    size_t errlen)
{
	struct timeval	 tv = { LAUNCHD_CMD_SECONDS, 0 };

	if ((r->cmd_pid = mon_client_cmd(r->ld, r->id, r->tier, verb, 0, fd1,
	    fd2, err, errlen)) == -1) {
		r->cmd_pid = 0;
		return -1;
	}
	evtimer_add(r->cmd_ev, &tv);
	return 0;
}

static pid_t
run_read_pid(const char *dir)
{
	char	 path[PATH_MAX], *s;
	long	 v;

	bufprintf(path, sizeof(path), "%s/pid", dir);
	if ((s = read_file(path, 64, NULL)) == NULL)
		return -1;
	v = strtol(s, NULL, 10);
	free(s);
	return v > 1 ? (pid_t)v : -1;
}

/* The program runs: time the wall from here. */
static void
run_started(struct run *r)
{
	struct timeval	 tv = {
	    (time_t)r->grant->policy->limits->wall_seconds, 0 };

	r->state = RUN_RUNNING;
	event_base_update_cache_time(r->ld->base);
	evtimer_add(r->wall_ev, &tv);
	r->ld->metrics.launches++;
	log_info("execution %s (task %s) started%s: pid %ld, %s",
	    r->grant->execution_id, r->grant->task_id,
	    r->pool_key[0] != '\0' ? " from the pool" : "",
	    (long)r->pid, r->rt->path);
	if (r->exited)
		run_exited(r);
}

#define RUN_GO_TRIES	2000	/* 1 ms apart: sbx-init is a moment away */
#define RUN_ACK_MS	5000	/* then an assignment not read fails */

static void	run_go(struct run *);

static void
run_go_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	run_go(arg);
}

/*
 * The assignment is written: started once sbx-init has read all of it.
 * The name goes first, before the program can exist (sbx-init reads to
 * the end of file, which comes with the close), or a program that opens
 * every file under /run (a secrets scan) would block on the FIFO for
 * good; run/ is still ours.  On a failure the write end stays open until
 * the run is freed, after the delete: sbx-init, if it reads late, never
 * sees its end of file, so no program starts.  Returns 0 when started or
 * failed, 1 to look again.
 */
static int
run_go_read(struct run *r)
{
	char	 path[PATH_MAX];
	int	 n;

	if (ioctl(r->go_fd, FIONREAD, &n) == 0 && n == 0) {
		bufprintf(path, sizeof(path), "%s/run/%s", r->dir, POOL_ARGV);
		if (unlink(path) == -1)
			log_warn("pool entry %s: unlink %s", r->id, path);
		close(r->go_fd);
		r->go_fd = -1;
		run_started(r);
		return 0;
	}
	if (r->exited)
		run_fail(r, RULE_RUNTIME, "pool entry %s: its init exited "
		    "before it read its assignment", r->id);
	else if (mono_ns() - r->go_ns >= (uint64_t)RUN_ACK_MS * 1000000)
		run_fail(r, RULE_RUNTIME, "pool entry %s: its sbx-init did "
		    "not read its assignment within %d ms", r->id,
		    RUN_ACK_MS);
	else
		return 1;
	return 0;
}

/* A pool entry: hand its waiting sbx-init the program. */
static void
run_go(struct run *r)
{
	struct timeval	 tv = { 0, 1000 };
	int		 rc;

	if (r->go_fd != -1) {
		if (run_go_read(r) == 0)
			return;
		rc = 2;
	} else if (r->exited) {
		run_fail(r, RULE_RUNTIME, "pool entry %s: its init exited "
		    "before the start", r->id);
		return;
	} else if ((rc = run_write_argv(r)) == 0)
		rc = 2;
	if (rc == 2 || (rc == 1 && ++r->go_tries < RUN_GO_TRIES)) {
		if (r->go_ev == NULL)
			r->go_ev = evtimer_new(r->ld->base, run_go_cb, r);
		if (r->go_ev != NULL && evtimer_add(r->go_ev, &tv) == 0)
			return;
	}
	run_fail(r, RULE_RUNTIME, "pool entry %s: cannot start: %s", r->id,
	    rc == 1 ? "its sbx-init is not reading its FIFO" :
	    strerror(errno));
}

/* The cgroups were shared with egressd (by the monitor, at the create)
 * before any process of the sandbox could connect to its channel. */
static void
run_do_start(struct run *r)
{
	char	 err[MON_ERR_MAX];

	r->state = RUN_START;
	r->start_ns = mono_ns();
	if (r->pool_key[0] != '\0') {
		run_go(r);
		return;
	}
	if (run_cmd_spawn(r, MON_START, -1, -1, err, sizeof(err)) == -1)
		run_fail(r, RULE_RUNTIME, "cannot start %s: %s", r->rt->path,
		    err);
}

/*
 * A cold launch under runc (or crun): the runtime's `run --detach`, its
 * create and start in one process (MON_RUN) -- one Go runtime's start-up
 * and one monitor round trip fewer than CREATE then START.  Everything
 * the start waited for is done before this: the staging sealed, the
 * launch record durable, the egress channel open; the monitor makes the
 * cgroups readable to egressd before the runtime runs, and the runtime
 * writes every limit into them and makes the namespaces before its init
 * runs the code.  The init may exit before the RUN's exit tells its pid:
 * its exit waits among the orphans (run_orphan_claim).  runsc and
 * sbx-vmrt keep create and start.
 */
static void
run_do_create(struct run *r)
{
	char	 err[MON_ERR_MAX];
	int	 p1[2], p2[2];

	r->state = RUN_CREATE;
	/* sbx-vmrt (microvm, runc's flavor of spec) answers create and
	 * start, not run. */
	r->one_step = r->rt->flavor == SPEC_RUNC &&
	    r->tier != SBX__V1__ISOLATION__ISOLATION_MICROVM;
	if (pipe2(p1, O_CLOEXEC) == -1) {
		run_fail(r, RULE_RUNTIME, "pipe: %s", strerror(errno));
		return;
	}
	if (pipe2(p2, O_CLOEXEC) == -1) {
		close(p1[0]);
		close(p1[1]);
		run_fail(r, RULE_RUNTIME, "pipe: %s", strerror(errno));
		return;
	}
	r->out[0].fd = p1[0];
	r->out[1].fd = p2[0];
	r->spawn_ns = r->start_ns = mono_ns();
	/* RUN makes the cgroups before the runtime runs: removed even if
	 * it fails. */
	r->cg = r->one_step;
	if (run_cmd_spawn(r, r->one_step ? MON_RUN : MON_CREATE, p1[1], p2[1],
	    err, sizeof(err)) == -1) {
		close(p1[1]);
		close(p2[1]);
		run_fail(r, RULE_RUNTIME, "cannot start %s: %s", r->rt->path,
		    err);
		return;
	}
	r->created = r->cg = 1;
	close(p1[1]);
	close(p2[1]);
}

static void	run_deleted(struct run *);

static void
run_cmd_done(struct run *r, int st)
{
	char	 msg[512];
	ssize_t	 n;

	evtimer_del(r->cmd_ev);
	r->cmd_pid = 0;
	switch (r->state) {
	case RUN_CREATE:
		if (st != 0 || (r->pid = run_read_pid(r->dir)) == -1) {
			/* The runtime said why on stderr (our pipe). */
			fcntl(r->out[1].fd, F_SETFL, O_NONBLOCK);
			n = read(r->out[1].fd, msg, sizeof(msg) - 1);
			msg[n > 0 ? n : 0] = '\0';
			msg[strcspn(msg, "\n")] = '\0';
			run_fail(r, RULE_RUNTIME, "%s %s failed (status "
			    "%d): %s", r->rt->path, r->one_step ? "run" :
			    "create", st, msg);
			return;
		}
		if (run_watch_output(r) == -1) {
			run_fail(r, RULE_RUNTIME, "cannot watch the output "
			    "pipes");
			return;
		}
		if (r->one_step) {
			run_orphan_claim(r);
			run_started(r);
			return;
		}
		run_do_start(r);
		return;
	case RUN_START:
		if (st != 0) {
			run_fail(r, RULE_RUNTIME, "%s start failed (status %d)",
			    r->rt->path, st);
			return;
		}
		run_started(r);
		return;
	case RUN_DELETE:
		if (st != 0)
			log_debug("execution %s: %s delete did not succeed",
			    r->id, r->rt->path);
		run_deleted(r);
		return;
	default:
		log_warnx("execution %s: a runtime command ended in state %d",
		    r->id, (int)r->state);
		return;
	}
}

/* ---- the end of an execution ---- */

/* Read the result (status, output, cgroup statistics): before delete. */
static void
run_collect(struct run *r)
{
	struct launchd	*ld = r->ld;
	const char	*parent = ld->conf->cgroup_parent;
	uint64_t	 oom, failcnt, pidsmax;

	/* Drain what is already in the pipes: the init has exited. */
	for (int i = 0; i < 2; i++)
		if (!r->out[i].eof && r->out[i].fd != -1 &&
		    r->out[i].buf != NULL)
			run_out_cb(r->out[i].fd, EV_READ, r);
	if (WIFEXITED(r->status)) {
		r->code_exit = WEXITSTATUS(r->status);
		/* sbx-init reports a signalled program as 128+signal. */
		if (r->code_exit > 128)
			r->sig = r->code_exit - 128;
	} else if (WIFSIGNALED(r->status)) {
		r->sig = WTERMSIG(r->status);
		r->code_exit = 128 + r->sig;
	}
	r->cpu_ms = runtime_cg_read(parent, r->id, "cpuacct", "cpuacct.usage",
	    NULL) / 1000000;
	r->peak_kb = runtime_cg_read(parent, r->id, "memory",
	    "memory.max_usage_in_bytes", NULL) / 1024;
	r->wall_ms = r->end_ns > r->start_ns ?
	    (r->end_ns - r->start_ns) / 1000000 : 0;
	oom = runtime_cg_read(parent, r->id, "memory", "memory.oom_control",
	    "oom_kill");
	failcnt = runtime_cg_read(parent, r->id, "memory", "memory.failcnt",
	    NULL);
	pidsmax = runtime_cg_read(parent, r->id, "pids", "pids.events", "max");
	if (r->wall_hit)
		r->limits[r->nlim++] = (char *)"wall";
	if (oom > 0 || (failcnt > 0 && r->sig == SIGKILL && !r->wall_hit)) {
		r->limits[r->nlim++] = (char *)"memory";
		ld->metrics.memory_kills++;
	}
	if (pidsmax > 0) {
		r->limits[r->nlim++] = (char *)"pids";
		ld->metrics.pids_hits++;
	}
}

/*
 * The runtime's delete, spawned once the init is reaped, while the
 * boundaries take their turn and the result goes out: under runc the
 * container's init is PID 1 of its own pid namespace, and the kernel lets
 * it be reaped only once every other process in that namespace has exited,
 * so nothing of the sandbox is alive.  What is left is the runtime's state
 * and cgroups and our staging, removed when the delete returns
 * (run_bg_deleted), after the reply if it comes first.
 */
static void
run_bg_delete(struct run *r)
{
	char		 err[MON_ERR_MAX];
	struct timeval	 tv = { LAUNCHD_CMD_SECONDS, 0 };

	if (r->kill_pid > 0) {
		/* Delete waits for it: both take the runtime's state lock. */
		r->del_wait = 1;
		return;
	}
	r->del_wait = 0;
	/* After the init's end: no launch waits for it. */
	if ((r->del_pid = mon_client_cmd(r->ld, r->id, r->tier, MON_DELETE,
	    LAUNCHD_BG_NICE, -1, -1, err, sizeof(err))) == -1) {
		log_warnx("execution %s: cannot run %s delete: %s", r->id,
		    r->rt->path, err);
		r->del_pid = 0;
		r->created = 0;
		return;
	}
	evtimer_add(r->cmd_ev, &tv);
}

static void
run_bg_deleted(struct run *r, int st)
{
	evtimer_del(r->cmd_ev);
	/* After the result: said here, and UNSTAGE still kills and removes
	 * what is left (no entry is ever used twice). */
	if (st != 0)
		log_warnx("execution %s: %s delete after the result did not "
		    "succeed (status %d)", r->id, r->rt->path, st);
	r->created = 0;
	if (r->host_pending) {
		r->host_pending = 0;
		run_cleanup_later(r);
	}
	if (r->replied && !r->clean_wait) {
		run_unlink(r);
		run_free(r);
	}
}

static void
run_finish(struct run *r)
{
	if (r->finished)
		return;
	r->finished = 1;
	if (r->grace_ev != NULL)
		evtimer_del(r->grace_ev);
	run_collect(r);
	if (r->rt->flavor == SPEC_RUNC && r->exited && r->created &&
	    r->fail_msg == NULL && r->fail_rule == NULL) {
		if (r->wall_ev != NULL)
			evtimer_del(r->wall_ev);
		r->state = RUN_DELETE;
		run_bg_delete(r);
		run_deleted(r);
		return;
	}
	if (r->rt->flavor == SPEC_RUNSC && r->exited && r->created &&
	    r->fail_msg == NULL && r->fail_rule == NULL) {
		if (r->wall_ev != NULL)
			evtimer_del(r->wall_ev);
		r->state = RUN_DELETE;
		r->gone_wait = 1;
		r->gone_ns = mono_ns();
		run_gone(r);
		return;
	}
	run_teardown(r);
}

/*
 * runsc's sandbox process is not PID 1 of a pid namespace, so its end
 * alone does not prove the sandbox gone: its ptrace stubs, and the gofer
 * that holds the host's files for it (the scratch among them), are
 * processes of their own.  The proof is the monitor's HANDOVER: it is
 * answered only for a container whose init the monitor has reaped and
 * whose cgroups, in every controller, hold no process (sbx-monitor), and
 * runsc puts the sandbox, its stubs and its gofer in the container's
 * cgroups (tests/launch checks that the gofer is there).  The kernel
 * lists a process in its cgroup until after it has closed its files
 * (cgroup_exit() follows exit_files()), and nothing outside the sandbox
 * puts one back (only root can, and the monitor starts nothing there
 * after CREATE).  Once HANDOVER answers, no process of the execution is
 * left to write an output, hold a channel or touch the host: the
 * boundaries take their turn and the result goes out while `runsc delete`
 * removes the runtime's state and cgroups in the background, as under
 * runc.  The gofer usually ends a few milliseconds after the sandbox:
 * HANDOVER is asked again on each orphan's exit (run_gone_retry) and every
 * RUN_GONE_POLL_MS; when no proof comes within RUN_GONE_MS, or HANDOVER
 * fails otherwise, the old order holds: the delete first (it kills what
 * runsc knows of), then the release, which asks HANDOVER again and
 * withholds everything if a process is still there.
 */
static void
run_gone(struct run *r)
{
	char		 why[MON_ERR_MAX];
	struct timeval	 tv = { 0, RUN_GONE_POLL_MS * 1000 };
	int		 gate = r->ld->conf->gate_socket != NULL, fd;

	why[0] = '\0';
	/* Empty cgroups prove something only where runsc made them: with
	 * none (a tier run with --ignore-cgroups), there is no proof. */
	if (runtime_cg_read(r->ld->conf->cgroup_parent, r->id, "memory",
	    "memory.limit_in_bytes", NULL) == 0) {
		bufprintf(why, sizeof(why), "the container has no memory "
		    "cgroup");
		goto noproof;
	}
	if ((fd = mon_client_handover(r->ld, r->id, gate ? r->outputs : NULL,
	    gate ? r->noutputs : 0, why, sizeof(why))) != -1) {
		r->gone_wait = 0;
		if (r->gone_ev != NULL)
			evtimer_del(r->gone_ev);
		r->scratch_fd = fd;
		log_debug("execution %s: nothing of the sandbox left %llu us "
		    "after its end", r->id, (unsigned long long)
		    ((mono_ns() - r->end_ns) / 1000));
		run_bg_delete(r);
		run_deleted(r);
		return;
	}
	if (errno == EBUSY && mono_ns() - r->gone_ns <
	    (uint64_t)RUN_GONE_MS * 1000000) {
		if (r->gone_ev == NULL && (r->gone_ev = evtimer_new(r->ld->base,
		    run_gone_cb, r)) == NULL)
			fatal("evtimer_new");
		evtimer_add(r->gone_ev, &tv);
		return;
	}
noproof:
	log_warnx("execution %s: no proof that the sandbox is gone (%s): "
	    "deleting it first", r->id, why);
	r->gone_wait = 0;
	if (r->gone_ev != NULL)
		evtimer_del(r->gone_ev);
	run_teardown(r);
}

static void
run_gone_cb(evutil_socket_t fd, short ev, void *arg)
{
	struct run	*r = arg;

	(void)fd;
	(void)ev;
	run_ctx(r);
	if (r->gone_wait)
		run_gone(r);
	log_ctx_clear();
}

/* An orphan the runtime left has ended (a gofer, a stub): it may have
 * been the last process of a sandbox whose end waits for the proof. */
static void
run_gone_retry(struct launchd *ld)
{
	struct run	*r, *next;

	for (r = ld->runs; r != NULL; r = next) {
		next = r->next;
		if (r->gone_wait) {
			run_ctx(r);
			run_gone(r);
			log_ctx_clear();
		}
	}
}

/* Delete the container (a command), then run_deleted. */
static void
run_teardown(struct run *r)
{
	char	 err[MON_ERR_MAX];

	if (r->wall_ev != NULL)
		evtimer_del(r->wall_ev);
	r->state = RUN_DELETE;
	if (!r->created) {
		run_deleted(r);
		return;
	}
	if (!r->exited && r->pid > 0)
		(void)mon_client_sigkill(r->ld, r->pid);
	if (r->kill_pid > 0) {
		r->delete_pending = 1;
		return;
	}
	r->delete_pending = 0;
	if (run_cmd_spawn(r, MON_DELETE, -1, -1, err, sizeof(err)) == -1) {
		log_warnx("execution %s: cannot run %s delete: %s", r->id,
		    r->rt->path, err);
		r->created = 0;
		run_deleted(r);
	}
}

/* Something failed after staging began: undo, then refuse. */
static void
run_fail(struct run *r, const char *rule, const char *fmt, ...)
{
	va_list	 ap;

	if (r->fail_msg == NULL) {
		va_start(ap, fmt);
		if (vasprintf(&r->fail_msg, fmt, ap) == -1)
			r->fail_msg = NULL;
		va_end(ap);
		r->fail_rule = rule;
	}
	r->finished = 1;
	/* The channel's opening or the launch record still under way: the
	 * teardown waits for it (run_need_done). */
	if (r->need != 0)
		return;
	run_teardown(r);
}

static void
run_recorded_1(struct launchd *ld, void *arg, int ok)
{
	struct run		*r = arg;

	(void)ld;
	if (!ok)
		log_warnx("audit: cannot record the exit of %s",
		    r->grant->execution_id);
	if (r->par)
		run_tail_done(r, TAIL_RECORD);
	else
		run_reply(r);
}

static void
run_recorded(struct launchd *ld, void *arg, int ok)
{
	run_ctx(arg);
	run_recorded_1(ld, arg, ok);
	log_ctx_clear();
}

/* The result: what gated released, egressd's usage and denials, the
 * exit; then forget the execution once its cleanup is done. */
static void
run_reply(struct run *r)
{
	struct launchd		*ld = r->ld;
	Sbx__V1__ExecutionResult res = SBX__V1__EXECUTION_RESULT__INIT;
	Sbx__V1__Usage		 use = SBX__V1__USAGE__INIT;
	Sbx__V1__PolicyRef	 ref = SBX__V1__POLICY_REF__INIT;
	Sbx__V1__Envelope	 env;

	for (size_t i = 0; i < r->ndenials; i++) {
		log_ctx_rule(r->denials[i]->rule);
		log_info("execution %s: denied by %s (%s): %s",
		    r->grant->execution_id, r->denials[i]->rule,
		    r->denials[i]->boundary, r->denials[i]->detail);
	}
	ld->metrics.completed++;
	use.cpu_ms = r->cpu_ms;
	use.peak_memory_kb = r->peak_kb;
	use.wall_ms = r->wall_ms;
	ref.name = r->grant->policy->name;
	ref.version = r->grant->policy->version;
	ref.hash = r->grant->policy_hash;
	res.task_id = r->grant->task_id;
	res.traceparent = r->traceparent;
	res.execution_id = r->grant->execution_id;
	res.policy = &ref;
	res.exit_code = r->code_exit;
	res.signal = r->sig;
	res.limits_hit = r->limits;
	res.n_limits_hit = r->nlim;
	res.usage = &use;
	use.egress_bytes_out = r->eg_out;
	use.egress_bytes_in = r->eg_in;
	use.egress_requests = (uint32_t)r->eg_req;
	use.egress_unknown = r->eg_tried && !r->eg_known;
	res.denials = r->denials;
	res.n_denials = r->ndenials;
	if (r->released != NULL) {
		/* Only what gated let through: labelled, cleaned, capped. */
		res.stdout = r->released->stdout;
		res.stderr = r->released->stderr;
		res.stdout_truncated = r->out[0].truncated ||
		    r->released->stdout_truncated;
		res.stderr_truncated = r->out[1].truncated ||
		    r->released->stderr_truncated;
		res.outputs = r->released->outputs;
		res.n_outputs = r->released->n_outputs;
		res.dropped = r->released->dropped;
		res.n_dropped = r->released->n_dropped;
		res.stdout_report = r->released->stdout_report;
		res.stderr_report = r->released->stderr_report;
		res.dropped_unlisted = r->released->dropped_unlisted;
	} else {
		/* Withheld: nothing of the sandbox's text without the gate. */
		res.dropped = r->nogate;
		res.n_dropped = r->nnogate;
	}
	frame_env_init(&env, r->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_RESULT;
	env.result = &res;
	if (!frame_conn_closed(r->conn))
		frame_conn_send(r->conn, &env);
	if (r->pool_key[0] != '\0' && !ld->stopping)
		pool_fill_soon(ld);
	if (r->del_pid > 0 || r->del_wait || r->clean_wait) {
		r->replied = 1;
		r->state = RUN_CLEANUP;
		return;
	}
	run_unlink(r);
	run_free(r);
}

/* Remove what is left of the execution on the host; record its exit. */
static void
run_cleanup_host(struct run *r)
{
	if (r->del_pid > 0 || r->del_wait) {
		r->host_pending = 1;	/* run_bg_deleted does it */
		return;
	}
	/* UNSTAGE removes the cgroups too, once it has killed what ran
	 * in them: CG_REMOVE only for an execution never staged. */
	if (r->cg) {
		r->cg = 0;
		if (!r->staged)
			(void)mon_client_cg_remove(r->ld, r->id);
	}
	if (r->staged) {
		r->staged = 0;
		(void)mon_client_unstage(r->ld, r->id);
	}
}

static void
run_clean_cb(evutil_socket_t fd, short what, void *arg)
{
	struct run	*r = arg;

	(void)fd;
	(void)what;
	run_ctx(r);
	r->clean_wait = 0;
	run_cleanup_host(r);
	if (r->replied && r->del_pid == 0 && !r->del_wait) {
		run_unlink(r);
		run_free(r);
	}
	log_ctx_clear();
}

/*
 * The same, after whatever else the loop has ready (LAUNCHD_PRIO_BG):
 * UNSTAGE is a synchronous call to sbx-monitor, and the monitor's
 * umounts and rmdirs take milliseconds, more under load; made at
 * once, twenty of them after a burst of exits held every other
 * execution's start and result behind them (bench/README, item 3).
 * Until it runs the execution counts as cleaning up
 * (sbx_launchd_cleanups_pending) and is not freed; run_free, and a
 * shutdown, do it at once.
 */
static void
run_cleanup_later(struct run *r)
{
	static const struct timeval	 now = { 0, 0 };

	if (r->del_pid > 0 || r->del_wait || r->ld->stopping ||
	    (!r->cg && !r->staged)) {
		run_cleanup_host(r);
		return;
	}
	if (r->clean_ev == NULL &&
	    ((r->clean_ev = evtimer_new(r->ld->base, run_clean_cb, r)) ==
	    NULL || event_priority_set(r->clean_ev, LAUNCHD_PRIO_BG) == -1)) {
		run_cleanup_host(r);
		return;
	}
	r->clean_wait = 1;
	evtimer_add(r->clean_ev, &now);
}

static void
run_record_exit(struct run *r)
{
	char	*detail;

	xasprintf(&detail, "exit %d signal %d wall_ms %llu cpu_ms %llu "
	    "peak_kb %llu%s%s%s%s%s", r->code_exit, r->sig,
	    (unsigned long long)r->wall_ms, (unsigned long long)r->cpu_ms,
	    (unsigned long long)r->peak_kb,
	    r->nlim > 0 ? " limits " : "", r->nlim > 0 ? r->limits[0] : "",
	    r->nlim > 1 ? ",..." : "",
	    r->pool_key[0] != '\0' ? " pool entry " : "",
	    r->pool_key[0] != '\0' ? r->id : "");
	log_info("execution %s: %s", r->grant->execution_id, detail);
	r->state = RUN_RECORD_EXIT;
	run_audit(r, "exit", detail, run_recorded, r);
	free(detail);
}

/* The container is gone: close the egress channel, release, clean up,
 * record. */
/*
 * The end of an execution that ran: every process is dead, so the
 * boundaries are asked at once -- egressd closes the channel and reports
 * its usage and denials, gated releases from the scratch -- while the exit
 * record commits; the result goes out when all three are done
 * (run_tail_done).  A failed one goes the sequential way: close the
 * channel, clean up, refuse.
 */
static void
run_deleted(struct run *r)
{
	if (r->fail_msg != NULL || r->fail_rule != NULL) {
		if (r->egress_open)
			run_egress_close(r);
		else
			run_after_egress(r);
		return;
	}
	r->par = 1;
	/* TAIL_SETUP: nothing completing below may free r before we are
	 * done starting the rest. */
	r->tail = TAIL_SETUP | TAIL_GATE | TAIL_RECORD |
	    (r->egress_open ? TAIL_EGRESS : 0);
	if (r->egress_open)
		run_egress_close(r);
	run_release(r);
	run_record_exit(r);
	run_tail_done(r, TAIL_SETUP);
}

static void
run_tail_done(struct run *r, int what)
{
	r->tail &= ~what;
	if (r->tail == 0)
		run_reply(r);
}

void
run_child_exited(struct launchd *ld, pid_t pid, int st)
{
	struct run	*r;

	if (image_reaped(ld, pid, st) || pool_reaped(ld, pid, st))
		return;
	for (r = ld->runs; r != NULL; r = r->next)
		if ((r->pid == pid && !r->exited) ||
		    r->cmd_pid == pid || r->kill_pid == pid ||
		    r->del_pid == pid)
			break;
	if (r == NULL) {
		/* An orphan the runtime left, or a RUN's init that ended
		 * before the RUN did: kept for run_orphan_claim; and a
		 * proof of a sandbox gone may wait for it. */
		run_orphan_keep(ld, pid, st);
		run_gone_retry(ld);
		return;
	}
	if (r->del_pid == pid) {
		r->del_pid = 0;
		run_bg_deleted(r, st);
		return;
	}
	if (r->kill_pid == pid) {
		r->kill_pid = 0;
		if (r->del_wait)
			run_bg_delete(r);
		else if (r->delete_pending)
			run_teardown(r);
		return;
	}
	if (r->cmd_pid == pid) {
		run_cmd_done(r, st);
		return;
	}
	r->exited = 1;
	r->status = st;
	r->end_ns = mono_ns();
	if (r->state == RUN_RUNNING)
		run_exited(r);
	/* In RUN_START: when start returns.  Later: nothing. */
}

void
run_reap_children(struct launchd *ld)
{
	pid_t	 pid;
	int	 st;

	/* The launcher's own: image preparations, and the monitor. */
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
		if (!mon_client_reaped(ld, pid, st))
			run_child_exited(ld, pid, st);
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

static void
run_launched_1(struct launchd *ld, void *arg, int ok)
{
	struct run	*r = arg;

	(void)ld;
	r->need &= ~NEED_RECORD;
	if (!ok) {
		run_fail(r, RULE_RUNTIME, "the audit log cannot record the "
		    "launch");
		return;
	}
	run_need_done(r, 0);
}

static void
run_launched(struct launchd *ld, void *arg, int ok)
{
	run_ctx(arg);
	run_launched_1(ld, arg, ok);
	log_ctx_clear();
}

/* in/, code/, the channel's socket and CA are all there: from now on
 * they are root's, and nothing the launcher does changes what the
 * sandbox sees.  A cold launch's spec follows.  0, or -1 failed. */
static int
run_seal(struct run *r)
{
	char	 err[MON_ERR_MAX];

	if (mon_client_seal(r->ld, r->id, err, sizeof(err)) == -1) {
		run_fail(r, RULE_RUNTIME, "sealing the staging: %s", err);
		return -1;
	}
	if (r->pool_key[0] == '\0' && run_spec(r) == -1)
		return -1;
	r->specd = 1;
	return 0;
}

/*
 * The launch record and the egress channel are asked for at once; the
 * sandbox starts when both are there (the record durable, the channel
 * open), and a failure of either waits for the other before the teardown.
 * The record commits on the audit queue's thread (record.c): a cold
 * launch whose channel opens first seals its staging and has its spec
 * written meanwhile -- neither starts anything -- and its runtime is run
 * the moment the record is durable.
 */
static void
run_need_done(struct run *r, int what)
{
	r->need &= ~what;
	if (r->need == NEED_RECORD && !r->specd && r->pool_key[0] == '\0' &&
	    r->fail_msg == NULL && r->fail_rule == NULL && !r->ld->stopping) {
		(void)run_seal(r);
		return;
	}
	if (r->need != 0)
		return;
	if (r->fail_msg != NULL || r->fail_rule != NULL) {
		run_teardown(r);
		return;
	}
	if (r->ld->stopping) {
		run_fail(r, RULE_RUNTIME, "launchd-sbx is shutting down");
		return;
	}
	if (!r->specd && run_seal(r) == -1)
		return;
	if (r->pool_key[0] != '\0') {
		run_do_start(r);
		return;
	}
	run_do_create(r);
}

/* The spec parameters of the launch, the paths in the given buffers:
 * what its pool key is made of (the monitor renders the real spec from
 * the same values, run_spec). */
static void
run_params(struct run *r, struct spec_params *sp, char in[PATH_MAX],
    char code[PATH_MAX], char cgpath[PATH_MAX], char prog[PATH_MAX],
    char *argv[3])
{
	const Sbx__V1__PolicyGrant	*g = r->grant;
	struct launchd			*ld = r->ld;

	bufprintf(in, PATH_MAX, "%s/in", r->dir);
	bufprintf(code, PATH_MAX, "%s/code", r->dir);
	bufprintf(cgpath, PATH_MAX, "/%s/%s", ld->conf->cgroup_parent, r->id);
	bufprintf(prog, PATH_MAX, "/code/%s", r->code_name);
	argv[0] = (char *)r->interp;
	argv[1] = prog;
	argv[2] = NULL;
	memset(sp, 0, sizeof(*sp));
	sp->policy_name = g->policy->name;
	sp->policy_version = g->policy->version;
	if (g->policy->limits != NULL) {
		sp->cpus_milli = g->policy->limits->cpus_milli;
		sp->memory_mb = g->policy->limits->memory_mb;
		sp->pids = g->policy->limits->pids;
		sp->scratch_mb = g->policy->limits->scratch_mb;
	}
	sp->policy_hash = g->policy_hash;
	sp->task_id = g->task_id;
	sp->execution_id = g->execution_id;
	sp->rootfs = r->rootfs;
	sp->in_dir = in;
	sp->code_dir = code;
	sp->scratch_dir = r->scratch;
	sp->egress_sock = NULL;		/* the channel is not open yet */
	sp->ca_file = NULL;
	sp->init_path = ld->conf->init;
	sp->cgroups_path = cgpath;
	sp->gid = r->gid;
	sp->argv = argv;
	sp->flavor = r->rt->flavor;
}

/* Take a pool entry for this launch, if one fits: 1 taken, 0 none. */
static int
run_from_pool(struct run *r)
{
	struct spec_params	 sp;
	struct pool_entry	*pe;
	char			 in[PATH_MAX], code[PATH_MAX];
	char			 cgpath[PATH_MAX], prog[PATH_MAX], *argv[3];
	char			 key[65];

	if (r->ld->pool == NULL)
		return 0;
	run_params(r, &sp, in, code, cgpath, prog, argv);
	/* The channel opens after the entry is taken: its key says there
	 * will be one (pool_key puts placeholders in for both). */
	if (r->ld->conf->egress_socket != NULL) {
		sp.egress_sock = "/egress";
		sp.ca_file = "/ca";
	}
	if (pool_key(&sp, (int)r->grant->policy->isolation, key) == -1)
		return 0;
	if ((pe = pool_take(r->ld, key)) == NULL) {
		pool_learn(r->ld, r->grant->policy, key);
		/* Below its size (entries lost to failed launches): refill. */
		pool_fill_soon(r->ld);
		return 0;
	}
	memcpy(r->pool_key, key, sizeof(r->pool_key));
	bufprintf(r->id, sizeof(r->id), "%s", pool_entry_id(pe));
	bufprintf(r->dir, sizeof(r->dir), "%s", pool_entry_dir(pe));
	r->pid = pool_entry_pid(pe);
	/* The entry's group, held since its create, is the run's now. */
	r->gid = pool_entry_take_gid(pe);
	pool_entry_fds(pe, &r->out[0].fd, &r->out[1].fd);
	pool_entry_free(pe);
	r->staged = r->cg = r->created = 1;
	r->ld->metrics.pooled++;
	/* The replacement is made once this execution has its result
	 * (run_recorded): made now, its runtime's create and start would
	 * share the CPUs with the program that took the entry. */
	return 1;
}

/* Record the launch; then create (or start the pool entry). */
static void
run_record_launch(struct run *r)
{
	const Sbx__V1__Policy	*pol = r->grant->policy;
	char			*detail;

	/* A pooled container's spec names the pool entry: this record ties
	 * the execution (and its policy hash) to that entry. */
	xasprintf(&detail, "%s@%u isolation %s image %s container %s group "
	    "%lu%s%s%s%s%s", pol->name, pol->version,
	    policy_isolation_name(pol->isolation), pol->image, r->id,
	    (unsigned long)r->gid,
	    r->ld->conf->egress_socket != NULL ? " egress channel" : "",
	    r->pool_key[0] != '\0' ? " pool entry " : "",
	    r->pool_key[0] != '\0' ? r->id : "",
	    r->pool_key[0] != '\0' ? " key " : "", r->pool_key);
	r->state = RUN_RECORD_LAUNCH;
	run_audit(r, "launch", detail, run_launched, r);
	free(detail);
}

/* A text field of a MON_SPEC: 0, or -1 when it does not fit. */
static int
run_text(char dst[MON_TEXT_MAX], const char *src)
{
	return bufprintf(dst, MON_TEXT_MAX, "%s", src != NULL ? src : "") >=
	    MON_TEXT_MAX ? -1 : 0;
}

/* Sealed (and the egress channel open, when there is one): the spec,
 * which the monitor renders from the plain parameters run_params gives
 * spec_render, its own paths filled in. */
static int
run_spec(struct run *r)
{
	const Sbx__V1__PolicyGrant	*g = r->grant;
	const Sbx__V1__Limits		*lim = g->policy->limits;
	struct mon_spec			 ms;
	char				 err[MON_ERR_MAX], prog[PATH_MAX];

	memset(&ms, 0, sizeof(ms));
	bufprintf(ms.id, sizeof(ms.id), "%s", r->id);
	bufprintf(prog, sizeof(prog), "/code/%s", r->code_name);
	ms.tier = (uint32_t)r->tier;
	ms.flags = (r->egress_open ? MON_SPEC_EGRESS : 0) |
	    (r->egress_open && r->ca[0] != '\0' ? MON_SPEC_CA : 0);
	ms.policy_version = g->policy->version;
	ms.cpus_milli = lim->cpus_milli;
	ms.memory_mb = lim->memory_mb;
	ms.pids = lim->pids;
	ms.scratch_mb = lim->scratch_mb;
	ms.gid = (uint32_t)r->gid;
	if (bufprintf(ms.image, sizeof(ms.image), "%s/rootfs", r->hex) >=
	    (int)sizeof(ms.image) ||
	    run_text(ms.policy_name, g->policy->name) == -1 ||
	    run_text(ms.policy_hash, g->policy_hash) == -1 ||
	    run_text(ms.task_id, g->task_id) == -1 ||
	    run_text(ms.execution_id, g->execution_id) == -1 ||
	    run_text(ms.interp, r->interp) == -1 ||
	    run_text(ms.prog, prog) == -1) {
		run_fail(r, RULE_BAD_REQUEST, "a field of the runtime spec is "
		    "longer than %d bytes", MON_TEXT_MAX - 1);
		return -1;
	}
	if (mon_client_spec(r->ld, &ms, err, sizeof(err)) == -1) {
		run_fail(r, errno == EINVAL ? RULE_BAD_REQUEST : RULE_RUNTIME,
		    "%s", err);
		return -1;
	}
	return 0;
}

/* ---- egressd: the channel ---- */

static void
run_denial(struct run *r, const char *rule, const char *boundary,
    const char *fmt, ...)
{
	Sbx__V1__Denial	*d;
	va_list		 ap;

	d = xcalloc(1, sizeof(*d));
	sbx__v1__denial__init(d);
	d->rule = xstrdup(rule);
	d->boundary = xstrdup(boundary);
	va_start(ap, fmt);
	if (vasprintf(&d->detail, fmt, ap) == -1)
		d->detail = xstrdup("");
	va_end(ap);
	d->time_ns = (int64_t)(now_s() * 1000000000LL);
	r->denials = xreallocarray(r->denials, r->ndenials + 1,
	    sizeof(*r->denials));
	r->denials[r->ndenials++] = d;
}

static void
run_egress_fail(struct run *r, const char *what)
{
	r->fail_code = SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE;
	run_fail(r, RULE_EGRESS_DOWN, "egressd (%s): %s; nothing ran",
	    r->ld->conf->egress_socket, what);
}

static void
run_egress_opened_1(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	struct run			*r = arg;
	const Sbx__V1__EgressOpened	*o;
	char				 what[512];

	(void)fc;
	frame_client_free(r->peer);
	r->peer = NULL;
	r->need &= ~NEED_EGRESS;
	if ((o = egress_client_opened(rep, why, what, sizeof(what))) == NULL) {
		run_egress_fail(r, what);
		return;
	}
	/* From here on the channel is closed whatever happens. */
	r->egress_open = 1;
	if (o->ca_cert_pem.len > 0) {
		/* Into run/, ours: the monitor's SEAL makes it root's and
		 * the sandbox group's, and moves a cold launch's up into
		 * the staging dir (a pool entry's sandbox sees run/). */
		bufprintf(r->ca, sizeof(r->ca), "%s/run/%s", r->dir,
		    LAUNCHD_CA);
		if (runtime_write_file(r->ca, o->ca_cert_pem.data,
		    o->ca_cert_pem.len) == -1) {
			run_fail(r, RULE_RUNTIME, "staging %s: %s", r->ca,
			    strerror(errno));
			return;
		}
	}
	run_need_done(r, 0);
}

static void
run_egress_opened(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	run_ctx(arg);
	run_egress_opened_1(fc, rep, why, arg);
	log_ctx_clear();
}

static void
run_egress_open(struct run *r)
{
	char	 err[512], path[PATH_MAX], cg[PATH_MAX];
	int	 fd, rc;

	r->state = RUN_EGRESS_OPEN;
	r->eg_tried = 1;
	/* run/ for both: SEAL moves a cold launch's up (monitor.h). */
	bufprintf(path, sizeof(path), "%s/run/%s", r->dir, LAUNCHD_EGRESS_SOCK);
	if ((fd = egress_client_listen(path, err, sizeof(err))) == -1) {
		r->need &= ~NEED_EGRESS;
		run_fail(r, RULE_RUNTIME, "the egress channel: %s", err);
		return;
	}
	bufprintf(cg, sizeof(cg), "/%s/%s", r->ld->conf->cgroup_parent, r->id);
	rc = egress_client_open(r->ld, &r->peer, fd, r->signed_,
	    r->traceparent, r->gid, cg,
	    run_egress_opened, r, err, sizeof(err));
	/* egressd holds its own copy now (or never will). */
	close(fd);
	if (rc == -1) {
		r->need &= ~NEED_EGRESS;
		run_egress_fail(r, err);
	}
}

static void
run_egress_usage(struct run *r, const Sbx__V1__EgressUsage *u)
{
	r->eg_known = 1;
	r->eg_out = u->bytes_out;
	r->eg_in = u->bytes_in;
	r->eg_req = u->requests;
	for (size_t i = 0; i < u->n_denials; i++) {
		const Sbx__V1__RuleCount *rc = u->denials[i];

		if (rc->rule == NULL || rc->count == 0)
			continue;
		/* The first one says which host and when: what a person
		 * deciding the task's next request needs to read. */
		if (rc->first != NULL && rc->first[0] != '\0')
			run_denial(r, rc->rule, "egress", "%llu request(s); "
			    "first: %.300s", (unsigned long long)rc->count,
			    rc->first);
		else
			run_denial(r, rc->rule, "egress", "%llu request(s)",
			    (unsigned long long)rc->count);
		if (rc->first_ns > 0)
			r->denials[r->ndenials - 1]->time_ns = rc->first_ns;
	}
}

/*
 * egressd could not say what went through the channel: it died or was
 * restarted during the run (the code's requests then failed, closed, as
 * they should), or it does not answer now.  The result names the lost
 * boundary, so an orchestrator can tell a broken deployment from a run
 * whose requests were refused; policyd counts the whole egress allowance
 * against the task (eg_known stays 0).
 */
static void
run_egress_lost(struct run *r, const char *why)
{
	log_warnx("execution %s: %s; its egress usage is unknown", r->id, why);
	run_denial(r, RULE_EGRESS_DOWN, "egress", "egressd (%s): %s; the "
	    "egress channel was lost, what went through it is unknown",
	    r->ld->conf->egress_socket, why);
}

static void
run_egress_closed_1(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	struct run			*r = arg;
	const Sbx__V1__EgressUsage	*u;
	char				 err[512];

	(void)fc;
	frame_client_free(r->peer);
	r->peer = NULL;
	if ((u = egress_client_usage(rep, why, err, sizeof(err))) != NULL)
		run_egress_usage(r, u);
	else
		run_egress_lost(r, err);
	run_after_egress(r);
}

static void
run_egress_closed(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	run_ctx(arg);
	run_egress_closed_1(fc, rep, why, arg);
	log_ctx_clear();
}

static void
run_egress_close(struct run *r)
{
	char	 err[512];

	r->egress_open = 0;
	r->state = RUN_EGRESS_CLOSE;
	if (egress_client_close(r->ld, &r->peer, r->grant->execution_id,
	    run_egress_closed, r, err, sizeof(err)) == -1) {
		run_egress_lost(r, err);
		run_after_egress(r);
	}
}

/* Shutdown: close a channel without the loop (best effort, bounded). */
static void
run_egress_close_sync(struct run *r)
{
	Sbx__V1__Envelope		*rep;
	const Sbx__V1__EgressUsage	*u;
	char				 err[512];

	r->egress_open = 0;
	if ((rep = egress_client_close_sync(r->ld, r->grant->execution_id)) ==
	    NULL) {
		run_egress_lost(r, "egress_close: no reply");
		return;
	}
	if ((u = egress_client_usage(rep, NULL, err, sizeof(err))) != NULL)
		run_egress_usage(r, u);
	else
		run_egress_lost(r, err);
	sbx__v1__envelope__free_unpacked(rep, NULL);
}

/* ---- gated: the release ---- */

/* Nothing released: stdout and stderr withheld; with no gate every
 * declared output is dropped "no-gate", with one a denial says why. */
static void
run_no_release(struct run *r, const char *why)
{
	r->withheld = 1;
	if (r->ld->conf->gate_socket != NULL) {
		run_denial(r, RULE_GATE_DOWN, "gate", "gated (%s): %s; "
		    "nothing was released", r->ld->conf->gate_socket, why);
		return;
	}
	for (size_t i = 0; i < r->noutputs; i++) {
		Sbx__V1__DroppedOutput	*d = xcalloc(1, sizeof(*d));

		sbx__v1__dropped_output__init(d);
		d->name = xstrdup(r->outputs[i]);
		d->reason = (char *)"no-gate";
		r->nogate = xreallocarray(r->nogate, r->nnogate + 1,
		    sizeof(*r->nogate));
		r->nogate[r->nnogate++] = d;
	}
}

/* gated has answered (or cannot): the scratch may go. */
static void
run_gate_done(struct run *r)
{
	run_cleanup_later(r);
	if (r->par)
		run_tail_done(r, TAIL_GATE);
	else
		run_record_exit(r);
}

static void
run_released_1(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	struct run	*r = arg;
	char		 err[512];

	(void)fc;
	if ((r->released = gate_client_result(rep, why, err, sizeof(err))) ==
	    NULL)
		run_no_release(r, err);
	frame_client_free(r->gpeer);
	r->gpeer = NULL;
	run_gate_done(r);
}

static void
run_released(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	run_ctx(arg);
	run_released_1(fc, rep, why, arg);
	log_ctx_clear();
}

/* Every process is dead (the container deleted, or under runsc the
 * monitor's proof in hand: run_gone): hand the scratch directory to
 * gated, by descriptor. */
static void
run_release(struct run *r)
{
	char	 err[512];
	int	 fd;

	if (r->ld->conf->gate_socket == NULL) {
		if (r->scratch_fd != -1) {
			close(r->scratch_fd);
			r->scratch_fd = -1;
		}
		run_no_release(r, "no gate");
		run_gate_done(r);
		return;
	}
	r->state = RUN_RELEASE;
	fd = r->scratch_fd;
	r->scratch_fd = -1;	/* gate_client_release closes it */
	if (gate_client_release(r->ld, &r->gpeer, r->id, fd, r->signed_,
	    r->traceparent, r->outputs, r->noutputs, r->out[0].buf, r->out[0].len,
	    r->out[1].buf, r->out[1].len, run_released, r, err,
	    sizeof(err)) == -1) {
		run_no_release(r, err);
		run_gate_done(r);
	}
}

static void
run_after_egress(struct run *r)
{
	if (r->par) {
		run_tail_done(r, TAIL_EGRESS);
		return;
	}
	if (r->fail_msg != NULL || r->fail_rule != NULL) {
		run_cleanup_host(r);
		run_abort(r, r->fail_rule != NULL ? r->fail_rule :
		    RULE_RUNTIME, r->fail_msg != NULL ? r->fail_msg :
		    "the runtime failed");
		return;
	}
	run_release(r);
}

/* Staged: open the egress channel and record the launch, at once. */
static void
run_begin(struct run *r)
{
	r->need = NEED_SETUP | NEED_RECORD |
	    (r->ld->conf->egress_socket != NULL ? NEED_EGRESS : 0);
	if (r->need & NEED_EGRESS)
		run_egress_open(r);
	run_record_launch(r);
	run_need_done(r, NEED_SETUP);
}

/* The image is ready: stage, spec (or pool entry), record the launch. */
static void
run_prepare(struct run *r)
{
	const Sbx__V1__Policy		*pol = r->grant->policy;
	const char			*rule;
	char				 err[1024];

	/* The host path of /scratch: what the pool key's spec is made
	 * from (pool_key puts a placeholder in for it). */
	bufprintf(r->scratch, sizeof(r->scratch), "%s/%s", r->dir,
	    LAUNCHD_SCRATCH);
	if (run_from_pool(r)) {
		if (run_stage(r, &rule, err, sizeof(err)) == -1) {
			run_fail(r, rule, "%s", err);
			return;
		}
		if (run_watch_output(r) == -1) {
			run_fail(r, RULE_RUNTIME, "cannot watch the output "
			    "pipes");
			return;
		}
		run_begin(r);
		return;
	}
	if (ident_take(r->ld, &r->gid) == -1) {
		bufprintf(err, sizeof(err), "all %u sandbox groups are in use "
		    "(sandbox_groups.count)", r->ld->conf->sandbox_gid_count);
		r->gid = 0;
		run_abort(r, RULE_RUNTIME, err);
		return;
	}
	/* The staging dir and its scratch tmpfs: the monitor's. */
	if (mon_client_stage(r->ld, r->id, pol->limits->scratch_mb, r->gid, err,
	    sizeof(err)) == -1) {
		run_abort(r, errno == EINVAL ? RULE_BAD_REQUEST : RULE_RUNTIME,
		    err);
		return;
	}
	r->staged = 1;
	if (run_stage(r, &rule, err, sizeof(err)) == -1) {
		run_cleanup_host(r);
		run_abort(r, rule, err);
		return;
	}
	/* From here every failure goes through run_fail: the teardown
	 * closes the egress channel and unstages. */
	run_begin(r);
}

void
run_image_ready(struct launchd *ld, const char *hex)
{
	struct run	*r;
	const char	*rule;
	char		 err[1024], h[65];
	int		 rc;

again:
	for (r = ld->runs; r != NULL; r = r->next) {
		if (r->state != RUN_IMAGE || strcmp(r->hex, hex) != 0)
			continue;
		rc = image_rootfs(ld, r->grant->policy->image, r->rootfs, h,
		    &rule, err, sizeof(err));
		if (rc == 1)
			continue;	/* prepared again: keep waiting */
		if (rc == -1)
			run_abort(r, rule, err);
		else
			run_prepare(r);
		goto again;
	}
}

static void
run_launch_1(struct launchd *ld, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__LaunchRequest	*l = req->launch;
	Sbx__V1__PolicyGrant		*g;
	const Sbx__V1__Policy		*pol;
	struct run			*r, *o;
	const char			*rule, *interp;
	char				 err[1024], msg[256];
	struct stat			 st;
	int				 tier, rc;

	if (l == NULL || l->signed_ == NULL) {
		record_refuse(ld, c, req->request_id, "", "",
		    RULE_BAD_REQUEST, "launch request carries no signed "
		    "policy");
		return;
	}
	if ((g = sign_verify_trust(&ld->trust, l->signed_, now_s(), err,
	    sizeof(err))) == NULL) {
		record_refuse(ld, c, req->request_id, "", "",
		    strncmp(err, "policy expired", 14) == 0 ? RULE_EXPIRED :
		    RULE_SIGNATURE, err);
		return;
	}
	pol = g->policy;

	r = xcalloc(1, sizeof(*r));
	r->ld = ld;
	r->conn = c;
	frame_conn_hold(c);
	r->request_id = req->request_id;
	r->grant = g;
	r->out[0].fd = r->out[1].fd = -1;
	r->scratch_fd = -1;
	r->go_fd = -1;
	r->next = ld->runs;
	ld->runs = r;

	if (!name_ok(g->execution_id) || !name_ok(g->task_id) ||
	    pol->limits == NULL || pol->limits->wall_seconds == 0) {
		run_abort(r, RULE_BAD_REQUEST, "grant has a bad execution or "
		    "task id, or no limits");
		return;
	}
	/* policyd checked it too; it goes into every record and line. */
	if (trace_parent_check(l->traceparent, msg, sizeof(msg)) == -1) {
		bufprintf(err, sizeof(err), "launch request: traceparent: %s",
		    msg);
		run_abort(r, RULE_BAD_REQUEST, err);
		return;
	}
	snprintf(r->traceparent, sizeof(r->traceparent), "%s",
	    l->traceparent != NULL ? l->traceparent : "");
	log_ctx_set(g->task_id, g->execution_id, g->policy_hash,
	    r->traceparent);
	if (l->code_name == NULL || !name_ok(l->code_name) ||
	    (interp = run_interpreter(l->code_name)) == NULL) {
		run_abort(r, RULE_BAD_REQUEST, "code_name must be a plain file "
		    "name ending in .py or .sh");
		return;
	}
	tier = (int)pol->isolation;
	if (tier <= 0 || tier >= LAUNCHD_NTIERS ||
	    ld->conf->runtimes[tier].path == NULL ||
	    !ld->conf->runtimes[tier].available) {
		bufprintf(err, sizeof(err), "isolation %s: %s",
		    policy_isolation_name(pol->isolation),
		    tier > 0 && tier < LAUNCHD_NTIERS &&
		    ld->conf->runtimes[tier].path != NULL ?
		    "its runtime failed the start-up check" :
		    "no runtime is configured for this tier");
		run_abort(r, RULE_TIER, err);
		return;
	}
	r->rt = &ld->conf->runtimes[tier];
	r->interp = interp;
	{
		/* egressd and gated verify the signed policy themselves. */
		size_t	 len = sbx__v1__signed_policy__get_packed_size(
			    l->signed_);
		uint8_t	*buf = xmalloc(len > 0 ? len : 1);

		sbx__v1__signed_policy__pack(l->signed_, buf);
		r->signed_ = sbx__v1__signed_policy__unpack(NULL, len, buf);
		free(buf);
		if (r->signed_ == NULL) {
			run_abort(r, RULE_BAD_REQUEST, "the signed policy "
			    "does not copy");
			return;
		}
	}
	if (l->n_outputs > 0) {
		r->outputs = xcalloc(l->n_outputs, sizeof(*r->outputs));
		for (size_t i = 0; i < l->n_outputs; i++)
			r->outputs[i] = xstrdup(l->outputs[i] != NULL ?
			    l->outputs[i] : "");
		r->noutputs = l->n_outputs;
	}
	r->code_name = xstrdup(l->code_name);
	r->code = xmalloc(l->code.len > 0 ? l->code.len : 1);
	if (l->code.len > 0)
		memcpy(r->code, l->code.data, l->code.len);
	r->code_len = l->code.len;
	r->cap = (size_t)(pol->outputs != NULL && pol->outputs->max_text_kb ?
	    pol->outputs->max_text_kb : LAUNCHD_TEXT_KB_DEFAULT) * 1024;
	r->tier = tier;
	if (run_container_id(r->id, sizeof(r->id)) == -1) {
		run_abort(r, RULE_RUNTIME, "no random bytes for a container id");
		return;
	}
	bufprintf(r->dir, sizeof(r->dir), "%s/x-%s", ld->conf->run_dir, r->id);
	for (o = ld->runs; o != NULL; o = o->next)
		if (o != r && strcmp(o->grant->execution_id,
		    g->execution_id) == 0)
			break;
	if (o != NULL || lstat(r->dir, &st) == 0) {
		run_abort(r, RULE_BAD_REQUEST, "this execution is already "
		    "running or ran");
		return;
	}
	if (ld->stopping) {
		run_abort(r, RULE_RUNTIME, "launchd-sbx is shutting down");
		return;
	}
	if ((r->wall_ev = evtimer_new(ld->base, run_wall_cb, r)) == NULL ||
	    (r->grace_ev = evtimer_new(ld->base, run_grace_cb, r)) == NULL ||
	    (r->cmd_ev = evtimer_new(ld->base, run_cmd_timeout_cb,
	    r)) == NULL) {
		run_abort(r, RULE_RUNTIME, "cannot create timers");
		return;
	}
	rc = image_rootfs(ld, pol->image, r->rootfs, r->hex, &rule, err,
	    sizeof(err));
	if (rc == -1) {
		run_abort(r, rule, err);
		return;
	}
	if (rc == 1) {
		/* Queued: image.c calls run_image_ready when it is done. */
		r->state = RUN_IMAGE;
		log_info("execution %s waits for image %s", g->execution_id,
		    pol->image);
		return;
	}
	run_prepare(r);
}

void
run_launch(struct launchd *ld, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	run_launch_1(ld, c, req);
	log_ctx_clear();
}

/* ---- start-up and shutdown ---- */

size_t
run_count(const struct launchd *ld)
{
	size_t	 n = 0;

	for (const struct run *r = ld->runs; r != NULL; r = r->next)
		n += r->state != RUN_CLEANUP;
	return n;
}

size_t
run_cleaning(const struct launchd *ld)
{
	size_t	 n = 0;

	for (const struct run *r = ld->runs; r != NULL; r = r->next)
		n += r->state == RUN_CLEANUP || r->del_pid > 0 ||
		    r->del_wait || r->clean_wait;
	return n;
}

/* Synchronously remove the container, its cgroups and its staging. */
static void
run_cleanup_sync(struct run *r)
{
	char	 err[MON_ERR_MAX];
	pid_t	 pid;

	if (r->created) {
		r->created = 0;
		if ((pid = mon_client_cmd(r->ld, r->id, r->tier, MON_DELETE,
		    0, -1, -1, err, sizeof(err))) == -1)
			log_warnx("execution %s: delete: %s", r->id, err);
		else if (mon_wait_exit(r->ld, pid, LAUNCHD_CMD_SECONDS) != 0)
			log_debug("execution %s: %s delete did not succeed",
			    r->id, r->rt->path);
	}
	if (r->egress_open)
		run_egress_close_sync(r);
	run_cleanup_host(r);
}

void
run_stop_all(struct launchd *ld)
{
	struct run	*r, *next;

	/* Records queued now commit first, while their runs are alive:
	 * their callbacks see ld->stopping. */
	record_flush(ld);
	for (r = ld->runs; r != NULL; r = next) {
		next = r->next;
		/* runsc's proof not come: the delete below kills the rest. */
		if (r->gone_wait && r->gone_ev != NULL)
			evtimer_del(r->gone_ev);
		r->gone_wait = 0;
		/* A background cleanup not come yet: now. */
		if (r->clean_wait) {
			evtimer_del(r->clean_ev);
			r->clean_wait = 0;
			run_cleanup_host(r);
		}
		/* A delete after the init was reaped: let it finish. */
		if (r->kill_pid > 0 && (r->del_wait || r->state == RUN_CLEANUP)) {
			(void)mon_wait_exit(ld, r->kill_pid,
			    LAUNCHD_CMD_SECONDS);
			r->kill_pid = 0;
		}
		if (r->del_pid > 0) {
			(void)mon_wait_exit(ld, r->del_pid,
			    LAUNCHD_CMD_SECONDS);
			r->del_pid = 0;
			r->created = 0;
		}
		r->del_wait = 0;
		if (r->par && r->state != RUN_CLEANUP) {
			/* The tail in flight: what cannot come now is done
			 * here; a pending exit record replies at the flush. */
			if (r->peer != NULL) {
				frame_client_free(r->peer);
				r->peer = NULL;
			}
			if (r->gpeer != NULL) {
				frame_client_free(r->gpeer);
				r->gpeer = NULL;
			}
			if (r->tail & TAIL_EGRESS) {
				r->tail &= ~TAIL_EGRESS;
				run_egress_close_sync(r);
			}
			if (r->tail & TAIL_GATE) {
				r->tail &= ~TAIL_GATE;
				if (r->released == NULL && !r->withheld)
					run_no_release(r, "launchd-sbx is "
					    "shutting down");
				run_cleanup_host(r);
			}
			if (r->tail == 0)
				run_reply(r);	/* frees r: nothing is left */
			continue;
		}
		if (r->state == RUN_CLEANUP) {
			r->host_pending = 0;
			run_cleanup_sync(r);
			run_unlink(r);
			run_free(r);
			continue;
		}
		if (r->state == RUN_RECORD_EXIT) {
			if (r->host_pending) {
				r->host_pending = 0;
				run_cleanup_host(r);
			}
			continue;	/* the flush sends its reply */
		}
		if (r->peer != NULL) {
			frame_client_free(r->peer);
			r->peer = NULL;
		}
		if (r->gpeer != NULL) {
			frame_client_free(r->gpeer);
			r->gpeer = NULL;
		}
		/* Its reply may not have come: close what may be open. */
		if ((r->need & NEED_EGRESS) || r->state == RUN_EGRESS_CLOSE)
			r->egress_open = 1;
		r->need = 0;
		if (r->state == RUN_EGRESS_CLOSE || r->state == RUN_RELEASE)
			r->state = RUN_DELETE;	/* the container is gone */
		/* The runtime's start in flight, or its run (which starts
		 * the program before it returns): let it finish (bounded),
		 * so that a started program ends as killed mid-run. */
		if ((r->state == RUN_START || (r->state == RUN_CREATE &&
		    r->one_step)) && r->cmd_pid > 0) {
			int	 st = mon_wait_exit(ld, r->cmd_pid, 5);

			if (st != -1) {
				r->cmd_pid = 0;
				if (st == 0 && r->state == RUN_CREATE &&
				    ((r->pid = run_read_pid(r->dir)) == -1 ||
				    run_watch_output(r) == -1))
					st = -1;
				else if (st == 0 && r->state == RUN_CREATE)
					run_orphan_claim(r);
				if (st == 0) {
					r->state = RUN_RUNNING;
					r->ld->metrics.launches++;
				}
			}
		}
		if (r->cmd_pid > 0) {
			(void)mon_client_sigkill(ld, r->cmd_pid);
			(void)mon_wait_exit(ld, r->cmd_pid,
			    LAUNCHD_CMD_SECONDS);
			r->cmd_pid = 0;
		}
		if (r->kill_pid > 0) {
			(void)mon_wait_exit(ld, r->kill_pid,
			    LAUNCHD_CMD_SECONDS);
			r->kill_pid = 0;
		}
		if (!r->exited && r->pid > 0) {
			int	 st;

			(void)mon_client_sigkill(ld, r->pid);
			if ((st = mon_wait_exit(ld, r->pid,
			    LAUNCHD_CMD_SECONDS)) != -1) {
				r->exited = 1;
				r->status = st;
			}
		}
		if (r->end_ns == 0)
			r->end_ns = mono_ns();
		if (r->state == RUN_RUNNING && !r->finished) {
			r->finished = 1;
			if (!r->exited)
				r->status = SIGKILL;	/* as if killed */
			run_collect(r);
			run_cleanup_sync(r);
			run_no_release(r, "launchd-sbx is shutting down");
			run_record_exit(r);
			continue;
		}
		if (r->state != RUN_DELETE && r->fail_msg == NULL) {
			r->fail_rule = RULE_RUNTIME;
			r->fail_msg = xstrdup("launchd-sbx is shutting down");
		}
		run_cleanup_sync(r);
		r->created = 0;
		if (r->state == RUN_DELETE && r->fail_msg == NULL &&
		    r->fail_rule == NULL) {
			if (r->released == NULL && !r->withheld)
				run_no_release(r, "launchd-sbx is shutting "
				    "down");
			run_record_exit(r);
			continue;
		}
		run_abort(r, r->fail_rule != NULL ? r->fail_rule :
		    RULE_RUNTIME, r->fail_msg);
	}
	/* The records, then the replies. */
	record_flush(ld);
}
