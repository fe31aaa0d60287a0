/* SPDX-License-Identifier: MIT */
/*
 * conn.c - one fiber per connection: read (through a receive stream: one
 * multishot recv for the connection's life), parse every complete request in
 * the buffer, answer each into one output batch, and write the batch once
 * before reading again (pipelined responses go out in order, in one send).
 * Bodies are read as the routes ask (Content-Length or chunked), and
 * skipped when they do not, so that the next request starts where it
 * should. Timeouts are the fiber's deadline: a head must arrive within
 * header_timeout of its first byte (slowloris: 408), an idle connection
 * closes after idle_timeout, and a client that stops reading its answers
 * is cut off after idle_timeout too.
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

struct conn {
	struct server *srv;
	struct runtime_conn *rc;        /* runtime_serve's: the reads */
	int fd;                         /* its socket: the writes */
	struct runtime_fiber *fiber;
	struct conn *prev, *next;       /* this core's live connections */
	bool idle;                      /* waiting for a request: a drain ends it */
	uint64_t head_start;            /* first byte of the pending head, or 0 */
	size_t in_off, in_len;          /* unparsed input: in[in_off..in_len) */
	size_t out_len;
	struct http_chunked chunked;
	const struct http_request *req; /* the one being answered */
	uint64_t body_left;             /* Content-Length bytes not yet read */
	bool body_done;
	/* out shares its first page with the fields above, which are written
	 * at accept: an answer after a wait (/delay) takes no page fault on a
	 * fresh connection. in takes it when the request arrives. */
	char out[OUT_SIZE];
	char in[IN_SIZE];
};

/* Per core, a cache line each: its live connections and its count of
 * requests (one writer, so no locked add; /stats reads it relaxed). */
struct conn_list {
	struct conn *head;
	_Atomic uint64_t requests;
} __attribute__((aligned(64)));

int conn_lists_init(struct server *srv)
{
	srv->live = aligned_alloc(64, runtime_cores(srv->rt) * sizeof(*srv->live));
	if (!srv->live)
		return -ENOMEM;
	memset(srv->live, 0, runtime_cores(srv->rt) * sizeof(*srv->live));
	return 0;
}

uint64_t conn_requests(const struct server *srv)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < runtime_cores(srv->rt); i++)
		n += atomic_load_explicit(&srv->live[i].requests, memory_order_relaxed);
	return n;
}

static void count_request(struct server *srv)
{
	_Atomic uint64_t *n = &srv->live[runtime_core_index()].requests;

	atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
	                      memory_order_relaxed);
}

static void live_add(struct conn *c)
{
	struct conn_list *l = &c->srv->live[runtime_core_index()];

	c->prev = NULL;
	c->next = l->head;
	if (l->head)
		l->head->prev = c;
	l->head = c;
}

