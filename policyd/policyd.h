/*
 * policyd.h: policyd's structures and the prototypes of its modules.
 * policyd turns a task into a compiled, canonical, hashed and signed
 * policy.  The one invariant everything here serves: compilation only ever
 * removes capabilities from the template, and no reply acknowledges an
 * execution before its record and audit event are on disk.
 *
 * The sections below follow the files' layers from the bottom up: a file
 * calls only files of the sections before its own (tests/layers.py checks
 * that the calls between files form no cycle), and policyd.c, main, is
 * on top: control.c; capability.c and launch.c; commit.c; compile.c;
 * rollout.c; entitle.c, store.c, template.c and parse.c.
 */
#ifndef SBX_POLICYD_H
#define SBX_POLICYD_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "peer.h"
#include "pg.h"
#include "policy.h"
#include "sign.h"
#include "trace.h"

#include "sbx/v1/admin.pb-c.h"
#include "sbx/v1/capability.pb-c.h"
#include "sbx/v1/envelope.pb-c.h"
#include "sbx/v1/task.pb-c.h"

#define POLICYD_CONF_DEFAULT	"/etc/sbx/policyd.yaml"
#define POLICYD_DB		"policyd.db"
#define POLICYD_USER_ALL	"*"	/* entitlement row for every user */

struct sqlite3;
struct audit;
struct event_base;
struct frame_conn;
struct yerrs;

/* ---- parse.c ---- */

struct policyd_task_type {
	char		*type;
	char		*template;
	uint32_t	 version;	/* 0: the highest loaded; a rollout's
					 * stable version */
	uint32_t	 canary;	/* 0: no rollout (rollout.c) */
	uint32_t	 percent;	/* of new tasks on the canary */
	int		 line, col;	/* where the entry is, for messages */
};

/*
 * An orchestrators: entry: a user or a group of the orchestrator socket's
 * peers and the tenants it may act for ("*": every tenant).
 */
struct policyd_orch {
	struct peer_allow	 who;		/* one uid or one gid */
	char			*name;		/* "user orch-acme", for logs */
	char			**tenants;
	size_t			  ntenants;
	int			  all;		/* tenants names "*" */
};

struct policyd_conf {
	struct cfg_common	 common;	/* file, user, state_dir, ... */
	char			*templates;
	int			 templates_line, templates_col;
	struct policyd_task_type *types;
	size_t			 ntypes;
	char			*signing_key;
	char			*public_key;
	char			*previous_public_key;
	uint32_t		 policy_ttl;
	struct cfg_sock		 orch;
	struct cfg_sock		 admin;
	char			*launchd_socket;	/* NULL: run unavailable */
	uid_t			 launchd_uid;	/* who must listen there */
	uint32_t		 launchd_grace;	/* s past wall_seconds */
	struct cfg_sock		 approvals;	/* path NULL: no socket */
	char			*approvald_socket;	/* NULL: no approver */
	uid_t			 approvald_uid;	/* who must listen there */
	uint32_t		 review_denials;	/* 0: never (store.c) */
	struct pg_store		 store;		/* backend; never logged */
	uint32_t		 roll_threshold;	/* thousandths; 0: never */
	uint32_t		 roll_min_exec;	/* each side, before a halt */
	/* orchestrators: (orch.c); unset: every peer of the orchestrator
	 * socket acts for every tenant. */
	int			 orchs_set;
	struct policyd_orch	*orchs;
	size_t			 norchs;
};

#define LAUNCHD_GRACE_DEFAULT	120
#define REVIEW_DENIALS_DEFAULT	5
#define ROLL_THRESHOLD_DEFAULT	200	/* 0.2 */
#define ROLL_MIN_EXEC_DEFAULT	5

/* The skeleton's parse and free (daemon.h): a struct policyd_conf, NULL
 * after recording every problem in errs. */
void		*parse_config(const char *file, struct yerrs *);
void		 parse_config_free(void *);

/* ---- orch.c: orchestrators scoped to tenants ---- */

#define RULE_TENANT_NOT_ALLOWED	"tenant-not-allowed"

/* What one orchestrator socket peer may act for: the union of the
 * tenants of every entry naming its uid, its primary gid or one of its
 * supplementary gids. */
struct orch_scope {
	int		  set;		/* orchestrators: configured */
	int		  all;		/* an entry names "*" */
	int		  bound;	/* some entry names the peer */
	const char	**tenants;	/* into the conf; may repeat */
	size_t		  ntenants;
};

/* The scope of the peer at the other end of fd (its credentials as the
 * kernel captured them at connect()).  Credentials that cannot be read
 * match no entry. */
