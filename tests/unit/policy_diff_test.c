/*
 * policy_diff_test.c: template diffs.  Every kind of widening -- new host,
 * method, path, cidr, port, credential binding, larger limit or size, new
 * output type, other destination, remote links kept, CSV formulas left,
 * larger archive or image caps, weaker isolation, other image -- shows
 * up as its own line marked "(widening)", and narrowings show up unmarked.
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
    "    - {host: api.fx-rates.internal, methods: [GET, POST], "
    "max_response_kb: 512, paths: [/v1/]}\n"
    "    - {host: api.y.internal, methods: [GET]}\n"
    "credentials:\n"
    "  - {host: api.fx-rates.internal, secret: fx-readonly, "
    "header: Authorization}\n"
    "outputs:\n"
    "  allowed_types: [text/csv, image/png, application/json]\n"
    "  max_total_kb: 2048\n"
    "  destination: agent\n"
    "executions_per_task: 15\n";

#define FX	"network.allow[api.fx-rates.internal]"

static Sbx__V1__Policy *
parse_ok(const char *text)
{
	struct yerrs	 e = { 0 };
	Sbx__V1__Policy	*p;

	p = policy_parse_buf("t.yaml", text, strlen(text), &e);
	for (size_t i = 0; i < e.n; i++)
		fprintf(stderr, "unexpected: %s\n", e.msgs[i]);
	cr_assert_not_null(p, "did not parse:\n%s", text);
	yerrs_free(&e);
	return p;
}

static char *
subst(const char *text, const char *from, const char *to)
{
	const char	*hit = strstr(text, from);
	char		*out;

	cr_assert_not_null(hit, "no \"%s\" in base", from);
	xasprintf(&out, "%.*s%s%s", (int)(hit - text), text, to,
	    hit + strlen(from));
	return out;
}

struct diff {
	struct policy_change	*v;
	size_t			 n;
};

/* Diff base -> base with one substitution applied. */
static struct diff
diff_with(const char *from, const char *to)
{
	struct diff	 d;
	char		*t = subst(base_yaml, from, to);
	Sbx__V1__Policy	*a = parse_ok(base_yaml), *b = parse_ok(t);

	d.n = policy_diff(a, b, &d.v);
	for (size_t i = 0; i < d.n; i++) {
		size_t	 len = strlen(d.v[i].text);
		int	 marked = len > 11 &&
			    strcmp(d.v[i].text + len - 11, " (widening)") == 0;

		/* The flag and the text never disagree. */
		cr_assert_eq(d.v[i].widening, marked, "%s", d.v[i].text);
	}
	policy_free(a);
	policy_free(b);
	free(t);
	return d;
}

static int
has_line(const struct diff *d, const char *line)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->v[i].text, line) == 0)
			return 1;
	return 0;
}

static size_t
widenings(const struct diff *d)
{
	size_t	 n = 0;

	for (size_t i = 0; i < d->n; i++)
		n += d->v[i].widening != 0;
	return n;
}

static void
show(const struct diff *d)
{
	for (size_t i = 0; i < d->n; i++)
		fprintf(stderr, "  %s\n", d->v[i].text);
}

/* One substitution, the exact line it must produce, and whether it is
 * the only widening. */
