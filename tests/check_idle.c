/* SPDX-License-Identifier: MIT */
/*
 * check_idle - a receive stream waiting for its next bytes with no fiber
 * (runtime_stream_idle). Bytes, the end of stream, the deadline, a drain
 * and a shutdown each start the continuation exactly once, in a new fiber,
 * with the right reason; bytes already queued, or the end, need no wait
 * (1, fn never runs); while it
 * waits no fiber lives, the run goes on (a lone core takes it for no
 * deadlock), and the stream answers -EBUSY to everything else; misuse
 * gets a clear error and leaves fn unrun.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* One idle stream and what its continuation saw. */
struct idler {
	int fd[2];                  /* fd[1] is the stream's */
	struct runtime_stream *s;
	uint64_t waiter_id;         /* the fiber that began the wait */
	uint64_t deadline;
	_Atomic int runs;
	int why;
	uint64_t fiber_id;          /* the continuation's fiber */
	uint64_t woke_at;
	char got[64];
	ssize_t got_len;
	ssize_t after_rc;           /* a blocking call in the continuation */
	bool thread_writes;         /* fd[0] is a thread's: it closes it */
};

static uint64_t self_id(void)
{
	return runtime_fiber_id(runtime_fiber_self());
}

/* The continuation: note everything, read what came, close. */
static void resumed(void *arg, int why)
{
	struct idler *d = arg;

	atomic_fetch_add(&d->runs, 1);
	d->why = why;
	d->fiber_id = self_id();
	d->woke_at = runtime_now();
	if (why == 0)
		d->got_len = runtime_stream_recv(d->s, d->got, sizeof(d->got) - 1);
	d->after_rc = runtime_sleep(0);
	ck_assert_int_eq(runtime_stream_close(d->s), 0);
	if (!d->thread_writes) /* else the bytes may be here before write() returned */
		runtime_close(d->fd[0]);
	runtime_close(d->fd[1]);
}

/* In a fiber: a pair whose server side waits idle. */
static void idle_begin(struct idler *d, uint64_t deadline)
{
	tcp_pair(d->fd);
	ck_assert_int_eq(runtime_stream_open(&d->s, d->fd[1]), 0);
	d->waiter_id = self_id();
	d->deadline = deadline;
	ck_assert_int_eq(runtime_stream_idle(d->s, deadline, resumed, d), 0);
}

/* ------------------------------------------------------------ wake-ups */

static void write_later(void *arg)
{
	struct idler *d = arg;

	runtime_sleep(30 * MS);
	/* The stream's waiter has ended, and nothing holds the idle stream:
	 * this fiber is the only one alive. */
	ck_assert_uint_eq(fibers_live(runtime_current()), 1);
	ck_assert_int_eq(atomic_load(&d->runs), 0);
	ck_assert_int_eq(runtime_write_all(d->fd[0], "hello", 5, NULL), 5);
}

static void bytes_main(void *arg)
{
	idle_begin(arg, 0);
	ck_assert_int_eq(runtime_spawn(runtime_current(), write_later, arg), 0);
}

START_TEST(test_bytes_start_the_continuation_in_a_new_fiber)
{
	struct idler d = { 0 };

	ck_assert_int_eq(run_fiber(NULL, bytes_main, &d), 0);
	ck_assert_int_eq(atomic_load(&d.runs), 1);
	ck_assert_int_eq(d.why, 0);
	ck_assert_uint_ne(d.fiber_id, d.waiter_id);
	ck_assert_int_eq(d.got_len, 5);
	ck_assert_str_eq(d.got, "hello");
	ck_assert_int_eq(d.after_rc, 0);
}
END_TEST

static void queued_main(void *arg)
{
	struct idler *d = arg;
	char c;

	tcp_pair(d->fd);
	ck_assert_int_eq(runtime_stream_open(&d->s, d->fd[1]), 0);
	ck_assert_int_eq(runtime_write_all(d->fd[0], "xyz", 3, NULL), 3);
	ck_assert_int_eq(runtime_stream_recv(d->s, &c, 1), 1); /* arms it */
	for (int i = 0; i < 10000 && runtime_stream_buffered(d->s) < 2; i++)
		runtime_sleep(MS);
	ck_assert_uint_eq(runtime_stream_buffered(d->s), 2);
	/* A read would not wait: nothing waits, fn never runs. */
	ck_assert_int_eq(runtime_stream_idle(d->s, 0, resumed, d), 1);
	char buf[8];
	ck_assert_int_eq(runtime_stream_recv(d->s, buf, sizeof(buf)), 2);
	ck_assert_int_eq(memcmp(buf, "yz", 2), 0);
	/* Nor after the end of stream. */
	ck_assert_int_eq(runtime_sock_shutdown(d->fd[0], SHUT_WR), 0);
	ck_assert_int_eq(runtime_stream_recv(d->s, buf, sizeof(buf)), 0);
	ck_assert_int_eq(runtime_stream_idle(d->s, 0, resumed, d), 1);
	ck_assert_int_eq(runtime_stream_close(d->s), 0);
	runtime_close(d->fd[0]);
	runtime_close(d->fd[1]);
}

