/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - what the registry's files share (never installed):
 * metrics.c registers and records, metrics_text.c writes the exposition,
 * metrics_builtin.c collects the runtime's and the servers' counts.
 *
 * Storage: one allocation of (cores + 1) blocks of `stride` cells, each
 * block aligned to and a multiple of 128 bytes (two cache lines: the
 * adjacent-line prefetcher pairs them), so no two cores ever write one
 * line. Block i < cores is core i's (one writer: relaxed load + store);
 * block `cores` is shared (relaxed atomic adds). A series owns cells
 * [cell, cell + width) in every block: a counter or gauge one, a
 * histogram a count per bucket (+Inf last, not cumulative) and its sum
 * (a double's bits).
 */
#ifndef RUNTIME_TOOLKIT_METRICS_H
#define RUNTIME_TOOLKIT_METRICS_H

#include "config.h"

#include <pthread.h>
#include <runtime_metrics.h>
#include <stdatomic.h>
#include <stdbool.h>

struct metric_family;

struct runtime_metric {
	struct runtime_metrics *reg;
	struct metric_family *family;
	uint32_t cell;                  /* its first cell in each block */
	uint8_t type;                   /* the family's; 0: records nothing
	                                   (a family with labels) */
	char *labels;                   /* written once: a="x",b="y" ("": none) */
	struct runtime_metric *_Atomic next; /* the family's next series */
};

struct metric_family {
	struct runtime_metric root;     /* no labels: the one series */
	enum runtime_metric_type type;
	char *name;
	char *help;                     /* escaped for "# HELP" */
	unsigned nlabels;
	char *label_names[RUNTIME_METRICS_LABELS_MAX];
	unsigned max_series, nseries;   /* nseries: under the registry's lock */
	unsigned nbuckets;
	double bounds[RUNTIME_METRICS_BUCKETS_MAX];
	char le[RUNTIME_METRICS_BUCKETS_MAX][32]; /* the bounds as written */
	struct runtime_metric *_Atomic first; /* series, in creation order */
	struct runtime_metric *last;    /* under the lock */
	struct metric_family *_Atomic next;
};

struct metrics_collector {
	void (*fn)(struct runtime_metrics *reg, void *arg);
	void *arg;
	void (*free_arg)(void *arg);    /* at destroy; NULL: the caller's */
	struct metrics_collector *_Atomic next;
};

struct runtime_metrics {
	struct runtime *rt;
	unsigned ncores;                /* blocks 0 .. ncores - 1: the cores' */
	unsigned max_cells, stride;     /* stride: cells per block */
	_Atomic uint64_t *cells;
	pthread_mutex_t lock;           /* among registrants; never rendering */
	unsigned used;                  /* cells handed out (under the lock) */
	struct metric_family *_Atomic first;
	struct metric_family *last;     /* under the lock */
	struct metrics_collector *_Atomic collectors;
	struct metrics_collector *last_collector; /* under the lock */
};

/* A growing (or fixed, counting what did not fit) piece of text. */
struct metrics_text {
	char *p;
	size_t len, cap;                /* len may pass cap: fixed, cut short */
	bool grow;
	bool failed;                    /* out of memory */
};

void runtime__metrics_put(struct metrics_text *t, const char *s, size_t n);
void runtime__metrics_puts(struct metrics_text *t, const char *s);
/* s escaped as a label value (\\, \", \n) or as help text (\\, \n). */
void runtime__metrics_escape(struct metrics_text *t, const char *s, bool label_value);
/* A bound or a sum as Prometheus reads it: the shortest text that reads
 * back the same double; NaN, +Inf, -Inf. */
int runtime__metrics_double(char *out, size_t cap, double v);

static inline _Atomic uint64_t *metrics_block(const struct runtime_metrics *reg, unsigned b)
{
	return reg->cells + (size_t)b * reg->stride;
}

/* The cells of a series summed over the blocks: cell k of m. */
uint64_t runtime__metrics_sum(const struct runtime_metric *m, unsigned k);
double runtime__metrics_sum_double(const struct runtime_metric *m, unsigned k);

/* runtime_metric_series, for a label set not made before. */
int runtime__metrics_series_new(struct runtime_metric *family, const char *const *values,
                                struct runtime_metric **series); /* -EEXIST: there */


#endif
