/*
 * launchd.h: launchd-sbx's structures and the prototypes of its modules.
 * launchd-sbx turns a signed policy into an OCI sandbox, runs the code,
 * enforces the wall clock from outside and cleans up.  It is split along
 * the privilege line: this process, the launcher, runs as its own user
 * and asks the root monitor (sbx-monitor, monitor.h) for every mount,
 * runtime command, spec, cgroup removal and handover (mon_client.c).
 * The invariant everything here serves: nothing runs unless its policy
 * verified, its tier's runtime is the configured one and its image
 * matched its digest; and whatever an execution created (staging, runtime
 * state, cgroups) is gone by the time its result is sent.
 */
#ifndef SBX_LAUNCHD_H
#define SBX_LAUNCHD_H

#include <sys/types.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "frame.h"
#include "peer.h"
#include "sign.h"
#include "trace.h"
#include "launchd-sbx/monitor.h"
#include "launchd-sbx/spec.h"

#include "sbx/v1/admin.pb-c.h"
#include "sbx/v1/envelope.pb-c.h"
#include "sbx/v1/exec.pb-c.h"
#include "sbx/v1/policy.pb-c.h"

#define LAUNCHD_CONF_DEFAULT	"/etc/sbx/launchd-sbx.yaml"
#define LAUNCHD_DB		"launchd.db"
#define LAUNCHD_NTIERS		4	/* indexed by Sbx__V1__Isolation */
#define LAUNCHD_CHECK_SECONDS	5	/* runtime self-check timeout */
/* create/start/delete: the monitor kills one at MON_CMD_SECONDS; this is
 * the launcher's backstop, and its bound on a synchronous wait. */
#define LAUNCHD_CMD_SECONDS	(MON_CMD_SECONDS + 5)
#define LAUNCHD_MONITOR		"sbx-monitor"	/* beside launchd-sbx */
#define LAUNCHD_TEXT_KB_DEFAULT	64
#define LAUNCHD_DATASET_MAX	(256 * 1024 * 1024)
/* sandbox_groups' default: in the range systemd leaves unused
 * (1879048192..2147483647), clear of users, dynamic users and nspawn. */
#define LAUNCHD_GID_FIRST	1879048192
#define LAUNCHD_GID_COUNT	4096

/* Rule ids of launch refusals (Error.rule). */
#define RULE_SIGNATURE		"signature-invalid"
#define RULE_EXPIRED		"policy-expired"
#define RULE_TIER		"tier-unavailable"
#define RULE_IMAGE_UNKNOWN	"image-unknown"
#define RULE_IMAGE_CORRUPT	"image-corrupt"
#define RULE_DATASET		"dataset-unknown"
#define RULE_BAD_REQUEST	"bad-request"
#define RULE_RUNTIME		"runtime-failed"
#define RULE_EGRESS_DOWN	"egress-unavailable"
#define RULE_GATE_DOWN		"gate-unavailable"
#define LAUNCHD_PEER_SECONDS	30	/* egressd and gated replies */
#define LAUNCHD_SCRATCH		"scratch"	/* in the staging dir */
#define LAUNCHD_CA		"ca.pem"	/* in the staging dir */
#define LAUNCHD_EGRESS_SOCK	"egress.sock"	/* in the staging dir */
#define LAUNCHD_BG_NICE		10	/* pool refills, deletes after the result */
#define LAUNCHD_ORPHANS		64	/* unclaimed exits kept (run.c) */
/* POOL_RUN_DIR, POOL_ARGV, POOL_EGRESS_SOCK, POOL_CA: spec.h. */

struct event_base;
struct yerrs;
struct audit;
struct auditq;

/* ---- parse.c ---- */

struct launchd_runtime {
	char			*path;		/* NULL: tier not configured */
	char			**args;		/* global options, before the verb */
	size_t			  nargs;
	enum spec_flavor	  flavor;	/* runsc reads a few fields apart */
	int			  available;	/* passed the start-up check */
	int			  accel;	/* microvm: microvm.h */
	char			 *kernel;	/* microvm: vmlinuz */
	char			 *initrd;	/* microvm: sbx-init's initramfs */
	char			 *fwd;		/* microvm: guestfwd's socat */
};

