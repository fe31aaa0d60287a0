/* SPDX-License-Identifier: MIT */
/*
 * bufio.c - the buffered reader and writer over a transport.
 *
 * The reader keeps one buffer of fixed size (the longest line it can put
 * together) in the same allocation as itself. When that buffer is empty
 * and the transport can peek - a receive stream, whose kernel-filled
 * buffers already hold the bytes - a line that lies whole in the peeked
 * region is handed out in place and consumed at the reader's next call:
 * no copy, and the stream's buffer goes back to the kernel then. Only a
 * line split across the stream's buffers (or arriving in pieces) is
 * copied, and only up to its delimiter, so the lines after it stay in
 * place. A transport without peek is read a buffer at a time.
 *
 * The writer gathers small writes and sends them in one writev; a write
 * that does not fit goes out with what is gathered, in one writev,
 * without being copied. Its errors are sticky (as Go's bufio.Writer's):
 * after a failed writev it cannot know what the peer got.
 */
#include "toolkit.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct runtime_reader {
	struct runtime_transport t;
	struct runtime_writer *tied; /* flushed before the reader waits */
	size_t lent;                 /* bytes of t's peek handed out */
	size_t start, end;           /* own bytes: buf[start, end) */
	size_t size;
	bool eof;                    /* t said end of stream: ask no more */
	char buf[];
};

struct runtime_writer {
	struct runtime_transport t;
	size_t used, size;
	int err;                     /* sticky: the first writev error */
	char buf[];
};

/* ------------------------------------------------------ reader helpers */

/* The bytes handed out in place at the previous call are read now. */
static void settle(struct runtime_reader *r)
{
	if (r->lent) {
		r->t.ops->consume(r->t.ctx, r->lent);
		r->lent = 0;
	}
}

static size_t own(const struct runtime_reader *r)
{
	return r->end - r->start;
}

static size_t peek_at(const struct runtime_reader *r, const void **data)
{
	return r->t.ops->peek ? r->t.ops->peek(r->t.ctx, data) : 0;
}

/* One transport read, which may wait: the tied writer goes out first. */
static ssize_t transport_read(struct runtime_reader *r, void *buf, size_t len)
{
	if (r->eof)
		return 0;
	if (r->tied && runtime_writer_buffered(r->tied)) {
		int rc = runtime_writer_flush(r->tied);
		if (rc < 0)
			return rc;
	}
	ssize_t n = r->t.ops->read(r->t.ctx, buf, len);
	if (n == 0)
		r->eof = true;
	return n;
}

/* Copy up to room bytes of the transport's peek into the buffer (with
 * delim >= 0: up to want bytes, or through the first delim if sooner, so
 * that what follows stays in place). 0 if it peeks nothing. */
static size_t take_peeked(struct runtime_reader *r, int delim, size_t want)
{
	const void *p;
	size_t n = peek_at(r, &p);

	if (!n)
		return 0;
	size_t take = MIN(n, r->size - r->end);
	if (delim >= 0) {
		take = MIN(take, want);
		const char *hit = memchr(p, delim, take);
		if (hit)
			take = (size_t)(hit - (const char *)p) + 1;
	}
	memcpy(r->buf + r->end, p, take);
	r->t.ops->consume(r->t.ctx, take);
	r->end += take;
	return take;
}

/*
 * Add bytes to the reader's buffer: from the transport's peek, else one
 * transport read. want (> 0, at most size - own) is how many more the
 * caller needs at most; the buffered bytes move to the front when fewer
 * than that fit behind them. Returns the bytes added, 0 at end of
 * stream, or -errno.
 */
static ssize_t fill(struct runtime_reader *r, int delim, size_t want)
{
	if (r->start == r->end) {
		r->start = r->end = 0;
	} else if (r->size - r->end < want) {
		memmove(r->buf, r->buf + r->start, own(r));
		r->end -= r->start;
		r->start = 0;
	}
	size_t n = take_peeked(r, delim, want);
	if (n)
		return (ssize_t)n;
	ssize_t rc = transport_read(r, r->buf + r->end, r->size - r->end);
	if (rc > 0)
		r->end += (size_t)rc;
	return rc;
}

