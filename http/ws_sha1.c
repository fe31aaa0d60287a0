/* SPDX-License-Identifier: MIT */
/*
 * ws_sha1.c - SHA-1 (FIPS 180-4) and base64 (RFC 4648) for the WebSocket
 * handshake's key and answer, and nothing else: SHA-1 is broken for
 * signatures, but RFC 6455 uses it only to show that the server read the
 * key. Written here rather than taken from libcrypto, whose digests keep
 * per-thread state the HTTP server has no other reason to own.
 */
#include "ws.h"

#include <string.h>

static uint32_t rol(uint32_t x, unsigned n)
{
	return x << n | x >> (32 - n);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The round function and constant of step t. */
static uint32_t mix(unsigned t, uint32_t b, uint32_t c, uint32_t d, uint32_t *k)
{
	if (t < 20) {
		*k = 0x5A827999;
		return (b & c) | (~b & d);
	}
	if (t < 40) {
		*k = 0x6ED9EBA1;
		return b ^ c ^ d;
	}
	if (t < 60) {
		*k = 0x8F1BBCDC;
		return (b & c) | (b & d) | (c & d);
	}
	*k = 0xCA62C1D6;
	return b ^ c ^ d;
}

static void block(uint32_t h[5], const uint8_t *p)
{
	uint32_t w[80], v[5], k;

	for (unsigned t = 0; t < 16; t++)
		w[t] = get32(p + 4 * t);
	for (unsigned t = 16; t < 80; t++)
		w[t] = rol(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
	memcpy(v, h, sizeof(v));
	for (unsigned t = 0; t < 80; t++) {
		uint32_t f = mix(t, v[1], v[2], v[3], &k);
		uint32_t next = rol(v[0], 5) + f + v[4] + k + w[t];
		v[4] = v[3];
		v[3] = v[2];
		v[2] = rol(v[1], 30);
		v[1] = v[0];
		v[0] = next;
	}
	for (unsigned i = 0; i < 5; i++)
		h[i] += v[i];
}

void runtime__ws_sha1(const void *data, size_t len, uint8_t out[20])
{
	uint32_t h[5] = { 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0 };
	const uint8_t *p = data;
	uint8_t tail[128] = { 0 };
	size_t whole = len & ~(size_t)63, rest = len - whole;
	uint64_t bits = (uint64_t)len * 8;

	for (size_t off = 0; off < whole; off += 64)
		block(h, p + off);
	if (rest)
		memcpy(tail, p + whole, rest);
	tail[rest] = 0x80;
	size_t n = rest < 56 ? 64 : 128; /* room for the length after the 0x80 */
	for (unsigned i = 0; i < 8; i++)
		tail[n - 1 - i] = (uint8_t)(bits >> (8 * i));
	for (size_t off = 0; off < n; off += 64)
		block(h, tail + off);
	for (unsigned i = 0; i < 20; i++)
		out[i] = (uint8_t)(h[i / 4] >> (24 - 8 * (i % 4)));
}

size_t runtime__ws_base64(const uint8_t *p, size_t n, char *out)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
		             (i + 2 < n ? p[i + 2] : 0);
		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? b64[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}