/* pool: {size: N, keys: [{image, tier, cpus, memory_mb, pids, scratch_mb,
 * size}]}: each key describes the limits of the policies it serves. */
struct launchd_pool_key {
	char			*image;		/* name@sha256:<hex> */
	int			 tier;		/* Sbx__V1__Isolation */
	uint32_t		 cpus_milli;
	uint32_t		 memory_mb;
	uint32_t		 pids;
	uint32_t		 scratch_mb;
	uint32_t		 size;		/* entries kept ready */
};

struct launchd_conf {
	struct cfg_common	 common;	/* no user: the launcher
						 * stays root */
	char			*run_dir;
	char			*monitor;	/* NULL: beside launchd-sbx */
	char			*policy_public_key;
	char			*policy_public_key_previous;
	char			*init;
	char			*cgroup_parent;
	char			*egress_socket;	/* egressd's control socket;
						 * NULL: no egress at all */
	uid_t			 egress_uid;	/* who must listen there */
	char			*gate_socket;	/* gated's release socket;
						 * NULL: nothing released */
	uid_t			 gate_uid;
	uint32_t		 pool_size;	/* default size of a key */
	int			 pool_warm_python;	/* sbx-init -w python3 */
	char			*pool_warm_imports;	/* sbx-init -m; NULL */
	struct launchd_pool_key	*pool_keys;
	size_t			 npool_keys;
	gid_t			 sandbox_gid_first;	/* sandbox_groups */
	uint32_t		 sandbox_gid_count;
	struct launchd_runtime	 runtimes[LAUNCHD_NTIERS];
	struct cfg_sock		 launch;
	struct cfg_sock		 admin;
};

/* The skeleton's parse and free (daemon.h): a struct launchd_conf, NULL
 * after recording every problem in errs. */
void		*parse_launchd(const char *file, struct yerrs *);
void		 parse_launchd_free(void *);
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
	uint64_t	 pooled;		/* launches served by the pool */
	uint64_t	 audit_commits;	/* group commits */
};

struct run;
struct pool;
struct audit_item;
struct image_prep;
struct event;

struct launchd {
	struct launchd_conf	*conf;
	struct sign_trust	 trust;		/* policyd's public keys */
	struct event_base	*base;
	struct audit		*audit;
	struct launchd_metrics	 metrics;
	struct run		*runs;		/* live executions */
	char			*runtime_root;	/* run_dir/runtime */
	struct pool		*pool;
	struct image_prep	*images;	/* verified, failed or preparing */
	/* image.c's "this image is ready (or refused)", set by main() to
	 * continue the launches waiting for it and refill the pool: the
	 * store sits below both and calls neither by name. */
	void			(*image_ready)(struct launchd *, const char *hex);
	/* The audit group commit (record.c): common/auditq.c's writer. */
	struct auditq		*aq;
	int			 stopping;	/* refuse launches, rescans */
	/* ident.c: which sandbox groups are held, and where to look next. */
	uint8_t			*gid_used;
	uint32_t		 gid_next;
	uint32_t		 gid_held;
	int			 debug;		/* -d: the monitor too */
	/* mon_client.c: the monitor's socket and pid, and the exits it
	 * reported that wait for the loop to deliver them. */
	int			 mon_fd;
	pid_t			 mon_pid;
	struct event		*mon_ev;
	struct event		*mon_qev;
	struct mon_exit		*mon_q;
	size_t			 mon_nq;
	size_t			 mon_qcap;
	/* What a child's end (the monitor's MON_EXIT, or one of the
	 * launcher's own) goes to: set by main() to run_child_exited, which
	 * the monitor's client sits below. */
	void			(*child_exited)(struct launchd *, pid_t,
				    int status);
	/* run.c: exits no execution claimed yet -- an init that a one-step
	 * RUN started and that ended before the RUN's own exit told its
	 * pid -- with when they came (a ring; the oldest goes). */
	struct launchd_orphan {
		pid_t		 pid;
		int		 status;
		uint64_t	 ns;
	}			 orphans[LAUNCHD_ORPHANS];
	size_t			 norphan;
};

