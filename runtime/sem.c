/* SPDX-License-Identifier: MIT */
/*
 * sem.c - the semaphore and resource pool (seed 003, Workflow's
 * ResourcePool); the task limiter (seed 000) is built on it in limiter.c.
 *
 * A pool holds n resources (a semaphore: n anonymous tokens). get takes
 * one or queues the caller; post gives one back and, if anyone waits,
 * hands it straight to exactly one waiter - the oldest (FIFO) or the
 * newest (LIFO: under overload, fresh callers are served while stale ones
 * time out) - so a newcomer never barges past the queue.
 *
 * Fast paths take no lock: `avail` counts free resources, and free
 * resources sit in a bounded lock-free ring (Vyukov's MPMC queue; a token
 * taken from `avail` guarantees one is there or about to be). The slow
 * paths meet the queue's length in a Dekker handshake: post adds to avail
 * and then looks for waiters; get counts itself as waiting and then looks
 * at avail (both sequentially consistent), so one sees the other.
 */
#include "core.h"
#include "wait.h"

#include <stdlib.h>
#include <string.h>

#include "cpu.h"

struct cell {
	_Atomic uint64_t seq;
	void *value;
};

struct runtime_sem {
	_Atomic int64_t avail;      /* free resources, in the ring */
	_Atomic int64_t in_use;     /* gets not yet matched by a post */
	unsigned n;
	bool lifo;
	bool pool;                  /* resources, not anonymous tokens */
	struct spin lock;
	struct waitq q;
	_Atomic uint64_t rejected;
	_Atomic uint64_t enq, deq;  /* ring positions */
	uint64_t mask;
	struct cell ring[];         /* pool only */
};

/* ------------------------------------------------------------------- ring */

/* Never full: a pool holds at most n resources in a ring of >= n cells. */
static void ring_push(struct runtime_sem *s, void *value)
{
	uint64_t pos = atomic_fetch_add_explicit(&s->enq, 1, memory_order_relaxed);
	struct cell *c = &s->ring[pos & s->mask];

	while (atomic_load_explicit(&c->seq, memory_order_acquire) != pos)
		cpu_relax(); /* its last reader is still copying out */
	c->value = value;
	atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
}

/* Only after a token was taken from avail: a value is there, or being
 * written by a post that has claimed its cell. */
static void *ring_pop(struct runtime_sem *s)
{
	uint64_t pos = atomic_fetch_add_explicit(&s->deq, 1, memory_order_relaxed);
	struct cell *c = &s->ring[pos & s->mask];

	while (atomic_load_explicit(&c->seq, memory_order_acquire) != pos + 1)
		cpu_relax();
	void *value = c->value;
	atomic_store_explicit(&c->seq, pos + s->mask + 1, memory_order_release);
	return value;
}

/* -------------------------------------------------------------- lifecycle */

static int sem_new(struct runtime_sem **out, unsigned n, unsigned flags, bool pool)
{
	if (!out || (flags & ~RUNTIME_SEM_LIFO) || n > RUNTIME_SEM_MAX)
		return -EINVAL;
	uint64_t cells = 1;
	while (pool && cells < n)
		cells <<= 1;
	struct runtime_sem *s = calloc(1, sizeof(*s) + (pool ? cells * sizeof(struct cell) : 0));
	if (!s)
		return -ENOMEM;
	s->n = n;
	s->lifo = flags & RUNTIME_SEM_LIFO;
	s->pool = pool;
	s->mask = cells - 1;
	for (uint64_t i = 0; pool && i < cells; i++)
		atomic_init(&s->ring[i].seq, i);
	*out = s;
	return 0;
}

int runtime_sem_create(struct runtime_sem **sem, unsigned count, unsigned flags)
{
	int rc = sem_new(sem, count, flags, false);
	if (rc == 0)
		atomic_init(&(*sem)->avail, count);
	return rc;
}

