/* SPDX-License-Identifier: MIT */
/*
 * https_client.c - fuzz_https_server's real TLS client (https_client.h):
 * an OpenSSL SSL between two memory BIOs, pumped through the socket by
 * the calling fiber. Sending copies the output BIO's bytes out and empties
 * it before the send parks, so that a reader adding to it meanwhile (an
 * alert) never sees its bytes moved; they go with the next send. In TLS
 * 1.3 it may seal its records itself (tls/record.c), from the secret the
 * key log gave: https_client.h.
 */
#define _GNU_SOURCE
#include "https_client.h"
#include "record.h"  /* tls/: runtime__rec_*, compiled into the target */

#include <errno.h>
#include <openssl/err.h>
#include <runtime.h>
#include <runtime_tls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RAW_READ 4096 /* one socket read */

/* The client's write direction once it seals its records. */
struct fuzz_sealer {
	const struct rec_suite *suite;
	struct rec_dir wr;
	uint8_t rec[REC_MAX];        /* the record being sent */
};

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

static int hex_value(char c)
{
	return c >= '0' && c <= '9' ? c - '0'
	     : c >= 'a' && c <= 'f' ? c - 'a' + 10
	     : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* "CLIENT_TRAFFIC_SECRET_0 <client random> <secret>" (NSS's key log
 * format): the secret, into the client's; the other lines are not ours. */
static void keylog(const SSL *ssl, const char *line)
{
	static const char label[] = "CLIENT_TRAFFIC_SECRET_0 ";
	struct fuzz_client *c = SSL_get_app_data(ssl);
	const char *hex;
	size_t len;

	if (!c || strncmp(line, label, sizeof(label) - 1) != 0 ||
	    !(hex = strchr(line + sizeof(label) - 1, ' ')))
		return;
	len = strlen(++hex);
	c->secret_len = 0;
	if (len % 2 || len / 2 > sizeof(c->secret))
		return;
	for (size_t i = 0; i < len / 2; i++) {
		int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return;
		c->secret[i] = (uint8_t)(hi << 4 | lo);
	}
	c->secret_len = len / 2;
}

void fuzz_client_ctx_init(SSL_CTX *ctx)
{
	SSL_CTX_set_keylog_callback(ctx, keylog);
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
	SSL_set_app_data(c->ssl, c);        /* for the key log */
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
	if (c->sealer) {
		runtime__rec_dir_wipe(&c->sealer->wr);
		free(c->sealer);
		c->sealer = NULL;
	}
	OPENSSL_cleanse(c->secret, sizeof(c->secret));
	c->secret_len = 0;
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

	if (c->sealer) { /* OpenSSL's keys are not the server's any more */
		(void)BIO_reset(c->out);
		return c->send_err;
	}
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

/* ------------------------------------------------ sealing (TLS 1.3) */

static const struct rec_suite *suite_of(const struct fuzz_client *c)
{
	const SSL_CIPHER *ci = c->ssl ? SSL_get_current_cipher(c->ssl) : NULL;

	return ci ? runtime__rec_suite_of(SSL_CIPHER_get_protocol_id(ci)) : NULL;
}

bool fuzz_client_can_seal(const struct fuzz_client *c)
{
	const struct rec_suite *s = suite_of(c);

	return s && SSL_version(c->ssl) == TLS1_3_VERSION && c->secret_len == s->hash_len;
}

static int seal_failed(struct fuzz_client *c, const char *what)
{
	snprintf(c->why, sizeof(c->why), "seal: %s", what);
	return -EPROTO;
}

/* The write direction taken from OpenSSL: its KeyUpdate out (the last
 * record it writes), then ours from the generation after it, at 0. */
static int take_over(struct fuzz_client *c)
{
	const struct rec_suite *suite = suite_of(c);
	struct fuzz_sealer *s;
	bool ok;
	int rc;

	if (!fuzz_client_can_seal(c))
		return seal_failed(c, "no TLS 1.3 secret from the key log");
	ERR_clear_error();
	if (!SSL_key_update(c->ssl, SSL_KEY_UPDATE_NOT_REQUESTED) || SSL_do_handshake(c->ssl) != 1)
		return failed(c, "key update");
	c->updates++;
	if ((rc = fuzz_client_flush(c)) < 0)
		return rc;
	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	s->suite = suite;
	c->sealer = s;
	ok = runtime__rec_dir_set(&s->wr, suite, c->secret);
	for (unsigned i = 0; ok && i < c->updates; i++)
		ok = runtime__rec_dir_update(&s->wr, suite);
	return ok ? 0 : seal_failed(c, "the keys");
}

/* One record of type with content p[0..n) sealed (the keys move on after
 * it if rekey) and sent. */
static int send_sealed(struct fuzz_client *c, uint8_t type, const void *p, size_t n, bool rekey)
{
	struct fuzz_sealer *s = c->sealer;
	struct iovec iov = { (void *)p, n };
	ssize_t m = runtime__rec_seal(&s->wr, s->suite, type, &iov, 1, n, s->rec);

	if (m < 0)
		return seal_failed(c, strerror((int)-m));
	if (rekey && !runtime__rec_dir_update(&s->wr, s->suite))
		return seal_failed(c, "the next keys");
	ssize_t rc = runtime_send_all(c->fd, s->rec, (size_t)m, NULL);
	if (rc < 0)
		c->send_err = (int)rc;
	return c->send_err;
}

int fuzz_client_seal(struct fuzz_client *c, const uint8_t *inner, size_t n, unsigned flags)
{
	int rc;

	if (c->closed || c->send_err || !n)
		return c->send_err;
	if (!c->sealer && (rc = take_over(c)) < 0)
		return rc;
	if (flags & FUZZ_SEAL_BROKE)
		c->broke = true; /* before the server can answer it */
	if (flags & FUZZ_SEAL_CLOSE)
		c->closed = true;
	/* the inner plaintext whole: all but its last byte as the content */
	return send_sealed(c, inner[n - 1], inner, n - 1, flags & FUZZ_SEAL_REKEY);
}

/* ------------------------------------------------------------ sending */

int fuzz_client_write(struct fuzz_client *c, const void *p, size_t n)
{
	size_t done;
	int rc;

	if (c->closed || c->send_err || !n)
		return c->send_err;
	for (size_t off = 0; c->sealer && off < n; off += done) {
		done = n - off < REC_PLAIN_MAX ? n - off : REC_PLAIN_MAX;
		if ((rc = send_sealed(c, REC_APPLICATION_DATA, (const char *)p + off, done, false)) < 0)
			return rc;
	}
	if (c->sealer)
		return 0;
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
	static const uint8_t update[5] = { 24, 0, 0, 1, 1 }; /* KeyUpdate, update_requested */

	if (c->closed || c->send_err)
		return c->send_err;
	if (c->sealer)
		return send_sealed(c, REC_HANDSHAKE, update, sizeof(update), true);
	ERR_clear_error();
	if (SSL_version(c->ssl) == TLS1_3_VERSION) {
		if (!SSL_key_update(c->ssl, SSL_KEY_UPDATE_REQUESTED) || SSL_do_handshake(c->ssl) != 1)
			return failed(c, "key update");
		c->updates++; /* OpenSSL's write keys moved on */
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
	static const uint8_t close_notify[2] = { 1, REC_ALERT_CLOSE_NOTIFY };

	if (c->closed || c->send_err)
		return c->send_err;
	c->closed = true;
	if (c->sealer)
		return send_sealed(c, REC_ALERT, close_notify, sizeof(close_notify), false);
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
