/* SPDX-License-Identifier: MIT */
/*
 * metrics_text.c - the exposition, Prometheus text format 0.0.4: per
 * family "# HELP name text" (\\ and \n escaped) and "# TYPE name type",
 * then a line per series, name{labels} value; a histogram's as
 * name_bucket{labels,le="bound"} with cumulative counts up to le="+Inf",
 * then name_sum and name_count. Label values were escaped (\\, \", \n)
 * when their series was made, so a render only copies and sums.
 *
 * A render follows the published lists without the registry's lock, so
 * it never waits for a registrant, nor a registrant for it; what a
 * registration publishes meanwhile may or may not be in it.
 */
#include "metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ text */

static bool reserve(struct metrics_text *t, size_t n)
{
	if (t->len + n <= t->cap)
		return true;
	if (!t->grow || t->failed)
		return false;
	size_t cap = t->cap ? t->cap : 4096;
	while (cap < t->len + n)
		cap *= 2;
	char *p = realloc(t->p, cap);
	if (!p) {
		t->failed = true;
		return false;
	}
	t->p = p;
	t->cap = cap;
	return true;
}

/* What does not fit a fixed buffer is counted, not written. Nothing to
 * put: nothing touched (the buffer may be NULL, for a length query). */
void runtime__metrics_put(struct metrics_text *t, const char *s, size_t n)
{
	if (!n)
		return;
	if (reserve(t, n))
		memcpy(t->p + t->len, s, n);
	else if (t->len < t->cap)
		memcpy(t->p + t->len, s, t->cap - t->len);
	t->len += n;
}

void runtime__metrics_puts(struct metrics_text *t, const char *s)
{
	runtime__metrics_put(t, s, strlen(s));
}

void runtime__metrics_escape(struct metrics_text *t, const char *s, bool label_value)
{
	const char *run = s;

	for (; *s; s++) {
		const char *esc = *s == '\\' ? "\\\\" : *s == '\n' ? "\\n"
		                : *s == '"' && label_value ? "\\\"" : NULL;
		if (!esc)
			continue;
		runtime__metrics_put(t, run, (size_t)(s - run));
		runtime__metrics_put(t, esc, 2);
		run = s + 1;
	}
	runtime__metrics_put(t, run, (size_t)(s - run));
}

