/* SPDX-License-Identifier: MIT */
/*
 * check_http_proxy.c - runtime_http_proxy_handler in one process: a
 * client (the library's, or raw bytes on a socket for what the client
 * refuses to send), the proxy (the library's server with the proxy as its
 * handler) and an upstream that tells what reached it - the library's
 * server, or a scripted one for answers the server never writes. Over
 * HTTP/1.1 and h2c in front, HTTP/1.1 and h2c behind.
 */
#define _GNU_SOURCE
#include "testutil.h"

#include <runtime_http.h>
#include <string.h>
#include <unistd.h>

#define SEC (1000 * MS)

static char pattern(size_t i)
{
	return (char)('a' + i % 26);
}

static bool is_pattern(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern(i))
			return false;
	return true;
}

static bool path_is(struct runtime_http_request *req, const char *p)
{
	struct runtime_http_slice s = runtime_http_path(req);
	return s.len == strlen(p) && !memcmp(s.p, p, s.len);
}

/* -------------------------------------------------------------- upstream */

/* What reached the upstream, as text: "T target", "L body length as
 * announced (-1: chunked)", "B bytes read, pattern or not", then "H
 * name: value" for each field. */
static int inspect(struct runtime_http_request *req, struct runtime_http_response *res)
{
	struct runtime_http_slice t = runtime_http_target(req), m = runtime_http_method(req), f, v;
	size_t cap = 64 << 10, n = 0, got = 0;
	char *out = malloc(cap), buf[16384];
	bool pat = true;
	ssize_t r;

	while ((r = runtime_http_body_read(req, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < r; i++)
			pat &= buf[i] == pattern(got + (size_t)i);
		got += (size_t)r;
	}
	if (r < 0) {
		free(out);
		return (int)r;
	}
	n += (size_t)snprintf(out + n, cap - n, "M %.*s\nT %.*s\nL %lld\nB %zu %s\n", (int)m.len, m.p,
	                      (int)t.len, t.p, (long long)runtime_http_body_length(req), got,
	                      pat ? "pattern" : "other");
	for (unsigned i = 0; runtime_http_header_at(req, i, &f, &v) == 0; i++)
		n += (size_t)snprintf(out + n, cap - n, "H %.*s: %.*s\n", (int)f.len, f.p, (int)v.len,
		                      v.p);
	int rc = runtime_http_respond(res, 200, "text/plain", out, n);
	free(out);
	return rc;
}

/* n pattern bytes, chunked or with a length. */
static int send_pattern(struct runtime_http_response *res, uint64_t n, bool chunked)
{
	char buf[1000];
	int rc = runtime_http_set_header(res, "Set-Cookie", "a=1");

	rc = rc ? rc : runtime_http_set_header(res, "Set-Cookie", "b=2");
	rc = rc ? rc : runtime_http_start(res, 200, "application/x-test",
	                                  chunked ? RUNTIME_HTTP_CHUNKED : (int64_t)n);
	for (uint64_t off = 0; rc == 0 && off < n; off += sizeof(buf)) {
		size_t k = n - off < sizeof(buf) ? (size_t)(n - off) : sizeof(buf);
		for (size_t i = 0; i < k; i++)
			buf[i] = pattern(off + i);
		rc = runtime_http_write(res, buf, k);
	}
	return rc == 0 ? runtime_http_end(res) : rc;
}

static int slow_rc = 1; /* /slow's sleep: 1 before, 2 during, then its result */

/* /upgrade: switch to "echo" (with a field of ours), then every byte
 * back - the early ones first - until the client closes. */
static int upgraded_echo(struct runtime_http_request *req, struct runtime_http_response *res)
{
	struct runtime_http_upgraded up;
	char buf[4096];
	size_t done;
	ssize_t n;

	(void)req;
	runtime_http_set_header(res, "X-Upgraded", "yes");
	if (runtime_http_upgrade(res, "echo", &up) < 0)
		return runtime_http_respond(res, 426, NULL, NULL, 0);
	if (up.early.len && runtime_conn_write(up.conn, up.early.p, up.early.len, &done) < 0)
		return 0;
	while ((n = runtime_conn_read(up.conn, buf, sizeof(buf))) > 0)
		if (runtime_conn_write(up.conn, buf, (size_t)n, &done) < 0)
			break;
	return 0;
}

static uint64_t query_num(struct runtime_http_request *req, const char *key)
{
	struct runtime_http_slice v;

	if (runtime_http_query_param(runtime_http_query(req), key, &v) != 1)
		return 0;
	return strtoull(v.p, NULL, 10);
}

static int upstream_route(struct runtime_http_request *req, struct runtime_http_response *res,
                          void *arg)
{
	(void)arg;
	if (path_is(req, "/big") || path_is(req, "/chunked"))
		return send_pattern(res, query_num(req, "n"), path_is(req, "/chunked"));
	if (path_is(req, "/slow")) {
		slow_rc = 2; /* begun: the proxy's handler is waiting on it */
		slow_rc = runtime_sleep(query_num(req, "ms") * MS);
		return runtime_http_respond(res, 200, "text/plain", "late", 4);
	}
	if (path_is(req, "/304"))
		return runtime_http_respond(res, 304, NULL, NULL, 0);
	if (path_is(req, "/upgrade"))
		return upgraded_echo(req, res);
	return inspect(req, res);
}

/* ------------------------------------------------------------ the setup */

struct setup {
	struct runtime_http_server *upstream, *front;
	struct runtime_http_client *client;   /* the proxy's */
	struct runtime_http_proxy *proxy;
	uint16_t upstream_port, front_port;
	char upstream_url[64];
};

static struct runtime_http_server *serve(runtime_http_handler *h, void *arg)
{
	struct runtime_http_server_config cfg;
	struct runtime_http_server *srv;

	runtime_http_server_config_init(&cfg);
	cfg.serve.host = "127.0.0.1";
	cfg.handler = h;
	cfg.arg = arg;
	cfg.idle_timeout_ns = 5 * SEC;
	cfg.limits.body_max = 64 << 20;
	ck_assert_int_eq(runtime_http_serve(runtime_current(), &cfg, &srv), 0);
	return srv;
}

/* The upstream on a port of its own (port 0: the library's server), the
 * proxy in front with cfg's settings (client, upstream set here). */
static void setup_start(struct setup *s, uint16_t port, struct runtime_http_proxy_config *cfg,
                        bool h2c_behind)
{
	struct runtime_http_client_config cc;

	if (!port) {
		s->upstream = serve(upstream_route, NULL);
		port = runtime_http_server_port(s->upstream);
	}
	s->upstream_port = port;
	snprintf(s->upstream_url, sizeof(s->upstream_url), "http://127.0.0.1:%u", port);
	runtime_http_client_config_init(&cc);
	cc.h2c = h2c_behind;
	cc.limits.body_max = UINT64_MAX;
	ck_assert_int_eq(runtime_http_client_create(&s->client, &cc), 0);
	cfg->client = s->client;
	cfg->upstream = s->upstream_url;
	cfg->log_fd = -1;
	ck_assert_int_eq(runtime_http_proxy_create(&s->proxy, cfg), 0);
	s->front = serve(runtime_http_proxy_handler, s->proxy);
	s->front_port = runtime_http_server_port(s->front);
}

/* Stop accepting; the run ends once the connections are closed. */
static void setup_stop(struct setup *s)
{
	runtime_http_client_destroy(s->client);
	runtime_http_server_stop(s->front);
	if (s->upstream)
		runtime_http_server_stop(s->upstream);
}

/* The setups of a run, freed after it (a server is destroyed after the
 * run). */
static struct setup *setups[8];
static unsigned nsetups;

static struct setup *setup_new(void)
{
	ck_assert_uint_lt(nsetups, 8);
	return setups[nsetups++] = calloc(1, sizeof(struct setup));
}

static void run(void (*fn)(void *), void *arg)
{
	struct runtime_config cfg;

	runtime_config_init(&cfg);
	cfg.cores = 1;
	ck_assert_int_eq(run_fiber(&cfg, fn, arg), 0);
	for (unsigned i = 0; i < nsetups; i++) {
		runtime_http_proxy_destroy(setups[i]->proxy);
		runtime_http_server_destroy(setups[i]->front);
		runtime_http_server_destroy(setups[i]->upstream);
		free(setups[i]);
	}
	nsetups = 0;
}

/* ------------------------------------------------------- the test client */

/* raw (a whole request, "Connection: close" in it) sent to port, the
 * answer read to the close into out (cap bytes, NUL-terminated). */
static size_t raw_exchange(uint16_t port, const char *raw, char *out, size_t cap)
{
	int fd = runtime_tcp_connect("127.0.0.1", port);
	size_t got = 0;
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(runtime_send_all(fd, raw, strlen(raw), NULL), 0);
	while (got + 1 < cap && (n = runtime_recv(fd, out + got, cap - 1 - got, 0)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	runtime_close(fd);
	return got;
}

/* A request through a client to url: the status, the body into *body. */
static int fetch(struct runtime_http_client *cl, const struct runtime_http_client_request *req,
                 char **body, size_t *len, struct runtime_http_result **keep)
{
	struct runtime_http_result *res = NULL;
	int rc = runtime_http_request(cl, req, &res);

	if (rc < 0)
		return rc;
	int status = runtime_http_result_status(res);
	rc = runtime_http_result_read_all(res, body, len, 64 << 20);
	if (keep && rc == 0)
		*keep = res;
	else
		runtime_http_result_close(res);
	return rc < 0 ? rc : status;
}

static struct runtime_http_client *test_client(bool h2c)
{
	struct runtime_http_client_config cc;
	struct runtime_http_client *cl;

	runtime_http_client_config_init(&cc);
	cc.h2c = h2c;
	cc.limits.body_max = UINT64_MAX;
	ck_assert_int_eq(runtime_http_client_create(&cl, &cc), 0);
	return cl;
}

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p += n)
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\r' || !p[n]))
			return true;
	return false;
}

static bool has_field(const char *text, const char *name)
{
	char key[128];

	snprintf(key, sizeof(key), "\nH %s:", name);
	return strcasestr(text, key) != NULL;
}

/* ------------------------------------------------------------ the fields */

/* The head the upstream gets: the path cleaned and its prefix cut, the
 * hop-by-hop fields gone (those named in Connection too, Host among
 * them), the forwarding ones appended to, Cookie joined, the rest as
 * they came; a path outside the prefix is 404 here. */
static void fields_body(void *arg)
{
	struct runtime_http_proxy_config cfg;
	struct setup *s = setup_new();
	static char out[65536];
	char want[128];

	(void)arg;
	runtime_http_proxy_config_init(&cfg);
	cfg.strip_prefix = "/api/a/";
	setup_start(s, 0, &cfg, false);
	raw_exchange(s->front_port,
	             "GET /api/a/../a/x/./y//z?q=1&r HTTP/1.1\r\nHost: front.example\r\n"
	             "Connection: close, X-Secret, Host\r\nX-Secret: s\r\nKeep-Alive: 5\r\n"
	             "TE: trailers\r\nProxy-Authorization: Basic eA==\r\nUpgrade: websocket\r\n"
	             "X-Forwarded-For: 10.0.0.1\r\nCookie: a=1\r\nCookie: b=2\r\nX-Keep: yes\r\n"
	             "Forwarded: for=10.0.0.9\r\n\r\n",
	             out, sizeof(out));
	ck_assert_msg(strstr(out, "HTTP/1.1 200 "), "%s", out);
	ck_assert_msg(has_line(out, "T /x/y/z?q=1&r"), "%s", out);
	ck_assert(has_line(out, "L 0") && has_line(out, "H X-Keep: yes"));
	snprintf(want, sizeof(want), "H Host: 127.0.0.1:%u", s->upstream_port);
	ck_assert_msg(has_line(out, want), "%s", out);
	ck_assert_msg(has_line(out, "H X-Forwarded-For: 10.0.0.1, 127.0.0.1"), "%s", out);
	ck_assert(has_line(out, "H X-Forwarded-Proto: http"));
	ck_assert(has_line(out, "H X-Forwarded-Host: front.example"));
	ck_assert_msg(has_line(out, "H Cookie: a=1; b=2"), "%s", out);
	ck_assert(has_line(out, "H Forwarded: for=10.0.0.9")); /* rfc7239 off: as it came */
	static const char *const gone[] = { "X-Secret", "Keep-Alive", "TE", "Proxy-Authorization",
		                            "Upgrade", "Connection" };
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
		ck_assert_msg(!has_field(out, gone[i]), "%s in %s", gone[i], out);
	static const char *const outside[] = { "/api/ab", "/api/", "/api/a/../b", "/x" };
	for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++) {
		char raw[256];
		snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
		         outside[i]);
		raw_exchange(s->front_port, raw, out, sizeof(out));
		ck_assert_msg(strstr(out, "HTTP/1.1 404 "), "%s: %s", outside[i], out);
	}
	raw_exchange(s->front_port, "GET /api/a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
	             out, sizeof(out));
	ck_assert_msg(has_line(out, "T /"), "%s", out);
	setup_stop(s);
}

