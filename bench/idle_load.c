/* SPDX-License-Identifier: MIT */
/*
 * idle_load: opens N keep-alive connections, one request each, and holds
 * them open and idle, for bench/bench-idle.sh (a server's memory per idle
 * connection). Standalone: one thread, one level-triggered epoll loop over
 * non-blocking sockets, nothing of the runtime library.
 *
 *   idle_load --mode http|echo|h2 -n N [-c INFLIGHT] [-T SECS] [--path P]
 *             [--no-hold] HOST PORT
 *
 * Opens N TCP connections to HOST:PORT (an IPv4 address), at most INFLIGHT
 * (default 512) unfinished at a time, retrying nothing. On each it sends
 * one request and reads the whole reply, which is checked:
 *   http  "GET PATH HTTP/1.1" (default /plaintext) with Host, User-Agent
 *         and Accept headers; the reply must be "HTTP/1.x 200" with a
 *         Content-Length, and is read to the end of its body; anything
 *         after it is an error
 *   echo  ECHO_SIZE bytes, different for every connection, must come back
 *         identical, and nothing more
 *   h2    HTTP/2 in clear text by prior knowledge (h2c): the preface, an
 *         empty SETTINGS and a HEADERS frame for GET PATH (HPACK: static
 *         entries and literals, no dynamic table); the server's frames
 *         are read until stream 1 ends (a GOAWAY or RST_STREAM, or a
 *         :status other than 200, is bad_reply), then its SETTINGS are
 *         acknowledged and the connection held
 * A connection refused, reset, closed early, answered wrongly or not done
 * SECS (default 10) after it was started is an error: it is closed and
 * counted by kind, never retried, never fatal. Then one line on stdout,
 *   held=H errors=E secs=S
 * (H connections done and open, E failed, S seconds the opening took), the
 * errors by kind on stderr, and the H connections are held, idle, until
 * SIGTERM or SIGINT; then closed, and the exit status is 0. A held
 * connection the server closes (or writes to) meanwhile is closed here
 * and counted: closed_early=K on stderr at the end. --no-hold closes them
 * right after the line (a warm-up).
 *
 * INFLIGHT bounds the connections in the server's accept queue too: keep
 * it under the listen backlogs (somaxconn, tcp_max_syn_backlog) or SYNs
 * are dropped and connects take seconds.
 *
 * Against a loopback HOST each socket first binds a source address of
 * 127.0.0.0/8 (SRC_ADDRS of them, in turn) with port 0 and
 * IP_BIND_ADDRESS_NO_PORT, so the port is picked by connect() for the
 * 4-tuple: 100,000 connections and more do not run out of the ephemeral
 * ports of one source address (28,232 on a default Linux). The soft fd
 * limit is raised to what N needs; a hard limit too low is a setup error.
 *
 * Exit status: 0 once the connections were held (errors or not), 1 if a
 * signal came before all N were tried, 2 on bad usage or setup.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
	REPLY_MAX = 4096,     /* an HTTP reply's head and body */
	ECHO_SIZE = 64,
	SRC_ADDRS = 500,      /* 127.1.0.1 - 127.1.1.250: 200 connections each per 100,000 */
	MAX_EVENTS = 256,
	TICK_MS = 100,        /* how often unfinished connections are checked for time-out */
	FD_SLACK = 64,        /* fds besides the connections: stdio, epoll, signalfd */
	SIGNAL_TAG = -1,      /* epoll data of the signalfd */
};

enum mode { MODE_HTTP, MODE_ECHO, MODE_H2 };
enum state { CONNECTING, SENDING, RECEIVING };

/* Kinds of errors, each counted; names for the report on stderr. */
enum err { E_SOCKET, E_CONNECT, E_SEND, E_RECV, E_EOF, E_BAD_REPLY, E_EXCESS, E_TIMEOUT, E_KINDS };
static const char *const err_name[E_KINDS] = {
	"socket", "connect", "send", "recv", "eof", "bad_reply", "excess", "timeout",
};

/* One connection: its fd (-1 once closed) and its slot while unfinished
 * (-1 once held). 8 bytes each: the tool's own memory stays small. */
struct conn {
	int fd, slot;
};

/* An unfinished connection's progress; INFLIGHT of them, reused. */
struct slot {
	int conn;             /* its connection; -1: free */
	enum state st;
	uint64_t deadline_ns;
	size_t sent, got;
	size_t need;          /* bytes of the whole reply; 0: not known yet */
	char buf[REPLY_MAX + 1];
};

