/* SPDX-License-Identifier: MIT */
/*
 * config.c - the library's settings for the demo's options: apart from
 * main (http-server.c), so that the fuzz targets build their servers
 * exactly as the demo does without linking its main.
 */
#include "server.h"

#define MS 1000000ull

void server_http_config(struct server *sv, struct runtime_http_server_config *cfg)
{
	const struct options *o = &sv->opt;

	runtime_http_server_config_init(cfg);
	cfg->serve.host = o->host;
	cfg->serve.port = (uint16_t)o->port;
	cfg->serve.backlog = 4096;
	cfg->serve.max_conns = o->max_conns;
	cfg->serve.plain_recv = o->plain_recv;
	cfg->serve.plain_accept = o->plain_accept;
	cfg->serve.listen_name = o->listen_name;
	sv->tls_serve.tls = sv->tls;
	if (sv->tls) /* HTTPS: each connection's handshake first */
		runtime_tls_serve(&cfg->serve, &sv->tls_serve);
	cfg->handler = route;
	cfg->arg = sv;
	cfg->limits.body_max = o->body_max;
	cfg->header_timeout_ns = o->header_timeout_ms * MS;
	cfg->idle_timeout_ns = o->idle_timeout_ms * MS;
	cfg->release_after_ns = o->release_after_ms == UINT64_MAX ? UINT64_MAX
	                                                          : o->release_after_ms * MS;
	cfg->server_name = "runtime-demo";
	cfg->access_log_format = o->access_log; /* 0, or a RUNTIME_HTTP_LOG_* */
	cfg->access_log_fd = 1;
	cfg->no_batch = o->no_batch;
	cfg->no_metrics = o->no_metrics;
	cfg->file_copy = o->file_copy;
}
