/* SPDX-License-Identifier: MIT */
/*
 * check_websocket.c - WebSocket connections (runtime_ws.h) end to end:
 * the server's handshake and its refusals (400, 426), echoes of whole
 * and fragmented messages with pings between, every breach a peer can
 * make failing with its close code (1002, 1007, 1009: a 2^62 length
 * included), the close handshake both ways, a drain's 1001, a peer that
 * never reads, a silent peer given up on, and the library's client
 * against its server.
 *
 * One runtime serves on port 0 from its own thread. The raw clients are
 * the test's thread with blocking sockets, writing frames by hand (masked,
 * as a client must) and reading the server's; the library's client runs
 * in a runtime of its own.
 */
#include "testutil.h"

#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <runtime_ws.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#define MESSAGE_MAX (64 * 1024) /* /echo's */

static struct runtime *rt;
static struct runtime_http_server *srv;
static pthread_t runner;
static uint16_t port;
static _Atomic int recv_rc, close_code, send_rc; /* what the handlers saw */
static char close_reason[128];
static bool plain_recv; /* the next server's connections: no stream */
static uint64_t release_after; /* the next server's release_after_ns */

/* ------------------------------------------------------------ handlers */

static const char *const ours[] = { "b", "a", NULL };

/* /echo: each message back; then what its last recv said. */
static void echo(struct runtime_ws *ws)
{
	struct runtime_ws_message m;
	struct runtime_http_slice why;
	int type;

	while ((type = runtime_ws_recv(ws, &m)) > 0)
		if (runtime_ws_send(ws, type, m.data, m.len) < 0)
			break;
	int code = runtime_ws_close_code(ws, &why);
	snprintf(close_reason, sizeof(close_reason), "%.*s", (int)why.len, why.p);
	atomic_store(&close_code, code);
	atomic_store(&recv_rc, type);
}

/* /push: 1 MiB messages to a peer that never reads, until one fails. */
static void push(struct runtime_ws *ws)
{
	static char mib[1 << 20];
	int rc;

	while ((rc = runtime_ws_send(ws, RUNTIME_WS_BINARY, mib, sizeof(mib))) == 0)
		;
	atomic_store(&send_rc, rc);
}

/* /quiet: a receiver that pings a silent peer. */
static void quiet(struct runtime_ws *ws)
{
	struct runtime_ws_message m;

	atomic_store(&recv_rc, runtime_ws_recv(ws, &m));
}

/* /parts: each message received in pieces and sent back in parts as
 * they come; the pieces counted, the largest kept. */
static _Atomic int pieces, piece_max, recv_busy;

static void parts(struct runtime_ws *ws)
{
	struct runtime_ws_message m;
	int type, last;

	while ((type = runtime_ws_recv_part(ws, &m, &last)) > 0) {
		atomic_fetch_add(&pieces, 1);
		if ((int)m.len > atomic_load(&piece_max))
			atomic_store(&piece_max, (int)m.len);
		if (!last)
			atomic_store(&recv_busy, runtime_ws_recv(ws, &m));
		if (runtime_ws_send_part(ws, type, m.data, m.len, last) < 0)
			break;
	}
	atomic_store(&close_code, runtime_ws_close_code(ws, NULL));
	atomic_store(&recv_rc, type);
}

/* /served...: runtime_ws_serve's echo, its end recorded as /echo's; a
 * message "bye" closes from fn (4002). */
static void served_echo(struct runtime_ws *ws, int rc, const struct runtime_ws_message *m,
                        void *arg)
{
	struct runtime_http_slice why;
	(void)arg;

	if (rc > 0 && m->len == 3 && !memcmp(m->data, "bye", 3)) {
		runtime_ws_close(ws, 4002, "bye");
	} else if (rc > 0) {
		runtime_ws_send(ws, rc, m->data, m->len);
	} else {
		int code = runtime_ws_close_code(ws, &why);
		snprintf(close_reason, sizeof(close_reason), "%.*s", (int)why.len, why.p);
		atomic_store(&close_code, code);
		atomic_store(&recv_rc, rc);
	}
}

/* /served-push's: another fiber sends 1 MiB messages until one fails
 * (a peer that never reads: it blocks in a write, holding ws's mutex). */
static void pusher(void *arg)
{
	static char mib[1 << 20];
	int rc;

	while ((rc = runtime_ws_send(arg, RUNTIME_WS_BINARY, mib, sizeof(mib))) == 0)
		;
	atomic_store(&send_rc, rc);
}

/* /served-kick's: another fiber closes the WebSocket while it waits. */
static void kicker(void *arg)
{
	runtime_sleep(200 * MS);
	runtime_ws_close(arg, 4001, "kicked");
}

static bool path_is(const struct runtime_http_request *req, const char *p)
{
	struct runtime_http_slice path = runtime_http_path(req);

	return path.len == strlen(p) && !memcmp(path.p, p, path.len);
}

/* The /served paths: 0, or -1 if it is none of them. */
static int served(struct runtime_http_request *req, struct runtime_http_response *res)
{
	struct runtime_ws_config cfg = { .message_max = MESSAGE_MAX, .deflate = 1 };
	struct runtime_ws *ws;

	if (path_is(req, "/served-quiet")) {
		cfg.ping_interval_ns = 300 * MS;
		cfg.pong_timeout_ns = 3000 * MS;
	} else if (path_is(req, "/served-kick")) {
		cfg.close_timeout_ns = 300 * MS;
	} else if (!path_is(req, "/served") && !path_is(req, "/served-push")) {
		return -1;
	}
	if (runtime_ws_accept(req, res, &cfg, &ws) < 0)
		return 0;
	ck_assert_int_eq(runtime_ws_serve(ws, served_echo, NULL), 0);
	ck_assert_int_eq(runtime_ws_serve(ws, served_echo, NULL), -EBUSY);
	struct runtime_ws_message m;
	ck_assert_int_eq(runtime_ws_recv(ws, &m), -EBUSY);
	if (path_is(req, "/served-kick"))
		ck_assert_int_eq(runtime_spawn(rt, kicker, ws), 0);
	if (path_is(req, "/served-push"))
		ck_assert_int_eq(runtime_spawn(rt, pusher, ws), 0);
	return 0;
}

