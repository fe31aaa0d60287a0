/* SPDX-License-Identifier: MIT */
/*
 * result.c - what a caller reads of a response: its head (slices into
 * the connection's buffer, pinned at in[0..keep) until the result is
 * closed) and its body, decoded as it is asked for, by its framing:
 * Content-Length bytes, chunked (the request side's decoder), or until
 * the server closes. Closing the result gives the connection back to its
 * pool when the body was read to its end - reading the rest first if it
 * is small and comes quickly - and closes it otherwise.
 *
 * A body that ends early (the server closed, or reset, or closed a TLS
 * stream without close_notify) is -EPIPE, never a clean end, except the
 * close-delimited body of plain TCP, whose end cannot be told from a cut.
 */
#include "client.h"
#include "body.h"

#include <stdlib.h>
#include <string.h>

#define DIRECT_MIN 4096                /* a read this large skips the buffer */
#define DRAIN_MAX (64 * 1024)          /* close reads at most this much ... */
#define DRAIN_WAIT_NS (100 * 1000000ull) /* ... for at most this long */

/* ------------------------------------------------------------- the buffer */

/* Move the unread bytes down to the end of the pinned head. */
static void compact(struct http_cconn *c)
{
	if (c->in_off > c->keep) {
		memmove(c->in + c->keep, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off - c->keep;
		c->in_off = c->keep;
	}
}

ssize_t runtime__http_cconn_fill(struct http_cconn *c)
{
	compact(c);
	if (c->in_len == c->in_size)
		return -ENOBUFS;
	ssize_t n = runtime_conn_read(c->rc, c->in + c->in_len, c->in_size - c->in_len);
	if (n > 0)
		c->in_len += (size_t)n;
	return n;
}

/* The head at in[in_off..) (always in[0..head_len), see client.c) is
 * pinned; the body starts after it. */
void runtime__http_result_init(struct http_cconn *c, size_t head_len, bool reusable)
{
	struct runtime_http_result *res = &c->res;
	const struct http_response *h = &res->head;

	res->conn = c;
	res->h2 = NULL;
	c->in_off += head_len;
	c->keep = c->in_off;
	res->body_left = h->body == HTTP_FRAME_LENGTH ? h->content_length : 0;
	res->body_got = 0;
	res->body_done = h->body == HTTP_FRAME_NONE || (h->body == HTTP_FRAME_LENGTH && !res->body_left);
	res->body_error = 0;
	res->reusable = reusable;
	if (h->body == HTTP_FRAME_CHUNKED)
		runtime__http_chunked_init(&res->chunked, &c->core->cl->limits);
}

/* -------------------------------------------------------------- the body */

/* A body read's error: sticky. The decoder's statuses and a TLS stream
 * cut without close_notify become errnos. */
static ssize_t body_fail(struct runtime_http_result *res, ssize_t err)
{
	if (err == -400)
		err = -EBADMSG;
	else if (err == -413)
		err = -EMSGSIZE;
	else if (err == -ECONNABORTED || err == -ECONNRESET)
		err = -EPIPE;
	res->body_error = (int)err;
	return err;
}

/* Body bytes already buffered, up to len: > 0, 0 (chunked framing only),
 * or an error. */
static ssize_t take(struct runtime_http_result *res, char *dst, size_t len)
{
	struct http_cconn *c = res->conn;
	size_t n = c->in_len - c->in_off, used, made;

	switch (res->head.body) {
	case HTTP_FRAME_CHUNKED: {
		n = n < len ? n : len;
		int rc = runtime__http_chunked_decode(&res->chunked, c->in + c->in_off, n, dst, &used, &made);
		if (rc < 0)
			return rc;
		c->in_off += used;
		res->body_done = rc == 1;
		return (ssize_t)made;
	}
	case HTTP_FRAME_LENGTH:
		n = n < res->body_left ? n : (size_t)res->body_left;
		res->body_left -= n < len ? n : len;
		res->body_done = !res->body_left;
		break;
	default: /* CLOSE */
		break;
	}
	n = n < len ? n : len;
	memcpy(dst, c->in + c->in_off, n);
	c->in_off += n;
	return (ssize_t)n;
}

/* Nothing buffered and a large read of a Content-Length or
 * close-delimited body: straight into the caller's buffer. */
static ssize_t read_direct(struct runtime_http_result *res, char *dst, size_t len)
{
	bool length = res->head.body == HTTP_FRAME_LENGTH;
	size_t want = length && res->body_left < len ? (size_t)res->body_left : len;
	ssize_t n = runtime_conn_read(res->conn->rc, dst, want);

	if (n > 0 && length) {
		res->body_left -= (uint64_t)n;
		res->body_done = !res->body_left;
	}
	return n;
}

/* The end of the stream: the end of a close-delimited body, else a cut. */
static ssize_t at_eof(struct runtime_http_result *res)
{
	if (res->head.body != HTTP_FRAME_CLOSE)
		return body_fail(res, -EPIPE);
	res->body_done = true;
	return 0;
}

/* A close-delimited body is bounded by body_max as it comes. */
static ssize_t counted(struct runtime_http_result *res, ssize_t n)
{
	if (n > 0 && res->head.body == HTTP_FRAME_CLOSE &&
	    (res->body_got += (uint64_t)n) > res->conn->core->cl->limits.body_max)
		return body_fail(res, -EMSGSIZE);
	return n;
}

/* A wait for body bytes: read_idle_ns from now bounds it with the
 * request's deadline. Its end (0: none). */
static uint64_t idle_clock(struct runtime_http_result *res)
{
	if (!res->read_idle)
		return 0;
	uint64_t end = http_after(res->read_idle);
	runtime_conn_set_read_deadline(res->conn->rc, http_earlier(res->deadline, end));
	return end;
}

int runtime_http_result_timeout(const struct runtime_http_result *res)
{
	return res ? res->timed_out : RUNTIME_HTTP_TIMEOUT_NONE;
}

ssize_t runtime_http_result_read(struct runtime_http_result *res, void *buf, size_t len)
{
	if (!res || (!buf && len))
		return -EINVAL;
	if (res->h2)
		return runtime__h2_result_read(res, buf, len);
	struct http_cconn *c = res->conn;

	if (res->body_error)
		return res->body_error;
	while (!res->body_done && len) {
		ssize_t n;
		if (c->in_len > c->in_off) {
			if ((n = take(res, buf, len)) != 0)
				return n < 0 ? body_fail(res, n) : counted(res, n);
			continue; /* chunked framing only: on to what follows */
		}
		bool direct = len >= DIRECT_MIN && res->head.body != HTTP_FRAME_CHUNKED;
		uint64_t idle_end = idle_clock(res);
		n = direct ? read_direct(res, buf, len) : runtime__http_cconn_fill(c);
		if (n == 0)
			return at_eof(res);
		if (n == -ETIMEDOUT)
			res->timed_out = http_timeout_kind(res->deadline, idle_end,
			                                   RUNTIME_HTTP_TIMEOUT_IDLE);
		if (n < 0)
			return body_fail(res, n);
		if (direct)
			return counted(res, n);
	}
	return 0;
}

static ssize_t read_some(void *res, void *buf, size_t len)
{
	return runtime_http_result_read(res, buf, len);
}

static ssize_t too_long(void *res)
{
	return body_fail(res, -EMSGSIZE);
}

int runtime_http_result_read_all(struct runtime_http_result *res, char **body, size_t *len,
                                 size_t max)
{
	if (!res || !body || !len)
		return -EINVAL;
	struct http_body_source src = { read_some, too_long, res,
	                                res->head.body == HTTP_FRAME_LENGTH ?
	                                (int64_t)res->head.content_length : -1 };
	return runtime__http_read_all(&src, max, body, len);
}

/* ---------------------------------------------------------------- closing */

/* The rest of a body that is small and already here (or nearly): read
 * and dropped, so that the connection can be kept. */
static void drain(struct runtime_http_result *res)
{
	struct http_cconn *c = res->conn;
	uint64_t now = runtime_now(), total = 0;
	char scratch[4096];
	ssize_t n;

	if (res->head.body == HTTP_FRAME_CLOSE ||
	    (res->head.body == HTTP_FRAME_LENGTH && res->body_left > DRAIN_MAX))
		return;
	runtime_conn_set_read_deadline(c->rc, http_earlier(res->deadline, now + DRAIN_WAIT_NS));
	while (total <= DRAIN_MAX && (n = runtime_http_result_read(res, scratch, sizeof(scratch))) > 0)
		total += (uint64_t)n;
}

void runtime__http_result_release(struct runtime_http_result *res)
{
	if (res->h2) {
		runtime__h2_result_close(res);
		return;
	}
	struct http_cconn *c = res->conn;

	if (res->reusable && !res->body_done && !res->body_error)
		drain(res);
	if (res->reusable && res->body_done && !res->body_error && c->in_len == c->in_off)
		runtime__http_pool_put(c); /* nothing beyond the body: the next answer starts clean */
	else
		runtime__http_cconn_close(c);
}

void runtime_http_result_close(struct runtime_http_result *res)
{
	if (!res)
		return;
	struct http_client_core *core = res->core;
	runtime__http_result_release(res);
	core->live--;
}

int runtime_http_result_upgraded(struct runtime_http_result *res, struct runtime_http_upgraded *up)
{
	if (!res || !up || res->h2 || res->head.status != 101)
		return -EINVAL;
	struct http_cconn *c = res->conn;
	runtime_conn_set_read_deadline(c->rc, 0); /* the caller's from now */
	runtime_conn_set_write_deadline(c->rc, 0);
	up->conn = c->rc;
	up->early = (struct runtime_http_slice){ c->in + c->in_off, c->in_len - c->in_off };
	return 0;
}

/* -------------------------------------------------------------- the head */

int runtime_http_result_status(const struct runtime_http_result *res)
{
	return res ? res->head.status : -EINVAL;
}

int runtime_http_result_minor(const struct runtime_http_result *res)
{
	return res ? res->head.minor : -EINVAL;
}

int runtime_http_result_version(const struct runtime_http_result *res)
{
	return !res ? -EINVAL : res->h2 ? 20 : 10 + res->head.minor;
}

const struct runtime_http_slice *runtime_http_result_header(const struct runtime_http_result *res,
                                                            const char *name)
{
	if (!res || !name)
		return NULL;
	/* struct http_slice and struct runtime_http_slice are the same shape */
	return (const struct runtime_http_slice *)runtime__http_response_header(&res->head, name);
}

unsigned runtime_http_result_header_count(const struct runtime_http_result *res)
{
	return res ? res->head.nheaders : 0;
}

int runtime_http_result_header_at(const struct runtime_http_result *res, unsigned index,
                                  struct runtime_http_slice *name,
                                  struct runtime_http_slice *value)
{
	if (!res || index >= res->head.nheaders)
		return res ? -ENOENT : -EINVAL;
	const struct http_header *f = &res->head.headers[index];
	if (name)
		*name = (struct runtime_http_slice){ f->name.p, f->name.len };
	if (value)
		*value = (struct runtime_http_slice){ f->value.p, f->value.len };
	return 0;
}

int64_t runtime_http_result_length(const struct runtime_http_result *res)
{
	if (!res)
		return -EINVAL;
	switch (res->head.body) {
	case HTTP_FRAME_LENGTH: return (int64_t)res->head.content_length;
	case HTTP_FRAME_NONE: /* HEAD, 204, 304: Content-Length tells, if there */
		if (res->head.has_length)
			return (int64_t)res->head.content_length;
		return res->head.status == 204 ? 0 : -1;
	default: return -1;
	}
}
