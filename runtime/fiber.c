/* SPDX-License-Identifier: MIT */
/*
 * fiber.c - fibers: creation and exit, the switch from one to the next,
 * suspend/resume (what every blocking call is built on), spawn, join,
 * detach, cancel, handles, locals, deadlines, cleanups that a cancel
 * cannot cut short, and the public park/unpark.
 *
 * A fiber gives up the CPU by suspending (runtime__suspend) or yielding,
 * and hands it straight to the next ready fiber, with no trip through the
 * core loop, until the turn's budget is spent. Whatever is on its core
 * resumes it (runtime__resume); other threads go through its core's inbox.
 * Cancelling a suspended fiber calls the interrupt hook it suspended with,
 * so that a fiber whose SQE points at its stack is never resumed while the
 * kernel may still write there - except inside a cleanup, where the cancel
 * is only recorded and the wait runs on to its end or the cleanup's bound.
 *
 * Handles are checked (stack.c): one kept after its fiber has ended gives
 * -ESRCH, never another fiber's fate.
 */
#include "core.h"

#include <stdlib.h>
#include <string.h>

#ifdef RUNTIME_ASAN
#include <sanitizer/asan_interface.h>
#endif
#ifdef RUNTIME_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* runtime_park's state, in the low bits of park_state (the handle's
 * generation is in the high 32): an unpark, a timeout and a cancel race
 * for the one PARKED -> EMPTY transition; the winner resumes the fiber. */
enum { PARK_EMPTY, PARK_PERMIT, PARK_PARKED, PARK_ENDED };

static uint64_t park_word(uint32_t gen, unsigned state)
{
	return (uint64_t)gen << 32 | state;
}

/* ------------------------------------------------------------- switching */

void runtime__fiber_release(struct core *c, struct fiber *f)
{
	struct stack s = f->stack; /* f lives on s: copy before freeing */
#ifdef RUNTIME_TSAN
	__tsan_destroy_fiber(f->tsan_fiber);
#endif
	runtime__stack_free(c, &s);
}

/* Runs first thing in whichever context a switch lands in. */
static void finish_switch(struct core *c)
{
#ifdef RUNTIME_ASAN
	/* ASan reports the stack we came from: this is how the core loop's
	 * (the thread's own) stack bounds become known. */
	__sanitizer_finish_switch_fiber(c->sched.current->asan_fake_stack,
	                                &c->sched.prev->asan_bottom, &c->sched.prev->asan_size);
#endif
	if (unlikely(c->sched.zombie != NULL)) {
		struct fiber *z = c->sched.zombie;
		c->sched.zombie = NULL;
		runtime__fiber_release(c, z);
	}
}

/* What every switch does before the registers move. Inlined, with the
 * switch itself, where a fiber gives up the CPU (switch.h says why). */
static inline __attribute__((always_inline)) void switch_begin(struct core *c, struct fiber *from,
                                                               struct fiber *to)
{
	c->sched.current = to;
#ifdef RUNTIME_ASAN
	c->sched.prev = from;
#endif
	to->state = FIBER_RUNNING;
	stat_add(&c->stats.switches, 1);
	if (unlikely(c->watch.on))
		stall_publish(c, to);
#ifdef RUNTIME_ASAN
	/* A fiber that has ended passes NULL so ASan drops its fake stack. */
	__sanitizer_start_switch_fiber(from->state == FIBER_DONE ? NULL : &from->asan_fake_stack,
	                               to->asan_bottom, to->asan_size);
#endif
#ifdef RUNTIME_TSAN
	__tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
	(void)from;
}

static inline __attribute__((always_inline)) void switch_to(struct core *c, struct fiber *from,
                                                            struct fiber *to)
{
	switch_begin(c, from, to);
	if (c->sched.share_fp)
		runtime__switch_shared_fp(&from->sp, to->sp);
	else
		runtime__switch(&from->sp, to->sp);
	finish_switch(c);
}

/* A fiber that has ended: nothing of it is saved, it never runs again. */
__attribute__((noreturn)) static void switch_away(struct core *c, struct fiber *from,
                                                  struct fiber *to)
{
	switch_begin(c, from, to);
	if (c->sched.share_fp)
		runtime__switch_final_shared_fp(to->sp);
	else
		runtime__switch_final(to->sp);
}

