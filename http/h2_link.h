/* SPDX-License-Identifier: MIT */
/*
 * h2_link.h - what both sides of HTTP/2 share (h2_send.c): the sending
 * half of a connection, and a stream's outgoing body. The server's
 * connections (h2.h) and the client's (h2_client.h) begin with a link,
 * which is their sessions' user data.
 */
#ifndef RUNTIME_HTTP_H2_LINK_H
#define RUNTIME_HTTP_H2_LINK_H

#include <nghttp2/nghttp2.h>
#include <runtime_toolkit.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define H2_OUT (16 * 1024)         /* a link's output buffer */

/*
 * What sends, alike on both sides (h2_send.c): the session, the socket,
 * an output buffer, and who writes now. One fiber flushes at a time; the
 * reader flushes after each round of input, and while it waits to read,
 * output that comes is the writer's (start_writer: the server spawns one
 * for as long as there is output, a client connection has its own).
 */
struct h2_link {
	nghttp2_session *session;
	struct runtime_conn *rc;
	char *out;                   /* H2_OUT bytes (NULL: none now) */
	size_t out_len;
	uint64_t write_timeout_ns;   /* a write's bound, from its start */
	_Atomic uint64_t *sent;      /* counts the bytes written; NULL: none */
	void (*start_writer)(struct h2_link *l);
	bool reading;                /* the reader waits for input */
	bool flushing;               /* a fiber writes the output now */
	bool writer;                 /* the writer flushes, or is to */
	bool broken;                 /* a write or the session failed */
};

/* A stream's outgoing body: bytes its fiber (a handler, a requester)
 * gave and the session has not framed yet - they stay that fiber's, which
 * waits meanwhile (waiter) - and whether the body ends after them. */
struct h2_out {
	const char *p;
	size_t len;
	bool end;
	bool deferred;               /* the session waits for bytes */
	struct runtime_fiber *waiter; /* parked on the stream, for anything */
};

/* The buffers of a head's names and values (nghttp2's), held for as
 * long as its slices are read: a server's request, a client's response. */
struct h2_held {
	nghttp2_rcbuf **bufs;
	unsigned n, cap;
};

/* h2_mem.c: HTTP/2's memory, blocks up to 8 KiB cached per thread.
 * runtime__h2_free takes only runtime__h2_alloc's blocks. */
nghttp2_mem *runtime__h2_mem(void); /* nghttp2 copies it */
void *runtime__h2_alloc(size_t size);
void runtime__h2_free(void *p);
size_t runtime__h2_mem_cached(void); /* bytes the calling thread keeps */
/* Hold buf (false: no memory); let go of all (drop: the array stays for
 * another head; free: it goes too). */
bool runtime__h2_hold(struct h2_held *h, nghttp2_rcbuf *buf);
void runtime__h2_held_drop(struct h2_held *h);
void runtime__h2_held_free(struct h2_held *h);

/* h2_send.c */
void runtime__h2_send_callbacks(nghttp2_session_callbacks *cb);
int runtime__h2_flush(struct h2_link *l);
void runtime__h2_kick(struct h2_link *l);
nghttp2_data_provider runtime__h2_body_source(struct h2_out *o);
/* Let o's fiber frame more: the session asked for bytes it had none of. */
void runtime__h2_resume(struct h2_link *l, int32_t id, struct h2_out *o);

#endif
