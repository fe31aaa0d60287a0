/* SPDX-License-Identifier: MIT */
/*
 * handover.c - the link between a process and its successor in a restart
 * without loss (restart.c starts the successor): a SOCK_SEQPACKET unix
 * socket pair, one message per datagram, sockets carried by SCM_RIGHTS.
 *
 *   old -> new  LISTENERS  a server's listening sockets (each core's, or
 *                          the one its cores share), keyed by its address
 *   old -> new  END        no more listeners: the successor may start
 *   new -> old  READY      every server that took sockets accepts on them
 *   old -> new  CONN       an idle connection of the server of that key
 *
 * The old process writes the listeners and END before it starts the
 * successor, so that the successor's first runtime_serve reads them
 * without waiting; the successor finds the link in RUNTIME_HANDOVER_FD.
 * The old process stops accepting only after READY (the sockets, their
 * backlogs with them, are both processes' until then: nothing is refused)
 * and then hands over its idle connections (runtime_conn_handover) while
 * it drains. The successor's receiver fiber adopts them until the old
 * process has gone (the link's end) or the successor drains itself.
 *
 * Both sides are process-wide: one predecessor, one successor at a time.
 */
#include "toolkit.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HANDOVER_MAGIC 0x52544831u  /* "RTH1" */
#define HANDOVER_WAIT_NS (5000 * 1000000ll) /* a blocked link: give up */

/* ------------------------------------------------------------ messages */

int runtime__handover_send(int sock, const struct handover_msg *m, const int *fds, unsigned n)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(HANDOVER_FDS_MAX * sizeof(int))];
	} ctl;
	struct handover_msg out = *m;
	struct iovec iov = { &out, sizeof(out) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (n > HANDOVER_FDS_MAX)
		return -E2BIG;
	out.magic = HANDOVER_MAGIC;
	if (n) {
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	}
	while (sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		int rc = runtime_poll(sock, POLLOUT, HANDOVER_WAIT_NS);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The fds of msg's SCM_RIGHTS into fds (room for *n; *n: how many). */
static void take_fds(struct msghdr *msg, int *fds, unsigned *n)
{
	unsigned room = *n;

	*n = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (unsigned i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (*n < room)
				fds[(*n)++] = fd;
			else
				close(fd);
		}
	}
}

/* Wait for sock to be readable: a fiber's wait, or poll(2) outside one
 * (runtime_serve before the run), up to timeout_ns (< 0: none). */
static int wait_readable(int sock, int64_t timeout_ns)
{
	if (runtime_fiber_self())
		return runtime_poll(sock, POLLIN, timeout_ns);
	struct pollfd p = { .fd = sock, .events = POLLIN };
	int rc = poll(&p, 1, timeout_ns < 0 ? -1 : (int)(timeout_ns / 1000000));
	return rc > 0 ? rc : rc == 0 ? -ETIMEDOUT : -errno;
}

ssize_t runtime__handover_recv(int sock, struct handover_msg *m, int *fds, unsigned *n,
                               int64_t timeout_ns)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(HANDOVER_FDS_MAX * sizeof(int))];
	} ctl;
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
	                      .msg_controllen = sizeof(ctl.buf) };
	ssize_t got;

	while ((got = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0) {
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		int rc = wait_readable(sock, timeout_ns);
		if (rc < 0)
			return rc;
	}
	take_fds(&msg, fds, n);
	if (got == 0)
		return 0; /* the other side has gone */
	if (got != sizeof(*m) || m->magic != HANDOVER_MAGIC || (msg.msg_flags & MSG_CTRUNC)) {
		for (unsigned i = 0; i < *n; i++)
			close(fds[i]);
		*n = 0;
		return -EPROTO;
	}
	return got;
}

/* ---------------------------------------------------- the old process */

static _Atomic int target = -1;  /* the successor's link, once it is ready */

void runtime__handover_begin(int sock)
{
	atomic_store(&target, sock);
}

int runtime__handover_target(void)
{
	return atomic_load_explicit(&target, memory_order_relaxed);
}

/* -------------------------------------------------------- the successor */

