/* SPDX-License-Identifier: MIT */
/*
 * proxy.c - a reverse proxy as a handler (runtime_http_proxy_handler):
 * the upstream request made (proxy_out.c), sent through the caller's
 * client with the request's body streamed into it, and the answer's
 * head and body streamed back. What fails upstream is 502, what is late
 * 504; what fails on the client's side ends as the server ends it.
 */
#include "proxy.h"
#include "client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_BODY (64 * 1024) /* request bodies read whole first: retryable */
#define SMALL_ANSWER 4096      /* answer bodies copied through the stack */
#define COPY_CHUNK (32 * 1024) /* larger ones, through a buffer this big */

void runtime_http_proxy_config_init(struct runtime_http_proxy_config *cfg)
{
	if (cfg)
		*cfg = (struct runtime_http_proxy_config){ .log_fd = 2 };
}

/* A copy of s without '/' at its end. */
static char *trimmed(const char *s, size_t *len)
{
	size_t n = strlen(s);

	while (n && s[n - 1] == '/')
		n--;
	*len = n;
	return strndup(s, n);
}

static int check_config(const struct runtime_http_proxy_config *cfg)
{
	struct http_url u;

	if (!cfg || !cfg->client || !cfg->upstream || strpbrk(cfg->upstream, "?#") ||
	    runtime__http_url_parse(cfg->upstream, &u) < 0)
		return -EINVAL;
	if (cfg->strip_prefix && cfg->strip_prefix[0] != '/')
		return -EINVAL;
	if (cfg->forwarded < RUNTIME_HTTP_FORWARD_APPEND || cfg->forwarded > RUNTIME_HTTP_FORWARD_PASS)
		return -EINVAL;
	return 0;
}

int runtime_http_proxy_create(struct runtime_http_proxy **pxp,
                              const struct runtime_http_proxy_config *cfg)
{
	if (!pxp || check_config(cfg) < 0)
		return -EINVAL;
	struct runtime_http_proxy *px = calloc(1, sizeof(*px));
	if (!px)
		return -ENOMEM;
	px->cfg = *cfg;
	px->upstream = trimmed(cfg->upstream, &px->upstream_len);
	if (cfg->strip_prefix)
		px->prefix = trimmed(cfg->strip_prefix, &px->prefix_len);
	if (!px->upstream || (cfg->strip_prefix && !px->prefix)) {
		runtime_http_proxy_destroy(px);
		return -ENOMEM;
	}
	*pxp = px;
	return 0;
}

void runtime_http_proxy_destroy(struct runtime_http_proxy *px)
{
	if (!px)
		return;
	free(px->upstream);
	free(px->prefix);
	free(px);
}

/* ------------------------------------------------------ answers of ours */

static int answer(struct runtime_http_response *res, int status, const char *text)
{
	return runtime_http_respond(res, status, "text/plain", text, strlen(text));
}

static void log_failure(const struct runtime_http_proxy *px, const char *url, const char *what,
                        int rc)
{
	if (px->cfg.log_fd >= 0)
		runtime_log(px->cfg.log_fd, "proxy: %s: %s: %s\n", url, what, strerror(-rc));
}

/* The upstream's failure as the client sees it: 504 for a clock, 502 for
 * the rest. */
static int upstream_failed(const struct runtime_http_proxy *px, struct runtime_http_response *res,
                           const char *url, int rc)
{
	log_failure(px, url, "upstream", rc);
	if (rc == -ETIMEDOUT)
		return answer(res, 504, "gateway timeout\n");
	if (rc == -ESHUTDOWN) { /* the client is being destroyed: a drain */
		runtime_http_set_close(res);
		return answer(res, 503, "shutting down\n");
	}
	return answer(res, 502, "bad gateway\n");
}

/* -------------------------------------------------------- the answer back */

/* The upstream's field is passed back: not hop-by-hop, not listed in its
 * Connection, not hidden. (Date, Server and the framing fields the
 * server refuses, -EPERM, and they are skipped then.) */
static bool passed_back(const struct runtime_http_proxy *px, const struct runtime_http_result *up,
                        struct runtime_http_slice name)
{
	if (runtime__http_proxy_hop(name))
		return false;
	for (const char *const *h = px->cfg.hide_headers; h && *h; h++)
		if (strlen(*h) == name.len && !strncasecmp(*h, name.p, name.len))
			return false;
	if (!runtime_http_result_header(up, "connection"))
		return true; /* no options listed: the common case, one lookup */
	unsigned n = runtime_http_result_header_count(up);
	struct runtime_http_slice f, v;
	for (unsigned i = 0; i < n; i++)
		if (runtime_http_result_header_at(up, i, &f, &v) == 0 && f.len == 10 &&
		    !strncasecmp(f.p, "connection", 10) && runtime__http_proxy_listed(v, name))
			return false;
	return true;
}

