/*
 * policy_yaml.c: templates in the reference text's shape, YAML to
 * Sbx__V1__Policy and back.  The invariant: a template that parses names
 * only capabilities sbx can enforce -- a pinned image, default-deny
 * network, hosts without wildcards, ports or userinfo, paths without
 * "..", credentials bound only to hosts the template allows, and
 * ${task.*} placeholders only where compile knows how to fill them.
 * Every problem is reported (file:line:col: key: message), not only the
 * first, and policy_to_yaml() writes text that parses back to an equal
 * policy.
 */
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy.h"
#include "util.h"
#include "yaml.h"

#define PY_MAX_KB	1048576		/* 1 GiB, the largest size we take */

static const char *const py_top_keys[] = {
	"policy", "version", "isolation", "image", "limits", "inputs",
	"network", "credentials", "outputs", "executions_per_task", NULL
};
static const char *const py_top_req[] = {
	"policy", "version", "isolation", "image", "limits", "network",
	"outputs", "executions_per_task", NULL
};
static const char *const py_limit_keys[] = {
	"cpus", "memory_mb", "pids", "wall_seconds", "scratch_mb", NULL
};
static const char *const py_input_keys[] = { "dataset", NULL };
static const char *const py_net_keys[] = {
	"default", "max_out_kb", "allow", NULL
};
static const char *const py_net_req[] = { "default", NULL };
static const char *const py_rule_keys[] = {
	"host", "methods", "paths", "max_request_kb", "max_response_kb",
	"cidrs", "port", NULL
};
static const char *const py_rule_req[] = { "host", "methods", NULL };
static const char *const py_cred_keys[] = {
	"host", "secret", "header", "kind", "scheme", NULL
};
static const char *const py_cred_req[] = { "host", "secret", "header", NULL };
static const char *const py_out_keys[] = {
	"allowed_types", "max_total_kb", "max_file_kb", "oversize",
	"max_text_kb", "destination", "remote_links", "csv_formulas",
	"archives", "images", NULL
};
static const char *const py_archive_keys[] = {
	"max_expanded_mb", "max_ratio", "max_entries", "max_nesting", NULL
};
static const char *const py_image_keys[] = {
	"max_side", "max_pixels", NULL
};
/* Index is the proto enum value. */
static const char *const py_remote_links[] = { "neutralise", "keep", NULL };
static const char *const py_csv_formulas[] = { "flag", "neutralise", NULL };
static const char *const py_out_req[] = {
	"allowed_types", "max_total_kb", "destination", NULL
};
/* Index + 1 is the proto enum value. */
static const char *const py_isolations[] = {
	"container", "gvisor", "microvm", NULL
};
static const char *const py_destinations[] = {
	"agent", "user", "storage-bucket", NULL
};
static const char *const py_oversizes[] = { "refuse", "truncate", NULL };
static const char *const py_kinds[] = { "static", "minted", NULL };
/* In CredentialScheme's order: https (the default) first. */
static const char *const py_schemes[] = { "https", "http", NULL };
static const char *const py_methods[] = {
	"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", NULL
};
/* What compile can substitute inside a path or a secret name. */
static const char *const py_task_fields[] = {
	"id", "type", "tenant", "user", NULL
};

#define PY_DATASET_REF	"${task.dataset_ref}"

static char *
py_key(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *
py_key(const char *fmt, ...)
{
	va_list	 ap;
	char	*s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		s = xstrdup("?");
	va_end(ap);
	return s;
}

static int
py_tchar(int c)
{
	return isalnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

/* RFC 7230 token: one or more tchar. */
static int
py_token(const char *s, size_t n)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!py_tchar((unsigned char)s[i]))
			return 0;
	return 1;
}

/*
 * Check every ${...} in s against allowed (NULL: none allowed) and return
 * a malloc'd copy with each placeholder replaced by "x", so the caller can
 * validate the literal text around them.  NULL after an error.
 */
static char *
py_placeholders(struct ydoc *doc, const struct ynode *n, const char *key,
    const char *s, const char *const allowed[])
{
	char		*out = xmalloc(strlen(s) + 1), *o = out;
	const char	*p = s, *end;

	while (*p != '\0') {
		if (p[0] != '$' || p[1] != '{') {
			*o++ = *p++;
			continue;
		}
		if ((end = strchr(p, '}')) == NULL) {
			yerr(doc, n, key, "unterminated placeholder in \"%s\"",
			    s);
			free(out);
			return NULL;
		}
		int	 ok = 0;
		size_t	 len = (size_t)(end - p) - 2;

		for (size_t i = 0; allowed != NULL && allowed[i] != NULL; i++)
			if (len == strlen("task.") + strlen(allowed[i]) &&
			    strncmp(p + 2, "task.", 5) == 0 &&
			    strncmp(p + 7, allowed[i], strlen(allowed[i])) == 0)
				ok = 1;
		if (!ok) {
			if (allowed == NULL)
				yerr(doc, n, key, "placeholder %.*s is not "
				    "allowed here", (int)(len + 3), p);
			else
				yerr(doc, n, key, "unknown placeholder %.*s; "
				    "only ${task.id}, ${task.type}, "
				    "${task.tenant} and ${task.user} may appear "
				    "here", (int)(len + 3), p);
			free(out);
			return NULL;
		}
		*o++ = 'x';
		p = end + 1;
	}
	*o = '\0';
	return out;
}

