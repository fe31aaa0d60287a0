/* SPDX-License-Identifier: MIT */
/*
 * conn.c - one fiber per connection: read, parse every complete request
 * in the buffer, run the handler for each with its answer going into one
 * output batch, and write the batch once before waiting to read again
 * (pipelined answers leave in order, in one send).
 *
 * The buffer: in[0..keep) is the head of the request being served,
 * pinned while its handler runs (its slices point there, body reads or
 * not); in[in_off..in_len) is what is not parsed yet. Reading more moves
 * the unparsed bytes down to keep. Between requests keep is 0.
 *
 * Timeouts are the connection's deadlines: a head must arrive within
 * header_timeout of its first byte (slowloris: 408), an idle connection
 * closes after idle_timeout, and so does one whose client stops reading
 * its answers. A drain ends idle connections (runtime_conn_set_idle) at
 * once, busy ones after their answer.
 */
#include "http.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define LINGER_NS (2000 * 1000000ull) /* a closing connection reads and drops
                                          its client's last bytes this long */

/* ns after t, UINT64_MAX if that is past the clock's end. */
static inline uint64_t deadline_after(uint64_t t, uint64_t ns)
{
	return ns > UINT64_MAX - t ? UINT64_MAX : t + ns;
}

uint64_t runtime__http_deadline_in(uint64_t ns)
{
	return deadline_after(runtime_now(), ns);
}

/* The minimum rate's due time for the body's next byte: body_got bytes
 * must have come by body_since + grace + body_got / rate. */
uint64_t runtime__http_body_deadline(const struct runtime_http_server *srv,
                                     struct runtime_http_request *req)
{
	uint64_t now = runtime_now(), idle = deadline_after(now, srv->cfg.idle_timeout_ns);
	uint64_t rate = srv->cfg.body_min_rate;

	if (!req->body_since)
		req->body_since = now;
	if (!rate)
		return idle;
	unsigned __int128 due = (unsigned __int128)(req->body_got + 1) * 1000000000u / rate;
	uint64_t start = deadline_after(req->body_since, srv->cfg.body_rate_grace_ns);
	uint64_t by = due > UINT64_MAX ? UINT64_MAX : deadline_after(start, (uint64_t)due);
	return by < idle ? by : idle;
}

struct http_core *runtime__http_core(struct runtime_http_server *srv)
{
	return &srv->cores[runtime_core_index() % srv->ncores];
}


/* ------------------------------------------------------------- writing */

/* wr_end told the runtime (http_write_deadline). */
static void tell_write_deadline(struct http_conn *c, uint64_t deadline)
{
	runtime_conn_set_write_deadline(c->rc, deadline);
	if (c->wr_keep == HTTP_WR_SECOND)
		c->wr_keep = runtime_conn_layer(c->rc, NULL) ? HTTP_WR_NO : HTTP_WR_YES;
	else if (c->wr_keep == HTTP_WR_FIRST)
		c->wr_keep = HTTP_WR_SECOND;
	c->wr_told = c->wr_keep == HTTP_WR_YES ? deadline : 0;
}

/* A write that timed out under an earlier deadline than wr_end (told for
 * an earlier answer): wr_end told, the rest written. Out of line: once
 * per idle_timeout of a connection's life at most, or a slow client. */
static __attribute__((noinline)) ssize_t write_on(struct http_conn *c, const char *p, size_t len,
                                                  size_t done)
{
	ssize_t rc = -ETIMEDOUT;

	while (rc == -ETIMEDOUT && c->wr_told && c->wr_told < c->wr_end) {
		tell_write_deadline(c, c->wr_end);
		size_t more = 0;
		rc = runtime_conn_write(c->rc, p + done, len - done, &more);
		done += more;
	}
	return rc;
}

/* runtime__http_write_out, inlined into next_head's flush: the write of every
 * batch. */
static inline __attribute__((always_inline)) int write_out(struct http_conn *c, const void *p,
                                                           size_t len)
{
	if (c->wr_told - 1 >= c->wr_end) /* 0 (not known), or later */
		tell_write_deadline(c, c->wr_end);
	size_t done;
	ssize_t rc = runtime_conn_write(c->rc, p, len, &done);

	if (__builtin_expect(rc == -ETIMEDOUT, 0))
		rc = write_on(c, p, len, done);
	if (rc < 0)
		c->broken = true;
	else
		http_count_n(&c->core->bytes_out, len);
	return rc < 0 ? (int)rc : 0;
}

