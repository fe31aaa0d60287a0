/* SPDX-License-Identifier: MIT */
/*
 * runtime_http.h - HTTP/1.1 and HTTP/2 on fibers: a server whose handler
 * runs per request in a fiber, the same handler for both protocols, and a
 * client with a keep-alive pool per origin.
 * Library libruntime-http (pkg-config runtime-http), built from http/ on
 * the public calls of <runtime.h>; the core library knows nothing of HTTP.
 *
 * Strict both ways: a request or a response that two implementations
 * could read differently (RFC 9112 framing, the request-smuggling
 * classes) is an error, never guessed at. Nothing is decoded behind the
 * caller's back: targets stay as sent until runtime_http_decode.
 *
 * The conventions of <runtime.h> hold: errors are -errno; calls that wait
 * need fiber context, and the fiber's deadline and cancellation apply to
 * them; each call says its threads, errors and races. A request, a
 * response and a client response belong to the fiber that got them.
 */
#ifndef RUNTIME_HTTP_H
#define RUNTIME_HTTP_H

#include <runtime.h>
#include <runtime_tls.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes inside a buffer the library owns: not NUL-terminated. */
struct runtime_http_slice {
	const char *p;
	size_t len;
};

#define RUNTIME_HTTP_HEADERS_MAX 64  /* fields in a head, at most */

/* What a head and a body may be. Zero fields take the defaults. */
struct runtime_http_limits {
	size_t line_max;      /* request or status line, CRLF excluded (8 KiB) */
	size_t head_max;      /* the whole head, final CRLF included (12 KiB) */
	unsigned headers_max; /* fields (RUNTIME_HTTP_HEADERS_MAX, also the most) */
	uint64_t body_max;    /* decoded body bytes (1 MiB; UINT64_MAX: none) */
};

/* ================================================================ server */

struct runtime_http_server;
struct runtime_http_request;   /* valid while its handler runs */
struct runtime_http_response;  /* its answer: the same lifetime */

/*
 * Runs once per request, in the connection's fiber, requests of one
 * connection one after another. It answers through res (at most one
 * response) and returns 0; a negative return, or a return without a
 * response, is answered if nothing was sent yet - 408, 413 or 400 if a
 * read of the request's body failed -ETIMEDOUT (the client stopped
 * sending it), -EMSGSIZE or -EBADMSG, else 500 - and otherwise ends the
 * connection (a client sees a truncated body: never a complete one). A
 * handler may thus pass a body read's error straight back.
 * What it left unread of the request body is read and dropped before the
 * next request (or the connection is closed if that body breaks a rule).
 */
typedef int runtime_http_handler(struct runtime_http_request *req,
                                 struct runtime_http_response *res, void *arg);

struct runtime_http_server_config {
	/* Where and how to listen: host, port, max_conns, tls, cores - as
	 * runtime_serve(3); its handler, arg and release_after_ns are the
	 * library's (set here, ignored). Over TLS (runtime_tls_serve) the
	 * server offers "h2,http/1.1" by ALPN ("http/1.1" with no_h2),
	 * unless the caller's struct runtime_tls_serve names a list. */
	struct runtime_serve_config serve;
	runtime_http_handler *handler; /* required */
	void *arg;
	struct runtime_http_limits limits;
	uint64_t header_timeout_ns; /* a head's first byte to its last (10 s):
	                               after it 408 and close (slowloris) */
	uint64_t idle_timeout_ns;   /* between requests, and for a client
	                               that stops reading its answers (60 s) */
	const char *server_name;    /* the Server field ("runtime"); "" none;
	                               a field value (no control byte but HTAB,
	                               no space at either end, at most 84
	                               bytes), else -EINVAL */
	/* Called after each response has been queued (not yet sent: it may
	 * be batched), on the request's fiber, e.g. for an access log; also
	 * after the library's answer to a head it refused (400, 408, 413,
	 * 414, 431, 501; on the connection's fiber; HTTP/1.1: the request then
	 * has no method, target or fields). The request's head is still
	 * readable, with runtime_http_request_start, _bytes and _data, and
	 * runtime_http_log_line. NULL: none. */
	void (*on_response)(const struct runtime_http_request *req,
	                    const struct runtime_http_response *res, void *arg);
	int no_batch;               /* nonzero: each response sent on its own,
	                               not with the pipelined ones after it (to
	                               measure the batching; default 0) */
	int file_copy;              /* nonzero: files are read and sent, never
	                               spliced (to measure splice; default 0) */
	uint64_t release_after_ns;  /* a connection quiet this long between
	                               requests gives back its fiber's stack and
	                               its buffers, and waits with none
	                               (runtime_conn_idle) until its next bytes
	                               (10 ms; 0: at once; UINT64_MAX: never) */
	/* HTTP/2 (RFC 9113), on by default both ways: */
	int no_h2;                  /* nonzero: no h2 over TLS (the ALPN offered
	                               is then "http/1.1" alone) */
	int no_h2c;                 /* nonzero: no cleartext h2c (a client's
	                               preface is then a bad request: 400) */
	unsigned h2_max_streams;    /* handlers at once per HTTP/2 connection,
	                               SETTINGS_MAX_CONCURRENT_STREAMS (100) */
	int no_metrics;             /* nonzero: no request-duration histogram
	                               nor method classes (they cost a clock
	                               read a request); the other counts stay */
	uint64_t body_min_rate;     /* request body bytes per second a client
	                               must keep up, counted from the handler's
	                               first read once body_rate_grace_ns has
	                               passed; slower, the read fails -ETIMEDOUT
	                               and the answer is 408 (240, as Kestrel's;
	                               0: no minimum, only idle_timeout) */
	uint64_t body_rate_grace_ns; /* (5 s) */
	int access_log_format;      /* RUNTIME_HTTP_LOG_COMMON or _JSON: the
	                               library writes a line for every response
	                               (before on_response), refusals too, to
	                               access_log_fd through runtime_log_write
	                               (never blocking a core); 0: none */
	int access_log_fd;          /* (1: standard output) */
	size_t fields_out_max;      /* a response's own fields in bytes, each
	                               "Name: value" and CRLF (64 KiB; 0: that;
	                               at most 16 MiB, else -EINVAL): more and
	                               runtime_http_set_header says -ENOBUFS.
	                               Up to 4 KiB they live in the response,
	                               more on the heap until the next request */
	int no_cancel_on_close;     /* nonzero: a handler runs on when its
	                               client leaves. By default a client that
	                               closes or resets its connection (HTTP/1.1;
	                               an HTTP/2 stream's reset always does)
	                               while the handler runs cancels the
	                               handler's fiber - its blocking calls return
	                               -ECANCELED, its cleanups run - and the
	                               response is logged 499, as nginx logs a
	                               client's close (runtime_conn_cancel_on_close) */
};

