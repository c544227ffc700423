/*
 * trace_test.c: the W3C Trace Context traceparent check (common/trace.c).
 * What the specification accepts passes; every way to be wrong is refused
 * with a message naming what, and no message echoes the value (it could
 * carry a newline into a log line).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static int
check(const char *s, char *err, size_t len)
{
	err[0] = '\0';
	return trace_parent_check(s, err, len);
}

Test(trace, valid)
{
	char	 err[256];
	const char *ok[] = {
		"", TP,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		/* Flags other than sampled are carried, not judged. */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff",
		/* A later version, of version 00's length. */
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"fe-00000000000000000000000000000001-0000000000000001-00",
	};

	cr_assert_eq(trace_parent_check(NULL, err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		cr_assert_eq(check(ok[i], err, sizeof(err)), 0, "%s: %s",
		    ok[i], err);
}

Test(trace, invalid)
{
	static const struct {
		const char	*s, *why;
	} bad[] = {
		{ "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		    "the trace-id is not lowercase hex (offset 4)" },
		{ "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067aa0ba902b7-01",
		    "the parent-id is not lowercase hex (offset 38)" },
		{ "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		    "the version is not lowercase hex (offset 1)" },
		{ "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
		    "the flags is not lowercase hex (offset 54)" },
		{ "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		    "the trace-id is all zeros, which W3C Trace Context "
		    "forbids" },
		{ "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		    "the parent-id is all zeros, which W3C Trace Context "
		    "forbids" },
		{ "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		    "version ff is forbidden" },
		{ "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		    "want '-' before the trace-id at offset 2" },
		{ "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
		    "want '-' before the parent-id at offset 35" },
		{ "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7 01",
		    "want '-' before the flags at offset 52" },
		/* A field shifted by one: the lengths are 2-32-16-2. */
		{ "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
		    "the trace-id is not lowercase hex (offset 34)" },
		{ "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
		    "want 55 characters (version-traceid-parentid-flags, e.g. "
		    "00-<32 hex>-<16 hex>-01), got 54" },
		{ TP "-", "want 55 characters (version-traceid-parentid-flags, "
		    "e.g. 00-<32 hex>-<16 hex>-01), got more than 55" },
		/* A later version's extra fields are not carried either. */
		{ "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-ab",
		    "want 55 characters (version-traceid-parentid-flags, e.g. "
		    "00-<32 hex>-<16 hex>-01), got more than 55" },
		/* Whitespace around it is not trimmed: it is refused. */
		{ " " TP, "want 55 characters (version-traceid-parentid-flags, "
		    "e.g. 00-<32 hex>-<16 hex>-01), got more than 55" },
		{ "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0\n",
		    "the flags is not lowercase hex (offset 54)" },
		{ "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7\n01",
		    "want '-' before the flags at offset 52" },
	};
	char	 err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(check(bad[i].s, err, sizeof(err)), -1, "%zu: "
		    "accepted", i);
		cr_assert_str_eq(err, bad[i].why, "%zu", i);
		cr_assert_null(strchr(err, '\n'));
	}
}

/* An unbounded value is judged by its first 56 bytes: no strlen of it. */
Test(trace, long_value)
{
	static char	 big[1 << 20];
	char		 err[256];

	memset(big, 'a', sizeof(big) - 1);
	cr_assert_eq(check(big, err, sizeof(err)), -1);
	cr_assert(strstr(err, "got more than 55") != NULL, "%s", err);
	/* And a short buffer for the message is not overrun. */
	cr_assert_eq(trace_parent_check(big, err, 8), -1);
	cr_assert_eq(strlen(err), 7);
}
