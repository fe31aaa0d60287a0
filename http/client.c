/* SPDX-License-Identifier: MIT */
/*
 * client.c - runtime_http_request: a request's head (and body) out on a
 * pooled or new connection, the response's head in, strictly parsed;
 * one retry on a fresh connection when a pooled one turns out dead;
 * redirects when asked; and the client object itself (configuration,
 * counters, destroy).
 *
 * A request runs in the calling fiber from start to the response's head;
 * the body is read afterwards through the result (result.c). Nothing is
 * pipelined: one request at a time per connection, so a connection that
 * answered is either given back to its pool whole (the body read to its
 * end, nothing more buffered) or closed.
 *
 * Deadlines: req->deadline_ns becomes the connection's read and write
 * deadline for the whole exchange, the body's reads included, and the
 * fiber's own deadline (also the connect timeout's, made earlier) while
 * it dials; once the request is sent, head_timeout_ns shortens the read
 * deadline until the head is in (a watcher's read under way too), and
 * each body read may be shortened by read_idle_ns (result.c). A call
 * that times out says which clock it was (http_timeout_kind). The
 * fiber's deadline and cancellation apply throughout, as in every call
 * of the runtime.
 */
#include "client.h"
#include "body.h"
#include "chars.h"
#include "decimal.h"

#include <stdlib.h>
#include <string.h>

#define SEC 1000000000ull
#define INTERIM_MAX 16 /* 1xx responses before the final one, at most */
#define STREAM_CHUNK (16 * 1024) /* a streamed body's chunk, at most */
/* A fixed body longer than this may fill the socket's buffers and wait on
 * a server that reads no more: its answer is watched for meanwhile. The
 * kernel's buffers take a shorter one whole (tcp_rmem's 128 KiB default
 * on the server's side alone), so it costs no watcher fiber. */
#define WATCH_MIN (64 * 1024)

/* ------------------------------------------------------------ validation */

static bool is_method(const char *m, const char *lit)
{
	return !strcmp(m, lit);
}

static bool token_string(const char *s)
{
	size_t i = 0;

	while (is_tchar((unsigned char)s[i]))
		i++;
	return i > 0 && !s[i];
}

/* The fields the library writes, and the connection-specific ones whose
 * meaning it would have to implement (RFC 9110 7.6.1). */
static bool reserved(const char *name, size_t n)
{
	static const char *const names[] = { "host", "content-length", "transfer-encoding",
		                             "connection", "upgrade", "keep-alive",
		                             "proxy-connection" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && slice_ieq(name, n, names[i]))
			return true;
	return false;
}

/* "Name: value": a token, a colon, field bytes (no CR, LF, NUL or other
 * control but HTAB). */
static int check_header(struct http_exchange *x, const char *h)
{
	size_t i = 0;

	while (is_tchar((unsigned char)h[i]))
		i++;
	if (i == 0 || h[i] != ':' || reserved(h, i))
		return -EINVAL;
	for (size_t j = i + 1; h[j]; j++)
		if (!is_field_byte((unsigned char)h[j]))
			return -EINVAL;
	x->has_ua |= i == 10 && slice_ieq(h, i, "user-agent");
	return 0;
}

/* An Upgrade field's value: protocols, field bytes, 1 to 255 of them. */
static bool upgrade_ok(const char *v)
{
	size_t n = strlen(v);

	for (size_t i = 0; i < n; i++)
		if (!is_field_byte((unsigned char)v[i]))
			return false;
	return n && n < 256 && v[0] != ' ' && v[n - 1] != ' ';
}

static bool credential(const char *h)
{
	size_t n = strcspn(h, ":");

	return slice_ieq(h, n, "authorization") || slice_ieq(h, n, "proxy-authorization") ||
	       slice_ieq(h, n, "cookie");
}

