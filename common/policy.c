/*
 * policy.c: the policy model every daemon shares -- allocation, deep copy,
 * normalisation, the canonical encoding, its hash, and the subset test
 * that keeps compilation from ever widening a template.
 *
 * Ownership model (one for every Policy in the program): a Policy is
 * shaped exactly like a message protobuf-c unpacks with the default
 * allocator.  The message, each sub-message, each repeated array and each
 * string is its own malloc() block, so policy_free() is
 * protobuf_c_message_free_unpacked() and works the same for a policy built
 * by policy_new()/policy_parse_*() and for one that came off the wire.
 * Our own code never leaves protobuf_c_empty_string in a string field
 * (policy_new and policy_dup replace it with a malloc'd ""), so a caller
 * may always free() a string or array field and store malloc'd memory
 * (xstrdup, xreallocarray) in its place.  Counts (n_*) must match arrays.
 *
 * Canonical form: policy_normalize() sorts and de-duplicates every set,
 * then protobuf-c packs the message with fields in field-number order,
 * repeated fields in array order and proto3 zero values omitted.  The same
 * policy therefore always yields the same bytes, and the hash is SHA-256
 * over those bytes.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "policy.h"
#include "util.h"

/* Replace NULL or protobuf_c_empty_string strings with malloc'd "" and
 * make sure the three sub-messages policy.h promises exist. */
static void
policy_own_strings(ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor	*d = m->descriptor;

	for (unsigned f = 0; f < d->n_fields; f++) {
		const ProtobufCFieldDescriptor	*fd = &d->fields[f];
		char				*base = (char *)m;

		if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t	 n = *(size_t *)(base + fd->quantifier_offset);
			void	*arr = *(void **)(base + fd->offset);

			if (fd->type != PROTOBUF_C_TYPE_MESSAGE || arr == NULL)
				continue;
			for (size_t i = 0; i < n; i++)
				policy_own_strings(((ProtobufCMessage **)arr)[i]);
		} else if (fd->type == PROTOBUF_C_TYPE_STRING) {
			char	**sp = (char **)(base + fd->offset);

			if (*sp == NULL || *sp == protobuf_c_empty_string)
				*sp = xstrdup("");
		} else if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
			ProtobufCMessage	*sm;

			sm = *(ProtobufCMessage **)(base + fd->offset);
			if (sm != NULL)
				policy_own_strings(sm);
		}
	}
}

static void
policy_fill(Sbx__V1__Policy *p)
{
	if (p->limits == NULL) {
		p->limits = xmalloc(sizeof(*p->limits));
		sbx__v1__limits__init(p->limits);
	}
	if (p->network == NULL) {
		p->network = xmalloc(sizeof(*p->network));
		sbx__v1__network__init(p->network);
	}
	if (p->outputs == NULL) {
		p->outputs = xmalloc(sizeof(*p->outputs));
		sbx__v1__outputs__init(p->outputs);
	}
	policy_own_strings(&p->base);
}

Sbx__V1__Policy *
policy_new(void)
{
	Sbx__V1__Policy	*p = xmalloc(sizeof(*p));

	sbx__v1__policy__init(p);
	policy_fill(p);
	free(p->network->default_action);
	p->network->default_action = xstrdup("deny");
	return p;
}

void
policy_free(Sbx__V1__Policy *p)
{
	if (p != NULL)
		sbx__v1__policy__free_unpacked(p, NULL);
}

Sbx__V1__Policy *
policy_dup(const Sbx__V1__Policy *p)
{
	Sbx__V1__Policy	*c;
	uint8_t		*buf;
	size_t		 len;

	if (p == NULL)
		return NULL;
	len = sbx__v1__policy__get_packed_size(p);
	buf = xmalloc(len);
	sbx__v1__policy__pack(p, buf);
	c = sbx__v1__policy__unpack(NULL, len, buf);
	free(buf);
	if (c == NULL)
		return NULL;
	policy_fill(c);
	return c;
}

static void
policy_lower(char *s)
{
	for (; *s != '\0'; s++)
		*s = (char)tolower((unsigned char)*s);
}

