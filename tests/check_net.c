/* SPDX-License-Identifier: MIT */
/*
 * check_net.c - the networking helpers and the socket calls under them:
 * TCP echo over 127.0.0.1 with 50 concurrent clients (and over ::1 when the
 * machine has IPv6 loopback), runtime_accept cancelled or cut short by a
 * deadline (without leaking fds), runtime_tcp_listen's error cases and
 * SO_REUSEPORT, runtime_tcp_connect to a closed port, runtime_read_exact /
 * runtime_write_all at EOF and against a closed peer (with *done reporting
 * progress), half-close with runtime_sock_shutdown, and fixed files:
 * accepted sockets registered, used, released by runtime_close and the slot
 * reused by the next connection.
 */
#include "testutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/un.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- helpers */

static int fd_state(int fd)
{
	return fcntl(fd, F_GETFD) == -1 ? errno : 0;
}

static int int_sockopt(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);

	ck_assert_int_eq(getsockopt(fd, level, name, &v, &len), 0);
	return v;
}

/* A TCP port nothing listens on (one just bound and released). */
static uint16_t closed_port(void)
{
	int l = runtime_tcp_listen("127.0.0.1", 0, 1, 0);

	ck_assert_int_ge(l, 0);
	uint16_t port = bound_port(l);
	close(l);
	return port;
}

/* ------------------------------------------------------------ TCP echo */

#define NCLIENTS 50
#define ROUNDS 5
#define MAXMSG 3000

struct echo_net;

struct echo_client {
	struct echo_net *e;
	int id;
	int connect_rc;
	int rounds_ok;
	ssize_t fail_rc;
	int close_rc;
};

struct echo_handler {
	struct echo_net *e;
	int fd;
};

struct echo_net {
	const char *host;
	int lfd;
	uint16_t port;
	int accepted, accept_err, bad_peer;
	int handler_eof, handler_err, handler_close_err;
	struct echo_client c[NCLIENTS];
	struct echo_handler h[NCLIENTS];
	int nclients;
};

static void echo_handler(void *p)
{
	struct echo_handler *h = p;
	char buf[4096];

	for (;;) {
		ssize_t n = runtime_read(h->fd, buf, sizeof(buf));
		if (n == 0) {
			h->e->handler_eof++;
			break;
		}
		if (n < 0 || runtime_write_all(h->fd, buf, (size_t)n, NULL) != n) {
			h->e->handler_err++;
			break;
		}
	}
	if (runtime_close(h->fd) != 0)
		h->e->handler_close_err++;
}

static bool peer_is_loopback(const struct sockaddr_storage *ss, socklen_t len)
{
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;
		return len == sizeof(*a) && IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
	}
	const struct sockaddr_in *a = (const void *)ss;
	return ss->ss_family == AF_INET && len == sizeof(*a) &&
	       a->sin_addr.s_addr == htonl(INADDR_LOOPBACK) && a->sin_port != 0;
}