START_TEST(test_proxy_fields)
{
	run(fields_body, NULL);
}
END_TEST

/* The forwarding policies: REPLACE trusts nothing that came, PASS adds
 * nothing, rfc7239 adds Forwarded. */
static void forwarding_body(void *arg)
{
	static const char raw[] =
		"GET /f HTTP/1.1\r\nHost: front.example:8080\r\nConnection: close\r\n"
		"X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Proto: https\r\n"
		"Forwarded: for=10.0.0.1\r\n\r\n";
	static char out[65536];

	(void)arg;
	for (int policy = RUNTIME_HTTP_FORWARD_APPEND; policy <= RUNTIME_HTTP_FORWARD_PASS; policy++) {
		struct runtime_http_proxy_config cfg;
		struct setup *s = setup_new();
		runtime_http_proxy_config_init(&cfg);
		cfg.forwarded = policy;
		cfg.rfc7239 = 1;
		setup_start(s, 0, &cfg, false);
		raw_exchange(s->front_port, raw, out, sizeof(out));
		ck_assert_msg(strstr(out, "HTTP/1.1 200 "), "%s", out);
		if (policy == RUNTIME_HTTP_FORWARD_APPEND) {
			ck_assert(has_line(out, "H X-Forwarded-For: 10.0.0.1, 127.0.0.1"));
			ck_assert(has_line(out, "H X-Forwarded-Proto: https"));
			ck_assert_msg(has_line(out, "H Forwarded: for=10.0.0.1, for=127.0.0.1;proto=http;"
			                            "host=\"front.example:8080\""), "%s", out);
		} else if (policy == RUNTIME_HTTP_FORWARD_REPLACE) {
			ck_assert(has_line(out, "H X-Forwarded-For: 127.0.0.1"));
			ck_assert(has_line(out, "H X-Forwarded-Proto: http"));
			ck_assert(has_line(out, "H X-Forwarded-Host: front.example:8080"));
			ck_assert_msg(has_line(out, "H Forwarded: for=127.0.0.1;proto=http;"
			                            "host=\"front.example:8080\""), "%s", out);
		} else {
			ck_assert(has_line(out, "H X-Forwarded-For: 10.0.0.1"));
			ck_assert(has_line(out, "H X-Forwarded-Proto: https"));
			ck_assert(has_line(out, "H Forwarded: for=10.0.0.1"));
			ck_assert(!has_field(out, "X-Forwarded-Host"));
		}
		setup_stop(s);
	}
}

