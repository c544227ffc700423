/*
 * policy.h: the policy as every daemon handles it: a protobuf-c
 * Sbx__V1__Policy.  Normalisation sorts and de-duplicates every set so the
 * same policy written in any order has one canonical encoding; the hash is
 * SHA-256 over that encoding (proto/README.md, "Canonical form").
 */
#ifndef SBX_POLICY_H
#define SBX_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/v1/capability.pb-c.h"
#include "sbx/v1/policy.pb-c.h"
#include "sbx/v1/task.pb-c.h"

struct yerrs;

#define POLICY_HASH_HEX		65	/* 64 hex digits and NUL */
#define POLICY_DEFAULT_MAX_REQUEST_KB	16
#define POLICY_DEFAULT_MAX_RESPONSE_KB	1024
#define POLICY_DEFAULT_MAX_OUT_KB	256
#define POLICY_DEFAULT_MAX_TEXT_KB	64
/* What gated holds archives and images to when a template says nothing
 * (outputs.archives, outputs.images; sbx-template(5)). */
#define POLICY_DEFAULT_ARCHIVE_EXPANDED_MB	64
#define POLICY_DEFAULT_ARCHIVE_RATIO		100
#define POLICY_DEFAULT_ARCHIVE_ENTRIES		10000
#define POLICY_DEFAULT_ARCHIVE_NESTING		0
#define POLICY_DEFAULT_IMAGE_SIDE		16384
#define POLICY_DEFAULT_IMAGE_PIXELS		67108864	/* 8192 x 8192 */

/* ---- policy.c ---- */

/* A policy with limits, network and outputs allocated; all heap memory
 * belongs to the policy and goes with policy_free(). */
Sbx__V1__Policy	*policy_new(void);
void		 policy_free(Sbx__V1__Policy *);
/* Deep copy (through pack/unpack); the copy is freed with policy_free(). */
Sbx__V1__Policy	*policy_dup(const Sbx__V1__Policy *);
/* Sort and de-duplicate: methods upper-cased, hosts lower-cased without a
 * trailing dot, rules by host, inputs by dataset, credentials by
 * (host, header), types, paths and cidrs sorted. */
void		 policy_normalize(Sbx__V1__Policy *);
/* Canonical encoding of a normalised copy; *buf is malloc'd. */
int		 policy_canonical(const Sbx__V1__Policy *, uint8_t **buf,
		    size_t *len);
/* policy_canonical's bytes for p, without a copy: normalises p itself. */
int		 policy_canonical_in_place(Sbx__V1__Policy *, uint8_t **buf,
		    size_t *len);
/* policy_dup of the policy packed in buf; NULL if it does not decode. */
Sbx__V1__Policy	*policy_unpack(const uint8_t *buf, size_t len);
/* Lower-case hex SHA-256 of the canonical encoding. 0 or -1. */
int		 policy_hash(const Sbx__V1__Policy *, char hex[POLICY_HASH_HEX]);
/*
 * 1 if every capability of `narrow` is also granted by `wide` (datasets
 * aside: `wide` may hold ${task.*} placeholders, see compile), 0 if not,
 * with a sentence in why.
 */
int		 policy_is_subset(const Sbx__V1__Policy *narrow,
		    const Sbx__V1__Policy *wide, char *why, size_t whylen);
const char	*policy_isolation_name(Sbx__V1__Isolation);
const char	*policy_destination_name(Sbx__V1__Destination);

/*
 * Whether a path rule's prefix allows path[0..plen) (the path without its
 * query), as egressd decides it and as the template diff judges a new
 * prefix: a prefix ending in "/" allows every path under it; any other
 * allows itself and what is under it ("/v1/rates" allows "/v1/rates" and
 * "/v1/rates/eur", not "/v1/ratesx").  Compared as written, undecoded.
 */
int		 policy_path_match(const char *prefix, const char *path,
		    size_t plen);

/* ---- policy_yaml.c ---- */

/* Parse a template in the reference text's shape.  Every error goes to
 * errs as "file:line:col: key: message"; NULL if there was any. */
Sbx__V1__Policy	*policy_parse_file(const char *path, struct yerrs *);
Sbx__V1__Policy	*policy_parse_buf(const char *name, const char *buf,
		    size_t len, struct yerrs *);
/* Render as YAML in the template's shape (malloc'd, NUL-terminated). */
char		*policy_to_yaml(const Sbx__V1__Policy *);

/* ---- policy_diff.c ---- */

struct policy_change {
	int	 widening;	/* 1: B grants something A did not */
	char	*text;		/* "+ network.allow: host api.x (new host)" */
};

/* Every capability B adds or removes relative to A, in field order. */
size_t	policy_diff(const Sbx__V1__Policy *a, const Sbx__V1__Policy *b,
	    struct policy_change **out);
void	policy_changes_free(struct policy_change *, size_t);

/* A capability request's status as a word: granted, pending, approved,
 * denied, or unspecified (policyd's audit, sbxctl, approvald and its
 * console say it alike). */
const char	*capability_status_name(int status);

#endif
