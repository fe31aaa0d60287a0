/* SPDX-License-Identifier: MIT */
/*
 * bufpool.c - a core's receive buffers (bufpool.h): mapped on the core's
 * first receive stream, and given back in part when a burst is over.
 *
 * The kernel (io_uring's provided buffers) or the epoll engine receives
 * into buffer after buffer, so every one is touched in turn, and a short
 * message touches only a buffer's first lines. Two things keep that cheap
 * (in the echo demo they took the kernel's copy into the buffers from 2.3 %
 * of server CPU to ~0.6 %): a cache line of padding between buffers, so
 * that their first lines do not all fall into the same few cache sets (4
 * KiB apart, 1024 buffers share 16 of L2's sets), and transparent huge
 * pages where the kernel allows, so that a pool of 4 MiB is two TLB
 * entries rather than a thousand.
 */
#include "core.h"

#include <stdlib.h>
#include <sys/mman.h>

#define BUF_PAD 64
#define HUGE_PAGE (2u << 20)

static void *map(size_t len)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return m == MAP_FAILED ? NULL : m;
}

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

bool runtime__bufpool_ready(struct core *c)
{
	struct bufpool *p = &c->streams.pool;

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
	if (!p->base || !p->next || !p->len || !p->free || !p->region_flags) {
		runtime__bufpool_free(c);
		p->state = POOL_FAILED;
		return false;
	}
	for (unsigned bid = p->count; bid-- > 0;)
		p->free[p->nfree++] = (uint16_t)bid; /* the lowest on top */
	p->state = POOL_READY;
	return true;
}

void runtime__bufpool_free(struct core *c)
{
	struct bufpool *p = &c->streams.pool;

	if (p->base)
		munmap(p->base, p->base_bytes);
	if (runtime__timer_stop(&p->decay))
		c->timers.lingering--;
	free(p->next);
	free(p->len);
	free(p->free);
	free(p->region_flags);
	*p = (struct bufpool){ .state = POOL_UNTRIED };
}

/* ------------------------------------------------------------- decay */

/*
 * A burst can leave much of the pool resident: many buffers lent or holding
 * data at once, each 2 MiB region of the pool a transparent huge page once
 * a byte of it is touched. So, each period of POOL_DECAY_NS, a region past
 * the first that no data landed in through the period and that holds none
 * now gives its pages back (MADV_DONTNEED: a buffer lent to the kernel
 * holds no data, and a page the kernel writes to later is faulted in
 * afresh). The first region stays: a light load lives there. The timer
 * runs while there is something to decay; it lingers (c->timers.lingering):
 * it is nobody's pending work.
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
 * may straddle into it) hold data? A stream zeroes len when a buffer's
 * data is all read: a scan of a region's buffers once a period, instead
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
	t->core->timers.lingering--;
	for (unsigned r = 1; r < p->nregions; r++)
		more |= region_decay(p, r);
	if (more)
		pool_decay_arm(t->core, p);
}

static void pool_decay_arm(struct core *c, struct bufpool *p)
{
	p->decay.fire = pool_decay_fire;
	runtime__timer_start(c, &p->decay, deadline_add(c->now, POOL_DECAY_NS));
	c->timers.lingering++;
}

__attribute__((noinline, cold)) void runtime__bufpool_region_landed(struct core *c,
                                                                   struct bufpool *p,
                                                                   unsigned bid)
{
	p->region_flags[region_of(p, bid)] = REGION_USED | REGION_RESIDENT;
	if (p->decay.state != TIMER_ARMED)
		pool_decay_arm(c, p);
}
