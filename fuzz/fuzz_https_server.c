/* SPDX-License-Identifier: MIT */
/*
 * fuzz_https_server.c - libFuzzer target for the demo HTTP server behind
 * TLS, on the real runtime: one connection per input over an AF_UNIX
 * socketpair, whose server end does what runtime_http_serve does with
 * sc.tls - runtime_conn_tls_accept (tls/, toolkit/conn.c), then
 * libruntime-http's runtime_http_serve_conn (http/) with the demo's
 * routes (demos/http) - and whose other end the input drives. Bit 7 of
 * byte 0 picks how:
 *
 *   raw (0): the rest of the input is the client's bytes, sent as they
 *   are (garbage, a ClientHello cut short, records of any length), cut
 *   into writes as OPT_CUT says, then the client shuts its write side and
 *   reads what comes back until EOF. The fuzzer has no keys, so no
 *   handshake can complete: this is OpenSSL's ClientHello parsing under
 *   the layer's BIO, its feeding and flushing, alerts, every failure path
 *   and the handshake timeout.
 *
 *   client (1): a real client (OpenSSL over memory BIOs, https_client.c)
 *   does a handshake as byte 1 says (version, suite, SNI, ALPN, resuming
 *   the session kept at start-up), then sends the rest, split at every
 *   0xFF (never sent) into pieces, each its own SSL_write followed by a
 *   yield, except that a piece that starts with
 *       0xFE  is sent raw, not encrypted (the client broke the protocol),
 *       0xFD  first rekeys: a TLS 1.3 KeyUpdate asking for the server's,
 *             or a TLS 1.2 renegotiation (refused: the client broke it),
 *       0xFC  sends close_notify (what follows is dropped),
 *       0xFB  is a count byte k (not 0xFF: it would split), then
 *             bytes sent k + 1 times in one SSL_write (REPEAT_MAX at
 *             most): many pipelined requests, full records, the
 *             server's buffers filled, from a small input,
 *       0xFA  is one record the client seals itself, with a valid tag
 *             and the inner content the input chooses (TLS 1.3: see
 *             "sealed pieces"; ignored in TLS 1.2, where the server's
 *             records are OpenSSL's own),
 *   and an empty piece is a pause with OPT_SLOW (once). This is the layer
 *   under the HTTP server: pipelined requests, large answers in many
 *   records, reads that time out, drains, key updates, truncation.
 *   At most MAX_PIECES pieces: the last holds the rest, 0xFF included.
 *
 *   Sealed pieces: 0xFA t p c... is a record whose inner plaintext (RFC
 *   8446 5.2) is c... || t || zero padding of p bytes (p < 0x80), else of
 *   (p - 0x7F) * 256 (to reach the records' bounds from a short input),
 *   cut to what a record can hold; t and p missing are 23 (application
 *   data) and 0. The client learns its CLIENT_TRAFFIC_SECRET_0 from
 *   OpenSSL's key log; at its first sealed piece it has OpenSSL send a
 *   KeyUpdate (not requested: the last record OpenSSL writes) and goes on
 *   with the next keys at sequence 0, counting the KeyUpdates 0xFD made
 *   before (tls/record.c, built into the target and its replay); from
 *   then on it seals every write itself: plaintext as application data,
 *   0xFD as a KeyUpdate asking for the server's, 0xFC as close_notify. What
 *   a sealed record is to the server is what RFC 8446 says a server must
 *   make of it (sealed_of): application data (empty or padded too: its
 *   content is the client's plaintext like any other, its requests owed
 *   their answers), close_notify, user_canceled (read on) and KeyUpdates
 *   (spanning records or not, each ending its record: the client's keys
 *   move on after it) keep the rules; anything else breaks them - another
 *   alert or a malformed one, another content type or handshake message,
 *   a record of nothing but padding, an inner plaintext over 2^14 + 1
 *   bytes, a KeyUpdate asking for 2 or with bytes after it in its record,
 *   any record amid a KeyUpdate. This is the server's own TLS 1.3 record
 *   layer (tls/tls13.c) under hostile but authenticated content, which
 *   neither OpenSSL's client nor raw bytes reach.
 *
 * Besides the sanitizers' findings, these abort:
 *   - a connection that does not end within HANG_NS (a hang);
 *   - runtime_conn_tls_accept failing with an error its header does not
 *     list, or without words from runtime_conn_tls_error;
 *   - raw: a handshake that completes, or that times out though the
 *     client's end was shut (EOF must end it); bytes from the server that
 *     are not well-formed TLS records;
 *   - client: a failed handshake, unless the client offered ALPN without
 *     http/1.1 (then it must fail, -ENOPROTOOPT); runtime_conn_tls_info
 *     disagreeing with the client (version, ALPN, SNI, resumed); the
 *     wrong certificate for the SNI name; no resumption where it must
 *     resume, or one under another name than the session's; a TLS 1.3
 *     client whose key log gave no secret for its suite (the harness's
 *     bug); a server stream that does not decrypt (a bad record, an
 *     alert) unless the client broke the protocol - sealed pieces that
 *     keep the rules do not, and a key or sequence number of the
 *     client's own out of step shows as the server's bad_record_mac;
 *     answers that are not well-formed
 *     HTTP/1.1 framed by Content-Length (204 and 304 may go without),
 *     more answers than requests (+1), a .bin file whose body is not its
 *     content, or a request that came whole (before one that may end the
 *     connection: see frame_requests) left without its whole answer -
 *     unless the client broke the protocol, or 2 ms timeouts or a drain
 *     may cut it short;
 *   - runtime_conn_close failing (a session left busy, a double close), a
 *     file descriptor left behind, or a connection still being served
 *     after its fiber ended.
 *
 * Certificates are made in memory at start-up, once per process, with
 * tests/tlsutil.h (a CA, then leaves for a.test and *.b.test): no files
 * to find at run time (the binary runs from anywhere, under -jobs and
 * -fork, and as tests/replay_https_server in make check), no openssl CLI
 * in the build, nothing that could be committed; about a millisecond per
 * process. Their keys differ per process, which changes nothing the
 * fuzzer sees: handshakes are random anyway.
 *
 * Speed: a raw input costs about 0.5 ms under ASan; a real client's
 * full handshake about 3 ms (OpenSSL 3.0's, both ends, ASan's malloc),
 * 2 ms resumed: OPT_CL_RESUME resumes the session the warm-up kept, one
 * per version, made at start-up so that an input means the same thing in
 * every process (TLS 1.2 offers it only with its suite among the
 * client's: else the server rightly refuses). The server's ticket keys do
 * not rotate during a run.
 *
 * Blind spots: Debian's libssl is not instrumented, so coverage comes
 * from tls/, toolkit/conn.c, http/ and demos/http alone (built with it
 * for this target; the rest of the runtime is not): the fuzzer finds its
 * way through OpenSSL's parser only by what those see (how the handshake
 * ended, which reason, how many reads). Sealed pieces: their content
 * never holds 0xFF (the pieces' marker: no content type or KeyUpdate
 * request 0xFF), and content over 2^14 bytes (record_overflow once
 * opened) needs an input that long; the client's write direction is
 * taken over once, never given back (what OpenSSL would write after it,
 * an alert when the server's stream broke, is dropped); sealed records
 * after close_notify are dropped, as plaintext is; a tag that does not
 * verify comes only from raw pieces. Not reached: client certificates,
 * a context with several ALPN protocols, ticket rotation, a second
 * connection at once, what the server never does (reads and writes from
 * two fibers) and the runtime's own drain; the epoll engine only in make
 * check's epoll pass (the replay).
 *
 * One runtime (one core) lives for the process on its own thread, and the
 * HTTP server is made per input from the demo's options, as in
 * fuzz_http_server.c, whose drain (the server's stop flag, and a read
 * woken by a deadline in the past) OPT_DRAINING and OPT_DRAIN_LATE do
 * too; each input is a fiber spawned onto the runtime. The routes'
 * runtime_sleep is wrapped (-Wl,--wrap=runtime_sleep) to SLEEP_CAP_NS.
 * Built with the ordinary compiler into tests/replay_https_server too
 * (tests/fuzz_replay.c), which replays the corpus and the regressions in
 * make check.
 */
