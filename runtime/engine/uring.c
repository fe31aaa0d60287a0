/* SPDX-License-Identifier: MIT */
/*
 * uring.c - the io_uring engine (engine.h): one ring per core, set
 * up on the core's thread. Every operation is an SQE whose user_data names
 * a struct op on the fiber's stack, and the fiber stays suspended until
 * every CQE that names it has come - the operation's and every
 * ASYNC_CANCEL's - because the SQEs point at that stack.
 *
 * Setup prefers SINGLE_ISSUER|DEFER_TASKRUN (completions are processed only
 * when this thread enters the kernel, with no IPIs), then COOP_TASKRUN,
 * then nothing; the choice is made once by runtime__uring_probe(). The CQ
 * is 4x the SQ and IORING_FEAT_NODROP is required, so a burst of
 * completions is never lost: the kernel backlogs them and submit answers
 * -EBUSY until they are reaped. CQEs are copied out in batches before they
 * are dispatched, so a handler that needs SQEs (and so may reap, to make
 * room) never sees the CQ ring half-consumed. user_data is a pointer with
 * a tag in its low 3 bits (enum cqe_tag).
 *
 * A deadline is a timer on the core's heap, not an IORING_OP_LINK_TIMEOUT:
 * in the common case (the operation completes first) it costs a heap push
 * and pop instead of a second SQE, a kernel hrtimer and a second CQE. When
 * it fires, the operation is stopped like a cancelled one. Stopping is a
 * loop, not a single request: the kernel answers an ASYNC_CANCEL with
 * -ENOENT or -EALREADY when the operation is between a poll wake-up and
 * its re-arm, or running in io-wq, and then the operation goes on. So
 * until the operation's own CQE has come, every cancel that comes back is
 * followed by another: at once for the first two, then after a backoff
 * (20 us doubling to 10 ms). An operation that completed anyway returns
 * its real result (an accepted fd, bytes read): nothing is lost or leaked.
 *
 * Timers stay in the core's heap; only when the core is about to block is
 * the nearest deadline armed, as one absolute IORING_OP_TIMEOUT, replaced
 * (TIMEOUT_REMOVE + TIMEOUT) only when an earlier deadline arrives. A core
 * that sleeps keeps a read armed on its eventfd, which other threads write
 * to wake it (inbox.c); core 0 keeps one on the shutdown signalfd.
 */
#include "uring.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Opcodes the runtime uses (all in Linux 5.11), and IORING_OP_SOCKET, which
 * it does not: the probe sees opcodes, not flags, and SOCKET came in 5.19
 * with what listeners need and cannot do without - multishot accept (a
 * stream falls back to plain recvs, a listener has no such fallback). So a
 * kernel before 5.19 gets -EOPNOTSUPP here, and the epoll engine. */
static const uint8_t required_ops[] = {
	IORING_OP_SOCKET,
	IORING_OP_READ, IORING_OP_WRITE, IORING_OP_READV, IORING_OP_WRITEV,
	IORING_OP_RECV, IORING_OP_SEND, IORING_OP_RECVMSG, IORING_OP_SENDMSG,
	IORING_OP_ACCEPT, IORING_OP_CONNECT, IORING_OP_CLOSE, IORING_OP_OPENAT,
	IORING_OP_FSYNC, IORING_OP_POLL_ADD, IORING_OP_SHUTDOWN, IORING_OP_TIMEOUT,
	IORING_OP_TIMEOUT_REMOVE, IORING_OP_ASYNC_CANCEL,
	IORING_OP_OPENAT2, IORING_OP_STATX, IORING_OP_SPLICE,
};

static int ring_setup(struct io_uring *ring, const struct runtime_config *cfg, unsigned flags)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	p.flags = flags | IORING_SETUP_CQSIZE;
	p.cq_entries = cfg->ring_entries * 4;
	if (flags & IORING_SETUP_SQPOLL)
		p.sq_thread_idle = cfg->sqpoll_idle_ms;
	int rc = io_uring_queue_init_params(cfg->ring_entries, ring, &p);
	if (rc == 0 && !(p.features & IORING_FEAT_NODROP)) {
		io_uring_queue_exit(ring);
		return -EOPNOTSUPP;
	}
	return rc;
}

static const unsigned plain_flags[] = {
	IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		IORING_SETUP_TASKRUN_FLAG,
	IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
	IORING_SETUP_SUBMIT_ALL,
	0,
};

static const unsigned sqpoll_flags[] = {
	IORING_SETUP_SQPOLL | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER,
	IORING_SETUP_SQPOLL | IORING_SETUP_SUBMIT_ALL,
	IORING_SETUP_SQPOLL,
};

static int probe_ops(struct io_uring *ring)
{
	struct io_uring_probe *probe = io_uring_get_probe_ring(ring);
	int rc = 0;

	if (!probe)
		return -EOPNOTSUPP;
	for (size_t i = 0; i < sizeof(required_ops); i++)
		if (!io_uring_opcode_supported(probe, required_ops[i]))
			rc = -EOPNOTSUPP;
	io_uring_free_probe(probe);
	return rc;
}

