/* SPDX-License-Identifier: MIT */
/*
 * chan.c - bounded channels (multi-producer, multi-consumer, across cores)
 * and select, with Go's semantics: capacity 0 is a rendezvous; after
 * close, receivers drain what is buffered and then see -EPIPE, and a send
 * is refused with -EPIPE (an error, not a crash).
 *
 * A channel is a ring of elements and two wait queues under one spinlock
 * (held for a copy and a few pointer moves, uncontended it is one atomic
 * exchange; this is the one primitive whose fast path takes a lock, as
 * Go's does). An element goes straight from the sender's buffer into a
 * waiting receiver's, or from a waiting sender into the ring as a receiver
 * makes room, so nothing is copied twice and a waiter resumes with its
 * operation done.
 *
 * select locks its channels in address order (so two selects never
 * deadlock), tries the operations from a random start (so none is
 * starved), and otherwise queues one waiter per operation, all on one
 * wait: the first channel to serve one wins it, and the rest are unlinked.
 */
#include "core.h"
#include "wait.h"

#include <stdlib.h>
#include <string.h>

#define WOULD_BLOCK 1

struct runtime_chan {
	struct spin lock;
	bool closed;
	size_t elem_size;
	size_t cap;
	size_t head, count;        /* the ring: count elements from head */
	struct waitq recvq, sendq;
	unsigned char ring[];
};

int runtime_chan_create(struct runtime_chan **out, size_t elem_size, size_t capacity)
{
	if (!out || elem_size == 0 || elem_size > RUNTIME_CHAN_ELEM_MAX ||
	    capacity > RUNTIME_CHAN_CAP_MAX)
		return -EINVAL;
	struct runtime_chan *ch = calloc(1, sizeof(*ch) + elem_size * capacity);
	if (!ch)
		return -ENOMEM;
	ch->elem_size = elem_size;
	ch->cap = capacity;
	*out = ch;
	return 0;
}

int runtime_chan_destroy(struct runtime_chan *ch)
{
	if (!ch)
		return 0;
	if (atomic_load(&ch->recvq.len) || atomic_load(&ch->sendq.len))
		return -EBUSY;
	free(ch);
	return 0;
}

static unsigned char *slot(struct runtime_chan *ch, size_t i)
{
	return ch->ring + (i % ch->cap) * ch->elem_size;
}

/* Word-sized elements (pointers, integers: the common case) are copied
 * inline, not through a call to memcpy. */
static void copy(const struct runtime_chan *ch, void *to, const void *from)
{
	switch (ch->elem_size) {
	case 4:
		__builtin_memcpy(to, from, 4);
		break;
	case 8:
		__builtin_memcpy(to, from, 8);
		break;
	default:
		memcpy(to, from, ch->elem_size);
	}
}

/* ------------------------------------------------------------ operations */

/* Under the lock: send without waiting. 0 (and maybe a receiver to wake),
 * -EPIPE (closed) or WOULD_BLOCK. */
static int send_locked(struct runtime_chan *ch, const void *elem, struct wait **wake)
{
	if (ch->closed)
		return -EPIPE;
	struct waiter *x = runtime__waitq_pick(&ch->recvq, false);
	if (x) {
		copy(ch, x->data, elem);
		*wake = x->wait;
		return 0;
	}
	if (ch->count == ch->cap)
		return WOULD_BLOCK;
	copy(ch, slot(ch, ch->head + ch->count++), elem);
	return 0;
}

/* Under the lock: receive without waiting. 0 (and maybe a sender to
 * wake), -EPIPE (closed and drained) or WOULD_BLOCK. */
static int recv_locked(struct runtime_chan *ch, void *out, struct wait **wake)
{
	struct waiter *x;

	if (ch->count) {
		copy(ch, out, slot(ch, ch->head));
		ch->head = (ch->head + 1) % ch->cap;
		ch->count--;
		if ((x = runtime__waitq_pick(&ch->sendq, false))) {
			copy(ch, slot(ch, ch->head + ch->count++), x->data);
			*wake = x->wait;
		}
		return 0;
	}
	if ((x = runtime__waitq_pick(&ch->sendq, false))) {
		copy(ch, out, x->data);
		*wake = x->wait;
		return 0;
	}
	return ch->closed ? -EPIPE : WOULD_BLOCK;
}

