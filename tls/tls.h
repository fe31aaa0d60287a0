/* SPDX-License-Identifier: MIT */
/*
 * tls.h - what the TLS library's files share (never installed).
 * libruntime-tls is its own library, on libruntime's public calls alone:
 * a session is a connection layer (struct runtime_conn_layer,
 * runtime_toolkit.h) between a connection's calls and its socket, and
 * runtime_tls_serve makes its handshake runtime_serve's accept-time layer.
 * OpenSSL does the protocol and never touches the socket: a BIO of ours
 * hands it the bytes the connection read and takes what it writes
 * (session.c).
 *
 *   context.c  runtime_tls: SSL_CTX settings, certificates, SNI, ALPN
 *   certs.c    certificates and keys into a context
 *   resume.c   resumption: ticket keys (server), sessions by host (client)
 *   session.c  one connection: handshake, read, write, close_notify
 *   tls13.c    a TLS 1.3 server's connection after its handshake, on
 *              record.c's record protection instead of OpenSSL's SSL
 *   bio.c      the BIO under a session, and its output blocks
 *   idle.c     record buffers freed from sessions that wait long
 *   errors.c   OpenSSL's failures as -errno and as words
 */
#ifndef RUNTIME_TLS_INTERNAL_H
#define RUNTIME_TLS_INTERNAL_H

#include "config.h"

#include <runtime_tls.h>
#include <runtime_toolkit.h>

#include <openssl/ssl.h>
#include <stdatomic.h>

#include "record.h"
#include <stdbool.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))

struct tls_cert {
	SSL_CTX *ctx;               /* the settings, with this certificate */
	X509 *leaf;                 /* its names, for SNI (owned by ctx) */
};

struct tickets;
struct client_sessions;

struct runtime_tls {
	_Atomic unsigned refs;      /* the owner's, and one per session */
	int side;                   /* RUNTIME_TLS_SERVER or _CLIENT */
	SSL_CTX *ctx;               /* every SSL starts here: the first
	                               certificate's, and the ticket keys' */
	struct tls_cert *certs;     /* certs[0].ctx == ctx once one is added */
	unsigned ncerts;
	bool verify;                /* a client checks the server's certificate */
	int client_certs;           /* a server's RUNTIME_TLS_CLIENT_CERT_* */
	bool tls13_only;
	bool keep_ssl;              /* a server keeps OpenSSL's SSL (tls13.c) */
	char *ciphers, *ca_file;    /* copies, for each certificate's SSL_CTX */
	unsigned char *alpn;        /* wire format: length-prefixed names */
	size_t alpn_len;
	uint64_t handshake_timeout_ns;
	uint64_t ticket_rotation_ns;
	struct tickets *tickets;    /* NULL: no tickets (or a client) */
	struct client_sessions *sessions; /* a client's, to resume with */
	_Atomic uint64_t handshakes, resumed, failed; /* runtime_tls_stats: one
	                               add per handshake, against its 100 us */
};

/* What failed (errors.c). */
struct tls_failure {
	int err;                    /* -errno, 0: none */
	unsigned long ssl_err;      /* OpenSSL's code, 0: none */
	long verify;                /* X509_V_OK, or why verification failed */
	bool in_handshake;
};

/* ------------------------------------------------------ one connection */

#define OUT_BLOCK (64u * 1024)   /* encrypted bytes to send */
#define PLAIN_MAX (16u * 1024)   /* plaintext per SSL_write: one record */
#define FEED_SIZE 2048           /* one socket read, on the reader's stack */

struct out {
	char *buf;                   /* NULL: none held */
	size_t len;                  /* bytes in it */
	size_t off;                  /* of them, sent */
};

struct tls13;

struct tls_session {
	SSL *ssl;                    /* NULL once tls13.c took over */
	struct tls13 *v13;           /* tls13.c's state, or NULL */
	struct runtime_tls *tls;
	struct runtime_conn *conn;
	/* reading */
	const char *feed;            /* bytes just read, offered to OpenSSL */
	size_t feed_len;
	char *extra;                 /* feed bytes OpenSSL left, for later */
	size_t extra_len, extra_off;
	int raw_end;                 /* the socket's end: 1 EOF, < 0 its error */
	struct runtime_fiber *reader, *writer; /* in a call now */
	/* writing */
	struct out out[2];           /* fill out[fill]; a flush sends the other */
	uint8_t fill;
	bool flushing;
	struct runtime_fiber *flush_waiter;
	int write_err;               /* sticky: writing has ended */
	/* waiting for the peer (idle.c) */
	struct tls_session *prev, *next;
	unsigned waiting_since;      /* the core's tick when the wait began */
	bool waiting, buffers_freed;
	/* the rest */
	bool handshaken, sent_close;
	struct tls_failure failure;
	char *alpn, *host;
	const unsigned char *alpn_offer; /* a server's own list (wire format)
	                                    during its handshake, else NULL:
	                                    the context's */
	size_t alpn_offer_len;
	char *resume_key;            /* a client's: "host:port" */
	char *sni;                   /* a server's: the name the client asked for */
	const char *info_cipher;     /* kept as the SSL went (tls13.c) */
	bool info_resumed;
};

/* session.c: one SSL call, on the core's stack: its return value, *done
 * its bytes; output sent; a socket read's end or failure (n <= 0): 0 at
 * the end, else -errno, recorded; whether one more record fits the block. */
