/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - the registry: families and their label sets registered
 * under a mutex and published on lists a render follows without it, and
 * recording into the caller's block (metrics.h says the layout).
 *
 * Trade-offs. Storage is fixed at create (max_cells for every block) so
 * that a recorder never meets a moved array and never takes a lock; the
 * price is (cores + 1) * 8 bytes per cell whether used or not (4096 cells
 * on 8 cores: 288 KiB). A recorder finds its block with two calls
 * (runtime_core_index, runtime_current): a few instructions, no atomic.
 * Series are never removed: a label set is bounded (max_series) instead.
 */
#include "metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CELLS_DEFAULT 4096u
#define CELLS_MAX (1u << 24)
#define BLOCK_ALIGN 128u

int runtime_metrics_create(struct runtime *rt, unsigned max_cells, struct runtime_metrics **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!rt || max_cells > CELLS_MAX)
		return -EINVAL;
	struct runtime_metrics *reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	reg->rt = rt;
	reg->ncores = runtime_cores(rt);
	reg->max_cells = max_cells ? max_cells : CELLS_DEFAULT;
	size_t per_line = BLOCK_ALIGN / sizeof(uint64_t);
	reg->stride = (unsigned)((reg->max_cells + per_line - 1) / per_line * per_line);
	size_t bytes = (size_t)(reg->ncores + 1) * reg->stride * sizeof(uint64_t);
	reg->cells = aligned_alloc(BLOCK_ALIGN, bytes);
	if (!reg->cells) {
		free(reg);
		return -ENOMEM;
	}
	memset((void *)reg->cells, 0, bytes);
	pthread_mutex_init(&reg->lock, NULL);
	*out = reg;
	return 0;
}

static void series_free(struct runtime_metric *m)
{
	free(m->labels);
	free(m);
}

static void family_free(struct metric_family *f)
{
	struct runtime_metric *m = atomic_load_explicit(&f->first, memory_order_relaxed);

	while (m) {
		struct runtime_metric *next = atomic_load_explicit(&m->next, memory_order_relaxed);
		if (m != &f->root)
			series_free(m);
		m = next;
	}
	for (unsigned i = 0; i < f->nlabels; i++)
		free(f->label_names[i]);
	free(f->root.labels);
	free(f->name);
	free(f->help);
	free(f);
}

void runtime_metrics_destroy(struct runtime_metrics *reg)
{
	if (!reg)
		return;
	struct metric_family *f = atomic_load_explicit(&reg->first, memory_order_relaxed);
	while (f) {
		struct metric_family *next = atomic_load_explicit(&f->next, memory_order_relaxed);
		family_free(f);
		f = next;
	}
	struct metrics_collector *c = atomic_load_explicit(&reg->collectors, memory_order_relaxed);
	while (c) {
		struct metrics_collector *next = atomic_load_explicit(&c->next, memory_order_relaxed);
		if (c->free_arg)
			c->free_arg(c->arg);
		free(c);
		c = next;
	}
	pthread_mutex_destroy(&reg->lock);
	free((void *)reg->cells);
	free(reg);
}

/* ---------------------------------------------------------- validation */

static bool name_ok(const char *s, bool colons)
{
	if (!s || !*s)
		return false;
	for (const char *p = s; *p; p++) {
		char ch = *p;
		bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
		             (colons && ch == ':');
		if (!alpha && !(p > s && ch >= '0' && ch <= '9'))
			return false;
	}
	return true;
}

static bool label_name_ok(const char *s, enum runtime_metric_type type)
{
	return name_ok(s, false) && strncmp(s, "__", 2) != 0 &&
	       !(type == RUNTIME_METRIC_HISTOGRAM && strcmp(s, "le") == 0);
}

static bool buckets_ok(const struct runtime_metric_desc *d)
{
	if (d->type != RUNTIME_METRIC_HISTOGRAM)
		return true;
	if (!d->buckets || d->nbuckets == 0 || d->nbuckets > RUNTIME_METRICS_BUCKETS_MAX)
		return false;
	for (unsigned i = 0; i < d->nbuckets; i++)
		if (!isfinite(d->buckets[i]) || (i && d->buckets[i] <= d->buckets[i - 1]))
			return false;
	return true;
}

/* The desc's label count, or -1 for a bad list. */
static int labels_count(const struct runtime_metric_desc *d)
{
	int n = 0;

	for (; d->labels && d->labels[n]; n++) {
		if (n == RUNTIME_METRICS_LABELS_MAX || !label_name_ok(d->labels[n], d->type))
			return -1;
		for (int k = 0; k < n; k++)
			if (strcmp(d->labels[k], d->labels[n]) == 0)
				return -1;
	}
	return n;
}