/* ------------------------------------------------------------- reader */

int runtime_reader_create(struct runtime_reader **out, const struct runtime_transport *t,
                          size_t size)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!t || !t->ops || !t->ops->read || (t->ops->peek && !t->ops->consume) || !size ||
	    size > SSIZE_MAX - sizeof(struct runtime_reader))
		return -EINVAL;
	struct runtime_reader *r = malloc(sizeof(*r) + size);
	if (!r)
		return -ENOMEM;
	*r = (struct runtime_reader){ .t = *t, .size = size };
	*out = r;
	return 0;
}

void runtime_reader_destroy(struct runtime_reader *r)
{
	if (!r)
		return;
	settle(r);
	free(r);
}

void runtime_reader_flush_before_wait(struct runtime_reader *r, struct runtime_writer *w)
{
	if (r)
		r->tied = w;
}

size_t runtime_reader_buffered(const struct runtime_reader *r)
{
	const void *p;

	if (!r)
		return 0;
	return own(r) + peek_at(r, &p) - r->lent;
}

ssize_t runtime_reader_read(struct runtime_reader *r, void *buf, size_t len)
{
	if (!r || (!buf && len))
		return -EINVAL;
	settle(r);
	if (!len)
		return 0;
	if (!own(r)) {
		const void *p;
		size_t n = peek_at(r, &p);
		if (n) {
			n = MIN(n, len);
			memcpy(buf, p, n);
			r->t.ops->consume(r->t.ctx, n);
			return (ssize_t)n;
		}
		if (len >= r->size)
			return transport_read(r, buf, len); /* a copy saved */
		ssize_t rc = fill(r, -1, r->size);
		if (rc <= 0)
			return rc;
	}
	size_t n = MIN(len, own(r));
	memcpy(buf, r->buf + r->start, n);
	r->start += n;
	return (ssize_t)n;
}

ssize_t runtime_reader_read_exact(struct runtime_reader *r, void *buf, size_t len, size_t *done)
{
	size_t off = 0;
	ssize_t rc = 0;

	if (done)
		*done = 0;
	if (!r || (!buf && len))
		return -EINVAL;
	while (!rc && off < len) {
		rc = runtime_reader_read(r, (char *)buf + off, len - off);
		if (rc > 0) {
			off += (size_t)rc;
			rc = 0;
		} else if (rc == 0) {
			rc = off ? -ENODATA : 0;
			break;
		}
	}
	if (done)
		*done = off;
	return off == len ? (ssize_t)len : rc;
}

/* The line, if the transport's peek holds it whole: handed out in place.
 * 0 if it does not (yet), -EMSGSIZE if max bytes there hold no delim. */
static ssize_t line_in_place(struct runtime_reader *r, int delim, size_t max, const char **line)
{
	const void *p;
	size_t n = peek_at(r, &p);

	if (!n)
		return 0;
	const char *hit = memchr(p, delim, MIN(n, max));
	if (!hit)
		return n >= max ? -EMSGSIZE : 0;
	*line = p;
	r->lent = (size_t)(hit - (const char *)p) + 1;
	return (ssize_t)r->lent;
}

/* The line, put together in the reader's buffer. */
static ssize_t line_in_buffer(struct runtime_reader *r, int delim, size_t max, const char **line)
{
	size_t scanned = 0;

	for (;;) {
		size_t have = MIN(own(r), max);
		const char *from = r->buf + r->start;
		const char *hit = memchr(from + scanned, delim, have - scanned);
		if (hit) {
			size_t len = (size_t)(hit - from) + 1;
			*line = from;
			r->start += len;
			return (ssize_t)len;
		}
		if (have == max)
			return -EMSGSIZE;
		scanned = have;
		ssize_t rc = fill(r, delim, max - have);
		if (rc == 0)
			return have ? -ENODATA : 0;
		if (rc < 0)
			return rc;
	}
}

