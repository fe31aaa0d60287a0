/* SPDX-License-Identifier: MIT */
/*
 * buffers.c - each core's connection buffers (struct http_conn: its input
 * and its batch of answers, 36 KiB with the default limits), in slabs of
 * their own instead of malloc's heap. A connection holds one only while a
 * fiber serves it: between requests it waits with none (conn.c). A burst
 * of requests that then go quiet would leave, in the heap, pages that the
 * small objects allocated after it keep resident (glibc gives back only
 * the top of its heap); here a buffer's pages go back to the kernel on
 * their own (MADV_DONTNEED) and the buffer keeps its address for the next.
 * Written by its core only.
 *
 * Buffers decay the way fiber stacks do (runtime/stack.c). One given back
 * stays resident, on top of the hot list, the first to be taken again;
 * those the core did not take all through a period of DECAY_NS - the
 * bottom hot_low of the list - give their pages back, beyond the first
 * HTTP_HOT, at most RELEASE_SLICE a firing, a millisecond apart. So
 * keep-alive connections that each wait between requests with no buffer
 * take a warm one for each request however many they are, instead of
 * faulting in 36 KiB each time, and a burst that goes quiet leaves only
 * HTTP_HOT resident within two periods. The decay timer is a background
 * one (it never keeps a run going) and runs only while there is more than
 * HTTP_HOT to decay.
 */
#include "http.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLAB_BUFFERS 32 /* buffers per mapping */
#define DECAY_NS (1000 * 1000 * 1000ull)
#define RELEASE_SLICE 256
#define RELEASE_GAP_NS (1000 * 1000ull)

/* The decay timer's storage, apart from the buffers: the server is
 * destroyed after runtime_run has returned, when a background timer may
 * still be armed, to fire in a later run or end in runtime_destroy. The
 * buffers' end then leaves it to the callback to free (b NULL). */
struct http_decay {
	struct runtime_timer timer;
	struct http_buffers *b; /* NULL: the buffers are gone */
	bool armed;             /* its callback has yet to run */
};

static size_t page_round(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return (n + page - 1) & ~(page - 1);
}

/* Room for every buffer of one more slab on the hot list and on the clean
 * one, so that giving one back never fails. */
static bool grow(struct http_buffers *b)
{
	size_t need = (b->nslabs + 1) * SLAB_BUFFERS;
	void **hot = realloc(b->hot, need * sizeof(*hot));
	void **clean = hot ? realloc(b->clean, need * sizeof(*clean)) : NULL;
	void **slabs = clean ? realloc(b->slabs, (b->nslabs + 1) * sizeof(*slabs)) : NULL;

	if (hot)
		b->hot = hot;
	if (clean)
		b->clean = clean;
	if (slabs)
		b->slabs = slabs;
	return hot && clean && slabs;
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

static void give_back(struct http_buffers *b, void *p)
{
	madvise(p, b->size, MADV_DONTNEED);
	b->clean[b->nclean++] = p;
}

/* Give back the top n of the buffers unused all period (hot[0, hot_low)):
 * only those taken since, above them, move down. */
static void release_unused(struct http_buffers *b, size_t n)
{
	size_t from = b->hot_low - n;

	for (size_t i = from; i < b->hot_low; i++)
		give_back(b, b->hot[i]);
	memmove(b->hot + from, b->hot + b->hot_low, (b->nhot - b->hot_low) * sizeof(*b->hot));
	b->nhot -= n;
	b->hot_low -= n;
}

static void decay_fire(struct runtime_timer *t, void *arg, enum runtime_timer_why why);

static void decay_start(struct http_decay *d, uint64_t ns)
{
	d->armed = runtime_timer_start_background(&d->timer, ns, decay_fire, d) == 0;
}

/* A period starts: what stays unused all through it decays. */
static void decay_period(struct http_decay *d)
{
	d->b->hot_low = d->b->nhot;
	if (d->b->nhot > HTTP_HOT)
		decay_start(d, DECAY_NS);
}

static void decay_fire(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	struct http_decay *d = arg;
	struct http_buffers *b = d->b;

	(void)t;
	d->armed = false;
	if (!b) {
		free(d);
		return;
	}
	if (why != RUNTIME_TIMER_FIRED)
		return; /* the run is ending: the buffers go with the server */
	if (b->hot_low > HTTP_HOT) {
		size_t n = b->hot_low - HTTP_HOT;
		release_unused(b, n < RELEASE_SLICE ? n : RELEASE_SLICE);
	}
	if (b->hot_low > HTTP_HOT)
		decay_start(d, RELEASE_GAP_NS);
	else
		decay_period(d);
}

/* More than HTTP_HOT are resident: start decaying them. False if the
 * timer cannot run (no memory, the runtime shutting down). */
static bool decay_arm(struct http_buffers *b)
{
	if (!b->decay) {
		if (!(b->decay = calloc(1, sizeof(*b->decay))))
			return false;
		b->decay->b = b;
	}
	decay_period(b->decay);
	return b->decay->armed;
}

void *runtime__http_buffer_get(struct http_buffers *b, size_t size)
{
	if (!b->size)
		b->size = page_round(size);
	if (b->nhot) {
		void *p = b->hot[--b->nhot];
		if (b->nhot < b->hot_low)
			b->hot_low = b->nhot;
		return p;
	}
	if (!b->nclean && !slab_new(b))
		return NULL;
	return b->clean[--b->nclean];
}

/* Fiber context, on the buffers' core (the decay timer is armed here). */
void runtime__http_buffer_put(struct http_buffers *b, void *p)
{
	b->hot[b->nhot++] = p;
	if (b->nhot > HTTP_HOT && !(b->decay && b->decay->armed) && !decay_arm(b))
		give_back(b, b->hot[--b->nhot]); /* no decay: back at once */
}

/* After runtime_run has returned: no callback runs meanwhile. */
void runtime__http_buffers_free(struct http_buffers *b)
{
	if (b->decay && b->decay->armed)
		b->decay->b = NULL; /* its callback frees it */
	else
		free(b->decay);
	for (size_t i = 0; i < b->nslabs; i++)
		munmap(b->slabs[i], b->size * SLAB_BUFFERS);
	free(b->slabs);
	free(b->clean);
	free(b->hot);
	*b = (struct http_buffers){ 0 };
}
