/*
 * entitle.c: entitlements in policyd.db.  An entitlement says which
 * datasets a (tenant, user) may read, which hosts they may call and the
 * maximum limits of their plan; user "*" holds what every user of the
 * tenant gets.  The effective entitlement is the union of the two rows,
 * and a (tenant, user) with neither row is entitled to nothing: compile
 * refuses it rather than falling back to the template.  Every change runs
 * inside a savepoint, so an add or remove is all-or-nothing whether or not
 * the caller has a transaction open.
 *
 * Compiles ask for the same few (tenant, user) pairs over and over, so
 * entitle_lookup() keeps what it read.  The cache is dropped whole on
 * every change: an add or remove empties it, and so does the caller once
 * the change has committed or rolled back (entitle_forget()), because a
 * read handle sees a change only after the commit.
 */
#include <ctype.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "log.h"
#include "util.h"
#include "policyd.h"

enum {
	ST_GET_ROWS,
	ST_GET_DATASETS,
	ST_GET_HOSTS,
	ST_ROW_ENSURE,
	ST_ROW_MERGE,
	ST_ROW_DELETE,
	ST_ROW_EXISTS,
	ST_DS_INSERT,
	ST_DS_DELETE,
	ST_DS_DELETE_ALL,
	ST_HOST_INSERT,
	ST_HOST_DELETE,
	ST_HOST_DELETE_ALL,
	ST_LIST,
	ST_ROW_DATASETS,
	ST_ROW_HOSTS,
	ST_MAX
};

static const char *const entitle_sql[ST_MAX] = {
	[ST_GET_ROWS] = "SELECT user, cpus_milli, memory_mb, pids,"
	    " wall_seconds, scratch_mb FROM entitlements"
	    " WHERE tenant = ?1 AND (user = ?2 OR user = '*')",
	[ST_GET_DATASETS] = "SELECT DISTINCT dataset FROM entitlement_datasets"
	    " WHERE tenant = ?1 AND (user = ?2 OR user = '*') ORDER BY dataset",
	[ST_GET_HOSTS] = "SELECT DISTINCT host FROM entitlement_hosts"
	    " WHERE tenant = ?1 AND (user = ?2 OR user = '*') ORDER BY host",
	[ST_ROW_ENSURE] = "INSERT INTO entitlements(tenant, user) VALUES"
	    " (?1, ?2) ON CONFLICT DO NOTHING",
	[ST_ROW_MERGE] = "UPDATE entitlements SET"
	    " cpus_milli = CASE WHEN ?3 > 0 OR ?8 THEN ?3 ELSE cpus_milli END,"
	    " memory_mb = CASE WHEN ?4 > 0 OR ?8 THEN ?4 ELSE memory_mb END,"
	    " pids = CASE WHEN ?5 > 0 OR ?8 THEN ?5 ELSE pids END,"
	    " wall_seconds = CASE WHEN ?6 > 0 OR ?8 THEN ?6 ELSE wall_seconds"
	    " END,"
	    " scratch_mb = CASE WHEN ?7 > 0 OR ?8 THEN ?7 ELSE scratch_mb END"
	    " WHERE tenant = ?1 AND user = ?2",
	[ST_ROW_DELETE] = "DELETE FROM entitlements WHERE tenant = ?1 AND"
	    " user = ?2",
	[ST_ROW_EXISTS] = "SELECT 1 FROM entitlements WHERE tenant = ?1 AND"
	    " user = ?2",
	[ST_DS_INSERT] = "INSERT INTO entitlement_datasets(tenant, user,"
	    " dataset) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
	[ST_DS_DELETE] = "DELETE FROM entitlement_datasets WHERE tenant = ?1"
	    " AND user = ?2 AND dataset = ?3",
	[ST_DS_DELETE_ALL] = "DELETE FROM entitlement_datasets WHERE"
	    " tenant = ?1 AND user = ?2",
	[ST_HOST_INSERT] = "INSERT INTO entitlement_hosts(tenant, user, host)"
	    " VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
	[ST_HOST_DELETE] = "DELETE FROM entitlement_hosts WHERE tenant = ?1"
	    " AND user = ?2 AND host = ?3",
	[ST_HOST_DELETE_ALL] = "DELETE FROM entitlement_hosts WHERE"
	    " tenant = ?1 AND user = ?2",
	[ST_LIST] = "SELECT tenant, user, cpus_milli, memory_mb, pids,"
	    " wall_seconds, scratch_mb FROM entitlements"
	    " WHERE (?1 = '' OR tenant = ?1) AND (?2 = '' OR user = ?2)"
	    " ORDER BY tenant, user",
	[ST_ROW_DATASETS] = "SELECT dataset FROM entitlement_datasets"
	    " WHERE tenant = ?1 AND user = ?2 ORDER BY dataset",
	[ST_ROW_HOSTS] = "SELECT host FROM entitlement_hosts"
	    " WHERE tenant = ?1 AND user = ?2 ORDER BY host",
};

