/* SPDX-License-Identifier: MIT */
/*
 * runtime_toolkit.h - the toolkit: what a service needs between the core
 * calls of <runtime.h> and its own logic, so that it does not write it by
 * hand: buffered reading and writing over a small transport interface
 * (a socket, a receive stream, later TLS), copying between connections,
 * connections with read and write deadlines, serving on every core,
 * graceful drain and rate limiting. Included by <runtime.h>; built into
 * libruntime from toolkit/, using only the core's public calls.
 *
 * The conventions of <runtime.h> hold here: errors are -errno, calls
 * that wait need fiber context, and each call states its threads, errors
 * and races.
 */
#ifndef RUNTIME_TOOLKIT_H
#define RUNTIME_TOOLKIT_H

#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------- rate limits */

/*
 * A rate limiter (a token bucket): tokens come back at rate per second, up
 * to burst at once, and a bucket starts full. One limiter may be shared by
 * fibers and threads of every core (no lock is held across a wait), and
 * it arms no timer: it refills on demand from runtime_now(). Waiters are
 * served in arrival order: a take that must wait reserves its tokens at
 * once (the bucket goes into debt) and sleeps until its reservation is
 * due, so later takes and tries queue behind it; one that is cancelled, or
 * whose deadline passes, gives back what of its reservation no later one
 * was made on top of.
 */
struct runtime_ratelimit; /* opaque */

/* rate: tokens per second, 0.001 to 10^12 (a fraction: e.g. 1/60.0 is one
 * a minute); burst >= 1. Any thread. Returns 0, -EINVAL or -ENOMEM. */
RUNTIME_API int runtime_ratelimit_create(struct runtime_ratelimit **rl, double rate,
                                         unsigned burst);

/* Free it: 0 (also for NULL), or -EBUSY while fibers wait in take (it
 * stays). As for the sync objects, every thread's call must have returned
 * before it is freed. */
RUNTIME_API int runtime_ratelimit_destroy(struct runtime_ratelimit *rl);

/* Take n tokens if they are there now and nobody waits before the
 * caller, else -EAGAIN (nothing taken). n 0 takes nothing. Any thread.
 * Returns 0, -EAGAIN, -EINVAL (NULL, n > burst). */
RUNTIME_API int runtime_ratelimit_try_take(struct runtime_ratelimit *rl, unsigned n);

/*
 * Take n tokens, waiting for them if need be: at most timeout_ns (negative:
 * no limit but the fiber's deadline). A wait that would outlast the
 * timeout or the fiber's deadline fails at once with -ETIMEDOUT, taking
 * nothing. Tokens there now are taken even by a cancelled fiber or one
 * past its deadline. Fiber context. Returns 0, -ETIMEDOUT, -ECANCELED (its
 * reservation given back), -EINVAL (NULL, n > burst: it could never
 * fit), -EPERM (not a fiber).
 */
RUNTIME_API int runtime_ratelimit_take(struct runtime_ratelimit *rl, unsigned n,
                                       int64_t timeout_ns);

/* Whole tokens there now (burst at most); negative while waiters have
 * reserved beyond the bucket: what they owe. Any thread; a snapshot. NULL:
 * 0. */
RUNTIME_API int64_t runtime_ratelimit_available(const struct runtime_ratelimit *rl);

#ifdef __cplusplus
}
#endif
#endif /* RUNTIME_TOOLKIT_H */
