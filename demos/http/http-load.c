/* SPDX-License-Identifier: MIT */
/*
 * http-load - an HTTP/1.1 load generator on the runtime's client
 * (libruntime-http): -c fibers spread over --cores cores, each with its
 * own keep-alive connection (one client, max_per_origin = -c, so each
 * fiber keeps the connection it took), sending GETs for -d seconds.
 *
 * Closed loop by default: each fiber sends its next request when the last
 * answer has been read. --rate R is an open loop: R requests a second in
 * all, each fiber on a fixed schedule, and a request's latency counted
 * from when it was due, not from when it went out (a slow answer delays
 * the ones behind it, and that delay is counted: no coordinated
 * omission). --pipeline D writes D requests at once on each connection
 * and then reads D answers: the client library sends one request at a
 * time, so this mode has its own connections (runtime_conn, TLS too) and
 * reads the answers with the library's response parser and chunked
 * decoder, compiled in.
 *
 * Latencies go into a log-linear histogram per core (32 buckets per power
 * of two: about 3 % wide), merged at the end: no sample is kept. At the
 * end: requests per second, p50/p90/p99/p99.9/max, errors by kind, the
 * client's connection counts, and this process's CPU time (utime + stime
 * from /proc/self/stat) per request. A fiber whose request failed waits
 * 10 ms before its next one (closed loop, and --pipeline's dials): errors
 * are counted, not spun on.
 *
 * --h2 speaks HTTP/2 (h2c by prior knowledge for http://, h2 by ALPN for
 * https://): -c connections with -m streams each at once - CONNS x M
 * fibers, each sending its requests in turn, over connections the client
 * fills to M streams (its h2_max_streams) before it dials another - as
 * h2load -c CONNS -m M does.
 *
 *   http-load [-c CONNS] [-m STREAMS] [-d SECONDS] [--cores N] [--h2]
 *             [--pipeline D] [--rate R] [--timeout MS] [--insecure] URL
 */
#define _GNU_SOURCE
#include "../cli.h"
#include "client.h" /* the library's URL and response parsers, compiled in */

#include <getopt.h>
#include <runtime_http.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEC 1000000000ull
#define MS 1000000ull
#define SUB_BITS 5
#define SUB (1u << SUB_BITS)       /* buckets per power of two */
#define BUCKETS (SUB * 42)         /* up to 2^41 ns: over half an hour */
#define ERRNO_MAX 256
#define PIPE_IN (64 * 1024)

static struct options {
	unsigned conns, streams, cores, pipeline;
	int h2;
	uint64_t duration_ns, timeout_ns;
	double rate;
	int insecure;
	const char *url;
} opt = { .conns = 16, .streams = 1, .cores = 1, .pipeline = 1, .duration_ns = 10 * SEC,
	  .timeout_ns = 10 * SEC };

/* One core's figures: written by that core's fibers only, read after the
 * run. */
struct tally {
	uint64_t requests, ok, bytes;
	uint64_t status[6];            /* answers by class, [2] 2xx ... */
	uint64_t errors[ERRNO_MAX];    /* failures by errno */
	uint64_t hist[BUCKETS];
} __attribute__((aligned(64)));

static struct {
	struct runtime *rt;
	struct runtime_http_client *cl;
	struct runtime_tls *tls;
	struct tally *tallies;         /* one per core */
	struct runtime_waitgroup done;
	uint64_t start, end, finished;
	uint64_t cpu_ticks;            /* during the run */
	struct runtime_http_client_stats client;
	unsigned pipe_connects;
} run;

/* ------------------------------------------------------------ histogram */

static unsigned bucket(uint64_t v)
{
	if (v < 2 * SUB)
		return (unsigned)v;
	unsigned shift = 63u - (unsigned)__builtin_clzll(v) - SUB_BITS;
	unsigned idx = (shift + 1) * SUB + (unsigned)(v >> shift) - SUB;
	return idx < BUCKETS ? idx : BUCKETS - 1;
}

