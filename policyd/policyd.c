/*
 * policyd.c: main, as a table for the skeleton in common/daemon.c.  Reads
 * like the daemon's table of contents: options, config and templates
 * (every error reported, -n stops there), the signing key, the sockets,
 * the database, the privilege drop, the event loop.  What needs root
 * (creating files for the daemon's user, binding sockets under /run)
 * happens before the drop, which is verified; after it policyd holds only
 * its own files and the key in memory.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "daemon.h"
#include "log.h"
#include "util.h"
#include "yaml.h"
#include "policyd.h"

static void
policyd_write_pubkey(const char *path, const struct sign_key *key)
{
	char	 hex[65], *tmp;
	FILE	*f;
	int	 fd;

	hex_encode(key->pk, sizeof(key->pk), hex);
	xasprintf(&tmp, "%s.tmp", path);
	(void)unlink(tmp);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0644)) == -1)
		fatal("public_key %s", tmp);
	if (fchmod(fd, 0644) == -1 || (f = fdopen(fd, "w")) == NULL)
		fatal("public_key %s", tmp);
	if (fprintf(f, "ed25519 %s\n", hex) < 0 || fflush(f) != 0 ||
	    fsync(fileno(f)) == -1)
		fatal("public_key %s", tmp);
	fclose(f);
	if (rename(tmp, path) == -1)
		fatal("public_key %s", path);
	free(tmp);
}

static struct sign_key *
policyd_key(const struct policyd_conf *pc)
{
	const struct cfg_common	*c = &pc->common;
	struct sign_key		*key;
	char			 err[512];

	if (access(pc->signing_key, F_OK) == -1) {
		if (errno != ENOENT)
			fatal("signing_key %s", pc->signing_key);
		if (sign_keygen(pc->signing_key, pc->public_key, err,
		    sizeof(err)) == -1)
			fatalx("signing_key %s: %s", pc->signing_key, err);
		if (daemon_root() && c->user != NULL &&
		    chown(pc->signing_key, c->uid, c->gid) == -1)
			fatal("chown %s to %s", pc->signing_key, c->user);
		log_info("created signing key %s", pc->signing_key);
	}
	if ((key = sign_key_load(pc->signing_key, err, sizeof(err))) == NULL)
		fatalx("signing_key: %s", err);
	policyd_write_pubkey(pc->public_key, key);
	log_info("signing key %s, public key %s", key->key_id, pc->public_key);
	return key;
}

/* previous_public_key, when set: must load and differ from the key now
 * signing. */
static void
policyd_prev_key(struct policyd *pd)
{
	const char	*path = pd->conf->previous_public_key;
	char		 err[512], kid[SIGN_KEYID_HEX];

	pd->has_prev = 0;
	if (path == NULL)
		return;
	if (sign_pubkey_load(path, pd->prev_pk, err, sizeof(err)) == -1)
		fatalx("previous_public_key: %s", err);
	if (memcmp(pd->prev_pk, pd->key->pk, sizeof(pd->prev_pk)) == 0)
		fatalx("previous_public_key %s is the key signing now (%s): "
		    "name the key that signed before the rotation", path,
		    pd->key->key_id);
	pd->has_prev = 1;
	sign_key_id(pd->prev_pk, kid);
	log_info("previous public key %s (key %s)", path, kid);
}

/*
 * In a fleet, reg's versions registered in the database, or compared with
 * what another host registered (fleet.c): 1 done, 0 the database could
 * not be reached (no compile until a compile can register them), -1 a
 * version differs from the fleet's (in errs).  1 outside a fleet.
 */
static int
policyd_fleet_templates(struct policyd *pd, const struct tmpl_registry *reg,
    struct yerrs *errs)
{
	char	 err[512];

	if (pd->fleet == NULL)
		return 1;
	switch (fleet_templates(pd->fleet, reg, pd->conf->store.host, errs,
	    err, sizeof(err))) {
	case 0:
		return 1;
	case -2:
		return -1;
	default:
		log_warnx("template versions not registered in the fleet yet "
		    "(%s); no compile until they are", err);
		return 0;
	}
}

