/*
 * auditq_test.c: group commit on a writer thread (common/auditq.c).  A
 * callback runs only once its records are visible to another connection
 * (committed), in the order they were queued; records queued in one pass
 * of the loop share one transaction; a cancelled entry is still written;
 * a batch that fails is rolled back whole and every callback in it hears
 * so, and the next batch commits; auditq_sync() hands the log to the
 * caller with everything queued on disk; auditq_free() commits what is
 * left.  The chain verifies after each.
 */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "auditq.h"
#include "util.h"

struct fixture {
	char			 dir[64];
	char			 path[128];
	struct event_base	*base;
	struct audit		*a;
	struct auditq		*q;
	sqlite3			*peek;		/* another connection */
};

struct seen {
	struct fixture		*fx;
	int			 calls;
	int			 ok;
	int			 order[512];
	int			 visible[512];	/* records on disk at the call */
	int			 want;		/* break the loop at this */
};

struct call {
	struct seen		*s;
	int			 i;
};

static void
fx_setup(struct fixture *fx)
{
	char	 err[256];

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/auditq_test.XXXXXX");
	cr_assert_not_null(mkdtemp(fx->dir));
	snprintf(fx->path, sizeof(fx->path), "%s/audit.db", fx->dir);
	fx->base = event_base_new();
	cr_assert_not_null(fx->base);
	fx->a = audit_open(fx->path, "egressd", err, sizeof(err));
	cr_assert_not_null(fx->a, "audit_open: %s", err);
	fx->q = auditq_new(fx->base, fx->a, err, sizeof(err));
	cr_assert_not_null(fx->q, "auditq_new: %s", err);
	cr_assert_eq(sqlite3_open_v2(fx->path, &fx->peek, SQLITE_OPEN_READONLY,
	    NULL), SQLITE_OK);
}

static void
fx_teardown(struct fixture *fx)
{
	char	 cmd[128];

	auditq_free(fx->q);
	audit_close(fx->a);
	sqlite3_close(fx->peek);
	event_base_free(fx->base);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	(void)system(cmd);
}

