/*
 * capability.c: capability requests -- a task asking for more than its
 * template gave it -- decided by rules first and a person second (the
 * reference text's "When the code needs more").  A request names one
 * dataset or one host rule (host, methods, paths) with a justification
 * and the content that led to it.  Inside the user's entitlements
 * (dataset readable, host callable) policyd grants it at once; outside,
 * it goes to approvald, and without a reachable approvald it is denied:
 * fail closed.  approvald's decision comes back on the approvals socket.
 *
 * The invariants: a grant is scoped to one task id (grants table) and is
 * the only way a compile adds what the template lacks
 * (compile_policy_grants); a grant never touches an execution already
 * compiled -- it only changes what the task's NEXT compile produces, and
 * the hash returned with a grant is that compile's, computed here without
 * recording an execution; every request and decision is stored and
 * audited, in the same transaction, before anyone is told; and pending
 * requests live in policyd.db, so they survive a restart.
 *
 * Everything here writes on the store's write handle after draining the
 * group-commit batches (commit_flush), as entitlement changes do: these
 * requests are rare next to compiles.
 *
 * Below this file are the group commit (commit.c) and the compiler
 * (compile.c), which reads a task's grants through pd->grants, set here
 * to capability_grants(): compile.c calls nothing above it.
 */
#include <sys/queue.h>

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "audit.h"
#include "frame.h"
#include "log.h"
#include "policy.h"
#include "util.h"
#include "policyd.h"

#define CAP_WHY_MAX		4096
#define CAP_SOURCE_MAX		(256 * 1024)
#define CAP_REASON_MAX		1024
#define CAP_PATH_MAX		1024
#define CAP_FORWARD_TIMEOUT	10	/* s for approvald to queue one */
#define CAP_DETAIL_WHY		200	/* of why, in the audit detail */
#define CAP_DENIALS		8	/* the task's recent denials shown */

enum {
	ST_REQ_INSERT,
	ST_REQ_DECIDE,
	ST_REQ_FORWARDED,
	ST_GRANT_INSERT,
	ST_W_MAX
};

enum {
	RST_GRANTS,
	RST_REQ_GET,
	RST_MAX
};

static const char *const cap_wsql[ST_W_MAX] = {
	[ST_REQ_INSERT] = "INSERT INTO capability_requests(request_id,"
	    " task_id, template, status, reason, decided_at, policy_hash,"
	    " request) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	[ST_REQ_DECIDE] = "UPDATE capability_requests SET status = ?2,"
	    " reason = ?3, approver = ?4, decided_at = ?5, policy_hash = ?6"
	    " WHERE request_id = ?1",
	[ST_REQ_FORWARDED] = "UPDATE capability_requests SET forwarded = 1"
	    " WHERE request_id = ?1",
	[ST_GRANT_INSERT] = "INSERT INTO grants(task_id, request_id, dataset,"
	    " rule, created_ns) VALUES (?1, ?2, ?3, ?4, ?5)",
};

static const char *const cap_rsql[RST_MAX] = {
	[RST_GRANTS] = "SELECT dataset, rule FROM grants WHERE task_id = ?1"
	    " ORDER BY request_id",
	[RST_REQ_GET] = "SELECT task_id, template, status, reason, approver,"
	    " decided_at, policy_hash, request FROM capability_requests"
	    " WHERE request_id = ?1",
};

static const char cap_schema[] =
    "CREATE TABLE IF NOT EXISTS capability_requests("
    " request_id TEXT PRIMARY KEY,"
    " task_id TEXT NOT NULL,"
    " template TEXT NOT NULL,"
    " status INTEGER NOT NULL,"
    " forwarded INTEGER NOT NULL DEFAULT 0,"
    " reason TEXT NOT NULL DEFAULT '',"
    " approver TEXT NOT NULL DEFAULT '',"
    " decided_at INTEGER NOT NULL DEFAULT 0,"
    " policy_hash TEXT NOT NULL DEFAULT '',"
    " request BLOB NOT NULL) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS capability_requests_task ON"
    " capability_requests(task_id);"
    "CREATE TABLE IF NOT EXISTS grants("
    " task_id TEXT NOT NULL,"
    " request_id TEXT NOT NULL,"
    " dataset TEXT NOT NULL DEFAULT '',"
    " rule BLOB,"
    " created_ns INTEGER NOT NULL,"
    " PRIMARY KEY (task_id, request_id)) WITHOUT ROWID;";

static const char *const cap_methods[] = {
	"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", NULL
};

/* Counters per template (name@version). */
struct cap_stat {
	char		*template;
	uint64_t	 requests;
	uint64_t	 granted;	/* automatically */
	uint64_t	 pending;	/* taken by approvald */
	uint64_t	 approved;
	uint64_t	 denied;
};

/* A request handed to approvald, waiting for it to say it is queued. */
struct cap_fwd {
	TAILQ_ENTRY(cap_fwd)	 entry;
	struct capability	*cap;
	struct frame_conn	*conn;		/* held: the orchestrator */
	struct frame_client	*fc;
	uint64_t		 env_id;	/* the orchestrator's */
	char			 request_id[40];
};

struct capability {
	struct policyd		*pd;
	sqlite3			*db;
	sqlite3			*rdb;
	sqlite3_stmt		*st[ST_W_MAX];
	sqlite3_stmt		*rst[RST_MAX];
	int64_t			 ngrants;	/* 0: compiles skip the query */
	struct cap_stat		*stats;
	size_t			 nstats;
	uint64_t		 fwd_seq;
	TAILQ_HEAD(, cap_fwd)	 fwds;
};

/* A stored request, as read back. */
struct cap_row {
	char				 task_id[129];
	char				 template[160];
	int				 status;
	char				*reason;
	char				*approver;
	int64_t				 decided_at;
	char				 hash[POLICY_HASH_HEX];
	Sbx__V1__CapabilityRequest	*req;
};

static const char *cap_col(sqlite3_stmt *, int);
static int	cap_fail_closed_row(struct policyd *, const char *request_id,
		    const char *why, Sbx__V1__CapabilityDecision *);

/* ---- small helpers ---- */

static void
cap_set(char **field, const char *v)
{
	if (*field != NULL && *field != protobuf_c_empty_string)
		free(*field);
	*field = xstrdup(v);
}

