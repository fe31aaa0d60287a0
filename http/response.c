/* SPDX-License-Identifier: MIT */
/*
 * response.c - answers: the status line and fields, assembled by hand
 * into the connection's batch (with snprintf, formatting took a quarter
 * of the demo server's CPU under pipelined load), then a body that is
 * fixed, streamed (Content-Length or chunked) or a file.
 *
 * The framing is the library's, and it never lies: a body shorter than
 * its Content-Length, or a stream the handler abandons, ends the
 * connection, so the client sees a truncation and never a whole answer.
 */
#include "http.h"

#include "chars.h"
#include "decimal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct text {
	const char *p;
	size_t len;
};

#define TEXT(lit) ((struct text){ lit, sizeof(lit) - 1 })

static struct text reason(int status)
{
	switch (status) {
	case 100: return TEXT("Continue");
	case 101: return TEXT("Switching Protocols");
	case 200: return TEXT("OK");
	case 201: return TEXT("Created");
	case 202: return TEXT("Accepted");
	case 204: return TEXT("No Content");
	case 206: return TEXT("Partial Content");
	case 301: return TEXT("Moved Permanently");
	case 302: return TEXT("Found");
	case 303: return TEXT("See Other");
	case 304: return TEXT("Not Modified");
	case 307: return TEXT("Temporary Redirect");
	case 308: return TEXT("Permanent Redirect");
	case 400: return TEXT("Bad Request");
	case 401: return TEXT("Unauthorized");
	case 403: return TEXT("Forbidden");
	case 404: return TEXT("Not Found");
	case 405: return TEXT("Method Not Allowed");
	case 408: return TEXT("Request Timeout");
	case 409: return TEXT("Conflict");
	case 410: return TEXT("Gone");
	case 411: return TEXT("Length Required");
	case 412: return TEXT("Precondition Failed");
	case 413: return TEXT("Content Too Large");
	case 414: return TEXT("URI Too Long");
	case 415: return TEXT("Unsupported Media Type");
	case 416: return TEXT("Range Not Satisfiable");
	case 417: return TEXT("Expectation Failed");
	case 429: return TEXT("Too Many Requests");
	case 431: return TEXT("Request Header Fields Too Large");
	case 500: return TEXT("Internal Server Error");
	case 501: return TEXT("Not Implemented");
	case 502: return TEXT("Bad Gateway");
	case 503: return TEXT("Service Unavailable");
	case 504: return TEXT("Gateway Timeout");
	case 505: return TEXT("HTTP Version Not Supported");
	default: return TEXT("");
	}
}

static char *put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

#define PUT_LIT(p, lit) put(p, lit, sizeof(lit) - 1)

#define OK_LINE "HTTP/1.1 200 OK\r\n"

/* The head start (http.h) of res's core made again for the second now;
 * the lines after it are kept (moved, should the Date's length change).
 * Out of line: once a second; and given res alone, so that the common way
 * keeps nothing else across its clock read for it. */
static __attribute__((noinline)) void head_remake(const struct runtime_http_response *res,
                                                  time_t now)
{
	struct http_head_start *hs = &res->core->head;
	const struct runtime_http_server *srv = res->conn->srv;
	struct tm tm;
	char date[32];

	gmtime_r(&now, &tm);
	size_t n = strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	size_t len = sizeof(OK_LINE) - 1 + srv->server_len + sizeof("Date: \r\n") - 1 + n;
	if (hs->type_len && len != hs->len)
		memmove(hs->text + len, hs->text + hs->len, hs->type_len + hs->tail_len);
	char *p = PUT_LIT(hs->text, OK_LINE);
	p = put(p, srv->server_field, srv->server_len);
	p = PUT_LIT(p, "Date: ");
	p = put(p, date, n);
	PUT_LIT(p, "\r\n");
	hs->len = len;
	hs->second = now;
}

/* The core's head start for res, made again when the second has moved. */
static inline struct http_head_start *head_start(const struct runtime_http_response *res)
{
	time_t now = time(NULL);

	if (__builtin_expect(now != res->core->head.second, 0))
		head_remake(res, now);
	return &res->core->head;
}

