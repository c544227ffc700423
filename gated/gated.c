/*
 * gated.c: main.  Reads like the daemon's table of contents: options,
 * config (every error reported, -n stops there), policyd's public key,
 * libmagic's database, the sockets, the audit log, the privilege drop, the
 * event loop.  What needs root (creating the state and store directories
 * for gated's user, binding the release socket where launchd-sbx finds
 * it) happens before the drop, which is verified; after it gated holds
 * only its own files and the descriptors launchd-sbx hands it, one
 * request at a time.
 */
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <sodium.h>

#include "audit.h"
#include "daemon.h"
#include "log.h"
#include "sign.h"
#include "util.h"
#include "yaml.h"
#include "gated/gated.h"

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: gated [-dnv] [-f file]\n");
	exit(1);
}

/* SIGHUP: read policyd's public key again (a rotated key). */

static void
gated_signal(evutil_socket_t sig, short what, void *arg)
{
	struct gated	*gd = arg;

	(void)what;
	switch (sig) {
	case SIGHUP:
		(void)sign_pubkey_reload(gd->conf->policy_public_key, gd->pk);
		break;
	case SIGTERM:
	case SIGINT:
		log_info("exiting on signal %d", (int)sig);
		event_base_loopbreak(gd->base);
		break;
	}
}

int
main(int argc, char *argv[])
{
	struct daemon_opts opts;
	struct gated	 gd;
	struct yerrs	 errs = { NULL, 0 };
	struct event	*sigs[3];
	const int	 signos[3] = { SIGTERM, SIGINT, SIGHUP };
	const struct rlimit no_core = { 0, 0 };
	char		 err[512];

	daemon_getopt(argc, argv, GATED_CONF_DEFAULT, &opts, usage);
	log_init("gated", 1, opts.noaction ? 0 : opts.verbose);

	memset(&gd, 0, sizeof(gd));
	if ((gd.conf = gparse_config(opts.file, &errs)) == NULL)
		return daemon_config_errors("gated", opts.file, &errs);
	yerrs_free(&errs);
	if (opts.noaction) {
		printf("configuration OK\n");
		gparse_config_free(gd.conf);
		return 0;
	}

	/* A core file would hold whatever output was being decided. */
	if (setrlimit(RLIMIT_CORE, &no_core) == -1)
		fatal("setrlimit RLIMIT_CORE");
	if (sodium_init() < 0)
		fatalx("libsodium could not be initialised");
	signal(SIGPIPE, SIG_IGN);
	umask(027);
	if (sign_pubkey_load(gd.conf->policy_public_key, gd.pk, err,
	    sizeof(err)) == -1)
		fatalx("policy_public_key: %s", err);
	if ((gd.sniff = sniff_open(err, sizeof(err))) == NULL)
		fatalx("%s", err);
	daemon_state_dir(gd.conf->state_dir, gd.conf->user, gd.conf->uid,
	    gd.conf->gid);
	daemon_state_dir(gd.conf->store_dir, gd.conf->user, gd.conf->uid,
	    gd.conf->gid);

	if ((gd.base = event_base_new()) == NULL)
		fatalx("cannot create the event loop");
	if ((gd.ctl = gcontrol_start(&gd)) == NULL)
		fatalx("cannot listen on the sockets");
	if (!opts.debug) {
		if (daemon(1, 0) == -1)
			fatal("daemon");
		log_foreground(0);
		if (event_reinit(gd.base) == -1)
			fatalx("cannot reinitialise the event loop");
	}

	if (chdir(gd.conf->state_dir) == -1)
		fatal("chdir %s", gd.conf->state_dir);
	if ((gd.audit = audit_open(GATED_DB, "gated", err, sizeof(err))) ==
	    NULL)
		fatalx("%s/%s: %s", gd.conf->state_dir, GATED_DB, err);
	daemon_chown_db(GATED_DB, gd.conf->state_dir, gd.conf->user,
	    gd.conf->uid, gd.conf->gid);
	daemon_drop(gd.conf->file, gd.conf->user, gd.conf->uid, gd.conf->gid);

	for (int i = 0; i < 3; i++) {
		if ((sigs[i] = evsignal_new(gd.base, signos[i],
		    gated_signal, &gd)) == NULL ||
		    event_add(sigs[i], NULL) == -1)
			fatalx("cannot handle signal %d", signos[i]);
	}
	log_info("started: release %s%s%s", gd.conf->release.path,
	    gd.conf->admin.path != NULL ? ", admin " : "",
	    gd.conf->admin.path != NULL ? gd.conf->admin.path : "");

	if (event_base_dispatch(gd.base) == -1)
		log_warnx("event loop failed");

	gcontrol_stop(gd.ctl);
	for (int i = 0; i < 3; i++)
		event_free(sigs[i]);
	audit_close(gd.audit);
	sniff_close(gd.sniff);
	gparse_config_free(gd.conf);
	event_base_free(gd.base);
	log_info("stopped");
	return 0;
}
