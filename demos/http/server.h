/* SPDX-License-Identifier: MIT */
/*
 * server.h - the demo HTTP server's parts, on libruntime-http
 * (<runtime_http.h>): main, options and the stop (http-server.c), the
 * library's settings for the options (config.c), the routes (routes.c)
 * and static files (files.c). Everything HTTP itself - parsing,
 * keep-alive, pipelining, limits, timeouts, drain - is the library's.
 */
#ifndef HTTP_SERVER_H
#define HTTP_SERVER_H

#include <runtime.h>
#include <runtime_http.h>
#include <runtime_metrics.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
	const char *restart_with; /* SIGUSR2's successor; NULL: this program */
	uint64_t ready_timeout_ms; /* for the successor to serve */
	unsigned stall_ms;        /* runtime_config.stall_ms (0: the build's) */
	uint64_t release_after_ms; /* quiet this long: no fiber stack (0: at once;
	                              UINT64_MAX: never) */
	int access_log;           /* a RUNTIME_HTTP_LOG_* format, 0: none */
	bool plain_recv;          /* one recv per read, not a receive stream */
	bool fixed_files;         /* accepted sockets become fixed files */
	enum runtime_engine engine;
	/* To measure what each technique wins (bench-http DEMO_VARIANTS): */
	bool plain_accept;        /* one accept per connection, no listener */
	bool no_batch;            /* one send per response, even pipelined */
	bool file_copy;           /* large files read and sent, not spliced */
	uint64_t file_cache_ms;   /* an open file reused this long (0: never) */
	bool no_metrics;          /* no method classes, no duration histogram */
	const char *tls_cert, *tls_key; /* HTTPS: both, or neither */
	const char *listen_name;  /* socket activation: the inherited socket's
	                             name (LISTEN_FDNAMES); NULL: by port */
};

struct server {
	struct options opt;
	struct runtime *rt;
	struct runtime_http_server *http;
	struct runtime_tls *tls;  /* HTTPS, NULL: HTTP */
	struct runtime_tls_serve tls_serve; /* its handshakes (runtime_serve's layer) */
	int root_fd;              /* --root, or -1 */
	struct runtime_sem *backend; /* /limited's slots */
	struct runtime_metrics *metrics; /* /metrics: the runtime's, the server's */
};

/* config.c: the library's settings for these options (the serve part
 * too). */
void server_http_config(struct server *srv, struct runtime_http_server_config *cfg);

/* routes.c: the handler (arg: the struct server) */
int route(struct runtime_http_request *req, struct runtime_http_response *res, void *arg);

/* files.c */
int serve_file(struct server *srv, struct runtime_http_request *req,
               struct runtime_http_response *res);
/* A regular file is there for this path. */
bool file_exists(struct server *srv, struct runtime_http_slice path);

/* file_cache.c: files opened in the last moment, per core (fiber context;
 * a core's own entries only). */
struct open_file {
	unsigned refs;            /* the table's, and each response's */
	int fd;                   /* a regular file, blocking reads */
	uint64_t size;
	int64_t mtime;
	uint64_t opened;          /* runtime_now_coarse() at the open */
	uint32_t hash;
	char name[];              /* relative to the root */
};
/* How long an open file is reused (0: never; set before the run). */
void file_cache_set_validity(uint64_t ns);
/* name's entry, held, if opened less than the validity ago; else NULL. */
struct open_file *file_cache_find(const char *name);
/* fd (owned from here) with its attributes as name's entry, held: kept
 * in the core's table too unless caching is off. NULL (fd closed): out of
 * memory. */
struct open_file *file_cache_add(const char *name, int fd, uint64_t size, int64_t mtime);
/* Let go of a held entry (NULL: nothing). */
void file_cache_put(struct open_file *f);

#endif
