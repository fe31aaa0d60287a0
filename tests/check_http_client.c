/* SPDX-License-Identifier: MIT */
/*
 * check_http_client.c - the client of libruntime-http in one process,
 * against two kinds of server on loopback: the library's own server
 * (runtime_http_serve on port 0, routes below), and scripted raw ones - a
 * fiber that answers each request with bytes fixed by the test, to make
 * every malformation the server refuses in requests show up in
 * responses. Keep-alive is shown by the client's counters (connects,
 * reused, retried), leaks by the process's fd count and by the
 * sanitizers of the ASan and TSan builds.
 */
#define _GNU_SOURCE
#include "testutil.h"
#include "tlsutil.h"

#include <runtime_http.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define SEC (1000 * MS)

/* ------------------------------------------------------ the library server */

/* Byte i of the test bodies. */
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

static uint64_t query_num(struct runtime_http_request *req, const char *key, uint64_t dflt)
{
	struct runtime_http_slice v;
	char buf[32];

	if (runtime_http_query_param(runtime_http_query(req), key, &v) != 1 || v.len >= sizeof(buf))
		return dflt;
	memcpy(buf, v.p, v.len);
	buf[v.len] = '\0';
	return strtoull(buf, NULL, 10);
}

static bool path_is(struct runtime_http_request *req, const char *p)
{
	struct runtime_http_slice s = runtime_http_path(req);
	return s.len == strlen(p) && !memcmp(s.p, p, s.len);
}

/* n pattern bytes, chunked (length -1) or with a Content-Length. */
static int send_pattern(struct runtime_http_response *res, uint64_t n, bool chunked)
{
	char buf[1000];
	int rc = runtime_http_start(res, 200, "text/plain", chunked ? RUNTIME_HTTP_CHUNKED : (int64_t)n);

	for (uint64_t off = 0; rc == 0 && off < n; off += sizeof(buf)) {
		size_t k = n - off < sizeof(buf) ? (size_t)(n - off) : sizeof(buf);
		for (size_t i = 0; i < k; i++)
			buf[i] = pattern(off + i);
		rc = runtime_http_write(res, buf, k);
	}
	return rc == 0 ? runtime_http_end(res) : rc;
}

/* /r?n=N: N redirects (302, relative) before "done". */
static int redirects(struct runtime_http_request *req, struct runtime_http_response *res)
{
	uint64_t n = query_num(req, "n", 0), code = query_num(req, "code", 302);
	char loc[64];

	if (n == 0) {
		const char *m = runtime_http_method(req).p;
		char body[64];
		int len = snprintf(body, sizeof(body), "done %.*s %lld", (int)runtime_http_method(req).len,
		                   m, (long long)runtime_http_body_length(req));
		return runtime_http_respond(res, 200, "text/plain", body, (size_t)len);
	}
	snprintf(loc, sizeof(loc), "r?n=%llu&code=%llu", (unsigned long long)n - 1,
	         (unsigned long long)code);
	runtime_http_set_header(res, "Location", loc);
	return runtime_http_respond(res, (int)code, NULL, NULL, 0);
}

/* /echo: the body back, and the method and a field in the head. */
static int echo(struct runtime_http_request *req, struct runtime_http_response *res)
{
	char *body, field[256] = "";
	size_t len;
	const struct runtime_http_slice *ua = runtime_http_header(req, "User-Agent");
	const struct runtime_http_slice *x = runtime_http_header(req, "X-Test");
	bool auth = runtime_http_header(req, "Authorization") != NULL;
	int rc = runtime_http_body_read_all(req, &body, &len, 4 << 20);

	if (rc < 0)
		return rc;
	snprintf(field, sizeof(field), "%.*s|%.*s|%s", ua ? (int)ua->len : 4, ua ? ua->p : "none",
	         x ? (int)x->len : 4, x ? x->p : "none", auth ? "auth" : "-");
	runtime_http_set_header(res, "X-Seen", field);
	snprintf(field, sizeof(field), "%lld", (long long)runtime_http_body_length(req));
	runtime_http_set_header(res, "X-Length", field); /* -1: it came chunked */
	runtime_http_set_header(res, "X-Method", runtime_http_method(req).p[0] == 'P' ? "P" : "other");
	rc = runtime_http_respond(res, 200, "application/octet-stream", body, len);
	free(body);
	return rc;
}

static int route(struct runtime_http_request *req, struct runtime_http_response *res, void *arg)
{
	(void)arg;
	if (path_is(req, "/hello"))
		return runtime_http_respond(res, 200, "text/plain", "hello", 5);
	if (path_is(req, "/chunked"))
		return send_pattern(res, query_num(req, "n", 100), true);
	if (path_is(req, "/big"))
		return send_pattern(res, query_num(req, "n", 100), false);
	if (path_is(req, "/status"))
		return runtime_http_respond(res, (int)query_num(req, "s", 200), NULL, NULL, 0);
	if (path_is(req, "/r") || path_is(req, "/a/b/r"))
		return redirects(req, res);
	if (path_is(req, "/echo"))
		return echo(req, res);
	if (path_is(req, "/delay")) { /* after ms=N, the protocol: "11" or "20" */
		char v[8];
		int n = snprintf(v, sizeof(v), "%d", runtime_http_version(req));
		runtime_sleep(query_num(req, "ms", 0) * MS);
		return runtime_http_respond(res, 200, "text/plain", v, (size_t)n);
	}
	if (path_is(req, "/trickle")) { /* "some", then after ms=N "more" */
		int rc = runtime_http_start(res, 200, "text/plain", 8);
		if (rc == 0)
			rc = runtime_http_write(res, "some", 4);
		runtime_sleep(query_num(req, "ms", 0) * MS);
		return rc < 0 ? rc : runtime_http_write(res, "more", 4) < 0 ? -EPIPE
		                                                          : runtime_http_end(res);
	}
	if (path_is(req, "/upgrade")) { /* to "echo", then every byte back */
		struct runtime_http_upgraded up;
		char buf[256];
		size_t done;
		ssize_t n;
		if (runtime_http_upgrade(res, "echo", &up) < 0)
			return runtime_http_respond(res, 426, NULL, NULL, 0);
		runtime_conn_write(up.conn, "hi", 2, &done); /* early, after the 101 */
		while ((n = runtime_conn_read(up.conn, buf, sizeof(buf))) > 0)
			runtime_conn_write(up.conn, buf, (size_t)n, &done);
		return 0;
	}
	if (path_is(req, "/away")) { /* to another origin: localhost, not 127.0.0.1 */
		char loc[64];
		snprintf(loc, sizeof(loc), "http://localhost:%llu/echo",
		         (unsigned long long)query_num(req, "port", 0));
		runtime_http_set_header(res, "Location", loc);
		return runtime_http_respond(res, 307, NULL, NULL, 0);
	}
	return runtime_http_respond(res, 404, "text/plain", "no", 2);
}

static struct runtime_http_server *lib_srv;
static unsigned lib_h2_max_streams; /* the server's, 0: its default */

/* The library's server on 127.0.0.1, port 0 (tls: HTTPS); its port. */
static uint16_t lib_start(struct runtime_tls *tls)
{
	static struct runtime_tls_serve ts;
	struct runtime_http_server_config cfg;

	runtime_http_server_config_init(&cfg);
	cfg.serve.host = "127.0.0.1";
	cfg.h2_max_streams = lib_h2_max_streams;
	ts = (struct runtime_tls_serve){ .tls = tls };
	if (tls)
		ck_assert_int_eq(runtime_tls_serve(&cfg.serve, &ts), 0);
	cfg.handler = route;
	cfg.idle_timeout_ns = 5 * SEC; /* a leaked client connection shows as a slow test */
	cfg.limits.body_max = 8 << 20;
	ck_assert_int_eq(runtime_http_serve(runtime_current(), &cfg, &lib_srv), 0);
	return runtime_http_server_port(lib_srv);
}

/* Stop accepting: the run ends once the client's connections close. */
static void lib_stop(void)
{
	runtime_http_server_stop(lib_srv);
}

/* After the run. */
static void lib_free(void)
{
	runtime_http_server_destroy(lib_srv);
	lib_srv = NULL;
}

/* ------------------------------------------------------- scripted servers */

/* Answers each request (a head, and a Content-Length body skipped) with
 * the next of answers[] (the last one again past the end): bytes as they
 * are, well-formed or not; NULL closes the connection instead. */
struct script {
	const char *const *answers;
	unsigned nanswers;
	unsigned next;               /* the next answer */
	bool close_after;            /* close each connection after its answer */
	bool stall;                  /* answer nothing, ever */
	bool early;                  /* answer once the head is in; then, if
	                                drain_body, read the body (and go on),
	                                else read nothing more, ever */
	bool drain_body;
	const char *unasked;         /* sent unasked_ns after a connection's
	                                first answer (then closed, if
	                                close_after) */
	uint64_t unasked_ns;
	int lfd;
	uint16_t port;
	unsigned conns;              /* accepted */
	unsigned unasked_sent;       /* connections the unasked bytes went out on */
	unsigned closed;             /* connections closed (the FIN is out) */
	struct runtime_group *group;
};

struct raw_conn {
	struct script *s;
	int fd;
};

/* One request's head, its body skipped unless early; in early mode the
 * answer goes out first (see struct script). 1, or 0 at the end. */
static int read_request(struct script *s, int fd, char *buf, size_t cap)
{
	size_t got = 0;
	char *end;

	while (!(end = memmem(buf, got, "\r\n\r\n", 4))) {
		ssize_t n = runtime_recv(fd, buf + got, cap - got, 0);
		if (n <= 0)
			return 0;
		got += (size_t)n;
	}
	buf[got] = '\0';
	char *cl = strcasestr(buf, "\r\nContent-Length: ");
	size_t body = cl && cl < end ? strtoul(cl + 18, NULL, 10) : 0, have = got - (size_t)(end + 4 - buf);
	if (s->early) {
		const char *a = s->answers[s->next < s->nanswers ? s->next : s->nanswers - 1];
		if (runtime_send_all(fd, a, strlen(a), NULL) < 0)
			return 0;
		if (!s->drain_body)
			runtime_sleep(UINT64_MAX); /* until the group is cancelled */
	}
	while (have < body) {
		ssize_t n = runtime_recv(fd, buf, cap < body - have ? cap : body - have, 0);
		if (n <= 0)
			return 0;
		have += (size_t)n;
	}
	return 1;
}

static int serve_raw(void *arg)
{
	struct raw_conn *rc = arg;
	struct script *s = rc->s;
	char buf[8192];

	while (read_request(s, rc->fd, buf, sizeof(buf) - 1)) {
		const char *a = s->answers[s->next < s->nanswers ? s->next : s->nanswers - 1];
		s->next++;
		if (s->stall)
			runtime_sleep(UINT64_MAX); /* until the group is cancelled */
		if (s->early)
			continue; /* answered already */
		if (!a || runtime_send_all(rc->fd, a, strlen(a), NULL) < 0)
			break; /* NULL: close, answering nothing */
		if (s->unasked) {
			runtime_sleep(s->unasked_ns);
			if (runtime_send_all(rc->fd, s->unasked, strlen(s->unasked), NULL) < 0)
				break;
			s->unasked_sent++;
		}
		if (s->close_after)
			break;
	}
	runtime_close(rc->fd);
	s->closed++;
	free(rc);
	return 0;
}