/* Defaults: as the field comments say; serve as runtime_serve_config_init. */
RUNTIME_API void runtime_http_server_config_init(struct runtime_http_server_config *cfg);

/*
 * Serve HTTP/1.1 (and 1.0) and HTTP/2 on every core of rt, as runtime_serve(3) does
 * (it is built on it): keep-alive, pipelining (the answers to one read's
 * requests leave in one send), HEAD, Expect: 100-continue (answered when
 * the handler first reads the body), Date, Server, Content-Length and
 * Connection set by the library; a request that breaks a rule or a limit
 * is answered 400, 408, 413, 414, 417, 431, 501 or 505 and the connection
 * closed. One rule for targets on both sides: a request-target is visible
 * ASCII but '#', and each '%' begins an escape of two hex digits
 * ("/a/%zz" is 400 here, -EINVAL to the client), so that a proxy built on
 * the server and the client never takes a request it cannot send on. A
 * drain (runtime_drain) closes idle connections at once and
 * busy ones after their current response (Connection: close).
 * HTTP/2 (h2 by ALPN over TLS, h2c by the preface in clear text): each
 * stream's handler in a fiber of its own, flow control credited as it
 * reads, h2_max_streams handlers at once, a reset stream's handler
 * cancelled; a drain sends GOAWAY and lets the streams begun finish
 * (runtime_http_serve(3) says what differs and the limits against the
 * published attacks).
 * Any thread. Errors: as runtime_serve, and -EINVAL for a NULL handler or
 * limits beyond what the parser holds (headers_max > the most, head_max <
 * line_max, head_max > 1 MiB).
 */
RUNTIME_API int runtime_http_serve(struct runtime *rt, const struct runtime_http_server_config *cfg,
                                   struct runtime_http_server **srv);
/* The port it listens on (port 0 asked: the one bound). Any thread. */
RUNTIME_API uint16_t runtime_http_server_port(const struct runtime_http_server *srv);

struct runtime_http_server_stats {
	struct runtime_server_stats conns; /* runtime_server_stats(3) */
	uint64_t requests;       /* heads parsed, all cores */
	uint64_t rejected;       /* requests refused by the parser (4xx/5xx),
	                            not counted in requests */
	uint64_t responses[6];   /* by class: [1] 1xx (but 100) ... [5] 5xx,
	                            the parser's refusals too; [0] unused */
};

/* Counters since the start, summed over cores (each read atomically, not
 * all at one instant). Any thread. */
RUNTIME_API void runtime_http_server_stats(const struct runtime_http_server *srv,
                                           struct runtime_http_server_stats *st);
/* One core's request count (core < runtime_cores; else 0). Any thread. */
RUNTIME_API uint64_t runtime_http_server_core_requests(const struct runtime_http_server *srv,
                                                       unsigned core);
/* Stop accepting (runtime_server_stop). Any thread. 0, -EINVAL (NULL). */
RUNTIME_API int runtime_http_server_stop(struct runtime_http_server *srv);
/* After runtime_run has returned (or before it ran). NULL is a no-op. */
RUNTIME_API void runtime_http_server_destroy(struct runtime_http_server *srv);

/*
 * Serve one connection with srv's handler and settings until it closes,
 * in the calling fiber (a connection of the caller's own, e.g. from a
 * socketpair or an accept loop of its own); srv may be one that was never
 * started: runtime_http_server_create makes such a one. The connection
 * stays the caller's to close. Fiber context. Returns 0, or -EINVAL.
 */
RUNTIME_API int runtime_http_server_create(struct runtime *rt,
                                           const struct runtime_http_server_config *cfg,
                                           struct runtime_http_server **srv);
RUNTIME_API int runtime_http_serve_conn(struct runtime_http_server *srv,
                                        struct runtime_conn *conn);

/* ------------------------------------------------------------- requests */

/* "GET", as sent (methods are case-sensitive). */
RUNTIME_API struct runtime_http_slice runtime_http_method(const struct runtime_http_request *req);
/* The target as sent: origin-form "/a%20b?x=1", or absolute-form
 * "http://host/a?x=1", "*" for OPTIONS, authority-form for CONNECT. */
RUNTIME_API struct runtime_http_slice runtime_http_target(const struct runtime_http_request *req);
/* The path of the target ("/a%20b"; of an absolute-form one too, "/" if it
 * has none), still percent-encoded; "*" and authority-form: empty. */
RUNTIME_API struct runtime_http_slice runtime_http_path(const struct runtime_http_request *req);
/* The query after '?', still encoded; empty (p non-NULL) if none. */
RUNTIME_API struct runtime_http_slice runtime_http_query(const struct runtime_http_request *req);
/* The minor version: 0 or 1 (a request of 1.2 and up is answered as 1.1:
 * 1; an HTTP/2 one: 1). */
RUNTIME_API int runtime_http_minor(const struct runtime_http_request *req);
/* The protocol: 10 (HTTP/1.0), 11 (HTTP/1.1) or 20 (HTTP/2). */
RUNTIME_API int runtime_http_version(const struct runtime_http_request *req);
/* The connection: its peer (runtime_conn_peer), its TLS state
 * (runtime_conn_tls_info). Not to be read, written or closed, nor given
 * deadlines (the library sets them, and tells the runtime only when they
 * change). */
