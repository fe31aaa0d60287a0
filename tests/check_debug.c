/* SPDX-License-Identifier: MIT */
/*
 * check_debug.c - the debugging aids: fiber names, runtime_dump (from a
 * fiber, a plain thread and while nothing runs, and past a core that does
 * not answer), the dump signal, and the stall detector.
 */
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- helpers */

/* stderr into a temporary file, for the reports the runtime prints there. */
static FILE *capture_stderr(void)
{
	FILE *f = tmpfile();

	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(dup2(fileno(f), STDERR_FILENO), 0);
	setvbuf(stderr, NULL, _IONBF, 0);
	return f;
}

static char *slurp(FILE *f)
{
	static char buf[1 << 16];
	size_t n = (size_t)pread(fileno(f), buf, sizeof(buf) - 1, 0);

	buf[n == (size_t)-1 ? 0 : n] = '\0';
	return buf;
}

static unsigned count(const char *hay, const char *needle)
{
	unsigned n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void spin_ms(uint64_t ms)
{
	uint64_t end = runtime_now() + ms * MS;
	while (runtime_now() < end)
		;
}

/* A line of the dump that mentions both a and b. */
static bool line_with(const char *text, const char *a, const char *b)
{
	for (const char *p = text; p && *p;) {
		const char *end = strchr(p, '\n');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char line[512];
		snprintf(line, sizeof(line), "%.*s", (int)len, p);
		if (strstr(line, a) && strstr(line, b))
			return true;
		p = end ? end + 1 : NULL;
	}
	return false;
}

/* ------------------------------------------------------------------ names */

static void names(void *arg)
{
	(void)arg;
	ck_assert_int_eq(runtime_fiber_name_set("a name far longer than the limit allows"), 0);
	char *text;
	size_t len;
	FILE *mem = open_memstream(&text, &len);
	ck_assert_int_eq(runtime_dump(runtime_current(), mem), 0);
	fclose(mem);
	ck_assert_ptr_nonnull(strstr(text, "\"a name far longer than \""));
	free(text);
	ck_assert_int_eq(runtime_fiber_name_set(NULL), 0);
}

START_TEST(test_name_set)
{
	ck_assert_int_eq(RUNTIME_FIBER_NAME_MAX, 24);
	ck_assert_int_eq(runtime_fiber_name_set("outside"), -EPERM);
	ck_assert_int_eq(run_fiber(NULL, names, NULL), 0);
}
END_TEST

/* ------------------------------------------------------- what fibers wait */

struct scene {
	int sv[2];
	struct runtime_mutex mu;    /* held by the dumper */
	_Atomic int ready;          /* fibers at their wait */
	_Atomic bool dumped, ended;
};

static void *sleeper(void *arg)
{
	struct scene *s = arg;
	runtime_fiber_name_set("sleeper");
	atomic_fetch_add(&s->ready, 1);
	return (void *)(intptr_t)runtime_sleep(UINT64_MAX);
}

static void *parker(void *arg)
{
	struct scene *s = arg;
	runtime_fiber_name_set("parker");
	atomic_fetch_add(&s->ready, 1);
	return (void *)(intptr_t)runtime_park(-1);
}

static void *reader(void *arg)
{
	struct scene *s = arg;
	char c;
	runtime_fiber_name_set("reader");
	atomic_fetch_add(&s->ready, 1);
	return (void *)(intptr_t)runtime_recv(s->sv[1], &c, 1, 0);
}

static void *locker(void *arg)
{
	struct scene *s = arg;
	runtime_fiber_name_set("locker");
	atomic_fetch_add(&s->ready, 1);
	return (void *)(intptr_t)runtime_mutex_lock(&s->mu, -1);
}

static void wait_flag(_Atomic bool *flag)
{
	while (!atomic_load(flag))
		runtime_sleep(MS);
}

/* On the scene's core: four fibers, each blocked on something else, until
 * the dump is done; then they are cancelled. */
static void scene(void *arg)
{
	struct scene *s = arg;
	void *(*fn[4])(void *) = { sleeper, parker, reader, locker };
	struct runtime_fiber *f[4];

	for (int i = 0; i < 4; i++)
		f[i] = start(fn[i], s);
	wait_flag(&s->dumped);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(runtime_fiber_cancel(f[i]), 0);
		ck_assert_int_eq(join(f[i]), -ECANCELED);
	}
	atomic_store(&s->ended, true);
}

