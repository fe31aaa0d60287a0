/* SPDX-License-Identifier: MIT */
/*
 * echo-server - the runtime's demo: a TCP echo server written as plain
 * sequential code, one fiber per connection, on io_uring underneath: each
 * core accepts through a listener (one multishot accept) on the shared
 * listening socket, so connections spread over the cores; reads go through
 * a receive stream (one multishot recv per connection; --plain-recv: one
 * recv SQE per read); each send is an SQE. SIGINT/SIGTERM
 * shut the runtime down (runtime_shutdown_on_signals): every connection
 * fiber sees -ECANCELED, closes its socket and ends, and the process exits
 * cleanly.
 *
 *   echo-server [--host ADDR] [--port P] [--cores N] [--engine E]
 *               [--fixed-files] [--sqpoll] [--busy-poll US] [--no-register-ring]
 *               [--plain-recv] [--stream-buffers N]
 *               [--stream-buffer-size BYTES] [--quiet] [--help]
 *
 * The soft fd limit is raised to the hard one at start, for 10,000 and
 * more connections.
 */
#include <runtime.h>

#include "../cli.h"

#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF_SIZE (64 * 1024)

struct server {
	int listen_fd;
	int quiet;
	int plain_recv;
	_Atomic unsigned long connections;
};

/* Echo until EOF or an error, reading through a receive stream (one
 * multishot recv for the whole connection), or with one recv per read. */
static void echo(int fd, char *buf, size_t size, int plain_recv)
{
	struct runtime_stream *rx = NULL;

	if (!plain_recv && runtime_stream_open(&rx, fd) < 0)
		rx = NULL;
	for (;;) {
		ssize_t n = rx ? runtime_stream_recv(rx, buf, size) : runtime_recv(fd, buf, size, 0);
		if (n <= 0)
			break;
		if (runtime_send_all(fd, buf, (size_t)n, NULL) < 0)
			break;
	}
	runtime_stream_close(rx);
}

static struct server srv = { .listen_fd = -1 };

/* Errors that come in bursts - accept at the fd limit, spawn out of
 * memory - print at most once a second, with a count of the ones held
 * back: the log must not become the load. */
static void report_error(const char *what, int rc)
{
	static _Atomic uint64_t next_ns;
	static _Atomic unsigned long held_back;
	uint64_t now = runtime_now(), next = atomic_load(&next_ns);

	if (now < next || !atomic_compare_exchange_strong(&next_ns, &next, now + 1000000000u)) {
		atomic_fetch_add(&held_back, 1);
		return;
	}
	unsigned long n = atomic_exchange(&held_back, 0);
	if (n)
		fprintf(stderr, "echo-server: %s: %s (and %lu more errors since the last report)\n",
		        what, strerror(-rc), n);
	else
		fprintf(stderr, "echo-server: %s: %s\n", what, strerror(-rc));
}

static void connection(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[BUF_SIZE];
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	echo(fd, buf, sizeof(buf), srv.plain_recv);
	runtime_close(fd);
}

static void start_connection(struct server *s, int fd)
{
	atomic_fetch_add_explicit(&s->connections, 1, memory_order_relaxed);
	int rc = runtime_spawn(runtime_current(), connection, (void *)(intptr_t)fd);
	if (rc < 0) {
		report_error("spawn", rc);
		runtime_close(fd);
	}
}

/* Accepts through a listener (one multishot accept), so a burst of
 * connections is taken in one loop turn, not one per turn. */
static void acceptor(void *arg)
{
	struct server *s = arg;
	struct runtime_listener *l;
	int fd = runtime_listener_open(&l, s->listen_fd, SOCK_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "echo-server: listener: %s\n", strerror(-fd));
		return;
	}
	while ((fd = runtime_listener_accept(l, NULL, NULL)) != -ECANCELED) {
		if (fd >= 0) {
			start_connection(s, fd);
			continue;
		}
		/* Out of fds or memory: back off, keep serving the rest. */
		report_error("accept", fd);
		if (runtime_sleep(10 * 1000 * 1000) == -ECANCELED)
			break;
	}
	runtime_listener_close(l);
}

static void usage(FILE *to)
{
	fputs("usage: echo-server [--host ADDR] [--port P] [--cores N] [--engine E]\n"
	      "       [--fixed-files] [--sqpoll] [--busy-poll US] [--no-register-ring]\n"
	      "       [--plain-recv] [--stream-buffers N] [--stream-buffer-size BYTES]\n"
	      "       [--quiet] [--help]\n"
	      "A TCP echo server, one fiber per connection; SIGINT/SIGTERM stop it cleanly.\n"
	      "  --host ADDR        address to listen on (default 0.0.0.0)\n"
	      "  --port P           TCP port (default 7000)\n"
	      "  --cores N          core threads, one ring each (default 1; 0: one per CPU)\n"
	      "  --engine E         auto (default: io_uring if the kernel allows it, else\n"
	      "                     epoll), io_uring or epoll\n"
	      "  --fixed-files      register each connection in its core's ring\n"
	      "  --sqpoll           a kernel thread polls each ring's submissions\n"
	      "  --busy-poll US     poll each ring for completions for up to US microseconds\n"
	      "  --no-register-ring do not register the ring fds (io_uring_register_ring_fd)\n"
	      "  --plain-recv       one recv SQE per read instead of a multishot receive stream\n"
	      "  --stream-buffers N, --stream-buffer-size BYTES\n"
	      "                     the provided-buffer ring of each core's receive streams\n"
	      "                     (default 1024 x 4096)\n"
	      "  --quiet            no start banner\n",
	      to);
}