void		 orch_scope_of(const struct policyd_conf *, int fd,
		    struct orch_scope *);
void		 orch_scope_clear(struct orch_scope *);
/* 1 if the scope lets its peer act for tenant, else 0.  Unset: 1. */
int		 orch_may(const struct orch_scope *, const char *tenant);

/* ---- template.c ---- */

struct tmpl {
	char		*name;
	uint32_t	 version;
	char		*file;
	char		 hash[POLICY_HASH_HEX];	/* of the template as written */
	Sbx__V1__Policy	*policy;		/* normalised */
	uint8_t		*packed;		/* policy, packed */
	size_t		 packedlen;
	int		 takes_datasets;	/* has a ${task.dataset_ref} input */
};

struct tmpl_active {
	char		*type;
	struct tmpl	*tmpl;
};

struct tmpl_registry {
	struct tmpl	**t;		/* sorted by name, then version */
	size_t		  n;
	struct tmpl_active *active;	/* sorted by type */
	size_t		  nactive;
};

/* Load every *.yaml in conf->templates and bind conf's task types.  NULL
 * after recording every error in errs. */
struct tmpl_registry *template_load(const struct policyd_conf *,
		    struct yerrs *);
struct tmpl_registry *template_registry_new(void);
/* Add a parsed template (ownership passes); -1 if name@version exists. */
int		 template_registry_add(struct tmpl_registry *,
		    Sbx__V1__Policy *, const char *file);
/* Bind a task type; version 0 means the highest.  -1 if not loaded. */
int		 template_registry_activate(struct tmpl_registry *,
		    const char *type, const char *name, uint32_t version);
void		 template_registry_free(struct tmpl_registry *);
const struct tmpl *template_active(const struct tmpl_registry *,
		    const char *type);
/* version 0: the highest loaded. */
const struct tmpl *template_find(const struct tmpl_registry *,
		    const char *name, uint32_t version);
/* Task types bound to t (malloc'd array of pointers into the registry). */
size_t		 template_active_for(const struct tmpl_registry *,
		    const struct tmpl *, const char ***out);
/* The -n -v listing. */
void		 template_print(const struct tmpl_registry *);

/* ---- fleet.c: what a fleet's replicas share, in PostgreSQL ---- */

struct fleet;

/* What fleet_reserve() found and did. */
struct fleet_res {
	char	 tenant[129];	/* the task's binding */
	char	 user[129];
	char	 type[129];
	int64_t	 executions;	/* after this one, if reserved */
	uint64_t egress_used;	/* by the task's runs before this one */
};

#define FLEET_RESERVED	1
#define FLEET_EXHAUSTED	2
#define FLEET_MISMATCH	3

#define RULE_STORE_UNAVAILABLE	"store-unavailable"

/* Connects on first use, and again after a failure. */
struct fleet	*fleet_open(const struct pg_store *);
void		 fleet_close(struct fleet *);
const char	*fleet_where_str(const struct fleet *);
/*
 * Bind task t (first use) and count one execution against cap, and with
 * budget >= 0 grant the run budget less what the task's runs used, in one
 * committed transaction.  FLEET_RESERVED, FLEET_EXHAUSTED (out->executions
 * is the count), FLEET_MISMATCH (out names the binding), or -1 with err:
 * nothing reserved, or not known to be.
 */
int		 fleet_reserve(struct fleet *, const Sbx__V1__Task *t,
		    const char *execution_id, const char *host, uint32_t cap,
		    int64_t budget, struct fleet_res *out, char *err,
		    size_t errlen);
/* A run's spend, now known.  0 or -1 (logged; the run stays counted as
 * all it was granted). */
int		 fleet_spent(struct fleet *, const char *execution_id,
		    uint64_t spent);
/* A grant (dataset, or an AllowRule's packed bytes), committed. */
int		 fleet_grant_put(struct fleet *, const char *task_id,
		    const char *request_id, const char *dataset,
		    const uint8_t *rule, size_t len, const char *host,
		    char *err, size_t errlen);
/* fn(arg, dataset ("" for a rule), rule, len) for each grant of task_id;
 * fn's nonzero stops.  0 or -1 with err. */
int		 fleet_grants(struct fleet *, const char *task_id,
		    int (*fn)(void *, const char *, const uint8_t *, size_t),
		    void *arg, char *err, size_t errlen);

/* A capability request as the fleet holds it (sbx_cap_requests). */
struct fleet_req {
	char	 task_id[129];
	char	 template[160];
	int	 status;
	char	 reason[1024];
	char	 approver[129];
	int64_t	 decided_at;
	char	 hash[65];
	uint8_t	*body;		/* the packed request; malloc'd */
	size_t	 body_len;
};

