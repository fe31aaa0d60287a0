/* SPDX-License-Identifier: MIT */
/*
 * idle.c - a stream waiting for its next bytes with no fiber
 * (runtime_stream_idle): an idle keep-alive connection costs its stream's
 * few hundred bytes instead of a fiber stack. The caller's fiber hands the
 * stream to its core and ends; the stream's armed multishot recv keeps
 * watching the socket. The first of four things ends the wait: bytes (or
 * the end of stream, or an error) come (stream.c calls runtime__idle_wake),
 * the deadline passes (the record's timer), the runtime drains (each core's
 * drain node, inbox.c) or shuts down (runtime__core_shutdown): stream.c
 * finds the waiting records among the core's streams. Then a fiber
 * from the stack cache runs the caller's continuation with why.
 *
 * The record lives in the stream and is the core's alone, so nothing is
 * locked or allocated. From the wait until the continuation's fiber has
 * started, the stream is the core's: its calls from fibers get -EBUSY.
 *
 * While it waits, a record counts in its core's load, as a fiber blocked
 * in a read would: the run goes on. Its multishot recv is in flight, so a
 * lone core never takes it for a deadlock.
 *
 * Where the engine cannot watch the socket for a fiberless wait (io_uring
 * on a kernel before 6.0, without multishot recv) the continuation's fiber
 * starts at once and polls for the bytes itself: the same contract, with a
 * stack held while it waits.
 */
#include "core.h"

#include <poll.h>

#define SPAWN_RETRY_NS (1000 * 1000) /* no stack for the continuation: retry */

/* ----------------------------------------------------------- the fiber */

/* The continuation's fiber: what it needs is copied out first, since the
 * continuation may close (free) the stream that holds the record. */
static void run_continuation(struct idle *w)
{
	runtime_stream_idle_fn *fn = w->fn;
	void *arg = w->arg;
	int why = w->why;

	w->state = IDLE_NONE;
	stat_add(&w->dl.timer.core->stats.idle, -1);
	fn(arg, why);
}

static void continuation_main(void *p)
{
	run_continuation(p);
}

/* The fallback: the fiber waits for readiness itself, under the record's
 * deadline, while the record waits on the core's list as any other; a
 * drain or a shutdown ends the poll early (runtime__idle_wake expires it,
 * having set why). */
static void poller_main(void *p)
{
	struct idle *w = p;

	if (w->state == IDLE_WAITING) {
		w->poller = runtime_fiber_self();
		runtime_deadline_set(w->dl.wait);
		int rc = runtime_poll(w->fd, POLLIN, -1);
		runtime_deadline_set(0);
		w->poller = NULL;
		if (w->state == IDLE_WAITING) { /* the poll ended it */
			w->why = rc >= 0 ? 0 : rc == -ETIMEDOUT ? -ETIMEDOUT : -ECANCELED;
		}
	}
	run_continuation(w);
}

/* ------------------------------------------------------------- waking */

static void spawn_retry(struct timer *t, enum runtime_timer_why why);

/* Start the continuation's fiber (cancelled at once in a shutdown). No
 * stack to be had: try again in a millisecond, the deadline's timer
 * serving as the retry's; the record stays the core's load meanwhile. */
static void start_continuation(struct idle *w)
{
	struct core *c = w->dl.timer.core;

	if (runtime__fiber_spawn_here(c, continuation_main, w) == 0) {
		runtime__load_sub(c); /* the fiber carries the load from here */
		return;
	}
	runtime__lazy_begin(c, &w->dl, deadline_add(c->now, SPAWN_RETRY_NS), spawn_retry);
}

static void spawn_retry(struct timer *t, enum runtime_timer_why why)
{
	struct lazy_deadline *d = runtime__lazy_due(t);

	(void)why;
	if (d)
		start_continuation(container_of(d, struct idle, dl));
}

void runtime__idle_wake(struct idle *w, int why)
{
	if (w->state != IDLE_WAITING)
		return;
	w->why = why;
	w->state = IDLE_WAKING;
	if (w->polling) { /* its fiber goes on with why */
		if (w->poller)
			runtime_fiber_expire(w->poller);
		return;
	}
	runtime__lazy_end(&w->dl);
	start_continuation(w);
}

/* The deadline's timer is lazy (timer.c): an idle timeout counted from
 * each request costs no heap push and pop per request. */
static void deadline_fire(struct timer *t, enum runtime_timer_why why)
{
	struct lazy_deadline *d = runtime__lazy_due(t);

	(void)why;
	if (d)
		runtime__idle_wake(container_of(d, struct idle, dl), -ETIMEDOUT);
}

/* ------------------------------------------------------------- waiting */

/* The caller (stream.c) has checked the stream; w->state is IDLE_NONE.
 * polling: the engine cannot watch the socket, a fiber polls instead. */
void runtime__idle_begin(struct core *c, struct idle *w, int fd, uint64_t deadline,
                         runtime_stream_idle_fn *fn, void *arg, bool polling)
{
	w->fn = fn;
	w->arg = arg;
	w->fd = fd;
	w->why = 0;
	w->poller = NULL;
	w->polling = polling;
	w->state = IDLE_WAITING;
	stat_add(&c->stats.idle, 1);
	w->dl.timer.core = c;
	w->dl.wait = deadline; /* the poller's, or the timer's below */
	if (polling && runtime__fiber_spawn_here(c, poller_main, w) < 0)
		w->polling = false; /* no stack: wake at once, the read will wait */
	if (!w->polling) {
		runtime__load_add(c); /* no deadline: no timer, the recv is in flight */
		if (deadline != NEVER)
			runtime__lazy_begin(c, &w->dl, deadline, deadline_fire);
	}
	if (polling && !w->polling)
		runtime__idle_wake(w, 0);
	else if (runtime_draining(c->rt))
		runtime__idle_wake(w, -ESHUTDOWN);
	else if (runtime__is_shutting_down(c->rt))
		runtime__idle_wake(w, -ECANCELED);
}

/* The stream closes (no wait under way), or a run that failed ends before
 * the stream is freed (the continuation never runs): drop the record's
 * timer. */
void runtime__idle_forget(struct idle *w)
{
	runtime__lazy_drop(&w->dl);
	if (w->state != IDLE_NONE)
		stat_add(&w->dl.timer.core->stats.idle, -1);
	w->state = IDLE_NONE;
}
