/* SPDX-License-Identifier: MIT */
/*
 * check_timer.c - sleeps and cancellable timers: sleep lengths, deadlines
 * cutting sleeps short, fire order (and start order among equal deadlines),
 * exactly-once callbacks whether fired, cancelled or shut down, always from
 * the loop, delays so long that they mean never on every timed call,
 * misuse errors, 10,000 timers with half of them cancelled, and timers of
 * a few lengths started interleaved, or of one length, stopped from either
 * end and the middle, firing in deadline order.
 */
#include "testutil.h"

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
	struct sleep_state s = { -1, 0 };

	ck_assert_int_eq(run_fiber(NULL, sleep_20ms, &s), 0);
	ck_assert_int_eq(s.rc, 0);
	ck_assert_uint_ge(s.elapsed, 20 * MS); /* never early; a sleep that never ends hangs */
}
END_TEST

/* runtime_now_coarse after the core waited for I/O (no timer fired to
 * read the clock on the way): the wait is in it, and it is not ahead. */
struct coarse_state {
	int fds[2];
	uint64_t before, coarse, after;
};

static void *write_later(void *p)
{
	struct coarse_state *s = p;
	usleep(20 * 1000);
	if (write(s->fds[1], "x", 1) != 1)
		abort();
	return NULL;
}

static void coarse_after_a_wait(void *p)
{
	struct coarse_state *s = p;
	char c;
	pthread_t t;

	s->before = runtime_now();
	ck_assert_uint_le(runtime_now_coarse(), runtime_now());
	ck_assert_int_eq(pthread_create(&t, NULL, write_later, s), 0);
	ck_assert_int_eq(runtime_read(s->fds[0], &c, 1), 1);
	s->coarse = runtime_now_coarse();
	s->after = runtime_now();
	ck_assert_int_eq(pthread_join(t, NULL), 0);
}

START_TEST(test_timer_now_coarse_sees_the_wait)
{
	struct coarse_state s = { { -1, -1 }, 0, 0, 0 };

	ck_assert_int_eq(pipe(s.fds), 0);
	ck_assert_int_eq(run_fiber(NULL, coarse_after_a_wait, &s), 0);
	ck_assert_uint_ge(s.coarse, s.before + 20 * MS); /* read after the wait */
	ck_assert_uint_le(s.coarse, s.after);
	uint64_t off = runtime_now_coarse(); /* not a core's thread */
	ck_assert_uint_ge(off, s.after);
	close(s.fds[0]);
	close(s.fds[1]);
}
END_TEST

static void sleep_past_deadline(void *p)
{
	struct sleep_state *s = p;
	uint64_t t0 = runtime_now();
	runtime_deadline_set(t0 + 10 * MS);
	s->rc = runtime_sleep(3600 * 1000 * MS); /* an hour: past the test's timeout */
	s->elapsed = runtime_now() - t0;
	runtime_deadline_set(0);
	ck_assert_int_eq(runtime_sleep(1), 0);
}

START_TEST(test_timer_deadline_cuts_sleep_short)
{
	struct sleep_state s = { 0, 0 };

	ck_assert_int_eq(run_fiber(NULL, sleep_past_deadline, &s), 0);
	ck_assert_int_eq(s.rc, -ETIMEDOUT);
	ck_assert_uint_ge(s.elapsed, 10 * MS);
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
	struct sleep_state s = { -1, 0 };

	ck_assert_int_eq(run_fiber(NULL, sleep_zero, &s), 0);
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
	struct fire_log log;

	memset(&log, 0, sizeof(log));
	ck_assert_int_eq(run_fiber(NULL, start_three, &log), 0);
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
	struct fire_log log;

	memset(&log, 0, sizeof(log));
	ck_assert_int_eq(run_fiber(NULL, cancel_one, &log), 0);
	ck_assert_int_eq(log.n, 3);
	ck_assert_int_eq(log.order[0], 1);
	ck_assert_int_eq(log.why[0], RUNTIME_TIMER_CANCELLED); /* before the other fired */
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
	struct chain ch;

	memset(&ch, 0, sizeof(ch));
	ck_assert_int_eq(run_fiber(NULL, start_chain, &ch), 0);
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

	mt = calloc(1, sizeof(*mt));
	ck_assert_ptr_nonnull(mt);
	ck_assert_int_eq(run_fiber(NULL, start_many, NULL), 0);
	for (int i = 0; i < NTIMERS; i++) {
		ck_assert_int_eq(mt->calls[i], 1);
		if (i % 2 == 0)
			ck_assert_int_eq(mt->why[i], RUNTIME_TIMER_CANCELLED);
		else if (i % 2)
			ck_assert_int_eq(mt->why[i], RUNTIME_TIMER_FIRED);
	}
	ck_assert_int_eq(mt->early, 0);
	free(mt);
}
END_TEST

