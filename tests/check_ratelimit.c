/* SPDX-License-Identifier: MIT */
/*
 * check_ratelimit.c - the toolkit's rate limiter: every call with bad
 * input; a full bucket that empties and refills up to its burst and no
 * further; waiters served in arrival order with no try barging past them;
 * a take that would outlast its timeout or deadline failing at once with
 * nothing taken; cancelled waiters giving their reservations back; and
 * fibers of two cores plus a plain thread taking at once, never more than
 * burst + rate * elapsed between them. Rates are chosen so that what is
 * asserted is behaviour: a bucket that must stay empty refills one token
 * in 1000 s, and elapsed time only ever loosens a bound.
 *
 * The keyed limiter: bad input; keys (binary ones, and one a prefix of
 * another) with buckets of their own and the wait until a take fits;
 * exactly max_keys held, the least recently used evicted (and full when
 * seen again); a refill after the wait it named; and two threads on the
 * same keys never past burst + rate * elapsed for each.
 */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#define SLOW 0.001 /* one token in 1000 s: empty stays empty */

static void settle(void)
{
	for (int i = 0; i < 8; i++)
		runtime_yield();
}

/* -------------------------------------------------------------- bad input */

static void bad_input_main(void *p)
{
	struct runtime_ratelimit *rl = p;

	ck_assert_int_eq(runtime_ratelimit_take(NULL, 1, -1), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_take(rl, 3, -1), -EINVAL); /* > burst */
	ck_assert_int_eq(runtime_ratelimit_take(rl, 0, -1), 0);
	ck_assert_int_eq(runtime_ratelimit_take(rl, 2, -1), 0);
	ck_assert_int_eq(runtime_ratelimit_available(rl), 0);
}