/* The largest value a bucket holds. */
static uint64_t bucket_top(unsigned idx)
{
	if (idx < 2 * SUB)
		return idx;
	unsigned shift = idx / SUB - 1;
	return (((uint64_t)(idx % SUB + SUB) + 1) << shift) - 1;
}

static void record(struct tally *t, uint64_t due, int rc, int status, uint64_t bytes)
{
	t->requests++;
	if (rc < 0) {
		t->errors[-rc < ERRNO_MAX ? -rc : 0]++;
		return;
	}
	t->hist[bucket(runtime_now() - due)]++;
	t->status[status / 100 < 6 ? status / 100 : 0]++;
	t->ok += status >= 200 && status < 400;
	t->bytes += bytes;
}

static struct tally *my_tally(void)
{
	return &run.tallies[runtime_core_index()];
}

/* ------------------------------------------------------ the client's way */

/* The request fibers: one per connection, one per stream with --h2. */
static unsigned fibers(void)
{
	return opt.conns * opt.streams;
}

/* When fiber i's next request is due: now (closed loop), or its place in
 * the schedule (open loop: the fibers' slots interleaved). */
static uint64_t next_due(unsigned i, uint64_t k)
{
	if (opt.rate <= 0)
		return runtime_now();
	double per_fiber = (double)SEC * fibers() / opt.rate;
	return run.start + (uint64_t)(per_fiber * ((double)k + (double)i / fibers()));
}

/* One GET, its body read and counted. 0 or -errno; *status, *bytes. */
static int one_get(int *status, uint64_t *bytes)
{
	struct runtime_http_client_request req = { .url = opt.url,
		                                    .deadline_ns = runtime_now() + opt.timeout_ns };
	struct runtime_http_result *res;
	char buf[16384];
	ssize_t n;
	int rc = runtime_http_request(run.cl, &req, &res);

	if (rc < 0)
		return rc;
	*status = runtime_http_result_status(res);
	*bytes = 0;
	while ((n = runtime_http_result_read(res, buf, sizeof(buf))) > 0)
		*bytes += (uint64_t)n;
	runtime_http_result_close(res);
	return n < 0 ? (int)n : 0;
}

static void client_worker(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;
	struct tally *t = my_tally();

	for (uint64_t k = 0;; k++) {
		uint64_t due = next_due(i, k), now = runtime_now();
		if (due >= run.end || now >= run.end)
			break;
		if (due > now && runtime_sleep(due - now) < 0)
			break;
		int status = 0;
		uint64_t bytes = 0;
		int rc = one_get(&status, &bytes);
		record(t, due, rc, status, bytes);
		if (rc < 0 && opt.rate <= 0)
			runtime_sleep(10 * MS); /* a refusing server is not to be spun on */
	}
	runtime_waitgroup_done(&run.done);
}

/* ----------------------------------------------------------- pipelining */

struct pipe_conn {
	struct runtime_conn *rc;
	size_t off, len;
	char in[PIPE_IN];
};

static const struct http_limits pipe_limits = {
	.line_max = 8192, .head_max = 16384, .headers_max = HTTP_HEADERS_MAX, .body_max = UINT64_MAX,
};

static struct {
	struct http_url url;
	char host[HTTP_HOST_MAX + 1]; /* NUL-terminated */
	char *requests;               /* DEPTH requests, back to back */
	size_t len;
} pipe_target;

/* DEPTH copies of one GET of url. */
static int pipe_prepare(const char *url)
{
	struct http_url *u = &pipe_target.url;
	char one[4096];
	int rc = runtime__http_url_parse(url, u), n;

	if (rc < 0)
		return rc;
	snprintf(pipe_target.host, sizeof(pipe_target.host), "%.*s", (int)u->host.len, u->host.p);
	n = snprintf(one, sizeof(one), "GET %s%.*s HTTP/1.1\r\nHost: %s%s%s:%u\r\n"
	             "User-Agent: http-load\r\n\r\n", u->slash ? "/" : "", (int)u->target.len,
	             u->target.p, u->ip6 ? "[" : "", pipe_target.host, u->ip6 ? "]" : "", u->port);
	if (n < 0 || (size_t)n >= sizeof(one))
		return -EINVAL;
	if (!(pipe_target.requests = malloc((size_t)n * opt.pipeline)))
		return -ENOMEM;
	for (unsigned i = 0; i < opt.pipeline; i++)
		memcpy(pipe_target.requests + (size_t)n * i, one, (size_t)n);
	pipe_target.len = (size_t)n * opt.pipeline;
	return 0;
}

