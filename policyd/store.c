/*
 * store.c: policyd.db, the one SQLite database policyd keeps: tasks (the
 * first compile binds a task id to its tenant, user and type), the
 * entitlements (entitle.c) and the audit log (common/audit.c, on the same
 * handle).  The audit record of a compile is also its execution record:
 * it names the task, the execution id, the policy hash, the template and
 * the time, so a task's executions are its "compile" records.  Each
 * execution also notes the datasets the task named (task_inputs), which
 * is what a recompile for a capability grant starts from.  (A database
 * made by an earlier version also has an executions table; it is left
 * alone.)
 *
 * The egress budget (network.max_out_kb) is the task's, across all its
 * executions, so each run also has a row in egress_spend: what it was
 * allowed to send (granted, in the same transaction as its execution
 * record, before it is launched) and, once its result names it, what it
 * sent (spent).  What a task has used is the sum over its runs of spent,
 * or of granted where spent is unknown -- a run still going, or one
 * whose egressd, launchd-sbx or policyd died before the usage came back
 * -- so an unknown spend counts as the most it could have been, and a
 * restart of any daemon never gives a task its budget back.
 *
 * What each template version's executions met is counted for rollouts
 * (rollout.c) in rollout_counts, in the transaction of the result or
 * refusal a record reports once store_count_version() tags it: one row
 * for the executions (rule '') and one per rule denied, each a counter.
 * Each compile record's detail names its version ("template NAME@V"),
 * which store_task_template() reads back, from the batches first, so a
 * task's next compile keeps it.
 *
 * A task's denials count across its executions too, for the security
 * review the reference text asks for ("a cluster of denials under one
 * task id ... triggers a security review"): each compile refusal and
 * each rule a run's result names (egressd's refusals, gated's drops by
 * reason) is a row of task_denials, written in the transaction of the
 * record that reports it.  In that same transaction the writer counts
 * the task's rows, and when they reach security_review.denials and the
 * audit log has no "security-review" event for the task yet, appends
 * one naming the rules: so the event is written once per task, durably,
 * and a restart neither forgets the count nor repeats the event.  The
 * same rows, with their detail, time and policy hash, are what a
 * capability request shows its approver of the task (store_task_denials):
 * one table, so the two never disagree and nothing is shown twice.
 *
 * The invariant: a compile's records commit in one transaction, durably
 * (synchronous=FULL), before any reply acknowledges them, and no task gets
 * more executions than its cap.  Compiles that arrive together share that
 * transaction (group commit).  Records first go into the open batch in
 * memory; store_submit() hands the batch to a writer thread, which runs
 * the SQL and the COMMIT (the fsync) while the event loop compiles and
 * signs the next batch.  Only one batch is in flight at a time, and the
 * write handle belongs to the writer while it is: the event loop reads
 * through a second, read-only handle, and the task map below adds what
 * that handle cannot see yet -- the executions and task bindings in the
 * open or in-flight batch -- so the cap counts them too.  A failed commit
 * takes them back out.
 */
#include <sys/eventfd.h>

#include <errno.h>
#include <pthread.h>
#include <search.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "audit.h"
#include "log.h"
#include "util.h"
#include "policyd.h"

/* Where a task's row is. */
enum ent_row {
	ROW_NONE,	/* not in the database */
	ROW_QUEUED,	/* inserted by the batch in flight */
	ROW_ON_DISK,
};

/*
 * A task with records in the open or in-flight batch.  The map holds no
 * other task: an entry goes when its last record has been committed or
 * rolled back, after which the read handle sees the same thing.
 */
struct store_ent {
	char			*task_id;
	struct store_task	 bound;		/* executions: committed */
	int64_t			 pending;	/* executions not committed */
	uint64_t		 eg_pending;	/* egress granted to those */
	enum ent_row		 row;
	unsigned		 refs;		/* records naming it */
	char			 tmpl[160];	/* its latest compile's NAME@V */
};

/* One audit event to write, and for an execution, its task. */
struct store_rec {
	struct store_ent	*ent;		/* NULL unless an execution */
	int			 insert_task;	/* set at hand-off */
	int64_t			 time_ns;
	char			 action[16];
	char			 task_id[129];
	char			 execution_id[40];
	char			 hash[POLICY_HASH_HEX];
	char			 actor[32];
	char			 traceparent[TRACE_PARENT_LEN + 1];
	char			*rule;
	char			*detail;
	char			*datasets;	/* an execution's, '\n'-joined */
	int64_t			 eg_granted;	/* a run's egress_spend row, or -1 */
	int64_t			 eg_spent;	/* its spend, now known, or -1 */
	struct store_denial	*den;		/* denials it reports */
	size_t			 nden;
	int			 reviewed;	/* it raised the review */
	char			 rv_name[129];	/* counted for NAME@VERSION */
	uint32_t		 rv_version;	/* (rollout_counts); 0: not */
};

struct store_batch {
	struct store_rec	*recs;
	size_t			 n;
	size_t			 cap;
	int			 poisoned;
};

struct store {
	sqlite3			*db;		/* writes: see above */
	sqlite3			*rdb;		/* reads, by the loop */
	struct audit		*audit;
	/* The insert is on db, the three queries on rdb. */
	sqlite3_stmt		*st_task_insert;
	sqlite3_stmt		*st_task_get;
	sqlite3_stmt		*st_exec_count;
	sqlite3_stmt		*st_exec_exists;
	sqlite3_stmt		*st_inputs_put;	/* db */
	sqlite3_stmt		*st_inputs_get;	/* rdb */
	sqlite3_stmt		*st_eg_insert;	/* db */
	sqlite3_stmt		*st_eg_spent;	/* db */
	sqlite3_stmt		*st_eg_used;	/* rdb */
	sqlite3_stmt		*st_den_insert;	/* db, and the four below */
	sqlite3_stmt		*st_den_count;
	sqlite3_stmt		*st_den_rules;
	sqlite3_stmt		*st_den_by_rule;
	sqlite3_stmt		*st_reviewed;
	sqlite3_stmt		*st_den_recent;	/* rdb */
	sqlite3_stmt		*st_last_hash;	/* rdb */
	sqlite3_stmt		*st_last_tmpl;	/* rdb */
	sqlite3_stmt		*st_rv_count;	/* db */
	uint32_t		 review_at;	/* denials; 0: never */
	struct fleet		*fleet;		/* the loop's; NULL: one host */
	const char		*host;		/* this replica's name */
	uint32_t		 fleet_at;	/* the fleet's last said */
	uint64_t		 reviews;	/* committed since start */
	void			*tasks;		/* tsearch tree */

