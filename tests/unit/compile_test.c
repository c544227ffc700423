/*
 * compile_test.c: policyd's compiler against a real store (a temporary
 * policyd.db) and a real signing key, without sockets.  The property that
 * matters most is tried hardest: over hundreds of random templates,
 * entitlements and tasks, a compiled policy is always a subset of its
 * (substituted) template, keeps only entitled hosts and readable inputs,
 * and never exceeds the plan.  The rest checks each rule id, the
 * execution cap (also inside one group-commit batch, and across a batch
 * the writer thread is still committing), that a batch that fails to
 * commit takes its executions and task bindings back, and that the audit
 * record matches the reply.
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <poll.h>

#include "audit.h"
#include "policy.h"
#include "sign.h"
#include "util.h"
#include "yaml.h"
#include "policyd/policyd.h"

static char		 tdir[] = "/tmp/compile_test.XXXXXX";
static struct policyd	 pd;

static const char tmpl_analytics[] =
    "policy: analytics-readonly\n"
    "version: 7\n"
    "isolation: gvisor\n"
    "image: sandbox/py@sha256:"
    "a2297711e96bea7cb00cd4dfdd083b1a568acfbf7c8e991512f488901936caed\n"
    "limits: {cpus: 1, memory_mb: 1024, pids: 128, wall_seconds: 60,"
    " scratch_mb: 256}\n"
    "inputs:\n"
    "  - dataset: \"${task.dataset_ref}\"\n"
    "network:\n"
    "  default: deny\n"
    "  allow:\n"
    "    - {host: api.fx-rates.internal, methods: [GET],"
    " paths: [\"/v1/${task.tenant}/${task.user}/\"], max_response_kb: 512}\n"
    "    - {host: api.other.internal, methods: [GET, POST]}\n"
    "credentials:\n"
    "  - {host: api.fx-rates.internal, secret: \"fx-${task.tenant}\","
    " header: Authorization}\n"
    "  - {host: api.other.internal, secret: other, header: X-Key}\n"
    "outputs:\n"
    "  allowed_types: [text/csv, image/png]\n"
    "  max_total_kb: 2048\n"
    "  destination: agent\n"
    "executions_per_task: 15\n";

static const char tmpl_report[] =
    "policy: report-basic\n"
    "version: 1\n"
    "isolation: container\n"
    "image: sandbox/rep@sha256:"
    "0000000000000000000000000000000000000000000000000000000000000001\n"
    "limits: {cpus: 0.5, memory_mb: 256, pids: 32, wall_seconds: 30,"
    " scratch_mb: 64}\n"
    "inputs:\n"
    "  - dataset: report-fixtures\n"
    "network:\n"
    "  default: deny\n"
    "outputs:\n"
    "  allowed_types: [text/plain]\n"
    "  max_total_kb: 64\n"
    "  destination: user\n"
    "executions_per_task: 3\n";

static void
add_template(const char *yaml, const char *type)
{
	struct yerrs	 errs = { NULL, 0 };
	Sbx__V1__Policy	*p;
	char		*name;
	uint32_t	 v;

	p = policy_parse_buf("test.yaml", yaml, strlen(yaml), &errs);
	cr_assert_not_null(p, "template does not parse: %s",
	    errs.n > 0 ? errs.msgs[0] : "?");
	yerrs_free(&errs);
	name = xstrdup(p->name);
	v = p->version;
	cr_assert_eq(template_registry_add(pd.reg, p, "test.yaml"), 0);
	cr_assert_eq(template_registry_activate(pd.reg, type, name, v), 0);
	free(name);
}

static void
setup(void)
{
	char	 err[256], sk[300], pk[300], db[300];

	cr_assert_not_null(mkdtemp(tdir));
	snprintf(sk, sizeof(sk), "%s/signing.key", tdir);
	snprintf(pk, sizeof(pk), "%s/policyd.pub", tdir);
	snprintf(db, sizeof(db), "%s/policyd.db", tdir);
	memset(&pd, 0, sizeof(pd));
	pd.ttl = 900;
	cr_assert_eq(sign_keygen(sk, pk, err, sizeof(err)), 0, "%s", err);
	cr_assert_not_null(pd.key = sign_key_load(sk, err, sizeof(err)),
	    "%s", err);
	cr_assert_not_null(pd.store = store_open(db, err, sizeof(err)), "%s",
	    err);
	cr_assert_not_null(pd.ent = entitle_open(store_db(pd.store), err,
	    sizeof(err)), "%s", err);
	/* As policyd runs: compiles read entitlements through the read
	 * handle. */
	cr_assert_eq(entitle_use_reader(pd.ent, store_reader(pd.store), err,
	    sizeof(err)), 0, "%s", err);
	pd.reg = template_registry_new();
	add_template(tmpl_analytics, "analytics");
	add_template(tmpl_report, "report");
}

static void
teardown(void)
{
	char	 cmd[300];

	entitle_close(pd.ent);
	store_close(pd.store);
	sign_key_free(pd.key);
	template_registry_free(pd.reg);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tdir);
}

TestSuite(compile, .init = setup, .fini = teardown);

/* ---- helpers ---- */

static void
entitle(const char *tenant, const char *user, const char **datasets,
    const char **hosts, const Sbx__V1__Limits *plan)
{
	Sbx__V1__Entitlement	 m = SBX__V1__ENTITLEMENT__INIT;
	Sbx__V1__Limits		 l = SBX__V1__LIMITS__INIT;
	char			 err[256];

	m.tenant = (char *)tenant;
	m.user = (char *)user;
	for (; datasets != NULL && datasets[m.n_datasets] != NULL; )
		m.n_datasets++;
	m.datasets = (char **)datasets;
	for (; hosts != NULL && hosts[m.n_hosts] != NULL; )
		m.n_hosts++;
	m.hosts = (char **)hosts;
	m.max_limits = plan != NULL ? (Sbx__V1__Limits *)plan : &l;
	cr_assert_eq(entitle_add(pd.ent, &m, err, sizeof(err)), 0, "%s", err);
}

static void
task_init(Sbx__V1__Task *t, const char *id, const char *type,
    const char *tenant, const char *user, const char **datasets)
{
	sbx__v1__task__init(t);
	t->id = (char *)id;
	t->type = (char *)type;
	t->tenant = (char *)tenant;
	t->user = (char *)user;
	t->datasets = (char **)datasets;
	for (; datasets != NULL && datasets[t->n_datasets] != NULL; )
		t->n_datasets++;
}

/* Compile and commit; returns compile_task's result. */
static int
compile(const Sbx__V1__Task *t, struct compile_out *out, Sbx__V1__Error *err)
{
	int	 rc;

	sbx__v1__error__init(err);
	rc = compile_task(&pd, t, "uid:1000", 0, out, err);
	if (store_in_batch(pd.store))
		cr_assert_eq(store_commit(pd.store), 0, "commit failed");
	return rc;
}

static const char *alice_ds[] = { "supplier-2026-q3", NULL };
static const char *fx_host[] = { "api.fx-rates.internal", NULL };

/* ---- the property: compile never adds a capability ---- */

static const char *const pool_ds[] = {
	"d-alpha", "d-beta", "d-gamma", "d-delta", "d-eps"
};
static const char *const pool_hosts[] = {
	"a.example.com", "b.example.com", "c.internal", "d.internal",
	"e.example.org", "f.example.org"
};
static const char *const pool_methods[] = { "GET", "POST", "PUT", "DELETE" };
static const char *const pool_paths[] = {
	"/v1/", "/v2/${task.tenant}/", "/u/${task.user}/x", "/t/${task.id}",
	"/type/${task.type}/"
};
static const char *const pool_types[] = {
	"text/csv", "image/png", "application/json", "text/plain"
};

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

static unsigned
rnd(unsigned n)
{
	return (unsigned)random() % n;
}

static char **
strv_add(char **v, size_t *n, const char *s)
{
	v = xreallocarray(v, *n + 1, sizeof(*v));
	v[(*n)++] = xstrdup(s);
	return v;
}

