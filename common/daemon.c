/*
 * daemon.c: the skeleton every daemon's main() calls (daemon.h), and its
 * pieces: state directory, database ownership and the privilege drop
 * shared by every daemon that does not need root.  A drop that did not
 * take, or that could be undone, is fatal: a daemon that meant to run as
 * its own user must never go on as root.  Everything that needs root
 * (binding the sockets, making the state directory and the files in it)
 * happens before the drop, in one order for every daemon.  The options and
 * the configuration error report are here too, so that every daemon is
 * started and says what is wrong with its configuration in the same words,
 * and so are the service manager's conventions: --help and --version, and
 * sd_notify's READY=1 only once every socket listens (and the daemon runs
 * as its user), so a unit that depends on it never starts too early.
 */
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

#include "config.h"
#include "daemon.h"
#include "frame.h"
#include "log.h"
#include "scrape.h"
#include "util.h"
#include "version.h"
#include "yaml.h"

/* One socket listened on, and what its refusals are told to. */
struct daemon_listener {
	struct daemon_run		*run;
	const struct daemon_sock	*ds;
	struct frame_server		*srv;
};

/* The skeleton's own state while main() runs. */
struct daemon_run {
	const struct daemon_main	*dm;
	void				*state;
	struct cfg_common		*conf;
	struct event_base		*base;
	struct daemon_listener		*ls;
	size_t				 nls;
	struct event			**sigs;
	size_t				 nsigs;
	struct scrape			*scrape;	/* metrics.listen */
	struct daemon_listener		 scrape_l;
};

/* What the scrape listener's refusals are reported as. */
static const struct daemon_sock daemon_metrics_sock = { "metrics", 0, NULL,
    NULL, 0, 0, NULL };

/* usage() takes only the exit status (daemon_getopt's). */
static const char *daemon_name;
static const char *daemon_conf_file;

static void *
daemon_parse(const struct daemon_main *dm, const char *file,
    struct yerrs *errs)
{
	if (dm->config != NULL)
		return cfg_parse(file, dm->config, errs);
	return dm->parse(file, errs);
}

static void
daemon_conf_free(const struct daemon_main *dm, void *conf)
{
	if (dm->config != NULL)
		cfg_free(dm->config, conf);
	else
		dm->conf_free(conf);
}

void
daemon_getopt(int argc, char **argv, const char *default_file,
    struct daemon_opts *opts, void (*usage)(int))
{
	static const struct option	 longopts[] = {
		{ "help",	no_argument,	NULL,	'h' },
		{ "version",	no_argument,	NULL,	'V' },
		{ NULL,		0,		NULL,	0 }
	};
	int				 ch;

	opts->file = default_file;
	opts->debug = opts->noaction = opts->verbose = 0;
	while ((ch = getopt_long(argc, argv, "df:nv", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			opts->debug = 1;
			break;
		case 'f':
			opts->file = optarg;
			break;
		case 'n':
			opts->noaction = 1;
			break;
		case 'v':
			opts->verbose++;
			break;
		case 'h':
			usage(0);
			break;
		case 'V':
			printf("%s %s\n", daemon_name, SBX_VERSION);
			exit(0);
		default:
			usage(DAEMON_EXIT_USAGE);
		}
	}
	if (optind != argc)
		usage(DAEMON_EXIT_USAGE);
}

int
daemon_config_errors(const char *name, const char *file, struct yerrs *errs)
{
	for (size_t i = 0; i < errs->n; i++)
		fprintf(stderr, "%s\n", errs->msgs[i]);
	fprintf(stderr, "%s: %s: %zu error%s\n", name, file, errs->n,
	    errs->n == 1 ? "" : "s");
	fflush(stderr);
	yerrs_free(errs);
	return 1;
}

int
daemon_root(void)
{
	return geteuid() == 0;
}

void
daemon_state_dir(const char *dir, const char *user, uid_t uid, gid_t gid)
{
	struct stat	 st;

	if (mkdir(dir, 0700) == -1 && errno != EEXIST)
		fatal("state_dir %s", dir);
	if (stat(dir, &st) == -1)
		fatal("state_dir %s", dir);
	if (!S_ISDIR(st.st_mode))
		fatalx("state_dir %s: not a directory", dir);
	if (daemon_root() && user != NULL && chown(dir, uid, gid) == -1)
		fatal("chown %s to %s", dir, user);
}

void
daemon_chown_db(const char *db, const char *state_dir, const char *user,
    uid_t uid, gid_t gid)
{
	const char	*sfx[] = { "", "-wal", "-shm" };
	char		 path[4096];

	if (!daemon_root() || user == NULL)
		return;
	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", db, sfx[i]);
		if (chown(path, uid, gid) == -1 && errno != ENOENT)
			fatal("chown %s/%s to %s", state_dir, path, user);
	}
}

