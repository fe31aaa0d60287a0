/* SPDX-License-Identifier: MIT */
/*
 * tls.h - what the TLS layer's files share (never installed). The layer
 * sits between a connection's public calls and its socket (struct
 * conn_layer, toolkit/toolkit.h); OpenSSL does the protocol and never
 * touches the socket: a BIO of ours hands it the bytes the connection
 * read and takes what it writes (session.c).
 *
 *   context.c  runtime_tls: SSL_CTX settings, certificates, SNI, ALPN
 *   certs.c    certificates and keys into a context
 *   resume.c   resumption: ticket keys (server), sessions by host (client)
 *   session.c  one connection: handshake, read, write, close_notify
 *   errors.c   OpenSSL's failures as -errno and as words
 */
#ifndef RUNTIME_TLS_INTERNAL_H
#define RUNTIME_TLS_INTERNAL_H

#include "../toolkit/toolkit.h"

#include <openssl/ssl.h>
#include <stdatomic.h>

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
	char *ciphers, *ca_file;    /* copies, for each certificate's SSL_CTX */
	unsigned char *alpn;        /* wire format: length-prefixed names */
	size_t alpn_len;
	uint64_t handshake_timeout_ns;
	uint64_t ticket_rotation_ns;
	struct tickets *tickets;    /* NULL: no tickets (or a client) */
	struct client_sessions *sessions; /* a client's, to resume with */
};

/* context.c */
void runtime__tls_unref(struct runtime_tls *tls);
/* A new SSL_CTX with tls's settings (no certificate), or NULL (*rc). */
SSL_CTX *runtime__tls_new_ctx(struct runtime_tls *tls, int *rc);

/* resume.c: a server's keys for SSL_CTX_set_tlsext_ticket_key_evp_cb,
 * and a client's sessions by host. */
struct tickets *runtime__tickets_new(uint64_t rotation_ns);
void runtime__tickets_free(struct tickets *tk);
int runtime__tickets_cb(SSL *ssl, unsigned char *name, unsigned char *iv, EVP_CIPHER_CTX *ectx,
                        EVP_MAC_CTX *hctx, int enc);
struct client_sessions *runtime__client_sessions_new(void);
void runtime__client_sessions_free(struct client_sessions *cs);
int runtime__client_session_keep(struct client_sessions *cs, const char *host, SSL_SESSION *sess);
SSL_SESSION *runtime__client_session_take(struct client_sessions *cs, const char *host);
/* session.c: the host a client SSL was opened for (NULL: none). */
const char *runtime__tls_host_of(SSL *ssl);

/* errors.c */
struct tls_failure {
	int err;                    /* -errno, 0: none */
	unsigned long ssl_err;      /* OpenSSL's code, 0: none */
	long verify;                /* X509_V_OK, or why verification failed */
	bool in_handshake;
};
/* The failure of an SSL call that returned ssl_error (SSL_get_error),
 * from the thread's OpenSSL error queue (then cleared). raw_end: the
 * socket's end as the session saw it (1 EOF, < 0 an error, 0 open). */
void runtime__tls_failure(struct tls_failure *f, SSL *ssl, int ssl_error, int raw_end);
int runtime__tls_failure_text(const struct tls_failure *f, char *buf, size_t size);
/* The thread's text for runtime_tls_error_text: set from OpenSSL's error
 * queue (cleared) with what was being done, or from words alone. */
void runtime__tls_config_error(const char *doing);

#endif
