/*
 * control.c: policyd's sockets and what comes in on them (the skeleton
 * in common/daemon.c listens on them, with the handlers here).  The
 * orchestrator socket compiles and runs tasks and answers audit
 * questions; the admin socket also manages entitlements, lists templates
 * and reports metrics; approvald's decisions on capability requests come
 * on the optional approvals socket, which takes nothing else.  Framing,
 * peer checks, frame caps and version checks are common/frame.c's; this
 * file checks each request and hands it down: a compile to compile.c, a
 * run's launch to launch.c, a capability request or decision to
 * capability.c.
 *
 * The invariant it upholds: nothing is acknowledged before it is on disk.
 * A compile's reply is held by the group commit (commit.c) until the
 * batch with its records has committed; every other request first drains
 * both batches (commit_flush()), so each connection still gets its
 * replies in order and reads see every acknowledged record, and an
 * entitlement change is then its own transaction.  A run is refused
 * before anything is compiled or counted when launchd-sbx is not
 * configured or the task has no code.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "audit.h"
#include "frame.h"
#include "log.h"
#include "util.h"
#include "policyd.h"

struct control {
	struct policyd		*pd;
	struct launch		*launch;	/* runs (launch.c) */
};

static const char *const control_rules[] = {
	RULE_UNKNOWN_TASK_TYPE, RULE_TASK_MISMATCH, RULE_NO_ENTITLEMENT,
	RULE_NOT_READABLE, RULE_EXHAUSTED, RULE_TENANT_NOT_ALLOWED, NULL
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

/* Send now, after anything this or another client is still owed. */
static void
control_send(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *env)
{
	commit_flush(ctl->pd->commit);
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

/*
 * A request outside the orchestrator's tenants (orch.c): refused with
 * tenant-not-allowed, and audited with the peer's uid before the client
 * hears it.  The event names the task in its detail, not as its task:
 * a refused peer must not add to another tenant's task's record (its
 * denials count towards a security review).
 */
static void
control_scope_refuse(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req, int compile, const char *fmt, ...)
{
	struct policyd		*pd = ctl->pd;
	Sbx__V1__Envelope	 env;
	Sbx__V1__Error		 err;
	char			 actor[32], msg[512];
	va_list			 ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	control_actor(c, actor, sizeof(actor));
	store_add_event(pd->store, "", "deny", NULL, NULL,
	    RULE_TENANT_NOT_ALLOWED, msg, actor);
	log_info("%s: refused: %s: %s", actor, RULE_TENANT_NOT_ALLOWED, msg);
	sbx__v1__error__init(&err);
	err.code = SBX__V1__ERROR_CODE__ERROR_DENIED;
	err.rule = (char *)RULE_TENANT_NOT_ALLOWED;
	err.message = msg;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_ERROR;
	env.error = &err;
	commit_hold(pd->commit, c, &env, compile ? HELD_DENIAL : HELD_OTHER,
	    control_rule(RULE_TENANT_NOT_ALLOWED), 1);
}

/* A task id already bound to a tenant outside the scope: 1, else 0. */
static int
control_scope_foreign(struct control *ctl, const struct orch_scope *s,
    const char *task_id)
{
	struct store_task	bound;

	if (task_id == NULL || *task_id == '\0')
		return 0;
	return store_task_get(ctl->pd->store, task_id, &bound) == 1 &&
	    !orch_may(s, bound.tenant);
}

/*
 * The orchestrator socket's scope check, before a request is handled: 0
 * to go on, -1 when it was refused.  A compile or run must name a tenant
 * of the scope and a task id that is new or bound to one; a capability
 * request or an audit query naming a task, a task bound to one.  A
 * peer no entry names may do nothing.  The other tenant is never named:
 * that a task id is taken is all a refused peer learns.
 */
static int
control_scope(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req, const struct orch_scope *s)
{
	const Sbx__V1__Task	*t = NULL;
	Sbx__V1__Error		 verr = SBX__V1__ERROR__INIT;
	const char		*task_id = NULL;
	int			 compile = 0, valid;
	unsigned		 uid = (unsigned)frame_conn_peer(c)->uid;

	if (!s->set)
		return 0;
	if (!s->bound) {
		control_scope_refuse(ctl, c, req, 0, "orchestrator uid %u is "
		    "in no orchestrators: entry of policyd.yaml: it may act "
		    "for no tenant", uid);
		return -1;
	}
	switch (req->body_case) {
	case SBX__V1__ENVELOPE__BODY_COMPILE:
		t = req->compile->task;
		compile = 1;
		break;
	case SBX__V1__ENVELOPE__BODY_RUN:
		t = req->run->task;
		compile = 1;
		break;
	case SBX__V1__ENVELOPE__BODY_CAPABILITY:
		task_id = req->capability->task_id;
		break;
	case SBX__V1__ENVELOPE__BODY_AUDIT_QUERY:
		task_id = req->audit_query->task_id;
		break;
	default:
		return 0;
	}
	if (compile) {
		/* A bad task gets compile.c's ERROR_INVALID, as before. */
		valid = t != NULL && compile_validate(t, &verr) == 0;
		compile_error_clear(&verr);
		if (!valid)
			return 0;
		if (!orch_may(s, t->tenant)) {
			control_scope_refuse(ctl, c, req, 1, "task %s: "
			    "orchestrator uid %u may not act for tenant "
			    "\"%s\"", t->id, uid, t->tenant);
			return -1;
		}
		task_id = t->id;
	}
	if (control_scope_foreign(ctl, s, task_id)) {
		control_scope_refuse(ctl, c, req, compile, "task %.128s is "
		    "bound to a tenant orchestrator uid %u may not act for",
		    task_id, uid);
		return -1;
	}
	return 0;
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
	int			 recorded, rc;

	control_actor(c, actor, sizeof(actor));
	frame_env_init(&env, req->request_id);
	before = store_pending(pd->store);
	rc = compile_task(pd, task, actor, run, &out, &err);
	/* compile_task set it for this task's lines and records. */
	log_ctx_clear();
	if (rc == -1) {
		/* Held even when nothing was recorded, so it cannot
		 * overtake this client's earlier replies. */
		recorded = store_pending(pd->store) > before;
		env.body_case = SBX__V1__ENVELOPE__BODY_ERROR;
		env.error = &err;
		commit_hold(pd->commit, c, &env, recorded ? HELD_DENIAL :
		    HELD_OTHER, control_rule(err.rule), recorded);
		compile_error_clear(&err);
		/* A refusal counts for a rollout too. */
		commit_rollout(pd->commit);
		return;
	}
	if (run == COMPILE_RUN) {
		if (launch_run(ctl->launch, c, req, task, &out, actor) == 0) {
			compile_out_clear(&out);
			return;
		}
		/* The execution is in the batch: its reply must wait too. */
		compile_out_clear(&out);
		env.body_case = SBX__V1__ENVELOPE__BODY_ERROR;
		compile_error(&err, SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "the launch request cannot be encoded");
		env.error = &err;
		commit_hold(pd->commit, c, &env, HELD_OTHER, NULL, 1);
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
	if (run == COMPILE_PREVIEW)
		commit_hold(pd->commit, c, &env, HELD_OTHER, NULL, 0);
	else
		commit_hold(pd->commit, c, &env, HELD_EXECUTION, NULL, 1);
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
	commit_flush(ctl->pd->commit);
	if (audit_begin(a) == -1) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "policyd.db: cannot begin a transaction");
		return;
	}
	/* In a fleet the change is the database's (every host reads it
	 * there), its transaction held open until the audit record here is
	 * committed: recorded before it takes effect. */
	if (pd->fleet != NULL)
		rc = fleet_entitle_begin(pd->fleet, m, add, err, sizeof(err));
	else
		rc = add ? entitle_add(pd->ent, m, err, sizeof(err)) :
		    entitle_remove(pd->ent, m, err, sizeof(err));
	if (rc == -1) {
		audit_rollback(a);
		entitle_forget(pd->ent);
		if (pd->fleet != NULL) {
			log_warnx("entitlement %s/%s: %s", m->tenant, m->user,
			    err);
			control_send_error(ctl, c, req->request_id,
			    SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
			    RULE_STORE_UNAVAILABLE, "the fleet's store is "
			    "unavailable; nothing was changed");
		} else
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
	if (pd->fleet != NULL && rc == -1)
		fleet_entitle_abort(pd->fleet);
	else if (pd->fleet != NULL && fleet_entitle_commit(pd->fleet, err,
	    sizeof(err)) == -1) {
		/* Recorded here, not made: the record says more, never
		 * less, and the operator is told to repeat it. */
		log_warnx("entitlement %s: audited, but the fleet's store did "
		    "not commit it: %s", detail, err);
		free(detail);
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    RULE_STORE_UNAVAILABLE, "the fleet's store did not commit "
		    "the change; it may not have been made: repeat it");
		return;
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

	commit_flush(ctl->pd->commit);
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

/*
 * What an orchestrator limited to some tenants sees of the audit log:
 * the records of tasks bound to one of them, the first limit (0: all).
 * Records of no task or of a task never bound (refused before its first
 * execution) belong to no tenant it can be shown to.
 */
static Sbx__V1__AuditEvent **
control_audit_scope(struct control *ctl, const struct orch_scope *s,
    Sbx__V1__AuditEvent **v, size_t n, uint32_t limit, size_t *kept)
{
	Sbx__V1__AuditEvent	**out;
	struct store_task	  bound;
	char			 *last = NULL;
	size_t			  i, k = 0;
	int			  ok = 0;

	out = xcalloc(n + 1, sizeof(*out));
	for (i = 0; i < n; i++) {
		if (last == NULL || strcmp(last, v[i]->task_id) != 0) {
			free(last);
			last = xstrdup(v[i]->task_id);
			ok = *last != '\0' && store_task_get(ctl->pd->store,
			    last, &bound) == 1 && orch_may(s, bound.tenant);
		}
		if (ok && (limit == 0 || k < limit))
			out[k++] = v[i];
		else
			sbx__v1__audit_event__free_unpacked(v[i], NULL);
	}
	free(last);
	free(v);
	*kept = k;
	return out;
}

static void
control_audit_query(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req, const struct orch_scope *s)
{
	const Sbx__V1__AuditQuery	*q = req->audit_query;
	Sbx__V1__Envelope		 env;
	Sbx__V1__AuditRecords		 recs;
	Sbx__V1__AuditEvent		**v = NULL;
	size_t				 n = 0, page;
	int				 scoped = s != NULL && s->set && !s->all;

	/* A page of the whole chain (audit ship) is the operator's: a
	 * scoped caller's view has holes by design. */
	if (q->chain && (scoped || (q->task_id != NULL &&
	    *q->task_id != '\0'))) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "", scoped ?
		    "audit_query: chain is the whole chain, not a tenant's "
		    "records" : "audit_query: chain pages the whole chain, "
		    "not a task's records: task_id must be empty");
		return;
	}
	/* Read only what is committed: never show a record that might
	 * still roll back. */
	commit_flush(ctl->pd->commit);
	if (audit_query_after(store_audit(ctl->pd->store), q->task_id,
	    q->after_seq, scoped ? 0 : admin_audit_limit(c, q), &v,
	    &n) == -1) {
		control_send_error(ctl, c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "audit log cannot be read");
		return;
	}
	if (scoped)
		v = control_audit_scope(ctl, s, v, n, q->limit, &n);
	page = n;
	if (admin_audit_page(c, req, v, &page)) {
		audit_events_free(v, n);
		return;
	}
	sbx__v1__audit_records__init(&recs);
	recs.events = v;
	recs.n_events = page;
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

	commit_flush(ctl->pd->commit);
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
	    "sbx_policyd_run_failures_total %llu\n"
	    "# HELP sbx_policyd_security_reviews_total Tasks whose denials "
	    "reached security_review.denials.\n"
	    "# TYPE sbx_policyd_security_reviews_total counter\n"
	    "sbx_policyd_security_reviews_total %llu\n", s,
	    (unsigned long long)m->executions,
	    (unsigned long long)m->commits,
	    (unsigned long long)m->runs,
	    (unsigned long long)m->run_failures,
	    (unsigned long long)(pd->store != NULL ?
	    store_reviews(pd->store) : 0));
	free(s);
	s = capability_metrics(pd->cap);
	xasprintf(&u, "%s%s", t, s);
	free(s);
	free(t);
	s = rollout_metrics(pd->roll);
	xasprintf(&t, "%s%s", u, s);
	free(s);
	free(u);
	return t;
}

