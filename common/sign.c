/*
 * sign.c: policyd's Ed25519 signature over a PolicyGrant, with libsodium.
 *
 * Invariant: a daemon acts only on a grant whose exact encoded bytes carry
 * a valid signature from the configured key, that has not expired, and
 * whose policy bytes, as embedded in the grant, hash to the policy_hash
 * that was signed.  The signature covers the bytes as sent and the hash
 * covers the policy's bytes as sent, so nothing is ever re-encoded before
 * checking: a field this build does not know changes neither.
 * The secret key lives only in guarded, read-only sodium_malloc memory;
 * every stack copy of key material is wiped before its frame goes away.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "keyfile.h"
#include "policy.h"
#include "log.h"
#include "sign.h"
#include "util.h"

#define SIGN_PK_PREFIX		"ed25519 "
#define SIGN_MAX_FUTURE_S	300	/* clock skew we tolerate on issued_at */

static int
sign_init(char *err, size_t errlen)
{
	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium could not be initialised");
		return -1;
	}
	return 0;
}

/*
 * Create path (never replacing an existing file), write buf, set mode
 * exactly (the umask must not decide who can read a key) and fsync, so a
 * key that was reported as written survives a crash.
 */
static int
sign_write_new(const char *path, const void *buf, size_t len, mode_t mode,
    const char *what, char *err, size_t errlen)
{
	int	 fd, saved;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC |
	    O_NOCTTY, mode);
	if (fd == -1) {
		if (errno == EEXIST)
			snprintf(err, errlen, "%s %s already exists; refusing "
			    "to overwrite it", what, path);
		else
			snprintf(err, errlen, "cannot create %s %s: %s", what,
			    path, strerror(errno));
		return -1;
	}
	if (fchmod(fd, mode) == -1 || write_all(fd, buf, len) == -1 ||
	    fsync(fd) == -1) {
		saved = errno;
		snprintf(err, errlen, "cannot write %s %s: %s", what, path,
		    strerror(saved));
		close(fd);
		unlink(path);
		return -1;
	}
	if (close(fd) == -1) {
		snprintf(err, errlen, "cannot write %s %s: %s", what, path,
		    strerror(errno));
		unlink(path);
		return -1;
	}
	return 0;
}

int
sign_keygen(const char *sk_path, const char *pk_path, char *err,
    size_t errlen)
{
	unsigned char	 pk[crypto_sign_PUBLICKEYBYTES];
	unsigned char	*sk;
	char		 line[sizeof(SIGN_PK_PREFIX) + 2 * sizeof(pk) + 1];
	char		 hex[2 * sizeof(pk) + 1];
	int		 rc = -1;

	if (sign_init(err, errlen) == -1)
		return -1;
	if ((sk = sodium_malloc(crypto_sign_SECRETKEYBYTES)) == NULL) {
		snprintf(err, errlen, "cannot allocate secure memory for the "
		    "signing key");
		return -1;
	}
	crypto_sign_keypair(pk, sk);
	if (sign_write_new(sk_path, sk, crypto_sign_SECRETKEYBYTES, 0400,
	    "signing key", err, errlen) == -1)
		goto done;
	hex_encode(pk, sizeof(pk), hex);
	snprintf(line, sizeof(line), "%s%s\n", SIGN_PK_PREFIX, hex);
	if (sign_write_new(pk_path, line, strlen(line), 0644, "public key",
	    err, errlen) == -1) {
		/* A secret key without its public half is of no use to
		 * anyone; leave the directory as it was. */
		unlink(sk_path);
		goto done;
	}
	rc = 0;
done:
	sodium_free(sk);
	return rc;
}