int runtime__metrics_double(char *out, size_t cap, double v)
{
	if (isnan(v))
		return snprintf(out, cap, "NaN");
	if (isinf(v))
		return snprintf(out, cap, v > 0 ? "+Inf" : "-Inf");
	int n = 0;
	for (int prec = 15; prec <= 17; prec++) {
		n = snprintf(out, cap, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			break;
	}
	return n;
}

/* ---------------------------------------------------------------- render */

static void put_u64(struct metrics_text *t, uint64_t v)
{
	char d[20];
	size_t i = sizeof(d);

	do
		d[--i] = (char)('0' + v % 10);
	while (v /= 10);
	runtime__metrics_put(t, d + i, sizeof(d) - i);
}

static void put_i64(struct metrics_text *t, int64_t v)
{
	if (v < 0)
		runtime__metrics_put(t, "-", 1);
	put_u64(t, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

static void put_double(struct metrics_text *t, double v)
{
	char d[32];
	int n = runtime__metrics_double(d, sizeof(d), v);
	runtime__metrics_put(t, d, (size_t)n);
}

static const char *type_name(enum runtime_metric_type type)
{
	return type == RUNTIME_METRIC_COUNTER ? "counter"
	     : type == RUNTIME_METRIC_GAUGE   ? "gauge"
	                                      : "histogram";
}

static void put_head(struct metrics_text *t, const struct metric_family *f)
{
	runtime__metrics_put(t, "# HELP ", 7);
	runtime__metrics_puts(t, f->name);
	runtime__metrics_put(t, " ", 1);
	runtime__metrics_puts(t, f->help);
	runtime__metrics_put(t, "\n# TYPE ", 8);
	runtime__metrics_puts(t, f->name);
	runtime__metrics_put(t, " ", 1);
	runtime__metrics_puts(t, type_name(f->type));
	runtime__metrics_put(t, "\n", 1);
}

/* name + suffix + {labels[,le="le"]} + " " */
static void put_name(struct metrics_text *t, const struct runtime_metric *m, const char *suffix,
                     const char *le)
{
	bool any = m->labels[0] || le;

	runtime__metrics_puts(t, m->family->name);
	runtime__metrics_puts(t, suffix);
	if (any)
		runtime__metrics_put(t, "{", 1);
	runtime__metrics_puts(t, m->labels);
	if (le) {
		runtime__metrics_puts(t, m->labels[0] ? ",le=\"" : "le=\"");
		runtime__metrics_puts(t, le);
		runtime__metrics_put(t, "\"", 1);
	}
	runtime__metrics_put(t, any ? "} " : " ", any ? 2 : 1);
}

static void put_histogram(struct metrics_text *t, const struct runtime_metric *m)
{
	const struct metric_family *f = m->family;
	uint64_t cumulative = 0;

	for (unsigned i = 0; i <= f->nbuckets; i++) {
		cumulative += runtime__metrics_sum(m, i);
		put_name(t, m, "_bucket", i < f->nbuckets ? f->le[i] : "+Inf");
		put_u64(t, cumulative);
		runtime__metrics_put(t, "\n", 1);
	}
	put_name(t, m, "_sum", NULL);
	put_double(t, runtime__metrics_sum_double(m, f->nbuckets + 1));
	runtime__metrics_put(t, "\n", 1);
	put_name(t, m, "_count", NULL);
	put_u64(t, cumulative);
	runtime__metrics_put(t, "\n", 1);
}

static void put_series(struct metrics_text *t, const struct runtime_metric *m)
{
	if (m->type == RUNTIME_METRIC_HISTOGRAM) {
		put_histogram(t, m);
		return;
	}
	put_name(t, m, "", NULL);
	if (m->type == RUNTIME_METRIC_COUNTER)
		put_u64(t, runtime__metrics_sum(m, 0));
	else
		put_i64(t, (int64_t)runtime__metrics_sum(m, 0));
	runtime__metrics_put(t, "\n", 1);
}

static void collect(struct runtime_metrics *reg)
{
	for (struct metrics_collector *c = atomic_load_explicit(&reg->collectors, memory_order_acquire);
	     c; c = atomic_load_explicit(&c->next, memory_order_acquire))
		c->fn(reg, c->arg);
}

static void render(struct runtime_metrics *reg, struct metrics_text *t)
{
	collect(reg);
	for (struct metric_family *f = atomic_load_explicit(&reg->first, memory_order_acquire); f;
	     f = atomic_load_explicit(&f->next, memory_order_acquire)) {
		put_head(t, f);
		for (struct runtime_metric *m = atomic_load_explicit(&f->first, memory_order_acquire);
		     m; m = atomic_load_explicit(&m->next, memory_order_acquire))
			put_series(t, m);
	}
}

ssize_t runtime_metrics_render(struct runtime_metrics *reg, char *buf, size_t len)
{
	if (!reg || (!buf && len))
		return -EINVAL;
	struct metrics_text t = { .p = buf, .cap = len ? len - 1 : 0 };
	render(reg, &t);
	if (len)
		buf[t.len < t.cap ? t.len : t.cap] = '\0';
	return (ssize_t)t.len;
}

int runtime_metrics_render_alloc(struct runtime_metrics *reg, char **text, size_t *len)
{
	if (!reg || !text || !len)
		return -EINVAL;
	struct metrics_text t = { .grow = true };
	render(reg, &t);
	if (t.failed || !reserve(&t, 1)) {
		free(t.p);
		*text = NULL;
		*len = 0;
		return -ENOMEM;
	}
	t.p[t.len] = '\0';
	*text = t.p;
	*len = t.len;
	return 0;
}
