/* SPDX-License-Identifier: MIT */
/*
 * io.c - blocking-style I/O for fibers: each call is one SQE (plus an
 * IORING_OP_LINK_TIMEOUT when a deadline applies) and the fiber parks until
 * every CQE that names its struct op has arrived - the operation, its linked
 * timeout and any ASYNC_CANCEL - because the SQEs point at the fiber's stack.
 *
 * Cancelling a parked fiber sends an ASYNC_CANCEL for its operation; the
 * operation may still complete (an accept may return an fd), and then its
 * real result is returned so that nothing is lost or leaked.
 */
#include "internal.h"

#include <limits.h>
#include <poll.h>

/* Linux's own cap on one read or write (MAX_RW_COUNT). */
#define RW_MAX 0x7ffff000u

static unsigned rw_len(size_t len)
{
	return len > RW_MAX ? RW_MAX : (unsigned)len;
}

/*
 * Start an operation of the calling fiber, with an optional extra deadline
 * (absolute ns; the fiber's own deadline applies too). Returns a reserved
 * SQE, with room for the linked timeout behind it, or NULL with op->res set
 * when the call must fail at once.
 */
static struct io_uring_sqe *op_begin(struct op *op, uint64_t deadline)
{
	struct fiber *f;

	op->res = runtime__blocking_begin(&f);
	op->fiber = f;
	if (unlikely(op->res))
		return NULL;
	if (f->deadline && (!deadline || f->deadline < deadline))
		deadline = f->deadline;
	op->deadline = deadline;
	op->pending = 0;
	op->timed_out = false;
	op->cancel_sent = false;
	op->cancellable = true;
	if (deadline) {
		if (runtime_now() >= deadline) {
			op->res = -ETIMEDOUT;
			return NULL;
		}
		runtime__sqe_reserve(f->core, 2);
	}
	return runtime__sqe(f->core);
}

/* Cancel hook while parked: ask the kernel to cancel; the op's CQE wakes. */
static void op_interrupt(struct fiber *f)
{
	struct op *op = f->wait_obj;

	if (op->cancel_sent || !op->cancellable)
		return;
	/* Taking an SQE may reap, and the reap may complete op and wake f:
	 * then op is gone (its frame returned) and the SQE becomes a no-op. */
	struct io_uring_sqe *sqe = runtime__sqe(f->core);
	if (f->state != FIBER_PARKED || f->wait_obj != op) {
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, TAG_IGNORE);
		return;
	}
	op->cancel_sent = true;
	io_uring_prep_cancel64(sqe, tagged(op, TAG_OP), 0);
	io_uring_sqe_set_data64(sqe, tagged(op, TAG_CANCEL));
	op->pending++;
}

void runtime__op_cqe(struct core *c, struct op *op, enum cqe_tag tag, int res)
{
	(void)c;
	if (tag == TAG_OP)
		op->res = res;
	else if (tag == TAG_LINK_TIMEOUT)
		op->timed_out = res == -ETIME;
	if (--op->pending == 0)
		runtime__wake(op->fiber, 0);
}

/* Finish the SQE from op_begin (fd: for fixed files, -1 if none), park until
 * every CQE has come, and translate the result. */
static int op_wait(struct op *op, struct io_uring_sqe *sqe, int fd)
{
	struct core *c = op->fiber->core;

	if (c->fixed && runtime__fixed(c, fd))
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, tagged(op, TAG_OP));
	op->pending = 1;
	if (op->deadline) {
		sqe->flags |= IOSQE_IO_LINK;
		ts_from_ns(&op->ts, op->deadline);
		struct io_uring_sqe *lt = runtime__sqe(c);
		io_uring_prep_link_timeout(lt, &op->ts, IORING_TIMEOUT_ABS);
		io_uring_sqe_set_data64(lt, tagged(op, TAG_LINK_TIMEOUT));
		op->pending = 2;
	}
	runtime__park(c, op_interrupt, op);

	int res = op->res;
	if (op->timed_out && (res == -ECANCELED || res == -EINTR))
		return -ETIMEDOUT;
	if (op->cancel_sent && res == -EINTR)
		return -ECANCELED;
	return res;
}

