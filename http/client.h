/* SPDX-License-Identifier: MIT */
/*
 * client.h - the client's insides, shared by its files:
 *
 *   url.c              URLs: parsing, and a Location resolved against one
 *   pool.c             per-core keep-alive pools, dialling, closing
 *   client.c           a request: its head and body out, the response head
 *                      in, retries and redirects
 *   result.c           what a caller reads of a response: fields, the body
 *   response_parser.c  the strict response-head parser (response_parser.h)
 *
 * Ownership: a connection (struct http_cconn) belongs to the core that
 * dialled it and is used by one fiber at a time - the one whose request
 * or result holds it - or sits idle in that core's pool, where only that
 * core's fibers look. The result of a request lives inside its
 * connection (its fields point into the connection's buffer), so a
 * request allocates nothing once connections are pooled.
 */
#ifndef HTTP_CLIENT_H
#define HTTP_CLIENT_H

#include <runtime_http.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "count.h"
#include "parser.h"
#include "response_parser.h"

#define HTTP_CLIENT_IN_MIN (16 * 1024) /* a connection's read buffer, at least */
#define HTTP_CLIENT_OUT (4 * 1024)     /* its request head buffer (more: malloc) */
#define HTTP_HOST_MAX 253              /* a DNS name's longest text form */
#define HTTP_ORIGIN_BUCKETS 64         /* per core: origins hashed */

/* ------------------------------------------------------------------ urls */

struct http_url {
	bool https;
	uint16_t port;               /* given, or the scheme's */
	bool default_port;           /* the scheme's: left out of Host */
	bool ip6;                    /* host was an IP-literal "[...]" */
	struct http_slice host;      /* without the brackets of an IP-literal */
	struct http_slice target;    /* path and query as written, fragment cut */
	bool slash;                  /* the path is empty: send "/" + target */
};

/* Parse an absolute http or https URL: 0, -EINVAL (not one, userinfo,
 * bad bytes or escapes, empty host, port 0 or above 65535),
 * -EPROTONOSUPPORT (another scheme). Slices point into url. */
int runtime__http_url_parse(const char *url, struct http_url *u);

/* ref (a Location) resolved against the absolute URL base (RFC 3986 5.2),
 * its fragment dropped, into *out (malloc'd, NUL-terminated): 0 or
 * -ENOMEM. The result is checked when it is parsed. */
int runtime__http_url_resolve(const char *base, struct http_slice ref, char **out);

/* ----------------------------------------------------------- connections */

struct http_client_core;

struct h2_cstream;

struct runtime_http_result {
	struct http_client_core *core; /* its live count */
	struct http_cconn *conn;     /* HTTP/1.1's, NULL over HTTP/2 */
	struct h2_cstream *h2;       /* HTTP/2's stream, NULL over HTTP/1.1 */
	struct http_response head;   /* slices into conn->in[0..keep) */
	uint64_t body_left;          /* LENGTH: bytes still to come */
	uint64_t body_got;           /* CLOSE: bytes so far (body_max) */
	struct http_chunked chunked;
	uint64_t deadline;           /* the request's: body reads, and the drain */
	uint64_t read_idle;          /* the request's read_idle_ns (0: none) */
	int timed_out;               /* a RUNTIME_HTTP_TIMEOUT_*: why a read failed */
	bool body_done;
	bool reusable;               /* the connection may serve another request */
	int body_error;              /* sticky */
};

struct http_cconn {
	struct http_cconn *next;     /* in its origin's idle list */
	struct runtime_conn *rc;
	struct http_client_core *core;
	uint64_t idle_since;
	unsigned used;               /* requests sent on it */
	bool h2;                     /* it speaks HTTP/2 (ALPN, or h2c) */
	bool https;                  /* its origin: scheme, host, port */
	uint16_t port;
	uint16_t host_len;
	char host[HTTP_HOST_MAX + 1]; /* NUL-terminated, as written */
	size_t keep;                 /* in[0..keep): the pinned response head */
	size_t in_off, in_len, in_size;
	struct runtime_http_result res;
	char out[HTTP_CLIENT_OUT];
	char in[];                   /* in_size bytes */
};

