/* SPDX-License-Identifier: MIT */
/*
 * wait.c - how a fiber waits on a sync primitive; one protocol for all of
 * them (sync.c, sem.c, chan.c).
 *
 * A fiber that must wait puts a waiter in the primitive's queue, under the
 * primitive's spinlock (a select puts one in each channel's), all pointing
 * at one struct wait on its stack, and suspends. Exactly one party ends the
 * wait, by winning its claim (one CAS):
 *  - a waker, holding the queue's lock: it unlinks the waiter, hands over
 *    what the waiter asked for (a resource, a channel element, the mutex)
 *    and, once it has dropped the lock, resumes the fiber - directly on
 *    the fiber's own core, else through that core's inbox;
 *  - the fiber's timeout or cancel, on its own core: it unlinks the
 *    fiber's waiters (each under its queue's lock) and resumes the fiber
 *    with -ETIMEDOUT or -ECANCELED.
 * A waker that meets a waiter whose wait is claimed already unlinks it and
 * serves the next one: a waiter that timed out or was cancelled never
 * swallows a wake-up meant for another, and leaves its queue in O(1).
 * A wake-up that wins the race against a cancel is kept: the call
 * succeeds, and the cancel shows at the fiber's next blocking call.
 *
 * Queues start zeroed (public storage structs are zero-initialised), so an
 * empty list is set up on first use, under the lock.
 */
#include "core.h"
#include "wait.h"

#include "cpu.h"

/* ------------------------------------------------------------- spinlock */

/* Held for a few instructions, never across a switch: a fiber cannot be
 * preempted by another fiber of its core while it holds one. */
void runtime__spin_lock(struct spin *s)
{
	while (atomic_exchange_explicit(&s->held, 1, memory_order_acquire))
		while (atomic_load_explicit(&s->held, memory_order_relaxed))
			cpu_relax();
}

void runtime__spin_unlock(struct spin *s)
{
	atomic_store_explicit(&s->held, 0, memory_order_release);
}

/* ----------------------------------------------------------------- queue */

static void waitq_ready(struct waitq *q)
{
	if (!q->list.head.next)
		dlist_init(&q->list);
}

/* len changes only under the lock: a plain load and store (no locked
 * instruction). A fast path that reads it without the lock needs the
 * queueing side's runtime__waitq_publish for its Dekker handshake. */
static void len_add(struct waitq *q, int d)
{
	uint32_t n = atomic_load_explicit(&q->len, memory_order_relaxed);
	atomic_store_explicit(&q->len, n + (uint32_t)d, memory_order_relaxed);
}

/* Under the queue's lock. */
void runtime__waitq_add(struct waitq *q, struct waiter *w)
{
	waitq_ready(q);
	dlist_push_back(&q->list, &w->link);
	len_add(q, 1);
}

/* After runtime__waitq_add, before looking at the state a lock-free fast
 * path changes (sem.c, sync.c): a sequentially consistent read-modify-write
 * of len, so that of "queue, then look" and "change, then look at len" one
 * side always sees the other. (A seq_cst fence would do, but
 * ThreadSanitizer does not understand fences.) */
void runtime__waitq_publish(struct waitq *q)
{
	atomic_fetch_add_explicit(&q->len, 0, memory_order_seq_cst);
}

/* Under the queue's lock; a no-op if w is not linked any more. */
static void waitq_unlink(struct waitq *q, struct waiter *w)
{
	if (w->link.next == &w->link)
		return;
	dlist_remove(&w->link);
	len_add(q, -1);
}

/* Under the queue's lock: take the caller's own waiter back out (it found
 * what it waited for before suspending). */
void runtime__waitq_remove(struct waitq *q, struct waiter *w)
{
	waitq_unlink(q, w);
}

static bool claim(struct wait *w)
{
	int pending = WAIT_PENDING;
	return atomic_compare_exchange_strong_explicit(&w->state, &pending, WAIT_CLAIMED,
	                                               memory_order_acq_rel, memory_order_acquire);
}

/* Under the queue's lock: the first waiter (the last with lifo) whose wait
 * this call wins, unlinked, or NULL. Waiters whose wait was claimed
 * elsewhere are unlinked on the way. The caller hands over, drops the lock
 * and calls runtime__wait_wake(). */
