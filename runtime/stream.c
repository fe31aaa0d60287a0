/* SPDX-License-Identifier: MIT */
/*
 * stream.c - receive streams: one multishot recv per socket, filling
 * buffers of the core's pool (bufpool.h): on io_uring one
 * IORING_RECV_MULTISHOT SQE on the provided buffers the engine lends the
 * kernel; on epoll the engine reads into the pool whenever the socket
 * becomes readable. Data lands while the fiber is busy elsewhere, and
 * runtime_stream_recv copies out what has come without a trip to the
 * kernel of its own: a request-response connection costs one SQE (or
 * syscall) per response instead of two.
 *
 * A buffer is free for new data again as soon as its bytes are copied
 * out, so a buffer is held only by data that came and was not read yet.
 * A stream's queue is a list of buffer ids threaded through the pool
 * (next[bid]), so queuing allocates nothing.
 *
 * Three rules keep one connection from hurting the others:
 *  - a stream holding STREAM_QUEUE_MAX bytes unread stops its multishot
 *    (the socket buffer, then TCP, push back) and re-arms when read dry;
 *  - when the pool runs low (below a quarter free), or the engine's
 *    buffers ran out (-ENOBUFS), a read that finds nothing queued becomes
 *    a plain recv into the caller's buffer, so exhaustion slows nothing
 *    down to a stall;
 *  - a kernel without multishot recv or buffer rings (before 6.0) gets the
 *    plain recv every time.
 *
 * The request's lifecycle (arming, stopping, freeing once quiet) is
 * multishot.c's.
 */
#include "core.h"
#include "engine/engine.h"

#include <stdlib.h>
#include <string.h>

#define NO_BID 0xffffu
#define STREAM_QUEUE_MAX (64u * 1024)

struct runtime_stream {
	struct mshot m;             /* first: 16-aligned */
	uint16_t head, tail;        /* queued buffer ids, NO_BID if none */
	uint32_t off;               /* bytes of head already read */
	uint32_t queued;            /* unread bytes */
	/* A reader waiting on an empty queue: the bytes that come next are
	 * copied straight to its buffer (hand_over). */
	uint32_t handed;            /* bytes copied there (> 0), for the reader,
	                               once hand_over has cleared dst */
	uint32_t dst_len;           /* the reader's len (dst_len_of: a read of
	                               4 GiB or more may return less anyway) */
	int16_t end;                /* 1: EOF came; < 0: the error that came */
	bool starved : 1;           /* it ended with -ENOBUFS: next read plain */
	bool watch_fired : 1;       /* idle.watcher was cancelled since set */
	char *dst;                  /* NULL: none waits, or it has its bytes */
	struct idle idle;           /* runtime_stream_idle's wait (idle.c) */
};
/* Every idle connection holds one: 240 bytes is a 256-byte malloc chunk. */
_Static_assert(sizeof(void *) != 8 || sizeof(struct runtime_stream) <= 240,
               "an idle stream stays in a 256-byte malloc chunk");

static inline uint32_t dst_len_of(size_t len)
{
	return len < UINT32_MAX ? (uint32_t)len : UINT32_MAX;
}

static struct bufpool *pool_of(struct core *c)
{
	return &c->streams.pool;
}

/* ---------------------------------------------------------- the queue */

static void stash(struct bufpool *p, struct runtime_stream *s, unsigned bid, uint32_t n)
{
	bufpool_landed(s->m.core, p, bid);
	p->held++;
	p->len[bid] = n;
	p->next[bid] = NO_BID;
	if (s->tail == NO_BID)
		s->head = (uint16_t)bid;
	else
		p->next[s->tail] = (uint16_t)bid;
	s->tail = (uint16_t)bid;
	s->queued += n;
}

/* A queued buffer's data is all read: it is free for more. */
static void unstash(struct bufpool *p, unsigned bid)
{
	p->len[bid] = 0;
	p->held--;
	bufpool_give(p, bid);
}

/* Copy up to len queued bytes to dst, giving emptied buffers back. */
static size_t copy_out(struct bufpool *p, struct runtime_stream *s, char *dst, size_t len)
{
	size_t done = 0;

	while (done < len && s->head != NO_BID) {
		unsigned bid = s->head;
		size_t n = p->len[bid] - s->off;
		if (n > len - done)
			n = len - done;
		memcpy(dst + done, bufpool_at(p, bid) + s->off, n);
		done += n;
		s->off += (uint32_t)n;
		if (s->off == p->len[bid]) {
			s->head = p->next[bid];
			if (s->head == NO_BID)
				s->tail = NO_BID;
			s->off = 0;
			unstash(p, bid);
		}
	}
	s->queued -= (uint32_t)done;
	return done;
}

