/* SPDX-License-Identifier: MIT */
/* count.h - a counter of one core's, read by any thread: the server's and
 * the client's. */
#ifndef HTTP_COUNT_H
#define HTTP_COUNT_H

#include <stdatomic.h>
#include <stdint.h>

/* One writer per counter (its core): a plain add, no lock. */
static inline void http_count(_Atomic uint64_t *n)
{
	atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + 1,
	                      memory_order_relaxed);
}

/* As http_count, + k. */
static inline void http_count_n(_Atomic uint64_t *n, uint64_t k)
{
	atomic_store_explicit(n, atomic_load_explicit(n, memory_order_relaxed) + k,
	                      memory_order_relaxed);
}

#endif
