/* SPDX-License-Identifier: MIT */
/*
 * http-server - the runtime's HTTP/1.1 demo: one fiber per connection, one
 * listener and one acceptor fiber per core (SO_REUSEPORT spreads the
 * connections), a strict parser (http_parser.c), and a graceful stop: on
 * SIGINT or SIGTERM it stops accepting, lets the requests in flight finish
 * (up to a grace period), and exits 0. A second signal stops at once.
 */
#define _GNU_SOURCE
#include "server.h"
#include "../cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define MS 1000000ull

static struct server srv;
static int signal_fd = -1;

/* --------------------------------------------------------------- accept */

static void connection(void *arg)
{
	conn_serve(&srv, (int)(intptr_t)arg);
}

static void start_connection(int fd)
{
	if (atomic_load(&srv.open) >= srv.opt.max_conns) {
		runtime_close(fd); /* over --max-conns: refused at once, and counted */
		atomic_fetch_add(&srv.refused, 1);
		return;
	}
	atomic_fetch_add(&srv.open, 1);
	atomic_fetch_add(&srv.accepted, 1);
	if (runtime_spawn(runtime_current(), connection, (void *)(intptr_t)fd) < 0) {
		atomic_fetch_sub(&srv.open, 1);
		runtime_close(fd);
	}
}

/* The next connection: from the listener, or with --plain-accept (to
 * measure what the listener saves) one accept SQE each. */
static int next_connection(struct runtime_listener *l, int lfd)
{
	return l ? runtime_listener_accept(l, NULL, NULL) : runtime_accept(lfd, NULL, NULL, SOCK_CLOEXEC);
}

/* The core's acceptor, through a listener (one multishot accept: a burst
 * of connections is taken in one loop turn). Ends when the listening
 * socket is shut down (a drain) or the fiber is cancelled. */
static void acceptor(void *arg)
{
	int lfd = srv.listeners[(intptr_t)arg];
	struct runtime_listener *l = NULL;
	int fd = srv.opt.plain_accept ? 0 : runtime_listener_open(&l, lfd, SOCK_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "http-server: listener: %s\n", strerror(-fd));
		return;
	}
	for (;;) {
		fd = next_connection(l, lfd);
		if (fd == -ECANCELED || fd == -EINVAL || atomic_load(&srv.draining)) {
			if (fd >= 0)
				runtime_close(fd);
			break;
		}
		if (fd >= 0) {
			start_connection(fd);
			continue;
		}
		if (runtime_sleep(10 * MS) == -ECANCELED) /* out of fds: back off */
			break;
	}
	runtime_listener_close(l);
}

/* ------------------------------------------------------------------ stop */

static void drain_core(void *arg)
{
	(void)arg;
	conn_drain_core(&srv);
}

/* Stop accepting, close idle connections, let busy ones finish within the
 * grace period (or until a second signal), then shut the runtime down. */
static void drain(void)
{
	struct signalfd_siginfo si;
	uint64_t until = runtime_now() + srv.opt.grace_ms * MS;

	atomic_store(&srv.draining, true);
	for (unsigned i = 0; i < runtime_cores(srv.rt); i++) {
		shutdown(srv.listeners[i], SHUT_RDWR); /* wakes its acceptor */
		runtime_spawn_on(srv.rt, i, drain_core, NULL);
	}
	while (atomic_load(&srv.open) && runtime_now() < until)
		if (runtime_poll(signal_fd, POLLIN, (int64_t)(10 * MS)) > 0 &&
		    runtime_read(signal_fd, &si, sizeof(si)) == sizeof(si))
			break;
	runtime_shutdown(srv.rt);
}

static void signal_watch(void *arg)
{
	struct signalfd_siginfo si;
	(void)arg;

	if (runtime_read(signal_fd, &si, sizeof(si)) == sizeof(si))
		drain();
}

/* -------------------------------------------------------------- startup */