static void give_back_all(struct bufpool *p, struct runtime_stream *s)
{
	while (s->head != NO_BID) {
		unsigned bid = s->head;
		s->head = p->next[bid];
		unstash(p, bid);
	}
	s->tail = NO_BID;
	s->queued = 0;
	s->off = 0;
}

/* -------------------------------------------------- the multishot recv */

static struct runtime_stream *stream_of(struct mshot *m)
{
	return container_of(m, struct runtime_stream, m);
}

/* The multishot ended: note why. -ENOBUFS: the buffers the engine had
 * taken ran out under this stream (it takes more from now on): the next
 * read is a plain recv. */
static void ended(struct runtime_stream *s, int res)
{
	if (res == -EINVAL || res == -EOPNOTSUPP)
		s->m.core->streams.pool.no_multishot = true; /* a kernel before 6.0 */
	else if (res == 0)
		s->end = 1;
	else if (res == -ENOBUFS)
		s->starved = true;
	else if (res < 0 && res != -ECANCELED)
		s->end = (int16_t)res;
}

/*
 * n bytes came in buffer bid while a reader waits on the empty queue
 * (s->dst): they go straight to its buffer, and what does not fit is
 * queued, as copy_out would have left it. The reader is resumed by
 * runtime__mshot_deliver and finds them in s->handed (s->dst cleared says
 * there are some, k > 0 as n > 0 and dst_len > 0); the buffer is free
 * again at once. Saves the queue's round trip on a message's way.
 */
static void hand_over(struct bufpool *p, struct runtime_stream *s, unsigned bid, uint32_t n)
{
	uint32_t k = n < s->dst_len ? n : s->dst_len;

	bufpool_landed(s->m.core, p, bid);
	memcpy(s->dst, bufpool_at(p, bid), k);
	s->handed = k;
	s->dst = NULL;
	if (k == n) {
		bufpool_give(p, bid);
		return;
	}
	stash(p, s, bid, n);
	s->off = k;
	s->queued -= k;
}

/* The peer's end (or an error) came with nothing queued before it and no
 * reader to tell: the watcher, busy elsewhere, is cancelled. */
static void watch_check(struct runtime_stream *s)
{
	if (s->idle.state != IDLE_NONE || !s->idle.watcher || !s->end || s->queued || s->m.waiter)
		return;
	runtime__fiber_cancel(s->idle.watcher);
	s->idle.watcher = NULL;
	s->watch_fired = true;
}

int runtime__stream_watch(struct runtime_stream *s, int on)
{
	struct fiber *f = on ? this_fiber() : NULL;
	bool fired = s->watch_fired;

	if (on && !f)
		return -EPERM;
	if (s->idle.state != IDLE_NONE)
		return -EBUSY;
	s->watch_fired = false;
	if (f && s->end)
		return 1; /* it came already: a half-close, the answer awaited */
	s->idle.watcher = f;
	return f ? 0 : fired;
}

void runtime__stream_watch_stop(struct runtime_stream *s)
{
	if (s->idle.state == IDLE_NONE)
		s->idle.watcher = NULL;
}

int runtime__stream_idle_wake(struct runtime_stream *s, int why)
{
	if (s->idle.state != IDLE_WAITING)
		return -EALREADY;
	runtime__idle_wake(&s->idle, why);
	return 0;
}

/* Any result of the stream's request (its mshot_ops.cqe). */
static void stream_cqe(struct mshot *m, int res, unsigned flags)
{
	struct runtime_stream *s = stream_of(m);
	struct bufpool *p = pool_of(m->core);

	if (flags & MSHOT_F_BUFFER) {
		unsigned bid = flags >> MSHOT_BUF_SHIFT;
		if (m->closed || res <= 0)
			bufpool_give(p, bid);
		else if (s->dst)
			hand_over(p, s, bid, (uint32_t)res);
		else
			stash(p, s, bid, (uint32_t)res);
	}
	if (m->closed)
		return;
	if (!(flags & MSHOT_F_MORE)) {
		ended(s, res);
		watch_check(s);
	} else if (s->queued >= STREAM_QUEUE_MAX)
		runtime__mshot_stop(m);
	if (unlikely(s->idle.state == IDLE_WAITING))
		runtime__idle_wake(&s->idle, 0); /* a read has something to do */
}

