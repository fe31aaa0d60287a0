/* SPDX-License-Identifier: MIT */
/*
 * epoll.c - the readiness engine (engine.h), for where io_uring is
 * refused. Each core has an epoll set. An operation is first tried at
 * once without blocking - RWF_NOWAIT for reads and writes, MSG_DONTWAIT
 * for socket calls, so the fd's own O_NONBLOCK flag does not matter, as on
 * io_uring - and only when it answers EAGAIN does the fiber park until the
 * fd is ready, then try again. Files that epoll cannot wait on (regular
 * files, directories) go to the offload pool, as do open, statx and fsync;
 * such a call, once running, is waited for (it may write to the fiber's
 * stack), so a cancel that comes meanwhile shows at the next call.
 *
 * Registration is one-shot (EPOLLONESHOT) and renewed with EPOLL_CTL_MOD
 * at each park, ADD when the kernel no longer knows the fd: a number
 * closed behind the runtime's back and reused by a new file is then
 * registered afresh, never waited on under its old file. The cost is one
 * epoll_ctl per wait; two hints keep waits rare: after a read that came
 * back short on a stream (the socket or pipe was drained) the next read
 * waits first instead of trying, and likewise after a short write.
 * Events carry the fd number, not a pointer, so an event from a file
 * closed meanwhile can only wake a fiber that then tries again.
 *
 * Per core, a table indexed by fd number (in chunks, allocated as fds
 * appear) holds the fibers waiting on each fd - a reader and a writer may
 * wait at once - and the hints. runtime_close on this core ends the waits
 * on its fd with -EBADF, so that no fiber ever tries its operation on a
 * file that took the number over.
 *
 * Every syscall here is made with syscall(2), or raw on the hot paths
 * (sys.h): libruntime-preload wraps libc's read, recv, accept, poll,
 * close... so that they park fibers, and the engine must reach the
 * kernel, not itself.
 */
#include "../core.h"
#include "engine.h"
#include "../services.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <time.h>

#define SLOT_CHUNK 1024u
#define EVENTS_MAX 256

/* epoll_event.data: an fd number, or one of these (above every fd). */
#define DATA_WAKE (1ull << 32)
#define DATA_SIGNAL (2ull << 32)

enum fd_kind { FD_UNKNOWN, FD_STREAM, FD_OTHER };

/* What this core knows of one fd number. */
struct fdslot {
	struct dlist waiters;       /* struct fdwait; zeroed until first used */
	struct mshot *watch;        /* a stream or listener fed at each readiness */
	uint32_t armed;             /* the enabled registration's events and mode */
	uint8_t kind;               /* enum fd_kind: may a short read mean dry? */
	bool dry;                   /* the last read drained it: wait first */
	bool full;                  /* the last write filled it: wait first */
};

struct epoll_core {
	int epfd;
	bool pwait2;                /* epoll_pwait2 (ns timeouts) works */
	struct fdslot **chunks;
	unsigned nchunks;
	struct epoll_event events[EVENTS_MAX];
};

/* The core's epoll state while a run lasts (core->engine_state). */
static inline struct epoll_core *epoll_of(const struct core *c)
{
	return c->engine_state;
}

/* A fiber waiting for readiness, on its stack. */
struct fdwait {
	struct io_wait head;        /* first: runtime_dump */
	struct dnode link;          /* in its slot's waiters while linked */
	struct fiber *fiber;
	uint32_t events;            /* EPOLLIN, EPOLLOUT... */
	int res;                    /* 0 (ready), -ETIMEDOUT, -ECANCELED, -EBADF */
};

static long sys(long rc)
{
	return rc < 0 ? -errno : rc;
}

/* ---------------------------------------------------------------- slots */

static struct fdslot *slot_find(const struct epoll_core *ep, int fd)
{
	unsigned i = (unsigned)fd / SLOT_CHUNK;

	if (fd < 0 || i >= ep->nchunks || !ep->chunks[i])
		return NULL;
	return &ep->chunks[i][(unsigned)fd % SLOT_CHUNK];
}

/* The slot of fd, made if need be; NULL for fd < 0 or out of memory. */
static struct fdslot *slot_get(struct epoll_core *ep, int fd)
{
	unsigned i = (unsigned)fd / SLOT_CHUNK;

	if (fd < 0)
		return NULL;
	if (i >= ep->nchunks) {
		unsigned n = i + 1 > ep->nchunks * 2 ? i + 1 : ep->nchunks * 2;
		struct fdslot **chunks = realloc(ep->chunks, n * sizeof(*chunks));
		if (!chunks)
			return NULL;
		memset(chunks + ep->nchunks, 0, (n - ep->nchunks) * sizeof(*chunks));
		ep->chunks = chunks;
		ep->nchunks = n;
	}
	if (!ep->chunks[i] && !(ep->chunks[i] = calloc(SLOT_CHUNK, sizeof(struct fdslot))))
		return NULL;
	struct fdslot *s = &ep->chunks[i][(unsigned)fd % SLOT_CHUNK];
	if (!s->waiters.head.next)
		dlist_init(&s->waiters);
	return s;
}

/* A new file under fd (accepted, opened): what was known of the number is
 * not true of it. */
static void slot_forget(struct epoll_core *ep, int fd)
{
	struct fdslot *s = slot_find(ep, fd);

	if (s) {
		s->kind = FD_UNKNOWN;
		s->dry = s->full = false;
	}
}

/* -------------------------------------------------------- registration */

static int ctl(struct core *c, int op, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u64 = (uint32_t)fd };

	return (int)runtime__sys6(SYS_epoll_ctl, epoll_of(c)->epfd, op, fd, (long)&ev, 0, 0);
}

/*
 * Make fd's registration what its slot needs now: a watch's readiness
 * edge-triggered and for good (a stream or listener owns its fd until it
 * is closed), the waiters' events once (EPOLLONESHOT), nothing when
 * neither. MOD first; ENOENT means the set does not know this file under
 * fd (first use, or the number was closed and reused): ADD. Returns 0 or
 * -errno; -EPERM: a file epoll cannot wait on.
 */
