/*
 * rollout.c: gradual rollouts of a template version (issue 13 item 2).  A
 * task type may name {template, stable, canary, percent}: each new task
 * goes to the canary when the bucket of its (type, id) -- the first four
 * bytes of SHA-256 over "type\0id", mod 100 -- is below percent, and to
 * stable otherwise.  The orchestrator names neither version nor bucket:
 * the task message has no such field, so the only way to choose is the
 * task id, and both versions are templates an operator loaded.
 *
 * A task keeps the version of its first compile (its compile records
 * name it, store_task_template()), so a retry stays where it was when
 * percent changes; the one exception is a canary that no longer takes
 * tasks (percent 0: halted, or set so), whose tasks move to stable on
 * their next compile, since a halt says the canary is wrong.
 *
 * What each version's executions met is counted in policyd.db's
 * rollout_counts (store.c writes it in the transaction of the result or
 * refusal it counts) and here in memory, loaded at start: an execution is
 * a run whose result came back or a compile refused once its version was
 * chosen, and a rule's count is the executions with at least one denial
 * of it, at any boundary (policyd, egressd, gated, launchd-sbx).  After
 * each one the rollout of that template is checked: when, for a rule,
 * canary's rate and stable's differ by more than rollout.threshold --
 * either way: a canary that refuses what stable allowed breaks a
 * legitimate task, and one that stops refusing something deserves more
 * suspicion -- and each side has rollout.min_executions, the canary is
 * halted: percent 0, kept in the rollouts table, so neither a restart
 * nor a reload turns it back on (an operator does, with set-percent),
 * with one "rollout-halted" audit event naming the type, template, both
 * versions, the rule, both rates and the threshold.  The state and the
 * events are written in one transaction on the store's write handle, by
 * rollout_write_due() or rollout_control(), whose callers (commit.c,
 * control.c) first commit every open batch, so the handle is free.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#include <sqlite3.h>

#include "audit.h"
#include "log.h"
#include "util.h"
#include "policyd.h"

#define ROLL_COUNTS_MAX	4096	/* (template, version, rule) kept here */

struct roll_count {
	char		 tmpl[129];
	uint32_t	 version;
	char		 rule[65];	/* "": the executions */
	uint64_t	 n;
};

struct roll {
	char		 type[129];
	char		 tmpl[129];
	uint32_t	 cfg_stable, cfg_canary, cfg_percent;
	uint32_t	 stable;
	uint32_t	 canary;	/* 0: promoted */
	uint32_t	 percent;
	int		 halted;
	int		 promoted;
	char		 reason[1024];
	int		 due;		/* halted here, not written yet */
	char		 due_rule[65];
	char		 due_task[129];	/* whose result tipped it */
	char		 due_exec[40];	/* and its execution, policy hash */
	char		 due_hash[POLICY_HASH_HEX];
	char		 due_detail[768];
};

struct rollouts {
	struct store		*store;
	struct roll		*r;
	size_t			 n;
	uint32_t		 threshold;	/* thousandths; 0: never */
	uint32_t		 min_exec;
	struct roll_count	*c;
	size_t			 nc;
	int			 full;		/* warned that c is full */
	uint64_t		 halts;		/* by the threshold */
	/* In a fleet the state and the counts are the database's: read
	 * before each use, counted there in place. */
	struct fleet		*fleet;
	const char		*host;
};

static const char roll_schema[] =
    "CREATE TABLE IF NOT EXISTS rollouts("
    " type TEXT PRIMARY KEY,"
    " template TEXT NOT NULL,"
    " cfg_stable INTEGER NOT NULL,"
    " cfg_canary INTEGER NOT NULL,"
    " cfg_percent INTEGER NOT NULL,"
    " stable INTEGER NOT NULL,"
    " canary INTEGER NOT NULL,"
    " percent INTEGER NOT NULL,"
    " halted INTEGER NOT NULL,"
    " promoted INTEGER NOT NULL,"
    " reason TEXT NOT NULL,"
    " updated_ns INTEGER NOT NULL) WITHOUT ROWID;";

uint32_t
rollout_bucket(const char *type, const char *task_id)
{
	crypto_hash_sha256_state	 st;
	unsigned char			 md[crypto_hash_sha256_BYTES];
	uint32_t			 v;

	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const unsigned char *)type,
	    strlen(type) + 1);		/* with its NUL: a separator */
	crypto_hash_sha256_update(&st, (const unsigned char *)task_id,
	    strlen(task_id));
	crypto_hash_sha256_final(&st, md);
	v = (uint32_t)md[0] << 24 | (uint32_t)md[1] << 16 |
	    (uint32_t)md[2] << 8 | md[3];
	return v % 100;
}