static int pipe_dial(struct pipe_conn *p)
{
	uint64_t own = runtime_deadline_get();
	int fd, rc;

	runtime_deadline_set(runtime_now() + opt.timeout_ns);
	fd = runtime_tcp_connect(pipe_target.host, pipe_target.url.port);
	rc = fd < 0 ? fd : runtime_conn_open(&p->rc, fd, 0);
	if (fd >= 0 && rc < 0)
		runtime_close(fd);
	if (rc == 0 && pipe_target.url.https &&
	    (rc = runtime_conn_tls_connect(p->rc, run.tls, pipe_target.host)) < 0) {
		runtime_conn_close(p->rc);
		p->rc = NULL;
	}
	runtime_deadline_set(own);
	p->off = p->len = 0;
	if (rc == 0)
		__atomic_fetch_add(&run.pipe_connects, 1, __ATOMIC_RELAXED);
	return rc;
}

/* More input: the unread bytes moved to the front, one read after them. */
static ssize_t pipe_fill(struct pipe_conn *p)
{
	if (p->off) {
		memmove(p->in, p->in + p->off, p->len - p->off);
		p->len -= p->off;
		p->off = 0;
	}
	if (p->len == sizeof(p->in))
		return -EMSGSIZE;
	ssize_t n = runtime_conn_read(p->rc, p->in + p->len, sizeof(p->in) - p->len);
	if (n > 0)
		p->len += (size_t)n;
	return n == 0 ? -EPIPE : n;
}

/* The next final answer's head (interim ones skipped), consumed. */
static int pipe_head(struct pipe_conn *p, struct http_response *h)
{
	for (;;) {
		int rc = runtime__http_parse_response(p->in + p->off, p->len - p->off, &pipe_limits, 0, h);
		if (rc > 0)
			p->off += (size_t)rc;
		if (rc < 0 || (rc > 0 && h->status >= 200))
			return rc;
		if (rc == 0 && (rc = (int)pipe_fill(p)) < 0)
			return rc;
	}
}

/* The body after a head, skipped (chunked: decoded in place). Its
 * decoded length, or -errno. */
static int64_t pipe_body(struct pipe_conn *p, const struct http_response *h)
{
	bool chunked = h->body == HTTP_FRAME_CHUNKED;
	uint64_t left = h->body == HTTP_FRAME_LENGTH ? h->content_length : 0, got = 0;
	struct http_chunked ch;
	int rc = 0;

	if (h->body == HTTP_FRAME_CLOSE)
		return -EPROTO; /* a body until the close cannot be pipelined */
	runtime__http_chunked_init(&ch, &pipe_limits);
	while (chunked ? rc == 0 : left > 0) {
		size_t avail = p->len - p->off, used, made;
		if (!avail) {
			ssize_t n = pipe_fill(p);
			if (n < 0)
				return n;
			continue;
		}
		if (!chunked) {
			used = made = avail < left ? avail : (size_t)left;
			left -= used;
		} else if ((rc = runtime__http_chunked_decode(&ch, p->in + p->off, avail, p->in + p->off,
		                                              &used, &made)) < 0) {
			return -EBADMSG;
		}
		p->off += used;
		got += made;
	}
	return (int64_t)got;
}

/* One batch: DEPTH requests written at once, DEPTH answers read, each
 * counted from the write. 0 if the connection may carry the next batch;
 * the answers that did not come count as failed. */
