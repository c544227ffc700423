/*
 * pin_test.c: template versions are immutable (policyd/pin.c, issue 13
 * item 1).  The first hash of NAME@VERSION is pinned and survives a
 * reopen; the same content again passes; a changed content under a known
 * version is refused with the file, the version and both hashes; a new
 * version of the changed content passes and is pinned beside the old.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy.h"
#include "util.h"
#include "yaml.h"
#include "policyd/policyd.h"
#include "tests/unit/store_fixture.h"

static const char tmpl_v1[] = FIXTURE_TMPL("pinned");

TestSuite(pin, .init = fixture_setup, .fini = fixture_teardown);

/* A registry of one template, version v, memory m (the content). */
static struct tmpl_registry *
reg_of(unsigned v, unsigned m, const char *file)
{
	struct tmpl_registry	*r = template_registry_new();
	struct yerrs		 e = { NULL, 0 };
	Sbx__V1__Policy		*p;
	char			 text[2048];

	snprintf(text, sizeof(text), tmpl_v1, v, m);
	p = policy_parse_buf(file, text, strlen(text), &e);
	cr_assert_not_null(p, "%s", e.n > 0 ? e.msgs[0] : "?");
	yerrs_free(&e);
	cr_assert_eq(template_registry_add(r, p, file), 0);
	return r;
}

static int
has_error(const struct yerrs *e, const char *s)
{
	for (size_t i = 0; i < e->n; i++)
		if (strstr(e->msgs[i], s) != NULL)
			return 1;
	return 0;
}

Test(pin, a_known_version_cannot_change)
{
	struct tmpl_registry	*first, *same, *changed, *next;
	struct pin		*p;
	struct yerrs		 e = { NULL, 0 };
	char			 err[256], h1[POLICY_HASH_HEX];

	cr_assert_not_null(p = pin_open(db, err, sizeof(err)), "%s", err);
	first = reg_of(7, 512, "/etc/sbx/templates/a.yaml");
	memcpy(h1, first->t[0]->hash, sizeof(h1));
	cr_assert_eq(pin_check(p, first, &e), 0, "nothing pinned yet");
	cr_assert_eq(pin_record(p, first, err, sizeof(err)), 0, "%s", err);
	pin_close(p);

	/* After a restart: the same content passes, a changed one not. */
	cr_assert_not_null(p = pin_open(db, err, sizeof(err)), "%s", err);
	same = reg_of(7, 512, "/etc/sbx/templates/renamed.yaml");
	cr_assert_eq(pin_check(p, same, &e), 0);
	changed = reg_of(7, 4096, "/etc/sbx/templates/a.yaml");
	cr_assert_str_neq(changed->t[0]->hash, h1);
	cr_assert_eq(pin_check(p, changed, &e), -1);
	for (size_t i = 0; i < e.n; i++)
		fprintf(stderr, "  %s\n", e.msgs[i]);
	cr_assert_eq(e.n, 1);
	cr_assert(has_error(&e, "/etc/sbx/templates/a.yaml: template pinned "
	    "version 7 has changed"));
	cr_assert(has_error(&e, changed->t[0]->hash), "the new hash");
	cr_assert(has_error(&e, h1), "the pinned hash");
	cr_assert(has_error(&e, "needs a new version"));
	yerrs_free(&e);

	/* The change as version 8: accepted, and 7 keeps its hash. */
	next = reg_of(8, 4096, "/etc/sbx/templates/a.yaml");
	cr_assert_eq(pin_check(p, next, &e), 0);
	cr_assert_eq(pin_record(p, next, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(pin_check(p, changed, &e), -1, "7 is still pinned");
	yerrs_free(&e);
	/* Recording again changes nothing (the first hash stays). */
	cr_assert_eq(pin_record(p, changed, err, sizeof(err)), 0);
	cr_assert_eq(pin_check(p, first, &e), 0);
	pin_close(p);
	template_registry_free(first);
	template_registry_free(same);
	template_registry_free(changed);
	template_registry_free(next);
}
