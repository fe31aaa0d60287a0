/* SPDX-License-Identifier: MIT */
/*
 * ws_frame.c - WebSocket framing (RFC 6455 5.2-5.5): frame heads read and
 * written, payloads masked, frames kept in message order, text checked as
 * UTF-8 (RFC 3629) piece by piece. Strict, as the HTTP parser is: what
 * two readers could take differently (a length not in its shortest form,
 * a control frame in pieces) fails the connection with 1002.
 */
#include "ws.h"

#include <string.h>

/* ------------------------------------------------------------ the head */

static bool reserved_opcode(uint8_t op)
{
	return (op > WS_BINARY && op < WS_CLOSE) || op > WS_PONG;
}

/* The first two bytes' rules: 0, or -1002. */
static int check_start(const struct ws_head *h, const struct ws_rules *rules)
{
	bool control = h->opcode & 0x8;

	if (reserved_opcode(h->opcode) || (h->rsv & ~rules->rsv))
		return -WS_PROTOCOL_ERROR;
	if (control && (!h->fin || h->rsv || h->len > WS_CONTROL_MAX))
		return -WS_PROTOCOL_ERROR; /* length: the 7-bit one, read already */
	if (h->masked != rules->from_client)
		return -WS_PROTOCOL_ERROR;
	return 0;
}

static uint64_t big_endian(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

int runtime__ws_head_parse(const uint8_t *p, size_t n, const struct ws_rules *rules,
                           struct ws_head *h)
{
	if (n < 2)
		return 0;
	h->fin = p[0] & 0x80;
	h->rsv = (p[0] >> 4) & 0x7;
	h->opcode = p[0] & 0xF;
	h->masked = p[1] & 0x80;
	h->len = p[1] & 0x7F;
	int rc = check_start(h, rules);
	if (rc < 0)
		return rc;
	size_t ext = h->len == 126 ? 2 : h->len == 127 ? 8 : 0;
	size_t need = 2 + ext + (h->masked ? 4 : 0);
	if (n < need)
		return 0;
	if (ext) {
		h->len = big_endian(p + 2, ext);
		if ((ext == 2 && h->len < 126) || (ext == 8 && h->len <= 0xFFFF) ||
		    (h->len >> 63))
			return -WS_PROTOCOL_ERROR; /* not the shortest form, or the top bit */
	}
	if (h->len > rules->frame_max)
		return -WS_TOO_BIG;
	if (h->masked)
		memcpy(h->mask, p + 2 + ext, 4);
	h->head_len = need;
	return (int)need;
}

size_t runtime__ws_head_put(uint8_t *out, bool fin, uint8_t rsv, uint8_t opcode,
                            const uint8_t *mask, uint64_t len)
{
	size_t n = 2;

	out[0] = (uint8_t)((fin ? 0x80 : 0) | (rsv & 0x7) << 4 | (opcode & 0xF));
	out[1] = mask ? 0x80 : 0;
	if (len < 126) {
		out[1] |= (uint8_t)len;
	} else {
		size_t ext = len <= 0xFFFF ? 2 : 8;
		out[1] |= ext == 2 ? 126 : 127;
		for (size_t i = 0; i < ext; i++)
			out[2 + i] = (uint8_t)(len >> (8 * (ext - 1 - i)));
		n += ext;
	}
	if (mask) {
		memcpy(out + n, mask, 4);
		n += 4;
	}
	return n;
}

/* ---------------------------------------------------------------- masks */

void runtime__ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t off)
{
	uint8_t key[8];
	size_t i = 0;

	for (unsigned k = 0; k < 8; k++) /* the key turned to start at off */
		key[k] = mask[(off + k) & 3];
	uint64_t word;
	memcpy(&word, key, 8);
	for (; i + 8 <= n; i += 8) { /* 8 bytes at a time: the key repeats each 4 */
		uint64_t v;
		memcpy(&v, p + i, 8);
		v ^= word;
		memcpy(p + i, &v, 8);
	}
	for (; i < n; i++)
		p[i] ^= key[i & 7];
}

/* ----------------------------------------------------------------- UTF-8 */

/* A lead byte: the continuation bytes it needs and the range of the
 * first (RFC 3629's table: no overlong forms, no surrogates, nothing past
 * U+10FFFF). false if it can lead nothing. */
static bool lead(struct ws_utf8 *u, uint8_t b)
{
	u->lo = 0x80;
	u->hi = 0xBF;
	if (b >= 0xC2 && b <= 0xDF)
		u->need = 1;
	else if (b >= 0xE0 && b <= 0xEF)
		u->need = 2;
	else if (b >= 0xF0 && b <= 0xF4)
		u->need = 3;
	else
		return false; /* 0x80-0xC1: a continuation or overlong; 0xF5-0xFF */
	if (b == 0xE0)
		u->lo = 0xA0; /* below: overlong */
	else if (b == 0xED)
		u->hi = 0x9F; /* above: surrogates */
	else if (b == 0xF0)
		u->lo = 0x90; /* below: overlong */
	else if (b == 0xF4)
		u->hi = 0x8F; /* above: past U+10FFFF */
	return true;
}

/* Past whole blocks of 8 ASCII bytes from p[i]: the index of the first
 * block with another byte, or of the last few. */
static size_t skip_ascii(const uint8_t *p, size_t i, size_t n)
{
	for (uint64_t w; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		if (w & 0x8080808080808080ull)
			break;
	}
	return i;
}

bool runtime__ws_utf8_feed(struct ws_utf8 *u, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t b = p[i++];
		if (u->need) {
			if (b < u->lo || b > u->hi)
				return false;
			u->need--;
			u->lo = 0x80;
			u->hi = 0xBF;
		} else if (b >= 0x80) {
			if (!lead(u, b))
				return false;
		} else {
			i = skip_ascii(p, i, n);
		}
	}
	return true;
}

/* -------------------------------------------------------------- messages */

int runtime__ws_reader_frame(struct ws_reader *r, const struct ws_head *h)
{
	if (h->opcode & 0x8)
		return 0; /* control frames may come between a message's frames */
	if (h->opcode == WS_CONTINUATION) {
		if (!r->in_message || (h->rsv & WS_RSV1))
			return -WS_PROTOCOL_ERROR; /* RSV1: the first frame's alone */
	} else {
		if (r->in_message)
			return -WS_PROTOCOL_ERROR;
		r->in_message = true;
		r->opcode = h->opcode;
		r->compressed = h->rsv & WS_RSV1;
		r->message_len = 0;
		r->utf8 = (struct ws_utf8){ 0 };
	}
	if (h->len > r->message_max - r->message_len)
		return -WS_TOO_BIG;
	r->message_len += h->len;
	return 0;
}

int runtime__ws_reader_payload(struct ws_reader *r, const uint8_t *p, size_t n)
{
	if (r->opcode == WS_TEXT && !runtime__ws_utf8_feed(&r->utf8, p, n))
		return -WS_INVALID_DATA;
	return 0;
}

int runtime__ws_reader_end(struct ws_reader *r)
{
	bool whole = r->opcode != WS_TEXT || runtime__ws_utf8_whole(&r->utf8);

	r->in_message = false;
	return whole ? 0 : -WS_INVALID_DATA;
}