static Sbx__V1__Policy *
random_template(unsigned i)
{
	Sbx__V1__Policy	*p = policy_new();
	char		 img[128], hex[65];
	unsigned char	 dg[32];

	free(p->name);
	p->name = xstrdup("rand");
	p->version = i + 1;
	p->isolation = 1 + rnd(3);
	for (size_t k = 0; k < sizeof(dg); k++)
		dg[k] = (unsigned char)random();
	hex_encode(dg, sizeof(dg), hex);
	snprintf(img, sizeof(img), "img/r@sha256:%s", hex);
	free(p->image);
	p->image = xstrdup(img);
	p->limits->cpus_milli = 1 + rnd(4000);
	p->limits->memory_mb = 16 + rnd(4096);
	p->limits->pids = 1 + rnd(512);
	p->limits->wall_seconds = 1 + rnd(600);
	p->limits->scratch_mb = 1 + rnd(1024);

	if (rnd(10) < 7) {
		p->inputs = xreallocarray(p->inputs, p->n_inputs + 1,
		    sizeof(*p->inputs));
		p->inputs[p->n_inputs] = xmalloc(sizeof(Sbx__V1__Input));
		sbx__v1__input__init(p->inputs[p->n_inputs]);
		p->inputs[p->n_inputs++]->dataset =
		    xstrdup("${task.dataset_ref}");
	}
	for (unsigned k = rnd(3); k > 0; k--) {
		p->inputs = xreallocarray(p->inputs, p->n_inputs + 1,
		    sizeof(*p->inputs));
		p->inputs[p->n_inputs] = xmalloc(sizeof(Sbx__V1__Input));
		sbx__v1__input__init(p->inputs[p->n_inputs]);
		p->inputs[p->n_inputs++]->dataset =
		    xstrdup(pool_ds[rnd(NELEM(pool_ds))]);
	}

	for (unsigned k = rnd(5); k > 0; k--) {
		Sbx__V1__AllowRule	*r = xmalloc(sizeof(*r));
		int			 dup = 0;

		sbx__v1__allow_rule__init(r);
		r->host = xstrdup(pool_hosts[rnd(NELEM(pool_hosts))]);
		for (size_t j = 0; j < p->network->n_allow; j++)
			dup |= strcmp(p->network->allow[j]->host, r->host) == 0;
		if (dup) {
			sbx__v1__allow_rule__free_unpacked(r, NULL);
			continue;
		}
		for (size_t j = 0; j < NELEM(pool_methods); j++)
			if (rnd(2) || (j == 0 && r->n_methods == 0))
				r->methods = strv_add(r->methods,
				    &r->n_methods, pool_methods[j]);
		for (unsigned j = rnd(3); j > 0; j--)
			r->paths = strv_add(r->paths, &r->n_paths,
			    pool_paths[rnd(NELEM(pool_paths))]);
		r->max_request_kb = rnd(64);
		r->max_response_kb = rnd(4096);
		p->network->allow = xreallocarray(p->network->allow,
		    p->network->n_allow + 1, sizeof(*p->network->allow));
		p->network->allow[p->network->n_allow++] = r;
	}
	p->network->max_out_kb = rnd(1024);

	for (unsigned k = rnd(4); k > 0; k--) {
		Sbx__V1__Credential	*c = xmalloc(sizeof(*c));
		char			 secret[64];

		sbx__v1__credential__init(c);
		/* Credentials bind to a host the template allows (the
		 * template parser insists), so pick from the rules. */
		if (p->network->n_allow == 0) {
			free(c);
			break;
		}
		c->host = xstrdup(p->network->allow[rnd(
		    (unsigned)p->network->n_allow)]->host);
		snprintf(secret, sizeof(secret), rnd(2) ? "s%u-${task.user}" :
		    "s%u", rnd(100));
		c->secret = xstrdup(secret);
		c->header = xstrdup(rnd(2) ? "Authorization" : "X-Api-Key");
		c->kind = rnd(2);
		p->credentials = xreallocarray(p->credentials,
		    p->n_credentials + 1, sizeof(*p->credentials));
		p->credentials[p->n_credentials++] = c;
	}

	for (size_t j = 0; j < NELEM(pool_types); j++)
		if (rnd(2))
			p->outputs->allowed_types = strv_add(
			    p->outputs->allowed_types,
			    &p->outputs->n_allowed_types, pool_types[j]);
	p->outputs->max_total_kb = 1 + rnd(8192);
	p->outputs->destination = 1 + rnd(3);
	p->executions_per_task = 1 + rnd(20);
	return p;
}

/* A random subset of pool, NULL-terminated, each kept with chance pct. */
static const char **
random_subset(const char *const *pool, size_t n, unsigned pct)
{
	const char	**v = xcalloc(n + 1, sizeof(*v));
	size_t		  k = 0;

	for (size_t i = 0; i < n; i++)
		if (rnd(100) < pct)
			v[k++] = pool[i];
	return v;
}

static uint32_t
random_cap(uint32_t around)
{
	/* A third no cap, else anywhere from a tenth to twice the value. */
	if (rnd(3) == 0)
		return 0;
	return 1 + rnd(around * 2);
}

Test(compile, never_adds_a_capability)
{
	unsigned	 ok = 0, denied = 0, n = 600;

	srandom(20260101);
	for (unsigned i = 0; i < n; i++) {
		Sbx__V1__Policy		*tp = random_template(i);
		Sbx__V1__Policy		*sub;
		const struct tmpl	*tm;
		struct compile_out	 out;
		struct entitle_eff	 eff;
		Sbx__V1__Error		 err;
		Sbx__V1__Task		 t;
		Sbx__V1__Limits		 plan = SBX__V1__LIMITS__INIT;
		const char		**uds, **uhosts, **ads, **ahosts;
		const char		**tds;
		char			 user[32], id[32], why[256];
		int			 rc;

		cr_assert_eq(template_registry_add(pd.reg, tp, "rand.yaml"), 0);
		cr_assert_eq(template_registry_activate(pd.reg, "rand", "rand",
		    i + 1), 0);
		tm = template_active(pd.reg, "rand");

		snprintf(user, sizeof(user), "u%u", i);
		snprintf(id, sizeof(id), "t-%u", i);
		uds = random_subset(pool_ds, NELEM(pool_ds), 80);
		uhosts = random_subset(pool_hosts, NELEM(pool_hosts), 50);
		plan.cpus_milli = random_cap(2000);
		plan.memory_mb = random_cap(2048);
		plan.pids = random_cap(256);
		plan.wall_seconds = random_cap(300);
		plan.scratch_mb = random_cap(512);
		if (rnd(10) != 0)
			entitle("rnd", user, uds, uhosts, &plan);
		/* The tenant-wide row changes between runs too. */
		ads = random_subset(pool_ds, NELEM(pool_ds), 20);
		ahosts = random_subset(pool_hosts, NELEM(pool_hosts), 20);
		{
			Sbx__V1__Entitlement	 m = SBX__V1__ENTITLEMENT__INIT;
			Sbx__V1__Limits		 al = SBX__V1__LIMITS__INIT;
			char			 err2[256];

			al.memory_mb = random_cap(1024);
			al.pids = random_cap(128);
			m.tenant = (char *)"rnd";
			m.user = (char *)"*";
			for (; ads[m.n_datasets] != NULL; )
				m.n_datasets++;
			m.datasets = (char **)ads;
			for (; ahosts[m.n_hosts] != NULL; )
				m.n_hosts++;
			m.hosts = (char **)ahosts;
			m.max_limits = &al;
			m.replace = 1;
			cr_assert_eq(entitle_add(pd.ent, &m, err2,
			    sizeof(err2)), 0);
		}
		tds = random_subset(pool_ds, NELEM(pool_ds), 25);
		task_init(&t, id, "rand", "rnd", user, tds);

		cr_assert_eq(entitle_get(pd.ent, "rnd", user, &eff), 0);
		rc = compile(&t, &out, &err);
		sub = policy_dup(tm->policy);
		if (rc == 0) {
			Sbx__V1__Error	 serr = SBX__V1__ERROR__INIT;

			ok++;
			cr_assert_eq(compile_substitute(sub, &t, &serr), 0);
			cr_assert(policy_is_subset(out.policy, sub, why,
			    sizeof(why)), "run %u: compiled policy is wider "
			    "than its template: %s", i, why);
			for (size_t k = 0; k < out.policy->network->n_allow;
			    k++)
				cr_assert(entitle_can_call(&eff,
				    out.policy->network->allow[k]->host),
				    "run %u: host %s kept but not entitled",
				    i, out.policy->network->allow[k]->host);
			for (size_t k = 0; k < out.policy->n_inputs; k++)
				cr_assert(entitle_can_read(&eff,
				    out.policy->inputs[k]->dataset),
				    "run %u: input %s not readable", i,
				    out.policy->inputs[k]->dataset);
			for (size_t k = 0; k < out.policy->n_credentials;
			    k++) {
				int has = 0;

				for (size_t j = 0;
				    j < out.policy->network->n_allow; j++)
					has |= strcmp(out.policy->network->
					    allow[j]->host, out.policy->
					    credentials[k]->host) == 0;
				cr_assert(has, "run %u: credential for %s "
				    "without its host", i,
				    out.policy->credentials[k]->host);
			}
			for (size_t k = 0; k < out.policy->n_credentials; k++)
				cr_assert_null(strstr(out.policy->
				    credentials[k]->secret, "${"));
#define CAP(f) \
			if (eff.plan.f != 0) \
				cr_assert_leq(out.policy->limits->f, \
				    eff.plan.f, "run %u: " #f " over the plan", \
				    i)
			CAP(cpus_milli);
			CAP(memory_mb);
			CAP(pids);
			CAP(wall_seconds);
			CAP(scratch_mb);
#undef CAP
			compile_out_clear(&out);
		} else {
			Sbx__V1__Error	 serr = SBX__V1__ERROR__INIT;
			int		 justified = 0;

			denied++;
			/* A denial must be one the inputs justify. */
			if (!eff.found)
				justified = strcmp(err.rule,
				    RULE_NO_ENTITLEMENT) == 0;
			else if (compile_substitute(sub, &t, &serr) == -1)
				justified = strcmp(serr.rule,
				    RULE_NOT_READABLE) == 0;
			else
				for (size_t k = 0; k < sub->n_inputs; k++)
					justified |= !entitle_can_read(&eff,
					    sub->inputs[k]->dataset);
			cr_assert(justified, "run %u: denied without cause: "
			    "%s: %s", i, err.rule, err.message);
			cr_assert_eq(store_executions_count(pd.store, id), 0);
			compile_error_clear(&serr);
		}
		compile_error_clear(&err);
		policy_free(sub);
		entitle_eff_clear(&eff);
		free(uds);
		free(uhosts);
		free(ads);
		free(ahosts);
		free(tds);
	}
	cr_assert_gt(ok, n / 5, "only %u of %u compiled: the property was "
	    "hardly exercised", ok, n);
	cr_assert_gt(denied, 0, "no run was denied");
}

