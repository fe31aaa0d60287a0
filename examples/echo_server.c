/* SPDX-License-Identifier: MIT */
/*
 * echo_server.c - the smallest server: it sends back every byte it gets.
 * One fiber per connection, written as plain blocking code: each call
 * parks its fiber, and the core runs the other fibers meanwhile. SIGINT
 * or SIGTERM stops it: every fiber's blocking call returns -ECANCELED.
 *
 * Shows: runtime_tcp_listen, runtime_create, runtime_spawn,
 * runtime_accept, runtime_recv, runtime_send_all, runtime_close,
 * runtime_shutdown_on_signals, runtime_run.
 *
 *   ./echo_server [PORT]        # default 7000; 0 takes a free port
 *   nc 127.0.0.1 7000           # in another terminal: lines come back
 *
 * Prints "echo_server: listening on 127.0.0.1:PORT", and after a signal
 * "echo_server: stopped".
 */
#include <runtime.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One connection: read, write back, until the client closes. */
static void connection(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	ssize_t n;

	while ((n = runtime_recv(fd, buf, sizeof(buf), 0)) > 0) /* 0: the client closed */
		if (runtime_send_all(fd, buf, (size_t)n, NULL) < 0)
			break;
	runtime_close(fd); /* never cancelled: the fd is always closed */
}

/* Accept until the runtime shuts down; a fiber for each connection. */
static void acceptor(void *arg)
{
	int listen_fd = (int)(intptr_t)arg, fd;

	while ((fd = runtime_accept(listen_fd, NULL, NULL, SOCK_CLOEXEC)) != -ECANCELED) {
		if (fd < 0) { /* -EMFILE...: say so, wait a little, go on */
			fprintf(stderr, "echo_server: accept: %s\n", strerror(-fd));
			runtime_sleep(100 * 1000 * 1000);
		} else if (runtime_spawn(runtime_current(), connection, (void *)(intptr_t)fd) < 0) {
			runtime_close(fd);
		}
	}
}

int main(int argc, char **argv)
{
	char *end = "";
	long port = argc > 1 ? strtol(argv[1], &end, 10) : 7000;
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	struct runtime *rt;

	if (*end || port < 0 || port > 65535) {
		fprintf(stderr, "usage: %s [PORT]\n", argv[0]);
		return 2;
	}
	int fd = runtime_tcp_listen("127.0.0.1", (uint16_t)port, 0, 0); /* any thread */
	if (fd < 0) {
		fprintf(stderr, "echo_server: listen on port %ld: %s\n", port, strerror(-fd));
		return 1;
	}
	getsockname(fd, (struct sockaddr *)&sin, &len); /* the port, if 0 was asked */
	printf("echo_server: listening on 127.0.0.1:%u\n", ntohs(sin.sin_port));
	fflush(stdout); /* stdout may be a pipe: show the port now */
	int rc = runtime_create(&rt, NULL); /* one core */
	if (rc == 0) {
		if ((rc = runtime_shutdown_on_signals(rt)) == 0 &&
		    (rc = runtime_spawn(rt, acceptor, (void *)(intptr_t)fd)) == 0)
			rc = runtime_run(rt); /* until a signal, and every fiber has ended */
		runtime_destroy(rt);
	}
	runtime_close(fd);
	if (rc < 0) {
		fprintf(stderr, "echo_server: %s\n", strerror(-rc));
		return 1;
	}
	printf("echo_server: stopped\n");
	return 0;
}