static const struct {
	const char	*from, *to, *line;
	int		 widening;
} cases[] = {
	{ "    - {host: api.y.internal, methods: [GET]}\n",
	  "    - {host: api.y.internal, methods: [GET]}\n"
	  "    - {host: api.x.internal, methods: [GET]}\n",
	  "+ network.allow[api.x.internal]: new host (widening)", 1 },
	{ "    - {host: api.y.internal, methods: [GET]}\n", "",
	  "- network.allow[api.y.internal]: host removed", 0 },
	{ "methods: [GET, POST]", "methods: [GET, POST, DELETE]",
	  "+ " FX ".methods: DELETE added (widening)", 1 },
	{ "methods: [GET, POST]", "methods: [GET]",
	  "- " FX ".methods: POST removed", 0 },
	{ "paths: [/v1/]", "paths: [/v1/, /admin/]",
	  "+ " FX ".paths: /admin/ added (widening)", 1 },
	{ "paths: [/v1/]", "paths: [/]",
	  "+ " FX ".paths: / added (widening)", 1 },
	{ ", paths: [/v1/]", "",
	  "~ " FX ".paths: /v1/ -> any path (widening)", 1 },
	{ "paths: [/v1/]", "paths: [/v1/rates]",
	  "+ " FX ".paths: /v1/rates added", 0 },
	{ "{host: api.y.internal, methods: [GET]}",
	  "{host: api.y.internal, methods: [GET], paths: [/a]}",
	  "~ network.allow[api.y.internal].paths: any path -> /a", 0 },
	{ "paths: [/v1/]", "paths: [/v1/], cidrs: [10.0.0.0/8]",
	  "+ " FX ".cidrs: 10.0.0.0/8 added (widening)", 1 },
	{ "paths: [/v1/]", "paths: [/v1/], port: 8443",
	  "~ " FX ".port: default -> 8443 (widening)", 1 },
	{ "max_response_kb: 512", "max_response_kb: 4096",
	  "~ " FX ".max_response_kb: 512 -> 4096 (widening)", 1 },
	{ "max_response_kb: 512", "max_response_kb: 512, max_request_kb: 32",
	  "~ " FX ".max_request_kb: 16 -> 32 (widening)", 1 },
	{ "max_response_kb: 512", "max_response_kb: 100",
	  "~ " FX ".max_response_kb: 512 -> 100", 0 },
	{ "  default: deny\n", "  default: deny\n  max_out_kb: 1024\n",
	  "~ network.max_out_kb: 256 -> 1024 (widening)", 1 },
	{ "header: Authorization}",
	  "header: Authorization}\n"
	  "  - {host: api.y.internal, secret: y-key, header: X-Key}",
	  "+ credentials[api.y.internal X-Key]: secret y-key bound "
	  "(widening)", 1 },
	{ "secret: fx-readonly", "secret: fx-admin",
	  "~ credentials[api.fx-rates.internal Authorization].secret: "
	  "fx-readonly -> fx-admin (widening)", 1 },
	{ "credentials:\n  - {host: api.fx-rates.internal, secret: "
	  "fx-readonly, header: Authorization}\n", "",
	  "- credentials[api.fx-rates.internal Authorization]: secret "
	  "fx-readonly unbound", 0 },
	/* Issue 10, item 4: plain http lets the secret cross in clear. */
	{ "header: Authorization}", "header: Authorization, scheme: http}",
	  "~ credentials[api.fx-rates.internal Authorization].scheme: "
	  "https -> http (widening)", 1 },
	{ "memory_mb: 1024", "memory_mb: 2048",
	  "~ limits.memory_mb: 1024 -> 2048 (widening)", 1 },
	{ "memory_mb: 1024", "memory_mb: 512",
	  "~ limits.memory_mb: 1024 -> 512", 0 },
	{ "cpus: 1,", "cpus: 1.5,", "~ limits.cpus: 1 -> 1.5 (widening)", 1 },
	{ "pids: 128", "pids: 1000", "~ limits.pids: 128 -> 1000 (widening)",
	  1 },
	{ "wall_seconds: 60", "wall_seconds: 600",
	  "~ limits.wall_seconds: 60 -> 600 (widening)", 1 },
	{ "scratch_mb: 256", "scratch_mb: 1024",
	  "~ limits.scratch_mb: 256 -> 1024 (widening)", 1 },
	{ "application/json]", "application/json, application/zip]",
	  "+ outputs.allowed_types: application/zip added (widening)", 1 },
	{ "allowed_types: [text/csv, ", "allowed_types: [",
	  "- outputs.allowed_types: text/csv removed", 0 },
	{ "max_total_kb: 2048", "max_total_kb: 8192",
	  "~ outputs.max_total_kb: 2048 -> 8192 (widening)", 2 },
	{ "max_total_kb: 2048", "max_total_kb: 2048\n  oversize: truncate",
	  "~ outputs.oversize: refuse -> truncate (widening)", 1 },
	{ "max_total_kb: 2048", "max_total_kb: 2048\n  max_text_kb: 1024",
	  "~ outputs.max_text_kb: 64 -> 1024 (widening)", 1 },
	{ "destination: agent", "destination: storage-bucket",
	  "~ outputs.destination: agent -> storage-bucket (widening)", 1 },
	{ "destination: agent", "destination: agent\n  remote_links: keep",
	  "~ outputs.remote_links: neutralise -> keep (widening)", 1 },
	{ "destination: agent",
	  "destination: agent\n  csv_formulas: neutralise",
	  "~ outputs.csv_formulas: flag -> neutralise", 0 },
	{ "destination: agent",
	  "destination: agent\n  archives: {max_expanded_mb: 512}",
	  "~ outputs.archives.max_expanded_mb: 64 -> 512 (widening)", 1 },
	{ "destination: agent", "destination: agent\n  archives: "
	  "{max_ratio: 50, max_entries: 20000}",
	  "~ outputs.archives.max_entries: 10000 -> 20000 (widening)", 1 },
	{ "destination: agent",
	  "destination: agent\n  archives: {max_nesting: 2}",
	  "~ outputs.archives.max_nesting: 0 -> 2 (widening)", 1 },
	{ "destination: agent",
	  "destination: agent\n  images: {max_side: 65535}",
	  "~ outputs.images.max_side: 16384 -> 65535 (widening)", 1 },
	{ "destination: agent",
	  "destination: agent\n  images: {max_pixels: 1000}",
	  "~ outputs.images.max_pixels: 67108864 -> 1000", 0 },
	{ "isolation: gvisor", "isolation: container",
	  "~ isolation: gvisor -> container (widening)", 1 },
	{ "isolation: gvisor", "isolation: microvm",
	  "~ isolation: gvisor -> microvm", 0 },
	{ "sha256:0", "sha256:f",
	  "~ image: (spelt out below)", 1 },
	{ "\"${task.dataset_ref}\"", "\"${task.dataset_ref}\"\n"
	  "  - dataset: hr-salaries",
	  "+ inputs: dataset hr-salaries added (widening)", 1 },
	{ "executions_per_task: 15", "executions_per_task: 50",
	  "~ executions_per_task: 15 -> 50 (widening)", 1 },
	{ "version: 7", "version: 8", "~ version: 7 -> 8", 0 },
};

