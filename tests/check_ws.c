/* SPDX-License-Identifier: MIT */
/*
 * check_ws.c - WebSocket framing (http/ws_frame.c), pure: frame heads
 * written and read back at every length boundary, each prefix of a head
 * asking for more; every head RFC 6455 refuses (reserved opcodes and RSV
 * bits, control frames in pieces or over 125 bytes, masks on the wrong
 * side, lengths not in their shortest form or with the top bit, a 2^62
 * length over the limit); masking in pieces at every offset; UTF-8
 * against a reference decoder over every sequence of up to three bytes
 * and a sample of four, fed whole and split; frames in message order.
 */
#include "ws.h"

#include <check.h>
#include "ck_fast.h" /* no write per passing assertion */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct ws_rules from_client = { true, 0, UINT64_MAX };
static const struct ws_rules from_server = { false, 0, UINT64_MAX };

/* ----------------------------------------------------------------- heads */

START_TEST(test_ws_head_round_trip)
{
	static const uint64_t lens[] = { 0, 1, 125, 126, 127, 65535, 65536, 1ull << 32,
		                         (1ull << 63) - 1 };
	static const uint8_t ops[] = { WS_CONTINUATION, WS_TEXT, WS_BINARY };
	static const uint8_t key[4] = { 0x12, 0x34, 0x56, 0x78 };
	uint8_t buf[WS_HEAD_MAX];
	struct ws_head h;

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (int masked = 0; masked < 2; masked++)
			for (size_t o = 0; o < sizeof(ops); o++) {
				bool fin = (i + o) & 1;
				size_t n = runtime__ws_head_put(buf, fin, 0, ops[o], masked ? key : NULL,
				                                lens[i]);
				size_t want = 2 + (lens[i] < 126 ? 0 : lens[i] <= 0xFFFF ? 2 : 8) +
				              (masked ? 4 : 0);
				ck_assert_uint_eq(n, want);
				const struct ws_rules *r = masked ? &from_client : &from_server;
				for (size_t k = 0; k < n; k++) /* a prefix: more, please */
					ck_assert_int_eq(runtime__ws_head_parse(buf, k, r, &h), 0);
				ck_assert_int_eq(runtime__ws_head_parse(buf, n, r, &h), (int)n);
				ck_assert(h.fin == fin && h.opcode == ops[o] && h.rsv == 0);
				ck_assert(h.masked == masked && h.len == lens[i] && h.head_len == n);
				ck_assert(!masked || !memcmp(h.mask, key, 4));
			}
	/* Control frames: at most 125 bytes, whole. */
	size_t n = runtime__ws_head_put(buf, true, 0, WS_PING, key, 125);
	ck_assert_int_eq(runtime__ws_head_parse(buf, n, &from_client, &h), (int)n);
	ck_assert(h.opcode == WS_PING && h.len == 125);
	/* RSV1 where an extension allows it. */
	struct ws_rules deflate = { true, WS_RSV1, UINT64_MAX };
	n = runtime__ws_head_put(buf, true, WS_RSV1, WS_TEXT, key, 10);
	ck_assert_int_eq(runtime__ws_head_parse(buf, n, &deflate, &h), (int)n);
	ck_assert_uint_eq(h.rsv, WS_RSV1);
}
END_TEST

/* b0 b1 (and ext) as a head from a client (masked: the key appended),
 * under rules: the parse's result. */
static int parse_bytes(const uint8_t *b, size_t n, const struct ws_rules *r)
{
	uint8_t buf[32];
	struct ws_head h;

	memcpy(buf, b, n);
	memset(buf + n, 0xAA, 4); /* a key, if masked */
	return runtime__ws_head_parse(buf, n + ((b[1] & 0x80) ? 4 : 0), r, &h);
}