static bool desc_ok(const struct runtime_metric_desc *d)
{
	return d->type >= RUNTIME_METRIC_COUNTER && d->type <= RUNTIME_METRIC_HISTOGRAM &&
	       name_ok(d->name, true) && buckets_ok(d) && labels_count(d) >= 0;
}

/* --------------------------------------------------------- registration */

static unsigned width(enum runtime_metric_type type, unsigned nbuckets)
{
	return type == RUNTIME_METRIC_HISTOGRAM ? nbuckets + 2 : 1;
}

/* Cells for one series, under the lock: the first, or -ENOSPC. */
static int64_t cells_take(struct runtime_metrics *reg, unsigned n)
{
	if (reg->max_cells - reg->used < n)
		return -ENOSPC;
	reg->used += n;
	return reg->used - n;
}

static struct metric_family *family_find(struct runtime_metrics *reg, const char *name)
{
	for (struct metric_family *f = atomic_load_explicit(&reg->first, memory_order_acquire); f;
	     f = atomic_load_explicit(&f->next, memory_order_acquire))
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

/* Append m to its family's series, published to renders (release). */
static void series_publish(struct metric_family *f, struct runtime_metric *m)
{
	if (f->last)
		atomic_store_explicit(&f->last->next, m, memory_order_release);
	else
		atomic_store_explicit(&f->first, m, memory_order_release);
	f->last = m;
	f->nseries++;
}

static void help_escape(struct metric_family *f, const char *help, struct metrics_text *t)
{
	runtime__metrics_escape(t, help ? help : "", false);
	runtime__metrics_put(t, "", 1); /* its NUL */
	f->help = t->failed ? NULL : t->p;
}

/* A family made from a checked desc, not yet published. */
static struct metric_family *family_new(const struct runtime_metric_desc *d)
{
	struct metric_family *f = calloc(1, sizeof(*f));
	struct metrics_text help = { .grow = true };

	if (!f)
		return NULL;
	f->type = d->type;
	f->max_series = d->max_series ? d->max_series : RUNTIME_METRICS_SERIES_DEFAULT;
	f->nbuckets = d->type == RUNTIME_METRIC_HISTOGRAM ? d->nbuckets : 0;
	for (unsigned i = 0; i < f->nbuckets; i++) {
		f->bounds[i] = d->buckets[i];
		runtime__metrics_double(f->le[i], sizeof(f->le[i]), d->buckets[i]);
	}
	f->name = strdup(d->name);
	f->root.labels = strdup("");
	help_escape(f, d->help, &help);
	bool ok = f->name && f->root.labels && f->help;
	for (; d->labels && d->labels[f->nlabels]; f->nlabels++)
		ok = (f->label_names[f->nlabels] = strdup(d->labels[f->nlabels])) && ok;
	f->root.family = f;
	f->root.type = f->nlabels ? 0 : (uint8_t)f->type;
	if (!ok) {
		family_free(f);
		return NULL;
	}
	return f;
}

/* Under the lock: the family's own cells (no labels), then publish it. */
static int family_publish(struct runtime_metrics *reg, struct metric_family *f)
{
	f->root.reg = reg;
	if (!f->nlabels) {
		int64_t cell = cells_take(reg, width(f->type, f->nbuckets));
		if (cell < 0)
			return (int)cell;
		f->root.cell = (uint32_t)cell;
		series_publish(f, &f->root);
	}
	if (reg->last)
		atomic_store_explicit(&reg->last->next, f, memory_order_release);
	else
		atomic_store_explicit(&reg->first, f, memory_order_release);
	reg->last = f;
	return 0;
}

static bool same_shape(const struct metric_family *f, const struct runtime_metric_desc *d)
{
	if (f->type != d->type || (int)f->nlabels != labels_count(d) ||
	    f->nbuckets != (d->type == RUNTIME_METRIC_HISTOGRAM ? d->nbuckets : 0))
		return false;
	for (unsigned i = 0; i < f->nbuckets; i++)
		if (f->bounds[i] != d->buckets[i])
			return false;
	for (unsigned i = 0; i < f->nlabels; i++)
		if (strcmp(f->label_names[i], d->labels[i]) != 0)
			return false;
	return true;
}

int runtime_metrics_register(struct runtime_metrics *reg, const struct runtime_metric_desc *d,
                             struct runtime_metric **m)
{
	if (!reg || !d || !m || !desc_ok(d))
		return -EINVAL;
	struct metric_family *f = family_new(d);
	if (!f)
		return -ENOMEM;
	pthread_mutex_lock(&reg->lock);
	struct metric_family *old = family_find(reg, d->name);
	int rc = old ? (same_shape(old, d) ? 1 : -EEXIST) : family_publish(reg, f);
	pthread_mutex_unlock(&reg->lock);
	if (rc != 0)
		family_free(f);
	if (rc < 0)
		return rc;
	*m = rc == 1 ? &old->root : &f->root;
	return 0;
}

int runtime_metrics_counter(struct runtime_metrics *reg, const char *name, const char *help,
                            struct runtime_metric **m)
{
	struct runtime_metric_desc d = { .type = RUNTIME_METRIC_COUNTER, .name = name, .help = help };
	return runtime_metrics_register(reg, &d, m);
}

int runtime_metrics_gauge(struct runtime_metrics *reg, const char *name, const char *help,
                          struct runtime_metric **m)
{
	struct runtime_metric_desc d = { .type = RUNTIME_METRIC_GAUGE, .name = name, .help = help };
	return runtime_metrics_register(reg, &d, m);
}

/* -------------------------------------------------------------- series */

/* The label set as written: name="value",... (NULL: out of memory). */
static char *labels_text(const struct metric_family *f, const char *const *values)
{
	struct metrics_text t = { .grow = true };

	for (unsigned i = 0; i < f->nlabels; i++) {
		if (i)
			runtime__metrics_put(&t, ",", 1);
		runtime__metrics_puts(&t, f->label_names[i]);
		runtime__metrics_put(&t, "=\"", 2);
		runtime__metrics_escape(&t, values[i], true);
		runtime__metrics_put(&t, "\"", 1);
	}
	runtime__metrics_put(&t, "", 1); /* its NUL */
	if (t.failed)
		free(t.p);
	return t.failed ? NULL : t.p;
}

static struct runtime_metric *series_find(struct metric_family *f, const char *labels)
{
	for (struct runtime_metric *m = atomic_load_explicit(&f->first, memory_order_acquire); m;
	     m = atomic_load_explicit(&m->next, memory_order_acquire))
		if (strcmp(m->labels, labels) == 0)
			return m;
	return NULL;
}

/* Under the lock: the series of labels (taken over), found (-EEXIST if
 * fresh) or made. */
static int series_get(struct metric_family *f, char *labels, bool fresh,
                      struct runtime_metric **out)
{
	struct runtime_metrics *reg = f->root.reg;
	struct runtime_metric *m = series_find(f, labels);