RUNTIME_API struct runtime_conn *runtime_http_conn(const struct runtime_http_request *req);

/* The first field called name (case-insensitive), NULL if none. The
 * value has no leading or trailing whitespace. Valid until the handler
 * returns, body reads included. */
RUNTIME_API const struct runtime_http_slice *runtime_http_header(const struct runtime_http_request *req,
                                                                 const char *name);
/* The fields in the order sent, repeated ones each on its own: index
 * 0 .. count-1. Returns 0, or -ENOENT past the end. */
RUNTIME_API unsigned runtime_http_header_count(const struct runtime_http_request *req);
RUNTIME_API int runtime_http_header_at(const struct runtime_http_request *req, unsigned index,
                                       struct runtime_http_slice *name,
                                       struct runtime_http_slice *value);

/* The body's length if it has a Content-Length, 0 for none, -1 for
 * chunked (unknown until read). */
RUNTIME_API int64_t runtime_http_body_length(const struct runtime_http_request *req);
/*
 * Up to len body bytes, decoded (chunked framing removed); the first call
 * answers "Expect: 100-continue". Returns > 0, 0 at the body's end (and
 * for a request without one), or an error: -EMSGSIZE (over body_max: the
 * answer should be 413), -EBADMSG (bad chunked framing or trailers: 400),
 * -EPIPE (the client closed or went silent before the body ended), or the
 * read's own (-ETIMEDOUT, -ECANCELED, ...). After an error the
 * connection closes once the response is done. Fiber context, the
 * handler's fiber only.
 */
RUNTIME_API ssize_t runtime_http_body_read(struct runtime_http_request *req, void *buf, size_t len);
/* The whole body into a malloc'd buffer (*body, NUL-terminated after
 * *len bytes; free it), at most max bytes (else -EMSGSIZE). As
 * runtime_http_body_read otherwise; -ENOMEM. */
RUNTIME_API int runtime_http_body_read_all(struct runtime_http_request *req, char **body,
                                           size_t *len, size_t max);

/*
 * Percent-decode s into out (cap bytes; the result is NUL-terminated).
 * Returns its length, or -EINVAL for a bad escape ("%4", "%zz") or an
 * encoded NUL, -ENOBUFS if it does not fit. With plus nonzero '+' becomes
 * a space (form encoding, for queries). Any thread.
 */
RUNTIME_API ssize_t runtime_http_decode(struct runtime_http_slice s, char *out, size_t cap,
                                        int plus);
/* The value of key in a query ("a=1&b=2"), still encoded: 1 and *value
 * set, or 0 if absent. A key without '=' has an empty value. */
RUNTIME_API int runtime_http_query_param(struct runtime_http_slice query, const char *key,
                                         struct runtime_http_slice *value);
/*
 * A path ("/a/./b//%7e%2E%2e/c") in one canonical form, into out (cap
 * bytes; the result is NUL-terminated): escapes of unreserved characters
 * decoded and the rest written with upper-case hex (RFC 3986 6.2.2), so
 * "%2e%2e" is "..", then repeated slashes made one and "." and ".."
 * segments removed (5.2.4; ".." at the root stays at the root): "/a/c".
 * A path that ends in '/', "." or ".." keeps a final '/'. "%2F" stays an
 * escape: data, not a separator. What a proxy or router checks is then
 * what the upstream or the file system sees. Returns the length (never
 * more than path's), or -EINVAL if path does not start with '/', holds a
 * bad escape, an encoded NUL, a space, a control character, '?' or '#'
 * (pass the path, not the target), -ENOBUFS if out is too small. Any
 * thread; out may not overlap path.
 */
RUNTIME_API ssize_t runtime_http_path_clean(struct runtime_http_slice path, char *out, size_t cap);

/* --------------------------------------------------------- access logs */

/* When the request began, on runtime_now's clock: its head's first byte
 * seen, or (a head that came whole) when it was parsed. */
RUNTIME_API uint64_t runtime_http_request_start(const struct runtime_http_request *req);
/* Bytes read of the request so far: its head and the body bytes read
 * (chunked framing included); HTTP/2: the head's decoded fields and the
 * body's bytes. */
RUNTIME_API uint64_t runtime_http_request_bytes(const struct runtime_http_request *req);
/* Bytes of the answer queued: its head (HTTP/1.1; HTTP/2 compresses heads
 * across a connection: 0) and its body (chunked framing aside). */
RUNTIME_API uint64_t runtime_http_response_bytes(const struct runtime_http_response *res);
/* A slot of the user's for the request, NULL at its start: the handler
 * leaves something for on_response (a user id, a route name). */
RUNTIME_API void runtime_http_request_set_data(struct runtime_http_request *req, void *data);
RUNTIME_API void *runtime_http_request_data(const struct runtime_http_request *req);

enum runtime_http_log_format {
	RUNTIME_HTTP_LOG_COMMON = 1, /* 127.0.0.1 - - [02/Dec/2026:23:10:00 +0000]
	                                "GET /a HTTP/1.1" 200 512 (the body's bytes;
	                                "-" for a refused head's request line) */
	RUNTIME_HTTP_LOG_JSON,       /* {"time":"2026-12-02T23:10:00Z","remote":
	                                "127.0.0.1","method":"GET","target":"/a",
	                                "proto":"HTTP/1.1","status":200,"bytes_in":
	                                78,"bytes_out":630,"duration_us":52} */
};

/*
 * The access log line of an answered request in format, newline ended,
 * into buf (cap bytes; not NUL-terminated): the peer's address ("-" if
 * none), the method and target escaped (CLF: \" \\ \xHH, as nginx; JSON:
 * its escapes) and cut after 64 and 1,024 bytes ("..."), so a line is
 * under 8 KiB; the duration runs from runtime_http_request_start to now.
 * Returns its length, -EINVAL (NULL, unknown format) or -ENOBUFS. Any
 * thread while req and res are valid (on_response's).
 */
