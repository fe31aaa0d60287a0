/* SPDX-License-Identifier: MIT */
/*
 * tls_load: TLS 1.3 handshake load and idle-connection holder for
 * bench/bench-tls.sh, on plain OpenSSL 3 and blocking sockets.
 *
 * Handshake mode (default): -c threads each loop, for -d seconds or until
 * -n connections were started in all (whichever comes first; -d 0: no
 * time limit): TCP connect, TLS 1.3 handshake
 * (X25519 only, TLS_AES_128_GCM_SHA256 only, SNI --sni), one
 * "GET PATH HTTP/1.1" with "Connection: close", the whole response read
 * and checked (200, body "Hello, World!"), then read to the end of the
 * stream, close_notify sent, socket closed. With --resume each thread
 * offers, on its next connection, the session of its previous one, taken
 * after the response was read (TLS 1.3 tickets arrive after the
 * handshake); a connection the server resumed counts in resumed=.
 * Prints one line: connections (completed, response checked), resumed,
 * errors, secs, conn_per_s, and the cipher and group of the first
 * connection.
 *
 * Hold mode (--hold N): -c threads open N keep-alive connections between
 * them, one GET each (response checked), and keep them all open; prints
 * "held=N errors=E secs=S" once all are open, then sleeps -d seconds (0:
 * until killed).
 *
 * Each connection binds its own source address in 127.0.0.0/8 (62,500 of
 * them, in turn), so neither ephemeral ports nor TIME_WAIT run out.
 * Certificates are not checked unless --ca names a bundle (then the
 * server's name must match --sni too).
 *
 * Exit status: 0, 1 if any connection failed, 2 on bad usage or setup.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
	IO_TIMEOUT_S = 10,    /* per blocking connect, read or write */
	RESP_MAX = 4096,      /* a response's head and body */
	SRC_ADDRS = 62500,    /* source addresses 127.0.1.1 - 127.0.250.250 */
	MAX_THREADS = 1024,
};

static const char BODY[] = "Hello, World!";

static struct {
	const char *host, *sni, *ca, *path;
	int port, threads, secs;
	long count;     /* -n, or --hold's N; 0: timed */
	bool resume, hold;
} o = { .host = "127.0.0.1", .sni = "localhost", .path = "/plaintext", .threads = 4,
	.secs = 5 };

static SSL_CTX *ctx;
static struct sockaddr_in dst;
static uint64_t deadline_ns;
static atomic_long next_conn, done, resumed, errors;
static atomic_bool described;
static char cipher[64], group[32];
static struct held { SSL *ssl; int fd; } *held;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Source address number i (mod SRC_ADDRS) of 127.0.0.0/8, port left to
 * connect(): IP_BIND_ADDRESS_NO_PORT, so the port is picked per
 * destination, not reserved by bind. */
static int bind_source(int fd, long i)
{
	long k = i % SRC_ADDRS;
	uint32_t a = 0x7f000000u | (uint32_t)(1 + k / 250) << 8 | (uint32_t)(1 + k % 250);
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(a) };
	int one = 1;

	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	return bind(fd, (struct sockaddr *)&src, sizeof(src));
}

/* A connected blocking socket for connection i, with IO_TIMEOUT_S on every
 * read and write (connect included), or -1. */
