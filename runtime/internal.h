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
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/signalfd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

struct core;

/* ----------------------------------------------------------------- stacks */

struct stack {
	void *base;     /* lowest address of the mapping (the guard page) */
	size_t size;    /* whole mapping, guard included */
};

/* Usable top of a stack (16-byte aligned, exclusive). */
static inline char *stack_top(const struct stack *s)
{
	return (char *)s->base + s->size;
}

int runtime__stack_alloc(struct core *c, struct stack *s);
void runtime__stack_free(struct core *c, struct stack *s);
void runtime__stack_cache_drain(struct core *c);
size_t runtime__stack_guard_size(void);
int runtime__overflow_handler_install(void);
int runtime__altstack_enter(struct core *c);
void runtime__altstack_leave(struct core *c);

/* ----------------------------------------------------------------- fibers */

enum fiber_state {
	FIBER_READY,    /* on the run queue, or about to be */
	FIBER_RUNNING,
	FIBER_PARKED,   /* waiting for runtime__wake() */
	FIBER_DONE,
};

enum fiber_flags {
	FIBER_CANCELLED = 1u << 0,
	FIBER_JOINABLE  = 1u << 1, /* a handle is out: keep the struct after exit */
	FIBER_VOID_FN   = 1u << 2, /* started by runtime_spawn: fn returns void */
	FIBER_LOOP      = 1u << 3, /* the core thread's own context, not a fiber */
};

/* Work handed to a core by another thread (inbox.c). */
enum inbox_kind {
	INBOX_SPAWN,    /* struct spawn_req: start a fiber here */
	INBOX_WAKE,     /* struct fiber's own node: wake it with xwake_res */
	INBOX_SHUTDOWN, /* the core's own node: shut this core down */
	INBOX_NAMED_START,  /* a named timer reached its core (named.c) */
	INBOX_NAMED_CANCEL, /* a canceller won the race for a named timer */
};

struct inbox_node {
	struct inbox_node *next;
	uint8_t kind;
};

struct spawn_req {
	struct inbox_node node;
	void (*fn)(void *);
	void *arg;
};

/*
 * A fiber. It lives at the top of its own stack, so a spawn is one stack
 * from the cache and nothing else, and a parked fiber touches one page.
 */
struct fiber {
	void *sp;                   /* saved stack pointer while switched out */
	struct fiber *next;         /* run queue link */
	struct core *core;
	uint8_t state;
	uint8_t flags;
	int wake_res;               /* what the waker handed over */
	/* Called by cancel while parked; must eventually wake the fiber. NULL:
	 * cancel wakes the fiber at once with -ECANCELED. */
	void (*interrupt)(struct fiber *f);
	void *wait_obj;             /* what it is parked on, for interrupt */
	uint64_t id;
	uint64_t deadline;          /* absolute ns, 0 = none */
	union {
		void (*void_fn)(void *);
		void *(*fn)(void *);
	};
	void *arg;
	void *result;
	void *local;
	struct fiber *joiner;
	struct fiber *all_prev, *all_next; /* every live fiber of the core */
	_Atomic int park_state;     /* runtime_park: empty, permit, parked */
	struct inbox_node inbox;    /* for wake-ups from other threads */
	int xwake_res;              /* their result, published by the push */
	struct stack stack;
#ifdef RUNTIME_ASAN
	void *asan_fake_stack;
	const void *asan_bottom;
	size_t asan_size;
#endif
#ifdef RUNTIME_TSAN
	void *tsan_fiber;
#endif
};

struct fiber_queue {
	struct fiber *head, *tail;
};

void runtime__switch(void **save_sp, void *next_sp);
void runtime__fiber_trampoline(void);
/* Lay out a first frame below top (16-byte aligned) so that switching to
 * the returned sp calls entry(arg); entry must never return. */
void *runtime__context_init(void *top, void (*entry)(void *), void *arg);

/* ----------------------------------------------------------------- timers */

