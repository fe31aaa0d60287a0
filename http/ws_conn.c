/* SPDX-License-Identifier: MIT */
/*
 * ws_conn.c - a WebSocket's life after its handshake: frames read into a
 * small buffer (a payload straight into the message's), control frames
 * answered as they come, messages sent a frame at a time under a fiber
 * mutex, keepalive pings on the receiver's read deadline, the close
 * handshake. Framing rules are ws_frame.c's.
 *
 * A failure (the peer broke the RFC, a dead peer, a write that timed
 * out) closes the WebSocket for good: the close frame with its code goes
 * out if it can, ws->error is what later calls report, and
 * runtime_ws_close only frees.
 */
#define _GNU_SOURCE
#define RUNTIME_WS_CONN
#include "http.h" /* enum http_idle_way */
#include "ws.h"
#include "body.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define MS 1000000ull
#define MESSAGE_MAX_DEFAULT (16ull << 20)
#define CLOSE_TIMEOUT_DEFAULT (5000 * MS)
#define WRITE_TIMEOUT_DEFAULT (30000 * MS)
#define MASKED_CHUNK 16384      /* a client masks its payload in pieces */
#define MSG_KEEP 16384          /* a message buffer kept past its message */
#define DEFLATE_MIN 64          /* a smaller whole message goes uncompressed */
#define INFLATE_CHUNK 4096      /* compressed bytes read at a time */
#define PART_MAX (MSG_KEEP - 1) /* a piece's bytes (runtime_ws_recv_part) */

static uint64_t or_default(uint64_t v, uint64_t dflt)
{
	return v ? v : dflt;
}

int runtime__ws_new(struct runtime_ws **out, struct runtime_conn *conn, bool client,
                    const struct runtime_ws_config *cfg, const char *protocol,
                    const void *early, size_t early_len, const struct ws_deflate_params *dp)
{
	static const struct runtime_ws_config none;
	size_t in_size = early_len > WS_IN_SIZE ? early_len : WS_IN_SIZE;
	struct runtime_ws *ws = calloc(1, sizeof(*ws));

	cfg = cfg ? cfg : &none;
	if (!ws || (protocol && !(ws->protocol = strdup(protocol))) ||
	    (early_len && !(ws->in = malloc(in_size + WS_CONTROL_MAX)))) {
		if (ws)
			free(ws->protocol);
		free(ws);
		return -ENOMEM;
	}
	ws->in_size = in_size;
	ws->conn = conn;
	ws->client = client;
	ws->rd.message_max = or_default(cfg->message_max, MESSAGE_MAX_DEFAULT);
	ws->rules = (struct ws_rules){ .from_client = !client, .frame_max = ws->rd.message_max,
	                               .rsv = dp ? WS_RSV1 : 0 };
	ws->deflate = dp != NULL;
	ws->deflate_bits = (int8_t)(dp && !client && dp->server_bits ? dp->server_bits : 15);
	ws->ping_interval = cfg->ping_interval_ns;
	ws->pong_timeout = or_default(cfg->pong_timeout_ns, cfg->ping_interval_ns);
	ws->close_timeout = or_default(cfg->close_timeout_ns, CLOSE_TIMEOUT_DEFAULT);
	ws->write_timeout = or_default(cfg->write_timeout_ns, WRITE_TIMEOUT_DEFAULT);
	if (early_len)
		memcpy(ws->in, early, early_len);
	ws->in_len = early_len;
	ws->heard = runtime_now();
	*out = ws;
	return 0;
}

void runtime__ws_free(struct runtime_ws *ws)
{
	runtime__ws_zlib_free(ws);
	free(ws->protocol);
	free(ws->reason);
	free(ws->msg);
	free(ws->in);
	free(ws);
}

/* ------------------------------------------------------------ writing */

/* All of iov[0..cnt) (modified), under the write timeout. */
static int write_all(struct runtime_ws *ws, struct iovec *iov, int cnt)
{
	runtime_conn_set_write_deadline(ws->conn, runtime_now() + ws->write_timeout);
	return runtime__http_writev_all(ws->conn, iov, cnt);
}

