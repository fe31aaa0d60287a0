/* SPDX-License-Identifier: MIT */
/*
 * h2.h - HTTP/2 in libruntime-http, on libnghttp2 over the connection's
 * own reads and writes (no call of nghttp2's ever waits: it is given the
 * bytes read and hands back the bytes to write).
 *
 *   h2_conn.c    a connection: the session, its reader, idle and drain
 *   h2_recv.c    what the session reads: streams begun, heads, bodies
 *   h2_stream.c  a stream's handler: its request and its response
 *   h2_send.c    what a session writes, on both sides (h2_link.h)
 * and the client's (h2_client.h): h2_client.c, h2_request.c.
 *
 * One fiber reads a connection, and one fiber per stream runs its
 * handler (runtime_http_handler, as for HTTP/1.1). All of them are on the
 * connection's core, so nothing here locks: a fiber's state is handed
 * over by parking and unparking. A handler never writes to the socket:
 * it queues its response's frames and the reader writes them - all that
 * one read's streams answered in one write - or, while the reader waits
 * for input, a writer fiber that lives for as long as there is output.
 * So a handler's cancel or deadline never cuts another stream's frames.
 *
 * Between requests a connection holds no fiber and no buffer: its
 * session waits with it (runtime_conn_idle), as an idle HTTP/1.1
 * connection does.
 */
#ifndef RUNTIME_HTTP_H2_H
#define RUNTIME_HTTP_H2_H

#include "http.h"

#include "h2_link.h"

_Static_assert(HTTP_OUT_SIZE == H2_OUT, "an HTTP/1.1 buffer's output is a link's");

#define H2_MAX_STREAMS 100         /* handlers at once per connection */
#define H2_STREAM_WINDOW 65535     /* request body bytes a stream may hold */
#define H2_CONN_WINDOW (1u << 20)  /* and all of a connection's streams */
#define H2_SMALL_BODY 1024         /* a fixed body up to this is copied */
#define H2_BOMB 4                  /* a head decoded to this times head_max
                                      ends the connection (an HPACK bomb) */
#define H2_CALM_BURST 1000         /* frames that carry no request: a */
#define H2_CALM_RATE 100           /* bucket of this many, refilled at */
                                   /* this rate a second */

struct h2_stream;

/* A connection of the server's speaking HTTP/2. */
struct h2_conn {
	struct h2_link link;         /* first: the session's user data */
	struct runtime_http_server *srv;
	struct http_core *core;
	struct http_conn *io;        /* while a fiber serves it: in reads, out
	                                frames to write; NULL while idle */
	struct h2_stream *streams;   /* every stream of ours, a list */
	unsigned live;               /* handlers running: the concurrency bound
	                                counts handlers, not the session's open
	                                streams (a reset stream's handler still
	                                runs: CVE-2023-44487) */
	unsigned max_streams;
	struct runtime_fiber *ender; /* waits for the handlers and the writer */
	struct runtime_fiber *reader; /* the connection's fiber, while it reads */
	bool goaway;                 /* sent or queued: no new streams */
	bool terminated;             /* with an error: the first one told */
	bool spawned;                /* handlers started by the last input */
	bool may_idle;               /* runtime_serve's: it may wait with no fiber */
	signed char idle;            /* told runtime_conn_set_idle (-1: not) */
	uint64_t idle_end;           /* a connection with no stream ends then */
	uint64_t head_start;         /* a header block began, 0: none */
	uint64_t rd_deadline;        /* told the connection last */
	double calm;                 /* tokens of the bucket */
	uint64_t calm_at;            /* its last refill */
};

static inline struct h2_conn *h2_conn_of(void *user)
{
	return (struct h2_conn *)user; /* link is its first member */
}

/* A stream of a connection: its request, its response, and the handler
 * that serves them. It lives while the session knows it (until the
 * stream closes) or its handler runs, whichever is longer. */
struct h2_stream {
	struct h2_conn *conn;
	struct h2_stream *next, *prev;   /* in conn->streams */
	int32_t id;
	bool in_session;             /* the session has not closed it yet */
	bool running;                /* its handler runs */
	bool in_end;                 /* the request's END_STREAM came */
	bool reset;                  /* closed before its response was whole */
	bool drop_rest;              /* handler done: body bytes are dropped */
	bool rst_after;              /* reset NO_ERROR once the response left */
	bool end_sent;               /* the response's END_STREAM has left */
	int refuse;                  /* a status the library answers, 0: none */
	struct runtime_fiber *fiber; /* the handler's, while it runs */
	/* The head: nghttp2's buffers for names and values, held. */
	struct h2_held head_bufs;
	size_t head_size;
	struct http_slice scheme, authority, path, method; /* pseudo-fields */
	/* The request body: bytes come in [in_off, in_len). */
	char *in;
	size_t in_off, in_len, in_cap;
	uint64_t in_total;
	uint64_t started;            /* runtime_now_coarse at its head, for the
	                                duration histogram; 0: not timed */
	struct h2_out out;           /* the response body; out.waiter: the
	                                handler, parked for body bytes or for
	                                its own to be framed */
	/* Not zeroed for a new stream, from here: */
	struct runtime_http_request req; /* req.h2 and res.h2: this */
	struct runtime_http_response res;
	char status[4], length[24];
	char small[H2_SMALL_BODY];
};

/* h2_conn.c (runtime__h2_serve and runtime__h2_preface: http.h) */
bool runtime__h2_calm(struct h2_conn *h, double cost);
void runtime__h2_goaway(struct h2_conn *h, uint32_t code);
void runtime__h2_set_idle(struct h2_conn *h);
void runtime__h2_wake_reader(struct h2_conn *h);

/* h2_recv.c */
void runtime__h2_recv_callbacks(nghttp2_session_callbacks *cb);
void runtime__h2_stream_unref(struct h2_stream *s, bool session);

/* h2_stream.c (the calls of a handler's: http.h) */
void runtime__h2_stream_start(struct h2_stream *s);
int runtime__h2_refuse(struct h2_stream *s, int status);

#endif
