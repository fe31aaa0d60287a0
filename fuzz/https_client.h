/* SPDX-License-Identifier: MIT */
/*
 * https_client.h - the real TLS client of fuzz/fuzz_https_server.c:
 * OpenSSL over memory BIOs, its network bytes carried over a socket by the
 * caller's fibers (runtime_read, runtime_send_all). OpenSSL never waits
 * and never sees the socket, so the harness decides what goes out between
 * records: plaintext, raw bytes, a key update, a renegotiation, a
 * close_notify at any point.
 *
 * One fiber may write (handshake, write, raw, key update, close) while
 * another reads: their OpenSSL calls never overlap, as no call here parks
 * inside one. What reading makes OpenSSL send (an alert, a key update's
 * answer) goes out with the writer's next call, or fuzz_client_flush.
 * Fiber context, the socket's core.
 *
 * TLS 1.3: the client may take its write direction over from OpenSSL
 * (fuzz_client_seal) and seal records itself with tls/record.c, so that
 * the harness chooses their inner plaintext (type, padding, content). Its
 * CLIENT_TRAFFIC_SECRET_0 comes from the key log (fuzz_client_ctx_init);
 * at the takeover OpenSSL sends a KeyUpdate (not requested) and the
 * client goes on with the next generation at sequence 0, counting the
 * KeyUpdates OpenSSL sent before, so that its sequence numbers are
 * exact. From then on every write is sealed here: plaintext as
 * application data, a key update as a sealed KeyUpdate asking for the
 * server's, close_notify as a sealed alert. OpenSSL keeps the read
 * direction; what it would send later (an alert when the server's stream
 * broke) is dropped: its keys are stale.
 */
#ifndef FUZZ_HTTPS_CLIENT_H
#define FUZZ_HTTPS_CLIENT_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fuzz_sealer;                  /* https_client.c: its write keys */

struct fuzz_client_opts {
	bool tls12;                  /* TLS 1.2 only, else TLS 1.3 only */
	unsigned suite;              /* 0..2: one cipher suite; 3: OpenSSL's list */
	const char *sni;             /* NULL: none */
	const unsigned char *alpn;   /* ALPN, wire format; NULL: none */
	unsigned alpn_len;
	SSL_SESSION *resume;         /* offered for resumption; NULL: none */
};

struct fuzz_client {
	SSL *ssl;
	BIO *in, *out;               /* the server's bytes; ours, to send */
	int fd;
	bool broke;                  /* it broke the protocol (raw bytes, a
	                                renegotiation): the server may refuse */
	bool closed;                 /* close_notify sent: no more plaintext */
	bool clean_end;              /* the server's close_notify came */
	int send_err;                /* sticky: the socket refused our bytes */
	char why[160];               /* why the handshake or a read failed */
	uint8_t secret[48];          /* CLIENT_TRAFFIC_SECRET_0 (key log) */
	size_t secret_len;           /* 0: none logged */
	unsigned updates;            /* KeyUpdates OpenSSL sent since */
	struct fuzz_sealer *sealer;  /* once the client seals its records */
};

/* Flags of fuzz_client_seal: what the record is to the protocol. */
enum {
	FUZZ_SEAL_REKEY = 1,         /* it ends a KeyUpdate: our keys move on */
	FUZZ_SEAL_CLOSE = 2,         /* a close_notify: no plaintext after it */
	FUZZ_SEAL_BROKE = 4,         /* it breaks the protocol (sets c->broke) */
};

/* The key log callback on ctx, which the clients' SSLs come from. */
void fuzz_client_ctx_init(SSL_CTX *ctx);

/* A client on fd (the caller's end of the connection) from ctx. 0, or -1
 * (OpenSSL refused a setting: a bug of the harness's). */
int fuzz_client_init(struct fuzz_client *c, SSL_CTX *ctx, int fd, const struct fuzz_client_opts *o);
void fuzz_client_free(struct fuzz_client *c);

/* The whole handshake. 0, or -errno (c->why says why): -EPROTO OpenSSL
 * failed it (the server's alert included), else the socket's. */
int fuzz_client_handshake(struct fuzz_client *c);

/* Sending: 0, or -errno of the socket (sticky: the server closed, or the
 * deadline). Plaintext after close_notify is dropped (0). */
int fuzz_client_write(struct fuzz_client *c, const void *p, size_t n);
int fuzz_client_raw(struct fuzz_client *c, const void *p, size_t n);
/* TLS 1.3: a KeyUpdate asking the server to update too; TLS 1.2: a
 * renegotiation's ClientHello (refused by the server: c->broke). */
int fuzz_client_rekey(struct fuzz_client *c);
int fuzz_client_close_notify(struct fuzz_client *c);
/* What OpenSSL made while reading, if anything (dropped once the client
 * seals its records). */
int fuzz_client_flush(struct fuzz_client *c);

/* After a TLS 1.3 handshake: whether the key log gave the secret of the
 * agreed suite (else fuzz_client_seal cannot work: a harness bug). */
bool fuzz_client_can_seal(const struct fuzz_client *c);
/* TLS 1.3: one record whose inner plaintext (RFC 8446 5.2: content, type,
 * zero padding) is inner[0..n), 1 <= n <= 2^14 + 256 - 16, sealed under
 * the client's write keys (taken over from OpenSSL the first time), then
 * what flags say. 0 (dropped after close_notify), or -errno: -EPROTO
 * OpenSSL or the sealing failed (c->why), else the socket's. */
int fuzz_client_seal(struct fuzz_client *c, const uint8_t *inner, size_t n, unsigned flags);

/* The server's plaintext into buf: > 0 bytes; 0 at the end of its stream
 * (c->clean_end: with close_notify, or not); -EPROTO the stream broke
 * (c->why), or the socket's -errno (-ETIMEDOUT: the deadline). */
ssize_t fuzz_client_read(struct fuzz_client *c, void *buf, size_t cap);

#endif