static int accept_raw(void *arg)
{
	struct script *s = arg;

	for (;;) {
		int fd = runtime_accept(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return 0;
		struct raw_conn *rc = malloc(sizeof(*rc));
		*rc = (struct raw_conn){ s, fd };
		s->conns++;
		if (runtime_group_spawn(s->group, serve_raw, rc) < 0) {
			runtime_close(fd);
			free(rc);
		}
	}
}

static void script_start(struct script *s, const char *const *answers, unsigned n)
{
	s->answers = answers;
	s->nanswers = n;
	s->close_after = s->stall = s->early = s->drain_body = false; /* set after the
	                                      start: the fibers run later */
	s->unasked = NULL;
	s->next = s->conns = s->unasked_sent = s->closed = 0;
	s->lfd = runtime_tcp_listen("127.0.0.1", 0, 16, 0);
	ck_assert_int_ge(s->lfd, 0);
	s->port = bound_port(s->lfd);
	ck_assert_int_eq(runtime_group_create(&s->group, 0), 0);
	ck_assert_int_eq(runtime_group_spawn(s->group, accept_raw, s), 0);
}

/* Until *count (of s's) reaches n: the script's fibers share the core,
 * and their sends and closes are done when it counts them. Then one more
 * sleep: the core's trip to the kernel that waits for it also takes in
 * what the sends and closes made of the client's sockets (the engine
 * learns of bytes or an end at such a trip, not at the send). Bounded at
 * 20 s, far above a loaded machine's wait, only against a hang. */
static void script_wait(const unsigned *count, unsigned n)
{
	for (int i = 0; *count < n && i < 20000; i++)
		runtime_sleep(MS);
	ck_assert_uint_ge(*count, n);
	runtime_sleep(MS);
}

static void script_stop(struct script *s)
{
	runtime_group_cancel(s->group);
	ck_assert_int_eq(runtime_group_wait(s->group, -1, NULL), 0);
	runtime_group_destroy(s->group);
	runtime_close(s->lfd);
}

/* ----------------------------------------------------------------- helpers */

static struct runtime_http_client *client(unsigned max_per_origin)
{
	struct runtime_http_client_config cfg;
	struct runtime_http_client *cl;

	runtime_http_client_config_init(&cfg);
	cfg.max_per_origin = max_per_origin;
	ck_assert_int_eq(runtime_http_client_create(&cl, &cfg), 0);
	return cl;
}

static struct runtime_http_client_stats stats(struct runtime_http_client *cl)
{
	struct runtime_http_client_stats st;
	runtime_http_client_stats(cl, &st);
	return st;
}

static char url_buf[256];

static const char *url(const char *scheme, uint16_t port, const char *rest)
{
	snprintf(url_buf, sizeof(url_buf), "%s://127.0.0.1:%u%s", scheme, port, rest);
	return url_buf;
}

/* GET u: its status, and the body into *body (free it) unless NULL. */
static int get(struct runtime_http_client *cl, const char *u, char **body, size_t *len)
{
	struct runtime_http_result *res = NULL;
	int rc = runtime_http_get(cl, u, &res);
	char *b;
	size_t n;

	if (rc < 0)
		return rc;
	int status = runtime_http_result_status(res);
	rc = runtime_http_result_read_all(res, &b, &n, 16 << 20);
	runtime_http_result_close(res);
	if (rc < 0)
		return rc;
	if (body) {
		*body = b;
		*len = n;
	} else {
		free(b);
	}
	return status;
}

static void run(void (*fn)(void *), unsigned cores)
{
	struct runtime_config cfg;

	runtime_config_init(&cfg);
	cfg.cores = cores;
	ck_assert_int_eq(run_fiber(&cfg, fn, NULL), 0);
	lib_free();
}

/* ------------------------------------------------------------- keep-alive */

static void keepalive_body(void *arg)
{
	uint16_t port = lib_start(NULL);
	struct runtime_http_client *cl = client(8);
	char *body;
	size_t len;

	(void)arg;
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(get(cl, url("http", port, "/hello"), &body, &len), 200);
		ck_assert_uint_eq(len, 5);
		ck_assert_str_eq(body, "hello");
		free(body);
	}
	struct runtime_http_client_stats st = stats(cl);
	ck_assert_uint_eq(st.connects, 1);
	ck_assert_uint_eq(st.reused, 19);
	ck_assert_uint_eq(st.requests, 20);
	ck_assert_uint_eq(st.retried, 0);
	/* Idle long enough to be checked before use: still good, kept. */
	runtime_sleep(150 * MS);
	ck_assert_int_eq(get(cl, url("http", port, "/hello"), NULL, NULL), 200);
	ck_assert_uint_eq(stats(cl).connects, 1);
	struct runtime_http_server_stats ss;
	runtime_http_server_stats(lib_srv, &ss);
	ck_assert_uint_eq(ss.conns.accepted, 1);
	runtime_http_client_destroy(cl);
	/* No pooling: a connection per request, each told to close. */
	cl = client(0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(get(cl, url("http", port, "/hello"), NULL, NULL), 200);
	ck_assert_uint_eq(stats(cl).connects, 3);
	runtime_http_client_destroy(cl);
	lib_stop();
}

START_TEST(test_client_keepalive_reuse)
{
	run(keepalive_body, 1);
}
END_TEST

/* ----------------------------------------------------------------- framing */

static void framing_body(void *arg)
{
	uint16_t port = lib_start(NULL);
	struct runtime_http_client *cl = client(8);
	static const size_t sizes[] = { 0, 1, 4095, 4096, 70000, 1000001 };
	struct runtime_http_result *res = NULL;
	char path[64], *body;
	size_t len;

	(void)arg;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int chunked = 0; chunked < 2; chunked++) {
			snprintf(path, sizeof(path), "/%s?n=%zu", chunked ? "chunked" : "big", sizes[i]);
			ck_assert_int_eq(runtime_http_get(cl, url("http", port, path), &res), 0);
			ck_assert_int_eq(runtime_http_result_length(res),
			                 chunked ? -1 : (int64_t)sizes[i]);
			ck_assert_int_eq(runtime_http_result_read_all(res, &body, &len, 2 << 20), 0);
			ck_assert_uint_eq(len, sizes[i]);
			ck_assert(is_pattern(body, len));
			free(body);
			runtime_http_result_close(res);
		}
	}
	ck_assert_uint_eq(stats(cl).connects, 1);
	/* Read a byte at a time: the same body, framing split anywhere. */
	ck_assert_int_eq(runtime_http_get(cl, url("http", port, "/chunked?n=3000"), &res), 0);
	char one;
	size_t got = 0;
	ssize_t n;
	while ((n = runtime_http_result_read(res, &one, 1)) == 1)
		ck_assert_int_eq(one, pattern(got++));
	ck_assert_int_eq(n, 0);
	ck_assert_uint_eq(got, 3000);
	runtime_http_result_close(res);
	/* A small rest left unread is read at close: the connection stays. */
	ck_assert_int_eq(runtime_http_get(cl, url("http", port, "/big?n=5000"), &res), 0);
	ck_assert_int_eq(runtime_http_result_read(res, &one, 1), 1);
	runtime_http_result_close(res);
	ck_assert_int_eq(get(cl, url("http", port, "/hello"), NULL, NULL), 200);
	ck_assert_uint_eq(stats(cl).connects, 1);
	/* A large one is not waited for: that connection closes. */
	ck_assert_int_eq(runtime_http_get(cl, url("http", port, "/big?n=2000000"), &res), 0);
	runtime_http_result_close(res);
	ck_assert_int_eq(get(cl, url("http", port, "/hello"), NULL, NULL), 200);
	ck_assert_uint_eq(stats(cl).connects, 2);
	runtime_http_client_destroy(cl);
	lib_stop();
}

START_TEST(test_client_chunked_and_length)
{
	run(framing_body, 1);
}
END_TEST

/* HEAD, 204 and 304 have no body, whatever their fields say; the
 * connection carries the next request. */
static void bodiless_body(void *arg)
{
	uint16_t port = lib_start(NULL);
	struct runtime_http_client *cl = client(8);
	struct runtime_http_client_request req = { .method = "HEAD" };
	struct runtime_http_result *res = NULL;
	char buf[16];

	(void)arg;
	req.url = url("http", port, "/big?n=12345");
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), 0);
	ck_assert_int_eq(runtime_http_result_status(res), 200);
	ck_assert_int_eq(runtime_http_result_length(res), 12345);
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), 0);
	runtime_http_result_close(res);
	ck_assert_int_eq(get(cl, url("http", port, "/status?s=204"), NULL, NULL), 204);
	ck_assert_int_eq(get(cl, url("http", port, "/status?s=304"), NULL, NULL), 304);
	ck_assert_int_eq(get(cl, url("http", port, "/hello"), NULL, NULL), 200);
	ck_assert_uint_eq(stats(cl).connects, 1);
	runtime_http_client_destroy(cl);
	lib_stop();

	/* HEAD's length: unknown (-1) without Content-Length, never taken
	 * for an empty resource; 0 only when it says 0, and for a 204. */
	static const char *const heads[] = {
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
	};
	static const int64_t lengths[] = { -1, 0, -1, 0 };
	struct script h = { 0 };
	script_start(&h, heads, 4);
	cl = client(8);
	req.url = url("http", h.port, "/");
	for (size_t i = 0; i < 4; i++) {
		ck_assert_int_eq(runtime_http_request(cl, &req, &res), 0);
		ck_assert_int_eq(runtime_http_result_length(res), lengths[i]);
		ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), 0);
		runtime_http_result_close(res);
	}
	ck_assert_uint_eq(stats(cl).connects, 1);
	runtime_http_client_destroy(cl);
	script_stop(&h);

	/* A 304 with a Content-Length and no body, then an answer after it. */
	static const char *const answers[] = {
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	};
	struct script s = { 0 };
	script_start(&s, answers, 2);
	cl = client(8);
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), 304);
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), 200);
	ck_assert_uint_eq(stats(cl).connects, 1);
	runtime_http_client_destroy(cl);
	script_stop(&s);
}

START_TEST(test_client_head_204_304)
{
	run(bodiless_body, 1);
}
END_TEST

/* A body until the close (no Content-Length, no chunked): read whole, and
 * the connection is not kept; HTTP/1.0 without keep-alive neither. */
