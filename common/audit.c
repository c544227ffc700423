/*
 * audit.c: each daemon's append-only, hash-chained audit log in SQLite.
 *
 * Invariant: record n (n = 1, 2, ...) stores the hash of record n-1 (32
 * zero bytes for record 1), and its own hash is SHA-256 over the protobuf
 * encoding of the event with `hash` empty, so prev_hash, seq and every
 * other field are inside what is hashed (proto/README.md, "Audit
 * events").  The one-row table audit_head names the last committed record
 * and its hash and moves in the same transaction as the inserts, so a
 * record that is changed, inserted, reordered or deleted -- the last one
 * included -- shows up in audit_verify().  Triggers refuse UPDATE and
 * DELETE on the log, an insert that does not extend the chain, and any
 * head move that goes backwards or names a record that is not there;
 * someone with write access to the file can drop triggers, which is why
 * audit_verify() trusts none of them.  The hash is unkeyed: a writer who
 * recomputes every hash and the head as well is not detected; copying the
 * head elsewhere (or signing it) is what catches that, and is outside this
 * file.
 *
 * Group commit is the fast path: inside a transaction that audit_begin()
 * opened we hold SQLite's write lock, so the chain's end is known without
 * reading it back, an add is one INSERT, and the head moves once, in
 * audit_commit().  Commit and rollback hooks on the handle tell us when
 * that transaction has ended, however it ended.
 *
 * Durability: the database runs in WAL mode with synchronous=FULL, so
 * COMMIT returns only after the WAL is fsync'ed; audit_append() and
 * audit_commit() return 0 only then.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>
#include <sqlite3.h>

#include "audit.h"
#include "log.h"
#include "util.h"

#define AUDIT_HASHLEN	32

struct audit {
	sqlite3		*db;
	int		 own_db;	/* opened by audit_open: we close it */
	char		*daemon;
	/* The chain's end as of the last add, commit or rollback. */
	uint64_t	 last_seq;
	unsigned char	 last_hash[AUDIT_HASHLEN];
	/*
	 * Set by audit_begin(), cleared by the commit and rollback hooks: we
	 * hold the write lock of a transaction we opened, so last_* is the
	 * chain's end.  head_behind: records were added in it and
	 * audit_head has not moved yet.
	 */
	int		 own_txn;
	int		 head_behind;
	sqlite3_stmt	*st_head;
	sqlite3_stmt	*st_insert;
	sqlite3_stmt	*st_move_head;
	sqlite3_stmt	*st_query_task;
	sqlite3_stmt	*st_query_all;
	sqlite3_stmt	*st_walk;
};

static const char audit_schema[] =
    "CREATE TABLE IF NOT EXISTS audit("
    " seq INTEGER PRIMARY KEY,"
    " time_ns INTEGER NOT NULL,"
    " daemon TEXT, task_id TEXT, execution_id TEXT, policy_hash TEXT,"
    " action TEXT, rule TEXT, detail TEXT, actor TEXT,"
    " prev_hash BLOB NOT NULL,"
    " hash BLOB NOT NULL,"
    " traceparent TEXT);"
    "CREATE INDEX IF NOT EXISTS audit_task ON audit(task_id, seq);"
    "CREATE TABLE IF NOT EXISTS audit_head("
    " id INTEGER PRIMARY KEY CHECK(id = 1),"
    " seq INTEGER NOT NULL,"
    " hash BLOB NOT NULL);"
    /* A new log starts with an empty chain.  A log that has records but
     * lost its head gets no new one: audit_verify() reports it. */
    "INSERT INTO audit_head(id, seq, hash)"
    " SELECT 1, 0, zeroblob(32)"
    " WHERE NOT EXISTS (SELECT 1 FROM audit_head)"
    " AND NOT EXISTS (SELECT 1 FROM audit);"
    "CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit"
    " BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;"
    "CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit"
    " BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;"
    "CREATE TRIGGER IF NOT EXISTS audit_head_no_delete"
    " BEFORE DELETE ON audit_head"
    " BEGIN SELECT RAISE(ABORT, 'audit log is append-only'); END;";

