/* SPDX-License-Identifier: MIT */
/*
 * timer.c - the clock, sleeps and timers: a core-local timer set behind
 * every sleep, timed wait, cancel retry and public timer - lanes of timers
 * started in deadline order, and a 4-ary min-heap for the others.
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
#include "core.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A public timer: the callback lives beside the timer, not in it, so that
 * the runtime's own timers (one in every stream, fiber and deadline) do not
 * carry two pointers they never use. */
struct user_timer {
	struct timer t; /* first: a struct runtime_timer * is a struct timer * */
	runtime_timer_fn *fn;
	void *arg;
};

_Static_assert(sizeof(struct user_timer) <= sizeof(struct runtime_timer),
               "struct runtime_timer must hold struct user_timer");

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

static void heap_place(struct timer_set *h, uint32_t i, struct heap_slot slot)
{
	h->slot[i] = slot;
	slot.t->heap_index = i;
}

static void sift_up(struct timer_set *h, uint32_t i, struct heap_slot slot)
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

static void sift_down(struct timer_set *h, uint32_t i, struct heap_slot slot)
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
static void heap_push(struct timer_set *h, struct timer *t)
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

static void heap_remove(struct timer_set *h, struct timer *t)
{
	uint32_t i = t->heap_index;
	struct heap_slot last = h->slot[--h->len];

	if (last.t == t)
		return;
	if (i && before(&last, &h->slot[(i - 1) / ARITY]))
		sift_up(h, i, last);
	else
		sift_down(h, i, last);
}

/* ------------------------------------------------------------------ lanes */

/*
 * Most timers start in deadline order: one timeout added to a clock that
 * only moves on (sleeps of one length, idle timeouts, I/O deadlines). A
 * lane is a ring of slots in deadline order: a timer whose deadline is no
 * earlier than a lane's last joins at its tail and leaves from its head,
 * O(1) each way, and touches no other timer - where sifting the heap
 * writes the index of every timer it moves, each on some fiber's stack
 * page: at a million sleepers, most of what a sleep cost. A stopped timer
 * leaves a hole (t NULL, its deadline kept) that the ends skip; holes are
 * closed when they outnumber the timers. Positions run free (uint32_t,
 * wrapping); t->heap_index holds a lane timer's.
 */
#define LANE_MIN_HOLES 64u

static struct heap_slot *lane_at(const struct timer_lane *l, uint32_t pos)
{
	return &l->slot[pos & (l->cap - 1)];
}

static bool lane_empty(const struct timer_lane *l)
{
	return l->head == l->tail;
}

/* The lane a timer due at deadline joins: of those whose last is no later,
 * the one whose last is latest (timers of one length keep to one lane),
 * else an empty one; -1 if none (the heap). NEVER goes to the heap: it
 * would close a lane to every other deadline. */
static int lane_pick(const struct timer_set *ts, uint64_t deadline)
{
	int best = -1, empty = -1;
	uint64_t best_last = 0;

	if (deadline == NEVER)
		return -1;
	for (int i = 0; i < TIMER_LANES; i++) {
		const struct timer_lane *l = &ts->lane[i];
		if (lane_empty(l)) {
			empty = empty < 0 ? i : empty;
			continue;
		}
		uint64_t last = lane_at(l, l->tail - 1)->deadline;
		if (last <= deadline && (best < 0 || last > best_last)) {
			best = i;
			best_last = last;
		}
	}
	return best >= 0 ? best : empty;
}

/* Growth never fails a start, as for the heap. */
static void lane_grow(struct timer_lane *l)
{
	uint32_t cap = l->cap ? l->cap * 2 : 64;
	struct heap_slot *slot = (malloc)(cap * sizeof(*slot));

	if (!slot)
		abort();
	for (uint32_t p = l->head; p != l->tail; p++)
		slot[p & (cap - 1)] = *lane_at(l, p);
	free(l->slot);
	l->slot = slot;
	l->cap = cap;
}

static void lane_push(struct timer_set *ts, int lane, struct timer *t)
{
	struct timer_lane *l = &ts->lane[lane];

	if (l->tail - l->head == l->cap)
		lane_grow(l);
	*lane_at(l, l->tail) = (struct heap_slot){ t->deadline, t };
	t->heap_index = l->tail++;
	t->lane = (uint8_t)(lane + 1);
}

/* Close the holes: the timers move towards the head, in order. */
static void lane_compact(struct timer_lane *l)
{
	uint32_t to = l->head;

	for (uint32_t p = l->head; p != l->tail; p++) {
		struct heap_slot s = *lane_at(l, p);
		if (s.t) {
			*lane_at(l, to) = s;
			s.t->heap_index = to++;
		}
	}
	l->tail = to;
	l->holes = 0;
}

