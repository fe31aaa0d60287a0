/* SPDX-License-Identifier: MIT */
/*
 * check_preload.c - libruntime-preload, linked into this program (as a
 * sanitizer build needs; tests/preload_ld.sh covers LD_PRELOAD).
 *
 * "semantics": each case builds its own fixture and makes one wrapped
 * call; it runs once on the main thread (libc's call, untouched) and once
 * in a fiber (the wrapper), and the return value, errno and data must be
 * the same. Cases that block in libc must also have gone through the
 * ring in the fiber (its core's SQE count grew).
 * "parking": a fiber blocked in a wrapped call lets another fiber of its
 * core run; cancels and deadlines end wrapped calls as documented.
 * "clients": 1,000 fibers on one core, each an ordinary blocking client:
 * sockets written the usual way against an echo server, hiredis's
 * blocking API against a real redis-server, and libcurl's easy API
 * against demos/http/http-server (each skipped, saying so, where the
 * library or the server is missing; in CI, where ./build.sh check
 * installs them, that is a failure). hiredis and libcurl are dlopen'ed
 * so that the build does not need them; their calls reach the wrappers
 * all the same, as this program links the preload library before libc.
 */
#include "testutil.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../preload/runtime_preload.h"

/* --------------------------------------------------------- scaffolding */

struct outcome {
	long rc;
	int err;             /* errno if rc < 0, else 0 */
	unsigned char data[512];
	size_t len;          /* bytes of data that must match */
};

#define RECORD(o, expr)                            \
	do {                                       \
		errno = 0;                         \
		(o)->rc = (long)(expr);            \
		(o)->err = (o)->rc < 0 ? errno : 0; \
	} while (0)

/* getaddrinfo's: errno means something only with EAI_SYSTEM (what a
 * wrapper's offload left there otherwise is no difference). */
#define RECORD_EAI(o, expr)                                          \
	do {                                                         \
		errno = 0;                                           \
		(o)->rc = (long)(expr);                              \
		(o)->err = (o)->rc == EAI_SYSTEM ? errno : 0;        \
	} while (0)

/* Append bytes to what must match. */
static void note(struct outcome *o, const void *p, size_t n)
{
	ck_assert_uint_le(o->len + n, sizeof(o->data));
	memcpy(o->data + o->len, p, n);
	o->len += n;
}

typedef void case_fn(struct outcome *o);

struct fiber_case {
	case_fn *fn;
	struct outcome out;
	uint64_t enters;
};

/* The core's trips to the kernel: a call that parks its fiber lets the
 * loop run (and enter the kernel), on either engine; one that blocks the
 * core thread does not. */
static uint64_t enters_now(void)
{
	struct runtime_core_stats st;
	runtime_stats(runtime_current(), &st, 1, NULL);
	return st.enters;
}

/* Operations the core's engine started (io_uring: SQEs). */
static uint64_t sqes_now(void)
{
	struct runtime_core_stats st;
	runtime_stats(runtime_current(), &st, 1, NULL);
	return st.sqes_submitted;
}

static void fiber_case_run(void *arg)
{
	struct fiber_case *fc = arg;
	uint64_t before = enters_now();
	fc->fn(&fc->out);
	fc->enters = enters_now() - before;
}

/* The case through libc on this thread, then through the wrapper in a
 * fiber: the same result. parks: libc would block, so the runtime must
 * have parked the fiber. */
static void compare(const char *name, case_fn *fn, bool parks)
{
	struct outcome libc_out = { 0 };
	struct fiber_case fc = { .fn = fn };

	fn(&libc_out);
	ck_assert_int_eq(run_fiber(NULL, fiber_case_run, &fc), 0);
	ck_assert_msg(libc_out.rc == fc.out.rc && libc_out.err == fc.out.err,
	              "%s: libc %ld (%s), fiber %ld (%s)", name, libc_out.rc,
	              strerror(libc_out.err), fc.out.rc, strerror(fc.out.err));
	size_t at = 0;
	while (at < fc.out.len && at < libc_out.len && libc_out.data[at] == fc.out.data[at])
		at++;
	ck_assert_msg(libc_out.len == fc.out.len && at == fc.out.len,
	              "%s: data differ: %zu and %zu bytes, first difference at byte %zu", name,
	              libc_out.len, fc.out.len, at);
	if (parks)
		ck_assert_msg(fc.enters > 0, "%s: the fiber's call did not park it", name);
}

static void unix_pair(int sv[2], int flags)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | flags, 0, sv), 0);
}

/* A number no fd has: opened and closed. */
static int closed_fd(void)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	close(p[0]);
	close(p[1]);
	return p[1];
}

static void set_timeout(int fd, int name, long ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, name, &tv, sizeof(tv)), 0);
}

/* A TCP listener on 127.0.0.1, any port. */
static int tcp_listener(int backlog, int type_flags)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | type_flags, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;

	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, backlog), 0);
	return l;
}

