/* SPDX-License-Identifier: MIT */
/*
 * check_faults.c - the runtime under injected faults (a build configured
 * with --enable-fault-injection; ./build.sh check's ASan build is one, so
 * LeakSanitizer checks that nothing leaks on the failure paths). Each test
 * sets RUNTIME_FAULTS before its runtime_create (Check forks every test),
 * checks that the faults did strike, and that nothing was lost, done twice
 * or leaked: every byte arrives once and in order, every timer fires once,
 * every call that fails says -ENOMEM, -EMFILE or -ECONNRESET and leaves
 * nothing behind.
 */
#include "testutil.h"

#include <fault.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static void faults(const char *spec)
{
	ck_assert_int_eq(setenv("RUNTIME_FAULTS", spec, 1), 0);
}

/* ------------------------------------------- SQ full, busy, short I/O */

#define PAIRS 8
#define STREAM_BYTES (256 * 1024)

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 131 + (i >> 9));
}

static void writer(void *arg)
{
	int fd = (int)(intptr_t)arg;
	unsigned char buf[4096];

	for (size_t off = 0; off < STREAM_BYTES;) {
		size_t n = 1 + (off * 7919) % sizeof(buf); /* uneven pieces */
		if (n > STREAM_BYTES - off)
			n = STREAM_BYTES - off;
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(off + i);
		size_t done;
		ck_assert_int_eq(runtime_write_all(fd, buf, n, &done), (ssize_t)n);
		off += n;
	}
	ck_assert_int_eq(runtime_close(fd), 0);
}

static _Atomic unsigned streams_ok;