int runtime__http_write_out(struct http_conn *c, const void *p, size_t len)
{
	return write_out(c, p, len);
}

/* Write the batch of answers, if any (under the write deadline). */
static inline __attribute__((always_inline)) int flush(struct http_conn *c)
{
	int rc = c->out_len ? write_out(c, c->out, c->out_len) : 0;

	c->out_len = 0;
	return rc;
}

int runtime__http_flush(struct http_conn *c)
{
	return flush(c);
}

/* ------------------------------------------------------------- reading */

/*
 * runtime_conn_set_idle, told only a change. A head is read idle when
 * none of it has come (a drain may end the wait); the connection stays
 * so while its request is served, as nothing reads it then but a body's
 * reads (the handler may not read it: runtime_http_conn), which make it
 * busy first (runtime__http_not_idle). Between keep-alive requests that is no
 * call at all.
 */
static inline void tell_idle(struct http_conn *c, bool idle)
{
	if (c->idle != idle) {
		runtime_conn_set_idle(c->rc, idle);
		c->idle = idle;
	}
}

void runtime__http_not_idle(struct http_conn *c)
{
	tell_idle(c, false);
}

/* Move the unparsed bytes down to the end of the pinned head (none, the
 * common case between requests: no call to move nothing). */
static inline __attribute__((always_inline)) void compact(struct http_conn *c)
{
	if (c->in_off > c->keep) {
		if (c->in_len > c->in_off)
			memmove(c->in + c->keep, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off - c->keep;
		c->in_off = c->keep;
	}
}

/* Read more input before deadline. Returns the bytes read, 0 at EOF, or
 * -errno (-ENOBUFS: the buffer is full; -ETIMEDOUT, -ESHUTDOWN...).
 * Inlined into next_head, the read of every request. */
static inline __attribute__((always_inline)) ssize_t fill(struct http_conn *c, uint64_t deadline)
{
	compact(c);
	if (c->in_len == c->in_size)
		return -ENOBUFS;
	http_read_deadline(c, deadline);
	ssize_t n = runtime_conn_read(c->rc, c->in + c->in_len, c->in_size - c->in_len);
	if (n > 0) {
		c->in_len += (size_t)n;
		http_count_n(&c->core->bytes_in, (uint64_t)n);
	}
	return n;
}

/* A body's read: the connection busy. */
ssize_t runtime__http_fill(struct http_conn *c, uint64_t deadline)
{
	tell_idle(c, false);
	return fill(c, deadline);
}

#define HEAD_IDLE (-2) /* no head begun, all answers written: wait idle */

/* No head begun and quiet: wait with no fiber, until idle_end. */
static int idle_until(struct http_conn *c, uint64_t idle_end)
{
	http_read_deadline(c, idle_end);
	return HEAD_IDLE;
}

/*
 * The next request's head: its length (> 0, head filled in), -status for
 * a bad one (answer it, then close), -1 to close quietly (end of stream,
 * idle timeout, drain, an error), or HEAD_IDLE. Before it waits for input
 * the batch of answers so far is written: the end of a pipelined burst.
 */
static int next_head(struct http_conn *c, struct http_request *head)
{
	const struct runtime_http_server_config *cfg = &c->srv->cfg;

	for (;;) {
		size_t avail = c->in_len - c->in_off;
		if (avail) {
			int rc = runtime__http_parse_head(c->in + c->in_off, avail, &c->srv->limits, head);
			if (rc != 0)
				return rc;
		}
		/* One clock read for all: the answers get idle_timeout to
		 * leave, and so does the next request to come; a head begun
		 * gets header_timeout from when its first bytes were seen. */
		uint64_t now = runtime_now();
		if (c->started) { /* the last request's answer is queued */
			http_duration(c->core, now - c->started);
			c->started = 0;
		}
		if (avail && !c->head_start)
			c->head_start = now;
		uint64_t idle_end = deadline_after(now, cfg->idle_timeout_ns);
		c->idle_end = idle_end;
		http_write_deadline(c, idle_end);
		if (flush(c) < 0)
			return -1;
		uint64_t deadline = avail ? deadline_after(c->head_start, cfg->header_timeout_ns)
		                          : c->swept ? 0 : idle_end;
		if (!avail && atomic_load_explicit(&c->srv->stopping, memory_order_relaxed))
			return -1;
		if (!avail && c->idle_now)
			return idle_until(c, idle_end); /* release_after 0: at once */
		tell_idle(c, !avail);
		if (!avail) /* all parsed (no head pinned here): read from the start,
		               compact's tests then known to pass */
			c->in_off = c->in_len = 0;
		ssize_t n = fill(c, deadline);
		if (n == -EAGAIN && c->may_idle)
			return idle_until(c, idle_end); /* quiet past release_after */
		if (n == -EAGAIN)
			continue; /* runtime_http_serve_conn: its caller's connection */
		if (n == -ETIMEDOUT && avail)
			return -408; /* a head that trickles in: slowloris */
		if (n == -ENOBUFS)
			return -431;
		if (n == -ESHUTDOWN && !avail && runtime_conn_handover(c->rc) == 1)
			continue; /* a restart's: bytes came as it began, serve them */
		if (n <= 0)
			return -1;
	}
}

/* ---------------------------------------------------------------- requests */

/* A pipelined head far into the buffer leaves little room behind it for
 * the body's framing: move what is unparsed to the front and parse the
 * head again there (its slices must point where it stays). Rare. */
static size_t make_room(struct http_conn *c, struct runtime_http_request *req, size_t head_len)
{
	if (!c->in_off || c->in_size - (c->in_off + head_len) >= 4096)
		return head_len;
	memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
	c->in_len -= c->in_off;
	c->in_off = 0;
	return (size_t)runtime__http_parse_head(c->in, c->in_len, &c->srv->limits, &req->head);
}

/* The request whose head is in[in_off..in_off + head_len), made ready for
 * its handler: the head pinned, the body's state (its path and query are
 * found when asked: request.c). Here, not in request.c, so that serving a
 * request makes no call for it. */
static void request_init(struct runtime_http_request *req, struct http_conn *c, size_t head_len)
{
	const struct http_request *h = &req->head;

	head_len = make_room(c, req, head_len);
	c->in_off += head_len;
	c->keep = c->in_off;
	req->body_left = h->body == HTTP_BODY_LENGTH ? h->content_length : 0;
	req->body_done = h->body != HTTP_BODY_CHUNKED && !req->body_left; /* none, or 0 */
	req->continued = !h->expect_continue;
	req->answered = false;
	req->body_error = 0;
	req->body_since = req->body_got = 0;
	/* The head's first byte, else the metrics' clock read, else one of
	 * its own (no_metrics): the coarse clock costs a call. */
	req->start = c->head_start ? c->head_start : c->started ? c->started : runtime_now_coarse();
	req->bytes_in = head_len;
	req->data = NULL;
	if (h->body == HTTP_BODY_CHUNKED)
		runtime__http_chunked_init(&req->chunked, &c->srv->limits);
}

/* ---------------------------------------------------------------- serving */

/* What a server with on_response or no_batch does after each answer
 * (rc: runtime__http_response_finish's, the body dropped): the hook, then the
 * batch written at once. -1 to close. Out of line, and told by one flag
 * of the connection's, so that other servers test neither. */
static __attribute__((noinline)) int after_each(struct http_conn *c,
                                                struct runtime_http_request *req,
                                                struct runtime_http_response *res, int rc)
{
	const struct runtime_http_server_config *cfg = &c->srv->cfg;

	runtime__http_responded(c->srv, req, res);
	return rc == 0 && cfg->no_batch && runtime__http_flush(c) < 0 ? -1 : 0;
}

/* The common end of a request: answered whole (not streaming), with its
 * body read and nothing that closes. runtime__http_response_finish would change
 * nothing and return 0, and no body is left to drop: four tests of the
 * state that finish_rest's way makes more of. */
static inline bool answered_whole(const struct runtime_http_request *req,
                                  const struct runtime_http_response *res)
{
	return res->state == RES_DONE && !res->close && req->body_done && !req->body_error;
}

/* Any other end: runtime__http_response_finish (a 500 for no answer, a stream cut,
 * the close and linger decided), then what the handler left of the body is
 * read and dropped, so that the next request starts where it should; a
 * body that breaks a rule now only ends the connection (a second answer
 * would be taken for the next request's). 0 to go on, -1 to close. */
static __attribute__((noinline)) int finish_rest(struct runtime_http_request *req,
                                                 struct runtime_http_response *res, int rc)
{
	rc = runtime__http_response_finish(res, rc);
	if (rc == 0 && !req->body_done && runtime__http_body_discard(req) < 0)
		rc = -1;
	return rc;
}

/* A head that is no HTTP/1.1 request may be the HTTP/2 preface of a
 * client that knows the server speaks h2c: only as the connection's first
 * bytes (the session checks those past what came so far). Out of line:
 * it never costs a good request anything. */
static __attribute__((noinline)) bool h2c(const struct http_conn *c)
{
	return !c->srv->cfg.no_h2c && c->in_off == 0 &&
	       runtime__h2_preface(c->in, c->in_len);
}

/* The metrics of a request parsed: its method's class, and its start
 * (the core's turn clock: no read of its own), which ends the one before
 * if a pipelined burst held both (else next_head's clock read ends it). */
static inline void request_timed(struct http_conn *c, const struct http_request *h)
{
	uint64_t now = runtime_now_coarse();

	http_count(&c->core->methods[http1_method_class(h->method.p, h->method.len)]);
	if (c->started)
		http_duration(c->core, now - c->started);
	c->started = now;
}

/* The connection closes after this request: its duration ends now. */
static __attribute__((noinline)) int request_last(struct http_conn *c)
{
	if (c->started)
		http_duration(c->core, runtime_now() - c->started);
	c->started = 0;
	return -1;
}

/* Nothing of a next request is read ahead: the peer's end would be the
 * client leaving, not a half-close after pipelined requests it still
 * wants answered (a chunked body's end is not known: none buffered). */
static bool alone(const struct http_conn *c, const struct http_request *h)
{
	size_t buffered = c->in_len - c->in_off;

	return h->body == HTTP_BODY_LENGTH ? buffered <= h->content_length : buffered == 0;
}

/* The watch ends (the handler's, or a body's read brought a next
 * request: request.c). Did the client leave while it lasted? */
bool runtime__http_unwatch(struct http_conn *c)
{
	if (c->watched)
		c->gone = runtime_conn_cancel_on_close(c->rc, 0) == 1;
	c->watched = false;
	return c->gone;
}

/* The handler, watched: a client that leaves meanwhile - closes or
 * resets, its request read - cancels the handler's fiber, and the answer
 * is logged as nginx's 499, the client's close, whatever was sent. */
static int run_handler(struct http_conn *c, struct runtime_http_request *req,
                       struct runtime_http_response *res)
{
	const struct runtime_http_server_config *cfg = &c->srv->cfg;

	c->gone = false;
	c->watched = !cfg->no_cancel_on_close && alone(c, &req->head) &&
	             runtime_conn_cancel_on_close(c->rc, 1) == 0;
	int rc = cfg->handler(req, res, cfg->arg);

	if (runtime__http_unwatch(c)) {
		if (res->state == RES_NONE)
			res->state = RES_DONE; /* nobody to answer */
		res->status = HTTP_CLIENT_CLOSED;
		res->close = c->broken = true;
	}
	return rc;
}

/* One request: 0 to go on with the connection, -1 to close it, 1: wait
 * for the next with no fiber, 2: serve HTTP/2. */
static int serve_one(struct http_conn *c, struct runtime_http_request *req,
                     struct runtime_http_response *res)
{
	int rc = next_head(c, &req->head);

	if (rc == HEAD_IDLE)
		return 1;
	if (rc < -1 && c->first && h2c(c))
		return 2;
	c->first = false;
	if (rc < 0) {
		if (rc != -1) {
			http_count(&c->core->rejected);
			runtime__http_refuse(c, -rc);
		}
		return -1;
	}
	http_count(&c->core->requests);
	if (c->timed)
		request_timed(c, &req->head);
	request_init(req, c, (size_t)rc);
	http_response_ready(res, req);
	rc = run_handler(c, req, res);
	if (!answered_whole(req, res))
		rc = finish_rest(req, res, rc);
	else
		rc = 0;
	c->keep = 0;
	c->head_start = 0;
	if (c->after_each && after_each(c, req, res, rc) < 0)
		return request_last(c);
	return rc < 0 || res->close || c->broken ? request_last(c) : 0;
}

struct http_conn *runtime__http_conn_new(struct runtime_http_server *srv, struct runtime_conn *rc)
{
	size_t in_size = srv->limits.head_max + 4096;
	struct http_core *core = runtime__http_core(srv);
	struct http_conn *c;

	if (in_size < HTTP_IN_SIZE)
		in_size = HTTP_IN_SIZE;
	if (!(c = runtime__http_buffer_get(&core->buffers, sizeof(*c) + in_size)))
		return NULL;
	memset(c, 0, offsetof(struct http_conn, idle_end)); /* not the buffers */
	c->idle = -1;
	c->idle_end = c->wr_end = c->wr_told = 0;
	c->rd_deadline = HTTP_DEADLINE_UNKNOWN;
	c->timed = !srv->cfg.no_metrics;
	c->srv = srv;
	c->core = core;
	c->rc = rc;
	c->in_size = in_size;
	return c;
}

void runtime__http_conn_free(struct http_conn *c)
{
	runtime__http_buffer_put(&c->core->buffers, c);
}

/*
 * Does an idle read of the next head go without a read deadline? A quiet
 * one of runtime_serve's with release_after ends with -EAGAIN within twice
 * that (runtime_toolkit.h), and the connection then waits with no fiber
 * until the idle deadline (idle_until): the idle timeout holds without the
 * read's own - if twice release_after is well inside it (half of it here:
 * slack for a late loop). None spares the runtime the read's clock read
 * and its timer, and the connection a call to set it, every request.
 */
static bool swept(const struct runtime_http_server *srv, bool may_idle)
{
	uint64_t release = srv->cfg.serve.release_after_ns; /* 0: none */

	return may_idle && release && release <= srv->cfg.idle_timeout_ns / 4;
}

/* Between requests, with nothing of the next one read: hand the
 * connection to the core (runtime_conn_idle) and let the fiber end - once
 * its read has been quiet for release_after (runtime_serve's sweep makes
 * it -EAGAIN), or at once for release_after 0, though never before the
 * fiber's first request (it came for bytes). A connection that cannot
 * wait so waits here. */
static bool went_idle(struct http_conn *c)
{
	c->idle_now = false;
	c->idle = -1; /* runtime_conn_idle's to set */
	return runtime_conn_idle(c->rc, NULL, NULL) == 0;
}

/* HTTP/1.1 on c until the connection ends, or it waits idle with no
 * fiber, or the client turns out to speak h2c. */
static void serve_http1(struct http_conn *c)
{
	struct runtime_http_server *srv = c->srv;
	struct runtime_http_request req;
	struct runtime_http_response res;
	int rc_one;

	req.conn = c; /* the links of the one request and response: set once */
	req.h2 = NULL;
	http_response_init(&res, c, &req, c->core, srv);
	c->swept = swept(srv, c->may_idle);
	c->after_each = srv->cfg.on_response || srv->cfg.no_batch || srv->cfg.access_log_format;
	c->first = true;
	bool at_once = c->may_idle && srv->cfg.release_after_ns == 0;
	while ((rc_one = serve_one(c, &req, &res)) >= 0) {
		if (rc_one == 2) {
			runtime__h2_serve(c, NULL);
			return;
		}
		if (rc_one == 1) {
			if (went_idle(c))
				return;
		} else if (at_once) {
			c->idle_now = true; /* went_idle, and only it, clears it */
		}
	}
	tell_idle(c, false); /* as it was before: runtime_http_serve_conn's
	                        caller may go on with the connection */
	if (!c->broken && !c->hand_off) {
		c->wr_keep = HTTP_WR_NO; /* told exactly, as runtime_http_serve_conn's
		                            caller finds it */
		c->wr_end = runtime__http_deadline_in(srv->cfg.idle_timeout_ns);
		tell_write_deadline(c, c->wr_end);
		if (runtime__http_flush(c) == 0 && c->linger) {
			if (!c->rd_deadline) /* a swept read's: the linger ends by
			                        the deadline it stood for */
				http_read_deadline(c, c->idle_end);
			runtime_conn_finish(c->rc, LINGER_NS);
		}
	}
}

/* The protocol a TLS client agreed on by ALPN: 2 for h2, 1 for another
 * or none. */
static int alpn_version(struct runtime_conn *rc)
{
	struct runtime_tls_info info;

	if (runtime_conn_tls_info(rc, &info) < 0 || !info.alpn)
		return 1;
	return strcmp(info.alpn, "h2") ? 1 : 2;
}

void runtime__http_conn_serve(struct runtime_http_server *srv, struct runtime_conn *rc,
                              bool may_idle)
{
	struct http_conn *c = runtime__http_conn_new(srv, rc);

	if (!c)
		return;
	c->may_idle = may_idle;
	if (!runtime_conn_layer(rc, NULL) || alpn_version(rc) == 1)
		serve_http1(c);
	else if (!srv->cfg.no_h2)
		runtime__h2_serve(c, NULL);
	runtime_serve_fn *hand_off = c->hand_off;
	void *arg = c->hand_off_arg;
	runtime__http_conn_free(c);
	if (hand_off) /* an upgraded connection is the protocol's now */
		hand_off(rc, arg);
}