/* A plain string field in which no placeholder may appear. */
static const char *
py_literal(struct ydoc *doc, const struct ynode *n, const char *key)
{
	const char	*s = NULL;
	char		*chk;

	if (yget_str(doc, n, key, &s) == -1 || s == NULL)
		return NULL;
	if ((chk = py_placeholders(doc, n, key, s, NULL)) == NULL)
		return NULL;
	free(chk);
	return s;
}

static int
py_uint32(struct ydoc *doc, const struct ynode *map, const char *what,
    const char *name, uint64_t min, uint64_t max, uint32_t *out)
{
	uint64_t	 v;
	char		*key = *what ? py_key("%s.%s", what, name) : xstrdup(name);
	int		 r;

	r = yget_uint(doc, ymap_get(map, name), key, min, max, &v);
	if (r == 0 && ymap_get(map, name) != NULL)
		*out = (uint32_t)v;
	free(key);
	return r;
}

static int
py_name_ok(const char *s)
{
	size_t	 n = strlen(s);

	if (n == 0 || n > 64)
		return 0;
	if (!islower((unsigned char)s[0]) && !isdigit((unsigned char)s[0]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) &&
		    !isdigit((unsigned char)s[i]) && s[i] != '.' && s[i] != '-')
			return 0;
	return 1;
}

/* name@sha256:<64 lower hex>; name as OCI references spell it. */
static int
py_image_ok(const char *s)
{
	const char	*at = strrchr(s, '@');
	size_t		 n;

	if (at == NULL || at == s || strncmp(at + 1, "sha256:", 7) != 0)
		return 0;
	if (strlen(at + 8) != 64)
		return 0;
	for (const char *p = at + 8; *p != '\0'; p++)
		if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
			return 0;
	n = (size_t)(at - s);
	if (n > 255 || !isalnum((unsigned char)s[0]) || s[n - 1] == '/')
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!islower((unsigned char)s[i]) &&
		    !isdigit((unsigned char)s[i]) && !strchr("._/:-", s[i]))
			return 0;
		if (i + 1 < n && s[i] == '/' && s[i + 1] == '/')
			return 0;
		if (i + 1 < n && s[i] == '.' && s[i + 1] == '.')
			return 0;
	}
	return 1;
}

/*
 * A host as egressd matches it: a DNS name (lower-cased, one trailing dot
 * dropped) or an IP literal (in inet_ntop's spelling).  Returns a
 * malloc'd canonical host, or NULL with *why set.
 */
static char *
py_host(const char *in, const char **why)
{
	unsigned char	 a[sizeof(struct in6_addr)];
	char		 buf[INET6_ADDRSTRLEN], *h;
	size_t		 n = strlen(in), lab = 0;
	int		 alldigits = 1;

	if (n == 0)
		return *why = "must not be empty", NULL;
	if (strstr(in, "://") != NULL || strchr(in, '/') != NULL)
		return *why = "must be a host name, not a URL", NULL;
	if (strchr(in, '@') != NULL)
		return *why = "must not contain userinfo (user@)", NULL;
	if (strchr(in, '*') != NULL)
		return *why = "wildcards are not allowed; list each host", NULL;
	if (in[0] == '[' && in[n - 1] == ']' && n - 2 < sizeof(buf)) {
		memcpy(buf, in + 1, n - 2);
		buf[n - 2] = '\0';
		if (inet_pton(AF_INET6, buf, a) == 1 &&
		    inet_ntop(AF_INET6, a, buf, sizeof(buf)) != NULL)
			return xstrdup(buf);
		return *why = "is not a valid IPv6 address", NULL;
	}
	if (inet_pton(AF_INET6, in, a) == 1 &&
	    inet_ntop(AF_INET6, a, buf, sizeof(buf)) != NULL)
		return xstrdup(buf);
	if (strchr(in, ':') != NULL)
		return *why = "must not contain a port; use port:", NULL;
	if (inet_pton(AF_INET, in, a) == 1 &&
	    inet_ntop(AF_INET, a, buf, sizeof(buf)) != NULL)
		return xstrdup(buf);
	h = xstrdup(in);
	for (char *p = h; *p != '\0'; p++)
		*p = (char)tolower((unsigned char)*p);
	if (n > 1 && h[n - 1] == '.')
		h[--n] = '\0';
	if (n > 253)
		goto bad;
	for (size_t i = 0; i <= n; i++) {
		if (i == n || h[i] == '.') {
			if (lab == 0 || lab > 63 || h[i - 1] == '-')
				goto bad;
			if (i < n)
				alldigits = 1;
			lab = 0;
			continue;
		}
		if (lab == 0 && h[i] == '-')
			goto bad;
		if (!isdigit((unsigned char)h[i]))
			alldigits = 0;
		if (!islower((unsigned char)h[i]) &&
		    !isdigit((unsigned char)h[i]) && h[i] != '-')
			goto bad;
		lab++;
	}
	/* "10.1.2" or "1234" is neither a name nor an address. */
	if (alldigits)
		goto bad;
	return h;
bad:
	free(h);
	return *why = "is not a valid host name or IP address", NULL;
}

