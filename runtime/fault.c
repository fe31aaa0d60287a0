/* SPDX-License-Identifier: MIT */
/*
 * fault.c - fault injection for tests (fault.h): which faults strike how
 * often, from RUNTIME_FAULTS, and the allocation wrappers that base.h
 * puts in place of malloc, calloc and realloc in a fault build.
 */
#include "core.h"

#ifdef RUNTIME_FAULTS

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#undef malloc
#undef calloc
#undef realloc

static const char *const names[FAULT_POINTS] = {
	[FAULT_NO_SQE] = "no_sqe",
	[FAULT_SUBMIT_BUSY] = "submit_busy",
	[FAULT_SHORT_IO] = "short_io",
	[FAULT_CONNRESET] = "connreset",
	[FAULT_ACCEPT_EMFILE] = "accept_emfile",
	[FAULT_STACK] = "stack",
	[FAULT_MALLOC] = "malloc",
	[FAULT_NO_MULTISHOT] = "no_multishot",
	[FAULT_NO_PREADV2] = "no_preadv2",
	[FAULT_NO_PWRITEV2] = "no_pwritev2",
	[FAULT_NO_EPOLL_PWAIT2] = "no_epoll_pwait2",
	[FAULT_NO_OPENAT2] = "no_openat2",
	[FAULT_NO_PROCESS_MADVISE] = "no_process_madvise",
};

static struct {
	_Atomic unsigned long every, calls, struck;
} points[FAULT_POINTS];

bool runtime__fault(enum fault f)
{
	unsigned long every = atomic_load_explicit(&points[f].every, memory_order_relaxed);

	if (!every || (atomic_fetch_add(&points[f].calls, 1) + 1) % every)
		return false;
	atomic_fetch_add(&points[f].struck, 1);
	return true;
}

int runtime__fault_accept(void)
{
	if (!runtime__fault(FAULT_ACCEPT_EMFILE))
		return 0;
	return atomic_load(&points[FAULT_ACCEPT_EMFILE].struck) % 2 ? -EMFILE : -ENFILE;
}

int runtime__fault_data(size_t *len)
{
	if (*len > 1 && runtime__fault(FAULT_SHORT_IO))
		*len /= 2;
	return runtime__fault(FAULT_CONNRESET) ? -ECONNRESET : 0;
}

/* "name:every": set that point; anything else is reported and ignored. */
static void load_one(const char *item, size_t len)
{
	for (int f = 0; f < FAULT_POINTS; f++) {
		size_t n = strlen(names[f]);
		if (len > n + 1 && !strncmp(item, names[f], n) && item[n] == ':') {
			unsigned long every = strtoul(item + n + 1, NULL, 10);
			if (every == 1 && (f == FAULT_NO_SQE || f == FAULT_SUBMIT_BUSY))
				every = 2; /* always full or busy: nothing would ever go in */
			atomic_store(&points[f].every, every);
			return;
		}
	}
	fprintf(stderr, "runtime: RUNTIME_FAULTS: unknown item \"%.*s\"\n", (int)len, item);
}

/* Counts go on across runtimes while the spec stays the same. */
void runtime__faults_load(void)
{
	static char loaded[256];
	const char *spec = getenv("RUNTIME_FAULTS");

	if (!strcmp(spec ? spec : "", loaded))
		return;
	snprintf(loaded, sizeof(loaded), "%s", spec ? spec : "");
	for (int f = 0; f < FAULT_POINTS; f++) {
		atomic_store(&points[f].every, 0);
		atomic_store(&points[f].calls, 0);
		atomic_store(&points[f].struck, 0);
	}
	while (spec && *spec) {
		size_t len = strcspn(spec, ",");
		load_one(spec, len);
		spec += len + (spec[len] == ',');
	}
}

unsigned long runtime_faults_struck(enum fault f)
{
	return f < FAULT_POINTS ? atomic_load(&points[f].struck) : 0;
}

void *runtime__fault_malloc(size_t n)
{
	return runtime__fault(FAULT_MALLOC) ? NULL : malloc(n);
}

void *runtime__fault_calloc(size_t n, size_t size)
{
	return runtime__fault(FAULT_MALLOC) ? NULL : calloc(n, size);
}

void *runtime__fault_realloc(void *p, size_t n)
{
	return runtime__fault(FAULT_MALLOC) ? NULL : realloc(p, n);
}

#endif /* RUNTIME_FAULTS */