#define _GNU_SOURCE
#include "http.h"   /* the server's insides: stopping, limits */
#include "server.h"

#define FUZZ_NAME "fuzz_https_server"
#include "server_harness.h"

#include "https_client.h"
#include "record.h"  /* tls/: sealed pieces' limits and content types */
#include "tlsutil.h"

#include <ctype.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RAW_PIECE 0xFE
#define REKEY_PIECE 0xFD
#define CLOSE_PIECE 0xFC
#define REPEAT_PIECE 0xFB
#define SEALED_PIECE 0xFA
#define REPEAT_MAX (64 * 1024)    /* a repeat piece's plaintext at most */
#define INNER_MAX (REC_CIPHER_MAX - REC_TAG) /* a sealed record's inner
                                                plaintext at most */
#define PAUSE_NS (5 * MS)         /* OPT_SLOW's one pause */
#define HANDSHAKE_NS (5000 * MS)  /* the server's handshake timeout */
#define HANDSHAKE_SLOW_NS (2 * MS) /* ... raw with OPT_SLOW */
#define NO_ROTATION_NS (1000ull * 3600 * 1000 * MS) /* ticket keys: 1000 h */
#define RECORD_MAX (16384 + 2048) /* a TLSCiphertext's bound */
#define ANSWER_HEAD_MAX 4096
#define PATTERN "0123456789abcdef" /* the .bin files' content, repeated */

/* Byte 0. */
enum {
	OPT_PLAIN_RECV = 0x01,  /* connections read with recv, not a stream */
	OPT_SLOW = 0x02,        /* timeouts of 2 ms, one pause; raw: a 2 ms
	                           handshake timeout */
	OPT_CUT = 0x0c,         /* raw: how the bytes are cut (enum cut) */
	OPT_NO_BATCH = 0x04,    /* client: --no-batch */
	OPT_DRAINING = 0x08,    /* client: the server is stopping already */
	OPT_DRAIN_LATE = 0x10,  /* client: a drain after the last piece (its
	                           reads woken: fuzz_http_server.c) */
	OPT_CLIENT = 0x80,      /* the mode: a real client, byte 1 its options */
};

/* Raw mode's writes (byte 0's OPT_CUT bits). */
enum cut {
	CUT_WHOLE,              /* one write */
	CUT_BYTES,              /* a byte each */
	CUT_RECORDS,            /* each record's header, then its body, as the
	                           input's headers say */
	CUT_FIVES,              /* 5 bytes each: a header's size */
};

/* Byte 1, client mode. */
enum {
	OPT_CL_TLS12 = 0x01,    /* TLS 1.2, else 1.3 */
	OPT_CL_SUITE = 0x06,    /* a suite (https_client.c), 3: all */
	OPT_CL_SNI = 0x18,      /* snis[] */
	OPT_CL_ALPN = 0x60,     /* alpns[] */
	OPT_CL_RESUME = 0x80,   /* resume the warm-up's session */
};

static const char *const snis[] = { NULL, "a.test", "x.b.test", "unknown.test" };
static const struct {
	const char *wire;
	unsigned len;
	const char *agreed;     /* what the server must pick; NULL: it refuses */
} alpns[] = {
	{ NULL, 0, NULL }, /* none offered: none agreed, and no refusal */
	{ "\x08http/1.1", 9, "http/1.1" },
	{ "\x02h2\x08http/1.1", 12, "http/1.1" },
	{ "\x02h2", 3, NULL },
};

static unsigned serving;       /* connections in runtime_http_serve_conn */
static struct runtime_tls *tls_main, *tls_slow; /* server contexts */
static SSL_CTX *client_ctx;
static SSL_SESSION *kept[2];   /* to resume, by OPT_CL_TLS12 */
static struct pem ca, leaf_a, leaf_b;
static char top_dir[256];      /* holds root/ */
static struct {                /* fds below FD_SCAN between inputs */
	bool taken;
	bool open[FD_SCAN];
} fds_between;

/* The requests in the client's plaintext, framed as the server frames
 * them (runtime__http_parse_head, then the body). */
struct requests {
	struct asked {
		bool head_only;     /* HEAD: no body in the answer */
		bool pattern;       /* GET of a .bin file: its body is PATTERN */
	} *r;                   /* per complete head */
	size_t heads;
	size_t complete;        /* of them, with their whole body */
	size_t owed;            /* complete ones up to the first that may end
	                           the connection: each must be answered */
};

struct job {
	const uint8_t *data;    /* past the option bytes */
	size_t size;
	unsigned opt, cl;       /* bytes 0 and 1 */
	bool warm_up;           /* keep the client's session for OPT_CL_RESUME */
	int fd, server_fd;      /* the client's end, the server's */
	struct runtime_conn *conn; /* the server's while it serves HTTP */
	uint64_t deadline;
	struct runtime_tls *tls;
	int accept_rc;          /* the server's runtime_conn_tls_accept */
	char accept_why[160];   /* ... and runtime_conn_tls_error */
	struct {                /* runtime_conn_tls_info, copied */
		char version[16], alpn[32], sni[64];
		bool has_alpn, has_sni;
		int resumed;
	} info;
	struct fuzz_client client;
	struct {                /* what the client saw of the handshake */
		char version[16], alpn[32], cn[64];
		bool has_alpn;
		int resumed;
	} seen;
	bool broke;             /* the client will break the protocol */
	struct requests q;
	bool owed_checked;
	struct owed_wait w;     /* the answers the writer waits for */
	size_t answered;        /* whole answers other than 1xx */
	sem_t done;
};

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* --------------------------------------------------------------- fds */

/* The same fds open as between the first inputs, or fail naming each
 * that differs: opened (a leak) or closed (someone else's: a double close). */
