/*
 * policy_test.c: templates and the policy model.  The reference template
 * parses to the fields the reference text describes; every mistake in a
 * template is reported with file, line, column and key; the same policy
 * written in any key or list order hashes the same, and changing any one
 * capability changes the hash; rendering parses back to an equal policy;
 * and the subset test refuses every widening.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "util.h"
#include "yaml.h"

#define DIGEST	"0123456789abcdef0123456789abcdef" \
		"0123456789abcdef0123456789abcdef"

/* The reference text's worked example, analytics-readonly v7. */
static const char base_yaml[] =
    "policy: analytics-readonly\n"
    "version: 7\n"
    "isolation: gvisor\n"
    "image: sandbox/py-analytics@sha256:" DIGEST "\n"
    "limits: {cpus: 1, memory_mb: 1024, pids: 128, wall_seconds: 60, "
    "scratch_mb: 256}\n"
    "inputs:\n"
    "  - dataset: \"${task.dataset_ref}\"\n"
    "network:\n"
    "  default: deny\n"
    "  allow:\n"
    "    - {host: api.fx-rates.internal, methods: [GET], "
    "max_response_kb: 512, paths: [/v1/]}\n"
    "credentials:\n"
    "  - {host: api.fx-rates.internal, secret: fx-readonly, "
    "header: Authorization}\n"
    "outputs:\n"
    "  allowed_types: [text/csv, image/png, application/json]\n"
    "  max_total_kb: 2048\n"
    "  destination: agent\n"
    "executions_per_task: 15\n";

/* The same policy, keys and lists in another order, other spellings. */
static const char shuffled_yaml[] =
    "executions_per_task: 15\n"
    "outputs:\n"
    "  destination: agent\n"
    "  max_total_kb: 2048\n"
    "  allowed_types: [application/json, Image/PNG, text/csv, text/csv]\n"
    "credentials:\n"
    "  - header: Authorization\n"
    "    secret: fx-readonly\n"
    "    host: API.FX-Rates.Internal.\n"
    "network:\n"
    "  allow:\n"
    "    - paths: [/v1/]\n"
    "      max_response_kb: 512\n"
    "      methods: [get, GET]\n"
    "      host: api.fx-rates.internal\n"
    "  default: deny\n"
    "inputs: [{dataset: \"${task.dataset_ref}\"}]\n"
    "limits:\n"
    "  scratch_mb: 256\n"
    "  wall_seconds: 60\n"
    "  pids: 128\n"
    "  memory_mb: 1024\n"
    "  cpus: 1.000\n"
    "image: sandbox/py-analytics@sha256:" DIGEST "\n"
    "isolation: gvisor\n"
    "version: 7\n"
    "policy: analytics-readonly\n";

/* Every optional field set, two rules and two credentials. */
static const char full_yaml[] =
    "policy: full.example-1\n"
    "version: 3\n"
    "isolation: microvm\n"
    "image: registry.local:5000/sbx/py@sha256:" DIGEST "\n"
    "limits: {cpus: 1.5, memory_mb: 2048, pids: 64, wall_seconds: 300, "
    "scratch_mb: 512}\n"
    "inputs:\n"
    "  - dataset: supplier-2026-q3\n"
    "  - dataset: fx-history\n"
    "network:\n"
    "  default: deny\n"
    "  max_out_kb: 512\n"
    "  allow:\n"
    "    - host: api.fx-rates.internal\n"
    "      methods: [GET, HEAD]\n"
    "      paths: [/v1/rates, \"/users/${task.user}/\"]\n"
    "      max_request_kb: 8\n"
    "      max_response_kb: 2048\n"
    "      cidrs: [10.0.0.0/8, \"fd00::/8\"]\n"
    "      port: 8443\n"
    "    - host: 127.0.0.1\n"
    "      methods: [POST]\n"
    "credentials:\n"
    "  - {host: api.fx-rates.internal, secret: \"fx-${task.tenant}\", "
    "header: Authorization, kind: minted}\n"
    "  - {host: 127.0.0.1, secret: local, header: X-Api-Key, kind: static, "
    "scheme: http}\n"
    "outputs:\n"
    "  allowed_types: [text/csv]\n"
    "  max_total_kb: 4096\n"
    "  max_file_kb: 1024\n"
    "  oversize: truncate\n"
    "  max_text_kb: 32\n"
    "  destination: storage-bucket\n"
    "  remote_links: keep\n"
    "  csv_formulas: neutralise\n"
    "  archives: {max_expanded_mb: 8, max_ratio: 20, max_entries: 50, "
    "max_nesting: 2}\n"
    "  images: {max_side: 4096, max_pixels: 1000000}\n"
    "executions_per_task: 100\n";

static Sbx__V1__Policy *
parse(const char *text, struct yerrs *e)
{
	return policy_parse_buf("t.yaml", text, strlen(text), e);
}

static Sbx__V1__Policy *
parse_ok(const char *text)
{
	struct yerrs	 e = { 0 };
	Sbx__V1__Policy	*p = parse(text, &e);

	for (size_t i = 0; i < e.n; i++)
		fprintf(stderr, "unexpected: %s\n", e.msgs[i]);
	cr_assert_not_null(p, "template did not parse:\n%s", text);
	cr_assert_eq(e.n, 0);
	yerrs_free(&e);
	return p;
}

