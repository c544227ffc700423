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
/* Reply audit_verified (daemon names the log when the walk did not). */
void	admin_audit_verify(struct frame_conn *, const Sbx__V1__Envelope *req,
	    struct audit *, const char *daemon);
/* Reply metrics with text (the caller keeps text). */
void	admin_metrics(struct frame_conn *, const Sbx__V1__Envelope *req,
	    const char *text);
/* Refuse a message the admin socket does not take (ERROR_UNEXPECTED). */
void	admin_refuse(struct frame_conn *, const Sbx__V1__Envelope *req);

#endif
