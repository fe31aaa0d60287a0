/* SPDX-License-Identifier: MIT */
/*
 * fdtable.c - libc's definitions of the wrapped calls, and the per-fd
 * table: for each fd number, whether the program made it non-blocking and
 * its socket timeouts, so that a wrapper knows without a system call
 * whether a call may park.
 *
 * The table is a cache of what the kernel says. A number is looked up in
 * the kernel (F_GETFL, SO_TYPE, SO_RCVTIMEO, SO_SNDTIMEO, or lseek for
 * what is not a socket) on its first use
 * in a fiber, and forgotten whenever a wrapped call creates or closes it;
 * fcntl(F_SETFL), ioctl(FIONBIO) and setsockopt(SO_*TIMEO) through the
 * wrappers update it. O_NONBLOCK and the timeouts belong to the open file,
 * which dup(2) shares between numbers: a change through a number that was
 * ever dup'ed invalidates every shared entry at once (a generation count),
 * so sharing costs nothing until flags change. What the table cannot see:
 * a file created and closed behind the wrappers (libc's internal fds,
 * SCM_RIGHTS) reuses a number whose entry was forgotten at its last
 * wrapped close, so only a number both closed and re-created behind the
 * wrappers after its first use in a fiber can be stale; and a flag changed
 * by another process sharing the file.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct preload_real runtime__preload_real_;

void *runtime__preload_resolve(void **slot, const char *name)
{
	void *fn = dlsym(RTLD_NEXT, name);
	if (!fn) {
		/* Nothing sensible can follow: every wrapper needs libc's. */
		static const char msg[] = "runtime-preload: libc's definition not found\n";
		if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
			abort();
		abort();
	}
	__atomic_store_n(slot, fn, __ATOMIC_RELEASE);
	return fn;
}

/* Numbers past this are looked up in the kernel on every call. */
#define FD_TABLE_SIZE 65536

enum {
	FD_KNOWN = 1u << 0,
	FD_NONBLOCK = 1u << 1,
	FD_SOCKET = 1u << 2,
	FD_STREAM = 1u << 3,
	FD_SEEKABLE = 1u << 4,
	FD_SHARED = 1u << 5, /* dup'ed: valid only in its generation */
};

struct fd_entry {
	uint32_t state;      /* FD_*; 0: nothing known */
	uint32_t generation; /* shared_generation when it was looked up */
	int64_t rcvtimeo_ns;
	int64_t sndtimeo_ns;
};

static struct fd_entry fd_table[FD_TABLE_SIZE];
static uint32_t shared_generation;

