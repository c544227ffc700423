/*
 * approvald.c: main.  Reads like the daemon's table of contents: options,
 * config (every error reported, -n stops there), the state directory, the
 * sockets, the queue, the privilege drop, the event loop.  What needs root
 * (creating files for the daemon's user, binding sockets under /run)
 * happens before the drop, which is verified; after it approvald holds
 * only its queue and its sockets.
 *
 * The queue is the daemon's memory: a request acknowledged as PENDING is
 * on disk, so a crash or kill -9 loses nothing an approver could still
 * decide.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon.h"
#include "log.h"
#include "util.h"
#include "yaml.h"
#include "approvald/approvald.h"

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: approvald [-dnv] [-f file]\n");
	exit(1);
}

static void
approvald_signal(evutil_socket_t sig, short what, void *arg)
{
	struct approvald	*ad = arg;

	(void)what;
	switch (sig) {
	case SIGHUP:
		log_info("SIGHUP: nothing to reload; restart approvald to "
		    "read %s again", ad->conf->file);
		break;
	case SIGTERM:
	case SIGINT:
		log_info("exiting on signal %d", (int)sig);
		event_base_loopbreak(ad->base);
		break;
	}
}

int
main(int argc, char *argv[])
{
	struct daemon_opts opts;
	struct approvald ad;
	struct yerrs	 errs = { NULL, 0 };
	struct event	*sigs[3];
	const int	 signos[3] = { SIGTERM, SIGINT, SIGHUP };
	char		 err[512];

	daemon_getopt(argc, argv, APPROVALD_CONF_DEFAULT, &opts, usage);
	log_init("approvald", 1, opts.noaction ? 0 : opts.verbose);

	memset(&ad, 0, sizeof(ad));
	if ((ad.conf = aparse_config(opts.file, &errs)) == NULL)
		return daemon_config_errors("approvald", opts.file, &errs);
	yerrs_free(&errs);
	if (opts.noaction) {
		printf("configuration OK\n");
		aparse_config_free(ad.conf);
		return 0;
	}

	signal(SIGPIPE, SIG_IGN);
	/* The queue and its journal are approvald's alone; the sockets get
	 * their modes explicitly. */
	umask(077);
	daemon_state_dir(ad.conf->state_dir, ad.conf->user, ad.conf->uid,
	    ad.conf->gid);

	if ((ad.base = event_base_new()) == NULL)
		fatalx("cannot create the event loop");
	if ((ad.ctl = acontrol_start(&ad)) == NULL)
		fatalx("cannot listen on the sockets");
	if (!opts.debug) {
		if (daemon(1, 0) == -1)
			fatal("daemon");
		log_foreground(0);
		if (event_reinit(ad.base) == -1)
			fatalx("cannot reinitialise the event loop");
	}

	if (chdir(ad.conf->state_dir) == -1)
		fatal("chdir %s", ad.conf->state_dir);
	if ((ad.queue = aqueue_open(APPROVALD_DB, err, sizeof(err))) == NULL)
		fatalx("%s/%s: %s", ad.conf->state_dir, APPROVALD_DB, err);
	daemon_chown_db(APPROVALD_DB, ad.conf->state_dir, ad.conf->user,
	    ad.conf->uid, ad.conf->gid);
	daemon_drop(ad.conf->file, ad.conf->user, ad.conf->uid, ad.conf->gid);

	for (int i = 0; i < 3; i++) {
		if ((sigs[i] = evsignal_new(ad.base, signos[i],
		    approvald_signal, &ad)) == NULL ||
		    event_add(sigs[i], NULL) == -1)
			fatalx("cannot handle signal %d", signos[i]);
	}
	log_info("started: submit %s, console %s, policyd %s",
	    ad.conf->submit.path, ad.conf->console.path,
	    ad.conf->policyd_socket);

	if (event_base_dispatch(ad.base) == -1)
		log_warnx("event loop failed");

	acontrol_stop(ad.ctl);
	for (int i = 0; i < 3; i++)
		event_free(sigs[i]);
	aqueue_close(ad.queue);
	aparse_config_free(ad.conf);
	event_base_free(ad.base);
	log_info("stopped");
	return 0;
}
