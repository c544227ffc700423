/*
 * spec_libc_main.c: the proof that launchd-sbx's spec renderer needs
 * nothing but libc, for the root monitor that links nothing else.  The
 * Makefile links this with spec.c, seccomp.c, jsonw.c, common/utf8.c and
 * common/name.c and no library at all (no -l, no common/ archive), so a
 * call into jansson, protobuf-c or log.c fails the link; then it renders
 * every case of spec_cases.h.
 */
#include <stdio.h>
#include <stdlib.h>

#include "launchd-sbx/spec.h"
#include "tests/unit/spec_cases.h"

int
main(void)
{
	struct spec_params	 sp;
	char			 err[256], *text;
	size_t			 i, len;

	for (i = 0; i < SPEC_NCASES; i++) {
		spec_case_params(&spec_cases[i], &sp);
		if ((text = spec_render(&sp, &len, err, sizeof(err))) == NULL) {
			fprintf(stderr, "spec_libc: %s: %s\n",
			    spec_cases[i].name, err);
			return 1;
		}
		free(text);
	}
	printf("spec_libc: %zu specs rendered with libc alone\n", SPEC_NCASES);
	return 0;
}