static void
control_send_metrics(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__Metrics	 m;

	/* Count what is waiting, so the figures include it. */
	commit_flush(ctl->pd->commit);
	sbx__v1__metrics__init(&m);
	m.text = control_metrics(ctl->pd);
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_METRICS;
	env.metrics = &m;
	control_send(ctl, c, &env);
	free(m.text);
}

/* rollout_query: the rollouts, with their counts. */
/* Reply the rollouts (type's, or every one when NULL); code when they
 * cannot be given. */
static void
control_send_rollouts(struct control *ctl, struct frame_conn *c,
    uint64_t id, const char *type, Sbx__V1__ErrorCode code)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__Rollouts	 out;
	char			 err[256];

	if (rollout_status(ctl->pd->roll, type, &out, err,
	    sizeof(err)) == -1) {
		control_send_error(ctl, c, id, code, "", err);
		return;
	}
	frame_env_init(&env, id);
	env.body_case = SBX__V1__ENVELOPE__BODY_ROLLOUTS;
	env.rollouts = &out;
	control_send(ctl, c, &env);
	rollout_status_clear(&out);
}

static void
control_rollouts(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	control_send_rollouts(ctl, c, req->request_id,
	    req->rollout_query != NULL ? req->rollout_query->type : NULL,
	    SBX__V1__ERROR_CODE__ERROR_NOT_FOUND);
}

