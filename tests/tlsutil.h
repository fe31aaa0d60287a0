/* SPDX-License-Identifier: MIT */
/*
 * tlsutil.h - certificates for the TLS tests, made when the tests run
 * (never committed): a CA, and leaves it signs for given names and
 * validity, as PEM text in memory. EC P-256 keys: quick to make.
 */
#ifndef TLSUTIL_H
#define TLSUTIL_H

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

struct pem {
	char *cert, *key;  /* PEM text, NUL-terminated (free both) */
	X509 *x509;        /* to sign others with (a CA) */
	EVP_PKEY *pkey;
};

static inline char *tls_pem_of(int (*write)(BIO *, void *), void *obj)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out;
	long n;

	if (!b || !write(b, obj)) {
		BIO_free(b);
		return NULL;
	}
	n = BIO_get_mem_data(b, &data);
	out = malloc((size_t)n + 1);
	memcpy(out, data, (size_t)n);
	out[n] = '\0';
	BIO_free(b);
	return out;
}

static inline int tls_write_cert(BIO *b, void *x)
{
	return PEM_write_bio_X509(b, x);
}

static inline int tls_write_key(BIO *b, void *k)
{
	return PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
}

static inline void tls_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509V3_set_ctx(&v3, issuer ? issuer : x, x, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
}

/*
 * A certificate for cn, valid from now + from_s to now + to_s seconds:
 * a CA if ca is NULL (self-signed, CA:TRUE), else a leaf that ca signs,
 * with san (e.g. "DNS:a.test,IP:127.0.0.1") as subjectAltName.
 */
static inline struct pem tls_make_cert(const struct pem *ca, const char *cn, const char *san,
                                       long from_s, long to_s)
{
	static long serial = 1;
	struct pem p = { 0 };
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();

	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
	X509_gmtime_adj(X509_getm_notBefore(x), from_s);
	X509_gmtime_adj(X509_getm_notAfter(x), to_s);
	X509_set_pubkey(x, key);
	X509_NAME *name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_issuer_name(x, ca ? X509_get_subject_name(ca->x509) : name);
	if (!ca) {
		tls_ext(x, NULL, NID_basic_constraints, "critical,CA:TRUE");
		tls_ext(x, NULL, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else {
		tls_ext(x, ca->x509, NID_basic_constraints, "CA:FALSE");
		if (san)
			tls_ext(x, ca->x509, NID_subject_alt_name, san);
	}
	X509_sign(x, ca ? ca->pkey : key, EVP_sha256());
	p.cert = tls_pem_of(tls_write_cert, x);
	p.key = tls_pem_of(tls_write_key, key);
	p.x509 = x;
	p.pkey = key;
	return p;
}

static inline void tls_free_cert(struct pem *p)
{
	free(p->cert);
	free(p->key);
	X509_free(p->x509);
	EVP_PKEY_free(p->pkey);
	memset(p, 0, sizeof(*p));
}

/* Write text to a file in dir (a CA bundle for ca_file); the path is
 * static storage. */
static inline const char *tls_write_file(const char *dir, const char *name, const char *text)
{
	static char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return NULL;
	fputs(text, f);
	fclose(f);
	return path;
}

#endif
