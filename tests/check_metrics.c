/* SPDX-License-Identifier: MIT */
/*
 * check_metrics.c - the metrics registry (<runtime_metrics.h>): bad input
 * to every call; the exposition's format to the letter (HELP and label
 * values escaped, TYPE lines, histogram buckets cumulative up to +Inf,
 * _sum and _count, a fixed buffer cut short as snprintf); histogram
 * bucket edges (a value equal to a bound falls in it); the label-set and
 * cell bounds refusing cleanly; per-core sums exact after fibers of
 * three cores and two plain threads added at once (run under TSan too);
 * and the runtime's built-ins read from its counters.
 */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <runtime_metrics.h>
#include <string.h>

static struct runtime *new_runtime(unsigned cores)
{
	struct runtime_config cfg;
	struct runtime *rt;

	runtime_config_init(&cfg);
	cfg.cores = cores;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	return rt;
}

static char *render(struct runtime_metrics *reg)
{
	char *text;
	size_t len;

	ck_assert_int_eq(runtime_metrics_render_alloc(reg, &text, &len), 0);
	ck_assert_uint_eq(strlen(text), len);
	return text;
}

/* -------------------------------------------------------------- bad input */

START_TEST(test_metrics_bad_input)
{
	struct runtime *rt = new_runtime(1);
	struct runtime_metrics *reg;
	struct runtime_metric *m, *s;
	static const char *const le[] = { "le", NULL }, *const dup[] = { "a", "a", NULL };
	static const char *const under[] = { "__x", NULL }, *const ok[] = { "a", NULL };
	const double down[] = { 2, 1 }, inf[] = { 1, INFINITY };

	ck_assert_int_eq(runtime_metrics_create(NULL, 0, &reg), -EINVAL);
	ck_assert_int_eq(runtime_metrics_create(rt, 0, NULL), -EINVAL);
	ck_assert_int_eq(runtime_metrics_create(rt, (1u << 24) + 1, &reg), -EINVAL);
	ck_assert_int_eq(runtime_metrics_create(rt, 0, &reg), 0);
	ck_assert_int_eq(runtime_metrics_counter(reg, NULL, "h", &m), -EINVAL);
	ck_assert_int_eq(runtime_metrics_counter(reg, "1abc", "h", &m), -EINVAL);
	ck_assert_int_eq(runtime_metrics_counter(reg, "a-b", "h", &m), -EINVAL);
	ck_assert_int_eq(runtime_metrics_counter(reg, "a", "h", NULL), -EINVAL);
	ck_assert_int_eq(runtime_metrics_counter(NULL, "a", "h", &m), -EINVAL);
	struct runtime_metric_desc d = { .type = RUNTIME_METRIC_HISTOGRAM, .name = "h" };
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &m), -EINVAL); /* no buckets */
	d.buckets = down, d.nbuckets = 2;
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &m), -EINVAL);
	d.buckets = inf;
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &m), -EINVAL);
	d.buckets = down, d.nbuckets = 1, d.labels = le;
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &m), -EINVAL);
	d.labels = dup;
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &m), -EINVAL);
	d.labels = under;
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &m), -EINVAL);
	d.type = 0, d.labels = ok;
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &m), -EINVAL);
	d.type = RUNTIME_METRIC_COUNTER;
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &m), 0);
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &s), 0);
	ck_assert_ptr_eq(s, m); /* the same shape: the same family */
	d.type = RUNTIME_METRIC_GAUGE;
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &s), -EEXIST);
	d.type = RUNTIME_METRIC_COUNTER;
	ck_assert_int_eq(runtime_metric_series(m, NULL, &s), -EINVAL);
	ck_assert_int_eq(runtime_metric_series(m, (const char *const[]){ NULL }, &s), -EINVAL);
	ck_assert_int_eq(runtime_metric_series(NULL, ok, &s), -EINVAL);
	ck_assert_int_eq(runtime_metric_series(m, ok, &s), 0);
	ck_assert_int_eq(runtime_metric_series(s, ok, &s), -EINVAL); /* a series, not a family */
	runtime_metric_add(m, 5);                /* a family with labels: nowhere */
	runtime_metric_add(NULL, 5);
	runtime_metric_observe(s, 1);            /* not a histogram */
	runtime_metric_sub(s, 1);                /* not a gauge */
	ck_assert_int_eq(runtime_metric_value(s), 0);
	ck_assert_int_eq(runtime_metrics_on_collect(reg, NULL, NULL, NULL), -EINVAL);
	ck_assert_int_eq(runtime_metrics_render(NULL, NULL, 0), -EINVAL);
	ck_assert_int_eq(runtime_metrics_render(reg, NULL, 5), -EINVAL);
	ck_assert_int_eq(runtime_metrics_render_alloc(reg, NULL, NULL), -EINVAL);
	ck_assert_int_eq(runtime_metrics_add_server(reg, NULL, "x"), -EINVAL);
	ck_assert_int_eq(runtime_metrics_add_runtime(NULL), -EINVAL);
	runtime_metrics_destroy(reg);
	runtime_metrics_destroy(NULL);
	runtime_destroy(rt);
}
END_TEST

