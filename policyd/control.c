/*
 * control.c: policyd's two sockets.  The orchestrator socket compiles
 * (and, in a later issue, runs) tasks and answers audit questions; the
 * admin socket also manages entitlements, lists templates and reports
 * metrics.  Framing, peer checks, frame caps and version checks are
 * common/frame.c's; this file dispatches.
 *
 * The invariant it upholds: nothing is acknowledged before it is on disk.
 * A compile adds its records to the store's open batch, and its reply is
 * packed at once but held.  When the store's writer thread is idle it
 * takes the open batch at once and commits it (one fsync) while the loop
 * goes on compiling into the next batch, so batches grow with the load.
 * When the writer is done, the held replies of that batch go out -- or,
 * if the commit failed, every one of those clients gets ERROR_INTERNAL
 * instead and nothing is acknowledged.  Every other request first drains
 * both batches (waits for the one in flight, commits the open one), so
 * each connection still gets its replies in order and reads see every
 * acknowledged record; an entitlement change is then its own
 * transaction.
 *
 * A run is a compile whose held reply is a launch: only once the batch
 * holding its execution record has committed does policyd connect to
 * launchd-sbx (checking that uid launchd.user, root by default, is the
 * one listening), send the LaunchRequest, and relay the ExecutionResult.
 * Every way a launch can fail -- launchd-sbx not configured, unreachable,
 * refusing, silent, dying mid-run -- ends in an Error to the orchestrator
 * and a "run-failed" audit event with the rule, committed before the
 * error is sent: never a silent success.  A run's result comes when the
 * program ends, so it may overtake later replies on the same connection;
 * request ids tell them apart.  What the run sent upstream (the result's
 * usage) is recorded against its task's egress budget and the result is
 * held until that record commits, so the orchestrator's next run of the
 * task is compiled with it; a run that ended without a result keeps its
 * whole allowance counted (store.c), except where nothing ran.
 *
 * Capability requests (capability.c) come in on the orchestrator and admin
 * sockets; approvald's decisions on the optional approvals socket, which
 * takes nothing else.
 */
#include <sys/queue.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "audit.h"
#include "frame.h"
#include "log.h"
#include "util.h"
#include "policyd.h"

enum held_kind {
	HELD_OTHER,
	HELD_EXECUTION,
	HELD_DENIAL,
};

enum run_state {
	RUN_WAITING,		/* its execution record is not yet durable */
	RUN_READY,		/* durable: launch on the next loop pass */
	RUN_LAUNCHED,		/* LaunchRequest sent; awaiting the result */
};

struct run {
	TAILQ_ENTRY(run)	 entry;
	struct control		*ctl;
	struct frame_conn	*conn;		/* held */
	struct frame_client	*fc;
	enum run_state		 state;
	uint64_t		 request_id;
	char			*task_id;
	char			 execution_id[40];
	char			 hash[POLICY_HASH_HEX];
	char			*policy_name;
	uint32_t		 policy_version;
	uint32_t		 wall;		/* the policy's wall_seconds */
	char			 actor[32];
	uint8_t			*launch;	/* packed LaunchRequest frame */
	size_t			 launch_len;
};

TAILQ_HEAD(runs, run);

struct held {
	struct run		*run;		/* a run's launch, or NULL */
	struct frame_conn	*conn;
	uint8_t			*buf;
	size_t			 len;
	uint64_t		 request_id;
	enum held_kind		 kind;
	const char		*rule;		/* HELD_DENIAL */
	int			 recorded;	/* true only if committed */
};

/* The replies that wait for one batch. */
struct held_list {
	struct held		*v;
	size_t			 n;
	size_t			 cap;
};

struct control_sock {
	struct control		*ctl;
	int			 admin;
};

struct control {
	struct policyd		*pd;
	struct frame_server	*orch;
	struct frame_server	*admin;
	struct frame_server	*approvals;	/* NULL: not configured */
	struct control_sock	 orch_arg;
	struct control_sock	 admin_arg;
	struct event		*done_ev;	/* the writer has finished */
	struct held_list	 open;		/* for the store's open batch */
	struct held_list	 flight;	/* for the batch in flight */
	struct runs		 runs;		/* every run not yet answered */
	struct event		*launch_ev;	/* start the ready runs */
};

static void	control_run_ready(struct control *, struct run *);
static void	control_run_free(struct run *);

static const char *const control_rules[] = {
	RULE_UNKNOWN_TASK_TYPE, RULE_TASK_MISMATCH, RULE_NO_ENTITLEMENT,
	RULE_NOT_READABLE, RULE_EXHAUSTED, NULL
};

/* The static spelling of a rule id, for the metrics table. */
static const char *
control_rule(const char *rule)
{
	for (size_t i = 0; control_rules[i] != NULL; i++)
		if (strcmp(control_rules[i], rule) == 0)
			return control_rules[i];
	return NULL;
}

