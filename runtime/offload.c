/* SPDX-License-Identifier: MIT */
/*
 * offload.c - the offload pool: blocking work (a library call, CPU-heavy
 * work, getaddrinfo) runs on a pool of threads while the calling fiber is
 * suspended, so the core keeps serving. Seeds 001 (Puma's ThreadPool) and
 * 002 (concurrent-ruby's ThreadPoolExecutor):
 *
 *  - min threads start with each run; a thread is added only when a job
 *    finds no idle worker and the pool is below max (Puma's rule); a worker
 *    above min that stays idle for idle_ms exits (the auto-trim);
 *  - the queue is bounded; when it is full, policy decides: the fiber waits
 *    for room (Puma's wait_until_not_full), the job is rejected (-EAGAIN:
 *    concurrent-ruby's abort), or it runs on the core thread (caller-runs);
 *  - a fiber that gives up (cancel, deadline, shutdown) while its job is
 *    queued takes it back - it never runs; while it runs, the fiber returns
 *    at once and the worker hands the result to the cleanup callback.
 *
 * A job lives on the heap, since a worker may outlive the fiber's interest
 * in it; its state (one CAS) decides who frees it. Idle workers sleep on a
 * futex word each, most recently idle woken first (warm caches). The queue
 * and the idle list share one spinlock, so submitting never sleeps a core.
 */
#include "core.h"
#include "services.h"
#include "wait.h"

#include "cpu.h"

#include <limits.h>
#include <linux/futex.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum job_state { JOB_QUEUED, JOB_RUNNING, JOB_DONE, JOB_DROPPED, JOB_ABANDONED };

struct job {
	struct dnode link;              /* in the queue, under pool->lock */
	void *(*fn)(void *);
	void *arg;
	void *result;
	runtime_offload_cleanup_fn *cleanup;
	_Atomic int state;
	bool finish;                    /* the fiber waits for it once it runs */
	struct fiber *fiber;
	struct offload_pool *pool;
};

struct worker {
	struct dnode idle;              /* in pool->idle while it sleeps */
	struct dnode all;               /* in pool->workers until joined */
	struct offload_pool *pool;
	pthread_t thread;
	bool exited;                    /* trimmed: waiting to be joined */
	_Atomic uint32_t wake;          /* futex word: 1 = work for you */
};

struct offload_pool {
	struct runtime *rt;
	struct spin lock;
	struct dlist queue;             /* jobs, oldest first */
	struct dlist idle;              /* workers, most recently idle last */
	struct dlist workers;           /* every thread not yet joined */
	struct runtime_sem *slots;      /* room in the queue; NULL: unbounded */
	_Atomic bool stopping;
	_Atomic unsigned alive;         /* changed under the lock */
	_Atomic unsigned idle_count, largest;
	unsigned spinning;              /* workers polling the queue; locked */
	_Atomic size_t queued;
	_Atomic uint64_t completed, rejected;
};

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)word, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
}

/* --------------------------------------------------------------- workers */

static void *worker_main(void *arg);

static void join_and_free(struct dlist *done)
{
	struct dnode *n;

	while ((n = dlist_first(done))) {
		struct worker *w = container_of(n, struct worker, all);
		dlist_remove(n);
		pthread_join(w->thread, NULL);
		free(w);
	}
}

/* Under the lock: move trimmed workers to *done, to be joined after. */
static void collect_exited(struct offload_pool *p, struct dlist *done)
{
	for (struct dnode *n = dlist_first(&p->workers), *next; n; n = next) {
		next = dlist_next(&p->workers, n);
		if (container_of(n, struct worker, all)->exited) {
			dlist_remove(n);
			dlist_push_back(done, n);
		}
	}
}

static void note_largest(struct offload_pool *p)
{
	unsigned alive = atomic_load(&p->alive), top = atomic_load(&p->largest);
	while (alive > top && !atomic_compare_exchange_weak(&p->largest, &top, alive))
		;
}

/* A new worker, counted in alive already. Joins trimmed ones on the way,
 * so that at most max threads' worth of them is ever kept. */