	struct store_batch	 open;		/* the event loop's */
	struct store_batch	 flight;	/* the writer's while busy */
	int			 busy;		/* flight is the writer's */

	/* The writer thread; the fields under mtx are shared with it. */
	pthread_t		 thread;
	int			 thread_up;
	int			 efd;		/* signalled when done */
	pthread_mutex_t		 mtx;
	pthread_cond_t		 cv;
	int			 job;		/* mtx: run flight */
	int			 done;		/* mtx: flight has run */
	int			 result;	/* mtx: and its result */
	int			 stop;		/* mtx: exit */
};

static const char store_schema[] =
    /* WITHOUT ROWID: the task id is the key, one B-tree rather than a
     * table and its primary-key index. */
    "CREATE TABLE IF NOT EXISTS tasks("
    " task_id TEXT PRIMARY KEY,"
    " tenant TEXT NOT NULL,"
    " user TEXT NOT NULL,"
    " type TEXT NOT NULL,"
    " created_ns INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS task_inputs("
    " task_id TEXT PRIMARY KEY,"
    " datasets TEXT NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS egress_spend("
    " execution_id TEXT PRIMARY KEY,"
    " task_id TEXT NOT NULL,"
    " granted INTEGER NOT NULL,"
    " spent INTEGER) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS egress_spend_task ON egress_spend(task_id);"
    /* A task's denials (store_denial in policyd.h): policyd's refusals
     * of its compiles (boundary policy) and those its results report,
     * counted for the security review and shown, newest first, to the
     * approvers of its capability requests. */
    "CREATE TABLE IF NOT EXISTS task_denials("
    " task_id TEXT NOT NULL,"
    " execution_id TEXT NOT NULL,"
    " policy_hash TEXT NOT NULL,"
    " time_ns INTEGER NOT NULL,"
    " rule TEXT NOT NULL,"
    " boundary TEXT NOT NULL,"
    " detail TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS task_denials_task ON"
    " task_denials(task_id, time_ns);"
    /* What each template version's executions met, for rollouts
     * (rollout.c): rule '' counts the executions (results, and compiles
     * refused after the version was chosen), any other rule the
     * executions with at least one denial of it. */
    "CREATE TABLE IF NOT EXISTS rollout_counts("
    " template TEXT NOT NULL,"
    " version INTEGER NOT NULL,"
    " rule TEXT NOT NULL,"
    " n INTEGER NOT NULL,"
    " PRIMARY KEY(template, version, rule)) WITHOUT ROWID;";

static int
store_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st, char *err,
    size_t errlen)
{
	if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, st,
	    NULL) != SQLITE_OK) {
		snprintf(err, errlen, "policyd.db: %s: %s", sql,
		    sqlite3_errmsg(db));
		return -1;
	}
	return 0;
}

