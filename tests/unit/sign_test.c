/*
 * sign_test.c: the policy signature.  A grant verifies only with the key
 * that signed it, only byte-for-byte as signed, only before it expires,
 * and only if its policy still hashes to the signed policy_hash.  Secret
 * key files that others could read are refused.
 */
#include <sys/stat.h>

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <sodium.h>

#include "policy.h"
#include "sign.h"
#include "util.h"

struct fixture {
	char		 dir[64];
	char		 sk[128];
	char		 pk[128];
};

static void
fx_setup(struct fixture *fx)
{
	char	 err[256];

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/sign_test.XXXXXX");
	cr_assert_not_null(mkdtemp(fx->dir));
	snprintf(fx->sk, sizeof(fx->sk), "%s/signing.key", fx->dir);
	snprintf(fx->pk, sizeof(fx->pk), "%s/signing.pub", fx->dir);
	cr_assert_eq(sign_keygen(fx->sk, fx->pk, err, sizeof(err)), 0,
	    "keygen: %s", err);
}

static void
fx_teardown(struct fixture *fx)
{
	char	 cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	(void)system(cmd);
}

/* A small policy with a nested message and a repeated field, so the hash
 * covers more than scalars. */
struct testpol {
	Sbx__V1__Policy		 pol;
	Sbx__V1__Limits		 limits;
	Sbx__V1__Network	 net;
	Sbx__V1__AllowRule	 rule;
	Sbx__V1__AllowRule	*rules[1];
	char			*methods[1];
};

static void
testpol_init(struct testpol *tp)
{
	sbx__v1__policy__init(&tp->pol);
	sbx__v1__limits__init(&tp->limits);
	sbx__v1__network__init(&tp->net);
	sbx__v1__allow_rule__init(&tp->rule);
	tp->pol.name = "analytics-readonly";
	tp->pol.version = 3;
	tp->pol.isolation = SBX__V1__ISOLATION__ISOLATION_GVISOR;
	tp->pol.image = "python@sha256:"
	    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	tp->limits.memory_mb = 512;
	tp->limits.wall_seconds = 60;
	tp->pol.limits = &tp->limits;
	tp->methods[0] = "GET";
	tp->rule.host = "api.example.com";
	tp->rule.n_methods = 1;
	tp->rule.methods = tp->methods;
	tp->rules[0] = &tp->rule;
	tp->net.default_action = "deny";
	tp->net.n_allow = 1;
	tp->net.allow = tp->rules;
	tp->pol.network = &tp->net;
	tp->pol.executions_per_task = 5;
}

/* A grant for tp, valid from now for 900 s, with the true policy hash. */
static void
grant_init(Sbx__V1__PolicyGrant *g, struct testpol *tp, char *hash)
{
	sbx__v1__policy_grant__init(g);
	cr_assert_eq(policy_hash(&tp->pol, hash), 0);
	g->policy = &tp->pol;
	g->policy_hash = hash;
	g->task_id = "t-1";
	g->execution_id = "x-0123";
	g->tenant = "acme";
	g->user = "alice";
	g->issued_at = now_s();
	g->expires_at = g->issued_at + 900;
}

static struct sign_key *
load_key(struct fixture *fx)
{
	struct sign_key	*key;
	char		 err[256];

	key = sign_key_load(fx->sk, err, sizeof(err));
	cr_assert_not_null(key, "load: %s", err);
	return key;
}

static void
load_pub(struct fixture *fx, unsigned char pk[32])
{
	char	 err[256];

	cr_assert_eq(sign_pubkey_load(fx->pk, pk, err, sizeof(err)), 0,
	    "pubkey: %s", err);
}