START_TEST(test_ratelimit_bad_input)
{
	struct runtime_ratelimit *rl;
	const double bad[] = { 0, -1, 1e-4, 1e13, NAN, INFINITY, -INFINITY };

	ck_assert_int_eq(runtime_ratelimit_create(NULL, 1, 1), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(runtime_ratelimit_create(&rl, bad[i], 1), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_create(&rl, 1, 0), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_create(&rl, 1e12, UINT32_MAX), 0);
	ck_assert_int_eq(runtime_ratelimit_try_take(rl, UINT32_MAX), 0);
	ck_assert_int_eq(runtime_ratelimit_destroy(rl), 0);
	ck_assert_int_eq(runtime_ratelimit_try_take(NULL, 1), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_available(NULL), 0);
	ck_assert_int_eq(runtime_ratelimit_destroy(NULL), 0);

	ck_assert_int_eq(runtime_ratelimit_create(&rl, SLOW, 2), 0);
	ck_assert_int_eq(runtime_ratelimit_available(rl), 2); /* starts full */
	ck_assert_int_eq(runtime_ratelimit_try_take(rl, 3), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_try_take(rl, 0), 0);
	ck_assert_int_eq(runtime_ratelimit_take(rl, 1, -1), -EPERM); /* no fiber */
	ck_assert_int_eq(runtime_ratelimit_available(rl), 2);
	ck_assert_int_eq(run_fiber(NULL, bad_input_main, rl), 0);
	ck_assert_int_eq(runtime_ratelimit_destroy(rl), 0);
}
END_TEST

/* ------------------------------------------------------------ burst, refill */

static void refill_main(void *p)
{
	struct runtime_ratelimit *rl;
	(void)p;

	ck_assert_int_eq(runtime_ratelimit_create(&rl, 1e6, 5), 0); /* 1 us each */
	ck_assert_int_eq(runtime_ratelimit_try_take(rl, 5), 0);
	ck_assert_int_le(runtime_ratelimit_available(rl), 5);
	ck_assert_int_eq(runtime_sleep(MS), 0); /* 1000 tokens' worth */
	ck_assert_int_eq(runtime_ratelimit_available(rl), 5); /* no more than burst */
	ck_assert_int_eq(runtime_ratelimit_take(rl, 5, 0), 0);
	ck_assert_int_eq(runtime_ratelimit_destroy(rl), 0);
}

START_TEST(test_ratelimit_burst_then_refill_to_burst)
{
	struct runtime_ratelimit *rl;

	ck_assert_int_eq(runtime_ratelimit_create(&rl, SLOW, 5), 0);
	ck_assert_int_eq(runtime_ratelimit_try_take(rl, 3), 0);
	ck_assert_int_eq(runtime_ratelimit_available(rl), 2);
	ck_assert_int_eq(runtime_ratelimit_try_take(rl, 3), -EAGAIN); /* whole or none */
	ck_assert_int_eq(runtime_ratelimit_available(rl), 2);
	ck_assert_int_eq(runtime_ratelimit_try_take(rl, 2), 0);
	ck_assert_int_eq(runtime_ratelimit_try_take(rl, 1), -EAGAIN);
	ck_assert_int_eq(runtime_ratelimit_available(rl), 0);
	ck_assert_int_eq(runtime_ratelimit_destroy(rl), 0);
	ck_assert_int_eq(run_fiber(NULL, refill_main, NULL), 0);
}
END_TEST

/* ------------------------------------------------------- arrival order */

#define COST_MS 100 /* rate 10/s */

static struct runtime_ratelimit *shared;
static int order[3], served;

static void *in_order_taker(void *p)
{
	int rc = runtime_ratelimit_take(shared, 1, -1);

	ck_assert_int_eq(rc, 0);
	order[served++] = (int)(intptr_t)p;
	return NULL;
}

static void in_order_main(void *p)
{
	struct runtime_fiber *f[3];
	(void)p;

	ck_assert_int_eq(runtime_ratelimit_create(&shared, 1000.0 / COST_MS, 1), 0);
	uint64_t t0 = runtime_now();
	ck_assert_int_eq(runtime_ratelimit_take(shared, 1, -1), 0); /* the burst */
	for (int i = 0; i < 3; i++) {
		f[i] = start(in_order_taker, (void *)(intptr_t)i);
		settle();
	}
	int64_t owed = runtime_ratelimit_available(shared);
	ck_assert_int_le(owed, -1); /* in debt to the waiters */
	ck_assert_int_ge(owed, -3);
	ck_assert_int_eq(runtime_ratelimit_try_take(shared, 1), -EAGAIN); /* no barging */
	ck_assert_int_eq(runtime_ratelimit_destroy(shared), -EBUSY);
	for (int i = 0; i < 3; i++)
		join(f[i]);
	/* The burst at once, then one token per cost: never sooner. */
	ck_assert_uint_ge(runtime_now() - t0, 3 * COST_MS * MS);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(order[i], i);
	ck_assert_int_eq(runtime_ratelimit_destroy(shared), 0);
}

START_TEST(test_ratelimit_waiters_served_in_arrival_order)
{
	served = 0;
	ck_assert_int_eq(run_fiber(NULL, in_order_main, NULL), 0);
}
END_TEST

/* ------------------------------------------------- timeout and cancel */

static void *slow_taker(void *p)
{
	(void)p;
	return (void *)(intptr_t)runtime_ratelimit_take(shared, 1, -1);
}

static void give_back_main(void *p)
{
	struct runtime_fiber *a, *b;
	(void)p;

	ck_assert_int_eq(runtime_ratelimit_create(&shared, SLOW, 2), 0);
	ck_assert_int_eq(runtime_ratelimit_take(shared, 2, -1), 0);
	/* Due in 1000 s: past a 10 ms timeout, or the fiber's deadline, at
	 * once, and nothing reserved. */
	ck_assert_int_eq(runtime_ratelimit_take(shared, 1, 10 * MS), -ETIMEDOUT);
	ck_assert_int_eq(runtime_ratelimit_take(shared, 1, 0), -ETIMEDOUT);
	runtime_deadline_set(runtime_now() + 10 * MS);
	ck_assert_int_eq(runtime_ratelimit_take(shared, 1, -1), -ETIMEDOUT);
	runtime_deadline_set(0);
	ck_assert_int_eq(runtime_ratelimit_available(shared), 0);

	/* The last waiter cancelled gives all of its reservation back. */
	a = start(slow_taker, NULL);
	b = start(slow_taker, NULL);
	settle();
	ck_assert_int_eq(runtime_ratelimit_available(shared), -2);
	ck_assert_int_eq(runtime_fiber_cancel(b), 0);
	ck_assert_int_eq(join(b), -ECANCELED);
	ck_assert_int_eq(runtime_ratelimit_available(shared), -1);
	ck_assert_int_eq(runtime_fiber_cancel(a), 0);
	ck_assert_int_eq(join(a), -ECANCELED);
	ck_assert_int_eq(runtime_ratelimit_available(shared), 0);

	/* One cancelled with a later reservation on top gives back only what
	 * lies beyond it: the later waiter keeps its place and wake-up. */
	a = start(slow_taker, NULL);
	b = start(slow_taker, NULL);
	settle();
	ck_assert_int_eq(runtime_fiber_cancel(a), 0);
	ck_assert_int_eq(join(a), -ECANCELED);
	ck_assert_int_eq(runtime_ratelimit_available(shared), -2);
	ck_assert_int_eq(runtime_fiber_cancel(b), 0);
	ck_assert_int_eq(join(b), -ECANCELED);
	ck_assert_int_eq(runtime_ratelimit_available(shared), -1);

	/* A cancelled fiber still takes tokens that are there. */
	ck_assert_int_eq(runtime_ratelimit_destroy(shared), 0);
	ck_assert_int_eq(runtime_ratelimit_create(&shared, SLOW, 1), 0);
	ck_assert_int_eq(runtime_fiber_cancel(runtime_fiber_self()), 0);
	ck_assert_int_eq(runtime_ratelimit_take(shared, 1, -1), 0);
	ck_assert_int_eq(runtime_ratelimit_take(shared, 1, -1), -ECANCELED);
	ck_assert_int_eq(runtime_ratelimit_available(shared), 0);
	ck_assert_int_eq(runtime_ratelimit_destroy(shared), 0);
}

START_TEST(test_ratelimit_timeout_and_cancel_give_reservations_back)
{
	ck_assert_int_eq(run_fiber(NULL, give_back_main, NULL), 0);
}
END_TEST

/* ------------------------------------------------- two cores, a thread */

#define RATE 2000.0
#define BURST 50
#define RUN_MS 200

static struct {
	struct runtime_ratelimit *rl;
	uint64_t start;
	_Atomic uint64_t taken;
	_Atomic int stop;
} con;

static void waiting_taker(void *p)
{
	unsigned n = 1 + (unsigned)(intptr_t)p % 3;

	while (runtime_now() - con.start < RUN_MS * MS) {
		int rc = runtime_ratelimit_take(con.rl, n, 5 * MS);
		ck_assert(rc == 0 || rc == -ETIMEDOUT);
		if (rc == 0)
			atomic_fetch_add(&con.taken, n);
	}
}

static void trying_taker(void *p)
{
	(void)p;
	while (runtime_now() - con.start < RUN_MS * MS) {
		if (runtime_ratelimit_try_take(con.rl, 1) == 0)
			atomic_fetch_add(&con.taken, 1);
		runtime_yield();
	}
}

static void *thread_taker(void *p)
{
	(void)p;
	while (!atomic_load(&con.stop)) {
		if (runtime_ratelimit_try_take(con.rl, 2) == 0)
			atomic_fetch_add(&con.taken, 2);
		sched_yield(); /* the cores share the machine's CPUs with it */
	}
	return NULL;
}

START_TEST(test_ratelimit_two_cores_and_a_thread_never_exceed_the_rate)
{
	struct runtime_config cfg;
	struct runtime *rt;
	pthread_t th;

	memset(&con, 0, sizeof(con));
	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	ck_assert_int_eq(runtime_ratelimit_create(&con.rl, RATE, BURST), 0);
	con.start = runtime_now();
	for (unsigned i = 0; i < 6; i++)
		ck_assert_int_eq(runtime_spawn_on(rt, i % 2, waiting_taker, (void *)(intptr_t)i), 0);
	for (unsigned i = 0; i < 2; i++)
		ck_assert_int_eq(runtime_spawn_on(rt, i, trying_taker, NULL), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, thread_taker, NULL), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	atomic_store(&con.stop, 1);
	pthread_join(th, NULL);
	double elapsed = (double)(runtime_now() - con.start) / 1e9;
	runtime_destroy(rt);
	uint64_t taken = atomic_load(&con.taken);
	ck_assert_msg((double)taken <= BURST + RATE * elapsed + 1,
	              "%llu taken in %.3f s: more than %d + %.0f/s", (unsigned long long)taken,
	              elapsed, BURST, RATE);
	ck_assert_uint_gt(taken, 0);
	ck_assert_int_eq(runtime_ratelimit_destroy(con.rl), 0);
}
END_TEST

/* ------------------------------------------------------------ keyed */

static int keyed_take(struct runtime_ratelimit_keyed *rl, const char *key, unsigned n,
                      uint64_t *wait)
{
	return runtime_ratelimit_keyed_try_take(rl, key, strlen(key), n, wait);
}

START_TEST(test_ratelimit_keyed_bad_input)
{
	struct runtime_ratelimit_keyed *rl;
	char long_key[RUNTIME_RATELIMIT_KEY_MAX + 1] = { 0 };

	ck_assert_int_eq(runtime_ratelimit_keyed_create(&rl, 1, 1, 0), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_keyed_create(&rl, 1, 0, 10), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_keyed_create(&rl, 0, 1, 10), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_keyed_create(&rl, 1e13, 1, 10), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_keyed_create(&rl, 1, 1, RUNTIME_RATELIMIT_KEYS_MOST + 1ul),
	                 -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_keyed_create(NULL, 1, 1, 10), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_keyed_create(&rl, SLOW, 2, 10), 0);
	ck_assert_int_eq(runtime_ratelimit_keyed_try_take(NULL, "a", 1, 1, NULL), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_keyed_try_take(rl, NULL, 0, 1, NULL), -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_keyed_try_take(rl, long_key, sizeof(long_key), 1, NULL),
	                 -EINVAL);
	ck_assert_int_eq(runtime_ratelimit_keyed_try_take(rl, long_key, sizeof(long_key) - 1, 1,
	                                                  NULL), 0);
	ck_assert_int_eq(keyed_take(rl, "a", 3, NULL), -EINVAL); /* > burst */
	ck_assert_int_eq(keyed_take(rl, "a", 0, NULL), 0);
	ck_assert_uint_eq(runtime_ratelimit_keyed_keys(rl), 1);  /* n 0: not even looked up */
	runtime_ratelimit_keyed_destroy(rl);
	runtime_ratelimit_keyed_destroy(NULL);
}
END_TEST

START_TEST(test_ratelimit_keyed_buckets_of_their_own)
{
	struct runtime_ratelimit_keyed *rl;
	static const unsigned char v6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
	uint64_t wait = 0;

	ck_assert_int_eq(runtime_ratelimit_keyed_create(&rl, SLOW, 3, 1000), 0);
	ck_assert_int_eq(keyed_take(rl, "10.0.0.1", 2, NULL), 0);
	ck_assert_int_eq(keyed_take(rl, "10.0.0.1", 1, NULL), 0);
	ck_assert_int_eq(keyed_take(rl, "10.0.0.1", 1, &wait), -EAGAIN);
	ck_assert_msg(wait > 999 * 1000000000ull && wait <= 1000 * 1000000000ull, "wait %llu ns",
	              (unsigned long long)wait); /* one token in 1000 s, less what passed */
	ck_assert_int_eq(keyed_take(rl, "10.0.0.2", 3, NULL), 0);   /* its own bucket */
	ck_assert_int_eq(keyed_take(rl, "10.0.0.", 3, NULL), 0);    /* a prefix: another key */
	ck_assert_int_eq(runtime_ratelimit_keyed_try_take(rl, "10.0.0.1", 9, 3, NULL), 0); /* +NUL */
	ck_assert_int_eq(runtime_ratelimit_keyed_try_take(rl, v6, sizeof(v6), 3, NULL), 0);
	ck_assert_int_eq(runtime_ratelimit_keyed_try_take(rl, v6, sizeof(v6), 1, NULL), -EAGAIN);
	ck_assert_int_eq(runtime_ratelimit_keyed_try_take(rl, "", 0, 3, NULL), 0); /* empty key */
	ck_assert_uint_eq(runtime_ratelimit_keyed_keys(rl), 6);
	runtime_ratelimit_keyed_destroy(rl);
}
END_TEST

START_TEST(test_ratelimit_keyed_bounded_and_lru)
{
	struct runtime_ratelimit_keyed *rl;
	char key[32];

	/* 16 keys: one shard, so the eviction order is exactly LRU. */
	ck_assert_int_eq(runtime_ratelimit_keyed_create(&rl, SLOW, 1, 16), 0);
	for (int i = 0; i < 16; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		ck_assert_int_eq(keyed_take(rl, key, 1, NULL), 0); /* each emptied */
	}
	ck_assert_int_eq(keyed_take(rl, "k0", 1, NULL), -EAGAIN); /* k0 used: k1 is the oldest */
	ck_assert_int_eq(keyed_take(rl, "k16", 1, NULL), 0);      /* evicts k1 */
	ck_assert_uint_eq(runtime_ratelimit_keyed_keys(rl), 16);
	ck_assert_int_eq(keyed_take(rl, "k0", 1, NULL), -EAGAIN); /* kept: still empty */
	ck_assert_int_eq(keyed_take(rl, "k1", 1, NULL), 0);       /* new again: full (evicts k2) */
	ck_assert_int_eq(keyed_take(rl, "k3", 1, NULL), -EAGAIN); /* kept */
	ck_assert_int_eq(keyed_take(rl, "k2", 1, NULL), 0);       /* was evicted */
	runtime_ratelimit_keyed_destroy(rl);

	/* Many shards, a million distinct keys (a spoofing flood): never more
	 * than max_keys held, and all of them used. */
	ck_assert_int_eq(runtime_ratelimit_keyed_create(&rl, SLOW, 1, 10000), 0);
	for (int i = 0; i < 1000000; i++) {
		snprintf(key, sizeof(key), "client-%d", i);
		ck_assert_int_eq(keyed_take(rl, key, 1, NULL), 0); /* all new: full */
		if (i % 997 == 0)
			ck_assert_uint_le(runtime_ratelimit_keyed_keys(rl), 10000);
	}
	ck_assert_uint_eq(runtime_ratelimit_keyed_keys(rl), 10000);
	ck_assert_int_eq(keyed_take(rl, "client-999999", 1, NULL), -EAGAIN); /* the newest: held */
	runtime_ratelimit_keyed_destroy(rl);
}
END_TEST

START_TEST(test_ratelimit_keyed_refills_after_the_wait_it_names)
{
	struct runtime_ratelimit_keyed *rl;
	uint64_t wait = 0;

	ck_assert_int_eq(runtime_ratelimit_keyed_create(&rl, 100, 1, 10), 0); /* 10 ms a token */
	ck_assert_int_eq(keyed_take(rl, "x", 1, NULL), 0);
	ck_assert_int_eq(keyed_take(rl, "x", 1, &wait), -EAGAIN);
	ck_assert_msg(wait > 0 && wait <= 10 * MS, "wait %llu ns", (unsigned long long)wait);
	struct timespec ts = { 0, (long)wait };
	while (nanosleep(&ts, &ts) != 0)
		;
	ck_assert_int_eq(keyed_take(rl, "x", 1, NULL), 0);
	runtime_ratelimit_keyed_destroy(rl);
}
END_TEST

#define KEYED_RATE 2000.0
#define KEYED_BURST 20
#define KEYED_KEYS 8

static struct {
	struct runtime_ratelimit_keyed *rl;
	_Atomic uint64_t taken[KEYED_KEYS];
	uint64_t end;
} keyed;

static void *keyed_taker(void *arg)
{
	(void)arg;
	for (unsigned i = 0; runtime_now() < keyed.end; i++) {
		char key[8] = { 'k', (char)('0' + i % KEYED_KEYS) };
		if (runtime_ratelimit_keyed_try_take(keyed.rl, key, 2, 1, NULL) == 0)
			atomic_fetch_add(&keyed.taken[i % KEYED_KEYS], 1);
	}
	return NULL;
}

START_TEST(test_ratelimit_keyed_two_threads_never_exceed_the_rate)
{
	pthread_t th[2];
	uint64_t start = runtime_now();

	ck_assert_int_eq(runtime_ratelimit_keyed_create(&keyed.rl, KEYED_RATE, KEYED_BURST, 100), 0);
	keyed.end = start + 300 * MS;
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, keyed_taker, NULL), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	double elapsed = (double)(runtime_now() - start) / 1e9;
	for (int k = 0; k < KEYED_KEYS; k++) {
		uint64_t n = atomic_load(&keyed.taken[k]);
		ck_assert_msg((double)n <= KEYED_BURST + KEYED_RATE * elapsed + 1,
		              "key %d: %llu taken in %.3f s", k, (unsigned long long)n, elapsed);
		ck_assert_uint_ge(n, KEYED_BURST); /* at least its first burst */
	}
	runtime_ratelimit_keyed_destroy(keyed.rl);
}
END_TEST

static Suite *ratelimit_suite(void)
{
	Suite *s = suite_create("ratelimit");
	TCase *tc = tcase_create("ratelimit");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_ratelimit_bad_input);
	tcase_add_test(tc, test_ratelimit_burst_then_refill_to_burst);
	tcase_add_test(tc, test_ratelimit_waiters_served_in_arrival_order);
	tcase_add_test(tc, test_ratelimit_timeout_and_cancel_give_reservations_back);
	tcase_add_test(tc, test_ratelimit_two_cores_and_a_thread_never_exceed_the_rate);
	tcase_add_test(tc, test_ratelimit_keyed_bad_input);
	tcase_add_test(tc, test_ratelimit_keyed_buckets_of_their_own);
	tcase_add_test(tc, test_ratelimit_keyed_bounded_and_lru);
	tcase_add_test(tc, test_ratelimit_keyed_refills_after_the_wait_it_names);
	tcase_add_test(tc, test_ratelimit_keyed_two_threads_never_exceed_the_rate);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(ratelimit_suite)