/*
 * The common result has its fast way: bytes, more to come, that a reader
 * waiting on the empty queue takes whole, in the pool's first region -
 * runtime__mshot_result's effects (hand_over, the buffer given back, the
 * reader resumed) with nothing left to queue. What it would test besides
 * cannot hold while a reader waits (s->dst, and m->waiter with it): it
 * waits only on an empty queue, which hand_over leaves empty, and never
 * while the stream is closed or waits idle (each refuses while another is
 * under way).
 */
void runtime__stream_deliver(struct mshot *m, int res, unsigned flags)
{
	struct runtime_stream *s = stream_of(m);
	struct bufpool *p = pool_of(m->core);
	unsigned bid = flags >> MSHOT_BUF_SHIFT;
	char *dst = s->dst;
	const unsigned both = MSHOT_F_BUFFER | MSHOT_F_MORE;

	if (unlikely((flags & both) != both || res <= 0 || !dst ||
	             (uint32_t)res > s->dst_len || bid >= p->region1_bid)) {
		runtime__mshot_result(m, res, flags);
		return;
	}
	s->handed = (uint32_t)res;
	s->dst = NULL;
	memcpy(dst, bufpool_at(p, bid), (uint32_t)res);
	bufpool_give(pool_of(m->core), bid); /* m alone kept across the copy */
	runtime__resume(m->waiter, 0);
}

static void stream_release(struct mshot *m)
{
	struct runtime_stream *s = stream_of(m);

	runtime__idle_forget(&s->idle);
	give_back_all(pool_of(m->core), s);
	free(s);
}

static const struct mshot_ops stream_ops = { stream_cqe, stream_release };

/* A drain or a shutdown: every stream of the core that waits idle. */
void runtime__idle_wake_all(struct core *c, int why)
{
	dlist_for_each(n, &c->streams.mshots) {
		struct mshot *m = container_of(n, struct mshot, link);
		if (m->ops == &stream_ops)
			runtime__idle_wake(&stream_of(m)->idle, why);
	}
}

/* A drain's node reached the core: its idle streams read -ESHUTDOWN. */
static int idle_drain_arrived(struct core *c, struct inbox_node *n)
{
	(void)n;
	runtime__idle_wake_all(c, -ESHUTDOWN);
	return 0;
}

const struct inbox_ops runtime__idle_drain_ops = { idle_drain_arrived, NULL };

/* ------------------------------------------------------------- the API */

int runtime_stream_open(struct runtime_stream **out, int fd)
{
	struct core *c = this_core();

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!this_fiber())
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	if (fd < 0)
		return -EBADF;
	struct runtime_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	runtime__mshot_init(&s->m, c, fd, MSHOT_RECV, 0, &stream_ops);
	s->head = s->tail = NO_BID;
	*out = s;
	return 0;
}

/* Can the core's engine watch a stream with a multishot recv? */
static bool can_watch(struct core *c)
{
	return !c->streams.pool.no_multishot && !runtime__fault(FAULT_NO_MULTISHOT) &&
	       runtime__bufpool_ready(c);
}

/* May this read arm the multishot, or must it be a plain recv? */
static bool use_multishot(struct runtime_stream *s)
{
	struct core *c = s->m.core;

	if (s->m.armed)
		return true;
	if (s->starved) {
		s->starved = false;
		return false;
	}
	return can_watch(c) && !bufpool_low(pool_of(c));
}

/* Wait (the queue empty, len > 0) until the deadline for the next
 * result: the bytes handed straight to buf (> 0), 0 to look at the
 * stream again, or the wait's -errno. Bytes handed as the wait timed out
 * or was cancelled are returned all the same: nothing read is lost.
 * hand_over clears s->dst when it hands bytes; otherwise it is cleared
 * here. */
static inline ssize_t wait_for_bytes(struct runtime_stream *s, struct fiber *f, void *buf,
                                     size_t len, uint64_t deadline)
{
	s->dst = buf;
	s->dst_len = dst_len_of(len);
	int rc = runtime__mshot_wait(&s->m, f, deadline);
	if (likely(!s->dst))
		return (ssize_t)s->handed;
	s->dst = NULL;
	return rc;
}

/* May the read start? 0, or the -errno it returns at once. */
static int recv_check(struct runtime_stream *s, struct fiber *f)
{
	if (unlikely(s->idle.state != IDLE_NONE))
		return -EBUSY;
	if (s->m.core != f->core || s->m.closed || s->m.waiter)
		return runtime__misuse(-EPERM, "runtime_stream_recv", "the stream is another "
		                       "core's, closed, or another fiber reads it");
	if (runtime__fault(FAULT_CONNRESET))
		return -ECONNRESET;
	return 0;
}