static void until_close_body(void *arg)
{
	static const char *const answers[] = {
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close",
		"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nten",
		"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 4\r\n\r\nkept",
	};
	struct script s = { 0 };
	struct runtime_http_client *cl = client(8);
	struct runtime_http_result *res = NULL;
	char *body;
	size_t len;

	(void)arg;
	script_start(&s, answers, 3);
	s.close_after = true;
	ck_assert_int_eq(runtime_http_get(cl, url("http", s.port, "/"), &res), 0);
	ck_assert_int_eq(runtime_http_result_length(res), -1);
	ck_assert_int_eq(runtime_http_result_read_all(res, &body, &len, 1000), 0);
	ck_assert_str_eq(body, "until the close");
	free(body);
	runtime_http_result_close(res);
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), &body, &len), 200);
	ck_assert_str_eq(body, "ten");
	free(body);
	ck_assert_uint_eq(stats(cl).connects, 2); /* neither was kept */
	runtime_http_client_destroy(cl);
	script_stop(&s);
	/* 1.0 with keep-alive is kept. */
	script_start(&s, answers + 2, 1);
	cl = client(8);
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), 200);
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), 200);
	ck_assert_uint_eq(stats(cl).connects, 1);
	runtime_http_client_destroy(cl);
	script_stop(&s);
	/* 1.2 is read as 1.1 (RFC 9110 2.5): kept alive by default. */
	static const char *const newer[] = { "HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok" };
	script_start(&s, newer, 1);
	cl = client(8);
	ck_assert_int_eq(runtime_http_get(cl, url("http", s.port, "/"), &res), 0);
	ck_assert_int_eq(runtime_http_result_minor(res), 1);
	runtime_http_result_close(res);
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), 200);
	ck_assert_uint_eq(stats(cl).connects, 1);
	runtime_http_client_destroy(cl);
	script_stop(&s);
}

START_TEST(test_client_read_until_close)
{
	run(until_close_body, 1);
}
END_TEST

/* 1xx interim responses are skipped; 101 is refused (nobody asked). */
static void interim_body(void *arg)
{
	static const char *const answers[] = {
		"HTTP/1.1 100 Continue\r\n\r\n"
		"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n"
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	};
	static const char *const switching[] = { "HTTP/1.1 101 Switching Protocols\r\n\r\n" };
	struct script s = { 0 };
	struct runtime_http_client *cl = client(8);
	const char *headers[] = { "Expect: 100-continue", NULL };
	struct runtime_http_client_request req = { .method = "POST", .headers = headers,
		                                    .body = "data", .body_len = 4 };
	struct runtime_http_result *res = NULL;
	char *body;
	size_t len;

	(void)arg;
	script_start(&s, answers, 1);
	req.url = url("http", s.port, "/");
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), 0);
	ck_assert_int_eq(runtime_http_result_status(res), 200);
	ck_assert_int_eq(runtime_http_result_read_all(res, &body, &len, 10), 0);
	ck_assert_str_eq(body, "ok");
	free(body);
	runtime_http_result_close(res);
	script_stop(&s);
	script_start(&s, switching, 1);
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), -EBADMSG);
	runtime_http_client_destroy(cl);
	script_stop(&s);
}

START_TEST(test_client_interim_skipped)
{
	run(interim_body, 1);
}
END_TEST

/* ------------------------------------------------------------ malformations */

/* Each response the request parser's rules refuse in a request, mirrored
 * (tests/http_rejections.h), and the response's own: the error comes
 * with the head, or with the body's read for a bad chunked body. */
static const struct malformed {
	const char *answer;
	int err;
} malformed[] = {
	{ "HTTP/1.1 200 OK\nContent-Length: 0\n\n", -EBADMSG },              /* bare LF */
	{ "HTTP/1.1 200 OK\r\nX: a\rY: b\r\nContent-Length: 0\r\n\r\n", -EBADMSG }, /* bare CR */
	{ "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n", -EBADMSG }, /* obs-fold */
	{ "HTTP/1.1 200 OK\r\n X: a\r\nContent-Length: 0\r\n\r\n", -EBADMSG },  /* leading space */
	{ "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", -EBADMSG },        /* space before colon */
	{ "HTTP/1.1 200 OK\r\nX-(a): b\r\nContent-Length: 0\r\n\r\n", -EBADMSG }, /* bad name */
	{ "HTTP/1.1 200 OK\r\nX: a\x01" "b\r\nContent-Length: 0\r\n\r\n", -EBADMSG }, /* control */
	{ "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	  -EBADMSG },                                                          /* CL + TE */
	{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n0\r\n\r\n",
	  -EBADMSG },                                                          /* TE + CL */
	{ "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na", -EBADMSG },
	{ "HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\na", -EBADMSG },     /* a list */
	{ "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\na", -EBADMSG },
	{ "HTTP/1.1 200 OK\r\nContent-Length: 1a\r\n\r\na", -EBADMSG },
	{ "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", -EBADMSG },
	{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", -EBADMSG },
	{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", -EBADMSG },
	{ "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", -EBADMSG },
	{ "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", -EBADMSG },
	{ "HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n", -EBADMSG },          /* status line */
	{ "HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n", -EBADMSG },
	{ "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", -EBADMSG },           /* no SP */
	{ "HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n", -EBADMSG },
	{ "HTTP/1.1 600 Huh\r\nContent-Length: 0\r\n\r\n", -EBADMSG },
	{ "HTTP/1.x 200 OK\r\nContent-Length: 0\r\n\r\n", -EBADMSG },
	{ "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n", -EBADMSG },
	{ "http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", -EBADMSG },
	{ "SSH-2.0-OpenSSH_9.2\r\n", -EBADMSG },
	{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", -EBADMSG }, /* chunk size */
	{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffff\r\n", -EBADMSG },
	{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", -EBADMSG },
	{ "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", -EPIPE },     /* cut short */
	{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc", -EPIPE },
	{ "HTTP/1.1 200 OK\r\nContent-Le", -ECONNRESET },                      /* head cut short */
};

static void malformed_body(void *arg)
{
	struct runtime_http_client *cl = client(8);
	struct script s = { 0 };

	(void)arg;
	for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
		const char *answer = malformed[i].answer;
		script_start(&s, &answer, 1);
		s.close_after = true;
		int rc = get(cl, url("http", s.port, "/"), NULL, NULL);
		ck_assert_msg(rc == malformed[i].err, "answer %zu: %s: got %d, wanted %d", i,
		              answer, rc, malformed[i].err);
		script_stop(&s);
	}
	ck_assert_uint_eq(stats(cl).reused, 0);
	runtime_http_client_destroy(cl);
}

START_TEST(test_client_malformed_responses)
{
	run(malformed_body, 1);
}
END_TEST

/* --------------------------------------------------------------- limits */

/* The answer, over a limit of cl's: -EMSGSIZE. */
static void over_limit(struct runtime_http_client *cl, const char *answer)
{
	struct script s = { 0 };

	script_start(&s, &answer, 1);
	s.close_after = true;
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), -EMSGSIZE);
	script_stop(&s);
}

/* A head over head_max, a status line over line_max, five fields, a
 * Content-Length over body_max. */
static void heads_over_limits(struct runtime_http_client *cl)
{
	char *big = malloc(4000), line[400] = "HTTP/1.1 200 ";

	strcpy(big, "HTTP/1.1 200 OK\r\nX: ");
	memset(big + strlen(big), 'x', 2000);
	strcpy(big + 2020, "\r\nContent-Length: 0\r\n\r\n");
	over_limit(cl, big);
	memset(line + 13, 'r', 300);
	strcpy(line + 313, "\r\n\r\n");
	over_limit(cl, line);
	over_limit(cl, "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n");
	over_limit(cl, "HTTP/1.1 200 OK\r\nContent-Length: 10001\r\n\r\n");
	free(big);
}

/* Bodies over body_max as they come: chunked, and until the close. */
static void bodies_over_limits(struct runtime_http_client *cl)
{
	char *answer = malloc(20000);
	int n = sprintf(answer, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n", 10001);

	memset(answer + n, 'c', 10001);
	strcpy(answer + n + 10001, "\r\n0\r\n\r\n");
	over_limit(cl, answer);
	n = sprintf(answer, "HTTP/1.1 200 OK\r\n\r\n");
	memset(answer + n, 'b', 10001);
	answer[n + 10001] = '\0';
	over_limit(cl, answer);
	free(answer);
}

static void limits_body(void *arg)
{
	struct runtime_http_client_config cfg;
	struct runtime_http_client *cl;

	(void)arg;
	runtime_http_client_config_init(&cfg);
	cfg.limits = (struct runtime_http_limits){ .line_max = 256, .head_max = 1024,
		                                   .headers_max = 4, .body_max = 10000 };
	ck_assert_int_eq(runtime_http_client_create(&cl, &cfg), 0);
	heads_over_limits(cl);
	bodies_over_limits(cl);
	runtime_http_client_destroy(cl);
	/* Limits the parser cannot hold. */
	cfg.limits = (struct runtime_http_limits){ .headers_max = RUNTIME_HTTP_HEADERS_MAX + 1 };
	ck_assert_int_eq(runtime_http_client_create(&cl, &cfg), -EINVAL);
	cfg.limits = (struct runtime_http_limits){ .line_max = 4096, .head_max = 1024 };
	ck_assert_int_eq(runtime_http_client_create(&cl, &cfg), -EINVAL);
}

START_TEST(test_client_limits)
{
	run(limits_body, 1);
}
END_TEST

/* ------------------------------------------------------------------ retries */

/* A server that closes a pooled connection once the next request is on
 * it, answering nothing (NULL in its script): the request fails before
 * any byte of its answer. GET is sent again on a new connection; POST is
 * not. A close that came while the connection sat idle is seen before
 * anything goes out on it, however short the idle spell: even the POST
 * then takes a new connection. */
static void retry_body(void *arg)
{
	static const char *const answers[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", NULL,
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", NULL,
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	};
	struct runtime_http_client *cl = client(8);
	struct runtime_http_client_request post = { .method = "POST", .body = "x", .body_len = 1 };
	struct runtime_http_result *res = NULL;
	struct script s = { 0 };

	(void)arg;
	script_start(&s, answers, 5);
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), 200);
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), 200);
	struct runtime_http_client_stats st = stats(cl);
	ck_assert_uint_eq(st.retried, 1);
	ck_assert_uint_eq(st.connects, 2);
	ck_assert_uint_eq(st.reused, 1);
	post.url = url("http", s.port, "/");
	int rc = runtime_http_request(cl, &post, &res);
	ck_assert_msg(rc == -ECONNRESET || rc == -EPIPE, "POST on a closed connection: %d", rc);
	ck_assert_uint_eq(stats(cl).retried, 1);
	ck_assert_uint_eq(s.conns, 2); /* the POST was not sent again */
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), 200);
	ck_assert_uint_eq(s.conns, 3);
	script_stop(&s);
	/* Closed after each answer: seen at the take, once the close is out. */
	script_start(&s, answers, 1);
	s.close_after = true;
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), 200);
	script_wait(&s.closed, 1);
	ck_assert_int_eq(runtime_http_request(cl, &post, &res), 0);
	ck_assert_int_eq(runtime_http_result_status(res), 200);
	runtime_http_result_close(res);
	st = stats(cl);
	ck_assert_uint_eq(st.retried, 1);
	ck_assert_uint_eq(st.dropped, 1);
	ck_assert_uint_eq(s.conns, 2);
	runtime_http_client_destroy(cl);
	script_stop(&s);
}

START_TEST(test_client_retry_idempotent_only)
{
	run(retry_body, 1);
}
END_TEST

/* Bytes a server sends on a keep-alive connection after the answer asked
 * for - a second answer, a stray CRLF, a 408 and its close - come while
 * the connection sits in the pool. The next request must never take them
 * for its answer: the pool drops that connection (counted) and the
 * request gets the server's real answer on a new one. Each kind comes
 * soon after the answer, after the pool's old readiness check began
 * (100 ms), and a second after. */
