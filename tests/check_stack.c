/* SPDX-License-Identifier: MIT */
/*
 * check_stack.c - fiber stacks: a child whose fiber overflows its stack
 * hits the guard page and dies printing "fiber stack overflow" with the
 * fiber's id and stack size; a fiber may use nearly all of its configured
 * stack; stacks are reused from the cache; a burst's stacks give their
 * pages back once a period goes by without them, and a burst that follows
 * within the period reuses them without a page fault; the guard adds no
 * VMA per stack where the kernel has MADV_GUARD_INSTALL.
 */
#include "testutil.h"

#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------- overflow */

static volatile unsigned sink;

/* Recurses until sink says stop, which it never does. */
__attribute__((noinline)) static unsigned recurse(unsigned depth)
{
	volatile char frame[512];
	frame[0] = (char)depth;
	sink += frame[0];
	if (sink == 0xdeadbeef)
		return depth;
	return recurse(depth + 1) + frame[0];
}

static void overflow(void *p)
{
	(void)p;
	sink = recurse(0);
}

static void overflow_child(size_t stack_size)
{
	struct runtime_config cfg;
	struct runtime *rt;

	runtime_config_init(&cfg);
	cfg.stack_size = stack_size;
	if (runtime_create(&rt, &cfg) < 0)
		_exit(2);
	runtime_spawn(rt, overflow, NULL);
	runtime_run(rt);
	_exit(3); /* unreachable if the guard works */
}

/* Run child() in a forked process; its stderr in out (NUL-terminated) and
 * its wait status as the result. */
static int run_child(void (*child)(size_t), size_t arg, char *out, size_t len)
{
	int pipefd[2], status;

	ck_assert_int_eq(pipe(pipefd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(pipefd[0]);
		dup2(pipefd[1], STDERR_FILENO);
		child(arg);
		_exit(99);
	}
	close(pipefd[1]);
	ssize_t n = 0, r;
	while ((r = read(pipefd[0], out + n, len - 1 - (size_t)n)) > 0)
		n += r;
	out[n > 0 ? n : 0] = '\0';
	close(pipefd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

START_TEST(test_stack_overflow_is_reported)
{
	const size_t size = 64 * 1024;
	char out[512];
	char expect[128];

	int status = run_child(overflow_child, size, out, sizeof(out));
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
	              "child did not abort (status %#x), stderr: %s", status, out);
	snprintf(expect, sizeof(expect), "fiber stack overflow: fiber 1, stack size %zu bytes", size);
	ck_assert_msg(strstr(out, expect), "stderr was: %s", out);
}
END_TEST

/* ------------------------------------------------------- using a stack */

static void use_most_of_stack(void *p)
{
	volatile char big[96 * 1024];
	memset((char *)big, 0x5a, sizeof(big));
	*(int *)p = big[0] + big[sizeof(big) - 1];
}

START_TEST(test_stack_fiber_uses_configured_size)
{
	struct runtime_config cfg;
	int v = 0;

	runtime_config_init(&cfg);
	cfg.stack_size = 128 * 1024;
	ck_assert_int_eq(run_fiber(&cfg, use_most_of_stack, &v), 0);
	ck_assert_int_eq(v, 2 * 0x5a);
}
END_TEST

/* ------------------------------------------------------------ reuse */

static void *where_am_i(void *p)
{
	char here;
	(void)p;
	return (void *)((uintptr_t)&here & ~(uintptr_t)0xfff);
}

/* 1000 fibers spawned and joined one after another run on one stack (the
 * last freed is the first reused): their frames are on the same page. */
static void spawn_join_serially(void *p)
{
	int *distinct = p;
	void *first = NULL;
	struct runtime_fiber *f;

	for (int i = 0; i < 1000; i++) {
		void *page;
		ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &f, where_am_i, NULL), 0);
		ck_assert_int_eq(runtime_fiber_join(f, &page), 0);
		if (!first)
			first = page;
		*distinct += page != first;
	}
}

START_TEST(test_stack_cache_reuses_stacks)
{
	int other_pages = 0;
	ck_assert_int_eq(run_fiber(NULL, spawn_join_serially, &other_pages), 0);
	ck_assert_int_eq(other_pages, 0);
}
END_TEST

/* ------------------------------------------------------------- decay */

#define BURST 600
#define TOUCHED (32 * 1024)

static _Atomic unsigned deep_ended; /* deep_sleepers that have ended */

