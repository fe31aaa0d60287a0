/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http_server.c - libFuzzer target for the whole demo HTTP server:
 * libruntime-http's server (http/: parser.c, conn.c, request.c,
 * response.c, file.c) with the demo's routes on it (demos/http: config.c,
 * routes.c, files.c), on the real runtime, one connection per input over
 * an AF_UNIX socketpair, served by runtime_http_serve_conn.
 *
 * Input: byte 0 picks server options (bits below); the rest is what the
 * client sends, split at every 0xFF byte (MARKER, never sent: the server
 * never sees a 0xFF) into separate writes, with a yield between them so
 * that they tend to arrive as separate reads. An empty piece (two markers
 * in a row) is a pause longer than the header and idle timeouts, once per
 * input, when the SLOW bit is set. After the last piece the client shuts
 * down its write side; it reads the answers all along, until EOF. At most
 * MAX_PIECES writes: the server parses a pending head again from its start
 * on every read, so a 12 KiB head in thousands of pieces cost the fuzzer a
 * second per input and showed nothing new.
 *
 * Besides the sanitizers' findings, these abort:
 *   - the connection does not end (EOF, its fiber gone) within HANG_NS of
 *     the input's start: a hang is a bug, every wait the server makes is
 *     bounded by its timeouts (and its linger after an error answer, 2 s);
 *   - answers that are not well-formed HTTP/1.1 responses, framed by
 *     Content-Length (204 and 304 may go without), or more of them than
 *     requests (see struct answers);
 *   - a request that came whole, before any that may end the connection
 *     (see frame_requests), left without its whole answer (unless a 2 ms
 *     timeout or a drain may cut it short). The client shuts its side
 *     once the answers owed have come (owed_wait), since an end while a
 *     handler runs is taken for the client leaving; with OPT_LEAVE (bit
 *     7) it shuts it right after the last piece, and the last request,
 *     if nothing follows it, is owed nothing: what it tests is that only
 *     that one is taken for gone, never one with a next request read
 *     ahead (a half-close after pipelined requests);
 *   - a file outside the root showing up in an answer;
 *   - a file descriptor left behind, or a connection still being served
 *     after its fiber ended.
 *
 * One runtime (one core) lives for the whole process on its own thread,
 * as in the real server; each input is a fiber spawned onto it from the
 * fuzzer's thread, which waits for it. A runtime per input would create
 * and tear down an io_uring each time (about 0.1 ms, more than the rest).
 * The HTTP server is made per input (runtime_http_server_create: memory,
 * no fd), from the demo's options as http-server would set them
 * (server_http_config) with the input's picks.
 * Delays are bounded: the routes' runtime_sleep is wrapped (linked with
 * -Wl,--wrap=runtime_sleep) to sleep at most SLEEP_CAP_NS, so /delay and
 * /limited answer at once whatever they are asked. Not reached: /limited's
 * 503 (one connection at a time always finds its slot free) and anything
 * that needs a second connection.
 *
 * Drains: runtime_drain would stop the one runtime every input shares, so
 * OPT_DRAINING and OPT_DRAIN_LATE set the server's stop flag instead
 * (http.h: stopping), which does to a connection what a drain does:
 * answers carry Connection: close, and one waiting for a new request
 * ends. A read already waiting is not woken by the flag: OPT_DRAIN_LATE
 * wakes it by moving the connection's read deadline into the past, from
 * this core. A drain wakes only a connection waiting for a new request;
 * this wakes any read, and may cut a request still arriving (under a
 * drain no answer is owed).
 *
 * The same file is built with the ordinary compiler into
 * tests/replay_http_server (tests/fuzz_replay.c), which replays the corpus
 * and the regressions in make check.
 *
 * Built with -DFUZZ_H2, it is fuzz_h2_server (and tests/replay_h2_server):
 * the client speaks HTTP/2 by prior knowledge (h2c). Before the input's
 * bytes it sends, in a write of their own, the connection preface and an
 * empty SETTINGS frame (H2_PREFIX); the input is the frames that follow,
 * split at 0xFF as above - or, with OPT_FRAMES (bit 7), sent whole, 0xFF
 * included, a write per frame as their heads' lengths cut them (HTTP/2
 * needs every byte: a window of 2^31-1, HPACK's integers). What the
 * server sends must be well-formed frames, checked as they arrive
 * (h2_frames.h), instead of HTTP/1.1 answers; the answers owed are
 * HTTP/1.1's check only. An end of stream ends an HTTP/2 connection, its
 * streams cancelled, so after the last piece the client waits until the
 * server is done (await_quiet) before it shuts its side. OPT_DRAIN_LATE
 * sets the stop flag before that wait (a handler that ends then wakes
 * the reader, which sends GOAWAY: the drain's own way) and moves the read
 * deadline after it. Byte 0's bit 1 is OPT_FEW_STREAMS there (two
 * handlers at once, h2_max_streams: the streams beyond are refused),
 * since --no-batch is HTTP/1.1's. The other checks, the secret and the
 * routes' files are the same.
 */
