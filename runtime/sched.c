/* SPDX-License-Identifier: MIT */
/*
 * sched.c - the runtime, its cores and the fibers on them.
 *
 * Each core runs one loop (core_loop) in fixed phases: run ready fibers
 * (within a budget, so I/O is never starved) -> fire due timers -> submit
 * SQEs and reap CQEs in one io_uring_enter, blocking only when nothing is
 * ready -> fire timers again. Fibers hand the CPU straight to the next ready
 * fiber (no trip through the loop) until the budget is spent. A fiber parks
 * with runtime__park() and anything on its core wakes it with
 * runtime__wake(); cancellation interrupts a park through the parker's own
 * interrupt hook, so that an operation whose SQE points at the fiber's stack
 * is never abandoned mid-flight.
 */
#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#ifdef RUNTIME_ASAN
#include <sanitizer/asan_interface.h>
#endif
#ifdef RUNTIME_TSAN
#include <sanitizer/tsan_interface.h>
#endif

__thread struct core *runtime__tls_core __attribute__((tls_model("initial-exec")));

/* The fiber struct sits at the top of its stack, in a 64-byte slot. */
#define FIBER_SLOT ((sizeof(struct fiber) + 63) & ~(size_t)63)

#define KiB 1024u

void runtime_config_init(struct runtime_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->cores = 1;
	cfg->stack_size = 128 * KiB;
	cfg->stack_cache = 1024;
	cfg->ring_entries = 256;
	cfg->run_budget = 64;
	cfg->timer_mode = RUNTIME_TIMERS_HEAP;
	cfg->sqpoll_idle_ms = 50;
	cfg->register_ring_fd = 1;
}

uint64_t runtime_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ run queue */

static void runq_push(struct core *c, struct fiber *f)
{
	f->next = NULL;
	if (c->ready.tail)
		c->ready.tail->next = f;
	else
		c->ready.head = f;
	c->ready.tail = f;
}

static struct fiber *runq_pop(struct core *c)
{
	struct fiber *f = c->ready.head;
	if (f) {
		c->ready.head = f->next;
		if (!c->ready.head)
			c->ready.tail = NULL;
	}
	return f;
}

/* ------------------------------------------------------------- switching */

static void fiber_release(struct core *c, struct fiber *f)
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
	__sanitizer_finish_switch_fiber(c->current->asan_fake_stack,
	                                &c->prev->asan_bottom, &c->prev->asan_size);
#endif
	if (unlikely(c->zombie != NULL)) {
		struct fiber *z = c->zombie;
		c->zombie = NULL;
		fiber_release(c, z);
	}
}

static void switch_to(struct core *c, struct fiber *from, struct fiber *to)
{
	c->current = to;
	c->prev = from;
	to->state = FIBER_RUNNING;
#ifdef RUNTIME_ASAN
	/* A fiber that has ended passes NULL so ASan drops its fake stack. */
	__sanitizer_start_switch_fiber(from->state == FIBER_DONE ? NULL : &from->asan_fake_stack,
	                               to->asan_bottom, to->asan_size);
#endif
#ifdef RUNTIME_TSAN
	__tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
	runtime__switch(&from->sp, to->sp);
	finish_switch(c);
}

/* The next context to run after the current fiber gives up the CPU: the
 * next ready fiber while the turn's budget lasts, else the core loop. */
static struct fiber *pick_next(struct core *c)
{
	if (c->budget && c->ready.head) {
		c->budget--;
		return runq_pop(c);
	}
	return &c->loop;
}

static void schedule(struct core *c)
{
	struct fiber *self = c->current;
	struct fiber *next = pick_next(c);

	if (next != self)
		switch_to(c, self, next);
	else
		self->state = FIBER_RUNNING;
}