START_TEST(test_proxy_forwarding_policies)
{
	run(forwarding_body, NULL);
}
END_TEST

/* ------------------------------------------------------------ the bodies */

struct source {
	size_t total, sent;
};

static ssize_t produce(void *arg, void *buf, size_t len)
{
	struct source *s = arg;
	size_t n = s->total - s->sent;

	n = n < len ? n : len;
	for (size_t i = 0; i < n; i++)
		((char *)buf)[i] = pattern(s->sent + i);
	s->sent += n;
	return (ssize_t)n;
}

/* A body up: a fixed one small and large, streamed chunked and sized:
 * the upstream sees the length the client sent (L) and every byte. */
static void upload(struct runtime_http_client *cl, const char *url, size_t n, int how)
{
	static char fixed[1 << 20];
	struct source src = { .total = n };
	struct runtime_http_client_request req = { .method = "PUT", .url = url };
	char *body, want[64];
	size_t len;

	for (size_t i = 0; i < sizeof(fixed); i++)
		fixed[i] = pattern(i);
	if (how == 0) { /* fixed */
		ck_assert_uint_le(n, sizeof(fixed));
		req.body = fixed;
		req.body_len = n;
	} else { /* streamed: 1 chunked, 2 sized */
		req.body_read = produce;
		req.body_arg = &src;
		req.body_read_len = how == 2 ? n : 0;
	}
	ck_assert_int_eq(fetch(cl, &req, &body, &len, NULL), 200);
	snprintf(want, sizeof(want), "L %lld", how == 1 ? -1ll : (long long)n);
	ck_assert_msg(has_line(body, want), "%s: %s", want, body);
	snprintf(want, sizeof(want), "B %zu pattern", n);
	ck_assert_msg(has_line(body, want), "%s: %s", want, body);
	free(body);
}