static struct sockaddr_in loopback(uint16_t port)
{
	return (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(port),
		                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
}

/* ------------------------------------------------------ read and write */

static void case_read_ready(struct outcome *o)
{
	int sv[2];
	char buf[64];
	unix_pair(sv, 0);
	ck_assert_int_eq(write(sv[1], "hello", 5), 5);
	RECORD(o, read(sv[0], buf, sizeof(buf)));
	note(o, buf, o->rc > 0 ? (size_t)o->rc : 0);
	close(sv[0]);
	close(sv[1]);
}

static void case_read_eof(struct outcome *o)
{
	int sv[2];
	char buf[8];
	unix_pair(sv, 0);
	close(sv[1]);
	RECORD(o, read(sv[0], buf, sizeof(buf)));
	close(sv[0]);
}

static void case_read_bad_fd(struct outcome *o)
{
	char buf[8];
	RECORD(o, read(closed_fd(), buf, sizeof(buf)));
}

static void case_read_nonblocking(struct outcome *o)
{
	int sv[2];
	char buf[8];
	unix_pair(sv, SOCK_NONBLOCK);
	RECORD(o, read(sv[0], buf, sizeof(buf)));
	close(sv[0]);
	close(sv[1]);
}

/* The table learns the fd as blocking, then fcntl makes it non-blocking. */
static void case_read_after_fcntl_nonblock(struct outcome *o)
{
	int sv[2];
	char buf[8];
	unix_pair(sv, 0);
	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	ck_assert_int_eq(read(sv[0], buf, sizeof(buf)), 1);
	int fl = fcntl(sv[0], F_GETFL);
	ck_assert_int_eq(fcntl(sv[0], F_SETFL, fl | O_NONBLOCK), 0);
	RECORD(o, read(sv[0], buf, sizeof(buf)));
	close(sv[0]);
	close(sv[1]);
}

/* O_NONBLOCK set through a dup is the same open file's. */
static void case_read_nonblock_through_dup(struct outcome *o)
{
	int sv[2];
	char buf[8];
	unix_pair(sv, 0);
	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	ck_assert_int_eq(read(sv[0], buf, sizeof(buf)), 1);
	int d = dup(sv[0]);
	ck_assert_int_ge(d, 0);
	ck_assert_int_eq(fcntl(d, F_SETFL, O_NONBLOCK), 0);
	RECORD(o, read(sv[0], buf, sizeof(buf)));
	close(d);
	close(sv[0]);
	close(sv[1]);
}

static void case_read_rcvtimeo(struct outcome *o)
{
	int sv[2];
	char buf[8];
	unix_pair(sv, 0);
	ck_assert_int_eq(read(sv[0], buf, 0), 0); /* the table knows it before the timeout */
	set_timeout(sv[0], SO_RCVTIMEO, 30);
	RECORD(o, read(sv[0], buf, sizeof(buf)));
	close(sv[0]);
	close(sv[1]);
}

static void case_recv_rcvtimeo(struct outcome *o)
{
	int sv[2];
	char buf[8];
	unix_pair(sv, 0);
	set_timeout(sv[0], SO_RCVTIMEO, 30);
	RECORD(o, recv(sv[0], buf, sizeof(buf), 0));
	close(sv[0]);
	close(sv[1]);
}

static void case_recv_peek_then_dontwait(struct outcome *o)
{
	int sv[2];
	char buf[16];
	unix_pair(sv, 0);
	ck_assert_int_eq(send(sv[1], "peekaboo", 8, 0), 8);
	RECORD(o, recv(sv[0], buf, 4, MSG_PEEK));
	note(o, buf, 4);
	ck_assert_int_eq(recv(sv[0], buf, sizeof(buf), 0), 8);
	RECORD(o, recv(sv[0], buf, sizeof(buf), MSG_DONTWAIT));
	close(sv[0]);
	close(sv[1]);
}

static void case_write_closed_peer(struct outcome *o)
{
	int sv[2];
	unix_pair(sv, 0);
	close(sv[1]);
	RECORD(o, write(sv[0], "x", 1));
	close(sv[0]);
}

/* A blocking write into a full socket: what fits, then SO_SNDTIMEO's
 * EAGAIN. */
static void case_write_sndtimeo(struct outcome *o)
{
	enum { SIZE = 1 << 20 };
	int sv[2];
	char *big = calloc(1, SIZE);
	ck_assert_ptr_nonnull(big);
	unix_pair(sv, 0);
	set_timeout(sv[0], SO_SNDTIMEO, 30);
	RECORD(o, write(sv[0], big, SIZE) > 0);
	RECORD(o, write(sv[0], big, SIZE));
	close(sv[0]);
	close(sv[1]);
	free(big);
}

static void case_send_not_a_socket(struct outcome *o)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	RECORD(o, send(p[1], "x", 1, 0));
	close(p[0]);
	close(p[1]);
}

