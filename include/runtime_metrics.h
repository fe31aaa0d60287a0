/* SPDX-License-Identifier: MIT */
/*
 * runtime_metrics.h - a registry of counters, gauges and histograms kept
 * per core and summed when read, exposed in the Prometheus text format
 * (version 0.0.4). Built into libruntime (the toolkit, toolkit/metrics*.c)
 * on the public calls of <runtime.h>.
 *
 * Recording costs no lock and no shared atomic: a core thread of the
 * registry's runtime adds into its own cache-line-separated block with a
 * relaxed load and store; any other thread adds into a shared block with
 * a relaxed atomic add. A read sums the blocks, so a figure read while
 * cores record is each block's value at some instant, not all at one.
 *
 * Registration and rendering may run on any thread at any time, alongside
 * recording and each other: families and label sets are only ever added
 * (a mutex among registrants; a render follows published lists without
 * it). Storage is fixed when the registry is made (max_cells), so nothing
 * moves under a recorder.
 *
 * The conventions of <runtime.h> hold: errors are -errno, each call says
 * its threads and errors.
 */
#ifndef RUNTIME_METRICS_H
#define RUNTIME_METRICS_H

#include <runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

struct runtime_metrics;  /* a registry */
struct runtime_metric;   /* a series: a metric, or one label set of it */

enum runtime_metric_type {
	RUNTIME_METRIC_COUNTER = 1, /* goes up: runtime_metric_add */
	RUNTIME_METRIC_GAUGE,       /* up and down: _add, _sub, _set */
	RUNTIME_METRIC_HISTOGRAM,   /* runtime_metric_observe into fixed buckets */
};

#define RUNTIME_METRICS_LABELS_MAX 8   /* label names of a metric, at most */
#define RUNTIME_METRICS_BUCKETS_MAX 32 /* a histogram's bounds, +Inf aside */
#define RUNTIME_METRICS_SERIES_DEFAULT 64

struct runtime_metric_desc {
	enum runtime_metric_type type;
	const char *name;          /* [a-zA-Z_:][a-zA-Z0-9_:]*, unique */
	const char *help;          /* any text (escaped when written); NULL: "" */
	const char *const *labels; /* label names, NULL-terminated, at most
	                              RUNTIME_METRICS_LABELS_MAX, each
	                              [a-zA-Z_][a-zA-Z0-9_]* not "__..." nor,
	                              for a histogram, "le"; NULL: none */
	unsigned max_series;       /* label sets at most (0: 64) */
	const double *buckets;     /* histogram: upper bounds, finite, strictly
	                              ascending; +Inf is implied */
	unsigned nbuckets;         /* 1 .. RUNTIME_METRICS_BUCKETS_MAX */
};

/*
 * A registry for rt's cores, with room for max_cells values (0: 4096; a
 * counter or gauge series takes one, a histogram's nbuckets + 2), in
 * (cores + 1) blocks of 8 * max_cells bytes. Any thread. Returns 0,
 * -EINVAL (NULL rt or reg, max_cells over 1 << 24) or -ENOMEM.
 */
RUNTIME_API int runtime_metrics_create(struct runtime *rt, unsigned max_cells,
                                       struct runtime_metrics **reg);

/* Free it and every series: once nothing records, renders or registers
 * (the series handles die with it). NULL: nothing. */
RUNTIME_API void runtime_metrics_destroy(struct runtime_metrics *reg);

/*
 * Register a metric, in one call. *m is the series to record into; for a
 * metric with labels it is the family, which records nowhere: take a
 * label set's series with runtime_metric_series. A name registered
 * before with the same type, label names and buckets gives that metric
 * again (so that libraries may share a family); with another shape it is
 * -EEXIST. Any thread. Returns 0; -EINVAL (a NULL argument, a bad name,
 * label name, type or bucket list), -EEXIST, -ENOSPC (max_cells used
 * up), -ENOMEM.
 */
RUNTIME_API int runtime_metrics_register(struct runtime_metrics *reg,
                                         const struct runtime_metric_desc *desc,
                                         struct runtime_metric **m);

/* runtime_metrics_register for a counter or a gauge with no labels. */
RUNTIME_API int runtime_metrics_counter(struct runtime_metrics *reg, const char *name,
                                        const char *help, struct runtime_metric **m);
RUNTIME_API int runtime_metrics_gauge(struct runtime_metrics *reg, const char *name,
                                      const char *help, struct runtime_metric **m);

/*
 * The series of family for the label values values[0 .. its label count)
 * (any text, escaped when written), made on the first call and the same
 * one after. Cold: look it up once, record into it often. Any thread.
 * Returns 0; -EINVAL (NULL, a family with no labels, a NULL value),
 * -ENOSPC (max_series label sets, or max_cells, used up: nothing made),
 * -ENOMEM.
 */
RUNTIME_API int runtime_metric_series(struct runtime_metric *family, const char *const *values,
                                      struct runtime_metric **series);

