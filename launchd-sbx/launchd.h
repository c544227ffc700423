/*
 * launchd.h: launchd-sbx's structures and the prototypes of its modules.
 * launchd-sbx is the only root daemon: it turns a signed policy into an OCI
 * sandbox, runs the code, enforces the wall clock from outside and cleans
 * up.  The invariant everything here serves: nothing runs unless its
 * policy verified, its tier's runtime is the configured one and its image
 * matched its digest; and whatever an execution created (staging, runtime
 * state, cgroups) is gone by the time its result is sent.
 */
#ifndef SBX_LAUNCHD_H
#define SBX_LAUNCHD_H

#include <sys/types.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "peer.h"
#include "launchd-sbx/spec.h"

#include "sbx/v1/admin.pb-c.h"
#include "sbx/v1/envelope.pb-c.h"
#include "sbx/v1/exec.pb-c.h"
#include "sbx/v1/policy.pb-c.h"

#define LAUNCHD_CONF_DEFAULT	"/etc/sbx/launchd-sbx.yaml"
#define LAUNCHD_DB		"launchd.db"
#define LAUNCHD_NTIERS		4	/* indexed by Sbx__V1__Isolation */
#define LAUNCHD_CHECK_SECONDS	5	/* runtime self-check timeout */
#define LAUNCHD_CMD_SECONDS	30	/* create/start/delete timeout */
#define LAUNCHD_TEXT_KB_DEFAULT	64
#define LAUNCHD_DATASET_MAX	(256 * 1024 * 1024)

/* Rule ids of launch refusals (Error.rule). */
#define RULE_SIGNATURE		"signature-invalid"
#define RULE_EXPIRED		"policy-expired"
#define RULE_TIER		"tier-unavailable"
#define RULE_IMAGE_UNKNOWN	"image-unknown"
#define RULE_IMAGE_CORRUPT	"image-corrupt"
#define RULE_DATASET		"dataset-unknown"
#define RULE_BAD_REQUEST	"bad-request"
#define RULE_RUNTIME		"runtime-failed"

struct event_base;
struct yerrs;
struct audit;

/* ---- parse.c ---- */

struct launchd_sock_conf {
	char			*path;
	mode_t			 mode;
	char			*group_name;
	gid_t			 group;		/* (gid_t)-1 when unset */
	struct peer_allow	 allow;
};

struct launchd_runtime {
	char			*path;		/* NULL: tier not configured */
	char			**args;		/* global options, before the verb */
	size_t			  nargs;
	enum spec_flavor	  flavor;	/* runsc reads a few fields apart */
	int			  available;	/* passed the start-up check */
};

struct launchd_conf {
	char			*file;
	char			*dir;
	char			*state_dir;
	char			*run_dir;
	char			*policy_public_key;
	char			*init;
	char			*cgroup_parent;
	char			*egress_socket;	/* NULL: no egress */
	uint32_t		 pool_size;
	uint32_t		 max_frame_kb;
	struct launchd_runtime	 runtimes[LAUNCHD_NTIERS];
	struct launchd_sock_conf launch;
	struct launchd_sock_conf admin;
};

/* Parse and check a config file; every problem goes to errs.  NULL if
 * there was any. */
struct launchd_conf *parse_launchd(const char *file, struct yerrs *);
void		 parse_launchd_free(struct launchd_conf *);
/* The config name of a tier ("container"), or NULL. */
const char	*parse_tier_name(int tier);

/* ---- launchd.c ---- */

struct launchd_metrics {
	uint64_t	 launches;
	uint64_t	 refused;
	uint64_t	 completed;
	uint64_t	 wall_kills;
	uint64_t	 memory_kills;
	uint64_t	 pids_hits;
};

struct run;

struct launchd {
	struct launchd_conf	*conf;
	unsigned char		 pk[32];	/* policyd's public key */
	struct event_base	*base;
	struct control		*ctl;
	struct audit		*audit;
	struct launchd_metrics	 metrics;
	struct run		*runs;		/* live executions */
	char			*runtime_root;	/* run_dir/runtime */
};

/* ---- control.c ---- */

struct control;
struct frame_conn;

struct control	*control_start(struct launchd *);
void		 control_stop(struct control *);
/* Send an ERROR_LAUNCH refusal and record it in the audit log. */
void		 control_refuse(struct launchd *, struct frame_conn *,
		    uint64_t request_id, const char *task_id,
		    const char *execution_id, const char *rule,
		    const char *msg);
char		*control_metrics(const struct launchd *);

/* ---- image.c ---- */

/*
 * The read-only rootfs of image `ref` (name@sha256:<hex>): verified and
 * unpacked on first use.  0 with rootfs filled, or -1 with *rule set to
 * RULE_IMAGE_UNKNOWN or RULE_IMAGE_CORRUPT and err filled.
 */
int		 image_rootfs(struct launchd *, const char *ref,
		    char rootfs[PATH_MAX], const char **rule, char *err,
		    size_t errlen);
/* The images held: digests (hex) and whether each is unpacked. */
int		 image_list(struct launchd *, Sbx__V1__ImageInfos *out);
void		 image_list_clear(Sbx__V1__ImageInfos *);

/* ---- dataset.c ---- */

int		 dataset_put(struct launchd *, const char *name,
		    const uint8_t *content, size_t len, char *err,
		    size_t errlen);
/* Sorted names; free with dataset_names_free. */
int		 dataset_names(struct launchd *, char ***names, size_t *n);
void		 dataset_names_free(char **, size_t);
/* Copy dataset `name` to dir/name, 0444.  -1 with errno ENOENT when the
 * store has no such dataset (err filled either way). */
int		 dataset_stage(struct launchd *, const char *name,
		    const char *dir, char *err, size_t errlen);

/* ---- run.c ---- */

/* Run a command and wait at most `seconds`; its output goes to /dev/null
 * unless out is given (then its stdout up to outlen-1 bytes).  The exit
 * status as waitpid gives it, or -1 (killed after the timeout, or not
 * started). */
int		 run_cmd(char *const argv[], int seconds, char *out,
		    size_t outlen);
/* Start one execution; the reply goes to conn when it ends (or now,
 * with an error, if it cannot start). */
void		 run_launch(struct launchd *, struct frame_conn *,
		    const Sbx__V1__Envelope *req);
/* SIGCHLD: collect whichever executions ended. */
void		 run_reap_children(struct launchd *);
/* Start-up: remove every container, staging directory and cgroup a
 * previous instance left. */
void		 run_reap_leftovers(struct launchd *);
/* Shutdown: kill and clean up every live execution. */
void		 run_stop_all(struct launchd *);
/* Self-check each configured runtime; marks it available or not. */
void		 run_check_runtimes(struct launchd *);
/* Executions running now. */
size_t		 run_count(const struct launchd *);
/* rm -rf without following symlinks; 0 or -1. */
int		 run_rmtree(const char *path);

#endif