void
daemon_drop(const char *conffile, const char *user, uid_t uid, gid_t gid)
{
	uid_t	 ru, eu, su;
	gid_t	 rg, eg, sg;

	if (!daemon_root()) {
		if (user != NULL)
			log_debug("not root: keeping uid %u rather than "
			    "switching to %s", (unsigned)getuid(), user);
		return;
	}
	if (user == NULL) {
		log_warnx("running as root: set user in %s", conffile);
		return;
	}
	if (setgroups(1, &gid) == -1 ||
	    setresgid(gid, gid, gid) == -1 ||
	    setresuid(uid, uid, uid) == -1)
		fatal("cannot drop privileges to %s", user);
	if (getresuid(&ru, &eu, &su) == -1 || getresgid(&rg, &eg, &sg) == -1 ||
	    ru != uid || eu != uid || su != uid ||
	    rg != gid || eg != gid || sg != gid)
		fatalx("privilege drop to %s did not take", user);
	if (setuid(0) != -1)
		fatalx("privilege drop to %s can be undone", user);
	/* Peers check who serves a socket; make them see this user, not
	 * the root that bound it. */
	if (frame_servers_relisten() == -1)
		fatalx("cannot listen as %s", user);
	log_debug("running as %s (uid %u gid %u)", user, (unsigned)uid,
	    (unsigned)gid);
}

/* --help: the usage on stdout, exit 0; a bad option: on stderr, exit 2. */
static void __attribute__((noreturn))
daemon_usage(int status)
{
	FILE	*f = status == 0 ? stdout : stderr;

	fprintf(f, "usage: %s [-dnv] [-f file]\n"
	    "       %s --help | --version\n", daemon_name, daemon_name);
	if (status == 0)
		fprintf(f, "  -d         stay in the foreground, log to stderr "
		    "(what systemd runs)\n"
		    "  -f file    the configuration (default %s)\n"
		    "  -n         check the configuration, print "
		    "\"configuration OK\" and exit\n"
		    "  -v         more verbose (again for more)\n"
		    "  --help     this text\n"
		    "  --version  print \"%s %s\" and exit\n"
		    "See %s(8).\n", daemon_conf_file, daemon_name, SBX_VERSION,
		    daemon_name);
	exit(status);
}

/*
 * Tell systemd (a Type=notify unit: NOTIFY_SOCKET in the environment) how
 * the daemon is doing.  Without NOTIFY_SOCKET this does nothing, so a
 * daemon started by hand or by sbx-up is not affected.  A message that
 * cannot be sent is logged and the daemon goes on: systemd then times the
 * start out, which is the right outcome for a daemon it cannot hear.
 */
