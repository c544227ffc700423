/*
 * errf.c: the error-buffer helper (errf.h).  Apart from util.c, which
 * needs libsodium and OpenSSL, so that the root monitor links it too.
 */
#include <stdarg.h>
#include <stdio.h>

#include "errf.h"

void
verrf(char *err, size_t len, const char *fmt, va_list ap)
{
	if (err == NULL || len == 0)
		return;
	(void)vsnprintf(err, len, fmt, ap);
}

void
errf(char *err, size_t len, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	verrf(err, len, fmt, ap);
	va_end(ap);
}
