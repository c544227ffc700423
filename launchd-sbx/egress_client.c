/*
 * egress_client.c: launchd-sbx's client of egressd.  For each execution
 * that may reach the network it binds the egress channel's socket -- the
 * one way out of the sandbox, which only root and the sandbox's own group
 * may connect to -- and hands the listening descriptor to egressd with
 * the signed policy (egress_open); when every process of the sandbox is
 * dead it closes the channel and learns what went through it and what was
 * denied (egress_close, on the loop, or synchronously at shutdown).
 * run.c calls it with a reply handler of its own; it decodes the replies
 * and calls nothing above it by name.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "util.h"
#include "launchd-sbx/launchd.h"

/*
 * The channel's socket: bound by us, in the execution's staging run/
 * (the launcher's), at mode 0 (the umask), so that no one but root can
 * connect; the monitor's SEAL then makes it root's and the sandbox's
 * group's, mode 0660, and for a cold launch moves it up into the staging
 * dir, which only root writes (bound into the sandbox at
 * /run/sbx/egress.sock; a pool entry's stays in run/, which its sandbox
 * sees at /run/sbx/pool).  The sandbox is then the only one besides root
 * that may connect, whatever path leads to it (/proc/PID/root included:
 * that needs the sandbox's uid and group).
 */
int
egress_client_listen(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un	 sun;
	mode_t			 old;
	int			 fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		bufprintf(err, errlen, "the egress socket path %s is too long "
		    "(%zu bytes at most: shorten run_dir)", path,
		    sizeof(sun.sun_path) - 1);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		bufprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	old = umask(0777);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1) {
		umask(old);
		bufprintf(err, errlen, "bind %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	umask(old);
	if (listen(fd, 128) == -1) {
		bufprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		(void)unlink(path);
		return -1;
	}
	return fd;
}

int
egress_client_open(struct launchd *ld, struct frame_client **slot, int fd,
    const Sbx__V1__SignedPolicy *sp, const char *traceparent, gid_t gid,
    const char *cgroup, frame_reply_handler cb, void *arg, char *err,
    size_t errlen)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__EgressOpen	 op = SBX__V1__EGRESS_OPEN__INIT;

	op.signed_ = (Sbx__V1__SignedPolicy *)sp;
	op.sandbox_gid = (uint32_t)gid;
	op.cgroup = (char *)cgroup;
	op.traceparent = (char *)traceparent;
	frame_env_init(&env, 1);
	env.body_case = SBX__V1__ENVELOPE__BODY_EGRESS_OPEN;
	env.egress_open = &op;
	return client_call(ld, slot, ld->conf->egress_socket,
	    ld->conf->egress_uid, cb, arg, &env, fd, err, errlen);
}

const Sbx__V1__EgressOpened *
egress_client_opened(const Sbx__V1__Envelope *rep, const char *why,
    char *err, size_t errlen)
{
	if (rep != NULL &&
	    rep->body_case == SBX__V1__ENVELOPE__BODY_EGRESS_OPENED)
		return rep->egress_opened;
	bufprintf(err, errlen, "egress_open: %s", client_why(rep, why));
	return NULL;
}

int
egress_client_close(struct launchd *ld, struct frame_client **slot,
    const char *execution_id, frame_reply_handler cb, void *arg, char *err,
    size_t errlen)
{
	Sbx__V1__Envelope	 env;
	Sbx__V1__EgressClose	 cl = SBX__V1__EGRESS_CLOSE__INIT;

	cl.execution_id = (char *)execution_id;
	frame_env_init(&env, 2);
	env.body_case = SBX__V1__ENVELOPE__BODY_EGRESS_CLOSE;
	env.egress_close = &cl;
	return client_call(ld, slot, ld->conf->egress_socket,
	    ld->conf->egress_uid, cb, arg, &env, -1, err, errlen);
}

const Sbx__V1__EgressUsage *
egress_client_usage(const Sbx__V1__Envelope *rep, const char *why,
    char *err, size_t errlen)
{
	if (rep != NULL &&
	    rep->body_case == SBX__V1__ENVELOPE__BODY_EGRESS_USAGE)
		return rep->egress_usage;
	bufprintf(err, errlen, "egress_close: %s", client_why(rep, why));
	return NULL;
}

Sbx__V1__Envelope *
egress_client_close_sync(struct launchd *ld, const char *execution_id)
{
	Sbx__V1__Envelope	 env, *rep = NULL;
	Sbx__V1__EgressClose	 cl = SBX__V1__EGRESS_CLOSE__INIT;
	struct ucred		 cr;
	socklen_t		 crlen = sizeof(cr);
	struct timeval		 tv = { 2, 0 };
	int			 fd;

	if ((fd = frame_client_connect(ld->conf->egress_socket)) == -1)
		return NULL;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) == -1 ||
	    cr.uid != ld->conf->egress_uid) {
		close(fd);
		return NULL;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	cl.execution_id = (char *)execution_id;
	frame_env_init(&env, 2);
	env.body_case = SBX__V1__ENVELOPE__BODY_EGRESS_CLOSE;
	env.egress_close = &cl;
	if (frame_client_call(fd, &env, &rep, 0) != 0 && rep != NULL) {
		sbx__v1__envelope__free_unpacked(rep, NULL);
		rep = NULL;
	}
	close(fd);
	return rep;
}
