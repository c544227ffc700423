/*
 * trace.h: the W3C Trace Context `traceparent` an orchestrator may send
 * with a task.  sbx creates no spans: it checks the value, carries it onto
 * the execution's audit records and log lines, and returns it unchanged.
 */
#ifndef SBX_TRACE_H
#define SBX_TRACE_H

#include <stddef.h>

/* version "-" trace-id "-" parent-id "-" flags: 2+1+32+1+16+1+2. */
#define TRACE_PARENT_LEN	55

/*
 * 0 if s is "" (none) or a valid traceparent, else -1 with err saying
 * what is wrong, for the caller to prefix with the field's name (err
 * quotes nothing of s but its length and offsets, so it is safe to log
 * and to send back).
 */
int	 trace_parent_check(const char *s, char *err, size_t errlen);

#endif
