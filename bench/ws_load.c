/* SPDX-License-Identifier: MIT */
/*
 * ws_load: WebSocket load for bench/bench-ws.sh - an echo in a closed loop
 * (latency, and a server's CPU per message), or many idle WebSockets held
 * open (a server's memory per connection). Standalone: one thread, one
 * level-triggered epoll loop over non-blocking sockets, OpenSSL's libcrypto
 * for the handshake's SHA-1 and zlib for compressed echoes, nothing of the
 * runtime library.
 *
 *   ws_load --mode echo [-c CONNS] -d SECS [-s SIZE] [--deflate] [--path P]
 *           [-T SECS] HOST PORT
 *   ws_load --mode idle -n N [-c INFLIGHT] [-s SIZE] [--deflate] [--path P]
 *           [-T SECS] [--no-hold] HOST PORT
 *
 * Each connection is a TCP connection to HOST:PORT (IPv4) and an RFC 6455
 * client handshake: GET PATH (default /ws) with a random Sec-WebSocket-Key;
 * the reply must be "HTTP/1.1 101" with Upgrade: websocket, Connection:
 * upgrade and Sec-WebSocket-Accept = base64(SHA-1(key + the RFC's GUID)),
 * and nothing after its head. --deflate offers "permessage-deflate;
 * client_no_context_takeover; server_no_context_takeover"; a server that
 * accepts must grant server_no_context_takeover (one inflate stream then
 * serves every connection). Without --deflate, an extension answered is an
 * error.
 *
 * A message is SIZE bytes (default 64) of text-like bytes (words: what
 * deflate has something to do with), a different window of one pattern
 * for every connection and message, sent as one masked binary frame; its
 * echo must be one binary message (in one or more frames) equal byte for
 * byte. With deflate agreed the echo may come compressed (RSV1): it is
 * inflated (raw, after 00 00 ff ff) first. What is sent is never
 * compressed (RSV1 clear, which RFC 7692 allows): the server deflates
 * echoes, it never inflates. Pings are answered; a close, a text or
 * unsolicited frame, or a bad one is an error.
 *
 * echo: opens CONNS (default 64) at once; once all are open or failed,
 * each sends a message, waits for its echo, checks it, and sends the next,
 * until SECS have passed (the echoes then under way are awaited). Then one
 * line on stdout:
 *   msgs=N secs=S rate=R p50_us=P p99_us=Q errors=E conns=C deflate=A
 *   deflated=D
 * N echoes checked in S seconds (from the first send to the last echo,
 * handshakes not included), R = N/S, the round trip's percentiles (from
 * the first byte sent to the last received; log-linear buckets, within 3%),
 * E connections failed, C opened, A of them with deflate agreed, D echoes
 * that came compressed. Exit status 0 if there were echoes and no errors,
 * else 1.
 *
 * idle: opens N connections, at most INFLIGHT (default 512) unfinished at
 * a time; with -s SIZE (default 0: none) each also echoes one message
 * (checked) - what a server keeps of a WebSocket that was used, not only
 * opened. Then one line,
 *   held=H errors=E secs=S deflate=A
 * (H open and done, E failed, S seconds the opening took, A with deflate
 * agreed), the errors by kind on stderr, and the H connections are held,
 * idle, until SIGTERM or SIGINT; then closed, exit status 0. A held
 * connection the server closes or writes to is closed and counted:
 * closed_early=K on stderr at the end. --no-hold closes them right after
 * the line (a warm-up). Exit status 1 if a signal came before all N were
 * tried. The same contract as idle_load's.
 *
 * A connection refused, reset, closed, answered wrongly, or whose
 * handshake or echo is not done within -T SECS (default 10) is closed and
 * counted by kind, never retried. Against a loopback HOST each socket
 * binds a source address of 127.1.0.0/16 first (SRC_ADDRS of them, in
 * turn) with IP_BIND_ADDRESS_NO_PORT, so 100,000 connections do not run
 * out of one address's ephemeral ports. The soft fd limit is raised to
 * what the connections need. Exit status 2 on bad usage or setup.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

enum {
	HEAD_MAX = 4096,      /* the 101 reply's head */
	SIZE_MAX_OPT = 1 << 20,
	SRC_ADDRS = 500,      /* 127.1.0.1 - 127.1.1.250: 200 connections each per 100,000 */
	MAX_EVENTS = 256,
	TICK_MS = 100,        /* how often deadlines are checked */
	FD_SLACK = 64,        /* fds besides the connections */
	SIGNAL_TAG = -1,      /* epoll data of the signalfd */
	PATTERN_SLACK = 251,  /* distinct message windows (prime: seq steps cycle it all) */
	FRAME_HEAD = 14,      /* a client frame's head at most: 2 + 8 + the mask */
	CONTROL_MAX = 125,
};