#define OP_START(op, sqe, deadline)                       \
	struct op op;                                     \
	struct io_uring_sqe *sqe = op_begin(&op, deadline); \
	if (unlikely(!sqe))                               \
		return op.res

ssize_t runtime_read(int fd, void *buf, size_t len)
{
	OP_START(op, sqe, 0);
	io_uring_prep_read(sqe, fd, buf, rw_len(len), (uint64_t)-1);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_write(int fd, const void *buf, size_t len)
{
	OP_START(op, sqe, 0);
	io_uring_prep_write(sqe, fd, buf, rw_len(len), (uint64_t)-1);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_pread(int fd, void *buf, size_t len, off_t offset)
{
	if (offset < 0)
		return -EINVAL;
	OP_START(op, sqe, 0);
	io_uring_prep_read(sqe, fd, buf, rw_len(len), (uint64_t)offset);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_pwrite(int fd, const void *buf, size_t len, off_t offset)
{
	if (offset < 0)
		return -EINVAL;
	OP_START(op, sqe, 0);
	io_uring_prep_write(sqe, fd, buf, rw_len(len), (uint64_t)offset);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_readv(int fd, const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	OP_START(op, sqe, 0);
	io_uring_prep_readv(sqe, fd, iov, (unsigned)iovcnt, (uint64_t)-1);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_writev(int fd, const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	OP_START(op, sqe, 0);
	io_uring_prep_writev(sqe, fd, iov, (unsigned)iovcnt, (uint64_t)-1);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_recv(int fd, void *buf, size_t len, int flags)
{
	OP_START(op, sqe, 0);
	io_uring_prep_recv(sqe, fd, buf, rw_len(len), flags);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_send(int fd, const void *buf, size_t len, int flags)
{
	OP_START(op, sqe, 0);
	io_uring_prep_send(sqe, fd, buf, rw_len(len), flags);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_recvmsg(int fd, struct msghdr *msg, int flags)
{
	OP_START(op, sqe, 0);
	io_uring_prep_recvmsg(sqe, fd, msg, (unsigned)flags);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	OP_START(op, sqe, 0);
	io_uring_prep_sendmsg(sqe, fd, msg, (unsigned)flags);
	return op_wait(&op, sqe, fd);
}

int runtime_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC))
		return -EINVAL;
	OP_START(op, sqe, 0);
	io_uring_prep_accept(sqe, fd, addr, addrlen, flags);
	int res = op_wait(&op, sqe, fd);
	struct core *c = op.fiber->core;
	if (res >= 0 && c->fixed)
		runtime_fd_register(res); /* best effort: plain fd works too */
	return res;
}

int runtime_connect(int fd, const struct sockaddr *addr, socklen_t addrlen)
{
	OP_START(op, sqe, 0);
	io_uring_prep_connect(sqe, fd, addr, addrlen);
	return op_wait(&op, sqe, fd);
}

int runtime_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	if (!path)
		return -EFAULT;
	OP_START(op, sqe, 0);
	io_uring_prep_openat(sqe, dirfd, path, flags, mode);
	return op_wait(&op, sqe, -1);
}

int runtime_fsync(int fd, int datasync)
{
	OP_START(op, sqe, 0);
	io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0);
	return op_wait(&op, sqe, fd);
}

int runtime_sock_shutdown(int fd, int how)
{
	OP_START(op, sqe, 0);
	io_uring_prep_shutdown(sqe, fd, how);
	return op_wait(&op, sqe, fd);
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
	uint64_t deadline = timeout_ns > 0 ? runtime_now() + (uint64_t)timeout_ns : 0;
	OP_START(op, sqe, deadline);
	io_uring_prep_poll_add(sqe, fd, (unsigned)(unsigned short)events);
	return op_wait(&op, sqe, fd);
}

/* Close is not cancellable and ignores deadlines: cleanup must not leak. */
int runtime_close(int fd)
{
	struct fiber *f = this_fiber();
	struct op op = { .fiber = f };

	if (!f)
		return -EPERM;
	runtime__fixed_forget(f->core, fd);
	struct io_uring_sqe *sqe = runtime__sqe(f->core);
	io_uring_prep_close(sqe, fd);
	return op_wait(&op, sqe, -1);
}
