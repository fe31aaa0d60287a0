/* SPDX-License-Identifier: MIT */
/*
 * stall.c - the stall detector (runtime_config.stall_ms): a fiber that
 * runs that long without giving up the CPU starves every other fiber of
 * its core, so it is reported on stderr: which fiber, on which core, and
 * for how long so far.
 *
 * A watcher thread, started with each run, samples every core's switch
 * count (stall_publish, at each context switch) twice per threshold. A
 * count that has not moved for the threshold while a fiber (not the loop)
 * runs is a stall; each one is reported once, and at most
 * STALL_REPORTS_PER_MIN reports a minute are printed (the rest counted).
 * When stall_ms is 0 nothing starts and a switch pays one predictable
 * branch.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define STALL_REPORTS_PER_MIN 4
#define MINUTE_NS (60 * 1000 * 1000 * 1000ull)

/* The watcher's view of one core. */
struct stall_seen {
	uint64_t switches;
	uint64_t since;             /* when switches last moved */
	bool reported;              /* this stall has been reported */
};

struct stall_detector {
	struct runtime *rt;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;                  /* under lock */
	uint64_t window_start;      /* the rate limit's minute */
	unsigned window_reports, suppressed;
	struct stall_seen seen[];
};

static void report(struct stall_detector *d, unsigned core, uint64_t id, uint64_t ns, uint64_t now)
{
	if (now - d->window_start >= MINUTE_NS) {
		if (d->suppressed)
			fprintf(stderr, "runtime: stall: %u more stalls not reported in the last minute\n",
			        d->suppressed);
		d->window_start = now;
		d->window_reports = d->suppressed = 0;
	}
	if (d->window_reports == STALL_REPORTS_PER_MIN) {
		d->suppressed++;
		return;
	}
	d->window_reports++;
	fprintf(stderr, "runtime: stall: fiber %llu on core %u has run %llu ms without yielding\n",
	        (unsigned long long)id, core, (unsigned long long)(ns / 1000000));
}

static void check_core(struct stall_detector *d, unsigned i, uint64_t now, uint64_t limit)
{
	struct stall_watch *w = &d->rt->cores[i].watch;
	struct stall_seen *s = &d->seen[i];
	uint64_t n = atomic_load_explicit(&w->switches, memory_order_acquire);

	if (n != s->switches) {
		*s = (struct stall_seen){ .switches = n, .since = now };
		return;
	}
	uint64_t id = atomic_load_explicit(&w->fiber_id, memory_order_relaxed);
	if (id && !s->reported && now - s->since >= limit) {
		s->reported = true;
		report(d, i, id, now - s->since, now);
	}
}

static void *watch(void *arg)
{
	struct stall_detector *d = arg;
	uint64_t limit = d->rt->cfg.stall_ms * 1000000ull;

	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		uint64_t now = runtime_now();
		for (unsigned i = 0; i < d->rt->ncores; i++)
			check_core(d, i, now, limit);
		uint64_t next = now + limit / 2;
		struct timespec ts = { (time_t)(next / 1000000000u), (long)(next % 1000000000u) };
		pthread_cond_timedwait(&d->wake, &d->lock, &ts);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static struct stall_detector *detector_new(struct runtime *rt)
{
	struct stall_detector *d = calloc(1, sizeof(*d) + rt->ncores * sizeof(d->seen[0]));
	pthread_condattr_t attr;

	if (!d)
		return NULL;
	d->rt = rt;
	d->window_start = runtime_now();
	for (unsigned i = 0; i < rt->ncores; i++)
		d->seen[i].switches = UINT64_MAX; /* the first sample starts the clock */
	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&d->wake, &attr);
	pthread_condattr_destroy(&attr);
	return d;
}

static void detector_free(struct stall_detector *d)
{
	pthread_cond_destroy(&d->wake);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* runtime_run, before the cores start. */
int runtime__stall_start(struct runtime *rt)
{
	if (!rt->cfg.stall_ms)
		return 0;
	struct stall_detector *d = detector_new(rt);
	if (!d)
		return -ENOMEM;
	int err = pthread_create(&d->thread, NULL, watch, d);
	if (err) {
		detector_free(d);
		return -err;
	}
	rt->stall = d;
	return 0;
}

/* runtime_run, after every core has stopped. */
void runtime__stall_stop(struct runtime *rt)
{
	struct stall_detector *d = rt->stall;

	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	detector_free(d);
	rt->stall = NULL;
}