int
rollout_differs(uint64_t s_exec, uint64_t s_den, uint64_t c_exec,
    uint64_t c_den, uint32_t threshold, uint32_t min_exec, double *s_rate,
    double *c_rate)
{
	double	 rs, rc;

	if (s_exec == 0 || c_exec == 0 || s_exec < min_exec ||
	    c_exec < min_exec)
		return 0;
	rs = (double)s_den / (double)s_exec;
	rc = (double)c_den / (double)c_exec;
	if (s_rate != NULL)
		*s_rate = rs;
	if (c_rate != NULL)
		*c_rate = rc;
	if (threshold == 0)
		return 0;
	/* In thousandths, so 0.2 is exactly 200 and a difference of
	 * exactly the threshold does not halt. */
	return (rc > rs ? rc - rs : rs - rc) * 1000.0 > (double)threshold +
	    1e-9;
}

/* ---- counts ---- */

static struct roll_count *
rollout_count_find(struct rollouts *ro, const char *tmpl, uint32_t version,
    const char *rule, int make)
{
	struct roll_count	*c;

	for (size_t i = 0; i < ro->nc; i++) {
		c = &ro->c[i];
		if (c->version == version && strcmp(c->tmpl, tmpl) == 0 &&
		    strcmp(c->rule, rule) == 0)
			return c;
	}
	if (!make)
		return NULL;
	if (ro->nc == ROLL_COUNTS_MAX) {
		if (!ro->full)
			log_warnx("rollout: more than %d counts; the rest are "
			    "kept in policyd.db only", ROLL_COUNTS_MAX);
		ro->full = 1;
		return NULL;
	}
	ro->c = xreallocarray(ro->c, ro->nc + 1, sizeof(*ro->c));
	c = &ro->c[ro->nc++];
	memset(c, 0, sizeof(*c));
	snprintf(c->tmpl, sizeof(c->tmpl), "%s", tmpl);
	c->version = version;
	snprintf(c->rule, sizeof(c->rule), "%s", rule);
	return c;
}

static uint64_t
rollout_get(struct rollouts *ro, const char *tmpl, uint32_t version,
    const char *rule)
{
	struct roll_count	*c;

	if (version == 0)
		return 0;
	c = rollout_count_find(ro, tmpl, version, rule, 0);
	return c != NULL ? c->n : 0;
}

static void
rollout_bump(struct rollouts *ro, const char *tmpl, uint32_t version,
    const char *rule)
{
	struct roll_count	*c;

	if ((c = rollout_count_find(ro, tmpl, version, rule, 1)) != NULL)
		c->n++;
}

static int
rollout_load_counts(struct rollouts *ro, sqlite3 *db, char *err,
    size_t errlen)
{
	sqlite3_stmt	*st;
	int		 rc;

	if (sqlite3_prepare_v2(db, "SELECT template, version, rule, n FROM "
	    "rollout_counts", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "rollout_counts: %s", sqlite3_errmsg(db));
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct roll_count	*c;
		const char		*t, *r;

		t = (const char *)sqlite3_column_text(st, 0);
		r = (const char *)sqlite3_column_text(st, 2);
		if ((c = rollout_count_find(ro, t != NULL ? t : "",
		    (uint32_t)sqlite3_column_int64(st, 1), r != NULL ? r : "",
		    1)) != NULL)
			c->n = (uint64_t)sqlite3_column_int64(st, 3);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		snprintf(err, errlen, "rollout_counts: %s", sqlite3_errmsg(db));
		return -1;
	}
	return 0;
}

/* ---- state ---- */

static struct roll *
rollout_find(struct rollouts *ro, const char *type)
{
	for (size_t i = 0; i < ro->n; i++)
		if (strcmp(ro->r[i].type, type) == 0)
			return &ro->r[i];
	return NULL;
}

