/* SPDX-License-Identifier: MIT */
/*
 * check_bufio - the toolkit's buffered reader and writer, over a scripted
 * in-memory transport (which counts its calls, so that a test can tell a
 * zero-copy line from a copied one and one writev from many) and over
 * real sockets and receive streams.
 *
 * Reader: lines handed out in place when the transport's peek holds them,
 * assembled when they are split, -EMSGSIZE past max with the bytes still
 * readable, -ENODATA at end of stream mid-line with the bytes still
 * readable, read_exact across many small writes, peek and discard, and the
 * flush of a tied writer before a wait (a request/response exchange that
 * would deadlock without it). Writer: small writes batched into one
 * writev, a large write sent with the buffered bytes without a copy,
 * short writes, sticky errors, printf. The stream accessors
 * (runtime_stream_peek/consume/fd), the transports' constructors, and bad
 * input everywhere.
 */
#include "testutil.h"

#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

/* --------------------------------------------------- a scripted transport */

#define MAX_CHUNKS 64

struct mem {
	const char *chunk[MAX_CHUNKS]; /* what arrives, one piece per read */
	size_t len[MAX_CHUNKS];
	int n, next;
	size_t off;                    /* read of chunk[next] */
	int end_rc;                    /* after the chunks: 0 (EOF) or -errno */
	int reads, peeks, consumes, writevs, closes;
	size_t write_max;              /* 0: no limit; else short writes */
	int write_rc;                  /* nonzero: every writev fails so */
	const void *last_iov_base[4];  /* of the last writev */
	int last_iovcnt;
	char out[1 << 16];
	size_t out_len;
};

static void mem_add(struct mem *m, const char *s)
{
	ck_assert_int_lt(m->n, MAX_CHUNKS);
	m->chunk[m->n] = s;
	m->len[m->n++] = strlen(s);
}

static size_t mem_left(const struct mem *m)
{
	return m->next < m->n ? m->len[m->next] - m->off : 0;
}

static void mem_skip(struct mem *m, size_t k)
{
	m->off += k;
	if (m->next < m->n && m->off == m->len[m->next]) {
		m->next++;
		m->off = 0;
	}
}

static ssize_t mem_read(void *ctx, void *buf, size_t len)
{
	struct mem *m = ctx;
	size_t k = mem_left(m);

	m->reads++;
	if (!k)
		return m->end_rc;
	k = k < len ? k : len;
	memcpy(buf, m->chunk[m->next] + m->off, k);
	mem_skip(m, k);
	return (ssize_t)k;
}

static size_t mem_peek(void *ctx, const void **data)
{
	struct mem *m = ctx;

	m->peeks++;
	*data = mem_left(m) ? m->chunk[m->next] + m->off : NULL;
	return mem_left(m);
}

static void mem_consume(void *ctx, size_t n)
{
	struct mem *m = ctx;

	m->consumes++;
	ck_assert_uint_le(n, mem_left(m));
	mem_skip(m, n);
}

static ssize_t mem_writev(void *ctx, const struct iovec *iov, int iovcnt)
{
	struct mem *m = ctx;
	size_t done = 0;

	m->writevs++;
	m->last_iovcnt = iovcnt;
	for (int i = 0; i < iovcnt && i < 4; i++)
		m->last_iov_base[i] = iov[i].iov_base;
	if (m->write_rc)
		return m->write_rc;
	for (int i = 0; i < iovcnt; i++) {
		size_t k = iov[i].iov_len;
		if (m->write_max && done + k > m->write_max)
			k = m->write_max - done;
		ck_assert_uint_le(m->out_len + k, sizeof(m->out));
		if (k)
			memcpy(m->out + m->out_len, iov[i].iov_base, k);
		m->out_len += k;
		done += k;
	}
	return (ssize_t)done;
}

static int mem_close_write(void *ctx)
{
	((struct mem *)ctx)->closes++;
	return 0;
}

static const struct runtime_transport_ops mem_ops = {
	.read = mem_read, .writev = mem_writev, .close_write = mem_close_write,
};
static const struct runtime_transport_ops mem_peek_ops = {
	.read = mem_read, .writev = mem_writev, .peek = mem_peek, .consume = mem_consume,
	.close_write = mem_close_write,
};

static struct runtime_transport mem_transport(struct mem *m, bool peek)
{
	return (struct runtime_transport){ peek ? &mem_peek_ops : &mem_ops, m };
}

static struct runtime_reader *new_reader(const struct runtime_transport *t, size_t size)
{
	struct runtime_reader *r;

	ck_assert_int_eq(runtime_reader_create(&r, t, size), 0);
	return r;
}

static struct runtime_writer *new_writer(const struct runtime_transport *t, size_t size)
{
	struct runtime_writer *w;

	ck_assert_int_eq(runtime_writer_create(&w, t, size), 0);
	return w;
}

/* The next line must be want (its length and bytes). */
static const char *expect_line(struct runtime_reader *r, size_t max, const char *want)
{
	const char *line = NULL;
	ssize_t n = runtime_reader_read_line(r, max, &line);

	ck_assert_int_eq(n, (ssize_t)strlen(want));
	ck_assert_msg(memcmp(line, want, (size_t)n) == 0, "line %.*s, want %s", (int)n, line, want);
	return line;
}

