/* SPDX-License-Identifier: MIT */
/*
 * base.h - what every file of the core builds on (never installed): the
 * public API, lists, misuse reports, fault injection, and time as the
 * runtime counts it. Public names are runtime_*, internal non-static ones
 * runtime__*. Each subsystem has its own header beside this one; core.h
 * composes a core from their per-core state.
 */
#ifndef RUNTIME_BASE_H
#define RUNTIME_BASE_H

#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fault.h"
#include "list.h"
#include "misuse.h"
#include "runtime.h"

#ifdef RUNTIME_FAULTS
/* A fault build's runtime allocates through these (fault.c), which fail
 * when FAULT_MALLOC strikes. A call written (malloc)(n) is left alone. */
void *runtime__fault_malloc(size_t n);
void *runtime__fault_calloc(size_t n, size_t size);
void *runtime__fault_realloc(void *p, size_t n);
#define malloc(n) runtime__fault_malloc(n)
#define calloc(n, size) runtime__fault_calloc(n, size)
#define realloc(p, n) runtime__fault_realloc(p, n)
#endif

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* The runtime's own writes and closes go to the kernel, never through an
 * interposer: libruntime-preload would make a fiber's write a ring
 * operation, wrong in a signal handler and inside the runtime's own
 * bookkeeping. Same results as write(2) and close(2). */
static inline ssize_t sys_write(int fd, const void *buf, size_t len)
{
	return syscall(SYS_write, fd, buf, len);
}

static inline int sys_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

/* ------------------------------------------------------------------- time */

/* Internally a deadline is an absolute CLOCK_MONOTONIC time in ns, and
 * NEVER is the one that does not come (publicly, 0 means "none"). */
#define NEVER UINT64_MAX

/* The one place a deadline is computed: now + delay, saturating, so that a
 * huge delay means never, not at once. */
static inline uint64_t deadline_add(uint64_t now, uint64_t delay)
{
	return delay > NEVER - now ? NEVER : now + delay;
}

static inline uint64_t deadline_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* A public timeout: negative means no limit. */
static inline uint64_t deadline_from_timeout(uint64_t now, int64_t timeout_ns)
{
	return timeout_ns < 0 ? NEVER : deadline_add(now, (uint64_t)timeout_ns);
}


#endif /* RUNTIME_BASE_H */