static void echo_server(void *p)
{
	struct echo_net *e = p;

	for (int i = 0; i < e->nclients; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = runtime_accept(e->lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
		if (fd < 0) {
			e->accept_err = fd;
			break;
		}
		if (!peer_is_loopback(&ss, len))
			e->bad_peer++;
		e->accepted++;
		e->h[i] = (struct echo_handler){ e, fd };
		ck_assert_int_eq(runtime_spawn(runtime_current(), echo_handler, &e->h[i]), 0);
	}
	runtime_close(e->lfd);
}

static void echo_client(void *p)
{
	struct echo_client *c = p;
	unsigned char out[MAXMSG], in[MAXMSG];

	c->connect_rc = runtime_tcp_connect(c->e->host, c->e->port);
	if (c->connect_rc < 0)
		return;
	int fd = c->connect_rc;
	for (int r = 0; r < ROUNDS; r++) {
		size_t len = (size_t)(c->id * 37 + r * 101) % MAXMSG + 1;
		for (size_t k = 0; k < len; k++)
			out[k] = (unsigned char)(c->id * 7 + r * 13 + k);
		memset(in, 0, len);
		ssize_t w = runtime_write_all(fd, out, len, NULL);
		ssize_t n = runtime_read_exact(fd, in, len, NULL);
		if (w != (ssize_t)len || n != (ssize_t)len) {
			c->fail_rc = w != (ssize_t)len ? w : n;
			break;
		}
		if (memcmp(in, out, len) != 0) {
			c->fail_rc = -1000;
			break;
		}
		c->rounds_ok++;
	}
	c->close_rc = runtime_close(fd);
}

static void echo_root(void *p)
{
	struct echo_net *e = p;

	ck_assert_int_eq(runtime_spawn(runtime_current(), echo_server, e), 0);
	for (int i = 0; i < e->nclients; i++) {
		e->c[i] = (struct echo_client){ .e = e, .id = i, .connect_rc = -999, .close_rc = -999 };
		ck_assert_int_eq(runtime_spawn(runtime_current(), echo_client, &e->c[i]), 0);
	}
}

static void check_echo(struct echo_net *e, const struct runtime_config *cfg)
{
	ck_assert_int_eq(run_fiber(cfg, echo_root, e), 0);
	ck_assert_int_eq(e->accept_err, 0);
	ck_assert_int_eq(e->accepted, e->nclients);
	ck_assert_int_eq(e->bad_peer, 0);
	for (int i = 0; i < e->nclients; i++) {
		ck_assert_int_ge(e->c[i].connect_rc, 0);
		ck_assert_msg(e->c[i].rounds_ok == ROUNDS, "client %d: %d rounds, failed with %zd", i,
		              e->c[i].rounds_ok, e->c[i].fail_rc);
		ck_assert_int_eq(e->c[i].close_rc, 0);
	}
	ck_assert_int_eq(e->handler_eof, e->nclients);
	ck_assert_int_eq(e->handler_err, 0);
	ck_assert_int_eq(e->handler_close_err, 0);
}

START_TEST(test_net_tcp_echo_many_clients)
{
	struct echo_net *e = calloc(1, sizeof(*e));

	ck_assert_ptr_nonnull(e);
	e->host = "127.0.0.1";
	e->nclients = NCLIENTS;
	e->lfd = runtime_tcp_listen(e->host, 0, 0, 0);
	ck_assert_int_ge(e->lfd, 0);
	e->port = bound_port(e->lfd);
	ck_assert_uint_ne(e->port, 0);
	check_echo(e, NULL);
	ck_assert_int_eq(fd_state(e->lfd), EBADF);
	free(e);
}
END_TEST

START_TEST(test_net_tcp_echo_ipv6_loopback)
{
	int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		TEST_SKIP("no IPv6 sockets here (%s)", strerror(errno));
	close(probe);

	struct echo_net *e = calloc(1, sizeof(*e));
	ck_assert_ptr_nonnull(e);
	e->host = "::1";
	e->nclients = 4;
	e->lfd = runtime_tcp_listen(e->host, 0, 0, 0);
	if (e->lfd == -EADDRNOTAVAIL) {
		free(e);
		TEST_SKIP("no ::1 on this machine");
	}
	ck_assert_int_ge(e->lfd, 0);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	ck_assert_int_eq(getsockname(e->lfd, (struct sockaddr *)&ss, &len), 0);
	ck_assert_int_eq(ss.ss_family, AF_INET6);
	e->port = bound_port(e->lfd);
	check_echo(e, NULL);
	free(e);
}
END_TEST

/* ------------------------------------------------------- accept limits */

struct accept_cancel {
	int lfd;
	struct runtime_fiber *a;
	int accept_rc, close_rc, cancel_rc, join_rc;
	void *result;
	uint64_t blocked_ns;
	int fds_in_fiber_before, fds_in_fiber_after;
};

static int accept_marker;

static void *accept_victim(void *p)
{
	struct accept_cancel *s = p;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	uint64_t t0 = runtime_now();

	s->accept_rc = runtime_accept(s->lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
	s->blocked_ns = runtime_now() - t0;
	s->close_rc = runtime_close(s->lfd);
	return &accept_marker;
}

static void accept_killer(void *p)
{
	struct accept_cancel *s = p;

	runtime_sleep(10 * MS);
	s->cancel_rc = runtime_fiber_cancel(s->a);
	s->join_rc = runtime_fiber_join(s->a, &s->result);
	s->fds_in_fiber_after = count_fds();
}

static void accept_cancel_root(void *p)
{
	struct accept_cancel *s = p;

	s->fds_in_fiber_before = count_fds();
	s->lfd = runtime_tcp_listen("127.0.0.1", 0, 0, 0);
	ck_assert_int_ge(s->lfd, 0);
	ck_assert_int_eq(runtime_fiber_spawn(runtime_current(), &s->a, accept_victim, s), 0);
	ck_assert_int_eq(runtime_spawn(runtime_current(), accept_killer, s), 0);
}

START_TEST(test_net_accept_cancelled_leaks_nothing)
{
	struct accept_cancel s = { .accept_rc = -999, .close_rc = -999, .cancel_rc = -999,
	                           .join_rc = -999 };
	int before = count_fds();

	ck_assert_int_eq(run_fiber(NULL, accept_cancel_root, &s), 0);
	ck_assert_int_eq(count_fds(), before);
	ck_assert_int_eq(s.fds_in_fiber_after, s.fds_in_fiber_before);
	ck_assert_int_eq(s.cancel_rc, 0);
	ck_assert_int_eq(s.accept_rc, -ECANCELED);
	ck_assert_uint_ge(s.blocked_ns, 9 * MS); /* until the cancel, not before */
	ck_assert_int_eq(s.close_rc, 0);
	ck_assert_int_eq(s.join_rc, 0);
	ck_assert_ptr_eq(s.result, &accept_marker);
}
END_TEST

struct accept_deadline {
	int rc, later, client;
	uint64_t elapsed;
	ssize_t wr, rd;
	char buf[4];
};

static void accept_deadline_fiber(void *p)
{
	struct accept_deadline *s = p;
	int lfd = runtime_tcp_listen("127.0.0.1", 0, 0, 0);

	ck_assert_int_ge(lfd, 0);
	uint64_t t0 = runtime_now();
	runtime_deadline_set(t0 + 30 * MS);
	s->rc = runtime_accept(lfd, NULL, NULL, 0);
	s->elapsed = runtime_now() - t0;
	runtime_deadline_set(0);
	/* The handshake completes in the backlog: connect first, then accept. */
	s->client = runtime_tcp_connect("127.0.0.1", bound_port(lfd));
	s->later = runtime_accept(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (s->client >= 0 && s->later >= 0) {
		s->wr = runtime_write(s->client, "hey", 3);
		s->rd = runtime_read_exact(s->later, s->buf, 3, NULL);
		runtime_close(s->later);
		runtime_close(s->client);
	}
	runtime_close(lfd);
}

START_TEST(test_net_accept_deadline_times_out)
{
	struct accept_deadline s = { .rc = -999, .later = -999, .wr = -999, .rd = -999 };
	int before = count_fds();

	ck_assert_int_eq(run_fiber(NULL, accept_deadline_fiber, &s), 0);
	ck_assert_int_eq(s.rc, -ETIMEDOUT);
	ck_assert_uint_ge(s.elapsed, 30 * MS); /* not before the deadline */
	ck_assert_int_ge(s.client, 0);
	ck_assert_int_ge(s.later, 0);
	ck_assert_int_eq(s.wr, 3);
	ck_assert_int_eq(s.rd, 3);
	ck_assert_int_eq(memcmp(s.buf, "hey", 3), 0);
	ck_assert_int_eq(count_fds(), before);
}
END_TEST

/* --------------------------------------------------------------- listen */

START_TEST(test_net_listen_rejects_bad_input)
{
	int before = count_fds();

	ck_assert_int_eq(runtime_tcp_listen("localhost", 0, 0, 0), -EINVAL);
	ck_assert_int_eq(runtime_tcp_listen("256.0.0.1", 0, 0, 0), -EINVAL);
	ck_assert_int_eq(runtime_tcp_listen("127.0.0.1 ", 0, 0, 0), -EINVAL);
	ck_assert_int_eq(runtime_tcp_listen("::g", 0, 0, 0), -EINVAL);
	ck_assert_int_eq(runtime_tcp_listen("127.0.0.1", 0, 0, 0x8), -EINVAL);
	ck_assert_int_eq(runtime_tcp_listen("127.0.0.1", 0, 0, ~0u), -EINVAL);
	ck_assert_int_eq(count_fds(), before);
}
END_TEST

START_TEST(test_net_listen_socket_options)
{
	int l = runtime_tcp_listen("127.0.0.1", 0, 0, 0);
	int any = runtime_tcp_listen(NULL, 0, 0, 0);
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	ck_assert_int_ge(l, 0);
	ck_assert_int_eq(int_sockopt(l, SOL_SOCKET, SO_ACCEPTCONN), 1);
	ck_assert_int_eq(int_sockopt(l, SOL_SOCKET, SO_REUSEADDR), 1);
	ck_assert_int_eq(int_sockopt(l, SOL_SOCKET, SO_REUSEPORT), 0);
	ck_assert_int_eq(int_sockopt(l, SOL_SOCKET, SO_TYPE), SOCK_STREAM);
	ck_assert_int_eq(int_sockopt(l, IPPROTO_TCP, TCP_NODELAY), 0);
	ck_assert_int_eq(fcntl(l, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	ck_assert_int_ge(any, 0);
	ck_assert_int_eq(getsockname(any, (struct sockaddr *)&sin, &len), 0);
	ck_assert_int_eq(sin.sin_family, AF_INET);
	ck_assert_uint_eq(sin.sin_addr.s_addr, htonl(INADDR_ANY));
	close(l);
	close(any);
	/* Both options at once; accepted sockets inherit TCP_NODELAY. */
	int both = runtime_tcp_listen("127.0.0.1", 0, 0,
	                              RUNTIME_LISTEN_REUSEPORT | RUNTIME_LISTEN_NODELAY);
	ck_assert_int_ge(both, 0);
	ck_assert_int_eq(int_sockopt(both, SOL_SOCKET, SO_REUSEPORT), 1);
	ck_assert_int_eq(int_sockopt(both, IPPROTO_TCP, TCP_NODELAY), 1);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	len = sizeof(sin);
	ck_assert_int_eq(getsockname(both, (struct sockaddr *)&sin, &len), 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&sin, len), 0);
	int s = accept(both, NULL, NULL);
	ck_assert_int_ge(s, 0);
	ck_assert_int_eq(int_sockopt(s, IPPROTO_TCP, TCP_NODELAY), 1);
	close(s);
	close(c);
	close(both);
}
END_TEST

START_TEST(test_net_sockaddr_name)
{
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(80) };
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons(443) };
	struct sockaddr_un un = { .sun_family = AF_UNIX, .sun_path = "/run/x" };
	struct sockaddr_un abs = { .sun_family = AF_UNIX, .sun_path = "\0name" };
	char buf[64];

	inet_pton(AF_INET, "192.0.2.1", &in.sin_addr);
	inet_pton(AF_INET6, "2001:db8::1", &in6.sin6_addr);
	ck_assert_int_eq(runtime_sockaddr_name((struct sockaddr *)&in, sizeof(in), buf, sizeof(buf)),
	                 12);
	ck_assert_str_eq(buf, "192.0.2.1:80");
	ck_assert_int_gt(runtime_sockaddr_name((struct sockaddr *)&in6, sizeof(in6), buf, sizeof(buf)),
	                 0);
	ck_assert_str_eq(buf, "[2001:db8::1]:443");
	ck_assert_int_gt(runtime_sockaddr_name((struct sockaddr *)&un, sizeof(un), buf, sizeof(buf)),
	                 0);
	ck_assert_str_eq(buf, "unix:/run/x");
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 5);
	ck_assert_int_gt(runtime_sockaddr_name((struct sockaddr *)&abs, alen, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "unix:@name");
	ck_assert_int_eq(runtime_sockaddr_name((struct sockaddr *)&in, sizeof(in), buf, 5), -ENOSPC);
	ck_assert_int_eq(runtime_sockaddr_name((struct sockaddr *)&in, 4, buf, sizeof(buf)), -EINVAL);
	ck_assert_int_eq(runtime_sockaddr_name(NULL, sizeof(in), buf, sizeof(buf)), -EINVAL);
	/* The longest of each family fits in RUNTIME_SOCKADDR_NAME_MAX. */
	char big[RUNTIME_SOCKADDR_NAME_MAX];
	memset(abs.sun_path, 'z', sizeof(abs.sun_path));
	abs.sun_path[0] = '\0';
	ck_assert_int_eq(runtime_sockaddr_name((struct sockaddr *)&abs, sizeof(abs), big, sizeof(big)),
	                 6 + sizeof(abs.sun_path) - 1);
	inet_pton(AF_INET6, "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255", &in6.sin6_addr);
	in6.sin6_port = htons(65535);
	ck_assert_int_gt(runtime_sockaddr_name((struct sockaddr *)&in6, sizeof(in6), big, sizeof(big)),
	                 0);
	in.sin_family = AF_APPLETALK;
	ck_assert_int_eq(runtime_sockaddr_name((struct sockaddr *)&in, sizeof(in), buf, sizeof(buf)),
	                 -EAFNOSUPPORT);
}
END_TEST

START_TEST(test_net_listen_port_in_use)
{
	int before = count_fds();
	int a = runtime_tcp_listen("127.0.0.1", 0, 0, 0);

	ck_assert_int_ge(a, 0);
	uint16_t port = bound_port(a);
	ck_assert_int_eq(runtime_tcp_listen("127.0.0.1", port, 0, 0), -EADDRINUSE);
	ck_assert_int_eq(runtime_tcp_listen(NULL, port, 0, 0), -EADDRINUSE);
	/* Asking for REUSEPORT does not share with a socket that did not. */
	ck_assert_int_eq(runtime_tcp_listen("127.0.0.1", port, 0, RUNTIME_LISTEN_REUSEPORT),
	                 -EADDRINUSE);
	close(a);
	ck_assert_int_eq(count_fds(), before);
}
END_TEST

START_TEST(test_net_listen_reuseport_shares_port)
{
	int r1 = runtime_tcp_listen("127.0.0.1", 0, 0, RUNTIME_LISTEN_REUSEPORT);

	ck_assert_int_ge(r1, 0);
	ck_assert_int_eq(int_sockopt(r1, SOL_SOCKET, SO_REUSEPORT), 1);
	uint16_t port = bound_port(r1);
	int r2 = runtime_tcp_listen("127.0.0.1", port, 0, RUNTIME_LISTEN_REUSEPORT);
	ck_assert_int_ge(r2, 0);
	ck_assert_int_ne(r2, r1);
	ck_assert_uint_eq(bound_port(r2), port);
	ck_assert_int_eq(int_sockopt(r2, SOL_SOCKET, SO_ACCEPTCONN), 1);
	/* ... but not with one that did not ask. */
	ck_assert_int_eq(runtime_tcp_listen("127.0.0.1", port, 0, 0), -EADDRINUSE);
	close(r1);
	close(r2);
}
END_TEST

START_TEST(test_net_listen_ipv6_loopback)
{
	int probe = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		TEST_SKIP("no IPv6 sockets here (%s)", strerror(errno));
	close(probe);
	int l = runtime_tcp_listen("::1", 0, 0, 0);
	if (l == -EADDRNOTAVAIL)
		TEST_SKIP("no ::1 on this machine");
	ck_assert_int_ge(l, 0);
	struct sockaddr_in6 sin6;
	socklen_t len = sizeof(sin6);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&sin6, &len), 0);
	ck_assert_int_eq(sin6.sin6_family, AF_INET6);
	ck_assert(IN6_IS_ADDR_LOOPBACK(&sin6.sin6_addr));
	ck_assert_uint_ne(ntohs(sin6.sin6_port), 0);
	ck_assert_int_eq(int_sockopt(l, SOL_SOCKET, SO_ACCEPTCONN), 1);
	close(l);
}
END_TEST

