/* SPDX-License-Identifier: MIT */
/*
 * http.h - libruntime-http's insides, shared by its files:
 *
 *   parser.c    the strict request parser and the chunked decoder (parser.h)
 *   server.c    runtime_http_serve: configuration, counters, serving
 *   conn.c      one fiber per connection: heads, the requests made ready
 *               for their handlers, bodies, the output batch
 *   buffers.c   each core's connection buffers, outside malloc's heap
 *   response.c  status lines and fields, fixed, streamed and file bodies
 *   request.c   what a handler reads of a request; decoding helpers
 *   client.h    the client's own insides (its files are listed there)
 *
 * Nothing here is exported: the library's calls are runtime_http.h's.
 */
#ifndef RUNTIME_HTTP_INTERNAL_H
#define RUNTIME_HTTP_INTERNAL_H

#include <runtime_http.h>
#include <runtime_metrics.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "count.h"
#include "parser.h"

#define HTTP_IN_SIZE (16 * 1024)  /* a connection's read buffer */
#define HTTP_OUT_SIZE (16 * 1024) /* its batch of responses */
#define HTTP_FIELDS_INLINE 4096   /* a response's own fields, in place */
#define HTTP_FIELDS_OUT_DEFAULT (64 * 1024) /* and in all (fields_out_max) */
#define HTTP_FIELDS_OUT_MOST (16u << 20)
#define HTTP_HEAD_MAX_MAX (1 << 20)

#define HTTP_HOT 8 /* connection buffers a core keeps resident for good */

struct http_decay;

/* A core's connection buffers (buffers.c). */
struct http_buffers {
	void **hot;                  /* resident and ready, the last given back on top */
	size_t nhot;
	size_t hot_low;              /* nhot's low-water mark this decay period */
	void **clean;                /* pages given back, addresses kept */
	size_t nclean;
	void **slabs;                /* every mapping, for the end */
	size_t nslabs;
	size_t size;                 /* one buffer, whole pages */
	struct http_decay *decay;    /* its timer, NULL: never armed */
};

void *runtime__http_buffer_get(struct http_buffers *b, size_t size);
void runtime__http_buffer_put(struct http_buffers *b, void *p);
void runtime__http_buffers_free(struct http_buffers *b);

#define HTTP_SERVER_FIELD_MAX 96 /* "Server: NAME\r\n" */

/*
 * What a core's responses start with (response.c): a 200's status line,
 * the Server field and the Date field, made again when the second moves
 * (the Date changes no faster); then the Content-Type field line the
 * core's responses last sent: handlers answer with a few types, and
 * telling that a value is that one again costs less than checking it
 * again. Last, the tail a keep-alive 200 of that type with a length and
 * no fields of its own ends with: its Content-Length line (the core's
 * last length, patched when another comes) and the empty line. Such a
 * 200 copies all of it at once; another 200 the start and its type line,
 * any other status its own line and then the rest.
 */
#define HTTP_CLIENT_CLOSED 499   /* logged for a client gone mid-request (nginx's) */
#define HTTP_TYPE_MAX 256        /* a Content-Type value's length, at most */
#define HTTP_TYPE_NAME "Content-Type: "
#define HTTP_TAIL_NAME "Content-Length: "

struct http_head_start {
	time_t second;               /* 0: not made yet */
	size_t len;                  /* the status line, Server and Date */
	size_t type_len;             /* the Content-Type line after them */
	char type_value[HTTP_TYPE_MAX + 1]; /* its value, "": none yet */
	size_t tail_len;             /* the end after the type line, 0: none */
	uint64_t tail_length;        /* its Content-Length */
	char text[sizeof("HTTP/1.1 200 OK\r\n") - 1 + HTTP_SERVER_FIELD_MAX +
	          sizeof("Date: \r\n") - 1 + 32 +
	          sizeof(HTTP_TYPE_NAME "\r\n") - 1 + HTTP_TYPE_MAX +
	          sizeof(HTTP_TAIL_NAME "\r\n\r\n") - 1 + 20];
};

