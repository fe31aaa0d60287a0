/* SPDX-License-Identifier: MIT */
/*
 * request.c - what a handler reads of its request: the head's parts as
 * slices into the connection's buffer (pinned there until the handler
 * returns), and the body, decoded, as the handler asks for it; and the
 * decoding helpers, which run only when called.
 */
#include "http.h"
#include "body.h"
#include "chars.h"

#include <stdlib.h>
#include <string.h>

#define BODY_DIRECT_MIN 4096 /* a read this large skips the buffer */

/* ---------------------------------------------------------------- head */

struct runtime_http_slice runtime_http_method(const struct runtime_http_request *req)
{
	return (struct runtime_http_slice){ req->head.method.p, req->head.method.len };
}

struct runtime_http_slice runtime_http_target(const struct runtime_http_request *req)
{
	return (struct runtime_http_slice){ req->head.target.p, req->head.target.len };
}

/* path and query: p up to q (the target's first '?', or end), what
 * follows q. */
static inline void set_path(struct runtime_http_slice *path, struct runtime_http_slice *query,
                            const char *p, const char *q, const char *end)
{
	*path = (struct runtime_http_slice){ p, (size_t)(q - p) };
	*query = q < end ? (struct runtime_http_slice){ q + 1, (size_t)(end - q - 1) }
	                 : (struct runtime_http_slice){ end, 0 };
}

/* The other forms: absolute-form "http://host/p?q" (its path, "/" if
 * none); "*" and authority-form have neither. Out of line: rare. */
static __attribute__((noinline)) void split_other(struct runtime_http_slice *path,
                                                  struct runtime_http_slice *query,
                                                  const char *t, const char *q, const char *end)
{
	const char *scheme = memchr(t, ':', (size_t)(end - t));

	*path = *query = (struct runtime_http_slice){ end, 0 };
	if (!scheme || end - scheme < 3 || scheme[1] != '/' || scheme[2] != '/')
		return; /* "*" or authority-form */
	t = scheme + 3;
	while (t < end && *t != '/' && *t != '?')
		t++;
	if (t == end || *t == '?') {
		*path = (struct runtime_http_slice){ "/", 1 };
		if (t < end)
			*query = (struct runtime_http_slice){ t + 1, (size_t)(end - t - 1) };
		return;
	}
	set_path(path, query, t, q, end); /* the target's first '?' ends its path
	                                     in every form: an authority has none */
}

/* The path and query of the target, found when asked (a handler asks for
 * one or two, and none is kept: serving a request does not split it):
 * origin-form "/p?q" inline, the others in split_other. */
static inline void split_target(const struct runtime_http_request *req,
                                struct runtime_http_slice *path, struct runtime_http_slice *query)
{
	const char *t = req->head.target.p, *end = t + req->head.target.len;
	const char *q = t + req->head.query; /* end if no '?' */

	if (t[0] == '/')
		set_path(path, query, t, q, end);
	else
		split_other(path, query, t, q, end);
}

struct runtime_http_slice runtime_http_path(const struct runtime_http_request *req)
{
	struct runtime_http_slice path, query;

	split_target(req, &path, &query);
	return path;
}

struct runtime_http_slice runtime_http_query(const struct runtime_http_request *req)
{
	struct runtime_http_slice path, query;

	split_target(req, &path, &query);
	return query;
}

int runtime_http_minor(const struct runtime_http_request *req)
{
	return req->head.minor;
}

int runtime_http_version(const struct runtime_http_request *req)
{
	return req->h2 ? 20 : 10 + req->head.minor;
}

struct runtime_conn *runtime_http_conn(const struct runtime_http_request *req)
{
	return req->h2 ? runtime__h2_conn(req) : req->conn->rc;
}

const struct runtime_http_slice *runtime_http_header(const struct runtime_http_request *req,
                                                     const char *name)
{
	/* struct http_slice and struct runtime_http_slice are the same shape */
	return (const struct runtime_http_slice *)runtime__http_header_get(&req->head, name);
}

unsigned runtime_http_header_count(const struct runtime_http_request *req)
{
	return req->head.nheaders;
}

