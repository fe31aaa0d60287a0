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
#include <pthread.h>
#include <stdio.h>
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
	bool ending;                /* a stop that leaves the sockets listening
	                               (inherited, or handed over): seen */
} __attribute__((aligned(64)));

/* A listening socket's acceptor: socket index runs on core index %
 * ncores (a successor with fewer cores than its predecessor had sockets
 * serves them all). */
struct accept_slot {
	struct runtime_server *srv;
	unsigned index;
	struct runtime_fiber *fiber; /* while it accepts: the watcher's to expire */
};

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
	unsigned nfds;              /* listening sockets: ncores, or more handed */
	int *fds;                   /* the listening sockets */
	struct accept_slot *slots;  /* their acceptors */
	bool inherited;             /* fds: one inherited socket, dup'ed */
	bool handed;                /* the predecessor's sockets (handover.c) */
	bool notify_ready;
	int log_fd;                 /* accept failures told, or -1 */
	_Atomic uint64_t next_report; /* runtime_now() the next may be told */
	_Atomic uint64_t reported;  /* errors as of the last line told */
	_Atomic unsigned listening; /* acceptors started: READY=1 at nfds */
	uint16_t port;
	struct handover_msg key;    /* the listening address, for a successor */
	struct runtime_chan *stop;  /* closed by runtime_server_stop */
	_Atomic bool stopped;
	_Atomic unsigned live, next_core;
	_Atomic uint64_t accepted, refused, errors, layer_failed, moved_in, moved_out;
	struct core_conns *conns;
	struct runtime_server *next_live; /* in the process's list (registry) */
};

/* Every server of the process, for a restart's handover (runtime__serve_offer). */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct runtime_server *registry;

