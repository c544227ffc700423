/*
 * gen.c: writes proto/testdata/ (make vectors).  Every signature in it is
 * made with the seed in proto/testdata/TEST-ONLY-signing-seed.hex, a key
 * for tests only that no deployment may use.  The vectors are fixed: run
 * this only when the formats change, and commit what it writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "policy.h"
#include "receipt.h"
#include "sign.h"
#include "util.h"

static const char	*dir;
static unsigned char	 pk[32], sk[64], pk2[32], sk2[64];
static char		 kid[SIGN_KEYID_HEX];

static void
put(const char *name, const void *buf, size_t len)
{
	char	 path[512];
	FILE	*f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "wb")) == NULL ||
	    fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

static void
putstr(const char *name, const char *s)
{
	put(name, s, strlen(s));
}

/* A receipt's signature: over RECEIPT_SIGN_CONTEXT, then its bytes. */
static void
receipt_sig(unsigned char sig[64], const uint8_t *r, size_t rlen,
    const unsigned char *s)
{
	uint8_t	*m;

	m = xmalloc(RECEIPT_SIGN_CONTEXT_LEN + rlen);
	memcpy(m, RECEIPT_SIGN_CONTEXT, RECEIPT_SIGN_CONTEXT_LEN);
	memcpy(m + RECEIPT_SIGN_CONTEXT_LEN, r, rlen);
	crypto_sign_detached(sig, NULL, m, RECEIPT_SIGN_CONTEXT_LEN + rlen, s);
	free(m);
}

/* An encoded SignedPolicy over grant bytes g (signed with key s). */
static uint8_t *
signed_policy(const uint8_t *g, size_t glen, const unsigned char *s,
    size_t *len)
{
	Sbx__V1__SignedPolicy	 sp;
	unsigned char		 sig[64];
	uint8_t			*out;

	crypto_sign_detached(sig, NULL, g, glen, s);
	sbx__v1__signed_policy__init(&sp);
	sp.grant.data = (uint8_t *)g;
	sp.grant.len = glen;
	sp.signature.data = sig;
	sp.signature.len = 64;
	*len = sbx__v1__signed_policy__get_packed_size(&sp);
	out = xmalloc(*len);
	sbx__v1__signed_policy__pack(&sp, out);
	return out;
}

/* Grant bytes: field 1 = each of pols (raw), then the rest of g. */
static uint8_t *
grant_bytes(Sbx__V1__PolicyGrant *g, const uint8_t *pol, size_t plen,
    int times, size_t *len)
{
	size_t		 rlen, n = 0;
	uint8_t		*rest, *out;

	g->policy = NULL;
	rlen = sbx__v1__policy_grant__get_packed_size(g);
	rest = xmalloc(rlen);
	sbx__v1__policy_grant__pack(g, rest);
	out = xmalloc(times * (plen + 11) + rlen);
	for (int i = 0; i < times; i++) {
		size_t	 v = plen;

		out[n++] = 0x0a;
		do {
			out[n++] = (v & 0x7f) | (v > 0x7f ? 0x80 : 0);
			v >>= 7;
		} while (v != 0);
		memcpy(out + n, pol, plen);
		n += plen;
	}
	memcpy(out + n, rest, rlen);
	free(rest);
	*len = n + rlen;
	return out;
}

