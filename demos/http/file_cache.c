/* SPDX-License-Identifier: MIT */
/*
 * file_cache.c - open files kept for a moment, as nginx's open_file_cache:
 * a request for a file opened less than --file-cache-ms ago (default
 * 1000) takes its fd, size and mtime from here instead of an openat2, a
 * statx, an fcntl and a close (bench-files: a 64 KiB file's request 38 us,
 * of which those four were about 4). Each core has its own table (fibers
 * never migrate: no lock); an entry is counted while a response sends
 * from it, and closed when the last of them and the table let it go.
 *
 * What a moment costs: within it a file replaced or removed is still
 * served as it was opened (a rewrite in place is seen at once: the pages
 * are the file's), as with nginx's open_file_cache_valid. A background
 * timer drops every entry older than that each period, so an idle server
 * holds no fd of a deleted file for long; at shutdown the table empties.
 */
#define _GNU_SOURCE
#include "server.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 128 /* per core: the files of one busy page or site */

struct file_table {
	struct file_table *next;    /* every core's (tables) */
	struct open_file *slot[SLOTS];
	unsigned live;              /* slots taken */
	bool armed;                 /* the sweep's timer */
	bool ended;                 /* shut down: no more caching here */
	struct runtime_timer sweep;
};

static uint64_t valid_ns = 1000 * 1000 * 1000ull;
static __thread struct file_table *table; /* this core thread's */
/* Every table made: never freed (a shutdown's timer callback, maybe on
 * another thread, may come after the core's thread is gone; one per core
 * thread), and kept reachable here so that a leak checker agrees. */
static _Atomic(struct file_table *) tables;

void file_cache_set_validity(uint64_t ns)
{
	valid_ns = ns;
}

static uint32_t name_hash(const char *name)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h;
}

void file_cache_put(struct open_file *f)
{
	if (f && --f->refs == 0) {
		close(f->fd);
		free(f);
	}
}

/* The table lets go of slot i. */
static void drop(struct file_table *t, unsigned i)
{
	if (t->slot[i]) {
		file_cache_put(t->slot[i]);
		t->slot[i] = NULL;
		t->live--;
	}
}

/* Each period: entries past their moment go; the timer stays armed while
 * some are left. A shutdown empties the table for good. */
static void sweep(struct runtime_timer *timer, void *arg, enum runtime_timer_why why)
{
	struct file_table *t = arg;
	uint64_t now = runtime_now_coarse();

	for (unsigned i = 0; i < SLOTS; i++)
		if (t->slot[i] && (why != RUNTIME_TIMER_FIRED || now - t->slot[i]->opened >= valid_ns))
			drop(t, i);
	t->ended = why == RUNTIME_TIMER_SHUTDOWN;
	t->armed = t->live && why == RUNTIME_TIMER_FIRED &&
	           runtime_timer_start_background(timer, valid_ns, sweep, t) == 0;
}

/* The core's table, made on first use; NULL if caching is off or ended. */
static struct file_table *core_table(void)
{
	if (!valid_ns || (table && table->ended))
		return NULL;
	if (!table && (table = calloc(1, sizeof(*table)))) {
		table->sweep = (struct runtime_timer)RUNTIME_TIMER_INIT;
		table->next = atomic_load(&tables);
		while (!atomic_compare_exchange_weak(&tables, &table->next, table))
			;
	}
	return table;
}

struct open_file *file_cache_find(const char *name)
{
	struct file_table *t = core_table();
	uint32_t h = name_hash(name);
	struct open_file *f = t ? t->slot[h % SLOTS] : NULL;

	if (!f || f->hash != h || strcmp(f->name, name))
		return NULL;
	if (runtime_now_coarse() - f->opened >= valid_ns)
		return NULL; /* its moment passed: the caller opens it again */
	f->refs++;
	return f;
}

struct open_file *file_cache_add(const char *name, int fd, uint64_t size, int64_t mtime)
{
	size_t len = strlen(name);
	struct open_file *f = malloc(sizeof(*f) + len + 1);
	struct file_table *t = core_table();

	if (!f) {
		close(fd);
		return NULL;
	}
	*f = (struct open_file){ .refs = 1, .fd = fd, .size = size, .mtime = mtime,
		                 .opened = runtime_now_coarse(), .hash = name_hash(name) };
	memcpy(f->name, name, len + 1);
	if (!t)
		return f; /* uncached: the caller's put closes it */
	unsigned i = f->hash % SLOTS;
	drop(t, i);
	t->slot[i] = f;
	t->live++;
	f->refs++;
	if (!t->armed)
		t->armed = runtime_timer_start_background(&t->sweep, valid_ns, sweep, t) == 0;
	return f;
}