#define _GNU_SOURCE
#include "http.h"   /* the server's insides: stopping, limits */
#include "server.h"

#ifdef FUZZ_H2
#define FUZZ_NAME "fuzz_h2_server"
#else
#define FUZZ_NAME "fuzz_http_server"
#endif
#include "server_harness.h"
#ifdef FUZZ_H2
#include "h2.h"     /* a stream's insides: what its handler waits for */
#include "h2_frames.h"
#endif

#include <ctype.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PAUSE_NS (5 * MS)         /* an empty piece with OPT_SLOW */
#define SECRET_LEN 24              /* "~secret-", 16 random hex digits */

/* Byte 0 of the input. */
enum {
	OPT_PLAIN_RECV = 0x01,  /* --plain-recv */
#ifdef FUZZ_H2
	OPT_FEW_STREAMS = 0x02, /* two handlers at once (h2_max_streams) */
#else
	OPT_NO_BATCH = 0x02,    /* --no-batch */
#endif
	OPT_FILE_COPY = 0x04,   /* --file-copy */
	OPT_ACCESS_LOG = 0x08,  /* --access-log (to stdout, /dev/null here) */
	OPT_DRAINING = 0x10,    /* the server is stopping when it connects */
	OPT_DRAIN_LATE = 0x20,  /* a drain starts after the last piece (its
	                           reads woken: see the top) */
	OPT_SLOW = 0x40,        /* timeouts of 2 ms, and one pause allowed */
#ifdef FUZZ_H2
	OPT_FRAMES = 0x80,      /* a write per frame, 0xFF sent too */
#else
	OPT_LEAVE = 0x80,       /* the client shuts its side at once, not
	                           after the answers owed (see the top) */
#endif
	OPT_MASK = 0xff,
};

#ifdef FUZZ_H2
/* The h2c preface, then the client's SETTINGS (none: all defaults). */
#define H2_PREFIX "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" "\0\0\0\4\0\0\0\0\0"
#define FEW_STREAMS 2
#define QUIET_NS (SLEEP_CAP_NS)   /* see await_quiet */
#define QUIET_ROUNDS 50
#endif

static unsigned serving;       /* connections in runtime_http_serve_conn */
static char top_dir[256];       /* holds secret.txt and root/ */
static char root_dir[300];
static struct fd_snapshot {    /* fds below FD_SCAN between inputs */
	bool taken;
	bool open[FD_SCAN];
	char what[FD_SCAN][80];    /* readlink of /proc/self/fd/N */
} fds_between;
static char secret[SECRET_LEN + 1]; /* in a file just outside the root */

#ifndef FUZZ_H2
/* The requests in what the client sends, framed as the server frames
 * them: the head by runtime__http_parse_head, then the body by Content-Length or
 * chunked. */
