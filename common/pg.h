/*
 * pg.h: the fleet's PostgreSQL connection (libpq), as policyd and
 * approvald use it when store.backend is postgresql: one connection
 * made on first use and remade after a failure, each round trip within
 * a deadline and every call refused at once for a back-off after one
 * that passed it (pg_limits), with
 * synchronous_commit on (a commit is durable when it returns), a
 * statement timeout, and the daemon's tables created under an advisory
 * lock (replicas may start together).  The conninfo is never logged: it
 * is known by its host and dbname alone (pg_where), and a password in it
 * is refused (libpq's passfile holds one).
 *
 * libpq is not linked: it and what it brings (GnuTLS, Kerberos, LDAP,
 * p11-kit, about 4 MiB resident) are loaded by pg_load, by their soname
 * alone, only when a store is postgresql, and its calls go through the
 * table below (the PQ* names stay, as macros).  A daemon with its state
 * in SQLite never maps it.
 */
#ifndef SBX_PG_H
#define SBX_PG_H

#include <stddef.h>

#include <libpq-fe.h>	/* its types; the calls are loaded */

/* Debian's libpq5: a soname, never a path from configuration or the
 * environment (the dynamic linker searches its usual directories). */
#define PG_LIB_SONAME	"libpq.so.5"

/* The libpq calls sbx makes: X(return type, name, parameters). */
#define PG_LIB_CALLS(X)							\
	X(void, PQclear, (PGresult *))					\
	X(char *, PQcmdTuples, (PGresult *))				\
	X(PostgresPollingStatusType, PQconnectPoll, (PGconn *))		\
	X(PGconn *, PQconnectStartParams, (const char *const *,		\
	    const char *const *, int))					\
	X(void, PQconninfoFree, (PQconninfoOption *))			\
	X(PQconninfoOption *, PQconninfoParse, (const char *, char **))	\
	X(int, PQconsumeInput, (PGconn *))				\
	X(char *, PQerrorMessage, (const PGconn *))			\
	X(PGresult *, PQexecParams, (PGconn *, const char *, int,	\
	    const Oid *, const char *const *, const int *, const int *,	\
	    int))							\
	X(void, PQfinish, (PGconn *))					\
	X(int, PQflush, (PGconn *))					\
	X(void, PQfreemem, (void *))					\
	X(PGresult *, PQgetResult, (PGconn *))				\
	X(int, PQgetisnull, (const PGresult *, int, int))		\
	X(int, PQgetlength, (const PGresult *, int, int))		\
	X(char *, PQgetvalue, (const PGresult *, int, int))		\
	X(int, PQisBusy, (PGconn *))					\
	X(int, PQntuples, (const PGresult *))				\
	X(char *, PQresultErrorMessage, (const PGresult *))		\
	X(ExecStatusType, PQresultStatus, (const PGresult *))		\
	X(int, PQsendQuery, (PGconn *, const char *))			\
	X(int, PQsendQueryParams, (PGconn *, const char *, int,	\
	    const Oid *, const char *const *, const int *, const int *,	\
	    int))							\
	X(int, PQsetnonblocking, (PGconn *, int))			\
	X(int, PQsocket, (const PGconn *))				\
	X(ConnStatusType, PQstatus, (const PGconn *))			\
	X(PGTransactionStatusType, PQtransactionStatus, (const PGconn *))

#define PG_LIB_FIELD(r, n, a)	r (*n) a;
struct pg_lib {
	PG_LIB_CALLS(PG_LIB_FIELD)
};
#undef PG_LIB_FIELD
extern struct pg_lib pg_lib;

/* A call before pg_load succeeded would follow a NULL pointer: every
 * path to one starts at pg_conninfo_ok or pg_ready, which load. */
