/* SPDX-License-Identifier: MIT */
/*
 * gateway.c - an API gateway: HTTP and HTTPS on every core in front of
 * two upstreams, on the library's blocks alone.
 *
 *   /api/a/...   proxied to --upstream-a, the prefix cut ("/api/a/x" -> "/x")
 *   /api/b/...   proxied to --upstream-b
 *   /healthz     200 "ok" while serving, 503 once draining
 *   /metrics     Prometheus exposition: the runtime, both servers, the client
 *
 * Each client address may make --rate requests a second (burst as many);
 * past that 429 with Retry-After. An upstream has --timeout-ms to begin
 * its answer once the request is sent (504 after it), a failed one is 502,
 * and an idempotent request on a pooled connection that broke before any
 * byte came back is tried once more. Bodies stream both ways, their
 * lengths kept (50 MB uploads and downloads hold one 32 KiB buffer each).
 * The proxy drops hop-by-hop fields, cleans the path ("/api/a/../b" is
 * not under /api/a: 404), and sets X-Forwarded-For/-Proto/-Host. A line
 * per response goes to stdout (Common Log Format). SIGINT or SIGTERM
 * drains: no new connections, requests in flight finish (up to 10 s),
 * then the client's pooled connections close, and it exits 0.
 *
 * Shows: runtime_http_proxy_handler, runtime_ratelimit_keyed_try_take,
 * runtime_http_health_handler, runtime_http_metrics_handler and the
 * metrics registry, two servers on one runtime, TLS serving, the access
 * log, runtime_drain_on_signals with a client's clean shutdown.
 *
 *   ./gateway --port P [--tls-port Q --cert C --key K] --upstream-a URL
 *             --upstream-b URL [--rate N] [--timeout-ms T] [--cores N]
 *   ./http_service --port 9001 & ./http_service --port 9002 &
 *   ./gateway --port 8080 --upstream-a http://127.0.0.1:9001 \
 *             --upstream-b http://127.0.0.1:9002 &
 *   curl 'http://127.0.0.1:8080/api/a/hello?name=Ada'     # Hello, Ada!
 *
 * Defaults: --rate 100, --timeout-ms 2000, one core per CPU. It prints
 * "gateway: listening on port P" (and "gateway: TLS on port Q").
 */
#include <runtime_http.h>
#include <runtime_metrics.h>
#include <runtime_tls.h>

#include <arpa/inet.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS (1000 * 1000ull)
#define GRACE_NS (10000 * MS)   /* for requests in flight at a drain */
#define MAX_KEYS 100000         /* client addresses the limiter remembers */

static struct {
	uint16_t port, tls_port;
	const char *cert, *key, *upstream[2];
	double rate;
	uint64_t timeout_ms;
	unsigned cores;
} opt = { .rate = 100, .timeout_ms = 2000 };

static struct {
	struct runtime_http_server *srv[2]; /* HTTP, HTTPS */
	struct runtime_http_client *client;
	struct runtime_http_proxy *proxy[2];
	struct runtime_ratelimit_keyed *limiter;
	struct runtime_metrics *metrics;
} gw;

/* ------------------------------------------------------------ a request */

/* path is prefix, or under it ("/api/a", "/api/a/x"; not "/api/ab"). */
static bool under(struct runtime_http_slice path, const char *prefix)
{
	size_t n = strlen(prefix);
	return path.len >= n && !memcmp(path.p, prefix, n) && (path.len == n || path.p[n] == '/');
}

/* The client's address takes a token, or it is answered 429 (1). */
static int limited(struct runtime_http_request *req, struct runtime_http_response *res)
{
	socklen_t len;
	const struct sockaddr *sa = runtime_conn_peer(runtime_http_conn(req), &len);
	const void *key = sa; /* the address bytes: 4 for IPv4, 16 for IPv6 */
	size_t klen = 0;
	uint64_t wait_ns;
	char secs[24];

	if (sa && sa->sa_family == AF_INET)
		key = &((const struct sockaddr_in *)sa)->sin_addr, klen = 4;
	else if (sa && sa->sa_family == AF_INET6)
		key = &((const struct sockaddr_in6 *)sa)->sin6_addr, klen = 16;
	if (!klen || runtime_ratelimit_keyed_try_take(gw.limiter, key, klen, 1, &wait_ns) == 0)
		return 0;
	snprintf(secs, sizeof(secs), "%llu", (unsigned long long)(wait_ns / (1000 * MS) + 1));
	runtime_http_set_header(res, "Retry-After", secs);
	runtime_http_respond(res, 429, "text/plain", "too many requests\n", 18);
	return 1; /* answered (a failed write closes the connection) */
}