static int handler(struct runtime_http_request *req, struct runtime_http_response *res, void *arg)
{
	if (served(req, res) == 0)
		return 0;

	struct runtime_http_slice path = runtime_http_path(req);
	struct runtime_ws_config cfg = { .subprotocols = ours, .message_max = MESSAGE_MAX, .deflate = 1 };
	struct runtime_ws *ws;
	(void)arg;

	if (path.len == 6 && !memcmp(path.p, "/quiet", 6)) {
		cfg.ping_interval_ns = 300 * MS;
		cfg.pong_timeout_ns = 3000 * MS; /* a loaded machine's client answers */
	}
	if (path.len == 5 && !memcmp(path.p, "/push", 5))
		cfg.write_timeout_ns = 300 * MS;
	if (path.len == 4 && !memcmp(path.p, "/big", 4))
		cfg.message_max = 8 << 20;
	if (path_is(req, "/parts"))
		cfg.message_max = 1 << 20; /* pieces, but the whole still bounded */
	int rc = runtime_ws_accept(req, res, &cfg, &ws);
	if (rc < 0) {
		atomic_store(&recv_rc, rc);
		return 0;
	}
	if (path.len == 5 && !memcmp(path.p, "/push", 5))
		push(ws);
	else if (path_is(req, "/parts"))
		parts(ws);
	else if (path.len == 6 && !memcmp(path.p, "/quiet", 6))
		quiet(ws);
	else
		echo(ws);
	runtime_ws_close(ws, RUNTIME_WS_NORMAL, NULL);
	return 0;
}

static void *run(void *arg)
{
	struct runtime_http_server_config cfg;
	sem_t *ready = arg;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	runtime_http_server_config_init(&cfg);
	cfg.serve.host = "127.0.0.1";
	cfg.handler = handler;
	cfg.serve.plain_recv = plain_recv;
	cfg.release_after_ns = release_after;
	ck_assert_int_eq(runtime_http_serve(rt, &cfg, &srv), 0);
	port = runtime_http_server_port(srv);
	sem_post(ready);
	runtime_run(rt);
	return NULL;
}

static void serve_start(void)
{
	sem_t ready;

	atomic_store(&recv_rc, 99);
	atomic_store(&close_code, -1);
	atomic_store(&send_rc, 99);
	sem_init(&ready, 0, 0);
	ck_assert_int_eq(pthread_create(&runner, NULL, run, &ready), 0);
	sem_wait(&ready);
	sem_destroy(&ready);
}

static void serve_stop(void)
{
	runtime_shutdown(rt);
	pthread_join(runner, NULL);
	runtime_http_server_destroy(srv);
	runtime_destroy(rt);
}

/* Until *v is no longer was (bounded: 10 s, for a loaded machine). */
static int wait_change(_Atomic int *v, int was)
{
	for (int i = 0; i < 1000 && atomic_load(v) == was; i++)
		usleep(10 * 1000);
	return atomic_load(v);
}

/* ---------------------------------------------------------- raw client */

static int dial(void)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Exactly n bytes, or false at the end or after 10 s. */
static bool recv_n(int fd, void *buf, size_t n)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	for (size_t got = 0; got < n;) {
		if (poll(&p, 1, 10000) != 1)
			return false;
		ssize_t k = recv(fd, (char *)buf + got, n - got, 0);
		if (k <= 0)
			return false;
		got += (size_t)k;
	}
	return true;
}

/* The answer's head (up to its blank line), NUL-terminated. */
static void head_in(int fd, char *h, size_t cap)
{
	size_t n = 0;

	while (n < cap - 1 && (n < 4 || memcmp(h + n - 4, "\r\n\r\n", 4)))
		ck_assert(recv_n(fd, h + n++, 1));
	h[n] = '\0';
}

static const char key_rfc[] = "dGhlIHNhbXBsZSBub25jZQ=="; /* RFC 6455 1.3 */

/* A connection to path after a good handshake (101 checked), with the
 * fields more (extension offers), the answer's head in h. */
static int opened_with(const char *path, const char *more, char *h, size_t cap)
{
	char req[768];
	int fd = dial();

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
	         "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s\r\n",
	         path, key_rfc, more);
	send_all(fd, req, strlen(req));
	head_in(fd, h, cap);
	ck_assert_msg(!strncmp(h, "HTTP/1.1 101 ", 13), "%s", h);
	return fd;
}

static int opened(const char *path)
{
	char h[1024];

	return opened_with(path, "", h, sizeof(h));
}

/* A frame as a client sends it: masked, any head bits (b0: FIN, RSV,
 * opcode), len claimed (the payload sent may be shorter). */
static void frame_out(int fd, uint8_t b0, uint64_t len, const void *payload, size_t n)
{
	static const uint8_t mask[4] = { 0x37, 0xfa, 0x21, 0x3d };
	uint8_t *f = malloc(14 + n);
	size_t h = 0;

	f[h++] = b0;
	if (len < 126) {
		f[h++] = (uint8_t)(0x80 | len);
	} else if (len < 65536) {
		f[h++] = 0x80 | 126;
		f[h++] = (uint8_t)(len >> 8);
		f[h++] = (uint8_t)len;
	} else {
		f[h++] = 0x80 | 127;
		for (int i = 7; i >= 0; i--)
			f[h++] = (uint8_t)(len >> (8 * i));
	}
	memcpy(f + h, mask, 4);
	for (size_t i = 0; i < n; i++)
		f[h + 4 + i] = ((const uint8_t *)payload)[i] ^ mask[i % 4];
	send_all(fd, f, h + 4 + n);
	free(f);
}

/* The server's next frame: its opcode (FIN set and no mask asserted),
 * payload into p (cap bytes at least), its length in *n. */
static int frame_in(int fd, void *p, size_t cap, size_t *n)
{
	uint8_t h[10];

	ck_assert(recv_n(fd, h, 2));
	ck_assert_int_eq(h[1] & 0x80, 0); /* a server never masks */
	uint64_t len = h[1] & 0x7f;
	size_t ext = len == 126 ? 2 : len == 127 ? 8 : 0;
	ck_assert(recv_n(fd, h + 2, ext));
	if (ext)
		len = 0;
	for (size_t i = 0; i < ext; i++)
		len = len << 8 | h[2 + i];
	ck_assert_uint_le(len, cap);
	ck_assert(recv_n(fd, p, (size_t)len));
	*n = (size_t)len;
	return h[0];
}

/* The server's close frame: its code (1005 for none); then its end. */
static int close_in(int fd)
{
	uint8_t p[125], b;
	size_t n;

	ck_assert_int_eq(frame_in(fd, p, sizeof(p), &n), 0x88);
	ck_assert(!recv_n(fd, &b, 1)); /* then it closes */
	return n >= 2 ? p[0] << 8 | p[1] : 1005;
}

