/* SPDX-License-Identifier: MIT */
/*
 * runtime_tls.h - TLS on connections (OpenSSL 3 underneath): a TLS context
 * holds certificates, protocols and ticket keys, and is shared by every
 * core; runtime_conn_tls_accept or _connect turns a connection into a TLS
 * one, after which runtime_conn_read, _write, _close_write, _finish, the
 * connection's transport (so the buffered reader and writer, and copy)
 * and its deadlines, idle timeout and drain all work as before, on the
 * plaintext. (A write cut short by a deadline or cancel has had its bytes
 * taken whole - encrypted, some not sent yet - and the next write sends
 * them first; a socket error ends writing for good. runtime_conn_finish
 * takes a peer's close without close_notify for its end.) runtime_serve
 * does the server handshake itself once runtime_tls_serve has set its
 * accept-time layer. A library of its own, libruntime-tls (pkg-config
 * runtime-tls), on libruntime's public calls: a TLS session is a
 * connection layer (runtime_conn_set_layer), and libruntime itself needs
 * no OpenSSL.
 *
 * No OpenSSL call ever waits: every socket read and write goes through
 * the connection, so a fiber parks while its peer is slow, not the core.
 * Only TLS 1.2 and 1.3, AEAD cipher suites with forward secrecy, no
 * renegotiation, no compression. An idle connection holds no TLS buffer.
 *
 * Errors are -errno as everywhere; the TLS ones are:
 *   -EPROTO       the peer broke the protocol (garbage, a bad record, a
 *                 renegotiation, an unexpected message), or a fatal alert
 *                 not listed below
 *   -ENOPROTOOPT  nothing in common: protocol version, cipher suite, or
 *                 ALPN protocol
 *   -EKEYREJECTED a certificate was refused: unknown CA, wrong host name,
 *                 bad or missing certificate (ours, told by the peer's
 *                 alert, or the peer's)
 *   -EKEYEXPIRED  a certificate has expired, or is not valid yet
 *   -ECONNABORTED the peer closed without close_notify: the stream may be
 *                 truncated (never reported as a clean end of stream)
 *   -ETIMEDOUT    the handshake timeout, or a deadline
 * runtime_conn_tls_error says in words what failed last.
 */
#ifndef RUNTIME_TLS_H
#define RUNTIME_TLS_H

#include "runtime_toolkit.h"

