/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - the HTTP server's figures as metrics, and the handler that
 * serves a registry's exposition (the client's: metrics_client.c). The server counts per
 * core as it serves (struct http_core: plain adds of one writer); a
 * collector sums them at each render and sets the registry's series, so
 * the registry costs a request nothing.
 */
#include "http.h"

#include <stdlib.h>

static const char *const method_names[HTTP_METHOD_CLASSES] = {
	"GET", "HEAD", "POST", "PUT", "DELETE", "other",
};
static const char *const code_names[6] = { "", "1xx", "2xx", "3xx", "4xx", "5xx" };

struct server_series {
	const struct runtime_http_server *srv;
	struct runtime_metric *methods[HTTP_METHOD_CLASSES], *codes[6];
	struct runtime_metric *rejected, *bytes_in, *bytes_out, *duration;
	struct runtime_metric *tls[3];  /* handshakes full, resumed, failed
	                                   (a TLS server's; else NULL) */
};

static const char *const handshake_names[3] = { "full", "resumed", "failed" };

static uint64_t load(const _Atomic uint64_t *n)
{
	return atomic_load_explicit(n, memory_order_relaxed);
}

/* The cores' duration counts summed, into the registry's histogram. */
static void duration_collect(const struct runtime_http_server *srv, struct runtime_metric *m)
{
	uint64_t counts[HTTP_DURATION_BUCKETS + 1] = { 0 }, ns = 0;

	for (unsigned i = 0; i < srv->ncores; i++) {
		for (unsigned b = 0; b <= HTTP_DURATION_BUCKETS; b++)
			counts[b] += load(&srv->cores[i].duration[b]);
		ns += load(&srv->cores[i].duration_ns);
	}
	runtime_metric_set_buckets(m, counts, (double)ns / 1e9);
}

static void server_collect(struct runtime_metrics *reg, void *arg)
{
	struct server_series *ss = arg;
	const struct runtime_http_server *srv = ss->srv;
	uint64_t methods[HTTP_METHOD_CLASSES] = { 0 }, in = 0, out = 0;
	struct runtime_http_server_stats st;

	(void)reg;
	runtime_http_server_stats(srv, &st);
	for (unsigned i = 0; i < srv->ncores; i++) {
		for (unsigned k = 0; k < HTTP_METHOD_CLASSES; k++)
			methods[k] += load(&srv->cores[i].methods[k]);
		in += load(&srv->cores[i].bytes_in);
		out += load(&srv->cores[i].bytes_out);
	}
	for (unsigned k = 0; k < HTTP_METHOD_CLASSES; k++)
		runtime_metric_set(ss->methods[k], (int64_t)methods[k]);
	for (unsigned k = 1; k < 6; k++)
		runtime_metric_set(ss->codes[k], (int64_t)st.responses[k]);
	runtime_metric_set(ss->rejected, (int64_t)st.rejected);
	runtime_metric_set(ss->bytes_in, (int64_t)in);
	runtime_metric_set(ss->bytes_out, (int64_t)out);
	duration_collect(srv, ss->duration);
	if (ss->tls[0]) {
		struct runtime_tls_stats ts;
		runtime_tls_stats(srv->tls.tls, &ts);
		runtime_metric_set(ss->tls[0], (int64_t)(ts.handshakes - ts.resumed));
		runtime_metric_set(ss->tls[1], (int64_t)ts.resumed);
		runtime_metric_set(ss->tls[2], (int64_t)ts.failed);
	}
}

/* The series of d's family for owner="name" (owner: server or client),
 * and label="value" if label is not NULL. */
int runtime__http_metric_series(struct runtime_metrics *reg, struct runtime_metric_desc *d,
                                const char *owner, const char *name, const char *label,
                                const char *value, struct runtime_metric **out)
{
	const char *names[] = { owner, label, NULL };
	struct runtime_metric *family;

	d->labels = names;
	int rc = runtime_metrics_register(reg, d, &family);
	return rc < 0 ? rc : runtime_metric_series(family, (const char *const[]){ name, value }, out);
}

