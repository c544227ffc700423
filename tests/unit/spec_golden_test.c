/*
 * spec_golden_test.c: launchd-sbx's spec renderer against
 * tests/golden/spec, byte for byte.  The files were written by the
 * jansson-based renderer it replaced (tests/unit/spec_cases.h says how),
 * so a difference is a change in what a runtime reads: if it is meant,
 * rewrite the files with build/bin/specgolden and review the diff.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launchd-sbx/spec.h"
#include "tests/unit/spec_cases.h"

#define GOLDEN_DIR	"tests/golden/spec"

static char *
slurp(const char *path, size_t *len)
{
	FILE	*f = fopen(path, "r");
	char	*b;
	long	 n;

	cr_assert_not_null(f, "%s: %s (run from the top of the tree)", path,
	    strerror(errno));
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	cr_assert_geq(n, 0);
	rewind(f);
	b = malloc((size_t)n + 1);
	cr_assert_not_null(b);
	cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
	b[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return b;
}

/* Where two texts part: the line, for the failure message. */
static size_t
first_diff_line(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t	 i, line = 1;

	for (i = 0; i < alen && i < blen && a[i] == b[i]; i++)
		if (a[i] == '\n')
			line++;
	return line;
}

Test(spec_golden, every_case_renders_byte_for_byte)
{
	struct spec_params	 sp;
	char			 path[256], err[256], *want, *got;
	size_t			 i, wlen, glen, bad = 0;

	for (i = 0; i < SPEC_NCASES; i++) {
		const struct spec_case	*c = &spec_cases[i];

		snprintf(path, sizeof(path), GOLDEN_DIR "/%s.json", c->name);
		want = slurp(path, &wlen);
		spec_case_params(c, &sp);
		got = spec_render(&sp, &glen, err, sizeof(err));
		cr_expect_not_null(got, "%s: %s", c->name, err);
		if (got != NULL && (glen != wlen ||
		    memcmp(got, want, wlen) != 0)) {
			cr_log_error("%s: differs from %s from line %zu "
			    "(%zu bytes, want %zu)", c->name, path,
			    first_diff_line(got, glen, want, wlen), glen, wlen);
			bad++;
		}
		free(got);
		free(want);
	}
	cr_assert_eq(bad, 0, "%zu of %zu specs differ from %s", bad,
	    SPEC_NCASES, GOLDEN_DIR);
}

/* Every file is a case: none left behind when a case goes. */
Test(spec_golden, every_file_is_a_case)
{
	char	 cmd[128];
	FILE	*p;
	int	 n = -1;

	snprintf(cmd, sizeof(cmd), "ls " GOLDEN_DIR "/*.json | wc -l");
	cr_assert_not_null(p = popen(cmd, "r"));
	cr_assert_eq(fscanf(p, "%d", &n), 1);
	pclose(p);
	cr_assert_eq((size_t)n, SPEC_NCASES);
}
