/*
 * trace.c: the check of a W3C Trace Context level 1 `traceparent`
 * (https://www.w3.org/TR/trace-context/#traceparent-header).  The value
 * is orchestrator input that ends up in every daemon's audit records and
 * log lines, so the check is strict and total: lowercase hex fields of
 * 2, 32, 16 and 2 digits joined by '-', version not "ff", trace-id and
 * parent-id not all zeros, and exactly TRACE_PARENT_LEN characters.  The
 * specification lets a later version append fields after a further '-';
 * sbx cannot know what they mean and refuses them rather than carry an
 * unbounded value.  Plain libc, no allocation.
 */
#include <stdio.h>
#include <string.h>

#include "trace.h"

static int
trace_hex(const char *s, size_t n, int *zero)
{
	*zero = 1;
	for (size_t i = 0; i < n; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return (int)i;
		if (s[i] != '0')
			*zero = 0;
	}
	return -1;
}

int
trace_parent_check(const char *s, char *err, size_t errlen)
{
	static const struct {
		const char	*name;
		size_t		 off, len;
	} f[] = {
		{ "version", 0, 2 },
		{ "trace-id", 3, 32 },
		{ "parent-id", 36, 16 },
		{ "flags", 53, 2 },
	};
	size_t	 len, i;
	int	 bad, zero;

	if (s == NULL || s[0] == '\0')
		return 0;
	len = strnlen(s, TRACE_PARENT_LEN + 1);
	if (len != TRACE_PARENT_LEN) {
		snprintf(err, errlen, "want %d characters (version-traceid-"
		    "parentid-flags, e.g. 00-<32 hex>-<16 hex>-01), got %s%zu", TRACE_PARENT_LEN,
		    len > TRACE_PARENT_LEN ? "more than " : "",
		    len > TRACE_PARENT_LEN ? (size_t)TRACE_PARENT_LEN : len);
		return -1;
	}
	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (i > 0 && s[f[i].off - 1] != '-') {
			snprintf(err, errlen, "want '-' before the %s at "
			    "offset %zu", f[i].name,
			    f[i].off - 1);
			return -1;
		}
		if ((bad = trace_hex(s + f[i].off, f[i].len, &zero)) != -1) {
			snprintf(err, errlen, "the %s is not lowercase hex "
			    "(offset %zu)", f[i].name,
			    f[i].off + (size_t)bad);
			return -1;
		}
		if (zero && (i == 1 || i == 2)) {
			snprintf(err, errlen, "the %s is all zeros, which W3C "
			    "Trace Context forbids",
			    f[i].name);
			return -1;
		}
	}
	if (s[0] == 'f' && s[1] == 'f') {
		snprintf(err, errlen, "version ff is forbidden");
		return -1;
	}
	return 0;
}