static char *put_hex(char *p, uint64_t v)
{
	char digits[16];
	int n = 0;

	do
		digits[n++] = "0123456789abcdef"[v & 15];
	while ((v >>= 4));
	while (n)
		*p++ = digits[--n];
	return p;
}

/* ---------------------------------------------------------------- fields */

bool runtime__http_field_value_ok(const char *v, size_t n)
{
	return field_value_end(v, 0, n) == n &&
	       (!n || (!is_ows((unsigned char)v[0]) && !is_ows((unsigned char)v[n - 1])));
}

static bool reserved(const char *name)
{
	/* The library's, and those whose meaning it would have to implement
	 * (an upgrade, trailers, keep-alive parameters, a request's Host):
	 * until there is an API for them. */
	static const char *const ours[] = { "Date", "Server", "Content-Length", "Connection",
	                                    "Transfer-Encoding", "Content-Type", "Upgrade",
	                                    "Trailer", "Keep-Alive", "Host" };

	for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (!strcasecmp(name, ours[i]))
			return true;
	return false;
}

/* Room for n more bytes of fields: in place up to HTTP_FIELDS_INLINE,
 * then all of them on the heap, doubled as they grow. 0, -ENOBUFS past
 * the server's fields_out_max, or -ENOMEM. */
static int fields_room(struct runtime_http_response *res, size_t n)
{
	size_t want = res->fields_len + n;

	if (n > res->fields_max || want > res->fields_max)
		return -ENOBUFS;
	if (want <= (res->spill ? res->spill_cap : HTTP_FIELDS_INLINE))
		return 0;
	size_t cap = 2 * HTTP_FIELDS_INLINE;
	while (cap < want)
		cap *= 2;
	char *p = realloc(res->spill, cap);
	if (!p)
		return -ENOMEM;
	if (!res->spill)
		memcpy(p, res->fields, res->fields_len);
	res->spill = p;
	res->spill_cap = cap;
	return 0;
}

int runtime_http_set_header(struct runtime_http_response *res, const char *name, const char *value)
{
	if (!res || !name || !value || !*name)
		return -EINVAL;
	for (const char *p = name; *p; p++)
		if (!is_tchar((unsigned char)*p))
			return -EINVAL;
	if (!runtime__http_field_value_ok(value, strlen(value)))
		return -EINVAL;
	if (reserved(name))
		return -EPERM;
	if (res->state != RES_NONE)
		return -EALREADY;
	size_t nl = strlen(name), vl = strlen(value);
	int rc = fields_room(res, nl + vl + 4);
	if (rc < 0)
		return rc;
	char *start = http_fields(res), *p = put(start + res->fields_len, name, nl);
	p = PUT_LIT(p, ": ");
	p = put(p, value, vl);
	p = PUT_LIT(p, "\r\n");
	res->fields_len = (size_t)(p - start);
	return 0;
}

void runtime_http_set_close(struct runtime_http_response *res)
{
	if (res)
		res->close = true;
}

int runtime_http_status(const struct runtime_http_response *res)
{
	return res ? res->status : 0;
}

uint64_t runtime_http_body_sent(const struct runtime_http_response *res)
{
	return res ? res->sent : 0;
}

/* ------------------------------------------------------------------ head */

/* 1xx and 204 have no body and no length; 304 a length (the one a 200
 * would have) and no body. */
static bool bodiless(int status)
{
	return status < 200 || status == 204 || status == 304;
}

/* The framing fields: Content-Length, chunked, or (an HTTP/1.0 client,
 * length unknown) none, the end of the connection ending the body. */
static char *put_framing(const struct runtime_http_response *res, char *p)
{
	if (res->status < 200 || res->status == 204 || (res->status == 304 && res->length <= 0))
		return p;
	if (res->length >= 0) {
		p = PUT_LIT(p, "Content-Length: ");
		p = http_put_u64(p, (uint64_t)res->length);
		return PUT_LIT(p, "\r\n");
	}
	if (res->chunked)
		return PUT_LIT(p, "Transfer-Encoding: chunked\r\n");
	return p;
}

