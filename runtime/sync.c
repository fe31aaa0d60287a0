/* SPDX-License-Identifier: MIT */
/*
 * sync.c - a mutex, a condition (seed 000's Notification) and a wait
 * group, for fibers on any core, in caller-owned storage.
 *
 * Uncontended paths are one atomic operation and take no lock: locking a
 * free mutex, unlocking one nobody waits for (one CAS each on one word),
 * signalling a condition or finishing a wait group nobody waits on. Everything else waits with
 * wait.c's protocol under the object's spinlock. The mutex hands itself to
 * its first waiter on unlock (FIFO, no barging), so no fiber starves.
 */
#include "core.h"
#include "wait.h"

/* A mutex is one word: 0 when free, else its owner fiber, with the low
 * bit set while fibers wait (the owner's unlock then hands it over). */
#define CONTENDED ((uintptr_t)1)

struct mutex {
	_Atomic uintptr_t state;
	struct spin lock;
	struct waitq q;
};

struct cond {
	struct spin lock;
	struct waitq q;
};

struct waitgroup {
	_Atomic int64_t count;
	struct spin lock;
	struct waitq q;
};

_Static_assert(sizeof(struct mutex) <= sizeof(struct runtime_mutex), "runtime_mutex storage");
_Static_assert(sizeof(struct cond) <= sizeof(struct runtime_cond), "runtime_cond storage");
_Static_assert(sizeof(struct waitgroup) <= sizeof(struct runtime_waitgroup),
               "runtime_waitgroup storage");

/* ----------------------------------------------------------------- mutex */

static uintptr_t owner_of(struct fiber *f)
{
	return (uintptr_t)f;
}

/* Queue for the mutex (unless it came free) and wait for the hand-over. */
static int mutex_wait(struct mutex *m, struct fiber *f, uint64_t deadline, bool cancellable)
{
	struct wait w;
	struct waiter x = { .lock = &m->lock, .q = &m->q };

	runtime__spin_lock(&m->lock);
	/* Free: take it. Held: mark it contended, so that the owner's unlock
	 * comes through this lock and finds us queued. */
	uintptr_t s = atomic_load(&m->state), want;
	do
		want = s ? s | CONTENDED : owner_of(f);
	while (!atomic_compare_exchange_weak(&m->state, &s, want));
	if (s == 0) {
		runtime__spin_unlock(&m->lock);
		return 0;
	}
	runtime__wait_init(&w, &x, 1);
	runtime__waitq_add(&m->q, &x);
	runtime__spin_unlock(&m->lock);
	return runtime__wait_suspend(&w, BLOCK_MUTEX, deadline, cancellable); /* 0: handed over */
}

static bool try_take(struct mutex *m, struct fiber *f)
{
	uintptr_t free = 0;
	return atomic_compare_exchange_strong_explicit(&m->state, &free, owner_of(f),
	                                               memory_order_acquire, memory_order_relaxed);
}

int runtime_mutex_lock(struct runtime_mutex *mu, int64_t timeout_ns)
{
	struct mutex *m = (struct mutex *)mu;
	struct fiber *f = this_fiber();

	if (!f)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	if (!m)
		return -EINVAL;
	if (try_take(m, f))
		return 0;
	if ((atomic_load_explicit(&m->state, memory_order_relaxed) & ~CONTENDED) == owner_of(f))
		return -EDEADLK;
	uint64_t deadline;
	int rc = runtime__wait_begin(f, timeout_ns, &deadline);
	return rc ? rc : mutex_wait(m, f, deadline, true);
}

int runtime_mutex_trylock(struct runtime_mutex *mu)
{
	struct mutex *m = (struct mutex *)mu;
	struct fiber *f = this_fiber();

	if (!f)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	if (!m)
		return -EINVAL;
	return try_take(m, f) ? 0 : -EBUSY;
}

/* Contended: hand the mutex to the oldest live waiter, or free it. */
static void unlock_slow(struct mutex *m)
{
	runtime__spin_lock(&m->lock);
	struct waiter *x = runtime__waitq_pick(&m->q, false);
	uintptr_t next = 0;
	if (x)
		next = owner_of(x->wait->fiber) | (atomic_load(&m->q.len) ? CONTENDED : 0);
	atomic_store_explicit(&m->state, next, memory_order_release);
	runtime__spin_unlock(&m->lock);
	if (x)
		runtime__wait_wake(x->wait, 0);
}

int runtime_mutex_unlock(struct runtime_mutex *mu)
{
	struct mutex *m = (struct mutex *)mu;
	struct fiber *f = this_fiber();

	if (!m)
		return -EINVAL;
	uintptr_t held = owner_of(f);
	if (!f || !atomic_compare_exchange_strong_explicit(&m->state, &held, 0,
	                                                   memory_order_release,
	                                                   memory_order_relaxed)) {
		if (!f || (held & ~CONTENDED) != owner_of(f))
			return runtime__misuse(-EPERM, __func__,
			                       "the mutex is not held by the calling fiber");
		unlock_slow(m);
	}
	return 0;
}

