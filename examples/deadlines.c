/* SPDX-License-Identifier: MIT */
/*
 * deadlines.c - how a fiber stops waiting: a deadline, a cancel, a group
 * that cancels its members, and a cleanup that a cancel cannot cut short.
 * It runs its own silent server in a fiber (it accepts, reads, and never
 * answers), so every read from it would wait for ever; four short scenes
 * show what ends the wait, each printing what happened:
 *
 *  1. deadline: a per-fiber deadline turns a read that waits into
 *     -ETIMEDOUT; once past it every blocking call fails at once; cleared,
 *     calls wait again.
 *  2. cancel: a fiber blocked in a read is cancelled: the read returns
 *     -ECANCELED, and so does every later call (a cancel is sticky).
 *  3. cleanup: inside runtime_cleanup_begin/_end the cancelled fiber can
 *     still send a last message; after it the cancel shows again. Its
 *     join returns what the fiber returned.
 *  4. group: three members wait on the silent server, one with a
 *     deadline; its failure cancels the other two, and the group's wait
 *     reports that first failure.
 *
 * Shows: runtime_deadline_set, runtime_fiber_spawn, runtime_fiber_cancel,
 * runtime_fiber_join, runtime_cleanup_begin, runtime_cleanup_end,
 * runtime_group_create (RUNTIME_GROUP_CANCEL_ON_ERROR),
 * runtime_group_spawn, runtime_group_wait, runtime_error_name.
 *
 *   ./deadlines
 *
 * Prints one line per outcome, e.g.
 *   deadline: recv gave up after 100 ms: ETIMEDOUT (Connection timed out)
 * and exits 0 (1 if a scene could not run: the server did not start, a
 * connect failed).
 */
#include <runtime.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#define MS (1000 * 1000ull)

static uint16_t port; /* the silent server's */
static int failed;    /* a call that should have worked did not */

/* --------------------------------------------------- the silent server */

/* Reads what the client sends and never answers, until the client closes. */
static void silent_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[256];

	while (runtime_recv(fd, buf, sizeof(buf), 0) > 0)
		;
	runtime_close(fd);
}