/* A client's payload, masked piece by piece through a scratch buffer. */
static int write_masked(struct runtime_ws *ws, const uint8_t *head, size_t head_len,
                        const uint8_t mask[4], const uint8_t *p, size_t len)
{
	uint8_t *chunk = malloc(MASKED_CHUNK);
	struct iovec iov[2] = { { (void *)head, head_len }, { chunk, 0 } };
	int rc = chunk ? 0 : -ENOMEM;

	for (size_t off = 0; rc == 0 && (off < len || iov[0].iov_len); iov[0].iov_len = 0) {
		size_t k = len - off < MASKED_CHUNK ? len - off : MASKED_CHUNK;
		memcpy(chunk, p + off, k);
		runtime__ws_mask(chunk, k, mask, off);
		iov[1] = (struct iovec){ chunk, k };
		rc = iov[0].iov_len ? write_all(ws, iov, 2) : write_all(ws, iov + 1, 1);
		off += k;
	}
	free(chunk);
	return rc;
}

/* One frame, the caller holding wlock; p[0..len) may be masked in place
 * if scratch (the library's own buffer), else a client masks a copy. A
 * write that fails leaves the stream cut mid-frame: the WebSocket is
 * failed. */
static int frame_out(struct runtime_ws *ws, bool fin, uint8_t rsv, uint8_t opcode, const void *p,
                     size_t len, bool scratch)
{
	uint8_t head[WS_HEAD_MAX], mask[4];
	int rc;

	if (ws->error || ws->close_sent)
		return ws->error ? ws->error : -EPIPE;
	if (ws->client)
		arc4random_buf(mask, sizeof(mask)); /* RFC 6455 5.3: unpredictable */
	size_t n = runtime__ws_head_put(head, fin, rsv, opcode, ws->client ? mask : NULL, len);
	if (ws->client && !scratch) {
		rc = write_masked(ws, head, n, mask, p, len);
	} else {
		if (ws->client)
			runtime__ws_mask((uint8_t *)p, len, mask, 0);
		struct iovec iov[2] = { { head, n }, { (void *)p, len } };
		rc = write_all(ws, iov, len ? 2 : 1);
	}
	if (rc < 0 && rc != -ENOMEM)
		ws->error = rc;
	return rc;
}

/* A control frame from any fiber (a pong, a close): waits for a message
 * in parts of another fiber to end. */
static int control_out(struct runtime_ws *ws, uint8_t opcode, const void *p, size_t len)
{
	bool mine = ws->parts == runtime_fiber_self() && ws->parts;
	int rc = mine ? 0 : runtime_mutex_lock(&ws->wlock, -1);

	if (rc < 0)
		return rc;
	rc = frame_out(ws, true, 0, opcode, p, len, false);
	if (!mine)
		runtime_mutex_unlock(&ws->wlock);
	return rc;
}

/* A close frame: code (0: none) and reason; ws->close_sent after. */
static int close_out(struct runtime_ws *ws, unsigned code, const char *reason, size_t len)
{
	uint8_t p[WS_CONTROL_MAX];
	size_t n = 0;

	if (ws->close_sent)
		return 0;
	if (code) {
		p[0] = (uint8_t)(code >> 8);
		p[1] = (uint8_t)code;
		if (len)
			memcpy(p + 2, reason, len);
		n = 2 + len;
	}
	int rc = control_out(ws, WS_CLOSE, p, n);
	ws->close_sent = true;
	return rc;
}

/* A data frame, compressed if the message is (RSV1 on its first frame):
 * whole messages from DEFLATE_MIN bytes, messages in parts all. */