/* -------------------------------------------------------------- connect */

struct refused {
	uint16_t port;
	int rc, rc_name, rc_badv6;
	int fds_before, fds_after;
};

static void refused_fiber(void *p)
{
	struct refused *s = p;

	s->fds_before = count_fds();
	s->rc = runtime_tcp_connect("127.0.0.1", s->port);
	s->rc_name = runtime_tcp_connect("localhost", s->port);
	s->rc_badv6 = runtime_tcp_connect("::1::2", s->port);
	s->fds_after = count_fds();
}

START_TEST(test_net_connect_refused_leaves_no_fd)
{
	struct refused s = { .rc = -999, .rc_name = -999, .rc_badv6 = -999 };
	int before = count_fds();

	s.port = closed_port();
	ck_assert_int_eq(run_fiber(NULL, refused_fiber, &s), 0);
	ck_assert_int_eq(s.rc, -ECONNREFUSED);
	ck_assert_int_eq(s.rc_name, -ECONNREFUSED); /* resolved, then refused */
	ck_assert_int_eq(s.rc_badv6, -EINVAL);
	ck_assert_int_eq(s.fds_after, s.fds_before);
	ck_assert_int_eq(count_fds(), before);
	/* Outside fiber context: refused before any socket exists. */
	ck_assert_int_eq(runtime_tcp_connect("127.0.0.1", s.port), -EPERM);
	ck_assert_int_eq(count_fds(), before);
}
END_TEST

