/* SPDX-License-Identifier: MIT */
/*
 * session.c - TLS on one connection, as the connection's layer.
 *
 * OpenSSL never touches the socket and never waits. Its BIO is ours: a
 * read takes the bytes this session holds (those one read brought, then
 * those queued in the connection's receive stream, in place), else says
 * "retry"; a write appends to an output block. Around each SSL call the
 * fiber does the waiting: on SSL_ERROR_WANT_READ it reads the socket
 * through the connection (runtime_conn_raw_read: its deadlines, idle
 * timeout and drain hold) into a small buffer on its stack, offers those
 * bytes to the next SSL call and keeps whatever OpenSSL left; after a
 * call that produced output it sends the block (runtime_conn_raw_send).
 * So no fiber ever parks inside OpenSSL, and a reader and a writer fiber
 * can share one SSL: their SSL calls never overlap.
 *
 * Output goes out in order from one fiber at a time: the one flushing
 * swaps the blocks (new output fills the other, never the one the kernel
 * is reading) and sends until both are empty; a fiber that needs its
 * bytes out while another flushes parks until it is done. A flush cut
 * short by a deadline, a cancel or a drain goes on where it stopped at the
 * next write; the socket's error ends writing for good.
 *
 * Memory: an idle connection holds the SSL and this struct: OpenSSL's
 * record buffers go once the reader has waited a while (idle.c), and the
 * output blocks come from a per-thread cache and go back once sent
 * (bio.c).
 */
#include "tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* -------------------------------------------------------- OpenSSL's calls */

/*
 * Each SSL call runs on the core's stack (runtime_call_on_core_stack): a
 * handshake's signatures and key exchange go tens of KiB deep, and every
 * page a fiber's stack touches stays its memory for as long as the
 * connection lives. The BIO never parks, so no SSL call ever waits.
 */
struct ssl_call {
	enum ssl_op op;
	SSL *ssl;
	void *buf;
	size_t len, done;
	int ret;                     /* the call's return value */
};

static void ssl_call_here(void *arg)
{
	struct ssl_call *k = arg;

	if (ERR_peek_error()) /* clearing an empty queue costs six times as much */
		ERR_clear_error(); /* SSL_get_error reads the thread's queue after */
	switch (k->op) {
	case CALL_HANDSHAKE: k->ret = SSL_do_handshake(k->ssl); break;
	case CALL_READ: k->ret = SSL_read_ex(k->ssl, k->buf, k->len, &k->done); break;
	case CALL_WRITE: k->ret = SSL_write_ex(k->ssl, k->buf, k->len, &k->done); break;
	case CALL_SHUTDOWN: k->ret = SSL_shutdown(k->ssl); ERR_clear_error(); break;
	}
}

int runtime__tls_ssl_call(struct tls_session *t, enum ssl_op op, const void *buf, size_t len,
                          size_t *done)
{
	struct ssl_call k = { op, t->ssl, (void *)buf, len, 0, 0 };

	runtime_call_on_core_stack(ssl_call_here, &k);
	if (done)
		*done = k.done;
	return k.ret;
}

/* ------------------------------------------------------------- waiting */

static bool transient(int rc)
{
	return rc == -ETIMEDOUT || rc == -ECANCELED || rc == -ESHUTDOWN || rc == -EPERM ||
	       rc == -EAGAIN; /* release_after: the connection waits idle */
}

/* A failure of this session's, for runtime_conn_tls_error: rc back. */
static int note(struct tls_session *t, int rc)
{
	t->failure = (struct tls_failure){ .err = rc, .in_handshake = !t->handshaken };
	return rc;
}

/* An SSL call failed (ssl_error: SSL_get_error's): -errno, recorded. */
static int failed(struct tls_session *t, int ssl_error)
{
	runtime__tls_failure(&t->failure, t->ssl, ssl_error, t->raw_end);
	t->failure.in_handshake = !t->handshaken;
	return t->failure.err;
}

/* Wait for bytes from the socket into feed (the caller's stack), offered
 * to the next SSL call. 0 - also at the socket's end, which that call
 * sees - or -errno: a deadline, cancel or drain (the session goes on), or
 * the socket's error (it ends). */
static int fill(struct tls_session *t, char *feed, size_t size)
{
	runtime__tls_wait_begin(t);
	ssize_t n = runtime_conn_raw_read(t->conn, feed, size);
	runtime__tls_wait_end(t);

	if (n > 0) {
		t->feed = feed;
		t->feed_len = (size_t)n;
		return 0;
	}
	return runtime__tls_read_end(t, (int)n);
}