/*
 * Record. Any thread; lock-free, no error: a NULL m, a type the call is
 * not for (add on a histogram, observe on a counter, sub or set on a
 * counter) or a family with labels records nothing.
 *   _add      counter or gauge: + n
 *   _sub      gauge: - n
 *   _set      gauge, or a counter mirroring a count kept elsewhere: the
 *             value of the shared block becomes v (the cores' adds, if
 *             any, are summed on top of it; a series is meant to be set
 *             or added to, not both)
 *   _observe  histogram: v into the first bucket whose bound is >= v
 *             (+Inf past the last), and into _sum and _count
 */
RUNTIME_API void runtime_metric_add(struct runtime_metric *m, uint64_t n);
RUNTIME_API void runtime_metric_sub(struct runtime_metric *m, uint64_t n);
RUNTIME_API void runtime_metric_set(struct runtime_metric *m, int64_t v);
RUNTIME_API void runtime_metric_observe(struct runtime_metric *m, double v);

/*
 * A histogram mirroring one kept elsewhere, from a collector: its
 * shared block's bucket counts become counts[0 .. nbuckets] (not
 * cumulative, +Inf last) and its sum sum. As _set, a series is meant to
 * be set or observed into, not both. Any thread; NULL, or not a
 * histogram: nothing.
 */
RUNTIME_API void runtime_metric_set_buckets(struct runtime_metric *m, const uint64_t *counts,
                                            double sum);

/* The value now, summed over the blocks (a counter's as unsigned, a
 * gauge's signed, a histogram's count). Any thread. 0 for NULL. */
RUNTIME_API int64_t runtime_metric_value(const struct runtime_metric *m);

/*
 * Call fn(reg, arg) at the start of every render, before anything is
 * read: a collector that sets series from counts kept elsewhere (the
 * built-ins are such). It may run on any thread, and in two renders at
 * once; it must not render. release(arg), if not NULL, runs at
 * runtime_metrics_destroy (also when this call fails). Any thread.
 * Returns 0, -EINVAL, -ENOMEM.
 */
RUNTIME_API int runtime_metrics_on_collect(struct runtime_metrics *reg,
                                           void (*fn)(struct runtime_metrics *reg, void *arg),
                                           void *arg, void (*release)(void *arg));

/*
 * The exposition (Prometheus text 0.0.4: "# HELP", "# TYPE", then each
 * series; a histogram as _bucket{le=...} cumulative up to "+Inf", _sum,
 * _count), families in registration order, into buf: at most len bytes,
 * NUL-terminated when len > 0, as snprintf. Returns its whole length
 * (without the NUL; >= len: cut short, call again with more), or -EINVAL.
 * Any thread; it runs the collectors and takes no lock that recording or
 * registration holds. Cost, on the calling thread: about 50 ns a line
 * with 8 cores (the built-ins' 165 lines: 5 us; 1,465 lines: 70 us).
 */
RUNTIME_API ssize_t runtime_metrics_render(struct runtime_metrics *reg, char *buf, size_t len);

/* As runtime_metrics_render, into a malloc'd buffer grown as needed:
 * *text (NUL-terminated; free it) and *len. Returns 0, -EINVAL, -ENOMEM. */
RUNTIME_API int runtime_metrics_render_alloc(struct runtime_metrics *reg, char **text,
                                             size_t *len);

/*
 * Built in: the registry's runtime, read at each render from
 * runtime_stats (what its cores count anyway: recording costs nothing
 * more), per core with a label core="N": runtime_fibers_live,
 * runtime_fibers_spawned_total, runtime_context_switches_total,
 * runtime_run_queue_length, runtime_ring_submissions_total,
 * runtime_ring_completions_total, runtime_ring_enters_total,
 * runtime_cq_overflows_total, runtime_timers_armed,
 * runtime_inbox_items_total, runtime_wakeups_total,
 * runtime_idle_connections, runtime_stacks_cached,
 * runtime_stream_fallbacks_total, runtime_stalls_total; and the offload
 * pool's runtime_offload_threads, _threads_idle, _queue_length,
 * _completed_total, _rejected_total. Once per registry (-EEXIST after).
 * Any thread. Returns 0, -EINVAL, -EEXIST, -ENOSPC, -ENOMEM.
 */
RUNTIME_API int runtime_metrics_add_runtime(struct runtime_metrics *reg);

/*
 * Built in: a runtime_serve server's connection counts, read at each
 * render from runtime_server_stats, with a label server="name":
 * runtime_server_connections_accepted_total, _refused_total,
 * _errors_total, _layer_failed_total (TLS: failed handshakes), and
 * runtime_server_connections_open. srv must outlive the registry (or
 * its renders). Any thread. Returns 0, -EINVAL, -EEXIST (that name
 * again), -ENOSPC, -ENOMEM.
 */
struct runtime_server;
RUNTIME_API int runtime_metrics_add_server(struct runtime_metrics *reg,
                                           const struct runtime_server *srv, const char *name);

#ifdef __cplusplus
}
#endif

#endif /* RUNTIME_METRICS_H */