/* ----------------------------------------------- read_exact / write_all */

struct rexact {
	int fd[2];
	ssize_t eof_rc, mid_rc, chunks_rc, full_rc;
	size_t eof_done, mid_done, chunks_done, full_done;
	char mid[16], chunks[8], full[4];
};

static void chunk_writer(void *p)
{
	struct rexact *s = p;
	static const char *const parts[] = { "ab", "cd", "ef" };

	for (int i = 0; i < 3; i++) {
		runtime_sleep(5 * MS);
		runtime_write(s->fd[0], parts[i], 2);
	}
}

static void read_exact_fiber(void *p)
{
	struct rexact *s = p;
	int second[2];
	char junk[16];

	/* Arrives in three pieces, 5 ms apart: read_exact must loop. */
	tcp_pair(s->fd);
	ck_assert_int_eq(runtime_spawn(runtime_current(), chunk_writer, s), 0);
	s->chunks_rc = runtime_read_exact(s->fd[1], s->chunks, 6, &s->chunks_done);
	/* Exactly as much as asked, leaving the rest queued. */
	runtime_write(s->fd[0], "wxyz!", 5);
	s->full_rc = runtime_read_exact(s->fd[1], s->full, 4, &s->full_done);
	runtime_read_exact(s->fd[1], junk, 1, NULL); /* the "!" */
	/* EOF mid-message. */
	runtime_write(s->fd[0], "abc", 3);
	runtime_close(s->fd[0]);
	s->mid_rc = runtime_read_exact(s->fd[1], s->mid, sizeof(s->mid), &s->mid_done);
	runtime_close(s->fd[1]);
	/* EOF before any byte, on a fresh connection. */
	tcp_pair(second);
	runtime_sock_shutdown(second[0], SHUT_WR);
	s->eof_rc = runtime_read_exact(second[1], junk, sizeof(junk), &s->eof_done);
	runtime_close(second[0]);
	runtime_close(second[1]);
}

START_TEST(test_net_read_exact_eof_and_chunks)
{
	struct rexact s = { .eof_rc = -999, .mid_rc = -999, .chunks_rc = -999, .full_rc = -999,
	                    .eof_done = 99, .mid_done = 99, .chunks_done = 99, .full_done = 99 };

	ck_assert_int_eq(run_fiber(NULL, read_exact_fiber, &s), 0);
	ck_assert_int_eq(s.chunks_rc, 6);
	ck_assert_uint_eq(s.chunks_done, 6);
	ck_assert_int_eq(memcmp(s.chunks, "abcdef", 6), 0);
	ck_assert_int_eq(s.full_rc, 4);
	ck_assert_uint_eq(s.full_done, 4);
	ck_assert_int_eq(memcmp(s.full, "wxyz", 4), 0);
	ck_assert_int_eq(s.mid_rc, -ENODATA);
	ck_assert_uint_eq(s.mid_done, 3);
	ck_assert_int_eq(memcmp(s.mid, "abc", 3), 0);
	ck_assert_int_eq(s.eof_rc, 0);
	ck_assert_uint_eq(s.eof_done, 0);
}
END_TEST

/* runtime_write_all (_i 0) and runtime_send_all (_i 1), over a socketpair,
 * where a reader that is gone (closed with nothing
 * unread, or shut down for reading) is always EPIPE; TCP may say ECONNRESET
 * depending on when the RST lands, and so does AF_UNIX for a reader closed
 * with bytes still unread. */