Test(sign, roundtrip)
{
	struct fixture		 fx;
	struct testpol		 tp;
	Sbx__V1__PolicyGrant	 g, *got;
	Sbx__V1__SignedPolicy	 sp;
	struct sign_key		*key;
	unsigned char		 pk[32];
	char			 hash[POLICY_HASH_HEX], kid[SIGN_KEYID_HEX];
	char			 err[256], hex[65];

	fx_setup(&fx);
	key = load_key(&fx);
	load_pub(&fx, pk);
	cr_assert_eq(memcmp(pk, key->pk, 32), 0,
	    "public key file and secret key disagree");
	sign_key_id(pk, kid);
	hex_encode(pk, 8, hex);
	cr_assert_str_eq(kid, hex);
	cr_assert_str_eq(key->key_id, kid);

	testpol_init(&tp);
	grant_init(&g, &tp, hash);
	cr_assert_eq(sign_grant(key, &g, &sp), 0);
	cr_assert_str_eq(g.key_id, kid, "sign_grant fills key_id");
	cr_assert_eq(sp.signature.len, 64);

	got = sign_verify(pk, &sp, now_s(), err, sizeof(err));
	cr_assert_not_null(got, "verify: %s", err);
	cr_assert_str_eq(got->policy_hash, hash);
	cr_assert_str_eq(got->task_id, "t-1");
	cr_assert_str_eq(got->execution_id, "x-0123");
	cr_assert_str_eq(got->key_id, kid);
	cr_assert_str_eq(got->policy->name, "analytics-readonly");
	cr_assert_eq(got->policy->limits->memory_mb, 512);
	cr_assert_str_eq(got->policy->network->allow[0]->host,
	    "api.example.com");
	sbx__v1__policy_grant__free_unpacked(got, NULL);

	sign_signed_clear(&sp);
	sign_key_free(key);
	fx_teardown(&fx);
}

Test(sign, every_flipped_byte_fails)
{
	struct fixture		 fx;
	struct testpol		 tp;
	Sbx__V1__PolicyGrant	 g, *got;
	Sbx__V1__SignedPolicy	 sp;
	struct sign_key		*key;
	unsigned char		 pk[32];
	char			 hash[POLICY_HASH_HEX], err[256];
	int64_t			 now = now_s();

	fx_setup(&fx);
	key = load_key(&fx);
	load_pub(&fx, pk);
	testpol_init(&tp);
	grant_init(&g, &tp, hash);
	cr_assert_eq(sign_grant(key, &g, &sp), 0);
	cr_assert_gt(sp.grant.len, 100, "grant is only %zu bytes",
	    sp.grant.len);

	for (size_t i = 0; i < sp.grant.len; i++) {
		sp.grant.data[i] ^= 0xff;
		got = sign_verify(pk, &sp, now, err, sizeof(err));
		cr_assert_null(got, "grant byte %zu flipped still verifies", i);
		cr_assert_str_eq(err, "signature does not verify");
		sp.grant.data[i] ^= 0xff;
	}
	for (size_t i = 0; i < sp.signature.len; i++) {
		sp.signature.data[i] ^= 0xff;
		got = sign_verify(pk, &sp, now, err, sizeof(err));
		cr_assert_null(got, "signature byte %zu flipped still verifies",
		    i);
		sp.signature.data[i] ^= 0xff;
	}
	/* Single-bit flips too: the lowest bit is the subtlest change. */
	for (size_t i = 0; i < sp.grant.len; i++) {
		sp.grant.data[i] ^= 0x01;
		cr_assert_null(sign_verify(pk, &sp, now, err, sizeof(err)),
		    "grant bit 0 of byte %zu flipped still verifies", i);
		sp.grant.data[i] ^= 0x01;
	}

	/* Truncated or extended grants, short signatures. */
	sp.grant.len--;
	cr_assert_null(sign_verify(pk, &sp, now, err, sizeof(err)));
	sp.grant.len++;
	sp.signature.len = 63;
	cr_assert_null(sign_verify(pk, &sp, now, err, sizeof(err)));
	cr_assert(strstr(err, "63 bytes") != NULL, "err: %s", err);
	sp.signature.len = 64;

	/* Restored exactly, it verifies again: the failures were the flips. */
	got = sign_verify(pk, &sp, now, err, sizeof(err));
	cr_assert_not_null(got, "verify: %s", err);
	sbx__v1__policy_grant__free_unpacked(got, NULL);

	sign_signed_clear(&sp);
	sign_key_free(key);
	fx_teardown(&fx);
}