/* ------------------------------------------------------------- exposition */

START_TEST(test_metrics_exposition_format)
{
	struct runtime *rt = new_runtime(2);
	struct runtime_metrics *reg;
	struct runtime_metric *c, *g, *fam, *s, *h;
	static const char *const labels[] = { "path", "code", NULL };
	const double bounds[] = { 0.5, 1, 2.5 };

	ck_assert_int_eq(runtime_metrics_create(rt, 0, &reg), 0);
	ck_assert_int_eq(runtime_metrics_counter(reg, "jobs_total", "Jobs done.\nBy \\all.", &c), 0);
	ck_assert_int_eq(runtime_metrics_gauge(reg, "depth", NULL, &g), 0);
	struct runtime_metric_desc d = { .type = RUNTIME_METRIC_COUNTER, .name = "hits_total",
	                                 .help = "Hits.", .labels = labels };
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &fam), 0);
	ck_assert_int_eq(runtime_metric_series(fam, (const char *const[]){ "/a\"b\\c\nd", "200" },
	                                       &s), 0);
	struct runtime_metric_desc hd = { .type = RUNTIME_METRIC_HISTOGRAM, .name = "lat_seconds",
	                                  .help = "Latency.", .buckets = bounds, .nbuckets = 3 };
	ck_assert_int_eq(runtime_metrics_register(reg, &hd, &h), 0);
	runtime_metric_add(c, 3);
	runtime_metric_add(g, 2);
	runtime_metric_sub(g, 5);
	runtime_metric_add(s, 7);
	runtime_metric_observe(h, 0.25);
	runtime_metric_observe(h, 1);
	runtime_metric_observe(h, 100);
	const char *want = "# HELP jobs_total Jobs done.\\nBy \\\\all.\n"
	                   "# TYPE jobs_total counter\n"
	                   "jobs_total 3\n"
	                   "# HELP depth \n"
	                   "# TYPE depth gauge\n"
	                   "depth -3\n"
	                   "# HELP hits_total Hits.\n"
	                   "# TYPE hits_total counter\n"
	                   "hits_total{path=\"/a\\\"b\\\\c\\nd\",code=\"200\"} 7\n"
	                   "# HELP lat_seconds Latency.\n"
	                   "# TYPE lat_seconds histogram\n"
	                   "lat_seconds_bucket{le=\"0.5\"} 1\n"
	                   "lat_seconds_bucket{le=\"1\"} 2\n"
	                   "lat_seconds_bucket{le=\"2.5\"} 2\n"
	                   "lat_seconds_bucket{le=\"+Inf\"} 3\n"
	                   "lat_seconds_sum 101.25\n"
	                   "lat_seconds_count 3\n";
	char *text = render(reg);
	ck_assert_str_eq(text, want);
	/* A fixed buffer: snprintf's contract. */
	char small[16];
	ck_assert_int_eq(runtime_metrics_render(reg, small, sizeof(small)), (ssize_t)strlen(want));
	ck_assert_str_eq(small, "# HELP jobs_tot");
	ck_assert_int_eq(runtime_metrics_render(reg, NULL, 0), (ssize_t)strlen(want));
	free(text);
	runtime_metrics_destroy(reg);
	runtime_destroy(rt);
}
END_TEST

