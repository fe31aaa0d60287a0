/* SPDX-License-Identifier: MIT */
/*
 * internal.h - the runtime's private contract between subsystems (never
 * installed). One struct core per core thread holds everything that thread
 * owns: its ring, run queue, timers and stack cache. Nothing here is shared
 * between threads except where a comment says so. Public names are
 * runtime_*, internal non-static ones runtime__*.
 */
#ifndef RUNTIME_INTERNAL_H
#define RUNTIME_INTERNAL_H

#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "engine/engine.h"
#include "fault.h"
#include "layer.h"
#include "list.h"
#include "misuse.h"
#include "runtime.h"
#include "switch.h"

#ifdef RUNTIME_FAULTS
/* A fault build's runtime allocates through these (fault.c), which fail
 * when FAULT_MALLOC strikes. A call written (malloc)(n) is left alone. */
void *runtime__fault_malloc(size_t n);
void *runtime__fault_calloc(size_t n, size_t size);
void *runtime__fault_realloc(void *p, size_t n);
#define malloc(n) runtime__fault_malloc(n)
#define calloc(n, size) runtime__fault_calloc(n, size)
#define realloc(p, n) runtime__fault_realloc(p, n)
#endif

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

struct core;

/* The runtime's own writes and closes go to the kernel, never through an
 * interposer: libruntime-preload would make a fiber's write a ring
 * operation, wrong in a signal handler and inside the runtime's own
 * bookkeeping. Same results as write(2) and close(2). */
static inline ssize_t sys_write(int fd, const void *buf, size_t len)
{
	return syscall(SYS_write, fd, buf, len);
}

static inline int sys_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

/* ------------------------------------------------------------------- time */

/* Internally a deadline is an absolute CLOCK_MONOTONIC time in ns, and
 * NEVER is the one that does not come (publicly, 0 means "none"). */
#define NEVER UINT64_MAX

/* The one place a deadline is computed: now + delay, saturating, so that a
 * huge delay means never, not at once. */
static inline uint64_t deadline_add(uint64_t now, uint64_t delay)
{
	return delay > NEVER - now ? NEVER : now + delay;
}

static inline uint64_t deadline_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* A public timeout: negative means no limit. */
static inline uint64_t deadline_from_timeout(uint64_t now, int64_t timeout_ns)
{
	return timeout_ns < 0 ? NEVER : deadline_add(now, (uint64_t)timeout_ns);
}


/* ----------------------------------------------------------------- stacks */

#define SLAB_STACKS 64  /* stacks per mmap, and per batch given back */

/* SLAB_STACKS stacks of `each` bytes (guard page first), and for each the
 * generation that handles carry: bumped when the stack is released, so a
 * handle kept past its fiber's end names no fiber (stack.c). */
struct slab {
	char *base;
	size_t each;
	struct core *core;                    /* whose stacks these are */
	uint32_t id;                          /* in the process-wide directory */
	_Atomic uint32_t gen[SLAB_STACKS];
};

struct stack {
	struct slab *slab;
	unsigned idx;
};

static inline char *stack_base(const struct stack *s)
{
	return s->slab->base + (size_t)s->idx * s->slab->each;
}

/* Usable top of a stack (page aligned, exclusive). */
static inline char *stack_top(const struct stack *s)
{
	return stack_base(s) + s->slab->each;
}

/* Stacks by the slot: each list of a core can hold every stack there is. */
struct stack_list {
	struct stack *v;
	size_t len, cap;
};

int runtime__stack_alloc(struct core *c, struct stack *s);
void runtime__stack_free(struct core *c, const struct stack *s);
void runtime__stacks_free(struct core *c);
size_t runtime__page_size(void);

/*
 * Handles: (generation << 32 | slab id << 6 | stack index). Every slab has
 * an id in a process-wide directory of SLAB_DIR_CHUNKS chunks of
 * SLAB_DIR_CHUNK entries (64M slabs over the life of the process), found
 * here without a call: join, cancel and unpark resolve a handle each time.
 */