/* Find the best setup flags this kernel accepts. Returns them, or -errno:
 * -EPERM (refused), -ENOSYS, -EOPNOTSUPP (engine.h). */
int runtime__uring_probe(const struct runtime_config *cfg)
{
	const unsigned *chain = cfg->sqpoll ? sqpoll_flags : plain_flags;
	size_t n = cfg->sqpoll ? sizeof(sqpoll_flags) / sizeof(*chain)
	                       : sizeof(plain_flags) / sizeof(*chain);
	struct io_uring ring;
	int rc = -EINVAL;

	for (size_t i = 0; i < n; i++) {
		rc = ring_setup(&ring, cfg, chain[i]);
		if (rc == -EINVAL)
			continue;
		if (rc < 0)
			return rc;
		rc = probe_ops(&ring);
		io_uring_queue_exit(&ring);
		return rc < 0 ? rc : (int)chain[i];
	}
	return rc;
}

/* On the core's own thread: SINGLE_ISSUER binds the ring to its creator.
 * The state is the core's for the run (core->engine_state). */
static int uring_core_start(struct core *c)
{
	struct runtime *rt = c->rt;
	struct uring_core *u = aligned_alloc(64, sizeof(*u));

	if (!u)
		return -ENOMEM;
	*u = (struct uring_core){ .kt_deadline = NEVER };
	int rc = ring_setup(&u->ring, &rt->cfg, rt->setup_flags);
	if (rc < 0) {
		free(u);
		return rc;
	}
	/* An optimisation: a kernel without it runs unregistered. */
	if (rt->cfg.register_ring_fd && io_uring_register_ring_fd(&u->ring) == 1)
		u->enter_flags = IORING_ENTER_REGISTERED_RING;
	c->engine_state = u;
	runtime__fixed_ring_init(c);
	return 0;
}

#define DRAIN_BOUND_NS (1000 * 1000 * 1000ull)
#define DRAIN_WAIT_NS (10 * 1000 * 1000ll)

/* Leave nothing in flight: cancel every request (IORING_ASYNC_CANCEL_ANY)
 * and reap, without dispatching - no fiber runs on this ring again - until
 * every CQE has come, or DRAIN_BOUND_NS has passed (then the ring's own
 * teardown finishes the job; so does a kernel before 5.19, which lacks
 * CANCEL_ANY). After a normal run only the core's own reads and timeout
 * are left; after a failed one, fibers' operations too. */
static void drain(struct core *c)
{
	struct io_uring *ring = &uring_of(c)->ring;
	uint64_t until = runtime_now() + DRAIN_BOUND_NS;

	while (c->in_flight && runtime_now() < until) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		if (sqe) {
			io_uring_prep_cancel(sqe, NULL, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
			io_uring_sqe_set_data64(sqe, TAG_IGNORE);
			c->in_flight++;
		}
		struct __kernel_timespec ts = { 0, DRAIN_WAIT_NS };
		struct io_uring_cqe *cqe;
		io_uring_submit_and_wait_timeout(ring, &cqe, 1, &ts, NULL);
		unsigned head, n = 0;
		io_uring_for_each_cqe(ring, head, cqe) {
			n++;
			if (!(cqe->flags & IORING_CQE_F_MORE))
				c->in_flight--;
		}
		io_uring_cq_advance(ring, n);
	}
}

static void bufs_free(struct core *c);

static void uring_core_stop(struct core *c)
{
	drain(c);
	runtime__mshots_free(c);
	bufs_free(c);
	runtime__bufpool_free(c);
	runtime__fixed_ring_exit(c);
	io_uring_queue_exit(&uring_of(c)->ring);
	free(c->engine_state);
	c->engine_state = NULL;
	c->in_flight = 0;
	c->wake_armed = false;
	c->signal_armed = false;
}

/* ----------------------------------------------------------------- reap */

static void op_cqe(struct core *c, struct op *op, enum cqe_tag tag, int res);
static void ktimeout_cqe(struct core *c, uint64_t user_data);
static inline void mshot_cqe(uint64_t user_data, int res, unsigned flags);

struct cqe_copy {
	uint64_t user_data;
	int32_t res;
	uint32_t flags;
};

/* The rest of the kinds: the core's own requests, and cancels. */
static __attribute__((noinline)) void dispatch_rare(struct core *c, enum cqe_tag tag,
                                                    const struct cqe_copy *e)
{
	void *ptr = (void *)(uintptr_t)(e->user_data & ~TAG_MASK);

	if (tag == TAG_CANCEL)
		op_cqe(c, ptr, TAG_CANCEL, e->res);
	else if (tag == TAG_KTIMEOUT)
		ktimeout_cqe(c, e->user_data);
	else if (tag == TAG_WAKEUP)
		c->wake_armed = false; /* re-armed before the next sleep */
	else if (tag == TAG_SIGNAL) {
		c->signal_armed = false;
		if (e->res > 0)
			runtime__signalled(c->rt);
	} /* TAG_IGNORE: nothing */
}