struct requests {
	bool *head_only;        /* per complete head: a HEAD request */
	size_t heads;           /* complete heads */
	size_t complete;        /* of them, with their whole body */
	size_t owed;            /* the complete ones up to the first that
	                           may end the connection: each must be
	                           answered */
	bool ends_whole;        /* the bytes end with a complete request */
};
#endif

struct job {
	const uint8_t *data;
	size_t size;
	unsigned opt;
	int fd;                 /* the client's end */
	int server_fd;          /* the server's, until its connection has it */
	struct runtime_conn *conn; /* the server's while it serves it */
	uint64_t deadline;
#ifdef FUZZ_H2
	uint32_t frame_max;     /* the largest frame the client allows */
	runtime_http_handler *route; /* the demo's handler (see tracked) */
	void *route_arg;
	size_t received;        /* bytes the reader has had */
	bool closed;            /* it has read the end */
#else
	struct requests q;
	struct owed_wait w;     /* the answers the writer waits for */
	bool owed_checked;      /* no timeouts or drains that may cut it short */
	size_t answered;        /* answers other than 1xx, whole */
#endif
	sem_t done;
};

static void describe_fd(int fd, char *out, size_t cap)
{
	char path[32];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, out, cap - 1);
	out[n > 0 ? n : 0] = '\0';
}

/* The same fds open as between the first inputs, or fail naming each fd
 * that was opened (a leak) or closed (someone else's fd closed: a double
 * close). */
static void check_fds(void)
{
	bool now[FD_SCAN];
	char what[80];
	bool same = true;

	scan_fds(now);
	if (!fds_between.taken) {
		memcpy(fds_between.open, now, sizeof(now));
		for (int i = 0; i < FD_SCAN; i++)
			if (now[i])
				describe_fd(i, fds_between.what[i], sizeof(fds_between.what[i]));
		fds_between.taken = true;
		return;
	}
	for (int i = 0; i < FD_SCAN; i++) {
		if (now[i] == fds_between.open[i])
			continue;
		same = false;
		describe_fd(i, what, sizeof(what));
		fprintf(stderr, FUZZ_NAME ": fd %d %s (%s)\n", i,
		        now[i] ? "open, a leak" : "closed by someone", now[i] ? what : fds_between.what[i]);
	}
	if (!same)
		fail("a file descriptor leaked, or another's was closed");
}

/* ------------------------------------------------------------ the client */

/* The last bytes the server sent: a secret may straddle reads. */
struct seam {
	char tail[SECRET_LEN - 1];
	size_t tail_len;
};

/*
 * The secret in p[0..n)? Not by memmem: libFuzzer hooks it, learns the
 * needle and sends it to /echo, which answers it back. The secret is
 * random, so that no saved input holds it, and starts with a byte no file
 * in the root has, so that memchr skips to the candidates.
 */
static bool has_secret(const char *p, size_t n)
{
	const char *end = p + n, *c = p;

	while (end - c >= SECRET_LEN &&
	       (c = memchr(c, secret[0], (size_t)(end - c) - SECRET_LEN + 1))) {
		size_t k = 1;
		while (k < SECRET_LEN && c[k] == secret[k])
			k++;
		if (k == SECRET_LEN)
			return true;
		c++;
	}
	return false;
}

/* The secret in p[0..n), or across the seam with the bytes before. */
static void check_secret(struct seam *a, const char *p, size_t n)
{
	const size_t cap = sizeof(a->tail);
	char seam[2 * sizeof(a->tail)];
	size_t head = n < cap ? n : cap;

	memcpy(seam, a->tail, a->tail_len);
	memcpy(seam + a->tail_len, p, head);
	if (has_secret(seam, a->tail_len + head) || has_secret(p, n))
		fail("a file outside the root was served");
	if (n >= cap) { /* the tail: the last cap bytes of tail + p */
		memcpy(a->tail, p + n - cap, cap);
		a->tail_len = cap;
	} else {
		size_t keep = a->tail_len + n > cap ? cap - n : a->tail_len;
		memmove(a->tail, a->tail + a->tail_len - keep, keep);
		memcpy(a->tail + keep, p, n);
		a->tail_len = keep + n;
	}
}

