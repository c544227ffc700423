/*
 * mint.c: short-lived tokens for minted credentials.  A token is a JWT
 * (RFC 7519) signed with EdDSA/Ed25519 (RFC 8037), so the service that
 * receives it verifies it with any JWT library and the secret's public
 * key: its audience is the one host the policy binds it to, its subject
 * the task, and it expires no later than the execution can last.
 *
 * Invariant: the signing key exists only in sodium_malloc memory for the
 * length of one signature, and the finished token ("Bearer ...") only in
 * sodium_malloc memory; every stack copy of either is wiped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "sign.h"
#include "util.h"
#include "brokerd/brokerd.h"

#define MINT_BEARER	"Bearer "
#define MINT_MAX	8192	/* a token we mint is far smaller */

int64_t
mint_expiry(const Sbx__V1__PolicyGrant *g, int64_t now, uint32_t ttl)
{
	int64_t	 exp = now + (int64_t)ttl;

	if (g->expires_at < exp)
		exp = g->expires_at;
	if (g->policy != NULL && g->policy->limits != NULL &&
	    g->policy->limits->wall_seconds > 0 &&
	    now + (int64_t)g->policy->limits->wall_seconds < exp)
		exp = now + (int64_t)g->policy->limits->wall_seconds;
	return exp;
}

void
mint_public(const unsigned char seed[32], unsigned char pk[32])
{
	unsigned char	*sk;

	if ((sk = sodium_malloc(crypto_sign_SECRETKEYBYTES)) == NULL) {
		memset(pk, 0, 32);
		return;
	}
	crypto_sign_seed_keypair(pk, sk, seed);
	sodium_free(sk);
}