static int op_locked(struct runtime_chan_op *op, struct wait **wake)
{
	return op->dir == RUNTIME_CHAN_SEND ? send_locked(op->chan, op->elem, wake)
	                                    : recv_locked(op->chan, op->elem, wake);
}

/* May the caller wait? 0, -EAGAIN (timeout 0), -EPERM (not a fiber),
 * -ECANCELED, -ETIMEDOUT; *deadline receives the wait's deadline. */
static int can_wait(int64_t timeout_ns, uint64_t *deadline)
{
	struct fiber *f = this_fiber();

	if (timeout_ns == 0)
		return -EAGAIN;
	if (!f)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	return runtime__wait_begin(f, timeout_ns, deadline);
}

/* One operation: done at once if it can be, else (if allowed) queued in
 * its channel and waited for. */
static inline __attribute__((always_inline)) int chan_op(struct runtime_chan_op *op, int64_t timeout_ns)
{
	struct runtime_chan *ch = op->chan;
	struct wait *wake = NULL, w;
	uint64_t deadline = NEVER;
	int allowed = can_wait(timeout_ns, &deadline);

	runtime__spin_lock(&ch->lock);
	int rc = op_locked(op, &wake);
	if (rc != WOULD_BLOCK || allowed) {
		runtime__spin_unlock(&ch->lock);
		if (wake)
			runtime__wait_wake(wake, 0);
		return rc == WOULD_BLOCK ? allowed : rc;
	}
	struct waiter x = { .lock = &ch->lock, .data = op->elem,
	                    .q = op->dir == RUNTIME_CHAN_SEND ? &ch->sendq : &ch->recvq };
	runtime__wait_init(&w, &x, 1);
	runtime__waitq_add(x.q, &x);
	runtime__spin_unlock(&ch->lock);
	return runtime__wait_suspend(&w, BLOCK_CHAN, deadline, true);
}

int runtime_chan_send(struct runtime_chan *ch, const void *elem, int64_t timeout_ns)
{
	struct runtime_chan_op op = { ch, RUNTIME_CHAN_SEND, (void *)elem, 0 };

	if (!ch || !elem)
		return -EINVAL;
	if (timeout_ns != 0 && !this_fiber())
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	return chan_op(&op, timeout_ns);
}

int runtime_chan_recv(struct runtime_chan *ch, void *elem, int64_t timeout_ns)
{
	struct runtime_chan_op op = { ch, RUNTIME_CHAN_RECV, elem, 0 };

	if (!ch || !elem)
		return -EINVAL;
	if (timeout_ns != 0 && !this_fiber())
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	return chan_op(&op, timeout_ns);
}

int runtime_chan_try_send(struct runtime_chan *ch, const void *elem)
{
	return runtime_chan_send(ch, elem, 0);
}

int runtime_chan_try_recv(struct runtime_chan *ch, void *elem)
{
	return runtime_chan_recv(ch, elem, 0);
}

int runtime_chan_close(struct runtime_chan *ch)
{
	if (!ch)
		return -EINVAL;
	runtime__spin_lock(&ch->lock);
	if (ch->closed) {
		runtime__spin_unlock(&ch->lock);
		return -EALREADY;
	}
	ch->closed = true;
	struct wait *receivers = runtime__waitq_take_all(&ch->recvq);
	struct wait *senders = runtime__waitq_take_all(&ch->sendq);
	runtime__spin_unlock(&ch->lock);
	runtime__wake_list(receivers, -EPIPE);
	runtime__wake_list(senders, -EPIPE);
	return 0;
}

/* ---------------------------------------------------------------- select */

