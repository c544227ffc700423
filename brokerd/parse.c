/*
 * parse.c: brokerd.yaml into struct brokerd_conf, with every check, as a
 * table common/config.c reads.  Every problem is recorded (never only the
 * first) as file:line:col: key: message, unknown keys are errors, and user
 * and group names are resolved here so a typo is reported at start-up
 * rather than when egressd first asks for a credential.  Relative paths
 * are relative to the config file's directory.  The credential socket
 * must name at least one peer and must not be the admin socket: the two
 * answer different people.
 */
#include <sys/types.h>

#include "config.h"
#include "yaml.h"
#include "brokerd/brokerd.h"

#define MINT_TTL_MIN		30
#define MINT_TTL_MAX		86400
#define FRAME_KB_DEFAULT	64
#define FRAME_KB_MAX		1024

static const struct cfg_key bparse_sockets[] = {
	CFG_SOCK("credential", 0, struct brokerd_conf, credential),
	CFG_SOCK("admin", 0, struct brokerd_conf, admin),
	CFG_END
};

static const struct cfg_key bparse_keys[] = {
	CFG_COMMON_USER,
	CFG_COMMON_STATE_DIR,
	CFG_PATHKEY("master_key", 0, struct brokerd_conf, master_key,
	    "$state_dir/master.key"),
	CFG_PATHKEY("policy_public_key", CFG_REQUIRED, struct brokerd_conf,
	    policy_public_key, NULL),
	CFG_PATHKEY("policy_public_key_previous", 0, struct brokerd_conf,
	    policy_public_key_previous, NULL),
	CFG_U32("mint_ttl", 0, struct brokerd_conf, mint_ttl,
	    BROKERD_MINT_TTL, MINT_TTL_MIN, MINT_TTL_MAX),
	CFG_COMMON_MAX_FRAME_KB(FRAME_KB_DEFAULT, 1, FRAME_KB_MAX),
	CFG_SUBMAP("sockets", CFG_REQUIRED, bparse_sockets),
	CFG_COMMON_METRICS,
	CFG_END
};

const struct cfg_table bparse_table = {
	"brokerd.yaml", sizeof(struct brokerd_conf), bparse_keys, NULL
};