Test(policy_diff, identical_has_no_changes)
{
	Sbx__V1__Policy		*a = parse_ok(base_yaml), *b = policy_dup(a);
	struct policy_change	*v;
	size_t			 n;

	n = policy_diff(a, b, &v);
	cr_assert_eq(n, 0);
	policy_changes_free(v, n);
	policy_free(a);
	policy_free(b);
}

Test(policy_diff, each_change_listed_and_marked)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct diff	 d = diff_with(cases[i].from, cases[i].to);
		const char	*want = cases[i].line;
		char		*fixed = NULL;

		/* The image line spells the new digest out in full. */
		if (strncmp(want, "~ image:", 8) == 0)
			xasprintf(&fixed, "~ image: sandbox/py-analytics@sha256:"
			    DIGEST " -> sandbox/py-analytics@sha256:f%s "
			    "(widening)", DIGEST + 1);
		if (!has_line(&d, fixed ? fixed : want))
			show(&d);
		cr_assert(has_line(&d, fixed ? fixed : want),
		    "case %zu: no line \"%s\"", i, fixed ? fixed : want);
		cr_assert_eq(widenings(&d), (size_t)cases[i].widening,
		    "case %zu: %zu widenings", i, widenings(&d));
		free(fixed);
		policy_changes_free(d.v, d.n);
	}
}

Test(policy_diff, order_only_changes_nothing)
{
	static const char reordered[] =
	    "policy: analytics-readonly\n"
	    "version: 7\n"
	    "isolation: gvisor\n"
	    "image: sandbox/py-analytics@sha256:" DIGEST "\n"
	    "limits: {scratch_mb: 256, cpus: 1.0, memory_mb: 1024, pids: 128, "
	    "wall_seconds: 60}\n"
	    "inputs:\n"
	    "  - dataset: \"${task.dataset_ref}\"\n"
	    "network:\n"
	    "  default: deny\n"
	    "  allow:\n"
	    "    - {host: API.Y.internal., methods: [get]}\n"
	    "    - {host: api.fx-rates.internal, methods: [POST, GET], "
	    "max_response_kb: 512, paths: [/v1/]}\n"
	    "credentials:\n"
	    "  - {host: api.fx-rates.internal, secret: fx-readonly, "
	    "header: Authorization}\n"
	    "outputs:\n"
	    "  allowed_types: [application/json, image/png, text/csv]\n"
	    "  max_total_kb: 2048\n"
	    "  destination: agent\n"
	    "executions_per_task: 15\n";
	Sbx__V1__Policy		*a = parse_ok(base_yaml), *b = parse_ok(reordered);
	struct policy_change	*v;
	size_t			 n;

	n = policy_diff(a, b, &v);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "  %s\n", v[i].text);
	cr_assert_eq(n, 0);
	policy_changes_free(v, n);
	policy_free(a);
	policy_free(b);
}

