/* SPDX-License-Identifier: MIT */
/*
 * conn.c - a connection: a connected socket, read through a receive
 * stream (or a plain recv per read), with read and write deadlines that
 * any fiber of its core may set or move while another is blocked on it,
 * as Go's SetReadDeadline and SetWriteDeadline do.
 *
 * A read or write runs under the earlier of the caller's own deadline and
 * the connection's, and remembers who is blocked in it. Moving the
 * connection's deadline earlier than what that call runs under expires it
 * (runtime_fiber_expire: -ETIMEDOUT, not sticky), and the call then looks
 * again: past the deadline it fails with -ETIMEDOUT, else it waits on
 * under the new one. Moving it later needs nothing: the call ends at the
 * old time and waits on. Nothing read is ever lost: an operation that
 * completed as it was expired returns its bytes.
 *
 * A connection marked idle (between requests) of a draining runtime
 * reads -ESHUTDOWN instead of waiting, and runtime_serve's drain expires
 * one that waits already, so that keep-alive connections close at once
 * while those in the middle of a request finish it.
 *
 * A layer (struct runtime_conn_layer: TLS) may sit between the public
 * calls and the socket: the calls then go through its operations, and it
 * does its own socket I/O with runtime_conn_raw_read, _send, _peek and
 * _consume, under the same deadlines.
 */
#include "toolkit.h"

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

static uint64_t earlier(uint64_t a, uint64_t b) /* 0: none */
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a < b ? a : b;
}

/* now + ns, saturating (0 would mean none). */
static uint64_t deadline_after(uint64_t ns)
{
	uint64_t now = runtime_now();
	return ns > UINT64_MAX - now ? UINT64_MAX : now + ns;
}

/* ------------------------------------------------------------ one call */

/* What a side's call runs under, of the connection's limits (0: none):
 * its deadline, and the idle timeout's. */
static inline uint64_t side_limit(const struct runtime_conn *c, const struct side *s)
{
	return earlier(s->deadline, c->idle_until);
}

/*
 * A call of one side: who makes it, and the limit it runs under (0:
 * none), which the runtime's call takes as its own deadline
 * (runtime/layer.h), the fiber's left alone. That limit is not kept: a
 * limit only moves later while the call waits (bytes moved on the other
 * side), but by a setter, which compares with the limit before its change
 * (side_recheck). So a setter wakes the call whenever the limit comes
 * earlier than before, and sometimes when it was already earlier than
 * the call's: that call looks again, as one whose fiber deadline came
 * first does.
 */
static inline uint64_t side_enter(const struct runtime_conn *c, struct side *s,
                                  struct runtime_fiber *self)
{
	s->fiber = self;
	return side_limit(c, s);
}

static inline void side_leave(struct side *s)
{
	s->fiber = NULL;
}

/* A call of this side ended with -ETIMEDOUT: is a limit really past (the
 * caller's own deadline, or one of the connection's), or was it moved
 * (go on)? */
static bool side_expired(const struct runtime_conn *c, const struct side *s)
{
	uint64_t d = earlier(runtime_deadline_get(), side_limit(c, s));
	return d && runtime_now() >= d;
}

/* side_recheck's call: s has one blocked in it. */
static void side_expire_earlier(const struct runtime_conn *c, const struct side *s,
                                uint64_t before)
{
	uint64_t limit = side_limit(c, s);

	if (limit && (!before || limit < before))
		runtime_fiber_expire(s->fiber);
}

/* A setter moved s's limit from before (0: none): expire a call blocked
 * under a later one. Inlined: most often the caller is the one that reads
 * or writes next, and none is blocked. */
static inline void side_recheck(const struct runtime_conn *c, const struct side *s,
                                uint64_t before)
{
	if (__builtin_expect(s->fiber != NULL, 0))
		side_expire_earlier(c, s, before);
}

/* Bytes moved (n > 0, returned): the idle timeout starts again (later:
 * nobody to wake). */
static __attribute__((noinline)) ssize_t touch_idle(struct runtime_conn *c, ssize_t n)
{
	c->idle_until = deadline_after(c->idle_ns);
	return n;
}

/* Inlined: without an idle timeout, a test. The clock read is out of
 * line, and gives n back, so the hot calls keep neither a frame for it
 * nor n across it. */
static inline ssize_t touch(struct runtime_conn *c, ssize_t n)
{
	return __builtin_expect(c->idle_ns != 0, 0) ? touch_idle(c, n) : n;
}