static void
policy_upper(char *s)
{
	for (; *s != '\0'; s++)
		*s = (char)toupper((unsigned char)*s);
}

/* Lower-case and drop one trailing dot: "API.X.internal." -> "api.x.internal". */
static void
policy_host_norm(char *h)
{
	size_t	 n;

	policy_lower(h);
	n = strlen(h);
	if (n > 1 && h[n - 1] == '.')
		h[n - 1] = '\0';
}

static int
policy_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort and de-duplicate a malloc'd array of malloc'd strings. */
static void
policy_strset(char **v, size_t *n)
{
	size_t	 o = 0;

	if (*n == 0)
		return;
	qsort(v, *n, sizeof(*v), policy_strcmp);
	for (size_t i = 0; i < *n; i++) {
		if (o > 0 && strcmp(v[o - 1], v[i]) == 0) {
			free(v[i]);
			continue;
		}
		v[o++] = v[i];
	}
	*n = o;
}

/* Total order on packed bytes: the tie-break that makes sorting stable. */
static int
policy_msgcmp(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
	size_t	 la = protobuf_c_message_get_packed_size(a);
	size_t	 lb = protobuf_c_message_get_packed_size(b);
	uint8_t	*ba = xmalloc(la), *bb = xmalloc(lb);
	int	 r;

	protobuf_c_message_pack(a, ba);
	protobuf_c_message_pack(b, bb);
	r = memcmp(ba, bb, la < lb ? la : lb);
	if (r == 0)
		r = la < lb ? -1 : la > lb;
	free(ba);
	free(bb);
	return r;
}

static int
policy_rulecmp(const void *a, const void *b)
{
	const Sbx__V1__AllowRule	*ra = *(Sbx__V1__AllowRule *const *)a;
	const Sbx__V1__AllowRule	*rb = *(Sbx__V1__AllowRule *const *)b;
	int				 r = strcmp(ra->host, rb->host);

	return r != 0 ? r : policy_msgcmp(&ra->base, &rb->base);
}

static int
policy_inputcmp(const void *a, const void *b)
{
	const Sbx__V1__Input	*ia = *(Sbx__V1__Input *const *)a;
	const Sbx__V1__Input	*ib = *(Sbx__V1__Input *const *)b;

	return strcmp(ia->dataset, ib->dataset);
}

static int
policy_credcmp(const void *a, const void *b)
{
	const Sbx__V1__Credential	*ca = *(Sbx__V1__Credential *const *)a;
	const Sbx__V1__Credential	*cb = *(Sbx__V1__Credential *const *)b;
	int				 r;

	if ((r = strcmp(ca->host, cb->host)) != 0)
		return r;
	if ((r = strcmp(ca->header, cb->header)) != 0)
		return r;
	return policy_msgcmp(&ca->base, &cb->base);
}

/* Sort an array of messages and drop exact duplicates. */
static void
policy_msgset(void **v, size_t *n, int (*cmp)(const void *, const void *))
{
	size_t	 o = 0;

	if (*n == 0)
		return;
	qsort(v, *n, sizeof(*v), cmp);
	for (size_t i = 0; i < *n; i++) {
		if (o > 0 && policy_msgcmp(v[o - 1], v[i]) == 0) {
			protobuf_c_message_free_unpacked(v[i], NULL);
			continue;
		}
		v[o++] = v[i];
	}
	*n = o;
}

