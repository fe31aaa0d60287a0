/* SPDX-License-Identifier: MIT */
/*
 * http_service.c - a small HTTP service on libruntime-http, served on
 * every core. The library accepts, parses each request, keeps connections
 * alive, and calls route() below once per request, in the connection's
 * fiber; route() answers through the response:
 *
 *   GET /hello?name=NAME   200 "Hello, NAME!" (NAME percent-decoded,
 *                          "+" a space; "world" without it)
 *   POST /sum              200 the sum of the whole numbers in the body
 *                          ("1 2 39" -> 42), 400 for anything else in it
 *   another method there   405, with an Allow field
 *   any other path         404
 *
 * Every answer carries "X-Core: N", the core that served it, and /hello's
 * "Cache-Control: no-store": fields set by the handler. One line per
 * response goes to stdout, in the Common Log Format ('127.0.0.1 - - [...]
 * "GET /hello?name=Ada HTTP/1.1" 200 12'). With --tls-cert and
 * --tls-key it serves HTTPS instead (TLS 1.2 and 1.3, ALPN http/1.1).
 * SIGINT or SIGTERM drains: no new connections, idle ones closed at once,
 * requests in flight finished (for up to 5 s); then it exits 0.
 *
 * Shows: runtime_http_serve, runtime_http_method, runtime_http_path,
 * runtime_http_query_param, runtime_http_decode, runtime_http_body_read_all,
 * runtime_http_set_header, runtime_http_respond, the library's access log,
 * runtime_tls_create and runtime_tls_add_cert for a server,
 * runtime_drain_on_signals, runtime_http_server_stats.
 *
 *   ./http_service [--port P] [--cores N] [--tls-cert FILE --tls-key FILE]
 *   ./http_service --port 8080 &
 *   curl 'http://127.0.0.1:8080/hello?name=Ada'     # Hello, Ada!
 *   curl -d '1 2 39' http://127.0.0.1:8080/sum       # 42
 *
 * Defaults: port 8080 (0 takes a free one), one core per CPU (--cores 0).
 * It listens on every IPv4 address and prints
 * "http_service: listening on port P (HTTP), N cores".
 */
#include <runtime_http.h>

#include <ctype.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BODY_MAX (64 * 1024)                  /* of a POST /sum */
#define GRACE_NS (5 * 1000 * 1000 * 1000ull)  /* for requests in flight at a drain */

static struct {
	uint16_t port;
	unsigned cores;
	const char *cert, *key;
} opt = { .port = 8080 };

/* ---------------------------------------------------------- the routes */

/* The library's strings are slices (pointer, length), not C strings. */
static bool is(struct runtime_http_slice s, const char *lit)
{
	return s.len == strlen(lit) && memcmp(s.p, lit, s.len) == 0;
}

static int text(struct runtime_http_response *res, int status, const char *body)
{
	return runtime_http_respond(res, status, "text/plain; charset=utf-8", body, strlen(body));
}

static int not_allowed(struct runtime_http_response *res, const char *allow)
{
	runtime_http_set_header(res, "Allow", allow);
	return text(res, 405, "method not allowed\n");
}

/* GET /hello?name=NAME */
static int hello(struct runtime_http_request *req, struct runtime_http_response *res)
{
	struct runtime_http_slice value;
	char name[64] = "world", body[128];

	/* The query is still percent-encoded: decode the value ("+" a space). */
	if (runtime_http_query_param(runtime_http_query(req), "name", &value) &&
	    runtime_http_decode(value, name, sizeof(name), 1) < 0)
		return text(res, 400, "bad name (at most 63 bytes, no %00)\n");
	snprintf(body, sizeof(body), "Hello, %s!\n", name);
	runtime_http_set_header(res, "Cache-Control", "no-store");
	return text(res, 200, body);
}

/* The whole numbers in s (len bytes) added up: 0, or -EINVAL. */
static int add_up(const char *s, size_t len, long long *total)
{
	const char *p = s;
	char *end;

	*total = 0;
	if (strlen(s) != len) /* a NUL in the body */
		return -EINVAL;
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			return 0;
		errno = 0;
		long long v = strtoll(p, &end, 10);
		if (end == p || errno || __builtin_add_overflow(*total, v, total))
			return -EINVAL;
		p = end;
	}
}

/* POST /sum */
static int sum(struct runtime_http_request *req, struct runtime_http_response *res)
{
	char *body, out[32];
	size_t len;
	long long total;

	/* Waits for the body (the fiber parks, the core serves others). */
	int rc = runtime_http_body_read_all(req, &body, &len, BODY_MAX);
	if (rc == -EMSGSIZE)
		return text(res, 413, "body over 64 KiB\n");
	if (rc < 0) /* -EBADMSG: bad chunked framing; else the client went away */
		return rc == -EBADMSG ? text(res, 400, "bad body\n") : rc;
	rc = add_up(body, len, &total);
	free(body);
	if (rc < 0)
		return text(res, 400, "want whole numbers separated by spaces\n");
	snprintf(out, sizeof(out), "%lld\n", total);
	return text(res, 200, out);
}

/* The handler: once per request, in the connection's fiber. 0, or an
 * error (the library then answers 500 or closes the connection). */