/* One field onto res, NUL-terminated through buf (cap bytes) or the heap. */
static int set_field(struct runtime_http_response *res, struct runtime_http_slice f,
                     struct runtime_http_slice v, char *buf, size_t cap)
{
	size_t need = f.len + v.len + 2;
	char *p = need <= cap ? buf : malloc(need);

	if (!p)
		return -ENOMEM;
	memcpy(p, f.p, f.len);
	p[f.len] = '\0';
	memcpy(p + f.len + 1, v.p, v.len);
	p[f.len + 1 + v.len] = '\0';
	int rc = runtime_http_set_header(res, p, p + f.len + 1);
	if (p != buf)
		free(p);
	return rc == -EPERM ? 0 : rc;
}

static int copy_fields_back(const struct runtime_http_proxy *px, struct runtime_http_result *up,
                            struct runtime_http_response *res)
{
	unsigned n = runtime_http_result_header_count(up);
	struct runtime_http_slice f, v;
	char buf[1024];

	for (unsigned i = 0; i < n; i++) {
		if (runtime_http_result_header_at(up, i, &f, &v) < 0 || !passed_back(px, up, f))
			continue;
		int rc = set_field(res, f, v, buf, sizeof(buf));
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The answer's body, read and written on until its end. 0, the upstream
 * read's error (> 0: 1, the write's error stored in *wrc). */
static ssize_t pump(struct runtime_http_result *up, struct runtime_http_response *res, char *buf,
                    size_t cap, int *wrc)
{
	ssize_t n;

	while ((n = runtime_http_result_read(up, buf, cap)) > 0)
		if ((*wrc = runtime_http_write(res, buf, (size_t)n)) < 0)
			return 1;
	return n;
}

/* The answer's body back. A failure after the head ends the connection:
 * the client sees the body cut short, never a whole one. */
static int copy_body_back(const struct runtime_http_proxy *px, struct runtime_http_result *up,
                          struct runtime_http_response *res, const char *url)
{
	int64_t len = runtime_http_result_length(up);
	char small[SMALL_ANSWER];
	bool big = len < 0 || len > SMALL_ANSWER;
	char *buf = big ? malloc(COPY_CHUNK) : small;
	int wrc = 0;

	if (!buf)
		return -ENOMEM;
	ssize_t n = pump(up, res, buf, big ? COPY_CHUNK : SMALL_ANSWER, &wrc);
	if (big)
		free(buf);
	if (n == 0)
		return runtime_http_end(res);
	if (n < 0)
		log_failure(px, url, "upstream body", (int)n);
	return n < 0 ? (int)n : wrc;
}

/* The Content-Type to pass on, NUL-terminated into buf; NULL: none. */
static const char *content_type(const struct runtime_http_result *up, char *buf, size_t cap)
{
	const struct runtime_http_slice *t = runtime_http_result_header(up, "content-type");

	if (!t || t->len >= cap)
		return NULL;
	memcpy(buf, t->p, t->len);
	buf[t->len] = '\0';
	return buf;
}

static int answer_back(const struct runtime_http_proxy *px, struct runtime_http_request *req,
                       struct runtime_http_result *up, struct runtime_http_response *res,
                       const char *url)
{
	char type[HTTP_TYPE_MAX + 1];
	int rc = px->cfg.rewrite_response ? px->cfg.rewrite_response(req, up, res, px->cfg.hook_arg)
	                                  : 0;

	if (rc == 1)
		return 0;
	if (rc == 0)
		rc = copy_fields_back(px, up, res);
	if (rc < 0) {
		log_failure(px, url, "answer's head", rc);
		return answer(res, 502, "bad gateway\n");
	}
	int64_t len = runtime_http_result_length(up);
	rc = runtime_http_start(res, runtime_http_result_status(up), content_type(up, type, sizeof(type)),
	                        len >= 0 ? len : RUNTIME_HTTP_CHUNKED);
	return rc < 0 ? rc : copy_body_back(px, up, res, url);
}

/* ------------------------------------------------------------- a tunnel */

/* bytes (what one side sent after the switch, read already) to conn. */
static int pass_early(struct runtime_conn *conn, struct runtime_http_slice bytes)
{
	size_t done;

	return bytes.len ? (int)runtime_conn_write(conn, bytes.p, bytes.len, &done) : 0;
}

/* The upstream switched protocols (101): so does the client, with the
 * upstream's fields (a WebSocket's Sec-WebSocket-Accept), then bytes go
 * both ways until both sides have closed. */
static int tunnel(const struct runtime_http_proxy *px, struct runtime_http_result *up,
                  struct runtime_http_response *res, const char *url)
{
	const struct runtime_http_slice *p = runtime_http_result_header(up, "upgrade");
	struct runtime_http_upgraded down, upstream;
	char proto[256];

