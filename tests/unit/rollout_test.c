/*
 * rollout_test.c: gradual rollouts (policyd/rollout.c, issue 13 item 2).
 * The bucket is deterministic, separates type from id, and spreads task
 * ids evenly; the halt rule fires when the rates differ by more than the
 * threshold in either direction and not before each side has its
 * minimum; through the store, a task keeps its version when percent
 * changes, a halted canary's task moves to stable, a halt is written with
 * its audit event and survives a reopen, and the operator's commands
 * refuse an unknown type, a percent above 100 and the promotion of a
 * halted canary.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "policy.h"
#include "util.h"
#include "yaml.h"
#include "policyd/policyd.h"
#include "tests/unit/store_fixture.h"

static const char tmpl_text[] = FIXTURE_TMPL("probe");

TestSuite(rollout, .init = fixture_setup, .fini = fixture_teardown);

/* ---- the bucket ---- */

Test(rollout, bucket_is_deterministic_and_in_range)
{
	char	 id[32];

	for (int i = 0; i < 1000; i++) {
		snprintf(id, sizeof(id), "t-%d", i);
		uint32_t b = rollout_bucket("analytics", id);

		cr_assert_lt(b, 100);
		cr_assert_eq(b, rollout_bucket("analytics", id));
	}
	/* The first 4 bytes of SHA-256("analytics\0t-1") mod 100, as
	 * tests/scenario/95-rollout.sh computes it with hashlib. */
	cr_assert_eq(rollout_bucket("analytics", "t-1"), 5);
}

Test(rollout, bucket_separates_type_from_id)
{
	int	 differ = 0;
	char	 a[32], b[32];

	/* "ab"+"c" and "a"+"bc" are other inputs: the NUL separates. */
	for (int i = 0; i < 50; i++) {
		snprintf(a, sizeof(a), "x%d", i);
		snprintf(b, sizeof(b), "%d", i);
		if (rollout_bucket("typex", b) != rollout_bucket("type", a))
			differ++;
	}
	cr_assert_gt(differ, 40, "only %d of 50 differ", differ);
	/* The same id under another type lands elsewhere about as often
	 * as chance says. */
	differ = 0;
	for (int i = 0; i < 1000; i++) {
		snprintf(a, sizeof(a), "t-%d", i);
		if (rollout_bucket("one", a) != rollout_bucket("two", a))
			differ++;
	}
	cr_assert_gt(differ, 950);
}

Test(rollout, bucket_spreads_evenly)
{
	unsigned	 n[100] = { 0 }, below10 = 0;
	char		 id[32];

	for (int i = 0; i < 20000; i++) {
		snprintf(id, sizeof(id), "task-%08d", i);
		uint32_t b = rollout_bucket("analytics", id);

		n[b]++;
		if (b < 10)
			below10++;
	}
	/* 200 expected in each; 4 standard deviations is about 56. */
	for (int b = 0; b < 100; b++)
		cr_assert(n[b] > 140 && n[b] < 260, "bucket %d has %u", b,
		    n[b]);
	/* percent 10: close to a tenth go to the canary. */
	cr_assert(below10 > 1800 && below10 < 2200, "%u of 20000", below10);
}

/* ---- the halt rule ---- */

Test(rollout, differs_when_the_rate_rises)
{
	double	 s, c;

	cr_assert(rollout_differs(10, 0, 10, 5, 200, 5, &s, &c));
	cr_assert_float_eq(s, 0.0, 1e-9);
	cr_assert_float_eq(c, 0.5, 1e-9);
}

Test(rollout, differs_when_the_rate_falls)
{
	/* A canary that stops denying: 5 of 10 under stable, none under
	 * canary. */
	cr_assert(rollout_differs(10, 5, 10, 0, 200, 5, NULL, NULL));
	cr_assert(rollout_differs(10, 10, 5, 0, 999, 5, NULL, NULL));
}

Test(rollout, within_the_threshold_or_too_few_executions)
{
	/* 0.1 apart: below 0.2. */
	cr_assert_not(rollout_differs(10, 1, 10, 2, 200, 5, NULL, NULL));
	/* Exactly the threshold does not halt. */
	cr_assert_not(rollout_differs(10, 0, 10, 2, 200, 5, NULL, NULL));
	cr_assert(rollout_differs(10, 0, 10, 3, 200, 5, NULL, NULL));
	/* One side below min_executions, each way. */
	cr_assert_not(rollout_differs(10, 0, 4, 4, 200, 5, NULL, NULL));
	cr_assert_not(rollout_differs(4, 4, 10, 0, 200, 5, NULL, NULL));
	cr_assert_not(rollout_differs(0, 0, 0, 0, 200, 1, NULL, NULL));
	/* threshold 0: never. */
	cr_assert_not(rollout_differs(10, 0, 10, 10, 0, 5, NULL, NULL));
}

