/* SPDX-License-Identifier: MIT */
/*
 * check_io.c - the fiber I/O calls: read/write, recv/send, readv/writev,
 * recvmsg/sendmsg round trips over socketpairs (one of them larger than the
 * socket buffer), file I/O with openat/pread/pwrite/fsync/close in a temp
 * dir, exact -errno results for bad fds and bad arguments, -EPERM outside
 * fiber context, runtime_poll readiness and timeouts, per-fiber deadlines
 * (cutting every kind of blocking call short, in both timer modes; a past
 * deadline touching nothing; clearing one), cancellation of a fiber parked
 * in I/O (sticky -ECANCELED, but close still closes), and hundreds of
 * operations in flight, with and without linked deadlines, on an 8-entry SQ.
 */
#include "testutil.h"

#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ------------------------------------------------------------- helpers */

static void make_pair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

/* fcntl(2)'s answer for fd: 0 if open, else errno (EBADF once closed). */
static int fd_state(int fd)
{
	return fcntl(fd, F_GETFD) == -1 ? errno : 0;
}

/* Bytes waiting to be read on fd, as poll(2) sees it without blocking. */
static bool readable_now(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static struct runtime_config tiny_ring(void)
{
	struct runtime_config cfg;
	runtime_config_init(&cfg);
	cfg.ring_entries = 8;
	return cfg;
}

/* ------------------------------------------------------ echo round trips */

static const char *const echo_msgs[] = { "hello", "fiber world", "x", "0123456789abcdef" };
#define NMSGS (sizeof(echo_msgs) / sizeof(echo_msgs[0]))

struct echo {
	bool use_recv;          /* recv/send instead of read/write */
	int fd[2];
	ssize_t wr[NMSGS], rd[NMSGS];
	char got[NMSGS][32];
	int close_rc;
	ssize_t echoed;         /* bytes the echo fiber sent back */
	ssize_t server_end;     /* its last read: 0 at EOF */
	int server_close_rc;
};

static void echo_server(void *p)
{
	struct echo *e = p;
	char buf[64];

	for (;;) {
		ssize_t n = e->use_recv ? runtime_recv(e->fd[1], buf, sizeof(buf), 0)
		                        : runtime_read(e->fd[1], buf, sizeof(buf));
		if (n <= 0) {
			e->server_end = n;
			break;
		}
		ssize_t w = e->use_recv ? runtime_send(e->fd[1], buf, (size_t)n, 0)
		                        : runtime_write(e->fd[1], buf, (size_t)n);
		if (w != n) {
			e->server_end = w < 0 ? w : -1000;
			break;
		}
		e->echoed += w;
	}
	e->server_close_rc = runtime_close(e->fd[1]);
}

static void echo_client(void *p)
{
	struct echo *e = p;

	make_pair(e->fd);
	ck_assert_int_eq(runtime_spawn(runtime_current(), echo_server, e), 0);
	for (size_t i = 0; i < NMSGS; i++) {
		size_t len = strlen(echo_msgs[i]);
		e->wr[i] = e->use_recv ? runtime_send(e->fd[0], echo_msgs[i], len, 0)
		                       : runtime_write(e->fd[0], echo_msgs[i], len);
		e->rd[i] = e->use_recv ? runtime_recv(e->fd[0], e->got[i], sizeof(e->got[i]) - 1, 0)
		                       : runtime_read(e->fd[0], e->got[i], sizeof(e->got[i]) - 1);
	}
	e->close_rc = runtime_close(e->fd[0]);
}

static void check_echo_with(const struct runtime_config *cfg, bool use_recv)
{
	struct echo e = { .use_recv = use_recv, .server_end = -999 };
	ssize_t total = 0;

	ck_assert_int_eq(run_fiber(cfg, echo_client, &e), 0);
	for (size_t i = 0; i < NMSGS; i++) {
		ssize_t len = (ssize_t)strlen(echo_msgs[i]);
		ck_assert_int_eq(e.wr[i], len);
		ck_assert_int_eq(e.rd[i], len);
		ck_assert_str_eq(e.got[i], echo_msgs[i]);
		total += len;
	}
	ck_assert_int_eq(e.echoed, total);
	ck_assert_int_eq(e.server_end, 0); /* saw the client's close as EOF */
	ck_assert_int_eq(e.close_rc, 0);
	ck_assert_int_eq(e.server_close_rc, 0);
	ck_assert_int_eq(fd_state(e.fd[0]), EBADF);
	ck_assert_int_eq(fd_state(e.fd[1]), EBADF);
}

START_TEST(test_io_read_write_echo)
{
	check_echo_with(NULL, false);
}
END_TEST

START_TEST(test_io_recv_send_echo)
{
	check_echo_with(NULL, true);
}
END_TEST

/* The kernel-bypass settings change how SQEs reach the kernel, never what
 * the calls do: the same echo under each. */
enum ring_option { OPT_SQPOLL, OPT_BUSY_POLL, OPT_NO_RING_FD, OPT_FIXED_FILES, OPT_N };

START_TEST(test_io_echo_under_each_ring_option)
{
	struct runtime_config cfg;

	runtime_config_init(&cfg);
	switch ((enum ring_option)_i) {
	case OPT_SQPOLL: cfg.sqpoll = 1; cfg.sqpoll_idle_ms = 5; break;
	case OPT_BUSY_POLL: cfg.busy_poll_us = 50; break;
	case OPT_NO_RING_FD: cfg.register_ring_fd = 0; break;
	case OPT_FIXED_FILES: cfg.fixed_files = 1; break;
	case OPT_N: break;
	}
	check_echo_with(&cfg, false);
	check_echo_with(&cfg, true);
}
END_TEST

/* 1 MiB through a socket whose buffer is far smaller (runtime_write_all
 * for _i 0, runtime_send_all for _i 1): both sides must loop over short
 * transfers and park on a full / empty buffer many times. */
#define BIG (1u << 20)

struct big {
	int fd[2];
	unsigned char *src, *dst;
	ssize_t wrc, rrc;
	size_t wdone, rdone;
	int sndbuf;
	bool send;              /* runtime_send_all instead of runtime_write_all */
};

static void big_writer(void *p)
{
	struct big *b = p;
	b->wrc = b->send ? runtime_send_all(b->fd[0], b->src, BIG, &b->wdone)
	                 : runtime_write_all(b->fd[0], b->src, BIG, &b->wdone);
}

static void big_reader(void *p)
{
	struct big *b = p;
	b->rrc = runtime_read_exact(b->fd[1], b->dst, BIG, &b->rdone);
}

START_TEST(test_io_message_larger_than_socket_buffer)
{
	struct big b = { .wrc = -999, .rrc = -999, .send = _i };
	int sz = 64 * 1024;
	socklen_t len = sizeof(b.sndbuf);
	struct runtime *rt;

	b.src = malloc(BIG);
	b.dst = calloc(1, BIG);
	ck_assert_ptr_nonnull(b.src);
	ck_assert_ptr_nonnull(b.dst);
	for (size_t i = 0; i < BIG; i++)
		b.src[i] = (unsigned char)(i * 131 + (i >> 10));
	make_pair(b.fd);
	ck_assert_int_eq(setsockopt(b.fd[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)), 0);
	ck_assert_int_eq(getsockopt(b.fd[0], SOL_SOCKET, SO_SNDBUF, &b.sndbuf, &len), 0);
	ck_assert_int_lt(b.sndbuf, BIG / 4);

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, big_reader, &b), 0);
	ck_assert_int_eq(runtime_spawn(rt, big_writer, &b), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);

	ck_assert_int_eq(b.wrc, BIG);
	ck_assert_uint_eq(b.wdone, BIG);
	ck_assert_int_eq(b.rrc, BIG);
	ck_assert_uint_eq(b.rdone, BIG);
	ck_assert_int_eq(memcmp(b.src, b.dst, BIG), 0);
	close(b.fd[0]);
	close(b.fd[1]);
	free(b.src);
	free(b.dst);
}
END_TEST

