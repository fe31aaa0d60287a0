/* SPDX-License-Identifier: MIT */
/*
 * soak_clients.c - the client side of tests/soak.sh: well-formed checkers
 * and abusive clients against the demo HTTP server on 127.0.0.1, for a
 * given time. Each kind runs in its own thread(s), in a loop, until the
 * time is up:
 *
 *   checker     well-formed requests one at a time (keep-alive, and one
 *               connection per request), every status and body verified
 *   pipelined   bursts of well-formed requests in one write, every answer
 *               verified (count, order, status, body)
 *   idle        --idle connections opened at start and held; one the
 *               server closes (its idle timeout) is opened again
 *   slowloris   a head trickling in a byte a second: 408, then close
 *   halfopen    connect and SHUT_WR (nothing sent, part of a head, or a
 *               whole request), or connect, say nothing and leave
 *   midrequest  part of a head or body, then close or RST
 *   midresponse a large file or echo asked for, a little read (or nothing,
 *               for a while), then close or RST
 *   malformed   known-bad requests, random bytes and mutated requests
 *
 * Each kind counts what it saw. A failure of a well-formed request (a
 * non-2xx, a wrong body, an error or timeout), or a malformed/slowloris
 * request the server does not answer with its error status and close
 * (a hang), is fatal: exit status 1. Other surprises are anomalies:
 * counted, the first few described on stderr, not fatal. Exit status 2:
 * bad usage or setup. --make-root DIR only writes the static files the
 * clients ask for (the server serves them with --root DIR) and exits.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_rejections.h"

/* ------------------------------------------------------------ options */

static struct {
	unsigned port;
	unsigned seconds;
	unsigned idle;              /* idle connections to hold */
	uint64_t header_timeout_ms; /* the server's --header-timeout */
	uint64_t idle_timeout_ms;   /* the server's --idle-timeout */
} opt = { .port = 0, .seconds = 60, .idle = 10000, .header_timeout_ms = 10000,
	  .idle_timeout_ms = 60000 };

static _Atomic bool stopping;

#define WELL_FORMED_MS 30000  /* bound on one well-formed exchange */
#define ANSWER_SLACK_MS 15000 /* beyond header_timeout: a hang */
#define REPORT_EACH 5         /* anomalies described per counter */

/* Static files under the root: content[i] = pattern[i]. */
#define SMALL_SIZE 4096       /* answered through the response batch */
#define MID_SIZE 200000       /* read and sent in steps */
#define BIG_SIZE (4 << 20)    /* spliced */
static char *pattern;         /* BIG_SIZE bytes, 'a' + i % 26 */

/* ------------------------------------------------------------ counters */

enum severity { INFO, ANOMALY, FATAL };

#define COUNTERS(X) \
	X(CHECK_REQ, "checker", "requests", INFO) \
	X(CHECK_FAIL, "checker", "failures", FATAL) \
	X(PIPE_BURST, "pipelined", "bursts", INFO) \
	X(PIPE_REQ, "pipelined", "requests", INFO) \
	X(PIPE_FAIL, "pipelined", "failures", FATAL) \
	X(IDLE_OPEN, "idle", "opened", INFO) \
	X(IDLE_TIMED_OUT, "idle", "closed_by_idle_timeout", INFO) \
	X(IDLE_EARLY, "idle", "closed_early", ANOMALY) \
	X(IDLE_OVERDUE, "idle", "overdue", ANOMALY) \
	X(IDLE_DATA, "idle", "unexpected_data", ANOMALY) \
	X(IDLE_DIAL_ERR, "idle", "connect_errors", ANOMALY) \
	X(SLOW_CONN, "slowloris", "conns", INFO) \
	X(SLOW_408, "slowloris", "answered_408_closed", INFO) \
	X(SLOW_EARLY, "slowloris", "answered_early", ANOMALY) \
	X(SLOW_NOT_CLOSED, "slowloris", "not_closed", FATAL) \
	X(SLOW_WRONG, "slowloris", "wrong_answer", FATAL) \
	X(SLOW_HANG, "slowloris", "hang", FATAL) \
	X(SLOW_DIAL_ERR, "slowloris", "connect_errors", ANOMALY) \
	X(HALF_CONN, "halfopen", "conns", INFO) \
	X(HALF_OK, "halfopen", "as_expected", INFO) \
	X(HALF_ANOM, "halfopen", "unexpected", ANOMALY) \
	X(HALF_FAIL, "halfopen", "whole_request_unanswered", FATAL) \
	X(HALF_DIAL_ERR, "halfopen", "connect_errors", ANOMALY) \
	X(MIDREQ_CONN, "midrequest", "conns", INFO) \
	X(MIDREQ_RST, "midrequest", "reset", INFO) \
	X(MIDREQ_DIAL_ERR, "midrequest", "connect_errors", ANOMALY) \
	X(MIDRESP_CONN, "midresponse", "conns", INFO) \
	X(MIDRESP_OK, "midresponse", "cut_after_200", INFO) \
	X(MIDRESP_STALL, "midresponse", "stalled_then_cut", INFO) \
	X(MIDRESP_ANOM, "midresponse", "unexpected", ANOMALY) \
	X(MIDRESP_DIAL_ERR, "midresponse", "connect_errors", ANOMALY) \
	X(BAD_KNOWN, "malformed", "known_bad", INFO) \
	X(BAD_RANDOM, "malformed", "random", INFO) \
	X(BAD_MUTATED, "malformed", "mutated", INFO) \
	X(BAD_OK, "malformed", "answered_as_expected", INFO) \
	X(BAD_RESET, "malformed", "reset_before_answer", ANOMALY) \
	X(BAD_WRONG, "malformed", "wrong_status", FATAL) \
	X(BAD_NOT_CLOSED, "malformed", "not_closed", FATAL) \
	X(BAD_HANG, "malformed", "hang", FATAL) \
	X(BAD_DIAL_ERR, "malformed", "connect_errors", ANOMALY)