static char *
py_cidr(const char *in)
{
	unsigned char	 a[sizeof(struct in6_addr)];
	char		 addr[INET6_ADDRSTRLEN], *out;
	const char	*slash = strchr(in, '/');
	size_t		 alen;
	int		 af, max, len = 0;

	if (slash == NULL || slash[1] == '\0')
		return NULL;
	alen = (size_t)(slash - in);
	if (alen == 0 || alen >= sizeof(addr))
		return NULL;
	memcpy(addr, in, alen);
	addr[alen] = '\0';
	af = strchr(addr, ':') != NULL ? AF_INET6 : AF_INET;
	max = af == AF_INET6 ? 128 : 32;
	if (inet_pton(af, addr, a) != 1)
		return NULL;
	if (slash[1] == '0' && slash[2] != '\0')
		return NULL;
	for (const char *p = slash + 1; *p != '\0'; p++) {
		if (!isdigit((unsigned char)*p))
			return NULL;
		len = len * 10 + (*p - '0');
		if (len > max)
			return NULL;
	}
	if (inet_ntop(af, a, addr, sizeof(addr)) == NULL)
		return NULL;
	xasprintf(&out, "%s/%d", addr, len);
	return out;
}

static int
py_path_ok(const char *s)
{
	if (s[0] != '/' || strstr(s, "..") != NULL)
		return 0;
	for (const char *p = s; *p != '\0'; p++) {
		unsigned char	 c = (unsigned char)*p;

		if (c <= 0x20 || c >= 0x7f || strchr("?#\\{}", c) != NULL)
			return 0;
	}
	return 1;
}

static int
py_mime_ok(const char *s)
{
	const char	*slash = strchr(s, '/');

	return slash != NULL && py_token(s, (size_t)(slash - s)) &&
	    py_token(slash + 1, strlen(slash + 1)) &&
	    strchr(slash + 1, '/') == NULL;
}

static void
py_push(char ***v, size_t *n, char *s)
{
	*v = xreallocarray(*v, *n + 1, sizeof(**v));
	(*v)[(*n)++] = s;
}

static void
py_limits(struct ydoc *doc, const struct ynode *m, Sbx__V1__Policy *p)
{
	uint64_t	 cpus;

	if (m == NULL)
		return;
	if (ymap_check(doc, m, "limits", py_limit_keys, py_limit_keys) > 0 &&
	    m->type != YN_MAP)
		return;
	if (yget_milli(doc, ymap_get(m, "cpus"), "limits.cpus", 1, 64000,
	    &cpus) == 0 && ymap_get(m, "cpus") != NULL)
		p->limits->cpus_milli = (uint32_t)cpus;
	py_uint32(doc, m, "limits", "memory_mb", 16, 1048576,
	    &p->limits->memory_mb);
	py_uint32(doc, m, "limits", "pids", 1, 65536, &p->limits->pids);
	py_uint32(doc, m, "limits", "wall_seconds", 1, 86400,
	    &p->limits->wall_seconds);
	py_uint32(doc, m, "limits", "scratch_mb", 1, 1048576,
	    &p->limits->scratch_mb);
}

static void
py_inputs(struct ydoc *doc, const struct ynode *s, Sbx__V1__Policy *p)
{
	if (s == NULL)
		return;
	if (s->type != YN_SEQ) {
		yerr(doc, s, "inputs", "must be a list of {dataset: NAME}");
		return;
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct ynode	*it = s->items[i], *dn;
		const char		*ds = NULL;
		char			*what = py_key("inputs[%zu]", i);
		char			*key = py_key("%s.dataset", what);
		Sbx__V1__Input		*in;

		if (ymap_check(doc, it, what, py_input_keys,
		    py_input_keys) > 0 && it->type != YN_MAP)
			goto next;
		dn = ymap_get(it, "dataset");
		if (yget_str(doc, dn, key, &ds) == -1 || ds == NULL)
			goto next;
		if (strstr(ds, "${") != NULL && strcmp(ds, PY_DATASET_REF)) {
			yerr(doc, dn, key, "the only placeholder allowed here "
			    "is the whole value \"%s\", got \"%s\"",
			    PY_DATASET_REF, ds);
			goto next;
		}
		if (strcmp(ds, PY_DATASET_REF) != 0 && !name_ok(ds)) {
			yerr(doc, dn, key, "must be a dataset name (1-128 of "
			    "A-Z a-z 0-9 . _ @ : -) or \"%s\", got \"%s\"",
			    PY_DATASET_REF, ds);
			goto next;
		}
		in = xmalloc(sizeof(*in));
		sbx__v1__input__init(in);
		in->dataset = xstrdup(ds);
		p->inputs = xreallocarray(p->inputs, p->n_inputs + 1,
		    sizeof(*p->inputs));
		p->inputs[p->n_inputs++] = in;
next:
		free(what);
		free(key);
	}
}

