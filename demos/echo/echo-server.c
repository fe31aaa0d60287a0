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
 *   echo-server [--host ADDR] [--port P] [--cores N] [--fixed-files]
 *               [--sqpoll] [--busy-poll US] [--no-register-ring]
 *               [--plain-recv] [--stream-buffers N]
 *               [--stream-buffer-size BYTES] [--quiet] [--help]
 *
 * The soft fd limit is raised to the hard one at start, for 10,000 and
 * more connections.
 */
#include <runtime.h>

#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
		fprintf(stderr, "echo-server: spawn: %s\n", strerror(-rc));
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
	while ((fd = runtime_listener_accept(l)) != -ECANCELED) {
		if (fd >= 0) {
			start_connection(s, fd);
			continue;
		}
		/* Out of fds or memory: back off, keep serving the rest. */
		fprintf(stderr, "echo-server: accept: %s\n", strerror(-fd));
		if (runtime_sleep(10 * 1000 * 1000) == -ECANCELED)
			break;
	}
	runtime_listener_close(l);
}

static void usage(FILE *to, const char *argv0)
{
	fprintf(to,
	        "usage: %s [--host ADDR] [--port P] [--cores N] [--fixed-files] [--sqpoll]\n"
	        "       [--busy-poll US] [--no-register-ring] [--plain-recv]\n"
	        "       [--stream-buffers N] [--stream-buffer-size BYTES] [--quiet] [--help]\n"
	        "A TCP echo server, one fiber per connection. Defaults: host 0.0.0.0,\n"
	        "port 7000, 1 core (0: one per CPU). SIGINT/SIGTERM stop it cleanly.\n",
	        argv0);
}

/* Room for many connections: the soft fd limit up to the hard one. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'h' },
		{ "port", required_argument, NULL, 'p' },
		{ "cores", required_argument, NULL, 'c' },
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
	struct runtime_config cfg;
	const char *host = "0.0.0.0";
	long port = 7000;
	int c;

	runtime_config_init(&cfg);
	while ((c = getopt_long(argc, argv, "h:p:c:fsb:rPB:S:qH", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'h': host = optarg; break;
		case 'p':
			port = strtol(optarg, &end, 10);
			if (*end || port < 0 || port > 65535) {
				fprintf(stderr, "echo-server: bad port '%s'\n", optarg);
				return 2;
			}
			break;
		case 'c':
			cfg.cores = (unsigned)strtoul(optarg, &end, 10);
			if (*end) {
				fprintf(stderr, "echo-server: bad core count '%s'\n", optarg);
				return 2;
			}
			break;
		case 'f': cfg.fixed_files = 1; break;
		case 's': cfg.sqpoll = 1; break;
		case 'b': cfg.busy_poll_us = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'r': cfg.register_ring_fd = 0; break;
		case 'P': srv.plain_recv = 1; break;
		case 'B': cfg.stream_buffers = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'S': cfg.stream_buffer_size = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'q': srv.quiet = 1; break;
		case 'H': usage(stdout, argv[0]); return 0;
		default: usage(stderr, argv[0]); return 2;
		}
	}
	raise_fd_limit();

	srv.listen_fd = runtime_tcp_listen(host, (uint16_t)port, 4096, 0);
	if (srv.listen_fd < 0) {
		fprintf(stderr, "echo-server: listen on %s:%ld: %s\n", host, port,
		        strerror(-srv.listen_fd));
		return 1;
	}
	struct runtime *rt;
	int rc = runtime_create(&rt, &cfg);
	if (rc < 0) {
		fprintf(stderr, "echo-server: runtime: %s\n", strerror(-rc));
		return 1;
	}
	rc = runtime_shutdown_on_signals(rt);
	for (unsigned i = 0; rc == 0 && i < runtime_cores(rt); i++)
		rc = runtime_spawn_on(rt, i, acceptor, &srv);
	if (rc < 0) {
		fprintf(stderr, "echo-server: start: %s\n", strerror(-rc));
		return 1;
	}
	if (!srv.quiet)
		fprintf(stderr, "echo-server: listening on %s:%ld, %u cores\n", host, port,
		        runtime_cores(rt));
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
