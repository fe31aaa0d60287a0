/* SPDX-License-Identifier: MIT */
/*
 * echo_load: closed-loop TCP echo load generator.  Each of -c connections
 * sends one -s byte message, waits until all of it has come back, checks the
 * echoed bytes against what was sent, and sends the next one.  Connections
 * are spread over -t threads, each running its own level-triggered epoll
 * loop.  All connections are opened before the clock starts; then -w seconds
 * of warmup are run but not counted, then -d seconds are measured.  Prints
 * one line of name=value pairs: msgs_per_s, p50_us, p99_us and p999_us
 * (round trip from the first byte sent to the last byte received), errors
 * (mismatched or unsolicited bytes, resets, early EOF), mismatches, conns,
 * active (connections that completed a message in the measured window),
 * size, secs and total_msgs (every completed round trip, warmup included:
 * what a server-side CPU counter taken around the whole run divides by).
 *
 * With -n N the run is not a fixed window but a goal: it ends as soon as
 * every connection has completed N verified round trips, and -d is only a
 * bound (a hung or starving server fails instead of hanging).  There is no
 * warmup (-w is not used; every round trip counts).  Connections that reached
 * N keep going until all have, so the last ones are served under the full
 * load.  The line then also has rounds, min_msgs and max_msgs (fewest and
 * most round trips by one connection), elapsed_s (until the last connection
 * reached N; msgs_per_s divides by it, and secs is the bound) and
 * max_overtaken: for each message, how many round trips of other
 * connections completed between its send and the end of its echo, the
 * maximum over all messages (a message still out at the end counts with
 * what overtook it so far).  A message of a fair server is overtaken only a
 * small multiple of conns times however slow both are, while a starving
 * server (one that serves some connections while others wait, to be read or
 * to be accepted) lets the figure grow with the run.  Connections that fail
 * stop counting towards N, and the run ends once every other one reached N.
 *
 * Exit status: 0, 1 if errors were seen or (with -n) some connection had
 * not completed N round trips within -d seconds (then a message on stderr
 * says how many), 2 on bad usage or connect failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
	RBUF_SIZE = 64 * 1024,
	MAX_EVENTS = 256,
	PATTERN_SLACK = 251,  /* distinct message offsets into the pattern */
	CONNECT_TIMEOUT_S = 5,  /* per connect(), via SO_SNDTIMEO */
	CONNECT_BUDGET_S = 60,  /* watchdog for the whole connect phase */
	WATCHDOG_SLACK_S = 30,  /* watchdog past warmup + duration */
};

/* Latency histogram: log-linear, 2^SUB_BITS buckets per power of two of
 * nanoseconds; a percentile is reported as its bucket's midpoint, within
 * 1% of the true value. */
#define SUB_BITS 6
#define SUB (1u << SUB_BITS)
#define NBUCKETS ((64 - SUB_BITS + 1) * SUB)

struct opts {
	const char *host;
	const char *port;
	int conns, threads, secs, warm;
	size_t size;
	long rounds;              /* -n; 0: timed mode */
};

struct conn {
	int fd;
	bool want_out;            /* EPOLLOUT armed: message not fully sent */
	bool dead;
	uint32_t seq;
	size_t sent, got;
	const unsigned char *msg; /* current message, a window of the pattern */
	uint64_t t_start;
	uint64_t done_measured;
	uint64_t done;            /* round trips completed, window or not */
	uint64_t mark;            /* -n: `completions` when this one was sent */
};

struct worker {
	pthread_t tid;
	int first, n;             /* global ids of this worker's connections */
	struct conn *conns;
	int ep;
	unsigned char *rbuf;
	int connect_err;          /* errno of the first failed connect */
	int failed_conn;          /* which connection failed */
	uint64_t measured, total, errors, mismatches;
	uint64_t max_overtaken;   /* -n: see note_overtaken() */
	uint64_t hist[NBUCKETS];
};

static struct opts opt = {
	.host = "127.0.0.1", .port = "9000", .conns = 64, .threads = 1,
	.secs = 5, .warm = 1, .size = 64,
};
static struct addrinfo *target;
static unsigned char *pattern;   /* opt.size + PATTERN_SLACK random bytes */
static pthread_barrier_t connected, go;
static bool aborted;             /* set before `go` if any connect failed */
static uint64_t t_measure, t_end; /* set by main before `go` */

