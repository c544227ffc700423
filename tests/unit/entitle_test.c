/*
 * entitle_test.c: the entitlement store as an operator uses it through
 * sbxctl: add merges, replace replaces, remove removes what it names (or
 * the whole row), the tenant-wide "*" row joins every user's own, and bad
 * names are refused before anything is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <sqlite3.h>

#include "util.h"
#include "policyd/policyd.h"

static sqlite3		*db;
static struct entitle	*ent;

static void
setup(void)
{
	char	 err[256];

	cr_assert_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
	cr_assert_not_null(ent = entitle_open(db, err, sizeof(err)), "%s",
	    err);
}

static void
teardown(void)
{
	entitle_close(ent);
	sqlite3_close(db);
}

TestSuite(entitle, .init = setup, .fini = teardown);

struct plan {
	uint32_t	 cpus_milli, memory_mb, pids, wall_seconds, scratch_mb;
};

struct ent_spec {
	const char	*tenant, *user;
	const char	*datasets[4];
	const char	*hosts[4];
	struct plan	 plan;
	int		 replace;
};

static void
spec_msg(const struct ent_spec *s, Sbx__V1__Entitlement *m,
    Sbx__V1__Limits *l)
{
	sbx__v1__entitlement__init(m);
	sbx__v1__limits__init(l);
	l->cpus_milli = s->plan.cpus_milli;
	l->memory_mb = s->plan.memory_mb;
	l->pids = s->plan.pids;
	l->wall_seconds = s->plan.wall_seconds;
	l->scratch_mb = s->plan.scratch_mb;
	m->tenant = (char *)s->tenant;
	m->user = (char *)s->user;
	while (m->n_datasets < 4 && s->datasets[m->n_datasets] != NULL)
		m->n_datasets++;
	m->datasets = (char **)s->datasets;
	while (m->n_hosts < 4 && s->hosts[m->n_hosts] != NULL)
		m->n_hosts++;
	m->hosts = (char **)s->hosts;
	m->max_limits = l;
	m->replace = s->replace;
}

static int
add(const struct ent_spec *s)
{
	Sbx__V1__Entitlement	 m;
	Sbx__V1__Limits		 l;
	char			 err[256];

	spec_msg(s, &m, &l);
	return entitle_add(ent, &m, err, sizeof(err));
}

static int
rm(const struct ent_spec *s)
{
	Sbx__V1__Entitlement	 m;
	Sbx__V1__Limits		 l;
	char			 err[256];

	spec_msg(s, &m, &l);
	return entitle_remove(ent, &m, err, sizeof(err));
}

/* "a,b" from a sorted list, for compact assertions. */
static char *
join(char **v, size_t n)
{
	char	*s = xstrdup(""), *t;

	for (size_t i = 0; i < n; i++) {
		xasprintf(&t, "%s%s%s", s, i > 0 ? "," : "", v[i]);
		free(s);
		s = t;
	}
	return s;
}

static void
expect(const char *tenant, const char *user, int found, const char *ds,
    const char *hosts)
{
	struct entitle_eff	 e;
	char			*s;

	cr_assert_eq(entitle_get(ent, tenant, user, &e), 0);
	cr_assert_eq(e.found, found, "%s/%s found=%d", tenant, user,
	    e.found);
	s = join(e.datasets, e.ndatasets);
	cr_assert_str_eq(s, ds, "%s/%s datasets", tenant, user);
	free(s);
	s = join(e.hosts, e.nhosts);
	cr_assert_str_eq(s, hosts, "%s/%s hosts", tenant, user);
	free(s);
	entitle_eff_clear(&e);
}

static Sbx__V1__Limits
plan_of(const char *tenant, const char *user)
{
	struct entitle_eff	 e;
	Sbx__V1__Limits		 l;

	cr_assert_eq(entitle_get(ent, tenant, user, &e), 0);
	l = e.plan;
	entitle_eff_clear(&e);
	return l;
}

Test(entitle, add_merges)
{
	struct ent_spec	 a = { "acme", "alice", { "d1", NULL },
	    { "API.Example.COM.", NULL }, { .memory_mb = 512 }, 0 };
	struct ent_spec	 b = { "acme", "alice", { "d2", "d1", NULL },
	    { NULL }, { .cpus_milli = 1500 }, 0 };
	Sbx__V1__Limits	 l;

	expect("acme", "alice", 0, "", "");
	cr_assert_eq(add(&a), 0);
	/* Hosts are stored the way policy_normalize writes them. */
	expect("acme", "alice", 1, "d1", "api.example.com");
	cr_assert_eq(add(&b), 0);
	expect("acme", "alice", 1, "d1,d2", "api.example.com");
	l = plan_of("acme", "alice");
	cr_assert_eq(l.memory_mb, 512, "a merge kept the earlier limit");
	cr_assert_eq(l.cpus_milli, 1500);
	cr_assert_eq(l.pids, 0);
}