struct store *
store_open(const char *path, char *err, size_t errlen)
{
	struct store	*s;
	char		*msg = NULL;

	s = xcalloc(1, sizeof(*s));
	s->efd = -1;
	if (pthread_mutex_init(&s->mtx, NULL) != 0 ||
	    pthread_cond_init(&s->cv, NULL) != 0)
		fatalx("cannot initialise the store's lock");
	/* The writer thread and the event loop use the write handle in
	 * turn, so the library must allow a handle to change threads. */
	if (!sqlite3_threadsafe()) {
		snprintf(err, errlen, "SQLite was built without thread "
		    "support");
		goto fail;
	}
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, s->db != NULL ?
		    sqlite3_errmsg(s->db) : "cannot open");
		goto fail;
	}
	sqlite3_busy_timeout(s->db, 5000);
	/* audit_open_db sets WAL and synchronous=FULL on the handle. */
	if ((s->audit = audit_open_db(s->db, "policyd", err, errlen)) == NULL)
		goto fail;
	if (sqlite3_exec(s->db, "PRAGMA wal_autocheckpoint=8192", NULL, NULL,
	    &msg) != SQLITE_OK || sqlite3_exec(s->db, store_schema, NULL,
	    NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "%s: schema: %s", path,
		    msg != NULL ? msg : sqlite3_errmsg(s->db));
		sqlite3_free(msg);
		goto fail;
	}
	/* In WAL mode a reader sees the last commit and never waits for
	 * the writer. */
	if (sqlite3_open_v2(path, &s->rdb, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, s->rdb != NULL ?
		    sqlite3_errmsg(s->rdb) : "cannot open");
		goto fail;
	}
	sqlite3_busy_timeout(s->rdb, 5000);
	if (sqlite3_exec(s->rdb, "PRAGMA query_only=1", NULL, NULL,
	    &msg) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path,
		    msg != NULL ? msg : sqlite3_errmsg(s->rdb));
		sqlite3_free(msg);
		goto fail;
	}
	if (store_prepare(s->db, "INSERT INTO tasks(task_id, tenant, user,"
	    " type, created_ns) VALUES (?, ?, ?, ?, ?)", &s->st_task_insert,
	    err, errlen) == -1 ||
	    store_prepare(s->rdb, "SELECT tenant, user, type FROM tasks"
	    " WHERE task_id = ?", &s->st_task_get, err, errlen) == -1 ||
	    store_prepare(s->rdb, "SELECT count(*) FROM audit WHERE"
	    " task_id = ? AND action = 'compile'", &s->st_exec_count, err,
	    errlen) == -1 ||
	    store_prepare(s->rdb, "SELECT 1 FROM audit WHERE"
	    " execution_id = ? AND action = 'compile'", &s->st_exec_exists,
	    err, errlen) == -1 ||
	    store_prepare(s->db, "INSERT INTO task_inputs(task_id, datasets)"
	    " VALUES (?1, ?2) ON CONFLICT(task_id) DO UPDATE SET"
	    " datasets = ?2", &s->st_inputs_put, err, errlen) == -1 ||
	    store_prepare(s->rdb, "SELECT datasets FROM task_inputs WHERE"
	    " task_id = ?", &s->st_inputs_get, err, errlen) == -1 ||
	    store_prepare(s->db, "INSERT INTO egress_spend(execution_id,"
	    " task_id, granted) VALUES (?, ?, ?)", &s->st_eg_insert, err,
	    errlen) == -1 ||
	    store_prepare(s->db, "UPDATE egress_spend SET spent = ?2 WHERE"
	    " execution_id = ?1", &s->st_eg_spent, err, errlen) == -1 ||
	    store_prepare(s->rdb, "SELECT coalesce(sum(coalesce(spent,"
	    " granted)), 0) FROM egress_spend WHERE task_id = ?",
	    &s->st_eg_used, err, errlen) == -1 ||
	    store_prepare(s->db, "INSERT INTO task_denials(task_id,"
	    " execution_id, policy_hash, time_ns, rule, boundary, detail)"
	    " VALUES (?, ?, ?, ?, ?, ?, ?)", &s->st_den_insert, err,
	    errlen) == -1 ||
	    store_prepare(s->db, "SELECT count(*), count(DISTINCT"
	    " nullif(execution_id, '')) FROM task_denials WHERE task_id = ?",
	    &s->st_den_count, err, errlen) == -1 ||
	    store_prepare(s->db, "SELECT group_concat(rule, ',') FROM"
	    " (SELECT DISTINCT rule FROM task_denials WHERE task_id = ?"
	    " ORDER BY rule)", &s->st_den_rules, err, errlen) == -1 ||
	    store_prepare(s->db, "SELECT rule, boundary, count(*) FROM"
	    " task_denials WHERE task_id = ? GROUP BY rule, boundary"
	    " ORDER BY rule, boundary", &s->st_den_by_rule, err,
	    errlen) == -1 ||
	    store_prepare(s->db, "SELECT 1 FROM audit WHERE task_id = ? AND"
	    " action = 'security-review' LIMIT 1", &s->st_reviewed, err,
	    errlen) == -1 ||
	    /* policyd's own refusals are rows here too (store_add_deny),
	     * so the table alone is the task's record. */
	    store_prepare(s->rdb, "SELECT time_ns, rule, boundary, detail,"
	    " execution_id, policy_hash FROM task_denials WHERE task_id = ?1"
	    " ORDER BY time_ns DESC, rowid DESC LIMIT ?2", &s->st_den_recent,
	    err, errlen) == -1 ||
	    store_prepare(s->rdb, "SELECT policy_hash FROM audit WHERE"
	    " task_id = ? AND action = 'compile' ORDER BY seq DESC LIMIT 1",
	    &s->st_last_hash, err, errlen) == -1 ||
	    store_prepare(s->rdb, "SELECT detail FROM audit WHERE"
	    " task_id = ? AND action = 'compile' ORDER BY seq DESC LIMIT 1",
	    &s->st_last_tmpl, err, errlen) == -1 ||
	    store_prepare(s->db, "INSERT INTO rollout_counts(template,"
	    " version, rule, n) VALUES (?1, ?2, ?3, 1) ON CONFLICT(template,"
	    " version, rule) DO UPDATE SET n = n + 1", &s->st_rv_count, err,
	    errlen) == -1)
		goto fail;
	return s;
fail:
	store_close(s);
	return NULL;
}

static void
store_batch_free(struct store_batch *b)
{
	free(b->recs);
	memset(b, 0, sizeof(*b));
}

static void store_finish(struct store *, struct store_batch *, int ok);
static int store_cmp(const void *, const void *);

static void
store_stop_writer(struct store *s)
{
	if (!s->thread_up)
		return;
	pthread_mutex_lock(&s->mtx);
	s->stop = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mtx);
	pthread_join(s->thread, NULL);
	s->thread_up = 0;
}

void
store_close(struct store *s)
{
	if (s == NULL)
		return;
	(void)store_wait(s);
	store_stop_writer(s);
	/* Nobody was told about an uncommitted batch: drop it. */
	store_finish(s, &s->open, 0);
	store_batch_free(&s->open);
	store_batch_free(&s->flight);
	sqlite3_finalize(s->st_task_insert);
	sqlite3_finalize(s->st_task_get);
	sqlite3_finalize(s->st_exec_count);
	sqlite3_finalize(s->st_exec_exists);
	sqlite3_finalize(s->st_inputs_put);
	sqlite3_finalize(s->st_inputs_get);
	sqlite3_finalize(s->st_eg_insert);
	sqlite3_finalize(s->st_eg_spent);
	sqlite3_finalize(s->st_eg_used);
	sqlite3_finalize(s->st_den_insert);
	sqlite3_finalize(s->st_den_count);
	sqlite3_finalize(s->st_den_rules);
	sqlite3_finalize(s->st_den_by_rule);
	sqlite3_finalize(s->st_reviewed);
	sqlite3_finalize(s->st_den_recent);
	sqlite3_finalize(s->st_last_hash);
	sqlite3_finalize(s->st_last_tmpl);
	sqlite3_finalize(s->st_rv_count);
	audit_close(s->audit);
	if (s->db != NULL)
		sqlite3_close(s->db);
	if (s->rdb != NULL)
		sqlite3_close(s->rdb);
	if (s->efd != -1)
		close(s->efd);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mtx);
	free(s);
}

void
store_use_fleet(struct store *s, struct fleet *f, const char *host)
{
	s->fleet = f;
	s->host = host;
}

void
store_set_review(struct store *s, uint32_t n)
{
	s->review_at = n;
}

uint64_t
store_reviews(const struct store *s)
{
	return s->reviews;
}

struct sqlite3 *
store_db(struct store *s)
{
	return s->db;
}

struct sqlite3 *
store_reader(struct store *s)
{
	return s->rdb;
}

struct audit *
store_audit(struct store *s)
{
	return s->audit;
}

/* ---- the task map ---- */

static int
store_cmp(const void *a, const void *b)
{
	const struct store_ent	*x = a, *y = b;

	return strcmp(x->task_id, y->task_id);
}

static struct store_ent *
store_ent_find(struct store *s, const char *task_id)
{
	struct store_ent	 key;
	void			*node;

	key.task_id = (char *)task_id;
	node = tfind(&key, &s->tasks, store_cmp);
	return node != NULL ? *(struct store_ent **)node : NULL;
}