static int worker_start(struct offload_pool *p)
{
	struct dlist done;
	struct worker *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->pool = p;
	w->idle.prev = w->idle.next = &w->idle;
	dlist_init(&done);
	runtime__spin_lock(&p->lock);
	collect_exited(p, &done);
	dlist_push_back(&p->workers, &w->all);
	int err = pthread_create(&w->thread, NULL, worker_main, w);
	if (err)
		dlist_remove(&w->all);
	runtime__spin_unlock(&p->lock);
	join_and_free(&done);
	if (err) {
		free(w);
		return -err;
	}
	note_largest(p);
	return 0;
}

/* The job ran: hand the result to its fiber, or - if the fiber gave up -
 * to the cleanup callback, and free the job. Once DONE, j is the fiber's
 * (it may free it as soon as it runs): nothing of j is read after. */
static void job_finish(struct job *j, void *result)
{
	int running = JOB_RUNNING;
	struct fiber *f = j->fiber;

	j->result = result;
	if (atomic_compare_exchange_strong(&j->state, &running, JOB_DONE)) {
		runtime__resume_from_anywhere(f, 0);
		return;
	}
	if (j->cleanup)
		j->cleanup(j->arg, result, 1);
	free(j);
}

/* Under the lock: the oldest job, now RUNNING (a fiber giving up takes a
 * QUEUED job back under this lock too, so the two never cross), or NULL. */
static struct job *take_job(struct offload_pool *p)
{
	struct dnode *n = dlist_first(&p->queue);

	if (!n)
		return NULL;
	dlist_remove(n);
	/* Its queue slot goes back before queued drops: no one may see an
	 * empty queue (runtime_offload_stats) and still find it full. */
	if (p->slots)
		runtime_sem_post(p->slots, NULL);
	atomic_fetch_sub(&p->queued, 1);
	struct job *j = container_of(n, struct job, link);
	atomic_store(&j->state, JOB_RUNNING);
	return j;
}

/* Sleep until handed work, the stop, or (above min) the idle time.
 * Returns false if this worker is to exit (it is out of alive then).
 * Called and returns with the lock held. */
static bool worker_idle(struct worker *w)
{
	struct offload_pool *p = w->pool;
	const struct runtime_config *cfg = &p->rt->cfg;

	atomic_store(&w->wake, 0);
	dlist_push_back(&p->idle, &w->idle);
	atomic_fetch_add(&p->idle_count, 1);
	bool trim = atomic_load(&p->alive) > cfg->offload_min_threads;
	runtime__spin_unlock(&p->lock);
	struct timespec ts = { cfg->offload_idle_ms / 1000, (cfg->offload_idle_ms % 1000) * 1000000L };
	while (!atomic_load(&w->wake))
		if (futex(&w->wake, FUTEX_WAIT, 0, trim ? &ts : NULL) < 0 && errno == ETIMEDOUT)
			break;
	runtime__spin_lock(&p->lock);
	if (atomic_load(&w->wake))
		return true; /* whoever woke us took us off the idle list */
	dlist_remove(&w->idle); /* timed out */
	atomic_fetch_sub(&p->idle_count, 1);
	if (atomic_load(&p->alive) <= cfg->offload_min_threads)
		return true; /* others left first: stay */
	atomic_fetch_sub(&p->alive, 1);
	w->exited = true;
	return false;
}

/* Run a job taken off the queue (take_job gave its slot back). */
static void run_job(struct offload_pool *p, struct job *j)
{
	void *result = j->fn(j->arg);
	atomic_fetch_add_explicit(&p->completed, 1, memory_order_relaxed);
	job_finish(j, result);
}

/* After a job, a worker polls the queue this long before it sleeps: the
 * next job of a fiber that offloads in a loop usually comes within it, and
 * then no futex wake and no sleep are paid on either side. */
#define SPIN_NS 50000