/* --------------------------------------------------- one timer contract */

/* Whatever ends a timer, its callback runs from the core's loop: never
 * inside runtime_timer_cancel, never inside a fiber. */
struct contract {
	bool in_cancel;
	int calls, why;
	bool called_in_cancel, called_in_fiber;
	int cancel_rc;
};

static void contract_cb(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	struct contract *c = arg;
	(void)t;
	c->calls++;
	c->why = (int)why;
	c->called_in_cancel |= c->in_cancel;
	c->called_in_fiber |= runtime_fiber_self() != NULL;
}

static void contract_fiber(void *p)
{
	struct contract *c = p;
	static struct runtime_timer t ;

	ck_assert_int_eq(runtime_timer_start(&t, 1000 * MS, contract_cb, c), 0);
	c->in_cancel = true;
	c->cancel_rc = runtime_timer_cancel(&t);
	c->in_cancel = false;
	ck_assert_int_eq(c->calls, 0); /* not yet: the loop runs it */
	runtime_yield();
}

START_TEST(test_timer_cancel_calls_back_from_the_loop)
{
	struct contract c = { .cancel_rc = -999, .why = -1 };

	ck_assert_int_eq(run_fiber(NULL, contract_fiber, &c), 0);
	ck_assert_int_eq(c.cancel_rc, 0);
	ck_assert_int_eq(c.calls, 1);
	ck_assert_int_eq(c.why, RUNTIME_TIMER_CANCELLED);
	ck_assert(!c.called_in_cancel);
	ck_assert(!c.called_in_fiber);
}
END_TEST

/* Timers due at the same time fire in the order they were started: here,
 * fibers that share one absolute deadline and sleep past it wake in the
 * order they went to sleep. */
#define SAME_TIME 200

struct fifo {
	uint64_t deadline;
	int order[SAME_TIME];
	int n;
	int rc[SAME_TIME];
};

struct fifo_arg {
	struct fifo *f;
	int i;
};

static void fifo_sleeper(void *p)
{
	struct fifo_arg *a = p;
	runtime_deadline_set(a->f->deadline);
	a->f->rc[a->i] = runtime_sleep(1000 * MS);
	a->f->order[a->f->n++] = a->i;
}

static void fifo_fiber(void *p)
{
	struct fifo *f = p;
	static struct fifo_arg args[SAME_TIME];

	f->deadline = runtime_now() + 20 * MS;
	for (int i = 0; i < SAME_TIME; i++) {
		args[i] = (struct fifo_arg){ f, i };
		ck_assert_int_eq(runtime_spawn(runtime_current(), fifo_sleeper, &args[i]), 0);
	}
}

START_TEST(test_timer_equal_deadlines_fire_in_start_order)
{
	struct fifo *f = calloc(1, sizeof(*f));

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(run_fiber(NULL, fifo_fiber, f), 0);
	ck_assert_int_eq(f->n, SAME_TIME);
	for (int i = 0; i < SAME_TIME; i++) {
		ck_assert_int_eq(f->rc[i], -ETIMEDOUT);
		ck_assert_int_eq(f->order[i], i);
	}
	free(f);
}
END_TEST

/* ------------------------------------------------------ extreme delays */

