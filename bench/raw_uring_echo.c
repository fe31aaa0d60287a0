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
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

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
/* Links of the live-connection list, only walked at shutdown. */
struct node {
	struct node *prev, *next;
};

struct conn {
	struct node node;         /* first member: a node is its conn */
	int fd;
	unsigned len;             /* bytes in buf from the last recv */
	unsigned off;             /* of those, bytes already sent */
	char buf[BUF_SIZE];
};

struct server {
	struct io_uring ring;
	int lfd, sfd;
	int stop;
	unsigned inflight;          /* SQEs queued whose CQE is not reaped */
	struct signalfd_siginfo si; /* target of the signalfd read */
	struct node live;           /* list sentinel */
};

static __attribute__((noreturn)) void die(const char *what, int err)
{
	fprintf(stderr, "raw_uring_echo: %s: %s\n", what, strerror(err));
	exit(1);
}

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

static void queue_recv(struct server *s, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_recv(sqe, c->fd, c->buf, sizeof c->buf, 0);
	tag(sqe, c, OP_RECV);
}

/* Sends the unsent tail of the last recv; MSG_NOSIGNAL: a reset peer must
 * show up as -EPIPE, not kill the server. */
static void queue_send(struct server *s, struct conn *c)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_send(sqe, c->fd, c->buf + c->off, c->len - c->off,
			   MSG_NOSIGNAL);
	tag(sqe, c, OP_SEND);
}

static void queue_signal_read(struct server *s)
{
	struct io_uring_sqe *sqe = get_sqe(s);

	io_uring_prep_read(sqe, s->sfd, &s->si, sizeof s->si, 0);
	tag(sqe, NULL, OP_SIGNAL);
}

/* Only called when the connection has no operation in flight. */
static void conn_close(struct conn *c)
{
	c->node.prev->next = c->node.next;
	c->node.next->prev = c->node.prev;
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
	c->node.next = s->live.next;
	c->node.prev = &s->live;
	s->live.next->prev = &c->node;
	s->live.next = &c->node;
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

static int listen_on(const char *addr, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int one = 1, fd;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "raw_uring_echo: bad IPv4 address '%s'\n", addr);
		exit(2);
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket", errno);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		die("bind", errno);
	if (listen(fd, SOMAXCONN) < 0)
		die("listen", errno);
	return fd;
}

/* SIGINT/SIGTERM are blocked and read from a signalfd through the ring, so
 * there is no window between checking a flag and sleeping in the kernel. */
static int signal_fd(void)
{
	sigset_t set;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	fd = signalfd(-1, &set, SFD_CLOEXEC);
	if (fd < 0)
		die("signalfd", errno);
	return fd;
}

/* Many connections need many fds: lift the soft limit to the hard one. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int bound_port(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;

	if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		return -1;
	return ntohs(sa.sin_port);
}

static __attribute__((noreturn)) void usage(void)
{
	fprintf(stderr, "usage: raw_uring_echo [--port P] [--bind ADDR] "
		"[--setup defer|coop|none]\n");
	exit(2);
}

struct config {
	const char *addr;
	int port;
	const char *setup; /* ring_modes name, or NULL: best available */
};

static bool known_setup(const char *name)
{
	for (size_t i = 0; i < N_RING_MODES; i++)
		if (!strcmp(name, ring_modes[i].name))
			return true;
	return false;
}

static void parse_args(int argc, char **argv, struct config *cfg)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "setup", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char *end;
	int o;

	while ((o = getopt_long(argc, argv, "p:b:s:h", opts, NULL)) != -1) {
		switch (o) {
		case 'p':
			cfg->port = (int)strtol(optarg, &end, 10);
			if (*end || cfg->port < 0 || cfg->port > 65535)
				usage();
			break;
		case 'b':
			cfg->addr = optarg;
			break;
		case 's':
			if (!known_setup(optarg))
				usage();
			cfg->setup = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
}

/* Cancels every op and reaps them all, so no request still holds a socket
 * when we close it: io_uring_queue_exit() alone cancels asynchronously,
 * and the listener could then outlive the process for a moment and make an
 * immediate restart on the same port fail with EADDRINUSE.  Kernels without
 * IORING_ASYNC_CANCEL_ANY (< 5.19) fail the cancel and skip the wait. */
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
	struct config cfg = { .addr = "127.0.0.1", .port = 9000 };
	const char *mode;

	parse_args(argc, argv, &cfg);
	raise_nofile();
	s.live.next = s.live.prev = &s.live;
	s.sfd = signal_fd();
	s.lfd = listen_on(cfg.addr, cfg.port);
	mode = ring_init(&s.ring, cfg.setup);
	fprintf(stderr, "raw_uring_echo: listening on %s:%d, ring setup %s\n",
		cfg.addr, bound_port(s.lfd), mode);

	queue_accept(&s);
	queue_signal_read(&s);
	while (!s.stop) {
		int ret = io_uring_submit_and_wait(&s.ring, 1);

		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			die("io_uring_submit_and_wait", -ret);
		reap(&s);
	}
	shutdown_server(&s);
	return 0;
}
