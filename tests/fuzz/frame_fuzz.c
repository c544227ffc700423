/*
 * frame_fuzz.c: libFuzzer target for the frame decoder, fed the way the
 * server feeds it (DESIGN.md invariant 10: a daemon survives any bytes its
 * peers send).  The input is read as a stream of frames: each header is
 * checked against the maximum, each complete payload decoded.  Whatever
 * decodes is re-encoded and decoded again; the raw input is also tried as
 * a bare payload.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "frame.h"

#define FUZZ_MAX	(64 * 1024)

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static void
fuzz_payload(const uint8_t *buf, size_t len, size_t max)
{
	Sbx__V1__Envelope	*env, *again;
	Sbx__V1__ErrorCode	 code;
	const char		*why;
	uint8_t			*packed;
	size_t			 plen;

	if ((env = frame_decode(buf, len, max, &code, &why)) == NULL) {
		if (why == NULL)
			abort();	/* every refusal says why */
		return;
	}
	if (env->version != SBX_PROTO_VERSION ||
	    env->body_case == SBX__V1__ENVELOPE__BODY__NOT_SET)
		abort();
	if ((packed = frame_pack(env, &plen)) == NULL)
		abort();
	/*
	 * The re-encoding need not decode: protobuf-c keeps an unknown field
	 * whose tag was an overlong encoding of field 0 and writes it back as
	 * a plain 0x00, which it then refuses.  What does decode must be the
	 * same request.
	 */
	again = frame_decode(packed + FRAME_HDR, plen - FRAME_HDR, SIZE_MAX,
	    &code, &why);
	if (again != NULL) {
		if (again->body_case != env->body_case ||
		    again->request_id != env->request_id)
			abort();
		sbx__v1__envelope__free_unpacked(again, NULL);
	}
	free(packed);
	sbx__v1__envelope__free_unpacked(env, NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	Sbx__V1__ErrorCode	 code;
	const char		*why;
	const uint8_t		*p = data;
	size_t			 left = size, len;

	while (left >= FRAME_HDR) {
		if (frame_parse_header(p, FUZZ_MAX, &len, &code, &why) == -1) {
			if (code != SBX__V1__ERROR_CODE__ERROR_MALFORMED &&
			    code != SBX__V1__ERROR_CODE__ERROR_FRAME_TOO_LARGE)
				abort();
			break;
		}
		if (len == 0 || len > FUZZ_MAX)
			abort();
		if (left - FRAME_HDR < len)
			break;		/* truncated: the server waits for more */
		fuzz_payload(p + FRAME_HDR, len, FUZZ_MAX);
		p += FRAME_HDR + len;
		left -= FRAME_HDR + len;
	}
	fuzz_payload(data, size, FUZZ_MAX);
	return 0;
}