/* Latency histogram: 2^SUB_BITS buckets per power of two of nanoseconds. */
#define SUB_BITS 5
#define SUB (1u << SUB_BITS)
#define NBUCKETS ((64 - SUB_BITS + 1) * SUB)

#define GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11" /* RFC 6455 1.3 */
#define OFFER "permessage-deflate; client_no_context_takeover; server_no_context_takeover"

enum mode { MODE_ECHO, MODE_IDLE };
/* A peer's progress. READY: open, waiting for the echo loop to start;
 * DONE: the loop ended for it. */
enum state { CONNECTING, HANDSHAKE, READY, ECHOING, DONE };

enum op { OP_CONT = 0, OP_TEXT = 1, OP_BINARY = 2, OP_CLOSE = 8, OP_PING = 9, OP_PONG = 10 };

/* Kinds of errors, each counted; names for the report on stderr. */
enum err {
	E_SOCKET, E_CONNECT, E_SEND, E_RECV, E_EOF, E_HANDSHAKE, E_FRAME, E_CLOSED,
	E_MISMATCH, E_EXCESS, E_TIMEOUT, E_KINDS
};
static const char *const err_name[E_KINDS] = {
	"socket", "connect", "send", "recv", "eof", "handshake", "bad_frame", "closed",
	"mismatch", "excess", "timeout",
};

/* One connection: its fd (-1 once closed) and its peer slot while it has
 * one (-1 once held). 8 bytes: the tool's own memory stays small. */
struct conn {
	int fd, slot;
};

/* A connection being opened or echoing; reused. */
struct peer {
	int conn;                /* -1: free */
	enum state st;
	bool deflate;            /* permessage-deflate agreed */
	bool want_out;           /* EPOLLOUT armed: out not all sent */
	bool msg_z;              /* the message under way came with RSV1 */
	int msg_op;              /* its opcode; 0: none under way */
	uint32_t seq;            /* the message under way: those echoed before it */
	uint64_t deadline_ns;    /* the handshake's or the echo's end */
	uint64_t sent_ns;        /* the message's send */
	size_t out_len, out_sent, in_len, msg_len;
	char accept[32];         /* the Sec-WebSocket-Accept expected */
	unsigned char *out, *in, *msg; /* buf_cap bytes each */
};

static struct {
	enum mode mode;
	const char *path;
	long n;                  /* connections */
	int slots;               /* peers at a time */
	int secs, timeout_s;
	size_t size;
	bool deflate, hold;
	struct sockaddr_in dst;
	bool loopback;
} o = { .path = "/ws", .n = -1, .slots = -1, .secs = -1, .timeout_s = 10, .size = 64,
        .hold = true };

static struct conn *conns;
static struct peer *peers;
static size_t buf_cap;
static int ep;
/* Connections started; done opening, well or not (echo: READY, idle:
 * held, or failed meanwhile); READY (echo); held (idle); failed at any
 * time; held and then lost; with deflate agreed. */
static long next_conn, settled, opened, held, failed, closed_early, agreed;
static int busy, echoing;       /* peers in use; in ECHOING */
static long errs[E_KINDS];
static unsigned char *pattern;  /* o.size + PATTERN_SLACK bytes */
static unsigned char *plain;    /* an inflated echo: o.size + 1 bytes */
static z_stream zin;
static uint64_t rng, t_end, last_echo_ns;
static long msgs, deflated;
static uint64_t hist[NBUCKETS];
static char host_port[64];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "ws_load: %s\n", what);
	exit(2);
}

/* xorshift64: mask keys and the pattern. Not a secret: the masks only
 * have to vary (the RFC's unpredictability guards proxies, not us). */
