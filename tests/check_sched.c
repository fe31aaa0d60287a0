/* SPDX-License-Identifier: MIT */
/*
 * check_sched.c - the scheduler: spawning from the owner thread and from
 * fibers, run order, yield, join and detach, cancellation of fibers parked
 * in sleep and join, fiber-local storage, ids, deadlock detection, shutdown,
 * misuse from the wrong context, 10,000 fibers sleeping and yielding, the
 * floating-point control state (rounding, MXCSR) kept per fiber across
 * yields and sleeps, or shared when the runtime is configured to share it,
 * and (x86_64) the callee-saved registers and FP control words a caller of
 * yield or sleep finds as it left them, whatever resumed it.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <fenv.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

/* ------------------------------------------------------------- spawning */

struct order {
	int seq[16];
	int n;
};

struct order_arg {
	struct order *o;
	int id;
};

static void record(void *p)
{
	struct order_arg *a = p;
	a->o->seq[a->o->n++] = a->id;
}

START_TEST(test_sched_spawn_runs_in_fifo_order)
{
	struct runtime *rt;
	struct order o = { .n = 0 };
	struct order_arg args[5];

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	for (int i = 0; i < 5; i++) {
		args[i] = (struct order_arg){ &o, i };
		ck_assert_int_eq(runtime_spawn(rt, record, &args[i]), 0);
	}
	ck_assert_int_eq(o.n, 0); /* nothing runs inside spawn */
	ck_assert_int_eq(runtime_run(rt), 0);
	ck_assert_int_eq(o.n, 5);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(o.seq[i], i);
	runtime_destroy(rt);
}
END_TEST

static void nested_child(void *p)
{
	(*(int *)p)++;
}

static void nested_parent(void *p)
{
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(runtime_spawn(runtime_current(), nested_child, p), 0);
}

START_TEST(test_sched_spawn_from_fiber)
{
	int count = 0;
	ck_assert_int_eq(run_fiber(NULL, nested_parent, &count), 0);
	ck_assert_int_eq(count, 3);
}
END_TEST

START_TEST(test_sched_run_again_after_return)
{
	struct runtime *rt;
	int count = 0;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, nested_child, &count), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	ck_assert_int_eq(runtime_spawn(rt, nested_child, &count), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	ck_assert_int_eq(count, 2);
	runtime_destroy(rt);
}
END_TEST

static int foreign_count;

static void count_foreign(void *p)
{
	(void)p;
	foreign_count++;
}

static void *spawn_from_thread(void *p)
{
	return (void *)(intptr_t)runtime_spawn(p, count_foreign, NULL);
}

/* A thread the runtime does not own may spawn; the fiber is queued in the
 * core's inbox and runs at the next runtime_run. */
START_TEST(test_sched_spawn_from_foreign_thread_runs_once)
{
	struct runtime *rt;
	pthread_t th;
	void *res;

	foreign_count = 0;
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, spawn_from_thread, rt), 0);
	ck_assert_int_eq(pthread_join(th, &res), 0);
	ck_assert_int_eq((int)(intptr_t)res, 0);
	ck_assert_int_eq(foreign_count, 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	ck_assert_int_eq(foreign_count, 1);
	runtime_destroy(rt);
}
END_TEST

START_TEST(test_sched_bad_arguments)
{
	struct runtime *rt;
	struct runtime_config cfg;

	runtime_config_init(&cfg);
	cfg.ring_entries = 100; /* not a power of two */
	ck_assert_int_eq(runtime_create(&rt, &cfg), -EINVAL);
	runtime_config_init(&cfg);
	cfg.stack_size = 4096;
	ck_assert_int_eq(runtime_create(&rt, &cfg), -EINVAL);
	runtime_config_init(&cfg);
	cfg.run_budget = 0;
	ck_assert_int_eq(runtime_create(&rt, &cfg), -EINVAL);
	ck_assert_int_eq(runtime_create(NULL, NULL), -EINVAL);

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, NULL, NULL), -EINVAL);
	ck_assert_int_eq(runtime_fiber_spawn(rt, NULL, NULL, NULL), -EINVAL);
	runtime_destroy(rt);
}
END_TEST

START_TEST(test_sched_calls_outside_fiber_fail)
{
	ck_assert_int_eq(runtime_yield(), -EPERM);
	ck_assert_int_eq(runtime_sleep(1), -EPERM);
	ck_assert_ptr_null(runtime_fiber_self());
	ck_assert_ptr_null(runtime_current());
	ck_assert_ptr_null(runtime_fiber_local_get());
	ck_assert_int_eq(runtime_fiber_join(NULL, NULL), -EPERM);
}
END_TEST

/* ---------------------------------------------------------------- yield */

struct pingpong {
	char trace[32];
	int n;
};

static void yielder(void *p)
{
	struct pingpong *pp = p;
	for (int i = 0; i < 4; i++) {
		pp->trace[strlen(pp->trace)] = 'a';
		ck_assert_int_eq(runtime_yield(), 0);
	}
}