enum ssl_op { CALL_HANDSHAKE, CALL_READ, CALL_WRITE, CALL_SHUTDOWN };
int runtime__tls_ssl_call(struct tls_session *t, enum ssl_op op, const void *buf, size_t len,
                          size_t *done);
int runtime__tls_flush(struct tls_session *t);
int runtime__tls_read_end(struct tls_session *t, int n);
bool runtime__tls_room_for_record(const struct tls_session *t);

/* Where an iovec walk is: the iovec, and the bytes of it taken. */
struct tls_cursor {
	int i;
	size_t off;
};

/* tls13.c: a server session's record layer after a TLS 1.3 handshake.
 * prepare: before the handshake (false: no memory); keylog: OpenSSL's
 * key log callback; take: after it, the SSL freed if it can go (0, or
 * -errno: the connection fails). The rest stand in for the SSL calls. */
bool runtime__tls13_prepare(struct tls_session *t);
void runtime__tls13_keylog(const SSL *ssl, const char *line);
int runtime__tls13_take(struct tls_session *t);
void runtime__tls13_free(struct tls_session *t);
ssize_t runtime__tls13_read(struct tls_session *t, void *buf, size_t len);
ssize_t runtime__tls13_seal_records(struct tls_session *t, const struct iovec *iov, int iovcnt);
int runtime__tls13_close_notify(struct tls_session *t);
bool runtime__tls13_pending(const struct tls_session *t);
void runtime__tls13_idle(struct tls_session *t);

/* bio.c: the BIO that hands OpenSSL the session's bytes and takes its
 * output into blocks (NULL: no memory); a block back to the thread's
 * cache; what an SSL call left of the feed, kept (false: no memory). */
BIO_METHOD *runtime__tls_bio_method(void);
/* Room for need more bytes at the end of the filling block (got from the
 * cache if there is none): where, or NULL (no memory, or not that much
 * room left). The caller adds what it wrote to the block's len. */
uint8_t *runtime__tls_out_reserve(struct tls_session *t, size_t need);
void runtime__tls_block_put(struct out *o);
bool runtime__tls_keep_feed(struct tls_session *t);

/* idle.c: a session's reader begins and ends a wait for the peer's bytes;
 * a session that waits long has OpenSSL's record buffers freed, and so
 * does one whose connection waits with no fiber (free_buffers: those that
 * hold no bytes). */
void runtime__tls_wait_begin(struct tls_session *t);
void runtime__tls_wait_end(struct tls_session *t);
void runtime__tls_free_buffers(struct tls_session *t);

/* context.c */
void runtime__tls_unref(struct runtime_tls *tls);
/* An ALPN list ("h2,http/1.1") in wire format into out[cap]: its length,
 * or -EINVAL. */
#define ALPN_WIRE_MAX 256
ssize_t runtime__tls_alpn_encode(const char *list, unsigned char *out, size_t cap);

/* session.c: runtime_conn_tls_accept, offering alpn (wire format, NULL:
 * the context's list) instead of the context's. */
int runtime__tls_accept(struct runtime_conn *c, struct runtime_tls *tls,
                        const unsigned char *alpn, size_t alpn_len);
/* A new SSL_CTX with tls's settings (no certificate), or NULL (*rc). */
SSL_CTX *runtime__tls_new_ctx(struct runtime_tls *tls, int *rc);

/* resume.c: a server's keys for SSL_CTX_set_tlsext_ticket_key_evp_cb,
 * and a client's sessions by host. */
struct tickets *runtime__tickets_new(uint64_t rotation_ns);
void runtime__tickets_free(struct tickets *tk);
int runtime__tickets_cb(SSL *ssl, unsigned char *name, unsigned char *iv, EVP_CIPHER_CTX *ectx,
                        EVP_MAC_CTX *hctx, int enc);
SSL_TICKET_RETURN runtime__ticket_check(SSL *ssl, SSL_SESSION *sess, const unsigned char *key,
                                        size_t key_len, SSL_TICKET_STATUS status, void *arg);
struct client_sessions *runtime__client_sessions_new(void);
void runtime__client_sessions_free(struct client_sessions *cs);
int runtime__client_session_keep(struct client_sessions *cs, const char *host, SSL_SESSION *sess);
SSL_SESSION *runtime__client_session_take(struct client_sessions *cs, const char *host);
/* session.c: what a client SSL's session is kept under - "host:port" of
 * the server it was opened for (NULL: none). */
const char *runtime__tls_resume_key_of(SSL *ssl);

/* The failure of an SSL call that returned ssl_error (SSL_get_error),
 * from the thread's OpenSSL error queue (then cleared). raw_end: the
 * socket's end as the session saw it (1 EOF, < 0 an error, 0 open). */
void runtime__tls_failure(struct tls_failure *f, SSL *ssl, int ssl_error, int raw_end);
/* A failure found without OpenSSL: reason is one of its SSL library's
 * (SSL_R_*, or SSL_AD_REASON_OFFSET + a peer's alert). */
void runtime__tls_failure_reason(struct tls_failure *f, int reason);
int runtime__tls_failure_text(const struct tls_failure *f, char *buf, size_t size);
/* The thread's text for runtime_tls_error_text: set from OpenSSL's error
 * queue (cleared) with what was being done, or from words alone. */
void runtime__tls_config_error(const char *doing);
/* The same text for a system error: "what: strerror(err)"; and none, as a
 * call that reports through it begins. */
void runtime__tls_config_errno(const char *what, int err);
void runtime__tls_config_error_clear(void);

#endif