__attribute__((noreturn)) static void fiber_exit(struct core *c, struct fiber *f)
{
	f->state = FIBER_DONE;
	if (f->all_prev)
		f->all_prev->all_next = f->all_next;
	else
		c->all = f->all_next;
	if (f->all_next)
		f->all_next->all_prev = f->all_prev;
	if (f->joiner)
		runtime__wake(f->joiner, 0);
	if (!(f->flags & FIBER_JOINABLE))
		c->zombie = f; /* freed by the next context, off this stack */
	runtime__load_sub(c);
	switch_to(c, f, pick_next(c));
	__builtin_unreachable();
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

/* ---------------------------------------------------------- park / wake */

int runtime__park(struct core *c, void (*interrupt)(struct fiber *), void *wait_obj)
{
	struct fiber *f = c->current;

	f->state = FIBER_PARKED;
	f->interrupt = interrupt;
	f->wait_obj = wait_obj;
	schedule(c);
	f->interrupt = NULL;
	f->wait_obj = NULL;
	return f->wake_res;
}

void runtime__wake(struct fiber *f, int res)
{
	if (f->state != FIBER_PARKED)
		return;
	f->state = FIBER_READY;
	f->wake_res = res;
	runq_push(f->core, f);
}

struct park_timer {
	struct timer t;
	struct fiber *f;
	int res;
	bool done;
	bool awaiting;          /* the fiber only waits for this callback now */
	_Atomic int *claim;     /* runtime_park: win PARKED -> EMPTY to wake */
};

/* runtime_park's state: an unpark, a timeout and a cancel race for the one
 * PARKED -> EMPTY transition; whoever wins wakes the fiber, exactly once. */
enum { PARK_EMPTY, PARK_PERMIT, PARK_PARKED };

static bool park_claim(_Atomic int *state)
{
	int parked = PARK_PARKED;
	return atomic_compare_exchange_strong_explicit(state, &parked, PARK_EMPTY,
	                                               memory_order_acq_rel, memory_order_acquire);
}

static void park_timer_fire(struct timer *t, enum runtime_timer_why why)
{
	struct park_timer *pt = container_of(t, struct park_timer, t);

	pt->done = true;
	if (pt->awaiting)
		runtime__wake(pt->f, 0);
	else if (!pt->claim || park_claim(pt->claim))
		runtime__wake(pt->f, why == RUNTIME_TIMER_FIRED ? pt->res : -ECANCELED);
}

/* While a timer's cancel is in flight, cancel must not wake the fiber. */
static void ignore_interrupt(struct fiber *f)
{
	(void)f;
}

/*
 * Park until woken, or until deadline (absolute ns; 0 = none), when the
 * result is timeout_res. The timer never outlives this frame: if something
 * else wakes the fiber first, the timer is cancelled and its callback awaited.
 */
static int park_timed(struct core *c, void (*interrupt)(struct fiber *), void *wait_obj,
                      uint64_t deadline, int timeout_res, _Atomic int *claim)
{
	if (!deadline)
		return runtime__park(c, interrupt, wait_obj);

	struct park_timer pt = {
		.t.fire = park_timer_fire, .f = c->current, .res = timeout_res, .claim = claim,
	};
	runtime__timer_start(c, &pt.t, deadline);
	int res = runtime__park(c, interrupt, wait_obj);
	if (!pt.done) {
		pt.awaiting = true;
		runtime__timer_cancel(&pt.t);
		while (!pt.done)
			runtime__park(c, ignore_interrupt, NULL);
	}
	return res;
}

int runtime__park_until(struct core *c, uint64_t deadline, int timeout_res)
{
	return park_timed(c, NULL, NULL, deadline, timeout_res, NULL);
}

/* ------------------------------------------------------- park / unpark */

static void park_interrupt(struct fiber *f)
{
	if (park_claim(&f->park_state))
		runtime__wake(f, -ECANCELED);
}

int runtime_park(int64_t timeout_ns)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f);

	if (rc)
		return rc;
	/* EMPTY -> PARKED, or consume the permit an unpark left. A plain store
	 * of PARKED could overwrite a permit set just now: a lost wake-up. */
	int expect = PARK_EMPTY;
	if (!atomic_compare_exchange_strong(&f->park_state, &expect, PARK_PARKED)) {
		atomic_store(&f->park_state, PARK_EMPTY); /* it was PERMIT */
		return 0;
	}
	uint64_t deadline = f->deadline;
	if (timeout_ns >= 0) {
		uint64_t end = runtime_now() + (uint64_t)timeout_ns;
		if (!deadline || end < deadline)
			deadline = end;
	}
	struct core *c = f->core;
	c->xparked++;
	rc = park_timed(c, park_interrupt, NULL, deadline, -ETIMEDOUT,
	                &f->park_state);
	c->xparked--;
	return rc;
}

