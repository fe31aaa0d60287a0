/* SPDX-License-Identifier: MIT */
/*
 * file.c - a response whose body is a file: small ones through the batch,
 * mid-sized ones (and all of them over TLS) read and sent in steps, large
 * ones spliced from the page cache to the socket through a pipe, without
 * a copy through user space. Measured on loopback: splicing 1 MiB costs
 * 0.4x the server CPU of copying it, but each splice is a trip through
 * io-wq, and at 256 KiB copying wins on both CPU and throughput.
 */
#define _GNU_SOURCE
#include "http.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define SMALL_FILE (16 * 1024)  /* up to this, into the batch */
#define COPY_MAX (256 * 1024)   /* up to this, read and sent; above, spliced */
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

/* fd's bytes read and written, STEP at a time. */
static int copy_out(struct runtime_http_response *res, int fd, uint64_t off, uint64_t len)
{
	char *buf = malloc(STEP);
	uint64_t end = off + len;
	int rc = buf ? 0 : -ENOMEM;

	while (off < end && rc == 0) {
		size_t step = end - off < STEP ? (size_t)(end - off) : STEP;
		ssize_t in = runtime_pread(fd, buf, step, (off_t)off);
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
	if (len > COPY_MAX && !layered && !c->srv->cfg.file_copy) {
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
