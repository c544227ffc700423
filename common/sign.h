/*
 * sign.h: policyd's Ed25519 signature over a PolicyGrant (libsodium).  The
 * signature covers the exact encoded bytes of the grant, so a verifier never
 * re-encodes.  Verification also checks the expiry and recomputes the
 * policy hash, so a daemon that acts on a policy trusts nothing unsigned.
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

/* Fill grant->key_id, encode it, sign; out->grant and out->signature are
 * malloc'd (free with sign_signed_clear). 0 or -1.  grant->key_id is set
 * to point at key->key_id (borrowed: valid while the key lives, never
 * freed through the grant). */
int		 sign_grant(const struct sign_key *, Sbx__V1__PolicyGrant *,
		    Sbx__V1__SignedPolicy *out);
void		 sign_signed_clear(Sbx__V1__SignedPolicy *);

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
 * Verify the signature, decode the grant, refuse it if now >= expires_at
 * or if policy_hash does not match the policy, and return it (free with
 * sbx__v1__policy_grant__free_unpacked).  NULL with err set otherwise.
 */
Sbx__V1__PolicyGrant *sign_verify(const unsigned char pk[32],
		    const Sbx__V1__SignedPolicy *, int64_t now,
		    char *err, size_t errlen);

#endif
