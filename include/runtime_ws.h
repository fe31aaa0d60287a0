/* SPDX-License-Identifier: MIT */
/*
 * runtime_ws.h - WebSocket (RFC 6455) on libruntime-http, server and
 * client, as plain sequential calls: accept or connect, then receive and
 * send whole messages (or send one in parts), then close.
 *
 * Threads: a WebSocket belongs to the core of the fiber that made it;
 * its calls are for that core's fibers. One fiber receives at a time;
 * any number may send (each frame goes whole: a message sent in parts
 * is one fiber's until its last part). Control frames are the library's:
 * a ping is answered while a receiver reads, a close answered and
 * reported, and with a ping interval a silent peer is pinged and given
 * up on. Limits: a message over message_max (default 16 MiB) fails the
 * connection with 1009, text that is not UTF-8 (checked across
 * fragments) with 1007, any other breach of the RFC with 1002; a frame's
 * write that stalls past write_timeout_ns (a peer that does not read)
 * fails the send, and nothing is queued beyond the socket's own buffer.
 * With deflate, permessage-deflate (RFC 7692) is agreed when both sides
 * want it: each message is compressed on its own (no context takeover,
 * so no zlib state is held between messages), and a message whose
 * inflated size passes message_max fails with 1009 as it inflates (a
 * deflate bomb costs message_max, no more).
 *
 * Two ways to receive: a fiber's loop of runtime_ws_recv (the fiber and
 * its stack live as long as the WebSocket), or runtime_ws_serve, which
 * calls a function per message and between messages holds no fiber and
 * no buffer - the way for many mostly idle sockets.
 */
#ifndef RUNTIME_WS_H
#define RUNTIME_WS_H

#include <runtime_http.h>