enum timer_state { TIMER_IDLE, TIMER_ARMED, TIMER_CANCELLING };

/* Internal timer: the public struct runtime_timer's storage, and what
 * sleeps and timed parks use. fire() runs exactly once per start. */
struct timer {
	uint64_t deadline;          /* absolute CLOCK_MONOTONIC ns */
	void (*fire)(struct timer *t, enum runtime_timer_why why);
	struct core *core;
	uint32_t heap_index;
	uint8_t state;
	uint8_t cancel_why;         /* kernel mode: why, once the removal lands */
	struct __kernel_timespec ts; /* kernel mode: read by the kernel at submit */
	runtime_timer_fn *user_fn;   /* public timers only */
	void *user_arg;
};

struct heap_slot {
	uint64_t deadline;
	struct timer *t;
};

struct timer_heap {
	struct heap_slot *slot;
	uint32_t len, cap;
};

void runtime__timer_start(struct core *c, struct timer *t, uint64_t deadline);
void runtime__timer_cancel(struct timer *t);
void runtime__timers_fire_due(struct core *c);
void runtime__timers_arm(struct core *c);
void runtime__timers_shutdown(struct core *c);
void runtime__timers_free(struct core *c);
void runtime__timer_cqe(struct core *c, void *ptr, int res);
void runtime__ktimeout_cqe(struct core *c, uint64_t user_data, int res);

/* ------------------------------------------------------------------- ring */

/* user_data tags in the low 3 bits of an 8-aligned pointer. */
enum cqe_tag {
	TAG_OP = 0,       /* struct op: the operation itself */
	TAG_LINK_TIMEOUT, /* struct op: its linked timeout */
	TAG_CANCEL,       /* struct op: an ASYNC_CANCEL aimed at it */
	TAG_TIMER,        /* struct timer, kernel mode */
	TAG_KTIMEOUT,     /* heap mode's armed timeout; generation << 3 */
	TAG_IGNORE,       /* no one waits for this CQE */
	TAG_WAKEUP,       /* struct core: its eventfd read */
	TAG_SIGNAL,       /* struct core: the shutdown signalfd read (core 0) */
};
#define TAG_MASK 7ull

static inline void ts_from_ns(struct __kernel_timespec *ts, uint64_t ns)
{
	ts->tv_sec = (long long)(ns / 1000000000ull);
	ts->tv_nsec = (long long)(ns % 1000000000ull);
}

static inline uint64_t tagged(const void *p, enum cqe_tag tag)
{
	return (uint64_t)(uintptr_t)p | tag;
}

/* Features found by the start-up probe (read-only once cores run). */
struct ring_features {
	unsigned setup_flags;       /* flags every ring is created with */
};

struct io_uring_sqe *runtime__sqe(struct core *c);
void runtime__sqe_reserve(struct core *c, unsigned n);
int runtime__ring_init(struct core *c);
void runtime__ring_exit(struct core *c);
int runtime__ring_enter(struct core *c, bool wait);
bool runtime__busy_poll(struct core *c);
int runtime__ring_probe(const struct runtime_config *cfg);
bool runtime__fixed(struct core *c, int fd);
void runtime__fixed_forget(struct core *c, int fd);

/* An in-flight operation, on the waiting fiber's stack. The fiber resumes
 * only when pending reaches 0: every CQE that names this struct has come. */
struct op {
	struct fiber *fiber;
	int res;
	uint8_t pending;
	bool timed_out;             /* the linked timeout fired */
	bool cancel_sent;           /* an ASYNC_CANCEL is (or was) in flight */
	bool cancellable;           /* false for close: cleanup must not fail */
	uint64_t deadline;          /* absolute ns for the linked timeout, 0 = none */
	struct __kernel_timespec ts;
};

void runtime__op_cqe(struct core *c, struct op *op, enum cqe_tag tag, int res);

/* ------------------------------------------------------------------- core */