#define WBIG (1u << 20)
#define WREAD (64u * 1024)

struct wall {
	int fd[2];
	unsigned char *src, *got;
	ssize_t early_rc, rc, read_rc;
	size_t early_done, done;
	int queued;             /* bytes written but never read */
	bool writer_done;
	int shut_rc;
	bool send;              /* runtime_send_all instead of runtime_write_all */
};

static ssize_t wall_put(const struct wall *s, int fd, size_t len, size_t *done)
{
	return s->send ? runtime_send_all(fd, s->src, len, done)
	               : runtime_write_all(fd, s->src, len, done);
}

static void wall_writer(void *p)
{
	struct wall *s = p;

	s->rc = wall_put(s, s->fd[0], WBIG, &s->done);
	s->writer_done = true;
}

static void wall_reader(void *p)
{
	struct wall *s = p;

	s->read_rc = runtime_read_exact(s->fd[1], s->got, WREAD, NULL);
	/* Stop reading for good: the writer, parked on a full buffer, must
	 * wake with EPIPE. (close with unread data would make it ECONNRESET.) */
	s->shut_rc = runtime_sock_shutdown(s->fd[1], SHUT_RD);
	/* On epoll the writer waits for readiness, and AF_UNIX reports none
	 * for a peer's SHUT_RD (poll(2) would not wake either): it learns of
	 * the reader's going when the reader closes. */
	for (int i = 0; i < 2000 && !s->writer_done && !on_epoll(); i++)
		runtime_sleep(MS);
	ck_assert_int_eq(ioctl(s->fd[1], FIONREAD, &s->queued), 0);
	runtime_close(s->fd[1]);
	for (int i = 0; i < 2000 && !s->writer_done; i++)
		runtime_sleep(MS);
	runtime_close(s->fd[0]);
}

static void wall_root(void *p)
{
	struct wall *s = p;
	int early[2];

	/* Reader gone before the first byte: nothing written. */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, early), 0);
	runtime_close(early[1]);
	s->early_rc = wall_put(s, early[0], 100, &s->early_done);
	runtime_close(early[0]);

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s->fd), 0);
	ck_assert_int_eq(runtime_spawn(runtime_current(), wall_writer, s), 0);
	ck_assert_int_eq(runtime_spawn(runtime_current(), wall_reader, s), 0);
}

START_TEST(test_net_write_all_to_closed_peer_reports_progress)
{
	struct wall s = { .early_rc = -999, .rc = -999, .read_rc = -999, .early_done = 99,
	                  .done = 99, .queued = -1, .shut_rc = -999, .send = _i };

	signal(SIGPIPE, SIG_IGN);
	s.src = malloc(WBIG);
	s.got = calloc(1, WREAD);
	ck_assert_ptr_nonnull(s.src);
	ck_assert_ptr_nonnull(s.got);
	for (size_t i = 0; i < WBIG; i++)
		s.src[i] = (unsigned char)(i * 31 + (i >> 12));
	ck_assert_int_eq(run_fiber(NULL, wall_root, &s), 0);
	ck_assert_int_eq(s.early_rc, -EPIPE);
	ck_assert_uint_eq(s.early_done, 0);
	ck_assert_int_eq(s.read_rc, WREAD);
	ck_assert_int_eq(memcmp(s.got, s.src, WREAD), 0);
	ck_assert_int_eq(s.shut_rc, 0);
	ck_assert(s.writer_done);
	if (on_epoll()) /* closed with bytes unread: ECONNRESET, or EPIPE */
		ck_assert_msg(s.rc == -EPIPE || s.rc == -ECONNRESET, "rc %zd", s.rc);
	else
		ck_assert_int_eq(s.rc, -EPIPE);
	ck_assert_int_gt(s.queued, 0);
	/* done counts exactly what left the writer: read plus still queued */
	ck_assert_uint_eq(s.done, WREAD + (size_t)s.queued);
	ck_assert_uint_lt(s.done, WBIG);
	free(s.src);
	free(s.got);
}
END_TEST

/* runtime_send_all on a pipe goes on as writes; a bad fd is an error. */
struct pipe_put {
	int fd[2];
	unsigned char *src, *got;
	ssize_t wrc, rrc, bad_rc;
};

static void pipe_put_writer(void *p)
{
	struct pipe_put *s = p;

	s->bad_rc = runtime_send_all(-1, s->src, 10, NULL);
	s->wrc = runtime_send_all(s->fd[1], s->src, WBIG, NULL);
}

static void pipe_put_reader(void *p)
{
	struct pipe_put *s = p;

	s->rrc = runtime_read_exact(s->fd[0], s->got, WBIG, NULL);
}

START_TEST(test_net_send_all_writes_what_is_not_a_socket)
{
	struct pipe_put s = { .wrc = -999, .rrc = -999, .bad_rc = -999 };
	struct runtime *rt;

	s.src = malloc(WBIG);
	s.got = calloc(1, WBIG);
	ck_assert_ptr_nonnull(s.src);
	ck_assert_ptr_nonnull(s.got);
	for (size_t i = 0; i < WBIG; i++)
		s.src[i] = (unsigned char)(i * 7 + (i >> 9));
	ck_assert_int_eq(pipe2(s.fd, O_CLOEXEC), 0);
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, pipe_put_reader, &s), 0);
	ck_assert_int_eq(runtime_spawn(rt, pipe_put_writer, &s), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
	ck_assert_int_eq(s.bad_rc, -EBADF);
	ck_assert_int_eq(s.wrc, WBIG);
	ck_assert_int_eq(s.rrc, WBIG);
	ck_assert_int_eq(memcmp(s.src, s.got, WBIG), 0);
	close(s.fd[0]);
	close(s.fd[1]);
	free(s.src);
	free(s.got);
}
END_TEST

/* ------------------------------------------------------------ shutdown */

struct shut {
	int fd[2];
	int shut_rc, shut_bad, shut_notsock;
	ssize_t peer_read, back_wr, back_rd, wr_after;
	char back[8];
};

