/* SPDX-License-Identifier: MIT */
/*
 * timer.c - sleeps, timed parks and the public cancellable timers.
 *
 * Two strategies, chosen per runtime (runtime_config.timer_mode):
 *  - heap (default): a core-local 4-ary min-heap of deadlines. Due timers
 *    are fired by the loop from the clock; only when the core is about to
 *    block is the nearest deadline armed in the kernel, as one absolute
 *    IORING_OP_TIMEOUT, replaced (TIMEOUT_REMOVE + TIMEOUT) only when an
 *    earlier deadline arrives. Start and cancel touch no SQE.
 *  - kernel: one IORING_OP_TIMEOUT per timer, cancelled with
 *    IORING_OP_TIMEOUT_REMOVE; the heap then only records which timers are
 *    armed, for shutdown. Cancel completes when the kernel's CQE arrives.
 * bench/micro's timer_add_cancel_ns measures both; the README has the figures.
 *
 * Whatever wins - deadline, cancel or shutdown - fire() runs exactly once.
 */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct timer) <= sizeof(struct runtime_timer),
               "struct runtime_timer must hold struct timer");

static bool kernel_mode(const struct core *c)
{
	return c->rt->cfg.timer_mode == RUNTIME_TIMERS_KERNEL;
}

/* ------------------------------------------------------------------ heap */

/*
 * A 4-ary min-heap whose slots carry the deadline next to the pointer:
 * sifting compares keys in the array and never chases a timer (each lives
 * on some fiber's stack page), and 4 children per node halve the depth.
 */
#define ARITY 4

static void heap_place(struct timer_heap *h, uint32_t i, struct heap_slot slot)
{
	h->slot[i] = slot;
	slot.t->heap_index = i;
}

static void sift_up(struct timer_heap *h, uint32_t i, struct heap_slot slot)
{
	while (i) {
		uint32_t parent = (i - 1) / ARITY;
		if (h->slot[parent].deadline <= slot.deadline)
			break;
		heap_place(h, i, h->slot[parent]);
		i = parent;
	}
	heap_place(h, i, slot);
}

static void sift_down(struct timer_heap *h, uint32_t i, struct heap_slot slot)
{
	for (;;) {
		uint32_t first = ARITY * i + 1, best = first;
		if (first >= h->len)
			break;
		uint32_t end = first + ARITY < h->len ? first + ARITY : h->len;
		for (uint32_t c = first + 1; c < end; c++)
			if (h->slot[c].deadline < h->slot[best].deadline)
				best = c;
		if (slot.deadline <= h->slot[best].deadline)
			break;
		heap_place(h, i, h->slot[best]);
		i = best;
	}
	heap_place(h, i, slot);
}

/* Growth never fails a start: on ENOMEM the process is out of memory for
 * 16 bytes per timer, and a timer that silently never fires is worse. */
static void heap_push(struct timer_heap *h, struct timer *t)
{
	if (h->len == h->cap) {
		uint32_t cap = h->cap ? h->cap * 2 : 64;
		struct heap_slot *slot = realloc(h->slot, cap * sizeof(*slot));
		if (!slot)
			abort();
		h->slot = slot;
		h->cap = cap;
	}
	sift_up(h, h->len++, (struct heap_slot){ t->deadline, t });
}

static void heap_remove(struct timer_heap *h, struct timer *t)
{
	uint32_t i = t->heap_index;
	struct heap_slot last = h->slot[--h->len];

	if (last.t == t)
		return;
	if (i && h->slot[(i - 1) / ARITY].deadline > last.deadline)
		sift_up(h, i, last);
	else
		sift_down(h, i, last);
}

/* ------------------------------------------------------------- timers */

static void kernel_timeout_submit(struct core *c, struct timer *t)
{
	struct io_uring_sqe *sqe = runtime__sqe(c);

	ts_from_ns(&t->ts, t->deadline);
	io_uring_prep_timeout(sqe, &t->ts, 0, IORING_TIMEOUT_ABS);
	io_uring_sqe_set_data64(sqe, tagged(t, TAG_TIMER));
}

static void kernel_timeout_remove(struct core *c, uint64_t user_data)
{
	struct io_uring_sqe *sqe = runtime__sqe(c);

	io_uring_prep_timeout_remove(sqe, user_data, 0);
	io_uring_sqe_set_data64(sqe, TAG_IGNORE);
}

void runtime__timer_start(struct core *c, struct timer *t, uint64_t deadline)
{
	t->core = c;
	t->deadline = deadline;
	t->state = TIMER_ARMED;
	heap_push(&c->timers, t);
	if (kernel_mode(c))
		kernel_timeout_submit(c, t);
}

static void timer_end(struct timer *t, enum runtime_timer_why why)
{
	t->state = TIMER_IDLE;
	t->fire(t, why);
}

