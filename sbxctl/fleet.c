/*
 * fleet.c: the audit chains of a fleet's hosts in its PostgreSQL
 * database (README "Running a fleet").  Each daemon keeps its own chain
 * on its own disk, durably before it acknowledges anything, as on one
 * host; `sbxctl audit ship` (run on each host by an operator's timer)
 * copies what the daemons' sockets return into sbx_audit, one row a
 * record keyed by (host, daemon, seq), so shipping never touches a
 * daemon's database or delays its commits.  A row is never replaced: a
 * record shipped again must be the same bytes, so a host that ships an
 * altered record, or a second host claiming a name another already
 * ships under (its chains start with other records), is refused and
 * named.  `sbxctl audit verify --fleet` walks every shipped chain from
 * the database alone: each record's hash recomputed, each link to the
 * one before, the sequence without holes from 1, and each chain's last
 * record against the fleet's newest (a host whose chain stopped).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit.h"
#include "log.h"
#include "pg.h"
#include "util.h"
#include "sbxctl.h"

static const char fleet_audit_schema[] =
    "CREATE TABLE IF NOT EXISTS sbx_audit("
    " host text NOT NULL,"
    " daemon text NOT NULL,"
    " seq bigint NOT NULL,"
    " time_ns bigint NOT NULL,"
    " task_id text NOT NULL,"
    " hash bytea NOT NULL,"
    " record bytea NOT NULL,"
    " shipped timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (host, daemon, seq));"
    "CREATE INDEX IF NOT EXISTS sbx_audit_task ON sbx_audit(task_id);";

static struct pg *
fleet_pg(const char *conninfo)
{
	struct pg	*pg;
	char		 err[512];

	if (conninfo == NULL || *conninfo == '\0') {
		log_warnx("no fleet database: set SBX_STORE_CONNINFO (the "
		    "store.conninfo of policyd.yaml)");
		return NULL;
	}
	if (pg_conninfo_ok(conninfo, err, sizeof(err)) == -1) {
		log_warnx("SBX_STORE_CONNINFO: %s", err);
		return NULL;
	}
	pg = pg_new(conninfo, fleet_audit_schema);
	/* An operator's command, not a daemon's loop: a longer deadline
	 * (a page of a chain is one round trip), and no back-off. */
	pg_limits(pg, 30000, 0);
	if (pg_ready(pg, err, sizeof(err)) == -1) {
		log_warnx("%s", err);
		pg_free(pg);
		return NULL;
	}
	return pg;
}

struct fleet_ship {
	struct pg	*pg;
	char		*host;
	size_t		 added, same, bad, pages;
	int		 rc;
};

struct fleet_ship *
fleet_ship_open(const char *conninfo, const char *host, int *rc)
{
	struct fleet_ship	*fs;
	struct pg		*pg;

	if (!name_ok(host)) {
		log_warnx("\"%s\" is not a host name", host);
		*rc = SBXCTL_USAGE;
		return NULL;
	}
	if ((pg = fleet_pg(conninfo)) == NULL) {
		*rc = SBXCTL_UNREACHABLE;
		return NULL;
	}
	fs = xcalloc(1, sizeof(*fs));
	fs->pg = pg;
	fs->host = xstrdup(host);
	fs->rc = SBXCTL_OK;
	return fs;
}

/*
 * Where shipping a daemon's chain resumes: after the record before the
 * last one the fleet holds, so that one comes back first and is compared
 * (a chain reset, or a second host under this name, differs there).
 */
int
fleet_ship_resume(struct fleet_ship *fs, const char *daemon, uint64_t *after)
{
	PGresult	*res;
	const char	*v[2] = { fs->host, daemon };

	*after = 0;
	res = PQexecParams(pg_conn(fs->pg), "SELECT coalesce(max(seq), 0)"
	    " FROM sbx_audit WHERE host = $1 AND daemon = $2", 2, NULL, v,
	    NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_warnx("%s: %s", pg_where(fs->pg), pg_msg(fs->pg));
		PQclear(res);
		fs->rc = SBXCTL_ERR;
		return -1;
	}
	*after = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	if (*after > 0)
		(*after)--;
	return 0;
}

int
fleet_page_check(const char *daemon, uint64_t after, uint32_t limit,
    Sbx__V1__AuditEvent *const *ev, size_t n, char *err, size_t errlen)
{
	if (limit != 0 && n > limit) {
		snprintf(err, errlen, "%s answered %zu records for a page of "
		    "at most %u (a daemon without AuditQuery paging?)",
		    daemon, n, limit);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (strcmp(ev[i]->daemon, daemon) != 0) {
			snprintf(err, errlen, "%s answered a record of \"%s\"",
			    daemon, ev[i]->daemon);
			return -1;
		}
		if (ev[i]->seq != after + 1 + i) {
			snprintf(err, errlen, "%s answered seq %" PRIu64 " where "
			    "seq %" PRIu64 " was next (a daemon without "
			    "AuditQuery paging, or a hole in its chain)",
			    daemon, ev[i]->seq, after + 1 + i);
			return -1;
		}
	}
	return 0;
}

