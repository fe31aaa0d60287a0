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
 * runtime_copy_both, a transport wrapping a connection's (to see bytes
 * flow), runtime_conn_set_read_deadline / _write_deadline as an idle
 * timeout, runtime_drain_on_signals, runtime_cleanup_begin / _end,
 * runtime_log.
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
 * stdout, e.g. "127.0.0.1:40312: 5 bytes up, 5 bytes down: client closed".
 */
#include <runtime.h>

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
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

/*
 * The idle timeout. runtime_copy_both runs each direction in a fiber of
 * its own, and neither says when bytes pass; but it reads and writes
 * through the transports we give it. So each side is a transport of our
 * own over its connection's: every read or write that moves bytes pushes
 * the read and write deadlines of both connections to now + idle. A
 * direction blocked under the old deadline wakes then, sees it moved and
 * waits on; when nothing moved for the whole timeout, its call fails with
 * -ETIMEDOUT and copy_both cancels the other direction. Write deadlines
 * count too: a peer that stops reading (after its half-close, say) would
 * otherwise hold a writer for ever. No extra fiber, no timer of our own.
 * (A connection's deadlines are set from fibers of its core: copy_both's
 * run on the handler's, where both connections were opened.)
 */
struct session;

struct side {
	struct runtime_transport t;            /* ours, handed to copy_both */
	const struct runtime_transport *inner; /* the connection's */
	struct runtime_conn *conn;
	struct session *s;
	const char *name;                      /* "client", "upstream" */
};

struct session {
	struct side side[2];
	const char *eof_by, *err_by; /* who ended first, for the log */
};

static void touch(struct session *s)
{
	uint64_t d = runtime_now() + opt.idle_ns;

	for (int i = 0; i < 2; i++) {
		runtime_conn_set_read_deadline(s->side[i].conn, d);
		runtime_conn_set_write_deadline(s->side[i].conn, d);
	}
}

static ssize_t side_read(void *ctx, void *buf, size_t len)
{
	struct side *sd = ctx;
	ssize_t n = sd->inner->ops->read(sd->inner->ctx, buf, len);

	if (n > 0)
		touch(sd->s);
	else if (n == 0 && !sd->s->eof_by)
		sd->s->eof_by = sd->name;
	else if (n < 0 && !sd->s->err_by)
		sd->s->err_by = sd->name;
	return n;
}

static ssize_t side_writev(void *ctx, const struct iovec *iov, int iovcnt)
{
	struct side *sd = ctx;
	ssize_t n = sd->inner->ops->writev(sd->inner->ctx, iov, iovcnt);

	if (n > 0)
		touch(sd->s);
	else if (n < 0 && !sd->s->err_by)
		sd->s->err_by = sd->name;
	return n;
}

static int side_close_write(void *ctx)
{
	struct side *sd = ctx;

	return sd->inner->ops->close_write(sd->inner->ctx);
}

/* No peek (copy reads into its buffer) and no fds to splice: a
 * connection's transport offers none, so that its deadlines hold. */
static const struct runtime_transport_ops side_ops = {
	.read = side_read,
	.writev = side_writev,
	.close_write = side_close_write,
};

static void side_init(struct session *s, int i, struct runtime_conn *conn, const char *name)
{
	struct side *sd = &s->side[i];

	*sd = (struct side){ .t = { &side_ops, sd }, .inner = runtime_conn_transport(conn),
	                     .conn = conn, .s = s, .name = name };
}

/* ------------------------------------------------------------ a connection */

/* "ADDR:PORT" or "[ADDR]:PORT" of the client, for the log. */
static void peer_name(struct runtime_conn *conn, char *out, size_t len)
{
	const struct sockaddr *sa = runtime_conn_peer(conn, NULL);
	char addr[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
		port = ntohs(in->sin_port);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
		port = ntohs(in6->sin6_port);
	}
	snprintf(out, len, sa && sa->sa_family == AF_INET6 ? "[%s]:%u" : "%s:%u", addr, port);
}

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
static const char *why(const struct session *s, int rc, char *buf, size_t len)
{
	if (rc == 0)
		snprintf(buf, len, "%s closed", s->eof_by ? s->eof_by : "both");
	else if (rc == -ETIMEDOUT)
		snprintf(buf, len, "idle for %llu ms", (unsigned long long)(opt.idle_ns / MS));
	else if (rc == -ECANCELED)
		snprintf(buf, len, "cut at the end of the drain");
	else
		snprintf(buf, len, "%s: %s", s->err_by ? s->err_by : "proxy", strerror(-rc));
	return buf;
}

/*
 * One client connection (runtime_serve closes it when this returns).
 *
 * The cleanup around runtime_copy_both: a fiber cancelled while it waits
 * cannot wait any more, so copy_both, if this fiber were cancelled (the
 * drain's grace is over: runtime_shutdown), would return at once while its
 * two fibers still read and write both connections - and we would close
 * them, and leave the session on this stack, under their feet. A cleanup
 * holds the cancel back; the shutdown cancels the two copy fibers as well,
 * so copy_both returns -ECANCELED as soon as they have let go. Its bound
 * is no limit (INT64_MAX): it becomes this fiber's deadline, which the
 * copy fibers inherit, and a connection may last as long as bytes flow.
 */
static void proxy_conn(struct runtime_conn *client, void *arg)
{
	struct session s = { 0 };
	struct runtime_conn *up;
	struct runtime_cleanup cl;
	char peer[INET6_ADDRSTRLEN + 8], reason[128];
	size_t up_bytes = 0, down_bytes = 0;

	(void)arg;
	peer_name(client, peer, sizeof(peer));
	int rc = connect_upstream(&up);
	if (rc < 0) { /* the client sees its connection closed */
		runtime_log(1, "%s: upstream %s: %s\n", peer, opt.upstream,
		            rc == -ENOENT ? "no such host" : strerror(-rc)); /* EAI_NONAME */
		return;
	}
	side_init(&s, 0, client, "client");
	side_init(&s, 1, up, "upstream");
	touch(&s);
	runtime_cleanup_begin(&cl, INT64_MAX);
	rc = runtime_copy_both(&s.side[0].t, &s.side[1].t, 0, 0, &up_bytes, &down_bytes);
	runtime_cleanup_end(&cl);
	runtime_conn_close(up);
	runtime_log(1, "%s: %zu bytes up, %zu bytes down: %s\n", peer, up_bytes, down_bytes,
	            why(&s, rc, reason, sizeof(reason)));
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