static int
has(const struct yerrs *e, const char *needle)
{
	for (size_t i = 0; i < e->n; i++)
		if (strstr(e->msgs[i], needle) != NULL)
			return 1;
	return 0;
}

/* text with `from` replaced by `to` (every occurrence if all). */
static char *
subst(const char *text, const char *from, const char *to, int all)
{
	char		*out = xstrdup(text), *t;
	const char	*hit;
	size_t		 off = 0;

	cr_assert_not_null(strstr(text, from), "no \"%s\" in base", from);
	while ((hit = strstr(out + off, from)) != NULL) {
		size_t	 pre = (size_t)(hit - out);

		xasprintf(&t, "%.*s%s%s", (int)pre, out, to, hit + strlen(from));
		free(out);
		out = t;
		off = pre + strlen(to);
		if (!all)
			break;
	}
	return out;
}

static void
hash_of(const Sbx__V1__Policy *p, char hex[POLICY_HASH_HEX])
{
	cr_assert_eq(policy_hash(p, hex), 0);
	cr_assert_eq(strlen(hex), 64);
}

Test(policy, reference_template_fields)
{
	Sbx__V1__Policy			*p = parse_ok(base_yaml);
	const Sbx__V1__AllowRule	*r;

	cr_assert_str_eq(p->name, "analytics-readonly");
	cr_assert_eq(p->version, 7);
	cr_assert_eq(p->isolation, SBX__V1__ISOLATION__ISOLATION_GVISOR);
	cr_assert_str_eq(p->image, "sandbox/py-analytics@sha256:" DIGEST);
	cr_assert_eq(p->limits->cpus_milli, 1000);
	cr_assert_eq(p->limits->memory_mb, 1024);
	cr_assert_eq(p->limits->pids, 128);
	cr_assert_eq(p->limits->wall_seconds, 60);
	cr_assert_eq(p->limits->scratch_mb, 256);
	cr_assert_eq(p->n_inputs, 1);
	cr_assert_str_eq(p->inputs[0]->dataset, "${task.dataset_ref}");
	cr_assert_str_eq(p->network->default_action, "deny");
	cr_assert_eq(p->network->n_allow, 1);
	r = p->network->allow[0];
	cr_assert_str_eq(r->host, "api.fx-rates.internal");
	cr_assert_eq(r->n_methods, 1);
	cr_assert_str_eq(r->methods[0], "GET");
	cr_assert_eq(r->n_paths, 1);
	cr_assert_str_eq(r->paths[0], "/v1/");
	cr_assert_eq(r->max_response_kb, 512);
	cr_assert_eq(r->max_request_kb, 0, "unset means the default");
	cr_assert_eq(p->n_credentials, 1);
	cr_assert_str_eq(p->credentials[0]->secret, "fx-readonly");
	cr_assert_str_eq(p->credentials[0]->header, "Authorization");
	cr_assert_eq(p->credentials[0]->kind,
	    SBX__V1__CREDENTIAL_KIND__CREDENTIAL_STATIC);
	cr_assert_eq(p->credentials[0]->scheme,
	    SBX__V1__CREDENTIAL_SCHEME__CREDENTIAL_SCHEME_HTTPS,
	    "unset means https");
	cr_assert_eq(p->outputs->n_allowed_types, 3);
	/* Sorted. */
	cr_assert_str_eq(p->outputs->allowed_types[0], "application/json");
	cr_assert_str_eq(p->outputs->allowed_types[1], "image/png");
	cr_assert_str_eq(p->outputs->allowed_types[2], "text/csv");
	cr_assert_eq(p->outputs->max_total_kb, 2048);
	cr_assert_eq(p->outputs->destination,
	    SBX__V1__DESTINATION__DESTINATION_AGENT);
	cr_assert_eq(p->executions_per_task, 15);
	policy_free(p);
}

Test(policy, example_templates_parse)
{
	static const char *const files[] = {
		"deploy/examples/templates/analytics-readonly.yaml",
		"deploy/examples/templates/analytics-readonly-v6.yaml",
	};
	char	 why[256];
	Sbx__V1__Policy	*p[2];

	for (size_t i = 0; i < 2; i++) {
		struct yerrs	 e = { 0 };

		p[i] = policy_parse_file(files[i], &e);
		for (size_t j = 0; j < e.n; j++)
			fprintf(stderr, "%s\n", e.msgs[j]);
		cr_assert_not_null(p[i], "%s (run from the source root)",
		    files[i]);
		yerrs_free(&e);
	}
	cr_assert_eq(p[0]->version, 7);
	cr_assert_eq(p[1]->version, 6);
	cr_assert_eq(p[0]->limits->memory_mb, 1024);
	cr_assert_eq(p[0]->n_credentials, 1);
	/* v7 is wider than v6 in more than the version number. */
	cr_assert_eq(policy_is_subset(p[0], p[1], why, sizeof(why)), 0);
	policy_free(p[0]);
	policy_free(p[1]);
}