/*
 * The two triggers that check the chain as it grows, (re)created on every
 * open so a log made by an older version gets these definitions.  Within
 * one transaction the head moves only at commit, so a record extends
 * either the head or the record just before it that is already past the
 * head.  They catch a bug (ours or a caller's stray INSERT or UPDATE) at
 * once rather than at the next verify.
 */
static const char audit_chain_triggers[] =
    "DROP TRIGGER IF EXISTS audit_chain;"
    "CREATE TRIGGER audit_chain BEFORE INSERT ON audit"
    " WHEN NOT EXISTS (SELECT 1 FROM audit_head h WHERE"
    "  (NEW.seq = h.seq + 1 AND NEW.prev_hash = h.hash)"
    "  OR (NEW.seq > h.seq + 1 AND EXISTS (SELECT 1 FROM audit p"
    "   WHERE p.seq = NEW.seq - 1 AND p.hash = NEW.prev_hash)))"
    " BEGIN SELECT RAISE(ABORT, 'audit record does not extend the chain');"
    " END;"
    "DROP TRIGGER IF EXISTS audit_head_follows;"
    "CREATE TRIGGER audit_head_follows BEFORE UPDATE ON audit_head"
    " WHEN NEW.seq <= OLD.seq"
    " OR NOT EXISTS (SELECT 1 FROM audit"
    "  WHERE seq = NEW.seq AND hash = NEW.hash)"
    " BEGIN SELECT RAISE(ABORT, 'audit head must follow the chain'); END;";

#define AUDIT_COLS \
    "seq, time_ns, daemon, task_id, execution_id, policy_hash, action, " \
    "rule, detail, actor, prev_hash, hash, traceparent"

static int
audit_exec(struct audit *a, const char *sql)
{
	char	*msg = NULL;

	if (sqlite3_exec(a->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		log_warnx("audit: %s: %s", sql, msg ? msg :
		    sqlite3_errmsg(a->db));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

static int
audit_prepare(struct audit *a, const char *sql, sqlite3_stmt **st,
    char *err, size_t errlen)
{
	if (sqlite3_prepare_v3(a->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st,
	    NULL) != SQLITE_OK) {
		snprintf(err, errlen, "cannot prepare audit statement: %s",
		    sqlite3_errmsg(a->db));
		return -1;
	}
	return 0;
}

/*
 * Read the chain's end from audit_head into the cache.  -1 if the head is
 * missing or malformed: appending then would fork or restart the chain.
 */
static int
audit_load_head(struct audit *a)
{
	sqlite3_stmt	*st = a->st_head;
	const void	*h;
	int		 rc, ret = -1;

	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		h = sqlite3_column_blob(st, 1);
		if (sqlite3_column_int64(st, 0) >= 0 &&
		    sqlite3_column_bytes(st, 1) == AUDIT_HASHLEN && h != NULL) {
			a->last_seq = (uint64_t)sqlite3_column_int64(st, 0);
			memcpy(a->last_hash, h, AUDIT_HASHLEN);
			ret = 0;
		} else
			log_warnx("audit: the audit head is malformed");
	} else if (rc == SQLITE_DONE)
		log_warnx("audit: the audit head is missing");
	else
		log_warnx("audit: cannot read the audit head: %s",
		    sqlite3_errmsg(a->db));
	sqlite3_reset(st);
	return ret;
}

struct audit *
audit_open(const char *path, const char *daemon, char *err, size_t errlen)
{
	struct audit	*a;
	sqlite3		*db = NULL;
	int		 fd;

	/* Create the file ourselves so its mode is 0600 whatever the umask;
	 * SQLite gives the -wal and -shm files the same mode. */
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
	    0600);
	if (fd == -1) {
		snprintf(err, errlen, "cannot open audit log %s: %s", path,
		    strerror(errno));
		return NULL;
	}
	close(fd);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOFOLLOW, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "cannot open audit log %s: %s", path,
		    db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, 5000);
	if ((a = audit_open_db(db, daemon, err, errlen)) == NULL) {
		sqlite3_close(db);
		return NULL;
	}
	a->own_db = 1;
	return a;
}