/* -------------------------------------------------------------- reading */

/* A read or write refused (its arguments, its core, busy): n (-errno),
 * *done (if asked) 0. Out of line, cold: the hot calls load no error code
 * on their way, they branch away to it. */
static __attribute__((noinline, cold)) ssize_t refused(size_t *done, ssize_t n)
{
	if (done)
		*done = 0;
	return n;
}

/* The caller runs on c's core. c->core is never negative (unsigned): a
 * match also tells the compiler the core's pointer is there, and
 * runtime_fiber_self then tests it no more. */
static inline bool on_core(const struct runtime_conn *c)
{
	return runtime_core_index() == c->core;
}

/* The caller's core is c's, or -errno. */
static int mine(const struct runtime_conn *c)
{
	if (!c)
		return -EINVAL;
	return runtime_core_index() == c->core ? 0 : -EPERM;
}

/* Another fiber reads (or writes) the connection. With a layer it is the
 * layer's to say: its socket I/O is not its callers' (a TLS reader sends
 * the alert its read made while the writer writes). */
static inline bool busy(const struct runtime_conn *c, const struct side *s)
{
	return !c->layer && s->fiber;
}

/* Bytes of the peer's held in the layer, if there is one. */
static inline bool layer_pending(const struct runtime_conn *c)
{
	return c->layer && c->layer->pending(c, c->layer_state);
}

/* Bytes of the peer's wait to be read, in the layer or the socket (a
 * drain's rare path: a syscall without a stream). */
static bool bytes_waiting(const struct runtime_conn *c)
{
	int n = 0;

	if (layer_pending(c))
		return true;
	if (c->rx)
		return runtime_stream_buffered(c->rx) > 0;
	return ioctl(c->fd, FIONREAD, &n) == 0 && n > 0;
}

static __attribute__((noinline)) bool draining(const struct runtime_conn *c)
{
	return runtime_draining(runtime_current()) && !bytes_waiting(c);
}

/* An idle connection's read: does the drain end it? Inlined: one whose
 * server watches for the drain asks nothing of the runtime. */
static inline bool drain_watched(const struct runtime_conn *c)
{
	return c->server && runtime__serve_drain_watched(c);
}

static inline bool drain_ends(const struct runtime_conn *c)
{
	return !drain_watched(c) && draining(c);
}

/* Inlined: a read of a busy connection asks nothing at all. */
static inline bool idle_and_draining(const struct runtime_conn *c)
{
	return c->idle && drain_ends(c);
}

/* The first read after runtime_conn_idle's wait ended other than by bytes
 * says why, once. */
static int woken(struct runtime_conn *c)
{
	int why = c->woke;

	c->woke = 0;
	return why;
}

/* An idle read of a connection whose server releases: the sweep watches
 * it (toolkit.h's struct release_watch). */
static inline void watch_begin(struct runtime_conn *c)
{
	c->watch.reading = true;
	c->watch.seen = false;
	if (!c->watch.linked)
		runtime__serve_watch(c);
}

static inline void watch_end(struct runtime_conn *c)
{
	c->watch.reading = false;
	c->watch.released = false;
}

/* A plain recv (RUNTIME_CONN_PLAIN_RECV, or no memory for a stream).
 * Out of line: inlined, its request on the stack would give the stream
 * read a frame it does not need. */
static __attribute__((noinline)) ssize_t recv_plain(const struct runtime_conn *c, void *buf,
                                                    size_t len, uint64_t limit)
{
	return runtime__recv_by(c->fd, buf, len, 0, limit);
}

/* One recv of the stream, or of the socket, under the read side's
 * limit. */
static inline ssize_t recv_once(struct runtime_conn *c, void *buf, size_t len,
                                struct runtime_fiber *self)
{
	uint64_t limit = side_enter(c, &c->rd, self);
	ssize_t n = c->rx ? runtime__stream_recv_by(c->rx, buf, len, limit)
	                  : recv_plain(c, buf, len, limit);

	side_leave(&c->rd);
	return n;
}

/* A read's end: the watch's, the idle timeout's. */
static inline ssize_t read_done(struct runtime_conn *c, bool watched, ssize_t n)
{
	if (watched)
		watch_end(c);
	return n > 0 ? touch(c, n) : n;
}

