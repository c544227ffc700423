/*
 * control.c: gated's sockets (the skeleton in common/daemon.c listens on
 * them, with the handlers here).  The release socket takes only
 * ReleaseRequest, from launchd-sbx's uid (the peer check in common/frame.c
 * runs before a byte is read; a refused peer is audited here and gets no
 * reply), with the scratch directory passed as a descriptor on the same
 * frame.  The optional admin socket answers audit and metrics questions.
 *
 * Invariant: a result leaves gated only for a policy signed by policyd and
 * not yet expired, and only after every release and every drop it lists
 * is on disk in gated's audit log.  A refused request is audited too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "audit.h"
#include "frame.h"
#include "log.h"
#include "sign.h"
#include "trace.h"
#include "util.h"
#include "gated/gated.h"

static const char *
gcontrol_dest_name(const Sbx__V1__Outputs *o)
{
	switch (o != NULL ? o->destination :
	    SBX__V1__DESTINATION__DESTINATION_AGENT) {
	case SBX__V1__DESTINATION__DESTINATION_USER:
		return "user";
	case SBX__V1__DESTINATION__DESTINATION_STORAGE_BUCKET:
		return "storage-bucket";
	default:
		return "agent";
	}
}

/* Fill and add one event (inside a transaction when the caller began
 * one). */
static int
gcontrol_audit_add(struct gated *gd, const char *actor, const char *action,
    const Sbx__V1__PolicyGrant *g, const char *rule, const char *detail)
{
	Sbx__V1__AuditEvent	 ev;

	sbx__v1__audit_event__init(&ev);
	ev.task_id = (char *)(g != NULL ? g->task_id : "");
	ev.execution_id = (char *)(g != NULL ? g->execution_id : "");
	ev.policy_hash = (char *)(g != NULL ? g->policy_hash : "");
	ev.action = (char *)action;
	ev.rule = (char *)(rule != NULL ? rule : "");
	ev.detail = (char *)detail;
	ev.actor = (char *)actor;
	/* The execution's, once gcontrol_release has checked it. */
	ev.traceparent = (char *)log_ctx_traceparent(ev.task_id);
	if (audit_add(gd->audit, &ev) == -1) {
		log_warnx("audit: cannot record %s %s", action, detail);
		return -1;
	}
	audit_event_clear(&ev);
	return 0;
}

void
gcontrol_refused_peer(void *arg, const char *sock, const struct ucred *cr,
    const char *why)
{
	struct gated		*gd = arg;
	char			 actor[32], detail[256];

	gd->metrics.peers_refused++;
	if (gd->audit == NULL)
		return;
	peer_actor(cr, actor, sizeof(actor));
	peer_refused_detail(cr, why, sock, detail, sizeof(detail));
	(void)gcontrol_audit_add(gd, actor, "deny", NULL, RULE_PEER, detail);
}

/* Refuse the whole request: audited, then an Error. */
static void
gcontrol_refuse(struct gated *gd, struct frame_conn *c, uint64_t rid,
    const char *actor, const Sbx__V1__PolicyGrant *g, const char *rule,
    Sbx__V1__ErrorCode code, const char *msg)
{
	gd->metrics.refused++;
	(void)gcontrol_audit_add(gd, actor, "deny", g, rule, msg);
	log_ctx_rule(rule);
	log_info("release refused by rule %s: task %s: %s", rule,
	    g != NULL ? g->task_id : "-", msg);
	frame_conn_send_error(c, rid, code, rule, "%s", msg);
}

/* ", 3 invisible removed, 1 link neutralised" for an audit record. */
static void
gcontrol_text_note(char *buf, size_t len, const Sbx__V1__TextReport *t)
{
	buf[0] = '\0';
	if (t == NULL)
		return;
	bufprintf(buf, len, " (removed: %u control, %u invisible; %u "
	    "invalid bytes; %u remote links neutralised)",
	    t->controls_removed, t->invisible_removed, t->invalid_replaced,
	    t->links_neutralised);
}

