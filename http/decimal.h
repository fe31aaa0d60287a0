/* SPDX-License-Identifier: MIT */
/*
 * decimal.h - unsigned numbers written in decimal on the hot paths (a
 * response's status and Content-Length, a request's Content-Length),
 * where snprintf cost more than the rest of the formatting together.
 */
#ifndef RUNTIME_HTTP_DECIMAL_H
#define RUNTIME_HTTP_DECIMAL_H

#include <stdint.h>
#include <string.h>

#define HTTP_U64_DIGITS 20 /* UINT64_MAX's */

static const char http_digit_pairs[] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* v in decimal at p (no NUL), up to HTTP_U64_DIGITS bytes; returns the
 * end. Its digits are counted first, then written from the last, in
 * place, two a step. */
static inline char *http_put_u64(char *p, uint64_t v)
{
	size_t n = 1;
	char *d;

	if (v < 100) { /* a short body's length: no division */
		if (v < 10) {
			*p = (char)('0' + v);
			return p + 1;
		}
		memcpy(p, http_digit_pairs + 2 * v, 2);
		return p + 2;
	}
	for (uint64_t rest = v; rest >= 10; rest /= 10)
		n++;
	for (d = p + n; v >= 100; v /= 100) {
		d -= 2;
		memcpy(d, http_digit_pairs + 2 * (v % 100), 2);
	}
	if (v >= 10)
		memcpy(d - 2, http_digit_pairs + 2 * v, 2);
	else
		d[-1] = (char)('0' + v);
	return p + n;
}

#endif