int runtime__tls_read_end(struct tls_session *t, int n)
{
	if (n == 0 || !transient(n))
		t->raw_end = n == 0 ? 1 : n;
	return n == 0 ? 0 : note(t, n);
}

/* Park while another fiber flushes (it sends what we added too). */
static int wait_flusher(struct tls_session *t)
{
	while (t->flushing) {
		t->flush_waiter = runtime_fiber_self();
		int rc = runtime_park(-1);
		t->flush_waiter = NULL;
		if (rc < 0)
			return rc;
	}
	return t->write_err;
}

/* Send what is left of o, from o->off on: a send cut short by a
 * deadline, cancel or drain goes on there next time. */
static int send_block(struct tls_session *t, struct out *o)
{
	while (o->off < o->len) {
		struct iovec iov = { o->buf + o->off, o->len - o->off };
		ssize_t n = runtime_conn_raw_send(t->conn, &iov, 1);
		if (n <= 0)
			return n < 0 ? (int)n : -EIO;
		o->off += (size_t)n;
	}
	return 0;
}

/*
 * Send every byte OpenSSL wrote, in order: what is left of the block in
 * flight (out[fill ^ 1]), then the filling one, swapped in first so that
 * new output goes to the other meanwhile. 0 or -errno: a deadline, cancel
 * or drain leaves the rest for the next flush; the socket's error ends
 * writing for good.
 */
int runtime__tls_flush(struct tls_session *t)
{
	int rc = wait_flusher(t);

	if (rc < 0)
		return rc;
	t->flushing = true;
	for (;;) {
		struct out *o = &t->out[t->fill ^ 1];
		if (o->len && (rc = send_block(t, o)) < 0)
			break;
		runtime__tls_block_put(o);
		if (!t->out[t->fill].len)
			break;
		t->fill ^= 1;
	}
	t->flushing = false;
	if (rc < 0 && !transient(rc)) {
		t->write_err = rc;
		runtime__tls_block_put(&t->out[0]);
		runtime__tls_block_put(&t->out[1]);
	}
	if (t->flush_waiter)
		runtime_fiber_unpark(t->flush_waiter);
	return rc < 0 ? note(t, rc) : 0;
}

/* What SSL_get_error asked for (verdict): wait for it (0: call again),
 * or the failure verdict recorded. */
static int wait_for(struct tls_session *t, int ssl_error, char *feed)
{
	if (ssl_error == SSL_ERROR_WANT_READ)
		return fill(t, feed, FEED_SIZE);
	if (ssl_error == SSL_ERROR_WANT_WRITE)
		return runtime__tls_flush(t);
	return t->failure.err;
}

/* ----------------------------------------------------------- handshake */

/* SSL_get_error's verdict on an SSL call, a failure recorded at once:
 * OpenSSL's error queue is the thread's, which other fibers clear as soon
 * as this one parks. */
static bool fatal(int e)
{
	return e != SSL_ERROR_NONE && e != SSL_ERROR_ZERO_RETURN && e != SSL_ERROR_WANT_READ &&
	       e != SSL_ERROR_WANT_WRITE;
}

static int verdict(struct tls_session *t, int ret)
{
	int e = SSL_get_error(t->ssl, ret);

	if (fatal(e))
		failed(t, e);
	return e;
}

static int handshake_done(struct tls_session *t);

static int handshake(struct tls_session *t)
{
	char feed[FEED_SIZE];

	for (;;) {
		int e = verdict(t, runtime__tls_ssl_call(t, CALL_HANDSHAKE, NULL, 0, NULL));
		int rc = runtime__tls_keep_feed(t) ? 0 : note(t, -ENOMEM);
		if (rc == 0 && e == SSL_ERROR_NONE)
			rc = handshake_done(t);
		if (rc == 0)
			rc = runtime__tls_flush(t); /* a flight, or an alert */
		if (e == SSL_ERROR_NONE)
			return rc;
		if (fatal(e))
			return t->failure.err;
		if (rc < 0 || (rc = wait_for(t, e, feed)) < 0)
			return rc;
	}
}

/* A TLS 1.2 client that resumed got its renewed ticket in the handshake,
 * and OpenSSL calls no new-session callback for a resumed 1.2 session:
 * keep it here. (TLS 1.3 tickets come later, through the callback.) */