struct sign_key *
sign_key_load(const char *sk_path, char *err, size_t errlen)
{
	const struct keyfile kf = {
		.what = "signing key", .path = sk_path,
		.len = crypto_sign_SECRETKEYBYTES, .owner = (uid_t)-1,
		.fix = "chmod 0400",
	};
	struct sign_key	*key;
	unsigned char	 seed[crypto_sign_SEEDBYTES];
	unsigned char	 pk[crypto_sign_PUBLICKEYBYTES];
	unsigned char	 sk2[crypto_sign_SECRETKEYBYTES];
	unsigned char	*sk;
	int		 same;

	if (sign_init(err, errlen) == -1)
		return NULL;
	if ((sk = keyfile_read(&kf, err, errlen)) == NULL)
		return NULL;

	/*
	 * A libsodium secret key is seed || public key.  Derive the pair
	 * again from the seed: a damaged file would otherwise sign with
	 * one key and name another.
	 */
	crypto_sign_ed25519_sk_to_seed(seed, sk);
	crypto_sign_seed_keypair(pk, sk2, seed);
	same = sodium_memcmp(sk2, sk, sizeof(sk2)) == 0;
	sodium_memzero(seed, sizeof(seed));
	sodium_memzero(sk2, sizeof(sk2));
	if (!same) {
		snprintf(err, errlen, "signing key %s is damaged: its public "
		    "half does not match its seed", sk_path);
		sodium_free(sk);
		return NULL;
	}
	if (sodium_mprotect_readonly(sk) == -1) {
		snprintf(err, errlen, "cannot protect the signing key memory: "
		    "%s", strerror(errno));
		sodium_free(sk);
		return NULL;
	}

	key = xcalloc(1, sizeof(*key));
	memcpy(key->pk, pk, sizeof(key->pk));
	key->sk = sk;
	sign_key_id(key->pk, key->key_id);
	return key;
}

void
sign_key_free(struct sign_key *key)
{
	if (key == NULL)
		return;
	sodium_free(key->sk);	/* wipes the key before unmapping */
	sodium_memzero(key, sizeof(*key));
	free(key);
}

int
sign_pubkey_load(const char *pk_path, unsigned char pk[32], char *err,
    size_t errlen)
{
	const char	*hex, *end;
	char		*buf;
	size_t		 len, binlen;

	if ((buf = read_file(pk_path, 4096, &len)) == NULL) {
		snprintf(err, errlen, "cannot read public key %s: %s",
		    pk_path, strerror(errno));
		return -1;
	}
	if (strncmp(buf, SIGN_PK_PREFIX, strlen(SIGN_PK_PREFIX)) != 0) {
		snprintf(err, errlen, "public key %s does not start with "
		    "\"ed25519 \"", pk_path);
		free(buf);
		return -1;
	}
	hex = buf + strlen(SIGN_PK_PREFIX);
	if (sodium_hex2bin(pk, 32, hex, strlen(hex), NULL, &binlen,
	    &end) != 0 || binlen != 32 ||
	    strspn(end, " \t\r\n") != strlen(end)) {
		snprintf(err, errlen, "public key %s is not \"ed25519 \" "
		    "followed by 64 hex digits", pk_path);
		free(buf);
		return -1;
	}
	free(buf);
	return 0;
}

void
sign_key_id(const unsigned char pk[32], char out[SIGN_KEYID_HEX])
{
	hex_encode(pk, 8, out);
}

/*
 * The grant's bytes with the policy's canonical encoding as field 1 (the
 * bytes policy_hash is the hash of), then the other fields as protobuf-c
 * packs them.  Malloc'd.
 */
