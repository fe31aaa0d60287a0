/* SPDX-License-Identifier: MIT */
/*
 * h2_frames.h - fuzz_h2_server's check of what the server sent its
 * HTTP/2 client (fuzz_http_server.c built with -DFUZZ_H2 includes it
 * once, after server_harness.h): read as it arrives, it must be frames,
 * never HTTP/1.1 text, such that
 *   - each has a 9-byte head, a length within the largest
 *     SETTINGS_MAX_FRAME_SIZE the client sent (16384 if none larger), a
 *     type a server sends (not PRIORITY, PUSH_PROMISE or unknown), only
 *     the flags its type defines, stream 0 or not as its type wants, the
 *     reserved bit clear, the length its type wants, padding within it;
 *   - the first is the server's SETTINGS;
 *   - header blocks are whole (HEADERS, then CONTINUATION on the same
 *     stream and no other frame until END_HEADERS), on odd streams (the
 *     client's), and decode (HPACK: one decoder for the connection, as
 *     its client has one);
 *   - per stream: the response's head begins with :status (interim ones
 *     100 Continue only, before the final one, without END_STREAM), DATA
 *     only after the final head, trailers only with END_STREAM and no
 *     pseudo-field; no frame after END_STREAM but RST_STREAM, none at all
 *     after RST_STREAM; DATA no longer than the Content-Length, and at
 *     END_STREAM all of it or none (a HEAD's, a 304's);
 *   - GOAWAY's last stream id never rises, and no response begins on a
 *     stream above it once it is sent;
 *   - no frame is cut short at the end, unless the caller says a reset or
 *     a 2 ms write deadline may have cut the output.
 * Everything is static: it is part of that one file.
 */
#ifndef FUZZ_H2_FRAMES_H
#define FUZZ_H2_FRAMES_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_HEAD 9
#define FRAME_SIZE_MIN 16384      /* SETTINGS_MAX_FRAME_SIZE's first value */
#define FRAME_SIZE_MAX 16777215   /* ... and its largest */
#define STREAM_ID_MAX 0x7fffffff

/* A stream as the server answered it. */
struct sent_stream {
	int32_t id;
	bool answered;            /* its final head has come */
	bool ended;               /* END_STREAM has come */
	bool reset;               /* RST_STREAM has come */
	int64_t length;           /* the final head's Content-Length, -1: none */
	uint64_t data;            /* DATA bytes, padding aside */
};

struct frames {
	uint32_t size_max;        /* the largest frame the client allowed */
	uint8_t *frame;           /* the frame coming: its head, its payload */
	size_t have, cap;
	unsigned count;           /* frames whole */
	int32_t block;            /* the stream of the header block begun, 0:
	                             none */
	bool block_end_stream;    /* its HEADERS had END_STREAM */
	unsigned block_fields;    /* fields of it decoded */
	int block_status;         /* its :status, 0: none */
	uint32_t goaway_last;     /* the lowest last stream id sent */
	nghttp2_hd_inflater *hpack;
	struct sent_stream *streams;
	size_t nstreams, streams_cap;
};

/* The flags each type of frame the server may send defines (RFC 9113 6);
 * -1: a type it never sends. */
static const int frame_flags[] = {
	[NGHTTP2_DATA] = NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_PADDED,
	[NGHTTP2_HEADERS] = NGHTTP2_FLAG_END_STREAM | NGHTTP2_FLAG_END_HEADERS |
	                    NGHTTP2_FLAG_PADDED | NGHTTP2_FLAG_PRIORITY,
	[NGHTTP2_PRIORITY] = -1,
	[NGHTTP2_RST_STREAM] = 0,
	[NGHTTP2_SETTINGS] = NGHTTP2_FLAG_ACK,
	[NGHTTP2_PUSH_PROMISE] = -1,
	[NGHTTP2_PING] = NGHTTP2_FLAG_ACK,
	[NGHTTP2_GOAWAY] = 0,
	[NGHTTP2_WINDOW_UPDATE] = 0,
	[NGHTTP2_CONTINUATION] = NGHTTP2_FLAG_END_HEADERS,
};

static uint32_t get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The largest SETTINGS_MAX_FRAME_SIZE of the client's frames p[0..n)
 * (walked as the server reads them), FRAME_SIZE_MIN if none is larger:
 * the most the server may send in a frame. */
