/* SPDX-License-Identifier: MIT */
/*
 * check_engine.c - the epoll engine on its own (runtime_config.engine
 * RUNTIME_ENGINE_EPOLL; every other suite runs on it too when CI sets
 * RUNTIME_ENGINE=epoll): what only a readiness engine can get wrong.
 * Many connections parked on one core's epoll set at once; a peer that
 * resets while a reader or a writer is parked; sleeps shorter than a
 * millisecond that never end early; a cancelled accept racing an incoming
 * connection (no fd leaked); a reader that stops mid-buffer and must not
 * wait for an edge that will never come; and the engine's choice and
 * names.
 */
#include "testutil.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static struct runtime_config epoll_cfg(unsigned cores)
{
	struct runtime_config cfg;

	runtime_config_init(&cfg);
	cfg.engine = RUNTIME_ENGINE_EPOLL;
	cfg.cores = cores;
	return cfg;
}

/* ---------------------------------------------------------------- choice */

START_TEST(test_engine_choice_and_names)
{
	struct runtime_config cfg = epoll_cfg(1);
	struct runtime *rt;
	char why[512] = "";

	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	ck_assert_int_eq(runtime_engine(rt), RUNTIME_ENGINE_EPOLL);
	ck_assert_str_eq(runtime_engine_name(runtime_engine(rt)), "epoll");
	ck_assert_ptr_nonnull(strstr(runtime_engine_reason(rt), "asked for"));
	runtime_destroy(rt);
	ck_assert_str_eq(runtime_engine_name(RUNTIME_ENGINE_IO_URING), "io_uring");
	ck_assert_str_eq(runtime_engine_name(RUNTIME_ENGINE_AUTO), "auto");
	ck_assert_str_eq(runtime_engine_name((enum runtime_engine)77), "unknown");
	ck_assert_int_eq(runtime_engine(NULL), RUNTIME_ENGINE_AUTO);
	ck_assert_str_eq(runtime_engine_reason(NULL), "");
	cfg.engine = (enum runtime_engine)3;
	ck_assert_int_eq(runtime_create(&rt, &cfg), -EINVAL);
	/* This machine allows io_uring (the other suites need it): the check
	 * says so, and a NULL buffer is fine. */
	int rc = runtime_io_uring_check(NULL, why, sizeof(why));
	ck_assert_msg(rc == 0 || strstr(why, "io_uring"), "check %d: %s", rc, why);
	ck_assert_int_eq(runtime_io_uring_check(NULL, NULL, 0), rc);
}
END_TEST

START_TEST(test_engine_bad_environment_is_refused)
{
	struct runtime *rt;

	setenv("RUNTIME_ENGINE", "kqueue", 1);
	ck_assert_int_eq(runtime_create(&rt, NULL), -EINVAL);
	setenv("RUNTIME_ENGINE", "epoll", 1);
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_engine(rt), RUNTIME_ENGINE_EPOLL);
	ck_assert_ptr_nonnull(strstr(runtime_engine_reason(rt), "RUNTIME_ENGINE=epoll"));
	runtime_destroy(rt);
	unsetenv("RUNTIME_ENGINE");
}
END_TEST

/* ------------------------------------------------------ many connections */

#define MANY 2000 /* each a pair: 4,000 fds in this one process */

struct many {
	int fds[MANY][2];
	int done, bad;
	struct runtime_waitgroup wg;
};

static void many_echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[16];
	ssize_t n = runtime_recv(fd, buf, sizeof(buf), 0); /* all park at once */

	if (n > 0)
		runtime_send_all(fd, buf, (size_t)n, NULL);
}

static void many_main(void *p)
{
	struct many *m = p;
	char buf[8];

	for (int i = 0; i < MANY; i++) {
		tcp_pair(m->fds[i]);
		ck_assert_int_eq(runtime_spawn(runtime_current(), many_echo,
		                               (void *)(intptr_t)m->fds[i][1]), 0);
	}
	runtime_yield(); /* every echo fiber is parked on its socket now */
	for (int i = MANY - 1; i >= 0; i--)
		ck_assert_int_eq(runtime_send(m->fds[i][0], "12345", 5, 0), 5);
	for (int i = 0; i < MANY; i++) {
		ssize_t n = runtime_read_exact(m->fds[i][0], buf, 5, NULL);
		m->done += n == 5 && !memcmp(buf, "12345", 5);
	}
	for (int i = 0; i < MANY; i++) {
		runtime_close(m->fds[i][0]);
		runtime_close(m->fds[i][1]);
	}
}

START_TEST(test_engine_thousands_parked_at_once)
{
	static struct many m;
	struct runtime_config cfg = epoll_cfg(1);
	struct rlimit rl;
	int before = count_fds();

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	ck_assert_msg(rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 2 * MANY + 100,
	              "fd limit %ld is below what this test needs", (long)rl.rlim_cur);
	ck_assert_int_eq(run_fiber(&cfg, many_main, &m), 0);
	ck_assert_int_eq(m.done, MANY);
	ck_assert_int_eq(count_fds(), before);
}
END_TEST

/* -------------------------------------------------------------- resets */

