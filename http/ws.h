/* SPDX-License-Identifier: MIT */
/*
 * ws.h - WebSocket (RFC 6455) framing, pure: no I/O, no allocation, so
 * that the tests and the fuzz target drive it byte by byte. The frame
 * heads both ways, the masking, the order of frames within messages, and
 * UTF-8 validation that carries its state across fragments. A failure is
 * the close code the connection fails with: 1002 (a protocol error),
 * 1007 (text that is not UTF-8) or 1009 (over a size limit), negated.
 */
#ifndef RUNTIME_HTTP_WS_H
#define RUNTIME_HTTP_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ws_opcode {
	WS_CONTINUATION = 0x0,
	WS_TEXT = 0x1,
	WS_BINARY = 0x2,
	WS_CLOSE = 0x8,
	WS_PING = 0x9,
	WS_PONG = 0xA,
};

#define WS_RSV1 0x4             /* permessage-deflate's "compressed" bit */
#define WS_CONTROL_MAX 125      /* a control frame's payload, at most */
#define WS_HEAD_MAX 14          /* 2 + 8 (length) + 4 (mask) */

enum ws_close_code {
	WS_PROTOCOL_ERROR = 1002,
	WS_INVALID_DATA = 1007,
	WS_TOO_BIG = 1009,
};

struct ws_head {
	bool fin;
	uint8_t rsv;                /* RSV1..3 as WS_RSV1, 0x2, 0x1 */
	uint8_t opcode;
	bool masked;
	uint8_t mask[4];
	uint64_t len;               /* the payload's */
	size_t head_len;            /* bytes of the head itself */
};

/* What a reader allows: which side it reads (a server reads masked
 * frames only, a client unmasked ones only), the RSV bits an extension
 * agreed on (WS_RSV1 with permessage-deflate), the largest frame
 * payload. */
struct ws_rules {
	bool from_client;
	uint8_t rsv;
	uint64_t frame_max;
};

/*
 * The frame head at p[0..n): > 0 its length (h filled in), 0 if more
 * bytes are needed (at most WS_HEAD_MAX in all), or -1002 (a reserved
 * opcode or RSV bit, a control frame fragmented or over 125 bytes or with
 * RSV1, a mask on the wrong side's frames, a length not in its shortest
 * form or with the top bit set) or -1009 (over frame_max).
 */
int runtime__ws_head_parse(const uint8_t *p, size_t n, const struct ws_rules *rules,
                           struct ws_head *h);

/* A frame head into out (WS_HEAD_MAX bytes of room): the shortest length
 * form, mask NULL for a server's frame. Its length. */
size_t runtime__ws_head_put(uint8_t *out, bool fin, uint8_t rsv, uint8_t opcode,
                            const uint8_t *mask, uint64_t len);

/* p[0..n) masked (or unmasked: the same XOR) with mask, as bytes off.. of
 * its frame's payload: a payload may be masked in pieces. */
void runtime__ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t off);

/* ----------------------------------------------------------------- UTF-8 */

/* A validator's state across calls: the continuation bytes still owed
 * by the sequence under way, and the range the next one must be in. */
struct ws_utf8 {
	uint8_t need, lo, hi;
};

/* Feed p[0..n): false at the first byte that cannot be UTF-8 (RFC 3629:
 * no overlong form, no surrogate, nothing over U+10FFFF); the state goes
 * on to the next piece. */
bool runtime__ws_utf8_feed(struct ws_utf8 *u, const uint8_t *p, size_t n);

/* Does the text end here whole (no sequence cut short)? */
static inline bool runtime__ws_utf8_whole(const struct ws_utf8 *u)
{
	return u->need == 0;
}

/* -------------------------------------------------------------- messages */

/* The order of frames within messages, as a reader sees them: a data
 * message starts with TEXT or BINARY and goes on with CONTINUATION
 * frames up to one with FIN; control frames may come between; its size
 * is bounded by message_max. Text is validated as it comes (payload
 * bytes given after unmasking, and decompression if any). */
struct ws_reader {
	bool in_message;
	bool compressed;            /* this message's first frame had RSV1 */
	uint8_t opcode;             /* the message's: WS_TEXT or WS_BINARY */
	uint64_t message_len;
	uint64_t message_max;
	struct ws_utf8 utf8;
};

/* A frame's head, in order: 0, or -1002 (a continuation with no message,
 * a new message before the last one ended, RSV1 past a message's first
 * frame) or -1009 (the message over message_max). */
int runtime__ws_reader_frame(struct ws_reader *r, const struct ws_head *h);

/* Payload bytes of the current data message (as the message has them):
 * 0, or -1007 for text that cannot be UTF-8. */
int runtime__ws_reader_payload(struct ws_reader *r, const uint8_t *p, size_t n);

/* The message's last frame (FIN) has given all its bytes: 0, or -1007
 * for text that ends inside a sequence. The reader is ready for the
 * next message. */
int runtime__ws_reader_end(struct ws_reader *r);

/* ---------------------------------------------------- the handshake's */

/* SHA-1 of data[0..len) into out (ws_sha1.c: the handshake's only). */
void runtime__ws_sha1(const void *data, size_t len, uint8_t out[20]);

/* p[0..n) in base64, padded, NUL-terminated into out (4 * ((n + 2) / 3)
 * + 1 bytes of room); its length. */
size_t runtime__ws_base64(const uint8_t *p, size_t n, char *out);

/* ------------------------------------------------------ a connection */

#ifdef RUNTIME_WS_CONN /* ws_conn.c and ws_handshake.c: the runtime's types */
#include <runtime_ws.h>

#define WS_IN_SIZE 4096         /* read buffer: heads, small frames */

