/* SPDX-License-Identifier: MIT */
/*
 * server.c - runtime_http_serve: the configuration and its checks, the
 * counters, and serving on every core through runtime_serve, whose
 * handler is the connection loop of conn.c.
 */
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEC 1000000000ull

void runtime_http_server_config_init(struct runtime_http_server_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	runtime_serve_config_init(&cfg->serve);
	cfg->header_timeout_ns = 10 * SEC;
	cfg->idle_timeout_ns = 60 * SEC;
	cfg->release_after_ns = 10 * 1000 * 1000;
	cfg->server_name = "runtime";
	cfg->fields_out_max = HTTP_FIELDS_OUT_DEFAULT;
	cfg->access_log_fd = 1;
	cfg->body_min_rate = 240;
	cfg->body_rate_grace_ns = 5 * SEC;
}

/* The limits, defaults filled in. -EINVAL for what the parser cannot
 * hold. */
static int limits(const struct runtime_http_limits *in, struct http_limits *out)
{
	*out = (struct http_limits){
		.line_max = in->line_max ? in->line_max : 8192,
		.head_max = in->head_max ? in->head_max : 12288,
		.headers_max = in->headers_max ? in->headers_max : RUNTIME_HTTP_HEADERS_MAX,
		.body_max = in->body_max ? in->body_max : 1u << 20,
	};
	if (out->headers_max > RUNTIME_HTTP_HEADERS_MAX || out->head_max < out->line_max ||
	    out->head_max > HTTP_HEAD_MAX_MAX)
		return -EINVAL;
	return 0;
}

/* "Server: NAME\r\n" once, or nothing. NAME is a field value that any
 * client takes: field bytes (no control but HTAB: the library's own
 * client refuses a \x01), no whitespace at either end. */
static int server_field(struct runtime_http_server *srv, const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n + 12 > sizeof(srv->server_field) || (n && !runtime__http_field_value_ok(name, n)))
		return -EINVAL;
	srv->server_len = n ? (size_t)snprintf(srv->server_field, sizeof(srv->server_field),
	                                       "Server: %s\r\n", name) : 0;
	return 0;
}

int runtime_http_server_create(struct runtime *rt, const struct runtime_http_server_config *cfg,
                               struct runtime_http_server **out)
{
	struct runtime_http_server *srv;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!rt || !cfg || !cfg->handler || !cfg->header_timeout_ns ||
	    cfg->fields_out_max > HTTP_FIELDS_OUT_MOST || cfg->access_log_format < 0 ||
	    cfg->access_log_format > RUNTIME_HTTP_LOG_JSON ||
	    (cfg->access_log_format && cfg->access_log_fd < 0))
		return -EINVAL;
	if (!(srv = calloc(1, sizeof(*srv))))
		return -ENOMEM;
	srv->cfg = *cfg;
	if (!srv->cfg.fields_out_max)
		srv->cfg.fields_out_max = HTTP_FIELDS_OUT_DEFAULT;
	srv->rt = rt;
	srv->ncores = runtime_cores(rt);
	if ((rc = limits(&cfg->limits, &srv->limits)) < 0 ||
	    (rc = server_field(srv, cfg->server_name)) < 0) {
		free(srv);
		return rc;
	}
	srv->cfg.server_name = NULL; /* copied: the caller's may go */
	if (!srv->cfg.idle_timeout_ns)
		srv->cfg.idle_timeout_ns = UINT64_MAX;
	srv->cores = aligned_alloc(64, srv->ncores * sizeof(*srv->cores));
	if (!srv->cores) {
		free(srv);
		return -ENOMEM;
	}
	memset(srv->cores, 0, srv->ncores * sizeof(*srv->cores));
	*out = srv;
	return 0;
}

static void serve_conn(struct runtime_conn *conn, void *arg)
{
	runtime__http_conn_serve(arg, conn, true);
}

/* TLS serving as the caller set it (runtime_tls_serve), but for the ALPN
 * list, unless they gave one: h2 first, HTTP/1.1 for the others (as Go's
 * server does with its context). */
static void offer_h2(struct runtime_http_server *srv)
{
	struct runtime_tls_serve *ts = runtime_tls_serve_of(&srv->cfg.serve);

	if (!ts)
		return;
	srv->tls = *ts;
	if (!srv->tls.alpn)
		srv->tls.alpn = srv->cfg.no_h2 ? "http/1.1" : "h2,http/1.1";
	runtime_tls_serve(&srv->cfg.serve, &srv->tls); /* checked by the caller's */
}

int runtime_http_serve(struct runtime *rt, const struct runtime_http_server_config *cfg,
                       struct runtime_http_server **out)
{
	struct runtime_http_server *srv;
	int rc = runtime_http_server_create(rt, cfg, &srv);

	if (out)
		*out = NULL;
	if (rc < 0 || !out) {
		runtime_http_server_destroy(srv);
		return rc < 0 ? rc : -EINVAL;
	}
	srv->cfg.serve.handler = serve_conn;
	srv->cfg.serve.arg = srv;
	offer_h2(srv);
	uint64_t release = srv->cfg.release_after_ns;
	srv->cfg.serve.release_after_ns = release == UINT64_MAX ? 0 : release;
	if ((rc = runtime_serve(rt, &srv->cfg.serve, &srv->base)) < 0 && !srv->base) {
		runtime_http_server_destroy(srv);
		return rc;
	}
	*out = srv; /* even stopped (see runtime_serve): destroy it after the run */
	return rc;
}

int runtime_http_serve_conn(struct runtime_http_server *srv, struct runtime_conn *conn)
{
	if (!srv || !conn)
		return -EINVAL;
	runtime__http_conn_serve(srv, conn, false);
	return 0;
}

uint16_t runtime_http_server_port(const struct runtime_http_server *srv)
{
	return srv ? runtime_server_port(srv->base) : 0;
}

/* 100 us to 10 s, a 1-2.5-5 series: aggregatable, and a fast request's
 * scan ends at the first bounds. Here, with the server: the fuzz targets
 * build the server alone. */
const uint64_t runtime__http_duration_ns[HTTP_DURATION_BUCKETS] = {
	100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 25000000,
	50000000, 100000000, 250000000, 500000000, 1000000000, 2500000000, 5000000000,
	10000000000,
};

static uint64_t load(const _Atomic uint64_t *n)
{
	return atomic_load_explicit(n, memory_order_relaxed);
}

void runtime_http_server_stats(const struct runtime_http_server *srv,
                               struct runtime_http_server_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof(*st));
	if (!srv)
		return;
	runtime_server_stats(srv->base, &st->conns);
	for (unsigned i = 0; i < srv->ncores; i++) {
		const struct http_core *c = &srv->cores[i];
		st->requests += load(&c->requests);
		st->rejected += load(&c->rejected);
		for (int k = 1; k < 6; k++)
			st->responses[k] += load(&c->responses[k]);
	}
}

uint64_t runtime_http_server_core_requests(const struct runtime_http_server *srv, unsigned core)
{
	return srv && core < srv->ncores ? load(&srv->cores[core].requests) : 0;
}

int runtime_http_server_stop(struct runtime_http_server *srv)
{
	return srv ? runtime_server_stop(srv->base) : -EINVAL;
}

void runtime_http_server_destroy(struct runtime_http_server *srv)
{
	if (!srv)
		return;
	runtime_server_destroy(srv->base);
	for (unsigned i = 0; i < srv->ncores; i++)
		runtime__http_buffers_free(&srv->cores[i].buffers);
	free(srv->cores);
	free(srv);
}