static int update(struct core *c, int fd, struct fdslot *s)
{
	uint32_t want = s->watch ? EPOLLIN | EPOLLRDHUP : 0;

	if (s->waiters.head.next)
		dlist_for_each(n, &s->waiters)
			want |= container_of(n, struct fdwait, link)->events;
	if (!want) {
		if (s->armed)
			ctl(c, EPOLL_CTL_DEL, fd, 0);
		s->armed = 0;
		return 0;
	}
	want |= s->watch ? EPOLLET : EPOLLONESHOT;
	if (s->watch && s->armed == want)
		return 0; /* enabled for good already */
	int rc = ctl(c, EPOLL_CTL_MOD, fd, want);
	if (rc == -ENOENT)
		rc = ctl(c, EPOLL_CTL_ADD, fd, want);
	s->armed = rc < 0 ? 0 : want;
	return rc;
}

/* ---------------------------------------------------------------- waits */

static bool linked(const struct fdwait *w)
{
	return w->link.next != &w->link;
}

/* End w's wait with res (once: a later end finds it unlinked). */
static void wait_end(struct core *c, struct fdwait *w, int res)
{
	if (!linked(w))
		return;
	struct fdslot *s = slot_find(epoll_of(c), w->head.fd);
	dlist_remove(&w->link);
	w->res = res;
	if (res < 0) /* its events are no one's now */
		update(c, w->head.fd, s);
	runtime__resume(w->fiber, 0);
}

static void wait_interrupt(struct fiber *f, int res)
{
	wait_end(f->core, f->wait_obj, res);
}

/* The deadline (the fiber's lazy deadline timer) came first. */
static void wait_timeout(struct fiber *f, void *ctx)
{
	wait_end(f->core, ctx, -ETIMEDOUT);
}

/*
 * Park f until fd is ready for events (kind: what for, for runtime_dump),
 * the deadline, a cancel, or runtime_close of fd on this core. Returns 0
 * (ready: try again), -ETIMEDOUT, -ECANCELED, -EBADF (closed meanwhile),
 * -EPERM (epoll cannot wait on this file), -ENOMEM.
 */
static int park(struct fiber *f, uint8_t kind, int fd, uint32_t events, uint64_t deadline)
{
	struct core *c = f->core;
	struct fiber *self;
	int rc = runtime__blocking_begin(&self, runtime__io_wait_name(&(struct io_wait){ kind, fd }));

	if (rc)
		return rc; /* cancelled, or past the fiber's deadline */
	if (deadline != NEVER && runtime_now() >= deadline)
		return -ETIMEDOUT;
	struct fdslot *s = slot_get(epoll_of(c), fd);
	if (!s)
		return fd < 0 ? -EBADF : -ENOMEM;
	struct fdwait w = { .head = { kind, fd }, .fiber = f, .events = events };
	dlist_push_back(&s->waiters, &w.link);
	if ((rc = update(c, fd, s)) < 0) {
		dlist_remove(&w.link);
		return rc;
	}
	if (deadline != NEVER)
		runtime__deadline_begin(f, deadline, wait_timeout, &w);
	c->in_flight++;
	runtime__suspend(c, BLOCK_IO, wait_interrupt, &w);
	c->in_flight--;
	if (deadline != NEVER)
		runtime__deadline_end(f);
	return w.res;
}

static void feed(struct core *c, struct fdslot *s, uint32_t revents);
static void unwatch(struct core *c, struct mshot *m, int res);

/* An event for fd: feed its watch, wake the waiters it concerns (an error
 * or hang-up concerns all); the rest wait on. */
static void fd_event(struct core *c, int fd, uint32_t revents)
{
	struct fdslot *s = slot_find(epoll_of(c), fd);

	if (!s || !s->waiters.head.next)
		return;
	if (s->armed & EPOLLONESHOT)
		s->armed = 0; /* disabled until the next update */
	if (revents & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP))
		s->dry = false;
	if (revents & (EPOLLOUT | EPOLLERR | EPOLLHUP))
		s->full = false;
	if (s->watch && (revents & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)))
		feed(c, s, revents);
	for (struct dnode *n = dlist_first(&s->waiters), *next; n; n = next) {
		next = dlist_next(&s->waiters, n);
		struct fdwait *w = container_of(n, struct fdwait, link);
		if (revents & (w->events | EPOLLERR | EPOLLHUP))
			wait_end(c, w, 0);
	}
	update(c, fd, s);
}

/* ------------------------------------------------------------ blocking */

/* The call as a plain, possibly blocking syscall. */
static long blocking_call(const struct io_req *r);

struct offloaded {
	const struct io_req *r;
	long res;
};

static void *offloaded_run(void *arg)
{
	struct offloaded *o = arg;

	o->res = blocking_call(o->r);
	return NULL;
}

/* On the offload pool, waited for to the end once it runs. */
static long on_pool(struct fiber *f, const struct io_req *r)
{
	struct offloaded o = { r, 0 };
	int rc = runtime__offload_finish(f, offloaded_run, &o, NULL);

	if (rc < 0)
		return rc;
	if (o.res >= 0 && (r->kind == IO_OPENAT || r->kind == IO_OPENAT2))
		slot_forget(epoll_of(f->core), (int)o.res);
	return o.res;
}

/* ------------------------------------------------------ data transfer */

static bool is_input(uint8_t kind)
{
	return kind == IO_READ || kind == IO_READV || kind == IO_RECV || kind == IO_RECVMSG;
}

/*
 * Reads and writes are preadv2/pwritev2 (4.6), for RWF_NOWAIT. Where they
 * answer ENOSYS (an older kernel, Debian 12's qemu-user), the process
 * goes on without them: a socket is tried with recvmsg/sendmsg and
 * MSG_DONTWAIT, which is the same try; any other file cannot be asked
 * not to block (-EOPNOTSUPP), so it is waited for as a tty is - a pipe
 * until epoll says ready, a regular file on the pool - and then read with
 * plain readv/preadv. The cost is that regular files always go to the pool
 * and each try of a pipe makes a syscall more; the results are the same.
 */
static _Atomic bool rwv2_missing[2]; /* [input]: answered ENOSYS once */

static bool rw_input(const struct io_req *r)
{
	return r->kind == IO_READ || r->kind == IO_READV;
}

