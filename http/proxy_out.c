/* SPDX-License-Identifier: MIT */
/*
 * proxy_out.c - the upstream request a proxy makes of a client's: its URL
 * (the upstream's, the cleaned path less its prefix, the query) and its
 * fields (the client's less the hop-by-hop ones, the forwarding ones by
 * policy, Cookie joined), laid out in one arena sized from the request
 * so that making it is one allocation.
 */
#include "proxy.h"
#include "chars.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool named(struct runtime_http_slice s, const char *name)
{
	return s.len == strlen(name) && !strncasecmp(s.p, name, s.len);
}

/* Room for n bytes in the arena (there always is: proxy_out_init sized
 * it for the worst case). */
static char *take(struct runtime_http_proxy_out *o, size_t n)
{
	char *p = o->arena + o->used;

	o->used += n;
	return p;
}

static char *put(char *o, const void *p, size_t n)
{
	memcpy(o, p, n);
	return o + n;
}

/* ------------------------------------------------------------- the URL */

/* The cleaned path, less the prefix ("/api/a" of "/api/a/x", "/" left of
 * "/api/a"), at *at. Its length, -ENOENT outside the prefix, -EINVAL. */
static ssize_t path_for_upstream(const struct runtime_http_proxy *px,
                                 const struct runtime_http_request *req, char *at, size_t cap)
{
	struct runtime_http_slice path = runtime_http_path(req);
	ssize_t n;

	if (px->cfg.no_path_clean) {
		memcpy(at, path.p, path.len);
		n = (ssize_t)path.len;
	} else if ((n = runtime_http_path_clean(path, at, cap)) < 0) {
		return n;
	}
	size_t k = px->prefix_len;
	if (!k)
		return n;
	if ((size_t)n < k || memcmp(at, px->prefix, k) || ((size_t)n > k && at[k] != '/'))
		return -ENOENT;
	if ((size_t)n == k) {
		at[0] = '/';
		return 1;
	}
	memmove(at, at + k, (size_t)n - k);
	return n - (ssize_t)k;
}

/* upstream + path + "?query", NUL-terminated. 0, -ENOENT, -EINVAL. */
static int make_url(struct runtime_http_proxy_out *o, const struct runtime_http_proxy *px,
                    const struct runtime_http_request *req)
{
	struct runtime_http_slice path = runtime_http_path(req), query = runtime_http_query(req);
	char *url = o->arena + o->used;
	char *p = put(url, px->upstream, px->upstream_len);

	if (!path.len)
		return -EINVAL; /* "*", authority-form: nothing to send on */
	ssize_t n = path_for_upstream(px, req, p, path.len + 1);
	if (n < 0)
		return (int)n;
	p += n;
	if (query.len)
		p = put(put(p, "?", 1), query.p, query.len);
	*p++ = '\0';
	o->url = url;
	o->used = (size_t)(p - o->arena);
	return 0;
}

/* ----------------------------------------------------------- the fields */

/* Fields no upstream gets from us as they came (RFC 9110 7.6.1, and Host,
 * Content-Length and Expect: this hop's own). */