struct waiter *runtime__waitq_pick(struct waitq *q, bool lifo)
{
	if (!atomic_load_explicit(&q->len, memory_order_relaxed))
		return NULL;
	while (!dlist_empty(&q->list)) {
		struct dnode *n = lifo ? q->list.head.prev : q->list.head.next;
		struct waiter *w = container_of(n, struct waiter, link);
		waitq_unlink(q, w);
		if (claim(w->wait)) {
			w->wait->winner = w;
			return w;
		}
	}
	return NULL;
}

/* Under the lock: win every waiter of q, oldest first, as a list for
 * runtime__wake_list. */
struct wait *runtime__waitq_take_all(struct waitq *q)
{
	struct wait *head = NULL, **tail = &head;

	for (struct waiter *x; (x = runtime__waitq_pick(q, false));) {
		*tail = x->wait;
		tail = &x->wait->next;
	}
	*tail = NULL;
	return head;
}

/* Wake every wait of such a list, after the lock is dropped (a fiber on
 * another core may return as soon as it is woken: next is read first). */
void runtime__wake_list(struct wait *w, int res)
{
	while (w) {
		struct wait *next = w->next;
		runtime__wait_wake(w, res);
		w = next;
	}
}

/* ------------------------------------------------------------------ wait */

/* A waker that won the claim: resume the fiber with res (any thread; the
 * wait stays valid until the fiber runs, and only this call resumes it). */
void runtime__wait_wake(struct wait *w, int res)
{
	struct fiber *f = w->fiber;

	w->res = res;
	runtime__resume_from_anywhere(f, res);
}

/* Timeout or cancel, on the fiber's own core: if no waker won, take the
 * fiber's waiters out of their queues and resume it with res. */
static void abandon(struct wait *w, int res)
{
	if (!claim(w))
		return; /* a waker won: its resume is on its way */
	runtime__wait_unlink_all(w);
	w->res = res;
	runtime__resume(w->fiber, res);
}

void runtime__wait_interrupt(struct fiber *f, int res)
{
	abandon(f->wait_obj, res);
}

void runtime__wait_timer_fire(struct timer *t, enum runtime_timer_why why)
{
	(void)why;
	abandon(container_of(t, struct wait, timer), -ETIMEDOUT);
}

void runtime__wait_init(struct wait *w, struct waiter *waiters, unsigned n)
{
	w->fiber = this_fiber();
	atomic_init(&w->state, WAIT_PENDING);
	w->res = 0;
	w->winner = NULL;
	w->waiters = waiters;
	w->nwaiters = n;
	w->timer.state = TIMER_IDLE;
	for (unsigned i = 0; i < n; i++) {
		waiters[i].wait = w;
		waiters[i].link.prev = waiters[i].link.next = &waiters[i].link;
	}
}

/* After a select's wait: a waker unlinked its own waiter; take the others
 * out of their queues. */
void runtime__wait_unlink_all(struct wait *w)
{
	for (unsigned i = 0; i < w->nwaiters; i++) {
		struct waiter *x = &w->waiters[i];
		runtime__spin_lock(x->lock);
		waitq_unlink(x->q, x);
		runtime__spin_unlock(x->lock);
	}
}

/*
 * A sync call is about to wait: *deadline receives the wait's deadline (the
 * fiber's, or timeout_ns from now - negative: none - whichever is first),
 * and the result is 0, or -ECANCELED / -ETIMEDOUT if the fiber may not wait.
 * (A call that need not wait succeeds even then, so that a cancelled fiber
 * can still take a lock or drain a channel to clean up.)
 */
int runtime__wait_begin(const struct fiber *f, int64_t timeout_ns, uint64_t *deadline)
{
	*deadline = f->deadline;
	if (timeout_ns >= 0) /* no clock read for the common case */
		*deadline = deadline_min(*deadline, deadline_add(runtime_now(), (uint64_t)timeout_ns));
	if (fiber_cancelled(f))
		return -ECANCELED;
	if (*deadline != NEVER && runtime_now() >= *deadline)
		return -ETIMEDOUT;
	return 0;
}