static void make_ready(struct core *c, struct fiber *f)
{
	f->state = FIBER_READY;
	queue_push(&c->sched.ready, &f->runq);
	stat_add(&c->stats.ready, 1);
}

/* Many fibers are many cold stack pages: while one runs, the next one's
 * saved frame and the one after's fiber struct are fetched. (The next's
 * struct, read here for its sp, was fetched one pick earlier.) */
static inline void prefetch_ahead(const struct queue *ready)
{
	const struct qnode *n = ready->head;

	if (n) {
		__builtin_prefetch(container_of(n, struct fiber, runq)->sp);
		__builtin_prefetch(n->next, 1);
	}
}

static struct fiber *next_ready(struct core *c)
{
	struct qnode *n = queue_pop(&c->sched.ready);

	prefetch_ahead(&c->sched.ready);
	if (!n)
		return NULL;
	stat_add(&c->stats.ready, -1);
	return container_of(n, struct fiber, runq);
}

/* The next context to run after the current fiber gives up the CPU: the
 * next ready fiber while the turn's budget lasts, else the core loop. */
static struct fiber *pick_next(struct core *c)
{
	if (c->sched.budget && !queue_empty(&c->sched.ready)) {
		c->sched.budget--;
		return next_ready(c);
	}
	return &c->sched.loop;
}

/* pick_next chose the fiber that gave up the CPU: it goes on running. */
static inline __attribute__((always_inline)) void stay_running(struct core *c, struct fiber *self)
{
	self->state = FIBER_RUNNING;
	if (unlikely(c->watch.on))
		stall_publish(c, self); /* it did yield: no stall */
}

/* Inlined into suspend and yield: a call here costs yield_ns a third. */
static inline __attribute__((always_inline)) void schedule(struct core *c, struct fiber *self)
{
	struct fiber *next = pick_next(c);

	if (next != self)
		switch_to(c, self, next);
	else
		stay_running(c, self);
}

/* The loop's run phase: run ready fibers, up to run_budget of them. */
void runtime__run_ready(struct core *c)
{
	if (queue_empty(&c->sched.ready))
		return;
	c->sched.budget = c->rt->cfg.run_budget - 1;
	switch_to(c, &c->sched.loop, next_ready(c));
}

static void deadline_drop(struct fiber *f);

__attribute__((noreturn)) static void fiber_exit(struct core *c, struct fiber *f)
{
	if (f->on_exit)
		f->on_exit(f->exit_ctx);
	deadline_drop(f);
	f->state = FIBER_DONE;
	dlist_remove(&f->all);
	stat_add(&c->stats.live, -1);
	atomic_store_explicit(&f->park_state, park_word(f->gen, PARK_ENDED), memory_order_release);
	if (f->joiner)
		runtime__resume(f->joiner, 0);
	if (!(f->flags & FIBER_JOINABLE))
		c->sched.zombie = f; /* freed by the next context, off this stack */
	runtime__load_sub(c);
	switch_away(c, f, pick_next(c));
}

/* Entered from runtime__fiber_trampoline on the fiber's fresh stack. */
__attribute__((noreturn)) static void fiber_main(void *arg)
{
	struct fiber *f = arg;
	struct core *c = f->core;

	finish_switch(c);
	if (f->flags & FIBER_VOID_FN)
		f->void_fn(f->arg);
	else
		f->result = f->fn(f->arg);
	fiber_exit(c, f);
}

/* -------------------------------------------------------- suspend/resume */

int runtime__suspend(struct core *c, enum block why, void (*interrupt)(struct fiber *, int),
                     void *wait_obj)
{
	struct fiber *f = c->sched.current;

	f->state = FIBER_SUSPENDED;
	f->block = (uint8_t)why;
	f->block_since = c->now;
	f->interrupt = interrupt;
	f->wait_obj = wait_obj;
	schedule(c, f);
	f->interrupt = NULL;
	f->wait_obj = NULL;
	return f->resume_res;
}

void runtime__resume(struct fiber *f, int res)
{
	if (f->state != FIBER_SUSPENDED)
		return;
	f->resume_res = res;
	make_ready(f->core, f);
}

