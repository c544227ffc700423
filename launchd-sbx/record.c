/*
 * record.c: launchd-sbx's audit log, written as a group commit, and the
 * refusals it records before they are sent.  Launch, exit and refusal
 * records queue up (record_audit) and common/auditq.c's writer thread
 * commits all that arrived while it was busy in one transaction, one
 * fsync, while the loop goes on (a cold launch seals and writes its spec
 * meanwhile: run.c); only then does each caller's callback send its reply
 * or start what the record describes.  Concurrent executions so share
 * their fsyncs, and no reply ever precedes the durable record of what it
 * reports (DESIGN.md: audit writes are durable before the action they
 * record is acknowledged).  A refusal (record_refuse) is an ERROR_LAUNCH, or the
 * code given, with a rule id, sent once its record has committed.
 * control.c and run.c call down into it; it calls neither back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "auditq.h"
#include "frame.h"
#include "log.h"
#include "peer.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

/* A refusal waiting for its record to commit. */
struct record_refusal {
	struct frame_conn	*conn;
	uint64_t		 rid;
	Sbx__V1__ErrorCode	 code;
	char			*rule;
	char			*msg;
};

/* A caller's callback, carried through the queue's. */
struct record_call {
	struct launchd	*ld;
	record_cb	 cb;
	void		*arg;
};

static void
record_done(int ok, void *arg)
{
	struct record_call	*rc = arg;

	rc->cb(rc->ld, rc->arg, ok);
	free(rc);
}

int
record_init(struct launchd *ld)
{
	char	 err[256];

	if ((ld->aq = auditq_new(ld->base, ld->audit, err,
	    sizeof(err))) == NULL) {
		log_warnx("audit: %s", err);
		return -1;
	}
	return 0;
}

void
record_audit(struct launchd *ld, const Sbx__V1__AuditEvent *ev,
    record_cb cb, void *arg)
{
	const Sbx__V1__AuditEvent	*evp = ev;
	Sbx__V1__AuditEvent		 copy;
	struct record_call		*rc = NULL;

	/* After record_free (the daemon's last moments): committed here,
	 * nobody left to call back. */
	if (ld->aq == NULL) {
		copy = *ev;
		if (audit_append(ld->audit, &copy) == 0)
			audit_event_clear(&copy);
		else
			log_warnx("audit: a record could not be committed");
		return;
	}
	if (cb != NULL) {
		rc = xcalloc(1, sizeof(*rc));
		*rc = (struct record_call){ ld, cb, arg };
	}
	(void)auditq_add(ld->aq, &evp, 1, rc != NULL ? record_done : NULL, rc);
}

uint64_t
record_commits(const struct launchd *ld)
{
	uint64_t	 commits = 0, records, failed;

	if (ld->aq != NULL)
		auditq_stats(ld->aq, &commits, &records, &failed);
	return ld->metrics.audit_commits + commits;
}

void
record_flush(struct launchd *ld)
{
	if (ld->aq != NULL)
		auditq_flush(ld->aq);
}

struct audit *
record_log(struct launchd *ld)
{
	return ld->aq != NULL ? auditq_sync(ld->aq) : ld->audit;
}

void
record_free(struct launchd *ld)
{
	struct auditq	*q = ld->aq;
	uint64_t	 records, failed;

	if (q == NULL)
		return;
	/* Its commits stay in the metrics (record_commits). */
	(void)auditq_sync(q);
	auditq_stats(q, &ld->metrics.audit_commits, &records, &failed);
	ld->aq = NULL;
	auditq_free(q);
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