static void __attribute__((format(printf, 1, 2)))
daemon_notify(const char *fmt, ...)
{
	va_list	 ap;
	char	 msg[256];
	int	 rc;

	if (getenv("NOTIFY_SOCKET") == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if ((rc = sd_notify(0, msg)) < 0)
		log_warnx("sd_notify: %s", strerror(-rc));
}

static void
daemon_signal(evutil_socket_t sig, short what, void *arg)
{
	struct daemon_run	*r = arg;

	(void)what;
	if (sig == SIGHUP) {
		r->dm->hup(r->state);
		return;
	}
	for (const struct daemon_signal *ds = r->dm->signals;
	    ds != NULL && ds->signo != 0; ds++)
		if (ds->signo == sig) {
			ds->fn(r->state);
			return;
		}
	log_info("exiting on signal %d", (int)sig);
	daemon_notify("STOPPING=1\nSTATUS=stopping on signal %d", (int)sig);
	event_base_loopbreak(r->base);
}

static void
daemon_refused(const struct ucred *cr, const char *why, void *arg)
{
	struct daemon_listener	*l = arg;

	l->run->dm->refused(l->run->state, l->ds->name, cr, why);
}

static void
daemon_unlisten(struct daemon_run *r)
{
	for (size_t i = 0; i < r->nls; i++)
		frame_server_free(r->ls[i].srv);
	free(r->ls);
	r->ls = NULL;
	r->nls = 0;
}

/* Every socket of the table with a path; -1 (none left open) on error. */
static int
daemon_listen(struct daemon_run *r)
{
	const struct daemon_sock	*ds;
	const struct cfg_sock		*sc;
	struct daemon_listener		*l;
	struct frame_server_config	 cfg;
	size_t				 n = 0;

	for (ds = r->dm->socks; ds != NULL && ds->name != NULL; ds++)
		n++;
	r->ls = xcalloc(n + 1, sizeof(*r->ls));
	for (ds = r->dm->socks; ds != NULL && ds->name != NULL; ds++) {
		sc = (const struct cfg_sock *)(const void *)
		    ((const char *)r->conf + ds->conf);
		if (sc->path == NULL)
			continue;
		l = &r->ls[r->nls++];
		l->run = r;
		l->ds = ds;
		cfg_socket_server(sc, ds->name, &cfg);
		cfg.max_frame = (size_t)r->conf->max_frame_kb * 1024;
		cfg.idle_timeout = ds->idle_timeout;
		cfg.pass_fds = ds->pass_fds;
		cfg.server_name = r->dm->name;
		cfg.serves = ds->serves;
		cfg.flush = r->dm->flush;
		if (r->dm->refused != NULL) {
			cfg.refused = daemon_refused;
			cfg.refused_arg = l;
		}
		if ((l->srv = frame_server_listen(r->base, &cfg, ds->handler,
		    ds->arg != NULL ? ds->arg : r->state)) == NULL) {
			daemon_unlisten(r);
			return -1;
		}
	}
	return 0;
}

/* Who may scrape: metrics.allow, else the admin socket's allowlist;
 * NULL when neither is there. */
static const struct peer_allow *
daemon_metrics_allow(const struct daemon_main *dm,
    const struct cfg_common *c)
{
	const struct daemon_sock	*ds;
	const struct cfg_sock		*sc;

	if (c->metrics_allow.nuids > 0 || c->metrics_allow.ngids > 0)
		return &c->metrics_allow;
	for (ds = dm->socks; ds != NULL && ds->name != NULL; ds++) {
		if (strcmp(ds->name, "admin") != 0)
			continue;
		sc = (const struct cfg_sock *)(const void *)
		    ((const char *)c + ds->conf);
		if (sc->path != NULL)
			return &sc->allow;
	}
	return NULL;
}

/* Set the pointer at off in the daemon's state. */
static void
daemon_set(void *state, size_t off, void *p)
{
	memcpy((char *)state + off, &p, sizeof(p));
}

/* SIGTERM and SIGINT end the loop; SIGHUP is the hup hook's, the table's
 * signals their functions'. */
static void
daemon_signals(struct daemon_run *r)
{
	const struct daemon_signal	*ds = r->dm->signals;
	size_t				 n = 0;
	int				*signos;

	while (ds != NULL && ds[n].signo != 0)
		n++;
	signos = xcalloc(n + 3, sizeof(*signos));
	signos[r->nsigs++] = SIGTERM;
	signos[r->nsigs++] = SIGINT;
	if (r->dm->hup != NULL)
		signos[r->nsigs++] = SIGHUP;
	for (size_t i = 0; i < n; i++)
		signos[r->nsigs++] = ds[i].signo;
	r->sigs = xcalloc(r->nsigs, sizeof(*r->sigs));
	for (size_t i = 0; i < r->nsigs; i++) {
		if ((r->sigs[i] = evsignal_new(r->base, signos[i],
		    daemon_signal, r)) == NULL ||
		    event_add(r->sigs[i], NULL) == -1)
			fatalx("cannot handle signal %d", signos[i]);
	}
	free(signos);
}

/* What runs as root: the state directory, the loop, the sockets, daemon(),
 * the database, then the drop (unless the daemon keeps root). */
/*
 * The loop: nprio priorities (0: libevent's one), and with bg_prio > 0
 * the callbacks at bg_prio or lower one a pass: after each the loop polls
 * again and runs what has become ready at a higher priority first, so a
 * frame that arrives during background work waits for one such callback,
 * not for all that are ready.  NULL when libevent refuses.
 */
struct event_base *
daemon_event_base(int nprio, int bg_prio)
{
	struct event_config	*cfg;
	struct event_base	*base = NULL;

	if ((cfg = event_config_new()) == NULL)
		return NULL;
	if (bg_prio <= 0 ||
	    event_config_set_max_dispatch_interval(cfg, NULL, 1, bg_prio) == 0)
		base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (base != NULL && nprio > 0 &&
	    event_base_priority_init(base, nprio) == -1) {
		event_base_free(base);
		base = NULL;
	}
	return base;
}

static void
daemon_privileged(struct daemon_run *r, const struct daemon_opts *opts)
{
	const struct daemon_main	*dm = r->dm;
	struct cfg_common		*c = r->conf;
	const struct rlimit		 no_core = { 0, 0 };

	if (dm->no_core && setrlimit(RLIMIT_CORE, &no_core) == -1)
		fatal("setrlimit RLIMIT_CORE");
	signal(SIGPIPE, SIG_IGN);
	umask(dm->umask);
	if (dm->init != NULL)
		dm->init(r->state);
	daemon_state_dir(c->state_dir, c->user, c->uid, c->gid);
	if (dm->prepare != NULL)
		dm->prepare(r->state);

	if ((r->base = daemon_event_base(dm->nprio, dm->bg_prio)) == NULL)
		fatalx("cannot create the event loop");
	daemon_set(r->state, dm->base_at, r->base);
	if (dm->loop != NULL)
		dm->loop(r->state);
	if (daemon_listen(r) == -1)
		fatalx("cannot listen on the sockets");
	/* As root, like the sockets: a port below 1024 is the operator's
	 * choice. */
	if (c->metrics_listen != NULL) {
		r->scrape_l.run = r;
		r->scrape_l.ds = &daemon_metrics_sock;
		if ((r->scrape = scrape_listen(r->base, c->metrics_listen,
		    daemon_metrics_allow(dm, c), dm->metrics, r->state,
		    dm->refused != NULL ? daemon_refused : NULL,
		    &r->scrape_l)) == NULL)
			fatalx("cannot listen on metrics.listen %s",
			    c->metrics_listen);
	}
	if (!opts->debug) {
		if (daemon(1, 0) == -1)
			fatal("daemon");
		log_foreground(0);
		if (event_reinit(r->base) == -1)
			fatalx("cannot reinitialise the event loop");
	}

	if (chdir(c->state_dir) == -1)
		fatal("chdir %s", c->state_dir);
	if (dm->open != NULL)
		dm->open(r->state);
	if (dm->db != NULL)
		daemon_chown_db(dm->db, c->state_dir, c->user, c->uid, c->gid);
	if (!dm->keep_root)
		daemon_drop(c->file, c->user, c->uid, c->gid);
}

int
daemon_main(int argc, char *argv[], const struct daemon_main *dm,
    void *state)
{
	struct daemon_opts	 opts;
	struct daemon_run	 r;
	struct yerrs		 errs = { NULL, 0 };
	void			*conf;

	daemon_name = dm->name;
	daemon_conf_file = dm->conf_file;
	daemon_getopt(argc, argv, dm->conf_file, &opts, daemon_usage);
	log_journal_sender(sd_journal_sendv);
	log_init(dm->name, 1, opts.noaction ? 0 : opts.verbose);

	if ((conf = daemon_parse(dm, opts.file, &errs)) == NULL)
		return daemon_config_errors(dm->name, opts.file, &errs);
	yerrs_free(&errs);
	daemon_set(state, dm->conf_at, conf);
	if (((struct cfg_common *)conf)->metrics_listen != NULL &&
	    (dm->metrics == NULL ||
	    daemon_metrics_allow(dm, conf) == NULL)) {
		fprintf(stderr, "%s: %s: metrics: %s\n", dm->name, opts.file,
		    dm->metrics == NULL ? "this daemon keeps no metrics" :
		    "no admin socket to take the allowlist from: "
		    "set metrics.allow");
		daemon_conf_free(dm, conf);
		return 1;
	}
	if (dm->check != NULL && dm->check(state, &opts) == -1) {
		daemon_conf_free(dm, conf);
		return 1;
	}
	if (opts.noaction) {
		printf("configuration OK\n");
		if (dm->unload != NULL)
			dm->unload(state);
		daemon_conf_free(dm, conf);
		return 0;
	}

	memset(&r, 0, sizeof(r));
	r.dm = dm;
	r.state = state;
	r.conf = conf;
	daemon_privileged(&r, &opts);
	daemon_signals(&r);
	if (dm->start != NULL)
		dm->start(state);
	/* Every socket listens (as the daemon's user) and the daemon is
	 * ready for requests: a Type=notify unit is started now, and units
	 * ordered after it may start.  MAINPID: daemon() forked (not -d). */
	daemon_notify("READY=1\nSTATUS=%s: serving on %zu socket%s\n"
	    "MAINPID=%lu", dm->name, r.nls, r.nls == 1 ? "" : "s",
	    (unsigned long)getpid());

	if (event_base_dispatch(r.base) == -1)
		log_warnx("event loop failed");

	if (dm->stop != NULL)
		dm->stop(state);
	scrape_free(r.scrape);
	daemon_unlisten(&r);
	for (size_t i = 0; i < r.nsigs; i++)
		event_free(r.sigs[i]);
	free(r.sigs);
	if (dm->close != NULL)
		dm->close(state);
	if (dm->unload != NULL)
		dm->unload(state);
	daemon_conf_free(dm, conf);
	event_base_free(r.base);
	log_info("stopped");
	return 0;
}