/* A request policyd recorded, for every replica.  0 or -1 with err. */
int		 fleet_request_put(struct fleet *, const char *request_id,
		    const char *task_id, const char *template, int status,
		    const char *reason, const char *hash, const uint8_t *body,
		    size_t len, const char *host, char *err, size_t errlen);
/* 1 found (free out->body), 0 not, -1 with err. */
int		 fleet_request_get(struct fleet *, const char *request_id,
		    struct fleet_req *out, char *err, size_t errlen);
/* Move a PENDING request to status, committed: 1 done, 0 it was not
 * PENDING (decided elsewhere), -1 with err. */
int		 fleet_request_decide(struct fleet *, const char *request_id,
		    int status, const char *reason, const char *approver,
		    int64_t when, const char *hash, char *err, size_t errlen);

/*
 * Register every template version of reg in the fleet (insert if absent)
 * and compare the rest with what the fleet holds, in one transaction:
 * 0 all agree (committed); -2 some differ, each added to errs naming the
 * template, the version and the host that registered it (nothing
 * registered); -1 with err, the database unreachable.
 */
int		 fleet_templates(struct fleet *, const struct tmpl_registry *,
		    const char *host, struct yerrs *errs, char *err,
		    size_t errlen);

/*
 * An entitlement change (add, or remove) made in the database's
 * transaction, left open so the caller commits its audit record first:
 * 0 (then fleet_entitle_commit or fleet_entitle_abort), 1 remove of a
 * row the fleet does not have (rolled back), -1 with err (rolled back).
 */
int		 fleet_entitle_begin(struct fleet *,
		    const Sbx__V1__Entitlement *, int add, char *err,
		    size_t errlen);
int		 fleet_entitle_commit(struct fleet *, char *err, size_t errlen);
void		 fleet_entitle_abort(struct fleet *);
/* The effective entitlement of tenant/user as the fleet holds it, valid
 * until the next call; NULL with err (fail closed). */
struct entitle_eff;
const struct entitle_eff *fleet_entitle_get(struct fleet *,
		    const char *tenant, const char *user, char *err,
		    size_t errlen);
/* As entitle_list, from the fleet.  0 or -1 with err. */
int		 fleet_entitle_list(struct fleet *, const char *tenant,
		    const char *user, Sbx__V1__Entitlement ***out, size_t *n,
		    char *err, size_t errlen);

/* A rollout's state as the fleet holds it (sbx_rollouts). */
struct fleet_roll {
	uint32_t stable, canary, percent;
	int	 halted, promoted;
	char	 reason[1024];
};
/* The fleet's state of rollout type (init written if it has none).  0,
 * or -1 with err. */
int		 fleet_roll_get(struct fleet *, const char *type,
		    const char *tmpl, const struct fleet_roll *init,
		    const char *host, struct fleet_roll *out, char *err,
		    size_t errlen);
/* Replace it (a person's promote, halt or set-percent).  0 or -1. */
int		 fleet_roll_put(struct fleet *, const char *type,
		    const char *tmpl, const struct fleet_roll *,
		    const char *host, char *err, size_t errlen);
/* Halt it unless halted or promoted: 1 done here, 0 not, -1 with err. */
int		 fleet_roll_halt(struct fleet *, const char *type,
		    const char *reason, const char *host, char *err,
		    size_t errlen);
/* One execution of tmpl@version and each of rules once, counted in
 * place; then fn(arg, version, rule, n) for every count of tmpl.  0 or
 * -1 with err (nothing counted). */
int		 fleet_roll_count(struct fleet *, const char *tmpl,
		    uint32_t version, const char *const *rules, size_t nrules,
		    void (*fn)(void *, uint32_t, const char *, uint64_t),
		    void *arg, char *err, size_t errlen);

/* The security review in a fleet: k more denials of task_id, counted in
 * place after they are durable here; *n the fleet's count after them and
 * *at the fleet's security_review.denials (local_at registered by the
 * first replica to count).  0 or -1 with err (nothing counted). */
int		 fleet_review_count(struct fleet *, const char *task_id,
		    uint32_t k, uint32_t local_at, const char *host,
		    int64_t *n, uint32_t *at, char *err, size_t errlen);

/* ---- store.c ---- */

struct store;

struct store_task {
	char	 tenant[129];
	char	 user[129];
	char	 type[129];
	int64_t	 executions;	/* committed and not yet committed */
	/* Egress bytes its runs sent, or may have sent: a run whose spend
	 * is not known (yet) counts all it was granted (store.c). */
	uint64_t egress_used;
};