/*
 * A read whose recv ended -ETIMEDOUT (n): released (-EAGAIN), past a
 * limit (-ETIMEDOUT), or expired because a limit moved or a drain came
 * (look again, recv again).
 */
static __attribute__((noinline)) ssize_t
read_loop(struct runtime_conn *c, void *buf, size_t len, bool watched, ssize_t n)
{
	for (;;) {
		if (n == -ETIMEDOUT && watched && c->watch.released) {
			watch_end(c);
			return -EAGAIN; /* quiet past release_after */
		}
		if (n == -ETIMEDOUT && side_expired(c, &c->rd))
			break;
		if (idle_and_draining(c)) {
			n = -ESHUTDOWN;
			break;
		}
		n = recv_once(c, buf, len, runtime_fiber_self());
		if (n != -ETIMEDOUT)
			break;
	}
	return read_done(c, watched, n);
}

/* A read's recv and end, watched or not (a constant where inlined: each
 * of raw_read's two ways has its own copy, with no flag kept for it). */
static inline __attribute__((always_inline)) ssize_t
read_rest(struct runtime_conn *c, void *buf, size_t len, struct runtime_fiber *self,
          bool watched)
{
	ssize_t n = recv_once(c, buf, len, self);

	if (__builtin_expect(n == -ETIMEDOUT, 0))
		return read_loop(c, buf, len, watched, n);
	return read_done(c, watched, n);
}

/* An idle read that may call out before its recv: the drain asked of
 * the runtime (no watcher), or the watch's first link. */
static __attribute__((noinline)) ssize_t idle_read(struct runtime_conn *c, void *buf, size_t len)
{
	if (!c->watch.on)
		return drain_ends(c) ? -ESHUTDOWN : read_rest(c, buf, len, runtime_fiber_self(), false);
	watch_begin(c);
	if (drain_ends(c))
		return read_done(c, true, -ESHUTDOWN);
	return read_rest(c, buf, len, runtime_fiber_self(), true);
}

/*
 * Inlined into runtime_conn_read: a read is a stream read and little
 * more (the echo demo's path); read_loop takes one that timed out. A busy
 * read, an idle one and a watched idle one each have their own way, so
 * that none tests or keeps a flag the others set; idle_read takes an
 * idle one that would call out before its recv, so that the hot ways
 * keep nothing across a call but what the recv needs.
 */
static inline __attribute__((always_inline)) ssize_t
raw_read(struct runtime_conn *c, void *buf, size_t len)
{
	if (__builtin_expect(c->woke != 0, 0)) /* why runtime_conn_idle's wait ended */
		return woken(c);
	if (!c->idle)
		return read_rest(c, buf, len, runtime_fiber_self(), false);
	if (__builtin_expect(!drain_watched(c), 0))
		return idle_read(c, buf, len);
	if (!c->watch.on)
		return read_rest(c, buf, len, runtime_fiber_self(), false);
	if (__builtin_expect(!c->watch.linked, 0))
		return idle_read(c, buf, len);
	watch_begin(c); /* linked: no call */
	return read_rest(c, buf, len, runtime_fiber_self(), true);
}

ssize_t runtime_conn_raw_read(struct runtime_conn *c, void *buf, size_t len)
{
	if (!c || (!buf && len))
		return -EINVAL;
	if (!on_core(c))
		return -EPERM;
	return raw_read(c, buf, len);
}

ssize_t runtime_conn_read(struct runtime_conn *c, void *buf, size_t len)
{
	if (!c || (!buf && __builtin_expect(len != 0, 0)))
		return refused(NULL, -EINVAL);
	if (!on_core(c) || busy(c, &c->rd))
		return refused(NULL, -EPERM);
	if (__builtin_expect(!c->layer, 1))
		return raw_read(c, buf, len);
	if (idle_and_draining(c))
		return -ESHUTDOWN;
	ssize_t n = c->layer->read(c, c->layer_state, buf, len);
	if (__builtin_expect(c->close_watched, 0) && layer_pending(c)) {
		runtime__stream_watch_stop(c->rx); /* see cancel_on_close */
		c->close_watched = false;
	}
	return n;
}

/* -------------------------------------------------------------- writing */

