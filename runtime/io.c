/* SPDX-License-Identifier: MIT */
/*
 * io.c - blocking-style I/O for fibers: each call is one SQE, and the fiber
 * stays suspended until every CQE that names its struct op has arrived -
 * the operation's and every ASYNC_CANCEL's - because the SQEs point at the
 * fiber's stack.
 *
 * A deadline is a timer on the core's heap, not an IORING_OP_LINK_TIMEOUT:
 * in the common case (the operation completes first) it costs a heap push
 * and pop instead of a second SQE, a kernel hrtimer and a second CQE.
 * When it fires, the operation is stopped like a cancelled one.
 *
 * Stopping an operation (the fiber is cancelled, or its deadline passed)
 * is a loop, not a single request: the
 * kernel answers an ASYNC_CANCEL with -ENOENT or
 * -EALREADY when the operation is between a poll wake-up and its re-arm,
 * or running in io-wq, and then the operation goes on. So until the
 * operation's own CQE has come, every cancel that comes back is followed by
 * another: at once for the first two, then after a backoff (20 us doubling
 * to 10 ms), so that an operation that takes long to die costs no spin.
 * An operation that completed anyway returns its real result (an accepted
 * fd, bytes read), so nothing is lost or leaked.
 */
#include "internal.h"

#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

/* Linux's own cap on one read or write (MAX_RW_COUNT). */
#define RW_MAX 0x7ffff000u

/* ThreadSanitizer cannot see a close done by the kernel for the ring: it
 * would take the next fd with the same number, on another core, for a
 * race. Its builds close with close(2), which it intercepts. */
#ifdef RUNTIME_TSAN
#define RUNTIME_TSAN_CLOSE 1
#else
#define RUNTIME_TSAN_CLOSE 0
#endif

static unsigned rw_len(size_t len)
{
	return len > RW_MAX ? RW_MAX : (unsigned)len;
}

/*
 * Start an operation of the calling fiber, with an optional deadline of its
 * own (absolute ns, NEVER for none; the fiber's deadline applies too).
 * Returns its SQE, or NULL with op->res set when the call must fail at once.
 */
static struct io_uring_sqe *op_begin(struct op *op, uint64_t deadline, const char *fn)
{
	struct fiber *f;

	op->res = runtime__blocking_begin(&f, fn);
	op->fiber = f;
	if (unlikely(op->res))
		return NULL;
	op->deadline = deadline_min(deadline, f->deadline);
	op->pending = 0;
	op->retries = 0;
	op->done = false;
	op->timed_out = false;
	op->cancelling = false;
	op->cancel_in_flight = false;
	op->cancellable = true;
	op->timer.state = TIMER_IDLE;
	/* The fiber's own deadline was checked just now: read the clock again
	 * only for an earlier one of the call's. */
	if (deadline < f->deadline && runtime_now() >= deadline) {
		op->res = -ETIMEDOUT;
		return NULL;
	}
	return runtime__sqe(f->core);
}

/* Send one ASYNC_CANCEL at the operation, unless one is on its way, a
 * retry is scheduled, or the operation has completed. */
static void cancel_send(struct core *c, struct op *op)
{
	if (op->done || op->cancel_in_flight || op->timer.state == TIMER_ARMED)
		return;
	struct io_uring_sqe *sqe = runtime__sqe(c);
	/* Taking an SQE may reap, and the reap may complete op. */
	if (op->done) {
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, TAG_IGNORE);
		return;
	}
	io_uring_prep_cancel64(sqe, tagged(op, TAG_OP), 0);
	io_uring_sqe_set_data64(sqe, tagged(op, TAG_CANCEL));
	op->cancel_in_flight = true;
	if (op->retries < UINT8_MAX)
		op->retries++;
	op->pending++;
}

static void op_stop(struct core *c, struct op *op);

/* The operation's one timer: its deadline until it is stopped, then the
 * backoff before the next cancel. */
static void op_timer_fire(struct timer *t, enum runtime_timer_why why)
{
	struct op *op = container_of(t, struct op, timer);
	struct core *c = op->fiber->core;

	(void)why;
	if (op->cancelling) {
		cancel_send(c, op);
	} else {
		op->timed_out = true;
		op_stop(c, op);
	}
}

static void op_timer_start(struct core *c, struct op *op, uint64_t when)
{
	op->timer.fire = op_timer_fire;
	op->timer.on_shutdown = false;
	runtime__timer_start(c, &op->timer, when);
}

/* A cancel came back and the operation is still in flight: send the next
 * one from the loop's timer phase, after the backoff. */
