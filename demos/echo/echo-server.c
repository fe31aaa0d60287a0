/* SPDX-License-Identifier: MIT */
/*
 * echo-server - the runtime's demo: a TCP echo server written as plain
 * sequential code, served on every core by runtime_serve (a SO_REUSEPORT
 * socket, a listener and an acceptor per core: the kernel spreads the
 * connections), one fiber per connection. Reads go through the
 * connection's receive stream (one multishot recv per connection;
 * --plain-recv: one recv per read); each send is one operation. On
 * io_uring underneath, or epoll where io_uring is refused (--engine).
 * SIGINT/SIGTERM shut the runtime down (runtime_shutdown_on_signals):
 * every connection fiber sees -ECANCELED and ends, its connection is
 * closed, and the process exits cleanly. With --tls-cert and --tls-key it
 * echoes over TLS (runtime_serve does each handshake).
 *
 *   echo-server [--host ADDR] [--port P] [--cores N] [--engine E]
 *               [--fixed-files] [--sqpoll] [--busy-poll US] [--no-register-ring]
 *               [--plain-recv] [--stream-buffers N]
 *               [--stream-buffer-size BYTES] [--tls-cert FILE --tls-key FILE]
 *               [--quiet] [--help]
 *
 * The soft fd limit is raised to the hard one at start, for 10,000 and
 * more connections.
 */
#include <runtime.h>
#include <runtime_tls.h>

#include "../cli.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF_SIZE (64 * 1024)
#define MS (1000ull * 1000ull)

struct server {
	int quiet;
	int plain_recv;
	const char *tls_cert, *tls_key;
	unsigned release_ms;        /* --release-after; UINT_MAX: never */
};

static struct server srv = { .release_ms = 10 };

/* The next bytes (> 0), the end (0, or -errno); or 0 too once the
 * connection has been quiet for --release-after: it waits with no fiber
 * from then on (runtime_conn_idle), and runtime_serve calls echo again
 * when bytes come. */
static ssize_t next_bytes(struct runtime_conn *conn, char *buf)
{
	for (;;) {
		int rc;
		if (srv.release_ms == 0 && (rc = runtime_conn_idle(conn, NULL, NULL)) <= 0)
			return rc; /* at once; 1: bytes are here */
		ssize_t n = runtime_conn_read(conn, buf, BUF_SIZE);
		if (n != -EAGAIN || (rc = runtime_conn_idle(conn, NULL, NULL)) < 0)
			return n;
		if (rc == 0)
			return 0;
	}
}

/* Echo until EOF, an error, a cancel or a quiet spell; runtime_serve
 * closes the connection after, unless it waits idle. The connection is
 * marked idle once, for good: echo has no requests, every read of it is
 * between messages, and only reads look at the mark (a drain closes the
 * connection at a read that would wait; runtime_serve's release_after
 * sweep makes a read that stays quiet that long -EAGAIN), so marking it
 * busy for each write and idle again would change nothing. */
static void echo(struct runtime_conn *conn, void *arg)
{
	char buf[BUF_SIZE];
	ssize_t n;

	(void)arg;
	runtime_conn_set_idle(conn, 1);
	while ((n = next_bytes(conn, buf)) > 0)
		if (runtime_conn_write(conn, buf, (size_t)n, NULL) < 0)
			break;
}

static void usage(FILE *to)
{
	fputs("usage: echo-server [--host ADDR] [--port P] [--cores N] [--engine E]\n"
	      "       [--fixed-files] [--sqpoll] [--busy-poll US] [--no-register-ring]\n"
	      "       [--plain-recv] [--release-after MS|never] [--stream-buffers N]\n"
	      "       [--stream-buffer-size BYTES]\n"
	      "       [--tls-cert FILE --tls-key FILE] [--quiet] [--help]\n"
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
	      "  --release-after MS a connection quiet this long gives its fiber stack back\n"
	      "                     and waits with none (default 10; 0: at once; with\n"
	      "                     --release-after never, never)\n"
	      "  --stream-buffers N, --stream-buffer-size BYTES\n"
	      "                     the provided-buffer ring of each core's receive streams\n"
	      "                     (default 1024 x 4096)\n"
	      "  --tls-cert FILE, --tls-key FILE\n"
	      "                     echo over TLS: the certificate chain and key (PEM)\n"
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
		{ "release-after", required_argument, NULL, 'R' },
		{ "stream-buffers", required_argument, NULL, 'B' },
		{ "stream-buffer-size", required_argument, NULL, 'S' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-key", required_argument, NULL, 'K' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t n = 0;
	int c, i = 0;

	/* Long options only: i then always names the option found. */
	while ((c = getopt_long(argc, argv, "", opts, &i)) != -1) {
		if (c == 'R' && !strcmp(optarg, "never")) {
			srv.release_ms = UINT_MAX;
			continue;
		}
		if (c != '?' && c != 'h' && c != 'e' && c != 'C' && c != 'K' && opts[i].has_arg &&
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
		case 'R': srv.release_ms = (unsigned)(n < UINT_MAX ? n : UINT_MAX - 1); break;
		case 'B': cfg->stream_buffers = (unsigned)n; break;
		case 'S': cfg->stream_buffer_size = (unsigned)n; break;
		case 'C': srv.tls_cert = optarg; break;
		case 'K': srv.tls_key = optarg; break;
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
	struct runtime_serve_config sc;
	struct runtime_server *server;
	struct runtime_tls *tls;
	struct runtime *rt;
	const char *host = "0.0.0.0";
	long port = 7000;

	runtime_config_init(&cfg);
	if (parse_options(argc, argv, &cfg, &host, &port) < 0)
		return 2;
	if (port < 0) { /* --help */
		usage(stdout);
		return 0;
	}
	if (!demo_tls("echo-server", srv.tls_cert, srv.tls_key, NULL, &tls))
		return 1;
	demo_raise_fd_limit();
	int rc = runtime_create(&rt, &cfg);
	if (rc < 0) {
		demo_create_failed("echo-server", rc, &cfg);
		return 1;
	}
	runtime_serve_config_init(&sc);
	sc.host = host;
	sc.port = (uint16_t)port;
	sc.backlog = 4096;
	sc.plain_recv = srv.plain_recv;
	struct runtime_tls_serve ts = { .tls = tls }; /* outlives the server: main's */
	if (tls)
		runtime_tls_serve(&sc, &ts);
	sc.handler = echo;
	if (srv.release_ms && srv.release_ms != UINT_MAX)
		sc.release_after_ns = srv.release_ms * MS;
	if ((rc = runtime_shutdown_on_signals(rt)) < 0 || (rc = runtime_serve(rt, &sc, &server)) < 0) {
		fprintf(stderr, "echo-server: listen on %s:%ld: %s%s\n", host, port, strerror(-rc),
		        demo_listen_hint(rc));
		return 1;
	}
	if (!srv.quiet) {
		char engine[600];
		demo_engine_line(engine, sizeof(engine), rt);
		fprintf(stderr, "echo-server: listening on %s:%u%s, %u core%s, %s\n", host,
		        runtime_server_port(server), tls ? " (TLS)" : "", runtime_cores(rt),
		        runtime_cores(rt) == 1 ? "" : "s", engine);
	}
	rc = runtime_run(rt);
	struct runtime_server_stats st;
	runtime_server_stats(server, &st);
	runtime_server_destroy(server);
	runtime_destroy(rt);
	runtime_tls_destroy(tls);
	if (!srv.quiet)
		fprintf(stderr, "echo-server: stopped after %llu connections\n",
		        (unsigned long long)st.accepted);
	if (rc < 0) {
		fprintf(stderr, "echo-server: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