static uint64_t next_rng(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* ------------------------------------------------------------ messages */

/* Words, so that deflate finds repeats as it would in text or JSON. */
static void build_pattern(void)
{
	static const char *const words[] = {
		"the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog; ",
		"websocket ", "frame ", "echo ", "message ", "{\"id\": ", "\"value\": ", "}, ",
	};
	size_t len = o.size + PATTERN_SLACK, k = 0;

	pattern = malloc(len);
	plain = malloc(o.size + 1);
	if (!pattern || !plain)
		die("out of memory");
	while (k < len) {
		const char *w = words[next_rng() % (sizeof(words) / sizeof(words[0]))];
		for (; *w && k < len; w++)
			pattern[k++] = (unsigned char)*w;
	}
}

/* Message seq of connection i: a window of the pattern, so consecutive
 * messages and neighbouring connections differ. */
static const unsigned char *message(long i, uint32_t seq)
{
	return pattern + ((uint64_t)i * 7 + (uint64_t)seq * 13) % PATTERN_SLACK;
}

/* A masked frame of op (FIN set) with payload p[0..len) into out. */
static size_t build_frame(unsigned char *out, int op, const unsigned char *p, size_t len)
{
	uint32_t key = (uint32_t)next_rng();
	unsigned char *mask;
	size_t h = 2;

	out[0] = (unsigned char)(0x80 | op);
	if (len < 126) {
		out[1] = (unsigned char)(0x80 | len);
	} else if (len < 65536) {
		out[1] = 0x80 | 126;
		out[2] = (unsigned char)(len >> 8), out[3] = (unsigned char)len;
		h = 4;
	} else {
		out[1] = 0x80 | 127;
		for (int k = 0; k < 8; k++)
			out[2 + k] = (unsigned char)((uint64_t)len >> (56 - 8 * k));
		h = 10;
	}
	mask = memcpy(out + h, &key, 4);
	h += 4;
	for (size_t k = 0; k < len; k++)
		out[h + k] = p[k] ^ mask[k & 3];
	return h + len;
}

/* A compressed message (RFC 7692 7.2.2: raw deflate, the sync flush's
 * 00 00 ff ff left off) into plain: its size, or -1 if it is not deflate
 * or inflates to more than o.size (which cannot be the echo). The server
 * takes no context over, so one stream, reset, serves every message. */
static long inflate_msg(const unsigned char *z, size_t len)
{
	static const unsigned char tail[4] = { 0, 0, 0xff, 0xff };
	int rc;

	inflateReset(&zin);
	zin.next_out = plain, zin.avail_out = (uInt)o.size + 1;
	zin.next_in = (unsigned char *)z, zin.avail_in = (uInt)len;
	rc = inflate(&zin, Z_SYNC_FLUSH);
	if (rc == Z_OK || rc == Z_BUF_ERROR) {
		if (zin.avail_in)
			return -1;
		zin.next_in = (unsigned char *)tail, zin.avail_in = sizeof(tail);
		rc = inflate(&zin, Z_SYNC_FLUSH);
	}
	if ((rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) || !zin.avail_out)
		return -1;
	return (long)(o.size + 1 - zin.avail_out);
}

/* ------------------------------------------------------------ handshake */

static void base64(const unsigned char *p, size_t len, char *out)
{
	EVP_EncodeBlock((unsigned char *)out, p, (int)len);
}

/* Peer p's request, with a fresh key, into out; its accept remembered. */
static void build_handshake(struct peer *p)
{
	unsigned char raw[16], md[EVP_MAX_MD_SIZE];
	char key[32], both[64];
	unsigned mdlen;
	int n;

	if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
		die("getrandom failed");
	base64(raw, sizeof(raw), key);
	n = snprintf(both, sizeof(both), "%s" GUID, key);
	if (!EVP_Digest(both, (size_t)n, md, &mdlen, EVP_sha1(), NULL))
		die("SHA-1 failed");
	base64(md, mdlen, p->accept);
	n = snprintf((char *)p->out, buf_cap,
	             "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: ws_load\r\n"
	             "Upgrade: websocket\r\nConnection: Upgrade\r\n"
	             "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s\r\n",
	             o.path, host_port, key,
	             o.deflate ? "Sec-WebSocket-Extensions: " OFFER "\r\n" : "");
	p->out_len = (size_t)n, p->out_sent = 0;
}

/* Header name's value in the head (its first), blanks trimmed, into v;
 * false if there is none. */
static bool header(const char *head, const char *name, char *v, size_t cap)
{
	char key[64];
	const char *s, *e;

	snprintf(key, sizeof(key), "\r\n%s:", name);
	if (!(s = strcasestr(head, key)))
		return false;
	s += strlen(key);
	e = strstr(s, "\r\n");
	while (s < e && (*s == ' ' || *s == '\t'))
		s++;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	if ((size_t)(e - s) >= cap)
		return false;
	memcpy(v, s, (size_t)(e - s));
	v[e - s] = '\0';
	return true;
}

/* The extension answered, against what was offered: true if acceptable
 * (then p->deflate says whether deflate was agreed). */
static bool check_extensions(struct peer *p, const char *head)
{
	char v[512];

	if (!header(head, "Sec-WebSocket-Extensions", v, sizeof(v)) || !*v)
		return true; /* none: a server may decline */
	if (!o.deflate || strncasecmp(v, "permessage-deflate", 18) ||
	    !strcasestr(v, "server_no_context_takeover"))
		return false;
	p->deflate = true;
	return true;
}

/* The 101 reply's head (NUL-terminated): false if it is not a good one. */
static bool check_head(struct peer *p, const char *head)
{
	char v[512];

	if (strncmp(head, "HTTP/1.1 101 ", 13))
		return false;
	if (!header(head, "Upgrade", v, sizeof(v)) || strcasecmp(v, "websocket"))
		return false;
	if (!header(head, "Connection", v, sizeof(v)) || !strcasestr(v, "upgrade"))
		return false;
	if (!header(head, "Sec-WebSocket-Accept", v, sizeof(v)) || strcmp(v, p->accept))
		return false;
	return check_extensions(p, head);
}

/* ---------------------------------------------------------- connections */

static void watch(int op, int fd, uint32_t events, long i)
{
	struct epoll_event ev = { .events = events, .data.u64 = (uint64_t)i };

	if (epoll_ctl(ep, op, fd, &ev) < 0 && op != EPOLL_CTL_DEL)
		die("epoll_ctl failed");
}

static void set_state(struct peer *p, enum state st)
{
	echoing += (st == ECHOING) - (p->st == ECHOING);
	p->st = st;
}

/* Still opening: not yet READY (echo) or held (idle). */
static bool opening(const struct peer *p)
{
	return p->st < READY || (o.mode == MODE_IDLE && p->st == ECHOING);
}

static void release(struct conn *c)
{
	struct peer *p = &peers[c->slot];

	set_state(p, DONE);
	p->conn = -1;
	c->slot = -1;
	busy--;
}

/* Connection c failed: closed (epoll forgets it with the fd) and counted. */
static void fail(struct conn *c, enum err kind)
{
	errs[kind]++;
	failed++;
	if (opening(&peers[c->slot]))
		settled++;
	close(c->fd);
	c->fd = -1;
	release(c);
}

/* Connection c is open (and echoed, with -s): held, watched only for the
 * server closing it or writing to it. */
static void hold(struct conn *c, long i)
{
	release(c);
	held++;
	settled++;
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

/* Start connection i in free peer si: a non-blocking connect, watched for
 * writability (the connect's end). */
static void start_conn(long i, int si)
{
	struct conn *c = &conns[i];
	struct peer *p = &peers[si];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	p->conn = (int)i, p->st = CONNECTING, p->deflate = false, p->want_out = true;
	p->seq = 0, p->msg_op = 0, p->out_len = p->out_sent = p->in_len = p->msg_len = 0;
	p->deadline_ns = now_ns() + (uint64_t)o.timeout_s * 1000000000u;
	c->fd = fd, c->slot = si;
	busy++;
	if (fd < 0 || (o.loopback && bind_source(fd, i) < 0) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
		fail(c, E_SOCKET);
		return;
	}
	if (connect(fd, (struct sockaddr *)&o.dst, sizeof(o.dst)) < 0 && errno != EINPROGRESS) {
		fail(c, E_CONNECT);
		return;
	}
	watch(EPOLL_CTL_ADD, fd, EPOLLOUT, i);
}

/* Send what is left of the peer's out; EPOLLOUT is watched while some is.
 * False if the connection failed. */
static bool flush_out(struct conn *c, long i)
{
	struct peer *p = &peers[c->slot];

	while (p->out_sent < p->out_len) {
		ssize_t n = send(c->fd, p->out + p->out_sent, p->out_len - p->out_sent, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!p->want_out)
				watch(EPOLL_CTL_MOD, c->fd, EPOLLIN | EPOLLOUT, i);
			p->want_out = true;
			return true;
		}
		if (n <= 0) {
			fail(c, E_SEND);
			return false;
		}
		p->out_sent += (size_t)n;
	}
	if (p->want_out)
		watch(EPOLL_CTL_MOD, c->fd, EPOLLIN, i);
	p->want_out = false;
	return true;
}

/* The connect ended: its outcome, then the handshake's request. */
static void connected(struct conn *c, long i)
{
	struct peer *p = &peers[c->slot];
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
		fail(c, E_CONNECT);
		return;
	}
	build_handshake(p);
	set_state(p, HANDSHAKE);
	flush_out(c, i);
}