/* A read that may start (its checks passed), under the call's deadline
 * and until, the earlier of it and the fiber's. */
static __attribute__((noinline)) ssize_t
recv_loop(struct runtime_stream *s, struct fiber *f, void *buf, size_t len, uint64_t deadline,
          uint64_t until)
{
	for (;;) {
		if (s->queued || !len)
			return (ssize_t)copy_out(pool_of(f->core), s, buf, len);
		if (s->end)
			return s->end > 0 ? 0 : s->end;
		if (!use_multishot(s)) {
			stat_add(&f->core->stats.stream_fallbacks, 1);
			return runtime__recv_by(s->m.fd, buf, len, 0, deadline);
		}
		if (!s->m.armed) {
			runtime__mshot_arm(&s->m); /* epoll: may end it at once */
			continue;
		}
		ssize_t n = wait_for_bytes(s, f, buf, len, until);
		if (n != 0)
			return n;
	}
}

/* Every read the fast way of runtime__stream_recv_by does not take: the
 * checks in their order, each with its answer. */
static __attribute__((noinline)) ssize_t
recv_checked(struct runtime_stream *s, void *buf, size_t len, uint64_t deadline)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f, "runtime_stream_recv");

	if (!s || (!buf && len))
		return -EINVAL;
	if (rc || (rc = recv_check(s, f)) != 0)
		return rc;
	deadline = runtime__call_deadline(deadline);
	if (runtime__call_deadline_passed(f, deadline))
		return -ETIMEDOUT;
	return recv_loop(s, f, buf, len, deadline, deadline_min(deadline, f->deadline));
}

/* The fast way's read that has bytes queued (or the stream's end), or a
 * deadline of the call's (0: none; the fiber has none): recv_checked's
 * last check, and its loop. */
static __attribute__((noinline)) ssize_t
recv_now(struct runtime_stream *s, struct fiber *f, void *buf, size_t len, uint64_t deadline)
{
	if (!deadline)
		return recv_loop(s, f, buf, len, NEVER, NEVER);
	if (runtime_now() >= deadline)
		return -ETIMEDOUT;
	return recv_loop(s, f, buf, len, deadline, deadline);
}

/* The fast way's wait (no deadline) ended with no bytes handed (rc): its
 * buffer is still in s->dst (hand_over clears it only when it hands
 * bytes), so that the wait keeps nothing but s across the switch. */
static __attribute__((noinline)) ssize_t recv_unhanded(struct runtime_stream *s, int rc)
{
	void *buf = s->dst;
	size_t len = s->dst_len;

	s->dst = NULL;
	if (rc)
		return rc;
	return recv_loop(s, this_fiber(), buf, len, NEVER, NEVER);
}

/*
 * The fast way is a read by a fiber not cancelled and under no deadline of
 * its own, of a stream in plain use with its multishot armed: what
 * recv_checked lets through with no answer of its own, tested folded (the
 * fiber's core is the calling thread's). With no deadline of the call's
 * and nothing queued, it waits for the next bytes keeping only s across
 * the switch; the rest goes on in recv_loop (recv_now, recv_unhanded), and
 * anything else takes the full way. inline: a hint to LTO's inliner, for
 * the toolkit's read (layer.h declares it: this is its external
 * definition all the same).
 */
inline ssize_t runtime__stream_recv_by(struct runtime_stream *s, void *buf, size_t len,
                                       uint64_t deadline)
{
	struct core *c = this_core();
	struct fiber *f = runtime__plain_fiber(c);

	if (unlikely(!f || !s || !buf || !len || s->idle.state != IDLE_NONE || s->m.core != c ||
	             !s->m.armed || s->m.closed || s->m.waiter))
		return recv_checked(s, buf, len, deadline);
	if (runtime__fault(FAULT_CONNRESET))
		return -ECONNRESET;
	if (deadline || s->queued || s->end)
		return recv_now(s, f, buf, len, deadline);
	s->dst = buf;
	s->dst_len = dst_len_of(len);
	int rc = runtime__mshot_wait(&s->m, f, NEVER);
	if (likely(!s->dst))
		return (ssize_t)s->handed;
	return recv_unhanded(s, rc);
}

