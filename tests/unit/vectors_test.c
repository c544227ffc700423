/*
 * vectors_test.c: sbx's own verifiers against proto/testdata/ (the test
 * vectors every client checks; tests/vectors/gen.c wrote them with a key
 * for tests only).  The policy hash is over the policy's exact bytes in
 * the grant, so a grant whose policy carries a field this build does not
 * know verifies; and the attacks: a grant re-encoded with an extra field,
 * the policy twice, a preview grant presented to run, a wrong key, a
 * receipt with an output changed or from another execution.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "receipt.h"
#include "sign.h"
#include "util.h"

#define TD	"proto/testdata/"
#define ISSUED	1767225600

static uint8_t *
slurp(const char *name, size_t *len)
{
	FILE		*f;
	uint8_t		*buf;
	long		 n;

	f = fopen(name, "rb");
	cr_assert_not_null(f, "%s: cannot open (run from the repository)",
	    name);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = xmalloc((size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void
pubkey(const char *name, unsigned char pk[32])
{
	char	 err[256];

	cr_assert_eq(sign_pubkey_load(name, pk, err, sizeof(err)), 0, "%s",
	    err);
}

/* The message of type d in testdata file name (it must decode). */
static void *
load_msg(const char *name, const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage	*m;
	uint8_t			*b;
	size_t			 n;

	b = slurp(name, &n);
	m = protobuf_c_message_unpack(d, NULL, n, b);
	free(b);
	cr_assert_not_null(m, "%s does not decode", name);
	return m;
}

static Sbx__V1__SignedPolicy *
load_signed(const char *name)
{
	return load_msg(name, &sbx__v1__signed_policy__descriptor);
}

static Sbx__V1__SignedReceipt *
load_receipt(const char *name)
{
	return load_msg(name, &sbx__v1__signed_receipt__descriptor);
}

/* The hex in name, without its newline. */
static void
hexfile(const char *name, char out[65])
{
	uint8_t	*b;
	size_t	 n;

	b = slurp(name, &n);
	cr_assert_geq(n, 64);
	memcpy(out, b, 64);
	out[64] = '\0';
	free(b);
}

Test(vectors, policy_hash_is_over_the_bytes)
{
	uint8_t	*b;
	size_t	 n;
	char	 want[65], got[65];

	b = slurp(TD "policy.bin", &n);
	hexfile(TD "policy.sha256", want);
	sign_bytes_hash(b, n, got);
	cr_assert_str_eq(got, want);
	free(b);
}

Test(vectors, grant_verifies)
{
	Sbx__V1__SignedPolicy	*sp;
	Sbx__V1__PolicyGrant	*g;
	unsigned char		 pk[32];
	char			 err[256], want[65];

	pubkey(TD "test-signing.pub", pk);
	hexfile(TD "policy.sha256", want);
	sp = load_signed(TD "grant.bin");
	g = sign_verify(pk, sp, ISSUED + 1, err, sizeof(err));
	cr_assert_not_null(g, "%s", err);
	cr_assert_str_eq(g->policy_hash, want);
	cr_assert_str_eq(g->policy->name, "analytics-readonly");
	sbx__v1__policy_grant__free_unpacked(g, NULL);
	/* The vectors are long expired. */
	cr_assert_null(sign_verify(pk, sp, ISSUED + 900, err, sizeof(err)));
	cr_assert(strstr(err, "expired") != NULL, "%s", err);
	sbx__v1__signed_policy__free_unpacked(sp, NULL);
}

/* This build's Policy has no field 99: it is an old client of that
 * grant, and the hash still holds. */
Test(vectors, unknown_field_grant_verifies)
{
	Sbx__V1__SignedPolicy	*sp;
	Sbx__V1__PolicyGrant	*g;
	unsigned char		 pk[32];
	char			 err[256], want[65], plain[65];

	pubkey(TD "test-signing.pub", pk);
	hexfile(TD "policy-unknown-field.sha256", want);
	hexfile(TD "policy.sha256", plain);
	cr_assert_str_neq(want, plain);
	sp = load_signed(TD "grant-unknown-field.bin");
	g = sign_verify(pk, sp, ISSUED + 1, err, sizeof(err));
	cr_assert_not_null(g, "%s", err);
	cr_assert_str_eq(g->policy_hash, want);
	sbx__v1__policy_grant__free_unpacked(g, NULL);
	sbx__v1__signed_policy__free_unpacked(sp, NULL);
}

