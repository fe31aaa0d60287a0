/* SPDX-License-Identifier: MIT */
/*
 * loop.c - the core loop and runtime_run: one thread per core, each in a
 * loop of fixed phases - run ready fibers (within a budget, so I/O is never
 * starved) -> handle inbox work from other threads -> run due timers ->
 * one trip to the kernel through the core's engine (io_uring: submit SQEs
 * and reap CQEs in one io_uring_enter; epoll: one epoll_wait), blocking
 * only when nothing is ready - until every fiber of every core has ended.
 *
 * rt->work counts busy cores (load > 0) plus inbox items in transit; the
 * runtime stops when it reaches 0. Cores touch it only when their own load
 * crosses zero, so spawning and ending fibers costs no atomic operation.
 *
 * A run that fails (a ring or a thread could not be created, a ring broke)
 * stops every core at once: each leaves nothing in flight in the kernel,
 * the pending timers complete with RUNTIME_TIMER_SHUTDOWN, and the runtime
 * is left failed: later runs return the same error, and runtime_destroy
 * frees the fibers that were alive without running them again.
 */
#include "core.h"
#include "engine/engine.h"
#include "services.h"

#include <sched.h>
#include <unistd.h>

#ifdef RUNTIME_TSAN
#include <sanitizer/tsan_interface.h>
#endif

__thread struct core *runtime__tls_core __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------------- accounting */

void runtime__stop_all(struct runtime *rt)
{
	atomic_store_explicit(&rt->stop, true, memory_order_seq_cst);
	for (unsigned i = 0; i < rt->ncores; i++)
		runtime__core_wake(&rt->cores[i]);
}

/* One unit of work outside any core's load (a spawn or a named timer in
 * transit): the runtime runs until it is done. */
void runtime__work_begin(struct runtime *rt)
{
	atomic_fetch_add_explicit(&rt->work, 1, memory_order_relaxed);
}

void runtime__work_done(struct runtime *rt)
{
	if (atomic_fetch_sub_explicit(&rt->work, 1, memory_order_acq_rel) == 1)
		runtime__stop_all(rt);
}


/* ------------------------------------------------------------ placement */

/* Placement: the caller's own core if it is one of rt's, else round-robin. */
struct core *runtime__place(struct runtime *rt)
{
	struct core *self = this_core();
	if (self && self->rt == rt)
		return self;
	unsigned i = atomic_fetch_add_explicit(&rt->next_core, 1, memory_order_relaxed);
	return &rt->cores[i % rt->ncores];
}

/* The core's share of a shutdown: cancel every fiber, complete every public
 * timer. Idempotent; from the core's loop (never inside a fiber), or from
 * the owner thread while the runtime is not running. */
void runtime__core_shutdown(struct core *c)
{
	dlist_for_each(n, &c->sched.fibers)
		runtime__fiber_cancel(container_of(n, struct fiber, all));
	runtime__idle_wake_all(c, -ECANCELED);
	runtime__timers_shutdown(c);
}

/* runtime_shutdown's node reached the core. */
static int shutdown_arrived(struct core *c, struct inbox_node *n)
{
	(void)n;
	runtime__core_shutdown(c);
	return 0;
}

const struct inbox_ops runtime__shutdown_ops = { shutdown_arrived, NULL };

/* ------------------------------------------------------------- the loop */

/* Only a lone core can know that nothing will ever wake its fibers: no
 * timer (a lingering deadline timer, fiber.c, wakes nobody), no I/O, no
 * fiber in runtime_park (another thread may unpark it), no inbox work.
 * Its eventfd and signalfd reads wake no fiber. */
static bool deadlocked(const struct core *c)
{
	/* in_flight first: on a busy core, the test that fails */
	return c->in_flight == (unsigned)c->wake_armed + (unsigned)c->signal_armed &&
	       c->rt->ncores == 1 && c->sched.load && c->timers.armed == c->timers.lingering && !c->sched.xparked &&
	       queue_empty(&c->inbox.backlog);
}

