/* SPDX-License-Identifier: MIT */
/*
 * h2_conn.c - an HTTP/2 connection: its session, made when the client
 * chose h2 (ALPN, or the h2c preface), and the fiber that reads it.
 *
 * The reader feeds what it reads to the session, which starts a handler
 * fiber per request (h2_recv.c); it lets them run (a yield) and then
 * writes all they answered at once before it reads again. With no stream
 * running it is idle: marked so (a drain ends it with GOAWAY), bounded by
 * idle_timeout, and once quiet for release_after it hands the connection
 * to runtime_conn_idle with its session and lets its fiber and buffers go.
 * A header block must be whole within header_timeout of its start.
 *
 * Limits the session keeps (nghttp2's options): SETTINGS entries, queued
 * SETTINGS and PING acks of a peer that does not read (1,000), CONTINUATION
 * frames after a HEADERS (8), RST_STREAMs received (a bucket of 1,000, 33
 * a second). Ours: the handlers at once (max_streams, counted until each
 * fiber ends), the head's size and fields, and a bucket for frames that
 * carry no request - PING, SETTINGS, PRIORITY, empty DATA, refused
 * streams: a peer past it is told ENHANCE_YOUR_CALM and cut off.
 */
#include "h2.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

bool runtime__h2_preface(const char *p, size_t n)
{
	size_t k = n < sizeof(preface) - 1 ? n : sizeof(preface) - 1;

	return k >= 4 && !memcmp(p, preface, k);
}

/* ----------------------------------------------------------- its writer */

static void writer(void *arg)
{
	struct h2_conn *h = arg;

	runtime__h2_flush(&h->link);
	h->link.writer = false;
	if (h->ender)
		runtime_fiber_unpark(h->ender);
}

/* While the reader waits to read, a writer for the output that came: a
 * fiber of its own until there is none left, so that an idle connection
 * holds no writer. */
static void start_writer(struct h2_link *l)
{
	struct h2_conn *h = h2_conn_of(l);

	l->writer = runtime_spawn(h->srv->rt, writer, h) == 0;
}

/* ------------------------------------------------------------ the session */

static nghttp2_session_callbacks *callbacks;
static nghttp2_option *options;

static void session_kit_make(void)
{
	if (nghttp2_session_callbacks_new(&callbacks) != 0 || nghttp2_option_new(&options) != 0)
		abort(); /* a few bytes at the first connection: no way on */
	runtime__h2_recv_callbacks(callbacks);
	runtime__h2_send_callbacks(callbacks);
	/* The window is credited as the handler reads, not as bytes come. */
	nghttp2_option_set_no_auto_window_update(options, 1);
	nghttp2_option_set_no_closed_streams(options, 1);
	nghttp2_option_set_max_settings(options, 32);
	nghttp2_option_set_max_outbound_ack(options, 1000);
	nghttp2_option_set_max_continuations(options, 8);
	nghttp2_option_set_stream_reset_rate_limit(options, 1000, 33);
}

static int session_new(struct h2_conn *h)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const struct runtime_http_server *srv = h->srv;

	pthread_once(&once, session_kit_make);
	if (nghttp2_session_server_new3(&h->link.session, callbacks, h, options,
	                                runtime__h2_mem()) != 0)
		return -ENOMEM;
	nghttp2_settings_entry set[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, h->max_streams },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)srv->limits.head_max },
	};
	/* Not SETTINGS_NO_RFC7540_PRIORITIES: nghttp2 then skips PRIORITY
	 * frames unchecked, where RFC 9113 6.3 still wants bad ones refused. */
	if (nghttp2_submit_settings(h->link.session, NGHTTP2_FLAG_NONE, set, 3) != 0 ||
	    nghttp2_session_set_local_window_size(h->link.session, NGHTTP2_FLAG_NONE, 0,
	                                          H2_CONN_WINDOW) != 0) {
		nghttp2_session_del(h->link.session);
		return -ENOMEM;
	}
	return 0;
}

