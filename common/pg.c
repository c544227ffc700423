/*
 * pg.c: the PostgreSQL connection policyd and approvald share when the
 * state of a fleet lives there (pg.h).  Fail closed: any failure is an
 * error to the caller, which refuses what it was asked; the next call
 * connects again, so a daemon recovers when the database does, without
 * a restart.  Never logs the conninfo (it may name a passfile, a user,
 * an application name): only its host and dbname.
 *
 * The calls run on the daemon's one event loop, so none may wait on the
 * database for ever: every round trip -- the connection, each statement
 * -- is libpq's non-blocking API polled against a deadline (timeout_ms).
 * One that passes it drops the connection (the server ends the session
 * when it next reads from it; a statement it still runs ends then, or at
 * statement_timeout) and opens the breaker: for retry_ms every call is
 * refused at once, without a round trip; then one call probes with a
 * new connection, and each probe that fails doubles the back-off (up to
 * PG_RETRY_GROW times retry_ms).  A refused connection or an error the
 * server sent costs no wait and opens nothing.  Not PQcancel: it blocks
 * until the postmaster answers, which a hung one never does.  A host
 * name in conninfo is resolved before the deadline starts (getaddrinfo
 * blocks): a socket directory or hostaddr= avoids that.
 *
 * libpq itself is loaded here (pg_load), when a store is postgresql and
 * never otherwise: a daemon keeping its state in SQLite does not map it
 * or the libraries it brings.  A library that cannot be loaded is an
 * error naming it, like any other reason the store cannot be used.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "yaml.h"
#include "pg.h"

#define PG_RETRY_GROW	16	/* the back-off grows to retry_ms * this */

struct pg_lib	 pg_lib;
static int	 pg_lib_ok;

/* The table's types are libpq-fe.h's own (the names below are not
 * followed by a parenthesis, so they are the functions, not macros). */