#define AS_ENUM(id, kind, name, sev) id,
enum counter { COUNTERS(AS_ENUM) NCOUNTERS };
#define AS_INFO(id, kind, name, sev) { kind, name, sev },
static const struct { const char *kind, *name; enum severity sev; } info[] = {
	COUNTERS(AS_INFO)
};
static _Atomic uint64_t counter[NCOUNTERS];

static void count(enum counter c)
{
	atomic_fetch_add_explicit(&counter[c], 1, memory_order_relaxed);
}

/* Count c and describe it on stderr, the first REPORT_EACH times. */
static void report(enum counter c, const char *fmt, ...)
{
	uint64_t n = atomic_fetch_add(&counter[c], 1);
	char line[512];
	va_list ap;

	if (n >= REPORT_EACH)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "soak_clients: %s %s.%s: %s\n", info[c].sev == FATAL ? "FAIL" : "anomaly",
	        info[c].kind, info[c].name, line);
}

/* ------------------------------------------------------------ time, rng */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t rnd(uint64_t *s) /* xorshift64* */
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

static size_t below(uint64_t *s, size_t n)
{
	return n ? (size_t)(rnd(s) % n) : 0;
}

/* Sleep ms, or less if the run stops. */
static void pause_ms(uint64_t ms)
{
	uint64_t end = now_ms() + ms;

	for (uint64_t t = now_ms(); t < end && !atomic_load(&stopping); t = now_ms()) {
		uint64_t step = end - t < 100 ? end - t : 100;
		nanosleep(&(struct timespec){ 0, (long)step * 1000000 }, NULL);
	}
}

/* ------------------------------------------------------------ sockets */

/* I/O results besides a byte count: */
enum { IO_ERR = -1, IO_TIMEOUT = -2, IO_STOP = -3 };

/* Wait for events on fd until deadline (ms, monotonic), in short slices
 * so that the end of the run is noticed: 1, IO_TIMEOUT or IO_STOP. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		if (atomic_load(&stopping))
			return IO_STOP;
		uint64_t t = now_ms();
		if (t >= deadline)
			return IO_TIMEOUT;
		int slice = deadline - t < 200 ? (int)(deadline - t) : 200;
		int rc = poll(&p, 1, slice);
		if (rc > 0)
			return 1;
		if (rc < 0 && errno != EINTR)
			return IO_ERR;
	}
}

/* A non-blocking TCP connection to the server, or IO_*. rcvbuf > 0 sets
 * SO_RCVBUF first (a small window makes the server's sends block). */
static int dial(uint64_t deadline, int rcvbuf)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err = 0;

	if (fd < 0)
		return IO_ERR;
	if (rcvbuf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		close(fd);
		return IO_ERR;
	}
	int rc = wait_fd(fd, POLLOUT, deadline);
	socklen_t len = sizeof(err);
	if (rc == 1 && (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err))
		rc = IO_ERR;
	if (rc != 1) {
		close(fd);
		return rc;
	}
	return fd;
}

/* Close with a RST instead of a FIN. */
static void close_rst(int fd)
{
	struct linger l = { .l_onoff = 1, .l_linger = 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

/* All of p[0..len) before deadline: 0 or IO_*. */
static int send_all(int fd, const void *p, size_t len, uint64_t deadline)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return IO_ERR;
		if (n > 0) {
			p = (const char *)p + n;
			len -= (size_t)n;
			continue;
		}
		int rc = wait_fd(fd, POLLOUT, deadline);
		if (rc != 1)
			return rc;
	}
	return 0;
}

/* Some bytes before deadline: their count, 0 at EOF, or IO_*. */
static ssize_t recv_some(int fd, void *buf, size_t cap, uint64_t deadline)
{
	for (;;) {
		ssize_t n = recv(fd, buf, cap, 0);
		if (n >= 0)
			return n;
		if (errno != EAGAIN && errno != EINTR)
			return IO_ERR;
		int rc = wait_fd(fd, POLLIN, deadline);
		if (rc != 1)
			return rc;
	}
}

/* Read and drop until EOF: 0 at EOF, IO_ERR (a reset counts), or IO_*. */
static int drain_to_eof(int fd, uint64_t deadline)
{
	char buf[4096];
	ssize_t n;

	while ((n = recv_some(fd, buf, sizeof(buf), deadline)) > 0)
		;
	return (int)n;
}

/* ------------------------------------------------------------ responses */

struct reader {
	int fd;
	size_t off, len;
	char buf[32768];
};

struct response {
	int status;
	uint64_t length;
	bool close;
};

static const char *io_text(int rc)
{
	return rc == 0 ? "EOF" : rc == IO_TIMEOUT ? "timeout" : rc == IO_STOP ? "stopped" :
	       strerror(errno);
}

/* Parse a response head buf[0..len) (CRLF CRLF included): 0, or -1. */
static int parse_head(const char *buf, size_t len, struct response *res)
{
	*res = (struct response){ 0 };
	if (len < 12 || memcmp(buf, "HTTP/1.1 ", 9))
		return -1;
	res->status = atoi(buf + 9);
	bool has_length = false;
	for (const char *p = memchr(buf, '\n', len) + 1; p < buf + len - 2;) {
		const char *eol = memchr(p, '\n', (size_t)(buf + len - p));
		if (!strncasecmp(p, "Content-Length:", 15)) {
			res->length = strtoull(p + 15, NULL, 10);
			has_length = true;
		} else if (!strncasecmp(p, "Connection:", 11)) {
			res->close = !!memmem(p, (size_t)(eol - p), "close", 5);
		}
		p = eol + 1;
	}
	return has_length && res->status >= 100 && res->status <= 599 ? 0 : -1;
}

