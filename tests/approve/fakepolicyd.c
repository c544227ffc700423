/*
 * fakepolicyd.c: policyd's side of approvald, for tests/approve/run.
 *
 *   fakepolicyd serve SOCK LOG [error]
 *	listen on SOCK as policyd's approvals socket (the invoking uid is
 *	the one peer allowed); append each decision received to LOG as one
 *	line "decision request=ID status=S approver=U reason=R", and answer
 *	`decision` with a policy hash derived from the request (or, with
 *	"error", an Error: policyd refusing).
 *   fakepolicyd submit SOCK ID TASK dataset|host NAME WHY [SOURCEFILE]
 *	submit a capability request to approvald's submit socket, as
 *	policyd does; prints "status=pending" or "error ...".  The task is
 *	acme/alice's unless FAKE_TENANT and FAKE_USER say otherwise;
 *	FAKE_HASH is its policy hash, FAKE_DENIALS its recent denials, one
 *	a line: RULE|BOUNDARY|SECONDS-BEFORE|EXECUTION|HASH|DETAIL (the
 *	detail's \e becomes ESC).
 */
#include <sys/types.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <sodium.h>

#include "frame.h"
#include "log.h"
#include "peer.h"
#include "util.h"

static const char	*logpath;
static int		 refuse;

static const char *
status_name(Sbx__V1__CapabilityStatus s)
{
	switch (s) {
	case SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED:
		return "APPROVED";
	case SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED:
		return "DENIED";
	case SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING:
		return "PENDING";
	default:
		return "OTHER";
	}
}

static void
handle(struct frame_conn *c, Sbx__V1__Envelope *req, void *arg)
{
	Sbx__V1__CapabilityDecision	*d = req->decision, rep;
	Sbx__V1__Envelope		 env;
	unsigned char			 h[32];
	char				 hex[65], *in;
	FILE				*f;

	(void)arg;
	if (req->body_case != SBX__V1__ENVELOPE__BODY_DECISION) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_UNEXPECTED, "", "decisions only");
		return;
	}
	if ((f = fopen(logpath, "a")) != NULL) {
		fprintf(f, "decision request=%s status=%s approver=%s "
		    "reason=%s\n", d->request_id, status_name(d->status),
		    d->approver, d->reason);
		fclose(f);
	}
	if (refuse) {
		frame_conn_send_error(c, req->request_id,
		    SBX__V1__ERROR_CODE__ERROR_NOT_FOUND, "capability-unknown",
		    "no capability request %s", d->request_id);
		return;
	}
	sbx__v1__capability_decision__init(&rep);
	rep.request_id = d->request_id;
	rep.status = d->status;
	rep.approver = d->approver;
	rep.reason = d->reason;
	rep.policy_hash = (char *)"";
	if (d->status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED) {
		xasprintf(&in, "%s:approved", d->request_id);
		crypto_hash_sha256(h, (unsigned char *)in, strlen(in));
		free(in);
		hex_encode(h, sizeof(h), hex);
		rep.policy_hash = hex;
	}
	frame_env_init(&env, req->request_id);
	env.body_case = SBX__V1__ENVELOPE__BODY_DECISION;
	env.decision = &rep;
	frame_conn_send(c, &env);
}

static int
serve(const char *sock)
{
	struct event_base		*base;
	struct frame_server_config	 cfg;
	struct peer_allow		 allow = { NULL, 0, NULL, 0 };

	peer_allow_uid(&allow, getuid());
	memset(&cfg, 0, sizeof(cfg));
	cfg.name = "approvals";
	cfg.path = sock;
	cfg.mode = 0600;
	cfg.owner = (uid_t)-1;
	cfg.group = (gid_t)-1;
	cfg.allow = &allow;
	if ((base = event_base_new()) == NULL ||
	    frame_server_listen(base, &cfg, handle, NULL) == NULL)
		return 1;
	event_base_dispatch(base);
	return 0;
}

