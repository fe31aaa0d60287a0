/* SPDX-License-Identifier: MIT */
/*
 * micro - the runtime's micro figures, one "name=value" line each:
 *
 *   switch_ns            one-way runtime__switch between two bare contexts
 *                        (each keeps its own MXCSR and x87 control word)
 *   switch_shared_fp_ns  the same with runtime__switch_shared_fp, the switch
 *                        of a runtime configured with share_fp_control
 *   yield_ns             runtime_yield between two fibers (per yield)
 *   yield_shared_fp_ns   the same, share_fp_control = 1
 *   yield_alone_ns       runtime_yield with no other fiber ready (it returns
 *                        at once), from a function one call level down, a
 *                        run budget that no loop turn interrupts
 *   spawn_join_ns        runtime_fiber_spawn + join, in batches of 1024
 *                        (the shape of Go's go + WaitGroup figure)
 *   timer_add_cancel_ns  runtime_timer_start + cancel, until the callback
 *   timer_add_cancel_kernel_ns   the design the runtime did not take, for
 *                        comparison: one IORING_OP_TIMEOUT per timer and
 *                        a TIMEOUT_REMOVE to cancel it, both CQEs reaped
 *                        (a bare ring, no runtime)
 *   sleep_20us_ns        runtime_sleep(20 us), as long as it takes (mean of
 *                        200); sleep_20us_epoll_ns on the epoll engine,
 *                        whose waits are nanosecond ones with epoll_pwait2
 *                        (5.11) and whole milliseconds without (the unit
 *                        tests hold only that no sleep ends early)
 *   parked_fiber_bytes   RSS growth per parked fiber, 1M fibers
 *   sleep_1m_wall_s      1M fibers each sleeping 1 s, first spawn to last wake
 *                        (no stack cache; after the other figures)
 *   "micro sleep1m" alone, in a fresh process (go_micro sleep1m's shape),
 *   the default config, two waves of 1M sleepers in one runtime:
 *   sleep_1m_cold_s      the first (no stack memory faulted in yet)
 *   sleep_1m_warm_s      the second (what the first left behind reused)
 *   sleep_1m_peak_rss_kib  the process's peak RSS (VmHWM)
 *   xcore_pingpong_ns    round trip between fibers on two cores through
 *                        park/unpark, default config: the traffic is dense,
 *                        so each core spins for the next message (runtime.h
 *                        xcore_spin_us) instead of sleeping
 *   xcore_pingpong_cpu_ns   the CPU both cores spend per round trip meanwhile
 *   xcore_pingpong_asleep_ns   the same with xcore_spin_us = 0: each core
 *                        asleep between messages, woken through its eventfd
 *   xcore_pingpong_spin50us_ns   the same with busy_poll_us = 50: cores spin
 *                        before they sleep, always
 *   xcore_spawn_per_s    spawns from a fiber on core 0 onto core 1, counted
 *                        until the last one has run
 *   mutex_uncontended_ns lock + unlock by one fiber
 *   mutex_contended_ns   lock + unlock by 4 fibers of one core, each yielding
 *                        while it holds the lock (so the others queue and
 *                        every unlock is a hand-off), per lock + unlock
 *   sem_get_post_ns      runtime_sem_get + post by one fiber
 *   ratelimit_try_ns     runtime_ratelimit_try_take of one token that is
 *                        there (a rate no caller can exhaust), one thread
 *   ratelimit_keyed_hot_ns   runtime_ratelimit_keyed_try_take of one key
 *                        ("10.0.0.0"), one thread
 *   ratelimit_keyed_100k_ns  the same over 100,000 keys in turn, all held
 *                        (max_keys 100,000: every call finds its key)
 *   ratelimit_keyed_evict_ns the same over 1,000,000 keys in turn with
 *                        max_keys 100,000: every call evicts one
 *   ratelimit_keyed_2threads_ns  two threads on 100,000 keys held, wall
 *                        time per call of each (they share the shards)
 *   chan_pingpong_ns     round trip over two unbuffered channels between two
 *                        fibers of one core (Go's go_chan_pingpong_ns shape)
 *   chan_xcore_pingpong_ns   the same between fibers on two cores, each core
 *                        asleep between messages
 *   select2_ns           a select over two buffered channels, one of them
 *                        ready, plus the try_send that makes it ready
 *   offload_roundtrip_ns one fiber offloading a trivial function and waiting
 *                        for it, pool of 2 threads (the shape of the peers'
 *                        pthread_pool_roundtrip_ns)
 *   offload_per_s        16 fibers doing that at once, pool of 2 threads
 *                        (pthread_pool_per_s: 16 requester threads)
 *   read_ns              runtime_read of 1 byte from a socketpair that holds
 *                        data (so the cost is the SQE, the trip to the
 *                        kernel and the switch, not a wait)
 *   hooked_read_ns       the same through libruntime-preload's read(2)
 *                        wrapper (its sources are compiled in here with
 *                        PRELOAD_PREFIX: the wrapper is preload_read, and
 *                        nothing is interposed); medians of 9 interleaved
 *                        rounds of each
 *   stream_recv_line_ns  64-byte lines from a receive stream on a unix
 *                        socketpair (16 KiB written ahead with write(2),
 *                        not timed), each taken with runtime_stream_recv
 *                        of 64 bytes: the floor the reader wraps
 *   bufio_line_ns        the same lines through runtime_reader_read_line
 *                        over runtime_transport_stream (lines handed out
 *                        in the stream's buffers), and bufio_line_ratio
 *                        against the floor; medians of 9 interleaved rounds
 *   copy_{splice,buffer}_{64k,1m}_mb_s   runtime_copy of 256 MiB between
 *                        two TCP loopback connections (a feeding fiber, the
 *                        copy, a draining fiber, one core), through splice
 *                        or with RUNTIME_COPY_NO_SPLICE (a recv/send loop),
 *                        chunk 64 KiB or 1 MiB; copy_*_cpu_ns_per_mib is
 *                        the process's CPU time (the kernel's splice
 *                        workers included) per MiB; medians of 5
 *                        interleaved rounds, and the splice/buffer ratios
 *
 * Run pinned (make bench-micro does taskset -c 0) and compare ratios with
 * shared peers measured in the same run. MICRO_QUICK=1 shrinks the counts
 * (for a smoke test, not for figures). Linked against the static library so
 * that it can reach the hidden runtime__switch.
 */