/* -n mode only, shared by the workers; relaxed: each is a plain counter. */
static _Atomic uint64_t completions; /* every round trip of every connection */
static _Atomic int settled;      /* connections that reached -n or failed */
static uint64_t t_settled;       /* when the last one settled; 0: never */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static unsigned bucket_of(uint64_t ns)
{
	unsigned msb, shift;

	if (ns < SUB)
		return ns;
	msb = 63 - __builtin_clzll(ns);
	shift = msb - SUB_BITS;
	return (shift + 1) * SUB + (unsigned)((ns >> shift) - SUB);
}

/* Midpoint of a bucket, in nanoseconds. */
static double bucket_value(unsigned b)
{
	unsigned shift;

	if (b < 2 * SUB)
		return b;
	shift = b / SUB - 1;
	return (double)((uint64_t)(SUB + b % SUB) << shift) +
	       ((double)(1ull << shift) - 1) / 2;
}

/* Message k of connection i starts at a different pattern offset than
 * message k-1 and than the same message of nearby connections, so replayed,
 * reordered or cross-wired bytes do not compare equal. */
static const unsigned char *message_for(int conn_id, uint32_t seq)
{
	return pattern + ((unsigned)conn_id * 37u + seq) % PATTERN_SLACK;
}

static void fill_pattern(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	pattern = malloc(opt.size + PATTERN_SLACK);
	if (!pattern) {
		fprintf(stderr, "echo_load: out of memory\n");
		exit(2);
	}
	for (size_t i = 0; i < opt.size + PATTERN_SLACK; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		pattern[i] = (unsigned char)(x >> 24);
	}
}

static void set_out(struct worker *w, struct conn *c, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0),
				  .data.ptr = c };

	if (c->want_out == on)
		return;
	c->want_out = on;
	epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* -n mode: a connection is settled once it reached -n round trips or
 * failed; the thread settling the last one records when, and main reads it
 * after joining. */
static void settle(uint64_t t)
{
	if (atomic_fetch_add_explicit(&settled, 1, memory_order_relaxed) + 1 ==
	    opt.conns)
		t_settled = t;
}

static bool all_settled(void)
{
	if (!opt.rounds)
		return false;
	return atomic_load_explicit(&settled, memory_order_relaxed) ==
	       opt.conns;
}

/* Errors end the connection: once its byte stream is off, every later
 * comparison would fail too and inflate the count. */
static void fail(struct worker *w, struct conn *c)
{
	w->errors++;
	c->dead = true;
	epoll_ctl(w->ep, EPOLL_CTL_DEL, c->fd, NULL);
	if (opt.rounds && c->done < (uint64_t)opt.rounds)
		settle(now_ns());
}

static void push(struct worker *w, struct conn *c)
{
	while (c->sent < opt.size) {
		ssize_t n = send(c->fd, c->msg + c->sent, opt.size - c->sent,
				 MSG_NOSIGNAL);

		if (n > 0) {
			c->sent += n;
		} else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			set_out(w, c, true);
			return;
		} else if (!(n < 0 && errno == EINTR)) {
			fail(w, c);
			return;
		}
	}
	set_out(w, c, false);
}

static void start_message(struct worker *w, struct conn *c, int id,
			  uint64_t t)
{
	c->seq++;
	c->msg = message_for(id, c->seq);
	c->sent = c->got = 0;
	c->t_start = t;
	if (opt.rounds)
		c->mark = atomic_load_explicit(&completions,
					       memory_order_relaxed);
	push(w, c);
}

/* -n mode: a message was overtaken n times, by round trips of other
 * connections completed while it was out. */
static void note_overtaken(struct worker *w, uint64_t n)
{
	if (n > w->max_overtaken)
		w->max_overtaken = n;
}

/* -n mode, once per completed round trip: the completions of all
 * connections since this message was sent are other connections' (a
 * connection has one message out at a time).  Never negative: a thread's
 * RMW reads a value no older than its own earlier load of the same atomic. */