/* Send the peer's next message (seq) and wait for its echo. */
static void send_message(struct conn *c, long i)
{
	struct peer *p = &peers[c->slot];

	p->out_len = build_frame(p->out, OP_BINARY, message(i, p->seq), o.size);
	p->out_sent = 0;
	p->sent_ns = now_ns();
	p->deadline_ns = p->sent_ns + (uint64_t)o.timeout_s * 1000000000u;
	set_state(p, ECHOING);
	flush_out(c, i);
}

/* The handshake succeeded: echo waits for the loop to start; idle sends
 * its one message, or holds the connection. */
static void handshake_done(struct conn *c, long i)
{
	struct peer *p = &peers[c->slot];

	agreed += p->deflate;
	if (o.mode == MODE_ECHO) {
		set_state(p, READY);
		opened++;
		settled++;
	} else if (o.size) {
		send_message(c, i);
	} else {
		hold(c, i);
	}
}

/* Read the 101's head (one read: the loop is level-triggered) and check
 * it once whole. */
static void read_head(struct conn *c, long i)
{
	struct peer *p = &peers[c->slot];
	ssize_t n = recv(c->fd, p->in + p->in_len, HEAD_MAX - 1 - p->in_len, 0);
	char *head = (char *)p->in, *eoh;

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		fail(c, n == 0 ? E_EOF : E_RECV);
		return;
	}
	p->in_len += (size_t)n;
	head[p->in_len] = '\0';
	if (!(eoh = strstr(head, "\r\n\r\n"))) {
		if (p->in_len >= HEAD_MAX - 1)
			fail(c, E_HANDSHAKE);
		return;
	}
	if ((size_t)(eoh + 4 - head) != p->in_len)
		fail(c, E_EXCESS); /* nothing may come before a message */
	else if (!check_head(p, head))
		fail(c, E_HANDSHAKE);
	else {
		p->in_len = 0;
		handshake_done(c, i);
	}
}