static void live_remove(struct conn *c)
{
	struct conn_list *l = &c->srv->live[runtime_core_index()];

	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

/* On each core at shutdown: connections that wait for a request close now;
 * busy ones close after their answer. */
void conn_drain_core(struct server *srv)
{
	for (struct conn *c = srv->live[runtime_core_index()].head; c; c = c->next)
		if (c->idle)
			runtime_fiber_cancel(c->fiber);
}

/* ------------------------------------------------------------- writing */

/* The Date header's value into out (32 bytes of room; NUL-terminated),
 * formatted once a second per thread. Returns its length. */
size_t http_date(char out[32])
{
	static __thread time_t cached;
	static __thread char text[32];
	static __thread size_t len;
	time_t now = time(NULL);

	if (now != cached) {
		struct tm tm;
		gmtime_r(&now, &tm);
		len = strftime(text, sizeof(text), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		cached = now;
	}
	memcpy(out, text, sizeof(text));
	return len;
}

static uint64_t deadline_in(uint64_t ms)
{
	return runtime_now() + ms * 1000000ull;
}

/* Give the fiber's next writes idle_timeout to leave: a client that stops
 * reading its answers is cut off. runtime_deadline_set(0) clears it. */
void write_deadline_set(const struct server *srv)
{
	runtime_deadline_set(deadline_in(srv->opt.idle_timeout_ms));
}

/* Write all of p[0..len) before deadline (0: idle_timeout from now, the
 * clock read only then). */
static int write_by(struct conn *c, const void *p, size_t len, uint64_t deadline)
{
	if (deadline)
		runtime_deadline_set(deadline);
	else
		write_deadline_set(c->srv);
	ssize_t rc = runtime_conn_write(c->rc, p, len, NULL);
	runtime_deadline_set(0);
	return rc < 0 ? (int)rc : 0;
}

static int write_all(struct conn *c, const void *p, size_t len)
{
	return write_by(c, p, len, 0);
}

/* Write the batch of answers, if any, before deadline (as write_by). */
static int flush_by(struct conn *c, uint64_t deadline)
{
	int rc = c->out_len ? write_by(c, c->out, c->out_len, deadline) : 0;
	c->out_len = 0;
	return rc;
}

static int flush(struct conn *c)
{
	return flush_by(c, 0);
}

int respond_flush(struct exchange *ex)
{
	return flush(ex->conn);
}

int respond_write(struct exchange *ex, const void *p, size_t len)
{
	return runtime_conn_write(ex->conn->rc, p, len, NULL) < 0 ? -1 : 0;
}

int conn_fd(const struct exchange *ex)
{
	return ex->conn->fd;
}

bool conn_tls(const struct exchange *ex)
{
	return runtime_conn_tls_ssl(ex->conn->rc) != NULL;
}

struct text {
	const char *p;
	size_t len;
};

#define TEXT(lit) ((struct text){ lit, sizeof(lit) - 1 })

static struct text reason(int status)
{
	switch (status) {
	case 100: return TEXT("Continue");
	case 200: return TEXT("OK");
	case 304: return TEXT("Not Modified");
	case 400: return TEXT("Bad Request");
	case 403: return TEXT("Forbidden");
	case 404: return TEXT("Not Found");
	case 405: return TEXT("Method Not Allowed");
	case 408: return TEXT("Request Timeout");
	case 413: return TEXT("Content Too Large");
	case 414: return TEXT("URI Too Long");
	case 417: return TEXT("Expectation Failed");
	case 431: return TEXT("Request Header Fields Too Large");
	case 500: return TEXT("Internal Server Error");
	case 501: return TEXT("Not Implemented");
	case 503: return TEXT("Service Unavailable");
	case 505: return TEXT("HTTP Version Not Supported");
	default: return TEXT("Unknown");
	}
}

static char *put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

#define PUT_LIT(p, lit) put(p, lit, sizeof(lit) - 1)

static char *put_u64(char *p, uint64_t v)
{
	char digits[20];
	int n = 0;

	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (n)
		*p++ = digits[--n];
	return p;
}

/*
 * Append the status line and headers to the batch (room is made first).
 * Assembled by hand: with snprintf, formatting took a quarter of the
 * server's CPU under pipelined load (perf record -e cpu-clock).
 */
int respond_head(struct exchange *ex, int status, const char *type, const char *extra,
                 uint64_t length)
{
	struct conn *c = ex->conn;
	struct text why = reason(status);
	size_t type_len = strlen(type), extra_len = extra ? strlen(extra) : 0;

	if (OUT_SIZE - c->out_len < 1024 && flush(c) < 0)
		return -1;
	if (why.len + type_len + extra_len > OUT_SIZE - c->out_len - 256)
		return -1; /* headers too long: a bug, not a client's doing */
	if (atomic_load(&c->srv->draining))
		ex->close = true; /* stopping: this is the connection's last answer */
	ex->status = status;
	bool keep10 = !ex->close && ex->req && ex->req->minor == 0;
	char *p = PUT_LIT(c->out + c->out_len, "HTTP/1.1 ");
	p = put_u64(p, (uint64_t)status);
	*p++ = ' ';
	p = put(p, why.p, why.len);
	p = PUT_LIT(p, "\r\nServer: runtime-demo\r\nDate: ");
	p += http_date(p);
	p = PUT_LIT(p, "\r\nContent-Type: ");
	p = put(p, type, type_len);
	p = PUT_LIT(p, "\r\nContent-Length: ");
	p = put_u64(p, length);
	p = PUT_LIT(p, "\r\n");
	if (ex->close)
		p = PUT_LIT(p, "Connection: close\r\n");
	else if (keep10)
		p = PUT_LIT(p, "Connection: keep-alive\r\n");
	if (extra)
		p = put(p, extra, extra_len);
	p = PUT_LIT(p, "\r\n");
	c->out_len = (size_t)(p - c->out);
	return 0;
}

/* Append body bytes to the batch, or write them straight out if large. */
int respond_body(struct exchange *ex, const void *body, size_t len)
{
	struct conn *c = ex->conn;

	if (ex->head_only || !len)
		return 0;
	ex->sent_body += len;
	if (len <= OUT_SIZE - c->out_len) {
		memcpy(c->out + c->out_len, body, len);
		c->out_len += len;
		return 0;
	}
	if (flush(c) < 0)
		return -1;
	return write_all(c, body, len);
}

int respond(struct exchange *ex, int status, const char *type, const char *extra,
            const void *body, size_t len)
{
	if (respond_head(ex, status, type, extra, len) < 0)
		return -1;
	return respond_body(ex, body, len);
}

/* ------------------------------------------------------------- reading */

/* Move unparsed input to the front of the buffer. */
static void compact(struct conn *c)
{
	if (c->in_off) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
}

/* Read more input before deadline. Returns the bytes read, 0 at EOF, or
 * -errno (-ETIMEDOUT, -ECANCELED ...). */
static ssize_t fill(struct conn *c, uint64_t deadline)
{
	compact(c);
	if (c->in_len == IN_SIZE)
		return -ENOBUFS;
	runtime_deadline_set(deadline);
	char *to = c->in + c->in_len;
	size_t room = IN_SIZE - c->in_len;
	ssize_t n = runtime_conn_read(c->rc, to, room);
	runtime_deadline_set(0);
	if (n > 0)
		c->in_len += (size_t)n;
	return n;
}

/*
 * The next request's head: its length (>0, req filled in), -status for a
 * bad one (answer, then close), or -1 to close quietly (EOF, idle timeout,
 * drain, error). Before it waits for input, the batch of answers so far is
 * written: the end of the pipelined requests a client sent at once.
 */
static int next_head(struct conn *c, struct http_request *req)
{
	const struct options *o = &c->srv->opt;

	for (;;) {
		size_t avail = c->in_len - c->in_off;
		if (avail) {
			int rc = http_parse_head(c->in + c->in_off, avail, &c->srv->limits, req);
			if (rc != 0)
				return rc;
			if (!c->head_start)
				c->head_start = runtime_now();
		}
		/* One clock read for both deadlines: the answers get
		 * idle_timeout from now to leave, and so does the next request
		 * to arrive. */
		uint64_t idle_end = deadline_in(o->idle_timeout_ms);
		if (flush_by(c, idle_end) < 0)
			return -1;
		c->idle = !avail;
		if (c->idle && atomic_load(&c->srv->draining))
			return -1;
		uint64_t deadline = avail ? c->head_start + o->header_timeout_ms * 1000000ull
		                          : idle_end;
		ssize_t n = fill(c, deadline);
		c->idle = false;
		if (n == -ETIMEDOUT && avail)
			return -408; /* a head that trickles in: slowloris */
		if (n == -ENOBUFS)
			return -431;
		if (n <= 0)
			return -1;
	}
}

/* Body bytes of the current request into dst (NULL: skipped), at most max.
 * Returns how many (0 at the body's end) or -status / -1. */
static ssize_t body_chunk(struct conn *c, char *dst, size_t max)
{
	for (;;) {
		if (c->body_done)
			return 0;
		size_t avail = c->in_len - c->in_off;
		if (avail) {
			const char *src = c->in + c->in_off;
			size_t take = avail, made;
			if (c->req->body == HTTP_BODY_LENGTH) {
				take = made = avail < c->body_left ? avail : c->body_left;
				take = made = made < max ? made : max;
				if (dst)
					memcpy(dst, src, made);
				c->body_left -= made;
				c->body_done = !c->body_left;
			} else {
				char scratch[4096];
				if (take > max)
					take = max;
				if (!dst && take > sizeof(scratch))
					take = sizeof(scratch);
				int rc = http_chunked_decode(&c->chunked, src, take, dst ? dst : scratch,
				                             &take, &made);
				if (rc < 0)
					return rc;
				c->body_done = rc == 1;
			}
			c->in_off += take;
			if (made || c->body_done)
				return (ssize_t)made;
			if (take)
				continue; /* framing only (a little room left): decode on */
		}
		ssize_t n = fill(c, deadline_in(c->srv->opt.idle_timeout_ms));
		if (n <= 0)
			return -1;
	}
}

static void body_begin(struct conn *c, const struct http_request *req)
{
	c->req = req;
	c->body_left = req->body == HTTP_BODY_LENGTH ? req->content_length : 0;
	c->body_done = req->body == HTTP_BODY_NONE || (req->body == HTTP_BODY_LENGTH && !c->body_left);
	if (req->body == HTTP_BODY_CHUNKED)
		http_chunked_init(&c->chunked, &c->srv->limits);
}

/* The whole body, in a malloc'd buffer (up to body_max). 0 or -status/-1. */
int read_body(struct exchange *ex, char **body, size_t *len)
{
	struct conn *c = ex->conn;
	size_t cap = c->req->body == HTTP_BODY_LENGTH ? (size_t)c->req->content_length : 4096;
	char *buf = malloc(cap ? cap : 1);
	size_t got = 0;

	for (ssize_t n = 1; buf && n > 0;) {
		if (got == cap && c->req->body == HTTP_BODY_CHUNKED) {
			char *bigger = realloc(buf, cap * 2);
			if (!bigger)
				break;
			buf = bigger;
			cap *= 2;
		}
		if ((n = body_chunk(c, buf + got, cap - got)) < 0) {
			free(buf);
			return (int)n;
		}
		got += (size_t)n;
		if (c->body_done) {
			*body = buf;
			*len = got;
			return 0;
		}
	}
	free(buf);
	return -500;
}

int discard_body(struct exchange *ex)
{
	ssize_t n;

	while ((n = body_chunk(ex->conn, NULL, SIZE_MAX)) > 0)
		;
	return (int)n;
}

/* ---------------------------------------------------------------- serving */

/* "METHOD target" of a request, taken before its body is read (reading it
 * reuses the buffer the request's slices point into). */
static void log_begin(const struct http_request *r, char *line, size_t cap)
{
	snprintf(line, cap, "%.*s %.*s", (int)r->method.len, r->method.p,
	         (int)(r->target.len < 300 ? r->target.len : 300), r->target.p);
}

static void log_end(const struct exchange *ex, const char *begun)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "%s %d %llu\n", begun, ex->status,
	                 (unsigned long long)ex->sent_body);
	if (n > 0)
		runtime_write(1, line, (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1));
}