#define PG_LIB_CHECK(r, n, a)						\
	_Static_assert(__builtin_types_compatible_p(__typeof__(&n),	\
	    __typeof__(pg_lib.n)), "pg.h: " #n " as libpq-fe.h has it");
PG_LIB_CALLS(PG_LIB_CHECK)
#undef PG_LIB_CHECK

int
pg_load_soname(const char *soname, char *err, size_t errlen)
{
#define PG_LIB_NAME(r, n, a)	#n,
	static const char *const names[] = { PG_LIB_CALLS(PG_LIB_NAME) };
#undef PG_LIB_NAME
	void		*syms[sizeof(names) / sizeof(names[0])];
	size_t		 i = 0;

	if (pg_lib_ok)
		return 0;
	/* Never unloaded: pg_lib's pointers live as long as the process. */
	if (dl_syms(soname, "(PostgreSQL's client library, Debian's libpq5), "
	    "which backend postgresql needs", "not the libpq sbx was built "
	    "for", names, syms, sizeof(syms) / sizeof(syms[0]), err,
	    errlen) == NULL)
		return -1;
#define PG_LIB_SET(r, n, a)	memcpy(&pg_lib.n, &syms[i++], sizeof(void *));
	PG_LIB_CALLS(PG_LIB_SET)
#undef PG_LIB_SET
	pg_lib_ok = 1;
	return 0;
}

int
pg_load(char *err, size_t errlen)
{
	return pg_load_soname(PG_LIB_SONAME, err, errlen);
}

int
pg_loaded(void)
{
	return pg_lib_ok;
}

struct pg {
	char		*conninfo;
	const char	*schema;
	char		 where[256];
	PGconn		*conn;
	int		 schema_ok;
	int		 timeout_ms;	/* each round trip's deadline */
	int		 retry_ms;	/* the breaker's first back-off */
	int		 backoff_ms;	/* its current one; 0: closed */
	int64_t		 open_until;	/* monotonic ms: refuse before */
	char		 why[128];	/* what opened it */
};

const char *
pg_msg(struct pg *p)
{
	static char	 buf[256];
	size_t		 n;

	snprintf(buf, sizeof(buf), "%s", p->conn != NULL ?
	    PQerrorMessage(p->conn) : "not connected");
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return buf[0] != '\0' ? buf : "no message";
}

/* A result's own message, one line. */
static const char *
pg_res_msg(struct pg *p, const PGresult *res)
{
	static char	 buf[256];
	const char	*m;
	size_t		 n;

	if (res == NULL || *(m = PQresultErrorMessage(res)) == '\0')
		return pg_msg(p);
	snprintf(buf, sizeof(buf), "%s", m);
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return buf;
}

static int64_t
pg_now_ms(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
pg_drop(struct pg *p)
{
	if (p->conn != NULL)
		PQfinish(p->conn);
	p->conn = NULL;
}

/*
 * The connection's socket ready for events, or the deadline: 1 ready
 * (or hung up: libpq then says what), 0 at the deadline, -1 no socket.
 */
static int
pg_wait(struct pg *p, short events, int64_t deadline)
{
	struct pollfd	 pfd;
	int64_t		 left;
	int		 r;

	if ((pfd.fd = PQsocket(p->conn)) < 0)
		return -1;
	for (;;) {
		if ((left = deadline - pg_now_ms()) <= 0)
			return 0;
		pfd.events = events;
		pfd.revents = 0;
		r = poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (r > 0)
			return 1;
		if (r == -1 && errno != EINTR)
			return -1;
	}
}

/* A round trip past its deadline: the connection dropped, the breaker
 * opened, err saying so. */
static void
pg_trip(struct pg *p, const char *what, char *err, size_t errlen)
{
	pg_drop(p);
	snprintf(p->why, sizeof(p->why), "no answer within %d ms (%s)",
	    p->timeout_ms, what);
	errf(err, errlen, "%s: %s", p->where, p->why);
	if (p->retry_ms == 0)
		return;
	if (p->backoff_ms == 0)
		p->backoff_ms = p->retry_ms;
	else if (p->backoff_ms < p->retry_ms * PG_RETRY_GROW)
		p->backoff_ms *= 2;
	p->open_until = pg_now_ms() + p->backoff_ms;
	log_warnx("%s: %s: every call refused for %d ms, then one tries "
	    "again", p->where, p->why, p->backoff_ms);
}

/*
 * One round trip within the deadline: sql (with parameters unless
 * n < 0, then possibly several statements), and its result -- the first
 * that failed, else the last -- or NULL with err when the connection
 * broke or the deadline passed (the breaker then opened).
 */
static PGresult *
pg_run(struct pg *p, const char *sql, int n, const char *const *v,
    const int *lens, const int *fmts, int bin, char *err, size_t errlen)
{
	PGresult	*res, *last = NULL;
	int64_t		 deadline;
	int		 r, sent;

	if (p->conn == NULL || PQstatus(p->conn) != CONNECTION_OK) {
		errf(err, errlen, "%s: %s", p->where, p->conn == NULL ?
		    "not connected" : pg_msg(p));
		pg_drop(p);
		return NULL;
	}
	deadline = pg_now_ms() + p->timeout_ms;
	sent = n < 0 ? PQsendQuery(p->conn, sql) : PQsendQueryParams(p->conn,
	    sql, n, NULL, v, lens, fmts, bin);
	if (!sent)
		goto lost;
	while ((r = PQflush(p->conn)) == 1) {
		if ((r = pg_wait(p, POLLOUT | POLLIN, deadline)) == 0)
			goto late;
		if (r == -1 || !PQconsumeInput(p->conn))
			goto lost;
	}
	if (r == -1)
		goto lost;
	for (;;) {
		/* Read what is there before waiting for more: over TLS
		 * the socket can be quiet while libssl holds the answer. */
		while (PQisBusy(p->conn)) {
			if (!PQconsumeInput(p->conn))
				goto lost;
			if (!PQisBusy(p->conn))
				break;
			if ((r = pg_wait(p, POLLIN, deadline)) == 0)
				goto late;
			if (r == -1)
				goto lost;
		}
		if ((res = PQgetResult(p->conn)) == NULL)
			break;
		if (last != NULL &&
		    PQresultStatus(last) == PGRES_FATAL_ERROR)
			PQclear(res);
		else {
			PQclear(last);
			last = res;
		}
	}
	if (last == NULL)
		goto lost;
	/* The server answered: the breaker is closed. */
	p->backoff_ms = 0;
	return last;
late:
	PQclear(last);
	pg_trip(p, "a statement", err, errlen);
	return NULL;
lost:
	PQclear(last);
	errf(err, errlen, "%s: %s", p->where, pg_msg(p));
	pg_drop(p);
	return NULL;
}

int
pg_conninfo_ok(const char *conninfo, char *err, size_t errlen)
{
	PQconninfoOption	*o, *p;
	char			*msg = NULL;
	size_t			 n;

	if (pg_load(err, errlen) == -1)
		return -1;
	if ((o = PQconninfoParse(conninfo, &msg)) == NULL) {
		/* libpq's message names the keyword, not the value. */
		errf(err, errlen, "%s", msg != NULL ? msg :
		    "does not parse");
		n = strlen(err);
		while (n > 0 && err[n - 1] == '\n')
			err[--n] = '\0';
		PQfreemem(msg);
		return -1;
	}
	/* A config file is no place for a secret, and a message naming
	 * the conninfo would carry it: libpq's passfile instead. */
	for (p = o; p->keyword != NULL; p++)
		if (strcmp(p->keyword, "password") == 0 && p->val != NULL &&
		    p->val[0] != '\0') {
			errf(err, errlen, "a password does not belong here: "
			    "name a passfile readable by the daemon's user "
			    "only (passfile=PATH)");
			PQconninfoFree(o);
			return -1;
		}
	PQconninfoFree(o);
	return 0;
}

static const char *const pg_store_keys[] = { "backend", "conninfo", "host",
	"timeout_ms", "retry_ms", NULL };

void
pg_store_parse(struct ydoc *doc, const struct ynode *n, struct pg_store *s)
{
	const char	*b = NULL, *ci = NULL, *h = NULL;
	char		 err[256], hn[256];
	uint64_t	 to = PG_TIMEOUT_MS, re = PG_RETRY_MS;
	int		 bad;

	if (n == NULL)
		return;
	/* Every mistake is reported, not only the first. */
	bad = ymap_check(doc, n, "store", pg_store_keys, NULL) != 0;
	bad |= yget_str(doc, ymap_get(n, "backend"), "store.backend",
	    &b) == -1;
	bad |= yget_str(doc, ymap_get(n, "conninfo"), "store.conninfo",
	    &ci) == -1;
	bad |= yget_str(doc, ymap_get(n, "host"), "store.host", &h) == -1;
	/* A deadline under the loop's own latency, or one so long the
	 * loop stalls for minutes, is a mistake. */
	bad |= yget_uint(doc, ymap_get(n, "timeout_ms"), "store.timeout_ms",
	    50, 60000, &to) == -1;
	bad |= yget_uint(doc, ymap_get(n, "retry_ms"), "store.retry_ms", 0,
	    60000, &re) == -1;
	if (b == NULL || strcmp(b, "sqlite") == 0) {
		if (ci != NULL)
			yerr(doc, ymap_get(n, "conninfo"), "store.conninfo",
			    "only for backend postgresql");
		return;
	}
	if (strcmp(b, "postgresql") != 0) {
		yerr(doc, ymap_get(n, "backend"), "store.backend",
		    "\"%s\": sqlite or postgresql", b);
		bad = 1;
	}
	/* Loaded here, while the configuration is read (with -n too,
	 * and before the daemon drops its privileges). */
	if (pg_load(err, sizeof(err)) == -1) {
		yerr(doc, ymap_get(n, "backend"), "store.backend", "%s", err);
		bad = 1;
	}
	if (ci == NULL) {
		yerr(doc, n, "store.conninfo", "backend postgresql needs "
		    "conninfo");
		bad = 1;
	} else if (!pg_loaded()) {
		/* Nothing can parse it without libpq: said above. */
	} else if (pg_conninfo_ok(ci, err, sizeof(err)) == -1) {
		yerr(doc, ymap_get(n, "conninfo"), "store.conninfo", "%s",
		    err);
		bad = 1;
	}
	if (h == NULL) {
		if (gethostname(hn, sizeof(hn)) == -1)
			snprintf(hn, sizeof(hn), "localhost");
		hn[sizeof(hn) - 1] = '\0';
		h = hn;
	}
	if (!name_ok(h)) {
		yerr(doc, ymap_get(n, "host"), "store.host", "\"%.64s\" is "
		    "not a name (letters, digits, '-', '_', '.')", h);
		bad = 1;
	}
	if (bad)
		return;
	s->pg = 1;
	s->conninfo = xstrdup(ci);
	s->host = xstrdup(h);
	s->timeout_ms = (int)to;
	s->retry_ms = (int)re;
}

void
pg_store_free(struct pg_store *s)
{
	if (s->conninfo != NULL)
		explicit_bzero(s->conninfo, strlen(s->conninfo));
	free(s->conninfo);
	free(s->host);
	memset(s, 0, sizeof(*s));
}

/* "host H, dbname D" from conninfo, and nothing else of it. */
static void
pg_where_set(struct pg *p)
{
	PQconninfoOption	*o, *e;
	const char		*host = NULL, *db = NULL;
	char			 err[256];

	snprintf(p->where, sizeof(p->where), "the fleet database");
	/* Not loaded: pg_ready says why, at the first use. */
	if (pg_load(err, sizeof(err)) == -1)
		return;
	if ((o = PQconninfoParse(p->conninfo, NULL)) == NULL)
		return;
	for (e = o; e->keyword != NULL; e++) {
		if (strcmp(e->keyword, "host") == 0)
			host = e->val;
		else if (strcmp(e->keyword, "dbname") == 0)
			db = e->val;
	}
	snprintf(p->where, sizeof(p->where), "the fleet database (host %s, "
	    "dbname %s)", host != NULL ? host : "default", db != NULL ? db :
	    "default");
	PQconninfoFree(o);
}

struct pg *
pg_new(const char *conninfo, const char *schema)
{
	struct pg	*p;

	p = xcalloc(1, sizeof(*p));
	p->conninfo = xstrdup(conninfo);
	p->schema = schema;
	p->timeout_ms = PG_TIMEOUT_MS;
	p->retry_ms = PG_RETRY_MS;
	pg_where_set(p);
	return p;
}

void
pg_limits(struct pg *p, int timeout_ms, int retry_ms)
{
	if (timeout_ms > 0)
		p->timeout_ms = timeout_ms;
	if (retry_ms >= 0)
		p->retry_ms = retry_ms;
}

void
pg_free(struct pg *p)
{
	if (p == NULL)
		return;
	if (p->conn != NULL)
		PQfinish(p->conn);
	explicit_bzero(p->conninfo, strlen(p->conninfo));
	free(p->conninfo);
	free(p);
}

const char *
pg_where(const struct pg *p)
{
	return p->where;
}

PGconn *
pg_conn(struct pg *p)
{
	return p->conn;
}

int
pg_exec(struct pg *p, const char *sql, char *err, size_t errlen)
{
	PGresult	*res;
	int		 ok;

	if ((res = pg_run(p, sql, -1, NULL, NULL, NULL, 0, err,
	    errlen)) == NULL)
		return -1;
	ok = PQresultStatus(res) == PGRES_COMMAND_OK ||
	    PQresultStatus(res) == PGRES_TUPLES_OK;
	if (!ok)
		errf(err, errlen, "%s: %s", p->where, pg_res_msg(p, res));
	PQclear(res);
	return ok ? 0 : -1;
}

int
pg_ready(struct pg *p, char *err, size_t errlen)
{
	const char		*kw[] = { "dbname", NULL };
	const char		*val[] = { p->conninfo, NULL };
	struct pollfd		 pfd;
	PostgresPollingStatusType st;
	int64_t			 now, deadline;
	int			 r;
	char			 e[256];

	if (pg_load(e, sizeof(e)) == -1) {
		errf(err, errlen, "%s: %s", p->where, e);
		return -1;
	}
	/* The breaker open: refused at once, no round trip.  Once it has
	 * passed, this call is the one that tries. */
	if (p->open_until != 0) {
		if ((now = pg_now_ms()) < p->open_until) {
			errf(err, errlen, "%s: unavailable: %s; not asked "
			    "again for %lld ms", p->where, p->why,
			    (long long)(p->open_until - now));
			return -1;
		}
		p->open_until = 0;
	}
	/* An idle connection has nothing to read unless the server went
	 * away since (a restart leaves its goodbye, or an end of file):
	 * then it is made again now rather than fail the request. */
	if (p->conn != NULL && PQstatus(p->conn) == CONNECTION_OK &&
	    PQtransactionStatus(p->conn) == PQTRANS_IDLE) {
		pfd.fd = PQsocket(p->conn);
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (pfd.fd >= 0 && poll(&pfd, 1, 0) == 0)
			return 0;
	}
	pg_drop(p);
	/* Connected within the deadline, or not at all (libpq's own
	 * connect_timeout applies only to its blocking calls). */
	deadline = pg_now_ms() + p->timeout_ms;
	if ((p->conn = PQconnectStartParams(kw, val, 1)) == NULL ||
	    PQstatus(p->conn) == CONNECTION_BAD)
		goto unreachable;
	for (st = PGRES_POLLING_WRITING; st != PGRES_POLLING_OK;
	    st = PQconnectPoll(p->conn)) {
		if (st == PGRES_POLLING_FAILED)
			goto unreachable;
		if ((r = pg_wait(p, st == PGRES_POLLING_READING ? POLLIN :
		    POLLOUT, deadline)) == 0) {
			pg_trip(p, "connecting", err, errlen);
			return -1;
		}
		if (r == -1)
			goto unreachable;
	}
	/* Writes never block the loop either (pg_run flushes). */
	if (PQsetnonblocking(p->conn, 1) == -1)
		goto unreachable;
	/* Durable before the reply; no statement waits for ever. */
	if (pg_exec(p, "SET synchronous_commit = on;"
	    " SET statement_timeout = '10s';"
	    " SET client_min_messages = warning", err, errlen) == -1)
		goto fail;
	if (!p->schema_ok && p->schema != NULL) {
		if (pg_exec(p, "BEGIN", err, errlen) == -1)
			goto fail;
		if (pg_exec(p, "SELECT pg_advisory_xact_lock(7415001)", err,
		    errlen) == -1 || pg_exec(p, p->schema, err,
		    errlen) == -1 || pg_exec(p, "COMMIT", err, errlen) == -1)
			goto fail;
	}
	p->schema_ok = 1;
	log_debug("connected to %s", p->where);
	return 0;
unreachable:
	errf(err, errlen, "%s: unreachable: %s", p->where, pg_msg(p));
fail:
	pg_drop(p);
	return -1;
}

int
pg_begin(struct pg *p, char *err, size_t errlen)
{
	if (pg_ready(p, err, errlen) == -1)
		return -1;
	if (pg_exec(p, "BEGIN", err, errlen) == 0)
		return 0;
	/* A connection the server dropped since its last use (a restart)
	 * fails here, before anything was asked: one fresh try.  Not after
	 * a deadline: the breaker is open. */
	if (p->conn != NULL && PQstatus(p->conn) != CONNECTION_BAD)
		return -1;
	if (p->open_until != 0)
		return -1;
	pg_drop(p);
	if (pg_ready(p, err, errlen) == -1)
		return -1;
	return pg_exec(p, "BEGIN", err, errlen);
}

PGresult *
pg_params(struct pg *p, const char *sql, int n, const char *const *v,
    const int *lens, const int *fmts, int bin, ExecStatusType want,
    char *err, size_t errlen)
{
	PGresult	*res;

	if ((res = pg_run(p, sql, n < 0 ? 0 : n, v, lens, fmts, bin, err,
	    errlen)) == NULL)
		return NULL;
	if (PQresultStatus(res) != want) {
		errf(err, errlen, "%s: %s", p->where, pg_res_msg(p, res));
		PQclear(res);
		return NULL;
	}
	return res;
}

PGresult *
pg_query(struct pg *p, const char *sql, int n, const char *const *v,
    ExecStatusType want, char *err, size_t errlen)
{
	return pg_params(p, sql, n, v, NULL, NULL, 0, want, err, errlen);
}

int
pg_in_tx(const struct pg *p)
{
	return p->conn != NULL &&
	    PQtransactionStatus(p->conn) == PQTRANS_INTRANS;
}

void
pg_rollback(struct pg *p)
{
	if (p->conn == NULL || PQstatus(p->conn) != CONNECTION_OK) {
		pg_drop(p);
		return;
	}
	/* Within the deadline too; a connection left in a transaction,
	 * or gone, is dropped. */
	(void)pg_exec(p, "ROLLBACK", NULL, 0);
	if (p->conn != NULL &&
	    PQtransactionStatus(p->conn) != PQTRANS_IDLE)
		pg_drop(p);
}