RUNTIME_API ssize_t runtime_http_log_line(const struct runtime_http_request *req,
                                          const struct runtime_http_response *res, int format,
                                          char *buf, size_t cap);

/* ------------------------------------------------------------ responses */

/*
 * Add a field to the response before it starts. name must be a token and
 * value have no control byte but HTAB and no space at either end; Date,
 * Server, Content-Length, Connection, Transfer-Encoding and Content-Type
 * are the library's, and so are Upgrade, Trailer, Keep-Alive and Host,
 * whose meaning it would have to carry out (-EPERM). Returns 0, -EINVAL
 * (bad name or value), -EALREADY (the response has started), -ENOBUFS
 * (the fields of one response would exceed the server's fields_out_max,
 * 64 KiB by default), -ENOMEM (fields past 4 KiB go on the heap).
 * Handler's fiber.
 */
RUNTIME_API int runtime_http_set_header(struct runtime_http_response *res, const char *name,
                                        const char *value);
/* This is the connection's last response (Connection: close). */
RUNTIME_API void runtime_http_set_close(struct runtime_http_response *res);

/*
 * A whole response with a fixed body (body may be NULL when len is 0;
 * content_type NULL: no Content-Type field). A HEAD gets the same fields
 * and no body, and so do 1xx, 204 and 304 (no Content-Length either).
 * Small responses wait in the connection's batch and leave with the next
 * flush: when the handler's fiber next waits to read, or on the next
 * response that does not fit. Returns 0, -EALREADY (a response was
 * started), -EINVAL (status outside 200..599), or the write's error (the
 * connection then closes). Handler's fiber.
 */
RUNTIME_API int runtime_http_respond(struct runtime_http_response *res, int status,
                                     const char *content_type, const void *body, size_t len);

#define RUNTIME_HTTP_CHUNKED (-1)

/*
 * Start a streamed response: length bytes follow (length >= 0), or an
 * unknown length (RUNTIME_HTTP_CHUNKED): chunked to an HTTP/1.1 client,
 * delimited by the close of the connection for HTTP/1.0.
 * runtime_http_write sends body bytes (a chunk each, for chunked), and
 * runtime_http_end ends it (the last chunk). Writing more than length is
 * -EMSGSIZE; ending with less closes the connection (the client sees
 * the truncation). Errors as runtime_http_respond.
 */
RUNTIME_API int runtime_http_start(struct runtime_http_response *res, int status,
                                   const char *content_type, int64_t length);
RUNTIME_API int runtime_http_write(struct runtime_http_response *res, const void *buf, size_t len);
RUNTIME_API int runtime_http_end(struct runtime_http_response *res);

/*
 * A response whose body is len bytes of fd from offset off (a regular
 * file): spliced from the page cache to the socket for large files on
 * plain connections, read and sent otherwise (TLS). fd stays the
 * caller's. Errors as runtime_http_respond, and the read's.
 */
RUNTIME_API int runtime_http_respond_file(struct runtime_http_response *res, int status,
                                          const char *content_type, int fd, uint64_t off,
                                          uint64_t len);

/*
 * Take the connection over after a 101 (RFC 9110 7.8), for WebSocket or
 * a protocol of one's own. The request must have asked for protocol (an
 * Upgrade field naming it, "upgrade" among its Connection options); the
 * rest of its body is read and dropped first. The library writes "101
 * Switching Protocols" with Upgrade: protocol, Connection: Upgrade and
 * the fields set before (runtime_http_set_header: Sec-WebSocket-Accept,
 * say), then up->conn is the handler's, with no deadline set, and
 * up->early holds the bytes the client sent after the request, read
 * already: take them first. When the handler returns the library closes
 * the connection (never close it yourself); the access log records a
 * 101 then. Returns 0, -EINVAL (NULL, protocol not a token, or the
 * request did not ask for it: answer 400 or 426 yourself), -EALREADY (an
 * answer began), -EPROTONOSUPPORT (HTTP/2 or HTTP/1.0: no Upgrade there),
 * -EPIPE (the 101 could not be written; the connection closes),
 * -ENOMEM. Handler's fiber.
 */
struct runtime_http_upgraded {
	struct runtime_conn *conn;          /* the handler's until it returns */
	struct runtime_http_slice early;    /* valid until then too */
};
RUNTIME_API int runtime_http_upgrade(struct runtime_http_response *res, const char *protocol,
                                     struct runtime_http_upgraded *up);
/* Status sent (0: none yet) and body bytes sent so far; for logs. */
RUNTIME_API int runtime_http_status(const struct runtime_http_response *res);
RUNTIME_API uint64_t runtime_http_body_sent(const struct runtime_http_response *res);

/* ================================================================ client */

/*
 * The client: HTTP/1.1 over TCP or TLS, one request at a time per
 * connection (no pipelining), connections kept alive in a pool per origin
 * (scheme, host, port) and core; and HTTP/2 where the server agrees to it
 * by ALPN (or for http:// with h2c), the requests of many fibers at once
 * on one connection per origin and core, a stream each. Responses are
 * read as strictly as the server reads requests: a response that breaks a
 * framing or syntax rule is -EBADMSG, never guessed at (see
 * runtime_http_request).
 */
struct runtime_http_client;
struct runtime_http_result;    /* a response received: status, fields, body */

struct runtime_http_client_config {
	unsigned max_per_origin;   /* pooled idle connections per origin and
	                              core (8); 0: no pooling (each request
	                              says Connection: close) */
	uint64_t idle_timeout_ns;  /* a pooled connection unused this long is
	                              closed (30 s; 0: never by time), by a
	                              background sweep of its core every
	                              quarter of it, though no request comes */
	uint64_t connect_timeout_ns; /* name lookup, TCP and TLS handshake
	                              (10 s; 0: none but the deadlines) */
	struct runtime_tls *tls;   /* client context for https: (the caller's:
	                              it must outlive the client); NULL: one
	                              with the system's CAs, verification on and
	                              ALPN http/1.1, made on the offload pool at
	                              the first https request */
	struct runtime_http_limits limits; /* of responses (body_max: 64 MiB) */
	const char *user_agent;    /* User-Agent ("runtime"); "" or NULL: none */
	/* HTTP/2: over TLS when the server agrees by ALPN, */
	int no_h2;                 /* nonzero: never (the ALPN offered is then
	                              "http/1.1" alone) */
	int h2c;                   /* nonzero: http:// URLs speak cleartext h2c
	                              by prior knowledge (default 0: HTTP/1.1) */
	unsigned h2_max_streams;   /* requests at once on one HTTP/2
	                              connection, at most (0: the server's
	                              SETTINGS_MAX_CONCURRENT_STREAMS) */
};
/* The defaults above. Any thread. */
RUNTIME_API void runtime_http_client_config_init(struct runtime_http_client_config *cfg);

