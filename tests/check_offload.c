/* SPDX-License-Identifier: MIT */
/*
 * check_offload.c - the offload pool: results come back right (1M
 * offloads), the pool grows to its maximum under a burst and shrinks back
 * to its minimum after the idle time, each queue-full policy (block,
 * reject, caller-runs), its stats, cancellation while queued (the work
 * never runs) and while running (the caller returns at once, the cleanup
 * gets the result), shutdown with queued and running work (every pool
 * thread gone when runtime_run returns), and what is built on it: name
 * resolution (localhost, and a name that does not exist), TCP connect by
 * name, ftruncate and fstat.
 */
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct runtime_config pool_cfg(unsigned min, unsigned max, unsigned queue,
                                      enum runtime_offload_policy policy)
{
	struct runtime_config cfg;

	runtime_config_init(&cfg);
	cfg.offload_min_threads = min;
	cfg.offload_max_threads = max;
	cfg.offload_queue_max = queue;
	cfg.offload_policy = policy;
	return cfg;
}

/* Offload pool threads of this process now (they name themselves). */
static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;

	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));) {
		char path[300], comm[32] = "";
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f))
			n += strncmp(comm, "rt-offload", 10) == 0;
		if (f)
			fclose(f);
	}
	closedir(d);
	return n;
}

/* Once runtime_destroy has joined the pool, no pool thread is left. A
 * joined thread may still be listed for a moment (pthread_join returns at
 * the wake on its tid, before the kernel reaps it: under qemu-user, whose
 * thread exit makes that wake itself, a good while): looked at until it
 * has gone, 10 s at most. */
static int threads_left(void)
{
	int n = threads();

	for (int i = 0; n && i < 10000; i++) {
		usleep(1000);
		n = threads();
	}
	return n;
}