/* Called and returns with the lock held. */
static void worker_spin(struct offload_pool *p)
{
	p->spinning++;
	runtime__spin_unlock(&p->lock);
	uint64_t until = runtime_now() + SPIN_NS;
	while (!atomic_load_explicit(&p->queued, memory_order_relaxed) && !p->stopping &&
	       runtime_now() < until)
		for (int i = 0; i < 64; i++)
			cpu_relax();
	runtime__spin_lock(&p->lock);
	p->spinning--;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct offload_pool *p = w->pool;

	pthread_setname_np(pthread_self(), "rt-offload"); /* for ps, top, gdb */
	runtime__spin_lock(&p->lock);
	for (;;) {
		struct job *j = take_job(p);
		if (j) {
			runtime__spin_unlock(&p->lock);
			run_job(p, j);
			runtime__spin_lock(&p->lock);
			if (!atomic_load(&p->queued))
				worker_spin(p);
		} else if (p->stopping) {
			break; /* joined by the stop */
		} else if (!worker_idle(w)) {
			break; /* trimmed: joined by a later start or the stop */
		}
	}
	runtime__spin_unlock(&p->lock);
	return NULL;
}

/* ------------------------------------------------------------ lifecycle */

int runtime__offload_init(struct runtime *rt)
{
	struct offload_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->rt = rt;
	dlist_init(&p->queue);
	dlist_init(&p->idle);
	dlist_init(&p->workers);
	if (rt->cfg.offload_queue_max) {
		int rc = runtime_sem_create(&p->slots, rt->cfg.offload_queue_max, 0);
		if (rc < 0) {
			free(p);
			return rc;
		}
	}
	rt->offload = p;
	return 0;
}

void runtime__offload_free(struct runtime *rt)
{
	if (!rt->offload)
		return;
	runtime_sem_destroy(rt->offload->slots);
	free(rt->offload);
	rt->offload = NULL;
}

/* runtime_run's start: the minimum threads. */
int runtime__offload_start(struct runtime *rt)
{
	struct offload_pool *p = rt->offload;

	p->stopping = false;
	for (unsigned i = 0; i < rt->cfg.offload_min_threads; i++) {
		atomic_fetch_add(&p->alive, 1);
		int rc = worker_start(p);
		if (rc < 0) {
			atomic_fetch_sub(&p->alive, 1);
			runtime__offload_stop(rt);
			return rc;
		}
	}
	return 0;
}

/* runtime_run's end: no fiber waits on a job any more (they have all
 * ended), but workers may still run abandoned jobs. Wake the idle ones and
 * join every thread: none is left when runtime_run returns. */
void runtime__offload_stop(struct runtime *rt)
{
	struct offload_pool *p = rt->offload;
	struct dlist all;

	dlist_init(&all);
	runtime__spin_lock(&p->lock);
	p->stopping = true;
	struct dnode *n;
	while ((n = dlist_first(&p->idle))) {
		struct worker *w = container_of(n, struct worker, idle);
		dlist_remove(n);
		atomic_fetch_sub(&p->idle_count, 1);
		atomic_store(&w->wake, 1);
		futex(&w->wake, FUTEX_WAKE, 1, NULL);
	}
	while ((n = dlist_first(&p->workers))) {
		dlist_remove(n);
		dlist_push_back(&all, n);
	}
	runtime__spin_unlock(&p->lock);
	join_and_free(&all);
	atomic_store(&p->alive, 0);
}

/* ----------------------------------------------------------------- submit */

static struct job *j_init(struct job *j, struct offload_pool *p, struct fiber *f,
                          void *(*fn)(void *), void *arg, runtime_offload_cleanup_fn *cleanup)
{
	j->link.prev = j->link.next = &j->link;
	j->fn = fn;
	j->arg = arg;
	j->cleanup = cleanup;
	j->fiber = f;
	j->pool = p;
	atomic_init(&j->state, JOB_QUEUED);
	return j;
}

/* Starting a worker for j failed. If some worker lives it will take j;
 * else j leaves the queue and the caller gets the error. */
static int grow_failed(struct offload_pool *p, struct job *j, int err)
{
	runtime__spin_lock(&p->lock);
	bool none = atomic_fetch_sub(&p->alive, 1) == 1;
	if (none && j->link.next != &j->link) {
		dlist_remove(&j->link);
		atomic_fetch_sub(&p->queued, 1);
	}
	runtime__spin_unlock(&p->lock);
	return none ? err : 0;
}

/* Queue j and make sure a worker will take it: wake an idle one, or add
 * one if the pool is below max. Returns 0 or -errno (no worker at all
 * could be started: j is not queued). */
