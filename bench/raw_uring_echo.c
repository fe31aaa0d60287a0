/* SPDX-License-Identifier: MIT */
/*
 * raw_uring_echo: the floor for the fiber runtime's echo server.  A TCP echo
 * server with no fibers and no runtime: one thread, one io_uring, and a
 * per-connection recv -> send -> recv state machine driven directly by CQEs.
 * Each connection has exactly one operation in flight; user_data is the
 * connection pointer with the operation kind in its low three bits.  Every loop
 * turn makes one io_uring_submit_and_wait() call, so a batch of completions
 * costs one syscall.  SIGINT/SIGTERM arrive through a signalfd read in the
 * same ring and end the loop cleanly.  Usage: raw_uring_echo [--port P]
 * [--bind ADDR] [--setup defer|coop|none]; listens on 127.0.0.1:9000 and
 * takes the strongest ring setup the kernel accepts by default.
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
#include <unistd.h>

#define ECHO_PROG "raw_uring_echo"
#include "echo_server_common.h"
#include "uring_loop.h"

enum {
	/* The CQ gets twice this.  Each connection has one op in flight;
	 * past ~8k connections completions spill into the kernel's
	 * overflow list: still correct, just slower. */
	RING_ENTRIES = 4096,
	BUF_SIZE = 64 * 1024,
};

/* Operation kind, stored in the low bits of user_data. */
enum op { OP_ACCEPT, OP_RECV, OP_SEND, OP_SIGNAL, OP_CANCEL };
#define OP_MASK ((uint64_t)7)
_Static_assert(_Alignof(max_align_t) > OP_MASK, "tag must fit alignment");

/* One client.  malloc alignment keeps the low bits free for the tag. */
struct conn {
	struct node node;         /* first member: a node is its conn */
	int fd;
	unsigned len;             /* bytes in buf from the last recv */
	unsigned off;             /* of those, bytes already sent */
	char buf[BUF_SIZE];
};

struct server {
	struct uring_loop u;       /* the ring and its count of SQEs in flight */
	int lfd, sfd;
	int stop;
	struct signalfd_siginfo si; /* target of the signalfd read */
	struct node live;           /* list sentinel */
};

static void queue_accept(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(&s->u);

	io_uring_prep_accept(sqe, s->lfd, NULL, NULL, SOCK_CLOEXEC);
	tag(sqe, NULL, OP_ACCEPT);
}

static void queue_recv(struct server *s, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(&s->u);

	io_uring_prep_recv(sqe, c->fd, c->buf, sizeof c->buf, 0);
	tag(sqe, c, OP_RECV);
}

/* Sends the unsent tail of the last recv; MSG_NOSIGNAL: a reset peer must
 * show up as -EPIPE, not kill the server. */
static void queue_send(struct server *s, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(&s->u);

	io_uring_prep_send(sqe, c->fd, c->buf + c->off, c->len - c->off,
			   MSG_NOSIGNAL);
	tag(sqe, c, OP_SEND);
}

static void queue_signal_read(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(&s->u);

	io_uring_prep_read(sqe, s->sfd, &s->si, sizeof s->si, 0);
	tag(sqe, NULL, OP_SIGNAL);
}

/* Only called when the connection has no operation in flight. */
static void conn_close(struct conn *c)
{
	list_del(&c->node);
	close(c->fd);
	free(c);
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
	c->len = res;
	c->off = 0;
	queue_send(s, c);
}

/* A short send re-queues the remainder before the next recv, so the byte
 * stream is echoed in order and a connection never has two ops in flight. */
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
	c->off += res;
	if (c->off < c->len)
		queue_send(s, c);
	else
		queue_recv(s, c);
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
	int port = 9000;
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
	fprintf(stderr, "raw_uring_echo: listening on %s:%d, ring setup %s\n",
		addr, bound_port(s.lfd), mode);

	queue_accept(&s);
	queue_signal_read(&s);
	uring_run(&s.u, &s.stop, dispatch, &s);
	shutdown_server(&s);
	return 0;
}