Test(policy, three_mistakes_three_messages)
{
	struct yerrs	 e = { 0 };
	char		*t1, *t2, *t3;

	t1 = subst(base_yaml, "pids: 128", "pids: lots", 0);
	t2 = subst(t1, "isolation: gvisor", "isolation: vm", 0);
	t3 = subst(t2, "max_total_kb: 2048", "max_total_kb: -5", 0);
	cr_assert_null(parse(t3, &e));
	cr_assert_eq(e.n, 3);
	cr_assert(has(&e, "t.yaml:5:42: limits.pids: must be an integer "
	    "from 1 to 65536, got \"lots\""));
	cr_assert(has(&e, "t.yaml:3:12: isolation: must be one of container, "
	    "gvisor, microvm, got \"vm\""));
	cr_assert(has(&e, "t.yaml:16:17: outputs.max_total_kb: must be an "
	    "integer from 1 to 1048576, got \"-5\""));
	free(t1);
	free(t2);
	free(t3);
	yerrs_free(&e);
}

Test(policy, unknown_keys_named)
{
	struct yerrs	 e = { 0 };
	char		*t1, *t2;

	t1 = subst(base_yaml, "memory_mb:", "memory:", 0);
	t2 = subst(t1, "executions_per_task:", "executions:", 0);
	cr_assert_null(parse(t2, &e));
	cr_assert(has(&e, "t.yaml:5:19: limits.memory: unknown key "
	    "\"memory\" in limits"));
	cr_assert(has(&e, "limits.memory_mb: required key is missing"));
	cr_assert(has(&e, "t.yaml:18:1: executions: unknown key "
	    "\"executions\""));
	cr_assert(has(&e, "executions_per_task: required key is missing"));
	cr_assert_eq(e.n, 4);
	free(t1);
	free(t2);
	yerrs_free(&e);
}

Test(policy, anchors_refused)
{
	struct yerrs	 e = { 0 };
	char		*t;

	t = subst(base_yaml, "limits: {", "limits: &l {", 0);
	cr_assert_null(parse(t, &e));
	cr_assert(has(&e, "limits: anchors (&l) are not allowed"));
	free(t);
	yerrs_free(&e);
}

Test(policy, empty_and_non_map_documents_refused)
{
	struct yerrs	 e = { 0 };

	cr_assert_null(parse("", &e));
	cr_assert(has(&e, "t.yaml: empty document"));
	yerrs_free(&e);
	cr_assert_null(parse("- a\n- b\n", &e));
	cr_assert(has(&e, "t.yaml:1:1: document: must be a mapping"));
	yerrs_free(&e);
}

