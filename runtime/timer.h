/* SPDX-License-Identifier: MIT */
/*
 * timer.h - a core's timers (timer.c): a heap and deadline-ordered lanes,
 * the nearest deadline given to the engine before the core sleeps, and
 * lazy deadlines - the timers of waits whose deadline moves on with each
 * wait, kept armed between them. Everything here is the core's own: only
 * its thread starts, stops or fires its timers.
 */
#ifndef RUNTIME_TIMER_H
#define RUNTIME_TIMER_H

#include "base.h"

struct core;

enum timer_state {
	TIMER_IDLE,
	TIMER_ARMED,    /* in the heap or a lane (timer.c) */
	TIMER_ENDING,   /* public timers: out of the set, callback queued */
};

/* A timer in its core's set: the public struct runtime_timer's storage,
 * and what sleeps, timed suspends and cancel retries use. */
struct timer {
	uint64_t deadline;          /* absolute ns; NEVER is kept, never fires */
	uint64_t seq;               /* start order: equal deadlines fire FIFO */
	void (*fire)(struct timer *t, enum runtime_timer_why why);
	struct core *core;
	uint32_t heap_index;        /* its heap index, or its lane position */
	uint8_t state;
	uint8_t why;                /* TIMER_ENDING: the queued callback's */
	bool on_shutdown;           /* completed by a shutdown (public, named) */
	uint8_t lane;               /* 0: in the heap; else its lane + 1 */
	struct qnode done;          /* TIMER_ENDING: on the core's done queue */
};

/*
 * A lazy deadline (timer.c): the timer of waits whose deadline moves on
 * with each wait (now + a timeout), a fiber's or an idle stream's. It
 * stays armed when a wait ends, and the next wait under a deadline no
 * earlier keeps it as it is: a compare per wait, not a heap push and pop.
 * Firing early - the wait's deadline has moved later - it is armed again
 * for that one; with no wait under it, it stops. Until then it lingers,
 * counted in its set's lingering, which the deadlock check sets aside: a
 * lingering timer is nobody's pending work.
 */
struct lazy_deadline {
	struct timer timer;         /* its fire: the owner's (runtime__lazy_due) */
	uint64_t wait;              /* the wait's deadline, NEVER: none */
	bool waiting;               /* a wait is under it */
};

struct heap_slot {
	uint64_t deadline;
	struct timer *t;
};

#define TIMER_LANES 4

/* Timers started in deadline order (timer.c). */
struct timer_lane {
	struct heap_slot *slot;     /* a ring of cap slots, cap a power of two */
	uint32_t head, tail;        /* free-running positions */
	uint32_t cap, holes;        /* holes: stopped timers' slots still inside */
};

/* A core's armed timers: lanes, and a heap for the rest; and the public
 * timers whose callback is due (a cancel's, run from the loop). */
struct timer_set {
	struct heap_slot *slot;     /* the heap */
	uint32_t len, cap;
	uint32_t armed;             /* in the heap and the lanes */
	uint32_t lingering;         /* of them, timers that wake no one: lazy
	                               deadlines with no wait under them, the
	                               decays (no pending work: loop.c) */
	uint64_t lower;             /* no armed deadline is earlier: a loop
	                               turn before it looks no further */
	uint64_t seq;               /* the next start's order */
	struct queue done;          /* public timers whose callback is due */
	struct timer_lane lane[TIMER_LANES];
};

/* Arm t to call t->fire(t, RUNTIME_TIMER_FIRED) from the loop at deadline. */
void runtime__timer_start(struct core *c, struct timer *t, uint64_t deadline);
/* Disarm without a callback. Returns false if t was not armed. */
bool runtime__timer_stop(struct timer *t);
void runtime__timers_run(struct core *c);
/* When to wake: no armed deadline on c is earlier (NEVER: none). */
uint64_t runtime__timers_next(struct core *c);
void runtime__timers_shutdown(struct core *c);
void runtime__timers_free(struct core *c);

/* Arm d's timer for its wait (timer.c): the slow path of lazy_begin. */
void runtime__lazy_arm(struct core *c, struct lazy_deadline *d);
/* From the fire of a lazy deadline's timer: the deadline, if its wait's
 * deadline has passed (the wait is over: end it); NULL if the timer only
 * lingered or fired early (armed again for the wait's later deadline). */
struct lazy_deadline *runtime__lazy_due(struct timer *t);

/* Its owner goes: the timer must not outlive it. */
void runtime__lazy_drop(struct lazy_deadline *d);

#endif /* RUNTIME_TIMER_H */