static int pipe_batch(struct pipe_conn *p, struct tally *t)
{
	uint64_t sent = runtime_now();
	struct http_response h = { .keep_alive = true };
	unsigned i = 0;
	int err = 0;

	runtime_conn_set_read_deadline(p->rc, sent + opt.timeout_ns);
	runtime_conn_set_write_deadline(p->rc, sent + opt.timeout_ns);
	if (runtime_conn_write(p->rc, pipe_target.requests, pipe_target.len, NULL) < 0)
		err = -EPIPE;
	while (!err && i < opt.pipeline && h.keep_alive) {
		int64_t body = 0;
		int rc = pipe_head(p, &h);
		if (rc > 0)
			body = pipe_body(p, &h);
		err = rc < 0 ? rc : body < 0 ? (int)body : 0;
		if (!err) {
			record(t, sent, 0, h.status, (uint64_t)body);
			i++;
		}
	}
	for (; i < opt.pipeline; i++) /* the connection failed, or closed early */
		record(t, sent, err ? err : -ECONNRESET, 0, 0);
	return !err && h.keep_alive ? 0 : -1;
}

static void pipe_worker(void *arg)
{
	struct pipe_conn *p = calloc(1, sizeof(*p));
	struct tally *t = my_tally();

	(void)arg;
	while (p && runtime_now() < run.end) {
		int rc = p->rc ? 0 : pipe_dial(p);
		if (rc < 0) {
			record(t, runtime_now(), rc, 0, 0);
			runtime_sleep(10 * MS); /* not a spin on a refusing server */
			continue;
		}
		if (pipe_batch(p, t) < 0) {
			runtime_conn_close(p->rc);
			p->rc = NULL;
		}
	}
	if (p && p->rc)
		runtime_conn_close(p->rc);
	free(p);
	runtime_waitgroup_done(&run.done);
}

/* -------------------------------------------------------------- the run */

/* utime + stime of this process so far, in clock ticks. */
static uint64_t cpu_ticks(void)
{
	char buf[1024];
	unsigned long long u = 0, s = 0;
	FILE *f = fopen("/proc/self/stat", "r");

	if (f && fgets(buf, sizeof(buf), f)) {
		const char *p = strrchr(buf, ')'); /* fields 14 and 15 */
		if (p)
			sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &u, &s);
	}
	if (f)
		fclose(f);
	return u + s;
}

/* The first fiber: the client, the workers spread over the cores, their
 * end, the client closed here (its pools are the cores'). */
static void bench(void *arg)
{
	struct runtime_http_client_config cfg;
	uint64_t ticks = cpu_ticks();

	(void)arg;
	runtime_http_client_config_init(&cfg);
	cfg.max_per_origin = opt.conns; /* each fiber keeps its connection */
	cfg.tls = run.tls;
	cfg.user_agent = "http-load";
	cfg.no_h2 = !opt.h2;
	cfg.h2c = opt.h2;
	cfg.h2_max_streams = opt.streams;
	if (runtime_http_client_create(&run.cl, &cfg) < 0)
		return;
	runtime_waitgroup_add(&run.done, fibers());
	run.start = runtime_now();
	run.end = run.start + opt.duration_ns;
	for (unsigned i = 0; i < fibers(); i++)
		if (runtime_spawn_on(run.rt, i % opt.cores,
		                     opt.pipeline > 1 ? pipe_worker : client_worker,
		                     (void *)(uintptr_t)i) < 0)
			runtime_waitgroup_done(&run.done);
	runtime_waitgroup_wait(&run.done, -1);
	run.finished = runtime_now();
	run.cpu_ticks = cpu_ticks() - ticks;
	runtime_http_client_stats(run.cl, &run.client);
	runtime_http_client_destroy(run.cl);
}

/* ------------------------------------------------------------- the report */

static void merge(struct tally *all)
{
	memset(all, 0, sizeof(*all));
	for (unsigned c = 0; c < opt.cores; c++) {
		const struct tally *t = &run.tallies[c];
		all->requests += t->requests;
		all->ok += t->ok;
		all->bytes += t->bytes;
		for (int i = 0; i < 6; i++)
			all->status[i] += t->status[i];
		for (int i = 0; i < ERRNO_MAX; i++)
			all->errors[i] += t->errors[i];
		for (unsigned i = 0; i < BUCKETS; i++)
			all->hist[i] += t->hist[i];
	}
}