struct reset {
	int fd[2];
	ssize_t read_rc, write_rc;
};

static void *parked_reader(void *arg)
{
	struct reset *r = arg;
	char c;

	r->read_rc = runtime_recv(r->fd[1], &c, 1, 0);
	return NULL;
}

static void *parked_writer(void *arg)
{
	struct reset *r = arg;
	static char big[1 << 22];

	r->write_rc = runtime_send_all(r->fd[1], big, sizeof(big), NULL);
	return NULL;
}

/* The peer closes with SO_LINGER 0 (an RST) while fd[1] is parked. */
static void reset_peer(struct reset *r, void *(*parked)(void *))
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	tcp_pair(r->fd);
	struct runtime_fiber *f = start(parked, r);
	runtime_sleep(20 * MS); /* it is parked: nothing to read, or no room */
	ck_assert_int_eq(setsockopt(r->fd[0], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	ck_assert_int_eq(close(r->fd[0]), 0);
	join(f);
	runtime_close(r->fd[1]);
}

static void reset_main(void *p)
{
	struct reset *r = p;

	reset_peer(&r[0], parked_reader);
	reset_peer(&r[1], parked_writer);
}

START_TEST(test_engine_peer_reset_while_parked)
{
	struct reset r[2] = { { .read_rc = -999, .write_rc = -999 },
	                      { .read_rc = -999, .write_rc = -999 } };
	struct runtime_config cfg = epoll_cfg(1);

	ck_assert_int_eq(run_fiber(&cfg, reset_main, r), 0);
	ck_assert_int_eq(r[0].read_rc, -ECONNRESET);
	ck_assert_msg(r[1].write_rc == -ECONNRESET || r[1].write_rc == -EPIPE,
	              "writer got %zd", r[1].write_rc);
}
END_TEST

/* ------------------------------------------------------------------ time */

/* Sleeps shorter than a millisecond never end early, whether the engine
 * waits in nanoseconds (epoll_pwait2) or, where that is missing, in whole
 * milliseconds rounded up. How long they take is a figure, not a
 * behaviour: make bench-micro's sleep_20us_epoll_ns. */
#define SHORT_SLEEPS 200
#define SHORT_NS (20 * 1000u)

static void short_sleeps_main(void *p)
{
	int *early = p;

	for (int i = 0; i < SHORT_SLEEPS; i++) {
		uint64_t a = runtime_now();
		ck_assert_int_eq(runtime_sleep(SHORT_NS), 0);
		*early += runtime_now() - a < SHORT_NS;
	}
}

START_TEST(test_engine_short_sleeps_never_end_early)
{
	struct runtime_config cfg = epoll_cfg(1);
	int early = 0;

	ck_assert_int_eq(run_fiber(&cfg, short_sleeps_main, &early), 0);
	ck_assert_int_eq(early, 0);
}
END_TEST

/* --------------------------------------------------- a cancelled accept */

#define RACES 200

struct race {
	int lfd;
	uint16_t port;
	int accepted, cancelled, clients[RACES];
};

static void *racing_accept(void *arg)
{
	struct race *r = arg;
	return (void *)(intptr_t)runtime_accept(r->lfd, NULL, NULL, SOCK_CLOEXEC);
}

/* An acceptor parks on an empty backlog; a client connects and the
 * acceptor is cancelled in the same breath (at once, or after the loop
 * has seen the readiness). Either it took the connection (an fd to close)
 * or it says -ECANCELED and the connection waits in the backlog for the
 * next accept: none is lost, none leaked. */
static void race_main(void *p)
{
	struct race *r = p;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(r->port),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	for (int i = 0; i < RACES; i++) {
		struct runtime_fiber *f = start(racing_accept, r);
		runtime_yield(); /* parked in accept */
		r->clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		int rc = connect(r->clients[i], (struct sockaddr *)&to, sizeof(to));
		ck_assert(rc == 0 || errno == EINPROGRESS);
		for (int turns = i % 3; turns > 0; turns--)
			runtime_sleep(0); /* a loop turn: the readiness comes first */
		int cr = runtime_fiber_cancel(f); /* -ESRCH: it accepted and ended */
		ck_assert_msg(cr == 0 || cr == -ESRCH, "cancel gave %d", cr);
		int fd = (int)join(f);
		ck_assert_msg(fd >= 0 || fd == -ECANCELED, "accept gave %d", fd);
		if (fd < 0) { /* the connection is still there, for the next accept */
			r->cancelled++;
			fd = runtime_accept(r->lfd, NULL, NULL, SOCK_CLOEXEC);
			ck_assert_int_ge(fd, 0);
		} else {
			r->accepted++;
		}
		runtime_close(fd);
	}
	for (int i = 0; i < RACES; i++)
		close(r->clients[i]);
}

START_TEST(test_engine_cancelled_accept_leaks_nothing)
{
	static struct race r;
	struct runtime_config cfg = epoll_cfg(1);
	int before = count_fds();

	r.lfd = runtime_tcp_listen("127.0.0.1", 0, RACES + 16, 0);
	ck_assert_int_ge(r.lfd, 0);
	r.port = bound_port(r.lfd);
	ck_assert_int_eq(run_fiber(&cfg, race_main, &r), 0);
	ck_assert_int_eq(r.accepted + r.cancelled, RACES);
	close(r.lfd);
	ck_assert_int_eq(count_fds(), before);
	fprintf(stderr, "note: %d accepts won the race, %d were cancelled\n", r.accepted,
	        r.cancelled);
}
END_TEST

/* --------------------------------------------------- stops mid-buffer */

#define BULK (256 * 1024)

struct midway {
	int fd[2];
	size_t got_plain, got_stream;
	bool in_order;
};

static void *bulk_write(void *arg)
{
	int fd = *(int *)arg;
	char *buf = malloc(BULK);

	for (size_t i = 0; i < BULK; i++)
		buf[i] = (char)(i % 251);
	ck_assert_int_eq(runtime_send_all(fd, buf, BULK, NULL), BULK);
	free(buf);
	return NULL;
}

/* Read len bytes in reads of at most chunk, pausing between them: data is
 * left in the socket, so no new edge announces it; the next read must
 * find it all the same. A hang would be the deadline's -ETIMEDOUT. */
static size_t read_with_pauses(struct runtime_stream *s, int fd, size_t chunk, bool *ok)
{
	char buf[4096];
	size_t got = 0;

	while (got < BULK) {
		ssize_t n = s ? runtime_stream_recv(s, buf, chunk) : runtime_recv(fd, buf, chunk, 0);
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n; i++)
			*ok = *ok && buf[i] == (char)((got + (size_t)i) % 251);
		got += (size_t)n;
		if (got % (16 * 1024) < chunk)
			runtime_sleep(MS); /* stop mid-buffer a while */
	}
	return got;
}