/*
 * Make a client (cfg NULL: the defaults). Any thread; the client is then
 * used by fibers of every core of one runtime at once: each core has
 * pools of its own (a connection never changes core), touched by that
 * core alone - no lock on the way of a request. Returns 0, -EINVAL (NULL
 * cl, limits beyond what the parser holds - as the server's -, a
 * user_agent with CR, LF or another control, or over 100 bytes),
 * -ENOMEM.
 */
RUNTIME_API int runtime_http_client_create(struct runtime_http_client **cl,
                                           const struct runtime_http_client_config *cfg);
/*
 * Free the client: from then on a request begun fails -ESHUTDOWN; the
 * requests under way and the results not yet closed, on every core, are
 * waited for (a client's clean shutdown: call it from a fiber when the
 * drain begins, and what is in flight finishes; close every result you
 * hold, or it waits for ever - a cancel bounds the wait to 10 s, after
 * which the client is left allocated, said on stderr); then every pooled
 * connection is closed on its core. Idle connections belong to their
 * cores: call it from a fiber of the runtime (each other core gets a
 * fiber that waits and closes there); from any other thread only if
 * nothing is pooled or in flight (never used, or max_per_origin 0, its
 * runtime over) - else the connections are left open, said on stderr as
 * misuse. NULL is a no-op.
 */
RUNTIME_API void runtime_http_client_destroy(struct runtime_http_client *cl);

/* A request by parts. Zero fields take defaults. */
struct runtime_http_client_request {
	const char *method;        /* a token, "GET" if NULL; case-sensitive */
	const char *url;           /* "http://host[:port]/path?query" or https:
	                              host a DNS name, an IPv4 address or "[IPv6]";
	                              no userinfo; the path percent-encoded (bytes
	                              other than visible ASCII, or a bad %XX:
	                              -EINVAL, the server's rule for targets);
	                              a "#fragment" is not sent */
	const char *const *headers; /* "Name: value" strings, NULL-terminated,
	                              sent as given; a name a token, a value of
	                              no CR, LF or other control but HTAB. Host,
	                              Content-Length, Transfer-Encoding,
	                              Connection, Upgrade, Keep-Alive and
	                              Proxy-Connection are the library's */
	const void *body;          /* a fixed body of body_len bytes (sent with
	                              Content-Length; POST, PUT and PATCH send
	                              "Content-Length: 0" without one), or */
	size_t body_len;
	/* a streamed one: called in the requesting fiber for the next bytes
	 * (at most len, into buf) until it returns 0; sent chunked, each call
	 * a chunk (body_len is ignored), unless body_read_len gives its
	 * length; < 0 abandons the request, which then fails with that
	 * value. Never sent twice: no retry, and a 301, 302 (but of a POST),
	 * 307 or 308 is returned rather than followed. */
	ssize_t (*body_read)(void *arg, void *buf, size_t len);
	void *body_arg;
	uint64_t deadline_ns;      /* absolute, runtime_now's clock; 0: none */
	unsigned max_redirects;    /* follow 301/302/303/307/308 (0: none) */
	uint64_t head_timeout_ns;  /* the response's head must be whole this
	                              long after the request (its body too) was
	                              sent: time to first byte (0: none) */
	uint64_t read_idle_ns;     /* a body read (runtime_http_result_read)
	                              that gets no byte for this long fails
	                              (0: none) */
	int *timed_out;            /* not NULL: set to the RUNTIME_HTTP_TIMEOUT_*
	                              that made the call fail -ETIMEDOUT, else
	                              RUNTIME_HTTP_TIMEOUT_NONE */
	uint64_t body_read_len;    /* body_read's length when known: sent with
	                              Content-Length instead of chunked, never
	                              asked for more; an end (0) before it
	                              fails the request -EINVAL (0: unknown) */
	const char *upgrade;       /* a protocol to switch to ("websocket"),
	                              sent as Upgrade with Connection: Upgrade
	                              (HTTP/1.1 only: an origin that speaks
	                              HTTP/2 fails -EPROTONOSUPPORT); a 101 is
	                              then the result, whose connection
	                              runtime_http_result_upgraded hands over */
};

/* Which clock ended a client's wait with -ETIMEDOUT. */
enum runtime_http_timeout {
	RUNTIME_HTTP_TIMEOUT_NONE,    /* none of these: the fiber's own deadline */
	RUNTIME_HTTP_TIMEOUT_CONNECT, /* connect_timeout_ns: lookup, TCP, TLS */
	RUNTIME_HTTP_TIMEOUT_HEAD,    /* head_timeout_ns */
	RUNTIME_HTTP_TIMEOUT_IDLE,    /* read_idle_ns, between body bytes */
	RUNTIME_HTTP_TIMEOUT_TOTAL,   /* deadline_ns */
};

