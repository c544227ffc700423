/*
 * util.c: helpers every program shares.  Allocation failures are fatal:
 * a daemon that cannot allocate cannot keep its promises, so it stops
 * rather than continuing in a state nobody tested.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "log.h"
#include "util.h"

int64_t
now_ns(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t
now_s(void)
{
	return (int64_t)time(NULL);
}

uint64_t
mono_ns(void)
{
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* Set by sha256_use_openssl() (sha256.c); NULL: libsodium's. */
int	(*sha256_accel)(const void *, size_t, unsigned char [32]);

/*
 * SHA-256 of buf.  libsodium's portable code unless the program chose
 * OpenSSL's (sha256_use_openssl(): the CPU's SHA extensions, about five
 * times faster on a policy of a kilobyte) at start-up.  Only the daemons
 * that load libcrypto anyway or hash at a high rate make that choice:
 * fetching a digest initialises OpenSSL (its configuration file, the
 * default provider's tables), about 2 MiB resident in each process, and
 * referencing it at all links libcrypto (1.4 MiB more).  The digest is
 * the same function either way, so no hash written or checked anywhere
 * differs.
 */
void
sha256_buf(const void *buf, size_t len, unsigned char out[32])
{
	if (sha256_accel != NULL && sha256_accel(buf, len, out) == 0)
		return;
	crypto_hash_sha256(out, buf, len);
}

void
hex_encode(const unsigned char *in, size_t n, char *out)
{
	static const char	 digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 0xf];
	}
	out[2 * n] = '\0';
}

void *
xmalloc(size_t n)
{
	void	*p = malloc(n == 0 ? 1 : n);

	if (p == NULL)
		fatal("malloc");
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void	*p = calloc(nmemb == 0 ? 1 : nmemb, size == 0 ? 1 : size);

	if (p == NULL)
		fatal("calloc");
	return p;
}

void *
xreallocarray(void *ptr, size_t nmemb, size_t size)
{
	void	*p = reallocarray(ptr, nmemb == 0 ? 1 : nmemb,
	    size == 0 ? 1 : size);

	if (p == NULL)
		fatal("reallocarray");
	return p;
}

char *
xstrdup(const char *s)
{
	char	*p = strdup(s);

	if (p == NULL)
		fatal("strdup");
	return p;
}

int
xasprintf(char **ret, const char *fmt, ...)
{
	va_list	 ap;
	int	 n;

	va_start(ap, fmt);
	n = vasprintf(ret, fmt, ap);
	va_end(ap);
	if (n < 0)
		fatal("asprintf");
	return n;
}

int
write_all(int fd, const void *buf, size_t len)
{
	const unsigned char	*p = buf;
	ssize_t			 w;

	while (len > 0) {
		if ((w = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

char *
read_file(const char *path, size_t max, size_t *lenp)
{
	struct stat	 st;
	char		*buf;
	size_t		 len = 0;
	ssize_t		 r;
	int		 fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1)
		return NULL;
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return NULL;
	}
	if ((size_t)st.st_size > max) {
		close(fd);
		errno = EFBIG;
		return NULL;
	}
	buf = xmalloc((size_t)st.st_size + 1);
	while (len < (size_t)st.st_size &&
	    (r = read(fd, buf + len, (size_t)st.st_size - len)) != 0) {
		if (r == -1) {
			if (errno == EINTR)
				continue;
			free(buf);
			close(fd);
			return NULL;
		}
		len += (size_t)r;
	}
	close(fd);
	buf[len] = '\0';
	if (lenp != NULL)
		*lenp = len;
	return buf;
}

void
random_id(const char *prefix, char *out, size_t outlen)
{
	unsigned char	 rnd[12];
	char		 hex[sizeof(rnd) * 2 + 1];

	randombytes_buf(rnd, sizeof(rnd));
	hex_encode(rnd, sizeof(rnd), hex);
	snprintf(out, outlen, "%s-%s", prefix, hex);
}

int
bufprintf(char *buf, size_t len, const char *fmt, ...)
{
	va_list	 ap;
	int	 n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n;
}

void
strv_free(char **v, size_t n)
{
	for (size_t i = 0; v != NULL && i < n; i++)
		free(v[i]);
	free(v);
}

void *
dl_syms(const char *soname, const char *what, const char *notit,
    const char *const *names, void **syms, size_t n, char *err,
    size_t errlen)
{
	void		*h;
	const char	*e;

	/* RTLD_NOW: a missing symbol is found here, not at the first
	 * call; RTLD_LOCAL: its symbols resolve nothing else of ours. */
	if ((h = dlopen(soname, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		e = dlerror();
		snprintf(err, errlen, "cannot load %s %s: %s", soname, what,
		    e != NULL ? e : "unknown error");
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if ((syms[i] = dlsym(h, names[i])) == NULL) {
			snprintf(err, errlen, "%s has no %s: %s", soname,
			    names[i], notit);
			dlclose(h);
			return NULL;
		}
	return h;
}
