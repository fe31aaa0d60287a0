/* SPDX-License-Identifier: MIT */
/*
 * toolkit.h - what the toolkit's files share (never installed). The
 * toolkit is built into libruntime but uses only <runtime.h>'s public
 * calls and those of runtime/layer.h (I/O with a deadline of the
 * call's own): nothing here reaches into the core's own headers (runtime/core.h...).
 */
#ifndef RUNTIME_TOOLKIT_INTERNAL_H
#define RUNTIME_TOOLKIT_INTERNAL_H

#include "config.h"

#include <runtime.h>
#include "../runtime/layer.h"
#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* One direction of a connection (conn.c): its deadline, and the call
 * blocked in it now. */
struct side {
	uint64_t deadline;          /* the connection's, 0: none */
	struct runtime_fiber *fiber;
};


/*
 * serve.c's release sweep, carried by a connection of runtime_serve's
 * whose server has release_after set. An idle read marks it reading and
 * links it on its core's list, unless it is there already: it stays
 * there after the read, so a connection that reads again and again is
 * linked once per sweep period, not once per read. The sweep unlinks
 * those not reading, and releases (expires rd.fiber: the read returns
 * -EAGAIN) those it finds reading the same read a second time.
 */
struct release_watch {
	bool on : 1;                /* the server releases (release_after) */
	bool linked : 1;            /* on its core's list (watch_prev, _next) */
	bool reading : 1;           /* an idle read waits: rd.fiber reads */
	bool seen : 1;              /* one sweep has passed that read */
	bool released : 1;          /* the sweep expired it */
};

/* An idle connection holds this struct and its stream (bench-idle), so it
 * is laid out without padding: 184 bytes, a 192-byte malloc chunk. The
 * small fields go together, after the peer's address. */
struct runtime_conn {
	int fd;
	uint16_t core;              /* the core it belongs to */
	int16_t woke;               /* why runtime_conn_idle's wait ended, for
	                               the next read (0 or -errno) */
	struct runtime_stream *rx;  /* NULL: a plain recv per read */
	struct side rd, wr;
	uint64_t idle_ns;           /* the idle timeout, 0: none */
	uint64_t idle_until;        /* when it ends if no byte moves; 0: none */
	struct runtime_transport transport;
	const struct runtime_conn_layer *layer; /* NULL: plain */
	void *layer_state;
	runtime_serve_fn *resume_fn; /* what runs when runtime_conn_idle's wait ends */
	void *resume_arg;
	struct runtime_server *server; /* runtime_serve's, if it made it */
	struct runtime_conn *prev, *next; /* in the server's list of its core */
	struct runtime_conn *watch_prev, *watch_next; /* on the release list */
	union {                     /* the peer's address (conn.c: peer_set) */
		struct sockaddr sa;     /* IP: in place, where sockaddr_storage */
		struct sockaddr_in6 in6; /* would take 128 bytes */
		unsigned char big[sizeof(void *)]; /* longer (AF_UNIX): where a
		                               malloc'ed copy is (memcpy: unaligned) */
	} peer;
	uint8_t peer_len;           /* 0: not known yet */
	bool idle : 1;              /* between requests: a drain closes it */
	bool waiting : 1;           /* runtime_conn_idle: the core has it */
	bool close_watched : 1;     /* runtime_conn_cancel_on_close is on */
	bool polled : 1;            /* runtime_conn_idle's wait is a fiber's poll */
	bool wake : 1;              /* runtime_conn_wake asked its end */
	struct release_watch watch;
};
_Static_assert(sizeof(void *) != 8 || sizeof(struct runtime_conn) <= 184,
               "an idle connection's struct stays in a 192-byte malloc chunk");

/* serve.c: true while the watcher of c's core (c of runtime_serve's)
 * waits for the drain, which it answers by expiring the idle reads: an
 * idle read need not ask whether the runtime drains before it waits. */
bool runtime__serve_drain_watched(const struct runtime_conn *c);

/* serve.c: link c on its core's list (not linked yet), arming the sweep. */
void runtime__serve_watch(struct runtime_conn *c);

