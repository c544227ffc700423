/*
 * launchd.c: main, as a table for the skeleton in common/daemon.c.
 * Options, config (every error reported, -n stops there), policyd's public
 * key, the state directory (the launcher's user's, 0700) and the run
 * directory (the monitor's: root's, group the launcher's, 0710), the runtime self-checks (a
 * tier whose runtime fails is unavailable, never mapped to another), the
 * audit log, the sockets, then -- still root, after daemon() -- the root
 * monitor (sbx-monitor, mon_client.c), which reaps whatever a previous
 * instance left before it says it is ready; then the skeleton drops to
 * the configured user and the event loop runs (sockets, the monitor's
 * events, SIGCHLD for the image preparations, timers).  Without a user
 * the launcher stays root, as every daemon does.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

/* Who the launcher runs as: the configured user, or root without one. */
static uid_t
launchd_uid(const struct launchd *ld)
{
	return ld->conf->common.user != NULL ? ld->conf->common.uid : 0;
}

static gid_t
launchd_gid(const struct launchd *ld)
{
	return ld->conf->common.user != NULL ? ld->conf->common.gid : 0;
}

/* A directory of uid's and gid's, mode mode (one root made is given over). */
static void
launchd_mkdir(const char *path, uid_t uid, gid_t gid, mode_t mode)
{
	struct stat	 st;

	if (mkdir(path, 0700) == -1 && errno != EEXIST)
		fatal("mkdir %s", path);
	if (lstat(path, &st) == -1)
		fatal("%s", path);
	if (!S_ISDIR(st.st_mode))
		fatalx("%s: not a directory", path);
	if ((st.st_uid != uid || st.st_gid != gid) &&
	    lchown(path, uid, gid) == -1)
		fatal("chown %s to %u:%u", path, (unsigned)uid, (unsigned)gid);
	if (chmod(path, mode) == -1)
		fatal("chmod %s", path);
}

static void
launchd_dirs(struct launchd *ld)
{
	const struct launchd_conf	*c = ld->conf;
	uid_t				 uid = launchd_uid(ld);
	gid_t				 gid = launchd_gid(ld);
	char				*p;

	launchd_mkdir(c->common.state_dir, uid, gid, 0700);
	static const char *const subs[] = { "images", "cache", "datasets",
	    NULL };
	for (size_t i = 0; subs[i] != NULL; i++) {
		xasprintf(&p, "%s/%s", c->common.state_dir, subs[i]);
		launchd_mkdir(p, uid, gid, 0700);
		free(p);
	}
	/*
	 * The staging directories and the runtimes' state: the monitor's,
	 * root's and written by root alone (it refuses anything else).  The
	 * launcher's group may pass through to the parts of each staging
	 * that are the launcher's; no other user may (each x-ID is 0711 and
	 * sealed copies are world-readable: the run directory is what keeps
	 * other host users out of every execution's in/ and code/).
	 */
	launchd_mkdir(c->run_dir, 0, gid, 0710);
	xasprintf(&p, "%s/runtime", c->run_dir);
	launchd_mkdir(p, 0, 0, 0700);
	free(p);
}

/*
 * A state tree an older, all-root launchd-sbx left (or an image installed
 * by root since) is given to the launcher's user, once, while it is still
 * root: every file and directory beneath dirfd not yet the user's,
 * following no link.  An unpacked image's rootfs keeps its owners: the
 * sandbox sees it as the image made it, and the launcher only reads it.
 */
static void
launchd_chown_tree(int dirfd, const char *path, uid_t uid, gid_t gid,
    int depth)
{
	DIR		*d;
	struct dirent	*de;
	struct stat	 st;
	int		 sub, dup_fd;

	if ((dup_fd = dup(dirfd)) == -1 || (d = fdopendir(dup_fd)) == NULL) {
		if (dup_fd != -1)
			close(dup_fd);
		log_warn("%s", path);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1)
			continue;
		if (st.st_uid != uid && fchownat(dirfd, de->d_name, uid, gid,
		    AT_SYMLINK_NOFOLLOW) == -1)
			log_warn("chown %s/%s", path, de->d_name);
		if (!S_ISDIR(st.st_mode) || depth > 16 ||
		    (depth == 2 && strcmp(de->d_name, "rootfs") == 0))
			continue;
		if ((sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY |
		    O_NOFOLLOW | O_CLOEXEC)) == -1)
			continue;
		launchd_chown_tree(sub, path, uid, gid, depth + 1);
		close(sub);
	}
	closedir(d);
}