static const char entitle_schema[] =
    "CREATE TABLE IF NOT EXISTS entitlements("
    " tenant TEXT NOT NULL,"
    " user TEXT NOT NULL,"
    " cpus_milli INTEGER NOT NULL DEFAULT 0,"
    " memory_mb INTEGER NOT NULL DEFAULT 0,"
    " pids INTEGER NOT NULL DEFAULT 0,"
    " wall_seconds INTEGER NOT NULL DEFAULT 0,"
    " scratch_mb INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY (tenant, user));"
    "CREATE TABLE IF NOT EXISTS entitlement_datasets("
    " tenant TEXT NOT NULL,"
    " user TEXT NOT NULL,"
    " dataset TEXT NOT NULL,"
    " PRIMARY KEY (tenant, user, dataset));"
    "CREATE TABLE IF NOT EXISTS entitlement_hosts("
    " tenant TEXT NOT NULL,"
    " user TEXT NOT NULL,"
    " host TEXT NOT NULL,"
    " PRIMARY KEY (tenant, user, host));";

/* Enough for every user of a large tenant; past it the cache starts
 * over. */
#define ENTITLE_CACHE_MAX	4096

struct entitle_cached {
	char			*tenant;
	char			*user;
	struct entitle_eff	 eff;
};

struct entitle {
	void		*cache;		/* tsearch tree of entitle_cached */
	size_t		 ncache;
	sqlite3		*db;
	sqlite3_stmt	*st[ST_MAX];
	/* entitle_get()'s statements on a read handle, if one was given. */
	sqlite3		*rdb;
	sqlite3_stmt	*rst[ST_MAX];
	/* In a fleet the database's entitlements, read afresh every time:
	 * a revocation at another host holds at the next compile. */
	struct fleet	*fleet;
};

/* What entitle_get() runs. */
static const int entitle_reads[] = {
	ST_GET_ROWS, ST_GET_DATASETS, ST_GET_HOSTS
};

struct entitle *
entitle_open(struct sqlite3 *db, char *err, size_t errlen)
{
	struct entitle	*e;
	char		*msg = NULL;
	int		 i;

	e = xcalloc(1, sizeof(*e));
	e->db = db;
	if (sqlite3_exec(db, entitle_schema, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, errlen, "entitlements schema: %s",
		    msg != NULL ? msg : sqlite3_errmsg(db));
		sqlite3_free(msg);
		entitle_close(e);
		return NULL;
	}
	for (i = 0; i < ST_MAX; i++) {
		if (sqlite3_prepare_v3(db, entitle_sql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &e->st[i], NULL) != SQLITE_OK) {
			snprintf(err, errlen, "entitlements: %s",
			    sqlite3_errmsg(db));
			entitle_close(e);
			return NULL;
		}
	}
	return e;
}

int
entitle_use_reader(struct entitle *e, struct sqlite3 *rdb, char *err,
    size_t errlen)
{
	size_t	 i;
	int	 w;

	for (i = 0; i < sizeof(entitle_reads) / sizeof(entitle_reads[0]);
	    i++) {
		w = entitle_reads[i];
		sqlite3_finalize(e->rst[w]);
		e->rst[w] = NULL;
		if (sqlite3_prepare_v3(rdb, entitle_sql[w], -1,
		    SQLITE_PREPARE_PERSISTENT, &e->rst[w], NULL) != SQLITE_OK) {
			snprintf(err, errlen, "entitlements: %s",
			    sqlite3_errmsg(rdb));
			return -1;
		}
	}
	e->rdb = rdb;
	return 0;
}

