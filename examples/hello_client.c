/* SPDX-License-Identifier: MIT */
/*
 * hello_client.c - the smallest useful client: connect, send one line,
 * print the answer, all in one fiber that can never hang, thanks to a
 * per-fiber deadline.
 *
 * Shows: runtime_create / runtime_spawn / runtime_run / runtime_destroy,
 * runtime_tcp_connect, runtime_send_all, runtime_read, runtime_deadline_set.
 *
 * Run it against the echo demo (demos/echo/echo-server, port 7000) or
 * against examples/tcp_server:
 *
 *   ./hello_client                         # 127.0.0.1:7000, "hello, runtime"
 *   ./hello_client 127.0.0.1:7001 "some text"
 *   ./hello_client '[::1]:7000'            # IPv6 in brackets (a server on ::,
 *                                          # e.g. echo-server --host ::)
 *
 * Prints "reply: <line>" and exits 0, or prints why not and exits 1.
 */
#include <runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_NS (5ull * 1000 * 1000 * 1000) /* 5 s for the whole exchange */

struct request {
	char host[256];
	uint16_t port;
	const char *message;
	int ok; /* set by the fiber, read by main() after runtime_run() */
};

/* The fiber: ordinary sequential code. Each runtime_* call below is one
 * io_uring operation; while it is in flight the fiber is parked and the
 * core thread is free to run other fibers (there are none here). */
static void client(void *arg)
{
	struct request *req = arg;
	char reply[512];
	size_t got = 0;

	/* Every blocking call of this fiber from now on fails with -ETIMEDOUT
	 * once this absolute time (runtime_now() is CLOCK_MONOTONIC) has
	 * passed: a silent server cannot make us wait forever. */
	runtime_deadline_set(runtime_now() + TIMEOUT_NS);

	/* A numeric address connects at once; a name ("localhost") is resolved
	 * on the offload pool first, so even DNS does not block the core. */
	int fd = runtime_tcp_connect(req->host, req->port);
	if (fd < 0) {
		/* -ECONNREFUSED: nobody listens there; -ETIMEDOUT: the deadline. */
		fprintf(stderr, "connect to %s:%u: %s\n", req->host, req->port, strerror(-fd));
		return;
	}

	/* runtime_send_all loops over short writes; it returns the length, or
	 * -errno (-EPIPE if the peer is gone: never a SIGPIPE). */
	char line[300];
	int len = snprintf(line, sizeof(line), "%s\n", req->message);
	ssize_t rc = runtime_send_all(fd, line, (size_t)len, NULL);
	if (rc < 0) {
		fprintf(stderr, "send: %s\n", strerror((int)-rc));
		goto out;
	}

	/* Read until the reply's newline: TCP is a byte stream, so one read
	 * may return part of a line. 0 means the server closed first. */
	while (got < sizeof(reply) - 1 && !memchr(reply, '\n', got)) {
		rc = runtime_read(fd, reply + got, sizeof(reply) - 1 - got);
		if (rc <= 0) {
			fprintf(stderr, "read: %s\n",
			        rc == 0 ? "connection closed by the server" : strerror((int)-rc));
			goto out;
		}
		got += (size_t)rc;
	}
	reply[got] = '\0';
	reply[strcspn(reply, "\n")] = '\0';
	printf("reply: %s\n", reply);
	req->ok = 1;
out:
	/* runtime_close always closes, even after a timeout or a cancel. */
	runtime_close(fd);
}

int main(int argc, char **argv)
{
	struct request req = { .host = "127.0.0.1", .port = 7000, .message = "hello, runtime" };

	if (argc > 1) { /* HOST:PORT, or [V6ADDR]:PORT */
		const char *colon = strrchr(argv[1], ':');
		char *end;
		long port = colon ? strtol(colon + 1, &end, 10) : -1;
		size_t hlen = colon ? (size_t)(colon - argv[1]) : 0;
		const char *h = argv[1];
		if (hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']')
			h++, hlen -= 2;
		if (port <= 0 || port > 65535 || *end || hlen == 0 || hlen >= sizeof(req.host)) {
			fprintf(stderr, "usage: %s [HOST:PORT] [MESSAGE]\n", argv[0]);
			return 2;
		}
		memcpy(req.host, h, hlen);
		req.host[hlen] = '\0';
		req.port = (uint16_t)port;
	}
	if (argc > 2)
		req.message = argv[2];

	/* One core (the default): this thread becomes its core thread inside
	 * runtime_run(). -ENOSYS / -EOPNOTSUPP: the kernel lacks io_uring. */
	struct runtime *rt;
	int rc = runtime_create(&rt, NULL);
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %s\n", strerror(-rc));
		return 1;
	}
	/* The fiber runs later, inside runtime_run(), never inside spawn. */
	rc = runtime_spawn(rt, client, &req);
	if (rc == 0)
		rc = runtime_run(rt); /* returns once every fiber has ended */
	if (rc < 0)
		fprintf(stderr, "runtime: %s\n", strerror(-rc));
	runtime_destroy(rt);
	return rc == 0 && req.ok ? 0 : 1;
}