static void cancel_again(struct core *c, struct op *op)
{
	op_timer_start(c, op, deadline_add(runtime_now(), runtime__cancel_backoff(op->retries)));
}

/* Stop the operation: cancel it until its own CQE has come. */
static void op_stop(struct core *c, struct op *op)
{
	if (op->cancelling || op->done)
		return;
	op->cancelling = true;
	runtime__timer_stop(&op->timer); /* the deadline, if any: moot now */
	cancel_send(c, op);
}

/* Cancel hook while suspended on an operation. */
static void op_interrupt(struct fiber *f)
{
	struct op *op = f->wait_obj;

	if (op->cancellable)
		op_stop(f->core, op);
}

#ifdef RUNTIME_FAULTS
/* Fault injection (fault.h): a short request, or an error in place of the
 * operation (a NOP keeps the CQE protocol as it is). */
static void op_faults(struct op *op, struct io_uring_sqe *sqe)
{
	unsigned code = sqe->opcode;
	bool data = code == IORING_OP_READ || code == IORING_OP_WRITE || code == IORING_OP_RECV ||
	            code == IORING_OP_SEND;

	op->injected = 0;
	if (data && sqe->len > 1 && runtime__fault(FAULT_SHORT_IO))
		sqe->len /= 2;
	if (data && runtime__fault(FAULT_CONNRESET))
		op->injected = -ECONNRESET;
	else if (code == IORING_OP_ACCEPT)
		op->injected = runtime__fault_accept();
	if (op->injected) {
		unsigned flags = sqe->flags;
		io_uring_prep_nop(sqe);
		sqe->flags = (uint8_t)flags;
	}
}

static int op_result(const struct op *op, int res)
{
	return op->injected ? op->injected : res;
}
#else
static inline void op_faults(struct op *op, struct io_uring_sqe *sqe)
{
	(void)op, (void)sqe;
}

static inline int op_result(const struct op *op, int res)
{
	(void)op;
	return res;
}
#endif

void runtime__op_cqe(struct core *c, struct op *op, enum cqe_tag tag, int res)
{
	switch (tag) {
	case TAG_OP:
		op->res = op_result(op, res);
		op->done = true;
		runtime__timer_stop(&op->timer);
		break;
	case TAG_CANCEL:
		op->cancel_in_flight = false;
		if (!op->done)
			cancel_again(c, op);
		break;
	default:
		break;
	}
	if (--op->pending == 0)
		runtime__resume(op->fiber, 0);
}

/* Finish the SQE from op_begin (fd: for fixed files, -1 if none), suspend
 * until every CQE has come, and translate the result. */
static int op_wait(struct op *op, struct io_uring_sqe *sqe, int fd)
{
	struct core *c = op->fiber->core;

	if (runtime__fixed(c, fd))
		sqe->flags |= IOSQE_FIXED_FILE;
	op->opcode = sqe->opcode;
	op->fd = sqe->fd;
	op_faults(op, sqe);
	io_uring_sqe_set_data64(sqe, tagged(op, TAG_OP));
	op->pending = 1;
	if (op->deadline != NEVER)
		op_timer_start(c, op, op->deadline);
	runtime__suspend(c, BLOCK_IO, op_interrupt, op);

	int res = op->res;
	if (res == -ECANCELED || res == -EINTR) {
		if (op->timed_out)
			return -ETIMEDOUT;
		if (op->cancelling)
			return -ECANCELED;
	}
	return res;
}

#define OP_START(op, sqe, deadline)                       \
	struct op op;                                     \
	struct io_uring_sqe *sqe = op_begin(&op, deadline, __func__); \
	if (unlikely(!sqe))                               \
		return op.res

