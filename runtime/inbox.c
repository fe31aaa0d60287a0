/* SPDX-License-Identifier: MIT */
/*
 * inbox.c - how other threads reach a core: a lock-free multi-producer,
 * single-consumer inbox per core, and an eventfd that wakes the core only
 * when it is asleep.
 *
 * Producers push with a CAS on the inbox head (a Treiber stack); the core
 * takes the whole list with one exchange and reverses it, so items are
 * handled in the order they were pushed and there is no ABA problem (nodes
 * are never popped one by one).
 *
 * The wake-up is a Dekker handshake, both sides sequentially consistent:
 * the core sets `sleeping` and then looks at its inbox; a producer pushes
 * and then takes `sleeping` back to 0. At least one of them sees the other's
 * store, so either the core finds the item before it blocks or the producer
 * finds the core asleep and writes its eventfd, on which the core always
 * keeps a read SQE armed while it sleeps. A busy core costs a producer no
 * syscall, and one sleep costs at most one eventfd write.
 */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

void runtime__inbox_push(struct core *c, struct inbox_node *n)
{
	struct inbox_node *head = atomic_load_explicit(&c->inbox, memory_order_relaxed);

	do
		n->next = head;
	while (!atomic_compare_exchange_weak_explicit(&c->inbox, &head, n, memory_order_seq_cst,
	                                              memory_order_relaxed));
	runtime__core_wake(c);
}

/* Any thread: make a sleeping core leave io_uring_enter. */
void runtime__core_wake(struct core *c)
{
	if (atomic_exchange_explicit(&c->sleeping, 0, memory_order_seq_cst)) {
		uint64_t one = 1;
		/* Only fails if the counter would overflow, when it is readable
		 * (and the core awake) anyway. */
		if (write(c->wake_fd, &one, sizeof(one)) < 0) {
		}
	}
}

/* The core, before it blocks: announce the sleep, then look once more.
 * Returns false (and stays awake) if work arrived or the runtime stops. */
bool runtime__core_may_sleep(struct core *c)
{
	if (!c->wake_armed) {
		struct io_uring_sqe *sqe = runtime__sqe(c);
		io_uring_prep_read(sqe, c->wake_fd, &c->wake_buf, sizeof(c->wake_buf), 0);
		io_uring_sqe_set_data64(sqe, tagged(c, TAG_WAKEUP));
		c->wake_armed = true;
	}
	atomic_store_explicit(&c->sleeping, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&c->inbox, memory_order_seq_cst) ||
	    atomic_load_explicit(&c->rt->stop, memory_order_seq_cst)) {
		atomic_store_explicit(&c->sleeping, 0, memory_order_relaxed);
		return false;
	}
	return true;
}

void runtime__core_awake(struct core *c)
{
	atomic_store_explicit(&c->sleeping, 0, memory_order_relaxed);
}

/* The eventfd read completed: re-armed before the next sleep. */
void runtime__wakeup_cqe(struct core *c)
{
	c->wake_armed = false;
}

/* The whole inbox, oldest first (never NULL: called when non-empty). */
static struct inbox_node *take_all(struct core *c)
{
	struct inbox_node *n = atomic_exchange_explicit(&c->inbox, NULL, memory_order_acquire);
	struct inbox_node *fifo = NULL;

	while (n) {
		struct inbox_node *next = n->next;
		n->next = fifo;
		fifo = n;
		n = next;
	}
	return fifo;
}

/* The loop's inbox phase. At most run_budget items per turn, as many as
 * the run phase runs, so that a flood of spawns runs as it arrives instead
 * of piling up as stacks; the rest wait, in order, on c->deferred. A spawn
 * that cannot get a stack now (ENOMEM) waits there too, not dropped. */
void runtime__inbox_drain(struct core *c)
{
	const unsigned budget = c->rt->cfg.run_budget;

	if (atomic_load_explicit(&c->inbox, memory_order_relaxed)) {
		struct inbox_node *n = take_all(c);
		if (c->deferred)
			c->deferred_tail->next = n;
		else
			c->deferred = n;
		while (n->next)
			n = n->next;
		c->deferred_tail = n;
	}
	for (unsigned done = 0; c->deferred && done < budget; done++) {
		struct inbox_node *n = c->deferred;
		c->deferred = n->next;
		if (runtime__inbox_handle(c, n) < 0) {
			if (!c->deferred)
				c->deferred_tail = n;
			n->next = c->deferred;
			c->deferred = n;
			return;
		}
	}
}