#define HANDLE_IDX_BITS 6
#define SLAB_DIR_CHUNK 4096u
#define SLAB_DIR_CHUNKS 16384u
_Static_assert(SLAB_STACKS == 1u << HANDLE_IDX_BITS, "a handle holds a stack index");
_Static_assert((uint64_t)SLAB_DIR_CHUNKS * SLAB_DIR_CHUNK << HANDLE_IDX_BITS <= 1ull << 32,
               "a handle holds a slab id in 32 bits beside its generation");

typedef struct slab *_Atomic *_Atomic slab_dir_chunk;
extern slab_dir_chunk runtime__slab_dir[SLAB_DIR_CHUNKS];

static inline struct slab *slab_lookup(uint32_t id)
{
	if (id == 0 || id / SLAB_DIR_CHUNK >= SLAB_DIR_CHUNKS)
		return NULL;
	struct slab *_Atomic *chunk =
		atomic_load_explicit(&runtime__slab_dir[id / SLAB_DIR_CHUNK], memory_order_acquire);
	return chunk ? atomic_load_explicit(&chunk[id % SLAB_DIR_CHUNK], memory_order_acquire)
	             : NULL;
}

static inline struct runtime_fiber *handle_make(const struct stack *s, uint32_t *gen)
{
	*gen = atomic_load_explicit(&s->slab->gen[s->idx], memory_order_relaxed);
	uint64_t h = (uint64_t)*gen << 32 | (uint64_t)s->slab->id << HANDLE_IDX_BITS | s->idx;
	return (struct runtime_fiber *)(uintptr_t)h;
}

/* What a handle names: the fiber at its stack slot, that stack's core, and
 * the generation the handle was made under. */
struct handle_ref {
	struct fiber *fiber;
	struct core *core;
	uint32_t gen;
	const _Atomic uint32_t *live; /* the slot's generation now */
};

/* Does ref still name the fiber it named? */
static inline bool handle_current(const struct handle_ref *ref)
{
	return atomic_load_explicit(ref->live, memory_order_acquire) == ref->gen;
}

struct fiber;
static inline struct fiber *fiber_of_stack(const struct stack *s);

/* False if h names no fiber: never did, or its stack was released since.
 * Any thread. Slabs stay mapped until runtime_destroy, so what ref points
 * at may be read even once it has gone stale. */
static inline bool handle_resolve(const struct runtime_fiber *handle, struct handle_ref *ref)
{
	uint64_t h = (uint64_t)(uintptr_t)handle;
	struct slab *sl = slab_lookup((uint32_t)h >> HANDLE_IDX_BITS);
	unsigned idx = (unsigned)(h & (SLAB_STACKS - 1));

	if (!sl)
		return false;
	ref->fiber = fiber_of_stack(&(struct stack){ sl, idx });
	ref->core = sl->core;
	ref->gen = (uint32_t)(h >> 32);
	ref->live = &sl->gen[idx];
	return handle_current(ref);
}

/* ---------------------------------------------------------------- signals */

int runtime__signals_acquire(void);
void runtime__signals_release(void);
int runtime__core_signals_enter(struct core *c);
void runtime__core_signals_leave(struct core *c);
void runtime__shutdown_signals_release(struct runtime *rt);
int runtime__dump_signal_install(struct runtime *rt);
void runtime__dump_signal_release(struct runtime *rt);
void runtime__dump_signal_poll(struct core *c);

/* ------------------------------------------------------------------ inbox */

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

/* ----------------------------------------------------------------- fibers */

enum fiber_state {
	FIBER_READY,     /* on the run queue, or about to be */
	FIBER_RUNNING,
	FIBER_SUSPENDED, /* waiting for runtime__resume() */
	FIBER_DONE,
};

/* What a suspended fiber waits for (runtime_dump; names in debug.c). */
enum block {
	BLOCK_NONE,
	BLOCK_IO,        /* wait_obj: its struct op */
	BLOCK_STREAM,    /* a receive stream or listener: its struct mshot */
	BLOCK_SLEEP,
	BLOCK_PARK,
	BLOCK_JOIN,
	BLOCK_MUTEX,
	BLOCK_COND,
	BLOCK_WAITGROUP,
	BLOCK_SEM,       /* a semaphore or resource pool */
	BLOCK_CHAN,      /* send, receive or select */
	BLOCK_OFFLOAD,
	BLOCK_CLOSE,     /* a fixed file's release on its core */
	BLOCK_KINDS
};