int runtime_fiber_unpark(struct runtime_fiber *handle)
{
	struct fiber *f = (struct fiber *)handle;

	if (!f)
		return -EINVAL;
	for (;;) {
		int s = atomic_load(&f->park_state);
		if (s == PARK_PERMIT)
			return 0;
		if (s == PARK_EMPTY) {
			if (atomic_compare_exchange_weak(&f->park_state, &s, PARK_PERMIT))
				return 0;
			continue;
		}
		if (!park_claim(&f->park_state))
			continue;
		/* Won: the fiber is parked (or about to switch out, on its own
		 * thread) and nothing else will wake it. */
		if (this_core() == f->core) {
			runtime__wake(f, 0);
		} else {
			f->xwake_res = 0;
			runtime__inbox_push(f->core, &f->inbox);
		}
		return 0;
	}
}

/* -ECANCELED or -ETIMEDOUT if the calling fiber may not block now, else 0. */
int runtime__cancel_pending(struct fiber *f)
{
	if (f->flags & FIBER_CANCELLED)
		return -ECANCELED;
	if (f->deadline && runtime_now() >= f->deadline)
		return -ETIMEDOUT;
	return 0;
}

/* Every blocking call's entry: the calling fiber in *out, or -EPERM
 * outside fiber context, -ECANCELED or -ETIMEDOUT if it may not block. */
int runtime__blocking_begin(struct fiber **out)
{
	struct fiber *f = this_fiber();

	*out = f;
	return unlikely(!f) ? -EPERM : runtime__cancel_pending(f);
}

/* ------------------------------------------------------------ accounting */

/*
 * rt->work counts busy cores (load > 0) plus inbox items in transit; the
 * runtime stops when it reaches 0. Cores touch it only when their own load
 * crosses zero, so spawning and ending fibers costs no atomic operation.
 */
static void stop_all(struct runtime *rt)
{
	atomic_store_explicit(&rt->stop, true, memory_order_seq_cst);
	for (unsigned i = 0; i < rt->ncores; i++)
		runtime__core_wake(&rt->cores[i]);
}

static void work_add(struct runtime *rt)
{
	atomic_fetch_add_explicit(&rt->work, 1, memory_order_relaxed);
}

static void work_sub(struct runtime *rt)
{
	if (atomic_fetch_sub_explicit(&rt->work, 1, memory_order_acq_rel) == 1)
		stop_all(rt);
}

/* One unit of work outside any core's load (a named timer, from start to
 * callback): the runtime runs until it is done. */
void runtime__work_begin(struct runtime *rt)
{
	work_add(rt);
}

void runtime__work_done(struct runtime *rt)
{
	work_sub(rt);
}

void runtime__load_add(struct core *c)
{
	if (c->load++ == 0)
		work_add(c->rt);
}

void runtime__load_sub(struct core *c)
{
	if (--c->load == 0)
		work_sub(c->rt);
}

/* ---------------------------------------------------------------- spawn */

static bool on_owner_thread(const struct runtime *rt)
{
	return pthread_equal(pthread_self(), rt->owner_thread);
}

static bool is_running(const struct runtime *rt)
{
	return atomic_load_explicit(&rt->running, memory_order_acquire);
}

static bool is_shutting_down(const struct runtime *rt)
{
	return atomic_load_explicit(&rt->shutting_down, memory_order_relaxed);
}