static void yielder_b(void *p)
{
	struct pingpong *pp = p;
	for (int i = 0; i < 4; i++) {
		pp->trace[strlen(pp->trace)] = 'b';
		ck_assert_int_eq(runtime_yield(), 0);
	}
}

START_TEST(test_sched_yield_interleaves)
{
	struct runtime *rt;
	struct pingpong pp;

	memset(&pp, 0, sizeof(pp));
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, yielder, &pp), 0);
	ck_assert_int_eq(runtime_spawn(rt, yielder_b, &pp), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	ck_assert_str_eq(pp.trace, "abababab");
	runtime_destroy(rt);
}
END_TEST

/* A fiber that only yields must not starve timers: the budget hands the
 * CPU back to the loop. */
struct starve {
	volatile int done;
	int spins;
};

static void spinner(void *p)
{
	struct starve *s = p;
	while (!s->done) {
		ck_assert_int_eq(runtime_yield(), 0);
		s->spins++;
	}
}

static void sleeper_sets_done(void *p)
{
	struct starve *s = p;
	ck_assert_int_eq(runtime_sleep(2 * MS), 0);
	s->done = 1;
}

START_TEST(test_sched_yield_loop_does_not_starve_timers)
{
	struct runtime *rt;
	struct starve s = { 0, 0 };

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, spinner, &s), 0);
	ck_assert_int_eq(runtime_spawn(rt, sleeper_sets_done, &s), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	ck_assert_int_eq(s.done, 1);
	ck_assert_int_gt(s.spins, 0);
	runtime_destroy(rt);
}
END_TEST

/* ----------------------------------------------------------------- join */

static void *square(void *p)
{
	intptr_t v = (intptr_t)p;
	runtime_yield();
	return (void *)(v * v);
}

struct join_state {
	void *results[8];
	int rc[8];
	int self_join;
};

static void joiner(void *p)
{
	struct join_state *js = p;
	struct runtime_fiber *f[8];

	for (intptr_t i = 0; i < 8; i++)
		ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &f[i], square, (void *)i), 0);
	for (int i = 0; i < 8; i++)
		js->rc[i] = runtime_fiber_join(f[i], &js->results[i]);
}

START_TEST(test_sched_join_returns_result)
{
	struct join_state js;

	memset(&js, 0, sizeof(js));
	ck_assert_int_eq(run_fiber(NULL, joiner, &js), 0);
	for (intptr_t i = 0; i < 8; i++) {
		ck_assert_int_eq(js.rc[i], 0);
		ck_assert_ptr_eq(js.results[i], (void *)(i * i));
	}
}
END_TEST

static void *quick(void *p)
{
	return p;
}

static void join_finished(void *p)
{
	struct join_state *js = p;
	struct runtime_fiber *f;

	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &f, quick, (void *)42), 0);
	runtime_sleep(1 * MS); /* f has ended by now */
	js->rc[0] = runtime_fiber_join(f, &js->results[0]);
	js->self_join = runtime_fiber_join(runtime_fiber_self(), NULL);
}

START_TEST(test_sched_join_after_end_and_self_join)
{
	struct join_state js;

	memset(&js, 0, sizeof(js));
	ck_assert_int_eq(run_fiber(NULL, join_finished, &js), 0);
	ck_assert_int_eq(js.rc[0], 0);
	ck_assert_ptr_eq(js.results[0], (void *)42);
	ck_assert_int_eq(js.self_join, -EDEADLK); /* whether joinable or not */
}
END_TEST

static void *self_joiner(void *p)
{
	return (void *)(intptr_t)runtime_fiber_join(runtime_fiber_self(), NULL);
}

static void join_self_main(void *p)
{
	struct runtime_fiber *f;
	void *res;
	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &f, self_joiner, NULL), 0);
	ck_assert_int_eq(runtime_fiber_join(f, &res), 0);
	*(int *)p = (int)(intptr_t)res;
}

START_TEST(test_sched_join_self_is_deadlock)
{
	int rc = 0;
	ck_assert_int_eq(run_fiber(NULL, join_self_main, &rc), 0);
	ck_assert_int_eq(rc, -EDEADLK);
}
END_TEST

static void *count_up(void *p)
{
	runtime_sleep(1 * MS);
	(*(int *)p)++;
	return NULL;
}

static void detacher(void *p)
{
	struct runtime_fiber *running, *ended;

	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &running, count_up, p), 0);
	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &ended, quick, NULL), 0);
	runtime_yield();
	runtime_yield();
	ck_assert_int_eq(runtime_fiber_detach(running), 0);
	ck_assert_int_eq(runtime_fiber_detach(ended), 0);
}

START_TEST(test_sched_detach_running_and_ended)
{
	int count = 0;
	ck_assert_int_eq(run_fiber(NULL, detacher, &count), 0);
	ck_assert_int_eq(count, 1);
}
END_TEST