enum fiber_flags {
	FIBER_CANCELLED = 1u << 0,
	FIBER_JOINABLE  = 1u << 1, /* a handle is out: keep the stack after exit */
	FIBER_VOID_FN   = 1u << 2, /* started by runtime_spawn: fn returns void */
	FIBER_LOOP      = 1u << 3, /* the core thread's own context, not a fiber */
	FIBER_SHIELDED  = 1u << 4, /* in a cleanup: a cancel waits for its end */
};

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
 * counted in c->dl_lingering, which the deadlock check sets aside: a
 * lingering timer is nobody's pending work.
 */
struct lazy_deadline {
	struct timer timer;         /* its fire: the owner's (runtime__lazy_due) */
	uint64_t wait;              /* the wait's deadline, NEVER: none */
	bool waiting;               /* a wait is under it */
};

/* runtime_cleanup's storage, on the fiber's stack from begin to end. */
struct cleanup {
	struct cleanup *outer;      /* the enclosing cleanup, or NULL */
	uint64_t saved_deadline;    /* the fiber's deadline, given back at the end */
	uint64_t bound;             /* no blocking call of it waits past this */
};

/*
 * A fiber. It lives at the top of its own stack, so a spawn is one stack
 * from the cache and nothing else, and a suspended fiber touches one page.
 */
struct fiber {
	/* runtime_park: gen << 32 | PARK_* state. First, so that creation can
	 * clear the rest while a stale unpark may still read this word. */
	_Atomic uint64_t park_state;
	void *sp;                   /* saved stack pointer while switched out */
	struct qnode runq;          /* run queue link */
	struct core *core;
	uint8_t state;
	uint8_t flags;
	uint8_t block;              /* enum block, while suspended */
	int resume_res;             /* what the resumer handed over */
	/* Called by cancel while suspended; must eventually resume the fiber.
	 * NULL: cancel resumes the fiber at once with -ECANCELED. */
	void (*interrupt)(struct fiber *f, int res);
	void *wait_obj;             /* what it is suspended on, for interrupt */
	uint64_t id;
	uint64_t deadline;          /* absolute ns, NEVER = none */
	struct cleanup *cleanup;    /* the innermost cleanup, while in one */
	struct runtime_fiber *handle;
	uint32_t gen;               /* the handle's generation */
	union {
		void (*void_fn)(void *);
		void *(*fn)(void *);
	};
	void *arg;
	void *result;
	void *local;
	struct fiber *joiner;
	void (*on_exit)(void *ctx);  /* runtime_limiter: a slot to give back */
	void *exit_ctx;
	struct dnode all;           /* every live fiber of the core */
	struct inbox_node wake_node;/* for resumes from other threads */
	int xwake_res;              /* their result, published by the push */
	struct stack stack;
	uint64_t block_since;       /* the core's clock when it suspended */
	/* The deadline of the wait under way (a lazy one, timer.c) and what
	 * ends the wait when it passes. */
	struct lazy_deadline dl;
	void (*dl_expire)(struct fiber *f, void *ctx);
	void *dl_ctx;
	char name[RUNTIME_FIBER_NAME_MAX]; /* runtime_fiber_name_set */
#ifdef RUNTIME_ASAN
	void *asan_fake_stack;
	const void *asan_bottom;
	size_t asan_size;
#endif
#ifdef RUNTIME_TSAN
	void *tsan_fiber;
#endif
};

/* Does a cancel show to f's blocking calls now? Not inside a cleanup,
 * which holds it back until the cleanup ends (runtime_cleanup_begin). */
static inline bool fiber_cancelled(const struct fiber *f)
{
	return (f->flags & (FIBER_CANCELLED | FIBER_SHIELDED)) == FIBER_CANCELLED;
}

/* The fiber struct sits at the top of its stack, in a 64-byte slot. */
#define FIBER_SLOT ((sizeof(struct fiber) + 63) & ~(size_t)63)

static inline struct fiber *fiber_of_stack(const struct stack *s)
{
	return (struct fiber *)(stack_top(s) - FIBER_SLOT);
}