static void
py_rule(struct ydoc *doc, const struct ynode *it, const char *what,
    Sbx__V1__AllowRule *r)
{
	const struct ynode	*hn = ymap_get(it, "host");
	const char		*host = NULL, *why = NULL, **v;
	size_t			 n;
	char			*key;

	key = py_key("%s.host", what);
	if ((host = py_literal(doc, hn, key)) != NULL) {
		if ((r->host = py_host(host, &why)) == NULL) {
			yerr(doc, hn, key, "%s, got \"%s\"", why, host);
			r->host = xstrdup("");
		}
	}
	free(key);

	key = py_key("%s.methods", what);
	v = NULL;
	n = 0;
	if (yget_strseq(doc, ymap_get(it, "methods"), key, &v, &n) == 0 &&
	    ymap_get(it, "methods") != NULL) {
		if (n == 0)
			yerr(doc, ymap_get(it, "methods"), key, "must list at "
			    "least one method");
		for (size_t i = 0; i < n; i++) {
			const struct ynode	*mn;
			char			*m = xstrdup(v[i]);
			int			 ok = 0;

			mn = ymap_get(it, "methods")->items[i];
			for (char *c = m; *c != '\0'; c++)
				*c = (char)toupper((unsigned char)*c);
			for (size_t j = 0; py_methods[j] != NULL; j++)
				ok |= strcmp(py_methods[j], m) == 0;
			if (!ok) {
				char	*ik = py_key("%s[%zu]", key, i);

				yerr(doc, mn, ik, "unknown method \"%s\"; "
				    "expected one of GET, HEAD, POST, PUT, "
				    "PATCH, DELETE, OPTIONS", m);
				free(ik);
				free(m);
				continue;
			}
			py_push(&r->methods, &r->n_methods, m);
		}
		free(v);
	}
	free(key);

	key = py_key("%s.paths", what);
	v = NULL;
	n = 0;
	if (yget_strseq(doc, ymap_get(it, "paths"), key, &v, &n) == 0) {
		/* No paths means any path: an empty list must not say so. */
		if (n == 0 && ymap_get(it, "paths") != NULL)
			yerr(doc, ymap_get(it, "paths"), key, "must list at "
			    "least one prefix; leave paths out to allow any "
			    "path");
		for (size_t i = 0; i < n; i++) {
			const struct ynode	*pn;
			char			*ik = py_key("%s[%zu]", key, i);
			char			*lit;

			pn = ymap_get(it, "paths")->items[i];
			lit = py_placeholders(doc, pn, ik, v[i],
			    py_task_fields);
			if (lit != NULL && !py_path_ok(lit))
				yerr(doc, pn, ik, "must start with \"/\" and "
				    "contain no \"..\", \"?\", \"#\", "
				    "spaces or control characters, got \"%s\"",
				    v[i]);
			else if (lit != NULL)
				py_push(&r->paths, &r->n_paths, xstrdup(v[i]));
			free(lit);
			free(ik);
		}
		free(v);
	}
	free(key);

	key = py_key("%s.cidrs", what);
	v = NULL;
	n = 0;
	if (yget_strseq(doc, ymap_get(it, "cidrs"), key, &v, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			char	*c = py_cidr(v[i]);

			if (c == NULL) {
				char	*ik = py_key("%s[%zu]", key, i);

				yerr(doc, ymap_get(it, "cidrs")->items[i], ik,
				    "must be an IPv4 or IPv6 network as "
				    "ADDRESS/PREFIX, got \"%s\"", v[i]);
				free(ik);
				continue;
			}
			py_push(&r->cidrs, &r->n_cidrs, c);
		}
		free(v);
	}
	free(key);

	py_uint32(doc, it, what, "max_request_kb", 1, PY_MAX_KB,
	    &r->max_request_kb);
	py_uint32(doc, it, what, "max_response_kb", 1, PY_MAX_KB,
	    &r->max_response_kb);
	py_uint32(doc, it, what, "port", 1, 65535, &r->port);
}

