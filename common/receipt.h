/*
 * receipt.h: policyd's signed receipt of one execution (receipt.proto):
 * the task, the execution, the exact grant it ran under, its exit status
 * and each released output's name, type, size and SHA-256, signed with
 * the grant's key over RECEIPT_SIGN_CONTEXT followed by the receipt's
 * exact encoded bytes.
 */
#ifndef SBX_RECEIPT_H
#define SBX_RECEIPT_H

#include <stddef.h>

#include "sbx/v1/exec.pb-c.h"
#include "sbx/v1/receipt.pb-c.h"
#include "sign.h"

/*
 * Domain separation: the key that signs grants (over their bytes alone)
 * signs a receipt over these 15 bytes, "sbx receipt v1" and a NUL, then
 * the receipt's bytes.  A grant's bytes begin with a protobuf tag, never
 * 0x73 ('s', field 14 as a group, which no grant carries), so neither
 * signature verifies as the other (proto/README.md).
 */
#define RECEIPT_SIGN_CONTEXT		"sbx receipt v1"
#define RECEIPT_SIGN_CONTEXT_LEN	sizeof(RECEIPT_SIGN_CONTEXT)

/* Fill r->key_id (borrowed from key), encode, sign; out's bytes are
 * malloc'd (receipt_signed_clear).  0 or -1. */
int		 receipt_sign(const struct sign_key *, Sbx__V1__Receipt *,
		    Sbx__V1__SignedReceipt *out);
void		 receipt_signed_clear(Sbx__V1__SignedReceipt *);
/*
 * Verify the receipt's signature and key id, then the grant inside it
 * (signature, key, policy hash over its bytes; not its expiry, which a
 * receipt outlives), and that the grant is for the receipt's task and
 * execution, is no preview, and has the receipt's policy hash.  The
 * decoded receipt (sbx__v1__receipt__free_unpacked), or NULL with err.
 */
Sbx__V1__Receipt *receipt_verify(const unsigned char pk[32],
		    const Sbx__V1__SignedReceipt *, char *err, size_t errlen);
/* Does a verified receipt say what res says: task, execution, policy
 * hash, exit status and every released output?  0, or -1 with err naming
 * the first difference. */
int		 receipt_match(const Sbx__V1__Receipt *,
		    const Sbx__V1__ExecutionResult *, char *err,
		    size_t errlen);

#endif