static void
cap_error(Sbx__V1__Error *err, Sbx__V1__ErrorCode code, const char *rule,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void
cap_error(Sbx__V1__Error *err, Sbx__V1__ErrorCode code, const char *rule,
    const char *fmt, ...)
{
	va_list	 ap;
	char	 msg[512];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	compile_error(err, code, rule, "%s", msg);
}

/* Printable copy for a log or audit line: control bytes become '?'. */
static char *
cap_clean(const char *s, size_t max)
{
	size_t	 n = strlen(s);
	char	*c;

	if (n > max)
		n = max;
	c = xmalloc(n + 1);
	for (size_t i = 0; i < n; i++)
		c[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	c[n] = '\0';
	return c;
}

/* "dataset D" or "host H methods GET,POST paths /a,/b" (malloc'd). */
static char *
cap_what(const Sbx__V1__CapabilityRequest *req)
{
	const Sbx__V1__AllowRule	*r = req->host;
	char				*s, *t;

	if (req->what_case == SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET) {
		xasprintf(&s, "dataset %s", req->dataset);
		return s;
	}
	xasprintf(&s, "host %s methods ", r->host);
	for (size_t i = 0; i < r->n_methods; i++) {
		xasprintf(&t, "%s%s%s", s, i > 0 ? "," : "", r->methods[i]);
		free(s);
		s = t;
	}
	if (r->n_paths == 0) {
		xasprintf(&t, "%s any path", s);
		free(s);
		return t;
	}
	for (size_t i = 0; i < r->n_paths; i++) {
		xasprintf(&t, "%s%s%s", s, i > 0 ? "," : " paths ",
		    r->paths[i]);
		free(s);
		s = t;
	}
	return s;
}

static struct cap_stat *
cap_stat(struct capability *cap, const char *template)
{
	for (size_t i = 0; i < cap->nstats; i++)
		if (strcmp(cap->stats[i].template, template) == 0)
			return &cap->stats[i];
	cap->stats = xreallocarray(cap->stats, cap->nstats + 1,
	    sizeof(*cap->stats));
	memset(&cap->stats[cap->nstats], 0, sizeof(*cap->stats));
	cap->stats[cap->nstats].template = xstrdup(template);
	return &cap->stats[cap->nstats++];
}

static void
cap_count(struct policyd *pd, const char *template, int status)
{
	struct cap_stat	*s;

	if (pd->cap == NULL)
		return;
	s = cap_stat(pd->cap, template);
	switch (status) {
	case SBX__V1__CAPABILITY_STATUS__CAPABILITY_GRANTED:
		s->granted++;
		break;
	case SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING:
		s->pending++;
		break;
	case SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED:
		s->approved++;
		break;
	case SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED:
		s->denied++;
		break;
	default:
		break;
	}
}

/* Commit what the compiles have batched, so the write handle is ours
 * and reads see every acknowledged record. */
static void
cap_quiesce(struct policyd *pd)
{
	if (pd->commit != NULL)
		commit_flush(pd->commit);
	else if (store_busy(pd->store) || store_in_batch(pd->store))
		(void)store_commit(pd->store);
}

static int
cap_event(struct policyd *pd, const char *task_id, const char *action,
    const char *hash, const char *detail, const char *actor)
{
	Sbx__V1__AuditEvent	 ev;

	sbx__v1__audit_event__init(&ev);
	ev.task_id = (char *)task_id;
	ev.action = (char *)action;
	ev.policy_hash = (char *)(hash != NULL ? hash : "");
	ev.detail = (char *)detail;
	ev.actor = (char *)(actor != NULL ? actor : "");
	if (audit_add(store_audit(pd->store), &ev) == -1)
		return -1;
	audit_event_clear(&ev);
	return 0;
}

static int
cap_step(struct capability *cap, sqlite3_stmt *st)
{
	int	 rc = sqlite3_step(st);

	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		log_warnx("policyd.db: %s: %s", sqlite3_sql(st),
		    sqlite3_errmsg(cap->db));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -1;
}

/* ---- open, close ---- */

struct capability *
capability_open(struct policyd *pd, char *err, size_t errlen)
{
	struct capability	*cap;
	sqlite3_stmt		*st;
	char			*msg = NULL;
	char			**orphans = NULL;
	size_t			  norphans = 0;
	int			  i;

	cap = xcalloc(1, sizeof(*cap));
	cap->pd = pd;
	cap->db = store_db(pd->store);
	cap->rdb = store_reader(pd->store);
	TAILQ_INIT(&cap->fwds);
	if (sqlite3_exec(cap->db, cap_schema, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "capability schema: %s",
		    msg != NULL ? msg : sqlite3_errmsg(cap->db));
		sqlite3_free(msg);
		goto fail;
	}
	for (i = 0; i < ST_W_MAX; i++) {
		if (sqlite3_prepare_v3(cap->db, cap_wsql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &cap->st[i], NULL) != SQLITE_OK) {
			snprintf(err, errlen, "policyd.db: %s: %s",
			    cap_wsql[i], sqlite3_errmsg(cap->db));
			goto fail;
		}
	}
	for (i = 0; i < RST_MAX; i++) {
		if (sqlite3_prepare_v3(cap->rdb, cap_rsql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &cap->rst[i], NULL) !=
		    SQLITE_OK) {
			snprintf(err, errlen, "policyd.db: %s: %s",
			    cap_rsql[i], sqlite3_errmsg(cap->rdb));
			goto fail;
		}
	}
	if (sqlite3_prepare_v2(cap->db, "SELECT count(*) FROM grants", -1,
	    &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "policyd.db: grants: %s",
		    sqlite3_errmsg(cap->db));
		goto fail;
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		cap->ngrants = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);

	/* The counters start from what is stored, so the automatic grant
	 * rate covers every request, not those since the last start. */
	if (sqlite3_prepare_v2(cap->db, "SELECT template, status, forwarded,"
	    " count(*) FROM capability_requests GROUP BY template, status,"
	    " forwarded", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "policyd.db: capability_requests: %s",
		    sqlite3_errmsg(cap->db));
		goto fail;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		struct cap_stat	*cs = cap_stat(cap, cap_col(st, 0));
		uint64_t	 n = (uint64_t)sqlite3_column_int64(st, 3);

		cs->requests += n;
		if (sqlite3_column_int(st, 2))
			cs->pending += n;
		switch (sqlite3_column_int(st, 1)) {
		case SBX__V1__CAPABILITY_STATUS__CAPABILITY_GRANTED:
			cs->granted += n;
			break;
		case SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED:
			cs->approved += n;
			break;
		case SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED:
			cs->denied += n;
			break;
		default:
			break;
		}
	}
	sqlite3_finalize(st);

	/*
	 * A request stored PENDING that approvald never confirmed: policyd
	 * stopped between the two.  Nobody will decide it, so it is denied
	 * now (fail closed).  Requests approvald did take stay pending.
	 */
	if (sqlite3_prepare_v2(cap->db, "SELECT request_id FROM"
	    " capability_requests WHERE status = ?1 AND forwarded = 0", -1,
	    &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "policyd.db: capability_requests: %s",
		    sqlite3_errmsg(cap->db));
		goto fail;
	}
	sqlite3_bind_int(st, 1, SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING);
	while (sqlite3_step(st) == SQLITE_ROW) {
		orphans = xreallocarray(orphans, norphans + 1,
		    sizeof(*orphans));
		orphans[norphans++] = xstrdup((const char *)
		    sqlite3_column_text(st, 0));
	}
	sqlite3_finalize(st);
	pd->cap = cap;
	pd->grants = capability_grants;
	for (size_t k = 0; k < norphans; k++) {
		Sbx__V1__CapabilityDecision	 d;

		sbx__v1__capability_decision__init(&d);
		if (cap_fail_closed_row(pd, orphans[k], "policyd restarted "
		    "before approvald took the request", &d) == 0)
			log_info("capability request %s: denied: %s",
			    orphans[k], d.reason);
		capability_decision_clear(&d);
		free(orphans[k]);
	}
	free(orphans);
	return cap;
fail:
	pd->cap = NULL;
	capability_close(cap);
	return NULL;
}

void
capability_close(struct capability *cap)
{
	struct cap_fwd	*f;
	int		 i;

	if (cap == NULL)
		return;
	/* Requests approvald has not confirmed stay PENDING with
	 * forwarded 0: the next start denies them. */
	while ((f = TAILQ_FIRST(&cap->fwds)) != NULL) {
		TAILQ_REMOVE(&cap->fwds, f, entry);
		frame_client_free(f->fc);
		frame_conn_release(f->conn);
		free(f);
	}
	for (i = 0; i < ST_W_MAX; i++)
		sqlite3_finalize(cap->st[i]);
	for (i = 0; i < RST_MAX; i++)
		sqlite3_finalize(cap->rst[i]);
	for (size_t k = 0; k < cap->nstats; k++)
		free(cap->stats[k].template);
	free(cap->stats);
	if (cap->pd != NULL && cap->pd->cap == cap) {
		cap->pd->cap = NULL;
		cap->pd->grants = NULL;
	}
	free(cap);
}

/* ---- grants ---- */

static int
cap_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
cap_grants_add_dataset(struct cap_grants *g, const char *ds)
{
	for (size_t i = 0; i < g->ndatasets; i++)
		if (strcmp(g->datasets[i], ds) == 0)
			return;
	g->datasets = xreallocarray(g->datasets, g->ndatasets + 1,
	    sizeof(*g->datasets));
	g->datasets[g->ndatasets++] = xstrdup(ds);
	qsort(g->datasets, g->ndatasets, sizeof(*g->datasets), cap_strcmp);
}

static int
cap_grants_add_rule(struct cap_grants *g, const uint8_t *buf, size_t len)
{
	Sbx__V1__AllowRule	*r;

	if ((r = sbx__v1__allow_rule__unpack(NULL, len, buf)) == NULL)
		return -1;
	g->rules = xreallocarray(g->rules, g->nrules + 1, sizeof(*g->rules));
	g->rules[g->nrules++] = r;
	return 0;
}

/* A request's capability as one more grant in g. */
static int
cap_grants_add_request(struct cap_grants *g,
    const Sbx__V1__CapabilityRequest *req)
{
	uint8_t	*buf;
	size_t	 len;
	int	 rc;

	if (req->what_case == SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET) {
		cap_grants_add_dataset(g, req->dataset);
		return 0;
	}
	len = sbx__v1__allow_rule__get_packed_size(req->host);
	buf = xmalloc(len + 1);
	sbx__v1__allow_rule__pack(req->host, buf);
	rc = cap_grants_add_rule(g, buf, len);
	free(buf);
	return rc;
}

static int
cap_fleet_add(void *arg, const char *ds, const uint8_t *rule, size_t len)
{
	struct cap_grants	*g = arg;

	if (ds[0] != '\0') {
		cap_grants_add_dataset(g, ds);
		return 0;
	}
	if (rule == NULL)
		return 0;
	return cap_grants_add_rule(g, rule, len) == -1 ? -1 : 0;
}

/* A task's grants from every replica: the fleet's table (fleet.c). */
static int
cap_fleet_grants(struct capability *cap, const char *task_id,
    struct cap_grants *g)
{
	char	 err[512];

	if (fleet_grants(cap->pd->fleet, task_id, cap_fleet_add, g, err,
	    sizeof(err)) == -1) {
		log_warnx("task %s: grants: %s", task_id, err);
		compile_grants_clear(g);
		return -1;
	}
	return 0;
}

int
capability_grants(struct capability *cap, const char *task_id,
    struct cap_grants *g)
{
	sqlite3_stmt	*st = cap->rst[RST_GRANTS];
	const char	*ds;
	int		 rc, ret = 0;

	memset(g, 0, sizeof(*g));
	if (cap->pd->fleet != NULL)
		return cap_fleet_grants(cap, task_id, g);
	if (cap->ngrants == 0)
		return 0;
	sqlite3_bind_text(st, 1, task_id, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ds = (const char *)sqlite3_column_text(st, 0);
		if (ds != NULL && ds[0] != '\0')
			cap_grants_add_dataset(g, ds);
		else if (sqlite3_column_type(st, 1) == SQLITE_BLOB &&
		    cap_grants_add_rule(g, sqlite3_column_blob(st, 1),
		    (size_t)sqlite3_column_bytes(st, 1)) == -1) {
			log_warnx("policyd.db: a grant of task %s does not "
			    "decode", task_id);
			ret = -1;
			break;
		}
	}
	if (ret == 0 && rc != SQLITE_DONE) {
		log_warnx("policyd.db: grants of task %s: %s", task_id,
		    sqlite3_errmsg(cap->rdb));
		ret = -1;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (ret == -1)
		compile_grants_clear(g);
	return ret;
}

/* ---- recompiling without an execution ---- */

/*
 * The policy hash the task's next compile gets, with `extra` granted on
 * top of what is stored: its binding, the active template for its type,
 * the user's entitlements, the datasets of its last compile.
 */
static int
cap_recompile(struct policyd *pd, const char *task_id,
    const Sbx__V1__CapabilityRequest *extra, char hash[POLICY_HASH_HEX],
    Sbx__V1__Error *err)
{
	struct store_task	 bound;
	const struct tmpl	*tm;
	const struct entitle_eff *eff;
	struct cap_grants	 g = { NULL, 0, NULL, 0 };
	Sbx__V1__Task		 t;
	Sbx__V1__Policy		*pol;
	char			**ds = NULL;
	size_t			  nds = 0;
	int			  rc = -1;

	switch (store_task_get(pd->store, task_id, &bound)) {
	case 1:
		break;
	case 0:
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_NOT_FOUND, "",
		    "no task %s: a task exists once it has compiled",
		    task_id);
		return -1;
	default:
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "task %s cannot be read", task_id);
		return -1;
	}
	if ((tm = template_active(pd->reg, bound.type)) == NULL) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_POLICY,
		    RULE_UNKNOWN_TASK_TYPE, "no template for task type "
		    "\"%s\"", bound.type);
		return -1;
	}
	if ((eff = entitle_lookup(pd->ent, bound.tenant, bound.user)) ==
	    NULL) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "task %s: cannot read the entitlements", task_id);
		return -1;
	}
	if (pd->cap != NULL && pd->fleet != NULL &&
	    capability_grants(pd->cap, task_id, &g) == -1) {
		/* Fail closed: no grant without the fleet's. */
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE,
		    RULE_STORE_UNAVAILABLE, "task %s: the fleet's store is "
		    "unavailable, nothing granted", task_id);
		goto done;
	}
	if ((pd->cap != NULL && pd->fleet == NULL &&
	    capability_grants(pd->cap, task_id, &g) == -1) ||
	    (extra != NULL && cap_grants_add_request(&g, extra) == -1) ||
	    store_task_datasets(pd->store, task_id, &ds, &nds) == -1) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "task %s: cannot read its grants or datasets", task_id);
		goto done;
	}
	sbx__v1__task__init(&t);
	t.id = (char *)task_id;
	t.type = bound.type;
	t.tenant = bound.tenant;
	t.user = bound.user;
	t.datasets = ds;
	t.n_datasets = nds;
	if ((pol = compile_policy_grants(tm, &t, eff, &g, err)) == NULL)
		goto done;
	if (policy_hash(pol, hash) == -1)
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "task %s: cannot hash the policy", task_id);
	else
		rc = 0;
	policy_free(pol);