	if (!p || p->len >= sizeof(proto) || runtime_http_result_upgraded(up, &upstream) < 0 ||
	    copy_fields_back(px, up, res) < 0) {
		log_failure(px, url, "upgrade", -EBADMSG);
		return answer(res, 502, "bad gateway\n");
	}
	memcpy(proto, p->p, p->len);
	proto[p->len] = '\0';
	int rc = runtime_http_upgrade(res, proto, &down);
	if (rc == -EINVAL) { /* the upstream chose a protocol not asked for */
		log_failure(px, url, "upgrade", rc);
		return answer(res, 502, "bad gateway\n");
	}
	if (rc < 0)
		return rc;
	if (pass_early(down.conn, upstream.early) >= 0 && pass_early(upstream.conn, down.early) >= 0)
		runtime_copy_both(runtime_conn_transport(down.conn), runtime_conn_transport(upstream.conn),
		                  0, 0, NULL, NULL); /* until both close: its end is no error */
	return 0;
}

/* ------------------------------------------------------------ the request */

/* The client's body, for the upstream request; its error kept apart from
 * the upstream's. */
struct body_source {
	struct runtime_http_request *req;
	int error;
};

static ssize_t body_from_client(void *arg, void *buf, size_t len)
{
	struct body_source *b = arg;
	ssize_t n = runtime_http_body_read(b->req, buf, len);

	if (n < 0)
		b->error = (int)n;
	return n;
}

/* The request's body into creq: read whole if small (so it can be
 * retried), else streamed with its length if known. 0 or the read's
 * error. */
static int attach_body(struct runtime_http_client_request *creq, struct body_source *src,
                       char **small)
{
	int64_t len = runtime_http_body_length(src->req);
	size_t got = 0;

	if (len > 0 && len <= SMALL_BODY) {
		int rc = runtime_http_body_read_all(src->req, small, &got, SMALL_BODY);
		if (rc < 0)
			return rc;
		creq->body = *small;
		creq->body_len = got;
	} else if (len != 0) {
		creq->body_read = body_from_client;
		creq->body_arg = src;
		creq->body_read_len = len > 0 ? (uint64_t)len : 0;
	}
	return 0;
}

static int forward(const struct runtime_http_proxy *px, struct runtime_http_request *req,
                   struct runtime_http_response *res, struct runtime_http_proxy_out *out)
{
	struct body_source src = { .req = req };
	struct runtime_http_client_request creq = {
		.method = out->method, .url = out->url, .headers = out->fields,
		.head_timeout_ns = px->cfg.head_timeout_ns, .read_idle_ns = px->cfg.read_idle_ns,
		.upgrade = out->upgrade,
	};
	struct runtime_http_result *up = NULL;
	char *small = NULL;
	int rc = attach_body(&creq, &src, &small);

	if (rc == 0)
		rc = runtime_http_request(px->cfg.client, &creq, &up);
	free(small);
	if (rc < 0 && (src.error || rc == -ECANCELED || rc == -ENOMEM))
		return src.error ? src.error : rc;
	if (rc < 0)
		return upstream_failed(px, res, out->url, rc);
	if (runtime_http_result_status(up) == 101)
		rc = tunnel(px, up, res, out->url);
	else
		rc = answer_back(px, req, up, res, out->url);
	runtime_http_result_close(up);
	return rc;
}

int runtime_http_proxy_handler(struct runtime_http_request *req,
                               struct runtime_http_response *res, void *arg)
{
	struct runtime_http_proxy *px = arg;
	struct runtime_http_proxy_out out;

	if (!req || !res || !px)
		return -EINVAL;
	int rc = runtime__http_proxy_out_init(&out, px, req);
	if (rc == -ENOENT || rc == -EINVAL)
		rc = rc == -ENOENT ? answer(res, 404, "not found\n") : answer(res, 400, "bad request\n");
	else if (rc == 0 && px->cfg.rewrite_request)
		rc = px->cfg.rewrite_request(req, res, &out, px->cfg.hook_arg);
	if (rc == 0 && !runtime_http_status(res))
		rc = forward(px, req, res, &out);
	runtime__http_proxy_out_free(&out);
	return rc == 1 ? 0 : rc;
}
