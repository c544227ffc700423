/*
 * fleet.c: the state a fleet of policyd replicas shares, in PostgreSQL
 * (store: {backend: postgresql} in policyd.yaml).  Each host keeps its
 * own policyd.db as before -- its audit chain, its batches, its view of
 * the task -- and this file adds what must hold across hosts: a task's
 * binding (tenant, user, type), its execution count against
 * executions_per_task, its egress budget across executions (one row a
 * run: granted, then spent), and the capability grants a recompile
 * starts from.
 *
 * The invariant: no task gets more executions than its cap, whichever
 * replicas compile it, and no run is granted egress another run of the
 * task already holds.  fleet_reserve() does it in one transaction: the
 * task's row locked (SELECT ... FOR UPDATE), the count raised only by a
 * conditional UPDATE (executions < cap), the run's egress row inserted,
 * then COMMIT with synchronous_commit on, before compile.c signs or
 * replies.  A replica never decides from a count it read outside that
 * lock.  Fail closed: a database that cannot be reached, or a statement
 * that fails or gets no answer within store.timeout_ms (pg.c), refuses
 * the compile or the grant with a clear error; after a round trip that
 * ran out its deadline every call is refused at once for a back-off,
 * then one reconnects, so the daemon recovers when the database does.
 * A reservation whose local commit then fails stays counted: more,
 * never less (as store.c counts an unknown spend).
 *
 * Every statement goes through fleet_exec (parameters in, a result or an
 * error out, the transaction rolled back on failure).  The calls run on
 * the event loop, each round trip within its deadline; conninfo is
 * never logged (it may hold a password), only its host and database.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "yaml.h"
#include "pg.h"
#include "util.h"
#include "policyd.h"

struct fleet {
	struct pg		*pg;
	struct entitle_eff	 eff;	/* fleet_entitle_get()'s last */
};

static const char fleet_schema[] =
    "CREATE TABLE IF NOT EXISTS sbx_tasks("
    " task_id text PRIMARY KEY,"
    " tenant text NOT NULL,"
    " usr text NOT NULL,"
    " type text NOT NULL,"
    " executions bigint NOT NULL DEFAULT 0 CHECK (executions >= 0),"
    " created timestamptz NOT NULL DEFAULT now());"
    "CREATE TABLE IF NOT EXISTS sbx_egress("
    " execution_id text PRIMARY KEY,"
    " task_id text NOT NULL REFERENCES sbx_tasks(task_id),"
    " host text NOT NULL,"
    " granted bigint NOT NULL,"
    " spent bigint);"
    "CREATE INDEX IF NOT EXISTS sbx_egress_task ON sbx_egress(task_id);"
    "CREATE TABLE IF NOT EXISTS sbx_grants("
    " task_id text NOT NULL,"
    " request_id text NOT NULL,"
    " dataset text NOT NULL DEFAULT '',"
    " rule bytea,"
    " host text NOT NULL,"
    " created timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (task_id, request_id));"
    /* Capability requests, so a decision reaches whichever replica
     * the deciding approvald talks to; status moves from PENDING once. */
    "CREATE TABLE IF NOT EXISTS sbx_cap_requests("
    " request_id text PRIMARY KEY,"
    " task_id text NOT NULL,"
    " template text NOT NULL,"
    " status integer NOT NULL,"
    " reason text NOT NULL DEFAULT '',"
    " approver text NOT NULL DEFAULT '',"
    " decided_at bigint NOT NULL DEFAULT 0,"
    " policy_hash text NOT NULL DEFAULT '',"
    " request bytea NOT NULL,"
    " host text NOT NULL);"
    /* Template versions, immutable fleet-wide: the first host to load
     * NAME@VERSION registers its hash and normalised policy, and every
     * host after must load the same (fleet_templates). */
    "CREATE TABLE IF NOT EXISTS sbx_templates("
    " name text NOT NULL,"
    " version bigint NOT NULL,"
    " hash text NOT NULL,"
    " policy bytea NOT NULL,"
    " host text NOT NULL,"
    " file text NOT NULL DEFAULT '',"
    " created timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (name, version));"
    /* Entitlements, as entitle.c keeps them in policyd.db: a change
     * through any replica is read by the next compile at every host. */
    "CREATE TABLE IF NOT EXISTS sbx_entitlements("
    " tenant text NOT NULL,"
    " usr text NOT NULL,"
    " cpus_milli bigint NOT NULL DEFAULT 0,"
    " memory_mb bigint NOT NULL DEFAULT 0,"
    " pids bigint NOT NULL DEFAULT 0,"
    " wall_seconds bigint NOT NULL DEFAULT 0,"
    " scratch_mb bigint NOT NULL DEFAULT 0,"
    " PRIMARY KEY (tenant, usr));"
    "CREATE TABLE IF NOT EXISTS sbx_entitlement_datasets("
    " tenant text NOT NULL,"
    " usr text NOT NULL,"
    " dataset text NOT NULL,"
    " PRIMARY KEY (tenant, usr, dataset));"
    "CREATE TABLE IF NOT EXISTS sbx_entitlement_hosts("
    " tenant text NOT NULL,"
    " usr text NOT NULL,"
    " host text NOT NULL,"
    " PRIMARY KEY (tenant, usr, host));"
    /* Rollouts: the state every replica picks by, and the counts the
     * halt rule reads, raised in place (n = n + 1) by any replica. */
    "CREATE TABLE IF NOT EXISTS sbx_rollouts("
    " type text PRIMARY KEY,"
    " tmpl text NOT NULL,"
    " stable bigint NOT NULL,"
    " canary bigint NOT NULL,"
    " percent bigint NOT NULL,"
    " halted boolean NOT NULL,"
    " promoted boolean NOT NULL,"
    " reason text NOT NULL DEFAULT '',"
    " host text NOT NULL,"
    " updated timestamptz NOT NULL DEFAULT now());"
    "CREATE TABLE IF NOT EXISTS sbx_rollout_counts("
    " tmpl text NOT NULL,"
    " version bigint NOT NULL,"
    " rule text NOT NULL,"
    " n bigint NOT NULL DEFAULT 0,"
    " PRIMARY KEY (tmpl, version, rule));"
    /* The security review: a task's denials at every replica, raised in
     * place (n = n + k) after the replica's batch that records them is
     * durable, against the one threshold in sbx_review. */
    "CREATE TABLE IF NOT EXISTS sbx_task_denials("
    " task_id text PRIMARY KEY,"
    " n bigint NOT NULL DEFAULT 0 CHECK (n >= 0));"
    "CREATE TABLE IF NOT EXISTS sbx_review("
    " id integer PRIMARY KEY CHECK (id = 1),"
    " denials bigint NOT NULL CHECK (denials >= 0),"
    " host text NOT NULL);";

