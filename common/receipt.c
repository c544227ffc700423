/*
 * receipt.c: signing and verifying execution receipts, with libsodium.
 *
 * Invariant: a receipt verifies only if policyd's key signed
 * RECEIPT_SIGN_CONTEXT followed by its exact bytes (never a grant's
 * signature over the same bytes), and the grant inside it verifies under the same key for the
 * same task and execution with the same policy hash; receipt_match then
 * ties it to one result, so a receipt from another execution, or with
 * an output changed, is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "receipt.h"
#include "util.h"

/* RECEIPT_SIGN_CONTEXT then b: what a receipt's signature covers
 * (malloc'd, *mlen bytes). */
static uint8_t *
receipt_message(const uint8_t *b, size_t len, size_t *mlen)
{
	uint8_t	*m;

	*mlen = RECEIPT_SIGN_CONTEXT_LEN + len;
	m = xmalloc(*mlen);
	memcpy(m, RECEIPT_SIGN_CONTEXT, RECEIPT_SIGN_CONTEXT_LEN);
	memcpy(m + RECEIPT_SIGN_CONTEXT_LEN, b, len);
	return m;
}

int
receipt_sign(const struct sign_key *key, Sbx__V1__Receipt *r,
    Sbx__V1__SignedReceipt *out)
{
	uint8_t	*m;
	size_t	 len, mlen;
	int	 rc;

	sbx__v1__signed_receipt__init(out);
	r->key_id = (char *)key->key_id;
	len = sbx__v1__receipt__get_packed_size(r);
	out->receipt.data = xmalloc(len);
	out->receipt.len = sbx__v1__receipt__pack(r, out->receipt.data);
	out->signature.data = xmalloc(crypto_sign_BYTES);
	out->signature.len = crypto_sign_BYTES;
	if (out->receipt.len != len) {
		receipt_signed_clear(out);
		return -1;
	}
	m = receipt_message(out->receipt.data, out->receipt.len, &mlen);
	rc = crypto_sign_detached(out->signature.data, NULL, m, mlen,
	    key->sk);
	free(m);
	if (rc != 0) {
		receipt_signed_clear(out);
		return -1;
	}
	return 0;
}

void
receipt_signed_clear(Sbx__V1__SignedReceipt *sr)
{
	if (sr == NULL)
		return;
	free(sr->receipt.data);
	free(sr->signature.data);
	sr->receipt.data = sr->signature.data = NULL;
	sr->receipt.len = sr->signature.len = 0;
}

static int
receipt_streq(const char *a, const char *b)
{
	return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

Sbx__V1__Receipt *
receipt_verify(const unsigned char pk[32], const Sbx__V1__SignedReceipt *sr,
    char *err, size_t errlen)
{
	Sbx__V1__Receipt	*r;
	Sbx__V1__PolicyGrant	*g = NULL;
	char			 kid[SIGN_KEYID_HEX], gerr[256];
	uint8_t			*m;
	size_t			 mlen;
	int			 rc;

	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium does not initialise");
		return NULL;
	}
	if (sr == NULL || sr->receipt.data == NULL || sr->receipt.len == 0) {
		snprintf(err, errlen, "no receipt");
		return NULL;
	}
	if (sr->signature.data == NULL ||
	    sr->signature.len != crypto_sign_BYTES) {
		snprintf(err, errlen, "receipt signature is %zu bytes, not %d",
		    sr->signature.len, crypto_sign_BYTES);
		return NULL;
	}
	m = receipt_message(sr->receipt.data, sr->receipt.len, &mlen);
	rc = crypto_sign_verify_detached(sr->signature.data, m, mlen, pk);
	free(m);
	if (rc != 0) {
		snprintf(err, errlen, "receipt signature does not verify");
		return NULL;
	}
	r = sbx__v1__receipt__unpack(NULL, sr->receipt.len, sr->receipt.data);
	if (r == NULL) {
		snprintf(err, errlen, "signed receipt does not decode");
		return NULL;
	}
	sign_key_id(pk, kid);
	if (!receipt_streq(r->key_id, kid)) {
		snprintf(err, errlen, "receipt names signing key %.32s, but "
		    "it verifies with key %s", r->key_id, kid);
		goto fail;
	}
	if ((g = sign_verify_bytes(pk, r->grant, gerr, sizeof(gerr))) ==
	    NULL) {
		snprintf(err, errlen, "receipt's grant: %s", gerr);
		goto fail;
	}
	if (sign_is_preview(g)) {
		snprintf(err, errlen, "receipt's grant is a preview");
		goto fail;
	}
	if (!receipt_streq(g->task_id, r->task_id) ||
	    !receipt_streq(g->execution_id, r->execution_id) ||
	    !receipt_streq(g->policy_hash, r->policy_hash)) {
		snprintf(err, errlen, "receipt for task %.64s execution %.64s "
		    "policy %.64s carries the grant of task %.64s execution "
		    "%.64s policy %.64s", r->task_id, r->execution_id,
		    r->policy_hash, g->task_id, g->execution_id,
		    g->policy_hash);
		goto fail;
	}
	sbx__v1__policy_grant__free_unpacked(g, NULL);
	return r;
fail:
	if (g != NULL)
		sbx__v1__policy_grant__free_unpacked(g, NULL);
	sbx__v1__receipt__free_unpacked(r, NULL);
	return NULL;
}

int
receipt_match(const Sbx__V1__Receipt *r, const Sbx__V1__ExecutionResult *res,
    char *err, size_t errlen)
{
	const Sbx__V1__ReceiptOutput	*ro;
	const Sbx__V1__ReleasedOutput	*o;

	if (!receipt_streq(r->task_id, res->task_id) ||
	    !receipt_streq(r->execution_id, res->execution_id)) {
		snprintf(err, errlen, "receipt is for task %.64s execution "
		    "%.64s, the result for task %.64s execution %.64s",
		    r->task_id, r->execution_id, res->task_id,
		    res->execution_id);
		return -1;
	}
	if (res->policy == NULL ||
	    !receipt_streq(r->policy_hash, res->policy->hash)) {
		snprintf(err, errlen, "receipt's policy %.64s is not the "
		    "result's", r->policy_hash);
		return -1;
	}
	if (r->exit_code != res->exit_code || r->signal != res->signal) {
		snprintf(err, errlen, "receipt says exit %d signal %d, the "
		    "result exit %d signal %d", r->exit_code, r->signal,
		    res->exit_code, res->signal);
		return -1;
	}
	if (r->n_outputs != res->n_outputs) {
		snprintf(err, errlen, "receipt lists %zu outputs, the result "
		    "%zu", r->n_outputs, res->n_outputs);
		return -1;
	}
	for (size_t i = 0; i < r->n_outputs; i++) {
		ro = r->outputs[i];
		o = res->outputs[i];
		if (!receipt_streq(ro->name, o->name) ||
		    !receipt_streq(ro->type, o->type) ||
		    ro->bytes != o->bytes ||
		    !receipt_streq(ro->sha256, o->sha256)) {
			snprintf(err, errlen, "output %zu: the receipt says "
			    "%.200s %.64s %llu bytes sha256 %.64s, the result "
			    "%.200s %.64s %llu bytes sha256 %.64s", i + 1,
			    ro->name, ro->type, (unsigned long long)ro->bytes,
			    ro->sha256, o->name, o->type,
			    (unsigned long long)o->bytes, o->sha256);
			return -1;
		}
	}
	return 0;
}
