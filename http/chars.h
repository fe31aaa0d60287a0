/* SPDX-License-Identifier: MIT */
/*
 * chars.h - the byte classes, word-at-a-time scans and slice helpers that
 * the request parser (parser.c) and the response parser
 * (response_parser.c) share, so that both sides of the library read
 * tokens, field values and line ends by the same rules (RFC 9110 5.5,
 * 5.6.2; RFC 9112 2.2). Everything is static inline: each parser gets its
 * own copy, compiled into its loops.
 */
#ifndef HTTP_CHARS_H
#define HTTP_CHARS_H

#include "parser.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ------------------------------------------------------------ characters */

static inline bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static inline bool is_alpha(unsigned char c)
{
	return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
}

static inline bool is_hex(unsigned char c)
{
	return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

static inline unsigned hex_value(unsigned char c)
{
	return is_digit(c) ? c - (unsigned)'0' : (c | 0x20u) - 'a' + 10u;
}

/* Byte classes by table: a strchr per byte took 4 % of the server's CPU
 * under pipelined load. PATH: a request-target's byte (VCHAR but '#')
 * other than '?', where its path ends, and '%', whose escape is checked. */
enum { TCHAR = 1, REGNAME = 2, PATH = 4, ALL = TCHAR | REGNAME | PATH };

static const uint8_t byte_class[256] = {
	['0' ... '9'] = ALL, ['a' ... 'z'] = ALL, ['A' ... 'Z'] = ALL,
	['!'] = ALL, ['$'] = ALL, ['&'] = ALL, ['\''] = ALL, ['*'] = ALL,
	['+'] = ALL, ['-'] = ALL, ['.'] = ALL, ['_'] = ALL, ['~'] = ALL,
	['#'] = TCHAR, ['%'] = TCHAR, ['^'] = TCHAR | PATH, ['`'] = TCHAR | PATH,
	['|'] = TCHAR | PATH,
	['('] = REGNAME | PATH, [')'] = REGNAME | PATH, [';'] = REGNAME | PATH,
	['='] = REGNAME | PATH,
	['"'] = PATH, [','] = PATH, ['/'] = PATH, [':'] = PATH, ['<'] = PATH, ['>'] = PATH,
	['@'] = PATH, ['['] = PATH, ['\\'] = PATH, [']'] = PATH, ['{'] = PATH, ['}'] = PATH,
};

/* RFC 9110 5.6.2 tchar: DIGIT, ALPHA and "!#$%&'*+-.^_`|~" */
static inline bool is_tchar(unsigned char c)
{
	return byte_class[c] & TCHAR;
}

static inline bool is_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

static inline bool is_vchar(unsigned char c)
{
	return c >= 0x21 && c <= 0x7e;
}

/* A byte of a field value (RFC 9110 5.5): VCHAR, obs-text, SP, HTAB. */
static const bool field_byte[256] = {
	['\t'] = true, [' ' ... '~'] = true, [0x80 ... 0xff] = true,
};

static inline bool is_field_byte(unsigned char c)
{
	return field_byte[c];
}

/* RFC 3986 unreserved and sub-delims, without ',' (see the top):
 * DIGIT, ALPHA and "-._~!$&'()*+;=" */
static inline bool is_regname(unsigned char c)
{
	return byte_class[c] & REGNAME;
}

/* ------------------------------------------------------------------ runs */

/*
 * Runs of ordinary bytes are skipped a word at a time (SWAR): byte loops
 * took most of the parser's time under pipelined load. A test flags the
 * bytes that may end a run (exactly: none is missed, and the lowest flag
 * is always a real one). Tests by subtraction (any_below) can flag a byte
 * falsely, but only with a borrow from a real flag below it; tests on the
 * low seven bits of each byte (x below) carry nothing from byte to byte
 * and flag no other, for fewer operations where the high bit's meaning is
 * simple. On a little-endian machine the first flagged byte is found
 * by counting trailing zeros, and a short tail is tested as the last word
 * of the run, overlapping bytes already known clean; elsewhere, and in
 * a run shorter than a word, the same test a byte at a time finds it.
 */
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

static inline uint64_t load_word(const char *p)
{
	uint64_t w;

	memcpy(&w, p, sizeof(w));
	return w;
}

/* Flags the bytes of w below n (n <= 128). */
static inline uint64_t any_below(uint64_t w, unsigned n)
{
	return (w - ONES * n) & ~w & HIGHS;
}

/* Flags the bytes of w equal to c. */
static inline uint64_t any_equal(uint64_t w, unsigned char c)
{
	return any_below(w ^ (ONES * c), 1);
}

/* CR or LF: is_eol, eol_in. */
static inline bool is_eol(unsigned char c)
{
	return c == '\r' || c == '\n';
}

static inline uint64_t eol_in(uint64_t w)
{
	return any_equal(w, '\r') | any_equal(w, '\n');
}

/* Not VCHAR, SP or obs-text: a control (HTAB too) or DEL. */
static inline bool is_non_field(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

/* Of x's bytes (each 0 to 0x7f): x + 0x60 has the high bit unless below
 * 0x20, x + 1 only for 0x7f; obs-text (w's high bit) is none. */
static inline uint64_t non_field_in(uint64_t w)
{
	uint64_t x = w & ~HIGHS;

	return (~(x + ONES * 0x60) | (x + ONES)) & ~w & HIGHS;
}

/* Where a run of a request-target's query stops: a byte not in a target
 * (not VCHAR, or '#'), or the '%' of an escape, which is checked. */
static inline bool is_query_end(unsigned char c)
{
	return !is_vchar(c) || c == '#' || c == '%';
}

/* As non_field_in: x + 0x5f has the high bit unless below 0x21, and
 * (x ^ '#') + 0x7f unless '#', (x ^ '%') + 0x7f unless '%'; 0x7f, and
 * any byte with the high bit. */
static inline uint64_t query_end_in(uint64_t w)
{
	uint64_t x = w & ~HIGHS;
	uint64_t ok = (x + ONES * 0x5f) & ((x ^ ONES * '#') + ONES * 0x7f) &
	              ((x ^ ONES * '%') + ONES * 0x7f);

	return (w | ~ok | (x + ONES)) & HIGHS;
}

/* As is_query_end, or the first '?': where a run of a target's path stops. */
static inline bool is_path_end(unsigned char c)
{
	return is_query_end(c) || c == '?';
}

/* As query_end_in, (x ^ '?') + 0x7f too. */
static inline uint64_t path_end_in(uint64_t w)
{
	uint64_t x = w & ~HIGHS;
	uint64_t ok = (x + ONES * 0x5f) & ((x ^ ONES * '#') + ONES * 0x7f) &
	              ((x ^ ONES * '%') + ONES * 0x7f) & ((x ^ ONES * '?') + ONES * 0x7f);

	return (w | ~ok | (x + ONES)) & HIGHS;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RUN_EXACT 1
#else
#define RUN_EXACT 0
#endif

/*
 * The first byte of b[i..end) that stops() (flags() is its test on a
 * word), or end, given that b[start..i) is clean. Each caller passes
 * functions that agree, so that the word test and the byte loop, where
 * the word test cannot pin the byte, find the same one.
 */
static inline __attribute__((always_inline)) size_t
skip_run(const char *b, size_t start, size_t i, size_t end, uint64_t (*flags)(uint64_t),
         bool (*stops)(unsigned char))
{
	for (; i + 8 <= end; i += 8) {
		uint64_t m = flags(load_word(b + i));
		if (m && RUN_EXACT)
			return i + (size_t)__builtin_ctzll(m) / 8;
		if (m)
			break;
	}
	if (RUN_EXACT && i < end && end - start >= 8) {
		unsigned known = 8 - (unsigned)(end - i); /* low bytes already clean */
		uint64_t m = flags(load_word(b + end - 8)) >> (8 * known);
		return m ? i + (size_t)__builtin_ctzll(m) / 8 : end;
	}
	while (i < end && !stops((unsigned char)b[i]))
		i++;
	return i;
}

#ifdef __SSE2__
/* The index of m's lowest set bit, m not 0, as a size_t. By hand on
 * x86_64: the builtin's int is sign-extended to a size_t with one more
 * instruction at each of the scans' exits, and GCC clears the result's
 * register before a tzcnt besides (a dependency on older processors,
 * which run it as bsf: the same result for an m not 0). */
static inline size_t lowest_bit(unsigned m)
{
#ifdef __x86_64__
	size_t k;

	__asm__("tzcnt %k1, %k0" : "=r"(k) : "rm"(m) : "cc");
	return k;
#else
	return (size_t)__builtin_ctz(m);
#endif
}

/*
 * The same scans sixteen bytes a step where SSE2 is (all of x86_64): a
 * test on a vector (vec_* below) flags the same bytes as its word test
 * does, bit k of a mask for byte k, in a few compares and a movemask.
 * The compares are signed, so a byte with the high bit is below every
 * ASCII bound.
 */
static inline __m128i load_vec(const char *p)
{
	return _mm_loadu_si128((const __m128i *)(const void *)p);
}

static inline __m128i splat(unsigned char c)
{
	return _mm_set1_epi8((char)c);
}

/* splat(c), made where it is used if fresh: a constant GCC cannot share
 * with a loop's, which it would load into a register before a test ahead
 * of the loop, and copy there for each compare that overwrites it. */
static inline __m128i splat_k(unsigned char c, bool fresh)
{
	__m128i v = splat(c);

	if (fresh)
		__asm__("" : "+x"(v));
	return v;
}

/* The bytes of x in [lo, lo + n) (n at most 128), all ones: x - lo, as
 * unsigned, below n. By one add and one signed compare, x - lo + 0x80
 * below -128 + n, where two compares and an andnot test a range's two
 * bounds. */
static inline __m128i vec_in_range(__m128i x, unsigned char lo, unsigned char n, bool fresh)
{
	return _mm_cmplt_epi8(_mm_add_epi8(x, splat_k((unsigned char)(0x80 - lo), fresh)),
	                      splat_k((unsigned char)(0x80 + n), fresh));
}

/* As non_field_in: below SP (unsigned: the min with 0x1f is the byte
 * itself), or DEL. */
static inline unsigned vec_non_field(__m128i x)
{
	__m128i low = _mm_cmpeq_epi8(_mm_min_epu8(x, splat(0x1f)), x);

	return (unsigned)_mm_movemask_epi8(_mm_or_si128(low, _mm_cmpeq_epi8(x, splat(0x7f))));
}

/* The bytes of x outside [lo, lo + n) (n from 1 to 128), all ones: as
 * vec_in_range, x - lo + 0x80 above -128 + n - 1, signed: the flags come
 * out as a scan wants them, no negation after the movemask. The bound is
 * opaque (splat_k): a constant one, GCC turned the compare into its
 * opposite and a second compare against zero to negate it. */
static inline __m128i vec_out_of_range(__m128i x, unsigned char lo, unsigned char n)
{
	return _mm_cmpgt_epi8(_mm_add_epi8(x, splat((unsigned char)(0x80 - lo))),
	                      splat_k((unsigned char)(0x80 + n - 1), true));
}

/* As query_end_in: not VCHAR ('!' to '~', one range: DEL and the bytes
 * with the high bit are outside it), '#' or '%'. One range test and
 * compares, where testing SP's bound, then DEL and '#' by equality taken
 * away by an andnot, cost two more compares and a negation. */
static inline unsigned vec_query_end(__m128i x)
{
	__m128i odd = _mm_or_si128(_mm_cmpeq_epi8(x, splat('#')), _mm_cmpeq_epi8(x, splat('%')));

	return (unsigned)_mm_movemask_epi8(
	        _mm_or_si128(vec_out_of_range(x, '!', '~' - '!' + 1), odd));
}

/* As path_end_in: vec_query_end, or '?'. */
static inline unsigned vec_path_end(__m128i x)
{
	__m128i odd = _mm_or_si128(_mm_cmpeq_epi8(x, splat('#')), _mm_cmpeq_epi8(x, splat('?')));

	odd = _mm_or_si128(odd, _mm_cmpeq_epi8(x, splat('%')));
	return (unsigned)_mm_movemask_epi8(
	        _mm_or_si128(vec_out_of_range(x, '!', '~' - '!' + 1), odd));
}

/* As skip_run (the same contract, the same flags and stops), with a
 * vector test vflags of the same bytes: sixteen bytes a step, then a
 * short tail as the last sixteen bytes before end, their flags below i
 * shifted out (a vector's test, unlike a word's, carries nothing from
 * byte to byte: the bytes before i need not be clean, only readable, as
 * b[0..end) is at every caller). Input shorter than that is skip_run's. */
static inline __attribute__((always_inline)) size_t
skip_vec(const char *b, size_t start, size_t i, size_t end, unsigned (*vflags)(__m128i),
         uint64_t (*flags)(uint64_t), bool (*stops)(unsigned char))
{
	for (; i + 16 <= end; i += 16) {
		unsigned m = vflags(load_vec(b + i));
		if (m)
			return i + lowest_bit(m);
	}
	if (i < end && end >= 16) {
		unsigned m = vflags(load_vec(b + end - 16)) >> (16 - (end - i));
		return m ? i + lowest_bit(m) : end;
	}
	return skip_run(b, start, i, end, flags, stops);
}
#define SKIP_RUN(b, start, i, end, name) \
	skip_vec(b, start, i, end, vec_##name, name##_in, is_##name)

/* As skip_vec, the first sixteen bytes tested before its loop, for a run
 * that is mostly shorter (a field value): a test and a branch where the
 * loop's entry cost a few more. (Peeled at every skip_vec it cost more
 * than it saved, in the parsers' other scans: measured.) */
static inline __attribute__((always_inline)) size_t
skip_vec_short(const char *b, size_t start, size_t i, size_t end, unsigned (*vflags)(__m128i),
               uint64_t (*flags)(uint64_t), bool (*stops)(unsigned char))
{
	if (i + 16 <= end) {
		unsigned m = vflags(load_vec(b + i));
		if (__builtin_expect(m != 0, 1))
			return i + lowest_bit(m);
		i += 16; /* b[start..i) clean still, as skip_vec asks */
	}
	return skip_vec(b, start, i, end, vflags, flags, stops);
}
#define SKIP_SHORT_RUN(b, start, i, end, name) \
	skip_vec_short(b, start, i, end, vec_##name, name##_in, is_##name)
#else
#define SKIP_RUN(b, start, i, end, name) skip_run(b, start, i, end, name##_in, is_##name)
#define SKIP_SHORT_RUN SKIP_RUN
#endif

/* The first byte of b[i..end) not of class cls (TCHAR, REGNAME), or end:
 * eight bytes a step while eight are left, each a table load and a
 * branch (no bound test per byte), then one at a time. */
static inline __attribute__((always_inline)) size_t
skip_class(const char *b, size_t i, size_t end, uint8_t cls)
{
	const unsigned char *u = (const unsigned char *)b;

	for (; i + 8 <= end; i += 8) {
#pragma GCC unroll 8
		for (size_t k = 0; k < 8; k++)
			if (!(byte_class[u[i + k]] & cls))
				return i + k;
	}
	while (i < end && (byte_class[u[i]] & cls))
		i++;
	return i;
}

#ifdef __SSE2__
/* A letter, a digit, '-' or '.': what host names and field names are
 * mostly made of. Not a class: it is less than REGNAME and than TCHAR,
 * so a test that flags the bytes it lacks flags every one of either
 * class's outsiders, and the table tells the rest. */
static inline unsigned vec_not_name_k(__m128i x, bool fresh)
{
	__m128i letter = vec_in_range(_mm_or_si128(x, splat_k(0x20, fresh)), 'a', 26, fresh);
	__m128i digit = vec_in_range(x, '-', 13, fresh); /* "-./0-9" */
	__m128i ok = _mm_andnot_si128(_mm_cmpeq_epi8(x, splat_k('/', fresh)),
	                              _mm_or_si128(letter, digit));

	return (unsigned)_mm_movemask_epi8(ok) ^ 0xffffu;
}

static inline unsigned vec_not_name(__m128i x)
{
	return vec_not_name_k(x, false);
}

/* Of the flags m of the sixteen bytes at b + at, the first whose byte is
 * not of class cls (by the table), or none: the index, or SIZE_MAX. */
static inline __attribute__((always_inline)) size_t
first_outside(const char *b, size_t at, unsigned m, uint8_t cls)
{
	for (; m; m &= m - 1) {
		size_t k = at + lowest_bit(m);
		if (!(byte_class[(unsigned char)b[k]] & cls))
			return k;
	}
	return SIZE_MAX;
}
#endif

/* As skip_class for REGNAME or TCHAR, a run that is mostly names'
 * bytes: where SSE2 is, sixteen bytes a step, the table asked only at
 * the bytes vec_not_name flags, and a short tail as in skip_vec (b[0..end)
 * readable); else skip_class itself. Its constants cost more than the
 * table for a short run: for hosts and field names, not tokens. */
static inline __attribute__((always_inline)) size_t
skip_name_class(const char *b, size_t i, size_t end, uint8_t cls)
{
#ifdef __SSE2__
	size_t k;

	for (; i + 16 <= end; i += 16)
		if ((k = first_outside(b, i, vec_not_name(load_vec(b + i)), cls)) != SIZE_MAX)
			return k;
	if (i < end && end >= 16) {
		unsigned m = vec_not_name(load_vec(b + end - 16)) >> (16 - (end - i));
		k = first_outside(b, i, m, cls);
		return k != SIZE_MAX ? k : end;
	}
#endif
	return skip_class(b, i, end, cls);
}

/* As skip_name_class, the first sixteen bytes tested before its loop, as
 * skip_vec_short does: for a run that is mostly shorter (a Host). */
static inline __attribute__((always_inline)) size_t
skip_name_class_short(const char *b, size_t i, size_t end, uint8_t cls)
{
#ifdef __SSE2__
	if (i + 16 <= end) {
		/* first_outside's loop, returning from inside: through its
		 * SIZE_MAX, GCC tested the index found a second time */
		for (unsigned m = vec_not_name_k(load_vec(b + i), true); m; m &= m - 1) {
			size_t k = i + lowest_bit(m);
			if (!(byte_class[(unsigned char)b[k]] & cls))
				return k;
		}
		i += 16;
	}
#endif
	return skip_name_class(b, i, end, cls);
}

static inline size_t skip_tchars(const char *b, size_t i, size_t end)
{
	return skip_class(b, i, end, TCHAR);
}

/* Past the OWS at b[i..end): one space, the common case, in one test. */
static inline size_t skip_ows(const char *b, size_t i, size_t end)
{
	if (i + 1 < end && b[i] == ' ' && !is_ows((unsigned char)b[i + 1]))
		return i + 1;
	while (i < end && is_ows((unsigned char)b[i]))
		i++;
	return i;
}

/* ---------------------------------------------------------------- slices */

/* Case-insensitive compare of p[0..n) with lit, a byte at a time. */
static inline bool slice_ieq_bytes(const char *p, size_t n, const char *lit)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char a = (unsigned char)p[i], b = (unsigned char)lit[i];
		/* Equal bytes, the common case, in one compare; else two
		 * letters that differ in case only (a letter's | 0x20 is a
		 * lowercase letter, which only letters give). */
		if (a != b && (!is_alpha(a) || (a | 0x20) != (b | 0x20)))
			return false;
	}
	return true;
}

/* The first k (<= 8) bytes of a literal as a word, letters lowercased,
 * and the mask of its letters' case bit (word_ieq says why). */
static inline __attribute__((always_inline)) void
lit_fold(const char *lit, size_t k, uint64_t *want, uint64_t *fold)
{
	*want = *fold = 0;
#pragma GCC unroll 8
	for (size_t i = 0; i < k; i++) {
		unsigned char c = (unsigned char)lit[i];
		bool letter = is_alpha(c);
		*want |= (uint64_t)(letter ? c | 0x20 : c) << (8 * i);
		*fold |= (uint64_t)(letter ? 0x20 : 0) << (8 * i);
	}
}

/* Up to 8 bytes of p against the same of a literal: a letter of the
 * literal matches its two cases (x | 0x20 is a lowercase letter only
 * for that letter and its capital), any other byte only itself. With a
 * literal, k constant and the function inlined, the literal's word and
 * its letter mask fold to constants: one load, an OR and a compare. */
static inline __attribute__((always_inline)) bool
word_ieq(const char *p, const char *lit, size_t k)
{
	uint64_t w = 0, want, fold;

	memcpy(&w, p, k);
	lit_fold(lit, k, &want, &fold);
	return (w | fold) == want;
}

/* The 8 bytes at p against the literal's first k (k <= 8; the bytes past
 * k are not compared), letters in either case: as word_ieq, from a whole
 * word (8 bytes readable at p) masked, so the compare is one load, an OR,
 * an AND and a compare. Byte order matters only here: elsewhere than on a
 * little-endian machine the bytes are compared one at a time. */
static inline __attribute__((always_inline)) bool
word_ieq_masked(const char *p, const char *lit, size_t k)
{
#if RUN_EXACT
	uint64_t want, fold, mask = k >= 8 ? ~0ull : (1ull << (8 * k)) - 1;

	lit_fold(lit, k, &want, &fold);
	return ((load_word(p) | fold) & mask) == want;
#else
	return slice_ieq_bytes(p, k, lit);
#endif
}

/* p starts with lit (1 to 24 bytes, a literal) but for the case of its
 * letters, with avail bytes readable at p: false if fewer than the
 * compare reads (the literal's length, and 8 at least). Longer than 8,
 * whole words from the start and the literal's last 8 bytes (which may
 * overlap the word before) are compared. */
static inline __attribute__((always_inline)) bool
prefix_ieq(const char *p, size_t avail, const char *lit)
{
	size_t n = strlen(lit);

	if (n <= 8)
		return avail >= 8 && word_ieq_masked(p, lit, n);
	return avail >= n && word_ieq_masked(p, lit, 8) &&
	       (n <= 16 || word_ieq_masked(p + 8, lit + 8, 8)) &&
	       word_ieq_masked(p + n - 8, lit + n - 8, 8);
}

/* p[0..n) equals lit but for the case of its letters. Inlined
 * so that strlen(lit) of a literal is folded at each call, and literals
 * up to 16 bytes compare a word at a time. */
static inline __attribute__((always_inline)) bool slice_ieq(const char *p, size_t n, const char *lit)
{
	size_t len = strlen(lit);

	if (len != n)
		return false;
	if (!__builtin_constant_p(len) || len > 16)
		return slice_ieq_bytes(p, n, lit);
	if (len <= 8)
		return word_ieq(p, lit, len);
	return word_ieq(p, lit, 8) && word_ieq(p + 8, lit + 8, len - 8);
}

static inline __attribute__((always_inline)) bool slice_eq(struct http_slice s, const char *lit)
{
	return strlen(lit) == s.len && memcmp(s.p, lit, s.len) == 0;
}

/*
 * The next element of the comma-separated list at *cur..end, OWS around
 * it removed (it may be empty, RFC 9110 5.6.1 says to ignore those).
 * Returns false when the list is exhausted.
 */
static inline bool next_element(const char **cur, const char *end, struct http_slice *el)
{
	const char *p = *cur, *q;

	if (!p)
		return false;
	q = p;
	while (q < end && *q != ',')
		q++;
	*cur = q < end ? q + 1 : NULL;
	while (p < q && is_ows((unsigned char)*p))
		p++;
	while (q > p && is_ows((unsigned char)q[-1]))
		q--;
	*el = (struct http_slice){ p, (size_t)(q - p) };
	return true;
}

/* The first CR or LF in b[i..end), or end. */
static inline size_t find_eol(const char *b, size_t i, size_t end)
{
	return skip_run(b, i, i, end, eol_in, is_eol);
}

/* field_value_end past a tab at b[i]: a tab is a field byte, though a
 * control. Rare, so kept out of the callers' loops. Each run starts after
 * its tab, as skip_run asks (the bytes before i clean: its short tail may
 * overlap those only). */
static __attribute__((noinline)) size_t past_tabs(const char *b, size_t i, size_t end)
{
	while (i < end && b[i] == '\t')
		i = SKIP_RUN(b, i + 1, i + 1, end, non_field);
	return i;
}

/* Where a field value that starts at v stops: its first byte that is no
 * field byte (CR or LF, if the line is well-formed), or end. The same scan
 * finds the line's end and checks the value: one pass over it. */
static inline __attribute__((always_inline)) size_t
field_value_end(const char *b, size_t v, size_t end)
{
	size_t i = SKIP_RUN(b, v, v, end, non_field);

	return i < end && b[i] == '\t' ? past_tabs(b, i, end) : i;
}

/*
 * The next element of the comma-separated list of tokens at *cur..end
 * (RFC 9110 5.6.1; empty elements, and the OWS around each, are skipped):
 * 1 with the token in *el, 0 once the list is exhausted, -1 at an element
 * that is no token (the elements before it are returned first). One pass
 * over each: a token, then OWS, then a comma or the end.
 */
static inline int next_token(const char **cur, const char *end, struct http_slice *el)
{
	const char *p = *cur, *q;

	while (p < end && (is_ows((unsigned char)*p) || *p == ','))
		p++;
	if (p == end)
		return 0;
	q = p + skip_tchars(p, 0, (size_t)(end - p));
	*el = (struct http_slice){ p, (size_t)(q - p) };
	while (q < end && is_ows((unsigned char)*q))
		q++;
	*cur = q;
	return el->len > 0 && (q == end || *q == ',') ? 1 : -1;
}

/* One Connection option: "close" or "keep-alive" noted, any other
 * ignored. */
static inline void connection_option(struct http_slice el, bool *close, bool *keep)
{
	if (slice_ieq(el.p, el.len, "close"))
		*close = true;
	else if (slice_ieq(el.p, el.len, "keep-alive"))
		*keep = true;
}

/* A Connection field's options: "close" and "keep-alive" noted in *close
 * and *keep (left as they are otherwise). false for an element that is no
 * token. Both parsers read the field by this. A value of one token, the
 * common case, is no list to walk; one that is either option, no token to
 * check either (both are tokens). */
static inline bool connection_options(struct http_slice v, bool *close, bool *keep)
{
	const char *cur = v.p;
	struct http_slice el;
	int rc;

	if (slice_ieq(v.p, v.len, "keep-alive"))
		return *keep = true;
	if (slice_ieq(v.p, v.len, "close"))
		return *close = true;
	if (v.len && skip_tchars(v.p, 0, v.len) == v.len) {
		connection_option(v, close, keep);
		return true;
	}
	while ((rc = next_token(&cur, v.p + v.len, &el)) > 0)
		connection_option(el, close, keep);
	return rc == 0;
}

#endif /* HTTP_CHARS_H */