static void unasked_bytes_body(void *arg)
{
	static const char *const answers[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nr1",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nr2",
	};
	static const struct {
		const char *bytes;
		bool close;
	} kinds[] = {
		{ "HTTP/1.1 200 OK\r\nX-Id: EVIL\r\nContent-Length: 4\r\n\r\nEVIL", false },
		{ "\r\n", false },
		{ "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
		  true },
	};
	static const uint64_t after[] = { 10 * MS, 150 * MS, 1000 * MS };
	struct script s = { 0 };
	char *body;
	size_t len;

	(void)arg;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		for (size_t t = 0; t < sizeof(after) / sizeof(after[0]); t++) {
			struct runtime_http_client *cl = client(8);
			script_start(&s, answers, 2);
			s.unasked = kinds[k].bytes;
			s.unasked_ns = after[t];
			s.close_after = kinds[k].close;
			ck_assert_int_eq(get(cl, url("http", s.port, "/"), &body, &len), 200);
			ck_assert_str_eq(body, "r1");
			free(body);
			script_wait(&s.unasked_sent, 1); /* the bytes have come */
			if (kinds[k].close)
				script_wait(&s.closed, 1);
			ck_assert_int_eq(get(cl, url("http", s.port, "/"), &body, &len), 200);
			ck_assert_msg(!strcmp(body, "r2"), "kind %zu after %llu ms: answered \"%s\"",
			              k, (unsigned long long)(after[t] / MS), body);
			free(body);
			struct runtime_http_client_stats st = stats(cl);
			ck_assert_uint_eq(st.dropped, 1);
			ck_assert_uint_eq(st.connects, 2);
			ck_assert_uint_eq(st.reused, 0);
			ck_assert_uint_eq(s.conns, 2);
			runtime_http_client_destroy(cl);
			script_stop(&s);
		}
	}
}

START_TEST(test_client_pool_drops_unasked_bytes)
{
	run(unasked_bytes_body, 1);
}
END_TEST

/* --------------------------------------------------- deadlines and cancels */

static void deadline_body(void *arg)
{
	static const char *const partial[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nsome",
	};
	struct runtime_http_client *cl = client(8);
	struct runtime_http_client_request req = { 0 };
	struct runtime_http_result *res = NULL;
	struct script s = { 0 };
	char buf[200];
	int fds = count_fds();

	(void)arg;
	script_start(&s, partial, 1);
	s.stall = true; /* never answers */
	req.url = url("http", s.port, "/");
	uint64_t t0 = runtime_now();
	req.deadline_ns = t0 + 200 * MS;
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), -ETIMEDOUT);
	uint64_t took = runtime_now() - t0;
	ck_assert_msg(took >= 190 * MS, "took %llu ms", (unsigned long long)(took / MS));
	script_stop(&s);
	/* The head comes, the body stalls: the deadline holds for its reads. */
	script_start(&s, partial, 1);
	req.url = url("http", s.port, "/");
	req.deadline_ns = runtime_now() + 200 * MS;
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), 0);
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), 4);
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), -ETIMEDOUT);
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), -ETIMEDOUT); /* sticky */
	runtime_http_result_close(res);
	/* The fiber's own deadline too. */
	runtime_deadline_set(runtime_now() + 100 * MS);
	ck_assert_int_eq(get(cl, url("http", s.port, "/"), NULL, NULL), -ETIMEDOUT);
	runtime_deadline_set(0);
	runtime_http_client_destroy(cl);
	script_stop(&s);
	ck_assert_int_eq(count_fds(), fds);
}

START_TEST(test_client_deadline)
{
	run(deadline_body, 1);
}
END_TEST

/* req to u: runtime_http_request's result, which timeout it named, and
 * how long it took (ms). */
static int timed(struct runtime_http_client *cl, struct runtime_http_client_request *req,
                 struct runtime_http_result **res, int *which, uint64_t *ms)
{
	uint64_t t0 = runtime_now();
	*which = -1;
	req->timed_out = which;
	int rc = runtime_http_request(cl, req, res);
	*ms = (runtime_now() - t0) / MS;
	return rc;
}

/* Each timeout ends what it bounds and says so: the head's (counted from
 * the request sent, a long body's included), the total deadline when it
 * comes first, the idle read between body bytes (not the head's, once the
 * head is in), connect's; the fiber's own deadline is none of them. */
static void timeouts_body(void *arg)
{
	static const char *const partial[] = { "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsome" };
	static char big[200000];
	struct runtime_http_client *cl = client(8);
	struct runtime_http_client_request req = { 0 };
	struct runtime_http_result *res = NULL;
	struct script s = { 0 };
	char buf[64];
	uint64_t ms;
	int which;

	(void)arg;
	script_start(&s, partial, 1);
	s.stall = true; /* reads the request, body too, and never answers */
	req.url = url("http", s.port, "/");
	req.deadline_ns = runtime_now() + 10 * SEC;
	req.head_timeout_ns = 150 * MS;
	ck_assert_int_eq(timed(cl, &req, &res, &which, &ms), -ETIMEDOUT);
	ck_assert_msg(which == RUNTIME_HTTP_TIMEOUT_HEAD && ms >= 140 && ms < 5000, "%d %llu ms",
	              which, (unsigned long long)ms);
	req.method = "POST"; /* a body the watcher's read of the head waits behind */
	req.body = big;
	req.body_len = sizeof(big);
	ck_assert_int_eq(timed(cl, &req, &res, &which, &ms), -ETIMEDOUT);
	ck_assert_msg(which == RUNTIME_HTTP_TIMEOUT_HEAD, "watched: %d", which);
	req.method = NULL;
	req.body = NULL;
	req.body_len = 0;
	req.deadline_ns = runtime_now() + 100 * MS; /* before the head's */
	req.head_timeout_ns = 5 * SEC;
	ck_assert_int_eq(timed(cl, &req, &res, &which, &ms), -ETIMEDOUT);
	ck_assert_int_eq(which, RUNTIME_HTTP_TIMEOUT_TOTAL);
	runtime_deadline_set(runtime_now() + 100 * MS); /* the fiber's own */
	req.deadline_ns = 0;
	ck_assert_int_eq(timed(cl, &req, &res, &which, &ms), -ETIMEDOUT);
	ck_assert_int_eq(which, RUNTIME_HTTP_TIMEOUT_NONE);
	runtime_deadline_set(0);
	script_stop(&s);

	/* The head comes, the body's rest 300 ms later: the head's timeout
	 * is over, an idle read of 150 ms is not. */
	script_start(&s, partial, 1);
	s.unasked = "more";
	s.unasked_ns = 300 * MS;
	req.url = url("http", s.port, "/");
	req.head_timeout_ns = 100 * MS;
	req.read_idle_ns = 0;
	ck_assert_int_eq(timed(cl, &req, &res, &which, &ms), 0);
	ck_assert_int_eq(which, RUNTIME_HTTP_TIMEOUT_NONE);
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), 4);
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), 4); /* after 300 ms */
	ck_assert_int_eq(runtime_http_result_timeout(res), RUNTIME_HTTP_TIMEOUT_NONE);
	runtime_http_result_close(res);
	req.read_idle_ns = 150 * MS;
	ck_assert_int_eq(timed(cl, &req, &res, &which, &ms), 0);
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), 4);
	uint64_t t0 = runtime_now();
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), -ETIMEDOUT);
	ck_assert_uint_ge(runtime_now() - t0, 140 * MS);
	ck_assert_int_eq(runtime_http_result_timeout(res), RUNTIME_HTTP_TIMEOUT_IDLE);
	runtime_http_result_close(res);
	runtime_http_client_destroy(cl);
	script_stop(&s);
}

START_TEST(test_client_timeouts_say_which)
{
	run(timeouts_body, 1);
}
END_TEST

/* A listener whose accept queue is full drops the next SYN: that connect
 * hangs, and connect_timeout_ns ends it. */
static void connect_timeout_body(void *arg)
{
	struct runtime_http_client_config cfg;
	struct runtime_http_client *cl;
	int lfd = runtime_tcp_listen("127.0.0.1", 0, 1, 0), fill[4];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	(void)arg;
	ck_assert_int_ge(lfd, 0);
	a.sin_port = htons(bound_port(lfd));
	for (int i = 0; i < 4; i++) { /* never accepted */
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		connect(fill[i], (struct sockaddr *)&a, sizeof(a));
	}
	runtime_sleep(50 * MS);
	runtime_http_client_config_init(&cfg);
	cfg.connect_timeout_ns = 200 * MS;
	ck_assert_int_eq(runtime_http_client_create(&cl, &cfg), 0);
	uint64_t t0 = runtime_now();
	int which = -1;
	struct runtime_http_client_request req = { .url = url("http", bound_port(lfd), "/"),
		                                    .timed_out = &which };
	struct runtime_http_result *res = NULL;
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), -ETIMEDOUT);
	uint64_t took = runtime_now() - t0;
	ck_assert_msg(took >= 190 * MS, "took %llu ms", (unsigned long long)(took / MS));
	ck_assert_int_eq(which, RUNTIME_HTTP_TIMEOUT_CONNECT);
	ck_assert_uint_eq(stats(cl).connects, 0);
	runtime_http_client_destroy(cl);
	for (int i = 0; i < 4; i++)
		close(fill[i]);
	runtime_close(lfd);
}

START_TEST(test_client_connect_timeout)
{
	run(connect_timeout_body, 1);
}
END_TEST

static uint16_t stall_port;

static void *cancelled_get(void *arg)
{
	struct runtime_http_client *cl = arg;
	return (void *)(intptr_t)get(cl, url("http", stall_port, "/"), NULL, NULL);
}

static void cancel_body(void *arg)
{
	static const char *const none[] = { "" };
	struct runtime_http_client *cl = client(8);
	struct script s = { 0 };
	int fds = count_fds();

	(void)arg;
	script_start(&s, none, 1);
	s.stall = true;
	stall_port = s.port;
	struct runtime_fiber *f = start(cancelled_get, cl);
	runtime_sleep(100 * MS);
	ck_assert_int_eq(runtime_fiber_cancel(f), 0);
	ck_assert_int_eq(join(f), -ECANCELED);
	runtime_http_client_destroy(cl);
	script_stop(&s);
	ck_assert_int_eq(count_fds(), fds);
}

START_TEST(test_client_cancel)
{
	run(cancel_body, 1);
}
END_TEST

/* --------------------------------------------------------------- redirects */

static struct runtime_http_client_request redirected(const char *u, unsigned max)
{
	return (struct runtime_http_client_request){ .url = u, .max_redirects = max };
}

/* The final status and body of req. */
static int fetch(struct runtime_http_client *cl, const struct runtime_http_client_request *req,
                 char *out, size_t cap)
{
	struct runtime_http_result *res = NULL;
	int rc = runtime_http_request(cl, req, &res);
	char *body;
	size_t len;

	if (rc < 0)
		return rc;
	rc = runtime_http_result_status(res);
	ck_assert_int_eq(runtime_http_result_read_all(res, &body, &len, cap - 1), 0);
	memcpy(out, body, len + 1);
	free(body);
	runtime_http_result_close(res);
	return rc;
}