/* The two kinds of nearly every CQE, a stream's or a listener's and a
 * fiber's operation, are tested first and inline; GCC would make a jump
 * table of a single chain (an indirect jump per CQE). */
static inline __attribute__((always_inline)) void dispatch(struct core *c, struct uring_core *u,
                                                           const struct cqe_copy *e)
{
	enum cqe_tag tag = (enum cqe_tag)(e->user_data & TAG_MASK);

	if (tag == TAG_MSHOT) {
		u->bufs.lent -= (e->flags & IORING_CQE_F_BUFFER) != 0; /* the kernel filled one */
		mshot_cqe(e->user_data, e->res, e->flags);
	} else if (tag == TAG_OP)
		op_cqe(c, (void *)(uintptr_t)(e->user_data & ~TAG_MASK), TAG_OP, e->res);
	else
		dispatch_rare(c, tag, e);
}

/*
 * Dispatch every CQE that has arrived. Returns how many. Each CQE is
 * consumed (the head moved past it) before it is dispatched: a dispatch
 * may take an SQE, and a full SQ reaps from within (sq_make_room), which
 * then starts after it and may move the head past this call's view of
 * the tail. The tail is read again only when the CQEs seen are done.
 * The ring has 16-byte CQEs (no IORING_SETUP_CQE32).
 */
static inline __attribute__((always_inline)) unsigned reap_all(struct core *c)
{
	struct uring_core *u = uring_of(c);
	struct io_uring_cq *cq = &u->ring.cq;
	unsigned tail = io_uring_smp_load_acquire(cq->ktail);
	unsigned n = 0;

	for (;;) {
		unsigned head = *cq->khead;
		if ((int)(tail - head) <= 0 &&
		    (int)((tail = io_uring_smp_load_acquire(cq->ktail)) - head) <= 0)
			break;
		const struct io_uring_cqe *cqe = &cq->cqes[head & cq->ring_mask];
		struct cqe_copy e = { cqe->user_data, cqe->res, cqe->flags };
		io_uring_smp_store_release(cq->khead, head + 1);
		/* A multishot's CQEs but its last leave it in flight. */
		c->in_flight -= !(e.flags & IORING_CQE_F_MORE);
		dispatch(c, u, &e);
		n++;
	}
	stat_add(&c->stats.cqes, n);
	return n;
}

/* Out of line for the rare callers; the loop's poll has its own copy. */
static __attribute__((noinline)) unsigned reap(struct core *c)
{
	return reap_all(c);
}

/* ---------------------------------------------------------------- submit */

/*
 * liburing's io_uring_submit_and_wait(ring, wait_nr) for a ring without
 * SQPOLL or IOPOLL, in a third of its instructions: the SQEs prepared
 * since the last call published, then one raw io_uring_enter with every
 * SQE the kernel has not taken (all of them but after an -EBUSY), asking
 * for completions when waiting or when the kernel says it holds some back
 * (overflowed, or task work to run: DEFER_TASKRUN). It keeps liburing's
 * own bookkeeping (sqe_head), so liburing's calls on the ring still work.
 * Returns SQEs submitted or -errno.
 */
static inline __attribute__((always_inline)) int ring_enter(struct uring_core *u,
                                                            unsigned wait_nr)
{
	struct io_uring_sq *sq = &u->ring.sq;
	unsigned tail = sq->sqe_tail;

	if (sq->sqe_head != tail) {
		sq->sqe_head = tail;
		io_uring_smp_store_release(sq->ktail, tail);
	}
	unsigned submit = tail - *sq->khead;
	unsigned flags = u->enter_flags;
	if (wait_nr || (IO_URING_READ_ONCE(*sq->kflags) & (IORING_SQ_CQ_OVERFLOW | IORING_SQ_TASKRUN)))
		flags |= IORING_ENTER_GETEVENTS;
	return (int)runtime__sys6(__NR_io_uring_enter, u->ring.enter_ring_fd, submit, wait_nr,
	                          flags, 0, 0);
}

/* Every submit of the ring (the loop's, a full SQ's) goes this way;
 * inlined into both, as a call per turn would cost. */
static inline __attribute__((always_inline)) int submit_and_wait(struct uring_core *u,
                                                                 unsigned wait_nr)
{
	if (u->ring.flags & IORING_SETUP_SQPOLL)
		return io_uring_submit_and_wait(&u->ring, wait_nr);
	return ring_enter(u, wait_nr);
}

/* The SQ is full: hand it to the kernel. -EBUSY/-EAGAIN mean the kernel
 * holds back completions (or lacks memory) until some are reaped. */