/*
 * Event priorities: the audit queue's events (common/auditq.c) have the
 * default, LAUNCHD_NPRIO / 2, and the background work (the pool's refills, the host cleanup after a
 * delete: synchronous calls to sbx-monitor, milliseconds each) after
 * everything else, one callback a pass (LAUNCHD_PRIO_BG, see
 * daemon_main's bg_prio): an execution's start, exit or result never
 * waits behind more than one of them.
 */
#define LAUNCHD_NPRIO		4
#define LAUNCHD_PRIO_BG		3

/* ---- control.c ---- */

struct frame_conn;

/* The frame handlers of the launch and admin sockets (arg: the struct
 * launchd). */
void		 control_launch_socket(struct frame_conn *, Sbx__V1__Envelope *,
		    void *);
void		 control_admin_socket(struct frame_conn *, Sbx__V1__Envelope *,
		    void *);
char		*control_metrics(const struct launchd *);

/* ---- record.c: the audit group commit and recorded refusals ---- */

/*
 * Queue an audit event for the next group commit and call cb (ok 1 once
 * it is on disk, 0 if the commit failed) after it.  The event's strings
 * are copied; cb may be NULL.
 */
typedef void	(*record_cb)(struct launchd *, void *arg, int ok);
void		 record_audit(struct launchd *,
		    const Sbx__V1__AuditEvent *, record_cb, void *arg);
int		 record_init(struct launchd *);
/* Commit whatever is queued and run its callbacks now (shutdown). */
void		 record_flush(struct launchd *);
/* The log, for a synchronous use until the loop runs again (a dataset's
 * record, a query, a verify): the writer idle, what is queued committed. */
struct audit	*record_log(struct launchd *);
/* Group commits so far (sbx_launchd_audit_commits_total). */
uint64_t	 record_commits(const struct launchd *);
/* Flush, then stop the writer (the end of main). */
void		 record_free(struct launchd *);
/* Send an ERROR_LAUNCH refusal and record it in the audit log. */
void		 record_refuse(struct launchd *, struct frame_conn *,
		    uint64_t request_id, const char *task_id,
		    const char *execution_id, const char *rule,
		    const char *msg);
/* The same with another error code (ERROR_UNAVAILABLE: a daemon the
 * launch needs is down). */
void		 record_refuse_code(struct launchd *, struct frame_conn *,
		    uint64_t request_id, Sbx__V1__ErrorCode code,
		    const char *task_id, const char *execution_id,
		    const char *rule, const char *msg);

/* ---- image.c ---- */

/*
 * The read-only rootfs of image `ref` (name@sha256:<hex>).  Images are
 * verified and unpacked in child processes (image_scan), never in the
 * loop.  0 with rootfs filled; 1 when the image is still being prepared
 * (run_image_ready is called when it is done; hex filled); or -1 with
 * *rule set to RULE_IMAGE_UNKNOWN, RULE_IMAGE_CORRUPT or RULE_BAD_REQUEST
 * and err filled.
 */
int		 image_rootfs(struct launchd *, const char *ref,
		    char rootfs[PATH_MAX], char hex[65], const char **rule,
		    char *err, size_t errlen);
/* Start preparing every image of the store not yet prepared (or that
 * failed, when retry_failed). */
void		 image_scan(struct launchd *, int retry_failed);
/* SIGCHLD: 1 if pid was an image preparation (then it is handled). */
int		 image_reaped(struct launchd *, pid_t pid, int status);
/* Start-up: remove what a dead instance left of an unpack. */
void		 image_reap_unpacks(struct launchd *);
/* Shutdown: kill and wait for the preparations; free the table. */
void		 image_stop(struct launchd *);
/* The images held: digests (hex) and whether each is unpacked. */
int		 image_list(struct launchd *, Sbx__V1__ImageInfos *out);
void		 image_list_clear(Sbx__V1__ImageInfos *);