static void redirects_body(void *arg)
{
	uint16_t port = lib_start(NULL);
	struct runtime_http_client *cl = client(8);
	struct runtime_http_client_request req;
	char body[256], u[128];

	(void)arg;
	snprintf(u, sizeof(u), "http://127.0.0.1:%u/r?n=3", port);
	req = redirected(u, 0); /* not followed unless asked */
	ck_assert_int_eq(fetch(cl, &req, body, sizeof(body)), 302);
	req = redirected(u, 3);
	ck_assert_int_eq(fetch(cl, &req, body, sizeof(body)), 200);
	ck_assert_str_eq(body, "done GET 0");
	req = redirected(u, 2);
	ck_assert_int_eq(fetch(cl, &req, body, sizeof(body)), -ELOOP);
	/* Relative to a deeper path: /a/b/r?... -> /a/b/r (the same directory). */
	snprintf(u, sizeof(u), "http://127.0.0.1:%u/a/b/r?n=2#frag", port);
	req = redirected(u, 5);
	ck_assert_int_eq(fetch(cl, &req, body, sizeof(body)), 200);
	/* POST: 302 and 303 turn it into a GET without its body; 307 and 308
	 * keep both. */
	static const int codes[] = { 301, 302, 303, 307, 308 };
	for (size_t i = 0; i < 5; i++) {
		snprintf(u, sizeof(u), "http://127.0.0.1:%u/r?n=1&code=%d", port, codes[i]);
		req = redirected(u, 1);
		req.method = "POST";
		req.body = "abc";
		req.body_len = 3;
		ck_assert_int_eq(fetch(cl, &req, body, sizeof(body)), 200);
		ck_assert_str_eq(body, codes[i] >= 307 ? "done POST 3" : "done GET 0");
	}
	ck_assert_uint_eq(stats(cl).connects, 1); /* all on one connection */
	runtime_http_client_destroy(cl);
	lib_stop();
}

START_TEST(test_client_redirects)
{
	run(redirects_body, 1);
}
END_TEST

/* Credentials do not follow a redirect to another origin. */
static void redirect_origin_body(void *arg)
{
	uint16_t port = lib_start(NULL);
	struct runtime_http_client *cl = client(8);
	const char *headers[] = { "Authorization: Bearer secret", "X-Test: kept", NULL };
	struct runtime_http_client_request req = { .headers = headers, .max_redirects = 1 };
	struct runtime_http_result *res = NULL;
	char u[128];

	(void)arg;
	snprintf(u, sizeof(u), "http://127.0.0.1:%u/away?port=%u", port, port);
	req.url = u;
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), 0);
	ck_assert_int_eq(runtime_http_result_status(res), 200);
	const struct runtime_http_slice *seen = runtime_http_result_header(res, "x-seen");
	ck_assert_ptr_nonnull(seen);
	ck_assert_int_eq(seen->len, strlen("runtime|kept|-"));
	ck_assert(!memcmp(seen->p, "runtime|kept|-", seen->len));
	runtime_http_result_close(res);
	ck_assert_uint_eq(stats(cl).connects, 2); /* localhost is another origin */
	runtime_http_client_destroy(cl);
	lib_stop();
}

START_TEST(test_client_redirect_other_origin)
{
	run(redirect_origin_body, 1);
}
END_TEST

/* ---------------------------------------------------------- request bodies */

struct source {
	size_t total, sent;
	int fail_at; /* nonzero: fail with -EIO after this many bytes */
};

static ssize_t produce(void *arg, void *buf, size_t len)
{
	struct source *s = arg;
	size_t n = s->total - s->sent;

	if (s->fail_at && s->sent >= (size_t)s->fail_at)
		return -EIO;
	n = n < len ? n : len;
	n = n < 777 ? n : 777; /* odd chunks */
	for (size_t i = 0; i < n; i++)
		((char *)buf)[i] = pattern(s->sent + i);
	s->sent += n;
	return (ssize_t)n;
}

/* An answer that comes while the body goes out: an error the server
 * sends after the head, reading no more, stops the body - a 64 MiB one,
 * or an endless stream - and is the request's answer (it waited until
 * the deadline before: RFC 9112 9.3 says to watch for it); the
 * connection, its body cut, is not kept. A 2xx sent early is no such
 * sign: the body goes out whole, and the connection is kept. */
static void early_answer_body(void *arg)
{
	static const char *const too_large[] = {
		"HTTP/1.1 413 Content Too Large\r\nContent-Length: 9\r\n\r\ntoo large",
	};
	static const char *const fine[] = { "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" };
	size_t big = 64u << 20;
	char *fixed = malloc(big);
	struct runtime_http_client *cl = client(8);
	struct runtime_http_result *res = NULL;
	struct source src = { .total = SIZE_MAX };
	struct script s = { 0 };
	char *body;
	size_t len;

	(void)arg;
	ck_assert_ptr_nonnull(fixed);
	memset(fixed, 'x', big);
	script_start(&s, too_large, 1);
	s.early = true;
	struct runtime_http_client_request post = { .method = "POST", .url = url("http", s.port, "/"),
		                                     .body = fixed, .body_len = big,
		                                     .deadline_ns = runtime_now() + 20 * SEC };
	ck_assert_int_eq(runtime_http_request(cl, &post, &res), 0);
	ck_assert_int_eq(runtime_http_result_status(res), 413);
	ck_assert_int_eq(runtime_http_result_read_all(res, &body, &len, 100), 0);
	ck_assert_str_eq(body, "too large");
	free(body);
	runtime_http_result_close(res);
	struct runtime_http_client_request stream = { .method = "POST", .url = post.url,
		                                       .body_read = produce, .body_arg = &src,
		                                       .deadline_ns = post.deadline_ns };
	ck_assert_int_eq(runtime_http_request(cl, &stream, &res), 0);
	ck_assert_int_eq(runtime_http_result_status(res), 413);
	runtime_http_result_close(res);
	ck_assert_uint_eq(stats(cl).connects, 2); /* neither connection kept */
	script_stop(&s);

	script_start(&s, fine, 1);
	s.early = s.drain_body = true;
	post.url = url("http", s.port, "/");
	post.body_len = 1u << 20;
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(runtime_http_request(cl, &post, &res), 0);
		ck_assert_int_eq(runtime_http_result_status(res), 200);
		runtime_http_result_close(res);
	}
	ck_assert_uint_eq(stats(cl).connects, 3);
	ck_assert_uint_eq(s.conns, 1);
	runtime_http_client_destroy(cl);
	script_stop(&s);
	free(fixed);
}

START_TEST(test_client_early_answer_stops_the_body)
{
	run(early_answer_body, 1);
}
END_TEST

/* A streamed body of known length goes with Content-Length, not chunked;
 * one that ends before it fails the request, and its connection goes. */
static void streamed_with_length(struct runtime_http_client *cl, uint16_t port,
                                 struct runtime_http_client_request *req, struct source *src)
{
	struct runtime_http_result *res = NULL;
	char *body;
	size_t len;

	req->url = url("http", port, "/echo");
	*src = (struct source){ .total = 100000 };
	req->body_read_len = 100000;
	ck_assert_int_eq(runtime_http_request(cl, req, &res), 0);
	const struct runtime_http_slice *framing = runtime_http_result_header(res, "X-Length");
	ck_assert(framing->len == 6 && !memcmp(framing->p, "100000", 6));
	ck_assert_int_eq(runtime_http_result_read_all(res, &body, &len, 1 << 20), 0);
	ck_assert_uint_eq(len, 100000);
	ck_assert(is_pattern(body, len));
	free(body);
	runtime_http_result_close(res);
	*src = (struct source){ .total = 1000 };
	req->body_read_len = 2000;
	ck_assert_int_eq(runtime_http_request(cl, req, &res), -EINVAL);
	req->body_read_len = 0;
	*src = (struct source){ .total = 1000 };
	ck_assert_int_eq(runtime_http_request(cl, req, &res), 0);
	ck_assert(!memcmp(runtime_http_result_header(res, "X-Length")->p, "-1", 2));
	runtime_http_result_close(res);
}

static void streamed_body(void *arg)
{
	uint16_t port = lib_start(NULL);
	struct runtime_http_client *cl = client(8);
	struct source src = { .total = 100000 };
	struct runtime_http_client_request req = { .method = "PUT", .body_read = produce,
		                                    .body_arg = &src };
	struct runtime_http_result *res = NULL;
	char *body;
	size_t len;

	(void)arg;
	req.url = url("http", port, "/echo");
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), 0);
	ck_assert_int_eq(runtime_http_result_status(res), 200);
	ck_assert_int_eq(runtime_http_result_read_all(res, &body, &len, 1 << 20), 0);
	ck_assert_uint_eq(len, 100000);
	ck_assert(is_pattern(body, len));
	free(body);
	runtime_http_result_close(res);
	/* A fixed body, and an empty streamed one. */
	char fixed[5000];
	for (size_t i = 0; i < sizeof(fixed); i++)
		fixed[i] = pattern(i);
	struct runtime_http_client_request post = { .method = "POST", .body = fixed,
		                                     .body_len = sizeof(fixed) };
	post.url = url("http", port, "/echo");
	ck_assert_int_eq(runtime_http_request(cl, &post, &res), 0);
	ck_assert_int_eq(runtime_http_result_read_all(res, &body, &len, 1 << 20), 0);
	ck_assert_uint_eq(len, sizeof(fixed));
	ck_assert(is_pattern(body, len));
	free(body);
	runtime_http_result_close(res);
	src = (struct source){ .total = 0 };
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), 0);
	ck_assert_int_eq(runtime_http_result_length(res), 0);
	runtime_http_result_close(res);
	/* The source fails: so does the request, and its connection goes. */
	src = (struct source){ .total = 100000, .fail_at = 2000 };
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), -EIO);
	ck_assert_int_eq(get(cl, url("http", port, "/hello"), NULL, NULL), 200);
	ck_assert_uint_eq(stats(cl).connects, 2);
	streamed_with_length(cl, port, &req, &src);
	ck_assert_uint_eq(stats(cl).connects, 3);
	runtime_http_client_destroy(cl);
	lib_stop();
}

START_TEST(test_client_streamed_body)
{
	run(streamed_body, 1);
}
END_TEST

/* Idle pooled connections close after idle_timeout_ns though no request
 * comes (the core's background sweeper: the run still ends with them
 * pooled), and a destroy with the sweeper armed cancels it. */
static void idle_sweep_body(void *arg)
{
	struct runtime_http_client_config cfg;
	struct runtime_http_client *cl;
	struct runtime_http_server_stats st;
	uint16_t port = lib_start(NULL);

	(void)arg;
	runtime_http_client_config_init(&cfg);
	cfg.idle_timeout_ns = 200 * MS;
	ck_assert_int_eq(runtime_http_client_create(&cl, &cfg), 0);
	ck_assert_int_eq(get(cl, url("http", port, "/hello"), NULL, NULL), 200);
	runtime_http_server_stats(lib_srv, &st);
	ck_assert_uint_eq(st.conns.live, 1); /* pooled, open */
	for (int i = 0; i < 3000 && (runtime_http_server_stats(lib_srv, &st), st.conns.live); i++)
		runtime_sleep(MS);
	ck_assert_uint_eq(st.conns.live, 0);
	ck_assert_int_eq(get(cl, url("http", port, "/hello"), NULL, NULL), 200); /* a new one */
	ck_assert_uint_eq(stats(cl).connects, 2);
	runtime_http_client_destroy(cl); /* the sweeper armed again: cancelled */
	lib_stop();
}