static void keep_renewed(struct tls_session *t)
{
	SSL_SESSION *sess;

	if (!t->resume_key || !SSL_session_reused(t->ssl) || SSL_version(t->ssl) >= TLS1_3_VERSION)
		return;
	if ((sess = SSL_get1_session(t->ssl)) &&
	    !runtime__client_session_keep(t->tls->sessions, t->resume_key, sess))
		SSL_SESSION_free(sess);
}

/* The handshake just ended well: what the connection keeps of it, before
 * its last flight goes out with tls13.c's KeyUpdate (the SSL may go then).
 * 0, or -errno (recorded). */
static int handshake_done(struct tls_session *t)
{
	const unsigned char *alpn;
	unsigned len;
	int rc;

	SSL_get0_alpn_selected(t->ssl, &alpn, &len);
	if (len && !(t->alpn = strndup((const char *)alpn, len)))
		return note(t, -ENOMEM); /* not handshaken: unusable */
	t->info_resumed = SSL_session_reused(t->ssl);
	keep_renewed(t);
	return (rc = runtime__tls13_take(t)) < 0 ? note(t, rc) : 0;
}

/* runtime_tls_stats's counts. */
static void count_handshake(struct tls_session *t, int rc)
{
	struct runtime_tls *tls = t->tls;

	if (rc < 0) {
		atomic_fetch_add_explicit(&tls->failed, 1, memory_order_relaxed);
		return;
	}
	atomic_fetch_add_explicit(&tls->handshakes, 1, memory_order_relaxed);
	if (t->info_resumed)
		atomic_fetch_add_explicit(&tls->resumed, 1, memory_order_relaxed);
}

void runtime_tls_stats(const struct runtime_tls *tls, struct runtime_tls_stats *st)
{
	if (!st)
		return;
	*st = (struct runtime_tls_stats){ 0 };
	if (!tls)
		return;
	st->handshakes = atomic_load(&tls->handshakes);
	st->resumed = atomic_load(&tls->resumed);
	st->failed = atomic_load(&tls->failed);
}

/* The handshake under the context's timeout, or an earlier deadline. */
static int handshake_timed(struct tls_session *t)
{
	uint64_t own = runtime_deadline_get(), limit = own;
	uint64_t timeout = t->tls->handshake_timeout_ns;

	if (timeout) {
		uint64_t now = runtime_now();
		uint64_t end = timeout > UINT64_MAX - now ? UINT64_MAX : now + timeout;
		if (!limit || end < limit)
			limit = end;
	}
	runtime_deadline_set(limit);
	int rc = handshake(t);
	runtime_deadline_set(own);
	count_handshake(t, rc);
	t->handshaken = rc == 0;
	return rc;
}

/* ---------------------------------------------------- reading, writing */

/* Before the handshake, or after it failed: what a read or write says. */
static int not_ready(const struct tls_session *t)
{
	return t->failure.err && t->failure.in_handshake ? t->failure.err : -ENOTCONN;
}

static ssize_t tls_read(struct runtime_conn *c, void *state, void *buf, size_t len)
{
	struct tls_session *t = state;
	char feed[FEED_SIZE];
	ssize_t rc;

	if (!t->handshaken)
		return not_ready(t);
	if (t->reader)
		return -EPERM;
	if (!len)
		return 0;
	t->reader = runtime_fiber_self();
	if (t->v13) {
		rc = runtime__tls13_read(t, buf, len);
		t->reader = NULL;
		return rc;
	}
	for (;;) {
		size_t n = 0;
		int e = runtime__tls_ssl_call(t, CALL_READ, buf, len, &n) ? SSL_ERROR_NONE : verdict(t, 0);
		if (!runtime__tls_keep_feed(t)) {
			rc = note(t, -ENOMEM);
			break;
		}
		if (t->out[t->fill].len && !t->flushing)
			runtime__tls_flush(t); /* what reading made: an alert, a key update (a failure sticks) */
		if (e == SSL_ERROR_NONE || e == SSL_ERROR_ZERO_RETURN) {
			rc = (ssize_t)n; /* 0: the peer's close_notify */
			break;
		}
		if ((rc = wait_for(t, e, feed)) < 0)
			break;
	}
	t->reader = NULL;
	return rc;
}

static __thread char gathered[PLAIN_MAX]; /* small iovecs made one record */