static void
control_actor(struct frame_conn *c, char *buf, size_t len)
{
	const struct ucred	*cr = frame_conn_peer(c);

	if (cr != NULL)
		snprintf(buf, len, "uid:%u", (unsigned)cr->uid);
	else
		snprintf(buf, len, "uid:?");
}

/*
 * Hold a reply until the open batch commits.  For a run, env is NULL and
 * run is what happens on commit (the launch) instead of a reply.
 */
static void
control_hold_run(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *env, enum held_kind kind, const char *rule,
    int recorded, struct run *run, uint64_t request_id)
{
	struct held_list	*l = &ctl->open;
	struct held		*h;
	uint8_t			*buf = NULL;
	size_t			 len = 0;

	if (env != NULL && (buf = frame_pack(env, &len)) == NULL) {
		/* Still wait for the commit: an error sent now could
		 * overtake this client's earlier held replies. */
		Sbx__V1__Envelope	e;
		Sbx__V1__Error		err;

		sbx__v1__error__init(&err);
		err.code = SBX__V1__ERROR_CODE__ERROR_INTERNAL;
		err.message = (char *)"reply cannot be encoded";
		frame_env_init(&e, env->request_id);
		e.body_case = SBX__V1__ENVELOPE__BODY_ERROR;
		e.error = &err;
		if ((buf = frame_pack(&e, &len)) == NULL)
			fatalx("cannot encode an error reply");
		kind = HELD_OTHER;
	}
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = xreallocarray(l->v, l->cap, sizeof(*l->v));
	}
	h = &l->v[l->n++];
	h->run = run;
	h->conn = c;
	h->buf = buf;
	h->len = len;
	h->request_id = request_id;
	h->kind = kind;
	h->rule = rule;
	h->recorded = recorded;
	frame_conn_hold(c);
	/* An idle writer takes the batch at once: what arrives while it
	 * commits forms the next one, so batches grow with the load. */
	control_kick(ctl);
}

static void
control_hold(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *env, enum held_kind kind, const char *rule,
    int recorded)
{
	control_hold_run(ctl, c, env, kind, rule, recorded, NULL,
	    env->request_id);
}

/*
 * Send the replies held for a batch that has committed (ok) or rolled
 * back.  A reply that recorded nothing does not depend on the outcome.
 */
static void
control_release(struct control *ctl, struct held_list *l, int ok)
{
	struct policyd		*pd = ctl->pd;
	struct held_list	 take = *l;

	/* Take the list first: a send can run callbacks. */
	l->v = NULL;
	l->n = l->cap = 0;
	if (!ok)
		log_warnx("policyd.db: batch of %zu not committed; every "
		    "waiting client gets an error", take.n);
	for (size_t i = 0; i < take.n; i++) {
		struct held *h = &take.v[i];

		if (ok || !h->recorded) {
			if (h->kind == HELD_EXECUTION) {
				pd->metrics.compiles++;
				pd->metrics.executions++;
			} else if (h->kind == HELD_DENIAL) {
				pd->metrics.compiles++;
				if (h->rule != NULL)
					compile_count_denial(&pd->metrics,
					    h->rule);
			}
			if (h->run != NULL)
				control_run_ready(ctl, h->run);
			else
				frame_conn_send_packed(h->conn, h->buf,
				    h->len);
		} else {
			frame_conn_send_error(h->conn, h->request_id,
			    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
			    "policyd.db: the record could not be committed; "
			    "nothing was done");
			if (h->run != NULL)
				control_run_free(h->run);
		}
		free(h->buf);
		frame_conn_release(h->conn);
	}
	/* Keep whichever array is larger for the next batch. */
	if (l->v == NULL) {
		take.n = 0;
		*l = take;
	} else
		free(take.v);
}

static void
control_committed(struct control *ctl, int ok)
{
	if (ok)
		ctl->pd->metrics.commits++;
}

static void
control_swap(struct held_list *a, struct held_list *b)
{
	struct held_list	 t = *a;

	*a = *b;
	*b = t;
}

static void
control_done_cb(evutil_socket_t fd, short what, void *arg)
{
	struct control		*ctl = arg;
	struct held_list	 done = { NULL, 0, 0 };
	int			 ok;

	(void)fd;
	(void)what;
	if (store_reap(ctl->pd->store, &ok) == 1) {
		control_committed(ctl, ok);
		control_swap(&done, &ctl->flight);
	}
	/* What arrived meanwhile is the next batch: the writer starts on it
	 * before we spend time on the replies. */
	control_kick(ctl);
	if (done.n > 0)
		control_release(ctl, &done, ok);
	free(done.v);
}

/* Listen for the writer thread, once the store exists.  -1 if we cannot:
 * then batches commit on the loop's own thread. */
static int
control_watch_writer(struct control *ctl)
{
	int	 fd;

	if (ctl->done_ev != NULL)
		return 0;
	if ((fd = store_done_fd(ctl->pd->store)) == -1)
		return -1;
	if ((ctl->done_ev = event_new(ctl->pd->base, fd, EV_READ | EV_PERSIST,
	    control_done_cb, ctl)) == NULL)
		return -1;
	if (event_add(ctl->done_ev, NULL) == -1) {
		event_free(ctl->done_ev);
		ctl->done_ev = NULL;
		return -1;
	}
	return 0;
}