ssize_t runtime_reader_read_until(struct runtime_reader *r, int delim, size_t max,
                                  const char **line)
{
	if (!r || !line || !max || max > r->size || delim < 0 || delim > 255)
		return -EINVAL;
	settle(r);
	if (!own(r)) {
		ssize_t rc = line_in_place(r, delim, max, line);
		if (rc)
			return rc;
	}
	return line_in_buffer(r, delim, max, line);
}

ssize_t runtime_reader_read_line(struct runtime_reader *r, size_t max, const char **line)
{
	return runtime_reader_read_until(r, '\n', max, line);
}

ssize_t runtime_reader_peek(struct runtime_reader *r, size_t n, const char **data)
{
	if (!r || !data || n > r->size)
		return -EINVAL;
	settle(r);
	if (!own(r) && n) {
		const void *p;
		if (peek_at(r, &p) >= n) {
			*data = p;
			return (ssize_t)n;
		}
	}
	while (own(r) < n) {
		ssize_t rc = fill(r, -1, n - own(r));
		if (rc < 0)
			return rc;
		if (rc == 0)
			break;
	}
	*data = r->buf + r->start;
	return (ssize_t)MIN(n, own(r));
}

/* Skip up to n bytes that are there without waiting; how many. */
static size_t skip_buffered(struct runtime_reader *r, size_t n)
{
	size_t k = MIN(n, own(r));
	const void *p;

	r->start += k;
	if (k < n && !own(r)) {
		size_t m = MIN(n - k, peek_at(r, &p));
		if (m)
			r->t.ops->consume(r->t.ctx, m);
		k += m;
	}
	return k;
}

ssize_t runtime_reader_discard(struct runtime_reader *r, size_t n)
{
	size_t done = 0;

	if (!r)
		return -EINVAL;
	settle(r);
	while (done < n) {
		size_t k = skip_buffered(r, n - done);
		done += k;
		if (k)
			continue;
		ssize_t rc = fill(r, -1, r->size);
		if (rc < 0)
			return rc;
		if (rc == 0)
			break;
	}
	return (ssize_t)done;
}

/* -------------------------------------------- the reader as a transport */

static ssize_t view_read(void *ctx, void *buf, size_t len)
{
	return runtime_reader_read(ctx, buf, len);
}

static ssize_t view_writev(void *ctx, const struct iovec *iov, int iovcnt)
{
	struct runtime_reader *r = ctx;

	if (!r->t.ops->writev)
		return -EOPNOTSUPP;
	return r->t.ops->writev(r->t.ctx, iov, iovcnt);
}

static size_t view_peek(void *ctx, const void **data)
{
	struct runtime_reader *r = ctx;

	settle(r);
	if (own(r)) {
		*data = r->buf + r->start;
		return own(r);
	}
	return peek_at(r, data);
}

static void view_consume(void *ctx, size_t n)
{
	struct runtime_reader *r = ctx;

	if (own(r))
		r->start += MIN(n, own(r));
	else
		r->t.ops->consume(r->t.ctx, n);
}

static int view_close_write(void *ctx)
{
	struct runtime_reader *r = ctx;

	return r->t.ops->close_write ? r->t.ops->close_write(r->t.ctx) : -EOPNOTSUPP;
}

static int view_read_fd(void *ctx)
{
	struct runtime_reader *r = ctx;
	const void *p;

	settle(r);
	if (own(r) || peek_at(r, &p) || !r->t.ops->read_fd)
		return -1;
	return r->t.ops->read_fd(r->t.ctx);
}

static int view_write_fd(void *ctx)
{
	struct runtime_reader *r = ctx;

	return r->t.ops->write_fd ? r->t.ops->write_fd(r->t.ctx) : -1;
}