/* Create a fiber on c, the calling thread's own core (or any core while
 * the runtime is not running and the caller is its owner). */
static int fiber_create(struct core *c, void *fn, void *arg, unsigned flags, struct fiber **out)
{
	struct stack s;
	int rc = runtime__stack_alloc(c, &s);
	if (rc < 0)
		return rc;
	struct fiber *f = (struct fiber *)(stack_top(&s) - FIBER_SLOT);
	memset(f, 0, sizeof(*f));
	f->stack = s;
	f->core = c;
	f->flags = (uint8_t)flags;
	f->id = ++c->next_id * c->rt->ncores + c->index;
	if (flags & FIBER_VOID_FN)
		f->void_fn = (void (*)(void *))fn;
	else
		f->fn = (void *(*)(void *))fn;
	f->arg = arg;
	f->inbox.kind = INBOX_WAKE;
	f->sp = runtime__context_init(f, fiber_main, f);
#ifdef RUNTIME_ASAN
	f->asan_bottom = (char *)s.base + runtime__stack_guard_size();
	f->asan_size = (size_t)((char *)f - (char *)f->asan_bottom);
#endif
#ifdef RUNTIME_TSAN
	f->tsan_fiber = __tsan_create_fiber(0);
#endif
	f->all_next = c->all;
	if (c->all)
		c->all->all_prev = f;
	c->all = f;
	runtime__load_add(c);
	f->state = FIBER_READY;
	runq_push(c, f);
	if (out)
		*out = f;
	return 0;
}

/* May this thread create fibers on c directly? Its own core, or any core
 * of a runtime that is not running, from the owner thread. */
static bool may_create_on(const struct core *c)
{
	struct core *self = this_core();

	if (self)
		return self == c;
	return !is_running(c->rt) && on_owner_thread(c->rt);
}

/* Hand a spawn to core c through its inbox. It counts as work from now, so
 * the runtime cannot stop while it is in transit. */
static int spawn_remote(struct core *c, void (*fn)(void *), void *arg)
{
	struct spawn_req *req = malloc(sizeof(*req));

	if (!req)
		return -ENOMEM;
	req->node.kind = INBOX_SPAWN;
	req->fn = fn;
	req->arg = arg;
	work_add(c->rt);
	runtime__inbox_push(c, &req->node);
	return 0;
}

static int spawn_on(struct core *c, void (*fn)(void *), void *arg)
{
	if (is_shutting_down(c->rt))
		return -ESHUTDOWN;
	if (may_create_on(c))
		return fiber_create(c, (void *)fn, arg, FIBER_VOID_FN, NULL);
	return spawn_remote(c, fn, arg);
}

