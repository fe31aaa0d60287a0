/* SPDX-License-Identifier: MIT */
/*
 * stream.c - receive streams: one multishot recv per socket, filling
 * buffers of the core's pool: on io_uring one IORING_RECV_MULTISHOT SQE
 * and a provided-buffer ring the core lends the kernel; on epoll the
 * engine reads into the pool whenever the socket becomes readable. Data
 * lands while the fiber is busy elsewhere, and runtime_stream_recv copies
 * out what has come without a trip to the kernel of its own: a
 * request-response connection costs one SQE (or syscall) per response
 * instead of two.
 *
 * Each core has one buffer pool (made on the core's first stream): a ring
 * of cfg.stream_buffers buffers of cfg.stream_buffer_size bytes. A buffer
 * is free for new data again as soon as its bytes are copied out, so a
 * buffer is held only by data that came and was not read yet. A stream's
 * queue is a list of buffer ids threaded through the pool (next[bid]), so
 * queuing allocates nothing.
 *
 * Three rules keep one connection from hurting the others:
 *  - a stream holding STREAM_QUEUE_MAX bytes unread stops its multishot
 *    (the socket buffer, then TCP, push back) and re-arms when read dry;
 *  - when the pool runs low (below a quarter free), or it ran out
 *    (-ENOBUFS), a read that finds nothing queued becomes a plain recv
 *    into the caller's buffer, so exhaustion slows nothing down to a stall;
 *  - a kernel without multishot recv or buffer rings (before 6.0) gets the
 *    plain recv every time.
 *
 * The request's lifecycle (arming, stopping, freeing once quiet) is
 * multishot.c's.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
	bool starved;               /* it ended with -ENOBUFS: next read plain */
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

/* ------------------------------------------------------------ the pool */

static struct bufpool *pool_of(struct core *c)
{
	return &c->bufpool;
}

static char *buf_at(const struct bufpool *p, unsigned bid)
{
	return p->base + (size_t)bid * p->stride;
}

static void ring_add(struct bufpool *p, unsigned bid)
{
	io_uring_buf_ring_add(p->ring, buf_at(p, bid), p->size, (unsigned short)bid,
	                      io_uring_buf_ring_mask(p->count), 0);
	io_uring_buf_ring_advance(p->ring, 1);
	p->lent++;
}

/*
 * Buffer bid is free for data to come again. On epoll it goes back on the
 * free list, which the engine takes from (last in, first out). io_uring's
 * kernel takes buffers in ring order, so a ring holding them all would
 * walk every buffer of the pool (4 MiB a core by default) resident, one
 * message after another. The ring holds lend_target of them instead, and
 * the rest wait on the free list, last in first out, to top it up: a
 * light load keeps reusing the same few buffers (and cache lines), a
 * heavy one raises the target (the ring ran dry: -ENOBUFS, starved()).
 */
static void buf_give(struct bufpool *p, unsigned bid)
{
	if (p->ring && p->lent < p->lend_target) {
		ring_add(p, bid);
		return;
	}
	p->free[p->nfree++] = (uint16_t)bid;
	if (!p->ring)
		p->lent++;
}

/* io_uring: the ring down to half its target (its buffers held queued):
 * the free list fills it in. A buffer read out goes back to the ring
 * itself (buf_give). */
static void top_up(struct bufpool *p)
{
	while (p->lent < p->lend_target && p->nfree)
		ring_add(p, p->free[--p->nfree]);
}

/* io_uring: the ring ran dry - lend the kernel more from now on. */
static void lend_more(struct bufpool *p)
{
	p->dry = true;
	if (p->ring && p->lend_target < p->count) {
		p->lend_target = p->lend_target * 2 < p->count ? p->lend_target * 2 : p->count;
		top_up(p);
	}
}

/* A taken buffer counts as lent until its data is delivered (stream_cqe),
 * as a buffer the kernel has picked does on io_uring. */
bool runtime__bufpool_take(struct core *c, unsigned *bid, char **buf, unsigned *size)
{
	struct bufpool *p = pool_of(c);

	if (!p->nfree)
		return false;
	*bid = p->free[--p->nfree];
	*buf = buf_at(p, *bid);
	*size = p->size;
	return true;
}

void runtime__bufpool_untake(struct core *c, unsigned bid)
{
	struct bufpool *p = pool_of(c);

	p->free[p->nfree++] = (uint16_t)bid;
}

static void *map(size_t len)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return m == MAP_FAILED ? NULL : m;
}