/*
 * rollout_control: promote, halt or set-percent, by the admin peer whose
 * uid the audit event names; written and audited before the reply, in
 * its own transaction after everything before it, as an entitlement
 * change is.
 */
static void
control_rollout_control(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__RolloutControl	*m = req->rollout_control;
	Sbx__V1__ErrorCode		 code;
	char				 err[512], actor[32];

	control_actor(c, actor, sizeof(actor));
	commit_flush(ctl->pd->commit);
	if (rollout_control(ctl->pd->roll, m, actor, &code, err,
	    sizeof(err)) == -1) {
		control_send_error(ctl, c, req->request_id, code, "", err);
		return;
	}
	control_send_rollouts(ctl, c, req->request_id, m->type,
	    SBX__V1__ERROR_CODE__ERROR_INTERNAL);
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
	control_compile(ctl, c, req, t, COMPILE_RUN);
}

/* KeyRequest: the key signing now, then the previous one if any. */
static void
control_keys(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__KeyReply	 rep;
	Sbx__V1__PublicKey	 k[2], *pk[2];
	char			 kid[SIGN_KEYID_HEX];

	sbx__v1__key_reply__init(&rep);
	sbx__v1__public_key__init(&k[0]);
	k[0].key_id = ctl->pd->key->key_id;
	k[0].public_key.data = ctl->pd->key->pk;
	k[0].public_key.len = sizeof(ctl->pd->key->pk);
	k[0].current = 1;
	pk[0] = &k[0];
	rep.n_keys = 1;
	if (ctl->pd->has_prev) {
		sbx__v1__public_key__init(&k[1]);
		sign_key_id(ctl->pd->prev_pk, kid);
		k[1].key_id = kid;
		k[1].public_key.data = ctl->pd->prev_pk;
		k[1].public_key.len = sizeof(ctl->pd->prev_pk);
		pk[1] = &k[1];
		rep.n_keys = 2;
	}
	rep.keys = pk;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_KEYS;
	env.keys = &rep;
	control_send(ctl, c, &env);
}