static void check_fds(void)
{
	bool now[FD_SCAN], same = true;

	scan_fds(now);
	if (!fds_between.taken) {
		memcpy(fds_between.open, now, sizeof(now));
		fds_between.taken = true;
		return;
	}
	for (int i = 0; i < FD_SCAN; i++) {
		if (now[i] == fds_between.open[i])
			continue;
		same = false;
		fprintf(stderr, "fuzz_https_server: fd %d %s\n", i,
		        now[i] ? "open, a leak" : "closed by someone");
	}
	if (!same)
		fail("a file descriptor leaked, or another's was closed");
}

/* ------------------------------------------------------------ the server */

static void note_info(struct job *j, struct runtime_conn *conn)
{
	struct runtime_tls_info in;

	if (runtime_conn_tls_info(conn, &in) < 0)
		fail("runtime_conn_tls_info failed after a handshake");
	snprintf(j->info.version, sizeof(j->info.version), "%s", in.version);
	snprintf(j->info.alpn, sizeof(j->info.alpn), "%s", in.alpn ? in.alpn : "");
	snprintf(j->info.sni, sizeof(j->info.sni), "%s", in.server_name ? in.server_name : "");
	j->info.has_alpn = in.alpn != NULL;
	j->info.has_sni = in.server_name != NULL;
	j->info.resumed = in.resumed;
}

/* The connection's fiber, as runtime_http_serve runs one with a TLS
 * context: the handshake, then the library serves it with the demo's
 * routes, then the close. */
static void *serve(void *arg)
{
	struct job *j = arg;
	struct runtime_conn *conn;

	if (runtime_conn_open(&conn, j->server_fd, srv.opt.plain_recv ? RUNTIME_CONN_PLAIN_RECV : 0) < 0)
		fail("runtime_conn_open");
	j->accept_rc = runtime_conn_tls_accept(conn, j->tls);
	if (j->accept_rc == 0) {
		note_info(j, conn);
		j->conn = conn;
		serving++;
		if (runtime_http_serve_conn(srv.http, conn) < 0)
			fail("runtime_http_serve_conn refused a connection");
		serving--;
		j->conn = NULL;
	} else {
		runtime_conn_tls_error(conn, j->accept_why, sizeof(j->accept_why));
	}
	if (runtime_conn_close(conn) < 0)
		fail("runtime_conn_close failed: a TLS session left busy, or its fd closed twice");
	return NULL;
}

/* A drain, as far as one connection sees it (fuzz_http_server.c): the
 * stop flag, and a read it waits in woken, if it is serving HTTP yet
 * (not in the handshake, which a drain leaves alone). From this core:
 * the connection's. */
static void drain_late(struct job *j)
{
	atomic_store(&srv.http->stopping, true);
	if (j->conn)
		runtime_conn_set_read_deadline(j->conn, 1);
}

/* runtime_conn_tls_accept's result is one runtime_tls.h lists. */
static void check_accept(const struct job *j)
{
	static const int listed[] = { 0, -EPROTO, -ENOPROTOOPT, -EKEYREJECTED, -EKEYEXPIRED,
		                      -ECONNABORTED, -ETIMEDOUT, -ECANCELED, -ECONNRESET, -EPIPE,
		                      -ENOMEM };
	bool known = false;

	for (size_t i = 0; i < sizeof(listed) / sizeof(listed[0]); i++)
		known |= j->accept_rc == listed[i];
	if (!known) {
		fprintf(stderr, "fuzz_https_server: accept: %s (%s)\n", strerror(-j->accept_rc),
		        j->accept_why);
		fail("runtime_conn_tls_accept failed with an error runtime_tls.h does not list");
	}
	if (j->accept_rc < 0 && !j->accept_why[0])
		fail("a failed handshake without words from runtime_conn_tls_error");
}

/* ----------------------------------------------------------- raw mode */

/* The length of the next write of the n > 0 bytes at p; *body carries a
 * record's length from its header to its body (CUT_RECORDS). */
static size_t next_cut(enum cut how, const uint8_t *p, size_t n, size_t *body)
{
	size_t k;

	switch (how) {
	case CUT_WHOLE:
		return n;
	case CUT_BYTES:
		return 1;
	case CUT_FIVES:
		return min_size(n, 5);
	default:
		if (*body) {
			k = min_size(*body, n);
			*body = 0;
			return k;
		}
		if (n >= 5)
			*body = (size_t)p[3] << 8 | p[4];
		return min_size(n, 5);
	}
}

/* The input as the client's bytes, cut as OPT_CUT says (MAX_PIECES
 * writes at most: the last takes the rest); with OPT_SLOW a pause once
 * half is sent. Stops early if the server has closed. */
static void write_raw(const struct job *j)
{
	enum cut how = (enum cut)((j->opt & OPT_CUT) >> 2);
	const uint8_t *p = j->data;
	size_t left = j->size, body = 0;
	bool pause = j->opt & OPT_SLOW;
	unsigned pieces = 0;

	while (left) {
		size_t n = ++pieces < MAX_PIECES ? next_cut(how, p, left, &body) : left;
		ssize_t rc = runtime_send_all(j->fd, p, n, NULL);
		if (rc == -ETIMEDOUT)
			fail("the server stopped reading (hang)");
		if (rc < 0)
			return; /* -EPIPE, -ECONNRESET: it closed, as it may */
		p += n;
		left -= n;
		if (pause && left <= j->size / 2) {
			__real_runtime_sleep(PAUSE_NS);
			pause = false;
		} else {
			runtime_yield();
		}
	}
}

/* The server's bytes as TLS records: a header's type, major version (2
 * or 3) and length are checked when it is whole, its body skipped. Not
 * the minor version, nor 2 against 3: OpenSSL answers a hello of a
 * version it does not speak with an alert in that version (03 0c, say,
 * or 02 03: regressions/https/alert-in-hello-version-0203). */
struct records {
	uint8_t head[5];
	size_t head_len;
	size_t body_left;
};

static void check_records(struct records *r, const uint8_t *p, size_t n)
{
	while (n) {
		if (r->body_left) {
			size_t k = min_size(r->body_left, n);
			r->body_left -= k;
			p += k;
			n -= k;
			continue;
		}
		r->head[r->head_len++] = *p++;
		n--;
		if (r->head_len < 5)
			continue;
		r->head_len = 0;
		r->body_left = (size_t)r->head[3] << 8 | r->head[4];
		if (r->head[0] < 20 || r->head[0] > 23 || r->head[1] < 2 || r->head[1] > 3 ||
		    !r->body_left || r->body_left > RECORD_MAX) {
			fprintf(stderr, "fuzz_https_server: record header %02x %02x %02x %02x %02x\n",
			        r->head[0], r->head[1], r->head[2], r->head[3], r->head[4]);
			fail("the server sent a malformed TLS record");
		}
	}
}