/* A WebSocket's state. The read buffer (and the control frame's room at
 * its end) and the message's are held only while bytes are read: one
 * served (runtime_ws_serve) and idle keeps this struct alone. */
struct runtime_ws {
	struct runtime_conn *conn;
	struct runtime_http_result *result; /* client: holds the connection, */
	void (*result_close)(struct runtime_http_result *); /* closed so */
	struct runtime_http_response *res; /* server: the handshake's, until
	                                runtime_ws_serve hands the connection
	                                over (valid in the handler only) */
	runtime_ws_fn *fn;           /* runtime_ws_serve's, or NULL */
	void *fn_arg;
	struct runtime_mutex wlock;  /* a frame at a time, or a message in parts */
	struct runtime_fiber *parts; /* the fiber whose message in parts is
	                                under way (it holds wlock between them) */
	struct runtime_fiber *receiver;
	struct ws_rules rules;
	struct ws_reader rd;
	bool client;
	bool close_sent;
	bool deflate;                /* permessage-deflate agreed (RSV1) */
	bool parts_deflated;         /* the message in parts is compressed */
	uint8_t park;                /* served: when it waits with no fiber,
	                                with nothing of a message read
	                                (http.h's enum http_idle_way) */
	bool parked;                 /* ... and does (runtime_conn_idle) */
	bool woke;                   /* ... and came back: read once */
	uint8_t reason_len;
	int8_t deflate_bits;         /* our window: 9 .. 15 */
	uint16_t code;               /* once closed: the close's code */
	int error;                   /* the failure recv reports again, or 0 */
	struct ws_zlib *z;           /* zlib's streams, during a message */
	char *reason;                /* the peer's close's, or NULL */
	char *protocol;              /* agreed, or NULL */
	uint64_t ping_interval, pong_timeout, close_timeout, write_timeout;
	uint64_t heard;              /* runtime_now() of the last byte read */
	uint64_t read_end;           /* reads end by then (the close's wait;
	                                0: no end but the keepalive's) */
	bool ping_out;               /* a keepalive ping waits for an answer */
	bool frame_open;             /* frame's payload is being read */
	bool parted;                 /* a message's pieces are under way
	                                (runtime_ws_recv_part) */
	struct ws_head frame;        /* the data frame being read, */
	uint64_t frame_off;          /* ... its payload bytes read */
	uint8_t *msg;                /* the message being read, msg_cap bytes */
	size_t msg_len, msg_cap;
	uint8_t *in;                 /* in_size bytes, then a control frame's
	                                WS_CONTROL_MAX; NULL: none held */
	size_t in_off, in_len;       /* in[in_off..in_len): read, not parsed */
	size_t in_size;              /* WS_IN_SIZE, or the early bytes' */
};

/* permessage-deflate's parameters, as offered or answered (RFC 7692 7). */
struct ws_deflate_params {
	bool server_no_takeover, client_no_takeover;
	int server_bits, client_bits;    /* max_window_bits; 0: not given */
};

/* A WebSocket over conn (the handshake done; early: bytes read past it;
 * dp: permessage-deflate's parameters, NULL: not agreed). */
int runtime__ws_new(struct runtime_ws **ws, struct runtime_conn *conn, bool client,
                    const struct runtime_ws_config *cfg, const char *protocol,
                    const void *early, size_t early_len, const struct ws_deflate_params *dp);
void runtime__ws_free(struct runtime_ws *ws);
/* ws_conn.c. The next message, as runtime_ws_recv says; a served one's
 * also -EWOULDBLOCK (nothing of a message read: wait with no fiber). */
int runtime__ws_recv_one(struct runtime_ws *ws, struct runtime_ws_message *msg);
/* The connection ended or broke with no close frame (1006): -errno. */
int runtime__ws_gone(struct runtime_ws *ws, int err);
/* The connection closed (a client's), ws freed. */
void runtime__ws_end(struct runtime_ws *ws);
/* ws_serve.c: a served WebSocket's close went out; its receiver waits
 * for the peer's, within the close timeout. */
void runtime__ws_closing(struct runtime_ws *ws);
/* Room for more of the message, at most left bytes more (ws_conn.c). */
int runtime__ws_msg_grow(struct runtime_ws *ws, uint64_t left);

/* ws_deflate.c. The first acceptable offer of a Sec-WebSocket-Extensions
 * value v[0..n), into o: true if one is. */
bool runtime__ws_deflate_parse(const char *v, size_t n, struct ws_deflate_params *o);
/* The server's answer to offer o, NUL-terminated: its length. */
size_t runtime__ws_deflate_answer(const struct ws_deflate_params *o, char *out, size_t cap);
/* in[0..n) of a compressed message inflated onto ws->msg (end: its last
 * bytes), UTF-8 checked: 0, -WS_TOO_BIG, -WS_INVALID_DATA or -ENOMEM. */
int runtime__ws_inflate(struct runtime_ws *ws, const uint8_t *in, size_t n, bool end);
/* p[0..n) deflated (last: the message ends) into *out (malloc'd). */
int runtime__ws_deflate(struct runtime_ws *ws, const void *p, size_t n, bool last, uint8_t **out,
                        size_t *len);
void runtime__ws_zlib_free(struct runtime_ws *ws);

#define WS_KEY_LEN 24           /* Sec-WebSocket-Key: base64 of 16 bytes */
#define WS_ACCEPT_LEN 28        /* Sec-WebSocket-Accept: of a SHA-1 */

/* Sec-WebSocket-Accept for key[0..WS_KEY_LEN), NUL-terminated in out. */
void runtime__ws_accept_of(const char *key, char out[WS_ACCEPT_LEN + 1]);
#endif

#endif