static long rwv2(const struct io_req *r, const struct iovec *iov, unsigned n, int rwf)
{
	bool input = rw_input(r);
	long nr = input ? SYS_preadv2 : SYS_pwritev2;

	if (runtime__fault(input ? FAULT_NO_PREADV2 : FAULT_NO_PWRITEV2))
		return -ENOSYS;
	long rc = syscall(nr, r->fd, iov, n, (long)r->off, 0L, rwf);
	/* A pipe or socket at an offset is read as a stream, as io_uring does. */
	if (rc < 0 && errno == ESPIPE && r->off >= 0)
		rc = syscall(nr, r->fd, iov, n, -1L, 0L, rwf);
	return sys(rc);
}

/* Without preadv2/pwritev2: a try (rwf RWF_NOWAIT) of a socket, or the
 * plain call. */
static long rw_plain(const struct io_req *r, const struct iovec *iov, unsigned n, int rwf)
{
	bool input = rw_input(r);
	size_t total = 0;

	for (unsigned i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (!total)
		return 0; /* as preadv2 and pwritev2 answer, without asking the file */
	if (rwf & RWF_NOWAIT) {
		struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = n };
		long rc = runtime__sys6(input ? SYS_recvmsg : SYS_sendmsg, r->fd, (long)&m,
		                        MSG_DONTWAIT, 0, 0, 0);
		return rc == -ENOTSOCK ? -EOPNOTSUPP : rc;
	}
	long rc = -ESPIPE;
	if (r->off >= 0)
		rc = sys(syscall(input ? SYS_preadv : SYS_pwritev, r->fd, iov, n, (long)r->off, 0L));
	if (rc == -ESPIPE)
		rc = sys(syscall(input ? SYS_readv : SYS_writev, r->fd, iov, n));
	return rc;
}

static long rw(const struct io_req *r, const struct iovec *iov, unsigned n, int rwf)
{
	_Atomic bool *missing = &rwv2_missing[rw_input(r)];

	if (!atomic_load_explicit(missing, memory_order_relaxed)) {
		long rc = rwv2(r, iov, n, rwf);
		if (rc != -ENOSYS)
			return rc;
		atomic_store_explicit(missing, true, memory_order_relaxed);
	}
	return rw_plain(r, iov, n, rwf);
}

/* One try (nowait: never blocking): bytes, or -errno; -EAGAIN: not ready;
 * -EOPNOTSUPP: the file cannot be asked not to block (a tty). */
static long try_data(const struct io_req *r, bool nowait)
{
	struct iovec one = { (void *)r->cbuf, r->len };
	int dontwait = nowait ? MSG_DONTWAIT : 0;

	switch (r->kind) {
	case IO_READ: case IO_WRITE:
		return rw(r, &one, 1, nowait ? RWF_NOWAIT : 0);
	case IO_READV: case IO_WRITEV:
		return rw(r, r->iov, r->len, nowait ? RWF_NOWAIT : 0);
	case IO_RECV:
		return runtime__sys6(SYS_recvfrom, r->fd, (long)r->buf, (long)r->len, r->flags | dontwait,
		                     0, 0);
	case IO_SEND: case IO_SENDMSG:
		return runtime__send_syscall(r, r->len, dontwait);
	case IO_RECVMSG:
		return runtime__sys6(SYS_recvmsg, r->fd, (long)r->msg, r->flags | dontwait, 0, 0, 0);
	}
	return -EINVAL;
}

/* May a short read (or write) of fd mean that it is drained (full)?
 * Stream sockets and pipes: yes; datagrams and files: no. Asked once per
 * file. */
static bool drains_when_short(struct fdslot *s, int fd)
{
	if (s->kind == FD_UNKNOWN) {
		int type = 0;
		socklen_t len = sizeof(type);
		struct stat st;
		if (syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0)
			s->kind = type == SOCK_STREAM ? FD_STREAM : FD_OTHER;
		else
			s->kind = syscall(SYS_fstat, fd, &st) == 0 && S_ISFIFO(st.st_mode) ? FD_STREAM
			                                                                   : FD_OTHER;
	}
	return s->kind == FD_STREAM;
}

/* After a try: is the fd drained (input) or full (output) now? */
static void note(struct core *c, const struct io_req *r, long res)
{
	bool single = r->kind == IO_READ || r->kind == IO_RECV || r->kind == IO_WRITE ||
	              r->kind == IO_SEND;
	bool short_io = single && res >= 0 && (unsigned long)res < r->len;

	if (res != -EAGAIN && !short_io)
		return;
	struct fdslot *s = slot_get(epoll_of(c), r->fd);
	if (!s || (res != -EAGAIN && res == 0) || !drains_when_short(s, r->fd))
		return; /* EOF; or a datagram or file, where a hint would mislead */
	if (is_input(r->kind))
		s->dry = true;
	else
		s->full = true;
}

/* The caller asked for a try only: no waiting. */
static bool try_only(const struct io_req *r)
{
	return (r->kind == IO_RECV || r->kind == IO_SEND || r->kind == IO_RECVMSG ||
	        r->kind == IO_SENDMSG) && (r->flags & MSG_DONTWAIT);
}

/* The plain call once epoll says ready. Without pwritev2 a write goes out
 * PIPE_BUF bytes at most, the room a pipe's readiness promises: a longer
 * one would block the core until a reader - maybe a fiber of this core -
 * took the rest. So such a write may come back short, as on a
 * non-blocking pipe. (With pwritev2 only a tty comes here, written whole,
 * as before.) */
static long try_ready(const struct io_req *r)
{
	struct io_req one = *r;

	if (r->kind != IO_WRITE && r->kind != IO_WRITEV)
		return try_data(r, false);
	if (!atomic_load_explicit(&rwv2_missing[0], memory_order_relaxed))
		return try_data(r, false);
	if (r->kind == IO_WRITEV) {
		unsigned i = 0;
		while (i + 1 < r->len && !r->iov[i].iov_len)
			i++;
		one.kind = IO_WRITE;
		one.cbuf = r->len ? r->iov[i].iov_base : NULL;
		one.len = r->len ? (unsigned)r->iov[i].iov_len : 0;
	}
	if (one.len > PIPE_BUF)
		one.len = PIPE_BUF;
	return try_data(&one, false);
}

/* A file that cannot be asked not to block (a tty, some devices; a pipe
 * without preadv2/pwritev2): wait until epoll says it is ready, then make
 * the plain call, which does not block then (unless another reader or
 * writer takes the bytes or the room first). */
