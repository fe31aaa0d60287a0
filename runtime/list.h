/* SPDX-License-Identifier: MIT */
/*
 * list.h - the two intrusive containers the runtime uses, so that no
 * subsystem writes its own: a singly linked FIFO queue (run queues, inbox
 * backlog, timer completions) and a circular doubly linked list with a
 * sentinel (every fiber of a core, named-timer buckets). Nodes are embedded
 * in their owners and found back with container_of. Nothing here locks:
 * each container belongs to one thread, or to whoever holds its lock.
 */
#ifndef RUNTIME_LIST_H
#define RUNTIME_LIST_H

#include <stdbool.h>
#include <stddef.h>

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

/* ------------------------------------------------------------ FIFO queue */

struct qnode {
	struct qnode *next;
};

struct queue {
	struct qnode *head;
	struct qnode **tail; /* &head when empty */
};

static inline void queue_init(struct queue *q)
{
	q->head = NULL;
	q->tail = &q->head;
}

static inline bool queue_empty(const struct queue *q)
{
	return q->head == NULL;
}

static inline void queue_push(struct queue *q, struct qnode *n)
{
	n->next = NULL;
	*q->tail = n;
	q->tail = &n->next;
}

/* Put n back at the front (it was just popped and could not be handled). */
static inline void queue_push_front(struct queue *q, struct qnode *n)
{
	n->next = q->head;
	if (!q->head)
		q->tail = &n->next;
	q->head = n;
}

static inline struct qnode *queue_pop(struct queue *q)
{
	struct qnode *n = q->head;

	if (n) {
		q->head = n->next;
		if (!q->head)
			q->tail = &q->head;
	}
	return n;
}

/* Append a NULL-terminated chain first..(end) in order. */
static inline void queue_push_chain(struct queue *q, struct qnode *first)
{
	*q->tail = first;
	while (first) {
		q->tail = &first->next;
		first = first->next;
	}
}

/* ------------------------------------------------ doubly linked list */

struct dnode {
	struct dnode *prev, *next;
};

/* The list is its own sentinel: empty when it points at itself. */
struct dlist {
	struct dnode head;
};

static inline void dlist_init(struct dlist *l)
{
	l->head.prev = l->head.next = &l->head;
}

static inline bool dlist_empty(const struct dlist *l)
{
	return l->head.next == &l->head;
}

static inline void dlist_push_back(struct dlist *l, struct dnode *n)
{
	n->prev = l->head.prev;
	n->next = &l->head;
	l->head.prev->next = n;
	l->head.prev = n;
}

static inline void dlist_remove(struct dnode *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

/* The first node, or NULL when empty. */
static inline struct dnode *dlist_first(const struct dlist *l)
{
	return dlist_empty(l) ? NULL : l->head.next;
}

/* The node after n, or NULL at the end. */
static inline struct dnode *dlist_next(const struct dlist *l, const struct dnode *n)
{
	return n->next == &l->head ? NULL : n->next;
}

#define dlist_for_each(pos, list) \
	for (struct dnode *pos = (list)->head.next; pos != &(list)->head; pos = pos->next)

#endif /* RUNTIME_LIST_H */