static struct h2_conn *conn_new(struct runtime_http_server *srv, struct runtime_conn *rc)
{
	struct h2_conn *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->srv = srv;
	h->link.rc = rc;
	h->link.write_timeout_ns = srv->cfg.idle_timeout_ns;
	h->link.start_writer = start_writer;
	h->core = runtime__http_core(srv);
	h->link.sent = &h->core->bytes_out;
	h->max_streams = srv->cfg.h2_max_streams ? srv->cfg.h2_max_streams : H2_MAX_STREAMS;
	h->idle = -1;
	h->rd_deadline = HTTP_DEADLINE_UNKNOWN;
	h->calm = H2_CALM_BURST;
	h->calm_at = runtime_now();
	if (session_new(h) < 0) {
		free(h);
		return NULL;
	}
	return h;
}

/* ------------------------------------------------------------- its state */

bool runtime__h2_calm(struct h2_conn *h, double cost)
{
	uint64_t now = runtime_now();
	double refill = (double)(now - h->calm_at) * (H2_CALM_RATE / 1e9);

	h->calm_at = now;
	h->calm = h->calm + refill > H2_CALM_BURST ? H2_CALM_BURST : h->calm + refill;
	h->calm -= cost;
	if (h->calm >= 0)
		return true;
	runtime__h2_goaway(h, NGHTTP2_ENHANCE_YOUR_CALM);
	return false;
}

/* NO_ERROR: graceful (the streams so far finish); another code ends the
 * session once the GOAWAY is out. */
void runtime__h2_goaway(struct h2_conn *h, uint32_t code)
{
	if (code != NGHTTP2_NO_ERROR && !h->terminated)
		h->terminated = nghttp2_session_terminate_session(h->link.session, code) == 0;
	else if (!h->goaway)
		nghttp2_submit_goaway(h->link.session, NGHTTP2_FLAG_NONE,
		                      nghttp2_session_get_last_proc_stream_id(h->link.session), code,
		                      NULL, 0);
	h->goaway = true;
}

static uint64_t after(uint64_t t, uint64_t ns)
{
	return ns > UINT64_MAX - t ? UINT64_MAX : t + ns;
}

/*
 * Tell the connection whether it is idle - no handler runs and no header
 * block is begun - and the read deadline that goes with it: idle_timeout
 * from when it became idle, header_timeout from a block's start, or none
 * while handlers run (theirs bound them). Called by the reader before it
 * reads, and by a handler that ends (a drain then wakes the reader).
 */
void runtime__h2_set_idle(struct h2_conn *h)
{
	const struct runtime_http_server_config *cfg = &h->srv->cfg;
	bool idle = h->live == 0 && !h->head_start;
	uint64_t deadline = 0;

	if (idle != h->idle) {
		runtime_conn_set_idle(h->link.rc, idle);
		h->idle = idle;
		if (idle)
			h->idle_end = runtime__http_deadline_in(cfg->idle_timeout_ns);
	}
	if (idle)
		deadline = h->idle_end;
	else if (h->head_start)
		deadline = after(h->head_start, cfg->header_timeout_ns);
	if (deadline != h->rd_deadline) {
		runtime_conn_set_read_deadline(h->link.rc, deadline);
		h->rd_deadline = deadline;
	}
}

/* The reader's read ends now (-ETIMEDOUT): a deadline already past. An
 * expire would not do: a connection's read looks again under its own
 * deadline. */
void runtime__h2_wake_reader(struct h2_conn *h)
{
	runtime_conn_set_read_deadline(h->link.rc, 1);
	h->rd_deadline = HTTP_DEADLINE_UNKNOWN; /* tell the next one */
}

/* ---------------------------------------------------------------- reading */

enum { GO_ON, GO_IDLE, GO_END };