static void
refused(const char *grant, const char *pub, const char *why)
{
	Sbx__V1__SignedPolicy	*sp;
	unsigned char		 pk[32];
	char			 err[256];

	pubkey(pub, pk);
	sp = load_signed(grant);
	err[0] = '\0';
	cr_assert_null(sign_verify(pk, sp, ISSUED + 1, err, sizeof(err)),
	    "%s verified", grant);
	cr_assert(strstr(err, why) != NULL, "%s: %s", grant, err);
	sbx__v1__signed_policy__free_unpacked(sp, NULL);
}

Test(vectors, wrong_key_refused)
{
	refused(TD "grant-wrong-key.bin", TD "test-signing.pub",
	    "does not verify");
	refused(TD "grant.bin", TD "other-signing.pub", "does not verify");
}

Test(vectors, policy_twice_refused)
{
	refused(TD "grant-policy-twice.bin", TD "test-signing.pub",
	    "twice");
}

/* A preview grant verifies as policyd's, and no daemon runs it. */
Test(vectors, preview_refused)
{
	Sbx__V1__SignedPolicy	*sp;
	Sbx__V1__PolicyGrant	*g;
	unsigned char		 pk[32];
	char			 err[256];

	refused(TD "grant-preview.bin", TD "test-signing.pub", "preview");
	pubkey(TD "test-signing.pub", pk);
	sp = load_signed(TD "grant-preview.bin");
	g = sign_verify_bytes(pk, sp, err, sizeof(err));
	cr_assert_not_null(g, "%s", err);
	cr_assert(sign_is_preview(g));
	sbx__v1__policy_grant__free_unpacked(g, NULL);
	sbx__v1__signed_policy__free_unpacked(sp, NULL);
}

/* The grant re-encoded with a field added to its policy, signature
 * kept: refused (a verifier that re-encoded would be fooled the other
 * way round). */
Test(vectors, reencoded_grant_refused)
{
	Sbx__V1__SignedPolicy	*sp;
	Sbx__V1__PolicyGrant	*g;
	unsigned char		 pk[32];
	uint8_t			*old;
	char			 err[256];
	size_t			 n;

	pubkey(TD "test-signing.pub", pk);
	sp = load_signed(TD "grant.bin");
	g = sbx__v1__policy_grant__unpack(NULL, sp->grant.len,
	    sp->grant.data);
	cr_assert_not_null(g);
	g->policy->executions_per_task = 6;
	n = sbx__v1__policy_grant__get_packed_size(g);
	old = sp->grant.data;
	sp->grant.data = xmalloc(n);
	sp->grant.len = sbx__v1__policy_grant__pack(g, sp->grant.data);
	cr_assert_null(sign_verify(pk, sp, ISSUED + 1, err, sizeof(err)));
	cr_assert(strstr(err, "does not verify") != NULL, "%s", err);
	free(sp->grant.data);
	sp->grant.data = old;
	sbx__v1__policy_grant__free_unpacked(g, NULL);
	sbx__v1__signed_policy__free_unpacked(sp, NULL);
}

/* A result the vector receipt is for. */
static void
result_init(Sbx__V1__ExecutionResult *res, Sbx__V1__PolicyRef *ref,
    Sbx__V1__ReleasedOutput *o, Sbx__V1__ReleasedOutput **op, char *hash)
{
	sbx__v1__execution_result__init(res);
	sbx__v1__policy_ref__init(ref);
	sbx__v1__released_output__init(o);
	hexfile(TD "policy.sha256", hash);
	ref->hash = hash;
	res->task_id = "t-vectors";
	res->execution_id = "x-000000000000000000000001";
	res->policy = ref;
	o->name = "summary.csv";
	o->type = "text/csv";
	o->bytes = 42;
	o->sha256 = "b1946ac92492d2347c6235b4d2611184"
	    "b1946ac92492d2347c6235b4d2611184";
	op[0] = o;
	res->outputs = op;
	res->n_outputs = 1;
}

