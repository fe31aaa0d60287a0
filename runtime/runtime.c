/* SPDX-License-Identifier: MIT */
/*
 * runtime.c - the runtime's lifecycle: configuration, create (the engine
 * choice and each core's eventfd and stack cache), shutdown from any thread,
 * and destroy, which frees whatever never ran and gives back every
 * process-wide setting the runtime changed (signal.c).
 */
#include "core.h"
#include "engine/engine.h"
#include "services.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

void runtime_config_init(struct runtime_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->cores = 1;
	cfg->stack_size = RUNTIME_DEFAULT_STACK_SIZE;
	cfg->stack_cache = RUNTIME_DEFAULT_STACK_CACHE;
	cfg->ring_entries = RUNTIME_DEFAULT_RING_ENTRIES;
	cfg->run_budget = RUNTIME_DEFAULT_RUN_BUDGET;
	cfg->sqpoll_idle_ms = RUNTIME_DEFAULT_SQPOLL_IDLE_MS;
	cfg->xcore_spin_us = RUNTIME_DEFAULT_XCORE_SPIN_US;
	cfg->register_ring_fd = 1;
	cfg->offload_max_threads = RUNTIME_DEFAULT_OFFLOAD_MAX_THREADS;
	cfg->offload_idle_ms = RUNTIME_DEFAULT_OFFLOAD_IDLE_MS;
	cfg->offload_queue_max = RUNTIME_DEFAULT_OFFLOAD_QUEUE_MAX;
	cfg->offload_policy = RUNTIME_OFFLOAD_BLOCK;
	cfg->stream_buffers = RUNTIME_DEFAULT_STREAM_BUFFERS;
	cfg->stream_buffer_size = RUNTIME_DEFAULT_STREAM_BUFFER_SIZE;
#ifdef RUNTIME_DEBUG
	cfg->stall_ms = RUNTIME_DEBUG_STALL_MS; /* a blocking call shows at once */
#endif
}

static unsigned online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

static int config_check(const struct runtime_config *cfg)
{
	if (cfg->stack_size < RUNTIME_MIN_STACK_SIZE || cfg->stack_size > (1ull << 32))
		return -EINVAL;
	if (cfg->ring_entries < 8 || cfg->ring_entries > 32768 ||
	    (cfg->ring_entries & (cfg->ring_entries - 1)))
		return -EINVAL;
	if (cfg->run_budget < 1 || cfg->stack_cache > (1u << 20))
		return -EINVAL;
	if (cfg->cores > RUNTIME_MAX_CORES || (unsigned)cfg->engine > RUNTIME_ENGINE_EPOLL)
		return -EINVAL;
	if (cfg->offload_max_threads < 1 || cfg->offload_max_threads > RUNTIME_MAX_OFFLOAD_THREADS ||
	    cfg->offload_min_threads > cfg->offload_max_threads ||
	    cfg->offload_queue_max > RUNTIME_SEM_MAX ||
	    (unsigned)cfg->offload_policy > RUNTIME_OFFLOAD_CALLER_RUNS)
		return -EINVAL;
	if (cfg->dump_signal < 0 || cfg->dump_signal >= NSIG || cfg->dump_signal == SIGKILL ||
	    cfg->dump_signal == SIGSTOP || cfg->dump_signal == SIGSEGV)
		return -EINVAL;
	if (cfg->stream_buffers < 1 || cfg->stream_buffers > 32768 ||
	    (cfg->stream_buffers & (cfg->stream_buffers - 1)) || cfg->stream_buffer_size < 1 ||
	    cfg->stream_buffer_size > RUNTIME_MAX_STREAM_BUFFER_SIZE)
		return -EINVAL;
	return 0;
}

/* What core_free relies on, for every core, before anything can fail. */
static void core_prepare(struct runtime *rt, struct core *c, unsigned index)
{
	c->rt = rt;
	c->sched.share_fp = rt->cfg.share_fp_control != 0;
	c->eng = rt->eng;
	c->index = index;
	queue_init(&c->sched.ready);
	queue_init(&c->inbox.backlog);
	queue_init(&c->timers.done);
	dlist_init(&c->sched.fibers);
	dlist_init(&c->streams.mshots);
	c->streams.idle_drain.ops = &runtime__idle_drain_ops;
	c->rand = 0x9e3779b97f4a7c15ull * (index + 1); /* xorshift: never 0 */
	c->inbox.shutdown_node.ops = &runtime__shutdown_ops;
	c->inbox.wake_fd = -1;
	c->watch.on = rt->cfg.stall_ms != 0;
}

static int core_init(struct core *c)
{
	c->inbox.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->inbox.wake_fd < 0)
		return -errno;
	return 0;
}

/* What never ran: inbox work (first, on every core: a node may live on a
 * fiber stack of another core); timers still pending complete here. */
static void core_discard(struct core *c)
{
	runtime__inbox_discard(c);
	runtime__timers_shutdown(c);
}

/* Frees fibers that never ran or were frozen by a failed run or a deadlock.
 * Each run tears its rings down, so nothing in the kernel points at a
 * stack any more. */
