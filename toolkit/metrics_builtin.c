/* SPDX-License-Identifier: MIT */
/*
 * metrics_builtin.c - the runtime's and runtime_serve's figures as
 * metrics, read at each render (a collector) from the counters the cores
 * and servers keep anyway: recording them costs the hot path nothing
 * beyond those counters. A render sets each series from a snapshot;
 * two renders at once set the same figures, whichever is later wins.
 */
#include "metrics.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------- runtime */

struct core_figure {
	const char *name, *help;
	enum runtime_metric_type type;
	size_t offset; /* a uint64_t of struct runtime_core_stats */
};

#define FIGURE(n, h, t, f) { n, h, RUNTIME_METRIC_##t, offsetof(struct runtime_core_stats, f) }
static const struct core_figure core_figures[] = {
	FIGURE("runtime_fibers_live", "Fibers alive now.", GAUGE, fibers_live),
	FIGURE("runtime_fibers_spawned_total", "Fibers spawned.", COUNTER, fibers_spawned),
	FIGURE("runtime_context_switches_total", "Switches between fibers and the core loop.",
	       COUNTER, context_switches),
	FIGURE("runtime_run_queue_length", "Fibers ready to run now.", GAUGE, run_queue),
	FIGURE("runtime_ring_submissions_total", "Operations submitted to the kernel (SQEs).",
	       COUNTER, sqes_submitted),
	FIGURE("runtime_ring_completions_total", "Completions reaped (CQEs).", COUNTER, cqes_reaped),
	FIGURE("runtime_ring_enters_total", "Trips to the kernel.", COUNTER, enters),
	FIGURE("runtime_cq_overflows_total",
	       "Loop turns that left completions in the kernel for want of CQ room.", COUNTER,
	       cq_overflows),
	FIGURE("runtime_timers_armed", "Sleeps, timed waits and timers armed now.", GAUGE,
	       timers_armed),
	FIGURE("runtime_inbox_items_total", "Work handed to the core by other threads.", COUNTER,
	       inbox_items),
	FIGURE("runtime_wakeups_total", "Wake-ups of the sleeping core by other threads.", COUNTER,
	       wakeups_written),
	FIGURE("runtime_idle_connections", "Connections waiting with no fiber now.", GAUGE,
	       idle_conns),
	FIGURE("runtime_stacks_cached", "Freed fiber stacks kept resident now.", GAUGE,
	       stacks_cached),
	FIGURE("runtime_stream_fallbacks_total",
	       "Stream reads made as a plain recv (buffers low, or no multishot).", COUNTER,
	       stream_fallbacks),
	FIGURE("runtime_stalls_total", "Fibers reported running too long without yielding.",
	       COUNTER, stalls),
};
#define CORE_FIGURES (sizeof(core_figures) / sizeof(core_figures[0]))

enum { OFF_THREADS, OFF_IDLE, OFF_QUEUED, OFF_COMPLETED, OFF_REJECTED, OFF_FIGURES };
static const struct {
	const char *name, *help;
	enum runtime_metric_type type;
} offload_figures[OFF_FIGURES] = {
	{ "runtime_offload_threads", "Offload pool threads now.", RUNTIME_METRIC_GAUGE },
	{ "runtime_offload_threads_idle", "Offload pool threads waiting for work.",
	  RUNTIME_METRIC_GAUGE },
	{ "runtime_offload_queue_length", "Offload jobs waiting for a thread.", RUNTIME_METRIC_GAUGE },
	{ "runtime_offload_completed_total", "Offload jobs completed.", RUNTIME_METRIC_COUNTER },
	{ "runtime_offload_rejected_total", "Offload jobs refused with the queue full.",
	  RUNTIME_METRIC_COUNTER },
};

struct runtime_figures {
	struct runtime *rt;
	unsigned ncores;
	struct runtime_metric *offload[OFF_FIGURES];
	struct runtime_metric *cores[]; /* [figure * ncores + core] */
};

static void runtime_collect(struct runtime_metrics *reg, void *arg)
{
	struct runtime_figures *rf = arg;
	struct runtime_core_stats *cs = calloc(rf->ncores, sizeof(*cs));
	struct runtime_offload_stats pool;

	(void)reg;
	if (!cs)
		return; /* out of memory: the last render's figures stand */
	runtime_stats(rf->rt, cs, rf->ncores, &pool);
	for (size_t i = 0; i < CORE_FIGURES; i++)
		for (unsigned k = 0; k < rf->ncores; k++) {
			const char *at = (const char *)&cs[k] + core_figures[i].offset;
			runtime_metric_set(rf->cores[i * rf->ncores + k], (int64_t)*(const uint64_t *)at);
		}
	free(cs);
	runtime_metric_set(rf->offload[OFF_THREADS], pool.alive);
	runtime_metric_set(rf->offload[OFF_IDLE], pool.idle);
	runtime_metric_set(rf->offload[OFF_QUEUED], (int64_t)pool.queued);
	runtime_metric_set(rf->offload[OFF_COMPLETED], (int64_t)pool.completed);
	runtime_metric_set(rf->offload[OFF_REJECTED], (int64_t)pool.rejected);
}