static char *put_connection(const struct runtime_http_response *res, char *p)
{
	if (res->close)
		return PUT_LIT(p, "Connection: close\r\n");
	if (res->req && res->req->head.minor == 0)
		return PUT_LIT(p, "Connection: keep-alive\r\n");
	return p;
}

/* The Content-Type field: a value of at most HTTP_TYPE_MAX bytes, checked
 * by the parser's word-at-a-time scan and made the head start's type
 * line (written over: no tail after it). Out of line: the type changed.
 * false for a bad value. */
static __attribute__((noinline)) bool type_remake(struct http_head_start *hs, const char *type)
{
	size_t n = strnlen(type, HTTP_TYPE_MAX + 1);

	if (n == 0 || n > HTTP_TYPE_MAX || !runtime__http_field_value_ok(type, n))
		return false; /* empty, too long, or not a field value */
	char *e = put(PUT_LIT(hs->text + hs->len, HTTP_TYPE_NAME), type, n);
	hs->type_len = (size_t)(PUT_LIT(e, "\r\n") - (hs->text + hs->len));
	memcpy(hs->type_value, type, n + 1);
	hs->tail_len = 0;
	return true;
}

/* The core's last type again at the cost of a strcmp, which stops at the
 * first difference or NUL and so reads no more of the value than strnlen
 * would; else type_remake. */
static inline bool set_type(struct http_head_start *hs, const char *type)
{
	if (hs->type_value[0] && !strcmp(type, hs->type_value))
		return true;
	return type_remake(hs, type);
}

/* The head start's tail after its type line written for a body of length
 * bytes. Its length. Out of line: the length changed. */
static __attribute__((noinline)) size_t tail_remake(struct http_head_start *hs, uint64_t length)
{
	char *start = hs->text + hs->len + hs->type_len;
	char *p = http_put_u64(PUT_LIT(start, HTTP_TAIL_NAME), length);

	hs->tail_len = (size_t)(PUT_LIT(p, "\r\n\r\n") - start);
	hs->tail_length = length;
	return hs->tail_len;
}

/* The tail's length for a body of length bytes: the one there, or
 * tail_remake. */
static inline size_t tail(struct http_head_start *hs, uint64_t length)
{
	if (hs->tail_len && hs->tail_length == length)
		return hs->tail_len;
	return tail_remake(hs, length);
}

/* A 200 that ends as the head start's tail does: a type, a length, no
 * Connection field (keep-alive, HTTP/1.1) and no fields of its own. */
static inline bool tail_fits(const struct runtime_http_response *res, const char *type)
{
	return res->status == 200 && type && res->length >= 0 && !res->close &&
	       res->req->head.minor != 0 && !res->fields_len;
}

/* The head of any other answer, after its start and type line (to bytes
 * of hs->text), at p: its status line, framing and fields. Its end. */
static __attribute__((noinline)) char *put_head_rest(struct runtime_http_response *res,
                                                     char *p, const struct http_head_start *hs,
                                                     size_t to)
{
	size_t from = 0;

	if (res->status != 200) {
		struct text why = reason(res->status);
		p = PUT_LIT(p, "HTTP/1.1 ");
		p = http_put_u64(p, (uint64_t)res->status);
		*p++ = ' ';
		p = put(p, why.p, why.len);
		p = PUT_LIT(p, "\r\n");
		from = sizeof(OK_LINE) - 1;
	}
	p = put(p, hs->text + from, to - from);
	p = put_framing(res, p);
	p = put_connection(res, p);
	if (res->fields_len) /* mostly none: no call to copy nothing */
		p = put(p, http_fields(res), res->fields_len);
	return PUT_LIT(p, "\r\n");
}

/* A head's bytes at most, but for its own fields: a status line, Server,
 * Date, Content-Type, framing, Connection and the empty line. */