/* ------------------------------------------------------ lines in place */

/* Lines that lie whole in the peeked region are handed out in place: the
 * pointers are the transport's own bytes, and no read is made. */
START_TEST(test_bufio_lines_in_place_cost_no_copy)
{
	struct mem m = { 0 };
	const char *text = "a\nbb\r\nccc\n";

	mem_add(&m, text);
	struct runtime_transport t = mem_transport(&m, true);
	struct runtime_reader *r = new_reader(&t, 64);
	ck_assert_ptr_eq(expect_line(r, 64, "a\n"), text);
	ck_assert_ptr_eq(expect_line(r, 64, "bb\r\n"), text + 2);
	ck_assert_uint_eq(runtime_reader_buffered(r), 4);
	ck_assert_ptr_eq(expect_line(r, 64, "ccc\n"), text + 6);
	ck_assert_int_eq(m.reads, 0);
	ck_assert_int_eq(m.consumes, 2); /* the third is consumed at the next call */
	const char *line;
	ck_assert_int_eq(runtime_reader_read_line(r, 64, &line), 0); /* EOF */
	ck_assert_int_eq(m.consumes, 3);
	ck_assert_int_eq(runtime_reader_read_line(r, 64, &line), 0);
	runtime_reader_destroy(r);
}
END_TEST

/* A line split across arrivals is put together (copied only up to its
 * delimiter: the next line is in place again), with and without peek. */
START_TEST(test_bufio_split_line_is_assembled)
{
	for (int peek = 0; peek < 2; peek++) {
		struct mem m = { 0 };
		const char *third = "ld\nnext\n";
		mem_add(&m, "hel");
		mem_add(&m, "lo\nwor");
		mem_add(&m, third);
		struct runtime_transport t = mem_transport(&m, peek);
		struct runtime_reader *r = new_reader(&t, 16);
		expect_line(r, 16, "hello\n");
		expect_line(r, 16, "world\n");
		const char *next = expect_line(r, 16, "next\n");
		if (peek) {
			ck_assert_ptr_eq(next, third + 3);
			ck_assert_int_eq(m.reads, 0);
		}
		const char *line;
		ck_assert_int_eq(runtime_reader_read_line(r, 16, &line), 0);
		runtime_reader_destroy(r);
	}
}
END_TEST

/* ------------------------------------------------------------- limits */

/* No delimiter within max: -EMSGSIZE, and every byte stays readable. */
START_TEST(test_bufio_line_over_max_is_emsgsize_and_kept)
{
	for (int peek = 0; peek < 2; peek++) {
		struct mem m = { 0 };
		mem_add(&m, "abcdef");
		mem_add(&m, "ghij\nk\n");
		struct runtime_transport t = mem_transport(&m, peek);
		struct runtime_reader *r = new_reader(&t, 32);
		const char *line;
		ck_assert_int_eq(runtime_reader_read_line(r, 5, &line), -EMSGSIZE);
		ck_assert_int_eq(runtime_reader_read_line(r, 5, &line), -EMSGSIZE);
		ck_assert_uint_ge(runtime_reader_buffered(r), 5);
		expect_line(r, 11, "abcdefghij\n");
		expect_line(r, 5, "k\n");
		runtime_reader_destroy(r);
	}
	/* The bytes can also be read or discarded. */
	struct mem m = { 0 };
	mem_add(&m, "0123456789\nok\n");
	struct runtime_transport t = mem_transport(&m, true);
	struct runtime_reader *r = new_reader(&t, 32);
	const char *line;
	char buf[4];
	ck_assert_int_eq(runtime_reader_read_line(r, 4, &line), -EMSGSIZE);
	ck_assert_int_eq(runtime_reader_read(r, buf, 4), 4);
	ck_assert_int_eq(memcmp(buf, "0123", 4), 0);
	ck_assert_int_eq(runtime_reader_discard(r, 7), 7);
	expect_line(r, 4, "ok\n");
	runtime_reader_destroy(r);
}
END_TEST

/* End of stream after some bytes and before a delimiter: -ENODATA, the
 * bytes still readable, then 0. An error is returned as it is, with the
 * bytes kept too. */