#include "../runtime/core.h"

#include <liburing.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int quick;

static long scaled(long n)
{
	return quick ? n / 100 : n;
}

static struct runtime *new_runtime(void)
{
	struct runtime *rt;

	int rc = runtime_create(&rt, NULL);
	if (rc < 0) {
		fprintf(stderr, "micro: runtime_create: %s\n", strerror(-rc));
		exit(1);
	}
	return rt;
}

static void run_one(void (*fn)(void *), void *arg)
{
	struct runtime *rt = new_runtime();
	runtime_spawn(rt, fn, arg);
	int rc = runtime_run(rt);
	if (rc < 0) {
		fprintf(stderr, "micro: runtime_run: %s\n", strerror(-rc));
		exit(1);
	}
	runtime_destroy(rt);
}

/* --------------------------------------------------------------- switch */

static void *main_sp, *other_sp;

__attribute__((noreturn)) static void bounce(void *arg)
{
	(void)arg;
	for (;;)
		runtime__switch(&other_sp, main_sp);
}

__attribute__((noreturn)) static void bounce_shared_fp(void *arg)
{
	(void)arg;
	for (;;)
		runtime__switch_shared_fp(&other_sp, main_sp);
}

static double time_switches(long n, bool shared_fp)
{
	uint64_t t0 = runtime_now();
	if (shared_fp) {
		for (long i = 0; i < n; i++)
			runtime__switch_shared_fp(&main_sp, other_sp);
	} else {
		for (long i = 0; i < n; i++)
			runtime__switch(&main_sp, other_sp);
	}
	return (double)(runtime_now() - t0) / (2.0 * (double)n);
}

static void bench_switch(bool shared_fp)
{
	const long n = scaled(20000000);
	size_t size = 64 * 1024;
	char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	other_sp = runtime__context_init(stack + size, shared_fp ? bounce_shared_fp : bounce, NULL);
	time_switches(1, shared_fp); /* warm up */
	printf("%s=%.2f\n", shared_fp ? "switch_shared_fp_ns" : "switch_ns",
	       time_switches(n, shared_fp));
	munmap(stack, size);
}

/* ---------------------------------------------------------------- yield */

static long yield_n;

static void yielder(void *arg)
{
	(void)arg;
	for (long i = 0; i < yield_n; i++)
		runtime_yield();
}

static void yield_main(void *arg)
{
	uint64_t *elapsed = arg;
	uint64_t t0 = runtime_now();
	runtime_spawn(runtime_current(), yielder, NULL);
	yielder(NULL);
	runtime_yield(); /* let the other finish */
	*elapsed = runtime_now() - t0;
}

/* fn(&elapsed) as a runtime's one first fiber, under cfg: elapsed. */
static uint64_t run_timed(const struct runtime_config *cfg, void (*fn)(void *))
{
	struct runtime *rt;
	uint64_t elapsed = 0;

	if (runtime_create(&rt, cfg) < 0)
		exit(1);
	runtime_spawn(rt, fn, &elapsed);
	if (runtime_run(rt) < 0)
		exit(1);
	runtime_destroy(rt);
	return elapsed;
}

static void bench_yield(bool shared_fp)
{
	struct runtime_config cfg;

	runtime_config_init(&cfg);
	cfg.share_fp_control = shared_fp;
	yield_n = scaled(10000000);
	uint64_t elapsed = run_timed(&cfg, yield_main);
	printf("%s=%.2f\n", shared_fp ? "yield_shared_fp_ns" : "yield_ns",
	       (double)elapsed / (2.0 * (double)yield_n));
}

/* One call level between the loop and the yield, as in a handler: a yield
 * that returns without a switch must leave the return stack balanced. */
__attribute__((noinline)) static void yield_once(void)
{
	runtime_yield();
	__asm__ volatile("");
}

static void yield_alone_main(void *arg)
{
	uint64_t *elapsed = arg;
	uint64_t t0 = runtime_now();
	for (long i = 0; i < yield_n; i++)
		yield_once();
	*elapsed = runtime_now() - t0;
}

static void bench_yield_alone(void)
{
	struct runtime_config cfg;

	runtime_config_init(&cfg);
	cfg.run_budget = 1u << 30;
	yield_n = scaled(10000000);
	uint64_t elapsed = run_timed(&cfg, yield_alone_main);
	printf("yield_alone_ns=%.2f\n", (double)elapsed / (double)yield_n);
}

/* ----------------------------------------------------------- spawn+join */

static void *nothing(void *arg)
{
	return arg;
}

