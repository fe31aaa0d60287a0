/* SPDX-License-Identifier: MIT */
/*
 * h2_stream.c - a stream's handler, in a fiber of its own: the request's
 * body as the handler reads it (each byte read credits the stream's
 * window: a handler that does not read stops its client), its response
 * submitted to the session, and what the library does after the handler
 * - as runtime_http_handler(3) says for HTTP/1.1: an answer if it gave
 * none, the end of a body it left open (a reset here: HTTP/2 can end one
 * stream alone), the rest of the request body dropped.
 *
 * A handler's bytes are never copied into a queue of ours: a fixed body
 * up to H2_SMALL_BODY is copied into the stream (so the handler may end
 * at once), larger ones and streamed writes stay the handler's until
 * they are framed, the handler parked meanwhile (flow control holds it
 * there, up to idle_timeout). When its client resets the stream, a
 * running handler is cancelled: its waits end -ECANCELED.
 */
#include "h2.h"
#include "decimal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* ----------------------------------------------------------------- waits */

static int64_t park_timeout(const struct h2_stream *s)
{
	uint64_t ns = s->conn->srv->cfg.idle_timeout_ns;
	return ns > INT64_MAX ? -1 : (int64_t)ns;
}

/* Park until the stream changes (bytes, its end, its bytes framed), at
 * most timeout_ns (negative: none). 0, -ETIMEDOUT or -ECANCELED. */
static int wait_for(struct h2_stream *s, int64_t timeout_ns)
{
	s->out.waiter = runtime_fiber_self();
	int rc = runtime_park(timeout_ns);
	s->out.waiter = NULL;
	return rc;
}

/* A body read's wait: until the minimum rate's due time or idle_timeout. */
static int64_t body_timeout(struct h2_stream *s)
{
	uint64_t by = runtime__http_body_deadline(s->conn->srv, &s->req), now = runtime_now();

	return by == UINT64_MAX ? -1 : by <= now ? 0 : (int64_t)(by - now > INT64_MAX ? INT64_MAX
	                                                                             : by - now);
}

/* The response cannot be whole: the stream is reset (its client sees the
 * cut, as an HTTP/1.1 client sees a close). */
static void cut(struct h2_stream *s)
{
	s->out.p = NULL;
	s->out.len = 0;
	if (s->in_session && !s->end_sent)
		nghttp2_submit_rst_stream(s->conn->link.session, NGHTTP2_FLAG_NONE, s->id,
		                          NGHTTP2_INTERNAL_ERROR);
	runtime__h2_kick(&s->conn->link);
}

static void resume(struct h2_stream *s)
{
	if (s->in_session)
		runtime__h2_resume(&s->conn->link, s->id, &s->out);
}

/* The handler's bytes at s->out framed, or the stream cut. */
static int wait_out(struct h2_stream *s)
{
	int rc = 0;

	resume(s);
	while (s->out.len && rc == 0)
		rc = s->reset || !s->in_session || s->conn->link.broken ? -EPIPE
		                                                         : wait_for(s, park_timeout(s));
	if (!s->out.len)
		return 0;
	cut(s);
	return rc;
}

/* ---------------------------------------------------------- request body */

static ssize_t body_fail(struct h2_stream *s, int err)
{
	s->req.body_error = err;
	return err;
}

/* "Expect: 100-continue": a 100 before the first read, unless bytes of
 * the body or an answer went first. */
static void send_continue(struct h2_stream *s)
{
	static const nghttp2_nv cont = { (uint8_t *)":status", (uint8_t *)"100", 7, 3,
	                                 NGHTTP2_NV_FLAG_NONE };

	s->req.continued = true;
	if (s->in_len > s->in_off || s->req.answered || !s->in_session)
		return;
	nghttp2_submit_headers(s->conn->link.session, NGHTTP2_FLAG_NONE, s->id, NULL, &cont, 1, NULL);
	runtime__h2_kick(&s->conn->link);
}

/* n bytes read: the windows credited (the session sends WINDOW_UPDATE
 * once enough is). */
static void credit(struct h2_stream *s, size_t n)
{
	if (s->in_session)
		nghttp2_session_consume(s->conn->link.session, s->id, n);
	else
		nghttp2_session_consume_connection(s->conn->link.session, n);
	runtime__h2_kick(&s->conn->link);
}

ssize_t runtime__h2_body_read(struct runtime_http_request *req, void *buf, size_t len)
{
	struct h2_stream *s = req->h2;

	if (s->req.body_error)
		return s->req.body_error;
	if (!req->continued)
		send_continue(s);
	while (s->in_off == s->in_len && len) {
		if (s->in_end)
			return 0;
		int rc = s->reset || !s->in_session ? -EPIPE : wait_for(s, body_timeout(s));
		if (rc < 0)
			return body_fail(s, rc);
		if (s->req.body_error)
			return s->req.body_error;
	}
	size_t n = s->in_len - s->in_off < len ? s->in_len - s->in_off : len;
	memcpy(buf, s->in + s->in_off, n);
	s->in_off += n;
	s->req.body_got += n;
	s->req.bytes_in += n;
	credit(s, n);
	return (ssize_t)n;
}