int runtime_pool_create(struct runtime_sem **pool, void *const *resources, unsigned n,
                        unsigned flags)
{
	if (!resources && n)
		return -EINVAL;
	int rc = sem_new(pool, n, flags, true);
	if (rc < 0)
		return rc;
	for (unsigned i = 0; i < n; i++)
		ring_push(*pool, resources[i]);
	atomic_init(&(*pool)->avail, n);
	return 0;
}

int runtime_sem_destroy(struct runtime_sem *s)
{
	if (!s)
		return 0;
	if (atomic_load(&s->q.len))
		return -EBUSY;
	free(s);
	return 0;
}

/* ------------------------------------------------------------ get, post */

/* Take one from *count if it is positive. */
static bool take_one(_Atomic int64_t *count)
{
	int64_t n = atomic_load(count);

	while (n > 0)
		if (atomic_compare_exchange_weak(count, &n, n - 1))
			return true;
	return false;
}

static bool take_token(struct runtime_sem *s)
{
	return take_one(&s->avail);
}

static void *take_resource(struct runtime_sem *s)
{
	return s->pool ? ring_pop(s) : NULL;
}

static void give_resource(struct runtime_sem *s, void *resource)
{
	if (s->pool)
		ring_push(s, resource);
	atomic_fetch_add(&s->avail, 1);
}

int runtime_sem_try_get(struct runtime_sem *s, void **resource)
{
	if (!s)
		return -EINVAL;
	if (!take_token(s)) {
		atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
		return -EBUSY;
	}
	void *r = take_resource(s);
	atomic_fetch_add(&s->in_use, 1);
	if (resource)
		*resource = r;
	return 0;
}

/* Queue the caller (unless a token turned up meanwhile) and wait. */
static int get_slow(struct runtime_sem *s, void **resource, uint64_t deadline)
{
	struct wait w;
	struct waiter x = { .lock = &s->lock, .q = &s->q };

	runtime__wait_init(&w, &x, 1);
	runtime__spin_lock(&s->lock);
	runtime__waitq_add(&s->q, &x);
	runtime__waitq_publish(&s->q); /* queued, then look: Dekker with post */
	if (take_token(s)) {
		runtime__waitq_remove(&s->q, &x);
		runtime__spin_unlock(&s->lock);
		*resource = take_resource(s);
		return 0;
	}
	runtime__spin_unlock(&s->lock);
	int rc = runtime__wait_suspend(&w, BLOCK_SEM, deadline, true);
	if (rc == 0)
		*resource = x.data; /* handed over by a post */
	return rc;
}

int runtime_sem_get(struct runtime_sem *s, void **resource, int64_t timeout_ns)
{
	struct fiber *f = this_fiber();
	void *r = NULL;

	if (!f)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	if (!s)
		return -EINVAL;
	if (take_token(s)) {
		r = take_resource(s);
	} else {
		uint64_t deadline;
		int rc = runtime__wait_begin(f, timeout_ns, &deadline);
		if (rc || (rc = get_slow(s, &r, deadline)))
			return rc;
	}
	atomic_fetch_add(&s->in_use, 1);
	if (resource)
		*resource = r;
	return 0;
}

/* Under the lock: while resources are free and fibers wait, hand them over
 * (a get and a post crossed in the handshake). */
static struct wait *serve_locked(struct runtime_sem *s)
{
	struct wait *head = NULL, **tail = &head;

	while (atomic_load(&s->q.len) && take_token(s)) {
		void *r = take_resource(s);
		struct waiter *x = runtime__waitq_pick(&s->q, s->lifo);
		if (!x) {
			give_resource(s, r);
			break;
		}
		x->data = r;
		*tail = x->wait;
		tail = &x->wait->next;
	}
	*tail = NULL;
	return head;
}