Test(policy_diff, example_v6_to_v7)
{
	struct yerrs		 e = { 0 };
	Sbx__V1__Policy		*v6, *v7;
	struct policy_change	*v;
	size_t			 n, w = 0;

	v6 = policy_parse_file(
	    "deploy/examples/templates/analytics-readonly-v6.yaml", &e);
	v7 = policy_parse_file(
	    "deploy/examples/templates/analytics-readonly.yaml", &e);
	cr_assert_not_null(v6, "run from the source root");
	cr_assert_not_null(v7);
	n = policy_diff(v6, v7, &v);
	for (size_t i = 0; i < n; i++)
		w += v[i].widening != 0;
	cr_assert_eq(v[0].widening, 0);
	cr_assert_str_eq(v[0].text, "~ version: 6 -> 7");
	cr_assert(w >= 3, "v7 widens memory, credentials and output types");
	policy_changes_free(v, n);
	/* And back: v7 -> v6 only narrows. */
	n = policy_diff(v7, v6, &v);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(v[i].widening, 0, "%s", v[i].text);
	policy_changes_free(v, n);
	policy_free(v6);
	policy_free(v7);
	yerrs_free(&e);
}

/* ---- issue 13 item 4: path coverage is egressd's matcher's ---- */

/* Diff base with `from` replaced by a, then by b. */
static struct diff
diff_between(const char *from, const char *a_to, const char *b_to)
{
	struct diff	 d;
	char		*ta = subst(base_yaml, from, a_to);
	char		*tb = subst(base_yaml, from, b_to);
	Sbx__V1__Policy	*a = parse_ok(ta), *b = parse_ok(tb);

	d.n = policy_diff(a, b, &d.v);
	policy_free(a);
	policy_free(b);
	free(ta);
	free(tb);
	return d;
}

/* "/v1/rates" does not allow "/v1/ratesx" (egressd: "/v1/rates" allows
 * itself and what is under it): adding the second widens the policy. */
Test(policy_diff, sibling_prefix_is_a_widening)
{
	struct diff	 d = diff_between("paths: [/v1/]", "paths: [/v1/rates]",
			    "paths: [/v1/rates, /v1/ratesx]");

	if (!has_line(&d, "+ " FX ".paths: /v1/ratesx added (widening)"))
		show(&d);
	cr_assert(has_line(&d, "+ " FX ".paths: /v1/ratesx added (widening)"));
	cr_assert_eq(widenings(&d), 1);
	policy_changes_free(d.v, d.n);

	/* What "/v1/rates" already allows is no wider. */
	d = diff_between("paths: [/v1/]", "paths: [/v1/rates]",
	    "paths: [/v1/rates, /v1/rates/eur, /v1/rates/]");
	if (widenings(&d) != 0)
		show(&d);
	cr_assert_eq(widenings(&d), 0);
	policy_changes_free(d.v, d.n);
}

/*
 * The property, on generated prefixes: the diff calls an added prefix p
 * "no wider" beside an old prefix o exactly when every path egressd's
 * matcher (policy_path_match, which decide_path uses) lets through p it
 * also lets through o, over a set of paths built from both.
 */
Test(policy_diff, coverage_agrees_with_the_matcher)
{
	static const char *const pre[] = {
		"/", "/a", "/a/", "/ab", "/ab/", "/a/b", "/a/b/", "/a/bc",
		"/b", "/a.", "/a%2f", NULL
	};
	static const char *const tail[] = {
		"", "/", "x", "/x", "b", "/b", "c", "/b/c", NULL
	};
	char		 from[64], a_to[64], b_to[96], path[64];
	size_t		 checked = 0;

	for (size_t i = 0; pre[i] != NULL; i++)
		for (size_t j = 0; pre[j] != NULL; j++) {
			struct diff	 d;
			int		 covered = 1, said;

			if (i == j)
				continue;
			/* Every path the new prefix p allows, the old o too? */
			for (size_t k = 0; pre[k] != NULL; k++)
				for (size_t t = 0; tail[t] != NULL; t++) {
					snprintf(path, sizeof(path), "%s%s",
					    pre[k], tail[t]);
					if (policy_path_match(pre[j], path,
					    strlen(path)) &&
					    !policy_path_match(pre[i], path,
					    strlen(path)))
						covered = 0;
				}
			snprintf(from, sizeof(from), "paths: [/v1/]");
			snprintf(a_to, sizeof(a_to), "paths: [\"%s\"]", pre[i]);
			snprintf(b_to, sizeof(b_to), "paths: [\"%s\", \"%s\"]",
			    pre[i], pre[j]);
			d = diff_between(from, a_to, b_to);
			said = widenings(&d) == 0;
			if (said != covered)
				show(&d);
			cr_assert_eq(said, covered, "old %s, added %s: the diff "
			    "says %s, the matcher %s", pre[i], pre[j],
			    said ? "no wider" : "wider",
			    covered ? "no wider" : "wider");
			policy_changes_free(d.v, d.n);
			checked++;
		}
	cr_assert_gt(checked, 100);
}