static void count_round(struct worker *w, struct conn *c, uint64_t t)
{
	uint64_t before = atomic_fetch_add_explicit(&completions, 1,
						    memory_order_relaxed);

	note_overtaken(w, before - c->mark);
	if (c->done == (uint64_t)opt.rounds)
		settle(t);
}

static void complete(struct worker *w, struct conn *c, int id)
{
	uint64_t t = now_ns();

	w->total++;
	c->done++;
	if (opt.rounds)
		count_round(w, c, t);
	if (t >= t_measure && t < t_end) {
		w->measured++;
		c->done_measured++;
		w->hist[bucket_of(t - c->t_start)]++;
	}
	start_message(w, c, id, t);
}

/* Reads at most what is still owed for the current message; bytes beyond
 * what was sent, or differing from it, are errors. */
static void pull(struct worker *w, struct conn *c, int id)
{
	size_t want = opt.size - c->got;
	ssize_t n = recv(c->fd, w->rbuf, want < RBUF_SIZE ? want : RBUF_SIZE,
			 0);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) { /* reset or EOF while the server still owes bytes */
		fail(w, c);
		return;
	}
	if (c->got + n > c->sent ||
	    memcmp(w->rbuf, c->msg + c->got, n) != 0) {
		w->mismatches++;
		fail(w, c);
		return;
	}
	c->got += n;
	if (c->got == opt.size)
		complete(w, c, id);
}

static void on_event(struct worker *w, struct conn *c, uint32_t events)
{
	int id = w->first + (int)(c - w->conns);

	if (c->dead)
		return;
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		pull(w, c, id);
	if (!c->dead && c->want_out && (events & EPOLLOUT))
		push(w, c);
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Blocking connect bounded by SO_SNDTIMEO, then nonblocking for the loop.
 * Returns 0 or an errno value. */
static int open_conn(struct worker *w, struct conn *c)
{
	struct timeval tv = { .tv_sec = CONNECT_TIMEOUT_S };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	int one = 1, fd;

	fd = socket(target->ai_family, SOCK_STREAM | SOCK_CLOEXEC,
		    target->ai_protocol);
	if (fd < 0)
		return errno;
	c->fd = fd;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, target->ai_addr, target->ai_addrlen) < 0)
		return errno == EINPROGRESS ? ETIMEDOUT : errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (set_nonblock(fd) < 0 || epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev))
		return errno;
	return 0;
}

/* Stops at the first failure; main reports it and nothing is sent. */
static void connect_all(struct worker *w)
{
	for (int i = 0; i < w->n; i++)
		w->conns[i].fd = -1;
	for (int i = 0; i < w->n; i++) {
		int err = open_conn(w, &w->conns[i]);

		if (err) {
			w->connect_err = err;
			w->failed_conn = w->first + i;
			return;
		}
	}
}

/* -n mode, when the run ends: a message still out counts with what
 * overtook it so far, so one the server never echoes shows too. */
static void count_pending(struct worker *w)
{
	uint64_t now = atomic_load_explicit(&completions, memory_order_relaxed);

	for (int i = 0; i < w->n; i++) {
		const struct conn *c = &w->conns[i];

		if (!c->dead)
			note_overtaken(w, now - c->mark);
	}
}

/* Until t_end, or in -n mode until every connection settled. */
static void run_loop(struct worker *w)
{
	struct epoll_event evs[MAX_EVENTS];
	uint64_t t = now_ns();

	for (int i = 0; i < w->n; i++)
		start_message(w, &w->conns[i], w->first + i, t);
	while ((t = now_ns()) < t_end && !all_settled()) {
		uint64_t left_ms = (t_end - t) / 1000000 + 1;
		int n = epoll_wait(w->ep, evs, MAX_EVENTS,
				   left_ms < 100 ? (int)left_ms : 100);

		for (int i = 0; i < n; i++)
			on_event(w, evs[i].data.ptr, evs[i].events);
	}
	if (opt.rounds)
		count_pending(w);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	connect_all(w);
	pthread_barrier_wait(&connected);
	pthread_barrier_wait(&go);
	if (!aborted)
		run_loop(w);
	for (int i = 0; i < w->n; i++)
		if (w->conns[i].fd >= 0)
			close(w->conns[i].fd);
	return NULL;
}

