/* SPDX-License-Identifier: MIT */
/*
 * check_stack.c - fiber stacks: a child whose fiber overflows its stack
 * hits the guard page and dies printing "fiber stack overflow" with the
 * fiber's id and stack size; a fiber may use nearly all of its configured
 * stack; stacks are reused from the cache; a burst's stacks give their
 * pages back once a period goes by without them, and a burst that follows
 * within the period runs on them, their pages still there; the guard adds
 * no VMA per stack where the kernel has MADV_GUARD_INSTALL.
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

/*
 * Which pages a burst of fibers left resident, seen with mincore(2) on
 * the region each fiber touched of its stack: what the cache kept, gave
 * back or reused, not how many page faults or kilobytes that came to
 * (a process-wide figure that TSan's shadow, malloc and the page size
 * move).
 */
#define BURST 600
#define BURST2 2000 /* past the stack cache, default or the old 1024 */
#define TOUCHED (32 * 1024)

/* The stack regions a burst's fibers touched, in spawn order. */
struct burst {
	char *deep[BURST2];
	_Atomic unsigned n;
};

static _Atomic unsigned deep_ended; /* deep_sleepers that have ended */

/* Touch TOUCHED bytes of this fiber's stack (alloca: a region the
 * compiler must keep whole, on the fiber's own stack in every build),
 * note where into *p, then wait a little. */
static void deep_sleeper(void *p)
{
	struct burst *b = p;
	char *deep = __builtin_alloca(TOUCHED);

	for (size_t i = 0; i < TOUCHED; i += 512)
		deep[i] = (char)i;
	__asm__ volatile("" : : "r"(deep) : "memory");
	b->deep[atomic_fetch_add(&b->n, 1)] = deep;
	runtime_sleep(20 * MS);
	atomic_fetch_add(&deep_ended, 1);
}

/* Until every deep_sleeper spawned so far (n) has ended, and so given its
 * stack back: a fixed sleep was too short on a loaded machine, where the
 * second burst then found first-burst fibers still holding their stacks.
 * 10 s is far above what a loaded machine takes (under 0.2 s at load 4 on
 * 2 CPUs); a fiber that never ends fails here. */
static void wait_deep_ended(unsigned n)
{
	uint64_t until = runtime_now() + 10000 * MS;

	while (atomic_load(&deep_ended) < n && runtime_now() < until)
		runtime_sleep(1 * MS);
	ck_assert_uint_eq(atomic_load(&deep_ended), n);
}

static void spawn_burst(struct burst *b, unsigned n)
{
	atomic_store(&b->n, 0);
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(runtime_spawn(runtime_current(), deep_sleeper, b), 0);
}

/* How many of the n regions of b have every page resident (all), or any
 * (!all). */
static unsigned regions_resident(const struct burst *b, unsigned n, bool all)
{
	unsigned count = 0;

	for (unsigned i = 0; i < n; i++) {
		size_t pages, in = resident_pages(b->deep[i], TOUCHED, &pages);
		count += all ? in == pages : in > 0;
	}
	return count;
}

static struct burst burst1, burst2;

static void burst_then_wait(void *p)
{
	unsigned *left = p;

	atomic_store(&deep_ended, 0);
	spawn_burst(&burst1, BURST);
	wait_deep_ended(BURST); /* their stacks are in the hot cache */
	left[0] = regions_resident(&burst1, BURST, true);
	runtime_sleep(2500 * MS); /* two decay periods: its timers fire first */
	left[1] = regions_resident(&burst1, BURST, false);
}

/* A burst's stacks, cached hot, give their pages back once a period has
 * gone by without them, all but the stack_cache the core keeps. */
START_TEST(test_stack_cache_decays_after_a_burst)
{
	unsigned left[2];

	ck_assert_int_eq(run_fiber(NULL, burst_then_wait, left), 0);
	ck_assert_uint_eq(left[0], BURST);
	ck_assert_uint_le(left[1], RUNTIME_DEFAULT_STACK_CACHE);
}
END_TEST

/* Is p one of the n regions of b? */
static bool was_in(const struct burst *b, unsigned n, const char *p)
{
	for (unsigned i = 0; i < n; i++)
		if (b->deep[i] == p)
			return true;
	return false;
}

static void two_bursts(void *p)
{
	unsigned *seen = p;

	atomic_store(&deep_ended, 0);
	spawn_burst(&burst1, BURST2);
	wait_deep_ended(BURST2);
	seen[0] = regions_resident(&burst1, BURST2, true);
	spawn_burst(&burst2, BURST2);
	wait_deep_ended(2 * BURST2);
	seen[1] = 0;
	for (unsigned i = 0; i < BURST2; i++)
		seen[1] += was_in(&burst1, BURST2, burst2.deep[i]);
}

/* The second burst, within a period of the first, runs on the first's
 * stacks, whose pages were all still there when it began: it needs no
 * page. Each burst is looked at once all its fibers have ended, not after
 * a set time. (A period that ends between the bursts may give some back:
 * an eighth is allowed for that.) It fails if the first's stacks lost
 * their pages when freed, or the cache did not hold a burst, or the
 * second burst got other stacks. */
START_TEST(test_stack_burst_after_burst_reuses_resident_stacks)
{
	unsigned seen[2];

	ck_assert_int_eq(run_fiber(NULL, two_bursts, seen), 0);
	ck_assert_uint_ge(seen[0], BURST2 - BURST2 / 8);
	ck_assert_uint_ge(seen[1], BURST2 - BURST2 / 8);
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
