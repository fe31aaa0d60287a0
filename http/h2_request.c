/* SPDX-License-Identifier: MIT */
/*
 * h2_request.c - a request on a stream of an HTTP/2 connection of the
 * client's: its head (the HTTP/1.1 request's fields as HTTP/2 wants them:
 * names in lower case, Host as :authority), its body framed from the
 * caller's buffer or body_read's chunks, the response's head read into
 * the same result a caller reads of HTTP/1.1 (runtime_http_result_*), and
 * its body as the caller reads it - the stream's window credited as it
 * goes, so a response nobody reads holds one window at most.
 *
 * The session's callbacks for the response (the reader runs them): the
 * head's fields held where nghttp2 decoded them, 1xx heads dropped, the
 * body kept for the caller, the stream's end. A stream the server
 * refused, or closed by its GOAWAY before it processed it, is -EAGAIN to
 * the caller: the request goes again on another connection.
 */
#include "h2_client.h"
#include "chars.h"
#include "decimal.h"

#include <stdlib.h>
#include <string.h>

#define STREAM_CHUNK (16 * 1024) /* a streamed body's chunk, at most */
#define NV_STACK 32

/* ---------------------------------------------------------- the response */

static struct h2_cstream *stream_of(nghttp2_session *session, int32_t id)
{
	return nghttp2_session_get_stream_user_data(session, id);
}

static void wake(struct h2_cstream *s)
{
	if (s->out.waiter)
		runtime_fiber_unpark(s->out.waiter);
}

/* A field of the response's head (trailers are dropped, as HTTP/1.1's
 * chunked decoder drops them); past the client's limits, -EMSGSIZE. */
static int on_header(nghttp2_session *session, const nghttp2_frame *frame, nghttp2_rcbuf *name,
                     nghttp2_rcbuf *value, uint8_t flags, void *user)
{
	struct h2_cstream *s = stream_of(session, frame->hd.stream_id);
	nghttp2_vec n = nghttp2_rcbuf_get_buf(name), v = nghttp2_rcbuf_get_buf(value);

	(void)flags;
	if (!s || s->head_done || s->head_bad)
		return 0;
	struct http_response *head = &s->res.head;
	const struct http_limits *lim = &h2_cconn_of(user)->core->cl->limits;
	if (n.len == 7 && !memcmp(n.base, ":status", 7)) {
		head->status = (v.base[0] - '0') * 100 + (v.base[1] - '0') * 10 + (v.base[2] - '0');
		return 0; /* nghttp2 checked its three digits */
	}
	s->head_size += n.len + v.len + 4;
	if (s->head_size > lim->head_max || head->nheaders >= lim->headers_max ||
	    !runtime__h2_hold(&s->head_bufs, name) || !runtime__h2_hold(&s->head_bufs, value)) {
		s->head_bad = true;
		return 0;
	}
	head->headers[head->nheaders++] = (struct http_header){
		{ (const char *)n.base, n.len }, { (const char *)v.base, v.len } };
	return 0;
}

/* The body's framing, as result.c reads it: none (HEAD, 204, 304, or the
 * head ended the stream), Content-Length (nghttp2 holds the DATA to it),
 * or not known: as chunked, -1 to runtime_http_result_length. */
static void framing(struct h2_cstream *s)
{
	struct http_response *head = &s->res.head;
	const struct http_slice *cl = runtime__http_response_header(head, "content-length");

	head->minor = 1;
	head->keep_alive = true;
	head->has_length = cl != NULL;
	head->content_length = 0;
	for (size_t i = 0; cl && i < cl->len && i < 19; i++)
		head->content_length = head->content_length * 10 + (uint64_t)(cl->p[i] - '0');
	if (s->ended || head->status == 204 || head->status == 304)
		head->body = HTTP_FRAME_NONE;
	else
		head->body = cl ? HTTP_FRAME_LENGTH : HTTP_FRAME_CHUNKED;
}

/* A HEADERS frame whole: a 1xx head is dropped (its fields let go), the
 * final one made ready. */
static void head_ready(struct h2_cstream *s, bool end)
{
	struct http_response *head = &s->res.head;

	if (head->status < 200) {
		runtime__h2_held_drop(&s->head_bufs);
		head->nheaders = 0;
		s->head_size = 0;
		return;
	}
	s->ended = end;
	s->head_done = true;
	framing(s);
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
	struct h2_cstream *s = stream_of(session, frame->hd.stream_id);
	bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;

	if (frame->hd.type == NGHTTP2_GOAWAY)
		h2_cconn_of(user)->closing = true; /* nghttp2 closes the streams past it */
	if (!s)
		return 0;
	if (frame->hd.type == NGHTTP2_HEADERS && !s->head_done)
		head_ready(s, end);
	else if (end && (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA))
		s->ended = true;
	wake(s);
	return 0;
}

