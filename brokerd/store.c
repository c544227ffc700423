/*
 * store.c: brokerd's secret store.  Each secret is one SQLite row holding
 * its name, kind, a fresh random nonce and the value sealed with
 * XChaCha20-Poly1305 (libsodium's AEAD) under the master key.  The name
 * and kind are the associated data, so a sealed value copied to another
 * row, or a kind changed in the table, no longer opens: the database file
 * can be read by anyone and still tells them nothing but the names.
 *
 * Invariant: plaintext exists only in sodium_malloc memory (the master key
 * read-only, values for the length of one reply) and is wiped before that
 * memory is released; no plaintext is ever bound to an SQL statement.
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>
#include <sqlite3.h>

#include "audit.h"
#include "keyfile.h"
#include "log.h"
#include "util.h"
#include "brokerd/brokerd.h"

#define BSTORE_AD_PREFIX	"sbx.brokerd.v1"

struct bstore {
	sqlite3		*db;
	struct audit	*audit;
	unsigned char	*key;		/* sodium_malloc'd, read-only */
};

static const char bstore_schema[] =
	"CREATE TABLE IF NOT EXISTS secrets ("
	"  name TEXT PRIMARY KEY NOT NULL,"
	"  kind INTEGER NOT NULL,"
	"  nonce BLOB NOT NULL,"
	"  sealed BLOB NOT NULL,"
	"  updated_ns INTEGER NOT NULL"
	");";

/* ---- the master key ---- */

int
bstore_key_create(const char *path, char *err, size_t errlen)
{
	unsigned char	*key;
	int		 fd, rc = -1;

	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium could not be initialised");
		return -1;
	}
	if ((key = sodium_malloc(BROKERD_KEY_BYTES)) == NULL) {
		snprintf(err, errlen, "cannot allocate secure memory for the "
		    "master key");
		return -1;
	}
	randombytes_buf(key, BROKERD_KEY_BYTES);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC |
	    O_NOCTTY, 0400);
	if (fd == -1) {
		snprintf(err, errlen, errno == EEXIST ? "master key %s already "
		    "exists; refusing to overwrite it" : "cannot create master "
		    "key %s: %s", path, strerror(errno));
		goto done;
	}
	/* The umask must not decide who can read the key. */
	if (fchmod(fd, 0400) == -1 ||
	    write_all(fd, key, BROKERD_KEY_BYTES) == -1 ||
	    fsync(fd) == -1) {
		snprintf(err, errlen, "cannot write master key %s: %s", path,
		    strerror(errno));
		close(fd);
		unlink(path);
		goto done;
	}
	if (close(fd) == -1) {
		snprintf(err, errlen, "cannot write master key %s: %s", path,
		    strerror(errno));
		unlink(path);
		goto done;
	}
	rc = 0;
done:
	sodium_free(key);
	return rc;
}

unsigned char *
bstore_key_load(const char *path, uid_t owner, char *err, size_t errlen)
{
	const struct keyfile kf = {
		.what = "master key", .path = path, .len = BROKERD_KEY_BYTES,
		.owner = owner, .owner_name = "brokerd's user",
		.fix = "refusing to use it: chmod 0400 it (and consider the "
		    "secrets it sealed exposed)",
	};
	unsigned char	*key;

	if (sodium_init() < 0) {
		snprintf(err, errlen, "libsodium could not be initialised");
		return NULL;
	}
	if ((key = keyfile_read(&kf, err, errlen)) == NULL)
		return NULL;
	if (sodium_mprotect_readonly(key) == -1) {
		snprintf(err, errlen, "cannot protect the master key memory: "
		    "%s", strerror(errno));
		sodium_free(key);
		return NULL;
	}
	return key;
}

void
bstore_key_free(unsigned char *key)
{
	if (key != NULL)
		sodium_free(key);	/* wipes before unmapping */
}

/* ---- sealing ---- */

/* The associated data: what the sealed value must stay attached to. */
static char *
bstore_ad(const char *name, Sbx__V1__CredentialKind kind, size_t *len)
{
	char	*ad;
	int	 n;

	n = xasprintf(&ad, "%s\n%d\n%s", BSTORE_AD_PREFIX, (int)kind, name);
	*len = (size_t)n;
	return ad;
}