static uint8_t *
sign_grant_pack(Sbx__V1__PolicyGrant *grant, const uint8_t *cb, size_t clen,
    size_t *len)
{
	Sbx__V1__Policy	*pol = grant->policy;
	uint8_t		*rest, *out;
	size_t		 rlen, n = 0, v;

	grant->policy = NULL;
	rlen = sbx__v1__policy_grant__get_packed_size(grant);
	rest = xmalloc(rlen + 1);
	sbx__v1__policy_grant__pack(grant, rest);
	grant->policy = pol;
	out = xmalloc(clen + 11 + rlen);
	if (pol != NULL) {
		out[n++] = 0x0a;
		v = clen;
		do {
			out[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
			v >>= 7;
		} while (v != 0);
		memcpy(out + n, cb, clen);
		n += clen;
	}
	memcpy(out + n, rest, rlen);
	free(rest);
	*len = n + rlen;
	return out;
}

/*
 * grant->key_id is pointed at key->key_id (see sign.h): the grant borrows
 * the string for as long as the key lives, so there is nothing new for
 * the caller to free.
 */
int
sign_grant(const struct sign_key *key, Sbx__V1__PolicyGrant *grant,
    Sbx__V1__SignedPolicy *out)
{
	uint8_t	*cb = NULL;
	size_t	 clen = 0;
	int	 rc;

	if (grant->policy != NULL &&
	    policy_canonical(grant->policy, &cb, &clen) == -1) {
		sbx__v1__signed_policy__init(out);
		return -1;
	}
	rc = sign_grant_canonical(key, grant, cb, clen, out);
	free(cb);
	return rc;
}

/*
 * As sign_grant, with the policy's canonical bytes given (compile_task
 * encodes them once with policy_canonical_in_place, hashes them for the
 * grant's policy_hash and signs them here).
 */
int
sign_grant_canonical(const struct sign_key *key, Sbx__V1__PolicyGrant *grant,
    const uint8_t *cb, size_t clen, Sbx__V1__SignedPolicy *out)
{
	size_t	 len;

	sbx__v1__signed_policy__init(out);
	grant->key_id = (char *)key->key_id;
	out->grant.data = sign_grant_pack(grant, cb, clen, &len);
	out->grant.len = len;
	out->signature.data = xmalloc(crypto_sign_BYTES);
	out->signature.len = crypto_sign_BYTES;
	if (crypto_sign_detached(out->signature.data,
	    NULL, out->grant.data, out->grant.len, key->sk) != 0) {
		sign_signed_clear(out);
		return -1;
	}
	return 0;
}

void
sign_signed_clear(Sbx__V1__SignedPolicy *sp)
{
	if (sp == NULL)
		return;
	free(sp->grant.data);
	free(sp->signature.data);
	sp->grant.data = sp->signature.data = NULL;
	sp->grant.len = sp->signature.len = 0;
}

static void
sign_isotime(int64_t t, char *buf, size_t len)
{
	struct tm	 tm;
	time_t		 tt = (time_t)t;

	if (gmtime_r(&tt, &tm) == NULL ||
	    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, len, "%lld", (long long)t);
}

/* One varint at *p (below end); -1 if it runs off the end or is over
 * ten bytes. */
static int
sign_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 70; shift += 7) {
		if (*p >= end)
			return -1;
		*v |= (uint64_t)(**p & 0x7f) << shift;
		if ((*(*p)++ & 0x80) == 0)
			return 0;
	}
	return -1;
}

int
sign_grant_policy_bytes(const uint8_t *grant, size_t len, const uint8_t **pol,
    size_t *plen, char *err, size_t errlen)
{
	const uint8_t	*p = grant, *end = grant + len;
	uint64_t	 key, v;
	int		 seen = 0;

	*pol = NULL;
	*plen = 0;
	while (p < end) {
		if (sign_varint(&p, end, &key) == -1 || key >> 3 == 0)
			goto bad;
		switch (key & 7) {
		case 0:
			if (sign_varint(&p, end, &v) == -1)
				goto bad;
			break;
		case 1:
			if (end - p < 8)
				goto bad;
			p += 8;
			break;
		case 5:
			if (end - p < 4)
				goto bad;
			p += 4;
			break;
		case 2:
			if (sign_varint(&p, end, &v) == -1 ||
			    v > (uint64_t)(end - p))
				goto bad;
			if (key >> 3 == 1) {
				/* Decoders merge a repeated message field:
				 * what they read would not be what is
				 * hashed. */
				if (seen++) {
					snprintf(err, errlen, "grant carries "
					    "its policy (field 1) twice");
					return -1;
				}
				*pol = p;
				*plen = (size_t)v;
			}
			p += v;
			break;
		default:
			goto bad;
		}
	}
	if (!seen) {
		snprintf(err, errlen, "grant carries no policy");
		return -1;
	}
	return 0;
bad:
	snprintf(err, errlen, "grant is not a well-formed protobuf message");
	return -1;
}

