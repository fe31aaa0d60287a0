/* SPDX-License-Identifier: MIT */
/*
 * gdb_target.c - the program tests/gdb_fibers.sh debugs with
 * tools/gdb/runtime.py: two cores with named fibers each blocked on
 * something else (park, sleep, a recv, a receive stream, a channel, and an
 * unnamed one on a mutex), then a call to gdb_stop_here() from the running
 * fiber "stopper", where the test's breakpoint stops it. Run alone it does
 * the same, then cancels every fiber and exits 0 (77: no io_uring).
 *
 * Every fiber function does some work after its blocking call, so that
 * the call is not a tail call and the function's frame shows in a
 * backtrace of the suspended fiber even at -O2.
 */
#include <runtime.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MS (1000ull * 1000ull)
/* noclone is GCC's (clang makes no clones of this kind, and has not the
 * attribute). */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

/* Read by the test through gdb: the id of the fiber "parker". */
volatile uint64_t gdb_parker_id;

static struct {
	struct runtime *rt;
	int io[2];                  /* "reader" waits on io[1] */
	int st[2];                  /* "streamer" waits on st[1] */
	struct runtime_mutex mu;    /* held by "stopper" */
	struct runtime_chan *quit;  /* "boss1" waits here */
	_Atomic int ended;          /* blocking calls that returned */
} g = { .mu = RUNTIME_MUTEX_INIT };

static void fail(const char *what, int rc)
{
	fprintf(stderr, "gdb_target: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	exit(1);
}

static void check(const char *what, int rc)
{
	if (rc < 0)
		fail(what, rc);
}

/* The breakpoint: every fiber is at its wait, "stopper" runs. */
void gdb_stop_here(void);
NOINLINE void gdb_stop_here(void)
{
	__asm__ volatile("" ::: "memory");
}

static void *ended(int rc)
{
	atomic_fetch_add(&g.ended, 1);
	return (void *)(intptr_t)rc;
}

NOINLINE static void *parked_fiber(void *arg)
{
	(void)arg;
	runtime_fiber_name_set("parker");
	gdb_parker_id = runtime_fiber_id(runtime_fiber_self());
	return ended(runtime_park(-1));
}

NOINLINE static void *sleeping_fiber(void *arg)
{
	(void)arg;
	runtime_fiber_name_set("sleeper");
	return ended(runtime_sleep(UINT64_MAX));
}

/* No name: the listing must cope. */
NOINLINE static void *locking_fiber(void *arg)
{
	(void)arg;
	int rc = runtime_mutex_lock(&g.mu, -1);
	if (rc == 0)
		runtime_mutex_unlock(&g.mu);
	return ended(rc);
}

NOINLINE static void *reading_fiber(void *arg)
{
	char c;
	(void)arg;
	runtime_fiber_name_set("reader");
	return ended((int)runtime_recv(g.io[1], &c, 1, 0));
}

NOINLINE static void *streaming_fiber(void *arg)
{
	struct runtime_stream *s;
	char c;
	(void)arg;
	runtime_fiber_name_set("streamer");
	check("stream open", runtime_stream_open(&s, g.st[1]));
	int rc = (int)runtime_stream_recv(s, &c, 1);
	runtime_stream_close(s);
	return ended(rc);
}

static void cancel_all(struct runtime_fiber **f, int n)
{
	for (int i = 0; i < n; i++)
		check("cancel", runtime_fiber_cancel(f[i]));
	for (int i = 0; i < n; i++)
		check("join", runtime_fiber_join(f[i], NULL));
}

/* Core 1: a reader and a stream, until "stopper" says quit. */
static void boss1(void *arg)
{
	struct runtime_fiber *f[2];
	int msg;
	(void)arg;
	runtime_fiber_name_set("boss1");
	check("spawn", runtime_fiber_spawn(g.rt, &f[0], reading_fiber, NULL));
	check("spawn", runtime_fiber_spawn(g.rt, &f[1], streaming_fiber, NULL));
	check("quit", runtime_chan_recv(g.quit, &msg, -1));
	cancel_all(f, 2);
}

/* Lines of a runtime_dump that say "waiting". */
static int waiting(void)
{
	char *text = NULL;
	size_t len = 0;
	int n = 0;
	FILE *mem = open_memstream(&text, &len);

	if (!mem)
		fail("open_memstream", -errno);
	runtime_dump(g.rt, mem);
	fclose(mem);
	for (char *p = text; (p = strstr(p, " waiting ")); p++)
		n++;
	free(text);
	return n;
}

/* Until the other six fibers are at their waits (a generous bound). */
static void settle(void)
{
	uint64_t end = runtime_now() + 60000 * MS;

	while (waiting() < 6) {
		if (runtime_now() > end)
			fail("fibers did not reach their waits", -ETIMEDOUT);
		runtime_sleep(5 * MS);
	}
}

/* Core 0: parker, sleeper and an unnamed mutex waiter; then the stop. */
static void stopper(void *arg)
{
	struct runtime_fiber *f[3];
	int msg = 1;
	(void)arg;
	runtime_fiber_name_set("stopper");
	check("lock", runtime_mutex_lock(&g.mu, -1));
	check("spawn", runtime_fiber_spawn(g.rt, &f[0], parked_fiber, NULL));
	check("spawn", runtime_fiber_spawn(g.rt, &f[1], sleeping_fiber, NULL));
	check("spawn", runtime_fiber_spawn(g.rt, &f[2], locking_fiber, NULL));
	check("spawn", runtime_spawn_on(g.rt, 1, boss1, NULL));
	settle();
	printf("gdb_target: reader fd %d, streamer fd %d, parker id %llu\n", g.io[1], g.st[1],
	       (unsigned long long)gdb_parker_id);
	fflush(stdout);
	gdb_stop_here();
	cancel_all(f, 3);
	check("unlock", runtime_mutex_unlock(&g.mu));
	check("quit", runtime_chan_send(g.quit, &msg, -1));
}

int main(void)
{
	struct runtime_config cfg;

	runtime_config_init(&cfg);
	cfg.cores = 2;
	int rc = runtime_create(&g.rt, &cfg);
	if (rc == -ENOSYS || rc == -EOPNOTSUPP) {
		fprintf(stderr, "gdb_target: SKIP: io_uring unavailable (%d)\n", rc);
		return 77;
	}
	check("runtime_create", rc);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g.io) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g.st) < 0)
		fail("socketpair", -errno);
	check("chan", runtime_chan_create(&g.quit, sizeof(int), 1));
	check("spawn", runtime_spawn_on(g.rt, 0, stopper, NULL));
	check("run", runtime_run(g.rt));
	runtime_chan_destroy(g.quit);
	runtime_destroy(g.rt);
	for (int i = 0; i < 2; i++) {
		close(g.io[i]);
		close(g.st[i]);
	}
	if (atomic_load(&g.ended) != 5) {
		fprintf(stderr, "gdb_target: %d of 5 waits ended\n", atomic_load(&g.ended));
		return 1;
	}
	puts("gdb_target: done");
	return 0;
}
