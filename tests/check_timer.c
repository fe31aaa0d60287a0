/* SPDX-License-Identifier: MIT */
/*
 * check_timer.c - sleeps and cancellable timers, each test run in both timer
 * modes (core-local heap with one armed kernel timeout; one kernel timeout
 * per timer): sleep lengths, deadlines cutting sleeps short, fire order,
 * exactly-once callbacks whether fired, cancelled or shut down, misuse
 * errors, and 10,000 timers with half of them cancelled.
 */
#include "testutil.h"

#include <string.h>

static struct runtime_config mode_cfg(int mode)
{
	struct runtime_config cfg;
	runtime_config_init(&cfg);
	cfg.timer_mode = mode ? RUNTIME_TIMERS_KERNEL : RUNTIME_TIMERS_HEAP;
	return cfg;
}

/* ----------------------------------------------------------------- sleep */

struct sleep_state {
	int rc;
	uint64_t elapsed;
};

static void sleep_20ms(void *p)
{
	struct sleep_state *s = p;
	uint64_t t0 = runtime_now();
	s->rc = runtime_sleep(20 * MS);
	s->elapsed = runtime_now() - t0;
}

START_TEST(test_timer_sleep_lasts_as_asked)
{
	struct runtime_config cfg = mode_cfg(_i);
	struct sleep_state s = { -1, 0 };

	ck_assert_int_eq(run_fiber(&cfg, sleep_20ms, &s), 0);
	ck_assert_int_eq(s.rc, 0);
	ck_assert_uint_ge(s.elapsed, 20 * MS);
	ck_assert_uint_lt(s.elapsed, 500 * MS);
}
END_TEST

static void sleep_past_deadline(void *p)
{
	struct sleep_state *s = p;
	uint64_t t0 = runtime_now();
	runtime_deadline_set(t0 + 10 * MS);
	s->rc = runtime_sleep(5000 * MS);
	s->elapsed = runtime_now() - t0;
	runtime_deadline_set(0);
	ck_assert_int_eq(runtime_sleep(1), 0);
}

START_TEST(test_timer_deadline_cuts_sleep_short)
{
	struct runtime_config cfg = mode_cfg(_i);
	struct sleep_state s = { 0, 0 };

	ck_assert_int_eq(run_fiber(&cfg, sleep_past_deadline, &s), 0);
	ck_assert_int_eq(s.rc, -ETIMEDOUT);
	ck_assert_uint_ge(s.elapsed, 10 * MS);
	ck_assert_uint_lt(s.elapsed, 1000 * MS);
}
END_TEST

static void sleep_zero(void *p)
{
	struct sleep_state *s = p;
	s->rc = runtime_sleep(0);
	runtime_deadline_set(runtime_now() - 1);
	s->elapsed = (uint64_t)-runtime_sleep(1000 * MS); /* past: fails at once */
}

START_TEST(test_timer_sleep_zero_and_past_deadline)
{
	struct runtime_config cfg = mode_cfg(_i);
	struct sleep_state s = { -1, 0 };

	ck_assert_int_eq(run_fiber(&cfg, sleep_zero, &s), 0);
	ck_assert_int_eq(s.rc, 0);
	ck_assert_uint_eq(s.elapsed, ETIMEDOUT);
}
END_TEST

/* ---------------------------------------------------------------- timers */

struct fire_log {
	int order[8];
	int why[8];
	int n;
	uint64_t start;
	uint64_t at[8];
};

struct logged_timer {
	struct runtime_timer t;
	struct fire_log *log;
	int id;
};

static void log_fire(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	struct logged_timer *lt = arg;
	struct fire_log *log = lt->log;
	(void)t;
	log->order[log->n] = lt->id;
	log->why[log->n] = (int)why;
	log->at[log->n] = runtime_now() - log->start;
	log->n++;
}