/* Suspend the running fiber until runtime__resume(); a cancel or an
 * expiry (runtime_fiber_expire) calls interrupt(f, res) meanwhile, res
 * -ECANCELED or -ETIMEDOUT; NULL: they resume it with res. why and
 * wait_obj say what it waits for (runtime_dump). Returns what the resumer
 * handed over. */
int runtime__suspend(struct core *c, enum block why, void (*interrupt)(struct fiber *, int),
                     void *wait_obj);
/* Suspend until resumed or until deadline (NEVER: no limit), when the
 * result is timeout_res. */
int runtime__suspend_until(struct core *c, enum block why, void (*interrupt)(struct fiber *, int),
                           void *wait_obj, uint64_t deadline, int timeout_res);
/* The calling fiber f is about to suspend in a wait that ends at deadline
 * with expire(f, ctx) (which must end the wait); then, once the wait is
 * over, runtime__deadline_end. The timer is lazy: a later wait under a
 * deadline no earlier reuses it, with no heap push and pop. */
void runtime__deadline_begin(struct fiber *f, uint64_t deadline,
                             void (*expire)(struct fiber *f, void *ctx), void *ctx);
void runtime__deadline_end(struct fiber *f);
/* Make a suspended fiber of this core ready with res (no-op otherwise). */
void runtime__resume(struct fiber *f, int res);
/* The same from any thread, for a fiber that nothing else will resume. */
void runtime__resume_from_anywhere(struct fiber *f, int res);
void runtime__ignore_interrupt(struct fiber *f, int res);
/* runtime__blocking_begin's answer when it is not plainly 0 (below). */
int runtime__blocking_refused(struct fiber *f, const char *fn);
int runtime__fiber_spawn_here(struct core *c, void (*fn)(void *), void *arg);
int runtime__fiber_spawn_local(struct core *c, void (*fn)(void *), void *arg, struct fiber **out);
int runtime__fiber_spawn_with_exit(struct core *c, void (*fn)(void *), void *arg,
                                   void (*on_exit)(void *ctx), void *ctx);
/* Mark f cancelled and, if it is suspended and not in a cleanup, call its
 * interrupt hook (NULL: resume it with -ECANCELED). A fiber in a cleanup
 * keeps waiting: the cancel shows after the cleanup ends. */
void runtime__fiber_cancel(struct fiber *f);
void runtime__fiber_release(struct core *c, struct fiber *f);
void runtime__run_ready(struct core *c);

/* ----------------------------------------------------------------- timers */

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

