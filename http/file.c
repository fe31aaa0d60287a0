/* SPDX-License-Identifier: MIT */
/*
 * file.c - a response whose body is a file: small ones through the batch
 * (read from the core when cached: preadv2 RWF_NOWAIT); larger ones by
 * sendfile(2) from the core - one copy, in the kernel, as nginx's
 * sendfile - a megabyte at a time, a step the page cache lacks some of
 * (cachestat(2), Linux 6.5) read in by the offload pool first, so that
 * the core never waits for the disk. Without cachestat, up to 256 KiB are
 * read and sent in steps (the reads on io_uring: a miss waits in the
 * kernel) and larger ones spliced to the socket through a pipe (each
 * splice a trip through io-wq); over TLS or HTTP/2, read and sent.
 * Measured (bench-files, server CPU per request against nginx's):
 * sendfile takes 64 KiB from 2.5x to 1.0x and 256 KiB from 3.1x to 1.0x;
 * at 1 MiB it is at 1.15x where the splice was at 1.25x (its io-wq
 * worker's wake-ups). At 256 KiB and more both servers are at the
 * kernel's sendfile and TCP floor: at the same fixed request rate the
 * two cost the same (0.98x-1.05x); unbounded, the demo's higher rate
 * costs the loopback more per request. */
#define _GNU_SOURCE
#include "http.h"

#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_cachestat
#define __NR_cachestat 451      /* the same number on x86_64 and aarch64 */
#endif

#define SMALL_FILE (16 * 1024)  /* up to this, into the batch */
#define COPY_MAX (256 * 1024)   /* without cachestat: up to this, read and
                                   sent; above, spliced */
#define KERNEL_STEP (1 << 20)   /* a sendfile's range, checked in the cache */
#define STEP (64 * 1024)        /* a pipe's default capacity; a read's size */
#define SPLICE_PIPE (1 << 20)   /* the capacity asked for a splice's pipe */

/* Give the next write idle_timeout: a client that stops reading is cut
 * off, step by step. */
static void write_deadline(struct http_conn *c)
{
	http_write_deadline(c, runtime__http_deadline_in(c->srv->cfg.idle_timeout_ns));
}

/* fd's bytes [off, off + len) through a pipe into the socket. */
static int splice_out(struct runtime_http_response *res, int fd, uint64_t off, uint64_t len)
{
	struct http_conn *c = res->conn;
	int pipefd[2], rc = 0, sock = runtime_conn_fd(c->rc);
	uint64_t end = off + len;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	/* A bigger pipe, fewer splices. It may be refused (pipe-max-size,
	 * the user's pipe pages): then 64 KiB. */
	int cap = fcntl(pipefd[1], F_SETPIPE_SZ, SPLICE_PIPE);
	size_t most = cap > 0 ? (size_t)cap : STEP;
	uint64_t own = runtime_deadline_get(); /* the handler's, put back after */
	while (off < end && rc == 0) {
		size_t step = end - off < most ? (size_t)(end - off) : most;
		/* The splices bypass the connection: the fiber's deadline
		 * bounds each step instead (a client that stops reading). */
		uint64_t step_end = runtime__http_deadline_in(c->srv->cfg.idle_timeout_ns);
		runtime_deadline_set(own && own < step_end ? own : step_end);
		ssize_t in = runtime_splice(fd, (int64_t)off, pipefd[1], -1, step, SPLICE_F_MOVE);
		if (in <= 0)
			rc = in < 0 ? (int)in : -ENODATA; /* the file shrank */
		for (ssize_t left = in; left > 0 && rc == 0;) {
			ssize_t out = runtime_splice(pipefd[0], -1, sock, -1, (size_t)left,
			                             SPLICE_F_MOVE | SPLICE_F_MORE);
			rc = out > 0 ? 0 : out < 0 ? (int)out : -EPIPE;
			left -= out > 0 ? out : 0;
		}
		off += in > 0 ? (uint64_t)in : 0;
		res->sent += in > 0 ? (uint64_t)in : 0;
	}
	runtime_deadline_set(own);
	runtime_close(pipefd[0]);
	runtime_close(pipefd[1]);
	return rc;
}