/*
 * One denial of a task, a row of policyd.db's task_denials: a rule that
 * refused at a boundary (policy, egress, gate, launch, ...) in one
 * execution, however many requests it refused there; what it refused
 * (for egress, the first host) and when (0: the time of the record that
 * reports it).  The security review counts them; a capability request
 * shows the approver the newest.
 */
struct store_denial {
	char	 rule[65];
	char	 boundary[33];
	char	 detail[513];
	int64_t	 time_ns;
};

/* The denials one run's result reports, at most this many are kept. */
#define STORE_DENIALS_MAX	32

struct store	*store_open(const char *path, char *err, size_t errlen);
void		 store_close(struct store *);
/* The security review: once a task's denials, across its executions,
 * reach n, one "security-review" event (0: never). */
void		 store_set_review(struct store *, uint32_t n);
/* A fleet (policyd.yaml store: postgresql): a task's denials counted in
 * the fleet's database on the loop once their batch is durable, and the
 * review raised by the replica whose count crosses the fleet's threshold,
 * in place of this host's own count.  Before the writer starts. */
void		 store_use_fleet(struct store *, struct fleet *,
		    const char *host);
/* Security reviews this process has recorded (committed). */
uint64_t	 store_reviews(const struct store *);
/* The write handle: the writer thread's while store_busy(). */
struct sqlite3	*store_db(struct store *);
/* A read-only handle on the same file, for the event loop at any time;
 * it sees committed data only. */
struct sqlite3	*store_reader(struct store *);
/* The audit log, on the write handle. */
struct audit	*store_audit(struct store *);
/* The binding and execution count of a task, the open and in-flight
 * batches included.  1 found, 0 not found, -1 error. */
int		 store_task_get(struct store *, const char *task_id,
		    struct store_task *);
/* The datasets a task named at its last committed compile (what a
 * recompile for a grant starts from); *n 0 if it never compiled.  0 or
 * -1.  Free with strv_free(). */
int		 store_task_datasets(struct store *, const char *task_id,
		    char ***out, size_t *n);
/* Executions of a task, the open and in-flight batches included; -1 on
 * error. */
int64_t		 store_executions_count(struct store *, const char *task_id);
/* 1 if a committed execution has this id, 0 if not, -1 on error. */
int		 store_execution_exists(struct store *, const char *execution_id);

/*
 * The open batch: records wait in memory until store_commit() or
 * store_submit() writes them in one transaction.  An execution counts
 * against its task at once.  seen: what store_task_get() said about the
 * task, NULL if it found nothing (the batch then also binds the task).
 * egress_granted: for a run, the egress bytes it may send (counted as
 * used by the task until its spend is known); -1 for a compile only,
 * which launchd-sbx never runs.
 */
void		 store_add_execution(struct store *, const Sbx__V1__Task *,
		    const struct store_task *seen, const char *execution_id,
		    const char *hash, const char *detail, const char *actor,
		    int64_t egress_granted);
/* A run's result came back: an "egress" event, and with known, what it
 * sent replaces what it was granted in the task's count.  Without
 * known (egressd never reported) the grant stays counted.  den: the
 * run's denials (nden of them; those with a rule, at most
 * STORE_DENIALS_MAX), counted against the task for its security review
 * and shown to the approvers of its capability requests. */
void		 store_add_egress(struct store *, const char *task_id,
		    const char *execution_id, const char *hash, int known,
		    uint64_t spent, const struct store_denial *den, size_t nden,
		    const char *actor);
/* A compile refused: a "deny" event, and a denial (boundary policy) for
 * the task's security review and its approvers. */
void		 store_add_deny(struct store *, const char *task_id,
		    const char *hash, const char *rule, const char *detail,
		    const char *actor);
/*
 * A task's most recent denials, newest first, at most max: those its
 * results listed and policyd's own refusals of its compiles.  The
 * number, with *out a malloc'd array of malloc'd TaskDenials (NULL when
 * none); committed records only.
 */
size_t		 store_task_denials(struct store *, const char *task_id,
		    size_t max, Sbx__V1__TaskDenial ***out);
/* The template (NAME@V) of the task's latest compile, the open and
 * in-flight batches included: 1, 0 when none, -1 on error.  A rollout's
 * assignment (rollout.c). */
int		 store_task_template(struct store *, const char *task_id,
		    char *buf, size_t len);
/* Count the record just added (an egress or deny record) for template
 * NAME@VERSION in rollout_counts, in its transaction: one execution and
 * one for each rule it reports. */
void		 store_count_version(struct store *, const char *name,
		    uint32_t version);
/* The policy hash of the task's latest compile: 1, or 0 when none. */
int		 store_task_hash(struct store *, const char *task_id,
		    char *hash, size_t len);