/* Every wait of the dump is dated by this run's clock: none began before
 * the test did (a minute is far more than any of these waits). */
static void waits_dated(const char *text)
{
	for (const char *p = text; (p = strstr(p, " for ")); p += 5) {
		unsigned long long ms = strtoull(p + 5, NULL, 10);
		ck_assert_msg(ms < 60000, "%s", text);
	}
}

static void scene_check(const char *text, int fd)
{
	char io[32];
	snprintf(io, sizeof(io), "io recv fd %d", fd);
	ck_assert_msg(line_with(text, "\"sleeper\"", "waiting  sleep for "), "%s", text);
	ck_assert_msg(line_with(text, "\"parker\"", "waiting  park"), "%s", text);
	ck_assert_msg(line_with(text, "\"reader\"", io), "%s", text);
	ck_assert_msg(line_with(text, "\"locker\"", "waiting  mutex 0x"), "%s", text);
	ck_assert_msg(line_with(text, "\"dumper\"", "running"), "%s", text);
	waits_dated(text);
}

static void dump_scene(void *arg)
{
	unsigned core = (unsigned)(uintptr_t)arg;
	struct scene s = { .mu = RUNTIME_MUTEX_INIT };
	char *text;
	size_t len;

	runtime_fiber_name_set("dumper");
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s.sv), 0);
	ck_assert_int_eq(runtime_mutex_lock(&s.mu, -1), 0);
	ck_assert_int_eq(runtime_spawn_on(runtime_current(), core, scene, &s), 0);
	while (atomic_load(&s.ready) < 4)
		runtime_sleep(MS);
	runtime_sleep(20 * MS); /* let the last one reach its wait */
	FILE *mem = open_memstream(&text, &len);
	ck_assert_int_eq(runtime_dump(runtime_current(), mem), 0);
	fclose(mem);
	ck_assert_ptr_nonnull(strstr(text, "runtime dump: 2 cores\n"));
	ck_assert_ptr_nonnull(strstr(text, "core 1: "));
	scene_check(text, s.sv[1]);
	free(text);
	atomic_store(&s.dumped, true);
	wait_flag(&s.ended);
	ck_assert_int_eq(runtime_mutex_unlock(&s.mu), 0);
	close(s.sv[0]);
	close(s.sv[1]);
}

/* Each kind of wait shows, on the caller's own core (_i = 0) and on
 * another (_i = 1). */
START_TEST(test_dump_waits)
{
	struct runtime_config cfg;
	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(run_fiber(&cfg, dump_scene, (void *)(uintptr_t)_i), 0);
}
END_TEST

/* ------------------------------------------------------ who calls, when */

static void idle(void *arg)
{
	(void)arg;
}

/* While nothing runs, any thread reads the cores: fibers not yet run. */
START_TEST(test_dump_not_running)
{
	struct runtime *rt;
	char *text;
	size_t len;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, idle, NULL), 0);
	ck_assert_int_eq(runtime_spawn(rt, idle, NULL), 0);
	FILE *mem = open_memstream(&text, &len);
	ck_assert_int_eq(runtime_dump(rt, mem), 0);
	fclose(mem);
	ck_assert_msg(strstr(text, "core 0: 2 fibers") != NULL, "%s", text);
	ck_assert_uint_eq(count(text, " ready"), 2);
	free(text);
	ck_assert_int_eq(runtime_dump(NULL, stdout), -EINVAL);
	ck_assert_int_eq(runtime_dump(rt, NULL), -EINVAL);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
}
END_TEST

struct from_thread {
	struct runtime *rt;
	_Atomic bool named;
	char *text;
	int rc;
};

static void *dump_thread(void *arg)
{
	struct from_thread *t = arg;
	size_t len;

	while (!atomic_load(&t->named))
		usleep(1000);
	FILE *mem = open_memstream(&t->text, &len);
	t->rc = runtime_dump(t->rt, mem);
	fclose(mem);
	runtime_shutdown(t->rt);
	return NULL;
}

static void parked_named(void *arg)
{
	struct from_thread *t = arg;
	runtime_fiber_name_set("parked-one");
	atomic_store(&t->named, true);
	runtime_park(-1);
}

