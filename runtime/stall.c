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
 * runs is a stall; each one is reported once (with the system call the
 * thread is blocked in, if any: a blocking libc call made from a fiber
 * shows up here, however deep in a library), and at most
 * STALL_REPORTS_PER_MIN reports a minute are printed (the rest counted).
 * When stall_ms is 0 nothing starts and a switch pays one predictable
 * branch.
 */
#include "core.h"
#include "services.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
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

/* Blocking calls a fiber should have made through the runtime. An
 * interrupted sleep or wait shows as restart_syscall: io_uring's task work
 * interrupts a core thread's syscalls, which the kernel then restarts. */
static const char *syscall_name(long nr)
{
	static const struct { long nr; const char *name; } known[] = {
		{ SYS_read, "read" }, { SYS_write, "write" }, { SYS_readv, "readv" },
		{ SYS_writev, "writev" }, { SYS_pread64, "pread" }, { SYS_pwrite64, "pwrite" },
		{ SYS_recvfrom, "recv" }, { SYS_sendto, "send" }, { SYS_recvmsg, "recvmsg" },
		{ SYS_sendmsg, "sendmsg" }, { SYS_accept4, "accept" }, { SYS_connect, "connect" },
		{ SYS_ppoll, "poll" }, { SYS_pselect6, "select" }, { SYS_epoll_pwait, "epoll_wait" },
		{ SYS_nanosleep, "nanosleep" }, { SYS_clock_nanosleep, "clock_nanosleep" },
		{ SYS_futex, "futex (a lock or condition variable)" }, { SYS_openat, "open" },
		{ SYS_fsync, "fsync" }, { SYS_wait4, "wait" },
		{ SYS_restart_syscall, "a restarted sleep or wait" },
#ifdef SYS_poll
		{ SYS_poll, "poll" }, { SYS_select, "select" }, { SYS_accept, "accept" },
		{ SYS_epoll_wait, "epoll_wait" },
#endif
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (known[i].nr == nr)
			return known[i].name;
	return NULL;
}

/* ", blocked in read(2)" if the core's thread sits in a system call now
 * (/proc/self/task/TID/syscall: its number, or "running"), else "". */
static void blocked_in(int tid, char *out, size_t cap)
{
	char path[64];
	long nr = -1;

	*out = '\0';
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	if (fscanf(f, "%ld", &nr) != 1)
		nr = -1;
	fclose(f);
	const char *name = nr >= 0 ? syscall_name(nr) : NULL;
	if (name)
		snprintf(out, cap, ", blocked in %s: a blocking call on a core thread", name);
	else if (nr >= 0)
		snprintf(out, cap, ", blocked in system call %ld", nr);
}

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
	char why[96];
	blocked_in(atomic_load(&d->rt->cores[core].watch.tid), why, sizeof(why));
	fprintf(stderr, "runtime: stall: fiber %llu on core %u has run %llu ms without yielding%s\n",
	        (unsigned long long)id, core, (unsigned long long)(ns / 1000000), why);
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
		atomic_fetch_add_explicit(&d->rt->cores[i].stats.stalls, 1, memory_order_relaxed);
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
