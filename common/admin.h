/*
 * admin.h: the answers every daemon's admin socket gives the same way:
 * its audit records for a task, a walk of its audit chain, and its metrics
 * in the Prometheus text format.  `sbxctl audit` and `sbxctl metrics` rely
 * on every daemon answering these alike.
 */
#ifndef SBX_ADMIN_H
#define SBX_ADMIN_H

#include "sbx/v1/envelope.pb-c.h"

struct audit;
struct frame_conn;

/* req carries audit_query: reply audit_records, or ERROR_INTERNAL. */
void	admin_audit_query(struct frame_conn *, const Sbx__V1__Envelope *req,
	    struct audit *);
/*
 * How many of v[0..n) fit one reply frame of at most max bytes, oldest
 * first: a page of a chain (AuditQuery.chain) is cut there, never sent
 * larger than the daemon's own max_frame_kb.
 */
size_t	admin_audit_fit(Sbx__V1__AuditEvent *const *v, size_t n, size_t max);
/* The limit to read a query with: a chain page's at most what one frame
 * can hold, so a page of a long chain never reads it all. */
uint32_t admin_audit_limit(struct frame_conn *, const Sbx__V1__AuditQuery *);
/* AuditQuery.chain: *n cut to what fits one frame, 0; or, when the first
 * record alone does not fit, the error sent and 1. */
int	admin_audit_page(struct frame_conn *, const Sbx__V1__Envelope *req,
	    Sbx__V1__AuditEvent *const *v, size_t *n);
/* Reply audit_verified (daemon names the log when the walk did not). */
void	admin_audit_verify(struct frame_conn *, const Sbx__V1__Envelope *req,
	    struct audit *, const char *daemon);
/* Reply metrics with text (the caller keeps text). */
void	admin_metrics(struct frame_conn *, const Sbx__V1__Envelope *req,
	    const char *text);
/* Refuse a message the admin socket does not take (ERROR_UNEXPECTED). */
void	admin_refuse(struct frame_conn *, const Sbx__V1__Envelope *req);

#endif
