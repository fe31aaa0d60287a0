/* SPDX-License-Identifier: MIT */
/*
 * files.c - static files under --root, for GET and HEAD. The path is
 * percent-decoded strictly and may not climb out of the root: "." and ".."
 * segments, encoded slashes and NUL are refused, and the open itself is
 * confined (openat2 with RESOLVE_BENEATH, so no symlink leads out either).
 * Content-Type comes from the extension; Last-Modified and
 * If-Modified-Since are honoured. The body goes out through
 * runtime_http_respond_file (splice for large files; --file-copy turns
 * that off).
 */
#define _GNU_SOURCE
#include "server.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PATH_MAX_LEN 1024

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
static int file_path(struct runtime_http_slice path, char *out, size_t cap)
{
	const char *p = path.p, *end = path.p + path.len;
	int len = 0;

	if (p == end || *p != '/')
		return -404; /* "*" or authority-form: not a file */
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

/* If-Modified-Since no earlier than mtime: the client's copy is current. */
static bool not_modified(const struct runtime_http_request *req, time_t mtime)
{
	const struct runtime_http_slice *ims = runtime_http_header(req, "If-Modified-Since");
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

static int send_file(struct runtime_http_request *req, struct runtime_http_response *res, int fd,
                     uint64_t size, const char *type, time_t mtime)
{
	char stamp[40];
	struct tm tm;

	gmtime_r(&mtime, &tm);
	strftime(stamp, sizeof(stamp), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	runtime_http_set_header(res, "Last-Modified", stamp);
	if (not_modified(req, mtime)) { /* the length a 200 would have, no body */
		if (runtime_http_start(res, 304, type, (int64_t)size) < 0)
			return -1;
		return runtime_http_end(res);
	}
	return runtime_http_respond_file(res, 200, type, fd, 0, size) < 0 ? -1 : 0;
}

static int not_found(struct runtime_http_response *res, int status)
{
	return runtime_http_respond(res, status, "text/plain", status == 400 ? "400 Bad Request\n" :
	                            "404 Not Found\n", status == 400 ? 16 : 14);
}

/* The file for path, opened, and its attributes: the fd, or -status
 * (-400, -404) or -ECANCELED. */
static int open_file(struct server *srv, struct runtime_http_slice path, char *name, size_t cap,
                     struct statx *st)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC,
	                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
	int rc = srv->root_fd < 0 ? -404 : file_path(path, name, cap);

	if (rc < 0)
		return rc;
	int fd = runtime_openat2(srv->root_fd, name, &how);
	if (fd < 0)
		return fd == -ECANCELED ? fd : -404;
	rc = runtime_statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_SIZE | STATX_MTIME, st);
	if (rc < 0 || !S_ISREG(st->stx_mode)) {
		runtime_close(fd);
		return rc == -ECANCELED ? rc : -404;
	}
	return fd;
}

bool file_exists(struct server *srv, struct runtime_http_slice path)
{
	char name[PATH_MAX_LEN];
	struct statx st;
	int fd = open_file(srv, path, name, sizeof(name), &st);

	if (fd >= 0)
		runtime_close(fd);
	return fd >= 0;
}

int serve_file(struct server *srv, struct runtime_http_request *req,
               struct runtime_http_response *res)
{
	char name[PATH_MAX_LEN];
	struct statx st;
	int fd = open_file(srv, runtime_http_path(req), name, sizeof(name), &st);

	if (fd == -ECANCELED)
		return fd;
	if (fd < 0)
		return not_found(res, -fd);
	int rc = send_file(req, res, fd, st.stx_size, content_type(name),
	                   (time_t)st.stx_mtime.tv_sec);
	runtime_close(fd);
	return rc;
}
