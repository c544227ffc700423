/*
 * parse.c: approvald.yaml into struct approvald_conf, with every check, as
 * a table common/config.c reads.  Every problem is recorded (never only
 * the first) as file:line:col: key: message, unknown keys are errors, and
 * user and group names are resolved here so a typo is reported at
 * start-up rather than when the first request or approver arrives.
 * Relative paths are relative to the config file's directory.  The two
 * sockets must differ: policyd submits on one, people decide on the
 * other, and neither may stand in for the other.
 */
#include <sys/types.h>

#include <stdlib.h>

#include "config.h"
#include "util.h"
#include "yaml.h"
#include "approvald/approvald.h"

#define FRAME_KB_DEFAULT	1024
#define FRAME_KB_MAX		4096
#define POLICYD_TIMEOUT_DEFAULT	30

/* approvald's own user: a name, since its group is needed too. */
static void
aparse_user(struct ydoc *doc, const struct ynode *n, const char *key,
    void *conf)
{
	struct cfg_common	*c = conf;
	const char		*s;

	if (n == NULL || cfg_uid(doc, n, key, &c->uid, &c->gid) == -1)
		return;
	if (c->gid == (gid_t)-1) {
		yerr(doc, n, key, "give a user name, not a number: its group "
		    "is needed too");
		return;
	}
	if (yget_str(doc, n, key, &s) == 0)
		c->user = xstrdup(s);
}

/* policyd: {socket: PATH, user: sbx-policy, timeout: 30}.  user is who
 * must be listening on the socket (SO_PEERCRED, on every connect). */
static const struct cfg_key aparse_policyd[] = {
	CFG_PATHKEY("socket", CFG_REQUIRED, struct approvald_conf,
	    policyd_socket, NULL),
	CFG_KEY("user", CFG_UID, CFG_REQUIRED, struct approvald_conf,
	    policyd_uid, (uid_t)-1, 0, 0),
	CFG_U32("timeout", 0, struct approvald_conf, policyd_timeout,
	    POLICYD_TIMEOUT_DEFAULT, 1, 3600),
	CFG_END
};

static const struct cfg_key aparse_sockets[] = {
	CFG_SOCK("submit", 0, struct approvald_conf, submit),
	CFG_SOCK("console", 0, struct approvald_conf, console),
	CFG_END
};

static const struct cfg_key aparse_keys[] = {
	CFG_OWN("user", 0, aparse_user, NULL),
	CFG_COMMON_STATE_DIR,
	CFG_COMMON_MAX_FRAME_KB(FRAME_KB_DEFAULT, 1, FRAME_KB_MAX),
	CFG_SUBMAP("policyd", CFG_REQUIRED, aparse_policyd),
	CFG_SUBMAP("sockets", CFG_REQUIRED, aparse_sockets),
	CFG_END
};

const struct cfg_table aparse_table = {
	"approvald.yaml", sizeof(struct approvald_conf), aparse_keys, NULL
};
