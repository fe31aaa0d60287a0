/* SPDX-License-Identifier: MIT */
/*
 * check_copy - runtime_copy and runtime_copy_both.
 *
 * Megabytes arrive whole and in order over TCP and unix sockets, through
 * splice (the transports' own read and writev never called: a counting
 * wrapper shows it) and through the buffer (RUNTIME_COPY_NO_SPLICE, or a
 * receive stream as the source); the half-close is passed on unless
 * RUNTIME_COPY_KEEP_OPEN; a reader's buffered bytes go first; a splice the
 * kernel refuses (into an O_APPEND file) falls back without losing a
 * byte. A peer's reset mid-copy, a cancel and the fiber's deadline end a
 * copy with no fd left open. Both ways: a proxy passes an exchange and
 * both half-closes; one side's error, the caller's deadline and the
 * caller's cancel end it, and no fiber is left behind.
 */
#include "testutil.h"

#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB (1024u * 1024)

static char pattern_at(size_t i)
{
	return (char)(i * 7 + i / 251);
}

static void pattern(char *buf, size_t len, size_t from)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern_at(from + i);
}

/* The first byte of buf that is not the pattern from offset from, or len
 * (a Check assertion per byte would cost a syscall each). */
static size_t pattern_mismatch(const char *buf, size_t len, size_t from)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern_at(from + i))
			return i;
	return len;
}

/* ------------------------------------------------ a counting transport */

struct counted {
	struct runtime_transport inner;
	int reads, writevs;
};

static ssize_t counted_read(void *ctx, void *buf, size_t len)
{
	struct counted *c = ctx;

	c->reads++;
	return c->inner.ops->read(c->inner.ctx, buf, len);
}

static ssize_t counted_writev(void *ctx, const struct iovec *iov, int iovcnt)
{
	struct counted *c = ctx;

	c->writevs++;
	return c->inner.ops->writev(c->inner.ctx, iov, iovcnt);
}

static int counted_close_write(void *ctx)
{
	struct counted *c = ctx;

	return c->inner.ops->close_write(c->inner.ctx);
}

static int counted_read_fd(void *ctx)
{
	struct counted *c = ctx;

	return c->inner.ops->read_fd(c->inner.ctx);
}

static int counted_write_fd(void *ctx)
{
	struct counted *c = ctx;

	return c->inner.ops->write_fd(c->inner.ctx);
}

static const struct runtime_transport_ops counted_ops = {
	.read = counted_read, .writev = counted_writev, .close_write = counted_close_write,
	.read_fd = counted_read_fd, .write_fd = counted_write_fd,
};

static struct runtime_transport counted_fd(struct counted *c, int fd)
{
	ck_assert_int_eq(runtime_transport_fd(&c->inner, fd), 0);
	return (struct runtime_transport){ &counted_ops, c };
}

/* ------------------------------------------------ writers and sinks */

struct feed {
	int fd;
	size_t len;
	size_t from;      /* pattern offset of the first byte */
	bool close_write; /* shutdown(SHUT_WR) after */
};

static void *feed_main(void *arg)
{
	struct feed *f = arg;
	char *buf = malloc(64 * 1024);
	ssize_t rc = 0;

	ck_assert_ptr_nonnull(buf);
	for (size_t off = 0; off < f->len && rc >= 0;) {
		size_t n = f->len - off < 64 * 1024 ? f->len - off : 64 * 1024;
		pattern(buf, n, f->from + off);
		rc = runtime_send_all(f->fd, buf, n, NULL);
		off += n;
	}
	free(buf);
	if (rc >= 0 && f->close_write)
		ck_assert_int_eq(runtime_sock_shutdown(f->fd, SHUT_WR), 0);
	return (void *)(intptr_t)(rc < 0 ? rc : 0);
}

struct sink {
	int fd;
	size_t got;
	size_t reset_after; /* nonzero: reset the connection past this many */
};

/* Read to end of stream, checking the pattern; returns 0 at EOF. */
static void *sink_main(void *arg)
{
	struct sink *s = arg;
	char *buf = malloc(64 * 1024);
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	while ((n = runtime_recv(s->fd, buf, 64 * 1024, 0)) > 0) {
		size_t bad = pattern_mismatch(buf, (size_t)n, s->got);
		ck_assert_msg(bad == (size_t)n, "byte %zu wrong", s->got + bad);
		s->got += (size_t)n;
		if (s->reset_after && s->got >= s->reset_after) {
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };
			ck_assert_int_eq(setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
			close(s->fd); /* an RST to the copy */
			s->fd = -1;
			break;
		}
	}
	free(buf);
	return (void *)(intptr_t)n;
}