static void *raw_reader(void *arg)
{
	const struct job *j = arg;
	static uint8_t buf[16 * 1024];
	struct records r = { .head_len = 0 };
	ssize_t n;

	runtime_deadline_set(j->deadline);
	while ((n = runtime_read(j->fd, buf, sizeof(buf))) > 0)
		check_records(&r, buf, (size_t)n);
	if (n == -ETIMEDOUT)
		fail("the server did not close the connection in time (hang)");
	if (n < 0 && n != -ECONNRESET)
		fail("reading the server's bytes failed");
	return NULL;
}

static void drive_raw(struct job *j)
{
	struct runtime_fiber *server, *rd;

	if (runtime_fiber_spawn(srv.rt, &server, serve, j) < 0 ||
	    runtime_fiber_spawn(srv.rt, &rd, raw_reader, j) < 0)
		fail("spawn");
	write_raw(j);
	shutdown(j->fd, SHUT_WR); /* not the ring's: io_uring runs it on an io-wq thread */
	join_or_fail(rd, "the server did not close the connection in time (hang)");
	join_or_fail(server, "the connection's fiber did not end in time (hang)");
	if (j->accept_rc == 0)
		fail("a handshake completed with a client that has no keys");
	if (j->accept_rc == -ETIMEDOUT && !(j->opt & OPT_SLOW))
		fail("the handshake timed out though the client's end was shut (EOF unseen)");
}

/* ------------------------------------------------ client mode: pieces */

struct piece {
	const uint8_t *p;
	size_t n;
	bool last;
};

/* The piece at *at of the client's part, split at MARKER; the
 * MAX_PIECES-th holds the rest. False past the last. */
static bool next_piece(const struct job *j, size_t *at, unsigned *count, struct piece *pc)
{
	if (*at > j->size)
		return false;
	const uint8_t *p = j->data + *at, *end = j->data + j->size;
	const uint8_t *m = ++*count < MAX_PIECES ? memchr(p, MARKER, (size_t)(end - p)) : NULL;

	*pc = (struct piece){ .p = p, .n = (size_t)((m ? m : end) - p), .last = !m };
	*at = m ? (size_t)(m + 1 - j->data) : j->size + 1;
	return true;
}

/* Plaintext being put together. */
struct text {
	char *p;
	size_t len, cap;
};

static void append(struct text *t, const uint8_t *p, size_t n)
{
	if (!n)
		return; /* t->p may be NULL yet: no arithmetic on it */
	if (t->len + n > t->cap) {
		t->cap = 2 * (t->len + n);
		if (!(t->p = realloc(t->p, t->cap)))
			fail("out of memory");
	}
	memcpy(t->p + t->len, p, n);
	t->len += n;
}

/* A piece's plaintext onto out: its bytes after the command byte, if any;
 * a repeat's count + 1 copies of what follows the count (REPEAT_MAX at
 * most). */
static void plain_of(const struct piece *pc, struct text *out)
{
	uint8_t first = pc->n ? pc->p[0] : 0;

	if (first != REPEAT_PIECE) {
		append(out, pc->p + (first == REKEY_PIECE), pc->n - (first == REKEY_PIECE));
		return;
	}
	if (pc->n < 3)
		return;
	size_t n = pc->n - 2, copies = (size_t)pc->p[1] + 1;
	for (size_t i = 0; i < copies && (i + 1) * n <= REPEAT_MAX; i++)
		append(out, pc->p + 2, n);
}

/*
 * Sealed pieces (TLS 1.3). A piece 0xFA t p c... is one record the client
 * seals itself, whose inner plaintext is c... || t || p zero bytes (p <
 * 0x80), or (p - 0x7F) * 256 of them (from 0x80: a record of up to
 * 2^14 + 256 bytes from a short input); missing bytes: t 23
 * (application data), p 0. It is cut to what a record can hold
 * (INNER_MAX), the padding first. What it is to the server is what RFC
 * 8446 says a server must make of it (5.1-5.4, 6, 4.6.3), worked out by
 * sealed_of below, with the client's handshake bytes of earlier records
 * (a KeyUpdate may span records) - so that the checks on the answers
 * hold unless it breaks the protocol.
 */
struct hs_model {
	uint8_t b[5];                /* a KeyUpdate begun in an earlier record */
	unsigned len;
};

struct sealed {
	uint8_t inner[INNER_MAX];    /* the record's inner plaintext */
	size_t len;
	const uint8_t *content;      /* as the server finds it, past the padding */
	size_t content_len;
	bool data;                   /* application data: the server may pass
	                                content on (it must, unless broke) */
	bool close;                  /* close_notify: the client's last */
	bool rekey;                  /* it ends a KeyUpdate: the keys move on */
	bool broke;                  /* the client broke the protocol */
};

static size_t padding_of(uint8_t p)
{
	return p < 0x80 ? p : ((size_t)p - 0x7F) * 256;
}

/* A sealed record's handshake content, a KeyUpdate's bytes (the only
 * message a client may send after its Finished; it must end its record).
 * False: the protocol broken (the server fails: m starts again, for
 * what no longer matters). */
static bool handshake_of(struct hs_model *m, const uint8_t *p, size_t n, bool *rekey)
{
	bool ok = n > 0; /* no empty handshake fragments */

	for (size_t i = 0; ok && i < n; i++) {
		m->b[m->len++] = p[i];
		ok = !(m->len == 1 && m->b[0] != 24) &&
		     !(m->len == 4 && (m->b[1] || m->b[2] || m->b[3] != 1)) &&
		     (m->len < 5 || (i == n - 1 && m->b[4] <= 1)); /* past a key change; 0 or 1 */
		if (ok && m->len == 5) {
			m->len = 0;
			*rekey = true;
		}
	}
	if (!ok)
		m->len = 0;
	return ok;
}

/* The sealed piece pc (TLS 1.3), given the client's handshake bytes m of
 * earlier records (updated), into s. */
static void sealed_of(const struct piece *pc, struct hs_model *m, struct sealed *s)
{
	uint8_t type = pc->n > 1 ? pc->p[1] : REC_APPLICATION_DATA;
	size_t n = pc->n > 3 ? min_size(pc->n - 3, INNER_MAX - 1) : 0, at;

	if (n)
		memcpy(s->inner, pc->p + 3, n);
	s->inner[n++] = type;
	s->len = n + min_size(pc->n > 2 ? padding_of(pc->p[2]) : 0, INNER_MAX - n);
	memset(s->inner + n, 0, s->len - n);
	for (at = s->len; at && !s->inner[at - 1]; at--)
		;
	s->content = s->inner;
	s->content_len = at ? at - 1 : 0;
	s->data = s->close = s->rekey = false;
	/* The inner plaintext's bound, padding included (5.4): the server may
	 * take it or refuse it (record_overflow). */
	s->broke = s->len > REC_PLAIN_MAX + 1;
	if (!at || s->content_len > REC_PLAIN_MAX) { /* no type; too long */
		s->broke = true;
		return;
	}
	type = s->inner[at - 1];
	if (m->len && type != REC_HANDSHAKE) /* amid a handshake message */
		s->broke = true;
	switch (type) {
	case REC_APPLICATION_DATA: /* empty ones included (5.1) */
		s->data = true;
		break;
	case REC_ALERT: /* close_notify, or user_canceled (the server reads on) */
		s->close = s->content_len == 2 && s->content[0] == 1 &&
		           s->content[1] == REC_ALERT_CLOSE_NOTIFY;
		if (!s->close && (s->content_len != 2 || s->content[0] != 1 ||
		                  s->content[1] != REC_ALERT_USER_CANCELED))
			s->broke = true; /* fatal, or malformed */
		break;
	case REC_HANDSHAKE:
		if (!handshake_of(m, s->content, s->content_len, &s->rekey))
			s->broke = true;
		break;
	default:
		s->broke = true; /* unexpected_message */
	}
}