/* A plain thread dumps a running runtime: the other cores answer. */
START_TEST(test_dump_from_thread)
{
	struct runtime_config cfg;
	struct from_thread t = { 0 };
	pthread_t th;

	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(runtime_create(&t.rt, &cfg), 0);
	ck_assert_int_eq(runtime_spawn_on(t.rt, 1, parked_named, &t), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, dump_thread, &t), 0);
	ck_assert_int_eq(runtime_run(t.rt), 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(t.rc, 0);
	ck_assert_msg(line_with(t.text, "\"parked-one\"", "waiting  park"), "%s", t.text);
	ck_assert_ptr_nonnull(strstr(t.text, "core 0: 0 fibers"));
	free(t.text);
	runtime_destroy(t.rt);
}
END_TEST

/* ------------------------------------------------------- a stalled core */

static _Atomic bool spinning, stop_spin;

static void spinner(void *arg)
{
	(void)arg;
	atomic_store(&spinning, true);
	while (!atomic_load(&stop_spin))
		;
}

static void dump_past_spinner(void *arg)
{
	char *text;
	size_t len;

	(void)arg;
	ck_assert_int_eq(runtime_spawn_on(runtime_current(), 1, spinner, NULL), 0);
	while (!atomic_load(&spinning))
		runtime_sleep(MS);
	FILE *mem = open_memstream(&text, &len);
	ck_assert_int_eq(runtime_dump(runtime_current(), mem), -ETIMEDOUT);
	fclose(mem);
	atomic_store(&stop_spin, true);
	ck_assert_msg(strstr(text, "core 1: no answer") != NULL, "%s", text);
	ck_assert_msg(strstr(text, "core 0: 1 fibers") != NULL, "%s", text);
	free(text);
}

/* A core busy with a fiber that never yields cannot answer: the dump says
 * so after its bound instead of hanging, and prints the other cores. */
START_TEST(test_dump_stalled_core)
{
	struct runtime_config cfg;
	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(run_fiber(&cfg, dump_past_spinner, NULL), 0);
}
END_TEST

/* ------------------------------------------------------- the dump signal */

static void signalled(void *arg)
{
	FILE *err = arg;

	runtime_fiber_name_set("signalled-one");
	ck_assert_int_eq(kill(getpid(), SIGUSR1), 0);
	for (int i = 0; i < 10000 && !strstr(slurp(err), "\"signalled-one\""); i++)
		runtime_sleep(MS);
	ck_assert_msg(line_with(slurp(err), "\"signalled-one\"", "waiting  sleep for "), "%s",
	              slurp(err));
}

/* dump_signal prints every core's fibers to stderr; one runtime may have
 * it; destroy puts the previous handler back. */
