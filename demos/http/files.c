/* SPDX-License-Identifier: MIT */
/*
 * files.c - static files under --root, for GET and HEAD. The path is
 * percent-decoded strictly and may not climb out of the root: "." and ".."
 * segments, encoded slashes and NUL are refused, and the open itself is
 * confined (openat2 with RESOLVE_BENEATH, so no symlink leads out either).
 * Content-Type comes from the extension; Last-Modified and
 * If-Modified-Since are honoured. Small files go out through the response
 * batch, mid-sized ones are read and sent in steps, and large ones are
 * spliced from the page cache to the socket through a pipe, without a copy
 * through user space (--file-copy reads and sends them too). Measured on
 * loopback (bench-http notes in the README): splicing 1 MiB costs 0.4x the
 * server CPU of copying it, but a splice is a trip through io-wq, and at
 * 256 KiB copying wins on both CPU and throughput.
 */
#define _GNU_SOURCE
#include "server.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PATH_MAX_LEN 1024
#define SMALL_FILE (64 * 1024)  /* up to this, copied into the batch */
#define COPY_MAX (256 * 1024)   /* up to this, read and sent; above, spliced */
#define SPLICE_STEP (64 * 1024) /* a pipe's default capacity */
#define SPLICE_PIPE (1 << 20)   /* the capacity asked for a splice's pipe */

static int hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Append one decoded segment (seg[0..n)) to out, refusing what could
 * escape the root. Returns the new length or -404/-400. */
