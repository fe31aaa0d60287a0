/* SPDX-License-Identifier: MIT */
/*
 * check_http_lib.c - libruntime-http's server API from a handler's side:
 * what a request gives (method, target, path and query of both forms,
 * fields with repeats, the version), the body as a stream (Content-Length,
 * chunked with trailers, 100-continue sent on the first read only), every
 * kind of response (fixed, streamed with a length, chunked, close-delimited
 * for HTTP/1.0, a file, HEAD, 204 and 304), the framing kept honest when a
 * handler fails or misuses a call, bad bodies seen by the handler as
 * errors, the decoding helpers, the counters and the drain.
 *
 * One runtime serves on port 0 from its own thread; the clients are the
 * test's thread with blocking sockets, reading until the server closes or
 * a whole response (Content-Length or chunked) has come.
 */
#include "testutil.h"
#include "h2_client.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <runtime_http.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SEC 1000000000ull

/* ------------------------------------------------------------- the server */

static struct runtime *rt;
static struct runtime_http_server *srv;
static pthread_t runner;
static uint16_t port;
static _Atomic int seen_error; /* a body error a handler saw */
static char file_path[64], big_path[64], span_path[64];
#define SPAN_FILE (3 << 20) /* /span's file: byte i is span_byte(i) */

static char span_byte(size_t i)
{
	return (char)('A' + (i * 7) % 26);
}
#define BIG_FILE (64 * 1024) /* read and sent in steps, each with its deadline */
#define FLOOD (32u << 20)     /* more than the sockets hold */

static int handler(struct runtime_http_request *req, struct runtime_http_response *res, void *arg);
static int host_of(struct runtime_http_request *req, struct runtime_http_response *res);
static int echo_big(struct runtime_http_request *req, struct runtime_http_response *res);

/* The server's thread: it makes the runtime (which only it may run),
 * serves, and tears down when the run ends. */
static uint64_t release_after_ns = 10 * 1000 * 1000, idle_timeout_ns = 60 * SEC;
static uint64_t header_timeout_ns = 5 * SEC;
static void (*on_response)(const struct runtime_http_request *req,
                           const struct runtime_http_response *res, void *arg);
static int no_batch;
static uint64_t body_max = 4096;
static unsigned max_streams;
static size_t fields_out_max; /* 0: the default (64 KiB) */
static uint64_t body_min_rate = 240, body_rate_grace_ns = 5 * SEC; /* the defaults */
static int access_log_format, access_log_fd = 1;
static int no_cancel_on_close;
static _Atomic int wait_rc = 1; /* /wait's sleep: 1 before, 2 during, then its result */

/* Until /wait's handler has begun (bounded: 20 s, for qemu). */
static void wait_begun(void (*pump)(void *), void *arg)
{
	for (int i = 0; i < 2000 && atomic_load(&wait_rc) == 1; i++)
		pump ? pump(arg) : (void)usleep(10 * 1000);
	ck_assert_int_eq(atomic_load(&wait_rc), 2);
}

static void *run(void *arg)
{
	struct runtime_http_server_config cfg;
	sem_t *ready = arg;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	runtime_http_server_config_init(&cfg);
	cfg.serve.host = "127.0.0.1";
	cfg.handler = handler;
	cfg.limits.body_max = body_max;
	cfg.h2_max_streams = max_streams;
	cfg.fields_out_max = fields_out_max;
	cfg.body_min_rate = body_min_rate;
	cfg.body_rate_grace_ns = body_rate_grace_ns;
	cfg.access_log_format = access_log_format;
	cfg.access_log_fd = access_log_fd;
	cfg.header_timeout_ns = header_timeout_ns;
	cfg.release_after_ns = release_after_ns;
	cfg.idle_timeout_ns = idle_timeout_ns;
	cfg.on_response = on_response;
	cfg.no_batch = no_batch;
	cfg.no_cancel_on_close = no_cancel_on_close;
	ck_assert_int_eq(runtime_http_serve(rt, &cfg, &srv), 0);
	port = runtime_http_server_port(srv);
	sem_post(ready);
	runtime_run(rt);
	return NULL;
}

static void serve_start(void)
{
	sem_t ready;

	sem_init(&ready, 0, 0);
	atomic_store(&seen_error, 0);
	ck_assert_int_eq(pthread_create(&runner, NULL, run, &ready), 0);
	sem_wait(&ready);
	sem_destroy(&ready);
	ck_assert_uint_ne(port, 0);
}

/* After the run has ended (joined). */
static void serve_end(void)
{
	pthread_join(runner, NULL);
	runtime_http_server_destroy(srv);
	runtime_destroy(rt);
}

static void serve_stop(void)
{
	runtime_shutdown(rt);
	serve_end();
}

/* ------------------------------------------------------------- the client */

static int dial(void)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	return fd;
}