/*
 * One statement of the fleet's, every call's way to the database: the
 * parameters in (text, or binary where fmts says so, lens giving the
 * length), the result out when its status is want (binary results if
 * bin), else NULL with err naming the database and libpq's message, and
 * the transaction rolled back (a connection that cannot is dropped, so
 * the next call makes a new one).  Outside a transaction the connection
 * is made ready first: a call alone needs no pg_ready of its own.
 */
static PGresult *
fleet_exec(struct fleet *f, const char *sql, int n, const char *const *v,
    const int *lens, const int *fmts, int bin, ExecStatusType want,
    char *err, size_t errlen)
{
	PGresult	*res;

	if (!pg_in_tx(f->pg) && pg_ready(f->pg, err, errlen) == -1)
		return NULL;
	if ((res = pg_params(f->pg, sql, n, v, lens, fmts, bin, want, err,
	    errlen)) == NULL)
		pg_rollback(f->pg);
	return res;
}

/* A statement whose result is only its status: 0, or -1 as fleet_exec. */
static int
fleet_run(struct fleet *f, const char *sql, int n, const char *const *v,
    char *err, size_t errlen)
{
	PGresult	*res;

	if ((res = fleet_exec(f, sql, n, v, NULL, NULL, 0, PGRES_COMMAND_OK,
	    err, errlen)) == NULL)
		return -1;
	PQclear(res);
	return 0;
}

/* BEGIN, after a ready connection: 0, or -1 with err. */
static int
fleet_begin(struct fleet *f, char *err, size_t errlen)
{
	if (pg_begin(f->pg, err, errlen) == 0)
		return 0;
	pg_rollback(f->pg);
	return -1;
}

/* synchronous_commit is on: durable when COMMIT returns. */
static int
fleet_commit(struct fleet *f, char *err, size_t errlen)
{
	return fleet_run(f, "COMMIT", 0, NULL, err, errlen);
}

#define FLEET_Q(f, sql, n, v, want, err, errlen)			\
	fleet_exec((f), (sql), (n), (v), NULL, NULL, 0, (want), (err),	\
	    (errlen))

struct fleet *
fleet_open(const struct pg_store *st)
{
	struct fleet	*f;

	f = xcalloc(1, sizeof(*f));
	f->pg = pg_new(st->conninfo, fleet_schema);
	pg_limits(f->pg, st->timeout_ms, st->retry_ms);
	return f;
}

void
fleet_close(struct fleet *f)
{
	if (f == NULL)
		return;
	pg_free(f->pg);
	entitle_eff_clear(&f->eff);
	free(f);
}

const char *
fleet_where_str(const struct fleet *f)
{
	return pg_where(f->pg);
}

