/*
 * sha256.c: OpenSSL's SHA-256 for sha256_buf, in the programs that ask
 * for it.  It is its own file so that a daemon that does not ask never
 * references libcrypto: with --as-needed it is not even linked, and the
 * 3 to 4 MiB OpenSSL's initialisation makes resident stay out of the
 * daemons that hash a few audit records (gated, brokerd, approvald).
 * The digest is SHA-256 either way: only the speed differs.
 */
#include <openssl/evp.h>
#include <openssl/err.h>

#include "util.h"

static EVP_MD	*sha256_md;

static int
sha256_openssl(const void *buf, size_t len, unsigned char out[32])
{
	unsigned int	 n;

	if (EVP_Digest(buf, len, out, &n, sha256_md, NULL) == 1 && n == 32)
		return 0;
	ERR_clear_error();
	return -1;
}

int
sha256_use_openssl(void)
{
	if (sha256_md == NULL &&
	    (sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL) {
		ERR_clear_error();
		return -1;
	}
	sha256_accel = sha256_openssl;
	return 0;
}
