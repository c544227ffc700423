/*
 * queue_pg.c: approvald's queue in the fleet's PostgreSQL database
 * (store: {backend: postgresql} in approvald.yaml), so that every
 * approvald of a fleet shows the same requests and a request is decided
 * once, at whichever host.  The audit log stays this host's own
 * (queue.c, SQLite): a queue change and its record are made in the order
 * local audit transaction open, database statement committed (durably:
 * synchronous_commit on), local audit committed, and only then is
 * anything acknowledged.
 *
 * Invariant: a request is pending exactly while it has no row in
 * sbx_approval_decisions, and that row is inserted once (its primary
 * key): two approvers at two hosts cannot both decide one request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "pg.h"
#include "util.h"
#include "approvald/approvald.h"

const char aqueue_pg_schema[] =
    "CREATE TABLE IF NOT EXISTS sbx_approval_requests("
    " seq bigserial,"
    " request_id text PRIMARY KEY,"
    " task_id text NOT NULL,"
    " received_ns bigint NOT NULL,"
    " body bytea NOT NULL,"
    " host text NOT NULL);"
    "CREATE TABLE IF NOT EXISTS sbx_approval_decisions("
    " request_id text PRIMARY KEY"
    "  REFERENCES sbx_approval_requests(request_id),"
    " status integer NOT NULL,"
    " reason text NOT NULL,"
    " approver text NOT NULL,"
    " policy_hash text NOT NULL,"
    " decided_at bigint NOT NULL,"
    " host text NOT NULL);";

#define AQPG_SELECT \
	"SELECT r.request_id, r.body, d.status::text, d.reason, d.approver," \
	" d.policy_hash, d.decided_at::text FROM sbx_approval_requests r" \
	" LEFT JOIN sbx_approval_decisions d ON d.request_id = r.request_id "

static char *
aqpg_str(PGresult *res, int row, int col)
{
	int	 n = PQgetlength(res, row, col);
	char	*s = xmalloc((size_t)n + 1);

	memcpy(s, PQgetvalue(res, row, col), (size_t)n);
	s[n] = '\0';
	return s;
}

/* Row row of an AQPG_SELECT result (binary), or -1 if it does not decode. */
static int
aqpg_row(PGresult *res, int row, Sbx__V1__CapabilityRequest **req,
    Sbx__V1__CapabilityDecision **dec)
{
	Sbx__V1__CapabilityDecision	*d;
	char				*s;

	*dec = NULL;
	*req = sbx__v1__capability_request__unpack(NULL,
	    (size_t)PQgetlength(res, row, 1),
	    (const uint8_t *)PQgetvalue(res, row, 1));
	if (*req == NULL)
		return -1;
	d = xmalloc(sizeof(*d));
	sbx__v1__capability_decision__init(d);
	d->request_id = aqpg_str(res, row, 0);
	if (PQgetisnull(res, row, 2)) {
		d->status = SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING;
		d->reason = xstrdup("");
		d->approver = xstrdup("");
		d->policy_hash = xstrdup("");
	} else {
		s = aqpg_str(res, row, 2);
		d->status = (Sbx__V1__CapabilityStatus)atoi(s);
		free(s);
		d->reason = aqpg_str(res, row, 3);
		d->approver = aqpg_str(res, row, 4);
		d->policy_hash = aqpg_str(res, row, 5);
		s = aqpg_str(res, row, 6);
		d->decided_at = strtoll(s, NULL, 10);
		free(s);
	}
	*dec = d;
	return 0;
}

/* pg_ready, its message saying what could not be done. */
static int
aqpg_ready(struct pg *pg, const char *what, char *err, size_t errlen)
{
	char	 e[400];

	if (pg_ready(pg, e, sizeof(e)) == 0)
		return 0;
	errf(err, errlen, "the queue cannot be %s: %s", what, e);
	return -1;
}

/*
 * sql with its n parameters (lens and fmts as PQexecParams has them;
 * NULL: all text), results in binary if binary, after aqpg_ready: the
 * result if its status is want, else NULL with err saying what could
 * not be done and the transaction rolled back.
 */
static PGresult *
aqpg_exec(struct pg *pg, const char *what, const char *sql, int n,
    const char *const *v, const int *lens, const int *fmts, int binary,
    ExecStatusType want, char *err, size_t errlen)
{
	PGresult	*res;
	char		 e[400];

	if (aqpg_ready(pg, what, err, errlen) == -1)
		return NULL;
	/* pg_params: within the store's deadline (common/pg.c). */
	if ((res = pg_params(pg, sql, n, v, lens, fmts, binary, want, e,
	    sizeof(e))) != NULL)
		return res;
	errf(err, errlen, "the queue cannot be %s: %s", what, e);
	pg_rollback(pg);
	return NULL;
}