/* The next response head: 1, or 0 (EOF), IO_*, or -4 (not a response). */
static int read_head(struct reader *r, struct response *res, uint64_t deadline)
{
	for (;;) {
		char *start = r->buf + r->off;
		char *end = memmem(start, r->len - r->off, "\r\n\r\n", 4);
		if (end) {
			size_t n = (size_t)(end + 4 - start);
			r->off += n;
			return parse_head(start, n, res) == 0 ? 1 : -4;
		}
		memmove(r->buf, start, r->len - r->off);
		r->len -= r->off;
		r->off = 0;
		if (r->len == sizeof(r->buf))
			return -4;
		ssize_t n = recv_some(r->fd, r->buf + r->len, sizeof(r->buf) - r->len, deadline);
		if (n <= 0)
			return (int)n;
		r->len += (size_t)n;
	}
}

/* The body's len bytes: those already buffered, then straight from the
 * socket. Equal to want (when want is not NULL): 1; different: -5; short:
 * 0 or IO_*. */
static int read_body(struct reader *r, char *dst, size_t len, const char *want,
                     uint64_t deadline)
{
	size_t got = r->len - r->off < len ? r->len - r->off : len;

	memcpy(dst, r->buf + r->off, got);
	r->off += got;
	while (got < len) {
		ssize_t n = recv_some(r->fd, dst + got, len - got, deadline);
		if (n <= 0)
			return (int)n;
		got += (size_t)n;
	}
	return !want || !memcmp(dst, want, len) ? 1 : -5;
}

/* ------------------------------------------------------------ requests */

/* A well-formed request and the answer it must get. */
struct request {
	char text[1024];            /* the head */
	size_t len;
	char what[96];              /* for messages: "POST /echo (5 bytes, chunked)" */
	const char *body;           /* sent after the head (a slice of pattern) */
	size_t body_len;
	bool chunked;               /* the body goes as one chunk and the last */
	bool head_only;             /* HEAD: no body comes back */
	const char *want;           /* the body expected back, NULL: not checked */
	size_t want_len;
	bool any_length;            /* /stats: the length is not known here */
};

static void add_head(struct request *q, const char *method, const char *target, bool close)
{
	q->len = (size_t)snprintf(q->text, sizeof(q->text), "%s %s HTTP/1.1\r\nHost: soak\r\n%s",
	                          method, target, close ? "Connection: close\r\n" : "");
	snprintf(q->what, sizeof(q->what), "%s %s%s", method, target, close ? " (close)" : "");
}

static void finish_head(struct request *q)
{
	size_t w = strlen(q->what);

	if (q->body)
		snprintf(q->what + w, sizeof(q->what) - w, " (%zu-byte body%s)", q->body_len,
		         q->chunked ? ", chunked" : "");
	if (q->body && q->chunked)
		q->len += (size_t)snprintf(q->text + q->len, sizeof(q->text) - q->len,
		                           "Transfer-Encoding: chunked\r\n\r\n%zx\r\n", q->body_len);
	else if (q->body)
		q->len += (size_t)snprintf(q->text + q->len, sizeof(q->text) - q->len,
		                           "Content-Length: %zu\r\n\r\n", q->body_len);
	else
		q->len += (size_t)snprintf(q->text + q->len, sizeof(q->text) - q->len, "\r\n");
}

/* A file request: GET or HEAD of one of the static files. */
static void file_request(struct request *q, const char *method, const char *path, size_t size,
                         bool close)
{
	add_head(q, method, path, close);
	q->head_only = method[0] == 'H';
	q->want = q->head_only ? NULL : pattern;
	q->want_len = size;
}

/* POST /echo of a slice of the pattern, by Content-Length or chunked. */
static void echo_request(struct request *q, uint64_t *rng, size_t max, bool close)
{
	size_t len = below(rng, max + 1), at = below(rng, BIG_SIZE - len);

	add_head(q, "POST", "/echo", close);
	q->body = pattern + at;
	q->body_len = len;
	q->chunked = len && below(rng, 2);
	q->want = q->body;
	q->want_len = len;
}

/* A random well-formed request; big: the large files may be asked for. */
static void random_request(struct request *q, uint64_t *rng, bool big, bool close)
{
	static const char hello[] = "Hello, World!";

	*q = (struct request){ 0 };
	switch (below(rng, big ? 9 : 6)) {
	case 0: add_head(q, "GET", "/plaintext", close);
		q->want = hello, q->want_len = 13; break;
	case 1: add_head(q, "HEAD", "/plaintext", close);
		q->head_only = true, q->want_len = 13; break;
	case 2: file_request(q, "GET", "/soak-small.txt", SMALL_SIZE, close); break;
	case 3: file_request(q, "HEAD", "/soak-small.txt", SMALL_SIZE, close); break;
	case 4: echo_request(q, rng, big ? 65536 : 512, close); break;
	case 5: add_head(q, "GET", "/delay?ms=1", close);
		q->want = "slept 1 ms\n", q->want_len = 11; break;
	case 6: file_request(q, "GET", "/soak-mid.bin", MID_SIZE, close); break;
	case 7: file_request(q, "GET", "/soak-big.bin", BIG_SIZE, close); break;
	default: add_head(q, "GET", "/stats", close); q->any_length = true; break;
	}
	finish_head(q);
}

/* The request's bytes (head, body, last chunk) into out: their length. */
static size_t request_bytes(const struct request *q, char *out)
{
	size_t n = q->len;

	memcpy(out, q->text, n);
	memcpy(out + n, q->body, q->body_len);
	n += q->body_len;
	if (q->chunked)
		n += (size_t)sprintf(out + n, "\r\n0\r\n\r\n");
	return n;
}

/* Send a request (head and body). 0 or IO_*. */
static int send_request(int fd, const struct request *q, uint64_t deadline)
{
	int rc = send_all(fd, q->text, q->len, deadline);

	if (rc == 0 && q->body_len)
		rc = send_all(fd, q->body, q->body_len, deadline);
	if (rc == 0 && q->chunked)
		rc = send_all(fd, "\r\n0\r\n\r\n", 7, deadline);
	return rc;
}