static void core_free(struct core *c)
{
	while (!dlist_empty(&c->sched.fibers)) {
		struct fiber *f = container_of(dlist_first(&c->sched.fibers), struct fiber, all);
		dlist_remove(&f->all);
		runtime__fiber_release(c, f);
	}
	runtime__timers_free(c);
	runtime__log_free(c);
	runtime__stacks_free(c);
	if (c->inbox.wake_fd >= 0)
		close(c->inbox.wake_fd);
}

static int cores_init(struct runtime *rt)
{
	rt->cores = calloc(rt->ncores, sizeof(*rt->cores));
	if (!rt->cores)
		return -ENOMEM;
	for (unsigned i = 0; i < rt->ncores; i++)
		core_prepare(rt, &rt->cores[i], i);
	int rc = 0;
	for (unsigned i = 0; i < rt->ncores && rc == 0; i++)
		rc = core_init(&rt->cores[i]);
	return rc;
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
	runtime__faults_load();
	struct runtime *rt = calloc(1, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	rt->cfg = *cfg;
	size_t page = runtime__page_size();
	rt->cfg.stack_size = (rt->cfg.stack_size + page - 1) & ~(page - 1);
	rt->owner_thread = pthread_self();
	rt->ncores = cfg->cores ? cfg->cores : online_cpus();
	rt->signal_fd = -1;
	rc = runtime__signals_acquire();
	if (rc < 0) {
		free(rt);
		return rc;
	}
	rc = runtime__engine_choose(rt);
	if (rc >= 0)
		rc = cores_init(rt);
	if (rc >= 0)
		rc = runtime__named_init(rt);
	if (rc >= 0)
		rc = runtime__drain_init(rt);
	if (rc >= 0)
		rc = runtime__offload_init(rt);
	if (rc >= 0)
		rc = runtime__dump_signal_install(rt);
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
	if (runtime__is_running(rt) || (this_core() && this_core()->rt == rt)) {
		runtime__misuse(0, __func__, "the runtime is still running: shut it down and "
		                "destroy it after runtime_run returns (not destroyed)");
		return;
	}
	runtime__dump_signal_release(rt);
	for (unsigned i = 0; i < rt->ncores && rt->cores; i++)
		core_discard(&rt->cores[i]);
	for (unsigned i = 0; i < rt->ncores && rt->cores; i++)
		core_free(&rt->cores[i]);
	runtime__named_free(rt);
	runtime__drain_free(rt);
	runtime__watchdog_free(rt);
	runtime__offload_free(rt);
	runtime__shutdown_signals_release(rt);
	runtime__signals_release();
	free(rt->cores);
	free(rt);
}

/*
 * Any thread. Each core shuts down on its own thread, from its loop (never
 * inside a fiber, so timer callbacks run outside fibers): through one
 * shutdown node per core (loop.c), sent at most once - also to the caller's
 * own core. While nothing runs, the owner thread does it directly.
 */
void runtime_shutdown(struct runtime *rt)
{
	if (!rt)
		return;
	atomic_store(&rt->shutting_down, true);
	if (rt->failed)
		return; /* its timers are done and no fiber will run again */
	for (unsigned i = 0; i < rt->ncores; i++) {
		struct core *c = &rt->cores[i];
		if (!this_core() && runtime__may_create_on(c))
			runtime__core_shutdown(c);
		else if (!atomic_exchange(&c->inbox.shutdown_sent, true))
			runtime__inbox_push(c, &c->inbox.shutdown_node);
	}
}

unsigned runtime_stats(const struct runtime *rt, struct runtime_core_stats *cores, unsigned max,
                       struct runtime_offload_stats *pool)
{
	if (!rt)
		return 0;
	unsigned n = rt->ncores < max ? rt->ncores : max;
	for (unsigned i = 0; i < n && cores; i++) {
		const struct core_stats *s = &rt->cores[i].stats;
		cores[i] = (struct runtime_core_stats){
			.fibers_live = atomic_load_explicit(&s->live, memory_order_relaxed),
			.fibers_spawned = atomic_load_explicit(&s->spawned, memory_order_relaxed),
			.sqes_submitted = atomic_load_explicit(&s->sqes, memory_order_relaxed),
			.cqes_reaped = atomic_load_explicit(&s->cqes, memory_order_relaxed),
			.enters = atomic_load_explicit(&s->enters, memory_order_relaxed),
			.timers_armed = atomic_load_explicit(&s->timers, memory_order_relaxed),
			.inbox_items = atomic_load_explicit(&s->inbox, memory_order_relaxed),
			.wakeups_written = atomic_load_explicit(&s->wakeups, memory_order_relaxed),
			.stream_fallbacks =
				atomic_load_explicit(&s->stream_fallbacks, memory_order_relaxed),
			.context_switches = atomic_load_explicit(&s->switches, memory_order_relaxed),
			.run_queue = atomic_load_explicit(&s->ready, memory_order_relaxed),
			.idle_conns = atomic_load_explicit(&s->idle, memory_order_relaxed),
			.stacks_cached = atomic_load_explicit(&s->stacks_cached, memory_order_relaxed),
			.cq_overflows = atomic_load_explicit(&s->cq_overflows, memory_order_relaxed),
			.stalls = atomic_load_explicit(&s->stalls, memory_order_relaxed),
		};
	}
	if (pool)
		runtime_offload_stats(rt, pool);
	return rt->ncores;
}

struct runtime *runtime_current(void)
{
	struct core *c = this_core();
	return c ? c->rt : NULL;
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
