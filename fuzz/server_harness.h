/* SPDX-License-Identifier: MIT */
/*
 * server_harness.h - what fuzz_http_server.c (fuzz_http_server and,
 * with -DFUZZ_H2, fuzz_h2_server) and fuzz_https_server.c share: the
 * runtime that lives for the process on its own thread, the fd scan
 * behind their leak checks, the bounds every input runs under, and the
 * reading of the server's HTTP/1.1 answers and requests that both
 * HTTP/1.1 targets check the same way. Each target includes it once,
 * after "http.h" and "server.h", with FUZZ_NAME defined to its name (for
 * its messages). Everything is static: it is part of that one file.
 */
#ifndef FUZZ_SERVER_HARNESS_H
#define FUZZ_SERVER_HARNESS_H

#ifndef FUZZ_NAME
#error "define FUZZ_NAME before including server_harness.h"
#endif

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MARKER 0xFF
#define MS 1000000ull
#define HANG_NS (10000 * MS)      /* an input's connection must end within */
#define STUCK_S 30                /* the runtime itself must answer within */
#define SLEEP_CAP_NS (100 * 1000ull)
#define FAST_TIMEOUT_MS 5000      /* header, idle: the client never waits */
#define SLOW_TIMEOUT_MS 2         /* ... with OPT_SLOW */
#define FD_SCAN 128               /* fds checked for leaks: 0 .. FD_SCAN-1 */
#define MAX_PIECES 64             /* writes per input */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int __real_runtime_sleep(uint64_t ns);
int __wrap_runtime_sleep(uint64_t ns);

static struct server srv;     /* srv.http: this input's server */
static pthread_t runtime_thread;
static sem_t runtime_ready;
static int runtime_rc;

__attribute__((noreturn)) static void fail(const char *why)
{
	fprintf(stderr, FUZZ_NAME ": %s\n", why);
	abort();
}

/* The routes' runtime_sleep (-Wl,--wrap=runtime_sleep): at most
 * SLEEP_CAP_NS, so that /delay costs the fuzzer nothing. */
int __wrap_runtime_sleep(uint64_t ns)
{
	return __real_runtime_sleep(ns < SLEEP_CAP_NS ? ns : SLEEP_CAP_NS);
}

/* Which fds below FD_SCAN are open, in one poll(2). The process holds a
 * dozen between inputs, and an input's fds take the lowest free numbers,
 * so a leak lands below FD_SCAN; a wider scan costs more than the server
 * does. */
static void scan_fds(bool open[FD_SCAN])
{
	static struct pollfd pfd[FD_SCAN];

	for (int i = 0; i < FD_SCAN; i++)
		pfd[i] = (struct pollfd){ .fd = i };
	if (poll(pfd, FD_SCAN, 0) < 0)
		fail("poll");
	for (int i = 0; i < FD_SCAN; i++)
		open[i] = !(pfd[i].revents & POLLNVAL);
}

/* This input's /metrics registry, with the runtime's series as
 * http-server's (not the server's: they need a listener, and the harness
 * serves its connection itself). Without one the route fails: 500, and
 * the connection closes. */
static void metrics_make(void)
{
	if (runtime_metrics_create(srv.rt, 0, &srv.metrics) < 0 ||
	    runtime_metrics_add_runtime(srv.metrics) < 0)
		fail("the metrics registry");
}

/* Before runtime_http_server_destroy. */
static void metrics_drop(void)
{
	runtime_metrics_destroy(srv.metrics);
	srv.metrics = NULL;
}

/* Join f, which runs under a deadline: its end in time, or what failed. */
static void join_or_fail(struct runtime_fiber *f, const char *what)
{
	int rc = runtime_fiber_join(f, NULL);

	if (rc == -ETIMEDOUT)
		fail(what);
	if (rc < 0)
		fail("join");
}

#ifndef FUZZ_H2 /* HTTP/1.1's requests and answers: not fuzz_h2_server's */
/*
 * A request after which the server may close: one that asks to, and one
 * whose client waits for 100 Continue before a body - if the handler
 * never reads that body, the server answers and closes (it cannot tell
 * whether the body will come: RFC 9110 10.1.1), as the demo's routes do
 * but for POST /echo.
 */
static bool may_end(const struct http_request *req)
{
	bool body = req->body == HTTP_BODY_CHUNKED ||
	            (req->body == HTTP_BODY_LENGTH && req->content_length > 0);

	return !req->keep_alive || (req->expect_continue && body);
}

/*
 * An answer's head h[0..len), NUL-terminated: an HTTP/1.1 status line,
 * and a 1xx only as "100 Continue" with nothing else, or as the 101 of a
 * WebSocket (then switched). Returns false for
 * that interim answer; else true, with the Content-Length in *length (0
 * without one, which only 204 and 304 may do) and whether the status has
 * no body (*bodiless).
 */
static bool switched; /* a 101 came (the demo's /ws): what follows is
                         WebSocket, not HTTP, and no answer more is owed */

