/*
 * audit_test.c: the hash-chained audit log.  Appended records verify;
 * a record that someone with write access to the file changes, deletes
 * (in the middle or at the end) or forges is found by audit_verify(), at
 * the right sequence number; the triggers refuse an ordinary UPDATE; an
 * appended record is visible to another connection as soon as
 * audit_append() returns; group commit and rollback keep the chain whole.
 */
#include <sys/stat.h>

#include <criterion/criterion.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin.h"
#include "audit.h"
#include "util.h"

struct fixture {
	char		 dir[64];
	char		 path[128];
	struct audit	*a;
};

static void
fx_setup(struct fixture *fx)
{
	char	 err[256];

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/audit_test.XXXXXX");
	cr_assert_not_null(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/audit.db", fx->dir);
	fx->a = audit_open(fx->path, "policyd", err, sizeof(err));
	cr_assert_not_null(fx->a, "audit_open: %s", err);
}

static void
fx_teardown(struct fixture *fx)
{
	char	 cmd[128];

	audit_close(fx->a);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	(void)system(cmd);
}

/* Event i of a run, for task "t-(i % 3)". */
static void
event_init(Sbx__V1__AuditEvent *ev, int i, char *task, size_t tasklen,
    char *detail, size_t detaillen)
{
	sbx__v1__audit_event__init(ev);
	snprintf(task, tasklen, "t-%d", i % 3);
	snprintf(detail, detaillen, "event %d", i);
	ev->task_id = task;
	ev->execution_id = "x-1";
	ev->policy_hash = "ab12";
	ev->action = i % 2 ? "deny" : "compile";
	ev->rule = i % 2 ? "network.allow" : "";
	ev->detail = detail;
	ev->actor = "uid 1000";
}

static void
append_n(struct audit *a, int from, int n)
{
	Sbx__V1__AuditEvent	 ev;
	char			 task[16], detail[32];

	for (int i = from; i < from + n; i++) {
		event_init(&ev, i, task, sizeof(task), detail, sizeof(detail));
		cr_assert_eq(audit_append(a, &ev), 0, "append %d", i);
		cr_assert_eq(ev.seq, (uint64_t)i + 1);
		audit_event_clear(&ev);
	}
}

/* Verify; return first_bad_seq (0 if ok) and copy the problem. */
static uint64_t
verify(struct audit *a, uint64_t want_records, char *problem, size_t len)
{
	Sbx__V1__AuditVerifyReply	 r;
	uint64_t			 bad;

	cr_assert_eq(audit_verify(a, &r), 0);
	cr_assert_eq(r.records, want_records, "records %llu, want %llu",
	    (unsigned long long)r.records, (unsigned long long)want_records);
	cr_assert_str_eq(r.daemon, "policyd");
	snprintf(problem, len, "%s", r.problem);
	bad = r.ok ? 0 : r.first_bad_seq;
	cr_assert(r.ok ? r.problem[0] == '\0' : r.problem[0] != '\0');
	cr_assert(r.ok || r.first_bad_seq != 0);
	audit_verify_clear(&r);
	return bad;
}

/* The attacker: a second connection that drops the triggers first. */
static void
attack(const char *path, const char *sql)
{
	sqlite3	*db;
	char	*msg = NULL;

	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db,
	    "DROP TRIGGER IF EXISTS audit_no_update;"
	    "DROP TRIGGER IF EXISTS audit_no_delete;"
	    "DROP TRIGGER IF EXISTS audit_chain;", NULL, NULL, &msg),
	    SQLITE_OK, "%s", msg);
	cr_assert_eq(sqlite3_exec(db, sql, NULL, NULL, &msg), SQLITE_OK,
	    "%s: %s", sql, msg);
	cr_assert_gt(sqlite3_changes(db), 0, "%s changed nothing", sql);
	sqlite3_close(db);
}

static sqlite3_int64
count_rows(const char *path, const char *sql)
{
	sqlite3		*db;
	sqlite3_stmt	*st;
	sqlite3_int64	 n;

	cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
	    SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK,
	    "%s", sqlite3_errmsg(db));
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