START_TEST(test_bufio_eof_mid_line_is_enodata_and_kept)
{
	for (int peek = 0; peek < 2; peek++) {
		struct mem m = { 0 };
		mem_add(&m, "x\nab");
		mem_add(&m, "c");
		struct runtime_transport t = mem_transport(&m, peek);
		struct runtime_reader *r = new_reader(&t, 32);
		const char *line;
		char buf[8];
		expect_line(r, 32, "x\n");
		ck_assert_int_eq(runtime_reader_read_line(r, 32, &line), -ENODATA);
		ck_assert_int_eq(runtime_reader_read_line(r, 32, &line), -ENODATA);
		ck_assert_uint_eq(runtime_reader_buffered(r), 3);
		ck_assert_int_eq(runtime_reader_read(r, buf, sizeof(buf)), 3);
		ck_assert_int_eq(memcmp(buf, "abc", 3), 0);
		ck_assert_int_eq(runtime_reader_read_line(r, 32, &line), 0);
		ck_assert_int_eq(runtime_reader_read(r, buf, sizeof(buf)), 0);
		int reads = m.reads;
		ck_assert_int_eq(runtime_reader_read(r, buf, sizeof(buf)), 0);
		ck_assert_int_eq(m.reads, reads); /* end of stream is not asked again */
		runtime_reader_destroy(r);
	}
	struct mem m = { .end_rc = -ECONNRESET };
	mem_add(&m, "abc");
	struct runtime_transport t = mem_transport(&m, true);
	struct runtime_reader *r = new_reader(&t, 32);
	const char *line;
	char buf[8];
	ck_assert_int_eq(runtime_reader_read_line(r, 32, &line), -ECONNRESET);
	ck_assert_int_eq(runtime_reader_read(r, buf, sizeof(buf)), 3);
	ck_assert_int_eq(runtime_reader_read(r, buf, sizeof(buf)), -ECONNRESET);
	runtime_reader_destroy(r);
}
END_TEST

/* ------------------------------------------------- read, peek, discard */

/* read: what is buffered first, then one transport read; a read at least
 * as large as the buffer goes straight into the caller's memory. */
START_TEST(test_bufio_read_buffered_then_one_read)
{
	struct mem m = { 0 };
	mem_add(&m, "line\nrest");
	mem_add(&m, "0123456789abcdef0123");
	struct runtime_transport t = mem_transport(&m, false);
	struct runtime_reader *r = new_reader(&t, 16);
	char buf[64];
	expect_line(r, 16, "line\n");
	ck_assert_int_eq(m.reads, 1);
	ck_assert_int_eq(runtime_reader_read(r, buf, sizeof(buf)), 4); /* "rest", no read */
	ck_assert_int_eq(m.reads, 1);
	ck_assert_int_eq(runtime_reader_read(r, buf, sizeof(buf)), 20); /* straight in */
	ck_assert_int_eq(memcmp(buf, "0123456789abcdef0123", 20), 0);
	ck_assert_int_eq(runtime_reader_read(r, buf, 0), 0);
	ck_assert_int_eq(runtime_reader_read(r, buf, sizeof(buf)), 0);
	runtime_reader_destroy(r);
}
END_TEST

START_TEST(test_bufio_peek_and_discard)
{
	for (int peek = 0; peek < 2; peek++) {
		struct mem m = { 0 };
		mem_add(&m, "ab");
		mem_add(&m, "cdef");
		mem_add(&m, "ghijklmnop");
		struct runtime_transport t = mem_transport(&m, peek);
		struct runtime_reader *r = new_reader(&t, 8);
		const char *p;
		ck_assert_int_eq(runtime_reader_peek(r, 2, &p), 2);
		ck_assert_int_eq(memcmp(p, "ab", 2), 0);
		ck_assert_int_eq(runtime_reader_peek(r, 5, &p), 5); /* waits for more */
		ck_assert_int_eq(memcmp(p, "abcde", 5), 0);
		ck_assert_int_eq(runtime_reader_peek(r, 0, &p), 0);
		ck_assert_int_eq(runtime_reader_discard(r, 3), 3);
		ck_assert_int_eq(runtime_reader_peek(r, 1, &p), 1);
		ck_assert_int_eq(*p, 'd');
		ck_assert_int_eq(runtime_reader_discard(r, 9), 9); /* into the third */
		ck_assert_int_eq(runtime_reader_peek(r, 8, &p), 4); /* end of stream */
		ck_assert_int_eq(memcmp(p, "mnop", 4), 0);
		ck_assert_int_eq(runtime_reader_discard(r, 100), 4);
		ck_assert_int_eq(runtime_reader_peek(r, 8, &p), 0);
		ck_assert_int_eq(runtime_reader_discard(r, 1), 0);
		runtime_reader_destroy(r);
	}
}
END_TEST

/* ---------------------------------------------------- real sockets */

struct dribble {
	int fd;
	int pieces;
	size_t piece;
};

/* Many small writes, a yield between each: the reader sees them arrive in
 * many pieces. */
static void *dribble_main(void *arg)
{
	struct dribble *d = arg;
	char buf[64];

	for (int i = 0; i < d->pieces; i++) {
		for (size_t k = 0; k < d->piece; k++)
			buf[k] = (char)(i * d->piece + k);
		ck_assert_int_eq(runtime_write_all(d->fd, buf, d->piece, NULL), (ssize_t)d->piece);
		runtime_yield();
	}
	return NULL;
}