/* The next record's plaintext: in place when one iovec holds it, else
 * small iovecs copied together (one record, not one each). Use it before
 * anything parks: the copy is the thread's. */
static size_t next_record(const struct iovec *iov, int iovcnt, struct tls_cursor *k,
                          const char **p)
{
	size_t n = 0;

	while (k->i < iovcnt && k->off == iov[k->i].iov_len)
		k->i++, k->off = 0;
	if (k->i == iovcnt)
		return 0;
	size_t here = iov[k->i].iov_len - k->off;
	if (here >= PLAIN_MAX || k->i == iovcnt - 1) {
		*p = (const char *)iov[k->i].iov_base + k->off;
		n = MIN(here, PLAIN_MAX);
		k->off += n;
		return n;
	}
	for (; k->i < iovcnt && n < PLAIN_MAX; k->i++, k->off = 0) {
		size_t m = MIN(iov[k->i].iov_len - k->off, PLAIN_MAX - n);
		memcpy(gathered + n, (const char *)iov[k->i].iov_base + k->off, m);
		n += m;
		if ((k->off += m) < iov[k->i].iov_len)
			break;
	}
	*p = gathered;
	return n;
}

/* Room in the output block for one more record, with its overhead. */
bool runtime__tls_room_for_record(const struct tls_session *t)
{
	return t->out[t->fill].len + PLAIN_MAX + 512 <= OUT_BLOCK;
}

/* OpenSSL's records into the output block while it has room: the bytes
 * taken, or the failure. The room is checked first, so SSL_write never
 * waits on the block: nothing parks between gathering a record and
 * encrypting it. */
static ssize_t ssl_records(struct tls_session *t, const struct iovec *iov, int iovcnt)
{
	struct tls_cursor k = { 0, 0 };
	size_t taken = 0, n, w;
	const char *p;

	while (runtime__tls_room_for_record(t) && (n = next_record(iov, iovcnt, &k, &p)) > 0) {
		if (!runtime__tls_ssl_call(t, CALL_WRITE, p, n, &w)) {
			/* The block had room: no verdict here is one to wait for
			 * (a renegotiation's WANT_READ is refused as well). */
			int e = verdict(t, 0);
			return fatal(e) ? t->failure.err : note(t, -EPROTO);
		}
		taken += w;
	}
	return (ssize_t)taken;
}

/* Records into the output block while it has room, then one flush. */
static ssize_t write_records(struct tls_session *t, const struct iovec *iov, int iovcnt)
{
	ssize_t taken;
	int rc;

	if (!runtime__tls_room_for_record(t) && (rc = runtime__tls_flush(t)) < 0)
		return rc; /* what a cut flush left */
	taken = t->v13 ? runtime__tls13_seal_records(t, iov, iovcnt) : ssl_records(t, iov, iovcnt);
	if (taken < 0)
		return t->write_err = t->failure.err == taken ? (int)taken : note(t, (int)taken);
	rc = runtime__tls_flush(t);
	if (rc < 0 && !(taken && transient(rc)))
		return rc;
	return (ssize_t)taken; /* taken, if not all sent yet: the next flush goes on */
}

static ssize_t tls_writev(struct runtime_conn *c, void *state, const struct iovec *iov,
                          int iovcnt)
{
	struct tls_session *t = state;

	if (!t->handshaken)
		return not_ready(t);
	if (t->writer)
		return -EPERM;
	if (t->write_err || t->sent_close)
		return t->write_err ? t->write_err : -EPIPE;
	t->writer = runtime_fiber_self();
	ssize_t rc = write_records(t, iov, iovcnt);
	t->writer = NULL;
	return rc;
}

/* A close_notify into the output block. */
static void send_close_notify(struct tls_session *t)
{
	if (t->v13)
		runtime__tls13_close_notify(t);
	else
		runtime__tls_ssl_call(t, CALL_SHUTDOWN, NULL, 0, NULL);
}

/* close_notify, then the socket's half-close. */
static int tls_close_write(struct runtime_conn *c, void *state)
{
	struct tls_session *t = state;
	int rc = 0;

	if (t->writer)
		return -EPERM;
	if (t->handshaken && !t->sent_close && !t->write_err) {
		t->writer = runtime_fiber_self();
		send_close_notify(t); /* the peer's to come */
		t->sent_close = true;
		rc = runtime__tls_flush(t);
		t->writer = NULL;
	}
	return rc < 0 ? rc : runtime_sock_shutdown(runtime_conn_fd(c), SHUT_WR);
}

