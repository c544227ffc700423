/*
 * admin.c: audit and metrics answers shared by every daemon (admin.h).
 * A log that cannot be read is an error to the caller, never an empty
 * answer: "no records" and "records unavailable" must not look alike.
 */
#include <stdlib.h>

#include "admin.h"
#include "audit.h"
#include "frame.h"
#include "util.h"

void
admin_audit_query(struct frame_conn *c, const Sbx__V1__Envelope *req,
    struct audit *a)
{
	const Sbx__V1__AuditQuery	*q = req->audit_query;
	Sbx__V1__Envelope		 env;
	Sbx__V1__AuditRecords		 recs;
	Sbx__V1__AuditEvent		**v = NULL;
	size_t				 n = 0;

	if (audit_query(a, q->task_id, q->limit, &v, &n) == -1) {
		frame_conn_send_error(c, req->request_id,
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