static void spawn_join_main(void *arg)
{
	const long n = scaled(4000000);
	struct runtime_fiber *batch[1024];
	double *ns = arg;

	uint64_t t0 = runtime_now();
	for (long done = 0; done < n; done += 1024) {
		for (int i = 0; i < 1024; i++)
			runtime_fiber_spawn(runtime_current(), &batch[i], nothing, NULL);
		for (int i = 0; i < 1024; i++)
			runtime_fiber_join(batch[i], NULL);
	}
	*ns = (double)(runtime_now() - t0) / (double)n;
}

static void bench_spawn_join(void)
{
	double ns;
	run_one(spawn_join_main, &ns);
	printf("spawn_join_ns=%.1f\n", ns);
}

/* --------------------------------------------------------------- timers */

#define TIMER_BATCH 128

struct timer_bench {
	struct runtime_timer t[TIMER_BATCH];
	long callbacks;
	double ns;
};

static void timer_done(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	(void)t;
	(void)why;
	((struct timer_bench *)arg)->callbacks++;
}

/* Start and cancel in batches, and count the time until every callback
 * has run (cancelled callbacks run from the loop). */
static void timer_main(void *arg)
{
	struct timer_bench *tb = arg;
	const long n = scaled(4000000);

	uint64_t t0 = runtime_now();
	for (long done = 0; done < n; done += TIMER_BATCH) {
		for (int i = 0; i < TIMER_BATCH; i++)
			runtime_timer_start(&tb->t[i], 1000000000ull, timer_done, tb);
		for (int i = 0; i < TIMER_BATCH; i++)
			runtime_timer_cancel(&tb->t[i]);
		while (tb->callbacks < done + TIMER_BATCH)
			runtime_yield();
	}
	tb->ns = (double)(runtime_now() - t0) / (double)n;
}

static void bench_timers(void)
{
	struct timer_bench *tb = calloc(1, sizeof(*tb));
	run_one(timer_main, tb);
	printf("timer_add_cancel_ns=%.1f\n", tb->ns);
	free(tb);
}

/* The same work with one kernel timeout per timer: TIMER_BATCH TIMEOUTs,
 * then a TIMEOUT_REMOVE for each, and every CQE reaped. */
static void kernel_timer_batch(struct io_uring *ring, struct __kernel_timespec *ts)
{
	for (int i = 0; i < TIMER_BATCH; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		io_uring_prep_timeout(sqe, ts, 0, 0);
		io_uring_sqe_set_data64(sqe, (uint64_t)i + 1);
	}
	io_uring_submit(ring);
	for (int i = 0; i < TIMER_BATCH; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		io_uring_prep_timeout_remove(sqe, (uint64_t)i + 1, 0);
		io_uring_sqe_set_data64(sqe, 0);
	}
	io_uring_submit_and_wait(ring, 2 * TIMER_BATCH);
	unsigned head, seen = 0;
	struct io_uring_cqe *cqe;
	while (seen < 2 * TIMER_BATCH) {
		unsigned n = 0;
		io_uring_for_each_cqe(ring, head, cqe)
			n++;
		io_uring_cq_advance(ring, n);
		seen += n;
		if (seen < 2 * TIMER_BATCH)
			io_uring_wait_cqe(ring, &cqe);
	}
}

static void bench_kernel_timers(void)
{
	struct __kernel_timespec ts = { .tv_sec = 1 };
	struct io_uring ring;
	const long n = scaled(1000000);

	if (io_uring_queue_init(2 * TIMER_BATCH, &ring, 0) < 0) {
		fprintf(stderr, "micro: io_uring_queue_init failed\n");
		exit(1);
	}
	uint64_t t0 = runtime_now();
	for (long done = 0; done < n; done += TIMER_BATCH)
		kernel_timer_batch(&ring, &ts);
	printf("timer_add_cancel_kernel_ns=%.1f\n", (double)(runtime_now() - t0) / (double)n);
	io_uring_queue_exit(&ring);
}

/* A batch of short sleeps, mean per sleep into *arg. */
static void short_sleeps_main(void *arg)
{
	const int n = 200;
	uint64_t t0 = runtime_now();

	for (int i = 0; i < n; i++)
		runtime_sleep(20 * 1000);
	*(double *)arg = (double)(runtime_now() - t0) / n;
}

static void bench_short_sleeps(enum runtime_engine engine, const char *name)
{
	struct runtime_config cfg;
	struct runtime *rt;
	double ns = 0;

	runtime_config_init(&cfg);
	cfg.engine = engine;
	int rc = runtime_create(&rt, &cfg);
	if (rc < 0) {
		fprintf(stderr, "micro: runtime_create (%s): %s\n", name, strerror(-rc));
		exit(1);
	}
	runtime_spawn(rt, short_sleeps_main, &ns);
	runtime_run(rt);
	runtime_destroy(rt);
	printf("%s=%.0f\n", name, ns);
}

/* ------------------------------------------------ parked fibers, sleep */

static long rss_bytes(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * sysconf(_SC_PAGESIZE);
}

struct park_bench {
	long n;
	long before, after;
	uint64_t t0, last_wake;
	long woke;
};

static struct park_bench pb;

static void parked(void *arg)
{
	(void)arg;
	runtime_sleep(3600ull * 1000000000ull); /* until shutdown */
}

