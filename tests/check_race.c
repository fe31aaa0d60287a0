/* SPDX-License-Identifier: MIT */
/*
 * check_race.c - race tests for the paths where the kernel's answer can
 * come at the worst moment (liburing's cancel-race and wakeup-hang habit):
 * fibers blocked in recv or accept on one fd while data or connections keep
 * arriving from a fiber on another core and from a plain thread, and are
 * then cancelled, cut short by their deadlines, or shut down. The kernel
 * may answer an ASYNC_CANCEL or a linked timeout with -ENOENT while the
 * operation is between a poll wake-up and its re-arm; a lost cancel or
 * deadline shows here as a fiber still blocked once the data has stopped.
 *
 * Each test runs rounds for a bounded time (STORM_SECONDS) and fails on the
 * first fiber that does not end within STUCK_BOUND after its cancel, its
 * deadline or the shutdown: a generous bound, since nothing but a lost
 * wake-up can make it wait once the writers have stopped.
 */
#include "testutil.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define STORM_SECONDS 3
#define STUCK_BOUND (20000 * MS)
#define RECEIVERS 8
#define MAX_CORES 2

enum storm_kind { CANCEL_RECV, CANCEL_ACCEPT, DEADLINE_RECV };

/* One core's target: its receivers block on pair[0] (or listen_fd); the
 * writers feed pair[1] (or connect to port) while `blowing` is set. */
struct target {
	int pair[2];
	int listen_fd;
	uint16_t port;
	_Atomic bool blowing;
};

struct storm {
	enum storm_kind kind;
	unsigned cores;
	struct runtime *rt;
	struct target t[MAX_CORES];
	_Atomic bool over;          /* writers leave */
	_Atomic unsigned controllers;
	_Atomic long rounds;
	_Atomic long accepted;
	uint64_t until;
};

static struct storm storm;

/* A plain TCP connect to the target, closed at once (nonblocking parts
 * only: it never waits for the server to accept). */
static void knock(const struct target *t)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(t->port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		/* the backlog is full: fine, the storm goes on */
	}
	close(fd);
}

static void *thread_writer(void *p)
{
	(void)p;
	while (!atomic_load(&storm.over)) {
		bool any = false;
		for (unsigned i = 0; i < storm.cores; i++) {
			struct target *t = &storm.t[i];
			if (!atomic_load(&t->blowing))
				continue;
			any = true;
			if (storm.kind == CANCEL_ACCEPT)
				knock(t);
			else if (send(t->pair[1], "t", 1, MSG_DONTWAIT) < 0) {
				/* full: the receivers are behind */
			}
		}
		if (!any)
			usleep(50);
	}
	return NULL;
}

/* Feeds the target of the next core (its own when there is one core),
 * until the storm is over or the fiber is cancelled (shutdown). */
static void fiber_writer(void *p)
{
	struct target *t = p;
	int rc = 0;

	while (!atomic_load(&storm.over) && rc != -ECANCELED) {
		if (!atomic_load(&t->blowing)) {
			rc = runtime_sleep(50 * 1000);
		} else if (storm.kind == CANCEL_ACCEPT) {
			int fd = runtime_tcp_connect("127.0.0.1", t->port);
			rc = fd < 0 ? fd : runtime_close(fd);
		} else {
			rc = (int)runtime_send(t->pair[1], "f", 1, MSG_DONTWAIT);
			if (rc != -ECANCELED)
				rc = runtime_yield();
		}
	}
}

static void *receiver(void *p)
{
	struct target *t = p;
	char buf[4];

	for (;;) {
		if (storm.kind == DEADLINE_RECV) {
			if (!atomic_load(&t->blowing))
				return NULL;
			unsigned r = (unsigned)random();
			runtime_deadline_set(runtime_now() + (r % 300) * 1000);
		}
		ssize_t n;
		if (storm.kind == CANCEL_ACCEPT) {
			n = runtime_accept(t->listen_fd, NULL, NULL, SOCK_CLOEXEC);
			if (n >= 0) {
				atomic_fetch_add(&storm.accepted, 1);
				runtime_close((int)n);
			}
		} else {
			n = runtime_recv(t->pair[0], buf, sizeof(buf), 0);
		}
		if (n == -ETIMEDOUT && storm.kind == DEADLINE_RECV)
			continue;
		if (n < 0)
			return (void *)(intptr_t)n;
	}
}