static int data_out(struct runtime_ws *ws, bool first, bool last, uint8_t opcode, const void *p,
                    size_t len)
{
	uint8_t *z;
	size_t zlen;

	if (first)
		ws->parts_deflated = ws->deflate && (!last || len >= DEFLATE_MIN);
	if (!ws->parts_deflated)
		return frame_out(ws, last, 0, opcode, p, len, false);
	int rc = runtime__ws_deflate(ws, p, len, last, &z, &zlen);
	if (rc == 0) {
		rc = frame_out(ws, last, first ? WS_RSV1 : 0, opcode, z, zlen, true);
		free(z);
	}
	return rc;
}

static bool data_type(int type)
{
	return type == RUNTIME_WS_TEXT || type == RUNTIME_WS_BINARY;
}

int runtime_ws_send_part(struct runtime_ws *ws, int type, const void *data, size_t len, int last)
{
	struct runtime_fiber *self = runtime_fiber_self();

	if (!ws || (!data && len) || !self)
		return !self && ws ? -EPERM : -EINVAL;
	bool first = ws->parts != self;
	if (first && !data_type(type))
		return -EINVAL;
	if (first) {
		int rc = runtime_mutex_lock(&ws->wlock, -1);
		if (rc < 0)
			return rc;
		ws->parts = self;
	}
	int rc = data_out(ws, first, last, first ? (uint8_t)type : WS_CONTINUATION, data, len);
	if (last || rc < 0) {
		ws->parts = NULL;
		runtime_mutex_unlock(&ws->wlock);
	}
	return rc;
}

int runtime_ws_send(struct runtime_ws *ws, int type, const void *data, size_t len)
{
	if (ws && ws->parts == runtime_fiber_self() && ws->parts)
		return -EBUSY; /* its own message in parts is under way */
	if (!data_type(type))
		return -EINVAL;
	return runtime_ws_send_part(ws, type, data, len, 1);
}

/* ------------------------------------------------------------ reading */

/* The WebSocket fails with code (1002, 1007, 1009): its close goes out
 * (no wait for the peer's: RFC 6455 7.1.7), and recv's error is kept. */
static int fail(struct runtime_ws *ws, int code)
{
	int err = code == WS_INVALID_DATA ? -EILSEQ : code == WS_TOO_BIG ? -EMSGSIZE : -EPROTO;

	if (!ws->close_sent)
		close_out(ws, (unsigned)code, NULL, 0);
	ws->code = (uint16_t)code;
	ws->error = err;
	return err;
}

int runtime__ws_gone(struct runtime_ws *ws, int err)
{
	ws->code = RUNTIME_WS_ABNORMAL;
	ws->error = err ? err : -ECONNRESET;
	return ws->error;
}

/* When the receiver's read gives up waiting: the next ping, or the end
 * of a pong's wait; 0: never. */
static uint64_t keepalive_due(const struct runtime_ws *ws)
{
	if (!ws->ping_interval)
		return 0;
	return ws->heard + (ws->ping_out ? ws->ping_interval + ws->pong_timeout : ws->ping_interval);
}

/* A read timed out on the keepalive's deadline: ping, or give up. */
static int keepalive(struct runtime_ws *ws)
{
	if (ws->ping_out)
		return runtime__ws_gone(ws, -ETIMEDOUT); /* no answer: a dead peer */
	ws->ping_out = true;
	return control_out(ws, WS_PING, NULL, 0);
}

/* Some bytes into dst (> 0), idle (marked so for a drain) while waiting
 * for a message's first byte. -ESHUTDOWN if a drain came instead;
 * -EWOULDBLOCK if a served WebSocket is to wait with no fiber instead
 * (the read deadline set for that wait: at once, or after a quiet
 * read, as ws->park says); else -errno, the WebSocket failed. A served
 * one back from its wait (woke) reads once - what ended the wait -
 * before it waits so again. */