static int dial(long i)
{
	struct timeval tv = { .tv_sec = IO_TIMEOUT_S };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (bind_source(fd, i) < 0 || connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The Content-Length of a complete head (head[0..len) ends with the blank
 * line), or -1. */
static long content_length(const char *head, size_t len)
{
	const char *p = head, *end = head + len;
	static const char name[] = "\r\ncontent-length:";

	for (; p + sizeof(name) - 1 < end; p++)
		if (!strncasecmp(p, name, sizeof(name) - 1))
			return strtol(p + sizeof(name) - 1, NULL, 10);
	return -1;
}

/* Read one response into buf and check it: status 200, a Content-Length,
 * the body BODY. True if it is so. */
static bool read_response(SSL *ssl, char *buf)
{
	size_t len = 0, need = 0;
	const char *eoh = NULL;

	while (!eoh || len < need) {
		int n = SSL_read(ssl, buf + len, (int)(RESP_MAX - 1 - len));

		if (n <= 0)
			return false;
		len += (size_t)n;
		buf[len] = '\0';
		if (!eoh && (eoh = strstr(buf, "\r\n\r\n"))) {
			long cl = content_length(buf, (size_t)(eoh + 2 - buf));

			if (cl < 0 || cl > RESP_MAX / 2)
				return false;
			need = (size_t)(eoh + 4 - buf) + (size_t)cl;
		}
		if (len == RESP_MAX - 1 && len < need)
			return false;
	}
	return len == need && !strncmp(buf, "HTTP/1.1 200", 12) && !strcmp(eoh + 4, BODY);
}

/* GET the path and read the answer. close: ask the server to close after it. */
static bool get(SSL *ssl, bool close)
{
	char req[512], resp[RESP_MAX];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", o.path, o.sni,
	                 close ? "Connection: close\r\n" : "");

	if (n <= 0 || (size_t)n >= sizeof(req) || SSL_write(ssl, req, n) != n)
		return false;
	return read_response(ssl, resp);
}

/* The first connection's cipher suite and key exchange group, for the report. */
static void describe(SSL *ssl)
{
	int nid = SSL_get_negotiated_group(ssl);

	if (atomic_exchange(&described, true))
		return;
	snprintf(cipher, sizeof(cipher), "%s", SSL_get_cipher_name(ssl));
	snprintf(group, sizeof(group), "%s", nid ? OBJ_nid2sn(nid) : "none");
}

/* TLS client on fd, offering session (NULL: none), handshake done; or NULL
 * (fd left open). */
static SSL *handshake(int fd, SSL_SESSION *session)
{
	SSL *ssl = SSL_new(ctx);

	if (!ssl)
		return NULL;
	if (!SSL_set_fd(ssl, fd) || !SSL_set_tlsext_host_name(ssl, o.sni) ||
	    (o.ca && !SSL_set1_host(ssl, o.sni)) || (session && !SSL_set_session(ssl, session)) ||
	    SSL_connect(ssl) != 1) {
		SSL_free(ssl);
		return NULL;
	}
	describe(ssl);
	return ssl;
}

/* The end of a Connection: close exchange: the rest of the stream (tickets
 * sent late, the server's close_notify), then ours. */
static void finish(SSL *ssl)
{
	char sink[256];

	while (SSL_read(ssl, sink, sizeof(sink)) > 0)
		;
	SSL_shutdown(ssl);
}

/* Keep the session of ssl in *session if it can be resumed (the one it
 * replaces freed). */
static void keep_session(SSL *ssl, SSL_SESSION **session)
{
	SSL_SESSION *s = SSL_get1_session(ssl);

	if (s && !SSL_SESSION_is_resumable(s)) {
		SSL_SESSION_free(s);
		s = NULL;
	}
	SSL_SESSION_free(*session);
	*session = s;
}

/* One connection of handshake mode; *session: --resume's session. True if
 * it completed. */
static bool one_conn(long i, SSL_SESSION **session)
{
	int fd = dial(i);
	SSL *ssl = fd < 0 ? NULL : handshake(fd, o.resume ? *session : NULL);
	bool ok = ssl && get(ssl, true);

	if (ok && o.resume) {
		if (SSL_session_reused(ssl))
			atomic_fetch_add(&resumed, 1);
		keep_session(ssl, session);
	} else if (o.resume) {
		SSL_SESSION_free(*session); /* a failure starts afresh */
		*session = NULL;
	}
	if (ssl) {
		if (ok)
			finish(ssl);
		SSL_free(ssl);
	}
	if (fd >= 0)
		close(fd);
	return ok;
}

/* One connection of hold mode, kept in held[i]. */
static bool hold_conn(long i)
{
	int fd = dial(i);
	SSL *ssl = fd < 0 ? NULL : handshake(fd, NULL);

	if (ssl && get(ssl, false)) {
		held[i] = (struct held){ ssl, fd };
		return true;
	}
	SSL_free(ssl);
	if (fd >= 0)
		close(fd);
	return false;
}

static void *worker(void *arg)
{
	SSL_SESSION *session = NULL;

	(void)arg;
	for (;;) {
		long i = atomic_fetch_add(&next_conn, 1);
		bool ok;

		if ((o.count && i >= o.count) || (!o.hold && o.secs && now_ns() >= deadline_ns))
			break;
		ok = o.hold ? hold_conn(i) : one_conn(i, &session);
		atomic_fetch_add(ok ? &done : &errors, 1);
		ERR_clear_error();
	}
	SSL_SESSION_free(session);
	return NULL;
}

static __attribute__((noreturn)) void usage(void)
{
	fprintf(stderr,
	        "usage: tls_load -p PORT [-h HOST] [-c THREADS] [-d SECS] [-n CONNS] [--resume]\n"
	        "                [--hold N] [--sni NAME] [--ca FILE] [--path PATH]\n");
	exit(2);
}

static long num(const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		usage();
	return v;
}

static void parse_args(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "resume", 0, NULL, 'r' }, { "hold", 1, NULL, 'H' }, { "sni", 1, NULL, 's' },
		{ "ca", 1, NULL, 'a' }, { "path", 1, NULL, 'P' }, { 0, 0, 0, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "h:p:c:d:n:", lo, NULL)) != -1) {
		switch (c) {
		case 'h': o.host = optarg; break;
		case 'p': o.port = (int)num(optarg, 1, 65535); break;
		case 'c': o.threads = (int)num(optarg, 1, MAX_THREADS); break;
		case 'd': o.secs = (int)num(optarg, 0, 86400); break;
		case 'n': o.count = num(optarg, 1, 100000000); break;
		case 'r': o.resume = true; break;
		case 'H': o.hold = true; o.count = num(optarg, 1, 1000000); break;
		case 's': o.sni = optarg; break;
		case 'a': o.ca = optarg; break;
		case 'P': o.path = optarg; break;
		default: usage();
		}
	}
	if (optind != argc || !o.port || (!o.hold && !o.secs && !o.count) || (o.hold && o.resume))
		usage();
}

