/* SPDX-License-Identifier: MIT */
/*
 * check_group.c - fiber groups and cleanups. Groups: a wait that sees
 * every member end and keeps the first failure in time (members released
 * in a chosen order, so "first" is behaviour, not timing), cancel on
 * error, a cancel in the middle of work (also of members not yet run),
 * and every call with bad input, from the wrong core or thread, or after
 * a shutdown. Cleanups: children joined and I/O done after
 * runtime_shutdown, a cancel that arrives during a cleanup neither
 * interrupting its waits nor getting lost, a cleanup that overruns its
 * bound (its calls time out, shutdown waits for it, the fiber's deadline
 * comes back), nesting and misuse.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

/* Let every ready fiber of the core run. */
static void settle(void)
{
	for (int i = 0; i < 8; i++)
		runtime_yield();
}

static struct runtime *make_rt(unsigned cores)
{
	struct runtime_config cfg;
	struct runtime *rt;

	runtime_config_init(&cfg);
	cfg.cores = cores;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	return rt;
}

/* ------------------------------------------------------------ first error */

#define MEMBERS 3

static struct runtime_sem *gate[MEMBERS];
static int ended[MEMBERS];
static const int code[MEMBERS] = { 0, -EIO, -EPIPE };

/* Member k waits for its gate, then returns code[k] (or what the wait
 * returned, if it failed). */
static int gated(void *p)
{
	int k = (int)(intptr_t)p;
	int rc = runtime_sem_get(gate[k], NULL, -1);

	ended[k] = rc ? rc : 1;
	return rc ? rc : code[k];
}

static void first_error_main(void *p)
{
	struct runtime_group *g;
	int res = 12345;
	(void)p;

	ck_assert_int_eq(runtime_group_create(&g, 0), 0);
	ck_assert_int_eq(runtime_group_wait(g, -1, &res), 0); /* none: at once */
	ck_assert_int_eq(res, 0);
	for (int k = 0; k < MEMBERS; k++) {
		ck_assert_int_eq(runtime_sem_create(&gate[k], 0, 0), 0);
		ck_assert_int_eq(runtime_group_spawn(g, gated, (void *)(intptr_t)k), 0);
	}
	ck_assert_uint_eq(runtime_group_live(g), MEMBERS);
	settle();
	ck_assert_int_eq(runtime_group_wait(g, 0, &res), -ETIMEDOUT);
	ck_assert_int_eq(runtime_group_wait(g, 5 * MS, NULL), -ETIMEDOUT);
	ck_assert_int_eq(runtime_group_destroy(g), -EBUSY);
	/* Fail with -EIO first, then -EPIPE, then succeed. */
	for (int k = 1; k <= MEMBERS; k++) {
		ck_assert_int_eq(runtime_sem_post(gate[k % MEMBERS], NULL), 0);
		settle();
		ck_assert_uint_eq(runtime_group_live(g), (unsigned)(MEMBERS - k));
	}
	ck_assert_int_eq(runtime_group_wait(g, -1, &res), 0);
	ck_assert_int_eq(res, -EIO);
	for (int k = 0; k < MEMBERS; k++) /* no cancel without the flag */
		ck_assert_int_eq(ended[k], 1);
	/* A group lives on after a wait: a later member ends, the first
	 * result stays. */
	ck_assert_int_eq(runtime_group_spawn(g, gated, (void *)(intptr_t)0), 0);
	ck_assert_int_eq(runtime_sem_post(gate[0], NULL), 0);
	ck_assert_int_eq(runtime_group_wait(g, -1, &res), 0);
	ck_assert_int_eq(res, -EIO);
	ck_assert_int_eq(runtime_group_destroy(g), 0);
	for (int k = 0; k < MEMBERS; k++)
		ck_assert_int_eq(runtime_sem_destroy(gate[k]), 0);
}