static int route(struct runtime_http_request *req, struct runtime_http_response *res, void *arg)
{
	struct runtime_http_slice method = runtime_http_method(req), path = runtime_http_path(req);
	char core[16];

	(void)arg;
	snprintf(core, sizeof(core), "%d", runtime_core_index());
	runtime_http_set_header(res, "X-Core", core);
	if (is(path, "/hello"))
		return is(method, "GET") || is(method, "HEAD") ? hello(req, res)
		                                              : not_allowed(res, "GET, HEAD");
	if (is(path, "/sum"))
		return is(method, "POST") ? sum(req, res) : not_allowed(res, "POST");
	return text(res, 404, "not found\n");
}

/* ------------------------------------------------------------------ main */

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },     { "cores", required_argument, NULL, 'c' },
		{ "tls-cert", required_argument, NULL, 'C' }, { "tls-key", required_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long v;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == '?')
			return -1;
		if (c == 'C' || c == 'K') {
			*(c == 'C' ? &opt.cert : &opt.key) = optarg;
			continue;
		}
		v = strtoul(optarg, &end, 10);
		if (!*optarg || *end || *optarg == '-' || v > (c == 'p' ? 65535 : RUNTIME_MAX_CORES))
			return -1;
		if (c == 'p')
			opt.port = (uint16_t)v;
		else
			opt.cores = (unsigned)v;
	}
	return optind == argc && !opt.cert == !opt.key ? 0 : -1;
}

/* With --tls-cert: a server context holding the certificate. 0 (*tls NULL
 * without --tls-cert) or -errno, said on stderr. */
static int make_tls(struct runtime_tls **tls)
{
	struct runtime_tls_config cfg;
	char why[256];

	*tls = NULL;
	if (!opt.cert)
		return 0;
	runtime_tls_config_init(&cfg); /* a server: TLS 1.2 and 1.3, AEAD suites */
	cfg.alpn = "http/1.1";         /* the protocol it agrees on */
	int rc = runtime_tls_create(tls, &cfg);
	if (rc == 0)
		rc = runtime_tls_add_cert(*tls, opt.cert, opt.key, 0); /* PEM files */
	if (rc < 0) {
		runtime_tls_error_text(why, sizeof(why));
		fprintf(stderr, "http_service: TLS: %s%s%s\n", strerror(-rc), *why ? ": " : "", why);
		runtime_tls_destroy(*tls);
		*tls = NULL;
	}
	return rc;
}

/* The server's settings, and it started: 0 or -errno. */
static int start(struct runtime *rt, struct runtime_tls *tls, struct runtime_http_server **srv)
{
	static struct runtime_tls_serve ts; /* outlives the server */
	struct runtime_http_server_config cfg;
	int rc;

	runtime_http_server_config_init(&cfg);
	cfg.serve.port = opt.port; /* host NULL: every IPv4 address */
	ts.tls = tls;
	if (tls && (rc = runtime_tls_serve(&cfg.serve, &ts)) < 0) /* else plain HTTP */
		return rc;
	cfg.handler = route;
	cfg.access_log_format = RUNTIME_HTTP_LOG_COMMON; /* a line per response, stdout */
	/* The first SIGINT or SIGTERM drains, a second one stops at once. */
	rc = runtime_drain_on_signals(rt, GRACE_NS);
	return rc < 0 ? rc : runtime_http_serve(rt, &cfg, srv);
}

int main(int argc, char **argv)
{
	struct runtime_http_server *srv = NULL;
	struct runtime_http_server_stats st;
	struct runtime_config cfg;
	struct runtime_tls *tls;
	struct runtime *rt;

	if (parse_args(argc, argv) < 0) {
		fprintf(stderr, "usage: %s [--port P] [--cores N] [--tls-cert FILE --tls-key FILE]\n",
		        argv[0]);
		return 2;
	}
	if (make_tls(&tls) < 0)
		return 1;
	runtime_config_init(&cfg);
	cfg.cores = opt.cores; /* 0: one per CPU */
	int rc = runtime_create(&rt, &cfg);
	if (rc < 0) {
		fprintf(stderr, "http_service: runtime_create: %s\n", strerror(-rc));
		runtime_tls_destroy(tls);
		return 1;
	}
	if ((rc = start(rt, tls, &srv)) < 0) {
		fprintf(stderr, "http_service: listen on port %u: %s\n", opt.port, strerror(-rc));
	} else {
		printf("http_service: listening on port %u (%s), %u core%s\n", runtime_http_server_port(srv),
		       tls ? "HTTPS" : "HTTP", runtime_cores(rt), runtime_cores(rt) == 1 ? "" : "s");
		fflush(stdout); /* before the log lines, which go out by write(2) */
		if ((rc = runtime_run(rt)) < 0) /* until the drain is over */
			fprintf(stderr, "http_service: %s\n", strerror(-rc));
		runtime_http_server_stats(srv, &st);
	}
	runtime_http_server_destroy(srv); /* NULL, or one that could not start: fine */
	runtime_destroy(rt);
	runtime_tls_destroy(tls); /* after the connections: each held it */
	if (rc < 0)
		return 1;
	printf("http_service: stopped after %llu requests\n", (unsigned long long)st.requests);
	return 0;
}