/* cachestat(2)'s argument and answer (Linux 6.5; older headers lack them). */
struct file_range {
	uint64_t off, len;
};

struct file_cached {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* Does the page cache hold every page of fd's [off, off + len)? 1 if so
 * (a sendfile of it copies from memory and never waits for the disk), 0
 * if not, -1 where cachestat is missing (remembered: an older kernel) or
 * refused. A page evicted between the look and the send makes that send
 * wait for it: rare, and bounded by one read. */
static int cached(int fd, uint64_t off, uint64_t len)
{
	static _Atomic bool missing;
	struct file_range r = { off, len };
	struct file_cached cs;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

	if (atomic_load_explicit(&missing, memory_order_relaxed))
		return -1;
	if (syscall(__NR_cachestat, fd, &r, &cs, 0) < 0) {
		if (errno == ENOSYS)
			atomic_store_explicit(&missing, true, memory_order_relaxed);
		return -1;
	}
	return cs.nr_cache >= (off + len + page - 1) / page - off / page;
}

/* A range not all cached, brought in by a pool thread (which may wait
 * for the disk): each STEP of it that is not whole in the cache is read. */
struct warm_job {
	int fd;                     /* a dup: the job may outlive the caller */
	uint64_t off, len;
};

static void *warm(void *arg)
{
	struct warm_job *j = arg;
	char *buf = malloc(STEP);

	for (uint64_t p = j->off, end = j->off + j->len; buf && p < end; p += STEP) {
		size_t n = end - p < STEP ? (size_t)(end - p) : STEP;
		if (cached(j->fd, p, n) != 1 && pread(j->fd, buf, n, (off_t)p) <= 0)
			break; /* an error or the end: the send says */
	}
	free(buf);
	return NULL;
}

static void warm_free(void *arg, void *result, int ran)
{
	struct warm_job *j = arg;

	(void)result;
	(void)ran;
	close(j->fd);
	free(j);
}

static int warm_up(int fd, uint64_t off, uint64_t len)
{
	struct warm_job *j = malloc(sizeof(*j));

	if (!j)
		return -ENOMEM;
	*j = (struct warm_job){ fcntl(fd, F_DUPFD_CLOEXEC, 3), off, len };
	if (j->fd < 0) {
		free(j);
		return -errno;
	}
	int rc = runtime_offload(warm, j, NULL, warm_free);
	if (rc != -ECANCELED && rc != -ETIMEDOUT)
		warm_free(j, NULL, 0); /* else the job's cleanup frees it */
	return rc;
}

/* The socket does not block a sendfile: it answers -EAGAIN, and the
 * fiber waits for room (the runtime's own calls wait as before). Once
 * per connection. */
static int nonblocking(struct http_conn *c, int sock)
{
	if (c->sock_nonblocking)
		return 0;
	int fl = fcntl(sock, F_GETFL);
	if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(sock, F_SETFL, fl | O_NONBLOCK) < 0))
		return -errno;
	c->sock_nonblocking = true;
	return 0;
}

/* fd's bytes [off, off + len), in the page cache, by sendfile from the
 * core; a full socket waits, idle_timeout at most each time. */
static int sendfile_out(struct runtime_http_response *res, int fd, uint64_t off, uint64_t len)
{
	struct http_conn *c = res->conn;
	int sock = runtime_conn_fd(c->rc), rc = nonblocking(c, sock);
	off_t pos = (off_t)off;
	uint64_t end = off + len;

	while (rc == 0 && (uint64_t)pos < end) {
		ssize_t n = sendfile(sock, fd, &pos, end - (uint64_t)pos);
		if (n > 0)
			res->sent += (uint64_t)n;
		else if (n == 0)
			rc = -ENODATA; /* the file shrank */
		else if (errno == EAGAIN)
			rc = runtime_poll(sock, POLLOUT, (int64_t)c->srv->cfg.idle_timeout_ns);
		else if (errno != EINTR)
			rc = -errno;
		rc = rc > 0 ? 0 : rc;
	}
	return rc;
}