static void read_exact_main(void *arg)
{
	bool stream = arg != NULL;
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct runtime_stream *s = NULL;
	struct runtime_transport t;
	if (stream) {
		ck_assert_int_eq(runtime_stream_open(&s, sv[0]), 0);
		ck_assert_int_eq(runtime_transport_stream(&t, s), 0);
	} else {
		ck_assert_int_eq(runtime_transport_fd(&t, sv[0]), 0);
	}
	struct dribble d = { sv[1], 1000, 3 };
	struct runtime_fiber *w = start(dribble_main, &d);
	struct runtime_reader *r = new_reader(&t, 64);
	static char buf[3000];
	size_t done = 1;
	ck_assert_int_eq(runtime_reader_read_exact(r, buf, sizeof(buf), &done), 3000);
	ck_assert_uint_eq(done, 3000);
	size_t bad = 0;
	while (bad < sizeof(buf) && buf[bad] == (char)bad)
		bad++;
	ck_assert_uint_eq(bad, sizeof(buf));
	join(w);
	ck_assert_int_eq(runtime_write_all(sv[1], "xy", 2, NULL), 2);
	close(sv[1]);
	ck_assert_int_eq(runtime_reader_read_exact(r, buf, 5, &done), -ENODATA);
	ck_assert_uint_eq(done, 2);
	ck_assert_int_eq(runtime_reader_read_exact(r, buf, 5, &done), 0);
	ck_assert_uint_eq(done, 0);
	runtime_reader_destroy(r);
	ck_assert_int_eq(runtime_stream_close(s), 0);
	close(sv[0]);
}

START_TEST(test_bufio_read_exact_across_many_small_writes)
{
	ck_assert_int_eq(run_fiber(NULL, read_exact_main, NULL), 0);
	ck_assert_int_eq(run_fiber(NULL, read_exact_main, (void *)1), 0);
}
END_TEST

/* Wait until the stream has queued at least n bytes. */
static void await_queued(struct runtime_stream *s, size_t n)
{
	for (int i = 0; i < 20000 && runtime_stream_buffered(s) < n; i++)
		runtime_sleep(MS);
	ck_assert_uint_ge(runtime_stream_buffered(s), n);
}

/* Over a real receive stream, lines come from the stream's own buffers:
 * the pointer handed out is the one runtime_stream_peek shows, and the
 * buffer goes back once the next call consumed it. Destroying the reader
 * consumes a line it handed out, so the stream reads on after it. */
static void stream_zero_copy_main(void *arg)
{
	int sv[2];
	struct runtime_stream *s;
	struct runtime_transport t;
	const void *head;

	(void)arg;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(runtime_stream_open(&s, sv[0]), 0);
	ck_assert_int_eq(runtime_transport_stream(&t, s), 0);
	struct runtime_reader *r = new_reader(&t, 256);
	ck_assert_int_eq(write(sv[1], "first\n", 6), 6);
	expect_line(r, 256, "first\n"); /* arms the stream: copied */
	ck_assert_int_eq(write(sv[1], "one\ntwo\nthree\ntail", 18), 18);
	await_queued(s, 18);
	const char *line = expect_line(r, 256, "one\n");
	ck_assert_int_eq(runtime_stream_peek(s, &head), 18);
	ck_assert_ptr_eq(head, line);
	line = expect_line(r, 256, "two\n");
	ck_assert_int_eq(runtime_stream_peek(s, &head), 14);
	ck_assert_ptr_eq(head, line);
	expect_line(r, 256, "three\n");
	runtime_reader_destroy(r);
	ck_assert_uint_eq(runtime_stream_buffered(s), 4);
	char buf[8];
	ck_assert_int_eq(runtime_stream_recv(s, buf, sizeof(buf)), 4);
	ck_assert_int_eq(memcmp(buf, "tail", 4), 0);
	ck_assert_int_eq(runtime_stream_close(s), 0);
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_bufio_stream_lines_come_from_its_buffers)
{
	ck_assert_int_eq(run_fiber(NULL, stream_zero_copy_main, NULL), 0);
}
END_TEST

/* The accessors' own contract: peek shows the head buffer only, consume
 * may cross buffers, too much is refused, and the fd is the socket. */