/* p[0..n) without its markers, in a buffer of the caller's to free. */
static uint8_t *without_markers(const uint8_t *p, size_t n, size_t *len)
{
	uint8_t *out = malloc(n + 1);

	if (!out)
		fail("out of memory");
	*len = 0;
	for (size_t i = 0; i < n; i++)
		if (p[i] != MARKER)
			out[(*len)++] = p[i];
	return out;
}

#ifndef FUZZ_H2
/* Past the body of req, which starts at in[*off]: false if it is not all
 * there or breaks the rules. */
static bool skip_body(const char *in, size_t len, size_t *off, const struct http_request *req,
                      char *scratch)
{
	struct http_chunked c;
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
		runtime__http_chunked_init(&c, &srv.http->limits);
		rc = runtime__http_chunked_decode(&c, in + *off, len - *off, scratch, &used, &made);
		*off += used;
		return rc == 1;
	}
}

/* Frame the bytes the client sends (the input without its markers). */
static void frame_requests(const uint8_t *data, size_t size, struct requests *q)
{
	static struct http_request req;
	char *in = malloc(size + 1), *scratch = malloc(size + 1);
	size_t len = 0, off = 0;
	bool closing = false;     /* a request asked to close after its answer */
	size_t whole = 0;         /* in[0..whole): complete requests */

	q->head_only = malloc(size / 4 + 1); /* a head is 16 bytes or more */
	if (!in || !scratch || !q->head_only)
		fail("out of memory");
	for (size_t i = 0; i < size; i++)
		if (data[i] != MARKER)
			in[len++] = (char)data[i];
	*q = (struct requests){ .head_only = q->head_only };
	while (off < len) {
		int rc = runtime__http_parse_head(in + off, len - off, &srv.http->limits, &req);
		if (rc <= 0)
			break;
		q->head_only[q->heads++] = req.method.len == 4 && !memcmp(req.method.p, "HEAD", 4);
		off += (size_t)rc;
		if (!skip_body(in, len, &off, &req, scratch))
			break;
		if (!closing)
			q->owed = q->complete + 1;
		q->complete++;
		closing |= may_end(&req);
		whole = off;
	}
	q->ends_whole = q->complete && whole == len;
	free(in);
	free(scratch);
}

#define ANSWER_HEAD_MAX 4096

/*
 * What the reader has seen of the answers, as they arrive. They must be
 * well-formed HTTP/1.1 responses, each with a Content-Length (no body for
 * 1xx, 204, 304 and HEAD; 204 and 304 may have no Content-Length, or the
 * length a 200 would have: RFC 9110 8.6), and at most one per request the
 * client sent whole, plus one: the answer to a request cut short or
 * refused, after which the server closes.
 */
struct answers {
	const struct requests *q;
	char head[ANSWER_HEAD_MAX];
	size_t head_len;
	uint64_t body_left;
	size_t finals;             /* answers other than 1xx */
};

/* A complete answer head, a->head[0..len): sets the body to skip. */
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
	bool head_only = a->finals <= a->q->heads && a->q->head_only[a->finals - 1];
	a->body_left = head_only || bodiless ? 0 : length;
}

static void check_answers(struct answers *a, const char *p, size_t n)
{
	while (n && !switched) {
		size_t k = (size_t)(n < a->body_left ? n : a->body_left);
		if (!k) { /* in a head: up to its blank line */
			size_t from = a->head_len > 3 ? a->head_len - 3 : 0;
			k = n < ANSWER_HEAD_MAX - 1 - a->head_len ? n : ANSWER_HEAD_MAX - 1 - a->head_len;
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
		} else {
			a->body_left -= k;
		}
		p += k;
		n -= k;
	}
}

/* Reads the answers until the server closes: the connection's end. An
 * answer may be cut short (the server's write deadline, or a reset when it
 * closes with input unread), so only what arrives is checked. */
