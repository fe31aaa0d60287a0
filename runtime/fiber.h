/* SPDX-License-Identifier: MIT */
/*
 * fiber.h - fibers (fiber.c): a struct fiber at the top of its own stack,
 * a core's run queue, suspend and resume, spawn, cancel, deadlines and
 * cleanups. A fiber lives on one core for its whole life: only that core's
 * thread runs, suspends or resumes it (other threads go through its
 * inbox node).
 */
#ifndef RUNTIME_FIBER_H
#define RUNTIME_FIBER_H

#include "base.h"
#include "inbox.h"
#include "stack.h"
#include "switch.h"
#include "timer.h"

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


/* A core's scheduling state (fiber.c): what runs, what is ready, and
 * every live fiber; the core's own, touched by its thread alone. */
struct sched {
	struct fiber *current;      /* running fiber, or &loop */
#ifdef RUNTIME_ASAN
	struct fiber *prev;         /* the context that switched to current */
#endif
	struct queue ready;
	unsigned budget;            /* fibers left to run this turn */
	bool share_fp;              /* runtime_config.share_fp_control */
	struct fiber *zombie;       /* ended fiber whose stack is to be freed */
	struct dlist fibers;        /* every live fiber */
	unsigned load;              /* live fibers + armed public timers + idle
	                               streams: the core's part of the work */
	unsigned xparked;           /* fibers another thread may resume (runtime_park,
	                               sync waits, a fixed-file release): no deadlock */
	uint64_t next_id;
	struct fiber loop;          /* the core thread's own context */
};

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

#endif /* RUNTIME_FIBER_H */
