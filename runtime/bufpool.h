/* SPDX-License-Identifier: MIT */
/*
 * bufpool.h - a core's receive buffers (bufpool.c), which its receive
 * streams (stream.c) read out of: count buffers of size bytes, made on
 * the core's first stream. The pool knows no engine. A buffer is free (on
 * the free list, last in first out), lent (taken by the engine to receive
 * into: epoll takes one per read, io_uring tops its provided-buffer ring
 * up from the list before each trip to the kernel), or holds data a
 * stream has queued. An engine reports bytes received into buffer bid
 * (engine.h's MSHOT_F_BUFFER); the stream queues them, and gives the
 * buffer back once they are read.
 */
#ifndef RUNTIME_BUFPOOL_H
#define RUNTIME_BUFPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "timer.h"

struct core;

enum pool_state { POOL_UNTRIED, POOL_READY, POOL_FAILED };

struct bufpool {
	char *base;                 /* count buffers of size bytes, stride apart */
	size_t base_bytes;
	unsigned count, size, stride;
	uint16_t *next;             /* per buffer: the next in its stream */
	uint32_t *len;              /* per buffer: bytes received into it */
	uint16_t *free;             /* free buffers, nfree of them, last in first out */
	unsigned nfree;
	unsigned held;              /* buffers holding queued data */
	uint8_t state;              /* enum pool_state */
	bool no_multishot;          /* the kernel refused a multishot recv */
	/* The decay: per 2 MiB region of base, whether data landed in it this
	 * period and whether its pages are resident. */
	uint8_t *region_flags;
	unsigned nregions;
	unsigned region1_bid;       /* the first buffer past the first region */
	struct timer decay;
};

/* Set c's pool up (its first stream); false if it cannot be: plain recvs
 * only. Then true at once. */
bool runtime__bufpool_ready(struct core *c);
/* At the end of a run, once the engine lends nothing any more. */
void runtime__bufpool_free(struct core *c);
/* Data landed in a buffer past the first region: its decay must know. */
void runtime__bufpool_region_landed(struct core *c, struct bufpool *p, unsigned bid);

static inline char *bufpool_at(const struct bufpool *p, unsigned bid)
{
	return p->base + (size_t)bid * p->stride;
}

/* Take a free buffer to receive into: false if none is free. */
static inline bool bufpool_take(struct bufpool *p, unsigned *bid)
{
	if (!p->nfree)
		return false;
	*bid = p->free[--p->nfree];
	return true;
}

/* Buffer bid is free again: on top of the list, the first taken next
 * (its cache lines still warm). */
static inline void bufpool_give(struct bufpool *p, unsigned bid)
{
	p->free[p->nfree++] = (uint16_t)bid;
}

/* Under a quarter of the buffers free for data to come: leave the rest
 * to data queued (a read then takes a plain recv instead). */
static inline bool bufpool_low(const struct bufpool *p)
{
	return p->count - p->held < p->count / 4;
}

/* Data landed in buffer bid (the decay's bookkeeping, out of line past
 * the first region, where a light load never goes). */
static inline void bufpool_landed(struct core *c, struct bufpool *p, unsigned bid)
{
	if (__builtin_expect(bid >= p->region1_bid, 0))
		runtime__bufpool_region_landed(c, p, bid);
}

#endif /* RUNTIME_BUFPOOL_H */