/* Bad values, each with the message (or part) it must produce. */
static const struct {
	const char	*from, *to, *msg;
} bad_values[] = {
	{ "@sha256:" DIGEST, ":latest",
	  "image: must be pinned by digest" },
	{ "@sha256:" DIGEST, "@sha256:0123",
	  "image: must be pinned by digest" },
	{ "@sha256:0123456789abcdef", "@sha256:0123456789ABCDEF",
	  "image: must be pinned by digest" },
	{ "policy: analytics-readonly", "policy: Analytics",
	  "policy: must be 1-64 of a-z 0-9" },
	{ "version: 7", "version: 0",
	  "version: must be an integer from 1 to 1000000, got \"0\"" },
	{ "cpus: 1,", "cpus: 65,",
	  "limits.cpus: must be a number from 0.001 to 64" },
	{ "memory_mb: 1024", "memory_mb: 8",
	  "limits.memory_mb: must be an integer from 16 to 1048576" },
	{ "wall_seconds: 60", "wall_seconds: 86401",
	  "limits.wall_seconds: must be an integer from 1 to 86400" },
	{ "scratch_mb: 256", "scratch_mb: 0x100",
	  "limits.scratch_mb: must be an integer" },
	{ "default: deny", "default: allow",
	  "network.default: only \"deny\" is accepted" },
	{ "host: api.fx-rates.internal, methods",
	  "host: \"*.fx-rates.internal\", methods",
	  "network.allow[0].host: wildcards are not allowed" },
	{ "host: api.fx-rates.internal, methods",
	  "host: \"api.fx-rates.internal:443\", methods",
	  "network.allow[0].host: must not contain a port" },
	{ "host: api.fx-rates.internal, methods",
	  "host: \"bob@api.fx-rates.internal\", methods",
	  "network.allow[0].host: must not contain userinfo" },
	{ "host: api.fx-rates.internal, methods",
	  "host: \"https://api.fx-rates.internal\", methods",
	  "network.allow[0].host: must be a host name, not a URL" },
	{ "host: api.fx-rates.internal, methods",
	  "host: \"api_fx..internal\", methods",
	  "network.allow[0].host: is not a valid host name" },
	{ "methods: [GET]", "methods: [fetch]",
	  "network.allow[0].methods[0]: unknown method \"FETCH\"" },
	{ "methods: [GET]", "methods: []",
	  "network.allow[0].methods: must list at least one method" },
	{ "methods: [GET]", "methods: GET",
	  "network.allow[0].methods: must be a list of strings" },
	{ "paths: [/v1/]", "paths: []",
	  "network.allow[0].paths: must list at least one prefix" },
	{ "paths: [/v1/]", "paths: [v1/]",
	  "network.allow[0].paths[0]: must start with \"/\"" },
	{ "paths: [/v1/]", "paths: [/v1/../admin]",
	  "network.allow[0].paths[0]: must start with \"/\" and contain no "
	  "\"..\"" },
	{ "paths: [/v1/]", "paths: [\"/v1/?q=1\"]",
	  "network.allow[0].paths[0]: must start" },
	{ "paths: [/v1/]", "paths: [\"/v1/#x\"]",
	  "network.allow[0].paths[0]: must start" },
	{ "paths: [/v1/]", "paths: [\"/${task.secret}/\"]",
	  "network.allow[0].paths[0]: unknown placeholder ${task.secret}" },
	{ "paths: [/v1/]", "paths: [\"/${task.dataset_ref}/\"]",
	  "network.allow[0].paths[0]: unknown placeholder "
	  "${task.dataset_ref}" },
	{ "paths: [/v1/]", "paths: [/v1/], cidrs: [10.0.0.0/33]",
	  "network.allow[0].cidrs[0]: must be an IPv4 or IPv6 network" },
	{ "paths: [/v1/]", "paths: [/v1/], cidrs: [10.0.0.0]",
	  "network.allow[0].cidrs[0]: must be an IPv4 or IPv6 network" },
	{ "paths: [/v1/]", "paths: [/v1/], cidrs: [\"fe80::zz/64\"]",
	  "network.allow[0].cidrs[0]: must be an IPv4 or IPv6 network" },
	{ "paths: [/v1/]", "paths: [/v1/], port: 70000",
	  "network.allow[0].port: must be an integer from 1 to 65535" },
	{ "paths: [/v1/]", "paths: [/v1/], proto: https",
	  "network.allow[0].proto: unknown key" },
	{ "secret: fx-readonly, header: Authorization}",
	  "secret: fx-readonly, header: Authorization}\n"
	  "  - {host: evil.example, secret: fx-readonly, header: X-K}",
	  "credentials[1].host: evil.example has no network.allow rule" },
	{ "header: Authorization", "header: \"Author ization\"",
	  "credentials[0].header: must be an HTTP header name" },
	{ "header: Authorization", "header: \"X:Y\"",
	  "credentials[0].header: must be an HTTP header name" },
	{ "secret: fx-readonly", "secret: \"fx/readonly\"",
	  "credentials[0].secret: must be a secret name" },
	{ "secret: fx-readonly", "secret: \"${env.HOME}\"",
	  "credentials[0].secret: unknown placeholder ${env.HOME}" },
	{ "header: Authorization}", "header: Authorization, kind: dynamic}",
	  "credentials[0].kind: must be one of static, minted" },
	{ "header: Authorization}", "header: Authorization, scheme: ftp}",
	  "credentials[0].scheme: must be one of https, http" },
	{ "\"${task.dataset_ref}\"", "\"${task.id}\"",
	  "inputs[0].dataset: the only placeholder allowed here is the "
	  "whole value" },
	{ "\"${task.dataset_ref}\"", "\"x-${task.dataset_ref}\"",
	  "inputs[0].dataset: the only placeholder allowed here" },
	{ "\"${task.dataset_ref}\"", "\"/etc/passwd\"",
	  "inputs[0].dataset: must be a dataset name" },
	{ "allowed_types: [text/csv,", "allowed_types: [csv,",
	  "outputs.allowed_types[0]: must be a MIME type" },
	{ "destination: agent", "destination: email",
	  "outputs.destination: must be one of agent, user, storage-bucket" },
	{ "max_total_kb: 2048", "max_total_kb: 2048\n  max_file_kb: 4096",
	  "outputs.max_file_kb: 4096 is larger than max_total_kb 2048" },
	{ "max_total_kb: 2048", "max_total_kb: 2048\n  oversize: cut",
	  "outputs.oversize: must be one of refuse, truncate" },
	{ "executions_per_task: 15", "executions_per_task: 0",
	  "executions_per_task: must be an integer" },
	{ "  - {host: api.fx-rates.internal, methods: [GET], max_response_kb: "
	  "512, paths: [/v1/]}",
	  "  - {host: api.fx-rates.internal, methods: [GET]}\n"
	  "    - {host: API.fx-rates.internal, methods: [POST]}",
	  "network.allow[1].host: api.fx-rates.internal already has a rule" },
};

Test(policy, bad_values_named)
{
	for (size_t i = 0; i < sizeof(bad_values) / sizeof(bad_values[0]);
	    i++) {
		struct yerrs	 e = { 0 };
		char		*t = subst(base_yaml, bad_values[i].from,
				    bad_values[i].to, 0);

		cr_assert_null(parse(t, &e), "accepted case %zu:\n%s", i, t);
		cr_assert(has(&e, bad_values[i].msg), "case %zu: want \"%s\", "
		    "got \"%s\"", i, bad_values[i].msg,
		    e.n ? e.msgs[0] : "(nothing)");
		cr_assert(strncmp(e.msgs[0], "t.yaml:", 7) == 0);
		free(t);
		yerrs_free(&e);
	}
}

