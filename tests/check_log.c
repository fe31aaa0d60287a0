/* SPDX-License-Identifier: MIT */
/*
 * check_log.c - runtime_log: a fiber logs into a full pipe and goes on at
 * once (its core runs on); the messages come out whole and in order once
 * the pipe is read, however long the reader pauses; past the bound they
 * are dropped and counted, never waited for; a failed write counts each
 * message it lost; any number of fds; what was logged before a shutdown is still written; a plain
 * thread writes at once; bad input is refused.
 */
#include "testutil.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define MESSAGES 200
#define MESSAGE_SIZE 1000 /* with its line number: 200 KiB, under the bound */

struct pipe_log {
	int p[2];
	_Atomic int ticks;
	int logged, stop;
	int over_rc;
	uint64_t dropped_before;
};

static void ticker(void *arg)
{
	struct pipe_log *l = arg;
	while (!l->stop) {
		atomic_fetch_add(&l->ticks, 1);
		runtime_yield();
	}
}

static void logger(void *arg)
{
	struct pipe_log *l = arg;
	static char pad[MESSAGE_SIZE];

	memset(pad, 'x', sizeof(pad) - 1);
	int before = atomic_load(&l->ticks);
	for (int i = 0; i < MESSAGES; i++)
		l->logged += runtime_log(l->p[1], "%05d %s\n", i, pad) > 0;
	/* Nothing has been read: the pipe is full, and yet the fiber went on
	 * and the ticker ran (the core was never blocked). */
	runtime_yield();
	ck_assert_int_gt(atomic_load(&l->ticks), before);
	l->dropped_before = runtime_log_dropped();
	static char big[300 * 1024];
	memset(big, 'y', sizeof(big));
	l->over_rc = runtime_log_write(l->p[1], big, 200 * 1024); /* over 256 KiB pending */
	l->stop = 1;
}

static void *drain_pipe(void *arg)
{
	struct pipe_log *l = arg;
	static char line[MESSAGE_SIZE + 8];
	FILE *in = fdopen(l->p[0], "r");
	int next = 0;

	/* The logger runs into a full pipe first; and a reader that pauses
	 * longer than the shutdown's grace loses nothing. */
	usleep(1500 * 1000);
	while (fgets(line, sizeof(line), in) && next < MESSAGES) {
		ck_assert_int_eq(atoi(line), next); /* in order */
		ck_assert_uint_eq(strlen(line), 6 + MESSAGE_SIZE); /* whole */
		next++;
	}
	fclose(in);
	return (void *)(intptr_t)next;
}

START_TEST(test_log_never_blocks_the_core)
{
	static struct pipe_log l;
	struct runtime *rt;
	pthread_t th;

	ck_assert_int_eq(pipe2(l.p, O_CLOEXEC), 0);
	fcntl(l.p[1], F_SETPIPE_SZ, 4096);
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, ticker, &l), 0);
	ck_assert_int_eq(runtime_spawn(rt, logger, &l), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, drain_pipe, &l), 0);
	ck_assert_int_eq(runtime_run(rt), 0); /* ends once the log is out */
	close(l.p[1]);
	void *got;
	pthread_join(th, &got);
	runtime_destroy(rt);
	ck_assert_int_eq(l.logged, MESSAGES);
	ck_assert_int_eq((intptr_t)got, MESSAGES);
	ck_assert_int_eq(l.over_rc, -EAGAIN);
	ck_assert_uint_eq(runtime_log_dropped(), l.dropped_before + 1); /* that one */
}
END_TEST

static void log_then_shutdown(void *arg)
{
	int fd = *(int *)arg;
	ck_assert_int_eq(runtime_log(fd, "last words %d\n", 42), 14);
	runtime_shutdown(runtime_current());
}

START_TEST(test_log_before_shutdown_still_written)
{
	int p[2];
	char buf[64];

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(run_fiber(NULL, log_then_shutdown, &p[1]), 0);
	close(p[1]);
	ssize_t n = read(p[0], buf, sizeof(buf));
	ck_assert_int_eq(n, 14);
	ck_assert_int_eq(memcmp(buf, "last words 42\n", 14), 0);
	close(p[0]);
}
END_TEST

/* Messages a failed write loses count one each; any number of fds. */
#define FDS 6
static void log_everywhere(void *arg)
{
	int *fds = arg;

	for (int i = 0; i < FDS; i++)
		ck_assert_int_eq(runtime_log(fds[i], "to %d\n", i), 5);
	for (int i = 0; i < 5; i++) /* its reader is gone: EPIPE */
		ck_assert_int_eq(runtime_log(fds[FDS], "lost %d\n", i), 7);
}

START_TEST(test_log_many_fds_and_lost_messages)
{
	int p[FDS + 1][2], w[FDS + 1];
	char buf[16];

	for (int i = 0; i <= FDS; i++) {
		ck_assert_int_eq(pipe2(p[i], O_CLOEXEC), 0);
		w[i] = p[i][1];
	}
	close(p[FDS][0]);
	uint64_t before = runtime_log_dropped();
	ck_assert_int_eq(run_fiber(NULL, log_everywhere, w), 0);
	ck_assert_uint_eq(runtime_log_dropped(), before + 5);
	for (int i = 0; i < FDS; i++) {
		ck_assert_int_eq(read(p[i][0], buf, sizeof(buf)), 5);
		ck_assert_int_eq(buf[3], '0' + i);
		close(p[i][0]);
		close(p[i][1]);
	}
	close(p[FDS][1]);
}
END_TEST

START_TEST(test_log_off_the_cores_and_bad_input)
{
	int p[2];
	char buf[16];

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(runtime_log(p[1], "plain %s", "thread"), 12);
	ck_assert_int_eq(read(p[0], buf, sizeof(buf)), 12);
	ck_assert_int_eq(runtime_log(-1, "x"), -EINVAL);
	ck_assert_int_eq(runtime_log(p[1], NULL), -EINVAL);
	ck_assert_int_eq(runtime_log_write(p[1], NULL, 1), -EINVAL);
	ck_assert_int_eq(runtime_log_write(p[1], buf, 257 * 1024), -EINVAL);
	ck_assert_int_eq(runtime_log_write(p[1], NULL, 0), 0);
	close(p[0]);
	close(p[1]);
}
END_TEST

static Suite *log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("log");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_log_never_blocks_the_core);
	tcase_add_test(tc, test_log_before_shutdown_still_written);
	tcase_add_test(tc, test_log_many_fds_and_lost_messages);
	tcase_add_test(tc, test_log_off_the_cores_and_bad_input);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(log_suite)