static void usage(FILE *to)
{
	fprintf(to,
	        "usage: http-server [--port P] [--host ADDR] [--cores N] [--engine E] [--root DIR]\n"
	        "                   [--limit N] [--max-conns N] [--body-max BYTES]\n"
	        "                   [--header-timeout MS] [--idle-timeout MS] [--grace MS]\n"
	        "                   [--access-log] [--fixed-files] [--help]\n"
	        "Measuring aids: --plain-recv, --plain-accept, --no-batch, --file-copy\n"
	        "turn off the receive stream, the listener, response batching, splice.\n"
	        "Routes: /plaintext, POST /echo, /delay?ms=N, /limited, /stats, files under\n"
	        "--root. Defaults: port 8080, host 0.0.0.0, 1 core, limit 4, max-conns\n"
	        "10000, body-max 1048576, header-timeout 10000, idle-timeout 60000, grace 5000,\n"
	        "engine auto (io_uring if the kernel allows it, else epoll; or io_uring, epoll).\n");
}

/* Options into srv.opt. Returns -1 to go on, else an exit status. */
static int parse_options(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", 1, NULL, 'p' }, { "host", 1, NULL, 'h' }, { "cores", 1, NULL, 'c' },
		{ "engine", 1, NULL, 'e' },
		{ "root", 1, NULL, 'r' }, { "limit", 1, NULL, 'l' }, { "max-conns", 1, NULL, 'm' },
		{ "body-max", 1, NULL, 'b' }, { "header-timeout", 1, NULL, 't' },
		{ "idle-timeout", 1, NULL, 'i' }, { "grace", 1, NULL, 'g' },
		{ "access-log", 0, NULL, 'a' }, { "fixed-files", 0, NULL, 'f' },
		{ "plain-recv", 0, NULL, 'P' }, { "plain-accept", 0, NULL, 'A' },
		{ "no-batch", 0, NULL, 'B' }, { "file-copy", 0, NULL, 'C' },
		{ "help", 0, NULL, 'H' }, { NULL, 0, NULL, 0 },
	};
	struct options *o = &srv.opt;
	uint64_t v = 0;
	int c;

	*o = (struct options){ .host = "0.0.0.0", .port = 8080, .cores = 1, .limit = 4,
		.max_conns = 10000, .body_max = 1 << 20, .header_timeout_ms = 10000,
		.idle_timeout_ms = 60000, .grace_ms = 5000 };
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		bool ok = true;
		switch (c) {
		case 'p': ok = demo_number(optarg, 65535, &v); o->port = (unsigned)v; break;
		case 'h': o->host = optarg; break;
		case 'c': ok = demo_number(optarg, RUNTIME_MAX_CORES, &v); o->cores = (unsigned)v; break;
		case 'e': ok = demo_engine(optarg, &o->engine); break;
		case 'r': o->root = optarg; break;
		case 'l': ok = demo_number(optarg, 1u << 20, &v) && v; o->limit = (unsigned)v; break;
		case 'm': ok = demo_number(optarg, 1u << 24, &v) && v; o->max_conns = (unsigned)v; break;
		case 'b': ok = demo_number(optarg, 1ull << 32, &o->body_max); break;
		case 't': ok = demo_number(optarg, 1u << 30, &o->header_timeout_ms) &&
		                 o->header_timeout_ms; break;
		case 'i': ok = demo_number(optarg, 1u << 30, &o->idle_timeout_ms); break;
		case 'g': ok = demo_number(optarg, 1u << 30, &o->grace_ms); break;
		case 'a': o->access_log = true; break;
		case 'f': o->fixed_files = true; break;
		case 'P': o->plain_recv = true; break;
		case 'A': o->plain_accept = true; break;
		case 'B': o->no_batch = true; break;
		case 'C': o->file_copy = true; break;
		case 'H': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (!ok) {
			const struct option *bad = opts;
			while (bad->val != c)
				bad++;
			fprintf(stderr, "http-server: bad value for --%s: '%s'\n", bad->name, optarg);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	return -1;
}

/* One listener per core on the same port (port 0: the first one's), with
 * TCP_NODELAY, which accepted sockets inherit: an answer must not wait for
 * the ACK of the one before it (Nagle), as it would when a pipelined batch
 * is answered in several sends (--no-batch, a large file after a head). */
static int open_listeners(void)
{
	srv.listeners = calloc(srv.opt.cores, sizeof(*srv.listeners));
	if (!srv.listeners)
		return -ENOMEM;
	for (unsigned i = 0; i < srv.opt.cores; i++) {
		int fd = runtime_tcp_listen(srv.opt.host, (uint16_t)srv.opt.port, 4096,
		                            RUNTIME_LISTEN_REUSEPORT);
		if (fd < 0)
			return fd;
		srv.listeners[i] = fd;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
		if (srv.opt.port == 0) {
			struct sockaddr_storage ss;
			socklen_t len = sizeof(ss);
			getsockname(fd, (struct sockaddr *)&ss, &len);
			srv.opt.port = ntohs(ss.ss_family == AF_INET6
			                     ? ((struct sockaddr_in6 *)&ss)->sin6_port
			                     : ((struct sockaddr_in *)&ss)->sin_port);
		}
	}
	return 0;
}

/* SIGINT and SIGTERM, blocked here (and so in the core threads) and read
 * from a signalfd by a fiber: the drain needs fibers running. */
static int watch_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		return -errno;
	signal_fd = signalfd(-1, &set, SFD_CLOEXEC);
	return signal_fd < 0 ? -errno : 0;
}