/* Two connected pairs: in[0] -> in[1] (copy's source) and out[0] (copy's
 * destination) -> out[1]. */
static void two_pairs(bool tcp, int in[2], int out[2])
{
	if (tcp) {
		tcp_pair(in);
		tcp_pair(out);
		return;
	}
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out), 0);
}

static void close_all(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* ------------------------------------------------------------- copies */

struct copy_case {
	bool tcp;
	size_t chunk;
	unsigned flags;
	size_t len;
};

/* len bytes in, then a half-close: all arrive in order, the half-close
 * reaches the far end, and the transports' read and writev were used only
 * without splice. */
static void copy_main(void *arg)
{
	struct copy_case *cc = arg;
	int in[2], out[2];
	struct counted cs, cd;

	two_pairs(cc->tcp, in, out);
	struct runtime_transport src = counted_fd(&cs, in[1]), dst = counted_fd(&cd, out[0]);
	struct feed f = { in[0], cc->len, 0, true };
	struct sink s = { out[1], 0, 0 };
	struct runtime_fiber *fw = start(feed_main, &f), *fs = start(sink_main, &s);
	size_t done = 1;
	ck_assert_int_eq(runtime_copy(&dst, &src, cc->chunk, cc->flags, &done), (ssize_t)cc->len);
	ck_assert_uint_eq(done, cc->len);
	ck_assert_int_eq(join(fw), 0);
	ck_assert_int_eq(join(fs), 0); /* end of stream: the half-close came */
	ck_assert_uint_eq(s.got, cc->len);
	if (cc->flags & RUNTIME_COPY_NO_SPLICE) {
		ck_assert_int_gt(cs.reads, 0);
		ck_assert_int_eq(cd.writevs > 0, cc->len > 0);
	} else {
		ck_assert_int_eq(cs.reads, 0);
		ck_assert_int_eq(cd.writevs, 0);
	}
	close_all(in, 2);
	close_all(out, 2);
}

START_TEST(test_copy_splice_over_tcp)
{
	struct copy_case c64 = { true, 64 * 1024, 0, 8 * MIB + 123 };
	struct copy_case c1m = { true, MIB, 0, 8 * MIB + 123 };
	struct copy_case dflt = { true, 0, 0, 100 };

	ck_assert_int_eq(run_fiber(NULL, copy_main, &c64), 0);
	ck_assert_int_eq(run_fiber(NULL, copy_main, &c1m), 0);
	ck_assert_int_eq(run_fiber(NULL, copy_main, &dflt), 0);
}
END_TEST

START_TEST(test_copy_splice_over_unix_sockets)
{
	struct copy_case c = { false, 64 * 1024, 0, 4 * MIB + 1 };

	ck_assert_int_eq(run_fiber(NULL, copy_main, &c), 0);
}
END_TEST

START_TEST(test_copy_buffer_path_over_tcp_and_unix)
{
	struct copy_case tcp = { true, 64 * 1024, RUNTIME_COPY_NO_SPLICE, 4 * MIB + 7 };
	struct copy_case unx = { false, 1000, RUNTIME_COPY_NO_SPLICE, MIB + 7 };
	struct copy_case empty = { true, 0, RUNTIME_COPY_NO_SPLICE, 0 };

	ck_assert_int_eq(run_fiber(NULL, copy_main, &tcp), 0);
	ck_assert_int_eq(run_fiber(NULL, copy_main, &unx), 0);
	ck_assert_int_eq(run_fiber(NULL, copy_main, &empty), 0);
}
END_TEST

/* A receive stream as the source offers no fd to splice from (its recv
 * may be armed): the copy goes through the buffer, every byte in order. */
static void stream_source_main(void *arg)
{
	int in[2], out[2];
	struct runtime_stream *st;
	struct runtime_transport src, dst;

	(void)arg;
	two_pairs(true, in, out);
	ck_assert_int_eq(runtime_stream_open(&st, in[1]), 0);
	ck_assert_int_eq(runtime_transport_stream(&src, st), 0);
	ck_assert_int_eq(runtime_transport_fd(&dst, out[0]), 0);
	ck_assert_int_eq(src.ops->read_fd(src.ctx), -1);
	ck_assert_int_eq(src.ops->write_fd(src.ctx), in[1]);
	struct feed f = { in[0], 2 * MIB + 5, 0, true };
	struct sink s = { out[1], 0, 0 };
	struct runtime_fiber *fw = start(feed_main, &f), *fs = start(sink_main, &s);
	ck_assert_int_eq(runtime_copy(&dst, &src, 0, 0, NULL), (ssize_t)f.len);
	ck_assert_int_eq(join(fw), 0);
	ck_assert_int_eq(join(fs), 0);
	ck_assert_uint_eq(s.got, f.len);
	ck_assert_int_eq(runtime_stream_close(st), 0);
	close_all(in, 2);
	close_all(out, 2);
}

START_TEST(test_copy_from_a_receive_stream)
{
	ck_assert_int_eq(run_fiber(NULL, stream_source_main, NULL), 0);
}
END_TEST

/* RUNTIME_COPY_KEEP_OPEN: the destination stays open for more. */
static void keep_open_main(void *arg)
{
	int in[2], out[2];
	struct runtime_transport src, dst;
	char buf[8];

	(void)arg;
	two_pairs(true, in, out);
	ck_assert_int_eq(runtime_transport_fd(&src, in[1]), 0);
	ck_assert_int_eq(runtime_transport_fd(&dst, out[0]), 0);
	ck_assert_int_eq(write(in[0], "abc", 3), 3);
	ck_assert_int_eq(shutdown(in[0], SHUT_WR), 0);
	ck_assert_int_eq(runtime_copy(&dst, &src, 0, RUNTIME_COPY_KEEP_OPEN, NULL), 3);
	ck_assert_int_eq(runtime_read_exact(out[1], buf, 3, NULL), 3);
	ck_assert_int_eq(runtime_poll(out[1], POLLIN, 0), -ETIMEDOUT); /* no EOF */
	ck_assert_int_eq(runtime_write_all(out[0], "more", 4, NULL), 4);
	ck_assert_int_eq(runtime_read_exact(out[1], buf, 4, NULL), 4);
	ck_assert_int_eq(memcmp(buf, "more", 4), 0);
	close_all(in, 2);
	close_all(out, 2);
}

START_TEST(test_copy_keep_open_leaves_dst_writable)
{
	ck_assert_int_eq(run_fiber(NULL, keep_open_main, NULL), 0);
}
END_TEST

/* A proxy read a request head with a reader, which also took the start of
 * the body: copying through runtime_transport_reader sends those bytes
 * first, then splices the rest. */
static void reader_view_main(void *arg)
{
	int in[2], out[2];
	struct runtime_transport t, src, dst;
	struct runtime_reader *r;
	const char *line;
	static char first[1000];

	(void)arg;
	two_pairs(true, in, out);
	ck_assert_int_eq(runtime_transport_fd(&t, in[1]), 0);
	ck_assert_int_eq(runtime_reader_create(&r, &t, 4096), 0);
	memcpy(first, "HEAD\n", 5);
	pattern(first + 5, sizeof(first) - 5, 0);
	ck_assert_int_eq(write(in[0], first, sizeof(first)), (ssize_t)sizeof(first));
	ck_assert_int_eq(runtime_reader_read_line(r, 4096, &line), 5);
	ck_assert_uint_eq(runtime_reader_buffered(r), sizeof(first) - 5);
	ck_assert_int_eq(runtime_transport_reader(&src, r), 0);
	ck_assert_int_eq(runtime_transport_fd(&dst, out[0]), 0);
	struct feed f = { in[0], MIB, sizeof(first) - 5, true };
	struct sink s = { out[1], 0, 0 };
	struct runtime_fiber *fw = start(feed_main, &f), *fs = start(sink_main, &s);
	ck_assert_int_eq(runtime_copy(&dst, &src, 0, 0, NULL), (ssize_t)(MIB + sizeof(first) - 5));
	ck_assert_int_eq(join(fw), 0);
	ck_assert_int_eq(join(fs), 0);
	ck_assert_uint_eq(s.got, MIB + sizeof(first) - 5);
	runtime_reader_destroy(r);
	close_all(in, 2);
	close_all(out, 2);
}

START_TEST(test_copy_reader_bytes_go_first)
{
	ck_assert_int_eq(run_fiber(NULL, reader_view_main, NULL), 0);
}
END_TEST

/* Splicing into an O_APPEND file is refused (-EINVAL) after the bytes
 * are in the pipe: they and the rest go through the buffer. */
static void refused_main(void *arg)
{
	int in[2];
	char path[] = "/tmp/check_copy.XXXXXX";
	struct runtime_transport src, dst;

	(void)arg;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in), 0);
	int tmp = mkstemp(path);
	ck_assert_int_ge(tmp, 0);
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(runtime_transport_fd(&src, in[1]), 0);
	ck_assert_int_eq(runtime_transport_fd(&dst, fd), 0);
	struct feed f = { in[0], MIB + 3, 0, true };
	struct runtime_fiber *fw = start(feed_main, &f);
	ck_assert_int_eq(runtime_copy(&dst, &src, 0, 0, NULL), (ssize_t)f.len);
	ck_assert_int_eq(join(fw), 0);
	char *back = malloc(f.len + 1);
	ck_assert_int_eq(pread(tmp, back, f.len + 1, 0), (ssize_t)f.len);
	ck_assert_uint_eq(pattern_mismatch(back, f.len, 0), f.len);
	free(back);
	close(fd);
	close(tmp);
	close_all(in, 2);
}

