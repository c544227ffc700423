/*
 * policy_diff.c: what changes between two policies, capability by
 * capability, for `sbxctl template diff` and for reviewers of a template
 * change.  The invariant: every capability B grants that A did not is
 * listed and marked as a widening, so a reviewer who reads only the
 * "(widening)" lines still sees every new door -- a new host, method,
 * path, cidr, port or credential binding, a larger limit or size, a new
 * output type or destination, remote links kept, CSV formulas left
 * as written, larger archive or image caps, a weaker isolation tier,
 * another image.
 * Both policies are compared normalised, so order and case never show up
 * as changes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "util.h"

struct pd_list {
	struct policy_change	*v;
	size_t			 n;
};

static void
pd_add(struct pd_list *l, int widening, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
pd_add(struct pd_list *l, int widening, const char *fmt, ...)
{
	va_list	 ap;
	char	*s, *t;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		s = NULL;
	va_end(ap);
	if (s == NULL)
		s = xstrdup("? (out of memory)");
	if (widening) {
		xasprintf(&t, "%s (widening)", s);
		free(s);
		s = t;
	}
	l->v = xreallocarray(l->v, l->n + 1, sizeof(*l->v));
	l->v[l->n].widening = widening;
	l->v[l->n].text = s;
	l->n++;
}

static uint32_t
pd_dflt(uint32_t v, uint32_t dflt)
{
	return v != 0 ? v : dflt;
}

/* A number change; larger is a widening when `up_widens`. */
static void
pd_num(struct pd_list *l, const char *key, uint32_t a, uint32_t b,
    int up_widens)
{
	if (a != b)
		pd_add(l, up_widens && b > a, "~ %s: %u -> %u", key, a, b);
}

static void
pd_milli(char *buf, size_t len, uint32_t m)
{
	unsigned	 frac = m % 1000;

	if (frac == 0)
		snprintf(buf, len, "%u", m / 1000);
	else if (frac % 100 == 0)
		snprintf(buf, len, "%u.%u", m / 1000, frac / 100);
	else if (frac % 10 == 0)
		snprintf(buf, len, "%u.%02u", m / 1000, frac / 10);
	else
		snprintf(buf, len, "%u.%03u", m / 1000, frac);
}

/* Stronger tiers rank higher; unspecified is weakest of all. */
static int
pd_rank(Sbx__V1__Isolation i)
{
	switch (i) {
	case SBX__V1__ISOLATION__ISOLATION_CONTAINER:
		return 1;
	case SBX__V1__ISOLATION__ISOLATION_GVISOR:
		return 2;
	case SBX__V1__ISOLATION__ISOLATION_MICROVM:
		return 3;
	default:
		return 0;
	}
}

static int
pd_has(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return 1;
	return 0;
}

/*
 * Added and removed members of a string set.  Each addition is a widening
 * unless covered() says A already granted it some other way.
 */
static void
pd_set(struct pd_list *l, const char *key, char *const *a, size_t na,
    char *const *b, size_t nb,
    int (*covered)(const char *, char *const *, size_t))
{
	for (size_t i = 0; i < na; i++)
		if (!pd_has(b, nb, a[i]))
			pd_add(l, 0, "- %s: %s removed", key, a[i]);
	for (size_t i = 0; i < nb; i++)
		if (!pd_has(a, na, b[i]))
			pd_add(l, covered == NULL || !covered(b[i], a, na),
			    "+ %s: %s added", key, b[i]);
}

/*
 * A new path prefix is no wider if an old one allows every path it does,
 * by egressd's own matcher (policy_path_match): which holds exactly when
 * the old prefix allows the new one taken as a path -- whatever follows
 * the new prefix (itself, "/..." or, after a "/", anything) then follows
 * the old one as the matcher wants.  A raw string prefix would call
 * "/v1/ratesx" covered by "/v1/rates", which egressd does not allow.
 */
static int
pd_path_covered(const char *p, char *const *old, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (policy_path_match(old[i], p, strlen(p)))
			return 1;
	return 0;
}

static char *
pd_join(char *const *v, size_t n)
{
	char	*s = xstrdup(""), *t;

	for (size_t i = 0; i < n; i++) {
		xasprintf(&t, "%s%s%s", s, i ? ", " : "", v[i]);
		free(s);
		s = t;
	}
	return s;
}