/* One round: receivers block while data arrives; then the data stops and
 * every receiver must end (cancelled, or by its own deadline). */
static void storm_round(struct target *t)
{
	struct runtime_fiber *f[RECEIVERS];

	atomic_store(&t->blowing, true);
	for (int i = 0; i < RECEIVERS; i++)
		ck_assert_int_eq(runtime_fiber_spawn(storm.rt, &f[i], receiver, t), 0);
	runtime_sleep(((unsigned)random() % 2000) * 1000);
	atomic_store(&t->blowing, false);
	if (storm.kind != DEADLINE_RECV)
		for (int i = 0; i < RECEIVERS; i++)
			ck_assert_int_eq(runtime_fiber_cancel(f[i]), 0);
	runtime_deadline_set(runtime_now() + STUCK_BOUND);
	for (int i = 0; i < RECEIVERS; i++) {
		int rc = runtime_fiber_join(f[i], NULL);
		ck_assert_msg(rc == 0, "core %d: receiver %d still blocked %llu ms after the %s "
		              "(round %ld)", runtime_core_index(), i,
		              (unsigned long long)(STUCK_BOUND / MS),
		              storm.kind == DEADLINE_RECV ? "deadline" : "cancel",
		              atomic_load(&storm.rounds));
	}
	runtime_deadline_set(0);
	atomic_fetch_add(&storm.rounds, 1);
}

static void controller(void *p)
{
	struct target *t = p;

	srandom((unsigned)runtime_core_index() * 7919u + 17u);
	while (runtime_now() < storm.until)
		storm_round(t);
	if (atomic_fetch_sub(&storm.controllers, 1) == 1)
		atomic_store(&storm.over, true);
}

static void target_open(struct target *t)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t->pair), 0);
	t->listen_fd = runtime_tcp_listen("127.0.0.1", 0, 4096, 0);
	ck_assert_int_ge(t->listen_fd, 0);
	t->port = bound_port(t->listen_fd);
	atomic_store(&t->blowing, false);
}

static void target_close(struct target *t)
{
	close(t->pair[0]);
	close(t->pair[1]);
	close(t->listen_fd);
}

/* A fresh storm on a new runtime: a target per core, and on each core
 * `first` (given its own target) and a writer feeding the next core's. */
static void storm_setup(enum storm_kind kind, unsigned cores, void (*first)(void *))
{
	struct runtime_config cfg;

	memset(&storm, 0, sizeof(storm));
	storm.kind = kind;
	storm.cores = cores;
	runtime_config_init(&cfg);
	cfg.cores = cores;
	ck_assert_int_eq(runtime_create(&storm.rt, &cfg), 0);
	for (unsigned i = 0; i < cores; i++)
		target_open(&storm.t[i]);
	for (unsigned i = 0; i < cores; i++) {
		ck_assert_int_eq(runtime_spawn_on(storm.rt, i, first, &storm.t[i]), 0);
		ck_assert_int_eq(runtime_spawn_on(storm.rt, i, fiber_writer,
		                                  &storm.t[(i + 1) % cores]), 0);
	}
}

/* The run has returned: stop the writers and free everything. */
static void storm_teardown(pthread_t writer)
{
	atomic_store(&storm.over, true);
	pthread_join(writer, NULL);
	runtime_destroy(storm.rt);
	for (unsigned i = 0; i < storm.cores; i++)
		target_close(&storm.t[i]);
}

static void run_storm(enum storm_kind kind, unsigned cores)
{
	pthread_t th;

	storm_setup(kind, cores, controller);
	storm.until = runtime_now() + STORM_SECONDS * 1000 * MS;
	atomic_store(&storm.controllers, cores);
	ck_assert_int_eq(pthread_create(&th, NULL, thread_writer, NULL), 0);
	ck_assert_int_eq(runtime_run(storm.rt), 0);
	storm_teardown(th);
	ck_assert_int_gt(atomic_load(&storm.rounds), 0);
	fprintf(stderr, "storm kind %d on %u core(s): %ld rounds, %ld accepted\n", kind, cores,
	        atomic_load(&storm.rounds), atomic_load(&storm.accepted));
}