#define HEAD_ROOM (160 + HTTP_TYPE_MAX + 32 + HTTP_SERVER_FIELD_MAX)

/* A head whose fields do not fit in the batch (over HTTP_OUT_SIZE -
 * HEAD_ROOM): the batch goes first, then the head, made on the heap. */
static __attribute__((noinline)) int put_big_head(struct runtime_http_response *res,
                                                  const char *type)
{
	struct http_head_start *hs = head_start(res);
	size_t to = hs->len;

	if (type && !set_type(hs, type))
		return -EINVAL;
	to += type ? hs->type_len : 0;
	char *head = malloc(HEAD_ROOM + res->fields_len);
	if (!head)
		return -ENOMEM;
	size_t len = (size_t)(put_head_rest(res, head, hs, to) - head);
	res->head_bytes = len;
	int rc = runtime__http_flush(res->conn) < 0 ||
	         runtime__http_write_out(res->conn, head, len) < 0 ? -EPIPE : 0;
	free(head);
	return rc;
}

/* The status line and fields into the batch: nothing is kept of them
 * unless all is well. 0 or -errno. A 200 with a type starts with one
 * copy of the head start and its type line, and the common one (a length,
 * keep-alive, no fields of its own) is that copy and the tail's. */
static int put_head(struct runtime_http_response *res, const char *type)
{
	struct http_conn *c = res->conn;

	if (__builtin_expect(res->fields_len > HTTP_OUT_SIZE - HEAD_ROOM, 0))
		return put_big_head(res, type);
	if (HTTP_OUT_SIZE - c->out_len < HEAD_ROOM + res->fields_len && runtime__http_flush(c) < 0)
		return -EPIPE;
	char *p = c->out + c->out_len;
	struct http_head_start *hs = head_start(res);
	size_t to = hs->len;
	if (type && !set_type(hs, type))
		return -EINVAL;
	if (type)
		to += hs->type_len;
	if (tail_fits(res, type)) /* the common answer: one copy */
		p = put(p, hs->text, to + tail(hs, (uint64_t)res->length));
	else
		p = put_head_rest(res, p, hs, to);
	res->head_bytes = (size_t)(p - (c->out + c->out_len));
	c->out_len = (size_t)(p - c->out);
	return 0;
}

static void count_response(const struct runtime_http_response *res)
{
	_Atomic uint64_t *n = &res->core->responses[(unsigned)res->status / 100];

	atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
	                      memory_order_relaxed);
}

/* The framing and the connection's fate, decided at the start. */
static void decide(struct runtime_http_response *res, int status, int64_t length)
{
	struct runtime_http_request *req = res->req;

	if (http_stopping(res->conn->srv) || (req && (req->body_error ||
	    (!req->continued && !req->body_done))))
		res->close = true; /* stopping, the body broke, or a client that
		                      waits for a 100 may never send it */
	res->status = status;
	res->length = length;
	res->no_body = res->head_only || bodiless(status);
	res->chunked = length < 0 && !res->no_body && req && req->head.minor == 1;
	if (length < 0 && !res->no_body && !res->chunked)
		res->close = true; /* HTTP/1.0: the close ends the body */
}

static int emit(struct http_conn *c, const void *p, size_t len);

/* Start the response: checks, framing decided, head into the batch; then
 * for runtime_http_respond (fixed) its body, the response done (the
 * stream, should the body fail: it is cut). One function for both, so
 * that the common answer makes one call. */
static int begin(struct runtime_http_response *res, int status, const char *type, int64_t length,
                 bool fixed, const void *body)
{
	if (!res || status < 200 || status > 599 || length < RUNTIME_HTTP_CHUNKED)
		return res && res->state != RES_NONE ? -EALREADY : -EINVAL;
	if (res->state != RES_NONE)
		return -EALREADY;
	bool closing = res->close;
	decide(res, status, length);
	int rc = put_head(res, type);
	if (rc < 0) {
		res->status = 0;
		res->close = closing || rc != -EINVAL;
		return rc;
	}
	if (res->req)
		res->req->answered = true;
	res->state = RES_STREAM;
	count_response(res);
	if (!fixed)
		return 0;
	if (!res->no_body && length && (rc = emit(res->conn, body, (size_t)length)) < 0) {
		res->close = true;
		return rc;
	}
	res->sent = res->no_body ? 0 : (uint64_t)length;
	res->state = RES_DONE;
	return 0;
}