/* Reads to EOF: exactly STREAM_BYTES, each byte the one written there. */
static void reader(void *arg)
{
	int fd = (int)(intptr_t)arg;
	unsigned char buf[3000];
	size_t total = 0;
	ssize_t n;

	while ((n = runtime_read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			ck_assert_uint_eq(buf[i], pattern(total + (size_t)i));
		total += (size_t)n;
	}
	ck_assert_int_eq(n, 0);
	ck_assert_uint_eq(total, STREAM_BYTES);
	ck_assert_int_eq(runtime_close(fd), 0);
	atomic_fetch_add(&streams_ok, 1);
}

static _Atomic unsigned sleeps_done, timer_calls;

static void sleeper(void *arg)
{
	(void)arg;
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(runtime_sleep(100 * 1000), 0);
	atomic_fetch_add(&sleeps_done, 1);
}

static void count_timer(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	(void)t, (void)arg;
	ck_assert_int_eq(why, RUNTIME_TIMER_FIRED);
	atomic_fetch_add(&timer_calls, 1);
}

static void traffic(void *arg)
{
	static struct runtime_timer timers[64];
	struct runtime *rt = runtime_current();

	(void)arg;
	for (int i = 0; i < PAIRS; i++) {
		int sv[2];
		if (i % 2)
			tcp_pair(sv);
		else
			ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		ck_assert_int_eq(runtime_spawn(rt, writer, (void *)(intptr_t)sv[0]), 0);
		ck_assert_int_eq(runtime_spawn(rt, reader, (void *)(intptr_t)sv[1]), 0);
	}
	for (int i = 0; i < 64; i++) {
		ck_assert_int_eq(runtime_spawn(rt, sleeper, NULL), 0);
		ck_assert_int_eq(runtime_timer_start(&timers[i], (uint64_t)i * 50 * 1000,
		                                     count_timer, NULL), 0);
	}
}

/* A full SQ, a busy submit and short reads and writes, all often: every
 * stream arrives whole and in order, every sleep and timer ends once. The
 * epoll engine has no SQ: there only the short reads and writes strike. */
START_TEST(test_io_under_faults)
{
	struct runtime_config cfg;

	faults("no_sqe:3,submit_busy:4,short_io:2");
	runtime_config_init(&cfg);
	cfg.cores = 2;
	cfg.ring_entries = 8; /* a small SQ fills for real too */
	ck_assert_int_eq(run_fiber(&cfg, traffic, NULL), 0);
	ck_assert_uint_eq(atomic_load(&streams_ok), PAIRS);
	ck_assert_uint_eq(atomic_load(&sleeps_done), 64);
	ck_assert_uint_eq(atomic_load(&timer_calls), 64);
	if (on_epoll()) {
		ck_assert_uint_eq(runtime_faults_struck(FAULT_NO_SQE), 0);
		ck_assert_uint_eq(runtime_faults_struck(FAULT_SUBMIT_BUSY), 0);
	} else {
		ck_assert_uint_gt(runtime_faults_struck(FAULT_NO_SQE), 100);
		ck_assert_uint_gt(runtime_faults_struck(FAULT_SUBMIT_BUSY), 10);
	}
	ck_assert_uint_gt(runtime_faults_struck(FAULT_SHORT_IO), 100);
}
END_TEST

/* ---------------------------------------------------- ECONNRESET, EMFILE */

/* A send that fails with ECONNRESET sent nothing: the peer gets exactly
 * the messages whose send succeeded. */
static void resets(void *arg)
{
	int sv[2];
	unsigned sent = 0, reset = 0;
	char msg[16] = "0123456789abcdef", in[16 * 100];

	(void)arg;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	for (int i = 0; i < 100; i++) {
		ssize_t n = runtime_send(sv[0], msg, sizeof(msg), 0);
		if (n == -ECONNRESET) {
			reset++;
		} else {
			ck_assert_int_eq(n, sizeof(msg));
			sent++;
		}
	}
	ck_assert_uint_eq(reset, 100 - sent);
	ck_assert_int_eq(shutdown(sv[0], SHUT_WR), 0);
	size_t got = 0;
	for (ssize_t n; (n = runtime_recv(sv[1], in + got, sizeof(in) - got, 0)) != 0;)
		if (n > 0)
			got += (size_t)n;
		else
			ck_assert_int_eq(n, -ECONNRESET);
	ck_assert_uint_eq(got, sent * sizeof(msg));
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_connreset)
{
	faults("connreset:3");
	ck_assert_int_eq(run_fiber(NULL, resets, NULL), 0);
	ck_assert_uint_gt(runtime_faults_struck(FAULT_CONNRESET), 30);
}
END_TEST

/* EMFILE or ENFILE from accept loses no connection: a retry accepts it. */
static void accepts(void *arg)
{
	int l = runtime_tcp_listen("127.0.0.1", 0, 16, 0), c[10];
	unsigned accepted = 0, emfile = 0, enfile = 0;
	struct runtime_listener *lis = NULL;

	ck_assert_int_ge(l, 0);
	if (arg)
		ck_assert_int_eq(runtime_listener_open(&lis, l, SOCK_CLOEXEC), 0);
	for (int i = 0; i < 10; i++)
		ck_assert_int_ge(c[i] = runtime_tcp_connect("127.0.0.1", bound_port(l)), 0);
	while (accepted < 10) {
		int fd = lis ? runtime_listener_accept(lis, NULL, NULL) : runtime_accept(l, NULL, NULL, 0);
		if (fd == -EMFILE || fd == -ENFILE) {
			*(fd == -EMFILE ? &emfile : &enfile) += 1;
			continue;
		}
		ck_assert_int_ge(fd, 0);
		accepted++;
		runtime_close(fd);
	}
	ck_assert_uint_ge(emfile, 4);
	ck_assert_uint_ge(enfile, 4);
	for (int i = 0; i < 10; i++)
		runtime_close(c[i]);
	runtime_listener_close(lis);
	runtime_close(l);
}

START_TEST(test_accept_emfile)
{
	faults("accept_emfile:2");
	ck_assert_int_eq(run_fiber(NULL, accepts, (void *)(intptr_t)_i), 0);
	ck_assert_uint_ge(runtime_faults_struck(FAULT_ACCEPT_EMFILE), 9);
}
END_TEST

/* ------------------------------------------------------ ENOMEM, no stack */

static _Atomic unsigned ran;

static void counted(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ran, 1);
}

