/* SPDX-License-Identifier: MIT */
/*
 * https_client.c - fuzz_https_server's real TLS client (https_client.h):
 * an OpenSSL SSL between two memory BIOs, pumped through the socket by
 * the calling fiber. Sending copies the output BIO's bytes out and empties
 * it before the send parks, so that a reader adding to it meanwhile (an
 * alert) never sees its bytes moved; they go with the next send.
 */
#define _GNU_SOURCE
#include "https_client.h"

#include <errno.h>
#include <openssl/err.h>
#include <runtime.h>
#include <runtime_tls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RAW_READ 4096 /* one socket read */

static const char *const suites13[] = {
	"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
};
static const char *const suites12[] = {
	"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384",
	"ECDHE-ECDSA-CHACHA20-POLY1305",
};

static bool set_version(SSL *ssl, const struct fuzz_client_opts *o)
{
	int v = o->tls12 ? TLS1_2_VERSION : TLS1_3_VERSION;

	if (!SSL_set_min_proto_version(ssl, v) || !SSL_set_max_proto_version(ssl, v))
		return false;
	if (o->suite > 2)
		return true;
	return o->tls12 ? SSL_set_cipher_list(ssl, suites12[o->suite]) == 1
	                : SSL_set_ciphersuites(ssl, suites13[o->suite]) == 1;
}

/* A copy of sess, to resume: SSL_free marks the SSL's session unresumable
 * when the connection ends without close_notify, and the caller's must
 * stay as it is for the next input. */
static bool offer(SSL *ssl, SSL_SESSION *sess)
{
	SSL_SESSION *copy = SSL_SESSION_dup(sess);
	bool ok = copy && SSL_set_session(ssl, copy);

	SSL_SESSION_free(copy); /* the SSL holds its own reference */
	return ok;
}

int fuzz_client_init(struct fuzz_client *c, SSL_CTX *ctx, int fd, const struct fuzz_client_opts *o)
{
	*c = (struct fuzz_client){ .fd = fd };
	if (!(c->ssl = SSL_new(ctx)) || !(c->in = BIO_new(BIO_s_mem())) ||
	    !(c->out = BIO_new(BIO_s_mem()))) {
		BIO_free(c->in);
		SSL_free(c->ssl);
		return -1;
	}
	SSL_set_bio(c->ssl, c->in, c->out); /* the SSL owns both now */
	SSL_set_connect_state(c->ssl);
	if (!set_version(c->ssl, o) || (o->sni && !SSL_set_tlsext_host_name(c->ssl, o->sni)) ||
	    (o->alpn && SSL_set_alpn_protos(c->ssl, o->alpn, o->alpn_len) != 0) ||
	    (o->resume && !offer(c->ssl, o->resume))) {
		fuzz_client_free(c);
		return -1;
	}
	return 0;
}

void fuzz_client_free(struct fuzz_client *c)
{
	SSL_free(c->ssl); /* and its BIOs */
	c->ssl = NULL;
	ERR_clear_error();
}

/* OpenSSL's reason for the last failure, into c->why. */
static int failed(struct fuzz_client *c, const char *doing)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	snprintf(c->why, sizeof(c->why), "%s: %s", doing, r ? r : "no reason given");
	ERR_clear_error();
	return -EPROTO;
}

int fuzz_client_flush(struct fuzz_client *c)
{
	char *data, *copy;
	long n;

	while (!c->send_err && (n = BIO_get_mem_data(c->out, &data)) > 0) {
		if (!(copy = malloc((size_t)n)))
			return c->send_err = -ENOMEM;
		memcpy(copy, data, (size_t)n);
		(void)BIO_reset(c->out);
		ssize_t rc = runtime_send_all(c->fd, copy, (size_t)n, NULL);
		free(copy);
		if (rc < 0)
			c->send_err = (int)rc;
	}
	return c->send_err;
}

/* Bytes from the socket into the input BIO: 0, or the end (-ECONNRESET
 * and EOF as -ECONNABORTED) or the socket's -errno. */
static int feed(struct fuzz_client *c)
{
	char raw[RAW_READ];
	ssize_t n = runtime_read(c->fd, raw, sizeof(raw));

	if (n > 0)
		return BIO_write(c->in, raw, (int)n) == (int)n ? 0 : -ENOMEM;
	return n == 0 || n == -ECONNRESET ? -ECONNABORTED : (int)n;
}

int fuzz_client_handshake(struct fuzz_client *c)
{
	for (;;) {
		ERR_clear_error();
		int r = SSL_do_handshake(c->ssl);
		int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
		if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ)
			return failed(c, "handshake");
		int rc = fuzz_client_flush(c); /* our flight */
		if (rc == 0 && e == SSL_ERROR_WANT_READ)
			rc = feed(c);
		if (rc < 0 || e == SSL_ERROR_NONE) {
			if (rc < 0)
				snprintf(c->why, sizeof(c->why), "handshake: the socket: %s", strerror(-rc));
			return rc;
		}
	}
}

int fuzz_client_write(struct fuzz_client *c, const void *p, size_t n)
{
	size_t done;

	if (c->closed || c->send_err || !n)
		return c->send_err;
	ERR_clear_error();
	if (!SSL_write_ex(c->ssl, p, n, &done) || done != n)
		return failed(c, "write"); /* a memory BIO takes everything */
	return fuzz_client_flush(c);
}

int fuzz_client_raw(struct fuzz_client *c, const void *p, size_t n)
{
	if (c->send_err || !n)
		return c->send_err;
	c->broke = true;
	if (fuzz_client_flush(c) == 0) {
		ssize_t rc = runtime_send_all(c->fd, p, n, NULL);
		c->send_err = rc < 0 ? (int)rc : 0;
	}
	return c->send_err;
}

int fuzz_client_rekey(struct fuzz_client *c)
{
	if (c->closed || c->send_err)
		return c->send_err;
	ERR_clear_error();
	if (SSL_version(c->ssl) == TLS1_3_VERSION) {
		if (!SSL_key_update(c->ssl, SSL_KEY_UPDATE_REQUESTED) || SSL_do_handshake(c->ssl) != 1)
			return failed(c, "key update");
	} else {
		c->broke = true; /* the server has renegotiation off */
		if (!SSL_renegotiate(c->ssl))
			return failed(c, "renegotiate");
		(void)SSL_do_handshake(c->ssl); /* the ClientHello; the answer is read */
		c->closed = true; /* mid-handshake: no more plaintext */
	}
	ERR_clear_error();
	return fuzz_client_flush(c);
}

int fuzz_client_close_notify(struct fuzz_client *c)
{
	if (c->closed || c->send_err)
		return c->send_err;
	c->closed = true;
	ERR_clear_error();
	(void)SSL_shutdown(c->ssl); /* 0: sent, the server's not come yet */
	ERR_clear_error();
	return fuzz_client_flush(c);
}

ssize_t fuzz_client_read(struct fuzz_client *c, void *buf, size_t cap)
{
	for (;;) {
		size_t got = 0;
		ERR_clear_error();
		if (SSL_read_ex(c->ssl, buf, cap, &got))
			return (ssize_t)got;
		int e = SSL_get_error(c->ssl, 0);
		if (e == SSL_ERROR_ZERO_RETURN) {
			c->clean_end = true;
			return 0;
		}
		if (e != SSL_ERROR_WANT_READ)
			return failed(c, "read");
		int rc = feed(c);
		if (rc < 0)
			return rc == -ECONNABORTED ? 0 : rc;
	}
}
