/* SPDX-License-Identifier: MIT */
/*
 * check_systemd.c - running under systemd, without systemd: a test
 * notify socket (a unix datagram socket the test binds, NOTIFY_SOCKET
 * naming it) receives runtime_notify's states, READY=1 once every core
 * of a server listens, STOPPING=1 at a drain and WATCHDOG=1 while every
 * core turns - and no more while one is stalled; socket activation
 * (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES) with listening sockets put at
 * fds 3.. in a forked child (Check's own fds stay out of it), and the
 * errors for bad values. Timing bounds are generous: TSan, 2 loaded cores.
 */
#include "testutil.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* --------------------------------------------------------- notify socket */

struct notify_sock {
	int fd;
	char dir[64];
	char path[96];
};

/* A datagram socket bound to a fresh path (or an abstract name), named
 * by NOTIFY_SOCKET. */
static void notify_open(struct notify_sock *n, bool abstract)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len;

	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(n->fd, 0);
	if (abstract) {
		snprintf(n->path, sizeof(n->path), "@runtime-check-%d-%ld", getpid(),
		         (long)time(NULL));
		n->dir[0] = '\0';
		memcpy(sa.sun_path + 1, n->path + 1, strlen(n->path) - 1);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(n->path));
	} else {
		strcpy(n->dir, "/tmp/runtime-notify-XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(n->dir));
		snprintf(n->path, sizeof(n->path), "%s/notify", n->dir);
		strcpy(sa.sun_path, n->path);
		len = sizeof(sa);
	}
	ck_assert_int_eq(bind(n->fd, (struct sockaddr *)&sa, len), 0);
	ck_assert_int_eq(setenv("NOTIFY_SOCKET", n->path, 1), 0);
}

static void notify_close(struct notify_sock *n)
{
	close(n->fd);
	if (n->dir[0]) {
		unlink(n->path);
		rmdir(n->dir);
	}
	unsetenv("NOTIFY_SOCKET");
}

/* The next datagram within timeout_ms into buf (NUL-terminated): true. */
static bool notify_next(struct notify_sock *n, char *buf, size_t cap, int timeout_ms)
{
	struct pollfd p = { .fd = n->fd, .events = POLLIN };

	if (poll(&p, 1, timeout_ms) != 1)
		return false;
	ssize_t r = recv(n->fd, buf, cap - 1, 0);
	if (r < 0)
		return false;
	buf[r] = '\0';
	return true;
}

/* Wait (timeout_ms at most) for a datagram equal to want; false if none. */
static bool notify_wait(struct notify_sock *n, const char *want, int timeout_ms)
{
	char buf[256];
	uint64_t end = runtime_now() + (uint64_t)timeout_ms * MS;

	while (runtime_now() < end)
		if (notify_next(n, buf, sizeof(buf), 100) && !strcmp(buf, want))
			return true;
	return false;
}

/* How many datagrams equal to want come within ms. */
static unsigned notify_count(struct notify_sock *n, const char *want, int ms)
{
	char buf[256];
	unsigned count = 0;
	uint64_t end = runtime_now() + (uint64_t)ms * MS;

	while (runtime_now() < end)
		if (notify_next(n, buf, sizeof(buf), 20) && !strcmp(buf, want))
			count++;
	return count;
}

START_TEST(test_notify_sends_to_a_path_and_an_abstract_name)
{
	struct notify_sock n;
	char buf[256];

	for (int abstract = 0; abstract < 2; abstract++) {
		notify_open(&n, abstract);
		ck_assert_int_eq(runtime_notify("STATUS=serving\nREADY=1"), 1);
		ck_assert(notify_next(&n, buf, sizeof(buf), 10000));
		ck_assert_str_eq(buf, "STATUS=serving\nREADY=1");
		notify_close(&n);
	}
	ck_assert_int_eq(runtime_notify("READY=1"), 0); /* unset: nobody to tell */
	setenv("NOTIFY_SOCKET", "", 1);
	ck_assert_int_eq(runtime_notify("READY=1"), 0);
}
END_TEST