/* A send on a core with nothing else to do is made at once, by a plain
 * non-blocking system call and no SQE (engine_uring.c's send_now); to a
 * peer that is gone it says -EPIPE and raises no SIGPIPE, as the ring's
 * send does, whatever the process does with SIGPIPE. */
struct now {
	int fd[2];
	uint64_t sqes;              /* SQEs the sends took (io_uring) */
	ssize_t sent, sent_vec, got, epipe, epipe_vec;
	char buf[16];
};

static uint64_t sqes_now(void)
{
	struct runtime_core_stats st;

	runtime_stats(runtime_current(), &st, 1, NULL);
	return st.sqes_submitted;
}

static void now_fiber(void *p)
{
	struct now *n = p;
	char tail[] = "!";
	struct iovec iov[2] = { { "hello", 5 }, { tail, 1 } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	uint64_t before = sqes_now();

	n->sent = runtime_send(n->fd[0], "hello", 5, 0);
	n->sent_vec = runtime_sendmsg(n->fd[0], &msg, 0);
	n->sqes = sqes_now() - before;
	n->got = runtime_read_exact(n->fd[1], n->buf, 11, NULL);
	ck_assert_int_eq(runtime_close(n->fd[1]), 0);
	n->epipe = runtime_send(n->fd[0], "x", 1, 0);
	n->epipe_vec = runtime_sendmsg(n->fd[0], &msg, 0);
}

START_TEST(test_io_send_on_idle_core_is_made_at_once)
{
	struct now n = { .sent = -999, .sent_vec = -999, .got = -999, .epipe = -999,
	                 .epipe_vec = -999 };

	signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would end the test */
	make_pair(n.fd);
	ck_assert_int_eq(run_fiber(NULL, now_fiber, &n), 0);
	ck_assert_int_eq(n.sent, 5);
	ck_assert_int_eq(n.sent_vec, 6);
	ck_assert_int_eq(n.got, 11);
	ck_assert_int_eq(memcmp(n.buf, "hellohello!", 11), 0);
	ck_assert_int_eq(n.epipe, -EPIPE);
	ck_assert_int_eq(n.epipe_vec, -EPIPE);
	if (!on_epoll())
		ck_assert_uint_eq(n.sqes, 0);
	close(n.fd[0]);
}
END_TEST

/* --------------------------------------------------------- vectored I/O */

struct vec {
	int fd[2];
	ssize_t wv, rv;
	char a[4], b[10];
};

static void vec_fiber(void *p)
{
	struct vec *v = p;
	char s1[] = "abc", s2[] = "defg", s3[] = "hi";
	struct iovec out[3] = { { s1, 3 }, { s2, 4 }, { s3, 2 } };
	struct iovec in[2] = { { v->a, sizeof(v->a) }, { v->b, sizeof(v->b) } };

	v->wv = runtime_writev(v->fd[0], out, 3);
	v->rv = runtime_readv(v->fd[1], in, 2);
}

START_TEST(test_io_readv_writev_socket)
{
	struct vec v = { .wv = -999, .rv = -999 };

	make_pair(v.fd);
	ck_assert_int_eq(run_fiber(NULL, vec_fiber, &v), 0);
	ck_assert_int_eq(v.wv, 9);
	ck_assert_int_eq(v.rv, 9);
	ck_assert_int_eq(memcmp(v.a, "abcd", 4), 0);
	ck_assert_int_eq(memcmp(v.b, "efghi", 5), 0);
	close(v.fd[0]);
	close(v.fd[1]);
}
END_TEST

struct msgio {
	int fd[2];
	ssize_t sent, peeked, received, second;
	char peek[32];
	char head[5], tail[16];
	int flags_after;
};

static void msg_fiber(void *p)
{
	struct msgio *m = p;
	char h[] = "head", pl[] = "payload";
	struct iovec out[2] = { { h, 4 }, { pl, 7 } };
	struct msghdr smsg = { .msg_iov = out, .msg_iovlen = 2 };
	struct iovec pk[1] = { { m->peek, sizeof(m->peek) } };
	struct msghdr pmsg = { .msg_iov = pk, .msg_iovlen = 1 };
	struct iovec in[2] = { { m->head, sizeof(m->head) }, { m->tail, sizeof(m->tail) } };
	struct msghdr rmsg = { .msg_iov = in, .msg_iovlen = 2 };

	m->sent = runtime_sendmsg(m->fd[0], &smsg, 0);
	m->peeked = runtime_recvmsg(m->fd[1], &pmsg, MSG_PEEK);
	m->received = runtime_recvmsg(m->fd[1], &rmsg, 0);
	/* The peek left the bytes; the real read took them: nothing is left. */
	m->second = readable_now(m->fd[1]);
}

START_TEST(test_io_recvmsg_sendmsg_two_iovecs)
{
	struct msgio m = { .sent = -999, .peeked = -999, .received = -999, .second = -999 };

	make_pair(m.fd);
	ck_assert_int_eq(run_fiber(NULL, msg_fiber, &m), 0);
	ck_assert_int_eq(m.sent, 11);
	ck_assert_int_eq(m.peeked, 11);
	ck_assert_int_eq(memcmp(m.peek, "headpayload", 11), 0);
	ck_assert_int_eq(m.received, 11);
	ck_assert_int_eq(memcmp(m.head, "headp", 5), 0);
	ck_assert_int_eq(memcmp(m.tail, "ayload", 6), 0);
	ck_assert_int_eq(m.second, 0);
	close(m.fd[0]);
	close(m.fd[1]);
}
END_TEST

/* -------------------------------------------------------------- files */

struct filest {
	int dirfd;
	int fd, excl, missing, missing_dir;
	ssize_t pw1, pw2, pr, pr_eof, w, wv, pr2, rv;
	int fs0, fs1;
	char buf[64], buf2[64];
	char va[4], vb[8];
	int close_rc, closed_state;
};

static void file_fiber(void *p)
{
	struct filest *s = p;
	char l1[] = "L", l2[] = "LO";
	struct iovec wiov[2] = { { l1, 1 }, { l2, 2 } };
	struct iovec riov[2] = { { s->va, sizeof(s->va) }, { s->vb, sizeof(s->vb) } };

	s->fd = runtime_openat(s->dirfd, "data", O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (s->fd < 0)
		return;
	s->excl = runtime_openat(s->dirfd, "data", O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	s->missing = runtime_openat(s->dirfd, "missing", O_RDONLY | O_CLOEXEC, 0);
	s->missing_dir = runtime_openat(s->dirfd, "no/such/file", O_CREAT | O_RDWR, 0600);
	s->pw1 = runtime_pwrite(s->fd, "hello world", 11, 0);
	s->pw2 = runtime_pwrite(s->fd, "!", 1, 20);
	s->fs0 = runtime_fsync(s->fd, 0);
	s->fs1 = runtime_fsync(s->fd, 1);
	s->pr = runtime_pread(s->fd, s->buf, sizeof(s->buf), 0);
	s->pr_eof = runtime_pread(s->fd, s->buf2, sizeof(s->buf2), 21);
	/* pwrite left the file position at 0: plain writes start there. */
	s->w = runtime_write(s->fd, "HE", 2);
	s->wv = runtime_writev(s->fd, wiov, 2);
	s->pr2 = runtime_pread(s->fd, s->buf2, sizeof(s->buf2), 0);
	s->rv = runtime_readv(s->fd, riov, 2); /* from position 5 */
	s->close_rc = runtime_close(s->fd);
	s->closed_state = fd_state(s->fd);
}

/* An io_uring fd, which IORING_OP_CLOSE refuses, is closed all the same
 * (on either engine); a closed fd gets -EBADF. It needs an io_uring fd:
 * where io_uring_setup is refused (a seccomp filter, qemu-user), the
 * epoll engine's close of such an fd cannot come up at all. */
struct ring_close {
	int fd, rc, state, again;
};

static void ring_close_fiber(void *p)
{
	struct ring_close *r = p;

	r->rc = runtime_close(r->fd);
	r->state = fd_state(r->fd);
	r->again = runtime_close(r->fd);
}

START_TEST(test_io_close_closes_an_io_uring_fd)
{
	struct io_uring_params params = { 0 };
	struct ring_close r = { .fd = (int)syscall(__NR_io_uring_setup, 4, &params) };
	struct runtime *rt;

	if (r.fd < 0)
		TEST_SKIP("io_uring_setup is refused here (%s)", strerror(errno));
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, ring_close_fiber, &r), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
	ck_assert_int_eq(r.rc, 0);
	ck_assert_int_eq(r.state, EBADF);
	ck_assert_int_eq(r.again, -EBADF);
}
END_TEST

START_TEST(test_io_file_openat_pwrite_fsync_pread_close)
{
	char dir[] = "/tmp/check_io.XXXXXX";
	struct filest s = { .fd = -999 };
	char disk[64] = { 0 };
	struct stat st;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	s.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(s.dirfd, 0);

	int run_rc = run_fiber(NULL, file_fiber, &s);

	/* What reached the file, read back without the runtime. */
	int stat_rc = fstatat(s.dirfd, "data", &st, 0);
	int rfd = openat(s.dirfd, "data", O_RDONLY | O_CLOEXEC);
	ssize_t disk_len = rfd >= 0 ? read(rfd, disk, sizeof(disk)) : -1;
	if (rfd >= 0)
		close(rfd);
	unlinkat(s.dirfd, "data", 0);
	close(s.dirfd);
	ck_assert_int_eq(rmdir(dir), 0);

	static const char expect1[21] = "hello world\0\0\0\0\0\0\0\0\0!";
	static const char expect2[21] = "HELLO world\0\0\0\0\0\0\0\0\0!";
	ck_assert_int_eq(run_rc, 0);
	ck_assert_int_ge(s.fd, 0);
	ck_assert_int_eq(s.excl, -EEXIST);
	ck_assert_int_eq(s.missing, -ENOENT);
	ck_assert_int_eq(s.missing_dir, -ENOENT);
	ck_assert_int_eq(s.pw1, 11);
	ck_assert_int_eq(s.pw2, 1);
	ck_assert_int_eq(s.fs0, 0);
	ck_assert_int_eq(s.fs1, 0);
	ck_assert_int_eq(s.pr, 21);
	ck_assert_int_eq(memcmp(s.buf, expect1, 21), 0);
	ck_assert_int_eq(s.pr_eof, 0);
	ck_assert_int_eq(s.w, 2);
	ck_assert_int_eq(s.wv, 3);
	ck_assert_int_eq(s.pr2, 21);
	ck_assert_int_eq(memcmp(s.buf2, expect2, 21), 0);
	ck_assert_int_eq(s.rv, 12);
	ck_assert_int_eq(memcmp(s.va, " wor", 4), 0);
	ck_assert_int_eq(memcmp(s.vb, "ld\0\0\0\0\0\0", 8), 0);
	ck_assert_int_eq(s.close_rc, 0);
	ck_assert_int_eq(s.closed_state, EBADF);
	ck_assert_int_eq(stat_rc, 0);
	ck_assert_int_eq(st.st_size, 21);
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(disk_len, 21);
	ck_assert_int_eq(memcmp(disk, expect2, 21), 0);
}
END_TEST

/* openat2 confines a walk, statx reports what is there, splice moves a
 * file's bytes through a pipe. */
struct walkst {
	int dirfd;
	int beneath, escape, absolute, link_out, missing;
	int stx_rc, stx_bad;
	struct statx stx;
	ssize_t in, out;
	char got[16];
};

static void walk_fiber(void *p)
{
	struct walkst *s = p;
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_BENEATH };
	int pipefd[2];

	s->beneath = runtime_openat2(s->dirfd, "data", &how);
	s->escape = runtime_openat2(s->dirfd, "../etc/passwd", &how);
	s->absolute = runtime_openat2(s->dirfd, "/etc/passwd", &how);
	s->link_out = runtime_openat2(s->dirfd, "out", &how);
	s->missing = runtime_openat2(s->dirfd, "missing", &how);
	s->stx_rc = runtime_statx(s->dirfd, "data", 0, STATX_SIZE | STATX_MTIME, &s->stx);
	s->stx_bad = runtime_statx(s->dirfd, "missing", 0, STATX_SIZE, &s->stx);
	if (s->beneath < 0 || pipe2(pipefd, O_CLOEXEC) < 0)
		return;
	s->in = runtime_splice(s->beneath, 2, pipefd[1], -1, 5, 0);
	s->out = runtime_read(pipefd[0], s->got, sizeof(s->got));
	close(pipefd[0]);
	close(pipefd[1]);
	runtime_close(s->beneath);
}

START_TEST(test_io_openat2_statx_splice)
{
	char dir[] = "/tmp/check_io.XXXXXX";
	struct walkst s = { 0 };

	ck_assert_ptr_nonnull(mkdtemp(dir));
	s.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(s.dirfd, 0);
	int fd = openat(s.dirfd, "data", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	ck_assert_int_eq(write(fd, "0123456789", 10), 10);
	close(fd);
	ck_assert_int_eq(symlinkat("/etc/passwd", s.dirfd, "out"), 0);

	ck_assert_int_eq(run_fiber(NULL, walk_fiber, &s), 0);
	unlinkat(s.dirfd, "data", 0);
	unlinkat(s.dirfd, "out", 0);
	close(s.dirfd);
	ck_assert_int_eq(rmdir(dir), 0);

	ck_assert_int_ge(s.beneath, 0);
	ck_assert_int_eq(s.escape, -EXDEV);
	ck_assert_int_eq(s.absolute, -EXDEV);
	ck_assert_int_eq(s.link_out, -EXDEV);
	ck_assert_int_eq(s.missing, -ENOENT);
	ck_assert_int_eq(s.stx_rc, 0);
	ck_assert_uint_eq(s.stx.stx_size, 10);
	ck_assert_int_eq(s.stx_bad, -ENOENT);
	ck_assert_int_eq(s.in, 5);
	ck_assert_int_eq(s.out, 5);
	ck_assert_int_eq(memcmp(s.got, "23456", 5), 0);
}
END_TEST

/*
 * openat2's resolve flags, case by case, in a tree with a directory, links
 * that stay inside it (relative, and one through a directory) and links
 * that leave it (absolute, and by ".."). Each case's answer is the
 * kernel's; the epoll engine's walk where openat2 is missing
 * (RUNTIME_FAULTS=no_openat2:1, CI) must give the same.
 */
struct resolve_case {
	const char *path;
	uint64_t resolve;
	uint64_t flags;
	int want;           /* 0: opens; else -errno */
};

static const struct resolve_case resolve_cases[] = {
	{ "in", RESOLVE_BENEATH, O_RDONLY, 0 },
	{ "sub/up", RESOLVE_BENEATH, O_RDONLY, 0 },
	{ "sub/../data", RESOLVE_BENEATH, O_RDONLY, 0 },
	{ "./sub//../data", RESOLVE_BENEATH, O_RDONLY, 0 },
	{ "sub/../../data", RESOLVE_BENEATH, O_RDONLY, -EXDEV },
	{ "sub/out", RESOLVE_BENEATH, O_RDONLY, -EXDEV },
	{ "in", RESOLVE_NO_SYMLINKS, O_RDONLY, -ELOOP },
	{ "sub/up", RESOLVE_NO_SYMLINKS, O_RDONLY, -ELOOP },
	{ "data", RESOLVE_NO_SYMLINKS, O_RDONLY, 0 },
	{ "/data", RESOLVE_IN_ROOT, O_RDONLY, 0 },
	{ "../../data", RESOLVE_IN_ROOT, O_RDONLY, 0 },
	{ "out", RESOLVE_IN_ROOT, O_RDONLY, -ENOENT }, /* /etc/passwd under the tree */
	{ "data/", RESOLVE_BENEATH, O_RDONLY, -ENOTDIR },
	{ "sub", RESOLVE_BENEATH, O_RDONLY | O_DIRECTORY, 0 },
	{ "in", RESOLVE_BENEATH, O_RDONLY | O_NOFOLLOW, -ELOOP },
	{ "new", RESOLVE_BENEATH, O_RDWR | O_CREAT | O_EXCL, 0 },
	{ "/proc/self/exe", RESOLVE_NO_MAGICLINKS, O_RDONLY, -ELOOP },
	{ "data", RESOLVE_BENEATH | RESOLVE_IN_ROOT, O_RDONLY, -EINVAL },
	{ "data", RESOLVE_BENEATH, O_RDONLY | (1ull << 40), -EINVAL },
	{ "", RESOLVE_BENEATH, O_RDONLY, -ENOENT },
};
#define RESOLVE_CASES (sizeof(resolve_cases) / sizeof(resolve_cases[0]))

struct resolve_run {
	int dirfd;
	int got[RESOLVE_CASES];
};

static void resolve_fiber(void *p)
{
	struct resolve_run *s = p;

	for (size_t i = 0; i < RESOLVE_CASES; i++) {
		const struct resolve_case *c = &resolve_cases[i];
		struct open_how how = { .flags = c->flags | O_CLOEXEC, .resolve = c->resolve,
		                        .mode = c->flags & O_CREAT ? 0600 : 0 };
		s->got[i] = runtime_openat2(s->dirfd, c->path, &how);
		if (s->got[i] >= 0)
			runtime_close(s->got[i]);
	}
}

START_TEST(test_io_openat2_resolve_flags)
{
	char dir[] = "/tmp/check_io.XXXXXX";
	struct resolve_run s;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	s.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(s.dirfd, 0);
	int fd = openat(s.dirfd, "data", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(mkdirat(s.dirfd, "sub", 0700), 0);
	ck_assert_int_eq(symlinkat("data", s.dirfd, "in"), 0);
	ck_assert_int_eq(symlinkat("../in", s.dirfd, "sub/up"), 0);
	ck_assert_int_eq(symlinkat("../../../../../../etc/passwd", s.dirfd, "sub/out"), 0);
	ck_assert_int_eq(symlinkat("/etc/passwd", s.dirfd, "out"), 0);

	ck_assert_int_eq(run_fiber(NULL, resolve_fiber, &s), 0);
	for (const char *const *f = (const char *const[]){ "data", "in", "out", "new", "sub/up",
	                                                    "sub/out", NULL }; *f; f++)
		unlinkat(s.dirfd, *f, 0);
	unlinkat(s.dirfd, "sub", AT_REMOVEDIR);
	close(s.dirfd);
	ck_assert_int_eq(rmdir(dir), 0);
	for (size_t i = 0; i < RESOLVE_CASES; i++) {
		const struct resolve_case *c = &resolve_cases[i];
		ck_assert_msg(c->want ? s.got[i] == c->want : s.got[i] >= 0,
		              "\"%s\", resolve %#llx, flags %#llx: got %d, want %d", c->path,
		              (unsigned long long)c->resolve, (unsigned long long)c->flags,
		              s.got[i], c->want);
	}
}
END_TEST

/* --------------------------------------------------------- bad fds, args */

struct badfd {
	int closed_fd, pipe_fd[2], sock[2];
	ssize_t rd_neg, rd_closed, wr_closed, recv_closed, recv_pipe, send_pipe;
	int fsync_closed, close_closed, shutdown_pipe;
};

static void badfd_fiber(void *p)
{
	struct badfd *b = p;
	char buf[8];

	b->rd_neg = runtime_read(-1, buf, sizeof(buf));
	b->rd_closed = runtime_read(b->closed_fd, buf, sizeof(buf));
	b->wr_closed = runtime_write(b->closed_fd, "x", 1);
	b->recv_closed = runtime_recv(b->closed_fd, buf, sizeof(buf), 0);
	b->fsync_closed = runtime_fsync(b->closed_fd, 0);
	b->close_closed = runtime_close(b->closed_fd);
	b->recv_pipe = runtime_recv(b->pipe_fd[0], buf, sizeof(buf), 0);
	b->send_pipe = runtime_send(b->pipe_fd[1], "x", 1, 0);
	b->shutdown_pipe = runtime_sock_shutdown(b->pipe_fd[1], SHUT_WR);
}

START_TEST(test_io_bad_fd_gives_ebadf)
{
	struct badfd b;

	memset(&b, 0x5a, sizeof(b));
	ck_assert_int_eq(pipe2(b.pipe_fd, O_CLOEXEC), 0);
	/* A high number nothing will take (a freshly closed low one would be
	 * reused by the runtime's own ring). */
	b.closed_fd = dup2(b.pipe_fd[0], 1000);
	ck_assert_int_eq(b.closed_fd, 1000);
	close(b.closed_fd);
	ck_assert_int_eq(fd_state(b.closed_fd), EBADF);
	ck_assert_int_eq(run_fiber(NULL, badfd_fiber, &b), 0);
	ck_assert_int_eq(b.rd_neg, -EBADF);
	ck_assert_int_eq(b.rd_closed, -EBADF);
	ck_assert_int_eq(b.wr_closed, -EBADF);
	ck_assert_int_eq(b.recv_closed, -EBADF);
	ck_assert_int_eq(b.fsync_closed, -EBADF);
	ck_assert_int_eq(b.close_closed, -EBADF);
	ck_assert_int_eq(b.recv_pipe, -ENOTSOCK);
	ck_assert_int_eq(b.send_pipe, -ENOTSOCK);
	ck_assert_int_eq(b.shutdown_pipe, -ENOTSOCK);
	ck_assert(!readable_now(b.pipe_fd[0])); /* the failed send wrote nothing */
	close(b.pipe_fd[0]);
	close(b.pipe_fd[1]);
}
END_TEST

struct badarg {
	int fd[2];
	ssize_t readv_neg, writev_neg, readv_big, pread_neg, pwrite_neg;
	int accept_flags, accept_flags2, openat_null;
	ssize_t read_after;
	char buf[8];
};

static void badarg_fiber(void *p)
{
	struct badarg *a = p;
	char buf[4];
	struct iovec iov = { buf, sizeof(buf) };
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	a->readv_neg = runtime_readv(a->fd[1], &iov, -1);
	a->writev_neg = runtime_writev(a->fd[0], &iov, -1);
	a->readv_big = runtime_readv(a->fd[1], &iov, IOV_MAX + 1);
	a->pread_neg = runtime_pread(a->fd[1], buf, sizeof(buf), -1);
	a->pwrite_neg = runtime_pwrite(a->fd[0], "zz", 2, -5);
	a->accept_flags = runtime_accept(a->fd[1], (struct sockaddr *)&ss, &len, 0x1);
	a->accept_flags2 = runtime_accept(a->fd[1], NULL, NULL, SOCK_CLOEXEC | MSG_PEEK);
	a->openat_null = runtime_openat(AT_FDCWD, NULL, O_RDONLY, 0);
	/* None of the rejected calls touched the fd: "ok" is still there whole. */
	a->read_after = runtime_read(a->fd[1], a->buf, sizeof(a->buf));
}

START_TEST(test_io_bad_arguments_give_einval)
{
	struct badarg a = { .read_after = -999 };

	make_pair(a.fd);
	ck_assert_int_eq(write(a.fd[0], "ok", 2), 2);
	ck_assert_int_eq(run_fiber(NULL, badarg_fiber, &a), 0);
	ck_assert_int_eq(a.readv_neg, -EINVAL);
	ck_assert_int_eq(a.writev_neg, -EINVAL);
	ck_assert_int_eq(a.readv_big, -EINVAL);
	ck_assert_int_eq(a.pread_neg, -EINVAL);
	ck_assert_int_eq(a.pwrite_neg, -EINVAL);
	ck_assert_int_eq(a.accept_flags, -EINVAL);
	ck_assert_int_eq(a.accept_flags2, -EINVAL);
	ck_assert_int_eq(a.openat_null, -EFAULT);
	ck_assert_int_eq(a.read_after, 2);
	ck_assert_int_eq(memcmp(a.buf, "ok", 2), 0);
	close(a.fd[0]);
	close(a.fd[1]);
}
END_TEST

/* Every blocking call, made from the test's own thread (no fiber), must
 * refuse with -EPERM and touch nothing. Close is the exception: it always
 * closes, fiber or not. */
static void check_eperm_everywhere(const int fd[2])
{
	char buf[8] = "data";
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct sockaddr_storage ss = { .ss_family = AF_INET };
	socklen_t len = sizeof(ss);
	size_t done = 99;

	ck_assert_int_eq(runtime_read(fd[1], buf, sizeof(buf)), -EPERM);
	ck_assert_int_eq(runtime_write(fd[0], buf, 4), -EPERM);
	ck_assert_int_eq(runtime_readv(fd[1], &iov, 1), -EPERM);
	ck_assert_int_eq(runtime_writev(fd[0], &iov, 1), -EPERM);
	ck_assert_int_eq(runtime_pread(fd[1], buf, sizeof(buf), 0), -EPERM);
	ck_assert_int_eq(runtime_pwrite(fd[0], buf, 4, 0), -EPERM);
	ck_assert_int_eq(runtime_recv(fd[1], buf, sizeof(buf), 0), -EPERM);
	ck_assert_int_eq(runtime_send(fd[0], buf, 4, 0), -EPERM);
	ck_assert_int_eq(runtime_recvmsg(fd[1], &msg, 0), -EPERM);
	ck_assert_int_eq(runtime_sendmsg(fd[0], &msg, 0), -EPERM);
	ck_assert_int_eq(runtime_accept(fd[1], (struct sockaddr *)&ss, &len, 0), -EPERM);
	ck_assert_int_eq(runtime_connect(fd[1], (struct sockaddr *)&ss, len), -EPERM);
	ck_assert_int_eq(runtime_openat(AT_FDCWD, "/", O_RDONLY, 0), -EPERM);
	ck_assert_int_eq(runtime_fsync(fd[0], 0), -EPERM);
	ck_assert_int_eq(runtime_sock_shutdown(fd[0], SHUT_WR), -EPERM);
	ck_assert_int_eq(runtime_poll(fd[1], POLLIN, -1), -EPERM);
	ck_assert_int_eq(runtime_poll(fd[1], POLLIN, 10 * MS), -EPERM);
	ck_assert_int_eq(runtime_sleep(MS), -EPERM);
	ck_assert_int_eq(runtime_write_all(fd[0], buf, 4, &done), -EPERM);
	ck_assert_uint_eq(done, 0);
	done = 99;
	ck_assert_int_eq(runtime_read_exact(fd[1], buf, 4, &done), -EPERM);
	ck_assert_uint_eq(done, 0);
	ck_assert(!readable_now(fd[1]));      /* nothing was written */
	ck_assert_int_eq(write(fd[0], "z", 1), 1); /* still connected */
	ck_assert(readable_now(fd[1]));
	ck_assert_int_eq(read(fd[1], buf, sizeof(buf)), 1);
}

START_TEST(test_io_outside_fiber_gives_eperm)
{
	int fd[2];
	struct runtime *rt;

	make_pair(fd);
	check_eperm_everywhere(fd);             /* no runtime at all */
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	check_eperm_everywhere(fd);             /* a runtime, not running */
	runtime_destroy(rt);
	ck_assert_int_eq(runtime_close(fd[0]), 0);
	ck_assert_int_eq(fd_state(fd[0]), EBADF);
	close(fd[1]);
}
END_TEST

/* --------------------------------------------------------------- poll */

struct pollst {
	int64_t timeout;         /* of the first poll: -1 or an hour */
	int fd[2];
	int rc, rc_out, rc_hup;
	bool written;            /* the writer had written when poll returned */
	uint64_t waited_ms;
};

static void poll_writer(void *p)
{
	struct pollst *s = p;
	runtime_sleep(20 * MS);
	s->written = true;
	runtime_write(s->fd[1], "!", 1);
}

static void poll_waiter(void *p)
{
	struct pollst *s = p;

	make_pair(s->fd);
	ck_assert_int_eq(runtime_spawn(runtime_current(), poll_writer, s), 0);
	uint64_t t0 = runtime_now();
	s->rc = runtime_poll(s->fd[0], POLLIN, s->timeout);
	s->waited_ms = (runtime_now() - t0) / MS;
	s->written = s->written && s->rc > 0;
	s->rc_out = runtime_poll(s->fd[0], POLLOUT, 5000 * MS);
	runtime_close(s->fd[1]);
	s->rc_hup = runtime_poll(s->fd[0], POLLIN, 5000 * MS);
	runtime_close(s->fd[0]);
}

/* _i: the first poll waits without a limit, or with an hour's (a linked
 * timeout that must be dropped, not waited for, once the fd is ready: the
 * run would last the hour, past the test's timeout). */
START_TEST(test_io_poll_ready_when_peer_writes)
{
	struct pollst s = { .timeout = _i ? 3600 * 1000 * (int64_t)MS : -1, .rc = -999 };

	ck_assert_int_eq(run_fiber(NULL, poll_waiter, &s), 0);
	ck_assert_int_eq(s.rc, POLLIN);
	ck_assert(s.written);
	ck_assert_uint_ge(s.waited_ms, 19);
	ck_assert_int_eq(s.rc_out, POLLOUT);
	/* Readable (pending "!" and EOF) and hung up: POLLHUP always reported. */
	ck_assert_int_eq(s.rc_hup & POLLIN, POLLIN);
	ck_assert_int_eq(s.rc_hup & POLLHUP, POLLHUP);
}
END_TEST

struct polltimeout {
	int fd[2];
	int rc;
	uint64_t elapsed;
	int zero_idle, zero_ready, zero_out, after_ready;
};

static void poll_timeout_fiber(void *p)
{
	struct polltimeout *s = p;

	make_pair(s->fd);
	uint64_t t0 = runtime_now();
	s->rc = runtime_poll(s->fd[0], POLLIN, 50 * MS);
	s->elapsed = runtime_now() - t0;

	s->zero_idle = runtime_poll(s->fd[0], POLLIN, 0); /* a wait would never end */
	s->zero_out = runtime_poll(s->fd[0], POLLOUT, 0);
	runtime_write(s->fd[1], "r", 1);
	s->zero_ready = runtime_poll(s->fd[0], POLLIN, 0);
	s->after_ready = runtime_poll(s->fd[0], POLLIN, 50 * MS);
	runtime_close(s->fd[0]);
	runtime_close(s->fd[1]);
}

START_TEST(test_io_poll_timeout)
{
	struct polltimeout s = { .rc = -999 };

	ck_assert_int_eq(run_fiber(NULL, poll_timeout_fiber, &s), 0);
	ck_assert_int_eq(s.rc, -ETIMEDOUT);
	ck_assert_uint_ge(s.elapsed, 50 * MS);
	ck_assert_int_eq(s.zero_idle, -ETIMEDOUT); /* a check, never a wait */
	ck_assert_int_eq(s.zero_out, POLLOUT);
	ck_assert_int_eq(s.zero_ready, POLLIN);
	ck_assert_int_eq(s.after_ready, POLLIN);
}
END_TEST

/* ----------------------------------------------------------- deadlines */

enum { DL_READ, DL_RECV, DL_RECVMSG, DL_READV, DL_POLL_FOREVER, DL_POLL_LONG, DL_SLEEP, DL_N };

struct deadline {
	int fd[2];
	ssize_t rc[DL_N];
	uint64_t elapsed[DL_N];
	uint64_t set_to, got;
	ssize_t after;
	char buf[8];
};

static ssize_t dl_call(int which, int fd)
{
	char buf[8];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	switch (which) {
	case DL_READ: return runtime_read(fd, buf, sizeof(buf));
	case DL_RECV: return runtime_recv(fd, buf, sizeof(buf), 0);
	case DL_RECVMSG: return runtime_recvmsg(fd, &msg, 0);
	case DL_READV: return runtime_readv(fd, &iov, 1);
	case DL_POLL_FOREVER: return runtime_poll(fd, POLLIN, -1);
	case DL_POLL_LONG: return runtime_poll(fd, POLLIN, 3600 * 1000 * MS);
	case DL_SLEEP: return runtime_sleep(3600 * 1000 * MS);
	}
	return -999;
}

static void deadline_fiber(void *p)
{
	struct deadline *d = p;

	make_pair(d->fd);
	for (int i = 0; i < DL_N; i++) {
		uint64_t t0 = runtime_now();
		runtime_deadline_set(t0 + 30 * MS);
		if (i == 0) {
			d->set_to = t0 + 30 * MS;
			d->got = runtime_deadline_get();
		}
		d->rc[i] = dl_call(i, d->fd[0]);
		d->elapsed[i] = runtime_now() - t0;
	}
	/* The deadline has passed; once cleared, calls work again. */
	runtime_deadline_set(0);
	runtime_write(d->fd[1], "late", 4);
	d->after = runtime_read(d->fd[0], d->buf, sizeof(d->buf));
	runtime_close(d->fd[0]);
	runtime_close(d->fd[1]);
}

/* Sleeps use the core's timers, I/O linked timeouts. Each call would wait
 * an hour or for ever, past the test's timeout, if its deadline did not
 * end it; none ends before it. */
START_TEST(test_io_deadline_cuts_blocking_calls)
{
	struct deadline d = { .after = -999 };

	for (int i = 0; i < DL_N; i++)
		d.rc[i] = -999;
	ck_assert_int_eq(run_fiber(NULL, deadline_fiber, &d), 0);
	ck_assert_uint_eq(d.got, d.set_to);
	for (int i = 0; i < DL_N; i++) {
		ck_assert_msg(d.rc[i] == -ETIMEDOUT, "call %d returned %zd", i, d.rc[i]);
		ck_assert_msg(d.elapsed[i] >= 30 * MS, "call %d took %llu ns", i,
		              (unsigned long long)d.elapsed[i]);
	}
	ck_assert_int_eq(d.after, 4);
	ck_assert_int_eq(memcmp(d.buf, "late", 4), 0);
}
END_TEST

struct pastdl {
	int fd[2];
	ssize_t rd, wr, rc_poll, rc_poll_t, rc_recv, rc_sleep;
	int close_rc, closed_state;
	int dupfd;
	bool peer_got_write;
	uint64_t set_to, got_after_clear;
	ssize_t after;
	char buf[8];
};

static void pastdl_fiber(void *p)
{
	struct pastdl *s = p;
	char buf[8];

	s->set_to = runtime_now() - 1;
	runtime_deadline_set(s->set_to);
	s->rd = runtime_read(s->fd[0], buf, sizeof(buf));
	s->rc_recv = runtime_recv(s->fd[0], buf, sizeof(buf), 0);
	s->rc_poll = runtime_poll(s->fd[0], POLLIN, -1);
	s->rc_poll_t = runtime_poll(s->fd[0], POLLIN, 1000 * MS);
	s->rc_sleep = runtime_sleep(MS);
	s->wr = runtime_write(s->fd[0], "nope", 4);
	s->peer_got_write = readable_now(s->fd[1]);
	/* close ignores deadlines: cleanup cannot leak */
	s->close_rc = runtime_close(s->dupfd);
	s->closed_state = fd_state(s->dupfd);
	runtime_deadline_set(0);
	s->got_after_clear = runtime_deadline_get();
	/* (a bound, so that lost data fails the test instead of hanging it) */
	runtime_deadline_set(runtime_now() + 2000 * MS);
	s->after = runtime_read(s->fd[0], s->buf, sizeof(s->buf));
}

START_TEST(test_io_deadline_in_past_fails_at_once_and_consumes_nothing)
{
	struct pastdl s = { .after = -999 };

	make_pair(s.fd);
	s.dupfd = dup(s.fd[0]);
	ck_assert_int_ge(s.dupfd, 0);
	ck_assert_int_eq(write(s.fd[1], "data", 4), 4);
	ck_assert_int_eq(run_fiber(NULL, pastdl_fiber, &s), 0);
	ck_assert_int_eq(s.rd, -ETIMEDOUT);
	ck_assert_int_eq(s.rc_recv, -ETIMEDOUT);
	ck_assert_int_eq(s.rc_poll, -ETIMEDOUT);
	ck_assert_int_eq(s.rc_poll_t, -ETIMEDOUT);
	ck_assert_int_eq(s.rc_sleep, -ETIMEDOUT);
	ck_assert_int_eq(s.wr, -ETIMEDOUT);
	ck_assert(!s.peer_got_write);
	ck_assert_int_eq(s.close_rc, 0);
	ck_assert_int_eq(s.closed_state, EBADF);
	ck_assert_uint_eq(s.got_after_clear, 0);
	ck_assert_int_eq(s.after, 4);
	ck_assert_int_eq(memcmp(s.buf, "data", 4), 0);
	close(s.fd[0]);
	close(s.fd[1]);
}
END_TEST

/* A deadline that does not fire must not delay the call or outlive it: an
 * hour away, a linked timeout kept would hold the run past the test's
 * timeout. */
struct far_dl {
	int fd[2];
	ssize_t rd, sl;
	char buf[8];
};

static void far_deadline_fiber(void *p)
{
	struct far_dl *s = p;

	runtime_deadline_set(runtime_now() + 3600 * 1000 * MS);
	s->rd = runtime_read(s->fd[0], s->buf, sizeof(s->buf));
	s->sl = runtime_sleep(10 * MS);
}

START_TEST(test_io_deadline_not_reached_changes_nothing)
{
	struct far_dl s = { .rd = -999, .sl = -999 };

	make_pair(s.fd);
	ck_assert_int_eq(write(s.fd[1], "abc", 3), 3);
	ck_assert_int_eq(run_fiber(NULL, far_deadline_fiber, &s), 0); /* no hour-long run */
	ck_assert_int_eq(s.rd, 3);
	ck_assert_int_eq(memcmp(s.buf, "abc", 3), 0);
	ck_assert_int_eq(s.sl, 0);
	close(s.fd[0]);
	close(s.fd[1]);
}
END_TEST

/* ------------------------------------------------------------- cancel */

enum { CANCEL_RECV, CANCEL_RECV_DEADLINE, CANCEL_POLL, CANCEL_N };

struct cancelst {
	int mode;
	int fd[2];
	struct runtime_fiber *a;
	/* A */
	ssize_t blocked_rc, next_rc, next_write_rc;
	int close_rc, closed_state;
	bool a_done;
	uint64_t blocked_ns;
	/* B */
	int cancel_rc, cancel_again_rc, join_rc;
	void *result;
	ssize_t peer_read;      /* what the peer finds: 0 (EOF) if nothing was written */
};

static int cancel_marker;

static void *cancel_victim(void *p)
{
	struct cancelst *s = p;
	char buf[8];
	uint64_t t0 = runtime_now();

	switch (s->mode) {
	case CANCEL_RECV:
		s->blocked_rc = runtime_recv(s->fd[0], buf, sizeof(buf), 0);
		break;
	case CANCEL_RECV_DEADLINE:
		runtime_deadline_set(runtime_now() + 5000 * MS);
		s->blocked_rc = runtime_recv(s->fd[0], buf, sizeof(buf), 0);
		break;
	case CANCEL_POLL:
		s->blocked_rc = runtime_poll(s->fd[0], POLLIN, -1);
		break;
	}
	s->blocked_ns = runtime_now() - t0;
	s->next_rc = runtime_read(s->fd[0], buf, sizeof(buf));
	s->next_write_rc = runtime_write(s->fd[0], "w", 1);
	s->close_rc = runtime_close(s->fd[0]);
	s->closed_state = fd_state(s->fd[0]);
	s->a_done = true;
	return &cancel_marker;
}

static void cancel_killer(void *p)
{
	struct cancelst *s = p;

	runtime_sleep(10 * MS);
	s->cancel_rc = runtime_fiber_cancel(s->a);
	for (int i = 0; i < 1000 && !s->a_done; i++)
		runtime_sleep(MS);
	s->cancel_again_rc = runtime_fiber_cancel(s->a); /* ended, not joined */
	s->join_rc = runtime_fiber_join(s->a, &s->result);
	char c;
	s->peer_read = recv(s->fd[1], &c, 1, MSG_DONTWAIT);
	runtime_close(s->fd[1]);
}

static void cancel_root(void *p)
{
	struct cancelst *s = p;

	make_pair(s->fd);
	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &s->a, cancel_victim, s), 0);
	ck_assert_int_eq(runtime_spawn(runtime_current(), cancel_killer, s), 0);
}

/* _i: what the victim is blocked in (recv; recv with a deadline, i.e. a
 * linked pair; poll). */
START_TEST(test_io_cancel_blocked_call_is_sticky_but_close_works)
{
	struct cancelst s = { .mode = _i, .blocked_rc = -999, .next_rc = -999,
	                      .close_rc = -999, .join_rc = -999, .cancel_rc = -999,
	                      .cancel_again_rc = -999, .peer_read = -999 };

	ck_assert_int_eq(run_fiber(NULL, cancel_root, &s), 0);
	ck_assert_int_eq(s.cancel_rc, 0);
	ck_assert_int_eq(s.blocked_rc, -ECANCELED);
	ck_assert_uint_ge(s.blocked_ns, 9 * MS); /* until the cancel, not before */
	ck_assert_int_eq(s.next_rc, -ECANCELED);
	ck_assert_int_eq(s.next_write_rc, -ECANCELED);
	ck_assert_int_eq(s.peer_read, 0);
	ck_assert_int_eq(s.close_rc, 0);
	ck_assert_int_eq(s.closed_state, EBADF);
	ck_assert(s.a_done);
	ck_assert_int_eq(s.cancel_again_rc, -ESRCH);
	ck_assert_int_eq(s.join_rc, 0);
	ck_assert_ptr_eq(s.result, &cancel_marker);
}
END_TEST

/* ------------------------------------------------- more ops than SQEs */

#define NMANY 200

struct many;

struct many_one {
	struct many *m;
	int i;
	ssize_t rc;
	unsigned char byte;
};

struct many {
	int fd[NMANY][2];
	struct many_one one[NMANY];
	int received;
	int timed_out;
	bool with_deadlines;
	uint64_t elapsed[NMANY];
};

static void many_receiver(void *p)
{
	struct many_one *o = p;
	uint64_t t0 = runtime_now();

	/* Odd ones: a linked pair (2 SQEs); even ones: 1 SQE. Mixed, so the
	 * 8-entry SQ fills up half-way through a pair. */
	if (o->m->with_deadlines && (o->i & 1))
		runtime_deadline_set(t0 + 30 * MS);
	o->rc = runtime_recv(o->m->fd[o->i][0], &o->byte, 1, 0);
	o->m->elapsed[o->i] = runtime_now() - t0;
	if (o->rc == 1)
		o->m->received++;
	else if (o->rc == -ETIMEDOUT)
		o->m->timed_out++;
}

static void many_root(void *p)
{
	struct many *m = p;

	for (int i = 0; i < NMANY; i++) {
		m->one[i] = (struct many_one){ .m = m, .i = i, .rc = -999 };
		ck_assert_int_eq(runtime_spawn(runtime_current(), many_receiver, &m->one[i]), 0);
	}
	runtime_sleep(10 * MS); /* every receiver is parked in recv by now */
	for (int i = 0; i < NMANY; i++) {
		if (m->with_deadlines && (i & 1))
			continue; /* odd ones wait for their deadline */
		unsigned char b = (unsigned char)i;
		ck_assert_int_eq(runtime_write(m->fd[i][1], &b, 1), 1);
	}
}

static void run_many(struct many *m)
{
	struct runtime_config cfg = tiny_ring();

	for (int i = 0; i < NMANY; i++)
		make_pair(m->fd[i]);
	ck_assert_int_eq(run_fiber(&cfg, many_root, m), 0);
	for (int i = 0; i < NMANY; i++) {
		close(m->fd[i][0]);
		close(m->fd[i][1]);
	}
}

START_TEST(test_io_more_ops_in_flight_than_sq_entries)
{
	struct many *m = calloc(1, sizeof(*m));

	ck_assert_ptr_nonnull(m);
	run_many(m);
	ck_assert_int_eq(m->received, NMANY);
	for (int i = 0; i < NMANY; i++) {
		ck_assert_int_eq(m->one[i].rc, 1);
		ck_assert_uint_eq(m->one[i].byte, (unsigned char)i);
	}
	free(m);
}
END_TEST

START_TEST(test_io_many_linked_deadlines_on_tiny_ring)
{
	struct many *m = calloc(1, sizeof(*m));

	ck_assert_ptr_nonnull(m);
	m->with_deadlines = true;
	run_many(m);
	ck_assert_int_eq(m->received, NMANY / 2);
	ck_assert_int_eq(m->timed_out, NMANY / 2);
	for (int i = 0; i < NMANY; i++) {
		if (i & 1) {
			ck_assert_int_eq(m->one[i].rc, -ETIMEDOUT);
			ck_assert_uint_ge(m->elapsed[i], 30 * MS);
		} else {
			ck_assert_int_eq(m->one[i].rc, 1);
			ck_assert_uint_eq(m->one[i].byte, (unsigned char)i);
		}
	}
	free(m);
}
END_TEST

/* -------------------------------------------------------------- suite */

static Suite *io_suite(void)
{
	Suite *s = suite_create("io");
	TCase *tc;

	tc = tcase_create("roundtrip");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_io_read_write_echo);
	tcase_add_test(tc, test_io_recv_send_echo);
	tcase_add_loop_test(tc, test_io_message_larger_than_socket_buffer, 0, 2);
	tcase_add_test(tc, test_io_send_on_idle_core_is_made_at_once);
	tcase_add_test(tc, test_io_readv_writev_socket);
	tcase_add_test(tc, test_io_recvmsg_sendmsg_two_iovecs);
	tcase_add_loop_test(tc, test_io_echo_under_each_ring_option, 0, OPT_N);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_io_file_openat_pwrite_fsync_pread_close);
	tcase_add_test(tc, test_io_close_closes_an_io_uring_fd);
	tcase_add_test(tc, test_io_openat2_statx_splice);
	tcase_add_test(tc, test_io_openat2_resolve_flags);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_io_bad_fd_gives_ebadf);
	tcase_add_test(tc, test_io_bad_arguments_give_einval);
	tcase_add_test(tc, test_io_outside_fiber_gives_eperm);
	suite_add_tcase(s, tc);

	tc = tcase_create("poll");
	tcase_set_timeout(tc, 10);
	tcase_add_loop_test(tc, test_io_poll_ready_when_peer_writes, 0, 2);
	tcase_add_test(tc, test_io_poll_timeout);
	suite_add_tcase(s, tc);

	tc = tcase_create("deadline");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_io_deadline_cuts_blocking_calls);
	tcase_add_test(tc, test_io_deadline_in_past_fails_at_once_and_consumes_nothing);
	tcase_add_test(tc, test_io_deadline_not_reached_changes_nothing);
	suite_add_tcase(s, tc);

	tc = tcase_create("cancel");
	tcase_set_timeout(tc, 10);
	tcase_add_loop_test(tc, test_io_cancel_blocked_call_is_sticky_but_close_works, 0,
	                    CANCEL_N);
	suite_add_tcase(s, tc);

	tc = tcase_create("pressure");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_io_more_ops_in_flight_than_sq_entries);
	tcase_add_test(tc, test_io_many_linked_deadlines_on_tiny_ring);
	suite_add_tcase(s, tc);

	return s;
}

TEST_MAIN(io_suite)
