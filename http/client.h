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

struct runtime_http_result {
	struct http_cconn *conn;
	struct http_response head;   /* slices into conn->in[0..keep) */
	uint64_t body_left;          /* LENGTH: bytes still to come */
	uint64_t body_got;           /* CLOSE: bytes so far (body_max) */
	struct http_chunked chunked;
	uint64_t deadline;           /* the request's: body reads, and the drain */
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

/* One writer per counter (its core): a plain add, no lock. */
struct http_client_core {
	struct runtime_http_client *cl;
	unsigned index;
	unsigned idle;               /* pooled connections on this core */
	uint64_t next_sweep;
	struct http_origin *buckets[HTTP_ORIGIN_BUCKETS];
	_Atomic uint64_t connects, reused, retried, requests, dropped;
} __attribute__((aligned(64)));

struct runtime_http_client {
	struct runtime_http_client_config cfg;
	struct http_limits limits;
	_Atomic(struct runtime_tls *) tls; /* cfg.tls, or ours once made */
	bool own_tls;                /* ours: destroyed with the client */
	size_t ua_len;
	char ua_field[128];          /* "User-Agent: NAME\r\n" or "" */
	_Atomic(struct http_client_core *) cores[RUNTIME_MAX_CORES];
};

static inline void http_count(_Atomic uint64_t *n)
{
	atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
	                      memory_order_relaxed);
}

static inline uint64_t http_earlier(uint64_t a, uint64_t b) /* 0: none */
{
	if (!a || !b)
		return a ? a : b;
	return a < b ? a : b;
}

/* pool.c */
struct http_client_core *runtime__http_client_core(struct runtime_http_client *cl);
struct http_cconn *runtime__http_pool_take(struct http_client_core *core, const struct http_url *u);
void runtime__http_pool_put(struct http_cconn *c);
int runtime__http_dial(struct http_client_core *core, const struct http_url *u, uint64_t deadline,
                       struct http_cconn **out);
void runtime__http_cconn_close(struct http_cconn *c);
int runtime__http_pools_close(struct runtime_http_client *cl);
void runtime__http_pools_free(struct runtime_http_client *cl);

/* client.c */
int runtime__http_client_tls(struct runtime_http_client *cl, struct runtime_tls **tls);

/* result.c */
void runtime__http_result_init(struct http_cconn *c, size_t head_len, bool reusable);
ssize_t runtime__http_cconn_fill(struct http_cconn *c);

#endif /* HTTP_CLIENT_H */