/* Read and verify the answer to q. 1: right; IO_STOP: the run ended;
 * anything else: wrong, described in why. */
static int check_answer(struct reader *r, const struct request *q, char *body, size_t cap,
                        uint64_t deadline, char *why, size_t why_cap)
{
	struct response res;
	int rc = read_head(r, &res, deadline);

	if (rc != 1) {
		snprintf(why, why_cap, "%s: no response head (%s)", q->what,
		         rc == -4 ? "garbage" : io_text(rc));
		return rc == IO_STOP ? rc : -1;
	}
	if (res.status != 200 || (!q->any_length && res.length != q->want_len) || res.length > cap) {
		snprintf(why, why_cap, "%s: status %d, length %llu (want 200, %zu)", q->what,
		         res.status, (unsigned long long)res.length, q->want_len);
		return -1;
	}
	if (q->head_only)
		return 1;
	rc = read_body(r, body, (size_t)res.length, q->want, deadline);
	if (rc != 1)
		snprintf(why, why_cap, "%s: body %s", q->what,
		         rc == -5 ? "differs" : io_text(rc));
	return rc == IO_STOP ? rc : rc == 1 ? 1 : -1;
}

/* ------------------------------------------------------------ well-formed */

struct worker {
	pthread_t thread;
	unsigned index;
	uint64_t rng;
	char *body;                 /* BIG_SIZE: bodies read back */
	struct reader reader;
};

/* One well-formed exchange on fd: 1 right, 0 wrong (counted), IO_STOP. */
static int exchange(struct worker *w, int fd, const struct request *q)
{
	uint64_t deadline = now_ms() + WELL_FORMED_MS;
	char why[256];
	int rc = send_request(fd, q, deadline);

	if (rc == IO_STOP)
		return rc;
	if (rc != 0) {
		report(CHECK_FAIL, "%s: send: %s", q->what, io_text(rc));
		return 0;
	}
	rc = check_answer(&w->reader, q, w->body, BIG_SIZE, deadline, why, sizeof(why));
	if (rc == IO_STOP)
		return rc;
	count(CHECK_REQ);
	if (rc != 1)
		report(CHECK_FAIL, "%s", why);
	return rc == 1;
}

/* A well-formed client's connection, or -1 after reporting the failure
 * under counter fail (unless stopping) and pausing. */
static int dial_well_formed(enum counter fail)
{
	int fd = dial(now_ms() + WELL_FORMED_MS, 0);

	if (fd >= 0)
		return fd;
	if (fd != IO_STOP)
		report(fail, "connect: %s", io_text(fd));
	pause_ms(100);
	return -1;
}

/* Keep-alive: up to 200 requests a connection, then the client closes. */
static void *checker_keepalive(void *arg)
{
	struct worker *w = arg;
	struct request q;

	while (!atomic_load(&stopping)) {
		int fd = dial_well_formed(CHECK_FAIL);
		if (fd < 0)
			continue;
		w->reader = (struct reader){ .fd = fd };
		for (size_t n = 1 + below(&w->rng, 200); n-- && !atomic_load(&stopping);) {
			random_request(&q, &w->rng, true, false);
			if (exchange(w, fd, &q) != 1)
				break;
			pause_ms(2);
		}
		close(fd);
	}
	return NULL;
}

/* One connection per request ("Connection: close"): the answer, then EOF. */
static void *checker_close(void *arg)
{
	struct worker *w = arg;
	struct request q;

	while (!atomic_load(&stopping)) {
		int fd = dial_well_formed(CHECK_FAIL);
		if (fd < 0)
			continue;
		w->reader = (struct reader){ .fd = fd };
		random_request(&q, &w->rng, true, true);
		if (exchange(w, fd, &q) == 1) {
			int rc = w->reader.off < w->reader.len ? -9 : drain_to_eof(fd, now_ms() + 5000);
			if (rc != 0 && rc != IO_STOP)
				report(CHECK_FAIL, "%s: %s after the answer, not EOF", q.what,
				       rc == -9 ? "more bytes" : io_text(rc));
		}
		close(fd);
		pause_ms(10);
	}
	return NULL;
}

/* ------------------------------------------------------------ pipelined */

#define BURST_MAX 64

/* One burst of 1..BURST_MAX requests in one write, the answers checked in
 * order. 1 right, 0 wrong (counted), IO_STOP. */
static int burst(struct worker *w, int fd, struct request *qs, char *out)
{
	size_t n = 1 + below(&w->rng, BURST_MAX), len = 0;
	uint64_t deadline = now_ms() + WELL_FORMED_MS;
	char why[256];

	for (size_t i = 0; i < n; i++) {
		random_request(&qs[i], &w->rng, false, false);
		len += request_bytes(&qs[i], out + len);
	}
	int rc = send_all(fd, out, len, deadline);
	if (rc != 0) {
		if (rc != IO_STOP)
			report(PIPE_FAIL, "burst of %zu: send: %s", n, io_text(rc));
		return rc == IO_STOP ? rc : 0;
	}
	count(PIPE_BURST);
	for (size_t i = 0; i < n; i++) {
		rc = check_answer(&w->reader, &qs[i], w->body, BIG_SIZE, deadline, why, sizeof(why));
		if (rc == IO_STOP)
			return rc;
		count(PIPE_REQ);
		if (rc != 1) {
			report(PIPE_FAIL, "answer %zu of %zu: %s", i + 1, n, why);
			return 0;
		}
	}
	return 1;
}

/* Bursts on a connection (1..20 of them), then a new connection. */
static void *pipelined(void *arg)
{
	struct worker *w = arg;
	struct request *qs = malloc(BURST_MAX * sizeof(*qs));
	char *out = malloc(BURST_MAX * (sizeof(qs->text) + 520));

	while (qs && out && !atomic_load(&stopping)) {
		int fd = dial_well_formed(PIPE_FAIL);
		if (fd < 0)
			continue;
		w->reader = (struct reader){ .fd = fd };
		for (size_t n = 1 + below(&w->rng, 20); n-- && burst(w, fd, qs, out) == 1;)
			pause_ms(5);
		close(fd);
	}
	free(qs);
	free(out);
	return NULL;
}

