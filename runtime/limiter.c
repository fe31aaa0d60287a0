/* SPDX-License-Identifier: MIT */
/*
 * limiter.c - the task limiter (seed 000's TaskLimiter): at most n fibers
 * spawned through it run at once. It is a semaphore of n slots
 * (sem.c): a spawn takes one, waiting or refused as the caller asks, and
 * the fiber gives it back as it ends (its on_exit hook), whatever ends
 * it.
 */
#include "core.h"

#include <stdlib.h>

struct runtime_limiter {
	struct runtime_sem *slots;
};

int runtime_limiter_create(struct runtime_limiter **lim, unsigned n)
{
	if (!lim || n == 0)
		return -EINVAL;
	struct runtime_limiter *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	int rc = runtime_sem_create(&l->slots, n, 0);
	if (rc < 0) {
		free(l);
		return rc;
	}
	*lim = l;
	return 0;
}

int runtime_limiter_destroy(struct runtime_limiter *l)
{
	if (!l)
		return 0;
	struct runtime_sem_stats st;
	runtime_sem_stats(l->slots, &st);
	if (st.in_use || st.waiting)
		return -EBUSY;
	runtime_sem_destroy(l->slots);
	free(l);
	return 0;
}

static void slot_back(void *ctx)
{
	runtime_sem_post(ctx, NULL);
}

static int limited_spawn(struct runtime_limiter *l, void (*fn)(void *), void *arg)
{
	int rc = runtime__fiber_spawn_with_exit(this_core(), fn, arg, slot_back, l->slots);
	if (rc < 0)
		runtime_sem_post(l->slots, NULL);
	return rc;
}

/* What both limiter spawns refuse before taking a slot (caller: its name,
 * for a misuse report). */
static int limiter_spawn_check(const struct runtime_limiter *l, void (*fn)(void *),
                               const char *caller)
{
	if (!this_fiber())
		return runtime__misuse(-EPERM, caller, MISUSE_OUTSIDE_FIBER);
	if (!l || !fn)
		return -EINVAL;
	if (runtime__is_shutting_down(this_core()->rt))
		return -ESHUTDOWN;
	return 0;
}

int runtime_limiter_spawn(struct runtime_limiter *l, void (*fn)(void *), void *arg,
                          int64_t timeout_ns)
{
	int rc = limiter_spawn_check(l, fn, __func__);

	if (!rc)
		rc = runtime_sem_get(l->slots, NULL, timeout_ns);
	return rc ? rc : limited_spawn(l, fn, arg);
}

int runtime_limiter_try_spawn(struct runtime_limiter *l, void (*fn)(void *), void *arg)
{
	int rc = limiter_spawn_check(l, fn, __func__);

	if (!rc)
		rc = runtime_sem_try_get(l->slots, NULL);
	return rc ? rc : limited_spawn(l, fn, arg);
}

unsigned runtime_limiter_in_flight(const struct runtime_limiter *l)
{
	struct runtime_sem_stats st;

	if (!l)
		return (unsigned)runtime__misuse(0, "runtime_limiter_in_flight", "NULL limiter");
	runtime_sem_stats(l->slots, &st);
	return st.in_use;
}