/* An INSERT ... ON CONFLICT DO NOTHING's outcome, res freed: 1 if it
 * made its row, 0 if the row was there already. */
static int
aqpg_inserted(PGresult *res)
{
	int	 n = atoi(PQcmdTuples(res));

	PQclear(res);
	return n == 1 ? 1 : 0;
}

int
aqueue_pg_add(struct pg *pg, const char *host,
    const Sbx__V1__CapabilityRequest *r, const uint8_t *body, size_t len,
    char *err, size_t errlen)
{
	PGresult	*res;
	char		 when[24];
	const char	*v[5];
	int		 lens[5] = { 0 }, fmts[5] = { 0 };

	snprintf(when, sizeof(when), "%lld", (long long)now_ns());
	v[0] = r->request_id;
	v[1] = r->task_id;
	v[2] = when;
	v[3] = (const char *)body;
	lens[3] = (int)len;
	fmts[3] = 1;
	v[4] = host;
	if ((res = aqpg_exec(pg, "written", "INSERT INTO sbx_approval_requests("
	    "request_id, task_id, received_ns, body, host) VALUES ($1, $2,"
	    " $3::bigint, $4::bytea, $5) ON CONFLICT (request_id) DO NOTHING",
	    5, v, lens, fmts, 0, PGRES_COMMAND_OK, err, errlen)) == NULL)
		return -1;
	return aqpg_inserted(res);
}

int
aqueue_pg_get(struct pg *pg, const char *request_id,
    Sbx__V1__CapabilityRequest **req, Sbx__V1__CapabilityDecision **dec,
    char *err, size_t errlen)
{
	PGresult	*res;
	const char	*v[1] = { request_id };
	int		 rc;

	*req = NULL;
	*dec = NULL;
	if ((res = aqpg_exec(pg, "read", AQPG_SELECT "WHERE r.request_id = $1",
	    1, v, NULL, NULL, 1, PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	if (PQntuples(res) == 0)
		rc = 0;
	else if (aqpg_row(res, 0, req, dec) == -1) {
		snprintf(err, errlen, "request %s cannot be read from the "
		    "queue", request_id);
		aqueue_item_free(*req, *dec);
		*req = NULL;
		*dec = NULL;
		rc = -1;
	} else
		rc = 1;
	PQclear(res);
	return rc;
}

int
aqueue_pg_decide(struct pg *pg, const char *host,
    const Sbx__V1__CapabilityDecision *d, char *err, size_t errlen)
{
	PGresult	*res;
	char		 st[16], when[24];
	const char	*v[7];

	if (aqpg_ready(pg, "written", err, errlen) == -1)
		return -1;
	snprintf(st, sizeof(st), "%d", (int)d->status);
	snprintf(when, sizeof(when), "%lld", (long long)d->decided_at);
	v[0] = d->request_id;
	v[1] = st;
	v[2] = d->reason != NULL ? d->reason : "";
	v[3] = d->approver;
	v[4] = d->policy_hash != NULL ? d->policy_hash : "";
	v[5] = when;
	v[6] = host;
	if ((res = pg_query(pg, "INSERT INTO sbx_approval_decisions("
	    "request_id, status, reason, approver, policy_hash, decided_at,"
	    " host) VALUES ($1, $2::integer, $3, $4, $5, $6::bigint, $7)"
	    " ON CONFLICT (request_id) DO NOTHING", 7, v, PGRES_COMMAND_OK,
	    err, errlen)) == NULL) {
		pg_rollback(pg);
		return -1;
	}
	return aqpg_inserted(res);
}

int
aqueue_pg_list(struct pg *pg, int pending_only, Sbx__V1__ApprovalItems *it,
    char *err, size_t errlen)
{
	Sbx__V1__CapabilityRequest	*r;
	Sbx__V1__CapabilityDecision	*d;
	PGresult			*res;
	size_t				 cap = 0;

	sbx__v1__approval_items__init(it);
	if ((res = aqpg_exec(pg, "read", pending_only ?
	    AQPG_SELECT "WHERE d.request_id IS NULL ORDER BY r.seq" :
	    AQPG_SELECT "ORDER BY r.seq", 0, NULL, NULL, NULL, 1,
	    PGRES_TUPLES_OK, err, errlen)) == NULL)
		return -1;
	for (int i = 0; i < PQntuples(res); i++) {
		if (aqpg_row(res, i, &r, &d) == -1) {
			/* One damaged row must not hide the others. */
			log_warnx("queue: a request in %s does not decode; "
			    "skipped", pg_where(pg));
			aqueue_item_free(r, NULL);
			continue;
		}
		aqueue_append(it, &cap, r, d);
	}
	PQclear(res);
	return 0;
}