Test(audit, append_and_verify)
{
	struct fixture	 fx;
	struct stat	 st;
	char		 problem[256];
	Sbx__V1__AuditEvent	**v;
	size_t			  n;
	unsigned char		  zero[32] = { 0 }, h[32];

	fx_setup(&fx);
	cr_assert_eq(stat(fx.path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
	cr_assert_eq(verify(fx.a, 0, problem, sizeof(problem)), 0,
	    "empty log: %s", problem);

	append_n(fx.a, 0, 100);
	cr_assert_eq(verify(fx.a, 100, problem, sizeof(problem)), 0, "%s",
	    problem);
	{
		char	 wal[160];

		snprintf(wal, sizeof(wal), "%s-wal", fx.path);
		cr_assert_eq(stat(wal, &st), 0, "no WAL file: not in WAL mode");
		cr_assert_eq(st.st_mode & 07777, 0600, "WAL mode %o",
		    st.st_mode & 07777);
	}

	/* The chain as stored: record 1 follows 32 zero bytes, each record
	 * follows the one before, and each hash is the event's hash. */
	cr_assert_eq(audit_query(fx.a, NULL, 0, &v, &n), 0);
	cr_assert_eq(n, 100);
	cr_assert_eq(v[0]->prev_hash.len, 32);
	cr_assert_eq(memcmp(v[0]->prev_hash.data, zero, 32), 0);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(v[i]->seq, i + 1);
		cr_assert_str_eq(v[i]->daemon, "policyd");
		cr_assert_gt(v[i]->time_ns, 0);
		cr_assert_eq(audit_event_hash(v[i], h), 0);
		cr_assert_eq(v[i]->hash.len, 32);
		cr_assert_eq(memcmp(v[i]->hash.data, h, 32), 0);
		if (i > 0)
			cr_assert_eq(memcmp(v[i]->prev_hash.data,
			    v[i - 1]->hash.data, 32), 0);
	}
	audit_events_free(v, n);

	/* Reopening continues the same chain. */
	audit_close(fx.a);
	fx.a = audit_open(fx.path, "policyd", problem, sizeof(problem));
	cr_assert_not_null(fx.a, "%s", problem);
	append_n(fx.a, 100, 5);
	cr_assert_eq(verify(fx.a, 105, problem, sizeof(problem)), 0, "%s",
	    problem);
	fx_teardown(&fx);
}

/* The hash as proto/README.md defines it, computed here independently:
 * SHA-256 of the encoding with hash empty, prev_hash inside it. */
Test(audit, hash_definition)
{
	struct fixture		 fx;
	Sbx__V1__AuditEvent	**v, copy;
	size_t			  n, len;
	uint8_t			  buf[1024];
	unsigned char		  h[32];

	fx_setup(&fx);
	append_n(fx.a, 0, 2);
	cr_assert_eq(audit_query(fx.a, NULL, 0, &v, &n), 0);
	cr_assert_eq(n, 2);
	copy = *v[1];
	copy.hash.data = NULL;
	copy.hash.len = 0;
	len = sbx__v1__audit_event__get_packed_size(&copy);
	cr_assert_leq(len, sizeof(buf));
	cr_assert_eq(sbx__v1__audit_event__pack(&copy, buf), len);
	crypto_hash_sha256(h, buf, len);
	cr_assert_eq(v[1]->hash.len, 32);
	cr_assert_eq(memcmp(v[1]->hash.data, h, 32), 0);
	audit_events_free(v, n);
	fx_teardown(&fx);
}

Test(audit, modified_record_detected)
{
	struct fixture	 fx;
	char		 problem[256];

	fx_setup(&fx);
	append_n(fx.a, 0, 100);
	attack(fx.path, "UPDATE audit SET detail = 'nothing happened' "
	    "WHERE seq = 42");
	cr_assert_eq(verify(fx.a, 100, problem, sizeof(problem)), 42);
	cr_assert_str_eq(problem, "record 42 was modified");
	fx_teardown(&fx);
}

Test(audit, modified_record_rehashed_detected)
{
	struct fixture		 fx;
	Sbx__V1__AuditEvent	**v;
	size_t			  n;
	unsigned char		  h[32];
	char			  problem[256], sql[256], hex[65];
	char			 *saved;

	/* A smarter attacker also recomputes the record's hash: the next
	 * record no longer follows it. */
	fx_setup(&fx);
	append_n(fx.a, 0, 10);
	cr_assert_eq(audit_query(fx.a, NULL, 0, &v, &n), 0);
	saved = v[4]->detail;
	v[4]->detail = "nothing happened";
	cr_assert_eq(audit_event_hash(v[4], h), 0);
	v[4]->detail = saved;
	audit_events_free(v, n);
	hex_encode(h, 32, hex);
	snprintf(sql, sizeof(sql), "UPDATE audit SET detail = "
	    "'nothing happened', hash = x'%s' WHERE seq = 5", hex);
	attack(fx.path, sql);
	cr_assert_eq(verify(fx.a, 10, problem, sizeof(problem)), 6);
	cr_assert_str_eq(problem, "record 6 does not follow record 5 "
	    "(inserted or reordered?)");
	fx_teardown(&fx);
}

Test(audit, deleted_middle_record_detected)
{
	struct fixture	 fx;
	char		 problem[256];

	fx_setup(&fx);
	append_n(fx.a, 0, 100);
	attack(fx.path, "DELETE FROM audit WHERE seq = 50");
	cr_assert_eq(verify(fx.a, 99, problem, sizeof(problem)), 50);
	cr_assert_str_eq(problem, "record 50 missing (deleted?)");
	fx_teardown(&fx);
}

Test(audit, deleted_last_record_detected)
{
	struct fixture	 fx;
	char		 problem[256];

	fx_setup(&fx);
	append_n(fx.a, 0, 100);
	attack(fx.path, "DELETE FROM audit WHERE seq >= 99");
	cr_assert_eq(verify(fx.a, 98, problem, sizeof(problem)), 99);
	cr_assert(strncmp(problem, "last record(s) deleted", 22) == 0,
	    "problem: %s", problem);

	/* Appending afterwards does not paper over the gap. */
	append_n(fx.a, 100, 1);
	cr_assert_eq(verify(fx.a, 99, problem, sizeof(problem)), 99);
	cr_assert_str_eq(problem, "record 99 missing (deleted?)");
	fx_teardown(&fx);
}

Test(audit, forged_record_detected)
{
	struct fixture		 fx;
	Sbx__V1__AuditEvent	**v, forged;
	size_t			  n;
	unsigned char		  h[32], prev[32];
	char			  problem[256], sql[512], hp[65], hh[65];

	fx_setup(&fx);
	append_n(fx.a, 0, 20);

	/* A record with made-up hashes at the end. */
	attack(fx.path, "INSERT INTO audit VALUES(21, 1, 'policyd', 't-1', "
	    "'x-1', 'ab12', 'compile', '', 'forged', 'uid 0', "
	    "zeroblob(32), zeroblob(32), NULL)");
	cr_assert_eq(verify(fx.a, 21, problem, sizeof(problem)), 21);
	cr_assert_str_eq(problem, "record 21 does not follow record 20 "
	    "(inserted or reordered?)");
	attack(fx.path, "DELETE FROM audit WHERE seq = 21");
	cr_assert_eq(verify(fx.a, 20, problem, sizeof(problem)), 0, "%s",
	    problem);

	/* A correctly chained and hashed forgery at the end is still caught
	 * by the head, which it did not move. */
	cr_assert_eq(audit_query(fx.a, NULL, 0, &v, &n), 0);
	memcpy(prev, v[19]->hash.data, 32);
	audit_events_free(v, n);
	sbx__v1__audit_event__init(&forged);
	forged.seq = 21;
	forged.time_ns = 1;
	forged.daemon = "policyd";
	forged.action = "compile";
	forged.detail = "forged";
	forged.prev_hash.data = prev;
	forged.prev_hash.len = 32;
	cr_assert_eq(audit_event_hash(&forged, h), 0);
	hex_encode(prev, 32, hp);
	hex_encode(h, 32, hh);
	snprintf(sql, sizeof(sql), "INSERT INTO audit(seq, time_ns, daemon, "
	    "action, detail, prev_hash, hash) VALUES(21, 1, 'policyd', "
	    "'compile', 'forged', x'%s', x'%s')", hp, hh);
	attack(fx.path, sql);
	cr_assert_eq(verify(fx.a, 21, problem, sizeof(problem)), 21);
	cr_assert_str_eq(problem, "records 21 to 21 were added behind the "
	    "audit head (inserted?)");
	attack(fx.path, "DELETE FROM audit WHERE seq = 21");

	/* The last record replaced by a well-chained forgery: the head
	 * still names the original's hash. */
	cr_assert_eq(audit_query(fx.a, NULL, 0, &v, &n), 0);
	memcpy(prev, v[18]->hash.data, 32);
	audit_events_free(v, n);
	forged.seq = 20;
	cr_assert_eq(audit_event_hash(&forged, h), 0);
	hex_encode(prev, 32, hp);
	hex_encode(h, 32, hh);
	snprintf(sql, sizeof(sql), "DELETE FROM audit WHERE seq = 20; "
	    "INSERT INTO audit(seq, time_ns, daemon, "
	    "action, detail, prev_hash, hash) VALUES(20, 1, 'policyd', "
	    "'compile', 'forged', x'%s', x'%s')", hp, hh);
	attack(fx.path, sql);
	cr_assert_eq(verify(fx.a, 20, problem, sizeof(problem)), 20);
	cr_assert_str_eq(problem, "record 20 does not match the audit head "
	    "(modified or replaced?)");
	fx_teardown(&fx);
}

Test(audit, triggers_refuse_update_and_delete)
{
	struct fixture	 fx;
	sqlite3		*db;
	char		*msg = NULL;
	char		 problem[256];

	fx_setup(&fx);
	append_n(fx.a, 0, 3);
	cr_assert_eq(sqlite3_open(fx.path, &db), SQLITE_OK);
	cr_assert_neq(sqlite3_exec(db, "UPDATE audit SET detail = 'x' "
	    "WHERE seq = 2", NULL, NULL, &msg), SQLITE_OK);
	cr_assert_str_eq(msg, "audit log is append-only");
	sqlite3_free(msg);
	msg = NULL;
	cr_assert_neq(sqlite3_exec(db, "DELETE FROM audit WHERE seq = 3",
	    NULL, NULL, &msg), SQLITE_OK);
	cr_assert_str_eq(msg, "audit log is append-only");
	sqlite3_free(msg);
	msg = NULL;
	/* The head moves only along the chain. */
	cr_assert_neq(sqlite3_exec(db, "UPDATE audit_head SET seq = 2",
	    NULL, NULL, &msg), SQLITE_OK);
	sqlite3_free(msg);
	msg = NULL;
	/* An insert that does not extend the chain is refused at once. */
	cr_assert_neq(sqlite3_exec(db, "INSERT INTO audit(seq, time_ns, "
	    "prev_hash, hash) VALUES(4, 1, zeroblob(32), zeroblob(32))",
	    NULL, NULL, &msg), SQLITE_OK);
	sqlite3_free(msg);
	sqlite3_close(db);
	cr_assert_eq(verify(fx.a, 3, problem, sizeof(problem)), 0, "%s",
	    problem);
	fx_teardown(&fx);
}

Test(audit, query_by_task)
{
	struct fixture		 fx;
	Sbx__V1__AuditEvent	**v;
	size_t			  n;
	char			  want[32];

	fx_setup(&fx);
	append_n(fx.a, 0, 30);
	cr_assert_eq(audit_query(fx.a, "t-1", 0, &v, &n), 0);
	cr_assert_eq(n, 10);
	for (size_t i = 0; i < n; i++) {
		cr_assert_str_eq(v[i]->task_id, "t-1");
		/* Events 1, 4, 7, ... of the run: seq 2, 5, 8, ... */
		cr_assert_eq(v[i]->seq, 3 * i + 2);
		snprintf(want, sizeof(want), "event %zu", 3 * i + 1);
		cr_assert_str_eq(v[i]->detail, want);
		cr_assert_str_eq(v[i]->actor, "uid 1000");
		cr_assert_str_eq(v[i]->execution_id, "x-1");
	}
	audit_events_free(v, n);

	cr_assert_eq(audit_query(fx.a, "t-1", 3, &v, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_eq(v[2]->seq, 8);
	audit_events_free(v, n);

	cr_assert_eq(audit_query(fx.a, "no-such-task", 0, &v, &n), 0);
	cr_assert_eq(n, 0);
	audit_events_free(v, n);

	cr_assert_eq(audit_query(fx.a, "", 0, &v, &n), 0);
	cr_assert_eq(n, 30);
	audit_events_free(v, n);
	fx_teardown(&fx);
}

/* AuditQuery.after_seq: a page is the records after it, in order, the
 * limit held; paging walks the whole chain once, without a hole. */
Test(audit, query_after_pages)
{
	struct fixture		 fx;
	Sbx__V1__AuditEvent	**v;
	size_t			  n;
	uint64_t		  after = 0, seen = 0;

	fx_setup(&fx);
	append_n(fx.a, 0, 30);
	for (;;) {
		cr_assert_eq(audit_query_after(fx.a, "", after, 7, &v, &n), 0);
		cr_assert_leq(n, 7);
		for (size_t i = 0; i < n; i++)
			cr_assert_eq(v[i]->seq, after + 1 + i);
		if (n > 0)
			after = v[n - 1]->seq;
		seen += n;
		audit_events_free(v, n);
		if (n == 0)
			break;
	}
	cr_assert_eq(seen, 30);
	cr_assert_eq(after, 30);

	/* A task's records after seq 10: seq 11, 14, 17, ... */
	cr_assert_eq(audit_query_after(fx.a, "t-1", 10, 2, &v, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(v[0]->seq, 11);
	cr_assert_eq(v[1]->seq, 14);
	audit_events_free(v, n);

	/* Past the end, and a number that would be negative as SQLite's. */
	cr_assert_eq(audit_query_after(fx.a, "", 30, 0, &v, &n), 0);
	cr_assert_eq(n, 0);
	audit_events_free(v, n);
	cr_assert_eq(audit_query_after(fx.a, "", UINT64_MAX, 0, &v, &n), 0);
	cr_assert_eq(n, 0);
	audit_events_free(v, n);
	cr_assert_eq(audit_query_after(fx.a, "", (uint64_t)INT64_MAX + 1, 0,
	    &v, &n), 0);
	cr_assert_eq(n, 0);
	audit_events_free(v, n);
	fx_teardown(&fx);
}

/* A chain page is cut to what one frame of max bytes holds: the packed
 * reply of the records kept never exceeds it, and one more would. */
Test(audit, page_fits_frame)
{
	struct fixture		 fx;
	Sbx__V1__AuditEvent	**v;
	Sbx__V1__Envelope	  env = SBX__V1__ENVELOPE__INIT;
	Sbx__V1__AuditRecords	  recs = SBX__V1__AUDIT_RECORDS__INIT;
	size_t			  n, k, max;

	fx_setup(&fx);
	append_n(fx.a, 0, 40);
	cr_assert_eq(audit_query(fx.a, "", 0, &v, &n), 0);
	cr_assert_eq(n, 40);
	env.request_id = UINT64_MAX;
	env.version = UINT32_MAX;
	env.body_case = SBX__V1__ENVELOPE__BODY_AUDIT_RECORDS;
	env.audit_records = &recs;
	recs.events = v;
	for (max = 256; max <= 8192; max += 97) {
		k = admin_audit_fit(v, n, max);
		recs.n_events = k;
		cr_assert_leq(sbx__v1__envelope__get_packed_size(&env), max,
		    "max %zu: %zu records", max, k);
		if (k < n) {
			recs.n_events = k + 1;
			/* The fit's room: 64 bytes, a tag and 10 length
			 * bytes a record. */
			cr_assert_gt(sbx__v1__envelope__get_packed_size(&env)
			    + 64 + 11 * (k + 1), max, "max %zu: record %zu "
			    "would fit", max, k);
		}
	}
	/* One record larger than the frame: none fits, and it is said. */
	cr_assert_eq(admin_audit_fit(v, n, 40), 0);
	cr_assert_eq(admin_audit_fit(v, n, SIZE_MAX), n);
	audit_events_free(v, n);
	fx_teardown(&fx);
}

static char *
pragma_text(const char *path, const char *sql)
{
	sqlite3		*db;
	sqlite3_stmt	*st;
	char		*s;

	cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
	    SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	s = xstrdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
	return s;
}

Test(audit, durable_on_return)
{
	struct fixture		 fx;
	Sbx__V1__AuditEvent	 ev;
	char			 task[16], detail[32], sql[128];
	char			*mode;

	fx_setup(&fx);
	mode = pragma_text(fx.path, "PRAGMA journal_mode");
	cr_assert_str_eq(mode, "wal");
	free(mode);
	for (int i = 0; i < 5; i++) {
		event_init(&ev, i, task, sizeof(task), detail, sizeof(detail));
		cr_assert_eq(audit_append(fx.a, &ev), 0);
		/* A fresh connection, as another process would open it. */
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM audit WHERE "
		    "seq = %llu AND detail = 'event %d'",
		    (unsigned long long)ev.seq, i);
		cr_assert_eq(count_rows(fx.path, sql), 1, "record %d not "
		    "visible after audit_append returned", i);
		audit_event_clear(&ev);
	}
	fx_teardown(&fx);
}

Test(audit, group_commit)
{
	struct fixture		 fx;
	Sbx__V1__AuditEvent	 ev[10];
	char			 task[10][16], detail[10][32], problem[256];

	fx_setup(&fx);
	append_n(fx.a, 0, 2);
	cr_assert_eq(audit_begin(fx.a), 0);
	for (int i = 0; i < 10; i++) {
		event_init(&ev[i], 2 + i, task[i], sizeof(task[i]), detail[i],
		    sizeof(detail[i]));
		cr_assert_eq(audit_add(fx.a, &ev[i]), 0);
		cr_assert_eq(ev[i].seq, (uint64_t)i + 3);
		if (i > 0)
			cr_assert_eq(memcmp(ev[i].prev_hash.data,
			    ev[i - 1].hash.data, 32), 0);
	}
	/* Nothing is visible to anyone else before the commit. */
	cr_assert_eq(count_rows(fx.path, "SELECT count(*) FROM audit"), 2);
	cr_assert_eq(audit_commit(fx.a), 0);
	cr_assert_eq(count_rows(fx.path, "SELECT count(*) FROM audit"), 12);
	cr_assert_eq(verify(fx.a, 12, problem, sizeof(problem)), 0, "%s",
	    problem);
	for (int i = 0; i < 10; i++)
		audit_event_clear(&ev[i]);
	fx_teardown(&fx);
}

Test(audit, rollback_keeps_chain)
{
	struct fixture		 fx;
	Sbx__V1__AuditEvent	 ev;
	char			 task[16], detail[32], problem[256];

	fx_setup(&fx);
	append_n(fx.a, 0, 5);
	cr_assert_eq(audit_begin(fx.a), 0);
	for (int i = 0; i < 3; i++) {
		event_init(&ev, 100 + i, task, sizeof(task), detail,
		    sizeof(detail));
		cr_assert_eq(audit_add(fx.a, &ev), 0);
		cr_assert_eq(ev.seq, (uint64_t)i + 6);
		audit_event_clear(&ev);
	}
	cr_assert_eq(audit_rollback(fx.a), 0);
	cr_assert_eq(count_rows(fx.path, "SELECT count(*) FROM audit"), 5);

	/* The next add continues after record 5, not after the rolled-back
	 * record 8. */
	append_n(fx.a, 5, 3);
	cr_assert_eq(verify(fx.a, 8, problem, sizeof(problem)), 0, "%s",
	    problem);

	/* An add outside any transaction commits on its own. */
	event_init(&ev, 8, task, sizeof(task), detail, sizeof(detail));
	cr_assert_eq(audit_add(fx.a, &ev), 0);
	cr_assert_eq(ev.seq, 9);
	audit_event_clear(&ev);
	cr_assert_eq(count_rows(fx.path, "SELECT count(*) FROM audit"), 9);

	/* A second rolled-back batch, then the chain goes on. */
	cr_assert_eq(audit_begin(fx.a), 0);
	event_init(&ev, 9, task, sizeof(task), detail, sizeof(detail));
	cr_assert_eq(audit_add(fx.a, &ev), 0);
	cr_assert_eq(ev.seq, 10);
	audit_event_clear(&ev);
	cr_assert_eq(audit_rollback(fx.a), 0);
	append_n(fx.a, 9, 1);
	cr_assert_eq(verify(fx.a, 10, problem, sizeof(problem)), 0, "%s",
	    problem);
	fx_teardown(&fx);
}

/* audit_open_db: the log shares the caller's handle and transaction, so a
 * record and the state change it describes commit or vanish together. */
Test(audit, shared_handle)
{
	sqlite3			*db;
	struct audit		*a;
	Sbx__V1__AuditEvent	 ev;
	char			 dir[64], path[128], err[256], cmd[128];
	char			 task[16], detail[32];

	snprintf(dir, sizeof(dir), "/tmp/audit_test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/policyd.db", dir);
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "CREATE TABLE execution(id TEXT)",
	    NULL, NULL, NULL), SQLITE_OK);
	a = audit_open_db(db, "policyd", err, sizeof(err));
	cr_assert_not_null(a, "%s", err);

	/* The caller's own BEGIN, then ROLLBACK straight on the handle. */
	cr_assert_eq(sqlite3_exec(db, "BEGIN IMMEDIATE; INSERT INTO "
	    "execution VALUES('x-1')", NULL, NULL, NULL), SQLITE_OK);
	event_init(&ev, 0, task, sizeof(task), detail, sizeof(detail));
	cr_assert_eq(audit_add(a, &ev), 0);
	cr_assert_eq(ev.seq, 1);
	audit_event_clear(&ev);
	cr_assert_eq(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL),
	    SQLITE_OK);
	cr_assert_eq(count_rows(path, "SELECT count(*) FROM audit"), 0);

	/* Then both commit together, and the chain starts at 1 again. */
	cr_assert_eq(audit_begin(a), 0);
	cr_assert_eq(sqlite3_exec(db, "INSERT INTO execution VALUES('x-2')",
	    NULL, NULL, NULL), SQLITE_OK);
	event_init(&ev, 1, task, sizeof(task), detail, sizeof(detail));
	cr_assert_eq(audit_add(a, &ev), 0);
	cr_assert_eq(ev.seq, 1);
	audit_event_clear(&ev);
	cr_assert_eq(audit_commit(a), 0);
	cr_assert_eq(count_rows(path, "SELECT count(*) FROM audit"), 1);
	cr_assert_eq(count_rows(path, "SELECT count(*) FROM execution"), 1);
	{
		Sbx__V1__AuditVerifyReply r;

		cr_assert_eq(audit_verify(a, &r), 0);
		cr_assert(r.ok, "%s", r.problem);
		audit_verify_clear(&r);
	}
	audit_close(a);
	sqlite3_close(db);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void)system(cmd);
}

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