/* Accepts until it is cancelled. Joinable: the demo stops it at the end. */
static void *silent_server(void *arg)
{
	int listen_fd = (int)(intptr_t)arg, fd;

	while ((fd = runtime_accept(listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		if (runtime_spawn(runtime_current(), silent_conn, (void *)(intptr_t)fd) < 0)
			runtime_close(fd);
	return NULL;
}

/* A connection to the silent server, or -errno (said). */
static int connect_silent(const char *who)
{
	int fd = runtime_tcp_connect("127.0.0.1", port);

	if (fd < 0 && fd != -ECANCELED) {
		printf("%s: connect: %s\n", who, strerror(-fd));
		failed = 1;
	}
	return fd;
}

/* ------------------------------------------------------ 1. a deadline */

static void scene_deadline(void)
{
	char buf[64];
	int fd = connect_silent("deadline");

	if (fd < 0)
		return;
	/* An absolute time: every blocking call of this fiber ends by then. */
	uint64_t start = runtime_now();
	runtime_deadline_set(start + 100 * MS);
	ssize_t n = runtime_recv(fd, buf, sizeof(buf), 0); /* -ETIMEDOUT after 100 ms */
	printf("deadline: recv gave up after %llu ms: %s (%s)\n",
	       (unsigned long long)((runtime_now() - start) / MS), runtime_error_name((int)n),
	       strerror((int)-n));
	/* Any blocking call fails at once now, without waiting. */
	int rc = runtime_sleep(10 * MS); /* still past it: -ETIMEDOUT at once */
	printf("deadline: past it, a 10 ms sleep fails at once: %s\n", runtime_error_name(rc));
	runtime_deadline_set(0); /* no deadline: calls wait as long as they need */
	rc = runtime_sleep(10 * MS);
	printf("deadline: cleared, the same sleep returns %s\n", runtime_error_name(rc));
	runtime_close(fd);
}

/* ------------------------------------------- 2, 3. a cancel, a cleanup */

/* Blocks in a read until cancelled, then cleans up. Returns the read's
 * result, for the join. */
static void *worker(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct runtime_cleanup cleanup;
	char buf[64];

	ssize_t n = runtime_recv(fd, buf, sizeof(buf), 0); /* the silent server: waits */
	printf("cancel: the worker's recv returned %s (%s)\n", runtime_error_name((int)n),
	       strerror((int)-n));
	int rc = runtime_sleep(MS);
	printf("cancel: its next call, a sleep, returned %s too: a cancel is sticky\n",
	       runtime_error_name(rc));

	/* Cleanup that must still wait (a goodbye, a flush): inside it the
	 * cancel is held back, and the calls are bounded by 1 s instead. */
	runtime_cleanup_begin(&cleanup, 1000 * MS);
	ssize_t sent = runtime_send_all(fd, "bye\n", 4, NULL); /* works, though cancelled */
	runtime_cleanup_end(&cleanup);
	if (sent >= 0)
		printf("cleanup: inside runtime_cleanup_begin/_end a send works: %zd bytes\n", sent);
	else
		printf("cleanup: the send failed: %s\n", strerror((int)-sent));
	rc = runtime_sleep(MS);
	printf("cleanup: after runtime_cleanup_end the cancel shows again: %s\n",
	       runtime_error_name(rc));
	runtime_close(fd); /* close is never cancelled */
	return (void *)(intptr_t)n;
}

static void scene_cancel(void)
{
	struct runtime_fiber *f;
	void *result;
	int fd = connect_silent("cancel");

	if (fd < 0)
		return;
	/* A joinable fiber, on this core. */
	int rc = runtime_fiber_spawn(runtime_current(), &f, worker, (void *)(intptr_t)fd);
	if (rc < 0) {
		printf("cancel: spawn: %s\n", strerror(-rc));
		runtime_close(fd);
		failed = 1;
		return;
	}
	runtime_yield(); /* let it run and block in its read */
	runtime_fiber_cancel(f);
	rc = runtime_fiber_join(f, &result); /* waits until it has ended */
	if (rc == 0)
		printf("join: the worker returned %s\n", runtime_error_name((int)(intptr_t)result));
	else
		printf("join: %s\n", strerror(-rc));
}

/* ------------------------------------------------------------ 4. a group */

/* A member: waits for an answer from the silent server, with a deadline
 * or without one. Returns 0 or -errno: the first nonzero one cancels the
 * group (RUNTIME_GROUP_CANCEL_ON_ERROR). */
static int member(void *arg)
{
	int id = (int)(intptr_t)arg; /* 1 has a deadline; 2 and 3 have none */
	char buf[64];
	ssize_t n = connect_silent("group");

	if (n >= 0) {
		int fd = (int)n;
		if (id == 1)
			runtime_deadline_set(runtime_now() + 100 * MS);
		n = runtime_recv(fd, buf, sizeof(buf), 0);
		runtime_close(fd);
	}
	printf("group: member %d (%s) ended: %s\n", id, id == 1 ? "100 ms deadline" : "no deadline",
	       runtime_error_name((int)n));
	return n < 0 ? (int)n : 0;
}

static void scene_group(void)
{
	struct runtime_group *g;
	int first = 0;
	int rc = runtime_group_create(&g, RUNTIME_GROUP_CANCEL_ON_ERROR);

	for (int id = 1; rc == 0 && id <= 3; id++)
		rc = runtime_group_spawn(g, member, (void *)(intptr_t)id);
	if (rc == 0)
		rc = runtime_group_wait(g, -1, &first); /* until every member has ended */
	if (rc == 0)
		printf("group: every member has ended; the first failure: %s (%s)\n",
		       runtime_error_name(first), strerror(-first));
	else
		printf("group: %s\n", strerror(-rc));
	failed |= rc < 0;
	runtime_group_destroy(g); /* NULL if create failed: fine */
}

/* --------------------------------------------------------------- main */

static void demo(void *arg)
{
	struct runtime_fiber *server;

	if (runtime_fiber_spawn(runtime_current(), &server, silent_server, arg) < 0) {
		failed = 1;
		return;
	}
	scene_deadline();
	scene_cancel();
	scene_group();
	runtime_fiber_cancel(server); /* its accept returns -ECANCELED */
	runtime_fiber_join(server, NULL);
	printf("done\n");
}

int main(void)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	struct runtime *rt;

	int fd = runtime_tcp_listen("127.0.0.1", 0, 0, 0); /* a free port */
	if (fd < 0) {
		fprintf(stderr, "deadlines: listen: %s\n", strerror(-fd));
		return 1;
	}
	getsockname(fd, (struct sockaddr *)&sin, &len);
	port = ntohs(sin.sin_port);
	int rc = runtime_create(&rt, NULL); /* one core */
	if (rc == 0) {
		if ((rc = runtime_spawn(rt, demo, (void *)(intptr_t)fd)) == 0)
			rc = runtime_run(rt);
		runtime_destroy(rt);
	}
	runtime_close(fd);
	if (rc < 0)
		fprintf(stderr, "deadlines: %s\n", strerror(-rc));
	return rc < 0 || failed;
}