static ssize_t read_some(struct runtime_ws *ws, void *dst, size_t len, bool idle)
{
	for (;;) {
		uint64_t due = keepalive_due(ws);
		runtime_conn_set_read_deadline(ws->conn, due && (!ws->read_end || due < ws->read_end)
		                                                 ? due : ws->read_end);
		if (idle && ws->park == HTTP_IDLE_AT_ONCE && !ws->woke)
			return -EWOULDBLOCK;
		ws->woke = false;
		if (idle)
			runtime_conn_set_idle(ws->conn, 1);
		ssize_t n = runtime_conn_read(ws->conn, dst, len);
		if (idle)
			runtime_conn_set_idle(ws->conn, 0);
		if (n > 0) {
			ws->heard = runtime_now();
			ws->ping_out = false;
			return n;
		}
		if (n == -ESHUTDOWN && idle)
			return n;
		if (n == -EAGAIN && idle && ws->park == HTTP_IDLE_WHEN_QUIET)
			return -EWOULDBLOCK; /* quiet past release_after */
		if (n == -ETIMEDOUT && due && runtime_now() >= due) {
			int rc = keepalive(ws);
			if (rc < 0)
				return rc;
		} else if (n != -EAGAIN && n != -EINTR) { /* -EAGAIN: quiet past
		                                  release_after; -EINTR: a wake */
			return runtime__ws_gone(ws, (int)n);
		}
	}
}

/* Make in[] hold more bytes after in_off. 0, or -errno (-ESHUTDOWN: a
 * drain, -EWOULDBLOCK: wait with no fiber). */
static int fill(struct runtime_ws *ws)
{
	if (!ws->in && !(ws->in = malloc(ws->in_size + WS_CONTROL_MAX)))
		return -ENOMEM;
	if (ws->in_off) {
		memmove(ws->in, ws->in + ws->in_off, ws->in_len - ws->in_off);
		ws->in_len -= ws->in_off;
		ws->in_off = 0;
	}
	bool idle = !ws->rd.in_message && ws->in_len == 0;
	ssize_t n = read_some(ws, ws->in + ws->in_len, ws->in_size - ws->in_len, idle);
	if (n < 0)
		return (int)n;
	ws->in_len += (size_t)n;
	return 0;
}

/* The next frame's head. 0, or -errno (-ESHUTDOWN: a drain). */
static int head_in(struct runtime_ws *ws, struct ws_head *h)
{
	for (;;) {
		int rc = !ws->in ? 0 : runtime__ws_head_parse(ws->in + ws->in_off,
		                                              ws->in_len - ws->in_off, &ws->rules, h);
		if (rc > 0) {
			ws->in_off += (size_t)rc;
			return 0;
		}
		if (rc < 0)
			return fail(ws, -rc);
		if ((rc = fill(ws)) != 0)
			return rc;
	}
}

/* Some of a payload into dst (at most len): what the buffer holds, else
 * one read straight into dst. The bytes (> 0), or -errno. */
static ssize_t payload_some(struct runtime_ws *ws, uint8_t *dst, size_t len)
{
	size_t held = ws->in_len - ws->in_off;

	if (!held)
		return read_some(ws, dst, len, false);
	size_t k = held < len ? held : len;
	memcpy(dst, ws->in + ws->in_off, k);
	ws->in_off += k;
	return (ssize_t)k;
}

/* Where a control frame's payload goes: the room past the read buffer. */
static uint8_t *control_room(struct runtime_ws *ws)
{
	return ws->in + ws->in_size;
}

/* A control frame's payload (125 bytes at most) into control_room. */
static int control_payload(struct runtime_ws *ws, const struct ws_head *h)
{
	uint8_t *p = control_room(ws);

	for (size_t got = 0; got < h->len;) {
		ssize_t n = payload_some(ws, p + got, (size_t)h->len - got);
		if (n < 0)
			return (int)n;
		got += (size_t)n;
	}
	if (h->masked)
		runtime__ws_mask(p, (size_t)h->len, h->mask, 0);
	return 0;
}

/* Room for more of the message: doubled, never past left more bytes
 * (the caller's bound: what the message's last frame still holds, or
 * message_max). It grows only once full, so a length the peer only
 * claims costs at most twice what came. */
