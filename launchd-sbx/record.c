/*
 * record.c: launchd-sbx's audit log, written as a group commit, and the
 * refusals it records before they are sent.  Launch, exit and refusal
 * records queue up (record_audit) and a deferred event of the lowest
 * priority commits all of them in one transaction, one fsync, after the
 * loop has handled whatever else was ready; only then does each caller's
 * callback send its reply.  Concurrent executions so share their fsyncs,
 * and no reply ever precedes the durable record of what it reports
 * (DESIGN.md: audit writes are durable before the action they record is
 * acknowledged).  A refusal (record_refuse) is an ERROR_LAUNCH, or the
 * code given, with a rule id, sent once its record has committed.
 * control.c and run.c call down into it; it calls neither back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "audit.h"
#include "frame.h"
#include "log.h"
#include "peer.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

struct audit_item {
	struct audit_item	*next;
	Sbx__V1__AuditEvent	 ev;		/* strings our own copies */
	record_cb	 cb;
	void			*arg;
};

/* A refusal waiting for its record to commit. */
struct record_refusal {
	struct frame_conn	*conn;
	uint64_t		 rid;
	Sbx__V1__ErrorCode	 code;
	char			*rule;
	char			*msg;
};

/* ---- the audit group commit ---- */

static char *
record_dup(const char *s)
{
	return xstrdup(s != NULL ? s : "");
}

static void
record_item_free(struct audit_item *it)
{
	free(it->ev.task_id);
	free(it->ev.execution_id);
	free(it->ev.policy_hash);
	free(it->ev.action);
	free(it->ev.rule);
	free(it->ev.detail);
	free(it->ev.actor);
	free(it->ev.traceparent);
	free(it);
}

static void
record_commit(struct launchd *ld)
{
	struct audit_item	*batch, *it, *next;
	int			 ok;

	batch = ld->aq_head;
	ld->aq_head = NULL;
	ld->aq_tail = &ld->aq_head;
	ld->aq_armed = 0;
	if (batch == NULL)
		return;
	ok = audit_begin(ld->audit) == 0;
	for (it = batch; ok && it != NULL; it = it->next) {
		if (audit_add(ld->audit, &it->ev) == -1)
			ok = 0;
		else {
			/* The log's copies, not ours: see audit.h. */
			audit_event_clear(&it->ev);
		}
	}
	if (ok)
		ok = audit_commit(ld->audit) == 0;
	else
		(void)audit_rollback(ld->audit);
	if (ok)
		ld->metrics.audit_commits++;
	else
		log_warnx("audit: a batch of records could not be committed");
	/* Callbacks may queue more: that is the next batch. */
	for (it = batch; it != NULL; it = next) {
		next = it->next;
		if (it->cb != NULL)
			it->cb(ld, it->arg, ok);
		record_item_free(it);
	}
}

static void
record_commit_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	record_commit(arg);
}

int
record_init(struct launchd *ld)
{
	ld->aq_head = NULL;
	ld->aq_tail = &ld->aq_head;
	if ((ld->aq_ev = event_new(ld->base, -1, 0, record_commit_cb,
	    ld)) == NULL ||
	    event_priority_set(ld->aq_ev, LAUNCHD_PRIO_COMMIT) == -1)
		return -1;
	return 0;
}

void
record_audit(struct launchd *ld, const Sbx__V1__AuditEvent *ev,
    record_cb cb, void *arg)
{
	struct audit_item	*it;

	it = xcalloc(1, sizeof(*it));
	sbx__v1__audit_event__init(&it->ev);
	it->ev.task_id = record_dup(ev->task_id);
	it->ev.execution_id = record_dup(ev->execution_id);
	it->ev.policy_hash = record_dup(ev->policy_hash);
	it->ev.action = record_dup(ev->action);
	it->ev.rule = record_dup(ev->rule);
	it->ev.detail = record_dup(ev->detail);
	it->ev.actor = record_dup(ev->actor);
	it->ev.traceparent = record_dup(ev->traceparent);
	it->cb = cb;
	it->arg = arg;
	*ld->aq_tail = it;
	ld->aq_tail = &it->next;
	if (!ld->aq_armed && ld->aq_ev != NULL) {
		ld->aq_armed = 1;
		event_active(ld->aq_ev, EV_TIMEOUT, 0);
	}
}

void
record_flush(struct launchd *ld)
{
	if (ld->aq_ev != NULL)
		event_del(ld->aq_ev);
	record_commit(ld);
}

void
record_free(struct launchd *ld)
{
	record_flush(ld);
	if (ld->aq_ev != NULL) {
		event_free(ld->aq_ev);
		ld->aq_ev = NULL;
	}
}
/* ---- refusals: recorded, then sent ---- */

static void
record_refused(struct launchd *ld, void *arg, int ok)
{
	struct record_refusal	*rf = arg;

	(void)ld;
	if (!ok)
		log_warnx("audit: cannot record a refusal");
	if (!frame_conn_closed(rf->conn))
		frame_conn_send_error(rf->conn, rf->rid, rf->code, rf->rule,
		    "%s", rf->msg);
	frame_conn_release(rf->conn);
	free(rf->rule);
	free(rf->msg);
	free(rf);
}

void
record_refuse(struct launchd *ld, struct frame_conn *c, uint64_t rid,
    const char *task_id, const char *execution_id, const char *rule,
    const char *msg)
{
	record_refuse_code(ld, c, rid, SBX__V1__ERROR_CODE__ERROR_LAUNCH,
	    task_id, execution_id, rule, msg);
}

void
record_refuse_code(struct launchd *ld, struct frame_conn *c, uint64_t rid,
    Sbx__V1__ErrorCode code, const char *task_id, const char *execution_id,
    const char *rule, const char *msg)
{
	Sbx__V1__AuditEvent	 ev;
	struct record_refusal	*rf;
	char			 actor[32];

	ld->metrics.refused++;
	peer_actor(frame_conn_peer(c), actor, sizeof(actor));
	sbx__v1__audit_event__init(&ev);
	ev.task_id = (char *)(task_id != NULL ? task_id : "");
	ev.execution_id = (char *)(execution_id != NULL ? execution_id : "");
	ev.action = (char *)"deny";
	ev.rule = (char *)rule;
	ev.detail = (char *)msg;
	ev.actor = actor;
	/* The execution's, when its run set the log context (run.c). */
	ev.traceparent = (char *)log_ctx_traceparent(ev.task_id);
	log_ctx_rule(rule);
	log_info("launch refused by rule %s: %s", rule, msg);
	rf = xcalloc(1, sizeof(*rf));
	rf->conn = c;
	rf->rid = rid;
	rf->code = code;
	rf->rule = xstrdup(rule);
	rf->msg = xstrdup(msg);
	frame_conn_hold(c);
	record_audit(ld, &ev, record_refused, rf);
}