/* A server's share of one core, a cache line each: its counts, written by
 * that core only (no locked adds) and read relaxed by the stats; and what
 * only the core's thread touches - its connection buffers and the response
 * cache, kept here rather than per thread so that neither a second server
 * nor a late dlopen's static TLS is a concern. */
#define HTTP_METHOD_CLASSES 6   /* GET HEAD POST PUT DELETE, other */
#define HTTP_DURATION_BUCKETS 16 /* runtime__http_duration_ns; +Inf after */

struct http_core {
	_Atomic uint64_t requests, rejected, responses[6];
	/* For the metrics (metrics.c): bytes read and written on HTTP/1.1
	 * connections; unless no_metrics, requests by method class and
	 * their durations (head parsed to response queued, ns). */
	_Atomic uint64_t bytes_in, bytes_out, methods[HTTP_METHOD_CLASSES];
	_Atomic uint64_t duration[HTTP_DURATION_BUCKETS + 1], duration_ns;
	struct http_buffers buffers;
	struct http_head_start head;
	time_t h2_date_second;       /* HTTP/2's Date value, made again when */
	char h2_date[32];            /* the second moves (h2_stream.c) */
} __attribute__((aligned(64)));


struct runtime_http_server {
	struct runtime_http_server_config cfg;
	struct runtime *rt;
	struct http_limits limits;
	struct runtime_server *base; /* runtime_serve's, NULL: create only */
	struct runtime_tls_serve tls; /* the caller's TLS serving, offering h2
	                                 by ALPN (server.c) */
	struct http_core *cores;
	unsigned ncores;
	size_t server_len;
	char server_field[HTTP_SERVER_FIELD_MAX]; /* "Server: NAME\r\n" or "" */
	_Atomic bool stopping;       /* as if draining: answers close, idle
	                                connections end (the fuzz targets' drain,
	                                which cannot drain their one runtime) */
};

struct runtime_metrics;
struct runtime_metric_desc;
struct runtime_metric;
/* The series of d's family for owner="name" (owner: server or client),
 * and label="value" if label is not NULL (metrics.c). */
int runtime__http_metric_series(struct runtime_metrics *reg, struct runtime_metric_desc *d,
                                const char *owner, const char *name, const char *label,
                                const char *value, struct runtime_metric **out);

/* The upper bounds of the duration buckets, ns (server.c). */
extern const uint64_t runtime__http_duration_ns[HTTP_DURATION_BUCKETS];

/* A method's class: 0 GET, 1 HEAD, 2 POST, 3 PUT, 4 DELETE, 5 other. */
static inline unsigned http_method_class(const char *p, size_t len)
{
	switch (len) {
	case 3:
		return memcmp(p, "GET", 3) == 0 ? 0 : memcmp(p, "PUT", 3) == 0 ? 3 : 5;
	case 4:
		return memcmp(p, "HEAD", 4) == 0 ? 1 : memcmp(p, "POST", 4) == 0 ? 2 : 5;
	case 6:
		return memcmp(p, "DELETE", 6) == 0 ? 4 : 5;
	}
	return 5;
}

/* An HTTP/1.x request's method class: its request line has a space after
 * the method, so GET - nearly every request - is one 4-byte compare. */
static inline unsigned http1_method_class(const char *p, size_t len)
{
	uint32_t word, get;

	memcpy(&word, p, 4);
	memcpy(&get, "GET ", 4);
	return len == 3 && word == get ? 0 : http_method_class(p, len);
}

/* A request's duration into its core's histogram: most are fast, so the
 * scan from the smallest bound ends after a compare or two. */
static inline void http_duration(struct http_core *core, uint64_t ns)
{
	unsigned i = 0;

	while (i < HTTP_DURATION_BUCKETS && ns > runtime__http_duration_ns[i])
		i++;
	http_count(&core->duration[i]);
	http_count_n(&core->duration_ns, ns);
}

static inline bool http_stopping(const struct runtime_http_server *srv)
{
	return atomic_load_explicit(&srv->stopping, memory_order_relaxed) ||
	       runtime_draining(srv->rt);
}