static int exchange_init(struct http_exchange *x, struct runtime_http_client *cl,
                         const struct runtime_http_client_request *req)
{
	*x = (struct http_exchange){ .cl = cl, .req = req, .method = req->method ? req->method : "GET",
	                        .url = req->url, .body = req->body, .body_len = req->body_len,
	                        .streamed = req->body_read != NULL, .deadline = req->deadline_ns };
	if (!token_string(x->method) || (!x->body && x->body_len))
		return -EINVAL;
	if (x->streamed)
		x->body_len = 0;
	if (req->upgrade && !upgrade_ok(req->upgrade))
		return -EINVAL;
	x->upgrade = req->upgrade;
	x->stream_sized = x->streamed && req->body_read_len;
	x->stream_left = x->stream_sized ? req->body_read_len : 0;
	x->head = is_method(x->method, "HEAD");
	for (const char *const *h = req->headers; h && *h; h++)
		if (check_header(x, *h) < 0)
			return -EINVAL;
	if (!(x->core = runtime__http_client_core(cl)))
		return runtime_core_index() < 0 ? -EPERM : -ENOMEM;
	return 0;
}

/* ------------------------------------------------------------- the head */

static char *put_str(char *o, const char *s)
{
	size_t n = strlen(s);

	memcpy(o, s, n);
	return o + n;
}

static char *put_mem(char *o, const char *s, size_t n)
{
	memcpy(o, s, n);
	return o + n;
}

/* At least the head's length (see write_head). */
static size_t head_bound(const struct http_exchange *x, const struct http_url *u)
{
	size_t n = strlen(x->method) + u->target.len + u->host.len + x->cl->ua_len + 128 + 300;

	for (const char *const *h = x->req->headers; h && *h; h++)
		n += strlen(*h) + 2;
	return n;
}

/* The framing field: Content-Length for a fixed body (0 too where the
 * method means to send one) or a streamed one of known length, chunked
 * for another streamed one. */
static char *put_framing(const struct http_exchange *x, char *o)
{
	if (x->stream_sized)
		return put_str(http_put_u64(put_str(o, "Content-Length: "), x->req->body_read_len),
		               "\r\n");
	if (x->streamed)
		return put_str(o, "Transfer-Encoding: chunked\r\n");
	if (x->body_len || is_method(x->method, "POST") || is_method(x->method, "PUT") ||
	    is_method(x->method, "PATCH"))
		return put_str(http_put_u64(put_str(o, "Content-Length: "), x->body_len), "\r\n");
	return o;
}

bool runtime__http_field_sent(const struct http_exchange *x, const char *h)
{
	return !x->strip_credentials || !credential(h);
}

static size_t write_head(const struct http_exchange *x, const struct http_url *u, char *out)
{
	const struct runtime_http_client *cl = x->cl;
	char *o = put_str(out, x->method);

	*o++ = ' ';
	if (u->slash)
		*o++ = '/';
	o = put_mem(o, u->target.p, u->target.len);
	o = put_str(o, " HTTP/1.1\r\nHost: ");
	if (u->ip6)
		*o++ = '[';
	o = put_mem(o, u->host.p, u->host.len);
	if (u->ip6)
		*o++ = ']';
	if (!u->default_port)
		o = http_put_u64(put_str(o, ":"), u->port);
	o = put_str(o, "\r\n");
	if (!x->has_ua)
		o = put_mem(o, cl->ua_field, cl->ua_len);
	for (const char *const *h = x->req->headers; h && *h; h++)
		if (runtime__http_field_sent(x, *h))
			o = put_str(put_str(o, *h), "\r\n");
	o = put_framing(x, o);
	if (x->upgrade)
		o = put_str(put_str(put_str(o, "Connection: Upgrade\r\nUpgrade: "), x->upgrade), "\r\n");
	else if (!cl->cfg.max_per_origin)
		o = put_str(o, "Connection: close\r\n");
	return (size_t)(put_str(o, "\r\n") - out);
}

/* ---------------------------------------------------------------- sending */

ssize_t runtime__http_body_next(struct http_exchange *x, void *buf, size_t cap)
{
	if (x->stream_sized && x->stream_left < cap)
		cap = (size_t)x->stream_left;
	if (x->stream_sized && !cap)
		return 0;
	ssize_t got = x->req->body_read(x->req->body_arg, buf, cap);
	if (got < 0 || (size_t)got > cap || (got == 0 && x->stream_sized))
		return x->body_error = got < 0 ? (int)got : -EINVAL;
	x->stream_left -= x->stream_sized ? (uint64_t)got : 0;
	return got;
}