START_TEST(test_group_wait_sees_every_member_and_keeps_first_error)
{
	memset(ended, 0, sizeof(ended));
	ck_assert_int_eq(run_fiber(NULL, first_error_main, NULL), 0);
}
END_TEST

/* -------------------------------------------------------- cancel on error */

static int fail_at_once(void *p)
{
	(void)p;
	runtime_yield();
	return -EIO;
}

static void cancel_on_error_main(void *p)
{
	struct runtime_group *g;
	int res = 0;
	(void)p;

	memset(ended, 0, sizeof(ended));
	ck_assert_int_eq(runtime_group_create(&g, RUNTIME_GROUP_CANCEL_ON_ERROR), 0);
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(runtime_sem_create(&gate[k], 0, 0), 0);
		ck_assert_int_eq(runtime_group_spawn(g, gated, (void *)(intptr_t)k), 0);
	}
	ck_assert_int_eq(runtime_group_spawn(g, fail_at_once, NULL), 0);
	ck_assert_int_eq(runtime_group_wait(g, -1, &res), 0);
	ck_assert_int_eq(res, -EIO); /* not the -ECANCELED that followed */
	ck_assert_int_eq(ended[0], -ECANCELED);
	ck_assert_int_eq(ended[1], -ECANCELED);
	ck_assert_int_eq(runtime_group_spawn(g, fail_at_once, NULL), -ECANCELED);
	ck_assert_uint_eq(runtime_group_live(g), 0);
	ck_assert_int_eq(runtime_group_destroy(g), 0);
	for (int k = 0; k < 2; k++)
		ck_assert_int_eq(runtime_sem_destroy(gate[k]), 0);
}

START_TEST(test_group_cancel_on_error_stops_the_rest)
{
	ck_assert_int_eq(run_fiber(NULL, cancel_on_error_main, NULL), 0);
}
END_TEST

/* ------------------------------------------------------- cancel mid-work */

#define WORKERS 4

static _Atomic int work_done[WORKERS];

static int worker(void *p)
{
	int k = (int)(intptr_t)p, rc;

	while ((rc = runtime_sleep(MS / 10)) == 0)
		atomic_fetch_add(&work_done[k], 1);
	return rc;
}

static int sleep_forever(void *p)
{
	(void)p;
	return runtime_sleep(UINT64_MAX);
}

static void cancel_mid_work_main(void *p)
{
	struct runtime_group *g;
	int res = 0;
	(void)p;

	ck_assert_int_eq(runtime_group_create(&g, 0), 0);
	for (int k = 0; k < WORKERS; k++)
		ck_assert_int_eq(runtime_group_spawn(g, worker, (void *)(intptr_t)k), 0);
	for (int k = 0; k < WORKERS; k++) /* every one is working */
		while (atomic_load(&work_done[k]) < 3)
			ck_assert_int_eq(runtime_sleep(MS), 0);
	ck_assert_int_eq(runtime_group_cancel(g), 0);
	ck_assert_int_eq(runtime_group_cancel(g), 0); /* again: no harm */
	ck_assert_int_eq(runtime_group_spawn(g, worker, NULL), -ECANCELED);
	ck_assert_int_eq(runtime_group_wait(g, -1, &res), 0);
	ck_assert_int_eq(res, -ECANCELED);
	ck_assert_uint_eq(runtime_group_live(g), 0);
	ck_assert_int_eq(runtime_group_destroy(g), 0);

	/* Members cancelled before they ever ran still run, and see it. */
	ck_assert_int_eq(runtime_group_create(&g, 0), 0);
	ck_assert_int_eq(runtime_group_spawn(g, sleep_forever, NULL), 0);
	ck_assert_int_eq(runtime_group_spawn(g, sleep_forever, NULL), 0);
	ck_assert_int_eq(runtime_group_cancel(g), 0);
	ck_assert_int_eq(runtime_group_wait(g, -1, &res), 0);
	ck_assert_int_eq(res, -ECANCELED);
	ck_assert_int_eq(runtime_group_destroy(g), 0);
}

