/*
 * queue.c: approvald's queue in SQLite.  A request is one row of
 * `requests` (a few columns to find it by, and the whole CapabilityRequest
 * as policyd sent it); its final decision is one row of `decisions`, with
 * the approver's Unix user name and the policy hash policyd answered.
 * The audit log lives in the same database (WAL, synchronous=FULL), so a
 * request and its "submit" record, or a decision and its "approve"/"deny"
 * record, commit together or not at all.
 *
 * Invariant: a request is pending exactly while it has no row in
 * `decisions`, and a decision row is written once, only for a pending
 * request: a request is never decided twice, and nothing but a restart of
 * the disk loses a request that was acknowledged as PENDING.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "audit.h"
#include "pg.h"
#include "log.h"
#include "policy.h"
#include "util.h"
#include "approvald/approvald.h"

struct aqueue {
	sqlite3		*db;
	struct audit	*audit;
	struct pg	*pg;		/* NULL: the queue is db's */
	char		*host;		/* this host, in the fleet */
};

static const char aqueue_schema[] =
	"CREATE TABLE IF NOT EXISTS requests ("
	"  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  request_id TEXT UNIQUE NOT NULL,"
	"  task_id TEXT NOT NULL,"
	"  received_ns INTEGER NOT NULL,"
	"  body BLOB NOT NULL"
	");"
	"CREATE TABLE IF NOT EXISTS decisions ("
	"  request_id TEXT PRIMARY KEY NOT NULL"
	"    REFERENCES requests(request_id),"
	"  status INTEGER NOT NULL,"
	"  reason TEXT NOT NULL,"
	"  approver TEXT NOT NULL,"
	"  policy_hash TEXT NOT NULL,"
	"  decided_at INTEGER NOT NULL"
	");"
	/* A decision is final: it is never changed or taken back. */
	"CREATE TRIGGER IF NOT EXISTS decisions_no_update BEFORE UPDATE ON "
	"  decisions BEGIN SELECT RAISE(ABORT, 'decisions are final'); END;"
	"CREATE TRIGGER IF NOT EXISTS decisions_no_delete BEFORE DELETE ON "
	"  decisions BEGIN SELECT RAISE(ABORT, 'decisions are final'); END;";