static void stream_accessors_main(void *arg)
{
	int sv[2];
	struct runtime_stream *s;
	const void *p = (void *)1;
	char buf[200];

	(void)arg;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(runtime_stream_open(&s, sv[0]), 0);
	ck_assert_int_eq(runtime_stream_fd(s), sv[0]);
	ck_assert_int_eq(runtime_stream_fd(NULL), -EINVAL);
	ck_assert_int_eq(runtime_stream_peek(s, &p), 0); /* nothing, and not armed */
	ck_assert_ptr_null(p);
	ck_assert_int_eq(runtime_stream_peek(NULL, &p), -EINVAL);
	ck_assert_int_eq(runtime_stream_peek(s, NULL), -EINVAL);
	ck_assert_int_eq(runtime_stream_consume(NULL, 0), -EINVAL);
	ck_assert_int_eq(runtime_stream_consume(s, 1), -EINVAL);
	ck_assert_int_eq(runtime_stream_consume(s, 0), 0);
	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	ck_assert_int_eq(runtime_stream_recv(s, buf, 1), 1); /* arms it */
	/* 64-byte buffers (the run's config): 150 bytes span three. */
	for (int i = 0; i < 150; i++)
		buf[i] = (char)i;
	ck_assert_int_eq(write(sv[1], buf, 150), 150);
	await_queued(s, 150);
	ssize_t n = runtime_stream_peek(s, &p);
	ck_assert_int_gt(n, 0);
	ck_assert_int_lt(n, 150);
	ck_assert_int_eq(memcmp(p, buf, (size_t)n), 0);
	ck_assert_int_eq(runtime_stream_consume(s, 151), -EINVAL);
	ck_assert_int_eq(runtime_stream_consume(s, 100), 0);
	ck_assert_uint_eq(runtime_stream_buffered(s), 50);
	n = runtime_stream_peek(s, &p);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(*(const char *)p, (char)100);
	ck_assert_int_eq(runtime_stream_consume(s, 50), 0);
	ck_assert_int_eq(runtime_stream_peek(s, &p), 0);
	ck_assert_int_eq(runtime_stream_close(s), 0);
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_bufio_stream_peek_consume_fd)
{
	struct runtime_config cfg;

	runtime_config_init(&cfg);
	cfg.stream_buffers = 64;
	cfg.stream_buffer_size = 64;
	ck_assert_int_eq(run_fiber(&cfg, stream_accessors_main, NULL), 0);
}
END_TEST

/* ------------------------------------------------------------- writer */

/* N small writes make no writev; the flush makes one. */
START_TEST(test_bufio_writer_batches_small_writes)
{
	struct mem m = { 0 };
	struct runtime_transport t = mem_transport(&m, false);
	struct runtime_writer *w = new_writer(&t, 4096);

	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(runtime_writer_write(w, "0123456789", 10), 10);
	ck_assert_int_eq(m.writevs, 0);
	ck_assert_uint_eq(runtime_writer_buffered(w), 1000);
	ck_assert_int_eq(runtime_writer_flush(w), 0);
	ck_assert_int_eq(m.writevs, 1);
	ck_assert_uint_eq(m.out_len, 1000);
	ck_assert_int_eq(memcmp(m.out + 990, "0123456789", 10), 0);
	ck_assert_uint_eq(runtime_writer_buffered(w), 0);
	ck_assert_int_eq(runtime_writer_flush(w), 0); /* nothing: no writev */
	ck_assert_int_eq(m.writevs, 1);
	runtime_writer_destroy(w);
}
END_TEST

/* A write larger than the free room goes out with the buffered bytes in
 * one writev, from the caller's memory; short writes are looped over. */
START_TEST(test_bufio_writer_large_write_joins_buffered_uncopied)
{
	static char big[10000];
	struct mem m = { 0 };
	struct runtime_transport t = mem_transport(&m, false);
	struct runtime_writer *w = new_writer(&t, 4096);

	memset(big, 'b', sizeof(big));
	ck_assert_int_eq(runtime_writer_write(w, "head", 4), 4);
	ck_assert_int_eq(runtime_writer_write(w, big, sizeof(big)), (ssize_t)sizeof(big));
	ck_assert_int_eq(m.writevs, 1);
	ck_assert_int_eq(m.last_iovcnt, 2);
	ck_assert_ptr_eq(m.last_iov_base[1], big);
	ck_assert_uint_eq(m.out_len, 4 + sizeof(big));
	ck_assert_int_eq(memcmp(m.out, "headbbb", 7), 0);
	ck_assert_uint_eq(runtime_writer_buffered(w), 0);
	runtime_writer_destroy(w);

	struct mem s = { .write_max = 7 };
	t = mem_transport(&s, false);
	w = new_writer(&t, 16);
	ck_assert_int_eq(runtime_writer_write(w, "0123456789", 10), 10);
	ck_assert_int_eq(runtime_writer_write(w, "abcdefghij", 10), 10);
	ck_assert_int_eq(s.writevs, 3); /* 20 bytes, 7 at a time */
	ck_assert_uint_eq(s.out_len, 20);
	ck_assert_int_eq(memcmp(s.out, "0123456789abcdefghij", 20), 0);
	runtime_writer_destroy(w);
}
END_TEST

/* After a writev error, every write and flush returns it. */
START_TEST(test_bufio_writer_error_is_sticky)
{
	struct mem m = { .write_rc = -EPIPE };
	struct runtime_transport t = mem_transport(&m, false);
	struct runtime_writer *w = new_writer(&t, 16);

	ck_assert_int_eq(runtime_writer_write(w, "abc", 3), 3);
	ck_assert_int_eq(runtime_writer_flush(w), -EPIPE);
	m.write_rc = 0;
	ck_assert_int_eq(runtime_writer_flush(w), -EPIPE);
	ck_assert_int_eq(runtime_writer_write(w, "d", 1), -EPIPE);
	ck_assert_int_eq(runtime_writer_printf(w, "%d", 1), -EPIPE);
	ck_assert_int_eq(m.writevs, 1);
	runtime_writer_destroy(w); /* drops the 3 bytes; never writes */
	ck_assert_int_eq(m.writevs, 1);
}
END_TEST

