/*
 * approvald.c: main, as a table for the skeleton in common/daemon.c.
 * Reads like the daemon's table of contents: options, config (every error
 * reported, -n stops there), the state directory, the sockets, the queue,
 * the privilege drop, the event loop.  What needs root (creating files for
 * the daemon's user, binding sockets under /run) happens before the drop,
 * which is verified; after it approvald holds only its queue and its
 * sockets.
 *
 * The queue is the daemon's memory: a request acknowledged as PENDING is
 * on disk, so a crash or kill -9 loses nothing an approver could still
 * decide.
 */
#include <sys/queue.h>
#include <sys/types.h>

#include <stddef.h>
#include <string.h>

#include "daemon.h"
#include "log.h"
#include "approvald/approvald.h"

static void
approvald_open(void *arg)
{
	struct approvald	*ad = arg;
	char			 err[512];

	if ((ad->queue = aqueue_open(APPROVALD_DB, err, sizeof(err))) == NULL)
		fatalx("%s/%s: %s", ad->conf->common.state_dir, APPROVALD_DB,
		    err);
	if (ad->conf->store.pg)
		aqueue_use_pg(ad->queue, &ad->conf->store);
}

static void
approvald_start(void *arg)
{
	struct approvald	*ad = arg;

	log_info("started: submit %s, console %s, policyd %s",
	    ad->conf->submit.path, ad->conf->console.path,
	    ad->conf->policyd_socket);
}

static void
approvald_hup(void *arg)
{
	struct approvald	*ad = arg;

	log_info("SIGHUP: nothing to reload; restart approvald to read %s "
	    "again", ad->conf->common.file);
}

static void
approvald_stop(void *arg)
{
	acontrol_stop(arg);
}

static void
approvald_close(void *arg)
{
	struct approvald	*ad = arg;

	aqueue_close(ad->queue);
}

/* What each socket serves, by Envelope body field: hello's answer. */
static const uint32_t approvald_serves_submit[] = {
	SBX__V1__ENVELOPE__BODY_CAPABILITY,
	0
};
static const uint32_t approvald_serves_console[] = {
	SBX__V1__ENVELOPE__BODY_APPROVAL_LIST,
	SBX__V1__ENVELOPE__BODY_DECISION,
	SBX__V1__ENVELOPE__BODY_AUDIT_QUERY,
	SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY,
	0
};

static const struct daemon_sock approvald_socks[] = {
	{ "submit", offsetof(struct approvald_conf, submit),
	    acontrol_submit_socket, NULL, 0, 0,
	    approvald_serves_submit },
	{ "console", offsetof(struct approvald_conf, console),
	    acontrol_console_socket, NULL, 0, 0,
	    approvald_serves_console },
	{ NULL, 0, NULL, NULL, 0, 0, NULL }
};

static const struct daemon_main approvald_main = {
	.name = "approvald",
	.conf_file = APPROVALD_CONF_DEFAULT,
	.db = APPROVALD_DB,
	/* The queue and its journal are approvald's alone; the sockets get
	 * their modes explicitly. */
	.umask = 077,
	.conf_at = offsetof(struct approvald, conf),
	.base_at = offsetof(struct approvald, base),
	.config = &aparse_table,
	.socks = approvald_socks,
	.refused = acontrol_refused_peer,
	.open = approvald_open,
	.start = approvald_start,
	.hup = approvald_hup,
	.stop = approvald_stop,
	.close = approvald_close,
};

int
main(int argc, char *argv[])
{
	struct approvald	 ad;

	memset(&ad, 0, sizeof(ad));
	TAILQ_INIT(&ad.forwards);
	return daemon_main(argc, argv, &approvald_main, &ad);
}