/* ---- rules ---- */

Test(compile, unreadable_dataset_is_refused_and_not_recorded)
{
	static const char	*ds[] = { "payroll-2026", NULL };
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;
	Sbx__V1__AuditEvent	**ev;
	size_t			 n;

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	task_init(&t, "t-deny", "analytics", "acme", "alice", ds);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_eq(err.code, SBX__V1__ERROR_CODE__ERROR_POLICY);
	cr_assert_str_eq(err.rule, "dataset-not-readable");
	cr_assert_str_eq(err.message, "dataset \"payroll-2026\" is not "
	    "readable by acme/alice");
	cr_assert_eq(store_executions_count(pd.store, "t-deny"), 0,
	    "an execution row exists for a refused task");
	/* The denial itself is audited. */
	cr_assert_eq(audit_query(store_audit(pd.store), "t-deny", 0, &ev, &n),
	    0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(ev[0]->action, "deny");
	cr_assert_str_eq(ev[0]->rule, "dataset-not-readable");
	cr_assert_str_eq(ev[0]->execution_id, "");
	audit_events_free(ev, n);
	compile_error_clear(&err);
}

Test(compile, template_without_dataset_ref_takes_no_datasets)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;

	entitle("acme", "alice", (const char *[]){ "report-fixtures",
	    "supplier-2026-q3", NULL }, NULL, NULL);
	task_init(&t, "t-r", "report", "acme", "alice", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_str_eq(err.rule, "dataset-not-readable");
	cr_assert_not_null(strstr(err.message, "takes no task datasets"),
	    "%s", err.message);
	compile_error_clear(&err);

	/* Without datasets the literal input stays. */
	task_init(&t, "t-r2", "report", "acme", "alice", NULL);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
	cr_assert_eq(out.policy->n_inputs, 1);
	cr_assert_str_eq(out.policy->inputs[0]->dataset, "report-fixtures");
	compile_out_clear(&out);
}

Test(compile, executions_cap_holds)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;

	entitle("acme", "alice", (const char *[]){ "report-fixtures", NULL },
	    NULL, NULL);
	task_init(&t, "t-cap", "report", "acme", "alice", NULL);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(compile(&t, &out, &err), 0, "compile %d: %s",
		    i + 1, err.message);
		compile_out_clear(&out);
	}
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_eq(err.code, SBX__V1__ERROR_CODE__ERROR_LIMIT);
	cr_assert_str_eq(err.rule, "executions-exhausted");
	cr_assert_eq(store_executions_count(pd.store, "t-cap"), 3);
	compile_error_clear(&err);
}

Test(compile, executions_cap_holds_inside_one_batch)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err = SBX__V1__ERROR__INIT;
	Sbx__V1__Task		 t;
	int			 okn = 0;

	entitle("acme", "alice", (const char *[]){ "report-fixtures", NULL },
	    NULL, NULL);
	task_init(&t, "t-batch", "report", "acme", "alice", NULL);
	/* Group commit: five compiles of one task before one commit. */
	for (int i = 0; i < 5; i++) {
		if (compile_task(&pd, &t, "uid:0", 0, &out, &err) == 0) {
			okn++;
			compile_out_clear(&out);
		} else
			cr_assert_str_eq(err.rule, "executions-exhausted");
		compile_error_clear(&err);
	}
	cr_assert(store_in_batch(pd.store));
	cr_assert_eq(store_commit(pd.store), 0);
	cr_assert_eq(okn, 3);
	cr_assert_eq(store_executions_count(pd.store, "t-batch"), 3);
}

Test(compile, nothing_is_kept_when_the_batch_rolls_back)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err = SBX__V1__ERROR__INIT;
	Sbx__V1__Task		 t;
	char			 xid[40];

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	task_init(&t, "t-rb", "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile_task(&pd, &t, "uid:0", 0, &out, &err), 0);
	snprintf(xid, sizeof(xid), "%s", out.execution_id);
	compile_out_clear(&out);
	store_poison(pd.store);
	cr_assert_eq(store_commit(pd.store), -1);
	cr_assert_eq(store_execution_exists(pd.store, xid), 0);
	cr_assert_eq(store_executions_count(pd.store, "t-rb"), 0);
}

/* The writer thread commits one batch while the next one fills: the cap
 * counts both. */
Test(compile, executions_cap_holds_across_a_batch_in_flight)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err = SBX__V1__ERROR__INIT;
	Sbx__V1__Task		 t;
	int			 okn = 0;

	entitle("acme", "alice", (const char *[]){ "report-fixtures", NULL },
	    NULL, NULL);
	task_init(&t, "t-flight", "report", "acme", "alice", NULL);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(compile_task(&pd, &t, "uid:0", 0, &out, &err), 0,
		    "%s", err.message);
		compile_out_clear(&out);
	}
	cr_assert_eq(store_submit(pd.store), 1);
	/* Whether or not the writer has finished, nothing is reaped yet:
	 * the two executions still count. */
	cr_assert(store_busy(pd.store));
	cr_assert_eq(store_executions_count(pd.store, "t-flight"), 2);
	for (int i = 0; i < 3; i++) {
		if (compile_task(&pd, &t, "uid:0", 0, &out, &err) == 0) {
			okn++;
			compile_out_clear(&out);
		} else
			cr_assert_str_eq(err.rule, "executions-exhausted");
		compile_error_clear(&err);
	}
	cr_assert_eq(okn, 1, "%d compiles past a cap of 3", okn + 2);
	cr_assert_eq(store_wait(pd.store), 0);
	cr_assert_not(store_busy(pd.store));
	cr_assert_eq(store_commit(pd.store), 0);
	cr_assert_eq(store_executions_count(pd.store, "t-flight"), 3);
	/* And from the database alone, once nothing is pending. */
	task_init(&t, "t-flight", "report", "acme", "alice", NULL);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_str_eq(err.rule, "executions-exhausted");
	compile_error_clear(&err);
}

/* A batch that fails in the writer gives back its executions and the task
 * bindings it made, and the next batch records the binding itself. */
