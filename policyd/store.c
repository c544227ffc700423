/*
 * store.c: policyd.db, the one SQLite database policyd keeps: tasks (the
 * first compile binds a task id to its tenant, user and type), executions
 * (one row per signed policy), the entitlements (entitle.c) and the audit
 * log (common/audit.c, on the same handle).  The invariant: an execution
 * row and its audit event commit in one transaction, durably
 * (synchronous=FULL), before any reply acknowledges them.  Compiles that
 * arrive together share that transaction (group commit), which is what
 * lets a disk doing a few thousand fsyncs a second record ten thousand
 * executions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "audit.h"
#include "log.h"
#include "util.h"
#include "policyd.h"

struct store {
	sqlite3		*db;
	struct audit	*audit;
	int		 in_batch;
	int		 poisoned;
	sqlite3_stmt	*st_task_get;
	sqlite3_stmt	*st_task_insert;
	sqlite3_stmt	*st_exec_count;
	sqlite3_stmt	*st_exec_insert;
	sqlite3_stmt	*st_exec_exists;
};

static const char store_schema[] =
    "CREATE TABLE IF NOT EXISTS tasks("
    " task_id TEXT PRIMARY KEY,"
    " tenant TEXT NOT NULL,"
    " user TEXT NOT NULL,"
    " type TEXT NOT NULL,"
    " created_ns INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS executions("
    " execution_id TEXT PRIMARY KEY,"
    " task_id TEXT NOT NULL REFERENCES tasks(task_id),"
    " policy_hash TEXT NOT NULL,"
    " template TEXT NOT NULL,"
    " version INTEGER NOT NULL,"
    " issued_at INTEGER NOT NULL,"
    " expires_at INTEGER NOT NULL,"
    " created_ns INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS executions_task ON executions(task_id);";

static int
store_prepare(struct store *s, const char *sql, sqlite3_stmt **st, char *err,
    size_t errlen)
{
	if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st,
	    NULL) != SQLITE_OK) {
		snprintf(err, errlen, "policyd.db: %s: %s", sql,
		    sqlite3_errmsg(s->db));
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
	if (sqlite3_exec(s->db, "PRAGMA foreign_keys=ON;"
	    "PRAGMA wal_autocheckpoint=8192", NULL, NULL,
	    &msg) != SQLITE_OK || sqlite3_exec(s->db, store_schema, NULL,
	    NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "%s: schema: %s", path,
		    msg != NULL ? msg : sqlite3_errmsg(s->db));
		sqlite3_free(msg);
		goto fail;
	}
	if (store_prepare(s, "SELECT tenant, user, type FROM tasks"
	    " WHERE task_id = ?", &s->st_task_get, err, errlen) == -1 ||
	    store_prepare(s, "INSERT INTO tasks(task_id, tenant, user, type,"
	    " created_ns) VALUES (?, ?, ?, ?, ?)", &s->st_task_insert, err,
	    errlen) == -1 ||
	    store_prepare(s, "SELECT count(*) FROM executions WHERE"
	    " task_id = ?", &s->st_exec_count, err, errlen) == -1 ||
	    store_prepare(s, "INSERT INTO executions(execution_id, task_id,"
	    " policy_hash, template, version, issued_at, expires_at,"
	    " created_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
	    &s->st_exec_insert, err, errlen) == -1 ||
	    store_prepare(s, "SELECT 1 FROM executions WHERE"
	    " execution_id = ?", &s->st_exec_exists, err, errlen) == -1)
		goto fail;
	return s;
fail:
	store_close(s);
	return NULL;
}

void
store_close(struct store *s)
{
	if (s == NULL)
		return;
	if (s->in_batch)
		store_rollback(s);
	sqlite3_finalize(s->st_task_get);
	sqlite3_finalize(s->st_task_insert);
	sqlite3_finalize(s->st_exec_count);
	sqlite3_finalize(s->st_exec_insert);
	sqlite3_finalize(s->st_exec_exists);
	audit_close(s->audit);
	if (s->db != NULL)
		sqlite3_close(s->db);
	free(s);
}

struct sqlite3 *
store_db(struct store *s)
{
	return s->db;
}

struct audit *
store_audit(struct store *s)
{
	return s->audit;
}

int
store_begin(struct store *s)
{
	if (s->in_batch)
		return 0;
	if (audit_begin(s->audit) == -1) {
		log_warnx("policyd.db: begin: %s", sqlite3_errmsg(s->db));
		return -1;
	}
	s->in_batch = 1;
	s->poisoned = 0;
	return 0;
}

int
store_in_batch(const struct store *s)
{
	return s->in_batch;
}

void
store_poison(struct store *s)
{
	s->poisoned = 1;
}

int
store_commit(struct store *s)
{
	if (!s->in_batch)
		return 0;
	s->in_batch = 0;
	if (s->poisoned) {
		audit_rollback(s->audit);
		return -1;
	}
	if (audit_commit(s->audit) == -1) {
		log_warnx("policyd.db: commit: %s", sqlite3_errmsg(s->db));
		return -1;
	}
	return 0;
}

void
store_rollback(struct store *s)
{
	if (!s->in_batch)
		return;
	s->in_batch = 0;
	audit_rollback(s->audit);
}

static void
store_copy(char *dst, size_t len, const unsigned char *src)
{
	snprintf(dst, len, "%s", src != NULL ? (const char *)src : "");
}

int
store_task_get(struct store *s, const char *task_id, struct store_task *t)
{
	sqlite3_stmt	*st = s->st_task_get;
	int		 rc, ret;

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
		    sqlite3_errmsg(s->db));
		ret = -1;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ret;
}

static int
store_step_done(struct store *s, sqlite3_stmt *st, const char *what)
{
	int	 rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		log_warnx("policyd.db: %s: %s", what, sqlite3_errmsg(s->db));
		return -1;
	}
	return 0;
}

int
store_task_insert(struct store *s, const Sbx__V1__Task *t)
{
	sqlite3_stmt	*st = s->st_task_insert;

	sqlite3_bind_text(st, 1, t->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, t->tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, t->user, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, t->type, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, now_ns());
	return store_step_done(s, st, "insert task");
}

int64_t
store_executions_count(struct store *s, const char *task_id)
{
	sqlite3_stmt	*st = s->st_exec_count;
	int64_t		 n = -1;

	sqlite3_bind_text(st, 1, task_id, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	else
		log_warnx("policyd.db: count executions of %s: %s", task_id,
		    sqlite3_errmsg(s->db));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return n;
}

int
store_execution_insert(struct store *s, const char *execution_id,
    const char *task_id, const char *hash, const char *template,
    uint32_t version, int64_t issued_at, int64_t expires_at)
{
	sqlite3_stmt	*st = s->st_exec_insert;

	sqlite3_bind_text(st, 1, execution_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, task_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, template, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, version);
	sqlite3_bind_int64(st, 6, issued_at);
	sqlite3_bind_int64(st, 7, expires_at);
	sqlite3_bind_int64(st, 8, now_ns());
	return store_step_done(s, st, "insert execution");
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