/* --------------------------------------------------------------- cancel */

struct cancel_state {
	int first, second, yield_rc, close_like;
	struct runtime_fiber *target;
	int cancel_rc, cancel_again_rc;
};

static void *sleeps_long(void *p)
{
	struct cancel_state *cs = p;
	cs->first = runtime_sleep(10ull * 1000 * MS);
	cs->second = runtime_sleep(1);
	cs->yield_rc = runtime_yield();
	return (void *)7;
}

static void cancel_sleeper(void *p)
{
	struct cancel_state *cs = p;
	void *res;

	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &cs->target, sleeps_long, cs), 0);
	runtime_sleep(5 * MS);
	cs->cancel_rc = runtime_fiber_cancel(cs->target);
	ck_assert_int_eq(runtime_fiber_join(cs->target, &res), 0);
	ck_assert_ptr_eq(res, (void *)7);
}

START_TEST(test_sched_cancel_sleeping_fiber)
{
	struct cancel_state cs;

	memset(&cs, 0, sizeof(cs));
	ck_assert_int_eq(run_fiber(NULL, cancel_sleeper, &cs), 0);
	ck_assert_int_eq(cs.cancel_rc, 0);
	ck_assert_int_eq(cs.first, -ECANCELED);
	ck_assert_int_eq(cs.second, -ECANCELED);
	ck_assert_int_eq(cs.yield_rc, -ECANCELED); /* the sleeps were cut, not waited out */
}
END_TEST

static void *blocks_in_join(void *p)
{
	struct cancel_state *cs = p;
	struct runtime_fiber *sleeper;
	void *res;

	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &sleeper, count_up, &cs->close_like), 0);
	cs->first = runtime_fiber_join(sleeper, &res);
	/* The handle survives a cancelled join; a later join may still be
	 * refused by the sticky cancel, so detach it. */
	cs->second = runtime_fiber_join(sleeper, &res);
	ck_assert_int_eq(runtime_fiber_detach(sleeper), 0);
	return NULL;
}

static void cancel_joiner(void *p)
{
	struct cancel_state *cs = p;
	struct runtime_fiber *f;

	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &f, blocks_in_join, cs), 0);
	runtime_yield(); /* f is now parked in join */
	cs->cancel_rc = runtime_fiber_cancel(f);
	ck_assert_int_eq(runtime_fiber_join(f, NULL), 0);
}

START_TEST(test_sched_cancel_joining_fiber)
{
	struct cancel_state cs;

	memset(&cs, 0, sizeof(cs));
	ck_assert_int_eq(run_fiber(NULL, cancel_joiner, &cs), 0);
	ck_assert_int_eq(cs.cancel_rc, 0);
	ck_assert_int_eq(cs.first, -ECANCELED);
	ck_assert_int_eq(cs.second, -ECANCELED);
	ck_assert_int_eq(cs.close_like, 1); /* the detached sleeper still ran */
}
END_TEST

static void *first_call_sees_cancel(void *p)
{
	return (void *)(intptr_t)runtime_sleep(1);
}

static void cancel_before_start_and_after_end(void *p)
{
	struct cancel_state *cs = p;
	struct runtime_fiber *unstarted, *ended;
	void *res;

	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &unstarted,
	                                     first_call_sees_cancel, NULL), 0);
	ck_assert_int_eq(runtime_fiber_cancel(unstarted), 0);
	ck_assert_int_eq(runtime_fiber_join(unstarted, &res), 0);
	cs->first = (int)(intptr_t)res;

	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &ended, quick, NULL), 0);
	runtime_yield();
	runtime_yield();
	cs->cancel_rc = runtime_fiber_cancel(ended);
	ck_assert_int_eq(runtime_fiber_join(ended, NULL), 0);
}

START_TEST(test_sched_cancel_before_start_and_after_end)
{
	struct cancel_state cs;

	memset(&cs, 0, sizeof(cs));
	ck_assert_int_eq(run_fiber(NULL, cancel_before_start_and_after_end, &cs), 0);
	ck_assert_int_eq(cs.first, -ECANCELED);
	ck_assert_int_eq(cs.cancel_rc, -ESRCH);
}
END_TEST

/* ------------------------------------------------- local storage, ids */

struct local_state {
	int ok;
	uint64_t ids[4];
};

static void *local_user(void *p)
{
	struct local_state *ls = p;
	int mine;

	ck_assert_ptr_null(runtime_fiber_local_get());
	runtime_fiber_local_set(&mine);
	runtime_yield();
	runtime_sleep(1 * MS);
	if (runtime_fiber_local_get() == &mine)
		ls->ok++;
	return (void *)(uintptr_t)runtime_fiber_id(runtime_fiber_self());
}

