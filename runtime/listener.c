/* SPDX-License-Identifier: MIT */
/*
 * listener.c - accepting through one multishot accept: connections are
 * accepted by the kernel as they arrive, each a CQE whose fd is queued
 * here, and runtime_listener_accept hands out queued fds without an SQE.
 * A burst of connections is taken in one loop turn, not one per turn.
 *
 * At LISTEN_QUEUE_MAX queued the multishot stops, and new connections wait
 * in the kernel's backlog (where listen(2)'s limit applies) until the
 * fibers catch up; the queue grows for the CQEs already on their way. An error that ends the
 * multishot (EMFILE, ENFILE, ENOMEM) is returned once, by the next accept
 * that finds the queue empty, so the server can back off; the accept after
 * it arms again. A non-blocking listener ends it with -EAGAIN whenever the
 * backlog is empty; then the accept waits for POLLIN and arms again.
 *
 * Fds accepted after the close (before the cancel lands) are closed at
 * once, and so are those still queued: nothing leaks. On the epoll engine
 * the multishot is the engine accepting at each readiness of the socket.
 */
#include "internal.h"

#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define LISTEN_QUEUE_MAX 256u

struct runtime_listener {
	struct mshot m;             /* first: 16-aligned; m.flags: SOCK_CLOEXEC,
	                               SOCK_NONBLOCK for accepted sockets */
	int error;                  /* ended the multishot; returned once */
	bool idle;                  /* -EAGAIN: poll before arming again */
	unsigned head, len, cap;    /* queued fds: a ring of cap (a power of 2) */
	int *fds;
};

static struct runtime_listener *listener_of(struct mshot *m)
{
	return container_of(m, struct runtime_listener, m);
}

/* Double the ring, keeping the order. False if out of memory. */
static bool grow(struct runtime_listener *l)
{
	unsigned cap = l->cap ? l->cap * 2 : 64;
	int *fds = malloc(cap * sizeof(*fds));

	if (!fds)
		return false;
	for (unsigned i = 0; i < l->len; i++)
		fds[i] = l->fds[(l->head + i) & (l->cap - 1)];
	free(l->fds);
	l->fds = fds;
	l->cap = cap;
	l->head = 0;
	return true;
}

static bool push(struct runtime_listener *l, int fd)
{
	if (l->len == l->cap && !grow(l))
		return false;
	l->fds[(l->head + l->len++) & (l->cap - 1)] = fd;
	return true;
}

static int pop(struct runtime_listener *l)
{
	int fd = l->fds[l->head];

	l->head = (l->head + 1) & (l->cap - 1);
	l->len--;
	return fd;
}

static void listener_cqe(struct mshot *m, int res, unsigned flags)
{
	struct runtime_listener *l = listener_of(m);

	if (res >= 0) {
		if (m->closed || !push(l, res))
			close(res); /* out of memory: refused */
		if (l->len >= LISTEN_QUEUE_MAX)
			runtime__mshot_stop(m);
	} else if (!(flags & IORING_CQE_F_MORE) && !m->closed) {
		if (res == -EAGAIN)
			l->idle = true;
		else if (res != -ECANCELED)
			l->error = res;
	}
}

static void listener_release(struct mshot *m)
{
	struct runtime_listener *l = listener_of(m);

	while (l->len)
		sys_close(pop(l));
	free(l->fds);
	free(l);
}

static const struct mshot_ops listener_ops = { listener_cqe, listener_release };

int runtime_listener_open(struct runtime_listener **out, int fd, int flags)
{
	struct core *c = this_core();

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC))
		return -EINVAL;
	if (!this_fiber())
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	if (fd < 0)
		return -EBADF;
	struct runtime_listener *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	runtime__mshot_init(&l->m, c, fd, MSHOT_ACCEPT, flags, &listener_ops);
	*out = l;
	return 0;
}

/* A queued connection, registered as runtime_accept would. */
static int hand_out(struct runtime_listener *l)
{
	int fd = pop(l);

	if (l->m.core->fixed_ready) {
		runtime__fixed_release(fd); /* a registration under this number is stale */
		runtime_fd_register(fd);
	}
	return fd;
}

int runtime_listener_accept(struct runtime_listener *l)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f, __func__);

	if (!l)
		return -EINVAL;
	if (rc)
		return rc;
	if (l->m.core != f->core || l->m.closed || l->m.waiter)
		return runtime__misuse(-EPERM, __func__, "the listener is another core's, "
		                       "closed, or another fiber accepts on it");
	if ((rc = runtime__fault_accept()) < 0)
		return rc;
	for (;;) {
		if (l->len)
			return hand_out(l);
		if (l->error) {
			rc = l->error;
			l->error = 0;
			return rc;
		}
		if (l->idle && !l->m.armed) {
			if ((rc = runtime_poll(l->m.fd, POLLIN, -1)) < 0)
				return rc;
			l->idle = false;
		}
		if (!l->m.armed) {
			runtime__mshot_arm(&l->m); /* epoll: may end it at once */
			continue;
		}
		if ((rc = runtime__mshot_wait(&l->m, f)) < 0)
			return rc;
	}
}

int runtime_listener_close(struct runtime_listener *l)
{
	if (!l)
		return 0;
	if (l->m.core != this_core())
		return runtime__misuse(-EPERM, __func__, MISUSE_OTHER_CORE);
	if (l->m.waiter)
		return -EBUSY;
	while (l->len)
		sys_close(pop(l));
	runtime__mshot_close(&l->m);
	return 0;
}
