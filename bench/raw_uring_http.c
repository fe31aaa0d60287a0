/* SPDX-License-Identifier: MIT */
/*
 * raw_uring_http: the floor for the fiber runtime's HTTP server.  No fibers,
 * no runtime and no HTTP parsing beyond finding the end of each request head
 * ("\r\n\r\n"): every request, whatever it asks for, gets the same pre-built
 * plaintext response ("Hello, World!").  One thread, one io_uring, and a
 * per-connection recv -> send -> recv state machine driven directly by CQEs,
 * as in raw_uring_echo.c: one operation in flight per connection, user_data
 * is the connection pointer with the operation kind in its low three bits,
 * and one io_uring_submit_and_wait() per loop turn.  All the requests one
 * recv completes are answered by ONE send (pipelining).  The Date header is
 * rewritten by a 1 s timeout op in the same ring.  Request bodies are not
 * skipped (GET only) and every connection is kept alive.  SIGINT/SIGTERM
 * arrive through a signalfd read in the ring and end the loop cleanly.
 * Usage: raw_uring_http [--port P] [--bind ADDR] [--setup defer|coop|none];
 * listens on 127.0.0.1:8080 and takes the strongest ring setup by default.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ECHO_PROG "raw_uring_http"
#include "echo_server_common.h"
#include "uring_loop.h"

enum {
	/* The CQ gets twice this; one op in flight per connection, as in
	 * raw_uring_echo. */
	RING_ENTRIES = 4096,
	IN_SIZE = 16 * 1024,  /* a request head must fit in this */
	OUT_SIZE = 64 * 1024, /* responses batched into one send */
};

/* The response; DATE_OFF is where the 29 characters of the date start. */
#define RESP_HEAD "HTTP/1.1 200 OK\r\nServer: raw\r\nContent-Type: text/plain\r\n" \
		  "Content-Length: 13\r\nDate: "
#define DATE_LEN 29 /* "Sun, 06 Nov 1994 08:49:37 GMT" */
#define RESP_TAIL "\r\n\r\nHello, World!"
enum {
	DATE_OFF = sizeof RESP_HEAD - 1,
	RESP_LEN = DATE_OFF + DATE_LEN + sizeof RESP_TAIL - 1,
};
static char response[RESP_LEN + 1] = RESP_HEAD "Thu, 01 Jan 1970 00:00:00 GMT" RESP_TAIL;
_Static_assert(sizeof RESP_HEAD "Thu, 01 Jan 1970 00:00:00 GMT" RESP_TAIL - 1 == RESP_LEN,
	       "date placeholder has DATE_LEN characters");

/* Operation kind, stored in the low bits of user_data. */
enum op { OP_ACCEPT, OP_RECV, OP_SEND, OP_SIGNAL, OP_CANCEL, OP_TIMER };
#define OP_MASK ((uint64_t)7)
_Static_assert(_Alignof(max_align_t) > OP_MASK, "tag must fit alignment");

/* One client.  malloc alignment keeps the low bits free for the tag.  in[]
 * holds [in_off, in_len): received bytes not yet answered, the tail maybe an
 * incomplete head; out[] holds [out_off, out_len): responses not yet sent. */
struct conn {
	struct node node;         /* first member: a node is its conn */
	int fd;
	unsigned in_off, in_len;
	unsigned out_off, out_len;
	char in[IN_SIZE];
	char out[OUT_SIZE];
};

struct server {
	struct uring_loop u;       /* the ring and its count of SQEs in flight */
	int lfd, sfd;
	int stop;
	struct signalfd_siginfo si; /* target of the signalfd read */
	struct __kernel_timespec tick; /* the Date refresh period */
	struct node live;           /* list sentinel */
};

static void queue_accept(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(&s->u);

	io_uring_prep_accept(sqe, s->lfd, NULL, NULL, SOCK_CLOEXEC);
	tag(sqe, NULL, OP_ACCEPT);
}

/* Appends to what is already buffered (an incomplete head). */
static void queue_recv(struct server *s, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(&s->u);

	io_uring_prep_recv(sqe, c->fd, c->in + c->in_len, IN_SIZE - c->in_len, 0);
	tag(sqe, c, OP_RECV);
}

/* MSG_NOSIGNAL: a reset peer must show up as -EPIPE, not kill the server. */
static void queue_send(struct server *s, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(&s->u);

	io_uring_prep_send(sqe, c->fd, c->out + c->out_off,
			   c->out_len - c->out_off, MSG_NOSIGNAL);
	tag(sqe, c, OP_SEND);
}

static void queue_signal_read(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(&s->u);

	io_uring_prep_read(sqe, s->sfd, &s->si, sizeof s->si, 0);
	tag(sqe, NULL, OP_SIGNAL);
}

/* Writes the current time into the response and re-arms the 1 s timer.
 * Responses are copied into each connection's out[] before they are sent,
 * so a send in flight never sees the date change under it. */
