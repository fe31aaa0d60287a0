/* SPDX-License-Identifier: MIT */
/*
 * wait.h - the protocol every sync primitive waits with (wait.c): a
 * waiting fiber's struct wait on its stack, one waiter per queue it waits
 * in (a select has one per channel), and whoever claims the wait first -
 * a waker from any thread, the deadline, a cancel - ends it.
 */
#ifndef RUNTIME_WAIT_H
#define RUNTIME_WAIT_H

#include "core.h"

/* wait.c: the protocol every sync primitive waits with. */
struct spin {
	_Atomic int held;
};

void runtime__spin_lock(struct spin *s);
void runtime__spin_unlock(struct spin *s);

/* Waiters of one primitive, under the primitive's spinlock. len may be
 * read without it, as the Dekker half of a lock-free fast path. */
struct waitq {
	_Atomic uint32_t len;
	struct dlist list;          /* zeroed: set up on first use */
};

enum { WAIT_PENDING, WAIT_CLAIMED };

struct wait;

/* One queue entry of a waiting fiber (a select has one per channel). */
struct waiter {
	struct dnode link;          /* in q, under *lock */
	struct wait *wait;
	struct spin *lock;
	struct waitq *q;
	void *data;                 /* handed over: a resource; an element's
	                               source (send) or destination (receive) */
	unsigned index;             /* select: which operation */
};

/* A suspended fiber's wait, on its stack; ended by whoever wins state. */
struct wait {
	struct fiber *fiber;
	_Atomic int state;          /* WAIT_PENDING, then WAIT_CLAIMED */
	int res;                    /* what ended it */
	struct waiter *winner;      /* the waiter a waker served */
	struct waiter *waiters;
	unsigned nwaiters;
	struct timer timer;         /* its deadline */
	struct wait *next;          /* a waker's list of waits to wake */
};

void runtime__wait_init(struct wait *w, struct waiter *waiters, unsigned n);
void runtime__waitq_add(struct waitq *q, struct waiter *w);
void runtime__waitq_publish(struct waitq *q);
void runtime__waitq_remove(struct waitq *q, struct waiter *w);
struct waiter *runtime__waitq_pick(struct waitq *q, bool lifo);
void runtime__wait_wake(struct wait *w, int res);
struct wait *runtime__waitq_take_all(struct waitq *q);
void runtime__wake_list(struct wait *w, int res);
void runtime__wait_interrupt(struct fiber *f, int res);
void runtime__wait_timer_fire(struct timer *t, enum runtime_timer_why why);
void runtime__wait_unlink_all(struct wait *w);
int runtime__wait_begin(const struct fiber *f, int64_t timeout_ns, uint64_t *deadline);

/*
 * Suspend the calling fiber on w, whose waiters are queued (and every lock
 * dropped), until a waker, the deadline (NEVER: none) or - if cancellable -
 * a cancel ends it. Returns what ended it: the waker's result, -ETIMEDOUT
 * or -ECANCELED. Afterwards none of w's waiters is in any queue. Inline:
 * every call level between a blocking call and the switch is a return the
 * CPU mispredicts when the fiber resumes (a channel ping-pong ran 25 %
 * faster with one level fewer).
 */
static inline __attribute__((always_inline)) int
runtime__wait_suspend(struct wait *w, enum block why, uint64_t deadline, bool cancellable)
{
	struct core *c = w->fiber->core;

	if (deadline != NEVER) {
		w->timer.fire = runtime__wait_timer_fire;
		w->timer.on_shutdown = false;
		runtime__timer_start(c, &w->timer, deadline);
	}
	c->sched.xparked++; /* any thread may post, signal or send: no deadlock */
	runtime__suspend(c, why, cancellable ? runtime__wait_interrupt : runtime__ignore_interrupt, w);
	c->sched.xparked--;
	if (deadline != NEVER)
		runtime__timer_stop(&w->timer);
	if (w->nwaiters > 1)
		runtime__wait_unlink_all(w);
	return w->res;
}

#endif /* RUNTIME_WAIT_H */
