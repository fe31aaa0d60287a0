/* SPDX-License-Identifier: MIT */
/*
 * named.c - named, cancellable timers (seed 004, Workflow's named timers).
 *
 * Any thread may start a timer with a name, and any thread may cancel up to
 * N timers of a name - including ones still on their way to the core that
 * will arm them. The callback runs exactly once, on the timer's core, and is
 * told which of fired, cancelled or shut down won. How:
 *
 *  - outcome is decided once, by a CAS from UNDECIDED: the core's timer
 *    (FIRED), a canceller (CANCELLED) or the core's shutdown (SHUTDOWN);
 *  - the callback runs from the core's loop once its timer is disarmed,
 *    never inside a fiber or inside the start or cancel call: a start
 *    reaches its core through the inbox even from that core itself;
 *  - a canceller that wins tells the core through its inbox (the core alone
 *    touches its timers), and a registry lock keeps the timer alive until
 *    the canceller holds a reference;
 *  - the deadline is taken when the timer is started (saturating: a delay
 *    past the end of time is never), not when it reaches its core.
 *
 * The registry is a hash of names to FIFO lists under one mutex: starts and
 * cancels take it once each; firing timers take it once to leave it.
 */
#include "core.h"
#include "services.h"

#include <stdlib.h>
#include <string.h>

#define BUCKETS 256
#define CANCEL_BATCH 64 /* timers taken per trip through the lock */

enum { UNDECIDED = -1 };
enum stage { IN_TRANSIT, ARMED, DONE };

struct named_timer {
	struct timer t;
	struct inbox_node start_node;
	struct inbox_node cancel_node;
	struct dnode bucket;                /* registry bucket, under lock */
	bool registered;                    /* under lock */
	struct core *core;
	_Atomic int outcome;                /* UNDECIDED or enum runtime_timer_why */
	_Atomic int refs;
	enum stage stage;                   /* the core's own view */
	uint64_t deadline;
	runtime_named_timer_fn *fn;
	void *arg;
	size_t hash;
	char name[];
};

struct named_registry {
	pthread_mutex_t lock;
	struct dlist bucket[BUCKETS]; /* oldest first */
};