START_TEST(test_bufio_writer_printf)
{
	struct mem m = { 0 };
	struct runtime_transport t = mem_transport(&m, false);
	struct runtime_writer *w = new_writer(&t, 16);
	char longer[64];

	ck_assert_int_eq(runtime_writer_printf(w, "%s=%d;", "a", 42), 5);
	ck_assert_int_eq(m.writevs, 0);
	ck_assert_int_eq(runtime_writer_printf(w, "%s", "0123456789ab"), 12); /* flush first */
	ck_assert_int_eq(m.writevs, 1);
	ck_assert_uint_eq(runtime_writer_buffered(w), 12);
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	ck_assert_int_eq(runtime_writer_printf(w, "%s!", longer), 64); /* longer than the buffer */
	ck_assert_int_eq(runtime_writer_printf(w, "%s", ""), 0);
	ck_assert_int_eq(runtime_writer_flush(w), 0);
	ck_assert_uint_eq(m.out_len, 5 + 12 + 64);
	ck_assert_int_eq(memcmp(m.out, "a=42;0123456789abxxx", 20), 0);
	ck_assert_int_eq(m.out[m.out_len - 1], '!');
	runtime_writer_destroy(w);
}
END_TEST

/* --------------------------------------------------- flush before wait */

/* The server: read a line, answer it, flushed. */
static void *echo_lines(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct runtime_transport t;
	const char *line;
	ssize_t n;

	ck_assert_int_eq(runtime_transport_fd(&t, fd), 0);
	struct runtime_reader *r = new_reader(&t, 128);
	struct runtime_writer *w = new_writer(&t, 128);
	while ((n = runtime_reader_read_line(r, 128, &line)) > 0) {
		ck_assert_int_eq(runtime_writer_printf(w, "re: %.*s", (int)n, line), n + 4);
		ck_assert_int_eq(runtime_writer_flush(w), 0);
	}
	runtime_reader_destroy(r);
	runtime_writer_destroy(w);
	return (void *)(intptr_t)n;
}

/* A client writes its request to a buffered writer and reads the reply:
 * tied, the read flushes the request first; untied, the request stays in
 * the writer and the reply never comes (the deadline ends the wait). */
static void flush_before_wait_main(void *arg)
{
	int sv[2];
	struct runtime_transport t;
	const char *line;

	(void)arg;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	struct runtime_fiber *server = start(echo_lines, (void *)(intptr_t)sv[1]);
	ck_assert_int_eq(runtime_transport_fd(&t, sv[0]), 0);
	struct runtime_reader *r = new_reader(&t, 128);
	struct runtime_writer *w = new_writer(&t, 128);
	runtime_reader_flush_before_wait(r, w);
	for (int i = 0; i < 10; i++) {
		ck_assert_int_eq(runtime_writer_printf(w, "ping %d\n", i), 7);
		ck_assert_int_eq(runtime_reader_read_line(r, 128, &line), 11);
		ck_assert_int_eq(memcmp(line, "re: ping ", 9), 0);
	}
	runtime_reader_flush_before_wait(r, NULL);
	ck_assert_int_eq(runtime_writer_write(w, "lost?\n", 6), 6);
	runtime_deadline_set(runtime_now() + 100 * MS);
	ck_assert_int_eq(runtime_reader_read_line(r, 128, &line), -ETIMEDOUT);
	runtime_deadline_set(0);
	ck_assert_uint_eq(runtime_writer_buffered(w), 6); /* never went out */
	runtime_reader_flush_before_wait(r, w);
	ck_assert_int_eq(runtime_reader_read_line(r, 128, &line), 10); /* now it does */
	ck_assert_int_eq(memcmp(line, "re: lost?\n", 10), 0);
	shutdown(sv[0], SHUT_WR);
	ck_assert_int_eq(join(server), 0);
	runtime_reader_destroy(r);
	runtime_writer_destroy(w);
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_bufio_flush_before_wait_answers_request_response)
{
	ck_assert_int_eq(run_fiber(NULL, flush_before_wait_main, NULL), 0);
}
END_TEST

/* The flush's error is the read's, and no read is made. */
START_TEST(test_bufio_flush_error_is_returned_by_the_read)
{
	struct mem in = { 0 }, out = { .write_rc = -ECONNRESET };
	struct runtime_transport ti = mem_transport(&in, true), to = mem_transport(&out, false);
	struct runtime_reader *r = new_reader(&ti, 32);
	struct runtime_writer *w = new_writer(&to, 32);
	const char *line;
	char c;

	mem_add(&in, "buffered\n");
	runtime_reader_flush_before_wait(r, w);
	ck_assert_int_eq(runtime_writer_write(w, "req", 3), 3);
	expect_line(r, 32, "buffered\n"); /* no wait: no flush */
	ck_assert_int_eq(out.writevs, 0);
	ck_assert_int_eq(runtime_reader_read_line(r, 32, &line), -ECONNRESET);
	ck_assert_int_eq(runtime_reader_read(r, &c, 1), -ECONNRESET);
	ck_assert_int_eq(in.reads, 0);
	runtime_reader_destroy(r);
	runtime_writer_destroy(w);
}
END_TEST