START_TEST(test_copy_refused_splice_falls_back)
{
	ck_assert_int_eq(run_fiber(NULL, refused_main, NULL), 0);
}
END_TEST

/* ------------------------------------------------------------ failures */

/* The destination's peer resets the connection mid-copy: -ECONNRESET or
 * -EPIPE, with what reached dst counted. */
static void reset_main(void *arg)
{
	unsigned flags = (unsigned)(uintptr_t)arg;
	int in[2], out[2];
	struct runtime_transport src, dst;

	two_pairs(true, in, out);
	ck_assert_int_eq(runtime_transport_fd(&src, in[1]), 0);
	ck_assert_int_eq(runtime_transport_fd(&dst, out[0]), 0);
	struct feed f = { in[0], 256 * MIB, 0, true };
	struct sink s = { out[1], 0, 256 * 1024 };
	struct runtime_fiber *fw = start(feed_main, &f), *fs = start(sink_main, &s);
	size_t done = 0;
	ssize_t rc = runtime_copy(&dst, &src, 0, flags, &done);
	ck_assert_msg(rc == -ECONNRESET || rc == -EPIPE, "copy: %zd", rc);
	ck_assert_uint_ge(done, 256 * 1024);
	join(fs);
	close(in[1]); /* the feeder stops too */
	in[1] = -1;
	join(fw);
	close_all(in, 2);
	close_all(out, 1);
}

