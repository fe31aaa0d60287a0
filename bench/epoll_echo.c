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
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define ECHO_PROG "epoll_echo"
#include "echo_server_common.h"

enum { BUF_SIZE = 64 * 1024, MAX_EVENTS = 256 };

/* epoll data.ptr of the two non-connection fds. */
static char listener_tag, signal_tag;

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

static void conn_close(struct conn *c)
{
	list_del(&c->node);
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
	list_add(&s->live, &c->node);
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

static void watch(int ep, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl", errno);
}

static void run(struct server *s)
{
	struct epoll_event evs[MAX_EVENTS];

	while (!s->stop) {
		int n = epoll_wait(s->ep, evs, MAX_EVENTS, -1);

		if (n < 0 && errno != EINTR)
			die("epoll_wait", errno);
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
	int port = 9000;

	parse_args(argc, argv, &addr, &port, NULL);
	raise_nofile();
	list_init(&s.live);
	s.sfd = signal_fd(SFD_NONBLOCK);
	s.lfd = listen_on(addr, port, SOCK_NONBLOCK);
	s.ep = epoll_create1(EPOLL_CLOEXEC);
	if (s.ep < 0)
		die("epoll_create1", errno);
	watch(s.ep, s.lfd, &listener_tag);
	watch(s.ep, s.sfd, &signal_tag);
	fprintf(stderr, "epoll_echo: listening on %s:%d\n", addr,
		bound_port(s.lfd));

	run(&s);
	while (s.live.next != &s.live)
		conn_close((struct conn *)s.live.next);
	close(s.lfd);
	close(s.sfd);
	close(s.ep);
	return 0;
}