void		 store_add_event(struct store *, const char *task_id,
		    const char *action, const char *execution_id,
		    const char *hash, const char *rule, const char *detail,
		    const char *actor);
/* Records in the open batch. */
size_t		 store_pending(const struct store *);
/* The open batch has records, or was poisoned. */
int		 store_in_batch(const struct store *);
/* Make the open batch fail: its commit writes nothing and returns -1. */
void		 store_poison(struct store *);
/* Write the open batch here and now, after any batch in flight: 0 once
 * it is durable, -1 if it was rolled back (and its counts with it). */
int		 store_commit(struct store *);
/*
 * Hand the open batch to the writer thread: 1, 0 if there was nothing to
 * hand or a batch is still in flight, -1 if the thread cannot start.
 * store_done_fd() becomes readable when it is done; store_reap() then
 * settles it (1, *ok set) or says it is still running (0).
 * store_poll() is store_reap() without a system call: the eventfd stays
 * readable, and the store_reap() it then wakes finds nothing to settle.
 * store_wait() blocks until it is done and returns its result.
 */
int		 store_submit(struct store *);
int		 store_busy(const struct store *);
int		 store_done_fd(struct store *);
int		 store_reap(struct store *, int *ok);
int		 store_poll(struct store *, int *ok);
int		 store_wait(struct store *);

/* ---- rollout.c: gradual rollouts of a template version ---- */

struct rollouts;

/* The rollouts of conf's task types, reconciled with the state kept in
 * policyd.db (on the store's write handle, before the writer runs), and
 * the counts.  NULL with err. */
struct rollouts	*rollout_open(const struct policyd_conf *, struct store *,
		    char *err, size_t errlen);
void		 rollout_close(struct rollouts *);
/* In a fleet: the state and counts are the database's (fleet.c). */
void		 rollout_use_fleet(struct rollouts *, struct fleet *,
		    const char *host);
/* A task's bucket, 0..99: SHA-256 over type, NUL, id; 4 bytes mod 100. */
uint32_t	 rollout_bucket(const char *type, const char *task_id);
/* The version t gets, NULL if its type has no rollout.  known: the task
 * is bound (has compiled before). */
const struct tmpl *rollout_pick(struct rollouts *, const struct tmpl_registry *,
		    const Sbx__V1__Task *t, int known);
/* The halt rule: 1 when each side has min_exec executions and the
 * rates (denied / executions) differ by more than threshold/1000,
 * either way; the rates are set once both sides have min_exec. */
int		 rollout_differs(uint64_t s_exec, uint64_t s_den,
		    uint64_t c_exec, uint64_t c_den, uint32_t threshold,
		    uint32_t min_exec, double *s_rate, double *c_rate);
/* Count the record just added to the store's open batch (a result or a
 * refusal) for tmpl@version, with its denials, and check the rollouts
 * of that template: one whose canary breaks the threshold is halted at
 * once and due to be written, its event under the task, execution and
 * hash given (NULL: none). */
void		 rollout_count(struct rollouts *, const char *task_id,
		    const char *execution_id, const char *hash,
		    const char *tmpl, uint32_t version,
		    const struct store_denial *, size_t nden);
/* A halt is due; rollout_write_due() records it (state and audit event,
 * one transaction on the write handle, which must be free).  0 or -1. */
int		 rollout_due(const struct rollouts *);
int		 rollout_write_due(struct rollouts *);
/* promote, halt, set-percent by an operator, written and audited before
 * it returns (the write handle must be free).  0, or -1 with code and
 * err. */
int		 rollout_control(struct rollouts *,
		    const Sbx__V1__RolloutControl *, const char *actor,
		    Sbx__V1__ErrorCode *code, char *err, size_t errlen);
/* The rollouts (type NULL or "": all); -1 with err for an unknown type.
 * Free with rollout_status_clear(). */
int		 rollout_status(struct rollouts *, const char *type,
		    Sbx__V1__Rollouts *, char *err, size_t errlen);
void		 rollout_status_clear(Sbx__V1__Rollouts *);
/* Prometheus text (malloc'd). */
char		*rollout_metrics(const struct rollouts *);

/* ---- entitle.c ---- */

struct entitle;

/* What one (tenant, user) may do: the union of the user's row and the
 * tenant's "*" row. */
struct entitle_eff {
	int		 found;		/* a user row or a "*" row exists */
	char		**datasets;	/* sorted */
	size_t		  ndatasets;
	char		**hosts;	/* sorted, lower case */
	size_t		  nhosts;
	Sbx__V1__Limits	  plan;		/* 0 fields: no cap */
};

