/* SPDX-License-Identifier: MIT */
/*
 * check_sync.c - the sync primitives: mutex (FIFO hand-off, deadlines,
 * cancel, misuse), condition, wait group, semaphore and resource pool
 * (exact FIFO and LIFO order, no barging, one waiter per post, a cancelled
 * waiter passing its wake-up on, stats, n posts at once, the free count),
 * task limiter, channels (rendezvous, buffering, close with blocked
 * senders and receivers, deadlines) and select (readiness, fairness,
 * close, cancel); calls from plain threads; and a cross-core stress run in
 * which every item is delivered exactly once. Run under ThreadSanitizer
 * too (./build.sh check).
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static struct runtime *make_rt(unsigned cores)
{
	struct runtime_config cfg;
	struct runtime *rt;

	runtime_config_init(&cfg);
	cfg.cores = cores;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	return rt;
}

/* Let every ready fiber of the core run (they queue up in spawn order). */
static void settle(void)
{
	for (int i = 0; i < 8; i++)
		runtime_yield();
}

/* ----------------------------------------------------------------- mutex */

struct order_log {
	int order[16];
	int n;
};

static struct runtime_mutex mu = RUNTIME_MUTEX_INIT;
static struct order_log olog;

static void *mutex_taker(void *p)
{
	int id = (int)(intptr_t)p;
	ck_assert_int_eq(runtime_mutex_lock(&mu, -1), 0);
	olog.order[olog.n++] = id;
	ck_assert_int_eq(runtime_mutex_unlock(&mu), 0);
	return NULL;
}

static void *mutex_late(void *p)
{
	(void)p;
	return (void *)(intptr_t)runtime_mutex_lock(&mu, 20 * MS);
}

static void *mutex_victim(void *p)
{
	(void)p;
	return (void *)(intptr_t)runtime_mutex_lock(&mu, -1);
}

static void mutex_main(void *p)
{
	struct runtime_fiber *f[4], *late, *victim;
	(void)p;

	ck_assert_int_eq(runtime_mutex_lock(&mu, -1), 0);
	ck_assert_int_eq(runtime_mutex_lock(&mu, -1), -EDEADLK);
	ck_assert_int_eq(runtime_mutex_trylock(&mu), -EBUSY);
	/* Waiters queue in this order and get the mutex in this order. */
	for (int i = 0; i < 4; i++) {
		f[i] = start(mutex_taker, (void *)(intptr_t)i);
		settle();
	}
	late = start(mutex_late, NULL);
	victim = start(mutex_victim, NULL);
	settle();
	ck_assert_int_eq(join(late), -ETIMEDOUT);
	ck_assert_int_eq(runtime_fiber_cancel(victim), 0);
	ck_assert_int_eq(join(victim), -ECANCELED);
	ck_assert_int_eq(olog.n, 0);
	ck_assert_int_eq(runtime_mutex_unlock(&mu), 0);
	ck_assert_int_eq(runtime_mutex_unlock(&mu), -EPERM); /* not held */
	for (int i = 0; i < 4; i++)
		join(f[i]);
	ck_assert_int_eq(olog.n, 4);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(olog.order[i], i);
	/* Free again, uncontended; a cancelled fiber may still take it. */
	ck_assert_int_eq(runtime_mutex_trylock(&mu), 0);
	ck_assert_int_eq(runtime_mutex_unlock(&mu), 0);
}

START_TEST(test_sync_mutex_fifo_deadline_cancel_misuse)
{
	memset(&olog, 0, sizeof(olog));
	ck_assert_int_eq(run_fiber(NULL, mutex_main, NULL), 0);
	ck_assert_int_eq(runtime_mutex_lock(&mu, -1), -EPERM);
	ck_assert_int_eq(runtime_mutex_unlock(&mu), -EPERM);
	ck_assert_int_eq(runtime_mutex_lock(NULL, -1), -EPERM);
}
END_TEST

/* ------------------------------------------------------------- condition */

static struct runtime_cond cv = RUNTIME_COND_INIT;
static int cond_ready;
static _Atomic int cond_woken;

static void *cond_waiter(void *p)
{
	int rc;
	(void)p;
	ck_assert_int_eq(runtime_mutex_lock(&mu, -1), 0);
	while (!cond_ready)
		if ((rc = runtime_cond_wait(&cv, &mu, -1)) < 0)
			break;
	atomic_fetch_add(&cond_woken, 1);
	ck_assert_int_eq(runtime_mutex_unlock(&mu), 0); /* held again after the wait */
	return NULL;
}

static void *cond_timed(void *p)
{
	(void)p;
	ck_assert_int_eq(runtime_mutex_lock(&mu, -1), 0);
	int rc = runtime_cond_wait(&cv, &mu, 10 * MS);
	ck_assert_int_eq(runtime_mutex_unlock(&mu), 0);
	return (void *)(intptr_t)rc;
}

static void *cond_one_shot(void *p)
{
	(void)p;
	ck_assert_int_eq(runtime_mutex_lock(&mu, -1), 0);
	int rc = runtime_cond_wait(&cv, &mu, -1);
	atomic_fetch_add(&cond_woken, 1);
	ck_assert_int_eq(runtime_mutex_unlock(&mu), 0);
	return (void *)(intptr_t)rc;
}

static void *signal_from_thread(void *p)
{
	(void)p;
	usleep(20 * 1000);
	ck_assert_int_eq(runtime_cond_signal(&cv), 0);
	return NULL;
}

