/* SPDX-License-Identifier: MIT */
/*
 * copy.c - moving a byte stream from one transport to another until its
 * end, and both ways at once for proxies.
 *
 * Where the source offers a read_fd and the destination a write_fd, bytes
 * go socket -> pipe -> socket with runtime_splice and never enter user
 * space; else through one buffer, a transport read and a complete write at
 * a time (which is also how bytes a source holds itself - a reader's - get
 * out first: it offers no read_fd while it holds any). The kernel runs
 * every io_uring splice in an io-wq worker, and one out of a socket with
 * nothing to read would hold that worker until bytes come: a poll for
 * POLLIN goes first, so an idle copy waits in the ring, not in a thread.
 * A splice the kernel refuses (-EINVAL, an fd that cannot splice) falls
 * back to the buffer path, bytes already in the pipe included.
 *
 * Both ways: each direction runs in a fiber of its own and the caller
 * waits on a condition for the first error or both ends, then cancels
 * what still runs and joins it inside a cleanup (runtime_cleanup_begin),
 * so that even a cancelled caller returns only once both fibers have
 * ended. The state they share is on the heap, counted, for the one case
 * left: a fiber that outlives the cleanup's bound is detached.
 */
#include "toolkit.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#define KNOWN_FLAGS (RUNTIME_COPY_NO_SPLICE | RUNTIME_COPY_KEEP_OPEN)

struct copy {
	const struct runtime_transport *dst, *src;
	size_t chunk;
	size_t done;       /* bytes that reached dst */
	bool no_splice;
	char *buf;         /* the buffer path's, made on first use */
	int pipe[2];       /* the splice path's, -1 until made */
	size_t pipe_size;
};

/* 1: go on, 0: src's end of stream, < 0: -errno. */
enum { MORE = 1, END = 0 };

static int fd_op(const struct runtime_transport *t, int (*op)(void *))
{
	return op ? op(t->ctx) : -1;
}

/* ---------------------------------------------------------- the buffer */

static int write_buf(struct copy *c, const char *buf, size_t len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	size_t w;
	ssize_t rc = runtime__transport_write_all(c->dst, &iov, 1, &w);

	c->done += w;
	return rc < 0 ? (int)rc : MORE;
}

static int buffer_chunk(struct copy *c)
{
	if (!c->buf && !(c->buf = malloc(c->chunk)))
		return -ENOMEM;
	ssize_t n = c->src->ops->read(c->src->ctx, c->buf, c->chunk);
	if (n <= 0)
		return (int)n;
	return write_buf(c, c->buf, (size_t)n);
}

/* ------------------------------------------------------------- splice */

/* A pipe of chunk bytes if the kernel grants it (past
 * /proc/sys/fs/pipe-max-size it does not for the unprivileged: then what
 * it gives). */
static int make_pipe(struct copy *c)
{
	if (pipe2(c->pipe, O_CLOEXEC) < 0) {
		c->pipe[0] = c->pipe[1] = -1;
		return -errno;
	}
	if (c->chunk <= INT_MAX)
		fcntl(c->pipe[1], F_SETPIPE_SZ, (int)c->chunk);
	int size = fcntl(c->pipe[1], F_GETPIPE_SZ);
	c->pipe_size = size > 0 ? (size_t)size : 4096;
	return 0;
}

/* The kernel cannot splice into dst after all: the n bytes in the pipe go
 * through the buffer, and so does the rest of the copy. */
static int pipe_through_buffer(struct copy *c, size_t n)
{
	c->no_splice = true;
	if (!c->buf && !(c->buf = malloc(c->chunk)))
		return -ENOMEM;
	while (n) {
		ssize_t got = runtime_read(c->pipe[0], c->buf, MIN(n, c->chunk));
		if (got <= 0)
			return got ? (int)got : -EIO;
		int rc = write_buf(c, c->buf, (size_t)got);
		if (rc < 0)
			return rc;
		n -= (size_t)got;
	}
	return MORE;
}