/* The connection: its buffers and where the current exchange stands. */
struct http_conn {
	struct runtime_http_server *srv;
	struct runtime_conn *rc;
	struct http_core *core;      /* its fiber's (a fiber never migrates):
	                                the counts, the buffer, the caches */
	size_t keep;                 /* in[0..keep): the pinned head */
	size_t in_off, in_len;       /* unparsed input: in[in_off..in_len) */
	size_t in_size;
	size_t out_len;
	uint64_t head_start;         /* first byte of the pending head, or 0 */
	bool broken;                 /* an error: close after this response */
	bool may_idle;               /* runtime_serve's: it may wait with no fiber */
	bool idle_now;               /* release_after 0: wait so at once */
	bool linger;                 /* input may be left unread: finish, then
	                                close (else the kernel resets, and the
	                                last answer may be lost) */
	signed char idle;            /* what runtime_conn_set_idle was told
	                                last (-1: not known) */
	bool swept;                  /* an idle read needs no deadline (conn.c) */
	bool first;                  /* no request served yet by this fiber:
	                                the h2c preface may come */
	bool after_each;             /* the server's on_response or no_batch:
	                                work after each answer (conn.c) */
	unsigned char wr_keep;       /* may wr_told be kept? (HTTP_WR_*) */
	bool timed;                  /* the server keeps metrics (!no_metrics) */
	bool sock_nonblocking;       /* file.c made the socket O_NONBLOCK */
	bool watched;                /* the handler is cancelled if the client
	                                leaves (runtime_conn_cancel_on_close) */
	bool gone;                   /* ... and it left: the watch fired */
	runtime_serve_fn *hand_off;  /* runtime__http_hand_off's, or NULL */
	void *hand_off_arg;
	uint64_t started;            /* the request's start, 0: none timed */
	/* Set by conn_new one by one, not zeroed with the above: */
	uint64_t idle_end;           /* the idle deadline of the last wait */
	uint64_t rd_deadline;        /* what runtime_conn_set_read_deadline was
	                                told last (HTTP_DEADLINE_UNKNOWN) */
	uint64_t wr_end;             /* the deadline the writes run under */
	uint64_t wr_told;            /* what runtime_conn_set_write_deadline was
	                                told last, not later than wr_end (0:
	                                not known, tell it) */
	char out[HTTP_OUT_SIZE];
	char in[];                   /* in_size: head_max and room for a body */
};

/* Not a deadline the library sets (0, or now + a timeout: the monotonic
 * clock is far past 1 ns): runtime_conn_set_read_deadline's last value is
 * not known. */
#define HTTP_DEADLINE_UNKNOWN 1

/* The connection's read deadline, told the runtime only when it changes:
 * while the library serves a connection, it alone sets that deadline (a
 * handler's runtime_http_conn is for the peer and TLS state), and here. */
static inline void http_read_deadline(struct http_conn *c, uint64_t deadline)
{
	if (c->rd_deadline != deadline) {
		runtime_conn_set_read_deadline(c->rc, deadline);
		c->rd_deadline = deadline;
	}
}

/*
 * The deadline the connection's writes run under from now on (never 0:
 * the library's are now + a timeout, saturating). runtime__http_write_out tells it
 * the runtime only when what it was told is later or not known: an
 * earlier one it was told (an earlier answer's - the deadlines only move
 * on) that ends a write makes it tell wr_end and write on, so that a
 * write times out at wr_end and never before, and keep-alive answers make
 * no call for it. Through a layer (TLS) a write cut short may report its
 * bytes taken, some unsent: there wr_end is told every time (wr_keep
 * HTTP_WR_NO). That is asked at a fiber's second tell, not its first: one
 * that serves a single request (release_after 0) asks nothing.
 */
enum { HTTP_WR_FIRST, HTTP_WR_SECOND, HTTP_WR_YES, HTTP_WR_NO };

static inline void http_write_deadline(struct http_conn *c, uint64_t deadline)
{
	c->wr_end = deadline;
}

struct h2_stream;
struct h2_conn;