START_TEST(test_copy_peer_reset_mid_copy)
{
	ck_assert_int_eq(run_fiber(NULL, reset_main, (void *)0), 0);
	ck_assert_int_eq(run_fiber(NULL, reset_main, (void *)(uintptr_t)RUNTIME_COPY_NO_SPLICE), 0);
}
END_TEST

struct idle_copy {
	int src, dst;
	unsigned flags;
	uint64_t deadline;
	size_t done;
};

static void *idle_copy_main(void *arg)
{
	struct idle_copy *ic = arg;
	struct runtime_transport src, dst;

	ck_assert_int_eq(runtime_transport_fd(&src, ic->src), 0);
	ck_assert_int_eq(runtime_transport_fd(&dst, ic->dst), 0);
	if (ic->deadline)
		runtime_deadline_set(ic->deadline);
	return (void *)(intptr_t)runtime_copy(&dst, &src, MIB, ic->flags, &ic->done);
}

/* A copy waiting on an idle source ends with -ECANCELED (cancel) or
 * -ETIMEDOUT (deadline), after the bytes that had come reached dst; its
 * pipe is closed. */
static void interrupt_main(void *arg)
{
	int mode = (int)(intptr_t)arg; /* bit 0: deadline; bit 1: no splice */
	int in[2], out[2];
	char buf[100];

	two_pairs(true, in, out);
	ck_assert_int_eq(write(in[0], "before", 6), 6);
	int fds = count_fds();
	struct idle_copy ic = { in[1], out[0], mode & 2 ? RUNTIME_COPY_NO_SPLICE : 0, 0, 0 };
	if (mode & 1)
		ic.deadline = runtime_now() + 200 * MS;
	struct runtime_fiber *f = start(idle_copy_main, &ic);
	if (!(mode & 1)) {
		ck_assert_int_eq(runtime_read_exact(out[1], buf, 6, NULL), 6); /* it is copying */
		ck_assert_int_eq(runtime_fiber_cancel(f), 0);
	}
	ck_assert_int_eq(join(f), mode & 1 ? -ETIMEDOUT : -ECANCELED);
	ck_assert_uint_le(ic.done, 6);
	if (mode & 1 && ic.done)
		ck_assert_int_eq(runtime_read_exact(out[1], buf, ic.done, NULL), (ssize_t)ic.done);
	ck_assert_int_eq(count_fds(), fds);
	close_all(in, 2);
	close_all(out, 2);
}