int
fleet_reserve(struct fleet *f, const Sbx__V1__Task *t,
    const char *execution_id, const char *host, uint32_t cap,
    int64_t budget, struct fleet_res *out, char *err, size_t errlen)
{
	PGresult	*res;
	char		 capbuf[16], granted[24];
	const char	*v[5];
	int64_t		 used, g;

	memset(out, 0, sizeof(*out));
	if (fleet_begin(f, err, errlen) == -1)
		return -1;
	v[0] = t->id;
	v[1] = t->tenant;
	v[2] = t->user;
	v[3] = t->type;
	if (fleet_run(f, "INSERT INTO sbx_tasks(task_id, tenant, usr, type)"
	    " VALUES ($1, $2, $3, $4) ON CONFLICT (task_id) DO NOTHING", 4, v,
	    err, errlen) == -1)
		return -1;
	/* The row is this transaction's until COMMIT: every replica's
	 * reservation of the task waits here for the one before it. */
	if ((res = FLEET_Q(f, "SELECT tenant, usr, type, executions FROM"
	    " sbx_tasks WHERE task_id = $1 FOR UPDATE", 1, v,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		errf(err, errlen, "%s: task %s: no row", pg_where(f->pg), t->id);
		PQclear(res);
		pg_rollback(f->pg);
		return -1;
	}
	snprintf(out->tenant, sizeof(out->tenant), "%s", PQgetvalue(res, 0, 0));
	snprintf(out->user, sizeof(out->user), "%s", PQgetvalue(res, 0, 1));
	snprintf(out->type, sizeof(out->type), "%s", PQgetvalue(res, 0, 2));
	out->executions = strtoll(PQgetvalue(res, 0, 3), NULL, 10);
	PQclear(res);
	if (strcmp(out->tenant, t->tenant) != 0 ||
	    strcmp(out->user, t->user) != 0 ||
	    strcmp(out->type, t->type) != 0) {
		pg_rollback(f->pg);
		return FLEET_MISMATCH;
	}
	if ((res = FLEET_Q(f, "SELECT coalesce(sum(coalesce(spent,"
	    " granted)), 0) FROM sbx_egress WHERE task_id = $1", 1, v,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	used = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	out->egress_used = used < 0 ? 0 : (uint64_t)used;
	/* Conditional, so the cap holds even were the lock not there. */
	snprintf(capbuf, sizeof(capbuf), "%u", cap);
	v[1] = capbuf;
	if ((res = FLEET_Q(f, "UPDATE sbx_tasks SET executions ="
	    " executions + 1 WHERE task_id = $1 AND executions < $2::bigint"
	    " RETURNING executions", 2, v, PGRES_TUPLES_OK, err,
	    errlen)) == NULL)
		return -1;
	if (PQntuples(res) != 1) {
		PQclear(res);
		pg_rollback(f->pg);
		return FLEET_EXHAUSTED;
	}
	out->executions = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	if (budget >= 0) {
		g = (int64_t)out->egress_used >= budget ? 0 :
		    budget - (int64_t)out->egress_used;
		snprintf(granted, sizeof(granted), "%lld", (long long)g);
		v[0] = execution_id;
		v[1] = t->id;
		v[2] = host;
		v[3] = granted;
		if (fleet_run(f, "INSERT INTO sbx_egress(execution_id,"
		    " task_id, host, granted) VALUES ($1, $2, $3,"
		    " $4::bigint)", 4, v, err, errlen) == -1)
			return -1;
	}
	if (fleet_commit(f, err, errlen) == -1)
		return -1;
	return FLEET_RESERVED;
}

int
fleet_spent(struct fleet *f, const char *execution_id, uint64_t spent)
{
	char		 buf[24], err[512];
	const char	*v[2];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)(spent >
	    INT64_MAX ? INT64_MAX : spent));
	v[0] = execution_id;
	v[1] = buf;
	/* Only ever lowers a run's count to what it sent: a replayed or
	 * late report cannot raise another's budget. */
	if (fleet_run(f, "UPDATE sbx_egress SET spent = least(granted,"
	    " $2::bigint) WHERE execution_id = $1 AND spent IS NULL", 2, v,
	    err, sizeof(err)) == -1) {
		log_warnx("execution %s: spend not shipped: %s", execution_id,
		    err);
		return -1;
	}
	return 0;
}

int
fleet_grant_put(struct fleet *f, const char *task_id,
    const char *request_id, const char *dataset, const uint8_t *rule,
    size_t len, const char *host, char *err, size_t errlen)
{
	PGresult	*res;
	const char	*v[5];
	int		 lens[5] = { 0, 0, 0, 0, 0 };
	int		 fmts[5] = { 0, 0, 0, 1, 0 };

	v[0] = task_id;
	v[1] = request_id;
	v[2] = dataset != NULL ? dataset : "";
	v[3] = (const char *)rule;
	lens[3] = (int)len;
	v[4] = host;
	/* One statement: committed, durably, when it returns. */
	if ((res = fleet_exec(f, "INSERT INTO sbx_grants(task_id,"
	    " request_id, dataset, rule, host) VALUES ($1, $2, $3,"
	    " $4::bytea, $5) ON CONFLICT (task_id, request_id) DO NOTHING",
	    5, v, lens, fmts, 0, PGRES_COMMAND_OK, err, errlen)) == NULL)
		return -1;
	PQclear(res);
	return 0;
}

int
fleet_grants(struct fleet *f, const char *task_id,
    int (*fn)(void *, const char *, const uint8_t *, size_t), void *arg,
    char *err, size_t errlen)
{
	PGresult	*res;
	const char	*v[1] = { task_id };
	int		 i, rc = 0;

	/* Binary results: the rule is the AllowRule's packed bytes. */
	if ((res = fleet_exec(f, "SELECT dataset, rule FROM sbx_grants WHERE"
	    " task_id = $1 ORDER BY request_id", 1, v, NULL, NULL, 1,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	for (i = 0; i < PQntuples(res) && rc == 0; i++) {
		char	*ds;
		int	 dl = PQgetlength(res, i, 0);

		ds = xmalloc((size_t)dl + 1);
		memcpy(ds, PQgetvalue(res, i, 0), (size_t)dl);
		ds[dl] = '\0';
		if (PQgetisnull(res, i, 1))
			rc = fn(arg, ds, NULL, 0);
		else
			rc = fn(arg, ds, (const uint8_t *)PQgetvalue(res, i, 1),
			    (size_t)PQgetlength(res, i, 1));
		free(ds);
	}
	if (rc != 0)
		errf(err, errlen, "%s: a grant of task %s does not "
		    "decode", pg_where(f->pg), task_id);
	PQclear(res);
	return rc == 0 ? 0 : -1;
}

int
fleet_request_put(struct fleet *f, const char *request_id,
    const char *task_id, const char *template, int status,
    const char *reason, const char *hash, const uint8_t *body, size_t len,
    const char *host, char *err, size_t errlen)
{
	PGresult	*res;
	char		 st[16], when[24];
	const char	*v[9];
	int		 lens[9] = { 0 }, fmts[9] = { 0 };

	snprintf(st, sizeof(st), "%d", status);
	snprintf(when, sizeof(when), "%lld", (long long)(status ==
	    SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING ? 0 : now_s()));
	v[0] = request_id;
	v[1] = task_id;
	v[2] = template;
	v[3] = st;
	v[4] = reason;
	v[5] = when;
	v[6] = hash;
	v[7] = (const char *)body;
	lens[7] = (int)len;
	fmts[7] = 1;
	v[8] = host;
	if ((res = fleet_exec(f, "INSERT INTO sbx_cap_requests(request_id,"
	    " task_id, template, status, reason, decided_at, policy_hash,"
	    " request, host) VALUES ($1, $2, $3, $4::integer, $5,"
	    " $6::bigint, $7, $8::bytea, $9)", 9, v, lens, fmts, 0,
	    PGRES_COMMAND_OK, err, errlen)) == NULL)
		return -1;
	PQclear(res);
	return 0;
}

int
fleet_request_get(struct fleet *f, const char *request_id,
    struct fleet_req *out, char *err, size_t errlen)
{
	PGresult	*res;
	const char	*v[1] = { request_id };
	int		 n;

	memset(out, 0, sizeof(*out));
	/* Binary results, the integers as text (status::text). */
	if ((res = fleet_exec(f, "SELECT task_id, template, status::text,"
	    " reason, approver, decided_at::text, policy_hash, request FROM"
	    " sbx_cap_requests WHERE request_id = $1", 1, v, NULL, NULL, 1,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	if ((n = PQntuples(res)) == 1) {
		char	 buf[32];

#define FLEET_COPY(dst, col) do {					\
	int	 l_ = PQgetlength(res, 0, (col));			\
	if ((size_t)l_ >= sizeof(dst))					\
		l_ = (int)sizeof(dst) - 1;				\
	memcpy((dst), PQgetvalue(res, 0, (col)), (size_t)l_);		\
	(dst)[l_] = '\0';						\
} while (0)
		FLEET_COPY(out->task_id, 0);
		FLEET_COPY(out->template, 1);
		FLEET_COPY(buf, 2);
		out->status = (int)strtol(buf, NULL, 10);
		FLEET_COPY(out->reason, 3);
		FLEET_COPY(out->approver, 4);
		FLEET_COPY(buf, 5);
		out->decided_at = strtoll(buf, NULL, 10);
		FLEET_COPY(out->hash, 6);
#undef FLEET_COPY
		out->body_len = (size_t)PQgetlength(res, 0, 7);
		out->body = xmalloc(out->body_len + 1);
		memcpy(out->body, PQgetvalue(res, 0, 7), out->body_len);
	}
	PQclear(res);
	return n == 1 ? 1 : 0;
}

int
fleet_request_decide(struct fleet *f, const char *request_id, int status,
    const char *reason, const char *approver, int64_t when,
    const char *hash, char *err, size_t errlen)
{
	PGresult	*res;
	char		 st[16], pend[16], w[24];
	const char	*v[7];
	int		 n;

	snprintf(st, sizeof(st), "%d", status);
	snprintf(pend, sizeof(pend), "%d",
	    SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING);
	snprintf(w, sizeof(w), "%lld", (long long)when);
	v[0] = request_id;
	v[1] = st;
	v[2] = reason;
	v[3] = approver;
	v[4] = w;
	v[5] = hash;
	v[6] = pend;
	/* The one place a request leaves PENDING, whichever replica asks:
	 * two approvers at two hosts cannot both decide it. */
	if ((res = FLEET_Q(f, "UPDATE sbx_cap_requests SET status ="
	    " $2::integer, reason = $3, approver = $4, decided_at ="
	    " $5::bigint, policy_hash = $6 WHERE request_id = $1 AND status"
	    " = $7::integer", 7, v, PGRES_COMMAND_OK, err, errlen)) == NULL)
		return -1;
	n = atoi(PQcmdTuples(res));
	PQclear(res);
	return n == 1 ? 1 : 0;
}

int
fleet_templates(struct fleet *f, const struct tmpl_registry *reg,
    const char *host, struct yerrs *errs, char *err, size_t errlen)
{
	PGresult	*res;
	const char	*v[6];
	int		 lens[6] = { 0 }, fmts[6] = { 0 };
	char		 ver[16];
	uint8_t		*buf;
	size_t		 i, len, nerr = errs->n;

	if (fleet_begin(f, err, errlen) == -1)
		return -1;
	for (i = 0; i < reg->n; i++) {
		const struct tmpl	*t = reg->t[i];

		snprintf(ver, sizeof(ver), "%u", t->version);
		len = sbx__v1__policy__get_packed_size(t->policy);
		buf = xmalloc(len + 1);
		sbx__v1__policy__pack(t->policy, buf);
		v[0] = t->name;
		v[1] = ver;
		v[2] = t->hash;
		v[3] = (const char *)buf;
		lens[3] = (int)len;
		fmts[3] = 1;
		v[4] = host;
		v[5] = t->file;
		/* Registered if absent; a version another host registered
		 * first is left as it is, and compared below. */
		res = fleet_exec(f, "INSERT INTO sbx_templates(name,"
		    " version, hash, policy, host, file) VALUES ($1,"
		    " $2::bigint, $3, $4::bytea, $5, $6) ON CONFLICT (name,"
		    " version) DO NOTHING", 6, v, lens, fmts, 0,
		    PGRES_COMMAND_OK, err, errlen);
		free(buf);
		if (res == NULL)
			return -1;
		PQclear(res);
		if ((res = FLEET_Q(f, "SELECT hash, host, file FROM"
		    " sbx_templates WHERE name = $1 AND version = $2::bigint",
		    2, v, PGRES_TUPLES_OK, err, errlen)) == NULL)
			return -1;
		if (PQntuples(res) != 1) {
			errf(err, errlen, "%s: template %s version %u: no "
			    "row", pg_where(f->pg), t->name, t->version);
			PQclear(res);
			pg_rollback(f->pg);
			return -1;
		}
		if (strcmp(PQgetvalue(res, 0, 0), t->hash) != 0)
			yerrs_add(errs, "%s: template %s version %u differs "
			    "from the fleet's: here it hashes to %s, but host "
			    "%s registered version %u as %s (from %s); "
			    "versions are immutable across the fleet: give "
			    "this policy a new version", t->file, t->name,
			    t->version, t->hash, PQgetvalue(res, 0, 1),
			    t->version, PQgetvalue(res, 0, 0),
			    PQgetvalue(res, 0, 2));
		PQclear(res);
	}
	/* None registered by a host that refuses its set. */
	if (errs->n != nerr) {
		pg_rollback(f->pg);
		return -2;
	}
	return fleet_commit(f, err, errlen);
}

int
fleet_entitle_begin(struct fleet *f, const Sbx__V1__Entitlement *m, int add,
    char *err, size_t errlen)
{
	const Sbx__V1__Limits	*l = m->max_limits;
	PGresult		*res;
	const char		*v[8];
	char			 lim[5][16];
	char			*h;
	size_t			 i;
	int			 ok = 1, found;

	if (fleet_begin(f, err, errlen) == -1)
		return -1;
	v[0] = m->tenant;
	v[1] = m->user;
	if (add) {
		if (m->replace)
			ok = fleet_run(f, "DELETE FROM"
			    " sbx_entitlement_datasets WHERE tenant = $1 AND"
			    " usr = $2", 2, v, err, errlen) == 0 &&
			    fleet_run(f, "DELETE FROM sbx_entitlement_hosts"
			    " WHERE tenant = $1 AND usr = $2", 2, v, err,
			    errlen) == 0;
		ok = ok && fleet_run(f, "INSERT INTO sbx_entitlements("
		    "tenant, usr) VALUES ($1, $2) ON CONFLICT DO NOTHING", 2,
		    v, err, errlen) == 0;
		snprintf(lim[0], sizeof(lim[0]), "%u", l ? l->cpus_milli : 0);
		snprintf(lim[1], sizeof(lim[1]), "%u", l ? l->memory_mb : 0);
		snprintf(lim[2], sizeof(lim[2]), "%u", l ? l->pids : 0);
		snprintf(lim[3], sizeof(lim[3]), "%u", l ? l->wall_seconds : 0);
		snprintf(lim[4], sizeof(lim[4]), "%u", l ? l->scratch_mb : 0);
		for (i = 0; i < 5; i++)
			v[2 + i] = lim[i];
		v[7] = m->replace ? "true" : "false";
		/* The row locked until COMMIT: a change at another replica
		 * waits, none is lost. */
		ok = ok && fleet_run(f, "UPDATE sbx_entitlements SET"
		    " cpus_milli = CASE WHEN $3::bigint > 0 OR $8::boolean"
		    " THEN $3::bigint ELSE cpus_milli END,"
		    " memory_mb = CASE WHEN $4::bigint > 0 OR $8::boolean"
		    " THEN $4::bigint ELSE memory_mb END,"
		    " pids = CASE WHEN $5::bigint > 0 OR $8::boolean"
		    " THEN $5::bigint ELSE pids END,"
		    " wall_seconds = CASE WHEN $6::bigint > 0 OR $8::boolean"
		    " THEN $6::bigint ELSE wall_seconds END,"
		    " scratch_mb = CASE WHEN $7::bigint > 0 OR $8::boolean"
		    " THEN $7::bigint ELSE scratch_mb END"
		    " WHERE tenant = $1 AND usr = $2", 8, v, err,
		    errlen) == 0;
		for (i = 0; ok && i < m->n_datasets; i++) {
			v[2] = m->datasets[i];
			ok = fleet_run(f, "INSERT INTO"
			    " sbx_entitlement_datasets(tenant, usr, dataset)"
			    " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", 3,
			    v, err, errlen) == 0;
		}
		for (i = 0; ok && i < m->n_hosts; i++) {
			v[2] = h = entitle_host_norm(m->hosts[i]);
			ok = fleet_run(f, "INSERT INTO"
			    " sbx_entitlement_hosts(tenant, usr, host)"
			    " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", 3,
			    v, err, errlen) == 0;
			free(h);
		}
		/* A statement that failed rolled the change back. */
		return ok ? 0 : -1;
	}
	if ((res = FLEET_Q(f, "SELECT 1 FROM sbx_entitlements WHERE"
	    " tenant = $1 AND usr = $2 FOR UPDATE", 2, v, PGRES_TUPLES_OK,
	    err, errlen)) == NULL)
		return -1;
	found = PQntuples(res) == 1;
	PQclear(res);
	if (!found) {
		pg_rollback(f->pg);
		return 1;
	}
	if (m->n_datasets == 0 && m->n_hosts == 0)
		ok = fleet_run(f, "DELETE FROM sbx_entitlement_datasets"
		    " WHERE tenant = $1 AND usr = $2", 2, v, err,
		    errlen) == 0 &&
		    fleet_run(f, "DELETE FROM sbx_entitlement_hosts WHERE"
		    " tenant = $1 AND usr = $2", 2, v, err, errlen) == 0 &&
		    fleet_run(f, "DELETE FROM sbx_entitlements WHERE"
		    " tenant = $1 AND usr = $2", 2, v, err, errlen) == 0;
	for (i = 0; ok && i < m->n_datasets; i++) {
		v[2] = m->datasets[i];
		ok = fleet_run(f, "DELETE FROM sbx_entitlement_datasets"
		    " WHERE tenant = $1 AND usr = $2 AND dataset = $3", 3, v,
		    err, errlen) == 0;
	}
	for (i = 0; ok && i < m->n_hosts; i++) {
		v[2] = h = entitle_host_norm(m->hosts[i]);
		ok = fleet_run(f, "DELETE FROM sbx_entitlement_hosts"
		    " WHERE tenant = $1 AND usr = $2 AND host = $3", 3, v,
		    err, errlen) == 0;
		free(h);
	}
	return ok ? 0 : -1;
}

int
fleet_entitle_commit(struct fleet *f, char *err, size_t errlen)
{
	return fleet_commit(f, err, errlen);
}

void
fleet_entitle_abort(struct fleet *f)
{
	pg_rollback(f->pg);
}

static void
fleet_push(char ***v, size_t *n, const char *s)
{
	*v = xreallocarray(*v, *n + 1, sizeof(**v));
	(*v)[(*n)++] = xstrdup(s);
}

const struct entitle_eff *
fleet_entitle_get(struct fleet *f, const char *tenant, const char *user,
    char *err, size_t errlen)
{
	struct entitle_eff	*eff = &f->eff;
	Sbx__V1__Limits		 ul, al, *l;
	PGresult		*res;
	const char		*v[2] = { tenant, user };
	int			 i;

	entitle_eff_clear(eff);
	sbx__v1__limits__init(&eff->plan);
	sbx__v1__limits__init(&ul);
	sbx__v1__limits__init(&al);
	/* One statement, one snapshot: the rows, datasets and hosts of
	 * the user and of "*", the lists in strcmp order (COLLATE "C"),
	 * as entitle_can_read() searches them. */
	if ((res = FLEET_Q(f, "SELECT 'r', usr COLLATE \"C\","
	    " cpus_milli, memory_mb, pids, wall_seconds, scratch_mb FROM"
	    " sbx_entitlements WHERE tenant = $1 AND (usr = $2 OR"
	    " usr = '*')"
	    " UNION ALL (SELECT DISTINCT 'd', dataset COLLATE \"C\", 0, 0,"
	    " 0, 0, 0 FROM sbx_entitlement_datasets WHERE tenant = $1 AND"
	    " (usr = $2 OR usr = '*'))"
	    " UNION ALL (SELECT DISTINCT 'h', host COLLATE \"C\", 0, 0, 0,"
	    " 0, 0 FROM sbx_entitlement_hosts WHERE tenant = $1 AND"
	    " (usr = $2 OR usr = '*'))"
	    " ORDER BY 1, 2", 2, v, PGRES_TUPLES_OK, err,
	    errlen)) == NULL)
		return NULL;
	for (i = 0; i < PQntuples(res); i++) {
		const char	*k = PQgetvalue(res, i, 0);
		const char	*s = PQgetvalue(res, i, 1);

		if (*k == 'd') {
			fleet_push(&eff->datasets, &eff->ndatasets, s);
			continue;
		}
		if (*k == 'h') {
			fleet_push(&eff->hosts, &eff->nhosts, s);
			continue;
		}
		eff->found = 1;
		l = strcmp(s, POLICYD_USER_ALL) == 0 &&
		    strcmp(user, POLICYD_USER_ALL) != 0 ? &al : &ul;
		l->cpus_milli = (uint32_t)strtoul(PQgetvalue(res, i, 2), NULL,
		    10);
		l->memory_mb = (uint32_t)strtoul(PQgetvalue(res, i, 3), NULL,
		    10);
		l->pids = (uint32_t)strtoul(PQgetvalue(res, i, 4), NULL, 10);
		l->wall_seconds = (uint32_t)strtoul(PQgetvalue(res, i, 5),
		    NULL, 10);
		l->scratch_mb = (uint32_t)strtoul(PQgetvalue(res, i, 6), NULL,
		    10);
	}
	PQclear(res);
	if (!eff->found) {
		/* Lists without a row grant nothing (as entitle_get). */
		entitle_eff_clear(eff);
		sbx__v1__limits__init(&eff->plan);
		return eff;
	}
#define FLEET_PICK(fld) (ul.fld != 0 ? ul.fld : al.fld)
	eff->plan.cpus_milli = FLEET_PICK(cpus_milli);
	eff->plan.memory_mb = FLEET_PICK(memory_mb);
	eff->plan.pids = FLEET_PICK(pids);
	eff->plan.wall_seconds = FLEET_PICK(wall_seconds);
	eff->plan.scratch_mb = FLEET_PICK(scratch_mb);
#undef FLEET_PICK
	return eff;
}

int
fleet_entitle_list(struct fleet *f, const char *tenant, const char *user,
    Sbx__V1__Entitlement ***out, size_t *n, char *err, size_t errlen)
{
	Sbx__V1__Entitlement	*m;
	PGresult		*res;
	const char		*v[2];
	int			 i;

	*out = NULL;
	*n = 0;
	v[0] = tenant != NULL ? tenant : "";
	v[1] = user != NULL ? user : "";
	/* One statement: each row's lists ride along as 'd'/'h' rows
	 * after it. */
	if ((res = FLEET_Q(f, "SELECT tenant COLLATE \"C\", usr"
	    " COLLATE \"C\", 'r', cpus_milli, memory_mb, pids, wall_seconds,"
	    " scratch_mb, '' COLLATE \"C\" FROM sbx_entitlements WHERE"
	    " ($1 = '' OR tenant = $1) AND ($2 = '' OR usr = $2)"
	    " UNION ALL SELECT e.tenant, e.usr, 'd', 0, 0, 0, 0, 0, d.dataset"
	    " FROM sbx_entitlements e JOIN sbx_entitlement_datasets d USING"
	    " (tenant, usr) WHERE ($1 = '' OR e.tenant = $1) AND ($2 = '' OR"
	    " e.usr = $2)"
	    " UNION ALL SELECT e.tenant, e.usr, 'h', 0, 0, 0, 0, 0, h.host"
	    " FROM sbx_entitlements e JOIN sbx_entitlement_hosts h USING"
	    " (tenant, usr) WHERE ($1 = '' OR e.tenant = $1) AND ($2 = '' OR"
	    " e.usr = $2)"
	    " ORDER BY 1, 2, 3 DESC, 9", 2, v, PGRES_TUPLES_OK, err,
	    errlen)) == NULL)
		return -1;
	m = NULL;
	for (i = 0; i < PQntuples(res); i++) {
		const char	*k = PQgetvalue(res, i, 2);

		if (*k == 'r') {
			m = xmalloc(sizeof(*m));
			sbx__v1__entitlement__init(m);
			m->tenant = xstrdup(PQgetvalue(res, i, 0));
			m->user = xstrdup(PQgetvalue(res, i, 1));
			m->max_limits = xmalloc(sizeof(*m->max_limits));
			sbx__v1__limits__init(m->max_limits);
			m->max_limits->cpus_milli = (uint32_t)strtoul(
			    PQgetvalue(res, i, 3), NULL, 10);
			m->max_limits->memory_mb = (uint32_t)strtoul(
			    PQgetvalue(res, i, 4), NULL, 10);
			m->max_limits->pids = (uint32_t)strtoul(
			    PQgetvalue(res, i, 5), NULL, 10);
			m->max_limits->wall_seconds = (uint32_t)strtoul(
			    PQgetvalue(res, i, 6), NULL, 10);
			m->max_limits->scratch_mb = (uint32_t)strtoul(
			    PQgetvalue(res, i, 7), NULL, 10);
			*out = xreallocarray(*out, *n + 1, sizeof(**out));
			(*out)[(*n)++] = m;
		} else if (m != NULL && *k == 'd')
			fleet_push(&m->datasets, &m->n_datasets,
			    PQgetvalue(res, i, 8));
		else if (m != NULL && *k == 'h')
			fleet_push(&m->hosts, &m->n_hosts,
			    PQgetvalue(res, i, 8));
	}
	PQclear(res);
	return 0;
}

/* ---- rollouts ---- */

static void
fleet_roll_read(PGresult *res, struct fleet_roll *r)
{
	r->stable = (uint32_t)strtoul(PQgetvalue(res, 0, 0), NULL, 10);
	r->canary = (uint32_t)strtoul(PQgetvalue(res, 0, 1), NULL, 10);
	r->percent = (uint32_t)strtoul(PQgetvalue(res, 0, 2), NULL, 10);
	r->halted = strcmp(PQgetvalue(res, 0, 3), "t") == 0;
	r->promoted = strcmp(PQgetvalue(res, 0, 4), "t") == 0;
	snprintf(r->reason, sizeof(r->reason), "%s", PQgetvalue(res, 0, 5));
}

static void
fleet_roll_args(const char *type, const char *tmpl, const struct fleet_roll *r,
    const char *host, char num[3][16], const char *v[9])
{
	snprintf(num[0], 16, "%u", r->stable);
	snprintf(num[1], 16, "%u", r->canary);
	snprintf(num[2], 16, "%u", r->percent);
	v[0] = type;
	v[1] = tmpl;
	v[2] = num[0];
	v[3] = num[1];
	v[4] = num[2];
	v[5] = r->halted ? "true" : "false";
	v[6] = r->promoted ? "true" : "false";
	v[7] = r->reason;
	v[8] = host;
}

int
fleet_roll_get(struct fleet *f, const char *type, const char *tmpl,
    const struct fleet_roll *init, const char *host, struct fleet_roll *out,
    char *err, size_t errlen)
{
	PGresult	*res;
	char		 num[3][16];
	const char	*v[9];

	fleet_roll_args(type, tmpl, init, host, num, v);
	/* The first replica to start the rollout writes it; every replica
	 * then reads the one row, whoever changed it last. */
	if ((res = FLEET_Q(f, "WITH ins AS (INSERT INTO sbx_rollouts("
	    "type, tmpl, stable, canary, percent, halted, promoted, reason,"
	    " host) VALUES ($1, $2, $3::bigint, $4::bigint, $5::bigint,"
	    " $6::boolean, $7::boolean, $8, $9) ON CONFLICT (type) DO NOTHING"
	    " RETURNING stable, canary, percent, halted, promoted, reason)"
	    " SELECT * FROM ins UNION ALL SELECT stable, canary, percent,"
	    " halted, promoted, reason FROM sbx_rollouts WHERE type = $1 AND"
	    " tmpl = $2", 9, v, PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	if (PQntuples(res) < 1) {
		/* Another template under this type in the fleet: this
		 * host's configuration is not the fleet's. */
		errf(err, errlen, "%s: rollout %s: the fleet's is not of "
		    "template %s", pg_where(f->pg), type, tmpl);
		PQclear(res);
		return -1;
	}
	fleet_roll_read(res, out);
	PQclear(res);
	return 0;
}

int
fleet_roll_put(struct fleet *f, const char *type, const char *tmpl,
    const struct fleet_roll *r, const char *host, char *err, size_t errlen)
{
	char		 num[3][16];
	const char	*v[9];

	fleet_roll_args(type, tmpl, r, host, num, v);
	return fleet_run(f, "INSERT INTO sbx_rollouts(type, tmpl,"
	    " stable, canary, percent, halted, promoted, reason, host) VALUES"
	    " ($1, $2, $3::bigint, $4::bigint, $5::bigint, $6::boolean,"
	    " $7::boolean, $8, $9) ON CONFLICT (type) DO UPDATE SET tmpl ="
	    " $2, stable = $3::bigint, canary = $4::bigint, percent ="
	    " $5::bigint, halted = $6::boolean, promoted = $7::boolean,"
	    " reason = $8, host = $9, updated = now()", 9, v, err, errlen);
}

int
fleet_roll_halt(struct fleet *f, const char *type, const char *reason,
    const char *host, char *err, size_t errlen)
{
	PGresult	*res;
	const char	*v[3] = { type, reason, host };
	int		 n;

	/* Once, whichever replicas decide it together. */
	if ((res = FLEET_Q(f, "UPDATE sbx_rollouts SET percent = 0,"
	    " halted = true, reason = $2, host = $3, updated = now() WHERE"
	    " type = $1 AND NOT halted AND NOT promoted", 3, v,
	    PGRES_COMMAND_OK, err, errlen)) == NULL)
		return -1;
	n = atoi(PQcmdTuples(res));
	PQclear(res);
	return n;
}

int
fleet_roll_count(struct fleet *f, const char *tmpl, uint32_t version,
    const char *const *rules, size_t nrules,
    void (*fn)(void *, uint32_t, const char *, uint64_t), void *arg,
    char *err, size_t errlen)
{
	PGresult	*res;
	char		 ver[16];
	const char	*v[3];
	size_t		 i;
	int		 k;

	if (fleet_begin(f, err, errlen) == -1)
		return -1;
	snprintf(ver, sizeof(ver), "%u", version);
	v[0] = tmpl;
	v[1] = ver;
	/* In place: two replicas counting at once lose nothing. */
	for (i = 0; i <= nrules; i++) {
		v[2] = i == 0 ? "" : rules[i - 1];
		if (fleet_run(f, "INSERT INTO sbx_rollout_counts(tmpl,"
		    " version, rule, n) VALUES ($1, $2::bigint, $3, 1) ON"
		    " CONFLICT (tmpl, version, rule) DO UPDATE SET n ="
		    " sbx_rollout_counts.n + 1", 3, v, err, errlen) == -1)
			return -1;
	}
	if ((res = FLEET_Q(f, "SELECT version, rule, n FROM"
	    " sbx_rollout_counts WHERE tmpl = $1", 1, v, PGRES_TUPLES_OK, err,
	    errlen)) == NULL)
		return -1;
	for (k = 0; k < PQntuples(res); k++)
		fn(arg, (uint32_t)strtoul(PQgetvalue(res, k, 0), NULL, 10),
		    PQgetvalue(res, k, 1), strtoull(PQgetvalue(res, k, 2), NULL,
		    10));
	PQclear(res);
	return fleet_commit(f, err, errlen);
}

int
fleet_review_count(struct fleet *f, const char *task_id, uint32_t k,
    uint32_t local_at, const char *host, int64_t *n, uint32_t *at,
    char *err, size_t errlen)
{
	PGresult	*res;
	char		 kb[16], lb[16];
	const char	*v[4];

	snprintf(kb, sizeof(kb), "%u", k);
	snprintf(lb, sizeof(lb), "%u", local_at);
	v[0] = task_id;
	v[1] = kb;
	v[2] = lb;
	v[3] = host;
	/* One statement: the first replica to count registers its
	 * threshold; the increment holds the row's lock, so of two
	 * replicas counting at once exactly one sees the count cross. */
	if ((res = FLEET_Q(f, "WITH cfg AS (INSERT INTO sbx_review(id,"
	    " denials, host) VALUES (1, $3::bigint, $4) ON CONFLICT (id) DO"
	    " NOTHING RETURNING denials), up AS (INSERT INTO"
	    " sbx_task_denials(task_id, n) VALUES ($1, $2::bigint) ON CONFLICT"
	    " (task_id) DO UPDATE SET n = sbx_task_denials.n + EXCLUDED.n"
	    " RETURNING n) SELECT (SELECT n FROM up), coalesce((SELECT"
	    " denials FROM cfg), (SELECT denials FROM sbx_review WHERE id ="
	    " 1), $3::bigint)", 4, v, PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	*n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	*at = (uint32_t)strtoul(PQgetvalue(res, 0, 1), NULL, 10);
	PQclear(res);
	return 0;
}