static void
py_network(struct ydoc *doc, const struct ynode *m, Sbx__V1__Policy *p)
{
	Sbx__V1__Network	*net = p->network;
	const struct ynode	*al, *dn;

	if (m == NULL)
		return;
	if (ymap_check(doc, m, "network", py_net_keys, py_net_req) > 0 &&
	    m->type != YN_MAP)
		return;
	dn = ymap_get(m, "default");
	if (dn != NULL && (dn->type != YN_SCALAR ||
	    strcmp(dn->scalar, "deny") != 0))
		yerr(doc, dn, "network.default", "only \"deny\" is accepted: "
		    "anything not allowed is denied, got \"%s\"",
		    dn->type == YN_SCALAR ? dn->scalar : "a collection");
	py_uint32(doc, m, "network", "max_out_kb", 1, PY_MAX_KB,
	    &net->max_out_kb);
	if ((al = ymap_get(m, "allow")) == NULL)
		return;
	if (al->type != YN_SEQ) {
		yerr(doc, al, "network.allow", "must be a list of rules "
		    "({host: NAME, methods: [...]})");
		return;
	}
	for (size_t i = 0; i < al->n; i++) {
		const struct ynode	*it = al->items[i];
		char			*what = py_key("network.allow[%zu]", i);
		Sbx__V1__AllowRule	*r;

		if (ymap_check(doc, it, what, py_rule_keys, py_rule_req) > 0 &&
		    it->type != YN_MAP) {
			free(what);
			continue;
		}
		r = xmalloc(sizeof(*r));
		sbx__v1__allow_rule__init(r);
		r->host = NULL;
		py_rule(doc, it, what, r);
		if (r->host == NULL)
			r->host = xstrdup("");
		for (size_t j = 0; j < net->n_allow && *r->host != '\0'; j++) {
			if (strcmp(net->allow[j]->host, r->host) != 0)
				continue;
			char	*key = py_key("%s.host", what);

			yerr(doc, ymap_get(it, "host"), key, "%s already has "
			    "a rule; merge them into one", r->host);
			free(key);
			break;
		}
		net->allow = xreallocarray(net->allow, net->n_allow + 1,
		    sizeof(*net->allow));
		net->allow[net->n_allow++] = r;
		free(what);
	}
}

static void
py_credentials(struct ydoc *doc, const struct ynode *s, Sbx__V1__Policy *p)
{
	if (s == NULL)
		return;
	if (s->type != YN_SEQ) {
		yerr(doc, s, "credentials", "must be a list of {host, secret, "
		    "header}");
		return;
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct ynode	*it = s->items[i], *hn, *sn, *en;
		const char		*host, *secret, *header, *why = NULL;
		char			*what = py_key("credentials[%zu]", i);
		char			*hk = py_key("%s.host", what);
		char			*sk = py_key("%s.secret", what);
		char			*ek = py_key("%s.header", what);
		char			*kk = py_key("%s.kind", what);
		char			*xk = py_key("%s.scheme", what);
		char			*ch = NULL, *lit;
		Sbx__V1__Credential	*c;
		int			 kind = 0, scheme = 0, bad = 0, found = 0;

		if (ymap_check(doc, it, what, py_cred_keys, py_cred_req) > 0) {
			bad = 1;
			if (it->type != YN_MAP)
				goto next;
		}
		hn = ymap_get(it, "host");
		sn = ymap_get(it, "secret");
		en = ymap_get(it, "header");
		if ((host = py_literal(doc, hn, hk)) != NULL &&
		    (ch = py_host(host, &why)) == NULL) {
			yerr(doc, hn, hk, "%s, got \"%s\"", why, host);
			bad = 1;
		}
		if (ch != NULL) {
			for (size_t j = 0; j < p->network->n_allow; j++)
				found |= strcmp(p->network->allow[j]->host,
				    ch) == 0;
			if (!found) {
				yerr(doc, hn, hk, "%s has no network.allow rule; "
				    "a secret may only be bound to a host the "
				    "template allows", ch);
				bad = 1;
			}
		}
		secret = NULL;
		if (yget_str(doc, sn, sk, &secret) == 0 && secret != NULL) {
			lit = py_placeholders(doc, sn, sk, secret,
			    py_task_fields);
			if (lit == NULL)
				bad = 1;
			else if (!name_ok(lit)) {
				yerr(doc, sn, sk, "must be a secret name (1-128 "
				    "of A-Z a-z 0-9 . _ @ : -), got \"%s\"",
				    secret);
				bad = 1;
			}
			free(lit);
		} else
			bad = 1;
		header = py_literal(doc, en, ek);
		if (header != NULL && (!py_token(header, strlen(header)) ||
		    strlen(header) > 64)) {
			yerr(doc, en, ek, "must be an HTTP header name (RFC "
			    "7230 token), got \"%s\"", header);
			bad = 1;
		} else if (header == NULL)
			bad = 1;
		if (yget_enum(doc, ymap_get(it, "kind"), kk, py_kinds,
		    &kind) == -1)
			bad = 1;
		/* https (the default): the credential goes only over TLS
		 * egressd verified; http must be asked for by name. */
		if (yget_enum(doc, ymap_get(it, "scheme"), xk, py_schemes,
		    &scheme) == -1)
			bad = 1;
		if (bad || ch == NULL)
			goto next;
		for (size_t j = 0; j < p->n_credentials; j++) {
			if (strcmp(p->credentials[j]->host, ch) == 0 &&
			    strcasecmp(p->credentials[j]->header, header) == 0) {
				yerr(doc, en, ek, "%s already has a credential "
				    "in header %s", ch, header);
				bad = 1;
			}
		}
		if (bad)
			goto next;
		c = xmalloc(sizeof(*c));
		sbx__v1__credential__init(c);
		c->host = ch;
		ch = NULL;
		c->secret = xstrdup(secret);
		c->header = xstrdup(header);
		c->kind = (Sbx__V1__CredentialKind)kind;
		c->scheme = (Sbx__V1__CredentialScheme)scheme;
		p->credentials = xreallocarray(p->credentials,
		    p->n_credentials + 1, sizeof(*p->credentials));
		p->credentials[p->n_credentials++] = c;
next:
		free(ch);
		free(what);
		free(hk);
		free(sk);
		free(ek);
		free(kk);
		free(xk);
	}
}

