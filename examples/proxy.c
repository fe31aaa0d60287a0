/* SPDX-License-Identifier: MIT */
/*
 * proxy.c - a TCP reverse proxy: each connection accepted on LISTEN_PORT
 * gets a connection of its own to UPSTREAM, and bytes are copied both ways
 * until both sides have closed. A half-close passes through: a client that
 * shuts its write side still reads the rest of the answer, and the
 * upstream reads end of stream. A connection with no byte either way for
 * the idle timeout is closed. SIGINT or SIGTERM drains: new connections
 * are refused, those in progress go on for the grace period, then what is
 * left is cut. One line is logged per connection, at its end.
 *
 * Shows: runtime_serve on every core, runtime_tcp_connect (a name is
 * resolved off the core), runtime_conn_open on a socket of one's own,
 * runtime_copy_both, runtime_conn_set_idle_timeout,
 * runtime_drain_on_signals, runtime_sockaddr_name, runtime_log.
 *
 *   ./proxy LISTEN_PORT UPSTREAM_HOST:PORT [--idle-timeout MS] [--cores N]
 *           [--grace MS]
 *   ../demos/echo/echo-server --port 7000 &     # an upstream
 *   ./proxy 8000 localhost:7000 &
 *   ./hello_client 127.0.0.1:8000 "through the proxy"
 *
 * Defaults: idle timeout 60000 ms, one core per CPU (--cores 0), grace
 * 30000 ms. LISTEN_PORT 0 takes a free port. It listens on every IPv4
 * address, prints "proxy: listening on PORT -> UPSTREAM", and logs to
 * stdout, e.g. "127.0.0.1:40312: 5 bytes up, 5 bytes down: closed".
 */
#include <runtime.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS (1000 * 1000ull)
#define CONNECT_TIMEOUT_NS (10000 * MS)

static struct {
	uint16_t port;
	const char *upstream;     /* as given, for messages */
	char host[256];
	uint16_t upstream_port;
	uint64_t idle_ns, grace_ns;
	unsigned cores;
} opt = { .idle_ns = 60000 * MS, .grace_ns = 30000 * MS };

/* ------------------------------------------------------------ a connection */

/* The upstream socket as a connection of this core: 0 or -errno. */
static int connect_upstream(struct runtime_conn **up)
{
	/* runtime_tcp_connect resolves a name on the offload pool and tries
	 * each address; the fiber's deadline bounds all of it. */
	runtime_deadline_set(runtime_now() + CONNECT_TIMEOUT_NS);
	int fd = runtime_tcp_connect(opt.host, opt.upstream_port);
	runtime_deadline_set(0);
	if (fd < 0)
		return fd;
	int rc = runtime_conn_open(up, fd, 0);
	if (rc < 0)
		runtime_close(fd); /* the connection owns fd only after a 0 */
	return rc;
}

/* Why the copy ended, for the log. */
static const char *why(int rc, char *buf, size_t len)
{
	if (rc == 0)
		snprintf(buf, len, "closed");
	else if (rc == -ETIMEDOUT)
		snprintf(buf, len, "idle for %llu ms", (unsigned long long)(opt.idle_ns / MS));
	else if (rc == -ECANCELED)
		snprintf(buf, len, "cut at the end of the drain");
	else
		snprintf(buf, len, "%s", strerror(-rc));
	return buf;
}

/*
 * One client connection (runtime_serve closes it when this returns). Both
 * connections get the idle timeout: a read or write waiting on either
 * fails once no byte has moved on it for that long, and copy_both then
 * cancels the other direction. When the drain's grace is over,
 * runtime_shutdown cancels this fiber and copy_both's two: copy_both
 * returns -ECANCELED once they have let go of both connections.
 */
static void proxy_conn(struct runtime_conn *client, void *arg)
{
	struct runtime_conn *up;
	char peer[RUNTIME_SOCKADDR_NAME_MAX], reason[128];
	size_t up_bytes = 0, down_bytes = 0;
	socklen_t plen;

	(void)arg;
	const struct sockaddr *sa = runtime_conn_peer(client, &plen);
	if (!sa || runtime_sockaddr_name(sa, plen, peer, sizeof(peer)) < 0)
		snprintf(peer, sizeof(peer), "?");
	int rc = connect_upstream(&up);
	if (rc < 0) { /* the client sees its connection closed */
		runtime_log(1, "%s: upstream %s: %s\n", peer, opt.upstream,
		            rc == -ENOENT ? "no such host" : strerror(-rc)); /* EAI_NONAME */
		return;
	}
	runtime_conn_set_idle_timeout(client, opt.idle_ns);
	runtime_conn_set_idle_timeout(up, opt.idle_ns);
	rc = runtime_copy_both(runtime_conn_transport(client), runtime_conn_transport(up), 0, 0,
	                       &up_bytes, &down_bytes);
	runtime_conn_close(up);
	runtime_log(1, "%s: %zu bytes up, %zu bytes down: %s\n", peer, up_bytes, down_bytes,
	            why(rc, reason, sizeof(reason)));
}