START_TEST(test_notify_bad_values_get_clear_errors)
{
	ck_assert_int_eq(runtime_notify(NULL), -EINVAL);
	ck_assert_int_eq(runtime_notify(""), -EINVAL);
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	ck_assert_int_eq(runtime_notify("READY=1"), -EINVAL);
	setenv("NOTIFY_SOCKET", "@", 1);
	ck_assert_int_eq(runtime_notify("READY=1"), -EINVAL);
	char longname[200];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[0] = '/';
	longname[sizeof(longname) - 1] = '\0';
	setenv("NOTIFY_SOCKET", longname, 1);
	ck_assert_int_eq(runtime_notify("READY=1"), -EINVAL);
	setenv("NOTIFY_SOCKET", "/nonexistent/runtime-notify", 1);
	ck_assert_int_eq(runtime_notify("READY=1"), -ENOENT); /* nobody listens */
	unsetenv("NOTIFY_SOCKET");
}
END_TEST

/* ------------------------------------------------ READY=1 and STOPPING=1 */

static void say_ok(struct runtime_conn *conn, void *arg)
{
	(void)arg;
	runtime_conn_write(conn, "ok", 2, NULL);
}

struct lifecycle {
	struct runtime *rt;
	struct notify_sock *n;
	bool ready, stopping;
};

/* Waits for READY=1, drains, waits for STOPPING=1. */
static void *lifecycle_thread(void *arg)
{
	struct lifecycle *l = arg;

	l->ready = notify_wait(l->n, "READY=1", 30000);
	runtime_drain(l->rt, 5000 * MS);
	l->stopping = notify_wait(l->n, "STOPPING=1", 30000);
	return NULL;
}

START_TEST(test_serve_says_ready_then_stopping)
{
	struct notify_sock n;
	struct runtime_config cfg;
	struct runtime_serve_config sc;
	struct runtime_server *srv;
	struct lifecycle l = { .n = &n };
	pthread_t t;

	notify_open(&n, false);
	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(runtime_create(&l.rt, &cfg), 0);
	runtime_serve_config_init(&sc);
	ck_assert_int_eq(sc.notify_ready, 1);
	sc.host = "127.0.0.1";
	sc.handler = say_ok;
	ck_assert_int_eq(runtime_serve(l.rt, &sc, &srv), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, lifecycle_thread, &l), 0);
	ck_assert_int_eq(runtime_run(l.rt), 0);
	pthread_join(t, NULL);
	ck_assert(l.ready);
	ck_assert(l.stopping);
	runtime_server_destroy(srv);
	runtime_destroy(l.rt);
	notify_close(&n);
}
END_TEST

/* ------------------------------------------------------------- watchdog */

struct stall {
	_Atomic bool stalling, release, finished;
};

/* Core 1: yields for a while, then spins without yielding until told. */
static void staller(void *arg)
{
	struct stall *s = arg;
	uint64_t give_up = runtime_now() + 60000 * MS;

	runtime_sleep(300 * MS);
	atomic_store(&s->stalling, true);
	while (!atomic_load(&s->release) && runtime_now() < give_up)
		; /* a stuck core: no yield, no loop turn */
}

/* Core 0: keeps the run going, yielding, until the test ends. */
static void keeper(void *arg)
{
	struct stall *s = arg;

	while (!atomic_load(&s->finished))
		runtime_sleep(10 * MS);
}

struct watch_result {
	struct notify_sock *n;
	struct stall *s;
	unsigned before, during, after;
};

#define WATCHDOG_PERIOD_MS 100 /* WATCHDOG_USEC=200000 */

static void *watch_thread(void *arg)
{
	struct watch_result *w = arg;
	uint64_t end = runtime_now() + 60000 * MS;

	w->before = notify_wait(w->n, "WATCHDOG=1", 30000);
	while (!atomic_load(&w->s->stalling) && runtime_now() < end)
		notify_count(w->n, "WATCHDOG=1", 20);
	notify_count(w->n, "WATCHDOG=1", 3 * WATCHDOG_PERIOD_MS); /* one may be on its way */
	w->during = notify_count(w->n, "WATCHDOG=1", 10 * WATCHDOG_PERIOD_MS);
	atomic_store(&w->s->release, true);
	w->after = notify_wait(w->n, "WATCHDOG=1", 30000);
	atomic_store(&w->s->finished, true);
	return NULL;
}