START_TEST(test_dump_signal)
{
	struct runtime_config cfg;
	struct runtime *rt, *other;
	struct sigaction before, after;
	FILE *err = capture_stderr();

	runtime_config_init(&cfg);
	cfg.dump_signal = SIGUSR1;
	sigaction(SIGUSR1, NULL, &before);
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	ck_assert_int_eq(runtime_create(&other, &cfg), -EBUSY);
	ck_assert_int_eq(runtime_spawn(rt, signalled, err), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_destroy(rt);
	sigaction(SIGUSR1, NULL, &after);
	ck_assert_ptr_eq((void *)after.sa_handler, (void *)before.sa_handler);
	cfg.dump_signal = SIGKILL;
	ck_assert_int_eq(runtime_create(&other, &cfg), -EINVAL);
	cfg.dump_signal = -1;
	ck_assert_int_eq(runtime_create(&other, &cfg), -EINVAL);
}
END_TEST

/* --------------------------------------------------- the stall detector */

/* Six stalls of 300 ms, against a 50 ms threshold: each is seen, and
 * four are printed (the rate limit), naming the fiber and its core. */
static void stall_six(void *arg)
{
	(void)arg;
	for (int i = 0; i < 6; i++) {
		spin_ms(300);
		runtime_yield();
	}
}

START_TEST(test_stall_reported)
{
	struct runtime_config cfg;
	FILE *err = capture_stderr();

	runtime_config_init(&cfg);
	cfg.stall_ms = 50;
	ck_assert_int_eq(run_fiber(&cfg, stall_six, NULL), 0);
	const char *text = slurp(err);
	ck_assert_msg(count(text, "runtime: stall: fiber 1 on core 0 has run ") == 4, "%s", text);
	ck_assert_msg(count(text, " ms without yielding\n") == 4, "%s", text);
}
END_TEST

/* A fiber that yields often, however long it works, is no stall. */
static void busy_but_fair(void *arg)
{
	(void)arg;
	for (int i = 0; i < 300; i++) {
		spin_ms(1);
		runtime_yield();
	}
}

START_TEST(test_stall_not_for_yielding_fiber)
{
	struct runtime_config cfg;
	FILE *err = capture_stderr();

	runtime_config_init(&cfg);
	cfg.stall_ms = 100;
	ck_assert_int_eq(run_fiber(&cfg, busy_but_fair, NULL), 0);
	ck_assert_msg(strstr(slurp(err), "stall") == NULL, "%s", slurp(err));
}
END_TEST

/* A blocking libc call inside a fiber stalls its core: the report names
 * the system call the thread sits in. */
static void sleeps_in_libc(void *arg)
{
	(void)arg;
	usleep(400 * 1000);
}

START_TEST(test_stall_names_blocking_call)
{
	struct runtime_config cfg;
	FILE *err = capture_stderr();

	runtime_config_init(&cfg);
	cfg.stall_ms = 50;
	ck_assert_int_eq(run_fiber(&cfg, sleeps_in_libc, NULL), 0);
	const char *text = slurp(err);
	ck_assert_msg(strstr(text, "without yielding, blocked in ") &&
	              strstr(text, "sleep") && strstr(text, ": a blocking call on a core thread\n"),
	              "%s", text);
}
END_TEST

/* ----------------------------------------------------------------- misuse */

static void *ends_at_once(void *arg)
{
	return arg;
}

static void timer_noop(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	(void)t, (void)arg, (void)why;
}

/* Each misuse returns its error and says what was wrong, naming the call. */
static void misuses(void *arg)
{
	struct runtime_fiber *f = start(ends_at_once, NULL);
	struct runtime_mutex mu = RUNTIME_MUTEX_INIT;
	static struct runtime_timer t; /* its cancel callback runs after we end */

	(void)arg;
	ck_assert_int_eq(join(f), 0);
	ck_assert_int_eq(runtime_fiber_join(f, NULL), -ESRCH);
	ck_assert_int_eq(runtime_fiber_detach(f), -ESRCH);
	ck_assert_int_eq(runtime_fiber_join(runtime_fiber_self(), NULL), -EDEADLK);
	ck_assert_int_eq(runtime_mutex_unlock(&mu), -EPERM);
	ck_assert_int_eq(runtime_timer_start(&t, UINT64_MAX, timer_noop, NULL), 0);
	ck_assert_int_eq(runtime_timer_start(&t, UINT64_MAX, timer_noop, NULL), -EBUSY);
	ck_assert_int_eq(runtime_timer_cancel(&t), 0);
	runtime_destroy(runtime_current()); /* refused: it runs */
}

static const char *const misuse_lines[] = {
	"runtime: misuse: runtime_sleep: called outside a fiber",
	"runtime: misuse: runtime_read: called outside a fiber",
	"runtime: misuse: runtime_fiber_join: the handle names no fiber: joined or detached",
	"runtime: misuse: runtime_fiber_detach: the handle names no fiber",
	"runtime: misuse: runtime_fiber_join: a fiber cannot join itself",
	"runtime: misuse: runtime_mutex_unlock: the mutex is not held by the calling fiber",
	"runtime: misuse: runtime_timer_start: the timer is armed",
	"runtime: misuse: runtime_destroy: the runtime is still running",
};

START_TEST(test_misuse_reported)
{
	FILE *err = capture_stderr();
	char c;

	ck_assert_int_eq(runtime_sleep(1), -EPERM);
	ck_assert_int_eq(runtime_read(0, &c, 1), -EPERM);
	ck_assert_int_eq(run_fiber(NULL, misuses, NULL), 0);
	const char *text = slurp(err);
	for (size_t i = 0; i < sizeof(misuse_lines) / sizeof(misuse_lines[0]); i++)
		ck_assert_msg(strstr(text, misuse_lines[i]), "no \"%s\" in:\n%s", misuse_lines[i], text);
}
END_TEST

/* The snapshot calls take no error return: given NULL they report it and
 * hand back zeros instead of crashing. */
START_TEST(test_misuse_null_stats)
{
	FILE *err = capture_stderr();
	struct runtime_sem_stats ss = { .in_use = 7, .waiting = 7, .rejected = 7 };
	struct runtime_offload_stats os = { .alive = 7, .queued = 7, .completed = 7 };

	runtime_sem_stats(NULL, &ss);
	runtime_sem_stats(NULL, NULL);
	runtime_offload_stats(NULL, &os);
	ck_assert_uint_eq(runtime_limiter_in_flight(NULL), 0);
	ck_assert_uint_eq(ss.in_use + ss.waiting + ss.rejected, 0);
	ck_assert_uint_eq(os.alive + os.queued + os.completed, 0);
	const char *text = slurp(err);
	ck_assert_msg(strstr(text, "runtime: misuse: runtime_sem_stats: NULL"), "%s", text);
	ck_assert_msg(strstr(text, "runtime: misuse: runtime_offload_stats: NULL"), "%s", text);
	ck_assert_msg(strstr(text, "runtime: misuse: runtime_limiter_in_flight: NULL"), "%s", text);
}
END_TEST

static void *run_elsewhere(void *arg)
{
	return (void *)(intptr_t)runtime_run(arg);
}

/* Only the creating thread runs a runtime; a misuse in a loop prints ten
 * reports, then stays quiet. */
START_TEST(test_misuse_wrong_thread_and_quiet)
{
	FILE *err = capture_stderr();
	struct runtime *rt;
	pthread_t th;
	void *res;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, run_elsewhere, rt), 0);
	pthread_join(th, &res);
	ck_assert_int_eq((intptr_t)res, -EPERM);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(runtime_yield(), -EPERM);
	runtime_destroy(rt);
	const char *text = slurp(err);
	ck_assert_msg(strstr(text, "runtime_run: only the thread that created the runtime runs it"),
	              "%s", text);
	ck_assert_uint_eq(count(text, "runtime: misuse: "), 10);
	ck_assert_uint_eq(count(text, "(further misuse reports are not printed)"), 1);
}
END_TEST