int runtime_http_header_at(const struct runtime_http_request *req, unsigned index,
                           struct runtime_http_slice *name, struct runtime_http_slice *value)
{
	if (index >= req->head.nheaders)
		return -ENOENT;
	const struct http_header *f = &req->head.headers[index];
	if (name)
		*name = (struct runtime_http_slice){ f->name.p, f->name.len };
	if (value)
		*value = (struct runtime_http_slice){ f->value.p, f->value.len };
	return 0;
}

int64_t runtime_http_body_length(const struct runtime_http_request *req)
{
	switch (req->head.body) {
	case HTTP_BODY_LENGTH: return (int64_t)req->head.content_length;
	case HTTP_BODY_CHUNKED: return -1;
	default: return 0;
	}
}

/* ---------------------------------------------------------------- body */

/* A body read's error: sticky, and the connection closes after the
 * answer. The decoder's statuses become errnos. */
static ssize_t body_fail(struct runtime_http_request *req, ssize_t err)
{
	if (err == -400 || err == -ENOBUFS)
		err = -EBADMSG;
	else if (err == -413)
		err = -EMSGSIZE;
	else if (err == 0)
		err = -EPIPE; /* the client's end of stream, the body not whole */
	req->body_error = (int)err;
	return err;
}

/* Tell a client that waits before it sends the body to go on (unless it
 * has sent some already). */
static int send_continue(struct runtime_http_request *req)
{
	struct http_conn *c = req->conn;

	req->continued = true;
	if (c->in_len > c->in_off || req->answered)
		return 0; /* some body has come, or a final answer went first */
	return runtime__http_send_continue(c);
}

/* Bytes of a Content-Length body already in the buffer, up to len. */
static size_t take_length(struct runtime_http_request *req, char *dst, size_t len)
{
	struct http_conn *c = req->conn;
	size_t n = c->in_len - c->in_off;

	n = n < req->body_left ? n : (size_t)req->body_left;
	n = n < len ? n : len;
	memcpy(dst, c->in + c->in_off, n);
	c->in_off += n;
	req->bytes_in += n;
	req->body_left -= n;
	req->body_done = !req->body_left;
	return n;
}

/* Decode chunked bytes from the buffer: body bytes made (maybe 0: only
 * framing there), or a decoder status. */
static ssize_t take_chunked(struct runtime_http_request *req, char *dst, size_t len)
{
	struct http_conn *c = req->conn;
	size_t in = c->in_len - c->in_off, used, made;

	in = in < len ? in : len;
	int rc = runtime__http_chunked_decode(&req->chunked, c->in + c->in_off, in, dst, &used, &made);
	if (rc < 0)
		return rc;
	c->in_off += used;
	req->bytes_in += used;
	req->body_done = rc == 1;
	return (ssize_t)made;
}

/* Nothing buffered and a large read of a Content-Length body: straight
 * into the caller's buffer, no copy. */
static ssize_t read_direct(struct runtime_http_request *req, char *dst, size_t len)
{
	struct http_conn *c = req->conn;
	size_t want = len < req->body_left ? len : (size_t)req->body_left;

	runtime__http_not_idle(c);
	http_read_deadline(c, runtime__http_body_deadline(c->srv, req));
	ssize_t n = runtime_conn_read(c->rc, dst, want);
	if (n > 0) {
		req->body_left -= (uint64_t)n;
		req->bytes_in += (uint64_t)n;
		req->body_done = !req->body_left;
	}
	return n;
}

/* Bytes past the body are buffered: a next request, pipelined. Its
 * client's end is a half-close now, not leaving (conn.c: alone). */
static void next_read_ahead(struct runtime_http_request *req)
{
	struct http_conn *c = req->conn;
	size_t buffered = c->in_len - c->in_off;

	if (buffered && (req->body_done ||
	                 (req->head.body == HTTP_BODY_LENGTH && buffered > req->body_left)))
		runtime__http_unwatch(c);
}

