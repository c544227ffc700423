/*
 * log.h: the one logging API of every sbx program.  Messages go to stderr
 * while a program runs in the foreground and to syslog once it has
 * daemonised; under systemd (log.c) to journald with structured fields.
 * Never pass a secret to these functions.
 */
#ifndef SBX_LOG_H
#define SBX_LOG_H

#include <stdarg.h>

struct iovec;

/*
 * Lines go to journald under systemd only through a sender handed over
 * here (sd_journal_sendv), before log_init; without one, never.
 */
void	log_journal_sender(int (*)(const struct iovec *, int));
void	log_init(const char *progname, int foreground, int verbose);
void	log_setverbose(int verbose);
int	log_getverbose(void);
void	log_foreground(int foreground);
void	log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
/*
 * The execution the next log lines are about: each line carries its task
 * and execution ids, policy hash and traceparent (those not NULL or "")
 * as " [task=... execution=... policy=... traceparent=...]" and, to
 * journald, as SBX_TASK_ID, SBX_EXECUTION_ID, SBX_POLICY_HASH and
 * SBX_TRACEPARENT.  Set it where an event loop callback starts on one
 * execution and clear it where it ends.  log_ctx_rule names the rule of
 * the next line only (SBX_RULE, " rule=").
 */
void	log_ctx_set(const char *task_id, const char *execution_id,
	    const char *policy_hash, const char *traceparent);
void	log_ctx_rule(const char *rule);
void	log_ctx_clear(void);
/* The context's traceparent if it is about task_id, else "". */
const char *log_ctx_traceparent(const char *task_id);
void	fatal(const char *, ...)
	    __attribute__((format(printf, 1, 2), noreturn));
void	fatalx(const char *, ...)
	    __attribute__((format(printf, 1, 2), noreturn));

#endif