done:
	compile_grants_clear(&g);
	strv_free(ds, nds);
	return rc;
}

int
capability_recompile(struct policyd *pd, const char *task_id,
    char hash[POLICY_HASH_HEX], Sbx__V1__Error *err)
{
	cap_quiesce(pd);
	return cap_recompile(pd, task_id, NULL, hash, err);
}

/* ---- checking a request ---- */

static int
cap_host_ok(const char *h)
{
	size_t	 n = strlen(h);

	if (n == 0 || n > 253 || h[0] == '.' || h[0] == '-' ||
	    strstr(h, "..") != NULL)
		return 0;
	for (; *h != '\0'; h++)
		if (!isalnum((unsigned char)*h) && *h != '.' && *h != '-')
			return 0;
	return 1;
}

/* A path prefix as a template may write it, minus placeholders. */
static int
cap_path_ok(const char *p)
{
	if (p[0] != '/' || strlen(p) > CAP_PATH_MAX ||
	    strstr(p, "..") != NULL || strstr(p, "${") != NULL)
		return 0;
	for (; *p != '\0'; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f || *p == '?' ||
		    *p == '#')
			return 0;
	return 1;
}

static int
cap_strcmp(const void *, const void *);

static void
cap_strset(char **v, size_t *n)
{
	size_t	 o = 0;

	if (*n == 0)
		return;
	qsort(v, *n, sizeof(*v), cap_strcmp);
	for (size_t i = 0; i < *n; i++) {
		if (o > 0 && strcmp(v[o - 1], v[i]) == 0) {
			free(v[i]);
			continue;
		}
		v[o++] = v[i];
	}
	*n = o;
}