/*
 * The kernel hands buffers out in ring order, so every one is touched in
 * turn, and a short message touches only a buffer's first lines. Two things
 * keep that cheap (in the echo demo they took the kernel's copy into the
 * buffers from 2.3 % of server CPU to ~0.6 %): a cache line of padding
 * between buffers, so that their first lines do not all fall into the same
 * few cache sets (4 KiB apart, 1024 buffers share 16 of L2's sets), and
 * transparent huge pages where the kernel allows, so that a pool of 4 MiB
 * is two TLB entries rather than a thousand.
 */
#define BUF_PAD 64
#define HUGE_PAGE (2u << 20)

/* 2 MiB-aligned so that whole huge pages fit; munmap(base, len) frees it. */
static void *map_buffers(size_t len)
{
	if (len < HUGE_PAGE)
		return map(len);
	char *m = map(len + HUGE_PAGE);
	if (!m)
		return NULL;
	char *base = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	if (base > m)
		munmap(m, (size_t)(base - m));
	munmap(base + len, (size_t)(m + len + HUGE_PAGE - (base + len)));
	madvise(base, len, MADV_HUGEPAGE); /* a hint: 4 KiB pages still work */
	return base;
}

/* io_uring: the ring through which the kernel takes the buffers. */
static bool pool_lend(struct core *c, struct bufpool *p)
{
	p->ring_bytes = p->count * sizeof(struct io_uring_buf);
	p->ring = map(p->ring_bytes);
	struct io_uring_buf_reg reg = {
		.ring_addr = (uint64_t)(uintptr_t)p->ring,
		.ring_entries = p->count,
		.bgid = 0,
	};
	if (!p->ring || io_uring_register_buf_ring(&c->ring, &reg, 0) < 0)
		return false;
	io_uring_buf_ring_init(p->ring);
	return true;
}

static unsigned lend_start(const struct bufpool *p)
{
	return p->count / 4 ? p->count / 4 : 1;
}

/* Set the pool up on the core's first stream. False: plain recvs only. */
static bool pool_ready(struct core *c)
{
	struct bufpool *p = pool_of(c);

	if (p->state != POOL_UNTRIED)
		return p->state == POOL_READY;
	p->state = POOL_FAILED;
	p->count = c->rt->cfg.stream_buffers;
	p->size = c->rt->cfg.stream_buffer_size;
	p->stride = p->size + BUF_PAD;
	p->base_bytes = (size_t)p->count * p->stride;
	p->base = map_buffers(p->base_bytes);
	p->next = calloc(p->count, sizeof(*p->next));
	p->len = calloc(p->count, sizeof(*p->len));
	p->free = calloc(p->count, sizeof(*p->free));
	p->nregions = (unsigned)((p->base_bytes + HUGE_PAGE - 1) / HUGE_PAGE);
	p->region1_bid = (HUGE_PAGE + p->stride - 1) / p->stride < p->count
	               ? (HUGE_PAGE + p->stride - 1) / p->stride : p->count;
	p->region_flags = calloc(p->nregions, sizeof(*p->region_flags));
	p->lend_target = lend_start(p);
	if (!p->base || !p->next || !p->len || !p->free || !p->region_flags ||
	    (c->ring_ready && !pool_lend(c, p))) {
		runtime__bufpool_free(c);
		p->state = POOL_FAILED;
		return false;
	}
	for (unsigned bid = 0; bid < p->lend_target && p->ring; bid++)
		ring_add(p, bid); /* the lowest first, the rest on the free list: */
	for (unsigned bid = p->count; bid-- > (p->ring ? p->lend_target : 0);)
		p->free[p->nfree++] = (uint16_t)bid; /* lowest on top */
	if (!p->ring)
		p->lent = p->count;
	p->state = POOL_READY;
	return true;
}

/* At the end of a run, after the ring drain: nothing is lent any more. */
void runtime__bufpool_free(struct core *c)
{
	struct bufpool *p = pool_of(c);

	if (p->state == POOL_READY && c->ring_ready)
		io_uring_unregister_buf_ring(&c->ring, 0);
	if (p->ring)
		munmap(p->ring, p->ring_bytes);
	if (p->base)
		munmap(p->base, p->base_bytes);
	if (runtime__timer_stop(&p->decay))
		c->dl_lingering--;
	free(p->next);
	free(p->len);
	free(p->free);
	free(p->region_flags);
	*p = (struct bufpool){ .state = POOL_UNTRIED };
}

/* Under a quarter of the buffers free for data to come (lent, or waiting
 * to be): leave the rest to queued data. */
static bool pool_low(const struct bufpool *p)
{
	return p->lent + (p->ring ? p->nfree : 0) < p->count / 4;
}