/* The distinct channels of ops, in address order: the lock order. */
static size_t lock_order(const struct runtime_chan_op *ops, size_t n, struct runtime_chan **out)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++) {
		struct runtime_chan *ch = ops[i].chan;
		size_t j = m;
		while (j > 0 && (uintptr_t)out[j - 1] > (uintptr_t)ch)
			j--;
		if (j > 0 && out[j - 1] == ch)
			continue;
		memmove(&out[j + 1], &out[j], (m - j) * sizeof(*out));
		out[j] = ch;
		m++;
	}
	return m;
}

static void lock_all(struct runtime_chan **chans, size_t m)
{
	for (size_t i = 0; i < m; i++)
		runtime__spin_lock(&chans[i]->lock);
}

static void unlock_all(struct runtime_chan **chans, size_t m)
{
	for (size_t i = m; i-- > 0;)
		runtime__spin_unlock(&chans[i]->lock);
}

static unsigned fair_start(size_t n)
{
	static _Atomic uint64_t shared = 88172645463325252ull;
	struct core *c = this_core();
	uint64_t x = c ? c->rand : atomic_fetch_add_explicit(&shared, 0x9e3779b97f4a7c15ull,
	                                                      memory_order_relaxed);

	x ^= x << 13; /* xorshift64 */
	x ^= x >> 7;
	x ^= x << 17;
	if (c)
		c->rand = x;
	return (unsigned)(x % n);
}

static int select_check(const struct runtime_chan_op *ops, size_t n)
{
	if (!ops || n == 0 || n > RUNTIME_SELECT_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!ops[i].chan || !ops[i].elem ||
		    (ops[i].dir != RUNTIME_CHAN_SEND && ops[i].dir != RUNTIME_CHAN_RECV))
			return -EINVAL;
	return 0;
}

/* Under every lock: the first operation that need not wait, from a fair
 * start; its index, or -1. */
static int select_try(struct runtime_chan_op *ops, size_t n, struct wait **wake)
{
	unsigned start = fair_start(n);

	for (size_t k = 0; k < n; k++) {
		size_t i = (start + k) % n;
		int rc = op_locked(&ops[i], wake);
		if (rc != WOULD_BLOCK) {
			ops[i].result = rc;
			return (int)i;
		}
	}
	return -1;
}

/* Under every lock: one waiter per operation, all on w. */
static void select_queue(struct runtime_chan_op *ops, size_t n, struct wait *w,
                         struct waiter *xs)
{
	for (size_t i = 0; i < n; i++) {
		struct runtime_chan *ch = ops[i].chan;
		xs[i] = (struct waiter){ .lock = &ch->lock, .data = ops[i].elem, .index = (unsigned)i,
		                         .q = ops[i].dir == RUNTIME_CHAN_SEND ? &ch->sendq
		                                                              : &ch->recvq };
	}
	runtime__wait_init(w, xs, (unsigned)n);
	for (size_t i = 0; i < n; i++)
		runtime__waitq_add(xs[i].q, &xs[i]);
}

int runtime_chan_select(struct runtime_chan_op *ops, size_t n, int64_t timeout_ns)
{
	struct runtime_chan *chans[RUNTIME_SELECT_MAX];
	struct waiter xs[RUNTIME_SELECT_MAX];
	struct wait *wake = NULL, w;
	uint64_t deadline = NEVER;

	int rc = select_check(ops, n);
	if (rc)
		return rc;
	if (timeout_ns != 0 && !this_fiber())
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	int allowed = can_wait(timeout_ns, &deadline);
	size_t m = lock_order(ops, n, chans);
	lock_all(chans, m);
	int done = select_try(ops, n, &wake);
	if (done >= 0 || allowed) {
		unlock_all(chans, m);
		if (wake)
			runtime__wait_wake(wake, 0);
		return done >= 0 ? done : allowed;
	}
	select_queue(ops, n, &w, xs);
	unlock_all(chans, m);
	rc = runtime__wait_suspend(&w, BLOCK_CHAN, deadline, true);
	if (!w.winner)
		return rc; /* -ETIMEDOUT or -ECANCELED */
	ops[w.winner->index].result = rc;
	return (int)w.winner->index;
}
