/* SPDX-License-Identifier: MIT */
/*
 * worker_pool.c - a producer, a pool of worker fibers spread over every
 * core, and a collector, connected by channels:
 *
 *   producer --jobs--> worker x N (all cores) --results--> collector
 *
 * The producer closes the jobs channel when it has sent everything; each
 * worker stops when its receive says -EPIPE (closed and drained); a wait
 * group counts the workers, and whoever sees it reach zero closes the
 * results channel, which ends the collector. No job is lost, nothing is
 * polled, and every fiber ends on its own, so runtime_run() returns.
 *
 * Shows: runtime_config.cores, runtime_spawn_on, runtime_chan_create /
 * _send / _recv / _close, runtime_waitgroup_add / _done / _wait.
 *
 *   ./worker_pool [JOBS [WORKERS]]        # default 1000 jobs, 8 workers
 *
 * Prints how many jobs each worker did and "sum of squares 1..JOBS = S
 * (expected S)"; exits 0 if the sum is right.
 */
#include <runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WORKERS 64

struct job { uint64_t n; };
struct result { uint64_t square; unsigned worker; };

static struct runtime_chan *jobs, *results;
static struct runtime_waitgroup workers_left = RUNTIME_WAITGROUP_INIT;
static uint64_t njobs = 1000, sum;
static unsigned done_by[MAX_WORKERS]; /* each slot written by one fiber */

static void producer(void *arg)
{
	(void)arg;
	for (uint64_t n = 1; n <= njobs; n++) {
		struct job j = { n };
		/* The element is copied in. With the channel full, the fiber
		 * waits (timeout -1: no limit) until a worker makes room. */
		int rc = runtime_chan_send(jobs, &j, -1);
		if (rc < 0) { /* -ECANCELED if the runtime is shut down */
			fprintf(stderr, "producer: send: %s\n", strerror(-rc));
			break;
		}
	}
	/* "No more jobs": buffered ones are still delivered; after them every
	 * receive returns -EPIPE. Close works from any thread. */
	runtime_chan_close(jobs);
}

static void worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	struct job j;

	/* Workers on different cores receive from the same channel: each job
	 * goes to exactly one of them. */
	while (runtime_chan_recv(jobs, &j, -1) == 0) {
		/* The "work". A fiber that computes holds its core until it
		 * blocks or yields: that is why the workers are spread over
		 * every core (a long job would also call runtime_yield() now
		 * and then, or go to runtime_offload()). */
		struct result r = { j.n * j.n, id };
		if (runtime_chan_send(results, &r, -1) < 0)
			break;
		done_by[id]++;
	}
	/* The last worker to finish brings the count to zero, which wakes the
	 * closer below. */
	runtime_waitgroup_done(&workers_left);
}

/* Waits for every worker, then tells the collector there is no more. */
static void closer(void *arg)
{
	(void)arg;
	runtime_waitgroup_wait(&workers_left, -1);
	runtime_chan_close(results);
}

static void collector(void *arg)
{
	struct result r;
	(void)arg;
	while (runtime_chan_recv(results, &r, -1) == 0)
		sum += r.square;
}

int main(int argc, char **argv)
{
	unsigned nworkers = 8;
	if (argc > 1)
		njobs = strtoull(argv[1], NULL, 10);
	if (argc > 2)
		nworkers = (unsigned)strtoul(argv[2], NULL, 10);
	if (njobs == 0 || njobs > 1000000 || nworkers == 0 || nworkers > MAX_WORKERS) {
		fprintf(stderr, "usage: %s [JOBS (1..1000000) [WORKERS (1..%d)]]\n", argv[0],
		        MAX_WORKERS);
		return 2;
	}

	/* cores = 0: one core thread (and one io_uring) per online CPU. */
	struct runtime_config cfg;
	runtime_config_init(&cfg);
	cfg.cores = 0;
	struct runtime *rt;
	int rc = runtime_create(&rt, &cfg);
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %s\n", strerror(-rc));
		return 1;
	}
	/* Channels carry fixed-size elements, copied in and out; they work
	 * across cores. Capacity 16: the producer runs at most 16 jobs ahead. */
	if ((rc = runtime_chan_create(&jobs, sizeof(struct job), 16)) < 0 ||
	    (rc = runtime_chan_create(&results, sizeof(struct result), 16)) < 0) {
		fprintf(stderr, "runtime_chan_create: %s\n", strerror(-rc));
		if (jobs)
			runtime_chan_destroy(jobs);
		runtime_destroy(rt);
		return 1;
	}

	/* Count the workers before any can finish (add works from any thread). */
	runtime_waitgroup_add(&workers_left, nworkers);
	unsigned cores = runtime_cores(rt);
	rc = runtime_spawn_on(rt, 0, producer, NULL);
	for (unsigned i = 0; rc == 0 && i < nworkers; i++)
		rc = runtime_spawn_on(rt, i % cores, worker, (void *)(uintptr_t)i);
	if (rc == 0)
		rc = runtime_spawn_on(rt, 0, closer, NULL);
	if (rc == 0)
		rc = runtime_spawn_on(rt, 0, collector, NULL);
	if (rc == 0)
		rc = runtime_run(rt); /* every fiber on every core has ended */
	if (rc < 0)
		fprintf(stderr, "runtime: %s\n", strerror(-rc));
	runtime_destroy(rt);
	runtime_chan_destroy(jobs);
	runtime_chan_destroy(results);
	if (rc < 0)
		return 1;

	printf("%u workers on %u cores\n", nworkers, cores);
	for (unsigned i = 0; i < nworkers; i++)
		printf("worker %u: %u jobs\n", i, done_by[i]);
	uint64_t expected = njobs * (njobs + 1) * (2 * njobs + 1) / 6;
	printf("sum of squares 1..%llu = %llu (expected %llu)\n", (unsigned long long)njobs,
	       (unsigned long long)sum, (unsigned long long)expected);
	return sum == expected ? 0 : 1;
}