/* Placement: the caller's own core if it is one of rt's, else round-robin. */
struct core *runtime__place(struct runtime *rt)
{
	struct core *self = this_core();
	if (self && self->rt == rt)
		return self;
	unsigned i = atomic_fetch_add_explicit(&rt->next_core, 1, memory_order_relaxed);
	return &rt->cores[i % rt->ncores];
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

unsigned runtime_cores(const struct runtime *rt)
{
	return rt ? rt->ncores : 0;
}

int runtime_core_index(void)
{
	struct core *c = this_core();
	return c ? (int)c->index : -1;
}

int runtime_fiber_spawn(struct runtime *rt, struct runtime_fiber **fiber,
                        void *(*fn)(void *), void *arg)
{
	if (!rt || !fiber || !fn)
		return -EINVAL;
	struct core *self = this_core();
	struct core *c = self && self->rt == rt ? self : &rt->cores[0];
	if (!may_create_on(c))
		return -EPERM; /* a join handle needs the fiber now: same core only */
	if (is_shutting_down(rt))
		return -ESHUTDOWN;
	return fiber_create(c, (void *)fn, arg, FIBER_JOINABLE, (struct fiber **)fiber);
}

/* ------------------------------------------------------- fiber handles */

/* May the caller act on f: from f's core, or from the owner while idle. */
static bool may_touch(const struct fiber *f)
{
	struct core *c = this_core();

	if (c)
		return c == f->core;
	return !is_running(f->core->rt) && on_owner_thread(f->core->rt);
}

int runtime_fiber_join(struct runtime_fiber *handle, void **result)
{
	struct fiber *self = this_fiber();
	struct fiber *t = (struct fiber *)handle;

	if (!self)
		return -EPERM;
	if (t == self)
		return -EDEADLK;
	if (!t || !(t->flags & FIBER_JOINABLE) || t->joiner || t->core != self->core)
		return -EINVAL;
	if (t->state != FIBER_DONE) {
		int rc = runtime__cancel_pending(self);
		if (rc)
			return rc;
		t->joiner = self;
		rc = park_timed(self->core, NULL, NULL, self->deadline, -ETIMEDOUT, NULL);
		t->joiner = NULL;
		if (t->state != FIBER_DONE)
			return rc;
	}
	if (result)
		*result = t->result;
	fiber_release(self->core, t);
	return 0;
}

int runtime_fiber_detach(struct runtime_fiber *handle)
{
	struct fiber *t = (struct fiber *)handle;

	if (!t || !(t->flags & FIBER_JOINABLE) || t->joiner || !may_touch(t))
		return -EINVAL;
	if (t->state == FIBER_DONE) {
		fiber_release(t->core, t);
		return 0;
	}
	t->flags &= (uint8_t)~FIBER_JOINABLE;
	return 0;
}

static void fiber_cancel(struct fiber *f)
{
	f->flags |= FIBER_CANCELLED;
	if (f->state != FIBER_PARKED)
		return;
	if (f->interrupt)
		f->interrupt(f);
	else
		runtime__wake(f, -ECANCELED);
}

int runtime_fiber_cancel(struct runtime_fiber *handle)
{
	struct fiber *f = (struct fiber *)handle;

	if (!f || !may_touch(f))
		return -EINVAL;
	if (f->state == FIBER_DONE)
		return -ESRCH;
	fiber_cancel(f);
	return 0;
}

struct runtime_fiber *runtime_fiber_self(void)
{
	return (struct runtime_fiber *)this_fiber();
}

uint64_t runtime_fiber_id(const struct runtime_fiber *handle)
{
	return handle ? ((const struct fiber *)handle)->id : 0;
}

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

int runtime_yield(void)
{
	struct fiber *f = this_fiber();

	if (!f)
		return -EPERM;
	if (f->flags & FIBER_CANCELLED)
		return -ECANCELED;
	f->state = FIBER_READY;
	runq_push(f->core, f);
	schedule(f->core);
	return 0;
}

int runtime_sleep(uint64_t ns)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f);

	if (rc)
		return rc;
	uint64_t now = runtime_now();
	uint64_t end = ns > UINT64_MAX - now ? UINT64_MAX : now + ns;
	if (f->deadline && f->deadline < end)
		return runtime__park_until(f->core, f->deadline, -ETIMEDOUT);
	return runtime__park_until(f->core, end ? end : 1, 0);
}

void runtime_deadline_set(uint64_t deadline_ns)
{
	struct fiber *f = this_fiber();
	if (f)
		f->deadline = deadline_ns;
}

uint64_t runtime_deadline_get(void)
{
	struct fiber *f = this_fiber();
	return f ? f->deadline : 0;
}

/* ---------------------------------------------------------- inbox work */

/* The core's share of a shutdown: cancel every fiber, complete every
 * timer. Idempotent; runs on the core's own thread (or the owner's while
 * the runtime is not running). */
static void core_shutdown(struct core *c)
{
	for (struct fiber *f = c->all; f; f = f->all_next)
		fiber_cancel(f);
	runtime__timers_shutdown(c);
}