Test(compile, failed_batch_in_flight_is_taken_back)
{
	struct compile_out		 out;
	Sbx__V1__Error			 err = SBX__V1__ERROR__INIT;
	Sbx__V1__Task			 t;
	Sbx__V1__AuditVerifyReply	 vr = SBX__V1__AUDIT_VERIFY_REPLY__INIT;
	struct store_task		 st;
	char				 xid[40];

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	entitle("acme", "bob", alice_ds, fx_host, NULL);
	task_init(&t, "t-fail", "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile_task(&pd, &t, "uid:0", 0, &out, &err), 0, "%s",
	    err.message);
	snprintf(xid, sizeof(xid), "%s", out.execution_id);
	compile_out_clear(&out);
	store_poison(pd.store);
	cr_assert_eq(store_submit(pd.store), 1);
	/* A second compile of the same task joins the next batch while the
	 * first is in flight: still bound to alice. */
	task_init(&t, "t-fail", "analytics", "acme", "bob", alice_ds);
	cr_assert_eq(compile_task(&pd, &t, "uid:0", 0, &out, &err), -1);
	cr_assert_str_eq(err.rule, "task-mismatch");
	compile_error_clear(&err);
	task_init(&t, "t-fail", "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile_task(&pd, &t, "uid:0", 0, &out, &err), 0, "%s",
	    err.message);
	compile_out_clear(&out);
	cr_assert_eq(store_executions_count(pd.store, "t-fail"), 2);

	cr_assert_eq(store_wait(pd.store), -1, "a poisoned batch committed");
	cr_assert_eq(store_execution_exists(pd.store, xid), 0);
	cr_assert_eq(store_executions_count(pd.store, "t-fail"), 1);
	cr_assert_eq(store_commit(pd.store), 0);
	cr_assert_eq(store_executions_count(pd.store, "t-fail"), 1);
	/* The surviving batch wrote the task row the failed one lost. */
	cr_assert_eq(store_task_get(pd.store, "t-fail", &st), 1);
	cr_assert_str_eq(st.user, "alice");
	cr_assert_eq(st.executions, 1);

	cr_assert_eq(audit_verify(store_audit(pd.store), &vr), 0);
	cr_assert(vr.ok, "audit chain: %s", vr.problem);
	audit_verify_clear(&vr);
}

/*
 * store_poll() settles a batch the writer has finished without reading
 * its eventfd (commit_kick() calls it at every compile): only once the
 * writer's result is in, with that result, and a failed batch gives its
 * executions back as store_reap() would.  The wake-up stays readable and
 * the store_reap() it then causes finds nothing to settle.
 */
Test(compile, store_poll_settles_only_a_finished_batch)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err = SBX__V1__ERROR__INIT;
	Sbx__V1__Task		 t;
	struct pollfd		 pfd;
	int			 ok = -1, fd, polls = 0, rc;

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	task_init(&t, "t-poll", "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile_task(&pd, &t, "uid:0", 0, &out, &err), 0, "%s",
	    err.message);
	compile_out_clear(&out);
	cr_assert_eq(store_poll(pd.store, &ok), 0, "nothing in flight");
	cr_assert_neq(fd = store_done_fd(pd.store), -1);
	cr_assert_eq(store_submit(pd.store), 1);
	while ((rc = store_poll(pd.store, &ok)) == 0) {
		cr_assert(store_busy(pd.store));
		cr_assert_lt(++polls, 10000, "the writer never finished");
		usleep(1000);
	}
	cr_assert_eq(rc, 1);
	cr_assert_eq(ok, 1);
	cr_assert_not(store_busy(pd.store));
	cr_assert_eq(store_executions_count(pd.store, "t-poll"), 1);
	pfd.fd = fd;
	pfd.events = POLLIN;
	cr_assert_eq(poll(&pfd, 1, 0), 1, "the wake-up was consumed");
	cr_assert_eq(store_reap(pd.store, &ok), 0, "settled twice");
	cr_assert_eq(poll(&pfd, 1, 0), 0);

	/* A batch that fails: its execution is given back. */
	cr_assert_eq(compile_task(&pd, &t, "uid:0", 0, &out, &err), 0, "%s",
	    err.message);
	compile_out_clear(&out);
	cr_assert_eq(store_executions_count(pd.store, "t-poll"), 2);
	store_poison(pd.store);
	cr_assert_eq(store_submit(pd.store), 1);
	polls = 0;
	while ((rc = store_poll(pd.store, &ok)) == 0) {
		cr_assert_lt(++polls, 10000, "the writer never finished");
		usleep(1000);
	}
	cr_assert_eq(ok, 0, "a poisoned batch reported committed");
	cr_assert_eq(store_executions_count(pd.store, "t-poll"), 1);
}

/* Many batches through the writer thread: every record lands once, in
 * order, and the chain verifies. */
Test(compile, writer_thread_keeps_the_chain)
{
	struct compile_out		 out;
	Sbx__V1__Error			 err = SBX__V1__ERROR__INIT;
	Sbx__V1__Task			 t;
	Sbx__V1__AuditVerifyReply	 vr = SBX__V1__AUDIT_VERIFY_REPLY__INIT;
	Sbx__V1__AuditEvent		**ev;
	size_t				 n;
	char				 id[32];
	int				 ok;

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	for (int i = 0; i < 200; i++) {
		snprintf(id, sizeof(id), "t-w%d", i % 50);
		task_init(&t, id, "analytics", "acme", "alice", alice_ds);
		cr_assert_eq(compile_task(&pd, &t, "uid:0", 0, &out, &err), 0,
		    "%s", err.message);
		compile_out_clear(&out);
		if (i % 7 == 0 && !store_busy(pd.store))
			cr_assert_eq(store_submit(pd.store), 1);
		if (store_reap(pd.store, &ok) == 1)
			cr_assert(ok);
	}
	cr_assert_eq(store_wait(pd.store), 0);
	cr_assert_eq(store_commit(pd.store), 0);
	for (int i = 0; i < 50; i++) {
		snprintf(id, sizeof(id), "t-w%d", i);
		cr_assert_eq(store_executions_count(pd.store, id), 4);
	}
	cr_assert_eq(audit_query(store_audit(pd.store), "t-w7", 0, &ev, &n),
	    0);
	cr_assert_eq(n, 4);
	for (size_t i = 1; i < n; i++)
		cr_assert_gt(ev[i]->seq, ev[i - 1]->seq);
	audit_events_free(ev, n);
	cr_assert_eq(audit_verify(store_audit(pd.store), &vr), 0);
	cr_assert(vr.ok, "audit chain: %s", vr.problem);
	cr_assert_eq(vr.records, 200);
	audit_verify_clear(&vr);
}