static int submit(struct offload_pool *p, struct job *j)
{
	struct worker *w = NULL;
	bool grow = false;

	runtime__spin_lock(&p->lock);
	dlist_push_back(&p->queue, &j->link);
	atomic_fetch_add(&p->queued, 1);
	struct dnode *n = p->idle.head.prev; /* most recently idle */
	if (p->spinning) {
		/* a spinning worker will see it */
	} else if (n != &p->idle.head) {
		w = container_of(n, struct worker, idle);
		dlist_remove(n);
		atomic_fetch_sub(&p->idle_count, 1);
	} else if (atomic_load(&p->alive) < p->rt->cfg.offload_max_threads) {
		atomic_fetch_add(&p->alive, 1);
		grow = true;
	}
	runtime__spin_unlock(&p->lock);
	if (w) {
		atomic_store(&w->wake, 1);
		futex(&w->wake, FUTEX_WAKE, 1, NULL);
	}
	int rc = grow ? worker_start(p) : 0;
	if (rc < 0)
		rc = grow_failed(p, j, rc);
	return rc;
}

/* ------------------------------------------------------------ the fiber */

/* The offloading fiber's side, on its stack: what ended its wait. */
struct offload_wait {
	struct job *job;
	struct timer timer;
	int outcome;                    /* JOB_DONE, JOB_DROPPED, JOB_ABANDONED */
};

/* Cancel or deadline, on the fiber's core. A queued job is taken back (it
 * never runs); a running one is left to its worker, which then owns it.
 * After a successful abandon nothing of j is touched: the worker may free
 * it at once. */
static void job_give_up(struct offload_wait *ow, int res)
{
	struct job *j = ow->job;
	struct offload_pool *p = j->pool;
	struct fiber *f = j->fiber;
	int queued = JOB_QUEUED, running = JOB_RUNNING;

	runtime__spin_lock(&p->lock);
	if (atomic_compare_exchange_strong(&j->state, &queued, JOB_DROPPED)) {
		dlist_remove(&j->link);
		if (p->slots)
			runtime_sem_post(p->slots, NULL); /* before queued drops */
		atomic_fetch_sub(&p->queued, 1);
		runtime__spin_unlock(&p->lock);
		ow->outcome = JOB_DROPPED;
		runtime__resume(f, res);
		return;
	}
	runtime__spin_unlock(&p->lock);
	if (j->finish)
		return; /* it runs: the worker's resume will come */
	if (atomic_compare_exchange_strong(&j->state, &running, JOB_ABANDONED)) {
		ow->outcome = JOB_ABANDONED;
		runtime__resume(f, res);
	}
	/* else DONE: the worker's resume is on its way */
}

static void offload_interrupt(struct fiber *f, int res)
{
	job_give_up(f->wait_obj, res);
}

static void offload_timeout(struct timer *t, enum runtime_timer_why why)
{
	(void)why;
	job_give_up(container_of(t, struct offload_wait, timer), -ETIMEDOUT);
}

/* Wait for j; returns 0 with the result, or -ECANCELED / -ETIMEDOUT. */
static int job_wait(struct job *j, uint64_t deadline, void **result)
{
	struct core *c = j->fiber->core;
	struct offload_wait ow = { .job = j, .outcome = JOB_DONE };

	if (deadline != NEVER) {
		ow.timer.fire = offload_timeout;
		runtime__timer_start(c, &ow.timer, deadline);
	}
	c->sched.xparked++; /* a pool thread will resume it */
	int rc = runtime__suspend(c, BLOCK_OFFLOAD, offload_interrupt, &ow);
	c->sched.xparked--;
	runtime__timer_stop(&ow.timer);
	if (ow.outcome == JOB_ABANDONED)
		return rc; /* j is the worker's now */
	if (ow.outcome == JOB_DROPPED) {
		if (j->cleanup)
			j->cleanup(j->arg, NULL, 0);
	} else if (result) {
		*result = j->result;
	}
	free(j);
	return rc;
}

/* Room in the queue, by the policy: 0 (a slot taken), 1 (the queue is full
 * and the caller is to run the job itself) or -errno. */