START_TEST(test_copy_cancel_and_deadline_leave_nothing_open)
{
	for (int mode = 0; mode < 4; mode++)
		ck_assert_int_eq(run_fiber(NULL, interrupt_main, (void *)(intptr_t)mode), 0);
}
END_TEST

/* A copy stuck writing to a peer that reads nothing (a splice out, run
 * by a kernel worker, waits for room in the socket) still ends at a
 * cancel and at the deadline. */
static void stuck_main(void *arg)
{
	int mode = (int)(intptr_t)arg; /* bit 0: deadline; bit 1: no splice */
	int in[2], out[2];

	two_pairs(true, in, out);
	int fds = count_fds();
	struct feed f = { in[0], 1024 * MIB, 0, true };
	struct idle_copy ic = { in[1], out[0], mode & 2 ? RUNTIME_COPY_NO_SPLICE : 0, 0, 0 };
	if (mode & 1)
		ic.deadline = runtime_now() + 300 * MS;
	struct runtime_fiber *fw = start(feed_main, &f), *fc = start(idle_copy_main, &ic);
	if (!(mode & 1)) {
		runtime_sleep(300 * MS); /* let it fill the socket: behaviour holds either way */
		ck_assert_int_eq(runtime_fiber_cancel(fc), 0);
	}
	ck_assert_int_eq(join(fc), mode & 1 ? -ETIMEDOUT : -ECANCELED);
	close(in[1]); /* the feeder's reader goes */
	in[1] = -1;
	join(fw);
	ck_assert_int_eq(count_fds(), fds - 1);
	close_all(in, 2);
	close_all(out, 2);
}

START_TEST(test_copy_stuck_on_a_full_peer_still_ends)
{
	for (int mode = 0; mode < 4; mode++)
		ck_assert_int_eq(run_fiber(NULL, stuck_main, (void *)(intptr_t)mode), 0);
}
END_TEST

static void copy_bad_main(void *arg)
{
	struct runtime_transport t, none = { NULL, NULL };
	struct runtime_transport_ops no_ops = { 0 };
	struct runtime_transport empty = { &no_ops, NULL };
	size_t done = 1;

	(void)arg;
	ck_assert_int_eq(runtime_transport_fd(&t, 0), 0);
	ck_assert_int_eq(runtime_copy(NULL, &t, 0, 0, &done), -EINVAL);
	ck_assert_uint_eq(done, 0);
	ck_assert_int_eq(runtime_copy(&t, NULL, 0, 0, NULL), -EINVAL);
	ck_assert_int_eq(runtime_copy(&t, &none, 0, 0, NULL), -EINVAL);
	ck_assert_int_eq(runtime_copy(&empty, &t, 0, 0, NULL), -EINVAL);
	ck_assert_int_eq(runtime_copy(&t, &t, 0, 0x100, NULL), -EINVAL);
	ck_assert_int_eq(runtime_copy_both(NULL, &t, 0, 0, NULL, NULL), -EINVAL);
	ck_assert_int_eq(runtime_copy_both(&t, &empty, 0, 0, NULL, NULL), -EINVAL);
	ck_assert_int_eq(runtime_copy_both(&t, &t, 0, 0x100, NULL, NULL), -EINVAL);
}

START_TEST(test_copy_bad_input_gets_clear_errors)
{
	struct runtime_transport t;

	ck_assert_int_eq(run_fiber(NULL, copy_bad_main, NULL), 0);
	ck_assert_int_eq(runtime_transport_fd(&t, 0), 0);
	ck_assert_int_eq(runtime_copy_both(&t, &t, 0, 0, NULL, NULL), -EPERM); /* no fiber */
}
END_TEST