/* One send (iovcnt 1) or sendmsg under the write side's limit, once. */
static inline __attribute__((always_inline)) ssize_t
send_one(struct runtime_conn *c, const struct iovec *iov, int iovcnt, struct runtime_fiber *self)
{
	uint64_t limit = side_enter(c, &c->wr, self);
	ssize_t n = runtime__send_by(c->fd, iov, iovcnt, MSG_NOSIGNAL, limit);

	side_leave(&c->wr);
	return n;
}

/* A send that ended -ETIMEDOUT: past a limit (the caller's own deadline,
 * or the connection's), or expired because one moved (send again). Out
 * of line: the hot write keeps no loop. */
static __attribute__((noinline)) ssize_t
send_again(struct runtime_conn *c, const struct iovec *iov, int iovcnt)
{
	ssize_t n = -ETIMEDOUT;

	while (n == -ETIMEDOUT && !side_expired(c, &c->wr))
		n = send_one(c, iov, iovcnt, runtime_fiber_self());
	return n;
}

/* One send (iovcnt 1) or sendmsg under the write deadline: bytes written
 * (> 0, may be short) or -errno (runtime_conn_write has its own copy). */
static inline ssize_t send_once(struct runtime_conn *c, const struct iovec *iov, int iovcnt)
{
	ssize_t n = send_one(c, iov, iovcnt, runtime_fiber_self());

	if (__builtin_expect(n == -ETIMEDOUT, 0))
		n = send_again(c, iov, iovcnt);
	return n > 0 ? touch(c, n) : n;
}

/* send_again of one buffer, its iovec made here: the hot write's stays
 * in registers, never stored for a call that almost never comes. */
static __attribute__((noinline)) ssize_t send_buf_again(struct runtime_conn *c, const void *buf,
                                                        size_t len)
{
	struct iovec iov = { (void *)buf, len };
	return send_again(c, &iov, 1);
}

ssize_t runtime_conn_raw_send(struct runtime_conn *c, const struct iovec *iov, int iovcnt)
{
	if (!c || (!iov && iovcnt))
		return -EINVAL;
	if (!on_core(c))
		return -EPERM;
	return send_once(c, iov, iovcnt);
}

/* One write, of the layer or the socket. */
static inline ssize_t write_once(struct runtime_conn *c, const struct iovec *iov, int iovcnt)
{
	return c->layer ? c->layer->writev(c, c->layer_state, iov, iovcnt) : send_once(c, iov, iovcnt);
}

static ssize_t conn_writev(void *ctx, const struct iovec *iov, int iovcnt)
{
	struct runtime_conn *c = ctx;

	if (!on_core(c) || busy(c, &c->wr))
		return -EPERM;
	return write_once(c, iov, iovcnt);
}

/* Write buf[off..len), off bytes written already: a write through a
 * layer, or what a short send left. */
static ssize_t write_from(struct runtime_conn *c, const char *buf, size_t len, size_t off,
                          size_t *done)
{
	ssize_t n = 0;

	while (n >= 0 && off < len) {
		struct iovec iov = { (char *)buf + off, len - off };
		n = write_once(c, &iov, 1);
		if (n > 0)
			off += (size_t)n;
		else if (n == 0)
			n = -EIO; /* a send that took nothing would loop forever */
	}
	if (done)
		*done = off;
	return off == len ? (ssize_t)len : n;
}

/* Without a layer, one send most often takes it all: that send is made
 * here, send_once written out with the fiber asked beside the core check
 * and the iovec in registers, and write_from loops only over what a
 * short one left. */
ssize_t runtime_conn_write(struct runtime_conn *c, const void *buf, size_t len, size_t *done)
{
	if (!c || (!buf && __builtin_expect(len != 0, 0)))
		return refused(done, -EINVAL);
	if (!on_core(c) || busy(c, &c->wr))
		return refused(done, -EPERM);
	if (__builtin_expect(c->layer || !len, 0))
		return write_from(c, buf, len, 0, done);

	struct iovec iov = { (void *)buf, len };
	ssize_t n = send_one(c, &iov, 1, runtime_fiber_self());

	if (__builtin_expect(n == -ETIMEDOUT, 0))
		n = send_buf_again(c, buf, len);
	if (n > 0)
		n = touch(c, n);
	if (__builtin_expect(n > 0 && (size_t)n < len, 0))
		return write_from(c, buf, len, (size_t)n, done);
	if (n == 0)
		n = -EIO;
	if (done)
		*done = n > 0 ? (size_t)n : 0;
	return n;
}

