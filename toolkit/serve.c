/* SPDX-License-Identifier: MIT */
/*
 * serve.c - serve TCP on every core: a listening socket per core with
 * SO_REUSEPORT (the kernel spreads connections over them by their
 * addresses' hash; one socket shared by every core would not), an
 * acceptor fiber per core taking connections through a listener, and a
 * fiber per connection running the caller's handler with a connection
 * (conn.c) whose peer address is known. Over max_conns live connections,
 * a new one is accepted and closed at once, and counted.
 *
 * Each core also has a watcher fiber, waiting for the runtime's drain or
 * runtime_server_stop (a select over two channels). When one comes it
 * shuts its core's listening socket down, which ends the acceptor's wait
 * (-EINVAL), and - on a drain - expires the reads of the core's idle
 * connections, which then read -ESHUTDOWN and close; connections in the
 * middle of a request finish it.
 *
 * Under socket activation (activation.c) the server takes the inherited
 * socket instead, one socket shared by every core (each core's acceptor
 * takes turns on it), and the watcher cancels its acceptor rather than
 * shut the manager's socket down. Once every core's acceptor runs, the
 * server says READY=1 (runtime_notify). Everything here uses only public
 * calls, but for the claim of an inherited socket.
 */
#include "toolkit.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A core's live connections, and those its release sweep watches
 * (toolkit.h's struct release_watch), on a cache line of its own. */
struct core_conns {
	struct runtime_conn *head;
	struct runtime_server *srv;
	struct runtime_conn *watched;
	struct runtime_timer sweep;
	bool sweeping;              /* sweep armed, or its callback due */
	bool drain_watched;         /* the watcher waits for the drain */
	struct runtime_fiber *acceptor; /* inherited socket: the watcher's to cancel */
	bool ending;                /* inherited socket: the watcher has seen the end */
} __attribute__((aligned(64)));

struct runtime_server {
	struct runtime *rt;
	runtime_serve_fn *handler;
	void *arg;
	unsigned max_conns;
	unsigned conn_flags;        /* for runtime_conn_open */
	uint64_t release_after;     /* 0: never */
	bool plain_accept;
	runtime_serve_layer_fn *layer; /* accept-time, or NULL */
	void *layer_arg;
	unsigned ncores;
	int *fds;                   /* each core's listening socket */
	bool inherited;             /* fds: one socket activation's socket, dup'ed */
	bool notify_ready;
	_Atomic unsigned listening; /* acceptors started: READY=1 at ncores */
	uint16_t port;
	struct runtime_chan *stop;  /* closed by runtime_server_stop */
	_Atomic bool stopped;
	_Atomic unsigned live;
	_Atomic uint64_t accepted, refused, errors, layer_failed;
	struct core_conns *conns;
};

void runtime_serve_config_init(struct runtime_serve_config *cfg)
{
	if (cfg)
		*cfg = (struct runtime_serve_config){ .nodelay = 1, .notify_ready = 1 };
}

/* ------------------------------------------------------------ connections */

static void conns_add(struct runtime_server *srv, struct runtime_conn *c)
{
	struct core_conns *l = &srv->conns[c->core];

	c->prev = NULL;
	c->next = l->head;
	if (l->head)
		l->head->prev = c;
	l->head = c;
}

static void conns_remove(struct runtime_server *srv, struct runtime_conn *c)
{
	struct core_conns *l = &srv->conns[c->core];

	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

static void unlink_watch(struct core_conns *l, struct runtime_conn *c);

static void conn_end(struct runtime_server *srv, struct runtime_conn *c)
{
	conns_remove(srv, c);
	if (c->watch.linked)
		unlink_watch(&srv->conns[c->core], c);
	runtime_conn_close(c);
	atomic_fetch_sub(&srv->live, 1);
}

/* The handler, and the close after it - unless it waits with no fiber
 * (runtime_conn_idle): then its next fiber comes back here. */
static void run_handler(struct runtime_server *srv, struct runtime_conn *c,
                        runtime_serve_fn *fn, void *arg)
{
	fn(c, arg);
	if (!c->waiting)
		conn_end(srv, c);
}

void runtime__serve_resume(struct runtime_conn *c)
{
	struct runtime_server *srv = c->server;

	if (c->resume_fn)
		run_handler(srv, c, c->resume_fn, c->resume_arg);
	else
		run_handler(srv, c, srv->handler, srv->arg);
}

static void conn_fiber(void *arg)
{
	struct runtime_conn *c = arg;
	struct runtime_server *srv = c->server;

	if (!srv->layer || srv->layer(c, srv->layer_arg) >= 0) {
		run_handler(srv, c, srv->handler, srv->arg);
		return;
	}
	atomic_fetch_add(&srv->layer_failed, 1);
	conn_end(srv, c);
}

/* A connection accepted on this core: served, or refused over the cap. */
static void admit(struct runtime_server *srv, int fd, const struct sockaddr_storage *peer,
                  socklen_t len)
{
	struct runtime_conn *c;

	if (srv->max_conns && atomic_fetch_add(&srv->live, 1) >= srv->max_conns) {
		atomic_fetch_sub(&srv->live, 1);
		atomic_fetch_add(&srv->refused, 1);
		runtime_close(fd);
		return;
	}
	if (!srv->max_conns)
		atomic_fetch_add(&srv->live, 1);
	if (runtime_conn_open(&c, fd, srv->conn_flags) < 0) {
		runtime_close(fd);
		atomic_fetch_sub(&srv->live, 1);
		atomic_fetch_add(&srv->refused, 1);
		return;
	}
	runtime__conn_peer_set(c, peer, len); /* or unknown: asked for later */
	c->server = srv;
	c->watch.on = srv->release_after != 0;
	conns_add(srv, c);
	atomic_fetch_add(&srv->accepted, 1);
	if (runtime_spawn(srv->rt, conn_fiber, c) < 0) { /* out of memory, or a shutdown */
		conns_remove(srv, c);
		runtime_conn_close(c);
		atomic_fetch_sub(&srv->live, 1);
	}
}

/* --------------------------------------------------------- the release */

/*
 * release_after: an idle connection's read that waits is watched (its
 * connection on its core's list: toolkit.h's struct release_watch), and a
 * sweep every release_after (a timer of the core, armed only while the
 * list has some) releases those it finds reading the same read a second
 * time - quiet for between one and two periods, with no clock read per
 * read: their read returns -EAGAIN and the handler hands the connection
 * to runtime_conn_idle. Those not reading leave the list at a sweep: each
 * sweep walks the connections that read idle since the last one, never
 * every connection.
 */
static void sweep(struct runtime_timer *t, void *arg, enum runtime_timer_why why);

static void sweep_arm(struct core_conns *l)
{
	l->sweeping = runtime_timer_start(&l->sweep, l->srv->release_after, sweep, l) == 0;
}

static void unlink_watch(struct core_conns *l, struct runtime_conn *c)
{
	if (c->watch_prev)
		c->watch_prev->watch_next = c->watch_next;
	else
		l->watched = c->watch_next;
	if (c->watch_next)
		c->watch_next->watch_prev = c->watch_prev;
	c->watch.linked = false;
}

/* A shutdown's end of the timer releases nobody: the reads are cancelled. */
static void sweep(struct runtime_timer *t, void *arg, enum runtime_timer_why why)
{
	struct core_conns *l = arg;

	(void)t;
	l->sweeping = false;
	if (why != RUNTIME_TIMER_FIRED)
		return;
	for (struct runtime_conn *c = l->watched, *next; c; c = next) {
		struct release_watch *w = &c->watch;
		next = c->watch_next;
		if (w->reading && (!w->seen || !c->rd.fiber)) { /* (no fiber: not parked yet) */
			w->seen = true;
			continue;
		}
		unlink_watch(l, c);
		if (w->reading) {
			w->released = true;
			runtime_fiber_expire(c->rd.fiber);
		}
	}
	if (l->watched)
		sweep_arm(l);
}

bool runtime__serve_drain_watched(const struct runtime_conn *c)
{
	return c->server->conns[c->core].drain_watched;
}

void runtime__serve_watch(struct runtime_conn *c)
{
	struct core_conns *l = &c->server->conns[c->core];
	c->watch_prev = NULL;
	c->watch_next = l->watched;
	if (l->watched)
		l->watched->watch_prev = c;
	l->watched = c;
	c->watch.linked = true;
	if (!l->sweeping)
		sweep_arm(l);
}

/* ------------------------------------------------------------ each core */

static int next_connection(struct runtime_server *srv, struct runtime_listener *l,
                           struct sockaddr_storage *peer, socklen_t *len)
{
	if (srv->plain_accept)
		return runtime_accept(srv->fds[runtime_core_index()], (struct sockaddr *)peer, len,
		                      SOCK_CLOEXEC);
	return runtime_listener_accept(l, (struct sockaddr *)peer, len);
}

static void acceptor(void *arg)
{
	struct runtime_server *srv = arg;
	struct runtime_listener *l = NULL;
	struct core_conns *cc = &srv->conns[runtime_core_index()];

	if (!srv->plain_accept &&
	    runtime_listener_open(&l, srv->fds[runtime_core_index()], SOCK_CLOEXEC) < 0)
		return;
	cc->acceptor = runtime_fiber_self();
	if (atomic_fetch_add(&srv->listening, 1) + 1 == srv->ncores && srv->notify_ready)
		runtime_notify("READY=1"); /* every core listens */
	while (!atomic_load(&srv->stopped) && !cc->ending) {
		struct sockaddr_storage peer;
		socklen_t len = sizeof(peer);
		int fd = next_connection(srv, l, &peer, &len);
		if (fd >= 0 && !atomic_load(&srv->stopped)) {
			admit(srv, fd, &peer, len);
		} else if (fd >= 0) {
			runtime_close(fd);
		} else if (fd == -ECANCELED || fd == -EINVAL) {
			break; /* shut down, or the socket was (a stop, a drain) */
		} else {
			atomic_fetch_add(&srv->errors, 1); /* out of fds or memory: */
			if (runtime_sleep(10 * 1000 * 1000) == -ECANCELED) /* back off */
				break;
		}
	}
	cc->acceptor = NULL;
	runtime_listener_close(l);
}

/* On a drain: connections waiting for their next request close now. */
static void close_idle(struct runtime_server *srv)
{
	for (struct runtime_conn *c = srv->conns[runtime_core_index()].head; c; c = c->next)
		if (c->idle && c->rd.fiber)
			runtime_fiber_expire(c->rd.fiber);
}

/* A shutdown ends every core's accept on the socket at once; but an
 * inherited socket is the service manager's too, and one shut down would
 * stop listening for good - the next start of the service would find it
 * dead - so there each core's acceptor is cancelled instead (or told, if
 * it has not run yet: the same core, no race). */
static void stop_accepting(struct runtime_server *srv)
{
	struct core_conns *cc = &srv->conns[runtime_core_index()];

	if (!srv->inherited) {
		shutdown(srv->fds[runtime_core_index()], SHUT_RD);
		return;
	}
	cc->ending = true;
	if (cc->acceptor)
		runtime_fiber_cancel(cc->acceptor);
}

static void watcher(void *arg)
{
	struct runtime_server *srv = arg;
	char byte;
	struct runtime_chan_op ops[2] = {
		{ .chan = srv->stop, .dir = RUNTIME_CHAN_RECV, .elem = &byte },
		{ .chan = runtime_drain_chan(srv->rt), .dir = RUNTIME_CHAN_RECV, .elem = &byte },
	};
	bool *watched = &srv->conns[runtime_core_index()].drain_watched;

	/* While it waits, the core's idle reads leave the drain to it: they
	 * wait, and close_idle wakes them to read -ESHUTDOWN. */
	*watched = ops[1].chan != NULL;
	int rc = runtime_chan_select(ops, ops[1].chan ? 2 : 1, -1);
	*watched = false;
	stop_accepting(srv);
	if (rc == 1 || runtime_draining(srv->rt))
		close_idle(srv);
}

/* ---------------------------------------------------------------- start */

static uint16_t socket_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                                      : ((struct sockaddr_in *)&ss)->sin_port);
}

