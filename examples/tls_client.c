/* SPDX-License-Identifier: MIT */
/*
 * tls_client.c - an HTTPS GET with the runtime's TLS client: connect, the
 * TLS handshake (the server's certificate checked against a CA file or the
 * system's store, and against the host name), one request, the answer
 * read to its end and printed, then what the handshake agreed on. With
 * --twice a second connection follows the first; the context kept the
 * session (ticket) the server gave for that host, so the second one
 * resumes it: no certificate is sent or checked again.
 *
 * Shows: runtime_tls_create for a client (ca_file, alpn, tls13_only),
 * runtime_tls_insecure_skip_verify, runtime_tcp_connect, runtime_conn_open,
 * runtime_conn_tls_connect, runtime_conn_write and runtime_conn_read on the
 * plaintext, runtime_conn_tls_info, runtime_conn_tls_error.
 *
 *   ./tls_client [--cacert FILE | --insecure] [--twice] [--alpn LIST]
 *                [--tls13] HOST[:PORT] [PATH]
 *   ../demos/http/http-server --port 8443 --tls-cert cert.pem --tls-key key.pem &
 *   ./tls_client --cacert ca.pem localhost:8443 /plaintext
 *   ./tls_client --twice example.org            # port 443, the system's CAs
 *
 * Defaults: port 443, PATH /, ALPN "http/1.1" (--alpn '' offers none),
 * TLS 1.2 or 1.3. HOST is what the certificate must name (a DNS name or
 * an IP address); a name is also sent as SNI. For each connection it
 * prints the answer (status line, headers, body) and then a line such as
 *   tls 1: TLSv1.3, TLS_AES_128_GCM_SHA256, ALPN http/1.1, resumed no
 * and exits 0 - or says on stderr why not and exits 1, e.g.
 *   tls_client: handshake with localhost: certificate verify failed:
 *   certificate has expired (Key has expired)
 * Usage errors exit 2.
 */
#define _GNU_SOURCE /* memmem */
#include <runtime.h>
#include <runtime_tls.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TIMEOUT_NS (10 * 1000 * 1000 * 1000ull) /* per connection, all of it */
#define ANSWER_MAX (1024 * 1024)                /* bytes of an answer kept */

static struct {
	const char *cacert; /* NULL: the system's store */
	const char *alpn;
	const char *path;
	char host[256];
	uint16_t port;
	int insecure, twice, tls13;
	int ok; /* set by the fiber, read by main() after runtime_run() */
} opt = { .alpn = "http/1.1", .path = "/", .port = 443 };

struct answer {
	char *buf;
	size_t len;
	size_t want; /* the head plus Content-Length once known, else 0 */
};

/* ----------------------------------------------------------- the answer */

/* Once the head is in: its length plus Content-Length (0: none given,
 * read to the end of stream). */
static size_t expected_length(const struct answer *a)
{
	const char *end = memmem(a->buf, a->len, "\r\n\r\n", 4);

	if (!end)
		return 0;
	size_t head = (size_t)(end - a->buf) + 4;
	for (const char *l = strstr(a->buf, "\r\n"); l && l < end; l = strstr(l + 2, "\r\n")) {
		if (strncasecmp(l + 2, "Content-Length:", 15) == 0)
			return head + strtoull(l + 17, NULL, 10);
	}
	return 0;
}

/* Read the answer until Content-Length says it is all there, or the
 * server's end of stream (its close_notify: TLS tells it from a cut).
 * 0 or -errno. */
static int read_answer(struct runtime_conn *conn, struct answer *a)
{
	if (!(a->buf = malloc(ANSWER_MAX + 1)))
		return -ENOMEM;
	while (a->len < ANSWER_MAX && (!a->want || a->len < a->want)) {
		ssize_t n = runtime_conn_read(conn, a->buf + a->len, ANSWER_MAX - a->len);
		if (n < 0)
			return (int)n; /* -ECONNABORTED: closed without close_notify */
		if (n == 0)
			return 0;
		a->len += (size_t)n;
		a->buf[a->len] = '\0';
		if (!a->want)
			a->want = expected_length(a);
	}
	return 0;
}