START_TEST(test_watchdog_pings_stop_while_a_core_is_stalled)
{
	struct notify_sock n;
	struct runtime_config cfg;
	struct runtime *rt;
	struct stall s = { 0 };
	struct watch_result w = { .n = &n, .s = &s };
	pthread_t t;

	notify_open(&n, false);
	setenv("WATCHDOG_USEC", "200000", 1);
	unsetenv("WATCHDOG_PID");
	runtime_config_init(&cfg);
	cfg.cores = 2;
	cfg.stall_ms = 0; /* the detector off: the stall is the point */
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	ck_assert_int_eq(runtime_spawn_on(rt, 0, keeper, &s), 0);
	ck_assert_int_eq(runtime_spawn_on(rt, 1, staller, &s), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, watch_thread, &w), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	pthread_join(t, NULL);
	runtime_destroy(rt);
	notify_close(&n);
	unsetenv("WATCHDOG_USEC");
	ck_assert_uint_eq(w.before, 1);
	ck_assert_uint_eq(w.during, 0);
	ck_assert_uint_eq(w.after, 1);
}
END_TEST

static void sleeper(void *arg)
{
	(void)arg;
	runtime_sleep(1000 * MS);
}

/* Idle cores are alive; another process's watchdog, or a bad value,
 * sends nothing (and the run goes on). */
START_TEST(test_watchdog_pings_idle_cores_and_only_its_own)
{
	struct notify_sock n;
	struct runtime_config cfg;
	struct runtime *rt;
	char pid[32];
	const char *pids[] = { NULL, "1", pid };
	const char *usecs[] = { "200000", "200000", "200000", "nonsense" };

	snprintf(pid, sizeof(pid), "%d", getpid());
	notify_open(&n, false);
	runtime_config_init(&cfg);
	cfg.cores = 2;
	for (int i = 0; i < 4; i++) {
		setenv("WATCHDOG_USEC", usecs[i], 1);
		if (i < 3 && pids[i])
			setenv("WATCHDOG_PID", pids[i], 1);
		else
			unsetenv("WATCHDOG_PID");
		ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
		ck_assert_int_eq(runtime_spawn_on(rt, 1, sleeper, NULL), 0);
		ck_assert_int_eq(runtime_run(rt), 0);
		runtime_destroy(rt);
		unsigned got = notify_count(&n, "WATCHDOG=1", 50);
		if (i == 1 || i == 3)
			ck_assert_uint_eq(got, 0);
		else
			ck_assert_uint_ge(got, 1); /* about 10 in the second */
	}
	notify_close(&n);
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}
END_TEST

static struct runtime_fiber *joiner_a;

static void *joins_a(void *arg)
{
	(void)arg;
	runtime_fiber_join(joiner_a, NULL); /* A joins B, B joins A */
	return NULL;
}

static void *joins_b(void *arg)
{
	struct runtime_fiber *b;

	(void)arg;
	if (runtime_fiber_spawn(runtime_current(), &b, joins_a, NULL) == 0)
		runtime_fiber_join(b, NULL);
	return NULL;
}

/* The watchdog's timer is nobody's work: a lone core whose fiber waits
 * for nothing is still found deadlocked, not kept pinging. */
START_TEST(test_watchdog_leaves_a_deadlock_found)
{
	struct notify_sock n;
	struct runtime *rt;

	notify_open(&n, false);
	setenv("WATCHDOG_USEC", "200000", 1);
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_fiber_spawn(rt, &joiner_a, joins_b, NULL), 0);
	ck_assert_int_eq(runtime_run(rt), -EDEADLK);
	runtime_destroy(rt);
	notify_close(&n);
	unsetenv("WATCHDOG_USEC");
}
END_TEST

/* ---------------------------------------------------- socket activation */

/* A listening TCP socket on 127.0.0.1 (a free port), or a datagram or
 * unlistening one, at exactly fd at. */
enum sock_kind { LISTENING, UNLISTENING, DATAGRAM };

static int socket_at(int at, enum sock_kind kind)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, kind == DATAGRAM ? SOCK_DGRAM : SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    (kind == LISTENING && listen(fd, 64) < 0))
		return -1;
	if (fd != at && (dup2(fd, at) < 0 || close(fd) < 0))
		return -1;
	return at;
}

/* A socket's port, without Check's asserts: Check talks to its parent on
 * an fd that the children below replace. */
static uint16_t port_of(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	return getsockname(fd, (struct sockaddr *)&sa, &len) == 0 ? ntohs(sa.sin_port) : 0;
}

static void activation_env(unsigned nfds, const char *names)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%d", getpid());
	setenv("LISTEN_PID", buf, 1);
	snprintf(buf, sizeof(buf), "%u", nfds);
	setenv("LISTEN_FDS", buf, 1);
	if (names)
		setenv("LISTEN_FDNAMES", names, 1);
	else
		unsetenv("LISTEN_FDNAMES");
}