/* A body down, with its length or chunked as the upstream sent it, and
 * its fields (Set-Cookie twice). */
static void download(struct runtime_http_client *cl, const char *base, size_t n, bool chunked)
{
	char url[128], *body;
	struct runtime_http_client_request req = { .url = url };
	struct runtime_http_result *res = NULL;
	size_t len;

	snprintf(url, sizeof(url), "%s/%s?n=%zu", base, chunked ? "chunked" : "big", n);
	ck_assert_int_eq(fetch(cl, &req, &body, &len, &res), 200);
	ck_assert_uint_eq(len, n);
	ck_assert(is_pattern(body, len));
	ck_assert_int_eq(runtime_http_result_length(res), chunked ? -1 : (int64_t)n);
	struct runtime_http_slice f, v;
	unsigned cookies = 0;
	for (unsigned i = 0; runtime_http_result_header_at(res, i, &f, &v) == 0; i++)
		cookies += f.len == 10 && !strncasecmp(f.p, "set-cookie", 10);
	ck_assert_uint_eq(cookies, 2);
	ck_assert(!memcmp(runtime_http_result_header(res, "content-type")->p, "application/x-test", 18));
	runtime_http_result_close(res);
	free(body);
}

struct bodies_case {
	bool h2c_front, h2c_behind;
};

