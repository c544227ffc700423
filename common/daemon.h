/*
 * daemon.h: the skeleton of every sbx daemon's main() (Postfix's
 * single_server_main, OpenBSD's daemon shape), and the pieces it is made
 * of.  A daemon describes itself in a struct daemon_main: its name and
 * default file, its parse function, a table of sockets with their frame
 * handlers, and hooks for what it does between the steps; daemon_main()
 * then takes the options (-d -f -n -v, --help, --version), parses,
 * answers -n, does what needs root, listens (and on metrics.listen, the
 * opt-in scrape port), daemonises, drops root for good (verified, and
 * checked that it cannot be undone), tells systemd READY=1 (sd_notify,
 * when NOTIFY_SOCKET is set), runs the loop until SIGTERM or SIGINT
 * (STOPPING=1), and tears down.  launchd-sbx is the one daemon that keeps
 * root.
 */
#ifndef SBX_DAEMON_H
#define SBX_DAEMON_H

#include <sys/types.h>
#include <stddef.h>

#include "frame.h"

struct cfg_table;
struct yerrs;
struct ucred;

/* The options every sbx daemon takes: -d (stay in the foreground), -f file,
 * -n (check the configuration and exit), -v (more each time). */
struct daemon_opts {
	const char	*file;
	int		 debug;
	int		 noaction;
	int		 verbose;
};

/* usage()'s status for a bad option or operand (0 for --help). */
#define DAEMON_EXIT_USAGE	2

/* getopt "df:nv" into *opts (file defaulting to default_file); --help
 * calls usage(0), --version prints "NAME VERSION" and exits 0, an unknown
 * option or an operand calls usage(DAEMON_EXIT_USAGE).  usage must not
 * return. */
void	daemon_getopt(int argc, char **argv, const char *default_file,
	    struct daemon_opts *opts, void (*usage)(int));
/* Every configuration error on stderr, one a line, then
 * "name: file: N error(s)"; frees errs.  Returns 1, main's exit status. */
int	daemon_config_errors(const char *name, const char *file,
	    struct yerrs *errs);
/* 1 when running as root. */
int	daemon_root(void);
/* mkdir 0700 (existing is fine; must be a directory); as root with a user,
 * chown it to that user.  Fatal on error. */
void	daemon_state_dir(const char *dir, const char *user, uid_t, gid_t);
/* As root with a user: chown db, db-wal and db-shm (relative to the
 * current directory, the state directory) to the user. */
void	daemon_chown_db(const char *db, const char *state_dir,
	    const char *user, uid_t, gid_t);
/* As root with a user: setgroups/setresgid/setresuid, then verify that
 * every id changed and that root cannot be regained.  As root without a
 * user: a warning naming conffile.  Not root: nothing. */
void	daemon_drop(const char *conffile, const char *user, uid_t, gid_t);

/* One socket the skeleton listens on, from sockets.<name> of the
 * configuration; a table of them ends with name NULL. */
struct daemon_sock {
	const char	*name;		/* "release": logs and refusals */
	size_t		 conf;		/* offsetof its struct cfg_sock */
	frame_handler	 handler;
	void		*arg;		/* NULL: the daemon's state */
	int		 idle_timeout;	/* seconds; 0: frame.c's default */
	int		 pass_fds;	/* takes a descriptor with a frame */
	const uint32_t	*serves;	/* body fields it serves, 0-ended */
};

/* A signal besides SIGTERM, SIGINT and SIGHUP (launchd-sbx's SIGCHLD), and
 * what it runs, given the daemon's state; a table of them ends with signo
 * 0. */
struct daemon_signal {
	int		 signo;
	void		 (*fn)(void *);
};

/* A socket whose cfg_sock has no path (an optional one left out) is not
 * opened.  Every socket's frames are capped at the configuration's
 * max_frame_kb (struct cfg_common, the first member of the conf). */
struct daemon_main {
	const char		*name;		/* "gated": usage, logs, errors */
	const char		*conf_file;	/* default for -f */
	const char		*db;		/* in state_dir, handed to the
						 * user before the drop; NULL */
	mode_t			 umask;
	int			 no_core;	/* secrets in memory: no core */
	int			 keep_root;	/* no drop (launchd-sbx, which
						 * runs the OCI runtime) */
	int			 nprio;		/* the loop's event priorities;
						 * 0: libevent's one */
	int			 bg_prio;	/* > 0: callbacks at this
						 * priority or lower run
						 * one a pass */
	/* Where the skeleton puts the conf and the event base it makes:
	 * offsetof the two pointers in the daemon's state. */
	size_t			 conf_at;
	size_t			 base_at;
	/* The configuration: a table cfg_parse reads, or (config NULL)
	 * the daemon's own parse and free. */
	const struct cfg_table	*config;
	void			*(*parse)(const char *file, struct yerrs *);
	void			 (*conf_free)(void *conf);
	const struct daemon_sock *socks;
	const struct daemon_signal *signals;	/* may be NULL */
	/* The metrics text (Prometheus format, malloc'd) that the admin
	 * socket answers, for the opt-in scrape listener (metrics.listen,
	 * common/scrape.c); NULL: the daemon keeps no metrics. */
	char			*(*metrics)(void *state);
	/* A peer refused at a socket's check (frame.h's refused); the
	 * scrape listener's refusals come as sock "metrics". */
	void			 (*refused)(void *state, const char *sock,
				    const struct ucred *, const char *why);
	/* Send every reply held back, before the frame code answers a
	 * request itself (frame.h's flush), given a socket's handler arg. */
	void			 (*flush)(void *arg);
	/*
	 * Hooks, each given the daemon's state, each may be NULL.  check:
	 * after the parse, with -n too: what must hold for the
	 * configuration to be OK; -1 (having said why on stderr) exits 1.
	 * init: as root, before the state directory (libraries, keys to
	 * read).  prepare: as root, the state directory made (files in it,
	 * other directories).  loop: the event loop made, before the
	 * sockets: the daemon's own events.  open: as root, after daemon()
	 * and chdir to the state directory (the database).  start: after
	 * the drop, before the loop.  hup: SIGHUP (not caught when NULL).
	 * stop: the loop has ended, the sockets are still open.  close: the
	 * sockets closed; what open made.  unload: what a good check made,
	 * last before the conf is freed, after -n too.
	 */
	int			 (*check)(void *, const struct daemon_opts *);
	void			 (*init)(void *);
	void			 (*prepare)(void *);
	void			 (*loop)(void *);
	void			 (*open)(void *);
	void			 (*start)(void *);
	void			 (*hup)(void *);
	void			 (*stop)(void *);
	void			 (*close)(void *);
	void			 (*unload)(void *);
};

/* main() of a daemon: state is its zeroed state struct.  Returns main's
 * exit status. */
int	daemon_main(int argc, char *argv[], const struct daemon_main *,
	    void *state);
/* The loop daemon_main makes (nprio, bg_prio as in struct daemon_main). */
struct event_base *daemon_event_base(int nprio, int bg_prio);

#endif
