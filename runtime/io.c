/* SPDX-License-Identifier: MIT */
/*
 * io.c - the blocking-style I/O calls of <runtime.h>. Each checks its
 * arguments, becomes one struct io_req, and goes to its core's engine
 * (engine.h), which parks the calling fiber until the operation is done:
 * an SQE and its CQE on io_uring, a non-blocking try and a wait for
 * readiness on epoll. What is the same on every engine is here: fiber
 * context, cancellation and the deadlines checked before anything
 * starts, and what close and accept do for fixed files.
 */
#include "core.h"
#include "engine/engine.h"

#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned rw_len(size_t len)
{
	return len > RW_MAX ? RW_MAX : (unsigned)len;
}

/* submit's full way: the checks of runtime__blocking_begin (the fiber's
 * deadline among them) and then the call's deadline, for which alone the
 * clock is read again. */
static __attribute__((noinline)) long submit_checked(struct io_req *r, const char *fn)
{
	struct fiber *f;
	int rc = runtime__blocking_begin(&f, fn);

	if (unlikely(rc))
		return rc;
	if (runtime__call_deadline_passed(f, r->deadline))
		return -ETIMEDOUT;
	return f->core->eng->io(f, r);
}

/* Every call's way to the engine (fn: its name, for misuse reports). A
 * plain fiber (runtime__plain_fiber) goes straight there, once the call's
 * own deadline (if any) is found not passed; anything else is checked in
 * full (submit_checked). */
static inline long submit(struct io_req *r, const char *fn)
{
	struct core *c = this_core();
	struct fiber *f = runtime__plain_fiber(c);

	if (unlikely(!f))
		return submit_checked(r, fn);
	/* runtime__call_deadline_passed, knowing the fiber has none */
	if (unlikely(r->deadline != NEVER) && runtime_now() >= r->deadline)
		return -ETIMEDOUT;
	return c->eng->io(f, r);
}

/* submit for the layer's calls, r made with REQ (no deadline): deadline
 * is the call's (0: none), tested as it comes (a register, where
 * submit's test would load r->deadline again). */
static inline long submit_by(struct io_req *r, const char *fn, uint64_t deadline)
{
	struct core *c = this_core();
	struct fiber *f = runtime__plain_fiber(c);

	if (unlikely(!f)) {
		r->deadline = runtime__call_deadline(deadline);
		return submit_checked(r, fn);
	}
	if (unlikely(deadline)) {
		if (runtime_now() >= deadline)
			return -ETIMEDOUT;
		r->deadline = deadline;
	}
	return c->eng->io(f, r);
}

#define REQ(k, ...) (struct io_req){ .kind = (k), .deadline = NEVER, __VA_ARGS__ }

ssize_t runtime_read(int fd, void *buf, size_t len)
{
	struct io_req r = REQ(IO_READ, .fd = fd, .buf = buf, .len = rw_len(len), .off = -1);
	return submit(&r, __func__);
}

ssize_t runtime_write(int fd, const void *buf, size_t len)
{
	struct io_req r = REQ(IO_WRITE, .fd = fd, .cbuf = buf, .len = rw_len(len), .off = -1);
	return submit(&r, __func__);
}

ssize_t runtime_pread(int fd, void *buf, size_t len, off_t offset)
{
	if (offset < 0)
		return -EINVAL;
	struct io_req r = REQ(IO_READ, .fd = fd, .buf = buf, .len = rw_len(len), .off = offset);
	return submit(&r, __func__);
}

ssize_t runtime_pwrite(int fd, const void *buf, size_t len, off_t offset)
{
	if (offset < 0)
		return -EINVAL;
	struct io_req r = REQ(IO_WRITE, .fd = fd, .cbuf = buf, .len = rw_len(len), .off = offset);
	return submit(&r, __func__);
}

ssize_t runtime_readv(int fd, const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	struct io_req r = REQ(IO_READV, .fd = fd, .iov = iov, .len = (unsigned)iovcnt, .off = -1);
	return submit(&r, __func__);
}

ssize_t runtime_writev(int fd, const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	struct io_req r = REQ(IO_WRITEV, .fd = fd, .iov = iov, .len = (unsigned)iovcnt, .off = -1);
	return submit(&r, __func__);
}

ssize_t runtime_recv(int fd, void *buf, size_t len, int flags)
{
	struct io_req r = REQ(IO_RECV, .fd = fd, .buf = buf, .len = rw_len(len), .flags = flags);
	return submit(&r, __func__);
}

ssize_t runtime_send(int fd, const void *buf, size_t len, int flags)
{
	struct io_req r = REQ(IO_SEND, .fd = fd, .cbuf = buf, .len = rw_len(len), .flags = flags);
	return submit(&r, __func__);
}

ssize_t runtime__recv_by(int fd, void *buf, size_t len, int flags, uint64_t deadline)
{
	struct io_req r = REQ(IO_RECV, .fd = fd, .buf = buf, .len = rw_len(len), .flags = flags);

	return submit_by(&r, "runtime_recv", deadline);
}

/* runtime__send_by's sendmsg, out of line: the one-iovec send stays
 * small enough to be inlined into its callers. */
