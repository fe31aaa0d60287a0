/* SPDX-License-Identifier: MIT */
/*
 * metrics_client.c - the HTTP client's figures as metrics, from
 * runtime_http_client_stats at each render: pool hits are requests sent
 * on a pooled connection (reused), misses new connections (connects).
 */
#include "http.h"
#include "client.h"

#include <stdlib.h>

enum { CL_REQUESTS, CL_CONNECTS, CL_REUSED, CL_RETRIED, CL_DROPPED, CL_H2, CL_FIGURES };
static const struct {
	const char *name, *help;
} client_figures[CL_FIGURES] = {
	{ "runtime_http_client_requests_total", "Requests sent (each try, each redirect)." },
	{ "runtime_http_client_pool_misses_total", "New connections made (none pooled)." },
	{ "runtime_http_client_pool_hits_total", "Requests sent on a pooled connection." },
	{ "runtime_http_client_retries_total", "Requests retried after a pooled one failed." },
	{ "runtime_http_client_pool_dropped_total",
	  "Pooled connections closed when taken (stale, closed, or sent bytes unasked)." },
	{ "runtime_http_client_h2_requests_total", "Requests sent over HTTP/2." },
};

struct client_series {
	const struct runtime_http_client *cl;
	struct runtime_metric *m[CL_FIGURES];
};

static void client_collect(struct runtime_metrics *reg, void *arg)
{
	struct client_series *cs = arg;
	struct runtime_http_client_stats st;

	(void)reg;
	runtime_http_client_stats(cs->cl, &st);
	const uint64_t v[CL_FIGURES] = { st.requests, st.connects, st.reused,
	                                 st.retried, st.dropped, st.h2_requests };
	for (int i = 0; i < CL_FIGURES; i++)
		runtime_metric_set(cs->m[i], (int64_t)v[i]);
}

int runtime_http_metrics_add_client(struct runtime_metrics *reg,
                                    const struct runtime_http_client *cl, const char *name)
{
	struct client_series *cs;

	if (!reg || !cl || !name)
		return -EINVAL;
	if (!(cs = calloc(1, sizeof(*cs))))
		return -ENOMEM;
	cs->cl = cl;
	int rc = 0;
	for (int i = 0; rc == 0 && i < CL_FIGURES; i++) {
		struct runtime_metric_desc d = { .type = RUNTIME_METRIC_COUNTER,
		                                 .name = client_figures[i].name,
		                                 .help = client_figures[i].help };
		rc = runtime__http_metric_series(reg, &d, "client", name, NULL, NULL, &cs->m[i]);
	}
	if (rc < 0) {
		free(cs);
		return rc;
	}
	return runtime_metrics_on_collect(reg, client_collect, cs, free);
}
