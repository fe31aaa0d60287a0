/* SPDX-License-Identifier: MIT */
/*
 * multishot.c - a multishot request owned by an object that outlives any
 * one call: a receive stream (stream.c: a recv into the core's buffer
 * pool) or a listener (listener.c: an accept). The request keeps
 * producing results while the owner's fibers do other things; the owner
 * queues what they carry, and a fiber that finds its queue empty waits
 * for the next.
 *
 * What is shared is the lifecycle; the engine arms and stops the request
 * (io_uring: one SQE with IORING_RECV_MULTISHOT or a multishot accept,
 * stopped by ASYNC_CANCEL; epoll: the fd watched edge-triggered, read or
 * accepted from at each readiness, stopped at once). A request ends with
 * its terminal result (no MSHOT_F_MORE): the object may be freed only
 * after that, and - on io_uring - after every cancel aimed at it has come
 * back, since their user_data name it. Closing never waits: the object is
 * freed when it falls quiet, or at the end of the run, after the engine
 * has left nothing in the kernel (runtime__mshots_free).
 */
#include "core.h"
#include "engine/engine.h"

void runtime__mshot_init(struct mshot *m, struct core *c, int fd, enum mshot_kind kind,
                         int flags, const struct mshot_ops *ops)
{
	*m = (struct mshot){ .core = c, .fd = fd, .kind = (uint8_t)kind, .flags = flags,
	                     .ops = ops };
	dlist_push_back(&c->streams.mshots, &m->link);
}

void runtime__mshot_arm(struct mshot *m)
{
	m->core->eng->mshot_arm(m);
}

/* Stop the request (if armed): no more results once it is quiet. */
void runtime__mshot_stop(struct mshot *m)
{
	if (m->armed)
		m->core->eng->mshot_stop(m);
}

static void release(struct mshot *m)
{
	runtime__timer_stop(&m->retry);
	dlist_remove(&m->link);
	m->ops->release(m);
}

/* The engine: nothing of m's is in flight any more. Free it if closed. */
void runtime__mshot_quiet(struct mshot *m)
{
	if (m->closed && !m->armed && !m->cancel_in_flight)
		release(m);
}

/* The owner is done with m: free it once nothing names it any more. */
void runtime__mshot_close(struct mshot *m)
{
	m->closed = true;
	runtime__mshot_stop(m);
	runtime__mshot_quiet(m);
}

/* Wait (fiber f, m's core, m armed) for m's next result, the deadline
 * (the fiber's, or an earlier one of the call's) or a cancel. Returns 0,
 * -ETIMEDOUT, -ECANCELED. Without a deadline no timer is needed (it would
 * cost a heap push and pop per wait): the armed request is in flight, so
 * the core cannot take the wait for a deadlock. */
int runtime__mshot_wait(struct mshot *m, struct fiber *f, uint64_t deadline)
{
	int rc;

	m->waiter = f;
	if (deadline == NEVER)
		rc = runtime__suspend(f->core, BLOCK_STREAM, NULL, m);
	else
		rc = runtime__suspend_until(f->core, BLOCK_STREAM, NULL, m, deadline, -ETIMEDOUT);
	m->waiter = NULL;
	return rc;
}

/* Stop m's request and wait (fiber f, m's core, no other waiter) until
 * its terminal result has come: then nothing of m's is in the kernel, and
 * what the request brought is queued by its owner. Returns 0, or the
 * wait's -ETIMEDOUT (deadline) or -ECANCELED: m may still be armed then. */
int runtime__mshot_quiesce(struct mshot *m, struct fiber *f, uint64_t deadline)
{
	runtime__mshot_stop(m);
	while (m->armed) {
		int rc = runtime__mshot_wait(m, f, deadline);
		if (rc < 0 && m->armed)
			return rc;
	}
	return 0;
}

/* One result of m's request: the lifecycle's part, the owner's
 * (ops->cqe), then the waiting fiber resumed. */
void runtime__mshot_result(struct mshot *m, int res, unsigned flags)
{
	bool last = !(flags & MSHOT_F_MORE);

	if (last) {
		m->armed = false;
		m->stopping = false;
		runtime__timer_stop(&m->retry);
	}
	m->ops->cqe(m, res, flags);
	if (m->closed) {
		if (last)
			runtime__mshot_quiet(m); /* else at the cancel's CQE */
		return;
	}
	if (m->waiter)
		runtime__resume(m->waiter, 0);
}

/* One result of m's request, from its engine. A receive stream's go by
 * stream.c first, whose fast way takes the common one (a waiting reader's
 * bytes) and gives it the same effects, short of the calls (a tail call
 * here, and none of ops->cqe). */
void runtime__mshot_deliver(struct mshot *m, int res, unsigned flags)
{
	if (likely(m->kind == MSHOT_RECV))
		runtime__stream_deliver(m, res, flags);
	else
		runtime__mshot_result(m, res, flags);
}

/* After the engine's core_stop: no result will come for any. */
void runtime__mshots_free(struct core *c)
{
	while (!dlist_empty(&c->streams.mshots))
		release(container_of(dlist_first(&c->streams.mshots), struct mshot, link));
}
