/* SPDX-License-Identifier: MIT */
/*
 * redis_load - hiredis's blocking API as an ordinary program uses it
 * (redisConnect, then redisCommand SET and GET in a loop, every reply
 * checked), measured two ways for bench/bench-redis.sh:
 *
 *   redis_load PORT fibers N SECONDS   N fibers on one core, each with its
 *                                      own connection, running on
 *                                      libruntime-preload (linked in)
 *   redis_load PORT thread SECONDS     one plain thread, one connection
 *
 * Prints "rps=R" (SET and GET each count as a request) over the SECONDS
 * after every client has connected.
 */
#include <hiredis/hiredis.h>
#include <runtime.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../preload/runtime_preload.h"

static int port;
static atomic_long requests;
static atomic_int stop, failures;
static struct runtime_waitgroup connected = RUNTIME_WAITGROUP_INIT;
static struct runtime_waitgroup go = RUNTIME_WAITGROUP_INIT;

/* One SET and GET of key; false if a reply is wrong. */
static bool set_get(redisContext *c, const char *key, const char *value)
{
	redisReply *r = redisCommand(c, "SET %s %s", key, value);
	bool ok = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK");
	if (r)
		freeReplyObject(r);
	r = ok ? redisCommand(c, "GET %s", key) : NULL;
	ok = r && r->type == REDIS_REPLY_STRING && !strcmp(r->str, value);
	if (r)
		freeReplyObject(r);
	return ok;
}

/* Connect, signal connected, wait for go (fibers), loop until stop. */
static void client(void *arg)
{
	long id = (long)(intptr_t)arg;
	char key[32], value[48];
	redisContext *c = redisConnect("127.0.0.1", port);
	bool ok = c && !c->err;

	if (runtime_fiber_self()) {
		runtime_waitgroup_done(&connected);
		runtime_waitgroup_wait(&go, -1);
	}
	snprintf(key, sizeof(key), "bench:%ld", id);
	for (long i = 0; ok && !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
		snprintf(value, sizeof(value), "value %ld of %ld", i, id);
		ok = set_get(c, key, value);
		if (ok)
			atomic_fetch_add_explicit(&requests, 2, memory_order_relaxed);
	}
	if (!ok)
		atomic_fetch_add(&failures, 1);
	if (c)
		redisFree(c);
}

static double seconds;
static double rps;

static void conductor(void *arg)
{
	long n = (long)(intptr_t)arg;
	runtime_waitgroup_add(&connected, n);
	runtime_waitgroup_add(&go, 1);
	for (long i = 0; i < n; i++)
		runtime_spawn(runtime_current(), client, (void *)(intptr_t)i);
	runtime_waitgroup_wait(&connected, -1);
	long before = atomic_load(&requests);
	uint64_t t0 = runtime_now();
	runtime_waitgroup_done(&go);
	runtime_sleep((uint64_t)(seconds * 1e9));
	rps = (double)(atomic_load(&requests) - before) / ((double)(runtime_now() - t0) / 1e9);
	atomic_store(&stop, 1);
}

static void *timer_thread(void *arg)
{
	struct timespec ts = { (time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9) };
	(void)arg;
	nanosleep(&ts, NULL);
	atomic_store(&stop, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4 || runtime_preload_linked() != 1) {
		fprintf(stderr, "usage: redis_load PORT fibers N SECONDS | PORT thread SECONDS\n");
		return 2;
	}
	port = atoi(argv[1]);
	if (!strcmp(argv[2], "fibers") && argc == 5) {
		struct runtime *rt;
		seconds = atof(argv[4]);
		if (runtime_create(&rt, NULL) < 0 ||
		    runtime_spawn(rt, conductor, (void *)(intptr_t)atol(argv[3])) < 0 ||
		    runtime_run(rt) < 0)
			return 1;
		runtime_destroy(rt);
	} else {
		pthread_t t;
		seconds = atof(argv[3]);
		uint64_t t0 = runtime_now();
		pthread_create(&t, NULL, timer_thread, NULL);
		client(NULL);
		pthread_join(t, NULL);
		rps = (double)atomic_load(&requests) / ((double)(runtime_now() - t0) / 1e9);
	}
	printf("rps=%.0f\n", rps);
	return atomic_load(&failures) ? 1 : 0;
}