/* Every release and drop of res, in one transaction. */
static int
gcontrol_audit_result(struct gated *gd, const char *actor,
    const Sbx__V1__PolicyGrant *g, const Sbx__V1__ReleaseResult *res)
{
	char	detail[2 * GATED_NAME_MAX + 512], tnote[160], cnote[160];
	char	onote[160], enote[160], unote[160];
	size_t	i;

	if (audit_begin(gd->audit) == -1)
		return -1;
	for (i = 0; i < res->n_outputs; i++) {
		const Sbx__V1__ReleasedOutput *r = res->outputs[i];

		gcontrol_text_note(tnote, sizeof(tnote), r->text);
		cnote[0] = '\0';
		if (r->csv != NULL)
			bufprintf(cnote, sizeof(cnote), " (%u formula cells "
			    "%s, the first at row %u column %u)",
			    r->csv->formula_cells, r->csv->neutralised ?
			    "neutralised" : "flagged", r->csv->first_row,
			    r->csv->first_column);
		bufprintf(detail, sizeof(detail), "output %s type %s bytes "
		    "%llu%s to %s at %s sha256 %s%s%s", r->name, r->type,
		    (unsigned long long)r->bytes,
		    r->truncated ? " (truncated)" : "",
		    gcontrol_dest_name(g->policy->outputs), r->where,
		    r->sha256, tnote, cnote);
		if (gcontrol_audit_add(gd, actor, "release", g, NULL,
		    detail) == -1)
			goto fail;
	}
	for (i = 0; i < res->n_dropped; i++) {
		const Sbx__V1__DroppedOutput *d = res->dropped[i];

		bufprintf(detail, sizeof(detail), "output %s dropped: %s",
		    d->name, d->reason);
		if (gcontrol_audit_add(gd, actor, "drop", g, d->reason,
		    detail) == -1)
			goto fail;
	}
	gcontrol_text_note(onote, sizeof(onote), res->stdout_report);
	gcontrol_text_note(enote, sizeof(enote), res->stderr_report);
	unote[0] = '\0';
	if (res->dropped_unlisted != NULL)
		bufprintf(unote, sizeof(unote), "; %u more undeclared "
		    "entries not listed (%llu bytes of names, %llu bytes)",
		    res->dropped_unlisted->entries, (unsigned long long)
		    res->dropped_unlisted->name_bytes, (unsigned long long)
		    res->dropped_unlisted->bytes);
	bufprintf(detail, sizeof(detail), "stdout %zu bytes%s%s, stderr "
	    "%zu bytes%s%s%s", res->stdout.len, res->stdout_truncated ?
	    " (truncated)" : "", onote, res->stderr.len,
	    res->stderr_truncated ? " (truncated)" : "", enote, unote);
	if (gcontrol_audit_add(gd, actor, "release", g, NULL, detail) == -1)
		goto fail;
	if (audit_commit(gd->audit) == -1)
		goto fail;
	return 0;
fail:
	(void)audit_rollback(gd->audit);
	return -1;
}

/* release.c's archive reader: gated-unpack (inspect.c). */
static const char *
gcontrol_archive(void *arg, const uint8_t *buf, size_t len,
    const struct archive_caps *caps, char *why, size_t whylen)
{
	return inspect_archive(arg, buf, len, caps, why, whylen);
}

