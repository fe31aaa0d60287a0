/* SPDX-License-Identifier: MIT */
/*
 * testutil.h - shared scaffolding for the Check suites: run a body as the
 * only fiber of a fresh runtime (created inside the test, because Check
 * forks each test), and a main() that skips (exit 77) where io_uring is
 * missing instead of failing.
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include "config.h"

#include <check.h>
#include <runtime.h>
#include <stdio.h>
#include <stdlib.h>

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

#define TEST_MAIN(make_suite)                                       \
	int main(void)                                              \
	{                                                           \
		skip_without_io_uring();                            \
		SRunner *sr = srunner_create(make_suite());          \
		srunner_run_all(sr, CK_NORMAL);                     \
		int failed = srunner_ntests_failed(sr);             \
		srunner_free(sr);                                   \
		return failed ? EXIT_FAILURE : EXIT_SUCCESS;        \
	}

#define MS (1000ull * 1000ull)

/* ThreadSanitizer gives every fiber its own thread state and dies past
 * 8128 of them alive at once: TSan builds run fewer concurrent fibers. */
#ifdef RUNTIME_TSAN
#define LIVE_FIBERS(n) ((n) > 4000 ? 4000 : (n))
#else
#define LIVE_FIBERS(n) (n)
#endif

#endif