static void refresh_date(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(&s->u);
	char date[DATE_LEN + 1];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	if (strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm) == DATE_LEN)
		memcpy(response + DATE_OFF, date, DATE_LEN);
	s->tick = (struct __kernel_timespec){ .tv_sec = 1 };
	io_uring_prep_timeout(sqe, &s->tick, 0, 0);
	tag(sqe, NULL, OP_TIMER);
}

/* Only called when the connection has no operation in flight. */
static void conn_close(struct conn *c)
{
	list_del(&c->node);
	close(c->fd);
	free(c);
}

/* The next step once nothing is in flight: answer every complete head in
 * in[] (as many as out[] holds) with one send, or else, with only an
 * incomplete head or nothing left, move it to the front and recv more. */
static void serve(struct server *s, struct conn *c)
{
	char *end;

	while (c->out_len + RESP_LEN <= OUT_SIZE &&
	       (end = memmem(c->in + c->in_off, c->in_len - c->in_off,
			     "\r\n\r\n", 4))) {
		c->in_off = end + 4 - c->in;
		memcpy(c->out + c->out_len, response, RESP_LEN);
		c->out_len += RESP_LEN;
	}
	if (c->out_len) {
		queue_send(s, c);
		return;
	}
	c->in_len -= c->in_off;
	memmove(c->in, c->in + c->in_off, c->in_len);
	c->in_off = 0;
	if (c->in_len == IN_SIZE) { /* a head larger than in[]: give up */
		conn_close(c);
		return;
	}
	queue_recv(s, c);
}

static void on_accept(struct server *s, int res)
{
	struct conn *c;
	int one = 1;

	queue_accept(s);
	if (res < 0)
		return; /* e.g. ECONNABORTED, EMFILE: keep accepting */
	c = malloc(sizeof *c);
	if (!c) {
		close(res);
		return;
	}
	setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	c->fd = res;
	c->in_off = c->in_len = c->out_off = c->out_len = 0;
	list_add(&s->live, &c->node);
	queue_recv(s, c);
}

static void on_recv(struct server *s, struct conn *c, int res)
{
	if (res == -EINTR || res == -EAGAIN) {
		queue_recv(s, c);
		return;
	}
	if (res <= 0) { /* 0: orderly EOF; < 0: reset or other error */
		conn_close(c);
		return;
	}
	c->in_len += res;
	serve(s, c);
}

/* A short send re-queues the remainder; only then are the requests still
 * buffered answered, so responses go out in order, one op at a time. */
static void on_send(struct server *s, struct conn *c, int res)
{
	if (res == -EINTR || res == -EAGAIN) {
		queue_send(s, c);
		return;
	}
	if (res <= 0) {
		conn_close(c);
		return;
	}
	c->out_off += res;
	if (c->out_off < c->out_len) {
		queue_send(s, c);
		return;
	}
	c->out_off = c->out_len = 0;
	serve(s, c);
}

static void dispatch(void *ctx, uint64_t ud, int res)
{
	struct server *s = ctx;
	struct conn *c = (struct conn *)(uintptr_t)(ud & ~OP_MASK);

	switch ((enum op)(ud & OP_MASK)) {
	case OP_ACCEPT:
		on_accept(s, res);
		break;
	case OP_RECV:
		on_recv(s, c, res);
		break;
	case OP_SEND:
		on_send(s, c, res);
		break;
	case OP_SIGNAL:
		s->stop = 1;
		break;
	case OP_TIMER: /* -ETIME when it expires */
		if (!s->stop)
			refresh_date(s);
		break;
	case OP_CANCEL:
		break;
	}
}

static void shutdown_server(struct server *s)
{
	uring_shutdown(&s->u, OP_CANCEL);
	while (s->live.next != &s->live)
		conn_close((struct conn *)s->live.next);
	close(s->lfd);
	close(s->sfd);
}

int main(int argc, char **argv)
{
	static struct server s;
	const char *addr = "127.0.0.1", *setup = NULL, *mode;
	int port = 8080;
	const struct extra_opt setup_opt = {
		.name = "setup", .key = 's', .valid = known_setup,
		.usage = " [--setup defer|coop|none]", .value = &setup,
	};

	parse_args(argc, argv, &addr, &port, &setup_opt);
	raise_nofile();
	list_init(&s.live);
	s.sfd = signal_fd(0);
	s.lfd = listen_on(addr, port, 0);
	mode = ring_init(&s.u.ring, RING_ENTRIES, setup); /* setup NULL: best available */
	fprintf(stderr, "raw_uring_http: listening on %s:%d, ring setup %s\n",
		addr, bound_port(s.lfd), mode);

	queue_accept(&s);
	queue_signal_read(&s);
	refresh_date(&s);
	uring_run(&s.u, &s.stop, dispatch, &s);
	shutdown_server(&s);
	return 0;
}