/* ---------------------------------------------------------- both ways */

/* client <-> [a | proxy | b] <-> server. */
struct proxy {
	int client, a, b, server;
	int rc;
	size_t a_to_b, b_to_a;
	unsigned flags;
	uint64_t deadline;
};

static void proxy_pairs(struct proxy *p, bool tcp)
{
	int x[2], y[2];

	two_pairs(tcp, x, y);
	p->client = x[0];
	p->a = x[1];
	p->b = y[0];
	p->server = y[1];
}

static void *proxy_main(void *arg)
{
	struct proxy *p = arg;
	struct runtime_transport a, b;

	ck_assert_int_eq(runtime_transport_fd(&a, p->a), 0);
	ck_assert_int_eq(runtime_transport_fd(&b, p->b), 0);
	if (p->deadline)
		runtime_deadline_set(p->deadline);
	p->rc = runtime_copy_both(&a, &b, 0, p->flags, &p->a_to_b, &p->b_to_a);
	return (void *)(intptr_t)p->rc;
}

/* The server answers each line, then half-closes when the client did. */
static void *line_server(void *arg)
{
	int fd = *(int *)arg;
	struct runtime_transport t;
	struct runtime_reader *r;
	struct runtime_writer *w;
	const char *line;
	ssize_t n;

	ck_assert_int_eq(runtime_transport_fd(&t, fd), 0);
	ck_assert_int_eq(runtime_reader_create(&r, &t, 256), 0);
	ck_assert_int_eq(runtime_writer_create(&w, &t, 256), 0);
	runtime_reader_flush_before_wait(r, w);
	while ((n = runtime_reader_read_line(r, 256, &line)) > 0)
		ck_assert_int_eq(runtime_writer_printf(w, "<%.*s>", (int)n - 1, line), n + 1);
	ck_assert_int_eq(runtime_writer_flush(w), 0);
	ck_assert_int_eq(runtime_sock_shutdown(fd, SHUT_WR), 0);
	runtime_reader_destroy(r);
	runtime_writer_destroy(w);
	return (void *)(intptr_t)n;
}

static void both_main(void *arg)
{
	struct proxy p = { .flags = (unsigned)(uintptr_t)arg };
	char buf[64];

	proxy_pairs(&p, false);
	uint64_t live = fibers_live(runtime_current());
	struct runtime_fiber *px = start(proxy_main, &p), *sv = start(line_server, &p.server);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(runtime_write_all(p.client, "hello\n", 6, NULL), 6);
		ck_assert_int_eq(runtime_read_exact(p.client, buf, 7, NULL), 7);
		ck_assert_int_eq(memcmp(buf, "<hello>", 7), 0);
	}
	ck_assert_int_eq(runtime_write_all(p.client, "last\n", 5, NULL), 5);
	ck_assert_int_eq(runtime_sock_shutdown(p.client, SHUT_WR), 0);
	ck_assert_int_eq(runtime_read_exact(p.client, buf, 6, NULL), 6);
	ck_assert_int_eq(runtime_read(p.client, buf, sizeof(buf)), 0); /* both half-closes */
	ck_assert_int_eq(join(sv), 0);
	ck_assert_int_eq(join(px), 0);
	ck_assert_uint_eq(p.a_to_b, 5 * 6 + 5);
	ck_assert_uint_eq(p.b_to_a, 5 * 7 + 6);
	ck_assert_uint_eq(fibers_live(runtime_current()), live);
	int fds[] = { p.client, p.a, p.b, p.server };
	close_all(fds, 4);
}

START_TEST(test_copy_both_proxies_an_exchange)
{
	ck_assert_int_eq(run_fiber(NULL, both_main, (void *)0), 0);
	ck_assert_int_eq(run_fiber(NULL, both_main, (void *)(uintptr_t)RUNTIME_COPY_NO_SPLICE), 0);
}
END_TEST

/* The server resets while the client is idle: the b -> a direction fails,
 * the a -> b one (waiting on the client) is cancelled, and both fibers
 * have ended when the call returns. */
