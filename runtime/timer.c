/* SPDX-License-Identifier: MIT */
/*
 * timer.c - the clock, sleeps and timers: a core-local 4-ary min-heap of
 * deadlines behind every sleep, timed wait, cancel retry and public timer.
 *
 * Due timers are fired by the loop from the clock, read once per turn.
 * Only when the core is about to block does its engine tell the kernel
 * the nearest deadline (io_uring: one absolute IORING_OP_TIMEOUT, replaced
 * only when an earlier deadline arrives; epoll: the timeout of the wait),
 * so starting and stopping a timer touches no SQE and makes no syscall.
 * (bench/micro's timer_add_cancel_ns compares this with one kernel
 * timeout per timer: README.)
 *
 * Public timers have one contract: whatever ends one - its deadline, a
 * cancel or a shutdown - its callback runs exactly once, from the core's
 * loop, never inside a fiber or inside the call that ended it.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(sizeof(struct timer) <= sizeof(struct runtime_timer),
               "struct runtime_timer must hold struct timer");

uint64_t runtime_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ heap */

/*
 * A 4-ary min-heap ordered by (deadline, start order), whose slots carry
 * the deadline next to the pointer: sifting compares keys in the array and
 * chases a timer (each lives on some fiber's stack page) only to break a
 * tie, and 4 children per node halve the depth.
 */
#define ARITY 4

static bool before(const struct heap_slot *a, const struct heap_slot *b)
{
	if (likely(a->deadline != b->deadline))
		return a->deadline < b->deadline;
	return a->t->seq < b->t->seq;
}

static void heap_place(struct timer_heap *h, uint32_t i, struct heap_slot slot)
{
	h->slot[i] = slot;
	slot.t->heap_index = i;
}

static void sift_up(struct timer_heap *h, uint32_t i, struct heap_slot slot)
{
	while (i) {
		uint32_t parent = (i - 1) / ARITY;
		if (!before(&slot, &h->slot[parent]))
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
			if (before(&h->slot[c], &h->slot[best]))
				best = c;
		if (!before(&h->slot[best], &slot))
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
		/* (realloc): no injected failure here, where one would abort. */
		struct heap_slot *slot = (realloc)(h->slot, cap * sizeof(*slot));
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

	stat_add(&t->core->stats.timers, -1);
	struct heap_slot last = h->slot[--h->len];

	if (last.t == t)
		return;
	if (i && before(&last, &h->slot[(i - 1) / ARITY]))
		sift_up(h, i, last);
	else
		sift_down(h, i, last);
}

/* ---------------------------------------------------------------- timers */

void runtime__timer_start(struct core *c, struct timer *t, uint64_t deadline)
{
	t->core = c;
	t->deadline = deadline;
	t->seq = c->timer_seq++;
	t->state = TIMER_ARMED;
	heap_push(&c->timers, t);
	stat_add(&c->stats.timers, 1);
}

bool runtime__timer_stop(struct timer *t)
{
	if (t->state != TIMER_ARMED)
		return false;
	heap_remove(&t->core->timers, t);
	t->state = TIMER_IDLE;
	return true;
}

#ifdef RUNTIME_DEBUG
/* --enable-debug: every armed timer still says it is armed, where. A
 * mismatch means its storage was freed, reused or overwritten while armed,
 * and the heap can no longer be trusted: abort with the reason. */
static void heap_check(const struct timer_heap *h)
{
	for (uint32_t i = 0; i < h->len; i++) {
		const struct timer *t = h->slot[i].t;
		if (t->heap_index != i || t->state != TIMER_ARMED ||
		    t->deadline != h->slot[i].deadline) {
			setenv("RUNTIME_MISUSE", "abort", 1);
			runtime__misuse(-EFAULT, "timer heap check", "a timer's storage was freed, "
			                "reused or overwritten while it was armed");
		}
	}
}
#else
static inline void heap_check(const struct timer_heap *h)
{
	(void)h;
}
#endif

/* The loop's timer phase: callbacks queued by cancels, then every timer
 * that is due by the clock, read once for the turn (also when no timer is
 * armed: it dates the waits that begin in the next run phase, for
 * runtime_dump). */
void runtime__timers_run(struct core *c)
{
	for (struct qnode *n; (n = queue_pop(&c->timer_done));) {
		struct timer *t = container_of(n, struct timer, done);
		t->state = TIMER_IDLE;
		t->fire(t, (enum runtime_timer_why)t->why);
	}
	heap_check(&c->timers);
	c->now = runtime_now();
	while (c->timers.len && c->timers.slot[0].deadline <= c->now) {
		struct timer *t = c->timers.slot[0].t;
		heap_remove(&c->timers, t);
		t->state = TIMER_IDLE;
		t->fire(t, RUNTIME_TIMER_FIRED);
	}
}

/* Shutdown: every public and named timer completes now, told
 * RUNTIME_TIMER_SHUTDOWN, and so do callbacks already queued. Internal
 * timers stay: their fibers are cancelled and stop them. */
void runtime__timers_shutdown(struct core *c)
{
	struct queue ending;

	queue_init(&ending);
	for (uint32_t i = 0; i < c->timers.len; i++)
		if (c->timers.slot[i].t->on_shutdown)
			queue_push(&ending, &c->timers.slot[i].t->done);
	for (struct qnode *n; (n = queue_pop(&ending));) {
		struct timer *t = container_of(n, struct timer, done);
		runtime__timer_stop(t);
		t->fire(t, RUNTIME_TIMER_SHUTDOWN);
	}
	for (struct qnode *n; (n = queue_pop(&c->timer_done));) {
		struct timer *t = container_of(n, struct timer, done);
		t->state = TIMER_IDLE;
		t->fire(t, (enum runtime_timer_why)t->why);
	}
}

void runtime__timers_free(struct core *c)
{
	free(c->timers.slot);
	memset(&c->timers, 0, sizeof(c->timers));
}

/* ------------------------------------------------------ lazy deadlines */

static void lazy_fire(struct timer *t, enum runtime_timer_why why)
{
	struct lazy_deadline *d = container_of(t, struct lazy_deadline, timer);

	(void)why;
	if (!d->waiting) {
		t->core->dl_lingering--;
		return;
	}
	if (d->wait > t->deadline) { /* moved later */
		runtime__timer_start(t->core, t, d->wait);
		return;
	}
	d->waiting = false; /* once: the wait may go on until it is over */
	d->expire(d);
}

void runtime__lazy_arm(struct core *c, struct lazy_deadline *d)
{
	struct timer *t = &d->timer;

	runtime__timer_stop(t); /* armed later than the wait's deadline */
	t->fire = lazy_fire;
	runtime__timer_start(c, t, d->wait); /* NEVER too: a wait that only a
	                                        cancel ends is no deadlock */
}

void runtime__lazy_drop(struct lazy_deadline *d)
{
	if (runtime__timer_stop(&d->timer) && !d->waiting)
		d->timer.core->dl_lingering--;
	d->waiting = false;
}

/* ---------------------------------------------------------------- sleep */

int runtime_sleep(uint64_t ns)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f, __func__);

	if (rc)
		return rc;
	uint64_t end = deadline_add(runtime_now(), ns);
	if (f->deadline < end)
		return runtime__suspend_until(f->core, BLOCK_SLEEP, NULL, NULL, f->deadline, -ETIMEDOUT);
	return runtime__suspend_until(f->core, BLOCK_SLEEP, NULL, NULL, end, 0);
}