static void
pd_rule(struct pd_list *l, const Sbx__V1__AllowRule *a,
    const Sbx__V1__AllowRule *b)
{
	char	*key, *sa, *sb;

	xasprintf(&key, "network.allow[%s].methods", a->host);
	pd_set(l, key, a->methods, a->n_methods, b->methods, b->n_methods,
	    NULL);
	free(key);

	xasprintf(&key, "network.allow[%s].paths", a->host);
	if (a->n_paths > 0 && b->n_paths == 0) {
		sa = pd_join(a->paths, a->n_paths);
		pd_add(l, 1, "~ %s: %s -> any path", key, sa);
		free(sa);
	} else if (a->n_paths == 0 && b->n_paths > 0) {
		sb = pd_join(b->paths, b->n_paths);
		pd_add(l, 0, "~ %s: any path -> %s", key, sb);
		free(sb);
	} else
		pd_set(l, key, a->paths, a->n_paths, b->paths, b->n_paths,
		    pd_path_covered);
	free(key);

	xasprintf(&key, "network.allow[%s].max_request_kb", a->host);
	pd_num(l, key, pd_dflt(a->max_request_kb,
	    POLICY_DEFAULT_MAX_REQUEST_KB), pd_dflt(b->max_request_kb,
	    POLICY_DEFAULT_MAX_REQUEST_KB), 1);
	free(key);
	xasprintf(&key, "network.allow[%s].max_response_kb", a->host);
	pd_num(l, key, pd_dflt(a->max_response_kb,
	    POLICY_DEFAULT_MAX_RESPONSE_KB), pd_dflt(b->max_response_kb,
	    POLICY_DEFAULT_MAX_RESPONSE_KB), 1);
	free(key);

	xasprintf(&key, "network.allow[%s].cidrs", a->host);
	pd_set(l, key, a->cidrs, a->n_cidrs, b->cidrs, b->n_cidrs, NULL);
	free(key);

	/* Any other port is a different service, hence a widening. */
	if (a->port != b->port) {
		char	 pa[16], pb[16];

		snprintf(pa, sizeof(pa), "%u", a->port);
		snprintf(pb, sizeof(pb), "%u", b->port);
		pd_add(l, 1, "~ network.allow[%s].port: %s -> %s", a->host,
		    a->port ? pa : "default", b->port ? pb : "default");
	}
}

static void
pd_network(struct pd_list *l, const Sbx__V1__Network *a,
    const Sbx__V1__Network *b)
{
	size_t	 i = 0, j = 0;
	int	 c;

	if (strcmp(a->default_action, b->default_action) != 0)
		pd_add(l, strcmp(b->default_action, "deny") != 0,
		    "~ network.default: %s -> %s", a->default_action,
		    b->default_action);
	/* Both rule lists are sorted by host: merge them. */
	while (i < a->n_allow || j < b->n_allow) {
		if (i == a->n_allow)
			c = 1;
		else if (j == b->n_allow)
			c = -1;
		else
			c = strcmp(a->allow[i]->host, b->allow[j]->host);
		if (c < 0) {
			pd_add(l, 0, "- network.allow[%s]: host removed",
			    a->allow[i]->host);
			i++;
		} else if (c > 0) {
			pd_add(l, 1, "+ network.allow[%s]: new host",
			    b->allow[j]->host);
			j++;
		} else {
			pd_rule(l, a->allow[i], b->allow[j]);
			i++;
			j++;
		}
	}
	pd_num(l, "network.max_out_kb", pd_dflt(a->max_out_kb,
	    POLICY_DEFAULT_MAX_OUT_KB), pd_dflt(b->max_out_kb,
	    POLICY_DEFAULT_MAX_OUT_KB), 1);
}

static const char *
pd_kind(Sbx__V1__CredentialKind k)
{
	return k == SBX__V1__CREDENTIAL_KIND__CREDENTIAL_MINTED ?
	    "minted" : "static";
}

static const char *
pd_scheme(Sbx__V1__CredentialScheme s)
{
	return s == SBX__V1__CREDENTIAL_SCHEME__CREDENTIAL_SCHEME_HTTP ?
	    "http" : "https";
}

static const Sbx__V1__Credential *
pd_cred_find(const Sbx__V1__Policy *p, const Sbx__V1__Credential *c)
{
	for (size_t i = 0; i < p->n_credentials; i++)
		if (strcmp(p->credentials[i]->host, c->host) == 0 &&
		    strcmp(p->credentials[i]->header, c->header) == 0)
			return p->credentials[i];
	return NULL;
}