void
control_kick(struct control *ctl)
{
	struct store	*s = ctl->pd->store;
	int		 ok;

	/* One batch in flight at a time; its done event kicks again. */
	if (s == NULL || store_busy(s))
		return;
	if (!store_in_batch(s)) {
		/* Only replies that recorded nothing: nothing to wait for. */
		if (ctl->open.n > 0)
			control_release(ctl, &ctl->open, 1);
		return;
	}
	control_swap(&ctl->open, &ctl->flight);
	if (control_watch_writer(ctl) == 0 && store_submit(s) == 1)
		return;
	log_warnx("policyd.db: no writer thread; committing in the loop");
	ok = store_commit(s) == 0;
	control_committed(ctl, ok);
	control_release(ctl, &ctl->flight, ok);
}

void
control_flush(struct control *ctl)
{
	struct store	*s = ctl->pd->store;
	int		 ok;

	if (s == NULL)
		return;
	if (store_busy(s)) {
		ok = store_wait(s) == 0;
		control_committed(ctl, ok);
		control_release(ctl, &ctl->flight, ok);
	}
	if (store_in_batch(s)) {
		ok = store_commit(s) == 0;
		control_committed(ctl, ok);
		control_release(ctl, &ctl->open, ok);
	} else if (ctl->open.n > 0)
		control_release(ctl, &ctl->open, 1);
}

/* Send now, after anything this or another client is still owed. */
static void
control_send(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *env)
{
	control_flush(ctl);
	frame_conn_send(c, env);
}

static void
control_send_error(struct control *ctl, struct frame_conn *c, uint64_t id,
    Sbx__V1__ErrorCode code, const char *rule, const char *msg)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__Error		 err;

	sbx__v1__error__init(&err);
	err.code = code;
	err.message = (char *)msg;
	err.rule = (char *)(rule != NULL ? rule : "");
	frame_env_init(&env, id);
	env.body_case = SBX__V1__ENVELOPE__BODY_ERROR;
	env.error = &err;
	control_send(ctl, c, &env);
}

/* ---- run: compile, then launch on launchd-sbx ---- */

static void
control_run_free(struct run *r)
{
	TAILQ_REMOVE(&r->ctl->runs, r, entry);
	frame_client_free(r->fc);
	frame_conn_release(r->conn);
	free(r->task_id);
	free(r->policy_name);
	free(r->launch);
	free(r);
}

/*
 * The run failed after its execution was recorded: audit "run-failed"
 * with the rule, and send the orchestrator the error once that event is
 * durable.  Frees the run.
 */