/* Wait (with a generous bound) until the pool's stats satisfy cond. */
#define WAIT_FOR(rt, st, cond)                                                  \
	do {                                                                    \
		for (int waited_ = 0;; waited_++) {                             \
			runtime_offload_stats((rt), &(st));                     \
			if (cond)                                               \
				break;                                          \
			ck_assert_msg(waited_ < 20000, "timed out waiting for " #cond); \
			runtime_sleep(MS);                                      \
		}                                                               \
	} while (0)

/* -------------------------------------------------------------- results */

static void *square(void *arg)
{
	uintptr_t v = (uintptr_t)arg;
	return (void *)(v * v);
}

#ifdef RUNTIME_TSAN
#define ROUNDS 20000
#else
#define ROUNDS 1000000
#endif
#define CALLERS 16

static _Atomic long wrong, done;

static void caller(void *p)
{
	uintptr_t first = (uintptr_t)p;
	for (uintptr_t i = first; i < ROUNDS; i += CALLERS) {
		void *r = NULL;
		if (runtime_offload(square, (void *)(i & 0xffff), &r, NULL) != 0 ||
		    (uintptr_t)r != (i & 0xffff) * (i & 0xffff))
			atomic_fetch_add(&wrong, 1);
		atomic_fetch_add(&done, 1);
	}
}

START_TEST(test_offload_a_million_results)
{
	struct runtime_config cfg = pool_cfg(2, 2, 64, RUNTIME_OFFLOAD_BLOCK);
	struct runtime *rt;

	cfg.cores = 2;
	atomic_store(&wrong, 0);
	atomic_store(&done, 0);
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	for (uintptr_t i = 0; i < CALLERS; i++)
		ck_assert_int_eq(runtime_spawn(rt, caller, (void *)i), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	struct runtime_offload_stats st;
	runtime_offload_stats(rt, &st);
	ck_assert_uint_eq(st.completed, ROUNDS);
	ck_assert_uint_eq(st.alive, 0);
	ck_assert_uint_eq(st.largest, 2);
	runtime_destroy(rt);
	ck_assert_int_eq(atomic_load(&done), ROUNDS);
	ck_assert_int_eq(atomic_load(&wrong), 0);
	ck_assert_int_eq(threads_left(), 0); /* every pool thread joined */
}
END_TEST

/* ------------------------------------------------------- grow and trim */

static void *nap_ms(void *arg)
{
	usleep((useconds_t)(uintptr_t)arg * 1000);
	return arg;
}

static void napper(void *p)
{
	ck_assert_int_eq(runtime_offload(nap_ms, p, NULL, NULL), 0);
}

static void grow_trim_main(void *p)
{
	struct runtime *rt = runtime_current();
	struct runtime_offload_stats st;
	(void)p;

	WAIT_FOR(rt, st, st.alive == 1 && st.idle == 1); /* the minimum */
	for (int i = 0; i < 12; i++)
		ck_assert_int_eq(runtime_spawn(rt, napper, (void *)(uintptr_t)50), 0);
	/* Grew to the maximum, no further (threads name themselves as they
	 * start, just after they are counted). */
	WAIT_FOR(rt, st, st.alive == 4 && threads() == 4);
	WAIT_FOR(rt, st, st.completed == 12);
	ck_assert_uint_eq(st.largest, 4);
	/* Idle past offload_idle_ms: back to the minimum. */
	WAIT_FOR(rt, st, st.alive == 1 && threads() == 1);
	ck_assert_uint_eq(st.largest, 4);
	ck_assert_uint_eq(st.queued, 0);
}

START_TEST(test_offload_grows_to_max_and_trims_to_min)
{
	struct runtime_config cfg = pool_cfg(1, 4, 64, RUNTIME_OFFLOAD_BLOCK);

	cfg.offload_idle_ms = 100;
	ck_assert_int_eq(run_fiber(&cfg, grow_trim_main, NULL), 0);
}
END_TEST

/* ---------------------------------------------------------------- policies */

static _Atomic bool gate;
static _Atomic int ran_on_core, ran_count;

/* Holds its pool thread until the gate opens. */
static void *held(void *arg)
{
	while (!atomic_load(&gate))
		usleep(1000);
	atomic_fetch_add(&ran_count, 1);
	return arg;
}

/* Notes where it ran (a core thread, under caller-runs). */
static void *quick(void *arg)
{
	if (runtime_core_index() >= 0)
		atomic_fetch_add(&ran_on_core, 1);
	atomic_fetch_add(&ran_count, 1);
	return arg;
}

/* Offloads held (the third caller: quick) with its argument. */
static void *holder(void *p)
{
	void *r = NULL;
	int rc = runtime_offload((intptr_t)p == 3 ? quick : held, p, &r, NULL);
	return (void *)(intptr_t)(rc ? rc : (intptr_t)r);
}

/* One thread, a queue of one: the first job runs (held), the second
 * waits in the queue, and the third finds the queue full. */
static void policy_main(void *p)
{
	enum runtime_offload_policy policy = (enum runtime_offload_policy)(intptr_t)p;
	struct runtime *rt = runtime_current();
	struct runtime_offload_stats st;
	struct runtime_fiber *a, *b, *c;

	a = start(holder, (void *)1);
	WAIT_FOR(rt, st, st.alive == 1 && st.queued == 0 && st.idle == 0);
	b = start(holder, (void *)2);
	WAIT_FOR(rt, st, st.queued == 1);
	c = start(holder, (void *)3);
	runtime_sleep(20 * MS);
	switch (policy) {
	case RUNTIME_OFFLOAD_REJECT:
		ck_assert_int_eq(join(c), -EAGAIN);
		runtime_offload_stats(rt, &st);
		ck_assert_uint_eq(st.rejected, 1);
		atomic_store(&gate, true);
		break;
	case RUNTIME_OFFLOAD_BLOCK:
		ck_assert_int_eq(atomic_load(&ran_count), 0); /* c waits for room */
		atomic_store(&gate, true);
		ck_assert_int_eq(join(c), 3);
		break;
	case RUNTIME_OFFLOAD_CALLER_RUNS:
		ck_assert_int_eq(join(c), 3); /* ran at once, on the core thread */
		ck_assert_int_eq(atomic_load(&ran_on_core), 1);
		ck_assert_int_eq(atomic_load(&ran_count), 1);
		atomic_store(&gate, true);
		break;
	}
	ck_assert_int_eq(join(a), 1);
	ck_assert_int_eq(join(b), 2);
	runtime_offload_stats(rt, &st);
	ck_assert_uint_eq(st.completed, policy == RUNTIME_OFFLOAD_BLOCK ? 3 : 2);
	ck_assert_int_eq(atomic_load(&ran_on_core), policy == RUNTIME_OFFLOAD_CALLER_RUNS);
	ck_assert_uint_eq(st.queued, 0);
}

START_TEST(test_offload_queue_full_policies)
{
	struct runtime_config cfg = pool_cfg(0, 1, 1, (enum runtime_offload_policy)_i);

	atomic_store(&gate, false);
	atomic_store(&ran_on_core, 0);
	atomic_store(&ran_count, 0);
	ck_assert_int_eq(run_fiber(&cfg, policy_main, (void *)(intptr_t)_i), 0);
}
END_TEST

/* ------------------------------------------------------------ cancellation */

static _Atomic int cleanups, cleanup_ran;
static _Atomic intptr_t cleanup_result;
static _Atomic bool cleanup_on_core;

static void note_cleanup(void *arg, void *result, int ran)
{
	(void)arg;
	atomic_fetch_add(&cleanups, 1);
	atomic_fetch_add(&cleanup_ran, ran);
	atomic_store(&cleanup_result, (intptr_t)result);
	atomic_store(&cleanup_on_core, runtime_core_index() >= 0);
}

static void *never_runs(void *arg)
{
	atomic_fetch_add(&ran_count, 100);
	return arg;
}

static void *give_up_holder(void *p)
{
	return (void *)(intptr_t)runtime_offload(held, p, NULL, note_cleanup);
}

static void *give_up_timed(void *p)
{
	runtime_deadline_set(runtime_now() + 10 * MS);
	return (void *)(intptr_t)runtime_offload(held, p, NULL, note_cleanup);
}

static void *give_up_queued(void *p)
{
	return (void *)(intptr_t)runtime_offload(never_runs, p, NULL, note_cleanup);
}

static void cancel_main(void *p)
{
	struct runtime *rt = runtime_current();
	struct runtime_offload_stats st;
	struct runtime_fiber *running, *queued, *timed;
	(void)p;

	running = start(give_up_holder, (void *)7);
	WAIT_FOR(rt, st, st.alive == 1 && st.queued == 0 && st.idle == 0);
	queued = start(give_up_queued, (void *)8);
	WAIT_FOR(rt, st, st.queued == 1);
	/* Queued: taken back, never runs; the cleanup gets arg, ran 0. */
	ck_assert_int_eq(runtime_fiber_cancel(queued), 0);
	ck_assert_int_eq(join(queued), -ECANCELED);
	ck_assert_int_eq(atomic_load(&cleanups), 1);
	ck_assert_int_eq(atomic_load(&cleanup_ran), 0);
	runtime_offload_stats(rt, &st);
	ck_assert_uint_eq(st.queued, 0);
	/* Running: the caller returns at once; the cleanup comes when the
	 * function returns, with its result, on the pool thread. */
	ck_assert_int_eq(runtime_fiber_cancel(running), 0);
	ck_assert_int_eq(join(running), -ECANCELED);
	ck_assert_int_eq(atomic_load(&cleanups), 1);
	atomic_store(&gate, true);
	WAIT_FOR(rt, st, atomic_load(&cleanups) == 2);
	ck_assert_int_eq(atomic_load(&cleanup_ran), 1);
	ck_assert_int_eq(atomic_load(&cleanup_result), 7);
	ck_assert(!atomic_load(&cleanup_on_core));
	/* A deadline gives up the same way. */
	atomic_store(&gate, false);
	timed = start(give_up_timed, (void *)9);
	ck_assert_int_eq(join(timed), -ETIMEDOUT);
	atomic_store(&gate, true);
	WAIT_FOR(rt, st, atomic_load(&cleanups) == 3);
	ck_assert_int_eq(atomic_load(&ran_count), 2); /* never_runs never ran */
}

START_TEST(test_offload_cancel_while_queued_and_while_running)
{
	struct runtime_config cfg = pool_cfg(0, 1, 4, RUNTIME_OFFLOAD_BLOCK);

	atomic_store(&gate, false);
	atomic_store(&ran_count, 0);
	atomic_store(&cleanups, 0);
	atomic_store(&cleanup_ran, 0);
	ck_assert_int_eq(run_fiber(&cfg, cancel_main, NULL), 0);
}
END_TEST

/* A shutdown drops queued work through the cleanup, waits for running
 * work, and every pool thread is gone when runtime_run returns. The two
 * running jobs are held until the four queued ones have been dropped, so
 * the outcome never depends on how fast this machine is. */
static _Atomic int running, refused;

static void *slow(void *arg)
{
	atomic_fetch_add(&running, 1);
	while (!atomic_load(&gate))
		usleep(1000);
	atomic_fetch_add(&ran_count, 1);
	return arg;
}

/* A caller that reaches runtime_offload after the shutdown began (before
 * the cancel reaches it) is refused with -ESHUTDOWN and keeps its arg: no
 * cleanup. Under a slow build the core may run some callers that late. */
static void slow_caller(void *p)
{
	if (runtime_offload(slow, p, NULL, note_cleanup) == -ESHUTDOWN)
		atomic_fetch_add(&refused, 1);
}

/* Waits (bounded, 20 s) until cleanups and refusals come to n. */
static bool wait_dropped(int n)
{
	for (int i = 0; i < 20000 && atomic_load(&cleanups) + atomic_load(&refused) < n; i++)
		usleep(1000);
	return atomic_load(&cleanups) + atomic_load(&refused) >= n;
}

/* Waits (bounded, 20 s) until *counter reaches n. */
static bool wait_count(_Atomic int *counter, int n)
{
	for (int i = 0; i < 20000 && atomic_load(counter) < n; i++)
		usleep(1000);
	return atomic_load(counter) >= n;
}

static void *shutdown_soon(void *p)
{
	bool ok = wait_count(&running, 2);
	runtime_shutdown(p);
	ok = wait_dropped(4) && ok;
	atomic_store(&gate, true);
	return (void *)(intptr_t)ok;
}

START_TEST(test_offload_shutdown_drops_queued_waits_for_running)
{
	struct runtime_config cfg = pool_cfg(2, 2, 16, RUNTIME_OFFLOAD_BLOCK);
	struct runtime *rt;
	pthread_t th;
	void *waited;

	atomic_store(&gate, false);
	atomic_store(&running, 0);
	atomic_store(&refused, 0);
	atomic_store(&ran_count, 0);
	atomic_store(&cleanups, 0);
	atomic_store(&cleanup_ran, 0);
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(runtime_spawn(rt, slow_caller, NULL), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, shutdown_soon, rt), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	pthread_join(th, &waited);
	ck_assert_msg(waited, "two jobs never ran, or four were never dropped");
	/* Two were running (waited for, their results to the cleanup), four
	 * were queued (dropped: never ran, cleanup with ran 0) or refused. */
	ck_assert_int_eq(atomic_load(&ran_count), 2);
	ck_assert_int_eq(atomic_load(&cleanups) + atomic_load(&refused), 6);
	ck_assert_int_eq(atomic_load(&cleanup_ran), 2);
	ck_assert_int_eq(threads_left(), 0); /* every pool thread joined */
	runtime_destroy(rt);
}
END_TEST

/* ---------------------------------------------------------- built on it */

struct names {
	int local_rc, bad_rc, connect_rc;
	bool local_is_loopback;
	uint16_t port;
	int trunc_rc, stat_rc;
	off_t size;
};

static void names_main(void *p)
{
	struct names *s = p;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
	char path[] = "/tmp/check_offload.XXXXXX";
	struct stat st;

	s->local_rc = runtime_getaddrinfo("localhost", "80", &hints, &res);
	if (s->local_rc == 0) {
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
			if (ai->ai_family == AF_INET &&
			    ((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr == htonl(INADDR_LOOPBACK))
				s->local_is_loopback = true;
		freeaddrinfo(res);
	}
	s->bad_rc = runtime_getaddrinfo("no-such-host.invalid", NULL, &hints, &res);
	int l = runtime_tcp_listen("127.0.0.1", 0, 0, 0);
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	getsockname(l, (struct sockaddr *)&a, &len);
	s->connect_rc = runtime_tcp_connect("localhost", ntohs(a.sin_port));
	if (s->connect_rc >= 0)
		runtime_close(s->connect_rc);
	runtime_close(l);
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	s->trunc_rc = runtime_ftruncate(fd, 12345);
	s->stat_rc = runtime_fstat(fd, &st);
	s->size = st.st_size;
	runtime_close(fd);
}

START_TEST(test_offload_names_and_file_calls)
{
	struct names s = { -999, -999, -999, false, 0, -999, -999, 0 };

	ck_assert_int_eq(run_fiber(NULL, names_main, &s), 0);
	ck_assert_int_eq(s.local_rc, 0);
	ck_assert(s.local_is_loopback);
	/* A clear error: no such name, or no resolver to ask (no network). */
	ck_assert_msg(s.bad_rc == -ENOENT || s.bad_rc == -EAGAIN, "got %d", s.bad_rc);
	ck_assert_int_ge(s.connect_rc, 0);
	ck_assert_int_eq(s.trunc_rc, 0);
	ck_assert_int_eq(s.stat_rc, 0);
	ck_assert_int_eq(s.size, 12345);
	struct addrinfo *res;
	ck_assert_int_eq(runtime_getaddrinfo("localhost", NULL, NULL, &res), -EPERM);
}
END_TEST

START_TEST(test_offload_bad_config_and_context)
{
	struct runtime_config cfg = pool_cfg(3, 2, 0, RUNTIME_OFFLOAD_BLOCK);
	struct runtime *rt;

	ck_assert_int_eq(runtime_create(&rt, &cfg), -EINVAL); /* min > max */
	cfg = pool_cfg(0, 0, 0, RUNTIME_OFFLOAD_BLOCK);
	ck_assert_int_eq(runtime_create(&rt, &cfg), -EINVAL);
	cfg = pool_cfg(0, 1, 0, (enum runtime_offload_policy)7);
	ck_assert_int_eq(runtime_create(&rt, &cfg), -EINVAL);
	ck_assert_int_eq(runtime_offload(square, NULL, NULL, NULL), -EPERM);
}
END_TEST

static Suite *offload_suite(void)
{
	Suite *s = suite_create("offload");
	TCase *tc = tcase_create("pool");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_offload_a_million_results);
	tcase_add_test(tc, test_offload_grows_to_max_and_trims_to_min);
	tcase_add_loop_test(tc, test_offload_queue_full_policies, RUNTIME_OFFLOAD_BLOCK,
	                    RUNTIME_OFFLOAD_CALLER_RUNS + 1);
	tcase_add_test(tc, test_offload_cancel_while_queued_and_while_running);
	tcase_add_test(tc, test_offload_shutdown_drops_queued_waits_for_running);
	tcase_add_test(tc, test_offload_names_and_file_calls);
	tcase_add_test(tc, test_offload_bad_config_and_context);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(offload_suite)