int runtime_sem_post(struct runtime_sem *s, void *resource)
{
	if (!s)
		return -EINVAL;
	/* A pool takes one post per get: a post beyond them is refused, so the
	 * ring (n cells at least) can never overfill. A semaphore counts up
	 * freely, to RUNTIME_SEM_MAX. */
	if (s->pool ? !take_one(&s->in_use) : atomic_load(&s->avail) >= RUNTIME_SEM_MAX)
		return -EOVERFLOW;
	if (!s->pool)
		atomic_fetch_sub(&s->in_use, 1);
	if (!atomic_load(&s->q.len)) {
		give_resource(s, resource); /* seq_cst: given, then look */
		if (!atomic_load(&s->q.len))
			return 0;
	} else {
		runtime__spin_lock(&s->lock);
		struct waiter *x = runtime__waitq_pick(&s->q, s->lifo);
		if (x)
			x->data = resource;
		else
			give_resource(s, resource);
		runtime__spin_unlock(&s->lock);
		if (x) {
			runtime__wait_wake(x->wait, 0);
			return 0;
		}
	}
	runtime__spin_lock(&s->lock);
	struct wait *served = serve_locked(s);
	runtime__spin_unlock(&s->lock);
	runtime__wake_list(served, 0);
	return 0;
}

/* Under the lock: hand up to *n tokens straight to waiters (oldest first,
 * newest with lifo), taking what was handed from *n; their waits as a list
 * for runtime__wake_list. */
static struct wait *hand_tokens_locked(struct runtime_sem *s, unsigned *n)
{
	struct wait *head = NULL, **tail = &head;
	struct waiter *x;

	while (*n && (x = runtime__waitq_pick(&s->q, s->lifo))) {
		x->data = NULL;
		*tail = x->wait;
		tail = &x->wait->next;
		(*n)--;
	}
	*tail = NULL;
	return head;
}

/*
 * n posts in one: waiters first, by direct hand-off under the lock (no get
 * barges past them), the rest counted free. The bound is checked against
 * the count when called, as runtime_sem_post checks it: posts racing this
 * one may each pass it by what they add, never by more.
 */
int runtime_sem_post_n(struct runtime_sem *s, unsigned n)
{
	struct wait *served = NULL;

	if (!s || s->pool)
		return -EINVAL;
	if (n == 0)
		return 0;
	if (n > RUNTIME_SEM_MAX || atomic_load(&s->avail) > (int64_t)(RUNTIME_SEM_MAX - n))
		return -EOVERFLOW;
	atomic_fetch_sub(&s->in_use, n);
	if (atomic_load(&s->q.len)) {
		runtime__spin_lock(&s->lock);
		served = hand_tokens_locked(s, &n);
		/* Waiters queue only under this lock: none is left unserved
		 * while tokens remain. */
		atomic_fetch_add(&s->avail, n);
		runtime__spin_unlock(&s->lock);
	} else {
		atomic_fetch_add(&s->avail, n); /* seq_cst: given, then look */
		if (atomic_load(&s->q.len)) {
			runtime__spin_lock(&s->lock);
			served = serve_locked(s);
			runtime__spin_unlock(&s->lock);
		}
	}
	runtime__wake_list(served, 0);
	return 0;
}

unsigned runtime_sem_count(const struct runtime_sem *s)
{
	if (!s)
		return (unsigned)runtime__misuse(0, "runtime_sem_count", "NULL semaphore");
	int64_t n = atomic_load(&s->avail);
	return (unsigned)(n > 0 ? n : 0);
}

void runtime_sem_stats(const struct runtime_sem *s, struct runtime_sem_stats *st)
{
	if (!s || !st) {
		runtime__misuse(-EINVAL, "runtime_sem_stats", "NULL semaphore or stats");
		if (st)
			*st = (struct runtime_sem_stats){ 0 };
		return;
	}
	int64_t in_use = atomic_load(&s->in_use);

	st->in_use = (unsigned)(in_use > 0 ? in_use : 0);
	st->waiting = atomic_load(&s->q.len);
	st->rejected = atomic_load(&s->rejected);
}