/*
 * A log made before records had a traceparent gets the column (NULL in
 * its old rows, which read back as "": an empty proto3 string is not
 * encoded, so their hashes stay what they were).
 */
static int
audit_add_traceparent(struct audit *a)
{
	sqlite3_stmt	*st;

	if (sqlite3_prepare_v2(a->db, "SELECT traceparent FROM audit LIMIT 0",
	    -1, &st, NULL) == SQLITE_OK) {
		sqlite3_finalize(st);
		return 0;
	}
	return audit_exec(a, "ALTER TABLE audit ADD COLUMN traceparent TEXT");
}

static int
audit_pragma(sqlite3 *db, const char *sql, const char *want, char *err,
    size_t errlen)
{
	sqlite3_stmt	*st;
	const char	*got;
	int		 rc, ret = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", sql, sqlite3_errmsg(db));
		return -1;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
		got = rc == SQLITE_ROW ?
		    (const char *)sqlite3_column_text(st, 0) : NULL;
		if (want != NULL && (got == NULL || strcmp(got, want) != 0))
			snprintf(err, errlen, "%s: the database stays in "
			    "journal mode %s", sql, got ? got : "(none)");
		else
			ret = 0;
	} else
		snprintf(err, errlen, "%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return ret;
}

/*
 * Any commit or rollback on the handle ends the transaction audit_begin()
 * opened, whoever issued it; after that last_* is only a cache again.
 */
static int
audit_txn_ended(void *arg)
{
	struct audit	*a = arg;

	a->own_txn = 0;
	a->head_behind = 0;
	return 0;	/* let the commit go ahead */
}

static void
audit_txn_rolled_back(void *arg)
{
	(void)audit_txn_ended(arg);
}

struct audit *
audit_open_db(struct sqlite3 *db, const char *daemon, char *err,
    size_t errlen)
{
	struct audit	*a;

	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium could not be initialised");
		return NULL;
	}
	/*
	 * Set on a shared handle too: the records must be durable when a
	 * commit returns, whoever opened the database.  (An in-memory
	 * database answers "memory"; that is only ever a test.)
	 */
	if (audit_pragma(db, "PRAGMA journal_mode=WAL", NULL, err,
	    errlen) == -1 ||
	    audit_pragma(db, "PRAGMA synchronous=FULL", NULL, err,
	    errlen) == -1)
		return NULL;

	a = xcalloc(1, sizeof(*a));
	a->db = db;
	a->daemon = xstrdup(daemon ? daemon : "");
	if (audit_exec(a, "SAVEPOINT audit_schema") == -1) {
		snprintf(err, errlen, "cannot create the audit schema: %s",
		    sqlite3_errmsg(db));
		goto fail;
	}
	if (audit_exec(a, audit_schema) == -1 ||
	    audit_add_traceparent(a) == -1 ||
	    audit_exec(a, audit_chain_triggers) == -1) {
		snprintf(err, errlen, "cannot create the audit schema: %s",
		    sqlite3_errmsg(db));
		audit_exec(a, "ROLLBACK TO audit_schema");
		audit_exec(a, "RELEASE audit_schema");
		goto fail;
	}
	if (audit_exec(a, "RELEASE audit_schema") == -1) {
		snprintf(err, errlen, "cannot create the audit schema: %s",
		    sqlite3_errmsg(db));
		goto fail;
	}
	if (audit_prepare(a, "SELECT seq, hash FROM audit_head WHERE id = 1",
	    &a->st_head, err, errlen) == -1 ||
	    audit_prepare(a, "INSERT INTO audit(" AUDIT_COLS ") VALUES"
	    "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
	    &a->st_insert, err, errlen) == -1 ||
	    audit_prepare(a, "UPDATE audit_head SET seq = ?1, hash = ?2 "
	    "WHERE id = 1", &a->st_move_head, err, errlen) == -1 ||
	    audit_prepare(a, "SELECT " AUDIT_COLS " FROM audit "
	    "WHERE task_id = ?1 AND seq > ?3 ORDER BY seq LIMIT ?2",
	    &a->st_query_task, err, errlen) == -1 ||
	    audit_prepare(a, "SELECT " AUDIT_COLS " FROM audit "
	    "WHERE seq > ?2 ORDER BY seq LIMIT ?1", &a->st_query_all, err,
	    errlen) == -1 ||
	    audit_prepare(a, "SELECT " AUDIT_COLS " FROM audit ORDER BY seq",
	    &a->st_walk, err, errlen) == -1)
		goto fail;
	/* A missing head is not fatal here: verify must still be able to
	 * say so.  Appending refuses until then. */
	(void)audit_load_head(a);
	sqlite3_commit_hook(db, audit_txn_ended, a);
	sqlite3_rollback_hook(db, audit_txn_rolled_back, a);
	return a;