/* base64url without padding of a JSON object; malloc'd. */
static char *
mint_b64_json(json_t *o)
{
	char	*js, *b64;
	size_t	 len, blen;

	if ((js = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
		return NULL;
	len = strlen(js);
	blen = sodium_base64_ENCODED_LEN(len,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	b64 = xmalloc(blen);
	sodium_bin2base64(b64, blen, (const unsigned char *)js, len,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	free(js);
	return b64;
}

int
mint_token(const unsigned char seed[32], const char *aud, const char *sub,
    const char *exe, int64_t iat, int64_t exp, unsigned char **out,
    size_t *outlen, char *err, size_t errlen)
{
	unsigned char	 pk[crypto_sign_PUBLICKEYBYTES];
	unsigned char	 sig[crypto_sign_BYTES];
	unsigned char	*sk = NULL, *tok = NULL;
	char		 kid[SIGN_KEYID_HEX], sig64[128];
	char		*h64 = NULL, *p64 = NULL, *signing = NULL;
	json_t		*hdr = NULL, *claims = NULL;
	size_t		 n;
	int		 rc = -1;

	*out = NULL;
	*outlen = 0;
	if (exp <= iat) {
		snprintf(err, errlen, "the token would expire before it is "
		    "issued (the policy has no time left)");
		return -1;
	}
	if ((sk = sodium_malloc(crypto_sign_SECRETKEYBYTES)) == NULL) {
		snprintf(err, errlen, "cannot allocate secure memory for the "
		    "minting key");
		return -1;
	}
	crypto_sign_seed_keypair(pk, sk, seed);
	sign_key_id(pk, kid);
	hdr = json_pack("{s:s, s:s, s:s}", "alg", "EdDSA", "typ", "JWT",
	    "kid", kid);
	claims = json_pack("{s:s, s:s, s:s, s:I, s:I}", "aud", aud, "sub", sub,
	    "exe", exe, "iat", (json_int_t)iat, "exp", (json_int_t)exp);
	if (hdr == NULL || claims == NULL ||
	    (h64 = mint_b64_json(hdr)) == NULL ||
	    (p64 = mint_b64_json(claims)) == NULL) {
		snprintf(err, errlen, "cannot encode the token's claims");
		goto done;
	}
	/* Header and claims are public; only the signature makes the
	 * token a credential. */
	xasprintf(&signing, "%s.%s", h64, p64);
	crypto_sign_detached(sig, NULL, (const unsigned char *)signing,
	    strlen(signing), sk);
	sodium_bin2base64(sig64, sizeof(sig64), sig, sizeof(sig),
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	n = strlen(MINT_BEARER) + strlen(signing) + 1 + strlen(sig64);
	if ((tok = sodium_malloc(n + 1)) == NULL) {
		snprintf(err, errlen, "cannot allocate secure memory for the "
		    "token");
		goto done;
	}
	snprintf((char *)tok, n + 1, "%s%s.%s", MINT_BEARER, signing, sig64);
	*out = tok;
	*outlen = n;
	rc = 0;
done:
	sodium_memzero(sig, sizeof(sig));
	sodium_memzero(sig64, sizeof(sig64));
	sodium_free(sk);
	json_decref(hdr);
	json_decref(claims);
	free(h64);
	free(p64);
	free(signing);
	return rc;
}

/* Decode one base64url part into a malloc'd NUL-terminated buffer. */
static char *
mint_unb64(const char *p, size_t len, size_t *outlen)
{
	char	*buf = xmalloc(len + 1);
	size_t	 n;

	if (sodium_base642bin((unsigned char *)buf, len + 1, p, len, NULL, &n,
	    NULL, sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*outlen = n;
	return buf;
}

int
mint_verify(const unsigned char pk[32], const char *token, int64_t now,
    struct mint_claims *c, char *err, size_t errlen)
{
	const char	*dot1, *dot2, *alg, *aud, *sub, *exe, *kid;
	unsigned char	 sig[crypto_sign_BYTES + 1];
	char		*hjs = NULL, *pjs = NULL;
	json_t		*hdr = NULL, *claims = NULL;
	json_int_t	 iat, exp;
	size_t		 n, siglen;
	int		 rc = -1;

	memset(c, 0, sizeof(*c));
	if (strncmp(token, MINT_BEARER, strlen(MINT_BEARER)) == 0)
		token += strlen(MINT_BEARER);
	if (strlen(token) > MINT_MAX || (dot1 = strchr(token, '.')) == NULL ||
	    (dot2 = strchr(dot1 + 1, '.')) == NULL ||
	    strchr(dot2 + 1, '.') != NULL) {
		snprintf(err, errlen, "not a JWT: want header.claims."
		    "signature");
		return -1;
	}
	if (sodium_base642bin(sig, sizeof(sig), dot2 + 1, strlen(dot2 + 1),
	    NULL, &siglen, NULL,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
	    siglen != crypto_sign_BYTES) {
		snprintf(err, errlen, "the signature is not 64 bytes of "
		    "base64url");
		return -1;
	}
	if (crypto_sign_verify_detached(sig, (const unsigned char *)token,
	    (size_t)(dot2 - token), pk) != 0) {
		snprintf(err, errlen, "the signature does not verify");
		return -1;
	}
	if ((hjs = mint_unb64(token, (size_t)(dot1 - token), &n)) == NULL ||
	    (pjs = mint_unb64(dot1 + 1, (size_t)(dot2 - dot1 - 1),
	    &n)) == NULL ||
	    (hdr = json_loads(hjs, JSON_REJECT_DUPLICATES, NULL)) == NULL ||
	    (claims = json_loads(pjs, JSON_REJECT_DUPLICATES, NULL)) == NULL) {
		snprintf(err, errlen, "the header or claims do not decode");
		goto done;
	}
	if (json_unpack(hdr, "{s:s, s:s}", "alg", &alg, "kid", &kid) != 0 ||
	    strcmp(alg, "EdDSA") != 0) {
		snprintf(err, errlen, "the header does not say alg EdDSA with "
		    "a kid");
		goto done;
	}
	if (json_unpack(claims, "{s:s, s:s, s:s, s:I, s:I}", "aud", &aud,
	    "sub", &sub, "exe", &exe, "iat", &iat, "exp", &exp) != 0) {
		snprintf(err, errlen, "the claims lack aud, sub, exe, iat or "
		    "exp");
		goto done;
	}
	if ((int64_t)exp <= now) {
		snprintf(err, errlen, "the token expired %lld s ago",
		    (long long)(now - (int64_t)exp));
		goto done;
	}
	c->aud = xstrdup(aud);
	c->sub = xstrdup(sub);
	c->exe = xstrdup(exe);
	c->kid = xstrdup(kid);
	c->iat = (int64_t)iat;
	c->exp = (int64_t)exp;
	rc = 0;
done:
	json_decref(hdr);
	json_decref(claims);
	free(hjs);
	free(pjs);
	return rc;
}

void
mint_claims_clear(struct mint_claims *c)
{
	free(c->aud);
	free(c->sub);
	free(c->exe);
	free(c->kid);
	memset(c, 0, sizeof(*c));
}