int
main(int argc, char *argv[])
{
	unsigned char		 seed[32], seed2[32];
	char			 hex[65], phash[65], uhash[65], buf[8192];
	Sbx__V1__Policy		 pol;
	Sbx__V1__Limits		 lim;
	Sbx__V1__Outputs	 outs;
	char			*types[] = { "text/csv", "text/plain" };
	Sbx__V1__PolicyGrant	 g;
	Sbx__V1__Receipt	 rc;
	Sbx__V1__ReceiptOutput	 ro, *rop[1];
	Sbx__V1__SignedPolicy	*spd;
	Sbx__V1__SignedReceipt	 sr;
	uint8_t			*pb, *ub, *gb, *spb, *rb, *srb;
	size_t			 plen, ulen, glen, splen, rlen, srlen, n1;
	unsigned char		 sig[64];
	/* Field 99, a string "from a newer sbx": no build of sbx knows it. */
	static const uint8_t	 unknown[] = { 0x9a, 0x06, 0x05,
				    'n', 'e', 'w', 'e', 'r' };

	if (argc != 2 || sodium_init() < 0)
		return 1;
	dir = argv[1];
	for (int i = 0; i < 32; i++) {
		seed[i] = (unsigned char)i;
		seed2[i] = (unsigned char)(0xff - i);
	}
	crypto_sign_seed_keypair(pk, sk, seed);
	crypto_sign_seed_keypair(pk2, sk2, seed2);
	sign_key_id(pk, kid);
	hex_encode(seed, 32, hex);
	snprintf(buf, sizeof(buf), "%s\n", hex);
	putstr("TEST-ONLY-signing-seed.hex", buf);
	hex_encode(pk, 32, hex);
	snprintf(buf, sizeof(buf), "ed25519 %s\n", hex);
	putstr("test-signing.pub", buf);
	hex_encode(pk2, 32, hex);
	snprintf(buf, sizeof(buf), "ed25519 %s\n", hex);
	putstr("other-signing.pub", buf);

	sbx__v1__policy__init(&pol);
	sbx__v1__limits__init(&lim);
	sbx__v1__outputs__init(&outs);
	pol.name = "analytics-readonly";
	pol.version = 3;
	pol.isolation = SBX__V1__ISOLATION__ISOLATION_GVISOR;
	pol.image = "python@sha256:"
	    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	lim.cpus_milli = 1000;
	lim.memory_mb = 512;
	lim.wall_seconds = 60;
	pol.limits = &lim;
	outs.allowed_types = types;
	outs.n_allowed_types = 2;
	outs.max_total_kb = 1024;
	pol.outputs = &outs;
	pol.executions_per_task = 5;
	if (policy_canonical(&pol, &pb, &plen) == -1)
		return 1;
	put("policy.bin", pb, plen);
	sign_bytes_hash(pb, plen, phash);
	snprintf(buf, sizeof(buf), "%s\n", phash);
	putstr("policy.sha256", buf);

	sbx__v1__policy_grant__init(&g);
	g.policy_hash = phash;
	g.task_id = "t-vectors";
	g.execution_id = "x-000000000000000000000001";
	g.tenant = "acme";
	g.user = "alice";
	g.issued_at = 1767225600;		/* 2026-01-01T00:00:00Z */
	g.expires_at = 1767225600 + 900;
	g.key_id = kid;
	gb = grant_bytes(&g, pb, plen, 1, &glen);
	spb = signed_policy(gb, glen, sk, &splen);
	put("grant.bin", spb, splen);
	free(spb);
	/* The same grant signed by another key: refused. */
	spb = signed_policy(gb, glen, sk2, &splen);
	put("grant-wrong-key.bin", spb, splen);
	free(spb);

	/* The policy with field 99 added, as a newer policyd sends it:
	 * its hash is over these bytes, unknown field and all. */
	ulen = plen + sizeof(unknown);
	ub = xmalloc(ulen);
	/* After field 1 (name), not at the end: an encoder may write
	 * fields in any order, and a verifier that re-encoded (protobuf-c
	 * puts unknown fields last; others drop them) would differ. */
	n1 = 2 + (size_t)pb[1];
	memcpy(ub, pb, n1);
	memcpy(ub + n1, unknown, sizeof(unknown));
	memcpy(ub + n1 + sizeof(unknown), pb + n1, plen - n1);
	sign_bytes_hash(ub, ulen, uhash);
	snprintf(buf, sizeof(buf), "%s\n", uhash);
	putstr("policy-unknown-field.sha256", buf);
	put("policy-unknown-field.bin", ub, ulen);
	g.policy_hash = uhash;
	{
		uint8_t	*b;
		size_t	 blen;

		b = grant_bytes(&g, ub, ulen, 1, &blen);
		spb = signed_policy(b, blen, sk, &splen);
		put("grant-unknown-field.bin", spb, splen);
		free(spb);
		free(b);
		/* The policy twice: decoders merge, the hash would be of
		 * one; refused however it is signed. */
		g.policy_hash = phash;
		b = grant_bytes(&g, pb, plen, 2, &blen);
		spb = signed_policy(b, blen, sk, &splen);
		put("grant-policy-twice.bin", spb, splen);
		free(spb);
		free(b);
		/* A preview grant: verifies, and runs nothing. */
		g.execution_id = "preview-000000000000000000000002";
		b = grant_bytes(&g, pb, plen, 1, &blen);
		spb = signed_policy(b, blen, sk, &splen);
		put("grant-preview.bin", spb, splen);
		free(spb);
		free(b);
		g.execution_id = "x-000000000000000000000001";
	}

	/* A receipt for the grant's execution, one output. */
	spb = signed_policy(gb, glen, sk, &splen);
	spd = sbx__v1__signed_policy__unpack(NULL, splen, spb);
	sbx__v1__receipt__init(&rc);
	sbx__v1__receipt_output__init(&ro);
	ro.name = "summary.csv";
	ro.type = "text/csv";
	ro.bytes = 42;
	ro.sha256 = "b1946ac92492d2347c6235b4d2611184"
	    "b1946ac92492d2347c6235b4d2611184";
	rop[0] = &ro;
	rc.task_id = g.task_id;
	rc.execution_id = g.execution_id;
	rc.policy_hash = phash;
	rc.grant = spd;
	rc.exit_code = 0;
	rc.outputs = rop;
	rc.n_outputs = 1;
	rc.issued_at = 1767225660;
	rc.key_id = kid;
	rc.tenant = "acme";
	rc.user = "alice";
	rlen = sbx__v1__receipt__get_packed_size(&rc);
	rb = xmalloc(rlen);
	sbx__v1__receipt__pack(&rc, rb);
	sbx__v1__signed_receipt__init(&sr);
	receipt_sig(sig, rb, rlen, sk);
	sr.receipt.data = rb;
	sr.receipt.len = rlen;
	sr.signature.data = sig;
	sr.signature.len = 64;
	srlen = sbx__v1__signed_receipt__get_packed_size(&sr);
	srb = xmalloc(srlen);
	sbx__v1__signed_receipt__pack(&sr, srb);
	put("receipt.bin", srb, srlen);
	/* Signed by another key. */
	receipt_sig(sig, rb, rlen, sk2);
	sbx__v1__signed_receipt__pack(&sr, srb);
	put("receipt-wrong-key.bin", srb, srlen);
	/* The output's size changed after signing (42 -> 43). */
	receipt_sig(sig, rb, rlen, sk);
	ro.bytes = 43;
	sbx__v1__receipt__pack(&rc, rb);
	sbx__v1__signed_receipt__pack(&sr, srb);
	put("receipt-output-changed.bin", srb, srlen);

	sbx__v1__signed_policy__free_unpacked(spd, NULL);
	free(srb);
	free(rb);
	free(spb);
	free(gb);
	free(ub);
	free(pb);
	return 0;
}