static void shutdown_fiber(void *p)
{
	struct shut *s = p;
	int pfd[2];
	char buf[8];

	tcp_pair(s->fd);
	s->shut_rc = runtime_sock_shutdown(s->fd[0], SHUT_WR);
	s->peer_read = runtime_read(s->fd[1], buf, sizeof(buf));
	/* Half-closed: the other direction still works. */
	s->back_wr = runtime_write(s->fd[1], "pong", 4);
	s->back_rd = runtime_read_exact(s->fd[0], s->back, 4, NULL);
	s->wr_after = runtime_write(s->fd[0], "x", 1);
	runtime_close(s->fd[0]);
	runtime_close(s->fd[1]);
	s->shut_bad = runtime_sock_shutdown(s->fd[0], SHUT_RDWR);
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	s->shut_notsock = runtime_sock_shutdown(pfd[0], SHUT_RD);
	runtime_close(pfd[0]);
	runtime_close(pfd[1]);
}

START_TEST(test_net_shutdown_wr_gives_peer_eof)
{
	struct shut s = { .shut_rc = -999, .peer_read = -999, .back_wr = -999, .back_rd = -999,
	                  .wr_after = -999, .shut_bad = -999, .shut_notsock = -999 };

	signal(SIGPIPE, SIG_IGN);
	ck_assert_int_eq(run_fiber(NULL, shutdown_fiber, &s), 0);
	ck_assert_int_eq(s.shut_rc, 0);
	ck_assert_int_eq(s.peer_read, 0);
	ck_assert_int_eq(s.back_wr, 4);
	ck_assert_int_eq(s.back_rd, 4);
	ck_assert_int_eq(memcmp(s.back, "pong", 4), 0);
	ck_assert_int_eq(s.wr_after, -EPIPE);
	ck_assert_int_eq(s.shut_bad, -EBADF);
	ck_assert_int_eq(s.shut_notsock, -ENOTSOCK);
}
END_TEST

/* ---------------------------------------------------------- fixed files */

/* What the calling core's ring holds in fixed-file slot `slot`, from the
 * ring's fdinfo ("%5u: socket:[ino]" lines): 1 and *out filled, 0 if the
 * slot is empty, -1 if this kernel does not list fixed files. */
static int fixed_slot(int slot, char *out, size_t outlen)
{
	DIR *d = opendir("/proc/self/fd");
	int ring = -1;
	char path[300], link[64];

	ck_assert_ptr_nonnull(d);
	for (struct dirent *e; (e = readdir(d));) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = '\0';
			if (strcmp(link, "anon_inode:[io_uring]") == 0)
				ring = atoi(e->d_name);
		}
	}
	closedir(d);
	if (on_epoll())
		return -1; /* no ring: no fixed-file table to look at */
	ck_assert_int_ge(ring, 0);
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ring);
	FILE *f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	char line[256];
	bool listed = false, in_files = false;
	int found = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned idx;
		char name[128];
		if (strncmp(line, "UserFiles:", 10) == 0) {
			listed = in_files = true;
			continue;
		}
		if (!in_files)
			continue;
		if (sscanf(line, " %u: %127s", &idx, name) != 2)
			break; /* past the file list */
		if (idx == (unsigned)slot) {
			snprintf(out, outlen, "%s", name);
			found = 1;
		}
	}
	fclose(f);
	return listed ? found : -1;
}

static void fd_name(int fd, char *out, size_t outlen)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, out, outlen - 1);
	ck_assert_int_gt(n, 0);
	out[n] = '\0';
}

struct fixed {
	int s1, s2, c1, c2;
	int reg1, reg_after_close, reg2, reg_c2;
	char name1[128], slot1[128], name2[128], slot2[128], slotc2[128];
	ssize_t echo1, echo2, eof_c1, peer_eof;
	char buf1[8], buf2[8];
	int close_rc, register_rc, shut_rc, close_all;
};

/* Client writes msg, server (fd s, fixed) echoes it, client reads it back:
 * read/write, or poll + recv/send. */
static ssize_t fixed_echo(int c, int s, const char *msg, char *back, bool use_recv)
{
	char tmp[8];
	size_t len = strlen(msg);

	if (runtime_write_all(c, msg, len, NULL) != (ssize_t)len)
		return -1001;
	if (use_recv) {
		if (runtime_poll(s, POLLIN, 2000 * (int64_t)MS) != POLLIN)
			return -1004;
		if (runtime_recv(s, tmp, len, MSG_WAITALL) != (ssize_t)len)
			return -1005;
		if (runtime_send(s, tmp, len, 0) != (ssize_t)len)
			return -1006;
	} else {
		if (runtime_read_exact(s, tmp, len, NULL) != (ssize_t)len)
			return -1002;
		if (runtime_write_all(s, tmp, len, NULL) != (ssize_t)len)
			return -1003;
	}
	return runtime_read_exact(c, back, len, NULL);
}

static void fixed_fiber(void *p)
{
	struct fixed *s = p;
	char junk[8];
	int l = runtime_tcp_listen("127.0.0.1", 0, 0, 0);

	ck_assert_int_ge(l, 0);
	uint16_t port = bound_port(l);
	/* A hang (a stale fixed slot read instead of the new socket) becomes a
	 * -ETIMEDOUT result instead of a test timeout. */
	runtime_deadline_set(runtime_now() + 5000 * MS);

	s->c1 = runtime_tcp_connect("127.0.0.1", port);
	s->s1 = runtime_accept(l, NULL, NULL, SOCK_CLOEXEC);
	if (s->c1 < 0 || s->s1 < 0)
		return;
	fd_name(s->s1, s->name1, sizeof(s->name1));
	s->reg1 = fixed_slot(s->s1, s->slot1, sizeof(s->slot1));
	s->echo1 = fixed_echo(s->c1, s->s1, "ping1", s->buf1, false);

	s->c2 = runtime_tcp_connect("127.0.0.1", port); /* takes a new number */
	s->close_rc = runtime_close(s->s1);
	s->reg_after_close = fixed_slot(s->s1, junk, sizeof(junk));
	/* The socket is really gone (no fixed-table reference keeps it). */
	s->eof_c1 = runtime_read(s->c1, junk, sizeof(junk));

	s->s2 = runtime_accept(l, NULL, NULL, SOCK_CLOEXEC); /* s1's number again */
	if (s->c2 < 0 || s->s2 < 0)
		return;
	fd_name(s->s2, s->name2, sizeof(s->name2));
	s->reg2 = fixed_slot(s->s2, s->slot2, sizeof(s->slot2));
	s->register_rc = runtime_fd_register(s->c2); /* the client side too */
	s->reg_c2 = fixed_slot(s->c2, s->slotc2, sizeof(s->slotc2));
	s->echo2 = fixed_echo(s->c2, s->s2, "PONG2", s->buf2, true);
	s->shut_rc = runtime_sock_shutdown(s->s2, SHUT_WR);
	s->peer_eof = runtime_read(s->c2, junk, sizeof(junk));
	s->close_all = runtime_close(s->s2) | runtime_close(s->c2) | runtime_close(s->c1) |
	               runtime_close(l);
}