static void park_main(void *arg)
{
	(void)arg;
	pb.before = rss_bytes();
	for (long i = 0; i < pb.n; i++)
		if (runtime_spawn(runtime_current(), parked, NULL) < 0) {
			fprintf(stderr, "micro: spawn failed at %ld\n", i);
			break;
		}
	runtime_sleep(200 * 1000000ull); /* every fiber has run and parked */
	pb.after = rss_bytes();
	runtime_shutdown(runtime_current());
}

static void sleeper(void *arg)
{
	(void)arg;
	if (runtime_sleep(1000000000ull) == 0) {
		pb.woke++;
		pb.last_wake = runtime_now();
	}
}

static void sleep_main(void *arg)
{
	(void)arg;
	pb.t0 = runtime_now();
	for (long i = 0; i < pb.n; i++)
		runtime_spawn(runtime_current(), sleeper, NULL);
}

static void run_fresh(void (*fn)(void *))
{
	struct runtime_config cfg;
	struct runtime *rt;

	runtime_config_init(&cfg);
	cfg.stack_cache = 0; /* count fresh stacks only */
	if (runtime_create(&rt, &cfg) < 0)
		exit(1);
	runtime_spawn(rt, fn, NULL);
	runtime_run(rt);
	runtime_destroy(rt);
}

static void bench_parked(void)
{
	pb.n = scaled(1000000);
	run_fresh(park_main);
	printf("parked_fiber_bytes=%.0f\n", (double)(pb.after - pb.before) / (double)pb.n);
}

static void bench_sleepers(void)
{
	pb.n = scaled(1000000);
	pb.woke = 0;
	run_fresh(sleep_main);
	if (pb.woke != pb.n)
		fprintf(stderr, "micro: only %ld of %ld sleepers woke\n", pb.woke, pb.n);
	printf("sleep_1m_wall_s=%.2f\n", (double)(pb.last_wake - pb.t0) / 1e9);
}

/* Waves of 1M sleepers: the last to wake unparks the spawner. */
static struct {
	long left;
	struct runtime_fiber *spawner;
	double secs[2];
} wave;

static void wave_sleeper(void *arg)
{
	(void)arg;
	runtime_sleep(1000000000ull);
	if (--wave.left == 0)
		runtime_fiber_unpark(wave.spawner);
}

static double one_wave(long n)
{
	uint64_t t0 = runtime_now();

	wave.left = n;
	wave.spawner = runtime_fiber_self();
	for (long i = 0; i < n; i++)
		if (runtime_spawn(runtime_current(), wave_sleeper, NULL) < 0) {
			fprintf(stderr, "micro: spawn failed at %ld\n", i);
			exit(1);
		}
	while (wave.left > 0)
		runtime_park(-1);
	return (double)(runtime_now() - t0) / 1e9;
}

static void waves_main(void *arg)
{
	long n = *(long *)arg;
	wave.secs[0] = one_wave(n);
	wave.secs[1] = one_wave(n);
}

static long peak_rss_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

static void bench_sleep_waves(void)
{
	struct runtime *rt;
	long n = scaled(1000000);

	if (runtime_create(&rt, NULL) < 0)
		exit(1);
	runtime_spawn(rt, waves_main, &n);
	if (runtime_run(rt) < 0)
		exit(1);
	runtime_destroy(rt);
	printf("sleep_1m_cold_s=%.2f\nsleep_1m_warm_s=%.2f\nsleep_1m_peak_rss_kib=%ld\n",
	       wave.secs[0], wave.secs[1], peak_rss_kib());
}

/* ------------------------------------------------------------ cross-core */

static struct runtime *two_cores_spinning(unsigned busy_poll_us, unsigned xcore_spin_us)
{
	struct runtime_config cfg;
	struct runtime *rt;

	runtime_config_init(&cfg);
	cfg.cores = 2;
	cfg.pin_cpus = 1;
	cfg.busy_poll_us = busy_poll_us;
	cfg.xcore_spin_us = xcore_spin_us;
	if (runtime_create(&rt, &cfg) < 0)
		exit(1);
	return rt;
}

static struct runtime *two_cores(unsigned busy_poll_us)
{
	return two_cores_spinning(busy_poll_us, RUNTIME_DEFAULT_XCORE_SPIN_US);
}

static struct {
	_Atomic(struct runtime_fiber *) fiber[2];
	_Atomic long ball;
	long rounds;
	uint64_t t0, t1;
} xpp;

static void xplayer(void *arg)
{
	int me = (int)(intptr_t)arg;
	struct runtime_fiber *peer;

	atomic_store(&xpp.fiber[me], runtime_fiber_self());
	while (!(peer = atomic_load(&xpp.fiber[1 - me])))
		runtime_sleep(100000);
	if (me == 0)
		xpp.t0 = runtime_now();
	for (;;) {
		long b = atomic_load(&xpp.ball);
		if (b >= 2 * xpp.rounds)
			break;
		if (b % 2 == me) {
			atomic_store(&xpp.ball, b + 1);
			runtime_fiber_unpark(peer);
		} else {
			runtime_park(-1);
		}
	}
	if (me == 0)
		xpp.t1 = runtime_now();
}