Test(sign, expired_grant_fails)
{
	struct fixture		 fx;
	struct testpol		 tp;
	Sbx__V1__PolicyGrant	 g;
	Sbx__V1__SignedPolicy	 sp;
	struct sign_key		*key;
	unsigned char		 pk[32];
	char			 hash[POLICY_HASH_HEX], err[256];

	fx_setup(&fx);
	key = load_key(&fx);
	load_pub(&fx, pk);
	testpol_init(&tp);
	grant_init(&g, &tp, hash);
	g.issued_at = 1767225600 - 900;		/* 2026-01-01T00:00:00Z - 900 */
	g.expires_at = 1767225600;
	cr_assert_eq(sign_grant(key, &g, &sp), 0);

	cr_assert_null(sign_verify(pk, &sp, now_s(), err, sizeof(err)));
	cr_assert_str_eq(err, "policy expired at 2026-01-01T00:00:00Z");
	/* The boundary: at expires_at it is already expired, a second
	 * before it is not. */
	cr_assert_null(sign_verify(pk, &sp, 1767225600, err, sizeof(err)));
	{
		Sbx__V1__PolicyGrant *got = sign_verify(pk, &sp,
		    1767225599, err, sizeof(err));
		cr_assert_not_null(got, "verify: %s", err);
		sbx__v1__policy_grant__free_unpacked(got, NULL);
	}
	sign_signed_clear(&sp);
	sign_key_free(key);
	fx_teardown(&fx);
}

Test(sign, future_grant_fails)
{
	struct fixture		 fx;
	struct testpol		 tp;
	Sbx__V1__PolicyGrant	 g;
	Sbx__V1__SignedPolicy	 sp;
	struct sign_key		*key;
	unsigned char		 pk[32];
	char			 hash[POLICY_HASH_HEX], err[256];

	fx_setup(&fx);
	key = load_key(&fx);
	load_pub(&fx, pk);
	testpol_init(&tp);
	grant_init(&g, &tp, hash);
	g.issued_at = now_s() + 3600;
	g.expires_at = g.issued_at + 900;
	cr_assert_eq(sign_grant(key, &g, &sp), 0);
	cr_assert_null(sign_verify(pk, &sp, now_s(), err, sizeof(err)));
	cr_assert(strstr(err, "in the future") != NULL, "err: %s", err);
	sign_signed_clear(&sp);
	sign_key_free(key);
	fx_teardown(&fx);
}

Test(sign, changed_policy_fails)
{
	struct fixture		 fx;
	struct testpol		 tp;
	Sbx__V1__PolicyGrant	 g;
	Sbx__V1__SignedPolicy	 sp;
	struct sign_key		*key;
	unsigned char		 pk[32];
	char			 hash[POLICY_HASH_HEX], err[256];

	fx_setup(&fx);
	key = load_key(&fx);
	load_pub(&fx, pk);
	testpol_init(&tp);
	grant_init(&g, &tp, hash);
	/* The policy widens after it was hashed; the real key signs it. */
	tp.rule.host = "evil.example.net";
	cr_assert_eq(sign_grant(key, &g, &sp), 0);
	cr_assert_null(sign_verify(pk, &sp, now_s(), err, sizeof(err)));
	cr_assert(strncmp(err, "policy hash mismatch", 20) == 0,
	    "err: %s", err);
	sign_signed_clear(&sp);

	/* A policy_hash that is not even a hash. */
	g.policy_hash = "not-a-hash";
	cr_assert_eq(sign_grant(key, &g, &sp), 0);
	cr_assert_null(sign_verify(pk, &sp, now_s(), err, sizeof(err)));
	cr_assert(strncmp(err, "policy hash mismatch", 20) == 0,
	    "err: %s", err);
	sign_signed_clear(&sp);
	sign_key_free(key);
	fx_teardown(&fx);
}

