/* SPDX-License-Identifier: MIT */
/*
 * ws_serve.c - runtime_ws_serve: a WebSocket received by the library,
 * which calls the user's function per message and between messages
 * waits with no fiber (runtime_conn_idle), its read and message buffers
 * given back, so that an idle socket costs its state and its
 * connection's, not a stack.
 *
 * The receiver is a fiber that comes and goes: it reads frames until
 * nothing of a message is left to read (runtime__ws_recv_one's
 * -EWOULDBLOCK), then hands the connection to its core and ends; the
 * core starts the next one when bytes come, the keepalive's or the
 * close's deadline passes, the runtime drains, or a close from another
 * fiber wakes it (runtime_conn_wake). That next one reads once - what
 * ended the wait - and goes on as its predecessor did.
 */
#define _GNU_SOURCE
#define RUNTIME_WS_CONN
#include "http.h"
#include "ws.h"

#include <errno.h>
#include <stdlib.h>

/* After fn's last call: the close ended (or given up), sends under way
 * let finish (the mutex is FIFO: they find the close sent and leave),
 * ws freed. A server's connection is the server's to close then. The
 * wait is a cleanup's (runtime_cleanup_begin): a shutdown's cancel does
 * not cut it short - the sender, cancelled too, leaves at once - and it
 * is bounded by a write's timeout; a mutex still held past it (a message
 * in parts left unended) keeps ws - never freed under its holder. */
static void served_end(struct runtime_ws *ws)
{
	struct runtime_cleanup cu;
	int shielded = runtime_cleanup_begin(&cu, (int64_t)ws->write_timeout) == 0;
	int rc = runtime_mutex_lock(&ws->wlock, -1);

	if (shielded)
		runtime_cleanup_end(&cu);
	if (rc != 0)
		return;
	runtime_mutex_unlock(&ws->wlock);
	runtime__ws_end(ws);
}

static void served_run(struct runtime_conn *conn, void *arg);

/* Nothing of a message read: the buffers go and the connection waits
 * with no fiber (served_run comes back), under the read deadline
 * read_some set. 0: it waits; 1 or -EBUSY: bytes came already, or a
 * sender writes - read here, holding the stack this once; or -errno. */
static int park(struct runtime_ws *ws)
{
	free(ws->in);
	ws->in = NULL;
	ws->in_size = WS_IN_SIZE;
	ws->in_off = ws->in_len = 0;
	free(ws->msg);
	ws->msg = NULL;
	ws->msg_cap = ws->msg_len = 0;
	ws->parked = true;
	int rc = runtime_conn_idle(ws->conn, served_run, ws);
	if (rc != 0)
		ws->parked = false;
	return rc;
}

/* The receiver's turn: messages to fn until the WebSocket ends or waits
 * with no fiber. */
static void served_run(struct runtime_conn *conn, void *arg)
{
	struct runtime_ws *ws = arg;
	struct runtime_ws_message m;

	(void)conn;
	ws->woke = ws->parked; /* back from a wait: read what ended it */
	ws->parked = false;
	for (;;) {
		int rc = runtime__ws_recv_one(ws, &m);
		if (rc == -EWOULDBLOCK) {
			if ((rc = park(ws)) == 0)
				return;
			ws->woke = true;
			if (rc == 1 || rc == -EBUSY)
				continue;
			rc = runtime__ws_gone(ws, rc);
		}
		if (rc > 0 && ws->close_sent)
			continue; /* data after our close: dropped */
		ws->fn(ws, rc, rc > 0 ? &m : NULL, ws->fn_arg);
		if (rc <= 0)
			break;
	}
	served_end(ws);
}

void runtime__ws_closing(struct runtime_ws *ws)
{
	ws->ping_interval = 0;
	if (!ws->read_end)
		ws->read_end = runtime_now() + ws->close_timeout;
	runtime_conn_set_read_deadline(ws->conn, ws->read_end); /* a blocked read */
	if (ws->parked)
		runtime_conn_wake(ws->conn);
}

/* A client's receiver: a fiber of the library's. */
static void client_receiver(void *arg)
{
	struct runtime_ws *ws = arg;

	served_run(ws->conn, ws);
}

int runtime_ws_serve(struct runtime_ws *ws, runtime_ws_fn *fn, void *arg)
{
	if (!ws || !fn)
		return -EINVAL;
	if (ws->receiver || ws->fn)
		return -EBUSY;
	if (!runtime_fiber_self() || runtime_conn_set_read_deadline(ws->conn, 0) < 0)
		return -EPERM;
	ws->fn = fn;
	ws->fn_arg = arg;
	if (ws->res) { /* the handler's: served_run follows it in its fiber */
		ws->park = (uint8_t)runtime__http_hand_off(ws->res, served_run, ws);
		ws->res = NULL;
		return 0;
	}
	ws->park = HTTP_IDLE_AT_ONCE;
	int rc = runtime_spawn(runtime_current(), client_receiver, ws);
	if (rc < 0)
		ws->fn = NULL;
	return rc;
}
