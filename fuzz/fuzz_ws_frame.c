/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ws_frame.c - libFuzzer target for WebSocket framing
 * (http/ws_frame.c): the input is a byte stream a peer sent, read as a
 * WebSocket reader reads it - frame heads, payloads unmasked and fed to
 * the message reader (text checked as UTF-8) - until the stream ends or
 * a head or payload fails the connection.
 *
 * The first input byte picks the side and the rules (bit 0: the reader
 * is a server, reading masked frames; bit 1: permessage-deflate agreed,
 * RSV1 allowed; bits 2-3: frame_max 125, 64 KiB, 2^40 or none; bits 4-5:
 * message_max the same). Besides the sanitizers' findings, any broken
 * invariant traps:
 *   - every prefix of a head parses as incomplete or as the whole does
 *     (no early success; an error only where the whole errs too, as a
 *     bad first two bytes fail at once);
 *   - a head: its length within 2..14 and the input, a control frame
 *     whole and at most 125 bytes, masked as the side requires, its
 *     length within frame_max; written again by runtime__ws_head_put it
 *     is the same bytes (the shortest form is the only form);
 *   - unmasking in two pieces equals unmasking at once;
 *   - a failure is 1002, 1007 or 1009, negated;
 *   - UTF-8: fed whole and byte by byte, the same verdict.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ihttp \
 *       fuzz/fuzz_ws_frame.c http/ws_frame.c
 *   ./a.out fuzz/corpus/ws
 */
#include "ws.h"

#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                        \
	do {                               \
		if (!(cond))               \
			__builtin_trap();  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint64_t limits[] = { 125, 64 * 1024, 1ull << 40, UINT64_MAX };

/* Each prefix of the head (of the first WS_HEAD_MAX bytes if it failed
 * or is cut short) parses as incomplete, or fails as the whole does. */
static void check_prefixes(const uint8_t *p, size_t n, const struct ws_rules *rules, int whole)
{
	struct ws_head h;
	size_t end = whole > 0 ? (size_t)whole : n < WS_HEAD_MAX ? n : WS_HEAD_MAX;

	for (size_t k = 0; k < end; k++) {
		int rc = runtime__ws_head_parse(p, k, rules, &h);
		CHECK(rc == 0 || (rc < 0 && rc == whole));
	}
}

static void check_head(const uint8_t *p, size_t n, const struct ws_rules *rules,
                       const struct ws_head *h, int rc)
{
	uint8_t again[WS_HEAD_MAX];

	CHECK(rc >= 2 && rc <= WS_HEAD_MAX && (size_t)rc <= n && (size_t)rc == h->head_len);
	CHECK(!(h->opcode & 0x8) || (h->fin && h->len <= WS_CONTROL_MAX && !h->rsv));
	CHECK(h->masked == rules->from_client && h->len <= rules->frame_max);
	CHECK(!(h->rsv & ~rules->rsv));
	size_t m = runtime__ws_head_put(again, h->fin, h->rsv, h->opcode,
	                                h->masked ? h->mask : NULL, h->len);
	CHECK(m == (size_t)rc && !memcmp(again, p, m));
}

/* The payload's bytes unmasked, whole and in two pieces: the same. */
static uint8_t *unmasked(const uint8_t *p, size_t n, const struct ws_head *h)
{
	uint8_t *a = malloc(n + 1), *b = malloc(n + 1);

	memcpy(a, p, n);
	memcpy(b, p, n);
	if (h->masked) {
		runtime__ws_mask(a, n, h->mask, 0);
		size_t cut = n / 3;
		runtime__ws_mask(b, cut, h->mask, 0);
		runtime__ws_mask(b + cut, n - cut, h->mask, cut);
	}
	CHECK(!memcmp(a, b, n));
	free(b);
	return a;
}

static void check_utf8(const uint8_t *p, size_t n)
{
	struct ws_utf8 a = { 0 }, b = { 0 };
	bool whole = runtime__ws_utf8_feed(&a, p, n), bytes = true;

	for (size_t i = 0; i < n && bytes; i++)
		bytes = runtime__ws_utf8_feed(&b, p + i, 1);
	CHECK(whole == bytes);
}

/* One frame from p[0..n): the bytes it took, or 0 to stop. */
static size_t one_frame(const uint8_t *p, size_t n, const struct ws_rules *rules,
                        struct ws_reader *r)
{
	struct ws_head h;
	int rc = runtime__ws_head_parse(p, n, rules, &h);

	check_prefixes(p, n, rules, rc);
	if (rc <= 0) {
		CHECK(rc == 0 || rc == -WS_PROTOCOL_ERROR || rc == -WS_TOO_BIG);
		return 0;
	}
	check_head(p, n, rules, &h, rc);
	if (h.len > n - (size_t)rc)
		return 0; /* the payload never came whole */
	int mrc = runtime__ws_reader_frame(r, &h);
	CHECK(mrc == 0 || mrc == -WS_PROTOCOL_ERROR || mrc == -WS_TOO_BIG);
	if (mrc < 0)
		return 0;
	uint8_t *payload = unmasked(p + rc, (size_t)h.len, &h);
	check_utf8(payload, (size_t)h.len);
	int prc = 0;
	if (!(h.opcode & 0x8)) {
		prc = runtime__ws_reader_payload(r, payload, (size_t)h.len);
		if (prc == 0 && h.fin)
			prc = runtime__ws_reader_end(r);
	}
	free(payload);
	CHECK(prc == 0 || prc == -WS_INVALID_DATA);
	return prc < 0 ? 0 : (size_t)rc + (size_t)h.len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t opt = data[0];
	struct ws_rules rules = { opt & 1, (opt & 2) ? WS_RSV1 : 0, limits[(opt >> 2) & 3] };
	struct ws_reader r = { .message_max = limits[(opt >> 4) & 3] };
	const uint8_t *p = data + 1;
	size_t n = size - 1, used;

	while (n && (used = one_frame(p, n, &rules, &r)) > 0) {
		p += used;
		n -= used;
	}
	return 0;
}