/* Item 13.7: the traceparent is part of what is hashed.  It is stored,
 * read back, and changing or removing it is caught like any field. */
Test(audit, traceparent_hashed)
{
	struct fixture		 fx;
	Sbx__V1__AuditEvent	 ev, **v;
	char			 task[16], detail[32], problem[256];
	size_t			 n;

	fx_setup(&fx);
	append_n(fx.a, 0, 3);
	event_init(&ev, 3, task, sizeof(task), detail, sizeof(detail));
	ev.traceparent = TP;
	cr_assert_eq(audit_append(fx.a, &ev), 0);
	audit_event_clear(&ev);
	append_n(fx.a, 4, 2);
	cr_assert_eq(verify(fx.a, 6, problem, sizeof(problem)), 0, "%s",
	    problem);
	cr_assert_eq(audit_query(fx.a, NULL, 0, &v, &n), 0);
	cr_assert_eq(n, 6);
	cr_assert_str_eq(v[3]->traceparent, TP);
	cr_assert_str_eq(v[2]->traceparent, "");
	audit_events_free(v, n);

	attack(fx.path, "UPDATE audit SET traceparent = "
	    "'00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00' "
	    "WHERE seq = 4");
	cr_assert_eq(verify(fx.a, 6, problem, sizeof(problem)), 4);
	cr_assert_str_eq(problem, "record 4 was modified");
	attack(fx.path, "UPDATE audit SET traceparent = NULL WHERE seq = 4");
	cr_assert_eq(verify(fx.a, 6, problem, sizeof(problem)), 4);
	/* Put back, it verifies; added to a record that had none, it is
	 * caught as well. */
	attack(fx.path, "UPDATE audit SET traceparent = '" TP "' WHERE seq = 4");
	cr_assert_eq(verify(fx.a, 6, problem, sizeof(problem)), 0, "%s",
	    problem);
	attack(fx.path, "UPDATE audit SET traceparent = '" TP "' WHERE seq = 5");
	cr_assert_eq(verify(fx.a, 6, problem, sizeof(problem)), 5);
	fx_teardown(&fx);
}

