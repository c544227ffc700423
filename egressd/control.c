/*
 * control.c: egressd's two sockets.  The control socket (launchd-sbx
 * only) opens and closes channels; the admin socket (root and sbx-admin)
 * reports metrics and answers audit questions.  Framing, peer checks,
 * frame caps and version checks are common/frame.c's, listening the
 * skeleton's (common/daemon.c); this file dispatches.
 *
 * The invariant: a channel exists only for a policy whose signature,
 * expiry and hash egressd has verified with policyd's public key, on the
 * listening socket launchd-sbx passed with the request (egressd binds no
 * name of its own), and its opening is on disk in the audit log before
 * launchd-sbx hears of it.
 */
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "admin.h"
#include "audit.h"
#include "auditq.h"
#include "frame.h"
#include "log.h"
#include "sign.h"
#include "util.h"
#include "egressd.h"

static int
control_audit(struct egressd *ed, const struct channel *ch,
    const char *action, const char *detail, const char *actor)
{
	const Sbx__V1__PolicyGrant *g = ch->grant;
	Sbx__V1__AuditEvent	 ev = SBX__V1__AUDIT_EVENT__INIT;

	ev.task_id = g->task_id;
	ev.execution_id = g->execution_id;
	ev.policy_hash = g->policy_hash;
	ev.action = (char *)action;
	ev.detail = (char *)detail;
	ev.actor = (char *)actor;
	ev.traceparent = (char *)ch->traceparent;
	/* After the denials queued before it, on the loop. */
	if (audit_append(auditq_sync(ed->aq), &ev) == -1)
		return -1;
	audit_event_clear(&ev);
	return 0;
}

/* An absolute cgroup path of printable characters, no "." or ".."
 * component: what /proc/PID/cgroup would show for the sandbox. */
static int
control_cgroup_ok(const char *p)
{
	const char	*c;
	size_t		 n;

	if (p == NULL || p[0] != '/' || strlen(p) < 2 || strlen(p) > 1024)
		return 0;
	for (c = p; *c != '\0'; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return 0;
	for (c = p; *c != '\0'; c += n) {
		c += strspn(c, "/");
		n = strcspn(c, "/");
		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' &&
		    c[1] == '.'))
			return 0;
	}
	return 1;
}

static void
control_open(struct egressd *ed, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__EgressOpen *o = req->egress_open;
	Sbx__V1__PolicyGrant	*g;
	Sbx__V1__EgressOpened	 rep = SBX__V1__EGRESS_OPENED__INIT;
	Sbx__V1__Envelope	 env;
	struct channel		*ch;
	char			 err[512], actor[32], *detail;
	const char		*pem;
	size_t			 pemlen;
	int			 lfd = frame_conn_take_fd(c);

	if (o->signed_ == NULL || lfd == -1 || o->sandbox_gid == 0 ||
	    !control_cgroup_ok(o->cgroup)) {
		if (lfd != -1)
			close(lfd);
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "", "egress_open "
		    "needs a signed policy, the channel's listening socket "
		    "as a descriptor, the sandbox's group (not 0) and its "
		    "cgroup path");
		return;
	}
	if (trace_parent_check(o->traceparent, err, sizeof(err)) == -1) {
		close(lfd);
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "", "egress_open: "
		    "traceparent: %s", err);
		return;
	}
	if ((g = sign_verify_trust(&ed->trust, o->signed_, now_s(), err,
	    sizeof(err))) == NULL) {
		close(lfd);
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_DENIED,
		    strncmp(err, "policy expired", 14) == 0 ? RULE_EXPIRED :
		    RULE_SIGNATURE, "signed policy refused: %s", err);
		return;
	}
	if (!name_ok(g->execution_id) || !name_ok(g->task_id) ||
	    g->policy == NULL) {
		close(lfd);
		sbx__v1__policy_grant__free_unpacked(g, NULL);
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "the grant's task or execution id is not a safe name");
		return;
	}
	if (proxy_channel_find(ed, g->execution_id) != NULL) {
		close(lfd);
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "execution %s already has a channel", g->execution_id);
		sbx__v1__policy_grant__free_unpacked(g, NULL);
		return;
	}
	if ((ch = proxy_channel_open(ed, g, o->signed_, lfd,
	    (gid_t)o->sandbox_gid, o->cgroup, err, sizeof(err))) == NULL) {
		sbx__v1__policy_grant__free_unpacked(g, NULL);
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "", "%s", err);
		return;
	}
	snprintf(ch->traceparent, sizeof(ch->traceparent), "%s",
	    o->traceparent != NULL ? o->traceparent : "");
	peer_actor(frame_conn_peer(c), actor, sizeof(actor));
	xasprintf(&detail, "policy %s v%u, %zu host%s; sandbox group %u "
	    "cgroup %s", ch->pol->name, ch->pol->version,
	    ch->pol->network != NULL ? ch->pol->network->n_allow : 0,
	    ch->pol->network != NULL && ch->pol->network->n_allow == 1 ? "" :
	    "s", (unsigned)ch->gid, ch->cgroup);
	if (control_audit(ed, ch, "open", detail, actor) == -1) {
		free(detail);
		proxy_channel_close(ch);
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "the audit log cannot be written: no channel opened");
		return;
	}
	log_ctx_set(ch->grant->task_id, ch->grant->execution_id,
	    ch->grant->policy_hash, ch->traceparent);
	log_info("open execution %s task %s: %s", ch->grant->execution_id,
	    ch->grant->task_id, detail);
	log_ctx_clear();
	free(detail);
	pem = ca_cert_pem(ch->ca, &pemlen);
	rep.ca_cert_pem.data = (uint8_t *)pem;
	rep.ca_cert_pem.len = pemlen;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_EGRESS_OPENED;
	env.egress_opened = &rep;
	frame_conn_send(c, &env);
}