Test(vectors, receipt_verifies_and_matches)
{
	Sbx__V1__SignedReceipt		*sr;
	Sbx__V1__Receipt		*r;
	Sbx__V1__ExecutionResult	 res;
	Sbx__V1__PolicyRef		 ref;
	Sbx__V1__ReleasedOutput		 o, *op[1];
	unsigned char			 pk[32];
	char				 err[512], hash[65];

	pubkey(TD "test-signing.pub", pk);
	sr = load_receipt(TD "receipt.bin");
	r = receipt_verify(pk, sr, err, sizeof(err));
	cr_assert_not_null(r, "%s", err);
	result_init(&res, &ref, &o, op, hash);
	cr_assert_eq(receipt_match(r, &res, err, sizeof(err)), 0, "%s", err);

	/* An output changed in the result. */
	o.sha256 = "00946ac92492d2347c6235b4d2611184"
	    "b1946ac92492d2347c6235b4d2611184";
	cr_assert_eq(receipt_match(r, &res, err, sizeof(err)), -1);
	cr_assert(strstr(err, "output 1") != NULL, "%s", err);
	result_init(&res, &ref, &o, op, hash);
	/* Replayed for another execution of the task. */
	res.execution_id = "x-000000000000000000000002";
	cr_assert_eq(receipt_match(r, &res, err, sizeof(err)), -1);
	cr_assert(strstr(err, "execution") != NULL, "%s", err);
	result_init(&res, &ref, &o, op, hash);
	res.exit_code = 1;
	cr_assert_eq(receipt_match(r, &res, err, sizeof(err)), -1);
	result_init(&res, &ref, &o, op, hash);
	res.n_outputs = 0;
	cr_assert_eq(receipt_match(r, &res, err, sizeof(err)), -1);

	sbx__v1__receipt__free_unpacked(r, NULL);
	sbx__v1__signed_receipt__free_unpacked(sr, NULL);
}

static void
receipt_refused(const char *name, const char *pub, const char *why)
{
	Sbx__V1__SignedReceipt	*sr;
	unsigned char		 pk[32];
	char			 err[512];

	pubkey(pub, pk);
	sr = load_receipt(name);
	err[0] = '\0';
	cr_assert_null(receipt_verify(pk, sr, err, sizeof(err)), "%s "
	    "verified", name);
	cr_assert(strstr(err, why) != NULL, "%s: %s", name, err);
	sbx__v1__signed_receipt__free_unpacked(sr, NULL);
}

Test(vectors, receipt_attacks_refused)
{
	receipt_refused(TD "receipt-output-changed.bin",
	    TD "test-signing.pub", "does not verify");
	receipt_refused(TD "receipt-wrong-key.bin", TD "test-signing.pub",
	    "does not verify");
	receipt_refused(TD "receipt.bin", TD "other-signing.pub",
	    "does not verify");
}

/* A receipt signed by the right key around another execution's grant:
 * the grant inside must be the receipt's. */
Test(vectors, receipt_with_another_grant_refused)
{
	Sbx__V1__SignedReceipt	*sr, out;
	Sbx__V1__Receipt	*r;
	struct sign_key		 key;
	unsigned char		 pk[32], seed[32], *sk;
	char			 err[512], *xid, *kid;

	for (int i = 0; i < 32; i++)
		seed[i] = (unsigned char)i;
	cr_assert_geq(sodium_init(), 0);
	sk = sodium_malloc(64);
	crypto_sign_seed_keypair(pk, sk, seed);
	memcpy(key.pk, pk, 32);
	key.sk = sk;
	sign_key_id(pk, key.key_id);
	sr = load_receipt(TD "receipt.bin");
	r = receipt_verify(pk, sr, err, sizeof(err));
	cr_assert_not_null(r, "%s", err);
	xid = r->execution_id;
	kid = r->key_id;
	r->execution_id = "x-000000000000000000000002";
	cr_assert_eq(receipt_sign(&key, r, &out), 0);
	/* The unpacked receipt owns its strings: give them back. */
	r->execution_id = xid;
	r->key_id = kid;
	cr_assert_null(receipt_verify(pk, &out, err, sizeof(err)));
	cr_assert(strstr(err, "carries the grant of") != NULL, "%s", err);
	receipt_signed_clear(&out);
	sbx__v1__receipt__free_unpacked(r, NULL);
	sbx__v1__signed_receipt__free_unpacked(sr, NULL);
	sodium_free(sk);
}

/*
 * Domain separation: the one key signs grants over their bytes and
 * receipts over RECEIPT_SIGN_CONTEXT followed by theirs, so neither
 * signature stands for the other over the same bytes (both made here
 * with the test-only seed).
 */