static struct {
	enum mode mode;
	const char *path;
	long n;
	int inflight, timeout_s;
	bool hold;
	struct sockaddr_in dst;
	bool loopback;        /* dst in 127/8: spread the source addresses */
} o = { .path = "/plaintext", .n = -1, .inflight = 512, .timeout_s = 10, .hold = true };

static struct conn *conns;
static struct slot *slots;
static int ep, sig_fd;
static long next_conn, held, failed, closed_early;
static int busy;      /* slots in use */
static long errs[E_KINDS];
static char request[512];
static size_t request_len;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "idle_load: %s\n", what);
	exit(2);
}

/* ------------------------------------------------------------ requests */

/* Connection i's echo message: ECHO_SIZE bytes from its number, so a
 * reply cross-wired from another connection does not compare equal. */
static void echo_message(long i, char *out)
{
	uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)i * 0xbf58476d1ce4e5b9ull;

	for (int k = 0; k < ECHO_SIZE; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		out[k] = (char)(x >> 24);
	}
}

/* h2c's request: the preface, SETTINGS (none changed), and HEADERS
 * (END_STREAM, END_HEADERS) on stream 1 for GET path at authority:
 * :method GET and :scheme http are static entries (2 and 6), :path and
 * :authority literals not indexed with static names (4 and 1). */