/* -------------------------------------------------------- a connection */

/* A connection to the server, its handshake done. 0 or -errno; on a
 * failed handshake *conn is left open for runtime_conn_tls_error. */
static int tls_open(struct runtime_tls *tls, struct runtime_conn **conn)
{
	struct runtime_conn *c;

	*conn = NULL;
	int fd = runtime_tcp_connect(opt.host, opt.port); /* a name: resolved off the core */
	if (fd < 0) {
		fprintf(stderr, "tls_client: connect to %s:%u: %s\n", opt.host, opt.port,
		        strerror(-fd));
		return fd;
	}
	int rc = runtime_conn_open(&c, fd, 0);
	if (rc < 0) {
		runtime_close(fd); /* the connection owns fd only after a 0 */
		fprintf(stderr, "tls_client: %s\n", strerror(-rc));
		return rc;
	}
	*conn = c;
	/* The host is what the certificate must name; a resumed session is
	 * one the context kept for this same host. */
	return runtime_conn_tls_connect(c, tls, opt.host);
}

/* Why the last TLS call on conn failed, in words and as errno's. */
static void tls_failed(struct runtime_conn *conn, const char *doing, int rc)
{
	char why[256];

	if (runtime_conn_tls_error(conn, why, sizeof(why)) > 0)
		fprintf(stderr, "tls_client: %s %s: %s (%s)\n", doing, opt.host, why, strerror(-rc));
	else
		fprintf(stderr, "tls_client: %s %s: %s\n", doing, opt.host, strerror(-rc));
}

/* "tls N: TLSv1.3, TLS_AES_128_GCM_SHA256, ALPN http/1.1, resumed no" */
static void print_info(struct runtime_conn *conn, int n)
{
	struct runtime_tls_info info;

	if (runtime_conn_tls_info(conn, &info) < 0)
		return;
	printf("tls %d: %s, %s, ALPN %s, resumed %s\n", n, info.version, info.cipher,
	       info.alpn ? info.alpn : "none", info.resumed ? "yes" : "no");
}

/* The request: Host names the port unless it is 443, an IPv6 address in
 * brackets. Its length. */
static int request(char *buf, size_t size)
{
	const char *v6 = strchr(opt.host, ':') ? "[" : "";
	char port[8] = "";

	if (opt.port != 443)
		snprintf(port, sizeof(port), ":%u", opt.port);
	return snprintf(buf, size, "GET %s HTTP/1.1\r\nHost: %s%s%s%s\r\nConnection: close\r\n\r\n",
	                opt.path, v6, opt.host, *v6 ? "]" : "", port);
}

/* One connection: handshake, GET, the answer and the TLS line printed.
 * 0 or -errno (said on stderr). */
static int get(struct runtime_tls *tls, int n)
{
	struct runtime_conn *conn;
	struct answer a = { 0 };
	char req[600];

	runtime_deadline_set(runtime_now() + TIMEOUT_NS); /* a silent server cannot hang us */
	int rc = tls_open(tls, &conn);
	if (rc < 0) {
		if (conn)
			tls_failed(conn, "handshake with", rc);
		goto out;
	}
	int len = request(req, sizeof(req));
	if ((rc = (int)runtime_conn_write(conn, req, (size_t)len, NULL)) < 0 ||
	    (rc = read_answer(conn, &a)) < 0) {
		tls_failed(conn, "exchange with", rc);
		goto out;
	}
	fwrite(a.buf, 1, a.len, stdout);
	if (a.len && a.buf[a.len - 1] != '\n')
		putchar('\n');
	print_info(conn, n);
	rc = a.len ? 0 : -ENODATA;
	if (rc < 0)
		fprintf(stderr, "tls_client: %s closed without an answer\n", opt.host);
out:
	runtime_conn_close(conn); /* sends close_notify if it can; NULL is fine */
	free(a.buf);
	runtime_deadline_set(0);
	return rc;
}

