/* SPDX-License-Identifier: MIT */
/*
 * check_http_server.c - demos/http/http-server end to end, over loopback:
 * every route, keep-alive and pipelining, HTTP/1.0, Expect: 100-continue,
 * static files (types, 304 by date and by ETag, byte ranges, and no way
 * out of the root), every rejection
 * rule sent as raw bytes (the right status, then the connection closes),
 * limits, slow and half-closed clients, --max-conns, a graceful stop
 * with a request in flight, and /metrics read as Prometheus would. Each test starts its own server (port 0: the
 * banner says which port) and stops it.
 */
#include "testutil.h" /* skips and the suite's main; no runtime */

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http_rejections.h"

#define SERVER "./demos/http/http-server"
#define WAIT_MS 20000 /* a generous bound: only a hung server reaches it */

struct server_proc {
	pid_t pid;
	int port;
	char root[64];
};

static struct server_proc sp;
static rlim_t server_nofile; /* if set, the server's fd limit (soft and hard) */

/* Start the server with extra arguments (NULL-terminated) and a fresh
 * root holding a few files and a symlink that points outside it. */
static void start_server(const char *const *extra)
{
	const char *argv[32] = { SERVER, "--port", "0", "--host", "127.0.0.1", "--root" };
	int argc = 6, out[2];
	char line[256];

	strcpy(sp.root, "/tmp/http_root.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(sp.root));
	argv[argc++] = sp.root;
	for (int i = 0; extra && extra[i]; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	char path[128];
	snprintf(path, sizeof(path), "%s/hello.html", sp.root);
	FILE *f = fopen(path, "w");
	fputs("<p>hello</p>\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/big.bin", sp.root);
	f = fopen(path, "w");
	for (int i = 0; i < 300000; i++)
		fputc('a' + i % 26, f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/escape", sp.root);
	ck_assert_int_eq(symlink("/etc/passwd", path), 0);
	ck_assert_int_eq(pipe(out), 0);
	sp.pid = fork();
	ck_assert_int_ge(sp.pid, 0);
	if (sp.pid == 0) {
		dup2(out[1], 1);
		close(out[0]);
		struct rlimit rl = { server_nofile, server_nofile };
		if (server_nofile && setrlimit(RLIMIT_NOFILE, &rl) < 0)
			_exit(126);
		execv(SERVER, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	FILE *o = fdopen(out[0], "r");
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), o));
	ck_assert_msg(sscanf(line, "http-server: listening on 127.0.0.1:%d", &sp.port) == 1,
	              "banner: %s", line);
	fclose(o);
}

/* The server's flags for loop test _i: 0 its defaults; 1 every measuring
 * aid on (plain recv and accept, no batching, large files copied), which
 * must change how it works, never what it answers. */
static const char *const *variant(int i)
{
	static const char *const aids[] = { "--plain-recv", "--plain-accept", "--no-batch",
		                            "--file-copy", NULL };
	return i ? aids : NULL;
}

/* SIGTERM, and its exit status. */
static int stop_server(void)
{
	int status;
	char cmd[128];

	kill(sp.pid, SIGTERM);
	ck_assert_int_eq(waitpid(sp.pid, &status, 0), sp.pid);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", sp.root);
	ck_assert_int_eq(system(cmd), 0);
	return status;
}

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)sp.port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static void send_all(int fd, const void *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		ck_assert_int_gt(n, 0);
		p = (const char *)p + n;
		len -= (size_t)n;
	}
}

static void send_str(int fd, const char *s)
{
	send_all(fd, s, strlen(s));
}