/* Validate and normalise the request in place: the host as
 * policy_normalize writes hosts, methods upper case (GET if none). */
static int
cap_check(Sbx__V1__CapabilityRequest *req, Sbx__V1__Error *err)
{
	Sbx__V1__AllowRule	*r;
	size_t			 n;

	if (!name_ok(req->task_id)) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "task_id \"%.128s\" is not a valid name: want 1..128 of "
		    "[A-Za-z0-9._@:-]", req->task_id);
		return -1;
	}
	if (req->why == NULL || req->why[0] == '\0') {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "a capability request needs a justification (why)");
		return -1;
	}
	if (strlen(req->why) > CAP_WHY_MAX || req->source.len >
	    CAP_SOURCE_MAX) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "why is at most %d bytes and source at most %d",
		    CAP_WHY_MAX, CAP_SOURCE_MAX);
		return -1;
	}
	switch (req->what_case) {
	case SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET:
		if (!name_ok(req->dataset)) {
			cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
			    "dataset \"%.128s\" is not a valid name",
			    req->dataset);
			return -1;
		}
		return 0;
	case SBX__V1__CAPABILITY_REQUEST__WHAT_HOST:
		break;
	default:
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "a capability request names a dataset or a host");
		return -1;
	}
	r = req->host;
	for (char *c = r->host; *c != '\0'; c++)
		*c = (char)tolower((unsigned char)*c);
	n = strlen(r->host);
	if (n > 1 && r->host[n - 1] == '.')
		r->host[n - 1] = '\0';
	if (!cap_host_ok(r->host)) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "host \"%.253s\" is not a valid host name", r->host);
		return -1;
	}
	/* A request asks for a host, its methods and paths; addresses,
	 * ports and sizes stay the template's business. */
	if (r->n_cidrs > 0 || r->port != 0 || r->max_request_kb != 0 ||
	    r->max_response_kb != 0) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "a host request names host, methods and paths only "
		    "(no cidrs, port or sizes)");
		return -1;
	}
	for (size_t i = 0; i < r->n_methods; i++) {
		int	 ok = 0;

		for (char *c = r->methods[i]; *c != '\0'; c++)
			*c = (char)toupper((unsigned char)*c);
		for (size_t j = 0; cap_methods[j] != NULL; j++)
			ok |= strcmp(cap_methods[j], r->methods[i]) == 0;
		if (!ok) {
			cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
			    "unknown method \"%.16s\"; expected one of GET, "
			    "HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
			    r->methods[i]);
			return -1;
		}
	}
	if (r->n_methods == 0) {
		r->methods = xmalloc(sizeof(*r->methods));
		r->methods[0] = xstrdup("GET");
		r->n_methods = 1;
	}
	for (size_t i = 0; i < r->n_paths; i++) {
		if (!cap_path_ok(r->paths[i])) {
			cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
			    "path \"%.128s\" must start with \"/\" and contain "
			    "no \"..\", \"${\", \"?\", \"#\", spaces or control "
			    "characters", r->paths[i]);
			return -1;
		}
	}
	/* Sorted and unique, so equal requests store equal rules. */
	cap_strset(r->methods, &r->n_methods);
	cap_strset(r->paths, &r->n_paths);
	return 0;
}

/* ---- storing ---- */

static int
cap_insert_grant(struct capability *cap, const Sbx__V1__CapabilityRequest
    *req)
{
	sqlite3_stmt	*st = cap->st[ST_GRANT_INSERT];
	uint8_t		*buf = NULL;
	size_t		 len = 0;
	int		 rc;

	sqlite3_bind_text(st, 1, req->task_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, req->request_id, -1, SQLITE_STATIC);
	if (req->what_case == SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET)
		sqlite3_bind_text(st, 3, req->dataset, -1, SQLITE_STATIC);
	else {
		len = sbx__v1__allow_rule__get_packed_size(req->host);
		buf = xmalloc(len + 1);
		sbx__v1__allow_rule__pack(req->host, buf);
		sqlite3_bind_text(st, 3, "", -1, SQLITE_STATIC);
		sqlite3_bind_blob(st, 4, buf, (int)len, SQLITE_STATIC);
	}
	sqlite3_bind_int64(st, 5, now_ns());
	rc = cap_step(cap, st);
	/* In a fleet the grant is the database's too, committed before
	 * this one's transaction: a failure there grants nothing. */
	if (rc == 0 && cap->pd->fleet != NULL) {
		char	 err[512];

		if (fleet_grant_put(cap->pd->fleet, req->task_id,
		    req->request_id, req->what_case ==
		    SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET ? req->dataset :
		    "", buf, buf != NULL ? len : 0, cap->pd->conf->store.host,
		    err, sizeof(err)) == -1) {
			log_warnx("task %s: grant %s: %s", req->task_id,
			    req->request_id, err);
			rc = -1;
		}
	}
	free(buf);
	return rc;
}