/* ------------------------------------------------------------ idle */

struct idle_conn {
	int fd;                     /* -1: to be opened */
	uint64_t opened;
	bool overdue;               /* counted as overdue already */
};

/* Open up to max of the empty slots. Returns how many are still empty. */
static unsigned idle_fill(struct idle_conn *c, int ep, unsigned max)
{
	unsigned empty = 0;

	for (unsigned i = 0; i < opt.idle && !atomic_load(&stopping); i++) {
		if (c[i].fd >= 0)
			continue;
		if (max == 0) {
			empty++;
			continue;
		}
		max--;
		int fd = dial(now_ms() + 5000, 0);
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u32 = i };
		if (fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			if (fd >= 0)
				close(fd);
			if (fd != IO_STOP)
				report(IDLE_DIAL_ERR, "connect: %s", io_text(fd));
			empty++;
			continue;
		}
		c[i] = (struct idle_conn){ .fd = fd, .opened = now_ms() };
		count(IDLE_OPEN);
	}
	return empty;
}

/* The server spoke on an idle connection: it must be its idle timeout's
 * silent close, not before the timeout and without data. */
static void idle_closed(struct idle_conn *c)
{
	char buf[256];
	ssize_t n = recv(c->fd, buf, sizeof(buf) - 1, 0);
	uint64_t age = now_ms() - c->opened;

	if (n > 0) {
		buf[n] = '\0';
		report(IDLE_DATA, "%zd bytes on an idle connection: %.40s", n, buf);
	} else if (age + 500 < opt.idle_timeout_ms)
		report(IDLE_EARLY, "closed (%s) after %llu ms", n == 0 ? "EOF" : strerror(errno),
		       (unsigned long long)age);
	else
		count(IDLE_TIMED_OUT);
	close(c->fd);
	c->fd = -1;
}

/* Connections the server keeps well past its idle timeout (30 s slack). */
static void idle_overdue(struct idle_conn *c)
{
	uint64_t t = now_ms();

	for (unsigned i = 0; i < opt.idle; i++)
		if (c[i].fd >= 0 && !c[i].overdue && t - c[i].opened > opt.idle_timeout_ms + 30000) {
			c[i].overdue = true;
			report(IDLE_OVERDUE, "still open %llu ms after connecting",
			       (unsigned long long)(t - c[i].opened));
		}
}

static void *idle_holder(void *arg)
{
	struct idle_conn *c = malloc(opt.idle * sizeof(*c));
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev[256];
	bool ready = false;

	(void)arg;
	for (unsigned i = 0; c && i < opt.idle; i++)
		c[i].fd = -1;
	while (c && ep >= 0 && !atomic_load(&stopping)) {
		unsigned empty = idle_fill(c, ep, 1000);
		if (!empty && !ready) {
			printf("soak_clients: %u idle connections open\n", opt.idle);
			fflush(stdout);
			ready = true;
		}
		int n = epoll_wait(ep, ev, 256, empty ? 0 : 1000);
		for (int i = 0; i < n; i++)
			idle_closed(&c[ev[i].data.u32]);
		idle_overdue(c);
	}
	for (unsigned i = 0; c && i < opt.idle; i++)
		if (c[i].fd >= 0)
			close(c[i].fd);
	free(c);
	close(ep);
	return NULL;
}

/* ------------------------------------------------------------ slowloris */

/* Wait for the answer to a trickling head: 408, then the server closes. */
static void slowloris_answer(struct worker *w, int fd, uint64_t first_byte)
{
	struct response res;
	uint64_t deadline = first_byte + opt.header_timeout_ms + ANSWER_SLACK_MS;
	uint64_t took = now_ms() - first_byte;

	w->reader = (struct reader){ .fd = fd };
	int rc = read_head(&w->reader, &res, deadline);
	if (rc == IO_STOP)
		return;
	if (rc != 1 || res.status != 408) {
		report(SLOW_WRONG, "wanted 408, got %s (status %d)", rc == 1 ? "an answer" :
		       io_text(rc), rc == 1 ? res.status : 0);
		return;
	}
	if (took + 250 < opt.header_timeout_ms)
		report(SLOW_EARLY, "408 after %llu ms", (unsigned long long)took);
	w->reader.off = w->reader.len; /* the body, if it came along */
	rc = drain_to_eof(fd, now_ms() + 5000);
	if (rc == 0 || rc == IO_ERR)
		count(SLOW_408);
	else if (rc != IO_STOP)
		report(SLOW_NOT_CLOSED, "408, then %s instead of a close", io_text(rc));
}

/* A head that never completes: a byte a second after the first line. */
static void *slowloris(void *arg)
{
	static const char start[] = "GET /plaintext HTTP/1.1\r\nHost: soak\r\nX-Slow-";
	struct worker *w = arg;

	pause_ms(below(&w->rng, 1000)); /* spread the threads */
	while (!atomic_load(&stopping)) {
		int fd = dial(now_ms() + 10000, 0);
		if (fd < 0) {
			if (fd != IO_STOP)
				report(SLOW_DIAL_ERR, "connect: %s", io_text(fd));
			pause_ms(100);
			continue;
		}
		count(SLOW_CONN);
		uint64_t first = now_ms(), hang = first + opt.header_timeout_ms + ANSWER_SLACK_MS;
		int rc = send_all(fd, start, sizeof(start) - 1, hang);
		while (rc == 0 && (rc = wait_fd(fd, POLLIN, now_ms() + 1000)) == IO_TIMEOUT &&
		       now_ms() < hang)
			rc = send_all(fd, "a", 1, hang);
		if (rc != IO_STOP)
			slowloris_answer(w, fd, first);
		close(fd);
	}
	return NULL;
}

