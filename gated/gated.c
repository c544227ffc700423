/*
 * gated.c: main, as a table for the skeleton in common/daemon.c: options,
 * config (every error reported, -n stops there), policyd's public key,
 * libmagic's database, the sockets, the audit log, the privilege drop, the
 * event loop.  What needs root (creating the state and store directories
 * for gated's user, binding the release socket where launchd-sbx finds
 * it) happens before the drop, which is verified; after it gated holds
 * only its own files and the descriptors launchd-sbx hands it, one
 * request at a time.
 */
#include <sys/types.h>

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "audit.h"
#include "daemon.h"
#include "log.h"
#include "sign.h"
#include "util.h"
#include "gated/gated.h"

/*
 * gated-unpack: the configuration's archive_reader, or the one installed
 * beside gated.  It must be there and executable at start-up: a gate that
 * cannot read archives refuses every one, and the operator should hear of
 * it now, not from a dropped output.
 */
static void
gated_reader(struct gated *gd)
{
	char	 self[PATH_MAX], *slash, *p;
	ssize_t	 n;

	gd->inspect.timeout = gd->conf->archive_timeout;
	if (gd->conf->archive_reader != NULL)
		gd->inspect.path = gd->conf->archive_reader;
	else {
		if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) ==
		    -1)
			fatal("readlink /proc/self/exe");
		self[n] = '\0';
		if ((slash = strrchr(self, '/')) != NULL)
			*slash = '\0';
		xasprintf(&p, "%s/%s", self, GATED_UNPACK);
		gd->inspect.path = p;
	}
	if (access(gd->inspect.path, X_OK) == -1)
		fatal("archive_reader %s (gated-unpack, which reads archives)",
		    gd->inspect.path);
}

/* Before the state directory: policyd's key, libmagic's database and the
 * archive reader. */
static void
gated_init(void *arg)
{
	struct gated	*gd = arg;
	char		 err[512];

	if (sodium_init() < 0)
		fatalx("libsodium could not be initialised");
	if (sign_trust_load(&gd->trust, gd->conf->policy_public_key,
	    gd->conf->policy_public_key_previous, err, sizeof(err)) == -1)
		fatalx("policy_public_key: %s", err);
	if ((gd->sniff = sniff_open(err, sizeof(err))) == NULL)
		fatalx("%s", err);
	gated_reader(gd);
}

static void
gated_prepare(void *arg)
{
	struct gated		*gd = arg;
	const struct cfg_common	*c = &gd->conf->common;

	daemon_state_dir(gd->conf->store_dir, c->user, c->uid, c->gid);
}

static void
gated_open(void *arg)
{
	struct gated	*gd = arg;
	char		 err[512];

	if ((gd->audit = audit_open(GATED_DB, "gated", err, sizeof(err))) ==
	    NULL)
		fatalx("%s/%s: %s", gd->conf->common.state_dir, GATED_DB, err);
}

static void
gated_start(void *arg)
{
	struct gated	*gd = arg;

	log_info("started: release %s%s%s", gd->conf->release.path,
	    gd->conf->admin.path != NULL ? ", admin " : "",
	    gd->conf->admin.path != NULL ? gd->conf->admin.path : "");
}

/* SIGHUP: read policyd's public key again (a rotated key). */
static void
gated_hup(void *arg)
{
	struct gated	*gd = arg;

	(void)sign_trust_reload(&gd->trust, gd->conf->policy_public_key,
	    gd->conf->policy_public_key_previous);
}

static void
gated_close(void *arg)
{
	struct gated	*gd = arg;

	audit_close(gd->audit);
	sniff_close(gd->sniff);
	if (gd->inspect.path != gd->conf->archive_reader)
		free((char *)gd->inspect.path);
	gd->inspect.path = NULL;
}

/* What each socket serves, by Envelope body field: hello's answer. */
static const uint32_t gated_serves_release[] = {
	SBX__V1__ENVELOPE__BODY_RELEASE,
	0
};
static const uint32_t gated_serves_admin[] = {
	SBX__V1__ENVELOPE__BODY_AUDIT_QUERY,
	SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY,
	SBX__V1__ENVELOPE__BODY_METRICS_REQUEST,
	0
};

static const struct daemon_sock gated_socks[] = {
	/* The scratch directory comes with a release as a descriptor. */
	{ "release", offsetof(struct gated_conf, release),
	    gcontrol_release_socket, NULL, 0, 1,
	    gated_serves_release },
	{ "admin", offsetof(struct gated_conf, admin),
	    gcontrol_admin_socket, NULL, 0, 0,
	    gated_serves_admin },
	{ NULL, 0, NULL, NULL, 0, 0, NULL }
};

/* The scrape listener's text: the admin socket's. */
static char *
gated_metrics_text(void *arg)
{
	return gcontrol_metrics(arg);
}

static const struct daemon_main gated_main = {
	.name = "gated",
	.conf_file = GATED_CONF_DEFAULT,
	.db = GATED_DB,
	.umask = 027,
	/* A core file would hold whatever output was being decided. */
	.no_core = 1,
	.conf_at = offsetof(struct gated, conf),
	.base_at = offsetof(struct gated, base),
	.config = &gparse_table,
	.socks = gated_socks,
	.metrics = gated_metrics_text,
	.refused = gcontrol_refused_peer,
	.init = gated_init,
	.prepare = gated_prepare,
	.open = gated_open,
	.start = gated_start,
	.hup = gated_hup,
	.close = gated_close,
};

int
main(int argc, char *argv[])
{
	struct gated	 gd;

	memset(&gd, 0, sizeof(gd));
	return daemon_main(argc, argv, &gated_main, &gd);
}