Test(sign, wrong_public_key_fails)
{
	struct fixture		 fx, other;
	struct testpol		 tp;
	Sbx__V1__PolicyGrant	 g;
	Sbx__V1__SignedPolicy	 sp;
	struct sign_key		*key;
	unsigned char		 pk[32];
	char			 hash[POLICY_HASH_HEX], err[256];

	fx_setup(&fx);
	fx_setup(&other);
	key = load_key(&fx);
	load_pub(&other, pk);
	testpol_init(&tp);
	grant_init(&g, &tp, hash);
	cr_assert_eq(sign_grant(key, &g, &sp), 0);
	cr_assert_null(sign_verify(pk, &sp, now_s(), err, sizeof(err)));
	cr_assert_str_eq(err, "signature does not verify");
	sign_signed_clear(&sp);
	sign_key_free(key);
	fx_teardown(&fx);
	fx_teardown(&other);
}

Test(sign, key_file_mode_refused)
{
	struct fixture	 fx;
	char		 err[256], want[256];

	fx_setup(&fx);
	cr_assert_eq(chmod(fx.sk, 0644), 0);
	cr_assert_null(sign_key_load(fx.sk, err, sizeof(err)));
	snprintf(want, sizeof(want), "signing key %s is readable by group or "
	    "others (mode 0644); chmod 0400", fx.sk);
	cr_assert_str_eq(err, want);

	cr_assert_eq(chmod(fx.sk, 0620), 0);
	cr_assert_null(sign_key_load(fx.sk, err, sizeof(err)));
	cr_assert(strstr(err, "writable by group or others (mode 0620)") !=
	    NULL, "err: %s", err);

	/* 0600 is as good as 0400. */
	cr_assert_eq(chmod(fx.sk, 0600), 0);
	sign_key_free(load_key(&fx));
	fx_teardown(&fx);
}

Test(sign, key_file_checks)
{
	struct fixture	 fx;
	char		 err[256], link[160], bad[160];
	struct stat	 st;
	int		 fd;

	fx_setup(&fx);
	cr_assert_eq(stat(fx.sk, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0400, "secret key mode %o",
	    st.st_mode & 07777);
	cr_assert_eq(stat(fx.pk, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0644, "public key mode %o",
	    st.st_mode & 07777);

	/* keygen never overwrites a key. */
	cr_assert_eq(sign_keygen(fx.sk, fx.pk, err, sizeof(err)), -1);
	cr_assert(strstr(err, "already exists") != NULL, "err: %s", err);
	sign_key_free(load_key(&fx));

	/* A symbolic link to the key is not followed. */
	snprintf(link, sizeof(link), "%s/link.key", fx.dir);
	cr_assert_eq(symlink(fx.sk, link), 0);
	cr_assert_null(sign_key_load(link, err, sizeof(err)));
	cr_assert(strstr(err, "symbolic link") != NULL, "err: %s", err);

	/* Wrong size. */
	snprintf(bad, sizeof(bad), "%s/short.key", fx.dir);
	fd = open(bad, O_WRONLY | O_CREAT | O_EXCL, 0400);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "0123456789", 10), 10);
	close(fd);
	cr_assert_null(sign_key_load(bad, err, sizeof(err)));
	cr_assert(strstr(err, "10 bytes, not 64") != NULL, "err: %s", err);

	/* 64 bytes whose public half does not belong to the seed. */
	snprintf(bad, sizeof(bad), "%s/damaged.key", fx.dir);
	fd = open(bad, O_WRONLY | O_CREAT | O_EXCL, 0400);
	cr_assert_geq(fd, 0);
	{
		unsigned char junk[64];

		memset(junk, 0x5a, sizeof(junk));
		cr_assert_eq(write(fd, junk, sizeof(junk)), 64);
	}
	close(fd);
	cr_assert_null(sign_key_load(bad, err, sizeof(err)));
	cr_assert(strstr(err, "damaged") != NULL, "err: %s", err);

	/* A directory is not a key. */
	cr_assert_null(sign_key_load(fx.dir, err, sizeof(err)));

	/* A public key file in the wrong format. */
	snprintf(bad, sizeof(bad), "%s/bad.pub", fx.dir);
	fd = open(bad, O_WRONLY | O_CREAT | O_EXCL, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "ed25519 abcd\n", 13), 13);
	close(fd);
	{
		unsigned char pk[32];

		cr_assert_eq(sign_pubkey_load(bad, pk, err, sizeof(err)), -1);
		cr_assert(strstr(err, "64 hex digits") != NULL, "err: %s",
		    err);
	}
	fx_teardown(&fx);
}