static int tls_pending(const struct runtime_conn *c, const void *state)
{
	const struct tls_session *t = state;

	(void)c;

	if (t->v13 && !t->ssl)
		return runtime__tls13_pending(t);
	return SSL_has_pending(t->ssl) || t->extra_off < t->extra_len;
}

/* ------------------------------------------------------------ sessions */

static void session_free(struct tls_session *t)
{
	runtime__tls_wait_end(t);
	runtime__tls13_free(t);
	SSL_free(t->ssl); /* and its BIO */
	runtime__tls_block_put(&t->out[0]);
	runtime__tls_block_put(&t->out[1]);
	free(t->extra);
	free(t->alpn);
	free(t->host);
	free(t->resume_key);
	free(t->sni);
	runtime__tls_unref(t->tls);
	free(t);
}

/* One try at sending what is queued, in order, without waiting: close
 * never waits. A raw syscall: nothing may park here, nor interpose. */
static void send_now(struct tls_session *t)
{
	for (int i = 1; i >= 0; i--) {
		const struct out *o = &t->out[t->fill ^ i];
		size_t left = o->len - o->off;
		if (left && syscall(SYS_sendto, runtime_conn_fd(t->conn), o->buf + o->off, left,
		                    MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0) != (long)left)
			return;
	}
}

/* From runtime_conn_close: a close_notify if it can go at once, then the
 * session goes. -EBUSY while a fiber reads, writes or flushes. */
static int tls_close(struct runtime_conn *c, void *state)
{
	struct tls_session *t = state;

	(void)c;

	if (t->reader || t->writer || t->flushing)
		return -EBUSY;
	if (t->handshaken && !t->sent_close && !t->write_err) {
		send_close_notify(t);
		send_now(t);
	}
	session_free(t);
	return 0;
}

/* runtime_conn_idle: the connection waits with no fiber; OpenSSL's
 * record buffers go at once (idle.c frees them only under a reader). */
static void tls_idle(struct runtime_conn *c, void *state)
{
	(void)c;
	runtime__tls_free_buffers(state);
}

static const struct runtime_conn_layer tls_layer = {
	.read = tls_read,
	.writev = tls_writev,
	.close_write = tls_close_write,
	.pending = tls_pending,
	.idle = tls_idle,
	.close = tls_close,
};

static struct tls_session *session_new(struct runtime_conn *c, struct runtime_tls *tls)
{
	BIO_METHOD *method = runtime__tls_bio_method();
	struct tls_session *t = method ? calloc(1, sizeof(*t)) : NULL;
	BIO *b = NULL;

	if (!t || !(t->ssl = SSL_new(tls->ctx)) || !(b = BIO_new(method))) {
		if (t)
			SSL_free(t->ssl);
		free(t);
		return NULL;
	}
	BIO_set_data(b, t);
	BIO_set_init(b, 1);
	SSL_set_bio(t->ssl, b, b);
	SSL_set_app_data(t->ssl, t);
	atomic_fetch_add(&tls->refs, 1);
	t->tls = tls;
	t->conn = c;
	return t;
}

/* Checks common to accept and connect: 0 or -errno. */
static int can_start(struct runtime_conn *c, struct runtime_tls *tls, int side)
{
	if (!c || !tls || tls->side != side)
		return -EINVAL;
	if (runtime_conn_layer(c, NULL))
		return -EALREADY;
	return side == RUNTIME_TLS_SERVER && !tls->ncerts ? -EINVAL : 0;
}

/* A new session on c, as its layer. 0, -ENOMEM, -EPERM (another core, a
 * fiber in a read or write), -EALREADY. */
static int attach(struct runtime_conn *c, struct runtime_tls *tls, struct tls_session **out)
{
	struct tls_session *t = session_new(c, tls);

	if (!t)
		return -ENOMEM;
	int rc = runtime_conn_set_layer(c, &tls_layer, t);
	if (rc < 0) {
		session_free(t);
		return rc == -EBUSY ? -EPERM : rc;
	}
	*out = t;
	return 0;
}