/* ---- dataset.c ---- */

int		 dataset_put(struct launchd *, const char *name,
		    const uint8_t *content, size_t len, char *err,
		    size_t errlen);
/* Sorted names; free with strv_free. */
int		 dataset_names(struct launchd *, char ***names, size_t *n);
/* Copy dataset `name` to dir/name, 0444.  -1 with errno ENOENT when the
 * store has no such dataset (err filled either way). */
int		 dataset_stage(struct launchd *, const char *name,
		    const char *dir, char *err, size_t errlen);

/* ---- ident.c ---- */

/*
 * Each sandbox (a cold launch, or a pool entry from its creation) holds a
 * group of sandbox_groups of its own from before its runtime is created
 * until its staging is gone: its processes run with it, its egress socket
 * is root's and that group's (0660), and egressd accepts only that group
 * (or root) from the sandbox's cgroup.  Released groups are reused last.
 */
void		 ident_init(struct launchd *);
void		 ident_free(struct launchd *);
/* 0 with *gid, or -1 when every group of the range is held. */
int		 ident_take(struct launchd *, gid_t *gid);
void		 ident_give(struct launchd *, gid_t gid);
size_t		 ident_held(const struct launchd *);

/* ---- pool.c ---- */

struct pool_entry;

/* Read the configured keys; create what is missing (whenever an image is
 * ready, an entry was taken or one failed). */
void		 pool_start(struct launchd *);
void		 pool_fill(struct launchd *);
/* pool_fill once the loop has written what is ready (a result first). */
void		 pool_fill_soon(struct launchd *);
/*
 * The key of a launch: sha256 of the runtime spec it would have with
 * every per-execution value (ids, hash, staging paths, program) replaced
 * by a placeholder and no annotations, and of its tier, so two launches
 * share a key exactly when their specs differ in nothing but
 * per-execution data.  -1 if no spec.
 */
int		 pool_key(const struct spec_params *, int tier, char key[65]);
/* With a global pool.size and no configured keys, a launch that found
 * no key teaches one: its image, tier and limits get entries from now on
 * (at most 16 keys). */
void		 pool_learn(struct launchd *, const Sbx__V1__Policy *,
		    const char *key);
/* A ready entry for key, taken out of the pool (it is the caller's now,
 * to start once and destroy), or NULL. */
struct pool_entry *pool_take(struct launchd *, const char *key);
/* What the caller needs of a taken entry; pool_entry_free after. */
const char	*pool_entry_id(const struct pool_entry *);
const char	*pool_entry_dir(const struct pool_entry *);
pid_t		 pool_entry_pid(const struct pool_entry *);
/* The entry's sandbox group, which becomes the caller's to give back. */
gid_t		 pool_entry_take_gid(struct pool_entry *);
/* The output pipes' read ends; they become the caller's. */
void		 pool_entry_fds(struct pool_entry *, int *out, int *err);
void		 pool_entry_free(struct pool_entry *);
/* A child's end: 1 if pid was the pool's (then it is handled). */
int		 pool_reaped(struct launchd *, pid_t pid, int status);
size_t		 pool_ready(const struct launchd *);
/* Shutdown: delete every entry. */
void		 pool_stop(struct launchd *);

/* ---- run.c ---- */

/* Start one execution; the reply goes to conn when it ends (or now,
 * with an error, if it cannot start). */
void		 run_launch(struct launchd *, struct frame_conn *,
		    const Sbx__V1__Envelope *req);
/* SIGCHLD: collect the launcher's own children (image preparations; the
 * monitor's end is fatal) and hand each to run_child_exited. */
void		 run_reap_children(struct launchd *);
/* A child has ended -- one of the launcher's, or one of the monitor's
 * (MON_EXIT: a runtime command, a container's init): whichever of image
 * preparations, pool entries and executions it was. */