/* runtime_http_body_read's HTTP/1.1 way. */
static ssize_t body_read(struct runtime_http_request *req, void *buf, size_t len)
{
	struct http_conn *c = req->conn;

	if (req->body_error)
		return req->body_error;
	if (!req->continued && send_continue(req) < 0)
		return body_fail(req, -EPIPE);
	while (!req->body_done && len) {
		ssize_t n;
		if (c->in_len > c->in_off) {
			n = req->head.body == HTTP_BODY_LENGTH ? (ssize_t)take_length(req, buf, len)
			                                       : take_chunked(req, buf, len);
			if (n == 0)
				continue; /* chunked framing only: what follows is read, not an end */
		} else if (req->head.body == HTTP_BODY_LENGTH && len >= BODY_DIRECT_MIN)
			n = read_direct(req, buf, len);
		else if ((n = runtime__http_fill(c, runtime__http_body_deadline(c->srv, req))) > 0)
			continue;
		if (n < 0 || (n == 0 && c->in_len == c->in_off && !req->body_done))
			return body_fail(req, n);
		if (n > 0) {
			req->body_got += (uint64_t)n;
			return n;
		}
	}
	return 0;
}

ssize_t runtime_http_body_read(struct runtime_http_request *req, void *buf, size_t len)
{
	if (!req || (!buf && len))
		return -EINVAL;
	if (req->h2)
		return runtime__h2_body_read(req, buf, len);
	ssize_t n = body_read(req, buf, len);

	if (req->conn->watched)
		next_read_ahead(req);
	return n;
}

/* Read and drop the rest of the body. 0, or its error. */
int runtime__http_body_discard(struct runtime_http_request *req)
{
	char scratch[4096];
	ssize_t n;

	while ((n = runtime_http_body_read(req, scratch, sizeof(scratch))) > 0)
		;
	return (int)n;
}

static ssize_t read_some(void *req, void *buf, size_t len)
{
	return runtime_http_body_read(req, buf, len);
}

static ssize_t too_long(void *req)
{
	return body_fail(req, -EMSGSIZE);
}

int runtime_http_body_read_all(struct runtime_http_request *req, char **body, size_t *len,
                               size_t max)
{
	if (!req || !body || !len)
		return -EINVAL;
	struct http_body_source src = { read_some, too_long, req, runtime_http_body_length(req) };
	return runtime__http_read_all(&src, max, body, len);
}

/* ------------------------------------------------------------- decoding */

ssize_t runtime_http_decode(struct runtime_http_slice s, char *out, size_t cap, int plus)
{
	size_t n = 0;

	if ((!s.p && s.len) || !out || !cap)
		return -EINVAL;
	for (size_t i = 0; i < s.len; i++) {
		char ch = s.p[i];
		if (ch == '%') {
			if (s.len - i < 3 || !is_hex((unsigned char)s.p[i + 1]) ||
			    !is_hex((unsigned char)s.p[i + 2]))
				return -EINVAL;
			ch = (char)(hex_value((unsigned char)s.p[i + 1]) << 4 |
			            hex_value((unsigned char)s.p[i + 2]));
			if (!ch)
				return -EINVAL;
			i += 2;
		} else if (ch == '+' && plus) {
			ch = ' ';
		}
		if (n + 1 >= cap)
			return -ENOBUFS;
		out[n++] = ch;
	}
	out[n] = '\0';
	return (ssize_t)n;
}

int runtime_http_query_param(struct runtime_http_slice query, const char *key,
                             struct runtime_http_slice *value)
{
	size_t klen = key ? strlen(key) : 0;
	const char *p = query.p, *end = query.p + query.len;

	if (!key || (!query.p && query.len))
		return -EINVAL;
	while (p && p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p)), *stop = amp ? amp : end;
		if ((size_t)(stop - p) >= klen && !memcmp(p, key, klen) &&
		    (p + klen == stop || p[klen] == '=')) {
			const char *v = p + klen + (p + klen < stop);
			if (value)
				*value = (struct runtime_http_slice){ v, (size_t)(stop - v) };
			return 1;
		}
		p = amp ? amp + 1 : NULL;
	}
	return 0;
}