/* --------------------------------------------- the reader as transport */

/* Through runtime_transport_reader, what the reader holds comes first
 * (in place, through peek), then the transport's bytes; writes pass
 * through. */
START_TEST(test_bufio_reader_transport_reads_buffered_first)
{
	struct mem m = { 0 };
	mem_add(&m, "HEAD\nbody");
	mem_add(&m, "-more");
	struct runtime_transport t = mem_transport(&m, false), v;
	struct runtime_reader *r = new_reader(&t, 32);
	const void *p;
	char buf[16];

	expect_line(r, 32, "HEAD\n");
	ck_assert_int_eq(runtime_transport_reader(&v, r), 0);
	ck_assert_uint_eq(v.ops->peek(v.ctx, &p), 4);
	ck_assert_int_eq(memcmp(p, "body", 4), 0);
	ck_assert_int_eq(v.ops->read_fd(v.ctx), -1); /* it holds bytes */
	v.ops->consume(v.ctx, 2);
	ck_assert_int_eq(v.ops->read(v.ctx, buf, sizeof(buf)), 2);
	ck_assert_int_eq(memcmp(buf, "dy", 2), 0);
	ck_assert_int_eq(v.ops->read(v.ctx, buf, sizeof(buf)), 5);
	ck_assert_int_eq(memcmp(buf, "-more", 5), 0);
	ck_assert_int_eq(v.ops->read(v.ctx, buf, sizeof(buf)), 0);
	struct iovec iov = { .iov_base = "out", .iov_len = 3 };
	ck_assert_int_eq(v.ops->writev(v.ctx, &iov, 1), 3);
	ck_assert_int_eq(v.ops->close_write(v.ctx), 0);
	ck_assert_int_eq(m.closes, 1);
	ck_assert_int_eq(v.ops->write_fd(v.ctx), -1);
	runtime_reader_destroy(r);
}
END_TEST

/* --------------------------------------------------------- bad input */

static ssize_t no_read(void *ctx, void *buf, size_t len)
{
	(void)ctx, (void)buf, (void)len;
	return -EIO;
}

START_TEST(test_bufio_bad_input_gets_clear_errors)
{
	struct mem m = { 0 };
	struct runtime_transport t = mem_transport(&m, true), bad;
	struct runtime_transport_ops read_only = { .read = no_read };
	struct runtime_transport_ops peek_alone = { .read = no_read, .peek = mem_peek };
	struct runtime_reader *r = (void *)1;
	struct runtime_writer *w = (void *)1;
	const char *line;
	char c;

	ck_assert_int_eq(runtime_reader_create(NULL, &t, 8), -EINVAL);
	ck_assert_int_eq(runtime_reader_create(&r, NULL, 8), -EINVAL);
	ck_assert_ptr_null(r);
	ck_assert_int_eq(runtime_reader_create(&r, &t, 0), -EINVAL);
	ck_assert_int_eq(runtime_reader_create(&r, &t, SIZE_MAX), -EINVAL);
	bad = (struct runtime_transport){ NULL, &m };
	ck_assert_int_eq(runtime_reader_create(&r, &bad, 8), -EINVAL);
	bad.ops = &peek_alone;
	ck_assert_int_eq(runtime_reader_create(&r, &bad, 8), -EINVAL);
	bad.ops = &read_only;
	ck_assert_int_eq(runtime_writer_create(&w, &bad, 8), -EINVAL);
	ck_assert_ptr_null(w);
	ck_assert_int_eq(runtime_writer_create(NULL, &t, 8), -EINVAL);
	ck_assert_int_eq(runtime_writer_create(&w, NULL, 8), -EINVAL);
	ck_assert_int_eq(runtime_writer_create(&w, &t, 0), -EINVAL);
	ck_assert_int_eq(runtime_writer_create(&w, &t, SIZE_MAX), -EINVAL);

	r = new_reader(&t, 8);
	mem_add(&m, "abc\n");
	ck_assert_int_eq(runtime_reader_read_until(r, '\n', 0, &line), -EINVAL);
	ck_assert_int_eq(runtime_reader_read_until(r, '\n', 9, &line), -EINVAL);
	ck_assert_int_eq(runtime_reader_read_until(r, -1, 8, &line), -EINVAL);
	ck_assert_int_eq(runtime_reader_read_until(r, 256, 8, &line), -EINVAL);
	ck_assert_int_eq(runtime_reader_read_until(r, '\n', 8, NULL), -EINVAL);
	ck_assert_int_eq(runtime_reader_read_until(NULL, '\n', 8, &line), -EINVAL);
	ck_assert_int_eq(runtime_reader_read_line(NULL, 8, &line), -EINVAL);
	ck_assert_int_eq(runtime_reader_read(NULL, &c, 1), -EINVAL);
	ck_assert_int_eq(runtime_reader_read(r, NULL, 1), -EINVAL);
	ck_assert_int_eq(runtime_reader_read(r, NULL, 0), 0);
	ck_assert_int_eq(runtime_reader_read_exact(NULL, &c, 1, NULL), -EINVAL);
	ck_assert_int_eq(runtime_reader_read_exact(NULL, &c, 0, NULL), -EINVAL);
	ck_assert_int_eq(runtime_reader_peek(r, 9, &line), -EINVAL);
	ck_assert_int_eq(runtime_reader_peek(r, 1, NULL), -EINVAL);
	ck_assert_int_eq(runtime_reader_peek(NULL, 1, &line), -EINVAL);
	ck_assert_int_eq(runtime_reader_discard(NULL, 1), -EINVAL);
	ck_assert_int_eq(runtime_reader_discard(r, 0), 0);
	ck_assert_uint_eq(runtime_reader_buffered(NULL), 0);
	runtime_reader_flush_before_wait(NULL, NULL);
	ck_assert_int_eq(runtime_reader_read_until(r, 'c', 8, &line), 3); /* any byte */
	ck_assert_int_eq(m.reads, 0);
	runtime_reader_destroy(r);
	runtime_reader_destroy(NULL);

	w = new_writer(&t, 8);
	ck_assert_int_eq(runtime_writer_write(NULL, "a", 1), -EINVAL);
	ck_assert_int_eq(runtime_writer_write(w, NULL, 1), -EINVAL);
	ck_assert_int_eq(runtime_writer_write(w, NULL, 0), 0);
	ck_assert_int_eq(runtime_writer_printf(NULL, "a"), -EINVAL);
	ck_assert_int_eq(runtime_writer_flush(NULL), -EINVAL);
	ck_assert_uint_eq(runtime_writer_buffered(NULL), 0);
	runtime_writer_destroy(w);
	runtime_writer_destroy(NULL);

	ck_assert_int_eq(runtime_transport_fd(NULL, 0), -EINVAL);
	ck_assert_int_eq(runtime_transport_fd(&bad, -1), -EBADF);
	ck_assert_int_eq(runtime_transport_fd(&bad, 1000), -EBADF);
	ck_assert_int_eq(runtime_transport_stream(NULL, (void *)1), -EINVAL);
	ck_assert_int_eq(runtime_transport_stream(&bad, NULL), -EINVAL);
	ck_assert_int_eq(runtime_transport_reader(NULL, (void *)1), -EINVAL);
	ck_assert_int_eq(runtime_transport_reader(&bad, NULL), -EINVAL);
}
END_TEST

