/*
 * brokerd.h: brokerd's structures and the prototypes of its modules.
 * brokerd keeps the secrets that egressd injects into requests: sealed in
 * SQLite under a master key, released only to egressd's uid and only for
 * a (task, host, secret, header) binding that a valid, unexpired policy
 * signed by policyd carries.  The invariant everything here serves: a
 * secret's value exists in plaintext only in sodium_malloc memory, for as
 * long as one reply takes, and never reaches a log, an audit record or a
 * file.
 *
 * Module prefixes carry a "b" (bstore_, bcontrol_, bparse_) so libbrokerd
 * links beside policyd's store_ and control_ in the unit tests.
 */
#ifndef SBX_BROKERD_H
#define SBX_BROKERD_H

#include <sys/types.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "peer.h"
#include "sign.h"

#include "sbx/v1/envelope.pb-c.h"
#include "sbx/v1/policy.pb-c.h"

#define BROKERD_CONF_DEFAULT	"/etc/sbx/brokerd.yaml"
#define BROKERD_DB		"brokerd.db"
#define BROKERD_KEY_BYTES	32	/* the master key */
#define BROKERD_VALUE_MAX	(64 * 1024)	/* a secret's value */
#define BROKERD_MINT_TTL	900	/* default cap on a token's life */

/* Rule ids of refusals (Error.rule and the audit record's rule). */
#define RULE_PEER		"peer-not-allowed"
#define RULE_SIGNATURE		"signature-invalid"
#define RULE_EXPIRED		"policy-expired"
#define RULE_NOT_BOUND		"credential-not-bound"
#define RULE_UNKNOWN		"secret-unknown"
#define RULE_KIND		"kind-mismatch"
#define RULE_UNREADABLE		"secret-unreadable"
#define RULE_BAD_REQUEST	"bad-request"

struct event_base;
struct frame_conn;
struct ucred;
struct yerrs;
struct audit;

/* ---- parse.c ---- */

struct brokerd_conf {
	struct cfg_common	 common;	/* file, user, state_dir, ... */
	char			*master_key;	/* default state_dir/master.key */
	char			*policy_public_key;
	char			*policy_public_key_previous;
	uint32_t		 mint_ttl;	/* seconds */
	struct cfg_sock		 credential;
	struct cfg_sock		 admin;
};

/* The keys of brokerd.yaml, for the skeleton (daemon.h) and cfg_parse. */
extern const struct cfg_table bparse_table;

/* ---- store.c ---- */

struct bstore;

/* A value opened from the store: value is sodium_malloc'd, len bytes
 * plus a NUL (so a static value can be used as a string). */
struct bsecret {
	Sbx__V1__CredentialKind	 kind;
	unsigned char		*value;
	size_t			 len;
};

/*
 * Create the master key file: 32 random bytes, mode 0400, never
 * replacing a file.  0 or -1 with err.
 */
int		 bstore_key_create(const char *path, char *err, size_t errlen);
/*
 * Load the master key into read-only sodium_malloc memory.  Refused,
 * with a sentence in err, if it is not a regular file, is a symbolic
 * link, is readable, writable or executable by group or others, is not
 * owned by uid `owner`, or is not exactly 32 bytes.
 */
unsigned char	*bstore_key_load(const char *path, uid_t owner, char *err,
		    size_t errlen);
void		 bstore_key_free(unsigned char *);

/* Open (creating) the database; the store takes the key. */
struct bstore	*bstore_open(const char *path, unsigned char *key,
		    char *err, size_t errlen);
void		 bstore_close(struct bstore *);
struct sqlite3	*bstore_db(struct bstore *);
/* The audit log, in the same database. */
struct audit	*bstore_audit(struct bstore *);
/* Seal and write (replacing) one secret.  Inside an audit_begin()
 * transaction when the caller wants it audited in the same commit.
 * 0 or -1 with err. */
int		 bstore_put(struct bstore *, const char *name,
		    Sbx__V1__CredentialKind, const unsigned char *value,
		    size_t len, char *err, size_t errlen);
/* 1 with *out filled, 0 if there is no such secret, -1 with err when it
 * cannot be read or does not open (a changed or moved row). */
int		 bstore_get(struct bstore *, const char *name,
		    struct bsecret *out, char *err, size_t errlen);
void		 bsecret_clear(struct bsecret *);
/* Sorted names; free with bstore_names_free. */
int		 bstore_names(struct bstore *, char ***names, size_t *n);
void		 bstore_names_free(char **, size_t);
/* Check a value for a secret of this kind (a static value must be a
 * valid header value; a minted one is a 32-byte seed or empty).  0 or -1
 * with err. */