int runtime_conn_close_write(struct runtime_conn *c)
{
	int rc = mine(c);

	if (rc < 0)
		return rc;
	return c->layer ? c->layer->close_write(c, c->layer_state) : runtime_sock_shutdown(c->fd, SHUT_WR);
}

/* ------------------------------------------------------------ transport */

static ssize_t conn_read(void *ctx, void *buf, size_t len)
{
	return runtime_conn_read(ctx, buf, len);
}

/* The stream's bytes in place; none through a layer (they are not the
 * plaintext). */
static size_t conn_peek(void *ctx, const void **data)
{
	struct runtime_conn *c = ctx;
	ssize_t n = c->rx && !c->layer ? runtime_stream_peek(c->rx, data) : 0;
	return n > 0 ? (size_t)n : 0;
}

static void conn_consume(void *ctx, size_t n)
{
	struct runtime_conn *c = ctx;
	runtime_stream_consume(c->rx, n);
}

static int conn_close_write(void *ctx)
{
	return runtime_conn_close_write(ctx);
}

/* No fd to splice: a splice would run under the copying fiber's deadline
 * alone, and the connection's must hold for copies too. */
static const struct runtime_transport_ops conn_ops = {
	.read = conn_read,
	.writev = conn_writev,
	.peek = conn_peek,
	.consume = conn_consume,
	.close_write = conn_close_write,
};

/* ------------------------------------------------------------- layers */

int runtime_conn_set_layer(struct runtime_conn *c, const struct runtime_conn_layer *layer,
                           void *state)
{
	int rc = mine(c);

	if (!c || !layer || !layer->read || !layer->writev || !layer->close_write ||
	    !layer->pending || !layer->close)
		return -EINVAL;
	if (rc < 0)
		return rc;
	if (c->rd.fiber || c->wr.fiber || c->waiting)
		return -EBUSY;
	if (c->layer)
		return -EALREADY;
	c->layer = layer;
	c->layer_state = state;
	return 0;
}

void *runtime_conn_layer(const struct runtime_conn *c, const struct runtime_conn_layer *layer)
{
	if (!c || !c->layer || (layer && c->layer != layer))
		return NULL;
	return c->layer_state;
}

ssize_t runtime_conn_raw_peek(struct runtime_conn *c, const void **data)
{
	int rc = mine(c);

	if (!data)
		return -EINVAL;
	*data = NULL;
	if (rc < 0)
		return rc;
	return c->rx ? runtime_stream_peek(c->rx, data) : 0;
}

int runtime_conn_raw_consume(struct runtime_conn *c, size_t n)
{
	int rc = mine(c);

	if (rc < 0)
		return rc;
	if (!c->rx)
		return n ? -EINVAL : 0;
	if ((rc = runtime_stream_consume(c->rx, n)) == 0 && n)
		touch(c, 1); /* bytes moved: the idle timeout starts again */
	return rc;
}

/* ---------------------------------------------------------------- the rest */

int runtime_conn_open(struct runtime_conn **out, int fd, unsigned flags)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (fd < 0)
		return -EBADF;
	if (flags & ~RUNTIME_CONN_PLAIN_RECV)
		return -EINVAL;
	if (runtime_core_index() < 0 || !runtime_fiber_self())
		return -EPERM;
	struct runtime_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = fd;
	c->core = (uint16_t)runtime_core_index(); /* below RUNTIME_MAX_CORES */
	if (!(flags & RUNTIME_CONN_PLAIN_RECV) && runtime_stream_open(&c->rx, fd) < 0)
		c->rx = NULL; /* out of memory: plain reads work as well */
	c->transport = (struct runtime_transport){ .ops = &conn_ops, .ctx = c };
	*out = c;
	return 0;
}

/* A peer's address longer than the space in place (AF_UNIX) is a malloc'ed
 * copy, whose address the space holds; NULL if there is none. */
static struct sockaddr *peer_big(const struct runtime_conn *c)
{
	struct sockaddr *big = NULL;

	if (c->peer_len > sizeof(c->peer))
		memcpy(&big, c->peer.big, sizeof(big));
	return big;
}

int runtime_conn_close(struct runtime_conn *c)
{
	if (!c)
		return 0;
	if (mine(c) < 0)
		return -EPERM;
	if (c->rd.fiber || c->wr.fiber || c->waiting)
		return -EBUSY;
	if (c->layer && c->layer->close(c, c->layer_state) < 0)
		return -EBUSY;
	runtime_stream_close(c->rx);
	int rc = runtime_close(c->fd);
	free(peer_big(c));
	free(c);
	return rc;
}