static int
entitle_cached_cmp(const void *a, const void *b)
{
	const struct entitle_cached	*x = a, *y = b;
	int				 c;

	if ((c = strcmp(x->tenant, y->tenant)) != 0)
		return c;
	return strcmp(x->user, y->user);
}

static void
entitle_cached_free(void *p)
{
	struct entitle_cached	*c = p;

	free(c->tenant);
	free(c->user);
	entitle_eff_clear(&c->eff);
	free(c);
}

void
entitle_forget(struct entitle *e)
{
	tdestroy(e->cache, entitle_cached_free);
	e->cache = NULL;
	e->ncache = 0;
}

void
entitle_use_fleet(struct entitle *e, struct fleet *f)
{
	e->fleet = f;
}

const struct entitle_eff *
entitle_lookup(struct entitle *e, const char *tenant, const char *user)
{
	struct entitle_cached	 key, *c;
	const struct entitle_eff *eff;
	void			*node;
	char			 err[512];

	if (e->fleet != NULL) {
		if ((eff = fleet_entitle_get(e->fleet, tenant, user, err,
		    sizeof(err))) == NULL)
			log_warnx("entitlements of %s/%s: %s", tenant, user,
			    err);
		return eff;
	}

	key.tenant = (char *)tenant;
	key.user = (char *)user;
	if ((node = tfind(&key, &e->cache, entitle_cached_cmp)) != NULL)
		return &(*(struct entitle_cached **)node)->eff;
	c = xcalloc(1, sizeof(*c));
	if (entitle_get(e, tenant, user, &c->eff) == -1) {
		free(c);
		return NULL;
	}
	if (e->ncache >= ENTITLE_CACHE_MAX)
		entitle_forget(e);
	c->tenant = xstrdup(tenant);
	c->user = xstrdup(user);
	if (tsearch(c, &e->cache, entitle_cached_cmp) == NULL)
		fatal("tsearch");
	e->ncache++;
	return &c->eff;
}

void
entitle_close(struct entitle *e)
{
	int	 i;

	if (e == NULL)
		return;
	entitle_forget(e);
	for (i = 0; i < ST_MAX; i++) {
		sqlite3_finalize(e->st[i]);
		sqlite3_finalize(e->rst[i]);
	}
	free(e);
}

static void
entitle_done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

static sqlite3_stmt *
entitle_bind(struct entitle *e, int which, const char *tenant,
    const char *user, const char *third)
{
	sqlite3_stmt	*st = e->rst[which] != NULL ? e->rst[which] :
			    e->st[which];

	sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, user, -1, SQLITE_STATIC);
	if (third != NULL)
		sqlite3_bind_text(st, 3, third, -1, SQLITE_STATIC);
	return st;
}

static int
entitle_run(struct entitle *e, sqlite3_stmt *st)
{
	int	 rc = sqlite3_step(st);

	entitle_done(st);
	if (rc != SQLITE_DONE) {
		log_warnx("entitlements: %s", sqlite3_errmsg(e->db));
		return -1;
	}
	return 0;
}

/* Collect the first column of every row. */
static int
entitle_strings(sqlite3_stmt *st, char ***out, size_t *n)
{
	int	 rc;

	*out = NULL;
	*n = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		*out = xreallocarray(*out, *n + 1, sizeof(**out));
		(*out)[(*n)++] = xstrdup((const char *)
		    sqlite3_column_text(st, 0));
	}
	entitle_done(st);
	if (rc != SQLITE_DONE) {
		log_warnx("entitlements: %s",
		    sqlite3_errmsg(sqlite3_db_handle(st)));
		return -1;
	}
	return 0;
}

static int
entitle_host_ok(const char *h)
{
	size_t	 n = strlen(h);

	if (n == 0 || n > 253 || h[0] == '.' || h[0] == '-')
		return 0;
	for (; *h != '\0'; h++)
		if (!isalnum((unsigned char)*h) && *h != '.' && *h != '-')
			return 0;
	return 1;
}