START_TEST(test_queued_bytes_or_the_end_need_no_wait)
{
	struct idler d = { 0 };

	ck_assert_int_eq(run_fiber(NULL, queued_main, &d), 0);
	ck_assert_int_eq(atomic_load(&d.runs), 0);
}
END_TEST

static void close_later(void *arg)
{
	struct idler *d = arg;

	runtime_sleep(20 * MS);
	ck_assert_int_eq(runtime_sock_shutdown(d->fd[0], SHUT_WR), 0);
}

static void eof_main(void *arg)
{
	idle_begin(arg, 0);
	ck_assert_int_eq(runtime_spawn(runtime_current(), close_later, arg), 0);
}

START_TEST(test_end_of_stream_starts_it)
{
	struct idler d = { 0 };

	ck_assert_int_eq(run_fiber(NULL, eof_main, &d), 0);
	ck_assert_int_eq(atomic_load(&d.runs), 1);
	ck_assert_int_eq(d.why, 0);
	ck_assert_int_eq(d.got_len, 0);
}
END_TEST

static void deadline_main(void *arg)
{
	idle_begin(arg, runtime_now() + 50 * MS);
}

START_TEST(test_the_deadline_starts_it_with_etimedout)
{
	struct idler d = { 0 };

	ck_assert_int_eq(run_fiber(NULL, deadline_main, &d), 0);
	ck_assert_int_eq(atomic_load(&d.runs), 1);
	ck_assert_int_eq(d.why, -ETIMEDOUT);
	ck_assert_uint_ge(d.woke_at, d.deadline);
	ck_assert_int_eq(d.after_rc, 0); /* a deadline of the wait, not of the fiber */
}
END_TEST

/* ----------------------------------------------------- drain, shutdown */

static struct idler drained[2];

static void drain_later(void *arg)
{
	(void)arg;
	runtime_sleep(20 * MS);
	ck_assert_int_eq(runtime_drain(runtime_current(), 10 * 1000 * MS), 0);
	idle_begin(&drained[1], 0); /* after the drain began: at once */
}

static void drain_main(void *arg)
{
	(void)arg;
	idle_begin(&drained[0], 0);
	ck_assert_int_eq(runtime_spawn(runtime_current(), drain_later, NULL), 0);
}

START_TEST(test_a_drain_starts_it_with_eshutdown)
{
	ck_assert_int_eq(run_fiber(NULL, drain_main, NULL), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(atomic_load(&drained[i].runs), 1);
		ck_assert_int_eq(drained[i].why, -ESHUTDOWN);
		ck_assert_int_eq(drained[i].after_rc, 0);
	}
}
END_TEST

static void shutdown_later(void *arg)
{
	(void)arg;
	runtime_sleep(20 * MS);
	runtime_shutdown(runtime_current());
}

static void shutdown_main(void *arg)
{
	idle_begin(arg, 0);
	ck_assert_int_eq(runtime_spawn(runtime_current(), shutdown_later, NULL), 0);
}

START_TEST(test_a_shutdown_starts_it_cancelled)
{
	struct idler d = { 0 };

	ck_assert_int_eq(run_fiber(NULL, shutdown_main, &d), 0);
	ck_assert_int_eq(atomic_load(&d.runs), 1);
	ck_assert_int_eq(d.why, -ECANCELED);
	ck_assert_int_eq(d.after_rc, -ECANCELED);
}
END_TEST

/* -------------------------------------------------- no fiber, the run */

static void *write_from_thread(void *arg)
{
	struct idler *d = arg;

	usleep(100 * 1000);
	ck_assert_int_eq(write(d->fd[0], "late", 4), 4);
	close(d->fd[0]);
	return NULL;
}

static pthread_t writer_thread;

static void lone_main(void *arg)
{
	idle_begin(arg, 0);
	ck_assert_int_eq(pthread_create(&writer_thread, NULL, write_from_thread, arg), 0);
}

/* Nothing but the idle stream is left, on a lone core: the run waits for
 * its bytes (not -EDEADLK, not an early return). */
START_TEST(test_the_run_goes_on_while_a_stream_idles)
{
	struct idler d = { .thread_writes = true };

	ck_assert_int_eq(run_fiber(NULL, lone_main, &d), 0);
	pthread_join(writer_thread, NULL);
	ck_assert_int_eq(atomic_load(&d.runs), 1);
	ck_assert_int_eq(d.got_len, 4);
	ck_assert_str_eq(d.got, "late");
}
END_TEST

#define MANY 200

static struct idler many[MANY];