/* fd's bytes [off, off + len) by sendfile from the core, KERNEL_STEP at
 * a time; a step the page cache lacks some of (all, for the first) is
 * read in on the offload pool first: the core never waits for the disk,
 * and a file larger than memory is never warmed all at once. */
static int kernel_out(struct runtime_http_response *res, int fd, uint64_t off, uint64_t len,
                      bool all)
{
	int rc = 0;
	bool first = true;

	for (uint64_t end = off + len, n; rc == 0 && off < end; off += n, first = false) {
		n = end - off < KERNEL_STEP ? end - off : KERNEL_STEP;
		bool in_cache = first ? all : cached(fd, off, n) == 1;
		if (!in_cache && (rc = warm_up(fd, off, n)) < 0)
			break;
		rc = sendfile_out(res, fd, off, n);
	}
	return rc;
}

/* A read of fd from the core when the page cache has it all (a plain
 * preadv2 that refuses to wait: no ring trip, no switch), else through
 * io_uring, whose wait for the disk is the kernel's. */
static ssize_t read_at(int fd, void *buf, size_t len, uint64_t off)
{
	struct iovec iov = { buf, len };
	ssize_t n = preadv2(fd, &iov, 1, (off_t)off, RWF_NOWAIT);

	return n == (ssize_t)len ? n : runtime_pread(fd, buf, len, (off_t)off);
}

/* fd's bytes read and written, STEP at a time. */
static int copy_out(struct runtime_http_response *res, int fd, uint64_t off, uint64_t len)
{
	char *buf = malloc(len < STEP ? (size_t)len : STEP);
	uint64_t end = off + len;
	int rc = buf ? 0 : -ENOMEM;

	while (off < end && rc == 0) {
		size_t step = end - off < STEP ? (size_t)(end - off) : STEP;
		ssize_t in = read_at(fd, buf, step, off);
		if (res->conn) /* HTTP/2's writes have their own */
			write_deadline(res->conn);
		if (in <= 0)
			rc = in < 0 ? (int)in : -ENODATA;
		else
			rc = runtime_http_write(res, buf, (size_t)in);
		off += in > 0 ? (uint64_t)in : 0;
	}
	free(buf);
	return rc;
}

int runtime_http_respond_file(struct runtime_http_response *res, int status, const char *type,
                              int fd, uint64_t off, uint64_t len)
{
	int rc;

	if (!res || fd < 0 || len > INT64_MAX || off > INT64_MAX - len)
		return -EINVAL;
	if ((rc = runtime_http_start(res, status, type, (int64_t)len)) < 0)
		return rc;
	if (res->h2) { /* framed from a buffer: no splice */
		rc = res->no_body || !len ? 0 : copy_out(res, fd, off, len);
		return rc < 0 ? rc : runtime_http_end(res);
	}
	struct http_conn *c = res->conn;
	if (res->no_body || !len) {
		res->state = RES_DONE;
		return 0;
	}
	bool layered = runtime_conn_layer(c->rc, NULL) != NULL; /* TLS: no splice */
	bool in_kernel = !layered && !c->srv->cfg.file_copy;
	int all = in_kernel && len > SMALL_FILE ?
	          cached(fd, off, len < KERNEL_STEP ? len : KERNEL_STEP) : -1;
	if (all >= 0) {
		write_deadline(c);
		rc = runtime__http_flush(c) < 0 ? -EPIPE : kernel_out(res, fd, off, len, all);
	} else if (len > COPY_MAX && in_kernel) {
		write_deadline(c);
		rc = runtime__http_flush(c) < 0 ? -EPIPE : splice_out(res, fd, off, len);
	} else if (len > SMALL_FILE) {
		write_deadline(c);
		rc = runtime__http_flush(c) < 0 ? -EPIPE : copy_out(res, fd, off, len);
	} else {
		rc = copy_out(res, fd, off, len);
	}
	res->state = RES_DONE;
	if (rc < 0)
		res->close = true; /* the promised length cannot be kept */
	return rc;
}
