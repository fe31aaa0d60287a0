/* SPDX-License-Identifier: MIT */
/*
 * guarded_backend.c - a slow backend behind a resource pool: 8 client
 * fibers share 2 "connections". A client waits at most 50 ms for one; when
 * the pool is exhausted that wait times out, and the client backs off
 * (exponentially, with jitter) and tries again, up to 5 times, instead of
 * piling up on the backend. A try-get shows the other answer to overload:
 * refuse at once.
 *
 * Shows: runtime_pool_create, runtime_sem_get with a timeout,
 * runtime_sem_post, runtime_sem_try_get, runtime_sem_stats,
 * runtime_yield. (runtime_sem_create is the same without resources: a
 * counting semaphore. runtime_limiter_* bounds how many fibers run.)
 *
 *   ./guarded_backend
 *
 * Prints each client's fate, then "served S, gave up G, wait timeouts T,
 * rejected by try_get R"; exits 0 when every client was accounted for.
 */
#include <runtime.h>

#include <stdio.h>
#include <string.h>

#define MS (1000ull * 1000)
#define CLIENTS 8
#define CONNECTIONS 2
#define WAIT_NS (50 * MS)   /* how long a client waits for a connection */
#define QUERY_NS (100 * MS) /* how long the backend takes per query */
#define ATTEMPTS 5

struct connection { unsigned id, queries; };

static struct runtime_sem *pool;
static unsigned served, gave_up, timeouts;

static void client(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;

	for (unsigned attempt = 0; attempt < ATTEMPTS; attempt++) {
		void *res;
		/* Take a connection, waiting at most WAIT_NS for one to be
		 * posted back. Waiters are served first come, first served, and
		 * a returned connection goes straight to the oldest waiter. */
		int rc = runtime_sem_get(pool, &res, (int64_t)WAIT_NS);
		if (rc == 0) {
			struct connection *conn = res;
			runtime_sleep(QUERY_NS); /* the "query": other fibers run */
			conn->queries++;
			printf("client %u: served by connection %u (attempt %u)\n", id, conn->id,
			       attempt + 1);
			/* Give it back: to the next waiter if there is one. Always
			 * post what you took, also on error paths. */
			runtime_sem_post(pool, conn);
			served++;
			return;
		}
		if (rc != -ETIMEDOUT) { /* -ECANCELED: the runtime shuts down */
			fprintf(stderr, "client %u: %s\n", id, strerror(-rc));
			return;
		}
		/* -ETIMEDOUT: every connection stayed busy for WAIT_NS. Waiting
		 * longer would only queue more callers; back off instead,
		 * 20, 40, 80... ms plus a per-client jitter so that the
		 * retries do not all arrive together. */
		uint64_t backoff = (20 * MS << attempt) + id * 3 * MS;
		timeouts++;
		printf("client %u: pool exhausted (%s), backing off %llu ms\n", id, strerror(-rc),
		       (unsigned long long)(backoff / MS));
		if (runtime_sleep(backoff) < 0)
			return;
	}
	printf("client %u: gave up after %u attempts\n", id, ATTEMPTS);
	gave_up++;
}

static void driver(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < CLIENTS; i++) {
		int rc = runtime_spawn(runtime_current(), client, (void *)(uintptr_t)i);
		if (rc < 0)
			fprintf(stderr, "spawn: %s\n", strerror(-rc));
	}
	/* Let the clients run until they block: two hold the connections,
	 * the others wait in the pool's queue. */
	runtime_yield();
	/* A try-get never waits: with the pool exhausted it says -EBUSY at
	 * once (and counts a rejection). Servers use it to shed load: answer
	 * "503, retry later" rather than queue. */
	void *res;
	int rc = runtime_sem_try_get(pool, &res);
	printf("try_get while exhausted: %s\n", rc == 0 ? "got one?" : strerror(-rc));
	if (rc == 0)
		runtime_sem_post(pool, res);
}

int main(void)
{
	struct connection conns[CONNECTIONS];
	void *resources[CONNECTIONS];
	for (unsigned i = 0; i < CONNECTIONS; i++) {
		conns[i] = (struct connection){ .id = i };
		resources[i] = &conns[i];
	}
	/* The pool hands out these pointers (the array is copied). FIFO
	 * (flags 0); RUNTIME_SEM_LIFO serves the newest waiter first, so that
	 * under overload the oldest time out while the fresh ones are served. */
	int rc = runtime_pool_create(&pool, resources, CONNECTIONS, 0);
	if (rc < 0) {
		fprintf(stderr, "runtime_pool_create: %s\n", strerror(-rc));
		return 1;
	}
	struct runtime *rt;
	rc = runtime_create(&rt, NULL); /* one core: every fiber on this thread */
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %s\n", strerror(-rc));
		runtime_sem_destroy(pool);
		return 1;
	}
	rc = runtime_spawn(rt, driver, NULL);
	if (rc == 0)
		rc = runtime_run(rt);
	if (rc < 0)
		fprintf(stderr, "runtime: %s\n", strerror(-rc));
	runtime_destroy(rt);

	struct runtime_sem_stats st;
	runtime_sem_stats(pool, &st);
	runtime_sem_destroy(pool); /* -EBUSY only while fibers wait on it */
	for (unsigned i = 0; i < CONNECTIONS; i++)
		printf("connection %u: %u queries\n", i, conns[i].queries);
	printf("served %u, gave up %u, wait timeouts %u, rejected by try_get %llu, in use %u\n",
	       served, gave_up, timeouts, (unsigned long long)st.rejected, st.in_use);
	return rc == 0 && served + gave_up == CLIENTS && st.in_use == 0 ? 0 : 1;
}
