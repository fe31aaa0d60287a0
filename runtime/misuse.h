/* SPDX-License-Identifier: MIT */
/*
 * misuse.h - reporting a call the program should never make (misuse.c).
 * It depends on nothing of the runtime's, so that any subsystem may
 * report without a circle back through the others.
 */
#ifndef RUNTIME_MISUSE_H
#define RUNTIME_MISUSE_H

/* Report fn's misuse (what: the sentence after "runtime: misuse: fn: ")
 * on stderr the first few times, or abort() if the environment has
 * RUNTIME_MISUSE=abort. Returns rc, the error the call gives. Any thread. */
int runtime__misuse(int rc, const char *fn, const char *what) __attribute__((cold));

#define MISUSE_OUTSIDE_FIBER "called outside a fiber: it needs fiber context"
#define MISUSE_OUTSIDE_CORE "called from a thread that is none of the runtime's cores"
#define MISUSE_NOT_JOINABLE "the fiber is not joinable (detached, or spawned so) or " \
	"another fiber joins it already"
#define MISUSE_OTHER_CORE "called from another core than the one it belongs to"

#endif /* RUNTIME_MISUSE_H */