static int route(struct runtime_http_request *req, struct runtime_http_response *res, void *arg)
{
	struct runtime_http_slice path = runtime_http_path(req);
	int which = under(path, "/api/a") ? 0 : under(path, "/api/b") ? 1 : -1;

	(void)arg;
	if (path.len == 8 && !memcmp(path.p, "/healthz", 8))
		return runtime_http_health_handler(req, res, NULL);
	if (path.len == 8 && !memcmp(path.p, "/metrics", 8))
		return runtime_http_metrics_handler(req, res, gw.metrics);
	if (which < 0)
		return runtime_http_respond(res, 404, "text/plain", "not found\n", 10);
	return limited(req, res) ? 0 : runtime_http_proxy_handler(req, res, gw.proxy[which]);
}

/* ------------------------------------------------------------ the setup */

/* Connections open on the servers (a drain closes the idle ones at once,
 * the busy ones after their answer). */
static unsigned serving(void)
{
	struct runtime_http_server_stats st;
	unsigned n = 0;

	for (int i = 0; i < 2; i++) {
		runtime_http_server_stats(gw.srv[i], &st); /* NULL (no HTTPS): zeroes */
		n += st.conns.live;
	}
	return n;
}

/* A fiber the drain starts: once no handler runs, the client is
 * destroyed (the pooled connections close on their cores). Inside a
 * cleanup: the grace's end cancels this fiber too, and it still waits
 * for the cancelled handlers to let go of the client. */
static void close_client(void *arg)
{
	struct runtime_cleanup cleanup;

	(void)arg;
	runtime_cleanup_begin(&cleanup, GRACE_NS);
	while (serving() && runtime_sleep(10 * MS) == 0)
		;
	runtime_cleanup_end(&cleanup);
	runtime_http_client_destroy(gw.client);
}

static void on_drain(void *rt)
{
	runtime_spawn(rt, close_client, NULL);
}

static int make_blocks(struct runtime *rt)
{
	static const char *const prefix[2] = { "/api/a", "/api/b" };
	struct runtime_http_client_config cc;
	struct runtime_http_proxy_config pc;
	int rc;

	runtime_http_client_config_init(&cc);
	cc.limits.body_max = UINT64_MAX; /* answers are streamed, never held */
	if ((rc = runtime_http_client_create(&gw.client, &cc)) < 0)
		return rc;
	for (int i = 0; i < 2; i++) {
		runtime_http_proxy_config_init(&pc);
		pc.client = gw.client;
		pc.upstream = opt.upstream[i];
		pc.strip_prefix = prefix[i];
		pc.head_timeout_ns = opt.timeout_ms * MS;
		if ((rc = runtime_http_proxy_create(&gw.proxy[i], &pc)) < 0)
			return rc;
	}
	if ((rc = runtime_ratelimit_keyed_create(&gw.limiter, opt.rate, (unsigned)opt.rate, MAX_KEYS)) < 0 ||
	    (rc = runtime_metrics_create(rt, 0, &gw.metrics)) < 0 ||
	    (rc = runtime_metrics_add_runtime(gw.metrics)) < 0 ||
	    (rc = runtime_http_metrics_add_client(gw.metrics, gw.client, "upstreams")) < 0)
		return rc;
	return runtime_on_drain(rt, on_drain, rt);
}

/* A server on port (TLS with tls), its figures under name. */
static int start(struct runtime *rt, uint16_t port, struct runtime_tls *tls, const char *name,
                 struct runtime_http_server **srv)
{
	static struct runtime_tls_serve ts; /* outlives the server */
	struct runtime_http_server_config cfg;
	int rc;