START_TEST(test_metrics_histogram_buckets_and_labels)
{
	struct runtime *rt = new_runtime(1);
	struct runtime_metrics *reg;
	struct runtime_metric *fam, *s;
	static const char *const labels[] = { "op", NULL };
	const double bounds[] = { 0.25, 0.5, 10 };

	ck_assert_int_eq(runtime_metrics_create(rt, 0, &reg), 0);
	struct runtime_metric_desc d = { .type = RUNTIME_METRIC_HISTOGRAM, .name = "t",
	                                 .labels = labels, .buckets = bounds, .nbuckets = 3 };
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &fam), 0);
	ck_assert_int_eq(runtime_metric_series(fam, (const char *const[]){ "r" }, &s), 0);
	const double v[] = { 0, 0.25, 0.375, 0.5, 5, 10, 10.5, -1 };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		runtime_metric_observe(s, v[i]);
	ck_assert_int_eq(runtime_metric_value(s), 8);
	char *text = render(reg);
	ck_assert_ptr_nonnull(strstr(text, "t_bucket{op=\"r\",le=\"0.25\"} 3\n"));
	ck_assert_ptr_nonnull(strstr(text, "t_bucket{op=\"r\",le=\"0.5\"} 5\n"));
	ck_assert_ptr_nonnull(strstr(text, "t_bucket{op=\"r\",le=\"10\"} 7\n"));
	ck_assert_ptr_nonnull(strstr(text, "t_bucket{op=\"r\",le=\"+Inf\"} 8\n"));
	ck_assert_ptr_nonnull(strstr(text, "t_sum{op=\"r\"} 25.625\n"));
	ck_assert_ptr_nonnull(strstr(text, "t_count{op=\"r\"} 8\n"));
	free(text);
	runtime_metrics_destroy(reg);
	runtime_destroy(rt);
}
END_TEST

START_TEST(test_metrics_label_sets_and_cells_are_bounded)
{
	struct runtime *rt = new_runtime(1);
	struct runtime_metrics *reg;
	struct runtime_metric *fam, *s, *again, *m;
	static const char *const labels[] = { "k", NULL };

	ck_assert_int_eq(runtime_metrics_create(rt, 10, &reg), 0);
	struct runtime_metric_desc d = { .type = RUNTIME_METRIC_GAUGE, .name = "g",
	                                 .labels = labels, .max_series = 3 };
	ck_assert_int_eq(runtime_metrics_register(reg, &d, &fam), 0);
	for (int i = 0; i < 3; i++) {
		char v[8];
		snprintf(v, sizeof(v), "%d", i);
		ck_assert_int_eq(runtime_metric_series(fam, (const char *const[]){ v }, &s), 0);
	}
	ck_assert_int_eq(runtime_metric_series(fam, (const char *const[]){ "3" }, &s), -ENOSPC);
	ck_assert_int_eq(runtime_metric_series(fam, (const char *const[]){ "2" }, &again), 0);
	ck_assert_ptr_eq(again, s); /* an existing set is no new one */
	/* 3 cells used of 10: a histogram of 6 bounds needs 8. */
	const double b[] = { 1, 2, 3, 4, 5, 6 };
	struct runtime_metric_desc h = { .type = RUNTIME_METRIC_HISTOGRAM, .name = "h",
	                                 .buckets = b, .nbuckets = 6 };
	ck_assert_int_eq(runtime_metrics_register(reg, &h, &m), -ENOSPC);
	h.nbuckets = 5;
	ck_assert_int_eq(runtime_metrics_register(reg, &h, &m), 0);
	ck_assert_int_eq(runtime_metrics_counter(reg, "c", NULL, &m), -ENOSPC);
	char *text = render(reg); /* the refused left nothing behind */
	ck_assert_ptr_null(strstr(text, "# TYPE c "));
	ck_assert_ptr_null(strstr(text, "k=\"3\""));
	free(text);
	runtime_metrics_destroy(reg);
	runtime_destroy(rt);
}
END_TEST

/* ------------------------------------------------- per-core, concurrently */

#define ADDS 20000
#define FIBERS_PER_CORE 2
#define CORES 3
#define THREADS 2

static struct {
	struct runtime_metric *count, *gauge, *hist;
} con;

static void add_many(void)
{
	for (int i = 0; i < ADDS; i++) {
		runtime_metric_add(con.count, 1);
		runtime_metric_add(con.gauge, 2);
		runtime_metric_sub(con.gauge, 1);
		runtime_metric_observe(con.hist, i % 2 ? 0.5 : 2);
		if (i % 512 == 0 && runtime_current())
			runtime_yield();
	}
}