/* A request that could not be read: answer its status and close. */
static void refuse(struct conn *c, int status)
{
	struct exchange ex = { .conn = c, .close = true };
	char body[64];
	struct text why = reason(status);
	int n = snprintf(body, sizeof(body), "%d %.*s\n", status, (int)why.len, why.p);

	if (respond(&ex, status, "text/plain", NULL, body, (size_t)n) == 0)
		flush(c);
}

/* Tell a client that waits before sending its body to go on. */
static int send_continue(struct conn *c, const struct http_request *req)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

	if (!req->expect_continue || req->body == HTTP_BODY_NONE || c->body_done ||
	    c->in_len > c->in_off)
		return 0;
	if (flush(c) < 0)
		return -1;
	return write_all(c, cont, sizeof(cont) - 1);
}

/* One request: 0 to go on with the connection, -1 to close it. */
static int serve_one(struct conn *c)
{
	struct server *srv = c->srv;
	struct http_request req;
	int rc = next_head(c, &req);

	if (rc < 0) {
		if (rc != -1)
			refuse(c, -rc);
		return -1;
	}
	c->in_off += (size_t)rc;
	c->head_start = 0;
	count_request(srv);
	struct exchange ex = { .conn = c, .req = &req, .close = !req.keep_alive ||
	                       atomic_load(&srv->draining) };
	ex.head_only = req.method.len == 4 && !memcmp(req.method.p, "HEAD", 4);
	char begun[400];
	begun[0] = '\0';
	if (srv->opt.access_log)
		log_begin(&req, begun, sizeof(begun));
	body_begin(c, &req);
	if (send_continue(c, &req) < 0)
		return -1;
	rc = route(srv, &ex);
	/* Skip what the route left of the body, so that the next request
	 * starts where it should. The request has its answer already: a body
	 * that breaks the rules now only ends the connection, as a second
	 * answer would be taken for the next request's. */
	if (rc == 0 && !c->body_done && discard_body(&ex) < 0)
		rc = -1;
	if (srv->opt.access_log)
		log_end(&ex, begun);
	if (rc == 0 && srv->opt.no_batch && flush(c) < 0)
		return -1;
	return rc < 0 || ex.close ? -1 : 0;
}

/* Serve rc until it closes; the caller closes rc after. */
void conn_serve(struct server *srv, struct runtime_conn *rc)
{
	struct conn *c = malloc(sizeof(*c));

	if (c) {
		memset(c, 0, offsetof(struct conn, out));
		c->srv = srv;
		c->rc = rc;
		c->fd = runtime_conn_fd(rc);
		c->fiber = runtime_fiber_self();
		live_add(c);
		while (serve_one(c) == 0)
			;
		flush(c);
		live_remove(c);
		free(c);
	}
	atomic_fetch_sub(&srv->open, 1);
}