/* For a suspended fiber that nothing else will resume (its waker has won
 * whatever race there was): directly on its core, else through the inbox,
 * with the fiber's own node (free: only one waker can win). */
void runtime__resume_from_anywhere(struct fiber *f, int res)
{
	if (this_core() == f->core) {
		runtime__resume(f, res);
		return;
	}
	f->xwake_res = res;
	runtime__inbox_push(f->core, &f->wake_node);
}

/* For waits that a cancel must not end early (their own cleanup). */
void runtime__ignore_interrupt(struct fiber *f, int res)
{
	(void)f, (void)res;
}

static bool park_claim(struct fiber *f)
{
	uint64_t parked = park_word(f->gen, PARK_PARKED);
	return atomic_compare_exchange_strong_explicit(&f->park_state, &parked,
	                                               park_word(f->gen, PARK_EMPTY),
	                                               memory_order_acq_rel, memory_order_acquire);
}

/* ------------------------------------------------------------ deadlines */

/* A fiber's deadline timer is a lazy one (timer.c): a connection whose
 * deadline moves on with each request costs a compare per wait. */
static void deadline_fire(struct timer *t, enum runtime_timer_why why)
{
	struct lazy_deadline *d = runtime__lazy_due(t);

	(void)why;
	if (d) {
		struct fiber *f = container_of(d, struct fiber, dl);
		f->dl_expire(f, f->dl_ctx);
	}
}

void runtime__deadline_begin(struct fiber *f, uint64_t deadline,
                             void (*expire)(struct fiber *f, void *ctx), void *ctx)
{
	f->dl_expire = expire;
	f->dl_ctx = ctx;
	runtime__lazy_begin(f->core, &f->dl, deadline, deadline_fire);
}

void runtime__deadline_end(struct fiber *f)
{
	runtime__lazy_end(&f->dl);
}

/* The fiber ends: its timer must not outlive it. */
static void deadline_drop(struct fiber *f)
{
	runtime__lazy_drop(&f->dl);
}

/* A timed suspend's end: the deadline came first. A parked fiber must win
 * the park claim first (an unpark may be on its way). */
struct timed_wait {
	int res;
	bool claim;
};

static void timed_wait_expire(struct fiber *f, void *ctx)
{
	const struct timed_wait *w = ctx;

	if (!w->claim || park_claim(f))
		runtime__resume(f, w->res);
}

static int wait_until(struct core *c, enum block why, void (*interrupt)(struct fiber *, int),
                      void *wait_obj, uint64_t deadline, int timeout_res, bool claim)
{
	struct timed_wait w = { .res = timeout_res, .claim = claim };
	struct fiber *f = c->sched.current;

	runtime__deadline_begin(f, deadline, timed_wait_expire, &w);
	int res = runtime__suspend(c, why, interrupt, wait_obj);
	runtime__deadline_end(f);
	return res;
}

/* A deadline of NEVER still arms a timer that never fires: the wait counts
 * as pending work (no -EDEADLK), as a sleep does. */
int runtime__suspend_until(struct core *c, enum block why, void (*interrupt)(struct fiber *, int),
                           void *wait_obj, uint64_t deadline, int timeout_res)
{
	return wait_until(c, why, interrupt, wait_obj, deadline, timeout_res, false);
}

/* -ECANCELED or -ETIMEDOUT if the calling fiber may not block now, else 0. */
static int cancel_pending(const struct fiber *f)
{
	if (fiber_cancelled(f))
		return -ECANCELED;
	if (f->deadline != NEVER && runtime_now() >= f->deadline)
		return -ETIMEDOUT;
	return 0;
}

int runtime__blocking_refused(struct fiber *f, const char *fn)
{
	if (!f)
		return runtime__misuse(-EPERM, fn, MISUSE_OUTSIDE_FIBER);
	return cancel_pending(f);
}

/* ----------------------------------------------------------- park/unpark */

static void park_interrupt(struct fiber *f, int res)
{
	if (park_claim(f))
		runtime__resume(f, res);
}