fail:
	a->db = NULL;	/* the caller's, or audit_open closes it */
	audit_close(a);
	return NULL;
}

void
audit_close(struct audit *a)
{
	if (a == NULL)
		return;
	if (a->db != NULL) {
		sqlite3_commit_hook(a->db, NULL, NULL);
		sqlite3_rollback_hook(a->db, NULL, NULL);
	}
	sqlite3_finalize(a->st_head);
	sqlite3_finalize(a->st_insert);
	sqlite3_finalize(a->st_move_head);
	sqlite3_finalize(a->st_query_task);
	sqlite3_finalize(a->st_query_all);
	sqlite3_finalize(a->st_walk);
	if (a->own_db && a->db != NULL)
		sqlite3_close(a->db);
	free(a->daemon);
	free(a);
}

int
audit_begin(struct audit *a)
{
	if (audit_exec(a, "BEGIN IMMEDIATE") == -1)
		return -1;
	/* Another connection may have appended since we last looked. */
	if (audit_load_head(a) == -1) {
		audit_exec(a, "ROLLBACK");
		return -1;
	}
	a->own_txn = 1;
	a->head_behind = 0;
	return 0;
}

/* Point audit_head at the last record added in our transaction. */
static int
audit_move_head(struct audit *a)
{
	sqlite3_stmt	*st = a->st_move_head;
	int		 rc;

	sqlite3_bind_int64(st, 1, (sqlite3_int64)a->last_seq);
	sqlite3_bind_blob(st, 2, a->last_hash, AUDIT_HASHLEN, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE || sqlite3_changes(a->db) != 1) {
		log_warnx("audit: cannot move the audit head to record %llu: "
		    "%s", (unsigned long long)a->last_seq,
		    sqlite3_errmsg(a->db));
		return -1;
	}
	a->head_behind = 0;
	return 0;
}

int
audit_commit(struct audit *a)
{
	if (a->own_txn && a->head_behind && audit_move_head(a) == -1) {
		audit_rollback(a);
		return -1;
	}
	if (audit_exec(a, "COMMIT") == 0)
		return 0;
	/* Nothing of this transaction may look acknowledged. */
	if (!sqlite3_get_autocommit(a->db))
		audit_exec(a, "ROLLBACK");
	(void)audit_load_head(a);
	return -1;
}

int
audit_rollback(struct audit *a)
{
	int	 rc = 0;

	if (!sqlite3_get_autocommit(a->db))
		rc = audit_exec(a, "ROLLBACK");
	a->own_txn = 0;
	a->head_behind = 0;
	if (audit_load_head(a) == -1)
		rc = -1;
	return rc;
}