static long data_unwaitable(struct fiber *f, const struct io_req *r, uint64_t deadline)
{
	for (;;) {
		int rc = park(f, r->kind, r->fd, is_input(r->kind) ? EPOLLIN : EPOLLOUT, deadline);
		if (rc == -EPERM)
			return on_pool(f, r);
		if (rc < 0)
			return rc;
		long res = try_ready(r);
		if (res != -EAGAIN) /* an O_NONBLOCK file may still say EAGAIN */
			return res;
	}
}

static long data(struct fiber *f, const struct io_req *r, uint64_t deadline)
{
	struct fdslot *s = slot_find(epoll_of(f->core), r->fd);
	bool wait_first = !try_only(r) && s && (is_input(r->kind) ? s->dry : s->full);

	for (;;) {
		long res = wait_first ? -EAGAIN : try_data(r, true);
		if (!wait_first)
			note(f->core, r, res);
		wait_first = false;
		if (res == -EOPNOTSUPP)
			return data_unwaitable(f, r, deadline);
		if (res != -EAGAIN || try_only(r))
			return res;
		int rc = park(f, r->kind, r->fd, is_input(r->kind) ? EPOLLIN : EPOLLOUT, deadline);
		if (rc == -EPERM)
			return on_pool(f, r); /* a regular file: it waits for the disk */
		if (rc < 0)
			return rc;
	}
}

/* recv with MSG_WAITALL: as io_uring, until len bytes, EOF or an error. */
static long recv_all(struct fiber *f, const struct io_req *r, uint64_t deadline)
{
	struct io_req part = *r;
	size_t done = 0;

	part.flags &= ~MSG_WAITALL;
	while (done < r->len) {
		part.buf = (char *)r->buf + done;
		part.len = r->len - (unsigned)done;
		long res = data(f, &part, deadline);
		if (res <= 0)
			return done ? (long)done : res;
		done += (size_t)res;
	}
	return (long)done;
}

/* Fault injection (fault.h), as engine/uring.c's op_faults does to the
 * SQE: once per call of a read, write, recv or send (not per try), before
 * anything is done. A short one makes *r point at *half, a copy (the
 * caller's request is left as it was). Nothing at all in a build without
 * faults. */
static int data_faults(const struct io_req **r, struct io_req *half)
{
	uint8_t kind = (*r)->kind;
	size_t len = (*r)->len;

	if (kind != IO_READ && kind != IO_WRITE && kind != IO_RECV && kind != IO_SEND)
		return 0;
	int rc = runtime__fault_data(&len);
	if (len != (*r)->len) {
		*half = **r;
		half->len = len;
		*r = half;
	}
	return rc;
}

/* A read, write, recv or send, of any of their kinds. */
static long data_io(struct fiber *f, const struct io_req *r, uint64_t deadline)
{
	struct io_req half;
	int rc = data_faults(&r, &half);

	if (rc < 0)
		return rc;
	if (r->kind == IO_RECV && (r->flags & MSG_WAITALL))
		return recv_all(f, r, deadline);
	return data(f, r, deadline);
}

/* ---------------------------------------------------------- sockets */

/* Accept and connect have no per-call way not to block: their socket
 * becomes O_NONBLOCK (every call of the runtime behaves the same on it). */
static int set_nonblocking(int fd, int *old)
{
	int fl = (int)sys(syscall(SYS_fcntl, fd, F_GETFL));

	if (old)
		*old = fl;
	if (fl < 0 || (fl & O_NONBLOCK))
		return fl < 0 ? fl : 0;
	return (int)sys(syscall(SYS_fcntl, fd, F_SETFL, fl | O_NONBLOCK));
}

/* FAULT_ACCEPT_EMFILE (fault.h), as engine/uring.c injects it: once per
 * call, before anything is done, so the connection stays queued. */
static long accept_(struct fiber *f, const struct io_req *r, uint64_t deadline)
{
	int rc = runtime__fault_accept();

	if (rc == 0)
		rc = set_nonblocking(r->fd, NULL);
	while (rc == 0) {
		long fd = sys(syscall(SYS_accept4, r->fd, r->addr, r->addrlen, r->flags));
		if (fd >= 0)
			slot_forget(epoll_of(f->core), (int)fd);
		if (fd != -EAGAIN)
			return fd;
		rc = park(f, r->kind, r->fd, EPOLLIN, deadline);
	}
	return rc;
}

/* A connect in progress, once its socket is writable: its error when it
 * failed, else 0 once connected, or -EINPROGRESS while neither (a wake-up
 * that was not about it). connect(2) is called again, as a blocking one
 * would have: that is what marks the socket connected (a later connect
 * then says EISCONN). */
static int connect_outcome(const struct io_req *r)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (syscall(SYS_getsockopt, r->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -errno;
	if (err)
		return -err;
	int rc = (int)sys(syscall(SYS_connect, r->fd, r->caddr, r->alen));
	if (rc == -EISCONN)
		return 0;
	return rc == -EALREADY ? -EINPROGRESS : rc;
}

/* connect: in progress, then writable once done. A unix socket whose
 * listener's backlog is full answers EAGAIN: tried again after a pause,
 * as it signals no readiness for that. The socket's O_NONBLOCK is given
 * back as it was. */
static long connect_(struct fiber *f, const struct io_req *r, uint64_t deadline)
{
	int old;
	int rc = set_nonblocking(r->fd, &old);

	if (rc == 0)
		rc = (int)sys(syscall(SYS_connect, r->fd, r->caddr, r->alen));
	while (rc == -EAGAIN || rc == -EINPROGRESS) {
		if (rc == -EAGAIN) {
			if ((rc = runtime_sleep(1000 * 1000)) == 0)
				rc = (int)sys(syscall(SYS_connect, r->fd, r->caddr, r->alen));
		} else if ((rc = park(f, r->kind, r->fd, EPOLLOUT, deadline)) == 0) {
			rc = connect_outcome(r);
		}
	}
	if (old >= 0 && !(old & O_NONBLOCK))
		syscall(SYS_fcntl, r->fd, F_SETFL, old);
	return rc;
}

/* poll: ready now (as poll(2) sees it), else when epoll reports it. A
 * regular file is always ready, as for poll(2). */
static long poll_(struct fiber *f, const struct io_req *r, uint64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = r->fd, .events = (short)r->flags };
		struct timespec zero = { 0, 0 };
		long n = sys(syscall(SYS_ppoll, &p, 1, &zero, NULL, 0));
		if (n < 0)
			return n;
		if (n)
			return p.revents & POLLNVAL ? -EBADF : p.revents;
		int rc = park(f, r->kind, r->fd, (uint32_t)(unsigned short)r->flags, deadline);
		if (rc < 0)
			return rc;
	}
}