/* A core's armed timers: lanes, and a heap for the rest. */
struct timer_set {
	struct heap_slot *slot;     /* the heap */
	uint32_t len, cap;
	uint32_t armed;             /* in the heap and the lanes */
	uint64_t lower;             /* no armed deadline is earlier: a loop
	                               turn before it looks no further */
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

/* ----------------------------------------------------------- sync waits */

/* wait.c: the protocol every sync primitive waits with. */
struct spin {
	_Atomic int held;
};

void runtime__spin_lock(struct spin *s);
void runtime__spin_unlock(struct spin *s);

/* Waiters of one primitive, under the primitive's spinlock. len may be
 * read without it, as the Dekker half of a lock-free fast path. */
struct waitq {
	_Atomic uint32_t len;
	struct dlist list;          /* zeroed: set up on first use */
};

enum { WAIT_PENDING, WAIT_CLAIMED };

struct wait;

/* One queue entry of a waiting fiber (a select has one per channel). */
struct waiter {
	struct dnode link;          /* in q, under *lock */
	struct wait *wait;
	struct spin *lock;
	struct waitq *q;
	void *data;                 /* handed over: a resource; an element's
	                               source (send) or destination (receive) */
	unsigned index;             /* select: which operation */
};

/* A suspended fiber's wait, on its stack; ended by whoever wins state. */
struct wait {
	struct fiber *fiber;
	_Atomic int state;          /* WAIT_PENDING, then WAIT_CLAIMED */
	int res;                    /* what ended it */
	struct waiter *winner;      /* the waiter a waker served */
	struct waiter *waiters;
	unsigned nwaiters;
	struct timer timer;         /* its deadline */
	struct wait *next;          /* a waker's list of waits to wake */
};

void runtime__wait_init(struct wait *w, struct waiter *waiters, unsigned n);
void runtime__waitq_add(struct waitq *q, struct waiter *w);
void runtime__waitq_publish(struct waitq *q);
void runtime__waitq_remove(struct waitq *q, struct waiter *w);
struct waiter *runtime__waitq_pick(struct waitq *q, bool lifo);
void runtime__wait_wake(struct wait *w, int res);
struct wait *runtime__waitq_take_all(struct waitq *q);
void runtime__wake_list(struct wait *w, int res);
void runtime__wait_interrupt(struct fiber *f, int res);
void runtime__wait_timer_fire(struct timer *t, enum runtime_timer_why why);
void runtime__wait_unlink_all(struct wait *w);
int runtime__wait_begin(const struct fiber *f, int64_t timeout_ns, uint64_t *deadline);

/* ---------------------------------------------------------------- streams */

#include "bufpool.h"

/* ------------------------------------------------------------ multishots */

struct mshot;

struct mshot_ops {
	/* Every result of the request (a CQE on io_uring, a read or accept
	 * on epoll), the terminal one (no MSHOT_F_MORE) last; also after
	 * close (m->closed), to give back what it carries. */
	void (*cqe)(struct mshot *m, int res, unsigned flags);
	/* Closed and quiet: give back what is queued, free the object. */
	void (*release)(struct mshot *m);
};

enum mshot_kind {
	MSHOT_RECV,     /* into the core's buffer pool (CQE flags name the buffer) */
	MSHOT_ACCEPT,   /* each result an accepted fd */
};

/* A multishot request and its owner's lifecycle (multishot.c); the engine
 * arms and stops the request (engine.h). The first member of its owner,
 * which must be 16-aligned (io_uring's cancel bit). */
struct mshot {
	_Alignas(16) struct core *core;
	struct dnode link;          /* in the core's mshots */
	const struct mshot_ops *ops;
	int fd;
	uint8_t kind;               /* enum mshot_kind */
	int flags;                  /* MSHOT_ACCEPT: accept4's flags */
	bool armed;                 /* its terminal result is due */
	bool stopping;              /* io_uring: cancel until the terminal CQE */
	bool cancel_in_flight;
	bool closed;                /* the owner let go: free when quiet */
	uint8_t retries;
	struct fiber *waiter;       /* a fiber waiting for the next result */
	struct timer retry;         /* io_uring: sends the next cancel */
};

void runtime__mshot_init(struct mshot *m, struct core *c, int fd, enum mshot_kind kind,
                         int flags, const struct mshot_ops *ops);
void runtime__mshot_arm(struct mshot *m);
void runtime__mshot_stop(struct mshot *m);
void runtime__mshot_close(struct mshot *m);
int runtime__mshot_wait(struct mshot *m, struct fiber *f, uint64_t deadline);
void runtime__mshot_deliver(struct mshot *m, int res, unsigned flags);
void runtime__mshot_quiet(struct mshot *m);
/* runtime__mshot_deliver's full way, for a result of any kind. */
void runtime__mshot_result(struct mshot *m, int res, unsigned flags);
/* A receive stream's result (stream.c): a waiting reader's bytes handed
 * over at once, anything else to runtime__mshot_result. */
void runtime__stream_deliver(struct mshot *m, int res, unsigned flags);
void runtime__mshots_free(struct core *c);

/* ------------------------------------------------------------ idle streams */

enum idle_state {
	IDLE_NONE,
	IDLE_WAITING,   /* its continuation waits for what ends the wait */
	IDLE_WAKING,    /* its continuation's fiber is due to start */
};

/* A stream waiting with no fiber (idle.c), inside the stream. */
struct idle {
	struct lazy_deadline dl;    /* the wait's deadline; then a failed
	                               spawn's retry */
	runtime_stream_idle_fn *fn;
	void *arg;
	struct runtime_fiber *poller; /* polling: the fiber, once in its poll */
	int fd;
	int16_t why;                /* what ended the wait, for fn: 0 or -errno */
	uint8_t state;              /* enum idle_state */
	bool polling;               /* a fiber polls: the engine cannot watch */
};

void runtime__idle_begin(struct core *c, struct idle *w, int fd, uint64_t deadline,
                         runtime_stream_idle_fn *fn, void *arg, bool polling);
/* End w's wait (if it waits) with why: its continuation starts. */
void runtime__idle_wake(struct idle *w, int why);
/* A drain (-ESHUTDOWN) or a shutdown (-ECANCELED): every idle stream of
 * the core (stream.c). */
void runtime__idle_wake_all(struct core *c, int why);
void runtime__idle_forget(struct idle *w);

/* ------------------------------------------------------------------- core */

/* A core's counters (runtime_stats): written by the core alone with a plain
 * relaxed store (no locked instruction), read from any thread; wakeups is
 * added to by the threads that wake the core. */
struct core_stats {
	_Atomic uint64_t spawned, live, sqes, cqes, enters, timers, inbox, wakeups;
	_Atomic uint64_t stream_fallbacks;
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
};

static inline void stall_publish(struct core *c, const struct fiber *to);

struct core_log;

struct core {
	struct runtime *rt;
	const struct engine *eng;   /* the runtime's (engine.h) */
	unsigned index;
	struct fiber *current;      /* running fiber, or &loop */
#ifdef RUNTIME_ASAN
	struct fiber *prev;         /* the context that switched to current */
#endif
	struct fiber loop;          /* the core thread's own context */
	struct queue ready;
	unsigned budget;            /* fibers left to run this turn */
	bool share_fp;              /* runtime_config.share_fp_control */
	struct fiber *zombie;       /* ended fiber whose stack is to be freed */
	struct dlist fibers;        /* every live fiber */
	unsigned load;              /* live fibers + armed public timers */
	unsigned xparked;           /* fibers another thread may resume (runtime_park,
	                               sync waits, a fixed-file release): no deadlock */
	uint64_t next_id;
	uint64_t now;               /* the clock, read once per loop turn */
	uint32_t dl_lingering;      /* fibers' deadline timers armed with no
	                               wait under them (no pending work) */
	uint64_t rand;              /* xorshift state: select's fair start */