/* The orchestrator socket's messages, and with admin the admin socket's. */
static void
control_dispatch(struct control *ctl, struct frame_conn *c,
    Sbx__V1__Envelope *req, int admin, const struct orch_scope *s)
{
	switch (req->body_case) {
	case SBX__V1__ENVELOPE__BODY_COMPILE:
		control_compile(ctl, c, req, req->compile->task,
		    req->compile->preview ? COMPILE_PREVIEW : COMPILE_ONLY);
		return;
	case SBX__V1__ENVELOPE__BODY_RUN:
		control_run(ctl, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_QUERY:
		control_audit_query(ctl, c, req, s);
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY:
		control_audit_verify(ctl, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_KEY_REQUEST:
		control_keys(ctl, c, req);
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
	if (admin) {
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
		case SBX__V1__ENVELOPE__BODY_ROLLOUT_QUERY:
			control_rollouts(ctl, c, req);
			return;
		case SBX__V1__ENVELOPE__BODY_ROLLOUT_CONTROL:
			control_rollout_control(ctl, c, req);
			return;
		default:
			break;
		}
	}
	control_send_error(ctl, c, req->request_id,
	    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "", admin ?
	    "the admin socket does not take this message" :
	    "the orchestrator socket does not take this message");
}

void
control_orch_socket(struct frame_conn *c, Sbx__V1__Envelope *req, void *arg)
{
	struct policyd		*pd = arg;
	struct orch_scope	 s;

	/* Scoped to the peer's tenants (orch.c); the admin socket is not. */
	orch_scope_of(pd->conf, frame_conn_fd(c), &s);
	if (control_scope(pd->ctl, c, req, &s) == 0)
		control_dispatch(pd->ctl, c, req, 0, &s);
	orch_scope_clear(&s);
}

void
control_admin_socket(struct frame_conn *c, Sbx__V1__Envelope *req, void *arg)
{
	struct policyd	*pd = arg;

	control_dispatch(pd->ctl, c, req, 1, NULL);
}

/* approvald's socket: decisions on capability requests, nothing else. */
void
control_approvals_socket(struct frame_conn *c, Sbx__V1__Envelope *req,
    void *arg)
{
	struct policyd	*pd = arg;
	struct control	*ctl = pd->ctl;

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

struct control *
control_new(struct policyd *pd)
{
	struct control	*ctl;

	ctl = xcalloc(1, sizeof(*ctl));
	ctl->pd = pd;
	if ((ctl->launch = launch_new(pd)) == NULL) {
		free(ctl);
		return NULL;
	}
	return ctl;
}

void
control_free(struct control *ctl)
{
	if (ctl == NULL)
		return;
	commit_flush(ctl->pd->commit);
	launch_free(ctl->launch);
	free(ctl);
}
