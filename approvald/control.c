/*
 * control.c: approvald's two sockets (the skeleton in common/daemon.c
 * listens on them, with the handlers here) and the forwarding of
 * decisions to policyd.  The submit socket takes `capability` from policyd (its uid
 * only, checked before a byte is read) and answers `decision` PENDING once
 * the request is on disk.  The console socket (root and the approvers
 * group) lists the queue and takes `decision`s: the approver is the Unix
 * user the kernel names for the connection (SO_PEERCRED), never a name
 * the client sends.  That user may not decide a request of a task whose
 * user they are themselves (separation of duties: aparse_own_task); the
 * refusal says why and is audited.
 *
 * Invariant: a decision is final only when policyd has answered it and
 * the answer is recorded here; until then the request stays pending, and
 * the console is told so (fail closed).  Every submission, decision,
 * failed forward and refused peer is audited.
 */
#include <sys/queue.h>
#include <sys/types.h>

#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "admin.h"
#include "audit.h"
#include "frame.h"
#include "log.h"
#include "policy.h"
#include "util.h"
#include "approvald/approvald.h"

/* A decision on its way to policyd, with the console waiting for it. */
struct aforward {
	TAILQ_ENTRY(aforward)	 entry;
	struct approvald	*ad;
	struct frame_conn	*conn;
	struct frame_client	*fc;
	uint64_t		 rid;		/* the console's request id */
	Sbx__V1__CapabilityDecision dec;	/* strings malloc'd */
	char			*task_id;
};


void
acontrol_user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd	 pw, *res = NULL;
	char		 tmp[1024];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 &&
	    res != NULL && res->pw_name != NULL && res->pw_name[0] != '\0')
		snprintf(buf, len, "%s", res->pw_name);
	else
		snprintf(buf, len, "uid:%u", (unsigned)uid);
}

static void
acontrol_actor(const struct ucred *cr, char *buf, size_t len)
{
	if (cr == NULL)
		snprintf(buf, len, "uid:?");
	else
		acontrol_user_name(cr->uid, buf, len);
}

void
acontrol_refused_peer(void *arg, const char *sock, const struct ucred *cr,
    const char *why)
{
	struct approvald	*ad = arg;
	char			 actor[64], detail[256];

	if (ad->queue == NULL)
		return;		/* still starting: nothing to record into */
	acontrol_actor(cr, actor, sizeof(actor));
	if (cr != NULL)
		snprintf(detail, sizeof(detail), "%s socket: peer %s (uid %u "
		    "gid %u pid %ld) refused: %s", sock, actor,
		    (unsigned)cr->uid, (unsigned)cr->gid, (long)cr->pid,
		    strcmp(why, "not-allowed") == 0 ?
		    "not on the socket's allowlist" : "too many connections");
	else
		snprintf(detail, sizeof(detail), "%s socket: a peer whose "
		    "credentials cannot be read was refused", sock);
	(void)aqueue_audit_event(ad->queue, actor, "deny", NULL, NULL,
	    ARULE_PEER, detail);
}

static void
acontrol_send_decision(struct frame_conn *c, uint64_t rid,
    const Sbx__V1__CapabilityDecision *d)
{
	Sbx__V1__Envelope	 env;

	frame_env_init(&env, rid);
	env.body_case = SBX__V1__ENVELOPE__BODY_DECISION;
	env.decision = (Sbx__V1__CapabilityDecision *)d;
	frame_conn_send(c, &env);
}

/* ---- the submit socket ---- */

