/*
 * audit.h: each daemon's append-only, hash-chained audit log in SQLite
 * (WAL, synchronous=FULL).  Record n stores the hash of record n-1; its own
 * hash is SHA-256 of the canonical encoding of the event with hash empty
 * (prev_hash is a field of it, so inside what is hashed; proto/README.md).
 * UPDATE and DELETE are refused by triggers; audit_verify() detects a
 * record that was changed, inserted or deleted anyway.  A commit
 * has returned only once the record is on disk: callers acknowledge the
 * action it records after that, never before.
 */
#ifndef SBX_AUDIT_H
#define SBX_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/v1/audit.pb-c.h"

struct sqlite3;
struct audit;

/* Open (creating) a database file just for the log. */
struct audit	*audit_open(const char *path, const char *daemon,
		    char *err, size_t errlen);
/* Keep the log in a database the daemon already has open, so a record and
 * the state change it describes commit in one transaction.  The handle
 * stays the caller's, but the log sets its commit and rollback hooks
 * (SQLite keeps one of each per handle), so the caller sets none. */
struct audit	*audit_open_db(struct sqlite3 *, const char *daemon,
		    char *err, size_t errlen);
void		 audit_close(struct audit *);

/* Group commit: begin, add any number of events (and the caller's own
 * statements on the same handle), commit once.  Inside such a
 * transaction an add is a single INSERT and the head moves at commit;
 * do not roll back to a savepoint taken before an add. */
int		 audit_begin(struct audit *);
/* Fills seq, time_ns (if 0), daemon, prev_hash and hash. 0 or -1.
 * Outside a transaction the add commits on its own.  On success daemon,
 * prev_hash and hash are malloc'd copies the caller frees with
 * audit_event_clear (their previous values are not freed); on failure
 * the event is untouched. */
int		 audit_add(struct audit *, Sbx__V1__AuditEvent *);
void		 audit_event_clear(Sbx__V1__AuditEvent *);
int		 audit_commit(struct audit *);
int		 audit_rollback(struct audit *);
/* begin + add + commit; as audit_add, free with audit_event_clear. */
int		 audit_append(struct audit *, Sbx__V1__AuditEvent *);

/* Events of one task (all if task_id is NULL or ""), oldest first, at
 * most limit (0: no limit).  *out is a malloc'd array of unpacked events;
 * free with audit_events_free. */
int		 audit_query(struct audit *, const char *task_id, uint32_t limit,
		    Sbx__V1__AuditEvent ***out, size_t *n);
/* As audit_query, only records with seq > after_seq (a page). */
int		 audit_query_after(struct audit *, const char *task_id,
		    uint64_t after_seq, uint32_t limit,
		    Sbx__V1__AuditEvent ***out, size_t *n);
void		 audit_events_free(Sbx__V1__AuditEvent **, size_t);

/* Walk the whole chain.  Fills ok, records, first_bad_seq, problem and
 * daemon (malloc'd strings; free with audit_verify_clear). 0 if the walk
 * ran. */
int		 audit_verify(struct audit *, Sbx__V1__AuditVerifyReply *);
void		 audit_verify_clear(Sbx__V1__AuditVerifyReply *);

/* Hash of one event (prev_hash included, hash field ignored). */
int		 audit_event_hash(const Sbx__V1__AuditEvent *,
		    unsigned char out[32]);

#endif
