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
 */
#ifndef SBX_PG_H
#define SBX_PG_H

#include <stddef.h>

#include <libpq-fe.h>

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
