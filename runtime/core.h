/* SPDX-License-Identifier: MIT */
/*
 * core.h - a core composed of its subsystems' per-core state, a runtime of
 * cores, and what every blocking call asks of both (never installed).
 * One struct core per core thread holds everything that thread owns.
 * Include the subsystem headers for their calls; this one for the core.
 */
#ifndef RUNTIME_CORE_H
#define RUNTIME_CORE_H

#include "base.h" /* first: config.h */

#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>

#include "bufpool.h"
#include "fiber.h"
#include "inbox.h"
#include "layer.h"
#include "mshot.h"
#include "stack.h"
#include "timer.h"

struct engine;
struct core_log;
struct named_registry;
struct offload_pool;
struct stall_detector;
struct drain;

/* A core's counters (runtime_stats): written by the core alone with a plain
 * relaxed store (no locked instruction), read from any thread; wakeups is
 * added to by the threads that wake the core. */
struct core_stats {
	_Atomic uint64_t spawned, live, sqes, cqes, enters, timers, inbox, wakeups;
	_Atomic uint64_t stream_fallbacks;
	/* For the metrics (runtime_metrics_add_runtime): one add each where
	 * it happens, the cheapest way to have them at a scrape. stalls is
	 * added to by the stall detector's thread. */
	_Atomic uint64_t switches, ready, idle, stacks_cached, cq_overflows, stalls;
};

/* The core's own counter (single writer) plus n. On x86-64 one add to
 * memory, not locked: its aligned 8-byte store is single-copy atomic, so a
 * reader on another thread sees the old count or the new, as with the
 * relaxed load and store of the portable way - in one instruction instead
 * of three, on paths run per operation. ThreadSanitizer builds take the
 * portable way, which it sees. */
static inline void stat_add(_Atomic uint64_t *counter, int64_t n)
{
#if defined(__x86_64__) && !defined(RUNTIME_TSAN)
	__asm__ volatile("addq %1, %0" : "+m"(*(uint64_t *)counter) : "er"(n));
#else
	atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) +
	                      (uint64_t)n, memory_order_relaxed);
#endif
}

/* What the stall detector (stall.c) reads of a core: written by the core
 * at each switch, only when runtime_config.stall_ms is set. */
struct stall_watch {
	bool on;
	_Atomic int tid;            /* the core's thread, while it runs */
	_Atomic uint64_t switches;
	_Atomic uint64_t fiber_id;  /* running now; 0: the core's loop */
	bool count_turns;           /* the systemd watchdog is on (notify.c) */
	_Atomic uint64_t turns;     /* loop turns, while count_turns */
};

/* The systemd watchdog (notify.c): core 0's timer, every period. */
struct notify_watchdog {
	uint64_t period;            /* ns; 0: off this run */
	struct timer timer;
	uint64_t *seen;             /* each core's turns at the last firing */
};

/*
 * A core: one thread's runtime, composed of its subsystems' per-core
 * state. Nothing here is shared with other threads except where a comment
 * says so: the inbox's shared half (inbox.h), the counters (stats, read
 * anywhere) and what the stall detector reads (watch).
 */
struct core {
	struct runtime *rt;
	const struct engine *eng;   /* the runtime's (engine/engine.h) */
	void *engine_state;         /* the engine's own, while a run lasts
	                               (engine/uring.h, engine/epoll.c) */
	unsigned index;
	uint64_t now;               /* the clock, read once per loop turn */
	bool now_fresh;             /* now was read since the core last waited
	                               (else runtime_now_coarse reads it) */
	struct sched sched;         /* fibers: what runs (fiber.h) */
	struct core_inbox inbox;    /* other threads' work (inbox.h) */
	struct timer_set timers;    /* timer.h */
	/* Operations in the kernel that will complete by themselves: SQEs
	 * whose last CQE is due (io_uring), fibers parked on readiness
	 * (epoll). With the two armed reads below, what deadlocked() counts
	 * (loop.c). The engine keeps them. */
	unsigned in_flight;
	bool wake_armed;            /* a read is armed on the inbox's wake_fd */
	bool signal_armed;          /* one on the shutdown signalfd (core 0) */
	struct core_streams streams; /* receive streams, listeners (mshot.h) */
	struct stack_cache stacks;  /* stack.h */
	struct core_log *log;       /* runtime_log's buffers (log.c) */
	uint64_t rand;              /* xorshift state: select's fair start */
	pthread_t thread;           /* cores 1..: their thread, for the join */
	sigset_t saved_mask;        /* the thread's signal mask before the run */
	struct core_stats stats;
	unsigned dump_seen;         /* the runtime's dump_gen last printed */
	struct stall_watch watch;   /* published for the stall detector */
};

struct runtime {
	struct runtime_config cfg;
	const struct engine *eng;   /* every core's (engine/choose.c) */
	char engine_reason[384];    /* runtime_engine_reason */
	unsigned setup_flags;       /* io_uring: setup flags found by the probe */
	struct core *cores;
	unsigned ncores;
	pthread_t owner_thread;     /* the creating thread: runs core 0 */
	_Atomic bool running;
	_Atomic bool shutting_down;
	_Atomic bool stop;          /* every core leaves its loop */
	_Atomic long work;          /* busy cores + inbox items in transit */
	_Atomic unsigned next_core; /* round-robin placement */
	int failed;                 /* a run failed with this -errno: no more runs */
	struct named_registry *named;
	struct offload_pool *offload;
	int signal_fd;              /* runtime_shutdown_on_signals, or -1 */
	sigset_t signals_blocked;   /* what that call blocked, to unblock */
	struct signalfd_siginfo signal_buf;
	_Atomic unsigned dump_gen;  /* bumped by the dump signal */
	struct stall_detector *stall;
	struct drain *drain;        /* runtime_drain (drain.c) */
	struct notify_watchdog watchdog;
};

