/* SPDX-License-Identifier: MIT */
/*
 * notify.c - systemd's notification protocol (sd_notify(3)) and its
 * watchdog, written to the protocol rather than on libsystemd: the
 * protocol is one datagram of "KEY=value" lines to the unix socket named
 * by NOTIFY_SOCKET (a path, or '@' for an abstract name), a few lines of
 * code, while libsystemd would be a run-time dependency of every program
 * linked with libruntime - most never run under systemd - and pulls in
 * its own (liblzma, libzstd, libgcrypt...). What we do not use of it
 * (file-descriptor stores, barriers) stays out.
 *
 * The watchdog (WATCHDOG_USEC, for us if WATCHDOG_PID is absent or ours)
 * is an internal timer on core 0, armed at each run, firing every half
 * interval. Each core bumps a turn counter at the top of its loop (a
 * relaxed store to its own line, only while the watchdog is on: no
 * syscall); the timer sends WATCHDOG=1 only if every core's counter
 * moved since the last firing, or the core sleeps in the kernel (an idle
 * core is not stuck). A fiber that never yields stops its core's turns,
 * so the pings stop and systemd restarts the service; a stalled core 0
 * stops the timer itself. The timer keeps no fiber and no work alive,
 * and it lingers (c->timers.lingering): a lone core whose fibers all wait
 * on each other is still found deadlocked.
 */
#include "core.h"
#include "services.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

/* NOTIFY_SOCKET as an address: 0 with *len set, -ENOENT (unset or
 * empty: not under a manager that listens), -EINVAL (a bad value). */
static int notify_address(struct sockaddr_un *sa, socklen_t *len)
{
	const char *name = getenv("NOTIFY_SOCKET");
	size_t n = name ? strlen(name) : 0;

	if (n == 0)
		return -ENOENT;
	if ((name[0] != '/' && name[0] != '@') || n < 2 || n > sizeof(sa->sun_path) - 1)
		return -EINVAL; /* neither a path nor an abstract name, or too long */
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, name, n);
	if (name[0] == '@')
		sa->sun_path[0] = '\0'; /* abstract: no terminating NUL counted */
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '/'));
	return 0;
}

/* One datagram, never waiting: a manager whose queue is full loses the
 * message (-EAGAIN) rather than stall a core. */
static int notify_send(const struct sockaddr_un *sa, socklen_t len, const char *state)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -errno;
	ssize_t n = sendto(fd, state, strlen(state), MSG_DONTWAIT | MSG_NOSIGNAL,
	                   (const struct sockaddr *)sa, len);
	int rc = n < 0 ? -errno : 1;
	close(fd);
	return rc;
}

int runtime_notify(const char *state)
{
	struct sockaddr_un sa;
	socklen_t len;

	if (!state || !*state)
		return -EINVAL;
	int rc = notify_address(&sa, &len);
	if (rc == -ENOENT)
		return 0; /* nobody listens: nothing to tell */
	if (rc < 0) {
		fprintf(stderr, "runtime: notify: NOTIFY_SOCKET is neither an absolute path "
		        "nor an '@' name that fits a unix address: ignored\n");
		return rc;
	}
	return notify_send(&sa, len, state);
}

/* ------------------------------------------------------------ watchdog */

/* WATCHDOG_USEC's half, in ns, if the watchdog is ours; else 0. A bad
 * value is logged and disables it (the service runs, unwatched). */
static uint64_t watchdog_period(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	char *end;

	if (!usec || !getenv("NOTIFY_SOCKET"))
		return 0;
	if (pid) {
		errno = 0;
		unsigned long long p = strtoull(pid, &end, 10);
		if (errno || end == pid || *end || p != (unsigned long long)getpid())
			return 0; /* another process's (or unreadable): not ours */
	}
	errno = 0;
	unsigned long long us = strtoull(usec, &end, 10);
	if (errno || end == usec || *end || us == 0 || us > UINT64_MAX / 1000) {
		fprintf(stderr, "runtime: notify: WATCHDOG_USEC=\"%s\" is not a positive "
		        "number of microseconds: no watchdog pings\n", usec);
		return 0;
	}
	return us * 1000 / 2;
}

/* Has every core turned (or slept) since the last firing? */
static bool cores_alive(struct runtime *rt)
{
	struct notify_watchdog *w = &rt->watchdog;
	bool alive = true;

	for (unsigned i = 0; i < rt->ncores; i++) {
		struct core *c = &rt->cores[i];
		uint64_t t = atomic_load_explicit(&c->watch.turns, memory_order_relaxed);
		if (t == w->seen[i] && !atomic_load_explicit(&c->inbox.sleeping, memory_order_relaxed))
			alive = false;
		w->seen[i] = t;
	}
	return alive;
}

static void watchdog_arm(struct core *c, struct timer *t)
{
	runtime__timer_start(c, t, runtime_now() + c->rt->watchdog.period);
	c->timers.lingering++;
}

static void watchdog_fire(struct timer *t, enum runtime_timer_why why)
{
	struct runtime *rt = t->core->rt;

	t->core->timers.lingering--;
	if (why != RUNTIME_TIMER_FIRED)
		return; /* a shutdown, or the end of the run */
	if (cores_alive(rt))
		runtime_notify("WATCHDOG=1");
	watchdog_arm(t->core, t);
}

/* Before the cores start (the owner thread): read the environment once
 * per run, and turn the cores' counters on. */
int runtime__watchdog_prepare(struct runtime *rt)
{
	struct notify_watchdog *w = &rt->watchdog;

	w->period = watchdog_period();
	if (w->period && !w->seen && !(w->seen = calloc(rt->ncores, sizeof(*w->seen))))
		return -ENOMEM;
	for (unsigned i = 0; i < rt->ncores; i++) {
		rt->cores[i].watch.count_turns = w->period != 0;
		if (w->seen)
			w->seen[i] = atomic_load_explicit(&rt->cores[i].watch.turns,
			                                  memory_order_relaxed) - 1; /* first one counts */
	}
	return 0;
}

/* Core 0, as its loop starts and ends. */
void runtime__watchdog_start(struct core *c)
{
	struct notify_watchdog *w = &c->rt->watchdog;

	if (c->index != 0 || !w->period)
		return;
	w->timer.fire = watchdog_fire;
	w->timer.on_shutdown = false;
	watchdog_arm(c, &w->timer);
}

void runtime__watchdog_stop(struct core *c)
{
	if (c->index == 0 && c->rt->watchdog.period && runtime__timer_stop(&c->rt->watchdog.timer))
		c->timers.lingering--;
}

void runtime__watchdog_free(struct runtime *rt)
{
	free(rt->watchdog.seen);
	rt->watchdog.seen = NULL;
}