/* The head, then body_read's bytes, a chunk each unless the length is
 * known, read into a buffer of its own: the connection's input buffer
 * takes the answer's head, which a watcher may read meanwhile
 * (exchange_watched). */
static int send_streamed(struct http_exchange *x, struct http_cconn *c, char *head, size_t n)
{
	struct iovec iov[4] = { { head, n } };
	char *chunk = malloc(STREAM_CHUNK);
	bool chunked = !x->stream_sized;
	int cnt = 1, rc;

	if (!chunk)
		return -ENOMEM;
	x->body_started = true;
	for (;;) {
		ssize_t got = runtime__http_body_next(x, chunk, STREAM_CHUNK);
		char size[24];
		if (got < 0) {
			rc = (int)got;
			break;
		}
		if (got == 0) {
			if (chunked)
				iov[cnt++] = (struct iovec){ (char *)"0\r\n\r\n", 5 };
			rc = runtime__http_writev_all(c->rc, iov, cnt);
			break;
		}
		if (chunked)
			iov[cnt++] = (struct iovec){ size, (size_t)snprintf(size, sizeof(size), "%zx\r\n",
			                                                    (size_t)got) };
		iov[cnt++] = (struct iovec){ chunk, (size_t)got };
		if (chunked)
			iov[cnt++] = (struct iovec){ (char *)"\r\n", 2 };
		if ((rc = runtime__http_writev_all(c->rc, iov, cnt)) < 0)
			break;
		cnt = 0;
	}
	free(chunk);
	return rc;
}

static int send_request(struct http_exchange *x, const struct http_url *u, struct http_cconn *c)
{
	size_t cap = head_bound(x, u);
	char *head = cap <= sizeof(c->out) ? c->out : malloc(cap);
	int rc;

	if (!head)
		return -ENOMEM;
	size_t n = write_head(x, u, head);
	if (x->streamed) {
		rc = send_streamed(x, c, head, n);
	} else {
		struct iovec iov[2] = { { head, n }, { (void *)x->body, x->body_len } };
		rc = runtime__http_writev_all(c->rc, iov, x->body_len ? 2 : 1);
	}
	if (head != c->out)
		free(head);
	return rc;
}

/* -------------------------------------------------------------- receiving */

/* An interim (1xx) response is dropped, and what follows it moved to the
 * front: the final head is always parsed at in[0]. */
static void skip_interim(struct http_cconn *c, size_t len)
{
	c->in_off += len;
	memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
	c->in_len -= c->in_off;
	c->in_off = 0;
}

/* The final response's head, its length, or -errno: -ECONNRESET for a
 * connection closed before it was whole. */
static int read_head(struct http_exchange *x, struct http_cconn *c)
{
	struct http_response *h = &c->res.head;
	unsigned flags = x->head ? HTTP_RESPONSE_TO_HEAD : 0, interim = 0;

	for (;;) {
		if (c->in_len > c->in_off) {
			int rc = runtime__http_parse_response(c->in, c->in_len, &x->cl->limits, flags, h);
			if (rc < 0 || (rc > 0 && (h->status >= 200 || (h->status == 101 && x->upgrade))))
				return rc;
			if (rc > 0 && (h->status == 101 || ++interim > INTERIM_MAX))
				return -EBADMSG; /* nobody asked to switch protocols */
			if (rc > 0) {
				skip_interim(c, (size_t)rc);
				continue;
			}
		}
		ssize_t n = runtime__http_cconn_fill(c);
		if (n == 0 || n == -ECONNABORTED) /* TLS: the end, without close_notify */
			return -ECONNRESET;
		if (n < 0)
			return n == -ENOBUFS ? -EMSGSIZE : (int)n;
		x->got_bytes = true;
	}
}

static bool broken(int rc)
{
	return rc == -EPIPE || rc == -ECONNRESET || rc == -ECONNABORTED || rc == -ENOTCONN;
}

