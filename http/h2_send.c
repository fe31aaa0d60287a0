/* SPDX-License-Identifier: MIT */
/*
 * h2_send.c - what a session writes, on either side. A flush asks the
 * session for its frames (nghttp2_session_send), which its callbacks
 * copy into the link's output buffer, and writes the buffer each time it
 * fills and at the end; one fiber flushes at a time (the others' frames
 * go in its next round). A body's bytes stay the fiber's that gave them
 * (a handler, a requester) until they are framed: the session reads them
 * through the stream's body source, which frames them straight from that
 * buffer into the output (NO_COPY), and wakes the fiber when all are.
 *
 * Who flushes: the reader, after each round of input; while it waits to
 * read, the link's writer (runtime__h2_kick starts it).
 */
#include "h2_link.h"
#include "count.h"

#include <stdlib.h>
#include <string.h>

#define FRAME_HEAD 9

/* Frames other than DATA: copied whole, or what fits of one larger than
 * the whole buffer (the session sends the rest next). */
static ssize_t on_send(nghttp2_session *session, const uint8_t *data, size_t len, int flags,
                       void *user)
{
	struct h2_link *l = user;
	size_t room = H2_OUT - l->out_len;

	(void)session;
	(void)flags;
	if (len > room && l->out_len)
		return NGHTTP2_ERR_WOULDBLOCK;
	len = len < room ? len : room;
	memcpy(l->out + l->out_len, data, len);
	l->out_len += len;
	return (ssize_t)len;
}

/* A DATA frame: its head and the fiber's bytes (the read callback below
 * made it fit an empty buffer). A frame put off (WOULDBLOCK) is sent
 * after the buffer is written, and its stream may have been cut
 * meanwhile - its fiber's bytes taken back (o->p NULL): the session then
 * resets the stream instead. */
static int on_send_data(nghttp2_session *session, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t len, nghttp2_data_source *source, void *user)
{
	struct h2_link *l = user;
	struct h2_out *o = source->ptr;

	(void)session;
	(void)frame;
	if (FRAME_HEAD + len > H2_OUT - l->out_len)
		return NGHTTP2_ERR_WOULDBLOCK;
	if (len > o->len)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	memcpy(l->out + l->out_len, framehd, FRAME_HEAD);
	l->out_len += FRAME_HEAD;
	if (len) { /* an empty one ends the stream: o->p may be NULL */
		memcpy(l->out + l->out_len, o->p, len);
		l->out_len += len;
		o->p += len;
		o->len -= len;
	}
	if (!o->len && o->waiter)
		runtime_fiber_unpark(o->waiter);
	return 0;
}

/* How many of the stream's bytes the next DATA frame takes (the session
 * offers len: the windows and the frame size allow it), or DEFERRED
 * until its fiber gives more. */
static ssize_t body_read(nghttp2_session *session, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *source, void *user)
{
	struct h2_out *o = source->ptr;
	size_t n = o->len < len ? o->len : len;

	(void)session;
	(void)id;
	(void)buf;
	(void)user;
	if (n > H2_OUT - FRAME_HEAD)
		n = H2_OUT - FRAME_HEAD;
	if (!n && !o->end) {
		o->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	*flags |= NGHTTP2_DATA_FLAG_NO_COPY;
	if (n == o->len && o->end)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

nghttp2_data_provider runtime__h2_body_source(struct h2_out *o)
{
	return (nghttp2_data_provider){ .source.ptr = o, .read_callback = body_read };
}

void runtime__h2_resume(struct h2_link *l, int32_t id, struct h2_out *o)
{
	if (o->deferred) {
		o->deferred = false;
		nghttp2_session_resume_data(l->session, id);
	}
	runtime__h2_kick(l);
}

void runtime__h2_send_callbacks(nghttp2_session_callbacks *cb)
{
	nghttp2_session_callbacks_set_send_callback(cb, on_send);
	nghttp2_session_callbacks_set_send_data_callback(cb, on_send_data);
}

/* ------------------------------------------------------------------ flush */

static int write_out(struct h2_link *l)
{
	uint64_t now = runtime_now(), ns = l->write_timeout_ns;

	runtime_conn_set_write_deadline(l->rc, ns > UINT64_MAX - now ? UINT64_MAX : now + ns);
	size_t done = 0;
	ssize_t rc = runtime_conn_write(l->rc, l->out, l->out_len, &done);
	if (l->sent && done)
		http_count_n(l->sent, done); /* the core's own counter */
	l->out_len = 0;
	return rc < 0 ? (int)rc : 0;
}

/* Write every frame the session has, unless another fiber is at it (it
 * takes these too: it asks the session again after each write). 0, or
 * -1 once the connection is broken. */
int runtime__h2_flush(struct h2_link *l)
{
	if (l->flushing || l->broken)
		return l->broken ? -1 : 0;
	l->flushing = true;
	for (;;) {
		if (nghttp2_session_send(l->session) != 0)
			l->broken = true;
		if (l->broken || !l->out_len)
			break;
		if (write_out(l) < 0)
			l->broken = true;
	}
	l->flushing = false;
	return l->broken ? -1 : 0;
}

/* Output has come: the reader writes it after its round, unless it waits
 * to read - then the writer does. */
void runtime__h2_kick(struct h2_link *l)
{
	if (!l->reading || l->flushing || l->writer || l->broken ||
	    !nghttp2_session_want_write(l->session))
		return;
	l->start_writer(l);
}
