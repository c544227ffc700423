/*
 * policyd.c: main.  Reads like the daemon's table of contents: options,
 * config and templates (every error reported, -n stops there), the
 * signing key, the sockets, the database, the privilege drop, the event
 * loop.  What needs root (creating files for the daemon's user, binding
 * sockets under /run) happens before the drop, which is verified; after it
 * policyd holds only its own files and the key in memory.
 */
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
#include <sqlite3.h>

#include "daemon.h"
#include "log.h"
#include "util.h"
#include "yaml.h"
#include "policyd.h"

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: policyd [-dnv] [-f file]\n");
	exit(1);
}

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
policyd_key(const struct policyd_conf *c)
{
	struct sign_key	*key;
	char		 err[512];

	if (access(c->signing_key, F_OK) == -1) {
		if (errno != ENOENT)
			fatal("signing_key %s", c->signing_key);
		if (sign_keygen(c->signing_key, c->public_key, err,
		    sizeof(err)) == -1)
			fatalx("signing_key %s: %s", c->signing_key, err);
		if (daemon_root() && c->user != NULL &&
		    chown(c->signing_key, c->uid, c->gid) == -1)
			fatal("chown %s to %s", c->signing_key, c->user);
		log_info("created signing key %s", c->signing_key);
	}
	if ((key = sign_key_load(c->signing_key, err, sizeof(err))) == NULL)
		fatalx("signing_key: %s", err);
	policyd_write_pubkey(c->public_key, key);
	log_info("signing key %s, public key %s", key->key_id, c->public_key);
	return key;
}

static void
policyd_reload(struct policyd *pd)
{
	struct yerrs		 errs = { NULL, 0 };
	struct tmpl_registry	*reg;

	/* Replies in the batch were compiled from the old templates;
	 * commit them before the templates change under them. */
	commit_flush(pd->commit);
	if ((reg = template_load(pd->conf, &errs)) == NULL) {
		for (size_t i = 0; i < errs.n; i++)
			log_warnx("%s", errs.msgs[i]);
		log_warnx("reload: %zu error%s; keeping the %zu templates "
		    "loaded", errs.n, errs.n == 1 ? "" : "s", pd->reg->n);
		yerrs_free(&errs);
		return;
	}
	template_registry_free(pd->reg);
	pd->reg = reg;
	log_info("reload: %zu templates, %zu task types", reg->n,
	    reg->nactive);
	yerrs_free(&errs);
}

static void
policyd_signal(evutil_socket_t sig, short what, void *arg)
{
	struct policyd	*pd = arg;

	(void)what;
	switch (sig) {
	case SIGHUP:
		policyd_reload(pd);
		break;
	case SIGTERM:
	case SIGINT:
		log_info("exiting on signal %d", (int)sig);
		event_base_loopbreak(pd->base);
		break;
	}
}

int
main(int argc, char *argv[])
{
	struct daemon_opts opts;
	struct policyd	 pd;
	struct yerrs	 errs = { NULL, 0 };
	struct event	*sigs[3];
	const int	 signos[3] = { SIGTERM, SIGINT, SIGHUP };
	char		 err[512];

	daemon_getopt(argc, argv, POLICYD_CONF_DEFAULT, &opts, usage);
	log_init("policyd", 1, opts.noaction ? 0 : opts.verbose);

	memset(&pd, 0, sizeof(pd));
	if ((pd.conf = parse_config(opts.file, &errs)) != NULL)
		pd.reg = template_load(pd.conf, &errs);
	if (errs.n > 0) {
		template_registry_free(pd.reg);
		parse_config_free(pd.conf);
		return daemon_config_errors("policyd", opts.file, &errs);
	}
	yerrs_free(&errs);
	if (opts.noaction) {
		if (opts.verbose)
			template_print(pd.reg);
		printf("configuration OK\n");
		template_registry_free(pd.reg);
		parse_config_free(pd.conf);
		return 0;
	}
	pd.ttl = pd.conf->policy_ttl;

	/* SQLite's memory statistics take a global lock on every
	 * allocation, from both of policyd's threads; nothing reads them.
	 * Only possible before SQLite's first use. */
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	signal(SIGPIPE, SIG_IGN);
	/* The database, its journal and the key are policyd's alone; the
	 * public key and the sockets get their modes explicitly. */
	umask(077);
	daemon_state_dir(pd.conf->state_dir, pd.conf->user, pd.conf->uid,
	    pd.conf->gid);
	pd.key = policyd_key(pd.conf);

	if ((pd.base = event_base_new()) == NULL)
		fatalx("cannot create the event loop");
	pd.commit = commit_new(&pd);
	if ((pd.ctl = control_start(&pd)) == NULL)
		fatalx("cannot listen on the sockets");
	if (!opts.debug) {
		if (daemon(1, 0) == -1)
			fatal("daemon");
		log_foreground(0);
		if (event_reinit(pd.base) == -1)
			fatalx("cannot reinitialise the event loop");
	}

	if (chdir(pd.conf->state_dir) == -1)
		fatal("chdir %s", pd.conf->state_dir);
	if ((pd.store = store_open(POLICYD_DB, err, sizeof(err))) == NULL)
		fatalx("%s/%s: %s", pd.conf->state_dir, POLICYD_DB, err);
	/* Compiles read entitlements through the read handle: the write
	 * handle is the writer thread's while a batch commits. */
	if ((pd.ent = entitle_open(store_db(pd.store), err,
	    sizeof(err))) == NULL ||
	    entitle_use_reader(pd.ent, store_reader(pd.store), err,
	    sizeof(err)) == -1)
		fatalx("%s/%s: %s", pd.conf->state_dir, POLICYD_DB, err);
	if (capability_open(&pd, err, sizeof(err)) == NULL)
		fatalx("%s/%s: %s", pd.conf->state_dir, POLICYD_DB, err);
	daemon_chown_db(POLICYD_DB, pd.conf->state_dir, pd.conf->user,
	    pd.conf->uid, pd.conf->gid);
	daemon_drop(pd.conf->file, pd.conf->user, pd.conf->uid, pd.conf->gid);

	for (int i = 0; i < 3; i++) {
		if ((sigs[i] = evsignal_new(pd.base, signos[i],
		    policyd_signal, &pd)) == NULL ||
		    event_add(sigs[i], NULL) == -1)
			fatalx("cannot handle signal %d", signos[i]);
	}
	log_info("started: %zu templates, %zu task types, orchestrator %s, "
	    "admin %s", pd.reg->n, pd.reg->nactive, pd.conf->orch.path,
	    pd.conf->admin.path);

	if (event_base_dispatch(pd.base) == -1)
		log_warnx("event loop failed");

	/* Before the sockets go: it holds orchestrator connections. */
	capability_close(pd.cap);
	control_stop(pd.ctl);
	commit_free(pd.commit);
	for (int i = 0; i < 3; i++)
		event_free(sigs[i]);
	entitle_close(pd.ent);
	store_close(pd.store);
	sign_key_free(pd.key);
	template_registry_free(pd.reg);
	parse_config_free(pd.conf);
	event_base_free(pd.base);
	log_info("stopped");
	return 0;
}