int runtime__ws_msg_grow(struct runtime_ws *ws, uint64_t left)
{
	size_t want = ws->msg_cap < 2048 ? 4096 : 2 * ws->msg_cap;
	size_t most = ws->msg_len + (size_t)left + 1; /* a NUL after the message */

	want = want < most ? want : most;
	uint8_t *p = realloc(ws->msg, want);
	if (!p)
		return -ENOMEM;
	ws->msg = p;
	ws->msg_cap = want;
	return 0;
}

/* Compressed payload bytes [*off, end) of frame h, read a chunk at a
 * time, unmasked and inflated onto the message (ws_deflate.c); at the
 * message's last byte its tail. 0, or -errno. */
static int deflated_payload(struct runtime_ws *ws, const struct ws_head *h, uint64_t *off,
                            uint64_t end)
{
	uint8_t chunk[INFLATE_CHUNK];
	int rc = 0;

	while (rc == 0 && *off < end) {
		uint64_t left = end - *off;
		ssize_t n = payload_some(ws, chunk, left < sizeof(chunk) ? (size_t)left : sizeof(chunk));
		if (n < 0)
			return (int)n;
		if (h->masked)
			runtime__ws_mask(chunk, (size_t)n, h->mask, *off);
		rc = runtime__ws_inflate(ws, chunk, (size_t)n, false);
		*off += (uint64_t)n;
	}
	if (rc == 0 && h->fin && *off == h->len)
		rc = runtime__ws_inflate(ws, NULL, 0, true);
	return rc == -ENOMEM || rc == 0 ? rc : fail(ws, -rc);
}

/* Payload bytes [*off, end) of data frame h onto the message, unmasked
 * and checked (text: UTF-8); *off moves on. 0, or -errno. */
static int data_payload(struct runtime_ws *ws, const struct ws_head *h, uint64_t *off,
                        uint64_t end)
{
	if (ws->rd.compressed)
		return deflated_payload(ws, h, off, end);
	while (*off < end) {
		uint64_t left = end - *off;
		/* The last frame bounds the message; an earlier one does not:
		 * growing by its few bytes would copy the message per fragment
		 * (1 MiB in 64-byte fragments: 16,384 copies). */
		uint64_t most = h->fin ? h->len - *off : ws->rd.message_max - ws->msg_len;
		int rc = ws->msg_len + 1 >= ws->msg_cap ? runtime__ws_msg_grow(ws, most) : 0;
		if (rc < 0)
			return rc;
		size_t room = ws->msg_cap - 1 - ws->msg_len;
		uint8_t *dst = ws->msg + ws->msg_len;
		ssize_t n = payload_some(ws, dst, left < room ? (size_t)left : room);
		if (n < 0)
			return (int)n;
		if (h->masked)
			runtime__ws_mask(dst, (size_t)n, h->mask, *off);
		if ((rc = runtime__ws_reader_payload(&ws->rd, dst, (size_t)n)) < 0)
			return fail(ws, -rc);
		ws->msg_len += (size_t)n;
		*off += (uint64_t)n;
	}
	return 0;
}

/* ---------------------------------------------------------- receiving */

/* A close code one may send or receive (RFC 6455 7.4: not 1004-1006,
 * 1015, nor unassigned ones below 3000). */
static bool code_ok(unsigned c)
{
	return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
}

static bool utf8_ok(const void *p, size_t n)
{
	struct ws_utf8 u = { 0 };

	return runtime__ws_utf8_feed(&u, p, n) && runtime__ws_utf8_whole(&u);
}

/* The peer's close, p[0..n): its code and reason kept, answered with the
 * same code unless a close went already. 0 (closed), or -errno. */
static int close_in(struct runtime_ws *ws, const uint8_t *p, size_t n)
{
	unsigned code = n >= 2 ? (unsigned)p[0] << 8 | p[1] : RUNTIME_WS_NO_STATUS;

	if (n == 1 || (n >= 2 && !code_ok(code)))
		return fail(ws, WS_PROTOCOL_ERROR);
	if (n > 2 && !utf8_ok(p + 2, n - 2))
		return fail(ws, WS_INVALID_DATA);
	if (!ws->close_sent)
		close_out(ws, n >= 2 ? code : 0, NULL, 0);
	ws->code = (uint16_t)code;
	if (n > 2 && (ws->reason = malloc(n - 2))) { /* none, short of memory */
		ws->reason_len = (uint8_t)(n - 2);
		memcpy(ws->reason, p + 2, n - 2);
	}
	return 0;
}

