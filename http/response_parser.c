/* SPDX-License-Identifier: MIT */
/*
 * response_parser.c - the strict response-head parser of
 * response_parser.h. It reads the head line by line, left to right, as
 * the request parser does (and with its byte classes, chars.h), so that a
 * prefix of any input gives 0 or the whole input's result; it differs in
 * the start line, in the fields that matter (no Host or Expect) and in
 * the framing, which also depends on the status and on whether the
 * request was a HEAD.
 */
#include "response_parser.h"
#include "chars.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

enum { MORE = 1, DONE = 2 }; /* line results besides 0 (a line read) and -errno */

struct rhead {
	const char *b;
	size_t view;                 /* bytes looked at: min(len, head_max) */
	const struct http_limits *lim;
	struct http_response *res;
	unsigned max_fields;
	bool has_te, chunked, close, keep;
};

/* What ends the line whose content stops at q: 0 for CRLF, MORE if that
 * is not known yet, -EBADMSG for a bare LF or a CR followed by another
 * byte. */
static int terminator(const struct rhead *h, size_t q)
{
	if (q >= h->view)
		return MORE;
	if (h->b[q] == '\n')
		return -EBADMSG;
	if (q + 1 >= h->view)
		return MORE;
	return h->b[q + 1] == '\n' ? 0 : -EBADMSG;
}

/* ----------------------------------------------------------- status line */

/* "HTTP/1.D DDD ": the status line's fixed part, position by position. */
static bool status_byte_ok(size_t k, unsigned char c)
{
	static const char lit[] = "HTTP/1.";

	if (k < 7)
		return c == (unsigned char)lit[k];
	if (k == 7)
		return is_digit(c); /* 1.2 and up: read as 1.1 (RFC 9110 2.5) */
	if (k == 8 || k == 12)
		return c == ' ';
	if (k == 9)
		return c >= '1' && c <= '5';
	if (k < 12)
		return is_digit(c);
	return is_field_byte(c); /* the reason */
}

/* The status line's content at [0, e): whole once its CRLF has come, else
 * as far as it goes (an error as soon as a byte decides one). */
static int status_content(struct rhead *h, size_t e, bool whole)
{
	const char *b = h->b;
	struct http_response *res = h->res;

	for (size_t k = 0; k < e; k++)
		if (!status_byte_ok(k, (unsigned char)b[k]))
			return -EBADMSG;
	if (!whole)
		return 0;
	if (e < 13) /* "HTTP/1.1 200" without the SP before the reason */
		return -EBADMSG;
	res->minor = b[7] > '1' ? 1 : b[7] - '0';
	res->status = (b[9] - '0') * 100 + (b[10] - '0') * 10 + (b[11] - '0');
	res->reason = (struct http_slice){ b + 13, e - 13 };
	return 0;
}

/* The status line; on success *pos moves past its CRLF. */
static int status_line(struct rhead *h, size_t *pos)
{
	size_t line_max = h->lim->line_max;
	bool capped = h->view > line_max;
	size_t stop = capped ? line_max + 1 : h->view;
	size_t q = find_eol(h->b, 0, stop);
	int term, rc;

	if (q == stop && capped) { /* line_max + 1 bytes and no line end */
		rc = status_content(h, line_max, false); /* as a shorter prefix saw it */
		return rc < 0 ? rc : -EMSGSIZE;
	}
	term = terminator(h, q);
	rc = status_content(h, q, term == 0);
	if (rc < 0)
		return rc;
	if (term != 0)
		return term;
	*pos = q + 2;
	return 0;
}

/* ---------------------------------------------------------------- fields */

static int content_length(struct rhead *h, struct http_slice v)
{
	struct http_response *res = h->res;
	uint64_t n = 0;

	if (res->has_length || h->has_te || v.len == 0 || v.len > 19)
		return -EBADMSG;
	for (size_t i = 0; i < v.len; i++) {
		if (!is_digit((unsigned char)v.p[i]))
			return -EBADMSG;
		n = n * 10 + (uint64_t)(v.p[i] - '0'); /* 19 digits cannot overflow */
	}
	res->has_length = true;
	res->content_length = n;
	return 0;
}

static int transfer_encoding(struct rhead *h, struct http_slice v)
{
	const char *cur = v.p;
	struct http_slice el;
	int rc;

	if (h->res->minor == 0 || h->res->has_length)
		return -EBADMSG;
	h->has_te = true;
	while ((rc = next_token(&cur, v.p + v.len, &el)) > 0) {
		if (!slice_ieq(el.p, el.len, "chunked") || h->chunked)
			return -EBADMSG;
		h->chunked = true;
	}
	return rc < 0 ? -EBADMSG : 0;
}

static int connection(struct rhead *h, struct http_slice v)
{
	return connection_options(v, &h->close, &h->keep) ? 0 : -EBADMSG;
}

