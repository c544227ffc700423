/*
 * ca.c: one certificate authority per execution, for CONNECT
 * interception.  Its EC P-256 key is made in egressd's memory when the
 * channel opens and freed when it closes: it is never written anywhere,
 * so a certificate minted for one task is worthless to every other.  The
 * CA certificate (public part) is what launchd-sbx mounts into the
 * sandbox as the only trusted bundle.  Leaf certificates (one per host,
 * cached for the channel's life) are minted on demand with the host as
 * the only subjectAltName.  All crypto is OpenSSL's.
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "util.h"
#include "egressd.h"

#define CA_DAYS		2
#define CA_LEAVES_MAX	64

struct ca_leaf {
	char		*host;
	SSL_CTX		*ctx;
};

struct ca {
	EVP_PKEY	*key;		/* the CA's and every leaf's key */
	X509		*cert;
	char		*pem;
	size_t		 pemlen;
	struct ca_leaf	 leaves[CA_LEAVES_MAX];
	size_t		 nleaves;
};

static int
ca_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX	 ctx;
	X509_EXTENSION	*ext;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
	if ((ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value)) == NULL)
		return -1;
	if (X509_add_ext(cert, ext, -1) != 1) {
		X509_EXTENSION_free(ext);
		return -1;
	}
	X509_EXTENSION_free(ext);
	return 0;
}

static X509 *
ca_cert_new(const char *cn, long back, long days)
{
	X509		*x;
	X509_NAME	*name;
	unsigned char	 serial[16];
	BIGNUM		*bn;

	if ((x = X509_new()) == NULL)
		return NULL;
	X509_set_version(x, 2);
	if (RAND_bytes(serial, sizeof(serial)) != 1) {
		X509_free(x);
		return NULL;
	}
	serial[0] &= 0x7f;
	bn = BN_bin2bn(serial, sizeof(serial), NULL);
	BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
	BN_free(bn);
	X509_gmtime_adj(X509_getm_notBefore(x), -back);
	X509_gmtime_adj(X509_getm_notAfter(x), days * 86400);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
	    (const unsigned char *)"sbx egressd", -1, -1, 0);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	    (const unsigned char *)cn, -1, -1, 0);
	return x;
}

struct ca *
ca_new(const char *execution_id, char *err, size_t errlen)
{
	struct ca	*ca;
	BIO		*bio = NULL;
	char		 cn[64], *data;
	long		 n;

	ca = xcalloc(1, sizeof(*ca));
	if ((ca->key = EVP_EC_gen("P-256")) == NULL)
		goto fail;
	snprintf(cn, sizeof(cn), "sbx task CA %.40s", execution_id);
	if ((ca->cert = ca_cert_new(cn, 300, CA_DAYS)) == NULL)
		goto fail;
	X509_set_issuer_name(ca->cert, X509_get_subject_name(ca->cert));
	X509_set_pubkey(ca->cert, ca->key);
	if (ca_ext(ca->cert, ca->cert, NID_basic_constraints,
	    "critical,CA:TRUE,pathlen:0") == -1 ||
	    ca_ext(ca->cert, ca->cert, NID_key_usage,
	    "critical,keyCertSign,cRLSign") == -1 ||
	    ca_ext(ca->cert, ca->cert, NID_subject_key_identifier,
	    "hash") == -1)
		goto fail;
	if (X509_sign(ca->cert, ca->key, EVP_sha256()) == 0)
		goto fail;
	if ((bio = BIO_new(BIO_s_mem())) == NULL ||
	    PEM_write_bio_X509(bio, ca->cert) != 1)
		goto fail;
	n = BIO_get_mem_data(bio, &data);
	ca->pem = xmalloc((size_t)n + 1);
	memcpy(ca->pem, data, (size_t)n);
	ca->pem[n] = '\0';
	ca->pemlen = (size_t)n;
	BIO_free(bio);
	return ca;
fail:
	snprintf(err, errlen, "cannot create the task CA: %s",
	    ERR_reason_error_string(ERR_get_error()) != NULL ?
	    ERR_reason_error_string(ERR_get_error()) : "OpenSSL error");
	BIO_free(bio);
	ca_free(ca);
	return NULL;
}

void
ca_free(struct ca *ca)
{
	if (ca == NULL)
		return;
	for (size_t i = 0; i < ca->nleaves; i++) {
		free(ca->leaves[i].host);
		SSL_CTX_free(ca->leaves[i].ctx);
	}
	X509_free(ca->cert);
	EVP_PKEY_free(ca->key);
	free(ca->pem);
	free(ca);
}

const char *
ca_cert_pem(const struct ca *ca, size_t *lenp)
{
	*lenp = ca->pemlen;
	return ca->pem;
}

static SSL_CTX *
ca_mint(struct ca *ca, const char *host, int ip)
{
	X509		*x;
	SSL_CTX		*ctx = NULL;
	char		 san[DECIDE_HOST_MAX + 8];

	if ((x = ca_cert_new(host, 300, CA_DAYS)) == NULL)
		return NULL;
	X509_set_issuer_name(x, X509_get_subject_name(ca->cert));
	X509_set_pubkey(x, ca->key);
	snprintf(san, sizeof(san), "%s:%s", ip ? "IP" : "DNS", host);
	if (ca_ext(x, ca->cert, NID_subject_alt_name, san) == -1 ||
	    ca_ext(x, ca->cert, NID_basic_constraints, "critical,CA:FALSE")
	    == -1 ||
	    ca_ext(x, ca->cert, NID_key_usage,
	    "critical,digitalSignature") == -1 ||
	    ca_ext(x, ca->cert, NID_ext_key_usage, "serverAuth") == -1 ||
	    ca_ext(x, ca->cert, NID_authority_key_identifier,
	    "keyid:always") == -1 ||
	    X509_sign(x, ca->key, EVP_sha256()) == 0)
		goto out;
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL)
		goto out;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_clear_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (SSL_CTX_use_certificate(ctx, x) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, ca->key) != 1) {
		SSL_CTX_free(ctx);
		ctx = NULL;
	}
out:
	X509_free(x);
	return ctx;
}

SSL_CTX *
ca_leaf_ctx(struct ca *ca, const char *host)
{
	SSL_CTX		*ctx;
	int		 ip = strchr(host, ':') != NULL ||
			    strspn(host, "0123456789.") == strlen(host);

	for (size_t i = 0; i < ca->nleaves; i++)
		if (strcmp(ca->leaves[i].host, host) == 0)
			return ca->leaves[i].ctx;
	if ((ctx = ca_mint(ca, host, ip)) == NULL)
		return NULL;
	if (ca->nleaves == CA_LEAVES_MAX) {
		/* A task that names this many hosts gets fresh leaves;
		 * the oldest goes. */
		free(ca->leaves[0].host);
		SSL_CTX_free(ca->leaves[0].ctx);
		memmove(&ca->leaves[0], &ca->leaves[1],
		    (CA_LEAVES_MAX - 1) * sizeof(ca->leaves[0]));
		ca->nleaves--;
	}
	ca->leaves[ca->nleaves].host = xstrdup(host);
	ca->leaves[ca->nleaves].ctx = ctx;
	ca->nleaves++;
	return ctx;
}
