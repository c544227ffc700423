/*
 * log.h: the one logging API of every sbx program.  Messages go to stderr
 * while a program runs in the foreground and to syslog (journald) once it
 * has daemonised.  Never pass a secret to these functions.
 */
#ifndef SBX_LOG_H
#define SBX_LOG_H

#include <stdarg.h>

void	log_init(const char *progname, int foreground, int verbose);
void	log_setverbose(int verbose);
int	log_getverbose(void);
void	log_foreground(int foreground);
void	log_warn(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_warnx(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_info(const char *, ...) __attribute__((format(printf, 1, 2)));
void	log_debug(const char *, ...) __attribute__((format(printf, 1, 2)));
void	fatal(const char *, ...)
	    __attribute__((format(printf, 1, 2), noreturn));
void	fatalx(const char *, ...)
	    __attribute__((format(printf, 1, 2), noreturn));

#endif