/* ------------------------------------------------------------------ body */

/* Bytes that do not fit in the batch: the batch, and then they go out at
 * once or into the batch emptied. */
static __attribute__((noinline)) int emit_flushed(struct http_conn *c, const void *p, size_t len)
{
	if (runtime__http_flush(c) < 0)
		return -EPIPE;
	if (len <= HTTP_OUT_SIZE / 2)
		return emit(c, p, len);
	return runtime__http_write_out(c, p, len);
}

/* f[0..n) to to, k <= n <= 2k, as its first and its last k bytes (they
 * may overlap): with k a constant, two loads and two stores. */
static inline __attribute__((always_inline)) void copy_ends(char *to, const char *f, size_t n,
                                                            size_t k)
{
	char a[8], z[8];

	memcpy(a, f, k);
	memcpy(z, f + n - k, k);
	memcpy(to, a, k);
	memcpy(to + n - k, z, k);
}

/* memcpy, but a short body's 1 to 16 bytes with no call: as two words,
 * or two halves (1 to 3: the first, middle and last). */
static inline void copy_short(char *to, const void *from, size_t n)
{
	const char *f = from;

	if (n > 16) {
		memcpy(to, f, n);
	} else if (n >= 8) {
		copy_ends(to, f, n, 8);
	} else if (n >= 4) {
		copy_ends(to, f, n, 4);
	} else if (n) {
		char a = f[0], m = f[n / 2], z = f[n - 1];
		to[0] = a;
		to[n / 2] = m;
		to[n - 1] = z;
	}
}

/* Bytes to the client: into the batch if they fit (inlined: a copy), else
 * emit_flushed. */
static inline int emit(struct http_conn *c, const void *p, size_t len)
{
	if (len > HTTP_OUT_SIZE - c->out_len)
		return emit_flushed(c, p, len);
	copy_short(c->out + c->out_len, p, len);
	c->out_len += len;
	return 0;
}

/* A chunk: its size line, its data, its CRLF. */
static int emit_chunk(struct http_conn *c, const void *p, size_t len)
{
	char line[24], *e = put_hex(line, len);
	int rc;

	e = PUT_LIT(e, "\r\n");
	if ((rc = emit(c, line, (size_t)(e - line))) < 0 || (rc = emit(c, p, len)) < 0)
		return rc;
	return emit(c, "\r\n", 2);
}

int runtime_http_write(struct runtime_http_response *res, const void *buf, size_t len)
{
	if (!res || (!buf && len))
		return -EINVAL;
	if (res->state != RES_STREAM)
		return -EALREADY;
	if (res->length >= 0 && len > (uint64_t)res->length - res->sent)
		return -EMSGSIZE;
	if (!len)
		return 0;
	res->sent += len;
	if (res->no_body)
		return 0;
	if (res->h2)
		return runtime__h2_write(res, buf, len);
	int rc = res->chunked ? emit_chunk(res->conn, buf, len) : emit(res->conn, buf, len);
	if (rc < 0)
		res->close = true;
	return rc;
}

int runtime_http_end(struct runtime_http_response *res)
{
	if (!res)
		return -EINVAL;
	if (res->state != RES_STREAM)
		return -EALREADY;
	res->state = RES_DONE;
	if (res->no_body)
		return 0;
	if (res->h2)
		return runtime__h2_end(res);
	if (res->chunked)
		return emit(res->conn, "0\r\n\r\n", 5);
	if (res->length >= 0 && res->sent < (uint64_t)res->length)
		res->close = true; /* less than promised: the close tells */
	return 0;
}

