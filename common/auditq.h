/*
 * auditq.h: group commit of audit records on a writer thread, for a
 * daemon whose event loop must not wait on fsync.  Records are queued
 * with a callback; one thread commits everything queued so far in one
 * transaction (common/audit.c, synchronous=FULL) while the loop goes on,
 * and each callback runs on the loop only after the commit that holds
 * its records has returned.  A daemon acknowledges the action a record
 * describes from that callback, never before: the record is on disk
 * first (DESIGN.md, "Audit"; invariant 6).
 *
 * The log is the writer's while a batch is in flight and the loop's
 * otherwise: auditq_sync() waits for the writer and commits what is
 * queued, after which the loop may use the log directly (a synchronous
 * audit_append, a query, a verify) until it returns to the event loop.
 */
#ifndef SBX_AUDITQ_H
#define SBX_AUDITQ_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/v1/audit.pb-c.h"

struct event_base;
struct audit;
struct auditq;
struct auditq_entry;

/* ok: 1 once the entry's records are on disk, 0 if their batch failed
 * (it was rolled back: none of its records is in the log). */
typedef void	(*auditq_cb)(int ok, void *arg);

/* The log stays the caller's; auditq_free() before audit_close(). */
struct auditq	*auditq_new(struct event_base *, struct audit *, char *err,
		    size_t errlen);
/* Commit what is queued and run the callbacks that are left, now (a
 * shutdown); what they queue is the next batch, committed from the loop
 * or by the next flush. */
void		 auditq_flush(struct auditq *);
/* Commit what is queued, run the callbacks that are left, stop the
 * writer, free. */
void		 auditq_free(struct auditq *);
/*
 * Queue copies of n events (task_id, execution_id, policy_hash, action,
 * rule, detail, actor; time_ns is now unless set) to commit together, in
 * the order of the calls.  cb (may be NULL) runs on the loop after the
 * commit, never from inside auditq_add.  The entry is valid until its
 * callback has run.
 */
struct auditq_entry *auditq_add(struct auditq *,
		    const Sbx__V1__AuditEvent *const *evs, size_t n,
		    auditq_cb cb, void *arg);
/* The entry's records are still committed; its callback will not run. */
void		 auditq_cancel(struct auditq_entry *);
/* Wait for the writer and commit what is queued on the calling thread
 * (the callbacks run later, from the loop); the log is then the
 * caller's until it returns to the loop. */
struct audit	*auditq_sync(struct auditq *);
/* Counters: transactions committed, records in them, batches failed. */
void		 auditq_stats(const struct auditq *, uint64_t *commits,
		    uint64_t *records, uint64_t *failed);

#endif