/* ---------------------------------------------------------------- splice */

static bool pollable(const struct stat *st)
{
	return S_ISSOCK(st->st_mode) || S_ISFIFO(st->st_mode) || S_ISCHR(st->st_mode);
}

/* The end a splice that said EAGAIN waits for: the one poll(2) finds not
 * ready (the input first if both look ready). */
static void splice_waits_for(const struct io_req *r, int *fd, uint32_t *events)
{
	struct pollfd p[2] = { { .fd = r->fd, .events = POLLIN },
	                       { .fd = r->fd_out, .events = POLLOUT } };
	struct timespec zero = { 0, 0 };

	syscall(SYS_ppoll, p, 2, &zero, NULL, 0);
	bool out = (p[0].revents & POLLIN) && !(p[1].revents & POLLOUT);
	*fd = out ? r->fd_out : r->fd;
	*events = out ? EPOLLOUT : EPOLLIN;
}

/* One end must be a pipe (SPLICE_F_NONBLOCK keeps it from blocking); a
 * socket end honours only its file's O_NONBLOCK, so it is made so; a
 * regular file end may wait for the disk: that splice runs on the pool. */
static long splice_(struct fiber *f, struct io_req *r, uint64_t deadline)
{
	struct stat in, out;

	if (syscall(SYS_fstat, r->fd, &in) < 0 || syscall(SYS_fstat, r->fd_out, &out) < 0)
		return -errno;
	bool file = !pollable(&in) || !pollable(&out);
	if ((S_ISSOCK(in.st_mode) && set_nonblocking(r->fd, NULL) < 0) ||
	    (S_ISSOCK(out.st_mode) && set_nonblocking(r->fd_out, NULL) < 0))
		return -errno;
	for (;;) {
		long res = file ? on_pool(f, r) : blocking_call(r);
		if (res != -EAGAIN || (r->flags & SPLICE_F_NONBLOCK))
			return res;
		int fd;
		uint32_t events;
		splice_waits_for(r, &fd, &events);
		int rc = park(f, r->kind, fd, events, deadline);
		if (rc < 0)
			return rc;
	}
}

/* ----------------------------------------------------------------- close */

/* Waits on fd end with -EBADF, its registration goes, then the fd. */
static long close_(struct fiber *f, const struct io_req *r)
{
	struct core *c = f->core;
	struct fdslot *s = slot_find(epoll_of(c), r->fd);

	if (s && s->waiters.head.next) {
		if (s->watch) /* a stream or listener left open on it: it ends */
			unwatch(c, s->watch, -EBADF);
		while (!dlist_empty(&s->waiters))
			wait_end(c, container_of(dlist_first(&s->waiters), struct fdwait, link), -EBADF);
		slot_forget(epoll_of(c), r->fd);
	}
	return sys_close(r->fd) == 0 ? 0 : -errno;
}

/* ------------------------------------------------- multishot, emulated */

/*
 * A receive stream or listener watches its fd: registered edge-triggered
 * for good, and fed at each readiness - recv into free buffers of the
 * core's pool, or accept - until the socket says EAGAIN (a short read of
 * a stream socket says it too: it was drained, and bytes that come later
 * make a new edge; but not once the peer has shut down: its FIN came with
 * the edge already, so the end is read now), the owner stops the request
 * (its queue is full), or the request ends (EOF, an error, the pool ran
 * out: -ENOBUFS). Each result goes to runtime__mshot_deliver (engine.h's
 * multishot results).
 */

/* The watch on m's fd ends; with res < 0, as a terminal result. */
static void unwatch(struct core *c, struct mshot *m, int res)
{
	struct fdslot *s = slot_find(epoll_of(c), m->fd);

	if (s && s->watch == m) {
		s->watch = NULL;
		c->in_flight--;
		update(c, m->fd, s);
	}
	m->armed = false;
	m->stopping = false;
	if (res < 0)
		runtime__mshot_deliver(m, res, 0);
}

static bool feed_recv(struct core *c, struct mshot *m, bool peer_done)
{
	struct bufpool *p = &c->streams.pool;
	unsigned bid, size = p->size;

	if (!bufpool_take(p, &bid)) {
		unwatch(c, m, -ENOBUFS); /* starved: the stream's reads go plain */
		return false;
	}
	long n = runtime__sys6(SYS_recvfrom, m->fd, (long)bufpool_at(p, bid), size, MSG_DONTWAIT,
	                       0, 0);
	if (n <= 0) {
		bufpool_give(p, bid);
		if (n != -EAGAIN && n != -EINTR) {
			unwatch(c, m, 0);
			runtime__mshot_deliver(m, (int)n, 0); /* EOF or the error: terminal */
		}
		return false;
	}
	runtime__mshot_deliver(m, (int)n, MSHOT_F_MORE | MSHOT_F_BUFFER | bid << MSHOT_BUF_SHIFT);
	return (unsigned)n == size || peer_done; /* short: drained, unless at its end */
}

static bool feed_accept(struct core *c, struct mshot *m)
{
	long fd = sys(syscall(SYS_accept4, m->fd, NULL, NULL, m->flags));

	if (fd >= 0) {
		slot_forget(epoll_of(c), (int)fd);
		runtime__mshot_deliver(m, (int)fd, MSHOT_F_MORE);
		return true;
	}
	if (fd != -EAGAIN && fd != -EINTR && fd != -ECONNABORTED)
		unwatch(c, m, (int)fd); /* EMFILE, ENOMEM...: once, to the owner */
	return fd != -EAGAIN;
}

/* Until EAGAIN, the end, or the owner stops it (its queue is full). A
 * request that ended may have freed m: s->watch is looked at first. */
static void feed(struct core *c, struct fdslot *s, uint32_t revents)
{
	struct mshot *m = s->watch;
	bool peer_done = revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR);
	bool more = true;

	while (more && s->watch == m && m->armed)
		more = m->kind == MSHOT_RECV ? feed_recv(c, m, peer_done) : feed_accept(c, m);
}

/* Watch m's fd. A listening socket is made non-blocking: each readiness
 * is accepted from until EAGAIN, and another core may take a connection
 * first. An fd epoll cannot watch ends the request at once. */