static void cond_main(void *p)
{
	struct runtime_fiber *f[3], *t;
	pthread_t th;
	(void)p;

	/* One signal wakes exactly one waiter. */
	for (int i = 0; i < 3; i++)
		f[i] = start(cond_one_shot, NULL);
	settle();
	ck_assert_int_eq(runtime_cond_signal(&cv), 0);
	settle();
	ck_assert_int_eq(atomic_load(&cond_woken), 1);
	ck_assert_int_eq(runtime_fiber_cancel(f[1]), 0);
	settle();
	ck_assert_int_eq(runtime_cond_broadcast(&cv), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(join(f[i]), i == 1 ? -ECANCELED : 0);
	/* Timeout, with the mutex held again. */
	t = start(cond_timed, NULL);
	ck_assert_int_eq(join(t), -ETIMEDOUT);
	/* A signal from a plain thread; the classic predicate loop. */
	atomic_store(&cond_woken, 0);
	t = start(cond_one_shot, NULL);
	settle();
	ck_assert_int_eq(pthread_create(&th, NULL, signal_from_thread, NULL), 0);
	ck_assert_int_eq(join(t), 0);
	pthread_join(th, NULL);
	f[0] = start(cond_waiter, NULL);
	settle();
	ck_assert_int_eq(runtime_mutex_lock(&mu, -1), 0);
	cond_ready = 1;
	ck_assert_int_eq(runtime_cond_broadcast(&cv), 0);
	ck_assert_int_eq(runtime_mutex_unlock(&mu), 0);
	join(f[0]);
}

START_TEST(test_sync_cond_signal_broadcast_timeout_thread)
{
	cond_ready = 0;
	atomic_store(&cond_woken, 0);
	ck_assert_int_eq(run_fiber(NULL, cond_main, NULL), 0);
	ck_assert_int_eq(runtime_cond_wait(&cv, &mu, -1), -EPERM);
}
END_TEST

/* ------------------------------------------------------------ wait group */

static struct runtime_waitgroup wg = RUNTIME_WAITGROUP_INIT;

static void *wg_worker(void *p)
{
	runtime_sleep((uint64_t)(intptr_t)p * MS);
	ck_assert_int_eq(runtime_waitgroup_done(&wg), 0);
	return NULL;
}

static _Atomic bool wg_go; /* the thread's done may come */

/* The group's last done, from a plain thread, only once the timed wait
 * has timed out (10 s at most): a timeout a loaded machine lets fire late
 * cannot see the group complete. */
static void *wg_thread_done(void *p)
{
	(void)p;
	for (int i = 0; i < 10000 && !atomic_load(&wg_go); i++)
		usleep(1000);
	ck_assert_int_eq(runtime_waitgroup_done(&wg), 0);
	return NULL;
}

static void wg_main(void *p)
{
	pthread_t th;
	(void)p;

	ck_assert_int_eq(runtime_waitgroup_wait(&wg, -1), 0); /* zero: at once */
	ck_assert_int_eq(runtime_waitgroup_add(&wg, 5), 0);
	for (intptr_t i = 0; i < 4; i++)
		runtime_fiber_detach(start(wg_worker, (void *)(i + 1)));
	atomic_store(&wg_go, false);
	ck_assert_int_eq(pthread_create(&th, NULL, wg_thread_done, NULL), 0);
	ck_assert_int_eq(runtime_waitgroup_wait(&wg, 5 * MS), -ETIMEDOUT);
	atomic_store(&wg_go, true);
	ck_assert_int_eq(runtime_waitgroup_wait(&wg, -1), 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(runtime_waitgroup_done(&wg), -EINVAL); /* below zero */
	ck_assert_int_eq(runtime_waitgroup_wait(&wg, -1), 0);
}

START_TEST(test_sync_waitgroup)
{
	ck_assert_int_eq(run_fiber(NULL, wg_main, NULL), 0);
	ck_assert_int_eq(runtime_waitgroup_wait(&wg, -1), -EPERM);
}
END_TEST

/* --------------------------------------------------- semaphore and pool */

static struct runtime_sem *sem;

static void *sem_getter(void *p)
{
	void *r = NULL;
	int rc = runtime_sem_get(sem, &r, -1);
	ck_assert_int_eq(rc, 0);
	olog.order[olog.n++] = (int)(intptr_t)p;
	return r;
}

static void *sem_cancelled(void *p)
{
	(void)p;
	return (void *)(intptr_t)runtime_sem_get(sem, NULL, -1);
}

/* Four getters queue in order 0..3 (and a fifth, cancelled at once); each
 * post wakes exactly one of them, in FIFO (or LIFO) order exactly. */
static void sem_order(bool lifo, void *held[4])
{
	struct runtime_fiber *f[4], *gone;
	struct runtime_sem_stats st;

	olog.n = 0;
	for (int i = 0; i < 4; i++) {
		f[i] = start(sem_getter, (void *)(intptr_t)i);
		settle();
	}
	gone = start(sem_cancelled, NULL);
	settle();
	runtime_sem_stats(sem, &st);
	ck_assert_uint_eq(st.waiting, 5);
	ck_assert_int_eq(runtime_fiber_cancel(gone), 0);
	ck_assert_int_eq(join(gone), -ECANCELED);
	ck_assert_int_eq(runtime_sem_destroy(sem), -EBUSY);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(runtime_sem_post(sem, held ? held[i] : NULL), 0);
		/* Handed over: a newcomer cannot take it meanwhile. */
		ck_assert_int_eq(runtime_sem_try_get(sem, NULL), -EBUSY);
		settle();
		ck_assert_int_eq(olog.n, i + 1); /* exactly one woken per post */
	}
	for (int i = 0; i < 4; i++) {
		int want = lifo ? 3 - i : i;
		ck_assert_int_eq(olog.order[i], want);
		void *got = (void *)join(f[want]);
		ck_assert_ptr_eq(got, held ? held[i] : NULL);
	}
}

static void sem_order_main(void *p)
{
	bool lifo = p != NULL;
	unsigned flags = lifo ? RUNTIME_SEM_LIFO : 0;
	static int res[4];
	void *rs[4] = { &res[0], &res[1], &res[2], &res[3] };
	void *held[4];
	struct runtime_sem_stats st;

	/* A semaphore of 0: posts count up. */
	ck_assert_int_eq(runtime_sem_create(&sem, 0, flags), 0);
	sem_order(lifo, NULL);
	ck_assert_int_eq(runtime_sem_destroy(sem), 0);

	/* A pool whose resources are all taken: each waiter receives the
	 * resource posted for it, and no post beyond the gets is taken. */
	ck_assert_int_eq(runtime_pool_create(&sem, rs, 4, flags), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(runtime_sem_get(sem, &held[i], -1), 0);
	ck_assert_int_eq(runtime_sem_try_get(sem, NULL), -EBUSY);
	sem_order(lifo, held);
	runtime_sem_stats(sem, &st);
	ck_assert_uint_eq(st.in_use, 4);
	ck_assert_uint_eq(st.waiting, 0);
	ck_assert_uint_eq(st.rejected, 5);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(runtime_sem_post(sem, held[i]), 0);
	ck_assert_int_eq(runtime_sem_post(sem, held[0]), -EOVERFLOW);
	ck_assert_int_eq(runtime_sem_destroy(sem), 0);
}

START_TEST(test_sync_sem_fifo_and_lifo_order_exact)
{
	memset(&olog, 0, sizeof(olog));
	ck_assert_int_eq(run_fiber(NULL, sem_order_main, (void *)(intptr_t)_i), 0);
}
END_TEST

static void *sem_timed(void *p)
{
	(void)p;
	return (void *)(intptr_t)runtime_sem_get(sem, NULL, 10 * MS);
}

static void *post_from_thread(void *p)
{
	(void)p;
	usleep(20 * 1000);
	ck_assert_int_eq(runtime_sem_post(sem, NULL), 0);
	return NULL;
}

/* A waiter that is cancelled or times out passes its wake-up on. */
static void sem_pass_on_main(void *p)
{
	struct runtime_fiber *a, *b, *c;
	pthread_t th;
	(void)p;

	ck_assert_int_eq(runtime_sem_create(&sem, 1, 0), 0);
	ck_assert_int_eq(runtime_sem_get(sem, NULL, -1), 0);
	a = start(sem_cancelled, NULL);
	b = start(sem_timed, NULL);
	c = start(sem_getter, (void *)(intptr_t)7);
	settle();
	ck_assert_int_eq(runtime_fiber_cancel(a), 0);
	ck_assert_int_eq(join(a), -ECANCELED);
	ck_assert_int_eq(join(b), -ETIMEDOUT);
	ck_assert_int_eq(runtime_sem_post(sem, NULL), 0); /* goes to c */
	join(c);
	ck_assert_int_eq(olog.order[0], 7);
	/* A post from a thread that is not a fiber wakes a fiber. */
	ck_assert_int_eq(pthread_create(&th, NULL, post_from_thread, NULL), 0);
	ck_assert_int_eq(runtime_sem_get(sem, NULL, -1), 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(runtime_sem_post(sem, NULL), 0);
	ck_assert_int_eq(runtime_sem_destroy(sem), 0);
}

START_TEST(test_sync_sem_cancelled_waiter_passes_wakeup_on)
{
	memset(&olog, 0, sizeof(olog));
	ck_assert_int_eq(run_fiber(NULL, sem_pass_on_main, NULL), 0);
	ck_assert_int_eq(runtime_sem_create(&sem, 1, 0), 0);
	ck_assert_int_eq(runtime_sem_get(sem, NULL, -1), -EPERM);
	ck_assert_int_eq(runtime_sem_try_get(sem, NULL), 0); /* any thread */
	ck_assert_int_eq(runtime_sem_post(sem, NULL), 0);
	ck_assert_int_eq(runtime_sem_destroy(sem), 0);
}
END_TEST

/* post_n: the oldest n waiters (the newest with LIFO) get one each by
 * direct hand-off, none is left for a newcomer while fibers wait, and the
 * rest counts as free. */
static void sem_post_n_main(void *p)
{
	bool lifo = p != NULL;
	struct runtime_fiber *f[4], *gone;

	olog.n = 0;
	ck_assert_int_eq(runtime_sem_create(&sem, 0, lifo ? RUNTIME_SEM_LIFO : 0), 0);
	for (int i = 0; i < 4; i++) {
		f[i] = start(sem_getter, (void *)(intptr_t)i);
		settle();
	}
	gone = start(sem_cancelled, NULL); /* queued, then cancelled: skipped */
	settle();
	ck_assert_int_eq(runtime_fiber_cancel(gone), 0);
	ck_assert_int_eq(join(gone), -ECANCELED);
	ck_assert_int_eq(runtime_sem_post_n(sem, 3), 0);
	ck_assert_uint_eq(runtime_sem_count(sem), 0);
	ck_assert_int_eq(runtime_sem_try_get(sem, NULL), -EBUSY); /* handed over */
	settle();
	ck_assert_int_eq(olog.n, 3);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(olog.order[i], lifo ? 3 - i : i);
	ck_assert_int_eq(runtime_sem_post_n(sem, 4), 0); /* one waiter, 3 free */
	settle();
	ck_assert_int_eq(olog.n, 4);
	ck_assert_int_eq(olog.order[3], lifo ? 0 : 3);
	ck_assert_uint_eq(runtime_sem_count(sem), 3);
	for (int i = 0; i < 4; i++)
		join(f[i]);
	ck_assert_int_eq(runtime_sem_get(sem, NULL, 0), 0);
	ck_assert_uint_eq(runtime_sem_count(sem), 2);
	ck_assert_int_eq(runtime_sem_destroy(sem), 0);
}

START_TEST(test_sync_sem_post_n_hands_off_in_order)
{
	memset(&olog, 0, sizeof(olog));
	ck_assert_int_eq(run_fiber(NULL, sem_post_n_main, (void *)(intptr_t)_i), 0);
}
END_TEST

static void *post_n_from_thread(void *p)
{
	usleep(20 * 1000);
	ck_assert_int_eq(runtime_sem_post_n(sem, (unsigned)(intptr_t)p), 0);
	return NULL;
}

static _Atomic int sem_woken;

/* A plain thread's post_n wakes fibers of two cores at once. */
static void sem_post_n_xcore(void *p)
{
	(void)p;
	ck_assert_int_eq(runtime_sem_get(sem, NULL, -1), 0);
	atomic_fetch_add(&sem_woken, 1);
}

START_TEST(test_sync_sem_post_n_from_thread_wakes_both_cores)
{
	struct runtime_config cfg;
	struct runtime *rt;
	pthread_t th;

	atomic_store(&sem_woken, 0);
	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	ck_assert_int_eq(runtime_sem_create(&sem, 0, 0), 0);
	for (unsigned i = 0; i < 4; i++)
		ck_assert_int_eq(runtime_spawn_on(rt, i % 2, sem_post_n_xcore, NULL), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, post_n_from_thread, (void *)(intptr_t)5), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	pthread_join(th, NULL);
	runtime_destroy(rt);
	ck_assert_int_eq(atomic_load(&sem_woken), 4);
	ck_assert_uint_eq(runtime_sem_count(sem), 1);
	ck_assert_int_eq(runtime_sem_destroy(sem), 0);
}
END_TEST

/* Bad input, the bound, and a pool. */
START_TEST(test_sync_sem_post_n_count_misuse_and_bound)
{
	struct runtime_sem *pool;
	void *r[1] = { &r };

	ck_assert_int_eq(runtime_sem_post_n(NULL, 1), -EINVAL);
	ck_assert_uint_eq(runtime_sem_count(NULL), 0);
	ck_assert_int_eq(runtime_pool_create(&pool, r, 1, 0), 0);
	ck_assert_uint_eq(runtime_sem_count(pool), 1);
	ck_assert_int_eq(runtime_sem_post_n(pool, 1), -EINVAL);
	ck_assert_int_eq(runtime_sem_try_get(pool, NULL), 0);
	ck_assert_uint_eq(runtime_sem_count(pool), 0);
	ck_assert_int_eq(runtime_sem_post_n(pool, 1), -EINVAL); /* even when taken */
	ck_assert_int_eq(runtime_sem_destroy(pool), 0);

	ck_assert_int_eq(runtime_sem_create(&sem, RUNTIME_SEM_MAX - 2, 0), 0);
	ck_assert_int_eq(runtime_sem_post_n(sem, 0), 0);
	ck_assert_uint_eq(runtime_sem_count(sem), RUNTIME_SEM_MAX - 2);
	ck_assert_int_eq(runtime_sem_post_n(sem, 3), -EOVERFLOW); /* whole */
	ck_assert_uint_eq(runtime_sem_count(sem), RUNTIME_SEM_MAX - 2);
	ck_assert_int_eq(runtime_sem_post_n(sem, UINT32_MAX), -EOVERFLOW);
	ck_assert_int_eq(runtime_sem_post_n(sem, RUNTIME_SEM_MAX + 1u), -EOVERFLOW);
	ck_assert_int_eq(runtime_sem_post_n(sem, 2), 0);
	ck_assert_uint_eq(runtime_sem_count(sem), RUNTIME_SEM_MAX);
	ck_assert_int_eq(runtime_sem_post(sem, NULL), -EOVERFLOW);
	ck_assert_int_eq(runtime_sem_post_n(sem, 1), -EOVERFLOW);
	ck_assert_int_eq(runtime_sem_try_get(sem, NULL), 0);
	ck_assert_uint_eq(runtime_sem_count(sem), RUNTIME_SEM_MAX - 1);
	ck_assert_int_eq(runtime_sem_destroy(sem), 0);
}
END_TEST

/* --------------------------------------------------------------- limiter */

static struct runtime_limiter *lim;
static _Atomic int alive, most;
static bool held; /* the fibers started with p 0 wait until it is false */

/* Sleeps p ms; p 0: until held is false. */
static void limited(void *p)
{
	int now = atomic_fetch_add(&alive, 1) + 1;
	for (int m = atomic_load(&most); now > m && !atomic_compare_exchange_weak(&most, &m, now);)
		;
	if (p)
		runtime_sleep((uint64_t)(intptr_t)p * MS);
	while (!p && held)
		runtime_sleep(MS);
	atomic_fetch_sub(&alive, 1);
}

static void limiter_main(void *p)
{
	(void)p;
	ck_assert_int_eq(runtime_limiter_create(&lim, 3), 0);
	for (intptr_t i = 0; i < 12; i++)
		ck_assert_int_eq(runtime_limiter_spawn(lim, limited, (void *)(1 + i % 3), -1), 0);
	ck_assert_uint_le(runtime_limiter_in_flight(lim), 3);
	while (runtime_limiter_in_flight(lim))
		runtime_sleep(MS);
	held = true; /* the three in flight stay until the timed spawn is over */
	while (runtime_limiter_in_flight(lim) < 3)
		ck_assert_int_eq(runtime_limiter_try_spawn(lim, limited, NULL), 0);
	ck_assert_int_eq(runtime_limiter_try_spawn(lim, limited, (void *)1), -EBUSY);
	ck_assert_int_eq(runtime_limiter_spawn(lim, limited, (void *)1, 1 * MS), -ETIMEDOUT);
	ck_assert_int_eq(runtime_limiter_destroy(lim), -EBUSY);
	held = false;
	while (runtime_limiter_in_flight(lim))
		runtime_sleep(MS);
	ck_assert_int_eq(runtime_limiter_destroy(lim), 0);
}

START_TEST(test_sync_limiter_bounds_fibers_in_flight)
{
	atomic_store(&alive, 0);
	atomic_store(&most, 0);
	ck_assert_int_eq(run_fiber(NULL, limiter_main, NULL), 0);
	ck_assert_int_eq(atomic_load(&most), 3);
	ck_assert_int_eq(atomic_load(&alive), 0);
}
END_TEST

/* -------------------------------------------------------------- channels */

static struct runtime_chan *ch;

static void *chan_receiver(void *p)
{
	int v = -1;
	int rc = runtime_chan_recv(ch, &v, -1);
	(void)p;
	return (void *)(intptr_t)(rc < 0 ? rc : v);
}

static void *chan_sender(void *p)
{
	int v = (int)(intptr_t)p;
	return (void *)(intptr_t)runtime_chan_send(ch, &v, -1);
}

static void chan_rendezvous_main(void *p)
{
	struct runtime_fiber *s, *r[2];
	int v;
	(void)p;

	ck_assert_int_eq(runtime_chan_create(&ch, sizeof(int), 0), 0);
	v = 1;
	ck_assert_int_eq(runtime_chan_try_send(ch, &v), -EAGAIN); /* nobody receives */
	ck_assert_int_eq(runtime_chan_send(ch, &v, 5 * MS), -ETIMEDOUT);
	s = start(chan_sender, (void *)42);
	settle(); /* the sender waits for a receiver */
	ck_assert_int_eq(runtime_chan_recv(ch, &v, -1), 0);
	ck_assert_int_eq(v, 42);
	ck_assert_int_eq(join(s), 0);
	/* Receivers blocked at close wake with -EPIPE; so do senders. */
	r[0] = start(chan_receiver, NULL);
	r[1] = start(chan_receiver, NULL);
	settle();
	ck_assert_int_eq(runtime_chan_close(ch), 0);
	ck_assert_int_eq(runtime_chan_close(ch), -EALREADY);
	ck_assert_int_eq(join(r[0]), -EPIPE);
	ck_assert_int_eq(join(r[1]), -EPIPE);
	ck_assert_int_eq(runtime_chan_send(ch, &v, -1), -EPIPE);
	ck_assert_int_eq(runtime_chan_destroy(ch), 0);

	ck_assert_int_eq(runtime_chan_create(&ch, sizeof(int), 0), 0);
	s = start(chan_sender, (void *)5);
	settle();
	ck_assert_int_eq(runtime_chan_close(ch), 0);
	ck_assert_int_eq(join(s), -EPIPE);
	ck_assert_int_eq(runtime_chan_recv(ch, &v, -1), -EPIPE);
	ck_assert_int_eq(runtime_chan_destroy(ch), 0);
}

START_TEST(test_sync_chan_rendezvous_and_close_with_blocked)
{
	ck_assert_int_eq(run_fiber(NULL, chan_rendezvous_main, NULL), 0);
}
END_TEST

struct big {
	char bytes[300];
};

static void chan_buffered_main(void *p)
{
	struct big b, out;
	(void)p;

	ck_assert_int_eq(runtime_chan_create(&ch, sizeof(struct big), 3), 0);
	for (int i = 0; i < 3; i++) {
		memset(&b, 'a' + i, sizeof(b));
		ck_assert_int_eq(runtime_chan_try_send(ch, &b), 0);
	}
	memset(&b, 'x', sizeof(b));
	ck_assert_int_eq(runtime_chan_try_send(ch, &b), -EAGAIN); /* full */
	memset(&b, 'd', sizeof(b));
	/* Full: a send waits, here in vain. */
	ck_assert_int_eq(runtime_chan_send(ch, &b, 1 * MS), -ETIMEDOUT);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(runtime_chan_recv(ch, &out, -1), 0);
		ck_assert_int_eq(out.bytes[0], 'a' + i);
		ck_assert_int_eq(out.bytes[299], 'a' + i);
	}
	ck_assert_int_eq(runtime_chan_try_recv(ch, &out), -EAGAIN);
	ck_assert_int_eq(runtime_chan_recv(ch, &out, 1 * MS), -ETIMEDOUT);
	/* Closed: buffered elements drain first, then -EPIPE. */
	ck_assert_int_eq(runtime_chan_send(ch, &b, -1), 0);
	ck_assert_int_eq(runtime_chan_close(ch), 0);
	ck_assert_int_eq(runtime_chan_try_send(ch, &b), -EPIPE);
	ck_assert_int_eq(runtime_chan_recv(ch, &out, -1), 0);
	ck_assert_int_eq(out.bytes[0], 'd');
	ck_assert_int_eq(runtime_chan_recv(ch, &out, -1), -EPIPE);
	ck_assert_int_eq(runtime_chan_destroy(ch), 0);
}

START_TEST(test_sync_chan_buffered_fifo_deadlines_drain_after_close)
{
	ck_assert_int_eq(run_fiber(NULL, chan_buffered_main, NULL), 0);
}
END_TEST

static void *chan_full_sender(void *p)
{
	int v = (int)(intptr_t)p;
	return (void *)(intptr_t)runtime_chan_send(ch, &v, -1);
}

/* Senders blocked on a full channel: receiving makes room for the oldest,
 * and a close wakes the rest with -EPIPE. */
static void chan_blocked_senders_main(void *p)
{
	struct runtime_fiber *s[3];
	int v;
	(void)p;

	ck_assert_int_eq(runtime_chan_create(&ch, sizeof(int), 1), 0);
	v = 0;
	ck_assert_int_eq(runtime_chan_send(ch, &v, -1), 0);
	for (intptr_t i = 0; i < 3; i++) {
		s[i] = start(chan_full_sender, (void *)(i + 1));
		settle();
	}
	ck_assert_int_eq(runtime_chan_recv(ch, &v, -1), 0);
	ck_assert_int_eq(v, 0);
	ck_assert_int_eq(join(s[0]), 0); /* moved into the ring */
	ck_assert_int_eq(runtime_chan_close(ch), 0);
	ck_assert_int_eq(join(s[1]), -EPIPE);
	ck_assert_int_eq(join(s[2]), -EPIPE);
	ck_assert_int_eq(runtime_chan_recv(ch, &v, -1), 0);
	ck_assert_int_eq(v, 1);
	ck_assert_int_eq(runtime_chan_recv(ch, &v, -1), -EPIPE);
	ck_assert_int_eq(runtime_chan_destroy(ch), 0);
}

START_TEST(test_sync_chan_close_with_blocked_senders)
{
	ck_assert_int_eq(run_fiber(NULL, chan_blocked_senders_main, NULL), 0);
}
END_TEST

/* ---------------------------------------------------------------- select */

static struct runtime_chan *sel[2];

static void *select_waiter(void *p)
{
	int a = -1, b = -1;
	struct runtime_chan_op ops[2] = {
		{ sel[0], RUNTIME_CHAN_RECV, &a, -999 },
		{ sel[1], RUNTIME_CHAN_RECV, &b, -999 },
	};
	int i = runtime_chan_select(ops, 2, (int64_t)(intptr_t)p);
	if (i < 0)
		return (void *)(intptr_t)i;
	ck_assert_int_eq(ops[i].result, 0);
	return (void *)(intptr_t)(i * 1000 + (i ? b : a));
}

static void select_main(void *p)
{
	struct runtime_fiber *f;
	int v, x = 0, y = 0;
	int count[2] = { 0, 0 };
	(void)p;

	ck_assert_int_eq(runtime_chan_create(&sel[0], sizeof(int), 0), 0);
	ck_assert_int_eq(runtime_chan_create(&sel[1], sizeof(int), 0), 0);
	/* Waits on both; the second channel serves it. */
	f = start(select_waiter, (void *)(intptr_t)-1);
	settle();
	v = 7;
	ck_assert_int_eq(runtime_chan_send(sel[1], &v, -1), 0);
	ck_assert_int_eq(join(f), 1007);
	/* Its waiter on the first channel is gone: a try_send finds nobody. */
	ck_assert_int_eq(runtime_chan_try_send(sel[0], &v), -EAGAIN);
	/* Timeout, and non-blocking. */
	f = start(select_waiter, (void *)(intptr_t)(5 * MS));
	ck_assert_int_eq(join(f), -ETIMEDOUT);
	ck_assert_int_eq((intptr_t)select_waiter((void *)0), -EAGAIN);
	/* Cancelled while waiting. */
	f = start(select_waiter, (void *)(intptr_t)-1);
	settle();
	ck_assert_int_eq(runtime_fiber_cancel(f), 0);
	ck_assert_int_eq(join(f), -ECANCELED);
	/* Close wakes a select on that operation with -EPIPE. */
	struct runtime_chan_op ops[2] = {
		{ sel[0], RUNTIME_CHAN_RECV, &x, -999 },
		{ sel[1], RUNTIME_CHAN_RECV, &y, -999 },
	};
	ck_assert_int_eq(runtime_chan_close(sel[1]), 0);
	ck_assert_int_eq(runtime_chan_select(ops, 2, -1), 1);
	ck_assert_int_eq(ops[1].result, -EPIPE);
	runtime_chan_destroy(sel[1]);
	/* Fairness: two ready operations are chosen about equally often. */
	ck_assert_int_eq(runtime_chan_create(&sel[1], sizeof(int), 1), 0);
	runtime_chan_destroy(sel[0]);
	ck_assert_int_eq(runtime_chan_create(&sel[0], sizeof(int), 1), 0);
	for (int round = 0; round < 2000; round++) {
		v = round;
		runtime_chan_try_send(sel[0], &v);
		runtime_chan_try_send(sel[1], &v);
		struct runtime_chan_op both[2] = {
			{ sel[0], RUNTIME_CHAN_RECV, &x, -999 },
			{ sel[1], RUNTIME_CHAN_RECV, &y, -999 },
		};
		int i = runtime_chan_select(both, 2, 0);
		ck_assert_int_ge(i, 0);
		count[i]++;
	}
	ck_assert_int_gt(count[0], 800);
	ck_assert_int_gt(count[1], 800);
	/* A select that sends. */
	ck_assert_int_eq(runtime_chan_try_recv(sel[0], &x), 0);
	struct runtime_chan_op snd[1] = { { sel[0], RUNTIME_CHAN_SEND, &v, -999 } };
	ck_assert_int_eq(runtime_chan_select(snd, 1, -1), 0);
	ck_assert_int_eq(snd[0].result, 0);
	runtime_chan_destroy(sel[0]);
	runtime_chan_destroy(sel[1]);
}

START_TEST(test_sync_select_wait_timeout_cancel_close_fairness)
{
	ck_assert_int_eq(run_fiber(NULL, select_main, NULL), 0);
	struct runtime_chan_op bad = { NULL, RUNTIME_CHAN_RECV, NULL, 0 };
	ck_assert_int_eq(runtime_chan_select(&bad, 1, -1), -EINVAL);
	ck_assert_int_eq(runtime_chan_select(NULL, 0, -1), -EINVAL);
}
END_TEST

/* ------------------------------------------------- cancel on every wait */

enum { W_MUTEX, W_COND, W_SEM, W_WG, W_SEND, W_RECV, W_SELECT, W_LIMITER, W_COUNT };

static struct runtime_sem *csem;
static struct runtime_chan *cfull, *cempty;
static struct runtime_limiter *clim;
static struct runtime_waitgroup cwg = RUNTIME_WAITGROUP_INIT;
static struct runtime_mutex cmu = RUNTIME_MUTEX_INIT;
static struct runtime_cond ccv = RUNTIME_COND_INIT;

static void nap(void *p)
{
	(void)p;
	runtime_sleep(60000 * MS);
}

static void *blocked_in(void *p)
{
	int v = 1, rc = -999;
	switch ((intptr_t)p) {
	case W_MUTEX:
		rc = runtime_mutex_lock(&cmu, -1);
		break;
	case W_COND:
		runtime_mutex_lock(&mu, -1);
		rc = runtime_cond_wait(&ccv, &mu, -1);
		runtime_mutex_unlock(&mu);
		break;
	case W_SEM:
		rc = runtime_sem_get(csem, NULL, -1);
		break;
	case W_WG:
		rc = runtime_waitgroup_wait(&cwg, -1);
		break;
	case W_SEND:
		rc = runtime_chan_send(cfull, &v, -1);
		break;
	case W_RECV:
		rc = runtime_chan_recv(cempty, &v, -1);
		break;
	case W_SELECT: {
		struct runtime_chan_op ops[2] = { { cempty, RUNTIME_CHAN_RECV, &v, 0 },
			                          { cfull, RUNTIME_CHAN_SEND, &v, 0 } };
		rc = runtime_chan_select(ops, 2, -1);
		break;
	}
	case W_LIMITER:
		rc = runtime_limiter_spawn(clim, nap, NULL, -1);
		break;
	}
	return (void *)(intptr_t)rc;
}

/* A fiber blocked in each kind of wait is cancelled: each returns
 * -ECANCELED, leaves its queue, and the primitive works on. */
static void cancel_each_main(void *p)
{
	struct runtime_fiber *f[W_COUNT];
	int v = 0;
	(void)p;

	ck_assert_int_eq(runtime_sem_create(&csem, 0, 0), 0);
	ck_assert_int_eq(runtime_chan_create(&cfull, sizeof(int), 1), 0);
	ck_assert_int_eq(runtime_chan_try_send(cfull, &v), 0);
	ck_assert_int_eq(runtime_chan_create(&cempty, sizeof(int), 0), 0);
	ck_assert_int_eq(runtime_limiter_create(&clim, 1), 0);
	ck_assert_int_eq(runtime_limiter_spawn(clim, nap, NULL, -1), 0);
	ck_assert_int_eq(runtime_waitgroup_add(&cwg, 1), 0);
	ck_assert_int_eq(runtime_mutex_lock(&cmu, -1), 0);
	for (intptr_t k = 0; k < W_COUNT; k++)
		f[k] = start(blocked_in, (void *)k);
	settle();
	for (int k = 0; k < W_COUNT; k++)
		ck_assert_int_eq(runtime_fiber_cancel(f[k]), 0);
	for (int k = 0; k < W_COUNT; k++)
		ck_assert_msg(join(f[k]) == -ECANCELED, "wait %d", k);
	/* Nobody is left queued: everything can be freed or used. */
	ck_assert_int_eq(runtime_mutex_unlock(&cmu), 0);
	ck_assert_int_eq(runtime_mutex_trylock(&cmu), 0);
	ck_assert_int_eq(runtime_mutex_unlock(&cmu), 0);
	ck_assert_int_eq(runtime_sem_destroy(csem), 0);
	ck_assert_int_eq(runtime_chan_destroy(cfull), 0);
	ck_assert_int_eq(runtime_chan_destroy(cempty), 0);
	ck_assert_int_eq(runtime_waitgroup_done(&cwg), 0);
	ck_assert_int_eq(runtime_limiter_in_flight(clim), 1);
	runtime_shutdown(runtime_current()); /* ends the napper */
}

START_TEST(test_sync_cancel_while_waiting_on_each)
{
	ck_assert_int_eq(run_fiber(NULL, cancel_each_main, NULL), 0);
	ck_assert_int_eq(runtime_limiter_destroy(clim), 0);
}
END_TEST

/* ------------------------------------------------------ from plain threads */

START_TEST(test_sync_outside_fibers)
{
	int v = 3;

	ck_assert_int_eq(runtime_chan_create(&ch, sizeof(int), 1), 0);
	ck_assert_int_eq(runtime_chan_send(ch, &v, -1), -EPERM);
	ck_assert_int_eq(runtime_chan_try_send(ch, &v), 0);
	ck_assert_int_eq(runtime_chan_recv(ch, &v, 5 * MS), -EPERM);
	ck_assert_int_eq(runtime_chan_try_recv(ch, &v), 0);
	struct runtime_chan_op op = { ch, RUNTIME_CHAN_RECV, &v, 0 };
	ck_assert_int_eq(runtime_chan_select(&op, 1, -1), -EPERM);
	ck_assert_int_eq(runtime_chan_select(&op, 1, 0), -EAGAIN);
	ck_assert_int_eq(runtime_chan_close(ch), 0);
	ck_assert_int_eq(runtime_chan_destroy(ch), 0);
	ck_assert_int_eq(runtime_limiter_create(&lim, 1), 0);
	ck_assert_int_eq(runtime_limiter_spawn(lim, limited, NULL, -1), -EPERM);
	ck_assert_int_eq(runtime_limiter_try_spawn(lim, limited, NULL), -EPERM);
	ck_assert_int_eq(runtime_limiter_destroy(lim), 0);
	ck_assert_int_eq(runtime_mutex_trylock(&mu), -EPERM);
	ck_assert_int_eq(runtime_waitgroup_add(&wg, 1), 0);
	ck_assert_int_eq(runtime_waitgroup_done(&wg), 0);
	ck_assert_int_eq(runtime_cond_signal(&cv), 0);
	ck_assert_int_eq(runtime_cond_broadcast(&cv), 0);
}
END_TEST

/* --------------------------------------------------- cross-core stress */

#ifdef RUNTIME_TSAN
#define STRESS_ITEMS 20000
#else
#define STRESS_ITEMS 200000
#endif
#define STRESS_PRODUCERS 4 /* fibers: two per core */

struct stress {
	struct runtime *rt;
	struct runtime_chan *items;
	struct runtime_mutex lock;
	struct runtime_waitgroup producers;
	struct runtime_sem *tokens;
	_Atomic unsigned char *seen;
	long counter;                 /* under lock */
	_Atomic long received, thread_sent;
	_Atomic bool thread_done;
};

static struct stress sx;

/* Producers send disjoint ranges, plain-thread items on top. */
static void producer(void *p)
{
	intptr_t first = (intptr_t)p;
	for (intptr_t i = first; i < STRESS_ITEMS; i += STRESS_PRODUCERS) {
		int v = (int)i;
		ck_assert_int_eq(runtime_chan_send(sx.items, &v, -1), 0);
		if (i % 64 == 0) {
			ck_assert_int_eq(runtime_mutex_lock(&sx.lock, -1), 0);
			sx.counter++;
			runtime_yield(); /* hold it across a switch */
			ck_assert_int_eq(runtime_mutex_unlock(&sx.lock), 0);
		}
	}
	runtime_waitgroup_done(&sx.producers);
}

static void *thread_producer(void *p)
{
	(void)p;
	for (int i = 0; i < 1000;) {
		int v = STRESS_ITEMS + i;
		int rc = runtime_chan_try_send(sx.items, &v);
		if (rc == 0)
			i++;
		else
			usleep(10);
	}
	atomic_store(&sx.thread_sent, 1000);
	atomic_store(&sx.thread_done, true);
	return NULL;
}

static void consumer(void *p)
{
	int v;
	(void)p;
	while (runtime_chan_recv(sx.items, &v, -1) == 0) {
		ck_assert_int_lt(v, STRESS_ITEMS + 1000);
		ck_assert_int_eq(atomic_fetch_add(&sx.seen[v], 1), 0);
		atomic_fetch_add(&sx.received, 1);
		/* A token passed around the cores too. */
		ck_assert_int_eq(runtime_sem_get(sx.tokens, NULL, -1), 0);
		ck_assert_int_eq(runtime_sem_post(sx.tokens, NULL), 0);
	}
}

static void closer(void *p)
{
	(void)p;
	ck_assert_int_eq(runtime_waitgroup_wait(&sx.producers, -1), 0);
	while (!atomic_load(&sx.thread_done))
		runtime_sleep(MS);
	ck_assert_int_eq(runtime_chan_close(sx.items), 0);
}

START_TEST(test_sync_cross_core_stress_exactly_once)
{
	pthread_t th;

	memset(&sx, 0, sizeof(sx));
	sx.rt = make_rt(2);
	sx.seen = calloc(STRESS_ITEMS + 1000, 1);
	ck_assert_ptr_nonnull(sx.seen);
	ck_assert_int_eq(runtime_chan_create(&sx.items, sizeof(int), 16), 0);
	ck_assert_int_eq(runtime_sem_create(&sx.tokens, 1, 0), 0);
	ck_assert_int_eq(runtime_waitgroup_add(&sx.producers, STRESS_PRODUCERS), 0);
	for (intptr_t i = 0; i < STRESS_PRODUCERS; i++)
		ck_assert_int_eq(runtime_spawn_on(sx.rt, (unsigned)(i % 2), producer, (void *)i), 0);
	for (unsigned i = 0; i < 6; i++)
		ck_assert_int_eq(runtime_spawn_on(sx.rt, i % 2, consumer, NULL), 0);
	ck_assert_int_eq(runtime_spawn_on(sx.rt, 1, closer, NULL), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, thread_producer, NULL), 0);
	ck_assert_int_eq(runtime_run(sx.rt), 0);
	pthread_join(th, NULL);
	runtime_destroy(sx.rt);
	ck_assert_int_eq(atomic_load(&sx.received), STRESS_ITEMS + 1000);
	for (int i = 0; i < STRESS_ITEMS + 1000; i++)
		ck_assert_msg(sx.seen[i] == 1, "item %d delivered %d times", i, sx.seen[i]);
	ck_assert_int_eq(sx.counter, (STRESS_ITEMS + 63) / 64);
	ck_assert_int_eq(runtime_chan_destroy(sx.items), 0);
	ck_assert_int_eq(runtime_sem_destroy(sx.tokens), 0);
	free((void *)sx.seen);
}
END_TEST

static Suite *sync_suite(void)
{
	Suite *s = suite_create("sync");
	TCase *tc;

	tc = tcase_create("primitives");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_sync_mutex_fifo_deadline_cancel_misuse);
	tcase_add_test(tc, test_sync_cond_signal_broadcast_timeout_thread);
	tcase_add_test(tc, test_sync_waitgroup);
	tcase_add_loop_test(tc, test_sync_sem_fifo_and_lifo_order_exact, 0, 2);
	tcase_add_test(tc, test_sync_sem_cancelled_waiter_passes_wakeup_on);
	tcase_add_loop_test(tc, test_sync_sem_post_n_hands_off_in_order, 0, 2);
	tcase_add_test(tc, test_sync_sem_post_n_from_thread_wakes_both_cores);
	tcase_add_test(tc, test_sync_sem_post_n_count_misuse_and_bound);
	tcase_add_test(tc, test_sync_limiter_bounds_fibers_in_flight);
	tcase_add_test(tc, test_sync_outside_fibers);
	tcase_add_test(tc, test_sync_cancel_while_waiting_on_each);
	suite_add_tcase(s, tc);

	tc = tcase_create("channels");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_sync_chan_rendezvous_and_close_with_blocked);
	tcase_add_test(tc, test_sync_chan_buffered_fifo_deadlines_drain_after_close);
	tcase_add_test(tc, test_sync_chan_close_with_blocked_senders);
	tcase_add_test(tc, test_sync_select_wait_timeout_cancel_close_fairness);
	suite_add_tcase(s, tc);

	tc = tcase_create("stress");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_sync_cross_core_stress_exactly_once);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(sync_suite)
