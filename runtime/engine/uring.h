/* SPDX-License-Identifier: MIT */
/*
 * uring.h - what the io_uring engine's files share (uring.c: the ring,
 * operations, multishot requests and the receive buffers lent to the
 * kernel; uring_fixed.c: fixed files). The only header of the runtime's
 * that includes <liburing.h>: above the engine interface (engine.h)
 * nothing knows the ring is there.
 */
#ifndef RUNTIME_ENGINE_URING_H
#define RUNTIME_ENGINE_URING_H

#include "../core.h" /* first: config.h */
#include "../services.h"
#include "engine.h"

#include <liburing.h>

/* The receive buffers lent to the kernel: a provided-buffer ring (buffer
 * group 0) refilled from the core's pool (uring.c explains). */
struct uring_bufs {
	struct io_uring_buf_ring *ring; /* NULL: none (yet) */
	size_t ring_bytes;
	unsigned lent;              /* in the ring, the kernel's to fill */
	unsigned low;               /* refilled when down to this (target / 2) */
	unsigned target;            /* kept in it: raised when it ran dry */
	bool dry;                   /* it ran dry this decay period */
	bool failed;                /* no ring here: plain recvs */
	uint64_t next_decay;
};

/* A core's engine state while a run lasts (core->engine_state), made on
 * the core's own thread: SINGLE_ISSUER binds a ring to its creator. */
struct uring_core {
	struct io_uring ring;
	unsigned turn_cqes;         /* CQEs the last loop turn reaped */
	unsigned enter_flags;       /* IORING_ENTER_REGISTERED_RING, or 0 */
	bool fixed_ready;           /* the ring has a sparse fixed-file table */
	struct uring_bufs bufs;
	uint64_t wake_buf;          /* the armed wake read's buffer */
	uint64_t kt_deadline;       /* the armed kernel timeout, NEVER = none */
	uint64_t kt_gen;
	struct __kernel_timespec kt_ts;
} __attribute__((aligned(64))); /* a cache line of its own (aligned_alloc) */

static inline struct uring_core *uring_of(const struct core *c)
{
	return c->engine_state;
}

/* user_data: an 8-aligned pointer with a tag in its low TAG_BITS bits. */
#define TAG_BITS 3
#define TAG_MASK ((1ull << TAG_BITS) - 1)

enum cqe_tag {
	TAG_OP = 0,       /* struct op: the operation itself */
	TAG_CANCEL,       /* struct op: an ASYNC_CANCEL aimed at it */
	TAG_KTIMEOUT,     /* the core's armed timeout; generation << TAG_BITS */
	TAG_IGNORE,       /* no one waits for this CQE */
	TAG_WAKEUP,       /* struct core: its eventfd read */
	TAG_SIGNAL,       /* struct core: the shutdown signalfd read (core 0) */
	TAG_MSHOT,        /* struct mshot: its multishot request, or (bit 3
	                     set) a cancel aimed at it */
};

static inline uint64_t tagged(const void *p, enum cqe_tag tag)
{
	return (uint64_t)(uintptr_t)p | tag;
}

/* An SQE of the core's ring (submitting and reaping to make room if the
 * ring is full: never NULL), counted in flight until its last CQE. */
struct io_uring_sqe *runtime__sqe(struct core *c);
void runtime__sqe_reserve(struct core *c, unsigned n);

/* An in-flight operation, on the waiting fiber's stack. The fiber resumes
 * only when pending reaches 0: every CQE that names this struct has come
 * (uring.c explains the cancel protocol). */
struct op {
	struct io_wait head;        /* first: what runtime_dump shows */
	struct fiber *fiber;
	int res;
	uint8_t pending;            /* CQEs still due */
	uint8_t retries;            /* cancels sent so far */
	bool done;                  /* the operation's own CQE has come */
	bool timed_out;             /* the deadline passed before it completed */
	bool cancelling;            /* asked to stop: cancel until done */
	bool cancel_in_flight;
	bool cancellable;           /* false for close: cleanup must not fail */
#ifdef RUNTIME_FAULTS
	int injected;               /* its result instead, if not 0 (fault.h) */
#endif
	uint64_t deadline;          /* absolute ns, NEVER for none */
	struct timer timer;         /* the deadline; once stopping, the next cancel */
};

/* How long to wait before the next ASYNC_CANCEL at an operation that the
 * last one missed, after `sent` cancels: the first two at once, then 20 us
 * doubling to 10 ms, so one that takes long to die costs no spin. */
static inline uint64_t runtime__cancel_backoff(unsigned sent)
{
	if (sent < 2)
		return 0;
	unsigned shift = sent - 2 < 9 ? sent - 2 : 9;
	uint64_t delay = 20 * 1000ull << shift;
	return delay < 10 * 1000 * 1000ull ? delay : 10 * 1000 * 1000ull;
}

/* uring_fixed.c: the ring's fixed-file table, made at its start
 * (runtime_config.fixed_files) and dropped at its end; whether fd is
 * registered in c's ring (an SQE then names it by its slot). */
void runtime__fixed_ring_init(struct core *c);
void runtime__fixed_ring_exit(struct core *c);
bool runtime__fixed(const struct core *c, int fd);
/* engine.h's fd_adopt: fd registered, a stale registration of its number
 * (its file closed without runtime_close) released first. */
void runtime__fixed_adopt(struct core *c, int fd);

#endif /* RUNTIME_ENGINE_URING_H */