static void
launchd_chown_state(struct launchd *ld)
{
	const char	*dir = ld->conf->common.state_dir;
	int		 fd;

	if (!daemon_root() || ld->conf->common.user == NULL)
		return;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
	    O_CLOEXEC)) == -1)
		fatal("%s", dir);
	/* depth 0 is state_dir itself: cache/<hex>/rootfs is at depth 2. */
	launchd_chown_tree(fd, dir, launchd_uid(ld), launchd_gid(ld), 0);
	close(fd);
}

/* An image was verified and unpacked, or refused (image.c). */
static void
launchd_image_ready(struct launchd *ld, const char *hex)
{
	run_image_ready(ld, hex);
	pool_fill(ld);
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

	ld->debug = opts->debug;
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
		fatalx("must start as root: it starts the root monitor");
	/* libcrypto is loaded for the images' digests anyway (util.h). */
	if (sha256_use_openssl() == -1)
		log_warnx("OpenSSL's SHA-256 cannot be fetched: libsodium's");
	if (sign_trust_load(&ld->trust, ld->conf->policy_public_key,
	    ld->conf->policy_public_key_previous, err, sizeof(err)) == -1)
		fatalx("policy_public_key: %s", err);
	if (access(ld->conf->init, X_OK) == -1)
		fatal("init %s", ld->conf->init);
	launchd_dirs(ld);
}

/* The runtimes checked, what a previous instance left of an unpack
 * removed, the sandbox groups, the audit log. */
static void
launchd_prepare(void *arg)
{
	struct launchd	*ld = arg;
	char		 err[512], *db;

	runtime_check(ld);
	image_reap_unpacks(ld);
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

/* After daemon(), still root: the state tree given to the launcher's
 * user, and the monitor started (it is this process's child: its end
 * reaches run_reap_children, and the socket's end too). */
static void
launchd_open(void *arg)
{
	struct launchd	*ld = arg;

	launchd_chown_state(ld);
	mon_client_start(ld);
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

	mon_client_stop(ld);
	audit_close(ld->audit);
	ident_free(ld);
}

/* What each socket serves, by Envelope body field: hello's answer. */
static const uint32_t launchd_serves_launch[] = {
	SBX__V1__ENVELOPE__BODY_LAUNCH,
	0
};
static const uint32_t launchd_serves_admin[] = {
	SBX__V1__ENVELOPE__BODY_DATASET_PUT,
	SBX__V1__ENVELOPE__BODY_DATASET_LIST,
	SBX__V1__ENVELOPE__BODY_IMAGE_LIST,
	SBX__V1__ENVELOPE__BODY_AUDIT_QUERY,
	SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY,
	SBX__V1__ENVELOPE__BODY_METRICS_REQUEST,
	0
};

static const struct daemon_sock launchd_socks[] = {
	{ "launch", offsetof(struct launchd_conf, launch),
	    control_launch_socket, NULL, LAUNCHD_LAUNCH_IDLE, 0,
	    launchd_serves_launch },
	{ "admin", offsetof(struct launchd_conf, admin),
	    control_admin_socket, NULL, 0, 0,
	    launchd_serves_admin },
	{ NULL, 0, NULL, NULL, 0, 0, NULL }
};

static const struct daemon_signal launchd_signals[] = {
	{ SIGCHLD, launchd_sigchld },
	{ 0, NULL }
};

/* The scrape listener's text: the admin socket's. */
static char *
launchd_metrics_text(void *arg)
{
	return control_metrics(arg);
}

static const struct daemon_main launchd_main = {
	.name = "launchd-sbx",
	.conf_file = LAUNCHD_CONF_DEFAULT,
	.umask = 077,
	.db = LAUNCHD_DB,
	.nprio = LAUNCHD_NPRIO,
	.bg_prio = LAUNCHD_PRIO_BG,
	.conf_at = offsetof(struct launchd, conf),
	.base_at = offsetof(struct launchd, base),
	.parse = parse_launchd,
	.conf_free = parse_launchd_free,
	.socks = launchd_socks,
	.metrics = launchd_metrics_text,
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
	ld.mon_fd = -1;
	ld.child_exited = run_child_exited;
	return daemon_main(argc, argv, &launchd_main, &ld);
}