static int pipe_out(struct copy *c, int out, size_t n)
{
	while (n) {
		ssize_t m = runtime_splice(c->pipe[0], -1, out, -1, n, SPLICE_F_MOVE);
		if (m == -EINVAL)
			return pipe_through_buffer(c, n);
		if (m <= 0)
			return m ? (int)m : -EIO;
		c->done += (size_t)m;
		n -= (size_t)m;
	}
	return MORE;
}

static int splice_chunk(struct copy *c, int in, int out)
{
	int rc;

	if (c->pipe[0] < 0 && (rc = make_pipe(c)) < 0)
		return rc;
	if ((rc = runtime_poll(in, POLLIN, -1)) < 0)
		return rc;
	ssize_t n = runtime_splice(in, -1, c->pipe[1], -1, c->pipe_size, SPLICE_F_MOVE);
	if (n == -EINVAL) {
		c->no_splice = true; /* nothing moved: the buffer takes over */
		return MORE;
	}
	if (n <= 0)
		return (int)n;
	return pipe_out(c, out, (size_t)n);
}

/* ---------------------------------------------------------- one way */

static int copy_chunk(struct copy *c)
{
	if (!c->no_splice) {
		int in = fd_op(c->src, c->src->ops->read_fd);
		int out = in >= 0 ? fd_op(c->dst, c->dst->ops->write_fd) : -1;
		if (out >= 0)
			return splice_chunk(c, in, out);
	}
	return buffer_chunk(c);
}

static int pass_end(const struct runtime_transport *dst)
{
	if (!dst->ops->close_write)
		return 0;
	int rc = dst->ops->close_write(dst->ctx);
	return rc == -EOPNOTSUPP ? 0 : rc;
}

static bool usable(const struct runtime_transport *t)
{
	return t && t->ops && t->ops->read && t->ops->writev;
}

ssize_t runtime_copy(const struct runtime_transport *dst, const struct runtime_transport *src,
                     size_t chunk, unsigned flags, size_t *done)
{
	struct copy c = { .dst = dst, .src = src, .pipe = { -1, -1 },
	                  .chunk = chunk ? chunk : RUNTIME_COPY_DEFAULT_CHUNK,
	                  .no_splice = flags & RUNTIME_COPY_NO_SPLICE };
	int rc = -EINVAL;

	if (dst && dst->ops && dst->ops->writev && src && src->ops && src->ops->read &&
	    !(flags & ~KNOWN_FLAGS) && c.chunk <= SSIZE_MAX) {
		while ((rc = copy_chunk(&c)) == MORE)
			;
	}
	if (rc == END && !(flags & RUNTIME_COPY_KEEP_OPEN))
		rc = pass_end(dst);
	free(c.buf);
	if (c.pipe[0] >= 0) {
		close(c.pipe[0]); /* a pipe of our own: close(2) never blocks */
		close(c.pipe[1]);
	}
	if (done)
		*done = c.done;
	return rc < 0 ? rc : (ssize_t)c.done;
}

/* ---------------------------------------------------------- both ways */

struct both;

struct direction {
	struct both *both;
	struct runtime_transport dst, src;
	size_t done;
	struct runtime_fiber *fiber;
};

struct both {
	struct runtime_mutex mu;
	struct runtime_cond cv;
	int refs;          /* the caller's and each started fiber's */
	int ended;         /* directions that have ended */
	int err;           /* the first error */
	size_t chunk;
	unsigned flags;
	uint64_t deadline;
	struct direction dir[2];
};

/* All on one core, so the count needs no atomics. */
static void both_put(struct both *b)
{
	if (--b->refs == 0)
		free(b);
}

/* The mutex is never contended (each fiber holds it only between two
 * points with no wait), so the lock succeeds even in a cancelled fiber. */
