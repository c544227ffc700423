/*
 * sign_bench.c: Ed25519 signing side by side in one process, with the
 * libraries Debian packages: libsodium (what policyd uses), OpenSSL 3
 * (EVP_DigestSign, the key object made once; the context initialised
 * per signature and, separately, reused), nettle, libgcrypt and wolfSSL.
 * CPU time per signature (CLOCK_PROCESS_CPUTIME_ID, which other work on a
 * shared machine disturbs less than wall time), the rounds interleaved,
 * the best round of each reported; then every library's signature is
 * compared with libsodium's over messages of 0 to 2,999 bytes (Ed25519
 * is deterministic: the same key and bytes give the same signature).
 *
 * Not part of `make bench` (nettle, libgcrypt and wolfSSL are no
 * dependency of sbx); build and run by hand:
 *
 *	cc -O2 -o /tmp/sign_bench bench/sign_bench.c -lsodium -lcrypto \
 *	    -lhogweed -lnettle -lgcrypt -lwolfssl
 *	/tmp/sign_bench [message bytes, default 1000] [rounds, default 8]
 *
 * (apt-get install nettle-dev libgcrypt20-dev libwolfssl-dev.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gcrypt.h>
#include <nettle/eddsa.h>
#include <openssl/evp.h>
#include <sodium.h>
#include <wolfssl/options.h>
#include <wolfssl/wolfcrypt/ed25519.h>

#define N	4000

enum { SODIUM, OSSL_INIT, OSSL_REUSE, NETTLE, GCRYPT, WOLF, NLIB };
static const char *names[NLIB] = { "libsodium crypto_sign_detached",
    "OpenSSL EVP_DigestSign, init per call",
    "OpenSSL EVP_DigestSign, context reused", "nettle ed25519_sha512_sign",
    "libgcrypt gcry_pk_sign", "wolfSSL wc_ed25519_sign_msg" };

static unsigned char	 seed[32], pk[32], sk[64];
static EVP_PKEY		*ok;
static EVP_MD_CTX	*octx, *orctx;
static gcry_sexp_t	 gk;
static ed25519_key	 wk;

static double
cpu_us(void)
{
	struct timespec	 t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void
sign(int lib, const unsigned char *m, size_t len, unsigned char sig[64])
{
	size_t		 l = 64;
	word32		 wl = 64;
	gcry_sexp_t	 d, s, r;
	const char	*p;
	size_t		 pl;

	switch (lib) {
	case SODIUM:
		crypto_sign_detached(sig, NULL, m, len, sk);
		return;
	case OSSL_INIT:
		if (EVP_DigestSignInit(octx, NULL, NULL, NULL, ok) != 1 ||
		    EVP_DigestSign(octx, sig, &l, m, len) != 1)
			abort();
		return;
	case OSSL_REUSE:
		/* OpenSSL 3.0 lets a one-shot context sign again. */
		if (EVP_DigestSign(orctx, sig, &l, m, len) != 1)
			abort();
		return;
	case NETTLE:
		ed25519_sha512_sign(pk, seed, len, m, sig);
		return;
	case GCRYPT:
		if (gcry_sexp_build(&d, NULL, "(data(flags eddsa)"
		    "(hash-algo sha512)(value %b))", (int)len, m) != 0 ||
		    gcry_pk_sign(&s, d, gk) != 0)
			abort();
		r = gcry_sexp_find_token(s, "r", 0);
		p = gcry_sexp_nth_data(r, 1, &pl);
		memcpy(sig, p, 32);
		gcry_sexp_release(r);
		r = gcry_sexp_find_token(s, "s", 0);
		p = gcry_sexp_nth_data(r, 1, &pl);
		memcpy(sig + 32, p, 32);
		gcry_sexp_release(r);
		gcry_sexp_release(d);
		gcry_sexp_release(s);
		return;
	case WOLF:
		if (wc_ed25519_sign_msg(m, (word32)len, sig, &wl, &wk) != 0)
			abort();
		return;
	}
}

int
main(int argc, char **argv)
{
	unsigned char	*m, sig[64], ref[64];
	size_t		 len = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
	int		 rounds = argc > 2 ? atoi(argv[2]) : 8, bad[NLIB] = { 0 };
	double		 best[NLIB], t;

	if (sodium_init() < 0 || (m = malloc(3000 + len)) == NULL)
		return 1;
	randombytes_buf(seed, sizeof(seed));
	crypto_sign_seed_keypair(pk, sk, seed);
	randombytes_buf(m, 3000 + len);
	ok = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, 32);
	octx = EVP_MD_CTX_new();
	orctx = EVP_MD_CTX_new();
	if (ok == NULL || octx == NULL || orctx == NULL ||
	    EVP_DigestSignInit(orctx, NULL, NULL, NULL, ok) != 1)
		return 1;
	gcry_check_version(NULL);
	if (gcry_sexp_build(&gk, NULL, "(private-key(ecc(curve Ed25519)"
	    "(flags eddsa)(q %b)(d %b)))", 32, pk, 32, seed) != 0)
		return 1;
	wc_ed25519_init(&wk);
	if (wc_ed25519_import_private_key(seed, 32, pk, 32, &wk) != 0)
		return 1;

	for (int lib = 0; lib < NLIB; lib++)
		best[lib] = 1e9;
	for (int r = 0; r < rounds; r++) {
		for (int lib = 0; lib < NLIB; lib++) {
			int n = lib == GCRYPT ? N / 10 : N;

			t = cpu_us();
			for (int i = 0; i < n; i++) {
				m[0] = (unsigned char)i;
				sign(lib, m, len, sig);
			}
			t = (cpu_us() - t) / n;
			if (t < best[lib])
				best[lib] = t;
		}
	}
	for (size_t l = 0; l < 3000; l++) {
		crypto_sign_detached(ref, NULL, m, l, sk);
		for (int lib = 1; lib < NLIB; lib++) {
			if (lib == GCRYPT && l % 10 != 0)
				continue;
			sign(lib, m, l, sig);
			bad[lib] += memcmp(sig, ref, 64) != 0;
		}
	}
	printf("Ed25519, %zu-byte message, best of %d rounds, CPU time per "
	    "signature (libsodium %s):\n", len, rounds,
	    sodium_version_string());
	for (int lib = 0; lib < NLIB; lib++)
		printf("  %-40s %6.1f us  %4.2fx  %s\n", names[lib], best[lib],
		    best[lib] / best[SODIUM], lib == SODIUM ? "(reference)" :
		    bad[lib] ? "SIGNATURES DIFFER" : "same signatures");
	return 0;
}
