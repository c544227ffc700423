/*
 * errf_test.c: the error-buffer helper every module reports through
 * (common/errf.c): it writes the sentence, cuts it at the buffer with a
 * NUL, and does nothing for a caller that passes no buffer.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "errf.h"

Test(errf, writes)
{
	char	 err[64];

	errf(err, sizeof(err), "request %s: %d", "r-1", 42);
	cr_assert_str_eq(err, "request r-1: 42");
}

Test(errf, cuts_at_the_buffer)
{
	char	 err[8];

	memset(err, 'x', sizeof(err));
	errf(err, sizeof(err), "%s", "a sentence longer than eight");
	cr_assert_str_eq(err, "a sente");
}

Test(errf, no_buffer)
{
	char	 err[4] = "abc";

	errf(NULL, 64, "%s", "nowhere");
	errf(err, 0, "%s", "nowhere");
	cr_assert_str_eq(err, "abc");
}