static void timer_stop(struct timer *t, enum runtime_timer_why why)
{
	struct core *c = t->core;

	if (t->state != TIMER_ARMED)
		return;
	heap_remove(&c->timers, t);
	if (kernel_mode(c)) {
		/* The callback waits for the kernel: its CQE still names t. */
		t->state = TIMER_CANCELLING;
		t->cancel_why = (uint8_t)why;
		kernel_timeout_remove(c, tagged(t, TAG_TIMER));
		return;
	}
	timer_end(t, why);
}

void runtime__timer_cancel(struct timer *t)
{
	timer_stop(t, RUNTIME_TIMER_CANCELLED);
}

/* Kernel mode: the timeout's own CQE. */
void runtime__timer_cqe(struct core *c, void *ptr, int res)
{
	struct timer *t = ptr;

	if (t->state == TIMER_ARMED) {
		/* Fired (-ETIME), or failed: either way it is over. */
		heap_remove(&c->timers, t);
		timer_end(t, RUNTIME_TIMER_FIRED);
	} else if (t->state == TIMER_CANCELLING) {
		/* Removed, or it fired before the removal landed. */
		timer_end(t, res == -ETIME ? RUNTIME_TIMER_FIRED
		                                : (enum runtime_timer_why)t->cancel_why);
	}
}

void runtime__timers_fire_due(struct core *c)
{
	if (!c->timers.len || kernel_mode(c))
		return;
	uint64_t now = runtime_now();
	while (c->timers.len && c->timers.slot[0].deadline <= now) {
		struct timer *t = c->timers.slot[0].t;
		heap_remove(&c->timers, t);
		timer_end(t, RUNTIME_TIMER_FIRED);
	}
}

/* Heap mode, before the core blocks: make sure the kernel wakes it by the
 * nearest deadline. An armed timeout later than needed is replaced; one
 * earlier than needed (its timer was cancelled) is left to fire spuriously,
 * which costs one loop turn and no SQEs now. */
void runtime__timers_arm(struct core *c)
{
	if (kernel_mode(c) || !c->timers.len)
		return;
	uint64_t next = c->timers.slot[0].deadline;
	if (c->kt_deadline && c->kt_deadline <= next)
		return;
	runtime__sqe_reserve(c, 2);
	if (c->kt_deadline)
		kernel_timeout_remove(c, TAG_KTIMEOUT | (c->kt_gen << 3));
	c->kt_gen++;
	c->kt_deadline = next;
	ts_from_ns(&c->kt_ts, next);
	struct io_uring_sqe *sqe = runtime__sqe(c);
	io_uring_prep_timeout(sqe, &c->kt_ts, 0, IORING_TIMEOUT_ABS);
	io_uring_sqe_set_data64(sqe, TAG_KTIMEOUT | (c->kt_gen << 3));
}

/* Heap mode: the armed timeout completed (fired or removed). */
void runtime__ktimeout_cqe(struct core *c, uint64_t user_data, int res)
{
	(void)res;
	if ((user_data >> 3) == c->kt_gen)
		c->kt_deadline = 0;
}

/* Shutdown: every armed timer completes now (kernel mode: as soon as its
 * removal lands), told RUNTIME_TIMER_SHUTDOWN. */
void runtime__timers_shutdown(struct core *c)
{
	while (c->timers.len)
		timer_stop(c->timers.slot[c->timers.len - 1].t, RUNTIME_TIMER_SHUTDOWN);
}

void runtime__timers_free(struct core *c)
{
	free(c->timers.slot);
	memset(&c->timers, 0, sizeof(c->timers));
}

/* ------------------------------------------------------- public timers */

static void user_timer_fire(struct timer *t, enum runtime_timer_why why)
{
	struct core *c = t->core;
	t->user_fn((struct runtime_timer *)t, t->user_arg, why);
	runtime__load_sub(c); /* after the callback, which may add work */
}

int runtime_timer_start(struct runtime_timer *timer, uint64_t delay_ns,
                        runtime_timer_fn *fn, void *arg)
{
	struct core *c = this_core();
	struct timer *t = (struct timer *)timer;

	if (!c)
		return -EPERM;
	if (!t || !fn)
		return -EINVAL;
	if (t->state != TIMER_IDLE)
		return -EBUSY;
	if (atomic_load_explicit(&c->rt->shutting_down, memory_order_relaxed))
		return -ESHUTDOWN;
	uint64_t now = runtime_now();
	t->fire = user_timer_fire;
	t->user_fn = fn;
	t->user_arg = arg;
	runtime__load_add(c);
	runtime__timer_start(c, t, delay_ns > UINT64_MAX - now ? UINT64_MAX : now + delay_ns);
	return 0;
}

int runtime_timer_cancel(struct runtime_timer *timer)
{
	struct timer *t = (struct timer *)timer;

	if (!t)
		return -EINVAL;
	if (t->state == TIMER_IDLE)
		return -EALREADY;
	if (this_core() != t->core)
		return -EPERM;
	runtime__timer_cancel(t);
	return 0;
}