/* ------------------------------------------------------------ halfopen */

/* After SHUT_WR: the server must close (0) or answer and close (1 with
 * "200" seen when want_answer). Returns true if it did as expected. */
static bool half_closed_ok(int fd, bool want_answer)
{
	char buf[512];
	size_t got = 0;
	ssize_t n;
	uint64_t deadline = now_ms() + opt.header_timeout_ms + ANSWER_SLACK_MS;

	while ((n = recv_some(fd, buf + got, sizeof(buf) - 1 - got, deadline)) > 0 &&
	       got + (size_t)n < sizeof(buf) - 1)
		got += (size_t)n;
	buf[got] = '\0';
	if (n == IO_STOP)
		return true;
	if (want_answer)
		return n == 0 && strstr(buf, "HTTP/1.1 200 ") && strstr(buf, "Hello, World!");
	return n == 0 || (n == IO_ERR && errno == ECONNRESET);
}

/* Cycle: SHUT_WR at once; part of a head then SHUT_WR; a whole request
 * then SHUT_WR (it must still be answered); connect, say nothing, leave. */
static void halfopen_one(struct worker *w, int fd, unsigned variant)
{
	static const char req[] = "GET /plaintext HTTP/1.1\r\nHost: soak\r\n\r\n";
	size_t part = variant == 1 ? 1 + below(&w->rng, sizeof(req) - 3) : sizeof(req) - 1;

	if (variant == 3) {
		pause_ms(500 + below(&w->rng, 2500));
		count(HALF_OK);
		return;
	}
	if (variant && send_all(fd, req, part, now_ms() + 5000) != 0) {
		report(HALF_ANOM, "send failed: %s", strerror(errno));
		return;
	}
	shutdown(fd, SHUT_WR);
	if (half_closed_ok(fd, variant == 2))
		count(HALF_OK);
	else if (variant == 2)
		report(HALF_FAIL, "a whole request, then SHUT_WR: no 200 and close");
	else
		report(HALF_ANOM, "variant %u (%zu bytes, SHUT_WR): no quiet close", variant,
		       variant ? part : 0);
}

static void *halfopen(void *arg)
{
	struct worker *w = arg;

	for (unsigned i = 0; !atomic_load(&stopping); i++) {
		int fd = dial(now_ms() + 10000, 0);
		if (fd < 0) {
			if (fd != IO_STOP)
				report(HALF_DIAL_ERR, "connect: %s", io_text(fd));
			pause_ms(100);
			continue;
		}
		count(HALF_CONN);
		halfopen_one(w, fd, i % 4);
		close(fd);
		pause_ms(50);
	}
	return NULL;
}

/* ------------------------------------------------------------ midrequest */

/* Part of a GET head, or a POST head and part of its 64 KiB body; then a
 * close or a RST. */
static void *midrequest(void *arg)
{
	static const char get[] = "GET /soak-small.txt HTTP/1.1\r\nHost: soak\r\nAccept: */*\r\n\r\n";
	static const char post[] = "POST /echo HTTP/1.1\r\nHost: soak\r\nContent-Length: 65536\r\n\r\n";
	struct worker *w = arg;

	while (!atomic_load(&stopping)) {
		int fd = dial(now_ms() + 10000, 0);
		if (fd < 0) {
			if (fd != IO_STOP)
				report(MIDREQ_DIAL_ERR, "connect: %s", io_text(fd));
			pause_ms(100);
			continue;
		}
		count(MIDREQ_CONN);
		uint64_t deadline = now_ms() + 5000;
		if (below(&w->rng, 2))
			send_all(fd, get, 1 + below(&w->rng, sizeof(get) - 2), deadline);
		else if (send_all(fd, post, sizeof(post) - 1, deadline) == 0)
			send_all(fd, pattern, below(&w->rng, 65536), deadline);
		if (below(&w->rng, 4) == 0)
			pause_ms(below(&w->rng, 200)); /* let the server start reading */
		if (below(&w->rng, 2)) {
			count(MIDREQ_RST);
			close_rst(fd);
		} else {
			close(fd);
		}
		pause_ms(5);
	}
	return NULL;
}

/* ------------------------------------------------------------ midresponse */

/* Ask for a large answer, read its head (200) and a little of the body
 * (or stall without reading), then close or RST. */
static void midresponse_one(struct worker *w, int fd)
{
	struct request q = { 0 };
	struct response res;
	uint64_t deadline = now_ms() + WELL_FORMED_MS;
	unsigned variant = (unsigned)below(&w->rng, 4);

	if (variant == 0)
		file_request(&q, "GET", "/soak-mid.bin", MID_SIZE, false);
	else if (variant == 3)
		echo_request(&q, &w->rng, 256 * 1024, false);
	else
		file_request(&q, "GET", "/soak-big.bin", BIG_SIZE, false);
	finish_head(&q);
	if (send_request(fd, &q, deadline) != 0)
		return;
	if (variant == 2) { /* a reader that stalls */
		pause_ms(200 + below(&w->rng, 2800));
		count(MIDRESP_STALL);
		return;
	}
	w->reader = (struct reader){ .fd = fd };
	int rc = read_head(&w->reader, &res, deadline);
	if (rc == IO_STOP)
		return;
	if (rc != 1 || res.status != 200) {
		report(MIDRESP_ANOM, "%s: wanted 200, got %s", q.what, rc == 1 ? "another" : io_text(rc));
		return;
	}
	size_t part = below(&w->rng, 256 * 1024);
	if (read_body(&w->reader, w->body, part < res.length ? part : 0, NULL, deadline) == 1)
		count(MIDRESP_OK);
}