/* ------------------------------------------------------------- framing */

struct frame {
	bool fin, rsv1;
	int op;
	uint64_t len;
};

/* A server frame's head at p[0..n) into f: its size, 0 if it is not all
 * there yet, -1 if bad (masked, RSV2 or RSV3 set). */
static int parse_frame(const unsigned char *p, size_t n, struct frame *f)
{
	int h = 2;

	if (n < 2)
		return 0;
	if ((p[0] & 0x30) || (p[1] & 0x80))
		return -1;
	f->fin = p[0] & 0x80, f->rsv1 = p[0] & 0x40, f->op = p[0] & 0x0f;
	f->len = p[1] & 0x7f;
	if (f->len == 126) {
		h = 4;
		if (n < 4)
			return 0;
		f->len = (uint64_t)p[2] << 8 | p[3];
	} else if (f->len == 127) {
		h = 10;
		if (n < 10)
			return 0;
		f->len = 0;
		for (int k = 0; k < 8; k++)
			f->len = f->len << 8 | p[2 + k];
	}
	return h;
}

/* A whole message d[0..len): 1 if it is the echo of the peer's message,
 * else -(the error). */
static int check_echo(struct peer *p, const unsigned char *d, size_t len)
{
	int op = p->msg_op;
	bool z = p->msg_z;

	p->msg_op = 0, p->msg_len = 0;
	if (op != OP_BINARY)
		return -E_MISMATCH;
	if (z) {
		long n = inflate_msg(d, len);
		if (n < 0)
			return -E_MISMATCH;
		d = plain, len = (size_t)n;
	}
	if (len != o.size || memcmp(d, message(p->conn, p->seq), len))
		return -E_MISMATCH;
	deflated += z;
	return 1;
}

/* A control frame: a ping's pong goes into out (2), unless a frame is
 * still going out there: frames cannot interleave, and no server here
 * pings mid-echo, so that is an error rather than a queue. */
static int on_control(struct peer *p, const struct frame *f, const unsigned char *d)
{
	if (!f->fin || f->len > CONTROL_MAX)
		return -E_FRAME;
	if (f->op == OP_CLOSE)
		return -E_CLOSED;
	if (f->op == OP_PONG)
		return 0;
	if (f->op != OP_PING || p->out_sent < p->out_len)
		return -E_FRAME;
	p->out_len = build_frame(p->out, OP_PONG, d, (size_t)f->len);
	p->out_sent = 0;
	return 2;
}

/* One whole frame, payload d: 0 (more to come), 1 (the echo is whole and
 * right), 2 (a pong to send) or -(the error). A message in one frame is
 * checked where it lies; one in parts is gathered in msg first. */
static int on_frame(struct peer *p, const struct frame *f, const unsigned char *d)
{
	if (f->op & 8)
		return on_control(p, f, d);
	if (f->op == OP_CONT ? !p->msg_op || f->rsv1
	                     : p->msg_op || (f->op != OP_TEXT && f->op != OP_BINARY))
		return -E_FRAME;
	if (f->rsv1 && !p->deflate)
		return -E_FRAME;
	if (f->op != OP_CONT)
		p->msg_op = f->op, p->msg_z = f->rsv1, p->msg_len = 0;
	if (f->fin && !p->msg_len)
		return check_echo(p, d, (size_t)f->len);
	if (f->len > buf_cap - p->msg_len)
		return -E_MISMATCH;
	memcpy(p->msg + p->msg_len, d, (size_t)f->len);
	p->msg_len += (size_t)f->len;
	return f->fin ? check_echo(p, p->msg, p->msg_len) : 0;
}