static int add_segment(char *out, size_t len, size_t cap, const char *seg, size_t n)
{
	char dec[PATH_MAX_LEN];
	size_t d = 0;

	for (size_t i = 0; i < n; i++) {
		char ch = seg[i];
		if (ch == '%') {
			int hi = i + 2 < n ? hex(seg[i + 1]) : -1;
			int lo = i + 2 < n ? hex(seg[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return -400;
			ch = (char)(hi << 4 | lo);
			i += 2;
		}
		if (ch == '/' || ch == '\\' || ch == '\0')
			return -404; /* an encoded separator, or NUL */
		if (d == sizeof(dec))
			return -404; /* longer than any path under the root */
		dec[d++] = ch;
	}
	if (d == 0)
		return (int)len; /* "//": nothing */
	if ((d == 1 && dec[0] == '.') || (d == 2 && dec[0] == '.' && dec[1] == '.'))
		return -404;
	if (len + d + 2 > cap)
		return -404;
	if (len)
		out[len++] = '/';
	memcpy(out + len, dec, d);
	return (int)(len + d);
}

/* The request path, decoded, relative to the root ("index.html" for a
 * trailing slash). 0, or -400 / -404. */
static int file_path(const struct http_slice *target, char *out, size_t cap)
{
	const char *p = target->p, *end = target->p + target->len;
	const char *q = memchr(p, '?', target->len);
	int len = 0;

	if (q)
		end = q;
	if (p == end || *p != '/')
		return -404; /* absolute-form or "*": not a file */
	while (p < end) {
		const char *seg = ++p;
		while (p < end && *p != '/')
			p++;
		if ((len = add_segment(out, (size_t)len, cap, seg, (size_t)(p - seg))) < 0)
			return len;
	}
	if (len == 0 || end[-1] == '/')
		len = add_segment(out, (size_t)len, cap, "index.html", 10);
	if (len < 0)
		return len;
	out[len] = '\0';
	return 0;
}

static const char *content_type(const char *path)
{
	static const char *const map[][2] = {
		{ ".html", "text/html; charset=utf-8" }, { ".htm", "text/html; charset=utf-8" },
		{ ".css", "text/css" }, { ".js", "text/javascript" }, { ".json", "application/json" },
		{ ".txt", "text/plain; charset=utf-8" }, { ".png", "image/png" },
		{ ".jpg", "image/jpeg" }, { ".jpeg", "image/jpeg" }, { ".gif", "image/gif" },
		{ ".svg", "image/svg+xml" }, { ".ico", "image/x-icon" }, { ".webp", "image/webp" },
		{ ".wasm", "application/wasm" }, { ".pdf", "application/pdf" },
		{ ".xml", "application/xml" }, { ".mp4", "video/mp4" }, { ".woff2", "font/woff2" },
	};
	const char *dot = strrchr(path, '.');

	for (size_t i = 0; dot && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcasecmp(dot, map[i][0]))
			return map[i][1];
	return "application/octet-stream";
}

static void fmt_time(time_t t, char out[40])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 40, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* If-Modified-Since no earlier than mtime: the client's copy is current. */
static bool not_modified(const struct http_request *r, time_t mtime)
{
	const struct http_slice *ims = http_header_get(r, "If-Modified-Since");
	char buf[64];
	struct tm tm;

	if (!ims || ims->len >= sizeof(buf))
		return false;
	memcpy(buf, ims->p, ims->len);
	buf[ims->len] = '\0';
	memset(&tm, 0, sizeof(tm));
	const char *end = strptime(buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	return end && !*end && timegm(&tm) >= mtime;
}

/* Large files: file -> pipe -> socket, SPLICE_STEP at a time. */
static int splice_out(const struct server *srv, struct exchange *ex, int fd, uint64_t size)
{
	int pipefd[2], rc = 0;
	uint64_t off = 0;

	if (respond_flush(ex) < 0 || pipe2(pipefd, O_CLOEXEC) < 0)
		return -1;
	/* A bigger pipe, fewer splices: each is a trip through io-wq. It may
	 * be refused (pipe-max-size, the user's pipe pages): then 64 KiB. */
	int cap = fcntl(pipefd[1], F_SETPIPE_SZ, SPLICE_PIPE);
	size_t most = cap > 0 ? (size_t)cap : SPLICE_STEP;
	while (off < size && rc >= 0) {
		size_t step = size - off < most ? (size_t)(size - off) : most;
		write_deadline_set(srv); /* per step: a stalled reader is cut off */
		ssize_t in = runtime_splice(fd, (int64_t)off, pipefd[1], -1, step, SPLICE_F_MOVE);
		if (in <= 0) {
			rc = -1; /* the file shrank: the promised length cannot be kept */
			break;
		}
		for (ssize_t left = in; left > 0 && rc >= 0;) {
			ssize_t out = runtime_splice(pipefd[0], -1, conn_fd(ex), -1, (size_t)left,
			                             SPLICE_F_MOVE | SPLICE_F_MORE);
			rc = out > 0 ? 0 : -1;
			left -= out > 0 ? out : 0;
		}
		off += (uint64_t)in;
	}
	runtime_deadline_set(0);
	runtime_close(pipefd[0]);
	runtime_close(pipefd[1]);
	ex->sent_body = off;
	return rc;
}

/* Large files through user space (--file-copy: to measure what splice
 * saves): pread, then send, SPLICE_STEP at a time. */
static int copy_out(const struct server *srv, struct exchange *ex, int fd, uint64_t size)
{
	char *buf = malloc(SPLICE_STEP);
	uint64_t off = 0;
	int rc = buf && respond_flush(ex) == 0 ? 0 : -1;

	while (off < size && rc == 0) {
		size_t step = size - off < SPLICE_STEP ? (size_t)(size - off) : SPLICE_STEP;
		write_deadline_set(srv); /* per step: a stalled reader is cut off */
		ssize_t in = runtime_pread(fd, buf, step, (off_t)off);
		if (in <= 0 || respond_write(ex, buf, (size_t)in) < 0)
			rc = -1; /* a shrunk file, a gone client or a deadline */
		else
			off += (uint64_t)in;
	}
	runtime_deadline_set(0);
	free(buf);
	ex->sent_body = off;
	return rc;
}

static int send_file(const struct server *srv, struct exchange *ex, int fd, uint64_t size,
                     const char *type, time_t mtime)
{
	char extra[80], stamp[40];

	fmt_time(mtime, stamp);
	snprintf(extra, sizeof(extra), "Last-Modified: %s\r\n", stamp);
	if (not_modified(ex->req, mtime)) /* the length a 200 would have, no body */
		return respond_head(ex, 304, type, extra, size) < 0 ? -1 : 0;
	if (respond_head(ex, 200, type, extra, size) < 0)
		return -1;
	if (ex->head_only || size == 0)
		return 0;
	if (size > COPY_MAX && !srv->opt.file_copy && !conn_tls(ex))
		return splice_out(srv, ex, fd, size);
	if (size > SMALL_FILE)
		return copy_out(srv, ex, fd, size);
	char buf[SMALL_FILE];
	ssize_t n = runtime_pread(fd, buf, (size_t)size, 0);
	if (n != (ssize_t)size)
		return -1;
	return respond_body(ex, buf, (size_t)n);
}

static int not_found(struct exchange *ex, int status)
{
	return respond(ex, status, "text/plain", NULL, status == 400 ? "400 Bad Request\n" :
	               "404 Not Found\n", status == 400 ? 16 : 14);
}

int serve_file(struct server *srv, struct exchange *ex)
{
	char path[PATH_MAX_LEN];
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC,
	                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
	struct statx st;

	if (srv->root_fd < 0)
		return not_found(ex, 404);
	int rc = file_path(&ex->req->target, path, sizeof(path));
	if (rc < 0)
		return not_found(ex, -rc);
	int fd = runtime_openat2(srv->root_fd, path, &how);
	if (fd < 0)
		return fd == -ECANCELED ? -1 : not_found(ex, 404);
	rc = runtime_statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_SIZE | STATX_MTIME, &st);
	if (rc < 0 || !S_ISREG(st.stx_mode))
		rc = rc == -ECANCELED ? -1 : not_found(ex, 404);
	else
		rc = send_file(srv, ex, fd, st.stx_size, content_type(path), (time_t)st.stx_mtime.tv_sec);
	runtime_close(fd);
	return rc;
}