static void
pd_credentials(struct pd_list *l, const Sbx__V1__Policy *a,
    const Sbx__V1__Policy *b)
{
	for (size_t i = 0; i < a->n_credentials; i++) {
		const Sbx__V1__Credential	*ca = a->credentials[i];

		if (pd_cred_find(b, ca) == NULL)
			pd_add(l, 0, "- credentials[%s %s]: secret %s "
			    "unbound", ca->host, ca->header, ca->secret);
	}
	for (size_t i = 0; i < b->n_credentials; i++) {
		const Sbx__V1__Credential	*cb = b->credentials[i];
		const Sbx__V1__Credential	*ca = pd_cred_find(a, cb);

		if (ca == NULL) {
			pd_add(l, 1, "+ credentials[%s %s]: secret %s bound",
			    cb->host, cb->header, cb->secret);
			continue;
		}
		/* Another secret on the same host is a new binding. */
		if (strcmp(ca->secret, cb->secret) != 0)
			pd_add(l, 1, "~ credentials[%s %s].secret: %s -> %s",
			    cb->host, cb->header, ca->secret, cb->secret);
		if (ca->kind != cb->kind)
			pd_add(l, 1, "~ credentials[%s %s].kind: %s -> %s",
			    cb->host, cb->header, pd_kind(ca->kind),
			    pd_kind(cb->kind));
		/* https to http lets the secret cross in clear: widening. */
		if (ca->scheme != cb->scheme)
			pd_add(l, cb->scheme ==
			    SBX__V1__CREDENTIAL_SCHEME__CREDENTIAL_SCHEME_HTTP,
			    "~ credentials[%s %s].scheme: %s -> %s", cb->host,
			    cb->header, pd_scheme(ca->scheme),
			    pd_scheme(cb->scheme));
	}
}

static const char *
pd_links(Sbx__V1__RemoteLinks v)
{
	return v == SBX__V1__REMOTE_LINKS__REMOTE_LINKS_KEEP ? "keep" :
	    "neutralise";
}

static const char *
pd_formulas(Sbx__V1__CsvFormulas v)
{
	return v == SBX__V1__CSV_FORMULAS__CSV_FORMULAS_NEUTRALISE ?
	    "neutralise" : "flag";
}

static void
pd_outputs(struct pd_list *l, const Sbx__V1__Outputs *a,
    const Sbx__V1__Outputs *b)
{
	pd_set(l, "outputs.allowed_types", a->allowed_types,
	    a->n_allowed_types, b->allowed_types, b->n_allowed_types, NULL);
	pd_num(l, "outputs.max_total_kb", a->max_total_kb, b->max_total_kb, 1);
	pd_num(l, "outputs.max_file_kb", pd_dflt(a->max_file_kb,
	    a->max_total_kb), pd_dflt(b->max_file_kb, b->max_total_kb), 1);
	/* Truncating releases part of a file refusing would have held back. */
	if (a->oversize != b->oversize)
		pd_add(l, b->oversize == SBX__V1__OVERSIZE__OVERSIZE_TRUNCATE,
		    "~ outputs.oversize: %s -> %s", a->oversize ==
		    SBX__V1__OVERSIZE__OVERSIZE_TRUNCATE ? "truncate" :
		    "refuse", b->oversize ==
		    SBX__V1__OVERSIZE__OVERSIZE_TRUNCATE ? "truncate" :
		    "refuse");
	pd_num(l, "outputs.max_text_kb", pd_dflt(a->max_text_kb,
	    POLICY_DEFAULT_MAX_TEXT_KB), pd_dflt(b->max_text_kb,
	    POLICY_DEFAULT_MAX_TEXT_KB), 1);
	if (a->destination != b->destination)
		pd_add(l, 1, "~ outputs.destination: %s -> %s",
		    policy_destination_name(a->destination),
		    policy_destination_name(b->destination));
	/* Kept links are a way out through the chat; formulas left as
	 * they are run in the spreadsheet of whoever opens the file. */
	if (a->remote_links != b->remote_links)
		pd_add(l, b->remote_links ==
		    SBX__V1__REMOTE_LINKS__REMOTE_LINKS_KEEP,
		    "~ outputs.remote_links: %s -> %s", pd_links(a->remote_links),
		    pd_links(b->remote_links));
	if (a->csv_formulas != b->csv_formulas)
		pd_add(l, b->csv_formulas ==
		    SBX__V1__CSV_FORMULAS__CSV_FORMULAS_FLAG,
		    "~ outputs.csv_formulas: %s -> %s",
		    pd_formulas(a->csv_formulas), pd_formulas(b->csv_formulas));
	pd_num(l, "outputs.archives.max_expanded_mb",
	    pd_dflt(a->archive_max_expanded_mb,
	    POLICY_DEFAULT_ARCHIVE_EXPANDED_MB),
	    pd_dflt(b->archive_max_expanded_mb,
	    POLICY_DEFAULT_ARCHIVE_EXPANDED_MB), 1);
	pd_num(l, "outputs.archives.max_ratio", pd_dflt(a->archive_max_ratio,
	    POLICY_DEFAULT_ARCHIVE_RATIO), pd_dflt(b->archive_max_ratio,
	    POLICY_DEFAULT_ARCHIVE_RATIO), 1);
	pd_num(l, "outputs.archives.max_entries",
	    pd_dflt(a->archive_max_entries, POLICY_DEFAULT_ARCHIVE_ENTRIES),
	    pd_dflt(b->archive_max_entries, POLICY_DEFAULT_ARCHIVE_ENTRIES),
	    1);
	pd_num(l, "outputs.archives.max_nesting", a->archive_max_nesting,
	    b->archive_max_nesting, 1);
	pd_num(l, "outputs.images.max_side", pd_dflt(a->image_max_side,
	    POLICY_DEFAULT_IMAGE_SIDE), pd_dflt(b->image_max_side,
	    POLICY_DEFAULT_IMAGE_SIDE), 1);
	pd_num(l, "outputs.images.max_pixels", pd_dflt(a->image_max_pixels,
	    POLICY_DEFAULT_IMAGE_PIXELS), pd_dflt(b->image_max_pixels,
	    POLICY_DEFAULT_IMAGE_PIXELS), 1);
}