START_TEST(test_group_cancel_mid_work)
{
	for (int k = 0; k < WORKERS; k++)
		atomic_store(&work_done[k], 0);
	ck_assert_int_eq(run_fiber(NULL, cancel_mid_work_main, NULL), 0);
}
END_TEST

/* ----------------------------------------------------------------- misuse */

static struct runtime_group *shared_group;
static _Atomic int other_done;

static int wait_own_group(void *p)
{
	(void)p;
	return runtime_group_wait(shared_group, -1, NULL);
}

static int noop_member(void *p)
{
	(void)p;
	return 0;
}

/* On core 1: every call on core 0's group but live is refused. */
static void other_core(void *p)
{
	int res;
	(void)p;

	ck_assert_int_eq(runtime_core_index(), 1);
	ck_assert_int_eq(runtime_group_spawn(shared_group, noop_member, NULL), -EPERM);
	ck_assert_int_eq(runtime_group_cancel(shared_group), -EPERM);
	ck_assert_int_eq(runtime_group_wait(shared_group, -1, &res), -EPERM);
	ck_assert_int_eq(runtime_group_destroy(shared_group), -EPERM);
	ck_assert_uint_eq(runtime_group_live(shared_group), 1);
	atomic_store(&other_done, 1);
}

static void *thread_calls(void *p)
{
	(void)p;
	ck_assert_int_eq(runtime_group_spawn(shared_group, noop_member, NULL), -EPERM);
	ck_assert_int_eq(runtime_group_cancel(shared_group), -EPERM);
	ck_assert_uint_eq(runtime_group_live(shared_group), 1);
	return NULL;
}

static void misuse_main(void *p)
{
	struct runtime_group *g;
	pthread_t th;
	int res = 0;
	(void)p;

	ck_assert_int_eq(runtime_group_create(NULL, 0), -EINVAL);
	ck_assert_int_eq(runtime_group_create(&g, 0x2), -EINVAL);
	ck_assert_int_eq(runtime_group_spawn(NULL, noop_member, NULL), -EINVAL);
	ck_assert_int_eq(runtime_group_cancel(NULL), -EINVAL);
	ck_assert_int_eq(runtime_group_wait(NULL, -1, &res), -EINVAL);
	ck_assert_int_eq(runtime_group_destroy(NULL), 0);
	ck_assert_int_eq(runtime_group_create(&shared_group, 0), 0);
	ck_assert_int_eq(runtime_group_spawn(shared_group, NULL, NULL), -EINVAL);

	/* A member that waits for its own group is refused. */
	ck_assert_int_eq(runtime_group_spawn(shared_group, wait_own_group, NULL), 0);
	ck_assert_int_eq(runtime_group_wait(shared_group, -1, &res), 0);
	ck_assert_int_eq(res, -EDEADLK);

	/* Another core, a plain thread: refused while a member lives. */
	ck_assert_int_eq(runtime_group_spawn(shared_group, sleep_forever, NULL), 0);
	ck_assert_int_eq(runtime_spawn_on(runtime_current(), 1, other_core, NULL), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, thread_calls, NULL), 0);
	pthread_join(th, NULL);
	while (!atomic_load(&other_done))
		ck_assert_int_eq(runtime_sleep(MS), 0);
	ck_assert_int_eq(runtime_group_cancel(shared_group), 0);
	ck_assert_int_eq(runtime_group_wait(shared_group, -1, &res), 0);

	/* After a shutdown, spawns are refused. */
	runtime_shutdown(runtime_current());
	ck_assert_int_eq(runtime_group_create(&g, 0), 0);
	ck_assert_int_eq(runtime_group_spawn(g, noop_member, NULL), -ESHUTDOWN);
	ck_assert_int_eq(runtime_group_destroy(g), 0);
	ck_assert_int_eq(runtime_group_destroy(shared_group), 0);
}