/* ------------------------------------------------------------- response */

#define HEAD_NV 5   /* :status, content-type, content-length, date, server */
#define STACK_NV 32

static nghttp2_nv nv_of(const char *name, size_t nlen, const char *value, size_t vlen,
                        bool copy_value)
{
	return (nghttp2_nv){ (uint8_t *)name, (uint8_t *)value, nlen, vlen,
	                     NGHTTP2_NV_FLAG_NO_COPY_NAME |
	                     (copy_value ? 0 : NGHTTP2_NV_FLAG_NO_COPY_VALUE) };
}

/* The core's Date value, made again when the second moves. */
static const char *date_now(struct http_core *core)
{
	time_t now = time(NULL);
	struct tm tm;

	if (now != core->h2_date_second) {
		gmtime_r(&now, &tm);
		strftime(core->h2_date, sizeof(core->h2_date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		core->h2_date_second = now;
	}
	return core->h2_date;
}

/* The handler's fields ("Name: value\r\n" each, checked when set), their
 * names lowered in place as HTTP/2 wants them. */
static size_t fields_nv(struct runtime_http_response *res, nghttp2_nv *nv)
{
	char *p = http_fields(res), *end = p + res->fields_len;
	size_t n = 0;

	while (p < end) {
		char *colon = memchr(p, ':', (size_t)(end - p));
		char *eol = memchr(colon, '\r', (size_t)(end - colon));
		for (char *q = p; q < colon; q++)
			*q = (char)(*q >= 'A' && *q <= 'Z' ? *q + 32 : *q);
		nv[n++] = nv_of(p, (size_t)(colon - p), colon + 2, (size_t)(eol - colon - 2), false);
		p = eol + 2;
	}
	return n;
}

static size_t fields_count(struct runtime_http_response *res)
{
	const char *f = http_fields(res);
	size_t n = 0;

	for (size_t i = 0; i < res->fields_len; i++)
		n += f[i] == '\n';
	return n;
}

/* The head's fields: the library's, then the handler's. */
static size_t head_nv(struct h2_stream *s, const char *type, nghttp2_nv *nv)
{
	struct runtime_http_response *res = &s->res;
	const struct runtime_http_server *srv = s->conn->srv;
	size_t n = 0;

	http_put_u64(s->status, (uint64_t)res->status); /* 200-599: three digits */
	nv[n++] = nv_of(":status", 7, s->status, 3, false);
	if (type)
		nv[n++] = nv_of("content-type", 12, type, strlen(type), true);
	if (res->length >= 0 && res->status >= 200 && res->status != 204 &&
	    (res->status != 304 || res->length > 0)) {
		size_t len = (size_t)(http_put_u64(s->length, (uint64_t)res->length) - s->length);
		nv[n++] = nv_of("content-length", 14, s->length, len, false);
	}
	nv[n++] = nv_of("date", 4, date_now(s->conn->core), 29, false);
	if (srv->server_len) /* "Server: NAME\r\n" */
		nv[n++] = nv_of("server", 6, srv->server_field + 8, srv->server_len - 10, false);
	return n + fields_nv(res, nv + n);
}

/* The body's bytes for the session: none, a fixed body (copied if small),
 * or what runtime_http_write gives. */
static void body_set(struct h2_stream *s, bool fixed, const void *body, int64_t length)
{
	s->out.p = NULL;
	s->out.len = 0;
	s->out.end = fixed;
	if (!fixed || s->res.no_body || !length)
		return;
	if (length <= H2_SMALL_BODY)
		body = memcpy(s->small, body, (size_t)length);
	s->out.p = body;
	s->out.len = (size_t)length;
}

static int submit_head(struct h2_stream *s, const char *type, bool fixed, const void *body,
                       int64_t length)
{
	size_t most = HEAD_NV + fields_count(&s->res);
	nghttp2_nv stack[STACK_NV], *nv = most <= STACK_NV ? stack : malloc(most * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	size_t n = head_nv(s, type, nv);
	body_set(s, fixed, body, length);
	bool has_body = !s->res.no_body && !(fixed && !length);
	nghttp2_data_provider source = runtime__h2_body_source(&s->out);
	int rc = nghttp2_submit_response(s->conn->link.session, s->id, nv, n,
	                                 has_body ? &source : NULL);
	if (nv != stack)
		free(nv);
	return rc ? -ENOMEM : 0;
}

static bool bodiless(int status)
{
	return status < 200 || status == 204 || status == 304;
}

static bool type_ok(const char *type)
{
	size_t n = type ? strlen(type) : 0;
	return !type || (n && n <= HTTP_TYPE_MAX && runtime__http_field_value_ok(type, n));
}

int runtime__h2_begin(struct runtime_http_response *res, int status, const char *type,
                      int64_t length, bool fixed, const void *body)
{
	struct h2_stream *s = res->h2;

	if (res->state != RES_NONE)
		return -EALREADY;
	if (status < 200 || status > 599 || length < RUNTIME_HTTP_CHUNKED || !type_ok(type))
		return -EINVAL;
	if (s->reset || !s->in_session)
		return -EPIPE;
	res->status = status;
	res->length = length;
	res->no_body = res->head_only || bodiless(status);
	int rc = submit_head(s, type, fixed, body, length);
	if (rc < 0) {
		res->status = 0;
		return rc;
	}
	s->req.answered = true;
	res->state = fixed ? RES_DONE : RES_STREAM;
	res->sent = fixed && !res->no_body ? (uint64_t)length : 0;
	http_count(&res->core->responses[status / 100]);
	if (fixed && s->out.len > H2_SMALL_BODY)
		return wait_out(s); /* the handler's own bytes */
	resume(s);
	return 0;
}

int runtime__h2_write(struct runtime_http_response *res, const void *buf, size_t len)
{
	struct h2_stream *s = res->h2;

	s->out.p = buf;
	s->out.len = len;
	return wait_out(s);
}

int runtime__h2_end(struct runtime_http_response *res)
{
	struct h2_stream *s = res->h2;

	if (res->length >= 0 && res->sent < (uint64_t)res->length) {
		cut(s); /* less than promised */
		return 0;
	}
	s->out.end = true;
	resume(s);
	return 0;
}

struct runtime_conn *runtime__h2_conn(const struct runtime_http_request *req)
{
	return req->h2->conn->link.rc;
}

/* ------------------------------------------------------------ the handler */

/* A request the library answers itself (a limit, a bad head). */
int runtime__h2_refuse(struct h2_stream *s, int status)
{
	char body[64];
	int n = runtime__http_status_text(status, body, sizeof(body));

	http_count(&s->conn->core->rejected);
	s->drop_rest = true;
	s->rst_after = !s->in_end;
	return runtime__h2_begin(&s->res, status, "text/plain", n, true, body);
}

/* What the handler left: no answer (the HTTP/1.1 server's: 408, 413,
 * 400 for a failed body read, else 500), a body not ended (cut). */
static void answer_rest(struct h2_stream *s)
{
	struct runtime_http_response *res = &s->res;
	int err = s->req.body_error, status = 500;
	char body[64];

	if (res->state == RES_STREAM) {
		res->state = RES_DONE;
		cut(s);
		return;
	}
	if (res->state != RES_NONE || s->reset)
		return;
	if (err == -ETIMEDOUT)
		status = 408;
	else if (err == -EMSGSIZE)
		status = 413;
	else if (err == -EBADMSG)
		status = 400;
	int n = runtime__http_status_text(status, body, sizeof(body));
	runtime__h2_begin(res, status, "text/plain", n, true, body);
}

/* The request body not read: dropped, its window given back, and the
 * client told to stop sending it once the response has left. */
static void drop_body(struct h2_stream *s)
{
	s->drop_rest = true;
	if (s->in_len > s->in_off)
		credit(s, s->in_len - s->in_off);
	free(s->in);
	s->in = NULL;
	s->in_off = s->in_len = s->in_cap = 0;
	if (s->in_end || !s->in_session || s->reset)
		return;
	if (s->end_sent)
		nghttp2_submit_rst_stream(s->conn->link.session, NGHTTP2_FLAG_NONE, s->id,
		                          NGHTTP2_NO_ERROR);
	else
		s->rst_after = true;
}

static void finish(struct h2_stream *s)
{
	struct h2_conn *h = s->conn;
	const struct runtime_http_server_config *cfg = &h->srv->cfg;

	answer_rest(s);
	drop_body(s);
	if (s->reset) /* the client reset the stream before the answer's end */
		s->res.status = HTTP_CLIENT_CLOSED;
	if (s->started)
		http_duration(h->core, runtime_now() - s->started);
	if (cfg->on_response || cfg->access_log_format)
		runtime__http_responded(h->srv, &s->req, &s->res);
	h->live--;
	runtime__h2_set_idle(h);
	runtime__h2_kick(&h->link);
	if (h->ender)
		runtime_fiber_unpark(h->ender);
	else if (!h->live && (h->goaway || http_stopping(h->srv)) && h->link.reading)
		runtime__h2_wake_reader(h); /* a drain waits for this one */
	runtime__h2_stream_unref(s, false);
}

static void run(void *arg)
{
	struct h2_stream *s = arg;
	const struct runtime_http_server_config *cfg = &s->conn->srv->cfg;

	if (!s->reset) { /* else its client is gone before it began */
		s->fiber = runtime_fiber_self();
		cfg->handler(&s->req, &s->res, cfg->arg);
		s->fiber = NULL;
	}
	finish(s);
}

void runtime__h2_stream_start(struct h2_stream *s)
{
	struct h2_conn *h = s->conn;

	if (runtime_spawn(h->srv->rt, run, s) < 0) {
		nghttp2_submit_rst_stream(h->link.session, NGHTTP2_FLAG_NONE, s->id,
		                          NGHTTP2_REFUSED_STREAM);
		return;
	}
	s->running = true;
	h->live++;
	h->spawned = true;
	http_count(&h->core->requests);
	if (!h->srv->cfg.no_metrics) {
		http_count(&h->core->methods[http_method_class(s->method.p, s->method.len)]);
		s->started = runtime_now_coarse();
	}
}
