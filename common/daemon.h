/*
 * daemon.h: what every sbx daemon does between parsing its configuration
 * and entering its event loop: make its state directory, hand its database
 * files to its user, and drop root for good (verified, and checked that it
 * cannot be undone).  launchd-sbx is the one daemon that keeps root.
 * Before that, the start of every main(): the options every daemon takes
 * (-d -f -n -v) and the report of a configuration that did not parse.
 */
#ifndef SBX_DAEMON_H
#define SBX_DAEMON_H

#include <sys/types.h>

struct yerrs;

/* The options every sbx daemon takes: -d (stay in the foreground), -f file,
 * -n (check the configuration and exit), -v (more each time). */
struct daemon_opts {
	const char	*file;
	int		 debug;
	int		 noaction;
	int		 verbose;
};

/* getopt "df:nv" into *opts (file defaulting to default_file); an
 * unknown option or an operand calls usage, which must not return. */
void	daemon_getopt(int argc, char **argv, const char *default_file,
	    struct daemon_opts *opts, void (*usage)(void));
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

#endif
