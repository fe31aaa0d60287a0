/* SPDX-License-Identifier: MIT */
/*
 * periodic_timer.c - a periodic timer on the runtime's timer API: the
 * callback re-arms its timer each time it fires, until it has ticked N
 * times or SIGINT/SIGTERM shuts the runtime down.
 *
 * Shows: struct runtime_timer, runtime_timer_start (from a fiber, then from
 * the callback itself), the three reasons a callback runs
 * (RUNTIME_TIMER_FIRED / _CANCELLED / _SHUTDOWN), drift-free periods,
 * runtime_shutdown_on_signals, and that an armed timer alone keeps
 * runtime_run() going.
 *
 *   ./periodic_timer [TICKS [PERIOD_MS]]  # default 5 ticks, 200 ms apart
 *   ./periodic_timer 0                    # tick until Ctrl-C
 *
 * Prints "tick N" per tick, then "done after N ticks" or "shut down after
 * N ticks"; exits 0 either way.
 *
 * (The other way to do this is a fiber looping on runtime_sleep(period):
 * simpler, and it may block; a timer costs no fiber or stack at all, but
 * its callback runs on the core's loop and must never block.)
 */
#include <runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ticker {
	struct runtime_timer timer; /* must stay valid until the last callback */
	uint64_t start, period;     /* ns */
	unsigned ticks, max_ticks;  /* max_ticks 0: no limit */
};

static void on_tick(struct runtime_timer *timer, void *arg, enum runtime_timer_why why);

/* Arm the timer for the next tick. Computing the delay from the start time
 * (not "period from now") keeps ticks from drifting, however late a
 * callback ran. */
static int arm(struct ticker *t)
{
	uint64_t next = t->start + (uint64_t)(t->ticks + 1) * t->period, now = runtime_now();
	/* Returns 0, -ESHUTDOWN (shutdown has begun), or -EBUSY: the timer is
	 * still armed (its storage is in use until its callback has run). */
	return runtime_timer_start(&t->timer, next > now ? next - now : 0, on_tick, t);
}

/* Runs from the core's loop, exactly once per start: never inside a fiber,
 * so it must not block (no runtime_sleep, no I/O). It may start timers and
 * spawn fibers. */
static void on_tick(struct runtime_timer *timer, void *arg, enum runtime_timer_why why)
{
	struct ticker *t = arg;
	(void)timer;

	if (why == RUNTIME_TIMER_SHUTDOWN) {
		/* runtime_shutdown() (here: a signal) completes pending timers
		 * with this reason instead of leaving them armed. */
		printf("shut down after %u ticks\n", t->ticks);
		return;
	}
	if (why == RUNTIME_TIMER_CANCELLED) /* runtime_timer_cancel(); unused here */
		return;
	printf("tick %u\n", ++t->ticks);
	fflush(stdout); /* a blocking write, but a short one: fine for a demo */
	if (t->max_ticks && t->ticks >= t->max_ticks) {
		printf("done after %u ticks\n", t->ticks);
		return; /* not re-armed: nothing is left, runtime_run() returns */
	}
	int rc = arm(t); /* restarting the timer from its own callback is fine */
	if (rc == -ESHUTDOWN)
		printf("shut down after %u ticks\n", t->ticks);
	else if (rc < 0)
		fprintf(stderr, "runtime_timer_start: %s\n", strerror(-rc));
}

/* Timers are started on a core (from a fiber or a callback): this fiber
 * only arms the first tick and ends. */
static void starter(void *arg)
{
	struct ticker *t = arg;
	t->start = runtime_now();
	int rc = arm(t);
	if (rc < 0)
		fprintf(stderr, "runtime_timer_start: %s\n", strerror(-rc));
}

int main(int argc, char **argv)
{
	struct ticker t = { .timer = RUNTIME_TIMER_INIT, .max_ticks = 5 };
	unsigned long period_ms = 200;

	if (argc > 1)
		t.max_ticks = (unsigned)strtoul(argv[1], NULL, 10);
	if (argc > 2)
		period_ms = strtoul(argv[2], NULL, 10);
	if (period_ms == 0 || period_ms > 3600 * 1000) {
		fprintf(stderr, "usage: %s [TICKS (0: until a signal) [PERIOD_MS]]\n", argv[0]);
		return 2;
	}
	t.period = period_ms * 1000 * 1000;

	struct runtime *rt;
	int rc = runtime_create(&rt, NULL);
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %s\n", strerror(-rc));
		return 1;
	}
	/* SIGINT/SIGTERM -> runtime_shutdown(): the pending tick completes with
	 * RUNTIME_TIMER_SHUTDOWN and runtime_run() returns 0. */
	rc = runtime_shutdown_on_signals(rt);
	if (rc == 0)
		rc = runtime_spawn(rt, starter, &t);
	/* runtime_run() lasts while a fiber lives or a timer is armed. */
	if (rc == 0)
		rc = runtime_run(rt);
	if (rc < 0)
		fprintf(stderr, "runtime: %s\n", strerror(-rc));
	runtime_destroy(rt);
	return rc < 0;
}