int
entitle_check(const Sbx__V1__Entitlement *m, char *err, size_t errlen)
{
	size_t	 i;

	if (!name_ok(m->tenant)) {
		snprintf(err, errlen, "tenant \"%.128s\" is not a valid name",
		    m->tenant != NULL ? m->tenant : "");
		return -1;
	}
	if (strcmp(m->user, POLICYD_USER_ALL) != 0 && !name_ok(m->user)) {
		snprintf(err, errlen, "user \"%.128s\" is not a valid name "
		    "(or \"*\" for every user)", m->user != NULL ?
		    m->user : "");
		return -1;
	}
	for (i = 0; i < m->n_datasets; i++) {
		if (!name_ok(m->datasets[i])) {
			snprintf(err, errlen, "dataset \"%.128s\" is not a "
			    "valid name", m->datasets[i]);
			return -1;
		}
	}
	for (i = 0; i < m->n_hosts; i++) {
		if (!entitle_host_ok(m->hosts[i])) {
			snprintf(err, errlen, "host \"%.253s\" is not a valid "
			    "host name", m->hosts[i]);
			return -1;
		}
	}
	return 0;
}

static int
entitle_savepoint(struct entitle *e, const char *sql)
{
	if (sqlite3_exec(e->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
		log_warnx("entitlements: %s: %s", sql, sqlite3_errmsg(e->db));
		return -1;
	}
	return 0;
}

static int
entitle_finish(struct entitle *e, int ok)
{
	if (!ok) {
		entitle_savepoint(e, "ROLLBACK TO entitle");
		entitle_savepoint(e, "RELEASE entitle");
		return -1;
	}
	return entitle_savepoint(e, "RELEASE entitle");
}

int
entitle_add(struct entitle *e, const Sbx__V1__Entitlement *m, char *err,
    size_t errlen)
{
	const Sbx__V1__Limits	*l = m->max_limits;
	sqlite3_stmt		*st;
	char			*h;
	size_t			 i;
	int			 ok = 1;

	if (entitle_check(m, err, errlen) == -1)
		return -1;
	entitle_forget(e);
	if (entitle_savepoint(e, "SAVEPOINT entitle") == -1) {
		snprintf(err, errlen, "entitlements: %s",
		    sqlite3_errmsg(e->db));
		return -1;
	}
	if (m->replace) {
		ok = entitle_run(e, entitle_bind(e, ST_DS_DELETE_ALL,
		    m->tenant, m->user, NULL)) == 0 &&
		    entitle_run(e, entitle_bind(e, ST_HOST_DELETE_ALL,
		    m->tenant, m->user, NULL)) == 0;
	}
	ok = ok && entitle_run(e, entitle_bind(e, ST_ROW_ENSURE, m->tenant,
	    m->user, NULL)) == 0;
	if (ok) {
		st = entitle_bind(e, ST_ROW_MERGE, m->tenant, m->user, NULL);
		sqlite3_bind_int64(st, 3, l != NULL ? l->cpus_milli : 0);
		sqlite3_bind_int64(st, 4, l != NULL ? l->memory_mb : 0);
		sqlite3_bind_int64(st, 5, l != NULL ? l->pids : 0);
		sqlite3_bind_int64(st, 6, l != NULL ? l->wall_seconds : 0);
		sqlite3_bind_int64(st, 7, l != NULL ? l->scratch_mb : 0);
		sqlite3_bind_int(st, 8, m->replace ? 1 : 0);
		ok = entitle_run(e, st) == 0;
	}
	for (i = 0; ok && i < m->n_datasets; i++)
		ok = entitle_run(e, entitle_bind(e, ST_DS_INSERT, m->tenant,
		    m->user, m->datasets[i])) == 0;
	for (i = 0; ok && i < m->n_hosts; i++) {
		h = entitle_host_norm(m->hosts[i]);
		ok = entitle_run(e, entitle_bind(e, ST_HOST_INSERT, m->tenant,
		    m->user, h)) == 0;
		free(h);
	}
	if (entitle_finish(e, ok) == -1) {
		snprintf(err, errlen, "entitlements: cannot store %s/%s",
		    m->tenant, m->user);
		return -1;
	}
	return 0;
}

int
entitle_remove(struct entitle *e, const Sbx__V1__Entitlement *m, char *err,
    size_t errlen)
{
	sqlite3_stmt	*st;
	char		*h;
	size_t		 i;
	int		 ok = 1, rc, exists;

	if (entitle_check(m, err, errlen) == -1)
		return -1;
	entitle_forget(e);
	st = entitle_bind(e, ST_ROW_EXISTS, m->tenant, m->user, NULL);
	rc = sqlite3_step(st);
	entitle_done(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		snprintf(err, errlen, "entitlements: %s",
		    sqlite3_errmsg(e->db));
		return -1;
	}
	exists = rc == SQLITE_ROW;
	if (!exists)
		return 1;
	if (entitle_savepoint(e, "SAVEPOINT entitle") == -1) {
		snprintf(err, errlen, "entitlements: %s",
		    sqlite3_errmsg(e->db));
		return -1;
	}
	if (m->n_datasets == 0 && m->n_hosts == 0) {
		ok = entitle_run(e, entitle_bind(e, ST_DS_DELETE_ALL,
		    m->tenant, m->user, NULL)) == 0 &&
		    entitle_run(e, entitle_bind(e, ST_HOST_DELETE_ALL,
		    m->tenant, m->user, NULL)) == 0 &&
		    entitle_run(e, entitle_bind(e, ST_ROW_DELETE,
		    m->tenant, m->user, NULL)) == 0;
	}
	for (i = 0; ok && i < m->n_datasets; i++)
		ok = entitle_run(e, entitle_bind(e, ST_DS_DELETE, m->tenant,
		    m->user, m->datasets[i])) == 0;
	for (i = 0; ok && i < m->n_hosts; i++) {
		h = entitle_host_norm(m->hosts[i]);
		ok = entitle_run(e, entitle_bind(e, ST_HOST_DELETE, m->tenant,
		    m->user, h)) == 0;
		free(h);
	}
	if (entitle_finish(e, ok) == -1) {
		snprintf(err, errlen, "entitlements: cannot remove from "
		    "%s/%s", m->tenant, m->user);
		return -1;
	}
	return 0;
}

static void
entitle_limits(sqlite3_stmt *st, int col, Sbx__V1__Limits *l)
{
	l->cpus_milli = (uint32_t)sqlite3_column_int64(st, col);
	l->memory_mb = (uint32_t)sqlite3_column_int64(st, col + 1);
	l->pids = (uint32_t)sqlite3_column_int64(st, col + 2);
	l->wall_seconds = (uint32_t)sqlite3_column_int64(st, col + 3);
	l->scratch_mb = (uint32_t)sqlite3_column_int64(st, col + 4);
}

int
entitle_list(struct entitle *e, const char *tenant, const char *user,
    Sbx__V1__Entitlement ***out, size_t *n)
{
	sqlite3_stmt		*st;
	Sbx__V1__Entitlement	*m;
	int			 rc, ok = 1;

	*out = NULL;
	*n = 0;
	if (e->fleet != NULL) {
		char	 err[512];

		if (fleet_entitle_list(e->fleet, tenant, user, out, n, err,
		    sizeof(err)) == -1) {
			log_warnx("entitlements: list: %s", err);
			return -1;
		}
		return 0;
	}
	st = entitle_bind(e, ST_LIST, tenant != NULL ? tenant : "",
	    user != NULL ? user : "", NULL);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		m = xmalloc(sizeof(*m));
		sbx__v1__entitlement__init(m);
		m->tenant = xstrdup((const char *)sqlite3_column_text(st, 0));
		m->user = xstrdup((const char *)sqlite3_column_text(st, 1));
		m->max_limits = xmalloc(sizeof(*m->max_limits));
		sbx__v1__limits__init(m->max_limits);
		entitle_limits(st, 2, m->max_limits);
		*out = xreallocarray(*out, *n + 1, sizeof(**out));
		(*out)[(*n)++] = m;
	}
	entitle_done(st);
	if (rc != SQLITE_DONE) {
		log_warnx("entitlements: list: %s", sqlite3_errmsg(e->db));
		ok = 0;
	}
	for (size_t i = 0; ok && i < *n; i++) {
		m = (*out)[i];
		ok = entitle_strings(entitle_bind(e, ST_ROW_DATASETS,
		    m->tenant, m->user, NULL), &m->datasets,
		    &m->n_datasets) == 0 &&
		    entitle_strings(entitle_bind(e, ST_ROW_HOSTS, m->tenant,
		    m->user, NULL), &m->hosts, &m->n_hosts) == 0;
	}
	if (!ok) {
		entitle_list_free(*out, *n);
		*out = NULL;
		*n = 0;
		return -1;
	}
	return 0;
}