static void epoll_mshot_arm(struct mshot *m)
{
	struct core *c = m->core;
	struct fdslot *s = slot_get(epoll_of(c), m->fd);
	int rc = !s ? (m->fd < 0 ? -EBADF : -ENOMEM)
	       : m->kind == MSHOT_ACCEPT ? set_nonblocking(m->fd, NULL) : 0;

	if (rc == 0 && s->watch && s->watch != m)
		rc = -EBUSY; /* another stream or listener on this fd */
	if (rc == 0) {
		s->watch = m;
		c->in_flight++; /* in the kernel's hands, as an SQE would be */
		m->armed = true;
		rc = update(c, m->fd, s);
	}
	if (rc < 0) {
		m->armed = true;
		unwatch(c, m, rc);
	}
}

static void epoll_mshot_stop(struct mshot *m)
{
	unwatch(m->core, m, 0);
}

/* ------------------------------------------------ openat2, where missing */

/*
 * openat2 (5.6) is emulated where it answers ENOSYS (an older kernel,
 * Debian 12's qemu-user), with the kernel's argument checks. No resolve
 * flag: openat. RESOLVE_CACHED: -EAGAIN, which the kernel may always
 * answer. Otherwise the path is walked a component at a time from dirfd,
 * each step an O_PATH|O_NOFOLLOW open, and each symlink met is read and
 * followed by the walk itself, so that the flags hold as the kernel holds
 * them: NO_SYMLINKS refuses any (-ELOOP); BENEATH refuses ".." above the
 * start and absolute paths or targets (-EXDEV); IN_ROOT keeps ".." at the
 * start and takes "/" for it; NO_MAGICLINKS (implied by BENEATH and
 * IN_ROOT) refuses every link in procfs, where the magic ones are: the
 * kernel would follow procfs' plain ones (/proc/self). NO_XDEV compares
 * st_dev, so a bind mount of the same file system is not seen. The cost
 * is two syscalls a component, on the offload pool.
 */
static _Atomic bool openat2_missing;

#define OPEN_FLAGS (O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NONBLOCK | \
                    O_SYNC | O_DSYNC | O_ASYNC | O_DIRECT | O_LARGEFILE | O_DIRECTORY |       \
                    O_NOFOLLOW | O_NOATIME | O_CLOEXEC | O_PATH | O_TMPFILE)
#define RESOLVE_ALL (RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS | \
                     RESOLVE_BENEATH | RESOLVE_IN_ROOT | RESOLVE_CACHED)
#define RESOLVE_CONFINED (RESOLVE_BENEATH | RESOLVE_IN_ROOT)
#define WALK_LINKS_MAX 40 /* the kernel's MAXSYMLINKS */

static int how_check(const struct open_how *how)
{
	bool creates = (how->flags & O_CREAT) || (how->flags & O_TMPFILE) == O_TMPFILE;

	if ((how->flags & ~(uint64_t)(unsigned)OPEN_FLAGS) || (how->resolve & ~(uint64_t)RESOLVE_ALL))
		return -EINVAL;
	if ((how->mode & ~(uint64_t)07777) || (how->mode && !creates))
		return -EINVAL;
	if ((how->resolve & RESOLVE_BENEATH) && (how->resolve & RESOLVE_IN_ROOT))
		return -EINVAL;
	return 0;
}

struct walk {
	const struct open_how *how;
	int root;                   /* dirfd's directory (O_PATH): IN_ROOT's "/" */
	int fd;                     /* the directory reached (O_PATH) */
	unsigned depth;             /* components below root: ".." at 0 leaves it */
	unsigned links;             /* symlinks followed */
	dev_t dev;                  /* root's, for NO_XDEV */
	char path[PATH_MAX];        /* what is left to walk */
};

/* fd (with its st) becomes the directory reached; closed on an error. */
static int walk_move(struct walk *w, int fd, const struct stat *st)
{
	int rc = !S_ISDIR(st->st_mode) ? -ENOTDIR
	       : (w->how->resolve & RESOLVE_NO_XDEV) && st->st_dev != w->dev ? -EXDEV : 0;

	if (rc < 0) {
		sys_close(fd);
		return rc;
	}
	if (w->fd >= 0)
		sys_close(w->fd);
	w->fd = fd;
	return 0;
}

/* Open name from dir as an O_PATH directory, and move there. */
static int walk_to(struct walk *w, int dir, const char *name)
{
	struct stat st;
	int fd = (int)sys(syscall(SYS_openat, dir, name, O_PATH | O_DIRECTORY | O_CLOEXEC, 0));

	if (fd < 0)
		return fd;
	if (syscall(SYS_fstat, fd, &st) < 0) {
		int rc = -errno;
		sys_close(fd);
		return rc;
	}
	return walk_move(w, fd, &st);
}

/* An absolute path or target: "/", or root under IN_ROOT; -EXDEV under
 * BENEATH. */
static int walk_root(struct walk *w)
{
	if (w->how->resolve & RESOLVE_BENEATH)
		return -EXDEV;
	w->depth = 0;
	return w->how->resolve & RESOLVE_IN_ROOT ? walk_to(w, w->root, ".")
	                                         : walk_to(w, AT_FDCWD, "/");
}

/* "..": above root, -EXDEV under BENEATH, root itself under IN_ROOT. */
static int walk_up(struct walk *w)
{
	if (w->depth == 0 && (w->how->resolve & RESOLVE_CONFINED))
		return w->how->resolve & RESOLVE_BENEATH ? -EXDEV : 0;
	w->depth -= w->depth > 0;
	return walk_to(w, w->fd, "..");
}

/* name, in the directory reached, is a symlink: what is left to walk
 * becomes its target, then rest. */