static inline void stall_publish(struct core *c, const struct fiber *to)
{
	struct stall_watch *w = &c->watch;

	atomic_store_explicit(&w->fiber_id, to->flags & FIBER_LOOP ? 0 : to->id,
	                      memory_order_relaxed);
	atomic_store_explicit(&w->switches,
	                      atomic_load_explicit(&w->switches, memory_order_relaxed) + 1,
	                      memory_order_release);
}

/* The core the calling thread runs, or NULL. initial-exec: a plain %fs
 * load instead of a __tls_get_addr call per access from the shared
 * library (the library must not be dlopen'ed late into a process that has
 * used up glibc's static TLS reserve - a few bytes here). */
extern __thread struct core *runtime__tls_core __attribute__((tls_model("initial-exec")));

static inline struct core *this_core(void)
{
	return runtime__tls_core;
}

/* The running fiber, or NULL outside fiber context. */
static inline struct fiber *this_fiber(void)
{
	struct core *c = runtime__tls_core;
	if (!c || (c->sched.current->flags & FIBER_LOOP))
		return NULL;
	return c->sched.current;
}

/* The fiber running on core c (the calling thread's, or NULL) if it may
 * block with no more checks - neither cancelled nor under a deadline of
 * its own - else NULL: the fast way of every blocking call. */
static inline struct fiber *runtime__plain_fiber(struct core *c)
{
	if (unlikely(!c))
		return NULL;
	struct fiber *f = c->sched.current;
	if (unlikely((f->flags & (FIBER_LOOP | FIBER_CANCELLED)) || f->deadline != NEVER))
		return NULL;
	return f;
}

/* Every blocking call's entry (fn: its name, for the misuse report): the
 * calling fiber in *out; -EPERM outside fiber context, -ECANCELED
 * (cancelled, not in a cleanup) or -ETIMEDOUT (past its deadline) if it
 * may not block; else 0. Inline: a plain fiber is let through by two
 * tests; the rest, and the clock, are read out of line. */
static inline int runtime__blocking_begin(struct fiber **out, const char *fn)
{
	struct fiber *f = runtime__plain_fiber(this_core());

	if (likely(f)) {
		*out = f;
		return 0;
	}
	*out = f = this_fiber();
	return runtime__blocking_refused(f, fn);
}

/* layer.h's deadline argument (0: none) as the runtime's (NEVER: none). */
static inline uint64_t runtime__call_deadline(uint64_t deadline)
{
	return deadline ? deadline : NEVER;
}

/* After runtime__blocking_begin, which checked the fiber's deadline: has
 * the call's own (NEVER: none), if earlier, already passed? The clock is
 * read only then. */
static inline bool runtime__call_deadline_passed(const struct fiber *f, uint64_t deadline)
{
	return unlikely(deadline < f->deadline) && runtime_now() >= deadline;
}

static inline bool runtime__on_owner_thread(const struct runtime *rt)
{
	return pthread_equal(pthread_self(), rt->owner_thread);
}

static inline bool runtime__is_running(const struct runtime *rt)
{
	return atomic_load_explicit(&rt->running, memory_order_acquire);
}

static inline bool runtime__is_shutting_down(const struct runtime *rt)
{
	return atomic_load_explicit(&rt->shutting_down, memory_order_relaxed);
}

/* May this thread act on core c directly (create fibers there, touch its
 * fibers and timers)? Its own core, or any core of a runtime that is not
 * running, from the owner thread outside any core. */
static inline bool runtime__may_create_on(const struct core *c)
{
	struct core *self = this_core();

	if (self)
		return self == c;
	return !runtime__is_running(c->rt) && runtime__on_owner_thread(c->rt);
}

/* loop.c */
struct core *runtime__place(struct runtime *rt);
void runtime__work_begin(struct runtime *rt);
void runtime__work_done(struct runtime *rt);

/* Lazy deadlines (timer.h's struct lazy_deadline), inline: the common
 * case is a compare. A wait begins on core c: fire runs when d's timer does, and ends the
 * wait if runtime__lazy_due(its timer) gives d - once, at the deadline,
 * unless runtime__lazy_end came first. fire is d's timer's own, not a
 * pointer of d's: every stream and fiber holds a lazy deadline. */
static inline void runtime__lazy_begin(struct core *c, struct lazy_deadline *d,
                                       uint64_t deadline,
                                       void (*fire)(struct timer *t, enum runtime_timer_why why))
{
	d->wait = deadline;
	d->timer.fire = fire;
	d->waiting = true;
	if (d->timer.state == TIMER_ARMED) {
		c->timers.lingering--; /* no longer lingering: a wait is under it */
		if (d->timer.deadline <= deadline)
			return; /* fires first, and is armed again then */
	}
	runtime__lazy_arm(c, d);
}

/* The wait is over (its timer may linger). */
static inline void runtime__lazy_end(struct lazy_deadline *d)
{
	if (!d->waiting)
		return; /* it expired */
	d->waiting = false;
	if (d->timer.state == TIMER_ARMED)
		d->timer.core->timers.lingering++;
}

/* A core's load (sched.load: live fibers, armed public timers, idle
 * streams) is its own; it counts as one unit of the runtime's work while
 * it is not zero. */
static inline void runtime__load_add(struct core *c)
{
	if (c->sched.load++ == 0)
		runtime__work_begin(c->rt);
}

static inline void runtime__load_sub(struct core *c)
{
	if (--c->sched.load == 0)
		runtime__work_done(c->rt);
}
void runtime__stop_all(struct runtime *rt);
void runtime__core_shutdown(struct core *c);

#endif /* RUNTIME_CORE_H */