/*
 * Send a request and receive the response's head, in the calling fiber:
 * *res then gives its status and fields, and its body through
 * runtime_http_result_read. The body is sent whole before the response is
 * read (a server that answers early is read after the failed write);
 * interim 1xx responses are skipped.
 *
 * A pooled connection is taken if one is there (one idle for over 100 ms
 * is first checked for a close by the server), else one is made: the
 * name looked up on the offload pool (an IP address is not), TCP, and for
 * https the TLS handshake, its certificate checked for the URL's host
 * (sent as SNI) by the client's context, ALPN "h2,http/1.1" offered (the
 * default context; "http/1.1" with no_h2); a server that agrees on
 * another protocol is refused (-ENOPROTOOPT). A
 * pooled connection that fails before any byte of the response came (the
 * server had closed it) is retried once on a new connection, for
 * idempotent methods only (GET, HEAD, OPTIONS, PUT, DELETE, TRACE) and
 * streamed bodies never.
 *
 * Over HTTP/2 (the server chose h2; or h2c, asked for): the request
 * takes a stream on a connection of the origin's that has room - the
 * server's SETTINGS_MAX_CONCURRENT_STREAMS and h2_max_streams - or a new
 * one is dialled (requests that come meanwhile wait for that dial rather
 * than dial each); its head and fields as above (names in lower case,
 * Host as :authority; TE only as "trailers"), its body framed from the
 * caller's buffer or body_read's chunks, the answer read into the same
 * result. A request the server never processed - REFUSED_STREAM, or past
 * its GOAWAY - goes again on another connection, twice at most (never a
 * streamed body begun). A response's window is credited as it is read.
 *
 * Redirects are followed only when req->max_redirects says so: the
 * Location resolved against the URL (RFC 3986: relative ones too), 303
 * (and 301, 302 of a POST) becoming a GET without body, 307 and 308
 * keeping method and body; the fields given go along, except
 * Authorization, Proxy-Authorization and Cookie once the origin changes.
 *
 * The response must be HTTP/1.0 or 1.1 and framed as RFC 9112 6.3 says:
 * no body for HEAD, 1xx, 204 and 304; chunked; Content-Length; else until
 * the close (the connection is then not kept, nor one of an HTTP/1.0
 * response without keep-alive, nor one answered Connection: close).
 * -EBADMSG for anything two readers could frame differently: a bare CR or
 * LF, obs-fold, whitespace before a colon, a field byte that is a
 * control, a Content-Length that is not one plain number (twice, even
 * equal, or a list), Content-Length with Transfer-Encoding, a coding
 * other than chunked, Transfer-Encoding in HTTP/1.0, or in a 1xx or 204
 * response, a status line other than "HTTP/1.x NNN reason" (status 100 to
 * 599; the space before an empty reason included), more than 16 interim
 * responses, a 101, a Location that is no URL.
 *
 * A body that may not fit the sockets' buffers at once (streamed, or
 * fixed over 64 KiB) goes out while another fiber reads the answer's
 * head: a final answer of 300 and up, or one that closes, stops the body
 * and is returned (RFC 9112 9.3: a 413 after the head, say); its
 * connection is not kept. An early 2xx waits for the body to be sent.
 *
 * Deadlines: deadline_ns bounds the whole exchange - lookup, connect,
 * handshake (also bounded by connect_timeout_ns), writing, the head (also
 * head_timeout_ns from the request sent) - and later the body's reads
 * (each also read_idle_ns); timed_out says which ended a call; the
 * fiber's own deadline and its cancellation apply as to every call of the
 * runtime. On any error no connection is left behind.
 *
 * Fiber context. Returns 0 and *res (close it with
 * runtime_http_result_close), or an error, *res NULL: -EINVAL (a bad URL,
 * method, field, or body NULL with body_len), -EPROTONOSUPPORT (a scheme
 * other than http and https, here or in a Location), -EPERM (not a fiber),
 * name resolution's (-ENOENT, -EAGAIN...), connect's (-ECONNREFUSED...),
 * TLS's (-EKEYREJECTED, -ENOPROTOOPT: runtime_conn_tls_connect),
 * -ECONNRESET or -EPIPE (the connection broke, or was closed before the
 * whole head came), -EBADMSG (above), -EMSGSIZE (over a limit: the status
 * line over line_max, the head over head_max, more fields than
 * headers_max, a Content-Length over body_max), -ETIMEDOUT, -ECANCELED,
 * -ELOOP (more redirects than max_redirects), -ESHUTDOWN (the client is
 * being destroyed), -ENOMEM, or body_read's.
 */
RUNTIME_API int runtime_http_request(struct runtime_http_client *cl,
                                     const struct runtime_http_client_request *req,
                                     struct runtime_http_result **res);
/* GET url: runtime_http_request with defaults. */
RUNTIME_API int runtime_http_get(struct runtime_http_client *cl, const char *url,
                                 struct runtime_http_result **res);

/*
 * A result belongs to the fiber that got it (its connection to the
 * fiber's core) until it is closed; its fields are valid until then.
 */
/* The status (100 .. 599), and the minor version (0 or 1; a response of
 * 1.2 and up is read as 1.1). -EINVAL: NULL. */
RUNTIME_API int runtime_http_result_status(const struct runtime_http_result *res);
RUNTIME_API int runtime_http_result_minor(const struct runtime_http_result *res);
/* The protocol: 10, 11 or 20 (HTTP/2). -EINVAL: NULL. */
RUNTIME_API int runtime_http_result_version(const struct runtime_http_result *res);
/* As runtime_http_header / _count / _at, of the response. */
RUNTIME_API const struct runtime_http_slice *runtime_http_result_header(const struct runtime_http_result *res,
                                                                        const char *name);
RUNTIME_API unsigned runtime_http_result_header_count(const struct runtime_http_result *res);
RUNTIME_API int runtime_http_result_header_at(const struct runtime_http_result *res, unsigned index,
                                              struct runtime_http_slice *name,
                                              struct runtime_http_slice *value);
/* The body's length: Content-Length's value (of a HEAD's or a 304's too,
 * though no body follows), 0 for a 204 without one, or -1 when it is not
 * known: chunked, close-delimited, or a HEAD's or 304's answer without
 * Content-Length (which 0 would claim was empty). */
