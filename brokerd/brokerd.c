/*
 * brokerd.c: main, as a table for the skeleton in common/daemon.c.  Reads
 * like the daemon's table of contents: options,
 * config (every error reported, -n stops there), policyd's public key,
 * the master key (created on first start, refused if anyone but brokerd's
 * user can read it), the sockets, the secret store, the privilege drop,
 * the event loop.  What needs root (creating files for the daemon's user,
 * binding sockets under /run) happens before the drop, which is verified;
 * after it brokerd holds only its own files and the master key, in
 * read-only guarded memory.
 */
#include <sys/types.h>

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "daemon.h"
#include "log.h"
#include "sign.h"
#include "brokerd/brokerd.h"

/* The uid the master key must belong to: brokerd's user once it drops,
 * else whoever runs it. */
static uid_t
brokerd_key_owner(const struct cfg_common *c)
{
	if (daemon_root() && c->user != NULL)
		return c->uid;
	return geteuid();
}

/* Before the state directory: policyd's key. */
static void
brokerd_init(void *arg)
{
	struct brokerd	*bd = arg;
	char		 err[512];

	if (sodium_init() < 0)
		fatalx("libsodium could not be initialised");
	if (sign_trust_load(&bd->trust, bd->conf->policy_public_key,
	    bd->conf->policy_public_key_previous, err, sizeof(err)) == -1)
		fatalx("policy_public_key: %s", err);
}

/* The state directory made: the master key, created on first start. */
static void
brokerd_prepare(void *arg)
{
	struct brokerd		*bd = arg;
	const struct cfg_common	*c = &bd->conf->common;
	const char		*path = bd->conf->master_key;
	char			 err[512];

	if (access(path, F_OK) == -1) {
		if (errno != ENOENT)
			fatal("master_key %s", path);
		if (bstore_key_create(path, err, sizeof(err)) == -1)
			fatalx("master_key: %s", err);
		if (daemon_root() && c->user != NULL &&
		    chown(path, c->uid, c->gid) == -1)
			fatal("chown %s to %s", path, c->user);
		log_info("created master key %s", path);
	}
	if ((bd->key = bstore_key_load(path, brokerd_key_owner(c), err,
	    sizeof(err))) == NULL)
		fatalx("master_key: %s", err);
}

/* The store takes the key. */
static void
brokerd_open(void *arg)
{
	struct brokerd	*bd = arg;
	char		 err[512];

	if ((bd->store = bstore_open(BROKERD_DB, bd->key, err,
	    sizeof(err))) == NULL)
		fatalx("%s/%s: %s", bd->conf->common.state_dir, BROKERD_DB,
		    err);
	bd->key = NULL;
}

static void
brokerd_start(void *arg)
{
	struct brokerd	*bd = arg;

	log_info("started: credential %s, admin %s",
	    bd->conf->credential.path, bd->conf->admin.path);
}

/* SIGHUP: read policyd's public key again (a rotated key). */
static void
brokerd_hup(void *arg)
{
	struct brokerd	*bd = arg;

	(void)sign_trust_reload(&bd->trust, bd->conf->policy_public_key,
	    bd->conf->policy_public_key_previous);
}

static void
brokerd_close(void *arg)
{
	struct brokerd	*bd = arg;

	bstore_close(bd->store);	/* wipes the master key */
}

/* What each socket serves, by Envelope body field: hello's answer. */
static const uint32_t brokerd_serves_credential[] = {
	SBX__V1__ENVELOPE__BODY_CREDENTIAL,
	0
};
static const uint32_t brokerd_serves_admin[] = {
	SBX__V1__ENVELOPE__BODY_SECRET_PUT,
	SBX__V1__ENVELOPE__BODY_SECRET_LIST,
	SBX__V1__ENVELOPE__BODY_AUDIT_QUERY,
	SBX__V1__ENVELOPE__BODY_AUDIT_VERIFY,
	SBX__V1__ENVELOPE__BODY_METRICS_REQUEST,
	0
};

static const struct daemon_sock brokerd_socks[] = {
	{ "credential", offsetof(struct brokerd_conf, credential),
	    bcontrol_credential_socket, NULL, 0, 0,
	    brokerd_serves_credential },
	{ "admin", offsetof(struct brokerd_conf, admin),
	    bcontrol_admin_socket, NULL, 0, 0,
	    brokerd_serves_admin },
	{ NULL, 0, NULL, NULL, 0, 0, NULL }
};

/* The scrape listener's text: the admin socket's. */
static char *
brokerd_metrics_text(void *arg)
{
	return bcontrol_metrics(arg);
}

static const struct daemon_main brokerd_main = {
	.name = "brokerd",
	.conf_file = BROKERD_CONF_DEFAULT,
	.db = BROKERD_DB,
	/* The database, its journal and the key are brokerd's alone; the
	 * sockets get their modes explicitly. */
	.umask = 077,
	/* A core file of brokerd would hold the master key and whatever
	 * value was being answered. */
	.no_core = 1,
	.conf_at = offsetof(struct brokerd, conf),
	.base_at = offsetof(struct brokerd, base),
	.config = &bparse_table,
	.socks = brokerd_socks,
	.metrics = brokerd_metrics_text,
	.refused = bcontrol_refused_peer,
	.init = brokerd_init,
	.prepare = brokerd_prepare,
	.open = brokerd_open,
	.start = brokerd_start,
	.hup = brokerd_hup,
	.close = brokerd_close,
};

int
main(int argc, char *argv[])
{
	struct brokerd	 bd;

	memset(&bd, 0, sizeof(bd));
	return daemon_main(argc, argv, &brokerd_main, &bd);
}