static int
acontrol_request_ok(const Sbx__V1__CapabilityRequest *r, char *why,
    size_t len)
{
	const Sbx__V1__AllowRule	*h;

	if (r->request_id == NULL || !name_ok(r->request_id)) {
		snprintf(why, len, "request_id must be 1..128 of "
		    "[A-Za-z0-9._@:-]");
		return -1;
	}
	if (r->task_id == NULL || !name_ok(r->task_id)) {
		snprintf(why, len, "task_id must be 1..128 of "
		    "[A-Za-z0-9._@:-]");
		return -1;
	}
	switch (r->what_case) {
	case SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET:
		if (r->dataset == NULL || !name_ok(r->dataset)) {
			snprintf(why, len, "dataset must be 1..128 of "
			    "[A-Za-z0-9._@:-]");
			return -1;
		}
		break;
	case SBX__V1__CAPABILITY_REQUEST__WHAT_HOST:
		h = r->host;
		if (h == NULL || h->host == NULL || h->host[0] == '\0' ||
		    strlen(h->host) > 253) {
			snprintf(why, len, "host must name a host of 1..253 "
			    "characters");
			return -1;
		}
		break;
	default:
		snprintf(why, len, "the request asks for neither a dataset "
		    "nor a host");
		return -1;
	}
	/* What policyd knows of the task: bounded, shown quoted. */
	if (r->policy_hash != NULL && strlen(r->policy_hash) > 64) {
		snprintf(why, len, "policy_hash is longer than 64 characters");
		return -1;
	}
	if (r->n_denials > APPROVALD_DENIALS_MAX) {
		snprintf(why, len, "more than %d task denials",
		    APPROVALD_DENIALS_MAX);
		return -1;
	}
	for (size_t i = 0; i < r->n_denials; i++) {
		const Sbx__V1__TaskDenial *d = r->denials[i];

		if (d->rule == NULL || d->rule[0] == '\0' ||
		    strlen(d->rule) > 64 || strlen(d->boundary) > 32 ||
		    strlen(d->execution_id) > 128 ||
		    strlen(d->policy_hash) > 64 ||
		    strlen(d->detail) > APPROVALD_DETAIL_MAX) {
			snprintf(why, len, "task denial %zu: a rule of 1..64 "
			    "bytes, a detail of at most %d", i,
			    APPROVALD_DETAIL_MAX);
			return -1;
		}
	}
	if (r->why == NULL || r->why[0] == '\0' ||
	    strlen(r->why) > APPROVALD_WHY_MAX) {
		snprintf(why, len, "why must give a justification of 1..%d "
		    "bytes", APPROVALD_WHY_MAX);
		return -1;
	}
	return 0;
}

static void
acontrol_submit(struct approvald *ad, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__CapabilityRequest *r = req->capability;
	Sbx__V1__CapabilityRequest	*old;
	Sbx__V1__CapabilityDecision	 d, *dec;
	struct aqueue			*q = ad->queue;
	char				 actor[64], err[512];
	int				 rc;

	acontrol_actor(frame_conn_peer(c), actor, sizeof(actor));
	if (acontrol_request_ok(r, err, sizeof(err)) == -1) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, ARULE_BAD_REQUEST,
		    "capability request refused: %s", err);
		return;
	}
	if ((rc = aqueue_add(q, r, actor, err, sizeof(err))) == -1) {
		log_warnx("request %s not queued: %s", r->request_id, err);
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "request %s was not queued: %s", r->request_id, err);
		return;
	}
	if (rc == 0) {
		/* Sent again (policyd retrying): answer what we have. */
		if (aqueue_get(q, r->request_id, &old, &dec, err,
		    sizeof(err)) != 1) {
			frame_conn_send_error(c, req->request_id,
			    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
			    "request %s cannot be read back", r->request_id);
			return;
		}
		acontrol_send_decision(c, req->request_id, dec);
		aqueue_item_free(old, dec);
		return;
	}
	log_info("request %s of task %s queued by %s", r->request_id,
	    r->task_id, actor);
	sbx__v1__capability_decision__init(&d);
	d.request_id = r->request_id;
	d.status = SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING;
	d.reason = (char *)"waiting for an approver";
	acontrol_send_decision(c, req->request_id, &d);
}

/* ---- the console socket ---- */