void
sign_bytes_hash(const uint8_t *buf, size_t len, char hex[POLICY_HASH_HEX])
{
	unsigned char	 md[crypto_hash_sha256_BYTES];

	sha256_buf(buf, len, md);
	hex_encode(md, sizeof(md), hex);
}

Sbx__V1__PolicyGrant *
sign_verify_bytes(const unsigned char pk[32], const Sbx__V1__SignedPolicy *sp,
    char *err, size_t errlen)
{
	Sbx__V1__PolicyGrant	*g;
	const uint8_t		*pol;
	size_t			 plen;
	char			 kid[SIGN_KEYID_HEX];
	char			 hex[POLICY_HASH_HEX];

	if (sign_init(err, errlen) == -1)
		return NULL;
	if (sp == NULL || sp->grant.data == NULL || sp->grant.len == 0) {
		snprintf(err, errlen, "signed policy carries no grant");
		return NULL;
	}
	if (sp->signature.data == NULL ||
	    sp->signature.len != crypto_sign_BYTES) {
		snprintf(err, errlen, "signature is %zu bytes, not %d",
		    sp->signature.len, crypto_sign_BYTES);
		return NULL;
	}
	if (crypto_sign_verify_detached(sp->signature.data, sp->grant.data,
	    sp->grant.len, pk) != 0) {
		snprintf(err, errlen, "signature does not verify");
		return NULL;
	}

	/* Only bytes policyd signed are decoded from here on. */
	if (sign_grant_policy_bytes(sp->grant.data, sp->grant.len, &pol,
	    &plen, err, errlen) == -1)
		return NULL;
	g = sbx__v1__policy_grant__unpack(NULL, sp->grant.len, sp->grant.data);
	if (g == NULL) {
		snprintf(err, errlen, "signed grant does not decode");
		return NULL;
	}
	sign_key_id(pk, kid);
	if (g->key_id == NULL || strcmp(g->key_id, kid) != 0) {
		snprintf(err, errlen, "grant names signing key %s, but it "
		    "verifies with key %s", g->key_id ? g->key_id : "", kid);
		goto fail;
	}
	if (g->policy == NULL) {
		snprintf(err, errlen, "grant carries no policy");
		goto fail;
	}
	/* The hash is over the policy's bytes as signed, never a
	 * re-encoding: a field this build does not know is hashed too. */
	sign_bytes_hash(pol, plen, hex);
	if (g->policy_hash == NULL || strlen(g->policy_hash) != 64 ||
	    sodium_memcmp(hex, g->policy_hash, 64) != 0) {
		snprintf(err, errlen, "policy hash mismatch: the grant says "
		    "%.64s, the policy hashes to %s",
		    g->policy_hash ? g->policy_hash : "", hex);
		goto fail;
	}
	return g;
fail:
	sbx__v1__policy_grant__free_unpacked(g, NULL);
	return NULL;
}

int
sign_is_preview(const Sbx__V1__PolicyGrant *g)
{
	return g->execution_id != NULL && strncmp(g->execution_id,
	    SIGN_PREVIEW_PREFIX, strlen(SIGN_PREVIEW_PREFIX)) == 0;
}

Sbx__V1__PolicyGrant *
sign_verify(const unsigned char pk[32], const Sbx__V1__SignedPolicy *sp,
    int64_t now, char *err, size_t errlen)
{
	Sbx__V1__PolicyGrant	*g;
	char			 when[64];

	if ((g = sign_verify_bytes(pk, sp, err, errlen)) == NULL)
		return NULL;
	if (sign_is_preview(g)) {
		snprintf(err, errlen, "grant for execution %.64s is a preview: "
		    "it shows a policy and runs nothing", g->execution_id);
		goto fail;
	}
	if (now >= g->expires_at) {
		sign_isotime(g->expires_at, when, sizeof(when));
		snprintf(err, errlen, "policy expired at %s", when);
		goto fail;
	}
	if (g->issued_at > now + SIGN_MAX_FUTURE_S) {
		sign_isotime(g->issued_at, when, sizeof(when));
		snprintf(err, errlen, "policy is issued at %s, in the future "
		    "(clock skew?)", when);
		goto fail;
	}
	return g;
fail:
	sbx__v1__policy_grant__free_unpacked(g, NULL);
	return NULL;
}