/* Record a complete field line and apply what it means. */
static int add_field(struct rhead *h, struct http_slice name, struct http_slice value)
{
	struct http_response *res = h->res;

	res->headers[res->nheaders++] = (struct http_header){ name, value };
	if (slice_ieq(name.p, name.len, "content-length"))
		return content_length(h, value);
	if (slice_ieq(name.p, name.len, "transfer-encoding"))
		return transfer_encoding(h, value);
	if (slice_ieq(name.p, name.len, "connection"))
		return connection(h, value);
	return 0;
}

/* A complete field line's content at [s, e), s < e. */
static int field_content(struct rhead *h, size_t s, size_t e)
{
	const char *b = h->b;
	size_t i = s, v, ve;

	if (is_ows((unsigned char)b[s])) /* obs-fold, or space before the first field */
		return -EBADMSG;
	if (h->res->nheaders >= h->max_fields)
		return -EMSGSIZE;
	i = skip_tchars(b, i, e);
	if (i == s || i == e || b[i] != ':')
		return -EBADMSG;
	v = skip_ows(b, i + 1, e);
	ve = SKIP_RUN(b, v, v, e, non_field);
	for (; ve < e; ve++)
		if (!is_field_byte((unsigned char)b[ve]))
			return -EBADMSG;
	while (ve > v && is_ows((unsigned char)b[ve - 1]))
		ve--;
	return add_field(h, (struct http_slice){ b + s, i - s },
	                 (struct http_slice){ b + v, ve - v });
}

/* The field line (or the empty line ending the head) at *pos. Only
 * complete lines are read: a field's bytes are checked once its CRLF is
 * there (a server that trickles a bad one is caught at head_max). */
static int field_line(struct rhead *h, size_t *pos)
{
	size_t s = *pos, q = find_eol(h->b, s, h->view);
	int term = terminator(h, q), rc;

	if (term != 0)
		return term;
	if (q == s) {
		*pos = s + 2;
		return DONE;
	}
	if ((rc = field_content(h, s, q)) < 0)
		return rc;
	*pos = q + 2;
	return 0;
}

/* ---------------------------------------------------------------- framing */

/* RFC 9112 6.3, in order: no body for a HEAD, 1xx, 204 and 304; then
 * chunked, Content-Length, or the close. */
static int framing(struct rhead *h, unsigned flags)
{
	struct http_response *res = h->res;
	bool never = res->status < 200 || res->status == 204;

	if (h->has_te && !h->chunked)
		return -EBADMSG; /* an empty list: no final chunked */
	if (never && (h->has_te || (res->has_length && res->content_length)))
		return -EBADMSG;
	if (never || res->status == 304 || (flags & HTTP_RESPONSE_TO_HEAD))
		res->body = HTTP_FRAME_NONE;
	else if (h->chunked)
		res->body = HTTP_FRAME_CHUNKED;
	else if (res->has_length)
		res->body = HTTP_FRAME_LENGTH;
	else
		res->body = HTTP_FRAME_CLOSE;
	if (res->body == HTTP_FRAME_LENGTH && res->content_length > h->lim->body_max)
		return -EMSGSIZE;
	res->keep_alive = (res->minor == 1 ? !h->close : h->keep && !h->close) &&
	                  res->body != HTTP_FRAME_CLOSE;
	return 0;
}

static void rhead_init(struct rhead *h, const char *buf, size_t len,
                       const struct http_limits *lim, struct http_response *res)
{
	size_t head_max = lim->head_max < INT_MAX ? lim->head_max : INT_MAX;

	*h = (struct rhead){ .b = buf, .lim = lim, .res = res };
	h->view = len < head_max ? len : head_max;
	h->max_fields = lim->headers_max < HTTP_HEADERS_MAX ? lim->headers_max : HTTP_HEADERS_MAX;
	res->status = 0;
	res->minor = 1;
	res->reason = (struct http_slice){ NULL, 0 };
	res->nheaders = 0;
	res->body = HTTP_FRAME_NONE;
	res->has_length = res->keep_alive = false;
	res->content_length = 0;
	res->head_len = 0;
}

int runtime__http_parse_response(const char *buf, size_t len, const struct http_limits *lim,
                                 unsigned flags, struct http_response *res)
{
	struct rhead h;
	size_t pos = 0;
	int rc;

	rhead_init(&h, buf, len, lim, res);
	rc = status_line(&h, &pos);
	while (rc == 0)
		rc = field_line(&h, &pos);
	if (rc == MORE)
		return len > h.view ? -EMSGSIZE : 0;
	if (rc < 0)
		return rc;
	if ((rc = framing(&h, flags)) < 0)
		return rc;
	res->head_len = pos;
	return (int)pos;
}

const struct http_slice *runtime__http_response_header(const struct http_response *res,
                                                       const char *name)
{
	for (unsigned i = 0; i < res->nheaders; i++) {
		const struct http_slice *n = &res->headers[i].name;
		if (slice_ieq(n->p, n->len, name))
			return &res->headers[i].value;
	}
	return NULL;
}