/* RUNTIME_MISUSE=abort stops the program at the first misuse, for a
 * debugger or a core dump to show where it came from. */
START_TEST(test_misuse_abort)
{
	setenv("RUNTIME_MISUSE", "abort", 1);
	runtime_sleep(1);
}
END_TEST

/* ------------------------------------------------------------ debug build */

/* --enable-debug turns the stall detector on; a plain build leaves it off
 * (the ASan build of ./build.sh check is the debug one). */
START_TEST(test_debug_defaults)
{
	struct runtime_config cfg;
	runtime_config_init(&cfg);
#ifdef RUNTIME_DEBUG
	ck_assert_uint_eq(cfg.stall_ms, RUNTIME_DEBUG_STALL_MS);
#else
	ck_assert_uint_eq(cfg.stall_ms, 0);
#endif
}
END_TEST

#ifdef RUNTIME_DEBUG
/* An armed timer's storage overwritten: the next loop turn's heap check
 * aborts with the reason instead of corrupting the heap. */
static void overwrite_armed(void *arg)
{
	static struct runtime_timer t;

	(void)arg;
	ck_assert_int_eq(runtime_timer_start(&t, 1000 * MS, timer_noop, NULL), 0);
	memset(&t, 0xa5, sizeof(t));
	runtime_sleep(MS);
}

START_TEST(test_debug_timer_overwritten)
{
	run_fiber(NULL, overwrite_armed, NULL);
}
END_TEST
#endif

static Suite *debug_suite(void)
{
	Suite *s = suite_create("debug");
	TCase *tc = tcase_create("debug");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_name_set);
	tcase_add_loop_test(tc, test_dump_waits, 0, 2);
	tcase_add_test(tc, test_dump_not_running);
	tcase_add_test(tc, test_dump_from_thread);
	tcase_add_test(tc, test_dump_stalled_core);
	tcase_add_test(tc, test_dump_signal);
	tcase_add_test(tc, test_stall_reported);
	tcase_add_test(tc, test_stall_not_for_yielding_fiber);
	tcase_add_test(tc, test_stall_names_blocking_call);
	tcase_add_test(tc, test_misuse_reported);
	tcase_add_test(tc, test_misuse_null_stats);
	tcase_add_test(tc, test_misuse_wrong_thread_and_quiet);
	tcase_add_test_raise_signal(tc, test_misuse_abort, SIGABRT);
	tcase_add_test(tc, test_debug_defaults);
#ifdef RUNTIME_DEBUG
	tcase_add_test_raise_signal(tc, test_debug_timer_overwritten, SIGABRT);
#endif
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(debug_suite)