int
audit_event_hash(const Sbx__V1__AuditEvent *ev, unsigned char out[32])
{
	Sbx__V1__AuditEvent	 copy = *ev;
	uint8_t			 stackbuf[1024];
	uint8_t			*buf;
	size_t			 len;

	copy.hash.data = NULL;
	copy.hash.len = 0;
	len = sbx__v1__audit_event__get_packed_size(&copy);
	buf = len <= sizeof(stackbuf) ? stackbuf : xmalloc(len);
	if (sbx__v1__audit_event__pack(&copy, buf) != len) {
		if (buf != stackbuf)
			free(buf);
		return -1;
	}
	sha256_buf(buf, len, out);
	if (buf != stackbuf)
		free(buf);
	return 0;
}

static int
audit_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	return sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_STATIC);
}

/* The INSERT of one finished event. */
static int
audit_insert(struct audit *a, const Sbx__V1__AuditEvent *ev)
{
	sqlite3_stmt	*st = a->st_insert;
	int		 rc;

	if (ev->seq > INT64_MAX)
		return -1;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)ev->seq);
	sqlite3_bind_int64(st, 2, ev->time_ns);
	audit_bind_text(st, 3, ev->daemon);
	audit_bind_text(st, 4, ev->task_id);
	audit_bind_text(st, 5, ev->execution_id);
	audit_bind_text(st, 6, ev->policy_hash);
	audit_bind_text(st, 7, ev->action);
	audit_bind_text(st, 8, ev->rule);
	audit_bind_text(st, 9, ev->detail);
	audit_bind_text(st, 10, ev->actor);
	sqlite3_bind_blob(st, 11, ev->prev_hash.data, (int)ev->prev_hash.len,
	    SQLITE_STATIC);
	sqlite3_bind_blob(st, 12, ev->hash.data, (int)ev->hash.len,
	    SQLITE_STATIC);
	audit_bind_text(st, 13, ev->traceparent);
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		log_warnx("audit: cannot insert record %llu: %s",
		    (unsigned long long)ev->seq, sqlite3_errmsg(a->db));
		return -1;
	}
	return 0;
}

/*
 * Chain e after the cached end of the log and insert it.  On success the
 * cache names e; prev and hash hold e's hashes (e points at them).
 */
static int
audit_chain_insert(struct audit *a, Sbx__V1__AuditEvent *e,
    unsigned char prev[AUDIT_HASHLEN], unsigned char hash[AUDIT_HASHLEN])
{
	memcpy(prev, a->last_hash, AUDIT_HASHLEN);
	e->seq = a->last_seq + 1;
	if (e->time_ns == 0)
		e->time_ns = now_ns();
	e->daemon = a->daemon;
	e->prev_hash.data = prev;
	e->prev_hash.len = AUDIT_HASHLEN;
	e->hash.data = NULL;
	e->hash.len = 0;
	if (audit_event_hash(e, hash) == -1)
		return -1;
	e->hash.data = hash;
	e->hash.len = AUDIT_HASHLEN;
	if (audit_insert(a, e) == -1)
		return -1;
	a->last_seq = e->seq;
	memcpy(a->last_hash, hash, AUDIT_HASHLEN);
	return 0;
}

/*
 * An add inside a transaction someone else opened: we do not hold the
 * chain's end, so read it inside this write transaction (a ROLLBACK issued
 * directly on a shared handle, or an append by another connection, would
 * otherwise fork the chain), and move the head with the record, since we
 * do not see the commit.  A savepoint keeps a failed add from leaving half
 * a record in the caller's transaction.
 */