int runtime_park(int64_t timeout_ns)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f, __func__);

	if (rc)
		return rc;
	/* EMPTY -> PARKED, or consume the permit an unpark left. A plain store
	 * of PARKED could overwrite a permit set just now: a lost wake-up. */
	uint64_t expect = park_word(f->gen, PARK_EMPTY);
	if (!atomic_compare_exchange_strong(&f->park_state, &expect,
	                                    park_word(f->gen, PARK_PARKED))) {
		atomic_store(&f->park_state, park_word(f->gen, PARK_EMPTY)); /* was PERMIT */
		return 0;
	}
	uint64_t deadline = deadline_min(f->deadline, deadline_from_timeout(runtime_now(), timeout_ns));
	struct core *c = f->core;
	c->sched.xparked++;
	if (deadline == NEVER)
		rc = runtime__suspend(c, BLOCK_PARK, park_interrupt, NULL);
	else
		rc = wait_until(c, BLOCK_PARK, park_interrupt, NULL, deadline, -ETIMEDOUT, true);
	c->sched.xparked--;
	return rc;
}

int runtime_fiber_unpark(struct runtime_fiber *handle)
{
	struct handle_ref ref;

	if (!handle)
		return -EINVAL;
	if (!handle_resolve(handle, &ref))
		return -ESRCH;
	struct fiber *f = ref.fiber;
	for (;;) {
		uint64_t s = atomic_load_explicit(&f->park_state, memory_order_acquire);
		unsigned state = (unsigned)(s & 3);
		if (s >> 32 != ref.gen || state == PARK_ENDED)
			return -ESRCH; /* ended, or its stack is another fiber's now */
		if (state == PARK_PERMIT)
			return 0;
		unsigned next = state == PARK_PARKED ? PARK_EMPTY : PARK_PERMIT;
		if (!atomic_compare_exchange_weak(&f->park_state, &s, park_word(ref.gen, next)))
			continue;
		/* Won PARKED -> EMPTY: the fiber is parked (or about to switch
		 * out, on its own thread) and nothing else will resume it. */
		if (state == PARK_PARKED)
			runtime__resume_from_anywhere(f, 0);
		return 0;
	}
}

/* ----------------------------------------------------------------- spawn */

static void fiber_init(struct fiber *f, struct core *c, const struct stack *s, unsigned flags)
{
	/* park_state is left alone: a stale unpark may be reading it. */
	memset((char *)f + sizeof(f->park_state), 0, sizeof(*f) - sizeof(f->park_state));
	f->stack = *s;
	f->core = c;
	f->flags = (uint8_t)flags;
	f->deadline = NEVER;
	f->handle = handle_make(s, &f->gen);
	atomic_store_explicit(&f->park_state, park_word(f->gen, PARK_EMPTY), memory_order_relaxed);
	/* Released after the handle's generation moved on: runtime_fiber_id
	 * from another thread relies on it. */
	__atomic_store_n(&f->id, ++c->sched.next_id * c->rt->ncores + c->index, __ATOMIC_RELEASE);
	f->wake_node.ops = &runtime__wake_ops;
}

/* Create a fiber on c, the calling thread's own core (or any core while
 * the runtime is not running and the caller is its owner). */
static int fiber_create(struct core *c, void *fn, void *arg, unsigned flags, struct fiber **out)
{
	struct stack s;
	int rc = runtime__stack_alloc(c, &s);

	if (rc < 0)
		return rc;
	struct fiber *f = fiber_of_stack(&s);
	fiber_init(f, c, &s, flags);
	if (flags & FIBER_VOID_FN)
		f->void_fn = (void (*)(void *))fn;
	else
		f->fn = (void *(*)(void *))fn;
	f->arg = arg;
	f->sp = runtime__context_init(f, fiber_main, f);
#ifdef RUNTIME_ASAN
	f->asan_bottom = stack_base(&s) + runtime__page_size();
	f->asan_size = (size_t)((char *)f - (char *)f->asan_bottom);
	/* A reused stack still carries the redzones of frames its last fiber
	 * never returned from (it ended by switching away). */
	__asan_unpoison_memory_region(f->asan_bottom, f->asan_size);
#endif
#ifdef RUNTIME_TSAN
	f->tsan_fiber = __tsan_create_fiber(0);
#endif
	dlist_push_back(&c->sched.fibers, &f->all);
	runtime__load_add(c);
	stat_add(&c->stats.spawned, 1);
	stat_add(&c->stats.live, 1);
	make_ready(c, f);
	if (out)
		*out = f;
	return 0;
}

