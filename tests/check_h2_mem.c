/* SPDX-License-Identifier: MIT */
/*
 * check_h2_mem.c - HTTP/2's block cache (http/h2_mem.c), built in: every
 * size gets a whole, aligned block; realloc keeps the bytes; calloc
 * zeroes a reused block; sizes that overflow fail; freed blocks are
 * reused, but never more of a class than its bound; another thread's
 * blocks are its own.
 */
#include "h2_link.h"

#include <check.h>
#include "ck_fast.h" /* no write per passing assertion */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define CACHED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CACHED 0
#endif
#endif
#ifndef CACHED
#define CACHED 1
#endif

static const size_t sizes[] = { 0, 1, 63, 64, 65, 200, 1024, 2049, 7672, 8192, 8193, 100000 };

START_TEST(test_h2_mem_every_size_whole_and_aligned)
{
	void *p[sizeof(sizes) / sizeof(sizes[0])];

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		p[i] = runtime__h2_alloc(sizes[i]);
		ck_assert_ptr_nonnull(p[i]);
		ck_assert_uint_eq((uintptr_t)p[i] % _Alignof(max_align_t), 0);
		memset(p[i], (int)i, sizes[i]);
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (size_t j = 0; j < sizes[i]; j++)
			ck_assert_int_eq(((unsigned char *)p[i])[j], (unsigned char)i);
		runtime__h2_free(p[i]);
	}
	runtime__h2_free(NULL);
}
END_TEST

START_TEST(test_h2_mem_realloc_keeps_bytes)
{
	nghttp2_mem *mem = runtime__h2_mem();
	unsigned char *p = mem->malloc(40, NULL);

	ck_assert_ptr_nonnull(p);
	for (int i = 0; i < 40; i++)
		p[i] = (unsigned char)i;
	/* Within its class, across classes, into a big block, and back. */
	size_t steps[] = { 60, 300, 5000, 20000, 50 };
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		p = mem->realloc(p, steps[s], NULL);
		ck_assert_ptr_nonnull(p);
		for (int i = 0; i < 40; i++)
			ck_assert_int_eq(p[i], i);
	}
	mem->free(p, NULL);
	p = mem->realloc(NULL, 100, NULL); /* as malloc */
	ck_assert_ptr_nonnull(p);
	mem->free(p, NULL);
}
END_TEST

START_TEST(test_h2_mem_calloc_zeroes_reused_block)
{
	nghttp2_mem *mem = runtime__h2_mem();
	unsigned char *p = mem->malloc(256, NULL);

	memset(p, 0xa5, 256);
	mem->free(p, NULL);
	p = mem->calloc(16, 16, NULL);
	ck_assert_ptr_nonnull(p);
	for (int i = 0; i < 256; i++)
		ck_assert_int_eq(p[i], 0);
	mem->free(p, NULL);
}
END_TEST

START_TEST(test_h2_mem_overflowing_sizes_fail)
{
	nghttp2_mem *mem = runtime__h2_mem();

	ck_assert_ptr_null(mem->calloc(SIZE_MAX / 2, 4, NULL));
	ck_assert_ptr_null(mem->malloc(SIZE_MAX - 8, NULL));
	void *p = mem->malloc(10000, NULL);
	ck_assert_ptr_null(mem->realloc(p, SIZE_MAX - 8, NULL));
	mem->free(p, NULL); /* still the caller's after a failed realloc */
}
END_TEST

/* Free n blocks of 1 KiB, then take n again: how many came back. */
static size_t reused_of(size_t n, size_t *cached)
{
	void **first = calloc(n, sizeof(*first)), **again = calloc(n, sizeof(*again));
	size_t reused = 0;

	for (size_t i = 0; i < n; i++)
		first[i] = runtime__h2_alloc(1024);
	for (size_t i = 0; i < n; i++)
		runtime__h2_free(first[i]);
	*cached = runtime__h2_mem_cached();
	for (size_t i = 0; i < n; i++) {
		again[i] = runtime__h2_alloc(1024);
		for (size_t j = 0; j < n; j++)
			reused += again[i] == first[j];
	}
	for (size_t i = 0; i < n; i++)
		runtime__h2_free(again[i]);
	free(first);
	free(again);
	return reused;
}

START_TEST(test_h2_mem_reuse_is_bounded)
{
	size_t cached, small = reused_of(16, &cached);

	if (!CACHED) { /* AddressSanitizer: every block is malloc's */
		ck_assert_uint_eq(cached, 0);
		return;
	}
	ck_assert_uint_eq(small, 16);
	ck_assert_uint_ge(cached, 16 * 1024);
	/* 1,000 freed: 128 KiB of 1 KiB blocks kept, the rest malloc's. */
	ck_assert_uint_ge(reused_of(1000, &cached), 128);
	ck_assert_uint_le(cached, 128 * 1024 + 64 * 1024); /* + other classes' */
	ck_assert_uint_ge(cached, 128 * 1024);
}
END_TEST

static void *alloc_free_on_thread(void *arg)
{
	void **blocks = arg;

	for (int i = 0; i < 8; i++)
		runtime__h2_free(blocks[i]); /* another thread's blocks, kept here */
	for (int i = 0; i < 8; i++)
		blocks[i] = runtime__h2_alloc(512);
	for (int i = 0; i < 8; i++)
		runtime__h2_free(blocks[i]);
	return NULL; /* the thread's cache drained at its exit */
}

START_TEST(test_h2_mem_blocks_cross_threads)
{
	void *blocks[8];
	pthread_t t;

	for (int i = 0; i < 8; i++)
		blocks[i] = runtime__h2_alloc(512);
	ck_assert_int_eq(pthread_create(&t, NULL, alloc_free_on_thread, blocks), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	void *p = runtime__h2_alloc(512); /* this thread's cache is intact */
	ck_assert_ptr_nonnull(p);
	runtime__h2_free(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("h2_mem");
	TCase *tc = tcase_create("h2_mem");

	tcase_add_test(tc, test_h2_mem_every_size_whole_and_aligned);
	tcase_add_test(tc, test_h2_mem_realloc_keeps_bytes);
	tcase_add_test(tc, test_h2_mem_calloc_zeroes_reused_block);
	tcase_add_test(tc, test_h2_mem_overflowing_sizes_fail);
	tcase_add_test(tc, test_h2_mem_reuse_is_bounded);
	tcase_add_test(tc, test_h2_mem_blocks_cross_threads);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
