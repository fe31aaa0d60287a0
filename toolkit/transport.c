/* SPDX-License-Identifier: MIT */
/*
 * transport.c - the two built-in transports, and the write-all loop the
 * writer, copy and runtime_write_all share (with runtime_read_exact, the
 * whole-buffer loops of <runtime.h>). A transport over an fd keeps the fd itself in
 * ctx (no storage to allocate or free); whether it is a socket is decided
 * once, by fstat(2), and picks one of two operation tables, so no call
 * pays a test or an -ENOTSOCK round trip. A transport over a receive
 * stream reads through it and peeks at its buffers in place, and writes
 * to its socket directly: writes never went through the stream.
 */
#include "toolkit.h"

#include <limits.h>
#include <string.h>
#include <sys/stat.h>

static int fd_of(void *ctx)
{
	return (int)(intptr_t)ctx;
}

/* ------------------------------------------------------------- sockets */

static ssize_t sock_read(void *ctx, void *buf, size_t len)
{
	return runtime_recv(fd_of(ctx), buf, len, 0);
}

static ssize_t sock_writev(void *ctx, const struct iovec *iov, int iovcnt)
{
	return send_iov(fd_of(ctx), iov, iovcnt);
}

static int sock_close_write(void *ctx)
{
	return runtime_sock_shutdown(fd_of(ctx), SHUT_WR);
}

static int own_fd(void *ctx)
{
	return fd_of(ctx);
}

static const struct runtime_transport_ops sock_ops = {
	.read = sock_read,
	.writev = sock_writev,
	.close_write = sock_close_write,
	.read_fd = own_fd,
	.write_fd = own_fd,
};

/* ------------------------------------------------ pipes, files, others */

static ssize_t file_read(void *ctx, void *buf, size_t len)
{
	return runtime_read(fd_of(ctx), buf, len);
}

static ssize_t file_writev(void *ctx, const struct iovec *iov, int iovcnt)
{
	if (iovcnt == 1)
		return runtime_write(fd_of(ctx), iov[0].iov_base, iov[0].iov_len);
	return runtime_writev(fd_of(ctx), iov, iovcnt);
}

static const struct runtime_transport_ops file_ops = {
	.read = file_read,
	.writev = file_writev,
	.read_fd = own_fd,
	.write_fd = own_fd,
};

int runtime_transport_fd(struct runtime_transport *t, int fd)
{
	struct stat st;

	if (!t)
		return -EINVAL;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -EBADF;
	t->ops = S_ISSOCK(st.st_mode) ? &sock_ops : &file_ops;
	t->ctx = (void *)(intptr_t)fd;
	return 0;
}

/* ------------------------------------------------------ receive streams */

static ssize_t stream_read(void *ctx, void *buf, size_t len)
{
	return runtime_stream_recv(ctx, buf, len);
}

static ssize_t stream_writev(void *ctx, const struct iovec *iov, int iovcnt)
{
	return send_iov(runtime_stream_fd(ctx), iov, iovcnt);
}

/* An error (a stream of another core) reads as "nothing queued": the
 * read that follows reports it. */
static size_t stream_peek(void *ctx, const void **data)
{
	ssize_t n = runtime_stream_peek(ctx, data);
	return n > 0 ? (size_t)n : 0;
}

static void stream_consume(void *ctx, size_t n)
{
	runtime_stream_consume(ctx, n);
}

static int stream_close_write(void *ctx)
{
	return runtime_sock_shutdown(runtime_stream_fd(ctx), SHUT_WR);
}

/* The multishot recv may take the socket's bytes at any time: a splice
 * out of it would race it for them. */
static int no_fd(void *ctx)
{
	(void)ctx;
	return -1;
}

static int stream_write_fd(void *ctx)
{
	return runtime_stream_fd(ctx);
}

static const struct runtime_transport_ops stream_ops = {
	.read = stream_read,
	.writev = stream_writev,
	.peek = stream_peek,
	.consume = stream_consume,
	.close_write = stream_close_write,
	.read_fd = no_fd,
	.write_fd = stream_write_fd,
};

int runtime_transport_stream(struct runtime_transport *t, struct runtime_stream *s)
{
	if (!t || !s)
		return -EINVAL;
	t->ops = &stream_ops;
	t->ctx = s;
	return 0;
}

/* ------------------------------------------------------------ write all */

/* Drop n written bytes from the front of iov; returns the new start. */
static int advance(struct iovec *iov, int iovcnt, int i, size_t n)
{
	while (i < iovcnt && n >= iov[i].iov_len)
		n -= iov[i++].iov_len;
	if (i < iovcnt) {
		iov[i].iov_base = (char *)iov[i].iov_base + n;
		iov[i].iov_len -= n;
	}
	return i;
}

ssize_t runtime__transport_write_all(const struct runtime_transport *t, struct iovec *iov,
                                     int iovcnt, size_t *done)
{
	size_t off = 0;
	ssize_t rc = 0;
	int i = advance(iov, iovcnt, 0, 0); /* skips empty leading iovecs */

	while (i < iovcnt) {
		rc = t->ops->writev(t->ctx, iov + i, MIN(iovcnt - i, IOV_MAX));
		if (rc <= 0) {
			if (rc == 0)
				rc = -EIO; /* a zero-byte write would loop forever */
			break;
		}
		off += (size_t)rc;
		i = advance(iov, iovcnt, i, (size_t)rc);
	}
	if (done)
		*done = off;
	return i == iovcnt ? (ssize_t)off : rc;
}

/* --------------------------------------------------- fd-level loops */

/* runtime_write_all and runtime_send_all: the loop above on a transport
 * of fd's kind, told rather than found by fstat: sends for a socket (a
 * first send that finds no socket goes on as writes), writes otherwise. */
static ssize_t fd_write_all(int fd, const void *buf, size_t len, size_t *done, bool sock)
{
	struct runtime_transport t = { sock ? &sock_ops : &file_ops, (void *)(intptr_t)fd };
	struct iovec iov = { (void *)buf, len };
	size_t off = 0;
	ssize_t rc = runtime__transport_write_all(&t, &iov, 1, &off);

	if (rc == -ENOTSOCK && sock && off == 0)
		return fd_write_all(fd, buf, len, done, false);
	if (done)
		*done = off;
	return rc;
}

ssize_t runtime_write_all(int fd, const void *buf, size_t len, size_t *done)
{
	return fd_write_all(fd, buf, len, done, false);
}

ssize_t runtime_send_all(int fd, const void *buf, size_t len, size_t *done)
{
	return fd_write_all(fd, buf, len, done, true);
}

ssize_t runtime_read_exact(int fd, void *buf, size_t len, size_t *done)
{
	size_t off = 0;
	ssize_t rc = 0;

	while (off < len) {
		rc = runtime_read(fd, (char *)buf + off, len - off);
		if (rc <= 0) {
			if (rc == 0)
				rc = off ? -ENODATA : 0;
			break;
		}
		off += (size_t)rc;
	}
	if (done)
		*done = off;
	return off == len ? (ssize_t)len : rc;
}