/* ----------------------------------------------------------- handshake */

/* The RFC's own example key gets the RFC's answer; the server's first
 * subprotocol the client offers is chosen; bad handshakes get 400, a
 * version other than 13 gets 426 naming 13, and no WebSocket begins. */
START_TEST(test_ws_handshake_answers_and_refusals)
{
	static const struct {
		const char *fields, *want;
	} cases[] = {
		{ "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
		  "Sec-WebSocket-Protocol: x, a\r\nSec-WebSocket-Protocol: b\r\n",
		  "HTTP/1.1 101 " },
		{ "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n",
		  "HTTP/1.1 426 " },
		{ "Sec-WebSocket-Version: 13\r\n", "HTTP/1.1 400 " },
		{ "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=\r\nSec-WebSocket-Version: 13\r\n",
		  "HTTP/1.1 400 " },
		{ "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub2*jZQ==\r\nSec-WebSocket-Version: 13\r\n",
		  "HTTP/1.1 400 " },
	};
	char req[512], h[1024];

	serve_start();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int fd = dial();
		snprintf(req, sizeof(req), "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
		         "Connection: keep-alive, Upgrade\r\n%s\r\n", cases[i].fields);
		send_all(fd, req, strlen(req));
		head_in(fd, h, sizeof(h));
		ck_assert_msg(!strncmp(h, cases[i].want, 13), "%zu: %s", i, h);
		if (i == 0) {
			ck_assert_msg(strstr(h, "\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"), "%s", h);
			ck_assert_msg(strstr(h, "\r\nSec-WebSocket-Protocol: b\r\n"), "%s", h);
			ck_assert_msg(!strstr(h, "Sec-WebSocket-Extensions"), "%s", h);
		}
		if (i == 1)
			ck_assert_msg(strstr(h, "\r\nSec-WebSocket-Version: 13\r\n"), "%s", h);
		close(fd);
	}
	const char *post = "POST /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
	                   "Content-Length: 0\r\n\r\n";
	int fd = dial();
	send_all(fd, post, strlen(post));
	head_in(fd, h, sizeof(h));
	ck_assert_msg(!strncmp(h, "HTTP/1.1 400 ", 13), "%s", h);
	close(fd);
	serve_stop();
}
END_TEST

/* ------------------------------------------------------------ messages */

/* Whole messages come back as they went, at the length boundaries; a
 * text in three fragments, with a ping between them and a two-byte
 * character split across two, comes back whole after the pong. */
START_TEST(test_ws_echo_fragments_and_pings)
{
	static const size_t lens[] = { 0, 1, 125, 126, 127, 65535, 65536 };
	char *buf = malloc(MESSAGE_MAX), *back = malloc(MESSAGE_MAX);
	size_t n;

	serve_start();
	int fd = opened("/echo");
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (size_t k = 0; k < lens[i]; k++)
			buf[k] = (char)(k * 31 + i);
		frame_out(fd, 0x82, lens[i], buf, lens[i]);
		ck_assert_int_eq(frame_in(fd, back, MESSAGE_MAX, &n), 0x82);
		ck_assert_uint_eq(n, lens[i]);
		ck_assert(!memcmp(buf, back, n));
	}
	frame_out(fd, 0x01, 4, "caf\xc3", 4);   /* text, not FIN, é cut */
	frame_out(fd, 0x89, 2, "hi", 2);        /* a ping between */
	frame_out(fd, 0x00, 3, "\xa9 e", 3);    /* continuation */
	frame_out(fd, 0x80, 2, "!!", 2);        /* the last */
	ck_assert_int_eq(frame_in(fd, back, MESSAGE_MAX, &n), 0x8A);
	ck_assert_uint_eq(n, 2);
	ck_assert(!memcmp(back, "hi", 2));
	ck_assert_int_eq(frame_in(fd, back, MESSAGE_MAX, &n), 0x81);
	ck_assert_uint_eq(n, 9);
	ck_assert(!memcmp(back, "caf\xc3\xa9 e!!", 9));
	frame_out(fd, 0x88, 5, "\x03\xe8" "bye", 5); /* close 1000 "bye" */
	ck_assert_int_eq(close_in(fd), 1000);
	ck_assert_int_eq(wait_change(&recv_rc, 99), 0);
	ck_assert_int_eq(atomic_load(&close_code), 1000);
	ck_assert_str_eq(close_reason, "bye");
	close(fd);
	serve_stop();
	free(buf);
	free(back);
}
END_TEST

/* Each breach fails the connection with its code: the close goes out,
 * the TCP connection ends, recv says why. */
START_TEST(test_ws_breaches_fail_with_their_codes)
{
	static const struct {
		uint8_t b0;
		uint64_t len;
		const char *payload;
		size_t n;
		int code, rc;
	} cases[] = {
		{ 0x83, 0, "", 0, 1002, -EPROTO },            /* opcode 3: reserved */
		{ 0xC2, 0, "", 0, 1002, -EPROTO },            /* RSV1 with no extension */
		{ 0x00, 1, "x", 1, 1002, -EPROTO },           /* continuation, no message */
		{ 0x09, 0, "", 0, 1002, -EPROTO },            /* a ping in pieces */
		{ 0x89, 126, "", 0, 1002, -EPROTO },          /* a ping over 125 */
		{ 0x88, 1, "\x03", 1, 1002, -EPROTO },        /* a close of one byte */
		{ 0x88, 2, "\x03\xed", 2, 1002, -EPROTO },    /* close code 1005 */
		{ 0x88, 2, "\x03\xf7", 2, 1002, -EPROTO },    /* close code 1015 */
		{ 0x81, 2, "\xc3\x28", 2, 1007, -EILSEQ },    /* text not UTF-8 */
		{ 0x81, 3, "\xed\xa0\x80", 3, 1007, -EILSEQ },/* a surrogate */
		{ 0x81, 1, "\xc3", 1, 1007, -EILSEQ },        /* text cut in a character */
		{ 0x88, 4, "\x03\xe8\xff\xfe", 4, 1007, -EILSEQ }, /* a close's reason */
		{ 0x82, 1ull << 62, "", 0, 1009, -EMSGSIZE }, /* 2^62 bytes claimed */
		{ 0x82, MESSAGE_MAX + 1, "", 0, 1009, -EMSGSIZE },
	};
	serve_start();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		atomic_store(&recv_rc, 99);
		int fd = opened("/echo");
		frame_out(fd, cases[i].b0, cases[i].len, cases[i].payload, cases[i].n);
		ck_assert_msg(close_in(fd) == cases[i].code, "case %zu", i);
		ck_assert_msg(wait_change(&recv_rc, 99) == cases[i].rc, "case %zu: %d", i,
		              atomic_load(&recv_rc));
		close(fd);
	}
	int fd = dial(); /* an unmasked frame: the client's must be masked */
	const char *req = "GET /echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
	                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
	char h[512];
	send_all(fd, req, strlen(req));
	head_in(fd, h, sizeof(h));
	send_all(fd, "\x82\x01x", 3);
	ck_assert_int_eq(close_in(fd), 1002);
	close(fd);
	serve_stop();
}
END_TEST