/* ---- rotation: the previous key (issue 14) ---- */

/* A second key pair in the fixture's directory, named by prefix. */
static struct sign_key *
other_key(struct fixture *fx, const char *prefix, char *pkpath, size_t len)
{
	struct sign_key	*key;
	char		 sk[160], err[256];

	snprintf(sk, sizeof(sk), "%s/%s.key", fx->dir, prefix);
	snprintf(pkpath, len, "%s/%s.pub", fx->dir, prefix);
	cr_assert_eq(sign_keygen(sk, pkpath, err, sizeof(err)), 0,
	    "keygen: %s", err);
	key = sign_key_load(sk, err, sizeof(err));
	cr_assert_not_null(key, "load: %s", err);
	return key;
}

Test(sign, rotation_previous_key_verifies_until_expiry)
{
	struct fixture		 fx;
	struct testpol		 tp;
	struct sign_trust	 t;
	Sbx__V1__PolicyGrant	 g, *got;
	Sbx__V1__SignedPolicy	 old_sp, new_sp, stray_sp;
	struct sign_key		*oldk, *newk, *stray;
	char			 hash[POLICY_HASH_HEX], err[256];
	char			 newpub[160], straypub[160], want[256];
	int64_t			 exp;

	fx_setup(&fx);
	oldk = load_key(&fx);			/* signing.key: before */
	newk = other_key(&fx, "new", newpub, sizeof(newpub));
	stray = other_key(&fx, "stray", straypub, sizeof(straypub));
	testpol_init(&tp);

	grant_init(&g, &tp, hash);
	exp = g.expires_at;
	cr_assert_eq(sign_grant(oldk, &g, &old_sp), 0);
	grant_init(&g, &tp, hash);
	cr_assert_eq(sign_grant(newk, &g, &new_sp), 0);
	grant_init(&g, &tp, hash);
	cr_assert_eq(sign_grant(stray, &g, &stray_sp), 0);

	/* Rotated: new key current, the old one previous. */
	cr_assert_eq(sign_trust_load(&t, newpub, fx.pk, err, sizeof(err)), 0,
	    "%s", err);
	cr_assert(t.has_prev);
	got = sign_verify_trust(&t, &new_sp, now_s(), err, sizeof(err));
	cr_assert_not_null(got, "new key: %s", err);
	cr_assert_str_eq(got->key_id, newk->key_id);
	sbx__v1__policy_grant__free_unpacked(got, NULL);
	got = sign_verify_trust(&t, &old_sp, now_s(), err, sizeof(err));
	cr_assert_not_null(got, "previous key: %s", err);
	cr_assert_str_eq(got->key_id, oldk->key_id);
	sbx__v1__policy_grant__free_unpacked(got, NULL);
	/* ... until it expires: a second before, yes; at expires_at, no. */
	got = sign_verify_trust(&t, &old_sp, exp - 1, err, sizeof(err));
	cr_assert_not_null(got, "previous key before expiry: %s", err);
	sbx__v1__policy_grant__free_unpacked(got, NULL);
	cr_assert_null(sign_verify_trust(&t, &old_sp, exp, err,
	    sizeof(err)));
	cr_assert(strncmp(err, "policy expired", 14) == 0, "%s", err);

	/* A key neither current nor previous: refused, both named. */
	cr_assert_null(sign_verify_trust(&t, &stray_sp, now_s(), err,
	    sizeof(err)));
	snprintf(want, sizeof(want), "signature does not verify with "
	    "policyd's key %s nor its previous key %s", newk->key_id,
	    oldk->key_id);
	cr_assert_str_eq(err, want);

	/* Rotation over (no previous key): the old grant is refused. */
	cr_assert_eq(sign_trust_load(&t, newpub, NULL, err, sizeof(err)), 0);
	cr_assert(!t.has_prev);
	cr_assert_null(sign_verify_trust(&t, &old_sp, now_s(), err,
	    sizeof(err)));
	snprintf(want, sizeof(want), "signature does not verify with "
	    "policyd's key %s", newk->key_id);
	cr_assert_str_eq(err, want);
	got = sign_verify_trust(&t, &new_sp, now_s(), err, sizeof(err));
	cr_assert_not_null(got, "%s", err);
	sbx__v1__policy_grant__free_unpacked(got, NULL);

	/* A tampered grant is refused under either key. */
	cr_assert_eq(sign_trust_load(&t, newpub, fx.pk, err, sizeof(err)), 0);
	old_sp.grant.data[old_sp.grant.len - 1] ^= 1;
	cr_assert_null(sign_verify_trust(&t, &old_sp, now_s(), err,
	    sizeof(err)));

	sign_signed_clear(&old_sp);
	sign_signed_clear(&new_sp);
	sign_signed_clear(&stray_sp);
	sign_key_free(oldk);
	sign_key_free(newk);
	sign_key_free(stray);
	fx_teardown(&fx);
}