int runtime_conn_fd(const struct runtime_conn *c)
{
	return c ? c->fd : -EINVAL;
}

bool runtime__conn_peer_set(struct runtime_conn *c, const void *addr, socklen_t len)
{
	void *big;

	if (len == 0 || len > UINT8_MAX)
		return false;
	if (len <= sizeof(c->peer)) {
		memcpy(&c->peer, addr, len);
	} else {
		if (!(big = malloc(len)))
			return false;
		memcpy(big, addr, len);
		memcpy(c->peer.big, &big, sizeof(big));
	}
	c->peer_len = (uint8_t)len;
	return true;
}

const struct sockaddr *runtime_conn_peer(struct runtime_conn *c, socklen_t *len)
{
	struct sockaddr_storage ss;
	socklen_t n = sizeof(ss);

	if (!c)
		return NULL;
	if (!c->peer_len && getpeername(c->fd, (struct sockaddr *)&ss, &n) == 0)
		runtime__conn_peer_set(c, &ss, n);
	if (len)
		*len = c->peer_len;
	if (!c->peer_len)
		return NULL;
	return c->peer_len > sizeof(c->peer) ? peer_big(c) : &c->peer.sa;
}

const struct runtime_transport *runtime_conn_transport(struct runtime_conn *c)
{
	return c ? &c->transport : NULL;
}

int runtime_conn_set_read_deadline(struct runtime_conn *c, uint64_t deadline_ns)
{
	int rc = mine(c);

	if (rc == 0) {
		uint64_t before = side_limit(c, &c->rd);
		c->rd.deadline = deadline_ns;
		side_recheck(c, &c->rd, before);
	}
	return rc;
}

int runtime_conn_set_write_deadline(struct runtime_conn *c, uint64_t deadline_ns)
{
	int rc = mine(c);

	if (rc == 0) {
		uint64_t before = side_limit(c, &c->wr);
		c->wr.deadline = deadline_ns;
		side_recheck(c, &c->wr, before);
	}
	return rc;
}

int runtime_conn_set_idle_timeout(struct runtime_conn *c, uint64_t timeout_ns)
{
	int rc = mine(c);

	if (rc == 0) {
		uint64_t rd_before = side_limit(c, &c->rd), wr_before = side_limit(c, &c->wr);
		c->idle_ns = timeout_ns;
		c->idle_until = timeout_ns ? deadline_after(timeout_ns) : 0;
		side_recheck(c, &c->rd, rd_before);
		side_recheck(c, &c->wr, wr_before);
	}
	return rc;
}

/* ------------------------------------------------- waiting with no fiber */

static void resume(struct runtime_conn *c, int why)
{
	c->waiting = false;
	c->wake = false;
	c->woke = why;
	if (c->server)
		runtime__serve_resume(c);
	else
		c->resume_fn(c, c->resume_arg);
}

static void stream_woke(void *arg, int why)
{
	resume(arg, why);
}

/* No stream to wait on (or bytes in the layer): a fiber waits for
 * readiness under the read side's limits, as a read would, and a drain
 * expires it as it would a read (runtime_serve's close_idle). */
static void poll_then_resume(void *arg)
{
	struct runtime_conn *c = arg;
	int rc = 0;

	while (!layer_pending(c)) {
		if (idle_and_draining(c) || c->wake) {
			rc = c->wake ? -EINTR : -ESHUTDOWN;
			break;
		}
		uint64_t limit = side_enter(c, &c->rd, runtime_fiber_self());
		rc = runtime__poll_by(c->fd, POLLIN, limit);
		side_leave(&c->rd);
		if (rc != -ETIMEDOUT || side_expired(c, &c->rd))
			break;
	}
	resume(c, rc > 0 ? 0 : rc);
}

int runtime_conn_idle(struct runtime_conn *c, runtime_serve_fn *fn, void *arg)
{
	int rc = mine(c);

	if (rc < 0)
		return rc;
	if (!fn && !c->server)
		return -EINVAL;
	if (c->rd.fiber || c->wr.fiber || c->waiting)
		return -EBUSY;
	c->resume_fn = fn;
	c->resume_arg = arg;
	c->idle = true;
	c->waiting = true;
	c->polled = !c->rx || layer_pending(c);
	if (!c->polled)
		rc = runtime_stream_idle(c->rx, side_limit(c, &c->rd), stream_woke, c);
	else
		rc = runtime_spawn(runtime_current(), poll_then_resume, c);
	if (rc != 0)
		c->waiting = false; /* 1: a read would not wait, read on */
	else if (c->layer)
		c->layer->idle(c, c->layer_state);
	return rc;
}