/* A delay that overflows now + delay means "never", on every timed call:
 * nothing fires or returns until something else ends the wait. */
struct extreme {
	struct runtime_timer timer;
	int timer_calls, timer_why;
	int named_calls, named_why;
	int sleep_rc, park_rc, park_min_rc, poll_rc, read_rc;
	bool sleep_done, park_done, park_min_done, poll_done, read_done;
	struct runtime_fiber *sleeper, *parker, *parker_min;
	int fd[2];
	size_t named_cancelled;
};

static struct extreme *ex;

static void ex_timer_cb(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	(void)t;
	(void)arg;
	ex->timer_calls++;
	ex->timer_why = (int)why;
}

static void ex_named_cb(void *arg, enum runtime_timer_why why)
{
	(void)arg;
	ex->named_calls++;
	ex->named_why = (int)why;
}

static void ex_sleeper(void *p)
{
	(void)p;
	ex->sleeper = runtime_fiber_self();
	ex->sleep_rc = runtime_sleep(UINT64_MAX);
	ex->sleep_done = true;
}

static void ex_parker(void *p)
{
	(void)p;
	ex->parker = runtime_fiber_self();
	ex->park_rc = runtime_park(INT64_MAX);
	ex->park_done = true;
}

static void ex_parker_min(void *p)
{
	(void)p;
	ex->parker_min = runtime_fiber_self();
	ex->park_min_rc = runtime_park(INT64_MIN); /* negative: no limit */
	ex->park_min_done = true;
}

static void ex_poller(void *p)
{
	(void)p;
	ex->poll_rc = runtime_poll(ex->fd[0], POLLIN, INT64_MAX);
	ex->poll_done = true;
}

static void ex_reader(void *p)
{
	char buf[4];
	(void)p;
	runtime_deadline_set(UINT64_MAX);
	ex->read_rc = (int)runtime_read(ex->fd[0], buf, 1);
	ex->read_done = true;
}

static void extreme_main(void *p)
{
	struct runtime *rt = runtime_current();
	(void)p;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ex->fd), 0);
	ck_assert_int_eq(runtime_timer_start(&ex->timer, UINT64_MAX, ex_timer_cb, NULL), 0);
	ck_assert_int_eq(runtime_timer_start_named(rt, "never", UINT64_MAX, ex_named_cb, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, ex_sleeper, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, ex_parker, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, ex_parker_min, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, ex_poller, NULL), 0);
	ck_assert_int_eq(runtime_sleep(50 * MS), 0);
	/* Nothing has ended by itself. */
	ck_assert_int_eq(ex->timer_calls, 0);
	ck_assert_int_eq(ex->named_calls, 0);
	ck_assert(!ex->sleep_done && !ex->park_done && !ex->park_min_done && !ex->poll_done);
	/* A deadline of UINT64_MAX is no deadline either. */
	ck_assert_int_eq(runtime_spawn(rt, ex_reader, NULL), 0);
	ck_assert_int_eq(runtime_sleep(20 * MS), 0);
	ck_assert(!ex->read_done);

	ck_assert_int_eq(runtime_timer_cancel(&ex->timer), 0);
	ex->named_cancelled = runtime_timer_cancel_named(rt, "never", 10);
	ck_assert_int_eq(runtime_fiber_cancel(ex->sleeper), 0);
	ck_assert_int_eq(runtime_fiber_unpark(ex->parker), 0);
	ck_assert_int_eq(runtime_fiber_unpark(ex->parker_min), 0);
	ck_assert_int_eq(runtime_write(ex->fd[1], "xy", 2), 2);
	ck_assert_int_eq(runtime_sleep(20 * MS), 0);
	runtime_close(ex->fd[0]);
	runtime_close(ex->fd[1]);
}

/* A background timer fires while the run goes on, and does not keep it
 * going: the run ends with the last fiber, the timer ends at destroy. */
struct background {
	struct runtime_timer t, never;
	int fired, shutdown;
};