/* The request is sent: head_timeout_ns starts, and bounds the head's
 * reads (a watcher's under way too) with the request's deadline. */
static void head_clock(struct http_exchange *x, struct http_cconn *c)
{
	if (!x->req->head_timeout_ns)
		return;
	x->head_end = http_after(x->req->head_timeout_ns);
	runtime_conn_set_read_deadline(c->rc, http_earlier(x->deadline, x->head_end));
}

/* ------------------------------------------------- the early answer */

/*
 * While a long body goes out, a watcher fiber reads the answer's head (RFC
 * 9112 9.3: a client SHOULD watch for an error response as it sends): a
 * server that answers 413 after the head and reads no more would leave
 * the send waiting until the deadline. A final answer that stops the
 * body - an error or a redirect (3xx and up), or one that closes the
 * connection - expires the write deadline, which wakes the sender; the
 * request returns that answer, and the connection, its body cut short,
 * is not kept. A 2xx the server sends before the body is in is no such
 * sign: the body goes out whole, as the server may still read it.
 */
struct watch {
	struct http_exchange *x;
	struct http_cconn *c;
	int rc;                      /* read_head's */
	bool stop;                   /* the answer came and stops the body */
};

static bool stops_body(const struct http_response *h)
{
	return h->status >= 300 || !h->keep_alive;
}

static void *watch_head(void *arg)
{
	struct watch *w = arg;

	w->rc = read_head(w->x, w->c);
	if (w->rc > 0 ? stops_body(&w->c->res.head) : w->rc != -ECANCELED) {
		w->stop = w->rc > 0;
		runtime_conn_set_write_deadline(w->c->rc, 1); /* past: the send ends */
	}
	return NULL;
}

/* f watches: the caller's wait for it to end. A caller cancelled or past
 * its deadline cancels it and still waits, inside a cleanup (f uses the
 * caller's exchange). 0, or the caller's -ECANCELED or -ETIMEDOUT. */
static int join_watcher(struct runtime_fiber *f)
{
	struct runtime_cleanup cleanup;
	int rc = runtime_fiber_join(f, NULL);

	if (rc < 0) {
		runtime_fiber_cancel(f);
		runtime_cleanup_begin(&cleanup, 10 * (int64_t)SEC);
		runtime_fiber_join(f, NULL);
		runtime_cleanup_end(&cleanup);
	}
	return rc;
}

/* Send while f watches; the head's length or -errno, as send_and_read's.
 * A send that failed by itself (not cut by the server, nor by the
 * watcher) cancels the watcher. Which error wins: the body source's, the
 * caller's own, the watcher's (a bad or missing answer, which ended the
 * send), the send's. */
static int send_watched(struct http_exchange *x, const struct http_url *u, struct http_cconn *c,
                        struct watch *w, struct runtime_fiber *f, int *wrc)
{
	*wrc = send_request(x, u, c);
	if (*wrc == 0)
		head_clock(x, c); /* the watcher's read of the head, from now */
	if (*wrc < 0 && !w->stop && (x->body_error || !broken(*wrc)))
		runtime_fiber_cancel(f); /* harmless if it has ended */
	int jrc = join_watcher(f);
	if (x->body_error)
		return *wrc;
	if (jrc < 0)
		return jrc;
	if (w->stop) {
		*wrc = 1; /* the body was cut: the connection is not kept */
		return w->rc;
	}
	bool watcher_failed = w->rc < 0 && w->rc != -ECANCELED; /* it ended the send */
	if (*wrc < 0 && !broken(*wrc) && !watcher_failed)
		return *wrc;
	return w->rc;
}

static bool watched(const struct http_exchange *x)
{
	return x->streamed || x->body_len > WATCH_MIN;
}

/* The request's head and body out, the answer's head in: its length, or
 * -errno; *wrc the send's result (0, -errno, or 1 if an early answer cut
 * the body short). A write cut by a server that closed or reset may still
 * leave its answer to read (an early 413, say): it is read. */