static uint32_t client_frame_max(const uint8_t *p, size_t n)
{
	uint32_t max = FRAME_SIZE_MIN;

	for (size_t off = 0; n - off >= FRAME_HEAD;) {
		size_t len = get24(p + off), end = off + FRAME_HEAD + len;
		if (p[off + 3] == NGHTTP2_SETTINGS && !(p[off + 4] & NGHTTP2_FLAG_ACK))
			for (size_t e = off + FRAME_HEAD; e + 6 <= end && e + 6 <= n; e += 6) {
				uint32_t v = get32(p + e + 2);
				if (p[e] == 0 && p[e + 1] == NGHTTP2_SETTINGS_MAX_FRAME_SIZE &&
				    v > max && v <= FRAME_SIZE_MAX)
					max = v;
			}
		if (end > n)
			break;
		off = end;
	}
	return max;
}

static void frames_init(struct frames *f, uint32_t size_max)
{
	*f = (struct frames){ .size_max = size_max, .goaway_last = STREAM_ID_MAX,
	                      .cap = FRAME_HEAD + FRAME_SIZE_MIN };
	if (!(f->frame = malloc(f->cap)) || nghttp2_hd_inflate_new(&f->hpack) != 0)
		fail("out of memory");
}

static void frames_free(struct frames *f)
{
	nghttp2_hd_inflate_del(f->hpack);
	free(f->frame);
	free(f->streams);
}

/* Stream id's record; a new one if add, else NULL if there is none. */
static struct sent_stream *sent_stream(struct frames *f, int32_t id, bool add)
{
	for (size_t i = f->nstreams; i-- > 0;)
		if (f->streams[i].id == id)
			return &f->streams[i];
	if (!add)
		return NULL;
	if (f->nstreams == f->streams_cap) {
		f->streams_cap = f->streams_cap ? 2 * f->streams_cap : 16;
		f->streams = realloc(f->streams, f->streams_cap * sizeof(*f->streams));
		if (!f->streams)
			fail("out of memory");
	}
	f->streams[f->nstreams] = (struct sent_stream){ .id = id, .length = -1 };
	return &f->streams[f->nstreams++];
}

/* ------------------------------------------------------- header blocks */

static bool nv_is(const uint8_t *p, size_t n, const char *lit)
{
	return n == strlen(lit) && !memcmp(p, lit, n);
}

/* A field of the header block on s: a response's head begins with its
 * :status; a head's fields and trailers have no other pseudo-field. */