struct entitle	*entitle_open(struct sqlite3 *, char *err, size_t errlen);
/* Let entitle_get() read through another handle on the same database
 * (store_reader()), so it never touches the write handle. */
int		 entitle_use_reader(struct entitle *, struct sqlite3 *,
		    char *err, size_t errlen);
void		 entitle_close(struct entitle *);
/* In a fleet: lookups and lists read the fleet's database (fleet.c). */
void		 entitle_use_fleet(struct entitle *, struct fleet *);
/* A host name as entitlements keep it: lower case, no trailing dot. */
char		*entitle_host_norm(const char *);
/* Validate an Entitlement message (names, hosts); 0 or -1 with err. */
int		 entitle_check(const Sbx__V1__Entitlement *, char *err,
		    size_t errlen);
/* Merge (or with e->replace, replace the user's row).  0 or -1. */
int		 entitle_add(struct entitle *, const Sbx__V1__Entitlement *,
		    char *err, size_t errlen);
/* Remove the named datasets/hosts, or the row when none are named.
 * 0, 1 when there was no such row, -1 on error. */
int		 entitle_remove(struct entitle *, const Sbx__V1__Entitlement *,
		    char *err, size_t errlen);
/* Rows matching tenant/user (NULL or "": all), sorted.  Free with
 * entitle_list_free. */
int		 entitle_list(struct entitle *, const char *tenant,
		    const char *user, Sbx__V1__Entitlement ***out, size_t *n);
void		 entitle_list_free(Sbx__V1__Entitlement **, size_t);
int		 entitle_get(struct entitle *, const char *tenant,
		    const char *user, struct entitle_eff *);
/* entitle_get() through the cache: valid until the next lookup, change
 * or entitle_forget().  NULL on error. */
const struct entitle_eff *entitle_lookup(struct entitle *,
		    const char *tenant, const char *user);
/* Drop the cache: after a change commits or rolls back. */
void		 entitle_forget(struct entitle *);
void		 entitle_eff_clear(struct entitle_eff *);
int		 entitle_can_read(const struct entitle_eff *, const char *dataset);
int		 entitle_can_call(const struct entitle_eff *, const char *host);

/* ---- compile.c ---- */

struct policyd_metrics {
	uint64_t	 compiles;
	uint64_t	 executions;
	uint64_t	 commits;	/* batches committed */
	uint64_t	 runs;		/* results relayed */
	uint64_t	 run_failures;	/* compiled, then failed to run */
	struct {
		const char	*rule;
		uint64_t	 n;
	}		 denials[8];
	size_t		 ndenials;
};

struct capability;
struct commit;

/* What a task has been granted beyond its template (capability.c fills
 * it, compile_policy_grants() reads it). */
struct cap_grants {
	char			**datasets;	/* sorted, unique */
	size_t			  ndatasets;
	Sbx__V1__AllowRule	**rules;
	size_t			  nrules;
};

/* ---- pin.c: template versions fixed by their hash ---- */

struct pin;
struct pin	*pin_open(const char *db, char *err, size_t errlen);
void		 pin_close(struct pin *);
/* Every template of reg whose NAME@VERSION was pinned with another hash:
 * an error naming its file, the version and both hashes.  0, or -1. */
int		 pin_check(struct pin *, const struct tmpl_registry *,
		    struct yerrs *);
/* Pin every version of reg not pinned yet (one transaction).  0 or -1. */
int		 pin_record(struct pin *, const struct tmpl_registry *,
		    char *err, size_t errlen);

struct policyd {
	struct policyd_conf	*conf;
	struct tmpl_registry	*reg;
	struct sign_key		*key;
	/* previous_public_key: verifies grants it signed until they expire
	 * (policyd.8, ROTATING THE SIGNING KEY); KeyRequest returns it. */
	unsigned char		 prev_pk[32];
	int			 has_prev;
	struct store		*store;
	struct fleet		*fleet;		/* NULL: not in a fleet */
	/* reg's versions registered in the fleet (fleet_templates); until
	 * they are, a fleet replica compiles nothing. */
	int			 tmpl_fleet_ok;
	struct pin		*pin;		/* template versions' hashes */
	struct entitle		*ent;
	struct event_base	*base;
	struct control		*ctl;
	struct commit		*commit;	/* NULL: no sockets (unit tests) */
	struct policyd_metrics	 metrics;
	uint32_t		 ttl;
	struct capability	*cap;	/* NULL: no grants (capability.c) */
	struct rollouts		*roll;	/* NULL: none (unit tests) */
	/* How compile_task() reads a task's grants: capability_grants(),
	 * set by capability_open(), so compile.c calls nothing above it. */
	int			(*grants)(struct capability *,
				    const char *task_id, struct cap_grants *);
};