/* Room for len more body bytes in s->in (what is read moved down first). */
static bool in_room(struct h2_cstream *s, size_t len)
{
	if (s->in_len + len <= s->in_cap)
		return true;
	if (s->in_off) {
		memmove(s->in, s->in + s->in_off, s->in_len - s->in_off);
		s->in_len -= s->in_off;
		s->in_off = 0;
	}
	size_t cap = s->in_cap ? s->in_cap : 4096;
	while (cap < s->in_len + len)
		cap *= 2;
	char *in = cap > s->in_cap ? realloc(s->in, cap) : s->in;
	if (!in)
		return false;
	s->in = in;
	s->in_cap = cap;
	return true;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *user)
{
	struct h2_cstream *s = stream_of(session, id);
	uint64_t max = h2_cconn_of(user)->core->cl->limits.body_max;

	(void)flags;
	if (!s) {
		nghttp2_session_consume_connection(session, len);
		return 0;
	}
	if (!s->held || s->res.body_error || (s->got += len) > max) {
		if (s->held && !s->res.body_error)
			s->res.body_error = -EMSGSIZE;
		nghttp2_session_consume(session, id, len);
		wake(s);
		return 0;
	}
	if (!in_room(s, len))
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	memcpy(s->in + s->in_len, data, len);
	s->in_len += len;
	wake(s);
	return 0;
}

/* The stream's end; closed early, an error: REFUSED_STREAM (or a GOAWAY
 * before it) before any answer means the server never processed it. */
static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *user)
{
	struct h2_cstream *s = stream_of(session, id);
	struct h2_cconn *h = h2_cconn_of(user);

	if (!s)
		return 0;
	if (!s->ended && !s->error)
		s->error = code == NGHTTP2_REFUSED_STREAM && !s->head_done ? -EAGAIN
		         : s->head_done ? -EPIPE : -ECONNRESET;
	if (--h->active == 0)
		h->idle_since = runtime_now();
	wake(s);
	runtime__h2_cstream_unref(s, true);
	return 0;
}