#define COUNTER(n, h) (&(struct runtime_metric_desc){ .type = RUNTIME_METRIC_COUNTER, \
                                                       .name = (n), .help = (h) })

static int server_families(struct runtime_metrics *reg, struct server_series *ss, const char *name)
{
	double bounds[HTTP_DURATION_BUCKETS];
	int rc = 0;

	for (unsigned k = 0; rc == 0 && k < HTTP_METHOD_CLASSES; k++)
		rc = runtime__http_metric_series(reg, COUNTER("runtime_http_server_requests_total", "Requests by method."),
		            "server", name, "method", method_names[k], &ss->methods[k]);
	for (unsigned k = 1; rc == 0 && k < 6; k++)
		rc = runtime__http_metric_series(reg, COUNTER("runtime_http_server_responses_total",
		                         "Responses by status class (the parser's refusals too)."),
		            "server", name, "code", code_names[k], &ss->codes[k]);
	if (rc == 0)
		rc = runtime__http_metric_series(reg, COUNTER("runtime_http_server_rejected_total",
		                         "Requests the parser refused (4xx/5xx)."),
		            "server", name, NULL, NULL, &ss->rejected);
	if (rc == 0)
		rc = runtime__http_metric_series(reg, COUNTER("runtime_http_server_received_bytes_total",
		                         "Bytes read on HTTP/1.1 and HTTP/2 connections."),
		            "server", name, NULL, NULL, &ss->bytes_in);
	if (rc == 0)
		rc = runtime__http_metric_series(reg, COUNTER("runtime_http_server_sent_bytes_total",
		                         "Bytes written on HTTP/1.1 and HTTP/2 connections (files spliced aside)."),
		            "server", name, NULL, NULL, &ss->bytes_out);
	for (unsigned k = 0; rc == 0 && ss->srv->tls.tls && k < 3; k++)
		rc = runtime__http_metric_series(reg, COUNTER("runtime_tls_handshakes_total",
		                         "TLS handshakes of the server's context, by result."),
		            "server", name, "result", handshake_names[k], &ss->tls[k]);
	for (unsigned i = 0; i < HTTP_DURATION_BUCKETS; i++)
		bounds[i] = (double)runtime__http_duration_ns[i] / 1e9;
	struct runtime_metric_desc d = {
		.type = RUNTIME_METRIC_HISTOGRAM, .name = "runtime_http_server_request_duration_seconds",
		.help = "Requests from their head parsed to their response queued (HTTP/2: to the handler's end).",
		.buckets = bounds, .nbuckets = HTTP_DURATION_BUCKETS };
	return rc == 0 ? runtime__http_metric_series(reg, &d, "server", name, NULL, NULL, &ss->duration) : rc;
}

int runtime_http_metrics_add_server(struct runtime_metrics *reg,
                                    const struct runtime_http_server *srv, const char *name)
{
	struct server_series *ss;

	if (!reg || !srv || !name || !srv->base)
		return -EINVAL;
	int rc = runtime_metrics_add_server(reg, srv->base, name);
	if (rc < 0)
		return rc;
	if (!(ss = calloc(1, sizeof(*ss))))
		return -ENOMEM;
	ss->srv = srv;
	rc = server_families(reg, ss, name);
	if (rc < 0) {
		free(ss);
		return rc;
	}
	return runtime_metrics_on_collect(reg, server_collect, ss, free);
}

/* ------------------------------------------------------------ handler */

int runtime_http_metrics_handler(struct runtime_http_request *req,
                                 struct runtime_http_response *res, void *reg)
{
	char *text;
	size_t len;

	(void)req;
	int rc = runtime_metrics_render_alloc(reg, &text, &len);
	if (rc < 0)
		return rc; /* answered 500 */
	rc = runtime_http_respond(res, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
	free(text);
	return rc;
}
