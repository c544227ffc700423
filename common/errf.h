/*
 * errf.h: a sentence into a caller's error buffer.  Plain libc (no
 * allocation, no logging), so that launchd-sbx's root monitor, which
 * links nothing else, reports its errors by the same helper as every
 * daemon.
 */
#ifndef SBX_ERRF_H
#define SBX_ERRF_H

#include <stdarg.h>
#include <stddef.h>

/* snprintf into err[len], cut at len; nothing when err is NULL or len 0
 * (a caller that does not want the reason passes NULL). */
void	 errf(char *err, size_t len, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
void	 verrf(char *err, size_t len, const char *fmt, va_list)
	    __attribute__((format(printf, 3, 0)));

#endif