static bool final_answer(const char *h, size_t len, uint64_t *length, bool *bodiless)
{
	static const char cl[] = "\r\nContent-Length: ";
	const char *p;
	char *end;

	if (len < 16 || memcmp(h, "HTTP/1.1 ", 9) || h[12] != ' ' ||
	    strspn(h + 9, "0123456789") != 3 || h[9] < '1' || h[9] > '5')
		fail("an answer whose status line is not HTTP/1.1's");
	if (h[9] == '1') {
		if (!strncmp(h, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n", 53)) {
			switched = true;
			return false;
		}
		if (strcmp(h, "HTTP/1.1 100 Continue\r\n\r\n") != 0)
			fail("an interim answer other than 100 Continue");
		return false;
	}
	*bodiless = !memcmp(h + 9, "204", 3) || !memcmp(h + 9, "304", 3);
	*length = 0;
	if ((p = strstr(h, cl))) {
		if (p[sizeof(cl) - 1] < '0' || p[sizeof(cl) - 1] > '9')
			fail("an answer with a bad Content-Length");
		*length = strtoull(p + sizeof(cl) - 1, &end, 10);
		if (end[0] != '\r')
			fail("an answer with a bad Content-Length");
	} else if (!*bodiless) {
		fail("an answer without a Content-Length");
	}
	return true;
}

/*
 * The answers owed, awaited before the client shuts its side. The server
 * takes a client's end that comes while a handler runs, with nothing
 * more asked, for the client leaving (runtime_conn_cancel_on_close: the
 * handler is cancelled, its answer cut), as nginx and Go do; a client
 * that wants every answer waits for them first. The reader tells each
 * whole answer (owed_seen), the writer waits (owed_wait), within the
 * input's deadline: past it, the checks report the hang.
 */
struct owed_wait {
	size_t owed;                /* what the writer waits for */
	size_t answered;            /* whole final answers so far */
	bool ended;                 /* the reader is done */
	struct runtime_fiber *waiter;
};

static void owed_seen(struct owed_wait *w, size_t answered, bool ended)
{
	w->answered = answered;
	w->ended |= ended;
	if (w->waiter && (w->ended || switched || w->answered >= w->owed))
		runtime_fiber_unpark(w->waiter);
}

static void owed_wait(struct owed_wait *w, size_t owed)
{
	w->owed = owed;
	w->waiter = runtime_fiber_self();
	while (!w->ended && !switched && w->answered < owed)
		if (runtime_park(-1) < 0)
			break;
	w->waiter = NULL;
}
#endif

/* ---------------------------------------------------------- the runtime */

/* Parks until the runtime shuts down: keeps runtime_run going between
 * inputs. */
static void keeper(void *arg)
{
	(void)arg;
	while (runtime_park(-1) != -ECANCELED)
		;
}

static void *run_runtime(void *arg)
{
	struct runtime_config cfg;
	int rc;

	(void)arg;
	file_cache_set_validity(0); /* each input opens its files: none held over */
	runtime_config_init(&cfg);
	cfg.cores = 1;
	if ((rc = runtime_create(&srv.rt, &cfg)) == 0 &&
	    (rc = runtime_sem_create(&srv.backend, srv.opt.limit, 0)) == 0)
		rc = runtime_spawn(srv.rt, keeper, NULL);
	runtime_rc = rc;
	sem_post(&runtime_ready);
	if (rc == 0 && (rc = runtime_run(srv.rt)) < 0)
		fprintf(stderr, FUZZ_NAME ": runtime_run: %s\n", strerror(-rc));
	return NULL;
}

/* One runtime (one core) on its own thread for the process, with
 * srv.opt's limit for the backend semaphore; exits if there is none. */
static void start_runtime(void)
{
	sem_init(&runtime_ready, 0, 0);
	if (pthread_create(&runtime_thread, NULL, run_runtime, NULL) != 0)
		fail("pthread_create");
	while (sem_wait(&runtime_ready) < 0)
		;
	if (runtime_rc < 0) {
		fprintf(stderr, FUZZ_NAME ": no runtime: %s\n", strerror(-runtime_rc));
		exit(1);
	}
}

/* The runtime stops (the keeper is cancelled) and goes, once
 * runtime_shutdown has returned here too. */
static void stop_runtime(void)
{
	runtime_shutdown(srv.rt);
	pthread_join(runtime_thread, NULL);
	runtime_sem_destroy(srv.backend);
	runtime_destroy(srv.rt);
}

/* The sanitizers' symbolizer, if this build has one (weak: the replay
 * build has none). */
void __sanitizer_symbolize_pc(void *pc, const char *fmt, char *out, size_t size)
	__attribute__((weak));

/*
 * Start the sanitizers' symbolizer now, before the fd baseline is taken.
 * It is started on first use and keeps a pipe pair open for the process's
 * life; libFuzzer first uses it when an input reaches a new function
 * ("NEW_FUNC"), and that pair was then taken for a leak of the server's
 * (fds 6 and 9, "pipe:[...]": the stop-14 finding and CI's of acbdac0).
 */
static void start_symbolizer(void)
{
	char where[128];

	if (__sanitizer_symbolize_pc)
		__sanitizer_symbolize_pc(__builtin_return_address(0), "%p %F %L", where, sizeof(where));
}

#endif /* FUZZ_SERVER_HARNESS_H */