START_TEST(test_group_bad_input_wrong_core_and_thread)
{
	struct runtime *rt = make_rt(2);
	struct runtime_group *g;

	atomic_store(&other_done, 0);
	ck_assert_int_eq(runtime_group_create(&g, 0), -EPERM); /* no core */
	ck_assert_uint_eq(runtime_group_live(NULL), 0);
	ck_assert_int_eq(runtime_spawn_on(rt, 0, misuse_main, NULL), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
}
END_TEST

/* --------------------------------------------------------------- cleanup */

/* What the fibers of a cleanup test saw, checked after the run. */
static struct {
	int child_sleep, child_cleanup_sleep, child_end_yield;
	int before_begin, in_cleanup_yield, group_wait, group_res, join, join_res;
	int wrote, read, sleep, timed_wait, after_end_yield, after_end_read;
	int thread_posted;
} seen;

/* A child that waits for a shutdown, then cleans up itself. */
static int child_until_cancelled(void *p)
{
	struct runtime_cleanup cl;
	(void)p;

	seen.child_sleep = runtime_sleep(UINT64_MAX);
	ck_assert_int_eq(runtime_cleanup_begin(&cl, 10000 * MS), 0);
	seen.child_cleanup_sleep = runtime_sleep(MS);
	ck_assert_int_eq(runtime_cleanup_end(&cl), 0);
	seen.child_end_yield = runtime_yield();
	return 7;
}

static void *joinable_child(void *p)
{
	return (void *)(intptr_t)child_until_cancelled(p);
}

static void shutdown_soon(void *p)
{
	settle();
	runtime_shutdown(p);
}

/* After runtime_shutdown: join children, flush and read a reply, sleep,
 * wait on a semaphore - all inside a cleanup - then the cancel shows. */
static void shutdown_cleanup_main(void *p)
{
	struct runtime_cleanup cl;
	struct runtime_group *g;
	struct runtime_fiber *child;
	struct runtime_sem *s;
	int sv[2];
	char buf[4];
	void *res = NULL;
	(void)p;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(runtime_sem_create(&s, 0, 0), 0);
	ck_assert_int_eq(runtime_group_create(&g, 0), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(runtime_group_spawn(g, child_until_cancelled, NULL), 0);
	child = start(joinable_child, NULL);
	ck_assert_int_eq(runtime_spawn(runtime_current(), shutdown_soon, runtime_current()), 0);
	seen.before_begin = runtime_sleep(UINT64_MAX); /* until the shutdown */
	ck_assert_int_eq(runtime_cleanup_begin(&cl, 60000 * MS), 0);
	seen.in_cleanup_yield = runtime_yield();
	seen.group_wait = runtime_group_wait(g, -1, &seen.group_res);
	seen.join = runtime_fiber_join(child, &res);
	seen.join_res = (int)(intptr_t)res;
	seen.wrote = (int)runtime_write(sv[0], "bye", 3);
	seen.read = (int)runtime_read(sv[1], buf, sizeof(buf));
	seen.sleep = runtime_sleep(MS);
	seen.timed_wait = runtime_sem_get(s, NULL, MS);
	ck_assert_int_eq(runtime_cleanup_end(&cl), 0);
	seen.after_end_yield = runtime_yield();
	seen.after_end_read = (int)runtime_read(sv[1], buf, sizeof(buf));
	ck_assert_int_eq(runtime_group_destroy(g), 0);
	ck_assert_int_eq(runtime_sem_destroy(s), 0);
	runtime_close(sv[0]);
	runtime_close(sv[1]);
}

START_TEST(test_cleanup_joins_children_after_shutdown)
{
	memset(&seen, 0, sizeof(seen));
	ck_assert_int_eq(run_fiber(NULL, shutdown_cleanup_main, NULL), 0);
	ck_assert_int_eq(seen.child_sleep, -ECANCELED);
	ck_assert_int_eq(seen.child_cleanup_sleep, 0);
	ck_assert_int_eq(seen.child_end_yield, -ECANCELED);
	ck_assert_int_eq(seen.before_begin, -ECANCELED);
	ck_assert_int_eq(seen.in_cleanup_yield, 0);
	ck_assert_int_eq(seen.group_wait, 0);
	ck_assert_int_eq(seen.group_res, 7);
	ck_assert_int_eq(seen.join, 0);
	ck_assert_int_eq(seen.join_res, 7);
	ck_assert_int_eq(seen.wrote, 3);
	ck_assert_int_eq(seen.read, 3);
	ck_assert_int_eq(seen.sleep, 0);
	ck_assert_int_eq(seen.timed_wait, -ETIMEDOUT); /* it waited, uncancelled */
	ck_assert_int_eq(seen.after_end_yield, -ECANCELED);
	ck_assert_int_eq(seen.after_end_read, -ECANCELED);
}
END_TEST

/* A cancel that arrives while the fiber waits inside its cleanup does not
 * interrupt the wait (a semaphore, then a read), and shows after the end;
 * runtime_dump shows it held. */
static struct runtime_sem *held_sem;
static int held_fd[2];

static void *held_in_cleanup(void *p)
{
	struct runtime_cleanup cl;
	char buf[8];
	(void)p;

	ck_assert_int_eq(runtime_cleanup_begin(&cl, 60000 * MS), 0);
	seen.timed_wait = runtime_sem_get(held_sem, NULL, -1);
	seen.read = (int)runtime_read(held_fd[1], buf, sizeof(buf));
	ck_assert_int_eq(runtime_cleanup_end(&cl), 0);
	seen.after_end_yield = runtime_yield();
	seen.sleep = runtime_sleep(MS);
	return NULL;
}

static void cancel_during_main(void *p)
{
	struct runtime_sem_stats st;
	struct runtime_fiber *f;
	char *dump = NULL;
	size_t len = 0;
	(void)p;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, held_fd), 0);
	ck_assert_int_eq(runtime_sem_create(&held_sem, 0, 0), 0);
	f = start(held_in_cleanup, NULL);
	settle();
	ck_assert_int_eq(runtime_fiber_cancel(f), 0);
	settle();
	runtime_sem_stats(held_sem, &st);
	ck_assert_uint_eq(st.waiting, 1); /* still waiting */
	FILE *out = open_memstream(&dump, &len);
	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(runtime_dump(runtime_current(), out), 0);
	fclose(out);
	ck_assert_msg(strstr(dump, " cancelled in cleanup"), "dump: %s", dump);
	free(dump);
	ck_assert_int_eq(runtime_sem_post(held_sem, NULL), 0);
	settle();
	ck_assert_int_eq(runtime_fiber_cancel(f), 0); /* again, in its read */
	settle();
	ck_assert_int_eq(runtime_write(held_fd[0], "late", 4), 4);
	join(f);
	ck_assert_int_eq(runtime_sem_destroy(held_sem), 0);
	runtime_close(held_fd[0]);
	runtime_close(held_fd[1]);
}