static void local_main(void *p)
{
	struct local_state *ls = p;
	struct runtime_fiber *f[4];
	void *id;

	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &f[i], local_user, ls), 0);
	for (int i = 0; i < 4; i++) {
		uint64_t expect = runtime_fiber_id(f[i]);
		ck_assert_int_eq(runtime_fiber_join(f[i], &id), 0);
		ck_assert_uint_eq((uint64_t)(uintptr_t)id, expect);
		ls->ids[i] = expect;
	}
}

START_TEST(test_sched_fiber_local_and_ids)
{
	struct local_state ls;

	memset(&ls, 0, sizeof(ls));
	ck_assert_int_eq(run_fiber(NULL, local_main, &ls), 0);
	ck_assert_int_eq(ls.ok, 4);
	for (int i = 0; i < 4; i++) {
		ck_assert_uint_ne(ls.ids[i], 0);
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(ls.ids[i], ls.ids[j]);
	}
}
END_TEST

/* ------------------------------------------------- deadlock, shutdown */

static struct runtime_fiber *deadlock_a;

static void *deadlock_b(void *p)
{
	runtime_fiber_join(deadlock_a, NULL); /* A joins B, B joins A */
	return NULL;
}

static void *deadlock_a_fn(void *p)
{
	struct runtime_fiber *b;
	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &b, deadlock_b, NULL), 0);
	runtime_fiber_join(b, NULL);
	return NULL;
}

START_TEST(test_sched_deadlock_is_reported)
{
	struct runtime *rt;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_fiber_spawn(rt, &deadlock_a, deadlock_a_fn, NULL), 0);
	ck_assert_int_eq(runtime_run(rt), -EDEADLK);
	runtime_destroy(rt); /* frees the two parked fibers */
}
END_TEST

struct shutdown_state {
	int sleep_rc[3];
	int spawn_rc;
	int timer_why;
	int timer_calls;
};

static void long_sleeper(void *p)
{
	int *rc = p;
	*rc = runtime_sleep(60ull * 1000 * MS);
}

static void on_timer(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	struct shutdown_state *ss = arg;
	ss->timer_why = (int)why;
	ss->timer_calls++;
}

static void shutter(void *p)
{
	struct shutdown_state *ss = p;
	static struct runtime_timer timer;

	for (int i = 0; i < 3; i++)
		runtime_spawn(runtime_current(), long_sleeper, &ss->sleep_rc[i]);
	ck_assert_int_eq(runtime_timer_start(&timer, 60ull * 1000 * MS, on_timer, ss), 0);
	runtime_sleep(2 * MS);
	runtime_shutdown(runtime_current());
	ss->spawn_rc = runtime_spawn(runtime_current(), long_sleeper, &ss->sleep_rc[0]);
}

