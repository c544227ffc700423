/*
 * sign.h: policyd's Ed25519 signature over a PolicyGrant (libsodium).  The
 * signature covers the exact encoded bytes of the grant, so a verifier never
 * re-encodes.  Verification also checks the expiry and recomputes the
 * policy hash over the policy's bytes as embedded in the grant, so a daemon that acts on a policy trusts nothing unsigned.
 */
#ifndef SBX_SIGN_H
#define SBX_SIGN_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/v1/policy.pb-c.h"

#define SIGN_KEYID_HEX	17	/* 16 hex digits and NUL */

struct sign_key {
	unsigned char	 pk[32];
	unsigned char	*sk;	/* 64 bytes in sodium_malloc'd memory */
	char		 key_id[SIGN_KEYID_HEX];
};

/*
 * Secret key file: the 64-byte libsodium secret key, raw, mode 0400 or
 * 0600, owned by the daemon's user.  Public key file: "ed25519 " then 64
 * hex digits and a newline.  Every function writes a sentence into err.
 */
int		 sign_keygen(const char *sk_path, const char *pk_path,
		    char *err, size_t errlen);
/* Refuses a file that group or others can read or write, or that is not a
 * regular file. */
struct sign_key	*sign_key_load(const char *sk_path, char *err, size_t errlen);
void		 sign_key_free(struct sign_key *);
int		 sign_pubkey_load(const char *pk_path, unsigned char pk[32],
		    char *err, size_t errlen);
/* SIGHUP: load pk_path into pk only if it loads, so a broken rotated key
 * leaves the one in use in place.  0, or -1 (logged). */
int		 sign_pubkey_reload(const char *pk_path, unsigned char pk[32]);
void		 sign_key_id(const unsigned char pk[32],
		    char out[SIGN_KEYID_HEX]);

/* Fill grant->key_id, encode it (the policy as its canonical encoding,
 * so policy_hash() of it is the hash of its bytes in the grant), sign; out->grant and out->signature are
 * malloc'd (free with sign_signed_clear). 0 or -1.  grant->key_id is set
 * to point at key->key_id (borrowed: valid while the key lives, never
 * freed through the grant). */
int		 sign_grant(const struct sign_key *, Sbx__V1__PolicyGrant *,
		    Sbx__V1__SignedPolicy *out);
/* The same, with the policy's canonical bytes already encoded (cb, clen:
 * policy_canonical's, or policy_canonical_in_place's for the policy before
 * it normalised it): what compile_task hashed is what is signed. */
int		 sign_grant_canonical(const struct sign_key *,
		    Sbx__V1__PolicyGrant *, const uint8_t *cb, size_t clen,
		    Sbx__V1__SignedPolicy *out);
void		 sign_signed_clear(Sbx__V1__SignedPolicy *);

/* Execution ids of preview grants (a compile that consumes no
 * execution) start with this; sign_verify refuses them. */
#define SIGN_PREVIEW_PREFIX	"preview-"

/*
 * The public keys a verifier trusts: policyd's current key and, during a
 * rotation, its previous one (policyd.8, ROTATING THE SIGNING KEY).  A
 * grant signed by the previous key verifies like any other, so it is good
 * until its own expires_at and refused after.
 */
struct sign_trust {
	unsigned char	 pk[32];
	unsigned char	 prev[32];
	int		 has_prev;
};

/* Load the current key and, when prev_path is not NULL, the previous one.
 * 0, or -1 with err set (nothing changed). */
int		 sign_trust_load(struct sign_trust *, const char *pk_path,
		    const char *prev_path, char *err, size_t errlen);
/* SIGHUP: sign_trust_load() into t only if both load.  0, or -1 (logged,
 * the keys in use kept). */
int		 sign_trust_reload(struct sign_trust *, const char *pk_path,
		    const char *prev_path);
/* sign_verify() by whichever trusted key signed the grant. */
Sbx__V1__PolicyGrant *sign_verify_trust(const struct sign_trust *,
		    const Sbx__V1__SignedPolicy *, int64_t now,
		    char *err, size_t errlen);

/*
 * Verify the signature, decode the grant, refuse it if it is a preview,
 * if now >= expires_at, or if policy_hash is not the SHA-256 of the
 * policy's exact bytes in the grant, and return it (free with
 * sbx__v1__policy_grant__free_unpacked).  NULL with err set otherwise.
 */
Sbx__V1__PolicyGrant *sign_verify(const unsigned char pk[32],
		    const Sbx__V1__SignedPolicy *, int64_t now,
		    char *err, size_t errlen);
/* sign_verify without the clock and preview checks: the signature, the
 * key id and the hash (a receipt's grant, long after it expired). */
Sbx__V1__PolicyGrant *sign_verify_bytes(const unsigned char pk[32],
		    const Sbx__V1__SignedPolicy *, char *err, size_t errlen);
int		 sign_is_preview(const Sbx__V1__PolicyGrant *);
/*
 * The exact bytes of the policy (field 1) inside an encoded grant: *pol
 * points into grant.  -1 with err if the grant is not well-formed at its
 * top level, or carries field 1 never or twice (a decoder would merge
 * the two; the hash would not be of what it read).
 */
int		 sign_grant_policy_bytes(const uint8_t *grant, size_t len,
		    const uint8_t **pol, size_t *plen, char *err,
		    size_t errlen);
/* Lower-case hex SHA-256 of buf. */
void		 sign_bytes_hash(const uint8_t *buf, size_t len,
		    char hex[65]);

#endif
