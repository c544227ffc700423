/*
 * util.h: small helpers shared by every program: time, hex, safe names,
 * and allocation that cannot fail silently.
 */
#ifndef SBX_UTIL_H
#define SBX_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "errf.h"	/* errf, which lives apart: plain libc */
#include "name.h"	/* name_ok, which lives apart: plain libc */

int64_t	 now_ns(void);		/* CLOCK_REALTIME in nanoseconds */
int64_t	 now_s(void);
uint64_t mono_ns(void);		/* CLOCK_MONOTONIC */
void	 hex_encode(const unsigned char *, size_t, char *out); /* 2n+1 */
void	 sha256_buf(const void *, size_t, unsigned char out[32]);
extern int (*sha256_accel)(const void *, size_t, unsigned char [32]);
/* sha256.c: sha256_buf uses OpenSSL's SHA-256 from now on (call before
 * any thread starts); 0, or -1 (libsodium's stays) if it cannot be had. */
int	 sha256_use_openssl(void);
/* sha256.c: OpenSSL's SHA-256 piecewise (files, several parts), without
 * initialising OpenSSL.  sha256_new: NULL on failure; update and final:
 * 0 or -1; final and free release it. */
struct sha256;
struct sha256	*sha256_new(void);
int		 sha256_update(struct sha256 *, const void *, size_t);
int		 sha256_final(struct sha256 *, unsigned char out[32]);
void		 sha256_free(struct sha256 *);
void	*xmalloc(size_t);
void	*xcalloc(size_t, size_t);
void	*xreallocarray(void *, size_t, size_t);
char	*xstrdup(const char *);
int	 xasprintf(char **, const char *, ...)
	    __attribute__((format(printf, 2, 3)));
/* snprintf for paths and messages without a truncation warning: a result
 * cut short is still NUL-terminated (a path that does not fit then fails
 * its open), and the length it wanted is returned for who checks. */
int	 bufprintf(char *buf, size_t len, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));
/* Write all of buf to fd, across short writes and EINTR; 0 or -1. */
/* Free a malloc'd vector of n malloc'd strings (NULL is fine). */
void	 strv_free(char **, size_t);
int	 write_all(int fd, const void *buf, size_t len);
/* Read a whole file of at most max bytes; malloc'd, NUL-terminated. */
char	*read_file(const char *path, size_t max, size_t *lenp);
/* A random identifier "<prefix>-<24 hex>" from libsodium. */
void	 random_id(const char *prefix, char *out, size_t outlen);
/*
 * A library loaded on demand, by its soname (never a path from the
 * configuration or the environment): dlopen it RTLD_NOW | RTLD_LOCAL
 * and find each of names[0..n-1] into syms[].  The handle, or NULL with
 * err "cannot load SONAME WHAT: <dlerror>" or "SONAME has no NAME:
 * NOTIT" (e.g. what "(Debian's libidn2-0), which ... need", notit "not
 * libidn2").
 */
void	*dl_syms(const char *soname, const char *what, const char *notit,
	    const char *const *names, void **syms, size_t n, char *err,
	    size_t errlen);

#endif