	runtime_http_server_config_init(&cfg);
	cfg.serve.port = port;
	ts.tls = tls;
	if (tls && (rc = runtime_tls_serve(&cfg.serve, &ts)) < 0)
		return rc;
	cfg.handler = route;
	cfg.limits.body_max = UINT64_MAX; /* streamed to the upstream */
	cfg.access_log_format = RUNTIME_HTTP_LOG_COMMON;
	if ((rc = runtime_http_serve(rt, &cfg, srv)) < 0)
		return rc;
	return runtime_http_metrics_add_server(gw.metrics, *srv, name);
}

/* ------------------------------------------------------------------ main */

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", 1, NULL, 'p' },       { "tls-port", 1, NULL, 'q' },   { "cert", 1, NULL, 'C' },
		{ "key", 1, NULL, 'K' },        { "upstream-a", 1, NULL, 'a' }, { "upstream-b", 1, NULL, 'b' },
		{ "rate", 1, NULL, 'r' },       { "timeout-ms", 1, NULL, 't' }, { "cores", 1, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *end;
		unsigned long long v = strtoull(optarg ? optarg : "", &end, 10);
		bool num = optarg && *optarg && !*end && *optarg != '-';
		switch (c) {
		case 'p': case 'q': if (!num || v > 65535) return -1;
			*(c == 'p' ? &opt.port : &opt.tls_port) = (uint16_t)v; break;
		case 'C': opt.cert = optarg; break;
		case 'K': opt.key = optarg; break;
		case 'a': case 'b': opt.upstream[c - 'a'] = optarg; break;
		case 'r': if (!num || !v || v > 1000000) return -1; opt.rate = (double)v; break;
		case 't': if (!num || !v) return -1; opt.timeout_ms = v; break;
		case 'c': if (!num || v > RUNTIME_MAX_CORES) return -1; opt.cores = (unsigned)v; break;
		default: return -1;
		}
	}
	bool tls_ok = !opt.cert == !opt.key && (opt.cert || !opt.tls_port); /* port 0: any */
	return optind == argc && opt.upstream[0] && opt.upstream[1] && tls_ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct runtime_tls *tls = NULL;
	struct runtime_config cfg;
	struct runtime *rt = NULL;
	int rc;

	if (parse_args(argc, argv) < 0) {
		fprintf(stderr, "usage: %s --port P [--tls-port Q --cert C --key K] --upstream-a URL "
		        "--upstream-b URL [--rate N] [--timeout-ms T] [--cores N]\n", argv[0]);
		return 2;
	}
	runtime_config_init(&cfg);
	cfg.cores = opt.cores;
	if ((rc = runtime_create(&rt, &cfg)) < 0 || (rc = make_blocks(rt)) < 0 ||
	    (opt.cert && ((rc = runtime_tls_create(&tls, NULL)) < 0 || /* a server's defaults */
	                  (rc = runtime_tls_add_cert(tls, opt.cert, opt.key, 0)) < 0 ||
	                  (rc = start(rt, opt.tls_port, tls, "https", &gw.srv[1])) < 0)) ||
	    (rc = start(rt, opt.port, NULL, "http", &gw.srv[0])) < 0 ||
	    (rc = runtime_drain_on_signals(rt, GRACE_NS)) < 0) {
		fprintf(stderr, "gateway: %s\n", strerror(-rc)); /* an upstream URL: "Invalid argument" */
		return 1;
	}
	printf("gateway: listening on port %u\n", runtime_http_server_port(gw.srv[0]));
	if (gw.srv[1])
		printf("gateway: TLS on port %u\n", runtime_http_server_port(gw.srv[1]));
	fflush(stdout); /* before the log lines, which go out by write(2) */
	rc = runtime_run(rt);
	for (int i = 0; i < 2; i++) {
		runtime_http_server_destroy(gw.srv[i]);
		runtime_http_proxy_destroy(gw.proxy[i]);
	}
	runtime_metrics_destroy(gw.metrics);
	runtime_ratelimit_keyed_destroy(gw.limiter);
	runtime_destroy(rt);
	runtime_tls_destroy(tls);
	return rc < 0;
}