static void
store_ent_release(struct store *s, struct store_ent *ent)
{
	if (--ent->refs > 0)
		return;
	tdelete(ent, &s->tasks, store_cmp);
	free(ent->task_id);
	free(ent);
}

/* At most max bytes of s (not cutting a UTF-8 sequence is approvalctl's
 * quoting's concern: it shows a cut one as \xNN). */
static char *
store_cut(const char *s, int max)
{
	char	*t;

	xasprintf(&t, "%.*s", max, s != NULL ? s : "");
	return t;
}

static void
store_copy(char *dst, size_t len, const unsigned char *src)
{
	snprintf(dst, len, "%s", src != NULL ? (const char *)src : "");
}

/* One number about a task from a prepared query on the read handle
 * (what names it in a warning); -1 on error. */
static int64_t
store_task_number(struct store *s, sqlite3_stmt *st, const char *task_id,
    const char *what)
{
	int64_t	 n = -1;

	sqlite3_bind_text(st, 1, task_id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	else
		log_warnx("policyd.db: %s %s: %s", what, task_id,
		    sqlite3_errmsg(s->rdb));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return n;
}

/* Committed executions of a task; -1 on error. */
static int64_t
store_count_on_disk(struct store *s, const char *task_id)
{
	return store_task_number(s, s->st_exec_count, task_id,
	    "count executions of");
}

/* Egress a task's committed runs used (spent, or granted where the
 * spend is unknown); -1 on error. */
static int64_t
store_egress_on_disk(struct store *s, const char *task_id)
{
	return store_task_number(s, s->st_eg_used, task_id,
	    "egress used by");
}

size_t
store_task_denials(struct store *s, const char *task_id, size_t max,
    Sbx__V1__TaskDenial ***out)
{
	sqlite3_stmt		*st = s->st_den_recent;
	Sbx__V1__TaskDenial	**v = NULL, *d;
	size_t			 n = 0;

	*out = NULL;
	if (max == 0)
		return 0;
	v = xcalloc(max, sizeof(*v));
	sqlite3_bind_text(st, 1, task_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)max);
	while (n < max && sqlite3_step(st) == SQLITE_ROW) {
		d = xmalloc(sizeof(*d));
		sbx__v1__task_denial__init(d);
		d->time_ns = sqlite3_column_int64(st, 0);
		d->rule = store_cut((const char *)sqlite3_column_text(st, 1),
		    64);
		d->boundary = store_cut((const char *)sqlite3_column_text(st,
		    2), 32);
		d->detail = store_cut((const char *)sqlite3_column_text(st, 3),
		    512);
		d->execution_id = store_cut((const char *)
		    sqlite3_column_text(st, 4), 64);
		d->policy_hash = store_cut((const char *)
		    sqlite3_column_text(st, 5), 64);
		v[n++] = d;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (n == 0) {
		free(v);
		return 0;
	}
	*out = v;
	return n;
}

int
store_task_hash(struct store *s, const char *task_id, char *hash,
    size_t len)
{
	sqlite3_stmt	*st = s->st_last_hash;
	int		 found = 0;

	hash[0] = '\0';
	sqlite3_bind_text(st, 1, task_id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		store_copy(hash, len, sqlite3_column_text(st, 0));
		found = 1;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return found;
}

/* "template NAME@V", the detail of every compile record (compile.c). */
#define STORE_TMPL_PREFIX	"template "

int
store_task_template(struct store *s, const char *task_id, char *buf,
    size_t len)
{
	struct store_ent	*ent;
	sqlite3_stmt		*st = s->st_last_tmpl;
	const char		*d;
	int			 rc, ret = 0;

	buf[0] = '\0';
	/* A compile not committed yet is the latest. */
	if ((ent = store_ent_find(s, task_id)) != NULL &&
	    ent->tmpl[0] != '\0') {
		snprintf(buf, len, "%s", ent->tmpl);
		return 1;
	}
	sqlite3_bind_text(st, 1, task_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if ((d = (const char *)sqlite3_column_text(st, 0)) == NULL)
			d = "";
		if (strncmp(d, STORE_TMPL_PREFIX,
		    strlen(STORE_TMPL_PREFIX)) == 0) {
			snprintf(buf, len, "%s", d +
			    strlen(STORE_TMPL_PREFIX));
			ret = 1;
		}
	} else if (rc != SQLITE_DONE) {
		log_warnx("policyd.db: template of task %s: %s", task_id,
		    sqlite3_errmsg(s->rdb));
		ret = -1;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ret;
}

void
store_count_version(struct store *s, const char *name, uint32_t version)
{
	struct store_rec	*r;

	if (s->open.n == 0)
		return;
	r = &s->open.recs[s->open.n - 1];
	snprintf(r->rv_name, sizeof(r->rv_name), "%s", name);
	r->rv_version = version;
}

int
store_task_get(struct store *s, const char *task_id, struct store_task *t)
{
	struct store_ent	*ent;
	sqlite3_stmt		*st = s->st_task_get;
	int64_t			 eg;
	int			 rc, ret;

	if ((ent = store_ent_find(s, task_id)) != NULL) {
		*t = ent->bound;
		t->executions += ent->pending;
		/* From the disk each time: a spend recorded since the
		 * entry was made lowers it.  A batch committed but not yet
		 * settled is counted twice for a moment: more, never
		 * less. */
		if ((eg = store_egress_on_disk(s, task_id)) == -1)
			return -1;
		t->egress_used = (uint64_t)eg + ent->eg_pending;
		return 1;
	}
	sqlite3_bind_text(st, 1, task_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		store_copy(t->tenant, sizeof(t->tenant),
		    sqlite3_column_text(st, 0));
		store_copy(t->user, sizeof(t->user),
		    sqlite3_column_text(st, 1));
		store_copy(t->type, sizeof(t->type),
		    sqlite3_column_text(st, 2));
		ret = 1;
	} else if (rc == SQLITE_DONE)
		ret = 0;
	else {
		log_warnx("policyd.db: task %s: %s", task_id,
		    sqlite3_errmsg(s->rdb));
		ret = -1;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (ret == 1 && (t->executions = store_count_on_disk(s,
	    task_id)) == -1)
		ret = -1;
	if (ret == 1) {
		if ((eg = store_egress_on_disk(s, task_id)) == -1)
			ret = -1;
		else
			t->egress_used = (uint64_t)eg;
	}
	return ret;
}

int64_t
store_executions_count(struct store *s, const char *task_id)
{
	struct store_task	 t;

	switch (store_task_get(s, task_id, &t)) {
	case 1:
		return t.executions;
	case 0:
		return 0;
	default:
		return -1;
	}
}

int
store_task_datasets(struct store *s, const char *task_id, char ***out,
    size_t *n)
{
	sqlite3_stmt	*st = s->st_inputs_get;
	const char	*v, *p, *e;
	int		 rc;

	*out = NULL;
	*n = 0;
	sqlite3_bind_text(st, 1, task_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && (v = (const char *)sqlite3_column_text(st,
	    0)) != NULL) {
		/* Names are name_ok, so a newline never is one. */
		for (p = v; *p != '\0'; p = *e != '\0' ? e + 1 : e) {
			if ((e = strchr(p, '\n')) == NULL)
				e = p + strlen(p);
			if (e == p)
				continue;
			*out = xreallocarray(*out, *n + 1, sizeof(**out));
			(*out)[*n] = xmalloc((size_t)(e - p) + 1);
			memcpy((*out)[*n], p, (size_t)(e - p));
			(*out)[*n][e - p] = '\0';
			(*n)++;
		}
		rc = SQLITE_DONE;
	}
	if (rc != SQLITE_DONE)
		log_warnx("policyd.db: datasets of task %s: %s", task_id,
		    sqlite3_errmsg(s->rdb));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

int
store_execution_exists(struct store *s, const char *execution_id)
{
	sqlite3_stmt	*st = s->st_exec_exists;
	int		 rc;

	sqlite3_bind_text(st, 1, execution_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : -1;
}

/* ---- the open batch ---- */

size_t
store_pending(const struct store *s)
{
	return s->open.n;
}

int
store_in_batch(const struct store *s)
{
	return s->open.n > 0 || s->open.poisoned;
}

void
store_poison(struct store *s)
{
	s->open.poisoned = 1;
}

static struct store_rec *
store_rec_new(struct store *s, const char *task_id, const char *action,
    const char *execution_id, const char *hash, const char *rule,
    const char *detail, const char *actor)
{
	struct store_batch	*b = &s->open;
	struct store_rec	*r;

	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 64;
		b->recs = xreallocarray(b->recs, b->cap, sizeof(*b->recs));
	}
	r = &b->recs[b->n++];
	memset(r, 0, sizeof(*r));
	/* The event's time is the decision's, not the commit's. */
	r->time_ns = now_ns();
	snprintf(r->action, sizeof(r->action), "%s", action);
	snprintf(r->task_id, sizeof(r->task_id), "%s", task_id);
	snprintf(r->execution_id, sizeof(r->execution_id), "%s",
	    execution_id != NULL ? execution_id : "");
	snprintf(r->hash, sizeof(r->hash), "%s", hash != NULL ? hash : "");
	snprintf(r->actor, sizeof(r->actor), "%s", actor != NULL ? actor : "");
	/* The orchestrator's trace, where the record is about the task
	 * being handled (log_ctx_set in compile.c and launch.c). */
	snprintf(r->traceparent, sizeof(r->traceparent), "%s",
	    log_ctx_traceparent(task_id));
	r->rule = xstrdup(rule != NULL ? rule : "");
	r->detail = xstrdup(detail != NULL ? detail : "");
	r->eg_granted = -1;
	r->eg_spent = -1;
	return r;
}

void
store_add_event(struct store *s, const char *task_id, const char *action,
    const char *execution_id, const char *hash, const char *rule,
    const char *detail, const char *actor)
{
	(void)store_rec_new(s, task_id, action, execution_id, hash, rule,
	    detail, actor);
}

/*
 * Keep den (nden of them) with r: those with a rule, at most
 * STORE_DENIALS_MAX, each with its time or else the record's.  The
 * number kept.
 */
static size_t
store_rec_denials(struct store_rec *r, const struct store_denial *den,
    size_t nden)
{
	if (nden == 0)
		return 0;
	if (nden > STORE_DENIALS_MAX)
		nden = STORE_DENIALS_MAX;
	r->den = xreallocarray(NULL, nden, sizeof(*r->den));
	for (size_t i = 0; i < nden; i++) {
		if (den[i].rule[0] == '\0')
			continue;
		r->den[r->nden] = den[i];
		if (r->den[r->nden].time_ns <= 0)
			r->den[r->nden].time_ns = r->time_ns;
		r->nden++;
	}
	return r->nden;
}

void
store_add_egress(struct store *s, const char *task_id,
    const char *execution_id, const char *hash, int known, uint64_t spent,
    const struct store_denial *den, size_t nden, const char *actor)
{
	struct store_rec	*r;
	char			*t;

	r = store_rec_new(s, task_id, "egress", execution_id, hash, NULL,
	    NULL, actor);
	free(r->detail);
	if (known)
		xasprintf(&r->detail, "sent %llu bytes upstream",
		    (unsigned long long)spent);
	else
		r->detail = xstrdup("egress usage unknown: counted as all it "
		    "was allowed");
	if (known)
		r->eg_spent = spent > INT64_MAX ? INT64_MAX : (int64_t)spent;
	if ((nden = store_rec_denials(r, den, nden)) > 0) {
		xasprintf(&t, "%s; %zu denial%s", r->detail, nden,
		    nden == 1 ? "" : "s");
		free(r->detail);
		r->detail = t;
	}
}

void
store_add_deny(struct store *s, const char *task_id, const char *hash,
    const char *rule, const char *detail, const char *actor)
{
	struct store_rec	*r;

	r = store_rec_new(s, task_id, "deny", NULL, hash, rule, detail,
	    actor);
	/* Every refusal counts, whatever its rule says. */
	r->den = xcalloc(1, sizeof(*r->den));
	snprintf(r->den->rule, sizeof(r->den->rule), "%s", r->rule);
	snprintf(r->den->boundary, sizeof(r->den->boundary), "policy");
	snprintf(r->den->detail, sizeof(r->den->detail), "%s", r->detail);
	r->den->time_ns = r->time_ns;
	r->nden = 1;
}

void
store_add_execution(struct store *s, const Sbx__V1__Task *t,
    const struct store_task *seen, const char *execution_id,
    const char *hash, const char *detail, const char *actor,
    int64_t egress_granted)
{
	struct store_ent	*ent;
	struct store_rec	*r;

	if ((ent = store_ent_find(s, t->id)) == NULL) {
		ent = xcalloc(1, sizeof(*ent));
		ent->task_id = xstrdup(t->id);
		if (seen != NULL) {
			ent->bound = *seen;
			ent->row = ROW_ON_DISK;
		} else {
			snprintf(ent->bound.tenant, sizeof(ent->bound.tenant),
			    "%s", t->tenant);
			snprintf(ent->bound.user, sizeof(ent->bound.user),
			    "%s", t->user);
			snprintf(ent->bound.type, sizeof(ent->bound.type),
			    "%s", t->type);
			ent->row = ROW_NONE;
		}
		if (tsearch(ent, &s->tasks, store_cmp) == NULL)
			fatal("tsearch");
	}
	r = store_rec_new(s, t->id, "compile", execution_id, hash, NULL,
	    detail, actor);
	r->ent = ent;
	if (detail != NULL && strncmp(detail, STORE_TMPL_PREFIX,
	    strlen(STORE_TMPL_PREFIX)) == 0)
		snprintf(ent->tmpl, sizeof(ent->tmpl), "%s", detail +
		    strlen(STORE_TMPL_PREFIX));
	{
		size_t	 len = 1, i;

		for (i = 0; i < t->n_datasets; i++)
			len += strlen(t->datasets[i]) + 1;
		r->datasets = xcalloc(1, len);
		for (i = 0; i < t->n_datasets; i++) {
			if (i > 0)
				strcat(r->datasets, "\n");
			strcat(r->datasets, t->datasets[i]);
		}
	}
	ent->refs++;
	ent->pending++;
	if (egress_granted >= 0) {
		r->eg_granted = egress_granted;
		ent->eg_pending += (uint64_t)egress_granted;
	}
}

/*
 * In a fleet, on the loop once r's batch is durable: its denials counted
 * in the fleet's database, and when that count crosses the fleet's
 * threshold, a "security-review" record in the open batch -- made by the
 * one replica whose increment crossed it, so once in the fleet.  A
 * database that cannot be reached leaves them uncounted there (logged):
 * the rows stay in this host's task_denials.
 */
static void
store_fleet_review(struct store *s, const struct store_rec *r)
{
	struct store_rec	*rv;
	char			 err[512], *rules = NULL, *t;
	int64_t			 n;
	uint32_t		 at;

	if (fleet_review_count(s->fleet, r->task_id, (uint32_t)r->nden,
	    s->review_at, s->host, &n, &at, err, sizeof(err)) == -1) {
		log_warnx("task %s: %zu denial%s not counted in the fleet's "
		    "store for the security review: %s", r->task_id, r->nden,
		    r->nden == 1 ? "" : "s", err);
		return;
	}
	if (at != s->review_at && at != s->fleet_at)
		log_warnx("security_review.denials is %u here, the fleet's "
		    "is %u (sbx_review): the fleet's holds", s->review_at, at);
	s->fleet_at = at;
	if (at == 0 || n < (int64_t)at || n - (int64_t)r->nden >= (int64_t)at)
		return;
	for (size_t i = 0; i < r->nden; i++) {
		size_t	 j;

		for (j = 0; j < i; j++)
			if (strcmp(r->den[j].rule, r->den[i].rule) == 0)
				break;
		if (j < i)
			continue;
		xasprintf(&t, "%s%s%s", rules != NULL ? rules : "",
		    rules != NULL ? "," : "", r->den[i].rule);
		free(rules);
		rules = t;
	}
	rv = store_rec_new(s, r->task_id, "security-review", r->execution_id,
	    r->hash, rules, NULL, r->actor);
	free(rv->detail);
	xasprintf(&rv->detail, "%lld denials across the fleet reached "
	    "security_review.denials %u (the last %zu at host %s)",
	    (long long)n, at, r->nden, s->host);
	rv->reviewed = 1;
	free(rules);
}

/*
 * Settle a batch that has run (or will never run) in the task map, then
 * empty it.  Event loop only.
 */
static void
store_finish(struct store *s, struct store_batch *b, int ok)
{
	for (size_t i = 0; i < b->n; i++) {
		struct store_rec	*r = &b->recs[i];
		struct store_ent	*ent = r->ent;

		if (ent != NULL) {
			ent->pending--;
			if (r->eg_granted > 0)
				ent->eg_pending -= (uint64_t)r->eg_granted;
			if (ok)
				ent->bound.executions++;
			if (r->insert_task)
				ent->row = ok ? ROW_ON_DISK : ROW_NONE;
			store_ent_release(s, ent);
		}
		if (ok && r->reviewed) {
			s->reviews++;
			log_warnx("task %s: its denials reached %u: security "
			    "review recorded", r->task_id, s->fleet != NULL ?
			    s->fleet_at : s->review_at);
		}
		if (!ok && r->reviewed && s->fleet != NULL)
			log_warnx("task %s: the fleet's security review was "
			    "counted here but its record did not commit: not "
			    "made again", r->task_id);
		if (ok && r->nden > 0 && s->fleet != NULL && b != &s->open)
			store_fleet_review(s, r);
		free(r->rule);
		free(r->detail);
		free(r->datasets);
		free(r->den);
	}
	b->n = 0;
	b->poisoned = 0;
}

/* Move the open batch to flight; decide which task rows it inserts. */
static void
store_handoff(struct store *s)
{
	struct store_batch	 tmp;

	for (size_t i = 0; i < s->open.n; i++) {
		struct store_rec	*r = &s->open.recs[i];

		/* A batch that failed gave its task rows back, so a later
		 * batch inserts them. */
		if (r->ent != NULL && r->ent->row == ROW_NONE) {
			r->insert_task = 1;
			r->ent->row = ROW_QUEUED;
		}
	}
	tmp = s->flight;		/* empty: keep its array */
	s->flight = s->open;
	s->open = tmp;
}

/* ---- running a batch: the writer thread, or store_commit() ---- */

static int
store_insert_task(struct store *s, const struct store_ent *ent)
{
	sqlite3_stmt	*st = s->st_task_insert;
	int		 rc;

	sqlite3_bind_text(st, 1, ent->task_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, ent->bound.tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, ent->bound.user, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, ent->bound.type, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, now_ns());
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		log_warnx("policyd.db: insert task %s: %s", ent->task_id,
		    sqlite3_errmsg(s->db));
		return -1;
	}
	return 0;
}

/* Insert a run's row (execution, task, granted) or set its spend
 * (execution, spent): the statements number their parameters so. */
static int
store_egress_row(struct store *s, sqlite3_stmt *st,
    const struct store_rec *r, int64_t n)
{
	int	 rc;

	sqlite3_bind_text(st, 1, r->execution_id, -1, SQLITE_STATIC);
	if (st == s->st_eg_insert) {
		sqlite3_bind_text(st, 2, r->task_id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, n);
	} else
		sqlite3_bind_int64(st, 2, n);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		log_warnx("policyd.db: egress of execution %s: %s",
		    r->execution_id, sqlite3_errmsg(s->db));
		return -1;
	}
	return 0;
}

/* The text of column col of a row st just stepped to, "" for NULL. */
static const char *
store_col(sqlite3_stmt *st, int col)
{
	const unsigned char	*v = sqlite3_column_text(st, col);

	return v != NULL ? (const char *)v : "";
}

/*
 * The security review, in the transaction of a record that reported
 * denials: once the task's count reaches review_at and its audit log has
 * no review yet, a "security-review" event naming the rules (sorted,
 * comma-separated) and, in its detail, how often each refused where.
 * 0, or -1 if the batch must roll back.
 */
static int
store_review(struct store *s, struct store_rec *r)
{
	Sbx__V1__AuditEvent	 ev;
	sqlite3_stmt		*st;
	char			*rules = NULL, *detail = NULL, *t;
	int64_t			 n = -1, nexec = 0;
	int			 rc, ret = -1;

	/* A fleet counts on the loop, from its database (store_fleet_review):
	 * this thread never touches the loop's connection. */
	if (s->review_at == 0 || s->fleet != NULL)
		return 0;
	st = s->st_reviewed;
	sqlite3_bind_text(st, 1, r->task_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc == SQLITE_ROW)
		return 0;
	if (rc != SQLITE_DONE)
		goto sqlfail;
	st = s->st_den_count;
	sqlite3_bind_text(st, 1, r->task_id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW) {
		n = sqlite3_column_int64(st, 0);
		nexec = sqlite3_column_int64(st, 1);
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (n == -1)
		goto sqlfail;
	if (n < (int64_t)s->review_at)
		return 0;
	st = s->st_den_rules;
	sqlite3_bind_text(st, 1, r->task_id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		rules = xstrdup(store_col(st, 0));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rules == NULL)
		goto sqlfail;
	xasprintf(&detail, "%lld denials in %lld execution%s reached "
	    "security_review.denials %u:", (long long)n, (long long)nexec,
	    nexec == 1 ? "" : "s", s->review_at);
	st = s->st_den_by_rule;
	sqlite3_bind_text(st, 1, r->task_id, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		xasprintf(&t, "%s %s/%s x%lld", detail, store_col(st, 0),
		    store_col(st, 1), (long long)sqlite3_column_int64(st, 2));
		free(detail);
		detail = t;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE)
		goto sqlfail;
	sbx__v1__audit_event__init(&ev);
	ev.time_ns = r->time_ns;
	ev.task_id = (char *)r->task_id;
	ev.execution_id = (char *)r->execution_id;
	ev.policy_hash = (char *)r->hash;
	ev.action = (char *)"security-review";
	ev.rule = rules;
	ev.detail = detail;
	ev.actor = (char *)r->actor;
	ev.traceparent = r->traceparent;
	if (audit_add(s->audit, &ev) == -1)
		log_warnx("task %s: cannot record the security-review event",
		    r->task_id);
	else {
		r->reviewed = 1;
		ret = 0;
	}
	audit_event_clear(&ev);
	free(rules);
	free(detail);
	return ret;
sqlfail:
	log_warnx("policyd.db: denials of task %s: %s", r->task_id,
	    sqlite3_errmsg(s->db));
	free(rules);
	return -1;
}

/* One more of (name, version, rule) in rollout_counts.  0 or -1. */
static int
store_rv_bump(struct store *s, const struct store_rec *r, const char *rule)
{
	sqlite3_stmt	*st = s->st_rv_count;
	int		 rc;

	sqlite3_bind_text(st, 1, r->rv_name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, r->rv_version);
	sqlite3_bind_text(st, 3, rule, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		log_warnx("policyd.db: rollout counts of %s@%u: %s",
		    r->rv_name, r->rv_version, sqlite3_errmsg(s->db));
		return -1;
	}
	return 0;
}

/* The record counted for its template version: one execution, and one
 * for each rule among its denials (a rule at two boundaries once). */
static int
store_rv_write(struct store *s, const struct store_rec *r)
{
	if (store_rv_bump(s, r, "") == -1)
		return -1;
	for (size_t i = 0; i < r->nden; i++) {
		size_t	 j;

		for (j = 0; j < i; j++)
			if (strcmp(r->den[j].rule, r->den[i].rule) == 0)
				break;
		if (j == i && store_rv_bump(s, r, r->den[i].rule) == -1)
			return -1;
	}
	return 0;
}

/* The record's denials, one row each, then perhaps the review. */
static int
store_write_denials(struct store *s, struct store_rec *r)
{
	sqlite3_stmt	*st = s->st_den_insert;
	int		 rc;

	for (size_t i = 0; i < r->nden; i++) {
		const struct store_denial *d = &r->den[i];

		sqlite3_bind_text(st, 1, r->task_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, r->execution_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, r->hash, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, d->time_ns);
		sqlite3_bind_text(st, 5, d->rule, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 6, d->boundary, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 7, d->detail, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		if (rc != SQLITE_DONE) {
			log_warnx("policyd.db: denials of task %s: %s",
			    r->task_id, sqlite3_errmsg(s->db));
			return -1;
		}
	}
	return store_review(s, r);
}

static int
store_write_rec(struct store *s, struct store_rec *r)
{
	Sbx__V1__AuditEvent	 ev;

	if (r->insert_task && store_insert_task(s, r->ent) == -1)
		return -1;
	if (r->datasets != NULL) {
		sqlite3_stmt	*st = s->st_inputs_put;
		int		 rc;

		sqlite3_bind_text(st, 1, r->task_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, r->datasets, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		if (rc != SQLITE_DONE) {
			log_warnx("policyd.db: datasets of task %s: %s",
			    r->task_id, sqlite3_errmsg(s->db));
			return -1;
		}
	}
	if (r->eg_granted >= 0 && store_egress_row(s, s->st_eg_insert, r,
	    r->eg_granted) == -1)
		return -1;
	if (r->eg_spent >= 0 && store_egress_row(s, s->st_eg_spent, r,
	    r->eg_spent) == -1)
		return -1;
	sbx__v1__audit_event__init(&ev);
	ev.time_ns = r->time_ns;
	ev.task_id = (char *)r->task_id;
	ev.execution_id = (char *)r->execution_id;
	ev.policy_hash = (char *)r->hash;
	ev.action = (char *)r->action;
	ev.rule = r->rule;
	ev.detail = r->detail;
	ev.actor = (char *)r->actor;
	ev.traceparent = r->traceparent;
	if (audit_add(s->audit, &ev) == -1) {
		log_warnx("task %s: cannot record the %s event", r->task_id,
		    r->action);
		return -1;
	}
	audit_event_clear(&ev);
	/* After the event that reports them: the review follows it. */
	if (r->nden > 0 && store_write_denials(s, r) == -1)
		return -1;
	if (r->rv_version != 0 && store_rv_write(s, r) == -1)
		return -1;
	return 0;
}

/*
 * One transaction for the whole batch: every record or none.  Reads only
 * what is fixed while the batch is in flight (the records, and the names
 * in their task entries).
 */
static int
store_run(struct store *s, struct store_batch *b)
{
	if (b->poisoned)
		return -1;
	if (b->n == 0)
		return 0;
	if (audit_begin(s->audit) == -1) {
		log_warnx("policyd.db: begin: %s", sqlite3_errmsg(s->db));
		return -1;
	}
	for (size_t i = 0; i < b->n; i++) {
		if (store_write_rec(s, &b->recs[i]) == -1) {
			audit_rollback(s->audit);
			return -1;
		}
	}
	if (audit_commit(s->audit) == -1) {
		log_warnx("policyd.db: commit: %s", sqlite3_errmsg(s->db));
		return -1;
	}
	return 0;
}

static void *
store_writer(void *arg)
{
	struct store	*s = arg;
	uint64_t	 one = 1;
	int		 rc;

	pthread_mutex_lock(&s->mtx);
	for (;;) {
		while (!s->job && !s->stop)
			pthread_cond_wait(&s->cv, &s->mtx);
		if (!s->job)
			break;
		pthread_mutex_unlock(&s->mtx);
		rc = store_run(s, &s->flight);
		pthread_mutex_lock(&s->mtx);
		s->job = 0;
		s->done = 1;
		s->result = rc;
		pthread_cond_broadcast(&s->cv);
		/* After done is set, so a wake-up never comes before the
		 * result it announces. */
		if (write(s->efd, &one, sizeof(one)) == -1 && errno != EAGAIN)
			log_warn("store: eventfd");
	}
	pthread_mutex_unlock(&s->mtx);
	return NULL;
}

static int
store_start_writer(struct store *s)
{
	sigset_t	 all, old;
	int		 rc;

	if (s->thread_up)
		return 0;
	if (s->efd == -1 &&
	    (s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1) {
		log_warn("store: eventfd");
		return -1;
	}
	/* Signals are the event loop's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&s->thread, NULL, store_writer, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		log_warnx("store: cannot start the writer thread: %s",
		    strerror(rc));
		return -1;
	}
	s->thread_up = 1;
	return 0;
}

int
store_done_fd(struct store *s)
{
	if (s->efd == -1 &&
	    (s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) == -1)
		log_warn("store: eventfd");
	return s->efd;
}

int
store_busy(const struct store *s)
{
	return s->busy;
}

int
store_submit(struct store *s)
{
	if (s->busy || !store_in_batch(s))
		return 0;
	if (store_start_writer(s) == -1)
		return -1;
	store_handoff(s);
	s->busy = 1;
	pthread_mutex_lock(&s->mtx);
	s->done = 0;
	s->job = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mtx);
	return 1;
}

int
store_reap(struct store *s, int *ok)
{
	uint64_t	 n;

	/* Reset the counter; the done flag, not the count, is the news. */
	if (s->efd != -1 && read(s->efd, &n, sizeof(n)) == -1 &&
	    errno != EAGAIN)
		log_warn("store: eventfd");
	return store_poll(s, ok);
}

int
store_poll(struct store *s, int *ok)
{
	int		 done, rc;

	if (!s->busy)
		return 0;
	pthread_mutex_lock(&s->mtx);
	done = s->done;
	rc = s->result;
	s->done = 0;
	pthread_mutex_unlock(&s->mtx);
	if (!done)
		return 0;
	store_finish(s, &s->flight, rc == 0);
	s->busy = 0;
	*ok = rc == 0;
	return 1;
}

int
store_wait(struct store *s)
{
	int	 rc;

	if (!s->busy)
		return 0;
	pthread_mutex_lock(&s->mtx);
	while (!s->done)
		pthread_cond_wait(&s->cv, &s->mtx);
	s->done = 0;
	rc = s->result;
	pthread_mutex_unlock(&s->mtx);
	store_finish(s, &s->flight, rc == 0);
	s->busy = 0;
	return rc;
}

int
store_commit(struct store *s)
{
	int	 rc;

	/* The batch in flight goes first: the chain is in arrival order.
	 * Its result is store_wait()'s to report; callers that hold its
	 * replies call that first. */
	(void)store_wait(s);
	if (!store_in_batch(s))
		return 0;
	store_handoff(s);
	rc = store_run(s, &s->flight) == 0 ? 0 : -1;
	store_finish(s, &s->flight, rc == 0);
	return rc;
}