static void case_vectors(struct outcome *o)
{
	int sv[2];
	char a[3], b[16];
	struct iovec out[3] = { { "one", 3 }, { "two", 3 }, { "three", 5 } };
	struct iovec in[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	unix_pair(sv, 0);
	RECORD(o, writev(sv[1], out, 3));
	RECORD(o, readv(sv[0], in, 2));
	note(o, a, sizeof(a));
	note(o, b, 8);
	volatile int negative = -1; /* EINVAL, past the compiler's eye */
	RECORD(o, writev(sv[1], out, negative));
	close(sv[0]);
	close(sv[1]);
}

static void case_pread_pwrite(struct outcome *o)
{
	char path[] = "/tmp/check_preload_XXXXXX";
	int fd = mkstemp(path);
	char buf[16] = { 0 };
	ck_assert_int_ge(fd, 0);
	unlink(path);
	RECORD(o, pwrite(fd, "0123456789", 10, 4));
	RECORD(o, pread(fd, buf, sizeof(buf), 8));
	note(o, buf, sizeof(buf));
	RECORD(o, pread(fd, buf, 4, -1));
	note(o, &o->rc, sizeof(o->rc));
	note(o, &o->err, sizeof(o->err));
	int sv[2];
	unix_pair(sv, 0);
	RECORD(o, pread(sv[0], buf, 4, 0)); /* ESPIPE */
	close(sv[0]);
	close(sv[1]);
	close(fd);
}

/* Datagrams: the sender's address and its length, a truncated datagram. */
static void case_datagrams(struct outcome *o)
{
	int a = socket(AF_INET, SOCK_DGRAM, 0), b = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in addr = loopback(0), from;
	socklen_t len = sizeof(addr), fromlen = sizeof(from);
	char buf[16];

	ck_assert_int_eq(bind(a, (struct sockaddr *)&addr, sizeof(addr)), 0);
	ck_assert_int_eq(getsockname(a, (struct sockaddr *)&addr, &len), 0);
	RECORD(o, sendto(b, "datagram", 8, 0, (struct sockaddr *)&addr, sizeof(addr)));
	RECORD(o, recvfrom(a, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fromlen));
	note(o, buf, 8);
	note(o, &fromlen, sizeof(fromlen));
	note(o, &from.sin_addr, sizeof(from.sin_addr));
	RECORD(o, sendto(b, "a longer datagram", 17, 0, (struct sockaddr *)&addr, sizeof(addr)));
	struct iovec iov = { buf, 4 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	RECORD(o, recvmsg(a, &msg, 0));
	note(o, &msg.msg_flags, sizeof(msg.msg_flags)); /* MSG_TRUNC */
	note(o, buf, 4);
	struct msghdr out = { .msg_name = &addr, .msg_namelen = sizeof(addr), .msg_iov = &iov,
		              .msg_iovlen = 1 };
	RECORD(o, sendmsg(b, &out, 0));
	RECORD(o, recv(a, buf, sizeof(buf), 0));
	close(a);
	close(b);
}

/* -------------------------------------------------- accept and connect */

static void case_connect_accept(struct outcome *o)
{
	int l = tcp_listener(4, 0);
	uint16_t port = bound_port(l);
	struct sockaddr_in to = loopback(port);
	int c = socket(AF_INET, SOCK_STREAM, 0);

	RECORD(o, connect(c, (struct sockaddr *)&to, sizeof(to)));
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);
	int s = accept4(l, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC);
	ck_assert_int_ge(s, 0);
	note(o, &len, sizeof(len));
	ck_assert_int_eq(write(c, "hi", 2), 2);
	char buf[2];
	RECORD(o, read(s, buf, 2));
	note(o, buf, 2);
	RECORD(o, connect(c, (struct sockaddr *)&to, sizeof(to))); /* EISCONN */
	close(s);
	close(c);
	close(l);
}

static void case_connect_refused(struct outcome *o)
{
	int l = tcp_listener(1, 0);
	struct sockaddr_in to = loopback(bound_port(l));
	close(l);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	RECORD(o, connect(c, (struct sockaddr *)&to, sizeof(to)));
	close(c);
	RECORD(o, connect(closed_fd(), (struct sockaddr *)&to, sizeof(to)));
}

static void case_accept_errors(struct outcome *o)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	RECORD(o, accept(s, NULL, NULL)); /* EINVAL: not listening */
	close(s);
	int l = tcp_listener(1, SOCK_NONBLOCK);
	RECORD(o, accept(l, NULL, NULL)); /* EAGAIN */
	close(l);
	l = tcp_listener(1, 0);
	set_timeout(l, SO_RCVTIMEO, 30);
	RECORD(o, accept4(l, NULL, NULL, 0)); /* EAGAIN after the timeout */
	RECORD(o, accept4(l, NULL, NULL, 0x4000000)); /* EINVAL: flags */
	close(l);
}

/* ---------------------------------------------------- poll and select */

static void case_poll_single(struct outcome *o)
{
	int sv[2];
	unix_pair(sv, 0);
	struct pollfd p = { .fd = sv[0], .events = POLLIN };
	RECORD(o, poll(&p, 1, 30)); /* times out */
	note(o, &p.revents, sizeof(p.revents));
	ck_assert_int_eq(write(sv[1], "x", 1), 1);
	RECORD(o, poll(&p, 1, -1));
	note(o, &p.revents, sizeof(p.revents));
	close(sv[1]);
	p.events = POLLIN | POLLRDHUP;
	RECORD(o, poll(&p, 1, 1000));
	note(o, &p.revents, sizeof(p.revents));
	close(sv[0]);
	p.fd = closed_fd();
	RECORD(o, poll(&p, 1, 1000)); /* POLLNVAL */
	note(o, &p.revents, sizeof(p.revents));
}

static void case_poll_many(struct outcome *o)
{
	int a[2], b[2];
	unix_pair(a, 0);
	unix_pair(b, 0);
	struct pollfd p[4] = { { a[0], POLLIN, 0 }, { -1, POLLIN, 0 }, { b[0], POLLIN, 0 },
		               { a[0], POLLPRI, 0 } };
	RECORD(o, poll(p, 4, 30));
	ck_assert_int_eq(write(b[1], "x", 1), 1);
	RECORD(o, poll(p, 4, -1));
	for (int i = 0; i < 4; i++)
		note(o, &p[i].revents, sizeof(p[i].revents));
	RECORD(o, poll(NULL, 0, 20)); /* a plain sleep */
	struct timespec ts = { 0, 20 * 1000 * 1000 }, bad = { 0, 2000000000 };
	RECORD(o, ppoll(p, 2, &ts, NULL));
	RECORD(o, ppoll(p, 2, &bad, NULL)); /* EINVAL */
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
}

/* Which of two fds a set holds (fd numbers differ between the runs: the
 * fiber's runtime holds fds of its own). */
static void note_bits(struct outcome *o, const fd_set *set, int a, int b)
{
	char bits[2] = { (char)FD_ISSET(a, set), (char)FD_ISSET(b, set) };
	note(o, bits, sizeof(bits));
}

static void case_select(struct outcome *o)
{
	int a[2], b[2];
	unix_pair(a, 0);
	unix_pair(b, 0);
	int nfds = (a[0] > b[0] ? a[0] : b[0]) + 1;
	fd_set rd;
	struct timeval tv = { 0, 30000 };
	FD_ZERO(&rd);
	FD_SET(a[0], &rd);
	FD_SET(b[0], &rd);
	RECORD(o, select(nfds, &rd, NULL, NULL, &tv)); /* times out, clears the set */
	note_bits(o, &rd, a[0], b[0]);
	note(o, &tv, sizeof(tv));
	ck_assert_int_eq(write(a[1], "x", 1), 1);
	FD_SET(a[0], &rd);
	FD_SET(b[0], &rd);
	RECORD(o, select(nfds, &rd, NULL, NULL, NULL));
	note_bits(o, &rd, a[0], b[0]);
	int bad = closed_fd();
	FD_ZERO(&rd);
	FD_SET(bad, &rd);
	tv = (struct timeval){ 1, 0 };
	RECORD(o, select(bad + 1, &rd, NULL, NULL, &tv)); /* EBADF */
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
}

/* -------------------------------------------------- sleeps and others */

