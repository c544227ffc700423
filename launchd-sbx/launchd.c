/*
 * launchd.c: main.  Options, config (every error reported, -n stops
 * there), policyd's public key, the runtime self-checks (a tier whose
 * runtime fails is unavailable, never mapped to another), the state and
 * run directories (root-owned, 0700), reaping whatever a previous
 * instance left, the audit log, the sockets and the event loop (sockets,
 * SIGCHLD, timers).  launchd-sbx stays root: it needs root to run the OCI
 * runtime; it is a child subreaper so each container's init is its child
 * and its exit status comes straight to it.
 */
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "audit.h"
#include "daemon.h"
#include "log.h"
#include "sign.h"
#include "util.h"
#include "yaml.h"
#include "launchd-sbx/launchd.h"

#define LAUNCHD_NSIGS	4
#define LAUNCHD_DRAIN_MS	200

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: launchd-sbx [-dnv] [-f file]\n");
	exit(1);
}

static void
launchd_mkdir(const char *path)
{
	struct stat	 st;

	if (mkdir(path, 0700) == -1 && errno != EEXIST)
		fatal("mkdir %s", path);
	if (lstat(path, &st) == -1)
		fatal("%s", path);
	if (!S_ISDIR(st.st_mode))
		fatalx("%s: not a directory", path);
	if (st.st_uid != geteuid() || chmod(path, 0700) == -1)
		fatalx("%s: must be a directory owned by uid %u, mode 0700",
		    path, (unsigned)geteuid());
}

static void
launchd_dirs(struct launchd *ld)
{
	const struct launchd_conf	*c = ld->conf;
	char				*p;

	launchd_mkdir(c->state_dir);
	launchd_mkdir(c->run_dir);
	static const char *const subs[] = { "images", "cache", "datasets",
	    NULL };
	for (size_t i = 0; subs[i] != NULL; i++) {
		xasprintf(&p, "%s/%s", c->state_dir, subs[i]);
		launchd_mkdir(p);
		free(p);
	}
	xasprintf(&ld->runtime_root, "%s/runtime", c->run_dir);
	launchd_mkdir(ld->runtime_root);
}

/* An image was verified and unpacked, or refused (image.c). */
static void
launchd_image_ready(struct launchd *ld, const char *hex)
{
	run_image_ready(ld, hex);
	pool_fill(ld);
}

static void
launchd_signal(evutil_socket_t sig, short what, void *arg)
{
	struct launchd	*ld = arg;

	(void)what;
	switch (sig) {
	case SIGCHLD:
		run_reap_children(ld);
		break;
	case SIGHUP:
		/* Images installed since, or repaired: prepare them (in
		 * children) and refill the pool. */
		if (ld->stopping)
			break;
		log_info("SIGHUP: rescanning the image store; restart to "
		    "change the configuration");
		image_scan(ld, 1);
		pool_fill(ld);
		break;
	case SIGTERM:
	case SIGINT:
		log_info("exiting on signal %d", (int)sig);
		event_base_loopbreak(ld->base);
		break;
	}
}