/* ---- through the store ---- */

struct fix {
	struct policyd_conf	 conf;
	struct policyd_task_type tt;
	struct tmpl_registry	*reg;
	struct store		*store;
	struct rollouts		*ro;
};

static void
add_version(struct tmpl_registry *r, unsigned v)
{
	struct yerrs	 e = { NULL, 0 };
	Sbx__V1__Policy	*p;
	char		 text[2048];

	snprintf(text, sizeof(text), tmpl_text, v, 100 + v);
	p = policy_parse_buf("probe.yaml", text, strlen(text), &e);
	cr_assert_not_null(p, "%s", e.n > 0 ? e.msgs[0] : "?");
	yerrs_free(&e);
	cr_assert_eq(template_registry_add(r, p, "probe.yaml"), 0);
}

static void
fix_open(struct fix *f, uint32_t canary, uint32_t percent)
{
	char	 err[512];

	memset(&f->conf, 0, sizeof(f->conf));
	memset(&f->tt, 0, sizeof(f->tt));
	f->tt.type = (char *)"an";
	f->tt.template = (char *)"probe";
	f->tt.version = 1;
	f->tt.canary = canary;
	f->tt.percent = percent;
	f->conf.types = &f->tt;
	f->conf.ntypes = 1;
	f->conf.roll_threshold = 200;
	f->conf.roll_min_exec = 5;
	if (f->reg == NULL) {
		f->reg = template_registry_new();
		add_version(f->reg, 1);
		add_version(f->reg, 2);
		add_version(f->reg, 3);
	}
	f->store = store_open(db, err, sizeof(err));
	cr_assert_not_null(f->store, "%s", err);
	f->ro = rollout_open(&f->conf, f->store, err, sizeof(err));
	cr_assert_not_null(f->ro, "%s", err);
}

static void
fix_close(struct fix *f, int all)
{
	rollout_close(f->ro);
	store_close(f->store);
	f->ro = NULL;
	f->store = NULL;
	if (all) {
		template_registry_free(f->reg);
		f->reg = NULL;
	}
}

/* An id of type "an" whose bucket is below (canary) or at least 50. */
static void
id_on(int canary, int salt, char *buf, size_t len)
{
	for (int i = 0; ; i++) {
		snprintf(buf, len, "t-%d-%d", salt, i);
		if ((rollout_bucket("an", buf) < 50) == canary)
			return;
	}
}

static uint32_t
pick(struct fix *f, const char *id, int known)
{
	Sbx__V1__Task		 t = SBX__V1__TASK__INIT;
	const struct tmpl	*tm;

	t.id = (char *)id;
	t.type = (char *)"an";
	t.tenant = (char *)"acme";
	t.user = (char *)"alice";
	tm = rollout_pick(f->ro, f->reg, &t, known);
	cr_assert_not_null(tm);
	return tm->version;
}

/* A compile of id under version v, committed (its record names it). */
static void
compiled(struct fix *f, const char *id, uint32_t v)
{
	Sbx__V1__Task	 t = SBX__V1__TASK__INIT;
	char		 detail[64], xid[40];

	t.id = (char *)id;
	t.type = (char *)"an";
	t.tenant = (char *)"acme";
	t.user = (char *)"alice";
	snprintf(detail, sizeof(detail), "template probe@%u", v);
	random_id("x", xid, sizeof(xid));
	store_add_execution(f->store, &t, NULL, xid, "h", detail, "uid:0",
	    -1);
	cr_assert_eq(store_commit(f->store), 0);
}

static void
control(struct fix *f, Sbx__V1__RolloutControl__Action a, uint32_t pct,
    const char *type, int want, const char *want_err)
{
	Sbx__V1__RolloutControl	 m = SBX__V1__ROLLOUT_CONTROL__INIT;
	Sbx__V1__ErrorCode	 code;
	char			 err[512] = "";
	int			 rc;

	m.type = (char *)type;
	m.action = a;
	m.percent = pct;
	rc = rollout_control(f->ro, &m, "uid:7", &code, err, sizeof(err));
	cr_assert_eq(rc, want, "rollout_control: %d (%s)", rc, err);
	if (want_err != NULL)
		cr_assert(strstr(err, want_err) != NULL, "error: %s", err);
}