static void *counted_joinable(void *arg)
{
	counted(arg);
	return arg;
}

/* Every other stack cannot be had: those spawns fail with -ENOMEM, the
 * rest run, and nothing leaks (LeakSanitizer). */
static void spawns(void *arg)
{
	unsigned ok = 0, nomem = 0;
	struct runtime_fiber *h;

	(void)arg;
	for (int i = 0; i < 100; i++) {
		int rc = i % 2 ? runtime_spawn(runtime_current(), counted, NULL)
		               : runtime_fiber_spawn(runtime_current(), &h, counted_joinable, NULL);
		if (rc == -ENOMEM) {
			nomem++;
			continue;
		}
		ck_assert_int_eq(rc, 0);
		ok++;
		if (i % 2 == 0)
			ck_assert_int_eq(join(h), 0);
	}
	ck_assert_uint_eq(ok + nomem, 100);
	ck_assert_uint_ge(nomem, 40);
	while (atomic_load(&ran) < ok)
		runtime_yield();
}

START_TEST(test_spawn_without_stack)
{
	faults("stack:2");
	ck_assert_int_eq(run_fiber(NULL, spawns, NULL), 0);
	ck_assert_uint_ge(runtime_faults_struck(FAULT_STACK), 40);
}
END_TEST

static void named_fired(void *arg, enum runtime_timer_why why)
{
	(void)arg, (void)why;
}

/* Objects made and given back while every 13th allocation fails. */
static void allocations(void *arg)
{
	struct runtime *rt = runtime_current();

	(void)arg;
	for (int i = 0; i < 60; i++) {
		struct runtime_chan *ch;
		struct runtime_sem *sem;
		struct runtime_limiter *lim;
		int rc = runtime_chan_create(&ch, 8, 4);
		if (rc == 0)
			ck_assert_int_eq(runtime_chan_destroy(ch), 0);
		else
			ck_assert_int_eq(rc, -ENOMEM);
		if ((rc = runtime_sem_create(&sem, 2, 0)) == 0)
			ck_assert_int_eq(runtime_sem_destroy(sem), 0);
		else
			ck_assert_int_eq(rc, -ENOMEM);
		if ((rc = runtime_limiter_create(&lim, 2)) == 0)
			ck_assert_int_eq(runtime_limiter_destroy(lim), 0);
		else
			ck_assert_int_eq(rc, -ENOMEM);
		rc = runtime_timer_start_named(rt, "t", 1000, named_fired, NULL);
		ck_assert(rc == 0 || rc == -ENOMEM);
		rc = runtime_spawn_on(rt, 1, counted, NULL); /* through the inbox */
		ck_assert(rc == 0 || rc == -ENOMEM);
	}
}

/* n allocations of the runtime's (each may fail), given back. */
static void allocate_some(int n)
{
	for (int i = 0; i < n; i++) {
		struct runtime_sem *sem;
		if (runtime_sem_create(&sem, 1, 0) == 0)
			ck_assert_int_eq(runtime_sem_destroy(sem), 0);
	}
}