int
main(int argc, char *argv[])
{
	struct daemon_opts opts;
	struct launchd	 ld;
	struct yerrs	 errs = { NULL, 0 };
	struct event	*sigs[LAUNCHD_NSIGS];
	const int	 signos[LAUNCHD_NSIGS] = { SIGTERM, SIGINT, SIGHUP,
			    SIGCHLD };
	char		 err[512], *db;
	int		 ntiers = 0;

	daemon_getopt(argc, argv, LAUNCHD_CONF_DEFAULT, &opts, usage);
	log_init("launchd-sbx", 1, opts.noaction ? 0 : opts.verbose);

	memset(&ld, 0, sizeof(ld));
	if ((ld.conf = parse_launchd(opts.file, &errs)) == NULL)
		return daemon_config_errors("launchd-sbx", opts.file, &errs);
	yerrs_free(&errs);
	if (opts.noaction) {
		if (opts.verbose)
			for (int t = 1; t < LAUNCHD_NTIERS; t++)
				printf("tier %s: %s\n", parse_tier_name(t),
				    ld.conf->runtimes[t].path != NULL ?
				    ld.conf->runtimes[t].path :
				    "(not configured)");
		printf("configuration OK\n");
		parse_launchd_free(ld.conf);
		return 0;
	}
	if (geteuid() != 0)
		fatalx("must run as root: it runs the OCI runtime");
	if (sign_pubkey_load(ld.conf->policy_public_key, ld.pk, err,
	    sizeof(err)) == -1)
		fatalx("policy_public_key: %s", err);
	if (access(ld.conf->init, X_OK) == -1)
		fatal("init %s", ld.conf->init);

	signal(SIGPIPE, SIG_IGN);
	umask(077);
	launchd_dirs(&ld);
	/* Each container's init is re-parented to us when the runtime's
	 * create exits: its exit status is the program's. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1)
		fatal("PR_SET_CHILD_SUBREAPER");

	runtime_check(&ld);
	for (int t = 1; t < LAUNCHD_NTIERS; t++)
		ntiers += ld.conf->runtimes[t].available;
	runtime_reap_leftovers(&ld);
	ident_init(&ld);

	xasprintf(&db, "%s/%s", ld.conf->state_dir, LAUNCHD_DB);
	if ((ld.audit = audit_open(db, "launchd-sbx", err,
	    sizeof(err))) == NULL)
		fatalx("%s: %s", db, err);
	free(db);

	if ((ld.base = event_base_new()) == NULL ||
	    event_base_priority_init(ld.base, LAUNCHD_NPRIO) == -1)
		fatalx("cannot create the event loop");
	if (record_init(&ld) == -1)
		fatalx("cannot create the audit commit event");
	if ((ld.ctl = control_start(&ld)) == NULL)
		fatalx("cannot listen on the sockets");
	if (!opts.debug) {
		if (daemon(1, 0) == -1)
			fatal("daemon");
		log_foreground(0);
		if (event_reinit(ld.base) == -1)
			fatalx("cannot reinitialise the event loop");
		/* daemon() forked: the new process must be the reaper. */
		if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1)
			fatal("PR_SET_CHILD_SUBREAPER");
	}
	for (int i = 0; i < LAUNCHD_NSIGS; i++) {
		if ((sigs[i] = evsignal_new(ld.base, signos[i],
		    launchd_signal, &ld)) == NULL ||
		    event_add(sigs[i], NULL) == -1)
			fatalx("cannot handle signal %d", signos[i]);
	}
	/* After daemon(): the children are this process's. */
	ld.image_ready = launchd_image_ready;
	image_scan(&ld, 0);
	pool_start(&ld);
	log_info("started: %d tier%s available, launch %s, admin %s", ntiers,
	    ntiers == 1 ? "" : "s", ld.conf->launch.path,
	    ld.conf->admin.path);

	if (event_base_dispatch(ld.base) == -1)
		log_warnx("event loop failed");

	ld.stopping = 1;
	run_stop_all(&ld);
	pool_stop(&ld);
	image_stop(&ld);
	/* A short last turn of the loop writes the replies just queued
	 * (launches that come meanwhile are refused). */
	{
		struct timeval tv = { 0, LAUNCHD_DRAIN_MS * 1000 };

		event_base_loopexit(ld.base, &tv);
		(void)event_base_dispatch(ld.base);
	}
	record_free(&ld);
	control_stop(ld.ctl);
	for (int i = 0; i < LAUNCHD_NSIGS; i++)
		event_free(sigs[i]);
	audit_close(ld.audit);
	free(ld.runtime_root);
	ident_free(&ld);
	parse_launchd_free(ld.conf);
	event_base_free(ld.base);
	log_info("stopped");
	return 0;
}
