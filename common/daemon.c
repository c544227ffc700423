/*
 * daemon.c: state directory, database ownership and the privilege drop
 * shared by every daemon that does not need root (daemon.h).  A drop that
 * did not take, or that could be undone, is fatal: a daemon that meant to
 * run as its own user must never go on as root.  The options and the
 * configuration error report are here too, so that every daemon is started
 * and says what is wrong with its configuration in the same words.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <unistd.h>

#include "daemon.h"
#include "frame.h"
#include "log.h"
#include "yaml.h"

void
daemon_getopt(int argc, char **argv, const char *default_file,
    struct daemon_opts *opts, void (*usage)(void))
{
	int	 ch;

	opts->file = default_file;
	opts->debug = opts->noaction = opts->verbose = 0;
	while ((ch = getopt(argc, argv, "df:nv")) != -1) {
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
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
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