/* A control frame, its head read: 1 to read on, 0 (closed), or -errno. */
static int control_in(struct runtime_ws *ws, const struct ws_head *h)
{
	int rc = control_payload(ws, h);

	if (rc < 0)
		return rc;
	if (h->opcode == WS_CLOSE)
		return close_in(ws, control_room(ws), (size_t)h->len);
	if (h->opcode == WS_PING && !ws->close_sent &&
	    (rc = control_out(ws, WS_PONG, control_room(ws), (size_t)h->len)) < 0)
		return rc;
	return 1;
}

/* A drain while no message was under way: going away (1001). */
static int drained(struct runtime_ws *ws)
{
	close_out(ws, RUNTIME_WS_GOING_AWAY, NULL, 0);
	ws->code = RUNTIME_WS_GOING_AWAY;
	return 0;
}

/* The whole message, NUL after it, into msg: its type. */
static int deliver(struct runtime_ws *ws, struct runtime_ws_message *msg)
{
	int rc = runtime__ws_reader_end(&ws->rd);

	if (rc < 0)
		return fail(ws, -rc);
	if (!ws->msg && (rc = runtime__ws_msg_grow(ws, 0)) < 0)
		return rc;
	ws->msg[ws->msg_len] = '\0';
	*msg = (struct runtime_ws_message){ .type = ws->rd.opcode, .data = ws->msg,
	                                    .len = ws->msg_len };
	return ws->rd.opcode;
}

/* A piece of a message under way, NUL after it, into msg: its type. */
static int piece(struct runtime_ws *ws, struct runtime_ws_message *msg)
{
	ws->msg[ws->msg_len] = '\0';
	*msg = (struct runtime_ws_message){ .type = ws->rd.opcode, .data = ws->msg,
	                                    .len = ws->msg_len };
	return ws->rd.opcode;
}

/* The last message's buffer, if large, goes before the next: one big
 * message must not cost its size for the connection's life. */
static void msg_shrink(struct runtime_ws *ws)
{
	if (ws->msg_cap > MSG_KEEP) {
		free(ws->msg);
		ws->msg = NULL;
		ws->msg_cap = 0;
	}
	ws->msg_len = 0;
}

/* The next data frame's head into ws->frame, control frames answered on
 * the way: 1, 0 (closed), or -errno. */
static int frame_next(struct runtime_ws *ws)
{
	for (;;) {
		int rc = head_in(ws, &ws->frame);
		if (rc == -ESHUTDOWN)
			return drained(ws);
		if (rc < 0)
			return rc;
		if (ws->frame.opcode & 0x8) {
			if ((rc = control_in(ws, &ws->frame)) != 1)
				return rc;
			continue;
		}
		if ((rc = runtime__ws_reader_frame(&ws->rd, &ws->frame)) < 0)
			return fail(ws, -rc);
		ws->frame_off = 0;
		ws->frame_open = true;
		return 1;
	}
}

/* Frames up to a message's last: its type, 0 (closed), or -errno. */
static int message_in(struct runtime_ws *ws, struct runtime_ws_message *msg)
{
	msg_shrink(ws);
	for (;;) {
		int rc = ws->frame_open ? 1 : frame_next(ws);
		if (rc <= 0)
			return rc;
		rc = data_payload(ws, &ws->frame, &ws->frame_off, ws->frame.len);
		if (rc < 0)
			return rc;
		ws->frame_open = false;
		if (ws->frame.fin)
			return deliver(ws, msg);
	}
}

/* The next piece of a message: what one read of its payload brought
 * (at most PART_MAX bytes; a compressed chunk's inflation), or its end.
 * Its type, *last set at the message's end; 0 (closed), or -errno. */