static double process_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void bench_xcore_pingpong(unsigned busy_poll_us, unsigned xcore_spin_us, const char *name)
{
	struct runtime *rt = two_cores_spinning(busy_poll_us, xcore_spin_us);
	bool spins = busy_poll_us || xcore_spin_us;

	atomic_store(&xpp.fiber[0], NULL);
	atomic_store(&xpp.fiber[1], NULL);
	atomic_store(&xpp.ball, 0);
	xpp.rounds = scaled(spins ? 1000000 : 100000);
	runtime_spawn_on(rt, 0, xplayer, (void *)0);
	runtime_spawn_on(rt, 1, xplayer, (void *)1);
	double cpu0 = process_cpu_ns();
	runtime_run(rt);
	double cpu = process_cpu_ns() - cpu0;
	runtime_destroy(rt);
	printf("%s=%.0f\n", name, (double)(xpp.t1 - xpp.t0) / (double)xpp.rounds);
	if (!busy_poll_us && xcore_spin_us)
		printf("xcore_pingpong_cpu_ns=%.0f\n", cpu / (double)xpp.rounds);
}

static struct {
	struct runtime *rt;
	long n;
	_Atomic long ran;
	uint64_t t0, last;
} xsp;

static void xspawned(void *arg)
{
	(void)arg;
	if (atomic_fetch_add(&xsp.ran, 1) + 1 == xsp.n)
		xsp.last = runtime_now();
}

static void xspawner(void *arg)
{
	(void)arg;
	xsp.t0 = runtime_now();
	for (long i = 0; i < xsp.n; i++)
		runtime_spawn_on(xsp.rt, 1, xspawned, NULL);
}

static void bench_xcore_spawn(void)
{
	xsp.rt = two_cores(0);
	xsp.n = scaled(2000000);
	runtime_spawn_on(xsp.rt, 0, xspawner, NULL);
	runtime_run(xsp.rt);
	runtime_destroy(xsp.rt);
	printf("xcore_spawn_per_s=%.0f\n", (double)xsp.n / ((double)(xsp.last - xsp.t0) / 1e9));
}

/* ------------------------------------------------------------------ sync */

static struct runtime_mutex bmu = RUNTIME_MUTEX_INIT;
static double sync_ns;

static void mutex_uncontended_main(void *arg)
{
	const long n = scaled(20000000);
	(void)arg;
	uint64_t t0 = runtime_now();
	for (long i = 0; i < n; i++) {
		runtime_mutex_lock(&bmu, -1);
		runtime_mutex_unlock(&bmu);
	}
	sync_ns = (double)(runtime_now() - t0) / (double)n;
}

#define CONTENDERS 4

static void *contender(void *arg)
{
	long n = (long)(intptr_t)arg;
	for (long i = 0; i < n; i++) {
		runtime_mutex_lock(&bmu, -1);
		runtime_yield();
		runtime_mutex_unlock(&bmu);
	}
	return NULL;
}

static void mutex_contended_main(void *arg)
{
	const long n = scaled(1000000);
	struct runtime_fiber *f[CONTENDERS];
	(void)arg;
	uint64_t t0 = runtime_now();
	for (int i = 0; i < CONTENDERS; i++)
		runtime_fiber_spawn(runtime_current(), &f[i], contender, (void *)(intptr_t)n);
	for (int i = 0; i < CONTENDERS; i++)
		runtime_fiber_join(f[i], NULL);
	sync_ns = (double)(runtime_now() - t0) / (double)(n * CONTENDERS);
}

static void sem_main(void *arg)
{
	const long n = scaled(20000000);
	struct runtime_sem *sem;
	(void)arg;
	runtime_sem_create(&sem, 1, 0);
	uint64_t t0 = runtime_now();
	for (long i = 0; i < n; i++) {
		runtime_sem_get(sem, NULL, -1);
		runtime_sem_post(sem, NULL);
	}
	sync_ns = (double)(runtime_now() - t0) / (double)n;
	runtime_sem_destroy(sem);
}

/* Any thread may try: no runtime needed. */
static double ratelimit_try(void)
{
	const long n = scaled(20000000);
	struct runtime_ratelimit *rl;

	runtime_ratelimit_create(&rl, 1e12, 1000);
	uint64_t t0 = runtime_now();
	for (long i = 0; i < n; i++)
		runtime_ratelimit_try_take(rl, 1);
	double ns = (double)(runtime_now() - t0) / (double)n;
	runtime_ratelimit_destroy(rl);
	return ns;
}

/* Keys "10.<k / 65536>.<k / 256 % 256>.<k % 256>", made before the timing
 * (16 bytes each, lengths in [15]). */
static char (*keyed_keys)[16];

static void keyed_make(unsigned nkeys)
{
	keyed_keys = malloc((size_t)nkeys * sizeof(*keyed_keys));
	for (unsigned k = 0; k < nkeys; k++)
		keyed_keys[k][15] = (char)snprintf(keyed_keys[k], 15, "10.%u.%u.%u", k >> 16,
		                                   (k >> 8) & 255, k & 255);
}

/* n keyed tries of key first, first + step, ... modulo nkeys: ns each. */
static double keyed_run(struct runtime_ratelimit_keyed *rl, long n, unsigned nkeys,
                        unsigned first, unsigned step)
{
	uint64_t t0 = runtime_now();

	for (long i = 0; i < n; i++) {
		const char *key = keyed_keys[(first + (unsigned long)i * step) % nkeys];
		runtime_ratelimit_keyed_try_take(rl, key, (size_t)key[15], 1, NULL);
	}
	return (double)(runtime_now() - t0) / (double)n;
}

static struct runtime_ratelimit_keyed *keyed_shared;
static long keyed_n;
static double keyed_ns[2];

static void *keyed_thread(void *arg)
{
	int id = (int)(intptr_t)arg;
	keyed_ns[id] = keyed_run(keyed_shared, keyed_n, 100000, (unsigned)id * 50000, 7);
	return NULL;
}

