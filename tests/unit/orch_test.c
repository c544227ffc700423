/*
 * orch_test.c: orchestrators scoped to tenants (policyd/orch.c).  The
 * orchestrators: key of policyd.yaml is parsed from a real file, and a
 * peer's scope is computed from the kernel's credentials of a socketpair,
 * which are ours: an entry naming our uid or our gid matches, one naming
 * another uid does not.
 */
#include <sys/types.h>
#include <sys/socket.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "util.h"
#include "yaml.h"
#include "policyd/policyd.h"

static char		 tdir[] = "/tmp/orch_test.XXXXXX";
static int		 sv[2];
static struct yerrs	 errs;

static void
setup(void)
{
	cr_assert_not_null(mkdtemp(tdir));
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	memset(&errs, 0, sizeof(errs));
}

static void
teardown(void)
{
	char	cmd[300];

	close(sv[0]);
	close(sv[1]);
	yerrs_free(&errs);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tdir);
}

TestSuite(orch, .init = setup, .fini = teardown);

/* A policyd.yaml with orchs (a YAML fragment, or NULL for none). */
static struct policyd_conf *
conf_with(const char *orchs)
{
	char	 path[300];
	FILE	*f;

	snprintf(path, sizeof(path), "%s/policyd.yaml", tdir);
	cr_assert_not_null(f = fopen(path, "w"));
	fprintf(f, "state_dir: %s\n"
	    "templates: %s\n"
	    "task_types: {analytics: {template: analytics}}\n"
	    "sockets:\n"
	    "  orchestrator: {path: %s/o.sock, allow: {users: [%u]}}\n"
	    "  admin: {path: %s/a.sock, allow: {users: [%u]}}\n"
	    "%s", tdir, tdir, tdir, (unsigned)getuid(), tdir,
	    (unsigned)getuid(), orchs != NULL ? orchs : "");
	fclose(f);
	return parse_config(path, &errs);
}

static void
errs_want(const char *what)
{
	for (size_t i = 0; i < errs.n; i++)
		if (strstr(errs.msgs[i], what) != NULL)
			return;
	cr_assert_fail("no error saying \"%s\" (%zu errors%s%s)", what,
	    errs.n, errs.n > 0 ? ", first: " : "",
	    errs.n > 0 ? errs.msgs[0] : "");
}

Test(orch, unset_scopes_nothing)
{
	struct policyd_conf	*pc;
	struct orch_scope	 s;

	cr_assert_not_null(pc = conf_with(NULL), "%s",
	    errs.n ? errs.msgs[0] : "");
	cr_assert_eq(pc->orchs_set, 0);
	orch_scope_of(pc, sv[0], &s);
	cr_assert_eq(s.set, 0);
	cr_assert(orch_may(&s, "acme"));
	cr_assert(orch_may(&s, "globex"));
	orch_scope_clear(&s);
	parse_config_free(pc);
}

Test(orch, user_bound_to_one_tenant)
{
	struct policyd_conf	*pc;
	struct orch_scope	 s;
	char			 y[256];

	snprintf(y, sizeof(y), "orchestrators:\n"
	    "  - {user: \"%u\", tenants: [acme]}\n"
	    "  - {user: \"%u\", tenants: [\"*\"]}\n",
	    (unsigned)getuid(), (unsigned)getuid() + 4242);
	cr_assert_not_null(pc = conf_with(y), "%s",
	    errs.n ? errs.msgs[0] : "");
	cr_assert_eq(pc->norchs, 2);
	orch_scope_of(pc, sv[0], &s);
	cr_assert(s.set && s.bound && !s.all);
	cr_assert(orch_may(&s, "acme"));
	/* Another uid's "*" is not ours. */
	cr_assert_not(orch_may(&s, "globex"));
	cr_assert_not(orch_may(&s, ""));
	cr_assert_not(orch_may(&s, "*"));
	cr_assert_not(orch_may(&s, "acme "));
	cr_assert_not(orch_may(&s, "ACME"));
	orch_scope_clear(&s);
	parse_config_free(pc);
}