struct runtime_http_request {
	struct http_conn *conn;      /* HTTP/1.1's, NULL for HTTP/2 */
	struct h2_stream *h2;        /* HTTP/2's, NULL for HTTP/1.1 */
	struct http_request head;    /* slices into conn->in, pinned */
	size_t body_start;           /* where the body's bytes begin in conn->in */
	uint64_t body_left;          /* Content-Length bytes not yet read */
	struct http_chunked chunked;
	bool body_done, continued;
	bool answered;               /* a response has started: no 100 any more */
	int body_error;              /* sticky: the first body error */
	uint64_t body_since;         /* the body's first read (0: none yet) */
	uint64_t body_got;           /* body bytes the handler has read */
	uint64_t start;              /* its head's first byte seen, or parsed */
	uint64_t bytes_in;           /* head and body bytes read (h2: decoded) */
	void *data;                  /* the user's (runtime_http_request_data) */
};

enum http_res_state { RES_NONE, RES_STREAM, RES_DONE };

struct runtime_http_response {
	struct http_conn *conn;      /* as the request's */
	struct h2_stream *h2;
	struct runtime_http_request *req;
	struct http_core *core;      /* its fiber's core: the counts */
	enum http_res_state state;
	bool head_only, close, chunked, no_body;
	int status;
	int64_t length;              /* declared, -1: chunked or to close */
	uint64_t sent;               /* body bytes */
	uint64_t head_bytes;         /* its head's (HTTP/1.1; h2: 0) */
	size_t fields_len;
	size_t fields_max;           /* the server's fields_out_max */
	char *spill;                 /* fields past HTTP_FIELDS_INLINE, all of
	                                them (NULL: in fields[]); freed when
	                                the next request makes it ready */
	size_t spill_cap;
	char fields[HTTP_FIELDS_INLINE];
};

/* The response's own fields, "Name: value\r\n" each: fields_len bytes. */
static inline char *http_fields(struct runtime_http_response *res)
{
	return res->spill ? res->spill : res->fields;
}

static inline void http_response_release(struct runtime_http_response *res)
{
	free(res->spill);
	res->spill = NULL;
	res->spill_cap = 0;
}

/* conn.c */
/* Serve rc; the caller closes it after - unless may_idle (runtime_serve's
 * connections) and it waits between requests with no fiber
 * (runtime_conn_idle): runtime_serve then calls the handler again. */
void runtime__http_conn_serve(struct runtime_http_server *srv, struct runtime_conn *rc,
                              bool may_idle);
int runtime__http_flush(struct http_conn *c);
int runtime__http_write_out(struct http_conn *c, const void *p, size_t len);
ssize_t runtime__http_fill(struct http_conn *c, uint64_t deadline);
bool runtime__http_unwatch(struct http_conn *c);
/* When the protocol an upgraded connection was handed off to may wait
 * with no fiber (runtime_conn_idle): never (runtime_http_serve_conn's
 * caller goes on with the connection after it), at once, or once a read
 * has been quiet for the server's release_after (-EAGAIN), as an HTTP
 * connection does: a busy one keeps its fiber. */
enum http_idle_way {
	HTTP_IDLE_NEVER,
	HTTP_IDLE_AT_ONCE,
	HTTP_IDLE_WHEN_QUIET,
};

/* After runtime_http_upgrade, from the handler: once it returns, the
 * library's own end of the connection (its flush, close) is skipped and
 * fn(conn, arg) runs in the connection's fiber instead, which is then
 * fn's; a connection of runtime_serve's is closed when fn returns
 * without waiting. Returns how fn may wait. */
enum http_idle_way runtime__http_hand_off(struct runtime_http_response *res,
                                          runtime_serve_fn *fn, void *arg);
void runtime__http_not_idle(struct http_conn *c);
uint64_t runtime__http_deadline_in(uint64_t ns);
/* When a read of req's body must be done: idle_timeout from now, or
 * sooner if the body would fall below body_min_rate by then. */
uint64_t runtime__http_body_deadline(const struct runtime_http_server *srv,
                                     struct runtime_http_request *req);
