/*
 * brokerd.c: main.  Reads like the daemon's table of contents: options,
 * config (every error reported, -n stops there), policyd's public key,
 * the master key (created on first start, refused if anyone but brokerd's
 * user can read it), the sockets, the secret store, the privilege drop,
 * the event loop.  What needs root (creating files for the daemon's user,
 * binding sockets under /run) happens before the drop, which is verified;
 * after it brokerd holds only its own files and the master key, in
 * read-only guarded memory.
 */
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <sodium.h>

#include "daemon.h"
#include "log.h"
#include "sign.h"
#include "util.h"
#include "yaml.h"
#include "brokerd/brokerd.h"

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: brokerd [-dnv] [-f file]\n");
	exit(1);
}

/* The uid the master key must belong to: brokerd's user once it drops,
 * else whoever runs it. */
static uid_t
brokerd_key_owner(const struct brokerd_conf *c)
{
	if (daemon_root() && c->user != NULL)
		return c->uid;
	return geteuid();
}

static unsigned char *
brokerd_master_key(const struct brokerd_conf *c)
{
	unsigned char	*key;
	char		 err[512];

	if (access(c->master_key, F_OK) == -1) {
		if (errno != ENOENT)
			fatal("master_key %s", c->master_key);
		if (bstore_key_create(c->master_key, err, sizeof(err)) == -1)
			fatalx("master_key: %s", err);
		if (daemon_root() && c->user != NULL &&
		    chown(c->master_key, c->uid, c->gid) == -1)
			fatal("chown %s to %s", c->master_key, c->user);
		log_info("created master key %s", c->master_key);
	}
	if ((key = bstore_key_load(c->master_key, brokerd_key_owner(c), err,
	    sizeof(err))) == NULL)
		fatalx("master_key: %s", err);
	return key;
}

/* SIGHUP: read policyd's public key again (a rotated key). */

static void
brokerd_signal(evutil_socket_t sig, short what, void *arg)
{
	struct brokerd	*bd = arg;

	(void)what;
	switch (sig) {
	case SIGHUP:
		(void)sign_pubkey_reload(bd->conf->policy_public_key, bd->pk);
		break;
	case SIGTERM:
	case SIGINT:
		log_info("exiting on signal %d", (int)sig);
		event_base_loopbreak(bd->base);
		break;
	}
}

int
main(int argc, char *argv[])
{
	struct daemon_opts opts;
	struct brokerd	 bd;
	struct yerrs	 errs = { NULL, 0 };
	struct event	*sigs[3];
	const int	 signos[3] = { SIGTERM, SIGINT, SIGHUP };
	const struct rlimit no_core = { 0, 0 };
	unsigned char	*key;
	char		 err[512];

	daemon_getopt(argc, argv, BROKERD_CONF_DEFAULT, &opts, usage);
	log_init("brokerd", 1, opts.noaction ? 0 : opts.verbose);

	memset(&bd, 0, sizeof(bd));
	if ((bd.conf = bparse_config(opts.file, &errs)) == NULL)
		return daemon_config_errors("brokerd", opts.file, &errs);
	yerrs_free(&errs);
	if (opts.noaction) {
		printf("configuration OK\n");
		bparse_config_free(bd.conf);
		return 0;
	}

	/* A core file of brokerd would hold the master key and whatever
	 * value was being answered. */
	if (setrlimit(RLIMIT_CORE, &no_core) == -1)
		fatal("setrlimit RLIMIT_CORE");
	if (sodium_init() < 0)
		fatalx("libsodium could not be initialised");
	signal(SIGPIPE, SIG_IGN);
	/* The database, its journal and the key are brokerd's alone; the
	 * sockets get their modes explicitly. */
	umask(077);
	if (sign_pubkey_load(bd.conf->policy_public_key, bd.pk, err,
	    sizeof(err)) == -1)
		fatalx("policy_public_key: %s", err);
	daemon_state_dir(bd.conf->state_dir, bd.conf->user, bd.conf->uid,
	    bd.conf->gid);
	key = brokerd_master_key(bd.conf);

	if ((bd.base = event_base_new()) == NULL)
		fatalx("cannot create the event loop");
	if ((bd.ctl = bcontrol_start(&bd)) == NULL)
		fatalx("cannot listen on the sockets");
	if (!opts.debug) {
		if (daemon(1, 0) == -1)
			fatal("daemon");
		log_foreground(0);
		if (event_reinit(bd.base) == -1)
			fatalx("cannot reinitialise the event loop");
	}

	if (chdir(bd.conf->state_dir) == -1)
		fatal("chdir %s", bd.conf->state_dir);
	if ((bd.store = bstore_open(BROKERD_DB, key, err, sizeof(err))) ==
	    NULL)
		fatalx("%s/%s: %s", bd.conf->state_dir, BROKERD_DB, err);
	daemon_chown_db(BROKERD_DB, bd.conf->state_dir, bd.conf->user,
	    bd.conf->uid, bd.conf->gid);
	daemon_drop(bd.conf->file, bd.conf->user, bd.conf->uid, bd.conf->gid);

	for (int i = 0; i < 3; i++) {
		if ((sigs[i] = evsignal_new(bd.base, signos[i],
		    brokerd_signal, &bd)) == NULL ||
		    event_add(sigs[i], NULL) == -1)
			fatalx("cannot handle signal %d", signos[i]);
	}
	log_info("started: credential %s, admin %s",
	    bd.conf->credential.path, bd.conf->admin.path);

	if (event_base_dispatch(bd.base) == -1)
		log_warnx("event loop failed");

	bcontrol_stop(bd.ctl);
	for (int i = 0; i < 3; i++)
		event_free(sigs[i]);
	bstore_close(bd.store);		/* wipes the master key */
	bparse_config_free(bd.conf);
	event_base_free(bd.base);
	log_info("stopped");
	return 0;
}
