/* SPDX-License-Identifier: MIT */
/*
 * tcp_pipe.c - plain blocking-socket helpers for tests/examples.sh (no
 * runtime in them: they test it from outside).
 *
 *   tcp_pipe PORT      connect to 127.0.0.1:PORT; copy stdin to the socket
 *                      and the socket to stdout at once; at stdin's end,
 *                      half-close (shutdown SHUT_WR) and go on reading
 *                      until the peer's end of stream. Exit 0 at that end,
 *                      1 on an error (said on stderr).
 *   tcp_pipe --after-eof
 *                      listen on 127.0.0.1, a free port: print "port N";
 *                      then, one connection at a time, read until the
 *                      client's end of stream and only then answer
 *                      "N bytes" and close. Runs until killed.
 *
 * nc would do the first, but the test's machines need not have it (and
 * its flags differ between netcats); the second is an upstream that can
 * answer only if a half-close reached it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "tcp_pipe: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == ENOTSOCK)
			w = write(fd, p, n);
		if (w < 0 && errno != EINTR)
			die("write");
		if (w > 0)
			p += w, n -= (size_t)w;
	}
}

/* Socket to stdout and stdin to the socket, both at once (a peer that
 * echoes fills the socket buffers otherwise): poll, and never write to
 * the socket more than it takes without waiting. */
static int pipe_through(int fd)
{
	static char in[65536], out[65536];
	size_t off = 0, len = 0;
	int in_open = 1;

	for (;;) {
		struct pollfd p[2] = { { in_open && !len ? 0 : -1, POLLIN, 0 },
		                       { fd, (short)(POLLIN | (len ? POLLOUT : 0)), 0 } };
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			die("poll");
		if (p[0].revents) {
			ssize_t n = read(0, in, sizeof(in));
			if (n < 0 && errno != EINTR)
				die("read stdin");
			if (n == 0 && shutdown(fd, SHUT_WR) < 0)
				die("shutdown");
			in_open = n != 0;
			len = n > 0 ? (size_t)n : 0, off = 0;
		}
		if ((p[1].revents & POLLOUT) && len) {
			ssize_t n = send(fd, in + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				die("send");
			off += n > 0 ? (size_t)n : 0;
			if (off == len)
				len = 0;
		}
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = recv(fd, out, sizeof(out), MSG_DONTWAIT);
			if (n == 0)
				return 0;
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				die("recv");
			if (n > 0)
				write_all(1, out, (size_t)n);
		}
	}
}

static _Noreturn void after_eof(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char buf[65536];

	if (ls < 0 || bind(ls, (struct sockaddr *)&sin, len) < 0 || listen(ls, 16) < 0 ||
	    getsockname(ls, (struct sockaddr *)&sin, &len) < 0)
		die("listen");
	printf("port %u\n", ntohs(sin.sin_port));
	fflush(stdout);
	for (;;) {
		int fd = accept(ls, NULL, NULL);
		if (fd < 0)
			die("accept");
		size_t total = 0;
		ssize_t n;
		while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
			total += (size_t)n;
		if (n == 0) { /* the end of stream: only now answer */
			int k = snprintf(buf, sizeof(buf), "%zu bytes\n", total);
			write_all(fd, buf, (size_t)k);
		}
		close(fd);
	}
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--after-eof"))
		after_eof();
	char *end;
	long port = argc == 2 ? strtol(argv[1], &end, 10) : 0;
	if (argc != 2 || *end || port <= 0 || port > 65535) {
		fprintf(stderr, "usage: tcp_pipe PORT | tcp_pipe --after-eof\n");
		return 2;
	}
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
	                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("connect");
	return pipe_through(fd);
}