/* outputs.archives: what gated reads an archive through to. */
static void
py_archives(struct ydoc *doc, const struct ynode *m, Sbx__V1__Outputs *o)
{
	if (m == NULL)
		return;
	if (ymap_check(doc, m, "outputs.archives", py_archive_keys, NULL) >
	    0 && m->type != YN_MAP)
		return;
	py_uint32(doc, m, "outputs.archives", "max_expanded_mb", 1, 1048576,
	    &o->archive_max_expanded_mb);
	py_uint32(doc, m, "outputs.archives", "max_ratio", 1, 1000000,
	    &o->archive_max_ratio);
	py_uint32(doc, m, "outputs.archives", "max_entries", 1, 10000000,
	    &o->archive_max_entries);
	py_uint32(doc, m, "outputs.archives", "max_nesting", 0, 16,
	    &o->archive_max_nesting);
}

/* outputs.images: the dimensions gated lets an image claim. */
static void
py_images(struct ydoc *doc, const struct ynode *m, Sbx__V1__Outputs *o)
{
	if (m == NULL)
		return;
	if (ymap_check(doc, m, "outputs.images", py_image_keys, NULL) > 0 &&
	    m->type != YN_MAP)
		return;
	py_uint32(doc, m, "outputs.images", "max_side", 1, 1000000,
	    &o->image_max_side);
	py_uint32(doc, m, "outputs.images", "max_pixels", 1, 4000000000U,
	    &o->image_max_pixels);
}

static void
py_outputs(struct ydoc *doc, const struct ynode *m, Sbx__V1__Policy *p)
{
	Sbx__V1__Outputs	*o = p->outputs;
	const struct ynode	*tn;
	const char		**v = NULL;
	size_t			 n = 0;
	int			 idx;

	if (m == NULL)
		return;
	if (ymap_check(doc, m, "outputs", py_out_keys, py_out_req) > 0 &&
	    m->type != YN_MAP)
		return;
	tn = ymap_get(m, "allowed_types");
	if (yget_strseq(doc, tn, "outputs.allowed_types", &v, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			char	*t = xstrdup(v[i]);

			for (char *c = t; *c != '\0'; c++)
				*c = (char)tolower((unsigned char)*c);
			if (!py_mime_ok(t)) {
				char	*ik = py_key("outputs.allowed_types[%zu]",
				    i);

				yerr(doc, tn->items[i], ik, "must be a MIME type "
				    "as type/subtype, got \"%s\"", v[i]);
				free(ik);
				free(t);
				continue;
			}
			py_push(&o->allowed_types, &o->n_allowed_types, t);
		}
		free(v);
	}
	py_uint32(doc, m, "outputs", "max_total_kb", 1, PY_MAX_KB,
	    &o->max_total_kb);
	if (py_uint32(doc, m, "outputs", "max_file_kb", 1, PY_MAX_KB,
	    &o->max_file_kb) == 0 && o->max_total_kb != 0 &&
	    o->max_file_kb > o->max_total_kb)
		yerr(doc, ymap_get(m, "max_file_kb"), "outputs.max_file_kb",
		    "%u is larger than max_total_kb %u", o->max_file_kb,
		    o->max_total_kb);
	py_uint32(doc, m, "outputs", "max_text_kb", 1, 65536, &o->max_text_kb);
	if (yget_enum(doc, ymap_get(m, "oversize"), "outputs.oversize",
	    py_oversizes, &idx) == 0 && ymap_get(m, "oversize") != NULL)
		o->oversize = (Sbx__V1__Oversize)idx;
	if (yget_enum(doc, ymap_get(m, "destination"), "outputs.destination",
	    py_destinations, &idx) == 0 && ymap_get(m, "destination") != NULL)
		o->destination = (Sbx__V1__Destination)(idx + 1);
	if (yget_enum(doc, ymap_get(m, "remote_links"), "outputs.remote_links",
	    py_remote_links, &idx) == 0 && ymap_get(m, "remote_links") != NULL)
		o->remote_links = (Sbx__V1__RemoteLinks)idx;
	if (yget_enum(doc, ymap_get(m, "csv_formulas"), "outputs.csv_formulas",
	    py_csv_formulas, &idx) == 0 && ymap_get(m, "csv_formulas") != NULL)
		o->csv_formulas = (Sbx__V1__CsvFormulas)idx;
	py_archives(doc, ymap_get(m, "archives"), o);
	py_images(doc, ymap_get(m, "images"), o);
}