START_TEST(test_ws_head_refusals)
{
	static const struct { uint8_t b[10]; size_t n; int want; const char *what; } bad[] = {
		{ { 0x83, 0x80 }, 2, -1002, "opcode 3" },
		{ { 0x87, 0x80 }, 2, -1002, "opcode 7" },
		{ { 0x8B, 0x80 }, 2, -1002, "opcode 11" },
		{ { 0x8F, 0x80 }, 2, -1002, "opcode 15" },
		{ { 0xC1, 0x80 }, 2, -1002, "RSV1 not agreed" },
		{ { 0xA1, 0x80 }, 2, -1002, "RSV2" },
		{ { 0x91, 0x80 }, 2, -1002, "RSV3" },
		{ { 0x09, 0x80 }, 2, -1002, "a ping in pieces" },
		{ { 0x08, 0x80 }, 2, -1002, "a close in pieces" },
		{ { 0x89, 0xFE, 0x00, 0x7E }, 4, -1002, "a ping of 126 bytes" },
		{ { 0x8A, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0x7E }, 10, -1002, "a pong, 64-bit length" },
		{ { 0x81, 0x05 }, 2, -1002, "unmasked from a client" },
		{ { 0x82, 0xFE, 0x00, 0x7D }, 4, -1002, "125 in 16 bits" },
		{ { 0x82, 0xFF, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF }, 10, -1002, "65535 in 64 bits" },
		{ { 0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0 }, 10, -1002, "2^63: the top bit" },
		{ { 0x82, 0xFF, 0x40, 0, 0, 0, 0, 0, 0, 0 }, 10, -1009, "2^62: over the limit" },
	};
	struct ws_rules limited = { true, 0, 1 << 20 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(parse_bytes(bad[i].b, bad[i].n, &limited) == bad[i].want, "%s: %d",
		              bad[i].what, parse_bytes(bad[i].b, bad[i].n, &limited));
	/* A mask on a server's frame. */
	uint8_t masked[] = { 0x81, 0x85 };
	ck_assert_int_eq(parse_bytes(masked, 2, &from_server), -1002);
	/* RSV1 on a control frame, even with deflate agreed. */
	struct ws_rules deflate = { true, WS_RSV1, UINT64_MAX };
	uint8_t ping[] = { 0xC9, 0x80 };
	ck_assert_int_eq(parse_bytes(ping, 2, &deflate), -1002);
	/* The limit exactly, and one over. */
	uint8_t at[] = { 0x82, 0xFF, 0, 0, 0, 0, 0, 0x10, 0, 0 }, over[] = { 0x82, 0xFF, 0, 0, 0, 0,
		                                                                0, 0x10, 0, 1 };
	ck_assert_int_eq(parse_bytes(at, 10, &limited), 14);
	ck_assert_int_eq(parse_bytes(over, 10, &limited), -1009);
	/* A bad first byte is refused before the rest comes. */
	uint8_t early[] = { 0x83, 0xFF };
	ck_assert_int_eq(parse_bytes(early, 2, &limited), -1002);
}
END_TEST

/* ----------------------------------------------------------------- masks */

START_TEST(test_ws_mask_in_pieces)
{
	static const uint8_t key[4] = { 0xA5, 0x3C, 0x0F, 0xF0 };
	uint8_t data[300], ref[300];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	for (size_t i = 0; i < sizeof(data); i++)
		ref[i] = data[i] ^ key[i & 3];
	for (size_t cut = 0; cut <= 40; cut++) /* two pieces, cut anywhere */
		for (size_t start = 0; start < 9; start++) {
			uint8_t d[300];
			memcpy(d, data, sizeof(d));
			size_t len = sizeof(d) - start;
			runtime__ws_mask(d + start, cut < len ? cut : len, key, start);
			if (cut < len)
				runtime__ws_mask(d + start + cut, len - cut, key, start + cut);
			ck_assert_msg(!memcmp(d + start, ref + start, len), "start %zu cut %zu", start,
			              cut);
		}
	runtime__ws_mask(data, 0, key, 5); /* nothing */
}
END_TEST

/* ----------------------------------------------------------------- UTF-8 */

/* The reference: p[0..n) decoded code point by code point from its bits,
 * each checked against the smallest value its length may carry, the
 * surrogates and U+10FFFF. Whole: no sequence cut short at the end. */
static bool reference_utf8(const uint8_t *p, size_t n, bool *cut)
{
	*cut = false;
	for (size_t i = 0; i < n;) {
		uint8_t b = p[i];
		size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
		if (!len)
			return false;
		uint32_t cp = len == 1 ? b : len == 2 ? b & 0x1F : len == 3 ? b & 0x0F : b & 0x07;
		for (size_t k = 1; k < len; k++) {
			if (i + k >= n) {
				*cut = true; /* valid so far if what came fits */
				return true;
			}
			if ((p[i + k] & 0xC0) != 0x80)
				return false;
			cp = cp << 6 | (p[i + k] & 0x3F);
		}
		static const uint32_t least[] = { 0, 0, 0x80, 0x800, 0x10000 };
		if (cp < least[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
			return false;
		i += len;
	}
	return true;
}

/* p[0..n), fed at once and byte by byte: its verdict, -1 if the two
 * differ. */
static int ours(const uint8_t *p, size_t n, bool *whole)
{
	struct ws_utf8 a = { 0 }, b = { 0 };
	bool ok = runtime__ws_utf8_feed(&a, p, n), ok_bytes = true;

	for (size_t i = 0; i < n && ok_bytes; i++)
		ok_bytes = runtime__ws_utf8_feed(&b, p + i, 1);
	*whole = runtime__ws_utf8_whole(&a);
	return ok == ok_bytes ? ok : -1;
}

static char disagreed[128]; /* the first sequence where they differ */

/* Do ours and the reference agree on p[0..n)? Whole sequences: the same
 * verdict, and valid ones whole. A cut one: if ours takes it, not whole
 * (the reference checks whole code points only: ours may refuse a prefix
 * that can lead to nothing, which the longer ones then show). No
 * ck_assert here: it is called 16 million times. */
static void agree(const uint8_t *p, size_t n)
{
	bool cut, whole;
	bool ref = reference_utf8(p, n, &cut);
	int got = ours(p, n, &whole);
	bool ok = got >= 0 && (cut ? !got || !whole : ref == (bool)got && (!got || whole));

	if (!ok && !disagreed[0])
		snprintf(disagreed, sizeof(disagreed), "%02x %02x %02x %02x (%zu): ref %d ours %d",
		         p[0], n > 1 ? p[1] : 0, n > 2 ? p[2] : 0, n > 3 ? p[3] : 0, n, ref, got);
}

START_TEST(test_ws_utf8_against_a_reference)
{
	uint8_t s[4];

	for (unsigned a = 0; a < 256; a++) {
		s[0] = (uint8_t)a;
		agree(s, 1);
		for (unsigned b = 0; b < 256; b++) {
			s[1] = (uint8_t)b;
			agree(s, 2);
			for (unsigned c = 0; c < 256; c++) {
				s[2] = (uint8_t)c;
				agree(s, 3);
			}
		}
	}
	static const uint8_t edge[] = { 0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,
		                        0xC0, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF };
	for (size_t a = 0; a < sizeof(edge); a++)
		for (size_t b = 0; b < sizeof(edge); b++)
			for (size_t c = 0; c < sizeof(edge); c++)
				for (size_t d = 0; d < sizeof(edge); d++) {
					uint8_t q[4] = { edge[a], edge[b], edge[c], edge[d] };
					agree(q, 4);
				}
	ck_assert_msg(!disagreed[0], "%s", disagreed);
}
END_TEST

START_TEST(test_ws_utf8_known_cases_split_anywhere)
{
	static const struct { const char *s; bool ok, whole; } cases[] = {
		{ "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", true, true }, /* kosme */
		{ "Hello-\xc2\xb5@\xc3\x9f\xc3\xb6\xc3\xa4\xc3\xbc\xc3\xa0\xc3\xa1-UTF-8!!", true, true },
		{ "\xf0\x90\x80\x80 \xf4\x8f\xbf\xbf", true, true }, /* U+10000, U+10FFFF */
		{ "\xc0\xaf", false, false },                           /* overlong '/' */
		{ "\xe0\x80\xaf", false, false },                       /* overlong, 3 bytes */
		{ "\xed\xa0\x80", false, false },                       /* a surrogate */
		{ "\xf4\x90\x80\x80", false, false },                   /* past U+10FFFF */
		{ "\xf8\x88\x80\x80\x80", false, false },               /* 5 bytes */
		{ "abc\xe2\x82", true, false },                         /* cut short */
		{ "\x80", false, false },                               /* a lone continuation */
		{ "0123456789abcdef\xce\xba", true, true },             /* past a word of ASCII */
		{ "0123456789abcde\xff", false, false },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const uint8_t *p = (const uint8_t *)cases[i].s;
		size_t n = strlen(cases[i].s);
		for (size_t cut = 0; cut <= n; cut++) {
			struct ws_utf8 u = { 0 };
			bool ok = runtime__ws_utf8_feed(&u, p, cut) && runtime__ws_utf8_feed(&u, p + cut,
			                                                                     n - cut);
			ck_assert_msg(ok == cases[i].ok, "case %zu cut %zu", i, cut);
			if (ok)
				ck_assert_msg(runtime__ws_utf8_whole(&u) == cases[i].whole, "case %zu", i);
		}
	}
}
END_TEST

/* -------------------------------------------------------------- messages */

static struct ws_head head_of(bool fin, uint8_t rsv, uint8_t op, uint64_t len)
{
	return (struct ws_head){ .fin = fin, .rsv = rsv, .opcode = op, .masked = true, .len = len };
}

START_TEST(test_ws_frames_in_message_order)
{
	struct ws_reader r = { .message_max = 100 };
	struct ws_head h;

	h = head_of(false, 0, WS_CONTINUATION, 1);
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), -1002); /* no message */
	h = head_of(false, 0, WS_TEXT, 3);
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), 0);
	ck_assert_int_eq(runtime__ws_reader_payload(&r, (const uint8_t *)"a\xce", 2), 0);
	h = head_of(true, 0, WS_PING, 0); /* between fragments: fine */
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), 0);
	h = head_of(false, 0, WS_BINARY, 1);
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), -1002); /* a message under way */
	h = head_of(false, WS_RSV1, WS_CONTINUATION, 1);
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), -1002); /* RSV1: first frame only */
	h = head_of(true, 0, WS_CONTINUATION, 1);
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), 0);
	ck_assert_int_eq(runtime__ws_reader_payload(&r, (const uint8_t *)"\xba", 1), 0); /* split */
	ck_assert_int_eq(runtime__ws_reader_end(&r), 0);
	/* Text cut short at the end, text that is not UTF-8, binary that is
	 * anything, a message over message_max. */
	h = head_of(true, 0, WS_TEXT, 2);
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), 0);
	ck_assert_int_eq(runtime__ws_reader_payload(&r, (const uint8_t *)"a\xe2", 2), 0);
	ck_assert_int_eq(runtime__ws_reader_end(&r), -1007);
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), 0);
	ck_assert_int_eq(runtime__ws_reader_payload(&r, (const uint8_t *)"\xc0\xaf", 2), -1007);
	r.in_message = false;
	h = head_of(true, 0, WS_BINARY, 2);
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), 0);
	ck_assert_int_eq(runtime__ws_reader_payload(&r, (const uint8_t *)"\xc0\xaf", 2), 0);
	ck_assert_int_eq(runtime__ws_reader_end(&r), 0);
	h = head_of(false, WS_RSV1, WS_BINARY, 60);
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), 0);
	ck_assert(r.compressed);
	h = head_of(false, 0, WS_CONTINUATION, 40);
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), 0); /* 100: the limit exactly */
	h = head_of(true, 0, WS_CONTINUATION, 1);
	ck_assert_int_eq(runtime__ws_reader_frame(&r, &h), -1009);
}
END_TEST