/* The latency below which a fraction q of the answers came, in ms. */
static double percentile(const struct tally *t, uint64_t answered, double q)
{
	uint64_t want = (uint64_t)(q * (double)answered + 0.5), seen = 0;

	for (unsigned i = 0; i < BUCKETS; i++)
		if ((seen += t->hist[i]) >= want && seen)
			return (double)bucket_top(i) / MS;
	return 0;
}

static void report_latency(const struct tally *t, uint64_t answered)
{
	printf("  latency   p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms\n",
	       percentile(t, answered, 0.50), percentile(t, answered, 0.90),
	       percentile(t, answered, 0.99), percentile(t, answered, 0.999),
	       percentile(t, answered, 1.0));
}

static void report_errors(const struct tally *t, uint64_t answered)
{
	bool any = false;

	printf("  errors   ");
	for (int i = 0; i < ERRNO_MAX; i++)
		if (t->errors[i]) {
			printf(" %s %llu", i ? runtime_error_name(-i) : "other",
			       (unsigned long long)t->errors[i]);
			any = true;
		}
	for (int c = 0; c < 6; c++)
		if (c != 2 && c != 3 && t->status[c]) {
			printf(" status-%dxx %llu", c, (unsigned long long)t->status[c]);
			any = true;
		}
	printf("%s\n", any ? "" : " none");
	(void)answered;
}

static void report(void)
{
	struct tally *all = calloc(1, sizeof(*all));
	double secs = (double)(run.finished - run.start) / SEC, tick = (double)sysconf(_SC_CLK_TCK);
	uint64_t answered = 0;

	if (!all)
		return;
	merge(all);
	for (int i = 0; i < 6; i++)
		answered += all->status[i];
	printf("http-load: %s, %u connections%s, %u core%s, %.1f s, %s\n", opt.url, opt.conns,
	       opt.h2 ? " (HTTP/2)" : "", opt.cores, opt.cores == 1 ? "" : "s", secs,
	       opt.pipeline > 1 ? "pipelined" : opt.rate > 0 ? "open loop" : "closed loop");
	if (opt.h2)
		printf("  http/2    %u streams per connection at most, %llu requests over HTTP/2\n",
		       opt.streams, (unsigned long long)run.client.h2_requests);
	printf("  requests  %llu answered (%.1f/s), %llu ok, %.1f MB of bodies\n",
	       (unsigned long long)answered, (double)answered / secs, (unsigned long long)all->ok,
	       (double)all->bytes / 1e6);
	report_latency(all, answered);
	report_errors(all, answered);
	printf("  conns     %llu connects, %llu requests on a pooled connection, %llu retried\n",
	       (unsigned long long)(opt.pipeline > 1 ? run.pipe_connects : run.client.connects),
	       (unsigned long long)run.client.reused, (unsigned long long)run.client.retried);
	printf("  cpu       %.2f s (utime + stime), %.2f us per request\n", run.cpu_ticks / tick,
	       answered ? run.cpu_ticks / tick * 1e6 / (double)answered : 0.0);
	free(all);
}

/* ------------------------------------------------------------------ main */

static void usage(FILE *to)
{
	fprintf(to,
	        "usage: http-load [-c CONNS] [-m STREAMS] [-d SECONDS] [--cores N] [--h2]\n"
	        "                 [--pipeline DEPTH] [--rate REQ_PER_S] [--timeout MS]\n"
	        "                 [--insecure] URL\n"
	        "Defaults: 16 connections, 10 s, 1 core, HTTP/1.1, no pipelining, closed\n"
	        "loop, timeout 10000 ms. --h2: HTTP/2, -m streams at once per connection\n"
	        "(1). --rate (open loop) and --pipeline do not go together, nor --h2\n"
	        "and --pipeline.\n");
}

