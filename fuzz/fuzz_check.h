/* SPDX-License-Identifier: MIT */
/*
 * fuzz_check.h - what the parser targets (fuzz_http_parser.c,
 * fuzz_http_response.c) check with: a failed CHECK traps at once, which
 * libFuzzer and the replay build both report as a crash with the input.
 */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include "parser.h"

#include <stdbool.h>
#include <stddef.h>

#define CHECK(cond)                        \
	do {                               \
		if (!(cond))               \
			__builtin_trap();  \
	} while (0)

/* s lies within base[0..len). */
static inline bool inside(struct http_slice s, const char *base, size_t len)
{
	return s.p >= base && s.len <= len && (size_t)(s.p - base) <= len - s.len;
}

#endif /* FUZZ_CHECK_H */