void
entitle_list_free(Sbx__V1__Entitlement **v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		Sbx__V1__Entitlement	*m = v[i];

		free(m->tenant);
		free(m->user);
		for (size_t j = 0; j < m->n_datasets; j++)
			free(m->datasets[j]);
		free(m->datasets);
		for (size_t j = 0; j < m->n_hosts; j++)
			free(m->hosts[j]);
		free(m->hosts);
		free(m->max_limits);
		free(m);
	}
	free(v);
}

/* The user's value where set, else the tenant-wide value. */
static uint32_t
entitle_pick(uint32_t user, uint32_t all)
{
	return user != 0 ? user : all;
}

int
entitle_get(struct entitle *e, const char *tenant, const char *user,
    struct entitle_eff *eff)
{
	sqlite3_stmt	*st;
	Sbx__V1__Limits	 ul, al;
	int		 rc;

	memset(eff, 0, sizeof(*eff));
	sbx__v1__limits__init(&eff->plan);
	sbx__v1__limits__init(&ul);
	sbx__v1__limits__init(&al);
	st = entitle_bind(e, ST_GET_ROWS, tenant, user, NULL);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *u = (const char *)sqlite3_column_text(st, 0);

		eff->found = 1;
		entitle_limits(st, 1, strcmp(u, POLICYD_USER_ALL) == 0 &&
		    strcmp(user, POLICYD_USER_ALL) != 0 ? &al : &ul);
	}
	entitle_done(st);
	if (rc != SQLITE_DONE) {
		log_warnx("entitlements: %s/%s: %s", tenant, user,
		    sqlite3_errmsg(sqlite3_db_handle(st)));
		return -1;
	}
	if (!eff->found)
		return 0;
	eff->plan.cpus_milli = entitle_pick(ul.cpus_milli, al.cpus_milli);
	eff->plan.memory_mb = entitle_pick(ul.memory_mb, al.memory_mb);
	eff->plan.pids = entitle_pick(ul.pids, al.pids);
	eff->plan.wall_seconds = entitle_pick(ul.wall_seconds,
	    al.wall_seconds);
	eff->plan.scratch_mb = entitle_pick(ul.scratch_mb, al.scratch_mb);
	if (entitle_strings(entitle_bind(e, ST_GET_DATASETS, tenant, user,
	    NULL), &eff->datasets, &eff->ndatasets) == -1 ||
	    entitle_strings(entitle_bind(e, ST_GET_HOSTS, tenant, user,
	    NULL), &eff->hosts, &eff->nhosts) == -1) {
		entitle_eff_clear(eff);
		return -1;
	}
	return 0;
}

static int
entitle_has(char *const *v, size_t n, const char *s)
{
	size_t	 lo = 0, hi = n, mid;
	int	 c;

	/* Both lists come back ORDER BY, which for ASCII text is the same
	 * order as strcmp. */
	while (lo < hi) {
		mid = (lo + hi) / 2;
		c = strcmp(v[mid], s);
		if (c == 0)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

int
entitle_can_read(const struct entitle_eff *eff, const char *dataset)
{
	return eff->found && entitle_has(eff->datasets, eff->ndatasets,
	    dataset);
}

int
entitle_can_call(const struct entitle_eff *eff, const char *host)
{
	return eff->found && entitle_has(eff->hosts, eff->nhosts, host);
}
