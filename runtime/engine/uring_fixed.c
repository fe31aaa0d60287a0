/* SPDX-License-Identifier: MIT */
/*
 * uring_fixed.c - fixed files (runtime_config.fixed_files): a socket registered
 * in its core's ring is used without the kernel's per-operation fd lookup.
 * Slot N of a core's table holds fd N, so no mapping is kept per core.
 *
 * The danger is the fd number: while a ring's table holds a file, closing
 * the number does not close the file, and the kernel hands the number to
 * the next socket. So one process-wide table says which core holds each
 * number, and runtime_close releases the registration - on whichever core
 * holds it, through that core's inbox - before the number is closed:
 *  - on the holding core itself, directly;
 *  - from a fiber on another core (of any runtime), the fiber waits for the
 *    holder to release it, then closes;
 *  - from any other thread, the holder releases and closes it (the call
 *    returns at once: the number stays taken until then).
 * Only the holding core's thread registers or releases its entries; a
 * ring's teardown drops its whole table, and its entries with it.
 */
#include "uring.h"

#include <stdlib.h>
#include <unistd.h>

#define FIXED_FILES_MAX 16384u

/* fd -> the core whose ring has it registered, or NULL. */
static _Atomic(struct core *) holder[FIXED_FILES_MAX];

struct fd_release {
	struct inbox_node node;
	int fd;
	struct fiber *waiter; /* NULL: the holder closes fd too */
};

static bool in_range(int fd)
{
	return fd >= 0 && (unsigned)fd < FIXED_FILES_MAX;
}

/* An optimisation: a kernel without it runs unregistered. */
void runtime__fixed_ring_init(struct core *c)
{
	struct uring_core *u = uring_of(c);

	if (c->rt->cfg.fixed_files && io_uring_register_files_sparse(&u->ring, FIXED_FILES_MAX) == 0)
		u->fixed_ready = true;
}

/* The ring is going: its table, and every entry naming this core, too. */
void runtime__fixed_ring_exit(struct core *c)
{
	if (!uring_of(c)->fixed_ready)
		return;
	for (unsigned fd = 0; fd < FIXED_FILES_MAX; fd++)
		if (atomic_load_explicit(&holder[fd], memory_order_relaxed) == c)
			atomic_store_explicit(&holder[fd], NULL, memory_order_release);
	uring_of(c)->fixed_ready = false;
}

bool runtime__fixed(const struct core *c, int fd)
{
	return uring_of(c)->fixed_ready && in_range(fd) &&
	       atomic_load_explicit(&holder[fd], memory_order_relaxed) == c;
}

int runtime_fd_register(int fd)
{
	struct core *c = this_core();

	if (!c || !this_fiber())
		return -EPERM;
	if (fd < 0)
		return -EBADF;
	if (c->eng != &runtime__engine_uring || !uring_of(c)->fixed_ready)
		return -EOPNOTSUPP;
	if (!in_range(fd))
		return -ENOSPC;
	struct core *cur = NULL;
	if (!atomic_compare_exchange_strong(&holder[fd], &cur, c))
		return cur == c ? 0 : -EBUSY;
	int rc = io_uring_register_files_update(&uring_of(c)->ring, (unsigned)fd, &fd, 1);
	if (rc < 0) {
		atomic_store(&holder[fd], NULL);
		return rc;
	}
	return 0;
}

void runtime__fixed_adopt(struct core *c, int fd)
{
	if (!uring_of(c)->fixed_ready)
		return;
	runtime__fixed_release(fd);
	runtime_fd_register(fd); /* best effort: a plain fd works too */
}

static void unregister_here(struct core *c, int fd)
{
	int none = -1;

	io_uring_register_files_update(&uring_of(c)->ring, (unsigned)fd, &none, 1);
	atomic_store_explicit(&holder[fd], NULL, memory_order_release);
}

/* Inbox, on the holding core (or one that held it: the ring may have been
 * torn down and set up again since). */
static int release_arrived(struct core *c, struct inbox_node *n)
{
	struct fd_release *req = container_of(n, struct fd_release, node);

	if (atomic_load(&holder[req->fd]) == c)
		unregister_here(c, req->fd);
	if (req->waiter) {
		runtime__resume_from_anywhere(req->waiter, 0);
		return 0;
	}
	struct io_uring_sqe *sqe = runtime__sqe(c);
	io_uring_prep_close(sqe, req->fd);
	io_uring_sqe_set_data64(sqe, TAG_IGNORE);
	free(req);
	return 0;
}

/* runtime_destroy: a close handed over that never reached a run. (A
 * waiting fiber's request lives on its stack; that fiber never runs.) */
static void release_discard(struct runtime *rt, struct inbox_node *n)
{
	struct fd_release *req = container_of(n, struct fd_release, node);

	(void)rt;
	if (req->waiter)
		return;
	sys_close(req->fd);
	free(req);
}

static const struct inbox_ops release_ops = { release_arrived, release_discard };

int runtime__fixed_release(int fd)
{
	struct core *owner = in_range(fd) ? atomic_load(&holder[fd]) : NULL;
	struct core *self = this_core();
	struct fiber *f = this_fiber();

	if (!owner)
		return 0;
	if (owner == self) {
		unregister_here(self, fd);
		return 0;
	}
	if (f) {
		struct fd_release req = { .node.ops = &release_ops, .fd = fd, .waiter = f };
		f->core->sched.xparked++; /* another thread will resume it: no deadlock */
		runtime__inbox_push(owner, &req.node);
		runtime__suspend(f->core, BLOCK_CLOSE, runtime__ignore_interrupt, NULL);
		f->core->sched.xparked--;
		return 0;
	}
	struct fd_release *req = malloc(sizeof(*req));
	if (!req)
		return -ENOMEM;
	*req = (struct fd_release){ .node.ops = &release_ops, .fd = fd };
	runtime__inbox_push(owner, &req->node);
	return 1;
}