static void
control_close(struct egressd *ed, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	struct channel		*ch;
	Sbx__V1__EgressUsage	 u = SBX__V1__EGRESS_USAGE__INIT;
	Sbx__V1__RuleCount	 rc[EGRESS_NRULES], *rcp[EGRESS_NRULES];
	Sbx__V1__Envelope	 env;
	char			 actor[32], *detail;
	size_t			 n = 0;

	if ((ch = proxy_channel_find(ed, req->egress_close->execution_id)) ==
	    NULL) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_NOT_FOUND, "",
		    "no channel for execution %.128s",
		    req->egress_close->execution_id);
		return;
	}
	u.execution_id = ch->grant->execution_id;
	u.bytes_out = ch->budget.sent;
	u.bytes_in = ch->bytes_in;
	u.requests = ch->requests;
	for (int i = 0; i < EGRESS_NRULES; i++) {
		if (ch->denials[i] == 0)
			continue;
		sbx__v1__rule_count__init(&rc[n]);
		rc[n].rule = (char *)proxy_rule_name(i);
		rc[n].count = ch->denials[i];
		rc[n].first = ch->dn_first[i] != NULL ? ch->dn_first[i] :
		    (char *)"";
		rc[n].first_ns = ch->dn_first_ns[i];
		rcp[n] = &rc[n];
		n++;
	}
	u.denials = rcp;
	u.n_denials = n;
	peer_actor(frame_conn_peer(c), actor, sizeof(actor));
	xasprintf(&detail, "%llu requests, %llu bytes out, %llu bytes in, "
	    "%zu denial rule%s", (unsigned long long)ch->requests,
	    (unsigned long long)ch->budget.sent,
	    (unsigned long long)ch->bytes_in, n, n == 1 ? "" : "s");
	if (control_audit(ed, ch, "close", detail, actor) == -1)
		log_warnx("audit: cannot record closing execution %s",
		    ch->grant->execution_id);
	log_info("close execution %s: %s", ch->grant->execution_id, detail);
	free(detail);
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_EGRESS_USAGE;
	env.egress_usage = &u;
	frame_conn_send(c, &env);
	proxy_channel_close(ch);
}

char *
control_metrics(const struct egressd *ed)
{
	const struct egress_metrics	*m = &ed->m;
	char				*s, *t;

	xasprintf(&s,
	    "# HELP sbx_egressd_requests_total Requests decided.\n"
	    "# TYPE sbx_egressd_requests_total counter\n"
	    "sbx_egressd_requests_total %llu\n"
	    "# HELP sbx_egressd_allowed_total Requests sent upstream.\n"
	    "# TYPE sbx_egressd_allowed_total counter\n"
	    "sbx_egressd_allowed_total %llu\n"
	    "# HELP sbx_egressd_bytes_out_total Bytes sent upstream.\n"
	    "# TYPE sbx_egressd_bytes_out_total counter\n"
	    "sbx_egressd_bytes_out_total %llu\n"
	    "# HELP sbx_egressd_bytes_in_total Bytes received upstream.\n"
	    "# TYPE sbx_egressd_bytes_in_total counter\n"
	    "sbx_egressd_bytes_in_total %llu\n"
	    "# HELP sbx_egressd_upstream_errors_total Upstreams that failed.\n"
	    "# TYPE sbx_egressd_upstream_errors_total counter\n"
	    "sbx_egressd_upstream_errors_total %llu\n"
	    "# HELP sbx_egressd_channels Channels open.\n"
	    "# TYPE sbx_egressd_channels gauge\n"
	    "sbx_egressd_channels %llu\n"
	    "# HELP sbx_egressd_handoffs_total Client connections sbx-init "
	    "handed over.\n"
	    "# TYPE sbx_egressd_handoffs_total counter\n"
	    "sbx_egressd_handoffs_total %llu\n"
	    "# HELP sbx_egressd_denials_total Requests denied, by rule.\n"
	    "# TYPE sbx_egressd_denials_total counter\n",
	    (unsigned long long)m->requests, (unsigned long long)m->allowed,
	    (unsigned long long)m->bytes_out, (unsigned long long)m->bytes_in,
	    (unsigned long long)m->upstream_errors,
	    (unsigned long long)m->channels_open,
	    (unsigned long long)m->handoffs);
	for (int i = 0; i < EGRESS_NRULES; i++) {
		xasprintf(&t, "%ssbx_egressd_denials_total{rule=\"%s\"} %llu\n",
		    s, proxy_rule_name(i), (unsigned long long)m->denials[i]);
		free(s);
		s = t;
	}
	return s;
}

void
control_control_socket(struct frame_conn *c, Sbx__V1__Envelope *req,
    void *arg)
{
	switch (req->body_case) {
	case SBX__V1__ENVELOPE__BODY_EGRESS_OPEN:
		control_open(arg, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_EGRESS_CLOSE:
		control_close(arg, c, req);
		return;
	default:
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "",
		    "the control socket does not take this message");
	}
}

void
control_admin_socket(struct frame_conn *c, Sbx__V1__Envelope *req,
    void *arg)
{
	struct egressd	*ed = arg;
	char		*text;

	switch (req->body_case) {
	case SBX__V1__ENVELOPE__BODY_METRICS_REQUEST:
		text = control_metrics(ed);
		admin_metrics(c, req, text);
		free(text);
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_QUERY:
		admin_audit_query(c, req, auditq_sync(ed->aq));
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY:
		admin_audit_verify(c, req, auditq_sync(ed->aq), "egressd");
		return;
	default:
		admin_refuse(c, req);
	}
}
