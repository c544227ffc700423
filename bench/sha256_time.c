/*
 * bench/sha256_time.c: SHA-256 three ways, interleaved in one process:
 * an EVP digest fetched once (what common/sha256.c did), OpenSSL's
 * SHA256_Init/Update/Final (what it does: the same code, without
 * initialising OpenSSL) and libsodium's (gated, brokerd, approvald).
 * Prints microseconds a digest, per size, each round.
 *
 *   cc -O2 -o build/sha256_time bench/sha256_time.c -lcrypto -lsodium
 *   build/sha256_time [ROUNDS]
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <sodium.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double
now(void)
{
	struct timespec	 t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int
main(int argc, char *argv[])
{
	static const size_t	 sizes[] = { 1024, 16 << 20 };
	unsigned char		*buf, out[32];
	unsigned int		 n;
	EVP_MD			*md;
	int			 rounds = argc > 1 ? atoi(argv[1]) : 3;

	if ((buf = malloc(16 << 20)) == NULL ||
	    (md = EVP_MD_fetch(NULL, "SHA256", NULL)) == NULL)
		return 1;
	memset(buf, 7, 16 << 20);
	for (size_t k = 0; k < 2; k++) {
		size_t	 len = sizes[k];
		int	 it = k == 0 ? 100000 : 10;

		for (int r = 0; r < rounds; r++) {
			double	 t0, t1, t2, t3;

			t0 = now();
			for (int i = 0; i < it; i++)
				EVP_Digest(buf, len, out, &n, md, NULL);
			t1 = now();
			for (int i = 0; i < it; i++) {
				SHA256_CTX	 c;

				SHA256_Init(&c);
				SHA256_Update(&c, buf, len);
				SHA256_Final(out, &c);
			}
			t2 = now();
			for (int i = 0; i < it; i++)
				crypto_hash_sha256(out, buf, len);
			t3 = now();
			printf("%8zu B: EVP %.2f us, SHA256_* %.2f us, "
			    "libsodium %.2f us\n", len, (t1 - t0) / it * 1e6,
			    (t2 - t1) / it * 1e6, (t3 - t2) / it * 1e6);
		}
	}
	EVP_MD_free(md);
	free(buf);
	return 0;
}