	if (m) {
		free(labels);
		*out = m;
		return fresh ? -EEXIST : 0;
	}
	int64_t cell = f->nseries < f->max_series ? cells_take(reg, width(f->type, f->nbuckets))
	                                          : -ENOSPC;
	if (cell < 0 || !(m = calloc(1, sizeof(*m)))) {
		free(labels);
		return cell < 0 ? (int)cell : -ENOMEM;
	}
	*m = (struct runtime_metric){ .reg = reg, .family = f, .cell = (uint32_t)cell,
	                              .type = (uint8_t)f->type, .labels = labels };
	series_publish(f, m);
	*out = m;
	return 0;
}

static int series_of(struct runtime_metric *family, const char *const *values, bool fresh,
                     struct runtime_metric **series)
{
	if (!family || !values || !series || family != &family->family->root ||
	    !family->family->nlabels)
		return -EINVAL;
	struct metric_family *f = family->family;
	for (unsigned i = 0; i < f->nlabels; i++)
		if (!values[i])
			return -EINVAL;
	char *labels = labels_text(f, values);
	if (!labels)
		return -ENOMEM;
	pthread_mutex_lock(&family->reg->lock);
	int rc = series_get(f, labels, fresh, series);
	pthread_mutex_unlock(&family->reg->lock);
	return rc;
}

int runtime_metric_series(struct runtime_metric *family, const char *const *values,
                          struct runtime_metric **series)
{
	return series_of(family, values, false, series);
}

int runtime__metrics_series_new(struct runtime_metric *family, const char *const *values,
                                struct runtime_metric **series)
{
	return series_of(family, values, true, series);
}

int runtime_metrics_on_collect(struct runtime_metrics *reg,
                               void (*fn)(struct runtime_metrics *reg, void *arg), void *arg,
                               void (*free_arg)(void *arg))
{
	struct metrics_collector *c;

	if (!reg || !fn || !(c = calloc(1, sizeof(*c)))) {
		if (free_arg)
			free_arg(arg);
		return !reg || !fn ? -EINVAL : -ENOMEM;
	}
	c->fn = fn;
	c->arg = arg;
	c->free_arg = free_arg;
	pthread_mutex_lock(&reg->lock);
	if (reg->last_collector)
		atomic_store_explicit(&reg->last_collector->next, c, memory_order_release);
	else
		atomic_store_explicit(&reg->collectors, c, memory_order_release);
	reg->last_collector = c;
	pthread_mutex_unlock(&reg->lock);
	return 0;
}

/* ------------------------------------------------------------ recording */

/* The caller's block: its core's, if it is a core of the registry's
 * runtime; else the shared one. */
static inline unsigned my_block(const struct runtime_metrics *reg)
{
	int core = runtime_core_index();

	if (core >= 0 && (unsigned)core < reg->ncores && runtime_current() == reg->rt)
		return (unsigned)core;
	return reg->ncores;
}

/* One writer per core block: a relaxed load and store, no locked add.
 * The shared block takes adds from any thread: an atomic add. */
static inline void cell_add(const struct runtime_metric *m, unsigned k, uint64_t n)
{
	const struct runtime_metrics *reg = m->reg;
	unsigned b = my_block(reg);
	_Atomic uint64_t *p = metrics_block(reg, b) + m->cell + k;

	if (b < reg->ncores)
		atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + n,
		                      memory_order_relaxed);
	else
		atomic_fetch_add_explicit(p, n, memory_order_relaxed);
}

