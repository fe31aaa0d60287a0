/* SPDX-License-Identifier: MIT */
/*
 * certs.c - certificates and keys into a context: PEM from a file or from
 * memory through one path (a BIO either way). Each goes into an SSL_CTX
 * of its own with the context's settings (context.c), for SNI, but the
 * first, which goes into the context's own once a trial load in a spare
 * one has shown it loads (a failed load leaves the context as it was).
 */
#include "tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509err.h>
#include <stdlib.h>

/* PEM text to read: a file, or memory with RUNTIME_TLS_PEM. */
static BIO *pem_source(const char *what, unsigned flags, int *rc)
{
	BIO *b;

	errno = 0;
	b = flags & RUNTIME_TLS_PEM ? BIO_new_mem_buf(what, -1) : BIO_new_file(what, "r");
	if (!b) {
		*rc = errno && !(flags & RUNTIME_TLS_PEM) ? -errno : -ENOMEM;
		runtime__tls_config_error(what);
	}
	return b;
}

/* A read of PEM objects ended: at the end of the text (fine), or on bad
 * text. */
static bool pem_ended_cleanly(void)
{
	unsigned long e = ERR_peek_last_error();
	bool clean = ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;

	if (clean)
		ERR_clear_error();
	return clean;
}

/* The leaf, then the chain after it. 0 or -errno. */
static int load_chain(SSL_CTX *ctx, BIO *b)
{
	X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);

	if (!x || !SSL_CTX_use_certificate(ctx, x)) {
		X509_free(x);
		runtime__tls_config_error("the certificate");
		return -EPROTO;
	}
	X509_free(x); /* the context holds its own reference */
	while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
		if (!SSL_CTX_add0_chain_cert(ctx, x)) {
			X509_free(x);
			runtime__tls_config_error("the certificate chain");
			return -ENOMEM;
		}
	}
	if (!pem_ended_cleanly()) {
		runtime__tls_config_error("the certificate chain");
		return -EPROTO;
	}
	return 0;
}

/* The key refused for not being the certificate's (OpenSSL checks it as
 * the key goes in, or in SSL_CTX_check_private_key). */
static bool key_mismatch(void)
{
	unsigned long e = ERR_peek_last_error();

	return ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH;
}

/* OpenSSL's passphrase callback: none is ever asked for (OpenSSL's own
 * would prompt on the terminal and wait); *asked says a key wanted one. */
static int no_passphrase(char *buf, int size, int rwflag, void *asked)
{
	(void)buf, (void)size, (void)rwflag;
	*(bool *)asked = true;
	return -1;
}

static int load_key(SSL_CTX *ctx, BIO *b)
{
	bool asked = false;
	EVP_PKEY *key = PEM_read_bio_PrivateKey(b, NULL, no_passphrase, &asked);
	int ok = key && SSL_CTX_use_PrivateKey(ctx, key) && SSL_CTX_check_private_key(ctx);

	EVP_PKEY_free(key);
	if (ok)
		return 0;
	if (key && key_mismatch()) {
		runtime__tls_config_error("the private key does not match the certificate");
		return -EKEYREJECTED;
	}
	runtime__tls_config_error(asked ? "the private key is encrypted (decrypt it first: "
	                                  "no passphrase is asked for)"
	                                : "the private key");
	return -EPROTO;
}

/* cert and key into ctx: 0 or -errno. */
static int load_pair(SSL_CTX *ctx, const char *cert, const char *key, unsigned flags)
{
	int rc = 0;
	BIO *b = pem_source(cert, flags, &rc);

	if (!b)
		return rc;
	rc = load_chain(ctx, b);
	BIO_free(b);
	if (rc < 0 || !(b = pem_source(key, flags, &rc)))
		return rc;
	rc = load_key(ctx, b);
	BIO_free(b);
	return rc;
}

/* The pair loaded in a new SSL_CTX alike (a failure there leaves the
 * context as it was); the first goes into the context's own instead, once
 * it is known to load (what the caller set on it with runtime_tls_ssl_ctx
 * stays). NULL on failure (*rc). */
static SSL_CTX *ctx_with_pair(struct runtime_tls *t, const char *cert, const char *key,
                              unsigned flags, int *rc)
{
	SSL_CTX *ctx = runtime__tls_new_ctx(t, rc);

	if (ctx && (*rc = load_pair(ctx, cert, key, flags)) < 0) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (ctx && t->ncerts == 0) {
		SSL_CTX_free(ctx);
		ctx = (*rc = load_pair(t->ctx, cert, key, flags)) < 0 ? NULL : t->ctx;
	}
	return ctx;
}

int runtime_tls_add_cert(struct runtime_tls *t, const char *cert, const char *key, unsigned flags)
{
	int rc = 0;

	runtime__tls_config_error_clear();
	if (!t || !cert || !key || (flags & ~RUNTIME_TLS_PEM))
		return -EINVAL;
	if (t->side == RUNTIME_TLS_CLIENT && t->ncerts)
		return -EEXIST; /* a client presents one */
	struct tls_cert *certs = realloc(t->certs, (t->ncerts + 1) * sizeof(*certs));
	if (!certs)
		return -ENOMEM;
	t->certs = certs;
	SSL_CTX *ctx = ctx_with_pair(t, cert, key, flags, &rc);
	if (!ctx)
		return rc;
	certs[t->ncerts++] = (struct tls_cert){ .ctx = ctx, .leaf = SSL_CTX_get0_certificate(ctx) };
	return 0;
}