/* A log written before records had a traceparent (no such column) keeps
 * verifying once opened by this version, which adds the column, and
 * grows with records that have one. */
Test(audit, traceparent_old_log)
{
	struct fixture		 fx;
	Sbx__V1__AuditEvent	 ev, **v;
	sqlite3			*db;
	char			 task[16], detail[32], problem[256], err[256];
	char			*msg = NULL;
	size_t			 n;

	fx_setup(&fx);
	append_n(fx.a, 0, 5);
	audit_close(fx.a);
	/* The table as the previous version made it: the same rows, no
	 * traceparent column. */
	cr_assert_eq(sqlite3_open(fx.path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db,
	    "DROP TRIGGER audit_no_update; DROP TRIGGER audit_no_delete;"
	    "DROP TRIGGER audit_chain; DROP TRIGGER audit_head_follows;"
	    "ALTER TABLE audit DROP COLUMN traceparent;", NULL, NULL, &msg),
	    SQLITE_OK, "%s", msg);
	sqlite3_close(db);
	cr_assert_eq(count_rows(fx.path, "SELECT count(*) FROM "
	    "pragma_table_info('audit') WHERE name = 'traceparent'"), 0);

	fx.a = audit_open(fx.path, "policyd", err, sizeof(err));
	cr_assert_not_null(fx.a, "audit_open: %s", err);
	cr_assert_eq(count_rows(fx.path, "SELECT count(*) FROM "
	    "pragma_table_info('audit') WHERE name = 'traceparent'"), 1);
	cr_assert_eq(verify(fx.a, 5, problem, sizeof(problem)), 0, "%s",
	    problem);
	event_init(&ev, 5, task, sizeof(task), detail, sizeof(detail));
	ev.traceparent = TP;
	cr_assert_eq(audit_append(fx.a, &ev), 0);
	cr_assert_eq(ev.seq, 6);
	audit_event_clear(&ev);
	cr_assert_eq(verify(fx.a, 6, problem, sizeof(problem)), 0, "%s",
	    problem);
	cr_assert_eq(audit_query(fx.a, NULL, 0, &v, &n), 0);
	cr_assert_eq(n, 6);
	cr_assert_str_eq(v[0]->traceparent, "");
	cr_assert_str_eq(v[5]->traceparent, TP);
	audit_events_free(v, n);
	fx_teardown(&fx);
}