/* A spawn that reached its core through the inbox. It was accepted before
 * any shutdown, so it runs (cancelled at once if a shutdown came since):
 * nothing accepted is lost. */
int runtime__fiber_spawn_here(struct core *c, void (*fn)(void *), void *arg)
{
	struct fiber *f;
	int rc = fiber_create(c, (void *)fn, arg, FIBER_VOID_FN, &f);

	if (rc == 0 && runtime__is_shutting_down(c->rt))
		runtime__fiber_cancel(f);
	return rc;
}

/* A detached fiber of the calling core, *out its fiber (valid until it
 * ends), for a caller that may cancel it (group.c). */
int runtime__fiber_spawn_local(struct core *c, void (*fn)(void *), void *arg, struct fiber **out)
{
	return fiber_create(c, (void *)fn, arg, FIBER_VOID_FN, out);
}

/* A fiber of the calling core that calls on_exit(ctx) as it ends (before
 * its joiner, if any, resumes). */
int runtime__fiber_spawn_with_exit(struct core *c, void (*fn)(void *), void *arg,
                                   void (*on_exit)(void *ctx), void *ctx)
{
	struct fiber *f;
	int rc = fiber_create(c, (void *)fn, arg, FIBER_VOID_FN, &f);

	if (rc == 0) {
		f->on_exit = on_exit;
		f->exit_ctx = ctx;
	}
	return rc;
}

/* A spawn that reached its core: the fiber starts, or (-ENOMEM: no stack
 * now) the request waits for the next turn. */
static int spawn_arrived(struct core *c, struct inbox_node *n)
{
	struct spawn_req *req = container_of(n, struct spawn_req, node);
	int rc = runtime__fiber_spawn_here(c, req->fn, req->arg);

	if (rc < 0)
		return rc;
	free(req);
	runtime__work_done(c->rt);
	return 0;
}

static void spawn_discard(struct runtime *rt, struct inbox_node *n)
{
	(void)rt;
	free(container_of(n, struct spawn_req, node));
}

static const struct inbox_ops spawn_ops = { spawn_arrived, spawn_discard };

/* A resume from another thread reached the fiber's core. */
static int wake_arrived(struct core *c, struct inbox_node *n)
{
	struct fiber *f = container_of(n, struct fiber, wake_node);

	(void)c;
	runtime__resume(f, f->xwake_res);
	return 0;
}

const struct inbox_ops runtime__wake_ops = { wake_arrived, NULL };

/* Hand a spawn to core c through its inbox. It counts as work from now, so
 * the runtime cannot stop while it is in transit. */
static int spawn_remote(struct core *c, void (*fn)(void *), void *arg)
{
	struct spawn_req *req = malloc(sizeof(*req));

	if (!req)
		return -ENOMEM;
	req->node.ops = &spawn_ops;
	req->fn = fn;
	req->arg = arg;
	runtime__work_begin(c->rt);
	runtime__inbox_push(c, &req->node);
	return 0;
}

static int spawn_on(struct core *c, void (*fn)(void *), void *arg)
{
	if (runtime__is_shutting_down(c->rt))
		return -ESHUTDOWN;
	if (runtime__may_create_on(c))
		return fiber_create(c, (void *)fn, arg, FIBER_VOID_FN, NULL);
	return spawn_remote(c, fn, arg);
}

int runtime_spawn(struct runtime *rt, void (*fn)(void *), void *arg)
{
	if (!rt || !fn)
		return -EINVAL;
	return spawn_on(runtime__place(rt), fn, arg);
}

int runtime_spawn_on(struct runtime *rt, unsigned core, void (*fn)(void *), void *arg)
{
	if (!rt || !fn || core >= rt->ncores)
		return -EINVAL;
	return spawn_on(&rt->cores[core], fn, arg);
}