/* Bytes read, to the session. A failure it does not answer itself is
 * told the peer: a flood (of CONTINUATION frames, of acks not read) with
 * ENHANCE_YOUR_CALM, a bad preface with PROTOCOL_ERROR; the connection
 * then ends. */
static int feed(struct h2_conn *h, const char *p, size_t n)
{
	ssize_t rc = nghttp2_session_mem_recv(h->link.session, (const uint8_t *)p, n);

	if (rc >= 0)
		return GO_ON;
	if (rc == NGHTTP2_ERR_FLOODED || rc == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS)
		runtime__h2_goaway(h, NGHTTP2_ENHANCE_YOUR_CALM);
	else
		runtime__h2_goaway(h, NGHTTP2_PROTOCOL_ERROR);
	return GO_END;
}

/* Nothing runs, nothing to write, no writer: the session may wait alone. */
static bool quiet(const struct h2_conn *h)
{
	return h->live == 0 && !h->link.writer && !h->head_start &&
	       !nghttp2_session_want_write(h->link.session);
}

/* Done: nothing more to write, and the session reads no more (it failed,
 * or ended both ways: the handlers left are cancelled), or a GOAWAY was
 * sent and no handler runs. */
static bool finished(const struct h2_conn *h)
{
	if (h->link.broken)
		return true;
	if (h->link.writer || nghttp2_session_want_write(h->link.session))
		return false;
	return !nghttp2_session_want_read(h->link.session) || (h->goaway && !h->live);
}

/*
 * What a read that brought no bytes means. A timeout is the header or
 * idle timeout's, or a handler's end that woke the reader (then
 * rd_deadline is HTTP_DEADLINE_UNKNOWN: look again) - or a limit not the
 * reader's, past for good: the deadline of the fiber that called
 * runtime_http_serve_conn, the connection's idle timeout. Every read
 * would then fail at once, so the connection ends (an HTTP/1.1 one
 * does too), not read again for ever on a core no other fiber gets.
 */
static int read_failed(struct h2_conn *h, ssize_t n)
{
	if (n == -EAGAIN) /* quiet past release_after, or a drain's wake */
		return quiet(h) && h->may_idle ? GO_IDLE : GO_ON;
	if (n == -ETIMEDOUT) {
		uint64_t now = runtime_now();
		if (h->head_start && now >= after(h->head_start, h->srv->cfg.header_timeout_ns))
			runtime__h2_goaway(h, NGHTTP2_PROTOCOL_ERROR); /* slowloris */
		else if (h->idle == 1 && now >= h->idle_end)
			runtime__h2_goaway(h, NGHTTP2_NO_ERROR);
		else if (h->rd_deadline != HTTP_DEADLINE_UNKNOWN)
			return GO_END;
		return GO_ON;
	}
	if (n == -ESHUTDOWN) {
		runtime__h2_goaway(h, NGHTTP2_NO_ERROR);
		return GO_ON;
	}
	return GO_END; /* the end of stream, or the socket's error */
}

/*
 * Read once, and feed what came. A drain's GOAWAY leaves before anything
 * more is read: the session stops taking streams only once it has sent
 * one, and a stream taken after it - above its last stream id, which the
 * client retries elsewhere - would be served twice. So it is decided
 * only when serve_loop's flush sends it at once, not while the writer is
 * in the middle of a write (a later round decides it).
 */
static int read_some(struct h2_conn *h)
{
	struct http_conn *io = h->io;

	if (!h->goaway && !h->link.flushing && http_stopping(h->srv)) {
		runtime__h2_goaway(h, NGHTTP2_NO_ERROR);
		return GO_ON;
	}
	if (h->goaway && !h->live)
		return GO_END; /* conn_end writes the GOAWAY */
	runtime__h2_set_idle(h);
	h->link.reading = true;
	ssize_t n = runtime_conn_read(h->link.rc, io->in, io->in_size);
	h->link.reading = false;
	if (n <= 0)
		return read_failed(h, n);
	http_count_n(&h->core->bytes_in, (uint64_t)n);
	return feed(h, io->in, (size_t)n);
}