START_TEST(test_net_fixed_files_register_use_release)
{
	struct fixed s = { .s1 = -999, .s2 = -999, .c1 = -999, .c2 = -999, .echo1 = -999,
	                   .echo2 = -999, .eof_c1 = -999, .peer_eof = -999, .close_rc = -999,
	                   .register_rc = -999, .shut_rc = -999, .close_all = -999 };
	struct runtime_config cfg;
	int before = count_fds();

	runtime_config_init(&cfg);
	cfg.fixed_files = 1;
	ck_assert_int_eq(run_fiber(&cfg, fixed_fiber, &s), 0);
	ck_assert_int_ge(s.c1, 0);
	ck_assert_int_ge(s.s1, 0);
	ck_assert_int_eq(s.echo1, 5);
	ck_assert_int_eq(memcmp(s.buf1, "ping1", 5), 0);
	ck_assert_int_eq(s.close_rc, 0);
	ck_assert_int_eq(s.eof_c1, 0);
	ck_assert_int_ge(s.c2, 0);
	ck_assert_int_eq(s.s2, s.s1);
	ck_assert_int_eq(s.echo2, 5);
	ck_assert_int_eq(memcmp(s.buf2, "PONG2", 5), 0);
	/* epoll has no fixed files: fixed_files is a no-op there. */
	ck_assert_int_eq(s.register_rc, on_epoll() ? -EOPNOTSUPP : 0);
	ck_assert_int_eq(s.shut_rc, 0);
	ck_assert_int_eq(s.peer_eof, 0);
	ck_assert_int_eq(s.close_all, 0);
	ck_assert_int_eq(count_fds(), before);
	if (on_epoll())
		return; /* no fixed files there, as asserted above */
	if (s.reg1 < 0)
		TEST_SKIP("this kernel's io_uring fdinfo lists no fixed files: the registration "
		          "was not inspected");
	/* Accepted sockets sit in the slot of their own number. */
	ck_assert_int_eq(s.reg1, 1);
	ck_assert_str_eq(s.slot1, s.name1);
	ck_assert_int_eq(s.reg_after_close, 0);
	ck_assert_int_eq(s.reg2, 1);
	ck_assert_str_eq(s.slot2, s.name2);
	ck_assert_str_ne(s.name2, s.name1);
	ck_assert_int_eq(s.reg_c2, 1);
}
END_TEST

struct noreg {
	int rc, rc_neg;
};

static void noreg_fiber(void *p)
{
	struct noreg *s = p;
	s->rc = runtime_fd_register(0);
	s->rc_neg = runtime_fd_register(-1);
}

START_TEST(test_net_fd_register_needs_fixed_files)
{
	struct noreg s = { -999, -999 };

	ck_assert_int_eq(run_fiber(NULL, noreg_fiber, &s), 0);
	ck_assert_int_eq(s.rc, -EOPNOTSUPP);
	ck_assert_int_eq(s.rc_neg, -EBADF);
	ck_assert_int_eq(runtime_fd_register(0), -EPERM);
}
END_TEST

/* --------------------------------------------------------------- SIGPIPE */

/* Writing to a socket or pipe whose reader has gone returns -EPIPE, on
 * every core, with SIGPIPE left at its default action: the runtime never
 * dies of it, and leaves no SIGPIPE pending for later either. */
struct epipe {
	ssize_t write_rc, write_all_rc, send_rc, writev_rc, sendmsg_rc, pipe_rc;
	size_t done;
	int core;
};

