/* SPDX-License-Identifier: MIT */
/*
 * send_zc.c - does IORING_OP_SEND_ZC pay for large responses here? Streams
 * -s byte sends over one TCP connection on 127.0.0.1 for -d seconds, once
 * with IORING_OP_SEND and once with IORING_OP_SEND_ZC (each send waits for
 * its completion and, for SEND_ZC, its notification: the buffer is reused
 * only then, as a server's would be), and prints for each the throughput
 * and the sender's CPU time (user+system, from getrusage) per MiB. The
 * receiver is a plain recv() loop in a child process on -r CPU; the sender
 * runs on -c CPU. Liburing 2.3 has io_uring_prep_send_zc; a kernel without
 * SEND_ZC (before 6.0) prints mode=send_zc unsupported.
 *
 * On loopback the kernel copies a zero-copy send anyway when the packet is
 * delivered to the local socket (Documentation/networking/msg_zerocopy.rst,
 * "deferred copy"), so this measures what SEND_ZC costs where it cannot
 * win; across a real NIC the picture differs.
 *
 *   send_zc [-s BYTES] [-d SECS] [-c CPU] [-r CPU]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* A listening socket on 127.0.0.1, port chosen by the kernel. */
static int listen_any(struct sockaddr_in *a)
{
	socklen_t len = sizeof(*a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || bind(fd, (struct sockaddr *)a, sizeof(*a)) || listen(fd, 1) ||
	    getsockname(fd, (struct sockaddr *)a, &len))
		return -1;
	return fd;
}

/* The child: read and drop everything until EOF. */
static void receive(int lfd, int cpu)
{
	static char buf[1 << 20];
	int fd = accept(lfd, NULL, NULL);

	pin(cpu);
	while (fd >= 0 && recv(fd, buf, sizeof(buf), 0) > 0)
		;
	_exit(0);
}

/*
 * One send of len bytes, waited for whole: its result CQE, and with zc
 * its notification CQE too. Returns the bytes sent or -errno.
 */
static int send_one(struct io_uring *ring, int fd, const char *buf, size_t len, bool zc)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	int res = 0;
	bool more = zc; /* a SEND_ZC that sent data also posts a notification */

	if (zc)
		io_uring_prep_send_zc(sqe, fd, buf, len, MSG_WAITALL, 0);
	else
		io_uring_prep_send(sqe, fd, buf, len, MSG_WAITALL);
	io_uring_submit(ring);
	for (bool have_result = false; !have_result || more;) {
		int rc = io_uring_wait_cqe(ring, &cqe);
		if (rc < 0)
			return rc;
		if (cqe->flags & IORING_CQE_F_NOTIF) {
			more = false;
		} else {
			res = cqe->res;
			have_result = true;
			more = zc && (cqe->flags & IORING_CQE_F_MORE);
		}
		io_uring_cqe_seen(ring, cqe);
	}
	return res;
}

/* Stream sends of size bytes for secs; print throughput and CPU per MiB. */
static int run(const char *mode, bool zc, size_t size, double secs, int cpu, int rcpu)
{
	struct sockaddr_in a;
	int lfd = listen_any(&a), one = 1;
	if (lfd < 0)
		return perror("send_zc: listen"), 1;
	/* Connected before the fork (the backlog holds it for the child's
	 * accept), so that any failure below ends the child by closing fd. */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		return perror("send_zc: connect"), 1;
	pid_t child = fork();
	if (child < 0) {
		perror("send_zc: fork");
		close(fd);
		return 1;
	}
	if (child == 0) {
		close(fd);
		receive(lfd, rcpu);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	pin(cpu);
	struct io_uring ring;
	char *buf = malloc(size);
	if (!buf || io_uring_queue_init(8, &ring, 0) < 0) {
		fputs("send_zc: no memory or no io_uring\n", stderr);
		close(fd);
		waitpid(child, NULL, 0);
		return 1;
	}
	memset(buf, 'x', size);
	double t0 = now_s(), c0 = cpu_s(), t = t0;
	unsigned long long bytes = 0;
	int rc = 0;
	while ((t = now_s()) - t0 < secs && (rc = send_one(&ring, fd, buf, size, zc)) > 0)
		bytes += (unsigned long long)rc;
	double used = cpu_s() - c0, mib = (double)bytes / (1 << 20);
	if (rc == -EINVAL || rc == -EOPNOTSUPP)
		printf("mode=%s size=%zu unsupported (%s)\n", mode, size, strerror(-rc));
	else
		printf("mode=%s size=%zu mib_per_s=%.0f sender_cpu_us_per_mib=%.1f\n", mode, size,
		       mib / (t - t0), used * 1e6 / (mib > 0 ? mib : 1));
	io_uring_queue_exit(&ring);
	close(fd);
	close(lfd);
	waitpid(child, NULL, 0);
	free(buf);
	return rc < 0 && rc != -EINVAL && rc != -EOPNOTSUPP;
}

int main(int argc, char **argv)
{
	size_t size = 1 << 20;
	double secs = 3;
	int cpu = 0, rcpu = 1, opt;

	while ((opt = getopt(argc, argv, "s:d:c:r:")) != -1) {
		if (opt == 's') size = strtoul(optarg, NULL, 10);
		else if (opt == 'd') secs = atof(optarg);
		else if (opt == 'c') cpu = atoi(optarg);
		else if (opt == 'r') rcpu = atoi(optarg);
		else return fputs("usage: send_zc [-s BYTES] [-d SECS] [-c CPU] [-r CPU]\n", stderr), 2;
	}
	if (size == 0 || size > (1u << 30) || secs <= 0)
		return fputs("send_zc: -s from 1 to 1 GiB, -d above 0\n", stderr), 2;
	signal(SIGPIPE, SIG_IGN);
	return run("send", false, size, secs, cpu, rcpu) | run("send_zc", true, size, secs, cpu, rcpu);
}
