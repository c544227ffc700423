/*
 * sha256.c: OpenSSL's SHA-256 for sha256_buf, in the programs that ask
 * for it, and piecewise (sha256_new) for those hashing files or parts.
 * It is its own file so that a daemon that does not ask never
 * references libcrypto: with --as-needed it is not even linked (gated,
 * brokerd, approvald hash a few audit records with libsodium's).  The
 * digest is SHA-256 either way: only the speed differs.
 *
 * OpenSSL's SHA256_Init/Update/Final, not EVP: the same code (the
 * default provider's SHA-256 calls these, and the CPU's SHA extensions
 * or AVX2 are chosen when libcrypto is loaded), without initialising
 * the library.  An EVP digest (EVP_MD_fetch, or EVP_sha256() at its
 * first use) reads openssl.cnf and builds the default provider's
 * method store: about 1.9 MiB more of libcrypto resident in each
 * daemon that only hashes (policyd, launchd-sbx; bench/README.md, idle
 * RSS).  OpenSSL 3 marks these calls deprecated, not removed; this
 * file alone uses them.  egressd, which runs TLS, initialises OpenSSL
 * for that anyway.
 */
#define OPENSSL_SUPPRESS_DEPRECATED	/* SHA256_Init and co.: above */
#include <openssl/sha.h>

#include <stdlib.h>
#include <string.h>

#include "util.h"

struct sha256 {
	SHA256_CTX	 c;
};

static int
sha256_openssl(const void *buf, size_t len, unsigned char out[32])
{
	SHA256_CTX	 c;

	if (SHA256_Init(&c) != 1 || SHA256_Update(&c, buf, len) != 1 ||
	    SHA256_Final(out, &c) != 1)
		return -1;
	return 0;
}

int
sha256_use_openssl(void)
{
	sha256_accel = sha256_openssl;
	return 0;
}

struct sha256 *
sha256_new(void)
{
	struct sha256	*s;

	s = xmalloc(sizeof(*s));
	if (SHA256_Init(&s->c) != 1) {
		free(s);
		return NULL;
	}
	return s;
}

int
sha256_update(struct sha256 *s, const void *buf, size_t len)
{
	return SHA256_Update(&s->c, buf, len) == 1 ? 0 : -1;
}

int
sha256_final(struct sha256 *s, unsigned char out[32])
{
	int	 rc;

	rc = SHA256_Final(out, &s->c) == 1 ? 0 : -1;
	explicit_bzero(s, sizeof(*s));
	free(s);
	return rc;
}

void
sha256_free(struct sha256 *s)
{
	if (s == NULL)
		return;
	explicit_bzero(s, sizeof(*s));
	free(s);
}