START_TEST(test_sched_shutdown_cancels_fibers_and_timers)
{
	struct shutdown_state ss;

	memset(&ss, 0, sizeof(ss));
	ss.timer_why = -1;
	ck_assert_int_eq(run_fiber(NULL, shutter, &ss), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(ss.sleep_rc[i], -ECANCELED);
	ck_assert_int_eq(ss.spawn_rc, -ESHUTDOWN);
	ck_assert_int_eq(ss.timer_calls, 1);
	ck_assert_int_eq(ss.timer_why, RUNTIME_TIMER_SHUTDOWN); /* ended by it, not fired */
}
END_TEST

/* ----------------------------------------------------- 10,000 fibers */

#define MANY LIVE_FIBERS(10000)

struct many {
	int slept, yielded;
};

static void sleep_and_yield(void *p)
{
	struct many *m = p;
	if (runtime_sleep(1 * MS) == 0)
		m->slept++;
	for (int i = 0; i < 3; i++)
		if (runtime_yield() == 0)
			m->yielded++;
}

static void spawn_many(void *p)
{
	for (int i = 0; i < MANY; i++)
		ck_assert_int_eq(runtime_spawn(runtime_current(), sleep_and_yield, p), 0);
}

START_TEST(test_sched_ten_thousand_fibers_sleep_and_yield)
{
	struct many m = { 0, 0 };
	ck_assert_int_eq(run_fiber(NULL, spawn_many, &m), 0);
	ck_assert_int_eq(m.slept, MANY);
	ck_assert_int_eq(m.yielded, 3 * MANY);
}
END_TEST

/* -------------------------------------------------------------- handles */

/* A handle outlives its fiber: it must then name no fiber at all, never
 * the fiber that reuses the same stack. */
struct stale {
	struct runtime_fiber *self;   /* the detached fiber's own handle */
	void *frame_old, *frame_new;  /* where each fiber's frame was */
	int victim_rc;
	int cancel_rc, unpark_rc, join_rc, detach_rc;
	uint64_t id;
};

static void remember_self(void *p)
{
	struct stale *s = p;
	s->self = runtime_fiber_self();
	s->frame_old = __builtin_frame_address(0);
}

static void victim(void *p)
{
	struct stale *s = p;
	s->frame_new = __builtin_frame_address(0);
	s->victim_rc = runtime_sleep(20 * MS);
}

static void stale_main(void *p)
{
	struct stale *s = p;
	struct runtime *rt = runtime_current();

	ck_assert_int_eq(runtime_spawn(rt, remember_self, s), 0);
	runtime_yield(); /* it runs and ends */
	runtime_yield(); /* its stack goes back to the cache */
	ck_assert_int_eq(runtime_spawn(rt, victim, s), 0);
	runtime_yield(); /* the victim sleeps, on the same stack */
	s->cancel_rc = runtime_fiber_cancel(s->self);
	s->unpark_rc = runtime_fiber_unpark(s->self);
	s->join_rc = runtime_fiber_join(s->self, NULL);
	s->detach_rc = runtime_fiber_detach(s->self);
	s->id = runtime_fiber_id(s->self);
}

START_TEST(test_sched_stale_handle_reaches_no_other_fiber)
{
	struct stale s = { .victim_rc = -999, .cancel_rc = -999, .unpark_rc = -999,
	                   .join_rc = -999, .detach_rc = -999, .id = 999 };

	ck_assert_int_eq(run_fiber(NULL, stale_main, &s), 0);
	ck_assert_ptr_nonnull(s.self);
	/* The test means something only if the stack was reused. */
	ck_assert_ptr_eq(s.frame_old, s.frame_new);
	ck_assert_int_eq(s.cancel_rc, -ESRCH);
	ck_assert_int_eq(s.unpark_rc, -ESRCH);
	ck_assert_int_eq(s.join_rc, -ESRCH);
	ck_assert_int_eq(s.detach_rc, -ESRCH);
	ck_assert_uint_eq(s.id, 0);
	ck_assert_int_eq(s.victim_rc, 0); /* slept its time, not cancelled */
}
END_TEST

struct twice {
	int join1, join2, detach_after, cancel_after;
	void *result;
	void *frame[2];
	int slept[2];
};

static void *give_seven(void *p)
{
	(void)p;
	return (void *)7;
}

struct twin_arg {
	struct twice *t;
	int i;
};

static void *twin(void *p)
{
	struct twin_arg *a = p;
	volatile int mine = 1000 + a->i;

	a->t->frame[a->i] = __builtin_frame_address(0);
	runtime_sleep(5 * MS);
	a->t->slept[a->i] = mine; /* still ours if no one shared the stack */
	return NULL;
}

static void twice_main(void *p)
{
	struct twice *t = p;
	struct runtime *rt = runtime_current();
	struct runtime_fiber *f, *a, *b;

	ck_assert_int_eq(runtime_fiber_spawn(rt, &f, give_seven, NULL), 0);
	t->join1 = runtime_fiber_join(f, &t->result);
	t->join2 = runtime_fiber_join(f, NULL);
	t->detach_after = runtime_fiber_detach(f);
	t->cancel_after = runtime_fiber_cancel(f);
	/* Had the stack been released twice, these two would share it. */
	struct twin_arg aa = { t, 0 }, ab = { t, 1 };
	ck_assert_int_eq(runtime_fiber_spawn(rt, &a, twin, &aa), 0);
	ck_assert_int_eq(runtime_fiber_spawn(rt, &b, twin, &ab), 0);
	ck_assert_int_eq(runtime_fiber_join(a, NULL), 0);
	ck_assert_int_eq(runtime_fiber_join(b, NULL), 0);
}

START_TEST(test_sched_join_twice_is_an_error)
{
	struct twice t = { -999, -999, -999, -999, NULL, { NULL, NULL }, { 0, 0 } };

	ck_assert_int_eq(run_fiber(NULL, twice_main, &t), 0);
	ck_assert_int_eq(t.join1, 0);
	ck_assert_ptr_eq(t.result, (void *)7);
	ck_assert_int_eq(t.join2, -ESRCH);
	ck_assert_int_eq(t.detach_after, -ESRCH);
	ck_assert_int_eq(t.cancel_after, -ESRCH);
	ck_assert_ptr_ne(t.frame[0], t.frame[1]);
	ck_assert_int_eq(t.slept[0], 1000);
	ck_assert_int_eq(t.slept[1], 1001);
}
END_TEST

/* runtime_park(-1) may be ended by an unpark from any thread, so a lone
 * parked fiber is not a deadlock: the run waits for that unpark. */
static _Atomic(struct runtime_fiber *) lone;

static void lone_parker(void *p)
{
	int *rc = p;
	atomic_store(&lone, runtime_fiber_self());
	*rc = runtime_park(-1);
}

static void *late_unparker(void *p)
{
	struct runtime_fiber *f;
	(void)p;
	while (!(f = atomic_load(&lone)))
		usleep(1000);
	usleep(50 * 1000);
	ck_assert_int_eq(runtime_fiber_unpark(f), 0);
	return NULL;
}

START_TEST(test_sched_parked_fiber_is_no_deadlock)
{
	struct runtime *rt;
	pthread_t th;
	int rc = -999;

	atomic_store(&lone, NULL);
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, lone_parker, &rc), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, late_unparker, NULL), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	pthread_join(th, NULL); /* its unpark call has returned: now destroy */
	runtime_destroy(rt);
	ck_assert_int_eq(rc, 0);
}
END_TEST