static Sbx__V1__Policy *
py_parse_doc(struct ydoc *doc)
{
	const struct ynode	*root = doc->root, *n;
	Sbx__V1__Policy		*p;
	const char		*s;
	int			 idx;

	if (root == NULL) {
		yerr(doc, NULL, NULL, "empty document, expected a template");
		return NULL;
	}
	if (ymap_check(doc, root, "", py_top_keys, py_top_req) > 0 &&
	    root->type != YN_MAP)
		return NULL;
	p = policy_new();

	n = ymap_get(root, "policy");
	if ((s = py_literal(doc, n, "policy")) != NULL) {
		if (!py_name_ok(s))
			yerr(doc, n, "policy", "must be 1-64 of a-z 0-9 . - "
			    "starting with a letter or digit, got \"%s\"", s);
		else {
			free(p->name);
			p->name = xstrdup(s);
		}
	}
	py_uint32(doc, root, "", "version", 1, 1000000, &p->version);
	if (yget_enum(doc, ymap_get(root, "isolation"), "isolation",
	    py_isolations, &idx) == 0 && ymap_get(root, "isolation") != NULL)
		p->isolation = (Sbx__V1__Isolation)(idx + 1);
	n = ymap_get(root, "image");
	if ((s = py_literal(doc, n, "image")) != NULL) {
		if (!py_image_ok(s))
			yerr(doc, n, "image", "must be pinned by digest as "
			    "NAME@sha256:<64 lower-case hex digits>, got \"%s\"",
			    s);
		else {
			free(p->image);
			p->image = xstrdup(s);
		}
	}
	py_limits(doc, ymap_get(root, "limits"), p);
	py_inputs(doc, ymap_get(root, "inputs"), p);
	py_network(doc, ymap_get(root, "network"), p);
	py_credentials(doc, ymap_get(root, "credentials"), p);
	py_outputs(doc, ymap_get(root, "outputs"), p);
	py_uint32(doc, root, "", "executions_per_task", 1, 100000,
	    &p->executions_per_task);
	return p;
}

Sbx__V1__Policy *
policy_parse_buf(const char *name, const char *buf, size_t len,
    struct yerrs *errs)
{
	struct yerrs	 local = { NULL, 0 };
	struct yerrs	*e = errs != NULL ? errs : &local;
	size_t		 before = e->n;
	struct ydoc	*doc;
	Sbx__V1__Policy	*p = NULL;

	if ((doc = yaml_load_buf(name, buf, len, e)) != NULL) {
		p = py_parse_doc(doc);
		ydoc_free(doc);
	}
	if (e->n > before || p == NULL) {
		policy_free(p);
		p = NULL;
	} else
		policy_normalize(p);
	yerrs_free(&local);
	return p;
}

Sbx__V1__Policy *
policy_parse_file(const char *path, struct yerrs *errs)
{
	struct yerrs	 local = { NULL, 0 };
	struct yerrs	*e = errs != NULL ? errs : &local;
	size_t		 before = e->n;
	struct ydoc	*doc;
	Sbx__V1__Policy	*p = NULL;

	if ((doc = yaml_load_file(path, e)) != NULL) {
		p = py_parse_doc(doc);
		ydoc_free(doc);
	}
	if (e->n > before || p == NULL) {
		policy_free(p);
		p = NULL;
	} else
		policy_normalize(p);
	yerrs_free(&local);
	return p;
}

/* ---- rendering ---- */

/*
 * Write s as a YAML scalar: plain when it cannot be misread (and, inside
 * a flow collection, holds no ':'), double-quoted with escapes otherwise.
 */
