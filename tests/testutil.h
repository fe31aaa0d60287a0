/* SPDX-License-Identifier: MIT */
/*
 * testutil.h - shared scaffolding for the Check suites: run a body as the
 * only fiber of a fresh runtime (created inside the test, because Check
 * forks each test), a main() that skips (exit 77) where io_uring is
 * missing instead of failing, and skips that say so (TEST_SKIP).
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include "config.h"

#include <check.h>
#include "ck_fast.h" /* no write per passing assertion */
#include <runtime.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Run fn(arg) as the first fiber of a new runtime built from cfg (NULL:
 * defaults); returns runtime_run()'s result. */
static inline int run_fiber(const struct runtime_config *cfg, void (*fn)(void *), void *arg)
{
	struct runtime *rt;
	int rc = runtime_create(&rt, cfg);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(runtime_spawn(rt, fn, arg), 0);
	rc = runtime_run(rt);
	runtime_destroy(rt);
	return rc;
}

/* Spawn fn(arg) joinable on the calling fiber's core. */
static inline struct runtime_fiber *start(void *(*fn)(void *), void *arg)
{
	struct runtime_fiber *f;
	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &f, fn, arg), 0);
	return f;
}

/* Join f, which must end, and return what it returned. */
static inline intptr_t join(struct runtime_fiber *f)
{
	void *res;
	ck_assert_int_eq(runtime_fiber_join(f, &res), 0);
	return (intptr_t)res;
}

/* The engine a runtime made with cfg NULL runs here (RUNTIME_ENGINE in
 * the environment chooses it: CI runs every suite on both). Where the two
 * engines differ by design, a test asserts each one's behaviour. */
static inline enum runtime_engine test_engine(void)
{
	static enum runtime_engine engine = RUNTIME_ENGINE_AUTO;
	struct runtime *rt;

	if (engine == RUNTIME_ENGINE_AUTO && runtime_create(&rt, NULL) == 0) {
		engine = runtime_engine(rt);
		runtime_destroy(rt);
	}
	return engine;
}

static inline bool on_epoll(void)
{
	return test_engine() == RUNTIME_ENGINE_EPOLL;
}

/* Exit 77 (automake's "skipped") when this kernel cannot run the runtime. */
static inline void skip_without_io_uring(void)
{
	struct runtime *rt;
	int rc = runtime_create(&rt, NULL);
	if (rc == -ENOSYS || rc == -EOPNOTSUPP) {
		fprintf(stderr, "SKIP: io_uring unavailable or too old (%d)\n", rc);
		exit(77);
	}
	if (rc == 0)
		runtime_destroy(rt);
}

/* ----------------------------------------------------------------- skips
 *
 * A test that cannot run here says so, and is counted as skipped, not
 * passed: TEST_SKIP("reason", ...) in its body records the reason and
 * returns. TEST_REQUIRE(have, "what") asks for something ./build.sh check
 * installs (a package, a peer program): missing in CI (CI=true, where
 * build.sh installed everything) it fails the test instead of skipping it.
 *
 * RUNTIME_TEST_SKIPS names a file of tests skipped by name, a line each:
 * "program test reason" (test "*": all of the program's; '#' starts a
 * comment). It is for runs where a test cannot pass for a reason outside
 * the code (tests/qemu.skip: the emulator's limits); such a test is not
 * run at all, its reason recorded.
 *
 * Check forks each test: the records reach the suite's main through a
 * shared page. After Check's summary, main prints "SKIP: program: test:
 * reason" for each and "Skipped: N" (build.sh counts them apart), and
 * exits 77 (automake's SKIP) when something was skipped and nothing failed.
 */
#define TEST_SKIPS_MAX 64

struct test_skips {
	_Atomic unsigned n;
	struct {
		char test[80];
		char reason[176];
	} v[TEST_SKIPS_MAX];
};

struct test_listed {
	char test[80];
	char reason[176];
};

static struct test_skips *test_skips;   /* shared with the forked tests */
static char test_program[64];           /* this suite's program, for the list */
static struct test_listed *test_list;   /* its entries in RUNTIME_TEST_SKIPS */
static int test_nlisted;

/* Record the running test as skipped (Check's tcase_name: the test's
 * START_TEST name), with a reason. */
__attribute__((format(printf, 1, 2))) static inline void test_skip_record(const char *fmt, ...)
{
	va_list ap;

	ck_assert_msg(test_skips, "a skip outside test_run: it would count as a pass");
	unsigned i = atomic_fetch_add(&test_skips->n, 1);
	if (i >= TEST_SKIPS_MAX)
		return;
	snprintf(test_skips->v[i].test, sizeof(test_skips->v[i].test), "%s", tcase_name());
	va_start(ap, fmt);
	vsnprintf(test_skips->v[i].reason, sizeof(test_skips->v[i].reason), fmt, ap);
	va_end(ap);
}

#define TEST_SKIP(...)                          \
	do {                                    \
		test_skip_record(__VA_ARGS__);  \
		return;                         \
	} while (0)

static inline bool test_in_ci(void)
{
	const char *ci = getenv("CI");
	return ci && !strcmp(ci, "true");
}

#define TEST_REQUIRE(have, what)                                                              \
	do {                                                                                  \
		if (!(have)) {                                                                \
			ck_assert_msg(!test_in_ci(), "%s: missing in CI, where ./build.sh check " \
			              "installs it", (what));                                 \
			TEST_SKIP("%s: missing (./build.sh check installs it)", (what));       \
		}                                                                             \
	} while (0)