static void case_sleeps(struct outcome *o)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 }, rem = { 7, 7 };
	RECORD(o, nanosleep(&ts, &rem));
	note(o, &rem, sizeof(rem));
	ts.tv_nsec = 1000000000;
	RECORD(o, nanosleep(&ts, NULL)); /* EINVAL */
	RECORD(o, usleep(5000));
	RECORD(o, sleep(0));
	/* clock_nanosleep returns its error number and leaves errno alone. */
	ts.tv_nsec = 5 * 1000 * 1000;
	RECORD(o, clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &rem));
	struct timespec at;
	clock_gettime(CLOCK_REALTIME, &at);
	at.tv_nsec += 5 * 1000 * 1000;
	at.tv_sec += at.tv_nsec / 1000000000;
	at.tv_nsec %= 1000000000;
	RECORD(o, clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL));
	at.tv_sec = 0; /* long past: at once */
	RECORD(o, clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL));
	ts.tv_nsec = -1;
	RECORD(o, clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL)); /* EINVAL */
	ts.tv_nsec = 1000;
	RECORD(o, clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &ts, NULL)); /* libc's EINVAL */
}

static void case_close(struct outcome *o)
{
	int sv[2];
	unix_pair(sv, 0);
	RECORD(o, close(sv[0]));
	RECORD(o, close(sv[0])); /* EBADF */
	RECORD(o, close(-1));
	close(sv[1]);
}

static void case_getaddrinfo(struct outcome *o)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
		                  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV }, *res = NULL;
	RECORD_EAI(o, getaddrinfo("127.0.0.1", "6379", &hints, &res));
	ck_assert_ptr_nonnull(res);
	note(o, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	RECORD_EAI(o, getaddrinfo("not-a-number", "80", &hints, &res)); /* EAI_NONAME */
	RECORD_EAI(o, getaddrinfo("127.0.0.1", "http-ish", &hints, &res));
	hints.ai_flags = 0x7fff0000;
	RECORD_EAI(o, getaddrinfo("127.0.0.1", "80", &hints, &res)); /* EAI_BADFLAGS */
	hints = (struct addrinfo){ .ai_family = 12345 };
	RECORD_EAI(o, getaddrinfo("127.0.0.1", "80", &hints, &res)); /* EAI_FAMILY */
}

static void case_fcntl_dup(struct outcome *o)
{
	int sv[2];
	unix_pair(sv, 0);
	RECORD(o, fcntl(sv[0], F_GETFL) & O_NONBLOCK);
	int d = fcntl(sv[0], F_DUPFD_CLOEXEC, 100);
	RECORD(o, d >= 100);
	RECORD(o, fcntl(d, F_GETFD));
	RECORD(o, dup2(sv[0], d) == d);
	RECORD(o, dup3(sv[0], d, O_CLOEXEC) == d);
	RECORD(o, fcntl(closed_fd(), F_GETFL));
	close(d);
	close(sv[0]);
	close(sv[1]);
}

#define SAME(name, parks)                    \
	START_TEST(test_same_##name)         \
	{                                    \
		compare(#name, case_##name, parks); \
	}                                    \
	END_TEST

SAME(read_ready, false)
SAME(read_eof, false)
SAME(read_bad_fd, false)
SAME(read_nonblocking, false)
SAME(read_after_fcntl_nonblock, false)
SAME(read_nonblock_through_dup, false)
SAME(read_rcvtimeo, true)
SAME(recv_rcvtimeo, true)
SAME(recv_peek_then_dontwait, false)
SAME(write_closed_peer, false)
SAME(write_sndtimeo, true)
SAME(send_not_a_socket, false)
SAME(vectors, false)
SAME(pread_pwrite, false)
SAME(datagrams, false)
SAME(connect_accept, false)
SAME(connect_refused, false)
SAME(accept_errors, true)
SAME(poll_single, true)
SAME(poll_many, true)
SAME(select, true)
SAME(sleeps, true)
SAME(close, false)
SAME(getaddrinfo, false)
SAME(fcntl_dup, false)

/* ------------------------------------------------------------- parking */

/* Progress of a fiber that runs while another is blocked. */
struct ticker {
	volatile int ticks;
	volatile int stop;
	int fd;          /* written to after enough ticks, unless -1 */
};

static void *tick(void *arg)
{
	struct ticker *t = arg;
	while (!t->stop) {
		t->ticks++;
		if (t->ticks == 5 && t->fd >= 0)
			ck_assert_int_eq(write(t->fd, "wake", 4), 4);
		usleep(1000); /* a wrapped sleep: parks too */
	}
	return NULL;
}

/* A read that would block the thread lets the ticker run; the ticker's
 * write ends it. SO_RCVTIMEO bounds the failure case. */
static void blocked_read_main(void *arg)
{
	int sv[2];
	char buf[8];
	unix_pair(sv, 0);
	set_timeout(sv[0], SO_RCVTIMEO, 10000);
	struct ticker t = { .fd = sv[1] };
	struct runtime_fiber *f = start(tick, &t);
	ck_assert_int_eq(read(sv[0], buf, sizeof(buf)), 4);
	ck_assert_int_ge(t.ticks, 5);
	t.stop = 1;
	join(f);
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_read_parks_the_fiber)
{
	ck_assert_int_eq(run_fiber(NULL, blocked_read_main, NULL), 0);
}
END_TEST

static void sleeps_main(void *arg)
{
	struct ticker t = { .fd = -1 };
	struct runtime_fiber *f = start(tick, &t);
	struct timespec ts = { 0, 100 * 1000 * 1000 };
	ck_assert_int_eq(nanosleep(&ts, NULL), 0);
	ck_assert_int_gt(t.ticks, 1);
	int before = t.ticks;
	ck_assert_int_eq(sleep(1), 0);
	ck_assert_int_gt(t.ticks, before);
	before = t.ticks;
	ck_assert_int_eq(clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL), 0);
	ck_assert_int_gt(t.ticks, before);
	t.stop = 1;
	join(f);
}

START_TEST(test_sleeps_park_the_fiber)
{
	ck_assert_int_eq(run_fiber(NULL, sleeps_main, NULL), 0);
}
END_TEST

struct acceptor {
	int listener;
	int fd;
};

static void *accept_one(void *arg)
{
	struct acceptor *a = arg;
	a->fd = accept(a->listener, NULL, NULL);
	return NULL;
}

/* accept, connect, poll over several fds and select all park. */
static void many_waits_main(void *arg)
{
	struct acceptor a = { .listener = tcp_listener(4, 0), .fd = -1 };
	set_timeout(a.listener, SO_RCVTIMEO, 10000);
	struct runtime_fiber *f = start(accept_one, &a);
	runtime_yield(); /* the acceptor is parked in accept now */
	struct sockaddr_in to = loopback(bound_port(a.listener));
	int c = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&to, sizeof(to)), 0);
	join(f);
	ck_assert_int_ge(a.fd, 0);

	int sv[2];
	unix_pair(sv, 0);
	struct ticker t = { .fd = sv[1] };
	f = start(tick, &t);
	struct pollfd p[2] = { { c, POLLIN, 0 }, { sv[0], POLLIN, 0 } };
	ck_assert_int_eq(poll(p, 2, 10000), 1);
	ck_assert_int_eq(p[1].revents, POLLIN);
	ck_assert_int_ge(t.ticks, 5);
	t.stop = 1;
	join(f);
	char buf[8];
	ck_assert_int_eq(read(sv[0], buf, sizeof(buf)), 4);

	t = (struct ticker){ .fd = a.fd };
	f = start(tick, &t);
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(c, &rd);
	FD_SET(sv[0], &rd);
	struct timeval tv = { 10, 0 };
	ck_assert_int_eq(select((c > sv[0] ? c : sv[0]) + 1, &rd, NULL, NULL, &tv), 1);
	ck_assert(FD_ISSET(c, &rd) && !FD_ISSET(sv[0], &rd));
	ck_assert_int_ge(t.ticks, 5);
	t.stop = 1;
	join(f);
	close(sv[0]);
	close(sv[1]);
	close(c);
	close(a.fd);
	close(a.listener);
}

