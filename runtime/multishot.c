/* SPDX-License-Identifier: MIT */
/*
 * multishot.c - a multishot request owned by an object that outlives any
 * one call: a receive stream (stream.c: IORING_RECV_MULTISHOT) or a
 * listener (listener.c: multishot accept). The request keeps producing
 * CQEs while the owner's fibers do other things; the owner queues what
 * they carry, and a fiber that finds its queue empty waits for the next.
 *
 * What is shared is the lifecycle. A multishot is armed by one SQE and
 * ends with its terminal CQE (no IORING_CQE_F_MORE): the object may be
 * freed only after that, and after every ASYNC_CANCEL aimed at it has come
 * back, since their user_data name it. Stopping is io.c's cancel loop in
 * small: a cancel can miss a request between a wake-up and its re-arm, so
 * one is sent again (after runtime__cancel_backoff) until the terminal CQE
 * comes. Closing never waits: the object is freed when it falls quiet, or
 * at the end of the run, after the ring drain (runtime__mshots_free).
 *
 * user_data: the object (16-aligned) | TAG_MSHOT, bit 3 set for cancels.
 */
#include "internal.h"

#define CANCEL_BIT 8u

_Static_assert(TAG_MASK < CANCEL_BIT, "the cancel bit is above the tag");

void runtime__mshot_init(struct mshot *m, struct core *c, int fd, const struct mshot_ops *ops)
{
	*m = (struct mshot){ .core = c, .fd = fd, .ops = ops };
	dlist_push_back(&c->mshots, &m->link);
}

/* Arm the request prepared in sqe (from runtime__sqe on m's core). */
void runtime__mshot_submit(struct mshot *m, struct io_uring_sqe *sqe)
{
	if (runtime__fixed(m->core, m->fd))
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, tagged(m, TAG_MSHOT));
	m->armed = true;
	m->retries = 0;
}

static void cancel_send(struct mshot *m)
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
	io_uring_sqe_set_data64(sqe, tagged(m, TAG_MSHOT) | CANCEL_BIT);
	m->cancel_in_flight = true;
	if (m->retries < UINT8_MAX)
		m->retries++;
}

static void retry_fire(struct timer *t, enum runtime_timer_why why)
{
	(void)why;
	cancel_send(container_of(t, struct mshot, retry));
}

/* Stop the request (if armed): cancel until its terminal CQE. */
void runtime__mshot_stop(struct mshot *m)
{
	if (!m->armed || m->stopping)
		return;
	m->stopping = true;
	cancel_send(m);
}

static void release(struct mshot *m)
{
	runtime__timer_stop(&m->retry);
	dlist_remove(&m->link);
	m->ops->release(m);
}

/* The owner is done with m: free it once nothing names it any more. */
void runtime__mshot_close(struct mshot *m)
{
	m->closed = true;
	if (m->armed)
		runtime__mshot_stop(m);
	else if (!m->cancel_in_flight)
		release(m);
}

/* Wait (fiber f, m's core, m armed) for m's next CQE, the fiber's deadline
 * or a cancel. Returns 0, -ETIMEDOUT, -ECANCELED. Without a deadline no
 * timer is needed (it would cost a heap push and pop per wait): the armed
 * request is in flight, so the core cannot take the wait for a deadlock. */
int runtime__mshot_wait(struct mshot *m, struct fiber *f)
{
	int rc;

	m->waiter = f;
	if (f->deadline == NEVER)
		rc = runtime__suspend(f->core, BLOCK_STREAM, NULL, m);
	else
		rc = runtime__suspend_until(f->core, BLOCK_STREAM, NULL, m, f->deadline, -ETIMEDOUT);
	m->waiter = NULL;
	return rc;
}

static void request_cqe(struct mshot *m, int res, unsigned flags)
{
	bool last = !(flags & IORING_CQE_F_MORE);

	if (last) {
		m->armed = false;
		m->stopping = false;
		runtime__timer_stop(&m->retry);
	}
	m->ops->cqe(m, res, flags);
	if (m->closed) {
		if (last && !m->cancel_in_flight) /* else at the cancel's CQE */
			release(m);
		return;
	}
	if (m->waiter)
		runtime__resume(m->waiter, 0);
}

static void cancel_cqe(struct mshot *m)
{
	m->cancel_in_flight = false;
	if (m->armed) {
		m->retry.fire = retry_fire;
		m->retry.on_shutdown = false;
		runtime__timer_start(m->core, &m->retry,
		                     deadline_add(runtime_now(), runtime__cancel_backoff(m->retries)));
	} else if (m->closed) {
		release(m);
	}
}

void runtime__mshot_cqe(struct core *c, uint64_t user_data, int res, unsigned flags)
{
	struct mshot *m = (struct mshot *)(uintptr_t)(user_data & ~(uint64_t)(TAG_MASK | CANCEL_BIT));

	(void)c;
	if (user_data & CANCEL_BIT)
		cancel_cqe(m);
	else
		request_cqe(m, res, flags);
}

/* After the ring drain at the end of a run: no CQE will come for any. */
void runtime__mshots_free(struct core *c)
{
	while (!dlist_empty(&c->mshots))
		release(container_of(dlist_first(&c->mshots), struct mshot, link));
}