static void
acontrol_list(struct approvald *ad, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__ApprovalItems	 it;
	char			 err[512];

	if (aqueue_list(ad->queue, req->approval_list->pending_only, &it,
	    err, sizeof(err)) == -1) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "", "%s", err);
		return;
	}
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_APPROVAL_ITEMS;
	env.approval_items = &it;
	frame_conn_send(c, &env);
	aqueue_items_clear(&it);
}

static void
aforward_free(struct aforward *f)
{
	TAILQ_REMOVE(&f->ad->forwards, f, entry);
	if (f->fc != NULL)
		frame_client_free(f->fc);
	frame_conn_release(f->conn);
	free(f->dec.request_id);
	free(f->dec.reason);
	free(f->dec.approver);
	free(f->dec.policy_hash);
	free(f->task_id);
	free(f);
}

/* The decision did not become final: audit it, tell the console. */
static void
aforward_fail(struct aforward *f, Sbx__V1__ErrorCode code, const char *rule,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
aforward_fail(struct aforward *f, Sbx__V1__ErrorCode code, const char *rule,
    const char *fmt, ...)
{
	char	 why[768], detail[1024];
	va_list	 ap;

	va_start(ap, fmt);
	(void)vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(detail, sizeof(detail), "%s of request %s by %s not "
	    "recorded: %s; the request stays pending",
	    f->dec.status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED ?
	    "approval" : "denial", f->dec.request_id, f->dec.approver, why);
	log_warnx("%s", detail);
	(void)aqueue_audit_event(f->ad->queue, f->dec.approver,
	    "decision-failed", f->task_id, NULL, rule, detail);
	if (!frame_conn_closed(f->conn))
		frame_conn_send_error(f->conn, f->rid, code, rule,
		    "%s: not decided; request %s stays pending", why,
		    f->dec.request_id);
	aforward_free(f);
}

static void
aforward_reply(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	struct aforward			*f = arg;
	const Sbx__V1__CapabilityDecision *pd;
	const char			*rule;
	char				 err[512];

	(void)fc;
	if (rep == NULL) {
		aforward_fail(f, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    ARULE_UNREACHABLE, "policyd did not answer: %s", why);
		return;
	}
	if (rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR) {
		aforward_fail(f, rep->error->code == 0 ?
		    SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE : rep->error->code,
		    ARULE_POLICYD, "policyd refused the decision: %s",
		    rep->error->message != NULL ? rep->error->message : "");
		return;
	}
	if (rep->body_case != SBX__V1__ENVELOPE__BODY_DECISION) {
		aforward_fail(f, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    ARULE_POLICYD, "policyd answered with message body %d, "
		    "not a decision", (int)rep->body_case);
		return;
	}
	pd = rep->decision;
	if (pd->request_id != NULL && pd->request_id[0] != '\0' &&
	    strcmp(pd->request_id, f->dec.request_id) != 0) {
		aforward_fail(f, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    ARULE_POLICYD, "policyd answered for request %.64s",
		    pd->request_id);
		return;
	}
	if (pd->status != f->dec.status) {
		aforward_fail(f, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    ARULE_POLICYD, "policyd answered %s to an %s",
		    capability_status_name(pd->status),
		    f->dec.status ==
		    SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED ?
		    "approval" : "denial");
		return;
	}
	if (f->dec.status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED &&
	    (pd->policy_hash == NULL || pd->policy_hash[0] == '\0')) {
		aforward_fail(f, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    ARULE_POLICYD, "policyd took the approval but returned "
		    "no policy hash");
		return;
	}
	free(f->dec.policy_hash);
	f->dec.policy_hash = xstrdup(pd->policy_hash != NULL ?
	    pd->policy_hash : "");
	/* The client goes now: the handler may free its own client. */
	frame_client_free(f->fc);
	f->fc = NULL;
	if (aqueue_decide(f->ad->queue, &f->dec, &rule, err,
	    sizeof(err)) == -1) {
		aforward_fail(f, rule != NULL ?
		    SBX__V1__ERROR_CODE__ERROR_INVALID :
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL,
		    rule != NULL ? rule : "", "policyd took it, but approvald "
		    "cannot record it: %s", err);
		return;
	}
	log_info("request %s %s by %s; policy hash %s", f->dec.request_id,
	    capability_status_name(f->dec.status), f->dec.approver,
	    f->dec.policy_hash[0] != '\0' ? f->dec.policy_hash : "unchanged");
	if (!frame_conn_closed(f->conn))
		acontrol_send_decision(f->conn, f->rid, &f->dec);
	aforward_free(f);
}

/* Separation of duties: the approver is the task's own user.  Refused
 * with the reason, and audited; the request stays pending for another
 * approver. */
static void
acontrol_own_task(struct approvald *ad, struct frame_conn *c,
    const Sbx__V1__Envelope *req, const Sbx__V1__CapabilityRequest *r,
    const char *approver, const char *why)
{
	const Sbx__V1__CapabilityDecision *d = req->decision;
	char	 detail[1024];

	snprintf(detail, sizeof(detail), "%s of request %.64s by %.64s "
	    "refused: %s; the request stays pending for another approver",
	    d->status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED ?
	    "approval" : "denial", d->request_id, approver, why);
	log_warnx("%s", detail);
	(void)aqueue_audit_event(ad->queue, approver, "decision-refused",
	    r->task_id, r->policy_hash, ARULE_SOD, detail);
	frame_conn_send_error(c, req->request_id,
	    SBX__V1__ERROR_CODE__ERROR_DENIED, ARULE_SOD, "%s may not decide "
	    "request %s: %s; another approver must", approver, d->request_id,
	    why);
}

static void
acontrol_decide(struct approvald *ad, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__CapabilityDecision *d = req->decision;
	const struct approvald_conf	*conf = ad->conf;
	Sbx__V1__CapabilityRequest	*r;
	Sbx__V1__CapabilityDecision	*old;
	Sbx__V1__Envelope		 env;
	struct aforward			*f;
	const struct ucred		*cr = frame_conn_peer(c);
	char				 approver[64], err[512];
	int				 rc;

	if (d->request_id == NULL || !name_ok(d->request_id)) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, ARULE_BAD_REQUEST,
		    "request_id must be 1..128 of [A-Za-z0-9._@:-]");
		return;
	}
	if (d->status != SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED &&
	    d->status != SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, ARULE_BAD_REQUEST,
		    "a decision is APPROVED or DENIED");
		return;
	}
	if (d->reason != NULL && strlen(d->reason) > APPROVALD_REASON_MAX) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, ARULE_BAD_REQUEST,
		    "the reason is longer than %d bytes",
		    APPROVALD_REASON_MAX);
		return;
	}
	if (d->status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED &&
	    (d->reason == NULL || d->reason[0] == '\0')) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, ARULE_BAD_REQUEST,
		    "a denial needs a reason: the requester reads it");
		return;
	}
	if ((rc = aqueue_get(ad->queue, d->request_id, &r, &old, err,
	    sizeof(err))) != 1) {
		frame_conn_send_error(c, req->request_id, rc == 0 ?
		    SBX__V1__ERROR_CODE__ERROR_NOT_FOUND :
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, rc == 0 ?
		    ARULE_UNKNOWN : "", rc == 0 ? "no request %s in the queue" :
		    "%s", rc == 0 ? d->request_id : err);
		return;
	}
	if (old->status != SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, ARULE_DECIDED,
		    "request %s was already %s by %s", d->request_id,
		    capability_status_name(old->status), old->approver);
		aqueue_item_free(r, old);
		return;
	}
	TAILQ_FOREACH(f, &ad->forwards, entry) {
		if (strcmp(f->dec.request_id, d->request_id) == 0) {
			frame_conn_send_error(c, req->request_id,
			    SBX__V1__ERROR_CODE__ERROR_INVALID,
			    ARULE_IN_FLIGHT, "%s's decision on request %s is "
			    "being sent to policyd", f->dec.approver,
			    d->request_id);
			aqueue_item_free(r, old);
			return;
		}
	}

	/* The approver is who the kernel says is connected. */
	acontrol_actor(cr, approver, sizeof(approver));
	if (cr == NULL)
		snprintf(err, sizeof(err), "the approver's credentials cannot "
		    "be read");
	if (cr == NULL || aparse_own_task(conf, cr->uid, approver,
	    r->tenant, r->user, err, sizeof(err))) {
		acontrol_own_task(ad, c, req, r, approver, err);
		aqueue_item_free(r, old);
		return;
	}
	f = xcalloc(1, sizeof(*f));
	f->ad = ad;
	f->conn = c;
	frame_conn_hold(c);
	f->rid = req->request_id;
	f->task_id = xstrdup(r->task_id);
	sbx__v1__capability_decision__init(&f->dec);
	f->dec.request_id = xstrdup(d->request_id);
	f->dec.status = d->status;
	f->dec.reason = xstrdup(d->reason != NULL ? d->reason : "");
	f->dec.approver = xstrdup(approver);
	f->dec.policy_hash = xstrdup("");
	f->dec.decided_at = now_s();
	TAILQ_INSERT_TAIL(&ad->forwards, f, entry);
	aqueue_item_free(r, old);

	if (conf->policyd_socket == NULL) {
		aforward_fail(f, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    ARULE_UNREACHABLE, "no policyd socket is configured");
		return;
	}
	if ((f->fc = frame_connect(ad->base, conf->policyd_socket,
	    conf->policyd_uid, (size_t)conf->common.max_frame_kb * 1024,
	    aforward_reply, f, err, sizeof(err))) == NULL) {
		aforward_fail(f, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    ARULE_UNREACHABLE, "policyd unreachable: %s", err);
		return;
	}
	frame_client_timeout(f->fc, (int)conf->policyd_timeout);
	frame_env_init(&env, 1);
	env.body_case = SBX__V1__ENVELOPE__BODY_DECISION;
	env.decision = &f->dec;
	if (frame_client_send(f->fc, &env) == -1) {
		aforward_fail(f, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    ARULE_UNREACHABLE, "policyd unreachable: the decision "
		    "cannot be sent");
		return;
	}
	log_debug("request %s: %s by %s sent to policyd", f->dec.request_id,
	    capability_status_name(f->dec.status), approver);
}