struct compile_out {
	Sbx__V1__Policy		*policy;
	char			 hash[POLICY_HASH_HEX];
	char			 execution_id[40];
	char			*template;	/* NAME@V */
	int64_t			 issued_at;
	int64_t			 expires_at;
	uint64_t		 egress_spent;	/* signed in the grant */
	Sbx__V1__SignedPolicy	 signed_;
};

/* Rule ids. */
#define RULE_UNKNOWN_TASK_TYPE	"unknown-task-type"
#define RULE_TASK_MISMATCH	"task-mismatch"
#define RULE_NO_ENTITLEMENT	"no-entitlement"
#define RULE_NOT_READABLE	"dataset-not-readable"
#define RULE_EXHAUSTED		"executions-exhausted"
#define RULE_TEMPLATE_CONFLICT	"template-version-conflict"


/* Validate the task fields (step 1).  0, or -1 with err (ERROR_INVALID). */
int		 compile_validate(const Sbx__V1__Task *, Sbx__V1__Error *err);
/* Step 4 on pol in place: ${task.*} in paths and credential secrets, and
 * ${task.dataset_ref} inputs expanded to the task's datasets. */
int		 compile_substitute(Sbx__V1__Policy *, const Sbx__V1__Task *,
		    Sbx__V1__Error *err);
/*
 * Steps 4 to 8, pure: a new policy (normalised) from template t for task
 * and entitlement eff, or NULL with err set.
 */
Sbx__V1__Policy	*compile_policy(const struct tmpl *, const Sbx__V1__Task *,
		    const struct entitle_eff *, Sbx__V1__Error *err);
/*
 * compile_policy() plus the task's grants (NULL: none): a granted dataset
 * is readable for this task and, where the template takes task datasets,
 * one of its inputs; a granted host adds its rule.  This is the one
 * place a compile may add what the template lacks, and only what a grant
 * of this very task names.
 */
Sbx__V1__Policy	*compile_policy_grants(const struct tmpl *,
		    const Sbx__V1__Task *, const struct entitle_eff *,
		    const struct cap_grants *, Sbx__V1__Error *err);
/*
 * The whole compile.  Adds the execution (and the task's binding if it is
 * new) or a denial event to the store's open batch; the caller commits
 * that before it replies.  0, or -1 with err.  An ERROR_INVALID or
 * ERROR_INTERNAL error records nothing.  run: COMPILE_RUN, the policy is
 * for a launch, whose egress allowance then counts against the task
 * (store.c); COMPILE_PREVIEW, a grant no daemon accepts, and nothing is
 * recorded on success (the task stays unbound, no execution is spent).
 */
#define COMPILE_ONLY		0
#define COMPILE_RUN		1
#define COMPILE_PREVIEW		2
int		 compile_task(struct policyd *, const Sbx__V1__Task *,
		    const char *actor, int run, struct compile_out *,
		    Sbx__V1__Error *err);
void		 compile_out_clear(struct compile_out *);
/* Set err (code, rule, message); the strings are malloc'd. */
void		 compile_error(Sbx__V1__Error *, Sbx__V1__ErrorCode,
		    const char *rule, const char *fmt, ...)
		    __attribute__((format(printf, 4, 5)));
void		 compile_error_clear(Sbx__V1__Error *);
void		 compile_count_denial(struct policyd_metrics *, const char *rule);
void		 compile_grants_clear(struct cap_grants *);

/* ---- commit.c ---- */

/* What a held reply stands for, counted in the metrics once it goes out. */
enum held_kind {
	HELD_OTHER,
	HELD_EXECUTION,
	HELD_DENIAL,
};

struct commit	*commit_new(struct policyd *);
void		 commit_free(struct commit *);
/* Hold a reply until the open batch commits.  recorded: the reply
 * acknowledges a record in the batch, so it goes out only if the batch
 * commits (else the client gets ERROR_INTERNAL). */
void		 commit_hold(struct commit *, struct frame_conn *,
		    const Sbx__V1__Envelope *, enum held_kind, const char *rule,
		    int recorded);
/* commit_hold() of a call: done(arg, 1) runs where the reply would have
 * gone out (env is then not sent, and may be NULL), done(arg, 0) after
 * the client got the error; request_id is for that error. */
void		 commit_hold_cb(struct commit *, struct frame_conn *,
		    const Sbx__V1__Envelope *env, enum held_kind,
		    const char *rule, int recorded, void (*done)(void *, int),
		    void *arg, uint64_t request_id);
/* Settle the batch in flight if the writer has finished it (its
 * replies go out), then hand the open batch to the writer thread unless
 * one is still in flight. */
