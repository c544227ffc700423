/*
 * brokerd_test.c: brokerd's store, binding check, token minting and the
 * whole credential decision without sockets.  A sealed value opens only
 * under its own name and kind with the right master key; the master key
 * is refused when others can read it or someone else owns it; a
 * credential is released only for the exact (host, secret, header) the
 * signed policy binds; a minted token carries the right audience,
 * subject and expiry and stops verifying when changed or expired.
 */
#include <sys/stat.h>

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>
#include <sqlite3.h>

#include "policy.h"
#include "sign.h"
#include "util.h"
#include "brokerd/brokerd.h"

#define STATIC	SBX__V1__CREDENTIAL_KIND__CREDENTIAL_STATIC
#define MINTED	SBX__V1__CREDENTIAL_KIND__CREDENTIAL_MINTED

static char	 dir[64];
static char	 keypath[128];
static char	 dbpath[128];

static void
setup(void)
{
	char	 err[256];

	snprintf(dir, sizeof(dir), "/tmp/brokerd_test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(keypath, sizeof(keypath), "%s/master.key", dir);
	snprintf(dbpath, sizeof(dbpath), "%s/brokerd.db", dir);
	cr_assert_eq(bstore_key_create(keypath, err, sizeof(err)), 0, "%s",
	    err);
}

static void
teardown(void)
{
	char	*cmd;

	xasprintf(&cmd, "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
	free(cmd);
}

static struct bstore *
open_store(void)
{
	unsigned char	*key;
	struct bstore	*s;
	char		 err[512];

	key = bstore_key_load(keypath, geteuid(), err, sizeof(err));
	cr_assert_not_null(key, "%s", err);
	s = bstore_open(dbpath, key, err, sizeof(err));
	cr_assert_not_null(s, "%s", err);
	return s;
}

static void
put(struct bstore *s, const char *name, int kind, const char *v)
{
	char	 err[512];

	cr_assert_eq(bstore_put(s, name, (Sbx__V1__CredentialKind)kind,
	    (const unsigned char *)v, strlen(v), err, sizeof(err)), 0, "%s",
	    err);
}

/* ---- store ---- */

TestSuite(store, .init = setup, .fini = teardown);

Test(store, key_created_0400_32_bytes)
{
	struct stat	 st;

	cr_assert_eq(stat(keypath, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0400);
	cr_assert_eq(st.st_size, 32);
}

Test(store, key_never_overwritten)
{
	char	 err[256];

	cr_assert_eq(bstore_key_create(keypath, err, sizeof(err)), -1);
	cr_assert(strstr(err, "already exists") != NULL, "%s", err);
}

Test(store, key_readable_by_others_refused)
{
	char	 err[512];

	cr_assert_eq(chmod(keypath, 0644), 0);
	cr_assert_null(bstore_key_load(keypath, geteuid(), err,
	    sizeof(err)));
	cr_assert(strstr(err, "readable by group or others (mode 0644)") !=
	    NULL, "%s", err);
	cr_assert_eq(chmod(keypath, 0440), 0);
	cr_assert_null(bstore_key_load(keypath, geteuid(), err,
	    sizeof(err)));
	cr_assert_eq(chmod(keypath, 0600), 0);
	cr_assert_null(bstore_key_load(keypath, geteuid() + 1, err,
	    sizeof(err)));
	cr_assert(strstr(err, "not by brokerd's user") != NULL, "%s", err);
}

Test(store, key_wrong_size_refused)
{
	char	 err[512], path[160];
	int	 fd;

	snprintf(path, sizeof(path), "%s/short.key", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0400);
	cr_assert_eq(write(fd, "0123456789", 10), 10);
	close(fd);
	cr_assert_null(bstore_key_load(path, geteuid(), err, sizeof(err)));
	cr_assert(strstr(err, "10 bytes, not 32") != NULL, "%s", err);
}

Test(store, put_get_roundtrip_and_names_only)
{
	struct bstore	*s = open_store();
	struct bsecret	 sec;
	char		 err[512], **names;
	size_t		 n;

	put(s, "b-key", STATIC, "Bearer sk-b");
	put(s, "a-key", STATIC, "sk-a-first");
	put(s, "a-key", STATIC, "sk-a");	/* replaces */
	cr_assert_eq(bstore_get(s, "a-key", &sec, err, sizeof(err)), 1, "%s",
	    err);
	cr_assert_eq(sec.kind, STATIC);
	cr_assert_eq(sec.len, 4);
	cr_assert_str_eq((char *)sec.value, "sk-a");
	bsecret_clear(&sec);
	cr_assert_null(sec.value);
	cr_assert_eq(bstore_get(s, "nope", &sec, err, sizeof(err)), 0);
	cr_assert_eq(bstore_names(s, &names, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(names[0], "a-key");
	cr_assert_str_eq(names[1], "b-key");
	bstore_names_free(names, n);
	bstore_close(s);
}

Test(store, file_never_holds_plaintext)
{
	struct bstore	*s = open_store();
	const char	*v = "plaintext-canary-7f3a9c";
	char		*cmd;

	put(s, "canary", STATIC, v);
	bstore_close(s);
	xasprintf(&cmd, "cat %s/brokerd.db* | grep -a -q %s", dir, v);
	cr_assert_neq(system(cmd), 0, "the database holds the plaintext");
	free(cmd);
}

Test(store, swapped_row_fails_to_open)
{
	struct bstore	*s = open_store();
	struct bsecret	 sec;
	char		 err[512];

	put(s, "name-a", STATIC, "value-of-a");
	put(s, "name-b", STATIC, "value-of-b");
	cr_assert_eq(sqlite3_exec(bstore_db(s), "UPDATE secrets SET "
	    "nonce = (SELECT nonce FROM secrets WHERE name = 'name-a'), "
	    "sealed = (SELECT sealed FROM secrets WHERE name = 'name-a') "
	    "WHERE name = 'name-b'", NULL, NULL, NULL), SQLITE_OK);
	cr_assert_eq(bstore_get(s, "name-b", &sec, err, sizeof(err)), -1);
	cr_assert(strstr(err, "does not open under the master key") != NULL,
	    "%s", err);
	cr_assert_null(sec.value);
	/* The original row still opens. */
	cr_assert_eq(bstore_get(s, "name-a", &sec, err, sizeof(err)), 1);
	bsecret_clear(&sec);
	bstore_close(s);
}

Test(store, kind_changed_fails_to_open)
{
	struct bstore	*s = open_store();
	struct bsecret	 sec;
	char		 err[512];

	put(s, "k", STATIC, "0123456789abcdef0123456789abcdef");
	cr_assert_eq(sqlite3_exec(bstore_db(s), "UPDATE secrets SET kind = 1",
	    NULL, NULL, NULL), SQLITE_OK);
	cr_assert_eq(bstore_get(s, "k", &sec, err, sizeof(err)), -1);
	bstore_close(s);
}

Test(store, other_master_key_fails_to_open)
{
	struct bstore	*s = open_store();
	struct bsecret	 sec;
	unsigned char	*key;
	char		 err[512];

	put(s, "k", STATIC, "value");
	bstore_close(s);
	cr_assert_eq(unlink(keypath), 0);
	cr_assert_eq(bstore_key_create(keypath, err, sizeof(err)), 0);
	key = bstore_key_load(keypath, geteuid(), err, sizeof(err));
	s = bstore_open(dbpath, key, err, sizeof(err));
	cr_assert_not_null(s);
	cr_assert_eq(bstore_get(s, "k", &sec, err, sizeof(err)), -1);
	bstore_close(s);
}

Test(store, bad_values_and_names_refused)
{
	struct bstore	*s = open_store();
	char		 err[512];

	cr_assert_eq(bstore_put(s, "../x", STATIC, (const unsigned char *)"v",
	    1, err, sizeof(err)), -1);
	cr_assert_eq(bstore_put(s, "x", STATIC, (const unsigned char *)
	    "a\r\nX-Injected: 1", 16, err, sizeof(err)), -1);
	cr_assert(strstr(err, "control character at byte 1") != NULL, "%s",
	    err);
	cr_assert_eq(bstore_put(s, "x", STATIC, (const unsigned char *)"", 0,
	    err, sizeof(err)), -1);
	cr_assert_eq(bstore_put(s, "x", MINTED, (const unsigned char *)"short",
	    5, err, sizeof(err)), -1);
	bstore_close(s);
}

/* ---- binding ---- */

static Sbx__V1__Credential *
cred(const char *host, const char *secret, const char *header, int kind)
{
	Sbx__V1__Credential	*c = xcalloc(1, sizeof(*c));

	sbx__v1__credential__init(c);
	c->host = xstrdup(host);
	c->secret = xstrdup(secret);
	c->header = xstrdup(header);
	c->kind = (Sbx__V1__CredentialKind)kind;
	return c;
}

static Sbx__V1__Policy *
policy_with(size_t n, Sbx__V1__Credential **cs)
{
	Sbx__V1__Policy	*p = policy_new();

	free(p->name);
	p->name = xstrdup("broker-unit");
	p->version = 1;
	p->limits->wall_seconds = 60;
	p->credentials = xcalloc(n + 1, sizeof(*p->credentials));
	for (size_t i = 0; i < n; i++)
		p->credentials[i] = cs[i];
	p->n_credentials = n;
	policy_normalize(p);
	return p;
}

Test(binding, exact_triple_only)
{
	Sbx__V1__Credential	*cs[2];
	Sbx__V1__PolicyGrant	 g = SBX__V1__POLICY_GRANT__INIT;
	char			 why[256];

	cs[0] = cred("api.fx.example", "fx-key", "Authorization", STATIC);
	cs[1] = cred("api.other.example", "other-key", "X-Api-Key", STATIC);
	g.policy = policy_with(2, cs);
	cr_assert_not_null(bcontrol_binding(&g, "api.fx.example", "fx-key",
	    "Authorization", why, sizeof(why)));
	cr_assert_not_null(bcontrol_binding(&g, "api.fx.example", "fx-key",
	    "authorization", why, sizeof(why)));
	cr_assert_null(bcontrol_binding(&g, "evil.example", "fx-key",
	    "Authorization", why, sizeof(why)));
	cr_assert(strstr(why, "no credential to host evil.example") != NULL);
	cr_assert_null(bcontrol_binding(&g, "api.fx.example", "other-key",
	    "Authorization", why, sizeof(why)));
	cr_assert(strstr(why, "not secret other-key") != NULL, "%s", why);
	cr_assert_null(bcontrol_binding(&g, "api.fx.example", "fx-key",
	    "X-Api-Key", why, sizeof(why)));
	cr_assert(strstr(why, "to header Authorization, not X-Api-Key") !=
	    NULL, "%s", why);
	/* A host that only differs in case or a trailing dot is another
	 * host here: egressd canonicalises before it asks. */
	cr_assert_null(bcontrol_binding(&g, "API.fx.example", "fx-key",
	    "Authorization", why, sizeof(why)));
	policy_free(g.policy);
}

/* ---- minting ---- */

Test(mint, expiry_bounds)
{
	Sbx__V1__Policy		*p = policy_with(0, NULL);
	Sbx__V1__PolicyGrant	 g = SBX__V1__POLICY_GRANT__INIT;

	g.policy = p;
	g.expires_at = 1000 + 900;
	p->limits->wall_seconds = 60;
	cr_assert_eq(mint_expiry(&g, 1000, 600), 1060);	/* wall */
	p->limits->wall_seconds = 0;
	cr_assert_eq(mint_expiry(&g, 1000, 600), 1600);	/* ttl */
	g.expires_at = 1030;
	cr_assert_eq(mint_expiry(&g, 1000, 600), 1030);	/* grant */
	policy_free(p);
}

Test(mint, token_claims_and_verification)
{
	unsigned char		 seed[32], pk[32], otherpk[32];
	unsigned char		*tok;
	struct mint_claims	 c;
	char			 err[256], *copy;
	size_t			 len;
	int64_t			 now = now_s();

	cr_assert_eq(sodium_init() >= 0, 1);
	randombytes_buf(seed, sizeof(seed));
	mint_public(seed, pk);
	cr_assert_eq(mint_token(seed, "api.fx.example", "task-1", "exec-1",
	    now, now + 60, &tok, &len, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(strncmp((char *)tok, "Bearer ", 7), 0);
	cr_assert_eq(strlen((char *)tok), len);
	cr_assert_eq(mint_verify(pk, (char *)tok, now, &c, err, sizeof(err)),
	    0, "%s", err);
	cr_assert_str_eq(c.aud, "api.fx.example");
	cr_assert_str_eq(c.sub, "task-1");
	cr_assert_str_eq(c.exe, "exec-1");
	cr_assert_eq(c.iat, now);
	cr_assert_eq(c.exp, now + 60);
	mint_claims_clear(&c);

	/* Expired. */
	cr_assert_eq(mint_verify(pk, (char *)tok, now + 60, &c, err,
	    sizeof(err)), -1);
	cr_assert(strstr(err, "expired") != NULL, "%s", err);
	/* Another key. */
	randombytes_buf(seed, sizeof(seed));
	mint_public(seed, otherpk);
	cr_assert_eq(mint_verify(otherpk, (char *)tok, now, &c, err,
	    sizeof(err)), -1);
	/* A changed claim (one character of the payload). */
	copy = xstrdup((char *)tok);
	copy[strchr(copy, '.') - copy + 5] ^= 1;
	cr_assert_eq(mint_verify(pk, copy, now, &c, err, sizeof(err)), -1);
	free(copy);
	sodium_free(tok);
	/* No time left: nothing minted. */
	cr_assert_eq(mint_token(seed, "h", "t", "e", now, now, &tok, &len,
	    err, sizeof(err)), -1);
	cr_assert_null(tok);
}

/* ---- the whole decision ---- */

struct dfx {
	struct brokerd		 bd;
	struct brokerd_conf	 conf;
	struct sign_key		*key;
};

static void
dfx_init(struct dfx *d)
{
	char	 err[512], sk[160], pk[160];

	memset(d, 0, sizeof(*d));
	snprintf(sk, sizeof(sk), "%s/policyd.key", dir);
	snprintf(pk, sizeof(pk), "%s/policyd.pub", dir);
	cr_assert_eq(sign_keygen(sk, pk, err, sizeof(err)), 0, "%s", err);
	d->key = sign_key_load(sk, err, sizeof(err));
	cr_assert_not_null(d->key, "%s", err);
	memcpy(d->bd.trust.pk, d->key->pk, 32);
	d->conf.mint_ttl = 600;
	d->bd.conf = &d->conf;
	d->bd.store = open_store();
}

static void
dfx_sign(struct dfx *d, Sbx__V1__Policy *p, int64_t expires,
    Sbx__V1__SignedPolicy *sp)
{
	Sbx__V1__PolicyGrant	 g = SBX__V1__POLICY_GRANT__INIT;
	char			 hash[POLICY_HASH_HEX];

	cr_assert_eq(policy_hash(p, hash), 0);
	g.policy = p;
	g.policy_hash = hash;
	g.task_id = (char *)"task-9";
	g.execution_id = (char *)"exec-9";
	g.tenant = (char *)"t";
	g.user = (char *)"u";
	g.issued_at = now_s() - 1000;
	g.expires_at = expires;
	cr_assert_eq(sign_grant(d->key, &g, sp), 0);
}

static void
dfx_free(struct dfx *d)
{
	bstore_close(d->bd.store);
	sign_key_free(d->key);
}

static void
ask(struct dfx *d, Sbx__V1__SignedPolicy *sp, const char *host,
    const char *secret, const char *header, struct bcontrol_answer *a)
{
	Sbx__V1__CredentialRequest	 r = SBX__V1__CREDENTIAL_REQUEST__INIT;

	r.signed_ = sp;
	r.host = (char *)host;
	r.secret = (char *)secret;
	r.header = (char *)header;
	bcontrol_decide(&d->bd, &r, now_s(), a);
}

/* ask() for the bound credential at a given time. */
static void
bcontrol_decide_at(struct dfx *d, Sbx__V1__SignedPolicy *sp, int64_t now,
    struct bcontrol_answer *a)
{
	Sbx__V1__CredentialRequest	 r = SBX__V1__CREDENTIAL_REQUEST__INIT;

	r.signed_ = sp;
	r.host = (char *)"api.fx.example";
	r.secret = (char *)"fx-key";
	r.header = (char *)"Authorization";
	bcontrol_decide(&d->bd, &r, now, a);
}

TestSuite(decide, .init = setup, .fini = teardown);

Test(decide, grants_bound_and_refuses_the_rest)
{
	struct dfx		 d;
	struct bcontrol_answer	 a;
	Sbx__V1__Credential	*cs[1];
	Sbx__V1__Policy		*p;
	Sbx__V1__SignedPolicy	 sp = SBX__V1__SIGNED_POLICY__INIT;
	Sbx__V1__SignedPolicy	 old = SBX__V1__SIGNED_POLICY__INIT;

	dfx_init(&d);
	put(d.bd.store, "fx-key", STATIC, "sk-fx-123");
	cs[0] = cred("api.fx.example", "fx-key", "Authorization", STATIC);
	p = policy_with(1, cs);
	dfx_sign(&d, p, now_s() + 300, &sp);

	ask(&d, &sp, "api.fx.example", "fx-key", "Authorization", &a);
	cr_assert_null(a.rule, "%s", a.msg);
	cr_assert_eq(a.len, 9);
	cr_assert_eq(memcmp(a.value, "sk-fx-123", 9), 0);
	cr_assert_str_eq(a.task_id, "task-9");
	cr_assert_str_eq(a.execution_id, "exec-9");
	cr_assert_eq(strlen(a.policy_hash), 64);
	bcontrol_answer_clear(&a);
	cr_assert_null(a.value);

	ask(&d, &sp, "evil.example", "fx-key", "Authorization", &a);
	cr_assert_str_eq(a.rule, RULE_NOT_BOUND);
	cr_assert_null(a.value);
	ask(&d, &sp, "api.fx.example", "fx-key", "Cookie", &a);
	cr_assert_str_eq(a.rule, RULE_NOT_BOUND);
	ask(&d, &sp, "api.fx.example", "fx key", "Authorization", &a);
	cr_assert_str_eq(a.rule, RULE_BAD_REQUEST);

	sp.signature.data[3] ^= 1;
	ask(&d, &sp, "api.fx.example", "fx-key", "Authorization", &a);
	cr_assert_str_eq(a.rule, RULE_SIGNATURE);
	cr_assert_eq(a.code, SBX__V1__ERROR_CODE__ERROR_DENIED);

	dfx_sign(&d, p, now_s() - 1, &old);
	ask(&d, &old, "api.fx.example", "fx-key", "Authorization", &a);
	cr_assert_str_eq(a.rule, RULE_EXPIRED);

	sign_signed_clear(&sp);
	sign_signed_clear(&old);
	policy_free(p);
	dfx_free(&d);
}

Test(decide, minted_token_for_the_bound_host)
{
	struct dfx		 d;
	struct bcontrol_answer	 a;
	struct mint_claims	 c;
	Sbx__V1__Credential	*cs[1];
	Sbx__V1__Policy		*p;
	Sbx__V1__SignedPolicy	 sp = SBX__V1__SIGNED_POLICY__INIT;
	unsigned char		 seed[32], pk[32];
	char			 err[512];
	int64_t			 now = now_s();

	dfx_init(&d);
	randombytes_buf(seed, sizeof(seed));
	mint_public(seed, pk);
	cr_assert_eq(bstore_put(d.bd.store, "tok", MINTED, seed, 32, err,
	    sizeof(err)), 0, "%s", err);
	cs[0] = cred("api.fx.example", "tok", "Authorization", MINTED);
	p = policy_with(1, cs);
	p->limits->wall_seconds = 45;
	dfx_sign(&d, p, now + 300, &sp);
	ask(&d, &sp, "api.fx.example", "tok", "Authorization", &a);
	cr_assert_null(a.rule, "%s", a.msg);
	cr_assert_leq(a.expires_at, now_s() + 45);
	cr_assert_eq(mint_verify(pk, (char *)a.value, now_s(), &c, err,
	    sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.aud, "api.fx.example");
	cr_assert_str_eq(c.sub, "task-9");
	cr_assert_str_eq(c.exe, "exec-9");
	cr_assert_eq(c.exp, a.expires_at);
	mint_claims_clear(&c);
	bcontrol_answer_clear(&a);

	/* The same secret bound as static is refused. */
	sign_signed_clear(&sp);
	p->credentials[0]->kind = STATIC;
	dfx_sign(&d, p, now + 300, &sp);
	ask(&d, &sp, "api.fx.example", "tok", "Authorization", &a);
	cr_assert_str_eq(a.rule, RULE_KIND);
	cr_assert_null(a.value);
	sign_signed_clear(&sp);
	policy_free(p);
	dfx_free(&d);
}

/* Rotation (issue 14): policyd signs with a new key; a grant by the
 * previous one is honoured until it expires, one by a stranger never. */
Test(decide, previous_key_until_expiry_unknown_key_refused)
{
	struct dfx		 d;
	struct bcontrol_answer	 a;
	Sbx__V1__Credential	*cs[1];
	Sbx__V1__Policy		*p;
	Sbx__V1__SignedPolicy	 sp = SBX__V1__SIGNED_POLICY__INIT;
	struct sign_key		*oldk, *stray;
	char			 err[512], sk[160], pk[160];
	int64_t			 exp = now_s() + 300;

	dfx_init(&d);
	put(d.bd.store, "fx-key", STATIC, "sk-fx-123");
	cs[0] = cred("api.fx.example", "fx-key", "Authorization", STATIC);
	p = policy_with(1, cs);
	dfx_sign(&d, p, exp, &sp);	/* by the key about to be previous */

	oldk = d.key;
	snprintf(sk, sizeof(sk), "%s/policyd-new.key", dir);
	snprintf(pk, sizeof(pk), "%s/policyd-new.pub", dir);
	cr_assert_eq(sign_keygen(sk, pk, err, sizeof(err)), 0, "%s", err);
	cr_assert_not_null(d.key = sign_key_load(sk, err, sizeof(err)));
	memcpy(d.bd.trust.pk, d.key->pk, 32);
	memcpy(d.bd.trust.prev, oldk->pk, 32);
	d.bd.trust.has_prev = 1;

	a.code = 0;
	bcontrol_decide_at(&d, &sp, exp - 1, &a);
	cr_assert_null(a.rule, "%s", a.msg);
	bcontrol_answer_clear(&a);
	bcontrol_decide_at(&d, &sp, exp, &a);
	cr_assert_str_eq(a.rule, RULE_EXPIRED);

	/* Without the previous key, the same grant is a bad signature. */
	d.bd.trust.has_prev = 0;
	ask(&d, &sp, "api.fx.example", "fx-key", "Authorization", &a);
	cr_assert_str_eq(a.rule, RULE_SIGNATURE);
	cr_assert_eq(a.code, SBX__V1__ERROR_CODE__ERROR_DENIED);

	/* A key that is neither: refused with the rule id. */
	d.bd.trust.has_prev = 1;
	sign_signed_clear(&sp);
	stray = d.key;
	snprintf(sk, sizeof(sk), "%s/stray.key", dir);
	snprintf(pk, sizeof(pk), "%s/stray.pub", dir);
	cr_assert_eq(sign_keygen(sk, pk, err, sizeof(err)), 0, "%s", err);
	cr_assert_not_null(d.key = sign_key_load(sk, err, sizeof(err)));
	dfx_sign(&d, p, exp, &sp);
	ask(&d, &sp, "api.fx.example", "fx-key", "Authorization", &a);
	cr_assert_str_eq(a.rule, RULE_SIGNATURE);
	cr_assert(strstr(a.msg, "nor its previous key") != NULL, "%s", a.msg);

	sign_signed_clear(&sp);
	sign_key_free(oldk);
	sign_key_free(stray);
	policy_free(p);
	dfx_free(&d);
}