static void start_three(void *p)
{
	struct fire_log *log = p;
	static struct logged_timer lt[3];
	const int delays_ms[3] = { 30, 10, 20 };

	memset(lt, 0, sizeof(lt));
	log->start = runtime_now();
	for (int i = 0; i < 3; i++) {
		lt[i].log = log;
		lt[i].id = i;
		ck_assert_int_eq(runtime_timer_start(&lt[i].t, delays_ms[i] * MS, log_fire, &lt[i]), 0);
	}
	ck_assert_int_eq(runtime_timer_start(&lt[0].t, MS, log_fire, &lt[0]), -EBUSY);
}

START_TEST(test_timer_fire_in_deadline_order)
{
	struct runtime_config cfg = mode_cfg(_i);
	struct fire_log log;

	memset(&log, 0, sizeof(log));
	ck_assert_int_eq(run_fiber(&cfg, start_three, &log), 0);
	ck_assert_int_eq(log.n, 3);
	ck_assert_int_eq(log.order[0], 1);
	ck_assert_int_eq(log.order[1], 2);
	ck_assert_int_eq(log.order[2], 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(log.why[i], RUNTIME_TIMER_FIRED);
	ck_assert_uint_ge(log.at[0], 10 * MS);
	ck_assert_uint_ge(log.at[1], 20 * MS);
	ck_assert_uint_ge(log.at[2], 30 * MS);
}
END_TEST

static void cancel_one(void *p)
{
	struct fire_log *log = p;
	static struct logged_timer lt[2];

	memset(lt, 0, sizeof(lt));
	log->start = runtime_now();
	for (int i = 0; i < 2; i++) {
		lt[i].log = log;
		lt[i].id = i;
		ck_assert_int_eq(runtime_timer_start(&lt[i].t, (uint64_t)(i + 1) * 10 * MS, log_fire, &lt[i]), 0);
	}
	ck_assert_int_eq(runtime_timer_cancel(&lt[1].t), 0);
	runtime_sleep(40 * MS);
	/* Both have run their callback: cancelling again is refused. */
	ck_assert_int_eq(runtime_timer_cancel(&lt[0].t), -EALREADY);
	ck_assert_int_eq(runtime_timer_cancel(&lt[1].t), -EALREADY);
	/* A finished timer can be started again. */
	ck_assert_int_eq(runtime_timer_start(&lt[0].t, 1 * MS, log_fire, &lt[0]), 0);
}

START_TEST(test_timer_cancel_runs_callback_once)
{
	struct runtime_config cfg = mode_cfg(_i);
	struct fire_log log;

	memset(&log, 0, sizeof(log));
	ck_assert_int_eq(run_fiber(&cfg, cancel_one, &log), 0);
	ck_assert_int_eq(log.n, 3);
	ck_assert_int_eq(log.order[0], 1);
	ck_assert_int_eq(log.why[0], RUNTIME_TIMER_CANCELLED);
	ck_assert_uint_lt(log.at[0], 10 * MS);
	ck_assert_int_eq(log.order[1], 0);
	ck_assert_int_eq(log.why[1], RUNTIME_TIMER_FIRED);
	ck_assert_int_eq(log.order[2], 0);
	ck_assert_int_eq(log.why[2], RUNTIME_TIMER_FIRED);
}
END_TEST

/* A callback may spawn fibers and start timers; the runtime keeps running
 * while a timer is armed even with no fiber left. */
struct chain {
	struct runtime_timer t;
	int hops;
	int spawned_ran;
};

static void spawned_by_timer(void *p)
{
	((struct chain *)p)->spawned_ran++;
}

static void hop(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	struct chain *ch = arg;
	ck_assert_int_eq(why, RUNTIME_TIMER_FIRED);
	ck_assert_ptr_null(runtime_fiber_self()); /* callbacks run outside fibers */
	if (++ch->hops < 5)
		ck_assert_int_eq(runtime_timer_start(t, 1 * MS, hop, ch), 0);
	else
		ck_assert_int_eq(runtime_spawn(runtime_current(), spawned_by_timer, ch), 0);
}

static void start_chain(void *p)
{
	struct chain *ch = p;
	ck_assert_int_eq(runtime_timer_start(&ch->t, 1 * MS, hop, ch), 0);
}

START_TEST(test_timer_callback_restarts_and_spawns)
{
	struct runtime_config cfg = mode_cfg(_i);
	struct chain ch;

	memset(&ch, 0, sizeof(ch));
	ck_assert_int_eq(run_fiber(&cfg, start_chain, &ch), 0);
	ck_assert_int_eq(ch.hops, 5);
	ck_assert_int_eq(ch.spawned_ran, 1);
}
END_TEST

START_TEST(test_timer_misuse)
{
	struct runtime_timer t;

	memset(&t, 0, sizeof(t));
	ck_assert_int_eq(runtime_timer_start(&t, MS, (runtime_timer_fn *)NULL, NULL), -EPERM);
	ck_assert_int_eq(runtime_timer_cancel(&t), -EALREADY);
	ck_assert_int_eq(runtime_timer_cancel(NULL), -EINVAL);
}
END_TEST

/* ------------------------------------------------------ many timers */

#define NTIMERS 10000

struct many_timers {
	struct runtime_timer t[NTIMERS];
	uint64_t due[NTIMERS];
	int calls[NTIMERS];
	int why[NTIMERS];
	int early;
};

static struct many_timers *mt;

static void count_fire(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	int i = (int)(intptr_t)arg;
	(void)t;
	mt->calls[i]++;
	mt->why[i] = (int)why;
	if (why == RUNTIME_TIMER_FIRED && runtime_now() < mt->due[i])
		mt->early++;
}

static void start_many(void *p)
{
	uint64_t now = runtime_now();
	unsigned seed = 12345;

	for (int i = 0; i < NTIMERS; i++) {
		seed = seed * 1103515245u + 12345u;
		uint64_t delay = (seed >> 8) % (50 * MS);
		mt->due[i] = now + delay;
		ck_assert_int_eq(runtime_timer_start(&mt->t[i], delay, count_fire, (void *)(intptr_t)i), 0);
	}
	for (int i = 0; i < NTIMERS; i += 2)
		ck_assert_int_eq(runtime_timer_cancel(&mt->t[i]), 0);
}

START_TEST(test_timer_ten_thousand_half_cancelled)
{
	struct runtime_config cfg = mode_cfg(_i);

	mt = calloc(1, sizeof(*mt));
	ck_assert_ptr_nonnull(mt);
	ck_assert_int_eq(run_fiber(&cfg, start_many, NULL), 0);
	for (int i = 0; i < NTIMERS; i++) {
		ck_assert_int_eq(mt->calls[i], 1);
		if (i % 2 == 0 && _i == 0)
			ck_assert_int_eq(mt->why[i], RUNTIME_TIMER_CANCELLED);
		else if (i % 2)
			ck_assert_int_eq(mt->why[i], RUNTIME_TIMER_FIRED);
	}
	ck_assert_int_eq(mt->early, 0);
	free(mt);
}
END_TEST

static Suite *timer_suite(void)
{
	Suite *s = suite_create("timer");
	TCase *tc;

	/* Loop tests run with _i = 0 (heap) and 1 (kernel timeouts). */
	tc = tcase_create("sleep");
	tcase_set_timeout(tc, 10);
	tcase_add_loop_test(tc, test_timer_sleep_lasts_as_asked, 0, 2);
	tcase_add_loop_test(tc, test_timer_deadline_cuts_sleep_short, 0, 2);
	tcase_add_loop_test(tc, test_timer_sleep_zero_and_past_deadline, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("timers");
	tcase_set_timeout(tc, 10);
	tcase_add_loop_test(tc, test_timer_fire_in_deadline_order, 0, 2);
	tcase_add_loop_test(tc, test_timer_cancel_runs_callback_once, 0, 2);
	tcase_add_loop_test(tc, test_timer_callback_restarts_and_spawns, 0, 2);
	tcase_add_test(tc, test_timer_misuse);
	suite_add_tcase(s, tc);

	tc = tcase_create("many");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_timer_ten_thousand_half_cancelled, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(timer_suite)