static void lane_remove(struct timer_lane *l, struct timer *t)
{
	lane_at(l, t->heap_index)->t = NULL;
	l->holes++;
	while (!lane_empty(l) && !lane_at(l, l->head)->t) {
		l->head++;
		l->holes--;
	}
	while (!lane_empty(l) && !lane_at(l, l->tail - 1)->t) {
		l->tail--;
		l->holes--;
	}
	if (l->holes > LANE_MIN_HOLES && l->holes > l->tail - l->head - l->holes)
		lane_compact(l);
}

/* ------------------------------------------------------------- the set */

/* The armed timer due first, by (deadline, start order): the heap's top or
 * a lane's head (never a hole); NULL if none is armed. */
static struct timer *first_due(const struct timer_set *ts)
{
	const struct heap_slot *best = ts->len ? &ts->slot[0] : NULL;

	for (int i = 0; i < TIMER_LANES; i++) {
		const struct timer_lane *l = &ts->lane[i];
		if (!lane_empty(l) && (!best || before(lane_at(l, l->head), best)))
			best = lane_at(l, l->head);
	}
	return best ? best->t : NULL;
}

/* The set's lower bound made exact again (it only ever falls behind). */
static uint64_t refresh_lower(struct timer_set *ts)
{
	const struct timer *t = first_due(ts);
	ts->lower = t ? t->deadline : NEVER;
	return ts->lower;
}

/* A bound still ahead of the clock may be early (its timer stopped since):
 * the core then wakes once for nothing, and refreshes it. */
uint64_t runtime__timers_next(struct core *c)
{
	return c->timers.lower > c->now ? c->timers.lower : refresh_lower(&c->timers);
}

static void set_remove(struct timer_set *ts, struct timer *t)
{
	if (t->lane)
		lane_remove(&ts->lane[t->lane - 1], t);
	else
		heap_remove(ts, t);
	ts->armed--;
	stat_add(&t->core->stats.timers, -1);
}

/* ---------------------------------------------------------------- timers */

void runtime__timer_start(struct core *c, struct timer *t, uint64_t deadline)
{
	int lane = lane_pick(&c->timers, deadline);

	t->core = c;
	t->deadline = deadline;
	t->seq = c->timers.seq++;
	t->state = TIMER_ARMED;
	if (deadline < c->timers.lower)
		c->timers.lower = deadline;
	if (lane >= 0) {
		lane_push(&c->timers, lane, t);
	} else {
		t->lane = 0;
		heap_push(&c->timers, t);
	}
	c->timers.armed++;
	stat_add(&c->stats.timers, 1);
}

bool runtime__timer_stop(struct timer *t)
{
	if (t->state != TIMER_ARMED)
		return false;
	set_remove(&t->core->timers, t);
	t->state = TIMER_IDLE;
	return true;
}

#ifdef RUNTIME_DEBUG
/* --enable-debug: every armed timer still says it is armed, where. A
 * mismatch means its storage was freed, reused or overwritten while armed,
 * and the set can no longer be trusted: abort with the reason. */
static bool slot_broken(const struct heap_slot *s, uint8_t lane, uint32_t at)
{
	const struct timer *t = s->t;
	return t->heap_index != at || t->lane != lane || t->state != TIMER_ARMED ||
	       t->deadline != s->deadline;
}

static void timers_check(const struct timer_set *ts)
{
	bool broken = false;

	for (uint32_t i = 0; i < ts->len; i++)
		broken |= slot_broken(&ts->slot[i], 0, i);
	for (int i = 0; i < TIMER_LANES; i++) {
		const struct timer_lane *l = &ts->lane[i];
		for (uint32_t p = l->head; p != l->tail; p++)
			if (lane_at(l, p)->t)
				broken |= slot_broken(lane_at(l, p), (uint8_t)(i + 1), p);
	}
	if (broken) {
		setenv("RUNTIME_MISUSE", "abort", 1);
		runtime__misuse(-EFAULT, "timer set check", "a timer's storage was freed, "
		                "reused or overwritten while it was armed");
	}
}
#else
static inline void timers_check(const struct timer_set *ts)
{
	(void)ts;
}
#endif

/* The loop's timer phase: callbacks queued by cancels, then every timer
 * that is due by the clock, read once for the turn (also when no timer is
 * armed: it dates the waits that begin in the next run phase, for
 * runtime_dump). */
uint64_t runtime_now_coarse(void)
{
	struct core *c = runtime__tls_core;

	if (!c)
		return runtime_now();
	if (!c->now_fresh) { /* the core waited since: read once for the turn */
		c->now = runtime_now();
		c->now_fresh = true;
	}
	return c->now;
}