RUNTIME_API int64_t runtime_http_result_length(const struct runtime_http_result *res);
/*
 * Up to len body bytes, decoded (chunked framing removed), under the
 * request's deadline. Returns > 0, 0 at the body's end, or an error
 * (sticky): -EPIPE (the server cut the body short - closed or reset
 * before its end, or closed TLS without close_notify; a body delimited by
 * the close of plain TCP cannot be told from a cut one), -EBADMSG (bad
 * chunked framing or trailers), -EMSGSIZE (over body_max), the read's
 * (-ETIMEDOUT, -ECANCELED...), -EINVAL. Fiber context, the fiber that
 * got the result.
 */
RUNTIME_API ssize_t runtime_http_result_read(struct runtime_http_result *res, void *buf, size_t len);
/* The whole body into a malloc'd buffer (*body, NUL-terminated after *len
 * bytes; free it), at most max bytes (else -EMSGSIZE). As
 * runtime_http_result_read otherwise; -ENOMEM. */
/* After a 101 to a request with upgrade: the connection, now the
 * caller's to read and write (no deadline left on it) until the result
 * is closed - which closes it - and the bytes the server sent after its
 * 101, read already: take them first. -EINVAL: NULL, or no 101. Fiber
 * context, the fiber that got the result. */
RUNTIME_API int runtime_http_result_upgraded(struct runtime_http_result *res,
                                             struct runtime_http_upgraded *up);
/* Which RUNTIME_HTTP_TIMEOUT_* made the body's reads fail -ETIMEDOUT:
 * IDLE (read_idle_ns), TOTAL (deadline_ns), else NONE. */
RUNTIME_API int runtime_http_result_timeout(const struct runtime_http_result *res);
RUNTIME_API int runtime_http_result_read_all(struct runtime_http_result *res, char **body,
                                             size_t *len, size_t max);
/*
 * Done with it: the connection goes back to its pool if the body was read
 * to its end (the rest of one not read is read first, if at most 64 KiB
 * of it is left and it comes within 100 ms) and the server let it stay
 * open; else it is closed. NULL is a no-op. Fiber context, the fiber that
 * got the result.
 */
RUNTIME_API void runtime_http_result_close(struct runtime_http_result *res);

struct runtime_http_client_stats {
	uint64_t connects;        /* new connections made */
	uint64_t reused;          /* requests sent on a pooled connection */
	uint64_t retried;         /* requests retried after a pooled one failed */
	uint64_t requests;        /* requests sent (each try, each redirect) */
	uint64_t dropped;         /* pooled connections closed when a request
	                             came to take them: past idle_timeout_ns,
	                             closed by the server, or holding bytes it
	                             sent unasked (never read as an answer) */
	uint64_t h2_requests;     /* requests sent over HTTP/2 (of requests) */
};
/* Counters since create, summed over cores (each read atomically, not all
 * at one instant). Any thread. Zeroed for a NULL cl. */
RUNTIME_API void runtime_http_client_stats(const struct runtime_http_client *cl,
                                           struct runtime_http_client_stats *st);

/* ================================================================= proxy */

/*
 * A reverse proxy, as a handler: each request goes on to one upstream
 * through a client (and its pools), and the answer comes back, both
 * bodies streamed. The request's head is rebuilt: its path cleaned
 * (runtime_http_path_clean) and its prefix stripped, the hop-by-hop
 * fields dropped (Connection and every name it lists, Keep-Alive,
 * Proxy-Connection, Proxy-Authenticate, Proxy-Authorization, TE, Trailer,
 * Transfer-Encoding, Upgrade; Expect and Host are the proxy's own hop:
 * Host is the upstream's, the client's goes as X-Forwarded-Host), the
 * forwarding fields set by policy, HTTP/2's split Cookie fields joined. A
 * body of known length keeps it (Content-Length: read whole first up to
 * 64 KiB, so that a bodiless or small idempotent request is retried once
 * when a pooled connection broke before any byte came back; streamed
 * beyond), chunked only when unknown. The answer's status, fields (less
 * the hop-by-hop ones, Date and Server, which are this server's, and
 * hide_headers) and body go back as they come, its length kept.
 * An upstream that fails - refused, reset, a broken answer, a body cut
 * short before the answer began - is 502 (503 once the client is being
 * destroyed); one that is late (its
 * head_timeout_ns, or the fiber's deadline) 504; a request body the
 * client fails to send ends as the server ends such requests (408, 413,
 * 400). When the client goes away mid-answer the upstream's connection
 * is closed. The error's reason is logged on log_fd. A request that asks
 * to switch protocols (Upgrade: websocket) asks the upstream the same;
 * its 101 is passed on and bytes then copied both ways until both sides
 * close.
 */
struct runtime_http_proxy;
struct runtime_http_proxy_out; /* the upstream request, being made */

enum runtime_http_forwarded {
	RUNTIME_HTTP_FORWARD_APPEND,  /* X-Forwarded-For (and Forwarded) with
	                                 the client's address appended to what
	                                 came; X-Forwarded-Proto and -Host set
	                                 unless the request had them (default) */
	RUNTIME_HTTP_FORWARD_REPLACE, /* what came dropped, ours alone: a proxy
	                                 at the edge, whose clients' claims are
	                                 not to be trusted */
	RUNTIME_HTTP_FORWARD_PASS,    /* passed on as they came, none added */
};

