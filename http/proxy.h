/* SPDX-License-Identifier: MIT */
/*
 * proxy.h - the reverse proxy's state (proxy.c) and the upstream request
 * it makes (proxy_out.c). Internal.
 */
#ifndef RUNTIME_HTTP_PROXY_H
#define RUNTIME_HTTP_PROXY_H

#include "http.h"

#include <runtime_http.h>
#include <runtime_tls.h>
#include <stdbool.h>

/* The fields an upstream request may carry: the most a request has, the
 * forwarding ones and a hook's. */
#define PROXY_OUT_FIELDS (RUNTIME_HTTP_HEADERS_MAX + 8)

struct runtime_http_proxy {
	struct runtime_http_proxy_config cfg;
	char *upstream;           /* the base URL, no '/' at its end */
	size_t upstream_len;
	char *prefix;             /* strip_prefix, no '/' at its end; NULL: none */
	size_t prefix_len;
};

struct runtime_http_proxy_out {
	const char *method;       /* the request's, NUL-terminated */
	const char *upgrade;      /* the request's Upgrade, if it asked to
	                             switch protocols (HTTP/1.1); else NULL */
	const char *url;          /* in the arena, or a hook's (owned) */
	const char *fields[PROXY_OUT_FIELDS + 1]; /* NULL-terminated */
	unsigned nfields;
	char *arena;              /* the URL and fields made of the request's */
	size_t used, cap;
	char *owned[16];          /* the hooks' copies */
	unsigned nowned;
};

/* The request for the upstream: 0, -ENOENT (its path outside the
 * prefix), -EINVAL (a path that cannot be cleaned, or none), -ENOMEM.
 * Free it with _out_free whatever it returned. */
int runtime__http_proxy_out_init(struct runtime_http_proxy_out *o,
                                 const struct runtime_http_proxy *px,
                                 const struct runtime_http_request *req);
void runtime__http_proxy_out_free(struct runtime_http_proxy_out *o);
/* A hop-by-hop field's name (RFC 9110 7.6.1). */
bool runtime__http_proxy_hop(struct runtime_http_slice name);
/* name among the comma-separated options of a Connection field's value. */
bool runtime__http_proxy_listed(struct runtime_http_slice value, struct runtime_http_slice name);

#endif
