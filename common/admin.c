/*
 * admin.c: audit and metrics answers shared by every daemon (admin.h).
 * A log that cannot be read is an error to the caller, never an empty
 * answer: "no records" and "records unavailable" must not look alike.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "admin.h"
#include "audit.h"
#include "frame.h"
#include "util.h"

/* The envelope around the records: version, request id, body tag and
 * length, with room to spare. */
#define ADMIN_ENVELOPE_ROOM	64

size_t
admin_audit_fit(Sbx__V1__AuditEvent *const *v, size_t n, size_t max)
{
	size_t	 used = ADMIN_ENVELOPE_ROOM, e, i;

	for (i = 0; i < n; i++) {
		/* A repeated field: its tag, a length of up to 10 bytes. */
		e = 1 + 10 + sbx__v1__audit_event__get_packed_size(v[i]);
		if (e > max || used > max - e)
			break;
		used += e;
	}
	return i;
}

uint32_t
admin_audit_limit(struct frame_conn *c, const Sbx__V1__AuditQuery *q)
{
	size_t	 most;

	if (!q->chain)
		return q->limit;
	/* No record packs smaller than its two 32-byte hashes: a frame
	 * never holds more than this, so no more are read. */
	most = frame_conn_max_frame(c) / 64 + 1;
	if (most > UINT32_MAX)
		most = UINT32_MAX;
	if (q->limit == 0 || q->limit > most)
		return (uint32_t)most;
	return q->limit;
}

int
admin_audit_page(struct frame_conn *c, const Sbx__V1__Envelope *req,
    Sbx__V1__AuditEvent *const *v, size_t *n)
{
	const Sbx__V1__AuditQuery	*q = req->audit_query;
	size_t				 k;

	if (!q->chain)
		return 0;
	k = admin_audit_fit(v, *n, frame_conn_max_frame(c));
	if (k == 0 && *n > 0) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "audit record seq %" PRIu64 " is larger than a frame "
		    "(max_frame_kb): it cannot be paged", v[0]->seq);
		return 1;
	}
	*n = k;
	return 0;
}

void
admin_audit_query(struct frame_conn *c, const Sbx__V1__Envelope *req,
    struct audit *a)
{
	const Sbx__V1__AuditQuery	*q = req->audit_query;
	Sbx__V1__Envelope		 env;
	Sbx__V1__AuditRecords		 recs;
	Sbx__V1__AuditEvent		**v = NULL;
	size_t				 n = 0, page;

	if (q->chain && q->task_id != NULL && *q->task_id != '\0') {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "audit_query: chain pages the whole chain, not a task's "
		    "records: task_id must be empty");
		return;
	}
	if (audit_query_after(a, q->task_id, q->after_seq,
	    admin_audit_limit(c, q), &v, &n) == -1) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "audit log cannot be read");
		return;
	}
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
	frame_conn_send(c, &env);
	audit_events_free(v, n);
}

void
admin_audit_verify(struct frame_conn *c, const Sbx__V1__Envelope *req,
    struct audit *a, const char *daemon)
{
	Sbx__V1__Envelope		 env;
	Sbx__V1__AuditVerifyReply	 r;

	sbx__v1__audit_verify_reply__init(&r);
	if (audit_verify(a, &r) == -1) {
		audit_verify_clear(&r);
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "audit log cannot be read");
		return;
	}
	if (r.daemon == NULL || r.daemon[0] == '\0')
		r.daemon = xstrdup(daemon);
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_VERIFIED;
	env.audit_verified = &r;
	frame_conn_send(c, &env);
	audit_verify_clear(&r);
}

void
admin_metrics(struct frame_conn *c, const Sbx__V1__Envelope *req,
    const char *text)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__Metrics	 m;

	sbx__v1__metrics__init(&m);
	m.text = (char *)text;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_METRICS;
	env.metrics = &m;
	frame_conn_send(c, &env);
}

void
admin_refuse(struct frame_conn *c, const Sbx__V1__Envelope *req)
{
	frame_conn_send_error(c, req->request_id,
	    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "",
	    "the admin socket does not take this message");
}