/* --------------------------------------------------------- its decay */

/*
 * A burst can leave much of the pool resident: many buffers lent or holding
 * data at once, each 2 MiB region of the pool a transparent huge page once
 * a byte of it is touched, and the lend target doubled. So, each period of
 * POOL_DECAY_NS: a region past the first that no data landed in through
 * the period and that holds none now gives its pages back (MADV_DONTNEED:
 * a buffer lent to the kernel holds no data, and a page the kernel writes
 * to later is faulted in afresh), and a lend target that did not run dry
 * halves, down to where it started. The first region stays: a light load
 * lives there. The timer runs while there is something to decay; it
 * lingers (c->dl_lingering): it is nobody's pending work.
 */
#define POOL_DECAY_NS (1000 * 1000 * 1000ull)
enum { REGION_USED = 1, REGION_RESIDENT = 2 };

/* A buffer belongs to the region its first byte is in. */
static unsigned region_of(const struct bufpool *p, unsigned bid)
{
	return (unsigned)((size_t)bid * p->stride / HUGE_PAGE);
}

/* The first buffer of region r (count past the last region). */
static unsigned region_first(const struct bufpool *p, unsigned r)
{
	size_t bid = ((size_t)r * HUGE_PAGE + p->stride - 1) / p->stride;
	return bid < p->count ? (unsigned)bid : p->count;
}

/* Does a buffer with bytes in region r (r > 0: the one before its first
 * may straddle into it) hold data? len is zeroed when a buffer's data is
 * all read (unstash): a scan of a region's buffers once a period, instead
 * of a count kept on every message. */
static bool region_holds_data(const struct bufpool *p, unsigned r)
{
	for (unsigned bid = region_first(p, r) - 1; bid < region_first(p, r + 1); bid++)
		if (p->len[bid])
			return true;
	return false;
}

/* The whole huge page: a page left in it would let khugepaged fill it
 * back to 2 MiB. */
static void region_give_back(struct bufpool *p, unsigned r)
{
	size_t off = (size_t)r * HUGE_PAGE;
	size_t len = p->base_bytes - off < HUGE_PAGE ? p->base_bytes - off : HUGE_PAGE;

	madvise(p->base + off, len, MADV_DONTNEED);
}

/* Region r's pages back to the kernel, if it may go; true if it stays. */
static bool region_decay(struct bufpool *p, unsigned r)
{
	uint8_t *f = &p->region_flags[r];

	if (*f & REGION_USED) {
		*f &= (uint8_t)~REGION_USED;
		return true;
	}
	if (!(*f & REGION_RESIDENT))
		return false;
	if (region_holds_data(p, r))
		return true;
	region_give_back(p, r);
	*f = 0;
	return false;
}

static void pool_decay_arm(struct core *c, struct bufpool *p);

static void pool_decay_fire(struct timer *t, enum runtime_timer_why why)
{
	struct bufpool *p = container_of(t, struct bufpool, decay);
	bool more = false;

	(void)why;
	t->core->dl_lingering--;
	if (!p->dry && p->lend_target > lend_start(p))
		p->lend_target /= 2;
	p->dry = false;
	for (unsigned r = 1; r < p->nregions; r++)
		more |= region_decay(p, r);
	if (more || p->lend_target > lend_start(p))
		pool_decay_arm(t->core, p);
}

static void pool_decay_arm(struct core *c, struct bufpool *p)
{
	p->decay.fire = pool_decay_fire;
	runtime__timer_start(c, &p->decay, deadline_add(c->now, POOL_DECAY_NS));
	c->dl_lingering++;
}

/* Data landed past the first region (out of line: rare, and the message
 * path stays short). */
__attribute__((noinline, cold)) static void region_landed(struct core *c, struct bufpool *p,
                                                          unsigned bid)
{
	p->region_flags[region_of(p, bid)] = REGION_USED | REGION_RESIDENT;
	if (p->decay.state != TIMER_ARMED)
		pool_decay_arm(c, p);
}

/* ---------------------------------------------------------- the queue */

/* Data landed in buffer bid: the pool's decay must know its region. */
static inline void landed(struct core *c, struct bufpool *p, unsigned bid)
{
	if (unlikely(bid >= p->region1_bid)) /* past the first region */
		region_landed(c, p, bid);
}

