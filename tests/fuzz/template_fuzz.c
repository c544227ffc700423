/*
 * template_fuzz.c: libFuzzer target for the template loader.  Any bytes
 * fed to policy_parse_buf() must give a policy or error messages, never a
 * crash, a leak or undefined behaviour.  A template that parses must also
 * render, hash, and parse back from its rendering to the same hash: the
 * round trip `sbxctl template show` relies on.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "yaml.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct yerrs		 errs = { NULL, 0 };
	Sbx__V1__Policy		*p, *q;
	struct policy_change	*ch;
	char			 h1[POLICY_HASH_HEX], h2[POLICY_HASH_HEX];
	char			 why[256];
	char			*y;
	size_t			 n;

	p = policy_parse_buf("fuzz.yaml", (const char *)data, size, &errs);
	/* Every refusal explains itself. */
	if (p == NULL && errs.n == 0)
		abort();
	yerrs_free(&errs);
	if (p == NULL)
		return 0;
	if ((y = policy_to_yaml(p)) == NULL)
		abort();
	if (policy_hash(p, h1) != 0)
		abort();
	q = policy_parse_buf("rendered.yaml", y, strlen(y), &errs);
	if (q == NULL || policy_hash(q, h2) != 0 || strcmp(h1, h2) != 0)
		abort();
	if (policy_is_subset(p, q, why, sizeof(why)) != 1)
		abort();
	n = policy_diff(p, q, &ch);
	if (n != 0)
		abort();
	policy_changes_free(ch, n);
	yerrs_free(&errs);
	policy_free(q);
	free(y);
	policy_free(p);
	return 0;
}