static void bodies_body(void *arg)
{
	const struct bodies_case *c = arg;
	struct runtime_http_proxy_config cfg;
	struct setup *s = setup_new();
	struct runtime_http_client *cl = test_client(c->h2c_front);
	char base[64];

	runtime_http_proxy_config_init(&cfg);
	setup_start(s, 0, &cfg, c->h2c_behind);
	snprintf(base, sizeof(base), "http://127.0.0.1:%u", s->front_port);
	static const size_t sizes[] = { 0, 100, 65536, 65537, 1 << 20, 5 << 20 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		if (sizes[i] <= 1 << 20)
			upload(cl, base, sizes[i], 0);
		if (sizes[i]) { /* an empty streamed body is no body */
			upload(cl, base, sizes[i], 1);
			upload(cl, base, sizes[i], 2);
		}
		download(cl, base, sizes[i], false);
		download(cl, base, sizes[i], true);
	}
	runtime_http_client_destroy(cl);
	setup_stop(s);
}

START_TEST(test_proxy_bodies)
{
	static const struct bodies_case cases[] = {
		{ false, false }, { true, false }, { false, true }, { true, true }
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run(bodies_body, (void *)&cases[i]);
}
END_TEST

/* ----------------------------------------------------- scripted upstream */

/* Answers every request's head with answer (NULL: nothing, ever), reading
 * no body; closes after it if close_after. */
struct script {
	const char *answer;
	bool close_after;
	int lfd;
	uint16_t port;
	struct runtime_group *group;
};

struct script_conn {
	struct script *s;
	int fd;
};

static int script_serve(void *arg)
{
	struct script_conn *c = arg;
	char buf[8192];
	size_t got = 0;
	ssize_t n;

	while ((n = runtime_recv(c->fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0) {
		got += (size_t)n;
		buf[got] = '\0';
		if (!strstr(buf, "\r\n\r\n"))
			continue;
		if (!c->s->answer) {
			runtime_sleep(UINT64_MAX); /* until cancelled */
			break;
		}
		if (runtime_send_all(c->fd, c->s->answer, strlen(c->s->answer), NULL) < 0 ||
		    c->s->close_after)
			break;
		got = 0;
	}
	runtime_close(c->fd);
	free(c);
	return 0;
}

static int script_accept(void *arg)
{
	struct script *s = arg;
	int fd;

	while ((fd = runtime_accept(s->lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		struct script_conn *c = malloc(sizeof(*c));
		*c = (struct script_conn){ s, fd };
		if (runtime_group_spawn(s->group, script_serve, c) < 0) {
			runtime_close(fd);
			free(c);
		}
	}
	return 0;
}

static void script_start(struct script *s, const char *answer, bool close_after)
{
	*s = (struct script){ .answer = answer, .close_after = close_after };
	s->lfd = runtime_tcp_listen("127.0.0.1", 0, 16, 0);
	ck_assert_int_ge(s->lfd, 0);
	s->port = bound_port(s->lfd);
	ck_assert_int_eq(runtime_group_create(&s->group, 0), 0);
	ck_assert_int_eq(runtime_group_spawn(s->group, script_accept, s), 0);
}

static void script_stop(struct script *s)
{
	runtime_close(s->lfd);
	runtime_group_cancel(s->group);
	ck_assert_int_eq(runtime_group_wait(s->group, -1, NULL), 0);
	runtime_group_destroy(s->group);
}

/* GET path through the proxy at port: its status (the body dropped). */
static int get_status(struct runtime_http_client *cl, uint16_t port, const char *path)
{
	char url[128], *body;
	struct runtime_http_client_request req = { .url = url };
	size_t len;

	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, path);
	int rc = fetch(cl, &req, &body, &len, NULL);
	if (rc >= 0)
		free(body);
	return rc;
}

/* ------------------------------------------------------------- failures */

/* 502 for an upstream that refuses, breaks the rules or closes without
 * an answer; 504 for one late past head_timeout_ns; a body cut short
 * after the head reaches the client cut short. */
static void failures_body(void *arg)
{
	struct runtime_http_client *cl = test_client(false);
	struct runtime_http_proxy_config cfg;
	struct script sc;
	struct setup *s;

	(void)arg;
	runtime_http_proxy_config_init(&cfg);
	cfg.head_timeout_ns = 200 * MS;
	int lfd = runtime_tcp_listen("127.0.0.1", 0, 1, 0); /* a port nobody serves */
	uint16_t dead = bound_port(lfd);
	runtime_close(lfd);
	setup_start(s = setup_new(), dead, &cfg, false);
	ck_assert_int_eq(get_status(cl, s->front_port, "/"), 502);
	setup_stop(s);
	static const char *const broken[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
		"garbage\r\n\r\n",
		"", /* closes, answering nothing */
	};
	for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
		script_start(&sc, broken[i], true);
		setup_start(s = setup_new(), sc.port, &cfg, false);
		ck_assert_int_eq(get_status(cl, s->front_port, "/"), 502);
		setup_stop(s);
		script_stop(&sc);
	}
	script_start(&sc, NULL, false); /* never answers */
	setup_start(s = setup_new(), sc.port, &cfg, false);
	uint64_t t0 = runtime_now();
	ck_assert_int_eq(get_status(cl, s->front_port, "/"), 504);
	ck_assert_uint_lt(runtime_now() - t0, 5 * SEC);
	setup_stop(s);
	script_stop(&sc);
	script_start(&sc, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", true);
	setup_start(s = setup_new(), sc.port, &cfg, false);
	ck_assert_int_eq(get_status(cl, s->front_port, "/"), -EPIPE);
	setup_stop(s);
	script_stop(&sc);
	runtime_http_client_destroy(cl);
}

START_TEST(test_proxy_upstream_failures)
{
	run(failures_body, NULL);
}
END_TEST

/* The answer's fields back: the hop-by-hop ones (and what its Connection
 * lists), Date, Server and hide_headers dropped, the rest - repeated
 * ones too - kept; the status and the length as they came. */
static void answer_fields_body(void *arg)
{
	static const char answer[] =
		"HTTP/1.1 203 Non-Authoritative\r\nContent-Length: 2\r\nConnection: X-Hop\r\n"
		"X-Hop: 1\r\nKeep-Alive: timeout=5\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
		"X-Hidden: h\r\nServer: upstream\r\nProxy-Authenticate: Basic\r\n"
		"Content-Type: text/x-mine\r\nX-Kept: k\r\n\r\nok";
	static const char *const hide[] = { "x-hidden", NULL };
	struct runtime_http_proxy_config cfg;
	struct script sc;
	struct setup *s = setup_new();
	static char out[8192];

	(void)arg;
	runtime_http_proxy_config_init(&cfg);
	cfg.hide_headers = hide;
	script_start(&sc, answer, false);
	setup_start(s, sc.port, &cfg, false);
	raw_exchange(s->front_port, "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", out,
	             sizeof(out));
	ck_assert_msg(strstr(out, "HTTP/1.1 203 "), "%s", out);
	ck_assert(strstr(out, "\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"));
	ck_assert(strstr(out, "\r\nX-Kept: k\r\n") && strstr(out, "\r\nContent-Length: 2\r\n"));
	ck_assert(strstr(out, "\r\nContent-Type: text/x-mine\r\n") && strstr(out, "\r\n\r\nok"));
	static const char *const gone[] = { "X-Hop:", "Keep-Alive:", "X-Hidden:", "upstream",
		                            "Proxy-Authenticate:" };
	for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
		ck_assert_msg(!strcasestr(out, gone[i]), "%s in %s", gone[i], out);
	setup_stop(s);
	script_stop(&sc);
}

START_TEST(test_proxy_answer_fields)
{
	run(answer_fields_body, NULL);
}
END_TEST

/* ---------------------------------------------------------------- hooks */

static int rewrite_request(struct runtime_http_request *req, struct runtime_http_response *res,
                           struct runtime_http_proxy_out *out, void *arg)
{
	const char *base = arg;
	char url[128];

	if (runtime_http_header(req, "x-deny"))
		return runtime_http_respond(res, 403, NULL, NULL, 0) ? -EIO : 1;
	if (!strstr(runtime_http_proxy_url(out), "/hooked"))
		return 0;
	snprintf(url, sizeof(url), "%s/elsewhere?x=1", base);
	ck_assert_int_eq(runtime_http_proxy_set_url(out, url), 0);
	ck_assert_int_eq(runtime_http_proxy_remove_header(out, "x-drop"), 0);
	ck_assert_int_eq(runtime_http_proxy_add_header(out, "X-Added: yes"), 0);
	ck_assert_int_eq(runtime_http_proxy_add_header(out, "no colon"), -EINVAL);
	return 0;
}

static int rewrite_response(struct runtime_http_request *req, struct runtime_http_result *up,
                            struct runtime_http_response *res, void *arg)
{
	(void)req, (void)arg;
	if (runtime_http_result_status(up) != 200)
		return -EIO; /* a 502 */
	return runtime_http_set_header(res, "X-Seen-By", "proxy");
}

static void hooks_body(void *arg)
{
	struct runtime_http_proxy_config cfg;
	struct setup *s = setup_new();
	static char out[65536];

	(void)arg;
	runtime_http_proxy_config_init(&cfg);
	cfg.rewrite_request = rewrite_request;
	cfg.rewrite_response = rewrite_response;
	cfg.hook_arg = s->upstream_url; /* filled by setup_start, before any request */
	setup_start(s, 0, &cfg, false);
	raw_exchange(s->front_port,
	             "GET /hooked HTTP/1.1\r\nHost: h\r\nX-Drop: 1\r\nx-drop: 2\r\n"
	             "Connection: close\r\n\r\n", out, sizeof(out));
	ck_assert_msg(strstr(out, "HTTP/1.1 200 ") && strstr(out, "\r\nX-Seen-By: proxy\r\n"), "%s", out);
	ck_assert_msg(has_line(out, "T /elsewhere?x=1") && has_line(out, "H X-Added: yes"), "%s", out);
	ck_assert(!has_field(out, "X-Drop"));
	raw_exchange(s->front_port,
	             "GET /hooked HTTP/1.1\r\nHost: h\r\nX-Deny: 1\r\nConnection: close\r\n\r\n", out,
	             sizeof(out));
	ck_assert_msg(strstr(out, "HTTP/1.1 403 "), "%s", out);
	raw_exchange(s->front_port, "GET /304 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", out,
	             sizeof(out));
	ck_assert_msg(strstr(out, "HTTP/1.1 502 "), "%s", out); /* rewrite_response's -EIO */
	setup_stop(s);
}

START_TEST(test_proxy_hooks)
{
	run(hooks_body, NULL);
}
END_TEST

/* --------------------------------------------------------- the client side */

/* A client that resets mid-upload: the upstream's request is abandoned,
 * the proxy serves on, no fd is left behind. An upstream that answers
 * before reading the body (a 413): its answer reaches the client. */
static void client_gone_body(void *arg)
{
	struct runtime_http_proxy_config cfg;
	struct setup *s = setup_new();
	struct runtime_http_client *cl = test_client(false);
	static char chunk[65536];
	struct script sc;

	(void)arg;
	runtime_http_proxy_config_init(&cfg);
	setup_start(s, 0, &cfg, false);
	ck_assert_int_eq(get_status(cl, s->front_port, "/warm"), 200);
	int fds = count_fds();
	for (int i = 0; i < 3; i++) {
		int fd = runtime_tcp_connect("127.0.0.1", s->front_port);
		static const char head[] = "PUT /up HTTP/1.1\r\nHost: h\r\nContent-Length: 10000000\r\n\r\n";
		ck_assert_int_ge(fd, 0);
		ck_assert_int_ge(runtime_send_all(fd, head, sizeof(head) - 1, NULL), 0);
		for (int k = 0; k < 4; k++)
			ck_assert_int_ge(runtime_send_all(fd, chunk, sizeof(chunk), NULL), 0);
		struct linger hard = { 1, 0 };
		setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
		runtime_close(fd); /* an RST */
	}
	ck_assert_int_eq(get_status(cl, s->front_port, "/after"), 200);
	for (int i = 0; i < 2000 && count_fds() > fds; i++)
		runtime_sleep(MS);
	ck_assert_int_le(count_fds(), fds);
	script_start(&sc, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n"
	                  "Connection: close\r\n\r\n", true);
	struct setup *s2 = setup_new();
	setup_start(s2, sc.port, &cfg, false);
	char url[64], *body;
	size_t len;
	struct source src = { .total = 8 << 20 };
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/up", s2->front_port);
	struct runtime_http_client_request req = { .method = "PUT", .url = url, .body_read = produce,
		                                    .body_arg = &src, .body_read_len = 8 << 20 };
	ck_assert_int_eq(fetch(cl, &req, &body, &len, NULL), 413);
	free(body);
	runtime_http_client_destroy(cl);
	setup_stop(s);
	setup_stop(s2);
	script_stop(&sc);
}

START_TEST(test_proxy_client_resets_mid_upload)
{
	run(client_gone_body, NULL);
}
END_TEST

/* A client gone while the upstream works: the proxy's handler is
 * cancelled, its upstream connection closed, and so the upstream's
 * handler is cancelled too - well before its 3 s. */
static void gone_body(void *arg)
{
	struct runtime_http_proxy_config cfg;
	struct setup *s = setup_new();

	(void)arg;
	runtime_http_proxy_config_init(&cfg);
	setup_start(s, 0, &cfg, false);
	slow_rc = 1;
	int fd = runtime_tcp_connect("127.0.0.1", s->front_port);
	static const char head[] = "GET /slow?ms=3000 HTTP/1.1\r\nHost: h\r\n\r\n";
	ck_assert_int_ge(runtime_send_all(fd, head, sizeof(head) - 1, NULL), 0);
	for (int i = 0; i < 20000 && slow_rc == 1; i++) /* a close before would be a half-close */
		runtime_sleep(MS);
	ck_assert_int_eq(slow_rc, 2);
	uint64_t t0 = runtime_now();
	runtime_close(fd);
	for (int i = 0; i < 2000 && slow_rc == 2; i++)
		runtime_sleep(MS);
	ck_assert_int_eq(slow_rc, -ECANCELED);
	ck_assert_uint_lt(runtime_now() - t0, 2 * SEC);
	setup_stop(s);
}

START_TEST(test_proxy_gone_client_cancels_upstream)
{
	run(gone_body, NULL);
}
END_TEST

/* An Upgrade through the proxy: the upstream's 101 (and its fields)
 * reaches the client, then bytes go both ways - the client's early ones
 * first - until the client closes. A request that does not ask to
 * upgrade gets the upstream's refusal as it is. */
static void upgrade_body(void *arg)
{
	struct runtime_http_proxy_config cfg;
	struct setup *s = setup_new();
	char buf[4096] = "";
	size_t got = 0;
	ssize_t n;

	(void)arg;
	runtime_http_proxy_config_init(&cfg);
	setup_start(s, 0, &cfg, false);
	int fd = runtime_tcp_connect("127.0.0.1", s->front_port);
	static const char head[] = "GET /upgrade HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
	                           "Upgrade: echo\r\n\r\nearly";
	ck_assert_int_ge(runtime_send_all(fd, head, sizeof(head) - 1, NULL), 0);
	while (!strstr(buf, "early") && (n = runtime_recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0) {
		got += (size_t)n;
		buf[got] = '\0';
	}
	ck_assert_msg(strstr(buf, "HTTP/1.1 101 ") && strstr(buf, "\r\nUpgrade: echo\r\n") &&
	              strstr(buf, "\r\nX-Upgraded: yes\r\n") && strstr(buf, "\r\n\r\nearly"), "%s", buf);
	ck_assert_int_ge(runtime_send_all(fd, "ping", 4, NULL), 0);
	got = 0;
	while (got < 4 && (n = runtime_recv(fd, buf + got, 4 - got, 0)) > 0)
		got += (size_t)n;
	ck_assert(got == 4 && !memcmp(buf, "ping", 4));
	runtime_close(fd);
	static char out[4096];
	raw_exchange(s->front_port, "GET /upgrade HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
	             out, sizeof(out));
	ck_assert_msg(strstr(out, "HTTP/1.1 426 "), "%s", out);
	setup_stop(s);
}

START_TEST(test_proxy_upgrade_tunnel)
{
	run(upgrade_body, NULL);
}
END_TEST

static Suite *proxy_suite(void)
{
	Suite *s = suite_create("http_proxy");
	TCase *tc = tcase_create("proxy");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_proxy_fields);
	tcase_add_test(tc, test_proxy_forwarding_policies);
	tcase_add_test(tc, test_proxy_bodies);
	tcase_add_test(tc, test_proxy_upstream_failures);
	tcase_add_test(tc, test_proxy_answer_fields);
	tcase_add_test(tc, test_proxy_hooks);
	tcase_add_test(tc, test_proxy_client_resets_mid_upload);
	tcase_add_test(tc, test_proxy_gone_client_cancels_upstream);
	tcase_add_test(tc, test_proxy_upgrade_tunnel);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(proxy_suite)