static void build_h2_request(const char *authority)
{
	static const char head[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
	size_t plen = strlen(o.path), alen = strlen(authority);
	size_t block = 2 + 2 + plen + 2 + alen;
	unsigned char *p = (unsigned char *)request + sizeof(head) - 1;

	if (plen > 126 || alen > 126)
		die("--path too long");
	memcpy(request, head, sizeof(head) - 1);
	*p++ = 0, *p++ = 0, *p++ = (unsigned char)block;
	*p++ = 1, *p++ = 5, *p++ = 0, *p++ = 0, *p++ = 0, *p++ = 1;
	*p++ = 0x82, *p++ = 0x86;
	*p++ = 0x04, *p++ = (unsigned char)plen;
	p = memcpy(p, o.path, plen), p += plen;
	*p++ = 0x01, *p++ = (unsigned char)alen;
	p = memcpy(p, authority, alen), p += alen;
	request_len = (size_t)(p - (unsigned char *)request);
}

static void build_request(void)
{
	char host[INET_ADDRSTRLEN], authority[64];
	int n;

	if (o.mode == MODE_ECHO) {
		request_len = ECHO_SIZE;
		return;
	}
	inet_ntop(AF_INET, &o.dst.sin_addr, host, sizeof(host));
	if (o.mode == MODE_H2) {
		snprintf(authority, sizeof(authority), "%s:%u", host, ntohs(o.dst.sin_port));
		build_h2_request(authority);
		return;
	}
	n = snprintf(request, sizeof(request),
	             "GET %s HTTP/1.1\r\nHost: %s:%u\r\nUser-Agent: idle_load\r\n"
	             "Accept: */*\r\n\r\n",
	             o.path, host, ntohs(o.dst.sin_port));
	if (n <= 0 || (size_t)n >= sizeof(request))
		die("--path too long");
	request_len = (size_t)n;
}

/* What slot s sends: the shared HTTP request, or its connection's message. */
static const char *request_of(struct slot *s, char *scratch)
{
	if (o.mode != MODE_ECHO)
		return request;
	echo_message(s->conn, scratch);
	return scratch;
}

/* ------------------------------------------------------------- replies */

/* The Content-Length of a head (buf[0..len), ending with its blank line),
 * or -1 if it has none or a bad one. */
static long content_length(const char *buf, size_t len)
{
	static const char name[] = "\r\ncontent-length:";
	const char *end = buf + len;

	for (const char *p = buf; p + sizeof(name) - 1 < end; p++) {
		if (strncasecmp(p, name, sizeof(name) - 1))
			continue;
		char *stop;
		long v = strtol(p + sizeof(name) - 1, &stop, 10);
		return stop == p + sizeof(name) - 1 || v < 0 ? -1 : v;
	}
	return -1;
}

/* HTTP: once the head is complete, the whole reply's size (s->need) and
 * its status checked. Returns 0, or the error. */
static int http_head(struct slot *s)
{
	const char *eoh = strstr(s->buf, "\r\n\r\n");
	long cl;

	if (!eoh)
		return s->got >= REPLY_MAX ? E_BAD_REPLY : 0;
	if (strncmp(s->buf, "HTTP/1.1 200 ", 13) && strncmp(s->buf, "HTTP/1.0 200 ", 13))
		return E_BAD_REPLY;
	cl = content_length(s->buf, (size_t)(eoh + 2 - s->buf));
	if (cl < 0 || cl > REPLY_MAX / 2)
		return E_BAD_REPLY;
	s->need = (size_t)(eoh + 4 - s->buf) + (size_t)cl;
	return 0;
}

/* h2: the frames so far, whole ones: 1 once stream 1 ended with a 200
 * (its first field the static ":status 200", 0x88), 0 while it has not,
 * or -(the error). Bytes after its end are excess. */
static int h2_reply(const struct slot *s)
{
	const unsigned char *p = (const unsigned char *)s->buf, *end = p + s->got;

	while (end - p >= 9) {
		size_t len = (size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2];
		unsigned type = p[3], flags = p[4], id = p[8] | (unsigned)p[7] << 8;
		if ((size_t)(end - p) < 9 + len)
			return 0;
		if (type == 7 || (type == 3 && id == 1))
			return -E_BAD_REPLY;
		if (type == 1 && id == 1 && !(flags & 0x28) && (!len || p[9] != 0x88))
			return -E_BAD_REPLY;
		p += 9 + len;
		if ((type == 0 || type == 1) && id == 1 && (flags & 1))
			return p == end ? 1 : -E_EXCESS;
	}
	return 0;
}

/* After more bytes came: 0 while the reply is short, 1 once it is whole
 * and good, or -(the error). */
static int check_reply(struct slot *s)
{
	char want[ECHO_SIZE];
	int e;

	if (o.mode == MODE_H2)
		return h2_reply(s);

	if (o.mode == MODE_ECHO) {
		echo_message(s->conn, want);
		if (s->got > ECHO_SIZE)
			return -E_EXCESS;
		if (memcmp(s->buf, want, s->got))
			return -E_BAD_REPLY;
		return s->got == ECHO_SIZE;
	}
	if (!s->need && (e = http_head(s)))
		return -e;
	if (!s->need)
		return 0;
	if (s->got > s->need)
		return -E_EXCESS;
	return s->got == s->need;
}

/* ---------------------------------------------------------- connections */

static void watch(int op, int fd, uint32_t events, long i)
{
	struct epoll_event ev = { .events = events, .data.u64 = (uint64_t)i };

	if (epoll_ctl(ep, op, fd, &ev) < 0 && op != EPOLL_CTL_DEL)
		die("epoll_ctl failed");
}

static void free_slot(struct conn *c)
{
	slots[c->slot].conn = -1;
	c->slot = -1;
	busy--;
}

/* Connection c failed: closed (epoll forgets it with the fd) and counted. */
static void fail(struct conn *c, enum err kind)
{
	errs[kind]++;
	failed++;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free_slot(c);
}

/* Connection c's reply was whole and good: held, watched only for the
 * server closing it or writing to it. */
static void hold(struct conn *c, long i)
{
	free_slot(c);
	held++;
	watch(EPOLL_CTL_MOD, c->fd, EPOLLIN | EPOLLRDHUP, i);
}

/* Source address k (mod SRC_ADDRS) of 127.1.0.0/16, its port left to
 * connect(). */
static int bind_source(int fd, long k)
{
	uint32_t a = 0x7f010000u | (uint32_t)(k % SRC_ADDRS / 250) << 8 |
	             (uint32_t)(1 + k % SRC_ADDRS % 250);
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(a) };
	int one = 1;

	if (setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one)) < 0)
		return -1;
	return bind(fd, (struct sockaddr *)&src, sizeof(src));
}

/* Start connection i in free slot si: a non-blocking connect, watched for
 * writability (the connect's end). */
static void start_conn(long i, int si)
{
	struct conn *c = &conns[i];
	struct slot *s = &slots[si];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	*s = (struct slot){ .conn = (int)i, .st = CONNECTING,
	                    .deadline_ns = now_ns() + (uint64_t)o.timeout_s * 1000000000u };
	c->fd = fd;
	c->slot = si;
	busy++;
	if (fd < 0) {
		fail(c, E_SOCKET);
		return;
	}
	if (o.loopback && bind_source(fd, i) < 0) {
		fail(c, E_SOCKET);
		return;
	}
	if (connect(fd, (struct sockaddr *)&o.dst, sizeof(o.dst)) < 0 && errno != EINPROGRESS) {
		fail(c, E_CONNECT);
		return;
	}
	watch(EPOLL_CTL_ADD, fd, EPOLLOUT, i);
}