/* Entitlements are cached for compiles; a change is seen at once. */
Test(compile, entitlement_change_is_seen)
{
	static const char	*none[] = { NULL };
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;
	Sbx__V1__Entitlement	 m = SBX__V1__ENTITLEMENT__INIT;
	char			 why[256];

	entitle("acme", "erin", alice_ds, fx_host, NULL);
	task_init(&t, "t-e1", "analytics", "acme", "erin", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
	cr_assert_eq(out.policy->network->n_allow, 1);
	compile_out_clear(&out);

	m.tenant = (char *)"acme";
	m.user = (char *)"erin";
	m.datasets = (char **)alice_ds;
	m.n_datasets = 1;
	m.hosts = (char **)none;
	cr_assert_eq(entitle_remove(pd.ent, &m, why, sizeof(why)), 0, "%s",
	    why);
	task_init(&t, "t-e2", "analytics", "acme", "erin", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_str_eq(err.rule, "dataset-not-readable");
	compile_error_clear(&err);
	task_init(&t, "t-e3", "analytics", "acme", "erin", NULL);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
	cr_assert_eq(out.policy->network->n_allow, 1);
	compile_out_clear(&out);
}

Test(compile, task_mismatch)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	entitle("acme", "bob", alice_ds, fx_host, NULL);
	task_init(&t, "t-m", "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
	compile_out_clear(&out);

	task_init(&t, "t-m", "analytics", "acme", "bob", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_eq(err.code, SBX__V1__ERROR_CODE__ERROR_POLICY);
	cr_assert_str_eq(err.rule, "task-mismatch");
	compile_error_clear(&err);

	entitle("acme", "alice", (const char *[]){ "report-fixtures", NULL },
	    NULL, NULL);
	task_init(&t, "t-m", "report", "acme", "alice", NULL);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_str_eq(err.rule, "task-mismatch");
	compile_error_clear(&err);
	cr_assert_eq(store_executions_count(pd.store, "t-m"), 1);
}

Test(compile, unknown_task_type)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	task_init(&t, "t-u", "mining", "acme", "alice", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_eq(err.code, SBX__V1__ERROR_CODE__ERROR_POLICY);
	cr_assert_str_eq(err.rule, "unknown-task-type");
	cr_assert_not_null(strstr(err.message, "\"mining\""));
	compile_error_clear(&err);
}

Test(compile, no_entitlement_then_tenant_wide_row)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;

	task_init(&t, "t-n", "analytics", "acme", "carol", NULL);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_str_eq(err.rule, "no-entitlement");
	compile_error_clear(&err);

	/* A "*" row covers every user of the tenant... */
	entitle("acme", "*", NULL, fx_host, NULL);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
	cr_assert_eq(out.policy->network->n_allow, 1);
	compile_out_clear(&out);
	/* ...and no one else's. */
	task_init(&t, "t-n2", "analytics", "other", "carol", NULL);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_str_eq(err.rule, "no-entitlement");
	compile_error_clear(&err);
}

Test(compile, limits_clamped_to_the_plan)
{
	Sbx__V1__Limits		 up = SBX__V1__LIMITS__INIT;
	Sbx__V1__Limits		 ap = SBX__V1__LIMITS__INIT;
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;

	up.memory_mb = 512;		/* below the template's 1024 */
	up.pids = 4096;			/* above the template's 128 */
	ap.wall_seconds = 20;		/* tenant-wide, the user sets none */
	ap.memory_mb = 100;		/* the user's own value wins */
	entitle("acme", "alice", alice_ds, fx_host, &up);
	entitle("acme", "*", NULL, NULL, &ap);
	task_init(&t, "t-l", "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
	cr_assert_eq(out.policy->limits->memory_mb, 512);
	cr_assert_eq(out.policy->limits->pids, 128);
	cr_assert_eq(out.policy->limits->wall_seconds, 20);
	cr_assert_eq(out.policy->limits->cpus_milli, 1000);
	cr_assert_eq(out.policy->limits->scratch_mb, 256);
	compile_out_clear(&out);
}

Test(compile, task_placeholders_substituted)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	task_init(&t, "t-s", "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
	cr_assert_eq(out.policy->network->n_allow, 1);
	cr_assert_eq(out.policy->network->allow[0]->n_paths, 1);
	cr_assert_str_eq(out.policy->network->allow[0]->paths[0],
	    "/v1/acme/alice/");
	cr_assert_eq(out.policy->n_credentials, 1);
	cr_assert_str_eq(out.policy->credentials[0]->secret, "fx-acme");
	cr_assert_eq(out.policy->n_inputs, 1);
	cr_assert_str_eq(out.policy->inputs[0]->dataset, "supplier-2026-q3");
	compile_out_clear(&out);
}

Test(compile, credential_dropped_with_its_host)
{
	static const char	*other[] = { "api.other.internal", NULL };
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;

	entitle("acme", "dave", NULL, other, NULL);
	task_init(&t, "t-c", "analytics", "acme", "dave", NULL);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
	cr_assert_eq(out.policy->network->n_allow, 1);
	cr_assert_str_eq(out.policy->network->allow[0]->host,
	    "api.other.internal");
	cr_assert_eq(out.policy->n_credentials, 1);
	cr_assert_str_eq(out.policy->credentials[0]->host,
	    "api.other.internal");
	cr_assert_eq(out.policy->n_inputs, 0);
	compile_out_clear(&out);
}

Test(compile, invalid_task_names_the_field)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;
	static const char	*bad[] = { "../etc/passwd", NULL };

	task_init(&t, "t 1", "analytics", "acme", "alice", NULL);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_eq(err.code, SBX__V1__ERROR_CODE__ERROR_INVALID);
	cr_assert_not_null(strstr(err.message, "task.id"), "%s", err.message);
	compile_error_clear(&err);
	task_init(&t, "t-1", "analytics", "acme", "*", NULL);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_not_null(strstr(err.message, "task.user"), "%s",
	    err.message);
	compile_error_clear(&err);
	task_init(&t, "t-1", "analytics", "acme", "alice", bad);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_not_null(strstr(err.message, "task.datasets[0]"), "%s",
	    err.message);
	compile_error_clear(&err);
}

/*
 * Issue 13, item 7: a task's traceparent labels the execution's records
 * but is never part of the policy: the same task compiles to the same
 * policy and hash with and without one.  A bad one is refused, naming
 * the field, before anything is recorded.
 */
Test(compile, traceparent_labels_but_does_not_change_the_policy)
{
	static const char	 tp[] =
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	struct compile_out	 a, b;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;
	Sbx__V1__AuditEvent	**ev;
	Sbx__V1__PolicyGrant	*g;
	uint8_t			*pa, *pb;
	size_t			 n, la, lb;

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	task_init(&t, "t-tp", "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile(&t, &a, &err), 0, "%s", err.message);
	t.traceparent = (char *)tp;
	cr_assert_eq(compile(&t, &b, &err), 0, "%s", err.message);
	cr_assert_str_eq(a.hash, b.hash);
	la = sbx__v1__policy__get_packed_size(a.policy);
	lb = sbx__v1__policy__get_packed_size(b.policy);
	cr_assert_eq(la, lb);
	pa = xmalloc(la);
	pb = xmalloc(lb);
	sbx__v1__policy__pack(a.policy, pa);
	sbx__v1__policy__pack(b.policy, pb);
	cr_assert_eq(memcmp(pa, pb, la), 0);
	free(pa);
	free(pb);
	/* Nor is it in what policyd signs. */
	g = sbx__v1__policy_grant__unpack(NULL, b.signed_.grant.len,
	    b.signed_.grant.data);
	cr_assert_not_null(g);
	cr_assert_null(memmem(b.signed_.grant.data, b.signed_.grant.len,
	    "4bf92f3577b34da6", 16));
	sbx__v1__policy_grant__free_unpacked(g, NULL);

	cr_assert_eq(audit_query(store_audit(pd.store), "t-tp", 0, &ev, &n),
	    0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(ev[0]->execution_id, a.execution_id);
	cr_assert_str_eq(ev[0]->traceparent, "");
	cr_assert_str_eq(ev[1]->execution_id, b.execution_id);
	cr_assert_str_eq(ev[1]->traceparent, tp);
	audit_events_free(ev, n);
	compile_out_clear(&a);
	compile_out_clear(&b);

	/* A refusal of a traced task carries the trace too. */
	task_init(&t, "t-tp2", "no-such-type", "acme", "alice", NULL);
	t.traceparent = (char *)tp;
	cr_assert_eq(compile(&t, &a, &err), -1);
	cr_assert_eq(err.code, SBX__V1__ERROR_CODE__ERROR_POLICY);
	compile_error_clear(&err);
	cr_assert_eq(audit_query(store_audit(pd.store), "t-tp2", 0, &ev, &n),
	    0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(ev[0]->action, "deny");
	cr_assert_str_eq(ev[0]->traceparent, tp);
	audit_events_free(ev, n);

	/* Invalid: refused, named, and nothing recorded. */
	task_init(&t, "t-tp3", "analytics", "acme", "alice", alice_ds);
	t.traceparent = (char *)"00-4bf92f3577b34da6a3ce929d0e0e4736-"
	    "00f067aa0ba902b7-01\n[forged] line";
	cr_assert_eq(compile(&t, &a, &err), -1);
	cr_assert_eq(err.code, SBX__V1__ERROR_CODE__ERROR_INVALID);
	cr_assert_str_eq(err.message, "task.traceparent: want 55 characters "
	    "(version-traceid-parentid-flags, e.g. 00-<32 hex>-<16 hex>-01), "
	    "got more than 55");
	compile_error_clear(&err);
	t.traceparent = (char *)"00-00000000000000000000000000000000-"
	    "00f067aa0ba902b7-01";
	cr_assert_eq(compile(&t, &a, &err), -1);
	cr_assert_eq(err.code, SBX__V1__ERROR_CODE__ERROR_INVALID);
	cr_assert_not_null(strstr(err.message, "task.traceparent: the "
	    "trace-id is all zeros"), "%s", err.message);
	compile_error_clear(&err);
	cr_assert_eq(audit_query(store_audit(pd.store), "t-tp3", 0, &ev, &n),
	    0);
	cr_assert_eq(n, 0);
	audit_events_free(ev, n);
}

Test(compile, audit_record_matches_the_reply)
{
	struct compile_out		 out;
	Sbx__V1__Error			 err;
	Sbx__V1__Task			 t;
	Sbx__V1__AuditEvent		**ev;
	Sbx__V1__AuditVerifyReply	 vr = SBX__V1__AUDIT_VERIFY_REPLY__INIT;
	Sbx__V1__PolicyGrant		*g;
	char				 why[256], hash[POLICY_HASH_HEX];
	size_t				 n;

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	task_init(&t, "t-a", "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);

	cr_assert_eq(audit_query(store_audit(pd.store), "t-a", 0, &ev, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(ev[0]->action, "compile");
	cr_assert_str_eq(ev[0]->task_id, "t-a");
	cr_assert_str_eq(ev[0]->execution_id, out.execution_id);
	cr_assert_str_eq(ev[0]->policy_hash, out.hash);
	cr_assert_str_eq(ev[0]->detail, "template analytics-readonly@7");
	audit_events_free(ev, n);
	cr_assert_eq(store_execution_exists(pd.store, out.execution_id), 1);

	cr_assert_eq(audit_verify(store_audit(pd.store), &vr), 0);
	cr_assert(vr.ok, "audit chain: %s", vr.problem);
	audit_verify_clear(&vr);

	/* The signed grant carries the same hash and verifies. */
	g = sign_verify(pd.key->pk, &out.signed_, now_s(), why, sizeof(why));
	cr_assert_not_null(g, "%s", why);
	cr_assert_str_eq(g->policy_hash, out.hash);
	cr_assert_str_eq(g->execution_id, out.execution_id);
	cr_assert_str_eq(g->task_id, "t-a");
	cr_assert_eq(g->expires_at, out.expires_at);
	cr_assert_eq(policy_hash(g->policy, hash), 0);
	cr_assert_str_eq(hash, out.hash);
	sbx__v1__policy_grant__free_unpacked(g, NULL);
	compile_out_clear(&out);
}

/* The egress_spent a compile signed into its grant. */
static uint64_t
signed_spent(const struct compile_out *out)
{
	Sbx__V1__PolicyGrant	*g;
	uint64_t		 n;

	g = sbx__v1__policy_grant__unpack(NULL, out->signed_.grant.len,
	    out->signed_.grant.data);
	cr_assert_not_null(g);
	n = g->egress_spent;
	sbx__v1__policy_grant__free_unpacked(g, NULL);
	cr_assert_eq(n, out->egress_spent);
	return n;
}

/* Compile a run and commit it; its execution id in xid. */
static uint64_t
run_spent(const Sbx__V1__Task *t, char *xid, size_t xidlen)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err = SBX__V1__ERROR__INIT;
	uint64_t		 n;

	cr_assert_eq(compile_task(&pd, t, "uid:1000", 1, &out, &err), 0,
	    "%s", err.message);
	cr_assert_eq(store_commit(pd.store), 0);
	n = signed_spent(&out);
	if (xid != NULL)
		snprintf(xid, xidlen, "%s", out.execution_id);
	compile_out_clear(&out);
	return n;
}

/*
 * Issue 10, item 6: max_out_kb (256 KiB here) is the task's across all
 * its executions, durably.  Each run's grant says what the earlier ones
 * spent; one whose spend is not known counts as all it was allowed; a
 * compile alone counts nothing (launchd-sbx runs only what policyd
 * launches); and a restart of policyd forgets nothing.
 */
static void
reopen_store(void)
{
	char	 errs[256], db[300];

	snprintf(db, sizeof(db), "%s/policyd.db", tdir);
	entitle_close(pd.ent);
	store_close(pd.store);
	cr_assert_not_null(pd.store = store_open(db, errs, sizeof(errs)),
	    "%s", errs);
	cr_assert_not_null(pd.ent = entitle_open(store_db(pd.store), errs,
	    sizeof(errs)), "%s", errs);
	cr_assert_eq(entitle_use_reader(pd.ent, store_reader(pd.store), errs,
	    sizeof(errs)), 0, "%s", errs);
}

Test(compile, egress_budget_is_the_tasks_across_runs)
{
	struct compile_out	 out;
	Sbx__V1__Error		 err = SBX__V1__ERROR__INIT;
	Sbx__V1__Task		 t;
	char			 x1[40], x2[40], x3[40];
	const uint64_t		 budget = 256 * 1024;

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	task_init(&t, "t-egress", "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(run_spent(&t, x1, sizeof(x1)), 0);
	/* Still running: its whole allowance is spent for the next. */
	cr_assert_eq(run_spent(&t, x2, sizeof(x2)), budget);
	store_add_egress(pd.store, t.id, x1, "h", 1, 100000, NULL, 0,
	    "uid:0");
	cr_assert_eq(store_commit(pd.store), 0);
	/* x2 was allowed nothing, so only x1's spend counts now. */
	cr_assert_eq(run_spent(&t, x3, sizeof(x3)), 100000);
	store_add_egress(pd.store, t.id, x2, "h", 1, 0, NULL, 0,
	    "uid:0");
	/* egressd died under x3: its allowance stays spent. */
	store_add_egress(pd.store, t.id, x3, "h", 0, 0, NULL, 0,
	    "uid:0");
	cr_assert_eq(store_commit(pd.store), 0);
	cr_assert_eq(run_spent(&t, x3, sizeof(x3)), budget);
	store_add_egress(pd.store, t.id, x3, "h", 1, 0, NULL, 0,
	    "uid:0");
	cr_assert_eq(store_commit(pd.store), 0);

	/* Compiles alone sign the count in but add nothing to it. */
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
		cr_assert_eq(signed_spent(&out), budget);
		compile_out_clear(&out);
	}

	/* policyd restarts: the same count, from the database. */
	reopen_store();
	cr_assert_eq(run_spent(&t, NULL, 0), budget);

	/* Another task has its own budget. */
	task_init(&t, "t-egress-2", "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(run_spent(&t, NULL, 0), 0);
}

/* ---- issue 13 item 3: a cluster of denials, a security review ---- */

/* The task's security-review events: how many, and the last's rule,
 * execution and detail (copied into the buffers). */
static size_t
reviews_of(const char *task_id, char *rule, char *xid, char *detail)
{
	Sbx__V1__AuditEvent	**ev;
	size_t			 n, found = 0;

	cr_assert_eq(audit_query(store_audit(pd.store), task_id, 0, &ev, &n),
	    0);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(ev[i]->action, "security-review") != 0)
			continue;
		found++;
		snprintf(rule, 256, "%s", ev[i]->rule);
		snprintf(xid, 40, "%s", ev[i]->execution_id);
		snprintf(detail, 512, "%s", ev[i]->detail);
		cr_assert_str_eq(ev[i]->policy_hash, "h");
	}
	audit_events_free(ev, n);
	return found;
}


/*
 * A task's denials count across its executions -- a refused compile, the
 * rules a run's result names -- and a restart of policyd; once they reach
 * security_review.denials (3 here) one security-review event names the
 * rules, with the execution and hash of the record that reached it, and
 * later denials add none.  A batch that rolls back records no review; a
 * task below the count gets none.
 */
Test(compile, denials_reach_one_security_review)
{
	static const char	*payroll[] = { "payroll-2026", NULL };
	static const struct store_denial egress1[] = {
		{ .rule = "host-not-allowed", .boundary = "egress" },
	};
	static const struct store_denial cluster[] = {
		{ .rule = "url-too-long", .boundary = "egress" },
		{ .rule = "undeclared", .boundary = "gate" },
	};
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;
	char			 x1[40], x2[40], rule[256], xid[40];
	char			 detail[512];

	store_set_review(pd.store, 3);
	entitle("acme", "alice", alice_ds, fx_host, NULL);
	task_init(&t, "t-review", "analytics", "acme", "alice", payroll);
	cr_assert_eq(compile(&t, &out, &err), -1);
	compile_error_clear(&err);
	task_init(&t, "t-review", "analytics", "acme", "alice", alice_ds);
	(void)run_spent(&t, x1, sizeof(x1));
	(void)run_spent(&t, x2, sizeof(x2));
	store_add_egress(pd.store, t.id, x1, "h", 1, 0, egress1, 1, "uid:0");
	cr_assert_eq(store_commit(pd.store), 0);
	cr_assert_eq(reviews_of("t-review", rule, xid, detail), 0,
	    "a review after 2 denials");

	/* The count is on disk: a restart forgets nothing. */
	reopen_store();
	store_set_review(pd.store, 3);
	/* The batch that would reach it rolls back: no review. */
	store_add_egress(pd.store, t.id, x2, "h", 1, 0, cluster, 2, "uid:0");
	store_poison(pd.store);
	cr_assert_eq(store_commit(pd.store), -1);
	cr_assert_eq(reviews_of("t-review", rule, xid, detail), 0);
	cr_assert_eq(store_reviews(pd.store), 0);

	store_add_egress(pd.store, t.id, x2, "h", 1, 0, cluster, 2, "uid:0");
	cr_assert_eq(store_commit(pd.store), 0);
	cr_assert_eq(reviews_of("t-review", rule, xid, detail), 1);
	cr_assert_str_eq(rule, "dataset-not-readable,host-not-allowed,"
	    "undeclared,url-too-long");
	cr_assert_str_eq(xid, x2);
	cr_assert_str_eq(detail, "4 denials in 2 executions reached "
	    "security_review.denials 3: dataset-not-readable/policy x1 "
	    "host-not-allowed/egress x1 undeclared/gate x1 "
	    "url-too-long/egress x1");
	cr_assert_eq(store_reviews(pd.store), 1);

	/* Once per task, also across a restart. */
	store_add_egress(pd.store, t.id, x1, "h", 1, 0, egress1, 1, "uid:0");
	cr_assert_eq(store_commit(pd.store), 0);
	reopen_store();
	store_set_review(pd.store, 3);
	store_add_egress(pd.store, t.id, x2, "h", 1, 0, cluster, 2, "uid:0");
	cr_assert_eq(store_commit(pd.store), 0);
	cr_assert_eq(reviews_of("t-review", rule, xid, detail), 1);
	cr_assert_eq(store_reviews(pd.store), 0);

	/* Another task: two denials, below the count. */
	task_init(&t, "t-quiet", "analytics", "acme", "alice", alice_ds);
	(void)run_spent(&t, x1, sizeof(x1));
	store_add_egress(pd.store, t.id, x1, "h", 1, 0, cluster, 2, "uid:0");
	cr_assert_eq(store_commit(pd.store), 0);
	cr_assert_eq(reviews_of("t-quiet", rule, xid, detail), 0);

	/* 0 never reviews. */
	store_set_review(pd.store, 0);
	task_init(&t, "t-off", "analytics", "acme", "alice", alice_ds);
	(void)run_spent(&t, x1, sizeof(x1));
	for (int i = 0; i < 3; i++)
		store_add_egress(pd.store, t.id, x1, "h", 1, 0, cluster, 2,
		    "uid:0");
	cr_assert_eq(store_commit(pd.store), 0);
	cr_assert_eq(reviews_of("t-off", rule, xid, detail), 0);
}

/* ---- issue 13 item 5: a grant merges into the template's rule ---- */

static const char tmpl_fx_port[] =
    "policy: fx-port\n"
    "version: 1\n"
    "isolation: gvisor\n"
    "image: sandbox/py@sha256:"
    "a2297711e96bea7cb00cd4dfdd083b1a568acfbf7c8e991512f488901936caed\n"
    "limits: {cpus: 1, memory_mb: 512, pids: 64, wall_seconds: 60,"
    " scratch_mb: 64}\n"
    "network:\n"
    "  default: deny\n"
    "  allow:\n"
    "    - {host: api.fx-rates.internal, methods: [GET], port: 8417,"
    " cidrs: [127.0.0.0/8], paths: [/v1/rates], max_response_kb: 64}\n"
    "credentials:\n"
    "  - {host: api.fx-rates.internal, secret: fx, header: Authorization}\n"
    "outputs:\n"
    "  allowed_types: [text/csv]\n"
    "  max_total_kb: 64\n"
    "  destination: agent\n"
    "executions_per_task: 3\n";

/* A granted host rule as capability.c stores one: host, methods, paths. */
static Sbx__V1__AllowRule *
granted_rule(const char *host, const char *method, const char *path)
{
	Sbx__V1__AllowRule	*r = xcalloc(1, sizeof(*r));

	sbx__v1__allow_rule__init(r);
	r->host = xstrdup(host);
	r->methods = xcalloc(1, sizeof(char *));
	r->methods[0] = xstrdup(method);
	r->n_methods = 1;
	if (path != NULL) {
		r->paths = xcalloc(1, sizeof(char *));
		r->paths[0] = xstrdup(path);
		r->n_paths = 1;
	}
	return r;
}

static Sbx__V1__Policy *
compile_with_grant(Sbx__V1__AllowRule *rule)
{
	const struct tmpl	*tm;
	const struct entitle_eff *eff;
	struct cap_grants	 g = { NULL, 0, NULL, 0 };
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;
	Sbx__V1__Policy		*pol;

	add_template(tmpl_fx_port, "fxport");
	entitle("acme", "alice", NULL, fx_host, NULL);
	cr_assert_not_null(tm = template_active(pd.reg, "fxport"));
	cr_assert_not_null(eff = entitle_lookup(pd.ent, "acme", "alice"));
	task_init(&t, "task-grant", "fxport", "acme", "alice", NULL);
	g.rules = xcalloc(1, sizeof(*g.rules));
	g.rules[0] = rule;
	g.nrules = 1;
	sbx__v1__error__init(&err);
	pol = compile_policy_grants(tm, &t, eff, &g, &err);
	cr_assert_not_null(pol, "compile: %s", err.message);
	compile_grants_clear(&g);
	return pol;
}

static const Sbx__V1__AllowRule *
only_rule_for(const Sbx__V1__Policy *pol, const char *host)
{
	const Sbx__V1__AllowRule	*found = NULL;
	size_t				 n = 0;

	for (size_t i = 0; i < pol->network->n_allow; i++)
		if (strcmp(pol->network->allow[i]->host, host) == 0) {
			found = pol->network->allow[i];
			n++;
		}
	cr_assert_eq(n, 1, "%zu rules for %s: a grant must not add a second "
	    "one that the proxy could take first", n, host);
	return found;
}

static int
has_str(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return 1;
	return 0;
}

/* A shorter granted path: the template's port, CIDRs and size cap stay on
 * the one rule for the host, and both paths are on it. */
Test(compile, grant_with_a_shorter_path_keeps_the_templates_limits)
{
	Sbx__V1__Policy			*pol;
	const Sbx__V1__AllowRule	*r;

	pol = compile_with_grant(granted_rule("api.fx-rates.internal", "GET",
	    "/"));
	r = only_rule_for(pol, "api.fx-rates.internal");
	cr_assert_eq(r->port, 8417, "port %u: the template's 8417 was dropped",
	    r->port);
	cr_assert_eq(r->n_cidrs, 1);
	cr_assert_str_eq(r->cidrs[0], "127.0.0.0/8");
	cr_assert_eq(r->max_response_kb, 64);
	cr_assert(has_str(r->paths, r->n_paths, "/v1/rates"));
	cr_assert(has_str(r->paths, r->n_paths, "/"));
	cr_assert_eq(pol->n_credentials, 1);
	policy_free(pol);
}

/* Another method: granted, and on the rule the proxy uses; the
 * template's paths still bound it (the grant named none of its own). */
Test(compile, grant_of_another_method_is_on_the_templates_rule)
{
	Sbx__V1__Policy			*pol;
	const Sbx__V1__AllowRule	*r;

	pol = compile_with_grant(granted_rule("API.FX-RATES.INTERNAL", "POST",
	    "/v1/rates"));
	r = only_rule_for(pol, "api.fx-rates.internal");
	cr_assert(has_str(r->methods, r->n_methods, "GET"));
	cr_assert(has_str(r->methods, r->n_methods, "POST"),
	    "POST was granted but is not on the rule the proxy takes");
	cr_assert_eq(r->n_paths, 1);
	cr_assert_eq(r->port, 8417);
	policy_free(pol);
}

/* A grant with no paths is "any path" for its host: so is the merged rule
 * (what was granted), still on the template's port and CIDRs. */
Test(compile, grant_of_any_path_widens_only_the_paths)
{
	Sbx__V1__Policy			*pol;
	const Sbx__V1__AllowRule	*r;

	pol = compile_with_grant(granted_rule("api.fx-rates.internal", "GET",
	    NULL));
	r = only_rule_for(pol, "api.fx-rates.internal");
	cr_assert_eq(r->n_paths, 0);
	cr_assert_eq(r->port, 8417);
	cr_assert_eq(r->n_cidrs, 1);
	policy_free(pol);
}

/* A host the template lacks still gets the granted rule of its own. */
Test(compile, grant_for_a_new_host_is_its_own_rule)
{
	Sbx__V1__Policy			*pol;
	const Sbx__V1__AllowRule	*r;

	pol = compile_with_grant(granted_rule("api.other.internal", "GET",
	    "/x"));
	r = only_rule_for(pol, "api.other.internal");
	cr_assert_eq(r->port, 0);
	cr_assert(has_str(r->paths, r->n_paths, "/x"));
	(void)only_rule_for(pol, "api.fx-rates.internal");
	policy_free(pol);
}

/* ---- rollouts (rollout.c, issue 13 item 2) ---- */

/* An id of type analytics on the canary (bucket < 50) or not. */
static void
roll_id(int canary, const char *tag, char *buf, size_t len)
{
	for (int i = 0; ; i++) {
		snprintf(buf, len, "t-%s-%d", tag, i);
		if ((rollout_bucket("analytics", buf) < 50) == canary)
			return;
	}
}

static uint64_t
roll_rule(const char *rule, int canary)
{
	Sbx__V1__Rollouts	 rs;
	uint64_t		 n = 0;
	char			 err[256];

	cr_assert_eq(rollout_status(pd.roll, "analytics", &rs, err,
	    sizeof(err)), 0, "%s", err);
	cr_assert_eq(rs.n_rollouts, 1);
	if (rule == NULL)
		n = canary ? rs.rollouts[0]->canary_executions :
		    rs.rollouts[0]->stable_executions;
	for (size_t i = 0; rule != NULL && i < rs.rollouts[0]->n_rules; i++)
		if (strcmp(rs.rollouts[0]->rules[i]->rule, rule) == 0)
			n = canary ? rs.rollouts[0]->rules[i]->canary_denied :
			    rs.rollouts[0]->rules[i]->stable_denied;
	rollout_status_clear(&rs);
	return n;
}

Test(compile, rollout_assigns_by_task_id_records_it_and_counts_refusals)
{
	struct policyd_conf	 conf;
	struct policyd_task_type tt;
	struct compile_out	 out;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;
	Sbx__V1__RolloutControl	 m = SBX__V1__ROLLOUT_CONTROL__INIT;
	Sbx__V1__ErrorCode	 code;
	char			 v8[sizeof(tmpl_analytics) + 8], *p, c[64],
				 s[64], tm[160], e[256];

	/* Version 8: version 7 with a little less memory. */
	snprintf(v8, sizeof(v8), "%s", tmpl_analytics);
	cr_assert_not_null(p = strstr(v8, "version: 7"));
	p[9] = '8';
	cr_assert_not_null(p = strstr(v8, "memory_mb: 1024"));
	memcpy(p, "memory_mb: 1000", 15);
	add_template(v8, "unused");
	memset(&conf, 0, sizeof(conf));
	memset(&tt, 0, sizeof(tt));
	tt.type = (char *)"analytics";
	tt.template = (char *)"analytics-readonly";
	tt.version = 7;
	tt.canary = 8;
	tt.percent = 50;
	conf.types = &tt;
	conf.ntypes = 1;
	conf.roll_threshold = 200;
	conf.roll_min_exec = 5;
	cr_assert_not_null(pd.roll = rollout_open(&conf, pd.store, e,
	    sizeof(e)), "%s", e);

	entitle("acme", "alice", alice_ds, fx_host, NULL);
	roll_id(1, "c", c, sizeof(c));
	roll_id(0, "s", s, sizeof(s));
	task_init(&t, c, "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
	cr_assert_str_eq(out.template, "analytics-readonly@8");
	cr_assert_eq(out.policy->version, 8);
	compile_out_clear(&out);
	/* The compile record names the version. */
	cr_assert_eq(store_task_template(pd.store, c, tm, sizeof(tm)), 1);
	cr_assert_str_eq(tm, "analytics-readonly@8");
	task_init(&t, s, "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
	cr_assert_str_eq(out.template, "analytics-readonly@7");
	compile_out_clear(&out);

	/* A refusal once the version is chosen counts for it: carol has
	 * no entitlement. */
	roll_id(1, "carol", c, sizeof(c));
	task_init(&t, c, "analytics", "acme", "carol", NULL);
	cr_assert_eq(compile(&t, &out, &err), -1);
	cr_assert_str_eq(err.rule, "no-entitlement");
	compile_error_clear(&err);
	cr_assert_eq(roll_rule(NULL, 1), 1);
	cr_assert_eq(roll_rule("no-entitlement", 1), 1);
	cr_assert_eq(roll_rule("no-entitlement", 0), 0);
	cr_assert_eq(roll_rule(NULL, 0), 0);

	/* Halted: the canary task's retry compiles under stable, and its
	 * record says so. */
	roll_id(1, "c", c, sizeof(c));
	m.type = (char *)"analytics";
	m.action = SBX__V1__ROLLOUT_CONTROL__ACTION__ACTION_HALT;
	cr_assert_eq(rollout_control(pd.roll, &m, "uid:0", &code, e,
	    sizeof(e)), 0, "%s", e);
	task_init(&t, c, "analytics", "acme", "alice", alice_ds);
	cr_assert_eq(compile(&t, &out, &err), 0, "%s", err.message);
	cr_assert_str_eq(out.template, "analytics-readonly@7");
	compile_out_clear(&out);
	cr_assert_eq(store_task_template(pd.store, c, tm, sizeof(tm)), 1);
	cr_assert_str_eq(tm, "analytics-readonly@7");
	rollout_close(pd.roll);
	pd.roll = NULL;
}

/* A preview compiles the policy a compile would, records nothing (no
 * execution, no binding, no audit record), and signs a grant whose
 * execution id says preview, which sign_verify (every daemon) refuses. */
Test(compile, preview_consumes_nothing_and_cannot_run)
{
	struct compile_out	 out, real;
	Sbx__V1__Error		 err;
	Sbx__V1__Task		 t;
	Sbx__V1__PolicyGrant	*g;
	Sbx__V1__AuditEvent	**ev;
	char			 why[256];
	size_t			 n;
	int			 rc;

	entitle("acme", "alice", (const char *[]){ "report-fixtures", NULL },
	    NULL, NULL);
	task_init(&t, "t-pv", "report", "acme", "alice", NULL);
	/* More previews than executions_per_task (3). */
	for (int i = 0; i < 5; i++) {
		sbx__v1__error__init(&err);
		rc = compile_task(&pd, &t, "uid:1000", COMPILE_PREVIEW, &out,
		    &err);
		cr_assert_eq(rc, 0, "preview %d: %s", i + 1, err.message);
		cr_assert(strncmp(out.execution_id, "preview-", 8) == 0,
		    "%s", out.execution_id);
		cr_assert(!store_in_batch(pd.store) ||
		    store_pending(pd.store) == 0, "a preview recorded");
		if (store_in_batch(pd.store))
			cr_assert_eq(store_commit(pd.store), 0);
		g = sign_verify(pd.key->pk, &out.signed_, now_s(), why,
		    sizeof(why));
		cr_assert_null(g, "a preview grant verified for a run");
		cr_assert(strstr(why, "preview") != NULL, "%s", why);
		g = sign_verify_bytes(pd.key->pk, &out.signed_, why,
		    sizeof(why));
		cr_assert_not_null(g, "%s", why);
		cr_assert_str_eq(g->policy_hash, out.hash);
		sbx__v1__policy_grant__free_unpacked(g, NULL);
		compile_out_clear(&out);
	}
	cr_assert_eq(store_executions_count(pd.store, "t-pv"), 0);
	cr_assert_eq(audit_query(store_audit(pd.store), "t-pv", 0, &ev, &n),
	    0);
	cr_assert_eq(n, 0, "a preview left %zu audit records", n);
	audit_events_free(ev, n);
	/* A real compile after them is the task's first execution. */
	cr_assert_eq(compile(&t, &real, &err), 0, "%s", err.message);
	cr_assert(strncmp(real.execution_id, "x-", 2) == 0);
	cr_assert_eq(store_executions_count(pd.store, "t-pv"), 1);
	compile_out_clear(&real);
}