/* ------------------------------------------------------------- condition */

int runtime_cond_wait(struct runtime_cond *cv, struct runtime_mutex *mu, int64_t timeout_ns)
{
	struct cond *c = (struct cond *)cv;
	struct mutex *m = (struct mutex *)mu;
	struct fiber *f = this_fiber();
	struct wait w;
	struct waiter x;

	if (!f)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	if (!c || !m)
		return -EINVAL;
	if ((atomic_load_explicit(&m->state, memory_order_relaxed) & ~CONTENDED) != owner_of(f))
		return runtime__misuse(-EPERM, __func__,
		                       "the mutex is not held by the calling fiber");
	uint64_t deadline;
	int rc = runtime__wait_begin(f, timeout_ns, &deadline);
	if (rc)
		return rc;
	x = (struct waiter){ .lock = &c->lock, .q = &c->q };
	runtime__wait_init(&w, &x, 1);
	runtime__spin_lock(&c->lock);
	runtime__waitq_add(&c->q, &x);
	runtime__spin_unlock(&c->lock);
	runtime_mutex_unlock(mu);
	rc = runtime__wait_suspend(&w, BLOCK_COND, deadline, true);
	/* Whatever ended the wait, the mutex is held again on return. */
	if (!try_take(m, f))
		mutex_wait(m, f, NEVER, false);
	return rc;
}

/* Wake the oldest waiter, or all of them. */
static int cond_wake(struct runtime_cond *cv, bool all)
{
	struct cond *c = (struct cond *)cv;

	if (!c)
		return -EINVAL;
	if (!atomic_load(&c->q.len))
		return 0;
	runtime__spin_lock(&c->lock);
	struct wait *woken = NULL;
	if (all) {
		woken = runtime__waitq_take_all(&c->q);
	} else {
		struct waiter *x = runtime__waitq_pick(&c->q, false);
		if (x) {
			woken = x->wait;
			woken->next = NULL;
		}
	}
	runtime__spin_unlock(&c->lock);
	runtime__wake_list(woken, 0);
	return 0;
}

int runtime_cond_signal(struct runtime_cond *cv)
{
	return cond_wake(cv, false);
}

int runtime_cond_broadcast(struct runtime_cond *cv)
{
	return cond_wake(cv, true);
}

/* ------------------------------------------------------------ wait group */

/* Dekker with runtime_waitgroup_wait: the count changes, then the waiters
 * are looked at; a waiter is queued, then the count is looked at (both
 * sequentially consistent), so one of the two sees the other. */
int runtime_waitgroup_add(struct runtime_waitgroup *wgp, int64_t delta)
{
	struct waitgroup *wg = (struct waitgroup *)wgp;

	if (!wg)
		return -EINVAL;
	int64_t now = atomic_fetch_add(&wg->count, delta) + delta;
	if (now < 0) {
		atomic_fetch_sub(&wg->count, delta);
		return -EINVAL;
	}
	if (now > 0 || delta >= 0 || !atomic_load(&wg->q.len))
		return 0;
	runtime__spin_lock(&wg->lock);
	struct wait *all = runtime__waitq_take_all(&wg->q);
	runtime__spin_unlock(&wg->lock);
	runtime__wake_list(all, 0);
	return 0;
}

int runtime_waitgroup_done(struct runtime_waitgroup *wg)
{
	return runtime_waitgroup_add(wg, -1);
}

int runtime_waitgroup_wait(struct runtime_waitgroup *wgp, int64_t timeout_ns)
{
	struct waitgroup *wg = (struct waitgroup *)wgp;
	struct fiber *f = this_fiber();
	struct wait w;
	struct waiter x;

	if (!f)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	if (!wg)
		return -EINVAL;
	if (atomic_load(&wg->count) == 0)
		return 0;
	uint64_t deadline;
	int rc = runtime__wait_begin(f, timeout_ns, &deadline);
	if (rc)
		return rc;
	x = (struct waiter){ .lock = &wg->lock, .q = &wg->q };
	runtime__wait_init(&w, &x, 1);
	runtime__spin_lock(&wg->lock);
	runtime__waitq_add(&wg->q, &x);
	runtime__waitq_publish(&wg->q); /* queued, then look: Dekker with add */
	bool zero = atomic_load(&wg->count) == 0;
	if (zero)
		runtime__waitq_remove(&wg->q, &x);
	runtime__spin_unlock(&wg->lock);
	return zero ? 0 : runtime__wait_suspend(&w, BLOCK_WAITGROUP, deadline, true);
}