static void *reader(void *arg)
{
	struct job *j = arg;
	static struct answers a;
	static struct seam seam;
	static char buf[64 * 1024];
	ssize_t n;

	a = (struct answers){ .q = &j->q };
	seam.tail_len = 0;
	runtime_deadline_set(j->deadline);
	while ((n = runtime_read(j->fd, buf, sizeof(buf))) > 0) {
		check_secret(&seam, buf, (size_t)n);
		check_answers(&a, buf, (size_t)n);
		owed_seen(&j->w, a.finals - (a.body_left > 0), false);
	}
	if (n == -ETIMEDOUT)
		fail("the server did not close the connection in time (hang)");
	if (n < 0 && n != -ECONNRESET)
		fail("reading the answers failed");
	j->answered = a.finals - (a.body_left > 0); /* the last one cut short */
	owed_seen(&j->w, j->answered, true);
	return NULL;
}

#else /* FUZZ_H2 */

/* The largest frame the server may send: what the client's bytes allow
 * (with OPT_FRAMES the input as it is, else without its markers). */
static uint32_t sent_frame_max(const struct job *j)
{
	size_t len;
	uint8_t *sent;
	uint32_t max;

	if (j->opt & OPT_FRAMES)
		return client_frame_max(j->data, j->size);
	sent = without_markers(j->data, j->size, &len);
	max = client_frame_max(sent, len);
	free(sent);
	return max;
}

/* Reads the frames until the server closes: the connection's end. A
 * frame may be cut short by a reset (the server closed with input
 * unread), or by a write deadline of 2 ms (OPT_SLOW). */
static void *reader(void *arg)
{
	struct job *j = arg;
	static struct frames f;
	static struct seam seam;
	static char buf[64 * 1024];
	ssize_t n;

	frames_init(&f, j->frame_max);
	seam.tail_len = 0;
	runtime_deadline_set(j->deadline);
	while ((n = runtime_read(j->fd, buf, sizeof(buf))) > 0) {
		check_secret(&seam, buf, (size_t)n);
		frames_check(&f, (const uint8_t *)buf, (size_t)n);
		j->received += (size_t)n;
	}
	j->closed = true;
	if (n == -ETIMEDOUT)
		fail("the server did not close the connection in time (hang)");
	if (n < 0 && n != -ECONNRESET)
		fail("reading the answers failed");
	frames_end(&f, n == -ECONNRESET || (j->opt & OPT_SLOW));
	frames_free(&f);
	return NULL;
}

static struct h2_stream *running[H2_MAX_STREAMS]; /* streams whose */
static unsigned nrunning;                          /* handlers run */

/* The demo's handler (job.route), its stream kept while it runs. */
static int tracked(struct runtime_http_request *req, struct runtime_http_response *res, void *arg)
{
	const struct job *j = arg;
	unsigned i;

	running[nrunning++] = req->h2;
	int rc = j->route(req, res, j->route_arg);
	for (i = 0; running[i] != req->h2; i++)
		;
	running[i] = running[--nrunning];
	return rc;
}

/* Does every handler that runs wait on its stream - for body bytes or
 * window that only the client could send, now that it has sent all? */
static bool handlers_wait_for_client(void)
{
	for (unsigned i = 0; i < nrunning; i++)
		if (!running[i]->out.waiter)
			return false;
	return true;
}

/* Wait until the server is done - nothing sent for QUIET_NS and every
 * handler waiting for the client - or has closed (QUIET_ROUNDS waits at
 * most): what the client asked is answered, as far as it can be, before
 * its end of stream ends the connection. Not by time alone: a file's
 * first read may wait for an io-wq thread longer than a quiet spell. */
static void await_quiet(const struct job *j)
{
	for (unsigned i = 0; i < QUIET_ROUNDS && !j->closed; i++) {
		size_t seen = j->received;
		__real_runtime_sleep(QUIET_NS);
		if (j->received == seen && handlers_wait_for_client())
			return;
	}
}