/* The fiber: one connection, or two in a row with the same context. */
static void client(void *arg)
{
	struct runtime_tls *tls = arg;

	opt.ok = get(tls, 1) == 0 && (!opt.twice || get(tls, 2) == 0);
}

/* ------------------------------------------------------------------ main */

/* A client context from the options: 0, or 1 (said why). */
static int make_context(struct runtime_tls **tls)
{
	struct runtime_tls_config cfg;
	char why[256];

	runtime_tls_config_init(&cfg);
	cfg.side = RUNTIME_TLS_CLIENT;
	cfg.ca_file = opt.cacert;               /* NULL: the system's CAs */
	cfg.alpn = *opt.alpn ? opt.alpn : NULL; /* what we offer, preferred first */
	cfg.tls13_only = opt.tls13;
	int rc = runtime_tls_create(tls, &cfg);
	if (rc == 0 && opt.insecure)
		rc = runtime_tls_insecure_skip_verify(*tls); /* tests only: no MITM protection */
	if (rc < 0) {
		runtime_tls_error_text(why, sizeof(why));
		fprintf(stderr, "tls_client: TLS context: %s%s%s\n", strerror(-rc), *why ? ": " : "",
		        why);
		runtime_tls_destroy(*tls);
		return 1;
	}
	return 0;
}

/* HOST, HOST:PORT or [V6ADDR]:PORT into opt. 0 or -1. */
static int parse_target(const char *arg)
{
	const char *colon = strrchr(arg, ':');
	size_t hlen = strlen(arg);
	char *end;

	if (colon && (arg[0] != '[' || colon[-1] == ']')) { /* a port, not a bare v6 address */
		long port = strtol(colon + 1, &end, 10);
		if (port <= 0 || port > 65535 || *end)
			return -1;
		opt.port = (uint16_t)port;
		hlen = (size_t)(colon - arg);
	}
	if (hlen >= 2 && arg[0] == '[' && arg[hlen - 1] == ']')
		arg++, hlen -= 2;
	if (hlen == 0 || hlen >= sizeof(opt.host))
		return -1;
	memcpy(opt.host, arg, hlen);
	opt.host[hlen] = '\0';
	return 0;
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cacert", required_argument, NULL, 'c' }, { "insecure", no_argument, NULL, 'k' },
		{ "twice", no_argument, NULL, '2' },        { "alpn", required_argument, NULL, 'a' },
		{ "tls13", no_argument, NULL, '3' },        { NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c': opt.cacert = optarg; break;
		case 'k': opt.insecure = 1; break;
		case '2': opt.twice = 1; break;
		case 'a': opt.alpn = optarg; break;
		case '3': opt.tls13 = 1; break;
		default: return -1;
		}
	}
	if (argc - optind < 1 || argc - optind > 2 || (opt.cacert && opt.insecure) ||
	    parse_target(argv[optind]) < 0)
		return -1;
	if (argc - optind == 2)
		opt.path = argv[optind + 1];
	return opt.path[0] == '/' && strlen(opt.path) < 256 ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct runtime_tls *tls;
	struct runtime *rt;

	if (parse_args(argc, argv) < 0) {
		fprintf(stderr, "usage: %s [--cacert FILE | --insecure] [--twice] [--alpn LIST] "
		        "[--tls13] HOST[:PORT] [PATH]\n", argv[0]);
		return 2;
	}
	if (make_context(&tls) != 0)
		return 1;
	int rc = runtime_create(&rt, NULL);
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %s\n", strerror(-rc));
		runtime_tls_destroy(tls);
		return 1;
	}
	rc = runtime_spawn(rt, client, tls);
	if (rc == 0)
		rc = runtime_run(rt); /* returns once the fiber has ended */
	if (rc < 0)
		fprintf(stderr, "runtime: %s\n", strerror(-rc));
	runtime_destroy(rt);
	runtime_tls_destroy(tls); /* after the connections: each held it */
	return rc == 0 && opt.ok ? 0 : 1;
}