int runtime_fiber_spawn(struct runtime *rt, struct runtime_fiber **handle,
                        void *(*fn)(void *), void *arg)
{
	struct fiber *f;

	if (!rt || !handle || !fn)
		return -EINVAL;
	struct core *self = this_core();
	struct core *c = self && self->rt == rt ? self : &rt->cores[0];
	if (!runtime__may_create_on(c))
		return -EPERM; /* a join handle needs the fiber now: same core only */
	if (runtime__is_shutting_down(rt))
		return -ESHUTDOWN;
	int rc = fiber_create(c, (void *)fn, arg, FIBER_JOINABLE, &f);
	if (rc == 0)
		*handle = f->handle;
	return rc;
}

/* --------------------------------------------------------------- handles */

/* The fiber a handle names, for a call that must be made on its core (or
 * by the owner thread while nothing runs): -EINVAL for NULL, -ESRCH if it
 * names no fiber (ended and released), -EPERM from another thread. *out
 * is NULL unless 0 is returned (which also keeps gcc -O3 -flto from
 * seeing a use of it uninitialised in the callers). */
static int resolve_here(const struct runtime_fiber *handle, struct fiber **out, const char *fn,
                        bool stale_is_misuse)
{
	struct handle_ref ref;

	*out = NULL;
	if (!handle)
		return -EINVAL;
	if (!handle_resolve(handle, &ref))
		return stale_is_misuse ? runtime__misuse(-ESRCH, fn, "the handle names no fiber: "
		                                         "joined or detached already") : -ESRCH;
	if (!runtime__may_create_on(ref.core))
		return runtime__misuse(-EPERM, fn, MISUSE_OTHER_CORE);
	*out = ref.fiber;
	return 0;
}

/* Wait for t to end; 0 once it has, else the caller's -ECANCELED or
 * -ETIMEDOUT. */
static int join_wait(struct fiber *self, struct fiber *t)
{
	int rc = cancel_pending(self);

	if (rc)
		return rc;
	t->joiner = self;
	if (self->deadline == NEVER)
		rc = runtime__suspend(self->core, BLOCK_JOIN, NULL, NULL);
	else
		rc = runtime__suspend_until(self->core, BLOCK_JOIN, NULL, NULL, self->deadline, -ETIMEDOUT);
	t->joiner = NULL;
	return t->state == FIBER_DONE ? 0 : rc;
}

int runtime_fiber_join(struct runtime_fiber *handle, void **result)
{
	struct fiber *self = this_fiber();
	struct fiber *t;

	if (!self)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	int rc = resolve_here(handle, &t, __func__, true);
	if (rc)
		return rc;
	if (t == self)
		return runtime__misuse(-EDEADLK, __func__, "a fiber cannot join itself");
	if (!(t->flags & FIBER_JOINABLE) || t->joiner)
		return runtime__misuse(-EINVAL, __func__, MISUSE_NOT_JOINABLE);
	if (t->state != FIBER_DONE && (rc = join_wait(self, t)))
		return rc;
	if (result)
		*result = t->result;
	runtime__fiber_release(self->core, t);
	return 0;
}

int runtime_fiber_detach(struct runtime_fiber *handle)
{
	struct fiber *t;
	int rc = resolve_here(handle, &t, __func__, true);

	if (rc)
		return rc;
	if (!(t->flags & FIBER_JOINABLE) || t->joiner)
		return runtime__misuse(-EINVAL, __func__, MISUSE_NOT_JOINABLE);
	if (t->state == FIBER_DONE)
		runtime__fiber_release(t->core, t);
	else
		t->flags &= (uint8_t)~FIBER_JOINABLE;
	return 0;
}

/* End f's wait with res (-ECANCELED, -ETIMEDOUT) through the hook it
 * suspended with, which never resumes it while the kernel may still write
 * to its stack. */
static void interrupt(struct fiber *f, int res)
{
	if (f->interrupt)
		f->interrupt(f, res);
	else
		runtime__resume(f, res);
}

void runtime__fiber_cancel(struct fiber *f)
{
	f->flags |= FIBER_CANCELLED;
	if (f->state != FIBER_SUSPENDED || (f->flags & FIBER_SHIELDED))
		return;
	interrupt(f, -ECANCELED);
}