static int
cap_insert_request(struct capability *cap,
    const Sbx__V1__CapabilityRequest *req, int status, const char *reason,
    const char *hash)
{
	sqlite3_stmt	*st = cap->st[ST_REQ_INSERT];
	uint8_t		*buf;
	size_t		 len;
	int		 rc;

	len = sbx__v1__capability_request__get_packed_size(req);
	buf = xmalloc(len + 1);
	sbx__v1__capability_request__pack(req, buf);
	sqlite3_bind_text(st, 1, req->request_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, req->task_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, req->template_, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, status);
	sqlite3_bind_text(st, 5, reason, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, status ==
	    SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING ? 0 : now_s());
	sqlite3_bind_text(st, 7, hash, -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 8, buf, (int)len, SQLITE_STATIC);
	rc = cap_step(cap, st);
	/* In a fleet any replica may get its decision (fleet.c). */
	if (rc == 0 && cap->pd->fleet != NULL) {
		char	 err[512];

		if (fleet_request_put(cap->pd->fleet, req->request_id,
		    req->task_id, req->template_, status, reason, hash, buf,
		    len, cap->pd->conf->store.host, err, sizeof(err)) == -1) {
			log_warnx("capability request %s: %s",
			    req->request_id, err);
			rc = -1;
		}
	}
	free(buf);
	return rc;
}

static int
cap_update_request(struct capability *cap, const char *request_id,
    int status, const char *reason, const char *approver, int64_t when,
    const char *hash)
{
	sqlite3_stmt	*st = cap->st[ST_REQ_DECIDE];

	sqlite3_bind_text(st, 1, request_id, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, status);
	sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, approver, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, when);
	sqlite3_bind_text(st, 6, hash, -1, SQLITE_STATIC);
	if (cap_step(cap, st) == -1)
		return -1;
	/* In a fleet the request leaves PENDING there, once, whichever
	 * replica gets there first; this one's transaction then fails. */
	if (cap->pd->fleet != NULL) {
		char	 err[512];

		switch (fleet_request_decide(cap->pd->fleet, request_id,
		    status, reason, approver, when, hash, err, sizeof(err))) {
		case 1:
			break;
		case 0:
			log_warnx("capability request %s: decided on another "
			    "host first; this decision is not recorded",
			    request_id);
			return -1;
		default:
			log_warnx("capability request %s: %s", request_id,
			    err);
			return -1;
		}
	}
	return 0;
}

static void
cap_row_clear(struct cap_row *row)
{
	free(row->reason);
	free(row->approver);
	if (row->req != NULL)
		sbx__v1__capability_request__free_unpacked(row->req, NULL);
	memset(row, 0, sizeof(*row));
}

static const char *
cap_col(sqlite3_stmt *st, int col)
{
	const char	*s = (const char *)sqlite3_column_text(st, col);

	return s != NULL ? s : "";
}

/* The fleet's copy, the one that counts when there is a fleet. */
static int
cap_fleet_row(struct capability *cap, const char *request_id,
    struct cap_row *row)
{
	struct fleet_req	 fr;
	char			 err[512];
	int			 rc;

	memset(row, 0, sizeof(*row));
	if ((rc = fleet_request_get(cap->pd->fleet, request_id, &fr, err,
	    sizeof(err))) != 1) {
		if (rc == -1)
			log_warnx("capability request %s: %s", request_id,
			    err);
		return rc;
	}
	snprintf(row->task_id, sizeof(row->task_id), "%s", fr.task_id);
	snprintf(row->template, sizeof(row->template), "%s", fr.template);
	row->status = fr.status;
	row->reason = xstrdup(fr.reason);
	row->approver = xstrdup(fr.approver);
	row->decided_at = fr.decided_at;
	snprintf(row->hash, sizeof(row->hash), "%s", fr.hash);
	row->req = sbx__v1__capability_request__unpack(NULL, fr.body_len,
	    fr.body);
	free(fr.body);
	if (row->req == NULL) {
		cap_row_clear(row);
		return -1;
	}
	return 1;
}

/* 1 found, 0 not, -1 error. */
static int
cap_row_get(struct capability *cap, const char *request_id,
    struct cap_row *row)
{
	sqlite3_stmt	*st = cap->rst[RST_REQ_GET];
	int		 rc, ret;