/* ------------------------------------------ floating-point control state */

static double third(void)
{
	volatile double one = 1.0, three = 3.0;
	return one / three;
}

struct fp_case {
	int round_a_after;      /* A's rounding mode once B has run */
	double third_a_before, third_a_after;
	int round_b_start;      /* what B finds when it first runs */
	double third_b;
	int round_child_start;  /* a fiber A spawns after changing its mode */
	bool sleep;             /* A gives up the CPU by sleeping, not yielding */
};

static void fp_child(void *p)
{
	((struct fp_case *)p)->round_child_start = fegetround();
}

static void fp_a(void *p)
{
	struct fp_case *fc = p;

	fesetround(FE_UPWARD);
	fc->third_a_before = third();
	runtime_spawn(runtime_current(), fp_child, fc);
	if (fc->sleep)
		runtime_sleep(2 * 1000 * 1000);
	else
		runtime_yield();
	fc->round_a_after = fegetround();
	fc->third_a_after = third();
	fesetround(FE_TONEAREST);
}

static void fp_b(void *p)
{
	struct fp_case *fc = p;

	fc->round_b_start = fegetround();
	fesetround(FE_DOWNWARD);
	fc->third_b = third();
	runtime_yield();
	fesetround(FE_TONEAREST);
}

static void fp_run(struct fp_case *fc, bool share)
{
	struct runtime_config cfg;
	struct runtime *rt;

	runtime_config_init(&cfg);
	cfg.share_fp_control = share;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	ck_assert_int_eq(runtime_spawn(rt, fp_a, fc), 0);
	ck_assert_int_eq(runtime_spawn(rt, fp_b, fc), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
	ck_assert_int_eq(fegetround(), FE_TONEAREST); /* the thread's own, kept */
}

/* By default each fiber keeps its own rounding mode, as the ABI has it for
 * a function call: another fiber's change does not reach it, its own
 * survives every switch, and a new fiber starts from the defaults. */
START_TEST(test_sched_fp_rounding_is_per_fiber)
{
	struct fp_case fc = { .sleep = _i == 1 };

	fp_run(&fc, false);
	ck_assert_int_eq(fc.round_b_start, FE_TONEAREST);
	ck_assert_int_eq(fc.round_child_start, FE_TONEAREST);
	ck_assert_int_eq(fc.round_a_after, FE_UPWARD);
	ck_assert(fc.third_a_after == fc.third_a_before);
	ck_assert(fc.third_b < fc.third_a_before); /* B's rounding was its own */
}
END_TEST

#if defined(__x86_64__)
/* share_fp_control: one state for the core's fibers (switch.h), so B finds
 * A's rounding and A finds B's; on aarch64 the option changes nothing. */
START_TEST(test_sched_fp_rounding_shared_when_configured)
{
	struct fp_case fc = { .sleep = false };

	fp_run(&fc, true);
	ck_assert_int_eq(fc.round_b_start, FE_UPWARD);
	ck_assert_int_eq(fc.round_a_after, FE_DOWNWARD);
	ck_assert(fc.third_a_after < fc.third_a_before);
}
END_TEST

/* MXCSR alone (flush-to-zero and denormals-are-zero, as DSP code sets
 * them), which fesetround does not touch, is kept per fiber too. */
#define FTZ_DAZ 0x8040u

static void csr_setter(void *p)
{
	unsigned *seen = p;

	_mm_setcsr(_mm_getcsr() | FTZ_DAZ);
	runtime_yield();
	seen[0] = _mm_getcsr() & FTZ_DAZ;
	_mm_setcsr(_mm_getcsr() & ~FTZ_DAZ);
}

static void csr_other(void *p)
{
	unsigned *seen = p;

	seen[1] = _mm_getcsr() & FTZ_DAZ;
	runtime_yield();
}

START_TEST(test_sched_mxcsr_is_per_fiber)
{
	struct runtime *rt;
	unsigned seen[2] = { 0, 1 };

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, csr_setter, seen), 0);
	ck_assert_int_eq(runtime_spawn(rt, csr_other, seen), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
	ck_assert_uint_eq(seen[0], FTZ_DAZ);
	ck_assert_uint_eq(seen[1], 0);
	ck_assert_uint_eq(_mm_getcsr() & FTZ_DAZ, 0);
}
END_TEST

/* ------------------------------------ registers kept across a yield */