void		 commit_kick(struct commit *);
/* Wait for the batch in flight, commit the open one, and send their
 * replies: afterwards nothing is pending and the write handle is free. */
void		 commit_flush(struct commit *);
/* A rollout halt is due (rollout.c): commit_flush(), then record it. */
void		 commit_rollout(struct commit *);

/* ---- capability.c ---- */

#define CAP_NO_APPROVER		"no approver available"

/* Tables (capability_requests, grants) on the write handle, reads on
 * the read handle.  NULL with err. */
struct capability *capability_open(struct policyd *, char *err,
		    size_t errlen);
void		 capability_close(struct capability *);
/* The grants of a task, through the read handle (pd->grants).  0 or
 * -1.  Free with compile_grants_clear(). */
int		 capability_grants(struct capability *, const char *task_id,
		    struct cap_grants *);
/*
 * Decide a request by rules.  Fills in request_id, tenant, user, template
 * and created_at, stores it and audits it.  Inside the user's
 * entitlements: records the grant, recompiles (no execution) and sets
 * out GRANTED with the new hash.  Outside: out PENDING, stored PENDING;
 * the caller forwards it to approvald and calls capability_fail_closed()
 * if that does not take it.  A request rules can never satisfy: out
 * DENIED.  -1 with err (ERROR_INVALID, ERROR_NOT_FOUND, ERROR_INTERNAL):
 * nothing stored.  out's strings are malloc'd: capability_decision_clear.
 */
int		 capability_decide(struct policyd *,
		    Sbx__V1__CapabilityRequest *, const char *actor,
		    Sbx__V1__CapabilityDecision *out, Sbx__V1__Error *err);
/* A PENDING request approvald did not take: DENIED with reason
 * CAP_NO_APPROVER and why, stored and audited.  0 or -1. */
int		 capability_fail_closed(struct policyd *, const char *request_id,
		    const char *why, Sbx__V1__CapabilityDecision *out);
/* approvald marked it as queued. */
void		 capability_forwarded(struct policyd *, const char *request_id);
/*
 * approvald's decision on a PENDING request: APPROVED records the grant
 * and recompiles (out has the new hash); DENIED changes nothing but the
 * request's status.  A repeat of the same decision answers the same.
 * -1 with err.
 */
int		 capability_apply(struct policyd *,
		    const Sbx__V1__CapabilityDecision *, const char *actor,
		    Sbx__V1__CapabilityDecision *out, Sbx__V1__Error *err);
/* The hash the task's next compile gets: its binding, the datasets of
 * its last compile, its grants; nothing recorded.  0 or -1 with err. */
int		 capability_recompile(struct policyd *, const char *task_id,
		    char hash[POLICY_HASH_HEX], Sbx__V1__Error *err);
void		 capability_decision_clear(Sbx__V1__CapabilityDecision *);
/* Socket side: a `capability` on the orchestrator (or admin) socket,
 * answered now or once approvald has taken it. */
void		 capability_serve_request(struct policyd *, struct frame_conn *,
		    Sbx__V1__Envelope *);
/* A `decision` on the approvals socket. */
void		 capability_serve_decision(struct policyd *,
		    struct frame_conn *, Sbx__V1__Envelope *);
/* Prometheus text for the capability counters (malloc'd). */
char		*capability_metrics(const struct capability *);

/* ---- launch.c ---- */

struct launch;

struct launch	*launch_new(struct policyd *);
/* Ends the runs not yet answered: their clients' connections close. */
void		 launch_free(struct launch *);
/* A compiled run: held until the batch with its execution record has
 * committed, then launched on launchd-sbx and its result relayed to c.
 * 0, or -1 (nothing held) if the launch request cannot be encoded. */
int		 launch_run(struct launch *, struct frame_conn *,
		    const Sbx__V1__Envelope *req, const Sbx__V1__Task *,
		    struct compile_out *, const char *actor);

/* ---- control.c ---- */

struct control;

/* What the handlers share: launch.c's runs.  NULL if its event cannot be
 * made.  control_free() first sends every reply still held. */
struct control	*control_new(struct policyd *);
void		 control_free(struct control *);
/* The frame handlers of the orchestrator, admin and approvals sockets
 * (arg: the struct policyd). */
void		 control_orch_socket(struct frame_conn *, Sbx__V1__Envelope *,
		    void *);
void		 control_admin_socket(struct frame_conn *, Sbx__V1__Envelope *,
		    void *);
void		 control_approvals_socket(struct frame_conn *,
		    Sbx__V1__Envelope *, void *);
/* Prometheus text (malloc'd). */
char		*control_metrics(const struct policyd *);

#endif
