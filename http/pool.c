/* SPDX-License-Identifier: MIT */
/*
 * pool.c - the client's connections: dialled (DNS on the offload pool
 * through runtime_tcp_connect, TCP, TLS) and kept idle between requests
 * in a pool per core and origin (scheme, host, port).
 *
 * A connection belongs to the core that dialled it (a runtime_conn
 * does), so each core has pools of its own, made on its first request
 * and touched by its fibers only: no lock, no atomic but the counters.
 * An origin's idle connections are a stack (the most recently used
 * first: the one least likely to have been closed by the server); at
 * most max_per_origin of them are kept.
 *
 * Idle connections are closed when found past idle_timeout: the one a
 * request takes, and every one of the core's in a sweep that a take or a
 * put makes at most once a second. Nothing runs in between (a timer would
 * need a core to cancel it on at destroy): on a core that stops making
 * requests they stay open until destroy, or until the server closes them.
 *
 * Every take asks the connection whether anything came while it sat idle
 * (runtime_conn_pending: its receive stream knows, with no system call).
 * Bytes nobody asked for - a second answer, a stray CRLF, a 408 before
 * the server closes - or the server's close mean the connection is out
 * of step: the next answer read there would be those bytes, not the
 * request's. It is closed and counted (dropped), and the request takes
 * the next one or dials, so that even a request never retried (a POST)
 * does not go out on it.
 */
#include "client.h"

#include <stdlib.h>
#include <string.h>

#define SWEEP_NS (1000 * 1000000ull)
#define CLOSE_WAIT_NS (10 * 1000 * 1000000ll) /* destroy's wait, once cancelled */
#define SETTLE_POLL_NS (5 * 1000 * 1000ull)   /* destroy's look at live requests */
#define SWEEP_MIN_NS (10 * 1000 * 1000ull)    /* the sweeper's shortest period */

/* ----------------------------------------------------------------- cores */

struct http_client_core *runtime__http_client_core(struct runtime_http_client *cl)
{
	int i = runtime_core_index();
	struct http_client_core *core;

	if (i < 0 || (unsigned)i >= RUNTIME_MAX_CORES)
		return NULL;
	core = atomic_load_explicit(&cl->cores[i], memory_order_relaxed);
	if (core)
		return core; /* only this core's thread ever stores it */
	if (!(core = aligned_alloc(64, sizeof(*core))))
		return NULL;
	memset(core, 0, sizeof(*core));
	core->cl = cl;
	core->index = (unsigned)i;
	atomic_store_explicit(&cl->cores[i], core, memory_order_release);
	return core;
}

/* --------------------------------------------------------------- origins */

static unsigned char lower(char c)
{
	return (unsigned char)(c >= 'A' && c <= 'Z' ? c | 0x20 : c);
}

static unsigned bucket_of(bool https, uint16_t port, const char *host, size_t n)
{
	uint32_t h = 2166136261u ^ port ^ ((uint32_t)https << 16); /* FNV-1a */

	for (size_t i = 0; i < n; i++)
		h = (h ^ lower(host[i])) * 16777619u;
	return h % HTTP_ORIGIN_BUCKETS;
}