int
bstore_value_ok(Sbx__V1__CredentialKind kind, const unsigned char *v,
    size_t len, char *err, size_t errlen)
{
	size_t	 i;

	switch (kind) {
	case SBX__V1__CREDENTIAL_KIND__CREDENTIAL_STATIC:
		if (len == 0) {
			snprintf(err, errlen, "a static secret needs a value");
			return -1;
		}
		if (len > BROKERD_VALUE_MAX) {
			snprintf(err, errlen, "the value is %zu bytes; at "
			    "most %d", len, BROKERD_VALUE_MAX);
			return -1;
		}
		/* egressd puts the value into a header line: a CR or LF
		 * would let a value add headers of its own.  Say where,
		 * never what. */
		for (i = 0; i < len; i++) {
			if ((v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f) {
				snprintf(err, errlen, "the value has a control "
				    "character at byte %zu (a header value "
				    "cannot hold CR, LF or NUL)", i);
				return -1;
			}
		}
		return 0;
	case SBX__V1__CREDENTIAL_KIND__CREDENTIAL_MINTED:
		if (len != 0 && len != crypto_sign_SEEDBYTES) {
			snprintf(err, errlen, "a minted secret's value is a "
			    "%d-byte Ed25519 seed, or empty to have brokerd "
			    "generate one; got %zu bytes",
			    crypto_sign_SEEDBYTES, len);
			return -1;
		}
		return 0;
	default:
		snprintf(err, errlen, "unknown credential kind %d", (int)kind);
		return -1;
	}
}

/* ---- the database ---- */

struct bstore *
bstore_open(const char *path, unsigned char *key, char *err, size_t errlen)
{
	struct bstore	*s;
	char		*msg = NULL;

	s = xcalloc(1, sizeof(*s));
	s->key = key;
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "cannot open %s: %s", path,
		    s->db != NULL ? sqlite3_errmsg(s->db) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(s->db, 5000);
	/* Freed pages are zeroed: an overwritten sealed value leaves no
	 * copy behind (it is ciphertext, but there is no need for it). */
	if (sqlite3_exec(s->db, "PRAGMA secure_delete=ON", NULL, NULL,
	    &msg) != SQLITE_OK ||
	    sqlite3_exec(s->db, bstore_schema, NULL, NULL, &msg) !=
	    SQLITE_OK) {
		snprintf(err, errlen, "cannot create the secrets table in %s: "
		    "%s", path, msg != NULL ? msg : sqlite3_errmsg(s->db));
		sqlite3_free(msg);
		goto fail;
	}
	if ((s->audit = audit_open_db(s->db, "brokerd", err, errlen)) == NULL)
		goto fail;
	return s;
fail:
	s->key = NULL;		/* the caller still owns it */
	bstore_close(s);
	return NULL;
}

void
bstore_close(struct bstore *s)
{
	if (s == NULL)
		return;
	audit_close(s->audit);
	if (s->db != NULL)
		sqlite3_close(s->db);
	bstore_key_free(s->key);
	free(s);
}

struct sqlite3 *
bstore_db(struct bstore *s)
{
	return s->db;
}

struct audit *
bstore_audit(struct bstore *s)
{
	return s->audit;
}

int
bstore_put(struct bstore *s, const char *name, Sbx__V1__CredentialKind kind,
    const unsigned char *value, size_t len, char *err, size_t errlen)
{
	unsigned char	 nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
	unsigned char	*sealed;
	unsigned long long slen;
	sqlite3_stmt	*st = NULL;
	size_t		 adlen;
	char		*ad;
	int		 rc = -1;

	if (!name_ok(name)) {
		snprintf(err, errlen, "bad secret name \"%.128s\": want 1..128 "
		    "of [A-Za-z0-9._@:-]", name);
		return -1;
	}
	if (bstore_value_ok(kind, value, len, err, errlen) == -1)
		return -1;
	/* The sealed copy is ciphertext: ordinary memory will do. */
	sealed = xmalloc(len + crypto_aead_xchacha20poly1305_ietf_ABYTES);
	randombytes_buf(nonce, sizeof(nonce));
	ad = bstore_ad(name, kind, &adlen);
	crypto_aead_xchacha20poly1305_ietf_encrypt(sealed, &slen, value, len,
	    (const unsigned char *)ad, adlen, NULL, nonce, s->key);
	if (sqlite3_prepare_v2(s->db, "INSERT INTO secrets (name, kind, "
	    "nonce, sealed, updated_ns) VALUES (?1, ?2, ?3, ?4, ?5) ON "
	    "CONFLICT(name) DO UPDATE SET kind = ?2, nonce = ?3, sealed = ?4, "
	    "updated_ns = ?5", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC) != SQLITE_OK ||
	    sqlite3_bind_int(st, 2, (int)kind) != SQLITE_OK ||
	    sqlite3_bind_blob(st, 3, nonce, sizeof(nonce), SQLITE_STATIC) !=
	    SQLITE_OK ||
	    sqlite3_bind_blob(st, 4, sealed, (int)slen, SQLITE_STATIC) !=
	    SQLITE_OK ||
	    sqlite3_bind_int64(st, 5, now_ns()) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_DONE) {
		snprintf(err, errlen, "cannot store secret %s: %s", name,
		    sqlite3_errmsg(s->db));
		goto done;
	}
	rc = 0;
done:
	sqlite3_finalize(st);
	free(sealed);
	free(ad);
	return rc;
}

int
bstore_get(struct bstore *s, const char *name, struct bsecret *out,
    char *err, size_t errlen)
{
	sqlite3_stmt		*st = NULL;
	const unsigned char	*nonce, *sealed;
	unsigned long long	 vlen;
	size_t			 nlen, slen, adlen;
	char			*ad = NULL;
	int			 rc = -1, step;

	memset(out, 0, sizeof(*out));
	if (sqlite3_prepare_v2(s->db, "SELECT kind, nonce, sealed FROM "
	    "secrets WHERE name = ?1", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC) != SQLITE_OK) {
		snprintf(err, errlen, "cannot read secret %s: %s", name,
		    sqlite3_errmsg(s->db));
		goto done;
	}
	if ((step = sqlite3_step(st)) == SQLITE_DONE) {
		rc = 0;
		goto done;
	}
	if (step != SQLITE_ROW) {
		snprintf(err, errlen, "cannot read secret %s: %s", name,
		    sqlite3_errmsg(s->db));
		goto done;
	}
	out->kind = (Sbx__V1__CredentialKind)sqlite3_column_int(st, 0);
	nonce = sqlite3_column_blob(st, 1);
	nlen = (size_t)sqlite3_column_bytes(st, 1);
	sealed = sqlite3_column_blob(st, 2);
	slen = (size_t)sqlite3_column_bytes(st, 2);
	if (nonce == NULL || sealed == NULL ||
	    nlen != crypto_aead_xchacha20poly1305_ietf_NPUBBYTES ||
	    slen < crypto_aead_xchacha20poly1305_ietf_ABYTES ||
	    slen - crypto_aead_xchacha20poly1305_ietf_ABYTES >
	    BROKERD_VALUE_MAX) {
		snprintf(err, errlen, "secret %s: its row is damaged (nonce "
		    "%zu bytes, sealed value %zu bytes)", name, nlen, slen);
		goto done;
	}
	out->len = slen - crypto_aead_xchacha20poly1305_ietf_ABYTES;
	if ((out->value = sodium_malloc(out->len + 1)) == NULL) {
		snprintf(err, errlen, "cannot allocate secure memory for "
		    "secret %s", name);
		goto done;
	}
	ad = bstore_ad(name, out->kind, &adlen);
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(out->value, &vlen,
	    NULL, sealed, slen, (const unsigned char *)ad, adlen, nonce,
	    s->key) != 0 || vlen != out->len) {
		snprintf(err, errlen, "secret %s does not open under the "
		    "master key: its row was changed, or its sealed value "
		    "belongs to another name or kind", name);
		goto done;
	}
	out->value[out->len] = '\0';
	rc = 1;
done:
	if (rc != 1)
		bsecret_clear(out);
	sqlite3_finalize(st);
	free(ad);
	return rc;
}

void
bsecret_clear(struct bsecret *sec)
{
	if (sec->value != NULL)
		sodium_free(sec->value);	/* wipes first */
	memset(sec, 0, sizeof(*sec));
}

int
bstore_names(struct bstore *s, char ***names, size_t *n)
{
	sqlite3_stmt	*st = NULL;
	char		**v = NULL;
	size_t		  nv = 0;
	int		  step;

	*names = NULL;
	*n = 0;
	if (sqlite3_prepare_v2(s->db, "SELECT name FROM secrets ORDER BY "
	    "name", -1, &st, NULL) != SQLITE_OK)
		return -1;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		v = xreallocarray(v, nv + 1, sizeof(*v));
		v[nv++] = xstrdup((const char *)sqlite3_column_text(st, 0));
	}
	sqlite3_finalize(st);
	if (step != SQLITE_DONE) {
		bstore_names_free(v, nv);
		return -1;
	}
	*names = v;
	*n = nv;
	return 0;
}

void
bstore_names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}