static void
gcontrol_release(struct gated *gd, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__ReleaseRequest	*rq = req->release;
	Sbx__V1__PolicyGrant		*g = NULL;
	Sbx__V1__ReleaseResult		 res;
	Sbx__V1__Envelope		 env;
	struct release_ctx		 rc;
	char				 actor[32], err[512], msg[640];
	int				 dirfd;

	sbx__v1__release_result__init(&res);
	dirfd = frame_conn_take_fd(c);
	peer_actor(frame_conn_peer(c), actor, sizeof(actor));
	gd->metrics.requests++;
	if (rq->signed_ == NULL) {
		gcontrol_refuse(gd, c, req->request_id, actor, NULL,
		    RULE_BAD_REQUEST, SBX__V1__ERROR_CODE__ERROR_INVALID,
		    "the request carries no signed policy");
		goto done;
	}
	if ((g = sign_verify_trust(&gd->trust, rq->signed_, now_s(), err,
	    sizeof(err))) == NULL) {
		bufprintf(msg, sizeof(msg), "signed policy refused: %s",
		    err);
		gcontrol_refuse(gd, c, req->request_id, actor, NULL,
		    strncmp(err, "policy expired", 14) == 0 ? RULE_EXPIRED :
		    RULE_SIGNATURE, SBX__V1__ERROR_CODE__ERROR_DENIED, msg);
		goto done;
	}
	if (trace_parent_check(rq->traceparent, err, sizeof(err)) == -1) {
		bufprintf(msg, sizeof(msg), "release request: traceparent: "
		    "%s", err);
		gcontrol_refuse(gd, c, req->request_id, actor, g,
		    RULE_BAD_REQUEST, SBX__V1__ERROR_CODE__ERROR_INVALID, msg);
		goto done;
	}
	log_ctx_set(g->task_id, g->execution_id, g->policy_hash,
	    rq->traceparent);
	if (dirfd == -1) {
		gcontrol_refuse(gd, c, req->request_id, actor, g, RULE_NO_DIR,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "no scratch directory "
		    "descriptor came with the request");
		goto done;
	}
	if (rq->n_outputs > GATED_OUTPUTS_MAX) {
		bufprintf(msg, sizeof(msg), "%zu declared outputs; at most "
		    "%d", rq->n_outputs, GATED_OUTPUTS_MAX);
		gcontrol_refuse(gd, c, req->request_id, actor, g,
		    RULE_BAD_REQUEST, SBX__V1__ERROR_CODE__ERROR_INVALID, msg);
		goto done;
	}
	memset(&rc, 0, sizeof(rc));
	rc.outputs = g->policy != NULL ? g->policy->outputs : NULL;
	rc.task_id = g->task_id;
	rc.execution_id = g->execution_id;
	rc.sniff = gd->sniff;
	rc.archive = gcontrol_archive;
	rc.archive_arg = &gd->inspect;
	rc.store_dir = gd->conf->store_dir;
	if (release_run(&rc, dirfd, rq, &res, err, sizeof(err)) == -1) {
		gcontrol_refuse(gd, c, req->request_id, actor, g, RULE_NO_DIR,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, err);
		goto done;
	}
	/* On disk before the result leaves. */
	if (gcontrol_audit_result(gd, actor, g, &res) == -1) {
		gd->metrics.refused++;
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "the release cannot be audited; nothing released");
		goto done;
	}
	gd->metrics.released += res.n_outputs;
	gd->metrics.dropped += res.n_dropped;
	log_info("task %s execution %s: %zu released, %zu dropped",
	    g->task_id, g->execution_id, res.n_outputs, res.n_dropped);
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_RELEASED;
	env.released = &res;
	if (frame_conn_send(c, &env) == -1)
		log_warnx("task %s: the result could not be sent", g->task_id);
done:
	log_ctx_clear();
	if (dirfd != -1)
		close(dirfd);
	if (g != NULL)
		sbx__v1__policy_grant__free_unpacked(g, NULL);
	release_result_clear(&res);
}

/* ---- the admin socket ---- */

char *
gcontrol_metrics(const struct gated *gd)
{
	const struct gated_metrics	*m = &gd->metrics;
	char				*s;

	xasprintf(&s,
	    "# HELP sbx_gated_requests_total Release requests received.\n"
	    "# TYPE sbx_gated_requests_total counter\n"
	    "sbx_gated_requests_total %llu\n"
	    "# HELP sbx_gated_refused_total Release requests refused whole.\n"
	    "# TYPE sbx_gated_refused_total counter\n"
	    "sbx_gated_refused_total %llu\n"
	    "# HELP sbx_gated_outputs_total Outputs, by result.\n"
	    "# TYPE sbx_gated_outputs_total counter\n"
	    "sbx_gated_outputs_total{result=\"released\"} %llu\n"
	    "sbx_gated_outputs_total{result=\"dropped\"} %llu\n"
	    "# HELP sbx_gated_peers_refused_total Connections refused at "
	    "the peer check.\n"
	    "# TYPE sbx_gated_peers_refused_total counter\n"
	    "sbx_gated_peers_refused_total %llu\n",
	    (unsigned long long)m->requests, (unsigned long long)m->refused,
	    (unsigned long long)m->released, (unsigned long long)m->dropped,
	    (unsigned long long)m->peers_refused);
	return s;
}

void
gcontrol_release_socket(struct frame_conn *c, Sbx__V1__Envelope *req,
    void *arg)
{
	if (req->body_case == SBX__V1__ENVELOPE__BODY_RELEASE) {
		gcontrol_release(arg, c, req);
		return;
	}
	frame_conn_send_error(c, req->request_id,
	    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "",
	    "the release socket takes only release requests");
}

void
gcontrol_admin_socket(struct frame_conn *c, Sbx__V1__Envelope *req,
    void *arg)
{
	struct gated	*gd = arg;
	char		*text;

	switch (req->body_case) {
	case SBX__V1__ENVELOPE__BODY_AUDIT_QUERY:
		admin_audit_query(c, req, gd->audit);
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY:
		admin_audit_verify(c, req, gd->audit, "gated");
		return;
	case SBX__V1__ENVELOPE__BODY_METRICS_REQUEST:
		text = gcontrol_metrics(gd);
		admin_metrics(c, req, text);
		free(text);
		return;
	default:
		admin_refuse(c, req);
	}
}