static void
control_run_fail(struct run *r, Sbx__V1__ErrorCode code, const char *rule,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void
control_run_fail(struct run *r, Sbx__V1__ErrorCode code, const char *rule,
    const char *fmt, ...)
{
	struct control		*ctl = r->ctl;
	Sbx__V1__Envelope	 env;
	Sbx__V1__Error		 err;
	char			 msg[512];
	va_list			 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warnx("run %s of task %s failed (%s): %s", r->execution_id,
	    r->task_id, rule, msg);
	ctl->pd->metrics.run_failures++;
	store_add_event(ctl->pd->store, r->task_id, "run-failed",
	    r->execution_id, r->hash, rule, msg, r->actor);
	sbx__v1__error__init(&err);
	err.code = code;
	err.message = msg;
	err.rule = (char *)rule;
	frame_env_init(&env, r->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_ERROR;
	env.error = &err;
	control_hold(ctl, r->conn, &env, HELD_OTHER, NULL, 1);
	control_run_free(r);
}

/* A run that failed before anything was launched sent nothing: its
 * allowance goes back to the task. */
static void
control_run_nothing_ran(struct run *r)
{
	store_add_egress(r->ctl->pd->store, r->task_id, r->execution_id,
	    r->hash, 1, 0, r->actor);
}

static void
control_run_result(struct run *r, Sbx__V1__ExecutionResult *res)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__PolicyRef	 ref;
	int			 known;

	if (res->execution_id[0] != '\0' &&
	    strcmp(res->execution_id, r->execution_id) != 0) {
		control_run_fail(r, SBX__V1__ERROR_CODE__ERROR_LAUNCH,
		    "launchd-bad-reply", "launchd-sbx answered for execution "
		    "%.64s, not %s", res->execution_id, r->execution_id);
		return;
	}
	if (res->policy != NULL && res->policy->hash[0] != '\0' &&
	    strcmp(res->policy->hash, r->hash) != 0) {
		control_run_fail(r, SBX__V1__ERROR_CODE__ERROR_LAUNCH,
		    "launchd-bad-reply", "launchd-sbx ran policy %.64s, not "
		    "%s", res->policy->hash, r->hash);
		return;
	}
	/* What policyd knows for certain goes in whatever launchd said. */
	res->task_id = r->task_id;
	res->execution_id = r->execution_id;
	sbx__v1__policy_ref__init(&ref);
	ref.name = r->policy_name;
	ref.version = r->policy_version;
	ref.hash = r->hash;
	res->policy = &ref;
	frame_env_init(&env, r->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_RESULT;
	env.result = res;
	r->ctl->pd->metrics.runs++;
	/* What it sent replaces what it was allowed, once on disk; the
	 * result waits for that commit, but goes out even if it fails
	 * (the allowance then stays counted: more, never less). */
	known = res->usage != NULL && !res->usage->egress_unknown;
	store_add_egress(r->ctl->pd->store, r->task_id, r->execution_id,
	    r->hash, known, known ? res->usage->egress_bytes_out : 0,
	    r->actor);
	control_hold(r->ctl, r->conn, &env, HELD_OTHER, NULL, 0);
	/* The unpacked reply owns its strings; ours must not be freed
	 * through it. */
	res->task_id = NULL;
	res->execution_id = NULL;
	res->policy = NULL;
}

static void
control_run_reply(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	struct run		*r = arg;
	Sbx__V1__Error		*e;
	char			*tid, *xid;
	Sbx__V1__PolicyRef	*pol;

	(void)fc;
	if (rep == NULL) {
		control_run_fail(r, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    "launchd-unavailable", "launchd-sbx at %s: %s; execution "
		    "%s has no result", r->ctl->pd->conf->launchd_socket, why,
		    r->execution_id);
		return;
	}
	if (rep->request_id != r->request_id) {
		control_run_fail(r, SBX__V1__ERROR_CODE__ERROR_LAUNCH,
		    "launchd-bad-reply", "launchd-sbx answered request %llu, "
		    "not %llu", (unsigned long long)rep->request_id,
		    (unsigned long long)r->request_id);
		return;
	}
	switch (rep->body_case) {
	case SBX__V1__ENVELOPE__BODY_RESULT:
		tid = rep->result->task_id;
		xid = rep->result->execution_id;
		pol = rep->result->policy;
		control_run_result(r, rep->result);
		/* Restore what the envelope owns, for its free. */
		if (rep->result->task_id == NULL) {
			rep->result->task_id = tid;
			rep->result->execution_id = xid;
			rep->result->policy = pol;
			control_run_free(r);
		}
		return;
	case SBX__V1__ENVELOPE__BODY_ERROR:
		e = rep->error;
		if (e->code == SBX__V1__ERROR_CODE__ERROR_LAUNCH)
			control_run_fail(r, e->code, e->rule[0] != '\0' ?
			    e->rule : "launch-refused", "%s", e->message);
		else
			control_run_fail(r, SBX__V1__ERROR_CODE__ERROR_LAUNCH,
			    e->rule[0] != '\0' ? e->rule : "launchd-error",
			    "launchd-sbx: %s", e->message);
		return;
	default:
		control_run_fail(r, SBX__V1__ERROR_CODE__ERROR_LAUNCH,
		    "launchd-bad-reply", "launchd-sbx answered with message "
		    "body %d, not a result", (int)rep->body_case);
		return;
	}
}

static void
control_run_start(struct run *r)
{
	struct control		*ctl = r->ctl;
	struct policyd_conf	*conf = ctl->pd->conf;
	size_t			 max;
	char			 err[512];

	if (frame_conn_closed(r->conn)) {
		control_run_nothing_ran(r);
		control_run_fail(r, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    "client-gone", "the orchestrator hung up before the "
		    "launch; nothing ran");
		return;
	}
	/* Results carry capped stdout and stderr: allow at least 4 MiB. */
	max = (size_t)conf->max_frame_kb * 1024;
	if (max < 4 * 1024 * 1024)
		max = 4 * 1024 * 1024;
	r->fc = frame_connect(ctl->pd->base, conf->launchd_socket,
	    conf->launchd_uid, max, control_run_reply, r, err, sizeof(err));
	if (r->fc == NULL) {
		control_run_nothing_ran(r);
		control_run_fail(r, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    "launchd-unreachable", "launchd-sbx unreachable: %s; "
		    "nothing ran", err);
		return;
	}
	/* launchd-sbx enforces the wall clock; this only bounds our wait. */
	frame_client_timeout(r->fc, (int)(r->wall + conf->launchd_grace));
	if (frame_client_send_packed(r->fc, r->launch, r->launch_len) == -1) {
		control_run_fail(r, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    "launchd-unreachable", "cannot send the launch request to "
		    "launchd-sbx; nothing ran");
		return;
	}
	r->state = RUN_LAUNCHED;
	free(r->launch);
	r->launch = NULL;
	log_debug("run %s of task %s: launch sent", r->execution_id,
	    r->task_id);
}

/* Launches start from the loop, never from inside a flush: a failure
 * adds an audit event to the batches a flush is settling. */
static void
control_launch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct control	*ctl = arg;
	struct run	*r, *next;

	(void)fd;
	(void)what;
	for (r = TAILQ_FIRST(&ctl->runs); r != NULL; r = next) {
		next = TAILQ_NEXT(r, entry);
		if (r->state == RUN_READY) {
			control_run_start(r);
			/* A failure may have freed entries: start over. */
			next = TAILQ_FIRST(&ctl->runs);
		}
	}
}

static void
control_run_ready(struct control *ctl, struct run *r)
{
	r->state = RUN_READY;
	event_active(ctl->launch_ev, EV_TIMEOUT, 0);
}

/* A compiled run: what the launch needs, packed now. */
static struct run *
control_run_new(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req, const Sbx__V1__Task *task,
    struct compile_out *out, const char *actor)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__LaunchRequest	 lr;
	struct run		*r;

	sbx__v1__launch_request__init(&lr);
	lr.signed_ = &out->signed_;
	lr.code_name = task->code_name;
	lr.code = task->code;
	lr.outputs = task->outputs;
	lr.n_outputs = task->n_outputs;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_LAUNCH;
	env.launch = &lr;
	r = xcalloc(1, sizeof(*r));
	if ((r->launch = frame_pack(&env, &r->launch_len)) == NULL) {
		free(r);
		return NULL;
	}
	r->ctl = ctl;
	r->conn = c;
	frame_conn_hold(c);
	r->state = RUN_WAITING;
	r->request_id = req->request_id;
	r->task_id = xstrdup(task->id);
	snprintf(r->execution_id, sizeof(r->execution_id), "%s",
	    out->execution_id);
	memcpy(r->hash, out->hash, sizeof(r->hash));
	r->policy_name = xstrdup(out->policy->name);
	r->policy_version = out->policy->version;
	r->wall = out->policy->limits != NULL ?
	    out->policy->limits->wall_seconds : 0;
	snprintf(r->actor, sizeof(r->actor), "%s", actor);
	TAILQ_INSERT_TAIL(&ctl->runs, r, entry);
	return r;
}