START_TEST(test_client_idle_pool_closed_by_time)
{
	run(idle_sweep_body, 1);
}
END_TEST

/* upgrade: a 101 is the result, its connection handed over with what the
 * server sent after it; without upgrade the same route is 426, and a
 * request with a bad upgrade value is -EINVAL. */
static void upgrade_body(void *arg)
{
	uint16_t port = lib_start(NULL);
	struct runtime_http_client *cl = client(8);
	struct runtime_http_client_request req = { .upgrade = "echo" };
	struct runtime_http_result *res = NULL;
	struct runtime_http_upgraded up;
	char buf[16];
	size_t done, got;

	(void)arg;
	req.url = url("http", port, "/upgrade");
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), 0);
	ck_assert_int_eq(runtime_http_result_status(res), 101);
	ck_assert_int_eq(runtime_http_result_upgraded(res, &up), 0);
	for (got = up.early.len, memcpy(buf, up.early.p, got); got < 2;) {
		ssize_t n = runtime_conn_read(up.conn, buf + got, sizeof(buf) - got);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
	}
	ck_assert(got == 2 && !memcmp(buf, "hi", 2));
	ck_assert_int_eq(runtime_conn_write(up.conn, "ping", 4, &done), 4);
	for (got = 0; got < 4;) {
		ssize_t n = runtime_conn_read(up.conn, buf + got, sizeof(buf) - got);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
	}
	ck_assert(!memcmp(buf, "ping", 4));
	runtime_http_result_close(res); /* closes the connection */
	ck_assert_int_eq(get(cl, url("http", port, "/upgrade"), NULL, NULL), 426);
	ck_assert_int_eq(runtime_http_result_upgraded(NULL, &up), -EINVAL);
	req.upgrade = "bad\r\nvalue";
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), -EINVAL);
	runtime_http_client_destroy(cl);
	lib_stop();
}

START_TEST(test_client_upgrade)
{
	run(upgrade_body, 1);
}
END_TEST

/* --------------------------------------------------------------- destroy */

struct in_flight {
	struct runtime_http_client *cl;
	uint16_t port;
	_Atomic int status;          /* 0 until done */
	struct runtime_waitgroup wg;
};

/* On the other core: a request answered after 400 ms, its result held
 * 100 ms more before it is read and closed. */
static void slow_request(void *arg)
{
	struct in_flight *f = arg;
	char u[128], *body;
	size_t len;
	struct runtime_http_result *res = NULL;

	snprintf(u, sizeof(u), "http://127.0.0.1:%u/delay?ms=400", f->port);
	int rc = runtime_http_get(f->cl, u, &res);
	if (rc == 0) {
		runtime_sleep(100 * MS);
		rc = runtime_http_result_read_all(res, &body, &len, 100);
		if (rc == 0)
			free(body);
		rc = rc ? rc : runtime_http_result_status(res);
		runtime_http_result_close(res);
	}
	atomic_store(&f->status, rc);
	runtime_waitgroup_done(&f->wg);
}

/* A request begun while destroy waits is refused. */
static void *late_request(void *arg)
{
	struct in_flight *f = arg;
	struct runtime_http_result *res = NULL;
	char u[128];

	runtime_sleep(150 * MS);
	snprintf(u, sizeof(u), "http://127.0.0.1:%u/hello", f->port);
	return (void *)(intptr_t)runtime_http_get(f->cl, u, &res);
}

/* Destroy with a request under way on another core and a result open:
 * it waits for both, refuses what begins meanwhile (-ESHUTDOWN), then
 * closes the pools of every core. */
static void destroy_in_flight_body(void *arg)
{
	struct in_flight f = { .cl = client(8), .wg = RUNTIME_WAITGROUP_INIT };

	(void)arg;
	f.port = lib_start(NULL);
	ck_assert_int_eq(get(f.cl, url("http", f.port, "/hello"), NULL, NULL), 200); /* pooled here */
	runtime_waitgroup_add(&f.wg, 1);
	ck_assert_int_eq(runtime_spawn_on(runtime_current(), 1, slow_request, &f), 0);
	runtime_sleep(50 * MS);
	struct runtime_fiber *late = start(late_request, &f);
	uint64_t t0 = runtime_now();
	runtime_http_client_destroy(f.cl);
	ck_assert_uint_ge(runtime_now() - t0, 300 * MS);
	ck_assert_int_eq(atomic_load(&f.status), 200);
	ck_assert_int_eq(join(late), -ESHUTDOWN);
	ck_assert_int_eq(runtime_waitgroup_wait(&f.wg, -1), 0);
	struct runtime_http_server_stats st; /* the pooled ones of both cores: closed */
	for (int i = 0; i < 5000 && (runtime_http_server_stats(lib_srv, &st), st.conns.live); i++)
		runtime_sleep(MS);
	ck_assert_uint_eq(st.conns.live, 0);
	ck_assert_uint_eq(st.conns.accepted, 2);
	lib_stop();
}

START_TEST(test_client_destroy_waits_for_requests)
{
	run(destroy_in_flight_body, 2);
}
END_TEST

/* ------------------------------------------------------------- the request */

static void bad_requests_body(void *arg)
{
	uint16_t port = lib_start(NULL);
	struct runtime_http_client *cl = client(8);
	struct runtime_http_client_request req = { 0 };
	struct runtime_http_result *res = (void *)1;
	static const char *const bad_urls[] = {
		"127.0.0.1/x", "http:/x", "http://", "http://u:p@h/", "http://h:0/", "http://h:99999/",
		"http://h/a b", "http://h/%zz", "http://h/\x7f", "http://[::1/", "http://h\t/",
	};

	(void)arg;
	for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++)
		ck_assert_int_eq(runtime_http_get(cl, bad_urls[i], &res), -EINVAL);
	ck_assert_ptr_null(res);
	ck_assert_int_eq(runtime_http_get(cl, "ftp://h/", &res), -EPROTONOSUPPORT);
	ck_assert_int_eq(runtime_http_get(cl, "mailto:a@b", &res), -EPROTONOSUPPORT);
	req.url = url("http", port, "/echo");
	static const char *const bad_headers[][2] = {
		{ "X: a\r\nY: b", NULL }, { "X: a\nb", NULL }, { "X a", NULL }, { ": a", NULL },
		{ "Host: h", NULL }, { "content-length: 1", NULL }, { "Transfer-Encoding: chunked", NULL },
		{ "Connection: close", NULL }, { "X\x01: a", NULL }, { "Upgrade: h2c", NULL },
	};
	for (size_t i = 0; i < sizeof(bad_headers) / sizeof(bad_headers[0]); i++) {
		req.headers = bad_headers[i];
		ck_assert_int_eq(runtime_http_request(cl, &req, &res), -EINVAL);
	}
	req.headers = NULL;
	req.method = "G ET";
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), -EINVAL);
	req.method = NULL;
	req.body_len = 3; /* no body */
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), -EINVAL);
	ck_assert_uint_eq(stats(cl).requests, 0);
	/* User-Agent: the default, the caller's own, and the caller's field. */
	const char *ua[] = { "User-Agent: mine/1", "X-Test: t", NULL };
	req = (struct runtime_http_client_request){ .url = url("http", port, "/echo"), .headers = ua };
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), 0);
	ck_assert(!memcmp(runtime_http_result_header(res, "X-Seen")->p, "mine/1|t|-", 10));
	runtime_http_result_close(res);
	ck_assert_int_eq(runtime_http_get(cl, url("http", port, "/echo"), &res), 0);
	ck_assert(!memcmp(runtime_http_result_header(res, "X-Seen")->p, "runtime|none|-", 14));
	ck_assert_int_eq(runtime_http_result_header_count(res), 7);
	struct runtime_http_slice name;
	ck_assert_int_eq(runtime_http_result_header_at(res, 0, &name, NULL), 0);
	ck_assert_int_eq(runtime_http_result_header_at(res, 7, &name, NULL), -ENOENT);
	runtime_http_result_close(res);
	runtime_http_client_destroy(cl);
	lib_stop();
}

START_TEST(test_client_bad_requests)
{
	struct runtime_http_client *cl;
	struct runtime_http_result *res = NULL;
	struct runtime_http_client_config cfg;

	run(bad_requests_body, 1);
	/* Outside a fiber, and bad arguments. */
	ck_assert_int_eq(runtime_http_client_create(&cl, NULL), 0);
	ck_assert_int_eq(runtime_http_get(cl, "http://127.0.0.1/", &res), -EPERM);
	ck_assert_int_eq(runtime_http_get(cl, NULL, &res), -EINVAL);
	ck_assert_int_eq(runtime_http_get(NULL, "http://127.0.0.1/", &res), -EINVAL);
	runtime_http_client_destroy(cl);
	runtime_http_client_destroy(NULL);
	runtime_http_client_config_init(&cfg);
	cfg.user_agent = "bad\r\nagent";
	ck_assert_int_eq(runtime_http_client_create(&cl, &cfg), -EINVAL);
	ck_assert_int_eq(runtime_http_client_create(NULL, &cfg), -EINVAL);
}
END_TEST

/* ------------------------------------------------------------------- cores */

enum { PER_FIBER = 30 };
static struct runtime_http_client *shared;
static uint16_t shared_port;
static struct runtime_waitgroup shared_wg;

static void core_worker(void *arg)
{
	char u[64]; /* its own: url()'s buffer is one for all */

	(void)arg;
	snprintf(u, sizeof(u), "http://127.0.0.1:%u/hello", shared_port);
	for (int i = 0; i < PER_FIBER; i++)
		ck_assert_int_eq(get(shared, u, NULL, NULL), 200);
	runtime_waitgroup_done(&shared_wg);
}

/* Fibers of both cores share one client: a pool per core, so at most one
 * connection per core for requests made one after another there. */
static void cores_body(void *arg)
{
	(void)arg;
	shared_port = lib_start(NULL);
	shared = client(8);
	runtime_waitgroup_add(&shared_wg, 2);
	for (unsigned c = 0; c < 2; c++)
		ck_assert_int_eq(runtime_spawn_on(runtime_current(), c, core_worker, NULL), 0);
	ck_assert_int_eq(runtime_waitgroup_wait(&shared_wg, -1), 0);
	struct runtime_http_client_stats st = stats(shared);
	ck_assert_uint_eq(st.requests, 2 * PER_FIBER);
	ck_assert_uint_eq(st.connects, 2);
	runtime_http_client_destroy(shared); /* closes core 1's pool there */
	lib_stop();
}

START_TEST(test_client_two_cores)
{
	run(cores_body, 2);
}
END_TEST

/* ----------------------------------------------------------------- HTTP/2 */

static struct runtime_http_client *h2c_client(unsigned max_streams)
{
	struct runtime_http_client_config cfg;
	struct runtime_http_client *cl;

	runtime_http_client_config_init(&cfg);
	cfg.h2c = 1;
	cfg.h2_max_streams = max_streams;
	ck_assert_int_eq(runtime_http_client_create(&cl, &cfg), 0);
	return cl;
}

/* A request with a body (fixed, or streamed from src) to u: the status,
 * and the answer's body into *body. */