/* Send what is left of the request; once all is out, wait for the reply. */
static void send_more(struct conn *c, long i)
{
	struct slot *s = &slots[c->slot];
	char scratch[ECHO_SIZE];
	const char *req = request_of(s, scratch);

	while (s->sent < request_len) {
		ssize_t n = send(c->fd, req + s->sent, request_len - s->sent, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			fail(c, E_SEND);
			return;
		}
		s->sent += (size_t)n;
	}
	s->st = RECEIVING;
	watch(EPOLL_CTL_MOD, c->fd, EPOLLIN, i);
}

/* The connect ended: its outcome, then the request. */
static void connected(struct conn *c, long i)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		fail(c, E_CONNECT);
		return;
	}
	slots[c->slot].st = SENDING;
	send_more(c, i);
}

/* Read what came (one read: the loop is level-triggered), then check it. */
static void receive(struct conn *c, long i)
{
	struct slot *s = &slots[c->slot];
	ssize_t n = recv(c->fd, s->buf + s->got, REPLY_MAX - s->got, 0);
	int r;

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		fail(c, n == 0 ? E_EOF : E_RECV);
		return;
	}
	s->got += (size_t)n;
	s->buf[s->got] = '\0';
	r = check_reply(s);
	if (r > 0 && o.mode == MODE_H2 && send(c->fd, "\0\0\0\4\1\0\0\0\0", 9, MSG_NOSIGNAL) != 9)
		r = -E_SEND; /* the server's SETTINGS acknowledged */
	if (r < 0)
		fail(c, (enum err)-r);
	else if (r > 0)
		hold(c, i);
	else if (s->got == REPLY_MAX)
		fail(c, E_BAD_REPLY);
}

/* A held connection was closed or written to by the server: ours closes. */
static void lost(struct conn *c)
{
	closed_early++;
	close(c->fd);
	c->fd = -1;
}

static void on_event(long i)
{
	struct conn *c = &conns[i];

	if (c->fd < 0)
		return;
	if (c->slot < 0) {
		lost(c);
		return;
	}
	switch (slots[c->slot].st) {
	case CONNECTING: connected(c, i); break;
	case SENDING: send_more(c, i); break;
	case RECEIVING: receive(c, i); break;
	}
}

/* Unfinished connections past their deadline fail. */
static void expire(void)
{
	uint64_t t = now_ns();

	for (int si = 0; si < o.inflight; si++)
		if (slots[si].conn >= 0 && slots[si].deadline_ns <= t)
			fail(&conns[slots[si].conn], E_TIMEOUT);
}

/* ----------------------------------------------------------------- loop */

/* One wait and what it brought. False once SIGTERM or SIGINT came. */
static bool poll_once(int timeout_ms)
{
	struct epoll_event evs[MAX_EVENTS];
	int n = epoll_wait(ep, evs, MAX_EVENTS, timeout_ms);

	if (n < 0 && errno != EINTR)
		die("epoll_wait failed");
	for (int k = 0; k < n; k++) {
		if ((int64_t)evs[k].data.u64 == SIGNAL_TAG)
			return false;
		on_event((long)evs[k].data.u64);
	}
	return true;
}

/* Fill every free slot with the next connection. */
static void start_more(void)
{
	for (int si = 0; si < o.inflight && next_conn < o.n; si++)
		if (slots[si].conn < 0)
			start_conn(next_conn++, si);
}

/* Until every connection was held or failed. False if a signal came. */
static bool open_all(void)
{
	while (held + failed < o.n) {
		if (busy < o.inflight)
			start_more();
		if (!poll_once(TICK_MS))
			return false;
		expire();
	}
	return true;
}

/* Until SIGTERM or SIGINT. */
static void hold_all(void)
{
	while (poll_once(-1))
		;
}

static void close_all(void)
{
	for (long i = 0; i < o.n; i++)
		if (conns[i].fd >= 0)
			close(conns[i].fd);
}

/* ---------------------------------------------------------------- setup */

static void print_errors(void)
{
	if (!failed)
		return;
	fprintf(stderr, "idle_load: errors:");
	for (int k = 0; k < E_KINDS; k++)
		if (errs[k])
			fprintf(stderr, " %s=%ld", err_name[k], errs[k]);
	fprintf(stderr, "\n");
}