Test(policy, placeholders_allowed_where_compile_fills_them)
{
	char		*t1, *t2;
	Sbx__V1__Policy	*p;

	t1 = subst(base_yaml, "paths: [/v1/]",
	    "paths: [\"/v1/${task.tenant}/${task.user}\", \"/t/${task.id}\"]",
	    0);
	t2 = subst(t1, "secret: fx-readonly", "secret: \"fx-${task.type}\"",
	    0);
	p = parse_ok(t2);
	cr_assert_str_eq(p->credentials[0]->secret, "fx-${task.type}");
	cr_assert_eq(p->network->allow[0]->n_paths, 2);
	policy_free(p);
	free(t1);
	free(t2);
}

Test(policy, hosts_and_cidrs_canonical)
{
	char		*t;
	Sbx__V1__Policy	*p;

	t = subst(base_yaml, "paths: [/v1/]",
	    "paths: [/v1/], cidrs: [\"FD00:0:0::/8\", 10.0.0.0/8]", 0);
	p = parse_ok(t);
	cr_assert_eq(p->network->allow[0]->n_cidrs, 2);
	cr_assert_str_eq(p->network->allow[0]->cidrs[0], "10.0.0.0/8");
	cr_assert_str_eq(p->network->allow[0]->cidrs[1], "fd00::/8");
	policy_free(p);
	free(t);
	t = subst(base_yaml, "api.fx-rates.internal", "\"[::1]\"", 1);
	p = parse_ok(t);
	cr_assert_str_eq(p->network->allow[0]->host, "::1");
	cr_assert_str_eq(p->credentials[0]->host, "::1");
	policy_free(p);
	free(t);
}

Test(policy, order_and_spelling_do_not_change_hash)
{
	Sbx__V1__Policy	*a = parse_ok(base_yaml), *b = parse_ok(shuffled_yaml);
	char		 ha[POLICY_HASH_HEX], hb[POLICY_HASH_HEX];

	hash_of(a, ha);
	hash_of(b, hb);
	cr_assert_str_eq(ha, hb);
	cr_assert_str_eq(b->credentials[0]->host, "api.fx-rates.internal");
	cr_assert_eq(b->network->allow[0]->n_methods, 1);
	policy_free(a);
	policy_free(b);
}

/*
 * One change each.  kind 'W': a widening (not a subset of the base);
 * 'N': a narrowing (a subset); 'X': neither (identity changes).
 */
static const struct mutation {
	const char	*from, *to;
	int		 all;
	char		 kind;
} mutations[] = {
	{ "cpus: 1,", "cpus: 1.001,", 0, 'W' },
	{ "memory_mb: 1024", "memory_mb: 2048", 0, 'W' },
	{ "pids: 128", "pids: 129", 0, 'W' },
	{ "wall_seconds: 60", "wall_seconds: 61", 0, 'W' },
	{ "scratch_mb: 256", "scratch_mb: 257", 0, 'W' },
	{ "sha256:0", "sha256:1", 0, 'W' },
	{ "isolation: gvisor", "isolation: container", 0, 'W' },
	{ "isolation: gvisor", "isolation: microvm", 0, 'X' },
	{ "version: 7", "version: 8", 0, 'X' },
	{ "policy: analytics-readonly", "policy: analytics-rw", 0, 'X' },
	{ "api.fx-rates.internal", "api.fx-rates2.internal", 1, 'W' },
	{ "methods: [GET]", "methods: [GET, POST]", 0, 'W' },
	{ "methods: [GET]", "methods: [HEAD]", 0, 'W' },
	{ "paths: [/v1/]", "paths: [/v2/]", 0, 'W' },
	{ "paths: [/v1/]", "paths: [/]", 0, 'W' },
	{ ", paths: [/v1/]", "", 0, 'W' },
	{ "paths: [/v1/]", "paths: [/v1/rates]", 0, 'N' },
	{ "max_response_kb: 512", "max_response_kb: 513", 0, 'W' },
	{ "max_response_kb: 512", "max_response_kb: 512, max_request_kb: 17",
	  0, 'W' },
	{ "max_response_kb: 512", "max_response_kb: 512, max_request_kb: 8",
	  0, 'N' },
	{ "paths: [/v1/]", "paths: [/v1/], cidrs: [10.0.0.0/8]", 0, 'W' },
	{ "paths: [/v1/]", "paths: [/v1/], port: 8443", 0, 'W' },
	{ "  default: deny\n", "  default: deny\n  max_out_kb: 257\n", 0,
	  'W' },
	{ "  default: deny\n", "  default: deny\n  max_out_kb: 100\n", 0,
	  'N' },
	{ "secret: fx-readonly", "secret: fx-admin", 0, 'W' },
	{ "header: Authorization", "header: X-Api-Key", 0, 'W' },
	{ "header: Authorization}", "header: Authorization, kind: minted}", 0,
	  'W' },
	{ "header: Authorization}", "header: Authorization, scheme: http}", 0,
	  'W' },
	{ "credentials:\n  - {host: api.fx-rates.internal, secret: "
	  "fx-readonly, header: Authorization}\n", "", 0, 'N' },
	{ "\"${task.dataset_ref}\"", "supplier-2026-q3", 0, 'N' },
	{ "application/json]", "application/json, text/html]", 0, 'W' },
	{ "allowed_types: [text/csv, ", "allowed_types: [", 0, 'N' },
	{ "max_total_kb: 2048", "max_total_kb: 2049", 0, 'W' },
	{ "max_total_kb: 2048", "max_total_kb: 2048\n  max_file_kb: 1024", 0,
	  'N' },
	{ "max_total_kb: 2048", "max_total_kb: 2048\n  oversize: truncate", 0,
	  'W' },
	{ "max_total_kb: 2048", "max_total_kb: 2048\n  max_text_kb: 65", 0,
	  'W' },
	{ "destination: agent", "destination: user", 0, 'W' },
	{ "destination: agent", "destination: storage-bucket", 0, 'W' },
	{ "destination: agent", "destination: agent\n  remote_links: keep", 0,
	  'W' },
	{ "destination: agent",
	  "destination: agent\n  csv_formulas: neutralise", 0, 'N' },
	{ "destination: agent",
	  "destination: agent\n  archives: {max_expanded_mb: 65}", 0, 'W' },
	{ "destination: agent",
	  "destination: agent\n  archives: {max_expanded_mb: 1}", 0, 'N' },
	{ "destination: agent",
	  "destination: agent\n  archives: {max_ratio: 101}", 0, 'W' },
	{ "destination: agent",
	  "destination: agent\n  archives: {max_entries: 10001}", 0, 'W' },
	{ "destination: agent",
	  "destination: agent\n  archives: {max_nesting: 1}", 0, 'W' },
	{ "destination: agent",
	  "destination: agent\n  images: {max_side: 16385}", 0, 'W' },
	{ "destination: agent",
	  "destination: agent\n  images: {max_pixels: 99}", 0, 'N' },
	{ "executions_per_task: 15", "executions_per_task: 16", 0, 'W' },
	{ "executions_per_task: 15", "executions_per_task: 14", 0, 'N' },
	{ "limits: {cpus: 1, memory_mb: 1024, pids: 128, wall_seconds: 60, "
	  "scratch_mb: 256}", "limits: {cpus: 0.5, memory_mb: 512, pids: 64, "
	  "wall_seconds: 30, scratch_mb: 128}", 0, 'N' },
};