/* Read until EOF or until want bytes (0: until EOF), within WAIT_MS. */
static size_t recv_until(int fd, char *buf, size_t cap, size_t want)
{
	size_t got = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	while (got < cap - 1 && (!want || got < want)) {
		ck_assert_msg(poll(&p, 1, WAIT_MS) == 1, "no answer within %d ms", WAIT_MS);
		ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	return got;
}

/* One response's full length in buf (head + Content-Length), or 0. */
static size_t response_len(const char *buf)
{
	const char *end = strstr(buf, "\r\n\r\n"), *cl = strstr(buf, "Content-Length: ");
	if (!end || !cl || cl > end)
		return 0;
	return (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10);
}

/* Read one whole response (head and Content-Length body) into buf. */
static size_t read_response(int fd, char *buf, size_t cap)
{
	size_t got = 0, len;

	buf[0] = '\0';
	while (!(len = response_len(buf)) || got < len)
		got += recv_until(fd, buf + got, cap - got, 1);
	return len;
}

/* Send raw bytes on a new connection and read everything until the
 * server closes it. */
static size_t raw(const char *req, char *resp, size_t cap)
{
	int fd = dial();
	send_all(fd, req, strlen(req));
	size_t n = recv_until(fd, resp, cap, 0);
	close(fd);
	return n;
}

/* A request that must be answered with status and then closed. */
static void rejected(const char *req, int status)
{
	char resp[4096], want[32];

	raw(req, resp, sizeof(resp));
	snprintf(want, sizeof(want), "HTTP/1.1 %d ", status);
	ck_assert_msg(!strncmp(resp, want, strlen(want)), "for %.120s\nwanted %d, got: %.200s", req,
	              status, resp);
	ck_assert_msg(strstr(resp, "Connection: close"), "not closing: %.200s", resp);
}

/* ----------------------------------------------------------------- routes */

START_TEST(test_http_routes)
{
	char resp[8192];

	start_server(variant(_i));
	raw("GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert_msg(!strncmp(resp, "HTTP/1.1 200 OK\r\n", 17), "%s", resp);
	ck_assert(strstr(resp, "Content-Type: text/plain\r\n"));
	ck_assert(strstr(resp, "Content-Length: 13\r\n"));
	ck_assert(strstr(resp, "\r\nDate: ") && strstr(resp, "\r\nServer: "));
	ck_assert(strstr(resp, "\r\n\r\nHello, World!"));
	raw("HEAD /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert(strstr(resp, "Content-Length: 13\r\n") && !strstr(resp, "Hello"));
	raw("POST /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert_msg(strstr(resp, "405 Method Not Allowed") && strstr(resp, "Allow: GET, HEAD"), "%s",
	              resp);
	raw("GET /plaintex HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert_msg(strstr(resp, "404 Not Found"), "%s", resp);
	raw("GET /plaintexts HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert_msg(strstr(resp, "404 Not Found"), "%s", resp);
	raw("GET /plaintext?q HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert_msg(strstr(resp, "200 OK") && strstr(resp, "\r\n\r\nHello, World!"), "%s", resp);
	raw("GET http://x/plaintext?q HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp,
	    sizeof(resp));
	ck_assert_msg(strstr(resp, "200 OK") && strstr(resp, "\r\n\r\nHello, World!"), "%s", resp);
	raw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
	    resp, sizeof(resp));
	ck_assert(strstr(resp, "200 OK") && strstr(resp, "\r\n\r\nhello"));
	raw("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
	    "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: t\r\n\r\n", resp, sizeof(resp));
	ck_assert_msg(strstr(resp, "Content-Length: 5\r\n") && strstr(resp, "\r\n\r\nabcde"), "%s", resp);
	raw("GET /delay?ms=20 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert(strstr(resp, "200 OK") && strstr(resp, "slept 20 ms"));
	raw("GET /delay?ms=x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert(strstr(resp, "400 Bad Request"));
	raw("GET /limited HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert(strstr(resp, "200 OK"));
	raw("GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert(strstr(resp, "application/json") && strstr(resp, "\"fibers_spawned\":"));
	ck_assert(strstr(resp, "\"offload\":") && strstr(resp, "\"requests\":"));
	raw("GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert(strstr(resp, "405 Method Not Allowed") && strstr(resp, "Allow: POST"));
	raw("DELETE /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert(strstr(resp, "501 Not Implemented"));
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

/* /limited: with its one slot held, every other caller gets 503 +
 * Retry-After after the short wait (no timing assumed: the holder keeps
 * the slot for a minute, until the server stops). */
START_TEST(test_http_limited_rejects_under_load)
{
	const char *args[] = { "--limit", "1", NULL };
	const char *hold = "GET /limited?ms=60000 HTTP/1.1\r\nHost: x\r\n\r\n";
	const char *req = "GET /limited HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	char resp[8192];
	int holder, fds[5];

	start_server(args);
	holder = dial();
	send_all(holder, hold, strlen(hold));
	for (int i = 0; i < 2000; i++) { /* until the holder has the slot */
		raw("GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
		if (strstr(resp, "\"limited\":{\"in_use\":1"))
			break;
		usleep(5000);
	}
	ck_assert_msg(strstr(resp, "\"limited\":{\"in_use\":1"), "%s", resp);
	for (int i = 0; i < 5; i++) {
		fds[i] = dial();
		send_all(fds[i], req, strlen(req));
	}
	for (int i = 0; i < 5; i++) {
		recv_until(fds[i], resp, sizeof(resp), 0);
		ck_assert_msg(strstr(resp, "503 Service Unavailable"), "%s", resp);
		ck_assert(strstr(resp, "Retry-After: 1\r\n"));
		close(fds[i]);
	}
	raw("GET /limited?ms=x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert(strstr(resp, "400 Bad Request"));
	close(holder);
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

/* --------------------------------------------------- connections, framing */

START_TEST(test_http_keepalive_pipelining_and_10)
{
	char resp[65536];
	char req[4096] = "";
	int fd;

	start_server(variant(_i));
	/* 16 pipelined requests in one write: 16 answers, in order. */
	for (int i = 0; i < 16; i++)
		snprintf(req + strlen(req), sizeof(req) - strlen(req),
		         "GET /delay?ms=%d HTTP/1.1\r\nHost: x\r\n\r\n", 15 - i);
	fd = dial();
	send_all(fd, req, strlen(req));
	size_t off = 0, got = 0;
	resp[0] = '\0';
	for (int i = 0; i < 16; i++) {
		size_t len;
		while (!(len = response_len(resp + off)) || got - off < len)
			got += recv_until(fd, resp + got, sizeof(resp) - got, 1);
		char want[32];
		snprintf(want, sizeof(want), "slept %d ms", 15 - i);
		ck_assert_msg(strstr(resp + off, want) && strstr(resp + off, want) < resp + off + len,
		              "answer %d out of order", i);
		off += len;
	}
	close(fd);
	/* HTTP/1.0 closes unless keep-alive is asked; then it says so. */
	raw("GET /plaintext HTTP/1.0\r\n\r\n", resp, sizeof(resp));
	ck_assert(strstr(resp, "Connection: close"));
	fd = dial();
	send_str(fd, "GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	read_response(fd, resp, sizeof(resp));
	ck_assert(strstr(resp, "Connection: keep-alive"));
	close(fd);
	/* Expect: 100-continue before the body. */
	fd = dial();
	send_str(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
	         "Content-Length: 2\r\n\r\n");
	recv_until(fd, resp, sizeof(resp), 25);
	ck_assert_msg(!strncmp(resp, "HTTP/1.1 100 Continue\r\n\r\n", 25), "%s", resp);
	send_str(fd, "ok");
	read_response(fd, resp, sizeof(resp));
	ck_assert(strstr(resp, "200 OK"));
	close(fd);
	/* Empty lines before a request line are skipped (RFC 9112 2.2): a
	 * client that ends a POST body with CRLF, then sends one more. */
	fd = dial();
	send_str(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok\r\n");
	read_response(fd, resp, sizeof(resp));
	ck_assert(strstr(resp, "200 OK"));
	send_str(fd, "\r\nGET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
	read_response(fd, resp, sizeof(resp));
	ck_assert_msg(strstr(resp, "200 OK"), "%s", resp);
	close(fd);
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

/* ---------------------------------------------------- open files reused */

/* name in the root now holds text: a new inode renamed over the old, as
 * a deploy replaces a file. */
static void put_file(const char *name, const char *text)
{
	char tmp[160], path[160];

	snprintf(tmp, sizeof(tmp), "%s/.%s.new", sp.root, name);
	snprintf(path, sizeof(path), "%s/%s", sp.root, name);
	FILE *f = fopen(tmp, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_int_eq(rename(tmp, path), 0);
}

/* The body of GET /name, or the status line's code and reason if not 200. */
static const char *body_of(const char *name, char *resp, size_t cap)
{
	char req[160];

	snprintf(req, sizeof(req), "GET /%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
	         name);
	raw(req, resp, cap);
	const char *body = strstr(resp, "\r\n\r\n");
	return strncmp(resp, "HTTP/1.1 200 ", 13) || !body ? resp + 9 : body + 4;
}

/* Does the server hold an fd of the root's name? */
static bool holds(const char *name)
{
	char dir[64], link[256], want[160];
	struct dirent *e;
	bool found = false;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)sp.pid);
	snprintf(want, sizeof(want), "%s/%s", sp.root, name);
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while (!found && (e = readdir(d))) {
		char path[320];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		link[n > 0 ? n : 0] = '\0';
		found = !strncmp(link, want, strlen(want));
	}
	closedir(d);
	return found;
}

/* A file opened in the last --file-cache-ms is served from its open fd:
 * replaced within that moment it still comes as it was, after it as it is
 * now; removed, it is a 404 after the moment; an idle server lets its fds
 * go (the sweep). With --file-cache-ms 0 each request opens it anew. */
START_TEST(test_http_open_files_reused_for_a_moment)
{
	const char *moment[] = { "--file-cache-ms", "300", NULL };
	const char *never[] = { "--file-cache-ms", "0", NULL };
	char resp[4096];
	int waited = 0;

	start_server(_i ? never : moment);
	put_file("moment.txt", "first\n");
	ck_assert_str_eq(body_of("moment.txt", resp, sizeof(resp)), "first\n");
	put_file("moment.txt", "second\n");
	ck_assert_str_eq(body_of("moment.txt", resp, sizeof(resp)), _i ? "second\n" : "first\n");
	while (strcmp(body_of("moment.txt", resp, sizeof(resp)), "second\n") && waited++ < 200)
		usleep(25 * 1000);
	ck_assert_msg(waited * 25 >= (_i ? 0 : 250) && waited < 200, "the new file after %d ms",
	              waited * 25);
	for (waited = 0; holds("moment.txt") && waited < WAIT_MS / 25; waited++)
		usleep(25 * 1000); /* the sweep: at most two moments */
	ck_assert_msg(!holds("moment.txt"), "an idle server still holds the file");
	ck_assert_str_eq(body_of("moment.txt", resp, sizeof(resp)), "second\n");
	char path[160];
	snprintf(path, sizeof(path), "%s/moment.txt", sp.root);
	ck_assert_int_eq(unlink(path), 0);
	for (waited = 0; strncmp(body_of("moment.txt", resp, sizeof(resp)), "404", 3) &&
	                 waited < WAIT_MS / 25; waited++)
		usleep(25 * 1000);
	ck_assert_msg(!strncmp(resp + 9, "404", 3), "a removed file: %.40s", resp);
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

/* ------------------------------------------------------------ rejections */

START_TEST(test_http_rejections)
{
	static const struct http_rejection cases[] = { HTTP_REJECTIONS };
	char resp[4096];

	start_server(NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		rejected(cases[i].req, cases[i].status);
	/* Limits: request line (414), header section (431), body (413). */
	char *big = malloc(20000);
	memset(big, 'a', 20000);
	memcpy(big, "GET /", 5);
	strcpy(big + 9000, " HTTP/1.1\r\nHost: a\r\n\r\n");
	rejected(big, 414);
	strcpy(big, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
	memset(big + strlen(big), 'b', 14000);
	strcpy(big + 14030, "\r\n\r\n");
	rejected(big, 431);
	free(big);
	rejected("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n", 413);
	/* The server is fine for the next client. */
	raw("GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert(strstr(resp, "200 OK"));
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

/* ---------------------------------------------------------- static files */

START_TEST(test_http_static_files)
{
	char resp[400000], req[512];

	start_server(variant(_i));
	raw("GET /hello.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert_msg(strstr(resp, "200 OK") && strstr(resp, "text/html"), "%s", resp);
	ck_assert(strstr(resp, "<p>hello</p>"));
	const char *lm = strstr(resp, "Last-Modified: ");
	ck_assert_ptr_nonnull(lm);
	char stamp[64];
	sscanf(lm + 15, "%63[^\r]", stamp);
	snprintf(req, sizeof(req), "GET /hello.html HTTP/1.1\r\nHost: x\r\n"
	         "If-Modified-Since: %s\r\nConnection: close\r\n\r\n", stamp);
	raw(req, resp, sizeof(resp));
	ck_assert_msg(strstr(resp, "304 Not Modified") && !strstr(resp, "<p>"), "%s", resp);
	/* A large file (spliced): every byte right. */
	size_t n = raw("GET /big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp,
	               sizeof(resp));
	const char *body = strstr(resp, "\r\n\r\n") + 4;
	ck_assert_uint_eq(n - (size_t)(body - resp), 300000);
	for (int i = 0; i < 300000; i++)
		ck_assert_int_eq(body[i], 'a' + i % 26);
	/* One byte range (206, of big.bin's bytes), an unsatisfiable one
	 * (416), several (the whole file); ETag and If-None-Match (304). */
	static const struct { const char *range; const char *want; size_t from, len; } ranges[] = {
		{ "bytes=10-19", "206 Partial Content", 10, 10 },
		{ "bytes=-7", "206 Partial Content", 300000 - 7, 7 },
		{ "bytes=299990-", "206 Partial Content", 299990, 10 },
		{ "bytes=300000-", "416 Range Not Satisfiable", 0, 0 },
		{ "bytes=0-1,5-6", "200 OK", 0, 300000 },
	};
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		snprintf(req, sizeof(req), "GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: %s\r\n"
		         "Connection: close\r\n\r\n", ranges[i].range);
		n = raw(req, resp, sizeof(resp));
		ck_assert_msg(strstr(resp, ranges[i].want), "%s: %.200s", ranges[i].range, resp);
		body = strstr(resp, "\r\n\r\n") + 4;
		if (!ranges[i].len)
			continue;
		ck_assert_uint_eq(n - (size_t)(body - resp), ranges[i].len);
		for (size_t k = 0; k < ranges[i].len; k++)
			ck_assert_int_eq(body[k], 'a' + (int)((ranges[i].from + k) % 26));
	}
	ck_assert_msg(strstr(resp, "Accept-Ranges: bytes"), "%.300s", resp);
	const char *et = strstr(resp, "ETag: ");
	ck_assert_ptr_nonnull(et);
	char tag[64];
	sscanf(et + 6, "%63[^\r]", tag);
	snprintf(req, sizeof(req), "GET /big.bin HTTP/1.1\r\nHost: x\r\nIf-None-Match: %s\r\n"
	         "Connection: close\r\n\r\n", tag);
	raw(req, resp, sizeof(resp));
	ck_assert_msg(strstr(resp, "304 Not Modified"), "%.200s", resp);
	/* No way out of the root. */
	static const char *const escapes[] = {
		"/../etc/passwd", "/%2e%2e/etc/passwd", "/a/..%2fetc/passwd", "/escape",
		"/%2fetc/passwd", "/hello.html%00", "/nothing-here",
	};
	for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		         escapes[i]);
		raw(req, resp, sizeof(resp));
		ck_assert_msg(strstr(resp, "404 Not Found") && !strstr(resp, "root:"), "%s: %.100s",
		              escapes[i], resp);
	}
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

/* ------------------------------------------------------ slow and closing */

START_TEST(test_http_slow_and_half_closed_clients)
{
	const char *args[] = { "--header-timeout", "300", "--idle-timeout", "500", NULL };
	char resp[4096];
	int fd;

	start_server(args);
	/* Slowloris: a head that does not complete within the timeout: 408. */
	fd = dial();
	send_str(fd, "GET /plaintext HTTP/1.1\r\nHo");
	recv_until(fd, resp, sizeof(resp), 0);
	ck_assert_msg(strstr(resp, "408 Request Timeout"), "%s", resp);
	close(fd);
	/* Idle keep-alive connections are closed without a word. */
	fd = dial();
	ck_assert_uint_eq(recv_until(fd, resp, sizeof(resp), 0), 0);
	close(fd);
	/* A client that half-closes after its request still gets the answer. */
	fd = dial();
	send_str(fd, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
	shutdown(fd, SHUT_WR);
	recv_until(fd, resp, sizeof(resp), 0);
	ck_assert(strstr(resp, "Hello, World!"));
	close(fd);
	/* A client that vanishes mid-request leaves the server serving. */
	fd = dial();
	send_str(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc");
	close(fd);
	raw("GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert(strstr(resp, "200 OK"));
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

START_TEST(test_http_max_conns_refused_and_counted)
{
	const char *args[] = { "--max-conns", "2", NULL };
	char resp[4096];
	int a, b, c;

	start_server(args);
	a = dial();
	b = dial();
	usleep(100 * 1000);
	c = dial(); /* accepted by the kernel, closed at once by the server */
	ck_assert_uint_eq(recv_until(c, resp, sizeof(resp), 0), 0);
	close(c);
	close(a);
	close(b);
	usleep(100 * 1000);
	raw("GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert_msg(strstr(resp, "\"refused\":1"), "%s", resp);
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

static int server_fds(void)
{
	char path[64];
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)sp.pid);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A chunked body of len bytes in one chunk, sent whole with its request:
 * echoed whole. */
static void chunked_echo(size_t len)
{
	char head[160], *req = malloc(len + 200), *resp = malloc(len + 4096), want[40];
	int n = snprintf(head, sizeof(head), "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close"
	                 "\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n", len);

	memcpy(req, head, (size_t)n);
	memset(req + n, 'a', len);
	memcpy(req + n + len, "\r\n0\r\n\r\n", 8);
	int fd = dial();
	send_all(fd, req, (size_t)n + len + 7);
	size_t got = recv_until(fd, resp, len + 4095, 0);
	close(fd);
	resp[got] = '\0';
	snprintf(want, sizeof(want), "Content-Length: %zu\r\n", len);
	ck_assert_msg(!strncmp(resp, "HTTP/1.1 200 ", 13) && strstr(resp, want), "%zu: %.200s", len,
	              resp);
	free(req);
	free(resp);
}

/* Chunked bodies that end a few bytes short of the body buffer's size
 * (4 KiB, doubled as it fills): the last framing bytes are decoded with
 * little room left and yield no body bytes, and the answer must still
 * come (the soak found these hanging until the idle timeout). */
START_TEST(test_http_chunked_body_near_buffer_size)
{
	static const size_t lens[] = { 4091, 4092, 4093, 4094, 4095, 4096, 8189, 8190, 8191,
		                       16381, 16383, 32765, 32766, 65533 };

	start_server(variant(_i));
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		chunked_echo(lens[i]);
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

/* A chunked body whose framing arrives in reads of its own (the CRLF
 * after a chunk's data, alone): a read that yields framing only is no end
 * of the body. */
START_TEST(test_http_chunked_framing_split_across_reads)
{
	char resp[4096];
	int fd;

	start_server(variant(_i));
	fd = dial();
	send_str(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
	         "Connection: close\r\n\r\n5\r\nhello");
	usleep(50 * 1000);
	send_str(fd, "\r\n");
	usleep(50 * 1000);
	send_str(fd, "0\r\n\r\n");
	recv_until(fd, resp, sizeof(resp), 0);
	close(fd);
	ck_assert_msg(strstr(resp, "200 OK") && strstr(resp, "\r\n\r\nhello"), "%s", resp);
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

/* The server's CPU time so far, in clock ticks (user + system). */
static unsigned long long server_ticks(void)
{
	char path[64], buf[1024];
	unsigned long long utime, stime;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)sp.pid);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	const char *p = strrchr(buf, ')'); /* fields 14 and 15 */
	ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
	                        &utime, &stime), 2);
	return utime + stime;
}

/* Out of fds (EMFILE on accept): the server backs off instead of spinning
 * on the failing accept, and serves again once connections close. _i = 1:
 * with --plain-accept (an accept SQE per connection, not the listener). */
START_TEST(test_http_emfile_backoff)
{
	const char *plain[] = { "--plain-accept", NULL };
	enum { CLIENTS = 60 };
	int c[CLIENTS];
	char resp[4096];

	server_nofile = 48; /* the server's own fds, then room for a few clients */
	start_server(_i ? plain : NULL);
	for (int i = 0; i < CLIENTS; i++)
		c[i] = dial(); /* the kernel's backlog holds those not accepted */
	usleep(300 * 1000);
	ck_assert_int_ge(server_fds(), (int)server_nofile - 1); /* at its limit */
	unsigned long long before = server_ticks();
	usleep(1000 * 1000);
	unsigned long long spent = server_ticks() - before;
	long hz = sysconf(_SC_CLK_TCK);
	ck_assert_msg(spent < (unsigned long long)hz / 2,
	              "the server spent %llu of %ld ticks in a second at EMFILE", spent, hz);
	for (int i = 0; i < CLIENTS; i++)
		close(c[i]);
	raw("GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp,
	    sizeof(resp));
	ck_assert_msg(!strncmp(resp, "HTTP/1.1 200 ", 13), "%s", resp);
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

/* SIGTERM with a request in flight: it is answered, then the server exits
 * 0 and accepts no more. */
START_TEST(test_http_graceful_stop)
{
	char resp[4096];
	int fd, status;

	start_server(NULL);
	fd = dial();
	send_str(fd, "GET /delay?ms=300 HTTP/1.1\r\nHost: x\r\n\r\n");
	usleep(50 * 1000);
	kill(sp.pid, SIGTERM);
	recv_until(fd, resp, sizeof(resp), 0);
	ck_assert_msg(strstr(resp, "slept 300 ms") && strstr(resp, "Connection: close"), "%s", resp);
	close(fd);
	ck_assert_int_eq(waitpid(sp.pid, &status, 0), sp.pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)sp.port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ne(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	close(fd);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", sp.root);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* curl, a real client (./build.sh check installs it). */
START_TEST(test_http_curl_smoke)
{
	char cmd[256], out[256] = "";

	TEST_REQUIRE(system("command -v curl >/dev/null 2>&1") == 0, "curl (Debian: curl)");
	start_server(NULL);
	snprintf(cmd, sizeof(cmd), "curl -s http://127.0.0.1:%d/plaintext", sp.port);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(fgets(out, sizeof(out), p));
	pclose(p);
	ck_assert_str_eq(out, "Hello, World!");
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

/* ---------------------------------------------------------------- metrics */

/* One exposition line: a sample (name{labels} value) with a known family,
 * or a # HELP / # TYPE line. Returns the sample's value (NAN for a
 * comment); fails the test on anything Prometheus would not read. */
static double metrics_line(const char *line, char *families, size_t cap)
{
	char name[128], type[16];

	if (sscanf(line, "# TYPE %127s %15s", name, type) == 2) {
		ck_assert_msg(!strcmp(type, "counter") || !strcmp(type, "gauge") ||
		              !strcmp(type, "histogram"), "type: %s", line);
		strncat(families, name, cap - strlen(families) - 2);
		strcat(families, " ");
		return NAN;
	}
	if (!strncmp(line, "# HELP ", 7))
		return NAN;
	size_t n = strspn(line, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:");
	ck_assert_msg(n > 0 && n < sizeof(name), "name: %s", line);
	memcpy(name, line, n);
	name[n] = '\0';
	const char *v = line + n;
	if (*v == '{') {
		v = strstr(v, "} ");
		ck_assert_msg(v, "labels: %s", line);
		v++;
	}
	ck_assert_msg(*v == ' ', "no value: %s", line);
	char *end;
	double value = strtod(v + 1, &end);
	ck_assert_msg(end > v + 1 && *end == '\0', "value: %s", line);
	/* Its family was typed before it (a histogram's by its base name). */
	char *suffix = strstr(name, "_bucket");
	if (!suffix && !(suffix = strstr(name, "_sum")) && !(suffix = strstr(name, "_count")))
		suffix = name + n;
	char base[130];
	snprintf(base, sizeof(base), " %.*s ", (int)(suffix - name), name);
	char full[130];
	snprintf(full, sizeof(full), " %s ", name);
	ck_assert_msg(strstr(families, base) || strstr(families, full), "untyped: %s", line);
	return value;
}

/* The value of the sample line starting with prefix ("name{labels} "). */
static double metrics_value(const char *text, const char *prefix)
{
	const char *p = strstr(text, prefix);
	ck_assert_msg(p, "no %s in:\n%s", prefix, text);
	return strtod(p + strlen(prefix), NULL);
}

START_TEST(test_http_metrics_parsed)
{
	static char resp[1 << 16], text[1 << 16];
	char families[8192] = " ";

	start_server(NULL);
	for (int i = 0; i < 3; i++)
		raw("GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	raw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
	    resp, sizeof(resp));
	raw("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", resp, sizeof(resp));
	ck_assert_msg(strstr(resp, "200 OK") &&
	              strstr(resp, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
	              "%.300s", resp);
	const char *body = strstr(resp, "\r\n\r\n") + 4;
	ck_assert_uint_eq(strlen(body), response_len(resp) - (size_t)(body - resp));
	snprintf(text, sizeof(text), "%s", body);
	int samples = 0;
	for (char *save, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		samples += !isnan(metrics_line(line, families, sizeof(families)));
	ck_assert_int_gt(samples, 50);
	/* GET /metrics itself is counted (its head is), not yet answered. */
	ck_assert_double_eq(metrics_value(body, "runtime_http_server_requests_total{server=\"demo\","
	                                        "method=\"GET\"} "), 4);
	ck_assert_double_eq(metrics_value(body, "runtime_http_server_requests_total{server=\"demo\","
	                                        "method=\"POST\"} "), 1);
	ck_assert_double_eq(metrics_value(body, "runtime_http_server_responses_total{server=\"demo\","
	                                        "code=\"2xx\"} "), 4);
	ck_assert_double_eq(metrics_value(body, "runtime_http_server_request_duration_seconds_count"
	                                        "{server=\"demo\"} "), 4);
	ck_assert_double_eq(metrics_value(body, "runtime_http_server_request_duration_seconds_bucket"
	                                        "{server=\"demo\",le=\"+Inf\"} "), 4);
	ck_assert_double_ge(metrics_value(body, "runtime_server_connections_accepted_total"
	                                        "{server=\"demo\"} "), 5);
	ck_assert_double_ge(metrics_value(body, "runtime_fibers_spawned_total{core=\"0\"} "), 5);
	ck_assert_int_eq(stop_server(), 0);
}
END_TEST

static Suite *http_suite(void)
{
	Suite *s = suite_create("http_server");
	TCase *tc = tcase_create("server");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_http_routes, 0, 2);
	tcase_add_test(tc, test_http_limited_rejects_under_load);
	tcase_add_loop_test(tc, test_http_keepalive_pipelining_and_10, 0, 2);
	tcase_add_test(tc, test_http_rejections);
	tcase_add_loop_test(tc, test_http_static_files, 0, 2);
	tcase_add_loop_test(tc, test_http_open_files_reused_for_a_moment, 0, 2);
	tcase_add_test(tc, test_http_slow_and_half_closed_clients);
	tcase_add_test(tc, test_http_max_conns_refused_and_counted);
	tcase_add_loop_test(tc, test_http_emfile_backoff, 0, 2);
	tcase_add_loop_test(tc, test_http_chunked_body_near_buffer_size, 0, 2);
	tcase_add_loop_test(tc, test_http_chunked_framing_split_across_reads, 0, 2);
	tcase_add_test(tc, test_http_graceful_stop);
	tcase_add_test(tc, test_http_curl_smoke);
	tcase_add_test(tc, test_http_metrics_parsed);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	(void)argc;
	signal(SIGPIPE, SIG_IGN);
	test_init(argv[0]);
	return test_run(http_suite());
}
