/* SPDX-License-Identifier: MIT */
/*
 * group.c - fiber groups (as Go's errgroup): fibers spawned into a group
 * run on its core, the group can be cancelled as one, and a wait returns
 * once every member has ended, with the first nonzero result a member
 * returned (first in time). With RUNTIME_GROUP_CANCEL_ON_ERROR that first
 * failure cancels the rest, so that one failed part of a request stops
 * the others.
 *
 * A group belongs to the core that created it, and every member runs
 * there: its list of members, first result and cancel state are touched
 * by that core alone and need no lock. Only the live count is read from
 * other threads (runtime_group_live). Waiting is a wait group's
 * (sync.c), so a group wait has the deadline, cancel and cleanup rules of
 * every other sync wait. Each member costs one small allocation beside
 * its fiber: the record that lets a cancel reach it before it has run.
 */
#include "core.h"

#include <stdlib.h>

struct member {
	struct dnode link;          /* in the group's members */
	struct runtime_group *group;
	struct fiber *fiber;
	int (*fn)(void *);
	void *arg;
};

struct runtime_group {
	struct core *core;          /* the creator's: every call but live */
	unsigned flags;
	bool cancelled;             /* later spawns are refused */
	int first;                  /* the first nonzero member result */
	unsigned waiters;           /* fibers in runtime_group_wait */
	_Atomic unsigned live;      /* members spawned and not ended */
	struct dlist members;
	struct runtime_waitgroup wg;/* counts live members: what waits wait on */
};

/* Is the calling thread g's core? 0, or the error for fn (misuse). */
static int on_group_core(const struct runtime_group *g, const char *fn)
{
	if (!g)
		return -EINVAL;
	if (this_core() != g->core)
		return runtime__misuse(-EPERM, fn, MISUSE_OTHER_CORE);
	return 0;
}

int runtime_group_create(struct runtime_group **out, unsigned flags)
{
	struct core *c = this_core();

	if (!c)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_CORE);
	if (!out || (flags & ~RUNTIME_GROUP_CANCEL_ON_ERROR))
		return -EINVAL;
	struct runtime_group *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->core = c;
	g->flags = flags;
	dlist_init(&g->members);
	*out = g;
	return 0;
}

int runtime_group_destroy(struct runtime_group *g)
{
	if (!g)
		return 0;
	int rc = on_group_core(g, __func__);
	if (rc)
		return rc;
	if (atomic_load_explicit(&g->live, memory_order_relaxed) || g->waiters)
		return -EBUSY;
	free(g);
	return 0;
}

/* Cancel every live member (also those that have not run yet). */
static void cancel_members(struct runtime_group *g)
{
	g->cancelled = true;
	dlist_for_each(n, &g->members)
		runtime__fiber_cancel(container_of(n, struct member, link)->fiber);
}

/* A member's end, on its own fiber: its result, then its count. The wait
 * group goes last: once it is done, a waiter may destroy the group. */
static void member_end(struct member *m, int rc)
{
	struct runtime_group *g = m->group;

	dlist_remove(&m->link);
	free(m);
	if (rc && !g->first) {
		g->first = rc;
		if (g->flags & RUNTIME_GROUP_CANCEL_ON_ERROR)
			cancel_members(g);
	}
	atomic_store_explicit(&g->live, atomic_load_explicit(&g->live, memory_order_relaxed) - 1,
	                      memory_order_relaxed);
	runtime_waitgroup_done(&g->wg);
}

static void member_main(void *arg)
{
	struct member *m = arg;

	member_end(m, m->fn(m->arg));
}

int runtime_group_spawn(struct runtime_group *g, int (*fn)(void *), void *arg)
{
	int rc = on_group_core(g, __func__);

	if (rc)
		return rc;
	if (!fn)
		return -EINVAL;
	if (g->cancelled)
		return -ECANCELED;
	if (runtime__is_shutting_down(g->core->rt))
		return -ESHUTDOWN;
	struct member *m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	*m = (struct member){ .group = g, .fn = fn, .arg = arg };
	rc = runtime__fiber_spawn_local(g->core, member_main, m, &m->fiber);
	if (rc < 0) {
		free(m);
		return rc;
	}
	dlist_push_back(&g->members, &m->link);
	atomic_store_explicit(&g->live, atomic_load_explicit(&g->live, memory_order_relaxed) + 1,
	                      memory_order_relaxed);
	runtime_waitgroup_add(&g->wg, 1);
	return 0;
}

int runtime_group_cancel(struct runtime_group *g)
{
	int rc = on_group_core(g, __func__);

	if (rc)
		return rc;
	cancel_members(g);
	return 0;
}

/* Is f one of g's members? (It would wait for itself.) */
static bool is_member(struct runtime_group *g, const struct fiber *f)
{
	dlist_for_each(n, &g->members)
		if (container_of(n, struct member, link)->fiber == f)
			return true;
	return false;
}

int runtime_group_wait(struct runtime_group *g, int64_t timeout_ns, int *result)
{
	struct fiber *f = this_fiber();

	if (!f)
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	int rc = on_group_core(g, __func__);
	if (rc)
		return rc;
	if (is_member(g, f))
		return runtime__misuse(-EDEADLK, __func__, "a member waits for its own group");
	g->waiters++;
	rc = runtime_waitgroup_wait(&g->wg, timeout_ns);
	g->waiters--;
	if (rc == 0 && result)
		*result = g->first;
	return rc;
}

unsigned runtime_group_live(const struct runtime_group *g)
{
	if (!g)
		return (unsigned)runtime__misuse(0, "runtime_group_live", "NULL group");
	return atomic_load_explicit(&g->live, memory_order_relaxed);
}