/* ------------------------------------------------------------ the echo */

static unsigned bucket(uint64_t ns)
{
	if (ns < SUB)
		return (unsigned)ns;
	unsigned e = 63u - (unsigned)__builtin_clzll(ns);
	return (e - SUB_BITS + 1) * SUB + (unsigned)((ns >> (e - SUB_BITS)) & (SUB - 1));
}

/* Bucket b's midpoint in nanoseconds. */
static double bucket_mid(unsigned b)
{
	if (b < SUB)
		return b;
	unsigned e = b / SUB + SUB_BITS - 1;
	double lo = (double)((uint64_t)(SUB + b % SUB) << (e - SUB_BITS));
	return lo + (double)(1ull << (e - SUB_BITS)) / 2;
}

/* The q-quantile of the round trips, in microseconds. */
static double percentile_us(double q)
{
	uint64_t want = (uint64_t)(q * (double)msgs), seen = 0;

	for (unsigned b = 0; b < NBUCKETS; b++) {
		seen += hist[b];
		if (seen > want)
			return bucket_mid(b) / 1e3;
	}
	return 0;
}

/* The peer's echo came back right. Idle: the connection is held. Echo:
 * counted, and the next message goes out until the run's end. */
static void echo_done(struct conn *c, long i)
{
	struct peer *p = &peers[c->slot];
	uint64_t t = now_ns();

	if (o.mode == MODE_IDLE) {
		hold(c, i);
		return;
	}
	msgs++;
	hist[bucket(t - p->sent_ns)]++;
	last_echo_ns = t;
	p->seq++;
	if (t < t_end) {
		send_message(c, i);
		return;
	}
	set_state(p, DONE);
	watch(EPOLL_CTL_DEL, c->fd, 0, i); /* kept open until the end, unwatched */
}

/* The whole frames in the peer's in, in turn; a partial one stays. The
 * echo loop is closed, so nothing may follow the echo. */
static void take_frames(struct conn *c, long i)
{
	struct peer *p = &peers[c->slot];
	size_t off = 0;
	struct frame f;
	int h, r;

	while ((h = parse_frame(p->in + off, p->in_len - off, &f)) != 0) {
		if (h < 0 || f.len > buf_cap - (size_t)h) {
			fail(c, E_FRAME);
			return;
		}
		if (p->in_len - off - (size_t)h < f.len)
			break;
		r = on_frame(p, &f, p->in + off + h);
		off += (size_t)h + (size_t)f.len;
		if (r < 0 || (r == 1 && off != p->in_len)) {
			fail(c, r < 0 ? (enum err)-r : E_EXCESS);
			return;
		}
		if (r == 1) {
			p->in_len = 0;
			echo_done(c, i);
			return;
		}
		if (r == 2 && !flush_out(c, i))
			return;
	}
	memmove(p->in, p->in + off, p->in_len - off);
	p->in_len -= off;
}

/* Read what came (one read: level-triggered), then the frames in it. */
static void receive(struct conn *c, long i)
{
	struct peer *p = &peers[c->slot];
	ssize_t n = recv(c->fd, p->in + p->in_len, buf_cap - p->in_len, 0);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		fail(c, n == 0 ? E_EOF : E_RECV);
		return;
	}
	p->in_len += (size_t)n;
	if (p->st != ECHOING)
		fail(c, E_EXCESS); /* READY: nothing was asked for */
	else
		take_frames(c, i);
}

/* A held connection was closed or written to by the server: ours closes. */
static void lost(struct conn *c)
{
	closed_early++;
	close(c->fd);
	c->fd = -1;
}

static void on_event(long i, uint32_t events)
{
	struct conn *c = &conns[i];

	if (c->fd < 0)
		return;
	if (c->slot < 0) {
		lost(c);
		return;
	}
	if (peers[c->slot].st == CONNECTING) {
		connected(c, i);
		return;
	}
	if ((events & EPOLLOUT) && !flush_out(c, i))
		return;
	if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP)) || peers[c->slot].st == DONE)
		return;
	if (peers[c->slot].st == HANDSHAKE)
		read_head(c, i);
	else
		receive(c, i);
}