static bool is_tls13(const struct job *j)
{
	return !(j->cl & OPT_CL_TLS12);
}

/* Whether piece pc (not a sealed one) puts records on the wire: amid a
 * KeyUpdate the client's records break the protocol (raw bytes do
 * anyway). */
static bool sends_records(const struct piece *pc)
{
	return pc->n && (pc->p[0] != REPEAT_PIECE || pc->n >= 3);
}

/*
 * The plaintext SSL_write will get, in order, into out: plain, repeated
 * and rekeying pieces and sealed application data, up to a close_notify
 * (sealed or not) or a TLS 1.2 renegotiation (after which the client
 * writes no more). Sets j->broke if a raw piece, a renegotiation or a
 * sealed piece that breaks the protocol comes first. Sealed data that
 * breaks it counts as plaintext: the server may take it or fail, and
 * either way the requests before it frame as they do.
 */
static void plaintext(struct job *j, struct text *out)
{
	static struct sealed s;
	struct hs_model m = { .len = 0 };
	size_t at = 0;
	unsigned count = 0;
	struct piece pc;

	while (next_piece(j, &at, &count, &pc)) {
		uint8_t first = pc.n ? pc.p[0] : 0;
		if (first == SEALED_PIECE) {
			if (!is_tls13(j))
				continue; /* TLS 1.2: ignored */
			sealed_of(&pc, &m, &s);
			j->broke |= s.broke;
			if (s.data)
				append(out, s.content, s.content_len);
			if (s.close)
				break;
			continue;
		}
		if (m.len && sends_records(&pc))
			j->broke = true;
		if (first == CLOSE_PIECE)
			break;
		if (first == RAW_PIECE || (first == REKEY_PIECE && (j->cl & OPT_CL_TLS12))) {
			j->broke = true;
			if (first == REKEY_PIECE)
				break;
			continue;
		}
		plain_of(&pc, out);
	}
}

/* A piece's plaintext through the client, in one SSL_write. */
static int write_plain(struct job *j, const struct piece *pc)
{
	struct text t = { NULL, 0, 0 };
	int rc;

	plain_of(pc, &t);
	rc = fuzz_client_write(&j->client, t.p, t.len);
	free(t.p);
	return rc;
}

/* A sealed piece through the client (TLS 1.3; ignored in TLS 1.2). */
static int write_sealed(struct job *j, const struct piece *pc, struct hs_model *m)
{
	static struct sealed s;

	if (!is_tls13(j))
		return 0;
	sealed_of(pc, m, &s);
	return fuzz_client_seal(&j->client, s.inner, s.len,
	                        (s.rekey ? FUZZ_SEAL_REKEY : 0) | (s.close ? FUZZ_SEAL_CLOSE : 0) |
	                        (s.broke ? FUZZ_SEAL_BROKE : 0));
}

/* One piece through the client: 0 or -errno (the server closed); m: the
 * client's handshake bytes, as plaintext() saw them. */
static int send_piece(struct job *j, const struct piece *pc, bool *may_pause, struct hs_model *m)
{
	struct fuzz_client *c = &j->client;
	int rc;

	if (!pc->n) { /* a pause, once, with OPT_SLOW */
		if (pc->last || !*may_pause)
			return 0;
		*may_pause = false;
		return __real_runtime_sleep(PAUSE_NS);
	}
	if (pc->p[0] == SEALED_PIECE)
		return write_sealed(j, pc, m);
	if (m->len && sends_records(pc))
		c->broke = true; /* amid a KeyUpdate */
	switch (pc->p[0]) {
	case RAW_PIECE:
		return fuzz_client_raw(c, pc->p + 1, pc->n - 1);
	case CLOSE_PIECE:
		return fuzz_client_close_notify(c);
	case REKEY_PIECE:
		if ((rc = fuzz_client_rekey(c)) < 0)
			return rc;
		/* fall through */
	default:
		return write_plain(j, pc);
	}
}

/* Every piece, a yield after each; stops early if the server closed. */
static void write_pieces(struct job *j)
{
	bool may_pause = j->opt & OPT_SLOW;
	struct hs_model m = { .len = 0 };
	size_t at = 0;
	unsigned count = 0;
	struct piece pc;

	while (next_piece(j, &at, &count, &pc)) {
		int rc = send_piece(j, &pc, &may_pause, &m);
		if (rc == -ETIMEDOUT)
			fail("the server stopped reading (hang)");
		if (rc < 0)
			return;
		if (!pc.last)
			runtime_yield();
	}
}

/* ------------------------------------------- client mode: the answers */

/* Past the body of req, which starts at in[*off] (chunked: decoded in
 * place, as the input is a copy): false if it is not all there. */
static bool skip_body(char *in, size_t len, size_t *off, const struct http_request *req)
{
	struct http_chunked ch;
	size_t used, made;
	int rc;

	switch (req->body) {
	case HTTP_BODY_NONE:
		return true;
	case HTTP_BODY_LENGTH:
		if (len - *off < req->content_length)
			return false;
		*off += req->content_length;
		return true;
	default:
		runtime__http_chunked_init(&ch, &srv.http->limits);
		rc = runtime__http_chunked_decode(&ch, in + *off, len - *off, in + *off, &used, &made);
		*off += used;
		return rc == 1;
	}
}

static bool is_slice(const struct http_slice *s, const char *text)
{
	return s->len == strlen(text) && !memcmp(s->p, text, s->len);
}

/* The path a target routes by (runtime_http_path: an absolute-form
 * target's too), without its query; empty for "*" and authority-form. */
static struct http_slice target_path(struct http_slice t)
{
	const char *p = t.p, *end = t.p + t.len, *q;

	if (p < end && *p != '/') {
		const char *colon = memchr(p, ':', t.len);
		if (!colon || end - colon < 3 || colon[1] != '/' || colon[2] != '/')
			return (struct http_slice){ end, 0 };
		for (p = colon + 3; p < end && *p != '/' && *p != '?'; p++)
			;
		if (p == end || *p == '?')
			return (struct http_slice){ "/", 1 };
	}
	q = memchr(p, '?', (size_t)(end - p));
	return (struct http_slice){ p, (size_t)((q ? q : end) - p) };
}