static void poke_all(void *arg)
{
	(void)arg;
	for (int i = 0; i < 2000 && fibers_live(runtime_current()) > 1; i++)
		runtime_sleep(MS);
	ck_assert_uint_eq(fibers_live(runtime_current()), 1); /* MANY idle streams, no fiber */
	for (int i = 0; i < MANY; i++)
		ck_assert_int_eq(runtime_write_all(many[i].fd[0], "ok", 2, NULL), 2);
}

static void many_waiter(void *arg)
{
	idle_begin(arg, 0);
}

static void many_main(void *arg)
{
	(void)arg;
	for (int i = 0; i < MANY; i++)
		ck_assert_int_eq(runtime_spawn(runtime_current(), many_waiter, &many[i]), 0);
	ck_assert_int_eq(runtime_spawn(runtime_current(), poke_all, NULL), 0);
}

START_TEST(test_many_idle_streams_hold_no_fiber)
{
	ck_assert_int_eq(run_fiber(NULL, many_main, NULL), 0);
	for (int i = 0; i < MANY; i++) {
		ck_assert_int_eq(atomic_load(&many[i].runs), 1);
		ck_assert_int_eq(many[i].got_len, 2);
	}
}
END_TEST

/* --------------------------------------------------------------- misuse */

struct elsewhere {
	struct runtime_stream *s;
	int rc;
	struct runtime_waitgroup done;
};

static void never(void *arg, int why)
{
	(void)arg;
	(void)why;
	ck_abort_msg("a continuation ran after its wait failed");
}

static void other_core(void *arg)
{
	struct elsewhere *e = arg;

	e->rc = runtime_stream_idle(e->s, 0, never, NULL);
	runtime_waitgroup_done(&e->done);
}

/* While it idles: every call on the stream is -EBUSY. */
static void busy_checks(struct idler *d)
{
	const void *p;
	char c;

	ck_assert_int_eq(runtime_stream_recv(d->s, &c, 1), -EBUSY);
	ck_assert_int_eq(runtime_stream_peek(d->s, &p), -EBUSY);
	ck_assert_int_eq(runtime_stream_consume(d->s, 0), -EBUSY);
	ck_assert_int_eq(runtime_stream_close(d->s), -EBUSY);
	ck_assert_int_eq(runtime_stream_idle(d->s, 0, never, NULL), -EBUSY);
	ck_assert_int_eq(runtime_write_all(d->fd[0], "!", 1, NULL), 1);
}

static void misuse_main(void *arg)
{
	struct idler *d = arg;
	struct runtime_stream *s;
	int fd[2];

	tcp_pair(fd);
	ck_assert_int_eq(runtime_stream_open(&s, fd[1]), 0);
	ck_assert_int_eq(runtime_stream_idle(NULL, 0, never, NULL), -EINVAL);
	ck_assert_int_eq(runtime_stream_idle(s, 0, NULL, NULL), -EINVAL);
	struct elsewhere e = { .s = s, .done = RUNTIME_WAITGROUP_INIT };
	runtime_waitgroup_add(&e.done, 1);
	ck_assert_int_eq(runtime_spawn_on(runtime_current(), 1, other_core, &e), 0);
	ck_assert_int_eq(runtime_waitgroup_wait(&e.done, -1), 0);
	ck_assert_int_eq(e.rc, -EPERM);
	runtime_deadline_set(runtime_now() - 1); /* the caller's own state */
	ck_assert_int_eq(runtime_stream_idle(s, 0, never, NULL), -ETIMEDOUT);
	runtime_deadline_set(0);
	ck_assert_int_eq(runtime_stream_close(s), 0);
	runtime_close(fd[0]);
	runtime_close(fd[1]);

	idle_begin(d, 0);
	busy_checks(d);
}

START_TEST(test_misuse_gets_clear_errors_and_fn_never_runs)
{
	struct runtime_config cfg;
	struct idler d = { 0 };

	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(run_fiber(&cfg, misuse_main, &d), 0);
	ck_assert_int_eq(atomic_load(&d.runs), 1);
	ck_assert_int_eq(d.got_len, 1);
}
END_TEST

static Suite *idle_suite(void)
{
	Suite *s = suite_create("idle");
	TCase *tc = tcase_create("idle");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bytes_start_the_continuation_in_a_new_fiber);
	tcase_add_test(tc, test_queued_bytes_or_the_end_need_no_wait);
	tcase_add_test(tc, test_end_of_stream_starts_it);
	tcase_add_test(tc, test_the_deadline_starts_it_with_etimedout);
	tcase_add_test(tc, test_a_drain_starts_it_with_eshutdown);
	tcase_add_test(tc, test_a_shutdown_starts_it_cancelled);
	tcase_add_test(tc, test_the_run_goes_on_while_a_stream_idles);
	tcase_add_test(tc, test_many_idle_streams_hold_no_fiber);
	tcase_add_test(tc, test_misuse_gets_clear_errors_and_fn_never_runs);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(idle_suite)