static int post(struct runtime_http_client *cl, const char *u, const void *fixed, size_t n,
                struct source *src, char **body, size_t *len)
{
	struct runtime_http_client_request req = { .method = "POST", .url = u, .body = fixed,
		                                    .body_len = n, .body_read = src ? produce : NULL,
		                                    .body_arg = src };
	const char *const fields[] = { "X-Test: over h2", NULL };
	struct runtime_http_result *res = NULL;

	req.headers = fields;
	int rc = runtime_http_request(cl, &req, &res);
	if (rc < 0)
		return rc;
	int status = runtime_http_result_status(res);
	rc = runtime_http_result_read_all(res, body, len, 16 << 20);
	runtime_http_result_close(res);
	return rc < 0 ? rc : status;
}

/* The client's calls over h2c, as over HTTP/1.1: one connection for all,
 * bodies both ways larger than a stream's window (flow control), every
 * framing of the result, a result closed before its body is read (the
 * stream reset, the connection kept), redirects. */
static void h2c_body(void *arg)
{
	uint16_t port = lib_start(NULL);
	struct runtime_http_client *cl = h2c_client(0);
	static char fixed[300000];
	struct source src = { .total = 200000 };
	struct runtime_http_result *res = NULL;
	char *body;
	size_t len;

	(void)arg;
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(get(cl, url("http", port, "/hello"), &body, &len), 200);
		ck_assert(len == 5 && !memcmp(body, "hello", 5));
		free(body);
	}
	ck_assert_int_eq(get(cl, url("http", port, "/chunked?n=200000"), &body, &len), 200);
	ck_assert(len == 200000 && is_pattern(body, len));
	free(body);
	ck_assert_int_eq(get(cl, url("http", port, "/delay"), &body, &len), 200);
	ck_assert_str_eq(body, "20");
	free(body);
	for (size_t i = 0; i < sizeof(fixed); i++)
		fixed[i] = pattern(i);
	ck_assert_int_eq(post(cl, url("http", port, "/echo"), fixed, sizeof(fixed), NULL, &body,
	                      &len), 200);
	ck_assert(len == sizeof(fixed) && is_pattern(body, len));
	free(body);
	ck_assert_int_eq(post(cl, url("http", port, "/echo"), NULL, 0, &src, &body, &len), 200);
	ck_assert(len == 200000 && is_pattern(body, len));
	free(body);
	ck_assert_int_eq(runtime_http_get(cl, url("http", port, "/big?n=1000000"), &res), 0);
	ck_assert_int_eq(runtime_http_result_length(res), 1000000);
	runtime_http_result_close(res); /* unread: reset, the connection stays */
	struct runtime_http_client_request head = { .method = "HEAD",
		                                    .url = url("http", port, "/big?n=77") };
	ck_assert_int_eq(runtime_http_request(cl, &head, &res), 0);
	ck_assert_int_eq(runtime_http_result_length(res), 77);
	ck_assert_int_eq(runtime_http_result_read(res, fixed, 10), 0);
	runtime_http_result_close(res);
	ck_assert_int_eq(get(cl, url("http", port, "/status?s=204"), NULL, NULL), 204);
	struct runtime_http_client_request r = redirected(url("http", port, "/r?n=3"), 5);
	char out[64];
	ck_assert_int_eq(fetch(cl, &r, out, sizeof(out)), 200);
	ck_assert_str_eq(out, "done GET 0");
	struct runtime_http_client_stats st = stats(cl);
	ck_assert_uint_eq(st.connects, 1);
	ck_assert_uint_eq(st.h2_requests, st.requests);
	runtime_http_client_destroy(cl);
	lib_stop();
}

START_TEST(test_client_h2c)
{
	run(h2c_body, 1);
}
END_TEST

/* The head's and the idle read's timeouts over HTTP/2 as over HTTP/1.1:
 * each ends its stream and says so; the connection serves the next. */
static void h2c_timeouts_body(void *arg)
{
	uint16_t port = lib_start(NULL);
	struct runtime_http_client *cl = h2c_client(0);
	struct runtime_http_client_request req = { .url = url("http", port, "/delay?ms=800"),
		                                    .head_timeout_ns = 150 * MS };
	struct runtime_http_result *res = NULL;
	char buf[16];
	uint64_t ms;
	int which;

	(void)arg;
	ck_assert_int_eq(timed(cl, &req, &res, &which, &ms), -ETIMEDOUT);
	ck_assert_msg(which == RUNTIME_HTTP_TIMEOUT_HEAD && ms >= 140, "%d %llu ms", which,
	              (unsigned long long)ms);
	req.url = url("http", port, "/trickle?ms=800");
	req.read_idle_ns = 150 * MS;
	ck_assert_int_eq(timed(cl, &req, &res, &which, &ms), 0);
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), 4);
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), -ETIMEDOUT);
	ck_assert_int_eq(runtime_http_result_timeout(res), RUNTIME_HTTP_TIMEOUT_IDLE);
	runtime_http_result_close(res);
	req.url = url("http", port, "/trickle?ms=50");
	req.read_idle_ns = 2 * SEC;
	ck_assert_int_eq(timed(cl, &req, &res, &which, &ms), 0);
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), 4);
	ck_assert_int_eq(runtime_http_result_read(res, buf, sizeof(buf)), 4);
	ck_assert_int_eq(runtime_http_result_timeout(res), RUNTIME_HTTP_TIMEOUT_NONE);
	runtime_http_result_close(res);
	ck_assert_uint_eq(stats(cl).connects, 1);
	runtime_http_client_destroy(cl);
	lib_stop();
}

START_TEST(test_client_h2c_timeouts)
{
	run(h2c_timeouts_body, 1);
}
END_TEST

struct many {
	struct runtime_http_client *cl;
	uint16_t port;
	const char *path;
	_Atomic int ok;
	struct runtime_waitgroup wg;
};

static void many_worker(void *arg)
{
	struct many *m = arg;
	char *body;
	size_t len;

	if (get(m->cl, url("http", m->port, m->path), &body, &len) == 200) {
		atomic_fetch_add(&m->ok, !strcmp(body, "20"));
		free(body);
	}
	runtime_waitgroup_done(&m->wg);
}

static void many_at_once(struct many *m, unsigned n)
{
	runtime_waitgroup_add(&m->wg, n);
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(runtime_spawn(runtime_current(), many_worker, m), 0);
	ck_assert_int_eq(runtime_waitgroup_wait(&m->wg, -1), 0);
}

/* Fibers that request at once share one connection, a stream each (the
 * first dials, the others wait for it); past what the server takes at
 * once (its SETTINGS_MAX_CONCURRENT_STREAMS) or the client's own
 * h2_max_streams, more connections. */
static void multiplexed_body(void *arg)
{
	struct many m = { .path = "/delay?ms=100", .wg = RUNTIME_WAITGROUP_INIT };
	struct runtime_http_server_stats ss;

	(void)arg;
	m.port = lib_start(NULL);
	m.cl = h2c_client(0);
	many_at_once(&m, 50);
	ck_assert_int_eq(atomic_load(&m.ok), 50);
	ck_assert_uint_eq(stats(m.cl).connects, 1);
	runtime_http_server_stats(lib_srv, &ss);
	ck_assert_uint_eq(ss.conns.accepted, 1);
	runtime_http_client_destroy(m.cl);
	m.cl = h2c_client(10); /* the client's bound: 10 a connection */
	atomic_store(&m.ok, 0);
	many_at_once(&m, 30);
	ck_assert_int_eq(atomic_load(&m.ok), 30);
	ck_assert_uint_eq(stats(m.cl).connects, 3);
	runtime_http_client_destroy(m.cl);
	lib_stop();
}

START_TEST(test_client_h2_multiplexed)
{
	run(multiplexed_body, 1);
}
END_TEST

/* The server's own bound (4 handlers at once): the client keeps to it
 * once its SETTINGS came, a stream refused before is sent again. */
static void server_bound_body(void *arg)
{
	struct many m = { .path = "/delay?ms=100", .wg = RUNTIME_WAITGROUP_INIT };

	(void)arg;
	lib_h2_max_streams = 4;
	m.port = lib_start(NULL);
	m.cl = h2c_client(0);
	ck_assert_int_eq(get(m.cl, url("http", m.port, "/hello"), NULL, NULL), 200);
	many_at_once(&m, 12);
	ck_assert_int_eq(atomic_load(&m.ok), 12);
	ck_assert_uint_eq(stats(m.cl).connects, 3);
	runtime_http_client_destroy(m.cl);
	lib_stop();
	lib_h2_max_streams = 0;
}

START_TEST(test_client_h2_server_bound)
{
	run(server_bound_body, 1);
}
END_TEST

/* A server that sends GOAWAY naming no stream it took: the request goes
 * again on a new connection, where a hand-made answer waits (HPACK's
 * static ":status 200", a DATA frame "ok"). */