static Sbx__V1__Rollout *
status(struct fix *f, Sbx__V1__Rollouts *out)
{
	char	 err[256];

	cr_assert_eq(rollout_status(f->ro, "an", out, err, sizeof(err)), 0);
	cr_assert_eq(out->n_rollouts, 1);
	return out->rollouts[0];
}

Test(rollout, assignment_by_bucket_and_sticky)
{
	struct fix	 f = { 0 };
	char		 c[64], s[64];

	fix_open(&f, 2, 50);
	id_on(1, 1, c, sizeof(c));
	id_on(0, 1, s, sizeof(s));
	cr_assert_eq(pick(&f, c, 0), 2);
	cr_assert_eq(pick(&f, s, 0), 1);
	compiled(&f, c, 2);
	compiled(&f, s, 1);
	/* percent 100: the stable task stays; percent 1: so does the
	 * canary one (a retry stays on its version). */
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_SET_PERCENT, 100,
	    "an", 0, NULL);
	cr_assert_eq(pick(&f, s, 1), 1);
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_SET_PERCENT, 1,
	    "an", 0, NULL);
	cr_assert_eq(pick(&f, c, 1), 2);
	/* Halted: the canary's task moves to stable, and a new one too. */
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_HALT, 0, "an", 0,
	    NULL);
	cr_assert_eq(pick(&f, c, 1), 1);
	cr_assert_eq(pick(&f, c, 0), 1);
	fix_close(&f, 1);
}

Test(rollout, pending_compile_keeps_the_version_when_percent_races)
{
	struct fix	 f = { 0 };
	Sbx__V1__Task	 t = SBX__V1__TASK__INIT;
	char		 c[64], xid[40];

	fix_open(&f, 2, 50);
	id_on(1, 2, c, sizeof(c));
	cr_assert_eq(pick(&f, c, 0), 2);
	/* Its compile record is in the open batch, not on disk, when the
	 * operator moves percent to 0 ... */
	t.id = c;
	t.type = (char *)"an";
	t.tenant = (char *)"acme";
	t.user = (char *)"alice";
	random_id("x", xid, sizeof(xid));
	store_add_execution(f.store, &t, NULL, xid, "h", "template probe@2",
	    "uid:0", -1);
	/* ... and back to 1: the batch still names @2, so it stays. */
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_SET_PERCENT, 1,
	    "an", 0, NULL);
	cr_assert_eq(pick(&f, c, 1), 2);
	fix_close(&f, 1);
}

/* n results of version v, each with a denial of rule when denied. */
static void
results(struct fix *f, uint32_t v, int n, int denied, const char *rule)
{
	struct store_denial	 d;

	memset(&d, 0, sizeof(d));
	snprintf(d.rule, sizeof(d.rule), "%s", rule);
	snprintf(d.boundary, sizeof(d.boundary), "egress");
	for (int i = 0; i < n; i++) {
		char	 xid[40];

		random_id("x", xid, sizeof(xid));
		store_add_egress(f->store, "t-r", xid, "h", 1, 0,
		    denied ? &d : NULL, denied ? 1 : 0, "uid:0");
		rollout_count(f->ro, "t-r", xid, "h", "probe", v,
		    denied ? &d : NULL, denied ? 1 : 0);
	}
}