static int send_and_read(struct http_exchange *x, const struct http_url *u, struct http_cconn *c,
                         int *wrc)
{
	struct watch w = { x, c, 0, false };
	struct runtime_fiber *f;

	if (watched(x) && runtime_fiber_spawn(runtime_current(), &f, watch_head, &w) == 0)
		return send_watched(x, u, c, &w, f, wrc);
	*wrc = send_request(x, u, c);
	if (x->body_error || (*wrc < 0 && !broken(*wrc)))
		return *wrc;
	head_clock(x, c);
	return read_head(x, c);
}

/* One request on c: 0 with c->res ready, or -errno. */
static int exchange_on(struct http_exchange *x, const struct http_url *u, struct http_cconn *c)
{
	int wrc, rc;

	x->got_bytes = false;
	x->head_end = 0;
	runtime_conn_set_read_deadline(c->rc, x->deadline);
	runtime_conn_set_write_deadline(c->rc, x->deadline);
	http_count(&x->core->requests);
	c->used++;
	rc = send_and_read(x, u, c, &wrc);
	if (rc < 0) {
		rc = wrc < 0 ? wrc : rc;
		if (rc == -ETIMEDOUT)
			x->timed_out = http_timeout_kind(x->deadline, x->head_end,
			                                 RUNTIME_HTTP_TIMEOUT_HEAD);
		return rc;
	}
	if (x->head_end) /* the body's reads: the request's deadline again */
		runtime_conn_set_read_deadline(c->rc, x->deadline);
	runtime__http_result_init(c, (size_t)rc, wrc == 0 && c->res.head.keep_alive &&
	                          x->cl->cfg.max_per_origin && c->res.head.status != 101);
	c->res.deadline = x->deadline;
	c->res.read_idle = x->req->read_idle_ns;
	c->res.timed_out = RUNTIME_HTTP_TIMEOUT_NONE;
	return 0;
}

/* ----------------------------------------------------------------- tries */

static bool idempotent(const char *m)
{
	return is_method(m, "GET") || is_method(m, "HEAD") || is_method(m, "OPTIONS") ||
	       is_method(m, "PUT") || is_method(m, "DELETE") || is_method(m, "TRACE");
}

/* A pooled connection the server had closed fails before any byte of
 * the answer: once more on a new one, if sending twice is harmless. */
static bool retryable(const struct http_exchange *x, int rc)
{
	return broken(rc) && !x->got_bytes && !x->streamed && idempotent(x->method);
}

/* A new connection for x: runtime__http_dial's result, and which clock
 * ended it if it timed out (connect_timeout_ns or the deadline). */
static int dial_timed(struct http_exchange *x, const struct http_url *u, struct http_cconn **c)
{
	uint64_t end = http_after(x->cl->cfg.connect_timeout_ns);
	int rc = runtime__http_dial(x->core, u, x->deadline, c);

	if (rc == -ETIMEDOUT)
		x->timed_out = http_timeout_kind(x->deadline, end, RUNTIME_HTTP_TIMEOUT_CONNECT);
	return rc;
}

/* The request on HTTP/1.1 connection c, retried once on a new one if
 * allowed: 0 and *res, or -errno (c closed). */
static int attempt_h1(struct http_exchange *x, const struct http_url *u, struct http_cconn *c,
                      struct runtime_http_result **res)
{
	int rc = exchange_on(x, u, c);

	if (rc < 0 && c->used > 1 && retryable(x, rc)) {
		runtime__http_cconn_close(c);
		http_count(&x->core->retried);
		if ((rc = dial_timed(x, u, &c)) < 0)
			return rc;
		if (c->h2) { /* the server speaks HTTP/2 now: not this time */
			runtime__http_cconn_close(c);
			return -ECONNRESET;
		}
		rc = exchange_on(x, u, c);
	}
	if (rc < 0) {
		runtime__http_cconn_close(c);
		return rc;
	}
	*res = &c->res;
	return 0;
}

/* A new connection to o, for x: HTTP/1.1's (*c) or HTTP/2's (*h2), as
 * the server agreed; the requests that waited for it are woken. */