Test(vectors, grant_and_receipt_signatures_do_not_cross)
{
	Sbx__V1__SignedReceipt	*sr, asr, out;
	Sbx__V1__SignedPolicy	*sp, asp;
	Sbx__V1__Receipt	*r;
	Sbx__V1__PolicyGrant	*g;
	struct sign_key		 key;
	unsigned char		 pk[32], seed[32], *sk, sig[64];
	char			 err[512], *kid;

	for (int i = 0; i < 32; i++)
		seed[i] = (unsigned char)i;
	cr_assert_geq(sodium_init(), 0);
	sk = sodium_malloc(64);
	crypto_sign_seed_keypair(pk, sk, seed);
	memcpy(key.pk, pk, 32);
	key.sk = sk;
	sign_key_id(pk, key.key_id);

	/* A valid receipt's bytes signed as a grant is (no context). */
	sr = load_receipt(TD "receipt.bin");
	crypto_sign_detached(sig, NULL, sr->receipt.data, sr->receipt.len, sk);
	asr = *sr;
	asr.signature.data = sig;
	asr.signature.len = sizeof(sig);
	r = receipt_verify(pk, &asr, err, sizeof(err));
	if (r != NULL)
		sbx__v1__receipt__free_unpacked(r, NULL);
	cr_assert_null(r, "a grant-style signature verified as a receipt's");
	cr_assert_str_eq(err, "receipt signature does not verify");

	/* grant.bin's own signature, presented as a receipt's over the
	 * grant's bytes. */
	sp = load_signed(TD "grant.bin");
	g = sign_verify_bytes(pk, sp, err, sizeof(err));
	cr_assert_not_null(g, "%s", err);
	sbx__v1__policy_grant__free_unpacked(g, NULL);
	sbx__v1__signed_receipt__init(&asr);
	asr.receipt = sp->grant;
	asr.signature = sp->signature;
	cr_assert_null(receipt_verify(pk, &asr, err, sizeof(err)));
	cr_assert_str_eq(err, "receipt signature does not verify");

	/* The other way: receipt_sign's signature, presented as a grant's
	 * over the same bytes. */
	r = receipt_verify(pk, sr, err, sizeof(err));
	cr_assert_not_null(r, "%s", err);
	kid = r->key_id;
	cr_assert_eq(receipt_sign(&key, r, &out), 0);
	r->key_id = kid;	/* receipt_sign set it to key's */
	sbx__v1__signed_policy__init(&asp);
	asp.grant = out.receipt;
	asp.signature = out.signature;
	cr_assert_null(sign_verify_bytes(pk, &asp, err, sizeof(err)));
	cr_assert_str_eq(err, "signature does not verify");
	receipt_signed_clear(&out);
	sbx__v1__receipt__free_unpacked(r, NULL);
	sbx__v1__signed_policy__free_unpacked(sp, NULL);
	sbx__v1__signed_receipt__free_unpacked(sr, NULL);
	sodium_free(sk);
}

/* The walk over a grant's top-level fields refuses what it cannot read
 * to the end, and finds field 1 wherever it is. */
Test(vectors, policy_bytes_walk)
{
	const uint8_t	*p;
	size_t		 n;
	char		 err[256];
	static const uint8_t ok[] = { 0x12, 0x01, 'h', 0x0a, 0x02, 0x08,
			    0x01, 0x38, 0x05 };
	static const uint8_t trunc[] = { 0x0a, 0x05, 0x08 };
	static const uint8_t group[] = { 0x0a, 0x00, 0x1b };
	static const uint8_t field0[] = { 0x02, 0x00, 0x0a, 0x00 };
	static const uint8_t none[] = { 0x12, 0x01, 'h' };
	static const uint8_t longvarint[] = { 0x0a, 0x00, 0x08, 0xff, 0xff,
			    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			    0x01 };

	cr_assert_eq(sign_grant_policy_bytes(ok, sizeof(ok), &p, &n, err,
	    sizeof(err)), 0, "%s", err);
	cr_assert_eq(n, 2);
	cr_assert_eq(p, ok + 5);
	cr_assert_eq(sign_grant_policy_bytes(trunc, sizeof(trunc), &p, &n,
	    err, sizeof(err)), -1);
	cr_assert_eq(sign_grant_policy_bytes(group, sizeof(group), &p, &n,
	    err, sizeof(err)), -1);
	cr_assert_eq(sign_grant_policy_bytes(field0, sizeof(field0), &p, &n,
	    err, sizeof(err)), -1);
	cr_assert_eq(sign_grant_policy_bytes(none, sizeof(none), &p, &n,
	    err, sizeof(err)), -1);
	cr_assert(strstr(err, "no policy") != NULL, "%s", err);
	cr_assert_eq(sign_grant_policy_bytes(longvarint, sizeof(longvarint),
	    &p, &n, err, sizeof(err)), -1);
}