int runtime__inbox_handle(struct core *c, struct inbox_node *n)
{
	switch ((enum inbox_kind)n->kind) {
	case INBOX_SPAWN: {
		struct spawn_req *req = container_of(n, struct spawn_req, node);
		struct fiber *f;
		/* Accepted before any shutdown, so it runs (and is cancelled
		 * at once if a shutdown came since): nothing accepted is lost. */
		int rc = fiber_create(c, (void *)req->fn, req->arg, FIBER_VOID_FN, &f);
		if (rc < 0)
			return rc;
		if (is_shutting_down(c->rt))
			fiber_cancel(f);
		free(req);
		work_sub(c->rt);
		return 0;
	}
	case INBOX_WAKE: {
		struct fiber *f = container_of(n, struct fiber, inbox);
		runtime__wake(f, f->xwake_res);
		return 0;
	}
	case INBOX_SHUTDOWN:
		core_shutdown(c);
		return 0;
	case INBOX_NAMED_START:
		runtime__named_start_here(c, n);
		return 0;
	case INBOX_NAMED_CANCEL:
		runtime__named_cancel_here(c, n);
		return 0;
	}
	return 0;
}

/* ------------------------------------------------------------ the loop */

static void run_ready(struct core *c)
{
	if (!c->ready.head)
		return;
	c->budget = c->rt->cfg.run_budget - 1;
	switch_to(c, &c->loop, runq_pop(c));
}

/* Only a lone core can know that nothing will ever wake its fibers (its
 * eventfd and signalfd reads are always in flight and wake no fiber). */
static bool deadlocked(const struct core *c)
{
	return c->rt->ncores == 1 && c->load && !c->timers.len && !c->xparked &&
	       c->in_flight == (unsigned)c->wake_armed + (unsigned)c->signal_armed &&
	       !c->deferred;
}

/* Core 0 keeps a read armed on the shutdown signalfd: not a fiber, so it
 * never keeps the runtime running by itself. */
static void arm_signal_read(struct core *c)
{
	struct runtime *rt = c->rt;

	if (c->index != 0 || rt->signal_fd < 0 || c->signal_armed ||
	    atomic_load_explicit(&rt->shutting_down, memory_order_relaxed))
		return;
	struct io_uring_sqe *sqe = runtime__sqe(c);
	io_uring_prep_read(sqe, rt->signal_fd, &rt->signal_buf, sizeof(rt->signal_buf), 0);
	io_uring_sqe_set_data64(sqe, tagged(c, TAG_SIGNAL));
	c->signal_armed = true;
}

static bool stopping(const struct runtime *rt)
{
	return atomic_load_explicit(&rt->stop, memory_order_acquire);
}

static int core_loop(struct core *c)
{
	while (!stopping(c->rt)) {
		run_ready(c);
		runtime__inbox_drain(c);
		runtime__timers_fire_due(c);
		bool idle = !c->ready.head && !c->deferred;
		arm_signal_read(c);
		if (idle) {
			if (deadlocked(c))
				return -EDEADLK; /* every fiber waits on another */
			if (c->rt->cfg.busy_poll_us && runtime__busy_poll(c))
				idle = false;
			else {
				runtime__timers_arm(c);
				idle = runtime__core_may_sleep(c);
			}
		}
		int rc = runtime__ring_enter(c, idle);
		if (idle)
			runtime__core_awake(c);
		if (rc < 0)
			return rc;
		runtime__timers_fire_due(c);
	}
	return 0;
}

/* Each run creates the rings on the threads that will use them
 * (SINGLE_ISSUER binds a ring to its creator) and tears them down after. */
static int core_start(struct core *c)
{
	int rc = runtime__ring_init(c);

	if (rc < 0)
		return rc;
	if ((rc = runtime__altstack_enter(c)) < 0) {
		runtime__ring_exit(c);
		return rc;
	}
	c->loop.flags = FIBER_LOOP;
	c->loop.state = FIBER_RUNNING;
	c->loop.core = c;
	c->current = &c->loop;
	c->thread = pthread_self();
#ifdef RUNTIME_TSAN
	c->loop.tsan_fiber = __tsan_get_current_fiber();
#endif
	runtime__tls_core = c;
	return 0;
}