static int take_slot(struct offload_pool *p)
{
	if (!p->slots || runtime_sem_try_get(p->slots, NULL) == 0)
		return 0;
	switch (p->rt->cfg.offload_policy) {
	case RUNTIME_OFFLOAD_REJECT:
		atomic_fetch_add_explicit(&p->rejected, 1, memory_order_relaxed);
		return -EAGAIN;
	case RUNTIME_OFFLOAD_CALLER_RUNS:
		return 1;
	case RUNTIME_OFFLOAD_BLOCK:
	default:
		return runtime_sem_get(p->slots, NULL, -1);
	}
}

/* The caller gives up before its job was queued: arg goes to the cleanup
 * all the same, so that -ECANCELED and -ETIMEDOUT mean one thing. */
static int given_up(int rc, void *arg, runtime_offload_cleanup_fn *cleanup)
{
	if ((rc == -ECANCELED || rc == -ETIMEDOUT) && cleanup)
		cleanup(arg, NULL, 0);
	return rc;
}

/* Queue fn(arg) for fiber f and wait for it (finish: see
 * runtime__offload_finish). */
static int offload(struct fiber *f, void *(*fn)(void *), void *arg, void **result,
                   runtime_offload_cleanup_fn *cleanup, bool finish)
{
	struct offload_pool *p = f->core->rt->offload;
	int rc = take_slot(p);

	if (rc != 0) {
		if (rc < 0)
			return given_up(rc, arg, cleanup);
		void *r = fn(arg); /* caller-runs: on this core, blocking it */
		if (result)
			*result = r;
		return 0;
	}
	struct job *j = calloc(1, sizeof(*j));
	if (j)
		j->finish = finish;
	if (!j || (rc = submit(p, j_init(j, p, f, fn, arg, cleanup))) < 0) {
		free(j);
		if (p->slots)
			runtime_sem_post(p->slots, NULL);
		return j ? rc : -ENOMEM;
	}
	return job_wait(j, f->deadline, result);
}

int runtime_offload(void *(*fn)(void *), void *arg, void **result,
                    runtime_offload_cleanup_fn *cleanup)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f, __func__);

	if (rc)
		return f ? given_up(rc, arg, cleanup) : rc;
	if (!fn)
		return -EINVAL;
	if (runtime__is_shutting_down(f->core->rt))
		return -ESHUTDOWN;
	return offload(f, fn, arg, result, cleanup, false);
}

/*
 * The epoll engine's blocking syscalls (regular files, open, statx,
 * fsync): fn(arg) on the pool, which may write to the fiber's stack, so a
 * cancel or deadline takes the job back only while it is queued; once it
 * runs, the fiber waits for its end and gets its result (the cancel shows
 * at its next blocking call), as an io_uring operation that completed
 * anyway. Also during a shutdown: cleanup code may write a file. Returns
 * 0 (fn ran), -ECANCELED or -ETIMEDOUT (it never ran), or
 * runtime_offload's refusals.
 */
int runtime__offload_finish(struct fiber *f, void *(*fn)(void *), void *arg, void **result)
{
	return offload(f, fn, arg, result, NULL, true);
}

void runtime_offload_stats(const struct runtime *rt, struct runtime_offload_stats *st)
{
	if (!rt || !st) {
		runtime__misuse(-EINVAL, "runtime_offload_stats", "NULL runtime or stats");
		if (st)
			*st = (struct runtime_offload_stats){ 0 };
		return;
	}
	const struct offload_pool *p = rt->offload;

	st->alive = atomic_load(&p->alive);
	st->idle = atomic_load(&p->idle_count);
	st->largest = atomic_load(&p->largest);
	st->queued = atomic_load(&p->queued);
	st->completed = atomic_load(&p->completed);
	st->rejected = atomic_load(&p->rejected);
}

/* ------------------------------------------------------------ built on it */

/* A blocking call's arguments and results live on the heap, with the job:
 * if the fiber gives up, the call still finishes and writes there, and the
 * cleanup frees it. */
struct gai_call {
	struct addrinfo hints;
	bool has_hints;
	struct addrinfo *res;
	int rc;
	char *node, *service;
};

static void *gai_run(void *arg)
{
	struct gai_call *g = arg;
	g->rc = getaddrinfo(g->node, g->service, g->has_hints ? &g->hints : NULL, &g->res);
	if (g->rc == EAI_SYSTEM)
		g->rc = -errno; /* kept apart from the EAI codes: see gai_errno */
	return NULL;
}