/* FAKE_DENIALS into r (see the top); the strings stay in buf. */
static void
submit_denials(Sbx__V1__CapabilityRequest *r, char *buf)
{
	Sbx__V1__TaskDenial	*d;
	char			*line, *save = NULL, *f[6], *p, *e;
	int			 n;

	for (line = strtok_r(buf, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		p = line;
		for (n = 0; n < 6 && p != NULL; n++) {
			f[n] = p;
			if (n < 5 && (p = strchr(p, '|')) != NULL)
				*p++ = '\0';
		}
		if (n < 6 || p == NULL)
			continue;
		/* \e in the detail: an escape sequence, to be quoted. */
		while ((e = strstr(f[5], "\\e")) != NULL) {
			e[0] = '\033';
			memmove(e + 1, e + 2, strlen(e + 2) + 1);
		}
		d = xcalloc(1, sizeof(*d));
		sbx__v1__task_denial__init(d);
		d->rule = f[0];
		d->boundary = f[1];
		d->time_ns = (r->created_at - strtoll(f[2], NULL, 10)) *
		    1000000000LL;
		d->execution_id = f[3];
		d->policy_hash = f[4];
		d->detail = f[5];
		r->denials = xreallocarray(r->denials, r->n_denials + 1,
		    sizeof(*r->denials));
		r->denials[r->n_denials++] = d;
	}
}

/* What submit_denials() allocated. */
static void
submit_denials_free(Sbx__V1__CapabilityRequest *r, char *buf)
{
	for (size_t i = 0; i < r->n_denials; i++)
		free(r->denials[i]);
	free(r->denials);
	free(buf);
}

static int
submit(int argc, char *argv[])
{
	Sbx__V1__Envelope		 env, *rep = NULL;
	Sbx__V1__CapabilityRequest	 r;
	Sbx__V1__AllowRule		 h;
	char				*src = NULL, *dbuf = NULL;
	char				*methods[] = { (char *)"GET" };
	size_t				 len = 0;
	int				 fd;

	if (argc < 6)
		return 2;
	sbx__v1__capability_request__init(&r);
	r.request_id = argv[1];
	r.task_id = argv[2];
	r.tenant = getenv("FAKE_TENANT") != NULL ? getenv("FAKE_TENANT") :
	    (char *)"acme";
	r.user = getenv("FAKE_USER") != NULL ? getenv("FAKE_USER") :
	    (char *)"alice";
	r.template_ = (char *)"py-analytics@1";
	r.created_at = now_s();
	if (getenv("FAKE_HASH") != NULL)
		r.policy_hash = getenv("FAKE_HASH");
	if (getenv("FAKE_DENIALS") != NULL)
		submit_denials(&r, dbuf = xstrdup(getenv("FAKE_DENIALS")));
	if (strcmp(argv[3], "dataset") == 0) {
		r.what_case = SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET;
		r.dataset = argv[4];
	} else {
		sbx__v1__allow_rule__init(&h);
		h.host = argv[4];
		h.methods = methods;
		h.n_methods = 1;
		r.what_case = SBX__V1__CAPABILITY_REQUEST__WHAT_HOST;
		r.host = &h;
	}
	r.why = argv[5];
	if (argc > 6 && (src = read_file(argv[6], 1 << 20, &len)) == NULL) {
		fprintf(stderr, "cannot read %s\n", argv[6]);
		submit_denials_free(&r, dbuf);
		return 1;
	}
	r.source.data = (uint8_t *)src;
	r.source.len = len;
	frame_env_init(&env, 7);
	env.body_case = SBX__V1__ENVELOPE__BODY_CAPABILITY;
	env.capability = &r;
	if ((fd = frame_client_connect(argv[0])) == -1 ||
	    frame_client_call(fd, &env, &rep, 0) != 0) {
		printf("error no reply\n");
		free(src);
		submit_denials_free(&r, dbuf);
		return 1;
	}
	close(fd);
	free(src);
	submit_denials_free(&r, dbuf);
	if (rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR)
		printf("error rule=%s: %s\n", rep->error->rule,
		    rep->error->message);
	else if (rep->body_case == SBX__V1__ENVELOPE__BODY_DECISION)
		printf("status=%s request=%s\n",
		    status_name(rep->decision->status),
		    rep->decision->request_id);
	else
		printf("error body %d\n", (int)rep->body_case);
	sbx__v1__envelope__free_unpacked(rep, NULL);
	return 0;
}

int
main(int argc, char *argv[])
{
	log_init("fakepolicyd", 1, 0);
	if (sodium_init() < 0)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	if (argc >= 4 && strcmp(argv[1], "serve") == 0) {
		logpath = argv[3];
		refuse = argc > 4 && strcmp(argv[4], "error") == 0;
		return serve(argv[2]);
	}
	if (argc >= 2 && strcmp(argv[1], "submit") == 0)
		return submit(argc - 2, argv + 2);
	fprintf(stderr, "usage: fakepolicyd serve SOCK LOG [error] | "
	    "submit SOCK ID TASK dataset|host NAME WHY [SOURCEFILE]\n");
	return 2;
}