static void fiber_adder(void *arg)
{
	(void)arg;
	add_many();
}

static void *thread_adder(void *arg)
{
	(void)arg;
	add_many();
	return NULL;
}

START_TEST(test_metrics_per_core_sums_under_concurrent_adds)
{
	struct runtime *rt = new_runtime(CORES);
	struct runtime_metrics *reg;
	pthread_t th[THREADS];
	const double bounds[] = { 1 };

	ck_assert_int_eq(runtime_metrics_create(rt, 0, &reg), 0);
	ck_assert_int_eq(runtime_metrics_counter(reg, "n_total", "n", &con.count), 0);
	ck_assert_int_eq(runtime_metrics_gauge(reg, "g", "g", &con.gauge), 0);
	struct runtime_metric_desc hd = { .type = RUNTIME_METRIC_HISTOGRAM, .name = "h",
	                                  .buckets = bounds, .nbuckets = 1 };
	ck_assert_int_eq(runtime_metrics_register(reg, &hd, &con.hist), 0);
	for (unsigned i = 0; i < CORES * FIBERS_PER_CORE; i++)
		ck_assert_int_eq(runtime_spawn_on(rt, i % CORES, fiber_adder, NULL), 0);
	for (int i = 0; i < THREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, thread_adder, NULL), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	const int64_t total = (int64_t)ADDS * (CORES * FIBERS_PER_CORE + THREADS);
	ck_assert_int_eq(runtime_metric_value(con.count), total);
	ck_assert_int_eq(runtime_metric_value(con.gauge), total);
	ck_assert_int_eq(runtime_metric_value(con.hist), total);
	char *text = render(reg);
	char line[128];
	snprintf(line, sizeof(line), "h_bucket{le=\"1\"} %lld\n", (long long)total / 2);
	ck_assert_ptr_nonnull(strstr(text, line));
	snprintf(line, sizeof(line), "h_sum %.17g\n", total / 2 * 0.5 + total / 2 * 2.0);
	ck_assert_msg(strstr(text, line), "%s not in\n%s", line, text);
	free(text);
	runtime_metrics_destroy(reg);
	runtime_destroy(rt);
}
END_TEST

/* ------------------------------------------------------------ built-ins */

static void spawner(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10; i++)
		runtime_yield();
}

START_TEST(test_metrics_runtime_builtins_read_its_counters)
{
	struct runtime *rt = new_runtime(2);
	struct runtime_metrics *reg;

	ck_assert_int_eq(runtime_metrics_create(rt, 0, &reg), 0);
	ck_assert_int_eq(runtime_metrics_add_runtime(reg), 0);
	ck_assert_int_eq(runtime_metrics_add_runtime(reg), -EEXIST);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(runtime_spawn_on(rt, 1, spawner, NULL), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	char *text = render(reg);
	ck_assert_ptr_nonnull(strstr(text, "# TYPE runtime_fibers_spawned_total counter\n"));
	ck_assert_ptr_nonnull(strstr(text, "runtime_fibers_spawned_total{core=\"1\"} 5\n"));
	ck_assert_ptr_nonnull(strstr(text, "runtime_fibers_live{core=\"1\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(text, "runtime_run_queue_length{core=\"0\"} 0\n"));
	ck_assert_ptr_nonnull(strstr(text, "runtime_stacks_cached{core=\"1\"} "));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE runtime_offload_threads gauge\n"));
	/* 5 fibers x (10 yields + start + end), each a switch at least. */
	const char *sw = strstr(text, "runtime_context_switches_total{core=\"1\"} ");
	ck_assert_ptr_nonnull(sw);
	ck_assert_int_ge(atoll(sw + strlen("runtime_context_switches_total{core=\"1\"} ")), 55);
	free(text);
	runtime_metrics_destroy(reg);
	runtime_destroy(rt);
}
END_TEST

static Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("metrics");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_metrics_bad_input);
	tcase_add_test(tc, test_metrics_exposition_format);
	tcase_add_test(tc, test_metrics_histogram_buckets_and_labels);
	tcase_add_test(tc, test_metrics_label_sets_and_cells_are_bounded);
	tcase_add_test(tc, test_metrics_per_core_sums_under_concurrent_adds);
	tcase_add_test(tc, test_metrics_runtime_builtins_read_its_counters);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(metrics_suite)