/* The bytes of the first frame at p, or all up to end if they are fewer. */
static size_t frame_cut(const uint8_t *p, const uint8_t *end)
{
	size_t left = (size_t)(end - p);

	if (left < FRAME_HEAD || left - FRAME_HEAD < get24(p))
		return left;
	return FRAME_HEAD + get24(p);
}

/* OPT_FRAMES: the input as it is, a write per frame; stop early if the
 * server has closed. */
static void write_frames(int fd, const struct job *j)
{
	const uint8_t *p = j->data, *end = j->data + j->size;
	unsigned pieces = 0;

	while (p < end) {
		size_t n = ++pieces < MAX_PIECES ? frame_cut(p, end) : (size_t)(end - p);
		ssize_t rc = runtime_write_all(fd, p, n, NULL);
		if (rc == -ETIMEDOUT)
			fail("the server stopped reading (hang)");
		if (rc < 0)
			return; /* -EPIPE, -ECONNRESET: it closed, as it may */
		runtime_yield();
		p += n;
	}
}
#endif /* FUZZ_H2 */

/* p[0..n) without its markers, in one write. */
static ssize_t write_rest(int fd, const uint8_t *p, size_t n)
{
	size_t len;
	uint8_t *rest = without_markers(p, n, &len);
	ssize_t rc = len ? runtime_write_all(fd, rest, len, NULL) : 0;

	free(rest);
	return rc;
}

/* Send the pieces; stop early if the server has closed. */
static void write_pieces(int fd, const struct job *j)
{
	const uint8_t *p = j->data, *end = j->data + j->size;
	bool may_pause = j->opt & OPT_SLOW; /* once */
	unsigned pieces = 0;

	while (p <= end) {
		const uint8_t *m = ++pieces < MAX_PIECES ? memchr(p, MARKER, (size_t)(end - p)) : NULL;
		size_t n = (size_t)((m ? m : end) - p);
		ssize_t rc = 0;
		if (!m) {
			rc = write_rest(fd, p, n); /* the last piece */
		} else if (n) {
			rc = runtime_write_all(fd, p, n, NULL);
		} else if (may_pause) { /* an empty piece */
			rc = __real_runtime_sleep(PAUSE_NS);
			may_pause = false;
		}
		if (rc == -ETIMEDOUT)
			fail("the server stopped reading (hang)");
		if (rc < 0)
			return; /* -EPIPE, -ECONNRESET: it closed, as it may */
		if (!m)
			break;
		runtime_yield();
		p = m + 1;
	}
}

/* What the client sends. For HTTP/2: its prefix first, in a write of its
 * own, and after the input a wait for the server to be done (the stop
 * flag set before it with OPT_DRAIN_LATE: see the top); for HTTP/1.1 a
 * wait for the answers owed, but with OPT_LEAVE. */
static void send_input(int fd, struct job *j)
{
#ifdef FUZZ_H2
	ssize_t rc = runtime_write_all(fd, H2_PREFIX, sizeof(H2_PREFIX) - 1, NULL);
	if (rc == -ETIMEDOUT)
		fail("the server stopped reading (hang)");
	if (rc < 0)
		return; /* it closed, as it may (draining) */
	runtime_yield();
	if (j->opt & OPT_FRAMES)
		write_frames(fd, j);
	else
		write_pieces(fd, j);
	if (j->opt & OPT_DRAIN_LATE)
		atomic_store(&srv.http->stopping, true);
	await_quiet(j);
#else
	write_pieces(fd, j);
	if (j->owed_checked && !(j->opt & OPT_LEAVE))
		owed_wait(&j->w, j->q.owed);
#endif
}

/* ------------------------------------------------------------ one input */

/* The connection's fiber, as runtime_http_serve would run it: a
 * connection over the fd (plain_recv as runtime_serve would open it),
 * served by the library, then closed. */