static __attribute__((noreturn)) void usage(void)
{
	fprintf(stderr,
	        "usage: idle_load --mode http|echo|h2 -n N [-c INFLIGHT] [-T SECS] [--path P]\n"
	        "                 [--no-hold] HOST PORT\n"
	        "opens N connections (INFLIGHT at a time, default 512), one request each,\n"
	        "prints held=H errors=E secs=S, then holds them until SIGTERM/SIGINT\n"
	        "(--no-hold: closes them). -T: seconds a connection may take (default 10).\n");
	exit(2);
}

static long num(const char *s, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v < lo || v > hi)
		usage();
	return v;
}

static enum mode parse_mode(const char *s)
{
	if (!strcmp(s, "http"))
		return MODE_HTTP;
	if (!strcmp(s, "echo"))
		return MODE_ECHO;
	if (!strcmp(s, "h2"))
		return MODE_H2;
	usage();
}

static void parse_target(const char *host, const char *port)
{
	o.dst.sin_family = AF_INET;
	o.dst.sin_port = htons((uint16_t)num(port, 1, 65535));
	if (inet_pton(AF_INET, host, &o.dst.sin_addr) != 1)
		die("HOST must be an IPv4 address");
	o.loopback = (ntohl(o.dst.sin_addr.s_addr) >> 24) == 127;
}

static void parse_args(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "mode", 1, NULL, 'm' }, { "path", 1, NULL, 'P' },
		{ "no-hold", 0, NULL, 'H' }, { "help", 0, NULL, 'h' }, { 0 },
	};
	bool mode = false;
	int c;

	while ((c = getopt_long(argc, argv, "n:c:T:", longs, NULL)) != -1) {
		switch (c) {
		case 'm': o.mode = parse_mode(optarg); mode = true; break;
		case 'P': o.path = optarg; break;
		case 'H': o.hold = false; break;
		case 'n': o.n = num(optarg, 1, 16000000); break;
		case 'c': o.inflight = (int)num(optarg, 1, 65536); break;
		case 'T': o.timeout_s = (int)num(optarg, 1, 3600); break;
		default: usage();
		}
	}
	if (!mode || o.n < 0 || argc - optind != 2)
		usage();
	parse_target(argv[optind], argv[optind + 1]);
	if (o.inflight > o.n)
		o.inflight = (int)o.n;
}

/* A connection is an fd: the soft limit up to N + FD_SLACK. */
static void raise_nofile(void)
{
	rlim_t need = (rlim_t)o.n + FD_SLACK;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		die("getrlimit failed");
	if (rl.rlim_cur >= need)
		return;
	if (rl.rlim_max < need) {
		fprintf(stderr, "idle_load: -n %ld needs %llu fds, the hard limit is %llu "
		        "(raise ulimit -n)\n", o.n, (unsigned long long)need,
		        (unsigned long long)rl.rlim_max);
		exit(2);
	}
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		die("setrlimit failed");
}

/* SIGTERM and SIGINT come through a signalfd in the epoll set, so the
 * loop ends between events, never in the middle of one. */
static void setup(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
	    (sig_fd = signalfd(-1, &set, SFD_CLOEXEC)) < 0 ||
	    (ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		die("cannot set up epoll and the signalfd");
	watch(EPOLL_CTL_ADD, sig_fd, EPOLLIN, SIGNAL_TAG);
	conns = malloc((size_t)o.n * sizeof(*conns));
	slots = malloc((size_t)o.inflight * sizeof(*slots));
	if (!conns || !slots)
		die("out of memory");
	for (long i = 0; i < o.n; i++)
		conns[i] = (struct conn){ .fd = -1, .slot = -1 };
	for (int si = 0; si < o.inflight; si++)
		slots[si].conn = -1;
}

int main(int argc, char **argv)
{
	uint64_t t0;
	bool done;

	parse_args(argc, argv);
	raise_nofile();
	build_request();
	setup();
	t0 = now_ns();
	done = open_all();
	if (done) {
		printf("held=%ld errors=%ld secs=%.3f\n", held, failed, (double)(now_ns() - t0) / 1e9);
		fflush(stdout);
	}
	print_errors();
	if (done && o.hold)
		hold_all();
	close_all();
	if (closed_early)
		fprintf(stderr, "idle_load: closed_early=%ld\n", closed_early);
	if (!done)
		fprintf(stderr, "idle_load: interrupted after %ld of %ld connections\n",
		        held + failed, o.n);
	free(conns);
	free(slots);
	return done ? 0 : 1;
}