void		 run_child_exited(struct launchd *, pid_t pid, int status);
/* An image finished preparing: continue the launches waiting for it. */
void		 run_image_ready(struct launchd *, const char *hex);
/* Shutdown: kill and clean up every live execution. */
void		 run_stop_all(struct launchd *);
/* Executions running now (answered ones being cleaned up excluded). */
size_t		 run_count(const struct launchd *);
/* Executions whose runtime delete and host cleanup are still under way
 * (after their result was sent, or about to be). */
size_t		 run_cleaning(const struct launchd *);

/* ---- runtime.c: what the launcher runs and reads on the host ---- */

/* Run a command and wait at most `seconds`; its output goes to /dev/null
 * unless out is given (then its stdout up to outlen-1 bytes).  The exit
 * status as waitpid gives it, or -1 (killed after the timeout, or not
 * started). */
int		 runtime_cmd(char *const argv[], int seconds, char *out,
		    size_t outlen);
#define RUNTIME_ARGV_MAX	32
/* Write a new file, mode 0444.  0 or -1 with errno. */
int		 runtime_write_file(const char *path, const uint8_t *, size_t);
/* One value of a container's cgroup file (ctrl/parent/id/file): the
 * first number, or the one after `key ` when key is given; 0 if none
 * (the monitor opens the directories to reading at the create). */
uint64_t	 runtime_cg_read(const char *parent, const char *id,
		    const char *ctrl, const char *file, const char *key);
/* Self-check each configured runtime (there, executable, runsc with
 * --oci-seccomp, --version); marks it available or not. */
void		 runtime_check(struct launchd *);
/* rm -rf without following symlinks; 0 or -1. */
int		 runtime_rmtree(const char *path);

/* ---- mon_client.c: the root monitor (monitor.h) ---- */

/* Start sbx-monitor (as root, after daemon()) and wait for its MON_READY;
 * fatal when it does not come.  Its socket joins the loop. */
void		 mon_client_start(struct launchd *);
/* Its socket (a ready monitor's) joins the loop: mon_client_start's last
 * step, and a unit test's first. */
void		 mon_client_attach(struct launchd *, int fd);
/* Shutdown: close the socket (the monitor deletes what is left and
 * exits) and wait for it, bounded. */
void		 mon_client_stop(struct launchd *);
/* A child of the launcher's was reaped: 1 if it was the monitor (which
 * is fatal, so it never returns then). */
int		 mon_client_reaped(struct launchd *, pid_t, int status);
/* In a forked child of the launcher's: let go of the socket. */
void		 mon_client_child(struct launchd *);
/*
 * One request (monitor.h's type and body, with nfds descriptors) and
 * its answer: 0 on MON_OK with *value (and *fdout, HANDOVER's
 * descriptor), or -1 on MON_ERR with errno and err set.  A damaged
 * answer, or none, is fatal.  MON_EXIT events met on the way reach
 * child_exited from the loop, after the call.
 */
int		 mon_call(struct launchd *, uint32_t type, const void *body,
		    size_t len, const int *fds, int nfds, int64_t *value,
		    int *fdout, char *err, size_t errlen);
/* The requests, as the calls they stand for.  0 (or what they make) or
 * -1 with errno and err set. */
int		 mon_client_stage(struct launchd *, const char *id,
		    uint32_t scratch_mb, gid_t gid, char *err, size_t errlen);
int		 mon_client_seal(struct launchd *, const char *id, char *err,
		    size_t errlen);
int		 mon_client_spec(struct launchd *, const struct mon_spec *,
		    char *err, size_t errlen);
/* The command's pid (its MON_EXIT follows), run at niceness nice (0, or
 * LAUNCHD_BG_NICE for work no launch waits for); fd1 and fd2 (CREATE, or
 * -1) become its stdout and stderr. */
pid_t		 mon_client_cmd(struct launchd *, const char *id, int tier,
		    int verb, int nice, int fd1, int fd2, char *err,
		    size_t errlen);
/* Not sent (-1, ESRCH) when the pid's exit has come already. */
int		 mon_client_sigkill(struct launchd *, pid_t);
int		 mon_client_renice(struct launchd *, pid_t);
/* The declared outputs handed to gated's user; a read-only descriptor of
 * the scratch directory, or -1 (errno EBUSY: a process of the container
 * still runs, and HANDOVER may come again). */