static int parse_options(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cores", 1, NULL, 'C' }, { "pipeline", 1, NULL, 'p' }, { "rate", 1, NULL, 'r' },
		{ "timeout", 1, NULL, 't' }, { "insecure", 0, NULL, 'k' }, { "help", 0, NULL, 'h' },
		{ "h2", 0, NULL, '2' }, { NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "c:d:m:", opts, NULL)) != -1) {
		bool ok = true;
		switch (c) {
		case 'c': ok = demo_number(optarg, 1u << 20, &v) && v; opt.conns = (unsigned)v; break;
		case 'd': ok = demo_number(optarg, 1u << 20, &v) && v; opt.duration_ns = v * SEC; break;
		case 'C': ok = demo_number(optarg, RUNTIME_MAX_CORES, &v) && v; opt.cores = (unsigned)v; break;
		case 'p': ok = demo_number(optarg, 1u << 16, &v) && v; opt.pipeline = (unsigned)v; break;
		case 'r': ok = (opt.rate = atof(optarg)) > 0; break;
		case 't': ok = demo_number(optarg, 1u << 30, &v) && v; opt.timeout_ns = v * MS; break;
		case 'k': opt.insecure = 1; break;
		case '2': opt.h2 = 1; break;
		case 'm': ok = demo_number(optarg, 1u << 16, &v) && v; opt.streams = (unsigned)v; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (!ok) {
			fprintf(stderr, "http-load: bad value '%s'\n", optarg);
			return 2;
		}
	}
	if (optind != argc - 1 || (opt.rate > 0 && opt.pipeline > 1) ||
	    (opt.h2 && opt.pipeline > 1) || (!opt.h2 && opt.streams > 1)) {
		usage(stderr);
		return 2;
	}
	opt.url = argv[optind];
	return -1;
}

/* A client TLS context: the system's CAs, or none checked (--insecure). */
static int make_tls(void)
{
	struct runtime_tls_config cfg;
	int rc;

	runtime_tls_config_init(&cfg);
	cfg.side = RUNTIME_TLS_CLIENT;
	cfg.alpn = opt.h2 ? "h2,http/1.1" : "http/1.1";
	if ((rc = runtime_tls_create(&run.tls, &cfg)) == 0 && opt.insecure)
		rc = runtime_tls_insecure_skip_verify(run.tls);
	return rc;
}

static int start(void)
{
	struct runtime_config cfg;
	int rc;

	if (opt.pipeline > 1 && (rc = pipe_prepare(opt.url)) < 0) {
		fprintf(stderr, "http-load: %s: %s\n", opt.url, strerror(-rc));
		return 2;
	}
	if ((!strncasecmp(opt.url, "https:", 6) || opt.insecure) && (rc = make_tls()) < 0) {
		fprintf(stderr, "http-load: TLS: %s\n", strerror(-rc));
		return 1;
	}
	runtime_config_init(&cfg);
	cfg.cores = opt.cores;
	run.tallies = aligned_alloc(64, opt.cores * sizeof(*run.tallies));
	if (!run.tallies || (rc = runtime_create(&run.rt, &cfg)) < 0) {
		demo_create_failed("http-load", run.tallies ? rc : -ENOMEM, &cfg);
		return 1;
	}
	memset(run.tallies, 0, opt.cores * sizeof(*run.tallies));
	return runtime_spawn(run.rt, bench, NULL) < 0;
}

int main(int argc, char **argv)
{
	int rc = parse_options(argc, argv);

	if (rc >= 0)
		return rc;
	demo_raise_fd_limit(); /* a connection is an fd */
	if ((rc = start()) != 0)
		return rc;
	rc = runtime_run(run.rt);
	runtime_destroy(run.rt);
	runtime_tls_destroy(run.tls);
	if (rc < 0 || !run.finished) {
		fprintf(stderr, "http-load: %s\n", rc < 0 ? strerror(-rc) : "no client");
		return 1;
	}
	report();
	free(run.tallies);
	free(pipe_target.requests);
	return 0;
}
