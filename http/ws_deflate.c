/* SPDX-License-Identifier: MIT */
/*
 * ws_deflate.c - permessage-deflate (RFC 7692) on zlib: the offer read
 * and answered (server) or made and checked (client), messages inflated
 * into the message buffer under message_max - a deflate bomb fails with
 * 1009 once its output passes the limit, never after - and deflated on
 * the way out.
 *
 * No context takeover, both ways, always: the server's answer asks for
 * it (RFC 7692 7.1.1: a server may), the client's offer does. Each
 * message then starts a fresh stream, so the zlib streams live only
 * while a message is under way, and an idle WebSocket holds none: about
 * 300 KB of deflate state and 40 KB of inflate state per connection
 * otherwise. The price is compression across messages, which small
 * repetitive messages would have had.
 */
#define RUNTIME_WS_CONN
#include "http.h"
#include "ws.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#define NAME "permessage-deflate"
#define TAIL "\x00\x00\xff\xff"      /* a sync flush's end, not sent (7.2.1) */
#define LEVEL 1                      /* fast: a server's CPU is the cost */

struct ws_zlib {
	z_stream in, out;
	bool in_on, out_on;              /* initialised (a message under way) */
};

/* ---------------------------------------------------------- the offer */

/* p[*a..*b) without the blanks around it. */
static void trim(const char *p, size_t *a, size_t *b)
{
	while (*a < *b && (p[*a] == ' ' || p[*a] == '\t'))
		++*a;
	while (*b > *a && (p[*b - 1] == ' ' || p[*b - 1] == '\t'))
		--*b;
}