Test(policy, every_single_change_changes_hash)
{
	Sbx__V1__Policy	*base = parse_ok(base_yaml);
	char		 hb[POLICY_HASH_HEX], hm[POLICY_HASH_HEX];

	hash_of(base, hb);
	for (size_t i = 0; i < sizeof(mutations) / sizeof(mutations[0]);
	    i++) {
		char		*t = subst(base_yaml, mutations[i].from,
				    mutations[i].to, mutations[i].all);
		Sbx__V1__Policy	*m = parse_ok(t);

		hash_of(m, hm);
		cr_assert_str_neq(hb, hm, "mutation %zu (%s -> %s) kept the "
		    "hash", i, mutations[i].from, mutations[i].to);
		policy_free(m);
		free(t);
	}
	policy_free(base);
}

Test(policy, subset_refuses_every_widening)
{
	Sbx__V1__Policy	*base = parse_ok(base_yaml);
	char		 why[256];

	cr_assert_eq(policy_is_subset(base, base, why, sizeof(why)), 1, "%s",
	    why);
	for (size_t i = 0; i < sizeof(mutations) / sizeof(mutations[0]);
	    i++) {
		const struct mutation	*mu = &mutations[i];
		char			*t = subst(base_yaml, mu->from, mu->to,
					    mu->all);
		Sbx__V1__Policy		*m = parse_ok(t);
		int			 r;

		why[0] = '\0';
		r = policy_is_subset(m, base, why, sizeof(why));
		cr_assert_eq(r, mu->kind == 'N', "mutation %zu (%s -> %s): "
		    "subset %d: %s", i, mu->from, mu->to, r, why);
		if (r == 0)
			cr_assert(why[0] != '\0', "no reason given");
		/* Anything narrower makes the base the wider one. */
		if (mu->kind == 'N')
			cr_assert_eq(policy_is_subset(base, m, why,
			    sizeof(why)), 0, "mutation %zu both ways", i);
		cr_assert_eq(policy_is_subset(m, m, why, sizeof(why)), 1);
		policy_free(m);
		free(t);
	}
	policy_free(base);
}

Test(policy, subset_reasons_name_the_widening)
{
	Sbx__V1__Policy	*base = parse_ok(base_yaml), *m;
	char		 why[256], *t;

	t = subst(base_yaml, "methods: [GET]", "methods: [GET, POST]", 0);
	m = parse_ok(t);
	cr_assert_eq(policy_is_subset(m, base, why, sizeof(why)), 0);
	cr_assert_str_eq(why, "network.allow[api.fx-rates.internal]: method "
	    "POST is not allowed by the wider policy");
	policy_free(m);
	free(t);
	t = subst(base_yaml, "memory_mb: 1024", "memory_mb: 4096", 0);
	m = parse_ok(t);
	cr_assert_eq(policy_is_subset(m, base, why, sizeof(why)), 0);
	cr_assert_str_eq(why, "limits.memory_mb: 4096 is larger than 1024");
	policy_free(m);
	free(t);
	policy_free(base);
}

