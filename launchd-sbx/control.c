/*
 * control.c: launchd-sbx's two sockets (the skeleton in common/daemon.c
 * listens on them, with the handlers here).  The launch socket takes only
 * LaunchRequest, from policyd's uid (the peer check in common/frame.c runs
 * before a byte is read, so anyone else gets no reply at all); the admin
 * socket manages the dataset store, lists images, and answers audit and
 * metrics questions.  Every refusal of a launch is an ERROR_LAUNCH with a
 * rule id, and is recorded in the audit log before it is sent (record.c).
 * It dispatches downwards: launches to run.c, datasets to dataset.c,
 * image lists to image.c; none of them calls back into it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "audit.h"
#include "frame.h"
#include "log.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

static void
control_dataset_put(struct launchd *ld, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__DatasetPut	*p = req->dataset_put;
	Sbx__V1__Envelope		 env;
	Sbx__V1__Ack			 ack;
	Sbx__V1__AuditEvent		 ev;
	char				 err[512], actor[32], *detail;

	if (dataset_put(ld, p->name, p->content.data, p->content.len,
	    err, sizeof(err)) == -1) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INVALID, "", "%s", err);
		return;
	}
	xasprintf(&detail, "dataset %s: %zu bytes", p->name, p->content.len);
	peer_actor(frame_conn_peer(c), actor, sizeof(actor));
	sbx__v1__audit_event__init(&ev);
	ev.action = (char *)"dataset";
	ev.detail = detail;
	ev.actor = actor;
	if (audit_append(record_log(ld), &ev) == 0)
		audit_event_clear(&ev);
	log_info("%s by %s", detail, actor);
	sbx__v1__ack__init(&ack);
	ack.detail = detail;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_ACK;
	env.ack = &ack;
	frame_conn_send(c, &env);
	free(detail);
}

static void
control_dataset_list(struct launchd *ld, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__DatasetNames	 dn = SBX__V1__DATASET_NAMES__INIT;
	char			**names;
	size_t			  n;

	if (dataset_names(ld, &names, &n) == -1) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "the dataset store cannot be read");
		return;
	}
	dn.names = names;
	dn.n_names = n;
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_DATASET_NAMES;
	env.dataset_names = &dn;
	frame_conn_send(c, &env);
	strv_free(names, n);
}

static void
control_image_list(struct launchd *ld, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__ImageInfos	 ii;

	if (image_list(ld, &ii) == -1) {
		image_list_clear(&ii);
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "the image store cannot be read");
		return;
	}
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_IMAGE_INFOS;
	env.image_infos = &ii;
	frame_conn_send(c, &env);
	image_list_clear(&ii);
}

char *
control_metrics(const struct launchd *ld)
{
	const struct launchd_metrics	*m = &ld->metrics;
	char				*s;
	size_t				 live = run_count(ld);

	xasprintf(&s,
	    "# HELP sbx_launchd_launches_total Executions started.\n"
	    "# TYPE sbx_launchd_launches_total counter\n"
	    "sbx_launchd_launches_total %llu\n"
	    "# HELP sbx_launchd_refused_total Launch requests refused.\n"
	    "# TYPE sbx_launchd_refused_total counter\n"
	    "sbx_launchd_refused_total %llu\n"
	    "# HELP sbx_launchd_completed_total Executions ended, their result sent.\n"
	    "# TYPE sbx_launchd_completed_total counter\n"
	    "sbx_launchd_completed_total %llu\n"
	    "# HELP sbx_launchd_limits_total Limits hit, by limit.\n"
	    "# TYPE sbx_launchd_limits_total counter\n"
	    "sbx_launchd_limits_total{limit=\"wall\"} %llu\n"
	    "sbx_launchd_limits_total{limit=\"memory\"} %llu\n"
	    "sbx_launchd_limits_total{limit=\"pids\"} %llu\n"
	    "# HELP sbx_launchd_running Executions running now.\n"
	    "# TYPE sbx_launchd_running gauge\n"
	    "sbx_launchd_running %zu\n"
	    "# HELP sbx_launchd_cleanups_pending Executions whose container "
	    "and staging are still being removed.\n"
	    "# TYPE sbx_launchd_cleanups_pending gauge\n"
	    "sbx_launchd_cleanups_pending %zu\n"
	    "# HELP sbx_launchd_pooled_total Launches served by the pool.\n"
	    "# TYPE sbx_launchd_pooled_total counter\n"
	    "sbx_launchd_pooled_total %llu\n"
	    "# HELP sbx_launchd_pool_ready Pool entries ready now.\n"
	    "# TYPE sbx_launchd_pool_ready gauge\n"
	    "sbx_launchd_pool_ready %zu\n"
	    "# HELP sbx_launchd_audit_commits_total Audit group commits.\n"
	    "# TYPE sbx_launchd_audit_commits_total counter\n"
	    "sbx_launchd_audit_commits_total %llu\n",
	    (unsigned long long)m->launches, (unsigned long long)m->refused,
	    (unsigned long long)m->completed,
	    (unsigned long long)m->wall_kills,
	    (unsigned long long)m->memory_kills,
	    (unsigned long long)m->pids_hits, live, run_cleaning(ld),
	    (unsigned long long)m->pooled, pool_ready(ld),
	    (unsigned long long)record_commits(ld));
	return s;
}

static void
control_send_metrics(struct launchd *ld, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	char	*text = control_metrics(ld);

	admin_metrics(c, req, text);
	free(text);
}

void
control_launch_socket(struct frame_conn *c, Sbx__V1__Envelope *req,
    void *arg)
{
	if (req->body_case == SBX__V1__ENVELOPE__BODY_LAUNCH) {
		run_launch(arg, c, req);
		return;
	}
	frame_conn_send_error(c, req->request_id,
	    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "",
	    "the launch socket takes only launch requests");
}

void
control_admin_socket(struct frame_conn *c, Sbx__V1__Envelope *req, void *arg)
{
	struct launchd	*ld = arg;

	switch (req->body_case) {
	case SBX__V1__ENVELOPE__BODY_DATASET_PUT:
		control_dataset_put(ld, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_DATASET_LIST:
		control_dataset_list(ld, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_IMAGE_LIST:
		control_image_list(ld, c, req);
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_QUERY:
		admin_audit_query(c, req, record_log(ld));
		return;
	case SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY:
		admin_audit_verify(c, req, record_log(ld), "launchd-sbx");
		return;
	case SBX__V1__ENVELOPE__BODY_METRICS_REQUEST:
		control_send_metrics(ld, c, req);
		return;
	default:
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "",
		    "the admin socket does not take this message");
	}
}