static void
control_compile(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req, const Sbx__V1__Task *task, int run)
{
	struct policyd		*pd = ctl->pd;
	struct compile_out	 out;
	Sbx__V1__Envelope	 env;
	Sbx__V1__CompileReply	 rep;
	Sbx__V1__Error		 err = SBX__V1__ERROR__INIT;
	char			 actor[32];
	size_t			 before;
	int			 recorded;

	control_actor(c, actor, sizeof(actor));
	frame_env_init(&env, req->request_id);
	before = store_pending(pd->store);
	if (compile_task(pd, task, actor, run, &out, &err) == -1) {
		/* Held even when nothing was recorded, so it cannot
		 * overtake this client's earlier replies. */
		recorded = store_pending(pd->store) > before;
		env.body_case = SBX__V1__ENVELOPE__BODY_ERROR;
		env.error = &err;
		control_hold(ctl, c, &env, recorded ? HELD_DENIAL : HELD_OTHER,
		    control_rule(err.rule), recorded);
		compile_error_clear(&err);
		return;
	}
	if (run) {
		struct run	*r;

		if ((r = control_run_new(ctl, c, req, task, &out,
		    actor)) != NULL) {
			control_hold_run(ctl, c, NULL, HELD_EXECUTION, NULL, 1,
			    r, req->request_id);
			compile_out_clear(&out);
			return;
		}
		/* The execution is in the batch: its reply must wait too. */
		compile_out_clear(&out);
		env.body_case = SBX__V1__ENVELOPE__BODY_ERROR;
		compile_error(&err, SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "the launch request cannot be encoded");
		env.error = &err;
		control_hold(ctl, c, &env, HELD_OTHER, NULL, 1);
		compile_error_clear(&err);
		return;
	}
	sbx__v1__compile_reply__init(&rep);
	rep.signed_ = &out.signed_;
	rep.policy = out.policy;
	rep.policy_hash = out.hash;
	rep.execution_id = out.execution_id;
	rep.expires_at = out.expires_at;
	env.body_case = SBX__V1__ENVELOPE__BODY_COMPILED;
	env.compiled = &rep;
	control_hold(ctl, c, &env, HELD_EXECUTION, NULL, 1);
	compile_out_clear(&out);
}

/*
 * An entitlement change and its audit event commit together, in their own
 * transaction, after everything before them: admin changes are rare, and
 * compiles read entitlements through the read handle, which sees a change
 * only once it is committed.
 */