/*
 * A switching yield returns to its caller through a jump, not a ret
 * (fiber.c, yield_switch). What a call must keep is checked at the call
 * itself: a probe loads rbx, rbp and r12-r15 with known values, calls
 * fn, and stores what it finds in them after, and the change of rsp.
 * Two probes are two call sites, as two fibers' loops are. ("probe_one:
 * in (rdi), out (rsi), fn (rdx)"; returns fn's result.)
 */
#define PROBE_ASM(name) \
	".text\n.p2align 4\n.type " name ", @function\n" name ":\n" \
	"pushq %rbp\n pushq %rbx\n pushq %r12\n pushq %r13\n pushq %r14\n pushq %r15\n" \
	"pushq %rsi\n" /* out; rsp is 16-byte aligned at the call */ \
	"movq %rsp, 48(%rsi)\n" \
	"movq 0(%rdi), %rbx\n movq 8(%rdi), %rbp\n movq 16(%rdi), %r12\n" \
	"movq 24(%rdi), %r13\n movq 32(%rdi), %r14\n movq 40(%rdi), %r15\n" \
	"call *%rdx\n" \
	"movq (%rsp), %rsi\n" \
	"movq %rbx, 0(%rsi)\n movq %rbp, 8(%rsi)\n movq %r12, 16(%rsi)\n" \
	"movq %r13, 24(%rsi)\n movq %r14, 32(%rsi)\n movq %r15, 40(%rsi)\n" \
	"movq %rsp, %rcx\n subq 48(%rsi), %rcx\n movq %rcx, 48(%rsi)\n" \
	"popq %rsi\n popq %r15\n popq %r14\n popq %r13\n popq %r12\n popq %rbx\n popq %rbp\n" \
	"ret\n.size " name ", .-" name "\n"

__asm__(PROBE_ASM("probe_one") PROBE_ASM("probe_two"));
int probe_one(const uint64_t in[6], uint64_t out[7], int (*fn)(void));
int probe_two(const uint64_t in[6], uint64_t out[7], int (*fn)(void));

enum { REG_ROUNDS = 300 };

struct reg_fiber {
	int (*probe)(const uint64_t *, uint64_t *, int (*)(void));
	int (*fn)(void);          /* how it gives up the CPU */
	int (*fn_alt)(void);      /* ... every third round */
	unsigned mxcsr_bits;      /* rounding, FTZ, DAZ: its own state */
	unsigned short x87_bits;  /* rounding and precision control */
	bool own_fp;              /* check the FP words (not shared) */
	int id, bad, rounds;
};

static int sleep_briefly(void)
{
	return runtime_sleep(1000);
}

static unsigned short x87_cw(void)
{
	unsigned short cw;
	__asm__ volatile("fnstcw %0" : "=m"(cw));
	return cw;
}

static void x87_set(unsigned short cw)
{
	__asm__ volatile("fldcw %0" : : "m"(cw));
}

#define MXCSR_MINE 0xe040u  /* rounding control, FTZ, DAZ */
#define X87_MINE 0x0f00u    /* rounding and precision control */

static void reg_set_fp(const struct reg_fiber *rf)
{
	_mm_setcsr((_mm_getcsr() & ~MXCSR_MINE) | rf->mxcsr_bits);
	x87_set((unsigned short)((x87_cw() & ~X87_MINE) | rf->x87_bits));
}

static void reg_round(struct reg_fiber *rf, int i)
{
	uint64_t in[6], out[7];

	for (int r = 0; r < 6; r++)
		in[r] = 0x9e3779b97f4a7c15u * (uint64_t)(rf->id * 1000 + i) + (uint64_t)r;
	int (*fn)(void) = i % 3 == 2 ? rf->fn_alt : rf->fn;
	if (rf->probe(in, out, fn) != 0 || memcmp(in, out, sizeof(in)) != 0 || out[6] != 0)
		rf->bad++;
	if (rf->own_fp && ((_mm_getcsr() & MXCSR_MINE) != rf->mxcsr_bits ||
	                   (x87_cw() & X87_MINE) != rf->x87_bits))
		rf->bad++;
	rf->rounds++;
}

static void reg_fiber_main(void *p)
{
	struct reg_fiber *rf = p;
	const unsigned csr0 = _mm_getcsr();
	const unsigned short cw0 = x87_cw();

	if (rf->own_fp)
		reg_set_fp(rf);
	for (int i = 0; i < REG_ROUNDS; i++)
		reg_round(rf, i);
	_mm_setcsr(csr0);
	x87_set(cw0);
}

/* Three fibers, each with its own registers and FP words: one yields from
 * probe_one, one from probe_two (and every third round sleeps there), one
 * sleeps from probe_one (and every third round yields there). So a yield resumes
 * fibers that yielded from the other site or slept, a sleep resumes ones
 * that yielded, and with run_budget 1 every yield goes through the loop. */