/* Touch TOUCHED bytes of this fiber's stack, then wait a little. */
static void deep_sleeper(void *p)
{
	volatile char deep[TOUCHED];

	(void)p;
	for (size_t i = 0; i < sizeof(deep); i += 1024)
		deep[i] = (char)i;
	runtime_sleep(20 * MS);
	atomic_fetch_add(&deep_ended, 1);
}

/* Until every deep_sleeper spawned so far (n) has ended, and so given its
 * stack back: a fixed sleep was too short on a loaded machine, where the
 * second burst then found first-burst fibers still holding their stacks
 * and faulted in new ones. 10 s is far above what a loaded machine takes
 * (under 0.2 s at load 4 on 2 CPUs); a fiber that never ends fails here. */
static void wait_deep_ended(unsigned n)
{
	uint64_t until = runtime_now() + 10000 * MS;

	while (atomic_load(&deep_ended) < n && runtime_now() < until)
		runtime_sleep(1 * MS);
	ck_assert_uint_eq(atomic_load(&deep_ended), n);
}

static void burst_then_wait(void *p)
{
	long *kb = p;

	atomic_store(&deep_ended, 0);
	for (int i = 0; i < BURST; i++)
		ck_assert_int_eq(runtime_spawn(runtime_current(), deep_sleeper, NULL), 0);
	wait_deep_ended(BURST); /* their stacks are in the hot cache */
	kb[0] = resident_kib();
	runtime_sleep(2500 * MS); /* two decay periods */
	kb[1] = resident_kib();
}

/* A burst's stacks, cached hot, give their pages back once a period has
 * gone by without them: the resident set falls by most of BURST x
 * TOUCHED (19 MiB). */
START_TEST(test_stack_cache_decays_after_a_burst)
{
	long kb[2];

	ck_assert_int_eq(run_fiber(NULL, burst_then_wait, kb), 0);
	fprintf(stderr, "note: resident %ld KiB after the burst, %ld KiB after the decay\n",
	        kb[0], kb[1]);
	ck_assert_int_ge(kb[0] - kb[1], BURST * (TOUCHED / 1024) / 2);
}
END_TEST

#define BURST2 2000 /* past the stack cache, default or the old 1024 */

static uint64_t burst_ns[2];

static void two_bursts(void *p)
{
	long *faults = p;

	atomic_store(&deep_ended, 0);
	for (int round = 0; round < 2; round++) {
		/* This thread's: the core's, where the bursts' fibers run
		 * (spawned from a fiber, they stay on its core) and touch their
		 * stacks; no other thread of the process is counted. */
		long before = minor_faults(RUSAGE_THREAD);
		uint64_t t0 = runtime_now();
		for (int i = 0; i < BURST2; i++)
			ck_assert_int_eq(runtime_spawn(runtime_current(), deep_sleeper, NULL), 0);
		wait_deep_ended((unsigned)(round + 1) * BURST2);
		faults[round] = minor_faults(RUSAGE_THREAD) - before;
		burst_ns[round] = runtime_now() - t0;
	}
}

/* The second burst, within a period of the first, runs on the first's
 * stacks with their pages still there: next to no page faults, where the
 * first took one for every page each fiber touched. Each burst is
 * measured once all its fibers have ended, not after a set time, so load
 * cannot move faults from one count to the other; it still fails if the
 * second burst's stacks are not the first's resident ones (stacks freed
 * with their pages dropped, decayed within the period, or a cache that
 * does not hold a burst): then it faults as much as the first. */
START_TEST(test_stack_burst_after_burst_reuses_resident_stacks)
{
	long faults[2];

#ifdef RUNTIME_TSAN
	TEST_SKIP("TSan maps state per fiber: its page faults hide the stacks'");
#endif
	ck_assert_int_eq(run_fiber(NULL, two_bursts, faults), 0);
	fprintf(stderr, "note: page faults %ld in the first burst, %ld in the second; "
	        "they took %llu and %llu ms to end\n", faults[0], faults[1],
	        (unsigned long long)(burst_ns[0] / MS), (unsigned long long)(burst_ns[1] / MS));
	ck_assert_int_ge(faults[0], BURST2 * (TOUCHED / 4096) / 2);
	ck_assert_int_lt(faults[1], faults[0] / 8);
}
END_TEST

/* --------------------------------------------------------- guard VMAs */

static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int lines = 0, c;
	ck_assert_ptr_nonnull(f);
	while ((c = fgetc(f)) != EOF)
		lines += c == '\n';
	fclose(f);
	return lines;
}

static int kernel_has_guard_install(void)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ok = madvise(p, (size_t)page, 102 /* MADV_GUARD_INSTALL */) == 0;
	munmap(p, (size_t)page * 2);
	return ok;
}