static int dial(struct http_exchange *x, const struct http_url *u, struct http_origin *o,
                struct http_cconn **c, struct h2_cconn **h2)
{
	o->dialing++;
	int rc = dial_timed(x, u, c);
	o->dialing--;
	if (rc == 0 && (*c)->h2) {
		o->proto = 20;
		rc = runtime__h2_client_adopt(x->core, o, *c, h2);
		*c = NULL;
	} else if (rc == 0) {
		o->proto = 11;
	}
	runtime__http_origin_wake(o);
	return rc;
}

/* The connection for x to u: an HTTP/2 one of the origin's with room for
 * a stream, a pooled HTTP/1.1 one, or a new one. While a dial runs to an
 * origin not known to speak HTTP/1.1 only, it is waited for: an HTTP/2
 * server takes every request on the one connection. */
static int connection_for(struct http_exchange *x, const struct http_url *u,
                          struct http_cconn **c, struct h2_cconn **h2)
{
	struct http_origin *o;
	int rc;

	runtime__http_pool_sweep(x->core); /* before o is held: it may free it */
	if (!(o = runtime__http_origin(x->core, u, true)))
		return -ENOMEM;
	*c = NULL;
	for (;;) {
		if ((*h2 = runtime__h2_client_find(x->core, o)))
			return 0;
		if (o->proto != 20 && (*c = runtime__http_pool_take(x->core, o))) {
			http_count(&x->core->reused);
			return 0;
		}
		if (!o->dialing || o->proto == 11)
			return dial(x, u, o, c, h2);
		if ((rc = runtime__http_origin_wait(o, x->deadline)) < 0) {
			if (rc == -ETIMEDOUT)
				x->timed_out = http_timeout_kind(x->deadline, 0, 0);
			return rc;
		}
	}
}

/* The request to x->url: 0 and *res, or -errno. Over HTTP/2, a request
 * the server never processed (refused, past its GOAWAY) goes again on
 * another connection, twice at most, unless its streamed body began. */
static int attempt(struct http_exchange *x, struct runtime_http_result **res)
{
	struct http_url u;
	struct http_cconn *c;
	struct h2_cconn *h2;
	int rc = runtime__http_url_parse(x->url, &u);

	for (int tries = 0; rc == 0; tries++) {
		if ((rc = connection_for(x, &u, &c, &h2)) < 0)
			return rc;
		if (c)
			return attempt_h1(x, &u, c, res);
		if (x->upgrade)
			return -EPROTONOSUPPORT; /* HTTP/2 has no Upgrade */
		rc = runtime__h2_exchange(x, &u, h2, res);
		if (rc != -EAGAIN)
			return rc;
		if (tries == 2 || x->body_started)
			return -ECONNRESET;
		http_count(&x->core->retried);
		rc = 0;
	}
	return rc;
}

/* ------------------------------------------------------------- redirects */

static bool same_origin(const struct http_url *a, const struct http_url *b)
{
	if (a->https != b->https || a->port != b->port || a->host.len != b->host.len)
		return false;
	for (size_t i = 0; i < a->host.len; i++)
		if ((a->host.p[i] | 0x20) != (b->host.p[i] | 0x20))
			return false;
	return true;
}

/* Where a 3xx sends the request: the resolved Location in *next (or
 * NULL: the 3xx is the answer). */
static int redirect_target(struct http_exchange *x, struct runtime_http_result *r, char **next)
{
	const struct http_slice *loc = runtime__http_response_header(&r->head, "location");
	struct http_url from, to;
	int s = r->head.status, rc;

	*next = NULL;
	if (!x->req->max_redirects || !loc ||
	    !(s == 301 || s == 302 || s == 303 || s == 307 || s == 308))
		return 0;
	bool to_get = s == 303 ? !x->head : s <= 302 && is_method(x->method, "POST");
	if (!to_get && x->streamed)
		return 0; /* its body cannot be sent again */
	if (x->redirects == x->req->max_redirects)
		return -ELOOP;
	if ((rc = runtime__http_url_resolve(x->url, *loc, next)) < 0)
		return rc;
	if ((rc = runtime__http_url_parse(*next, &to)) < 0) {
		free(*next);
		*next = NULL;
		return rc == -EINVAL ? -EBADMSG : rc; /* the server's Location is bad */
	}
	runtime__http_url_parse(x->url, &from);
	x->strip_credentials |= !same_origin(&from, &to);
	if (to_get) {
		x->method = "GET";
		x->body = NULL;
		x->body_len = 0;
		x->streamed = x->head = false;
	}
	return 0;
}