static int
audit_add_foreign(struct audit *a, Sbx__V1__AuditEvent *e,
    unsigned char prev[AUDIT_HASHLEN], unsigned char hash[AUDIT_HASHLEN])
{
	if (audit_exec(a, "SAVEPOINT audit_add") == -1)
		return -1;
	if (audit_load_head(a) == 0 &&
	    audit_chain_insert(a, e, prev, hash) == 0 &&
	    audit_move_head(a) == 0 &&
	    audit_exec(a, "RELEASE audit_add") == 0)
		return 0;
	audit_exec(a, "ROLLBACK TO audit_add");
	audit_exec(a, "RELEASE audit_add");
	(void)audit_load_head(a);
	return -1;
}

/*
 * On success ev->daemon, ev->prev_hash and ev->hash are replaced by
 * malloc'd copies that belong to the caller (audit_event_clear() frees
 * them); whatever those fields pointed to before is not freed.  On
 * failure ev is untouched.
 */
int
audit_add(struct audit *a, Sbx__V1__AuditEvent *ev)
{
	Sbx__V1__AuditEvent	 e = *ev;
	unsigned char		 prev[AUDIT_HASHLEN], hash[AUDIT_HASHLEN];

	if (sqlite3_get_autocommit(a->db)) {
		/* Outside a transaction the add is its own. */
		if (audit_begin(a) == -1)
			return -1;
		if (audit_chain_insert(a, &e, prev, hash) == -1) {
			audit_rollback(a);
			return -1;
		}
		a->head_behind = 1;
		if (audit_commit(a) == -1)
			return -1;
	} else if (a->own_txn) {
		/* A failed INSERT is undone on its own (statement
		 * rollback), so no savepoint is needed here. */
		if (audit_chain_insert(a, &e, prev, hash) == -1)
			return -1;
		a->head_behind = 1;
	} else if (audit_add_foreign(a, &e, prev, hash) == -1)
		return -1;

	ev->seq = e.seq;
	ev->time_ns = e.time_ns;
	ev->daemon = xstrdup(a->daemon);
	ev->prev_hash.data = xmalloc(sizeof(prev));
	memcpy(ev->prev_hash.data, prev, sizeof(prev));
	ev->prev_hash.len = sizeof(prev);
	ev->hash.data = xmalloc(sizeof(hash));
	memcpy(ev->hash.data, hash, sizeof(hash));
	ev->hash.len = sizeof(hash);
	return 0;
}

void
audit_event_clear(Sbx__V1__AuditEvent *ev)
{
	if (ev == NULL)
		return;
	if (ev->daemon != NULL && ev->daemon != protobuf_c_empty_string)
		free(ev->daemon);
	ev->daemon = (char *)protobuf_c_empty_string;
	free(ev->prev_hash.data);
	free(ev->hash.data);
	ev->prev_hash.data = ev->hash.data = NULL;
	ev->prev_hash.len = ev->hash.len = 0;
}

int
audit_append(struct audit *a, Sbx__V1__AuditEvent *ev)
{
	if (audit_begin(a) == -1)
		return -1;
	if (audit_add(a, ev) == -1) {
		audit_rollback(a);
		return -1;
	}
	if (audit_commit(a) == -1) {
		audit_event_clear(ev);
		return -1;
	}
	return 0;
}

static char *
audit_col_text(sqlite3_stmt *st, int i)
{
	const unsigned char	*s = sqlite3_column_text(st, i);

	return xstrdup(s ? (const char *)s : "");
}

static void
audit_col_blob(sqlite3_stmt *st, int i, ProtobufCBinaryData *b)
{
	const void	*p = sqlite3_column_blob(st, i);
	int		 n = sqlite3_column_bytes(st, i);

	if (p == NULL || n <= 0) {
		b->data = NULL;
		b->len = 0;
		return;
	}
	b->data = xmalloc((size_t)n);
	memcpy(b->data, p, (size_t)n);
	b->len = (size_t)n;
}

/*
 * A heap event from the current row, every string and byte field malloc'd
 * as protobuf-c's unpack would leave it, so either audit_events_free() or
 * sbx__v1__audit_event__free_unpacked() releases it.
 */
