/* SPDX-License-Identifier: MIT */
/*
 * h2_recv.c - what the session reads, in its callbacks (run inside the
 * reader's nghttp2_session_mem_recv): a stream begun, its head's fields
 * held where nghttp2 decoded them (its reference-counted buffers: no
 * copy), the request made ready and its handler started; body bytes kept
 * for the handler, its window credited only as it reads them (h2_stream.c)
 * so a stream that is not read holds one window at most; the stream's
 * close, which cancels a handler whose response cannot be whole any more.
 *
 * nghttp2 checks what RFC 9113 asks of a request's head (pseudo-fields,
 * field names and values, connection-specific fields, Content-Length
 * against the DATA); what is left here is our rules: the limits, the
 * target's syntax (one rule with HTTP/1.1's), Host against :authority.
 */
#include "h2.h"

#include <stdlib.h>
#include <strings.h>

/* ---------------------------------------------------------------- streams */

static struct h2_stream *stream_new(struct h2_conn *h, int32_t id)
{
	struct h2_stream *s = runtime__h2_alloc(sizeof(*s));

	if (!s)
		return NULL;
	memset(s, 0, offsetof(struct h2_stream, req)); /* not the request's room */
	s->conn = h;
	s->id = id;
	s->in_session = true;
	s->req.conn = NULL;
	s->req.h2 = s;
	s->req.body_error = 0;
	s->req.answered = false;
	s->req.body_since = s->req.body_got = 0;
	s->res.spill = NULL; /* freed with the stream (never inited or not) */
	struct http_request *head = &s->req.head; /* all but the fields' room */
	head->method = head->target = head->host = (struct http_slice){ "", 0 };
	head->query = head->nheaders = 0;
	head->minor = 1;
	head->body = HTTP_BODY_NONE;
	head->content_length = head->head_len = 0;
	head->keep_alive = true;
	head->expect_continue = false;
	s->next = h->streams;
	if (h->streams)
		h->streams->prev = s;
	h->streams = s;
	return s;
}

void runtime__h2_stream_unref(struct h2_stream *s, bool session)
{
	if (session)
		s->in_session = false;
	else
		s->running = false;
	if (s->in_session || s->running)
		return;
	struct h2_conn *h = s->conn;
	if (s->prev)
		s->prev->next = s->next;
	else
		h->streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	runtime__h2_held_free(&s->head_bufs);
	free(s->in);
	http_response_release(&s->res); /* nghttp2 is done with its fields */
	runtime__h2_free(s);
}

static struct h2_stream *stream_of(nghttp2_session *session, int32_t id)
{
	return nghttp2_session_get_stream_user_data(session, id);
}

/* Let a handler parked on its stream look again. */
static void wake(struct h2_stream *s)
{
	if (s->out.waiter)
		runtime_fiber_unpark(s->out.waiter);
}

/* ------------------------------------------------------------------ heads */

static struct http_slice slice_of(nghttp2_rcbuf *buf)
{
	nghttp2_vec v = nghttp2_rcbuf_get_buf(buf);
	return (struct http_slice){ (const char *)v.base, v.len };
}

/* A pseudo-field: nghttp2 let through only the four a request has, once
 * each, before the others. */
static void pseudo(struct h2_stream *s, struct http_slice name, struct http_slice value)
{
	if (name.len == 7 && !memcmp(name.p, ":method", 7))
		s->method = value;
	else if (name.len == 5 && !memcmp(name.p, ":path", 5))
		s->path = value;
	else if (name.len == 10 && !memcmp(name.p, ":authority", 10))
		s->authority = value;
	else
		s->scheme = value;
}

/* A field of a request's head; trailers are read and dropped, as the
 * HTTP/1.1 server does. Over a limit the stream is answered 431 (414 for
 * a long path) without its handler, the rest of the head dropped; a head
 * that decodes to H2_BOMB times head_max (HPACK's references to one large
 * field, each a byte on the wire) ends the connection at once. */
