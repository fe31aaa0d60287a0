/* SPDX-License-Identifier: MIT */
/*
 * check_serve.c - serving a service without hand-written plumbing:
 * runtime_serve on every core (connections spread over the cores, the
 * peer's address, IPv4 and IPv6, the connection cap), connections with
 * deadlines that another fiber moves (runtime_conn_*, runtime_fiber_expire
 * under them), and the graceful drain (runtime_drain and its channel,
 * hooks and signals): idle connections close, busy ones finish, the run
 * ends with the last of them, and what outlives the grace is cancelled;
 * restarts' calls outside a restart (tests/restart.sh runs real ones).
 * Clients are plain threads with blocking sockets.
 */
#include "testutil.h"

#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

/* ------------------------------------------------------------- clients */

/* A blocking client socket to 127.0.0.1:port from source address
 * 127.0.x.y (spread over 127.0.0.0/8: ports stay plentiful), or -1. */
static int client(uint16_t port, unsigned source)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in from = { .sin_family = AF_INET,
	                            .sin_addr.s_addr = htonl(0x7f000000u | (source & 0xffffu) << 8 | 1u) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if ((source && bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0) ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read until EOF or n bytes (10 s at most); what was read. */
static ssize_t read_some(int fd, char *buf, size_t n)
{
	size_t got = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	while (got < n && poll(&p, 1, 10000) == 1) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* ------------------------------------------------- spread and addresses */

#define CLIENTS 400

struct spread {
	_Atomic int per_core[2], addr_ok, served;
	uint16_t port;
	struct runtime_server *srv;
};

/* Echo one line back, noting the core and whether the peer's address is
 * the client's own (127.0.x.1 with x its number + 1). */
static void spread_handler(struct runtime_conn *c, void *arg)
{
	struct spread *s = arg;
	char buf[32];
	socklen_t len = 0;
	const struct sockaddr_in *peer = (const struct sockaddr_in *)runtime_conn_peer(c, &len);
	ssize_t n = runtime_conn_read(c, buf, sizeof(buf) - 1);

	if (n <= 0)
		return;
	buf[n] = '\0'; /* the client sends digits only, no terminator */
	unsigned id = (unsigned)atoi(buf);
	atomic_fetch_add(&s->addr_ok, peer && len == sizeof(*peer) &&
	                 ntohl(peer->sin_addr.s_addr) == (0x7f000000u | (id + 1) << 8 | 1u));
	atomic_fetch_add(&s->per_core[runtime_core_index()], 1);
	runtime_conn_write(c, buf, (size_t)n, NULL);
	if (atomic_fetch_add(&s->served, 1) + 1 == CLIENTS)
		runtime_server_stop(s->srv); /* the last: the run can end */
}

static void *spread_clients(void *arg)
{
	struct spread *s = arg;

	for (unsigned i = 0; i < CLIENTS; i++) {
		char msg[16], back[16];
		int fd = client(s->port, i + 1);
		ck_assert_int_ge(fd, 0);
		int len = snprintf(msg, sizeof(msg), "%u", i);
		ck_assert_int_eq(write(fd, msg, (size_t)len), len);
		ck_assert_int_eq(read_some(fd, back, (size_t)len), len);
		close(fd);
	}
	return NULL;
}

START_TEST(test_serve_spreads_over_cores_with_peer_addresses)
{
	static struct spread s;
	struct runtime_serve_config sc;
	struct runtime_config cfg;
	struct runtime *rt;
	pthread_t th;

	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	runtime_serve_config_init(&sc);
	sc.host = "127.0.0.1";
	sc.handler = spread_handler;
	sc.arg = &s;
	ck_assert_int_eq(runtime_serve(rt, &sc, &s.srv), 0);
	s.port = runtime_server_port(s.srv);
	ck_assert_uint_ne(s.port, 0);
	ck_assert_int_eq(pthread_create(&th, NULL, spread_clients, &s), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	pthread_join(th, NULL);
	struct runtime_server_stats st;
	runtime_server_stats(s.srv, &st);
	runtime_server_destroy(s.srv);
	runtime_destroy(rt);
	fprintf(stderr, "note: core 0 served %d, core 1 %d\n", s.per_core[0], s.per_core[1]);
	ck_assert_int_eq(s.served, CLIENTS);
	ck_assert_int_ge(s.per_core[0], CLIENTS / 10);
	ck_assert_int_ge(s.per_core[1], CLIENTS / 10);
	ck_assert_int_eq(s.addr_ok, CLIENTS);
	ck_assert_uint_eq(st.accepted, CLIENTS);
	ck_assert_uint_eq(st.refused, 0);
	ck_assert_uint_eq(st.live, 0);
}
END_TEST

/* ----------------------------------------------------- IPv6, bad input */

static void hello_handler(struct runtime_conn *c, void *arg)
{
	(void)arg;
	runtime_conn_write(c, "hello\n", 6, NULL);
}

static void v6_client(void *arg)
{
	struct runtime_server *srv = arg;
	char buf[8];
	int fd = runtime_tcp_connect("::1", runtime_server_port(srv));

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(runtime_read_exact(fd, buf, 6, NULL), 6);
	ck_assert_int_eq(memcmp(buf, "hello\n", 6), 0);
	runtime_close(fd);
	runtime_server_stop(srv);
}

START_TEST(test_serve_ipv6)
{
	struct runtime_serve_config sc;
	struct runtime_server *srv;
	struct runtime *rt;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	runtime_serve_config_init(&sc);
	sc.handler = hello_handler;
	sc.host = "::1";
	int rc = runtime_serve(rt, &sc, &srv);
	if (rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT) {
		runtime_destroy(rt);
		TEST_SKIP("no IPv6 loopback here (%s)", strerror(-rc));
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(runtime_spawn(rt, v6_client, srv), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_server_destroy(srv);
	runtime_destroy(rt);
}
END_TEST

START_TEST(test_serve_bad_input)
{
	struct runtime_serve_config sc;
	struct runtime_server *srv = (struct runtime_server *)1;
	struct runtime *rt;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	runtime_serve_config_init(&sc);
	ck_assert_int_eq(sc.nodelay, 1);
	ck_assert_int_eq(runtime_serve(rt, &sc, &srv), -EINVAL); /* no handler */
	ck_assert_ptr_null(srv);
	sc.handler = hello_handler;
	ck_assert_int_eq(runtime_serve(NULL, &sc, &srv), -EINVAL);
	ck_assert_int_eq(runtime_serve(rt, NULL, &srv), -EINVAL);
	ck_assert_int_eq(runtime_serve(rt, &sc, NULL), -EINVAL);
	sc.host = "not an address";
	ck_assert_int_eq(runtime_serve(rt, &sc, &srv), -EINVAL);
	ck_assert_int_eq(runtime_server_port(NULL), 0);
	ck_assert_int_eq(runtime_server_stop(NULL), -EINVAL);
	runtime_server_destroy(NULL);
	runtime_destroy(rt);

	/* A runtime shut down: refused, and nothing is left open. */
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	runtime_shutdown(rt);
	int fds = count_fds();
	sc.host = NULL;
	srv = (struct runtime_server *)1;
	ck_assert_int_eq(runtime_serve(rt, &sc, &srv), -ESHUTDOWN);
	ck_assert_ptr_null(srv);
	ck_assert_int_eq(count_fds(), fds);
	runtime_destroy(rt);
}
END_TEST

/* A port another socket holds - a stale copy of the service, with
 * SO_REUSEPORT as ours have - is refused with -EADDRINUSE, not shared
 * (the kernel would split the connections between the two), and nothing
 * is left open; share_port shares it on purpose. A second server of ours
 * on a port the first serves is refused the same way. */
START_TEST(test_serve_refuses_a_port_held_elsewhere)
{
	struct runtime_serve_config sc;
	struct runtime_server *srv, *second;
	struct runtime *rt;
	int one = 1;

	int held = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(held, 0);
	ck_assert_int_eq(setsockopt(held, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)), 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(bind(held, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(held, 4), 0);
	uint16_t port = bound_port(held);

	ck_assert_int_eq(runtime_tcp_listen("127.0.0.1", port, 0,
	                                    RUNTIME_LISTEN_REUSEPORT | RUNTIME_LISTEN_EXCLUSIVE),
	                 -EADDRINUSE);
	int fd = runtime_tcp_listen("127.0.0.1", port, 0, RUNTIME_LISTEN_REUSEPORT);
	ck_assert_int_ge(fd, 0); /* joining on purpose still works */
	close(fd);

	struct runtime_config cfg;
	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	runtime_serve_config_init(&sc);
	ck_assert_int_eq(sc.share_port, 0);
	sc.handler = hello_handler;
	sc.host = "127.0.0.1";
	sc.port = port;
	int fds = count_fds();
	ck_assert_int_eq(runtime_serve(rt, &sc, &srv), -EADDRINUSE);
	ck_assert_ptr_null(srv);
	ck_assert_int_eq(count_fds(), fds);
	sc.share_port = 1;
	ck_assert_int_eq(runtime_serve(rt, &sc, &srv), 0);
	runtime_server_stop(srv);
	close(held);

	/* Ours now alone on the port: a second server is refused too. */
	sc.share_port = 0;
	ck_assert_int_eq(runtime_serve(rt, &sc, &second), -EADDRINUSE);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_server_destroy(srv);
	runtime_destroy(rt);
}
END_TEST

/* --------------------------------------------------------------- the cap */

#define CAP 10

struct cap {
	uint16_t port;
	struct runtime_server *srv;
	struct runtime_waitgroup held;
	_Atomic int release;
};

/* Hold the connection until told, then say bye. */
static void holding_handler(struct runtime_conn *c, void *arg)
{
	struct cap *s = arg;

	runtime_waitgroup_done(&s->held);
	while (!atomic_load(&s->release))
		runtime_sleep(MS);
	runtime_conn_write(c, "bye", 3, NULL);
}

static void cap_main(void *arg)
{
	struct cap *s = arg;
	int fds[CAP + 1];
	char buf[4];

	for (int i = 0; i < CAP; i++)
		fds[i] = runtime_tcp_connect("127.0.0.1", s->port);
	ck_assert_int_eq(runtime_waitgroup_wait(&s->held, 10000 * (int64_t)MS), 0);
	fds[CAP] = runtime_tcp_connect("127.0.0.1", s->port); /* over the cap */
	ck_assert_int_ge(fds[CAP], 0);
	ck_assert_int_le(runtime_read(fds[CAP], buf, sizeof(buf)), 0); /* closed at once */
	atomic_store(&s->release, 1);
	for (int i = 0; i < CAP; i++) {
		ck_assert_int_eq(runtime_read_exact(fds[i], buf, 3, NULL), 3);
		runtime_close(fds[i]);
	}
	runtime_close(fds[CAP]);
	runtime_server_stop(s->srv);
}

START_TEST(test_serve_caps_live_connections)
{
	static struct cap s = { .held = RUNTIME_WAITGROUP_INIT };
	struct runtime_serve_config sc;
	struct runtime *rt;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	runtime_serve_config_init(&sc);
	sc.host = "127.0.0.1";
	sc.max_conns = CAP;
	sc.handler = holding_handler;
	sc.arg = &s;
	runtime_waitgroup_add(&s.held, CAP);
	ck_assert_int_eq(runtime_serve(rt, &sc, &s.srv), 0);
	s.port = runtime_server_port(s.srv);
	ck_assert_int_eq(runtime_spawn(rt, cap_main, &s), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	struct runtime_server_stats st;
	runtime_server_stats(s.srv, &st);
	runtime_server_destroy(s.srv);
	runtime_destroy(rt);
	ck_assert_uint_eq(st.accepted, CAP);
	ck_assert_uint_eq(st.refused, 1);
	ck_assert_uint_eq(st.live, 0);
}
END_TEST

/* ----------------------------------------------------- moved deadlines */

struct moved {
	int fd[2];
	struct runtime_conn *conn;
	ssize_t early, later, write_rc;
	size_t written;
	bool later_waiting;
};

static void *read_under_conn(void *arg)
{
	struct moved *m = arg;
	char c;
	return (void *)(intptr_t)runtime_conn_read(m->conn, &c, 1);
}

static void *write_under_conn(void *arg)
{
	struct moved *m = arg;
	static char big[1 << 22];
	m->write_rc = runtime_conn_write(m->conn, big, sizeof(big), &m->written);
	return NULL;
}

static void moved_main(void *arg)
{
	struct moved *m = arg;
	char c;

	tcp_pair(m->fd);
	ck_assert_int_eq(runtime_conn_open(&m->conn, m->fd[1], 0), 0);
	/* Earlier: a blocked read wakes with -ETIMEDOUT once it passes. */
	struct runtime_fiber *r = start(read_under_conn, m);
	runtime_sleep(5 * MS);
	ck_assert_int_eq(runtime_conn_set_read_deadline(m->conn, runtime_now() + 20 * MS), 0);
	m->early = (ssize_t)join(r);
	/* Earlier, then later before it passes: the read waits on, and gets
	 * the byte that comes. */
	ck_assert_int_eq(runtime_conn_set_read_deadline(m->conn, 0), 0);
	r = start(read_under_conn, m);
	runtime_sleep(5 * MS);
	runtime_conn_set_read_deadline(m->conn, runtime_now() + 30 * MS);
	runtime_sleep(5 * MS);
	runtime_conn_set_read_deadline(m->conn, runtime_now() + 10000 * MS);
	runtime_sleep(60 * MS); /* past the first one */
	ck_assert_int_eq(runtime_fiber_id(r) != 0, 1);
	m->later_waiting = runtime_fiber_expire(r) == 0; /* still blocked: expire is harmless */
	ck_assert_int_eq(runtime_write(m->fd[0], "z", 1), 1);
	m->later = (ssize_t)join(r);
	/* A writer blocked on a full socket: the write deadline stops it. */
	struct runtime_fiber *w = start(write_under_conn, m);
	runtime_sleep(20 * MS);
	ck_assert_int_eq(runtime_conn_set_write_deadline(m->conn, runtime_now()), 0);
	join(w);
	ck_assert_int_eq(runtime_conn_read(m->conn, &c, 0), 0);
	ck_assert_int_eq(runtime_conn_close(m->conn), 0);
	runtime_close(m->fd[0]);
}

START_TEST(test_conn_deadline_moved_by_another_fiber)
{
	struct moved m = { .early = -999, .later = -999, .write_rc = -999 };

	ck_assert_int_eq(run_fiber(NULL, moved_main, &m), 0);
	ck_assert_int_eq(m.early, -ETIMEDOUT);
	ck_assert(m.later_waiting);
	ck_assert_int_eq(m.later, 1);
	ck_assert_int_eq(m.write_rc, -ETIMEDOUT);
	ck_assert_uint_gt(m.written, 0); /* what went out before is reported */
	ck_assert_uint_lt(m.written, 1u << 22);
}
END_TEST

/* A read under the connection's deadline and the fiber's own: it ends at
 * the earlier (never before it), and leaves the fiber's own as it was. */
static void read_times_out_at(struct runtime_conn *c, uint64_t own, uint64_t conn, uint64_t at)
{
	char b;

	runtime_deadline_set(own);
	ck_assert_int_eq(runtime_conn_set_read_deadline(c, conn), 0);
	ck_assert_int_eq(runtime_conn_read(c, &b, 1), -ETIMEDOUT);
	ck_assert_uint_ge(runtime_now(), at);
	ck_assert_uint_eq(runtime_deadline_get(), own);
	runtime_deadline_set(0);
}

static void earlier_main(void *arg)
{
	int fd[2];
	struct runtime_conn *c;
	char b;

	(void)arg;
	tcp_pair(fd);
	ck_assert_int_eq(runtime_conn_open(&c, fd[1], 0), 0);
	uint64_t now = runtime_now();
	read_times_out_at(c, now + 30 * MS, now + 60000 * MS, now + 30 * MS);
	now = runtime_now();
	read_times_out_at(c, now + 60000 * MS, now + 30 * MS, now + 30 * MS);
	/* Past the connection's deadline: -ETIMEDOUT at once, the bytes
	 * waiting left for the next read, nothing sent. */
	ck_assert_int_eq(runtime_write(fd[0], "q", 1), 1);
	runtime_sleep(10 * MS);
	ck_assert_int_eq(runtime_conn_set_read_deadline(c, 1), 0);
	ck_assert_int_eq(runtime_conn_set_write_deadline(c, 1), 0);
	ck_assert_int_eq(runtime_conn_read(c, &b, 1), -ETIMEDOUT);
	ck_assert_int_eq(runtime_conn_write(c, "w", 1, NULL), -ETIMEDOUT);
	ck_assert_int_eq(runtime_conn_set_read_deadline(c, 0), 0);
	ck_assert_int_eq(runtime_conn_set_write_deadline(c, 0), 0);
	ck_assert_int_eq(runtime_conn_read(c, &b, 1), 1);
	ck_assert_int_eq(b, 'q');
	ck_assert_int_eq(recv(fd[0], &b, 1, MSG_DONTWAIT), -1);
	ck_assert_int_eq(errno, EAGAIN);
	ck_assert_uint_eq(runtime_deadline_get(), 0);
	ck_assert_int_eq(runtime_conn_close(c), 0);
	runtime_close(fd[0]);
}

START_TEST(test_conn_deadline_is_the_earlier_of_the_callers_and_the_conns)
{
	ck_assert_int_eq(run_fiber(NULL, earlier_main, NULL), 0);
}
END_TEST

static atomic_bool misuse_elsewhere_done;

static void conn_misuse_elsewhere(void *arg)
{
	struct runtime_conn *c = arg;
	char b;
	ck_assert_int_eq(runtime_conn_read(c, &b, 1), -EPERM);
	ck_assert_int_eq(runtime_conn_set_read_deadline(c, 1), -EPERM);
	ck_assert_int_eq(runtime_conn_pending(c), -EPERM);
	ck_assert_int_eq(runtime_conn_close(c), -EPERM);
	atomic_store(&misuse_elsewhere_done, true); /* c may go now */
}

static void conn_misuse_main(void *arg)
{
	struct runtime_conn *c;
	int fd[2];
	char b;

	(void)arg;
	ck_assert_int_eq(runtime_conn_open(NULL, 0, 0), -EINVAL);
	ck_assert_int_eq(runtime_conn_open(&c, -1, 0), -EBADF);
	ck_assert_int_eq(runtime_conn_open(&c, 0, 0x80), -EINVAL);
	ck_assert_int_eq(runtime_conn_read(NULL, &b, 1), -EINVAL);
	ck_assert_int_eq(runtime_conn_pending(NULL), -EINVAL);
	ck_assert_int_eq(runtime_conn_close(NULL), 0);
	ck_assert_ptr_null(runtime_conn_transport(NULL));
	tcp_pair(fd);
	ck_assert_int_eq(runtime_conn_open(&c, fd[1], RUNTIME_CONN_PLAIN_RECV), 0);
	ck_assert_int_eq(runtime_conn_fd(c), fd[1]);
	ck_assert_ptr_nonnull(runtime_conn_peer(c, NULL));
	ck_assert_int_eq(runtime_spawn_on(runtime_current(), 1, conn_misuse_elsewhere, c), 0);
	/* Until the other core is done with c: a sleep alone orders nothing
	 * (TSan saw the free race the other core's last read). */
	for (int i = 0; i < 4000 && !atomic_load(&misuse_elsewhere_done); i++)
		runtime_sleep(5 * MS);
	ck_assert(atomic_load(&misuse_elsewhere_done));
	runtime_close(fd[0]);
	ck_assert_int_eq(runtime_conn_read(c, &b, 1), 0); /* EOF */
	ck_assert_int_eq(runtime_conn_close(c), 0);
}

/* Wait (bounded) until c's pending state is want; it must get there. */
static void pending_becomes(struct runtime_conn *c, int want)
{
	int rc = -1;

	for (int i = 0; i < 2000 && (rc = runtime_conn_pending(c)) != want; i++)
		runtime_sleep(MS);
	ck_assert_int_eq(rc, want);
}

/* runtime_conn_pending: what came and was not read - bytes, the peer's
 * end - through a receive stream (no system call once it watches the
 * socket) and through plain recvs (a peek at the socket) alike; reading
 * the bytes makes it 0 again, and the end stays. The stream's own answer
 * says when only the socket can tell (before its first read). */
static void conn_pending_main(void *arg)
{
	static const unsigned flags[] = { 0, RUNTIME_CONN_PLAIN_RECV };
	char buf[8];

	(void)arg;
	for (size_t i = 0; i < 2; i++) {
		struct runtime_conn *c;
		int fd[2];
		tcp_pair(fd);
		ck_assert_int_eq(runtime_conn_open(&c, fd[1], flags[i]), 0);
		ck_assert_int_eq(runtime_conn_pending(c), 0);
		ck_assert_int_eq(runtime_write_all(fd[0], "a", 1, NULL), 1);
		ck_assert_int_eq(runtime_conn_read(c, buf, sizeof(buf)), 1);
		ck_assert_int_eq(runtime_conn_pending(c), 0);
		ck_assert_int_eq(runtime_write_all(fd[0], "xy", 2, NULL), 2);
		pending_becomes(c, 1);
		ck_assert_int_eq(runtime_conn_pending(c), 1); /* asking takes nothing */
		ck_assert_int_eq(runtime_conn_read(c, buf, sizeof(buf)), 2);
		ck_assert_int_eq(runtime_conn_pending(c), 0);
		ck_assert_int_eq(shutdown(fd[0], SHUT_WR), 0);
		pending_becomes(c, 1);
		ck_assert_int_eq(runtime_conn_read(c, buf, sizeof(buf)), 0);
		ck_assert_int_eq(runtime_conn_pending(c), 1);
		ck_assert_int_eq(runtime_conn_close(c), 0);
		runtime_close(fd[0]);
	}

	struct runtime_stream *st;
	int fd[2];
	tcp_pair(fd);
	ck_assert_int_eq(runtime_stream_pending(NULL), -EINVAL);
	ck_assert_int_eq(runtime_stream_open(&st, fd[1]), 0);
	ck_assert_int_eq(runtime_stream_pending(st), -EAGAIN); /* not watching yet */
	ck_assert_int_eq(runtime_write_all(fd[0], "a", 1, NULL), 1);
	ck_assert_int_eq(runtime_stream_recv(st, buf, sizeof(buf)), 1);
	ck_assert_int_ne(runtime_stream_pending(st), 1);
	ck_assert_int_eq(runtime_stream_close(st), 0);
	runtime_close(fd[0]);
	runtime_close(fd[1]);
}

START_TEST(test_conn_pending_sees_unread_bytes_and_the_end)
{
	ck_assert_int_eq(run_fiber(NULL, conn_pending_main, NULL), 0);
}
END_TEST

static int close_later(void *arg)
{
	runtime_sleep(50 * MS);
	runtime_close(*(int *)arg);
	return 0;
}

/* A conn with its receive stream watching (a byte read) and the peer's
 * fd in fd[0]. */
static struct runtime_conn *watched_pair(int fd[2])
{
	struct runtime_conn *c;
	char b;

	tcp_pair(fd);
	ck_assert_int_eq(runtime_conn_open(&c, fd[1], 0), 0);
	ck_assert_int_eq(runtime_write_all(fd[0], "a", 1, NULL), 1);
	ck_assert_int_eq(runtime_conn_read(c, &b, 1), 1);
	return c;
}

/* runtime_conn_cancel_on_close: the peer's close while the fiber sleeps
 * cancels it; bytes queued before the end do not (a reader is due), nor
 * an end that came before the watch (a half-close); a plain-recv
 * connection cannot watch. */
static void cancel_on_close_main(void *arg)
{
	struct runtime_conn *c;
	struct runtime_group *g;
	int fd[2];

	(void)arg;
	c = watched_pair(fd);
	ck_assert_int_eq(runtime_conn_cancel_on_close(c, 1), 0);
	ck_assert_int_eq(runtime_group_create(&g, 0), 0);
	ck_assert_int_eq(runtime_group_spawn(g, close_later, &fd[0]), 0);
	uint64_t t0 = runtime_now();
	ck_assert_int_eq(runtime_sleep(5000 * MS), -ECANCELED);
	ck_assert_uint_lt(runtime_now() - t0, 3000 * MS);
	ck_assert_int_eq(runtime_conn_cancel_on_close(c, 0), 1);
	struct runtime_cleanup cleanup; /* the cancel held back: the closer waited for */
	runtime_cleanup_begin(&cleanup, 5000 * MS);
	ck_assert_int_eq(runtime_group_wait(g, -1, NULL), 0);
	runtime_cleanup_end(&cleanup);
	ck_assert_int_eq(runtime_conn_close(c), 0);
	runtime_group_destroy(g);
}

static void queued_then_end_main(void *arg)
{
	struct runtime_conn *c;
	int fd[2];

	(void)arg;
	c = watched_pair(fd);
	ck_assert_int_eq(runtime_conn_cancel_on_close(c, 1), 0);
	ck_assert_int_eq(runtime_write_all(fd[0], "zz", 2, NULL), 2);
	runtime_close(fd[0]);
	ck_assert_int_eq(runtime_sleep(200 * MS), 0); /* "zz" queued first: not gone */
	ck_assert_int_eq(runtime_conn_cancel_on_close(c, 0), 0);
	ck_assert_int_eq(runtime_conn_close(c), 0);
	c = watched_pair(fd);
	ck_assert_int_eq(shutdown(fd[0], SHUT_WR), 0);
	pending_becomes(c, 1);
	ck_assert_int_eq(runtime_conn_cancel_on_close(c, 1), 1); /* a half-close: no watch */
	ck_assert_int_eq(runtime_sleep(50 * MS), 0);
	ck_assert_int_eq(runtime_conn_cancel_on_close(c, 0), 0);
	ck_assert_int_eq(runtime_conn_close(c), 0);
	runtime_close(fd[0]);
	tcp_pair(fd);
	ck_assert_int_eq(runtime_conn_open(&c, fd[1], RUNTIME_CONN_PLAIN_RECV), 0);
	ck_assert_int_eq(runtime_conn_cancel_on_close(c, 1), -EOPNOTSUPP);
	ck_assert_int_eq(runtime_conn_cancel_on_close(NULL, 1), -EINVAL);
	ck_assert_int_eq(runtime_conn_close(c), 0);
	runtime_close(fd[0]);
}

START_TEST(test_conn_cancel_on_close)
{
	ck_assert_int_eq(run_fiber(NULL, cancel_on_close_main, NULL), 0);
	ck_assert_int_eq(run_fiber(NULL, queued_then_end_main, NULL), 0);
}
END_TEST

/* A peer's address longer than an IPv6 one (a unix socket's path) is kept
 * out of line: the whole path comes back, twice (looked up, then kept),
 * and closing frees it (ASan). An unnamed peer's is its family alone. */
static void unix_peer_main(void *arg)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct runtime_conn *c;
	socklen_t len = 0;
	int ls, fd, sv[2];

	(void)arg;
	snprintf(un.sun_path, sizeof(un.sun_path), "/tmp/check_serve.%d.a-path-longer-than-28-bytes",
	         (int)getpid());
	unlink(un.sun_path);
	ck_assert_int_ge(ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), 0);
	ck_assert_int_eq(bind(ls, (struct sockaddr *)&un, sizeof(un)), 0);
	ck_assert_int_eq(listen(ls, 1), 0);
	ck_assert_int_ge(fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&un, sizeof(un)), 0);
	ck_assert_int_eq(runtime_conn_open(&c, fd, 0), 0);
	for (int i = 0; i < 2; i++) {
		const struct sockaddr_un *p = (const void *)runtime_conn_peer(c, &len);
		ck_assert_ptr_nonnull(p);
		ck_assert_uint_gt(len, sizeof(struct sockaddr_in6));
		ck_assert_int_eq(p->sun_family, AF_UNIX);
		ck_assert_str_eq(p->sun_path, un.sun_path);
	}
	ck_assert_int_eq(runtime_conn_close(c), 0);
	close(ls);
	unlink(un.sun_path);

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(runtime_conn_open(&c, sv[0], 0), 0);
	const struct sockaddr *sa = runtime_conn_peer(c, &len);
	ck_assert_ptr_nonnull(sa);
	ck_assert_uint_eq(len, sizeof(sa_family_t));
	ck_assert_int_eq(sa->sa_family, AF_UNIX);
	ck_assert_int_eq(runtime_conn_close(c), 0);
	close(sv[1]);
}

START_TEST(test_conn_peer_of_a_unix_socket)
{
	ck_assert_int_eq(run_fiber(NULL, unix_peer_main, NULL), 0);
}
END_TEST

START_TEST(test_conn_misuse_gets_clear_errors)
{
	struct runtime_config cfg;

	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(run_fiber(&cfg, conn_misuse_main, NULL), 0);
}
END_TEST

/* The idle timeout: bytes either way keep it off; silence on both ends
 * it, for a read and for a write alike. */
struct idle {
	int fd[2];
	struct runtime_conn *conn;
	ssize_t read_rc;
	int kept;
};

static void *idle_reader(void *arg)
{
	struct idle *s = arg;
	char buf[16];
	ssize_t n;

	while ((n = runtime_conn_read(s->conn, buf, sizeof(buf))) > 0)
		s->kept++;
	s->read_rc = n;
	return NULL;
}

static void idle_main(void *arg)
{
	struct idle *s = arg;

	tcp_pair(s->fd);
	ck_assert_int_eq(runtime_conn_open(&s->conn, s->fd[1], 0), 0);
	ck_assert_int_eq(runtime_conn_set_idle_timeout(s->conn, 200 * MS), 0);
	struct runtime_fiber *r = start(idle_reader, s);
	uint64_t t0 = runtime_now();
	for (int i = 0; i < 10; i++) { /* a byte each 50 ms: never idle 200 */
		runtime_sleep(50 * MS);
		ck_assert_int_eq(runtime_write(s->fd[0], "b", 1), 1);
	}
	join(r); /* then silence: the read fails */
	ck_assert_uint_ge(runtime_now() - t0, 700 * MS); /* the bytes kept it alive */
	/* Run out, it stays out until set again. */
	ck_assert_int_eq(runtime_conn_write(s->conn, "x", 1, NULL), -ETIMEDOUT);
	ck_assert_int_eq(runtime_conn_set_idle_timeout(s->conn, 200 * MS), 0);
	/* A write blocked on a full socket, with nothing read back: idle too. */
	static char big[1 << 22];
	size_t done = 0;
	ck_assert_int_eq(runtime_conn_write(s->conn, big, sizeof(big), &done), -ETIMEDOUT);
	ck_assert_uint_gt(done, 0);
	ck_assert_int_eq(runtime_conn_set_idle_timeout(NULL, 1), -EINVAL);
	ck_assert_int_eq(runtime_conn_close(s->conn), 0);
	runtime_close(s->fd[0]);
}

START_TEST(test_conn_idle_timeout)
{
	struct idle s = { .read_rc = -999 };

	ck_assert_int_eq(run_fiber(NULL, idle_main, &s), 0);
	ck_assert_int_eq(s.read_rc, -ETIMEDOUT);
	ck_assert_int_ge(s.kept, 5);
}
END_TEST

/* finish: the last answer reaches a peer that is still sending (a close
 * would reset the connection and could destroy it), then the peer's end
 * of stream. */
struct finish {
	int fd[2];
	int rc, timeout_rc;
	char got[8];
	ssize_t got_n;
};

static void *finish_peer(void *arg)
{
	struct finish *s = arg;
	char junk[4096] = { 0 };

	for (int i = 0; i < 8; i++) /* unread input on the other side */
		runtime_write(s->fd[0], junk, sizeof(junk));
	s->got_n = runtime_read_exact(s->fd[0], s->got, 6, NULL);
	char c;
	ck_assert_int_eq(runtime_read(s->fd[0], &c, 1), 0); /* end of stream */
	runtime_sock_shutdown(s->fd[0], SHUT_WR);
	return NULL;
}

static void finish_main(void *arg)
{
	struct finish *s = arg;
	struct runtime_conn *conn;

	tcp_pair(s->fd);
	ck_assert_int_eq(runtime_conn_open(&conn, s->fd[1], 0), 0);
	struct runtime_fiber *p = start(finish_peer, s);
	runtime_sleep(20 * MS);
	ck_assert_int_eq(runtime_conn_write(conn, "answer", 6, NULL), 6);
	s->rc = runtime_conn_finish(conn, 10000 * MS);
	join(p);
	ck_assert_int_eq(runtime_conn_close(conn), 0);
	runtime_close(s->fd[0]);
	/* A peer that never stops: the timeout. */
	tcp_pair(s->fd);
	ck_assert_int_eq(runtime_conn_open(&conn, s->fd[1], 0), 0);
	s->timeout_rc = runtime_conn_finish(conn, 50 * MS);
	ck_assert_int_eq(runtime_conn_close(conn), 0);
	runtime_close(s->fd[0]);
}

START_TEST(test_conn_finish_lets_the_last_answer_through)
{
	struct finish s = { .rc = -999, .timeout_rc = -999 };

	ck_assert_int_eq(run_fiber(NULL, finish_main, &s), 0);
	ck_assert_int_eq(s.rc, 0);
	ck_assert_int_eq(s.got_n, 6);
	ck_assert_int_eq(memcmp(s.got, "answer", 6), 0);
	ck_assert_int_eq(s.timeout_rc, -ETIMEDOUT);
}
END_TEST

/* ------------------------------------------------------ fiber expire */

static void *sleeper(void *arg)
{
	(void)arg;
	int first = runtime_sleep(UINT64_MAX);
	int second = runtime_sleep(MS); /* not sticky */
	return (void *)(intptr_t)(first == -ETIMEDOUT && second == 0);
}

static void expire_main(void *arg)
{
	int *ok = arg;
	struct runtime_fiber *f = start(sleeper, NULL);

	ck_assert_int_eq(runtime_fiber_expire(f), -EAGAIN); /* ready, not waiting */
	runtime_yield();
	ck_assert_int_eq(runtime_fiber_expire(f), 0);
	*ok = (int)join(f);
	ck_assert_int_eq(runtime_fiber_expire(NULL), -EINVAL);
	ck_assert_int_eq(runtime_fiber_expire(f), -ESRCH);
}

START_TEST(test_fiber_expire_ends_one_wait)
{
	int ok = 0;

	ck_assert_int_eq(run_fiber(NULL, expire_main, &ok), 0);
	ck_assert_int_eq(ok, 1);
}
END_TEST

/* --------------------------------------------- idle with no fiber */

#define IDLE_CONNS 50

struct idle_srv {
	struct runtime *rt;
	uint16_t port;
	uint64_t idle_timeout;      /* each connection's, 0: none */
	_Atomic int runs, shutdowns, timeouts, eofs;
	_Atomic uint64_t live_while_idle;
};

/* Echo one message per run, then wait with no fiber for the next. */
static void idle_echo(struct runtime_conn *c, void *arg)
{
	struct idle_srv *s = arg;
	char buf[64];

	if (atomic_fetch_add(&s->runs, 1) < IDLE_CONNS && s->idle_timeout)
		runtime_conn_set_idle_timeout(c, s->idle_timeout);
	ssize_t n = runtime_conn_read(c, buf, sizeof(buf));
	if (n <= 0) {
		atomic_fetch_add(n == -ESHUTDOWN ? &s->shutdowns : n == -ETIMEDOUT ? &s->timeouts
		                                                                   : &s->eofs, 1);
		return; /* the server closes it */
	}
	runtime_conn_set_idle(c, 0);
	ck_assert_int_eq(runtime_conn_write(c, buf, (size_t)n, NULL), n);
	ck_assert_int_eq(runtime_conn_idle(c, NULL, NULL), 0);
}

static void echo_once(int fd, const char *msg)
{
	char back[16];
	size_t len = strlen(msg);

	ck_assert_int_eq(write(fd, msg, len), (ssize_t)len);
	ck_assert_int_eq(read_some(fd, back, len), (ssize_t)len);
	ck_assert_int_eq(memcmp(back, msg, len), 0);
}

/* Two messages on each connection, all held idle in between (no fiber but
 * the server's own two: watcher and acceptor), then a drain closes them. */
static void *idle_clients(void *arg)
{
	struct idle_srv *s = arg;
	int fd[IDLE_CONNS];
	char b;

	for (int i = 0; i < IDLE_CONNS; i++) {
		fd[i] = client(s->port, (unsigned)i + 1);
		ck_assert_int_ge(fd[i], 0);
		echo_once(fd[i], "first");
	}
	for (int i = 0; i < 10000 && fibers_live(s->rt) > 2; i++)
		usleep(1000);
	s->live_while_idle = fibers_live(s->rt);
	for (int i = 0; i < IDLE_CONNS; i++)
		echo_once(fd[i], "second");
	ck_assert_int_eq(runtime_drain(s->rt, 60000 * MS), 0);
	for (int i = 0; i < IDLE_CONNS; i++) {
		ck_assert_int_eq(read_some(fd[i], &b, 1), 0); /* closed */
		close(fd[i]);
	}
	return NULL;
}

/*
 * Run a new runtime serving sc (on 127.0.0.1) while talk(arg), a thread,
 * talks to it at *port, until the run ends; *rt is the runtime. Returns
 * the server, for its stats: the caller destroys it and the runtime.
 */
static struct runtime_server *serve_while(struct runtime **rt, struct runtime_serve_config *sc,
                                          uint16_t *port, void *(*talk)(void *), void *arg)
{
	struct runtime_server *srv;
	pthread_t th;

	ck_assert_int_eq(runtime_create(rt, NULL), 0);
	sc->host = "127.0.0.1";
	ck_assert_int_eq(runtime_serve(*rt, sc, &srv), 0);
	*port = runtime_server_port(srv);
	ck_assert_int_eq(pthread_create(&th, NULL, talk, arg), 0);
	ck_assert_int_eq(runtime_run(*rt), 0);
	pthread_join(th, NULL);
	return srv;
}

static void run_idle_server(struct idle_srv *s, void *(*clients)(void *))
{
	struct runtime_serve_config sc;
	struct runtime_server_stats st;

	runtime_serve_config_init(&sc);
	sc.handler = idle_echo;
	sc.arg = s;
	struct runtime_server *srv = serve_while(&s->rt, &sc, &s->port, clients, s);
	runtime_server_stats(srv, &st);
	ck_assert_uint_eq(st.live, 0);
	runtime_server_destroy(srv);
	runtime_destroy(s->rt);
}

START_TEST(test_idle_connections_hold_no_fiber_and_drain)
{
	static struct idle_srv s;

	run_idle_server(&s, idle_clients);
	ck_assert_uint_eq(s.live_while_idle, 2);
	ck_assert_int_eq(s.runs, 3 * IDLE_CONNS); /* two messages, the drain */
	ck_assert_int_eq(s.shutdowns, IDLE_CONNS);
	ck_assert_int_eq(s.timeouts + s.eofs, 0);
}
END_TEST

/* The idle timeout closes a connection that waits with no fiber; one
 * whose peer leaves reads its end of stream. */
static void *timeout_clients(void *arg)
{
	struct idle_srv *s = arg;
	int fd[2];
	char b;

	for (int i = 0; i < 2; i++) {
		fd[i] = client(s->port, (unsigned)i + 1);
		ck_assert_int_ge(fd[i], 0);
		echo_once(fd[i], "hi");
	}
	shutdown(fd[1], SHUT_WR);
	uint64_t t0 = runtime_now();
	ck_assert_int_eq(read_some(fd[0], &b, 1), 0);
	ck_assert_uint_ge(runtime_now() - t0, 30 * MS); /* 50 ms from its last byte */
	ck_assert_int_eq(read_some(fd[1], &b, 1), 0);
	close(fd[0]);
	close(fd[1]);
	runtime_drain(s->rt, 60000 * MS);
	return NULL;
}

START_TEST(test_idle_connection_times_out)
{
	static struct idle_srv s = { .idle_timeout = 50 * MS };

	run_idle_server(&s, timeout_clients);
	ck_assert_int_eq(s.timeouts, 1);
	ck_assert_int_eq(s.eofs, 1);
}
END_TEST

/* release_after: an idle-marked read quiet that long gives -EAGAIN (the
 * handler then waits with no fiber); a read not marked idle is never cut
 * short. */
struct release_srv {
	struct runtime *rt;
	uint16_t port;
	_Atomic int eagain;
	_Atomic uint64_t live_released;
	_Atomic int busy_ok;
	_Atomic int eagain_while_talking;
};

/* Echo; a message starting 'b' is followed by a second read that is not
 * marked idle, answered "ok" when it gets its byte. */
static void release_handler(struct runtime_conn *c, void *arg)
{
	struct release_srv *s = arg;
	char buf[64];

	for (;;) {
		runtime_conn_set_idle(c, 1);
		ssize_t n = runtime_conn_read(c, buf, sizeof(buf));
		runtime_conn_set_idle(c, 0);
		if (n == -EAGAIN) {
			atomic_fetch_add(&s->eagain, 1);
			if (runtime_conn_idle(c, NULL, NULL) == 0)
				return;
			continue;
		}
		if (n <= 0)
			return;
		if (buf[0] == 'b') {
			atomic_store(&s->busy_ok, runtime_conn_read(c, buf, sizeof(buf)) == 1);
			n = 2;
			memcpy(buf, "ok", 2);
		}
		ck_assert_int_eq(runtime_conn_write(c, buf, (size_t)n, NULL), n);
	}
}

static void *release_clients(void *arg)
{
	struct release_srv *s = arg;
	int fd[IDLE_CONNS];
	char b[4];

	for (int i = 0; i < IDLE_CONNS; i++) {
		fd[i] = client(s->port, (unsigned)i + 1);
		ck_assert_int_ge(fd[i], 0);
		echo_once(fd[i], "one");
	}
	for (int i = 0; i < 10000 && fibers_live(s->rt) > 2; i++)
		usleep(1000);
	s->live_released = fibers_live(s->rt);
	for (int i = 0; i < IDLE_CONNS; i++)
		echo_once(fd[i], "two");
	ck_assert_int_eq(write(fd[0], "b", 1), 1);
	usleep(150 * 1000); /* well past release_after: the busy read waits on */
	ck_assert_int_eq(write(fd[0], "!", 1), 1);
	ck_assert_int_eq(read_some(fd[0], b, 2), 2);
	ck_assert_int_eq(runtime_drain(s->rt, 60000 * MS), 0);
	for (int i = 0; i < IDLE_CONNS; i++) {
		ck_assert_int_eq(read_some(fd[i], b, 1), 0); /* closed */
		close(fd[i]);
	}
	return NULL;
}

/* Serve release_handler with release_after, while talk (a thread) talks
 * to it, until the run ends. */
static void run_release_server(struct release_srv *s, uint64_t release_after_ns,
                               void *(*talk)(void *))
{
	struct runtime_serve_config sc;

	runtime_serve_config_init(&sc);
	sc.handler = release_handler;
	sc.arg = s;
	sc.release_after_ns = release_after_ns;
	runtime_server_destroy(serve_while(&s->rt, &sc, &s->port, talk, s));
	runtime_destroy(s->rt);
}

START_TEST(test_release_after_frees_quiet_connections)
{
	static struct release_srv s;

	run_release_server(&s, 20 * MS, release_clients);
	ck_assert_uint_eq(s.live_released, 2); /* watcher and acceptor only */
	ck_assert_int_ge(s.eagain, IDLE_CONNS);
	ck_assert_int_eq(s.busy_ok, 1);
}
END_TEST

/* A connection that keeps talking stays on its core's watch list between
 * its reads, each read a new quiet spell: it is never released while its
 * messages come more often than release_after, and is once it goes
 * quiet; then its next message brings it back. */
static void *talking_client(void *arg)
{
	struct release_srv *s = arg;
	int fd = client(s->port, 1);
	char b;

	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < 50; i++) { /* five periods and more */
		echo_once(fd, "hi");
		usleep(10 * 1000);
	}
	s->eagain_while_talking = atomic_load(&s->eagain);
	for (int i = 0; i < 10000 && atomic_load(&s->eagain) == 0; i++)
		usleep(1000);
	echo_once(fd, "again");
	ck_assert_int_eq(runtime_drain(s->rt, 60000 * MS), 0);
	ck_assert_int_eq(read_some(fd, &b, 1), 0); /* closed */
	close(fd);
	return NULL;
}

START_TEST(test_release_after_spares_talking_connections)
{
	static struct release_srv s;

	run_release_server(&s, 100 * MS, talking_client);
	ck_assert_int_eq(s.eagain_while_talking, 0);
	ck_assert_int_ge(s.eagain, 1);
}
END_TEST

/* A connection of its own (no server): fn owns it; with a stream or with
 * plain recvs (a fiber polls then); misuse leaves fn unrun. */
struct own_conn {
	struct runtime_conn *c;
	int fd[2];
	_Atomic int runs;
	ssize_t got;
};

static void own_resumed(struct runtime_conn *c, void *arg)
{
	struct own_conn *o = arg;
	char buf[8];

	atomic_fetch_add(&o->runs, 1);
	o->got = runtime_conn_read(c, buf, sizeof(buf));
	ck_assert_int_eq(runtime_conn_close(c), 0);
	runtime_close(o->fd[0]);
}

static void never_resumed(struct runtime_conn *c, void *arg)
{
	(void)c;
	(void)arg;
	ck_abort_msg("fn ran after runtime_conn_idle failed");
}

static void own_main(void *arg)
{
	struct own_conn *o = arg;

	for (unsigned flags = 0; flags <= RUNTIME_CONN_PLAIN_RECV; flags++, o++) {
		tcp_pair(o->fd);
		ck_assert_int_eq(runtime_conn_open(&o->c, o->fd[1], flags), 0);
		ck_assert_int_eq(runtime_conn_idle(NULL, own_resumed, o), -EINVAL);
		ck_assert_int_eq(runtime_conn_idle(o->c, NULL, NULL), -EINVAL); /* not served */
		ck_assert_int_eq(runtime_conn_idle(o->c, own_resumed, o), 0);
		ck_assert_int_eq(runtime_conn_idle(o->c, never_resumed, NULL), -EBUSY);
		ck_assert_int_eq(runtime_conn_close(o->c), -EBUSY);
		runtime_sleep(20 * MS);
		ck_assert_int_eq(atomic_load(&o->runs), 0);
		ck_assert_int_eq(runtime_write(o->fd[0], "abc", 3), 3);
	}
}

START_TEST(test_idle_connection_of_its_own)
{
	static struct own_conn o[2];

	ck_assert_int_eq(run_fiber(NULL, own_main, o), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(atomic_load(&o[i].runs), 1);
		ck_assert_int_eq(o[i].got, 3);
	}
}
END_TEST

/* runtime_conn_wake ends a connection's idle wait at once, with a stream
 * or a fiber's poll: fn runs, its first read -EINTR, its next one waits
 * for bytes as usual; a connection that does not wait is -EALREADY. */
static void wake_resumed(struct runtime_conn *c, void *arg)
{
	struct own_conn *o = arg;
	char buf[8];

	atomic_fetch_add(&o->runs, 1);
	ck_assert_int_eq(runtime_conn_read(c, buf, sizeof(buf)), -EINTR);
	o->got = runtime_conn_read(c, buf, sizeof(buf));
	ck_assert_int_eq(runtime_conn_close(c), 0);
	runtime_close(o->fd[0]);
}

static void wake_main(void *arg)
{
	struct own_conn *o = arg;

	ck_assert_int_eq(runtime_conn_wake(NULL), -EINVAL);
	for (unsigned flags = 0; flags <= RUNTIME_CONN_PLAIN_RECV; flags++, o++) {
		tcp_pair(o->fd);
		ck_assert_int_eq(runtime_conn_open(&o->c, o->fd[1], flags), 0);
		ck_assert_int_eq(runtime_conn_wake(o->c), -EALREADY);
		ck_assert_int_eq(runtime_conn_idle(o->c, wake_resumed, o), 0);
		runtime_sleep(20 * MS);
		ck_assert_int_eq(atomic_load(&o->runs), 0);
		ck_assert_int_eq(runtime_conn_wake(o->c), 0);
		ck_assert_int_eq(runtime_conn_wake(o->c), -EALREADY);
		runtime_sleep(20 * MS);
		ck_assert_int_eq(atomic_load(&o->runs), 1);
		ck_assert_int_eq(runtime_write(o->fd[0], "abc", 3), 3);
	}
}

START_TEST(test_conn_wake_ends_an_idle_wait)
{
	static struct own_conn o[2];

	ck_assert_int_eq(run_fiber(NULL, wake_main, o), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(atomic_load(&o[i].runs), 1);
		ck_assert_int_eq(o[i].got, 3);
	}
}
END_TEST

/* ----------------------------------------------------------------- drain */

struct drain {
	struct runtime *rt;
	uint16_t port;
	uint64_t grace;
	int idle_fd, busy_fd;
	char busy_answer[16];
	ssize_t idle_read, busy_read, refused;
	int chan_rc, hooks[3], nhooks, late_hook, stubborn_rc;
	uint64_t begun;
};

/* Requests are one byte; an answer takes 100 ms. Idle while it waits for
 * the next request. */
static void request_handler(struct runtime_conn *c, void *arg)
{
	char b;
	(void)arg;
	for (;;) {
		runtime_conn_set_idle(c, 1);
		ssize_t n = runtime_conn_read(c, &b, 1);
		runtime_conn_set_idle(c, 0);
		if (n <= 0)
			return; /* -ESHUTDOWN in a drain */
		runtime_sleep(100 * MS);
		runtime_conn_write(c, "answer", 6, NULL);
	}
}

static void hook(void *arg)
{
	struct drain *d = arg;
	d->hooks[d->nhooks] = d->nhooks + 1;
	d->nhooks++;
}

static void late_hook(void *arg)
{
	((struct drain *)arg)->late_hook++;
}

static void drain_watch(void *arg)
{
	struct drain *d = arg;
	char b;
	d->chan_rc = runtime_chan_recv(runtime_drain_chan(d->rt), &b, -1);
}

/* A plain thread: an idle and a busy connection, then the drain (as a
 * signal would begin it, off the cores), then what the clients see. */
static void *drain_clients(void *arg)
{
	struct drain *d = arg;

	d->idle_fd = client(d->port, 0);
	d->busy_fd = client(d->port, 0);
	ck_assert_int_ge(d->idle_fd, 0);
	ck_assert_int_ge(d->busy_fd, 0);
	usleep(50 * 1000); /* both are being served, waiting for requests */
	ck_assert_int_eq(write(d->busy_fd, "q", 1), 1);
	usleep(20 * 1000); /* the busy one is in the middle of its request */
	d->begun = runtime_now();
	ck_assert_int_eq(runtime_drain(d->rt, d->grace), 0);
	ck_assert_int_eq(runtime_drain(d->rt, d->grace), -EALREADY);
	ck_assert_int_eq(runtime_on_drain(d->rt, late_hook, d), 0); /* runs at once */
	char b[16];
	d->idle_read = read_some(d->idle_fd, b, sizeof(b)); /* EOF: closed */
	d->busy_read = read_some(d->busy_fd, d->busy_answer, sizeof(d->busy_answer));
	int fd = client(d->port, 0);
	d->refused = fd < 0;
	if (fd >= 0)
		close(fd);
	close(d->idle_fd);
	close(d->busy_fd);
	return NULL;
}

/* An idle connection whose peer's bytes have come reads them in a drain,
 * with or without a receive stream; then -ESHUTDOWN. */
static void drain_reads_main(void *arg)
{
	(void)arg;
	for (unsigned flags = 0; flags <= RUNTIME_CONN_PLAIN_RECV; flags++) {
		struct runtime_conn *c;
		int fd[2];
		char b[4];

		tcp_pair(fd);
		ck_assert_int_eq(runtime_conn_open(&c, fd[1], flags), 0);
		ck_assert_int_eq(runtime_write(fd[0], "ab", 2), 2);
		if (!flags) /* the stream has taken them in */
			ck_assert_int_eq(runtime_conn_read(c, b, 1), 1);
		else
			runtime_sleep(20 * MS); /* they are in the socket */
		if (!runtime_draining(runtime_current()))
			ck_assert_int_eq(runtime_drain(runtime_current(), 60000 * MS), 0);
		runtime_conn_set_idle(c, 1);
		ck_assert_int_gt(runtime_conn_read(c, b, sizeof(b)), 0);
		ck_assert_int_eq(runtime_conn_read(c, b, sizeof(b)), -ESHUTDOWN);
		ck_assert_int_eq(runtime_conn_close(c), 0);
		runtime_close(fd[0]);
	}
}

START_TEST(test_drain_reads_what_has_come)
{
	ck_assert_int_eq(run_fiber(NULL, drain_reads_main, NULL), 0);
}
END_TEST

START_TEST(test_drain_closes_idle_lets_busy_finish)
{
	static struct drain d = { .grace = 60000 * MS };
	struct runtime_serve_config sc;
	struct runtime_server *srv;
	pthread_t th;

	ck_assert_int_eq(runtime_create(&d.rt, NULL), 0);
	runtime_serve_config_init(&sc);
	sc.host = "127.0.0.1";
	sc.handler = request_handler;
	ck_assert_int_eq(runtime_serve(d.rt, &sc, &srv), 0);
	d.port = runtime_server_port(srv);
	ck_assert_int_eq(runtime_on_drain(d.rt, hook, &d), 0);
	ck_assert_int_eq(runtime_on_drain(d.rt, hook, &d), 0);
	ck_assert_int_eq(runtime_spawn(d.rt, drain_watch, &d), 0);
	ck_assert_int_eq(runtime_draining(d.rt), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, drain_clients, &d), 0);
	ck_assert_int_eq(runtime_run(d.rt), 0);
	uint64_t ended = runtime_now();
	pthread_join(th, NULL);
	ck_assert_int_eq(runtime_draining(d.rt), 1);
	runtime_server_destroy(srv);
	runtime_destroy(d.rt);
	ck_assert_int_eq(d.idle_read, 0);
	ck_assert_int_eq(d.busy_read, 6);
	ck_assert_int_eq(memcmp(d.busy_answer, "answer", 6), 0);
	ck_assert_int_eq(d.refused, 1);
	ck_assert_int_eq(d.chan_rc, -EPIPE);
	ck_assert_int_eq(d.nhooks, 2);
	ck_assert_int_eq(d.hooks[0], 1);
	ck_assert_int_eq(d.hooks[1], 2);
	ck_assert_int_eq(d.late_hook, 1);
	/* The run ended with its last connection, not with the grace. */
	ck_assert_uint_lt(ended - d.begun, d.grace / 2);
}
END_TEST

/* A request that outlives the grace is cancelled when it ends. */
static void stubborn(void *arg)
{
	struct drain *d = arg;
	d->stubborn_rc = runtime_sleep(UINT64_MAX);
}

static void grace_main(void *arg)
{
	struct drain *d = arg;
	ck_assert_int_eq(runtime_spawn(d->rt, stubborn, d), 0);
	runtime_yield();
	d->begun = runtime_now();
	ck_assert_int_eq(runtime_drain(d->rt, d->grace), 0);
}

START_TEST(test_drain_cancels_what_outlives_the_grace)
{
	static struct drain d = { .grace = 200 * MS, .stubborn_rc = -999 };

	ck_assert_int_eq(runtime_create(&d.rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(d.rt, grace_main, &d), 0);
	ck_assert_int_eq(runtime_run(d.rt), 0);
	ck_assert_uint_ge(runtime_now() - d.begun, d.grace); /* never early */
	ck_assert_int_eq(d.stubborn_rc, -ECANCELED);
	ck_assert_int_eq(runtime_drain(d.rt, 0), -ESHUTDOWN);
	ck_assert_int_eq(runtime_drain(NULL, 0), -EINVAL);
	ck_assert_int_eq(runtime_on_drain(NULL, hook, NULL), -EINVAL);
	ck_assert_int_eq(runtime_on_drain(d.rt, NULL, NULL), -EINVAL);
	ck_assert_int_eq(runtime_draining(NULL), 0);
	ck_assert_ptr_null(runtime_drain_chan(NULL));
	runtime_destroy(d.rt);
}
END_TEST

/* SIGTERM drains; a second one shuts down at once. */
static void signals_main(void *arg)
{
	struct drain *d = arg;

	ck_assert_int_eq(runtime_spawn(d->rt, stubborn, d), 0);
	ck_assert_int_eq(kill(getpid(), SIGTERM), 0);
	for (int i = 0; i < 10000 && !runtime_draining(d->rt); i++)
		runtime_sleep(MS);
	d->hooks[0] = runtime_draining(d->rt);
	ck_assert_int_eq(kill(getpid(), SIGTERM), 0);
}

START_TEST(test_drain_on_signals_then_shutdown)
{
	static struct drain d = { .stubborn_rc = -999 };

	ck_assert_int_eq(runtime_create(&d.rt, NULL), 0);
	ck_assert_int_eq(runtime_drain_on_signals(d.rt, 60000 * MS), 0);
	ck_assert_int_eq(runtime_spawn(d.rt, signals_main, &d), 0);
	ck_assert_int_eq(runtime_run(d.rt), 0);
	runtime_destroy(d.rt);
	ck_assert_int_eq(d.hooks[0], 1);
	ck_assert_int_eq(d.stubborn_rc, -ECANCELED);
}
END_TEST

/* The later of the two calls decides: here, a shutdown at once. */
static void shutdown_signal_main(void *arg)
{
	struct drain *d = arg;

	ck_assert_int_eq(runtime_spawn(d->rt, stubborn, d), 0);
	runtime_yield();
	ck_assert_int_eq(kill(getpid(), SIGTERM), 0);
}

START_TEST(test_shutdown_on_signals_after_drain_on_signals)
{
	static struct drain d = { .stubborn_rc = -999 };

	ck_assert_int_eq(runtime_create(&d.rt, NULL), 0);
	ck_assert_int_eq(runtime_drain_on_signals(d.rt, 60000 * MS), 0);
	ck_assert_int_eq(runtime_shutdown_on_signals(d.rt), 0);
	ck_assert_int_eq(runtime_spawn(d.rt, shutdown_signal_main, &d), 0);
	ck_assert_int_eq(runtime_run(d.rt), 0);
	ck_assert_int_eq(runtime_draining(d.rt), 0); /* never drained */
	runtime_destroy(d.rt);
	ck_assert_int_eq(d.stubborn_rc, -ECANCELED);
}
END_TEST

/* --------------------------------------------------------------- restarts */

/* Without a restart under way a connection stays (runtime_conn_handover
 * says why), and runtime_restart has nobody to ask before
 * runtime_restart_enable. */
static void handover_idle_main(void *arg)
{
	struct runtime_conn *c;
	int fd[2];

	(void)arg;
	ck_assert_int_eq(runtime_conn_handover(NULL), -EINVAL);
	tcp_pair(fd);
	ck_assert_int_eq(runtime_conn_open(&c, fd[1], 0), 0);
	ck_assert_int_eq(runtime_conn_handover(c), -ENOTCONN);
	ck_assert_int_eq(write(fd[0], "x", 1), 1);
	char b;
	ck_assert_int_eq(runtime_conn_read(c, &b, 1), 1); /* still ours */
	ck_assert_int_eq(runtime_conn_close(c), 0);
	runtime_close(fd[0]);
}

START_TEST(test_conn_handover_without_a_restart)
{
	ck_assert_int_eq(runtime_restart(), -ENOTCONN);
	ck_assert_int_eq(run_fiber(NULL, handover_idle_main, NULL), 0);
}
END_TEST

static void drain_soon(void *arg)
{
	runtime_sleep(20 * MS);
	ck_assert_int_eq(runtime_drain(arg, 1000 * MS), 0);
}

/* runtime_restart_enable: bad input, once per process; its restarter
 * keeps the run going until the drain, and ends with it. A restart asked
 * for with no server to hand over is logged, and the process runs on. */
START_TEST(test_restart_enable_once_and_ends_at_the_drain)
{
	struct runtime_restart_config cfg;
	struct runtime *rt;

	runtime_restart_config_init(NULL);
	runtime_restart_config_init(&cfg);
	ck_assert_int_eq(cfg.signal, SIGUSR2);
	ck_assert_int_eq(runtime_restart_enable(NULL, &cfg), -EINVAL);
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	cfg.signal = -1;
	ck_assert_int_eq(runtime_restart_enable(rt, &cfg), -EINVAL);
	cfg.signal = 0; /* runtime_restart only */
	ck_assert_int_eq(runtime_restart_enable(rt, &cfg), 0);
	ck_assert_int_eq(runtime_restart_enable(rt, &cfg), -EBUSY);
	ck_assert_int_eq(runtime_restart(), 0); /* nothing to hand over */
	ck_assert_int_eq(runtime_spawn(rt, drain_soon, rt), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
}
END_TEST

static Suite *serve_suite(void)
{
	Suite *s = suite_create("serve");
	TCase *tc = tcase_create("serve");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_serve_spreads_over_cores_with_peer_addresses);
	tcase_add_test(tc, test_serve_ipv6);
	tcase_add_test(tc, test_serve_bad_input);
	tcase_add_test(tc, test_serve_refuses_a_port_held_elsewhere);
	tcase_add_test(tc, test_serve_caps_live_connections);
	suite_add_tcase(s, tc);
	tc = tcase_create("conn");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_conn_deadline_moved_by_another_fiber);
	tcase_add_test(tc, test_conn_deadline_is_the_earlier_of_the_callers_and_the_conns);
	tcase_add_test(tc, test_conn_misuse_gets_clear_errors);
	tcase_add_test(tc, test_conn_peer_of_a_unix_socket);
	tcase_add_test(tc, test_conn_pending_sees_unread_bytes_and_the_end);
	tcase_add_test(tc, test_conn_cancel_on_close);
	tcase_add_test(tc, test_fiber_expire_ends_one_wait);
	tcase_add_test(tc, test_conn_idle_timeout);
	tcase_add_test(tc, test_conn_finish_lets_the_last_answer_through);
	tcase_add_test(tc, test_idle_connections_hold_no_fiber_and_drain);
	tcase_add_test(tc, test_idle_connection_times_out);
	tcase_add_test(tc, test_idle_connection_of_its_own);
	tcase_add_test(tc, test_conn_wake_ends_an_idle_wait);
	tcase_add_test(tc, test_release_after_frees_quiet_connections);
	tcase_add_test(tc, test_release_after_spares_talking_connections);
	suite_add_tcase(s, tc);
	tc = tcase_create("drain");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_drain_closes_idle_lets_busy_finish);
	tcase_add_test(tc, test_drain_reads_what_has_come);
	tcase_add_test(tc, test_drain_cancels_what_outlives_the_grace);
	tcase_add_test(tc, test_drain_on_signals_then_shutdown);
	tcase_add_test(tc, test_shutdown_on_signals_after_drain_on_signals);
	suite_add_tcase(s, tc);
	tc = tcase_create("restart");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_conn_handover_without_a_restart);
	tcase_add_test(tc, test_restart_enable_once_and_ends_at_the_drain);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(serve_suite)
