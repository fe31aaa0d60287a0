/* SPDX-License-Identifier: MIT */
/*
 * preload_blocking.c - unmodified blocking code on fibers. The client and
 * the echo handler below are ordinary POSIX code: socket, connect, write,
 * poll, read, usleep, accept, close - no runtime call, no non-blocking fds,
 * no callbacks. Linked with libruntime-preload before libc, those libc
 * names park the calling fiber instead of blocking the thread, so 50 such
 * clients and their 50 server-side handlers all progress at once on ONE
 * core thread. Without the library each of these calls would hold the one
 * core thread itself (or fail with EINTR when the ring's own work
 * interrupts it): one client at a time at best, and no server to answer.
 *
 * Shows: libruntime-preload (runtime_preload.h), runtime_config.stall_ms
 * (which names a libc call that did block a core thread).
 *
 *   ./preload_blocking
 *   cc preload_blocking.c $(pkg-config --cflags --libs runtime-preload)
 *
 * (To use LD_PRELOAD=libruntime-preload.so instead, drop the
 * runtime_preload_linked() call and link only -lruntime.)
 * Prints the peak number of clients in progress at once and
 * "50 clients done, 150 echoes verified"; exits 0 if all were.
 */
#include <runtime.h>
#include <runtime_preload.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define CLIENTS 50
#define ROUNDS 3

/* ---------- ordinary blocking code: nothing below knows about fibers ---------- */

/* Send a line, wait (at most 10 s) for the echo, check it, pause 20 ms. */
static int blocking_client(uint16_t port, int id)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port),
	                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		goto fail;
	for (int round = 0; round < ROUNDS; round++) {
		char msg[64], reply[64];
		int len = snprintf(msg, sizeof(msg), "client %d, round %d\n", id, round), got = 0;
		if (write(fd, msg, (size_t)len) != len)
			goto fail;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 10 * 1000) != 1)
			goto fail;
		while (got < len) {
			ssize_t n = read(fd, reply + got, (size_t)(len - got));
			if (n <= 0)
				goto fail;
			got += (int)n;
		}
		if (memcmp(msg, reply, (size_t)len) != 0)
			goto fail;
		usleep(20 * 1000);
	}
	close(fd);
	return ROUNDS;
fail:
	perror("client");
	if (fd >= 0)
		close(fd);
	return 0;
}

/* Echo until the client closes. */
static void blocking_echo(int fd)
{
	char buf[256];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)n) != n)
			break;
	close(fd);
}

/* ---------- the fiber glue: the only runtime calls ---------- */

static int listen_fd;
static uint16_t port;
static int in_progress, peak, echoes, done; /* one core: no data races */

static void handler_fiber(void *arg)
{
	blocking_echo((int)(intptr_t)arg);
}

static void server_fiber(void *arg)
{
	(void)arg;
	for (int i = 0; i < CLIENTS; i++) {
		int fd = accept(listen_fd, NULL, NULL); /* parks this fiber */
		if (fd < 0) {
			perror("accept");
			break;
		}
		if (runtime_spawn(runtime_current(), handler_fiber, (void *)(intptr_t)fd) < 0)
			close(fd);
	}
	close(listen_fd);
}

static void client_fiber(void *arg)
{
	/* If connect/write/poll blocked the thread, no second client could
	 * start before this one returned, and the peak would stay 1. */
	if (++in_progress > peak)
		peak = in_progress;
	int n = blocking_client(port, (int)(intptr_t)arg);
	in_progress--;
	echoes += n;
	done += n == ROUNDS;
}

int main(void)
{
	/* Referencing the library keeps a linker with --as-needed from dropping
	 * it (nothing else names it: it only replaces libc's functions). */
	if (!runtime_preload_linked())
		return 1;

	/* Outside a fiber the wrapped calls are libc's own: plain setup. */
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(listen_fd, CLIENTS) < 0 || getsockname(listen_fd, (struct sockaddr *)&sin, &len) < 0) {
		perror("listen");
		return 1;
	}
	port = ntohs(sin.sin_port);
	/* Ordinary blocking code bounds its waits the ordinary way: an accept
	 * that sees no client for 30 s fails with EAGAIN (honoured in fibers). */
	struct timeval tv = { .tv_sec = 30 };
	setsockopt(listen_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

	/* One core, on purpose. stall_ms: should a libc call block the core
	 * thread after all (the library missing, or a call it does not
	 * wrap), a watcher reports it on stderr after 2 s, naming the call. */
	struct runtime_config cfg;
	runtime_config_init(&cfg);
	cfg.stall_ms = 2000;
	struct runtime *rt;
	int rc = runtime_create(&rt, &cfg);
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %s\n", strerror(-rc));
		close(listen_fd);
		return 1;
	}
	rc = runtime_spawn(rt, server_fiber, NULL);
	for (int i = 0; rc == 0 && i < CLIENTS; i++)
		rc = runtime_spawn(rt, client_fiber, (void *)(intptr_t)i);
	if (rc == 0)
		rc = runtime_run(rt);
	if (rc < 0)
		fprintf(stderr, "runtime: %s\n", strerror(-rc));
	runtime_destroy(rt);

	printf("peak: %d of %d clients in progress at once, on 1 core\n", peak, CLIENTS);
	printf("%d clients done, %d echoes verified\n", done, echoes);
	return rc == 0 && done == CLIENTS ? 0 : 1;
}