int		 mon_client_handover(struct launchd *, const char *id,
		    char *const *names, size_t n, char *err, size_t errlen);
/* These two log what went wrong themselves. */
int		 mon_client_cg_remove(struct launchd *, const char *id);
int		 mon_client_unstage(struct launchd *, const char *id);
/* Wait at most `seconds` for pid's MON_EXIT: its status, or -1. */
int		 mon_wait_exit(struct launchd *, pid_t, int seconds);

/* ---- client.c: one request to a peer daemon ---- */

struct frame_client;
/* Connect to the peer at path (which must run as uid), send env (with fd
 * unless -1) and have cb(arg) called with its reply or why not, within
 * LAUNCHD_PEER_SECONDS; the connection goes to *slot.  0, or -1 with err
 * (*slot NULL). */
int		 client_call(struct launchd *, struct frame_client **slot,
		    const char *path, uid_t uid, frame_reply_handler cb,
		    void *arg, const Sbx__V1__Envelope *env, int fd, char *err,
		    size_t errlen);
/* An error reply's words, or why there was none. */
const char	*client_why(const Sbx__V1__Envelope *rep, const char *why);

/* ---- egress_client.c: egressd ---- */

/* Bind and listen on an execution's egress channel socket at path (mode
 * 0 until the monitor's SEAL makes it root's and the sandbox group's,
 * 0660).  The descriptor, or -1 with err. */
int		 egress_client_listen(const char *path, char *err,
		    size_t errlen);
/* Ask egressd to serve the channel fd under the signed policy (and the
 * execution's traceparent, "" for none), for the sandbox's group and
 * cgroup; cb gets the reply (egress_client_opened). */
int		 egress_client_open(struct launchd *, struct frame_client **slot,
		    int fd, const Sbx__V1__SignedPolicy *,
		    const char *traceparent, gid_t gid,
		    const char *cgroup, frame_reply_handler cb, void *arg,
		    char *err, size_t errlen);
/* The EgressOpened in a reply, or NULL with err saying why not. */
const Sbx__V1__EgressOpened *egress_client_opened(const Sbx__V1__Envelope *,
		    const char *why, char *err, size_t errlen);
/* Close an execution's channel; cb gets the reply (egress_client_usage). */
int		 egress_client_close(struct launchd *, struct frame_client **slot,
		    const char *execution_id, frame_reply_handler cb, void *arg,
		    char *err, size_t errlen);
/* The EgressUsage in a reply, or NULL with err saying why not. */
const Sbx__V1__EgressUsage *egress_client_usage(const Sbx__V1__Envelope *,
		    const char *why, char *err, size_t errlen);
/* Shutdown: the same without the loop, two seconds at most; the reply to
 * free, or NULL. */
Sbx__V1__Envelope *egress_client_close_sync(struct launchd *,
		    const char *execution_id);

/* ---- gate_client.c: gated ---- */

/* Hand container id's scratch directory (a descriptor the monitor gives,
 * its declared outputs handed over to gated's user; scratch, when not -1,
 * is one HANDOVER gave already, closed here) to gated with the
 * declared outputs and the raw stdout and stderr; cb gets the reply
 * (gate_client_result); traceparent labels gated's records.  0, or -1
 * with err. */
int		 gate_client_release(struct launchd *,
		    struct frame_client **slot, const char *id, int scratch,
		    const Sbx__V1__SignedPolicy *, const char *traceparent,
		    char *const *outputs,
		    size_t noutputs, const uint8_t *out, size_t outlen,
		    const uint8_t *errb, size_t errlen_b,
		    frame_reply_handler cb, void *arg, char *err,
		    size_t errlen);
/* A copy of the ReleaseResult in a reply (free it), or NULL with err. */
Sbx__V1__ReleaseResult *gate_client_result(const Sbx__V1__Envelope *,
		    const char *why, char *err, size_t errlen);

#endif