Test(policy, subset_literal_inputs)
{
	char		*ta, *tb, why[256];
	Sbx__V1__Policy	*a, *b;

	ta = subst(base_yaml, "\"${task.dataset_ref}\"", "ds-a", 0);
	tb = subst(base_yaml, "\"${task.dataset_ref}\"", "ds-b", 0);
	a = parse_ok(ta);
	b = parse_ok(tb);
	cr_assert_eq(policy_is_subset(a, b, why, sizeof(why)), 0);
	cr_assert_str_eq(why, "inputs: dataset ds-a is not in the wider "
	    "policy");
	cr_assert_eq(policy_is_subset(a, a, why, sizeof(why)), 1);
	policy_free(a);
	policy_free(b);
	free(ta);
	free(tb);
}

static void
assert_same(const Sbx__V1__Policy *a, const Sbx__V1__Policy *b)
{
	uint8_t	*ba, *bb;
	size_t	 la, lb;

	cr_assert_eq(policy_canonical(a, &ba, &la), 0);
	cr_assert_eq(policy_canonical(b, &bb, &lb), 0);
	cr_assert_eq(la, lb);
	cr_assert_eq(memcmp(ba, bb, la), 0);
	free(ba);
	free(bb);
}

Test(policy, to_yaml_round_trips)
{
	const char *const	 texts[] = { base_yaml, full_yaml,
				     shuffled_yaml };

	for (size_t i = 0; i < 3; i++) {
		Sbx__V1__Policy	*p = parse_ok(texts[i]), *q;
		char		*y = policy_to_yaml(p), *y2;

		cr_assert_not_null(y);
		q = parse_ok(y);
		assert_same(p, q);
		/* Rendering is stable: the second pass is byte-identical. */
		y2 = policy_to_yaml(q);
		cr_assert_str_eq(y, y2);
		free(y);
		free(y2);
		policy_free(p);
		policy_free(q);
	}
}

Test(policy, to_yaml_shape)
{
	Sbx__V1__Policy	*p = parse_ok(full_yaml);
	char		*y = policy_to_yaml(p);

	cr_assert(strstr(y, "limits: {cpus: 1.5, memory_mb: 2048, pids: 64, "
	    "wall_seconds: 300, scratch_mb: 512}\n") != NULL, "%s", y);
	cr_assert(strstr(y, "isolation: microvm\n") != NULL);
	cr_assert(strstr(y, "  destination: storage-bucket\n") != NULL);
	cr_assert(strstr(y, "  oversize: truncate\n") != NULL);
	cr_assert(strstr(y, "    kind: minted\n") != NULL);
	cr_assert(strstr(y, "    scheme: http\n") != NULL, "%s", y);
	cr_assert(strstr(y, "\"/users/${task.user}/\"") != NULL, "%s", y);
	free(y);
	p->limits->cpus_milli = 1250;
	y = policy_to_yaml(p);
	cr_assert(strstr(y, "{cpus: 1.25,") != NULL, "%s", y);
	free(y);
	p->limits->cpus_milli = 5;
	y = policy_to_yaml(p);
	cr_assert(strstr(y, "{cpus: 0.005,") != NULL, "%s", y);
	free(y);
	policy_free(p);
}

Test(policy, new_dup_free_and_caller_mutation)
{
	Sbx__V1__Policy	*p = parse_ok(full_yaml), *d;
	char		 hp[POLICY_HASH_HEX], hd[POLICY_HASH_HEX];
	Sbx__V1__AllowRule *r;

	d = policy_dup(p);
	cr_assert_not_null(d);
	cr_assert_neq(d, p);
	hash_of(p, hp);
	hash_of(d, hd);
	cr_assert_str_eq(hp, hd);
	/* A caller replaces strings and arrays with its own malloc'd memory,
	 * as compile does; both copies stay valid and free cleanly. */
	free(d->name);
	d->name = xstrdup("renamed");
	r = d->network->allow[0];
	for (size_t i = 0; i < r->n_methods; i++)
		free(r->methods[i]);
	free(r->methods);
	r->methods = xreallocarray(NULL, 1, sizeof(*r->methods));
	r->methods[0] = xstrdup("GET");
	r->n_methods = 1;
	/* Drop the second rule. */
	sbx__v1__allow_rule__free_unpacked(d->network->allow[1], NULL);
	d->network->n_allow = 1;
	hash_of(d, hd);
	cr_assert_str_neq(hp, hd);
	cr_assert_str_eq(p->name, "full.example-1", "the original is intact");
	cr_assert_eq(p->network->n_allow, 2);
	policy_free(d);
	policy_free(p);
}

Test(policy, new_policy_strings_are_freeable)
{
	Sbx__V1__Policy	*p = policy_new(), *d;

	cr_assert_not_null(p->limits);
	cr_assert_not_null(p->network);
	cr_assert_not_null(p->outputs);
	cr_assert_str_eq(p->network->default_action, "deny");
	/* Empty strings are ours too: free() and replace them. */
	free(p->name);
	p->name = xstrdup("x");
	free(p->image);
	p->image = xstrdup("img@sha256:" DIGEST);
	d = policy_dup(p);
	free(d->image);
	d->image = xstrdup("y");
	cr_assert_str_eq(d->name, "x");
	policy_free(p);
	policy_free(d);
}