Test(sign, trust_load_and_reload_keep_keys_on_error)
{
	struct fixture		 fx;
	struct sign_trust	 t, before;
	char			 err[256], bad[160];
	FILE			*f;

	fx_setup(&fx);
	cr_assert_eq(sign_trust_load(&t, fx.pk, NULL, err, sizeof(err)), 0);
	snprintf(bad, sizeof(bad), "%s/bad.pub", fx.dir);
	cr_assert_not_null(f = fopen(bad, "w"));
	fputs("ed25519 zz\n", f);
	fclose(f);
	before = t;
	cr_assert_eq(sign_trust_load(&t, fx.pk, bad, err, sizeof(err)), -1);
	cr_assert(strncmp(err, "previous key: ", 14) == 0, "%s", err);
	cr_assert_eq(memcmp(&t, &before, sizeof(t)), 0, "changed on error");
	cr_assert_eq(sign_trust_reload(&t, fx.pk, bad), -1);
	cr_assert_eq(memcmp(&t, &before, sizeof(t)), 0, "changed on error");
	cr_assert_eq(sign_trust_reload(&t, fx.pk, fx.pk), 0);
	cr_assert(t.has_prev);
	fx_teardown(&fx);
}

/* sha256_buf is SHA-256 whichever code computes it (libsodium's, then
 * OpenSSL's once sha256_use_openssl() chose it): the FIPS 180-2
 * vectors, and libsodium's digest for every length across the block
 * boundaries and for a large buffer, so no hash written before differs. */
static void
sha256_check(void)
{
	static const struct {
		const char	*in, *hex;
	} v[] = {
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b"
		    "7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff"
		    "61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd4"
		    "19db06c1" },
	};
	unsigned char	 md[32], ref[32], *buf;
	char		 hex[65];
	size_t		 i, len = 1 << 20;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		sha256_buf(v[i].in, strlen(v[i].in), md);
		hex_encode(md, sizeof(md), hex);
		cr_assert_str_eq(hex, v[i].hex, "vector %zu", i);
	}
	buf = xmalloc(len);
	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 131 + (i >> 8));
	for (i = 0; i <= 200; i++) {
		sha256_buf(buf, i, md);
		crypto_hash_sha256(ref, buf, i);
		cr_assert_eq(memcmp(md, ref, 32), 0, "length %zu", i);
	}
	sha256_buf(buf, len, md);
	crypto_hash_sha256(ref, buf, len);
	cr_assert_eq(memcmp(md, ref, 32), 0, "length %zu", len);
	free(buf);
}