int		 bstore_value_ok(Sbx__V1__CredentialKind,
		    const unsigned char *, size_t, char *err, size_t errlen);

/* ---- mint.c ---- */

struct mint_claims {
	char	*aud;		/* host */
	char	*sub;		/* task id */
	char	*exe;		/* execution id */
	char	*kid;		/* key id of the signing key */
	int64_t	 iat;
	int64_t	 exp;
};

/*
 * When a token minted now for grant g expires: no later than the grant,
 * no later than now + the policy's wall_seconds (the execution cannot
 * outlive that) and no later than now + ttl.
 */
int64_t		 mint_expiry(const Sbx__V1__PolicyGrant *, int64_t now,
		    uint32_t ttl);
/* The public key of a minting seed (for operators and verifiers). */
void		 mint_public(const unsigned char seed[32],
		    unsigned char pk[32]);
/*
 * A JWT (RFC 7519) signed with EdDSA (RFC 8037) by the key of seed:
 * header {alg: EdDSA, typ: JWT, kid}, claims {aud, sub, exe, iat, exp}.
 * *out is "Bearer <token>", NUL-terminated, in sodium_malloc memory
 * (free with sodium_free); *outlen its length.  0 or -1 with err.
 */
int		 mint_token(const unsigned char seed[32], const char *aud,
		    const char *sub, const char *exe, int64_t iat,
		    int64_t exp, unsigned char **out, size_t *outlen,
		    char *err, size_t errlen);
/*
 * Verify a token (with or without "Bearer ") under pk at time now: the
 * signature, the header, and exp > now.  0 with claims filled (free with
 * mint_claims_clear), -1 with err.
 */
int		 mint_verify(const unsigned char pk[32], const char *token,
		    int64_t now, struct mint_claims *, char *err,
		    size_t errlen);
void		 mint_claims_clear(struct mint_claims *);

/* ---- control.c ---- */

struct brokerd_metrics {
	uint64_t	 granted;
	uint64_t	 minted;
	uint64_t	 refused;
	uint64_t	 peers_refused;
	uint64_t	 puts;
};

struct brokerd {
	struct brokerd_conf	*conf;
	struct sign_trust	 trust;		/* policyd's public keys */
	unsigned char		*key;		/* the master key, until the
						 * store takes it */
	struct bstore		*store;
	struct event_base	*base;
	struct brokerd_metrics	 metrics;
};

/* The outcome of a credential request, before it is audited and sent. */
struct bcontrol_answer {
	const char		*rule;		/* NULL: granted */
	Sbx__V1__ErrorCode	 code;
	char			 msg[512];
	/* What the audit record names (never the value). */
	char			 task_id[129];
	char			 execution_id[129];
	char			 policy_hash[65];
	Sbx__V1__CredentialKind	 kind;
	/* Granted: the header value in sodium_malloc memory. */
	unsigned char		*value;
	size_t			 len;
	int64_t			 expires_at;
};

/*
 * Decide a credential request at time now: verify the signed policy,
 * find the (host, secret, header) binding, open the secret, mint when
 * it is minted.  Pure but for reading the store; the answer's value is
 * freed with bcontrol_answer_clear.
 */
void		 bcontrol_decide(struct brokerd *,
		    const Sbx__V1__CredentialRequest *, int64_t now,
		    struct bcontrol_answer *);
void		 bcontrol_answer_clear(struct bcontrol_answer *);
/*
 * The credential of g's policy bound to exactly (host, secret, header)
 * (header compared without case, as HTTP does), or NULL with a sentence
 * in why saying which part does not match.
 */
const Sbx__V1__Credential *bcontrol_binding(const Sbx__V1__PolicyGrant *,
		    const char *host, const char *secret, const char *header,
		    char *why, size_t whylen);
/* The frame handlers of the credential and admin sockets (arg: the
 * struct brokerd), and the audit of a peer refused at either. */
void		 bcontrol_credential_socket(struct frame_conn *,
		    Sbx__V1__Envelope *, void *);
void		 bcontrol_admin_socket(struct frame_conn *,
		    Sbx__V1__Envelope *, void *);
void		 bcontrol_refused_peer(void *, const char *sock,
		    const struct ucred *, const char *why);
/* Prometheus text (malloc'd). */
char		*bcontrol_metrics(const struct brokerd *);

#endif