/* Records committed, as another connection sees them. */
static int
on_disk(struct fixture *fx, const char *detail_like)
{
	sqlite3_stmt	*st;
	int		 n = -1;

	cr_assert_eq(sqlite3_prepare_v2(fx->peek, "SELECT count(*) FROM audit "
	    "WHERE detail LIKE ?", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, detail_like, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

static void
on_commit(int ok, void *arg)
{
	struct call	*c = arg;
	struct seen	*s = c->s;
	char		 like[32];

	snprintf(like, sizeof(like), "event %d", c->i);
	s->order[s->calls] = c->i;
	s->visible[s->calls] = on_disk(s->fx, like);
	s->calls++;
	s->ok += ok;
	if (s->calls == s->want)
		event_base_loopbreak(s->fx->base);
}

static struct auditq_entry *
queue(struct fixture *fx, int i, struct call *c, auditq_cb cb)
{
	Sbx__V1__AuditEvent	 ev = SBX__V1__AUDIT_EVENT__INIT;
	const Sbx__V1__AuditEvent *evp = &ev;
	char			 detail[32];

	snprintf(detail, sizeof(detail), "event %d", i);
	ev.task_id = "t-1";
	ev.execution_id = "x-1";
	ev.policy_hash = "ab12";
	ev.action = "deny";
	ev.rule = "host-not-allowed";
	ev.detail = detail;
	ev.actor = "sandbox";
	return auditq_add(fx->q, &evp, 1, cb, c);
}

static void
run_until(struct fixture *fx)
{
	struct timeval	 tv = { 10, 0 };

	/* A safety net: a callback that never comes fails the test. */
	event_base_loopexit(fx->base, &tv);
	event_base_dispatch(fx->base);
}

static void
verify_ok(struct fixture *fx, uint64_t records)
{
	Sbx__V1__AuditVerifyReply	 r;

	cr_assert_eq(audit_verify(auditq_sync(fx->q), &r), 0);
	cr_assert(r.ok, "chain: %s", r.problem);
	cr_assert_eq(r.records, records);
	audit_verify_clear(&r);
}

Test(auditq, callbacks_after_commit_in_order_grouped)
{
	struct fixture	 fx;
	struct seen	 s;
	struct call	 c[300];
	uint64_t	 commits, records, failed;

	fx_setup(&fx);
	memset(&s, 0, sizeof(s));
	s.fx = &fx;
	s.want = 300;
	/* One pass of the loop: one batch. */
	for (int i = 0; i < 300; i++) {
		c[i].s = &s;
		c[i].i = i;
		queue(&fx, i, &c[i], on_commit);
	}
	cr_assert_eq(s.calls, 0, "no callback from inside auditq_add");
	run_until(&fx);
	cr_assert_eq(s.calls, 300);
	cr_assert_eq(s.ok, 300);
	for (int i = 0; i < 300; i++) {
		cr_assert_eq(s.order[i], i, "callback %d out of order", i);
		cr_assert_eq(s.visible[i], 1, "event %d not on disk at its "
		    "callback", i);
	}
	auditq_stats(fx.q, &commits, &records, &failed);
	cr_assert_eq(records, 300);
	cr_assert_eq(failed, 0);
	cr_assert_lt(commits, 5, "%llu transactions for one pass",
	    (unsigned long long)commits);
	verify_ok(&fx, 300);
	fx_teardown(&fx);
}

/* Records queued from inside callbacks, while the writer is busy. */
static void
on_commit_chain(int ok, void *arg)
{
	struct call	*c = arg;

	on_commit(ok, arg);
	if (c->i < 99)
		queue(c->s->fx, c->i + 1, c + 1, on_commit_chain);
}

Test(auditq, queued_from_callbacks)
{
	struct fixture	 fx;
	struct seen	 s;
	struct call	 c[100];

	fx_setup(&fx);
	memset(&s, 0, sizeof(s));
	s.fx = &fx;
	s.want = 100;
	for (int i = 0; i < 100; i++) {
		c[i].s = &s;
		c[i].i = i;
	}
	queue(&fx, 0, &c[0], on_commit_chain);
	run_until(&fx);
	cr_assert_eq(s.calls, 100);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(s.visible[i], 1);
	verify_ok(&fx, 100);
	fx_teardown(&fx);
}

Test(auditq, cancelled_entry_is_still_written)
{
	struct fixture		 fx;
	struct seen		 s;
	struct call		 c[3];
	struct auditq_entry	*e;

	fx_setup(&fx);
	memset(&s, 0, sizeof(s));
	s.fx = &fx;
	s.want = 2;
	for (int i = 0; i < 3; i++) {
		c[i].s = &s;
		c[i].i = i;
	}
	queue(&fx, 0, &c[0], on_commit);
	e = queue(&fx, 1, &c[1], on_commit);
	queue(&fx, 2, &c[2], on_commit);
	auditq_cancel(e);
	run_until(&fx);
	cr_assert_eq(s.calls, 2);
	cr_assert_eq(s.order[0], 0);
	cr_assert_eq(s.order[1], 2);
	cr_assert_eq(on_disk(&fx, "event 1"), 1);
	verify_ok(&fx, 3);
	fx_teardown(&fx);
}

Test(auditq, failed_batch_rolls_back_and_says_so)
{
	struct fixture	 fx;
	struct seen	 s;
	struct call	 c[4];
	sqlite3		*w;

	fx_setup(&fx);
	memset(&s, 0, sizeof(s));
	s.fx = &fx;
	s.want = 2;
	for (int i = 0; i < 4; i++) {
		c[i].s = &s;
		c[i].i = i;
	}
	/* Someone else's trigger makes one record fail: its whole batch
	 * must go. */
	cr_assert_eq(sqlite3_open(fx.path, &w), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(w, "CREATE TRIGGER no_one BEFORE INSERT ON "
	    "audit WHEN NEW.detail = 'event 1' BEGIN SELECT RAISE(ABORT, "
	    "'refused'); END;", NULL, NULL, NULL), SQLITE_OK);
	queue(&fx, 0, &c[0], on_commit);
	queue(&fx, 1, &c[1], on_commit);
	run_until(&fx);
	cr_assert_eq(s.calls, 2);
	cr_assert_eq(s.ok, 0, "a failed batch reported ok");
	cr_assert_eq(on_disk(&fx, "event %"), 0, "half a batch committed");
	cr_assert_eq(sqlite3_exec(w, "DROP TRIGGER no_one", NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(w);
	s.want = 4;
	queue(&fx, 2, &c[2], on_commit);
	queue(&fx, 3, &c[3], on_commit);
	run_until(&fx);
	cr_assert_eq(s.calls, 4);
	cr_assert_eq(s.ok, 2);
	cr_assert_eq(on_disk(&fx, "event %"), 2);
	verify_ok(&fx, 2);
	fx_teardown(&fx);
}

Test(auditq, sync_hands_over_the_log)
{
	struct fixture		 fx;
	struct seen		 s;
	struct call		 c[2];
	Sbx__V1__AuditEvent	 ev = SBX__V1__AUDIT_EVENT__INIT;

	fx_setup(&fx);
	memset(&s, 0, sizeof(s));
	s.fx = &fx;
	s.want = 2;
	for (int i = 0; i < 2; i++) {
		c[i].s = &s;
		c[i].i = i;
	}
	queue(&fx, 0, &c[0], on_commit);
	queue(&fx, 1, &c[1], on_commit);
	/* Everything queued is on disk once auditq_sync returns, and the
	 * caller may append directly after it, in order. */
	ev.task_id = "t-1";
	ev.action = "close";
	ev.detail = "direct";
	cr_assert_eq(audit_append(auditq_sync(fx.q), &ev), 0);
	audit_event_clear(&ev);
	cr_assert_eq(on_disk(&fx, "event %"), 2);
	cr_assert_eq(ev.seq, 3);
	cr_assert_eq(s.calls, 0, "callbacks run from the loop");
	run_until(&fx);
	cr_assert_eq(s.calls, 2);
	cr_assert_eq(s.ok, 2);
	verify_ok(&fx, 3);
	fx_teardown(&fx);
}

Test(auditq, free_commits_what_is_left)
{
	struct fixture	 fx;
	struct seen	 s;
	struct call	 c[10];
	char		 err[256];

	fx_setup(&fx);
	memset(&s, 0, sizeof(s));
	s.fx = &fx;
	for (int i = 0; i < 10; i++) {
		c[i].s = &s;
		c[i].i = i;
		queue(&fx, i, &c[i], on_commit);
	}
	auditq_free(fx.q);
	cr_assert_eq(s.calls, 10);
	cr_assert_eq(s.ok, 10);
	cr_assert_eq(on_disk(&fx, "event %"), 10);
	fx.q = auditq_new(fx.base, fx.a, err, sizeof(err));
	cr_assert_not_null(fx.q);
	verify_ok(&fx, 10);
	fx_teardown(&fx);
}

/* A callback of the flush's that queues one more record (event 10). */
static void
on_commit_more(int ok, void *arg)
{
	struct call	*c = arg;

	on_commit(ok, arg);
	if (c->i == 9)
		queue(c->s->fx, 10, c + 1, on_commit);
}

Test(auditq, flush_commits_and_calls_back_now)
{
	struct fixture	 fx;
	struct seen	 s;
	struct call	 c[11];

	fx_setup(&fx);
	memset(&s, 0, sizeof(s));
	s.fx = &fx;
	for (int i = 0; i < 11; i++) {
		c[i].s = &s;
		c[i].i = i;
	}
	for (int i = 0; i < 10; i++)
		queue(&fx, i, &c[i], i == 9 ? on_commit_more : on_commit);
	/* A shutdown: no loop turn between the flush and what follows. */
	auditq_flush(fx.q);
	cr_assert_eq(s.calls, 10, "%d callbacks ran inside the flush", s.calls);
	cr_assert_eq(s.ok, 10);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(s.visible[i], 1, "event %d not on disk at its "
		    "callback", i);
	/* What the callbacks queued is the next batch: the next flush's. */
	auditq_flush(fx.q);
	cr_assert_eq(s.calls, 11);
	cr_assert_eq(s.visible[10], 1);
	cr_assert_eq(on_disk(&fx, "event %"), 11);
	verify_ok(&fx, 11);
	fx_teardown(&fx);
}