	/* Shared with other threads (inbox.c). */
	_Atomic(struct inbox_node *) inbox;
	_Atomic int sleeping;       /* blocked (or about to) in the kernel */
	int wake_fd;                /* eventfd other threads write to wake us */
	struct queue backlog;       /* inbox work taken, not yet handled */
	bool spin_next;             /* spin for cross-core work before the next
	                               sleep (loop.c) */
	uint64_t slept_at;          /* when the core last went to sleep; 0
	                               once the first turn after it has run */
	struct inbox_node shutdown_node;
	_Atomic bool shutdown_sent;
	pthread_t thread;           /* cores 1..: their thread, for the join */
	sigset_t saved_mask;        /* the thread's signal mask before the run */

	/* Operations in the kernel that will complete by themselves: SQEs
	 * whose last CQE is due (io_uring), fibers parked on readiness
	 * (epoll). With the two armed reads below, what deadlocked() counts. */
	unsigned in_flight;
	bool wake_armed;            /* a read is armed on wake_fd */
	bool signal_armed;          /* one on the shutdown signalfd (core 0) */
	void *engine_state;         /* the engine's own, while a run lasts
	                               (engine/uring.h, engine/epoll.c) */

	struct bufpool bufpool;     /* receive streams' buffers (bufpool.c) */
	struct dlist mshots;        /* streams and listeners, open or closing */
	struct inbox_node idle_drain_node; /* a drain wakes its idle streams */
	struct core_log *log;       /* runtime_log's buffers (log.c) */

	struct timer_set timers;
	struct queue timer_done;    /* public timers whose callback is due */
	uint64_t timer_seq;