/* SIGHUP: the templates read again; a broken set leaves the old one. */
static void
policyd_reload(void *arg)
{
	struct policyd		*pd = arg;
	struct yerrs		 errs = { NULL, 0 };
	struct tmpl_registry	*reg;
	char			 err[512];
	int			 ok;

	/* Replies in the batch were compiled from the old templates;
	 * commit them before the templates change under them. */
	commit_flush(pd->commit);
	/* A version already known must hash as it did (pin.c), here and
	 * across the fleet (fleet.c). */
	ok = 1;
	if ((reg = template_load(pd->conf, &errs)) == NULL ||
	    pin_check(pd->pin, reg, &errs) == -1 ||
	    (ok = policyd_fleet_templates(pd, reg, &errs)) == -1 ||
	    pin_record(pd->pin, reg, err, sizeof(err)) == -1) {
		if (reg != NULL && errs.n == 0)
			yerrs_add(&errs, "%s", err);
		for (size_t i = 0; i < errs.n; i++)
			log_warnx("%s", errs.msgs[i]);
		log_warnx("reload: %zu error%s; keeping the %zu templates "
		    "loaded", errs.n, errs.n == 1 ? "" : "s", pd->reg->n);
		template_registry_free(reg);
		yerrs_free(&errs);
		return;
	}
	template_registry_free(pd->reg);
	pd->reg = reg;
	pd->tmpl_fleet_ok = ok;
	log_info("reload: %zu templates, %zu task types", reg->n,
	    reg->nactive);
	yerrs_free(&errs);
}

/* The templates, with -n too (-n -v lists them). */
static int
policyd_check(void *arg, const struct daemon_opts *opts)
{
	struct policyd	*pd = arg;
	struct yerrs	 errs = { NULL, 0 };

	if ((pd->reg = template_load(pd->conf, &errs)) == NULL) {
		(void)daemon_config_errors("policyd", opts->file, &errs);
		return -1;
	}
	yerrs_free(&errs);
	if (opts->noaction && opts->verbose) {
		template_print(pd->reg);
		for (size_t i = 0; i < pd->conf->ntypes; i++) {
			const struct policyd_task_type *tt =
			    &pd->conf->types[i];

			if (tt->canary != 0)
				printf("rollout %s -> %s@%u canary @%u at "
				    "%u%% (as configured)\n", tt->type,
				    tt->template, tt->version, tt->canary,
				    tt->percent);
		}
	}
	return 0;
}

static void
policyd_init(void *arg)
{
	struct policyd	*pd = arg;

	pd->ttl = pd->conf->policy_ttl;
	/* SQLite's memory statistics take a global lock on every
	 * allocation, from both of policyd's threads; nothing reads them.
	 * Only possible before SQLite's first use. */
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	/* Every compile hashes its policy: OpenSSL's SHA-256 (util.h). */
	if (sha256_use_openssl() == -1)
		log_warnx("OpenSSL's SHA-256 cannot be fetched: libsodium's");
}

/* The state directory made: the signing key, created on first start. */
static void
policyd_prepare(void *arg)
{
	struct policyd	*pd = arg;

	pd->key = policyd_key(pd->conf);
	policyd_prev_key(pd);
}

/* The group commit's and the runs' events. */
static void
policyd_loop(void *arg)
{
	struct policyd	*pd = arg;

	pd->commit = commit_new(pd);
	if ((pd->ctl = control_new(pd)) == NULL)
		fatalx("cannot listen on the sockets");
}

/*
 * Start: every template version loaded before must hash as it did then
 * (pin.c); a changed one stops the start with its file, version and both
 * hashes -- there is no running policy to keep, and a version must never
 * mean two policies -- and the new ones are pinned.
 */
