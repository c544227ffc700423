/*
 * parse.c: gated.yaml into struct gated_conf, with every check, as a
 * table common/config.c reads.  Every problem is recorded (never only the
 * first) as file:line:col: key: message, unknown keys are errors, and user
 * and group names are resolved here so a typo is reported at start-up
 * rather than when launchd-sbx first hands over a directory.  Relative
 * paths are relative to the config file's directory.  The release socket
 * must name at least one peer (in production root, for launchd-sbx) and
 * must not be the admin socket.
 */
#include <sys/types.h>

#include "config.h"
#include "yaml.h"
#include "gated/gated.h"

/* A release request carries stdout and stderr as captured. */
#define FRAME_KB_DEFAULT	8192
#define FRAME_KB_MIN		64
#define FRAME_KB_MAX		65536

static const struct cfg_key gparse_sockets[] = {
	CFG_SOCK("release", CFG_REQUIRED, struct gated_conf, release),
	/* The admin socket (audit, metrics) is optional. */
	CFG_SOCK("admin", CFG_OPTIONAL, struct gated_conf, admin),
	CFG_END
};

static const struct cfg_key gparse_keys[] = {
	CFG_COMMON_USER,
	CFG_COMMON_STATE_DIR,
	CFG_PATHKEY("store_dir", 0, struct gated_conf, store_dir,
	    "$state_dir/store"),
	CFG_PATHKEY("policy_public_key", CFG_REQUIRED, struct gated_conf,
	    policy_public_key, NULL),
	CFG_PATHKEY("policy_public_key_previous", 0, struct gated_conf,
	    policy_public_key_previous, NULL),
	/* gated-unpack, which reads archives (gated(8)); default: the one
	 * installed beside gated. */
	CFG_PATHKEY("archive_reader", 0, struct gated_conf, archive_reader,
	    NULL),
	CFG_U32("archive_timeout", 0, struct gated_conf, archive_timeout,
	    INSPECT_TIMEOUT_DEFAULT, 1, 3600),
	CFG_COMMON_MAX_FRAME_KB(FRAME_KB_DEFAULT, FRAME_KB_MIN, FRAME_KB_MAX),
	CFG_SUBMAP("sockets", CFG_REQUIRED, gparse_sockets),
	CFG_COMMON_METRICS,
	CFG_END
};

const struct cfg_table gparse_table = {
	"gated.yaml", sizeof(struct gated_conf), gparse_keys, NULL
};