static void *direction_main(void *arg)
{
	struct direction *d = arg;
	struct both *b = d->both;

	runtime_deadline_set(b->deadline);
	ssize_t rc = runtime_copy(&d->dst, &d->src, b->chunk, b->flags, &d->done);
	runtime_mutex_lock(&b->mu, -1);
	if (rc < 0 && !b->err)
		b->err = (int)rc;
	b->ended++;
	runtime_cond_signal(&b->cv);
	runtime_mutex_unlock(&b->mu);
	both_put(b);
	return NULL;
}

static int start_direction(struct both *b, int i)
{
	struct direction *d = &b->dir[i];
	int rc = runtime_fiber_spawn(runtime_current(), &d->fiber, direction_main, d);

	if (rc == 0)
		b->refs++;
	return rc;
}

/* Until both have ended or one failed; the first error (the caller's own
 * cancel or deadline included), or 0. */
static int wait_directions(struct both *b)
{
	int rc = 0;

	runtime_mutex_lock(&b->mu, -1);
	while (b->ended < 2 && !b->err && rc == 0)
		rc = runtime_cond_wait(&b->cv, &b->mu, -1);
	if (rc < 0 && !b->err)
		b->err = rc;
	rc = b->err;
	runtime_mutex_unlock(&b->mu);
	return rc;
}

/* How long a caller waits for the cancelled fibers to end. They end as
 * soon as their transport call returns, which a cancel makes at once: the
 * bound is for a transport that does not honour cancellation. */
#define REAP_BOUND_NS (10 * 1000 * 1000 * 1000ull)

/*
 * Cancel what still runs and wait for it, inside a cleanup: neither the
 * caller's cancel nor its deadline may keep it from waiting, since the
 * fibers use a and b, which the caller's caller may free as soon as this
 * returns. Past the bound (see above) a fiber is detached and ends on its
 * own (the shared state is counted).
 */
static void reap(struct both *b, int started)
{
	struct runtime_cleanup cl;

	for (int i = 0; i < started; i++)
		runtime_fiber_cancel(b->dir[i].fiber); /* -ESRCH once it has ended */
	runtime_cleanup_begin(&cl, (int64_t)REAP_BOUND_NS);
	for (int i = 0; i < started; i++)
		if (runtime_fiber_join(b->dir[i].fiber, NULL) < 0)
			runtime_fiber_detach(b->dir[i].fiber);
	runtime_cleanup_end(&cl);
}

static struct both *both_new(const struct runtime_transport *a, const struct runtime_transport *b,
                             size_t chunk, unsigned flags)
{
	struct both *bo = calloc(1, sizeof(*bo));

	if (!bo)
		return NULL;
	bo->refs = 1;
	bo->chunk = chunk;
	bo->flags = flags;
	bo->deadline = runtime_deadline_get();
	bo->dir[0] = (struct direction){ .both = bo, .dst = *b, .src = *a };
	bo->dir[1] = (struct direction){ .both = bo, .dst = *a, .src = *b };
	return bo;
}

int runtime_copy_both(const struct runtime_transport *a, const struct runtime_transport *b,
                      size_t chunk, unsigned flags, size_t *a_to_b, size_t *b_to_a)
{
	if (!usable(a) || !usable(b) || (flags & ~KNOWN_FLAGS))
		return -EINVAL;
	if (!runtime_fiber_self())
		return -EPERM;
	struct both *bo = both_new(a, b, chunk, flags);
	if (!bo)
		return -ENOMEM;
	int started = 0, rc = 0;
	while (started < 2 && (rc = start_direction(bo, started)) == 0)
		started++;
	if (started == 2)
		rc = wait_directions(bo);
	else
		bo->err = rc;
	reap(bo, started);
	if (a_to_b)
		*a_to_b = bo->dir[0].done;
	if (b_to_a)
		*b_to_a = bo->dir[1].done;
	both_put(bo);
	return rc;
}
