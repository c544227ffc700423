/*
 * launch.c: policyd's client of launchd-sbx.  A run is a compile whose
 * held reply is a launch: only once the batch holding its execution
 * record has committed (commit.c) does policyd connect to launchd-sbx
 * (checking that uid launchd.user, root by default, is the one
 * listening), send the LaunchRequest, and relay the ExecutionResult.
 *
 * The invariant it upholds: never a silent success.  Every way a launch
 * can fail -- launchd-sbx unreachable, refusing, silent, dying mid-run --
 * ends in an Error to the orchestrator and a "run-failed" audit event
 * with the rule, committed before the error is sent.  A run's result
 * comes when the program ends, so it may overtake later replies on the
 * same connection; request ids tell them apart.  What the run sent
 * upstream (the result's usage) is recorded against its task's egress
 * budget and the result is held until that record commits, so the
 * orchestrator's next run of the task is compiled with it; a run that
 * ended without a result keeps its whole allowance counted (store.c),
 * except where nothing ran.  The denials a result reports (its denials,
 * gated's drops but "missing") are kept for its task with that record,
 * counted for the task's security review and shown to the approver of
 * its next capability request (capability.c).  control.c refuses a run
 * before anything is compiled when launchd-sbx is not configured.  The
 * result goes out with policyd's signed receipt (receipt.c): the task,
 * the execution, the exact grant sent to launchd-sbx, the exit status and
 * each released output, never a receipt launchd-sbx sent.
 */
#include <sys/queue.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "frame.h"
#include "log.h"
#include "receipt.h"
#include "util.h"
#include "policyd.h"

enum run_state {
	RUN_WAITING,		/* its execution record is not yet durable */
	RUN_READY,		/* durable: launch on the next loop pass */
	RUN_LAUNCHED,		/* LaunchRequest sent; awaiting the result */
};

struct run {
	TAILQ_ENTRY(run)	 entry;
	struct launch		*lc;
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
	char			 traceparent[TRACE_PARENT_LEN + 1];
	uint8_t			*launch;	/* packed LaunchRequest frame */
	size_t			 launch_len;
	char			*tenant;
	char			*user;
	Sbx__V1__SignedPolicy	 signed_;	/* for the receipt */
};

struct launch {
	struct policyd		*pd;
	TAILQ_HEAD(, run)	 runs;		/* every run not yet answered */
	struct event		*ev;		/* start the ready runs */
};

static void
launch_run_free(struct run *r)
{
	TAILQ_REMOVE(&r->lc->runs, r, entry);
	frame_client_free(r->fc);
	frame_conn_release(r->conn);
	free(r->task_id);
	free(r->policy_name);
	free(r->launch);
	free(r->tenant);
	free(r->user);
	sign_signed_clear(&r->signed_);
	free(r);
}

/*
 * The run failed after its execution was recorded: audit "run-failed"
 * with the rule, and send the orchestrator the error once that event is
 * durable.  Frees the run.
 */