static void sq_make_room(struct core *c)
{
	struct uring_core *u = uring_of(c);

	stat_add(&c->stats.enters, 1);
	int rc = runtime__fault(FAULT_SUBMIT_BUSY) ? -EAGAIN : submit_and_wait(u, 0);

	if (rc == -EBUSY || rc == -EAGAIN || rc == -EINTR)
		reap(c);
	else if (rc < 0)
		abort(); /* the ring itself is broken: nothing can be relied on */
	if (u->ring.flags & IORING_SETUP_SQPOLL)
		io_uring_sqring_wait(&u->ring);
}

struct io_uring_sqe *runtime__sqe(struct core *c)
{
	struct io_uring *ring = &uring_of(c)->ring;
	struct io_uring_sqe *sqe;

	while (runtime__fault(FAULT_NO_SQE) || !(sqe = io_uring_get_sqe(ring)))
		sq_make_room(c);
	c->in_flight++;
	stat_add(&c->stats.sqes, 1);
	return sqe;
}

/* Make room for n SQEs, so a linked pair is never split by a full ring. */
void runtime__sqe_reserve(struct core *c, unsigned n)
{
	while (io_uring_sq_space_left(&uring_of(c)->ring) < n)
		sq_make_room(c);
}

/* ------------------------------------------------------------ operations */

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

/* The operation's timer: the backoff before the next cancel. (Its
 * deadline is the fiber's lazy deadline timer: op_expire.) */
static void op_timer_fire(struct timer *t, enum runtime_timer_why why)
{
	struct op *op = container_of(t, struct op, timer);

	(void)why;
	cancel_send(op->fiber->core, op);
}

static void op_expire(struct fiber *f, void *ctx)
{
	struct op *op = ctx;

	if (op->done)
		return; /* its CQE came first: the fiber has yet to run */
	op->timed_out = true;
	op_stop(f->core, op);
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
	cancel_send(c, op);
}

/* Cancel (res -ECANCELED) or expiry (-ETIMEDOUT) while suspended on an
 * operation. */
