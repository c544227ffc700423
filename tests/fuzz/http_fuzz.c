/*
 * http_fuzz.c: libFuzzer target for egressd's request parser: the strict
 * head check, libhttp-parser with egressd's framing checks, the target
 * and Host canonicalisation, and the rebuilt head, the way proxy.c drives
 * them.  Nothing here may crash, leak or read out of bounds, whatever
 * bytes a sandbox sends.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "egressd/egressd.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

static int
fuzz_on_head(struct http_req *r, void *arg)
{
	struct decide_target	 t, ht;
	const struct http_hdr	*h;
	const char		*why;
	struct evbuffer		*out = arg;

	r->max_body = 4096;
	if (r->url == NULL || decide_parse_target(r->url,
	    strlen(r->url), r->p.method == HTTP_CONNECT, &t, &why) == -1)
		return 0;
	if ((h = http_req_header(r, "Host", NULL)) != NULL &&
	    decide_parse_authority(h->value, h->vlen, 0, &ht, &why) == 0)
		decide_target_clear(&ht);
	http_req_head(r, &t, "Authorization", out);
	decide_target_clear(&t);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct http_req	 r;
	struct evbuffer	*out = evbuffer_new();
	const char	*p = (const char *)data, *why, *end;
	long		 used;
	size_t		 off = 0;

	http_req_init(&r, 32);
	r.on_head = fuzz_on_head;
	r.arg = out;
	/* Requests one after another, as on a kept-alive connection. */
	while (off < len) {
		end = memmem(p + off, len - off, "\r\n\r\n", 4);
		if (end == NULL)
			break;
		if (http_head_check(p + off, (size_t)(end - (p + off)) + 4,
		    &why) == -1)
			break;
		used = http_req_feed(&r, p + off, len - off);
		if (used <= 0)
			break;
		off += (size_t)used;
		if (!r.complete)
			break;
		http_req_reset(&r);
	}
	http_req_clear(&r);
	evbuffer_free(out);
	return 0;
}