int runtime_http_start(struct runtime_http_response *res, int status, const char *type,
                       int64_t length)
{
	if (res && res->h2)
		return runtime__h2_begin(res, status, type, length, false, NULL);
	return begin(res, status, type, length, false, NULL);
}

/* 16 bytes, kept in a register where there are vector ones (GNU C's
 * vector type: a 64-byte array went through the stack). */
typedef char bytes16 __attribute__((vector_size(16)));

static inline bytes16 load16(const char *p)
{
	bytes16 v;

	memcpy(&v, p, 16);
	return v;
}

/* put, for the head start with its type line and tail: 64 to 128 bytes
 * (the least is about 90: the status line, Date, a type and a length; a
 * long Server or type makes more) as its first and its last 64, which
 * overlap - eight loads and eight stores where SSE2 is, no call; else
 * memcpy. */
static inline char *put_head_start(char *to, const char *from, size_t n)
{
	if (n - 64 > 64)
		return put(to, from, n);
	const char *e = from + n - 64;
	bytes16 a0 = load16(from), a1 = load16(from + 16), a2 = load16(from + 32),
	        a3 = load16(from + 48), z0 = load16(e), z1 = load16(e + 16), z2 = load16(e + 32),
	        z3 = load16(e + 48);
	char *t = to + n - 64;

	memcpy(to, &a0, 16);
	memcpy(to + 16, &a1, 16);
	memcpy(to + 32, &a2, 16);
	memcpy(to + 48, &a3, 16);
	memcpy(t, &z0, 16);
	memcpy(t + 16, &z1, 16);
	memcpy(t + 32, &z2, 16);
	memcpy(t + 48, &z3, 16);
	return to + n;
}

/* respond_fast's tests that make no call: the response, its request and
 * the room in the batch (HEAD_ROOM and the body; the length's own test
 * first, so that the sum cannot overflow). */
static inline bool fast_fits(const struct runtime_http_response *res, const char *type, size_t len)
{
	const struct runtime_http_request *req = res->req;

	return res->state == RES_NONE && !res->close && !res->fields_len && type && req &&
	       req->head.minor != 0 && !req->body_error && (req->continued || req->body_done) &&
	       len < HTTP_OUT_SIZE && res->conn->out_len + len <= HTTP_OUT_SIZE - HEAD_ROOM;
}

/*
 * runtime_http_respond's common answer, made here with fewer tests than
 * begin's: a 200 of a type to a keep-alive HTTP/1.1 request (GET or HEAD)
 * with nothing that would close it or need a flush, and no fields of its
 * own - the head start copied with its tail, then the body. The bytes and
 * the response's state are begin's (check_http_lib's
 * test_respond_as_streamed holds the two to that). false, with nothing
 * changed, for any other answer: begin makes it.
 *
 * The tests without a call come first, then the calls (the drain, the
 * clock, the type's strcmp, the head's copy), and what is needed after
 * them is read again from res: fewer values kept across them, fewer
 * registers saved and restored.
 */
static inline bool respond_fast(struct runtime_http_response *res, const char *type,
                                const void *body, size_t len)
{
	if (!fast_fits(res, type, len) || http_stopping(res->conn->srv))
		return false;
	struct http_head_start *hs = head_start(res);
	if (!set_type(hs, type))
		return false; /* begin refuses it */
	struct http_conn *c = res->conn;
	char *p = put_head_start(c->out + c->out_len, hs->text,
	                         hs->len + hs->type_len + tail(hs, len));
	size_t sent = len & -(size_t)!res->head_only; /* 0 for HEAD */
	copy_short(p, body, sent);
	res->head_bytes = (size_t)(p - c->out) - c->out_len;
	c->out_len = (size_t)(p - c->out) + sent;
	res->no_body = res->head_only;
	res->status = 200;
	res->length = (int64_t)len;
	res->chunked = false;
	res->sent = sent;
	res->state = RES_DONE;
	res->req->answered = true;
	count_response(res);
	return true;
}

