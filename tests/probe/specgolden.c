/*
 * specgolden.c: write tests/golden/spec/<name>.json, the runtime spec
 * launchd-sbx renders for each parameter set of tests/unit/spec_cases.h,
 * exactly as it lands in config.json.  tests/unit/spec_golden_test.c
 * compares the renderer with these files; run this only when the spec is
 * meant to change, and review the diff.
 *
 *   specgolden DIR
 *
 * The files were first written by the jansson-based spec_build() (and a
 * copy of pool.c's pool_respec()), before spec.c became the libc-only
 * renderer: see this file's history.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launchd-sbx/spec.h"
#include "tests/unit/spec_cases.h"

int
main(int argc, char **argv)
{
	struct spec_params	 sp;
	char			 path[4096], err[512], *text;
	size_t			 i, len;
	FILE			*f;

	if (argc != 2) {
		fprintf(stderr, "usage: specgolden DIR\n");
		return 2;
	}
	for (i = 0; i < SPEC_NCASES; i++) {
		const struct spec_case	*c = &spec_cases[i];

		spec_case_params(c, &sp);
		if ((text = spec_render(&sp, &len, err, sizeof(err))) == NULL) {
			fprintf(stderr, "specgolden: %s: %s\n", c->name, err);
			return 1;
		}
		snprintf(path, sizeof(path), "%s/%s.json", argv[1], c->name);
		if ((f = fopen(path, "w")) == NULL ||
		    fwrite(text, 1, len, f) != len || fclose(f) == EOF) {
			fprintf(stderr, "specgolden: %s: %s\n", path,
			    strerror(errno));
			return 1;
		}
		free(text);
	}
	printf("specgolden: wrote %zu files to %s\n", SPEC_NCASES, argv[1]);
	return 0;
}
