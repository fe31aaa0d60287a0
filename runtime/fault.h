/* SPDX-License-Identifier: MIT */
/*
 * fault.h - fault injection, for tests (./configure --enable-fault-injection;
 * compiled out otherwise: every check below is then the constant false).
 *
 * RUNTIME_FAULTS in the environment, read by runtime_create, names
 * the faults and how often they strike: "no_sqe:3,short_io:2" makes every
 * third SQE request find the SQ full and every second read, write, recv or
 * send ask the kernel for half its length. Counting, not chance: a failing
 * run repeats exactly. Never installed.
 *
 * Both engines have the same fault points on their data and accept paths
 * (short_io, connreset, accept_emfile: once per call, before anything is
 * done). no_sqe and submit_busy are io_uring's alone: the epoll engine has
 * no SQ, and they never strike there.
 *
 * The no_<syscall> points pretend that a system call the runtime can do
 * without is missing (ENOSYS), as on an older kernel or under Debian 12's
 * qemu-user: "no_preadv2:1,no_pwritev2:1,no_epoll_pwait2:1,no_openat2:1,
 * no_process_madvise:1" runs the epoll engine and the stacks on their
 * fallbacks. The first strike decides: the runtime asks no more.
 */
#ifndef RUNTIME_FAULT_H
#define RUNTIME_FAULT_H

#include <stdbool.h>
#include <stddef.h>

enum fault {
	FAULT_NO_SQE,        /* io_uring_get_sqe finds the SQ full (io_uring) */
	FAULT_SUBMIT_BUSY,   /* submit answers -EAGAIN (making room in a full SQ)
	                        or -EBUSY (the loop's submit) (io_uring) */
	FAULT_SHORT_IO,      /* a read, write, recv or send asks for half its length */
	FAULT_CONNRESET,     /* a read, write, recv or send (or a stream's recv)
	                        fails with -ECONNRESET, having done nothing */
	FAULT_ACCEPT_EMFILE, /* an accept (or a listener's) fails with -EMFILE or
	                        (every other time) -ENFILE; the connection stays
	                        queued for the next one */
	FAULT_STACK,         /* a fiber stack cannot be had */
	FAULT_MALLOC,        /* malloc, calloc or realloc in the runtime fail */
	FAULT_NO_MULTISHOT,  /* a receive stream finds no multishot recv, as on
	                        a kernel before 6.0 (its reads are plain recvs,
	                        runtime_stream_idle polls in a fiber) */
	FAULT_NO_PREADV2,    /* preadv2 is missing (before 4.6): the epoll
	                        engine's reads go without RWF_NOWAIT */
	FAULT_NO_PWRITEV2,   /* pwritev2 is missing: its writes likewise */
	FAULT_NO_EPOLL_PWAIT2, /* epoll_pwait2 is missing (before 5.11): the
	                        epoll engine waits in whole milliseconds */
	FAULT_NO_OPENAT2,    /* openat2 is missing (before 5.6): the epoll
	                        engine resolves the path itself */
	FAULT_NO_PROCESS_MADVISE, /* process_madvise is missing (before 5.10):
	                        stacks are advised one at a time */
	FAULT_POINTS
};

#ifdef RUNTIME_FAULTS
/* Does fault f strike now? Counts every call; strikes every n-th. */
bool runtime__fault(enum fault f);
/* FAULT_ACCEPT_EMFILE: 0, or the error to give (-EMFILE, -ENFILE, ...). */
int runtime__fault_accept(void);
/* A read, write, recv or send about to be made, by either engine:
 * FAULT_SHORT_IO halves *len (if over 1); -ECONNRESET if FAULT_CONNRESET
 * strikes (the call is then not made), else 0. */
int runtime__fault_data(size_t *len);
/* runtime_create: read RUNTIME_FAULTS if it changed (and zero the counts). */
void runtime__faults_load(void);
/* For tests: how many times fault f has struck since the last load. */
__attribute__((visibility("default"))) unsigned long runtime_faults_struck(enum fault f);
#else
static inline bool runtime__fault(enum fault f)
{
	(void)f;
	return false;
}
static inline void runtime__faults_load(void)
{
}
static inline int runtime__fault_accept(void)
{
	return 0;
}
static inline int runtime__fault_data(size_t *len)
{
	(void)len;
	return 0;
}
#endif

#endif /* RUNTIME_FAULT_H */