ssize_t runtime_stream_recv(struct runtime_stream *s, void *buf, size_t len)
{
	return runtime__stream_recv_by(s, buf, len, 0);
}

size_t runtime_stream_buffered(const struct runtime_stream *s)
{
	return s ? s->queued : 0;
}

int runtime_stream_pending(const struct runtime_stream *s)
{
	if (!s)
		return -EINVAL;
	if (s->queued || s->end)
		return 1;
	return s->m.armed && !s->starved ? 0 : -EAGAIN;
}

/* ----------------------------------------- waiting with no fiber (idle.c) */

int runtime_stream_idle(struct runtime_stream *s, uint64_t deadline_ns,
                        runtime_stream_idle_fn *fn, void *arg)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f, __func__);

	if (!s || !fn)
		return -EINVAL;
	if (rc)
		return rc;
	if (s->idle.state != IDLE_NONE)
		return -EBUSY;
	if (s->m.core != f->core || s->m.closed || s->m.waiter)
		return runtime__misuse(-EPERM, __func__, "the stream is another core's, "
		                       "closed, or another fiber reads it");
	if (s->queued || s->end || s->starved)
		return 1; /* a read has something to do now */
	struct core *c = f->core;
	bool watch = can_watch(c);
	runtime__idle_begin(c, &s->idle, s->m.fd, deadline_ns ? deadline_ns : NEVER, fn, arg,
	                    !watch);
	if (watch && !s->m.armed)
		runtime__mshot_arm(&s->m); /* epoll: may deliver, and wake, at once */
	return 0;
}

/* ---------------------------------------------- in place (the toolkit) */

/* Mark n queued bytes read without copying them, giving each emptied
 * buffer back as copy_out does. n <= s->queued. */
static void skip_out(struct bufpool *p, struct runtime_stream *s, size_t n)
{
	s->queued -= (uint32_t)n;
	while (n) {
		unsigned bid = s->head;
		size_t left = p->len[bid] - s->off;
		if (n < left) {
			s->off += (uint32_t)n;
			return;
		}
		n -= left;
		s->head = p->next[bid];
		if (s->head == NO_BID)
			s->tail = NO_BID;
		s->off = 0;
		unstash(p, bid);
	}
}

/* Peek and consume touch the core's buffers: the stream's core only, and
 * not while another fiber waits in runtime_stream_recv (its bytes). */
static int in_place_check(const struct runtime_stream *s, const char *fn)
{
	if (s->idle.state != IDLE_NONE)
		return -EBUSY;
	if (s->m.core != this_core() || s->m.closed || s->m.waiter)
		return runtime__misuse(-EPERM, fn, "the stream is another core's, "
		                       "closed, or another fiber reads it");
	return 0;
}

ssize_t runtime_stream_peek(struct runtime_stream *s, const void **data)
{
	if (!s || !data)
		return -EINVAL;
	int rc = in_place_check(s, __func__);
	if (rc)
		return rc;
	if (s->head == NO_BID) {
		*data = NULL;
		return 0;
	}
	const struct bufpool *p = pool_of(s->m.core);
	*data = bufpool_at(p, s->head) + s->off;
	return (ssize_t)(p->len[s->head] - s->off);
}

int runtime_stream_consume(struct runtime_stream *s, size_t n)
{
	if (!s)
		return -EINVAL;
	int rc = in_place_check(s, __func__);
	if (rc)
		return rc;
	if (n > s->queued)
		return -EINVAL;
	skip_out(pool_of(s->m.core), s, n);
	return 0;
}

int runtime_stream_fd(const struct runtime_stream *s)
{
	return s ? s->m.fd : -EINVAL;
}

int runtime_stream_stop(struct runtime_stream *s)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f, __func__);

	if (!s)
		return -EINVAL;
	if (rc)
		return rc;
	if ((rc = recv_check(s, f)) != 0)
		return rc;
	rc = runtime__mshot_quiesce(&s->m, f, f->deadline);
	if (rc < 0)
		return rc;
	return s->queued || s->end ? 1 : 0;
}

int runtime_stream_close(struct runtime_stream *s)
{
	if (!s)
		return 0;
	if (s->m.core != this_core())
		return runtime__misuse(-EPERM, __func__, MISUSE_OTHER_CORE);
	if (s->m.waiter || s->idle.state != IDLE_NONE)
		return -EBUSY; /* another fiber reads it, or the core waits on it */
	runtime__idle_forget(&s->idle);
	give_back_all(pool_of(s->m.core), s);
	runtime__mshot_close(&s->m);
	return 0;
}