static void *midresponse(void *arg)
{
	struct worker *w = arg;

	while (!atomic_load(&stopping)) {
		int fd = dial(now_ms() + 10000, 8192);
		if (fd < 0) {
			if (fd != IO_STOP)
				report(MIDRESP_DIAL_ERR, "connect: %s", io_text(fd));
			pause_ms(100);
			continue;
		}
		count(MIDRESP_CONN);
		midresponse_one(w, fd);
		if (below(&w->rng, 2))
			close_rst(fd);
		else
			close(fd);
		pause_ms(10);
	}
	return NULL;
}

/* ------------------------------------------------------------ malformed */

static const struct http_rejection known_bad[] = {
	HTTP_REJECTIONS
	{ "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999\r\n\r\n", 413 },
	{ NULL, 414 },                                                  /* built: 9000-byte target */
	{ NULL, 431 },                                                  /* built: 14000-byte field */
};
#define KNOWN_BAD (sizeof(known_bad) / sizeof(known_bad[0]))

/* Known-bad request i into buf: its length. */
static size_t known_bad_bytes(size_t i, char *buf)
{
	if (known_bad[i].req) {
		strcpy(buf, known_bad[i].req);
	} else if (known_bad[i].status == 414) {
		memset(buf, 'a', 9000);
		memcpy(buf, "GET /", 5);
		strcpy(buf + 9000, " HTTP/1.1\r\nHost: a\r\n\r\n");
	} else {
		strcpy(buf, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
		memset(buf + strlen(buf), 'b', 14000);
		strcpy(buf + 14030, "\r\n\r\n");
	}
	return strlen(buf);
}

/* Random bytes whose first one no request can start with (the parser
 * must answer 400), then the end of a head. */
static size_t random_bytes(uint64_t *rng, char *buf)
{
	size_t n = 1 + below(rng, 2000);

	for (size_t i = 0; i < n; i++)
		buf[i] = (char)rnd(rng);
	buf[0] = (char)(0x80 | rnd(rng));
	memcpy(buf + n, "\r\n\r\n", 4);
	return n + 4;
}

/* A well-formed request with 1..4 random bytes replaced: any answer will
 * do, but there must be one. */
static size_t mutated(uint64_t *rng, char *buf)
{
	static const char req[] = "GET /plaintext?x=1 HTTP/1.1\r\nHost: soak\r\n"
	                          "Accept: text/plain\r\nConnection: close\r\n\r\n";
	size_t n = sizeof(req) - 1;

	memcpy(buf, req, n);
	for (size_t k = 1 + below(rng, 4); k--;)
		buf[below(rng, n)] = (char)rnd(rng);
	return n;
}

/* The answer to a malformed request: status want, then the close; or,
 * for a mutated request (want 0), any answer at all. */
static void malformed_answer(struct worker *w, int fd, int want, const char *what)
{
	struct response res;
	uint64_t deadline = now_ms() + opt.header_timeout_ms + ANSWER_SLACK_MS;

	w->reader = (struct reader){ .fd = fd };
	int rc = read_head(&w->reader, &res, deadline);
	if (rc == IO_STOP)
		return;
	if (rc == IO_ERR && errno == ECONNRESET) {
		report(BAD_RESET, "%s: reset before any answer", what);
		return;
	}
	if (rc != 1) {
		report(rc == IO_TIMEOUT ? BAD_HANG : BAD_WRONG, "%s: no answer (%s)", what,
		       rc == -4 ? "garbage" : io_text(rc));
		return;
	}
	if ((want && res.status != want) || (!want && res.status < 200)) {
		report(BAD_WRONG, "%s: wanted %d, got %d", what, want, res.status);
		return;
	}
	if (!want) {
		count(BAD_OK); /* a mutation may leave the request valid, keep-alive */
		return;
	}
	w->reader.off = w->reader.len;
	rc = drain_to_eof(fd, now_ms() + 5000);
	if (rc == 0 || rc == IO_ERR)
		count(BAD_OK);
	else if (rc != IO_STOP)
		report(BAD_NOT_CLOSED, "%s: %d, then %s instead of a close", what, res.status,
		       io_text(rc));
}

static void *malformed(void *arg)
{
	struct worker *w = arg;
	char *buf = malloc(20000), what[64];

	while (buf && !atomic_load(&stopping)) {
		size_t len, i = below(&w->rng, KNOWN_BAD);
		int want = 0, fd = dial(now_ms() + 10000, 0);
		if (fd < 0) {
			if (fd != IO_STOP)
				report(BAD_DIAL_ERR, "connect: %s", io_text(fd));
			pause_ms(100);
			continue;
		}
		switch (below(&w->rng, 3)) {
		case 0: len = known_bad_bytes(i, buf); want = known_bad[i].status;
			snprintf(what, sizeof(what), "known-bad #%zu", i); count(BAD_KNOWN); break;
		case 1: len = random_bytes(&w->rng, buf); want = 400;
			snprintf(what, sizeof(what), "random bytes"); count(BAD_RANDOM); break;
		default: len = mutated(&w->rng, buf);
			snprintf(what, sizeof(what), "mutated request"); count(BAD_MUTATED); break;
		}
		if (send_all(fd, buf, len, now_ms() + 5000) == 0)
			malformed_answer(w, fd, want, what);
		close(fd);
		pause_ms(2);
	}
	free(buf);
	return NULL;
}

/* ------------------------------------------------------------ main */

static const struct { const char *name; void *(*run)(void *); unsigned threads; } kinds[] = {
	{ "checker-keepalive", checker_keepalive, 2 },
	{ "checker-close", checker_close, 1 },
	{ "pipelined", pipelined, 1 },
	{ "idle", idle_holder, 1 },
	{ "slowloris", slowloris, 8 },
	{ "halfopen", halfopen, 1 },
	{ "midrequest", midrequest, 1 },
	{ "midresponse", midresponse, 2 },
	{ "malformed", malformed, 2 },
};

static void make_pattern(void)
{
	pattern = malloc(BIG_SIZE);
	if (!pattern) {
		perror("soak_clients: malloc");
		exit(2);
	}
	for (size_t i = 0; i < BIG_SIZE; i++)
		pattern[i] = (char)('a' + i % 26);
}

/* --make-root DIR: the files the clients ask for. */
static int make_root(const char *dir)
{
	static const struct { const char *name; size_t size; } files[] = {
		{ "soak-small.txt", SMALL_SIZE }, { "soak-mid.bin", MID_SIZE },
		{ "soak-big.bin", BIG_SIZE },
	};
	char path[4096];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
		FILE *f = fopen(path, "w");
		if (!f || fwrite(pattern, 1, files[i].size, f) != files[i].size || fclose(f)) {
			perror(path);
			return 2;
		}
	}
	return 0;
}

