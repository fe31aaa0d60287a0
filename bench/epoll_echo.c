/* SPDX-License-Identifier: MIT */
/*
 * epoll_echo: the readiness-model yardstick for the echo benchmark.  One
 * thread, level-triggered epoll, nonblocking sockets, a 64 KiB buffer per
 * connection.  A connection is either reading (EPOLLIN) or, after a short
 * write, draining its buffer (EPOLLOUT only), so a slow reader pushes back on
 * its own sender instead of growing memory.  SIGINT/SIGTERM are read from a
 * signalfd in the same epoll set and end the loop cleanly.  Usage:
 * epoll_echo [--port P] [--bind ADDR]; listens on 127.0.0.1:9000 by default.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

enum { BUF_SIZE = 64 * 1024, MAX_EVENTS = 256 };

/* epoll data.ptr of the two non-connection fds. */
static char listener_tag, signal_tag;

/* Links of the live-connection list, only walked at shutdown. */
struct node {
	struct node *prev, *next;
};

struct conn {
	struct node node;         /* first member: a node is its conn */
	int fd;
	uint32_t events;          /* current epoll interest */
	unsigned len, off;        /* buffered bytes, and how many are sent */
	char buf[BUF_SIZE];
};

struct server {
	int ep, lfd, sfd;
	int stop;
	struct node live; /* list sentinel */
};

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "epoll_echo: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void conn_close(struct conn *c)
{
	c->node.prev->next = c->node.next;
	c->node.next->prev = c->node.prev;
	close(c->fd); /* also drops it from the epoll set */
	free(c);
}

static void set_interest(struct server *s, struct conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };

	if (c->events == events)
		return;
	c->events = events;
	epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Returns 1 once the buffer is fully sent, 0 if the socket is full (caller
 * waits for EPOLLOUT), -1 on error. */
static int flush(struct conn *c)
{
	while (c->off < c->len) {
		ssize_t n = send(c->fd, c->buf + c->off, c->len - c->off,
				 MSG_NOSIGNAL);

		if (n > 0)
			c->off += n;
		else if (n < 0 && errno == EINTR)
			continue;
		else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		else
			return -1;
	}
	return 1;
}

static void on_readable(struct server *s, struct conn *c)
{
	ssize_t n = recv(c->fd, c->buf, sizeof c->buf, 0);
	int r;

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		conn_close(c);
		return;
	}
	c->len = n;
	c->off = 0;
	r = flush(c);
	if (r < 0)
		conn_close(c);
	else if (r == 0)
		set_interest(s, c, EPOLLOUT);
}

static void on_writable(struct server *s, struct conn *c)
{
	int r = flush(c);

	if (r < 0)
		conn_close(c);
	else if (r == 1)
		set_interest(s, c, EPOLLIN);
}

static void on_conn(struct server *s, struct conn *c)
{
	if (c->events == EPOLLOUT)
		on_writable(s, c);
	else
		on_readable(s, c);
}

static void add_conn(struct server *s, int fd)
{
	struct conn *c = malloc(sizeof *c);
	struct epoll_event ev = { .events = EPOLLIN };
	int one = 1;

	if (!c) {
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	c->fd = fd;
	c->events = EPOLLIN;
	c->len = c->off = 0;
	ev.data.ptr = c;
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		free(c);
		return;
	}
	c->node.next = s->live.next;
	c->node.prev = &s->live;
	s->live.next->prev = &c->node;
	s->live.next = &c->node;
}

/* Drains the accept queue; transient errors (EMFILE, ECONNABORTED) just end
 * this round, the listener stays armed. */
static void on_accept(struct server *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		add_conn(s, fd);
	}
}

static int listen_on(const char *addr, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int one = 1, fd;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "epoll_echo: bad IPv4 address '%s'\n", addr);
		exit(2);
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		die("bind");
	if (listen(fd, SOMAXCONN) < 0)
		die("listen");
	return fd;
}

static int signal_fd(void)
{
	sigset_t set;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		die("signalfd");
	return fd;
}

static void watch(int ep, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl");
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static __attribute__((noreturn)) void usage(void)
{
	fprintf(stderr, "usage: epoll_echo [--port P] [--bind ADDR]\n");
	exit(2);
}

static void parse_args(int argc, char **argv, const char **addr, int *port)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char *end;
	int o;

	while ((o = getopt_long(argc, argv, "p:b:h", opts, NULL)) != -1) {
		switch (o) {
		case 'p':
			*port = (int)strtol(optarg, &end, 10);
			if (*end || *port < 0 || *port > 65535)
				usage();
			break;
		case 'b':
			*addr = optarg;
			break;
		default:
			usage();
		}
	}
	if (optind != argc)
		usage();
}

static void run(struct server *s)
{
	struct epoll_event evs[MAX_EVENTS];

	while (!s->stop) {
		int n = epoll_wait(s->ep, evs, MAX_EVENTS, -1);

		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &listener_tag)
				on_accept(s);
			else if (p == &signal_tag)
				s->stop = 1;
			else
				on_conn(s, p);
		}
	}
}

int main(int argc, char **argv)
{
	static struct server s;
	const char *addr = "127.0.0.1";
	struct sockaddr_in sa;
	socklen_t salen = sizeof sa;
	int port = 9000;

	parse_args(argc, argv, &addr, &port);
	raise_nofile();
	s.live.next = s.live.prev = &s.live;
	s.sfd = signal_fd();
	s.lfd = listen_on(addr, port);
	s.ep = epoll_create1(EPOLL_CLOEXEC);
	if (s.ep < 0)
		die("epoll_create1");
	watch(s.ep, s.lfd, &listener_tag);
	watch(s.ep, s.sfd, &signal_tag);
	getsockname(s.lfd, (struct sockaddr *)&sa, &salen);
	fprintf(stderr, "epoll_echo: listening on %s:%d\n", addr,
		ntohs(sa.sin_port));

	run(&s);
	while (s.live.next != &s.live)
		conn_close((struct conn *)s.live.next);
	close(s.lfd);
	close(s.sfd);
	close(s.ep);
	return 0;
}