/* Follow r if it redirects and that was asked: *again, r closed. */
static int follow(struct http_exchange *x, struct runtime_http_result *r, bool *again)
{
	char *next;
	int rc = redirect_target(x, r, &next);

	*again = rc == 0 && next;
	if (rc < 0 || *again)
		runtime__http_result_release(r);
	if (*again) {
		x->redirects++;
		free(x->url_owned);
		x->url = x->url_owned = next;
	}
	return rc;
}

/* ------------------------------------------------------------------ calls */

int runtime_http_request(struct runtime_http_client *cl,
                         const struct runtime_http_client_request *req,
                         struct runtime_http_result **res)
{
	struct runtime_http_result *r = NULL;
	struct http_exchange x;
	bool again = true;
	int rc;

	if (!res)
		return -EINVAL;
	*res = NULL;
	if (!cl || !req || !req->url)
		return -EINVAL;
	if (!runtime_fiber_self())
		return -EPERM;
	if ((rc = exchange_init(&x, cl, req)) < 0)
		return rc;
	/* Counted before the check, with no wait between: a destroy's closer
	 * on this core runs either before (closing seen) or after (counted). */
	x.core->live++;
	if (atomic_load_explicit(&cl->closing, memory_order_acquire))
		rc = -ESHUTDOWN;
	while (rc == 0 && again && (rc = attempt(&x, &r)) == 0 && (rc = follow(&x, r, &again)) == 0)
		;
	free(x.url_owned);
	if (req->timed_out)
		*req->timed_out = rc == -ETIMEDOUT ? x.timed_out : RUNTIME_HTTP_TIMEOUT_NONE;
	if (rc == 0) {
		r->core = x.core; /* the result holds the count until closed */
		*res = r;
	} else {
		x.core->live--;
	}
	return rc;
}

int runtime_http_get(struct runtime_http_client *cl, const char *url,
                     struct runtime_http_result **res)
{
	struct runtime_http_client_request req = { .url = url };

	return runtime_http_request(cl, &req, res);
}

/* ----------------------------------------------------------------- client */

void runtime_http_client_config_init(struct runtime_http_client_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->max_per_origin = 8;
	cfg->idle_timeout_ns = 30 * SEC;
	cfg->connect_timeout_ns = 10 * SEC;
	cfg->user_agent = "runtime";
}

/* The limits, defaults filled in; -EINVAL for what the parser cannot
 * hold (as the server's). */
static int client_limits(const struct runtime_http_limits *in, struct http_limits *out)
{
	*out = (struct http_limits){
		.line_max = in->line_max ? in->line_max : 8192,
		.head_max = in->head_max ? in->head_max : 12288,
		.headers_max = in->headers_max ? in->headers_max : RUNTIME_HTTP_HEADERS_MAX,
		.body_max = in->body_max ? in->body_max : 64ull << 20,
	};
	if (out->headers_max > RUNTIME_HTTP_HEADERS_MAX || out->head_max < out->line_max ||
	    out->head_max > (1u << 20))
		return -EINVAL;
	return 0;
}

static int user_agent(struct runtime_http_client *cl, const char *name)
{
	size_t n = name ? strlen(name) : 0;

	for (size_t i = 0; i < n; i++)
		if (!is_field_byte((unsigned char)name[i]))
			return -EINVAL;
	if (n > 100) /* fits ua_field with its name and CRLF */
		return -EINVAL;
	if (n)
		cl->ua_len = (size_t)snprintf(cl->ua_field, sizeof(cl->ua_field),
		                              "User-Agent: %s\r\n", name);
	return 0;
}

/* Our own TLS context, made on the first https request (not at create:
 * loading the system's CAs takes a core tens of milliseconds, so it is
 * done on the offload pool). Any core may race to make it: the first to
 * store it wins, the others drop theirs. */
