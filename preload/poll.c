/* SPDX-License-Identifier: MIT */
/*
 * poll.c - poll, ppoll and select in a fiber.
 *
 * The answer always comes from libc's own call with a zero timeout, so
 * revents, the count, POLLNVAL, EBADF and every other detail are the
 * kernel's. Parking only decides when to ask again:
 *  - no fd to wait for: a runtime sleep until the timeout;
 *  - one fd: one runtime_poll (one poll SQE);
 *  - several: a fresh epoll fd holding them all, and one runtime_poll on
 *    it - epoll_create1, an epoll_ctl per fd and a close besides the SQE,
 *    so n + 2 system calls per wait. (One poll SQE per fd would need one
 *    fiber per fd with the runtime's single-fd poll; the epoll set is
 *    simpler and as correct.)
 * Then the zero-timeout call looks again; a wake-up it does not confirm
 * (a race, or select asking for less than the hang-up the kernel reports)
 * waits again, after 1 ms if it happens twice in a row, so a condition
 * that keeps waking without ever satisfying the call cannot spin the core.
 *
 * A cancelled fiber gets -1 with ECANCELED, one past its deadline -1 with
 * ETIMEDOUT: not EINTR, which loops everywhere retry at once, forever,
 * since cancels and deadlines are sticky. ppoll's signal mask applies to
 * the zero-timeout checks only: while parked, the core thread keeps its
 * own mask (it runs other fibers meanwhile).
 */
#define _GNU_SOURCE
#include "internal.h"

#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#define MS_NS 1000000ll

static uint64_t deadline_after(int64_t timeout_ns)
{
	if (timeout_ns < 0)
		return 0;
	uint64_t now = runtime_now();
	return (uint64_t)timeout_ns > UINT64_MAX - 2 - now ? UINT64_MAX - 1
	                                                  : now + (uint64_t)timeout_ns;
}

/* ns left until deadline (0: none): -1 for none, 0 if past. */
static int64_t remaining(uint64_t deadline)
{
	if (!deadline)
		return -1;
	uint64_t now = runtime_now();
	if (now >= deadline)
		return 0;
	uint64_t left = deadline - now;
	return left > INT64_MAX ? INT64_MAX : (int64_t)left;
}

/* The union of the events asked for fd in fds[0..upto]. */
static uint32_t events_of(const struct pollfd *fds, nfds_t upto, int fd)
{
	uint32_t ev = 0;
	for (nfds_t i = 0; i <= upto; i++)
		if (fds[i].fd == fd)
			ev |= (unsigned short)fds[i].events;
	return ev;
}

/* An epoll set of fds: its fd, or -errno (also when an fd was closed
 * since the last look: that look again reports POLLNVAL). *armed: fds it
 * holds (a file that epoll refuses, a regular file, is never ready for
 * more than poll already said). */
static int epoll_set(const struct pollfd *fds, nfds_t nfds, int *armed)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return -errno;
	*armed = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		if (fds[i].fd < 0)
			continue;
		struct epoll_event ev = { .events = (unsigned short)fds[i].events,
		                          .data.fd = fds[i].fd };
		int rc = epoll_ctl(ep, EPOLL_CTL_ADD, fds[i].fd, &ev);
		if (rc < 0 && errno == EEXIST) {
			ev.events = events_of(fds, i, fds[i].fd);
			rc = epoll_ctl(ep, EPOLL_CTL_MOD, fds[i].fd, &ev);
		}
		if (rc == 0) {
			(*armed)++;
		} else if (errno != EPERM) {
			int err = errno;
			REAL(close)(ep);
			runtime__preload_fd_forget(ep);
			return -err;
		}
	}
	return ep;
}

static int wait_many(const struct pollfd *fds, nfds_t nfds, int64_t timeout_ns)
{
	int armed = 0;
	int ep = epoll_set(fds, nfds, &armed);
	if (ep < 0)
		return 0; /* look again (under EMFILE, every 1 ms: see backoff) */
	int rc = armed ? runtime_poll(ep, POLLIN, timeout_ns)
	               : runtime_sleep(timeout_ns < 0 ? UINT64_MAX : (uint64_t)timeout_ns);
	REAL(close)(ep);
	runtime__preload_fd_forget(ep);
	return rc;
}

int runtime__preload_wait_any(const struct pollfd *fds, nfds_t nfds, uint64_t deadline_ns)
{
	int64_t timeout_ns = remaining(deadline_ns);
	const struct pollfd *one = NULL;
	nfds_t valid = 0;

	if (timeout_ns == 0)
		return -ETIMEDOUT;
	for (nfds_t i = 0; i < nfds; i++)
		if (fds[i].fd >= 0) {
			one = &fds[i];
			valid++;
		}
	int rc;
	if (valid == 0)
		rc = runtime_sleep(timeout_ns < 0 ? UINT64_MAX : (uint64_t)timeout_ns);
	else if (valid == 1)
		rc = runtime_poll(one->fd, one->events, timeout_ns);
	else
		rc = wait_many(fds, nfds, timeout_ns);
	if (rc == -ECANCELED || rc == -ETIMEDOUT)
		return rc;
	return 0; /* ready, or an error the next look reports */
}

/* After a wait: -1 with errno for a cancel or the fiber's deadline, 0
 * for "look again" (also when the call's own timeout passed). */
static int wait_outcome(int rc, uint64_t deadline)
{
	if (rc == -ECANCELED || (rc == -ETIMEDOUT && remaining(deadline) != 0)) {
		errno = -rc;
		return -1;
	}
	return 0;
}