struct runtime_http_proxy_config {
	struct runtime_http_client *client; /* required; the caller's, outliving
	                                       the proxy */
	const char *upstream;      /* required: "http://host[:port]" or https:,
	                              with a path to prepend if any ("/v2"); copied */
	const char *strip_prefix;  /* a path prefix ("/api/a") cut from each
	                              request's path (the cleaned one) before
	                              it is appended: "/api/a/x" goes as "/x";
	                              a path outside it is answered 404; copied */
	int forwarded;             /* an enum runtime_http_forwarded (APPEND) */
	int rfc7239;               /* nonzero: also Forwarded: for=;proto=;host= */
	int no_path_clean;         /* nonzero: the path goes as it came */
	uint64_t head_timeout_ns;  /* the upstream's answer's head must come this
	                              long after the request was sent (0: none,
	                              the fiber's deadline only); late: 504 */
	uint64_t read_idle_ns;     /* the upstream's body: no byte for this long
	                              ends the answer (0: none) */
	const char *const *hide_headers; /* names of the upstream's fields not
	                              passed back, NULL-terminated (the caller's:
	                              outlives the proxy) */
	/* Called before the request goes: may change its URL and fields
	 * (runtime_http_proxy_set_url, _add_header, _remove_header). Returns
	 * 0 to send it, 1 if it answered res itself (a 403, say), < 0 as a
	 * handler's error. NULL: none. */
	int (*rewrite_request)(struct runtime_http_request *req, struct runtime_http_response *res,
	                       struct runtime_http_proxy_out *out, void *arg);
	/* Called once the upstream's head came, before res starts: may add
	 * fields (runtime_http_set_header). Returns 0 to pass the answer on,
	 * 1 if it answered res itself, < 0 for a 502. NULL: none. */
	int (*rewrite_response)(struct runtime_http_request *req, struct runtime_http_result *up,
	                        struct runtime_http_response *res, void *arg);
	void *hook_arg;
	int log_fd;                /* why an upstream failed, a line a time
	                              (runtime_log; 2: standard error; -1: none) */
};
/* The defaults: as the comments say. Any thread. */
RUNTIME_API void runtime_http_proxy_config_init(struct runtime_http_proxy_config *cfg);
/*
 * Make a proxy. Any thread. Returns 0, -EINVAL (NULL cl or client, an
 * upstream that is no http or https URL or has a query, a strip_prefix
 * not starting with '/', an unknown forwarded), -ENOMEM.
 */
RUNTIME_API int runtime_http_proxy_create(struct runtime_http_proxy **px,
                                          const struct runtime_http_proxy_config *cfg);
/* Once no request uses it. NULL is a no-op. Any thread. */
RUNTIME_API void runtime_http_proxy_destroy(struct runtime_http_proxy *px);
/*
 * Proxy one request: a runtime_http_handler (arg: the proxy), to route to
 * or to call from one's own (after a rate limit, say). Returns as a
 * handler: 0 once answered (502 and 504 included), or the request body's
 * error, -ECANCELED, -ENOMEM. Handler's fiber.
 */
RUNTIME_API int runtime_http_proxy_handler(struct runtime_http_request *req,
                                           struct runtime_http_response *res, void *px);
/* In rewrite_request: the URL to send to instead (copied), a field to add
 * ("Name: value", copied; the client's rules), every field called name
 * to drop. Return 0, -EINVAL, -ENOSPC (more than 72 fields), -ENOMEM. */
RUNTIME_API int runtime_http_proxy_set_url(struct runtime_http_proxy_out *out, const char *url);
RUNTIME_API int runtime_http_proxy_add_header(struct runtime_http_proxy_out *out,
                                              const char *field);
RUNTIME_API int runtime_http_proxy_remove_header(struct runtime_http_proxy_out *out,
                                                 const char *name);
/* The URL being sent to (NUL-terminated), for a hook. */
RUNTIME_API const char *runtime_http_proxy_url(const struct runtime_http_proxy_out *out);

/* =============================================================== metrics */

struct runtime_metrics;

/*
 * The server's figures into a registry (<runtime_metrics.h>), with a label
 * server="name": its connections' (runtime_metrics_add_server), and
 * runtime_http_server_requests_total{method} (GET, HEAD, POST, PUT,
 * DELETE, other), _responses_total{code} (1xx..5xx), _rejected_total,
 * _received_bytes_total, _sent_bytes_total (HTTP/1.1 and HTTP/2) and
 * _request_duration_seconds, a histogram of 16 buckets from 100 us to
 * 10 s (head parsed to response queued; an HTTP/2 stream's to its
 * handler's end); for a TLS server runtime_tls_handshakes_total{result}
 * (full, resumed, failed: runtime_tls_stats of its context). The server counts
 * them per core as it serves; a render sums them. Methods and durations
 * are not counted with no_metrics. srv must outlive the registry's
 * renders. Any thread. Returns 0, -EINVAL, -EEXIST (that name again),
 * -ENOSPC, -ENOMEM.
 */
RUNTIME_API int runtime_http_metrics_add_server(struct runtime_metrics *reg,
                                                const struct runtime_http_server *srv,
                                                const char *name);

/*
 * The client's figures, from runtime_http_client_stats, with a label
 * client="name": runtime_http_client_requests_total, _pool_hits_total (requests on a
 * pooled connection), _pool_misses_total (new connections),
 * _retries_total, _pool_dropped_total, _h2_requests_total. cl must
 * outlive the registry's renders. Any thread. Returns 0, -EINVAL,
 * -ENOSPC, -ENOMEM.
 */
RUNTIME_API int runtime_http_metrics_add_client(struct runtime_metrics *reg,
                                                const struct runtime_http_client *cl,
                                                const char *name);

/*
 * A handler (runtime_http_handler) that answers any request with the
 * exposition of the registry arg points at (runtime_metrics_render):
 * 200, Content-Type "text/plain; version=0.0.4; charset=utf-8". Route
 * "/metrics" to it. Its fiber renders, on its core, without yielding:
 * about 50 ns a line with 8 cores (runtime_metrics_render). Returns as runtime_http_respond; -ENOMEM (500).
 */
RUNTIME_API int runtime_http_metrics_handler(struct runtime_http_request *req,
                                             struct runtime_http_response *res, void *reg);

/*
 * A readiness handler (runtime_http_handler) for load balancers and
 * systemd-less probes: 200 "ok" while serving, 503 "draining" (and the
 * connection closes after it) from the moment a drain begins
 * (runtime_drain; runtime_draining), so that a balancer stops sending
 * before the sockets close. rt is the runtime to watch; NULL: the
 * handler's own. Route "/healthz" or "/ready" to it. Returns as
 * runtime_http_respond.
 */
RUNTIME_API int runtime_http_health_handler(struct runtime_http_request *req,
                                            struct runtime_http_response *res, void *rt);

#ifdef __cplusplus
}
#endif

#endif /* RUNTIME_HTTP_H */