	if (cap->pd->fleet != NULL)
		return cap_fleet_row(cap, request_id, row);
	memset(row, 0, sizeof(*row));
	sqlite3_bind_text(st, 1, request_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		snprintf(row->task_id, sizeof(row->task_id), "%s",
		    cap_col(st, 0));
		snprintf(row->template, sizeof(row->template), "%s",
		    cap_col(st, 1));
		row->status = sqlite3_column_int(st, 2);
		row->reason = xstrdup(cap_col(st, 3));
		row->approver = xstrdup(cap_col(st, 4));
		row->decided_at = sqlite3_column_int64(st, 5);
		snprintf(row->hash, sizeof(row->hash), "%s", cap_col(st, 6));
		row->req = sbx__v1__capability_request__unpack(NULL,
		    (size_t)sqlite3_column_bytes(st, 7),
		    sqlite3_column_blob(st, 7));
		ret = row->req != NULL ? 1 : -1;
		if (ret == -1)
			log_warnx("policyd.db: capability request %s does "
			    "not decode", request_id);
	} else if (rc == SQLITE_DONE)
		ret = 0;
	else {
		log_warnx("policyd.db: capability request %s: %s",
		    request_id, sqlite3_errmsg(cap->rdb));
		ret = -1;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (ret != 1)
		cap_row_clear(row);
	return ret;
}

static void
cap_decision(Sbx__V1__CapabilityDecision *out, const char *request_id,
    int status, const char *reason, const char *hash, const char *approver,
    int64_t when)
{
	capability_decision_clear(out);
	out->request_id = xstrdup(request_id);
	out->status = (Sbx__V1__CapabilityStatus)status;
	out->reason = xstrdup(reason != NULL ? reason : "");
	out->policy_hash = xstrdup(hash != NULL ? hash : "");
	out->approver = xstrdup(approver != NULL ? approver : "");
	out->decided_at = when;
}

void
capability_decision_clear(Sbx__V1__CapabilityDecision *d)
{
	if (d->request_id != protobuf_c_empty_string)
		free(d->request_id);
	if (d->reason != protobuf_c_empty_string)
		free(d->reason);
	if (d->policy_hash != protobuf_c_empty_string)
		free(d->policy_hash);
	if (d->approver != protobuf_c_empty_string)
		free(d->approver);
	sbx__v1__capability_decision__init(d);
}

/* ---- deciding ---- */

/* The audit detail of a request: id, what, why (shortened, printable). */
static char *
cap_detail(const Sbx__V1__CapabilityRequest *req, const char *outcome,
    const char *reason)
{
	char	*what = cap_what(req), *why = cap_clean(req->why,
		    CAP_DETAIL_WHY), *rs = cap_clean(reason != NULL ? reason :
		    "", CAP_REASON_MAX), *d;

	xasprintf(&d, "%s %s: %s%s%s; why: %s", req->request_id, outcome,
	    what, rs[0] != '\0' ? ": " : "", rs, why);
	free(what);
	free(why);
	free(rs);
	return d;
}

/*
 * What sbx itself knows of the task, for the person who may have to
 * decide: the hash of its latest compile and its recent denials (which
 * host was refused, when, under which hash).  Whatever the orchestrator
 * put in these fields is dropped: only policyd's records speak here.
 */
static void
cap_task_facts(struct policyd *pd, Sbx__V1__CapabilityRequest *req)
{
	char	 hash[POLICY_HASH_HEX];

	for (size_t i = 0; i < req->n_denials; i++)
		sbx__v1__task_denial__free_unpacked(req->denials[i], NULL);
	free(req->denials);
	req->denials = NULL;
	req->n_denials = 0;
	(void)store_task_hash(pd->store, req->task_id, hash, sizeof(hash));
	cap_set(&req->policy_hash, hash);
	req->n_denials = store_task_denials(pd->store, req->task_id,
	    CAP_DENIALS, &req->denials);
}

/* Begin, run the writes, add the events, commit: all or nothing. */
static int
cap_commit(struct policyd *pd, int ok)
{
	struct audit	*a = store_audit(pd->store);

	if (!ok) {
		audit_rollback(a);
		return -1;
	}
	return audit_commit(a);
}

int
capability_decide(struct policyd *pd, Sbx__V1__CapabilityRequest *req,
    const char *actor, Sbx__V1__CapabilityDecision *out, Sbx__V1__Error *err)
{
	struct capability	*cap = pd->cap;
	struct store_task	 bound;
	const struct tmpl	*tm;
	const struct entitle_eff *eff;
	Sbx__V1__Error		 rerr = SBX__V1__ERROR__INIT;
	char			 id[40], hash[POLICY_HASH_HEX] = "";
	char			*tmplname, *detail, *reason = NULL;
	int			 status, inside, ok;

	if (cap == NULL) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE, "",
		    "capability requests are not set up");
		return -1;
	}
	if (cap_check(req, err) == -1)
		return -1;
	cap_quiesce(pd);
	switch (store_task_get(pd->store, req->task_id, &bound)) {
	case 1:
		break;
	case 0:
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_NOT_FOUND, "",
		    "no task %s: a task exists once it has compiled",
		    req->task_id);
		return -1;
	default:
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "task %s cannot be read", req->task_id);
		return -1;
	}
	if ((tm = template_active(pd->reg, bound.type)) == NULL) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_POLICY,
		    RULE_UNKNOWN_TASK_TYPE, "no template for task type "
		    "\"%s\"", bound.type);
		return -1;
	}
	if ((eff = entitle_lookup(pd->ent, bound.tenant, bound.user)) ==
	    NULL) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "task %s: cannot read the entitlements", req->task_id);
		return -1;
	}

	/* Who and what the task is comes from its binding, never from the
	 * request. */
	random_id("c", id, sizeof(id));
	xasprintf(&tmplname, "%s@%u", tm->name, tm->version);
	cap_set(&req->request_id, id);
	cap_set(&req->tenant, bound.tenant);
	cap_set(&req->user, bound.user);
	cap_set(&req->template_, tmplname);
	req->created_at = now_s();
	cap_task_facts(pd, req);

	/* The rules.  Inside the entitlements: granted now, and the hash
	 * is what the next compile of the task gets. */
	if (req->what_case == SBX__V1__CAPABILITY_REQUEST__WHAT_DATASET) {
		inside = entitle_can_read(eff, req->dataset);
		if (!tm->takes_datasets)
			xasprintf(&reason, "template %s takes no task "
			    "datasets", tmplname);
	} else
		inside = entitle_can_call(eff, req->host->host);
	if (reason != NULL)
		status = SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED;
	else if (inside) {
		status = SBX__V1__CAPABILITY_STATUS__CAPABILITY_GRANTED;
		if (cap_recompile(pd, req->task_id, req, hash, &rerr) == -1) {
			if (rerr.code == SBX__V1__ERROR_CODE__ERROR_INTERNAL) {
				*err = rerr;
				free(tmplname);
				return -1;
			}
			/* The task itself no longer compiles (template or
			 * entitlements changed): a grant would be moot. */
			status = SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED;
			xasprintf(&reason, "task %s does not compile: %s",
			    req->task_id, rerr.message);
			hash[0] = '\0';
			compile_error_clear(&rerr);
		}
	} else if (pd->conf == NULL || pd->conf->approvald_socket == NULL) {
		status = SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED;
		xasprintf(&reason, "%s: no approvald is configured",
		    CAP_NO_APPROVER);
	} else
		status = SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING;

	detail = cap_detail(req, capability_status_name(status), reason);
	ok = audit_begin(store_audit(pd->store)) == 0;
	ok = ok && cap_insert_request(cap, req, status, reason != NULL ?
	    reason : "", hash) == 0;
	ok = ok && cap_event(pd, req->task_id, "capability", hash, detail,
	    actor) == 0;
	if (ok && status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_GRANTED) {
		char	*what = cap_what(req), *gd;

		xasprintf(&gd, "%s: %s (inside the entitlements of %s/%s)",
		    req->request_id, what, bound.tenant, bound.user);
		ok = cap_insert_grant(cap, req) == 0 &&
		    cap_event(pd, req->task_id, "grant", hash, gd,
		    actor) == 0;
		free(what);
		free(gd);
	}
	if (cap_commit(pd, ok) == -1) {
		free(detail);
		free(reason);
		free(tmplname);
		cap_error(err, pd->fleet != NULL ?
		    SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE :
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, pd->fleet != NULL ?
		    RULE_STORE_UNAVAILABLE : "", "%s: the request could not "
		    "be recorded; nothing was granted", pd->fleet != NULL ?
		    "policyd.db or the fleet's store" : "policyd.db");
		return -1;
	}
	if (status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_GRANTED)
		cap->ngrants++;
	log_info("task %s: capability %s", req->task_id, detail);
	cap_stat(cap, tmplname)->requests++;
	/* A pending request counts once approvald has it (or is denied
	 * when it does not). */
	if (status != SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING)
		cap_count(pd, tmplname, status);
	cap_decision(out, id, status, reason, hash, NULL, status ==
	    SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING ? 0 : now_s());
	free(detail);
	free(reason);
	free(tmplname);
	return 0;
}