static void op_interrupt(struct fiber *f, int res)
{
	struct op *op = f->wait_obj;

	if (!op->cancellable)
		return;
	if (res == -ETIMEDOUT)
		op->timed_out = true;
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
	if (data) {
		size_t len = sqe->len;
		op->injected = runtime__fault_data(&len);
		sqe->len = (unsigned)len;
	} else if (code == IORING_OP_ACCEPT) {
		op->injected = runtime__fault_accept();
	}
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

static void op_cqe(struct core *c, struct op *op, enum cqe_tag tag, int res)
{
	switch (tag) {
	case TAG_OP:
		op->res = op_result(op, res);
		op->done = true;
		if (op->timer.state == TIMER_ARMED) /* a cancel's backoff */
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

/*
 * A send on a core that is nearly idle (the last loop turn brought one
 * completion, a few operations are in the kernel, no other fiber is
 * ready): the loop's next step would be an io_uring_enter for this send
 * alone, and a socket send mostly completes at once. So the fiber makes
 * that one system call itself, a plain non-blocking send (no SQE, no CQE,
 * no reap), and goes on at once: no loop turn and no two switches. If the
 * socket's buffer is full it takes the ring's way. Under load the loop
 * batches the sends of many fibers into its one enter per turn, as before
 * (a system call per send there would be one more).
 */
#define EAGER_IN_FLIGHT_MAX 8

static bool may_send_now(const struct core *c, const struct io_req *r)
{
	const struct uring_core *u = uring_of(c);

	return (r->kind == IO_SEND || r->kind == IO_SENDMSG) && u->turn_cqes <= 1 &&
	       c->in_flight <= EAGER_IN_FLIGHT_MAX && queue_empty(&c->sched.ready) &&
	       queue_empty(&c->inbox.backlog) && !(u->ring.flags & IORING_SETUP_SQPOLL);
}

/* The send, now: bytes sent or -errno (-EAGAIN: the socket is full),
 * with the faults op_faults would inject into its SQE. */
static long send_now(const struct io_req *r)
{
	size_t len = r->len;

	if (runtime__fault(FAULT_CONNRESET))
		return -ECONNRESET;
	if (r->kind == IO_SEND && len > 1 && runtime__fault(FAULT_SHORT_IO))
		len /= 2;
	return runtime__send_syscall(r, len, MSG_DONTWAIT);
}

/* Finish the SQE, suspend until every CQE has come, and translate the
 * result. */
static int op_wait(struct op *op, struct io_uring_sqe *sqe)
{
	struct core *c = op->fiber->core;

	op_faults(op, sqe);
	io_uring_sqe_set_data64(sqe, tagged(op, TAG_OP));
	op->pending = 1;
	if (op->deadline != NEVER)
		runtime__deadline_begin(op->fiber, op->deadline, op_expire, op);
	runtime__suspend(c, BLOCK_IO, op_interrupt, op);
	if (op->deadline != NEVER)
		runtime__deadline_end(op->fiber);

	int res = op->res;
	if (res == -ECANCELED || res == -EINTR) {
		if (op->timed_out)
			return -ETIMEDOUT;
		if (op->cancelling)
			return -ECANCELED;
	}
	return res;
}

static void op_init(struct op *op, struct fiber *f, const struct io_req *r)
{
	op->head.kind = r->kind;
	op->head.fd = r->fd;
	op->fiber = f;
	op->pending = 0;
	op->retries = 0;
	op->done = false;
	op->timed_out = false;
	op->cancelling = false;
	op->cancel_in_flight = false;
	op->cancellable = r->kind != IO_CLOSE; /* cleanup must not fail */
	op->deadline = r->kind == IO_CLOSE ? NEVER : deadline_min(r->deadline, f->deadline);
	op->timer.state = TIMER_IDLE;
}

/* Kinds whose fd may be a fixed file of the ring (the rest take a dirfd,
 * two fds, or close the number itself). */
#define FIXED_KINDS                                                                      \
	(1u << IO_READ | 1u << IO_WRITE | 1u << IO_READV | 1u << IO_WRITEV | 1u << IO_RECV | \
	 1u << IO_SEND | 1u << IO_RECVMSG | 1u << IO_SENDMSG | 1u << IO_ACCEPT |             \
	 1u << IO_CONNECT | 1u << IO_FSYNC | 1u << IO_SHUTDOWN | 1u << IO_POLL)

static void prep(struct io_uring_sqe *sqe, const struct io_req *r)
{
	switch ((enum io_kind)r->kind) {
	case IO_READ: io_uring_prep_read(sqe, r->fd, r->buf, r->len, (uint64_t)r->off); break;
	case IO_WRITE: io_uring_prep_write(sqe, r->fd, r->cbuf, r->len, (uint64_t)r->off); break;
	case IO_READV: io_uring_prep_readv(sqe, r->fd, r->iov, r->len, (uint64_t)r->off); break;
	case IO_WRITEV: io_uring_prep_writev(sqe, r->fd, r->iov, r->len, (uint64_t)r->off); break;
	case IO_RECV: io_uring_prep_recv(sqe, r->fd, r->buf, r->len, r->flags); break;
	case IO_SEND: io_uring_prep_send(sqe, r->fd, r->cbuf, r->len, r->flags); break;
	case IO_RECVMSG: io_uring_prep_recvmsg(sqe, r->fd, r->msg, (unsigned)r->flags); break;
	case IO_SENDMSG: io_uring_prep_sendmsg(sqe, r->fd, r->msg, (unsigned)r->flags); break;
	case IO_ACCEPT: io_uring_prep_accept(sqe, r->fd, r->addr, r->addrlen, r->flags); break;
	case IO_CONNECT: io_uring_prep_connect(sqe, r->fd, r->caddr, r->alen); break;
	case IO_OPENAT: io_uring_prep_openat(sqe, r->fd, r->path, r->flags, r->mode); break;
	case IO_OPENAT2:
		io_uring_prep_openat2(sqe, r->fd, r->path, (struct open_how *)r->how);
		break;
	case IO_STATX: io_uring_prep_statx(sqe, r->fd, r->path, r->flags, r->len, r->stx); break;
	case IO_SPLICE:
		io_uring_prep_splice(sqe, r->fd, r->off, r->fd_out, r->off_out, r->len,
		                     (unsigned)r->flags);
		break;
	case IO_FSYNC: io_uring_prep_fsync(sqe, r->fd, r->flags ? IORING_FSYNC_DATASYNC : 0); break;
	case IO_SHUTDOWN: io_uring_prep_shutdown(sqe, r->fd, r->flags); break;
	case IO_POLL: io_uring_prep_poll_add(sqe, r->fd, (unsigned)r->flags); break;
	case IO_CLOSE: io_uring_prep_close(sqe, r->fd); break;
	case IO_KINDS: break;
	}
}

/* ThreadSanitizer cannot see a close done by the kernel for the ring: it
 * would take the next fd with the same number, on another core, for a
 * race. Its builds close with close(2), which it intercepts. */
#ifdef RUNTIME_TSAN
#define TSAN_CLOSE 1
#else
#define TSAN_CLOSE 0
#endif

static long uring_close(struct fiber *f, struct io_req *r)
{
	struct op op;

	if (TSAN_CLOSE)
		return close(r->fd) == 0 ? 0 : -errno;
	op_init(&op, f, r);
	struct io_uring_sqe *sqe = runtime__sqe(f->core);
	prep(sqe, r);
	int rc = op_wait(&op, sqe);
	/* The ring refuses to close an io_uring fd (-EBADF) and leaves it
	 * open; close(2) closes that, and answers EBADF for a bad fd too. */
	if (rc == -EBADF)
		rc = sys_close(r->fd) == 0 ? 0 : -errno;
	return rc;
}

/* The operation as an SQE, its struct op on this frame. */
static __attribute__((noinline)) long ring_io(struct fiber *f, struct io_req *r)
{
	struct core *c = f->core;
	struct op op;

	if (unlikely(r->kind == IO_CLOSE))
		return uring_close(f, r);
	op_init(&op, f, r);
	struct io_uring_sqe *sqe = runtime__sqe(c);
	prep(sqe, r);
	if ((FIXED_KINDS >> r->kind & 1) && runtime__fixed(c, r->fd))
		sqe->flags |= IOSQE_FIXED_FILE;
	return op_wait(&op, sqe);
}

/* A send made at once needs no frame of its own: ring_io has the op's. */
static long uring_io(struct fiber *f, struct io_req *r)
{
	if (may_send_now(f->core, r)) {
		long n = send_now(r);
		if (n != -EAGAIN)
			return n;
	}
	return ring_io(f, r);
}

/* ------------------------------------------------------ provided buffers */

/*
 * A receive stream's multishot recv takes its buffers from the core's
 * pool (bufpool.h) through a provided-buffer ring (buffer group 0), which
 * the engine tops up from the pool's free list before each trip to the
 * kernel. The kernel takes buffers in ring order, so a ring holding them
 * all would walk every buffer of the pool (4 MiB a core by default)
 * resident, one message after another. The ring holds a target of them
 * instead, refilled once it is down to half (a check per turn, a batch
 * of adds now and then, where a buffer given back at each message cost
 * every message a ring add of its own), the most recently freed first. A
 * heavy load runs the ring dry (a stream's recv ends with -ENOBUFS),
 * which doubles the target; a decay period (a second) that did not run
 * dry halves it again at the next refill, down to where it started.
 */
#define BUFS_DECAY_NS (1000 * 1000 * 1000ull)

_Static_assert(MSHOT_F_BUFFER == IORING_CQE_F_BUFFER && MSHOT_F_MORE == IORING_CQE_F_MORE &&
               MSHOT_BUF_SHIFT == IORING_CQE_BUFFER_SHIFT,
               "a CQE's flags are the engine's multishot result flags (engine.h)");

static unsigned bufs_start(const struct bufpool *p)
{
	return p->count / 4 ? p->count / 4 : 1;
}

static void bufs_set_target(struct uring_bufs *b, unsigned target)
{
	b->target = target;
	b->low = target / 2 ? target / 2 : 1;
}

/* The ring as full as its target, from the pool's free list (the most
 * recently freed first); the target decays once a period. */
static __attribute__((noinline)) void bufs_refill(struct core *c)
{
	struct uring_bufs *b = &uring_of(c)->bufs;
	struct bufpool *p = &c->streams.pool;
	unsigned added = 0;

	if (c->now >= b->next_decay) {
		if (!b->dry && b->target > bufs_start(p))
			bufs_set_target(b, b->target / 2);
		b->dry = false;
		b->next_decay = deadline_add(c->now, BUFS_DECAY_NS);
	}
	/* io_uring_buf_ring_add's stores, the most recently freed first. */
	unsigned n = b->target - b->lent < p->nfree ? b->target - b->lent : p->nfree;
	unsigned mask = io_uring_buf_ring_mask(p->count), size = p->size;
	unsigned short tail = b->ring->tail;
	const uint16_t *top = p->free + p->nfree;
	for (; added < n; added++) {
		unsigned bid = *--top;
		struct io_uring_buf *e = &b->ring->bufs[(unsigned short)(tail + added) & mask];
		e->addr = (uint64_t)(uintptr_t)bufpool_at(p, bid);
		e->len = size;
		e->bid = (unsigned short)bid;
	}
	p->nfree -= n;
	io_uring_buf_ring_advance(b->ring, (int)added);
	b->lent += added;
}

/* The ring ran dry: lend the kernel more from now on, starting now (the
 * streams it starved go on with plain recvs until they re-arm). */
static __attribute__((noinline, cold)) void bufs_lend_more(struct core *c)
{
	struct uring_bufs *b = &uring_of(c)->bufs;

	b->dry = true;
	if (b->target < c->streams.pool.count)
		bufs_set_target(b, b->target * 2 < c->streams.pool.count ? b->target * 2
		                                                    : c->streams.pool.count);
	bufs_refill(c);
}

/* The ring, registered on the core's first stream that arms. False if the
 * pool or the ring cannot be had (a kernel before 5.19): plain recvs. */
static bool bufs_ready(struct core *c)
{
	struct uring_bufs *b = &uring_of(c)->bufs;
	struct bufpool *p = &c->streams.pool;

	if (b->ring || b->failed)
		return b->ring != NULL;
	b->failed = true;
	if (!runtime__bufpool_ready(c))
		return false;
	b->ring_bytes = p->count * sizeof(struct io_uring_buf);
	void *m = mmap(NULL, b->ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
	               -1, 0);
	struct io_uring_buf_reg reg = {
		.ring_addr = (uint64_t)(uintptr_t)m, .ring_entries = p->count, .bgid = 0,
	};
	if (m == MAP_FAILED || io_uring_register_buf_ring(&uring_of(c)->ring, &reg, 0) < 0) {
		if (m != MAP_FAILED)
			munmap(m, b->ring_bytes);
		return false;
	}
	b->ring = m;
	io_uring_buf_ring_init(b->ring);
	b->failed = false;
	bufs_set_target(b, bufs_start(p));
	b->next_decay = deadline_add(c->now, BUFS_DECAY_NS);
	bufs_refill(c);
	return true;
}

/* At the end of a run, after the drain: the kernel holds no buffer. */
static void bufs_free(struct core *c)
{
	struct uring_bufs *b = &uring_of(c)->bufs;

	if (b->ring) {
		io_uring_unregister_buf_ring(&uring_of(c)->ring, 0);
		munmap(b->ring, b->ring_bytes);
	}
	*b = (struct uring_bufs){ 0 };
}


/* ---------------------------------------------------- multishot requests */

/*
 * A receive stream's recv (into buffer group 0, the core's pool) or a
 * listener's accept, as one multishot SQE whose user_data is the struct
 * mshot (16-aligned) | TAG_MSHOT, with bit 3 set for the cancels aimed at
 * it. Stopping is the operations' cancel loop in small: a cancel can miss
 * a request between a wake-up and its re-arm, so one is sent again (after
 * runtime__cancel_backoff) until the terminal CQE comes.
 */
#define MSHOT_CANCEL_BIT 8u

_Static_assert(TAG_MASK < MSHOT_CANCEL_BIT, "the cancel bit is above the tag");

static void uring_mshot_arm(struct mshot *m)
{
	if (m->kind == MSHOT_RECV && !bufs_ready(m->core)) {
		runtime__mshot_deliver(m, -EOPNOTSUPP, 0); /* no ring: plain recvs */
		return;
	}
	struct io_uring_sqe *sqe = runtime__sqe(m->core);

	if (m->kind == MSHOT_RECV) {
		io_uring_prep_recv_multishot(sqe, m->fd, NULL, 0, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = 0;
	} else {
		io_uring_prep_multishot_accept(sqe, m->fd, NULL, NULL, m->flags);
	}
	if (runtime__fixed(m->core, m->fd))
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, tagged(m, TAG_MSHOT));
	m->armed = true;
	m->retries = 0;
}

static void mshot_cancel_send(struct mshot *m)
{
	if (!m->armed || m->cancel_in_flight || m->retry.state == TIMER_ARMED)
		return;
	struct io_uring_sqe *sqe = runtime__sqe(m->core);
	if (!m->armed) { /* taking the SQE reaped the terminal CQE */
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, TAG_IGNORE);
		return;
	}
	io_uring_prep_cancel64(sqe, tagged(m, TAG_MSHOT), 0);
	io_uring_sqe_set_data64(sqe, tagged(m, TAG_MSHOT) | MSHOT_CANCEL_BIT);
	m->cancel_in_flight = true;
	if (m->retries < UINT8_MAX)
		m->retries++;
}

static void mshot_retry_fire(struct timer *t, enum runtime_timer_why why)
{
	(void)why;
	mshot_cancel_send(container_of(t, struct mshot, retry));
}

/* Cancel until the terminal CQE. */
static void uring_mshot_stop(struct mshot *m)
{
	if (m->stopping)
		return;
	m->stopping = true;
	mshot_cancel_send(m);
}

static void mshot_cancel_cqe(struct mshot *m)
{
	m->cancel_in_flight = false;
	if (m->armed) {
		m->retry.fire = mshot_retry_fire;
		m->retry.on_shutdown = false;
		runtime__timer_start(m->core, &m->retry,
		                     deadline_add(runtime_now(), runtime__cancel_backoff(m->retries)));
	} else {
		runtime__mshot_quiet(m);
	}
}

static inline __attribute__((always_inline)) void mshot_cqe(uint64_t user_data, int res,
                                                            unsigned flags)
{
	struct mshot *m =
		(struct mshot *)(uintptr_t)(user_data & ~(uint64_t)(TAG_MASK | MSHOT_CANCEL_BIT));

	if (user_data & MSHOT_CANCEL_BIT) {
		mshot_cancel_cqe(m);
		return;
	}
	if (unlikely(res == -ENOBUFS) && m->kind == MSHOT_RECV)
		bufs_lend_more(m->core); /* the ring ran dry under it */
	runtime__mshot_deliver(m, res, flags);
}

/* ----------------------------------------------------------------- sleep */

/* Before the core blocks: make sure the kernel wakes it by the nearest
 * deadline. An armed timeout later than needed is replaced; one earlier
 * than needed (its timer was stopped) is left to fire spuriously, which
 * costs one loop turn and no SQEs now. A deadline of NEVER is not armed. */
static void timers_arm(struct core *c)
{
	struct uring_core *u = uring_of(c);
	uint64_t next = runtime__timers_next(c);

	if (next == NEVER || u->kt_deadline <= next)
		return;
	runtime__sqe_reserve(c, 2);
	if (u->kt_deadline != NEVER) {
		struct io_uring_sqe *rm = runtime__sqe(c);
		io_uring_prep_timeout_remove(rm, TAG_KTIMEOUT | u->kt_gen << TAG_BITS, 0);
		io_uring_sqe_set_data64(rm, TAG_IGNORE);
	}
	u->kt_gen++;
	u->kt_deadline = next;
	u->kt_ts.tv_sec = (long long)(next / 1000000000ull);
	u->kt_ts.tv_nsec = (long long)(next % 1000000000ull);
	struct io_uring_sqe *sqe = runtime__sqe(c);
	io_uring_prep_timeout(sqe, &u->kt_ts, 0, IORING_TIMEOUT_ABS);
	io_uring_sqe_set_data64(sqe, TAG_KTIMEOUT | u->kt_gen << TAG_BITS);
}

/* The armed timeout completed (fired or removed). */
static void ktimeout_cqe(struct core *c, uint64_t user_data)
{
	struct uring_core *u = uring_of(c);

	if (user_data >> TAG_BITS == u->kt_gen)
		u->kt_deadline = NEVER;
}

/* The nearest timer, and a read on the eventfd that other threads write
 * to wake the core (inbox.c). */
static void uring_prepare_sleep(struct core *c)
{
	timers_arm(c);
	if (!c->wake_armed) {
		struct io_uring_sqe *sqe = runtime__sqe(c);
		uint64_t *buf = &uring_of(c)->wake_buf;
		io_uring_prep_read(sqe, c->inbox.wake_fd, buf, sizeof(*buf), 0);
		io_uring_sqe_set_data64(sqe, tagged(c, TAG_WAKEUP));
		c->wake_armed = true;
	}
}

/* A read armed on the shutdown signalfd: not a fiber, so it never keeps
 * the runtime running by itself. */
static void uring_watch_signals(struct core *c)
{
	struct runtime *rt = c->rt;
	struct io_uring_sqe *sqe = runtime__sqe(c);
	io_uring_prep_read(sqe, rt->signal_fd, &rt->signal_buf, sizeof(rt->signal_buf), 0);
	io_uring_sqe_set_data64(sqe, tagged(c, TAG_SIGNAL));
	c->signal_armed = true;
}

/*
 * Before the core sleeps: spin for up to ns, submitting and peeking at
 * completions and at the inbox, without announcing the sleep (so producers
 * write no eventfd meanwhile). True if work came: the core then does not
 * block.
 */
static bool uring_busy_poll(struct core *c, uint64_t ns)
{
	struct io_uring *ring = &uring_of(c)->ring;
	uint64_t until = runtime_now() + ns;

	do {
		stat_add(&c->stats.enters, 1);
		io_uring_submit_and_get_events(ring);
		if (io_uring_cq_ready(ring) ||
		    atomic_load_explicit(&c->inbox.head, memory_order_relaxed))
			return true;
	} while (runtime_now() < until);
	return false;
}

/*
 * The loop's one trip to the kernel per turn: submit what the fibers
 * prepared and, if wait, block until at least one completion (the nearest
 * timer is armed as a timeout SQE, so this never sleeps past it). Then
 * dispatch every CQE. Returns 0 or -errno for a broken ring.
 */
static int uring_poll(struct core *c, bool wait)
{
	struct uring_core *u = uring_of(c);

	if (unlikely(u->bufs.lent < u->bufs.low)) /* down to half (0 < 0: no ring) */
		bufs_refill(c);
	for (;;) {
		stat_add(&c->stats.enters, 1);
		int rc = runtime__fault(FAULT_SUBMIT_BUSY) ? -EBUSY
		                                             : submit_and_wait(u, wait ? 1 : 0);
		if (likely(rc >= 0) || rc == -EINTR || rc == -ETIME)
			break;
		if (rc != -EBUSY && rc != -EAGAIN)
			return rc;
		if (!reap(c) && !wait)
			break; /* nothing to reap and no need to wait: try next turn */
		wait = false; /* reaped something: fibers have work */
	}
	u->turn_cqes = reap_all(c);
	/* Completions the CQ had no room for wait in the kernel (NODROP):
	 * a turn that leaves some behind is counted, a sign the CQ is small. */
	if (unlikely(IO_URING_READ_ONCE(*u->ring.sq.kflags) & IORING_SQ_CQ_OVERFLOW))
		stat_add(&c->stats.cq_overflows, 1);
	return 0;
}

const struct engine runtime__engine_uring = {
	.name = "io_uring",
	.id = RUNTIME_ENGINE_IO_URING,
	.core_start = uring_core_start,
	.core_stop = uring_core_stop,
	.io = uring_io,
	.prepare_sleep = uring_prepare_sleep,
	.poll = uring_poll,
	.busy_poll = uring_busy_poll,
	.watch_signals = uring_watch_signals,
	.mshot_arm = uring_mshot_arm,
	.mshot_stop = uring_mshot_stop,
	.fd_adopt = runtime__fixed_adopt,
};
