/*
 * control.c: launchd-sbx's two sockets.  The launch socket takes only
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

#include <event2/event.h>

#include "admin.h"
#include "audit.h"
#include "frame.h"
#include "log.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

#define CONTROL_LAUNCH_IDLE	86400	/* a held launch is never idle */

struct control_sock {
	struct control		*ctl;
	int			 admin;
};

struct control {
	struct launchd		*ld;
	struct frame_server	*launch;
	struct frame_server	*admin;
	struct control_sock	 launch_arg;
	struct control_sock	 admin_arg;
};


static void
control_dataset_put(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	const Sbx__V1__DatasetPut	*p = req->dataset_put;
	Sbx__V1__Envelope		 env;
	Sbx__V1__Ack			 ack;
	Sbx__V1__AuditEvent		 ev;
	char				 err[512], actor[32], *detail;

	if (dataset_put(ctl->ld, p->name, p->content.data, p->content.len,
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
	if (audit_append(ctl->ld->audit, &ev) == 0)
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
control_dataset_list(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__DatasetNames	 dn = SBX__V1__DATASET_NAMES__INIT;
	char			**names;
	size_t			  n;

	if (dataset_names(ctl->ld, &names, &n) == -1) {
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
	dataset_names_free(names, n);
}

static void
control_image_list(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__ImageInfos	 ii;

	if (image_list(ctl->ld, &ii) == -1) {
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
	    (unsigned long long)m->audit_commits);
	return s;
}

static void
control_send_metrics(struct control *ctl, struct frame_conn *c,
    const Sbx__V1__Envelope *req)
{
	char	*text = control_metrics(ctl->ld);

	admin_metrics(c, req, text);
	free(text);
}

static void
control_dispatch(struct frame_conn *c, Sbx__V1__Envelope *req, void *arg)
{
	struct control_sock	*cs = arg;
	struct control		*ctl = cs->ctl;

	if (!cs->admin) {
		if (req->body_case == SBX__V1__ENVELOPE__BODY_LAUNCH) {
			run_launch(ctl->ld, c, req);
			return;
		}
	} else {
		switch (req->body_case) {
		case SBX__V1__ENVELOPE__BODY_DATASET_PUT:
			control_dataset_put(ctl, c, req);
			return;
		case SBX__V1__ENVELOPE__BODY_DATASET_LIST:
			control_dataset_list(ctl, c, req);
			return;
		case SBX__V1__ENVELOPE__BODY_IMAGE_LIST:
			control_image_list(ctl, c, req);
			return;
		case SBX__V1__ENVELOPE__BODY_AUDIT_QUERY:
			admin_audit_query(c, req, ctl->ld->audit);
			return;
		case SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY:
			admin_audit_verify(c, req, ctl->ld->audit,
			    "launchd-sbx");
			return;
		case SBX__V1__ENVELOPE__BODY_METRICS_REQUEST:
			control_send_metrics(ctl, c, req);
			return;
		default:
			break;
		}
	}
	frame_conn_send_error(c, req->request_id,
	    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "", "%s", cs->admin ?
	    "the admin socket does not take this message" :
	    "the launch socket takes only launch requests");
}

static struct frame_server *
control_listen(struct control *ctl, const struct cfg_sock *sc,
    const char *name, struct control_sock *arg, int idle)
{
	struct frame_server_config	 cfg;

	cfg_socket_server(sc, name, &cfg);
	cfg.max_frame = (size_t)ctl->ld->conf->max_frame_kb * 1024;
	cfg.idle_timeout = idle;
	return frame_server_listen(ctl->ld->base, &cfg, control_dispatch, arg);
}

struct control *
control_start(struct launchd *ld)
{
	struct control	*ctl;

	ctl = xcalloc(1, sizeof(*ctl));
	ctl->ld = ld;
	ctl->launch_arg.ctl = ctl;
	ctl->launch_arg.admin = 0;
	ctl->admin_arg.ctl = ctl;
	ctl->admin_arg.admin = 1;
	if ((ctl->launch = control_listen(ctl, &ld->conf->launch, "launch",
	    &ctl->launch_arg, CONTROL_LAUNCH_IDLE)) == NULL ||
	    (ctl->admin = control_listen(ctl, &ld->conf->admin, "admin",
	    &ctl->admin_arg, 0)) == NULL) {
		control_stop(ctl);
		return NULL;
	}
	return ctl;
}

void
control_stop(struct control *ctl)
{
	if (ctl == NULL)
		return;
	frame_server_free(ctl->launch);
	frame_server_free(ctl->admin);
	free(ctl);
}