static int
cap_fail_closed_row(struct policyd *pd, const char *request_id,
    const char *why, Sbx__V1__CapabilityDecision *out)
{
	struct capability	*cap = pd->cap;
	struct cap_row		 row;
	char			*reason, *detail;
	int			 ok;

	if (cap_row_get(cap, request_id, &row) != 1)
		return -1;
	if (row.status != SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING) {
		cap_decision(out, request_id, row.status, row.reason, row.hash,
		    row.approver, row.decided_at);
		cap_row_clear(&row);
		return 0;
	}
	xasprintf(&reason, "%s: %s", CAP_NO_APPROVER, why);
	detail = cap_detail(row.req, "denied", reason);
	ok = audit_begin(store_audit(pd->store)) == 0;
	ok = ok && cap_update_request(cap, request_id,
	    SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED, reason, "",
	    now_s(), "") == 0;
	ok = ok && cap_event(pd, row.task_id, "capability", NULL, detail,
	    "policyd") == 0;
	if (cap_commit(pd, ok) == -1) {
		/* Still PENDING and unconfirmed: the next start denies it. */
		log_warnx("capability request %s: the denial could not be "
		    "recorded", request_id);
	}
	cap_count(pd, row.template,
	    SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED);
	cap_decision(out, request_id,
	    SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED, reason, "", NULL,
	    now_s());
	log_info("task %s: capability %s", row.task_id, detail);
	free(reason);
	free(detail);
	cap_row_clear(&row);
	return 0;
}

int
capability_fail_closed(struct policyd *pd, const char *request_id,
    const char *why, Sbx__V1__CapabilityDecision *out)
{
	if (pd->cap == NULL)
		return -1;
	cap_quiesce(pd);
	return cap_fail_closed_row(pd, request_id, why, out);
}

void
capability_forwarded(struct policyd *pd, const char *request_id)
{
	struct capability	*cap = pd->cap;
	struct cap_row		 row;
	sqlite3_stmt		*st;

	if (cap == NULL)
		return;
	cap_quiesce(pd);
	st = cap->st[ST_REQ_FORWARDED];
	sqlite3_bind_text(st, 1, request_id, -1, SQLITE_STATIC);
	if (cap_step(cap, st) == -1)
		log_warnx("capability request %s: cannot note that approvald "
		    "has it", request_id);
	if (cap_row_get(cap, request_id, &row) == 1) {
		cap_count(pd, row.template,
		    SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING);
		cap_row_clear(&row);
	}
}

/* An approver's name as approvald reports it: a Unix user name. */
static int
cap_approver_ok(const char *s)
{
	return s != NULL && name_ok(s) && strlen(s) <= 64;
}

int
capability_apply(struct policyd *pd, const Sbx__V1__CapabilityDecision *d,
    const char *actor, Sbx__V1__CapabilityDecision *out, Sbx__V1__Error *err)
{
	struct capability	*cap = pd->cap;
	struct cap_row		 row;
	char			 hash[POLICY_HASH_HEX] = "";
	char			*reason, *detail, *outcome, *gd, *what;
	int			 approve, ok, rc;

	if (cap == NULL) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_UNAVAILABLE, "",
		    "capability requests are not set up");
		return -1;
	}
	if (d == NULL || !name_ok(d->request_id)) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "a decision names a request_id");
		return -1;
	}
	if (d->status != SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED &&
	    d->status != SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "a decision is APPROVED or DENIED, not %s",
		    capability_status_name(d->status));
		return -1;
	}
	if (!cap_approver_ok(d->approver)) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "a decision names its approver (a user name), not "
		    "\"%.64s\"", d->approver != NULL ? d->approver : "");
		return -1;
	}
	approve = d->status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED;
	cap_quiesce(pd);
	if ((rc = cap_row_get(cap, d->request_id, &row)) != 1) {
		if (rc == 0)
			cap_error(err, SBX__V1__ERROR_CODE__ERROR_NOT_FOUND,
			    "", "no capability request %s", d->request_id);
		else
			cap_error(err, SBX__V1__ERROR_CODE__ERROR_INTERNAL,
			    "", "capability request %s cannot be read",
			    d->request_id);
		return -1;
	}
	if (row.status != SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING) {
		/* approvald repeating itself (say, after a restart) gets
		 * the same answer; a contradiction is refused. */
		if ((int)d->status == row.status) {
			cap_decision(out, d->request_id, row.status,
			    row.reason, row.hash, row.approver,
			    row.decided_at);
			cap_row_clear(&row);
			return 0;
		}
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INVALID, "",
		    "capability request %s is already %s", d->request_id,
		    capability_status_name(row.status));
		cap_row_clear(&row);
		return -1;
	}
	if (approve && cap_recompile(pd, row.task_id, row.req, hash,
	    err) == -1) {
		/* Nothing recorded: the request stays pending. */
		cap_row_clear(&row);
		return -1;
	}
	reason = cap_clean(d->reason != NULL ? d->reason : "",
	    CAP_REASON_MAX);
	xasprintf(&outcome, "%s by %s", approve ? "approved" : "denied",
	    d->approver);
	detail = cap_detail(row.req, outcome, reason);
	ok = audit_begin(store_audit(pd->store)) == 0;
	ok = ok && cap_update_request(cap, d->request_id, (int)d->status,
	    reason, d->approver, now_s(), hash) == 0;
	ok = ok && cap_event(pd, row.task_id, "capability", approve ? hash :
	    NULL, detail, actor) == 0;
	if (ok && approve) {
		what = cap_what(row.req);
		xasprintf(&gd, "%s: %s (approved by %s)", d->request_id, what,
		    d->approver);
		ok = cap_insert_grant(cap, row.req) == 0 &&
		    cap_event(pd, row.task_id, "grant", hash, gd, actor) == 0;
		free(what);
		free(gd);
	}
	if (cap_commit(pd, ok) == -1) {
		cap_error(err, SBX__V1__ERROR_CODE__ERROR_INTERNAL, "",
		    "policyd.db: the decision could not be recorded; nothing "
		    "was granted");
		rc = -1;
	} else {
		if (approve)
			cap->ngrants++;
		cap_count(pd, row.template, (int)d->status);
		log_info("task %s: capability %s", row.task_id, detail);
		cap_decision(out, d->request_id, (int)d->status, reason,
		    hash, d->approver, now_s());
		rc = 0;
	}
	free(reason);
	free(outcome);
	free(detail);
	cap_row_clear(&row);
	return rc;
}

/* ---- the sockets ---- */


static void
cap_send_decision(struct frame_conn *c, uint64_t id,
    Sbx__V1__CapabilityDecision *d)
{
	Sbx__V1__Envelope	 env;

	frame_env_init(&env, id);
	env.body_case = SBX__V1__ENVELOPE__BODY_DECISION;
	env.decision = d;
	frame_conn_send(c, &env);
}

static void
cap_send_error(struct frame_conn *c, uint64_t id, const Sbx__V1__Error *e)
{
	frame_conn_send_error(c, id, e->code, e->rule != NULL ? e->rule : "",
	    "%s", e->message != NULL ? e->message : "");
}