static uint64_t bits_of(double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof(u));
	return u;
}

static double double_of(uint64_t u)
{
	double v;
	memcpy(&v, &u, sizeof(v));
	return v;
}

static void cell_add_double(const struct runtime_metric *m, unsigned k, double v)
{
	const struct runtime_metrics *reg = m->reg;
	unsigned b = my_block(reg);
	_Atomic uint64_t *p = metrics_block(reg, b) + m->cell + k;
	uint64_t old = atomic_load_explicit(p, memory_order_relaxed);

	if (b < reg->ncores) {
		atomic_store_explicit(p, bits_of(double_of(old) + v), memory_order_relaxed);
		return;
	}
	while (!atomic_compare_exchange_weak_explicit(p, &old, bits_of(double_of(old) + v),
	                                              memory_order_relaxed, memory_order_relaxed))
		;
}

void runtime_metric_add(struct runtime_metric *m, uint64_t n)
{
	if (m && (m->type == RUNTIME_METRIC_COUNTER || m->type == RUNTIME_METRIC_GAUGE))
		cell_add(m, 0, n);
}

void runtime_metric_sub(struct runtime_metric *m, uint64_t n)
{
	if (m && m->type == RUNTIME_METRIC_GAUGE)
		cell_add(m, 0, -n);
}

void runtime_metric_set(struct runtime_metric *m, int64_t v)
{
	if (m && (m->type == RUNTIME_METRIC_COUNTER || m->type == RUNTIME_METRIC_GAUGE))
		atomic_store_explicit(metrics_block(m->reg, m->reg->ncores) + m->cell, (uint64_t)v,
		                      memory_order_relaxed);
}

void runtime_metric_observe(struct runtime_metric *m, double v)
{
	if (!m || m->type != RUNTIME_METRIC_HISTOGRAM)
		return;
	const struct metric_family *f = m->family;
	unsigned i = 0;
	while (i < f->nbuckets && !(v <= f->bounds[i]))
		i++;
	cell_add(m, i, 1);
	cell_add_double(m, f->nbuckets + 1, v);
}

void runtime_metric_set_buckets(struct runtime_metric *m, const uint64_t *counts, double sum)
{
	if (!m || m->type != RUNTIME_METRIC_HISTOGRAM || !counts)
		return;
	_Atomic uint64_t *shared = metrics_block(m->reg, m->reg->ncores) + m->cell;
	unsigned n = m->family->nbuckets;
	for (unsigned i = 0; i <= n; i++)
		atomic_store_explicit(&shared[i], counts[i], memory_order_relaxed);
	atomic_store_explicit(&shared[n + 1], bits_of(sum), memory_order_relaxed);
}

uint64_t runtime__metrics_sum(const struct runtime_metric *m, unsigned k)
{
	uint64_t sum = 0;

	for (unsigned b = 0; b <= m->reg->ncores; b++)
		sum += atomic_load_explicit(metrics_block(m->reg, b) + m->cell + k,
		                            memory_order_relaxed);
	return sum;
}

double runtime__metrics_sum_double(const struct runtime_metric *m, unsigned k)
{
	double sum = 0;

	for (unsigned b = 0; b <= m->reg->ncores; b++)
		sum += double_of(atomic_load_explicit(metrics_block(m->reg, b) + m->cell + k,
		                                      memory_order_relaxed));
	return sum;
}

int64_t runtime_metric_value(const struct runtime_metric *m)
{
	if (!m || !m->type)
		return 0;
	if (m->type != RUNTIME_METRIC_HISTOGRAM)
		return (int64_t)runtime__metrics_sum(m, 0);
	uint64_t count = 0;
	for (unsigned i = 0; i <= m->family->nbuckets; i++)
		count += runtime__metrics_sum(m, i);
	return (int64_t)count;
}