START_TEST(test_malloc_failures)
{
	struct runtime_config cfg;
	struct runtime *rt;
	unsigned created = 0;

	faults("malloc:13"); /* fewer than 13 allocations make a runtime */
	runtime_config_init(&cfg);
	cfg.cores = 2;
	for (int i = 0; i < 20; i++) {
		int rc = runtime_create(&rt, &cfg);
		if (rc == 0) {
			created++;
			runtime_destroy(rt);
		} else {
			ck_assert_int_eq(rc, -ENOMEM);
		}
	}
	ck_assert_uint_gt(created, 0);
	ck_assert_uint_lt(created, 20);
	/* A run: retried, on a new runtime, until its creation, the first
	 * spawn and the run's own start (the offload pool, the stall
	 * detector, the epoll engine's per-core state: allocations too) get
	 * through. The count of allocations before the run moves on by one a
	 * try: a run start that always came the same distance after a
	 * creation would otherwise always meet the 13th allocation. */
	int rc = -ENOMEM;
	for (int tries = 0; rc == -ENOMEM && tries < 1000; tries++) {
		while ((rc = runtime_create(&rt, &cfg)) == -ENOMEM)
			continue;
		ck_assert_int_eq(rc, 0);
		while ((rc = runtime_spawn(rt, allocations, NULL)) == -ENOMEM)
			continue;
		ck_assert_int_eq(rc, 0);
		allocate_some(tries % 13);
		rc = runtime_run(rt);
		runtime_destroy(rt);
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_gt(runtime_faults_struck(FAULT_MALLOC), 10);
}
END_TEST

/* ------------------------------------------------------ idle streams */

#define IDLERS 3

struct idler {
	int fd[2];
	struct runtime_stream *s;
	_Atomic int runs;
	int why;
	ssize_t got;
};

static struct idler idlers[IDLERS];

static void idle_resumed(void *arg, int why)
{
	struct idler *d = arg;
	char buf[16];

	atomic_fetch_add(&d->runs, 1);
	d->why = why;
	d->got = why == 0 ? runtime_stream_recv(d->s, buf, sizeof(buf)) : 0;
	ck_assert_int_eq(runtime_stream_close(d->s), 0);
	runtime_close(d->fd[0]);
	runtime_close(d->fd[1]);
}

static void idle_start(struct idler *d, uint64_t deadline)
{
	int l = runtime_tcp_listen("127.0.0.1", 0, 4, 0);

	ck_assert_int_ge(l, 0);
	d->fd[0] = runtime_tcp_connect("127.0.0.1", bound_port(l));
	d->fd[1] = runtime_accept(l, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(d->fd[1], 0);
	runtime_close(l);
	ck_assert_int_eq(runtime_stream_open(&d->s, d->fd[1]), 0);
	ck_assert_int_eq(runtime_stream_idle(d->s, deadline, idle_resumed, d), 0);
}

/* Bytes for the first, the deadline for the second, a drain for the last. */
static void idle_main(void *arg)
{
	(void)arg;
	idle_start(&idlers[0], 0);
	idle_start(&idlers[1], runtime_now() + 40 * MS);
	idle_start(&idlers[2], 0);
	runtime_sleep(20 * MS);
	ck_assert_int_eq(runtime_write_all(idlers[0].fd[0], "abc", 3, NULL), 3);
	runtime_sleep(60 * MS);
	ck_assert_int_eq(runtime_drain(runtime_current(), 10000 * MS), 0);
}

static void check_idlers(void)
{
	static const int why[IDLERS] = { 0, -ETIMEDOUT, -ESHUTDOWN };

	for (int i = 0; i < IDLERS; i++) {
		ck_assert_int_eq(atomic_load(&idlers[i].runs), 1);
		ck_assert_int_eq(idlers[i].why, why[i]);
	}
	ck_assert_int_eq(idlers[0].got, 3);
}

/* Without multishot recv a fiber polls for each: the same results. */
START_TEST(test_idle_without_multishot)
{
	faults("no_multishot:1");
	ck_assert_int_eq(run_fiber(NULL, idle_main, NULL), 0);
	check_idlers();
	ck_assert_uint_gt(runtime_faults_struck(FAULT_NO_MULTISHOT), 0);
}
END_TEST

/* A continuation that cannot get a stack at first runs once it can. */
START_TEST(test_idle_without_stack)
{
	faults("stack:2");
	ck_assert_int_eq(run_fiber(NULL, idle_main, NULL), 0);
	check_idlers();
	ck_assert_uint_gt(runtime_faults_struck(FAULT_STACK), 0);
}
END_TEST

static Suite *faults_suite(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("faults");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_io_under_faults);
	tcase_add_test(tc, test_connreset);
	tcase_add_loop_test(tc, test_accept_emfile, 0, 2);
	tcase_add_test(tc, test_spawn_without_stack);
	tcase_add_test(tc, test_malloc_failures);
	tcase_add_test(tc, test_idle_without_multishot);
	tcase_add_test(tc, test_idle_without_stack);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(faults_suite)