Test(sign, sha256_buf_is_sha256)
{
	cr_assert_null(sha256_accel, "OpenSSL's chosen before asked for");
	sha256_check();
	cr_assert_eq(sha256_use_openssl(), 0);
	cr_assert_not_null(sha256_accel);
	sha256_check();
}

/* Ed25519 from OpenSSL, a second library: sig over msg with the seed. */
static void
ossl_sign(const unsigned char seed[32], const uint8_t *msg, size_t len,
    unsigned char sig[64])
{
	EVP_PKEY	*k;
	EVP_MD_CTX	*ctx;
	size_t		 slen = 64;

	cr_assert_not_null(k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519,
	    NULL, seed, 32));
	cr_assert_not_null(ctx = EVP_MD_CTX_new());
	cr_assert_eq(EVP_DigestSignInit(ctx, NULL, NULL, NULL, k), 1);
	cr_assert_eq(EVP_DigestSign(ctx, sig, &slen, msg, len), 1);
	cr_assert_eq(slen, 64);
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(k);
}

static int
ossl_verify(const unsigned char pk[32], const uint8_t *msg, size_t len,
    const unsigned char sig[64])
{
	EVP_PKEY	*k;
	EVP_MD_CTX	*ctx;
	int		 rv;

	cr_assert_not_null(k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519,
	    NULL, pk, 32));
	cr_assert_not_null(ctx = EVP_MD_CTX_new());
	cr_assert_eq(EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k), 1);
	rv = EVP_DigestVerify(ctx, sig, 64, msg, len);
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(k);
	return rv == 1;
}

/*
 * The signature is plain Ed25519 (RFC 8032) over the grant's exact bytes,
 * whichever library computes it: policyd's (sign_grant, libsodium) is
 * byte for byte the one OpenSSL makes from the same key over the same
 * bytes, for grants of many sizes, and OpenSSL verifies it.  A grant
 * changed anywhere, cut short or extended fails both sign_verify and
 * OpenSSL.  (OpenSSL's Ed25519 was measured slower on this CPU, see
 * bench/README.md; this keeps any change of library honest.)
 */