static void epipe_fiber(void *p)
{
	struct epipe *e = p;
	int sv[2], pf[2];
	struct iovec iov = { .iov_base = "x", .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	e->core = runtime_core_index();
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	runtime_close(sv[1]);
	e->write_rc = runtime_write(sv[0], "x", 1);
	e->write_all_rc = runtime_write_all(sv[0], "xyz", 3, &e->done);
	e->send_rc = runtime_send(sv[0], "x", 1, 0);
	e->writev_rc = runtime_writev(sv[0], &iov, 1);
	e->sendmsg_rc = runtime_sendmsg(sv[0], &msg, 0);
	runtime_close(sv[0]);
	ck_assert_int_eq(pipe2(pf, O_CLOEXEC), 0);
	runtime_close(pf[0]);
	e->pipe_rc = runtime_write(pf[1], "x", 1);
	runtime_close(pf[1]);
}

START_TEST(test_net_write_to_gone_reader_is_epipe_not_sigpipe)
{
	struct epipe e[2];
	struct runtime_config cfg;
	struct runtime *rt;

	ck_assert_ptr_eq(signal(SIGPIPE, SIG_DFL), SIG_DFL);
	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	for (unsigned i = 0; i < 2; i++)
		ck_assert_int_eq(runtime_spawn_on(rt, i, epipe_fiber, &e[i]), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(e[i].core, i);
		ck_assert_int_eq(e[i].write_rc, -EPIPE);
		ck_assert_int_eq(e[i].write_all_rc, -EPIPE);
		ck_assert_uint_eq(e[i].done, 0);
		ck_assert_int_eq(e[i].send_rc, -EPIPE);
		ck_assert_int_eq(e[i].writev_rc, -EPIPE);
		ck_assert_int_eq(e[i].sendmsg_rc, -EPIPE);
		ck_assert_int_eq(e[i].pipe_rc, -EPIPE);
	}
	/* Still alive, and nothing pending will kill us later. */
	sigset_t pending;
	ck_assert_int_eq(sigpending(&pending), 0);
	ck_assert(!sigismember(&pending, SIGPIPE));
}
END_TEST

/* ------------------------------------------------------------------ close */

/* runtime_close works outside a fiber too: it always closes. */
START_TEST(test_net_close_outside_fiber_closes)
{
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(runtime_close(sv[0]), 0);
	ck_assert_int_eq(fd_state(sv[0]), EBADF);
	ck_assert_int_eq(runtime_close(sv[0]), -EBADF);
	ck_assert_int_eq(runtime_close(-1), -EBADF);
	close(sv[1]);
}
END_TEST

/* ------------------------------------------------- fixed files, two cores */

/* A socket accepted (and registered) on core 0 and closed on core 1 is
 * really closed: its peer sees EOF, and the next connection that gets the
 * same fd number never reads the old connection's bytes. */
struct xclose {
	int listen_fd;
	uint16_t port;
	_Atomic int accepted;         /* fd handed from core 0 to core 1 */
	_Atomic bool closed;
	int client1, client2;
	int close_rc;
	ssize_t eof_rc;
	int accepted2;
	char got2[8];
	ssize_t got2_rc;
};

static struct xclose xc;

static void xc_acceptor(void *p)
{
	(void)p;
	runtime_deadline_set(runtime_now() + 10000 * MS);
	int fd = runtime_accept(xc.listen_fd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	atomic_store(&xc.accepted, fd);
	while (!atomic_load(&xc.closed))
		ck_assert_int_eq(runtime_sleep(MS), 0);
	/* The first client must see EOF now: nothing keeps its socket open. */
	xc.eof_rc = runtime_read(xc.client1, xc.got2, sizeof(xc.got2));
	/* A new connection, most likely on the same fd number. */
	xc.client2 = runtime_tcp_connect("127.0.0.1", xc.port);
	ck_assert_int_ge(xc.client2, 0);
	xc.accepted2 = runtime_accept(xc.listen_fd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(xc.accepted2, 0);
	ck_assert_int_eq(runtime_write(xc.client2, "new", 3), 3);
	xc.got2_rc = runtime_read(xc.accepted2, xc.got2, sizeof(xc.got2));
	runtime_close(xc.accepted2);
	runtime_close(xc.client2);
	runtime_close(xc.client1);
	runtime_close(xc.listen_fd);
}

static void xc_closer(void *p)
{
	int fd;
	(void)p;
	while ((fd = atomic_load(&xc.accepted)) < 0)
		ck_assert_int_eq(runtime_sleep(MS), 0);
	xc.close_rc = runtime_close(fd);
	atomic_store(&xc.closed, true);
}

static void xc_client(void *p)
{
	(void)p;
	xc.client1 = runtime_tcp_connect("127.0.0.1", xc.port);
	ck_assert_int_ge(xc.client1, 0);
	/* Bytes the old connection never read: they must not reach the new. */
	ck_assert_int_eq(runtime_write(xc.client1, "old", 3), 3);
}

START_TEST(test_net_fixed_file_closed_on_another_core)
{
	struct runtime_config cfg;
	struct runtime *rt;

	memset(&xc, 0, sizeof(xc));
	atomic_store(&xc.accepted, -1);
	xc.close_rc = xc.accepted2 = -999;
	xc.eof_rc = xc.got2_rc = -999;
	xc.listen_fd = runtime_tcp_listen("127.0.0.1", 0, 0, 0);
	ck_assert_int_ge(xc.listen_fd, 0);
	xc.port = bound_port(xc.listen_fd);
	runtime_config_init(&cfg);
	cfg.cores = 2;
	cfg.fixed_files = 1;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	ck_assert_int_eq(runtime_spawn_on(rt, 0, xc_acceptor, NULL), 0);
	ck_assert_int_eq(runtime_spawn_on(rt, 0, xc_client, NULL), 0);
	ck_assert_int_eq(runtime_spawn_on(rt, 1, xc_closer, NULL), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
	ck_assert_int_eq(xc.close_rc, 0);
	/* Closed (with "old" unread: a reset), not still open (-ETIMEDOUT). */
	ck_assert_msg(xc.eof_rc == 0 || xc.eof_rc == -ECONNRESET, "client read %zd", xc.eof_rc);
	ck_assert_int_eq(xc.got2_rc, 3);
	ck_assert_int_eq(memcmp(xc.got2, "new", 3), 0);
}
END_TEST

/* -------------------------------------------------------------- suite */

static Suite *net_suite(void)
{
	Suite *s = suite_create("net");
	TCase *tc;

	tc = tcase_create("echo");
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_net_tcp_echo_many_clients);
	tcase_add_test(tc, test_net_tcp_echo_ipv6_loopback);
	suite_add_tcase(s, tc);

	tc = tcase_create("accept");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_net_accept_cancelled_leaks_nothing);
	tcase_add_test(tc, test_net_accept_deadline_times_out);
	suite_add_tcase(s, tc);

	tc = tcase_create("listen");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_net_listen_rejects_bad_input);
	tcase_add_test(tc, test_net_sockaddr_name);
	tcase_add_test(tc, test_net_listen_socket_options);
	tcase_add_test(tc, test_net_listen_port_in_use);
	tcase_add_test(tc, test_net_listen_reuseport_shares_port);
	tcase_add_test(tc, test_net_listen_ipv6_loopback);
	suite_add_tcase(s, tc);

	tc = tcase_create("connect");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_net_connect_refused_leaves_no_fd);
	suite_add_tcase(s, tc);

	tc = tcase_create("stream");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_net_read_exact_eof_and_chunks);
	tcase_add_loop_test(tc, test_net_write_all_to_closed_peer_reports_progress, 0, 2);
	tcase_add_test(tc, test_net_send_all_writes_what_is_not_a_socket);
	tcase_add_test(tc, test_net_shutdown_wr_gives_peer_eof);
	suite_add_tcase(s, tc);

	tc = tcase_create("fixed_files");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_net_fixed_files_register_use_release);
	tcase_add_test(tc, test_net_fd_register_needs_fixed_files);
	tcase_add_test(tc, test_net_fixed_file_closed_on_another_core);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_net_write_to_gone_reader_is_epipe_not_sigpipe);
	tcase_add_test(tc, test_net_close_outside_fiber_closes);
	suite_add_tcase(s, tc);

	return s;
}

TEST_MAIN(net_suite)