/* The keyed limiter's costs (no runtime needed). */
static void bench_ratelimit_keyed(void)
{
	struct runtime_ratelimit_keyed *rl;
	const long n = scaled(4000000);

	keyed_make(1000000);
	runtime_ratelimit_keyed_create(&rl, 1e12, 1000, 100000);
	printf("ratelimit_keyed_hot_ns=%.2f\n", keyed_run(rl, n, 1, 0, 0));
	keyed_run(rl, 100000, 100000, 0, 1); /* every key in */
	printf("ratelimit_keyed_100k_ns=%.2f\n", keyed_run(rl, n, 100000, 0, 7));
	keyed_shared = rl;
	keyed_n = n / 2;
	pthread_t th[2];
	for (intptr_t i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, keyed_thread, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	printf("ratelimit_keyed_2threads_ns=%.2f\n", (keyed_ns[0] + keyed_ns[1]) / 2);
	printf("ratelimit_keyed_evict_ns=%.2f\n", keyed_run(rl, n, 1000000, 0, 1));
	runtime_ratelimit_keyed_destroy(rl);
	free(keyed_keys);
}

static struct runtime_chan *ping, *pong;

static void echoer(void *arg)
{
	long v;
	(void)arg;
	while (runtime_chan_recv(ping, &v, -1) == 0)
		runtime_chan_send(pong, &v, -1);
}

static void pinger(void *arg)
{
	long n = (long)(intptr_t)arg, v;
	uint64_t t0 = runtime_now();
	for (long i = 0; i < n; i++) {
		runtime_chan_send(ping, &i, -1);
		runtime_chan_recv(pong, &v, -1);
	}
	sync_ns = (double)(runtime_now() - t0) / (double)n;
	runtime_chan_close(ping);
}

static void chan_pingpong(unsigned cores, long n, const char *name)
{
	struct runtime *rt = cores > 1 ? two_cores(0) : new_runtime();

	runtime_chan_create(&ping, sizeof(long), 0);
	runtime_chan_create(&pong, sizeof(long), 0);
	runtime_spawn_on(rt, cores - 1, echoer, NULL);
	runtime_spawn_on(rt, 0, pinger, (void *)(intptr_t)n);
	runtime_run(rt);
	runtime_destroy(rt);
	runtime_chan_destroy(ping);
	runtime_chan_destroy(pong);
	printf("%s=%.1f\n", name, sync_ns);
}

static void select2_main(void *arg)
{
	const long n = scaled(5000000);
	struct runtime_chan *a, *b;
	long v = 1, x;
	(void)arg;
	runtime_chan_create(&a, sizeof(long), 1);
	runtime_chan_create(&b, sizeof(long), 1);
	struct runtime_chan_op ops[2] = {
		{ a, RUNTIME_CHAN_RECV, &x, 0 },
		{ b, RUNTIME_CHAN_RECV, &x, 0 },
	};
	uint64_t t0 = runtime_now();
	for (long i = 0; i < n; i++) {
		runtime_chan_try_send(i & 1 ? a : b, &v);
		runtime_chan_select(ops, 2, -1);
	}
	sync_ns = (double)(runtime_now() - t0) / (double)n;
	runtime_chan_destroy(a);
	runtime_chan_destroy(b);
}

static void bench_sync(void)
{
	run_one(mutex_uncontended_main, NULL);
	printf("mutex_uncontended_ns=%.2f\n", sync_ns);
	run_one(mutex_contended_main, NULL);
	printf("mutex_contended_ns=%.1f\n", sync_ns);
	run_one(sem_main, NULL);
	printf("sem_get_post_ns=%.2f\n", sync_ns);
	printf("ratelimit_try_ns=%.2f\n", ratelimit_try());
	bench_ratelimit_keyed();
	chan_pingpong(1, scaled(2000000), "chan_pingpong_ns");
	run_one(select2_main, NULL);
	printf("select2_ns=%.1f\n", sync_ns);
}

/* --------------------------------------------------------------- offload */

static void *trivial(void *arg)
{
	return arg;
}

static struct {
	long per_fiber;
	_Atomic long done;
	uint64_t t0, t1;
} ob;

static void offloader(void *arg)
{
	(void)arg;
	for (long i = 0; i < ob.per_fiber; i++)
		runtime_offload(trivial, NULL, NULL, NULL);
	if (atomic_fetch_add(&ob.done, 1) + 1 == 16 || ob.per_fiber > 1000000)
		ob.t1 = runtime_now();
}

static void offload_run(unsigned fibers, long per_fiber)
{
	struct runtime_config cfg;
	struct runtime *rt;

	runtime_config_init(&cfg);
	cfg.offload_min_threads = cfg.offload_max_threads = 2;
	if (runtime_create(&rt, &cfg) < 0)
		exit(1);
	ob.per_fiber = per_fiber;
	atomic_store(&ob.done, 0);
	for (unsigned i = 0; i < fibers; i++)
		runtime_spawn(rt, offloader, NULL);
	ob.t0 = runtime_now();
	runtime_run(rt);
	ob.t1 = runtime_now();
	runtime_destroy(rt);
}

static void bench_offload(void)
{
	long n = scaled(200000);

	offload_run(1, n);
	printf("offload_roundtrip_ns=%.0f\n", (double)(ob.t1 - ob.t0) / (double)n);
	offload_run(16, n / 16 * 4);
	printf("offload_per_s=%.0f\n", (double)(n / 16 * 4 * 16) / ((double)(ob.t1 - ob.t0) / 1e9));
}

/* ------------------------------------------------------------------ read */

ssize_t preload_read(int fd, void *buf, size_t len);

static ssize_t (*read_fn)(int, void *, size_t);
static double read_ns;

/* Every 16 KiB of 1-byte reads, 16 KiB written ahead with write(2). */
static void read_main(void *arg)
{
	static char chunk[16384];
	long n = scaled(400000) / (long)sizeof(chunk) * (long)sizeof(chunk);
	int sv[2];
	char c;

	(void)arg;
	if (n == 0)
		n = sizeof(chunk);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		exit(1);
	uint64_t t0 = runtime_now();
	for (long done = 0; done < n; done += (long)sizeof(chunk)) {
		if (write(sv[1], chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
			exit(1);
		for (size_t i = 0; i < sizeof(chunk); i++)
			if (read_fn(sv[0], &c, 1) != 1)
				exit(1);
	}
	read_ns = (double)(runtime_now() - t0) / (double)n;
	close(sv[0]);
	close(sv[1]);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Short rounds, interleaved and alternating which goes first, so that
 * both see the same machine; medians. */
static void bench_read(void)
{
	enum { ROUNDS = 9 };
	double own[ROUNDS], hooked[ROUNDS];

	for (int round = 0; round < ROUNDS; round++) {
		for (int k = 0; k < 2; k++) {
			bool first_own = round % 2 == 0;
			bool own_now = (k == 0) == first_own;
			read_fn = own_now ? runtime_read : preload_read;
			run_one(read_main, NULL);
			(own_now ? own : hooked)[round] = read_ns;
		}
	}
	qsort(own, ROUNDS, sizeof(double), cmp_double);
	qsort(hooked, ROUNDS, sizeof(double), cmp_double);
	printf("read_ns=%.1f\n", own[ROUNDS / 2]);
	printf("hooked_read_ns=%.1f\n", hooked[ROUNDS / 2]);
}

/* ---------------------------------------------------------------- bufio */

#define LINE 64

static bool line_buffered;
static double line_ns;

/* One 64-byte line through the stream, as the floor: recv until 64. */
static void line_raw(struct runtime_stream *s)
{
	char buf[LINE];

	for (size_t got = 0; got < LINE;) {
		ssize_t n = runtime_stream_recv(s, buf + got, LINE - got);
		if (n <= 0)
			exit(1);
		got += (size_t)n;
	}
}

static void line_main(void *arg)
{
	static char chunk[16384];
	const long per_chunk = sizeof(chunk) / LINE;
	long lines = scaled(4000000) / per_chunk * per_chunk;
	struct runtime_stream *s;
	struct runtime_transport t;
	struct runtime_reader *r;
	const char *line;
	uint64_t spent = 0;
	int sv[2];

	(void)arg;
	if (lines == 0)
		lines = per_chunk;
	for (size_t i = 0; i < sizeof(chunk); i++)
		chunk[i] = i % LINE == LINE - 1 ? '\n' : 'x';
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 || runtime_stream_open(&s, sv[0]) < 0 ||
	    runtime_transport_stream(&t, s) < 0 || runtime_reader_create(&r, &t, 4096) < 0)
		exit(1);
	for (long done = 0; done < lines; done += per_chunk) {
		if (write(sv[1], chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
			exit(1);
		uint64_t t0 = runtime_now();
		for (long i = 0; i < per_chunk; i++) {
			if (!line_buffered)
				line_raw(s);
			else if (runtime_reader_read_line(r, 4096, &line) != LINE)
				exit(1);
		}
		spent += runtime_now() - t0;
	}
	line_ns = (double)spent / (double)lines;
	runtime_reader_destroy(r);
	runtime_stream_close(s);
	close(sv[0]);
	close(sv[1]);
}

static void bench_bufio(void)
{
	enum { ROUNDS = 9 };
	double raw[ROUNDS], buffered[ROUNDS];

	for (int round = 0; round < ROUNDS; round++) {
		for (int k = 0; k < 2; k++) {
			line_buffered = (k == 0) == (round % 2 == 0);
			run_one(line_main, NULL);
			(line_buffered ? buffered : raw)[round] = line_ns;
		}
	}
	qsort(raw, ROUNDS, sizeof(double), cmp_double);
	qsort(buffered, ROUNDS, sizeof(double), cmp_double);
	printf("stream_recv_line_ns=%.1f\n", raw[ROUNDS / 2]);
	printf("bufio_line_ns=%.1f\n", buffered[ROUNDS / 2]);
	printf("bufio_line_ratio=%.2f\n", buffered[ROUNDS / 2] / raw[ROUNDS / 2]);
}

/* ----------------------------------------------------------------- copy */

#define COPY_BLOCK (1u << 20)

static struct {
	size_t total, chunk;
	unsigned flags;
	int in[2], out[2];  /* feeder in[0] -> in[1] copy out[0] -> out[1] sink */
	double mb_s, cpu_ns_per_mib;
} cb;

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void connect_pair(int fd[2])
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int l = runtime_tcp_listen("127.0.0.1", 0, 4, 0);

	if (l < 0 || getsockname(l, (struct sockaddr *)&a, &len) < 0)
		exit(1);
	fd[0] = runtime_tcp_connect("127.0.0.1", ntohs(a.sin_port));
	fd[1] = runtime_accept(l, NULL, NULL, SOCK_CLOEXEC);
	if (fd[0] < 0 || fd[1] < 0)
		exit(1);
	close(l);
}

static void *copy_feeder(void *arg)
{
	static char block[COPY_BLOCK];

	(void)arg;
	for (size_t off = 0; off < cb.total; off += COPY_BLOCK)
		if (runtime_send_all(cb.in[0], block, COPY_BLOCK, NULL) < 0)
			exit(1);
	runtime_sock_shutdown(cb.in[0], SHUT_WR);
	return NULL;
}

static void *copy_sink(void *arg)
{
	static char block[COPY_BLOCK];
	size_t got = 0;
	ssize_t n;

	(void)arg;
	while ((n = runtime_recv(cb.out[1], block, COPY_BLOCK, 0)) > 0)
		got += (size_t)n;
	if (got != cb.total)
		exit(1);
	return NULL;
}

static void copy_main(void *arg)
{
	struct runtime_transport src, dst;
	struct runtime_fiber *feeder, *sink;

	(void)arg;
	connect_pair(cb.in);
	connect_pair(cb.out);
	runtime_transport_fd(&src, cb.in[1]);
	runtime_transport_fd(&dst, cb.out[0]);
	uint64_t t0 = runtime_now(), c0 = cpu_ns();
	runtime_fiber_spawn(runtime_current(), &feeder, copy_feeder, NULL);
	runtime_fiber_spawn(runtime_current(), &sink, copy_sink, NULL);
	if (runtime_copy(&dst, &src, cb.chunk, cb.flags, NULL) != (ssize_t)cb.total)
		exit(1);
	runtime_fiber_join(feeder, NULL);
	runtime_fiber_join(sink, NULL);
	double mib = (double)cb.total / (1 << 20);
	cb.mb_s = mib / ((double)(runtime_now() - t0) / 1e9);
	cb.cpu_ns_per_mib = (double)(cpu_ns() - c0) / mib;
	for (int i = 0; i < 2; i++) {
		close(cb.in[i]);
		close(cb.out[i]);
	}
}

static void copy_case(size_t chunk, const char *name)
{
	enum { ROUNDS = 5 };
	double mb_s[2][ROUNDS], cpu[2][ROUNDS]; /* [0]: splice, [1]: buffer */

	cb.total = (size_t)scaled(256) * COPY_BLOCK;
	cb.chunk = chunk;
	for (int round = 0; round < ROUNDS; round++) {
		for (int k = 0; k < 2; k++) {
			int buffer = (k == 0) == (round % 2 == 0);
			cb.flags = buffer ? RUNTIME_COPY_NO_SPLICE : 0;
			run_one(copy_main, NULL);
			mb_s[buffer][round] = cb.mb_s;
			cpu[buffer][round] = cb.cpu_ns_per_mib;
		}
	}
	for (int i = 0; i < 2; i++) {
		qsort(mb_s[i], ROUNDS, sizeof(double), cmp_double);
		qsort(cpu[i], ROUNDS, sizeof(double), cmp_double);
	}
	printf("copy_splice_%s_mb_s=%.0f\n", name, mb_s[0][ROUNDS / 2]);
	printf("copy_buffer_%s_mb_s=%.0f\n", name, mb_s[1][ROUNDS / 2]);
	printf("copy_splice_%s_ratio=%.2f\n", name, mb_s[0][ROUNDS / 2] / mb_s[1][ROUNDS / 2]);
	printf("copy_splice_%s_cpu_ns_per_mib=%.0f\n", name, cpu[0][ROUNDS / 2]);
	printf("copy_buffer_%s_cpu_ns_per_mib=%.0f\n", name, cpu[1][ROUNDS / 2]);
}

static void bench_copy(void)
{
	copy_case(64 * 1024, "64k");
	copy_case(1 << 20, "1m");
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;

	quick = getenv("MICRO_QUICK") != NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (only && strcmp(only, "sleep1m") == 0) { /* alone: peak RSS is the process's */
		bench_sleep_waves();
		return 0;
	}
#define WANT(name) (!only || strstr(only, name))
	if (WANT("switch")) {
		bench_switch(false);
		bench_switch(true);
	}
	if (WANT("yield")) {
		bench_yield(false);
		bench_yield(true);
		bench_yield_alone();
	}
	if (WANT("spawn"))
		bench_spawn_join();
	if (WANT("timer")) {
		bench_timers();
		bench_kernel_timers();
		bench_short_sleeps(RUNTIME_ENGINE_AUTO, "sleep_20us_ns");
		bench_short_sleeps(RUNTIME_ENGINE_EPOLL, "sleep_20us_epoll_ns");
	}
	if (WANT("park"))
		bench_parked();
	if (WANT("sleep"))
		bench_sleepers();
	if (WANT("sync"))
		bench_sync();
	if (WANT("offload"))
		bench_offload();
	if (WANT("read"))
		bench_read();
	if (WANT("bufio"))
		bench_bufio();
	if (WANT("copy"))
		bench_copy();
	if (WANT("xcore")) {
		bench_xcore_pingpong(0, RUNTIME_DEFAULT_XCORE_SPIN_US, "xcore_pingpong_ns");
		bench_xcore_pingpong(0, 0, "xcore_pingpong_asleep_ns");
		bench_xcore_pingpong(50, 0, "xcore_pingpong_spin50us_ns");
		bench_xcore_spawn();
		chan_pingpong(2, scaled(100000), "chan_xcore_pingpong_ns");
	}
	return 0;
}