/* A decimal number from 0 to max, or a message naming the flag. */
static int parse_number(const char *flag, const char *arg, uint64_t max, uint64_t *out)
{
	if (!demo_number(arg, max, out)) {
		fprintf(stderr, "echo-server: --%s: '%s' is not a number from 0 to %llu\n", flag, arg,
		        (unsigned long long)max);
		return -1;
	}
	return 0;
}

/* argv into cfg, *host and *port (-1: --help asked); -1 on a bad one. */
static int parse_options(int argc, char **argv, struct runtime_config *cfg, const char **host,
                         long *port)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'h' },
		{ "port", required_argument, NULL, 'p' },
		{ "cores", required_argument, NULL, 'c' },
		{ "engine", required_argument, NULL, 'e' },
		{ "fixed-files", no_argument, NULL, 'f' },
		{ "sqpoll", no_argument, NULL, 's' },
		{ "busy-poll", required_argument, NULL, 'b' },
		{ "no-register-ring", no_argument, NULL, 'r' },
		{ "plain-recv", no_argument, NULL, 'P' },
		{ "stream-buffers", required_argument, NULL, 'B' },
		{ "stream-buffer-size", required_argument, NULL, 'S' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t n = 0;
	int c, i = 0;

	/* Long options only: i then always names the option found. */
	while ((c = getopt_long(argc, argv, "", opts, &i)) != -1) {
		if (c != '?' && c != 'h' && c != 'e' && opts[i].has_arg &&
		    parse_number(opts[i].name, optarg, c == 'p' ? 65535 : UINT_MAX, &n) < 0)
			return -1;
		switch (c) {
		case 'h': *host = optarg; break;
		case 'p': *port = (long)n; break;
		case 'c': cfg->cores = (unsigned)n; break;
		case 'e':
			if (!demo_engine(optarg, &cfg->engine)) {
				fprintf(stderr, "echo-server: --engine: '%s' is not auto, io_uring "
				        "or epoll\n", optarg);
				return -1;
			}
			break;
		case 'f': cfg->fixed_files = 1; break;
		case 's': cfg->sqpoll = 1; break;
		case 'b': cfg->busy_poll_us = (unsigned)n; break;
		case 'r': cfg->register_ring_fd = 0; break;
		case 'P': srv.plain_recv = 1; break;
		case 'B': cfg->stream_buffers = (unsigned)n; break;
		case 'S': cfg->stream_buffer_size = (unsigned)n; break;
		case 'q': srv.quiet = 1; break;
		case 'H': *port = -1; return 0;
		default: fputs("echo-server: --help lists the options\n", stderr); return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "echo-server: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct runtime_config cfg;
	const char *host = "0.0.0.0";
	long port = 7000;

	runtime_config_init(&cfg);
	if (parse_options(argc, argv, &cfg, &host, &port) < 0)
		return 2;
	if (port < 0) { /* --help */
		usage(stdout);
		return 0;
	}
	demo_raise_fd_limit();

	srv.listen_fd = runtime_tcp_listen(host, (uint16_t)port, 4096, 0);
	if (srv.listen_fd < 0) {
		fprintf(stderr, "echo-server: listen on %s:%ld: %s\n", host, port,
		        strerror(-srv.listen_fd));
		return 1;
	}
	struct runtime *rt;
	int rc = runtime_create(&rt, &cfg);
	if (rc < 0) {
		demo_create_failed("echo-server", rc, &cfg);
		return 1;
	}
	rc = runtime_shutdown_on_signals(rt);
	for (unsigned i = 0; rc == 0 && i < runtime_cores(rt); i++)
		rc = runtime_spawn_on(rt, i, acceptor, &srv);
	if (rc < 0) {
		fprintf(stderr, "echo-server: start: %s\n", strerror(-rc));
		return 1;
	}
	if (!srv.quiet) {
		char engine[600];
		demo_engine_line(engine, sizeof(engine), rt);
		fprintf(stderr, "echo-server: listening on %s:%ld, %u core%s, %s\n", host, port,
		        runtime_cores(rt), runtime_cores(rt) == 1 ? "" : "s", engine);
	}
	rc = runtime_run(rt);
	runtime_destroy(rt);
	close(srv.listen_fd);
	if (!srv.quiet)
		fprintf(stderr, "echo-server: stopped after %lu connections\n",
		        atomic_load(&srv.connections));
	if (rc < 0) {
		fprintf(stderr, "echo-server: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
