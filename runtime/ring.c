/* SPDX-License-Identifier: MIT */
/*
 * ring.c - one io_uring per core: feature probe, setup with fallbacks, SQE
 * reservation that never drops an operation, the per-turn submit-and-wait,
 * and CQE dispatch.
 *
 * Setup prefers SINGLE_ISSUER|DEFER_TASKRUN (completions are processed only
 * when this thread enters the kernel, with no IPIs), then COOP_TASKRUN,
 * then nothing; the choice is made once by runtime__ring_probe(). The CQ is
 * 4x the SQ and IORING_FEAT_NODROP is required, so a burst of completions
 * is never lost: the kernel backlogs them and submit answers -EBUSY until
 * they are reaped.
 *
 * CQE user_data is a pointer with a tag in its low 3 bits (enum cqe_tag).
 * CQEs are copied out in batches before they are dispatched, so a handler
 * that needs SQEs (and so may reap, to make room) never sees the CQ ring
 * half-consumed.
 */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Opcodes the runtime uses; all are in Linux 5.11 and later. */
static const uint8_t required_ops[] = {
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
 * -ENOSYS (no io_uring), -EOPNOTSUPP (no NODROP, or a needed opcode). */
int runtime__ring_probe(const struct runtime_config *cfg)
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
			return rc == -EPERM ? -ENOSYS : rc;
		rc = probe_ops(&ring);
		io_uring_queue_exit(&ring);
		return rc < 0 ? rc : (int)chain[i];
	}
	return rc;
}

/* On the core's own thread: SINGLE_ISSUER binds the ring to its creator. */
int runtime__ring_init(struct core *c)
{
	struct runtime *rt = c->rt;
	int rc = ring_setup(&c->ring, &rt->cfg, rt->setup_flags);

	if (rc < 0)
		return rc;
	/* An optimisation: a kernel without it runs unregistered. */
	if (rt->cfg.register_ring_fd)
		io_uring_register_ring_fd(&c->ring);
	if ((rc = runtime__fixed_ring_init(c)) < 0) {
		io_uring_queue_exit(&c->ring);
		return rc;
	}
	c->ring_ready = true;
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
	uint64_t until = runtime_now() + DRAIN_BOUND_NS;

	while (c->in_flight && runtime_now() < until) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
		if (sqe) {
			io_uring_prep_cancel(sqe, NULL, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
			io_uring_sqe_set_data64(sqe, TAG_IGNORE);
			c->in_flight++;
		}
		struct __kernel_timespec ts = { 0, DRAIN_WAIT_NS };
		struct io_uring_cqe *cqe;
		io_uring_submit_and_wait_timeout(&c->ring, &cqe, 1, &ts, NULL);
		unsigned head, n = 0;
		io_uring_for_each_cqe(&c->ring, head, cqe) {
			n++;
			if (!(cqe->flags & IORING_CQE_F_MORE))
				c->in_flight--;
		}
		io_uring_cq_advance(&c->ring, n);
	}
}

void runtime__ring_exit(struct core *c)
{
	drain(c);
	runtime__mshots_free(c);
	runtime__bufpool_free(c);
	runtime__fixed_ring_exit(c);
	io_uring_queue_exit(&c->ring);
	c->ring_ready = false;
}

/* ---------------------------------------------------------------- reap */

struct cqe_copy {
	uint64_t user_data;
	int32_t res;
	uint32_t flags;
};

static void dispatch(struct core *c, const struct cqe_copy *e)
{
	void *ptr = (void *)(uintptr_t)(e->user_data & ~TAG_MASK);

	switch ((enum cqe_tag)(e->user_data & TAG_MASK)) {
	case TAG_OP:
	case TAG_CANCEL:
		runtime__op_cqe(c, ptr, (enum cqe_tag)(e->user_data & TAG_MASK), e->res);
		break;
	case TAG_KTIMEOUT:
		runtime__ktimeout_cqe(c, e->user_data);
		break;
	case TAG_WAKEUP:
		runtime__wakeup_cqe(c);
		break;
	case TAG_SIGNAL:
		c->signal_armed = false;
		if (e->res > 0)
			runtime_shutdown(c->rt);
		break;
	case TAG_MSHOT:
		runtime__mshot_cqe(c, e->user_data, e->res, e->flags);
		break;
	case TAG_IGNORE:
	default:
		break;
	}
}