Test(sign, signature_is_ed25519_over_the_grant_bytes)
{
	/* RFC 8032, 7.1, TEST 1: the libraries agree with the standard. */
	static const char rfc_sk[] = "9d61b19deffd5a60ba844af492ec2cc4"
	    "4449c5697b326919703bac031cae7f60";
	static const char rfc_sig[] = "e5564300c360ac729086e2cc806e828a"
	    "84877f1eb8e5d974d873e06522490155"
	    "5fb8821590a33bacc61e39701cf9b46b"
	    "d25bf5f0595bbe24655141438e7a100b";
	struct fixture		 fx;
	struct testpol		 tp;
	Sbx__V1__PolicyGrant	 g, *got;
	Sbx__V1__SignedPolicy	 sp;
	struct sign_key		*key;
	unsigned char		 seed[32], pk[32], sk[64], sig[64];
	unsigned char		 ref[64];
	char			 hash[POLICY_HASH_HEX], err[256], tid[1200];
	char			 hex[129];
	int64_t			 now = now_s();
	size_t			 at;

	cr_assert_eq(sodium_init() >= 0, 1);
	cr_assert_eq(sodium_hex2bin(seed, 32, rfc_sk, 64, NULL, NULL, NULL),
	    0);
	crypto_sign_seed_keypair(pk, sk, seed);
	crypto_sign_detached(sig, NULL, (const unsigned char *)"", 0, sk);
	hex_encode(sig, 64, hex);
	cr_assert_str_eq(hex, rfc_sig, "libsodium: %s", hex);
	ossl_sign(seed, (const uint8_t *)"", 0, sig);
	hex_encode(sig, 64, hex);
	cr_assert_str_eq(hex, rfc_sig, "OpenSSL: %s", hex);

	fx_setup(&fx);
	key = load_key(&fx);
	load_pub(&fx, pk);
	testpol_init(&tp);
	for (size_t i = 0; i < 300; i++) {
		/* Task ids of 1 to 1,196 bytes: grants of many sizes,
		 * across SHA-512's block boundaries. */
		memset(tid, 'a' + (int)(i % 26), sizeof(tid));
		tid[1 + (i * 4) % (sizeof(tid) - 4)] = '\0';
		grant_init(&g, &tp, hash);
		g.task_id = tid;
		g.expires_at = now + 900 + (int64_t)i;
		cr_assert_eq(sign_grant(key, &g, &sp), 0);
		cr_assert_eq(sp.signature.len, 64);
		ossl_sign(key->sk, sp.grant.data, sp.grant.len, ref);
		cr_assert_eq(memcmp(sp.signature.data, ref, 64), 0,
		    "grant %zu (%zu bytes): not OpenSSL's signature", i,
		    sp.grant.len);
		crypto_sign_detached(ref, NULL, sp.grant.data, sp.grant.len,
		    key->sk);
		cr_assert_eq(memcmp(sp.signature.data, ref, 64), 0);
		cr_assert(ossl_verify(pk, sp.grant.data, sp.grant.len,
		    sp.signature.data), "OpenSSL does not verify grant %zu", i);

		/* Tampered: one byte somewhere, then one byte more. */
		at = (i * 7919) % sp.grant.len;
		sp.grant.data[at] ^= (uint8_t)(1u << (i % 8));
		cr_assert_null(sign_verify(pk, &sp, now, err, sizeof(err)),
		    "grant %zu with byte %zu changed verifies", i, at);
		cr_assert_not(ossl_verify(pk, sp.grant.data, sp.grant.len,
		    sp.signature.data));
		sp.grant.data[at] ^= (uint8_t)(1u << (i % 8));
		sp.grant.data = xreallocarray(sp.grant.data, sp.grant.len + 1,
		    1);
		sp.grant.data[sp.grant.len++] = 0;
		cr_assert_null(sign_verify(pk, &sp, now, err, sizeof(err)),
		    "grant %zu with a byte appended verifies", i);
		sp.grant.len--;
		/* Restored, it verifies: the failures were the changes. */
		got = sign_verify(pk, &sp, now, err, sizeof(err));
		cr_assert_not_null(got, "verify: %s", err);
		sbx__v1__policy_grant__free_unpacked(got, NULL);
		sign_signed_clear(&sp);
	}
	sign_key_free(key);
	fx_teardown(&fx);
}

/* sha256_new/update/final (launchd-sbx's image and pool digests) is
 * SHA-256 however the input is cut: every split of a buffer across the
 * block boundaries, and many small pieces, against libsodium's. */
Test(sign, sha256_pieces_are_sha256)
{
	unsigned char	 buf[300], md[32], ref[32];
	struct sha256	*s;
	size_t		 i, cut;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	crypto_hash_sha256(ref, buf, sizeof(buf));
	for (cut = 0; cut <= sizeof(buf); cut++) {
		cr_assert_not_null(s = sha256_new());
		cr_assert_eq(sha256_update(s, buf, cut), 0);
		cr_assert_eq(sha256_update(s, buf + cut, sizeof(buf) - cut),
		    0);
		cr_assert_eq(sha256_final(s, md), 0);
		cr_assert_eq(memcmp(md, ref, 32), 0, "cut at %zu", cut);
	}
	cr_assert_not_null(s = sha256_new());
	for (i = 0; i < sizeof(buf); i++)
		cr_assert_eq(sha256_update(s, buf + i, 1), 0);
	cr_assert_eq(sha256_final(s, md), 0);
	cr_assert_eq(memcmp(md, ref, 32), 0, "one byte at a time");
	/* Nothing hashed: the empty string's digest. */
	cr_assert_not_null(s = sha256_new());
	cr_assert_eq(sha256_final(s, md), 0);
	crypto_hash_sha256(ref, buf, 0);
	cr_assert_eq(memcmp(md, ref, 32), 0, "empty");
	/* Released unfinished (an error path) leaks nothing (SAN=1). */
	cr_assert_not_null(s = sha256_new());
	cr_assert_eq(sha256_update(s, buf, 10), 0);
	sha256_free(s);
	sha256_free(NULL);
}