int runtime_http_respond(struct runtime_http_response *res, int status, const char *type,
                         const void *body, size_t len)
{
	if (!res || (!body && len))
		return -EINVAL;
	if (__builtin_expect(res->h2 != NULL, 0))
		return runtime__h2_begin(res, status, type, (int64_t)len, true, body);
	if (status != 200)
		return begin(res, status, type, (int64_t)len, true, body);
	if (respond_fast(res, type, body, len))
		return 0;
	return begin(res, 200, type, (int64_t)len, true, body);
}

/* ------------------------------------------------------ the library's own */

int runtime__http_status_text(int status, char *buf, size_t size)
{
	struct text why = reason(status);
	int n = snprintf(buf, size, "%d %.*s\n", status, (int)why.len, why.p);

	return n < (int)size ? n : (int)size - 1;
}

/* The request the access log and on_response see for a head the parser
 * refused: no method, no target, no fields; what was read of it. */
static __attribute__((noinline)) void refused(struct http_conn *c,
                                              const struct runtime_http_response *res)
{
	struct runtime_http_request req = { .conn = c };

	req.head.method = req.head.target = req.head.host = (struct http_slice){ "", 0 };
	req.head.minor = 1;
	req.start = c->head_start ? c->head_start : runtime_now_coarse();
	req.bytes_in = c->in_len - c->in_off;
	runtime__http_responded(c->srv, &req, res);
}

/* A request that could not be read: its status, a short text, close. */
int runtime__http_refuse(struct http_conn *c, int status)
{
	struct runtime_http_response res;
	char body[64];
	int n = runtime__http_status_text(status, body, sizeof(body));

	http_response_init(&res, c, NULL, c->core, c->srv);
	http_response_ready(&res, NULL);
	c->linger = true; /* what the client sent after it is not read */
	if (runtime_http_respond(&res, status, "text/plain", body, (size_t)n) < 0)
		return -1;
	if (c->after_each)
		refused(c, &res);
	http_write_deadline(c, runtime__http_deadline_in(c->srv->cfg.idle_timeout_ns));
	return runtime__http_flush(c);
}

int runtime__http_send_continue(struct http_conn *c)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

	http_write_deadline(c, runtime__http_deadline_in(c->srv->cfg.idle_timeout_ns));
	if (runtime__http_flush(c) < 0)
		return -EPIPE;
	return runtime__http_write_out(c, cont, sizeof(cont) - 1);
}

/* The answer to a request its handler did not answer: what broke the
 * body's read, if that did (the client's fault: 408 for a body that
 * stopped coming, 413, 400), else 500. */
static void answer_for_handler(struct runtime_http_response *res, int handler_rc)
{
	int err = res->req->body_error, status = 500;
	char body[64];

	if (err == -ETIMEDOUT)
		status = 408;
	else if (err == -EMSGSIZE)
		status = 413;
	else if (err == -EBADMSG)
		status = 400;
	if (handler_rc < 0 || status != 500)
		res->close = true;
	int n = runtime__http_status_text(status, body, sizeof(body));
	runtime_http_respond(res, status, "text/plain", body, (size_t)n);
}

/*
 * After the handler: answer it if it did not, end what it left open (a
 * stream not ended is cut: the connection closes), and decide whether the
 * connection goes on. Returns 0 to go on, -1 to close.
 */
int runtime__http_response_finish(struct runtime_http_response *res, int handler_rc)
{
	struct runtime_http_request *req = res->req;

	if (res->state == RES_NONE) {
		answer_for_handler(res, handler_rc);
	} else if (res->state == RES_STREAM) {
		res->close = true; /* abandoned mid-stream: never a complete body */
		res->state = RES_DONE;
	}
	if (req->body_error) {
		res->close = true;
		res->conn->linger = req->body_error != -EPIPE;
	} else if (!req->continued && !req->body_done) {
		/* The client waits for a 100 it will not get: it may not send
		 * the body at all, so none is waited for. */
		res->close = res->conn->linger = true;
	} else if (res->close && !req->body_done) {
		res->conn->linger = true;
	}
	return res->close ? -1 : 0;
}