static void
py_emit(FILE *f, const char *s, int flow)
{
	int	 plain = *s != '\0' && (isalnum((unsigned char)*s) ||
		    *s == '/' || *s == '.' || *s == '_');

	for (const char *p = s; *p != '\0' && plain; p++) {
		unsigned char	 c = (unsigned char)*p;

		if (!isalnum(c) && strchr("._/+-@:", c) == NULL)
			plain = 0;
		if (c == ':' && (flow || p[1] == '\0'))
			plain = 0;
	}
	if (plain && (strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
	    strcmp(s, "NULL") == 0))
		plain = 0;
	if (plain) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (const char *p = s; *p != '\0'; p++) {
		unsigned char	 c = (unsigned char)*p;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void
py_emit_list(FILE *f, char *const *v, size_t n)
{
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			fputs(", ", f);
		py_emit(f, v[i], 1);
	}
	fputc(']', f);
}

static void
py_emit_milli(FILE *f, uint32_t m)
{
	unsigned	 frac = m % 1000;

	if (frac == 0)
		fprintf(f, "%u", m / 1000);
	else if (frac % 100 == 0)
		fprintf(f, "%u.%u", m / 1000, frac / 100);
	else if (frac % 10 == 0)
		fprintf(f, "%u.%02u", m / 1000, frac / 10);
	else
		fprintf(f, "%u.%03u", m / 1000, frac);
}

static void
py_emit_nonzero(FILE *f, const char *key, uint32_t v)
{
	if (v != 0)
		fprintf(f, "    %s: %u\n", key, v);
}

char *
policy_to_yaml(const Sbx__V1__Policy *p)
{
	const Sbx__V1__Limits	*l = p->limits;
	const Sbx__V1__Network	*net = p->network;
	const Sbx__V1__Outputs	*o = p->outputs;
	char			*buf = NULL;
	size_t			 len = 0;
	FILE			*f;

	if ((f = open_memstream(&buf, &len)) == NULL)
		return NULL;
	fputs("policy: ", f);
	py_emit(f, p->name != NULL ? p->name : "", 0);
	fprintf(f, "\nversion: %u\n", p->version);
	fprintf(f, "isolation: %s\n", policy_isolation_name(p->isolation));
	fputs("image: ", f);
	py_emit(f, p->image != NULL ? p->image : "", 0);
	fputc('\n', f);
	if (l != NULL) {
		fputs("limits: {cpus: ", f);
		py_emit_milli(f, l->cpus_milli);
		fprintf(f, ", memory_mb: %u, pids: %u, wall_seconds: %u, "
		    "scratch_mb: %u}\n", l->memory_mb, l->pids,
		    l->wall_seconds, l->scratch_mb);
	}
	if (p->n_inputs > 0) {
		fputs("inputs:\n", f);
		for (size_t i = 0; i < p->n_inputs; i++) {
			fputs("  - dataset: ", f);
			py_emit(f, p->inputs[i]->dataset, 0);
			fputc('\n', f);
		}
	}
	if (net != NULL) {
		fputs("network:\n  default: deny\n", f);
		if (net->max_out_kb != 0)
			fprintf(f, "  max_out_kb: %u\n", net->max_out_kb);
		if (net->n_allow > 0)
			fputs("  allow:\n", f);
		for (size_t i = 0; i < net->n_allow; i++) {
			const Sbx__V1__AllowRule	*r = net->allow[i];

			fputs("    - host: ", f);
			py_emit(f, r->host, 0);
			fputs("\n      methods: ", f);
			py_emit_list(f, r->methods, r->n_methods);
			fputc('\n', f);
			if (r->n_paths > 0) {
				fputs("      paths: ", f);
				py_emit_list(f, r->paths, r->n_paths);
				fputc('\n', f);
			}
			if (r->max_request_kb != 0)
				fprintf(f, "      max_request_kb: %u\n",
				    r->max_request_kb);
			if (r->max_response_kb != 0)
				fprintf(f, "      max_response_kb: %u\n",
				    r->max_response_kb);
			if (r->n_cidrs > 0) {
				fputs("      cidrs: ", f);
				py_emit_list(f, r->cidrs, r->n_cidrs);
				fputc('\n', f);
			}
			if (r->port != 0)
				fprintf(f, "      port: %u\n", r->port);
		}
	}
	if (p->n_credentials > 0) {
		fputs("credentials:\n", f);
		for (size_t i = 0; i < p->n_credentials; i++) {
			const Sbx__V1__Credential	*c = p->credentials[i];

			fputs("  - host: ", f);
			py_emit(f, c->host, 0);
			fputs("\n    secret: ", f);
			py_emit(f, c->secret, 0);
			fputs("\n    header: ", f);
			py_emit(f, c->header, 0);
			fprintf(f, "\n    kind: %s\n", c->kind ==
			    SBX__V1__CREDENTIAL_KIND__CREDENTIAL_MINTED ?
			    "minted" : "static");
			if (c->scheme ==
			    SBX__V1__CREDENTIAL_SCHEME__CREDENTIAL_SCHEME_HTTP)
				fputs("    scheme: http\n", f);
		}
	}
	if (o != NULL) {
		fputs("outputs:\n  allowed_types: ", f);
		py_emit_list(f, o->allowed_types, o->n_allowed_types);
		fprintf(f, "\n  max_total_kb: %u\n", o->max_total_kb);
		if (o->max_file_kb != 0)
			fprintf(f, "  max_file_kb: %u\n", o->max_file_kb);
		fprintf(f, "  oversize: %s\n", o->oversize ==
		    SBX__V1__OVERSIZE__OVERSIZE_TRUNCATE ? "truncate" :
		    "refuse");
		if (o->max_text_kb != 0)
			fprintf(f, "  max_text_kb: %u\n", o->max_text_kb);
		fprintf(f, "  destination: %s\n",
		    policy_destination_name(o->destination));
		if (o->remote_links != 0)
			fprintf(f, "  remote_links: %s\n",
			    py_remote_links[o->remote_links == 1]);
		if (o->csv_formulas != 0)
			fprintf(f, "  csv_formulas: %s\n",
			    py_csv_formulas[o->csv_formulas == 1]);
		if (o->archive_max_expanded_mb != 0 ||
		    o->archive_max_ratio != 0 || o->archive_max_entries != 0 ||
		    o->archive_max_nesting != 0) {
			fputs("  archives:\n", f);
			py_emit_nonzero(f, "max_expanded_mb",
			    o->archive_max_expanded_mb);
			py_emit_nonzero(f, "max_ratio", o->archive_max_ratio);
			py_emit_nonzero(f, "max_entries",
			    o->archive_max_entries);
			py_emit_nonzero(f, "max_nesting",
			    o->archive_max_nesting);
		}
		if (o->image_max_side != 0 || o->image_max_pixels != 0) {
			fputs("  images:\n", f);
			py_emit_nonzero(f, "max_side", o->image_max_side);
			py_emit_nonzero(f, "max_pixels", o->image_max_pixels);
		}
	}
	fprintf(f, "executions_per_task: %u\n", p->executions_per_task);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
