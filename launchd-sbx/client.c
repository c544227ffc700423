/*
 * client.c: one request to a peer daemon over its unix socket, the way
 * both of launchd-sbx's clients (egress_client.c, gate_client.c) ask:
 * connect, check that the peer runs as the uid the configuration names
 * (common/frame.c, before a byte is read), send one frame, with a
 * descriptor when there is one, and wait for the reply on the event loop
 * with a time limit (LAUNCHD_PEER_SECONDS).  It calls nothing above it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "frame.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

int
client_call(struct launchd *ld, struct frame_client **slot, const char *path,
    uid_t uid, frame_reply_handler cb, void *arg, const Sbx__V1__Envelope *env,
    int fd, char *err, size_t errlen)
{
	*slot = frame_connect(ld->base, path, uid,
	    (size_t)ld->conf->common.max_frame_kb * 1024, cb, arg, err, errlen);
	if (*slot == NULL)
		return -1;
	if ((fd == -1 ? frame_client_send(*slot, env) :
	    frame_client_send_fd(*slot, env, fd)) == -1) {
		bufprintf(err, errlen, "cannot send to %s: %s", path,
		    strerror(errno));
		frame_client_free(*slot);
		*slot = NULL;
		return -1;
	}
	frame_client_timeout(*slot, LAUNCHD_PEER_SECONDS);
	return 0;
}

const char *
client_why(const Sbx__V1__Envelope *rep, const char *why)
{
	if (rep != NULL && rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR &&
	    rep->error->message != NULL)
		return rep->error->message;
	if (rep != NULL)
		return "an unexpected reply";
	return why != NULL ? why : "no reply";
}
