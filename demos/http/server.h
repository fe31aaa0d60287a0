/* SPDX-License-Identifier: MIT */
/*
 * server.h - the demo HTTP server's parts: main, serving and the stop
 * (http-server.c), one fiber per connection (conn.c), the routes (routes.c)
 * and static files (files.c).
 */
#ifndef HTTP_SERVER_H
#define HTTP_SERVER_H

#include <runtime.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http_parser.h"

#define IN_SIZE (16 * 1024)   /* a connection's read buffer: holds a head
                                 (head_max is 12 KiB) */
#define OUT_SIZE (16 * 1024)  /* its batch of pipelined responses */

struct options {
	const char *host;
	unsigned port;
	unsigned cores;
	const char *root;
	unsigned limit;           /* /limited slots */
	unsigned max_conns;
	uint64_t body_max;
	uint64_t header_timeout_ms;
	uint64_t idle_timeout_ms;
	uint64_t grace_ms;        /* shutdown: time for requests in flight */
	bool access_log;
	bool plain_recv;          /* one recv per read, not a receive stream */
	bool fixed_files;         /* accepted sockets become fixed files */
	enum runtime_engine engine;
	/* To measure what each technique wins (bench-http DEMO_VARIANTS): */
	bool plain_accept;        /* one accept per connection, no listener */
	bool no_batch;            /* one send per response, even pipelined */
	bool file_copy;           /* large files read and sent, not spliced */
	const char *tls_cert, *tls_key; /* HTTPS: both, or neither */
};

struct server {
	struct options opt;
	struct runtime *rt;
	struct http_limits limits;
	struct runtime_server *server; /* runtime_serve's: a socket per core */
	struct runtime_tls *tls;  /* HTTPS, NULL: HTTP */
	int root_fd;              /* --root, or -1 */
	struct runtime_sem *backend; /* /limited's slots */
	_Atomic bool draining;    /* a signal came: finish and close */
	_Atomic unsigned open;    /* connections now */
	struct conn_list *live;   /* per core: connections, for the drain */
};

/* A request being answered, and where its response goes. */
struct exchange {
	struct conn *conn;
	const struct http_request *req;
	bool head_only;           /* HEAD: headers, no body */
	bool close;               /* answer with Connection: close, then close */
	int status;               /* for the access log */
	uint64_t sent_body;
};

/* conn.c */
void conn_serve(struct server *srv, struct runtime_conn *conn);
void conn_drain_core(struct server *srv);
int conn_lists_init(struct server *srv);
int respond(struct exchange *ex, int status, const char *type, const char *extra_headers,
            const void *body, size_t len);
int respond_head(struct exchange *ex, int status, const char *type, const char *extra_headers,
                 uint64_t length);
int respond_body(struct exchange *ex, const void *body, size_t len);
int respond_flush(struct exchange *ex);
/* All of p[0..len) to the client, through its connection (TLS too). */
int respond_write(struct exchange *ex, const void *p, size_t len);
int conn_fd(const struct exchange *ex);
/* The connection speaks TLS: nothing may be spliced into its socket. */
bool conn_tls(const struct exchange *ex);
size_t http_date(char out[32]);
/* Requests answered so far, over all cores. */
uint64_t conn_requests(const struct server *srv);
void write_deadline_set(const struct server *srv);
int read_body(struct exchange *ex, char **body, size_t *len);
int discard_body(struct exchange *ex);

/* routes.c */
int route(struct server *srv, struct exchange *ex);

/* files.c */
int serve_file(struct server *srv, struct exchange *ex);

#endif