static void background_fn(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	struct background *b = arg;
	if (why == RUNTIME_TIMER_FIRED && t == &b->t)
		b->fired++;
	if (why == RUNTIME_TIMER_SHUTDOWN)
		b->shutdown++;
}

static void background_main(void *arg)
{
	struct background *b = arg;
	ck_assert_int_eq(runtime_timer_start_background(&b->t, 10 * MS, background_fn, b), 0);
	ck_assert_int_eq(runtime_timer_start_background(&b->never, UINT64_MAX, background_fn, b),
	                 0);
	ck_assert_int_eq(runtime_timer_start_background(&b->t, 10 * MS, background_fn, b), -EBUSY);
	runtime_sleep(200 * MS); /* the run goes on: the first fires */
}

START_TEST(test_timer_background_keeps_no_run_going)
{
	struct background b = { .t = RUNTIME_TIMER_INIT, .never = RUNTIME_TIMER_INIT };
	struct runtime *rt;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, background_main, &b), 0);
	ck_assert_int_eq(runtime_run(rt), 0); /* returns with "never" armed */
	ck_assert_int_eq(b.fired, 1);
	ck_assert_int_eq(b.shutdown, 0);
	runtime_destroy(rt);
	ck_assert_int_eq(b.shutdown, 1); /* "never", at destroy */
	ck_assert_int_eq(runtime_timer_start_background(&b.t, 1, background_fn, &b), -EPERM);
}
END_TEST

START_TEST(test_timer_extreme_delays_mean_never)
{
	ex = calloc(1, sizeof(*ex));
	ck_assert_ptr_nonnull(ex);
	ex->sleep_rc = ex->park_rc = ex->park_min_rc = ex->poll_rc = ex->read_rc = -999;
	ck_assert_int_eq(run_fiber(NULL, extreme_main, NULL), 0);
	ck_assert_int_eq(ex->timer_calls, 1);
	ck_assert_int_eq(ex->timer_why, RUNTIME_TIMER_CANCELLED);
	ck_assert_uint_eq(ex->named_cancelled, 1);
	ck_assert_int_eq(ex->named_calls, 1);
	ck_assert_int_eq(ex->named_why, RUNTIME_TIMER_CANCELLED);
	ck_assert_int_eq(ex->sleep_rc, -ECANCELED);
	ck_assert_int_eq(ex->park_rc, 0);
	ck_assert_int_eq(ex->park_min_rc, 0);
	ck_assert_int_eq(ex->poll_rc, POLLIN);
	ck_assert_int_eq(ex->read_rc, 1);
	free(ex);
}
END_TEST

/* A fiber's deadline timer is lazy (fiber.c): a wait that ends early
 * leaves it armed. The next waits must still end at their own deadlines,
 * later (the timer fires early and is armed again) or earlier (it is
 * moved), on an I/O wait and on a plain suspend (a join). */
struct lazy_state {
	int rc[4];
	uint64_t elapsed[4];
};

/* A lingering deadline far past the test's timeout: a wait it ended, or a
 * run it kept going, would hang the test rather than pass late. */
#define LINGER_NS (3600 * 1000 * MS)

static void *quick_child(void *p)
{
	(void)p;
	runtime_yield();
	return NULL;
}

/* A join that ends well before the deadline: the timer lingers. */
static void join_quickly_under(uint64_t deadline)
{
	struct runtime_fiber *child;

	runtime_deadline_set(deadline);
	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &child, quick_child, NULL), 0);
	ck_assert_int_eq(runtime_fiber_join(child, NULL), 0);
}

/* A recv on an idle socket under a deadline ns from now. */
static void recv_until(int fd, uint64_t ns, int *rc, uint64_t *elapsed)
{
	char c;
	uint64_t t0 = runtime_now();

	runtime_deadline_set(t0 + ns);
	*rc = (int)runtime_recv(fd, &c, 1, 0);
	*elapsed = runtime_now() - t0;
}

