/* SPDX-License-Identifier: MIT */
/*
 * tcp_server.c - a TCP server with one fiber per connection: it sends back
 * everything it receives in upper case. An idle connection is closed after
 * a per-fiber deadline; SIGINT or SIGTERM (Ctrl-C) stops the whole server
 * cleanly: every fiber sees -ECANCELED, closes its socket and ends.
 *
 * Shows: runtime_tcp_listen, runtime_accept, runtime_spawn from a fiber,
 * runtime_recv / runtime_send_all, runtime_deadline_set as an idle timeout,
 * runtime_shutdown_on_signals.
 *
 *   ./tcp_server [PORT [IDLE_SECONDS]]     # default port 7001, idle 10 s
 *   ./tcp_server 0                         # any free port: see its output
 *   ./hello_client 127.0.0.1:7001          # in another terminal
 *
 * It listens on 127.0.0.1 only and prints "listening on 127.0.0.1:PORT".
 */
#include <runtime.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t idle_ns = 10ull * 1000 * 1000 * 1000;

/* One connection, as plain sequential code. */
static void connection(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	ssize_t n;

	for (;;) {
		/* The idle timeout: this read (and anything else the fiber
		 * blocks in) gives up with -ETIMEDOUT at this absolute time.
		 * Moving the deadline forward before each read makes it "idle
		 * for longer than idle_ns", not "connected for longer". */
		runtime_deadline_set(runtime_now() + idle_ns);
		n = runtime_recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			break; /* 0: the client closed its side */
		for (ssize_t i = 0; i < n; i++)
			buf[i] = (char)toupper((unsigned char)buf[i]);
		n = runtime_send_all(fd, buf, (size_t)n, NULL);
		if (n < 0)
			break; /* -EPIPE, -ECONNRESET: the client went away */
	}
	if (n == -ETIMEDOUT) {
		/* Past the deadline every blocking call fails at once, so to say
		 * goodbye we first give the fiber a new, short deadline. */
		static const char bye[] = "idle for too long, bye\n";
		runtime_deadline_set(runtime_now() + 1000 * 1000 * 1000);
		runtime_send_all(fd, bye, sizeof(bye) - 1, NULL);
		printf("connection fd %d: idle timeout\n", fd);
	} else if (n == -ECANCELED) {
		/* Shutdown: cancellation is sticky, every later call but
		 * runtime_close returns -ECANCELED, so we just clean up. */
		printf("connection fd %d: closed by shutdown\n", fd);
	} else if (n < 0) {
		printf("connection fd %d: %s\n", fd, strerror((int)-n));
	} else {
		printf("connection fd %d: closed by the client\n", fd);
	}
	runtime_close(fd); /* never cancelled: the fd is always closed */
}

/* Accept connections until the runtime shuts down. */
static void acceptor(void *arg)
{
	int listen_fd = (int)(intptr_t)arg;

	for (;;) {
		int fd = runtime_accept(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd == -ECANCELED)
			break; /* runtime_shutdown(): SIGINT or SIGTERM */
		if (fd < 0) {
			/* -EMFILE and the like: back off a little, keep going. */
			fprintf(stderr, "accept: %s\n", strerror(-fd));
			if (runtime_sleep(100 * 1000 * 1000) == -ECANCELED)
				break;
			continue;
		}
		/* From a fiber, the new fiber goes on this fiber's core. It
		 * fails with -ESHUTDOWN once shutdown has begun. */
		int rc = runtime_spawn(runtime_current(), connection, (void *)(intptr_t)fd);
		if (rc < 0) {
			fprintf(stderr, "spawn: %s\n", strerror(-rc));
			runtime_close(fd);
		}
	}
}

int main(int argc, char **argv)
{
	char *end = "";
	long port = argc > 1 ? strtol(argv[1], &end, 10) : 7001;
	if (argc > 2)
		idle_ns = strtoull(argv[2], NULL, 10) * 1000 * 1000 * 1000;
	if (*end || port < 0 || port > 65535 || idle_ns == 0) {
		fprintf(stderr, "usage: %s [PORT [IDLE_SECONDS]]\n", argv[0]);
		return 2;
	}
	/* Any thread, no fiber needed: socket + bind + listen, numeric
	 * addresses only (so it never blocks on DNS). */
	int listen_fd = runtime_tcp_listen("127.0.0.1", (uint16_t)port, 0, 0);
	if (listen_fd < 0) {
		fprintf(stderr, "listen on port %ld: %s\n", port, strerror(-listen_fd));
		return 1;
	}
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	getsockname(listen_fd, (struct sockaddr *)&sin, &len); /* the port, if 0 was asked */
	printf("listening on 127.0.0.1:%u\n", ntohs(sin.sin_port));
	fflush(stdout); /* stdout may be a pipe: let the reader see it now */

	struct runtime *rt;
	int rc = runtime_create(&rt, NULL);
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %s\n", strerror(-rc));
		runtime_close(listen_fd);
		return 1;
	}
	/* SIGINT and SIGTERM now call runtime_shutdown() instead of killing
	 * the process: spawns fail, and every fiber is cancelled so that its
	 * blocking call returns -ECANCELED. Before runtime_run(), from this
	 * thread. */
	rc = runtime_shutdown_on_signals(rt);
	if (rc == 0)
		rc = runtime_spawn(rt, acceptor, (void *)(intptr_t)listen_fd);
	if (rc == 0)
		rc = runtime_run(rt); /* until shutdown and every fiber has ended */
	if (rc < 0)
		fprintf(stderr, "runtime: %s\n", strerror(-rc));
	runtime_destroy(rt); /* also unblocks SIGINT and SIGTERM */
	runtime_close(listen_fd);
	if (rc == 0)
		printf("server stopped cleanly\n");
	return rc < 0;
}