int64_t runtime__preload_timespec_ns(const struct timespec *ts)
{
	if (!ts || ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000)
		return -1;
	if (ts->tv_sec >= INT64_MAX / 1000000000 - 1)
		return INT64_MAX;
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

int64_t runtime__preload_timeval_ns(const struct timeval *tv)
{
	if (!tv || tv->tv_sec < 0 || tv->tv_usec < 0)
		return -1;
	if (tv->tv_sec >= INT64_MAX / 1000000000 - 1)
		return INT64_MAX;
	return (int64_t)tv->tv_sec * 1000000000 + (int64_t)tv->tv_usec * 1000;
}

static int64_t sock_timeout(int fd, int name)
{
	struct timeval tv = { 0, 0 };
	socklen_t len = sizeof(tv);

	if (getsockopt(fd, SOL_SOCKET, name, &tv, &len) < 0)
		return 0;
	int64_t ns = runtime__preload_timeval_ns(&tv);
	return ns < 0 ? 0 : ns;
}

/* Ask the kernel. False: no such fd. */
static bool fd_query(int fd, uint32_t *state, struct fd_info *info)
{
	int fl = REAL(fcntl)(fd, F_GETFL);
	if (fl < 0)
		return false;
	int type = 0;
	socklen_t len = sizeof(type);
	bool sock = getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0;
	*info = (struct fd_info){
		.nonblock = fl & O_NONBLOCK,
		.socket = sock,
		.stream = !sock || type == SOCK_STREAM,
		.seekable = !sock && lseek(fd, 0, SEEK_CUR) >= 0,
		.rcvtimeo_ns = sock ? sock_timeout(fd, SO_RCVTIMEO) : 0,
		.sndtimeo_ns = sock ? sock_timeout(fd, SO_SNDTIMEO) : 0,
	};
	*state = FD_KNOWN | (info->nonblock ? FD_NONBLOCK : 0) | (sock ? FD_SOCKET : 0) |
	         (info->stream ? FD_STREAM : 0) | (info->seekable ? FD_SEEKABLE : 0);
	return true;
}

bool runtime__preload_fd_info(int fd, struct fd_info *info)
{
	uint32_t state;

	if (fd < 0)
		return false;
	if (fd >= FD_TABLE_SIZE)
		return fd_query(fd, &state, info);
	struct fd_entry *e = &fd_table[fd];
	state = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
	if ((state & FD_KNOWN) &&
	    (!(state & FD_SHARED) ||
	     __atomic_load_n(&e->generation, __ATOMIC_RELAXED) ==
	             __atomic_load_n(&shared_generation, __ATOMIC_ACQUIRE))) {
		*info = (struct fd_info){
			.nonblock = state & FD_NONBLOCK,
			.socket = state & FD_SOCKET,
			.stream = state & FD_STREAM,
			.seekable = state & FD_SEEKABLE,
			.rcvtimeo_ns = __atomic_load_n(&e->rcvtimeo_ns, __ATOMIC_RELAXED),
			.sndtimeo_ns = __atomic_load_n(&e->sndtimeo_ns, __ATOMIC_RELAXED),
		};
		return true;
	}
	uint32_t generation = __atomic_load_n(&shared_generation, __ATOMIC_ACQUIRE);
	uint32_t shared = state & FD_SHARED;
	if (!fd_query(fd, &state, info))
		return false;
	__atomic_store_n(&e->rcvtimeo_ns, info->rcvtimeo_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&e->sndtimeo_ns, info->sndtimeo_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&e->generation, generation, __ATOMIC_RELAXED);
	__atomic_store_n(&e->state, state | shared, __ATOMIC_RELEASE);
	return true;
}

void runtime__preload_fd_forget(int fd)
{
	if (fd >= 0 && fd < FD_TABLE_SIZE)
		__atomic_store_n(&fd_table[fd].state, 0, __ATOMIC_RELEASE);
}

void runtime__preload_fd_shared(int fd)
{
	if (fd >= 0 && fd < FD_TABLE_SIZE)
		__atomic_store_n(&fd_table[fd].state, FD_SHARED, __ATOMIC_RELEASE);
}

void runtime__preload_fd_changed(int fd)
{
	if (fd < 0 || fd >= FD_TABLE_SIZE)
		return;
	uint32_t state = __atomic_load_n(&fd_table[fd].state, __ATOMIC_ACQUIRE);
	if (state & FD_SHARED)
		__atomic_add_fetch(&shared_generation, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&fd_table[fd].state, state & FD_SHARED, __ATOMIC_RELEASE);
}

/* A deadline of 0 or UINT64_MAX means none (runtime_deadline_set). */
static bool no_deadline(uint64_t d)
{
	return d == 0 || d == UINT64_MAX;
}

void runtime__preload_timeout_begin(struct preload_timeout *t, int64_t timeout_ns)
{
	t->mine = 0;
	if (timeout_ns <= 0)
		return; /* the common case: no socket timeout, no cost */
	t->saved = runtime_deadline_get();
	uint64_t now = runtime_now();
	uint64_t mine = (uint64_t)timeout_ns > UINT64_MAX - 1 - now ? UINT64_MAX - 1
	                                                          : now + (uint64_t)timeout_ns;
	if (no_deadline(t->saved) || mine < t->saved) {
		runtime_deadline_set(mine);
		t->mine = mine;
	}
}

long runtime__preload_timeout_end(const struct preload_timeout *t, long rc, int timeout_errno)
{
	if (!t->mine)
		return rc;
	runtime_deadline_set(t->saved);
	return rc == -ETIMEDOUT ? -timeout_errno : rc;
}