void runtime__h2_response_callbacks(nghttp2_session_callbacks *cb)
{
	nghttp2_session_callbacks_set_on_header_callback2(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
}

/* ---------------------------------------------------------- the request */

/* The text of the head's fields that are not the caller's strings. */
struct head_text {
	char authority[HTTP_HOST_MAX + 10];
	char length[24];
	char *own;                   /* lower-cased names, the path: malloc'd */
};

static nghttp2_nv nv_of(const char *name, size_t nlen, const char *value, size_t vlen)
{
	return (nghttp2_nv){ (uint8_t *)name, (uint8_t *)value, nlen, vlen, NGHTTP2_NV_FLAG_NONE };
}

/* :authority, as Host would be, into out (HTTP_HOST_MAX + 10 bytes: a
 * host of at most HTTP_HOST_MAX, brackets, ":" and a port). */
static size_t authority(const struct http_url *u, char *out)
{
	char *p = out;

	if (u->ip6)
		*p++ = '[';
	p = (char *)memcpy(p, u->host.p, u->host.len) + u->host.len;
	if (u->ip6)
		*p++ = ']';
	if (!u->default_port) {
		*p++ = ':';
		p = http_put_u64(p, u->port);
	}
	return (size_t)(p - out);
}

/* The caller's fields: names lower-cased into own, values after the
 * colon and its whitespace; te is sent only as "trailers" (RFC 9113
 * 8.2.2). Returns the count. */
static size_t caller_fields(const struct http_exchange *x, nghttp2_nv *nv, char *own)
{
	size_t n = 0;

	for (const char *const *h = x->req->headers; h && *h; h++) {
		if (!runtime__http_field_sent(x, *h))
			continue;
		size_t nl = strcspn(*h, ":");
		const char *v = *h + nl + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		size_t vl = strlen(v);
		while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
			vl--;
		if (nl == 2 && slice_ieq(*h, 2, "te") && !(vl == 8 && slice_ieq(v, 8, "trailers")))
			continue;
		for (size_t i = 0; i < nl; i++)
			own[i] = (char)((*h)[i] | ((*h)[i] >= 'A' && (*h)[i] <= 'Z' ? 0x20 : 0));
		nv[n++] = nv_of(own, nl, v, vl);
		own += nl;
	}
	return n;
}

static size_t fields_len(const struct http_exchange *x, const struct http_url *u)
{
	size_t n = u->target.len + 2;

	for (const char *const *h = x->req->headers; h && *h; h++)
		n += strlen(*h);
	return n;
}

static size_t fields_count(const struct http_exchange *x)
{
	size_t k = 0;

	for (const char *const *h = x->req->headers; h && *h; h++)
		k++;
	return k;
}

/* The head's fields into nv (room for fields_count + 6). */
static size_t head_nv(const struct http_exchange *x, const struct http_url *u,
                      struct head_text *t, nghttp2_nv *nv)
{
	const struct runtime_http_client *cl = x->cl;
	char *path = t->own;
	size_t n = 0, plen = 0;

	if (u->slash)
		path[plen++] = '/';
	memcpy(path + plen, u->target.p, u->target.len);
	plen += u->target.len;
	nv[n++] = nv_of(":method", 7, x->method, strlen(x->method));
	nv[n++] = nv_of(":scheme", 7, u->https ? "https" : "http", u->https ? 5 : 4);
	nv[n++] = nv_of(":authority", 10, t->authority, authority(u, t->authority));
	nv[n++] = nv_of(":path", 5, path, plen);
	if (!x->has_ua && cl->ua_len) /* "User-Agent: NAME\r\n" */
		nv[n++] = nv_of("user-agent", 10, cl->ua_field + 12, cl->ua_len - 14);
	bool body = x->body_len || !strcmp(x->method, "POST") || !strcmp(x->method, "PUT") ||
	            !strcmp(x->method, "PATCH");
	uint64_t length = x->stream_sized ? x->req->body_read_len : x->body_len;
	if ((!x->streamed && body) || x->stream_sized)
		nv[n++] = nv_of("content-length", 14, t->length,
		                (size_t)(http_put_u64(t->length, length) - t->length));
	return n + caller_fields(x, nv + n, path + plen);
}

/* A stream, zeroed but for the response's room for fields (2 KiB that
 * only nheaders of are ever read). */
static struct h2_cstream *stream_new(struct h2_cconn *h)
{
	const size_t fields = offsetof(struct h2_cstream, res.head.headers);
	const size_t rest = offsetof(struct h2_cstream, res.head.nheaders);
	struct h2_cstream *s = runtime__h2_alloc(sizeof(*s));

	if (!s)
		return NULL;
	memset(s, 0, fields);
	memset((char *)s + rest, 0, sizeof(*s) - rest);
	s->conn = h;
	s->held = true;
	s->res.h2 = s;
	s->next = h->streams;
	if (h->streams)
		h->streams->prev = s;
	h->streams = s;
	h->refs++;
	return s;
}

/* Submit the head (and the body's source): the stream's id, or -errno. */
static int submit(struct http_exchange *x, const struct http_url *u, struct h2_cstream *s)
{
	size_t most = fields_count(x) + 6;
	nghttp2_nv stack[NV_STACK], *nv = most <= NV_STACK ? stack : malloc(most * sizeof(*nv));
	struct head_text t = { .own = malloc(fields_len(x, u)) };
	int rc = -ENOMEM;

	if (nv && t.own) {
		size_t n = head_nv(x, u, &t, nv);
		bool body = x->streamed || x->body_len;
		s->out = (struct h2_out){ .p = x->body, .len = x->body_len, .end = !x->streamed };
		nghttp2_data_provider source = runtime__h2_body_source(&s->out);
		rc = nghttp2_submit_request(s->conn->link.session, NULL, nv, n, body ? &source : NULL,
		                            s);
		rc = rc < 0 ? (rc == NGHTTP2_ERR_NOMEM ? -ENOMEM : -ECONNRESET) : rc;
	}
	if (nv != stack)
		free(nv);
	free(t.own);
	return rc;
}

/* ------------------------------------------------------------ exchanging */

/* Until the stream's body bytes at out are framed (or the stream ends). */
static int wait_out(struct http_exchange *x, struct h2_cstream *s)
{
	int rc = 0;

	runtime__h2_resume(&s->conn->link, s->id, &s->out);
	while (s->out.len && s->in_session && !s->ended && rc == 0)
		rc = runtime__h2_cstream_wait(s, x->deadline);
	s->out.p = NULL;
	s->out.len = 0;
	return rc == -ETIMEDOUT || rc == -ECANCELED ? rc : 0;
}

/* body_read's chunks, each framed before the next is asked for. */
static int send_streamed(struct http_exchange *x, struct h2_cstream *s)
{
	char *chunk = malloc(STREAM_CHUNK);
	int rc = chunk ? 0 : -ENOMEM;

	x->body_started = true;
	while (rc == 0 && s->in_session && !s->ended) {
		ssize_t got = runtime__http_body_next(x, chunk, STREAM_CHUNK);
		if (got < 0) {
			rc = (int)got;
			break;
		}
		s->out = (struct h2_out){ .p = chunk, .len = (size_t)got, .end = !got,
		                          .deferred = s->out.deferred, .waiter = s->out.waiter };
		rc = wait_out(x, s);
		if (!got)
			break;
	}
	free(chunk);
	return rc;
}

/* The response's final head, or why it never came. */
static int wait_head(struct http_exchange *x, struct h2_cstream *s)
{
	int rc = 0;

	while (!s->head_done && !s->error && rc == 0)
		rc = runtime__h2_cstream_wait(s, http_earlier(x->deadline, x->head_end));
	if (rc == 0 && s->head_bad)
		rc = -EMSGSIZE;
	return rc < 0 ? rc : s->head_done ? 0 : s->error;
}

/* n bytes read: the windows credited - the connection's alone once the
 * stream is closed (its body all came), else the next responses stall. */
static void credit(struct h2_cstream *s, size_t n)
{
	nghttp2_session *session = s->conn->link.session;

	if (!session)
		return;
	if (s->in_session)
		nghttp2_session_consume(session, s->id, n);
	else
		nghttp2_session_consume_connection(session, n);
	runtime__h2_kick(&s->conn->link);
}

/* A stream the caller lets go before its end: reset (CANCEL). */
static void let_go(struct h2_cstream *s)
{
	struct h2_cconn *h = s->conn;

	if (s->in_len > s->in_off) /* held unread: the connection's window back */
		credit(s, s->in_len - s->in_off);

	if (s->in_session && h->link.session) {
		nghttp2_submit_rst_stream(h->link.session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
		runtime__h2_kick(&h->link);
	}
	runtime__h2_cstream_unref(s, false);
}

static void result_init(struct http_exchange *x, struct h2_cstream *s)
{
	struct runtime_http_result *r = &s->res;

	r->conn = NULL;
	r->deadline = x->deadline;
	r->read_idle = x->req->read_idle_ns;
	r->timed_out = RUNTIME_HTTP_TIMEOUT_NONE;
	r->body_done = x->head || r->head.body == HTTP_FRAME_NONE;
	if (x->head)
		r->head.body = HTTP_FRAME_NONE;
	r->reusable = false;
	r->body_left = r->body_got = 0;
}

int runtime__h2_exchange(struct http_exchange *x, const struct http_url *u, struct h2_cconn *h,
                         struct runtime_http_result **res)
{
	struct h2_cstream *s = stream_new(h);
	int rc = s ? submit(x, u, s) : -ENOMEM;

	if (rc < 0) {
		if (s)
			runtime__h2_cstream_unref(s, false);
		return rc;
	}
	s->id = rc;
	s->in_session = true;
	h->active++;
	h->used++;
	http_count(&x->core->requests);
	http_count(&x->core->h2_requests);
	x->head_end = 0;
	rc = x->streamed ? send_streamed(x, s) : x->body_len ? wait_out(x, s) : 0;
	if (rc == 0) {
		runtime__h2_kick(&h->link);
		x->head_end = http_after(x->req->head_timeout_ns); /* sent: from now */
		rc = wait_head(x, s);
	}
	if (rc < 0) {
		if (rc == -ETIMEDOUT)
			x->timed_out = http_timeout_kind(x->deadline, x->head_end,
			                                 RUNTIME_HTTP_TIMEOUT_HEAD);
		let_go(s);
		return rc;
	}
	result_init(x, s);
	*res = &s->res;
	return 0;
}

/* ---------------------------------------------------------- the result */

/* A wait for body bytes, bounded by read_idle_ns from now and the
 * request's deadline; which ended it, if one did. */
static int idle_wait(struct runtime_http_result *res, struct h2_cstream *s)
{
	uint64_t end = http_after(res->read_idle);
	int rc = runtime__h2_cstream_wait(s, http_earlier(res->deadline, end));

	if (rc == -ETIMEDOUT)
		res->timed_out = http_timeout_kind(res->deadline, end, RUNTIME_HTTP_TIMEOUT_IDLE);
	return rc;
}

ssize_t runtime__h2_result_read(struct runtime_http_result *res, void *buf, size_t len)
{
	struct h2_cstream *s = res->h2;
	int rc = 0;

	while (!res->body_error && s->in_off == s->in_len && len) {
		if (res->body_done || s->ended)
			return 0;
		if (s->error || !s->in_session)
			rc = s->error ? s->error : -EPIPE;
		else
			rc = idle_wait(res, s);
		if (rc < 0)
			res->body_error = rc == -EAGAIN || rc == -ECONNRESET ? -EPIPE : rc;
	}
	if (res->body_error)
		return res->body_error;
	size_t n = s->in_len - s->in_off < len ? s->in_len - s->in_off : len;
	memcpy(buf, s->in + s->in_off, n);
	s->in_off += n;
	credit(s, n);
	return (ssize_t)n;
}

void runtime__h2_result_close(struct runtime_http_result *res)
{
	let_go(res->h2);
}