static void lazy_deadlines(void *p)
{
	struct lazy_state *s = p;
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	join_quickly_under(runtime_now() + 50 * MS);    /* lingers at +50 ms */
	recv_until(sv[0], 300 * MS, &s->rc[0], &s->elapsed[0]); /* later */
	join_quickly_under(runtime_now() + LINGER_NS);  /* lingers at +1 h */
	recv_until(sv[0], 50 * MS, &s->rc[1], &s->elapsed[1]);  /* earlier */
	join_quickly_under(runtime_now() + LINGER_NS);
	uint64_t t0 = runtime_now();
	runtime_deadline_set(t0 + 60 * MS);             /* a sleep's suspend, earlier */
	s->rc[3] = runtime_sleep(LINGER_NS);
	s->elapsed[3] = runtime_now() - t0;
	runtime_deadline_set(0);
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_timer_lazy_deadline_ends_each_wait_at_its_own)
{
	struct lazy_state s;

	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(run_fiber(NULL, lazy_deadlines, &s), 0);
	ck_assert_int_eq(s.rc[0], -ETIMEDOUT);
	ck_assert_uint_ge(s.elapsed[0], 300 * MS); /* not at the lingering +50 ms */
	ck_assert_int_eq(s.rc[1], -ETIMEDOUT);
	ck_assert_uint_ge(s.elapsed[1], 50 * MS);
	ck_assert_int_eq(s.rc[3], -ETIMEDOUT);
	ck_assert_uint_ge(s.elapsed[3], 60 * MS);
}
END_TEST

/* A lingering deadline timer is nobody's pending work: a deadlock behind
 * it is still reported, not after the timer's hour (past the test's
 * timeout). */
static struct runtime_fiber *linger_a;

static void *linger_b(void *p)
{
	(void)p;
	runtime_fiber_join(linger_a, NULL);
	return NULL;
}

static void *linger_a_fn(void *p)
{
	struct runtime_fiber *b;

	(void)p;
	join_quickly_under(runtime_now() + LINGER_NS);
	runtime_deadline_set(0);
	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &b, linger_b, NULL), 0);
	runtime_fiber_join(b, NULL);
	return NULL;
}

START_TEST(test_timer_lingering_deadline_hides_no_deadlock)
{
	struct runtime *rt;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_fiber_spawn(rt, &linger_a, linger_a_fn, NULL), 0);
	ck_assert_int_eq(runtime_run(rt), -EDEADLK);
	runtime_destroy(rt);
}
END_TEST

/* --------------------------------------------- lengths started interleaved */

/* Timers of three lengths started in turn, and some of random length, as
 * a server's sleeps and timeouts are: each length keeps to its own lane,
 * the random ones mostly to the heap. A third are cancelled - the newest,
 * the oldest and ones between - so that lanes lose timers at either end
 * and in the middle, and one lane most of its timers. The rest must each fire once, never early, in order
 * of deadline: each deadline is known to within the clock reads around
 * its start, and a timer that fires before another can be due no later
 * than that one could be. */
#define NMIXED 6000

struct mixed_timers {
	struct runtime_timer t[NMIXED];
	uint64_t due_lo[NMIXED], due_hi[NMIXED];
	int calls[NMIXED];
	int fired[NMIXED], nfired;
	int early;
};

static struct mixed_timers *mx;

static void mixed_fire(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	int i = (int)(intptr_t)arg;
	(void)t;
	mx->calls[i]++;
	if (why != RUNTIME_TIMER_FIRED)
		return;
	if (runtime_now() < mx->due_lo[i])
		mx->early++;
	mx->fired[mx->nfired++] = i;
}

static uint64_t mixed_delay(int i, unsigned *seed)
{
	static const uint64_t lengths[3] = { 30 * MS, 10 * MS, 20 * MS };

	if (i % 4 < 3)
		return lengths[i % 4];
	*seed = *seed * 1103515245u + 12345u;
	return (*seed >> 8) % (40 * MS);
}

static bool mixed_cancelled(int i)
{
	return i % 3 == 0 || (i >= NMIXED - 300) || (i < 300 && i % 2) ||
	       (i % 4 == 1 && i < NMIXED * 2 / 3); /* most of one lane: compacted */
}