int runtime_fiber_expire(struct runtime_fiber *handle)
{
	struct fiber *f;
	int rc = resolve_here(handle, &f, __func__, false);

	if (rc)
		return rc;
	if (f->state == FIBER_DONE)
		return -ESRCH;
	if (f->state != FIBER_SUSPENDED)
		return -EAGAIN;
	interrupt(f, -ETIMEDOUT);
	return 0;
}

int runtime_fiber_cancel(struct runtime_fiber *handle)
{
	struct fiber *f;
	int rc = resolve_here(handle, &f, __func__, false); /* it ended: a race */

	if (rc)
		return rc;
	if (f->state == FIBER_DONE)
		return -ESRCH;
	runtime__fiber_cancel(f);
	return 0;
}

struct runtime_fiber *runtime_fiber_self(void)
{
	struct fiber *f = this_fiber();
	return f ? f->handle : NULL;
}

/* Any thread: the id is read, then the handle checked again, so an id
 * read from a fiber that took the stack meanwhile is never returned. */
uint64_t runtime_fiber_id(const struct runtime_fiber *handle)
{
	struct handle_ref ref;

	if (!handle || !handle_resolve(handle, &ref))
		return 0;
	uint64_t id = __atomic_load_n(&ref.fiber->id, __ATOMIC_ACQUIRE);
	return handle_current(&ref) ? id : 0;
}

/* ------------------------------------------------- the running fiber */

void *runtime_fiber_local_get(void)
{
	struct fiber *f = this_fiber();
	return f ? f->local : NULL;
}

void runtime_fiber_local_set(void *value)
{
	struct fiber *f = this_fiber();
	if (f)
		f->local = value;
}

/*
 * A yield's switch, and the resumed fiber's way back to runtime_yield's
 * caller. Two fibers that yield to each other from different call sites
 * (a loop and a helper, a handler and another) resume each other in here,
 * and a ret out of it would go where the return stack predicts the other
 * fiber's caller: one mispredicted return per yield, half of yield_ns.
 * On x86_64 with GCC this function returns through the "return thunk"
 * (switch_x86_64.S: pop, indirect jmp), which the CPU predicts from the
 * branch history instead, and runtime_yield calls it as a tail call, so
 * that the thunk jumps straight to runtime_yield's caller. The call that
 * entered runtime_yield is then never popped from the return stack: the
 * next returns up the caller's chain are mispredicted, as they were
 * already after a switch. A yield that does not switch stays a plain
 * call and ret. Elsewhere (aarch64, clang: no noipa, and IPSCCP would
 * give the call a known result and so no tail call) the switch is inlined
 * into runtime_yield, as suspend's is. noipa: not inlined, cloned or given
 * a known return value, any of which would take the tail call or the
 * thunk away (no fault, the old cost; TSan builds have no tail call, their
 * __tsan_func_exit follows it). The thunk's jmp, like the switch's
 * own, lands where no endbr64 is: neither works under user-space IBT.
 */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(function_return)
#define YIELD_SWITCH __attribute__((noipa, function_return("thunk-extern")))
#endif
#endif
#ifndef YIELD_SWITCH
#define YIELD_SWITCH inline __attribute__((always_inline))
#endif

static YIELD_SWITCH int yield_switch(struct core *c, struct fiber *self, struct fiber *next)
{
	switch_to(c, self, next);
	return 0;
}

int runtime_yield(void)
{
	struct fiber *f = this_fiber();
	struct core *c = this_core(); /* f->core, without a load that waits on f */

	if (!f)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	if (fiber_cancelled(f))
		return -ECANCELED;
	make_ready(c, f);
	struct fiber *next = pick_next(c);
	if (next != f)
		return yield_switch(c, f, next);
	stay_running(c, f);
	return 0;
}

/* ------------------------------------------------ the core's own stack */

/* Room left above the loop's saved frame (and the red zone below it). */
#define CORE_STACK_GAP 256

struct borrow {
	void (*fn)(void *);
	void *arg;
	struct core *c;
	struct fiber *f;            /* the fiber whose call this is */
	void *fake;                 /* ASan's fake stack, across the switches */
};