/* Handshakes and echoes past their deadline fail. */
static void expire(void)
{
	uint64_t t = now_ns();

	for (int si = 0; si < o.slots; si++) {
		struct peer *p = &peers[si];
		if (p->conn >= 0 && (p->st < READY || p->st == ECHOING) && p->deadline_ns <= t)
			fail(&conns[p->conn], E_TIMEOUT);
	}
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
		on_event((long)evs[k].data.u64, evs[k].events);
	}
	return true;
}

/* Until every connection was opened (and held, idle) or failed. False if
 * a signal came. */
static bool open_all(void)
{
	while (settled < o.n) {
		for (int si = 0; si < o.slots && next_conn < o.n && busy < o.slots; si++)
			if (peers[si].conn < 0)
				start_conn(next_conn++, si);
		if (!poll_once(TICK_MS))
			return false;
		expire();
	}
	return true;
}

/* Every open connection echoes in a closed loop until SECS have passed
 * and its last echo came (or failed). False if a signal came. */
static bool echo_all(uint64_t t0)
{
	t_end = t0 + (uint64_t)o.secs * 1000000000u;
	last_echo_ns = t0;
	for (int si = 0; si < o.slots; si++)
		if (peers[si].conn >= 0 && peers[si].st == READY)
			send_message(&conns[peers[si].conn], peers[si].conn);
	while (echoing > 0) {
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
	fprintf(stderr, "ws_load: errors:");
	for (int k = 0; k < E_KINDS; k++)
		if (errs[k])
			fprintf(stderr, " %s=%ld", err_name[k], errs[k]);
	fprintf(stderr, "\n");
}

static __attribute__((noreturn)) void usage(void)
{
	fprintf(stderr,
	        "usage: ws_load --mode echo [-c CONNS] -d SECS [-s SIZE] [--deflate] [--path P]\n"
	        "               [-T SECS] HOST PORT\n"
	        "       ws_load --mode idle -n N [-c INFLIGHT] [-s SIZE] [--deflate] [--path P]\n"
	        "               [-T SECS] [--no-hold] HOST PORT\n"
	        "echo: CONNS (64) WebSockets echo SIZE-byte (64) messages in a closed loop\n"
	        "for SECS; prints msgs= secs= rate= p50_us= p99_us= errors= ...\n"
	        "idle: opens N WebSockets (INFLIGHT at a time, default 512; with -s SIZE\n"
	        "one echo each), prints held=H errors=E secs=S deflate=A and holds them\n"
	        "until SIGTERM/SIGINT (--no-hold: closes them). -T: seconds a handshake\n"
	        "or an echo may take (default 10). --deflate offers permessage-deflate.\n");
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

static void parse_target(const char *host, const char *port)
{
	o.dst.sin_family = AF_INET;
	o.dst.sin_port = htons((uint16_t)num(port, 1, 65535));
	if (inet_pton(AF_INET, host, &o.dst.sin_addr) != 1)
		die("HOST must be an IPv4 address");
	o.loopback = (ntohl(o.dst.sin_addr.s_addr) >> 24) == 127;
	snprintf(host_port, sizeof(host_port), "%s:%s", host, port);
}

/* -c is the connections (echo) or those opening at a time (idle); -s
 * defaults to 64 (echo) or none (idle). */
static void check_args(int argc, bool mode, bool size_set)
{
	if (!mode || argc - optind != 2 || strlen(o.path) > 1024 || o.path[0] != '/')
		usage();
	if (o.mode == MODE_ECHO) {
		if (o.secs < 0 || o.n >= 0 || !o.hold)
			usage();
		o.n = o.slots < 0 ? 64 : o.slots;
		o.slots = (int)o.n;
		return;
	}
	if (o.n < 0 || o.secs >= 0)
		usage();
	if (o.slots < 0)
		o.slots = 512;
	if (o.slots > o.n)
		o.slots = (int)o.n;
	if (!size_set)
		o.size = 0;
}

static void parse_args(int argc, char **argv)
{
	static const struct option longs[] = {
		{ "mode", 1, NULL, 'm' }, { "path", 1, NULL, 'P' }, { "deflate", 0, NULL, 'z' },
		{ "no-hold", 0, NULL, 'H' }, { "help", 0, NULL, 'h' }, { 0 },
	};
	bool mode = false, size_set = false;
	int c;

	while ((c = getopt_long(argc, argv, "n:c:d:s:T:", longs, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (strcmp(optarg, "echo") && strcmp(optarg, "idle"))
				usage();
			o.mode = strcmp(optarg, "echo") ? MODE_IDLE : MODE_ECHO, mode = true;
			break;
		case 'P': o.path = optarg; break;
		case 'z': o.deflate = true; break;
		case 'H': o.hold = false; break;
		case 'n': o.n = num(optarg, 1, 16000000); break;
		case 'c': o.slots = (int)num(optarg, 1, 65536); break;
		case 'd': o.secs = (int)num(optarg, 1, 86400); break;
		case 's': o.size = (size_t)num(optarg, 0, SIZE_MAX_OPT), size_set = true; break;
		case 'T': o.timeout_s = (int)num(optarg, 1, 3600); break;
		default: usage();
		}
	}
	check_args(argc, mode, size_set);
	parse_target(argv[optind], argv[optind + 1]);
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
		fprintf(stderr, "ws_load: %ld connections need %llu fds, the hard limit is %llu "
		        "(raise ulimit -n)\n", o.n, (unsigned long long)need,
		        (unsigned long long)rl.rlim_max);
		exit(2);
	}
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		die("setrlimit failed");
}

/* Every peer's buffers: the 101's head, or a frame of the message (its
 * compressed echo may be a little larger than the message: twice is
 * room enough), or a control frame. */
static void alloc_peers(void)
{
	buf_cap = 2 * o.size + FRAME_HEAD + CONTROL_MAX + 1024;
	if (buf_cap < HEAD_MAX)
		buf_cap = HEAD_MAX;
	conns = malloc((size_t)o.n * sizeof(*conns));
	peers = calloc((size_t)o.slots, sizeof(*peers));
	if (!conns || !peers)
		die("out of memory");
	for (long i = 0; i < o.n; i++)
		conns[i] = (struct conn){ .fd = -1, .slot = -1 };
	for (int si = 0; si < o.slots; si++) {
		struct peer *p = &peers[si];
		p->conn = -1;
		p->st = DONE;
		p->out = malloc(buf_cap), p->in = malloc(buf_cap), p->msg = malloc(buf_cap);
		if (!p->out || !p->in || !p->msg)
			die("out of memory");
	}
}

/* SIGTERM and SIGINT come through a signalfd in the epoll set, so the
 * loop ends between events, never in the middle of one. */
static void setup(void)
{
	sigset_t set;
	int sig_fd;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0 ||
	    (sig_fd = signalfd(-1, &set, SFD_CLOEXEC)) < 0 ||
	    (ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		die("cannot set up epoll and the signalfd");
	watch(EPOLL_CTL_ADD, sig_fd, EPOLLIN, SIGNAL_TAG);
	if (getrandom(&rng, sizeof(rng), 0) != sizeof(rng))
		die("getrandom failed");
	rng |= 1; /* xorshift's one fixed point is 0 */
	if (inflateInit2(&zin, -15) != Z_OK)
		die("inflateInit2 failed");
	build_pattern();
	alloc_peers();
}

static void free_all(void)
{
	for (int si = 0; si < o.slots; si++)
		free(peers[si].out), free(peers[si].in), free(peers[si].msg);
	free(peers);
	free(conns);
	free(pattern);
	free(plain);
	inflateEnd(&zin);
}

/* Open, then echo in a loop; prints the run's line. Exit status. */
static int run_echo(void)
{
	uint64_t t0;
	double secs;

	if (!open_all())
		return 1;
	t0 = now_ns();
	if (!echo_all(t0))
		return 1;
	secs = (double)(last_echo_ns - t0) / 1e9;
	printf("msgs=%ld secs=%.3f rate=%.0f p50_us=%.1f p99_us=%.1f errors=%ld conns=%ld "
	       "deflate=%ld deflated=%ld\n",
	       msgs, secs, secs > 0 ? (double)msgs / secs : 0.0, percentile_us(0.5),
	       percentile_us(0.99), failed, opened, agreed, deflated);
	fflush(stdout);
	print_errors();
	return msgs > 0 && !failed ? 0 : 1;
}

/* Open and hold, as idle_load does. Exit status. */
static int run_idle(void)
{
	uint64_t t0 = now_ns();
	bool done = open_all();

	if (done) {
		printf("held=%ld errors=%ld secs=%.3f deflate=%ld\n", held, failed,
		       (double)(now_ns() - t0) / 1e9, agreed);
		fflush(stdout);
	}
	print_errors();
	if (done && o.hold)
		hold_all();
	if (!done)
		fprintf(stderr, "ws_load: interrupted after %ld of %ld connections\n", settled, o.n);
	return done ? 0 : 1;
}

int main(int argc, char **argv)
{
	int rc;

	parse_args(argc, argv);
	raise_nofile();
	setup();
	rc = o.mode == MODE_ECHO ? run_echo() : run_idle();
	close_all();
	if (closed_early)
		fprintf(stderr, "ws_load: closed_early=%ld\n", closed_early);
	free_all();
	return rc;
}