/* Frame the client's plaintext (in, len: a copy, changed) into j->q. */
static void frame_requests(struct job *j, char *in, size_t len)
{
	static struct http_request req;
	struct requests *q = &j->q;
	size_t off = 0;
	bool closing = false; /* a request asked to close after its answer */

	*q = (struct requests){ .r = malloc((len / 16 + 1) * sizeof(*q->r)) }; /* a head is 16+ bytes */
	if (!q->r)
		fail("out of memory");
	while (off < len) {
		int rc = runtime__http_parse_head(in + off, len - off, &srv.http->limits, &req);
		if (rc <= 0)
			break;
		bool get = is_slice(&req.method, "GET");
		struct http_slice path = target_path(req.target);
		q->r[q->heads++] = (struct asked){
			.head_only = is_slice(&req.method, "HEAD"),
			.pattern = get && (is_slice(&path, "/mid.bin") || is_slice(&path, "/big.bin")),
		};
		off += (size_t)rc;
		if (!skip_body(in, len, &off, &req))
			break;
		if (!closing)
			q->owed = q->complete + 1;
		q->complete++;
		closing |= may_end(&req);
	}
}

/*
 * What the reader has seen of the answers, as they arrive: well-formed
 * HTTP/1.1 responses, each with a Content-Length (no body for 1xx, 204,
 * 304 and HEAD; 204 and 304 may have no Content-Length, or the length a
 * 200 would have: RFC 9110 8.6), at most one per request that came whole
 * plus one (the answer to one cut short or refused, after which the
 * server closes).
 */
struct answers {
	const struct requests *q;
	char head[ANSWER_HEAD_MAX];
	size_t head_len;
	uint64_t body_left, body_off;
	bool pattern;              /* this body must be PATTERN's */
	size_t finals;             /* answers other than 1xx */
};

/* A complete answer head, a->head[0..len): sets the body to come. */
static void answer_head(struct answers *a, size_t len)
{
	const char *h = a->head;
	uint64_t length;
	bool bodiless;

	a->head[len] = '\0'; /* room: len < ANSWER_HEAD_MAX */
	if (!final_answer(h, len, &length, &bodiless))
		return;
	if (++a->finals > a->q->complete + 1)
		fail("more answers than requests (a request answered twice?)");
	const struct asked *r = a->finals <= a->q->heads ? &a->q->r[a->finals - 1] : NULL;
	bool no_body = (r && r->head_only) || bodiless;
	a->body_left = no_body ? 0 : length;
	a->body_off = 0;
	a->pattern = r && r->pattern && !memcmp(h + 9, "200", 3);
}

static void answer_body(struct answers *a, const char *p, size_t k)
{
	for (size_t i = 0; a->pattern && i < k; i++)
		if (p[i] != PATTERN[(a->body_off + i) % (sizeof(PATTERN) - 1)])
			fail("a file's body arrived changed (bytes lost, repeated or reordered)");
	a->body_off += k;
	a->body_left -= k;
}

static void check_answers(struct answers *a, const char *p, size_t n)
{
	while (n && !switched) {
		size_t k = (size_t)(n < a->body_left ? n : a->body_left);
		if (k) {
			answer_body(a, p, k);
		} else { /* in a head: up to its blank line */
			size_t from = a->head_len > 3 ? a->head_len - 3 : 0;
			k = min_size(n, ANSWER_HEAD_MAX - 1 - a->head_len);
			memcpy(a->head + a->head_len, p, k);
			a->head_len += k;
			char *end = memmem(a->head + from, a->head_len - from, "\r\n\r\n", 4);
			if (end) {
				size_t len = (size_t)(end + 4 - a->head);
				k -= a->head_len - len; /* what follows is the body's */
				a->head_len = 0;
				answer_head(a, len);
			} else if (a->head_len == ANSWER_HEAD_MAX - 1) {
				fail("an answer head too long");
			}
		}
		p += k;
		n -= k;
	}
}

/* Read (and drop) until the server closes: it must not block writing. */
static void drain(int fd)
{
	static char sink[16 * 1024];
	ssize_t n;

	while ((n = runtime_read(fd, sink, sizeof(sink))) > 0)
		;
	if (n == -ETIMEDOUT)
		fail("the server did not close the connection in time (hang)");
}

/* Decrypts the answers until the server's stream ends. */
static void *client_reader(void *arg)
{
	struct job *j = arg;
	static struct answers a;
	static char buf[64 * 1024];
	ssize_t n;

	a = (struct answers){ .q = &j->q };
	runtime_deadline_set(j->deadline);
	while ((n = fuzz_client_read(&j->client, buf, sizeof(buf))) > 0) {
		check_answers(&a, buf, (size_t)n);
		owed_seen(&j->w, a.finals - (a.body_left > 0), false);
	}
	if (n == -ETIMEDOUT)
		fail("the server did not close the connection in time (hang)");
	if (n == -EPROTO && !j->client.broke) {
		fprintf(stderr, "fuzz_https_server: client: %s\n", j->client.why);
		fail("the server's TLS stream broke (a bad record, or an alert) for a client that kept the rules");
	}
	if (n < 0 && n != -EPROTO)
		fail("reading the answers failed");
	if (n < 0)
		drain(j->fd);
	j->answered = a.finals - (a.body_left > 0); /* the last one cut short */
	owed_seen(&j->w, j->answered, true);
	return NULL;
}

/* ------------------------------------------------ client mode: checks */

/* The warm-up's sessions have the server's first suite, AES-128-GCM with
 * SHA-256. A TLS 1.2 client offers one only with that suite among its
 * own: else the server refuses it (a client's error, not the server's). */
static bool may_offer(const struct job *j)
{
	unsigned suite = (j->cl & OPT_CL_SUITE) >> 1;

	return (j->cl & OPT_CL_RESUME) && (!(j->cl & OPT_CL_TLS12) || suite == 0 || suite == 3);
}

/* Where it must resume: without SNI, as the warm-up (a session resumes
 * only under the name it was made for, RFC 6066 section 3: tls/resume.c),
 * and for TLS 1.3 with a suite of SHA-256. */
static bool must_resume(const struct job *j)
{
	unsigned suite = (j->cl & OPT_CL_SUITE) >> 1;

	if (!may_offer(j) || (j->cl & OPT_CL_SNI))
		return false;
	return (j->cl & OPT_CL_TLS12) || suite != 1;
}

static struct fuzz_client_opts client_opts(const struct job *j)
{
	unsigned alpn = (j->cl & OPT_CL_ALPN) >> 5;
	bool tls12 = j->cl & OPT_CL_TLS12;

	return (struct fuzz_client_opts){
		.tls12 = tls12,
		.suite = (j->cl & OPT_CL_SUITE) >> 1,
		.sni = snis[(j->cl & OPT_CL_SNI) >> 3],
		.alpn = (const unsigned char *)alpns[alpn].wire,
		.alpn_len = alpns[alpn].len,
		.resume = may_offer(j) ? kept[tls12] : NULL,
	};
}

static bool same(bool has, const char *got, const char *want)
{
	return want ? has && strcmp(got, want) == 0 : !has;
}