static void stash(struct bufpool *p, struct runtime_stream *s, unsigned bid, uint32_t n)
{
	landed(s->m.core, p, bid);
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
	buf_give(p, bid);
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
		memcpy(dst + done, buf_at(p, bid) + s->off, n);
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

/* The ring ran dry under this stream: its next read is a plain recv, and
 * the core lends the kernel more. */
static void starved(struct runtime_stream *s)
{
	s->starved = true;
	lend_more(&s->m.core->bufpool);
}

/* The multishot ended: note why. */
static void ended(struct runtime_stream *s, int res)
{
	if (res == -EINVAL || res == -EOPNOTSUPP)
		s->m.core->bufpool.no_multishot = true; /* a kernel before 6.0 */
	else if (res == 0)
		s->end = 1;
	else if (res == -ENOBUFS)
		starved(s);
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

	landed(s->m.core, p, bid);
	memcpy(s->dst, buf_at(p, bid), k);
	s->handed = k;
	s->dst = NULL;
	if (k == n) {
		buf_give(p, bid);
		return;
	}
	stash(p, s, bid, n);
	s->off = k;
	s->queued -= k;
}

/* Any result of the stream's request (its mshot_ops.cqe). */
static void stream_cqe(struct mshot *m, int res, unsigned flags)
{
	struct runtime_stream *s = stream_of(m);
	struct bufpool *p = pool_of(m->core);

	if (flags & IORING_CQE_F_BUFFER) {
		unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;
		p->lent--;
		if (m->closed || res <= 0)
			buf_give(p, bid);
		else if (s->dst)
			hand_over(p, s, bid, (uint32_t)res);
		else
			stash(p, s, bid, (uint32_t)res);
		if (p->lent < p->lend_target / 2 && p->ring)
			top_up(p); /* buffers are held queued: the free list fills in */
	}
	if (m->closed)
		return;
	if (!(flags & IORING_CQE_F_MORE))
		ended(s, res);
	else if (s->queued >= STREAM_QUEUE_MAX)
		runtime__mshot_stop(m);
	if (unlikely(s->idle.state == IDLE_WAITING))
		runtime__idle_wake(&s->idle, 0); /* a read has something to do */
}

/* runtime__stream_deliver's copy when the buffer does not go straight
 * back into the ring: epoll's free list, or a ring at its lend target. */
static __attribute__((noinline)) void deliver_give(struct bufpool *p, unsigned bid, char *dst,
                                                   const char *src, uint32_t n)
{
	memcpy(dst, src, n);
	p->lent--;
	buf_give(p, bid);
	if (p->lent < p->lend_target / 2 && p->ring)
		top_up(p);
}

/*
 * The common result has its fast way: bytes, more to come, that a reader
 * waiting on the empty queue takes whole, in the pool's first region -
 * runtime__mshot_result's effects (hand_over, buf_give, the reader
 * resumed) with nothing left to queue. What it would test besides cannot
 * hold while a reader waits (s->dst, and m->waiter with it): it waits only
 * on an empty queue, which hand_over leaves empty, and never while the
 * stream is closed or waits idle (each refuses while another is under way).
 */
void runtime__stream_deliver(struct mshot *m, int res, unsigned flags)
{
	struct runtime_stream *s = stream_of(m);
	struct bufpool *p = pool_of(m->core);
	unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;
	char *dst = s->dst;
	const unsigned both = IORING_CQE_F_BUFFER | IORING_CQE_F_MORE;

	if (unlikely((flags & both) != both || res <= 0 || !dst ||
	             (uint32_t)res > s->dst_len || bid >= p->region1_bid)) {
		runtime__mshot_result(m, res, flags);
		return;
	}
	char *src = buf_at(p, bid);
	s->handed = (uint32_t)res;
	s->dst = NULL;
	/* buf_give, lent taken one down (p->lent--) and up again; the buffer
	 * goes to the kernel only once copied out. */
	struct io_uring_buf_ring *br = p->ring;
	if (unlikely(!br || p->lent - 1 >= p->lend_target)) {
		deliver_give(p, bid, dst, src, (uint32_t)res);
	} else {
		/* The entry past the tail is the kernel's once the tail moves. */
		io_uring_buf_ring_add(br, src, p->size, (unsigned short)bid,
		                      io_uring_buf_ring_mask(p->count), 0);
		memcpy(dst, src, (uint32_t)res);
		io_uring_buf_ring_advance(br, 1);
		p = pool_of(m->core); /* m and br alone kept across the copy */
		if (unlikely(p->lent < p->lend_target / 2))
			top_up(p); /* buffers are held queued: the free list fills in */
	}
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
	dlist_for_each(n, &c->mshots) {
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
	return !c->bufpool.no_multishot && !runtime__fault(FAULT_NO_MULTISHOT) && pool_ready(c);
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
	return can_watch(c) && !pool_low(pool_of(c));
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
	*data = buf_at(p, s->head) + s->off;
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
