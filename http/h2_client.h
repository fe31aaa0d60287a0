/* SPDX-License-Identifier: MIT */
/*
 * h2_client.h - the client's HTTP/2: connections that carry the requests
 * of many fibers at once, one stream each (h2_client.c), and a request's
 * exchange on its stream (h2_request.c), on libnghttp2's client session.
 *
 * A connection belongs to the core that dialled it, as an HTTP/1.1 one
 * does, and sits in its origin's list (client.h) for as long as it is
 * open: requests of that core's fibers take streams on it while the
 * server's SETTINGS_MAX_CONCURRENT_STREAMS (and the client's
 * h2_max_streams) leave room, and a new connection is dialled when every
 * one is full. Two fibers of its own run it: a reader, which feeds the
 * session and writes what each round made (as the server's does), and a
 * writer for output that comes while the reader waits. A requester never
 * writes to the socket: its deadline or cancel cannot cut another
 * stream's frames. The reader closes the connection after idle_timeout
 * with no stream, at the server's GOAWAY once its streams are done, and
 * at any error; streams left then fail.
 */
#ifndef RUNTIME_HTTP_H2_CLIENT_H
#define RUNTIME_HTTP_H2_CLIENT_H

#include "client.h"
#include "h2_link.h"

#define H2C_IN (16 * 1024)          /* a connection's read buffer */
#define H2C_STREAM_WINDOW 65535     /* a response's bytes held unread */
#define H2C_CONN_WINDOW (1u << 20)  /* all of a connection's, unread */

struct h2_cstream;

struct h2_cconn {
	struct h2_link link;         /* first: the session's user data */
	struct h2_cconn *next;       /* in its origin's list */
	struct http_origin *origin;  /* NULL once it has left it */
	struct http_client_core *core;
	struct h2_cstream *streams;  /* every stream of ours, a list */
	unsigned active;             /* those the session has open */
	unsigned refs;               /* its two fibers', its streams' */
	unsigned used;               /* requests it carried */
	bool closing;                /* no new stream: GOAWAY came, an error,
	                                the idle timeout, a close */
	bool ending;                 /* the reader ends: the writer stops */
	bool writer_gone;            /* the writer fiber has ended */
	struct runtime_fiber *reader_f, *writer_f;
	uint64_t idle_since;         /* its last stream closed then */
	char out[H2_OUT];
	char in[H2C_IN];
};

static inline struct h2_cconn *h2_cconn_of(void *user)
{
	return (struct h2_cconn *)user; /* link is its first member */
}

/* A request's stream: its body out, the response in. It lives while the
 * session knows it or its requester (later its result) holds it. */
struct h2_cstream {
	struct runtime_http_result res; /* res.h2: this */
	struct h2_cconn *conn;
	struct h2_cstream *next, *prev; /* in conn->streams */
	int32_t id;
	bool in_session;             /* the session has not closed it */
	bool held;                   /* its requester or result holds it */
	bool head_done;              /* the final head came */
	bool ended;                  /* the response's END_STREAM came */
	bool head_bad;               /* the head broke a limit */
	int error;                   /* what ended it early, 0: nothing */
	struct h2_out out;           /* the request body; out.waiter: the
	                                requester, parked for anything */
	struct h2_held head_bufs;    /* the head's names and values */
	size_t head_size;
	char *in;                    /* body bytes come in [in_off, in_len) */
	size_t in_off, in_len, in_cap;
	uint64_t got;
};

/* h2_client.c */
void runtime__h2_cconn_unref(struct h2_cconn *h);
void runtime__h2_cstream_unref(struct h2_cstream *s, bool session);
/* Park the stream's fiber until it changes, up to deadline (0: none). */
int runtime__h2_cstream_wait(struct h2_cstream *s, uint64_t deadline);

/* h2_request.c: the session's callbacks for a response. */
void runtime__h2_response_callbacks(nghttp2_session_callbacks *cb);

#endif
