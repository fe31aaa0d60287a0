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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

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

/* This process's resident set, in KiB (VmRSS). */
static inline long resident_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[128];
	long kib = -1;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Minor page faults so far: who is RUSAGE_SELF (the process) or
 * RUSAGE_THREAD (the calling thread). */
static inline long minor_faults(int who)
{
	struct rusage ru;

	ck_assert_int_eq(getrusage(who, &ru), 0);
	return ru.ru_minflt;
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