static void
policyd_pin(struct policyd *pd)
{
	struct yerrs	 errs = { NULL, 0 };
	char		 err[512];

	if ((pd->pin = pin_open(POLICYD_DB, err, sizeof(err))) == NULL)
		fatalx("%s/%s: %s", pd->conf->common.state_dir, POLICYD_DB,
		    err);
	if (pin_check(pd->pin, pd->reg, &errs) == -1) {
		for (size_t i = 0; i < errs.n; i++)
			log_warnx("%s", errs.msgs[i]);
		fatalx("%zu template version%s changed; not started (give the "
		    "changed policy a new version)", errs.n,
		    errs.n == 1 ? "" : "s");
	}
	if ((pd->tmpl_fleet_ok = policyd_fleet_templates(pd, pd->reg,
	    &errs)) == -1) {
		for (size_t i = 0; i < errs.n; i++)
			log_warnx("%s", errs.msgs[i]);
		fatalx("%zu template version%s differ%s from the fleet's; not "
		    "started (give the changed policy a new version)", errs.n,
		    errs.n == 1 ? "" : "s", errs.n == 1 ? "s" : "");
	}
	if (pin_record(pd->pin, pd->reg, err, sizeof(err)) == -1)
		fatalx("%s/%s: %s", pd->conf->common.state_dir, POLICYD_DB,
		    err);
}

static void
policyd_open(void *arg)
{
	struct policyd	*pd = arg;
	const char	*dir = pd->conf->common.state_dir;
	char		 err[512];

	if ((pd->store = store_open(POLICYD_DB, err, sizeof(err))) == NULL)
		fatalx("%s/%s: %s", dir, POLICYD_DB, err);
	store_set_review(pd->store, pd->conf->review_denials);
	/* Compiles read entitlements through the read handle: the write
	 * handle is the writer thread's while a batch commits. */
	if ((pd->ent = entitle_open(store_db(pd->store), err,
	    sizeof(err))) == NULL ||
	    entitle_use_reader(pd->ent, store_reader(pd->store), err,
	    sizeof(err)) == -1)
		fatalx("%s/%s: %s", dir, POLICYD_DB, err);
	/* The fleet's database is reached on first use, so a replica
	 * starts (and refuses compiles) while it is down. */
	if (pd->conf->store.pg) {
		pd->fleet = fleet_open(&pd->conf->store);
		entitle_use_fleet(pd->ent, pd->fleet);
		store_use_fleet(pd->store, pd->fleet, pd->conf->store.host);
		log_info("store: postgresql, %s, as host %s, each round "
		    "trip within %d ms, %d ms back-off after one that is not",
		    fleet_where_str(pd->fleet), pd->conf->store.host,
		    pd->conf->store.timeout_ms, pd->conf->store.retry_ms);
	}
	if (capability_open(pd, err, sizeof(err)) == NULL)
		fatalx("%s/%s: %s", dir, POLICYD_DB, err);
	policyd_pin(pd);
	/* Rollouts kept from before (a halt survives restarts). */
	if ((pd->roll = rollout_open(pd->conf, pd->store, err,
	    sizeof(err))) == NULL)
		fatalx("%s/%s: %s", dir, POLICYD_DB, err);
	rollout_use_fleet(pd->roll, pd->fleet, pd->conf->store.host);
}

static void
policyd_start(void *arg)
{
	struct policyd	*pd = arg;

	log_info("started: %zu templates, %zu task types, orchestrator %s, "
	    "admin %s", pd->reg->n, pd->reg->nactive, pd->conf->orch.path,
	    pd->conf->admin.path);
}

/* Before the sockets go: capability.c holds orchestrator connections,
 * and the replies still held are sent. */
static void
policyd_stop(void *arg)
{
	struct policyd	*pd = arg;

	capability_close(pd->cap);
	control_free(pd->ctl);
	pd->ctl = NULL;
}

static void
policyd_close(void *arg)
{
	struct policyd	*pd = arg;

	commit_free(pd->commit);
	pin_close(pd->pin);
	rollout_close(pd->roll);
	entitle_close(pd->ent);
	store_close(pd->store);
	fleet_close(pd->fleet);
	sign_key_free(pd->key);
}

