/*
 * http_resp_fuzz.c: libFuzzer target for egressd's response parser
 * (proxy_http.c), fed the way proxy_relay() feeds it: the head exactly,
 * then the body in pieces whose sizes the input chooses.  Whatever an
 * upstream sends, nothing may crash or read out of bounds, and the
 * accounting behind max_response_kb must hold (issue 10): the bytes
 * counted against the cap are every byte consumed after the head, no
 * more, and never fewer than the body bytes they carry.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egressd/egressd.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct http_resp r;
	const char	*p, *end, *why;
	size_t		 off, n, fed = 0, step;
	long		 used;
	uint64_t	 cap;

	if (len < 2)
		return 0;
	/* The first two bytes: the cap and the size of the pieces. */
	cap = (uint64_t)data[0] * 64;
	step = (size_t)data[1] % 64 + 1;
	p = (const char *)data + 2;
	len -= 2;
	if ((end = memmem(p, len, "\r\n\r\n", 4)) == NULL)
		return 0;
	n = (size_t)(end - p) + 4;
	if (http_head_check(p, n, &why) == -1)
		return 0;
	http_resp_init(&r, 32, 0, cap);
	used = http_resp_feed(&r, p, n);
	if (used < 0 || !r.headers_done) {
		http_resp_clear(&r);
		return 0;
	}
	off = (size_t)used;
	while (off < len && !r.complete) {
		n = len - off < step ? len - off : step;
		if ((used = http_resp_feed(&r, p + off, n)) < 0)
			break;
		if ((size_t)used > n)
			abort();
		fed += (size_t)used;
		off += (size_t)used;
		if (r.wire_bytes > fed || r.body_bytes > r.wire_bytes ||
		    r.wire_bytes > cap)
			abort();
		if (used == 0 && !r.complete)
			break;
	}
	http_resp_clear(&r);
	return 0;
}