static Sbx__V1__AuditEvent *
audit_row_event(sqlite3_stmt *st)
{
	Sbx__V1__AuditEvent	*ev = xmalloc(sizeof(*ev));

	sbx__v1__audit_event__init(ev);
	ev->seq = (uint64_t)sqlite3_column_int64(st, 0);
	ev->time_ns = sqlite3_column_int64(st, 1);
	ev->daemon = audit_col_text(st, 2);
	ev->task_id = audit_col_text(st, 3);
	ev->execution_id = audit_col_text(st, 4);
	ev->policy_hash = audit_col_text(st, 5);
	ev->action = audit_col_text(st, 6);
	ev->rule = audit_col_text(st, 7);
	ev->detail = audit_col_text(st, 8);
	ev->actor = audit_col_text(st, 9);
	audit_col_blob(st, 10, &ev->prev_hash);
	audit_col_blob(st, 11, &ev->hash);
	ev->traceparent = audit_col_text(st, 12);
	return ev;
}

int
audit_query(struct audit *a, const char *task_id, uint32_t limit,
    Sbx__V1__AuditEvent ***out, size_t *n)
{
	return audit_query_after(a, task_id, 0, limit, out, n);
}

int
audit_query_after(struct audit *a, const char *task_id, uint64_t after_seq,
    uint32_t limit, Sbx__V1__AuditEvent ***out, size_t *n)
{
	Sbx__V1__AuditEvent	**v = NULL;
	sqlite3_stmt		 *st;
	sqlite3_int64		  lim = limit == 0 ? -1 : (sqlite3_int64)limit;
	size_t			  cnt = 0, cap = 0;
	int			  rc;

	*out = NULL;
	*n = 0;
	if (after_seq >= INT64_MAX)
		return 0;	/* no record is numbered past that */
	if (task_id != NULL && *task_id != '\0') {
		st = a->st_query_task;
		sqlite3_bind_text(st, 1, task_id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, lim);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)after_seq);
	} else {
		st = a->st_query_all;
		sqlite3_bind_int64(st, 1, lim);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)after_seq);
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			v = xreallocarray(v, cap, sizeof(*v));
		}
		v[cnt++] = audit_row_event(st);
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != SQLITE_DONE) {
		log_warnx("audit: cannot query the audit log: %s",
		    sqlite3_errmsg(a->db));
		audit_events_free(v, cnt);
		return -1;
	}
	*out = v;
	*n = cnt;
	return 0;
}

void
audit_events_free(Sbx__V1__AuditEvent **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sbx__v1__audit_event__free_unpacked(v[i], NULL);
	free(v);
}

static int
audit_hash_eq(const ProtobufCBinaryData *b, const unsigned char h[32])
{
	return b->len == AUDIT_HASHLEN && b->data != NULL &&
	    sodium_memcmp(b->data, h, AUDIT_HASHLEN) == 0;
}