ssize_t runtime_read(int fd, void *buf, size_t len)
{
	OP_START(op, sqe, NEVER);
	io_uring_prep_read(sqe, fd, buf, rw_len(len), (uint64_t)-1);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_write(int fd, const void *buf, size_t len)
{
	OP_START(op, sqe, NEVER);
	io_uring_prep_write(sqe, fd, buf, rw_len(len), (uint64_t)-1);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_pread(int fd, void *buf, size_t len, off_t offset)
{
	if (offset < 0)
		return -EINVAL;
	OP_START(op, sqe, NEVER);
	io_uring_prep_read(sqe, fd, buf, rw_len(len), (uint64_t)offset);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_pwrite(int fd, const void *buf, size_t len, off_t offset)
{
	if (offset < 0)
		return -EINVAL;
	OP_START(op, sqe, NEVER);
	io_uring_prep_write(sqe, fd, buf, rw_len(len), (uint64_t)offset);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_readv(int fd, const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	OP_START(op, sqe, NEVER);
	io_uring_prep_readv(sqe, fd, iov, (unsigned)iovcnt, (uint64_t)-1);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_writev(int fd, const struct iovec *iov, int iovcnt)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	OP_START(op, sqe, NEVER);
	io_uring_prep_writev(sqe, fd, iov, (unsigned)iovcnt, (uint64_t)-1);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_recv(int fd, void *buf, size_t len, int flags)
{
	OP_START(op, sqe, NEVER);
	io_uring_prep_recv(sqe, fd, buf, rw_len(len), flags);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_send(int fd, const void *buf, size_t len, int flags)
{
	OP_START(op, sqe, NEVER);
	io_uring_prep_send(sqe, fd, buf, rw_len(len), flags);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_recvmsg(int fd, struct msghdr *msg, int flags)
{
	OP_START(op, sqe, NEVER);
	io_uring_prep_recvmsg(sqe, fd, msg, (unsigned)flags);
	return op_wait(&op, sqe, fd);
}

ssize_t runtime_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	OP_START(op, sqe, NEVER);
	io_uring_prep_sendmsg(sqe, fd, msg, (unsigned)flags);
	return op_wait(&op, sqe, fd);
}

int runtime_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC))
		return -EINVAL;
	OP_START(op, sqe, NEVER);
	io_uring_prep_accept(sqe, fd, addr, addrlen, flags);
	int res = op_wait(&op, sqe, fd);
	if (res >= 0 && op.fiber->core->fixed_ready) {
		/* A fresh number: a registration of it anywhere is stale (its
		 * file was closed without runtime_close). */
		runtime__fixed_release(res);
		runtime_fd_register(res); /* best effort: plain fd works too */
	}
	return res;
}

int runtime_connect(int fd, const struct sockaddr *addr, socklen_t addrlen)
{
	OP_START(op, sqe, NEVER);
	io_uring_prep_connect(sqe, fd, addr, addrlen);
	return op_wait(&op, sqe, fd);
}

int runtime_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	if (!path)
		return -EFAULT;
	OP_START(op, sqe, NEVER);
	io_uring_prep_openat(sqe, dirfd, path, flags, mode);
	return op_wait(&op, sqe, -1);
}

int runtime_openat2(int dirfd, const char *path, const struct open_how *how)
{
	if (!path || !how)
		return -EFAULT;
	OP_START(op, sqe, NEVER);
	io_uring_prep_openat2(sqe, dirfd, path, (struct open_how *)how);
	return op_wait(&op, sqe, -1);
}

int runtime_statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *st)
{
	if (!path || !st)
		return -EFAULT;
	OP_START(op, sqe, NEVER);
	io_uring_prep_statx(sqe, dirfd, path, flags, mask, st);
	return op_wait(&op, sqe, -1);
}

ssize_t runtime_splice(int fd_in, int64_t off_in, int fd_out, int64_t off_out, size_t len,
                       unsigned flags)
{
	OP_START(op, sqe, NEVER);
	io_uring_prep_splice(sqe, fd_in, off_in, fd_out, off_out, rw_len(len), flags);
	return op_wait(&op, sqe, -1);
}

int runtime_fsync(int fd, int datasync)
{
	OP_START(op, sqe, NEVER);
	io_uring_prep_fsync(sqe, fd, datasync ? IORING_FSYNC_DATASYNC : 0);
	return op_wait(&op, sqe, fd);
}

int runtime_sock_shutdown(int fd, int how)
{
	OP_START(op, sqe, NEVER);
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
	OP_START(op, sqe, deadline_from_timeout(runtime_now(), timeout_ns));
	io_uring_prep_poll_add(sqe, fd, (unsigned)(unsigned short)events);
	return op_wait(&op, sqe, fd);
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
	if (!f || RUNTIME_TSAN_CLOSE)
		return close(fd) == 0 ? 0 : -errno;
	struct op op = { .fiber = f, .deadline = NEVER };
	struct io_uring_sqe *sqe = runtime__sqe(f->core);
	io_uring_prep_close(sqe, fd);
	rc = op_wait(&op, sqe, -1);
	/* The ring refuses to close an io_uring fd (-EBADF) and leaves it
	 * open; close(2) closes that, and answers EBADF for a bad fd too. */
	if (rc == -EBADF)
		rc = sys_close(fd) == 0 ? 0 : -errno;
	return rc;
}