#define PARKED 5000

static void park_briefly(void *p)
{
	(void)p;
	runtime_sleep(20 * MS);
}

static void spawn_parked(void *p)
{
	int *maps = p;
	maps[0] = count_maps();
	for (int i = 0; i < PARKED; i++)
		ck_assert_int_eq(runtime_spawn(runtime_current(), park_briefly, NULL), 0);
	runtime_sleep(5 * MS); /* every stack is allocated and parked now */
	maps[1] = count_maps();
}

START_TEST(test_stack_guards_add_no_vma_per_stack)
{
	int maps[2];

#ifdef RUNTIME_TSAN
	TEST_SKIP("TSan maps state per fiber: its mappings hide the stacks'");
#endif
	if (!kernel_has_guard_install())
		TEST_SKIP("this kernel has no MADV_GUARD_INSTALL (6.13): a guard is a VMA");
	ck_assert_int_eq(run_fiber(NULL, spawn_parked, maps), 0);
	/* With mprotect guards this would grow by about 2 * PARKED. */
	ck_assert_int_lt(maps[1] - maps[0], PARKED / 10);
}
END_TEST

/* ------------------------------------------------------ SIGSEGV handler */

/* The program's own SIGSEGV handler, installed before the runtime, still
 * gets every fault that is not a fiber overflow (each time, not just the
 * first), the overflow report still works after such faults, and the
 * handler is the program's again once the runtime is destroyed. */
static sigjmp_buf fault_env;
static volatile sig_atomic_t user_faults;

static void user_segv(int sig)
{
	(void)sig;
	user_faults++;
	siglongjmp(fault_env, 1);
}

static void fault_once(volatile char *page)
{
	if (sigsetjmp(fault_env, 1) == 0)
		page[0] = 1;
}

static void chained_child(size_t stack_size)
{
	struct runtime_config cfg;
	struct runtime *rt;
	volatile char *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (page == MAP_FAILED || signal(SIGSEGV, user_segv) == SIG_ERR)
		_exit(10);
	runtime_config_init(&cfg);
	cfg.stack_size = stack_size;
	if (runtime_create(&rt, &cfg) < 0)
		_exit(11);
	fault_once(page);
	fault_once(page);
	if (user_faults != 2)
		_exit(12);
	runtime_spawn(rt, overflow, NULL);
	runtime_run(rt);
	_exit(13); /* unreachable: the overflow aborts */
}

START_TEST(test_stack_segv_handler_chains_to_the_programs)
{
	char out[512];

	int status = run_child(chained_child, 64 * 1024, out, sizeof(out));
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
	              "child did not abort (status %#x), stderr: %s", status, out);
	ck_assert_msg(strstr(out, "fiber stack overflow: fiber 1, stack size 65536 bytes"),
	              "stderr was: %s", out);
}
END_TEST

START_TEST(test_stack_segv_handler_restored_by_destroy)
{
	struct runtime *rt, *rt2;
	struct sigaction now;

	ck_assert_ptr_ne(signal(SIGSEGV, user_segv), SIG_ERR);
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_create(&rt2, NULL), 0);
	ck_assert_int_eq(sigaction(SIGSEGV, NULL, &now), 0);
	ck_assert_ptr_ne(now.sa_handler, user_segv); /* the runtime's, chained */
	runtime_destroy(rt);
	ck_assert_int_eq(sigaction(SIGSEGV, NULL, &now), 0);
	ck_assert_ptr_ne(now.sa_handler, user_segv); /* rt2 still needs it */
	runtime_destroy(rt2);
	ck_assert_int_eq(sigaction(SIGSEGV, NULL, &now), 0);
	ck_assert_ptr_eq(now.sa_handler, user_segv);
}
END_TEST

static Suite *stack_suite(void)
{
	Suite *s = suite_create("stack");
	TCase *tc = tcase_create("stack");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_stack_overflow_is_reported);
	tcase_add_test(tc, test_stack_fiber_uses_configured_size);
	tcase_add_test(tc, test_stack_cache_reuses_stacks);
	tcase_add_test(tc, test_stack_cache_decays_after_a_burst);
	tcase_add_test(tc, test_stack_burst_after_burst_reuses_resident_stacks);
	tcase_add_test(tc, test_stack_guards_add_no_vma_per_stack);
	tcase_add_test(tc, test_stack_segv_handler_chains_to_the_programs);
	tcase_add_test(tc, test_stack_segv_handler_restored_by_destroy);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(stack_suite)