int
sign_trust_load(struct sign_trust *t, const char *pk_path,
    const char *prev_path, char *err, size_t errlen)
{
	struct sign_trust	 fresh;
	char			 e[512];

	memset(&fresh, 0, sizeof(fresh));
	if (sign_pubkey_load(pk_path, fresh.pk, err, errlen) == -1)
		return -1;
	if (prev_path != NULL) {
		if (sign_pubkey_load(prev_path, fresh.prev, e,
		    sizeof(e)) == -1) {
			snprintf(err, errlen, "previous key: %s", e);
			return -1;
		}
		fresh.has_prev = 1;
	}
	*t = fresh;
	return 0;
}

int
sign_trust_reload(struct sign_trust *t, const char *pk_path,
    const char *prev_path)
{
	struct sign_trust	 fresh;
	char			 err[512], kid[SIGN_KEYID_HEX];

	if (sign_trust_load(&fresh, pk_path, prev_path, err,
	    sizeof(err)) == -1) {
		log_warnx("reload: %s; keeping the key loaded", err);
		return -1;
	}
	*t = fresh;
	sign_key_id(t->pk, kid);
	log_info("reload: policyd's public key %s (key %s)", pk_path, kid);
	if (t->has_prev) {
		sign_key_id(t->prev, kid);
		log_info("reload: policyd's previous public key %s (key %s)",
		    prev_path, kid);
	}
	return 0;
}

Sbx__V1__PolicyGrant *
sign_verify_trust(const struct sign_trust *t,
    const Sbx__V1__SignedPolicy *sp, int64_t now, char *err, size_t errlen)
{
	char	kid[SIGN_KEYID_HEX], pkid[SIGN_KEYID_HEX];

	if (sign_init(err, errlen) == -1)
		return NULL;
	/* Which key signed it is known only once a signature verifies:
	 * nothing unsigned is decoded to choose. */
	if (t->has_prev && sp != NULL && sp->grant.data != NULL &&
	    sp->signature.data != NULL &&
	    sp->signature.len == crypto_sign_BYTES &&
	    crypto_sign_verify_detached(sp->signature.data, sp->grant.data,
	    sp->grant.len, t->pk) != 0 &&
	    crypto_sign_verify_detached(sp->signature.data, sp->grant.data,
	    sp->grant.len, t->prev) == 0)
		return sign_verify(t->prev, sp, now, err, errlen);
	if (sp != NULL && sp->grant.data != NULL &&
	    sp->signature.data != NULL &&
	    sp->signature.len == crypto_sign_BYTES &&
	    crypto_sign_verify_detached(sp->signature.data, sp->grant.data,
	    sp->grant.len, t->pk) != 0) {
		sign_key_id(t->pk, kid);
		if (t->has_prev) {
			sign_key_id(t->prev, pkid);
			snprintf(err, errlen, "signature does not verify "
			    "with policyd's key %s nor its previous key %s",
			    kid, pkid);
		} else
			snprintf(err, errlen, "signature does not verify "
			    "with policyd's key %s", kid);
		return NULL;
	}
	return sign_verify(t->pk, sp, now, err, errlen);
}

int
sign_pubkey_reload(const char *pk_path, unsigned char pk[32])
{
	unsigned char	 fresh[32];
	char		 err[512];

	if (sign_pubkey_load(pk_path, fresh, err, sizeof(err)) == -1) {
		log_warnx("reload: %s; keeping the key loaded", err);
		return -1;
	}
	memcpy(pk, fresh, sizeof(fresh));
	log_info("reload: policyd's public key %s", pk_path);
	return 0;
}