/* Core 0 watches the shutdown signalfd: not a fiber, so it never keeps
 * the runtime running by itself. */
static void watch_signals(struct core *c)
{
	struct runtime *rt = c->rt;

	if (!c->signal_armed && c->index == 0 && rt->signal_fd >= 0 &&
	    !runtime__is_shutting_down(rt))
		c->eng->watch_signals(c);
}

/* The inbox phase's test, inline: most turns have nothing from other
 * threads and nothing held back. */
static bool inbox_has_work(struct core *c)
{
	return atomic_load_explicit(&c->inbox.head, memory_order_relaxed) || !queue_empty(&c->inbox.backlog);
}

static bool stopping(const struct runtime *rt)
{
	return atomic_load_explicit(&rt->stop, memory_order_acquire);
}

/*
 * Spinning for cross-core work (xcore_spin_us). Waking a sleeping core
 * costs more than a short spin: about 25 us each way on a VM whose idle
 * vCPU halts, where a spinning core sees work in under a microsecond. So
 * a core spins before it sleeps, up to xcore_spin_us, only while it has
 * reason to expect work from another thread soon: its last sleep was
 * ended by such work within XSPIN_EXPECT of its start, or its last spin
 * caught some. A spin that catches nothing ends the spinning until a short
 * sleep shows traffic again: an idle core, or one whose cross-core work is
 * sparse, never spins, and one whose traffic stops spins once more.
 */
#define XSPIN_EXPECT(window_ns) ((window_ns) * 3 / 2)

/* The first turn after a sleep: was it ended soon by work from another
 * thread? (From inbox.c, which sees that work.) */
void runtime__spin_learn(struct core *c)
{
	uint64_t window = (uint64_t)c->rt->cfg.xcore_spin_us * 1000;

	if (c->inbox.slept_at) {
		c->inbox.spin_next = runtime_now() - c->inbox.slept_at < XSPIN_EXPECT(window);
		c->inbox.slept_at = 0;
	}
}

/* Before the core sleeps: busy_poll_us, always, if set; else the spin
 * above. True if work came (the core does not sleep). */
static bool spin_before_sleep(struct core *c)
{
	const struct runtime_config *cfg = &c->rt->cfg;

	if (cfg->busy_poll_us)
		return c->eng->busy_poll(c, (uint64_t)cfg->busy_poll_us * 1000);
	if (!c->inbox.spin_next || !cfg->xcore_spin_us)
		return false;
	c->inbox.spin_next = c->eng->busy_poll(c, (uint64_t)cfg->xcore_spin_us * 1000);
	return c->inbox.spin_next;
}

/* Nothing is ready: may the core block in the kernel? Not if it is
 * deadlocked (-EDEADLK), nor if spinning found work, nor if work arrived
 * while it announced its sleep. */
static int may_block(struct core *c, bool *block)
{
	*block = false;
	c->inbox.slept_at = 0;
	if (deadlocked(c))
		return -EDEADLK; /* every fiber waits on another */
	if (spin_before_sleep(c))
		return 0;
	c->eng->prepare_sleep(c);
	*block = runtime__core_may_sleep(c);
	if (*block)
		c->inbox.slept_at = c->now; /* this turn's clock: no read of its own */
	return 0;
}