static void *serve(void *arg)
{
	struct job *j = arg;
	struct runtime_conn *conn;

	if (runtime_conn_open(&conn, j->server_fd, srv.opt.plain_recv ? RUNTIME_CONN_PLAIN_RECV : 0) < 0) {
		runtime_close(j->server_fd);
		return NULL;
	}
	j->conn = conn;
	serving++;
	if (runtime_http_serve_conn(srv.http, conn) < 0)
		fail("runtime_http_serve_conn refused a connection");
	serving--;
	j->conn = NULL;
	runtime_conn_close(conn);
	return NULL;
}

/* This input's server: the demo's options with the input's picks, as
 * http-server would make it. */
static void make_server(struct job *j)
{
	struct runtime_http_server_config cfg;
	unsigned opt = j->opt;
	uint64_t timeout = opt & OPT_SLOW ? SLOW_TIMEOUT_MS : FAST_TIMEOUT_MS;

	srv.opt.plain_recv = opt & OPT_PLAIN_RECV;
#ifndef FUZZ_H2
	srv.opt.no_batch = opt & OPT_NO_BATCH;
#endif
	srv.opt.file_copy = opt & OPT_FILE_COPY;
	srv.opt.access_log = opt & OPT_ACCESS_LOG ? RUNTIME_HTTP_LOG_JSON : 0;
	srv.opt.header_timeout_ms = srv.opt.idle_timeout_ms = timeout;
	server_http_config(&srv, &cfg);
#ifdef FUZZ_H2
	if (opt & OPT_FEW_STREAMS)
		cfg.h2_max_streams = FEW_STREAMS;
	j->route = cfg.handler;
	j->route_arg = cfg.arg;
	cfg.handler = tracked;
	cfg.arg = j;
#endif
	if (runtime_http_server_create(srv.rt, &cfg, &srv.http) < 0)
		fail("runtime_http_server_create");
	metrics_make();
	atomic_store(&srv.http->stopping, (opt & OPT_DRAINING) != 0);
}

/* A drain, as far as one connection sees it (see the top): the stop flag,
 * and a read it waits in woken. From this core: the connection's. */
static void drain_late(struct job *j)
{
	atomic_store(&srv.http->stopping, true);
	if (j->conn)
		runtime_conn_set_read_deadline(j->conn, 1);
}

/* One connection: the server's fiber on one end, this fiber writing and
 * a reader fiber reading on the other. */
static void drive(void *arg)
{
	struct job *j = arg;
	struct runtime_fiber *server, *rd;
	int sv[2];

	if (!fds_between.taken) /* the first input: the runtime's ring is open by now */
		check_fds();
	runtime_deadline_set(j->deadline);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		fail("socketpair");
	make_server(j);
#ifdef FUZZ_H2
	j->frame_max = sent_frame_max(j);
#else
	frame_requests(j->data, j->size, &j->q);
	switched = false;
	/* A draining server may close before it reads anything. */
	j->owed_checked = !(j->opt & (OPT_SLOW | OPT_DRAINING | OPT_DRAIN_LATE));
	if ((j->opt & OPT_LEAVE) && j->q.ends_whole && j->q.owed == j->q.complete)
		j->q.owed--; /* its client may be taken to have left */
#endif
	j->fd = sv[0];
	j->server_fd = sv[1];
	if (runtime_fiber_spawn(srv.rt, &server, serve, j) < 0 ||
	    runtime_fiber_spawn(srv.rt, &rd, reader, j) < 0)
		fail("spawn");
	send_input(sv[0], j);
	if (j->opt & OPT_DRAIN_LATE)
		drain_late(j);
	shutdown(sv[0], SHUT_WR); /* not the ring's: io_uring runs it on an io-wq thread */
	join_or_fail(rd, "the server did not close the connection in time (hang)");
	join_or_fail(server, "the connection's fiber did not end in time (hang)");
#ifndef FUZZ_H2
	if (j->owed_checked && !switched && j->answered < j->q.owed)
		fail("a request that came whole got no answer, or part of one");
	free(j->q.head_only);
#endif
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct job j = { .data = data + (size > 0), .size = size ? size - 1 : 0,
	                 .opt = size ? data[0] & OPT_MASK : 0 };
	struct timespec until;

	j.deadline = runtime_now() + HANG_NS;
	sem_init(&j.done, 0, 0);
	if (runtime_spawn(srv.rt, drive, &j) < 0)
		fail("spawn");
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += STUCK_S;
	while (sem_timedwait(&j.done, &until) < 0)
		if (errno != EINTR)
			fail("the runtime stopped answering (stuck)");
	sem_destroy(&j.done);
	return 0;
}