START_TEST(test_cleanup_cancel_during_it_shows_after_end)
{
	memset(&seen, 0, sizeof(seen));
	ck_assert_int_eq(run_fiber(NULL, cancel_during_main, NULL), 0);
	ck_assert_int_eq(seen.timed_wait, 0);
	ck_assert_int_eq(seen.read, 4);
	ck_assert_int_eq(seen.after_end_yield, -ECANCELED);
	ck_assert_int_eq(seen.sleep, -ECANCELED);
}
END_TEST

static void *sleep_joinable(void *p)
{
	return (void *)(intptr_t)sleep_forever(p);
}

/* A cleanup past its bound: every call that would wait times out (a
 * sleep, a join, a read, a semaphore, a park), one that need not wait
 * succeeds, and the end gives the fiber its own deadline back. */
static void overrun_main(void *p)
{
	struct runtime_cleanup cl;
	struct runtime_fiber *child;
	struct runtime_sem *s;
	int fd[2];
	char c;
	(void)p;

	uint64_t own = runtime_now() + 3600000 * MS;
	runtime_deadline_set(own);
	child = start(sleep_joinable, NULL);
	ck_assert_int_eq(pipe(fd), 0);
	ck_assert_int_eq(runtime_sem_create(&s, 1, 0), 0);
	uint64_t before = runtime_now();
	ck_assert_int_eq(runtime_cleanup_begin(&cl, 30 * MS), 0);
	uint64_t bound = runtime_deadline_get();
	ck_assert_uint_ge(bound, before + 30 * MS);
	ck_assert_uint_le(bound, runtime_now() + 30 * MS);
	runtime_deadline_set(0); /* no clearing it */
	ck_assert_uint_eq(runtime_deadline_get(), bound);
	runtime_deadline_set(own); /* nor moving it later */
	ck_assert_uint_eq(runtime_deadline_get(), bound);
	runtime_deadline_set(bound - 1); /* earlier: yes */
	ck_assert_uint_eq(runtime_deadline_get(), bound - 1);
	runtime_deadline_set(0);
	ck_assert_uint_eq(runtime_deadline_get(), bound);
	ck_assert_int_eq(runtime_sleep(UINT64_MAX), -ETIMEDOUT);
	ck_assert_uint_ge(runtime_now(), bound);
	ck_assert_int_eq(runtime_fiber_join(child, NULL), -ETIMEDOUT);
	ck_assert_int_eq(runtime_read(fd[0], &c, 1), -ETIMEDOUT);
	ck_assert_int_eq(runtime_sem_get(s, NULL, -1), 0); /* free: no wait */
	ck_assert_int_eq(runtime_sem_get(s, NULL, -1), -ETIMEDOUT);
	ck_assert_int_eq(runtime_park(-1), -ETIMEDOUT);
	ck_assert_int_eq(runtime_cleanup_end(&cl), 0);
	ck_assert_uint_eq(runtime_deadline_get(), own);
	ck_assert_int_eq(runtime_yield(), 0);
	ck_assert_int_eq(runtime_fiber_cancel(child), 0);
	ck_assert_int_eq(join(child), -ECANCELED);
	ck_assert_int_eq(runtime_sem_destroy(s), 0);
	close(fd[0]);
	close(fd[1]);
}