static void core_stop(struct core *c)
{
	runtime__tls_core = NULL;
	runtime__altstack_leave(c);
	runtime__ring_exit(c);
	c->in_flight = 0;
	c->wake_armed = false;
	c->signal_armed = false;
	c->kt_deadline = 0;
}

static void pin(struct core *c)
{
	cpu_set_t set;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	CPU_ZERO(&set);
	CPU_SET(c->index % (unsigned)(cpus > 0 ? cpus : 1), &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static int core_main(struct core *c)
{
	if (c->rt->cfg.pin_cpus)
		pin(c);
	int rc = core_start(c);
	if (rc == 0) {
		rc = core_loop(c);
		core_stop(c);
	}
	if (rc < 0)
		stop_all(c->rt); /* one core failing ends the run for all */
	return rc;
}

static void *core_thread(void *arg)
{
	return (void *)(intptr_t)core_main(arg);
}

int runtime_run(struct runtime *rt)
{
	if (!rt)
		return -EINVAL;
	if (is_running(rt) || this_core())
		return -EBUSY;
	if (!on_owner_thread(rt))
		return -EPERM;
	if (atomic_load(&rt->work) == 0)
		return 0; /* nothing to run */

	cpu_set_t saved;
	bool pinned = rt->cfg.pin_cpus &&
	              pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
	atomic_store(&rt->stop, false);
	atomic_store_explicit(&rt->running, true, memory_order_release);
	unsigned started = 1;
	int rc = 0;
	for (; started < rt->ncores; started++) {
		struct core *c = &rt->cores[started];
		int err = pthread_create(&c->thread, NULL, core_thread, c);
		if (err) {
			rc = -err;
			stop_all(rt);
			break;
		}
	}
	int rc0 = rc < 0 ? 0 : core_main(&rt->cores[0]);
	for (unsigned i = 1; i < started; i++) {
		void *res;
		pthread_join(rt->cores[i].thread, &res);
		if (!rc && (intptr_t)res < 0)
			rc = (int)(intptr_t)res;
	}
	atomic_store_explicit(&rt->running, false, memory_order_release);
	if (pinned)
		pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
	return rc0 < 0 ? rc0 : rc;
}

/* ------------------------------------------------------------ lifecycle */

static unsigned online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

static int config_check(const struct runtime_config *cfg)
{
	if (cfg->stack_size < 16 * KiB || cfg->stack_size > (1ull << 32))
		return -EINVAL;
	if (cfg->ring_entries < 8 || cfg->ring_entries > 32768 ||
	    (cfg->ring_entries & (cfg->ring_entries - 1)))
		return -EINVAL;
	if (cfg->run_budget < 1 || cfg->stack_cache > (1u << 20))
		return -EINVAL;
	if (cfg->timer_mode != RUNTIME_TIMERS_HEAP && cfg->timer_mode != RUNTIME_TIMERS_KERNEL)
		return -EINVAL;
	if (cfg->cores > 1024)
		return -EINVAL;
	return 0;
}

static int core_init(struct runtime *rt, struct core *c, unsigned index)
{
	c->rt = rt;
	c->index = index;
	c->shutdown_node.kind = INBOX_SHUTDOWN;
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake_fd < 0)
		return -errno;
	c->stack_cache = calloc(rt->cfg.stack_cache ? rt->cfg.stack_cache : 1,
	                        sizeof(*c->stack_cache));
	return c->stack_cache ? 0 : -ENOMEM;
}

/* Inbox work that never reached a run: spawns and named timers. */
static void discard_inbox_nodes(struct core *c, struct inbox_node *n)
{
	while (n) {
		struct inbox_node *next = n->next;
		if (n->kind == INBOX_SPAWN)
			free(container_of(n, struct spawn_req, node));
		else if (n->kind == INBOX_NAMED_START || n->kind == INBOX_NAMED_CANCEL)
			runtime__named_discard(c->rt, n);
		n = next;
	}
}

/* Frees what never ran: fibers (runtime_run never ran, or ended with an
 * error) and inbox work. The ring is gone already (each run tears its rings
 * down), so nothing in the kernel points at a stack. */
static void core_free(struct core *c)
{
	discard_inbox_nodes(c, c->deferred);
	c->deferred = NULL;
	discard_inbox_nodes(c, atomic_exchange(&c->inbox, NULL));
	while (c->all) {
		struct fiber *f = c->all;
		c->all = f->all_next;
		fiber_release(c, f);
	}
	runtime__timers_free(c);
	runtime__stack_cache_drain(c);
	free(c->stack_cache);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
}

int runtime_create(struct runtime **out, const struct runtime_config *cfg)
{
	struct runtime_config defaults;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!cfg) {
		runtime_config_init(&defaults);
		cfg = &defaults;
	}
	if ((rc = config_check(cfg)) < 0)
		return rc;
	struct runtime *rt = calloc(1, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	rt->cfg = *cfg;
	size_t page = runtime__stack_guard_size();
	rt->cfg.stack_size = (rt->cfg.stack_size + page - 1) & ~(page - 1);
	rt->owner_thread = pthread_self();
	rt->ncores = cfg->cores ? cfg->cores : online_cpus();
	rt->cores = calloc(rt->ncores, sizeof(*rt->cores));
	if (!rt->cores) {
		free(rt);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < rt->ncores; i++)
		rt->cores[i].wake_fd = -1;
	rt->signal_fd = -1;
	rc = runtime__ring_probe(&rt->cfg);
	if (rc >= 0) {
		rt->feat.setup_flags = (unsigned)rc;
		for (unsigned i = 0; i < rt->ncores && rc >= 0; i++)
			rc = core_init(rt, &rt->cores[i], i);
	}
	if (rc >= 0)
		rc = runtime__named_init(rt);
	if (rc >= 0)
		rc = runtime__overflow_handler_install();
	if (rc < 0) {
		runtime_destroy(rt);
		return rc;
	}
	*out = rt;
	return 0;
}

void runtime_destroy(struct runtime *rt)
{
	if (!rt)
		return;
	for (unsigned i = 0; i < rt->ncores && rt->cores; i++)
		core_free(&rt->cores[i]);
	runtime__named_free(rt);
	if (rt->signal_fd >= 0)
		close(rt->signal_fd);
	free(rt->cores);
	free(rt);
}

/*
 * Any thread. Each core shuts down on its own thread: directly when that is
 * the caller's (or when nothing runs and the caller owns the runtime), else
 * through one INBOX_SHUTDOWN node per core, sent at most once.
 */
void runtime_shutdown(struct runtime *rt)
{
	if (!rt)
		return;
	atomic_store(&rt->shutting_down, true);
	for (unsigned i = 0; i < rt->ncores; i++) {
		struct core *c = &rt->cores[i];
		if (may_create_on(c))
			core_shutdown(c);
		else if (!atomic_exchange(&c->shutdown_sent, true))
			runtime__inbox_push(c, &c->shutdown_node);
	}
}

/*
 * SIGINT and SIGTERM become runtime_shutdown(): they are blocked in the
 * calling thread (core threads inherit the mask when runtime_run starts
 * them) and read from a signalfd by core 0's ring - no signal handler runs.
 */
int runtime_shutdown_on_signals(struct runtime *rt)
{
	sigset_t set;

	if (!rt)
		return -EINVAL;
	if (!on_owner_thread(rt) || is_running(rt))
		return -EPERM;
	if (rt->signal_fd >= 0)
		return 0;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	int err = pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (err)
		return -err;
	int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	rt->signal_fd = fd;
	return 0;
}

struct runtime *runtime_current(void)
{
	struct core *c = this_core();
	return c ? c->rt : NULL;
}