static int goaway_server(void *arg)
{
	static const char away[] = "\0\0\0\4\0\0\0\0\0" "\0\0\10\7\0\0\0\0\0" "\0\0\0\0\0\0\0\0";
	static const char answer[] = "\0\0\0\4\0\0\0\0\0" "\0\0\1\1\4\0\0\0\1" "\x88"
	                             "\0\0\2\0\1\0\0\0\1" "ok";
	int lfd = (int)(intptr_t)arg;
	char buf[4096];

	for (int i = 0; i < 2; i++) {
		int fd = runtime_accept(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return fd;
		runtime_recv(fd, buf, sizeof(buf), 0); /* the preface, SETTINGS, HEADERS */
		const char *a = i ? answer : away;
		size_t n = i ? sizeof(answer) - 1 : sizeof(away) - 1;
		runtime_send_all(fd, a, n, NULL);
		runtime_sleep(100 * MS);
		runtime_close(fd);
	}
	return 0;
}

static void goaway_body(void *arg)
{
	int lfd = runtime_tcp_listen("127.0.0.1", 0, 4, 0);
	struct runtime_group *g;
	char *body;
	size_t len;

	(void)arg;
	ck_assert_int_eq(runtime_group_create(&g, 0), 0);
	ck_assert_int_eq(runtime_group_spawn(g, goaway_server, (void *)(intptr_t)lfd), 0);
	struct runtime_http_client *cl = h2c_client(0);
	ck_assert_int_eq(get(cl, url("http", bound_port(lfd), "/"), &body, &len), 200);
	ck_assert_str_eq(body, "ok");
	free(body);
	struct runtime_http_client_stats st = stats(cl);
	ck_assert_uint_eq(st.connects, 2);
	ck_assert_uint_eq(st.retried, 1);
	runtime_http_client_destroy(cl);
	ck_assert_int_eq(runtime_group_wait(g, -1, NULL), 0);
	runtime_group_destroy(g);
	runtime_close(lfd);
}

START_TEST(test_client_h2_goaway_retried)
{
	run(goaway_body, 1);
}
END_TEST

/* A deadline passes while the answer is awaited: -ETIMEDOUT, the stream
 * reset, the connection still good for the next request. A cancelled
 * request too. */
static void *h2_cancelled_get(void *arg)
{
	return (void *)(intptr_t)get(arg, url_buf, NULL, NULL);
}

static void h2_deadline_body(void *arg)
{
	uint16_t port = lib_start(NULL);
	struct runtime_http_client *cl = h2c_client(0);
	struct runtime_http_client_request req = { .url = url("http", port, "/delay?ms=2000"),
		                                    .deadline_ns = runtime_now() + 200 * MS };
	struct runtime_http_result *res = NULL;

	(void)arg;
	ck_assert_int_eq(runtime_http_request(cl, &req, &res), -ETIMEDOUT);
	ck_assert_int_eq(get(cl, url("http", port, "/hello"), NULL, NULL), 200);
	url("http", port, "/delay?ms=2000");
	struct runtime_fiber *f = start(h2_cancelled_get, cl);
	runtime_sleep(100 * MS);
	ck_assert_int_eq(runtime_fiber_cancel(f), 0);
	ck_assert_int_eq(join(f), -ECANCELED);
	ck_assert_int_eq(get(cl, url("http", port, "/hello"), NULL, NULL), 200);
	ck_assert_uint_eq(stats(cl).connects, 1);
	runtime_http_client_destroy(cl);
	lib_stop();
}

START_TEST(test_client_h2_deadline_and_cancel)
{
	run(h2_deadline_body, 1);
}
END_TEST

/* ------------------------------------------------------------------- HTTPS */

static struct pem ca, leaf;
static char tmpdir[64], ca_path[600];

static struct runtime_tls *tls_ctx(int side, bool insecure)
{
	struct runtime_tls_config cfg;
	struct runtime_tls *t;

	runtime_tls_config_init(&cfg);
	cfg.side = side;
	cfg.alpn = "http/1.1";
	cfg.ca_file = side == RUNTIME_TLS_CLIENT ? ca_path : NULL;
	ck_assert_int_eq(runtime_tls_create(&t, &cfg), 0);
	if (side == RUNTIME_TLS_SERVER)
		ck_assert_int_eq(runtime_tls_add_cert(t, leaf.cert, leaf.key, RUNTIME_TLS_PEM), 0);
	if (insecure)
		ck_assert_int_eq(runtime_tls_insecure_skip_verify(t), 0);
	return t;
}

static struct runtime_http_client *tls_client(struct runtime_tls *tls)
{
	struct runtime_http_client_config cfg;
	struct runtime_http_client *cl;

	runtime_http_client_config_init(&cfg);
	cfg.tls = tls;
	ck_assert_int_eq(runtime_http_client_create(&cl, &cfg), 0);
	return cl;
}

static struct runtime_tls *server_tls_to_free;

struct cut {
	struct runtime_tls *tls;
	int lfd;
};

/* One TLS connection: the request read, half a head sent, then the
 * socket shut down under the session (no close_notify). 0, or -errno. */
static void *cut_tls_answer(void *arg)
{
	struct cut *cut = arg;
	struct runtime_conn *c;
	char req[4096];
	size_t got = 0;
	int fd = runtime_accept(cut->lfd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0 || runtime_conn_open(&c, fd, 0) < 0)
		return (void *)(intptr_t)-EIO;
	intptr_t rc = runtime_conn_tls_accept(c, cut->tls);
	while (rc == 0 && !memmem(req, got, "\r\n\r\n", 4)) {
		ssize_t n = runtime_conn_read(c, req + got, sizeof(req) - got);
		rc = n > 0 ? 0 : -EIO;
		got += n > 0 ? (size_t)n : 0;
	}
	if (rc == 0)
		rc = runtime_conn_write(c, "HTTP/1.1 200 OK\r\nContent-Le", 27, NULL) == 27 ? 0 : -EIO;
	shutdown(fd, SHUT_RDWR);
	runtime_conn_close(c);
	return (void *)rc;
}

static void https_body(void *arg)
{
	struct runtime_tls *server = tls_ctx(RUNTIME_TLS_SERVER, false);
	struct runtime_tls *verify = tls_ctx(RUNTIME_TLS_CLIENT, false);
	struct runtime_tls *insecure = tls_ctx(RUNTIME_TLS_CLIENT, true);
	uint16_t port = lib_start(server);
	struct runtime_http_client *cl = tls_client(verify);
	char *body, u[128];
	size_t len;

	(void)arg;
	for (int i = 0; i < 5; i++) { /* the certificate names 127.0.0.1 */
		ck_assert_int_eq(get(cl, url("https", port, "/chunked?n=20000"), &body, &len), 200);
		ck_assert(len == 20000 && is_pattern(body, len));
		free(body);
	}
	ck_assert_uint_eq(stats(cl).connects, 1);
	/* "localhost" resolves (on the offload pool) but is not a name of it. */
	snprintf(u, sizeof(u), "https://localhost:%u/hello", port);
	ck_assert_int_eq(get(cl, u, NULL, NULL), -EKEYREJECTED);
	runtime_http_client_destroy(cl);
	cl = tls_client(insecure); /* no verification: any name */
	ck_assert_int_eq(get(cl, u, &body, &len), 200);
	ck_assert_str_eq(body, "hello");
	free(body);
	runtime_http_client_destroy(cl);
	/* The default context (the system's CAs, made at the first https
	 * request) does not know the test CA. */
	cl = client(8);
	int rc = get(cl, url("https", port, "/hello"), NULL, NULL);
	ck_assert_msg(rc == -EKEYREJECTED || rc == -ENOENT, "system CAs: %d", rc);
	/* Plain HTTP to the TLS port is no answer. */
	rc = get(cl, url("http", port, "/hello"), NULL, NULL);
	ck_assert_msg(rc == -EBADMSG || rc == -ECONNRESET, "http to https: %d", rc);
	runtime_http_client_destroy(cl);
	lib_stop();
	/* A TLS server that cuts its answer mid-head with no close_notify:
	 * -ECONNRESET, as for plain TCP (it was -ECONNABORTED, which the
	 * client's contract does not name). */
	struct cut cut = { .tls = server, .lfd = runtime_tcp_listen("127.0.0.1", 0, 4, 0) };
	ck_assert_int_ge(cut.lfd, 0);
	struct runtime_fiber *f = start(cut_tls_answer, &cut);
	cl = tls_client(verify);
	ck_assert_int_eq(get(cl, url("https", bound_port(cut.lfd), "/"), NULL, NULL), -ECONNRESET);
	ck_assert_int_eq(join(f), 0);
	runtime_http_client_destroy(cl);
	runtime_close(cut.lfd);
	runtime_tls_destroy(verify);
	runtime_tls_destroy(insecure);
	server_tls_to_free = server; /* destroyed after the server */
}

/* Over TLS the server offers h2 first (it wraps the caller's context),
 * a client that offers it too speaks HTTP/2; one with no_h2 offered the
 * same context refuses the h2 the server then picks (-ENOPROTOOPT). */
static void h2_tls_body(void *arg)
{
	struct runtime_tls *server = tls_ctx(RUNTIME_TLS_SERVER, false);
	struct runtime_tls_config tc;
	struct runtime_tls *h2 = NULL;
	char *body;
	size_t len;

	(void)arg;
	runtime_tls_config_init(&tc);
	tc.side = RUNTIME_TLS_CLIENT;
	tc.alpn = "h2,http/1.1";
	tc.ca_file = ca_path;
	ck_assert_int_eq(runtime_tls_create(&h2, &tc), 0);
	uint16_t port = lib_start(server);
	struct runtime_http_client *cl = tls_client(h2);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(get(cl, url("https", port, "/delay"), &body, &len), 200);
		ck_assert_str_eq(body, "20");
		free(body);
	}
	struct runtime_http_client_stats st = stats(cl);
	ck_assert(st.connects == 1 && st.h2_requests == 3);
	runtime_http_client_destroy(cl);
	struct runtime_http_client_config cfg;
	runtime_http_client_config_init(&cfg);
	cfg.tls = h2;
	cfg.no_h2 = 1;
	ck_assert_int_eq(runtime_http_client_create(&cl, &cfg), 0);
	ck_assert_int_eq(get(cl, url("https", port, "/delay"), NULL, NULL), -ENOPROTOOPT);
	runtime_http_client_destroy(cl);
	lib_stop();
	runtime_tls_destroy(h2);
	server_tls_to_free = server;
}

START_TEST(test_client_h2_over_tls)
{
	ca = tls_make_cert(NULL, "Test CA", NULL, -3600, 86400);
	leaf = tls_make_cert(&ca, "a.test", "DNS:a.test,IP:127.0.0.1", -3600, 86400);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_http_client.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(ca_path, sizeof(ca_path), "%s", tls_write_file(tmpdir, "ca.pem", ca.cert));
	run(h2_tls_body, 1);
	runtime_tls_destroy(server_tls_to_free);
	unlink(ca_path);
	rmdir(tmpdir);
	tls_free_cert(&leaf);
	tls_free_cert(&ca);
}
END_TEST

START_TEST(test_client_https)
{
	ca = tls_make_cert(NULL, "Test CA", NULL, -3600, 86400);
	leaf = tls_make_cert(&ca, "a.test", "DNS:a.test,IP:127.0.0.1", -3600, 86400);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_http_client.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(ca_path, sizeof(ca_path), "%s", tls_write_file(tmpdir, "ca.pem", ca.cert));
	run(https_body, 1);
	runtime_tls_destroy(server_tls_to_free);
	unlink(ca_path);
	rmdir(tmpdir);
	tls_free_cert(&leaf);
	tls_free_cert(&ca);
}
END_TEST

static Suite *client_suite(void)
{
	Suite *s = suite_create("http_client");
	TCase *tc = tcase_create("client");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_client_keepalive_reuse);
	tcase_add_test(tc, test_client_chunked_and_length);
	tcase_add_test(tc, test_client_head_204_304);
	tcase_add_test(tc, test_client_read_until_close);
	tcase_add_test(tc, test_client_interim_skipped);
	tcase_add_test(tc, test_client_malformed_responses);
	tcase_add_test(tc, test_client_limits);
	tcase_add_test(tc, test_client_retry_idempotent_only);
	tcase_add_test(tc, test_client_pool_drops_unasked_bytes);
	tcase_add_test(tc, test_client_deadline);
	tcase_add_test(tc, test_client_timeouts_say_which);
	tcase_add_test(tc, test_client_h2c_timeouts);
	tcase_add_test(tc, test_client_connect_timeout);
	tcase_add_test(tc, test_client_cancel);
	tcase_add_test(tc, test_client_redirects);
	tcase_add_test(tc, test_client_redirect_other_origin);
	tcase_add_test(tc, test_client_streamed_body);
	tcase_add_test(tc, test_client_early_answer_stops_the_body);
	tcase_add_test(tc, test_client_bad_requests);
	tcase_add_test(tc, test_client_two_cores);
	tcase_add_test(tc, test_client_destroy_waits_for_requests);
	tcase_add_test(tc, test_client_idle_pool_closed_by_time);
	tcase_add_test(tc, test_client_upgrade);
	tcase_add_test(tc, test_client_https);
	suite_add_tcase(s, tc);
	tc = tcase_create("h2");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_client_h2c);
	tcase_add_test(tc, test_client_h2_multiplexed);
	tcase_add_test(tc, test_client_h2_server_bound);
	tcase_add_test(tc, test_client_h2_goaway_retried);
	tcase_add_test(tc, test_client_h2_deadline_and_cancel);
	tcase_add_test(tc, test_client_h2_over_tls);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(client_suite)