static int on_header(nghttp2_session *session, const nghttp2_frame *frame, nghttp2_rcbuf *name,
                     nghttp2_rcbuf *value, uint8_t flags, void *user)
{
	struct h2_stream *s = stream_of(session, frame->hd.stream_id);
	const struct http_limits *lim = &h2_conn_of(user)->srv->limits;
	struct http_slice n = slice_of(name), v = slice_of(value);

	(void)flags;
	if (!s)
		return 0;
	s->head_size += n.len + v.len + 4; /* "name: value\r\n", as HTTP/1.1 counts */
	if (s->head_size > H2_BOMB * lim->head_max) {
		runtime__h2_goaway(h2_conn_of(user), NGHTTP2_ENHANCE_YOUR_CALM);
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	if (frame->headers.cat != NGHTTP2_HCAT_REQUEST || s->refuse)
		return 0;
	struct http_request *head = &s->req.head;
	if (s->head_size > lim->head_max || (n.p[0] != ':' && head->nheaders >= lim->headers_max))
		s->refuse = 431;
	else if (!runtime__h2_hold(&s->head_bufs, value) || !runtime__h2_hold(&s->head_bufs, name))
		s->refuse = 503;
	else if (n.p[0] == ':')
		pseudo(s, n, v);
	else
		head->headers[head->nheaders++] = (struct http_header){ n, v };
	if (n.p[0] == ':' && n.len == 5 && v.len > lim->line_max)
		s->refuse = 414;
	return 0;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
	struct h2_conn *h = h2_conn_of(user);

	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct h2_stream *s = stream_new(h, frame->hd.stream_id);
	if (!s)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
	nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, s);
	if (!h->head_start)
		h->head_start = runtime_now();
	return 0;
}

static bool slice_is(struct http_slice s, const char *lit)
{
	size_t n = strlen(lit);
	return s.len == n && !strncasecmp(s.p, lit, n);
}

/* Host from :authority (RFC 9113 8.3.1: a handler written for HTTP/1.1
 * reads Host); both, and different: 400. */
static int host(struct h2_stream *s)
{
	struct http_request *head = &s->req.head;
	const struct http_slice *field = runtime__http_header_get(head, "host");

	if (field && s->authority.p && (field->len != s->authority.len ||
	                                strncasecmp(field->p, s->authority.p, field->len)))
		return 400;
	if (field || !s->authority.p) {
		head->host = field ? *field : (struct http_slice){ "", 0 };
		return 0;
	}
	if (head->nheaders >= HTTP_HEADERS_MAX)
		return 431;
	head->headers[head->nheaders++] = (struct http_header){ { "host", 4 }, s->authority };
	head->host = s->authority;
	return 0;
}

/* The body's framing: Content-Length (nghttp2 checked its digits and
 * will check the DATA against it), none (END_STREAM with the head), or
 * not known: as chunked to the handler (runtime_http_body_length -1). */
static int framing(struct h2_stream *s, uint64_t body_max)
{
	struct http_request *head = &s->req.head;
	const struct http_slice *cl = runtime__http_header_get(head, "content-length");
	const struct http_slice *expect = runtime__http_header_get(head, "expect");

	head->content_length = 0;
	head->body = s->in_end ? HTTP_BODY_NONE : HTTP_BODY_CHUNKED;
	if (cl) {
		for (size_t i = 0; i < cl->len; i++)
			if (head->content_length > (UINT64_MAX - 9) / 10)
				return 413;
			else
				head->content_length = head->content_length * 10 + (uint64_t)(cl->p[i] - '0');
		if (head->content_length > body_max)
			return 413;
		head->body = HTTP_BODY_LENGTH;
	}
	head->expect_continue = expect && !s->in_end;
	if (expect && !slice_is(*expect, "100-continue"))
		return 417;
	return 0;
}

/* The request's head for its handler, as the HTTP/1.1 parser makes it:
 * 0, or the status to answer instead. */
static int request_head(struct h2_stream *s)
{
	struct http_request *head = &s->req.head;
	const struct runtime_http_server *srv = s->conn->srv;
	bool connect = slice_is(s->method, "CONNECT");

	head->method = s->method;
	head->target = connect ? s->authority : s->path;
	if (runtime__http_target_check(head->method, head->target.p, head->target.len,
	                               &head->query) < 0)
		return 400;
	head->head_len = s->head_size;
	int rc = host(s);
	return rc ? rc : framing(s, srv->limits.body_max);
}