static int walk_link(struct walk *w, const char *name, const char *rest)
{
	char target[PATH_MAX], next[PATH_MAX];
	uint64_t resolve = w->how->resolve;
	struct statfs fs;

	if ((resolve & RESOLVE_NO_SYMLINKS) || ++w->links > WALK_LINKS_MAX)
		return -ELOOP;
	if ((resolve & (RESOLVE_NO_MAGICLINKS | RESOLVE_CONFINED)) &&
	    syscall(SYS_fstatfs, w->fd, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC)
		return -ELOOP;
	long n = sys(syscall(SYS_readlinkat, w->fd, name, target, sizeof(target) - 1));
	if (n < 0)
		return (int)n;
	target[n] = '\0';
	if ((size_t)snprintf(next, sizeof(next), "%s%s", target, rest) >= sizeof(next))
		return -ENAMETOOLONG;
	int rc = target[0] == '/' ? walk_root(w) : 0;
	if (rc == 0)
		strcpy(w->path, next);
	return rc;
}

/* One step down to name, not the last: *link if it is a symlink. */
static int walk_down(struct walk *w, const char *name, bool *link)
{
	struct stat st;
	int fd = (int)sys(syscall(SYS_openat, w->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0));

	if (fd < 0)
		return fd;
	int rc = syscall(SYS_fstat, fd, &st) < 0 ? -errno : 0;
	*link = rc == 0 && S_ISLNK(st.st_mode);
	if (rc < 0 || *link) {
		sys_close(fd);
		return rc;
	}
	rc = walk_move(w, fd, &st);
	w->depth += rc == 0;
	return rc;
}

/* The last name, opened as asked - unless it is a symlink to follow
 * (*link), which an open with O_NOFOLLOW answers with an error (or, for
 * O_PATH, opens: the link itself). */
static long walk_last(struct walk *w, const char *name, bool *link)
{
	const struct open_how *how = w->how;
	bool follow = !(how->flags & O_NOFOLLOW);
	long fd = sys(syscall(SYS_openat, w->fd, name, (int)how->flags | O_NOFOLLOW, (int)how->mode));
	char c;
	struct stat st;

	*link = fd < 0 && follow && syscall(SYS_readlinkat, w->fd, name, &c, 1) >= 0;
	if (fd < 0)
		return *link ? 0 : fd;
	int rc = syscall(SYS_fstat, (int)fd, &st) < 0 ? -errno : 0;
	*link = rc == 0 && follow && S_ISLNK(st.st_mode);
	if (rc == 0 && !*link && (how->resolve & RESOLVE_NO_XDEV) && st.st_dev != w->dev)
		rc = -EXDEV;
	if (rc < 0 || *link)
		sys_close((int)fd);
	return rc < 0 ? rc : *link ? 0 : fd;
}

/* Walk w->path from w->fd to the file, opened: its fd or -errno. */
static long walk_run(struct walk *w)
{
	char *p = w->path;

	for (;;) {
		p += strspn(p, "/");
		if (!*p)
			break; /* "", "/", "..", a trailing slash: the directory reached */
		char *end = p + strcspn(p, "/"), sep = *end;
		bool last = !sep, link = false;
		long rc;
		*end = '\0';
		if (!strcmp(p, "."))
			rc = 0;
		else if (!strcmp(p, ".."))
			rc = walk_up(w);
		else if (last && (rc = walk_last(w, p, &link)) >= 0 && !link)
			return rc;
		else if (!last)
			rc = walk_down(w, p, &link);
		*end = sep;
		if (rc >= 0 && link)
			rc = walk_link(w, p, end);
		if (rc < 0)
			return rc;
		p = link ? w->path : end;
	}
	bool link;
	return walk_last(w, ".", &link);
}

static long openat2_emulated(const struct io_req *r)
{
	const struct open_how *how = r->how;
	struct walk w = { .how = how, .fd = -1 };
	struct stat st;
	int rc = how_check(how);

	if (rc < 0)
		return rc;
	if (!how->resolve)
		return sys(syscall(SYS_openat, r->fd, r->path, (int)how->flags, (int)how->mode));
	if (how->resolve & RESOLVE_CACHED)
		return -EAGAIN;
	if (!r->path[0] || strlen(r->path) >= sizeof(w.path))
		return r->path[0] ? -ENAMETOOLONG : -ENOENT;
	w.root = (int)sys(syscall(SYS_openat, r->fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0));
	if (w.root < 0)
		return w.root;
	long res = syscall(SYS_fstat, w.root, &st) < 0 ? -errno : 0;
	w.dev = st.st_dev;
	if (res == 0)
		res = walk_to(&w, w.root, ".");
	strcpy(w.path, r->path);
	if (res == 0 && r->path[0] == '/')
		res = walk_root(&w);
	if (res == 0)
		res = walk_run(&w);
	sys_close(w.root);
	if (w.fd >= 0)
		sys_close(w.fd);
	return res;
}

static long openat2_(const struct io_req *r)
{
	if (!atomic_load_explicit(&openat2_missing, memory_order_relaxed)) {
		long rc = runtime__fault(FAULT_NO_OPENAT2) ? -ENOSYS
		        : sys(syscall(SYS_openat2, r->fd, r->path, r->how, sizeof(struct open_how)));
		if (rc != -ENOSYS)
			return rc;
		atomic_store_explicit(&openat2_missing, true, memory_order_relaxed);
	}
	return openat2_emulated(r);
}

/* -------------------------------------------------------------- dispatch */

static long blocking_call(const struct io_req *r)
{
	int64_t in = r->off, out = r->off_out;

	switch (r->kind) {
	case IO_OPENAT:
		return sys(syscall(SYS_openat, r->fd, r->path, r->flags, r->mode));
	case IO_OPENAT2:
		return openat2_(r);
	case IO_STATX:
		return sys(syscall(SYS_statx, r->fd, r->path, r->flags, r->len, r->stx));
	case IO_FSYNC:
		return sys(syscall(r->flags ? SYS_fdatasync : SYS_fsync, r->fd));
	case IO_SPLICE: /* the pipe end never blocks; offsets are the call's own */
		return sys(syscall(SYS_splice, r->fd, in < 0 ? NULL : &in, r->fd_out,
		                   out < 0 ? NULL : &out, r->len, r->flags | SPLICE_F_NONBLOCK));
	default:
		return try_data(r, false);
	}
}

static long epoll_io(struct fiber *f, struct io_req *r)
{
	uint64_t deadline = deadline_min(r->deadline, f->deadline);

	stat_add(&f->core->stats.sqes, 1); /* operations started */
	switch ((enum io_kind)r->kind) {
	case IO_READ: case IO_READV: case IO_RECV: case IO_RECVMSG:
	case IO_WRITE: case IO_WRITEV: case IO_SEND: case IO_SENDMSG:
		return data_io(f, r, deadline);
	case IO_ACCEPT: return accept_(f, r, deadline);
	case IO_CONNECT: return connect_(f, r, deadline);
	case IO_POLL: return poll_(f, r, deadline);
	case IO_SPLICE: return splice_(f, r, deadline);
	case IO_SHUTDOWN: return sys(syscall(SYS_shutdown, r->fd, r->flags));
	case IO_CLOSE: return close_(f, r);
	case IO_OPENAT: case IO_OPENAT2: case IO_STATX: case IO_FSYNC:
		return on_pool(f, r);
	case IO_KINDS: break;
	}
	return -EINVAL;
}

/* ------------------------------------------------------------- the loop */

/* Wait up to timeout_ns (negative: no limit) for events. */
static int wait_events(struct epoll_core *ep, int64_t timeout_ns)
{
	if (ep->pwait2) {
		struct timespec ts = { timeout_ns / 1000000000, timeout_ns % 1000000000 };
		long n = runtime__fault(FAULT_NO_EPOLL_PWAIT2) ? -ENOSYS
		       : runtime__sys6(SYS_epoll_pwait2, ep->epfd, (long)ep->events, EVENTS_MAX,
		                       timeout_ns < 0 ? 0 : (long)&ts, 0, 0);
		if (n >= 0 || (n != -ENOSYS && n != -EPERM))
			return (int)n;
		ep->pwait2 = false; /* a kernel before 5.11, or a filter that refuses it */
	}
	int ms = timeout_ns < 0 ? -1
	       : timeout_ns > INT_MAX * 1000000ll ? INT_MAX
	       : (int)((timeout_ns + 999999) / 1000000); /* never early */
	return (int)runtime__sys6(SYS_epoll_pwait, ep->epfd, (long)ep->events, EVENTS_MAX, ms, 0, 0);
}

static void signal_event(struct core *c)
{
	struct runtime *rt = c->rt;

	if (syscall(SYS_read, rt->signal_fd, &rt->signal_buf, sizeof(rt->signal_buf)) > 0)
		runtime__signalled(rt);
}

static void dispatch(struct core *c, const struct epoll_event *e)
{
	if (e->data.u64 == DATA_WAKE) {
		uint64_t n;
		if (syscall(SYS_read, c->inbox.wake_fd, &n, sizeof(n)) < 0) {
			/* EAGAIN: another wake-up read it first; nothing lost */
		}
	} else if (e->data.u64 == DATA_SIGNAL) {
		signal_event(c);
	} else {
		fd_event(c, (int)e->data.u64, e->events);
	}
}

/* One epoll wait (up to timeout_ns, negative: none) and its events.
 * Returns how many events, or -errno. */
static int reap(struct core *c, int64_t timeout_ns)
{
	stat_add(&c->stats.enters, 1);
	int n = wait_events(epoll_of(c), timeout_ns);

	if (n == -EINTR)
		return 0;
	if (n < 0)
		return n;
	stat_add(&c->stats.cqes, n);
	for (int i = 0; i < n; i++)
		dispatch(c, &epoll_of(c)->events[i]);
	return n;
}

/* The loop's trip to the kernel: if block, until the nearest timer. */
static int epoll_poll(struct core *c, bool block)
{
	int64_t timeout = 0;

	if (block) {
		uint64_t next = runtime__timers_next(c);
		uint64_t now = runtime_now();
		timeout = next == NEVER ? -1 : next <= now ? 0
		        : next - now > INT64_MAX ? INT64_MAX : (int64_t)(next - now);
	}
	int n = reap(c, timeout);
	return n < 0 ? n : 0;
}

static bool epoll_busy_poll(struct core *c, uint64_t ns)
{
	uint64_t until = runtime_now() + ns;

	do {
		if (reap(c, 0) > 0 || atomic_load_explicit(&c->inbox.head, memory_order_relaxed))
			return true;
	} while (runtime_now() < until);
	return false;
}

/* The eventfd is watched for the whole run, level-triggered: nothing to
 * arm before a sleep (the nearest timer is the wait's timeout). */
static void epoll_prepare_sleep(struct core *c)
{
	(void)c;
}

/* Level-triggered for the whole run (each signal is read as it comes). */
static void epoll_watch_signals(struct core *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = DATA_SIGNAL };

	if (syscall(SYS_epoll_ctl, epoll_of(c)->epfd, EPOLL_CTL_ADD, c->rt->signal_fd, &ev) == 0) {
		c->signal_armed = true;
		c->in_flight++; /* counted as io_uring's read is: not a deadlock */
	}
}

