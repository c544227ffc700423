/*
 * launchd.c: main, as a table for the skeleton in common/daemon.c.
 * Options, config (every error reported, -n stops there), policyd's public
 * key, the state and run directories (root-owned, 0700), the runtime
 * self-checks (a tier whose runtime fails is unavailable, never mapped to
 * another), reaping whatever a previous instance left, the audit log, the
 * sockets and the event loop (sockets, SIGCHLD, timers).  launchd-sbx
 * stays root: it needs root to run the OCI runtime; it is a child
 * subreaper so each container's init is its child and its exit status
 * comes straight to it.
 */
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <signal.h>
#include <stddef.h>
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
#include "launchd-sbx/launchd.h"

#define LAUNCHD_DRAIN_MS	200
#define LAUNCHD_LAUNCH_IDLE	86400	/* a held launch is never idle */

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

	launchd_mkdir(c->common.state_dir);
	launchd_mkdir(c->run_dir);
	static const char *const subs[] = { "images", "cache", "datasets",
	    NULL };
	for (size_t i = 0; subs[i] != NULL; i++) {
		xasprintf(&p, "%s/%s", c->common.state_dir, subs[i]);
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

/* Each container's init is re-parented to us when the runtime's create
 * exits: its exit status is the program's. */
static void
launchd_subreaper(void)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) == -1)
		fatal("PR_SET_CHILD_SUBREAPER");
}

static int
launchd_ntiers(const struct launchd *ld)
{
	int	 n = 0;

	for (int t = 1; t < LAUNCHD_NTIERS; t++)
		n += ld->conf->runtimes[t].available;
	return n;
}

/* -n -v lists the tiers. */
static int
launchd_check(void *arg, const struct daemon_opts *opts)
{
	struct launchd	*ld = arg;

	if (opts->noaction && opts->verbose)
		for (int t = 1; t < LAUNCHD_NTIERS; t++)
			printf("tier %s: %s\n", parse_tier_name(t),
			    ld->conf->runtimes[t].path != NULL ?
			    ld->conf->runtimes[t].path : "(not configured)");
	return 0;
}

/* policyd's key, sbx-init, and the directories, the state directory
 * among them, made and checked here before the skeleton finds it. */
static void
launchd_init(void *arg)
{
	struct launchd	*ld = arg;
	char		 err[512];

	if (!daemon_root())
		fatalx("must run as root: it runs the OCI runtime");
	if (sign_pubkey_load(ld->conf->policy_public_key, ld->pk, err,
	    sizeof(err)) == -1)
		fatalx("policy_public_key: %s", err);
	if (access(ld->conf->init, X_OK) == -1)
		fatal("init %s", ld->conf->init);
	launchd_dirs(ld);
}

/* The runtimes checked, what a previous instance left reaped, the
 * sandbox groups, the audit log. */
static void
launchd_prepare(void *arg)
{
	struct launchd	*ld = arg;
	char		 err[512], *db;

	launchd_subreaper();
	runtime_check(ld);
	runtime_reap_leftovers(ld);
	ident_init(ld);

	xasprintf(&db, "%s/%s", ld->conf->common.state_dir, LAUNCHD_DB);
	if ((ld->audit = audit_open(db, "launchd-sbx", err,
	    sizeof(err))) == NULL)
		fatalx("%s: %s", db, err);
	free(db);
}

/* The audit group commit's event, at its low priority. */
static void
launchd_loop(void *arg)
{
	if (record_init(arg) == -1)
		fatalx("cannot create the audit commit event");
}

/* daemon() forked: the new process must be the reaper. */
static void
launchd_open(void *arg)
{
	(void)arg;
	launchd_subreaper();
}

/* After daemon(): the children are this process's. */
static void
launchd_start(void *arg)
{
	struct launchd	*ld = arg;
	int		 ntiers = launchd_ntiers(ld);

	ld->image_ready = launchd_image_ready;
	image_scan(ld, 0);
	pool_start(ld);
	log_info("started: %d tier%s available, launch %s, admin %s", ntiers,
	    ntiers == 1 ? "" : "s", ld->conf->launch.path,
	    ld->conf->admin.path);
}

static void
launchd_sigchld(void *arg)
{
	run_reap_children(arg);
}

/* Images installed since, or repaired: prepare them (in children) and
 * refill the pool. */
static void
launchd_hup(void *arg)
{
	struct launchd	*ld = arg;

	if (ld->stopping)
		return;
	log_info("SIGHUP: rescanning the image store; restart to "
	    "change the configuration");
	image_scan(ld, 1);
	pool_fill(ld);
}

static void
launchd_stop(void *arg)
{
	struct launchd	*ld = arg;
	struct timeval	 tv = { 0, LAUNCHD_DRAIN_MS * 1000 };

	ld->stopping = 1;
	run_stop_all(ld);
	pool_stop(ld);
	image_stop(ld);
	/* A short last turn of the loop writes the replies just queued
	 * (launches that come meanwhile are refused). */
	event_base_loopexit(ld->base, &tv);
	(void)event_base_dispatch(ld->base);
	record_free(ld);
}

static void
launchd_close(void *arg)
{
	struct launchd	*ld = arg;

	audit_close(ld->audit);
	free(ld->runtime_root);
	ident_free(ld);
}

static const struct daemon_sock launchd_socks[] = {
	{ "launch", offsetof(struct launchd_conf, launch),
	    control_launch_socket, NULL, LAUNCHD_LAUNCH_IDLE, 0 },
	{ "admin", offsetof(struct launchd_conf, admin),
	    control_admin_socket, NULL, 0, 0 },
	{ NULL, 0, NULL, NULL, 0, 0 }
};

static const struct daemon_signal launchd_signals[] = {
	{ SIGCHLD, launchd_sigchld },
	{ 0, NULL }
};

static const struct daemon_main launchd_main = {
	.name = "launchd-sbx",
	.conf_file = LAUNCHD_CONF_DEFAULT,
	.umask = 077,
	.keep_root = 1,
	.nprio = LAUNCHD_NPRIO,
	.conf_at = offsetof(struct launchd, conf),
	.base_at = offsetof(struct launchd, base),
	.parse = parse_launchd,
	.conf_free = parse_launchd_free,
	.socks = launchd_socks,
	.signals = launchd_signals,
	.check = launchd_check,
	.init = launchd_init,
	.prepare = launchd_prepare,
	.loop = launchd_loop,
	.open = launchd_open,
	.start = launchd_start,
	.hup = launchd_hup,
	.stop = launchd_stop,
	.close = launchd_close,
};

int
main(int argc, char *argv[])
{
	struct launchd	 ld;

	memset(&ld, 0, sizeof(ld));
	return daemon_main(argc, argv, &launchd_main, &ld);
}
