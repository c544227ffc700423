/*
 * pg.c: the PostgreSQL connection policyd and approvald share when the
 * state of a fleet lives there (pg.h).  Fail closed: any failure is an
 * error to the caller, which refuses what it was asked; the next call
 * connects again, so a daemon recovers when the database does, without
 * a restart.  Never logs the conninfo (it may name a passfile, a user,
 * an application name): only its host and dbname.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"
#include "yaml.h"
#include "pg.h"

struct pg {
	char		*conninfo;
	const char	*schema;
	char		 where[256];
	PGconn		*conn;
	int		 schema_ok;
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

int
pg_conninfo_ok(const char *conninfo, char *err, size_t errlen)
{
	PQconninfoOption	*o, *p;
	char			*msg = NULL;
	size_t			 n;

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
	NULL };

void
pg_store_parse(struct ydoc *doc, const struct ynode *n, struct pg_store *s)
{
	const char	*b = NULL, *ci = NULL, *h = NULL;
	char		 err[256], hn[256];
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
	if (ci == NULL) {
		yerr(doc, n, "store.conninfo", "backend postgresql needs "
		    "conninfo");
		bad = 1;
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

	snprintf(p->where, sizeof(p->where), "the fleet database");
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
	pg_where_set(p);
	return p;
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

	res = PQexec(p->conn, sql);
	ok = PQresultStatus(res) == PGRES_COMMAND_OK ||
	    PQresultStatus(res) == PGRES_TUPLES_OK;
	if (!ok)
		errf(err, errlen, "%s: %s", p->where, pg_msg(p));
	PQclear(res);
	return ok ? 0 : -1;
}

int
pg_ready(struct pg *p, char *err, size_t errlen)
{
	const char	*kw[] = { "connect_timeout", "dbname", NULL };
	const char	*val[] = { "5", p->conninfo, NULL };
	struct pollfd	 pfd;

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
	if (p->conn != NULL) {
		PQfinish(p->conn);
		p->conn = NULL;
	}
	/* conninfo's own connect_timeout, if any, wins: it comes later. */
	p->conn = PQconnectdbParams(kw, val, 1);
	if (p->conn == NULL || PQstatus(p->conn) != CONNECTION_OK) {
		errf(err, errlen, "%s: unreachable: %s", p->where,
		    pg_msg(p));
		if (p->conn != NULL)
			PQfinish(p->conn);
		p->conn = NULL;
		return -1;
	}
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
fail:
	PQfinish(p->conn);
	p->conn = NULL;
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
	 * fails here, before anything was asked: one fresh try. */
	if (PQstatus(p->conn) != CONNECTION_BAD)
		return -1;
	PQfinish(p->conn);
	p->conn = NULL;
	if (pg_ready(p, err, errlen) == -1)
		return -1;
	return pg_exec(p, "BEGIN", err, errlen);
}

PGresult *
pg_query(struct pg *p, const char *sql, int n, const char *const *v,
    ExecStatusType want, char *err, size_t errlen)
{
	PGresult	*res;

	res = PQexecParams(p->conn, sql, n, NULL, v, NULL, NULL, 0);
	if (PQresultStatus(res) != want) {
		errf(err, errlen, "%s: %s", p->where, pg_msg(p));
		PQclear(res);
		return NULL;
	}
	return res;
}

void
pg_rollback(struct pg *p)
{
	PGresult	*res;

	if (p->conn == NULL || PQstatus(p->conn) != CONNECTION_OK) {
		if (p->conn != NULL)
			PQfinish(p->conn);
		p->conn = NULL;
		return;
	}
	res = PQexec(p->conn, "ROLLBACK");
	PQclear(res);
	if (PQtransactionStatus(p->conn) != PQTRANS_IDLE) {
		PQfinish(p->conn);
		p->conn = NULL;
	}
}