static void start_mixed(void *p)
{
	unsigned seed = 777;

	(void)p;
	for (int i = 0; i < NMIXED; i++) {
		uint64_t delay = mixed_delay(i, &seed);
		mx->due_lo[i] = runtime_now() + delay;
		ck_assert_int_eq(runtime_timer_start(&mx->t[i], delay, mixed_fire, (void *)(intptr_t)i), 0);
		mx->due_hi[i] = runtime_now() + delay;
	}
	for (int i = NMIXED; i-- > 0;) /* newest first: every lane's tail */
		if (mixed_cancelled(i))
			ck_assert_int_eq(runtime_timer_cancel(&mx->t[i]), 0);
}

/* One length, as a server's idle timeouts: one lane. Most are cancelled
 * from the middle, oldest first, so that the lane's holes outnumber its
 * timers and are closed while cancels go on. */
static bool one_length_cancelled(int i)
{
	return i > 0 && i < NMIXED - 100 && i % 7;
}

static void start_one_length(void *p)
{
	(void)p;
	for (int i = 0; i < NMIXED; i++) {
		mx->due_lo[i] = runtime_now() + 15 * MS;
		ck_assert_int_eq(runtime_timer_start(&mx->t[i], 15 * MS, mixed_fire, (void *)(intptr_t)i), 0);
		mx->due_hi[i] = runtime_now() + 15 * MS;
	}
	for (int i = 0; i < NMIXED; i++)
		if (one_length_cancelled(i))
			ck_assert_int_eq(runtime_timer_cancel(&mx->t[i]), 0);
}

START_TEST(test_timer_mixed_lengths_fire_in_deadline_order)
{
	int expect = 0;
	bool one = _i == 1;

	mx = calloc(1, sizeof(*mx));
	ck_assert_ptr_nonnull(mx);
	ck_assert_int_eq(run_fiber(NULL, one ? start_one_length : start_mixed, NULL), 0);
	for (int i = 0; i < NMIXED; i++) {
		ck_assert_int_eq(mx->calls[i], 1);
		expect += !(one ? one_length_cancelled(i) : mixed_cancelled(i));
	}
	ck_assert_int_eq(mx->nfired, expect);
	ck_assert_int_eq(mx->early, 0);
	for (int k = 1; k < mx->nfired; k++) {
		int a = mx->fired[k - 1], b = mx->fired[k];
		if (mx->due_lo[a] > mx->due_hi[b])
			ck_abort_msg("timer %d fired before %d, due after it", a, b);
	}
	free(mx);
}
END_TEST

static Suite *timer_suite(void)
{
	Suite *s = suite_create("timer");
	TCase *tc;

	tc = tcase_create("sleep");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_timer_sleep_lasts_as_asked);
	tcase_add_test(tc, test_timer_now_coarse_sees_the_wait);
	tcase_add_test(tc, test_timer_deadline_cuts_sleep_short);
	tcase_add_test(tc, test_timer_sleep_zero_and_past_deadline);
	tcase_add_test(tc, test_timer_lazy_deadline_ends_each_wait_at_its_own);
	tcase_add_test(tc, test_timer_lingering_deadline_hides_no_deadlock);
	suite_add_tcase(s, tc);

	tc = tcase_create("timers");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_timer_fire_in_deadline_order);
	tcase_add_test(tc, test_timer_cancel_runs_callback_once);
	tcase_add_test(tc, test_timer_callback_restarts_and_spawns);
	tcase_add_test(tc, test_timer_misuse);
	tcase_add_test(tc, test_timer_cancel_calls_back_from_the_loop);
	tcase_add_test(tc, test_timer_equal_deadlines_fire_in_start_order);
	tcase_add_test(tc, test_timer_extreme_delays_mean_never);
	tcase_add_test(tc, test_timer_background_keeps_no_run_going);
	suite_add_tcase(s, tc);

	tc = tcase_create("many");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_timer_ten_thousand_half_cancelled);
	tcase_add_loop_test(tc, test_timer_mixed_lengths_fire_in_deadline_order, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(timer_suite)
