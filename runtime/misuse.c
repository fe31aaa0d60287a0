/* SPDX-License-Identifier: MIT */
/*
 * misuse.c - reports of calls the program should never make (a double
 * join, a blocking call outside a fiber...): a line on stderr naming the
 * function, the first MISUSE_REPORTS times, or abort() where the
 * environment says RUNTIME_MISUSE=abort (to catch one in a debugger).
 * Every subsystem reports through it, so it calls back into none of them:
 * libc alone, from any thread, with no lock.
 */
#include "misuse.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MISUSE_REPORTS 10 /* then quiet: a misuse in a loop must not flood */

int runtime__misuse(int rc, const char *fn, const char *what)
{
	static _Atomic unsigned reports;
	const char *mode = getenv("RUNTIME_MISUSE");
	unsigned n = atomic_fetch_add_explicit(&reports, 1, memory_order_relaxed);

	if (n < MISUSE_REPORTS || (mode && strcmp(mode, "abort") == 0))
		fprintf(stderr, "runtime: misuse: %s: %s%s\n", fn, what,
		        n == MISUSE_REPORTS - 1 ? " (further misuse reports are not printed)" : "");
	if (mode && strcmp(mode, "abort") == 0)
		abort();
	return rc;
}