START_TEST(test_cleanup_overruns_its_bound)
{
	ck_assert_int_eq(run_fiber(NULL, overrun_main, NULL), 0);
}
END_TEST

/* Shutdown waits for a fiber in a cleanup that never ends by itself: its
 * wait runs to the bound, then the fiber ends and runtime_run returns. */
static void stuck_in_cleanup(void *p)
{
	struct runtime_cleanup cl;
	struct runtime_sem *s;
	(void)p;

	ck_assert_int_eq(runtime_sem_create(&s, 0, 0), 0);
	ck_assert_int_eq(runtime_cleanup_begin(&cl, 30 * MS), 0);
	ck_assert_int_eq(runtime_spawn(runtime_current(), shutdown_soon, runtime_current()), 0);
	seen.timed_wait = runtime_sem_get(s, NULL, -1);
	ck_assert_int_eq(runtime_cleanup_end(&cl), 0);
	seen.after_end_yield = runtime_yield();
	ck_assert_int_eq(runtime_sem_destroy(s), 0);
}

START_TEST(test_cleanup_shutdown_waits_for_it_up_to_its_bound)
{
	memset(&seen, 0, sizeof(seen));
	ck_assert_int_eq(run_fiber(NULL, stuck_in_cleanup, NULL), 0);
	ck_assert_int_eq(seen.timed_wait, -ETIMEDOUT);
	ck_assert_int_eq(seen.after_end_yield, -ECANCELED);
}
END_TEST