Test(entitle, replace_replaces_the_row)
{
	struct ent_spec	 a = { "acme", "alice", { "d1", "d2", NULL },
	    { "h.example.com", NULL }, { .memory_mb = 512, .pids = 9 }, 0 };
	struct ent_spec	 r = { "acme", "alice", { "d3", NULL }, { NULL },
	    { .pids = 10 }, 1 };
	Sbx__V1__Limits	 l;

	cr_assert_eq(add(&a), 0);
	cr_assert_eq(add(&r), 0);
	expect("acme", "alice", 1, "d3", "");
	l = plan_of("acme", "alice");
	cr_assert_eq(l.memory_mb, 0, "replace left an old limit");
	cr_assert_eq(l.pids, 10);
}

Test(entitle, remove_named_then_whole_row)
{
	struct ent_spec	 a = { "acme", "alice", { "d1", "d2", NULL },
	    { "h1.example.com", "h2.example.com", NULL }, { 0 }, 0 };
	struct ent_spec	 r1 = { "acme", "alice", { "d1", NULL },
	    { "H2.example.com", NULL }, { 0 }, 0 };
	struct ent_spec	 all = { "acme", "alice", { NULL }, { NULL }, { 0 },
	    0 };

	cr_assert_eq(add(&a), 0);
	cr_assert_eq(rm(&r1), 0);
	expect("acme", "alice", 1, "d2", "h1.example.com");
	cr_assert_eq(rm(&all), 0);
	expect("acme", "alice", 0, "", "");
	cr_assert_eq(rm(&all), 1, "removing a missing row says so");
}

Test(entitle, tenant_wide_row_joins_each_user)
{
	struct ent_spec	 star = { "acme", "*", { "shared", NULL },
	    { "common.example.com", NULL },
	    { .memory_mb = 256, .wall_seconds = 30 }, 0 };
	struct ent_spec	 bob = { "acme", "bob", { "own", NULL }, { NULL },
	    { .memory_mb = 1024 }, 0 };
	Sbx__V1__Limits	 l;

	cr_assert_eq(add(&star), 0);
	cr_assert_eq(add(&bob), 0);
	expect("acme", "bob", 1, "own,shared", "common.example.com");
	l = plan_of("acme", "bob");
	cr_assert_eq(l.memory_mb, 1024, "the user's own value wins");
	cr_assert_eq(l.wall_seconds, 30, "the tenant-wide value fills in");
	/* A user without a row gets the tenant-wide row alone. */
	expect("acme", "carol", 1, "shared", "common.example.com");
	/* Another tenant gets nothing. */
	expect("other", "bob", 0, "", "");
}

Test(entitle, bad_names_are_refused)
{
	struct ent_spec	 s[] = {
		{ "ac me", "alice", { NULL }, { NULL }, { 0 }, 0 },
		{ "acme", "", { NULL }, { NULL }, { 0 }, 0 },
		{ "acme", "alice", { "../x", NULL }, { NULL }, { 0 }, 0 },
		{ "acme", "alice", { NULL }, { "evil.com/path", NULL }, { 0 },
		    0 },
		{ "acme", "alice", { NULL }, { "*.example.com", NULL }, { 0 },
		    0 },
	};
	Sbx__V1__Entitlement	**v;
	size_t			  n;

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		cr_assert_eq(add(&s[i]), -1, "entry %zu accepted", i);
	cr_assert_eq(entitle_list(ent, NULL, NULL, &v, &n), 0);
	cr_assert_eq(n, 0, "a refused add left a row");
	entitle_list_free(v, n);
}

Test(entitle, list_filters_and_sorts)
{
	struct ent_spec	 a = { "acme", "bob", { "b", "a", NULL }, { NULL },
	    { .pids = 5 }, 0 };
	struct ent_spec	 b = { "acme", "alice", { NULL },
	    { "x.example.com", NULL }, { 0 }, 0 };
	struct ent_spec	 c = { "zeta", "alice", { "z", NULL }, { NULL },
	    { 0 }, 0 };
	Sbx__V1__Entitlement	**v;
	size_t			  n;

	cr_assert_eq(add(&a), 0);
	cr_assert_eq(add(&b), 0);
	cr_assert_eq(add(&c), 0);
	cr_assert_eq(entitle_list(ent, "", "", &v, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(v[0]->user, "alice");
	cr_assert_str_eq(v[1]->user, "bob");
	cr_assert_eq(v[1]->n_datasets, 2);
	cr_assert_str_eq(v[1]->datasets[0], "a");
	cr_assert_eq(v[1]->max_limits->pids, 5);
	cr_assert_str_eq(v[2]->tenant, "zeta");
	entitle_list_free(v, n);
	cr_assert_eq(entitle_list(ent, NULL, "alice", &v, &n), 0);
	cr_assert_eq(n, 2);
	entitle_list_free(v, n);
	cr_assert_eq(entitle_list(ent, "acme", "bob", &v, &n), 0);
	cr_assert_eq(n, 1);
	entitle_list_free(v, n);
}
