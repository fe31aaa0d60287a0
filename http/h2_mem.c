/* SPDX-License-Identifier: MIT */
/*
 * h2_mem.c - HTTP/2's memory on both sides: nghttp2's blocks (a stream,
 * a frame queued, a header field, a copy of a header list) and the
 * server's streams come from a free list of the thread's, by size class,
 * and go back to it.
 *
 * A session allocates and frees a dozen blocks per request, a stream's
 * worth at a time, and a server stream is 7.5 KiB; with sixteen streams
 * in flight, glibc's per-thread cache (seven blocks a size, none above
 * 1 KiB) overflows into its arenas' slow paths, which took 15 % of the
 * HTTP/2 server's user-space instructions. Here a thread keeps up to
 * H2_MEM_KEEP bytes per class, so the cache is bounded (1 MiB per thread
 * at most, returned at the thread's exit); larger blocks, and any beyond
 * the bound, are plain malloc's.
 *
 * A session lives on its core's thread, so a list is only ever touched
 * by its own thread. A session deleted on another thread gives its
 * blocks to that thread's lists: they are plain malloc'd memory, any
 * thread may keep or free them.
 *
 * Under AddressSanitizer every block is plain malloc's, so that a use
 * after free still shows.
 */
#include "h2_link.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define H2_MEM_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define H2_MEM_CACHE 0
#endif
#endif
#ifndef H2_MEM_CACHE
#define H2_MEM_CACHE 1
#endif

#define H2_MEM_MIN_SHIFT 6      /* the smallest class: 64 bytes */
#define H2_MEM_CLASSES 8        /* 64 to 8,192 bytes */
#define H2_MEM_KEEP (128 * 1024) /* bytes kept per class and thread */
#define H2_MEM_BIG 0xff         /* a block of malloc's, of any size */

/* Before each block: its class; while it is free, the next free one. */
union h2_block {
	struct {
		union h2_block *next;
		unsigned cls;
	};
	max_align_t align;
};

struct h2_mem_cache {
	union h2_block *free[H2_MEM_CLASSES];
	unsigned kept[H2_MEM_CLASSES];
};

/* initial-exec: no __tls_get_addr call per block (libruntime's TLS is
 * so too: these libraries are linked, not loaded late). */
#define H2_TLS __thread __attribute__((tls_model("initial-exec")))
static H2_TLS struct h2_mem_cache cache;
static H2_TLS bool registered;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static size_t class_size(unsigned cls)
{
	return (size_t)1 << (cls + H2_MEM_MIN_SHIFT);
}

/* The smallest class that holds n bytes, or H2_MEM_BIG. */
static unsigned class_of(size_t n)
{
	unsigned cls = 0;

	while (cls < H2_MEM_CLASSES && class_size(cls) < n)
		cls++;
	return cls < H2_MEM_CLASSES ? cls : H2_MEM_BIG;
}

/* At a thread's exit: its lists back to malloc. */
static void cache_drain(void *arg)
{
	struct h2_mem_cache *c = arg;

	for (unsigned cls = 0; cls < H2_MEM_CLASSES; cls++) {
		while (c->free[cls]) {
			union h2_block *b = c->free[cls];
			c->free[cls] = b->next;
			free(b);
		}
		c->kept[cls] = 0;
	}
}

static void cache_key_make(void)
{
	if (pthread_key_create(&cache_key, cache_drain) != 0)
		abort(); /* at the first session of the process: no way on */
}

/* The thread's cache, its drain at exit arranged the first time. */
static struct h2_mem_cache *thread_cache(void)
{
	if (!registered) {
		pthread_once(&cache_once, cache_key_make);
		if (pthread_setspecific(cache_key, &cache) != 0)
			return NULL; /* then nothing is kept */
		registered = true;
	}
	return &cache;
}

void *runtime__h2_alloc(size_t size)
{
	unsigned cls = H2_MEM_CACHE ? class_of(size) : H2_MEM_BIG;
	struct h2_mem_cache *c = &cache;
	union h2_block *b;

	if (cls != H2_MEM_BIG && (b = c->free[cls])) {
		c->free[cls] = b->next;
		c->kept[cls]--;
	} else {
		size_t n = cls == H2_MEM_BIG ? size : class_size(cls);
		if (n > SIZE_MAX - sizeof(*b) || !(b = malloc(sizeof(*b) + n)))
			return NULL;
	}
	b->cls = cls;
	return b + 1;
}

void runtime__h2_free(void *p)
{
	if (!p)
		return;
	union h2_block *b = (union h2_block *)p - 1;
	unsigned cls = b->cls;
	struct h2_mem_cache *c;

	if (cls == H2_MEM_BIG || !(c = thread_cache()) ||
	    (c->kept[cls] + 1) * class_size(cls) > H2_MEM_KEEP) {
		free(b);
		return;
	}
	b->next = c->free[cls];
	c->free[cls] = b;
	c->kept[cls]++;
}

static void *mem_malloc(size_t size, void *user)
{
	(void)user;
	return runtime__h2_alloc(size);
}

static void mem_free(void *p, void *user)
{
	(void)user;
	runtime__h2_free(p);
}

static void *mem_calloc(size_t n, size_t size, void *user)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	void *p = mem_malloc(n * size, user);
	return p ? memset(p, 0, n * size) : NULL;
}

static void *mem_realloc(void *p, size_t size, void *user)
{
	if (!p)
		return mem_malloc(size, user);
	union h2_block *b = (union h2_block *)p - 1;
	if (b->cls == H2_MEM_BIG) {
		if (size > SIZE_MAX - sizeof(*b) || !(b = realloc(b, sizeof(*b) + size)))
			return NULL;
		return b + 1;
	}
	if (size <= class_size(b->cls))
		return p;
	void *q = mem_malloc(size, user);
	if (q) {
		memcpy(q, p, class_size(b->cls));
		mem_free(p, user);
	}
	return q;
}

size_t runtime__h2_mem_cached(void)
{
	size_t n = 0;

	for (unsigned cls = 0; cls < H2_MEM_CLASSES; cls++)
		n += cache.kept[cls] * class_size(cls);
	return n;
}

nghttp2_mem *runtime__h2_mem(void)
{
	static nghttp2_mem mem = { NULL, mem_malloc, mem_free, mem_calloc, mem_realloc };
	return &mem;
}

/* ------------------------------------------------------ a head's buffers */

bool runtime__h2_hold(struct h2_held *h, nghttp2_rcbuf *buf)
{
	if (h->n == h->cap) {
		unsigned cap = h->cap ? 2 * h->cap : 16;
		nghttp2_rcbuf **bufs = realloc(h->bufs, cap * sizeof(*bufs));
		if (!bufs)
			return false;
		h->bufs = bufs;
		h->cap = cap;
	}
	nghttp2_rcbuf_incref(buf);
	h->bufs[h->n++] = buf;
	return true;
}

void runtime__h2_held_drop(struct h2_held *h)
{
	for (unsigned i = 0; i < h->n; i++)
		nghttp2_rcbuf_decref(h->bufs[i]);
	h->n = 0;
}

void runtime__h2_held_free(struct h2_held *h)
{
	runtime__h2_held_drop(h);
	free(h->bufs);
	*h = (struct h2_held){ NULL, 0, 0 };
}