/* An origin's connections on one core (pool.c): HTTP/1.1's idle ones,
 * HTTP/2's (each serving many requests at once), and what the origin was
 * found to speak - while that is not known and a dial runs, requests wait
 * for it rather than each dialling (an HTTP/2 origin takes them all on
 * one connection). */
struct h2_cconn;

struct http_origin {
	struct http_origin *next;   /* in its bucket */
	struct http_cconn *idle;    /* the most recently used first */
	unsigned nidle;
	struct h2_cconn *h2;        /* HTTP/2 connections, a list */
	unsigned dialing;           /* dials under way */
	struct runtime_fiber **waiters; /* requests waiting for a dial */
	unsigned nwaiters, waiters_cap;
	int proto;                  /* 0: not known, 11 or 20 */
	bool https;
	uint16_t port;
	size_t host_len;
	char host[];
};

/* One writer per counter (its core): a plain add, no lock. */
struct http_client_core {
	struct runtime_http_client *cl;
	unsigned index;
	unsigned idle;               /* pooled connections on this core */
	uint64_t next_sweep;
	struct http_origin *buckets[HTTP_ORIGIN_BUCKETS];
	unsigned h2_conns;           /* HTTP/2 connections open on this core */
	unsigned live;               /* requests under way and results open,
	                                and the sweeper's timer or fiber:
	                                destroy waits for them, on this core */
	bool sweeper_armed;          /* sweeper (pool.c) is armed */
	struct runtime_timer sweeper; /* closes idle connections past their
	                                time while no request comes */
	_Atomic uint64_t connects, reused, retried, requests, dropped, h2_requests;
} __attribute__((aligned(64)));

struct runtime_http_client {
	struct runtime_http_client_config cfg;
	struct http_limits limits;
	_Atomic bool closing;        /* destroy began: new requests -ESHUTDOWN */
	_Atomic(struct runtime_tls *) tls; /* cfg.tls, or ours once made */
	bool own_tls;                /* ours: destroyed with the client */
	size_t ua_len;
	char ua_field[128];          /* "User-Agent: NAME\r\n" or "" */
	_Atomic(struct http_client_core *) cores[RUNTIME_MAX_CORES];
};

static inline uint64_t http_earlier(uint64_t a, uint64_t b) /* 0: none */
{
	if (!a || !b)
		return a ? a : b;
	return a < b ? a : b;
}

/* A request under way (client.c; h2_request.c sends it over HTTP/2). */
struct http_exchange {
	struct runtime_http_client *cl;
	struct http_client_core *core;
	const struct runtime_http_client_request *req;
	const char *method;
	const char *url;             /* the current one: the caller's or url_owned */
	char *url_owned;             /* a redirect's */
	const void *body;            /* a fixed body (none after a 303) */
	size_t body_len;
	bool streamed;               /* req->body_read sends it */
	bool stream_sized;           /* of req->body_read_len bytes */
	const char *upgrade;         /* req->upgrade: a 101 is the answer */
	uint64_t stream_left;        /* of those, not yet read */
	bool head;                   /* the method is HEAD: no body comes */
	bool has_ua;                 /* the caller gave a User-Agent */
	bool strip_credentials;      /* a redirect left the first origin */
	bool got_bytes;              /* a byte of the response came (this try) */
	bool body_started;           /* body_read was called (this try) */
	int body_error;              /* body_read's: the request is abandoned */
	unsigned redirects;
	uint64_t deadline;
	uint64_t head_end;           /* head_timeout_ns's end, once sent (0: none) */
	int timed_out;               /* a RUNTIME_HTTP_TIMEOUT_*: why it failed */
};

/* A result's connection pooled or closed (runtime_http_result_close
 * but the live count: for the results the client closes itself). */
void runtime__http_result_release(struct runtime_http_result *res);