static void both_error_main(void *arg)
{
	struct proxy p = { .flags = (unsigned)(uintptr_t)arg };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	char buf[8];

	proxy_pairs(&p, true);
	uint64_t live = fibers_live(runtime_current());
	struct runtime_fiber *px = start(proxy_main, &p);
	ck_assert_int_eq(runtime_write_all(p.server, "hi", 2, NULL), 2);
	ck_assert_int_eq(runtime_read_exact(p.client, buf, 2, NULL), 2); /* both run */
	ck_assert_int_eq(setsockopt(p.server, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(p.server); /* an RST to b */
	p.server = -1;
	ck_assert_int_eq(join(px), -ECONNRESET);
	ck_assert_uint_eq(p.b_to_a, 2);
	ck_assert_uint_eq(fibers_live(runtime_current()), live);
	int fds[] = { p.client, p.a, p.b, p.server };
	close_all(fds, 4);
}

START_TEST(test_copy_both_ends_on_one_sides_error)
{
	ck_assert_int_eq(run_fiber(NULL, both_error_main, (void *)0), 0);
	ck_assert_int_eq(run_fiber(NULL, both_error_main, (void *)(uintptr_t)RUNTIME_COPY_NO_SPLICE),
	                 0);
}
END_TEST

/* The caller's deadline: -ETIMEDOUT, both fibers waited for. */
static void both_deadline_main(void *arg)
{
	struct proxy p = { 0 };

	(void)arg;
	proxy_pairs(&p, false);
	uint64_t live = fibers_live(runtime_current());
	p.deadline = runtime_now() + 100 * MS;
	struct runtime_fiber *px = start(proxy_main, &p);
	ck_assert_int_eq(join(px), -ETIMEDOUT);
	ck_assert_uint_eq(fibers_live(runtime_current()), live);
	int fds[] = { p.client, p.a, p.b, p.server };
	close_all(fds, 4);
}

START_TEST(test_copy_both_caller_deadline)
{
	ck_assert_int_eq(run_fiber(NULL, both_deadline_main, NULL), 0);
}
END_TEST

/* The caller cancelled: -ECANCELED, and both fibers, cancelled too, have
 * ended by the time it returns (it waits for them in a cleanup). */
static void both_cancel_main(void *arg)
{
	struct proxy p = { 0 };
	char buf[2];

	(void)arg;
	proxy_pairs(&p, false);
	uint64_t live = fibers_live(runtime_current());
	struct runtime_fiber *px = start(proxy_main, &p);
	ck_assert_int_eq(runtime_write_all(p.server, "hi", 2, NULL), 2);
	ck_assert_int_eq(runtime_read_exact(p.client, buf, 2, NULL), 2); /* both run */
	ck_assert_int_eq(runtime_fiber_cancel(px), 0);
	ck_assert_int_eq(join(px), -ECANCELED);
	ck_assert_uint_eq(fibers_live(runtime_current()), live); /* no fiber left behind */
	int fds[] = { p.client, p.a, p.b, p.server };
	close_all(fds, 4);
}

START_TEST(test_copy_both_caller_cancelled)
{
	ck_assert_int_eq(run_fiber(NULL, both_cancel_main, NULL), 0);
}
END_TEST

static Suite *copy_suite(void)
{
	Suite *s = suite_create("copy");
	TCase *tc = tcase_create("one way");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_copy_splice_over_tcp);
	tcase_add_test(tc, test_copy_splice_over_unix_sockets);
	tcase_add_test(tc, test_copy_buffer_path_over_tcp_and_unix);
	tcase_add_test(tc, test_copy_from_a_receive_stream);
	tcase_add_test(tc, test_copy_keep_open_leaves_dst_writable);
	tcase_add_test(tc, test_copy_reader_bytes_go_first);
	tcase_add_test(tc, test_copy_refused_splice_falls_back);
	tcase_add_test(tc, test_copy_peer_reset_mid_copy);
	tcase_add_test(tc, test_copy_cancel_and_deadline_leave_nothing_open);
	tcase_add_test(tc, test_copy_stuck_on_a_full_peer_still_ends);
	tcase_add_test(tc, test_copy_bad_input_gets_clear_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("both ways");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_copy_both_proxies_an_exchange);
	tcase_add_test(tc, test_copy_both_ends_on_one_sides_error);
	tcase_add_test(tc, test_copy_both_caller_deadline);
	tcase_add_test(tc, test_copy_both_caller_cancelled);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(copy_suite)