#ifdef __cplusplus
extern "C" {
#endif

struct runtime_ws;

/* A data message's type (its first frame's opcode). */
enum runtime_ws_type {
	RUNTIME_WS_TEXT = 1,
	RUNTIME_WS_BINARY = 2,
};

/* Close codes a caller may want by name (RFC 6455 7.4.1). */
enum runtime_ws_code {
	RUNTIME_WS_NORMAL = 1000,
	RUNTIME_WS_GOING_AWAY = 1001,    /* a drain, a server going down */
	RUNTIME_WS_PROTOCOL_ERROR = 1002,
	RUNTIME_WS_INVALID_DATA = 1007,  /* text that is not UTF-8 */
	RUNTIME_WS_TOO_BIG = 1009,       /* over message_max */
	RUNTIME_WS_NO_STATUS = 1005,     /* reported: a close with no code */
	RUNTIME_WS_ABNORMAL = 1006,      /* reported: no close frame came */
};

/* Settings (zeroed: the defaults). */
struct runtime_ws_config {
	const char *const *subprotocols; /* NULL-terminated, or NULL. Server:
	                                    those it speaks, by preference
	                                    (the first the client offers
	                                    wins; none offered or in common:
	                                    none); client: those it offers */
	uint64_t message_max;            /* a received message's bytes (0:
	                                    16 MiB) */
	uint64_t ping_interval_ns;       /* a receiver that hears nothing
	                                    this long pings (0: never) */
	uint64_t pong_timeout_ns;        /* ... and gives up this long after
	                                    (0: the interval) */
	uint64_t close_timeout_ns;       /* the wait for the peer's close
	                                    (0: 5 s) */
	uint64_t write_timeout_ns;       /* one frame's write (0: 30 s) */
	int deflate;                     /* nonzero: permessage-deflate -
	                                    accepted if offered (server),
	                                    offered (client); no context
	                                    takeover either way */
	const char *const *headers;      /* client: "Name: value" fields more
	                                    for the handshake, NULL-terminated */
	uint64_t deadline_ns;            /* client: the handshake's, absolute
	                                    (0: none but the fiber's) */
};

/* A received message: data[0..len), and a NUL after it; valid until the
 * next receive or the close. */
struct runtime_ws_message {
	int type;                        /* RUNTIME_WS_TEXT or _BINARY */
	const void *data;
	size_t len;
};

/*
 * Server: answer req's WebSocket handshake from its handler and take the
 * connection (runtime_http_upgrade). A request that is not one - not a
 * GET asking to upgrade to "websocket" with a 16-byte Sec-WebSocket-Key
 * - is answered 400, one of another Sec-WebSocket-Version 426 with
 * "Sec-WebSocket-Version: 13"; then -EPROTO is returned and the handler
 * returns 0. Fields set on res before go with the 101. The WebSocket is
 * the handler's until it closes it (runtime_ws_close), which it must do
 * before it returns. cfg may be NULL. Handler's fiber. Returns 0 and
 * *ws, or -EPROTO (answered), -EPROTONOSUPPORT (HTTP/2 or 1.0: answered
 * 400 too), -EALREADY (an answer began), -EPIPE (the 101 could not be
 * written), -EINVAL (NULL), -ENOMEM.
 */
RUNTIME_API int runtime_ws_accept(struct runtime_http_request *req,
                                  struct runtime_http_response *res,
                                  const struct runtime_ws_config *cfg, struct runtime_ws **ws);

/*
 * Client: open url ("ws://host[:port]/path" or "wss://", verified as
 * cl's https requests are) through cl with the handshake and
 * cfg's subprotocols and headers, under cfg's deadline. Fiber context:
 * the WebSocket is that fiber's core's. Returns 0 and *ws, or
 * runtime_http_request's errors (-EPROTONOSUPPORT: another scheme),
 * -ECONNREFUSED (the server answered other than 101), -EPROTO (a 101
 * that is not the RFC's: a wrong Sec-WebSocket-Accept, a subprotocol or
 * extension not offered), -ENOMEM.
 */
RUNTIME_API int runtime_ws_connect(struct runtime_http_client *cl, const char *url,
                                   const struct runtime_ws_config *cfg, struct runtime_ws **ws);

/* The subprotocol agreed on, or NULL for none. */
RUNTIME_API const char *runtime_ws_subprotocol(const struct runtime_ws *ws);

/*
 * Wait for the next data message, answering pings and pinging a silent
 * peer as set. Returns its type (> 0) and *msg; 0 once the WebSocket is
 * closed - the peer's close answered, a drain's (1001: the runtime
 * drains while no message is under way) or one's own - with the code in
 * runtime_ws_close_code; or -EPROTO, -EILSEQ, -EMSGSIZE (the peer broke
 * the RFC, sent text not UTF-8, or a message over message_max: the
 * connection failed with 1002, 1007, 1009), -ETIMEDOUT (no pong in
 * time, or the fiber's deadline), -ECANCELED, -ECONNRESET (the
 * connection ended with no close: 1006), -EINVAL, -EPERM (another
 * core), -EBUSY (another fiber receives), -ENOMEM. After an error the
 * WebSocket is closed: close it.
 */
RUNTIME_API int runtime_ws_recv(struct runtime_ws *ws, struct runtime_ws_message *msg);

/*
 * Receive a message in pieces as it comes, for messages too large to
 * hold whole: each call returns the next piece of the message under way
 * (or of the next one) - its type (> 0), msg its bytes (a NUL after
 * them; valid until the next receive), at most 16 KiB each (compressed
 * by permessage-deflate: what 4 KiB of it inflates to, so up to about
 * 4 MiB) - with *last nonzero
 * on the message's final piece (which may be empty). Text is checked as
 * UTF-8 as it comes, but a piece may end inside a character. message_max
 * bounds the whole message still. Otherwise as runtime_ws_recv, which
 * returns -EALREADY while a message's pieces are under way.
 */
RUNTIME_API int runtime_ws_recv_part(struct runtime_ws *ws, struct runtime_ws_message *msg,
                                     int *last);

/*
 * What runtime_ws_serve calls: rc and msg as runtime_ws_recv would have
 * returned them - a message's type (> 0) and msg, or, once and last, 0
 * (closed: runtime_ws_close_code says how) or -errno (failed), msg NULL.
 */
typedef void runtime_ws_fn(struct runtime_ws *ws, int rc, const struct runtime_ws_message *msg,
                           void *arg);

/*
 * Receive with fn instead of a loop of runtime_ws_recv: the library reads
 * and calls fn(ws, rc, msg, arg) for each message, one call at a time, in
 * order, in a fiber of ws's core; between messages ws waits with no fiber
 * (runtime_conn_idle: no stack, no read or message buffer, only its own
 * state and the connection's - under 1 KiB), keepalive pings and a drain
 * (1001) handled as for runtime_ws_recv. fn may send, and may close
 * (runtime_ws_close starts the close handshake then and does not free);
 * other fibers of the core may send to ws and close it so while it
 * waits. After fn's last call (rc <= 0) returns, the library ends the
 * close handshake, waits for sends under way (they fail -EPIPE) and frees
 * ws: from then on no fiber may use it (fn's last call is where to forget
 * it). Server: call it from the handler that accepted ws, and return: the
 * connection is ws's from then (a connection runtime_serve did not make,
 * runtime_http_serve_conn's, keeps the handler's fiber while it lasts).
 * Client: from any fiber of ws's core; a fiber of the library's then
 * receives. Returns 0 (fn will run), or -EINVAL (NULL), -EBUSY (a fiber
 * receives, or it is served already), -EPERM (another core), -ENOMEM; ws
 * is the caller's still then.
 */
RUNTIME_API int runtime_ws_serve(struct runtime_ws *ws, runtime_ws_fn *fn, void *arg);

/* Send a whole message of type (RUNTIME_WS_TEXT: the caller's text must
 * be UTF-8) in one frame. Returns 0, or -EINVAL (a bad type, NULL),
 * -EPIPE (closed, or the close sent), -ETIMEDOUT (write_timeout_ns: the
 * peer does not read; the connection is failed), -ECANCELED, the
 * write's errors, -EBUSY (the caller's own message in parts is under
 * way; another fiber's is waited for). Fibers of its core. */
RUNTIME_API int runtime_ws_send(struct runtime_ws *ws, int type, const void *data, size_t len);

/* Send a message in parts, a frame each: the first part's call gives its
 * type, the rest are its continuations, the one with last nonzero ends
 * it; no other message goes out meanwhile. As runtime_ws_send. */
RUNTIME_API int runtime_ws_send_part(struct runtime_ws *ws, int type, const void *data,
                                     size_t len, int last);

/*
 * The close handshake, then free ws (a WebSocket of runtime_ws_serve's:
 * send the close and return; the library ends it): send a close with code (1000 ..
 * 4999 but 1004-1006, 1015 and 1016-2999; 0: none) and reason (at most 123 bytes,
 * UTF-8; may be NULL) unless one went, wait for the peer's (bounded by
 * close_timeout_ns; data that comes meanwhile is dropped), and close the
 * connection (the server's: when the handler returns). Call it once, when
 * no other fiber uses ws. Returns 0, or -EINVAL (a bad code or reason:
 * sent as 1000 with none), -ETIMEDOUT (no close came), the write's or
 * read's errors; ws is freed either way.
 */
RUNTIME_API int runtime_ws_close(struct runtime_ws *ws, int code, const char *reason);

/* The close code once closed (RUNTIME_WS_NO_STATUS for a close without
 * one, RUNTIME_WS_ABNORMAL for none) and its reason in *reason (may be
 * NULL; valid until the close); 0 while open. */
RUNTIME_API int runtime_ws_close_code(const struct runtime_ws *ws,
                                      struct runtime_http_slice *reason);

#ifdef __cplusplus
}
#endif

#endif /* RUNTIME_WS_H */