/* A family with a label core, and a series per core. */
static int core_family(struct runtime_metrics *reg, const struct core_figure *fig,
                       struct runtime_metric **series)
{
	static const char *const labels[] = { "core", NULL };
	struct runtime_metric_desc d = { .type = fig->type, .name = fig->name, .help = fig->help,
	                                 .labels = labels, .max_series = reg->ncores };
	struct runtime_metric *family;
	int rc = runtime_metrics_register(reg, &d, &family);

	for (unsigned k = 0; rc == 0 && k < reg->ncores; k++) {
		char core[16];
		snprintf(core, sizeof(core), "%u", k);
		rc = runtime__metrics_series_new(family, (const char *const[]){ core }, &series[k]);
	}
	return rc;
}

int runtime_metrics_add_runtime(struct runtime_metrics *reg)
{
	if (!reg)
		return -EINVAL;
	struct runtime_figures *rf =
		calloc(1, sizeof(*rf) + CORE_FIGURES * reg->ncores * sizeof(rf->cores[0]));
	if (!rf)
		return -ENOMEM;
	rf->rt = reg->rt;
	rf->ncores = reg->ncores;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < CORE_FIGURES; i++)
		rc = core_family(reg, &core_figures[i], &rf->cores[i * reg->ncores]);
	for (int i = 0; rc == 0 && i < OFF_FIGURES; i++) {
		struct runtime_metric_desc d = { .type = offload_figures[i].type,
		                                 .name = offload_figures[i].name,
		                                 .help = offload_figures[i].help };
		rc = runtime_metrics_register(reg, &d, &rf->offload[i]);
	}
	if (rc < 0) {
		free(rf); /* families made stay, empty or never set: harmless */
		return rc;
	}
	return runtime_metrics_on_collect(reg, runtime_collect, rf, free);
}

/* -------------------------------------------------------------- servers */

enum { SRV_ACCEPTED, SRV_REFUSED, SRV_ERRORS, SRV_LAYER_FAILED, SRV_OPEN, SRV_MOVED_IN,
       SRV_MOVED_OUT, SRV_FIGURES };
static const struct {
	const char *name, *help;
	enum runtime_metric_type type;
} server_figures[SRV_FIGURES] = {
	{ "runtime_server_connections_accepted_total", "Connections accepted.",
	  RUNTIME_METRIC_COUNTER },
	{ "runtime_server_connections_refused_total",
	  "Connections refused: over max_conns, or no memory.", RUNTIME_METRIC_COUNTER },
	{ "runtime_server_accept_errors_total", "Accepts that failed (-EMFILE...).",
	  RUNTIME_METRIC_COUNTER },
	{ "runtime_server_layer_failed_total",
	  "Connections the accept-time layer refused (TLS: failed handshakes).",
	  RUNTIME_METRIC_COUNTER },
	{ "runtime_server_connections_open", "Connections open now.", RUNTIME_METRIC_GAUGE },
	{ "runtime_server_connections_taken_over_total",
	  "Idle connections a predecessor handed over at a restart.", RUNTIME_METRIC_COUNTER },
	{ "runtime_server_connections_handed_over_total",
	  "Idle connections handed to a successor at a restart.", RUNTIME_METRIC_COUNTER },
};

struct server_figures {
	const struct runtime_server *srv;
	struct runtime_metric *series[SRV_FIGURES];
};

static void server_collect(struct runtime_metrics *reg, void *arg)
{
	struct server_figures *sf = arg;
	struct runtime_server_stats st;

	(void)reg;
	runtime_server_stats(sf->srv, &st);
	runtime_metric_set(sf->series[SRV_ACCEPTED], (int64_t)st.accepted);
	runtime_metric_set(sf->series[SRV_REFUSED], (int64_t)st.refused);
	runtime_metric_set(sf->series[SRV_ERRORS], (int64_t)st.errors);
	runtime_metric_set(sf->series[SRV_LAYER_FAILED], (int64_t)st.layer_failed);
	runtime_metric_set(sf->series[SRV_OPEN], st.live);
	runtime_metric_set(sf->series[SRV_MOVED_IN], (int64_t)st.moved_in);
	runtime_metric_set(sf->series[SRV_MOVED_OUT], (int64_t)st.moved_out);
}

int runtime_metrics_add_server(struct runtime_metrics *reg, const struct runtime_server *srv,
                               const char *name)
{
	static const char *const labels[] = { "server", NULL };
	struct server_figures *sf;

	if (!reg || !srv || !name)
		return -EINVAL;
	if (!(sf = calloc(1, sizeof(*sf))))
		return -ENOMEM;
	sf->srv = srv;
	int rc = 0;
	for (int i = 0; rc == 0 && i < SRV_FIGURES; i++) {
		struct runtime_metric_desc d = { .type = server_figures[i].type,
		                                 .name = server_figures[i].name,
		                                 .help = server_figures[i].help, .labels = labels };
		struct runtime_metric *family;
		rc = runtime_metrics_register(reg, &d, &family);
		if (rc == 0)
			rc = runtime__metrics_series_new(family, (const char *const[]){ name },
			                                 &sf->series[i]);
	}
	if (rc < 0) {
		free(sf);
		return rc;
	}
	return runtime_metrics_on_collect(reg, server_collect, sf, free);
}