Test(policy, free_handles_unpacked_messages)
{
	Sbx__V1__Policy	*p = parse_ok(full_yaml), *u;
	uint8_t		*buf;
	size_t		 len;
	char		 hp[POLICY_HASH_HEX], hu[POLICY_HASH_HEX];

	cr_assert_eq(policy_canonical(p, &buf, &len), 0);
	u = sbx__v1__policy__unpack(NULL, len, buf);
	cr_assert_not_null(u);
	hash_of(p, hp);
	hash_of(u, hu);
	cr_assert_str_eq(hp, hu, "the canonical form is a fixed point");
	policy_free(u);
	policy_free(p);
	free(buf);
}

Test(policy, normalize_sorts_and_dedups)
{
	Sbx__V1__Policy		*p = policy_new();
	Sbx__V1__AllowRule	*r;
	const char		*const hosts[] = { "B.example.", "a.example",
				    "a.example" };

	p->network->n_allow = 3;
	p->network->allow = xreallocarray(NULL, 3, sizeof(*p->network->allow));
	for (size_t i = 0; i < 3; i++) {
		r = xmalloc(sizeof(*r));
		sbx__v1__allow_rule__init(r);
		r->host = xstrdup(hosts[i]);
		r->n_methods = 3;
		r->methods = xreallocarray(NULL, 3, sizeof(char *));
		r->methods[0] = xstrdup("post");
		r->methods[1] = xstrdup("GET");
		r->methods[2] = xstrdup("Post");
		p->network->allow[i] = r;
	}
	policy_normalize(p);
	cr_assert_eq(p->network->n_allow, 2);
	cr_assert_str_eq(p->network->allow[0]->host, "a.example");
	cr_assert_str_eq(p->network->allow[1]->host, "b.example");
	cr_assert_eq(p->network->allow[0]->n_methods, 2);
	cr_assert_str_eq(p->network->allow[0]->methods[0], "GET");
	cr_assert_str_eq(p->network->allow[0]->methods[1], "POST");
	policy_free(p);
}

Test(policy, names)
{
	cr_assert_str_eq(policy_isolation_name(
	    SBX__V1__ISOLATION__ISOLATION_GVISOR), "gvisor");
	cr_assert_str_eq(policy_isolation_name(
	    SBX__V1__ISOLATION__ISOLATION_CONTAINER), "container");
	cr_assert_str_eq(policy_isolation_name(
	    SBX__V1__ISOLATION__ISOLATION_MICROVM), "microvm");
	cr_assert_str_eq(policy_destination_name(
	    SBX__V1__DESTINATION__DESTINATION_STORAGE_BUCKET),
	    "storage-bucket");
	cr_assert_str_eq(policy_destination_name(
	    SBX__V1__DESTINATION__DESTINATION_USER), "user");
	cr_assert_str_eq(policy_destination_name(
	    SBX__V1__DESTINATION__DESTINATION_AGENT), "agent");
}

static void
canonical_pair(Sbx__V1__Policy *p, uint8_t **a, size_t *alen, uint8_t **b,
    size_t *blen)
{
	Sbx__V1__Policy	*c = policy_dup(p);

	cr_assert_not_null(c);
	cr_assert_eq(policy_canonical(p, a, alen), 0);
	cr_assert_eq(policy_canonical_in_place(c, b, blen), 0);
	policy_free(c);
}

/*
 * compile_task encodes a compile's policy with policy_canonical_in_place,
 * after compile_policy has normalised it once: its bytes must be
 * policy_canonical's for the same policy, even where normalising twice is
 * not normalising once (a host with two trailing dots, duplicate inputs
 * that sort apart), or the hash signed would not be policy_hash's.
 */
Test(policy, canonical_in_place_is_policy_canonical)
{
	static const char *const texts[] = { base_yaml, shuffled_yaml,
	    full_yaml };
	Sbx__V1__Policy	*p;
	uint8_t		*a, *b;
	size_t		 alen, blen;
	unsigned char	 md[32];
	char		 ha[POLICY_HASH_HEX], hb[POLICY_HASH_HEX];
	size_t		 i;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		p = parse_ok(texts[i]);
		canonical_pair(p, &a, &alen, &b, &blen);
		cr_assert_eq(alen, blen, "text %zu", i);
		cr_assert_eq(memcmp(a, b, alen), 0, "text %zu", i);
		free(a);
		free(b);
		policy_free(p);
	}

	/* Normalised once, as compile_policy leaves it, then a host that a
	 * second pass still changes. */
	p = parse_ok(full_yaml);
	free(p->network->allow[0]->host);
	p->network->allow[0]->host = xstrdup("API.FX-rates.internal..");
	policy_normalize(p);
	for (i = 0; i < p->network->n_allow; i++)
		if (strcmp(p->network->allow[i]->host,
		    "api.fx-rates.internal.") == 0)
			break;
	cr_assert_lt(i, p->network->n_allow, "one pass left one dot");
	canonical_pair(p, &a, &alen, &b, &blen);
	cr_assert_eq(alen, blen);
	cr_assert_eq(memcmp(a, b, alen), 0,
	    "in place is not policy_canonical after one normalisation");
	cr_assert_eq(policy_hash(p, ha), 0);
	sha256_buf(b, blen, md);
	hex_encode(md, sizeof(md), hb);
	cr_assert_str_eq(ha, hb);
	free(a);
	free(b);
	policy_free(p);
}