static int
audit_count(const char *action, const char *task)
{
	sqlite3		*h;
	sqlite3_stmt	*st;
	int		 n = -1;

	cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(h, "SELECT count(*) FROM audit WHERE "
	    "action = ?1 AND task_id = ?2", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, action, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, task, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return n;
}

static int
audit_sql(const char *sql)
{
	sqlite3		*h;
	sqlite3_stmt	*st;
	int		 n = -1;

	cr_assert_eq(sqlite3_open(db, &h), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return n;
}

static void
halt_case(int rise)
{
	struct fix		 f = { 0 };
	Sbx__V1__Rollouts	 out;
	Sbx__V1__Rollout	*r;

	fix_open(&f, 2, 10);
	/* Stable: 5 results; canary 4: not enough to judge. */
	results(&f, 1, 5, !rise, "host-not-allowed");
	results(&f, 2, 4, rise, "host-not-allowed");
	cr_assert_not(rollout_due(f.ro));
	/* The fifth canary result tips it. */
	results(&f, 2, 1, rise, "host-not-allowed");
	cr_assert(rollout_due(f.ro));
	cr_assert_eq(store_commit(f.store), 0);
	cr_assert_eq(rollout_write_due(f.ro), 0);
	cr_assert_not(rollout_due(f.ro));
	cr_assert_eq(audit_count("rollout-halted", "t-r"), 1);
	/* Under the execution that tipped it, with its hash. */
	cr_assert_eq(audit_sql("SELECT count(*) FROM audit WHERE action = "
	    "'rollout-halted' AND policy_hash = 'h' AND execution_id LIKE "
	    "'x%' AND rule = 'host-not-allowed' AND detail LIKE "
	    "'%threshold 0.200%'"), 1);
	r = status(&f, &out);
	cr_assert(r->halted);
	cr_assert_eq(r->percent, 0);
	cr_assert(strstr(r->reason, rise ? "denied 1.000 of 5 executions "
	    "under canary 2 and 0.000 of 5 under stable 1" : "denied 0.000 "
	    "of 5 executions under canary 2 and 1.000 of 5 under stable 1") !=
	    NULL, "%s", r->reason);
	cr_assert_eq(r->n_rules, 1);
	cr_assert_eq(r->rules[0]->stable_denied, rise ? 0 : 5);
	cr_assert_eq(r->rules[0]->canary_denied, rise ? 5 : 0);
	rollout_status_clear(&out);
	{
		char	*m = rollout_metrics(f.ro);

		cr_assert(strstr(m, "sbx_policyd_rollout_halts_total 1\n") !=
		    NULL, "%s", m);
		cr_assert(strstr(m, rise ? "sbx_policyd_rollout_denials_total{"
		    "template=\"probe\",version=\"2\",rule=\""
		    "host-not-allowed\"} 5\n" : "sbx_policyd_rollout_denials_"
		    "total{template=\"probe\",version=\"1\",rule=\""
		    "host-not-allowed\"} 5\n") != NULL, "%s", m);
		cr_assert(strstr(m, "sbx_policyd_rollout_canary_percent{"
		    "type=\"an\"} 0\n") != NULL, "%s", m);
		free(m);
	}
	fix_close(&f, 0);

	/* Reopened with the same configuration: still halted, counts
	 * kept; a promote is refused; set-percent resumes it. */
	fix_open(&f, 2, 10);
	r = status(&f, &out);
	cr_assert(r->halted);
	cr_assert_eq(r->percent, 0);
	cr_assert_eq(r->canary_executions, 5);
	rollout_status_clear(&out);
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_PROMOTE, 0, "an",
	    -1, "was halted");
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_SET_PERCENT, 30,
	    "an", 0, NULL);
	r = status(&f, &out);
	cr_assert_not(r->halted);
	cr_assert_eq(r->percent, 30);
	rollout_status_clear(&out);
	cr_assert_eq(audit_count("rollout-percent", ""), 1);
	fix_close(&f, 1);
}

Test(rollout, a_rising_rate_halts)
{
	halt_case(1);
}

Test(rollout, a_falling_rate_halts)
{
	halt_case(0);
}

Test(rollout, control_refusals)
{
	struct fix		 f = { 0 };
	Sbx__V1__Rollouts	 out;
	Sbx__V1__Rollout	*r;
	char			 err[256];

	fix_open(&f, 2, 10);
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_HALT, 0, "nope",
	    -1, "task type \"nope\" has no rollout");
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_SET_PERCENT, 101,
	    "an", -1, "out of range");
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_UNSPECIFIED, 0,
	    "an", -1, "unknown action");
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_HALT, 0, "", -1,
	    "no task type");
	cr_assert_eq(rollout_status(f.ro, "nope", &out, err, sizeof(err)), -1);
	rollout_status_clear(&out);
	/* Nothing changed by the refusals. */
	r = status(&f, &out);
	cr_assert_eq(r->percent, 10);
	cr_assert_not(r->halted);
	rollout_status_clear(&out);
	/* Promote: canary becomes stable; halting it after is refused. */
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_PROMOTE, 0, "an",
	    0, NULL);
	r = status(&f, &out);
	cr_assert(r->promoted);
	cr_assert_eq(r->stable, 2);
	cr_assert_eq(r->canary, 0);
	rollout_status_clear(&out);
	cr_assert_eq(pick(&f, "t-any", 0), 2);
	control(&f, SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_HALT, 0, "an", -1,
	    "no canary");
	fix_close(&f, 0);

	/* A reopen keeps the promotion; another canary in the
	 * configuration is a new rollout at its percent. */
	fix_open(&f, 2, 10);
	r = status(&f, &out);
	cr_assert(r->promoted);
	rollout_status_clear(&out);
	fix_close(&f, 0);
	fix_open(&f, 3, 40);
	r = status(&f, &out);
	cr_assert_not(r->promoted);
	cr_assert_eq(r->canary, 3);
	cr_assert_eq(r->percent, 40);
	rollout_status_clear(&out);
	fix_close(&f, 1);
}