int
fleet_ship_page(struct fleet_ship *fs, const char *daemon,
    Sbx__V1__AuditEvent *const *ev, size_t n)
{
	PGresult	*res;
	char		 seq[24], tns[24];
	const char	*v[7];
	int		 lens[7], fmts[7];
	uint8_t		*buf;
	size_t		 len;

	fs->pages++;
	for (size_t i = 0; i < n; i++) {
		const Sbx__V1__AuditEvent	*e = ev[i];
		int				 k;

		len = sbx__v1__audit_event__get_packed_size(e);
		buf = xmalloc(len + 1);
		sbx__v1__audit_event__pack(e, buf);
		snprintf(seq, sizeof(seq), "%" PRIu64, e->seq);
		snprintf(tns, sizeof(tns), "%" PRId64, e->time_ns);
		memset(lens, 0, sizeof(lens));
		memset(fmts, 0, sizeof(fmts));
		v[0] = fs->host;
		v[1] = daemon;
		v[2] = seq;
		v[3] = tns;
		v[4] = e->task_id;
		v[5] = (const char *)e->hash.data;
		lens[5] = (int)e->hash.len;
		fmts[5] = 1;
		v[6] = (const char *)buf;
		lens[6] = (int)len;
		fmts[6] = 1;
		/* Never replaces a row: what is there is compared below. */
		res = PQexecParams(pg_conn(fs->pg), "WITH ins AS (INSERT INTO"
		    " sbx_audit(host, daemon, seq, time_ns, task_id, hash,"
		    " record) VALUES ($1, $2, $3::bigint, $4::bigint, $5,"
		    " $6::bytea, $7::bytea) ON CONFLICT (host, daemon, seq) DO"
		    " NOTHING RETURNING 1) SELECT (SELECT count(*) FROM ins),"
		    " (SELECT record = $7::bytea FROM sbx_audit WHERE host = $1"
		    " AND daemon = $2 AND seq = $3::bigint)", 7, NULL, v, lens,
		    fmts, 0);
		free(buf);
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			log_warnx("%s: %s", pg_where(fs->pg), pg_msg(fs->pg));
			PQclear(res);
			fs->rc = SBXCTL_ERR;
			return -1;
		}
		k = atoi(PQgetvalue(res, 0, 0));
		if (k == 1)
			fs->added++;
		else if (strcmp(PQgetvalue(res, 0, 1), "t") == 0)
			fs->same++;
		else {
			/* The snapshot of the CTE does not see its own insert,
			 * so a conflict is the one case that reaches here.  A
			 * chain that differs from the fleet's at one record has
			 * diverged: nothing after it is shipped, or a second
			 * host under this name would extend the first's. */
			log_warnx("host %s %s seq %" PRIu64 ": the fleet holds "
			    "a different record under this name and number "
			    "(an altered record, or another host shipping as "
			    "%s): not shipped, nor any later record of %s",
			    fs->host, daemon, e->seq, fs->host, daemon);
			fs->bad++;
			fs->rc = SBXCTL_ERR;
			PQclear(res);
			return 1;
		}
		PQclear(res);
	}
	return 0;
}

void
fleet_ship_fail(struct fleet_ship *fs, int rc)
{
	if (fs->rc == SBXCTL_OK)
		fs->rc = rc;
}

int
fleet_ship_close(struct fleet_ship *fs)
{
	int	 rc = fs->rc;

	printf("host %s: %zu record%s shipped, %zu already there, %zu "
	    "refused (%zu page%s)\n", fs->host, fs->added,
	    fs->added == 1 ? "" : "s", fs->same, fs->bad, fs->pages,
	    fs->pages == 1 ? "" : "s");
	pg_free(fs->pg);
	free(fs->host);
	free(fs);
	return rc;
}

/* One chain's walk; problems printed; the count of them. */
static size_t
fleet_chain(PGresult *res, int from, int to, int64_t newest, int64_t stale,
    FILE *fp)
{
	const char	*host = PQgetvalue(res, from, 0);
	const char	*daemon = PQgetvalue(res, from, 1);
	unsigned char	 h[32], prev[32];
	uint64_t	 want = 1;
	int64_t		 last = 0;
	size_t		 bad = 0;
	int		 have_prev = 0;

	for (int i = from; i < to; i++) {
		uint64_t		 seq = strtoull(PQgetvalue(res, i, 2),
					    NULL, 10);
		Sbx__V1__AuditEvent	*e;

		if (seq != want) {
			fprintf(fp, "  %s %s: missing seq %" PRIu64 "..%"
			    PRIu64 "\n", host, daemon, want, seq - 1);
			bad++;
			have_prev = 0;
		}
		want = seq + 1;
		e = sbx__v1__audit_event__unpack(NULL,
		    (size_t)PQgetlength(res, i, 3),
		    (const uint8_t *)PQgetvalue(res, i, 3));
		if (e == NULL) {
			fprintf(fp, "  %s %s seq %" PRIu64 ": does not "
			    "decode\n", host, daemon, seq);
			bad++;
			have_prev = 0;
			continue;
		}
		if (audit_event_hash(e, h) == -1 || e->hash.len != 32 ||
		    memcmp(h, e->hash.data, 32) != 0 || e->seq != seq ||
		    strcmp(e->daemon, daemon) != 0) {
			fprintf(fp, "  %s %s seq %" PRIu64 ": altered (its "
			    "hash does not match its contents)\n", host,
			    daemon, seq);
			bad++;
		} else if (have_prev && (e->prev_hash.len != 32 ||
		    memcmp(prev, e->prev_hash.data, 32) != 0)) {
			fprintf(fp, "  %s %s seq %" PRIu64 ": broken link "
			    "(prev_hash is not the hash of seq %" PRIu64 ")\n",
			    host, daemon, seq, seq - 1);
			bad++;
		}
		if (e->hash.len == 32) {
			memcpy(prev, e->hash.data, 32);
			have_prev = 1;
		}
		last = e->time_ns;
		sbx__v1__audit_event__free_unpacked(e, NULL);
	}
	if (stale > 0 && newest - last > stale * 1000000000LL) {
		fprintf(fp, "  %s %s: stopped: its last shipped record is "
		    "%" PRId64 " s older than the fleet's newest\n", host,
		    daemon, (int64_t)((newest - last) / 1000000000LL));
		bad++;
	}
	fprintf(fp, "%s %-11s %-11s %" PRIu64 " records\n", bad ? "BAD" :
	    "ok ", host, daemon, want - 1);
	return bad;
}