static size_t name_hash(const char *s)
{
	size_t h = 1469598103934665603ull; /* FNV-1a */
	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

int runtime__named_init(struct runtime *rt)
{
	rt->named = calloc(1, sizeof(*rt->named));
	if (!rt->named)
		return -ENOMEM;
	pthread_mutex_init(&rt->named->lock, NULL);
	for (unsigned i = 0; i < BUCKETS; i++)
		dlist_init(&rt->named->bucket[i]);
	return 0;
}

/* Under the lock. */
static void unregister(struct named_timer *nt)
{
	if (!nt->registered)
		return;
	dlist_remove(&nt->bucket);
	nt->registered = false;
}

static void put(struct named_timer *nt)
{
	if (atomic_fetch_sub_explicit(&nt->refs, 1, memory_order_acq_rel) == 1)
		free(nt);
}

static bool decide(struct named_timer *nt, enum runtime_timer_why why)
{
	int undecided = UNDECIDED;
	return atomic_compare_exchange_strong(&nt->outcome, &undecided, (int)why);
}

/* On the core, once its timer is disarmed (or was never armed). */
static void finish(struct named_timer *nt)
{
	struct runtime *rt = nt->core->rt;

	nt->stage = DONE;
	pthread_mutex_lock(&rt->named->lock);
	unregister(nt);
	pthread_mutex_unlock(&rt->named->lock);
	nt->fn(nt->arg, (enum runtime_timer_why)atomic_load(&nt->outcome));
	runtime__work_done(rt);
	put(nt);
}

/* The core-local timer ended: it fired, or was disarmed because an outcome
 * was decided elsewhere (cancel) or here (shutdown). */
static void named_fire(struct timer *t, enum runtime_timer_why why)
{
	struct named_timer *nt = container_of(t, struct named_timer, t);

	decide(nt, why); /* loses if a cancel came first: that one stands */
	finish(nt);
}

/* Inbox: the timer reached its core. */
static int start_arrived(struct core *c, struct inbox_node *n)
{
	struct named_timer *nt = container_of(n, struct named_timer, start_node);

	if (runtime__is_shutting_down(c->rt))
		decide(nt, RUNTIME_TIMER_SHUTDOWN);
	if (atomic_load(&nt->outcome) != UNDECIDED) {
		finish(nt);
		return 0;
	}
	nt->stage = ARMED;
	nt->t.fire = named_fire;
	nt->t.on_shutdown = true;
	runtime__timer_start(c, &nt->t, nt->deadline);
	return 0;
}

/* Inbox: a canceller won. A timer still armed is disarmed and its callback
 * runs now; one that fired meanwhile has run it already, with CANCELLED. */
static int cancel_arrived(struct core *c, struct inbox_node *n)
{
	struct named_timer *nt = container_of(n, struct named_timer, cancel_node);

	(void)c;
	if (nt->stage == ARMED && runtime__timer_stop(&nt->t))
		finish(nt); /* the outcome is the canceller's */
	put(nt);
	return 0;
}

/* Destroy: a timer that never reached a run sits in some inbox (its start
 * node, maybe a cancel node too). Its callback still runs, exactly once,
 * with whatever outcome won (a shutdown if nothing else did). */
static void start_discard(struct runtime *rt, struct inbox_node *n)
{
	struct named_timer *nt = container_of(n, struct named_timer, start_node);

	(void)rt;
	decide(nt, RUNTIME_TIMER_SHUTDOWN);
	finish(nt);
}

static void cancel_discard(struct runtime *rt, struct inbox_node *n)
{
	(void)rt;
	put(container_of(n, struct named_timer, cancel_node));
}

static const struct inbox_ops start_ops = { start_arrived, start_discard };
static const struct inbox_ops cancel_ops = { cancel_arrived, cancel_discard };

int runtime_timer_start_named(struct runtime *rt, const char *name, uint64_t delay_ns,
                              runtime_named_timer_fn *fn, void *arg)
{
	if (!rt || !name || !*name || !fn)
		return -EINVAL;
	if (atomic_load_explicit(&rt->shutting_down, memory_order_relaxed))
		return -ESHUTDOWN;
	size_t len = strlen(name);
	struct named_timer *nt = calloc(1, sizeof(*nt) + len + 1);
	if (!nt)
		return -ENOMEM;
	memcpy(nt->name, name, len + 1);
	nt->hash = name_hash(name);
	nt->deadline = deadline_add(runtime_now(), delay_ns);
	nt->fn = fn;
	nt->arg = arg;
	nt->start_node.ops = &start_ops;
	nt->cancel_node.ops = &cancel_ops;
	atomic_init(&nt->outcome, UNDECIDED);
	atomic_init(&nt->refs, 1); /* the core's, dropped by finish() */
	nt->core = runtime__place(rt);

	struct named_registry *reg = rt->named;
	pthread_mutex_lock(&reg->lock);
	dlist_push_back(&reg->bucket[nt->hash % BUCKETS], &nt->bucket);
	nt->registered = true;
	pthread_mutex_unlock(&reg->lock);

	runtime__work_begin(rt); /* the runtime runs until the callback has */
	runtime__inbox_push(nt->core, &nt->start_node);
	return 0;
}

/* Under the lock: win up to max timers named name (hash h), oldest first. */
static size_t win_batch(struct named_registry *reg, const char *name, size_t h, size_t max,
                        struct named_timer **won)
{
	struct dlist *bucket = &reg->bucket[h % BUCKETS];
	size_t n = 0;

	for (struct dnode *d = dlist_first(bucket); d && n < max;) {
		struct named_timer *nt = container_of(d, struct named_timer, bucket);
		d = dlist_next(bucket, d);
		if (nt->hash == h && !strcmp(nt->name, name) &&
		    decide(nt, RUNTIME_TIMER_CANCELLED)) {
			unregister(nt);
			atomic_fetch_add(&nt->refs, 1); /* for the cancel node */
			won[n++] = nt;
		}
	}
	return n;
}

size_t runtime_timer_cancel_named(struct runtime *rt, const char *name, size_t max)
{
	struct named_timer *won[CANCEL_BATCH];
	size_t cancelled = 0;

	if (!rt || !name || !rt->named)
		return 0;
	size_t h = name_hash(name);
	while (cancelled < max) {
		size_t want = max - cancelled < CANCEL_BATCH ? max - cancelled : CANCEL_BATCH;
		pthread_mutex_lock(&rt->named->lock);
		size_t n = win_batch(rt->named, name, h, want, won);
		pthread_mutex_unlock(&rt->named->lock);
		if (!n)
			break;
		/* Through the inbox even for our own core, so that the callback
		 * runs from the core's loop, never inside the caller. */
		for (size_t i = 0; i < n; i++)
			runtime__inbox_push(won[i]->core, &won[i]->cancel_node);
		cancelled += n;
	}
	return cancelled;
}

void runtime__named_free(struct runtime *rt)
{
	if (!rt->named)
		return;
	pthread_mutex_destroy(&rt->named->lock);
	free(rt->named);
	rt->named = NULL;
}