START_TEST(test_sched_yield_keeps_callee_saved_state)
{
	const bool share = _i & 1, budget1 = _i & 2;
	struct reg_fiber rf[3] = {
		{ .probe = probe_one, .fn = runtime_yield, .fn_alt = runtime_yield,
		  .mxcsr_bits = 0x2000u, .x87_bits = 0x0c00u },
		{ .probe = probe_two, .fn = runtime_yield, .fn_alt = sleep_briefly,
		  .mxcsr_bits = 0x4000u | 0x8040u, .x87_bits = 0x0400u },
		{ .probe = probe_one, .fn = sleep_briefly, .fn_alt = runtime_yield,
		  .mxcsr_bits = 0x6000u | 0x0040u, .x87_bits = 0x0800u | 0x0200u },
	};
	struct runtime_config cfg;
	struct runtime *rt;

	runtime_config_init(&cfg);
	cfg.share_fp_control = share;
	if (budget1)
		cfg.run_budget = 1;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	for (int f = 0; f < 3; f++) {
		rf[f].id = f + 1;
		rf[f].own_fp = !share;
		ck_assert_int_eq(runtime_spawn(rt, reg_fiber_main, &rf[f]), 0);
	}
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
	for (int f = 0; f < 3; f++) {
		ck_assert_int_eq(rf[f].rounds, REG_ROUNDS);
		ck_assert_int_eq(rf[f].bad, 0);
	}
}
END_TEST

/* The same probe around a yield that does not switch (no other fiber is
 * ready): it returns at once, with everything kept. */
static void reg_alone(void *p)
{
	struct reg_fiber *rf = p;

	for (int i = 0; i < REG_ROUNDS; i++)
		reg_round(rf, i);
}

START_TEST(test_sched_lone_yield_keeps_callee_saved_state)
{
	struct reg_fiber rf = { .probe = probe_one, .fn = runtime_yield, .fn_alt = runtime_yield,
		                .id = 1 };
	struct runtime *rt;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, reg_alone, &rf), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
	ck_assert_int_eq(rf.rounds, REG_ROUNDS);
	ck_assert_int_eq(rf.bad, 0);
}
END_TEST
#endif

static Suite *sched_suite(void)
{
	Suite *s = suite_create("sched");
	TCase *tc;

	tc = tcase_create("spawn");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_sched_spawn_runs_in_fifo_order);
	tcase_add_test(tc, test_sched_spawn_from_fiber);
	tcase_add_test(tc, test_sched_run_again_after_return);
	tcase_add_test(tc, test_sched_spawn_from_foreign_thread_runs_once);
	tcase_add_test(tc, test_sched_bad_arguments);
	tcase_add_test(tc, test_sched_calls_outside_fiber_fail);
	suite_add_tcase(s, tc);

	tc = tcase_create("yield");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_sched_yield_interleaves);
	tcase_add_test(tc, test_sched_yield_loop_does_not_starve_timers);
	suite_add_tcase(s, tc);

	tc = tcase_create("fp");
	tcase_set_timeout(tc, 10);
	tcase_add_loop_test(tc, test_sched_fp_rounding_is_per_fiber, 0, 2);
#if defined(__x86_64__)
	tcase_add_test(tc, test_sched_fp_rounding_shared_when_configured);
	tcase_add_test(tc, test_sched_mxcsr_is_per_fiber);
#endif
	suite_add_tcase(s, tc);

#if defined(__x86_64__)
	tc = tcase_create("regs");
	tcase_set_timeout(tc, 10);
	tcase_add_loop_test(tc, test_sched_yield_keeps_callee_saved_state, 0, 4);
	tcase_add_test(tc, test_sched_lone_yield_keeps_callee_saved_state);
	suite_add_tcase(s, tc);
#endif

	tc = tcase_create("join");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_sched_join_returns_result);
	tcase_add_test(tc, test_sched_join_after_end_and_self_join);
	tcase_add_test(tc, test_sched_join_self_is_deadlock);
	tcase_add_test(tc, test_sched_detach_running_and_ended);
	tcase_add_test(tc, test_sched_stale_handle_reaches_no_other_fiber);
	tcase_add_test(tc, test_sched_join_twice_is_an_error);
	suite_add_tcase(s, tc);

	tc = tcase_create("cancel");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_sched_cancel_sleeping_fiber);
	tcase_add_test(tc, test_sched_cancel_joining_fiber);
	tcase_add_test(tc, test_sched_cancel_before_start_and_after_end);
	suite_add_tcase(s, tc);

	tc = tcase_create("misc");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_sched_fiber_local_and_ids);
	tcase_add_test(tc, test_sched_deadlock_is_reported);
	tcase_add_test(tc, test_sched_parked_fiber_is_no_deadlock);
	tcase_add_test(tc, test_sched_shutdown_cancels_fibers_and_timers);
	suite_add_tcase(s, tc);

	tc = tcase_create("many");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_sched_ten_thousand_fibers_sleep_and_yield);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(sched_suite)