/* Nesting (an inner bound never later than the outer, ends in order, the
 * shield held until the outer end) and misuse. */
static void nesting_main(void *p)
{
	struct runtime_cleanup a, b, c;
	(void)p;

	ck_assert_int_eq(runtime_cleanup_begin(NULL, MS), -EINVAL);
	ck_assert_int_eq(runtime_cleanup_begin(&a, -1), -EINVAL);
	ck_assert_int_eq(runtime_cleanup_end(NULL), -EINVAL);
	ck_assert_int_eq(runtime_cleanup_end(&a), -EINVAL); /* never begun */
	ck_assert_uint_eq(runtime_deadline_get(), 0);

	ck_assert_int_eq(runtime_fiber_cancel(runtime_fiber_self()), 0);
	ck_assert_int_eq(runtime_yield(), -ECANCELED);
	ck_assert_int_eq(runtime_cleanup_begin(&a, 3600000 * MS), 0);
	uint64_t outer = runtime_deadline_get();
	ck_assert_int_eq(runtime_yield(), 0);
	ck_assert_int_eq(runtime_cleanup_begin(&b, 7200000 * MS), 0);
	ck_assert_uint_eq(runtime_deadline_get(), outer); /* not later */
	ck_assert_int_eq(runtime_cleanup_end(&a), -EINVAL); /* not innermost */
	ck_assert_int_eq(runtime_cleanup_end(&b), 0);
	ck_assert_uint_eq(runtime_deadline_get(), outer);
	ck_assert_int_eq(runtime_yield(), 0); /* the outer one still holds it */
	ck_assert_int_eq(runtime_cleanup_begin(&c, 0), 0);
	ck_assert_uint_le(runtime_deadline_get(), runtime_now());
	ck_assert_int_eq(runtime_sleep(MS), -ETIMEDOUT);
	ck_assert_int_eq(runtime_cleanup_end(&c), 0);
	ck_assert_uint_eq(runtime_deadline_get(), outer);
	ck_assert_int_eq(runtime_sleep(0), 0);
	ck_assert_int_eq(runtime_cleanup_end(&a), 0);
	ck_assert_uint_eq(runtime_deadline_get(), 0);
	ck_assert_int_eq(runtime_yield(), -ECANCELED);
	ck_assert_int_eq(runtime_cleanup_end(&a), -EINVAL); /* ended already */

	/* A huge bound saturates; a fiber may end inside a cleanup. */
	ck_assert_int_eq(runtime_cleanup_begin(&a, INT64_MAX), 0);
	ck_assert_int_eq(runtime_yield(), 0);
}

START_TEST(test_cleanup_nesting_and_misuse)
{
	struct runtime_cleanup cl;

	ck_assert_int_eq(runtime_cleanup_begin(&cl, MS), -EPERM);
	ck_assert_int_eq(runtime_cleanup_end(&cl), -EPERM);
	ck_assert_int_eq(run_fiber(NULL, nesting_main, NULL), 0);
}
END_TEST

static Suite *group_suite(void)
{
	Suite *s = suite_create("group");
	TCase *tc;

	tc = tcase_create("group");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_group_wait_sees_every_member_and_keeps_first_error);
	tcase_add_test(tc, test_group_cancel_on_error_stops_the_rest);
	tcase_add_test(tc, test_group_cancel_mid_work);
	tcase_add_test(tc, test_group_bad_input_wrong_core_and_thread);
	suite_add_tcase(s, tc);

	tc = tcase_create("cleanup");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_cleanup_joins_children_after_shutdown);
	tcase_add_test(tc, test_cleanup_cancel_during_it_shows_after_end);
	tcase_add_test(tc, test_cleanup_overruns_its_bound);
	tcase_add_test(tc, test_cleanup_shutdown_waits_for_it_up_to_its_bound);
	tcase_add_test(tc, test_cleanup_nesting_and_misuse);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(group_suite)