int runtime__tls_accept(struct runtime_conn *c, struct runtime_tls *tls,
                        const unsigned char *alpn, size_t alpn_len)
{
	struct tls_session *t;
	int rc = can_start(c, tls, RUNTIME_TLS_SERVER);

	if (rc < 0 || (rc = attach(c, tls, &t)) < 0)
		return rc;
	SSL_set_accept_state(t->ssl);
	if (!runtime__tls13_prepare(t))
		return note(t, -ENOMEM);
	t->alpn_offer = alpn; /* the caller's: for the handshake only */
	t->alpn_offer_len = alpn_len;
	rc = handshake_timed(t);
	t->alpn_offer = NULL;
	return rc;
}

int runtime_conn_tls_accept(struct runtime_conn *c, struct runtime_tls *tls)
{
	return runtime__tls_accept(c, tls, NULL, 0);
}

/* The name to check the server's certificate against, and to send. */
static int set_host(struct tls_session *t, const char *host)
{
	unsigned char addr[16];
	bool numeric = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;

	if (!(t->host = strdup(host)))
		return -ENOMEM;
	if (!numeric && !SSL_set_tlsext_host_name(t->ssl, host)) /* SNI: names only */
		return -EINVAL;
	if (!t->tls->verify)
		return 0;
	if (numeric ? !X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), host)
	            : !SSL_set1_host(t->ssl, host))
		return -EINVAL;
	return 0;
}

const char *runtime__tls_resume_key_of(SSL *ssl)
{
	const struct tls_session *t = SSL_get_app_data(ssl);

	return t ? t->resume_key : NULL;
}

/* The server's port, from the connection's peer (0: not known). */
static unsigned peer_port(struct runtime_conn *c)
{
	socklen_t len;
	const struct sockaddr *sa = runtime_conn_peer(c, &len);

	if (sa && sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa && sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

/* Resume with the session the context kept for this host and port, if
 * any: a ticket from one port's server means nothing to another's. */
static void resume(struct tls_session *t)
{
	size_t n = strlen(t->host) + 8;

	if (!(t->resume_key = malloc(n)))
		return;
	snprintf(t->resume_key, n, "%s:%u", t->host, peer_port(t->conn));
	SSL_SESSION *sess = runtime__client_session_take(t->tls->sessions, t->resume_key);

	if (sess) {
		SSL_set_session(t->ssl, sess);
		SSL_SESSION_free(sess); /* the SSL holds its own reference */
	}
}

int runtime_conn_tls_connect(struct runtime_conn *c, struct runtime_tls *tls, const char *host)
{
	struct tls_session *t;
	int rc = can_start(c, tls, RUNTIME_TLS_CLIENT);

	if (rc == 0 && !host && tls->verify)
		rc = -EINVAL; /* nothing to check the certificate against */
	if (rc < 0 || (rc = attach(c, tls, &t)) < 0)
		return rc;
	SSL_set_connect_state(t->ssl);
	if (host && (rc = set_host(t, host)) < 0)
		return note(t, rc);
	if (host)
		resume(t);
	return handshake_timed(t);
}

/* ---------------------------------------------------------- what it is */

static struct tls_session *session_of(struct runtime_conn *c)
{
	return runtime_conn_layer(c, &tls_layer);
}

int runtime_conn_tls_info(struct runtime_conn *c, struct runtime_tls_info *info)
{
	struct tls_session *t = session_of(c);

	if (!c || !info)
		return -EINVAL;
	if (!t || !t->handshaken)
		return -ENOTCONN;
	if (!t->ssl) { /* tls13.c's */
		*info = (struct runtime_tls_info){ .version = "TLSv1.3", .cipher = t->info_cipher,
			                           .alpn = t->alpn, .server_name = t->sni,
			                           .resumed = t->info_resumed };
		return 0;
	}
	X509 *peer = SSL_get0_peer_certificate(t->ssl);
	*info = (struct runtime_tls_info){
		.version = SSL_get_version(t->ssl),
		.cipher = SSL_get_cipher_name(t->ssl),
		.alpn = t->alpn,
		.server_name = t->host ? t->host : t->sni,
		.resumed = SSL_session_reused(t->ssl),
		.peer_cert = peer && SSL_get_verify_result(t->ssl) == X509_V_OK,
	};
	return 0;
}

int runtime_conn_tls_error(struct runtime_conn *c, char *buf, size_t size)
{
	struct tls_session *t = session_of(c);

	if (!buf || !size)
		return 0;
	buf[0] = '\0';
	return t ? runtime__tls_failure_text(&t->failure, buf, size) : 0;
}

void *runtime_conn_tls_ssl(struct runtime_conn *c)
{
	struct tls_session *t = session_of(c);

	return t ? t->ssl : NULL;
}