/* On the core's stack: tell ASan which stack this is, run fn, and say
 * which one we go back to. */
static void borrowed(void *arg)
{
	struct borrow *b = arg;

#ifdef RUNTIME_ASAN
	__sanitizer_finish_switch_fiber(b->fake, NULL, NULL);
#endif
	b->fn(b->arg);
#ifdef RUNTIME_ASAN
	__sanitizer_start_switch_fiber(&b->fake, b->f->asan_bottom, b->f->asan_size);
#endif
}

/*
 * The loop is suspended whenever a fiber runs, its frame at loop.sp: all
 * below is free. For the call the core's current context is the loop's,
 * so that this_fiber() is NULL and every call that would wait refuses
 * (misuse) instead of switching away from the borrowed stack.
 */
int runtime_call_on_core_stack(void (*fn)(void *arg), void *arg)
{
	struct core *c = this_core();
	struct fiber *f = this_fiber();

	if (!fn)
		return -EINVAL;
	if (!f) { /* a callback, the loop, a plain thread: on its own stack already */
		fn(arg);
		return 0;
	}
	struct borrow b = { fn, arg, c, f, NULL };
	uintptr_t top = ((uintptr_t)c->sched.loop.sp - CORE_STACK_GAP) & ~(uintptr_t)15;
	c->sched.current = &c->sched.loop;
#ifdef RUNTIME_ASAN
	__sanitizer_start_switch_fiber(&b.fake, c->sched.loop.asan_bottom, c->sched.loop.asan_size);
#endif
	runtime__call_on_stack(borrowed, &b, (void *)top);
#ifdef RUNTIME_ASAN
	__sanitizer_finish_switch_fiber(b.fake, NULL, NULL);
#endif
	c->sched.current = f;
	return 0;
}

/* Inside a cleanup the deadline may move earlier than its bound, never
 * later: a helper that sets and clears deadlines of its own cannot let a
 * cleanup outlast its bound. */
void runtime_deadline_set(uint64_t deadline_ns)
{
	struct fiber *f = this_fiber();

	if (!f)
		return;
	uint64_t d = deadline_ns ? deadline_ns : NEVER;
	f->deadline = f->cleanup ? deadline_min(d, f->cleanup->bound) : d;
}

uint64_t runtime_deadline_get(void)
{
	struct fiber *f = this_fiber();
	return f && f->deadline != NEVER ? f->deadline : 0;
}

/* ---------------------------------------------------------------- cleanup */

/*
 * A cleanup holds cancellation back through the one flag that every check
 * reads (fiber_cancelled) and that runtime__fiber_cancel honours, so I/O,
 * sync waits, joins, sleeps and offloads need no code of their own: their
 * waits end by their completion or by the deadline, which is the
 * cleanup's bound while it lasts.
 */
_Static_assert(sizeof(struct cleanup) <= sizeof(struct runtime_cleanup),
               "runtime_cleanup storage");

int runtime_cleanup_begin(struct runtime_cleanup *storage, int64_t timeout_ns)
{
	struct cleanup *cl = (struct cleanup *)storage;
	struct fiber *f = this_fiber();

	if (!f)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	if (!cl || timeout_ns < 0)
		return -EINVAL;
	uint64_t bound = deadline_add(runtime_now(), (uint64_t)timeout_ns);
	if (f->cleanup)
		bound = deadline_min(bound, f->cleanup->bound);
	cl->outer = f->cleanup;
	cl->saved_deadline = f->deadline;
	cl->bound = bound;
	f->cleanup = cl;
	f->deadline = bound;
	f->flags |= FIBER_SHIELDED;
	return 0;
}

int runtime_cleanup_end(struct runtime_cleanup *storage)
{
	struct cleanup *cl = (struct cleanup *)storage;
	struct fiber *f = this_fiber();

	if (!f)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	if (!cl || cl != f->cleanup)
		return runtime__misuse(-EINVAL, __func__,
		                       "not the calling fiber's innermost cleanup");
	f->cleanup = cl->outer;
	f->deadline = cl->saved_deadline;
	if (!f->cleanup)
		f->flags &= (uint8_t)~FIBER_SHIELDED; /* a cancel shows from here */
	return 0;
}