#define PQclear(...)			pg_lib.PQclear(__VA_ARGS__)
#define PQcmdTuples(...)		pg_lib.PQcmdTuples(__VA_ARGS__)
#define PQconnectPoll(...)		pg_lib.PQconnectPoll(__VA_ARGS__)
#define PQconnectStartParams(...)	pg_lib.PQconnectStartParams(__VA_ARGS__)
#define PQconninfoFree(...)		pg_lib.PQconninfoFree(__VA_ARGS__)
#define PQconninfoParse(...)		pg_lib.PQconninfoParse(__VA_ARGS__)
#define PQconsumeInput(...)		pg_lib.PQconsumeInput(__VA_ARGS__)
#define PQerrorMessage(...)		pg_lib.PQerrorMessage(__VA_ARGS__)
#define PQexecParams(...)		pg_lib.PQexecParams(__VA_ARGS__)
#define PQfinish(...)			pg_lib.PQfinish(__VA_ARGS__)
#define PQflush(...)			pg_lib.PQflush(__VA_ARGS__)
#define PQfreemem(...)			pg_lib.PQfreemem(__VA_ARGS__)
#define PQgetResult(...)		pg_lib.PQgetResult(__VA_ARGS__)
#define PQgetisnull(...)		pg_lib.PQgetisnull(__VA_ARGS__)
#define PQgetlength(...)		pg_lib.PQgetlength(__VA_ARGS__)
#define PQgetvalue(...)			pg_lib.PQgetvalue(__VA_ARGS__)
#define PQisBusy(...)			pg_lib.PQisBusy(__VA_ARGS__)
#define PQntuples(...)			pg_lib.PQntuples(__VA_ARGS__)
#define PQresultErrorMessage(...)	pg_lib.PQresultErrorMessage(__VA_ARGS__)
#define PQresultStatus(...)		pg_lib.PQresultStatus(__VA_ARGS__)
#define PQsendQuery(...)		pg_lib.PQsendQuery(__VA_ARGS__)
#define PQsendQueryParams(...)		pg_lib.PQsendQueryParams(__VA_ARGS__)
#define PQsetnonblocking(...)		pg_lib.PQsetnonblocking(__VA_ARGS__)
#define PQsocket(...)			pg_lib.PQsocket(__VA_ARGS__)
#define PQstatus(...)			pg_lib.PQstatus(__VA_ARGS__)
#define PQtransactionStatus(...)	pg_lib.PQtransactionStatus(__VA_ARGS__)

/* libpq loaded (once a process; never unloaded): 0, or -1 with err
 * naming the library and why it could not be loaded. */
int		 pg_load(char *err, size_t errlen);
/* The same with another soname: for the tests of the failure only. */
int		 pg_load_soname(const char *soname, char *err, size_t errlen);
/* 1 once pg_load succeeded. */
int		 pg_loaded(void);

struct ydoc;
struct ynode;

/* Each round trip's deadline, and the back-off after one passed it. */
#define PG_TIMEOUT_MS	2000
#define PG_RETRY_MS	1000

/* store: {backend: sqlite | postgresql, conninfo: STRING, host: NAME,
 * timeout_ms: N, retry_ms: N}. */
struct pg_store {
	int	 pg;		/* backend postgresql */
	char	*conninfo;
	char	*host;		/* this replica's name in the fleet */
	int	 timeout_ms;	/* each round trip's deadline */
	int	 retry_ms;	/* refuse at once for this long after one */
};

void		 pg_store_parse(struct ydoc *, const struct ynode *,
		    struct pg_store *);
void		 pg_store_free(struct pg_store *);
/* conninfo parses and holds no password.  0 or -1 with err. */
int		 pg_conninfo_ok(const char *conninfo, char *err,
		    size_t errlen);

struct pg;

/* schema: SQL run once a process, in a transaction, under the lock. */
struct pg	*pg_new(const char *conninfo, const char *schema);
void		 pg_free(struct pg *);
/* Each round trip (connecting, a statement) within timeout_ms, or the
 * connection is dropped and every call refused at once for retry_ms
 * (doubling while the probe after it fails; 0: no back-off).  A value
 * <= 0 for timeout_ms, < 0 for retry_ms, keeps the default. */
void		 pg_limits(struct pg *, int timeout_ms, int retry_ms);
/* "the fleet database (host H, dbname D)". */
const char	*pg_where(const struct pg *);
/* A working connection, idle, made here if need be: 0, or -1 with err. */
int		 pg_ready(struct pg *, char *err, size_t errlen);
PGconn		*pg_conn(struct pg *);
/* pg_ready, then BEGIN; a connection the server dropped while idle is
 * made again once.  0 or -1 with err. */
int		 pg_begin(struct pg *, char *err, size_t errlen);
/* One statement (or several, without parameters).  0 or -1 with err. */
int		 pg_exec(struct pg *, const char *sql, char *err,
		    size_t errlen);
/* PQexecParams, text parameters and results; NULL with err unless the
 * status is want. */
PGresult	*pg_query(struct pg *, const char *sql, int n,
		    const char *const *v, ExecStatusType want, char *err,
		    size_t errlen);
/* pg_query with binary parameters where fmts says so (lens their
 * lengths), and binary results if bin. */
PGresult	*pg_params(struct pg *, const char *sql, int n,
		    const char *const *v, const int *lens, const int *fmts,
		    int bin, ExecStatusType want, char *err, size_t errlen);
/* Inside a transaction that has not failed. */
int		 pg_in_tx(const struct pg *);
/* End a failed transaction, dropping a connection that cannot. */
void		 pg_rollback(struct pg *);
/* libpq's last message, one line. */
const char	*pg_msg(struct pg *);

#endif