/* ------------------------------------------------------- the handshake */

static void hex(const uint8_t *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
}

/* SHA-1 against FIPS 180's examples (the 56-byte one pads into a second
 * block, the million a's runs many), and the RFC 6455 example's key;
 * base64 against RFC 4648's. */
START_TEST(test_ws_sha1_and_base64)
{
	static const struct {
		const char *in, *want;
	} sha[] = {
		{ "abc", "a9993e364706816aba3e25717850c26c9cd0d89d" },
		{ "", "da39a3ee5e6b4b0d3255bfef95601890afd80709" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "84983e441c3bd26ebaae4aa1f95129e5e54670f1" },
		{ "dGhlIHNhbXBsZSBub25jZQ==258EAFA5-E914-47DA-95CA-C5AB0DC85B11",
		  "b37a4f2cc0624f1690f64606cf385945b2bec4ea" }, /* RFC 6455 1.3 */
	};
	static const char *const b64[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };
	uint8_t d[20];
	char h[41], out[16];

	for (size_t i = 0; i < sizeof(sha) / sizeof(sha[0]); i++) {
		runtime__ws_sha1(sha[i].in, strlen(sha[i].in), d);
		hex(d, sizeof(d), h);
		ck_assert_str_eq(h, sha[i].want);
	}
	char *million = malloc(1000000);
	memset(million, 'a', 1000000);
	runtime__ws_sha1(million, 1000000, d);
	hex(d, sizeof(d), h);
	ck_assert_str_eq(h, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
	free(million);
	for (size_t i = 0; i < sizeof(b64) / sizeof(b64[0]); i++) {
		ck_assert_uint_eq(runtime__ws_base64((const uint8_t *)"foobar", i, out), strlen(b64[i]));
		ck_assert_str_eq(out, b64[i]);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ws");
	TCase *tc = tcase_create("ws");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120); /* every 3-byte sequence, slower under sanitizers */
	tcase_add_test(tc, test_ws_head_round_trip);
	tcase_add_test(tc, test_ws_head_refusals);
	tcase_add_test(tc, test_ws_mask_in_pieces);
	tcase_add_test(tc, test_ws_utf8_against_a_reference);
	tcase_add_test(tc, test_ws_utf8_known_cases_split_anywhere);
	tcase_add_test(tc, test_ws_frames_in_message_order);
	tcase_add_test(tc, test_ws_sha1_and_base64);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