/* ------------------------------------------------------------ lifecycle */

static void epoll_core_stop(struct core *c)
{
	struct epoll_core *ep = epoll_of(c);

	if (!ep)
		return;
	runtime__mshots_free(c); /* streams and listeners the fibers left open */
	runtime__bufpool_free(c);
	for (unsigned i = 0; i < ep->nchunks; i++)
		free(ep->chunks[i]);
	free(ep->chunks);
	sys_close(ep->epfd);
	free(ep);
	c->engine_state = NULL;
	c->in_flight = 0;
	c->signal_armed = false;
}

static int epoll_core_start(struct core *c)
{
	struct epoll_core *ep = calloc(1, sizeof(*ep));
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = DATA_WAKE };

	if (!ep)
		return -ENOMEM;
	c->engine_state = ep;
	ep->epfd = (int)sys(syscall(SYS_epoll_create1, EPOLL_CLOEXEC));
	int rc = ep->epfd < 0 ? ep->epfd
	       : (int)sys(syscall(SYS_epoll_ctl, ep->epfd, EPOLL_CTL_ADD, c->inbox.wake_fd, &ev));
	if (rc < 0) {
		if (ep->epfd >= 0)
			sys_close(ep->epfd);
		free(ep);
		c->engine_state = NULL;
		return rc;
	}
	ep->pwait2 = true; /* until the kernel says ENOSYS */
	return 0;
}

const struct engine runtime__engine_epoll = {
	.name = "epoll",
	.id = RUNTIME_ENGINE_EPOLL,
	.core_start = epoll_core_start,
	.core_stop = epoll_core_stop,
	.io = epoll_io,
	.prepare_sleep = epoll_prepare_sleep,
	.poll = epoll_poll,
	.busy_poll = epoll_busy_poll,
	.watch_signals = epoll_watch_signals,
	.mshot_arm = epoll_mshot_arm,
	.mshot_stop = epoll_mshot_stop,
};
