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
	struct io_uring ring;
	int lfd, sfd;
	int stop;
	unsigned inflight;          /* SQEs queued whose CQE is not reaped */
	struct signalfd_siginfo si; /* target of the signalfd read */
	struct __kernel_timespec tick; /* the Date refresh period */
	struct node live;           /* list sentinel */
};

/* SQ full: flush what is queued and try again.  Never returns NULL. */
static struct io_uring_sqe *get_sqe(struct server *s)
{
	struct io_uring_sqe *sqe;

	while (!(sqe = io_uring_get_sqe(&s->ring))) {
		int ret = io_uring_submit(&s->ring);

		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			die("io_uring_submit", -ret);
	}
	s->inflight++;
	return sqe;
}

static void tag(struct io_uring_sqe *sqe, void *ptr, enum op op)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)ptr | op);
}

static void queue_accept(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_accept(sqe, s->lfd, NULL, NULL, SOCK_CLOEXEC);
	tag(sqe, NULL, OP_ACCEPT);
}

/* Appends to what is already buffered (an incomplete head). */
static void queue_recv(struct server *s, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_recv(sqe, c->fd, c->in + c->in_len, IN_SIZE - c->in_len, 0);
	tag(sqe, c, OP_RECV);
}

/* MSG_NOSIGNAL: a reset peer must show up as -EPIPE, not kill the server. */
static void queue_send(struct server *s, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_send(sqe, c->fd, c->out + c->out_off,
			   c->out_len - c->out_off, MSG_NOSIGNAL);
	tag(sqe, c, OP_SEND);
}

static void queue_signal_read(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_read(sqe, s->sfd, &s->si, sizeof s->si, 0);
	tag(sqe, NULL, OP_SIGNAL);
}

/* Writes the current time into the response and re-arms the 1 s timer.
 * Responses are copied into each connection's out[] before they are sent,
 * so a send in flight never sees the date change under it. */
static void refresh_date(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(s);
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

static void dispatch(struct server *s, uint64_t ud, int res)
{
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

/* Each CQE is marked seen before it is handled, so a get_sqe() that has to
 * submit mid-batch always finds the CQ drained up to that point. */
static void reap(struct server *s)
{
	struct io_uring_cqe *cqe;
	unsigned head;

	io_uring_for_each_cqe(&s->ring, head, cqe) {
		uint64_t ud = cqe->user_data;
		int res = cqe->res;

		io_uring_cqe_seen(&s->ring, cqe);
		s->inflight--;
		dispatch(s, ud, res);
	}
}

static const struct ring_mode {
	const char *name;
	unsigned flags;
} ring_modes[] = {
	{ "defer", IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN },
	{ "coop", IORING_SETUP_COOP_TASKRUN },
	{ "none", 0 },
};
#define N_RING_MODES (sizeof ring_modes / sizeof ring_modes[0])

/* Strongest setup this kernel accepts, or only `only` if it is not NULL:
 * DEFER_TASKRUN runs completions only inside our own io_uring_enter();
 * COOP_TASKRUN at least spares us the IPI for each completion. */
static const char *ring_init(struct io_uring *ring, const char *only)
{
	int ret = -EINVAL;

	for (size_t i = 0; i < N_RING_MODES; i++) {
		if (only && strcmp(only, ring_modes[i].name))
			continue;
		ret = io_uring_queue_init(RING_ENTRIES, ring,
					  ring_modes[i].flags);
		if (ret == 0)
			return ring_modes[i].name;
	}
	die("io_uring_queue_init", -ret);
}

static bool known_setup(const char *name)
{
	for (size_t i = 0; i < N_RING_MODES; i++)
		if (!strcmp(name, ring_modes[i].name))
			return true;
	return false;
}

/* Cancels every op (the timer too) and reaps them all, so no request still
 * holds a socket when we close it; see raw_uring_echo.c for why.  Kernels
 * without IORING_ASYNC_CANCEL_ANY (< 5.19) fail the cancel and skip the wait. */
static void cancel_all(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
	tag(sqe, NULL, OP_CANCEL);
	while (s->inflight) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		int unsupported = 0;
		int ret = io_uring_submit_and_wait(&s->ring, 1);

		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			return;
		io_uring_for_each_cqe(&s->ring, head, cqe) {
			n++;
			unsupported |= cqe->user_data == OP_CANCEL &&
				       cqe->res == -EINVAL;
		}
		io_uring_cq_advance(&s->ring, n);
		s->inflight -= n;
		if (unsupported)
			return;
	}
}

static void shutdown_server(struct server *s)
{
	cancel_all(s);
	io_uring_queue_exit(&s->ring);
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
	mode = ring_init(&s.ring, setup); /* setup NULL: best available */
	fprintf(stderr, "raw_uring_http: listening on %s:%d, ring setup %s\n",
		addr, bound_port(s.lfd), mode);

	queue_accept(&s);
	queue_signal_read(&s);
	refresh_date(&s);
	while (!s.stop) {
		int ret = io_uring_submit_and_wait(&s.ring, 1);

		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			die("io_uring_submit_and_wait", -ret);
		reap(&s);
	}
	shutdown_server(&s);
	return 0;
}