struct handed {
	struct handover_msg key;    /* its kind LISTENERS: key, keylen, shared */
	int fds[HANDOVER_FDS_MAX];
	unsigned n;
	struct runtime_server *srv; /* the server that took it, or NULL */
	bool listening;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool loaded;
static int link_fd = -1;        /* to the predecessor */
static struct handed *handed;   /* under lock until READY, then fixed */
static unsigned handed_len, listening;
static struct runtime_fiber *receiver_fiber; /* core 0's */

/* The link's fd in RUNTIME_HANDOVER_FD, taken (and unset). */
static int link_from_env(void)
{
	const char *v = getenv("RUNTIME_HANDOVER_FD");
	char *end;

	if (!v)
		return -1;
	long fd = strtol(v, &end, 10);
	unsetenv("RUNTIME_HANDOVER_FD");
	if (*v < '0' || *v > '9' || *end || fd > INT_MAX || fcntl((int)fd, F_GETFD) < 0) {
		fprintf(stderr, "runtime: RUNTIME_HANDOVER_FD is no open fd: ignored\n");
		return -1;
	}
	fcntl((int)fd, F_SETFD, FD_CLOEXEC);
	return (int)fd;
}

/* One LISTENERS message into the table. */
static int add_handed(const struct handover_msg *m, const int *fds, unsigned n)
{
	struct handed *t = realloc(handed, (handed_len + 1) * sizeof(*t));

	if (!t)
		return -ENOMEM;
	handed = t;
	t = &handed[handed_len++];
	*t = (struct handed){ .key = *m, .n = n };
	memcpy(t->fds, fds, n * sizeof(int));
	return 0;
}

/* Under lock, once: the predecessor's listeners, up to END. A broken
 * link is logged and dropped: the process then binds as a first one. */
static void load(void)
{
	struct handover_msg m;
	int fds[HANDOVER_FDS_MAX];
	ssize_t got = 1;

	if (loaded)
		return;
	loaded = true;
	if ((link_fd = link_from_env()) < 0)
		return;
	for (;;) {
		unsigned n = HANDOVER_FDS_MAX;
		got = runtime__handover_recv(link_fd, &m, fds, &n, HANDOVER_WAIT_NS);
		if (got <= 0 || m.kind == HANDOVER_END)
			break;
		if (m.kind != HANDOVER_LISTENERS || n == 0 || add_handed(&m, fds, n) < 0) {
			for (unsigned i = 0; i < n; i++)
				close(fds[i]);
		}
	}
	if (got > 0)
		return;
	fprintf(stderr, "runtime: restart: the predecessor's link broke (%s): binding anew\n",
	        got == 0 ? "closed" : strerror((int)-got));
	close(link_fd);
	link_fd = -1;
}

static uint16_t key_port(const struct handover_msg *m)
{
	const struct sockaddr *sa = (const struct sockaddr *)&m->key;

	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

/* Does h serve cfg: by its activation name, else by port (0: any)? */
static bool serves(const struct handed *h, const struct runtime_serve_config *cfg)
{
	if (cfg->listen_name)
		return strncmp(h->key.name, cfg->listen_name, sizeof(h->key.name)) == 0;
	return !cfg->port || key_port(&h->key) == cfg->port;
}

int runtime__handover_claim(struct runtime_server *srv, const struct runtime_serve_config *cfg,
                            int *fds, unsigned *n, bool *shared)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	load();
	for (unsigned i = 0; i < handed_len && rc == 0; i++) {
		struct handed *h = &handed[i];
		if (h->srv || !serves(h, cfg))
			continue;
		h->srv = srv;
		memcpy(fds, h->fds, h->n * sizeof(int));
		*n = h->n;
		*shared = h->key.shared;
		rc = 1;
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

static void receiver(void *arg);

/* The successor's drain: it takes no more connections. */
static void stop_receiving(void *arg)
{
	(void)arg;
	if (receiver_fiber)
		runtime_fiber_cancel(receiver_fiber);
}

static void drain_hook(void *arg)
{
	runtime_spawn_on(arg, 0, stop_receiving, NULL);
}

/* Every handed group accepts: tell the predecessor, and take what it
 * hands over from now on (a receiver on core 0). */
static void all_listening(struct runtime *rt)
{
	struct handover_msg m = { .kind = HANDOVER_READY };
	int rc = runtime__handover_send(link_fd, &m, NULL, 0);

	if (rc < 0) {
		fprintf(stderr, "runtime: restart: cannot tell the predecessor: %s\n",
		        strerror(-rc));
		return;
	}
	runtime_on_drain(rt, drain_hook, rt);
	if (runtime_spawn_on(rt, 0, receiver, rt) < 0)
		fprintf(stderr, "runtime: restart: no receiver for handed connections\n");
}

void runtime__handover_listening(struct runtime *rt, struct runtime_server *srv)
{
	bool all = false;

	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < handed_len; i++) {
		struct handed *h = &handed[i];
		if (h->srv == srv && !h->listening) {
			h->listening = true;
			all = ++listening == handed_len;
		}
	}
	pthread_mutex_unlock(&lock);
	if (all)
		all_listening(rt);
}

/* The server whose listeners had key m's, or NULL. */
static struct runtime_server *server_of(const struct handover_msg *m)
{
	for (unsigned i = 0; i < handed_len; i++)
		if (handed[i].key.keylen == m->keylen &&
		    memcmp(&handed[i].key.key, &m->key, m->keylen) == 0)
			return handed[i].srv;
	return NULL;
}

/* Core 0's: each connection handed over goes to its server, until the
 * predecessor has gone or this process drains. */
static void receiver(void *arg)
{
	struct handover_msg m;
	int fd;

	(void)arg;
	receiver_fiber = runtime_fiber_self();
	for (;;) {
		unsigned n = 1;
		ssize_t got = runtime__handover_recv(link_fd, &m, &fd, &n, -1);
		if (got == -EPROTO)
			continue;
		if (got <= 0)
			break;
		struct runtime_server *srv = m.kind == HANDOVER_CONN && n ? server_of(&m) : NULL;
		if (srv)
			runtime__serve_adopt(srv, fd);
		else if (n)
			close(fd);
	}
	receiver_fiber = NULL;
	close(link_fd);
	link_fd = -1;
}