static void usage(FILE *to)
{
	fprintf(to,
	        "usage: soak_clients --port P [--seconds N] [--idle N] [--header-timeout MS]\n"
	        "                    [--idle-timeout MS]   (the server's timeouts)\n"
	        "       soak_clients --make-root DIR\n");
}

/* Options into opt. Returns -1 to go on, else an exit status. */
static int parse_options(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", 1, NULL, 'p' }, { "seconds", 1, NULL, 's' }, { "idle", 1, NULL, 'i' },
		{ "header-timeout", 1, NULL, 't' }, { "idle-timeout", 1, NULL, 'T' },
		{ "make-root", 1, NULL, 'r' }, { "help", 0, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p': opt.port = (unsigned)strtoul(optarg, NULL, 10); break;
		case 's': opt.seconds = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'i': opt.idle = (unsigned)strtoul(optarg, NULL, 10); break;
		case 't': opt.header_timeout_ms = strtoull(optarg, NULL, 10); break;
		case 'T': opt.idle_timeout_ms = strtoull(optarg, NULL, 10); break;
		case 'r': make_pattern(); return make_root(optarg);
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || opt.port == 0 || opt.port > 65535 || !opt.header_timeout_ms) {
		usage(stderr);
		return 2;
	}
	return -1;
}

/* Room for the idle connections and the rest: the soft fd limit raised to
 * the hard one. 0, or 2 if that is not enough. */
static int raise_fd_limit(void)
{
	struct rlimit rl;
	rlim_t need = opt.idle + 512;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < need) {
		fprintf(stderr, "soak_clients: fd limit %llu, %llu needed for %u idle connections\n",
		        (unsigned long long)rl.rlim_cur, (unsigned long long)need, opt.idle);
		return 2;
	}
	return 0;
}

static uint64_t sum(enum severity sev)
{
	uint64_t n = 0;
	for (int i = 0; i < NCOUNTERS; i++)
		if (info[i].sev == sev)
			n += atomic_load(&counter[i]);
	return n;
}

static uint64_t well_formed(void)
{
	return atomic_load(&counter[CHECK_REQ]) + atomic_load(&counter[PIPE_REQ]);
}

/* One line per kind: "kind: name=value ...". */
static void print_counters(void)
{
	for (int i = 0; i < NCOUNTERS; i++) {
		bool first = i == 0 || strcmp(info[i].kind, info[i - 1].kind);
		bool last = i == NCOUNTERS - 1 || strcmp(info[i].kind, info[i + 1].kind);
		if (first)
			printf("soak_clients: %-11s", info[i].kind);
		printf(" %s=%llu", info[i].name, (unsigned long long)atomic_load(&counter[i]));
		if (last)
			printf("\n");
	}
}

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&stopping, true);
}

/* Until the time is up (or SIGINT/SIGTERM), a progress line a minute. */
static void wait_for_end(void)
{
	uint64_t start = now_ms(), end = start + (uint64_t)opt.seconds * 1000, next = start + 60000;

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	while (!atomic_load(&stopping) && now_ms() < end) {
		pause_ms(end - now_ms() < 1000 ? end - now_ms() : 1000);
		if (now_ms() >= next && now_ms() < end) {
			next += 60000;
			printf("soak_clients: t=%llus well_formed=%llu fatal=%llu anomalies=%llu\n",
			       (unsigned long long)(now_ms() - start) / 1000,
			       (unsigned long long)well_formed(), (unsigned long long)sum(FATAL),
			       (unsigned long long)sum(ANOMALY));
			fflush(stdout);
		}
	}
	atomic_store(&stopping, true);
}

static int start_workers(struct worker *w, size_t *started)
{
	size_t n = 0;

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		for (unsigned t = 0; t < kinds[k].threads; t++, n++) {
			w[n].index = (unsigned)n;
			w[n].rng = 0x9E3779B97F4A7C15ull * (n + 1) ^ (uint64_t)time(NULL);
			w[n].body = malloc(BIG_SIZE);
			if (!w[n].body || pthread_create(&w[n].thread, NULL, kinds[k].run, &w[n])) {
				fprintf(stderr, "soak_clients: cannot start %s\n", kinds[k].name);
				free(w[n].body);
				*started = n;
				return 2;
			}
		}
	*started = n;
	return 0;
}

int main(int argc, char **argv)
{
	struct worker w[64];
	size_t n = 0;
	int rc = parse_options(argc, argv);

	if (rc >= 0)
		return rc;
	if (raise_fd_limit())
		return 2;
	make_pattern();
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = start_workers(w, &n);
	if (rc == 0)
		wait_for_end();
	atomic_store(&stopping, true);
	for (size_t i = 0; i < n; i++) {
		pthread_join(w[i].thread, NULL);
		free(w[i].body);
	}
	print_counters();
	printf("soak_clients: result well_formed_requests=%llu well_formed_failures=%llu "
	       "fatal=%llu anomalies=%llu\n", (unsigned long long)well_formed(),
	       (unsigned long long)(atomic_load(&counter[CHECK_FAIL]) +
	                            atomic_load(&counter[PIPE_FAIL])),
	       (unsigned long long)sum(FATAL), (unsigned long long)sum(ANOMALY));
	return rc ? rc : sum(FATAL) ? 1 : 0;
}
