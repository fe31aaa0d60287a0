/* SPDX-License-Identifier: MIT */
/*
 * delay_load: many concurrent slow requests, all at once. Opens N
 * connections to an HTTP server, and once every one is established sends
 * "GET /delay?ms=M" on all of them together, then waits (epoll) for every
 * full response. Prints the latency of each request (from its own write to
 * its full answer: first, median, p99, slowest) and when the last answer
 * came counted from the first write: with M = 1000 and N = 10,000 the
 * demo's target is every request answered within 1.1 s. Exits 1 if any request failed, got
 * a non-200 or saw no answer within M + 10 s.
 *
 * usage: delay_load [-h host] [-p port] [-c conns] [-m ms]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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

struct client {
	int fd;
	size_t got;
	bool done;
	double sent_s;      /* when its request was written */
	double took_s;      /* from then to its full answer */
	char buf[512];
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Blocking connects, one after another: the burst starts only when all
 * are up, so connection set-up is not counted against the server. */
static int dial(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0) {
		perror("delay_load: connect");
		exit(1);
	}
	return fd;
}

/* A complete answer in c->buf: its head, and a body as long as it says. */
static bool complete(const struct client *c)
{
	const char *end = memmem(c->buf, c->got, "\r\n\r\n", 4);
	const char *cl = memmem(c->buf, c->got, "Content-Length: ", 16);
	if (!end || !cl)
		return false;
	return c->got >= (size_t)(end + 4 - c->buf) + strtoul(cl + 16, NULL, 10);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Read what came on c; false on an error or a non-200. */
static bool on_readable(struct client *c)
{
	ssize_t n = read(c->fd, c->buf + c->got, sizeof(c->buf) - 1 - c->got);
	if (n <= 0)
		return false;
	c->got += (size_t)n;
	if (!complete(c))
		return c->got < sizeof(c->buf) - 1;
	c->done = true;
	c->took_s = now_s() - c->sent_s;
	return !strncmp(c->buf, "HTTP/1.1 200 ", 13);
}

int main(int argc, char **argv)
{
	const char *host = "127.0.0.1";
	int port = 8080, conns = 10000, ms = 1000, opt, bad = 0, left;
	while ((opt = getopt(argc, argv, "h:p:c:m:")) != -1) {
		if (opt == 'h') host = optarg;
		else if (opt == 'p') port = atoi(optarg);
		else if (opt == 'c') conns = atoi(optarg);
		else if (opt == 'm') ms = atoi(optarg);
		else { fprintf(stderr, "usage: delay_load [-h host] [-p port] [-c conns] [-m ms]\n"); return 2; }
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct client *cl = calloc((size_t)conns, sizeof(*cl));
	char req[128];
	int rlen = snprintf(req, sizeof(req), "GET /delay?ms=%d HTTP/1.1\r\nHost: x\r\n\r\n", ms);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (!cl || ep < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 || conns < 1)
		return 2;
	raise_fd_limit();
	for (int i = 0; i < conns; i++) {
		cl[i].fd = dial(&a);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &cl[i] };
		epoll_ctl(ep, EPOLL_CTL_ADD, cl[i].fd, &ev);
	}
	double t0 = now_s();
	for (int i = 0; i < conns; i++) {
		cl[i].sent_s = now_s();
		bad += write(cl[i].fd, req, (size_t)rlen) != rlen;
	}
	double sent_s = now_s() - t0;
	struct epoll_event evs[256];
	for (left = conns - bad; left > 0 && now_s() - t0 < ms / 1e3 + 10;) {
		int n = epoll_wait(ep, evs, 256, 100);
		for (int i = 0; i < n; i++) {
			struct client *c = evs[i].data.ptr;
			bool ok = on_readable(c);
			if (c->done || !ok) {
				bad += !ok;
				left--;
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
			}
		}
	}
	double *took = malloc((size_t)conns * sizeof(*took));
	int done = 0;
	double last = 0;
	for (int i = 0; i < conns; i++) {
		if (!cl[i].done)
			continue;
		took[done++] = cl[i].took_s;
		if (cl[i].sent_s + cl[i].took_s - t0 > last)
			last = cl[i].sent_s + cl[i].took_s - t0;
	}
	qsort(took, (size_t)done, sizeof(*took), cmp_double);
	printf("delay_load: conns=%d delay_ms=%d answered=%d failed=%d unanswered=%d "
	       "writes_s=%.3f all_answered_s=%.3f latency_s: min=%.3f p50=%.3f p99=%.3f max=%.3f\n",
	       conns, ms, done, bad, left, sent_s, last, done ? took[0] : 0,
	       done ? took[done / 2] : 0, done ? took[(done * 99) / 100] : 0,
	       done ? took[done - 1] : 0);
	return bad || left ? 1 : 0;
}