static int part_in(struct runtime_ws *ws, struct runtime_ws_message *msg, int *last)
{
	msg_shrink(ws);
	for (;;) {
		int rc = ws->frame_open ? 1 : frame_next(ws);
		if (rc <= 0)
			return rc;
		struct ws_head *h = &ws->frame;
		uint64_t left = h->len - ws->frame_off;
		rc = data_payload(ws, h, &ws->frame_off, ws->frame_off + (left < PART_MAX ? left : PART_MAX));
		if (rc < 0)
			return rc;
		ws->frame_open = ws->frame_off < h->len;
		*last = !ws->frame_open && h->fin;
		if (*last)
			return deliver(ws, msg);
		if (ws->msg_len)
			return piece(ws, msg);
	}
}

int runtime__ws_recv_one(struct runtime_ws *ws, struct runtime_ws_message *msg)
{
	if (ws->error)
		return ws->error;
	if (ws->code)
		return 0;
	ws->receiver = runtime_fiber_self();
	int rc = message_in(ws, msg);
	ws->receiver = NULL;
	return rc;
}

int runtime_ws_recv(struct runtime_ws *ws, struct runtime_ws_message *msg)
{
	if (!ws || !msg)
		return -EINVAL;
	if (ws->receiver || ws->fn)
		return -EBUSY;
	if (ws->parted)
		return -EALREADY; /* a message's pieces are under way */
	return runtime__ws_recv_one(ws, msg);
}

int runtime_ws_recv_part(struct runtime_ws *ws, struct runtime_ws_message *msg, int *last)
{
	if (!ws || !msg || !last)
		return -EINVAL;
	if (ws->receiver || ws->fn)
		return -EBUSY;
	if (ws->error)
		return ws->error;
	if (ws->code)
		return 0;
	ws->receiver = runtime_fiber_self();
	ws->parted = true;
	int rc = part_in(ws, msg, last);
	ws->parted = rc > 0 && !*last;
	ws->receiver = NULL;
	return rc;
}

/* ------------------------------------------------------------ closing */

/* Read on until the peer's close (data dropped), within the timeout. */
static void await_close(struct runtime_ws *ws)
{
	struct runtime_ws_message m;

	ws->ping_interval = 0;
	ws->read_end = runtime_now() + ws->close_timeout;
	while (!ws->code && !ws->error && message_in(ws, &m) > 0)
		;
}

int runtime_ws_close(struct runtime_ws *ws, int code, const char *reason)
{
	size_t len = reason ? strlen(reason) : 0;
	int rc = 0;

	if (!ws)
		return -EINVAL;
	if ((code && !code_ok((unsigned)code)) || (!code && len) || len > WS_CONTROL_MAX - 2 ||
	    !utf8_ok(reason, len)) {
		rc = -EINVAL;
		code = RUNTIME_WS_NORMAL;
		len = 0;
	}
	if (!ws->close_sent && !ws->error)
		close_out(ws, (unsigned)code, reason, len);
	if (ws->fn) { /* served: its receiver ends it */
		runtime__ws_closing(ws);
		return rc;
	}
	if (!ws->code && !ws->error)
		await_close(ws);
	if (!rc && ws->error && ws->code == RUNTIME_WS_ABNORMAL)
		rc = ws->error;
	runtime__ws_end(ws);
	return rc;
}

void runtime__ws_end(struct runtime_ws *ws)
{
	if (ws->result)
		ws->result_close(ws->result);
	runtime__ws_free(ws);
}

int runtime_ws_close_code(const struct runtime_ws *ws, struct runtime_http_slice *reason)
{
	if (!ws)
		return -EINVAL;
	if (reason)
		*reason = (struct runtime_http_slice){ ws->reason, ws->reason_len };
	return ws->code;
}

const char *runtime_ws_subprotocol(const struct runtime_ws *ws)
{
	return ws ? ws->protocol : NULL;
}
