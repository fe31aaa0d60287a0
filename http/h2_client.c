/* SPDX-License-Identifier: MIT */
/*
 * h2_client.c - the client's HTTP/2 connections (h2_client.h): made from
 * a dialled connection that agreed on h2 (or speaks h2c), found for a
 * request while they have room, run by their reader and writer fibers,
 * and ended by the reader - its streams then fail, and the connection's
 * memory goes once the last stream is let go.
 */
#include "h2_client.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- references */

void runtime__h2_cconn_unref(struct h2_cconn *h)
{
	if (--h->refs == 0)
		free(h);
}

void runtime__h2_cstream_unref(struct h2_cstream *s, bool session)
{
	if (session)
		s->in_session = false;
	else
		s->held = false;
	if (s->in_session || s->held)
		return;
	struct h2_cconn *h = s->conn;
	if (s->prev)
		s->prev->next = s->next;
	else
		h->streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	runtime__h2_held_free(&s->head_bufs);
	free(s->in);
	runtime__h2_free(s);
	runtime__h2_cconn_unref(h);
}

int runtime__h2_cstream_wait(struct h2_cstream *s, uint64_t deadline)
{
	uint64_t now = runtime_now();
	int64_t ns = !deadline ? -1 : deadline > now ? (int64_t)(deadline - now) : 0;

	s->out.waiter = runtime_fiber_self();
	int rc = runtime_park(ns);
	s->out.waiter = NULL;
	return rc;
}

/* ------------------------------------------------------------ the origin */

static void leave_origin(struct h2_cconn *h)
{
	struct http_origin *o = h->origin;

	if (!o)
		return;
	for (struct h2_cconn **p = &o->h2; *p; p = &(*p)->next)
		if (*p == h) {
			*p = h->next;
			break;
		}
	h->origin = NULL;
	h->core->h2_conns--;
}

/* Room for one more stream: what the server allows at once, and the
 * client's own bound. */
static bool has_room(const struct h2_cconn *h)
{
	uint32_t most = nghttp2_session_get_remote_settings(h->link.session,
	                                                    NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
	unsigned own = h->core->cl->cfg.h2_max_streams;

	if (own && own < most)
		most = own;
	return h->active < most;
}

struct h2_cconn *runtime__h2_client_find(struct http_client_core *core, struct http_origin *o)
{
	(void)core;
	for (struct h2_cconn *h = o->h2; h; h = h->next)
		if (!h->closing && !h->link.broken && has_room(h))
			return h;
	return NULL;
}

/* ------------------------------------------------------------- the fibers */

/* Done: the session reads and writes no more, or the connection closes
 * and its streams are over. */
static bool done(const struct h2_cconn *h)
{
	nghttp2_session *s = h->link.session;

	if (h->link.broken)
		return true;
	if (nghttp2_session_want_write(s))
		return false;
	return !nghttp2_session_want_read(s) || (h->closing && !h->active);
}

/* A read that brought nothing: 0 to go on, -1 to end. */
static int quiet(struct h2_cconn *h, ssize_t n)
{
	uint64_t idle = h->core->cl->cfg.idle_timeout_ns;

	if (n != -ETIMEDOUT)
		return -1; /* the end of stream, an error, a cancel */
	if (!h->active && idle && runtime_now() - h->idle_since >= idle) {
		h->closing = true; /* unused for idle_timeout: GOAWAY */
		nghttp2_session_terminate_session(h->link.session, NGHTTP2_NO_ERROR);
	}
	return 0;
}

/* One round: write what there is, read once, feed it. */
static int read_round(struct h2_cconn *h)
{
	uint64_t idle = h->core->cl->cfg.idle_timeout_ns;

	if (runtime__h2_flush(&h->link) < 0 || done(h))
		return -1;
	runtime_conn_set_read_deadline(h->link.rc, h->active || !idle ? 0 : h->idle_since + idle);
	h->link.reading = true;
	ssize_t n = runtime_conn_read(h->link.rc, h->in, sizeof(h->in));
	h->link.reading = false;
	if (n <= 0)
		return quiet(h, n);
	return nghttp2_session_mem_recv(h->link.session, (const uint8_t *)h->in, (size_t)n) < 0 ?
	               -1 : 0;
}

/* Every stream the session still has fails: the connection is gone. A
 * request not answered on a connection that had carried others may be
 * sent again (the server may have closed it idle): -EAGAIN. */
static void fail_streams(struct h2_cconn *h)
{
	for (struct h2_cstream *s = h->streams, *next; s; s = next) {
		next = s->next;
		if (!s->in_session)
			continue;
		if (!s->ended && !s->error)
			s->error = !s->head_done && h->used > 1 ? -EAGAIN : -ECONNRESET;
		if (s->out.waiter)
			runtime_fiber_unpark(s->out.waiter);
		h->active--;
		runtime__h2_cstream_unref(s, true);
	}
}

static void end(struct h2_cconn *h)
{
	struct runtime_cleanup cleanup;

	h->closing = h->ending = true;
	leave_origin(h);
	fail_streams(h);
	runtime_cleanup_begin(&cleanup, INT64_MAX); /* the writer uses the session */
	while (!h->writer_gone) {
		if (h->writer_f)
			runtime_fiber_unpark(h->writer_f);
		runtime_park(1000000);
	}
	runtime_cleanup_end(&cleanup);
	nghttp2_session_del(h->link.session);
	h->link.session = NULL;
	runtime_conn_close(h->link.rc);
	h->link.rc = NULL;
	h->link.broken = true;
	runtime__h2_cconn_unref(h);
}

static void reader(void *arg)
{
	struct h2_cconn *h = arg;

	h->reader_f = runtime_fiber_self();
	while (!h->ending && read_round(h) == 0)
		;
	end(h);
}

static void writer(void *arg)
{
	struct h2_cconn *h = arg;

	h->writer_f = runtime_fiber_self();
	while (!h->ending) {
		if (!h->link.writer) {
			if (runtime_park(-1) == -ECANCELED)
				break; /* the runtime shuts down */
			continue;
		}
		runtime__h2_flush(&h->link);
		h->link.writer = false;
	}
	h->writer_f = NULL;
	h->writer_gone = true;
	if (h->reader_f)
		runtime_fiber_unpark(h->reader_f);
	runtime__h2_cconn_unref(h);
}

static void start_writer(struct h2_link *l)
{
	struct h2_cconn *h = h2_cconn_of(l);

	if (h->writer_gone)
		return;
	l->writer = true;
	if (h->writer_f)
		runtime_fiber_unpark(h->writer_f);
}

/* ------------------------------------------------------------ the session */

static nghttp2_session_callbacks *callbacks;
static nghttp2_option *options;

static void session_kit_make(void)
{
	if (nghttp2_session_callbacks_new(&callbacks) != 0 || nghttp2_option_new(&options) != 0)
		abort(); /* a few bytes at the first connection: no way on */
	runtime__h2_response_callbacks(callbacks);
	runtime__h2_send_callbacks(callbacks);
	nghttp2_option_set_no_auto_window_update(options, 1);
	nghttp2_option_set_no_closed_streams(options, 1);
	nghttp2_option_set_peer_max_concurrent_streams(options, 100);
	nghttp2_option_set_max_outbound_ack(options, 1000);
	nghttp2_option_set_max_continuations(options, 8);
}

static int session_new(struct h2_cconn *h)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const struct http_limits *lim = &h->core->cl->limits;

	pthread_once(&once, session_kit_make);
	if (nghttp2_session_client_new3(&h->link.session, callbacks, h, options,
	                                runtime__h2_mem()) != 0)
		return -ENOMEM;
	nghttp2_settings_entry set[] = {
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2C_STREAM_WINDOW },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)lim->head_max },
	};
	if (nghttp2_submit_settings(h->link.session, NGHTTP2_FLAG_NONE, set, 3) != 0 ||
	    nghttp2_session_set_local_window_size(h->link.session, NGHTTP2_FLAG_NONE, 0,
	                                          H2C_CONN_WINDOW) != 0) {
		nghttp2_session_del(h->link.session);
		return -ENOMEM;
	}
	return 0;
}