static bool env_gone(void)
{
	return !getenv("LISTEN_PID") && !getenv("LISTEN_FDS") && !getenv("LISTEN_FDNAMES");
}

/* Run fn in a forked child (its fds 3.. are the test's to take); its
 * exit status: 0 when every check in it held, else the failed line. */
static int in_child(int (*fn)(void))
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(fn());
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "the child died of signal %d", WTERMSIG(status));
	return WEXITSTATUS(status);
}

#define CHILD_CHECK(cond) \
	do {              \
		if (!(cond)) \
			return __LINE__ % 250 + 1; \
	} while (0)

static int bad_values_child(void)
{
	close(3);
	close(4);
	setenv("LISTEN_PID", "abc", 1); /* not a pid */
	setenv("LISTEN_FDS", "1", 1);
	CHILD_CHECK(runtime_listen_fds() == -EINVAL && env_gone());
	activation_env(1, NULL);
	setenv("LISTEN_FDS", "1x", 1);
	CHILD_CHECK(runtime_listen_fds() == -EINVAL && env_gone());
	activation_env(1, NULL);
	setenv("LISTEN_FDS", "100000", 1);
	CHILD_CHECK(runtime_listen_fds() == -EINVAL);
	activation_env(1, NULL); /* fd 3 is not open */
	CHILD_CHECK(runtime_listen_fds() == -EBADF);
	CHILD_CHECK(socket_at(3, DATAGRAM) == 3);
	activation_env(1, NULL);
	CHILD_CHECK(runtime_listen_fds() == -EINVAL);
	CHILD_CHECK(socket_at(3, UNLISTENING) == 3);
	activation_env(1, NULL);
	CHILD_CHECK(runtime_listen_fds() == -EINVAL);
	CHILD_CHECK(socket_at(3, LISTENING) == 3);
	activation_env(1, "a:b"); /* more names than fds */
	CHILD_CHECK(runtime_listen_fds() == -EINVAL);
	activation_env(1, NULL);
	setenv("LISTEN_PID", "1", 1); /* another process's */
	CHILD_CHECK(runtime_listen_fds() == 0 && env_gone());
	activation_env(1, NULL); /* and runtime_serve says so too */
	setenv("LISTEN_FDS", "-1", 1);
	struct runtime *rt;
	struct runtime_server *srv = (void *)1;
	struct runtime_serve_config sc;
	CHILD_CHECK(runtime_create(&rt, NULL) == 0);
	runtime_serve_config_init(&sc);
	sc.handler = say_ok;
	CHILD_CHECK(runtime_serve(rt, &sc, &srv) == -EINVAL && !srv);
	activation_env(1, "web");
	sc.listen_name = "other";
	CHILD_CHECK(runtime_serve(rt, &sc, &srv) == -ENOENT && !srv);
	runtime_destroy(rt);
	return 0;
}

START_TEST(test_listen_fds_bad_values_get_clear_errors)
{
	ck_assert_int_eq(in_child(bad_values_child), 0);
}
END_TEST

static int taken_child(void)
{
	CHILD_CHECK(socket_at(3, LISTENING) == 3 && socket_at(4, LISTENING) == 4);
	fcntl(3, F_SETFD, 0);
	activation_env(2, "http:metrics");
	CHILD_CHECK(runtime_listen_fds() == 2);
	CHILD_CHECK(env_gone());
	CHILD_CHECK(fcntl(3, F_GETFD) == FD_CLOEXEC && fcntl(4, F_GETFD) == FD_CLOEXEC);
	CHILD_CHECK(runtime_listen_fds() == 2); /* the same, kept */
	return 0;
}

START_TEST(test_listen_fds_takes_and_unsets)
{
	ck_assert_int_eq(in_child(taken_child), 0);
}
END_TEST

/* A client: connect to port, read the answer into buf. */
static bool ask(uint16_t port, char *buf, size_t cap)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t r = -1;

	if (fd >= 0 && connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0 &&
	    poll(&p, 1, 30000) == 1)
		r = read(fd, buf, cap - 1);
	if (fd >= 0)
		close(fd);
	if (r < 0)
		return false;
	buf[r] = '\0';
	return true;
}

struct served {
	struct runtime *rt;
	uint16_t port;
	int answers;
};