void
policy_normalize(Sbx__V1__Policy *p)
{
	Sbx__V1__Network	*net;
	Sbx__V1__Outputs	*out;

	policy_fill(p);
	net = p->network;
	out = p->outputs;
	if (strcmp(net->default_action, "deny") != 0) {
		free(net->default_action);
		net->default_action = xstrdup("deny");
	}
	for (size_t i = 0; i < net->n_allow; i++) {
		Sbx__V1__AllowRule	*r = net->allow[i];

		policy_host_norm(r->host);
		for (size_t j = 0; j < r->n_methods; j++)
			policy_upper(r->methods[j]);
		policy_strset(r->methods, &r->n_methods);
		policy_strset(r->paths, &r->n_paths);
		for (size_t j = 0; j < r->n_cidrs; j++)
			policy_lower(r->cidrs[j]);
		policy_strset(r->cidrs, &r->n_cidrs);
	}
	policy_msgset((void **)net->allow, &net->n_allow, policy_rulecmp);
	policy_msgset((void **)p->inputs, &p->n_inputs, policy_inputcmp);
	for (size_t i = 0; i < p->n_credentials; i++)
		policy_host_norm(p->credentials[i]->host);
	policy_msgset((void **)p->credentials, &p->n_credentials,
	    policy_credcmp);
	for (size_t i = 0; i < out->n_allowed_types; i++)
		policy_lower(out->allowed_types[i]);
	policy_strset(out->allowed_types, &out->n_allowed_types);
}

int
policy_canonical(const Sbx__V1__Policy *p, uint8_t **buf, size_t *len)
{
	Sbx__V1__Policy	*c;

	if ((c = policy_dup(p)) == NULL)
		return -1;
	policy_normalize(c);
	*len = sbx__v1__policy__get_packed_size(c);
	*buf = xmalloc(*len);
	if (sbx__v1__policy__pack(c, *buf) != *len) {
		free(*buf);
		*buf = NULL;
		policy_free(c);
		return -1;
	}
	policy_free(c);
	return 0;
}

/*
 * policy_canonical() without its copy, for a policy the caller owns and
 * may change: p itself is normalised, then packed.  The bytes are those
 * policy_canonical() gives for p as passed in (it normalises a faithful
 * copy the same way); p is left normalised, so it says what the bytes
 * say.  A second normalisation is not always a no-op ("a.." loses one
 * dot per pass), which is why this normalises rather than just packs.
 */
int
policy_canonical_in_place(Sbx__V1__Policy *p, uint8_t **buf, size_t *len)
{
	policy_normalize(p);
	*len = sbx__v1__policy__get_packed_size(p);
	*buf = xmalloc(*len + 1);
	if (sbx__v1__policy__pack(p, *buf) != *len) {
		free(*buf);
		*buf = NULL;
		return -1;
	}
	return 0;
}

/* A malloc'd policy from its packed bytes, strings and sub-messages
 * filled as policy_dup() leaves them; NULL if the bytes do not decode. */
Sbx__V1__Policy *
policy_unpack(const uint8_t *buf, size_t len)
{
	Sbx__V1__Policy	*c;

	if ((c = sbx__v1__policy__unpack(NULL, len, buf)) == NULL)
		return NULL;
	policy_fill(c);
	return c;
}

int
policy_hash(const Sbx__V1__Policy *p, char hex[POLICY_HASH_HEX])
{
	unsigned char	 md[crypto_hash_sha256_BYTES];
	uint8_t		*buf;
	size_t		 len;

	if (policy_canonical(p, &buf, &len) == -1)
		return -1;
	sha256_buf(buf, len, md);
	free(buf);
	hex_encode(md, sizeof(md), hex);
	return 0;
}

const char *
policy_isolation_name(Sbx__V1__Isolation i)
{
	switch (i) {
	case SBX__V1__ISOLATION__ISOLATION_CONTAINER:
		return "container";
	case SBX__V1__ISOLATION__ISOLATION_GVISOR:
		return "gvisor";
	case SBX__V1__ISOLATION__ISOLATION_MICROVM:
		return "microvm";
	default:
		return "unspecified";
	}
}

const char *
policy_destination_name(Sbx__V1__Destination d)
{
	switch (d) {
	case SBX__V1__DESTINATION__DESTINATION_AGENT:
		return "agent";
	case SBX__V1__DESTINATION__DESTINATION_USER:
		return "user";
	case SBX__V1__DESTINATION__DESTINATION_STORAGE_BUCKET:
		return "storage-bucket";
	default:
		return "unspecified";
	}
}

/* ---- subset ---- */

static int
policy_has(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return 1;
	return 0;
}

static uint32_t
policy_dflt(uint32_t v, uint32_t dflt)
{
	return v != 0 ? v : dflt;
}