static void
policyd_unload(void *arg)
{
	struct policyd	*pd = arg;

	template_registry_free(pd->reg);
}

/* What each socket serves, by Envelope body field: hello's answer. */
static const uint32_t policyd_serves_orch[] = {
	SBX__V1__ENVELOPE__BODY_COMPILE,
	SBX__V1__ENVELOPE__BODY_RUN,
	SBX__V1__ENVELOPE__BODY_AUDIT_QUERY,
	SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY,
	SBX__V1__ENVELOPE__BODY_CAPABILITY,
	SBX__V1__ENVELOPE__BODY_KEY_REQUEST,
	0
};
static const uint32_t policyd_serves_admin[] = {
	SBX__V1__ENVELOPE__BODY_COMPILE,
	SBX__V1__ENVELOPE__BODY_RUN,
	SBX__V1__ENVELOPE__BODY_AUDIT_QUERY,
	SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY,
	SBX__V1__ENVELOPE__BODY_CAPABILITY,
	SBX__V1__ENVELOPE__BODY_KEY_REQUEST,
	SBX__V1__ENVELOPE__BODY_ENTITLEMENT_ADD,
	SBX__V1__ENVELOPE__BODY_ENTITLEMENT_REMOVE,
	SBX__V1__ENVELOPE__BODY_ENTITLEMENT_LIST,
	SBX__V1__ENVELOPE__BODY_TEMPLATE_LIST,
	SBX__V1__ENVELOPE__BODY_TEMPLATE_GET,
	SBX__V1__ENVELOPE__BODY_METRICS_REQUEST,
	SBX__V1__ENVELOPE__BODY_ROLLOUT_QUERY,
	SBX__V1__ENVELOPE__BODY_ROLLOUT_CONTROL,
	0
};
static const uint32_t policyd_serves_approvals[] = {
	SBX__V1__ENVELOPE__BODY_DECISION,
	0
};

static const struct daemon_sock policyd_socks[] = {
	{ "orchestrator", offsetof(struct policyd_conf, orch),
	    control_orch_socket, NULL, 0, 0,
	    policyd_serves_orch },
	{ "admin", offsetof(struct policyd_conf, admin),
	    control_admin_socket, NULL, 0, 0,
	    policyd_serves_admin },
	/* Optional: approvald's decisions. */
	{ "approvals", offsetof(struct policyd_conf, approvals),
	    control_approvals_socket, NULL, 0, 0,
	    policyd_serves_approvals },
	{ NULL, 0, NULL, NULL, 0, 0, NULL }
};

/* Replies held for the group commit go out before any the frame code
 * sends itself (hello, an unknown body): request order per connection. */
static void
policyd_flush(void *arg)
{
	struct policyd	*pd = arg;

	if (pd->commit != NULL)
		commit_flush(pd->commit);
}

/* The scrape listener's text: the admin socket's. */
static char *
policyd_metrics_text(void *arg)
{
	return control_metrics(arg);
}

static const struct daemon_main policyd_main = {
	.name = "policyd",
	.conf_file = POLICYD_CONF_DEFAULT,
	.db = POLICYD_DB,
	/* The database, its journal and the key are policyd's alone; the
	 * public key and the sockets get their modes explicitly. */
	.umask = 077,
	.conf_at = offsetof(struct policyd, conf),
	.base_at = offsetof(struct policyd, base),
	.parse = parse_config,
	.conf_free = parse_config_free,
	.socks = policyd_socks,
	.flush = policyd_flush,
	.metrics = policyd_metrics_text,
	.check = policyd_check,
	.init = policyd_init,
	.prepare = policyd_prepare,
	.loop = policyd_loop,
	.open = policyd_open,
	.start = policyd_start,
	.hup = policyd_reload,
	.stop = policyd_stop,
	.close = policyd_close,
	.unload = policyd_unload,
};

int
main(int argc, char *argv[])
{
	struct policyd	 pd;

	memset(&pd, 0, sizeof(pd));
	return daemon_main(argc, argv, &policyd_main, &pd);
}