/* The heap in use: the sanitizer's count, or malloc's with every block
 * over 64 KiB its own mapping (main sets the threshold), so that one
 * freed shows whatever thread freed it. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
size_t __sanitizer_get_current_allocated_bytes(void);
static size_t heap_in_use(void)
{
	return __sanitizer_get_current_allocated_bytes();
}
#else
static size_t heap_in_use(void)
{
	struct mallinfo2 m = mallinfo2();
	return m.uordblks + m.hblkhd;
}
#endif

/* A 4 MiB message's buffer is given back before the next message: the
 * connection does not keep what its largest message cost. */
START_TEST(test_ws_a_big_message_is_not_kept)
{
	size_t n, big = 4 << 20;
	char *buf = calloc(1, big), *back = malloc(big);

	mallopt(M_MMAP_THRESHOLD, 64 * 1024);
	serve_start();
	int fd = opened("/big");
	frame_out(fd, 0x82, 5, "small", 5);
	ck_assert_int_eq(frame_in(fd, back, big, &n), 0x82);
	size_t before = heap_in_use();
	frame_out(fd, 0x82, big, buf, big);
	ck_assert_int_eq(frame_in(fd, back, big, &n), 0x82);
	ck_assert_uint_eq(n, big);
	frame_out(fd, 0x82, 5, "small", 5);
	ck_assert_int_eq(frame_in(fd, back, big, &n), 0x82);
	size_t after = heap_in_use();
	ck_assert_msg(after < before + (1 << 20), "%zu -> %zu", before, after);
	close(fd);
	serve_stop();
	free(buf);
	free(back);
}
END_TEST

/* ------------------------------------------------- permessage-deflate */

/* in[0..n) as permessage-deflate sends it: raw deflate, sync-flushed,
 * its last four bytes cut. The length into *out_len. */