static void
control_entitlement(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req, const Sbx__V1__Entitlement *m, int add)
{
	struct policyd		*pd = ctl->pd;
	struct audit		*a = store_audit(pd->store);
	Sbx__V1__Envelope	 env;
	Sbx__V1__Ack		 ack;
	Sbx__V1__AuditEvent	 ev;
	char			 err[256], msg[300], actor[32], *detail;
	int			 rc;

	if (m == NULL || entitle_check(m, err, sizeof(err)) == -1) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "", m == NULL ?
		    "request has no entitlement" : err);
		return;
	}
	control_flush(ctl);
	if (audit_begin(a) == -1) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "policyd.db: cannot begin a transaction");
		return;
	}
	rc = add ? entitle_add(pd->ent, m, err, sizeof(err)) :
	    entitle_remove(pd->ent, m, err, sizeof(err));
	if (rc == -1) {
		audit_rollback(a);
		entitle_forget(pd->ent);
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "", err);
		return;
	}
	if (rc == 1) {
		audit_rollback(a);
		entitle_forget(pd->ent);
		snprintf(msg, sizeof(msg), "no entitlement for %s/%s",
		    m->tenant, m->user);
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_NOT_FOUND, "", msg);
		return;
	}
	xasprintf(&detail, "%s %s/%s: %zu dataset%s, %zu host%s%s%s",
	    add ? "add" : "remove", m->tenant, m->user, m->n_datasets,
	    m->n_datasets == 1 ? "" : "s", m->n_hosts,
	    m->n_hosts == 1 ? "" : "s",
	    add && m->max_limits != NULL ? ", limits" : "",
	    add && m->replace ? ", replace" : "");
	control_actor(c, actor, sizeof(actor));
	sbx__v1__audit_event__init(&ev);
	ev.action = (char *)"entitlement";
	ev.detail = detail;
	ev.actor = actor;
	if (audit_add(a, &ev) == -1) {
		audit_rollback(a);
		rc = -1;
	} else {
		audit_event_clear(&ev);
		rc = audit_commit(a);
	}
	/* Compiles read what is committed from now on. */
	entitle_forget(pd->ent);
	if (rc == -1) {
		free(detail);
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "policyd.db: the change could not be committed; nothing "
		    "was changed");
		return;
	}
	log_info("entitlement %s by %s", detail, actor);

	sbx__v1__ack__init(&ack);
	ack.detail = detail;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_ACK;
	env.ack = &ack;
	control_send(ctl, c, &env);
	free(detail);
}

static void
control_entitlement_list(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__EntitlementList	*q = req->entitlement_list;
	Sbx__V1__Envelope		 env;
	Sbx__V1__Entitlements		 list;
	Sbx__V1__Entitlement		**v;
	size_t				 n;

	control_flush(ctl);
	if (entitle_list(ctl->pd->ent, q->tenant, q->user, &v, &n) == -1) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "entitlements cannot be read");
		return;
	}
	sbx__v1__entitlements__init(&list);
	list.entitlements = v;
	list.n_entitlements = n;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_ENTITLEMENTS;
	env.entitlements = &list;
	control_send(ctl, c, &env);
	entitle_list_free(v, n);
}

static void
control_template_info(const struct tmpl_registry *r, const struct tmpl *t,
    Sbx__V1__TemplateInfo *ti)
{
	const char	**types;

	sbx__v1__template_info__init(ti);
	ti->name = t->name;
	ti->version = t->version;
	ti->file = t->file;
	ti->hash = (char *)t->hash;
	ti->n_active_for = template_active_for(r, t, &types);
	ti->active_for = (char **)types;
}

static void
control_template_list(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const struct tmpl_registry	*r = ctl->pd->reg;
	Sbx__V1__Envelope		 env;
	Sbx__V1__Templates		 list;
	Sbx__V1__TemplateInfo		*infos, **ptrs;
	size_t				 i;

	infos = xcalloc(r->n + 1, sizeof(*infos));
	ptrs = xcalloc(r->n + 1, sizeof(*ptrs));
	for (i = 0; i < r->n; i++) {
		control_template_info(r, r->t[i], &infos[i]);
		ptrs[i] = &infos[i];
	}
	sbx__v1__templates__init(&list);
	list.templates = ptrs;
	list.n_templates = r->n;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_TEMPLATES;
	env.templates = &list;
	control_send(ctl, c, &env);
	for (i = 0; i < r->n; i++)
		free(infos[i].active_for);
	free(infos);
	free(ptrs);
}

static void
control_template_get(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__TemplateGet	*q = req->template_get;
	const struct tmpl		*t;
	Sbx__V1__Envelope		 env;
	Sbx__V1__TemplateReply		 rep;
	Sbx__V1__TemplateInfo		 info;
	char				 msg[300];

	if ((t = template_find(ctl->pd->reg, q->name, q->version)) == NULL) {
		if (q->version != 0)
			snprintf(msg, sizeof(msg), "no template %.128s "
			    "version %u", q->name, q->version);
		else
			snprintf(msg, sizeof(msg), "no template %.128s",
			    q->name);
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_NOT_FOUND, "", msg);
		return;
	}
	control_template_info(ctl->pd->reg, t, &info);
	sbx__v1__template_reply__init(&rep);
	rep.info = &info;
	rep.policy = t->policy;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_TEMPLATE;
	env.template_ = &rep;
	control_send(ctl, c, &env);
	free(info.active_for);
}