void runtime__timers_run(struct core *c)
{
	for (struct qnode *n; (n = queue_pop(&c->timers.done));) {
		struct timer *t = container_of(n, struct timer, done);
		t->state = TIMER_IDLE;
		t->fire(t, (enum runtime_timer_why)t->why);
	}
	timers_check(&c->timers);
	c->now = runtime_now();
	c->now_fresh = true;
	if (c->now < c->timers.lower)
		return;
	for (struct timer *t; (t = first_due(&c->timers)) && t->deadline <= c->now;) {
		set_remove(&c->timers, t);
		t->state = TIMER_IDLE;
		t->fire(t, RUNTIME_TIMER_FIRED);
	}
	refresh_lower(&c->timers);
}

static void collect_on_shutdown(struct timer_set *ts, struct queue *ending)
{
	for (uint32_t i = 0; i < ts->len; i++)
		if (ts->slot[i].t->on_shutdown)
			queue_push(ending, &ts->slot[i].t->done);
	for (int i = 0; i < TIMER_LANES; i++) {
		struct timer_lane *l = &ts->lane[i];
		for (uint32_t p = l->head; p != l->tail; p++)
			if (lane_at(l, p)->t && lane_at(l, p)->t->on_shutdown)
				queue_push(ending, &lane_at(l, p)->t->done);
	}
}

/* Shutdown: every public and named timer completes now, told
 * RUNTIME_TIMER_SHUTDOWN, and so do callbacks already queued. Internal
 * timers stay: their fibers are cancelled and stop them. */
void runtime__timers_shutdown(struct core *c)
{
	struct queue ending;

	queue_init(&ending);
	collect_on_shutdown(&c->timers, &ending);
	for (struct qnode *n; (n = queue_pop(&ending));) {
		struct timer *t = container_of(n, struct timer, done);
		runtime__timer_stop(t);
		t->fire(t, RUNTIME_TIMER_SHUTDOWN);
	}
	for (struct qnode *n; (n = queue_pop(&c->timers.done));) {
		struct timer *t = container_of(n, struct timer, done);
		t->state = TIMER_IDLE;
		t->fire(t, (enum runtime_timer_why)t->why);
	}
}

void runtime__timers_free(struct core *c)
{
	free(c->timers.slot);
	for (int i = 0; i < TIMER_LANES; i++)
		free(c->timers.lane[i].slot);
	memset(&c->timers, 0, sizeof(c->timers));
}

/* ------------------------------------------------------ lazy deadlines */

struct lazy_deadline *runtime__lazy_due(struct timer *t)
{
	struct lazy_deadline *d = container_of(t, struct lazy_deadline, timer);

	if (!d->waiting) {
		t->core->timers.lingering--;
		return NULL;
	}
	if (d->wait > t->deadline) { /* moved later */
		runtime__timer_start(t->core, t, d->wait);
		return NULL;
	}
	d->waiting = false; /* once: the wait may go on until it is over */
	return d;
}

void runtime__lazy_arm(struct core *c, struct lazy_deadline *d)
{
	struct timer *t = &d->timer;

	runtime__timer_stop(t); /* armed later than the wait's deadline */
	runtime__timer_start(c, t, d->wait); /* NEVER too: a wait that only a
	                                        cancel ends is no deadlock */
}

void runtime__lazy_drop(struct lazy_deadline *d)
{
	if (runtime__timer_stop(&d->timer) && !d->waiting)
		d->timer.core->timers.lingering--;
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

static void background_timer_fire(struct timer *t, enum runtime_timer_why why)
{
	struct user_timer *u = container_of(t, struct user_timer, t);

	u->fn((struct runtime_timer *)u, u->arg, why);
}

/* A background timer adds no work: nothing to take back; this one does. */
static void user_timer_fire(struct timer *t, enum runtime_timer_why why)
{
	struct core *c = t->core;

	background_timer_fire(t, why);
	runtime__load_sub(c); /* after the callback, which may add work */
}

static int timer_start(struct runtime_timer *timer, uint64_t delay_ns, runtime_timer_fn *fn,
                       void *arg, bool background, const char *caller)
{
	struct core *c = this_core();
	struct user_timer *u = (struct user_timer *)timer;

	if (!c)
		return runtime__misuse(-EPERM, caller, MISUSE_OUTSIDE_CORE);
	if (!u || !fn)
		return -EINVAL;
	struct timer *t = &u->t;
	if (t->state != TIMER_IDLE)
		return runtime__misuse(-EBUSY, caller, "the timer is armed: its storage is "
		                       "in use until it fires or is cancelled");
	if (runtime__is_shutting_down(c->rt))
		return -ESHUTDOWN;
	t->fire = background ? background_timer_fire : user_timer_fire;
	t->on_shutdown = true;
	u->fn = fn;
	u->arg = arg;
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
	queue_push(&t->core->timers.done, &t->done);
	return 0;
}