static int start(void)
{
	struct runtime_config config, *cfg = &config;
	int rc;

	if ((rc = watch_signals()) < 0 || (rc = open_listeners()) < 0)
		return rc;
	if (srv.opt.root && (srv.root_fd = open(srv.opt.root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	runtime_config_init(cfg);
	cfg->cores = srv.opt.cores;
	cfg->fixed_files = srv.opt.fixed_files;
	cfg->engine = srv.opt.engine;
	if ((rc = runtime_create(&srv.rt, cfg)) < 0) {
		demo_create_failed("http-server", rc, cfg);
		return 1;
	}
	if ((rc = runtime_sem_create(&srv.backend, srv.opt.limit, 0)) < 0)
		return rc;
	srv.limits = (struct http_limits){ .line_max = 8192, .head_max = 12288,
		.headers_max = HTTP_HEADERS_MAX, .body_max = srv.opt.body_max };
	conn_lists_init(&srv);
	for (unsigned i = 0; i < srv.opt.cores && rc == 0; i++)
		rc = runtime_spawn_on(srv.rt, i, acceptor, (void *)(intptr_t)i);
	return rc ? rc : runtime_spawn_on(srv.rt, 0, signal_watch, NULL);
}

int main(int argc, char **argv)
{
	int rc = parse_options(argc, argv);

	if (rc >= 0)
		return rc;
	demo_raise_fd_limit(); /* room for --max-conns connections */
	srv.root_fd = -1;
	if ((rc = start()) != 0) {
		if (rc < 0) /* else start said why */
			fprintf(stderr, "http-server: cannot start on %s:%u: %s\n", srv.opt.host,
			        srv.opt.port, strerror(-rc));
		return 1;
	}
	char engine[600];
	demo_engine_line(engine, sizeof(engine), srv.rt);
	printf("http-server: listening on %s:%u, %u core%s, root %s, %s\n", srv.opt.host,
	       srv.opt.port, srv.opt.cores, srv.opt.cores == 1 ? "" : "s",
	       srv.opt.root ? srv.opt.root : "(none)", engine);
	fflush(stdout);
	rc = runtime_run(srv.rt);
	uint64_t requests = conn_requests(&srv);
	runtime_destroy(srv.rt);
	for (unsigned i = 0; i < srv.opt.cores; i++)
		close(srv.listeners[i]);
	fprintf(stderr, "http-server: stopped after %llu requests\n", (unsigned long long)requests);
	if (rc < 0) {
		fprintf(stderr, "http-server: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