/* Read, feed, let the handlers run, write their answers, until the
 * connection ends or goes idle. */
static int serve_loop(struct h2_conn *h)
{
	for (;;) {
		if (h->spawned) {
			h->spawned = false;
			runtime_yield(); /* the new handlers first: one write for all */
		}
		if (runtime__h2_flush(&h->link) < 0 || finished(h))
			return GO_END;
		int rc = read_some(h);
		if (rc != GO_ON)
			return rc;
	}
}

/* ----------------------------------------------------------------- ending */

/* Wait until every handler and the writer have ended, the handlers
 * cancelled first: they hold the session. In a cleanup with no bound (a
 * handler that ignores its cancel is a bug that must not become a
 * use-after-free), so that a cancel of the reader itself - the runtime's
 * shutdown - does not end the wait. */
static void wait_handlers(struct h2_conn *h)
{
	struct runtime_cleanup cleanup;

	runtime_cleanup_begin(&cleanup, INT64_MAX);
	for (struct h2_stream *s = h->streams; s; s = s->next)
		if (s->fiber)
			runtime_fiber_cancel(s->fiber);
	h->ender = runtime_fiber_self();
	while (h->live || h->link.writer)
		runtime_park(-1);
	h->ender = NULL;
	runtime_cleanup_end(&cleanup);
}

static void conn_end(struct h2_conn *h)
{
	if (!h->link.broken && h->io) { /* the last frames: a GOAWAY, answers */
		runtime__h2_goaway(h, NGHTTP2_NO_ERROR);
		runtime__h2_flush(&h->link);
	}
	h->link.broken = true; /* no writer from now on */
	wait_handlers(h);
	nghttp2_session_del(h->link.session); /* tells no stream of its end */
	while (h->streams)
		runtime__h2_stream_unref(h->streams, true);
	free(h);
}

static void resume(struct runtime_conn *rc, void *arg)
{
	struct h2_conn *h = arg;
	struct http_conn *io = runtime__http_conn_new(h->srv, rc);

	if (!io) {
		h->link.broken = true;
		conn_end(h);
		return;
	}
	runtime__h2_serve(io, h);
	runtime__http_conn_free(io);
}

/* Wait with no fiber and no buffer: true if it does; false to read on
 * (bytes have come). The connection ends if it cannot wait. */
static int go_idle(struct h2_conn *h)
{
	h->io = NULL;
	h->link.out = NULL;
	h->idle = 1; /* runtime_conn_idle marks it so; idle_end and the read
	                deadline stay: a wake by the deadline ends it */
	int rc = runtime_conn_idle(h->link.rc, resume, h);
	if (rc == 0)
		return GO_IDLE;
	return rc == 1 ? GO_ON : GO_END;
}

/*
 * Serve the connection with the buffers io (its unread input at
 * in[in_off..in_len): the preface read as HTTP/1.1) and session h, NULL
 * for a new one, until it ends - then h is freed, and the caller closes
 * the connection - or waits idle with h. io stays the caller's.
 */
void runtime__h2_serve(struct http_conn *io, struct h2_conn *h)
{
	if (!h) {
		if (!(h = conn_new(io->srv, io->rc)))
			return;
		h->may_idle = io->may_idle;
	}
	h->io = io;
	h->link.out = io->out;
	h->link.out_len = 0;
	h->reader = runtime_fiber_self();
	int rc = GO_ON;
	if (io->in_len > io->in_off)
		rc = feed(h, io->in + io->in_off, io->in_len - io->in_off);
	while (rc == GO_ON) {
		rc = serve_loop(h);
		if (rc == GO_IDLE)
			rc = go_idle(h);
		if (rc == GO_ON) {
			h->io = io;
			h->link.out = io->out;
		}
	}
	if (rc == GO_END)
		conn_end(h);
}