static int
rollout_put(sqlite3 *db, const struct roll *r)
{
	sqlite3_stmt	*st;
	int		 rc;

	if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO rollouts(type, "
	    "template, cfg_stable, cfg_canary, cfg_percent, stable, canary, "
	    "percent, halted, promoted, reason, updated_ns) VALUES (?, ?, ?, "
	    "?, ?, ?, ?, ?, ?, ?, ?, ?)", -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, r->type, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->tmpl, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, r->cfg_stable);
	sqlite3_bind_int64(st, 4, r->cfg_canary);
	sqlite3_bind_int64(st, 5, r->cfg_percent);
	sqlite3_bind_int64(st, 6, r->stable);
	sqlite3_bind_int64(st, 7, r->canary);
	sqlite3_bind_int64(st, 8, r->percent);
	sqlite3_bind_int(st, 9, r->halted);
	sqlite3_bind_int(st, 10, r->promoted);
	sqlite3_bind_text(st, 11, r->reason, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 12, now_ns());
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* The row kept for r->type: 1 (r's state fields set), 0, -1. */
static int
rollout_get_row(sqlite3 *db, struct roll *r, char *tmpl, size_t tlen,
    uint32_t *cfg_stable, uint32_t *cfg_canary, uint32_t *cfg_percent)
{
	sqlite3_stmt	*st;
	const char	*v;
	int		 rc, ret = 0;

	if (sqlite3_prepare_v2(db, "SELECT template, cfg_stable, cfg_canary, "
	    "cfg_percent, stable, canary, percent, halted, promoted, reason "
	    "FROM rollouts WHERE type = ?", -1, &st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_text(st, 1, r->type, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		v = (const char *)sqlite3_column_text(st, 0);
		snprintf(tmpl, tlen, "%s", v != NULL ? v : "");
		*cfg_stable = (uint32_t)sqlite3_column_int64(st, 1);
		*cfg_canary = (uint32_t)sqlite3_column_int64(st, 2);
		*cfg_percent = (uint32_t)sqlite3_column_int64(st, 3);
		r->stable = (uint32_t)sqlite3_column_int64(st, 4);
		r->canary = (uint32_t)sqlite3_column_int64(st, 5);
		r->percent = (uint32_t)sqlite3_column_int64(st, 6);
		r->halted = sqlite3_column_int(st, 7);
		r->promoted = sqlite3_column_int(st, 8);
		v = (const char *)sqlite3_column_text(st, 9);
		snprintf(r->reason, sizeof(r->reason), "%s", v != NULL ? v :
		    "");
		ret = 1;
	} else if (rc != SQLITE_DONE)
		ret = -1;
	sqlite3_finalize(st);
	return ret;
}

/*
 * One rollout from the config, against what policyd.db kept.  The same
 * template, stable and canary as before is the same rollout: its state
 * stays (a halted or promoted one stays so, whatever percent the config
 * says now; a running one takes a changed percent).  Anything else
 * starts a new rollout at the config's percent.
 */
static int
rollout_reconcile(struct rollouts *ro, sqlite3 *db,
    const struct policyd_task_type *tt, struct roll *r)
{
	char		 tmpl[129];
	uint32_t	 cs = 0, cc = 0, cp = 0;
	int		 rc;

	memset(r, 0, sizeof(*r));
	snprintf(r->type, sizeof(r->type), "%s", tt->type);
	snprintf(r->tmpl, sizeof(r->tmpl), "%s", tt->template);
	r->cfg_stable = tt->version;
	r->cfg_canary = tt->canary;
	r->cfg_percent = tt->percent;
	if ((rc = rollout_get_row(db, r, tmpl, sizeof(tmpl), &cs, &cc,
	    &cp)) == -1)
		return -1;
	if (rc == 1 && strcmp(tmpl, tt->template) == 0 &&
	    cs == tt->version && cc == tt->canary) {
		if (cp != tt->percent && (r->halted || r->promoted))
			log_warnx("rollout %s: %s; percent %u in the "
			    "configuration is not applied (sbxctl rollout "
			    "set-percent resumes a halted canary)", r->type,
			    r->halted ? "halted" : "promoted", tt->percent);
		else if (cp != tt->percent) {
			r->percent = tt->percent;
			snprintf(r->reason, sizeof(r->reason), "configured: "
			    "percent %u (was %u)", tt->percent, cp);
		}
	} else {
		if (rc == 1)
			log_info("rollout %s: configuration changed (%s %u->%u "
			    "was %s %u->%u): a new rollout at %u%%", r->type,
			    tt->template, tt->version, tt->canary, tmpl, cs,
			    cc, tt->percent);
		r->stable = tt->version;
		r->canary = tt->canary;
		r->percent = tt->percent;
		r->halted = r->promoted = 0;
		snprintf(r->reason, sizeof(r->reason), "configured: %s %u, "
		    "canary %u at %u%%", tt->template, tt->version,
		    tt->canary, tt->percent);
	}
	(void)ro;
	return rollout_put(db, r);
}

struct rollouts *
rollout_open(const struct policyd_conf *conf, struct store *store,
    char *err, size_t errlen)
{
	struct rollouts	*ro = xcalloc(1, sizeof(*ro));
	sqlite3		*db = store_db(store);
	char		*msg = NULL;

	ro->store = store;
	ro->threshold = conf->roll_threshold;
	ro->min_exec = conf->roll_min_exec;
	if (sqlite3_exec(db, roll_schema, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "rollouts: %s", msg != NULL ? msg :
		    sqlite3_errmsg(db));
		sqlite3_free(msg);
		goto fail;
	}
	if (rollout_load_counts(ro, db, err, errlen) == -1)
		goto fail;
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
	    SQLITE_OK) {
		snprintf(err, errlen, "rollouts: %s", sqlite3_errmsg(db));
		goto fail;
	}
	for (size_t i = 0; i < conf->ntypes; i++) {
		const struct policyd_task_type *tt = &conf->types[i];

		if (tt->canary == 0)
			continue;
		ro->r = xreallocarray(ro->r, ro->n + 1, sizeof(*ro->r));
		if (rollout_reconcile(ro, db, tt, &ro->r[ro->n]) == -1) {
			snprintf(err, errlen, "rollouts: %s: %s", tt->type,
			    sqlite3_errmsg(db));
			(void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			goto fail;
		}
		ro->n++;
	}
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "rollouts: %s", sqlite3_errmsg(db));
		(void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		goto fail;
	}
	for (size_t i = 0; i < ro->n; i++)
		log_info("rollout %s: %s %u, canary %u at %u%%%s", ro->r[i].type,
		    ro->r[i].tmpl, ro->r[i].stable, ro->r[i].canary,
		    ro->r[i].percent, ro->r[i].halted ? " (halted)" :
		    ro->r[i].promoted ? " (promoted)" : "");
	return ro;
fail:
	rollout_close(ro);
	return NULL;
}

void
rollout_close(struct rollouts *ro)
{
	if (ro == NULL)
		return;
	free(ro->r);
	free(ro->c);
	free(ro);
}

void
rollout_use_fleet(struct rollouts *ro, struct fleet *f, const char *host)
{
	if (ro == NULL)
		return;
	ro->fleet = f;
	ro->host = host;
}

/* In a fleet, r's state as the database has it now.  0, or -1 (logged;
 * r keeps what it had, and the compile is refused by the fleet's
 * reservation anyway: the database is what failed). */
static int
rollout_sync(struct rollouts *ro, struct roll *r)
{
	struct fleet_roll	 init, now;
	char			 err[512];

	if (ro->fleet == NULL)
		return 0;
	memset(&init, 0, sizeof(init));
	init.stable = r->stable;
	init.canary = r->canary;
	init.percent = r->percent;
	init.halted = r->halted;
	init.promoted = r->promoted;
	snprintf(init.reason, sizeof(init.reason), "%s", r->reason);
	if (fleet_roll_get(ro->fleet, r->type, r->tmpl, &init, ro->host, &now,
	    err, sizeof(err)) == -1) {
		log_warnx("rollout %s: %s", r->type, err);
		return -1;
	}
	r->stable = now.stable;
	r->canary = now.canary;
	r->percent = now.percent;
	r->halted = now.halted;
	r->promoted = now.promoted;
	snprintf(r->reason, sizeof(r->reason), "%s", now.reason);
	return 0;
}

/* ---- assignment ---- */

const struct tmpl *
rollout_pick(struct rollouts *ro, const struct tmpl_registry *reg,
    const Sbx__V1__Task *t, int known)
{
	const struct tmpl	*st, *ca = NULL;
	struct roll		*r;
	char			 prev[160], *at;
	unsigned long		 v;

	if (ro == NULL || (r = rollout_find(ro, t->type)) == NULL)
		return NULL;
	(void)rollout_sync(ro, r);
	if ((st = template_find(reg, r->tmpl, r->stable)) == NULL)
		return NULL;
	if (r->canary != 0 && r->percent > 0)
		ca = template_find(reg, r->tmpl, r->canary);
	/* A task stays on the version of its first compile: stable, or a
	 * canary still taking tasks. */
	if (known && store_task_template(ro->store, t->id, prev,
	    sizeof(prev)) == 1 && (at = strrchr(prev, '@')) != NULL) {
		*at++ = '\0';
		v = strtoul(at, NULL, 10);
		if (strcmp(prev, r->tmpl) == 0) {
			if (v == r->stable)
				return st;
			if (ca != NULL && v == r->canary)
				return ca;
		}
	}
	if (ca != NULL && rollout_bucket(t->type, t->id) < r->percent)
		return ca;
	return st;
}

/* ---- counting and the halt rule ---- */

/* Check r's rules: halt it (in memory, due to be written) when one
 * differs by more than the threshold. */
static void
rollout_check(struct rollouts *ro, struct roll *r, const char *task_id,
    const char *execution_id, const char *hash)
{
	const struct roll_count	*c;
	uint64_t		 se, ce, sd, cd;
	double			 rs = 0, rc = 0;

	if (r->halted || r->promoted || r->canary == 0 || r->percent == 0 ||
	    ro->threshold == 0)
		return;
	se = rollout_get(ro, r->tmpl, r->stable, "");
	ce = rollout_get(ro, r->tmpl, r->canary, "");
	for (size_t i = 0; i < ro->nc; i++) {
		c = &ro->c[i];
		if (c->rule[0] == '\0' || strcmp(c->tmpl, r->tmpl) != 0 ||
		    (c->version != r->stable && c->version != r->canary))
			continue;
		sd = rollout_get(ro, r->tmpl, r->stable, c->rule);
		cd = rollout_get(ro, r->tmpl, r->canary, c->rule);
		if (!rollout_differs(se, sd, ce, cd, ro->threshold,
		    ro->min_exec, &rs, &rc))
			continue;
		/* In a fleet the halt is the database's at once, and
		 * recorded by the replica that made it. */
		if (ro->fleet != NULL) {
			char	 ferr[512], why[768];

			snprintf(why, sizeof(why), "task type %s: %s canary %u "
			    "halted by the threshold: rule %s (after task %s)",
			    r->type, r->tmpl, r->canary, c->rule, task_id);
			switch (fleet_roll_halt(ro->fleet, r->type, why,
			    ro->host, ferr, sizeof(ferr))) {
			case 1:
				break;
			case 0:
				(void)rollout_sync(ro, r);
				return;
			default:
				log_warnx("rollout %s: halt not in the fleet's "
				    "store (halted here): %s", r->type, ferr);
				break;
			}
		}
		r->percent = 0;
		r->halted = 1;
		r->due = 1;
		snprintf(r->due_rule, sizeof(r->due_rule), "%s", c->rule);
		snprintf(r->due_task, sizeof(r->due_task), "%s", task_id);
		snprintf(r->due_exec, sizeof(r->due_exec), "%s",
		    execution_id != NULL ? execution_id : "");
		snprintf(r->due_hash, sizeof(r->due_hash), "%s",
		    hash != NULL ? hash : "");
		snprintf(r->due_detail, sizeof(r->due_detail), "task type %s: "
		    "%s canary %u halted: rule %s denied %.3f of %llu "
		    "executions under canary %u and %.3f of %llu under stable "
		    "%u, a difference above threshold %.3f (after task %s)",
		    r->type, r->tmpl, r->canary, c->rule, rc,
		    (unsigned long long)ce, r->canary, rs,
		    (unsigned long long)se, r->stable, ro->threshold / 1000.0,
		    task_id);
		snprintf(r->reason, sizeof(r->reason), "%s", r->due_detail);
		ro->halts++;
		log_warnx("rollout %s", r->due_detail);
		return;
	}
}

/* A version some rollout serves: only those are counted in a fleet. */
static int
rollout_has(struct rollouts *ro, const char *tmpl, uint32_t version)
{
	for (size_t i = 0; i < ro->n; i++)
		if (strcmp(ro->r[i].tmpl, tmpl) == 0 &&
		    (ro->r[i].stable == version || ro->r[i].canary == version ||
		    ro->r[i].cfg_stable == version ||
		    ro->r[i].cfg_canary == version))
			return 1;
	return 0;
}

struct rollout_setc {
	struct rollouts	*ro;
	const char	*tmpl;
};

/* A count as the fleet has it replaces this host's. */
static void
rollout_set_count(void *arg, uint32_t version, const char *rule,
    uint64_t n)
{
	struct rollout_setc	*sc = arg;
	struct roll_count	*c;

	if ((c = rollout_count_find(sc->ro, sc->tmpl, version, rule, 1)) !=
	    NULL)
		c->n = n;
}

void
rollout_count(struct rollouts *ro, const char *task_id,
    const char *execution_id, const char *hash, const char *tmpl,
    uint32_t version, const struct store_denial *den, size_t nden)
{
	const char	*rules[STORE_DENIALS_MAX];
	size_t		 nrules = 0;
	char		 err[512];
	int		 fleet_ok = 0;

	if (ro == NULL || tmpl == NULL || version == 0)
		return;
	store_count_version(ro->store, tmpl, version);
	/* As store.c counts them: a rule once per execution. */
	for (size_t i = 0; i < nden && i < STORE_DENIALS_MAX; i++) {
		size_t	 j;

		if (den[i].rule[0] == '\0')
			continue;
		for (j = 0; j < i; j++)
			if (strcmp(den[j].rule, den[i].rule) == 0)
				break;
		if (j == i)
			rules[nrules++] = den[i].rule;
	}
	/* In a fleet every replica's executions count, and the counts
	 * read back are the whole fleet's. */
	if (ro->fleet != NULL && rollout_has(ro, tmpl, version)) {
		struct rollout_setc	 sc = { ro, tmpl };

		if (fleet_roll_count(ro->fleet, tmpl, version, rules, nrules,
		    rollout_set_count, &sc, err, sizeof(err)) == 0)
			fleet_ok = 1;
		else
			log_warnx("rollout: %s@%u: not counted in the fleet's "
			    "store (counted here): %s", tmpl, version, err);
	}
	if (!fleet_ok) {
		rollout_bump(ro, tmpl, version, "");
		for (size_t i = 0; i < nrules; i++)
			rollout_bump(ro, tmpl, version, rules[i]);
	}
	for (size_t i = 0; i < ro->n; i++)
		if (strcmp(ro->r[i].tmpl, tmpl) == 0 &&
		    (ro->r[i].stable == version || ro->r[i].canary == version)) {
			(void)rollout_sync(ro, &ro->r[i]);
			rollout_check(ro, &ro->r[i], task_id, execution_id,
			    hash);
		}
}

int
rollout_due(const struct rollouts *ro)
{
	if (ro == NULL)
		return 0;
	for (size_t i = 0; i < ro->n; i++)
		if (ro->r[i].due)
			return 1;
	return 0;
}

/* r's row and one audit event, in the transaction the caller began. */
static int
rollout_record(struct rollouts *ro, const struct roll *r,
    const char *task_id, const char *execution_id, const char *hash,
    const char *action, const char *rule, const char *detail,
    const char *actor)
{
	Sbx__V1__AuditEvent	 ev;

	if (rollout_put(store_db(ro->store), r) == -1)
		return -1;
	sbx__v1__audit_event__init(&ev);
	/* A halt by the threshold is under the task that tipped it, so
	 * `sbxctl audit TASK` shows it; a person's action under none. */
	ev.task_id = (char *)task_id;
	ev.execution_id = (char *)execution_id;
	ev.policy_hash = (char *)hash;
	ev.action = (char *)action;
	ev.rule = (char *)(rule != NULL ? rule : "");
	ev.detail = (char *)detail;
	ev.actor = (char *)actor;
	if (audit_add(store_audit(ro->store), &ev) == -1)
		return -1;
	audit_event_clear(&ev);
	return 0;
}

int
rollout_write_due(struct rollouts *ro)
{
	struct audit	*a;
	int		 ok = 1;

	if (!rollout_due(ro))
		return 0;
	a = store_audit(ro->store);
	if (audit_begin(a) == -1) {
		log_warnx("rollout: cannot record a halt: %s",
		    sqlite3_errmsg(store_db(ro->store)));
		return -1;
	}
	for (size_t i = 0; ok && i < ro->n; i++)
		if (ro->r[i].due && rollout_record(ro, &ro->r[i],
		    ro->r[i].due_task, ro->r[i].due_exec, ro->r[i].due_hash,
		    "rollout-halted", ro->r[i].due_rule, ro->r[i].due_detail,
		    "policyd") == -1)
			ok = 0;
	if (!ok || audit_commit(a) == -1) {
		/* The canary stays off here, and the halt is written with
		 * the next one. */
		log_warnx("rollout: cannot record a halt: %s",
		    sqlite3_errmsg(store_db(ro->store)));
		audit_rollback(a);
		return -1;
	}
	for (size_t i = 0; i < ro->n; i++)
		ro->r[i].due = 0;
	return 0;
}

/* ---- people ---- */

int
rollout_control(struct rollouts *ro, const Sbx__V1__RolloutControl *m,
    const char *actor, Sbx__V1__ErrorCode *code, char *err, size_t errlen)
{
	struct roll	*r, was;
	struct audit	*a;
	const char	*action;
	char		 detail[600];

	*code = SBX__V1__ERROR_CODE__ERROR_INVALID;
	if (m == NULL || m->type == NULL || m->type[0] == '\0') {
		snprintf(err, errlen, "rollout_control: no task type");
		return -1;
	}
	if (ro == NULL || (r = rollout_find(ro, m->type)) == NULL) {
		*code = SBX__V1__ERROR_CODE__ERROR_NOT_FOUND;
		snprintf(err, errlen, "task type \"%.128s\" has no rollout "
		    "(policyd.yaml task_types names stable and canary for "
		    "one)", m->type);
		return -1;
	}
	/* A person acts on the fleet's state, not on what this host saw
	 * last; without the database, not at all. */
	if (ro->fleet != NULL && rollout_sync(ro, r) == -1) {
		*code = SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE;
		snprintf(err, errlen, "rollout %s: the fleet's store is "
		    "unavailable; nothing was changed", r->type);
		return -1;
	}
	was = *r;
	switch (m->action) {
	case SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_PROMOTE:
		if (r->promoted) {
			snprintf(err, errlen, "rollout %s: already promoted "
			    "(%s %u is stable)", r->type, r->tmpl, r->stable);
			return -1;
		}
		if (r->halted) {
			snprintf(err, errlen, "rollout %s: canary %u was "
			    "halted (%s); it is not promoted: resume it with "
			    "set-percent first", r->type, r->canary, r->reason);
			return -1;
		}
		action = "rollout-promoted";
		snprintf(detail, sizeof(detail), "task type %s: %s %u "
		    "promoted: was stable %u, canary at %u%%", r->type,
		    r->tmpl, r->canary, r->stable, r->percent);
		r->stable = r->canary;
		r->canary = 0;
		r->percent = 0;
		r->promoted = 1;
		break;
	case SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_HALT:
		if (r->promoted) {
			snprintf(err, errlen, "rollout %s: promoted; there is "
			    "no canary to halt", r->type);
			return -1;
		}
		action = "rollout-halted";
		snprintf(detail, sizeof(detail), "task type %s: %s canary %u "
		    "halted by %s (was at %u%%)", r->type, r->tmpl, r->canary,
		    actor, r->percent);
		r->percent = 0;
		r->halted = 1;
		break;
	case SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_SET_PERCENT:
		if (m->percent > 100) {
			snprintf(err, errlen, "percent %u is out of range: "
			    "want 0..100", m->percent);
			return -1;
		}
		if (r->promoted) {
			snprintf(err, errlen, "rollout %s: promoted; there is "
			    "no canary to send tasks to", r->type);
			return -1;
		}
		action = "rollout-percent";
		snprintf(detail, sizeof(detail), "task type %s: %s canary %u "
		    "at %u%% (was %u%%%s) by %s", r->type, r->tmpl, r->canary,
		    m->percent, r->percent, r->halted ? ", halted" : "", actor);
		r->percent = m->percent;
		r->halted = 0;
		break;
	default:
		snprintf(err, errlen, "rollout_control: unknown action %d",
		    (int)m->action);
		return -1;
	}
	snprintf(r->reason, sizeof(r->reason), "%s", detail);
	a = store_audit(ro->store);
	if (audit_begin(a) == -1 || rollout_record(ro, r, "", "", "", action,
	    "", detail, actor) == -1 || audit_commit(a) == -1) {
		(void)audit_rollback(a);
		*r = was;
		*code = SBX__V1__ERROR_CODE__ERROR_INTERNAL;
		snprintf(err, errlen, "policyd.db: the change could not be "
		    "committed; nothing was changed");
		return -1;
	}
	if (ro->fleet != NULL) {
		struct fleet_roll	 fr;
		char			 ferr[512];

		memset(&fr, 0, sizeof(fr));
		fr.stable = r->stable;
		fr.canary = r->canary;
		fr.percent = r->percent;
		fr.halted = r->halted;
		fr.promoted = r->promoted;
		snprintf(fr.reason, sizeof(fr.reason), "%s", r->reason);
		/* Recorded here first: the record says more, never less. */
		if (fleet_roll_put(ro->fleet, r->type, r->tmpl, &fr, ro->host,
		    ferr, sizeof(ferr)) == -1) {
			log_warnx("rollout %s: audited, but not in the fleet's "
			    "store: %s", detail, ferr);
			*r = was;
			*code = SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE;
			snprintf(err, errlen, "rollout %s: the fleet's store "
			    "did not take the change; it was not made: repeat "
			    "it", r->type);
			return -1;
		}
	}
	log_info("rollout %s", detail);
	return 0;
}

/* ---- status and metrics ---- */

static int
rollout_rule_cmp(const void *a, const void *b)
{
	const Sbx__V1__RolloutRule *x = *(Sbx__V1__RolloutRule *const *)a;
	const Sbx__V1__RolloutRule *y = *(Sbx__V1__RolloutRule *const *)b;

	return strcmp(x->rule, y->rule);
}

static Sbx__V1__Rollout *
rollout_message(struct rollouts *ro, const struct roll *r)
{
	Sbx__V1__Rollout	*m = xmalloc(sizeof(*m));

	sbx__v1__rollout__init(m);
	m->type = xstrdup(r->type);
	m->template_ = xstrdup(r->tmpl);
	m->stable = r->stable;
	m->canary = r->canary;
	m->percent = r->percent;
	m->halted = r->halted;
	m->promoted = r->promoted;
	m->reason = xstrdup(r->reason);
	m->stable_executions = rollout_get(ro, r->tmpl, r->stable, "");
	m->canary_executions = rollout_get(ro, r->tmpl, r->canary, "");
	m->threshold = ro->threshold / 1000.0;
	m->min_executions = ro->min_exec;
	for (size_t i = 0; i < ro->nc; i++) {
		const struct roll_count	*c = &ro->c[i];
		Sbx__V1__RolloutRule	*rr;
		size_t			 j;

		if (c->rule[0] == '\0' || strcmp(c->tmpl, r->tmpl) != 0 ||
		    (c->version != r->stable && (r->canary == 0 ||
		    c->version != r->canary)))
			continue;
		for (j = 0; j < m->n_rules; j++)
			if (strcmp(m->rules[j]->rule, c->rule) == 0)
				break;
		if (j < m->n_rules)
			continue;
		rr = xmalloc(sizeof(*rr));
		sbx__v1__rollout_rule__init(rr);
		rr->rule = xstrdup(c->rule);
		rr->stable_denied = rollout_get(ro, r->tmpl, r->stable,
		    c->rule);
		rr->canary_denied = rollout_get(ro, r->tmpl, r->canary,
		    c->rule);
		m->rules = xreallocarray(m->rules, m->n_rules + 1,
		    sizeof(*m->rules));
		m->rules[m->n_rules++] = rr;
	}
	if (m->n_rules > 1)
		qsort(m->rules, m->n_rules, sizeof(*m->rules),
		    rollout_rule_cmp);
	return m;
}

int
rollout_status(struct rollouts *ro, const char *type, Sbx__V1__Rollouts *out,
    char *err, size_t errlen)
{
	sbx__v1__rollouts__init(out);
	for (size_t i = 0; ro != NULL && i < ro->n; i++) {
		if (type != NULL && type[0] != '\0' &&
		    strcmp(ro->r[i].type, type) != 0)
			continue;
		(void)rollout_sync(ro, &ro->r[i]);
		out->rollouts = xreallocarray(out->rollouts,
		    out->n_rollouts + 1, sizeof(*out->rollouts));
		out->rollouts[out->n_rollouts++] = rollout_message(ro,
		    &ro->r[i]);
	}
	if (type != NULL && type[0] != '\0' && out->n_rollouts == 0) {
		snprintf(err, errlen, "task type \"%.128s\" has no rollout",
		    type);
		return -1;
	}
	return 0;
}

void
rollout_status_clear(Sbx__V1__Rollouts *out)
{
	for (size_t i = 0; i < out->n_rollouts; i++)
		sbx__v1__rollout__free_unpacked(out->rollouts[i], NULL);
	free(out->rollouts);
	sbx__v1__rollouts__init(out);
}

/* A label value with \, " and newline escaped (Prometheus text). */
static char *
rollout_label(const char *s)
{
	char	*o = xmalloc(strlen(s) * 2 + 1), *p = o;

	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"') {
			*p++ = '\\';
			*p++ = *s;
		} else if (*s == '\n') {
			*p++ = '\\';
			*p++ = 'n';
		} else
			*p++ = *s;
	}
	*p = '\0';
	return o;
}

static void
rollout_cat(char **s, const char *fmt, ...) __attribute__((format(printf,
    2, 3)));
static void
rollout_cat(char **s, const char *fmt, ...)
{
	va_list	 ap;
	char	*add, *t;

	va_start(ap, fmt);
	if (vasprintf(&add, fmt, ap) == -1)
		fatal("vasprintf");
	va_end(ap);
	xasprintf(&t, "%s%s", *s, add);
	free(*s);
	free(add);
	*s = t;
}

char *
rollout_metrics(const struct rollouts *ro)
{
	char	*s = xstrdup(""), *t, *r;

	if (ro == NULL)
		return s;
	rollout_cat(&s, "# HELP sbx_policyd_rollout_executions_total "
	    "Executions counted per template version (results, and compiles "
	    "refused once the version was chosen).\n"
	    "# TYPE sbx_policyd_rollout_executions_total counter\n");
	for (size_t i = 0; i < ro->nc; i++) {
		if (ro->c[i].rule[0] != '\0')
			continue;
		t = rollout_label(ro->c[i].tmpl);
		rollout_cat(&s, "sbx_policyd_rollout_executions_total{"
		    "template=\"%s\",version=\"%u\"} %llu\n", t,
		    ro->c[i].version, (unsigned long long)ro->c[i].n);
		free(t);
	}
	rollout_cat(&s, "# HELP sbx_policyd_rollout_denials_total "
	    "Executions with at least one denial of a rule, per template "
	    "version.\n"
	    "# TYPE sbx_policyd_rollout_denials_total counter\n");
	for (size_t i = 0; i < ro->nc; i++) {
		if (ro->c[i].rule[0] == '\0')
			continue;
		t = rollout_label(ro->c[i].tmpl);
		r = rollout_label(ro->c[i].rule);
		rollout_cat(&s, "sbx_policyd_rollout_denials_total{"
		    "template=\"%s\",version=\"%u\",rule=\"%s\"} %llu\n", t,
		    ro->c[i].version, r, (unsigned long long)ro->c[i].n);
		free(t);
		free(r);
	}
	rollout_cat(&s, "# HELP sbx_policyd_rollout_canary_percent Share of "
	    "new tasks a rollout sends to its canary.\n"
	    "# TYPE sbx_policyd_rollout_canary_percent gauge\n");
	for (size_t i = 0; i < ro->n; i++) {
		t = rollout_label(ro->r[i].type);
		rollout_cat(&s, "sbx_policyd_rollout_canary_percent{type=\"%s\"}"
		    " %u\n", t, ro->r[i].percent);
		free(t);
	}
	rollout_cat(&s, "# HELP sbx_policyd_rollout_halts_total Canaries "
	    "halted by rollout.threshold.\n"
	    "# TYPE sbx_policyd_rollout_halts_total counter\n"
	    "sbx_policyd_rollout_halts_total %llu\n",
	    (unsigned long long)ro->halts);
	return s;
}
