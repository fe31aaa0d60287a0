/* SPDX-License-Identifier: MIT */
/*
 * inbox.h - how other threads reach a core (inbox.c): a multi-producer
 * inbox of nodes, each naming its own handler, and the eventfd wake-up
 * of a core that sleeps.
 */
#ifndef RUNTIME_INBOX_H
#define RUNTIME_INBOX_H

#include "base.h"

struct core;
struct runtime;

/*
 * Work handed to a core by another thread (inbox.c): a node, inside the
 * work's own struct, that names what to do with it. handle runs on the
 * core (a negative return, -ENOMEM, keeps the node first in the backlog
 * for the next turn); discard, at runtime_destroy, for a node that never
 * reached a run and owns memory (NULL: nothing to do). Each subsystem
 * keeps its own ops beside its work: the inbox knows none of them.
 */
struct inbox_node;
struct inbox_ops {
	int (*handle)(struct core *c, struct inbox_node *n);
	void (*discard)(struct runtime *rt, struct inbox_node *n);
};

struct inbox_node {
	struct qnode link;
	const struct inbox_ops *ops;
};

struct spawn_req {
	struct inbox_node node;
	void (*fn)(void *);
	void *arg;
};

/* A core's inbox (inbox.c), and its half of the wake-up handshake. The
 * head, sleeping and shutdown_sent are shared with other threads; the
 * rest is the core's. */
struct core_inbox {
	_Atomic(struct inbox_node *) head; /* pushed, not taken yet (LIFO) */
	_Atomic int sleeping;       /* blocked (or about to) in the kernel */
	int wake_fd;                /* eventfd other threads write to wake us */
	struct queue backlog;       /* taken, not yet handled (FIFO) */
	bool spin_next;             /* spin for cross-core work before the next
	                               sleep (loop.c) */
	uint64_t slept_at;          /* when the core last went to sleep; 0
	                               once the first turn after it has run */
	struct inbox_node shutdown_node;
	_Atomic bool shutdown_sent;
};

void runtime__inbox_push(struct core *c, struct inbox_node *n);
/* The node every fiber holds for wake-ups from other threads (fiber.c),
 * and each core's shutdown and idle-drain nodes (runtime.c, idle.c). */
extern const struct inbox_ops runtime__wake_ops, runtime__shutdown_ops, runtime__idle_drain_ops;
void runtime__inbox_drain(struct core *c);
void runtime__inbox_discard(struct core *c);
void runtime__core_wake(struct core *c);
bool runtime__core_may_sleep(struct core *c);
void runtime__core_awake(struct core *c);
/* Inbox work came in the first turn after a sleep: loop.c's spin learns
 * whether to spin before the next. */
void runtime__spin_learn(struct core *c);

#endif /* RUNTIME_INBOX_H */