Test(orch, uid_in_two_entries_gets_the_union)
{
	struct policyd_conf	*pc;
	struct orch_scope	 s;
	char			 y[256];

	snprintf(y, sizeof(y), "orchestrators:\n"
	    "  - {user: \"%u\", tenants: [acme]}\n"
	    "  - {user: \"%u\", tenants: [initech, acme]}\n",
	    (unsigned)getuid(), (unsigned)getuid());
	cr_assert_not_null(pc = conf_with(y));
	orch_scope_of(pc, sv[0], &s);
	cr_assert(orch_may(&s, "acme"));
	cr_assert(orch_may(&s, "initech"));
	cr_assert_not(orch_may(&s, "globex"));
	orch_scope_clear(&s);
	parse_config_free(pc);
}

Test(orch, group_star_is_every_tenant)
{
	struct policyd_conf	*pc;
	struct orch_scope	 s;
	char			 y[256];

	snprintf(y, sizeof(y), "orchestrators:\n"
	    "  - {user: \"%u\", tenants: [acme]}\n"
	    "  - {group: \"%u\", tenants: [\"*\"]}\n",
	    (unsigned)getuid() + 4242, (unsigned)getgid());
	cr_assert_not_null(pc = conf_with(y));
	orch_scope_of(pc, sv[0], &s);
	cr_assert(s.bound && s.all);
	cr_assert(orch_may(&s, "acme"));
	cr_assert(orch_may(&s, "globex"));
	orch_scope_clear(&s);
	parse_config_free(pc);
}

Test(orch, peer_in_no_entry_may_do_nothing)
{
	struct policyd_conf	*pc;
	struct orch_scope	 s;
	char			 y[256];

	snprintf(y, sizeof(y), "orchestrators:\n"
	    "  - {user: \"%u\", tenants: [\"*\"]}\n",
	    (unsigned)getuid() + 4242);
	cr_assert_not_null(pc = conf_with(y));
	orch_scope_of(pc, sv[0], &s);
	cr_assert(s.set);
	cr_assert_not(s.bound);
	cr_assert_not(orch_may(&s, "acme"));
	orch_scope_clear(&s);
	/* Credentials that cannot be read match nothing either. */
	orch_scope_of(pc, -1, &s);
	cr_assert(s.set && !s.bound && !orch_may(&s, "acme"));
	orch_scope_clear(&s);
	parse_config_free(pc);
}

Test(orch, bad_entries_are_errors)
{
	cr_assert_null(conf_with("orchestrators:\n"
	    "  - {user: root, group: root, tenants: [acme]}\n"
	    "  - {tenants: [acme]}\n"
	    "  - {user: root, tenants: []}\n"
	    "  - {user: root, tenants: [\"ac me\"]}\n"
	    "  - {user: sbx-test-no-such-user, tenants: [acme]}\n"
	    "  - {group: sbx-test-no-such-group, tenants: [acme]}\n"
	    "  - {user: root}\n"
	    "  - {user: root, tenants: [acme], tenant: [x]}\n"));
	errs_want("orchestrators[0]: name either a user or a group");
	errs_want("orchestrators[1]: name either a user or a group");
	errs_want("orchestrators[2].tenants: names no tenant");
	errs_want("orchestrators[3].tenants: bad tenant \"ac me\"");
	errs_want("no such user \"sbx-test-no-such-user\"");
	errs_want("no such group \"sbx-test-no-such-group\"");
	errs_want("orchestrators[6]");
	errs_want("orchestrators[7]");
}

Test(orch, not_a_list_is_an_error)
{
	cr_assert_null(conf_with("orchestrators: {user: root}\n"));
	errs_want("orchestrators: want a list");
	yerrs_free(&errs);
	memset(&errs, 0, sizeof(errs));
	cr_assert_null(conf_with("orchestrators: []\n"));
	errs_want("orchestrators: want a list");
}