static void block_field(struct frames *f, struct sent_stream *s, const nghttp2_nv *nv)
{
	const uint8_t *v = nv->value;
	bool pseudo = nv->namelen && nv->name[0] == ':';

	if (f->block_fields++ == 0 && !s->answered) {
		if (!nv_is(nv->name, nv->namelen, ":status") || nv->valuelen != 3 ||
		    v[0] < '1' || v[0] > '5' || v[1] < '0' || v[1] > '9' || v[2] < '0' || v[2] > '9')
			fail("a response head that does not begin with a :status");
		f->block_status = (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0');
		return;
	}
	if (pseudo)
		fail("a pseudo-field after a head's first field, or in trailers");
	if (!s->answered && f->block_status >= 200 && nv_is(nv->name, nv->namelen, "content-length")) {
		s->length = 0;
		for (size_t i = 0; i < nv->valuelen; i++) {
			if (v[i] < '0' || v[i] > '9' || s->length > INT64_MAX / 10 - 1)
				fail("a response with a bad content-length");
			s->length = s->length * 10 + (v[i] - '0');
		}
	}
}

static void stream_end(struct sent_stream *s)
{
	if (s->length >= 0 && s->data && s->data != (uint64_t)s->length)
		fail("a response ended with less DATA than its content-length");
	s->ended = true;
}

/* The header block on s is whole: an interim head, the final one, or
 * trailers. */
static void block_done(struct frames *f, struct sent_stream *s)
{
	if (s->answered) {
		if (!f->block_end_stream)
			fail("trailers without END_STREAM");
	} else if (!f->block_fields) {
		fail("a response head that does not begin with a :status");
	} else if (f->block_status < 200) {
		if (f->block_status != 100)
			fail("an interim response other than 100 Continue");
		if (f->block_end_stream)
			fail("an interim response with END_STREAM");
	} else {
		s->answered = true;
	}
	if (f->block_end_stream)
		stream_end(s);
	f->block = 0;
}

/* A fragment of the block on its stream, decoded as it comes. */
static void block_fragment(struct frames *f, const uint8_t *p, size_t n, bool last)
{
	struct sent_stream *s = sent_stream(f, f->block, false);

	for (;;) {
		nghttp2_nv nv;
		int flags = 0;
		ssize_t rc = nghttp2_hd_inflate_hd2(f->hpack, &nv, &flags, p, n, last);
		if (rc < 0)
			fail("a header block that does not decode (HPACK)");
		p += rc;
		n -= (size_t)rc;
		if (flags & NGHTTP2_HD_INFLATE_EMIT)
			block_field(f, s, &nv);
		if (flags & NGHTTP2_HD_INFLATE_FINAL) {
			nghttp2_hd_inflate_end_headers(f->hpack);
			block_done(f, s);
			return;
		}
		if (!(flags & NGHTTP2_HD_INFLATE_EMIT) && !n)
			return;
	}
}

/* ---------------------------------------------------------------- frames */

/* The payload of a DATA or HEADERS frame without its padding (and a
 * HEADERS' priority fields). */
static void unpad(const uint8_t *head, const uint8_t **p, size_t *n)
{
	size_t skip = 0, pad = 0;

	if (head[4] & NGHTTP2_FLAG_PADDED) {
		if (!*n)
			fail("a padded frame without its pad length");
		pad = (*p)[0];
		skip = 1;
	}
	if (head[3] == NGHTTP2_HEADERS && (head[4] & NGHTTP2_FLAG_PRIORITY))
		skip += 5;
	if (skip + pad > *n)
		fail("a frame's padding longer than the frame");
	*p += skip;
	*n -= skip + pad;
}

static void frame_headers(struct frames *f, const uint8_t *h, int32_t id, const uint8_t *p, size_t n)
{
	struct sent_stream *s = sent_stream(f, id, true);

	if (!(id & 1))
		fail("a response on a stream the client cannot have opened (an even id)");
	if (s->ended || s->reset)
		fail("HEADERS on a stream after its END_STREAM or RST_STREAM");
	if (!s->answered && id > (int32_t)f->goaway_last)
		fail("a response begun on a stream above a GOAWAY's last stream id");
	unpad(h, &p, &n);
	f->block = id;
	f->block_end_stream = h[4] & NGHTTP2_FLAG_END_STREAM;
	f->block_fields = 0;
	f->block_status = 0;
	block_fragment(f, p, n, h[4] & NGHTTP2_FLAG_END_HEADERS);
}

static void frame_data(struct frames *f, const uint8_t *h, int32_t id, const uint8_t *p, size_t n)
{
	struct sent_stream *s = sent_stream(f, id, false);

	if (!s || !s->answered)
		fail("DATA on a stream before its response's head");
	if (s->ended || s->reset)
		fail("DATA on a stream after its END_STREAM or RST_STREAM");
	unpad(h, &p, &n);
	s->data += n;
	if (s->length >= 0 && s->data > (uint64_t)s->length)
		fail("a response with more DATA than its content-length");
	if (h[4] & NGHTTP2_FLAG_END_STREAM)
		stream_end(s);
}

/* Frames on stream 0, and RST_STREAM and WINDOW_UPDATE: their lengths,
 * and what GOAWAY promises. */
static void frame_control(struct frames *f, const uint8_t *h, int32_t id, const uint8_t *p, size_t n)
{
	bool ack = h[4] & NGHTTP2_FLAG_ACK;

	switch (h[3]) {
	case NGHTTP2_SETTINGS:
		if (n % 6 || (ack && n))
			fail("a SETTINGS frame of a bad length");
		break;
	case NGHTTP2_PING:
		if (n != 8)
			fail("a PING frame of a bad length");
		break;
	case NGHTTP2_GOAWAY:
		if (n < 8 || (p[0] & 0x80))
			fail("a bad GOAWAY frame");
		if (get32(p) > f->goaway_last)
			fail("a GOAWAY that raised the last stream id of one before");
		f->goaway_last = get32(p);
		break;
	case NGHTTP2_RST_STREAM:
		if (n != 4)
			fail("a RST_STREAM frame of a bad length");
		sent_stream(f, id, true)->reset = true;
		break;
	default: /* NGHTTP2_WINDOW_UPDATE */
		if (n != 4 || !(get32(p) & STREAM_ID_MAX) || (p[0] & 0x80))
			fail("a bad WINDOW_UPDATE frame");
	}
}

/* A frame's head, f->frame[0..FRAME_HEAD), against its type; the
 * buffer made large enough for its payload. */
static void frame_head(struct frames *f)
{
	const uint8_t *h = f->frame;
	uint8_t type = h[3];
	int32_t id = (int32_t)(get32(h + 5) & STREAM_ID_MAX);
	bool on_zero = type == NGHTTP2_SETTINGS || type == NGHTTP2_PING || type == NGHTTP2_GOAWAY;

	if (!f->count && !memcmp(h, "HTTP/", 5))
		fail("an HTTP/1.1 answer to an HTTP/2 client");
	if (!f->count && (type != NGHTTP2_SETTINGS || (h[4] & NGHTTP2_FLAG_ACK)))
		fail("a first frame that is not the server's SETTINGS");
	if (get24(h) > f->size_max)
		fail("a frame larger than the client's SETTINGS_MAX_FRAME_SIZE");
	if (type >= sizeof(frame_flags) / sizeof(frame_flags[0]) || frame_flags[type] < 0)
		fail("a frame of a type a server never sends");
	if (h[4] & ~frame_flags[type])
		fail("a frame with flags its type does not define");
	if (h[5] & 0x80)
		fail("a frame with the stream id's reserved bit set");
	if (on_zero ? id != 0 : id == 0 && type != NGHTTP2_WINDOW_UPDATE)
		fail("a frame on the wrong stream for its type (0 or not)");
	if (f->block && (type != NGHTTP2_CONTINUATION || id != f->block))
		fail("a frame inside another stream's header block, or not CONTINUATION");
	if (!f->block && type == NGHTTP2_CONTINUATION)
		fail("CONTINUATION outside a header block");
	if (FRAME_HEAD + get24(h) > f->cap) {
		f->cap = FRAME_HEAD + get24(h);
		if (!(f->frame = realloc(f->frame, f->cap)))
			fail("out of memory");
	}
}

/* A whole frame, f->frame[0..FRAME_HEAD + n), its head checked. */
static void frame_whole(struct frames *f, size_t n)
{
	const uint8_t *h = f->frame, *p = h + FRAME_HEAD;
	int32_t id = (int32_t)(get32(h + 5) & STREAM_ID_MAX);
	struct sent_stream *s;

	if (id && h[3] != NGHTTP2_HEADERS && (s = sent_stream(f, id, false)) && s->reset)
		fail("a frame on a stream after its RST_STREAM");
	if (h[3] == NGHTTP2_HEADERS)
		frame_headers(f, h, id, p, n);
	else if (h[3] == NGHTTP2_CONTINUATION)
		block_fragment(f, p, n, h[4] & NGHTTP2_FLAG_END_HEADERS);
	else if (h[3] == NGHTTP2_DATA)
		frame_data(f, h, id, p, n);
	else
		frame_control(f, h, id, p, n);
	f->count++;
}

/* The next n bytes the server sent, p[0..n). */
static void frames_check(struct frames *f, const uint8_t *p, size_t n)
{
	while (n) {
		bool in_head = f->have < FRAME_HEAD;
		size_t want = in_head ? FRAME_HEAD : FRAME_HEAD + get24(f->frame);
		size_t k = want - f->have < n ? want - f->have : n;

		memcpy(f->frame + f->have, p, k);
		f->have += k;
		p += k;
		n -= k;
		if (in_head && f->have == FRAME_HEAD)
			frame_head(f);
		if (f->have >= FRAME_HEAD && f->have == FRAME_HEAD + get24(f->frame)) {
			frame_whole(f, f->have - FRAME_HEAD);
			f->have = 0;
		}
	}
}

/* The output has ended: cut short only if it may be. */
static void frames_end(const struct frames *f, bool may_be_cut)
{
	if ((f->have || f->block) && !may_be_cut)
		fail("the output ends inside a frame or a header block");
}

#endif /* FUZZ_H2_FRAMES_H */