/* Two wake-ups in a row that the kernel's answer did not confirm: pause
 * 1 ms (or until the deadline) before waiting again. */
static int backoff(unsigned *unconfirmed, uint64_t deadline)
{
	if (++*unconfirmed < 2)
		return 0;
	int64_t left = remaining(deadline);
	return wait_outcome(runtime_sleep(left >= 0 && left < MS_NS ? (uint64_t)left : MS_NS),
	                    deadline);
}

/* poll, or ppoll (sigmask non-NULL), with a positive or no timeout. */
static int poll_look(struct pollfd *fds, nfds_t nfds, const sigset_t *sigmask)
{
	static const struct timespec zero = { 0, 0 };
	return sigmask ? REAL(ppoll)(fds, nfds, &zero, sigmask) : REAL(poll)(fds, nfds, 0);
}

static int poll_parked(struct pollfd *fds, nfds_t nfds, int64_t timeout_ns,
                       const sigset_t *sigmask)
{
	uint64_t deadline = deadline_after(timeout_ns);
	unsigned unconfirmed = 0;
	int n = poll_look(fds, nfds, sigmask);

	while (n == 0 && remaining(deadline) != 0) {
		if (wait_outcome(runtime__preload_wait_any(fds, nfds, deadline), deadline) < 0)
			return -1;
		n = poll_look(fds, nfds, sigmask);
		if (n == 0 && backoff(&unconfirmed, deadline) < 0)
			return -1;
	}
	return n;
}

PRELOAD_API int HOOK(poll)(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
	if (timeout_ms == 0 || !preload_in_fiber())
		return REAL(poll)(fds, nfds, timeout_ms);
	return poll_parked(fds, nfds, timeout_ms < 0 ? -1 : timeout_ms * MS_NS, NULL);
}

PRELOAD_API int HOOK(ppoll)(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
                            const sigset_t *sigmask)
{
	int64_t ns = tmo ? runtime__preload_timespec_ns(tmo) : -1;

	if (!preload_in_fiber() || (tmo && ns <= 0))
		return REAL(ppoll)(fds, nfds, tmo, sigmask); /* never waits, or EINVAL */
	return poll_parked(fds, nfds, ns, sigmask);
}

PRELOAD_API int HOOK(__poll_chk)(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return HOOK(poll)(fds, nfds, timeout);
}

/* -------------------------------------------------------------- select */

struct fd_sets {
	fd_set *set[3];   /* read, write, except: the caller's (may be NULL) */
	fd_set saved[3];  /* what they asked, put back before each look */
};

/* The sets as pollfds (malloc'd), events as select(2) waits for them. */
static struct pollfd *sets_to_pollfds(const struct fd_sets *s, int nfds, nfds_t *count)
{
	static const short events[3] = { POLLIN | POLLRDNORM | POLLRDBAND,
		                         POLLOUT | POLLWRNORM | POLLWRBAND, POLLPRI };
	struct pollfd *p = malloc(((size_t)nfds + 1) * sizeof(*p));
	nfds_t n = 0;

	if (!p)
		return NULL;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		for (int k = 0; k < 3; k++)
			if (s->set[k] && FD_ISSET(fd, &s->saved[k]))
				ev |= events[k];
		if (ev)
			p[n++] = (struct pollfd){ .fd = fd, .events = ev };
	}
	*count = n;
	return p;
}

/* select's zero-timeout look, on the sets as the caller passed them. */
static int select_look(struct fd_sets *s, int nfds)
{
	struct timeval zero = { 0, 0 };
	for (int k = 0; k < 3; k++)
		if (s->set[k])
			*s->set[k] = s->saved[k];
	return REAL(select)(nfds, s->set[0], s->set[1], s->set[2], &zero);
}

static int select_parked(struct fd_sets *s, int nfds, uint64_t deadline)
{
	nfds_t count;
	unsigned unconfirmed = 0;
	int n = select_look(s, nfds);
	if (n != 0 || remaining(deadline) == 0)
		return n;
	struct pollfd *fds = sets_to_pollfds(s, nfds, &count);
	if (!fds) {
		errno = ENOMEM;
		return -1;
	}
	while (n == 0 && remaining(deadline) != 0) {
		n = wait_outcome(runtime__preload_wait_any(fds, count, deadline), deadline);
		if (n < 0)
			break;
		n = select_look(s, nfds);
		if (n == 0 && (n = backoff(&unconfirmed, deadline)) < 0)
			break;
	}
	free(fds);
	return n;
}

/* Linux writes the time not slept back into the timeout. */
PRELOAD_API int HOOK(select)(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	int64_t ns = runtime__preload_timeval_ns(tv);
	if (!preload_in_fiber() || ns == 0 || nfds < 0 || nfds > FD_SETSIZE ||
	    (tv && (ns < 0 || tv->tv_usec >= 1000000)))
		return REAL(select)(nfds, rd, wr, ex, tv); /* never waits, or EINVAL */
	struct fd_sets s = { .set = { rd, wr, ex } };
	for (int k = 0; k < 3; k++)
		if (s.set[k])
			s.saved[k] = *s.set[k];
	uint64_t deadline = deadline_after(ns);
	int saved_errno = errno;
	int n = select_parked(&s, nfds, deadline);
	if (tv) {
		int64_t left = remaining(deadline);
		tv->tv_sec = left / 1000000000;
		tv->tv_usec = (left % 1000000000) / 1000;
	}
	if (n >= 0)
		errno = saved_errno;
	return n;
}