/* ------------------------------------------------------- the set-up */

static void make_secret(void)
{
	uint8_t r[(SECRET_LEN - 8) / 2];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		fail("getrandom");
	memcpy(secret, "~secret-", 8);
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(secret + 8 + 2 * i, 3, "%02x", r[i]);
}

static void write_file(const char *dir, const char *name, const char *text, size_t size)
{
	char path[512];
	size_t len = strlen(text);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "w")))
		fail("cannot create the root's files");
	for (size_t done = 0; done < size; done += len)
		fwrite(text, 1, size - done < len ? size - done : len, f);
	fclose(f);
}

/* top/secret.txt (a random secret), and the root: small files, one in a
 * subdirectory, an empty one, one just large enough to be read and sent
 * in steps (over 64 KiB), one just large enough to be spliced (over
 * 256 KiB), and symlinks that point out of the root. */
static void make_root(void)
{
	const char *tmp = getenv("TMPDIR");
	char *root = root_dir, path[600];

	snprintf(top_dir, sizeof(top_dir), "%s/" FUZZ_NAME ".XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(top_dir))
		fail("mkdtemp");
	make_secret();
	write_file(top_dir, "secret.txt", secret, SECRET_LEN);
	snprintf(root, sizeof(root_dir), "%s/root", top_dir);
	snprintf(path, sizeof(path), "%s/sub", root);
	if (mkdir(root, 0700) < 0 || mkdir(path, 0700) < 0)
		fail("mkdir");
	write_file(root, "index.html", "<p>hello</p>\n", 13);
	write_file(root, "hello.txt", "hello\n", 6);
	write_file(root, "sub/data.json", "{\"a\":1}\n", 8);
	write_file(root, "empty.txt", "", 0);
	write_file(root, "mid.bin", "0123456789abcdef", 64 * 1024 + 1);
	write_file(root, "big.bin", "0123456789abcdef", 256 * 1024 + 1);
	snprintf(path, sizeof(path), "%s/out.txt", root);
	if (symlink("../secret.txt", path) < 0)
		fail("symlink");
	snprintf(path, sizeof(path), "%s/up", root);
	if (symlink("..", path) < 0)
		fail("symlink");
	srv.root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (srv.root_fd < 0)
		fail("open root");
}

static void remove_root(void)
{
	static const char *const names[] = {
		"root/index.html", "root/hello.txt", "root/sub/data.json", "root/sub",
		"root/empty.txt", "root/mid.bin", "root/big.bin", "root/out.txt", "root/up",
		"root", "secret.txt", "",
	};
	char path[600];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", top_dir, names[i]);
		if (remove(path) < 0)
			perror(path);
	}
}

/* At exit: the runtime stops, then the root goes. */
static void finish(void)
{
	stop_runtime();
	close(srv.root_fd);
	remove_root();
}

/* The server as http-server would be started with --root (a fresh one),
 * --limit 1, --body-max 4096; timeouts and the rest per input
 * (make_server). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	(void)argc;
	(void)argv;
	start_symbolizer();
	if (null < 0 || dup2(null, 1) < 0) /* the access log */
		fail("/dev/null");
	close(null);
	srv.opt = (struct options){ .host = "socketpair", .cores = 1, .limit = 1,
		.max_conns = 1, .body_max = 4096, .header_timeout_ms = FAST_TIMEOUT_MS,
		.idle_timeout_ms = FAST_TIMEOUT_MS };
	make_root();
	srv.opt.root = root_dir;
	start_runtime();
	atexit(finish);
	return 0;
}