static void
cap_fwd_free(struct cap_fwd *f)
{
	TAILQ_REMOVE(&f->cap->fwds, f, entry);
	frame_client_free(f->fc);
	frame_conn_release(f->conn);
	free(f);
}

/* approvald did not take the request: deny it and say so. */
static void
cap_fwd_fail(struct cap_fwd *f, const char *why)
{
	struct policyd			*pd = f->cap->pd;
	Sbx__V1__CapabilityDecision	 d;

	sbx__v1__capability_decision__init(&d);
	log_warnx("capability request %s: approvald: %s", f->request_id, why);
	if (capability_fail_closed(pd, f->request_id, why, &d) == 0)
		cap_send_decision(f->conn, f->env_id, &d);
	else
		frame_conn_send_error(f->conn, f->env_id,
		    SBX__V1__ERROR_CODE__ERROR_INTERNAL, "", "capability "
		    "request %s: approvald did not take it and the denial "
		    "could not be recorded", f->request_id);
	capability_decision_clear(&d);
	cap_fwd_free(f);
}

static void
cap_fwd_reply(struct frame_client *fc, Sbx__V1__Envelope *rep,
    const char *why, void *arg)
{
	struct cap_fwd			*f = arg;
	Sbx__V1__CapabilityDecision	 d;
	char				 msg[400];

	(void)fc;
	if (rep == NULL) {
		cap_fwd_fail(f, why != NULL ? why : "no reply");
		return;
	}
	if (rep->body_case == SBX__V1__ENVELOPE__BODY_ERROR) {
		snprintf(msg, sizeof(msg), "refused: %.300s",
		    rep->error->message);
		cap_fwd_fail(f, msg);
		return;
	}
	if (rep->body_case != SBX__V1__ENVELOPE__BODY_DECISION ||
	    rep->decision->status !=
	    SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING ||
	    (rep->decision->request_id[0] != '\0' &&
	    strcmp(rep->decision->request_id, f->request_id) != 0)) {
		cap_fwd_fail(f, "answered with something other than PENDING "
		    "for this request");
		return;
	}
	capability_forwarded(f->cap->pd, f->request_id);
	sbx__v1__capability_decision__init(&d);
	cap_decision(&d, f->request_id,
	    SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING, "waiting for an "
	    "approver", NULL, NULL, 0);
	cap_send_decision(f->conn, f->env_id, &d);
	capability_decision_clear(&d);
	cap_fwd_free(f);
}

/* Hand a PENDING request to approvald; the reply waits for its word. */
static void
cap_forward(struct policyd *pd, struct frame_conn *c, uint64_t env_id,
    Sbx__V1__CapabilityRequest *req)
{
	struct capability	*cap = pd->cap;
	struct cap_fwd		*f;
	Sbx__V1__Envelope	 env;
	char			 err[300];

	f = xcalloc(1, sizeof(*f));
	f->cap = cap;
	f->conn = c;
	f->env_id = env_id;
	snprintf(f->request_id, sizeof(f->request_id), "%s",
	    req->request_id);
	frame_conn_hold(c);
	TAILQ_INSERT_TAIL(&cap->fwds, f, entry);
	f->fc = frame_connect(pd->base, pd->conf->approvald_socket,
	    pd->conf->approvald_uid,
	    (size_t)pd->conf->common.max_frame_kb * 1024, cap_fwd_reply, f,
	    err, sizeof(err));
	if (f->fc == NULL) {
		cap_fwd_fail(f, err);
		return;
	}
	frame_client_timeout(f->fc, CAP_FORWARD_TIMEOUT);
	frame_env_init(&env, ++cap->fwd_seq);
	env.body_case = SBX__V1__ENVELOPE__BODY_CAPABILITY;
	env.capability = req;
	if (frame_client_send(f->fc, &env) == -1)
		cap_fwd_fail(f, "cannot send the request");
}

void
capability_serve_request(struct policyd *pd, struct frame_conn *c,
    Sbx__V1__Envelope *env)
{
	Sbx__V1__CapabilityDecision	 d;
	Sbx__V1__Error			 err = SBX__V1__ERROR__INIT;
	char				 actor[32];

	peer_actor(frame_conn_peer(c), actor, sizeof(actor));
	sbx__v1__capability_decision__init(&d);
	if (capability_decide(pd, env->capability, actor, &d, &err) == -1) {
		cap_send_error(c, env->request_id, &err);
		compile_error_clear(&err);
		return;
	}
	if (d.status == SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING)
		cap_forward(pd, c, env->request_id, env->capability);
	else
		cap_send_decision(c, env->request_id, &d);
	capability_decision_clear(&d);
}

void
capability_serve_decision(struct policyd *pd, struct frame_conn *c,
    Sbx__V1__Envelope *env)
{
	Sbx__V1__CapabilityDecision	 d;
	Sbx__V1__Error			 err = SBX__V1__ERROR__INIT;
	char				 actor[32];

	peer_actor(frame_conn_peer(c), actor, sizeof(actor));
	sbx__v1__capability_decision__init(&d);
	if (capability_apply(pd, env->decision, actor, &d, &err) == -1) {
		cap_send_error(c, env->request_id, &err);
		compile_error_clear(&err);
		return;
	}
	cap_send_decision(c, env->request_id, &d);
	capability_decision_clear(&d);
}

/* ---- metrics ---- */

char *
capability_metrics(const struct capability *cap)
{
	static const char *const outcomes[] = {
		"granted", "pending", "approved", "denied"
	};
	char	*s, *t;
	size_t	 i;

	s = xstrdup("# HELP sbx_policyd_capability_requests_total Capability "
	    "requests by template and outcome.\n"
	    "# TYPE sbx_policyd_capability_requests_total counter\n");
	for (i = 0; cap != NULL && i < cap->nstats; i++) {
		const struct cap_stat	*st = &cap->stats[i];
		const uint64_t		 v[4] = {
			st->granted, st->pending, st->approved, st->denied
		};

		for (size_t k = 0; k < 4; k++) {
			xasprintf(&t, "%ssbx_policyd_capability_requests_total"
			    "{template=\"%s\",outcome=\"%s\"} %llu\n", s,
			    st->template, outcomes[k],
			    (unsigned long long)v[k]);
			free(s);
			s = t;
		}
	}
	xasprintf(&t, "%s# HELP sbx_policyd_capability_auto_grant_ratio "
	    "Share of capability requests granted by the rules, without "
	    "an approver.\n"
	    "# TYPE sbx_policyd_capability_auto_grant_ratio gauge\n", s);
	free(s);
	s = t;
	for (i = 0; cap != NULL && i < cap->nstats; i++) {
		const struct cap_stat	*st = &cap->stats[i];

		xasprintf(&t, "%ssbx_policyd_capability_auto_grant_ratio"
		    "{template=\"%s\"} %.4f\n", s, st->template,
		    st->requests > 0 ? (double)st->granted /
		    (double)st->requests : 0.0);
		free(s);
		s = t;
	}
	return s;
}