int
fleet_verify(const char *conninfo, int64_t stale)
{
	struct pg	*pg;
	PGresult	*res;
	int64_t		 newest = 0;
	size_t		 bad = 0, chains = 0;
	int		 i, from, n;

	if ((pg = fleet_pg(conninfo)) == NULL)
		return SBXCTL_UNREACHABLE;
	/* bytea as bytes: the binary result format. */
	res = PQexecParams(pg_conn(pg), "SELECT host, daemon, seq::text,"
	    " record, time_ns::text FROM sbx_audit ORDER BY host, daemon,"
	    " sbx_audit.seq", 0, NULL, NULL, NULL, NULL, 1);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_warnx("%s: %s", pg_where(pg), pg_msg(pg));
		PQclear(res);
		pg_free(pg);
		return SBXCTL_ERR;
	}
	n = PQntuples(res);
	for (i = 0; i < n; i++) {
		int64_t	 t = strtoll(PQgetvalue(res, i, 4), NULL, 10);

		if (t > newest)
			newest = t;
	}
	for (from = 0; from < n; from = i) {
		for (i = from + 1; i < n; i++)
			if (strcmp(PQgetvalue(res, i, 0),
			    PQgetvalue(res, from, 0)) != 0 ||
			    strcmp(PQgetvalue(res, i, 1),
			    PQgetvalue(res, from, 1)) != 0)
				break;
		bad += fleet_chain(res, from, i, newest, stale, stdout);
		chains++;
	}
	PQclear(res);
	pg_free(pg);
	printf("fleet: %zu chain%s, %zu problem%s\n", chains,
	    chains == 1 ? "" : "s", bad, bad == 1 ? "" : "s");
	if (chains == 0)
		log_warnx("no chain has been shipped (sbxctl audit ship)");
	return bad > 0 || chains == 0 ? SBXCTL_ERR : SBXCTL_OK;
}

int
fleet_task(const char *conninfo, const char *task_id,
    Sbx__V1__AuditEvent ***out, size_t *nout)
{
	struct pg	*pg;
	PGresult	*res;
	const char	*v[1] = { task_id };
	int		 n;

	*out = NULL;
	*nout = 0;
	if ((pg = fleet_pg(conninfo)) == NULL)
		return SBXCTL_UNREACHABLE;
	res = PQexecParams(pg_conn(pg), "SELECT host, record FROM sbx_audit"
	    " WHERE task_id = $1 ORDER BY time_ns, host, daemon, seq", 1,
	    NULL, v, NULL, NULL, 1);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_warnx("%s: %s", pg_where(pg), pg_msg(pg));
		PQclear(res);
		pg_free(pg);
		return SBXCTL_ERR;
	}
	n = PQntuples(res);
	*out = xcalloc((size_t)n + 1, sizeof(**out));
	for (int i = 0; i < n; i++) {
		Sbx__V1__AuditEvent	*e;
		char			*d;

		e = sbx__v1__audit_event__unpack(NULL,
		    (size_t)PQgetlength(res, i, 1),
		    (const uint8_t *)PQgetvalue(res, i, 1));
		if (e == NULL)
			continue;
		/* The host goes with the daemon's name: host/daemon. */
		xasprintf(&d, "%.*s/%s", PQgetlength(res, i, 0),
		    PQgetvalue(res, i, 0), e->daemon);
		if (e->daemon != protobuf_c_empty_string)
			free(e->daemon);
		e->daemon = d;
		(*out)[(*nout)++] = e;
	}
	PQclear(res);
	pg_free(pg);
	return SBXCTL_OK;
}

void
fleet_task_free(Sbx__V1__AuditEvent **ev, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sbx__v1__audit_event__free_unpacked(ev[i], NULL);
	free(ev);
}