static void
control_audit_query(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__AuditQuery	*q = req->audit_query;
	Sbx__V1__Envelope		 env;
	Sbx__V1__AuditRecords		 recs;
	Sbx__V1__AuditEvent		**v = NULL;
	size_t				 n = 0;

	/* Read only what is committed: never show a record that might
	 * still roll back. */
	control_flush(ctl);
	if (audit_query(store_audit(ctl->pd->store), q->task_id, q->limit,
	    &v, &n) == -1) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "audit log cannot be read");
		return;
	}
	sbx__v1__audit_records__init(&recs);
	recs.events = v;
	recs.n_events = n;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_RECORDS;
	env.audit_records = &recs;
	control_send(ctl, c, &env);
	audit_events_free(v, n);
}

static void
control_audit_verify(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	Sbx__V1__Envelope		 env;
	Sbx__V1__AuditVerifyReply	 r;

	control_flush(ctl);
	sbx__v1__audit_verify_reply__init(&r);
	if (audit_verify(store_audit(ctl->pd->store), &r) == -1) {
		audit_verify_clear(&r);
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "audit log cannot be read");
		return;
	}
	if (r.daemon == NULL || r.daemon[0] == '\0')
		r.daemon = xstrdup("policyd");
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_VERIFIED;
	env.audit_verified = &r;
	control_send(ctl, c, &env);
	audit_verify_clear(&r);
}

char *
control_metrics(const struct policyd *pd)
{
	const struct policyd_metrics	*m = &pd->metrics;
	char				*s, *t, *u;

	xasprintf(&s,
	    "# HELP sbx_policyd_compiles_total Compile requests decided.\n"
	    "# TYPE sbx_policyd_compiles_total counter\n"
	    "sbx_policyd_compiles_total %llu\n"
	    "# HELP sbx_policyd_denials_total Compiles refused, by rule.\n"
	    "# TYPE sbx_policyd_denials_total counter\n",
	    (unsigned long long)m->compiles);
	for (size_t i = 0; i < m->ndenials; i++) {
		xasprintf(&t, "%ssbx_policyd_denials_total{rule=\"%s\"} "
		    "%llu\n", s, m->denials[i].rule,
		    (unsigned long long)m->denials[i].n);
		free(s);
		s = t;
	}
	xasprintf(&t, "%s"
	    "# HELP sbx_policyd_executions_total Signed policies issued.\n"
	    "# TYPE sbx_policyd_executions_total counter\n"
	    "sbx_policyd_executions_total %llu\n"
	    "# HELP sbx_policyd_commits_total Durable group commits.\n"
	    "# TYPE sbx_policyd_commits_total counter\n"
	    "sbx_policyd_commits_total %llu\n"
	    "# HELP sbx_policyd_runs_total Runs whose result was relayed.\n"
	    "# TYPE sbx_policyd_runs_total counter\n"
	    "sbx_policyd_runs_total %llu\n"
	    "# HELP sbx_policyd_run_failures_total Runs that ended in an "
	    "error after compiling.\n"
	    "# TYPE sbx_policyd_run_failures_total counter\n"
	    "sbx_policyd_run_failures_total %llu\n", s,
	    (unsigned long long)m->executions,
	    (unsigned long long)m->commits,
	    (unsigned long long)m->runs,
	    (unsigned long long)m->run_failures);
	free(s);
	s = capability_metrics(pd->cap);
	xasprintf(&u, "%s%s", t, s);
	free(s);
	free(t);
	return u;
}

static void
control_send_metrics(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__Metrics	 m;

	/* Count what is waiting, so the figures include it. */
	control_flush(ctl);
	sbx__v1__metrics__init(&m);
	m.text = control_metrics(ctl->pd);
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_METRICS;
	env.metrics = &m;
	control_send(ctl, c, &env);
	free(m.text);
}

static void
control_run(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__Task	*t = req->run->task;

	/* Refused before anything is compiled or counted. */
	if (ctl->pd->conf->launchd_socket == NULL) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE, "",
		    "launchd-sbx is not configured");
		return;
	}
	if (t != NULL && !name_ok(t->code_name)) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "", t->code_name[0] ==
		    '\0' ? "task.code_name: a run needs the code's file name" :
		    "task.code_name: want 1..128 of [A-Za-z0-9._@:-]");
		return;
	}
	if (t != NULL && t->code.len == 0) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "task.code: a run needs code");
		return;
	}
	control_compile(ctl, c, req, t, 1);
}