static void
launch_run_fail(struct run *r, Sbx__V1__ErrorCode code, const char *rule,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void
launch_run_fail(struct run *r, Sbx__V1__ErrorCode code, const char *rule,
    const char *fmt, ...)
{
	struct launch		*lc = r->lc;
	Sbx__V1__Envelope	 env;
	Sbx__V1__Error		 err;
	char			 msg[512];
	va_list			 ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warnx("run %s of task %s failed (%s): %s", r->execution_id,
	    r->task_id, rule, msg);
	lc->pd->metrics.run_failures++;
	store_add_event(lc->pd->store, r->task_id, "run-failed",
	    r->execution_id, r->hash, rule, msg, r->actor);
	sbx__v1__error__init(&err);
	err.code = code;
	err.message = msg;
	err.rule = (char *)rule;
	frame_env_init(&env, r->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_ERROR;
	env.error = &err;
	commit_hold(lc->pd->commit, r->conn, &env, HELD_OTHER, NULL, 1);
	launch_run_free(r);
}

/* A run that failed before anything was launched sent nothing: its
 * allowance goes back to the task. */
static void
launch_run_nothing_ran(struct run *r)
{
	store_add_egress(r->lc->pd->store, r->task_id, r->execution_id,
	    r->hash, 1, 0, NULL, 0, r->actor);
	if (r->lc->pd->fleet != NULL)
		(void)fleet_spent(r->lc->pd->fleet, r->execution_id, 0);
}

/* Add rule at boundary to den (of *n, room for max) unless it is there:
 * a rule counts once per boundary in one execution, with the detail and
 * time of its first report (time 0: the record's, store.c). */
static void
launch_denial_add(struct store_denial *den, size_t *n, size_t max,
    const char *rule, const char *boundary, const char *detail,
    int64_t time_ns)
{
	struct store_denial	 d;

	if (rule == NULL || rule[0] == '\0')
		return;
	memset(&d, 0, sizeof(d));
	snprintf(d.rule, sizeof(d.rule), "%s", rule);
	snprintf(d.boundary, sizeof(d.boundary), "%s",
	    boundary != NULL && boundary[0] != '\0' ? boundary : "launch");
	snprintf(d.detail, sizeof(d.detail), "%s",
	    detail != NULL ? detail : "");
	d.time_ns = time_ns > 0 ? time_ns : 0;
	for (size_t i = 0; i < *n; i++)
		if (strcmp(den[i].rule, d.rule) == 0 &&
		    strcmp(den[i].boundary, d.boundary) == 0)
			return;
	if (*n < max)
		den[(*n)++] = d;
}

/*
 * The run's denials, for the task's security review and the approvers
 * of its capability requests (store.c): each rule the result lists
 * (egressd's refusals with the first refused host, a boundary that
 * failed), and each reason gated dropped outputs for (boundary gate) but
 * "missing".  Malloc'd; NULL if there are none.
 */
static struct store_denial *
launch_result_denials(const Sbx__V1__ExecutionResult *res, size_t *n)
{
	struct store_denial	*den;
	char			 detail[300];
	size_t			 max;

	*n = 0;
	max = res->n_denials + res->n_dropped + 1;
	den = xcalloc(max, sizeof(*den));
	for (size_t i = 0; i < res->n_denials; i++)
		launch_denial_add(den, n, max, res->denials[i]->rule,
		    res->denials[i]->boundary, res->denials[i]->detail,
		    res->denials[i]->time_ns);
	/* A declared output the code did not write ("missing") was
	 * refused nothing: every other reason is the gate refusing. */
	for (size_t i = 0; i < res->n_dropped; i++) {
		if (strcmp(res->dropped[i]->reason, "missing") == 0)
			continue;
		snprintf(detail, sizeof(detail), "output %.200s dropped",
		    res->dropped[i]->name);
		launch_denial_add(den, n, max, res->dropped[i]->reason,
		    "gate", detail, 0);
	}
	/* Undeclared entries past the list's cap. */
	if (res->dropped_unlisted != NULL &&
	    res->dropped_unlisted->entries > 0) {
		snprintf(detail, sizeof(detail), "%u undeclared entries "
		    "dropped", res->dropped_unlisted->entries);
		launch_denial_add(den, n, max, "undeclared", "gate", detail,
		    0);
	}
	if (*n == 0) {
		free(den);
		return NULL;
	}
	return den;
}

/*
 * Sign what policyd knows for certain about the run, once the result is
 * in: its task and execution, the grant it ran under, the exit status
 * and each released output.  Leaves out untouched (no receipt) if it
 * cannot sign; the result still goes out.
 */
static void
launch_receipt(struct run *r, const Sbx__V1__ExecutionResult *res,
    Sbx__V1__SignedReceipt *out)
{
	Sbx__V1__Receipt	 rc;
	Sbx__V1__ReceiptOutput	*ro;
	Sbx__V1__ReceiptOutput	**rop;

	sbx__v1__receipt__init(&rc);
	rc.task_id = r->task_id;
	rc.execution_id = r->execution_id;
	rc.policy_hash = r->hash;
	rc.grant = &r->signed_;
	rc.exit_code = res->exit_code;
	rc.signal = res->signal;
	rc.issued_at = now_s();
	rc.tenant = r->tenant;
	rc.user = r->user;
	ro = xcalloc(res->n_outputs + 1, sizeof(*ro));
	rop = xcalloc(res->n_outputs + 1, sizeof(*rop));
	for (size_t i = 0; i < res->n_outputs; i++) {
		sbx__v1__receipt_output__init(&ro[i]);
		ro[i].name = res->outputs[i]->name;
		ro[i].type = res->outputs[i]->type;
		ro[i].bytes = res->outputs[i]->bytes;
		ro[i].sha256 = res->outputs[i]->sha256;
		rop[i] = &ro[i];
	}
	rc.outputs = rop;
	rc.n_outputs = res->n_outputs;
	if (receipt_sign(r->lc->pd->key, &rc, out) == -1)
		log_warnx("run %s of task %s: cannot sign its receipt",
		    r->execution_id, r->task_id);
	free(rop);
	free(ro);
}

static void
launch_run_result(struct run *r, Sbx__V1__ExecutionResult *res)
{
	Sbx__V1__SignedReceipt	 receipt;
	Sbx__V1__SignedReceipt	*theirs;
	Sbx__V1__Envelope	 env;
	Sbx__V1__PolicyRef	 ref;
	struct store_denial	*den;
	size_t			 nden;
	int			 known;

	if (res->execution_id[0] != '\0' &&
	    strcmp(res->execution_id, r->execution_id) != 0) {
		launch_run_fail(r, SBX__V1__ERROR_CODE__ERROR_LAUNCH,
		    "launchd-bad-reply", "launchd-sbx answered for execution "
		    "%.64s, not %s", res->execution_id, r->execution_id);
		return;
	}
	if (res->policy != NULL && res->policy->hash[0] != '\0' &&
	    strcmp(res->policy->hash, r->hash) != 0) {
		launch_run_fail(r, SBX__V1__ERROR_CODE__ERROR_LAUNCH,
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
	/* Passed through as the orchestrator sent it, whatever launchd-sbx
	 * said. */
	res->traceparent = r->traceparent;
	/* Only policyd's receipt, never one launchd-sbx made up. */
	theirs = res->receipt;
	sbx__v1__signed_receipt__init(&receipt);
	launch_receipt(r, res, &receipt);
	res->receipt = receipt.receipt.len > 0 ? &receipt : NULL;
	frame_env_init(&env, r->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_RESULT;
	env.result = res;
	r->lc->pd->metrics.runs++;
	/* What it sent replaces what it was allowed, once on disk; the
	 * result waits for that commit, but goes out even if it fails
	 * (the allowance then stays counted: more, never less). */
	known = res->usage != NULL && !res->usage->egress_unknown;
	den = launch_result_denials(res, &nden);
	store_add_egress(r->lc->pd->store, r->task_id, r->execution_id,
	    r->hash, known, known ? res->usage->egress_bytes_out : 0, den,
	    nden, r->actor);
	/* The fleet's copy too (fleet.c); a failure leaves the run counted
	 * as all it was allowed. */
	if (known && r->lc->pd->fleet != NULL)
		(void)fleet_spent(r->lc->pd->fleet, r->execution_id,
		    res->usage->egress_bytes_out);
	/* Counted for its template version, and its rollout checked. */
	rollout_count(r->lc->pd->roll, r->task_id, r->execution_id, r->hash,
	    r->policy_name, r->policy_version, den, nden);
	free(den);
	commit_hold(r->lc->pd->commit, r->conn, &env, HELD_OTHER, NULL,
	    0);
	/* The unpacked reply owns its strings; ours must not be freed
	 * through it. */
	res->task_id = NULL;
	res->execution_id = NULL;
	res->policy = NULL;
	res->traceparent = NULL;
	res->receipt = theirs;
	receipt_signed_clear(&receipt);
	commit_rollout(r->lc->pd->commit);
}

static void
launch_run_reply1(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	struct run		*r = arg;
	Sbx__V1__Error		*e;
	char			*tid, *xid, *tp;
	Sbx__V1__PolicyRef	*pol;

	(void)fc;
	if (rep == NULL) {
		launch_run_fail(r, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    "launchd-unavailable", "launchd-sbx at %s: %s; execution "
		    "%s has no result", r->lc->pd->conf->launchd_socket, why,
		    r->execution_id);
		return;
	}
	if (rep->request_id != r->request_id) {
		launch_run_fail(r, SBX__V1__ERROR_CODE__ERROR_LAUNCH,
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
		tp = rep->result->traceparent;
		launch_run_result(r, rep->result);
		/* Restore what the envelope owns, for its free. */
		if (rep->result->task_id == NULL) {
			rep->result->task_id = tid;
			rep->result->execution_id = xid;
			rep->result->policy = pol;
			rep->result->traceparent = tp;
			launch_run_free(r);
		}
		return;
	case SBX__V1__ENVELOPE__BODY_ERROR:
		e = rep->error;
		if (e->code == SBX__V1__ERROR_CODE__ERROR_LAUNCH)
			launch_run_fail(r, e->code, e->rule[0] != '\0' ?
			    e->rule : "launch-refused", "%s", e->message);
		else
			launch_run_fail(r, SBX__V1__ERROR_CODE__ERROR_LAUNCH,
			    e->rule[0] != '\0' ? e->rule : "launchd-error",
			    "launchd-sbx: %s", e->message);
		return;
	default:
		launch_run_fail(r, SBX__V1__ERROR_CODE__ERROR_LAUNCH,
		    "launchd-bad-reply", "launchd-sbx answered with message "
		    "body %d, not a result", (int)rep->body_case);
		return;
	}
}

/* The run's lines and records carry its ids and trace (log.h). */
static void
launch_run_ctx(const struct run *r)
{
	log_ctx_set(r->task_id, r->execution_id, r->hash, r->traceparent);
}

static void
launch_run_reply(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	launch_run_ctx(arg);
	launch_run_reply1(fc, rep, why, arg);
	log_ctx_clear();
}

static void
launch_run_start(struct run *r)
{
	struct launch		*lc = r->lc;
	struct policyd_conf	*conf = lc->pd->conf;
	size_t			 max;
	char			 err[512];

	if (frame_conn_closed(r->conn)) {
		launch_run_nothing_ran(r);
		launch_run_fail(r, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    "client-gone", "the orchestrator hung up before the "
		    "launch; nothing ran");
		return;
	}
	/* Results carry capped stdout and stderr: allow at least 4 MiB. */
	max = (size_t)conf->common.max_frame_kb * 1024;
	if (max < 4 * 1024 * 1024)
		max = 4 * 1024 * 1024;
	r->fc = frame_connect(lc->pd->base, conf->launchd_socket,
	    conf->launchd_uid, max, launch_run_reply, r, err, sizeof(err));
	if (r->fc == NULL) {
		launch_run_nothing_ran(r);
		launch_run_fail(r, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    "launchd-unreachable", "launchd-sbx unreachable: %s; "
		    "nothing ran", err);
		return;
	}
	/* launchd-sbx enforces the wall clock; this only bounds our wait. */
	frame_client_timeout(r->fc, (int)(r->wall + conf->launchd_grace));
	if (frame_client_send_packed(r->fc, r->launch, r->launch_len) == -1) {
		launch_run_fail(r, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
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
launch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct launch	*lc = arg;
	struct run	*r, *next;

	(void)fd;
	(void)what;
	for (r = TAILQ_FIRST(&lc->runs); r != NULL; r = next) {
		next = TAILQ_NEXT(r, entry);
		if (r->state == RUN_READY) {
			launch_run_ctx(r);
			launch_run_start(r);
			log_ctx_clear();
			/* A failure may have freed entries: start over. */
			next = TAILQ_FIRST(&lc->runs);
		}
	}
}

static void
launch_run_ready(struct launch *lc, struct run *r)
{
	r->state = RUN_READY;
	event_active(lc->ev, EV_TIMEOUT, 0);
}

/* A compiled run: what the launch needs, packed now. */
static struct run *
launch_run_new(struct launch *lc, struct frame_conn *c,
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
	lr.traceparent = task->traceparent;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_LAUNCH;
	env.launch = &lr;
	r = xcalloc(1, sizeof(*r));
	if ((r->launch = frame_pack(&env, &r->launch_len)) == NULL) {
		free(r);
		return NULL;
	}
	r->lc = lc;
	r->conn = c;
	frame_conn_hold(c);
	r->state = RUN_WAITING;
	r->request_id = req->request_id;
	r->task_id = xstrdup(task->id);
	r->tenant = xstrdup(task->tenant);
	r->user = xstrdup(task->user);
	sbx__v1__signed_policy__init(&r->signed_);
	r->signed_.grant.len = out->signed_.grant.len;
	r->signed_.grant.data = xmalloc(out->signed_.grant.len);
	memcpy(r->signed_.grant.data, out->signed_.grant.data,
	    out->signed_.grant.len);
	r->signed_.signature.len = out->signed_.signature.len;
	r->signed_.signature.data = xmalloc(out->signed_.signature.len);
	memcpy(r->signed_.signature.data, out->signed_.signature.data,
	    out->signed_.signature.len);
	snprintf(r->execution_id, sizeof(r->execution_id), "%s",
	    out->execution_id);
	memcpy(r->hash, out->hash, sizeof(r->hash));
	r->policy_name = xstrdup(out->policy->name);
	r->policy_version = out->policy->version;
	r->wall = out->policy->limits != NULL ?
	    out->policy->limits->wall_seconds : 0;
	snprintf(r->actor, sizeof(r->actor), "%s", actor);
	/* compile_validate checked it. */
	snprintf(r->traceparent, sizeof(r->traceparent), "%s",
	    task->traceparent);
	TAILQ_INSERT_TAIL(&lc->runs, r, entry);
	return r;
}

/* Once the batch with the run's execution record has settled: launch
 * (ok), or end the run, whose client has had the error (commit.c). */
static void
launch_committed(void *arg, int ok)
{
	struct run	*r = arg;

	if (ok)
		launch_run_ready(r->lc, r);
	else
		launch_run_free(r);
}

int
launch_run(struct launch *lc, struct frame_conn *c,
    const Sbx__V1__Envelope *req, const Sbx__V1__Task *task,
    struct compile_out *out, const char *actor)
{
	struct run	*r;

	if ((r = launch_run_new(lc, c, req, task, out, actor)) == NULL)
		return -1;
	commit_hold_cb(lc->pd->commit, c, NULL, HELD_EXECUTION, NULL, 1,
	    launch_committed, r, req->request_id);
	return 0;
}

struct launch *
launch_new(struct policyd *pd)
{
	struct launch	*lc;

	lc = xcalloc(1, sizeof(*lc));
	lc->pd = pd;
	TAILQ_INIT(&lc->runs);
	if ((lc->ev = event_new(pd->base, -1, 0, launch_cb, lc)) == NULL) {
		free(lc);
		return NULL;
	}
	if (pd->conf->launchd_socket != NULL)
		log_info("runs launch on %s (uid %u)",
		    pd->conf->launchd_socket, (unsigned)pd->conf->launchd_uid);
	return lc;
}

void
launch_free(struct launch *lc)
{
	if (lc == NULL)
		return;
	/* Runs still waiting for launchd-sbx end with us: their clients'
	 * connections close, which is no success. */
	while (!TAILQ_EMPTY(&lc->runs))
		launch_run_free(TAILQ_FIRST(&lc->runs));
	event_free(lc->ev);
	free(lc);
}