/* The client context: TLS 1.3, one group, one suite, buffers released while
 * a connection is idle (the holder keeps thousands). */
static bool make_ctx(void)
{
	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256") ||
	    !SSL_CTX_set1_groups_list(ctx, "X25519"))
		return false;
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (!o.ca) {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
		return true;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	return SSL_CTX_load_verify_locations(ctx, o.ca, NULL) == 1;
}

/* The soft fd limit up to the hard one: the holder keeps an fd per connection. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static bool setup(void)
{
	dst = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)o.port) };
	if (inet_pton(AF_INET, o.host, &dst.sin_addr) != 1) {
		fprintf(stderr, "tls_load: -h takes an IPv4 address, not '%s'\n", o.host);
		return false;
	}
	if (!make_ctx()) {
		fprintf(stderr, "tls_load: TLS context: %s\n",
		        ERR_reason_error_string(ERR_peek_last_error()));
		return false;
	}
	if (o.hold && !(held = calloc((size_t)o.count, sizeof(*held)))) {
		fprintf(stderr, "tls_load: no memory for %ld connections\n", o.count);
		return false;
	}
	signal(SIGPIPE, SIG_IGN); /* a close_notify to a server gone */
	raise_nofile();
	return true;
}

/* Run o.threads workers to the end; false if one could not start. */
static bool run_workers(void)
{
	pthread_t tid[MAX_THREADS];
	int i, n;

	for (n = 0; n < o.threads; n++)
		if (pthread_create(&tid[n], NULL, worker, NULL) != 0)
			break;
	for (i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
	if (n < o.threads)
		fprintf(stderr, "tls_load: started %d of %d threads\n", n, o.threads);
	return n == o.threads;
}

static void report(double secs)
{
	if (o.hold) {
		printf("held=%ld errors=%ld secs=%.3f cipher=%s group=%s\n", atomic_load(&done),
		       atomic_load(&errors), secs, *cipher ? cipher : "n/a", *group ? group : "n/a");
	} else {
		printf("connections=%ld resumed=%ld errors=%ld secs=%.3f conn_per_s=%.0f "
		       "cipher=%s group=%s\n", atomic_load(&done), atomic_load(&resumed),
		       atomic_load(&errors), secs, secs > 0 ? (double)atomic_load(&done) / secs : 0.0,
		       *cipher ? cipher : "n/a", *group ? group : "n/a");
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	uint64_t t0;
	bool started;

	parse_args(argc, argv);
	if (!setup())
		return 2;
	t0 = now_ns();
	deadline_ns = t0 + (uint64_t)o.secs * 1000000000u;
	started = run_workers();
	report((double)(now_ns() - t0) / 1e9);
	if (o.hold && started) {
		if (o.secs)
			sleep((unsigned)o.secs);
		else
			for (;;)
				pause();
	}
	return !started ? 2 : atomic_load(&errors) ? 1 : 0;
}
