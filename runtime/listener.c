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
 *
 * One listening socket shared by listeners on several cores must not be
 * drained by a multishot: the first core's would take every connection
 * (200 of 200 in a user's trial) while the others sat idle. So listeners
 * know, process-wide, which sockets (by inode) have listeners on more than
 * one core, and on such a socket each accept is one plain accept: a core
 * waiting in accept gets the next connection while the others are busy
 * (io_uring wakes the waiting cores in turn; epoll wakes them all and the
 * first to run takes it). A multishot armed before the socket became
 * shared stops at its next connection; what it queued goes out first.
 * A socket per core with SO_REUSEPORT (runtime_serve) keeps the multishot
 * and spreads connections by the kernel's hash.
 */
#include "core.h"
#include "engine/engine.h"

#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define LISTEN_QUEUE_MAX 256u

/* A listening socket and the listeners open on it, process-wide. */
struct shared_socket {
	struct shared_socket *next;
	dev_t dev;
	ino_t ino;
	struct core *first;         /* the first listener's core */
	unsigned users;             /* listeners open on it */
	_Atomic bool shared;        /* one of another core opened it too */
};

static pthread_mutex_t sockets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shared_socket *sockets;

struct runtime_listener {
	struct mshot m;             /* first: 16-aligned; m.flags: SOCK_CLOEXEC,
	                               SOCK_NONBLOCK for accepted sockets */
	int error;                  /* ended the multishot; returned once */
	bool idle;                  /* -EAGAIN: poll before arming again */
	bool accepting;             /* a fiber is in a plain accept on it */
	unsigned head, len, cap;    /* queued fds: a ring of cap (a power of 2) */
	int *fds;
	struct shared_socket *socket; /* NULL: no such fd (the accept says) */
};

/* Join fd's entry (made if need be) as a listener of core c. */
static struct shared_socket *socket_join(int fd, struct core *c)
{
	struct stat st;
	struct shared_socket *s;

	if (fstat(fd, &st) < 0)
		return NULL;
	pthread_mutex_lock(&sockets_lock);
	for (s = sockets; s && (s->dev != st.st_dev || s->ino != st.st_ino); s = s->next)
		;
	if (!s && (s = calloc(1, sizeof(*s)))) {
		*s = (struct shared_socket){ .next = sockets, .dev = st.st_dev, .ino = st.st_ino,
		                             .first = c };
		sockets = s;
	}
	if (s) {
		s->users++;
		if (s->first != c)
			atomic_store_explicit(&s->shared, true, memory_order_relaxed);
	}
	pthread_mutex_unlock(&sockets_lock);
	return s;
}

static void socket_leave(struct shared_socket *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&sockets_lock);
	if (--s->users == 0) {
		struct shared_socket **p = &sockets;
		while (*p != s)
			p = &(*p)->next;
		*p = s->next;
		free(s);
	}
	pthread_mutex_unlock(&sockets_lock);
}

static bool shared(const struct runtime_listener *l)
{
	return l->socket && atomic_load_explicit(&l->socket->shared, memory_order_relaxed);
}

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
		if (l->len >= LISTEN_QUEUE_MAX || shared(l))
			runtime__mshot_stop(m); /* shared since it was armed: stop hoarding */
	} else if (!(flags & MSHOT_F_MORE) && !m->closed) {
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
	socket_leave(l->socket);
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
	l->socket = socket_join(fd, c);
	*out = l;
	return 0;
}

/* A queued connection, registered as runtime_accept would; its peer's
 * address into addr (if not NULL), as accept(2) gives it. */
static int hand_out(struct runtime_listener *l, struct sockaddr *addr, socklen_t *addrlen)
{
	int fd = pop(l);
	struct core *c = l->m.core;

	if (c->eng->fd_adopt)
		c->eng->fd_adopt(c, fd);
	if (addr && addrlen && getpeername(fd, addr, addrlen) < 0)
		*addrlen = 0; /* reset before it was asked: no address to give */
	return fd;
}

/* On a socket shared with another core: one plain accept. The multishot,
 * if it ran before the sharing began, is stopped; what it queued still
 * goes out first. */
static int accept_shared(struct runtime_listener *l, struct fiber *f, struct sockaddr *addr,
                         socklen_t *addrlen)
{
	/* Until its last result the multishot may still take a connection,
	 * which a plain accept would leave queued here, unanswered. */
	int rc = runtime__mshot_quiesce(&l->m, f, f->deadline);
	if (rc < 0)
		return rc;
	if (l->len)
		return hand_out(l, addr, addrlen);
	l->accepting = true;
	int fd = runtime_accept(l->m.fd, addr, addrlen, l->m.flags);
	l->accepting = false;
	return fd;
}

/* May fiber f take l's queue (accept, stop)? 0, or -EPERM (misuse, as fn). */
static int taker_check(const struct runtime_listener *l, const struct fiber *f, const char *fn)
{
	if (l->m.core != f->core || l->m.closed || l->m.waiter || l->accepting)
		return runtime__misuse(-EPERM, fn, "the listener is another core's, "
		                       "closed, or another fiber accepts on it");
	return 0;
}

int runtime_listener_accept(struct runtime_listener *l, struct sockaddr *addr,
                            socklen_t *addrlen)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f, __func__);

	if (!l || (addr && !addrlen))
		return -EINVAL;
	if (rc || (rc = taker_check(l, f, __func__)) != 0)
		return rc;
	if ((rc = runtime__fault_accept()) < 0)
		return rc;
	for (;;) {
		if (l->len)
			return hand_out(l, addr, addrlen);
		if (shared(l) && !l->error)
			return accept_shared(l, f, addr, addrlen);
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
		if ((rc = runtime__mshot_wait(&l->m, f, f->deadline)) < 0)
			return rc;
	}
}

int runtime_listener_stop(struct runtime_listener *l)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f, __func__);

	if (!l)
		return -EINVAL;
	if (rc || (rc = taker_check(l, f, __func__)) != 0)
		return rc;
	rc = runtime__mshot_quiesce(&l->m, f, f->deadline);
	return rc < 0 ? rc : (int)l->len;
}

int runtime_listener_close(struct runtime_listener *l)
{
	if (!l)
		return 0;
	if (l->m.core != this_core())
		return runtime__misuse(-EPERM, __func__, MISUSE_OTHER_CORE);
	if (l->m.waiter || l->accepting)
		return -EBUSY;
	while (l->len)
		sys_close(pop(l));
	runtime__mshot_close(&l->m);
	return 0;
}