static void
pd_inputs(struct pd_list *l, const Sbx__V1__Policy *a,
    const Sbx__V1__Policy *b)
{
	for (size_t i = 0; i < a->n_inputs; i++) {
		int	 found = 0;

		for (size_t j = 0; j < b->n_inputs && !found; j++)
			found = !strcmp(a->inputs[i]->dataset,
			    b->inputs[j]->dataset);
		if (!found)
			pd_add(l, 0, "- inputs: dataset %s removed",
			    a->inputs[i]->dataset);
	}
	for (size_t j = 0; j < b->n_inputs; j++) {
		int	 found = 0;

		for (size_t i = 0; i < a->n_inputs && !found; i++)
			found = !strcmp(a->inputs[i]->dataset,
			    b->inputs[j]->dataset);
		if (!found)
			pd_add(l, 1, "+ inputs: dataset %s added",
			    b->inputs[j]->dataset);
	}
}

size_t
policy_diff(const Sbx__V1__Policy *pa, const Sbx__V1__Policy *pb,
    struct policy_change **out)
{
	struct pd_list		 l = { NULL, 0 };
	Sbx__V1__Policy		*a, *b;
	const Sbx__V1__Limits	*la, *lb;

	*out = NULL;
	a = policy_dup(pa);
	b = policy_dup(pb);
	if (a == NULL || b == NULL) {
		policy_free(a);
		policy_free(b);
		pd_add(&l, 1, "! policy cannot be encoded; treat as widening");
		*out = l.v;
		return l.n;
	}
	policy_normalize(a);
	policy_normalize(b);
	la = a->limits;
	lb = b->limits;

	if (strcmp(a->name, b->name) != 0)
		pd_add(&l, 0, "~ policy: %s -> %s", a->name, b->name);
	pd_num(&l, "version", a->version, b->version, 0);
	if (a->isolation != b->isolation)
		pd_add(&l, pd_rank(b->isolation) < pd_rank(a->isolation),
		    "~ isolation: %s -> %s",
		    policy_isolation_name(a->isolation),
		    policy_isolation_name(b->isolation));
	/* Another image is other code with other tools: always review it. */
	if (strcmp(a->image, b->image) != 0)
		pd_add(&l, 1, "~ image: %s -> %s", a->image, b->image);
	if (la->cpus_milli != lb->cpus_milli) {
		char	 ca[32], cb[32];

		pd_milli(ca, sizeof(ca), la->cpus_milli);
		pd_milli(cb, sizeof(cb), lb->cpus_milli);
		pd_add(&l, lb->cpus_milli > la->cpus_milli,
		    "~ limits.cpus: %s -> %s", ca, cb);
	}
	pd_num(&l, "limits.memory_mb", la->memory_mb, lb->memory_mb, 1);
	pd_num(&l, "limits.pids", la->pids, lb->pids, 1);
	pd_num(&l, "limits.wall_seconds", la->wall_seconds, lb->wall_seconds,
	    1);
	pd_num(&l, "limits.scratch_mb", la->scratch_mb, lb->scratch_mb, 1);
	pd_inputs(&l, a, b);
	pd_network(&l, a->network, b->network);
	pd_credentials(&l, a, b);
	pd_outputs(&l, a->outputs, b->outputs);
	pd_num(&l, "executions_per_task", a->executions_per_task,
	    b->executions_per_task, 1);

	policy_free(a);
	policy_free(b);
	*out = l.v;
	return l.n;
}

void
policy_changes_free(struct policy_change *v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i].text);
	free(v);
}