static int core_loop(struct core *c)
{
	while (!stopping(c->rt)) {
		if (c->watch.count_turns) /* the watchdog's proof of life */
			atomic_store_explicit(&c->watch.turns, atomic_load_explicit(
			        &c->watch.turns, memory_order_relaxed) + 1, memory_order_relaxed);
		runtime__run_ready(c);
		if (inbox_has_work(c))
			runtime__inbox_drain(c);
		runtime__dump_signal_poll(c);
		runtime__timers_run(c);
		watch_signals(c);
		bool block = false;
		if (queue_empty(&c->sched.ready) && queue_empty(&c->inbox.backlog)) {
			int rc = may_block(c, &block);
			if (rc < 0)
				return rc;
		}
		int rc = c->eng->poll(c, block);
		if (block) {
			runtime__core_awake(c);
			c->now_fresh = false; /* it waited: now is stale */
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ------------------------------------------------------ a core's thread */

/* Each run sets the engine up on the threads that will use it (io_uring's
 * SINGLE_ISSUER binds a ring to its creator) and tears it down after. */
static int core_start(struct core *c)
{
	int rc = c->eng->core_start(c);

	if (rc < 0)
		return rc;
	if ((rc = runtime__core_signals_enter(c)) < 0) {
		c->eng->core_stop(c);
		return rc;
	}
	c->sched.loop.flags = FIBER_LOOP;
	c->sched.loop.state = FIBER_RUNNING;
	c->sched.loop.core = c;
	c->sched.current = &c->sched.loop;
	c->now = runtime_now();
	atomic_store_explicit(&c->watch.tid, gettid(), memory_order_relaxed);
#ifdef RUNTIME_TSAN
	c->sched.loop.tsan_fiber = __tsan_get_current_fiber();
#endif
	runtime__tls_core = c;
	return 0;
}

static void core_stop(struct core *c)
{
	c->eng->core_stop(c); /* nothing of ours in the kernel after this */
	runtime__tls_core = NULL;
	runtime__core_signals_leave(c);
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
		runtime__watchdog_start(c);
		rc = core_loop(c);
		runtime__watchdog_stop(c);
		core_stop(c);
	}
	if (rc < 0)
		runtime__stop_all(c->rt); /* one core failing ends the run for all */
	return rc;
}

static void *core_thread(void *arg)
{
	return (void *)(intptr_t)core_main(arg);
}

/* --------------------------------------------------------- runtime_run */

/* A run failed: no ring is left, so no fiber can run again. The public
 * timers complete now (on this thread, outside any fiber), and the
 * runtime refuses further runs and spawns. */
static void run_failed(struct runtime *rt, int rc)
{
	rt->failed = rc;
	atomic_store(&rt->shutting_down, true);
	for (unsigned i = 0; i < rt->ncores; i++)
		runtime__timers_shutdown(&rt->cores[i]);
}

/* Start cores 1.. on their own threads, run core 0 here, join them. */
static int run_cores(struct runtime *rt)
{
	unsigned started = 1;
	int rc = 0;

	for (; started < rt->ncores; started++) {
		struct core *c = &rt->cores[started];
		int err = pthread_create(&c->thread, NULL, core_thread, c);
		if (err) {
			rc = -err;
			runtime__stop_all(rt);
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
	return rc0 < 0 ? rc0 : rc;
}

int runtime_run(struct runtime *rt)
{
	if (!rt)
		return -EINVAL;
	if (runtime__is_running(rt) || this_core())
		return runtime__misuse(-EBUSY, __func__, "the runtime runs already, or the caller "
		                       "is a fiber or callback of a runtime");
	if (!runtime__on_owner_thread(rt))
		return runtime__misuse(-EPERM, __func__, "only the thread that created the "
		                       "runtime runs it");
	if (rt->failed)
		return rt->failed;
	if (atomic_load(&rt->work) == 0)
		return 0; /* nothing to run */

	cpu_set_t saved;
	bool pinned = rt->cfg.pin_cpus &&
	              pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
	atomic_store(&rt->stop, false);
	atomic_store_explicit(&rt->running, true, memory_order_release);
	int rc = runtime__watchdog_prepare(rt);
	if (rc == 0)
		rc = runtime__offload_start(rt);
	if (rc == 0) {
		rc = runtime__stall_start(rt);
		if (rc == 0) {
			rc = run_cores(rt);
			runtime__stall_stop(rt);
		}
		runtime__offload_stop(rt); /* every pool thread has exited */
	}
	if (rc < 0 && rc != -EDEADLK)
		run_failed(rt, rc);
	atomic_store_explicit(&rt->running, false, memory_order_release);
	if (pinned)
		pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
	return rc;
}