START_TEST(test_race_cancel_recv_while_data_arrives)
{
	run_storm(CANCEL_RECV, 1 + (unsigned)_i);
}
END_TEST

START_TEST(test_race_cancel_accept_while_connections_arrive)
{
	run_storm(CANCEL_ACCEPT, 1 + (unsigned)_i);
}
END_TEST

START_TEST(test_race_deadline_recv_while_data_arrives)
{
	run_storm(DEADLINE_RECV, 1 + (unsigned)_i);
}
END_TEST

/* ------------------------------------------------------------ shutdown */

/* Receivers on every core recv until shut down while data arrives; a plain
 * thread shuts the runtime down at a random moment; runtime_run must
 * return, every time. */
static void forever_receiver(void *p)
{
	struct target *t = p;
	char buf[4];

	while (runtime_recv(t->pair[0], buf, sizeof(buf), 0) >= 0)
		;
}

/* The shutdown may come first: then the spawns are refused. */
static void spawn_receivers(void *p)
{
	for (int i = 0; i < RECEIVERS; i++) {
		int rc = runtime_spawn(runtime_current(), forever_receiver, p);
		ck_assert(rc == 0 || rc == -ESHUTDOWN);
	}
}

struct run_watch {
	struct runtime *rt;
	_Atomic bool returned;
	unsigned delay_us;
};

static void *shutter(void *p)
{
	struct run_watch *w = p;

	usleep(w->delay_us);
	/* Data stops first, so that only the shutdown can end a recv. */
	for (unsigned i = 0; i < storm.cores; i++)
		atomic_store(&storm.t[i].blowing, false);
	runtime_shutdown(w->rt);
	/* runtime_run must now return: wait for it, with a bound. */
	for (uint64_t waited = 0; !atomic_load(&w->returned); waited += MS) {
		ck_assert_msg(waited < STUCK_BOUND, "runtime_run still running %llu ms after "
		              "runtime_shutdown", (unsigned long long)(STUCK_BOUND / MS));
		usleep(1000);
	}
	return NULL;
}

START_TEST(test_race_shutdown_while_data_arrives)
{
	uint64_t until = runtime_now() + STORM_SECONDS * 1000 * MS;
	long runs = 0;

	srandom(42);
	while (runtime_now() < until) {
		struct run_watch w = { .delay_us = (unsigned)random() % 3000 };
		pthread_t writer, th;

		storm_setup(CANCEL_RECV, 2, spawn_receivers);
		w.rt = storm.rt;
		for (unsigned i = 0; i < storm.cores; i++)
			atomic_store(&storm.t[i].blowing, true);
		ck_assert_int_eq(pthread_create(&writer, NULL, thread_writer, NULL), 0);
		ck_assert_int_eq(pthread_create(&th, NULL, shutter, &w), 0);
		ck_assert_int_eq(runtime_run(w.rt), 0);
		atomic_store(&w.returned, true);
		pthread_join(th, NULL);
		storm_teardown(writer);
		runs++;
	}
	fprintf(stderr, "shutdown storm: %ld runs\n", runs);
}
END_TEST

static Suite *race_suite(void)
{
	Suite *s = suite_create("race");
	TCase *tc = tcase_create("storm");

	/* STORM_SECONDS of rounds, plus STUCK_BOUND for a failure to show. */
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_race_cancel_recv_while_data_arrives, 0, MAX_CORES);
	tcase_add_loop_test(tc, test_race_cancel_accept_while_connections_arrive, 0, MAX_CORES);
	tcase_add_loop_test(tc, test_race_deadline_recv_while_data_arrives, 0, MAX_CORES);
	tcase_add_test(tc, test_race_shutdown_while_data_arrives);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(race_suite)