/* serve.c: run a connection's handler (resume_fn, or the server's) in a
 * fiber whose wait (runtime_conn_idle) ended, and close it after unless
 * the handler waits again. */
void runtime__serve_resume(struct runtime_conn *c);

/* activation.c: an inherited socket for runtime_serve. */
int runtime__listen_claim(const struct runtime_serve_config *cfg, int *fd);

/* ------------------------------------------- restarts (handover.c) */

#define HANDOVER_FDS_MAX 64u        /* sockets in one message: a server's */

enum handover_kind {
	HANDOVER_LISTENERS = 1,     /* old -> new: a server's listening sockets */
	HANDOVER_END,               /* old -> new: no more listeners */
	HANDOVER_READY,             /* new -> old: every server accepts */
	HANDOVER_CONN,              /* old -> new: an idle connection */
};

/* One datagram of the link (handover.c); the key names the server by the
 * address its listening sockets have. */
struct handover_msg {
	uint32_t magic;
	uint8_t kind;               /* enum handover_kind */
	uint8_t shared;             /* LISTENERS: one socket every core shares */
	uint16_t keylen;
	struct sockaddr_storage key;
	char name[256];             /* LISTENERS: socket activation's name
	                               (listen_name), "" for none */
};

/* Send m (its magic set here) and n fds; waits up to 5 s for room (a
 * fiber). 0 or -errno. */
int runtime__handover_send(int sock, const struct handover_msg *m, const int *fds, unsigned n);
/* Receive one message and up to *n fds (*n: how many came; close-on-exec),
 * waiting up to timeout_ns (< 0: none; a fiber's wait, or poll(2) outside
 * one). sizeof(*m), 0 when the other side has gone, or -errno (-EPROTO:
 * no message of ours, its fds closed). */
ssize_t runtime__handover_recv(int sock, struct handover_msg *m, int *fds, unsigned *n,
                               int64_t timeout_ns);
/* The old process: the ready successor's link (-1: none), from which on
 * idle connections move (runtime_conn_handover) and the servers stop
 * accepting without shutting their sockets down. */
void runtime__handover_begin(int sock);
int runtime__handover_target(void);
/* The successor: the predecessor's listening sockets for a server of
 * cfg's - the socket named cfg->listen_name, else one of cfg->port (0:
 * any) - taken into fds (*n of them; *shared: one socket for every
 * core): 1; 0 if none. */
int runtime__handover_claim(struct runtime_server *srv, const struct runtime_serve_config *cfg,
                            int *fds, unsigned *n, bool *shared);
/* The successor: srv (which claimed sockets) accepts on every core; READY
 * goes to the predecessor once every server that claimed some does. */
void runtime__handover_listening(struct runtime *rt, struct runtime_server *srv);
/* serve.c: a connection handed over joins srv, on one of its cores. */
void runtime__serve_adopt(struct runtime_server *srv, int fd);
/* serve.c: every live server's listeners over sock, then END. 0, or
 * -ENOENT (no server), or -errno. */
int runtime__serve_offer(int sock);
/* serve.c: c's socket to the successor over sock (counted). 0 or -errno. */
int runtime__serve_hand_over(struct runtime_conn *c, int sock);

/* conn.c: keep addr (len bytes) as the connection's peer; false if it
 * cannot (no memory for a long one): it stays unknown. */
bool runtime__conn_peer_set(struct runtime_conn *c, const void *addr, socklen_t len);



/* sendmsg, or send for one iovec (the shorter path through the kernel):
 * MSG_NOSIGNAL, so a gone peer is -EPIPE even off the core threads'
 * SIGPIPE mask. */
static inline ssize_t send_iov(int fd, const struct iovec *iov, int iovcnt)
{
	return runtime__send_by(fd, iov, iovcnt, MSG_NOSIGNAL, 0);
}

/*
 * Write every byte of iov[0..iovcnt) through t's writev, looping over
 * short writes (iov is advanced in place: the caller's array is scratch).
 * Returns the total, or -errno (-EIO if a writev took no byte); *done (if
 * not NULL) receives the bytes written either way.
 */
ssize_t runtime__transport_write_all(const struct runtime_transport *t, struct iovec *iov,
                                     int iovcnt, size_t *done);

#endif