/* What the client saw of its handshake, taken at once (a renegotiation
 * would change it). */
static void note_client(struct job *j)
{
	SSL *ssl = j->client.ssl;
	X509 *peer = SSL_get0_peer_certificate(ssl);
	const unsigned char *sel;
	unsigned len;

	snprintf(j->seen.version, sizeof(j->seen.version), "%s", SSL_get_version(ssl));
	j->seen.resumed = SSL_session_reused(ssl);
	SSL_get0_alpn_selected(ssl, &sel, &len);
	snprintf(j->seen.alpn, sizeof(j->seen.alpn), "%.*s", (int)len, (const char *)sel);
	j->seen.has_alpn = len > 0;
	if (peer)
		X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, j->seen.cn,
		                          sizeof(j->seen.cn));
}

/* runtime_conn_tls_info says what the client saw; the certificate is
 * the one for the SNI name. */
static void check_info(const struct job *j)
{
	const char *cn = (j->cl & OPT_CL_SNI) >> 3 == 2 ? "b.test" : "a.test";
	int resumed = j->seen.resumed;

	if (strcmp(j->info.version, j->seen.version) != 0)
		fail("runtime_conn_tls_info: another version than the client's");
	if (j->info.resumed != resumed)
		fail("runtime_conn_tls_info: resumed, and the client says otherwise");
	if (!resumed && must_resume(j))
		fail("a session that must resume did not");
	if (resumed && (j->cl & OPT_CL_SNI))
		fail("a session resumed under another name than its own");
	if (!same(j->info.has_alpn, j->info.alpn, j->seen.has_alpn ? j->seen.alpn : NULL) ||
	    !same(j->seen.has_alpn, j->seen.alpn, alpns[(j->cl & OPT_CL_ALPN) >> 5].agreed))
		fail("ALPN: not what was offered, or not what the client saw");
	if (!same(j->info.has_sni, j->info.sni, snis[(j->cl & OPT_CL_SNI) >> 3]))
		fail("runtime_conn_tls_info: a server_name the client did not send");
	if (!resumed && strcmp(j->seen.cn, cn) != 0) {
		fprintf(stderr, "fuzz_https_server: got %s's certificate, not %s's\n", j->seen.cn, cn);
		fail("SNI picked the wrong certificate");
	}
}

/* A real client's handshake succeeds, unless it offered no protocol the
 * server has. */
static void check_handshake(const struct job *j, int hs)
{
	if (!alpns[(j->cl & OPT_CL_ALPN) >> 5].agreed && j->cl & OPT_CL_ALPN) {
		if (hs == 0 || j->accept_rc == 0)
			fail("a client without http/1.1 in its ALPN list was accepted");
		if (j->accept_rc != -ENOPROTOOPT) {
			fprintf(stderr, "fuzz_https_server: accept: %s (%s)\n",
			        strerror(-j->accept_rc), j->accept_why);
			fail("no ALPN protocol in common, and accept did not say -ENOPROTOOPT");
		}
		return;
	}
	if (hs < 0 || j->accept_rc < 0) {
		fprintf(stderr, "fuzz_https_server: client: %s; accept: %s (%s)\n",
		        hs < 0 ? j->client.why : "done", strerror(-j->accept_rc), j->accept_why);
		fail("a real client's handshake failed");
	}
	check_info(j);
}

/* The client's side after the handshake: the pieces, and the reader
 * fiber checking the answers. */
static void converse(struct job *j)
{
	struct runtime_fiber *rd;
	struct text plain = { NULL, 0, 0 };

	if (is_tls13(j) && !fuzz_client_can_seal(&j->client))
		fail("the client's key log gave no CLIENT_TRAFFIC_SECRET_0 for its suite");
	plaintext(j, &plain);
	frame_requests(j, plain.p, plain.len);
	switched = false;
	free(plain.p);
	j->owed_checked = !j->broke && !(j->opt & (OPT_SLOW | OPT_DRAINING | OPT_DRAIN_LATE));
	if (runtime_fiber_spawn(srv.rt, &rd, client_reader, j) < 0)
		fail("spawn");
	write_pieces(j);
	if (j->opt & OPT_DRAIN_LATE)
		drain_late(j);
	fuzz_client_flush(&j->client); /* what reading made: an alert */
	if (j->owed_checked)
		owed_wait(&j->w, j->q.owed); /* see server_harness.h */
	shutdown(j->fd, SHUT_WR);
	join_or_fail(rd, "the server did not close the connection in time (hang)");
	if (j->owed_checked && !switched && j->answered < j->q.owed)
		fail("a request that came whole got no answer, or part of one");
	free(j->q.r);
}

static void keep_session(const struct job *j)
{
	SSL_SESSION **slot = &kept[(j->cl & OPT_CL_TLS12) != 0];

	SSL_SESSION *now = SSL_get_session(j->client.ssl);

	SSL_SESSION_free(*slot);
	*slot = now ? SSL_SESSION_dup(now) : NULL; /* OpenSSL marks the SSL's own
	                                              unresumable when it goes
	                                              without close_notify */
	if (!*slot || !SSL_SESSION_is_resumable(*slot))
		fail("the warm-up got no session to resume");
}

static void drive_client(struct job *j)
{
	struct fuzz_client_opts o = client_opts(j);
	struct runtime_fiber *server;
	int hs;

	if (fuzz_client_init(&j->client, client_ctx, j->fd, &o) < 0)
		fail("the client refused its settings");
	if (runtime_fiber_spawn(srv.rt, &server, serve, j) < 0)
		fail("spawn");
	if ((hs = fuzz_client_handshake(&j->client)) == 0) {
		note_client(j);
		converse(j);
	}
	else
		shutdown(j->fd, SHUT_WR);
	join_or_fail(server, "the connection's fiber did not end in time (hang)");
	check_handshake(j, hs);
	if (j->warm_up)
		keep_session(j);
	fuzz_client_free(&j->client);
}

/* ------------------------------------------------------------ one input */

/* This input's server (the demo's options with the input's picks, as
 * http-server would make it) and TLS context. */
static void make_server(struct job *j)
{
	struct runtime_http_server_config cfg;
	bool client = j->opt & OPT_CLIENT;
	uint64_t timeout = j->opt & OPT_SLOW ? SLOW_TIMEOUT_MS : FAST_TIMEOUT_MS;

	srv.opt.plain_recv = j->opt & OPT_PLAIN_RECV;
	srv.opt.no_batch = client && (j->opt & OPT_NO_BATCH);
	srv.opt.header_timeout_ms = srv.opt.idle_timeout_ms = timeout;
	server_http_config(&srv, &cfg);
	if (runtime_http_server_create(srv.rt, &cfg, &srv.http) < 0)
		fail("runtime_http_server_create");
	metrics_make();
	atomic_store(&srv.http->stopping, client && (j->opt & OPT_DRAINING));
	j->tls = !client && (j->opt & OPT_SLOW) ? tls_slow : tls_main;
}

/* One connection, on the runtime: the server's fiber on one end, this
 * fiber (and a reader) on the other. */
