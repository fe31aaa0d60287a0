/* SPDX-License-Identifier: MIT */
/*
 * drain.c - a graceful stop: runtime_drain (or a signal, after
 * runtime_drain_on_signals) tells everyone that the service is stopping -
 * the hooks run (runtime_serve's stop accepting), the flag reads true, the
 * drain channel closes so that selects on it wake - and gives the work in
 * flight a grace period. When it ends, runtime_shutdown cancels whatever
 * is left; runtime_run returns as soon as every fiber has ended, whichever
 * comes first. A second signal shuts down at once.
 *
 * The end of the grace is an internal timer on core 0, which keeps no
 * fiber and no work alive: a run whose fibers all end before it returns
 * then. Core 0 arms it through its inbox, as a shutdown reaches a core.
 */
#include "core.h"
#include "services.h"

#include <stdlib.h>

struct drain_hook {
	struct drain_hook *next;
	void (*fn)(void *arg);
	void *arg;
};

struct drain {
	_Atomic bool begun;
	pthread_mutex_t lock;       /* hooks, and the channel's creation */
	struct drain_hook *hooks, **tail;
	struct runtime_chan *_Atomic chan;
	uint64_t deadline;          /* the end of the grace */
	struct timer timer;         /* core 0's, ends the grace */
	struct inbox_node node;     /* to core 0: arm the grace's end */
	bool on_signals;            /* runtime_drain_on_signals */
	uint64_t signal_grace;
};

static void grace_over(struct timer *t, enum runtime_timer_why why)
{
	(void)why;
	runtime_shutdown(t->core->rt);
}

/* On core 0 (its loop, or the owner thread while nothing runs): arm the
 * end of the grace. */
static int drain_here(struct core *c, struct inbox_node *n)
{
	struct drain *d = container_of(n, struct drain, node);

	if (d->timer.state == TIMER_ARMED)
		return 0;
	d->timer.fire = grace_over;
	d->timer.on_shutdown = false;
	runtime__timer_start(c, &d->timer, d->deadline);
	return 0;
}

static const struct inbox_ops drain_ops = { drain_here, NULL };

int runtime__drain_init(struct runtime *rt)
{
	struct drain *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	d->tail = &d->hooks;
	d->node.ops = &drain_ops;
	rt->drain = d;
	return 0;
}

void runtime__drain_free(struct runtime *rt)
{
	struct drain *d = rt->drain;

	if (!d)
		return;
	while (d->hooks) {
		struct drain_hook *h = d->hooks;
		d->hooks = h->next;
		free(h);
	}
	runtime_chan_destroy(atomic_load(&d->chan));
	pthread_mutex_destroy(&d->lock);
	free(d);
	rt->drain = NULL;
}

/* The hooks registered before the drain began (end: the list's tail
 * then), once, in the order they came; the lock is not held while they
 * run. Later ones ran in runtime_on_drain. */
static void run_hooks(struct drain *d, struct drain_hook **end)
{
	for (struct drain_hook **h = &d->hooks; h != end; h = &(*h)->next)
		(*h)->fn((*h)->arg);
}

int runtime_drain(struct runtime *rt, uint64_t grace_ns)
{
	if (!rt)
		return -EINVAL;
	if (runtime__is_shutting_down(rt))
		return -ESHUTDOWN;
	struct drain *d = rt->drain;
	pthread_mutex_lock(&d->lock);
	bool first = !atomic_exchange(&d->begun, true);
	struct drain_hook **end = d->tail;
	struct runtime_chan *ch = atomic_load(&d->chan);
	pthread_mutex_unlock(&d->lock);
	if (!first)
		return -EALREADY;
	runtime_notify("STOPPING=1"); /* a service manager waits for the exit */
	d->deadline = deadline_add(runtime_now(), grace_ns);
	if (ch)
		runtime_chan_close(ch);
	run_hooks(d, end);
	for (unsigned i = 0; i < rt->ncores; i++) /* their idle streams wake */
		runtime__inbox_push(&rt->cores[i], &rt->cores[i].streams.idle_drain);
	struct core *c0 = &rt->cores[0];
	if (!this_core() && runtime__may_create_on(c0))
		drain_here(c0, &d->node);
	else
		runtime__inbox_push(c0, &d->node);
	return 0;
}

int runtime_draining(const struct runtime *rt)
{
	return rt && atomic_load_explicit(&rt->drain->begun, memory_order_acquire);
}

struct runtime_chan *runtime_drain_chan(struct runtime *rt)
{
	struct runtime_chan *ch;

	if (!rt)
		return NULL;
	struct drain *d = rt->drain;
	pthread_mutex_lock(&d->lock); /* with runtime_drain's check of begun */
	if (!(ch = atomic_load(&d->chan)) && runtime_chan_create(&ch, 1, 0) == 0) {
		atomic_store(&d->chan, ch);
		if (atomic_load(&d->begun))
			runtime_chan_close(ch);
	}
	pthread_mutex_unlock(&d->lock);
	return ch;
}

int runtime_on_drain(struct runtime *rt, void (*fn)(void *arg), void *arg)
{
	if (!rt || !fn)
		return -EINVAL;
	struct drain_hook *h = malloc(sizeof(*h));
	if (!h)
		return -ENOMEM;
	*h = (struct drain_hook){ .fn = fn, .arg = arg };
	struct drain *d = rt->drain;
	pthread_mutex_lock(&d->lock);
	bool begun = atomic_load(&d->begun);
	*d->tail = h;
	d->tail = &h->next;
	pthread_mutex_unlock(&d->lock);
	if (begun)
		fn(arg); /* too late to be called with the others: now */
	return 0;
}

void runtime__signals_drain(struct runtime *rt, bool drain, uint64_t grace_ns)
{
	rt->drain->signal_grace = grace_ns;
	rt->drain->on_signals = drain;
}

int runtime_drain_on_signals(struct runtime *rt, uint64_t grace_ns)
{
	int rc = runtime_shutdown_on_signals(rt);

	if (rc == 0)
		runtime__signals_drain(rt, true, grace_ns);
	return rc;
}

/* An engine read SIGINT or SIGTERM from the shutdown signalfd. */
void runtime__signalled(struct runtime *rt)
{
	struct drain *d = rt->drain;

	if (d->on_signals && !atomic_load(&d->begun) && runtime_drain(rt, d->signal_grace) == 0)
		return;
	runtime_shutdown(rt);
}