START_TEST(test_accept_connect_poll_select_park)
{
	ck_assert_int_eq(run_fiber(NULL, many_waits_main, NULL), 0);
}
END_TEST

/* A blocking write to a stream writes everything, whatever the ring's
 * short writes, while a reader drains it slowly. */
struct drain {
	int fd;
	size_t got;
	unsigned sum;
};

static void *drain(void *arg)
{
	struct drain *d = arg;
	char buf[4096];
	ssize_t n;
	while ((n = read(d->fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			d->sum += (unsigned char)buf[i];
		d->got += (size_t)n;
		if (d->got % (256 * 1024) < sizeof(buf))
			usleep(100);
	}
	return NULL;
}

static void write_all_main(void *arg)
{
	enum { SIZE = 4 << 20 };
	int sv[2];
	unix_pair(sv, 0);
	char *big = malloc(SIZE);
	unsigned sum = 0;
	ck_assert_ptr_nonnull(big);
	for (size_t i = 0; i < SIZE; i++)
		sum += (unsigned char)(big[i] = (char)(i * 7));
	struct drain d = { .fd = sv[1] };
	struct runtime_fiber *f = start(drain, &d);
	ck_assert_int_eq(write(sv[0], big, SIZE), SIZE);
	struct iovec iov[2] = { { big, SIZE / 2 }, { big + SIZE / 2, SIZE / 2 } };
	ck_assert_int_eq(writev(sv[0], iov, 2), SIZE);
	ck_assert_int_eq(send(sv[0], big, SIZE, 0), SIZE);
	shutdown(sv[0], SHUT_WR);
	join(f);
	ck_assert_uint_eq(d.got, 3u * SIZE);
	ck_assert_uint_eq(d.sum, 3u * sum);
	free(big);
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_blocking_write_writes_everything)
{
	ck_assert_int_eq(run_fiber(NULL, write_all_main, NULL), 0);
}
END_TEST

/* ---------------------------------------------- cancels and deadlines */

struct blocked {
	int fd;
	long rc;
	int err;
	struct timespec rem;
};

static void *read_blocked(void *arg)
{
	struct blocked *b = arg;
	char buf[8];
	RECORD(b, read(b->fd, buf, sizeof(buf)));
	return NULL;
}

static void *nanosleep_blocked(void *arg)
{
	struct blocked *b = arg;
	struct timespec ts = { 10, 0 };
	RECORD(b, nanosleep(&ts, &b->rem));
	return NULL;
}

static void *poll_blocked(void *arg)
{
	struct blocked *b = arg;
	/* Two entries (the multi-fd path); a negative fd is ignored, as
	 * stdin would not be: under make check it may be at EOF. */
	struct pollfd p[2] = { { b->fd, POLLIN, 0 }, { -1, POLLIN, 0 } };
	RECORD(b, poll(p, 2, 10000));
	return NULL;
}

static void cancel_main(void *arg)
{
	void *(*fns[3])(void *) = { read_blocked, nanosleep_blocked, poll_blocked };
	int sv[2];
	unix_pair(sv, 0);
	for (int i = 0; i < 3; i++) {
		struct blocked b = { .fd = sv[0] };
		struct runtime_fiber *f = start(fns[i], &b);
		runtime_sleep(5 * MS);
		ck_assert_int_eq(runtime_fiber_cancel(f), 0);
		join(f);
		ck_assert_int_eq(b.rc, -1);
		ck_assert_int_eq(b.err, ECANCELED);
		if (fns[i] == nanosleep_blocked)
			ck_assert(b.rem.tv_sec >= 5 && b.rem.tv_sec < 10);
	}
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_cancel_gives_ecanceled)
{
	ck_assert_int_eq(run_fiber(NULL, cancel_main, NULL), 0);
}
END_TEST

/* The fiber's deadline gives ETIMEDOUT; a socket timeout that comes first
 * gives EAGAIN and leaves the deadline as it was. */
static void deadline_main(void *arg)
{
	int sv[2];
	char buf[8];
	unix_pair(sv, 0);
	uint64_t deadline = runtime_now() + 30 * MS;
	runtime_deadline_set(deadline);
	errno = 0;
	ck_assert_int_eq(read(sv[0], buf, sizeof(buf)), -1);
	ck_assert_int_eq(errno, ETIMEDOUT);
	ck_assert_int_eq(usleep(1000), -1);
	ck_assert_int_eq(errno, ETIMEDOUT);
	runtime_deadline_set(runtime_now() + 10000 * MS);
	deadline = runtime_deadline_get();
	set_timeout(sv[0], SO_RCVTIMEO, 20);
	ck_assert_int_eq(read(sv[0], buf, sizeof(buf)), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_uint_eq(runtime_deadline_get(), deadline);
	runtime_deadline_set(runtime_now() + 20 * MS);
	set_timeout(sv[0], SO_RCVTIMEO, 10000);
	ck_assert_int_eq(recv(sv[0], buf, sizeof(buf), 0), -1);
	ck_assert_int_eq(errno, ETIMEDOUT);
	struct pollfd p = { sv[0], POLLIN, 0 };
	ck_assert_int_eq(poll(&p, 1, 10000), -1);
	ck_assert_int_eq(errno, ETIMEDOUT);
	runtime_deadline_set(0);
	close(sv[0]);
	close(sv[1]);
}

START_TEST(test_deadline_gives_etimedout)
{
	ck_assert_int_eq(run_fiber(NULL, deadline_main, NULL), 0);
}
END_TEST

/* ------------------------------------------------------------- clients */

#define CLIENTS 1000
#define ROUNDS 3

static void raise_fd_limit(unsigned need)
{
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < need && rl.rlim_max >= need) {
		rl.rlim_cur = need;
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	ck_assert_msg(rl.rlim_cur >= need, "needs %u fds, the hard limit is %lu", need,
	              (unsigned long)rl.rlim_max);
}

static struct runtime_waitgroup clients_wg;
static int clients_ok;
static uint16_t server_port;

/* The server: accept, then per connection read a line and send it back
 * with "ok " in front - blocking code too, on core 1. */
static void echo_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[128];
	ssize_t n;
	while ((n = read(fd, buf + 3, sizeof(buf) - 3)) > 0) {
		memcpy(buf, "ok ", 3);
		if (write(fd, buf, (size_t)n + 3) != n + 3)
			break;
	}
	close(fd);
}

static void echo_server(void *arg)
{
	int l = (int)(intptr_t)arg;
	for (;;) {
		int fd = accept(l, NULL, NULL);
		if (fd < 0)
			break; /* cancelled at shutdown */
		ck_assert_int_eq(runtime_spawn(runtime_current(), echo_conn, (void *)(intptr_t)fd), 0);
	}
	close(l);
}

static void plain_client(void *arg)
{
	int id = (int)(intptr_t)arg;
	struct sockaddr_in to = loopback(server_port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int ok = fd >= 0 && connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0;
	for (int r = 0; ok && r < ROUNDS; r++) {
		char msg[64], want[80], got[80];
		int len = snprintf(msg, sizeof(msg), "client %d round %d", id, r);
		snprintf(want, sizeof(want), "ok %s", msg);
		ok = write(fd, msg, (size_t)len) == len;
		size_t have = 0;
		while (ok && have < (size_t)len + 3) {
			ssize_t n = read(fd, got + have, sizeof(got) - have);
			ok = n > 0;
			have += ok ? (size_t)n : 0;
		}
		ok = ok && have == (size_t)len + 3 && !memcmp(got, want, have);
	}
	if (fd >= 0)
		close(fd);
	if (ok)
		__atomic_add_fetch(&clients_ok, 1, __ATOMIC_RELAXED);
	runtime_waitgroup_done(&clients_wg);
}

/* Each client makes requests_each requests. */
static void spawn_clients(void (*client)(void *), unsigned requests_each)
{
	clients_ok = 0;
	clients_wg = (struct runtime_waitgroup)RUNTIME_WAITGROUP_INIT;
	ck_assert_int_eq(runtime_waitgroup_add(&clients_wg, CLIENTS), 0);
	uint64_t before = sqes_now();
	for (int i = 0; i < CLIENTS; i++)
		ck_assert_int_eq(runtime_spawn(runtime_current(), client, (void *)(intptr_t)i), 0);
	ck_assert_int_eq(runtime_waitgroup_wait(&clients_wg, -1), 0);
	/* Proof that the clients' I/O parked rather than blocked: every
	 * request went through this core's engine (a conservative count: one
	 * operation per request, where its write and its read are two). */
	ck_assert_uint_ge(sqes_now() - before, (uint64_t)requests_each * CLIENTS);
}

static void plain_clients_main(void *arg)
{
	spawn_clients(plain_client, ROUNDS);
	runtime_shutdown(runtime_current()); /* ends the server */
}

START_TEST(test_plain_blocking_clients)
{
	struct runtime *rt;
	struct runtime_config cfg;
	raise_fd_limit(2 * CLIENTS + 64);
	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	int l = tcp_listener(4096, 0);
	server_port = bound_port(l);
	ck_assert_int_eq(runtime_spawn_on(rt, 1, echo_server, (void *)(intptr_t)l), 0);
	ck_assert_int_eq(runtime_spawn_on(rt, 0, plain_clients_main, NULL), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
	ck_assert_int_eq(clients_ok, CLIENTS);
}
END_TEST

/* hiredis, found at run time so that the build does not need it. */
#if __has_include(<hiredis/hiredis.h>)
#include <hiredis/hiredis.h>
#define HAVE_HIREDIS_HEADER 1

static struct {
	__typeof__(redisConnect) *connect;
	__typeof__(redisCommand) *command;
	__typeof__(freeReplyObject) *free_reply;
	__typeof__(redisFree) *free;
} hiredis;

static bool load_hiredis(void)
{
	void *h = dlopen("libhiredis.so", RTLD_NOW);
	if (!h)
		return false;
	hiredis.connect = (__typeof__(hiredis.connect))dlsym(h, "redisConnect");
	hiredis.command = (__typeof__(hiredis.command))dlsym(h, "redisCommand");
	hiredis.free_reply = (__typeof__(hiredis.free_reply))dlsym(h, "freeReplyObject");
	hiredis.free = (__typeof__(hiredis.free))dlsym(h, "redisFree");
	return hiredis.connect && hiredis.command && hiredis.free_reply && hiredis.free;
}

/* SET then GET each of the fiber's keys, every reply checked. */
static void redis_client(void *arg)
{
	int id = (int)(intptr_t)arg;
	redisContext *c = hiredis.connect("127.0.0.1", server_port);
	bool ok = c && !c->err;
	for (int r = 0; ok && r < ROUNDS; r++) {
		char key[32], value[64];
		snprintf(key, sizeof(key), "k:%d:%d", id, r);
		snprintf(value, sizeof(value), "value of fiber %d round %d", id, r);
		redisReply *rep = hiredis.command(c, "SET %s %s", key, value);
		ok = rep && rep->type == REDIS_REPLY_STATUS && !strcmp(rep->str, "OK");
		if (rep)
			hiredis.free_reply(rep);
		rep = ok ? hiredis.command(c, "GET %s", key) : NULL;
		ok = rep && rep->type == REDIS_REPLY_STRING && !strcmp(rep->str, value);
		if (rep)
			hiredis.free_reply(rep);
	}
	if (c)
		hiredis.free(c);
	if (ok)
		__atomic_add_fetch(&clients_ok, 1, __ATOMIC_RELAXED);
	runtime_waitgroup_done(&clients_wg);
}

static void redis_clients_main(void *arg)
{
	spawn_clients(redis_client, 2 * ROUNDS);
}
#endif

/* Unused where neither header was there at build time (a cross build
 * without the :arm64 packages): the tests then say what is missing. */
__attribute__((unused)) static void exec_redis(const char *port)
{
	execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
	       "--appendonly", "no", "--tcp-backlog", "1024", (char *)NULL);
}

__attribute__((unused)) static void exec_http_server(const char *port)
{
	execl("./demos/http/http-server", "http-server", "--port", port, "--host", "127.0.0.1",
	      (char *)NULL);
}

/* A server run by exec_server(port) on a free port of 20000-29999, once
 * it accepts connections; 0 if it never does (pid in *pid). */
__attribute__((unused)) static uint16_t start_server(pid_t *pid,
                                                    void (*exec_server)(const char *port))
{
	srand((unsigned)getpid() ^ (unsigned)time(NULL));
	for (int attempt = 0; attempt < 20; attempt++) {
		uint16_t port = (uint16_t)(20000 + rand() % 10000);
		char portstr[8];
		snprintf(portstr, sizeof(portstr), "%u", port);
		*pid = fork();
		ck_assert_int_ge(*pid, 0);
		if (*pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			int null = open("/dev/null", O_WRONLY);
			dup2(null, STDOUT_FILENO);
			dup2(null, STDERR_FILENO); /* start-up warnings */
			exec_server(portstr);
			_exit(127);
		}
		for (int waited = 0; waited < 10000; waited += 10) {
			int status;
			if (waitpid(*pid, &status, WNOHANG) == *pid)
				break; /* port taken (or no such program): another */
			int fd = socket(AF_INET, SOCK_STREAM, 0);
			struct sockaddr_in to = loopback(port);
			int rc = connect(fd, (struct sockaddr *)&to, sizeof(to));
			close(fd);
			if (rc == 0)
				return port;
			usleep(10000);
		}
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
	}
	return 0;
}

START_TEST(test_hiredis_blocking_clients)
{
#ifdef HAVE_HIREDIS_HEADER
	TEST_REQUIRE(load_hiredis(), "libhiredis.so (Debian: libhiredis-dev)");
	TEST_REQUIRE(system("command -v redis-server >/dev/null 2>&1") == 0,
	             "redis-server (Debian: redis-server)");
	raise_fd_limit(2 * CLIENTS + 64);
	pid_t pid;
	server_port = start_server(&pid, exec_redis);
	ck_assert_msg(server_port != 0, "redis-server did not start");
	ck_assert_int_eq(run_fiber(NULL, redis_clients_main, NULL), 0);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(clients_ok, CLIENTS);
#else
	TEST_REQUIRE(false, "<hiredis/hiredis.h> at build time (Debian: libhiredis-dev)");
#endif
}
END_TEST

/* libcurl's easy API, found at run time like hiredis: each fiber POSTs
 * its own body to the demo HTTP server's /echo and checks it comes back.
 * libcurl connects non-blocking and waits in poll(2): the wrapped poll
 * parks the fiber. */
#if __has_include(<curl/curl.h>)
#include <curl/curl.h>
#define HAVE_CURL_HEADER 1

static struct {
	__typeof__(curl_global_init) *global_init;
	__typeof__(curl_easy_init) *init;
	__typeof__(curl_easy_setopt) *setopt;
	__typeof__(curl_easy_perform) *perform;
	__typeof__(curl_easy_getinfo) *getinfo;
	__typeof__(curl_easy_cleanup) *cleanup;
} curl;

static bool load_curl(void)
{
	void *h = dlopen("libcurl.so", RTLD_NOW);
	if (!h)
		return false;
	curl.global_init = (__typeof__(curl.global_init))dlsym(h, "curl_global_init");
	curl.init = (__typeof__(curl.init))dlsym(h, "curl_easy_init");
	curl.setopt = (__typeof__(curl.setopt))dlsym(h, "curl_easy_setopt");
	curl.perform = (__typeof__(curl.perform))dlsym(h, "curl_easy_perform");
	curl.getinfo = (__typeof__(curl.getinfo))dlsym(h, "curl_easy_getinfo");
	curl.cleanup = (__typeof__(curl.cleanup))dlsym(h, "curl_easy_cleanup");
	return curl.global_init && curl.init && curl.setopt && curl.perform && curl.getinfo &&
	       curl.cleanup && curl.global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

struct body {
	char data[64];
	size_t len;
};

static size_t body_write(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t len = size * n;
	if (len > sizeof(b->data) - b->len)
		return 0; /* too long: the transfer fails */
	memcpy(b->data + b->len, p, len);
	b->len += len;
	return len;
}

static void curl_client(void *arg)
{
	int id = (int)(intptr_t)arg;
	char url[64], sent[32];
	struct body got = { .len = 0 };
	long status = 0;
	CURL *c = curl.init();
	bool ok = c != NULL;

	snprintf(url, sizeof(url), "http://127.0.0.1:%u/echo", server_port);
	snprintf(sent, sizeof(sent), "fiber %d", id);
	if (ok) {
		curl.setopt(c, CURLOPT_URL, url);
		curl.setopt(c, CURLOPT_POSTFIELDS, sent);
		curl.setopt(c, CURLOPT_WRITEFUNCTION, body_write);
		curl.setopt(c, CURLOPT_WRITEDATA, &got);
		curl.setopt(c, CURLOPT_NOSIGNAL, 1L);
		ok = curl.perform(c) == CURLE_OK &&
		     curl.getinfo(c, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200 &&
		     got.len == strlen(sent) && !memcmp(got.data, sent, got.len);
		curl.cleanup(c);
	}
	if (ok)
		__atomic_add_fetch(&clients_ok, 1, __ATOMIC_RELAXED);
	runtime_waitgroup_done(&clients_wg);
}

/* A GET of /delay?ms=200 (the server answers after 200 ms) parks the
 * fiber: a ticker on the same core keeps counting meanwhile. */
static void curl_delay_parks(void)
{
	char url[64];
	struct body got = { .len = 0 };
	long status = 0;
	struct ticker t = { .fd = -1 };
	CURL *c = curl.init();

	ck_assert_ptr_nonnull(c);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/delay?ms=200", server_port);
	curl.setopt(c, CURLOPT_URL, url);
	curl.setopt(c, CURLOPT_WRITEFUNCTION, body_write);
	curl.setopt(c, CURLOPT_WRITEDATA, &got);
	curl.setopt(c, CURLOPT_NOSIGNAL, 1L);
	struct runtime_fiber *f = start(tick, &t);
	ck_assert_int_eq(curl.perform(c), CURLE_OK);
	ck_assert_int_ge(t.ticks, 5);
	t.stop = 1;
	join(f);
	ck_assert_int_eq(curl.getinfo(c, CURLINFO_RESPONSE_CODE, &status), CURLE_OK);
	ck_assert_int_eq(status, 200);
	curl.cleanup(c);
}

static void curl_clients_main(void *arg)
{
	/* No SQE count: libcurl's sockets are non-blocking, and it parks only
	 * in poll when an answer has not arrived yet. */
	spawn_clients(curl_client, 0);
	curl_delay_parks();
}
#endif

START_TEST(test_curl_easy_clients)
{
#ifdef HAVE_CURL_HEADER
	TEST_REQUIRE(load_curl(), "libcurl.so (Debian: libcurl4-openssl-dev)");
	ck_assert_msg(access("./demos/http/http-server", X_OK) == 0,
	              "no ./demos/http/http-server: run from the build directory");
	raise_fd_limit(2 * CLIENTS + 64);
	pid_t pid;
	server_port = start_server(&pid, exec_http_server);
	ck_assert_msg(server_port != 0, "http-server did not start");
	ck_assert_int_eq(run_fiber(NULL, curl_clients_main, NULL), 0);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(clients_ok, CLIENTS);
#else
	TEST_REQUIRE(false, "<curl/curl.h> at build time (Debian: libcurl4-openssl-dev)");
#endif
}
END_TEST

/* -------------------------------------------------------------- suite */

static Suite *preload_suite(void)
{
	Suite *s = suite_create("preload");
	TCase *tc = tcase_create("semantics");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_same_read_ready);
	tcase_add_test(tc, test_same_read_eof);
	tcase_add_test(tc, test_same_read_bad_fd);
	tcase_add_test(tc, test_same_read_nonblocking);
	tcase_add_test(tc, test_same_read_after_fcntl_nonblock);
	tcase_add_test(tc, test_same_read_nonblock_through_dup);
	tcase_add_test(tc, test_same_read_rcvtimeo);
	tcase_add_test(tc, test_same_recv_rcvtimeo);
	tcase_add_test(tc, test_same_recv_peek_then_dontwait);
	tcase_add_test(tc, test_same_write_closed_peer);
	tcase_add_test(tc, test_same_write_sndtimeo);
	tcase_add_test(tc, test_same_send_not_a_socket);
	tcase_add_test(tc, test_same_vectors);
	tcase_add_test(tc, test_same_pread_pwrite);
	tcase_add_test(tc, test_same_datagrams);
	tcase_add_test(tc, test_same_connect_accept);
	tcase_add_test(tc, test_same_connect_refused);
	tcase_add_test(tc, test_same_accept_errors);
	tcase_add_test(tc, test_same_poll_single);
	tcase_add_test(tc, test_same_poll_many);
	tcase_add_test(tc, test_same_select);
	tcase_add_test(tc, test_same_sleeps);
	tcase_add_test(tc, test_same_close);
	tcase_add_test(tc, test_same_getaddrinfo);
	tcase_add_test(tc, test_same_fcntl_dup);
	suite_add_tcase(s, tc);

	tc = tcase_create("parking");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_read_parks_the_fiber);
	tcase_add_test(tc, test_sleeps_park_the_fiber);
	tcase_add_test(tc, test_accept_connect_poll_select_park);
	tcase_add_test(tc, test_blocking_write_writes_everything);
	tcase_add_test(tc, test_cancel_gives_ecanceled);
	tcase_add_test(tc, test_deadline_gives_etimedout);
	suite_add_tcase(s, tc);

	tc = tcase_create("clients");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_plain_blocking_clients);
	tcase_add_test(tc, test_hiredis_blocking_clients);
	tcase_add_test(tc, test_curl_easy_clients);
	suite_add_tcase(s, tc);
	return s;
}

static Suite *preload_suite_checked(void)
{
	/* SIGPIPE would kill the libc half of a write to a gone reader. */
	signal(SIGPIPE, SIG_IGN);
	if (runtime_preload_linked() != 1)
		abort();
	return preload_suite();
}

TEST_MAIN(preload_suite_checked)