static void drive(void *arg)
{
	struct job *j = arg;
	int sv[2];

	if (!fds_between.taken) /* the first input: the runtime's ring is open by now */
		check_fds();
	runtime_deadline_set(j->deadline);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		fail("socketpair");
	j->fd = sv[0];
	j->server_fd = sv[1];
	make_server(j);
	if (j->opt & OPT_CLIENT)
		drive_client(j);
	else
		drive_raw(j);
	check_accept(j);
	if (runtime_close(sv[0]) < 0)
		fail("the client's fd was closed by someone else (a double close)");
	runtime_deadline_set(0);
	if (serving != 0)
		fail("a connection still being served after its fiber ended");
	metrics_drop();
	runtime_http_server_destroy(srv.http);
	srv.http = NULL;
	check_fds();
	sem_post(&j->done);
}

static void run_job(struct job *j)
{
	struct timespec until;

	j->deadline = runtime_now() + HANG_NS;
	sem_init(&j->done, 0, 0);
	if (runtime_spawn(srv.rt, drive, j) < 0)
		fail("spawn");
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += STUCK_S;
	while (sem_timedwait(&j->done, &until) < 0)
		if (errno != EINTR)
			fail("the runtime stopped answering (stuck)");
	sem_destroy(&j->done);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct job j = { .opt = size ? data[0] : 0, .cl = size > 1 ? data[1] : 0 };
	size_t skip = min_size(j.opt & OPT_CLIENT ? 2 : 1, size);

	j.data = data + skip;
	j.size = size - skip;
	run_job(&j);
	return 0;
}

/* ------------------------------------------------------- the set-up */

static void write_file(const char *dir, const char *name, const char *text, size_t size)
{
	char path[512];
	size_t len = strlen(text);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "w")))
		fail("cannot create the root's files");
	for (size_t done = 0; done < size; done += len)
		fwrite(text, 1, min_size(size - done, len), f);
	fclose(f);
}

static const char *const root_files[] = { "hello.txt", "mid.bin", "big.bin" };

/* A root with a small file, one just over a batch (64 KiB: read and
 * written in steps), and one at the largest a TLS connection copies
 * (256 KiB + 1: over plain HTTP it would be spliced). */
static void make_root(void)
{
	const char *tmp = getenv("TMPDIR");
	char root[300];

	snprintf(top_dir, sizeof(top_dir), "%s/fuzz_https_server.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(top_dir))
		fail("mkdtemp");
	snprintf(root, sizeof(root), "%s/root", top_dir);
	if (mkdir(root, 0700) < 0)
		fail("mkdir");
	write_file(root, root_files[0], "hello\n", 6);
	write_file(root, root_files[1], PATTERN, 64 * 1024 + 1);
	write_file(root, root_files[2], PATTERN, 256 * 1024 + 1);
	srv.root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (srv.root_fd < 0)
		fail("open root");
}

static void remove_root(void)
{
	char path[600];

	for (size_t i = 0; i < sizeof(root_files) / sizeof(root_files[0]); i++) {
		snprintf(path, sizeof(path), "%s/root/%s", top_dir, root_files[i]);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/root", top_dir);
	rmdir(path);
	rmdir(top_dir);
}

/* A server context as http-server's (ALPN http/1.1), with both leaves:
 * a.test first (the default), then *.b.test for SNI. */
static struct runtime_tls *server_tls(uint64_t handshake_ns)
{
	struct runtime_tls_config cfg;
	struct runtime_tls *t;
	char why[256];

	runtime_tls_config_init(&cfg);
	cfg.alpn = "http/1.1";
	cfg.handshake_timeout_ns = handshake_ns;
	cfg.ticket_rotation_ns = NO_ROTATION_NS;
	if (runtime_tls_create(&t, &cfg) < 0 ||
	    runtime_tls_add_cert(t, leaf_a.cert, leaf_a.key, RUNTIME_TLS_PEM) < 0 ||
	    runtime_tls_add_cert(t, leaf_b.cert, leaf_b.key, RUNTIME_TLS_PEM) < 0) {
		runtime_tls_error_text(why, sizeof(why));
		fprintf(stderr, "fuzz_https_server: TLS: %s\n", why);
		fail("no server context");
	}
	return t;
}

/* Certificates, the server's contexts and the client's. */
static void make_tls(void)
{
	ca = tls_make_cert(NULL, "Fuzz CA", NULL, -3600, 10 * 365 * 86400L);
	leaf_a = tls_make_cert(&ca, "a.test", "DNS:a.test", -3600, 10 * 365 * 86400L);
	leaf_b = tls_make_cert(&ca, "b.test", "DNS:b.test,DNS:*.b.test", -3600, 10 * 365 * 86400L);
	if (!leaf_a.cert || !leaf_b.cert)
		fail("no certificates");
	tls_main = server_tls(HANDSHAKE_NS);
	tls_slow = server_tls(HANDSHAKE_SLOW_NS);
	if (!(client_ctx = SSL_CTX_new(TLS_client_method())))
		fail("no client context");
	SSL_CTX_set_verify(client_ctx, SSL_VERIFY_NONE, NULL); /* the name is checked by hand */
	fuzz_client_ctx_init(client_ctx); /* the key log: sealed pieces' secret */
}

/* One exchange per version, whose sessions OPT_CL_RESUME resumes: made
 * before the first input so that an input means the same in every
 * process. All suites (the server picks its first), no SNI, http/1.1. */
static void warm_up(void)
{
	static const uint8_t get[] = "GET /hello.txt HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";

	for (unsigned tls12 = 0; tls12 < 2; tls12++) {
		struct job j = { .opt = OPT_CLIENT, .cl = tls12 | OPT_CL_SUITE | 1u << 5 /* http/1.1 */,
		                 .warm_up = true, .data = get, .size = sizeof(get) - 1 };
		run_job(&j);
	}
}

/* At exit: the runtime stops (the keeper is cancelled) and goes, then
 * everything TLS, then the root. */
static void finish(void)
{
	stop_runtime();
	close(srv.root_fd);
	remove_root();
	runtime_tls_destroy(tls_main);
	runtime_tls_destroy(tls_slow);
	SSL_CTX_free(client_ctx);
	SSL_SESSION_free(kept[0]);
	SSL_SESSION_free(kept[1]);
	tls_free_cert(&ca);
	tls_free_cert(&leaf_a);
	tls_free_cert(&leaf_b);
}

/* The server as http-server --tls-cert --tls-key would be started, with
 * a fresh --root, --limit 1 and --body-max 4096; timeouts per input. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	start_symbolizer();
	srv.opt = (struct options){ .host = "socketpair", .cores = 1, .limit = 1,
		.max_conns = 1, .body_max = 4096, .header_timeout_ms = FAST_TIMEOUT_MS,
		.idle_timeout_ms = FAST_TIMEOUT_MS };
	make_root();
	make_tls();
	start_runtime();
	atexit(finish);
	warm_up();
	return 0;
}