/* ------------------------------------------------------------------ main */

/* A decimal number in [min, max], or -1. */
static long long number(const char *s, long long min, long long max)
{
	char *end;
	long long v = strtoll(s, &end, 10);

	return *s && !*end && v >= min && v <= max ? v : -1;
}

/* HOST:PORT or [V6ADDR]:PORT into opt. 0 or -1. */
static int parse_upstream(const char *arg)
{
	const char *colon = strrchr(arg, ':');
	size_t hlen = colon ? (size_t)(colon - arg) : 0;
	long long port = colon ? number(colon + 1, 1, 65535) : -1;

	if (hlen >= 2 && arg[0] == '[' && arg[hlen - 1] == ']')
		arg++, hlen -= 2;
	if (port < 0 || hlen == 0 || hlen >= sizeof(opt.host))
		return -1;
	memcpy(opt.host, arg, hlen);
	opt.host[hlen] = '\0';
	opt.upstream_port = (uint16_t)port;
	return 0;
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "idle-timeout", required_argument, NULL, 'i' },
		{ "cores", required_argument, NULL, 'c' },
		{ "grace", required_argument, NULL, 'g' },
		{ NULL, 0, NULL, 0 },
	};
	long long v;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == '?' || (v = number(optarg, c == 'i' ? 1 : 0, 1000000000)) < 0)
			return -1;
		if (c == 'i')
			opt.idle_ns = (uint64_t)v * MS;
		else if (c == 'g')
			opt.grace_ns = (uint64_t)v * MS;
		else if (v > RUNTIME_MAX_CORES)
			return -1;
		else
			opt.cores = (unsigned)v;
	}
	if (argc - optind != 2 || (v = number(argv[optind], 0, 65535)) < 0 ||
	    parse_upstream(argv[optind + 1]) < 0)
		return -1;
	opt.port = (uint16_t)v;
	opt.upstream = argv[optind + 1];
	return 0;
}

int main(int argc, char **argv)
{
	struct runtime_config cfg;
	struct runtime_serve_config sc;
	struct runtime_server *srv = NULL;
	struct runtime *rt;

	if (parse_args(argc, argv) < 0) {
		fprintf(stderr, "usage: %s LISTEN_PORT UPSTREAM_HOST:PORT [--idle-timeout MS] "
		        "[--cores N] [--grace MS]\n", argv[0]);
		return 2;
	}
	runtime_config_init(&cfg);
	cfg.cores = opt.cores; /* 0: one per CPU */
	int rc = runtime_create(&rt, &cfg);
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %s\n", strerror(-rc));
		return 1;
	}
	runtime_serve_config_init(&sc);
	sc.port = opt.port; /* host NULL: every IPv4 address */
	sc.handler = proxy_conn;
	/* The first SIGINT or SIGTERM drains: runtime_serve stops accepting,
	 * connections go on; the grace later, runtime_shutdown cancels the
	 * rest. A second signal shuts down at once. */
	if ((rc = runtime_drain_on_signals(rt, opt.grace_ns)) < 0 ||
	    (rc = runtime_serve(rt, &sc, &srv)) < 0) {
		fprintf(stderr, "proxy: listen on port %u: %s\n", opt.port, strerror(-rc));
		runtime_server_destroy(srv); /* NULL, or a server that could not start */
		runtime_destroy(rt);
		return 1;
	}
	printf("proxy: listening on %u -> %s\n", runtime_server_port(srv), opt.upstream);
	fflush(stdout); /* before the connections' lines, which go out by write(2) */
	rc = runtime_run(rt); /* until the drain is over */
	runtime_server_destroy(srv);
	runtime_destroy(rt);
	if (rc < 0) {
		fprintf(stderr, "proxy: %s\n", strerror(-rc));
		return 1;
	}
	printf("proxy: stopped\n");
	return 0;
}