static uint8_t *deflated(const void *in, size_t n, size_t *out_len)
{
	z_stream z = { 0 };
	size_t cap = n + n / 100 + 64;
	uint8_t *out = malloc(cap);

	ck_assert_int_eq(deflateInit2(&z, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	ck_assert_int_eq(deflate(&z, Z_SYNC_FLUSH), Z_OK);
	*out_len = cap - z.avail_out - 4;
	deflateEnd(&z);
	return out;
}

static size_t inflated(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
	z_stream z = { 0 };
	uint8_t *all = malloc(n + 4);

	memcpy(all, in, n);
	memcpy(all + n, "\x00\x00\xff\xff", 4);
	ck_assert_int_eq(inflateInit2(&z, -15), Z_OK);
	z.next_in = all;
	z.avail_in = (uInt)(n + 4);
	z.next_out = out;
	z.avail_out = (uInt)cap;
	ck_assert_int_ge(inflate(&z, Z_SYNC_FLUSH), Z_OK);
	inflateEnd(&z);
	free(all);
	return cap - z.avail_out;
}

/* The offers a server takes (the first acceptable; a window asked for is
 * answered) and those it declines (unknown or repeated parameters, a
 * window of 8, bad values): the answer always keeps no context. */
START_TEST(test_ws_deflate_offers)
{
	static const struct {
		const char *offer, *answer;
	} cases[] = {
		{ "permessage-deflate", "permessage-deflate; server_no_context_takeover; client_no_context_takeover" },
		{ "x-webkit-deflate-frame, permessage-deflate; client_max_window_bits",
		  "permessage-deflate; server_no_context_takeover; client_no_context_takeover" },
		{ "permessage-deflate; server_max_window_bits=\"10\"",
		  "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10" },
		{ "permessage-deflate; server_max_window_bits=8", NULL },
		{ "permessage-deflate; server_max_window_bits=16", NULL },
		{ "permessage-deflate; server_max_window_bits", NULL },
		{ "permessage-deflate; foo", NULL },
		{ "permessage-deflate; client_no_context_takeover; client_no_context_takeover", NULL },
		{ "permessage-deflate; server_no_context_takeover=1", NULL },
	};
	char more[256], h[1024], want[256];

	serve_start();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(more, sizeof(more), "Sec-WebSocket-Extensions: %s\r\n", cases[i].offer);
		int fd = opened_with("/echo", more, h, sizeof(h));
		if (cases[i].answer) {
			snprintf(want, sizeof(want), "\r\nSec-WebSocket-Extensions: %s\r\n", cases[i].answer);
			ck_assert_msg(strstr(h, want), "%zu: %s", i, h);
		} else {
			ck_assert_msg(!strstr(h, "Sec-WebSocket-Extensions"), "%zu: %s", i, h);
		}
		close(fd);
	}
	serve_stop();
}
END_TEST

/* A compressed message in, compressed at the server's end too (RSV1),
 * both ways whole; a small one comes back plain; a deflate bomb - 16 MiB
 * of zeros in some 16 KB - fails with 1009 once its output passes
 * message_max, and an RSV1 on a continuation with 1002. */
START_TEST(test_ws_deflate_messages_and_a_bomb)
{
	size_t n, zn, text_len = 50000;
	char *text = malloc(text_len), h[1024];
	uint8_t *back = malloc(MESSAGE_MAX), *plain = malloc(MESSAGE_MAX);
	const char *offer = "Sec-WebSocket-Extensions: permessage-deflate\r\n";

	for (size_t i = 0; i < text_len; i++)
		text[i] = "a websocket message "[i % 20];
	serve_start();
	int fd = opened_with("/echo", offer, h, sizeof(h));
	uint8_t *z = deflated(text, text_len, &zn);
	frame_out(fd, 0xC1, zn, z, zn);
	ck_assert_int_eq(frame_in(fd, back, MESSAGE_MAX, &n), 0xC1); /* RSV1: compressed */
	ck_assert_uint_lt(n, text_len / 10);
	ck_assert_uint_eq(inflated(back, n, plain, MESSAGE_MAX), text_len);
	ck_assert(!memcmp(plain, text, text_len));
	frame_out(fd, 0x81, 5, "small", 5);
	ck_assert_int_eq(frame_in(fd, back, MESSAGE_MAX, &n), 0x81); /* plain */
	free(z);
	char *zeros = calloc(1, 16 << 20);
	z = deflated(zeros, 16 << 20, &zn);
	ck_assert_uint_lt(zn, MESSAGE_MAX);
	atomic_store(&recv_rc, 99);
	frame_out(fd, 0xC2, zn, z, zn);
	ck_assert_int_eq(close_in(fd), 1009);
	ck_assert_int_eq(wait_change(&recv_rc, 99), -EMSGSIZE);
	close(fd);
	fd = opened_with("/echo", offer, h, sizeof(h));
	frame_out(fd, 0x41, 2, "\x02\x00", 2);   /* compressed, not FIN */
	frame_out(fd, 0xC0, 2, "\x02\x00", 2);   /* RSV1 on a continuation */
	ck_assert_int_eq(close_in(fd), 1002);
	close(fd);
	serve_stop();
	free(zeros);
	free(z);
	free(text);
	free(back);
	free(plain);
}
END_TEST

/* --------------------------------------------------- close, drain, peers */

/* A drain closes a WebSocket waiting for its next message with 1001, and
 * the run ends once the client answers the close. */
START_TEST(test_ws_drain_closes_with_1001)
{
	uint8_t p[125], b;
	size_t n;

	serve_start();
	int fd = opened("/echo");
	frame_out(fd, 0x81, 2, "hi", 2);
	ck_assert_int_eq(frame_in(fd, p, sizeof(p), &n), 0x81);
	ck_assert_int_eq(runtime_drain(rt, 5000 * MS), 0);
	ck_assert_int_eq(frame_in(fd, p, sizeof(p), &n), 0x88);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(p[0] << 8 | p[1], 1001);
	frame_out(fd, 0x88, 2, "\x03\xe9", 2); /* the client's answer */
	ck_assert(!recv_n(fd, &b, 1));
	ck_assert_int_eq(wait_change(&recv_rc, 99), 0);
	ck_assert_int_eq(atomic_load(&close_code), 1001);
	close(fd);
	pthread_join(runner, NULL); /* the run ends with its last connection */
	runtime_http_server_destroy(srv);
	runtime_destroy(rt);
}
END_TEST

/* A client that never reads: the server's sends fill the sockets, then
 * one times out (write_timeout_ns) - the server holds nothing more. */
START_TEST(test_ws_peer_that_never_reads)
{
	serve_start();
	int fd = opened("/push");
	ck_assert_int_eq(wait_change(&send_rc, 99), -ETIMEDOUT);
	close(fd);
	serve_stop();
}
END_TEST

/* path's WebSocket pings a silent peer, is answered once, pings again,
 * and gives up when no pong comes (its receiver: -ETIMEDOUT). */
static void pinged_then_given_up(const char *path)
{
	uint8_t p[125];
	size_t n;
	int fd = opened(path);

	ck_assert_int_eq(frame_in(fd, p, sizeof(p), &n), 0x89); /* answered */
	frame_out(fd, 0x8A, n, p, n);
	ck_assert_int_eq(frame_in(fd, p, sizeof(p), &n), 0x89); /* not */
	ck_assert_int_eq(wait_change(&recv_rc, 99), -ETIMEDOUT);
	close(fd);
}

/* A silent peer is pinged after the interval, and given up on when no
 * pong comes (recv: -ETIMEDOUT); one that answers is kept. */
START_TEST(test_ws_keepalive_gives_up_on_a_silent_peer)
{
	serve_start();
	pinged_then_given_up("/quiet");
	serve_stop();
}
END_TEST

/* --------------------------------------------------------- the client */

struct client_run {
	char url[64];
	int deflate;
	int rc[9];
	char protocol[8];
	int code;
};

static void client_main(void *arg)
{
	static const char *const offer[] = { "a", "c", NULL };
	struct client_run *r = arg;
	const struct runtime_ws_config cfg = { .subprotocols = offer, .deflate = r->deflate };
	struct runtime_http_client *cl;
	struct runtime_ws_message m;
	struct runtime_ws *ws;

	ck_assert_int_eq(runtime_http_client_create(&cl, NULL), 0);
	r->rc[0] = runtime_ws_connect(cl, r->url, &cfg, &ws);
	if (r->rc[0] == 0) {
		snprintf(r->protocol, sizeof(r->protocol), "%s", runtime_ws_subprotocol(ws));
		r->rc[1] = runtime_ws_send(ws, RUNTIME_WS_TEXT, "hello", 5);
		r->rc[2] = runtime_ws_recv(ws, &m);
		r->rc[3] = m.len == 5 && !memcmp(m.data, "hello", 5);
		r->rc[4] = runtime_ws_send_part(ws, RUNTIME_WS_BINARY, "ab", 2, 0) |
		           runtime_ws_send_part(ws, 0, "cd", 2, 0) |
		           runtime_ws_send_part(ws, 0, "e", 1, 1);
		r->rc[5] = runtime_ws_recv(ws, &m);
		r->rc[6] = m.len == 5 && !memcmp(m.data, "abcde", 5);
		static char big[20000]; /* compressed both ways with deflate */
		memset(big, 'z', sizeof(big));
		r->rc[8] = runtime_ws_send(ws, RUNTIME_WS_TEXT, big, sizeof(big)) == 0 &&
		           runtime_ws_recv(ws, &m) == RUNTIME_WS_TEXT && m.len == sizeof(big) &&
		           !memcmp(m.data, big, sizeof(big));
		r->rc[7] = runtime_ws_close(ws, 4000, "done");
	}
	runtime_http_client_destroy(cl);
}

/* The library's client against its server: the subprotocol both know,
 * a text, a binary sent in parts, the close with a code of one's own. */
START_TEST(test_ws_client_to_server)
{
	struct client_run r = { .rc = { 99 } };

	serve_start();
	snprintf(r.url, sizeof(r.url), "ws://127.0.0.1:%u/echo", port);
	ck_assert_int_eq(run_fiber(NULL, client_main, &r), 0);
	ck_assert_int_eq(r.rc[0], 0);
	ck_assert_str_eq(r.protocol, "a");
	ck_assert_int_eq(r.rc[1], 0);
	ck_assert_int_eq(r.rc[2], RUNTIME_WS_TEXT);
	ck_assert_int_eq(r.rc[3], 1);
	ck_assert_int_eq(r.rc[4], 0);
	ck_assert_int_eq(r.rc[5], RUNTIME_WS_BINARY);
	ck_assert_int_eq(r.rc[6], 1);
	ck_assert_int_eq(r.rc[7], 0);
	ck_assert_int_eq(r.rc[8], 1);
	ck_assert_int_eq(wait_change(&recv_rc, 99), 0);
	ck_assert_int_eq(atomic_load(&close_code), 4000);
	ck_assert_str_eq(close_reason, "done");
	r = (struct client_run){ .rc = { 99 }, .deflate = 1 }; /* the same, compressed */
	atomic_store(&recv_rc, 99);
	snprintf(r.url, sizeof(r.url), "ws://127.0.0.1:%u/echo", port);
	ck_assert_int_eq(run_fiber(NULL, client_main, &r), 0);
	static const int want[9] = { 0, 0, RUNTIME_WS_TEXT, 1, 0, RUNTIME_WS_BINARY, 1, 0, 1 };
	for (int i = 0; i < 9; i++)
		ck_assert_int_eq(r.rc[i], want[i]);
	ck_assert_int_eq(wait_change(&recv_rc, 99), 0);
	snprintf(r.url, sizeof(r.url), "ftp://127.0.0.1:%u/echo", port);
	ck_assert_int_eq(run_fiber(NULL, client_main, &r), 0);
	ck_assert_int_eq(r.rc[0], -EPROTONOSUPPORT);
	serve_stop();
}
END_TEST

/* A frame of the server's, whatever its FIN (parts' echo): opcode byte
 * and payload appended at p + *n. */
static int frame_in_any(int fd, uint8_t *p, size_t cap, size_t *n)
{
	uint8_t h[10];

	ck_assert(recv_n(fd, h, 2));
	uint64_t len = h[1] & 0x7f;
	size_t ext = len == 126 ? 2 : len == 127 ? 8 : 0;
	ck_assert(recv_n(fd, h + 2, ext));
	if (ext)
		len = 0;
	for (size_t i = 0; i < ext; i++)
		len = len << 8 | h[2 + i];
	ck_assert_uint_le(*n + len, cap);
	ck_assert(recv_n(fd, p + *n, (size_t)len));
	*n += (size_t)len;
	return h[0];
}

/* The server's echo of one message, in as many frames as it sends. */
static int message_in_parts(int fd, uint8_t *p, size_t cap, size_t *n)
{
	int b0, first = -1;

	*n = 0;
	do {
		b0 = frame_in_any(fd, p, cap, n);
		if (first < 0)
			first = b0 & 0x0f;
	} while (!(b0 & 0x80));
	return first;
}

/* A 4 MiB message in 65,536 fragments of 64 bytes is echoed whole in
 * time: the message's buffer grows by doubling, not by each fragment's
 * few bytes - which copied the message per fragment (quadratic: some
 * 137 GB of copies). It shows where realloc copies: under ASan, whose
 * run fails without the fix (glibc mostly grows the top chunk in place,
 * so the plain build's run passes either way). Found by
 * tests/ws_conformance.py under ASan. */
START_TEST(test_ws_small_fragments_cost_no_copy_each)
{
	enum { FRAG = 64, FRAGS = 65536, FRAME = 2 + 4 + FRAG };
	static const uint8_t mask[4] = { 0x37, 0xfa, 0x21, 0x3d };
	uint8_t *wire = malloc((size_t)FRAGS * FRAME), *back = malloc((size_t)FRAG * FRAGS);
	size_t n;

	for (size_t i = 0; i < FRAGS; i++) {
		uint8_t *f = wire + i * FRAME;
		f[0] = (uint8_t)((i == 0 ? 0x02 : 0x00) | (i == FRAGS - 1 ? 0x80 : 0));
		f[1] = 0x80 | FRAG;
		memcpy(f + 2, mask, 4);
		for (size_t k = 0; k < FRAG; k++)
			f[6 + k] = (uint8_t)(i + k) ^ mask[k % 4];
	}
	serve_start();
	int fd = opened("/big");
	send_all(fd, wire, (size_t)FRAGS * FRAME);
	ck_assert_int_eq(frame_in(fd, back, (size_t)FRAG * FRAGS, &n), 0x82);
	ck_assert_uint_eq(n, (size_t)FRAG * FRAGS);
	for (size_t i = 0; i < FRAGS; i++)
		ck_assert_uint_eq(back[i * FRAG + 7], (uint8_t)(i + 7));
	close(fd);
	serve_stop();
	free(wire);
	free(back);
}
END_TEST

/* The library's client, deflate agreed, through /parts: a compressed
 * message the server takes in pieces and sends back in parts. */
static void parts_client(void *arg)
{
	static char text[300000];
	const struct runtime_ws_config cfg = { .deflate = 1 };
	struct runtime_http_client *cl;
	struct runtime_ws_message m;
	struct runtime_ws *ws;
	char url[64];
	int *ok = arg;

	uint32_t x = 1;
	for (size_t i = 0; i < sizeof(text); i++) { /* letters at random: */
		x = x * 1103515245 + 12345; /* compressed, still many chunks */
		text[i] = (char)('a' + (x >> 16) % 26);
	}
	snprintf(url, sizeof(url), "ws://127.0.0.1:%u/parts", port);
	ck_assert_int_eq(runtime_http_client_create(&cl, NULL), 0);
	ck_assert_int_eq(runtime_ws_connect(cl, url, &cfg, &ws), 0);
	ck_assert_int_eq(runtime_ws_send(ws, RUNTIME_WS_TEXT, text, sizeof(text)), 0);
	*ok = runtime_ws_recv(ws, &m) == RUNTIME_WS_TEXT && m.len == sizeof(text) &&
	      !memcmp(m.data, text, sizeof(text));
	runtime_ws_close(ws, RUNTIME_WS_NORMAL, NULL);
	runtime_http_client_destroy(cl);
}

/* A message received in pieces (runtime_ws_recv_part): a large frame in
 * pieces of at most 16 KiB, an empty continuation skipped, text split
 * inside a character across frames; whole receives refused while pieces
 * are under way; text that turns out not UTF-8 fails with 1007 midway;
 * a compressed message in pieces, sent back in compressed parts. */
START_TEST(test_ws_recv_in_pieces)
{
	static uint8_t big[100000], back[sizeof(big)];
	size_t n;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 13);
	serve_start();
	int fd = opened("/parts");
	frame_out(fd, 0x02, 40000, big, 40000);
	frame_out(fd, 0x00, 0, NULL, 0);
	frame_out(fd, 0x80, 60000, big + 40000, 60000);
	ck_assert_int_eq(message_in_parts(fd, back, sizeof(back), &n), 0x2);
	ck_assert(n == sizeof(big) && !memcmp(back, big, n));
	ck_assert_int_ge(atomic_load(&pieces), 7); /* 40000 and 60000 by 16383 */
	ck_assert_int_le(atomic_load(&piece_max), 16383);
	ck_assert_int_eq(atomic_load(&recv_busy), -EALREADY);
	frame_out(fd, 0x01, 2, "a\xe2", 2); /* U+20AC split over frames */
	frame_out(fd, 0x80, 3, "\x82\xac" "b", 3);
	ck_assert_int_eq(message_in_parts(fd, back, sizeof(back), &n), 0x1);
	ck_assert(n == 5 && !memcmp(back, "a\xe2\x82\xac" "b", 5));
	frame_out(fd, 0x01, 2, "ok", 2);
	frame_out(fd, 0x80, 2, "\xff!", 2);
	n = 0;
	ck_assert_int_eq(frame_in_any(fd, back, sizeof(back), &n), 0x01); /* "ok" went */
	ck_assert(n == 2 && !memcmp(back, "ok", 2));
	ck_assert_int_eq(close_in(fd), 1007);
	ck_assert_int_eq(wait_change(&recv_rc, 99), -EILSEQ);
	close(fd);
	int ok = 0, before = atomic_load(&pieces);
	ck_assert_int_eq(run_fiber(NULL, parts_client, &ok), 0);
	ck_assert_int_eq(ok, 1);
	ck_assert_int_gt(atomic_load(&pieces) - before, 1);
	serve_stop();
}
END_TEST