static void watchdog(int sig)
{
	static const char msg[] = "echo_load: watchdog: run overdue, exiting\n";

	(void)sig;
	if (write(2, msg, sizeof msg - 1) < 0)
		_exit(3);
	_exit(3);
}

static __attribute__((noreturn)) void usage(void)
{
	fprintf(stderr,
		"usage: echo_load [-h host] [-p port] [-c conns] [-s bytes] "
		"[-d secs] [-w warmup_secs] [-t threads] [-n rounds]\n"
		"defaults: -h 127.0.0.1 -p 9000 -c 64 -s 64 -d 5 -w 1 -t 1\n"
		"-n: run until each connection made that many round trips, "
		"-d bounding it (no warmup)\n");
	exit(2);
}

static long num(const char *s, long lo, long hi)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v < lo || v > hi)
		usage();
	return v;
}

static void parse_args(int argc, char **argv)
{
	int o;

	while ((o = getopt(argc, argv, "h:p:c:s:d:w:t:n:")) != -1) {
		switch (o) {
		case 'h': opt.host = optarg; break;
		case 'p': num(optarg, 1, 65535); opt.port = optarg; break;
		case 'c': opt.conns = num(optarg, 1, 1000000); break;
		case 's': opt.size = num(optarg, 1, 64L << 20); break;
		case 'd': opt.secs = num(optarg, 1, 86400); break;
		case 'w': opt.warm = num(optarg, 0, 86400); break;
		case 't': opt.threads = num(optarg, 1, 1024); break;
		case 'n': opt.rounds = num(optarg, 1, 1000000000); break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
	if (opt.rounds)
		opt.warm = 0;
	if (opt.threads > opt.conns)
		opt.threads = opt.conns;
}

static void resolve(void)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM };
	int err = getaddrinfo(opt.host, opt.port, &hints, &target);

	if (err) {
		fprintf(stderr, "echo_load: cannot resolve %s: %s\n", opt.host,
			gai_strerror(err));
		exit(2);
	}
}

/* Each connection is an fd here and, against a local server, one there. */
static void raise_nofile(void)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)opt.conns + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
		rl.rlim_cur = need < rl.rlim_max ? need : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void start_workers(struct worker *ws)
{
	int first = 0;

	pthread_barrier_init(&connected, NULL, opt.threads + 1);
	pthread_barrier_init(&go, NULL, opt.threads + 1);
	for (int i = 0; i < opt.threads; i++) {
		struct worker *w = &ws[i];

		w->first = first;
		w->n = opt.conns / opt.threads + (i < opt.conns % opt.threads);
		first += w->n;
		w->conns = calloc(w->n, sizeof *w->conns);
		w->rbuf = malloc(RBUF_SIZE);
		w->ep = epoll_create1(EPOLL_CLOEXEC);
		if (!w->conns || !w->rbuf || w->ep < 0 ||
		    pthread_create(&w->tid, NULL, worker_main, w)) {
			fprintf(stderr, "echo_load: cannot start worker %d\n", i);
			exit(2);
		}
	}
}

/* Returns false, after saying why, if any connection could not be made. */
static bool check_connected(struct worker *ws)
{
	for (int i = 0; i < opt.threads; i++) {
		if (ws[i].connect_err) {
			fprintf(stderr,
				"echo_load: cannot connect to %s port %s "
				"(connection %d of %d): %s\n",
				opt.host, opt.port, ws[i].failed_conn + 1,
				opt.conns, strerror(ws[i].connect_err));
			return false;
		}
	}
	return true;
}

static double percentile_us(const uint64_t *hist, uint64_t count, double p)
{
	uint64_t rank = (uint64_t)(p * count + 0.999999), acc = 0;

	if (!count)
		return 0;
	for (unsigned b = 0; b < NBUCKETS; b++) {
		acc += hist[b];
		if (acc >= rank)
			return bucket_value(b) / 1000;
	}
	return 0;
}

struct totals {
	uint64_t measured, total, errors, mismatches;
	uint64_t max_overtaken;
	uint64_t min_msgs, max_msgs;  /* round trips of one connection */
	int active, short_of;         /* short_of: -n connections below -n */
};