static void midway_main(void *p)
{
	struct midway *m = p;
	struct runtime_stream *s;

	runtime_deadline_set(runtime_now() + 60000 * MS);
	tcp_pair(m->fd);
	struct runtime_fiber *w = start(bulk_write, &m->fd[0]);
	m->got_plain = read_with_pauses(NULL, m->fd[1], 1000, &m->in_order);
	join(w);
	ck_assert_int_eq(runtime_stream_open(&s, m->fd[1]), 0);
	w = start(bulk_write, &m->fd[0]);
	m->got_stream = read_with_pauses(s, m->fd[1], 777, &m->in_order);
	join(w);
	runtime_stream_close(s);
	runtime_close(m->fd[0]);
	runtime_close(m->fd[1]);
}

START_TEST(test_engine_reader_stopping_mid_buffer_gets_the_rest)
{
	struct midway m = { .in_order = true };
	struct runtime_config cfg = epoll_cfg(1);

	ck_assert_int_eq(run_fiber(&cfg, midway_main, &m), 0);
	ck_assert_uint_eq(m.got_plain, BULK);
	ck_assert_uint_eq(m.got_stream, BULK);
	ck_assert(m.in_order);
}
END_TEST

/* The last bytes and the peer's FIN come with one edge: a short read must
 * not be taken for "drained, wait for the next edge" then - none comes. */
static void last_words_main(void *p)
{
	int *ok = p;

	for (int i = 0; i < 50; i++) {
		int sv[2];
		struct runtime_stream *s;
		char buf[8];
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		ck_assert_int_eq(runtime_stream_open(&s, sv[0]), 0);
		if (i % 2) /* armed before the bytes come, or after */
			ck_assert_int_eq(runtime_poll(sv[0], POLLIN, 0), -ETIMEDOUT);
		ck_assert_int_eq(write(sv[1], "xy", 2), 2);
		ck_assert_int_eq(close(sv[1]), 0);
		runtime_deadline_set(runtime_now() + 10000 * MS); /* a hang fails */
		ssize_t n = runtime_stream_recv(s, buf, sizeof(buf));
		ssize_t end = runtime_stream_recv(s, buf + 2, sizeof(buf) - 2);
		runtime_deadline_set(0);
		*ok += n == 2 && !memcmp(buf, "xy", 2) && end == 0;
		runtime_stream_close(s);
		runtime_close(sv[0]);
	}
}

START_TEST(test_engine_stream_reads_last_bytes_and_the_end)
{
	int ok = 0;
	struct runtime_config cfg = epoll_cfg(1);

	ck_assert_int_eq(run_fiber(&cfg, last_words_main, &ok), 0);
	ck_assert_int_eq(ok, 50);
}
END_TEST

static Suite *engine_suite(void)
{
	Suite *s = suite_create("engine");
	TCase *tc = tcase_create("epoll");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_engine_choice_and_names);
	tcase_add_test(tc, test_engine_bad_environment_is_refused);
	tcase_add_test(tc, test_engine_thousands_parked_at_once);
	tcase_add_test(tc, test_engine_peer_reset_while_parked);
	tcase_add_test(tc, test_engine_short_sleeps_never_end_early);
	tcase_add_test(tc, test_engine_cancelled_accept_leaks_nothing);
	tcase_add_test(tc, test_engine_reader_stopping_mid_buffer_gets_the_rest);
	tcase_add_test(tc, test_engine_stream_reads_last_bytes_and_the_end);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(engine_suite)
