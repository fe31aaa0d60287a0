/* SPDX-License-Identifier: MIT */
/*
 * buffers.c - each core's connection buffers (struct http_conn: its input
 * and its batch of answers, 36 KiB with the default limits), in slabs of
 * their own instead of malloc's heap. A connection holds one only while a
 * fiber serves it: between requests it waits with none (conn.c). A burst
 * of requests that then go quiet would leave, in the heap, pages that the
 * small objects allocated after it keep resident (glibc gives back only
 * the top of its heap); here a buffer given back past the HTTP_HOT kept
 * ready returns its pages to the kernel at once (MADV_DONTNEED) and keeps
 * its address for the next. Written by its core only.
 */
#include "http.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLAB_BUFFERS 32 /* buffers per mapping */

static size_t page_round(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return (n + page - 1) & ~(page - 1);
}

/* Room for every buffer of one more slab on the clean list, so that giving
 * one back never fails. */
static bool grow(struct http_buffers *b)
{
	size_t need = (b->nslabs + 1) * SLAB_BUFFERS;
	void **clean = realloc(b->clean, need * sizeof(*clean));
	void **slabs = clean ? realloc(b->slabs, (b->nslabs + 1) * sizeof(*slabs)) : NULL;

	if (clean)
		b->clean = clean;
	if (slabs)
		b->slabs = slabs;
	return clean && slabs;
}

static bool slab_new(struct http_buffers *b)
{
	if (!grow(b))
		return false;
	char *m = mmap(NULL, b->size * SLAB_BUFFERS, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return false;
	b->slabs[b->nslabs++] = m;
	for (unsigned i = SLAB_BUFFERS; i-- > 0;) /* lowest address handed out first */
		b->clean[b->nclean++] = m + i * b->size;
	return true;
}

void *http_buffer_get(struct http_buffers *b, size_t size)
{
	if (!b->size)
		b->size = page_round(size);
	if (b->nhot)
		return b->hot[--b->nhot];
	if (!b->nclean && !slab_new(b))
		return NULL;
	return b->clean[--b->nclean];
}

void http_buffer_put(struct http_buffers *b, void *p)
{
	if (b->nhot < HTTP_HOT) {
		b->hot[b->nhot++] = p;
		return;
	}
	madvise(p, b->size, MADV_DONTNEED);
	b->clean[b->nclean++] = p;
}

void http_buffers_free(struct http_buffers *b)
{
	for (size_t i = 0; i < b->nslabs; i++)
		munmap(b->slabs[i], b->size * SLAB_BUFFERS);
	free(b->slabs);
	free(b->clean);
	*b = (struct http_buffers){ 0 };
}