/* ------------------------------------------------------ runtime_ws_serve */

/* WebSockets the server's runtime holds waiting with no fiber. */
static uint64_t idle_conns(void)
{
	struct runtime_core_stats st[4];
	unsigned n = runtime_stats(rt, st, 4, NULL);
	uint64_t sum = 0;

	for (unsigned i = 0; i < n; i++)
		sum += st[i].idle_conns;
	return sum;
}

/* Until idle_conns() is want (bounded: 10 s). */
static uint64_t wait_idle(uint64_t want)
{
	for (int i = 0; i < 1000 && idle_conns() != want; i++)
		usleep(10 * 1000);
	return idle_conns();
}

#define SERVED 16

/* Served WebSockets echo, and between messages wait with no fiber (the
 * runtime counts them idle): after the handshake, after each echo, after
 * a ping answered; a message cut over two writes is read whole; a close
 * from fn ends with its code; a client's close reaches fn last. At once
 * (release_after 0), and with a server that releases quiet connections
 * after release_after, once their reads have been quiet that long. */
START_TEST(test_ws_served_waits_with_no_fiber)
{
	uint8_t p[256];
	size_t n;
	int fd[SERVED];

	release_after = _i ? 20 * MS : 0;
	serve_start();
	release_after = 0;
	for (int i = 0; i < SERVED; i++)
		fd[i] = opened("/served");
	ck_assert_uint_eq(wait_idle(SERVED), SERVED);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < SERVED; i++) {
			frame_out(fd[i], 0x81, 5, "hello", 5);
			ck_assert_int_eq(frame_in(fd[i], p, sizeof(p), &n), 0x81);
			ck_assert(n == 5 && !memcmp(p, "hello", 5));
		}
		ck_assert_uint_eq(wait_idle(SERVED), SERVED);
	}
	frame_out(fd[0], 0x89, 2, "pi", 2); /* a ping while it waits */
	ck_assert_int_eq(frame_in(fd[0], p, sizeof(p), &n), 0x8A);
	ck_assert(n == 2 && !memcmp(p, "pi", 2));
	frame_out(fd[1], 0x02, 3, "abc", 3); /* a message in two frames, */
	usleep(50 * 1000);
	frame_out(fd[1], 0x80, 2, "de", 2); /* the second later */
	ck_assert_int_eq(frame_in(fd[1], p, sizeof(p), &n), 0x82);
	ck_assert(n == 5 && !memcmp(p, "abcde", 5));
	ck_assert_uint_eq(wait_idle(SERVED), SERVED);
	frame_out(fd[2], 0x81, 3, "bye", 3); /* fn closes */
	ck_assert_int_eq(frame_in(fd[2], p, sizeof(p), &n), 0x88);
	ck_assert(n == 5 && (p[0] << 8 | p[1]) == 4002 && !memcmp(p + 2, "bye", 3));
	frame_out(fd[2], 0x88, 2, "\x0f\xa2", 2);
	ck_assert_int_eq(wait_change(&recv_rc, 99), 0);
	ck_assert_int_eq(atomic_load(&close_code), 4002);
	atomic_store(&recv_rc, 99);
	frame_out(fd[3], 0x88, 4, "\x0f\xa0ok", 4); /* the client closes */
	ck_assert_int_eq(close_in(fd[3]), 4000);
	ck_assert_int_eq(wait_change(&recv_rc, 99), 0);
	ck_assert_int_eq(atomic_load(&close_code), 4000);
	ck_assert_str_eq(close_reason, "ok");
	for (int i = 0; i < SERVED; i++)
		close(fd[i]);
	ck_assert_uint_eq(wait_idle(0), 0);
	serve_stop();
}
END_TEST