struct http_core *runtime__http_core(struct runtime_http_server *srv);

struct http_conn *runtime__http_conn_new(struct runtime_http_server *srv, struct runtime_conn *rc);
void runtime__http_conn_free(struct http_conn *c);

/* HTTP/2 (h2.h), what the files above call. Serve a connection that
 * chose h2 (h NULL: a new one; else one that waited idle). */
void runtime__h2_serve(struct http_conn *io, struct h2_conn *h);
/* Do p[0..n) begin as the h2c preface does? */
bool runtime__h2_preface(const char *p, size_t n);
/* The handler's calls on an HTTP/2 stream, after the checks that do not
 * depend on the protocol. */
ssize_t runtime__h2_body_read(struct runtime_http_request *req, void *buf, size_t len);
int runtime__h2_begin(struct runtime_http_response *res, int status, const char *type,
                      int64_t length, bool fixed, const void *body);
int runtime__h2_write(struct runtime_http_response *res, const void *buf, size_t len);
int runtime__h2_end(struct runtime_http_response *res);
struct runtime_conn *runtime__h2_conn(const struct runtime_http_request *req);

/* response.c */
/* "404 Not Found\n" into buf: its length. */
/* The request's peer address as text into out ("192.0.2.1",
 * "2001:db8::1"; none if not IP: a Unix socket, a test's), and its family
 * (AF_UNSPEC if not known). access_log.c; the proxy's forwarding too. */
int runtime__http_peer_address(const struct runtime_http_request *req, char *out, size_t cap,
                               const char *none);
int runtime__http_status_text(int status, char *buf, size_t size);
int runtime__http_refuse(struct http_conn *c, int status);
/* Does the field value v hold token (comma-separated, any case)? */
bool runtime__http_has_token(struct runtime_http_slice v, const char *token);
/* Did req ask for protocol: an Upgrade field naming it, and "upgrade"
 * among the Connection field's options (RFC 9110 7.8)? */
bool runtime__http_upgrade_asked(const struct runtime_http_request *req, const char *protocol);
int runtime__http_send_continue(struct http_conn *c);
int runtime__http_response_finish(struct runtime_http_response *res, int handler_rc);
/* v[0..n) is a field value a client takes: field bytes (no control but
 * HTAB), no whitespace at either end. */
bool runtime__http_field_value_ok(const char *v, size_t n);

/* request.c */
int runtime__http_body_discard(struct runtime_http_request *req);

/* access_log.c: after every response, refusals too: the access log line
 * (access_log_format), then on_response. */
void runtime__http_responded(const struct runtime_http_server *srv,
                             const struct runtime_http_request *req,
                             const struct runtime_http_response *res);

/* A response's request for its answer: what it says of HEAD and the
 * connection's fate (req NULL: the library's own answers, which close),
 * the rest unanswered. Its framing (length, chunked, no_body) is left:
 * nothing reads it before the answer begins and sets it. */
static inline void http_response_ready(struct runtime_http_response *res,
                                       const struct runtime_http_request *req)
{
	res->state = RES_NONE;
	res->head_only = req && req->head.method.len == 4 && !memcmp(req->head.method.p, "HEAD", 4);
	res->close = !req || !req->head.keep_alive;
	res->status = 0;
	res->sent = 0;
	res->head_bytes = 0;
	res->fields_len = 0;
	if (__builtin_expect(res->spill != NULL, 0))
		http_response_release(res); /* the last head is out */
}

/* A response's links (conn, req, core). A connection's requests each
 * take the one response, linked once and made ready (http_response_ready)
 * per request, once its head is read (conn.c): before, req's head is not
 * there to read. */
static inline void http_response_init(struct runtime_http_response *res, struct http_conn *c,
                                      struct runtime_http_request *req, struct http_core *core,
                                      const struct runtime_http_server *srv)
{
	res->conn = c;
	res->h2 = NULL;
	res->req = req;
	res->core = core;
	res->fields_max = srv->cfg.fields_out_max;
	res->spill = NULL;
	res->spill_cap = 0;
}

#endif