	struct stack_list resident; /* freed stacks, pages still there; the
	                               last freed is the first reused */
	unsigned resident_low;      /* the fewest resident this decay period */
	struct timer stack_decay;   /* gives back what was not reused */
	struct stack_list clean;    /* stacks whose pages were given back */
	struct {                    /* freed stacks awaiting MADV_DONTNEED */
		struct stack v[SLAB_STACKS];
		unsigned len;
	} pending;
	struct slab **slabs;        /* every slab, unmapped at destroy */
	unsigned nslabs, slab_cap;
	void *altstack;
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
	if (!c || (c->current->flags & FIBER_LOOP))
		return NULL;
	return c->current;
}

/* The fiber running on core c (the calling thread's, or NULL) if it may
 * block with no more checks - neither cancelled nor under a deadline of
 * its own - else NULL: the fast way of every blocking call. */
static inline struct fiber *runtime__plain_fiber(struct core *c)
{
	if (unlikely(!c))
		return NULL;
	struct fiber *f = c->current;
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

/*
 * Suspend the calling fiber on w, whose waiters are queued (and every lock
 * dropped), until a waker, the deadline (NEVER: none) or - if cancellable -
 * a cancel ends it. Returns what ended it: the waker's result, -ETIMEDOUT
 * or -ECANCELED. Afterwards none of w's waiters is in any queue. Inline:
 * every call level between a blocking call and the switch is a return the
 * CPU mispredicts when the fiber resumes (a channel ping-pong ran 25 %
 * faster with one level fewer).
 */
static inline __attribute__((always_inline)) int
runtime__wait_suspend(struct wait *w, enum block why, uint64_t deadline, bool cancellable)
{
	struct core *c = w->fiber->core;

	if (deadline != NEVER) {
		w->timer.fire = runtime__wait_timer_fire;
		w->timer.on_shutdown = false;
		runtime__timer_start(c, &w->timer, deadline);
	}
	c->xparked++; /* any thread may post, signal or send: no deadlock */
	runtime__suspend(c, why, cancellable ? runtime__wait_interrupt : runtime__ignore_interrupt, w);
	c->xparked--;
	if (deadline != NEVER)
		runtime__timer_stop(&w->timer);
	if (w->nwaiters > 1)
		runtime__wait_unlink_all(w);
	return w->res;
}

/* loop.c */
struct core *runtime__place(struct runtime *rt);
void runtime__work_begin(struct runtime *rt);
void runtime__work_done(struct runtime *rt);

/* A core's load (live fibers, armed public timers) is its own; it counts
 * as one unit of the runtime's work while it is not zero. */
/* Lazy deadlines (see struct lazy_deadline), inline: the common case is
 * a compare. */
/* A wait begins on core c: fire runs when d's timer does, and ends the
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
		c->dl_lingering--; /* no longer lingering: a wait is under it */
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
		d->timer.core->dl_lingering++;
}

static inline void runtime__load_add(struct core *c)
{
	if (c->load++ == 0)
		runtime__work_begin(c->rt);
}

static inline void runtime__load_sub(struct core *c)
{
	if (--c->load == 0)
		runtime__work_done(c->rt);
}
void runtime__stop_all(struct runtime *rt);
void runtime__core_shutdown(struct core *c);

/* offload.c */
int runtime__offload_finish(struct fiber *f, void *(*fn)(void *), void *arg, void **result);
int runtime__offload_init(struct runtime *rt);
void runtime__offload_free(struct runtime *rt);
int runtime__offload_start(struct runtime *rt);
void runtime__offload_stop(struct runtime *rt);

/* debug.c */
void runtime__dump_signalled(struct core *c);


/* log.c */
void runtime__log_free(struct core *c);

/* drain.c */
int runtime__drain_init(struct runtime *rt);
void runtime__drain_free(struct runtime *rt);
void runtime__signalled(struct runtime *rt);
/* What the first SIGINT or SIGTERM does: drain for grace_ns, or (false)
 * shut down: the later of runtime_drain_on_signals and
 * runtime_shutdown_on_signals decides. */
void runtime__signals_drain(struct runtime *rt, bool drain, uint64_t grace_ns);

/* stall.c */
int runtime__stall_start(struct runtime *rt);
void runtime__stall_stop(struct runtime *rt);

/* named.c */
int runtime__named_init(struct runtime *rt);
void runtime__named_free(struct runtime *rt);

#endif /* RUNTIME_INTERNAL_H */