/* A served WebSocket that waits with no fiber still pings a silent peer
 * and gives up on it (fn's last call: -ETIMEDOUT), closes with 1001 on a
 * drain, and is closed by another fiber (4001) and given up on when the
 * peer does not answer within the close timeout - each woken from its
 * wait. */
START_TEST(test_ws_served_drain_keepalive_and_kick)
{
	uint8_t p[125];
	size_t n;

	serve_start();
	pinged_then_given_up("/served-quiet");
	atomic_store(&recv_rc, 99);
	int fd = opened("/served-kick");
	ck_assert_int_eq(frame_in(fd, p, sizeof(p), &n), 0x88);
	ck_assert(n == 8 && (p[0] << 8 | p[1]) == 4001 && !memcmp(p + 2, "kicked", 6));
	ck_assert(!recv_n(fd, p, 1)); /* no answer: given up on, closed */
	ck_assert_int_eq(wait_change(&recv_rc, 99), -ETIMEDOUT);
	ck_assert_int_eq(atomic_load(&close_code), RUNTIME_WS_ABNORMAL);
	close(fd);
	atomic_store(&recv_rc, 99);
	fd = opened("/served");
	ck_assert_uint_eq(wait_idle(1), 1);
	ck_assert_int_eq(runtime_drain(rt, 5000 * MS), 0);
	ck_assert_int_eq(frame_in(fd, p, sizeof(p), &n), 0x88);
	ck_assert(n == 2 && (p[0] << 8 | p[1]) == 1001);
	frame_out(fd, 0x88, 2, "\x03\xe9", 2);
	ck_assert_int_eq(wait_change(&recv_rc, 99), 0);
	ck_assert_int_eq(atomic_load(&close_code), 1001);
	close(fd);
	pthread_join(runner, NULL); /* the run ends with its last connection */
	runtime_http_server_destroy(srv);
	runtime_destroy(rt);
}
END_TEST