/* A socket, a pipe and a file each get a transport; a pipe has no
 * close_write. Outside a fiber, reading a socket is -EPERM. */
START_TEST(test_bufio_fd_transport_kinds)
{
	struct runtime_transport t;
	int sv[2], pv[2];
	char c;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(pipe2(pv, O_CLOEXEC), 0);
	ck_assert_int_eq(runtime_transport_fd(&t, sv[0]), 0);
	ck_assert_ptr_nonnull(t.ops->close_write);
	ck_assert_int_eq(t.ops->read_fd(t.ctx), sv[0]);
	ck_assert_int_eq(t.ops->read(t.ctx, &c, 1), -EPERM);
	ck_assert_int_eq(runtime_transport_fd(&t, pv[0]), 0);
	ck_assert_ptr_null(t.ops->close_write);
	ck_assert_ptr_null(t.ops->peek);
	ck_assert_int_eq(t.ops->write_fd(t.ctx), pv[0]);
	close(sv[0]);
	close(sv[1]);
	close(pv[0]);
	close(pv[1]);
}
END_TEST

static Suite *bufio_suite(void)
{
	Suite *s = suite_create("bufio");
	TCase *tc = tcase_create("reader");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bufio_lines_in_place_cost_no_copy);
	tcase_add_test(tc, test_bufio_split_line_is_assembled);
	tcase_add_test(tc, test_bufio_line_over_max_is_emsgsize_and_kept);
	tcase_add_test(tc, test_bufio_eof_mid_line_is_enodata_and_kept);
	tcase_add_test(tc, test_bufio_read_buffered_then_one_read);
	tcase_add_test(tc, test_bufio_peek_and_discard);
	tcase_add_test(tc, test_bufio_read_exact_across_many_small_writes);
	tcase_add_test(tc, test_bufio_stream_lines_come_from_its_buffers);
	tcase_add_test(tc, test_bufio_stream_peek_consume_fd);
	tcase_add_test(tc, test_bufio_reader_transport_reads_buffered_first);
	suite_add_tcase(s, tc);

	tc = tcase_create("writer");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bufio_writer_batches_small_writes);
	tcase_add_test(tc, test_bufio_writer_large_write_joins_buffered_uncopied);
	tcase_add_test(tc, test_bufio_writer_error_is_sticky);
	tcase_add_test(tc, test_bufio_writer_printf);
	tcase_add_test(tc, test_bufio_flush_before_wait_answers_request_response);
	tcase_add_test(tc, test_bufio_flush_error_is_returned_by_the_read);
	suite_add_tcase(s, tc);

	tc = tcase_create("misuse");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bufio_bad_input_gets_clear_errors);
	tcase_add_test(tc, test_bufio_fd_transport_kinds);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(bufio_suite)