static __attribute__((noinline)) ssize_t
sendmsg_by(int fd, const struct iovec *iov, int iovcnt, int flags, uint64_t deadline)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	struct io_req r = REQ(IO_SENDMSG, .fd = fd, .msg = &msg, .flags = flags);
	return submit_by(&r, "runtime_sendmsg", deadline);
}

/* inline: a hint to LTO's inliner, for the toolkit's write (layer.h
 * declares it, so this is its external definition all the same). */
inline ssize_t runtime__send_by(int fd, const struct iovec *iov, int iovcnt, int flags,
                                uint64_t deadline)
{
	if (unlikely(iovcnt != 1))
		return sendmsg_by(fd, iov, iovcnt, flags, deadline);
	struct io_req r = REQ(IO_SEND, .fd = fd, .cbuf = iov[0].iov_base,
	                      .len = rw_len(iov[0].iov_len), .flags = flags);
	return submit_by(&r, "runtime_send", deadline);
}

ssize_t runtime_recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct io_req r = REQ(IO_RECVMSG, .fd = fd, .msg = msg, .flags = flags);
	return submit(&r, __func__);
}

ssize_t runtime_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct io_req r = REQ(IO_SENDMSG, .fd = fd, .msg = (struct msghdr *)msg, .flags = flags);
	return submit(&r, __func__);
}

int runtime_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC))
		return -EINVAL;
	struct io_req r = REQ(IO_ACCEPT, .fd = fd, .addr = addr, .addrlen = addrlen, .flags = flags);
	int res = (int)submit(&r, __func__);
	struct core *c = this_core();
	if (res >= 0 && c->eng->fd_adopt)
		c->eng->fd_adopt(c, res);
	return res;
}

int runtime_connect(int fd, const struct sockaddr *addr, socklen_t addrlen)
{
	struct io_req r = REQ(IO_CONNECT, .fd = fd, .caddr = addr, .alen = addrlen);
	return (int)submit(&r, __func__);
}

int runtime_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	if (!path)
		return -EFAULT;
	struct io_req r = REQ(IO_OPENAT, .fd = dirfd, .path = path, .flags = flags, .mode = mode);
	return (int)submit(&r, __func__);
}

int runtime_openat2(int dirfd, const char *path, const struct open_how *how)
{
	if (!path || !how)
		return -EFAULT;
	struct io_req r = REQ(IO_OPENAT2, .fd = dirfd, .path = path, .how = how);
	return (int)submit(&r, __func__);
}

int runtime_statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *st)
{
	if (!path || !st)
		return -EFAULT;
	struct io_req r = REQ(IO_STATX, .fd = dirfd, .path = path, .flags = flags, .len = mask,
	                      .stx = st);
	return (int)submit(&r, __func__);
}

ssize_t runtime_splice(int fd_in, int64_t off_in, int fd_out, int64_t off_out, size_t len,
                       unsigned flags)
{
	struct io_req r = REQ(IO_SPLICE, .fd = fd_in, .off = off_in, .fd_out = fd_out,
	                      .off_out = off_out, .len = rw_len(len), .flags = (int)flags);
	return submit(&r, __func__);
}

int runtime_fsync(int fd, int datasync)
{
	struct io_req r = REQ(IO_FSYNC, .fd = fd, .flags = datasync != 0);
	return (int)submit(&r, __func__);
}

int runtime_sock_shutdown(int fd, int how)
{
	struct io_req r = REQ(IO_SHUTDOWN, .fd = fd, .flags = how);
	return (int)submit(&r, __func__);
}

int runtime_poll(int fd, short events, int64_t timeout_ns)
{
	if (timeout_ns == 0) {
		/* A readiness check, not a wait: poll(2) never blocks here. */
		struct pollfd p = { .fd = fd, .events = events };
		int n = poll(&p, 1, 0);
		if (n < 0)
			return -errno;
		return n ? p.revents : -ETIMEDOUT;
	}
	struct io_req r = REQ(IO_POLL, .fd = fd, .flags = (unsigned short)events);
	r.deadline = deadline_from_timeout(runtime_now(), timeout_ns);
	return (int)submit(&r, __func__);
}

int runtime__poll_by(int fd, short events, uint64_t deadline)
{
	struct io_req r = REQ(IO_POLL, .fd = fd, .flags = (unsigned short)events);

	return (int)submit_by(&r, "runtime_poll", deadline);
}

/*
 * Close is never cancelled and ignores deadlines: cleanup must not leak.
 * A fixed-file registration goes first (on whichever core holds it), so
 * that no ring keeps the file open under a number the kernel may reuse.
 * Outside a fiber it is close(2).
 */
int runtime_close(int fd)
{
	struct fiber *f = this_fiber();

	if (fd < 0)
		return -EBADF;
	int rc = runtime__fixed_release(fd);
	if (rc > 0)
		return 0; /* its core closes it */
	if (!f)
		return close(fd) == 0 ? 0 : -errno;
	struct io_req r = REQ(IO_CLOSE, .fd = fd);
	return (int)f->core->eng->io(f, &r);
}