static void
audit_bad(Sbx__V1__AuditVerifyReply *r, uint64_t seq, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
audit_bad(Sbx__V1__AuditVerifyReply *r, uint64_t seq, const char *fmt, ...)
{
	va_list	 ap;

	if (!r->ok)
		return;		/* only the first problem is reported */
	r->ok = 0;
	r->first_bad_seq = seq;
	if (r->problem != protobuf_c_empty_string)
		free(r->problem);
	va_start(ap, fmt);
	if (vasprintf(&r->problem, fmt, ap) == -1)
		fatal("vasprintf");
	va_end(ap);
}

/*
 * The walk and the head are read in one read transaction when we are not
 * already in one, so an append between them cannot look like tampering.
 */
int
audit_verify(struct audit *a, Sbx__V1__AuditVerifyReply *r)
{
	Sbx__V1__AuditEvent	*ev;
	sqlite3_stmt		*st = a->st_walk;
	unsigned char		 prev[AUDIT_HASHLEN] = { 0 };
	unsigned char		 h[AUDIT_HASHLEN];
	uint64_t		 expect = 1, last = 0, head_seq;
	unsigned char		 head_hash[AUDIT_HASHLEN];
	int			 rc, read_txn, have_head, ret = 0;

	sbx__v1__audit_verify_reply__init(r);
	r->ok = 1;
	r->daemon = xstrdup(a->daemon);
	r->problem = xstrdup("");

	read_txn = sqlite3_get_autocommit(a->db);
	if (read_txn && audit_exec(a, "BEGIN") == -1) {
		audit_bad(r, 0, "cannot read the audit log: %s",
		    sqlite3_errmsg(a->db));
		return -1;
	}
	/* Inside our own batch the head moves at commit; bring it up to
	 * the records added so far, so they are not taken for forgeries. */
	if (a->own_txn && a->head_behind && audit_move_head(a) == -1) {
		audit_bad(r, 0, "cannot move the audit head: %s",
		    sqlite3_errmsg(a->db));
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		r->records++;
		if (!r->ok)
			continue;	/* keep counting */
		ev = audit_row_event(st);
		if (sqlite3_column_int64(st, 0) <= 0 || ev->seq < expect) {
			audit_bad(r, ev->seq, "record %lld has an invalid "
			    "sequence number", sqlite3_column_int64(st, 0));
		} else if (ev->seq != expect) {
			audit_bad(r, expect, "record %llu missing (deleted?)",
			    (unsigned long long)expect);
		} else if (!audit_hash_eq(&ev->prev_hash, prev)) {
			audit_bad(r, ev->seq, "record %llu does not follow "
			    "record %llu (inserted or reordered?)",
			    (unsigned long long)ev->seq,
			    (unsigned long long)ev->seq - 1);
		} else if (audit_event_hash(ev, h) == -1 ||
		    !audit_hash_eq(&ev->hash, h)) {
			audit_bad(r, ev->seq, "record %llu was modified",
			    (unsigned long long)ev->seq);
		} else {
			/* Chain to the stored hash, which equals h here. */
			memcpy(prev, h, sizeof(prev));
			last = ev->seq;
			expect = ev->seq + 1;
		}
		sbx__v1__audit_event__free_unpacked(ev, NULL);
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		audit_bad(r, expect, "cannot read the audit log: %s",
		    sqlite3_errmsg(a->db));
		ret = -1;
	}

	have_head = audit_load_head(a) == 0;
	head_seq = a->last_seq;
	memcpy(head_hash, a->last_hash, sizeof(head_hash));
	if (read_txn)
		audit_exec(a, "COMMIT");
	if (ret == -1 || !r->ok)
		return ret;

	if (!have_head)
		audit_bad(r, last + 1, "the audit head is missing or "
		    "malformed; the end of the log cannot be checked");
	else if (head_seq > last)
		audit_bad(r, last + 1, "last record(s) deleted: the log ends "
		    "at record %llu but its head names record %llu",
		    (unsigned long long)last, (unsigned long long)head_seq);
	else if (head_seq < last)
		audit_bad(r, head_seq + 1, "records %llu to %llu were added "
		    "behind the audit head (inserted?)",
		    (unsigned long long)head_seq + 1,
		    (unsigned long long)last);
	else if (sodium_memcmp(head_hash, prev, sizeof(prev)) != 0)
		audit_bad(r, last, "record %llu does not match the audit "
		    "head (modified or replaced?)", (unsigned long long)last);
	return 0;
}

void
audit_verify_clear(Sbx__V1__AuditVerifyReply *r)
{
	if (r == NULL)
		return;
	if (r->problem != NULL && r->problem != protobuf_c_empty_string)
		free(r->problem);
	if (r->daemon != NULL && r->daemon != protobuf_c_empty_string)
		free(r->daemon);
	r->problem = (char *)protobuf_c_empty_string;
	r->daemon = (char *)protobuf_c_empty_string;
}