/* A window size's value, maybe quoted: 8 .. 15, else 0. */
static int window_bits(const char *v, const char *end)
{
	if (end - v >= 2 && *v == '"' && end[-1] == '"')
		v++, end--;
	if (end - v == 1 && *v >= '8' && *v <= '9')
		return *v - '0';
	if (end - v == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5')
		return 10 + v[1] - '0';
	return 0;
}

/* One parameter of an offer, p[0..n) ("name" or "name=value"): into o.
 * false for one not RFC 7692's, a bad value, or one given twice. */
static bool param(const char *p, size_t n, struct ws_deflate_params *o)
{
	const char *eq = memchr(p, '=', n);
	size_t k = eq ? (size_t)(eq - p) : n;
	int bits = eq ? window_bits(eq + 1, p + n) : 0;

	if (eq && !bits)
		return false;
#define IS(s) (k == sizeof(s) - 1 && !strncasecmp(p, s, k))
	if (IS("server_no_context_takeover") && !eq && !o->server_no_takeover)
		return o->server_no_takeover = true;
	if (IS("client_no_context_takeover") && !eq && !o->client_no_takeover)
		return o->client_no_takeover = true;
	if (IS("server_max_window_bits") && eq && !o->server_bits)
		return (o->server_bits = bits) != 0;
	if (IS("client_max_window_bits") && !o->client_bits)
		return (o->client_bits = eq ? bits : 15) != 0;
#undef IS
	return false;
}

/* One offer, p[0..n): "permessage-deflate; a; b=1". */
static bool offer(const char *p, size_t n, struct ws_deflate_params *o)
{
	bool first = true;

	*o = (struct ws_deflate_params){ 0 };
	for (size_t i = 0, start = 0; i <= n; i++) {
		if (i < n && p[i] != ';')
			continue;
		size_t a = start, b = i;
		trim(p, &a, &b);
		if (first ? b - a != sizeof(NAME) - 1 || strncasecmp(p + a, NAME, b - a)
		          : !param(p + a, b - a, o))
			return false;
		first = false;
		start = i + 1;
	}
	return true;
}

bool runtime__ws_deflate_parse(const char *v, size_t n, struct ws_deflate_params *o)
{
	for (size_t i = 0, start = 0; i <= n; i++) {
		if (i < n && v[i] != ',')
			continue;
		size_t a = start, b = i;
		trim(v, &a, &b);
		if (offer(v + a, b - a, o) && o->server_bits != 8)
			return true; /* a window of 8: zlib makes 9 of it, so not that one */
		start = i + 1;
	}
	return false;
}

size_t runtime__ws_deflate_answer(const struct ws_deflate_params *o, char *out, size_t cap)
{
	int n = snprintf(out, cap, NAME "; server_no_context_takeover; client_no_context_takeover");

	if (o->server_bits)
		n += snprintf(out + n, cap - (size_t)n, "; server_max_window_bits=%d", o->server_bits);
	return (size_t)n;
}

/* ----------------------------------------------------------- inflating */

/* Between messages no zlib state is held, not even the streams' struct:
 * an idle WebSocket that has compressed keeps nothing of it. */
static void z_release(struct runtime_ws *ws)
{
	if (!ws->z->in_on && !ws->z->out_on) {
		free(ws->z);
		ws->z = NULL;
	}
}

static int inflate_on(struct runtime_ws *ws)
{
	if (!ws->z && !(ws->z = calloc(1, sizeof(*ws->z))))
		return -ENOMEM;
	if (!ws->z->in_on) {
		if (inflateInit2(&ws->z->in, -15) != Z_OK) /* raw; any window the peer used */
			return -ENOMEM;
		ws->z->in_on = true;
	}
	return 0;
}

/* Output of one inflate call onto the message, within message_max (one
 * byte more of room shows a message over it). 1: call again, 0: all
 * input taken, or -close code, -ENOMEM. */
static int inflate_step(struct runtime_ws *ws, z_stream *s)
{
	uint64_t most = ws->rd.message_max + 1 - ws->msg_len;
	int rc = ws->msg_len + 1 >= ws->msg_cap ? runtime__ws_msg_grow(ws, most) : 0;

	if (rc < 0)
		return rc;
	uint8_t *dst = ws->msg + ws->msg_len;
	size_t room = ws->msg_cap - 1 - ws->msg_len;
	s->next_out = dst;
	s->avail_out = (uInt)(room < most ? room : most);
	size_t offered = s->avail_out;
	int z = inflate(s, Z_SYNC_FLUSH);
	size_t made = offered - s->avail_out;
	ws->msg_len += made;
	if (ws->msg_len > ws->rd.message_max)
		return -WS_TOO_BIG; /* a bomb stops here: its output is bounded */
	if ((rc = runtime__ws_reader_payload(&ws->rd, dst, made)) < 0)
		return rc;
	if (z == Z_MEM_ERROR)
		return -ENOMEM;
	if (z != Z_OK && z != Z_BUF_ERROR && !(z == Z_STREAM_END && !s->avail_in))
		return -WS_INVALID_DATA; /* not deflate data, or more after its end */
	if (z == Z_STREAM_END)
		inflateReset(s);
	return s->avail_out == 0 ? 1 : 0;
}

int runtime__ws_inflate(struct runtime_ws *ws, const uint8_t *in, size_t n, bool end)
{
	int rc = inflate_on(ws);
	if (rc < 0)
		return rc;
	z_stream *s = &ws->z->in;

	s->next_in = (Bytef *)in;
	s->avail_in = (uInt)n;
	do
		rc = inflate_step(ws, s);
	while (rc == 1);
	if (rc == 0 && end) {
		s->next_in = (Bytef *)TAIL;
		s->avail_in = 4;
		do
			rc = inflate_step(ws, s);
		while (rc == 1);
		inflateEnd(s); /* no context takeover: a fresh stream each message */
		ws->z->in_on = false;
		z_release(ws);
	}
	return rc;
}

/* ----------------------------------------------------------- deflating */

static int deflate_on(struct runtime_ws *ws)
{
	if (!ws->z && !(ws->z = calloc(1, sizeof(*ws->z))))
		return -ENOMEM;
	if (!ws->z->out_on) {
		if (deflateInit2(&ws->z->out, LEVEL, Z_DEFLATED, -ws->deflate_bits, 8,
		                 Z_DEFAULT_STRATEGY) != Z_OK)
			return -ENOMEM;
		ws->z->out_on = true;
	}
	return 0;
}

int runtime__ws_deflate(struct runtime_ws *ws, const void *p, size_t n, bool last, uint8_t **out,
                        size_t *len)
{
	int rc = deflate_on(ws);
	z_stream *s = &ws->z->out;
	size_t cap = rc < 0 ? 0 : deflateBound(s, n) + 16; /* a sync flush's bytes too */
	uint8_t *buf = cap ? malloc(cap) : NULL;

	if (!buf)
		return -ENOMEM;
	s->next_in = (Bytef *)p;
	s->avail_in = (uInt)n;
	s->next_out = buf;
	s->avail_out = (uInt)cap;
	deflate(s, Z_SYNC_FLUSH); /* the bound holds it all: no second call */
	*len = cap - s->avail_out;
	if (last) {
		if (*len >= 4 && !memcmp(buf + *len - 4, TAIL, 4))
			*len -= 4; /* RFC 7692 7.2.1 */
		deflateEnd(s);
		ws->z->out_on = false;
		z_release(ws);
	}
	*out = buf;
	return 0;
}

void runtime__ws_zlib_free(struct runtime_ws *ws)
{
	if (!ws->z)
		return;
	if (ws->z->in_on)
		inflateEnd(&ws->z->in);
	if (ws->z->out_on)
		deflateEnd(&ws->z->out);
	free(ws->z);
	ws->z = NULL;
}