void runtime_serve_config_init(struct runtime_serve_config *cfg)
{
	if (cfg)
		*cfg = (struct runtime_serve_config){ .nodelay = 1, .notify_ready = 1, .log_fd = 2 };
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

/* A connection accepted on this core (or handed over by a predecessor:
 * adopted): served, or refused over the cap. */
static void admit(struct runtime_server *srv, int fd, const struct sockaddr_storage *peer,
                  socklen_t len, bool adopted)
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
	atomic_fetch_add(adopted ? &srv->moved_in : &srv->accepted, 1);
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

static int next_connection(struct accept_slot *a, struct runtime_listener *l,
                           struct sockaddr_storage *peer, socklen_t *len)
{
	if (a->srv->plain_accept)
		return runtime_accept(a->srv->fds[a->index], (struct sockaddr *)peer, len,
		                      SOCK_CLOEXEC);
	return runtime_listener_accept(l, (struct sockaddr *)peer, len);
}

/* The acceptor's end: the kernel's accepting stopped, and what the
 * listener took served, not closed - a stop that leaves the socket
 * listening (a handover) must lose nothing, and a drain serves them. */
static void take_queued(struct runtime_server *srv, struct runtime_listener *l)
{
	int n = l ? runtime_listener_stop(l) : 0;

	while (n-- > 0) {
		struct sockaddr_storage peer;
		socklen_t len = sizeof(peer);
		int fd = runtime_listener_accept(l, (struct sockaddr *)&peer, &len);
		if (fd >= 0 && !atomic_load(&srv->stopped))
			admit(srv, fd, &peer, len, false);
		else if (fd >= 0)
			runtime_close(fd);
	}
	runtime_listener_close(l);
}

/* Every acceptor runs: READY=1 to the manager (a successor's with its
 * pid, the service's main one from now), READY to a predecessor. */
static void all_accepting(struct runtime_server *srv)
{
	char state[64];

	snprintf(state, sizeof(state), "READY=1\nSTATUS=took over\nMAINPID=%d", (int)getpid());
	if (srv->notify_ready)
		runtime_notify(srv->handed ? state : "READY=1");
	if (srv->handed)
		runtime__handover_listening(srv->rt, srv);
}

/* An accept failed with err: counted, and told at most once a second
 * for the whole server (the core that claims the second tells it), with
 * how many failed since the last line. */
static void accept_failed(struct runtime_server *srv, int err)
{
	atomic_fetch_add(&srv->errors, 1);
	uint64_t now = runtime_now(), next = atomic_load(&srv->next_report);
	if (srv->log_fd < 0 || now < next ||
	    !atomic_compare_exchange_strong(&srv->next_report, &next, now + 1000 * 1000 * 1000))
		return;
	uint64_t total = atomic_load(&srv->errors), told = atomic_exchange(&srv->reported, total);
	unsigned long long n = total > told ? total - told : 0; /* 0: a claimer stalled 1 s */
	runtime_log(srv->log_fd, "runtime_serve: port %u: accept: %s (%llu failed since the "
	            "last report; retrying every 10 ms)\n", srv->port, strerror(-err), n);
}

static void acceptor(void *arg)
{
	struct accept_slot *a = arg;
	struct runtime_server *srv = a->srv;
	struct runtime_listener *l = NULL;
	struct core_conns *cc = &srv->conns[runtime_core_index()];

	if (!srv->plain_accept && runtime_listener_open(&l, srv->fds[a->index], SOCK_CLOEXEC) < 0)
		return;
	a->fiber = runtime_fiber_self();
	if (atomic_fetch_add(&srv->listening, 1) + 1 == srv->nfds)
		all_accepting(srv);
	while (!atomic_load(&srv->stopped) && !cc->ending) {
		struct sockaddr_storage peer;
		socklen_t len = sizeof(peer);
		int fd = next_connection(a, l, &peer, &len);
		if (fd >= 0 && !atomic_load(&srv->stopped)) {
			admit(srv, fd, &peer, len, false);
		} else if (fd >= 0) {
			runtime_close(fd);
		} else if (cc->ending || fd == -ECANCELED || fd == -EINVAL) {
			break; /* shut down, or the socket was (a stop, a drain) */
		} else {
			accept_failed(srv, fd); /* out of fds or memory: */
			if (runtime_sleep(10 * 1000 * 1000) == -ECANCELED) /* back off */
				break;
		}
	}
	a->fiber = NULL;
	take_queued(srv, l);
}

/* On a drain: connections waiting for their next request close now (or,
 * in a handover, move to the successor: runtime_conn_handover). */
static void close_idle(struct runtime_server *srv)
{
	for (struct runtime_conn *c = srv->conns[runtime_core_index()].head; c; c = c->next)
		if (c->idle && c->rd.fiber)
			runtime_fiber_expire(c->rd.fiber);
}

/*
 * A shutdown ends every accept on the core's sockets at once; but an
 * inherited socket is the service manager's too, and one handed over is
 * the successor's: shut down, it would stop listening for good. There
 * each of the core's acceptors is told, and woken (an expire: it then
 * takes what its listener holds, and the successor accepts the rest).
 */
static void stop_accepting(struct runtime_server *srv)
{
	unsigned core = runtime_core_index();
	struct core_conns *cc = &srv->conns[core];
	bool keep_listening = srv->inherited || runtime__handover_target() >= 0;

	cc->ending = keep_listening;
	for (unsigned i = core; i < srv->nfds; i += srv->ncores) {
		if (!keep_listening)
			shutdown(srv->fds[i], SHUT_RD);
		else if (srv->slots[i].fiber)
			runtime_fiber_expire(srv->slots[i].fiber);
	}
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

/* Room for n listening sockets (-1 each) and their acceptors. */
static int set_nfds(struct runtime_server *srv, unsigned n)
{
	srv->fds = malloc(n * sizeof(*srv->fds));
	srv->slots = calloc(n, sizeof(*srv->slots));
	if (!srv->fds || !srv->slots)
		return -ENOMEM;
	srv->nfds = n;
	for (unsigned i = 0; i < n; i++) {
		srv->fds[i] = -1;
		srv->slots[i] = (struct accept_slot){ .srv = srv, .index = i };
	}
	return 0;
}

/* One inherited socket (socket activation, or a predecessor's shared
 * one), shared by every core (a dup each, so that each core's fd closes
 * on its own; the listeners see one socket and take turns, listener.c).
 * nodelay sets TCP_NODELAY on it, for the connections to inherit (as the
 * unit's NoDelay= would). */
static int share_inherited(struct runtime_server *srv, int fd, int nodelay)
{
	int one = 1;

	if (set_nfds(srv, srv->ncores) < 0) {
		close(fd);
		return -ENOMEM;
	}
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

/* n sockets of a core each (SO_REUSEPORT) from a predecessor: each gets
 * an acceptor; cores beyond them join the group with a socket of their
 * own. */
static int take_handed(struct runtime_server *srv, const struct runtime_serve_config *cfg,
                       const int *fds, unsigned n)
{
	unsigned flags = RUNTIME_LISTEN_REUSEPORT | (cfg->nodelay ? RUNTIME_LISTEN_NODELAY : 0);
	int rc = set_nfds(srv, n > srv->ncores ? n : srv->ncores);

	for (unsigned i = 0; i < n; i++)
		if (rc == 0)
			srv->fds[i] = fds[i];
		else
			close(fds[i]);
	srv->port = socket_port(fds[0]);
	for (unsigned i = n; i < srv->nfds && rc == 0; i++) {
		int fd = runtime_tcp_listen(cfg->host, srv->port, cfg->backlog, flags);
		srv->fds[i] = fd;
		rc = fd < 0 ? fd : 0;
	}
	return rc;
}

/* A socket per core, in one SO_REUSEPORT group: the first checks that no
 * other process holds the port (unless share_port), the others join it. */
static int bind_sockets(struct runtime_server *srv, const struct runtime_serve_config *cfg)
{
	unsigned flags = RUNTIME_LISTEN_REUSEPORT | (cfg->nodelay ? RUNTIME_LISTEN_NODELAY : 0);
	uint16_t port = cfg->port;

	if (set_nfds(srv, srv->ncores) < 0)
		return -ENOMEM;
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

/* The predecessor's sockets for cfg (a restart), else socket
 * activation's, else sockets of our own. */
static int open_sockets(struct runtime_server *srv, const struct runtime_serve_config *cfg)
{
	int fds[HANDOVER_FDS_MAX], inherited, rc;
	unsigned n;
	bool shared;

	if (runtime__handover_claim(srv, cfg, fds, &n, &shared) == 1) {
		srv->handed = true;
		rc = shared ? share_inherited(srv, fds[0], cfg->nodelay) : take_handed(srv, cfg, fds, n);
	} else if ((rc = runtime__listen_claim(cfg, &inherited)) != 0) {
		rc = rc < 0 ? rc : share_inherited(srv, inherited, cfg->nodelay);
	} else {
		rc = bind_sockets(srv, cfg);
	}
	if (rc == 0 && srv->inherited && cfg->listen_name)
		snprintf(srv->key.name, sizeof(srv->key.name), "%s", cfg->listen_name);
	socklen_t len = sizeof(srv->key.key);
	if (rc == 0 && getsockname(srv->fds[0], (struct sockaddr *)&srv->key.key, &len) == 0)
		srv->key.keylen = (uint16_t)len;
	return rc;
}

/* Every core's watcher, then its sockets' acceptors. Returns how many
 * started; *rc the error that stopped it (a spawn fails only for want of
 * memory, or a shutdown: then the server is stopped, those started end
 * by themselves, and the caller still destroys it). */
static unsigned start_fibers(struct runtime_server *srv, int *rc)
{
	unsigned started = 0;

	*rc = 0;
	for (unsigned i = 0; i < srv->ncores && *rc == 0; i++)
		if ((*rc = runtime_spawn_on(srv->rt, i, watcher, srv)) == 0)
			started++;
	for (unsigned i = 0; i < srv->nfds && *rc == 0; i++)
		if ((*rc = runtime_spawn_on(srv->rt, i % srv->ncores, acceptor, &srv->slots[i])) == 0)
			started++;
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
	srv->log_fd = cfg->log_fd;
	srv->ncores = n;
	srv->conns = aligned_alloc(64, n * sizeof(*srv->conns));
	if (!srv->conns || runtime_chan_create(&srv->stop, 1, 0) < 0) {
		runtime_server_destroy(srv);
		return NULL;
	}
	memset(srv->conns, 0, n * sizeof(*srv->conns));
	for (unsigned i = 0; i < n; i++)
		srv->conns[i].srv = srv;
	return srv;
}

/* At the end: a successor's servers claim in the order they were made. */
static void registry_add(struct runtime_server *srv)
{
	struct runtime_server **p = &registry;

	pthread_mutex_lock(&registry_lock);
	while (*p)
		p = &(*p)->next_live;
	*p = srv;
	pthread_mutex_unlock(&registry_lock);
}

static void registry_remove(struct runtime_server *srv)
{
	pthread_mutex_lock(&registry_lock);
	for (struct runtime_server **p = &registry; *p; p = &(*p)->next_live)
		if (*p == srv) {
			*p = srv->next_live;
			break;
		}
	pthread_mutex_unlock(&registry_lock);
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
	if (start_fibers(srv, &rc) > 0 || rc == 0) {
		registry_add(srv);
		*out = srv; /* a fiber uses it: destroyed after the run */
	} else {
		runtime_server_destroy(srv);
	}
	return rc;
}

/* ------------------------------------------------------ the handover */

int runtime__serve_offer(int sock)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&registry_lock);
	for (struct runtime_server *srv = registry; srv; srv = srv->next_live) {
		if (atomic_load(&srv->stopped) || !srv->key.keylen)
			continue;
		struct handover_msg m = srv->key;
		m.kind = HANDOVER_LISTENERS;
		m.shared = srv->inherited;
		unsigned n = srv->inherited ? 1 : srv->nfds;
		if ((rc = runtime__handover_send(sock, &m, srv->fds, n)) < 0)
			break;
	}
	pthread_mutex_unlock(&registry_lock);
	if (rc == 0)
		rc = runtime__handover_send(sock, &(struct handover_msg){ .kind = HANDOVER_END },
		                            NULL, 0);
	return rc;
}

int runtime__serve_hand_over(struct runtime_conn *c, int sock)
{
	struct handover_msg m = c->server->key;

	m.kind = HANDOVER_CONN;
	int rc = runtime__handover_send(sock, &m, &c->fd, 1);
	if (rc == 0)
		atomic_fetch_add(&c->server->moved_out, 1);
	return rc;
}

struct adoption {
	struct runtime_server *srv;
	int fd;
};

static void adopt_here(void *arg)
{
	struct adoption *a = arg;
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);

	if (getpeername(a->fd, (struct sockaddr *)&peer, &len) < 0)
		len = 0;
	if (atomic_load(&a->srv->stopped))
		runtime_close(a->fd);
	else
		admit(a->srv, a->fd, &peer, len, true);
	free(a);
}

void runtime__serve_adopt(struct runtime_server *srv, int fd)
{
	struct adoption *a = malloc(sizeof(*a));
	unsigned core = atomic_fetch_add(&srv->next_core, 1) % srv->ncores;

	if (a) {
		*a = (struct adoption){ srv, fd };
		if (runtime_spawn_on(srv->rt, core, adopt_here, a) == 0)
			return;
		free(a);
	}
	close(fd);
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
	st->moved_in = atomic_load(&srv->moved_in);
	st->moved_out = atomic_load(&srv->moved_out);
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
	registry_remove(srv);
	for (unsigned i = 0; srv->fds && i < srv->nfds; i++)
		if (srv->fds[i] >= 0)
			close(srv->fds[i]);
	runtime_chan_destroy(srv->stop);
	free(srv->fds);
	free(srv->slots);
	free(srv->conns);
	free(srv);
}