struct tls_job {
	struct runtime_tls *tls;
	bool h2;                     /* offer h2 first */
	int rc;
};

static void *make_tls(void *arg)
{
	struct tls_job *job = arg;
	struct runtime_tls_config tc;

	runtime_tls_config_init(&tc);
	tc.side = RUNTIME_TLS_CLIENT;
	tc.alpn = job->h2 ? "h2,http/1.1" : "http/1.1";
	job->rc = runtime_tls_create(&job->tls, &tc);
	return NULL;
}

/* The caller gave up waiting (runtime_offload's cleanup): nothing keeps
 * what was made. */
static void drop_tls_job(void *arg, void *result, int ran)
{
	struct tls_job *job = arg;

	(void)result;
	if (ran)
		runtime_tls_destroy(job->tls);
	free(job);
}

int runtime__http_client_tls(struct runtime_http_client *cl, struct runtime_tls **tls)
{
	struct runtime_tls *none = NULL;
	struct tls_job *job;
	int rc;

	if ((*tls = atomic_load_explicit(&cl->tls, memory_order_acquire)))
		return 0;
	if (!(job = calloc(1, sizeof(*job))))
		return -ENOMEM;
	job->h2 = !cl->cfg.no_h2;
	if ((rc = runtime_offload(make_tls, job, NULL, drop_tls_job)) < 0) {
		if (rc != -ECANCELED && rc != -ETIMEDOUT)
			free(job); /* else the cleanup has it */
		return rc;
	}
	if ((rc = job->rc) == 0 &&
	    !atomic_compare_exchange_strong_explicit(&cl->tls, &none, job->tls, memory_order_acq_rel,
	                                             memory_order_acquire))
		runtime_tls_destroy(job->tls); /* another core's came first */
	free(job);
	*tls = atomic_load_explicit(&cl->tls, memory_order_acquire);
	return rc;
}

int runtime_http_client_create(struct runtime_http_client **out,
                               const struct runtime_http_client_config *cfg)
{
	struct runtime_http_client_config defaults;
	struct runtime_http_client *cl;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!cfg) {
		runtime_http_client_config_init(&defaults);
		cfg = &defaults;
	}
	if (!(cl = calloc(1, sizeof(*cl))))
		return -ENOMEM;
	cl->cfg = *cfg;
	if ((rc = client_limits(&cfg->limits, &cl->limits)) < 0 ||
	    (rc = user_agent(cl, cfg->user_agent)) < 0) {
		free(cl);
		return rc;
	}
	cl->cfg.user_agent = NULL; /* copied: the caller's may go */
	if (!cl->cfg.idle_timeout_ns)
		cl->cfg.idle_timeout_ns = UINT64_MAX;
	atomic_init(&cl->tls, cfg->tls);
	cl->own_tls = !cfg->tls;
	*out = cl;
	return 0;
}

void runtime_http_client_destroy(struct runtime_http_client *cl)
{
	if (!cl || runtime__http_pools_close(cl) < 0)
		return; /* a core did not answer: its fiber may still use cl */
	runtime__http_pools_free(cl);
	if (cl->own_tls)
		runtime_tls_destroy(atomic_load_explicit(&cl->tls, memory_order_acquire));
	free(cl);
}

static uint64_t load(const _Atomic uint64_t *n)
{
	return atomic_load_explicit(n, memory_order_relaxed);
}

void runtime_http_client_stats(const struct runtime_http_client *cl,
                               struct runtime_http_client_stats *st)
{
	if (!st)
		return;
	memset(st, 0, sizeof(*st));
	for (unsigned i = 0; cl && i < RUNTIME_MAX_CORES; i++) {
		const struct http_client_core *c =
			atomic_load_explicit(&cl->cores[i], memory_order_acquire);
		if (!c)
			continue;
		st->connects += load(&c->connects);
		st->reused += load(&c->reused);
		st->retried += load(&c->retried);
		st->h2_requests += load(&c->h2_requests);
		st->requests += load(&c->requests);
		st->dropped += load(&c->dropped);
	}
}