static void
control_dispatch(struct frame_conn *c, Sbx__V1__Envelope *req, void *arg)
{
	struct control_sock	*cs = arg;
	struct control		*ctl = cs->ctl;

	switch (req->body_case) {
	case SBX__V1__ENVELOPE__BODY_COMPILE:
		control_compile(ctl, c, req, req->compile->task, 0);
		return;
	case SBX__V1__ENVELOPE__BODY_RUN:
		control_run(ctl, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_QUERY:
		control_audit_query(ctl, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY:
		control_audit_verify(ctl, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_CAPABILITY:
		if (ctl->pd->cap == NULL) {
			control_send_error(ctl, c, req->request_id,
			    SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE, "",
			    "capability requests are not set up");
			return;
		}
		/* capability.c drains the batches before it writes, so its
		 * reply comes after everything this client is owed. */
		capability_serve_request(ctl->pd, c, req);
		return;
	default:
		break;
	}
	if (cs->admin) {
		switch (req->body_case) {
		case SBX__V1__ENVELOPE__BODY_ENTITLEMENT_ADD:
			control_entitlement(ctl, c, req,
			    req->entitlement_add->entitlement, 1);
			return;
		case SBX__V1__ENVELOPE__BODY_ENTITLEMENT_REMOVE:
			control_entitlement(ctl, c, req,
			    req->entitlement_remove->entitlement, 0);
			return;
		case SBX__V1__ENVELOPE__BODY_ENTITLEMENT_LIST:
			control_entitlement_list(ctl, c, req);
			return;
		case SBX__V1__ENVELOPE__BODY_TEMPLATE_LIST:
			control_template_list(ctl, c, req);
			return;
		case SBX__V1__ENVELOPE__BODY_TEMPLATE_GET:
			control_template_get(ctl, c, req);
			return;
		case SBX__V1__ENVELOPE__BODY_METRICS_REQUEST:
			control_send_metrics(ctl, c, req);
			return;
		default:
			break;
		}
	}
	control_send_error(ctl, c, req->request_id,
	    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "", cs->admin ?
	    "the admin socket does not take this message" :
	    "the orchestrator socket does not take this message");
}

/* approvald's socket: decisions on capability requests, nothing else. */
static void
control_dispatch_approvals(struct frame_conn *c, Sbx__V1__Envelope *req,
    void *arg)
{
	struct control	*ctl = arg;

	if (req->body_case != SBX__V1__ENVELOPE__BODY_DECISION) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "",
		    "the approvals socket takes decisions only");
		return;
	}
	if (ctl->pd->cap == NULL) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE, "",
		    "capability requests are not set up");
		return;
	}
	capability_serve_decision(ctl->pd, c, req);
}

static struct frame_server *
control_listen(struct control *ctl, const struct cfg_sock *sc,
    const char *name, struct control_sock *arg)
{
	struct frame_server_config	 cfg;

	cfg_socket_server(sc, name, &cfg);
	cfg.max_frame = (size_t)ctl->pd->conf->max_frame_kb * 1024;
	return frame_server_listen(ctl->pd->base, &cfg, control_dispatch, arg);
}

struct control *
control_start(struct policyd *pd)
{
	struct control	*ctl;

	ctl = xcalloc(1, sizeof(*ctl));
	ctl->pd = pd;
	ctl->orch_arg.ctl = ctl;
	ctl->orch_arg.admin = 0;
	ctl->admin_arg.ctl = ctl;
	ctl->admin_arg.admin = 1;
	TAILQ_INIT(&ctl->runs);
	if ((ctl->launch_ev = event_new(pd->base, -1, 0, control_launch_cb,
	    ctl)) == NULL) {
		free(ctl);
		return NULL;
	}
	if (pd->conf->launchd_socket != NULL)
		log_info("runs launch on %s (uid %u)",
		    pd->conf->launchd_socket, (unsigned)pd->conf->launchd_uid);
	if ((ctl->orch = control_listen(ctl, &pd->conf->orch, "orchestrator",
	    &ctl->orch_arg)) == NULL ||
	    (ctl->admin = control_listen(ctl, &pd->conf->admin, "admin",
	    &ctl->admin_arg)) == NULL) {
		control_stop(ctl);
		return NULL;
	}
	if (pd->conf->approvals.path != NULL) {
		const struct cfg_sock	*sc = &pd->conf->approvals;
		struct frame_server_config	 cfg;

		memset(&cfg, 0, sizeof(cfg));
		cfg.name = "approvals";
		cfg.path = sc->path;
		cfg.mode = sc->mode;
		cfg.owner = (uid_t)-1;
		cfg.group = sc->group;
		cfg.allow = &sc->allow;
		cfg.max_frame = (size_t)pd->conf->max_frame_kb * 1024;
		if ((ctl->approvals = frame_server_listen(pd->base, &cfg,
		    control_dispatch_approvals, ctl)) == NULL) {
			control_stop(ctl);
			return NULL;
		}
	}
	return ctl;
}

void
control_stop(struct control *ctl)
{
	if (ctl == NULL)
		return;
	control_flush(ctl);
	/* Runs still waiting for launchd-sbx end with us: their clients'
	 * connections close, which is no success. */
	while (!TAILQ_EMPTY(&ctl->runs))
		control_run_free(TAILQ_FIRST(&ctl->runs));
	if (ctl->launch_ev != NULL)
		event_free(ctl->launch_ev);
	frame_server_free(ctl->orch);
	frame_server_free(ctl->admin);
	if (ctl->approvals != NULL)
		frame_server_free(ctl->approvals);
	if (ctl->done_ev != NULL)
		event_free(ctl->done_ev);
	free(ctl->open.v);
	free(ctl->flight.v);
	free(ctl);
}
