/*
 * gate_client.c: launchd-sbx's client of gated.  When every process of a
 * sandbox is dead (its container deleted, or the monitor's HANDOVER the
 * proof of it: run.c's run_gone), the scratch directory goes
 * to gated as a descriptor with the signed policy, the declared output
 * names and the raw stdout and stderr (release); gated answers with what
 * it releases, cleaned, and what it dropped and why.  The descriptor is
 * the monitor's answer to HANDOVER (mon_client.c): it has first given the
 * declared outputs the code wrote unreadable (mode 0600) to gated's uid,
 * those names only.  run.c calls it with a reply handler of its own; it
 * decodes the reply and calls nothing above it by name.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

int
gate_client_release(struct launchd *ld, struct frame_client **slot,
    const char *id, int scratch, const Sbx__V1__SignedPolicy *sp,
    const char *traceparent, char *const *outputs, size_t noutputs,
    const uint8_t *out, size_t outlen, const uint8_t *errb, size_t errlen_b,
    frame_reply_handler cb, void *arg, char *err, size_t errlen)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__ReleaseRequest	 rq = SBX__V1__RELEASE_REQUEST__INIT;
	char			 why[MON_ERR_MAX];
	int			 fd, rc;

	why[0] = '\0';
	/* Outputs written 0600 (umask 077) are gated's to read: the
	 * declared names only, and only now that nothing runs inside.  A
	 * caller that had the monitor prove that already (run.c, runsc)
	 * gives the descriptor HANDOVER answered with. */
	if ((fd = scratch) == -1 && (fd = mon_client_handover(ld, id,
	    outputs, noutputs, why, sizeof(why))) == -1) {
		bufprintf(err, errlen, "the scratch of %s: %s", id, why);
		return -1;
	}
	rq.signed_ = (Sbx__V1__SignedPolicy *)sp;
	rq.outputs = (char **)outputs;
	rq.n_outputs = noutputs;
	rq.traceparent = (char *)traceparent;
	rq.stdout.data = (uint8_t *)out;
	rq.stdout.len = outlen;
	rq.stderr.data = (uint8_t *)errb;
	rq.stderr.len = errlen_b;
	frame_env_init(&env, 3);
	env.body_case = SBX__V1__ENVELOPE__BODY_RELEASE;
	env.release = &rq;
	/* The descriptor travels with the frame's first bytes: ours to
	 * close as soon as it is sent. */
	rc = client_call(ld, slot, ld->conf->gate_socket, ld->conf->gate_uid,
	    cb, arg, &env, fd, err, errlen);
	close(fd);
	return rc;
}

Sbx__V1__ReleaseResult *
gate_client_result(const Sbx__V1__Envelope *rep, const char *why,
    char *err, size_t errlen)
{
	Sbx__V1__ReleaseResult	*res;
	uint8_t			*buf;
	size_t			 len;

	if (rep == NULL ||
	    rep->body_case != SBX__V1__ENVELOPE__BODY_RELEASED) {
		bufprintf(err, errlen, "%s", client_why(rep, why));
		return NULL;
	}
	/* The reply is freed when its handler returns: keep a copy. */
	len = sbx__v1__release_result__get_packed_size(rep->released);
	buf = xmalloc(len > 0 ? len : 1);
	sbx__v1__release_result__pack(rep->released, buf);
	res = sbx__v1__release_result__unpack(NULL, len, buf);
	free(buf);
	if (res == NULL)
		bufprintf(err, errlen, "its result does not decode");
	return res;
}