/* Without a receive stream a served WebSocket's wait is a fiber's poll
 * (runtime_conn_idle's fallback): a close from another fiber wakes that
 * too, and a peer that does not answer is given up on. */
START_TEST(test_ws_served_kick_without_a_stream)
{
	uint8_t p[125];
	size_t n;

	plain_recv = true;
	serve_start();
	plain_recv = false;
	int fd = opened("/served-kick");
	frame_out(fd, 0x81, 2, "hi", 2);
	ck_assert_int_eq(frame_in(fd, p, sizeof(p), &n), 0x81);
	ck_assert_int_eq(frame_in(fd, p, sizeof(p), &n), 0x88);
	ck_assert(n == 8 && (p[0] << 8 | p[1]) == 4001);
	ck_assert(!recv_n(fd, p, 1)); /* no answer: given up on, closed */
	ck_assert_int_eq(wait_change(&recv_rc, 99), -ETIMEDOUT);
	close(fd);
	serve_stop();
}
END_TEST

/* A shutdown while another fiber's send to a served WebSocket blocks (a
 * peer that never reads): the receiver's end waits for that sender to
 * leave before ws goes (ASan: nothing used after its free), and the run
 * ends. */
START_TEST(test_ws_served_shutdown_with_a_sender_blocked)
{
	serve_start();
	int fd = opened("/served-push");
	usleep(300 * 1000); /* the pusher fills the sockets and blocks */
	ck_assert_int_eq(atomic_load(&send_rc), 99);
	serve_stop();
	ck_assert_int_eq(atomic_load(&send_rc), -ECANCELED);
	close(fd);
}
END_TEST

struct served_client {
	char url[64];
	int got, last, code, ended;
	char text[16];
};

static void client_fn(struct runtime_ws *ws, int rc, const struct runtime_ws_message *m,
                      void *arg)
{
	struct served_client *r = arg;

	if (rc > 0) {
		snprintf(r->text, sizeof(r->text), "%.*s", (int)m->len, (const char *)m->data);
		r->got++;
		return;
	}
	r->last = rc;
	r->code = runtime_ws_close_code(ws, NULL);
	r->ended = 1;
}

static void served_client_main(void *arg)
{
	struct served_client *r = arg;
	struct runtime_http_client *cl;
	struct runtime_ws *ws;

	ck_assert_int_eq(runtime_http_client_create(&cl, NULL), 0);
	ck_assert_int_eq(runtime_ws_connect(cl, r->url, NULL, &ws), 0);
	ck_assert_int_eq(runtime_ws_serve(ws, client_fn, r), 0);
	for (int i = 0; i < 3; i++) {
		int want = r->got + 1;
		ck_assert_int_eq(runtime_ws_send(ws, RUNTIME_WS_TEXT, "one", 3), 0);
		for (int k = 0; k < 1000 && r->got < want; k++)
			runtime_sleep(10 * MS);
		ck_assert_int_eq(r->got, want);
	}
	ck_assert_int_eq(runtime_ws_close(ws, 4003, NULL), 0); /* returns at once */
	for (int k = 0; k < 1000 && !r->ended; k++)
		runtime_sleep(10 * MS);
	runtime_http_client_destroy(cl);
}

/* The library's client, served: its messages reach fn from a fiber of
 * the library's, and a close from the client's own fiber ends it. */
START_TEST(test_ws_served_client)
{
	struct served_client r = { 0 };

	serve_start();
	snprintf(r.url, sizeof(r.url), "ws://127.0.0.1:%u/served", port);
	ck_assert_int_eq(run_fiber(NULL, served_client_main, &r), 0);
	ck_assert_int_eq(r.got, 3);
	ck_assert_str_eq(r.text, "one");
	ck_assert_int_eq(r.ended, 1);
	ck_assert_int_eq(r.last, 0);
	ck_assert_int_eq(r.code, 4003);
	ck_assert_int_eq(wait_change(&recv_rc, 99), 0);
	ck_assert_int_eq(atomic_load(&close_code), 4003);
	serve_stop();
}
END_TEST

static Suite *ws_suite(void)
{
	Suite *s = suite_create("websocket");
	TCase *tc = tcase_create("websocket");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_ws_handshake_answers_and_refusals);
	tcase_add_test(tc, test_ws_echo_fragments_and_pings);
	tcase_add_test(tc, test_ws_breaches_fail_with_their_codes);
	tcase_add_test(tc, test_ws_a_big_message_is_not_kept);
	tcase_add_test(tc, test_ws_deflate_offers);
	tcase_add_test(tc, test_ws_deflate_messages_and_a_bomb);
	tcase_add_test(tc, test_ws_drain_closes_with_1001);
	tcase_add_test(tc, test_ws_peer_that_never_reads);
	tcase_add_test(tc, test_ws_keepalive_gives_up_on_a_silent_peer);
	tcase_add_test(tc, test_ws_client_to_server);
	tcase_add_test(tc, test_ws_small_fragments_cost_no_copy_each);
	tcase_add_test(tc, test_ws_recv_in_pieces);
	tcase_add_loop_test(tc, test_ws_served_waits_with_no_fiber, 0, 2);
	tcase_add_test(tc, test_ws_served_drain_keepalive_and_kick);
	tcase_add_test(tc, test_ws_served_kick_without_a_stream);
	tcase_add_test(tc, test_ws_served_shutdown_with_a_sender_blocked);
	tcase_add_test(tc, test_ws_served_client);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(ws_suite)