/* A request's head is whole: its handler starts, or the library answers. */
static void request_ready(struct h2_conn *h, struct h2_stream *s, bool end)
{
	h->head_start = 0;
	s->in_end = end;
	if (!s->refuse)
		s->refuse = request_head(s);
	s->req.continued = !s->req.head.expect_continue;
	s->req.start = runtime_now_coarse();
	s->req.bytes_in = s->head_size;
	s->req.data = NULL;
	http_response_init(&s->res, NULL, &s->req, h->core, h->srv);
	s->res.h2 = s;
	http_response_ready(&s->res, &s->req);
	if (s->refuse) {
		runtime__h2_refuse(s, s->refuse);
		if (h->srv->cfg.on_response || h->srv->cfg.access_log_format)
			runtime__http_responded(h->srv, &s->req, &s->res);
	} else if (h->live >= h->max_streams) { /* handlers of reset streams count */
		if (runtime__h2_calm(h, 10))
			nghttp2_submit_rst_stream(h->link.session, NGHTTP2_FLAG_NONE, s->id,
			                          NGHTTP2_REFUSED_STREAM);
	} else {
		runtime__h2_stream_start(s);
	}
}

/* ------------------------------------------------------------------ frames */

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
	struct h2_conn *h = h2_conn_of(user);
	struct h2_stream *s = stream_of(session, frame->hd.stream_id);
	bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;

	switch (frame->hd.type) {
	case NGHTTP2_HEADERS:
		if (s && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
			request_ready(h, s, end);
		else if (s && end) { /* trailers end the body */
			s->in_end = true;
			wake(s);
		}
		break;
	case NGHTTP2_DATA:
		if (s && end) {
			s->in_end = true;
			wake(s);
		} else if (!frame->hd.length) {
			runtime__h2_calm(h, 1); /* an empty DATA frame: no progress */
		}
		break;
	case NGHTTP2_PING:
	case NGHTTP2_SETTINGS:
		if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
			runtime__h2_calm(h, 1);
		break;
	case NGHTTP2_PRIORITY:
		runtime__h2_calm(h, 1);
		break;
	}
	return 0;
}

/* Body bytes: kept for the handler, or dropped - the window credited at
 * once - when it has ended, or they break body_max. */
static int on_data(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *user)
{
	struct h2_stream *s = stream_of(session, id);
	struct h2_conn *h = h2_conn_of(user);

	(void)flags;
	if (s && !s->drop_rest && !s->req.body_error &&
	    (s->in_total += len) > h->srv->limits.body_max)
		s->req.body_error = -EMSGSIZE;
	if (!s) {
		nghttp2_session_consume_connection(session, len);
		return 0;
	}
	if (s->drop_rest || s->req.body_error) {
		nghttp2_session_consume(session, id, len);
		wake(s);
		return 0;
	}
	if (s->in_len + len > s->in_cap) {
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
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		s->in = in;
		s->in_cap = cap;
	}
	memcpy(s->in + s->in_len, data, len);
	s->in_len += len;
	wake(s);
	return 0;
}

/* The stream's end. Closed with an error (a reset either way, the
 * session's end), its handler - if it runs - is cancelled: its client
 * is gone, and its blocking calls say so (-ECANCELED). */
static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t code, void *user)
{
	struct h2_stream *s = stream_of(session, id);

	(void)user;
	if (!s)
		return 0;
	if (code != NGHTTP2_NO_ERROR || !s->in_end) {
		s->reset = true;
		if (s->fiber)
			runtime_fiber_cancel(s->fiber);
	}
	wake(s);
	runtime__h2_stream_unref(s, true);
	return 0;
}

static int on_invalid_frame(nghttp2_session *session, const nghttp2_frame *frame, int error,
                            void *user)
{
	(void)session;
	(void)frame;
	(void)error;
	runtime__h2_calm(h2_conn_of(user), 10);
	return 0;
}

/* A response sent whole while its request's body still comes: then the
 * client is told to stop sending it (RFC 9113 8.1). */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user)
{
	struct h2_stream *s;

	(void)user;
	if ((frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS) ||
	    !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
	    !(s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id)))
		return 0;
	s->end_sent = true;
	if (s->rst_after)
		nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
	return 0;
}

void runtime__h2_recv_callbacks(nghttp2_session_callbacks *cb)
{
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback2(cb, on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
	nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, on_invalid_frame);
}