static const struct runtime_transport_ops view_ops = {
	.read = view_read,
	.writev = view_writev,
	.peek = view_peek,
	.consume = view_consume,
	.close_write = view_close_write,
	.read_fd = view_read_fd,
	.write_fd = view_write_fd,
};

int runtime_transport_reader(struct runtime_transport *t, struct runtime_reader *r)
{
	if (!t || !r)
		return -EINVAL;
	t->ops = &view_ops;
	t->ctx = r;
	return 0;
}

/* ------------------------------------------------------------- writer */

int runtime_writer_create(struct runtime_writer **out, const struct runtime_transport *t,
                          size_t size)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!t || !t->ops || !t->ops->writev || !size ||
	    size > SSIZE_MAX - sizeof(struct runtime_writer))
		return -EINVAL;
	struct runtime_writer *w = malloc(sizeof(*w) + size);
	if (!w)
		return -ENOMEM;
	*w = (struct runtime_writer){ .t = *t, .size = size };
	*out = w;
	return 0;
}

void runtime_writer_destroy(struct runtime_writer *w)
{
	free(w);
}

size_t runtime_writer_buffered(const struct runtime_writer *w)
{
	return w ? w->used : 0;
}

/* What is buffered, then len bytes of buf, in one writev loop (no empty
 * iovec is passed on). */
static ssize_t write_out(struct runtime_writer *w, const void *buf, size_t len)
{
	struct iovec iov[2];
	int n = 0;

	if (w->used)
		iov[n++] = (struct iovec){ .iov_base = w->buf, .iov_len = w->used };
	if (len)
		iov[n++] = (struct iovec){ .iov_base = (void *)buf, .iov_len = len };
	ssize_t rc = runtime__transport_write_all(&w->t, iov, n, NULL);

	if (rc < 0) {
		w->err = (int)rc;
		return rc;
	}
	w->used = 0;
	return (ssize_t)len;
}

ssize_t runtime_writer_write(struct runtime_writer *w, const void *buf, size_t len)
{
	if (!w || (!buf && len))
		return -EINVAL;
	if (w->err)
		return w->err;
	if (len <= w->size - w->used) {
		if (len)
			memcpy(w->buf + w->used, buf, len);
		w->used += len;
		return (ssize_t)len;
	}
	return write_out(w, buf, len);
}

int runtime_writer_flush(struct runtime_writer *w)
{
	if (!w)
		return -EINVAL;
	if (w->err)
		return w->err;
	if (!w->used)
		return 0;
	ssize_t rc = write_out(w, NULL, 0);
	return rc < 0 ? (int)rc : 0;
}

/* A text longer than the whole buffer: formatted apart, then written. */
static ssize_t printf_long(struct runtime_writer *w, size_t len, const char *fmt, va_list ap)
{
	char *tmp = malloc(len + 1);

	if (!tmp)
		return -ENOMEM;
	vsnprintf(tmp, len + 1, fmt, ap);
	ssize_t rc = runtime_writer_write(w, tmp, len);
	free(tmp);
	return rc;
}

ssize_t runtime_writer_printf(struct runtime_writer *w, const char *fmt, ...)
{
	va_list ap, again;

	if (!w || !fmt)
		return -EINVAL;
	if (w->err)
		return w->err;
	va_start(ap, fmt);
	va_copy(again, ap);
	size_t room = w->size - w->used;
	int n = vsnprintf(w->buf + w->used, room, fmt, ap);
	ssize_t rc = n;
	if (n < 0)
		rc = -EINVAL;
	else if ((size_t)n < room)
		w->used += (size_t)n;
	else if ((size_t)n >= w->size)
		rc = printf_long(w, (size_t)n, fmt, again);
	else if ((rc = runtime_writer_flush(w)) == 0)
		w->used = (size_t)vsnprintf(w->buf, w->size, fmt, again);
	va_end(again);
	va_end(ap);
	return rc < 0 ? rc : n;
}