struct aqueue *
aqueue_open(const char *path, char *err, size_t errlen)
{
	struct aqueue	*q;
	char		*msg = NULL;

	q = xcalloc(1, sizeof(*q));
	if (sqlite3_open_v2(path, &q->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "cannot open %s: %s", path,
		    q->db != NULL ? sqlite3_errmsg(q->db) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(q->db, 5000);
	if (sqlite3_exec(q->db, aqueue_schema, NULL, NULL, &msg) !=
	    SQLITE_OK) {
		snprintf(err, errlen, "cannot create the queue tables in %s: "
		    "%s", path, msg != NULL ? msg : sqlite3_errmsg(q->db));
		sqlite3_free(msg);
		goto fail;
	}
	if ((q->audit = audit_open_db(q->db, "approvald", err, errlen)) ==
	    NULL)
		goto fail;
	return q;
fail:
	aqueue_close(q);
	return NULL;
}

void
aqueue_use_pg(struct aqueue *q, const struct pg_store *st)
{
	const char	*conninfo = st->conninfo, *host = st->host;

	q->pg = pg_new(conninfo, aqueue_pg_schema);
	pg_limits(q->pg, st->timeout_ms, st->retry_ms);
	q->host = xstrdup(host);
	log_info("queue: %s, as host %s", pg_where(q->pg), host);
}

void
aqueue_close(struct aqueue *q)
{
	if (q == NULL)
		return;
	pg_free(q->pg);
	free(q->host);
	audit_close(q->audit);
	if (q->db != NULL)
		sqlite3_close(q->db);
	free(q);
}

struct audit *
aqueue_audit(struct aqueue *q)
{
	return q->audit;
}

static void
aqueue_event(Sbx__V1__AuditEvent *ev, const char *actor, const char *action,
    const char *task_id, const char *hash, const char *rule,
    const char *detail)
{
	sbx__v1__audit_event__init(ev);
	ev->actor = (char *)(actor != NULL ? actor : "");
	ev->action = (char *)action;
	ev->task_id = (char *)(task_id != NULL ? task_id : "");
	ev->policy_hash = (char *)(hash != NULL ? hash : "");
	ev->rule = (char *)(rule != NULL ? rule : "");
	ev->detail = (char *)(detail != NULL ? detail : "");
}

int
aqueue_audit_event(struct aqueue *q, const char *actor, const char *action,
    const char *task_id, const char *hash, const char *rule,
    const char *detail)
{
	Sbx__V1__AuditEvent	 ev;

	aqueue_event(&ev, actor, action, task_id, hash, rule, detail);
	if (audit_append(q->audit, &ev) == -1) {
		log_warnx("audit: cannot record %s %s", action, ev.detail);
		return -1;
	}
	audit_event_clear(&ev);
	return 0;
}

/* 1 if request_id is queued, 0 if not, -1 on error. */
static int
aqueue_exists(struct aqueue *q, const char *request_id)
{
	sqlite3_stmt	*st;
	int		 rc;

	if (sqlite3_prepare_v2(q->db, "SELECT 1 FROM requests WHERE "
	    "request_id = ?", -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, request_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : -1;
}

int
aqueue_add(struct aqueue *q, const Sbx__V1__CapabilityRequest *r,
    const char *actor, char *err, size_t errlen)
{
	Sbx__V1__AuditEvent	 ev;
	sqlite3_stmt		*st = NULL;
	uint8_t			*body;
	size_t			 len;
	char			 detail[768];
	char			*what;
	int			 rc;

	if (q->pg == NULL && (rc = aqueue_exists(q, r->request_id)) != 0) {
		if (rc == -1)
			snprintf(err, errlen, "the queue cannot be read: %s",
			    sqlite3_errmsg(q->db));
		return rc == 1 ? 0 : -1;
	}
	len = sbx__v1__capability_request__get_packed_size(r);
	body = xmalloc(len > 0 ? len : 1);
	sbx__v1__capability_request__pack(r, body);
	what = aquote_what(r);
	snprintf(detail, sizeof(detail), "request %.64s queued: %.200s for "
	    "user %.64s template %.64s; the task's policy %.64s, %zu recent "
	    "denial%s", r->request_id, what, r->user, r->template_,
	    r->policy_hash[0] != '\0' ? r->policy_hash : "(none)",
	    r->n_denials, r->n_denials == 1 ? "" : "s");
	free(what);
	aqueue_event(&ev, actor, "submit", r->task_id, NULL, NULL, detail);

	if (audit_begin(q->audit) == -1) {
		snprintf(err, errlen, "the queue cannot be written: %s",
		    sqlite3_errmsg(q->db));
		free(body);
		return -1;
	}
	/* In a fleet: the database's row, committed, between the two. */
	if (q->pg != NULL) {
		if ((rc = aqueue_pg_add(q->pg, q->host, r, body, len, err,
		    errlen)) != 1) {
			audit_event_clear(&ev);
			(void)audit_rollback(q->audit);
			free(body);
			return rc;
		}
		if (audit_add(q->audit, &ev) == -1)
			goto fail;
		goto commit;
	}
	if (sqlite3_prepare_v2(q->db, "INSERT INTO requests (request_id, "
	    "task_id, received_ns, body) VALUES (?, ?, ?, ?)", -1, &st,
	    NULL) != SQLITE_OK)
		goto fail;
	sqlite3_bind_text(st, 1, r->request_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->task_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now_ns());
	sqlite3_bind_blob(st, 4, body, (int)len, SQLITE_STATIC);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto fail;
	sqlite3_finalize(st);
	st = NULL;
	if (audit_add(q->audit, &ev) == -1)
		goto fail;
commit:
	if (audit_commit(q->audit) == -1) {
		audit_event_clear(&ev);
		snprintf(err, errlen, "the queue cannot be written: commit "
		    "failed");
		(void)audit_rollback(q->audit);
		free(body);
		return -1;
	}
	audit_event_clear(&ev);
	free(body);
	return 1;
fail:
	snprintf(err, errlen, "the queue cannot be written: %s",
	    sqlite3_errmsg(q->db));
	sqlite3_finalize(st);
	(void)audit_rollback(q->audit);
	free(body);
	return -1;
}

static Sbx__V1__CapabilityDecision *
aqueue_decision_row(sqlite3_stmt *st, int col, const char *request_id)
{
	Sbx__V1__CapabilityDecision	*d;
	const char			*s;

	d = xmalloc(sizeof(*d));
	sbx__v1__capability_decision__init(d);
	d->request_id = xstrdup(request_id);
	if (sqlite3_column_type(st, col) == SQLITE_NULL) {
		d->status = SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING;
		d->reason = xstrdup("");
		d->approver = xstrdup("");
		d->policy_hash = xstrdup("");
		return d;
	}
	d->status = (Sbx__V1__CapabilityStatus)sqlite3_column_int(st, col);
	s = (const char *)sqlite3_column_text(st, col + 1);
	d->reason = xstrdup(s != NULL ? s : "");
	s = (const char *)sqlite3_column_text(st, col + 2);
	d->approver = xstrdup(s != NULL ? s : "");
	s = (const char *)sqlite3_column_text(st, col + 3);
	d->policy_hash = xstrdup(s != NULL ? s : "");
	d->decided_at = sqlite3_column_int64(st, col + 4);
	return d;
}

#define AQUEUE_SELECT \
	"SELECT r.request_id, r.body, d.status, d.reason, d.approver, " \
	"d.policy_hash, d.decided_at FROM requests r LEFT JOIN decisions d " \
	"ON d.request_id = r.request_id "

/* The row's request and decision, or -1 when the body does not decode. */
static int
aqueue_row(sqlite3_stmt *st, Sbx__V1__CapabilityRequest **req,
    Sbx__V1__CapabilityDecision **dec)
{
	const char	*id = (const char *)sqlite3_column_text(st, 0);
	const void	*body = sqlite3_column_blob(st, 1);
	int		 len = sqlite3_column_bytes(st, 1);

	*req = sbx__v1__capability_request__unpack(NULL, (size_t)len, body);
	if (*req == NULL || id == NULL)
		return -1;
	*dec = aqueue_decision_row(st, 2, id);
	return 0;
}

int
aqueue_get(struct aqueue *q, const char *request_id,
    Sbx__V1__CapabilityRequest **req, Sbx__V1__CapabilityDecision **dec,
    char *err, size_t errlen)
{
	sqlite3_stmt	*st;
	int		 rc;

	*req = NULL;
	*dec = NULL;
	if (q->pg != NULL)
		return aqueue_pg_get(q->pg, request_id, req, dec, err, errlen);
	if (sqlite3_prepare_v2(q->db, AQUEUE_SELECT "WHERE r.request_id = ?",
	    -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "the queue cannot be read: %s",
		    sqlite3_errmsg(q->db));
		return -1;
	}
	sqlite3_bind_text(st, 1, request_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		sqlite3_finalize(st);
		return 0;
	}
	if (rc != SQLITE_ROW || aqueue_row(st, req, dec) == -1) {
		snprintf(err, errlen, "request %s cannot be read from the "
		    "queue", request_id);
		aqueue_item_free(*req, *dec);
		*req = NULL;
		*dec = NULL;
		sqlite3_finalize(st);
		return -1;
	}
	sqlite3_finalize(st);
	return 1;
}

int
aqueue_decide(struct aqueue *q, const Sbx__V1__CapabilityDecision *d,
    const char **rule, char *err, size_t errlen)
{
	Sbx__V1__CapabilityRequest	*r = NULL;
	Sbx__V1__CapabilityDecision	*old = NULL;
	Sbx__V1__AuditEvent		 ev;
	sqlite3_stmt			*st = NULL;
	char				 detail[1536];
	int				 approved, rc;

	*rule = NULL;
	approved = d->status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED;
	if (!approved &&
	    d->status != SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED) {
		*rule = ARULE_BAD_REQUEST;
		snprintf(err, errlen, "a final decision is APPROVED or DENIED");
		return -1;
	}
	if (audit_begin(q->audit) == -1) {
		snprintf(err, errlen, "the queue cannot be written: %s",
		    sqlite3_errmsg(q->db));
		return -1;
	}
	/* Checked inside the transaction: two approvers cannot both win. */
	if ((rc = aqueue_get(q, d->request_id, &r, &old, err, errlen)) != 1) {
		if (rc == 0) {
			*rule = ARULE_UNKNOWN;
			snprintf(err, errlen, "no request %s in the queue",
			    d->request_id);
		}
		goto fail;
	}
	if (old->status != SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING) {
		*rule = ARULE_DECIDED;
		snprintf(err, errlen, "request %s was already %s by %s",
		    d->request_id, capability_status_name(old->status), old->approver);
		goto fail;
	}
	if (q->pg != NULL) {
		/* Decided at another host since the check: its row won. */
		if ((rc = aqueue_pg_decide(q->pg, q->host, d, err,
		    errlen)) == 0) {
			*rule = ARULE_DECIDED;
			snprintf(err, errlen, "request %s was already decided "
			    "at another host", d->request_id);
		}
		if (rc != 1)
			goto fail;
		goto audit;
	}
	if (sqlite3_prepare_v2(q->db, "INSERT INTO decisions (request_id, "
	    "status, reason, approver, policy_hash, decided_at) VALUES "
	    "(?, ?, ?, ?, ?, ?)", -1, &st, NULL) != SQLITE_OK)
		goto sqlfail;
	sqlite3_bind_text(st, 1, d->request_id, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, (int)d->status);
	sqlite3_bind_text(st, 3, d->reason != NULL ? d->reason : "", -1,
	    SQLITE_STATIC);
	sqlite3_bind_text(st, 4, d->approver, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, d->policy_hash != NULL ? d->policy_hash : "",
	    -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, d->decided_at);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto sqlfail;
	sqlite3_finalize(st);
	st = NULL;
audit:
	snprintf(detail, sizeof(detail), "request %.64s %s by %.64s; policyd "
	    "recorded it%s%.64s; reason: %.1024s", d->request_id,
	    approved ? "approved" : "denied", d->approver,
	    d->policy_hash != NULL && d->policy_hash[0] != '\0' ?
	    ", policy hash " : "", d->policy_hash != NULL ? d->policy_hash :
	    "", d->reason != NULL && d->reason[0] != '\0' ? d->reason :
	    "(none given)");
	aqueue_event(&ev, d->approver, approved ? "approve" : "deny",
	    r->task_id, d->policy_hash, NULL, detail);
	if (audit_add(q->audit, &ev) == -1)
		goto sqlfail;
	if (audit_commit(q->audit) == -1) {
		audit_event_clear(&ev);
		snprintf(err, errlen, "the decision cannot be written: commit "
		    "failed");
		goto fail;
	}
	audit_event_clear(&ev);
	aqueue_item_free(r, old);
	return 0;
sqlfail:
	snprintf(err, errlen, "the decision cannot be written: %s",
	    sqlite3_errmsg(q->db));
fail:
	sqlite3_finalize(st);
	(void)audit_rollback(q->audit);
	aqueue_item_free(r, old);
	return -1;
}

int
aqueue_list(struct aqueue *q, int pending_only, Sbx__V1__ApprovalItems *it,
    char *err, size_t errlen)
{
	Sbx__V1__CapabilityRequest	*r;
	Sbx__V1__CapabilityDecision	*d;
	sqlite3_stmt			*st;
	size_t				 cap = 0;
	int				 rc;

	sbx__v1__approval_items__init(it);
	if (q->pg != NULL)
		return aqueue_pg_list(q->pg, pending_only, it, err, errlen);
	if (sqlite3_prepare_v2(q->db, pending_only ?
	    AQUEUE_SELECT "WHERE d.request_id IS NULL ORDER BY r.seq" :
	    AQUEUE_SELECT "ORDER BY r.seq", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "the queue cannot be read: %s",
		    sqlite3_errmsg(q->db));
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (aqueue_row(st, &r, &d) == -1) {
			/* One damaged row must not hide the others. */
			log_warnx("queue: request %s does not decode; skipped",
			    sqlite3_column_text(st, 0));
			aqueue_item_free(r, NULL);
			continue;
		}
		aqueue_append(it, &cap, r, d);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "the queue cannot be read: %s",
		    sqlite3_errmsg(q->db));
		aqueue_items_clear(it);
		return -1;
	}
	return 0;
}