/* -------------------------------------------------------- public timers */

static void user_timer_fire(struct timer *t, enum runtime_timer_why why)
{
	struct core *c = t->core;
	t->user_fn((struct runtime_timer *)t, t->user_arg, why);
	runtime__load_sub(c); /* after the callback, which may add work */
}

/* A background timer adds no work: nothing to take back. */
static void background_timer_fire(struct timer *t, enum runtime_timer_why why)
{
	t->user_fn((struct runtime_timer *)t, t->user_arg, why);
}

static int timer_start(struct runtime_timer *timer, uint64_t delay_ns, runtime_timer_fn *fn,
                       void *arg, bool background, const char *caller)
{
	struct core *c = this_core();
	struct timer *t = (struct timer *)timer;

	if (!c)
		return runtime__misuse(-EPERM, caller, MISUSE_OUTSIDE_CORE);
	if (!t || !fn)
		return -EINVAL;
	if (t->state != TIMER_IDLE)
		return runtime__misuse(-EBUSY, caller, "the timer is armed: its storage is "
		                       "in use until it fires or is cancelled");
	if (runtime__is_shutting_down(c->rt))
		return -ESHUTDOWN;
	t->fire = background ? background_timer_fire : user_timer_fire;
	t->on_shutdown = true;
	t->user_fn = fn;
	t->user_arg = arg;
	if (!background)
		runtime__load_add(c);
	runtime__timer_start(c, t, deadline_add(runtime_now(), delay_ns));
	return 0;
}

int runtime_timer_start(struct runtime_timer *timer, uint64_t delay_ns,
                        runtime_timer_fn *fn, void *arg)
{
	return timer_start(timer, delay_ns, fn, arg, false, __func__);
}

int runtime_timer_start_background(struct runtime_timer *timer, uint64_t delay_ns,
                                   runtime_timer_fn *fn, void *arg)
{
	return timer_start(timer, delay_ns, fn, arg, true, __func__);
}

int runtime_timer_cancel(struct runtime_timer *timer)
{
	struct timer *t = (struct timer *)timer;

	if (!t)
		return -EINVAL;
	if (t->state != TIMER_ARMED)
		return -EALREADY;
	if (this_core() != t->core)
		return runtime__misuse(-EPERM, __func__, MISUSE_OTHER_CORE);
	runtime__timer_stop(t);
	t->state = TIMER_ENDING;
	t->why = RUNTIME_TIMER_CANCELLED;
	queue_push(&t->core->timer_done, &t->done);
	return 0;
}