static int
policy_why(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
policy_why(char *why, size_t whylen, const char *fmt, ...)
{
	va_list	 ap;

	va_start(ap, fmt);
	verrf(why, whylen, fmt, ap);
	va_end(ap);
	return 0;
}

/* 1 if narrow's rule grants nothing wide's rule does not. */
static int
policy_rule_subset(const Sbx__V1__AllowRule *n, const Sbx__V1__AllowRule *w,
    char *why, size_t whylen)
{
	for (size_t i = 0; i < n->n_methods; i++)
		if (!policy_has(w->methods, w->n_methods, n->methods[i]))
			return policy_why(why, whylen, "network.allow[%s]: "
			    "method %s is not allowed by the wider policy",
			    n->host, n->methods[i]);
	if (w->n_paths > 0 && n->n_paths == 0)
		return policy_why(why, whylen, "network.allow[%s]: any path "
		    "is allowed, the wider policy restricts paths", n->host);
	for (size_t i = 0; i < n->n_paths && w->n_paths > 0; i++) {
		int	 ok = 0;

		for (size_t j = 0; j < w->n_paths && !ok; j++)
			ok = strncmp(n->paths[i], w->paths[j],
			    strlen(w->paths[j])) == 0;
		if (!ok)
			return policy_why(why, whylen, "network.allow[%s]: "
			    "path %s is outside the wider policy's paths",
			    n->host, n->paths[i]);
	}
	if (policy_dflt(n->max_request_kb, POLICY_DEFAULT_MAX_REQUEST_KB) >
	    policy_dflt(w->max_request_kb, POLICY_DEFAULT_MAX_REQUEST_KB))
		return policy_why(why, whylen, "network.allow[%s]: "
		    "max_request_kb is larger", n->host);
	if (policy_dflt(n->max_response_kb, POLICY_DEFAULT_MAX_RESPONSE_KB) >
	    policy_dflt(w->max_response_kb, POLICY_DEFAULT_MAX_RESPONSE_KB))
		return policy_why(why, whylen, "network.allow[%s]: "
		    "max_response_kb is larger", n->host);
	for (size_t i = 0; i < n->n_cidrs; i++)
		if (!policy_has(w->cidrs, w->n_cidrs, n->cidrs[i]))
			return policy_why(why, whylen, "network.allow[%s]: "
			    "cidr %s is not allowed by the wider policy",
			    n->host, n->cidrs[i]);
	if (n->port != w->port)
		return policy_why(why, whylen, "network.allow[%s]: port %u "
		    "differs from the wider policy's %u", n->host, n->port,
		    w->port);
	return 1;
}

static int
policy_subset_norm(const Sbx__V1__Policy *n, const Sbx__V1__Policy *w,
    char *why, size_t whylen)
{
	const Sbx__V1__Limits	*nl = n->limits, *wl = w->limits;
	const Sbx__V1__Outputs	*no = n->outputs, *wo = w->outputs;
	int			 anyds = 0;

	if (strcmp(n->name, w->name) != 0)
		return policy_why(why, whylen, "policy: name %s differs from "
		    "%s", n->name, w->name);
	if (n->version != w->version)
		return policy_why(why, whylen, "version: %u differs from %u",
		    n->version, w->version);
	if (n->isolation != w->isolation)
		return policy_why(why, whylen, "isolation: %s differs from %s",
		    policy_isolation_name(n->isolation),
		    policy_isolation_name(w->isolation));
	if (strcmp(n->image, w->image) != 0)
		return policy_why(why, whylen, "image: %s differs from %s",
		    n->image, w->image);
#define LIMIT(f) \
	if (nl->f > wl->f) \
		return policy_why(why, whylen, "limits." #f ": %u is larger " \
		    "than %u", nl->f, wl->f)
	LIMIT(cpus_milli);
	LIMIT(memory_mb);
	LIMIT(pids);
	LIMIT(wall_seconds);
	LIMIT(scratch_mb);
#undef LIMIT
	for (size_t i = 0; i < w->n_inputs; i++)
		if (strcmp(w->inputs[i]->dataset, "${task.dataset_ref}") == 0)
			anyds = 1;
	for (size_t i = 0; i < n->n_inputs && !anyds; i++) {
		int	 ok = 0;

		for (size_t j = 0; j < w->n_inputs && !ok; j++)
			ok = strcmp(n->inputs[i]->dataset,
			    w->inputs[j]->dataset) == 0;
		if (!ok)
			return policy_why(why, whylen, "inputs: dataset %s is "
			    "not in the wider policy", n->inputs[i]->dataset);
	}
	if (strcmp(n->network->default_action, w->network->default_action))
		return policy_why(why, whylen, "network.default: %s differs "
		    "from %s", n->network->default_action,
		    w->network->default_action);
	for (size_t i = 0; i < n->network->n_allow; i++) {
		const Sbx__V1__AllowRule	*nr = n->network->allow[i];
		const Sbx__V1__AllowRule	*wr = NULL;

		for (size_t j = 0; j < w->network->n_allow && wr == NULL; j++)
			if (strcmp(w->network->allow[j]->host, nr->host) == 0)
				wr = w->network->allow[j];
		if (wr == NULL)
			return policy_why(why, whylen, "network.allow[%s]: "
			    "host is not allowed by the wider policy",
			    nr->host);
		if (!policy_rule_subset(nr, wr, why, whylen))
			return 0;
	}
	if (policy_dflt(n->network->max_out_kb, POLICY_DEFAULT_MAX_OUT_KB) >
	    policy_dflt(w->network->max_out_kb, POLICY_DEFAULT_MAX_OUT_KB))
		return policy_why(why, whylen, "network.max_out_kb: %u is "
		    "larger than %u", policy_dflt(n->network->max_out_kb,
		    POLICY_DEFAULT_MAX_OUT_KB), policy_dflt(
		    w->network->max_out_kb, POLICY_DEFAULT_MAX_OUT_KB));
	for (size_t i = 0; i < n->n_credentials; i++) {
		const Sbx__V1__Credential	*nc = n->credentials[i];
		int				 ok = 0;

		for (size_t j = 0; j < w->n_credentials && !ok; j++) {
			const Sbx__V1__Credential	*wc = w->credentials[j];

			ok = strcmp(nc->host, wc->host) == 0 &&
			    strcmp(nc->secret, wc->secret) == 0 &&
			    strcmp(nc->header, wc->header) == 0 &&
			    nc->kind == wc->kind;
			/* Plain http is a widening of https: the secret
			 * may then cross the network in clear. */
			if (ok && nc->scheme ==
			    SBX__V1__CREDENTIAL_SCHEME__CREDENTIAL_SCHEME_HTTP &&
			    wc->scheme !=
			    SBX__V1__CREDENTIAL_SCHEME__CREDENTIAL_SCHEME_HTTP)
				return policy_why(why, whylen, "credentials[%s "
				    "%s]: scheme http, the wider policy sends "
				    "it over https only", nc->host, nc->header);
		}
		if (!ok)
			return policy_why(why, whylen, "credentials[%s %s]: "
			    "binding of secret %s is not in the wider policy",
			    nc->host, nc->header, nc->secret);
	}
	for (size_t i = 0; i < no->n_allowed_types; i++)
		if (!policy_has(wo->allowed_types, wo->n_allowed_types,
		    no->allowed_types[i]))
			return policy_why(why, whylen, "outputs.allowed_types: "
			    "%s is not in the wider policy",
			    no->allowed_types[i]);
	if (no->max_total_kb > wo->max_total_kb)
		return policy_why(why, whylen, "outputs.max_total_kb: %u is "
		    "larger than %u", no->max_total_kb, wo->max_total_kb);
	if (policy_dflt(no->max_file_kb, no->max_total_kb) >
	    policy_dflt(wo->max_file_kb, wo->max_total_kb))
		return policy_why(why, whylen, "outputs.max_file_kb: larger "
		    "than the wider policy's");
	if (policy_dflt(no->max_text_kb, POLICY_DEFAULT_MAX_TEXT_KB) >
	    policy_dflt(wo->max_text_kb, POLICY_DEFAULT_MAX_TEXT_KB))
		return policy_why(why, whylen, "outputs.max_text_kb: larger "
		    "than the wider policy's");
	if (no->oversize != wo->oversize)
		return policy_why(why, whylen, "outputs.oversize differs from "
		    "the wider policy's");
	if (no->destination != wo->destination)
		return policy_why(why, whylen, "outputs.destination: %s "
		    "differs from %s", policy_destination_name(no->destination),
		    policy_destination_name(wo->destination));
	if (no->remote_links == SBX__V1__REMOTE_LINKS__REMOTE_LINKS_KEEP &&
	    wo->remote_links != SBX__V1__REMOTE_LINKS__REMOTE_LINKS_KEEP)
		return policy_why(why, whylen, "outputs.remote_links: keep, "
		    "the wider policy neutralises them");
	if (no->csv_formulas == SBX__V1__CSV_FORMULAS__CSV_FORMULAS_FLAG &&
	    wo->csv_formulas != SBX__V1__CSV_FORMULAS__CSV_FORMULAS_FLAG)
		return policy_why(why, whylen, "outputs.csv_formulas: flag, "
		    "the wider policy neutralises them");
#define OCAP(f, dflt, key) \
	if (policy_dflt(no->f, dflt) > policy_dflt(wo->f, dflt)) \
		return policy_why(why, whylen, "outputs." key ": %u is larger " \
		    "than %u", policy_dflt(no->f, dflt), policy_dflt(wo->f, dflt))
	OCAP(archive_max_expanded_mb, POLICY_DEFAULT_ARCHIVE_EXPANDED_MB,
	    "archives.max_expanded_mb");
	OCAP(archive_max_ratio, POLICY_DEFAULT_ARCHIVE_RATIO,
	    "archives.max_ratio");
	OCAP(archive_max_entries, POLICY_DEFAULT_ARCHIVE_ENTRIES,
	    "archives.max_entries");
	OCAP(archive_max_nesting, POLICY_DEFAULT_ARCHIVE_NESTING,
	    "archives.max_nesting");
	OCAP(image_max_side, POLICY_DEFAULT_IMAGE_SIDE, "images.max_side");
	OCAP(image_max_pixels, POLICY_DEFAULT_IMAGE_PIXELS,
	    "images.max_pixels");
#undef OCAP
	if (n->executions_per_task > w->executions_per_task)
		return policy_why(why, whylen, "executions_per_task: %u is "
		    "larger than %u", n->executions_per_task,
		    w->executions_per_task);
	policy_why(why, whylen, "subset");
	return 1;
}

int
policy_is_subset(const Sbx__V1__Policy *narrow, const Sbx__V1__Policy *wide,
    char *why, size_t whylen)
{
	Sbx__V1__Policy	*n, *w;
	int		 r;

	/* Compare normalised copies, so case and order never matter. */
	n = policy_dup(narrow);
	w = policy_dup(wide);
	if (n == NULL || w == NULL) {
		policy_free(n);
		policy_free(w);
		return policy_why(why, whylen, "policy cannot be encoded");
	}
	policy_normalize(n);
	policy_normalize(w);
	r = policy_subset_norm(n, w, why, whylen);
	policy_free(n);
	policy_free(w);
	return r;
}

const char *
capability_status_name(int status)
{
	switch (status) {
	case SBX__V1__CAPABILITY_STATUS__CAPABILITY_GRANTED:
		return "granted";
	case SBX__V1__CAPABILITY_STATUS__CAPABILITY_PENDING:
		return "pending";
	case SBX__V1__CAPABILITY_STATUS__CAPABILITY_APPROVED:
		return "approved";
	case SBX__V1__CAPABILITY_STATUS__CAPABILITY_DENIED:
		return "denied";
	default:
		return "unspecified";
	}
}

int
policy_path_match(const char *prefix, const char *path, size_t plen)
{
	size_t	 n = strlen(prefix);

	if (n == 0 || n > plen || strncmp(path, prefix, n) != 0)
		return 0;
	return prefix[n - 1] == '/' || n == plen || path[n] == '/';
}