struct core {
	struct runtime *rt;
	unsigned index;
	struct fiber *current;      /* running fiber, or &loop */
	struct fiber *prev;         /* the context that switched to current */
	struct fiber loop;          /* the core thread's own context */
	struct fiber_queue ready;
	unsigned budget;            /* fibers left to run this turn */
	struct fiber *zombie;       /* ended fiber whose stack is to be freed */
	struct fiber *all;          /* every live fiber */
	unsigned load;              /* live fibers + armed public timers */
	unsigned xparked;           /* fibers in runtime_park: others may wake them */
	uint64_t next_id;

	/* Shared with other threads (inbox.c). */
	_Atomic(struct inbox_node *) inbox;
	_Atomic int sleeping;       /* blocked (or about to) in io_uring_enter */
	int wake_fd;                /* eventfd other threads write to wake us */
	uint64_t wake_buf;          /* the armed read's buffer */
	bool wake_armed;
	struct inbox_node *deferred;/* inbox work taken, not yet handled */
	struct inbox_node *deferred_tail;
	bool signal_armed;
	struct inbox_node shutdown_node;
	_Atomic bool shutdown_sent;
	pthread_t thread;

	struct io_uring ring;
	bool ring_ready;
	unsigned in_flight;         /* submitted SQEs whose CQE is still due */

	struct timer_heap timers;
	uint64_t kt_deadline;       /* heap mode: armed kernel timeout, 0 = none */
	uint64_t kt_gen;
	struct __kernel_timespec kt_ts;

	uint8_t *fixed;             /* fixed_files: fd registered at slot fd? */

	struct stack *stack_cache;  /* hot stacks, pages resident */
	unsigned stack_cached;
	struct {                    /* stacks whose pages were given back */
		void **v;
		size_t len, cap;
	} clean;
	struct {                    /* freed stacks awaiting MADV_DONTNEED */
		void *v[64];
		unsigned len;
	} pending;
	void **slabs;               /* every slab, unmapped at destroy */
	unsigned nslabs, slab_cap;
	void *altstack;
};

struct runtime {
	struct runtime_config cfg;
	struct ring_features feat;
	struct core *cores;
	unsigned ncores;
	pthread_t owner_thread;     /* the creating thread: runs core 0 */
	_Atomic bool running;
	_Atomic bool shutting_down;
	_Atomic bool stop;          /* every core leaves its loop */
	_Atomic long work;          /* busy cores + inbox items in transit */
	_Atomic unsigned next_core; /* round-robin placement */
	struct named_registry *named;
	int signal_fd;              /* runtime_shutdown_on_signals, or -1 */
	struct signalfd_siginfo signal_buf;
};

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

void runtime__inbox_push(struct core *c, struct inbox_node *n);
void runtime__inbox_drain(struct core *c);
int runtime__inbox_handle(struct core *c, struct inbox_node *n);
void runtime__core_wake(struct core *c);
bool runtime__core_may_sleep(struct core *c);
void runtime__core_awake(struct core *c);
void runtime__wakeup_cqe(struct core *c);
struct core *runtime__place(struct runtime *rt);
void runtime__work_begin(struct runtime *rt);
void runtime__work_done(struct runtime *rt);
int runtime__named_init(struct runtime *rt);
void runtime__named_free(struct runtime *rt);
void runtime__named_discard(struct runtime *rt, struct inbox_node *n);
void runtime__named_start_here(struct core *c, struct inbox_node *n);
void runtime__named_cancel_here(struct core *c, struct inbox_node *n);
void runtime__load_add(struct core *c);
void runtime__load_sub(struct core *c);

int runtime__park(struct core *c, void (*interrupt)(struct fiber *), void *wait_obj);
int runtime__park_until(struct core *c, uint64_t deadline, int timeout_res);
void runtime__wake(struct fiber *f, int res);
int runtime__cancel_pending(struct fiber *f);
int runtime__blocking_begin(struct fiber **out);

#endif /* RUNTIME_INTERNAL_H */