static void gai_free(struct gai_call *g)
{
	free(g->node);
	free(g->service);
	free(g);
}

static void gai_cleanup(void *arg, void *result, int ran)
{
	struct gai_call *g = arg;
	(void)result;
	if (ran && g->rc == 0)
		freeaddrinfo(g->res);
	gai_free(g);
}

/* The resolver's EAI codes as -errno (the header lists them). */
static int gai_errno(int rc)
{
	switch (rc) {
	case 0: return 0;
	case EAI_NONAME: return -ENOENT;
#ifdef EAI_NODATA
	case EAI_NODATA: return -ENODATA;
#endif
#ifdef EAI_ADDRFAMILY
	case EAI_ADDRFAMILY: return -ENODATA;
#endif
	case EAI_AGAIN: return -EAGAIN;
	case EAI_FAIL: return -EIO;
	case EAI_FAMILY: return -EAFNOSUPPORT;
	case EAI_SOCKTYPE: return -ESOCKTNOSUPPORT;
	case EAI_SERVICE: return -ESOCKTNOSUPPORT;
	case EAI_MEMORY: return -ENOMEM;
	case EAI_BADFLAGS: return -EINVAL;
	default: return rc < 0 && rc > -4096 && rc != EAI_OVERFLOW ? rc : -EIO;
	}
}

static char *dup_or_null(const char *s, bool *failed)
{
	char *d = s ? strdup(s) : NULL;
	*failed |= s && !d;
	return d;
}

int runtime_getaddrinfo(const char *node, const char *service,
                        const struct addrinfo *hints, struct addrinfo **res)
{
	bool oom = false;

	if (!res || (!node && !service))
		return -EINVAL;
	struct gai_call *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->node = dup_or_null(node, &oom);
	g->service = dup_or_null(service, &oom);
	if (hints) {
		g->hints = *hints;
		g->has_hints = true;
	}
	int rc = oom ? -ENOMEM : runtime_offload(gai_run, g, NULL, gai_cleanup);
	if (rc == -ECANCELED || rc == -ETIMEDOUT)
		return rc; /* g went to the cleanup */
	if (rc == 0 && (rc = gai_errno(g->rc)) == 0)
		*res = g->res;
	gai_free(g);
	return rc;
}

/* ftruncate and fstat: the same shape. */
struct file_call {
	int fd;
	off_t length;
	struct stat st;
	int rc;
};

static void *ftruncate_run(void *arg)
{
	struct file_call *fc = arg;
	fc->rc = ftruncate(fc->fd, fc->length) == 0 ? 0 : -errno;
	return NULL;
}

static void *fstat_run(void *arg)
{
	struct file_call *fc = arg;
	fc->rc = fstat(fc->fd, &fc->st) == 0 ? 0 : -errno;
	return NULL;
}

static void file_cleanup(void *arg, void *result, int ran)
{
	(void)result;
	(void)ran;
	free(arg);
}

static int file_call(void *(*fn)(void *), struct file_call *fc)
{
	int rc = runtime_offload(fn, fc, NULL, file_cleanup);
	if (rc == -ECANCELED || rc == -ETIMEDOUT)
		return rc; /* fc went to the cleanup */
	if (rc == 0)
		rc = fc->rc;
	return rc;
}

int runtime_ftruncate(int fd, off_t length)
{
	struct file_call *fc = calloc(1, sizeof(*fc));

	if (!fc)
		return -ENOMEM;
	fc->fd = fd;
	fc->length = length;
	int rc = file_call(ftruncate_run, fc);
	if (rc != -ECANCELED && rc != -ETIMEDOUT)
		free(fc);
	return rc;
}

int runtime_fstat(int fd, struct stat *st)
{
	if (!st)
		return -EFAULT;
	struct file_call *fc = calloc(1, sizeof(*fc));
	if (!fc)
		return -ENOMEM;
	fc->fd = fd;
	int rc = file_call(fstat_run, fc);
	if (rc == -ECANCELED || rc == -ETIMEDOUT)
		return rc;
	if (rc == 0)
		*st = fc->st;
	free(fc);
	return rc;
}