#ifdef __cplusplus
extern "C" {
#endif

struct runtime_tls; /* opaque: a TLS context */

#define RUNTIME_TLS_SERVER 0
#define RUNTIME_TLS_CLIENT 1

#define RUNTIME_TLS_CLIENT_CERT_NONE 0     /* a server asks for none */
#define RUNTIME_TLS_CLIENT_CERT_OPTIONAL 1 /* asks; verifies one if sent */
#define RUNTIME_TLS_CLIENT_CERT_REQUIRED 2 /* asks; refuses a client without */

struct runtime_tls_config {
	int side;              /* RUNTIME_TLS_SERVER (default) or _CLIENT */
	const char *alpn;      /* ALPN protocols, comma-separated, preferred
	                          first ("h2,http/1.1"); NULL: none. A server
	                          refuses a client that offers ALPN and none
	                          of these (-ENOPROTOOPT) */
	const char *ca_file;   /* PEM bundle of trusted CAs: a client checks
	                          servers against it (NULL: the system's
	                          store), a server client certificates (read
	                          only if it asks for them) */
	int client_certs;      /* server: RUNTIME_TLS_CLIENT_CERT_* (NONE) */
	int tls13_only;        /* nonzero: TLS 1.3 only (default 1.2 and 1.3) */
	const char *ciphers;   /* TLS 1.2 suites, OpenSSL's syntax, used as
	                          given (the caller's choice: weak ones too);
	                          NULL: ECDHE with AES-GCM or ChaCha20-Poly1305
	                          only. TLS 1.3's are all AEAD */
	uint64_t handshake_timeout_ns; /* default 10 s: runtime_serve's, and
	                          accept's and connect's when no deadline of
	                          the caller's is earlier; 0: none */
	uint64_t ticket_rotation_ns; /* server: session tickets (resumption)
	                          under a key replaced this often, the old one
	                          still accepted for as long (default 1 h);
	                          0: no tickets */
	int keep_ssl;          /* server: nonzero keeps OpenSSL's SSL object
	                          for the connection's life. By default a
	                          TLS 1.3 connection that asked for no client
	                          certificate drops it after the handshake
	                          (some 11 KiB; the runtime protects the
	                          records itself) and runtime_conn_tls_ssl
	                          returns NULL from then on */
};

/* The defaults above. Any thread. */
RUNTIME_API void runtime_tls_config_init(struct runtime_tls_config *cfg);

/*
 * A TLS context (cfg NULL: a server's defaults). A server needs a
 * certificate (runtime_tls_add_cert) before its first handshake. Any
 * thread; once made, a context is used by any number of connections on
 * every core. Returns 0, -EINVAL (NULL tls, a bad field, an ALPN list
 * that does not parse), -ENOENT (ca_file unreadable, or no system store),
 * -ENOMEM, -EPROTO (no certificate in ca_file, a ciphers list that leaves
 * no suite, or OpenSSL refused a setting): runtime_tls_error_text says
 * which.
 */
RUNTIME_API int runtime_tls_create(struct runtime_tls **tls, const struct runtime_tls_config *cfg);

#define RUNTIME_TLS_PEM 0x1u /* cert and key are PEM text, not file names */

/*
 * Add a certificate chain (PEM: the leaf first, then its intermediates)
 * and its private key, from files or, with RUNTIME_TLS_PEM, from memory.
 * A server presents the first one whose names (subjectAltName, wildcards
 * included) match the name the client asks for with SNI, and the first
 * added when none does or the client names none. A client presents it when
 * the server asks for a client certificate (one only). Before the context
 * is in use (no handshake may run meanwhile). Returns 0, -EINVAL (NULL,
 * flags), -ENOENT (a file missing), -EKEYREJECTED (the key does not match
 * the certificate), -EPROTO (not PEM, not a certificate or key, or an
 * encrypted key: no passphrase is ever asked for), -EEXIST (a client has
 * one), -ENOMEM, or the errno of a file that cannot be read (-ENOENT,
 * -EACCES...). An expired certificate is taken (its clients will refuse
 * it). runtime_tls_error_text says what failed.
 */
RUNTIME_API int runtime_tls_add_cert(struct runtime_tls *tls, const char *cert, const char *key,
                                     unsigned flags);

/*
 * A client context: accept any server certificate, for any name - no
 * protection against a man in the middle. For tests against self-signed
 * servers; prefer ca_file. Before the context is in use. Returns 0,
 * -EINVAL (NULL, or a server context).
 */
RUNTIME_API int runtime_tls_insecure_skip_verify(struct runtime_tls *tls);

/* Let go of the context: it is freed when the last connection using it
 * closes. 0 (also for NULL). Any thread. */
RUNTIME_API int runtime_tls_destroy(struct runtime_tls *tls);

/*
 * Why the last runtime_tls_create or runtime_tls_add_cert on this thread
 * failed, in words: into buf, NUL-terminated, cut to size. Each call
 * clears it first. Returns the length written, 0 if there is nothing to
 * say (it succeeded, or failed for a reason its errno says: -EINVAL on
 * NULL, -EEXIST, -ENOMEM).
 */
RUNTIME_API int runtime_tls_error_text(char *buf, size_t size);

/* ----------------------------------------------------------- connections */

/*
 * The server handshake on conn, under the handshake timeout (or an earlier
 * deadline of the connection's or the fiber's). On success conn speaks
 * TLS from now on: its calls read and write plaintext. On failure the
 * connection is no use any more: close it (the peer got an alert when
 * one was due). A connection of runtime_serve with a context configured
 * comes to the handler with this done. Fiber context, conn's core.
 * Returns 0, a TLS error (above), -ECANCELED, the socket's error, -EINVAL
 * (NULL, a client context), -EALREADY (TLS already), -EPERM (another
 * core, or a read or write in progress), -ENOMEM.
 */
RUNTIME_API int runtime_conn_tls_accept(struct runtime_conn *conn, struct runtime_tls *tls);

/*
 * The client handshake on conn: host is the server's name (sent with SNI
 * unless it is a numeric address) that its certificate must match, unless
 * the context skips verification (then host may be NULL). The context
 * keeps the last session (ticket) each of its last 64 servers (host and
 * port) gave, and the next connection to that server resumes with it (a
 * ticket is used once). A TLS 1.3 ticket comes after the handshake, with
 * the first bytes the client reads: a connection that reads nothing
 * leaves none.
 * Otherwise as runtime_conn_tls_accept; -EINVAL also for a server
 * context, or a NULL host with verification on.
 */
RUNTIME_API int runtime_conn_tls_connect(struct runtime_conn *conn, struct runtime_tls *tls,
                                         const char *host);

/* What a TLS connection agreed on. Strings live as long as conn. */
struct runtime_tls_info {
	const char *version;     /* "TLSv1.3" */
	const char *cipher;      /* "TLS_AES_128_GCM_SHA256" */
	const char *alpn;        /* the protocol agreed, NULL: none */
	const char *server_name; /* server: the SNI name the client sent, NULL:
	                            none; client: the host given */
	int resumed;             /* 1: a resumed session (no certificate sent) */
	int peer_cert;           /* 1: the peer presented a certificate, and it
	                            was verified (so 1 on a client that
	                            verifies; 0 if it skips verification and
	                            the certificate did not check out) */
};

/* Fill *info for a TLS connection past its handshake. Fibers of its core.
 * Returns 0, -EINVAL (NULL), -ENOTCONN (not TLS, or no handshake yet). */
RUNTIME_API int runtime_conn_tls_info(struct runtime_conn *conn, struct runtime_tls_info *info);

/*
 * Why the connection's last TLS call failed, in words ("certificate
 * verify failed: certificate has expired", "no shared cipher", "the peer
 * closed without close_notify"): into buf, NUL-terminated, cut to size.
 * Fibers of its core. Returns the length written; 0 if nothing failed.
 */
RUNTIME_API int runtime_conn_tls_error(struct runtime_conn *conn, char *buf, size_t size);

/*
 * OpenSSL's objects, for what this header does not offer: the SSL * of a
 * TLS connection (NULL otherwise, and for a server's TLS 1.3 connection
 * past its handshake unless its context has keep_ssl) and the SSL_CTX *
 * every handshake starts on (the first certificate's: the same pointer
 * before and after runtime_tls_add_cert; a setting made on it, a protocol
 * version say, applies to every connection). Change nothing that does
 * I/O on them.
 */
RUNTIME_API void *runtime_conn_tls_ssl(struct runtime_conn *conn);
RUNTIME_API void *runtime_tls_ssl_ctx(struct runtime_tls *tls);

/* The handshakes of a context's connections, server's or client's as the
 * context is, since its creation. */
struct runtime_tls_stats {
	uint64_t handshakes;     /* done: full and resumed */
	uint64_t resumed;        /* of them, resumed sessions (no certificate
	                            sent or checked) */
	uint64_t failed;         /* failed: refused either way, timed out, a
	                            peer that hung up, a shutdown's cancel */
};

/* A snapshot (each figure read atomically). Any thread. Zeroed for NULL. */
RUNTIME_API void runtime_tls_stats(const struct runtime_tls *tls, struct runtime_tls_stats *st);

/*
 * Serving TLS with runtime_serve (or runtime_http_serve): each
 * connection's server handshake (runtime_conn_tls_accept) is done on its
 * fiber before the handler sees it, as runtime_serve's accept-time layer.
 * A connection whose handshake fails is closed unserved, and counted
 * (runtime_server_stats' layer_failed).
 */
struct runtime_tls_serve {
	struct runtime_tls *tls; /* a server context with a certificate */
	/* Called on the connection's fiber when its handshake fails, before
	 * it closes - runtime_conn_tls_error and runtime_conn_peer say why
	 * and who (rate-limit a log: a scan makes many). NULL: only counted. */
	void (*on_error)(struct runtime_conn *conn, int err, void *arg);
	void *arg;               /* on_error's */
	const char *alpn;        /* the ALPN protocols this server offers, as
	                            runtime_tls_config's alpn, instead of the
	                            context's (one context, servers of different
	                            protocols); NULL: the context's */
};

/* Make cfg serve TLS as ts says: cfg->layer and cfg->layer_arg are set
 * (ts, its context, arg and alpn must outlive the server). Any thread.
 * Returns 0, or -EINVAL (NULL, a context that cannot serve - a client's,
 * or one with no certificate -, or an alpn list that does not parse). */
RUNTIME_API int runtime_tls_serve(struct runtime_serve_config *cfg, struct runtime_tls_serve *ts);

/* The runtime_tls_serve that set cfg's layer, NULL if none did (a library
 * that serves on a caller's cfg wraps it: runtime_http_serve offers h2).
 * Any thread. */
RUNTIME_API struct runtime_tls_serve *runtime_tls_serve_of(const struct runtime_serve_config *cfg);

#ifdef __cplusplus
}
#endif

#endif