static struct h2_cconn *cconn_new(struct http_client_core *core, struct runtime_conn *rc)
{
	struct h2_cconn *h = calloc(1, sizeof(*h));
	uint64_t idle = core->cl->cfg.idle_timeout_ns;

	if (!h)
		return NULL;
	h->core = core;
	h->link.rc = rc;
	h->link.out = h->out;
	h->link.write_timeout_ns = idle ? idle : UINT64_MAX;
	h->link.start_writer = start_writer;
	h->idle_since = runtime_now();
	h->refs = 1; /* the maker's, until it is in its origin */
	if (session_new(h) < 0) {
		free(h);
		return NULL;
	}
	return h;
}

/* Its two fibers, each with a reference. Once the reader runs, it owns
 * the connection: should the writer not start, it ends it at once. */
static int start_fibers(struct h2_cconn *h)
{
	struct runtime *rt = runtime_current();

	if (runtime_spawn(rt, reader, h) < 0)
		return -ENOMEM;
	h->refs++;
	if (runtime_spawn(rt, writer, h) < 0) {
		h->writer_gone = h->ending = true;
		return -EAGAIN;
	}
	h->refs++;
	return 0;
}

int runtime__h2_client_adopt(struct http_client_core *core, struct http_origin *o,
                             struct http_cconn *c, struct h2_cconn **out)
{
	struct h2_cconn *h = cconn_new(core, c->rc);
	int rc = h ? start_fibers(h) : -ENOMEM;

	if (rc == -ENOMEM && h) { /* nothing runs: all here */
		nghttp2_session_del(h->link.session);
		free(h);
	}
	if (rc != -ENOMEM)
		c->rc = NULL; /* the HTTP/2 connection's now */
	runtime__http_cconn_close(c);
	if (rc < 0) {
		if (rc == -EAGAIN)
			runtime__h2_cconn_unref(h);
		return -ENOMEM;
	}
	h->origin = o;
	h->next = o->h2;
	o->h2 = h;
	core->h2_conns++;
	runtime__h2_cconn_unref(h); /* the maker's: its fibers hold it */
	*out = h;
	return 0;
}

/* ------------------------------------------------------------------ close */

void runtime__h2_client_close_all(struct http_client_core *core)
{
	struct runtime_cleanup cleanup;

	for (unsigned b = 0; b < HTTP_ORIGIN_BUCKETS; b++)
		for (struct http_origin *o = core->buckets[b]; o; o = o->next)
			for (struct h2_cconn *h = o->h2; h; h = h->next) {
				h->closing = h->ending = true;
				/* a deadline past wakes its reader (an expire would
				 * not: the read looks again under the connection's) */
				runtime_conn_set_read_deadline(h->link.rc, 1);
			}
	runtime_cleanup_begin(&cleanup, 10 * 1000 * 1000000ll);
	while (core->h2_conns && runtime_sleep(1000000) == 0)
		;
	runtime_cleanup_end(&cleanup);
}