static void *clients_then_drain(void *arg)
{
	struct served *s = arg;
	char buf[16];

	for (int i = 0; i < 8; i++)
		s->answers += ask(s->port, buf, sizeof(buf)) && !strcmp(buf, "ok");
	runtime_drain(s->rt, 5000 * MS);
	return NULL;
}

/* runtime_serve on the socket named "web" (fd 4), shared by both cores;
 * a drain leaves the manager's copy listening. */
static int serve_child(void)
{
	struct runtime_config cfg;
	struct runtime_serve_config sc;
	struct runtime_server *srv;
	struct served s = { 0 };
	pthread_t t;

	CHILD_CHECK(socket_at(3, LISTENING) == 3 && socket_at(4, LISTENING) == 4);
	int manager = dup(4);
	uint16_t port = port_of(4);
	activation_env(2, "other:web");
	runtime_config_init(&cfg);
	cfg.cores = 2;
	CHILD_CHECK(runtime_create(&s.rt, &cfg) == 0);
	runtime_serve_config_init(&sc);
	sc.listen_name = "web";
	sc.port = 1; /* ignored: the name decides */
	sc.handler = say_ok;
	CHILD_CHECK(runtime_serve(s.rt, &sc, &srv) == 0);
	CHILD_CHECK(runtime_server_port(srv) == port);
	s.port = port;
	CHILD_CHECK(pthread_create(&t, NULL, clients_then_drain, &s) == 0);
	CHILD_CHECK(runtime_run(s.rt) == 0);
	pthread_join(t, NULL);
	CHILD_CHECK(s.answers == 8);
	runtime_server_destroy(srv);
	runtime_destroy(s.rt);
	int listening = 0;
	socklen_t len = sizeof(listening);
	CHILD_CHECK(getsockopt(manager, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0);
	CHILD_CHECK(listening == 1);
	CHILD_CHECK(fcntl(4, F_GETFD) < 0); /* the server's, closed with it */
	return 0;
}

START_TEST(test_serve_on_an_inherited_socket_by_name)
{
	ck_assert_int_eq(in_child(serve_child), 0);
}
END_TEST

/* Without a name: the inherited socket of the config's port; a port
 * none has binds as usual. */
static int by_port_child(void)
{
	struct runtime *rt;
	struct runtime_serve_config sc;
	struct runtime_server *a, *b;

	CHILD_CHECK(socket_at(3, LISTENING) == 3);
	uint16_t port = port_of(3);
	activation_env(1, NULL);
	CHILD_CHECK(runtime_create(&rt, NULL) == 0);
	runtime_serve_config_init(&sc);
	sc.host = "127.0.0.1";
	sc.handler = say_ok;
	sc.port = port;
	CHILD_CHECK(runtime_serve(rt, &sc, &a) == 0 && runtime_server_port(a) == port);
	sc.port = 0; /* the one inherited is taken: a port of its own */
	CHILD_CHECK(runtime_serve(rt, &sc, &b) == 0 && runtime_server_port(b) != port);
	runtime_server_stop(a);
	runtime_server_stop(b);
	CHILD_CHECK(runtime_run(rt) == 0);
	runtime_server_destroy(a);
	runtime_server_destroy(b);
	runtime_destroy(rt);
	return 0;
}

START_TEST(test_serve_on_an_inherited_socket_by_port)
{
	ck_assert_int_eq(in_child(by_port_child), 0);
}
END_TEST

static Suite *systemd_suite(void)
{
	Suite *s = suite_create("systemd");
	TCase *tc = tcase_create("notify");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_notify_sends_to_a_path_and_an_abstract_name);
	tcase_add_test(tc, test_notify_bad_values_get_clear_errors);
	tcase_add_test(tc, test_serve_says_ready_then_stopping);
	tcase_add_test(tc, test_watchdog_pings_stop_while_a_core_is_stalled);
	tcase_add_test(tc, test_watchdog_pings_idle_cores_and_only_its_own);
	tcase_add_test(tc, test_watchdog_leaves_a_deadlock_found);
	suite_add_tcase(s, tc);
	tc = tcase_create("activation");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_listen_fds_bad_values_get_clear_errors);
	tcase_add_test(tc, test_listen_fds_takes_and_unsets);
	tcase_add_test(tc, test_serve_on_an_inherited_socket_by_name);
	tcase_add_test(tc, test_serve_on_an_inherited_socket_by_port);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(systemd_suite)