/* Socket activation: the one inherited socket, shared by every core (a
 * dup each, so that each core's fd closes on its own; the listeners see
 * one socket and take turns, listener.c). nodelay sets TCP_NODELAY on
 * it, for the connections to inherit (as the unit's NoDelay= would). */
static int share_inherited(struct runtime_server *srv, int fd, int nodelay)
{
	int one = 1;

	if (nodelay)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	srv->inherited = true;
	srv->fds[0] = fd;
	for (unsigned i = 1; i < srv->ncores; i++)
		if ((srv->fds[i] = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
			return -errno;
	srv->port = socket_port(fd);
	return 0;
}

/* A socket per core, in one SO_REUSEPORT group: the first checks that no
 * other process holds the port (unless share_port), the others join it.
 * Unless socket activation passed a socket for cfg: then that one. */
static int open_sockets(struct runtime_server *srv, const struct runtime_serve_config *cfg)
{
	unsigned flags = RUNTIME_LISTEN_REUSEPORT | (cfg->nodelay ? RUNTIME_LISTEN_NODELAY : 0);
	uint16_t port = cfg->port;
	int inherited, rc = runtime__listen_claim(cfg, &inherited);

	if (rc != 0)
		return rc < 0 ? rc : share_inherited(srv, inherited, cfg->nodelay);

	for (unsigned i = 0; i < srv->ncores; i++) {
		unsigned own = i == 0 && !cfg->share_port ? RUNTIME_LISTEN_EXCLUSIVE : 0;
		int fd = runtime_tcp_listen(cfg->host, port, cfg->backlog, flags | own);
		if (fd < 0)
			return fd;
		srv->fds[i] = fd;
		if (!port)
			port = socket_port(fd);
	}
	srv->port = port;
	return 0;
}

/* Every core's watcher, then its acceptor. A spawn can fail only for want
 * of memory (or a shutdown): then the server is stopped, the fibers that
 * did start end by themselves, and the caller still destroys it. */
/* Spawn each core's fibers. Returns how many started; *rc the error that
 * stopped it (the server is stopped then: those started end by
 * themselves). */
static unsigned start_fibers(struct runtime_server *srv, int *rc)
{
	unsigned started = 0;

	*rc = 0;
	for (unsigned i = 0; i < srv->ncores && *rc == 0; i++) {
		if ((*rc = runtime_spawn_on(srv->rt, i, watcher, srv)) == 0)
			started++;
		if (*rc == 0 && (*rc = runtime_spawn_on(srv->rt, i, acceptor, srv)) == 0)
			started++;
	}
	if (*rc < 0)
		runtime_server_stop(srv);
	return started;
}

static struct runtime_server *server_new(struct runtime *rt,
                                         const struct runtime_serve_config *cfg)
{
	struct runtime_server *srv = calloc(1, sizeof(*srv));
	unsigned n = runtime_cores(rt);

	if (!srv)
		return NULL;
	srv->rt = rt;
	srv->handler = cfg->handler;
	srv->arg = cfg->arg;
	srv->max_conns = cfg->max_conns;
	srv->conn_flags = cfg->plain_recv ? RUNTIME_CONN_PLAIN_RECV : 0;
	srv->release_after = cfg->release_after_ns;
	srv->plain_accept = cfg->plain_accept;
	srv->layer = cfg->layer;
	srv->layer_arg = cfg->layer_arg;
	srv->notify_ready = cfg->notify_ready;
	srv->ncores = n;
	srv->fds = malloc(n * sizeof(*srv->fds));
	srv->conns = aligned_alloc(64, n * sizeof(*srv->conns));
	if (!srv->fds || !srv->conns || runtime_chan_create(&srv->stop, 1, 0) < 0) {
		runtime_server_destroy(srv);
		return NULL;
	}
	memset(srv->conns, 0, n * sizeof(*srv->conns));
	for (unsigned i = 0; i < n; i++)
		srv->conns[i].srv = srv;
	for (unsigned i = 0; i < n; i++)
		srv->fds[i] = -1;
	return srv;
}

int runtime_serve(struct runtime *rt, const struct runtime_serve_config *cfg,
                  struct runtime_server **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!rt || !cfg || !cfg->handler)
		return -EINVAL;
	if (runtime_draining(rt))
		return -ESHUTDOWN;
	struct runtime_server *srv = server_new(rt, cfg);
	if (!srv)
		return -ENOMEM;
	int rc = open_sockets(srv, cfg);
	if (rc < 0) {
		runtime_server_destroy(srv);
		return rc;
	}
	if (start_fibers(srv, &rc) > 0 || rc == 0)
		*out = srv; /* a fiber uses it: destroyed after the run */
	else
		runtime_server_destroy(srv);
	return rc;
}

/* ----------------------------------------------------------- the handle */

uint16_t runtime_server_port(const struct runtime_server *srv)
{
	return srv ? srv->port : 0;
}

void runtime_server_stats(const struct runtime_server *srv, struct runtime_server_stats *st)
{
	if (!st)
		return;
	*st = (struct runtime_server_stats){ 0 };
	if (!srv)
		return;
	st->live = atomic_load(&srv->live);
	st->accepted = atomic_load(&srv->accepted);
	st->refused = atomic_load(&srv->refused);
	st->errors = atomic_load(&srv->errors);
	st->layer_failed = atomic_load(&srv->layer_failed);
}

int runtime_server_stop(struct runtime_server *srv)
{
	if (!srv)
		return -EINVAL;
	if (!atomic_exchange(&srv->stopped, true))
		runtime_chan_close(srv->stop); /* wakes every core's watcher */
	return 0;
}

void runtime_server_destroy(struct runtime_server *srv)
{
	if (!srv)
		return;
	for (unsigned i = 0; srv->fds && i < srv->ncores; i++)
		if (srv->fds[i] >= 0)
			close(srv->fds[i]);
	runtime_chan_destroy(srv->stop);
	free(srv->fds);
	free(srv->conns);
	free(srv);
}