bool runtime__http_proxy_hop(struct runtime_http_slice name)
{
	static const char *const names[] = {
		"connection", "keep-alive", "proxy-connection", "proxy-authenticate",
		"proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (named(name, names[i]))
			return true;
	return false;
}

/* name is among the options of a Connection field (value: one of them). */
bool runtime__http_proxy_listed(struct runtime_http_slice value, struct runtime_http_slice name)
{
	const char *p = value.p, *end = value.p + value.len;

	while (p < end) {
		const char *q = p;
		while (q < end && *q != ',')
			q++;
		const char *a = p, *b = q;
		while (a < b && is_ows((unsigned char)*a))
			a++;
		while (b > a && is_ows((unsigned char)b[-1]))
			b--;
		if ((size_t)(b - a) == name.len && !strncasecmp(a, name.p, name.len))
			return true;
		p = q + 1;
	}
	return false;
}

/* name is listed in one of the request's Connection fields. */
static bool in_connection_field(const struct runtime_http_request *req, struct runtime_http_slice name)
{
	unsigned n = runtime_http_header_count(req);
	struct runtime_http_slice f, v;

	for (unsigned i = 0; i < n; i++)
		if (runtime_http_header_at(req, i, &f, &v) == 0 && named(f, "connection") &&
		    runtime__http_proxy_listed(v, name))
			return true;
	return false;
}

static int add_field(struct runtime_http_proxy_out *o, const char *field)
{
	if (o->nfields >= PROXY_OUT_FIELDS)
		return -ENOSPC;
	o->fields[o->nfields++] = field;
	o->fields[o->nfields] = NULL;
	return 0;
}

/* "Name: value" into the arena as a field. */
static int add_pair(struct runtime_http_proxy_out *o, struct runtime_http_slice name,
                    struct runtime_http_slice value)
{
	char *f = take(o, name.len + value.len + 3);
	char *p = put(put(put(f, name.p, name.len), ": ", 2), value.p, value.len);

	*p = '\0';
	return add_field(o, f);
}

/* The values of every field of req (NULL: none) called name, joined by
 * sep, as one field of that name with tail (may be empty) after them;
 * none and no tail: no field. */
static int add_joined(struct runtime_http_proxy_out *o, const struct runtime_http_request *req,
                      const char *name, const char *sep, const char *tail)
{
	unsigned n = req ? runtime_http_header_count(req) : 0, k = 0;
	struct runtime_http_slice f, v;
	size_t len = strlen(name), seplen = strlen(sep);
	char *field = take(o, 0), *p = put(put(field, name, len), ": ", 2);

	for (unsigned i = 0; i < n; i++) {
		if (runtime_http_header_at(req, i, &f, &v) < 0 || !named(f, name) || !v.len)
			continue;
		p = put(k++ ? put(p, sep, seplen) : p, v.p, v.len);
	}
	if (!k && !*tail)
		return 0;
	p = put(k && *tail ? put(p, sep, seplen) : p, tail, strlen(tail));
	*p++ = '\0';
	o->used += (size_t)(p - field);
	return add_field(o, field);
}

/* The client's fields but the hop-by-hop ones, Cookie (joined after) and
 * the forwarding ones this policy makes anew. */
static int copy_fields(struct runtime_http_proxy_out *o, const struct runtime_http_proxy *px,
                       const struct runtime_http_request *req)
{
	bool listing = runtime_http_header(req, "connection") != NULL;
	int policy = px->cfg.forwarded;
	unsigned n = runtime_http_header_count(req);
	struct runtime_http_slice f, v;

	for (unsigned i = 0; i < n; i++) {
		if (runtime_http_header_at(req, i, &f, &v) < 0 || runtime__http_proxy_hop(f) || named(f, "host") ||
		    named(f, "content-length") || named(f, "expect") || named(f, "cookie") ||
		    (listing && in_connection_field(req, f)))
			continue;
		bool forwarding = named(f, "x-forwarded-for") || named(f, "forwarded") ||
		                  named(f, "x-forwarded-proto") || named(f, "x-forwarded-host");
		if (forwarding && policy == RUNTIME_HTTP_FORWARD_REPLACE)
			continue;
		if (policy == RUNTIME_HTTP_FORWARD_APPEND &&
		    (named(f, "x-forwarded-for") || (px->cfg.rfc7239 && named(f, "forwarded"))))
			continue; /* appended to below */
		int rc = add_pair(o, f, v);
		if (rc < 0)
			return rc;
	}
	return add_joined(o, req, "Cookie", "; ", "");
}

/* ------------------------------------------------------- the forwarding */

static bool over_tls(const struct runtime_http_request *req)
{
	struct runtime_tls_info info;

	return runtime_conn_tls_info(runtime_http_conn(req), &info) == 0;
}

/* A Host fit to quote in Forwarded (RFC 7239 4: a quoted-string). */
static bool quotable(const struct runtime_http_slice *host)
{
	for (size_t i = 0; host && i < host->len; i++)
		if (host->p[i] == '"' || host->p[i] == '\\')
			return false;
	return host != NULL;
}

/* Forwarded: for=...;proto=...;host="..." appended to what came. */
static int add_forwarded(struct runtime_http_proxy_out *o, const struct runtime_http_request *req,
                         const char *addr, bool v6, const char *proto, bool replace)
{
	const struct runtime_http_slice *host = runtime_http_header(req, "host");
	char tail[INET6_ADDRSTRLEN + 384];
	int n = snprintf(tail, sizeof(tail), v6 ? "for=\"[%s]\";proto=%s" : "for=%s;proto=%s", addr,
	                 proto);

	if (quotable(host) && host->len <= 256)
		snprintf(tail + n, sizeof(tail) - (size_t)n, ";host=\"%.*s\"", (int)host->len, host->p);
	return add_joined(o, replace ? NULL : req, "Forwarded", ", ", tail);
}

/* The forwarding fields of the policy. */
static int add_forwarding(struct runtime_http_proxy_out *o, const struct runtime_http_proxy *px,
                          const struct runtime_http_request *req)
{
	bool append = px->cfg.forwarded == RUNTIME_HTTP_FORWARD_APPEND, v6;
	const char *proto = over_tls(req) ? "https" : "http";
	const struct runtime_http_slice *host = runtime_http_header(req, "host");
	char addr[INET6_ADDRSTRLEN];
	int rc = 0;

	if (px->cfg.forwarded == RUNTIME_HTTP_FORWARD_PASS)
		return 0;
	v6 = runtime__http_peer_address(req, addr, sizeof(addr), "unknown") == AF_INET6;
	rc = add_joined(o, append ? req : NULL, "X-Forwarded-For", ", ", addr);
	if (rc == 0 && (!append || !runtime_http_header(req, "x-forwarded-proto")))
		rc = add_pair(o, (struct runtime_http_slice){ "X-Forwarded-Proto", 17 },
		              (struct runtime_http_slice){ proto, strlen(proto) });
	if (rc == 0 && host && (!append || !runtime_http_header(req, "x-forwarded-host")))
		rc = add_pair(o, (struct runtime_http_slice){ "X-Forwarded-Host", 16 }, *host);
	if (rc == 0 && px->cfg.rfc7239)
		rc = add_forwarded(o, req, addr, v6, proto, !append);
	return rc;
}

/* ------------------------------------------------------------ the whole */

/* Bytes the arena may need: the URL, every field twice over (joined
 * ones and the forwarding ones repeat what came), and room for ours. */
static size_t arena_bound(const struct runtime_http_proxy *px, const struct runtime_http_request *req)
{
	size_t n = px->upstream_len + runtime_http_target(req).len + runtime_http_method(req).len + 1024;
	unsigned count = runtime_http_header_count(req);
	struct runtime_http_slice f, v;

	for (unsigned i = 0; i < count; i++)
		if (runtime_http_header_at(req, i, &f, &v) == 0)
			n += 2 * (f.len + v.len + 4);
	return n;
}

/* The request asks to switch protocols (RFC 9110 7.8: Upgrade, and
 * "upgrade" among its Connection options): its Upgrade, NUL-terminated
 * in the arena, to ask the upstream for. */
static void take_upgrade(struct runtime_http_proxy_out *o, const struct runtime_http_request *req)
{
	const struct runtime_http_slice *up = runtime_http_header(req, "upgrade");

	if (!up || !up->len || runtime_http_version(req) != 11 ||
	    !in_connection_field(req, (struct runtime_http_slice){ "upgrade", 7 }))
		return;
	char *v = take(o, up->len + 1);
	*put(v, up->p, up->len) = '\0';
	o->upgrade = v;
}

int runtime__http_proxy_out_init(struct runtime_http_proxy_out *o,
                                 const struct runtime_http_proxy *px,
                                 const struct runtime_http_request *req)
{
	*o = (struct runtime_http_proxy_out){ .cap = arena_bound(px, req) };
	if (!(o->arena = malloc(o->cap)))
		return -ENOMEM;
	struct runtime_http_slice m = runtime_http_method(req);
	char *method = take(o, m.len + 1);
	*put(method, m.p, m.len) = '\0';
	o->method = method;
	int rc = make_url(o, px, req);
	if (rc == 0)
		rc = copy_fields(o, px, req);
	if (rc == 0)
		rc = add_forwarding(o, px, req);
	if (rc == 0)
		take_upgrade(o, req);
	return rc;
}

void runtime__http_proxy_out_free(struct runtime_http_proxy_out *o)
{
	for (unsigned i = 0; i < o->nowned; i++)
		free(o->owned[i]);
	free(o->arena);
}

/* ------------------------------------------------------------- the hooks */

static char *own(struct runtime_http_proxy_out *o, const char *s)
{
	if (o->nowned >= sizeof(o->owned) / sizeof(o->owned[0]))
		return NULL;
	return o->owned[o->nowned++] = strdup(s);
}

int runtime_http_proxy_set_url(struct runtime_http_proxy_out *o, const char *url)
{
	if (!o || !url)
		return -EINVAL;
	char *copy = own(o, url);
	if (!copy)
		return o->nowned >= sizeof(o->owned) / sizeof(o->owned[0]) ? -ENOSPC : -ENOMEM;
	o->url = copy;
	return 0;
}

int runtime_http_proxy_add_header(struct runtime_http_proxy_out *o, const char *field)
{
	if (!o || !field || !strchr(field, ':'))
		return -EINVAL;
	if (o->nfields >= PROXY_OUT_FIELDS)
		return -ENOSPC;
	char *copy = own(o, field);
	if (!copy)
		return o->nowned >= sizeof(o->owned) / sizeof(o->owned[0]) ? -ENOSPC : -ENOMEM;
	return add_field(o, copy);
}

int runtime_http_proxy_remove_header(struct runtime_http_proxy_out *o, const char *name)
{
	size_t len = name ? strlen(name) : 0;
	unsigned kept = 0;

	if (!o || !len)
		return -EINVAL;
	for (unsigned i = 0; i < o->nfields; i++) {
		const char *f = o->fields[i];
		if (!(f[len] == ':' && !strncasecmp(f, name, len)))
			o->fields[kept++] = f;
	}
	o->nfields = kept;
	o->fields[kept] = NULL;
	return 0;
}

const char *runtime_http_proxy_url(const struct runtime_http_proxy_out *o)
{
	return o ? o->url : NULL;
}