static bool same_origin(const struct http_origin *o, bool https, uint16_t port,
                        const char *host, size_t n)
{
	if (o->https != https || o->port != port || o->host_len != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (lower(o->host[i]) != lower(host[i]))
			return false;
	return true;
}

/* The origin's pool (made if make), or NULL. */
static struct http_origin *origin(struct http_client_core *core, bool https, uint16_t port,
                                  const char *host, size_t n, bool make)
{
	struct http_origin **b = &core->buckets[bucket_of(https, port, host, n)], *o;

	for (o = *b; o; o = o->next)
		if (same_origin(o, https, port, host, n))
			return o;
	if (!make || !(o = malloc(sizeof(*o) + n + 1)))
		return NULL;
	*o = (struct http_origin){ .next = *b, .https = https, .port = port, .host_len = n };
	memcpy(o->host, host, n);
	o->host[n] = '\0';
	*b = o;
	return o;
}

struct http_origin *runtime__http_origin(struct http_client_core *core, const struct http_url *u,
                                         bool make)
{
	return origin(core, u->https, u->port, u->host.p, u->host.len, make);
}

/* Nothing refers to o any more: it may go. */
static bool origin_unused(const struct http_origin *o)
{
	return !o->nidle && !o->h2 && !o->dialing && !o->nwaiters;
}

int runtime__http_origin_wait(struct http_origin *o, uint64_t deadline)
{
	if (o->nwaiters == o->waiters_cap) {
		unsigned cap = o->waiters_cap ? 2 * o->waiters_cap : 8;
		struct runtime_fiber **w = realloc(o->waiters, cap * sizeof(*w));
		if (!w)
			return -ENOMEM;
		o->waiters = w;
		o->waiters_cap = cap;
	}
	struct runtime_fiber *self = runtime_fiber_self();
	o->waiters[o->nwaiters++] = self;
	uint64_t now = runtime_now();
	int rc = runtime_park(!deadline ? -1 : deadline > now ? (int64_t)(deadline - now) : 0);
	for (unsigned i = 0; i < o->nwaiters; i++) /* still there if not woken */
		if (o->waiters[i] == self)
			o->waiters[i] = o->waiters[--o->nwaiters];
	return rc == -ECANCELED || rc == -ETIMEDOUT ? rc : 0;
}

void runtime__http_origin_wake(struct http_origin *o)
{
	while (o->nwaiters)
		runtime_fiber_unpark(o->waiters[--o->nwaiters]);
}

/* ----------------------------------------------------------------- sweep */

static bool expired(const struct runtime_http_client *cl, const struct http_cconn *c,
                    uint64_t now)
{
	return now - c->idle_since >= cl->cfg.idle_timeout_ns;
}

/* Close o's connections past the idle timeout (the oldest, at the end),
 * or all of them. */
static void sweep_origin(struct http_client_core *core, struct http_origin *o, uint64_t now,
                         bool all)
{
	struct http_cconn **p = &o->idle;

	while (*p && !all && !expired(core->cl, *p, now))
		p = &(*p)->next;
	while (*p) {
		struct http_cconn *c = *p;
		*p = c->next;
		o->nidle--;
		core->idle--;
		runtime__http_cconn_close(c);
	}
}

/* At most once a second: every idle connection of the core past its
 * time is closed, and the origins left without any are freed. */
static void sweep(struct http_client_core *core, uint64_t now, bool all)
{
	if (!all && now < core->next_sweep)
		return;
	core->next_sweep = now + SWEEP_NS;
	for (unsigned i = 0; i < HTTP_ORIGIN_BUCKETS; i++) {
		struct http_origin **p = &core->buckets[i];
		while (*p) {
			struct http_origin *o = *p;
			sweep_origin(core, o, now, all);
			if (origin_unused(o)) {
				*p = o->next;
				free(o->waiters);
				free(o);
			} else {
				p = &o->next;
			}
		}
	}
}

/* ------------------------------------------------------------ the sweeper */

/*
 * A core holding idle connections sweeps them on a background timer
 * (it keeps no run going), every quarter of the idle timeout, so that
 * they close in time though no request comes. The timer's callback runs
 * outside a fiber, and closing may write (TLS): it spawns a fiber on
 * the core for the sweep. The timer, then that fiber, count as live:
 * destroy cancels the timer and waits for them.
 */
static void sweep_tick(struct runtime_timer *t, void *arg, enum runtime_timer_why why);

static void sweeper_arm(struct http_client_core *core)
{
	const struct runtime_http_client *cl = core->cl;
	uint64_t delay = cl->cfg.idle_timeout_ns / 4;

	if (core->sweeper_armed || cl->cfg.idle_timeout_ns == UINT64_MAX ||
	    atomic_load_explicit(&cl->closing, memory_order_relaxed))
		return;
	if (delay < SWEEP_MIN_NS)
		delay = SWEEP_MIN_NS;
	if (runtime_timer_start_background(&core->sweeper, delay, sweep_tick, core) == 0) {
		core->sweeper_armed = true;
		core->live++;
	}
}

static void sweep_fiber(void *arg)
{
	struct http_client_core *core = arg;

	core->next_sweep = 0; /* now, whatever the last one */
	sweep(core, runtime_now(), false);
	core->live--;
	if (core->idle)
		sweeper_arm(core);
}

static void sweep_tick(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	struct http_client_core *core = arg;

	(void)t;
	core->sweeper_armed = false;
	if (why == RUNTIME_TIMER_FIRED && core->idle &&
	    runtime_spawn_on(runtime_current(), core->index, sweep_fiber, core) == 0)
		return; /* its live count passes to the fiber */
	core->live--;
}

/* --------------------------------------------------------- take and put */

/* Still good to send on: not past the idle timeout, and nothing of the
 * server's came while it was idle (see the top). */
static bool usable(const struct runtime_http_client *cl, struct http_cconn *c, uint64_t now)
{
	return !expired(cl, c, now) && runtime_conn_pending(c->rc) == 0;
}

void runtime__http_pool_sweep(struct http_client_core *core)
{
	sweep(core, runtime_now(), false);
}

struct http_cconn *runtime__http_pool_take(struct http_client_core *core, struct http_origin *o)
{
	uint64_t now = runtime_now();

	while (o->idle) {
		struct http_cconn *c = o->idle;
		o->idle = c->next;
		o->nidle--;
		core->idle--;
		if (usable(core->cl, c, now))
			return c;
		http_count(&core->dropped);
		runtime__http_cconn_close(c);
	}
	return NULL;
}

/* Idle from now on: no deadline, nothing buffered. */
static void make_idle(struct http_cconn *c, uint64_t now)
{
	c->keep = c->in_off = c->in_len = 0;
	c->idle_since = now;
	runtime_conn_set_read_deadline(c->rc, 0);
	runtime_conn_set_write_deadline(c->rc, 0);
}

void runtime__http_pool_put(struct http_cconn *c)
{
	struct http_client_core *core = c->core;
	struct runtime_http_client *cl = core->cl;
	uint64_t now = runtime_now();
	struct http_origin *o = NULL;

	sweep(core, now, false);
	if (cl->cfg.max_per_origin && !runtime_draining(runtime_current()))
		o = origin(core, c->https, c->port, c->host, c->host_len, true);
	if (!o || o->nidle >= cl->cfg.max_per_origin) {
		runtime__http_cconn_close(c);
		return;
	}
	make_idle(c, now);
	c->next = o->idle;
	o->idle = c;
	o->nidle++;
	core->idle++;
	sweeper_arm(core);
}

/* ---------------------------------------------------------------- dialling */

static struct http_cconn *cconn_new(struct http_client_core *core, const struct http_url *u)
{
	size_t in_size = core->cl->limits.head_max + 4096;
	struct http_cconn *c;

	if (in_size < HTTP_CLIENT_IN_MIN)
		in_size = HTTP_CLIENT_IN_MIN;
	if (!(c = malloc(sizeof(*c) + in_size)))
		return NULL;
	memset(c, 0, sizeof(*c));
	c->core = core;
	c->in_size = in_size;
	c->https = u->https;
	c->port = u->port;
	c->host_len = (uint16_t)u->host.len;
	memcpy(c->host, u->host.p, u->host.len);
	c->host[u->host.len] = '\0';
	return c;
}

/* Over TLS, HTTP/1.1 or (unless no_h2) h2 may have been agreed; another
 * protocol of a context of the caller's is refused. */
static int check_alpn(const struct runtime_http_client *cl, struct http_cconn *c)
{
	struct runtime_tls_info info;
	int rc = runtime_conn_tls_info(c->rc, &info);

	if (rc < 0)
		return rc;
	c->h2 = info.alpn && !strcmp(info.alpn, "h2") && !cl->cfg.no_h2;
	return c->h2 || !info.alpn || !strcmp(info.alpn, "http/1.1") ? 0 : -ENOPROTOOPT;
}

/* TCP (and TLS) to c's origin, under the caller's deadline. */
static int connect_cconn(struct runtime_http_client *cl, struct http_cconn *c)
{
	struct runtime_tls *tls = NULL;
	int fd, rc;

	if (c->https && (rc = runtime__http_client_tls(cl, &tls)) < 0)
		return rc;
	if ((fd = runtime_tcp_connect(c->host, c->port)) < 0)
		return fd;
	if ((rc = runtime_conn_open(&c->rc, fd, 0)) < 0) {
		runtime_close(fd); /* the connection owns fd only after a 0 */
		return rc;
	}
	if (!c->https) {
		c->h2 = cl->cfg.h2c; /* prior knowledge, as asked */
		return 0;
	}
	rc = runtime_conn_tls_connect(c->rc, tls, c->host);
	return rc < 0 ? rc : check_alpn(cl, c);
}

int runtime__http_dial(struct http_client_core *core, const struct http_url *u, uint64_t deadline,
                       struct http_cconn **out)
{
	struct runtime_http_client *cl = core->cl;
	uint64_t own = runtime_deadline_get();
	struct http_cconn *c;
	int rc;

	if (!(c = cconn_new(core, u)))
		return -ENOMEM;
	runtime_deadline_set(http_earlier(own, http_earlier(deadline,
	                                                    http_after(cl->cfg.connect_timeout_ns))));
	rc = connect_cconn(cl, c);
	runtime_deadline_set(own);
	if (rc < 0) {
		runtime__http_cconn_close(c);
		return rc;
	}
	http_count(&core->connects);
	*out = c;
	return 0;
}

void runtime__http_cconn_close(struct http_cconn *c)
{
	if (c->rc)
		runtime_conn_close(c->rc);
	free(c);
}

/* ---------------------------------------------------------------- destroy */

struct closer {
	struct http_client_core *core;
	struct runtime_waitgroup *wg;
	int rc;
};

/* This core's requests and open results waited for (polling: destroy
 * is rare; inside a cleanup, so that a cancelled fiber still waits for
 * CLOSE_WAIT_NS), then every connection of the core closed: its idle
 * HTTP/1.1 ones, its HTTP/2 ones (their fibers waited for). 0, or
 * -EBUSY: some are still live, and may use the client. */
static int settle_core(struct http_client_core *core)
{
	struct runtime_cleanup cleanup;
	int rc = 0;

	if (core->sweeper_armed)
		runtime_timer_cancel(&core->sweeper); /* its callback lets go of live */
	runtime_cleanup_begin(&cleanup, CLOSE_WAIT_NS);
	while (core->live && rc == 0)
		rc = runtime_sleep(SETTLE_POLL_NS);
	runtime_cleanup_end(&cleanup);
	runtime__h2_client_close_all(core);
	sweep(core, 0, true);
	return core->live ? -EBUSY : 0;
}

static void close_core(void *arg)
{
	struct closer *job = arg;

	job->rc = settle_core(job->core);
	runtime_waitgroup_done(job->wg);
}

/* Each core settled on that core: this one's here, the others' by a
 * fiber spawned there, waited for (inside a cleanup, so that a cancelled
 * caller still waits: the fibers use cl). Returns 0, or -EBUSY if a
 * core's requests or fiber did not end in time: cl must then not be
 * freed. */
static int close_from_fiber(struct runtime_http_client *cl, struct closer *jobs)
{
	struct runtime_waitgroup wg = RUNTIME_WAITGROUP_INIT;
	struct runtime_cleanup cleanup;
	struct runtime *rt = runtime_current();
	int me = runtime_core_index(), rc = 0;

	for (unsigned i = 0; i < RUNTIME_MAX_CORES; i++) {
		struct http_client_core *core = atomic_load_explicit(&cl->cores[i], memory_order_acquire);
		if (!core || (int)i == me)
			continue;
		jobs[i] = (struct closer){ core, &wg, 0 };
		runtime_waitgroup_add(&wg, 1);
		if (runtime_spawn_on(rt, i, close_core, &jobs[i]) < 0)
			runtime_waitgroup_done(&wg); /* left open: told below */
	}
	if (me >= 0 && (unsigned)me < RUNTIME_MAX_CORES && cl->cores[me])
		rc = settle_core(cl->cores[me]); /* this core's own store: read plainly */
	runtime_cleanup_begin(&cleanup, CLOSE_WAIT_NS);
	if (runtime_waitgroup_wait(&wg, -1) < 0)
		rc = -EBUSY;
	runtime_cleanup_end(&cleanup);
	for (unsigned i = 0; i < RUNTIME_MAX_CORES; i++)
		rc = jobs[i].rc < 0 ? jobs[i].rc : rc;
	return rc;
}

int runtime__http_pools_close(struct runtime_http_client *cl)
{
	struct closer *jobs;
	unsigned left = 0;
	int rc = 0;

	atomic_store_explicit(&cl->closing, true, memory_order_release);
	if (runtime_fiber_self() && runtime_current()) {
		if (!(jobs = calloc(RUNTIME_MAX_CORES, sizeof(*jobs))))
			return -ENOMEM;
		rc = close_from_fiber(cl, jobs);
		if (rc == 0)
			free(jobs); /* else a closer may still read its job */
	}
	for (unsigned i = 0; rc == 0 && i < RUNTIME_MAX_CORES; i++) {
		struct http_client_core *core = atomic_load_explicit(&cl->cores[i], memory_order_acquire);
		left += core ? core->idle + core->h2_conns : 0;
		if (core && (core->live || core->sweeper_armed))
			rc = -EBUSY; /* not from a fiber: a request, or the sweeper's timer */
	}
	if (rc < 0 || left)
		fprintf(stderr, "runtime: misuse: runtime_http_client_destroy: %s\n",
		        rc < 0 ? "requests still under way or results open after the wait: the "
		                 "client is left allocated"
		               : "idle connections not closed (not called from a fiber): destroy "
		                 "the client from a fiber of its runtime");
	return rc;
}

/* Free what the pools hold once their connections are closed (or, outside
 * a fiber, can no longer be): the origins, and each core's counters. */
void runtime__http_pools_free(struct runtime_http_client *cl)
{
	for (unsigned i = 0; i < RUNTIME_MAX_CORES; i++) {
		struct http_client_core *core = atomic_load_explicit(&cl->cores[i], memory_order_acquire);
		if (!core)
			continue;
		for (unsigned b = 0; b < HTTP_ORIGIN_BUCKETS; b++)
			for (struct http_origin *o = core->buckets[b], *next; o; o = next) {
				next = o->next;
				free(o->waiters);
				free(o); /* its connections, if any, are left open (said) */
			}
		free(core);
	}
}