static void send_str(int fd, const char *s)
{
	size_t n = strlen(s);
	ck_assert_int_eq(send(fd, s, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Bytes until the server closes (10 s at most), NUL-terminated. */
static size_t read_all(int fd, char *buf, size_t cap)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;

	while (got < cap - 1 && poll(&p, 1, 10000) == 1) {
		ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	return got;
}

/* Send req on a new connection, read until the server closes. */
static size_t exchange(const char *req, char *resp, size_t cap)
{
	int fd = dial();
	send_str(fd, req);
	size_t n = read_all(fd, resp, cap);
	close(fd);
	return n;
}

/* The server closed fd: a read sees end of stream within 10 s. */
static bool closed_by_server(int fd)
{
	char b;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 10000) == 1 && recv(fd, &b, 1, 0) == 0;
}

/* Read until buf holds needle (10 s at most). */
static bool read_until(int fd, char *buf, size_t cap, const char *needle)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = strlen(buf);

	while (!strstr(buf, needle) && got < cap - 1 && poll(&p, 1, 10000) == 1) {
		ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
		if (n <= 0)
			return false;
		got += (size_t)n;
		buf[got] = '\0';
	}
	return strstr(buf, needle) != NULL;
}

/* A connection to the started server that has had one answer (GET /info)
 * and now waits, kept alive, for its next request. */
static int dial_answered(char *r, size_t n)
{
	int fd = dial();

	send_str(fd, "GET /info HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert(read_until(fd, r, n, "/info\n"));
	return fd;
}

/* ------------------------------------------------------------ the handler */

static bool is(struct runtime_http_slice s, const char *lit)
{
	return s.len == strlen(lit) && !memcmp(s.p, lit, s.len);
}

static int text(struct runtime_http_response *res, int status, const char *body)
{
	return runtime_http_respond(res, status, "text/plain", body, strlen(body));
}

/* What the request looked like, one line a part. */
static int info(struct runtime_http_request *req, struct runtime_http_response *res)
{
	struct runtime_http_slice m = runtime_http_method(req), t = runtime_http_target(req);
	struct runtime_http_slice p = runtime_http_path(req), q = runtime_http_query(req);
	const struct runtime_http_slice *h = runtime_http_header(req, "x-ONE");
	char body[1024];
	int n = snprintf(body, sizeof(body), "%.*s\n%.*s\n%.*s\n%.*s\n1.%d\n%.*s\n", (int)m.len, m.p,
	                 (int)t.len, t.p, (int)p.len, p.p, (int)q.len, q.p, runtime_http_minor(req),
	                 h ? (int)h->len : 4, h ? h->p : "none");
	struct runtime_http_slice name, value;
	for (unsigned i = 0; runtime_http_header_at(req, i, &name, &value) == 0; i++)
		if (is(name, "X-Rep"))
			n += snprintf(body + n, sizeof(body) - (size_t)n, "rep=%.*s\n", (int)value.len,
			              value.p);
	ck_assert_int_eq(runtime_http_header_at(req, runtime_http_header_count(req), &name, &value),
	                 -ENOENT);
	return text(res, 200, body);
}

/* The body read 7 bytes at a time, sent back; an error is told. */
static int body(struct runtime_http_request *req, struct runtime_http_response *res)
{
	char all[8192], err[64];
	size_t got = 0;
	ssize_t n;

	while ((n = runtime_http_body_read(req, all + got, sizeof(all) - got < 7 ?
	                                   sizeof(all) - got : 7)) > 0)
		got += (size_t)n;
	if (n < 0) {
		atomic_store(&seen_error, (int)n);
		snprintf(err, sizeof(err), "error %d\n", (int)-n);
		return text(res, n == -EMSGSIZE ? 413 : 400, err);
	}
	return runtime_http_respond(res, 200, NULL, all, got);
}

/* /upgrade: protocol "echo" taken over after a 101 with a field of the
 * handler's; the early bytes, then what comes, echoed until the end. A
 * request that did not ask gets what runtime_http_upgrade said, in a 400. */
static int upgraded_echo(struct runtime_http_request *req, struct runtime_http_response *res)
{
	struct runtime_http_upgraded up;
	char buf[256], why[32];

	(void)req;
	ck_assert_int_eq(runtime_http_set_header(res, "X-Echo", "yes"), 0);
	int rc = runtime_http_upgrade(res, "echo", &up);
	if (rc < 0) {
		snprintf(why, sizeof(why), "upgrade %d\n", rc);
		return runtime_http_respond(res, 400, "text/plain", why, strlen(why));
	}
	ck_assert_int_eq(runtime_http_upgrade(res, "echo", &up), -EALREADY);
	ck_assert_int_eq(runtime_http_respond(res, 200, NULL, "x", 1), -EALREADY);
	size_t done = 0;
	if (up.early.len && runtime_conn_write(up.conn, up.early.p, up.early.len, &done) < 0)
		return 0;
	for (ssize_t n; (n = runtime_conn_read(up.conn, buf, sizeof(buf))) > 0;)
		if (runtime_conn_write(up.conn, buf, (size_t)n, &done) < 0)
			break;
	return 0;
}

/* set_header's refusals, then a response, then what is refused after. */
static int fields(struct runtime_http_request *req, struct runtime_http_response *res)
{
	char out[128];

	(void)req;
	int a = runtime_http_set_header(res, "Bad Name", "v");
	int b = runtime_http_set_header(res, "X-Split", "a\r\nInjected: 1");
	int c = runtime_http_set_header(res, "content-length", "5");
	int d = runtime_http_set_header(res, "X-Fine", "yes  it is");
	/* The library's own, or fields whose meaning it would carry out:
	 * each refused (-EPERM), none sent. */
	static const char *const reserved[] = { "Upgrade", "trailer", "Keep-Alive", "Host",
		                                "Content-Type", "Date" };
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		ck_assert_int_eq(runtime_http_set_header(res, reserved[i], "x-reserved"), -EPERM);
	snprintf(out, sizeof(out), "%d %d %d %d", a, b, c, d);
	ck_assert_int_eq(text(res, 200, out), 0);
	ck_assert_int_eq(runtime_http_set_header(res, "X-Late", "1"), -EALREADY);
	ck_assert_int_eq(text(res, 200, "again"), -EALREADY);
	ck_assert_int_eq(runtime_http_start(res, 200, NULL, 1), -EALREADY);
	return 0;
}

/* /bigfields?N: fields "X-Big-<i>: <BIG_VALUE bytes of 'a' + i % 26>" set
 * until N bytes are (or set_header fails); the body says how many and
 * the last set_header's return. */
#define BIG_VALUE 1000

static void big_value(char *v, unsigned i)
{
	memset(v, 'a' + (int)(i % 26), BIG_VALUE);
	v[BIG_VALUE] = '\0';
}

static int big_fields(struct runtime_http_request *req, struct runtime_http_response *res)
{
	struct runtime_http_slice q = runtime_http_query(req);
	size_t want = strtoul(q.len ? q.p : "0", NULL, 10), set = 0;
	char name[32], value[BIG_VALUE + 1], out[64];
	unsigned i = 0;
	int rc = 0;

	while (set < want && rc == 0) {
		snprintf(name, sizeof(name), "X-Big-%u", i);
		big_value(value, i);
		if ((rc = runtime_http_set_header(res, name, value)) == 0) {
			set += strlen(name) + BIG_VALUE + 4;
			i++;
		}
	}
	snprintf(out, sizeof(out), "%u %d", i, rc);
	return text(res, 200, out);
}

static int streams(struct runtime_http_request *req, struct runtime_http_response *res,
                   struct runtime_http_slice path)
{
	(void)req;
	if (is(path, "/chunked")) {
		ck_assert_int_eq(runtime_http_start(res, 200, "text/plain", RUNTIME_HTTP_CHUNKED), 0);
		for (int i = 0; i < 3; i++)
			ck_assert_int_eq(runtime_http_write(res, "piece;", 6), 0);
		return runtime_http_end(res);
	}
	if (is(path, "/length")) {
		ck_assert_int_eq(runtime_http_start(res, 200, NULL, 10), 0);
		ck_assert_int_eq(runtime_http_write(res, "hello", 5), 0);
		ck_assert_int_eq(runtime_http_write(res, "worlds", 6), -EMSGSIZE); /* over */
		ck_assert_int_eq(runtime_http_write(res, "world", 5), 0);
		return runtime_http_end(res);
	}
	if (is(path, "/short")) { /* less than promised: the close tells */
		ck_assert_int_eq(runtime_http_start(res, 200, NULL, 10), 0);
		ck_assert_int_eq(runtime_http_write(res, "hello", 5), 0);
		return runtime_http_end(res);
	}
	/* /abandon: a stream the handler fails in the middle of */
	ck_assert_int_eq(runtime_http_start(res, 200, NULL, RUNTIME_HTTP_CHUNKED), 0);
	ck_assert_int_eq(runtime_http_write(res, "part", 4), 0);
	return -EIO;
}

/* The core's last Content-Type is kept after its head start: a bad type
 * is refused and leaves it as it was, another replaces it, on any status. */
static int types(struct runtime_http_request *req, struct runtime_http_response *res)
{
	struct runtime_http_slice q = runtime_http_query(req);

	if (q.len == 1 && q.p[0] == 'b') {
		ck_assert_int_eq(runtime_http_respond(res, 200, "bad\r\ntype", "x", 1), -EINVAL);
		ck_assert_int_eq(runtime_http_respond(res, 200, "", "x", 1), -EINVAL);
		return runtime_http_respond(res, 404, "text/b", "b", 1);
	}
	if (q.len == 1 && q.p[0] == 'n')
		return runtime_http_respond(res, 200, NULL, "n", 1);
	return runtime_http_respond(res, 200, "text/a", "a", 1);
}

/* /tail?TNFL: a 200 (404 if N is 'n', else '-') of type text/a (T 'a')
 * or text/bbb (else), a field X-F if F is 'f' (else '-'), and L bytes
 * of body (L the rest): the alphabet over and over from its L'th letter,
 * so that no two lengths' bodies agree - the head start's tail and the
 * short bodies' copy (response.c) at work. */
static int tails(struct runtime_http_request *req, struct runtime_http_response *res)
{
	struct runtime_http_slice q = runtime_http_query(req);
	static char body[4096];
	size_t len = 0;

	ck_assert_uint_ge(q.len, 4);
	for (size_t i = 3; i < q.len; i++)
		len = len * 10 + (size_t)(q.p[i] - '0');
	ck_assert_uint_le(len, sizeof(body));
	for (size_t i = 0; i < len; i++)
		body[i] = (char)('a' + (i + len) % 26);
	if (q.p[2] == 'f')
		ck_assert_int_eq(runtime_http_set_header(res, "X-F", "1"), 0);
	return runtime_http_respond(res, q.p[1] == 'n' ? 404 : 200,
	                            q.p[0] == 'a' ? "text/a" : "text/bbb", body, len);
}

/* /type?PVALUE: a 200 of type VALUE, from one buffer every time (the
 * same pointer, whatever the value): at its page's start (P 's') or
 * ending at its page's end (else) - response.c's two ways of telling
 * the core's last type again (type_again). */
static int one_type(struct runtime_http_request *req, struct runtime_http_response *res)
{
	static char page[2 * 4096] __attribute__((aligned(4096)));
	struct runtime_http_slice q = runtime_http_query(req);

	ck_assert_uint_ge(q.len, 2);
	ck_assert_uint_lt(q.len, 64);
	char *t = q.p[0] == 's' ? page : page + 4096 - q.len;
	memcpy(t, q.p + 1, q.len - 1);
	t[q.len - 1] = '\0';
	return runtime_http_respond(res, 200, t, "t", 1);
}

/* /same?FTL: a 200 of L bytes (tails' alphabet) of type text/a (T 'a'),
 * none ('n') or a longer one (else), by runtime_http_respond (F 'r') or
 * streamed (start, write, end), after reading the body if F is upper
 * case; what the response says of itself after. */
static int same(struct runtime_http_request *req, struct runtime_http_response *res)
{
	struct runtime_http_slice q = runtime_http_query(req);
	static char body[4096];
	const char *type = q.p[1] == 'a' ? "text/a" : q.p[1] == 'n' ? NULL : "text/plain; v=1";
	bool head = is(runtime_http_method(req), "HEAD");
	size_t len = 0;
	char f = q.p[0];
	int rc;

	while (f >= 'A' && f <= 'Z' && runtime_http_body_read(req, body, sizeof(body)) > 0)
		;
	for (size_t i = 2; i < q.len; i++)
		len = len * 10 + (size_t)(q.p[i] - '0');
	ck_assert_uint_le(len, sizeof(body));
	for (size_t i = 0; i < len; i++)
		body[i] = (char)('a' + (i + len) % 26);
	if (f == 'r' || f == 'R') {
		rc = runtime_http_respond(res, 200, type, body, len);
		ck_assert_uint_eq(runtime_http_body_sent(res), rc == 0 && !head ? len : 0);
	} else if ((rc = runtime_http_start(res, 200, type, (int64_t)len)) == 0) {
		ck_assert_int_eq(runtime_http_write(res, body, len), 0);
		ck_assert_int_eq(runtime_http_end(res), 0);
	}
	ck_assert_int_eq(runtime_http_status(res), rc == 0 ? 200 : 0);
	ck_assert_int_eq(runtime_http_respond(res, 200, type, "x", 1), rc == 0 ? -EALREADY : 0);
	ck_assert_int_eq(runtime_http_set_header(res, "X-Late", "1"), -EALREADY);
	return 0;
}

/* The deadlines' handlers: /slowbody reads its body, then works 300 ms;
 * /slow works 300 ms; /bigfile sends BIG_FILE bytes of a file; /flood
 * streams FLOOD bytes. */
static int slow_ones(struct runtime_http_request *req, struct runtime_http_response *res,
                     struct runtime_http_slice path)
{
	if (is(path, "/bigfile")) {
		int fd = open(big_path, O_RDONLY | O_CLOEXEC);
		int rc = runtime_http_respond_file(res, 200, "text/plain", fd, 0, BIG_FILE);
		close(fd);
		return rc;
	}
	if (is(path, "/flood")) {
		static char piece[64 * 1024];
		int rc = runtime_http_start(res, 200, "text/plain", FLOOD);
		for (unsigned sent = 0; rc == 0 && sent < FLOOD; sent += sizeof(piece))
			rc = runtime_http_write(res, piece, sizeof(piece));
		return rc < 0 ? rc : runtime_http_end(res);
	}
	char buf[64];
	while (is(path, "/slowbody") && runtime_http_body_read(req, buf, sizeof(buf)) > 0)
		;
	ck_assert_int_eq(runtime_sleep(300 * 1000 * 1000), 0);
	return text(res, 200, "slept");
}

/* /span?OFF,LEN[,cold]: that range of span_path's file; cold: dropped
 * from the page cache first. */
static int span(struct runtime_http_request *req, struct runtime_http_response *res)
{
	struct runtime_http_slice q = runtime_http_query(req);
	char arg[64];
	unsigned long long off = 0, len = 0;

	snprintf(arg, sizeof(arg), "%.*s", (int)q.len, q.p);
	sscanf(arg, "%llu,%llu", &off, &len);
	int fd = open(span_path, O_RDONLY | O_CLOEXEC);
	if (strstr(arg, "cold"))
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	int rc = runtime_http_respond_file(res, 200, "text/plain", fd, off, len);
	close(fd);
	return rc;
}

/* /gate answers once gate_open requests have come in, all told (10 s at
 * most): that many are served at once, each with its connection buffer.
 * The answer, GATE_BODY bytes ending in "through", is copied into the
 * buffer's batch of answers: the request touches 5 of its pages. Where
 * each request's path lay - in its connection buffer - is noted in
 * gate_at, GATE_CONNS a round. */
#define GATE_BODY (12 * 1024)
#define GATE_CONNS 64 /* well past the 8 buffers a core keeps for good */
static _Atomic unsigned gate_in, gate_open;
static const char *gate_at[GATE_CONNS]; /* __atomic: written on the server's core */

static int gate(struct runtime_http_request *req, struct runtime_http_response *res)
{
	static char body[GATE_BODY];
	unsigned at = atomic_fetch_add(&gate_in, 1);

	__atomic_store_n(&gate_at[at % GATE_CONNS], runtime_http_path(req).p, __ATOMIC_RELAXED);
	for (int i = 0; i < 10000 && atomic_load(&gate_in) < atomic_load(&gate_open); i++)
		runtime_sleep(1000 * 1000);
	if (!body[0]) {
		memset(body, 'x', sizeof(body));
		memcpy(body + sizeof(body) - 7, "through", 7);
	}
	return runtime_http_respond(res, 200, "text/plain", body, sizeof(body));
}

static int handler(struct runtime_http_request *req, struct runtime_http_response *res, void *arg)
{
	struct runtime_http_slice path = runtime_http_path(req);

	(void)arg;
	if (is(path, "/info"))
		return info(req, res);
	if (is(path, "/body"))
		return body(req, res);
	if (is(path, "/noread"))
		return text(res, 200, "not read");
	if (is(path, "/fields"))
		return fields(req, res);
	if (is(path, "/bigfields"))
		return big_fields(req, res);
	if (is(path, "/chunked") || is(path, "/length") || is(path, "/short") || is(path, "/abandon"))
		return streams(req, res, path);
	if (is(path, "/types"))
		return types(req, res);
	if (is(path, "/tail"))
		return tails(req, res);
	if (is(path, "/type"))
		return one_type(req, res);
	if (is(path, "/same"))
		return same(req, res);
	if (is(path, "/slowbody") || is(path, "/slow") || is(path, "/bigfile") || is(path, "/flood"))
		return slow_ones(req, res, path);
	if (is(path, "/gate"))
		return gate(req, res);
	if (is(path, "/fail"))
		return -EIO;
	if (is(path, "/readall")) { /* a body read's error passed straight back */
		char *all;
		size_t n;
		int rc = runtime_http_body_read_all(req, &all, &n, 100);
		if (rc < 0)
			return rc;
		rc = runtime_http_respond(res, 200, NULL, all, n);
		free(all);
		return rc;
	}
	if (is(path, "/nothing"))
		return 0;
	if (is(path, "/wait")) { /* a handler waiting on a backend: 600 ms */
		atomic_store(&wait_rc, 2); /* begun */
		atomic_store(&wait_rc, runtime_sleep(600 * 1000 * 1000));
		return text(res, 200, "waited");
	}
	if (is(path, "/readwait")) { /* its body read in small reads, then a wait */
		char b[16];
		ssize_t n;
		while ((n = runtime_http_body_read(req, b, sizeof(b))) > 0)
			;
		atomic_store(&wait_rc, 2);
		atomic_store(&wait_rc, runtime_sleep(300 * 1000 * 1000));
		return n < 0 ? (int)n : text(res, 200, "read and waited");
	}
	if (is(path, "/upgrade"))
		return upgraded_echo(req, res);
	if (is(path, "/tagged")) { /* a slot for on_response */
		ck_assert_ptr_null(runtime_http_request_data(req));
		runtime_http_request_set_data(req, "tag-7");
		return text(res, 200, "tagged");
	}
	if (is(path, "/host"))
		return host_of(req, res);
	if (is(path, "/echobig"))
		return echo_big(req, res);
	if (is(path, "/healthz"))
		return runtime_http_health_handler(req, res, NULL);
	if (is(path, "/drain-then-health")) { /* a probe that meets a drain */
		runtime_drain(runtime_current(), 5 * SEC);
		return runtime_http_health_handler(req, res, rt);
	}
	if (is(path, "/nocontent"))
		return runtime_http_respond(res, 204, NULL, NULL, 0);
	if (is(path, "/notmodified")) {
		ck_assert_int_eq(runtime_http_start(res, 304, NULL, 1234), 0);
		return runtime_http_end(res);
	}
	if (is(path, "/span"))
		return span(req, res);
	if (is(path, "/file")) {
		int fd = open(file_path, O_RDONLY | O_CLOEXEC);
		int rc = runtime_http_respond_file(res, 200, "text/plain", fd, 2, 5);
		close(fd);
		return rc;
	}
	return text(res, 404, "no\n");
}

/* ------------------------------------------------------------------ tests */

START_TEST(test_request_parts)
{
	char r[4096];

	serve_start();
	exchange("GET /info?a=1&b HTTP/1.1\r\nHost: h\r\nX-One: first\r\nX-Rep: 1\r\n"
	         "x-one: second\r\nX-Rep: 2\r\nConnection: close\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "\r\n\r\nGET\n/info?a=1&b\n/info\na=1&b\n1.1\nfirst\nrep=1\nrep=2\n"),
	              "got: %s", r);
	/* absolute-form: routed by its path; HTTP/1.2 answered as 1.1 */
	exchange("GET http://h:80/info?x HTTP/1.2\r\nHost: h:80\r\nConnection: close\r\n\r\n", r,
	         sizeof(r));
	ck_assert_msg(!strncmp(r, "HTTP/1.1 200 ", 13), "got: %s", r);
	ck_assert_msg(strstr(r, "\nhttp://h:80/info?x\n/info\nx\n1.1\nnone\n"), "got: %s", r);
	exchange("GET http://h HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "404 Not Found"), "a bare authority's path is /: %s", r);
	exchange("GET /info HTTP/2.0\r\nHost: h\r\n\r\n", r, sizeof(r));
	ck_assert_msg(!strncmp(r, "HTTP/1.1 505 ", 13), "got: %s", r);
	serve_stop();
}
END_TEST

/* Heads that come in pieces: one whose first read is a byte, and a
 * pipelined one begun at the end of the read before; each answered whole,
 * no byte lost (conn.c reads to the buffer's start only when nothing is
 * left unparsed). */
START_TEST(test_heads_in_pieces)
{
	char r[8192] = "";

	serve_start();
	int fd = dial();
	send_str(fd, "G");
	usleep(50 * 1000);
	send_str(fd, "ET /info?one HTTP/1.1\r\nHost: h\r\n\r\nGE");
	ck_assert_msg(read_until(fd, r, sizeof(r), "GET\n/info?one\n"), "got: %s", r);
	usleep(50 * 1000);
	r[0] = '\0';
	send_str(fd, "T /info?two HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert_msg(read_until(fd, r, sizeof(r), "GET\n/info?two\n"), "got: %s", r);
	close(fd);
	serve_stop();
}
END_TEST

START_TEST(test_body_stream)
{
	char r[8192];

	serve_start();
	exchange("POST /body HTTP/1.1\r\nHost: h\r\nContent-Length: 26\r\nConnection: close\r\n\r\n"
	         "abcdefghijklmnopqrstuvwxyz", r, sizeof(r));
	ck_assert_msg(strstr(r, "Content-Length: 26\r\n") &&
	              strstr(r, "\r\n\r\nabcdefghijklmnopqrstuvwxyz"), "got: %s", r);
	exchange("POST /body HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
	         "Connection: close\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n"
	         "Trailer-Field: x\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "\r\n\r\nhello world"), "got: %s", r);
	ck_assert_int_eq(atomic_load(&seen_error), 0);
	serve_stop();
}
END_TEST

/* Expect: 100-continue is answered when the handler reads, not before;
 * a handler that never reads gets its answer out and the connection
 * closes (the client may never send the body). */
START_TEST(test_continue_on_first_read)
{
	char r[4096] = "";
	int fd;

	serve_start();
	fd = dial();
	send_str(fd, "POST /body HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n"
	             "Expect: 100-continue\r\n\r\n");
	ck_assert(read_until(fd, r, sizeof(r), "\r\n\r\n"));
	ck_assert_msg(!strncmp(r, "HTTP/1.1 100 Continue\r\n\r\n", 25), "got: %s", r);
	send_str(fd, "ping");
	ck_assert(read_until(fd, r, sizeof(r), "ping"));
	close(fd);

	fd = dial();
	r[0] = '\0';
	send_str(fd, "POST /noread HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n"
	             "Expect: 100-continue\r\n\r\n");
	ck_assert(read_until(fd, r, sizeof(r), "not read"));
	ck_assert_msg(!strstr(r, "100 Continue"), "got: %s", r);
	ck_assert_msg(strstr(r, "Connection: close\r\n"), "got: %s", r);
	ck_assert(closed_by_server(fd));
	close(fd);
	serve_stop();
}
END_TEST

/* A body the handler leaves unread is skipped: the next pipelined
 * request is answered. */
START_TEST(test_unread_body_skipped)
{
	char r[4096];

	serve_start();
	exchange("POST /noread HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nXXXXX"
	         "POST /noread HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
	         "3\r\nabc\r\n0\r\n\r\n"
	         "GET /info HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "not read") && strstr(strstr(r, "not read") + 1, "not read") &&
	              strstr(r, "\nGET\n/info\n"), "got: %s", r);
	serve_stop();
}
END_TEST

/* Bad bodies reach the handler as errors, and the connection closes. */
START_TEST(test_bad_bodies)
{
	char r[4096];

	serve_start();
	exchange("POST /body HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
	         "ffffffffffffffffffff\r\n", r, sizeof(r));
	ck_assert_msg(!strncmp(r, "HTTP/1.1 400 ", 13), "chunk size overflow: %s", r);
	exchange("POST /body HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
	         "1001\r\n", r, sizeof(r)); /* a chunk over body_max (4 KiB) */
	ck_assert_msg(!strncmp(r, "HTTP/1.1 413 ", 13), "got: %s", r);
	ck_assert_int_eq(atomic_load(&seen_error), -EMSGSIZE);
	exchange("POST /body HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
	         "3\r\nabcX\r\n", r, sizeof(r));
	ck_assert_msg(!strncmp(r, "HTTP/1.1 400 ", 13), "no CRLF after data: %s", r);
	ck_assert_msg(strstr(r, "Connection: close"), "got: %s", r);
	exchange("POST /body HTTP/1.1\r\nHost: h\r\nContent-Length: 5000\r\n\r\n", r, sizeof(r));
	ck_assert_msg(!strncmp(r, "HTTP/1.1 413 ", 13), "refused by the head: %s", r);

	/* shorter than its Content-Length: the client half-closes */
	int fd = dial();
	send_str(fd, "POST /body HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc");
	shutdown(fd, SHUT_WR);
	read_all(fd, r, sizeof(r));
	close(fd);
	ck_assert_msg(strstr(r, "error 32"), "-EPIPE for a cut body: %s", r); /* EPIPE */
	ck_assert_int_eq(atomic_load(&seen_error), -EPIPE);

	/* longer: the extra bytes are the next request, and garbage */
	exchange("POST /body HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabcdef\r\n\r\n", r,
	         sizeof(r));
	ck_assert_msg(strstr(r, "\r\n\r\nabc") && strstr(r, "HTTP/1.1 400 "), "got: %s", r);
	serve_stop();
}
END_TEST

START_TEST(test_responses)
{
	char r[4096];

	serve_start();
	exchange("GET /chunked HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "Transfer-Encoding: chunked\r\n") && !strstr(r, "Content-Length") &&
	              strstr(r, "\r\n\r\n6\r\npiece;\r\n6\r\npiece;\r\n6\r\npiece;\r\n0\r\n\r\n"),
	              "got: %s", r);
	/* HTTP/1.0 cannot read chunked: the close ends the body */
	exchange("GET /chunked HTTP/1.0\r\n\r\n", r, sizeof(r));
	ck_assert_msg(!strstr(r, "chunked") && strstr(r, "Connection: close\r\n") &&
	              strstr(r, "\r\n\r\npiece;piece;piece;") && !strstr(r, "0\r\n\r\n"), "got: %s", r);
	exchange("GET /length HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "Content-Length: 10\r\n") && strstr(r, "\r\n\r\nhelloworld"),
	              "got: %s", r);
	exchange("HEAD /length HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "Content-Length: 10\r\n") && strstr(r, "\r\n\r\n")[4] == '\0',
	              "HEAD: the fields, no body: %s", r);
	exchange("GET /nocontent HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	ck_assert_msg(!strncmp(r, "HTTP/1.1 204 No Content\r\n", 25) && !strstr(r, "Content-Length"),
	              "got: %s", r);
	exchange("GET /notmodified HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "Content-Length: 1234\r\n") && strstr(r, "\r\n\r\n")[4] == '\0',
	              "got: %s", r);
	exchange("GET /file HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "Content-Length: 5\r\n") && strstr(r, "\r\n\r\n23456"), "got: %s", r);
	exchange("GET /fields HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "X-Fine: yes  it is\r\n") && !strstr(r, "Injected") &&
	              !strstr(r, "x-reserved") &&
	              strstr(r, "\r\n\r\n-22 -22 -1 0"), "got: %s", r);
	ck_assert_msg(strstr(r, "Server: runtime\r\n") && strstr(r, "Date: "), "got: %s", r);
	for (int i = 0; i < 2; i++) {
		exchange("GET /types?a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
		ck_assert_msg(!strncmp(r, "HTTP/1.1 200 OK\r\nServer: runtime\r\nDate: ", 40) &&
		              strstr(r, "\r\nContent-Type: text/a\r\nContent-Length: 1\r\n") &&
		              strstr(r, "\r\n\r\na"), "got: %s", r);
		exchange("GET /types?b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
		ck_assert_msg(!strncmp(r, "HTTP/1.1 404 Not Found\r\nServer: runtime\r\nDate: ", 47) &&
		              strstr(r, "\r\nContent-Type: text/b\r\nContent-Length: 1\r\n") &&
		              !strstr(r, "bad") && strstr(r, "\r\n\r\nb"), "got: %s", r);
		exchange("GET /types?n HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
		ck_assert_msg(!strstr(r, "Content-Type") && strstr(r, "Content-Length: 1\r\n"),
		              "got: %s", r);
	}
	serve_stop();
}
END_TEST

/* One request on fd and its whole answer (Content-Length) into r. */
static void ask(int fd, const char *req, char *r, size_t cap)
{
	r[0] = '\0';
	send_str(fd, req);
	ck_assert(read_until(fd, r, cap, "\r\n\r\n"));
	const char *cl = strstr(r, "Content-Length: ");
	ck_assert_ptr_nonnull(cl);
	size_t want = (size_t)(strstr(r, "\r\n\r\n") + 4 - r) + strtoul(cl + 16, NULL, 10);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	for (size_t got = strlen(r); got < want && poll(&p, 1, 10000) == 1;) {
		ssize_t n = recv(fd, r + got, cap - 1 - got, 0);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
		r[got] = '\0';
	}
	ck_assert_uint_eq(strlen(r), want);
}

/* A file's range comes whole and right by each way a file goes: the
 * batch (small), sendfile (cached; a megabyte a step), sendfile after the
 * offload pool brought each step in (cold; without cachestat(2), reads
 * and splices), and to a client that reads slowly (sendfile meets a full
 * socket and waits). */
static void span_check(int fd, unsigned long long off, unsigned long long len, const char *how,
                       bool slow)
{
	static char r[SPAN_FILE + 4096];
	char req[128];

	snprintf(req, sizeof(req), "GET /span?%llu,%llu%s HTTP/1.1\r\nHost: h\r\n\r\n", off,
	         len, how);
	if (slow) {
		send_str(fd, req);
		usleep(300 * 1000); /* the socket fills: the server waits for room */
		r[0] = '\0';
		ck_assert(read_until(fd, r, sizeof(r), "\r\n\r\n"));
		size_t head = (size_t)(strstr(r, "\r\n\r\n") + 4 - r), got = strlen(r);
		while (got < head + len) {
			ssize_t n = recv(fd, r + got, 65536, 0);
			ck_assert_int_gt(n, 0);
			got += (size_t)n;
			r[got] = '\0';
		}
	} else {
		ask(fd, req, r, sizeof(r));
	}
	const char *body = strstr(r, "\r\n\r\n") + 4;
	ck_assert_uint_eq(strlen(body), len);
	for (size_t i = 0; i < len; i++)
		ck_assert_msg(body[i] == span_byte(off + i), "byte %zu of %llu,%llu%s", i, off, len,
		              how);
}

START_TEST(test_file_ranges_by_every_way)
{
	serve_start();
	int fd = dial();
	span_check(fd, 3, 100, "", false);           /* into the batch */
	span_check(fd, 5, 20000, "", false);         /* sendfile */
	span_check(fd, 7, 1000000, "", false);       /* sendfile, large */
	span_check(fd, 19, 2500000, "", false);      /* sendfile, three steps */
	span_check(fd, 11, 20000, ",cold", false);   /* warmed (or read in steps) */
	span_check(fd, 13, 300000, ",cold", false);  /* warmed (or spliced) */
	span_check(fd, 23, 2200000, ",cold", false); /* each step warmed (or spliced) */
	span_check(fd, 17, SPAN_FILE - 17, "", true); /* sendfile waits for room */
	close(fd);
	serve_stop();
}
END_TEST

/* The answer r: its head is exactly the start (status line to the Date
 * field, whose value is any), then rest; its body tails' len bytes. */
static void head_is(const char *r, const char *start, const char *rest, size_t len)
{
	size_t n = strlen(start);
	const char *date = r + n, *end = strstr(date, "\r\n");

	ck_assert_msg(!strncmp(r, start, n) && end && end - date == 29 &&
	              !strncmp(end + 2, rest, strlen(rest)), "got: %s", r);
	const char *body = end + 2 + strlen(rest);
	ck_assert_uint_eq(strlen(body), len);
	for (size_t i = 0; i < len; i++)
		ck_assert_int_eq(body[i], 'a' + (i + len) % 26);
}

#define START "HTTP/1.1 200 OK\r\nServer: runtime\r\nDate: "

/* A keep-alive 200 with a length and no fields of its own is the core's
 * head start copied whole with its tail: another length, type, status,
 * version, a field or a close each get their own head, and the next one
 * the right tail again; the Date follows the clock. */
START_TEST(test_cached_heads)
{
	char r[8192], d1[32], d2[32];

	serve_start();
	int fd = dial();
	const char *req = "GET /tail?a--5 HTTP/1.1\r\nHost: h\r\n\r\n";
	ask(fd, req, r, sizeof(r));
	head_is(r, START, "Content-Type: text/a\r\nContent-Length: 5\r\n\r\n", 5);
	ask(fd, "GET /tail?a--123 HTTP/1.1\r\nHost: h\r\n\r\n", r, sizeof(r));
	head_is(r, START, "Content-Type: text/a\r\nContent-Length: 123\r\n\r\n", 123);
	for (int len = 1; len <= 17; len++) { /* short bodies, copied inline */
		char q[64], tail[64];
		snprintf(q, sizeof(q), "GET /tail?a--%d HTTP/1.1\r\nHost: h\r\n\r\n", len);
		snprintf(tail, sizeof(tail), "Content-Type: text/a\r\nContent-Length: %d\r\n\r\n", len);
		ask(fd, q, r, sizeof(r));
		head_is(r, START, tail, (size_t)len);
	}
	ask(fd, "GET /tail?b--7 HTTP/1.1\r\nHost: h\r\n\r\n", r, sizeof(r));
	head_is(r, START, "Content-Type: text/bbb\r\nContent-Length: 7\r\n\r\n", 7);
	ask(fd, "GET /tail?a--7 HTTP/1.1\r\nHost: h\r\n\r\n", r, sizeof(r));
	head_is(r, START, "Content-Type: text/a\r\nContent-Length: 7\r\n\r\n", 7);
	ask(fd, "GET /tail?an-7 HTTP/1.1\r\nHost: h\r\n\r\n", r, sizeof(r));
	head_is(r, "HTTP/1.1 404 Not Found\r\nServer: runtime\r\nDate: ",
	        "Content-Type: text/a\r\nContent-Length: 7\r\n\r\n", 7);
	ask(fd, "GET /tail?a-f7 HTTP/1.1\r\nHost: h\r\n\r\n", r, sizeof(r));
	head_is(r, START, "Content-Type: text/a\r\nContent-Length: 7\r\nX-F: 1\r\n\r\n", 7);
	ask(fd, "GET /tail?a--7 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", r, sizeof(r));
	head_is(r, START, "Content-Type: text/a\r\nContent-Length: 7\r\n"
	        "Connection: keep-alive\r\n\r\n", 7);
	r[0] = '\0';
	send_str(fd, "HEAD /tail?a--7 HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert(read_until(fd, r, sizeof(r), "\r\n\r\n"));
	ck_assert_msg(strstr(r, "\r\nContent-Length: 7\r\n\r\n") && strstr(r, "\r\n\r\n")[4] == '\0',
	              "HEAD: the GET's length, no body: %s", r);
	ask(fd, req, r, sizeof(r));
	head_is(r, START, "Content-Type: text/a\r\nContent-Length: 5\r\n\r\n", 5);
	snprintf(d1, sizeof(d1), "%.29s", r + strlen(START));
	usleep(1100 * 1000); /* the next second: a new Date */
	ask(fd, req, r, sizeof(r));
	head_is(r, START, "Content-Type: text/a\r\nContent-Length: 5\r\n\r\n", 5);
	snprintf(d2, sizeof(d2), "%.29s", r + strlen(START));
	ck_assert_msg(strcmp(d1, d2), "the Date stayed %s", d1);
	ask(fd, "GET /tail?a--5 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	head_is(r, START, "Content-Type: text/a\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
	        5);
	ck_assert(closed_by_server(fd));
	close(fd);
	serve_stop();
}
END_TEST

/* The core's last Content-Type is told again only when it is: values
 * that differ from it in their first byte, their last, at 8, or by being
 * shorter or longer by one, the 15 and 16 bytes at which the word compare
 * ends, all from one buffer at its page's start and at its page's end. */
START_TEST(test_types_again)
{
	static const char *const types[] = { "text/plain", "text/plain", "Text/plain", "text/plaiN",
	                                     "text/plai", "text/plainx", "text/plai", "text/plXin",
	                                     "abcdefghijklmno", "abcdefghijklmnop", "abcdefghijklmno",
	                                     "abcdefghijklmnO", "a", "b", "ab", "a", "text/plain" };
	char r[4096], q[128], want[64];

	serve_start();
	int fd = dial();
	for (int p = 0; p < 2; p++)
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
			snprintf(q, sizeof(q), "GET /type?%c%s HTTP/1.1\r\nHost: h\r\n\r\n", "se"[p],
			         types[i]);
			snprintf(want, sizeof(want), "\r\nContent-Type: %s\r\n", types[i]);
			ask(fd, q, r, sizeof(r));
			ck_assert_msg(strstr(r, want) && strstr(r, "\r\n\r\nt"), "%s: %s", types[i], r);
		}
	close(fd);
	serve_stop();
}
END_TEST

static _Atomic int hooked, hooked_status;

static void hook(const struct runtime_http_request *req, const struct runtime_http_response *res,
                 void *arg)
{
	(void)req;
	(void)arg;
	atomic_fetch_add(&hooked, 1);
	atomic_store(&hooked_status, runtime_http_status(res));
}

/* on_response is called after each answer, and with no_batch each answer
 * leaves before the next request is served: the first of two pipelined
 * comes alone, while the second's handler sleeps. */
START_TEST(test_after_each)
{
	char r[4096];

	on_response = hook;
	no_batch = 1;
	atomic_store(&hooked, 0);
	r[0] = '\0';
	serve_start();
	int fd = dial();
	send_str(fd, "GET /noread HTTP/1.1\r\nHost: h\r\n\r\nGET /slow HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert(read_until(fd, r, sizeof(r), "not read"));
	ck_assert_msg(!strstr(r, "slept"), "batched: %s", r);
	ck_assert_int_eq(atomic_load(&hooked), 1);
	ck_assert(read_until(fd, r, sizeof(r), "slept"));
	ck_assert_int_eq(atomic_load(&hooked), 2);
	ck_assert_int_eq(atomic_load(&hooked_status), 200);
	close(fd);
	serve_stop();
	on_response = NULL;
	no_batch = 0;
}
END_TEST

/* A client that leaves while its handler waits: the handler's fiber is
 * cancelled (its sleep ends -ECANCELED, long before its 600 ms) and the
 * response is logged 499 - after a close, and after a reset. With
 * no_cancel_on_close the handler runs to its end, and its 200 is logged. */
START_TEST(test_gone_client_cancels_the_handler)
{
	for (int mode = 0; mode < 3; mode++) { /* close, reset, close with no_cancel_on_close */
		on_response = hook;
		no_cancel_on_close = mode == 2;
		atomic_store(&hooked, 0);
		atomic_store(&wait_rc, 1);
		serve_start();
		int fd = dial();
		send_str(fd, "GET /wait HTTP/1.1\r\nHost: h\r\n\r\n");
		wait_begun(NULL, NULL); /* a close before it began would be a half-close */
		if (mode == 1) {
			struct linger hard = { 1, 0 };
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
		}
		close(fd);
		for (int i = 0; i < 5000 && atomic_load(&hooked) == 0; i++)
			usleep(1000);
		ck_assert_int_eq(atomic_load(&hooked), 1);
		ck_assert_int_eq(atomic_load(&wait_rc), mode == 2 ? 0 : -ECANCELED);
		ck_assert_int_eq(atomic_load(&hooked_status), mode == 2 ? 200 : 499);
		serve_stop();
	}
	on_response = NULL;
	no_cancel_on_close = 0;
}
END_TEST

/* A body read into the connection's buffer brings the next request
 * with it, pipelined; the client then shuts its side while the handler
 * waits. That end is a half-close, not the client leaving: the handler
 * is not cancelled, both answers come (the fuzz target's find: the watch
 * asked only the stream, which had nothing left, whether more was
 * asked). */
START_TEST(test_half_close_after_a_body_read_with_the_next_request)
{
	char r[4096] = "";

	atomic_store(&wait_rc, 1);
	serve_start();
	int fd = dial();
	send_str(fd, "POST /readwait HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n");
	usleep(50 * 1000); /* its handler reads, watched: nothing more yet */
	send_str(fd, "helloGET /noread HTTP/1.1\r\nHost: h\r\n\r\n");
	wait_begun(NULL, NULL);
	shutdown(fd, SHUT_WR);
	ck_assert_msg(read_until(fd, r, sizeof(r), "not read"), "%s", r);
	ck_assert_msg(strstr(r, "read and waited"), "%s", r);
	ck_assert_int_eq(atomic_load(&wait_rc), 0);
	close(fd);
	serve_stop();
}
END_TEST

/* What the hook saw of each response, as runtime_http_log_line's lines
 * (both formats) and the request's slot, bytes and start. */
static char logged_common[8192], logged_json[8192];
static _Atomic int logged;

static void log_hook(const struct runtime_http_request *req, const struct runtime_http_response *res,
                     void *arg)
{
	char line[1024];
	const char *tag = runtime_http_request_data(req);
	(void)arg;

	ck_assert(runtime_http_request_start(req) > 0 &&
	          runtime_http_request_start(req) <= runtime_now());
	ck_assert_uint_ge(runtime_http_response_bytes(res), runtime_http_body_sent(res) +
	                  (runtime_http_version(req) == 20 ? 0 : 60)); /* HTTP/1.1: a head too */
	ssize_t n = runtime_http_log_line(req, res, RUNTIME_HTTP_LOG_COMMON, line, sizeof(line));
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(line[n - 1], '\n');
	snprintf(logged_common + strlen(logged_common), sizeof(logged_common) - strlen(logged_common),
	         "%.*s", (int)n, line);
	n = runtime_http_log_line(req, res, RUNTIME_HTTP_LOG_JSON, line, sizeof(line));
	ck_assert_int_gt(n, 0);
	snprintf(logged_json + strlen(logged_json), sizeof(logged_json) - strlen(logged_json),
	         "%s%.*s", tag ? tag : "", (int)n, line);
	ck_assert_int_eq(runtime_http_log_line(req, res, RUNTIME_HTTP_LOG_JSON, line, 10), -ENOBUFS);
	ck_assert_int_eq(runtime_http_log_line(req, res, 9, line, sizeof(line)), -EINVAL);
	atomic_fetch_add(&logged, 1);
}

/* A server whose access log (format) goes into a pipe, with log_hook as
 * its on_response; the pipe's read end in *log_rd. */
static void log_serve_start(int format, int *log_rd)
{
	int fds[2];

	ck_assert_int_eq(pipe(fds), 0);
	*log_rd = fds[0];
	logged_common[0] = logged_json[0] = '\0';
	atomic_store(&logged, 0);
	on_response = log_hook;
	access_log_format = format;
	access_log_fd = fds[1];
	serve_start();
}

/* Once the hook has seen want responses (10 s at most): the server
 * stopped, what its log wrote into piped (cap bytes, NUL-terminated), the
 * defaults back. */
static void log_serve_stop(int want, int log_rd, char *piped, size_t cap)
{
	size_t got = 0;

	for (int i = 0; i < 1000 && atomic_load(&logged) < want; i++)
		usleep(10 * 1000);
	serve_stop();
	close(access_log_fd);
	for (ssize_t n; (n = read(log_rd, piped + got, cap - 1 - got)) > 0;)
		got += (size_t)n;
	piped[got] = '\0';
	close(log_rd);
	on_response = NULL;
	access_log_format = 0;
	access_log_fd = 1;
}

/* Every response is logged, the parser's refusals too (400 for a bad
 * field, 414 for a long target, 501 for an unknown coding): the library's
 * own JSON lines through a pipe, and on_response's, with the slot a
 * handler set, the bytes both ways and the peer. */
START_TEST(test_access_log_sees_every_response)
{
	static char r[16384], piped[16384];
	int log_rd;

	log_serve_start(RUNTIME_HTTP_LOG_JSON, &log_rd);
	int fd = dial();
	ask(fd, "GET /info HTTP/1.1\r\nHost: h\r\n\r\n", r, sizeof(r));
	ask(fd, "GET /tagged HTTP/1.1\r\nHost: h\r\n\r\n", r, sizeof(r));
	ask(fd, "POST /body HTTP/1.1\r\nHost: h\r\nContent-Length: 26\r\n\r\n"
	        "abcdefghijklmnopqrstuvwxyz", r, sizeof(r));
	close(fd);
	static const char *const refused[] = {
		"GET /x HTTP/1.1\r\nBad Field\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n",
	};
	for (size_t i = 0; i < 2; i++)
		exchange(refused[i], r, sizeof(r));
	static char long_line[10000];
	memset(long_line, 'a', sizeof(long_line) - 1);
	memcpy(long_line, "GET /", 5);
	exchange(long_line, r, sizeof(r));
	log_serve_stop(6, log_rd, piped, sizeof(piped));

	ck_assert_int_eq(atomic_load(&logged), 6);
	ck_assert_msg(strstr(logged_common, "127.0.0.1 - - [") == logged_common, "%s", logged_common);
	ck_assert_msg(strstr(logged_common, "] \"GET /info HTTP/1.1\" 200 ") &&
	              strstr(logged_common, "] \"POST /body HTTP/1.1\" 200 26\n") &&
	              strstr(logged_common, "] \"-\" 400 16\n") &&
	              strstr(logged_common, "] \"-\" 501 ") &&
	              strstr(logged_common, "] \"-\" 414 "), "%s", logged_common);
	ck_assert_msg(strstr(logged_json, "tag-7{\"time\":\"") &&
	              strstr(logged_json, "\"remote\":\"127.0.0.1\",\"method\":\"GET\","
	                                  "\"target\":\"/tagged\",\"proto\":\"HTTP/1.1\","
	                                  "\"status\":200,\"bytes_in\":33,"), "%s", logged_json);
	ck_assert_msg(strstr(logged_json, "\"target\":\"/body\",\"proto\":\"HTTP/1.1\","
	                                  "\"status\":200,\"bytes_in\":78,"), "%s", logged_json);
	/* The library's lines: the same six, in order, one per line. */
	int lines = 0;
	for (const char *p = piped; (p = strchr(p, '\n')); p++)
		lines++;
	ck_assert_msg(lines == 6, "%d lines: %s", lines, piped);
	const char *a = strstr(piped, "\"target\":\"/info\""), *b = strstr(piped, "/tagged"),
	           *c = strstr(piped, "\"target\":\"/body\""), *d = strstr(piped, "\"status\":400");
	ck_assert_msg(a && b && c && d && a < b && b < c && c < d, "%s", piped);
	ck_assert_msg(strstr(piped, "\"method\":\"\",\"target\":\"\",\"proto\":\"HTTP/1.1\","
	                            "\"status\":414"), "%s", piped);
}
END_TEST

/* The bytes of conversation (its %c the form: 'r' respond, 's' streamed;
 * %C the same in upper case) on one connection, each Date's value masked. */
static size_t conversation(const char *talk, char form, char *r, size_t cap)
{
	char req[16384];
	size_t i = 0, n;

	for (const char *t = talk; *t && i < sizeof(req) - 1; t++)
		req[i++] = t[0] != '%' ? *t : *++t == 'c' ? form : (char)(form - 'a' + 'A');
	req[i] = '\0';
	n = exchange(req, r, cap);
	for (char *d = r; (d = strstr(d, "\r\nDate: ")); d += 8)
		memset(d + 8, 'X', strnlen(d + 8, 29));
	return n;
}

#define SAME(q) "GET /same?%c" q " HTTP/1.1\r\nHost: h\r\n\r\n"
#define SAME_BIG SAME("a3000") SAME("a3000") SAME("a3000") SAME("a3000") SAME("a3000")

/* runtime_http_respond makes its common answer by a shorter way than the
 * others (response.c): the same bytes as the answer streamed, on every
 * kind of request, pipelined so that the batch fills and goes out
 * between them; and the same state after (the handler, same, checks it). */
START_TEST(test_respond_as_streamed)
{
	static const char *const talks[] = {
		SAME("a13") SAME("a13") "HEAD /same?%ca13 HTTP/1.1\r\nHost: h\r\n\r\n" SAME("a5")
		SAME("n3") SAME("l0") SAME("l17") SAME("a100") SAME_BIG SAME_BIG SAME("a1")
		"GET /same?%ca7 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
		"POST /same?%ca7 HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nabcd" SAME("a7")
		"GET /same?%ca9 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
		"GET /same?%ca9 HTTP/1.0\r\n\r\n",
		"POST /same?%ca2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n"
		"Expect: 100-continue\r\n\r\n",
		"POST /same?%Ca5 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"POST /same?%Ca5 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok"
		"GET /same?%ca5 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
	}; /* each ends in a close: exchange reads to the end */
	static char r[65536], s[65536];

	serve_start();
	for (size_t i = 0; i < sizeof(talks) / sizeof(talks[0]); i++) {
		size_t n = conversation(talks[i], 'r', r, sizeof(r));
		ck_assert_uint_eq(conversation(talks[i], 's', s, sizeof(s)), n);
		ck_assert_msg(n > 0 && !memcmp(r, s, n), "respond: %s\nstreamed: %s", r, s);
	}
	serve_stop();
}
END_TEST

/* A handler that fails: 500 if nothing went out (and the connection
 * closes), a cut stream if something did; never a whole-looking answer. */
START_TEST(test_handler_failures)
{
	char r[4096] = "";

	serve_start();
	exchange("GET /fail HTTP/1.1\r\nHost: h\r\n\r\n", r, sizeof(r));
	ck_assert_msg(!strncmp(r, "HTTP/1.1 500 ", 13) && strstr(r, "Connection: close"), "got: %s", r);
	exchange("GET /abandon HTTP/1.1\r\nHost: h\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "\r\n\r\n4\r\npart\r\n") && !strstr(r, "0\r\n\r\n"), "got: %s", r);
	exchange("GET /short HTTP/1.1\r\nHost: h\r\n\r\n", r, sizeof(r));
	ck_assert_msg(strstr(r, "Content-Length: 10\r\n") && strstr(r, "\r\n\r\nhello") &&
	              strlen(strstr(r, "\r\n\r\n")) == 9, "got: %s", r);

	/* no answer and no error: 500, and the connection goes on */
	int fd = dial();
	r[0] = '\0';
	send_str(fd, "GET /nothing HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert(read_until(fd, r, sizeof(r), "Internal Server Error\n"));
	ck_assert(!strstr(r, "Connection: close"));
	send_str(fd, "GET /info HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert(read_until(fd, r, sizeof(r), "/info\n"));
	close(fd);
	serve_stop();
}
END_TEST

START_TEST(test_limits_and_stats)
{
	char r[32768], big[20000];
	struct runtime_http_server_stats st;

	serve_start();
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /info HTTP/1.1\r\nHost: h\r\nX-Big: ", 36);
	big[sizeof(big) - 1] = '\0';
	exchange(big, r, sizeof(r));
	ck_assert_msg(!strncmp(r, "HTTP/1.1 431 ", 13), "got: %.100s", r);
	exchange("GET /info HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	exchange("GET /nothing-here HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
	runtime_http_server_stats(srv, &st);
	ck_assert_uint_eq(st.requests, 2);
	ck_assert_uint_eq(st.rejected, 1);
	ck_assert_uint_eq(st.responses[2], 1);
	ck_assert_uint_eq(st.responses[4], 2); /* the 404 and the 431 */
	ck_assert_uint_eq(runtime_http_server_core_requests(srv, 0), 2);
	ck_assert_uint_eq(runtime_http_server_core_requests(srv, 1), 0);
	serve_stop();
}
END_TEST

/* A drain closes a keep-alive connection that waits, at once. */
START_TEST(test_drain_closes_idle)
{
	char r[4096] = "";

	serve_start();
	int fd = dial_answered(r, sizeof(r));
	ck_assert_int_eq(runtime_drain(rt, 5 * SEC), 0);
	ck_assert(closed_by_server(fd));
	close(fd);
	serve_end(); /* the run ends with its last connection */
}
END_TEST

/* A drain while a keep-alive connection's handler reads its body: the
 * connection is busy (though its head was read idle), the body is read
 * whole and answered, with the close. */
START_TEST(test_drain_lets_a_body_finish)
{
	char r[4096] = "";

	serve_start();
	int fd = dial_answered(r, sizeof(r));
	send_str(fd, "POST /body HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nhello");
	usleep(100 * 1000); /* the handler waits for the rest */
	ck_assert_int_eq(runtime_drain(rt, 5 * SEC), 0);
	usleep(100 * 1000);
	send_str(fd, "world");
	r[0] = '\0';
	ck_assert(read_until(fd, r, sizeof(r), "helloworld"));
	ck_assert_msg(strstr(r, "200 OK") && strstr(r, "Connection: close\r\n"), "got: %s", r);
	ck_assert(closed_by_server(fd));
	close(fd);
	serve_end();
}
END_TEST

/* The readiness handler: 200 while serving, 503 (and the close) once a
 * drain has begun. */
START_TEST(test_health_is_503_from_the_drain_on)
{
	char r[4096] = "";

	serve_start();
	int fd = dial();
	send_str(fd, "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert(read_until(fd, r, sizeof(r), "ok\n"));
	ck_assert_msg(strstr(r, "HTTP/1.1 200 OK"), "got: %s", r);
	r[0] = '\0';
	send_str(fd, "GET /drain-then-health HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert(read_until(fd, r, sizeof(r), "draining\n"));
	ck_assert_msg(strstr(r, "HTTP/1.1 503 ") && strstr(r, "Connection: close\r\n"),
	              "got: %s", r);
	ck_assert(closed_by_server(fd));
	close(fd);
	serve_end();
}
END_TEST

/* ----------------------------------------- idle with no fiber (release) */

#define IDLE_CONNS 20

/* Quiet past release_after, keep-alive connections hold no fiber (only
 * the server's watcher and acceptor live), and answer their next requests
 * - pipelined ones too - as before; a drain then closes them at once. */
START_TEST(test_idle_connections_release_their_fiber)
{
	int fd[IDLE_CONNS];
	char r[4096];

	release_after_ns = 1000 * 1000;
	serve_start();
	for (int i = 0; i < IDLE_CONNS; i++) {
		fd[i] = dial();
		send_str(fd[i], "GET /info HTTP/1.1\r\nHost: h\r\n\r\n");
		r[0] = '\0';
		ck_assert(read_until(fd[i], r, sizeof(r), "/info\n"));
	}
	for (int i = 0; i < 10000 && fibers_live(rt) > 2; i++)
		usleep(1000);
	ck_assert_uint_eq(fibers_live(rt), 2);
	for (int i = 0; i < IDLE_CONNS; i++) {
		send_str(fd[i], "GET /info?qa1 HTTP/1.1\r\nHost: h\r\n\r\n"
		                "GET /info?qb2 HTTP/1.1\r\nHost: h\r\n\r\n");
		r[0] = '\0';
		ck_assert(read_until(fd[i], r, sizeof(r), "qa1"));
		ck_assert(read_until(fd[i], r, sizeof(r), "qb2"));
	}
	ck_assert_int_eq(runtime_drain(rt, 5 * SEC), 0);
	for (int i = 0; i < IDLE_CONNS; i++) {
		ck_assert(closed_by_server(fd[i]));
		close(fd[i]);
	}
	serve_end();
	release_after_ns = 10 * 1000 * 1000;
}
END_TEST

/* One request on each of fd[], all served at once (/gate). */
static void gate_round(const int *fd)
{
	char r[GATE_BODY + 1024];

	atomic_fetch_add(&gate_open, GATE_CONNS);
	for (int i = 0; i < GATE_CONNS; i++)
		send_str(fd[i], "GET /gate HTTP/1.1\r\nHost: h\r\n\r\n");
	for (int i = 0; i < GATE_CONNS; i++) {
		r[0] = '\0';
		ck_assert(read_until(fd[i], r, sizeof(r), "through"));
	}
}

/* Of the buffers the last round's requests were in, how many have the
 * page of their request resident (mincore). */
static unsigned gate_resident(void)
{
	unsigned n = 0;

	for (int i = 0; i < GATE_CONNS; i++) {
		size_t pages;
		n += resident_pages(__atomic_load_n(&gate_at[i], __ATOMIC_RELAXED), 1, &pages) == 1;
	}
	return n;
}

/* Did the last round take the same buffers as the one before (before[])? */
static bool gate_same(const char *const *before)
{
	for (int i = 0; i < GATE_CONNS; i++) {
		uintptr_t at = (uintptr_t)__atomic_load_n(&gate_at[i], __ATOMIC_RELAXED);
		bool found = false;
		for (int j = 0; j < GATE_CONNS && !found; j++)
			found = at - (uintptr_t)before[j] < 4096; /* the same buffer's head */
		if (!found)
			return false;
	}
	return true;
}

/*
 * Connections that wait between requests with no buffer (release_after
 * 0) take a resident one for each request, however many there are: a
 * round of 64 requests at once, right after another, is served in the
 * same buffers, their pages still there (mincore). Once two seconds have
 * passed without them, the 56 past the 8 kept have given their pages back
 * (giving back every buffer past the 8 at once, or none, fails it).
 * The server then ends with its decay timer armed (the drain), whose
 * callback must free it after the buffers are gone.
 */
START_TEST(test_buffers_stay_warm_then_decay)
{
	const char *first[GATE_CONNS];
	int fd[GATE_CONNS];
	unsigned warm, gone = 0;

	release_after_ns = 0;
	atomic_store(&gate_in, 0);
	atomic_store(&gate_open, 0);
	serve_start();
	for (int i = 0; i < GATE_CONNS; i++)
		fd[i] = dial();
	gate_round(fd);
	for (int i = 0; i < GATE_CONNS; i++)
		first[i] = __atomic_load_n(&gate_at[i], __ATOMIC_RELAXED);
	warm = gate_resident();
	gate_round(fd);
	ck_assert(gate_same(first));
	ck_assert_uint_eq(warm, GATE_CONNS);
	/* Two decay periods, and more if the server's core runs late. */
	for (int tries = 0; tries < 8 && gone < GATE_CONNS - 8; tries++) {
		usleep(2500 * 1000);
		gone = GATE_CONNS - gate_resident();
	}
	ck_assert_uint_eq(gone, GATE_CONNS - 8);
	ck_assert_int_eq(runtime_drain(rt, 5 * SEC), 0);
	for (int i = 0; i < GATE_CONNS; i++)
		close(fd[i]);
	serve_end();
	release_after_ns = 10 * 1000 * 1000;
}
END_TEST

/* A connection waiting with no fiber still closes at its idle timeout. */
START_TEST(test_released_connection_times_out)
{
	char r[4096] = "";

	release_after_ns = 0; /* at once */
	idle_timeout_ns = 100 * 1000 * 1000;
	serve_start();
	int fd = dial_answered(r, sizeof(r));
	uint64_t t0 = runtime_now();
	ck_assert(closed_by_server(fd));
	ck_assert_uint_ge(runtime_now() - t0, 50 * 1000 * 1000);
	close(fd);
	serve_stop();
	release_after_ns = 10 * 1000 * 1000;
	idle_timeout_ns = 60 * SEC;
}
END_TEST

/* The idle timeout holds whoever ends the quiet read: the release sweep
 * (100 ms: the read waits under no deadline of its own, conn.c's swept,
 * also after a wait with no fiber under the last idle deadline), or the
 * read's deadline (a release of an hour, too late for it: a close that
 * waited for it would never come, and closed_by_server gives up at 10 s).
 * The timeout is 2 s, so that the requests sent 1 s into it (the first
 * wait) and 1.2 s past its first end (the second) fall well inside the
 * windows they aim at on a loaded machine. */
START_TEST(test_idle_timeout_with_or_without_release)
{
	char r[4096] = "";

	idle_timeout_ns = 2 * SEC;
	release_after_ns = 100 * MS;
	serve_start();
	int fd = dial_answered(r, sizeof(r));
	usleep(1000 * 1000); /* released: it waits with no fiber until 2 s */
	r[0] = '\0';
	send_str(fd, "GET /info?again HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert(read_until(fd, r, sizeof(r), "again"));
	usleep(1200 * 1000); /* past that, not this answer's idle end */
	r[0] = '\0';
	send_str(fd, "GET /info?more HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert(read_until(fd, r, sizeof(r), "more"));
	uint64_t t0 = runtime_now();
	ck_assert(closed_by_server(fd));
	ck_assert_uint_ge(runtime_now() - t0, 1900 * MS);
	close(fd);
	serve_stop();
	release_after_ns = 3600 * SEC;
	serve_start();
	r[0] = '\0';
	fd = dial_answered(r, sizeof(r));
	t0 = runtime_now();
	ck_assert(closed_by_server(fd));
	uint64_t t = runtime_now() - t0;
	ck_assert_msg(t >= 1900 * MS, "closed after %llu ns", (unsigned long long)t);
	close(fd);
	serve_stop();
	release_after_ns = 10 * MS;
	idle_timeout_ns = 60 * SEC;
}
END_TEST

/* A request refused on a connection that waited idle: its answer, then a
 * linger (the client does not close) that the idle deadline of that wait
 * (300 ms) ends, well before LINGER_NS (2 s) would: which of the two ends
 * it shows only in when, so the margin is wide. */
START_TEST(test_linger_ends_at_the_idle_deadline)
{
	struct runtime_http_server_stats st;
	char r[4096];

	idle_timeout_ns = 300 * MS;
	serve_start();
	int fd = dial();
	uint64_t t0 = runtime_now();
	send_str(fd, "GET /info HTTP/1.1\r\nHost: h\r\nHost: h\r\n\r\n");
	read_all(fd, r, sizeof(r));
	ck_assert_msg(!strncmp(r, "HTTP/1.1 400 ", 13), "got: %s", r);
	for (int i = 0; i < 300 && (runtime_http_server_stats(srv, &st), st.conns.live); i++)
		usleep(10 * 1000);
	uint64_t t = runtime_now() - t0;
	ck_assert_msg(t >= 200 * MS && t < 1900 * MS, "closed after %llu ns", (unsigned long long)t);
	close(fd);
	serve_stop();
	idle_timeout_ns = 60 * SEC;
}
END_TEST

/*
 * The idle timeout (500 ms here) counts from the answers' write, whatever
 * came before on the connection: a body read long before, a file sent
 * with write deadlines of its own (which must not cut a later answer
 * short); and a client that stops reading an answer is cut off.
 */
START_TEST(test_idle_timeout_after_bodies_and_files)
{
	char r[8192] = "";

	idle_timeout_ns = 500 * 1000 * 1000;
	header_timeout_ns = 300 * 1000 * 1000;
	release_after_ns = UINT64_MAX; /* its fiber waits: no wait with none
	                                  sets the deadlines anew */
	serve_start();
	int fd = dial();
	send_str(fd, "POST /slowbody HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n");
	usleep(50 * 1000); /* the body read, not found with the head */
	send_str(fd, "hello");
	ck_assert(read_until(fd, r, sizeof(r), "slept"));
	usleep(350 * 1000); /* past the body's read + 500 ms, not the answer's */
	r[0] = '\0';
	send_str(fd, "GET /info HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert_msg(read_until(fd, r, sizeof(r), "/info\n"), "got: %s", r);

	static char big[BIG_FILE + 4096];
	ask(fd, "GET /bigfile HTTP/1.1\r\nHost: h\r\n\r\n", big, sizeof(big));
	usleep(350 * 1000); /* the answer comes past the file's write + 500 ms */
	r[0] = '\0';
	send_str(fd, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n");
	ck_assert_msg(read_until(fd, r, sizeof(r), "slept"), "got: %s", r);
	ck_assert(closed_by_server(fd)); /* idle */
	close(fd);

	/* A head that times out: its 408, and the connection ends at once -
	 * the read deadline that passed ends the linger too. */
	struct runtime_http_server_stats st;
	fd = dial();
	send_str(fd, "GET /info HTTP/1.1\r\nHo");
	read_all(fd, r, sizeof(r)); /* the 408, then its end of stream */
	ck_assert_msg(!strncmp(r, "HTTP/1.1 408 ", 13), "got: %s", r);
	for (int i = 0; i < 1000 && (runtime_http_server_stats(srv, &st), st.conns.live); i++)
		usleep(10 * 1000); /* 10 s at most: only a connection left open reaches it */
	ck_assert_uint_eq(st.conns.live, 0);
	close(fd);

	fd = dial();
	send_str(fd, "GET /flood HTTP/1.1\r\nHost: h\r\n\r\n");
	usleep(1500 * 1000); /* not read: its writes time out */
	static char all[FLOOD + 4096];
	size_t got = read_all(fd, all, sizeof(all));
	ck_assert_msg(got > 0 && got < FLOOD, "got %zu bytes", got);
	close(fd);
	serve_stop();
	idle_timeout_ns = 60 * SEC;
	header_timeout_ns = 5 * SEC;
	release_after_ns = 10 * 1000 * 1000;
}
END_TEST

/* A handler that passes a body read's error back gets the client's
 * fault answered for it: 408 for a client told 100 Continue that never
 * sends its body (it was 400 or 500, by the handler's choice), 413 for
 * one over the limit, 400 for bad framing; each closes the connection.
 * Its own error is 500. */
START_TEST(test_body_errors_answered_for_the_handler)
{
	static const struct {
		const char *req;
		const char *status;
	} cases[] = {
		{ "POST /readall HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n"
		  "Content-Length: 5\r\n\r\n", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 408 " },
		{ "POST /readall HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nab",
		  "HTTP/1.1 408 " },
		{ "POST /readall HTTP/1.1\r\nHost: h\r\nContent-Length: 101\r\n\r\n",
		  "HTTP/1.1 413 " },
		{ "POST /readall HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		  "HTTP/1.1 400 " },
		{ "GET /fail HTTP/1.1\r\nHost: h\r\n\r\n", "HTTP/1.1 500 " },
	};
	char r[4096];

	idle_timeout_ns = 300 * MS;
	serve_start();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		exchange(cases[i].req, r, sizeof(r)); /* read until the server closes */
		ck_assert_msg(!strncmp(r, cases[i].status, strlen(cases[i].status)),
		              "case %zu got: %s", i, r);
	}
	serve_stop();
	idle_timeout_ns = 60 * SEC;
}
END_TEST

START_TEST(test_decode_helpers)
{
	char out[32];
	struct runtime_http_slice v;
	struct runtime_http_slice q = { "a=1&bb=x%20y+z&c&=e", 19 };

	ck_assert_int_eq(runtime_http_decode((struct runtime_http_slice){ "a%20b+c", 7 }, out,
	                                     sizeof(out), 0), 5);
	ck_assert_str_eq(out, "a b+c");
	ck_assert_int_eq(runtime_http_decode((struct runtime_http_slice){ "a%20b+c", 7 }, out,
	                                     sizeof(out), 1), 5);
	ck_assert_str_eq(out, "a b c");
	ck_assert_int_eq(runtime_http_decode((struct runtime_http_slice){ "%4", 2 }, out, 32, 0), -EINVAL);
	ck_assert_int_eq(runtime_http_decode((struct runtime_http_slice){ "%zz", 3 }, out, 32, 0), -EINVAL);
	ck_assert_int_eq(runtime_http_decode((struct runtime_http_slice){ "a%00", 4 }, out, 32, 0), -EINVAL);
	ck_assert_int_eq(runtime_http_decode((struct runtime_http_slice){ "abcd", 4 }, out, 4, 0), -ENOBUFS);
	ck_assert_int_eq(runtime_http_query_param(q, "bb", &v), 1);
	ck_assert(v.len == 7 && !memcmp(v.p, "x%20y+z", 7));
	ck_assert_int_eq(runtime_http_query_param(q, "c", &v), 1);
	ck_assert_uint_eq(v.len, 0);
	ck_assert_int_eq(runtime_http_query_param(q, "b", &v), 0);
	ck_assert_int_eq(runtime_http_query_param(q, "", &v), 1);
	ck_assert(v.len == 1 && v.p[0] == 'e');
	ck_assert_int_eq(runtime_http_query_param(q, NULL, &v), -EINVAL);
}
END_TEST

/* What /bigfields?want sets under a limit of max bytes: how many fields,
 * and the last set_header's return. */
static unsigned big_count(size_t want, size_t max, int *rc)
{
	size_t set = 0;
	unsigned i = 0;

	*rc = 0;
	while (set < want) {
		size_t n = (i < 10 ? 7 : i < 100 ? 8 : 9) + BIG_VALUE + 4; /* "X-Big-<i>: v\r\n" */
		if (set + n > max) {
			*rc = -ENOBUFS;
			break;
		}
		set += n;
		i++;
	}
	return i;
}

/* head's first head_len bytes hold X-Big-0 .. X-Big-<count - 1>, each
 * whole, and no more: as HTTP/1.1 writes them, or (h2) as h2t records
 * them ("name: value\n", names in lower case), after the library's. */
static void big_fields_in(const char *head, size_t head_len, unsigned count, bool h2)
{
	char field[64 + BIG_VALUE];

	for (unsigned i = 0; i <= count; i++) {
		int n = snprintf(field, sizeof(field), h2 ? "\nx-big-%u: " : "\r\nX-Big-%u: ", i);
		big_value(field + n, i);
		strcat(field, h2 ? "\n" : "\r\n");
		const char *at = strstr(head, field);
		if (i < count)
			ck_assert_msg(at && (size_t)(at - head) < head_len, "X-Big-%u missing", i);
		else
			ck_assert_msg(!at, "X-Big-%u is one too many", i);
	}
}

/* One /bigfields?want on fd: the fields and the body as big_count says. */
static void big_fields_check(int fd, size_t want, size_t max)
{
	static char r[128 * 1024];
	char req[80], body[32];
	int rc;
	unsigned count = big_count(want, max, &rc);

	snprintf(req, sizeof(req), "GET /bigfields?%zu HTTP/1.1\r\nHost: h\r\n\r\n", want);
	ask(fd, req, r, sizeof(r));
	const char *end = strstr(r, "\r\n\r\n");
	snprintf(body, sizeof(body), "%u %d", count, rc);
	ck_assert_msg(!strcmp(end + 4, body), "%zu: got '%s', want '%s'", want, end + 4, body);
	big_fields_in(r, (size_t)(end + 2 - r), count, false);
}

/* A response's fields in place (3 KiB), on the heap (10 KiB, into the
 * batch), past the batch (60 KiB: the head written on its own), and past
 * the 64 KiB default (-ENOBUFS): every field whole, and the connection
 * goes on after each (a request after one with big fields has none of
 * them). A smaller fields_out_max holds; one over 16 MiB is refused. */
START_TEST(test_response_fields_of_any_size)
{
	static const size_t wants[] = { 3000, 10000, 60000, 70000, 0, 20000 };
	char r[4096];

	serve_start();
	int fd = dial();
	for (size_t i = 0; i < sizeof(wants) / sizeof(wants[0]); i++)
		big_fields_check(fd, wants[i], 64 * 1024);
	ask(fd, "GET /info HTTP/1.1\r\nHost: h\r\n\r\n", r, sizeof(r));
	ck_assert_msg(!strstr(r, "X-Big") && strstr(r, "/info\n"), "%s", r);
	close(fd);
	serve_stop();

	fields_out_max = 2500;
	serve_start();
	fd = dial();
	big_fields_check(fd, 10000, 2500);
	close(fd);
	serve_stop();
	fields_out_max = 0;

	struct runtime *r2;
	struct runtime_http_server *s2;
	struct runtime_http_server_config cfg;
	ck_assert_int_eq(runtime_create(&r2, NULL), 0);
	runtime_http_server_config_init(&cfg);
	ck_assert_uint_eq(cfg.fields_out_max, 64 * 1024);
	cfg.handler = handler;
	cfg.fields_out_max = (16u << 20) + 1;
	ck_assert_int_eq(runtime_http_server_create(r2, &cfg, &s2), -EINVAL);
	runtime_destroy(r2);
}
END_TEST

/* A body must keep 200 bytes/s once 300 ms have passed: one that comes
 * at 10 bytes/s (a byte each 100 ms, each resetting no idle timer that
 * matters) ends in 408 and a close, not before the grace; one at 10,000
 * bytes/s is read whole. */
START_TEST(test_body_min_rate_408)
{
	static char chunk[500], r[8192];
	body_min_rate = 200;
	body_rate_grace_ns = 300 * MS;
	serve_start();

	int fd = dial();
	memset(chunk, 'z', sizeof(chunk));
	send_str(fd, "POST /body HTTP/1.1\r\nHost: h\r\nContent-Length: 3000\r\n\r\n");
	for (int i = 0; i < 6; i++) {
		ck_assert_int_eq(send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL), (ssize_t)sizeof(chunk));
		usleep(50 * 1000);
	}
	r[0] = '\0';
	ck_assert(read_until(fd, r, sizeof(r), "zzz"));
	ck_assert_msg(!strncmp(r, "HTTP/1.1 200 ", 13), "%.200s", r);
	close(fd);

	fd = dial();
	uint64_t t0 = runtime_now();
	send_str(fd, "POST /readall HTTP/1.1\r\nHost: h\r\nContent-Length: 50\r\n\r\n");
	r[0] = '\0';
	for (int i = 0; i < 50 && !strstr(r, "\r\n\r\n"); i++) {
		send(fd, "x", 1, MSG_NOSIGNAL);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) == 1)
			ck_assert(read_until(fd, r, sizeof(r), "\r\n\r\n"));
	}
	ck_assert_msg(!strncmp(r, "HTTP/1.1 408 ", 13), "%.200s", r);
	ck_assert_uint_ge(runtime_now() - t0, 250 * MS); /* the grace first */
	ck_assert(closed_by_server(fd));
	close(fd);
	serve_stop();
	body_min_rate = 240;
	body_rate_grace_ns = 5 * SEC;
}
END_TEST

/* A handler takes its connection over after a 101: the head has the
 * handler's field, the bytes sent with the request come back first, then
 * what follows, both ways, past the idle timeout the library had set;
 * when the client ends, so does the connection, and no HTTP follows.
 * A request that did not ask (no Upgrade, another protocol, no
 * "upgrade" in Connection) is refused, the connection going on. */
START_TEST(test_upgrade_takes_the_connection)
{
	char r[4096];

	idle_timeout_ns = 300 * MS;
	serve_start();
	int fd = dial();
	r[0] = '\0';
	send_str(fd, "GET /upgrade HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\n"
	             "Upgrade: foo/2, echo\r\n\r\nearly bytes|");
	ck_assert(read_until(fd, r, sizeof(r), "early bytes|"));
	ck_assert_str_eq(r, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\n"
	                    "Connection: Upgrade\r\nX-Echo: yes\r\n\r\nearly bytes|");
	usleep(500 * 1000); /* past the library's idle timeout: none applies now */
	r[0] = '\0';
	send_str(fd, "GET / HTTP/1.1\r\n\r\n"); /* not HTTP any more: echoed */
	ck_assert(read_until(fd, r, sizeof(r), "GET / HTTP/1.1\r\n\r\n"));
	shutdown(fd, SHUT_WR);
	ck_assert(closed_by_server(fd));
	close(fd);

	static const char *const refused[] = {
		"GET /upgrade HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /upgrade HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: other\r\n\r\n",
		"GET /upgrade HTTP/1.1\r\nHost: h\r\nConnection: close\r\nUpgrade: echo\r\n\r\n",
	};
	fd = dial();
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		ask(fd, refused[i], r, sizeof(r));
		ck_assert_msg(strstr(r, "400 Bad Request") && strstr(r, "upgrade -22"), "%s", r);
	}
	close(fd);
	exchange("GET /upgrade HTTP/1.0\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", r,
	         sizeof(r));
	ck_assert_msg(strstr(r, "upgrade -93"), "%s", r); /* EPROTONOSUPPORT */
	serve_stop();
	idle_timeout_ns = 60 * SEC;
}
END_TEST

/* runtime_http_path_clean on a C string. */
static ssize_t clean(const char *path, char *out, size_t cap)
{
	return runtime_http_path_clean((struct runtime_http_slice){ path, strlen(path) }, out, cap);
}

/* Dot segments (RFC 3986 5.2.4 and 5.4's examples, made absolute), repeated
 * slashes, escapes of unreserved characters (the ".." a proxy must not
 * pass on), reserved ones kept, and every refusal. */
START_TEST(test_path_clean)
{
	static const struct { const char *in, *want; } cases[] = {
		{ "/", "/" },                   { "/a", "/a" },
		{ "/a/", "/a/" },               { "/a/b/c/./../../g", "/a/g" },
		{ "/a/b/../c", "/a/c" },        { "/api/a/../b", "/api/b" },
		{ "/..", "/" },                 { "/../../etc/passwd", "/etc/passwd" },
		{ "/a/..", "/" },               { "/a/b/..", "/a/" },
		{ "/a/.", "/a/" },              { "/./a", "/a" },
		{ "//a///b//", "/a/b/" },       { "/a/...", "/a/..." },
		{ "/a/..b/.c", "/a/..b/.c" },   { "/a/%2e%2E/b", "/b" },
		{ "/a/%2e/b", "/a/b" },         { "/%7e%41%5f", "/~A_" },
		{ "/a%2fb/../c", "/c" },        { "/a/%2f/..", "/a/" },
		{ "/%2F%3a%3A", "/%2F%3A%3A" }, { "/a%20b", "/a%20b" },
		{ "/x.html", "/x.html" },       { "/a/b/c/../../../../d/", "/d/" },
	};
	char out[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ssize_t n = clean(cases[i].in, out, sizeof(out));
		ck_assert_msg(n == (ssize_t)strlen(cases[i].want) && !strcmp(out, cases[i].want),
		              "%s: got %zd '%s', want '%s'", cases[i].in, n, n >= 0 ? out : "",
		              cases[i].want);
	}
	static const char *const refused[] = {
		"", "a/b", "/a b", "/a%zz", "/a%4", "/a%00b", "/a?b", "/a#b", "/a\tb", "/\x7f",
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		ck_assert_msg(clean(refused[i], out, sizeof(out)) == -EINVAL, "'%s'", refused[i]);
	ck_assert_int_eq(clean("/abc", out, 4), -ENOBUFS);     /* no room for the NUL */
	ck_assert_int_eq(clean("/abc", out, 5), 4);
	ck_assert_int_eq(clean("/%7e", out, 3), 2);            /* decoded: shorter */
	ck_assert_int_eq(runtime_http_path_clean((struct runtime_http_slice){ NULL, 0 }, out, 8),
	                 -EINVAL);
	ck_assert_int_eq(clean("/a", NULL, 8), -EINVAL);
}
END_TEST

/* Random paths of '/', '.', 'a' and escapes: the result starts with '/',
 * holds no empty, "." or ".." segment, is no longer than its path, and
 * is its own clean form. */
START_TEST(test_path_clean_random)
{
	static const char *const parts[] = { "/", "/", ".", ".", "a", "%2e", "%2F", "%61" };
	char in[128], out[128], again[128];
	unsigned seed = 12345;

	for (int round = 0; round < 20000; round++) {
		size_t n = 0;
		in[n++] = '/';
		for (int k = (int)((seed = seed * 1103515245 + 12345) >> 16) % 24; k > 0; k--) {
			const char *p = parts[((seed = seed * 1103515245 + 12345) >> 16) % 8];
			memcpy(in + n, p, strlen(p));
			n += strlen(p);
		}
		in[n] = '\0';
		ssize_t len = clean(in, out, sizeof(out));
		ck_assert_msg(len >= 1 && (size_t)len <= n && out[0] == '/', "%s", in);
		ck_assert_msg(!strstr(out, "//") && !strstr(out, "/./") && !strstr(out, "/../"),
		              "%s -> %s", in, out);
		size_t tail = strlen(out);
		ck_assert_msg(!(tail >= 2 && !strcmp(out + tail - 2, "/.")) &&
		              !(tail >= 3 && !strcmp(out + tail - 3, "/..")), "%s -> %s", in, out);
		ck_assert_int_eq(clean(out, again, sizeof(again)), len);
		ck_assert_str_eq(again, out);
	}
}
END_TEST

#define S(lit) (lit), sizeof(lit) - 1

/* test_two_servers' handler: a one-byte body of the type its server has. */
static int typed(struct runtime_http_request *req, struct runtime_http_response *res, void *arg)
{
	return runtime_http_respond(res, 200, arg, "x", 1);
}

struct two_servers {
	struct runtime *rt;
	struct runtime_http_server *named, *unnamed;
	sem_t ready;
};

static void *run_two(void *arg)
{
	struct two_servers *t = arg;
	struct runtime_http_server_config cfg;

	ck_assert_int_eq(runtime_create(&t->rt, NULL), 0); /* one core */
	runtime_http_server_config_init(&cfg);
	cfg.serve.host = "127.0.0.1";
	cfg.handler = typed;
	cfg.header_timeout_ns = 5 * SEC;
	cfg.server_name = "alpha";
	cfg.arg = "text/alpha";
	ck_assert_int_eq(runtime_http_serve(t->rt, &cfg, &t->named), 0);
	cfg.server_name = "";
	cfg.arg = "text/b";
	ck_assert_int_eq(runtime_http_serve(t->rt, &cfg, &t->unnamed), 0);
	sem_post(&t->ready);
	runtime_run(t->rt);
	return NULL;
}

/* Two servers on one thread, answered by turns: each head has its own
 * server's Server field (or none) and its own Content-Type, though the
 * thread keeps one of each made ready. */
START_TEST(test_two_servers_one_thread)
{
	struct two_servers t = { 0 };
	pthread_t th;
	char r[1024];

	sem_init(&t.ready, 0, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, run_two, &t), 0);
	sem_wait(&t.ready);
	for (int i = 0; i < 3; i++) {
		port = runtime_http_server_port(t.named);
		exchange("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
		ck_assert_msg(!strncmp(r, S("HTTP/1.1 200 OK\r\nServer: alpha\r\nDate: ")) &&
		              strstr(r, "\r\nContent-Type: text/alpha\r\n"), "got: %s", r);
		port = runtime_http_server_port(t.unnamed);
		exchange("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", r, sizeof(r));
		ck_assert_msg(!strncmp(r, S("HTTP/1.1 200 OK\r\nDate: ")) && !strstr(r, "Server") &&
		              strstr(r, "\r\nContent-Type: text/b\r\n"), "got: %s", r);
	}
	runtime_shutdown(t.rt);
	pthread_join(th, NULL);
	runtime_http_server_destroy(t.named);
	runtime_http_server_destroy(t.unnamed);
	runtime_destroy(t.rt);
	sem_destroy(&t.ready);
}
END_TEST

START_TEST(test_bad_config)
{
	struct runtime_http_server_config cfg;
	struct runtime_http_server *s = (void *)1;
	struct runtime *r;

	ck_assert_int_eq(runtime_create(&r, NULL), 0);
	runtime_http_server_config_init(&cfg);
	ck_assert_int_eq(runtime_http_serve(r, &cfg, &s), -EINVAL); /* no handler */
	ck_assert_ptr_null(s);
	cfg.handler = handler;
	cfg.limits.headers_max = RUNTIME_HTTP_HEADERS_MAX + 1;
	ck_assert_int_eq(runtime_http_serve(r, &cfg, &s), -EINVAL);
	cfg.limits.headers_max = 0;
	cfg.limits.line_max = 20000; /* longer than the head may be */
	ck_assert_int_eq(runtime_http_serve(r, &cfg, &s), -EINVAL);
	cfg.limits.line_max = 0;
	cfg.server_name = "evil\r\nX: 1";
	ck_assert_int_eq(runtime_http_serve(r, &cfg, &s), -EINVAL);
	/* A control byte, which the library's own client would refuse, or
	 * a space at an end: no field value. */
	static const char *const bad_names[] = { "a\x01b", "a\x7f", "\tname", "name " };
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		cfg.server_name = bad_names[i];
		ck_assert_int_eq(runtime_http_serve(r, &cfg, &s), -EINVAL);
		ck_assert_ptr_null(s);
	}
	ck_assert_int_eq(runtime_http_serve(NULL, &cfg, &s), -EINVAL);
	ck_assert_int_eq(runtime_http_serve(r, NULL, &s), -EINVAL);
	ck_assert_int_eq(runtime_http_serve(r, &cfg, NULL), -EINVAL);
	runtime_destroy(r);
}
END_TEST

/* ----------------------------------------------------- the same over h2 */

/*
 * The handlers above, unchanged, over HTTP/2 (h2c by prior knowledge,
 * from h2_client.h's nghttp2 client): what a request gives, bodies both
 * ways, every kind of response, failures, limits, counters, the hook,
 * the drain and idle connections - with HTTP/2's framing where HTTP/1.1's
 * would differ: no chunked coding, no Connection field, a reset stream
 * where HTTP/1.1 would close the connection.
 */

static const char *const no_fields[] = { NULL };

#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define H2_SETTINGS "\0\0\0\4\0\0\0\0\0" /* empty */

/* The payload of the first frame of type on stream in the n bytes the
 * server sent (after nothing but whole frames), NULL if none. */
static const unsigned char *frame_find(const char *buf, size_t n, int type, unsigned stream)
{
	const unsigned char *p = (const unsigned char *)buf, *end = p + n;

	while (end - p >= 9) {
		size_t len = (size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2];
		unsigned id = ((unsigned)p[5] & 0x7f) << 24 | (unsigned)p[6] << 16 |
		              (unsigned)p[7] << 8 | p[8];
		if ((size_t)(end - p) < 9 + len)
			return NULL;
		if (p[3] == type && id == stream)
			return p + 9;
		p += 9 + len;
	}
	return NULL;
}

START_TEST(test_h2_request_parts)
{
	serve_start();
	struct h2t *t = h2t_open(port);
	static const char *const f[] = { "x-one", "first", "x-rep", "1", "x-one", "second",
		                         "x-rep", "2", NULL };
	struct h2t_answer *a = h2t_ask(t, "GET", "/info?a=1&b", f, NULL, 0);
	ck_assert_int_eq(a->status, 200);
	ck_assert_msg(a->body && !strcmp(a->body, "GET\n/info?a=1&b\n/info\na=1&b\n1.1\nfirst\n"),
	              "got: %s", a->body);
	/* Bad targets, by the rule HTTP/1.1's requests follow: 400. */
	static const char *const bad[] = { "/a%zz", "/a%4", "/a b", "/#x", "x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		a = h2t_ask(t, "GET", bad[i], no_fields, NULL, 0);
		ck_assert_msg(a->status == 400 || a->reset, "%s: %d", bad[i], a->status);
	}
	a = h2t_ask(t, "GET", "/info", no_fields, NULL, 0); /* the connection goes on */
	ck_assert_int_eq(a->status, 200);
	h2t_close(t);
	serve_stop();
}
END_TEST

/* :authority is the Host a handler reads; a Host that disagrees is 400. */
static int host_of(struct runtime_http_request *req, struct runtime_http_response *res)
{
	const struct runtime_http_slice *h = runtime_http_header(req, "Host");
	char out[64];
	int n = snprintf(out, sizeof(out), "%d %.*s", runtime_http_version(req), h ? (int)h->len : 0,
	                 h ? h->p : "");
	return runtime_http_respond(res, 200, NULL, out, (size_t)n);
}

START_TEST(test_h2_version_and_host)
{
	serve_start();
	struct h2t *t = h2t_open(port);
	struct h2t_answer *a = h2t_ask(t, "GET", "/host", no_fields, NULL, 0);
	ck_assert_msg(a->status == 200 && !strcmp(a->body, "20 h"), "got %d %s", a->status, a->body);
	static const char *const other[] = { "host", "elsewhere", NULL };
	a = h2t_ask(t, "GET", "/host", other, NULL, 0);
	ck_assert_int_eq(a->status, 400);
	a = h2t_ask(t, "GET", "/upgrade", no_fields, NULL, 0); /* no Upgrade in HTTP/2 */
	ck_assert_msg(a->status == 400 && !strcmp(a->body, "upgrade -93\n"), "%d %s", a->status,
	              a->body);
	static const char *const same_host[] = { "host", "h", NULL };
	a = h2t_ask(t, "GET", "/host", same_host, NULL, 0);
	ck_assert_int_eq(a->status, 200);
	h2t_close(t);
	serve_stop();
}
END_TEST

/* Bodies read 7 bytes at a time: with a length, without (-1 to the
 * handler, as chunked), in DATA frames sent one by one, with trailers. */
START_TEST(test_h2_body_stream)
{
	serve_start();
	struct h2t *t = h2t_open(port);
	static const char *const cl[] = { "content-length", "26", NULL };
	struct h2t_answer *a = h2t_ask(t, "POST", "/body", cl, "abcdefghijklmnopqrstuvwxyz", 26);
	ck_assert_msg(a->status == 200 && !strcmp(a->body, "abcdefghijklmnopqrstuvwxyz"),
	              "got %d %s", a->status, a->body);
	ck_assert(h2t_has(a, "content-length: 26\n"));
	a = h2t_submit(t, "POST", "/body", no_fields, NULL, 0, true);
	h2t_pump(t, 50);
	h2t_body_more(t, a, "hello ", 6, false);
	h2t_pump(t, 50);
	h2t_body_more(t, a, "world", 5, true);
	ck_assert(h2t_wait(t, a));
	ck_assert_msg(a->status == 200 && !strcmp(a->body, "hello world"), "got %s", a->body);
	ck_assert_int_eq(atomic_load(&seen_error), 0);
	h2t_close(t);
	serve_stop();
}
END_TEST

/* The minimum body rate over HTTP/2: a stream whose body comes a byte
 * each 100 ms, against 200 bytes/s after 300 ms, is answered 408; the
 * connection serves the next stream. */
START_TEST(test_h2_body_min_rate_408)
{
	body_min_rate = 200;
	body_rate_grace_ns = 300 * MS;
	serve_start();
	struct h2t *t = h2t_open(port);
	uint64_t t0 = runtime_now();
	struct h2t_answer *a = h2t_submit(t, "POST", "/readall", no_fields, NULL, 0, true);
	for (int i = 0; i < 50 && !a->status; i++) {
		h2t_body_more(t, a, "x", 1, false);
		h2t_pump(t, 100);
	}
	ck_assert_int_eq(a->status, 408);
	ck_assert_uint_ge(runtime_now() - t0, 250 * MS);
	a = h2t_ask(t, "GET", "/info", no_fields, NULL, 0);
	ck_assert_int_eq(a->status, 200);
	h2t_close(t);
	serve_stop();
	body_min_rate = 240;
	body_rate_grace_ns = 5 * SEC;
}
END_TEST

/* HTTP/2's answers are logged too, a refused head's (a bad :path: 400)
 * included: the library's line and on_response's. */
START_TEST(test_h2_access_log)
{
	static char piped[8192];
	int log_rd;

	log_serve_start(RUNTIME_HTTP_LOG_COMMON, &log_rd);
	struct h2t *t = h2t_open(port);
	struct h2t_answer *a = h2t_ask(t, "GET", "/tagged", no_fields, NULL, 0);
	ck_assert_int_eq(a->status, 200);
	a = h2t_ask(t, "GET", "/a%zz", no_fields, NULL, 0);
	ck_assert_int_eq(a->status, 400);
	h2t_close(t);
	log_serve_stop(2, log_rd, piped, sizeof(piped));
	ck_assert_int_eq(atomic_load(&logged), 2);
	ck_assert_msg(strstr(piped, "] \"GET /tagged HTTP/2.0\" 200 6\n") &&
	              strstr(piped, "] \"GET /a%zz HTTP/2.0\" 400 "), "%s", piped);
	ck_assert_msg(strstr(logged_json, "tag-7{") && strstr(logged_json, "\"proto\":\"HTTP/2.0\""),
	              "%s", logged_json);
}
END_TEST

static void pump_10ms(void *t)
{
	h2t_pump(t, 10);
}

/* A stream reset while its handler waits: the handler is cancelled and
 * the answer logged 499, the client's close. */
START_TEST(test_h2_reset_cancels_the_handler_499)
{
	on_response = hook;
	atomic_store(&hooked, 0);
	atomic_store(&wait_rc, 1);
	serve_start();
	struct h2t *t = h2t_open(port);
	struct h2t_answer *a = h2t_submit(t, "GET", "/wait", no_fields, NULL, 0, false);
	wait_begun(pump_10ms, t); /* a reset before it began: the handler never runs */
	ck_assert_int_eq(nghttp2_submit_rst_stream(t->s, NGHTTP2_FLAG_NONE, a->id, NGHTTP2_CANCEL), 0);
	nghttp2_session_send(t->s);
	for (int i = 0; i < 5000 && atomic_load(&hooked) == 0; i++)
		usleep(1000);
	ck_assert_int_eq(atomic_load(&hooked), 1);
	ck_assert_int_eq(atomic_load(&wait_rc), -ECANCELED);
	ck_assert_int_eq(atomic_load(&hooked_status), 499);
	h2t_close(t);
	serve_stop();
	on_response = NULL;
}
END_TEST

/* A body larger than a stream's window (64 KiB), read as the handler
 * reads: the window is credited as it goes, the whole body comes back. */
static int echo_big(struct runtime_http_request *req, struct runtime_http_response *res)
{
	static char all[300 * 1024];
	size_t got = 0;
	ssize_t n;

	while ((n = runtime_http_body_read(req, all + got, sizeof(all) - got)) > 0)
		got += (size_t)n;
	if (n < 0)
		return (int)n;
	return runtime_http_respond(res, 200, NULL, all, got);
}

START_TEST(test_h2_body_over_the_window)
{
	static char big[256 * 1024];

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 23);
	body_max = sizeof(big);
	serve_start();
	struct h2t *t = h2t_open(port);
	struct h2t_answer *a = h2t_ask(t, "POST", "/echobig", no_fields, big, sizeof(big));
	ck_assert_int_eq(a->status, 200);
	ck_assert_uint_eq(a->body_len, sizeof(big));
	ck_assert(!memcmp(a->body, big, sizeof(big)));
	h2t_close(t);
	serve_stop();
	body_max = 4096;
}
END_TEST

/* Expect: 100-continue: a 100 on the first read, none for a handler that
 * does not read. */
START_TEST(test_h2_continue_on_first_read)
{
	serve_start();
	struct h2t *t = h2t_open(port);
	static const char *const f[] = { "expect", "100-continue", "content-length", "4", NULL };
	struct h2t_answer *a = h2t_submit(t, "POST", "/body", f, NULL, 0, true);
	for (int i = 0; i < 1000 && !a->interim; i++)
		h2t_pump(t, 10);
	ck_assert_int_eq(a->interim, 100);
	h2t_body_more(t, a, "ping", 4, true);
	ck_assert(h2t_wait(t, a));
	ck_assert_msg(a->status == 200 && !strcmp(a->body, "ping"), "got %s", a->body);
	a = h2t_submit(t, "POST", "/noread", f, NULL, 0, true);
	ck_assert(h2t_wait(t, a)); /* answered, then reset (NO_ERROR): send no body */
	ck_assert_int_eq(a->interim, 0);
	ck_assert_int_eq(a->status, 200);
	ck_assert_str_eq(a->body, "not read");
	h2t_close(t);
	serve_stop();
}
END_TEST

/* A body the handler leaves unread: the answer whole, the stream reset
 * NO_ERROR so the client stops sending; the connection goes on. */
START_TEST(test_h2_unread_body_skipped)
{
	serve_start();
	struct h2t *t = h2t_open(port);
	struct h2t_answer *a = h2t_submit(t, "POST", "/noread", no_fields, "XXXXX", 5, true);
	ck_assert(h2t_wait(t, a));
	ck_assert_msg(a->status == 200 && a->ended && !strcmp(a->body, "not read"), "%d", a->status);
	ck_assert_uint_eq(a->reset, NGHTTP2_NO_ERROR);
	a = h2t_ask(t, "GET", "/info", no_fields, NULL, 0);
	ck_assert_int_eq(a->status, 200);
	h2t_close(t);
	serve_stop();
}
END_TEST

/* Bad bodies: over body_max by its length (413 without the handler) or
 * by its bytes (the handler sees -EMSGSIZE), a length the DATA break
 * (the stream reset: PROTOCOL_ERROR), a body cut by the client's reset
 * (the handler sees it end). */
START_TEST(test_h2_bad_bodies)
{
	static char big[5000];

	serve_start();
	struct h2t *t = h2t_open(port);
	static const char *const cl5000[] = { "content-length", "5000", NULL };
	struct h2t_answer *a = h2t_ask(t, "POST", "/body", cl5000, big, sizeof(big));
	ck_assert_int_eq(a->status, 413);
	a = h2t_ask(t, "POST", "/body", no_fields, big, sizeof(big));
	ck_assert_int_eq(a->status, 413);
	ck_assert_int_eq(atomic_load(&seen_error), -EMSGSIZE);
	static const char *const cl3[] = { "content-length", "3", NULL };
	a = h2t_ask(t, "POST", "/body", cl3, "abcdef", 6);
	ck_assert_uint_eq(a->reset, NGHTTP2_PROTOCOL_ERROR);
	atomic_store(&seen_error, 0);
	a = h2t_submit(t, "POST", "/body", no_fields, "abc", 3, true);
	h2t_pump(t, 100);
	nghttp2_submit_rst_stream(t->s, NGHTTP2_FLAG_NONE, a->id, NGHTTP2_CANCEL);
	h2t_pump(t, 100);
	for (int i = 0; i < 1000 && !atomic_load(&seen_error); i++)
		usleep(1000);
	int err = atomic_load(&seen_error);
	ck_assert_msg(err == -EPIPE || err == -ECANCELED, "the handler saw %d", err);
	a = h2t_ask(t, "GET", "/info", no_fields, NULL, 0); /* the connection goes on */
	ck_assert_int_eq(a->status, 200);
	h2t_close(t);
	serve_stop();
}
END_TEST

START_TEST(test_h2_responses)
{
	serve_start();
	struct h2t *t = h2t_open(port);
	struct h2t_answer *a = h2t_ask(t, "GET", "/chunked", no_fields, NULL, 0);
	ck_assert_msg(a->status == 200 && !strcmp(a->body, "piece;piece;piece;") &&
	              !h2t_has(a, "content-length") && !h2t_has(a, "transfer-encoding"),
	              "got %s / %s", a->fields, a->body);
	a = h2t_ask(t, "GET", "/length", no_fields, NULL, 0);
	ck_assert(h2t_has(a, "content-length: 10\n") && !strcmp(a->body, "helloworld"));
	a = h2t_ask(t, "HEAD", "/length", no_fields, NULL, 0);
	ck_assert(a->status == 200 && h2t_has(a, "content-length: 10\n") && !a->body_len);
	a = h2t_ask(t, "GET", "/nocontent", no_fields, NULL, 0);
	ck_assert(a->status == 204 && !h2t_has(a, "content-length") && !a->body_len);
	a = h2t_ask(t, "GET", "/notmodified", no_fields, NULL, 0);
	ck_assert(a->status == 304 && h2t_has(a, "content-length: 1234\n") && !a->body_len);
	a = h2t_ask(t, "GET", "/file", no_fields, NULL, 0);
	ck_assert(h2t_has(a, "content-length: 5\n") && !strcmp(a->body, "23456"));
	a = h2t_ask(t, "GET", "/bigfile", no_fields, NULL, 0);
	ck_assert_uint_eq(a->body_len, BIG_FILE);
	/* Fields past 4 KiB (on the heap) and past 64 KiB (-ENOBUFS). */
	static const size_t wants[] = { 10000, 60000, 70000 };
	for (size_t i = 0; i < sizeof(wants) / sizeof(wants[0]); i++) {
		char path[40], body[32];
		int rc;
		unsigned count = big_count(wants[i], 64 * 1024, &rc);
		snprintf(path, sizeof(path), "/bigfields?%zu", wants[i]);
		a = h2t_ask(t, "GET", path, no_fields, NULL, 0);
		snprintf(body, sizeof(body), "%u %d", count, rc);
		ck_assert_msg(a->status == 200 && a->body && !strcmp(a->body, body), "%s: %d %s",
		              path, a->status, a->body ? a->body : "");
		big_fields_in(a->fields, a->fields_len, count, true); /* after the library's */
	}
	a = h2t_ask(t, "GET", "/fields", no_fields, NULL, 0);
	ck_assert_msg(h2t_has(a, "x-fine: yes  it is\n") && !strstr(a->fields, "injected") &&
	              !strstr(a->fields, "x-reserved") && !strcmp(a->body, "-22 -22 -1 0"),
	              "got %s / %s", a->fields, a->body);
	ck_assert(h2t_has(a, "server: runtime\n") && h2t_has(a, "date: "));
	a = h2t_ask(t, "GET", "/types?b", no_fields, NULL, 0);
	ck_assert(a->status == 404 && h2t_has(a, "content-type: text/b\n") && !strcmp(a->body, "b"));
	a = h2t_ask(t, "GET", "/types?n", no_fields, NULL, 0);
	ck_assert(!h2t_has(a, "content-type") && h2t_has(a, "content-length: 1\n"));
	h2t_close(t);
	serve_stop();
}
END_TEST

/* runtime_http_respond and a streamed answer of the same body: the same
 * status, fields (but the date) and body, on GET, HEAD and POST. */
START_TEST(test_h2_respond_as_streamed)
{
	static const char *const paths[] = { "/same?%ca13", "/same?%cn3", "/same?%cl0",
		                             "/same?%cl17", "/same?%ca3000", "/same?%Ca5" };
	char p[64];

	serve_start();
	struct h2t *t = h2t_open(port);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		for (int m = 0; m < 3; m++) {
			const char *method = m == 0 ? "GET" : m == 1 ? "HEAD" : "POST";
			struct h2t_answer *ans[2];
			for (int k = 0; k < 2; k++) {
				snprintf(p, sizeof(p), paths[i], k ? 's' : 'r');
				if (p[6] == 'C' || p[6] == 'S')
					p[6] = k ? 'S' : 'R';
				ans[k] = h2t_ask(t, method, p, no_fields, m == 2 ? "ok" : NULL, m == 2 ? 2 : 0);
				char *d = strstr(ans[k]->fields, "date: ");
				if (d)
					memset(d + 6, 'X', 29);
			}
			ck_assert_int_eq(ans[0]->status, ans[1]->status);
			ck_assert_str_eq(ans[0]->fields, ans[1]->fields);
			ck_assert_uint_eq(ans[0]->body_len, ans[1]->body_len);
			ck_assert(!ans[0]->body_len || !memcmp(ans[0]->body, ans[1]->body, ans[0]->body_len));
		}
	}
	h2t_close(t);
	serve_stop();
}
END_TEST

/* A handler that fails: 500 if nothing went out, a reset stream
 * (INTERNAL_ERROR) if something did; the connection goes on. */
START_TEST(test_h2_handler_failures)
{
	serve_start();
	struct h2t *t = h2t_open(port);
	struct h2t_answer *a = h2t_ask(t, "GET", "/fail", no_fields, NULL, 0);
	ck_assert_int_eq(a->status, 500);
	a = h2t_ask(t, "GET", "/abandon", no_fields, NULL, 0);
	ck_assert(!a->ended && a->reset == NGHTTP2_INTERNAL_ERROR);
	a = h2t_ask(t, "GET", "/short", no_fields, NULL, 0);
	ck_assert(!a->ended && a->reset == NGHTTP2_INTERNAL_ERROR);
	a = h2t_ask(t, "GET", "/nothing", no_fields, NULL, 0);
	ck_assert_int_eq(a->status, 500);
	ck_assert_str_eq(a->body, "500 Internal Server Error\n");
	a = h2t_ask(t, "GET", "/info", no_fields, NULL, 0);
	ck_assert_int_eq(a->status, 200);
	h2t_close(t);
	serve_stop();
}
END_TEST

/* A head over head_max is 431 (the stream alone: the connection goes
 * on); the counters count HTTP/2's requests as HTTP/1.1's; the hook is
 * called after each answer, the refusal's too. */
START_TEST(test_h2_limits_stats_and_hook)
{
	static char big[20000];
	struct runtime_http_server_stats st;

	on_response = hook;
	atomic_store(&hooked, 0);
	serve_start();
	memset(big, 'a', sizeof(big) - 1);
	struct h2t *t = h2t_open(port);
	const char *const f[] = { "x-big", big, NULL };
	struct h2t_answer *a = h2t_ask(t, "GET", "/info", f, NULL, 0);
	ck_assert_int_eq(a->status, 431);
	a = h2t_ask(t, "GET", "/info", no_fields, NULL, 0);
	ck_assert_int_eq(a->status, 200);
	a = h2t_ask(t, "GET", "/nothing-here", no_fields, NULL, 0);
	ck_assert_int_eq(a->status, 404);
	runtime_http_server_stats(srv, &st);
	ck_assert_uint_eq(st.requests, 2);
	ck_assert_uint_eq(st.rejected, 1);
	ck_assert_uint_eq(st.responses[2], 1);
	ck_assert_uint_eq(st.responses[4], 2);
	ck_assert_int_eq(atomic_load(&hooked), 3);
	ck_assert_int_eq(atomic_load(&hooked_status), 404);
	h2t_close(t);
	serve_stop();
	on_response = NULL;
}
END_TEST

START_TEST(test_h2_body_errors_answered_for_the_handler)
{
	idle_timeout_ns = 300 * MS;
	serve_start();
	struct h2t *t = h2t_open(port);
	static const char *const cl5[] = { "content-length", "5", NULL };
	struct h2t_answer *a = h2t_submit(t, "POST", "/readall", cl5, "ab", 2, true);
	ck_assert(h2t_wait(t, a)); /* the rest never comes: 408 */
	ck_assert_int_eq(a->status, 408);
	static const char *const cl101[] = { "content-length", "101", NULL };
	a = h2t_submit(t, "POST", "/readall", cl101, NULL, 0, true);
	ck_assert(h2t_wait(t, a));
	ck_assert_int_eq(a->status, 413);
	a = h2t_ask(t, "GET", "/fail", no_fields, NULL, 0);
	ck_assert_int_eq(a->status, 500);
	h2t_close(t);
	serve_stop();
	idle_timeout_ns = 60 * SEC;
}
END_TEST

/* Streams at once on one connection: each its own handler (all of them
 * wait at the gate together), answered on their own streams. */
START_TEST(test_h2_streams_at_once)
{
	struct h2t_answer *a[GATE_CONNS];

	serve_start();
	struct h2t *t = h2t_open(port);
	atomic_store(&gate_in, 0);
	atomic_store(&gate_open, GATE_CONNS);
	for (int i = 0; i < GATE_CONNS; i++)
		a[i] = h2t_submit(t, "GET", "/gate", no_fields, NULL, 0, false);
	for (int i = 0; i < GATE_CONNS; i++) {
		ck_assert(h2t_wait(t, a[i]));
		ck_assert_int_eq(a[i]->status, 200);
		ck_assert_uint_eq(a[i]->body_len, GATE_BODY);
	}
	h2t_close(t);
	serve_stop();
}
END_TEST

/* A HEADERS frame for "GET /gate" on stream id, hand-made (a client
 * library keeps to the server's limits: this one need not): HPACK's
 * static :method GET, :scheme http, :path "/gate" and :authority "h". */
static void send_gate_headers(int fd, unsigned id)
{
	char f[] = "\0\0\x0c\1\5\0\0\0\0" "\x82\x86\x04\x05/gate\x01\x01h";
	f[8] = (char)id;
	ck_assert_int_eq(send(fd, f, sizeof(f) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(f) - 1);
}

/* Past SETTINGS_MAX_CONCURRENT_STREAMS handlers at once, a stream is
 * refused (REFUSED_STREAM, its handler never runs); the others finish. */
START_TEST(test_h2_streams_over_the_limit_refused)
{
	static char r[65536];

	max_streams = 3;
	serve_start();
	int fd = dial();
	send_str(fd, H2_PREFACE);
	ck_assert_int_eq(send(fd, H2_SETTINGS, 9, MSG_NOSIGNAL), 9);
	atomic_store(&gate_in, 0);
	atomic_store(&gate_open, 100);
	for (unsigned id = 1; id <= 7; id += 2)
		send_gate_headers(fd, id);
	size_t n = 0;
	for (int i = 0; i < 1000 && !frame_find(r, n, 3, 7); i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t got = poll(&p, 1, 10) == 1 ? recv(fd, r + n, sizeof(r) - n, 0) : 0;
		n += got > 0 ? (size_t)got : 0;
	}
	const unsigned char *rst = frame_find(r, n, 3, 7);
	ck_assert_msg(rst && rst[3] == NGHTTP2_REFUSED_STREAM, "no RST_STREAM on 7");
	ck_assert_uint_eq(atomic_load(&gate_in), 3);
	atomic_store(&gate_open, 3);
	for (int i = 0; i < 1000 && !(frame_find(r, n, 0, 1) && frame_find(r, n, 0, 3) &&
	                              frame_find(r, n, 0, 5)); i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t got = poll(&p, 1, 10) == 1 ? recv(fd, r + n, sizeof(r) - n, 0) : 0;
		n += got > 0 ? (size_t)got : 0;
	}
	ck_assert(frame_find(r, n, 0, 1) && frame_find(r, n, 0, 3) && frame_find(r, n, 0, 5));
	close(fd);
	serve_stop();
	max_streams = 0;
}
END_TEST

/* An idle HTTP/2 connection holds no fiber (only the server's own live),
 * answers its next requests as before, and a drain ends it with GOAWAY. */
START_TEST(test_h2_idle_connections_release_their_fiber)
{
	struct h2t *t[IDLE_CONNS];

	release_after_ns = 1000 * 1000;
	serve_start();
	for (int i = 0; i < IDLE_CONNS; i++) {
		t[i] = h2t_open(port);
		ck_assert_int_eq(h2t_ask(t[i], "GET", "/info", no_fields, NULL, 0)->status, 200);
	}
	for (int i = 0; i < 10000 && fibers_live(rt) > 2; i++)
		usleep(1000);
	ck_assert_uint_eq(fibers_live(rt), 2);
	for (int i = 0; i < IDLE_CONNS; i++)
		ck_assert_int_eq(h2t_ask(t[i], "GET", "/info?again", no_fields, NULL, 0)->status, 200);
	ck_assert_int_eq(runtime_drain(rt, 5 * SEC), 0);
	for (int i = 0; i < IDLE_CONNS; i++) {
		ck_assert(h2t_closed_by_server(t[i]));
		ck_assert(t[i]->goaway && t[i]->goaway_code == NGHTTP2_NO_ERROR);
		h2t_close(t[i]);
	}
	serve_end();
	release_after_ns = 10 * 1000 * 1000;
}
END_TEST

/* A drain while a stream's handler reads its body: GOAWAY names that
 * stream, the body is read whole and answered, then the connection ends. */
START_TEST(test_h2_drain_lets_a_body_finish)
{
	serve_start();
	struct h2t *t = h2t_open(port);
	ck_assert_int_eq(h2t_ask(t, "GET", "/info", no_fields, NULL, 0)->status, 200);
	static const char *const cl[] = { "content-length", "10", NULL };
	struct h2t_answer *a = h2t_submit(t, "POST", "/body", cl, "hello", 5, true);
	h2t_pump(t, 100);
	ck_assert_int_eq(runtime_drain(rt, 5 * SEC), 0);
	h2t_pump(t, 100);
	h2t_body_more(t, a, "world", 5, true);
	ck_assert(h2t_wait(t, a));
	ck_assert_msg(a->status == 200 && !strcmp(a->body, "helloworld"), "%d", a->status);
	ck_assert(h2t_closed_by_server(t));
	ck_assert(t->goaway && t->goaway_last == a->id);
	h2t_close(t);
	serve_end();
}
END_TEST

/* A drain seen while a handler runs: its GOAWAY leaves before anything
 * more is read, so that a stream the client opened meanwhile - above the
 * GOAWAY's last stream id, which the client retries elsewhere - is not
 * served here too (fuzz_h2_server's regression goaway-last-id-raised).
 * Raw frames: a DATA frame that fills the server's read, then a new
 * stream's HEADERS in the same write, read only after the drain is seen. */
START_TEST(test_h2_drain_takes_no_stream_after_its_goaway)
{
	static const char open1[] = H2_PREFACE H2_SETTINGS "\0\0\x0c\1\4\0\0\0\1"
		"\x83\x86\x44\x05/body\x41\x01h"; /* POST /body, its body to come */
	static const char open3[] = "\0\0\x0c\1\5\0\0\0\3" "\x82\x86\x44\x05/info\x41\x01h";
	static char more[9 + 16375 + sizeof(open3)], r[4096];
	struct runtime_http_server_stats st;

	serve_start();
	int fd = dial();
	ck_assert_int_eq(send(fd, open1, sizeof(open1) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(open1) - 1);
	usleep(100 * 1000);
	ck_assert_int_eq(runtime_drain(rt, 5 * SEC), 0);
	usleep(100 * 1000);
	memcpy(more, "\0\x3f\xf7\0\0\0\0\0\1", 9); /* DATA, 16375 bytes: one read */
	memset(more + 9, 'x', 16375);
	memcpy(more + 9 + 16375, open3, sizeof(open3) - 1);
	ck_assert_int_eq(send(fd, more, sizeof(more) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(more) - 1);
	size_t n = read_all(fd, r, sizeof(r)); /* until the server closes */
	const unsigned char *goaway = frame_find(r, n, 7, 0);
	ck_assert_msg(goaway && goaway[3] == 1, "no GOAWAY naming stream 1 in %zu bytes", n);
	ck_assert_msg(!frame_find(r, n, 1, 3), "stream 3, above the GOAWAY's last, answered");
	runtime_http_server_stats(srv, &st);
	ck_assert_uint_eq(st.requests, 1);
	close(fd);
	serve_end();
}
END_TEST

/* runtime_http_serve_conn past its caller's deadline: every read fails
 * at once, so an h2c connection ends, as an HTTP/1.1 one does - its
 * reader must not read again for ever, on a core no other fiber gets. */
static void serve_until_deadline(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct runtime_conn *conn;

	runtime_deadline_set(runtime_now() + 200 * MS);
	if (runtime_conn_open(&conn, fd, 0) < 0) {
		close(fd);
		return;
	}
	runtime_http_serve_conn(srv, conn);
	runtime_conn_close(conn);
	runtime_deadline_set(0);
}

START_TEST(test_h2_ends_past_the_callers_deadline)
{
	static const char hello[] = H2_PREFACE H2_SETTINGS;
	static char r[4096];
	int sv[2];

	serve_start();
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(runtime_spawn(rt, serve_until_deadline, (void *)(intptr_t)sv[1]), 0);
	ck_assert_int_eq(send(sv[0], hello, sizeof(hello) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(hello) - 1);
	size_t n = read_all(sv[0], r, sizeof(r)); /* until the server closes */
	ck_assert_msg(frame_find(r, n, 4, 0), "no SETTINGS in %zu bytes", n);
	ck_assert_int_eq(recv(sv[0], r, 1, MSG_DONTWAIT), 0); /* closed */
	close(sv[0]);
	serve_stop();
}
END_TEST

/* A handler's bytes taken back while a DATA frame of them waits to be
 * sent: the client reads nothing, so the writer waits in a write with the
 * next frame made and put off, and the handler's wait for its bytes to be
 * framed times out (idle_timeout) and cuts its stream. That frame must
 * then reset the stream, not be framed from the bytes taken back (a NULL
 * read: the server crashed). */
START_TEST(test_h2_cut_while_its_frame_waits)
{
	idle_timeout_ns = 300 * MS;
	serve_start();
	struct h2t *t = h2t_open_with(port, NULL, 0, 1u << 30); /* windows past FLOOD */
	h2t_submit(t, "GET", "/flood", no_fields, NULL, 0, false);
	usleep(700 * 1000);
	for (int i = 0; i < 1000 && h2t_pump(t, 100); i++)
		;
	h2t_close(t);
	t = h2t_open(port); /* the server lives */
	ck_assert_int_eq(h2t_ask(t, "GET", "/info", no_fields, NULL, 0)->status, 200);
	h2t_close(t);
	serve_stop();
	idle_timeout_ns = 60 * SEC;
}
END_TEST

/* An idle connection ends after idle_timeout with GOAWAY; a header block
 * begun and never ended ends it after header_timeout. */
START_TEST(test_h2_timeouts)
{
	idle_timeout_ns = 300 * MS;
	header_timeout_ns = 300 * MS;
	serve_start();
	struct h2t *t = h2t_open(port);
	ck_assert_int_eq(h2t_ask(t, "GET", "/info", no_fields, NULL, 0)->status, 200);
	ck_assert(h2t_closed_by_server(t));
	ck_assert(t->goaway && t->goaway_code == NGHTTP2_NO_ERROR);
	h2t_close(t);
	/* HEADERS without END_HEADERS, no CONTINUATION after */
	int fd = dial();
	static const char head[] = H2_PREFACE H2_SETTINGS "\0\0\1\1\1\0\0\0\1" "\x82";
	static char r[4096];
	ck_assert_int_eq(send(fd, head, sizeof(head) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(head) - 1);
	size_t n = read_all(fd, r, sizeof(r)); /* until the server closes */
	const unsigned char *goaway = frame_find(r, n, 7, 0);
	ck_assert_msg(goaway && goaway[7] == NGHTTP2_PROTOCOL_ERROR, "no GOAWAY in %zu bytes", n);
	close(fd);
	serve_stop();
	idle_timeout_ns = 60 * SEC;
	header_timeout_ns = 5 * SEC;
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("http_lib");
	TCase *tc = tcase_create("server");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_request_parts);
	tcase_add_test(tc, test_file_ranges_by_every_way);
	tcase_add_test(tc, test_heads_in_pieces);
	tcase_add_test(tc, test_body_stream);
	tcase_add_test(tc, test_continue_on_first_read);
	tcase_add_test(tc, test_unread_body_skipped);
	tcase_add_test(tc, test_bad_bodies);
	tcase_add_test(tc, test_responses);
	tcase_add_test(tc, test_cached_heads);
	tcase_add_test(tc, test_types_again);
	tcase_add_test(tc, test_after_each);
	tcase_add_test(tc, test_gone_client_cancels_the_handler);
	tcase_add_test(tc, test_half_close_after_a_body_read_with_the_next_request);
	tcase_add_test(tc, test_respond_as_streamed);
	tcase_add_test(tc, test_handler_failures);
	tcase_add_test(tc, test_limits_and_stats);
	tcase_add_test(tc, test_drain_closes_idle);
	tcase_add_test(tc, test_drain_lets_a_body_finish);
	tcase_add_test(tc, test_health_is_503_from_the_drain_on);
	tcase_add_test(tc, test_idle_connections_release_their_fiber);
	tcase_add_test(tc, test_buffers_stay_warm_then_decay);
	tcase_add_test(tc, test_released_connection_times_out);
	tcase_add_test(tc, test_idle_timeout_after_bodies_and_files);
	tcase_add_test(tc, test_idle_timeout_with_or_without_release);
	tcase_add_test(tc, test_linger_ends_at_the_idle_deadline);
	tcase_add_test(tc, test_body_errors_answered_for_the_handler);
	tcase_add_test(tc, test_decode_helpers);
	tcase_add_test(tc, test_path_clean);
	tcase_add_test(tc, test_path_clean_random);
	tcase_add_test(tc, test_response_fields_of_any_size);
	tcase_add_test(tc, test_body_min_rate_408);
	tcase_add_test(tc, test_access_log_sees_every_response);
	tcase_add_test(tc, test_upgrade_takes_the_connection);
	tcase_add_test(tc, test_two_servers_one_thread);
	tcase_add_test(tc, test_bad_config);
	suite_add_tcase(s, tc);
	tc = tcase_create("h2");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_h2_request_parts);
	tcase_add_test(tc, test_h2_body_min_rate_408);
	tcase_add_test(tc, test_h2_access_log);
	tcase_add_test(tc, test_h2_reset_cancels_the_handler_499);
	tcase_add_test(tc, test_h2_version_and_host);
	tcase_add_test(tc, test_h2_body_stream);
	tcase_add_test(tc, test_h2_body_over_the_window);
	tcase_add_test(tc, test_h2_continue_on_first_read);
	tcase_add_test(tc, test_h2_unread_body_skipped);
	tcase_add_test(tc, test_h2_bad_bodies);
	tcase_add_test(tc, test_h2_responses);
	tcase_add_test(tc, test_h2_respond_as_streamed);
	tcase_add_test(tc, test_h2_handler_failures);
	tcase_add_test(tc, test_h2_limits_stats_and_hook);
	tcase_add_test(tc, test_h2_body_errors_answered_for_the_handler);
	tcase_add_test(tc, test_h2_streams_at_once);
	tcase_add_test(tc, test_h2_streams_over_the_limit_refused);
	tcase_add_test(tc, test_h2_idle_connections_release_their_fiber);
	tcase_add_test(tc, test_h2_drain_lets_a_body_finish);
	tcase_add_test(tc, test_h2_drain_takes_no_stream_after_its_goaway);
	tcase_add_test(tc, test_h2_ends_past_the_callers_deadline);
	tcase_add_test(tc, test_h2_cut_while_its_frame_waits);
	tcase_add_test(tc, test_h2_timeouts);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	(void)argc;
	test_init(argv[0]);
	int fd = mkstemp(strcpy(file_path, "/tmp/check_http_lib.XXXXXX"));

	if (fd < 0 || write(fd, "0123456789", 10) != 10)
		return 99;
	close(fd);
	static char big[BIG_FILE];
	memset(big, 'f', sizeof(big));
	if ((fd = mkstemp(strcpy(big_path, "/tmp/check_http_lib.XXXXXX"))) < 0 ||
	    write(fd, big, sizeof(big)) != (ssize_t)sizeof(big))
		return 99;
	close(fd);
	static char spanbuf[SPAN_FILE];
	for (size_t i = 0; i < SPAN_FILE; i++)
		spanbuf[i] = span_byte(i);
	if ((fd = mkstemp(strcpy(span_path, "/tmp/check_http_lib.XXXXXX"))) < 0 ||
	    write(fd, spanbuf, sizeof(spanbuf)) != (ssize_t)sizeof(spanbuf) || fsync(fd) < 0)
		return 99; /* fsync: written back, so that /span's cold can drop it */
	close(fd);
	int rc = test_run(suite());
	unlink(file_path);
	unlink(big_path);
	unlink(span_path);
	return rc;
}