/* body_read's next bytes (at most cap, never past a known length), 0 at
 * the end, or its error (noted in body_error): -EINVAL if it ends before
 * the length it announced. client.c. */
ssize_t runtime__http_body_next(struct http_exchange *x, void *buf, size_t cap);

static inline uint64_t http_after(uint64_t ns) /* ns from now; 0: none */
{
	uint64_t now = runtime_now();
	return !ns ? 0 : ns > UINT64_MAX - now ? UINT64_MAX : now + ns;
}

/* Which clock ended a wait that failed -ETIMEDOUT: limit (kind's) or
 * deadline (TOTAL), whichever is earlier and past; NONE if the fiber's
 * own deadline came first (or neither is past: a cancel's). */
static inline int http_timeout_kind(uint64_t deadline, uint64_t limit, int kind)
{
	uint64_t first = http_earlier(deadline, limit), own = runtime_deadline_get();

	if (!first || runtime_now() < first || (own && own < first))
		return RUNTIME_HTTP_TIMEOUT_NONE;
	return first == limit ? kind : RUNTIME_HTTP_TIMEOUT_TOTAL;
}

/* Is the field line h ("Name: value") one to send? (client.c: the
 * credentials are dropped once a redirect left the first origin.) */
bool runtime__http_field_sent(const struct http_exchange *x, const char *h);

/* pool.c */
struct http_client_core *runtime__http_client_core(struct runtime_http_client *cl);
struct http_origin *runtime__http_origin(struct http_client_core *core, const struct http_url *u,
                                         bool make);
/* Wait (under the request's deadline) for a dial of o's to end. 0, or
 * -ETIMEDOUT, -ECANCELED. */
int runtime__http_origin_wait(struct http_origin *o, uint64_t deadline);
void runtime__http_origin_wake(struct http_origin *o);
/* The sweep of idle connections past their time (at most once a second),
 * then their origins left with nothing: call it before holding one. */
void runtime__http_pool_sweep(struct http_client_core *core);
/* A pooled connection of o's still good to send on, or NULL. */
struct http_cconn *runtime__http_pool_take(struct http_client_core *core, struct http_origin *o);
void runtime__http_pool_put(struct http_cconn *c);
int runtime__http_dial(struct http_client_core *core, const struct http_url *u, uint64_t deadline,
                       struct http_cconn **out);
void runtime__http_cconn_close(struct http_cconn *c);
int runtime__http_pools_close(struct runtime_http_client *cl);
void runtime__http_pools_free(struct runtime_http_client *cl);

/* client.c */
int runtime__http_client_tls(struct runtime_http_client *cl, struct runtime_tls **tls);

/* h2_client.c: HTTP/2 connections of a client's. One of u's origin with
 * room for a stream, or NULL. */
struct h2_cconn *runtime__h2_client_find(struct http_client_core *core, struct http_origin *o);
/* c's connection, whose TLS agreed on h2 or that speaks h2c: made an
 * HTTP/2 one of o's (c freed either way). 0, or -ENOMEM. */
int runtime__h2_client_adopt(struct http_client_core *core, struct http_origin *o,
                             struct http_cconn *c, struct h2_cconn **out);
/* Close every HTTP/2 connection of the core's, and wait (bounded) for
 * their fibers to end. */
void runtime__h2_client_close_all(struct http_client_core *core);

/* h2_request.c: the request x on h: 0 and *res, -EAGAIN if the server
 * never processed it (refused, or past its GOAWAY: send it elsewhere),
 * or -errno. */
int runtime__h2_exchange(struct http_exchange *x, const struct http_url *u, struct h2_cconn *h,
                         struct runtime_http_result **res);
ssize_t runtime__h2_result_read(struct runtime_http_result *res, void *buf, size_t len);
void runtime__h2_result_close(struct runtime_http_result *res);

/* result.c */
void runtime__http_result_init(struct http_cconn *c, size_t head_len, bool reusable);
ssize_t runtime__http_cconn_fill(struct http_cconn *c);

#endif /* HTTP_CLIENT_H */