int runtime_conn_wake(struct runtime_conn *c)
{
	int rc = mine(c);

	if (rc < 0)
		return rc;
	if (!c->waiting || c->wake)
		return -EALREADY;
	if (!c->polled)
		return runtime__stream_idle_wake(c->rx, -EINTR);
	if (c->rd.fiber) /* poll_then_resume polls */
		runtime_fiber_expire(c->rd.fiber);
	c->wake = true; /* it looks before each poll */
	return 0;
}

/* ------------------------------------------------ moving to a successor */

/* The socket has gone to the successor: c's fd is made to name an
 * unconnected socket, so that nothing this process still does with c (a
 * read, a linger's shutdown) can touch the connection; the close closes
 * that one. */
static void leave_shell(struct runtime_conn *c)
{
	int shell = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (shell >= 0) {
		dup3(shell, c->fd, O_CLOEXEC);
		close(shell);
	}
}

int runtime_conn_handover(struct runtime_conn *c)
{
	int rc = mine(c), sock = runtime__handover_target();

	if (rc < 0)
		return rc;
	if (sock < 0 || !c->server)
		return -ENOTCONN; /* no successor takes connections now */
	if (c->layer)
		return -EPROTONOSUPPORT; /* its state (TLS) is this process's */
	if (c->rd.fiber || c->wr.fiber || c->waiting)
		return -EBUSY;
	if (c->rx && (rc = runtime_stream_stop(c->rx)) != 0) {
		if (rc == 1 && !runtime_stream_buffered(c->rx))
			return -ECONNRESET; /* the peer's end came: nothing to move */
		return rc; /* 1: bytes came meanwhile: serve them */
	}
	if ((rc = runtime__serve_hand_over(c, sock)) < 0)
		return rc;
	leave_shell(c);
	return 0;
}

/* Lingering close: after the last reply, the peer must be able to read
 * it - a close with its input unread would make the kernel send a reset,
 * which can destroy the reply in flight. */
int runtime_conn_finish(struct runtime_conn *c, uint64_t timeout_ns)
{
	char sink[4096]; /* dropped bytes */
	int rc = mine(c);
	ssize_t n;

	if (rc < 0)
		return rc;
	rc = runtime_conn_close_write(c);
	if (rc < 0 && rc != -ENOTCONN)
		return rc;
	c->idle = false;
	c->rd.deadline = earlier(c->rd.deadline, deadline_after(timeout_ns));
	while ((n = runtime_conn_read(c, sink, sizeof(sink))) > 0)
		;
	return n == -ECONNABORTED ? 0 : (int)n; /* TLS: the end, without close_notify */
}

/* The socket's answer, for a connection whose stream does not watch it:
 * a byte to peek, its end, or its error all mean a read would not wait. */
static int socket_pending(int fd)
{
	int saved = errno; /* the caller's errno is left as it was */
	char byte;
	ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
	int pending = n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);

	errno = saved;
	return pending;
}

int runtime_conn_pending(const struct runtime_conn *c)
{
	int rc = mine(c);

	if (rc < 0)
		return rc;
	if (layer_pending(c))
		return 1;
	rc = c->rx ? runtime_stream_pending(c->rx) : -EAGAIN;
	return rc == -EAGAIN ? socket_pending(c->fd) : rc;
}

int runtime_conn_cancel_on_close(struct runtime_conn *c, int on)
{
	int rc = mine(c);

	if (rc < 0)
		return rc;
	if (!c->rx)
		return on ? -EOPNOTSUPP : 0;
	if (on && layer_pending(c))
		return 1; /* the peer's bytes wait in the layer: not alone */
	rc = runtime__stream_watch(c->rx, on); /* -EPERM outside a fiber */
	c->close_watched = on && rc == 0;
	return rc;
}

int runtime_conn_set_idle(struct runtime_conn *c, int idle)
{
	int rc = mine(c);

	if (rc == 0)
		c->idle = idle != 0;
	return rc;
}
