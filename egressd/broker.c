/*
 * broker.c: egressd's side of brokerd.  One request per credential: the
 * channel's signed policy, the host, the secret's name and the header,
 * over brokerd's socket, whose listener must be brokerd's own uid (a
 * stranger on that path never sees a request).  Any failure -- brokerd
 * down, slow, refusing, or answering nonsense -- is reported as a failure
 * and the request is denied with credential-unavailable: egressd never
 * sends a request without the credential its policy binds (fail closed).
 *
 * The value is copied into sodium_malloc'd memory at once and the copy in
 * the decoded reply is zeroed before that is freed; the caller gets it
 * for the duration of the callback only, and it is never logged.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>
#include <sodium.h>

#include "frame.h"
#include "log.h"
#include "util.h"
#include "egressd.h"

#define BROKER_TIMEOUT	5	/* seconds */

struct broker_req {
	struct frame_client	*fc;
	char			*header;
	broker_cb		 cb;
	void			*arg;
	struct event		*fail_ev;
	char			 why[256];
};

static void
broker_done(struct broker_req *br, int ok, const uint8_t *v, size_t len,
    const char *why)
{
	broker_cb	 cb = br->cb;
	void		*arg = br->arg;
	char		*header = br->header;

	frame_client_free(br->fc);
	br->fc = NULL;
	free(br);
	cb(ok, header, v, len, why, arg);
	free(header);
}

static void
broker_reply(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	struct broker_req		*br = arg;
	Sbx__V1__CredentialReply	*cr;
	uint8_t				*v;
	size_t				 len;
	char				 msg[300];

	(void)fc;
	if (rep == NULL) {
		snprintf(msg, sizeof(msg), "brokerd: %s", why);
		broker_done(br, 0, NULL, 0, msg);
		return;
	}
	if (rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR) {
		snprintf(msg, sizeof(msg), "brokerd refused: %.200s",
		    rep->error->message);
		broker_done(br, 0, NULL, 0, msg);
		return;
	}
	if (rep->body_case != SBX__V1__ENVELOPE__BODY_CREDENTIAL_REPLY ||
	    (cr = rep->credential_reply) == NULL || cr->value.len == 0 ||
	    cr->header == NULL || strcasecmp(cr->header, br->header) != 0) {
		if (rep->body_case ==
		    SBX__V1__ENVELOPE__BODY_CREDENTIAL_REPLY &&
		    rep->credential_reply->value.data != NULL)
			sodium_memzero(rep->credential_reply->value.data,
			    rep->credential_reply->value.len);
		broker_done(br, 0, NULL, 0, "brokerd answered something "
		    "other than the credential asked for");
		return;
	}
	len = cr->value.len;
	if ((v = sodium_malloc(len)) == NULL) {
		sodium_memzero(cr->value.data, len);
		broker_done(br, 0, NULL, 0, "out of secure memory");
		return;
	}
	memcpy(v, cr->value.data, len);
	sodium_memzero(cr->value.data, len);
	broker_done(br, 1, v, len, NULL);
	sodium_free(v);
}

static void
broker_fail_cb(evutil_socket_t fd, short what, void *arg)
{
	struct broker_req	*br = arg;
	char			 why[256];

	(void)fd;
	(void)what;
	event_free(br->fail_ev);
	br->fail_ev = NULL;
	snprintf(why, sizeof(why), "%s", br->why);
	broker_done(br, 0, NULL, 0, why);
}

struct broker_req *
broker_fetch(struct event_base *base, const struct egressd_conf *conf,
    const Sbx__V1__SignedPolicy *sp, const char *traceparent,
    const char *host, const char *secret, const char *header, broker_cb cb,
    void *arg)
{
	struct broker_req		*br;
	Sbx__V1__Envelope		 env;
	Sbx__V1__CredentialRequest	 req = SBX__V1__CREDENTIAL_REQUEST__INIT;
	char				 err[256];

	br = xcalloc(1, sizeof(*br));
	br->header = xstrdup(header);
	br->cb = cb;
	br->arg = arg;
	br->fc = frame_connect(base, conf->broker_path, conf->broker_uid, 0,
	    broker_reply, br, err, sizeof(err));
	if (br->fc != NULL) {
		req.signed_ = (Sbx__V1__SignedPolicy *)sp;
		req.host = (char *)host;
		req.secret = (char *)secret;
		req.header = (char *)header;
		req.traceparent = (char *)traceparent;
		frame_env_init(&env, 1);
		env.body_case = SBX__V1__ENVELOPE__BODY_CREDENTIAL;
		env.credential = &req;
		frame_client_timeout(br->fc, BROKER_TIMEOUT);
		if (frame_client_send(br->fc, &env) == 0)
			return br;
		snprintf(err, sizeof(err), "cannot send to brokerd");
		frame_client_free(br->fc);
		br->fc = NULL;
	}
	/* Report from the loop, never from inside the caller. */
	snprintf(br->why, sizeof(br->why), "brokerd: %.200s", err);
	br->fail_ev = evtimer_new(base, broker_fail_cb, br);
	if (br->fail_ev == NULL)
		fatalx("cannot create a timer");
	{
		struct timeval	 now = { 0, 0 };

		evtimer_add(br->fail_ev, &now);
	}
	return br;
}

void
broker_cancel(struct broker_req *br)
{
	if (br == NULL)
		return;
	if (br->fail_ev != NULL)
		event_free(br->fail_ev);
	frame_client_free(br->fc);
	free(br->header);
	free(br);
}