void
acontrol_submit_socket(struct frame_conn *c, Sbx__V1__Envelope *req,
    void *arg)
{
	if (req->body_case == SBX__V1__ENVELOPE__BODY_CAPABILITY) {
		acontrol_submit(arg, c, req);
		return;
	}
	frame_conn_send_error(c, req->request_id,
	    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "",
	    "the submit socket takes only capability requests");
}

void
acontrol_console_socket(struct frame_conn *c, Sbx__V1__Envelope *req,
    void *arg)
{
	struct approvald	*ad = arg;

	switch (req->body_case) {
	case SBX__V1__ENVELOPE__BODY_APPROVAL_LIST:
		acontrol_list(ad, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_DECISION:
		acontrol_decide(ad, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_QUERY:
		admin_audit_query(c, req, aqueue_audit(ad->queue));
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY:
		admin_audit_verify(c, req, aqueue_audit(ad->queue),
		    "approvald");
		return;
	default:
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "",
		    "the console socket takes approval_list, decision, "
		    "audit_query and audit_verify");
	}
}

void
acontrol_stop(struct approvald *ad)
{
	struct aforward	*f;

	/* Decisions still on their way stay pending: nothing recorded. */
	while ((f = TAILQ_FIRST(&ad->forwards)) != NULL)
		aforward_free(f);
}
