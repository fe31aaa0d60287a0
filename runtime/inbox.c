/* SPDX-License-Identifier: MIT */
/*
 * inbox.c - how other threads reach a core: a lock-free multi-producer,
 * single-consumer inbox per core, an eventfd that wakes the core only when
 * it is asleep, and the dispatch of what arrives: each node names its
 * handler (struct inbox_ops), so the inbox knows no subsystem.
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
 * finds the core asleep and writes its eventfd, which the core's engine
 * always watches while it sleeps (a read SQE, or the epoll set). A busy core costs a producer no
 * syscall, and one sleep costs at most one eventfd write.
 */
#include "core.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

void runtime__inbox_push(struct core *c, struct inbox_node *n)
{
	struct inbox_node *head = atomic_load_explicit(&c->inbox.head, memory_order_relaxed);

	do
		n->link.next = head ? &head->link : NULL;
	while (!atomic_compare_exchange_weak_explicit(&c->inbox.head, &head, n, memory_order_seq_cst,
	                                              memory_order_relaxed));
	runtime__core_wake(c);
}

/* Any thread: make a sleeping core leave its wait in the kernel. */
void runtime__core_wake(struct core *c)
{
	if (atomic_exchange_explicit(&c->inbox.sleeping, 0, memory_order_seq_cst)) {
		uint64_t one = 1;
		atomic_fetch_add_explicit(&c->stats.wakeups, 1, memory_order_relaxed);
		/* Only fails if the counter would overflow, when it is readable
		 * (and the core awake) anyway. */
		if (sys_write(c->inbox.wake_fd, &one, sizeof(one)) < 0) {
		}
	}
}

/* The core, before it blocks (its engine watches wake_fd by now):
 * announce the sleep, then look once more. Returns false (and stays
 * awake) if work arrived or the runtime stops. */
bool runtime__core_may_sleep(struct core *c)
{
	atomic_store_explicit(&c->inbox.sleeping, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&c->inbox.head, memory_order_seq_cst) ||
	    atomic_load_explicit(&c->rt->stop, memory_order_seq_cst)) {
		atomic_store_explicit(&c->inbox.sleeping, 0, memory_order_relaxed);
		return false;
	}
	return true;
}

void runtime__core_awake(struct core *c)
{
	atomic_store_explicit(&c->inbox.sleeping, 0, memory_order_relaxed);
}

static struct inbox_node *node_of(struct qnode *q)
{
	return container_of(q, struct inbox_node, link);
}

/* Move everything pushed so far to the backlog, oldest first. */
static void take_all(struct core *c)
{
	struct inbox_node *n = atomic_exchange_explicit(&c->inbox.head, NULL, memory_order_acquire);
	struct qnode *fifo = NULL;

	while (n) {
		struct qnode *next = n->link.next;
		n->link.next = fifo;
		fifo = &n->link;
		n = next ? node_of(next) : NULL;
	}
	queue_push_chain(&c->inbox.backlog, fifo);
}

/* The loop's inbox phase. At most run_budget items per turn, as many as
 * the run phase runs, so that a flood of spawns runs as it arrives instead
 * of piling up as stacks; the rest wait, in order, in the backlog. */
void runtime__inbox_drain(struct core *c)
{
	const unsigned budget = c->rt->cfg.run_budget;

	if (atomic_load_explicit(&c->inbox.head, memory_order_relaxed)) {
		take_all(c);
		runtime__spin_learn(c);
	}
	for (unsigned done = 0; done < budget && !queue_empty(&c->inbox.backlog); done++) {
		struct qnode *q = queue_pop(&c->inbox.backlog);
		stat_add(&c->stats.inbox, 1);
		struct inbox_node *n = node_of(q);
		if (n->ops->handle(c, n) < 0) {
			queue_push_front(&c->inbox.backlog, q);
			return;
		}
	}
}

/* runtime_destroy: inbox work that never reached a run, given back. */
void runtime__inbox_discard(struct core *c)
{
	take_all(c);
	for (struct qnode *q; (q = queue_pop(&c->inbox.backlog));) {
		struct inbox_node *n = node_of(q);
		if (n->ops->discard)
			n->ops->discard(c->rt, n);
	}
}
