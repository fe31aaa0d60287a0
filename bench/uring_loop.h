/* SPDX-License-Identifier: MIT */
/*
 * uring_loop.h - the io_uring plumbing the two raw floors (raw_uring_echo,
 * raw_uring_http) share, as static functions: the strongest ring setup the
 * kernel accepts, SQEs that are never NULL, user_data tags, the loop of one
 * io_uring_submit_and_wait() per turn, and a shutdown that cancels and
 * reaps every request. The includer includes echo_server_common.h (for
 * die()) first and embeds a struct uring_loop in its server.
 */
#ifndef URING_LOOP_H
#define URING_LOOP_H

#include <errno.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

struct uring_loop {
	struct io_uring ring;
	unsigned inflight;          /* SQEs queued whose CQE is not reaped */
};

/* Called for each CQE with the includer's context. */
typedef void uring_dispatch_fn(void *ctx, uint64_t user_data, int res);

static bool uring_fatal(int ret)
{
	return ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY;
}

/* SQ full: flush what is queued and try again.  Never returns NULL. */
static struct io_uring_sqe *get_sqe(struct uring_loop *l)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&l->ring))) {
		int ret = io_uring_submit(&l->ring);

		if (uring_fatal(ret))
			die("io_uring_submit", -ret);
	}
	l->inflight++;
	return sqe;
}

/* user_data: a pointer with the operation kind in its low bits. */
static void tag(struct io_uring_sqe *sqe, void *ptr, unsigned op)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)ptr | op);
}

static const struct ring_mode {
	const char *name;
	unsigned flags;
} ring_modes[] = {
	{ "defer", IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN },
	{ "coop", IORING_SETUP_COOP_TASKRUN },
	{ "none", 0 },
};
#define N_RING_MODES (sizeof ring_modes / sizeof ring_modes[0])

/* Strongest setup this kernel accepts, or only `only` if it is not NULL:
 * DEFER_TASKRUN runs completions only inside our own io_uring_enter();
 * COOP_TASKRUN at least spares us the IPI for each completion. */
static const char *ring_init(struct io_uring *ring, unsigned entries, const char *only)
{
	int ret = -EINVAL;

	for (size_t i = 0; i < N_RING_MODES; i++) {
		if (only && strcmp(only, ring_modes[i].name))
			continue;
		ret = io_uring_queue_init(entries, ring, ring_modes[i].flags);
		if (ret == 0)
			return ring_modes[i].name;
	}
	die("io_uring_queue_init", -ret);
}

static bool known_setup(const char *name)
{
	for (size_t i = 0; i < N_RING_MODES; i++)
		if (!strcmp(name, ring_modes[i].name))
			return true;
	return false;
}

/* Each CQE is marked seen before it is handled, so a get_sqe() that has to
 * submit mid-batch always finds the CQ drained up to that point. */
static void reap(struct uring_loop *l, uring_dispatch_fn *dispatch, void *ctx)
{
	struct io_uring_cqe *cqe;
	unsigned head;

	io_uring_for_each_cqe(&l->ring, head, cqe) {
		uint64_t ud = cqe->user_data;
		int res = cqe->res;

		io_uring_cqe_seen(&l->ring, cqe);
		l->inflight--;
		dispatch(ctx, ud, res);
	}
}

/* One submit-and-wait per turn until *stop. */
static void uring_run(struct uring_loop *l, const int *stop, uring_dispatch_fn *dispatch,
                      void *ctx)
{
	while (!*stop) {
		int ret = io_uring_submit_and_wait(&l->ring, 1);

		if (uring_fatal(ret))
			die("io_uring_submit_and_wait", -ret);
		reap(l, dispatch, ctx);
	}
}

/* Cancels every op (cancel_tag: the user_data of the cancel itself) and
 * reaps them all, so no request still holds a socket when we close it:
 * io_uring_queue_exit() alone cancels asynchronously, and the listener
 * could then outlive the process for a moment and make an immediate
 * restart on the same port fail with EADDRINUSE.  Kernels without
 * IORING_ASYNC_CANCEL_ANY (< 5.19) fail the cancel and skip the wait.
 * The ring is freed after. */
static void uring_shutdown(struct uring_loop *l, uint64_t cancel_tag)
{
	struct io_uring_sqe *sqe = get_sqe(l);

	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
	io_uring_sqe_set_data64(sqe, cancel_tag);
	while (l->inflight) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		int unsupported = 0;
		int ret = io_uring_submit_and_wait(&l->ring, 1);

		if (uring_fatal(ret))
			break;
		io_uring_for_each_cqe(&l->ring, head, cqe) {
			n++;
			unsupported |= cqe->user_data == cancel_tag && cqe->res == -EINVAL;
		}
		io_uring_cq_advance(&l->ring, n);
		l->inflight -= n;
		if (unsupported)
			break;
	}
	io_uring_queue_exit(&l->ring);
}

#endif