/* The entries of RUNTIME_TEST_SKIPS for this program, read once. */
static inline void test_list_load(void)
{
	const char *path = getenv("RUNTIME_TEST_SKIPS");
	FILE *f = path && *path ? fopen(path, "r") : NULL;
	char line[512], prog[64];
	struct test_listed e;

	if (path && *path && !f) {
		perror(path); /* RUNTIME_TEST_SKIPS: a list that is not there skips nothing */
		exit(99);
	}
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %79s %175[^\n]", prog, e.test, e.reason) != 3 ||
		    prog[0] == '#' || strcmp(prog, test_program))
			continue;
		test_list = realloc(test_list, (size_t)(test_nlisted + 1) * sizeof(*test_list));
		if (!test_list)
			abort();
		test_list[test_nlisted++] = e;
	}
	if (f)
		fclose(f);
}

/* A listed test's stand-in: its loop index is its entry. */
static inline void test_listed_fn(int i)
{
	test_skip_record("%s", test_list[i].reason);
}

/*
 * Every tcase_add_* of check.h comes here: a test named in the list is
 * replaced by test_listed_fn under its own name, run once with its entry
 * as the loop index (and no signal or exit status expected). The stand-in
 * TTest lives as long as the suite.
 */
static inline void test_add(TCase *tc, const TTest *tf, int sig, int exit_value, int start, int end)
{
	for (int i = 0; i < test_nlisted; i++) {
		if (strcmp(test_list[i].test, tf->name) && strcmp(test_list[i].test, "*"))
			continue;
		TTest *stub = malloc(sizeof(*stub));
		if (!stub)
			abort();
		*stub = (TTest){ tf->name, test_listed_fn, tf->file, tf->line };
		(_tcase_add_test)(tc, stub, 0, 0, i, i + 1);
		return;
	}
	(_tcase_add_test)(tc, tf, sig, exit_value, start, end);
}
#define _tcase_add_test(tc, tf, sig, exit_value, start, end) \
	test_add(tc, tf, sig, exit_value, start, end)

/* Before the suite is made: the program's name ("lt-" is libtool's), the
 * list, the shared page. */
static inline void test_init(const char *argv0)
{
	const char *base = strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0;

	if (!strncmp(base, "lt-", 3))
		base += 3;
	snprintf(test_program, sizeof(test_program), "%s", base);
	test_list_load();
	test_skips = mmap(NULL, sizeof(*test_skips), PROT_READ | PROT_WRITE,
	                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (test_skips == MAP_FAILED) {
		perror("mmap");
		exit(99);
	}
}

/* Run the suite; print the skips; 0, 1 (a test failed) or 77 (skips). */
static inline int test_run(Suite *s)
{
	SRunner *sr = srunner_create(s);

	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	unsigned n = atomic_load(&test_skips->n);
	for (unsigned i = 0; i < n && i < TEST_SKIPS_MAX; i++)
		printf("SKIP: %s: %s: %s\n", test_program, test_skips->v[i].test,
		       test_skips->v[i].reason);
	printf("Skipped: %u\n", n);
	fflush(stdout);
	return failed ? EXIT_FAILURE : n ? 77 : EXIT_SUCCESS;
}

#define TEST_MAIN(make_suite)                                       \
	int main(int argc, char **argv)                             \
	{                                                           \
		(void)argc;                                         \
		skip_without_io_uring();                            \
		test_init(argv[0]);                                 \
		return test_run(make_suite());                      \
	}

#define MS (1000ull * 1000ull)

/* Fibers alive on core 0 of rt (runtime_stats). Any thread. */
static inline uint64_t fibers_live(struct runtime *rt)
{
	struct runtime_core_stats st;

	runtime_stats(rt, &st, 1, NULL);
	return st.fibers_live;
}

/* Open file descriptors of this process (the directory's own fd counts
 * every time, so counts compare). */
static inline int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* The port a socket is bound to. */
static inline uint16_t bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* How many pages of [p, p + len) are resident (mincore), and in *pages
 * how many pages it spans. The range must be mapped. */
static inline size_t resident_pages(const void *p, size_t len, size_t *pages)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), in = 0;
	uintptr_t lo = (uintptr_t)p & ~(page - 1);
	size_t n = ((uintptr_t)p + len - lo + page - 1) / page;
	unsigned char vec[256];

	ck_assert_uint_le(n, sizeof(vec));
	ck_assert_int_eq(mincore((void *)lo, n * page, vec), 0);
	for (size_t i = 0; i < n; i++)
		in += vec[i] & 1;
	*pages = n;
	return in;
}

/* In a fiber: a connected TCP pair over 127.0.0.1 (fd[0] the client). */
static inline void tcp_pair(int fd[2])
{
	int l = runtime_tcp_listen("127.0.0.1", 0, 4, 0);

	ck_assert_int_ge(l, 0);
	fd[0] = runtime_tcp_connect("127.0.0.1", bound_port(l));
	ck_assert_int_ge(fd[0], 0);
	fd[1] = runtime_accept(l, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fd[1], 0);
	ck_assert_int_eq(runtime_close(l), 0);
}

/* ThreadSanitizer gives every fiber its own thread state and dies past
 * 8128 of them alive at once: TSan builds run fewer concurrent fibers. */
#ifdef RUNTIME_TSAN
#define LIVE_FIBERS(n) ((n) > 4000 ? 4000 : (n))
#else
#define LIVE_FIBERS(n) (n)
#endif

#endif
