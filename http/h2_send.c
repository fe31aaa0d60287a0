/* SPDX-License-Identifier: MIT */
/*
 * h2_send.c - what the session writes. A flush asks the session for its
 * frames (nghttp2_session_send), which its callbacks copy into the
 * connection's output buffer, and writes the buffer each time it fills
 * and at the end; one fiber flushes at a time (the others' frames go in
 * its next round). A response body's bytes are the handler's until they
 * are framed: the session reads them through the stream's body source,
 * which frames them straight from the handler's buffer into the output
 * (NO_COPY), and wakes the handler when all of them are.
 *
 * Who flushes: the reader, after each read's streams have run; while it
 * waits to read, a writer fiber, started by the first output that comes
 * (runtime__h2_kick) and ended when there is none left - so an idle
 * connection holds no writer.
 */
#include "h2.h"

#include <stdlib.h>

#define FRAME_HEAD 9

/* Frames other than DATA: copied whole, or what fits of one larger than
 * the whole buffer (the session sends the rest next). */
static ssize_t on_send(nghttp2_session *session, const uint8_t *data, size_t len, int flags,
                       void *user)
{
	struct http_conn *io = ((struct h2_conn *)user)->io;
	size_t room = HTTP_OUT_SIZE - io->out_len;

	(void)session;
	(void)flags;
	if (len > room && io->out_len)
		return NGHTTP2_ERR_WOULDBLOCK;
	len = len < room ? len : room;
	memcpy(io->out + io->out_len, data, len);
	io->out_len += len;
	return (ssize_t)len;
}

/* A DATA frame: its head and the handler's bytes (the read callback
 * below made it fit an empty buffer). */
static int on_send_data(nghttp2_session *session, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t len, nghttp2_data_source *source, void *user)
{
	struct http_conn *io = ((struct h2_conn *)user)->io;
	struct h2_stream *s = source->ptr;

	(void)session;
	(void)frame;
	if (FRAME_HEAD + len > HTTP_OUT_SIZE - io->out_len)
		return NGHTTP2_ERR_WOULDBLOCK;
	memcpy(io->out + io->out_len, framehd, FRAME_HEAD);
	if (len) /* an empty one ends the stream */
		memcpy(io->out + io->out_len + FRAME_HEAD, s->out, len);
	io->out_len += FRAME_HEAD + len;
	s->out += len;
	s->out_len -= len;
	if (!s->out_len && s->waiter)
		runtime_fiber_unpark(s->waiter);
	return 0;
}

/* How many of the stream's bytes the next DATA frame takes (the session
 * offers len: the windows and the frame size allow it), or DEFERRED
 * until the handler writes more. */
static ssize_t body_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *source, void *user)
{
	struct h2_stream *s = source->ptr;
	size_t n = s->out_len < len ? s->out_len : len;

	(void)session;
	(void)id;
	(void)buf;
	(void)user;
	if (n > HTTP_OUT_SIZE - FRAME_HEAD)
		n = HTTP_OUT_SIZE - FRAME_HEAD;
	if (!n && !s->out_end) {
		s->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	*flags |= NGHTTP2_DATA_FLAG_NO_COPY;
	if (n == s->out_len && s->out_end)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

nghttp2_data_provider runtime__h2_body_source(struct h2_stream *s)
{
	return (nghttp2_data_provider){ .source.ptr = s, .read_callback = body_read };
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

void runtime__h2_send_callbacks(nghttp2_session_callbacks *cb)
{
	nghttp2_session_callbacks_set_send_callback(cb, on_send);
	nghttp2_session_callbacks_set_send_data_callback(cb, on_send_data);
	nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
}

/* ------------------------------------------------------------------ flush */

static int write_out(struct h2_conn *h)
{
	struct http_conn *io = h->io;
	uint64_t deadline = runtime__http_deadline_in(h->srv->cfg.idle_timeout_ns);

	runtime_conn_set_write_deadline(h->rc, deadline);
	ssize_t rc = runtime_conn_write(h->rc, io->out, io->out_len, NULL);
	io->out_len = 0;
	return rc < 0 ? (int)rc : 0;
}

/* Write every frame the session has, unless another fiber is at it (it
 * takes these too: it asks the session again after each write). 0, or
 * -1 once the connection is broken. */
int runtime__h2_flush(struct h2_conn *h)
{
	if (h->flushing || h->broken)
		return h->broken ? -1 : 0;
	h->flushing = true;
	for (;;) {
		if (nghttp2_session_send(h->session) != 0)
			h->broken = true;
		if (h->broken || !h->io->out_len)
			break;
		if (write_out(h) < 0)
			h->broken = true;
	}
	h->flushing = false;
	return h->broken ? -1 : 0;
}

static void writer(void *arg)
{
	struct h2_conn *h = arg;

	runtime__h2_flush(h);
	h->writer = false;
	if (h->ender)
		runtime_fiber_unpark(h->ender);
}

/* Output has come from a handler: the reader writes it after its round,
 * unless it waits to read - then a writer does, if none runs yet. */
void runtime__h2_kick(struct h2_conn *h)
{
	if (!h->reading || h->flushing || h->writer || h->broken ||
	    !nghttp2_session_want_write(h->session))
		return;
	h->writer = runtime_spawn(h->srv->rt, writer, h) == 0;
}