#define REAP_BATCH 64

/* Dispatch every CQE that has arrived. Returns how many. */
static unsigned reap(struct core *c)
{
	struct cqe_copy batch[REAP_BATCH];
	unsigned total = 0;

	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		io_uring_for_each_cqe(&c->ring, head, cqe) {
			batch[n].user_data = cqe->user_data;
			batch[n].res = cqe->res;
			batch[n].flags = cqe->flags;
			/* A multishot's CQEs but its last leave it in flight. */
			c->in_flight -= !(cqe->flags & IORING_CQE_F_MORE);
			if (++n == REAP_BATCH)
				break;
		}
		if (!n)
			return total;
		io_uring_cq_advance(&c->ring, n);
		stat_add(&c->stats.cqes, n);
		for (unsigned i = 0; i < n; i++)
			dispatch(c, &batch[i]);
		total += n;
	}
}

/* ---------------------------------------------------------------- submit */

/* The SQ is full: hand it to the kernel. -EBUSY/-EAGAIN mean the kernel
 * holds back completions (or lacks memory) until some are reaped. */
static void sq_make_room(struct core *c)
{
	stat_add(&c->stats.enters, 1);
	int rc = runtime__fault(FAULT_SUBMIT_BUSY) ? -EAGAIN : io_uring_submit(&c->ring);

	if (rc == -EBUSY || rc == -EAGAIN || rc == -EINTR)
		reap(c);
	else if (rc < 0)
		abort(); /* the ring itself is broken: nothing can be relied on */
	if (c->rt->setup_flags & IORING_SETUP_SQPOLL)
		io_uring_sqring_wait(&c->ring);
}

struct io_uring_sqe *runtime__sqe(struct core *c)
{
	struct io_uring_sqe *sqe;

	while (runtime__fault(FAULT_NO_SQE) || !(sqe = io_uring_get_sqe(&c->ring)))
		sq_make_room(c);
	c->in_flight++;
	stat_add(&c->stats.sqes, 1);
	return sqe;
}

/* Make room for n SQEs, so a linked pair is never split by a full ring. */
void runtime__sqe_reserve(struct core *c, unsigned n)
{
	while (io_uring_sq_space_left(&c->ring) < n)
		sq_make_room(c);
}

/*
 * Before the core sleeps: spin for up to busy_poll_us, submitting and
 * peeking at completions and at the inbox, without announcing the sleep
 * (so producers write no eventfd meanwhile). True if work came: the core
 * then does not block. Costs a CPU while idle; off by default (README).
 */
bool runtime__busy_poll(struct core *c)
{
	uint64_t until = runtime_now() + (uint64_t)c->rt->cfg.busy_poll_us * 1000;

	do {
		stat_add(&c->stats.enters, 1);
		io_uring_submit_and_get_events(&c->ring);
		if (io_uring_cq_ready(&c->ring) ||
		    atomic_load_explicit(&c->inbox, memory_order_relaxed))
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
int runtime__ring_enter(struct core *c, bool wait)
{
	for (;;) {
		stat_add(&c->stats.enters, 1);
		int rc = runtime__fault(FAULT_SUBMIT_BUSY) ? -EBUSY
		                                             : io_uring_submit_and_wait(&c->ring, wait ? 1 : 0);
		if (rc >= 0 || rc == -EINTR || rc == -ETIME)
			break;
		if (rc != -EBUSY && rc != -EAGAIN)
			return rc;
		if (!reap(c) && !wait)
			break; /* nothing to reap and no need to wait: try next turn */
		wait = false; /* reaped something: fibers have work */
	}
	reap(c);
	return 0;
}