/* Adds every worker's counters into *s and its histogram into hist. */
static void sum_workers(const struct worker *ws, struct totals *s,
			uint64_t *hist)
{
	s->min_msgs = UINT64_MAX;
	for (int i = 0; i < opt.threads; i++) {
		const struct worker *w = &ws[i];

		s->measured += w->measured;
		s->total += w->total;
		s->errors += w->errors;
		s->mismatches += w->mismatches;
		if (w->max_overtaken > s->max_overtaken)
			s->max_overtaken = w->max_overtaken;
		for (unsigned b = 0; b < NBUCKETS; b++)
			hist[b] += w->hist[b];
		for (int j = 0; j < w->n; j++) {
			uint64_t done = w->conns[j].done;

			s->active += w->conns[j].done_measured > 0;
			s->short_of += done < (uint64_t)opt.rounds;
			s->min_msgs = done < s->min_msgs ? done : s->min_msgs;
			s->max_msgs = done > s->max_msgs ? done : s->max_msgs;
		}
	}
}

/* -n mode: the run's length, until the last connection settled or, if
 * some never did, until the bound (the only other way the loops end). */
static double elapsed_s(void)
{
	return (double)((t_settled ? t_settled : t_end) - t_measure) / 1e9;
}

static int report(struct worker *ws)
{
	static uint64_t hist[NBUCKETS];
	struct totals s = { 0 };
	double secs = opt.rounds ? elapsed_s() : opt.secs;

	sum_workers(ws, &s, hist);
	printf("msgs_per_s=%.0f p50_us=%.1f p99_us=%.1f p999_us=%.1f "
	       "errors=%llu mismatches=%llu conns=%d active=%d size=%zu "
	       "secs=%d total_msgs=%llu",
	       (double)s.measured / secs,
	       percentile_us(hist, s.measured, 0.50),
	       percentile_us(hist, s.measured, 0.99),
	       percentile_us(hist, s.measured, 0.999),
	       (unsigned long long)s.errors, (unsigned long long)s.mismatches,
	       opt.conns, s.active, opt.size, opt.secs,
	       (unsigned long long)s.total);
	if (opt.rounds)
		printf(" rounds=%ld min_msgs=%llu max_msgs=%llu elapsed_s=%.3f "
		       "max_overtaken=%llu",
		       opt.rounds, (unsigned long long)s.min_msgs,
		       (unsigned long long)s.max_msgs, secs,
		       (unsigned long long)s.max_overtaken);
	printf("\n");
	if (s.short_of)
		fprintf(stderr,
			"echo_load: %d of %d connections had not completed "
			"%ld round trips after %.3f s (bound -d %d, "
			"%llu errors)\n",
			s.short_of, opt.conns, opt.rounds, secs, opt.secs,
			(unsigned long long)s.errors);
	return s.errors || s.short_of ? 1 : 0;
}

/* Leaves nothing for leak checkers to flag. */
static void free_all(struct worker *ws)
{
	for (int i = 0; i < opt.threads; i++) {
		free(ws[i].conns);
		free(ws[i].rbuf);
		close(ws[i].ep);
	}
	free(ws);
	free(pattern);
	freeaddrinfo(target);
}

int main(int argc, char **argv)
{
	struct worker *ws;
	int status;

	parse_args(argc, argv);
	signal(SIGPIPE, SIG_IGN);
	resolve();
	raise_nofile();
	fill_pattern();
	ws = calloc(opt.threads, sizeof *ws);
	if (!ws)
		return 2;
	signal(SIGALRM, watchdog);
	alarm(CONNECT_BUDGET_S);
	start_workers(ws);

	pthread_barrier_wait(&connected);
	aborted = !check_connected(ws);
	if (!aborted) {
		t_measure = now_ns() + (uint64_t)opt.warm * 1000000000u;
		t_end = t_measure + (uint64_t)opt.secs * 1000000000u;
		alarm(opt.warm + opt.secs + WATCHDOG_SLACK_S);
	}
	pthread_barrier_wait(&go);
	for (int i = 0; i < opt.threads; i++)
		pthread_join(ws[i].tid, NULL);
	status = aborted ? 2 : report(ws);
	free_all(ws);
	return status;
}
