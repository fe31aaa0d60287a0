/* SPDX-License-Identifier: MIT */
/*
 * files.c - static files under --root, for GET and HEAD. The path is
 * percent-decoded strictly and may not climb out of the root: "." and ".."
 * segments, encoded slashes and NUL are refused, and the open itself is
 * confined (openat2 with RESOLVE_BENEATH, so no symlink leads out either).
 * Content-Type comes from the extension; Last-Modified, a weak ETag (size
 * and mtime), If-None-Match and If-Modified-Since (304), and a single byte
 * range (Range, If-Range: 206, or 416) are honoured; several ranges get
 * the whole file, as RFC 9110 lets. The body goes out through
 * runtime_http_respond_file (sendfile or splice; --file-copy turns that
 * off). A file opened in the last --file-cache-ms is reused
 * (file_cache.c).
 */
#define _GNU_SOURCE
#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

/* A field's value as a string (at most cap - 1 bytes), or NULL. */
static const char *field(const struct runtime_http_request *req, const char *name, char *buf,
                         size_t cap)
{
	const struct runtime_http_slice *v = runtime_http_header(req, name);

	if (!v || v->len >= cap)
		return NULL;
	memcpy(buf, v->p, v->len);
	buf[v->len] = '\0';
	return buf;
}

/* If-None-Match names the file's version (tag, weakly compared), or is
 * "*": the client's copy is current. 1 if so, 0 if not, -1 if absent
 * (then If-Modified-Since decides: RFC 9110, 13.2.2). */
static int none_match(const struct runtime_http_request *req, const char *tag)
{
	char buf[512];
	const char *v = field(req, "If-None-Match", buf, sizeof(buf));

	if (!v)
		return -1;
	return strcmp(v, "*") == 0 || strstr(v, tag + 2) != NULL; /* tag + 2: without W/ */
}

/* Decimal digits at *p (at least one, no sign), advancing *p: false if
 * none or too large. */
static bool digits(const char **p, unsigned long long *out)
{
	char *end;

	if (**p < '0' || **p > '9')
		return false;
	errno = 0;
	*out = strtoull(*p, &end, 10);
	*p = end;
	return errno == 0;
}

/*
 * A single byte range of Range (bytes=A-B, A-, -N; RFC 9110, 14.1.2) in a
 * file of size: 1 with *off and *len set, 0 to send the whole file (none,
 * several, one that does not parse, or an If-Range that is not tag), -1
 * if it is unsatisfiable (416).
 */
static int byte_range(const struct runtime_http_request *req, const char *tag, uint64_t size,
                      uint64_t *off, uint64_t *len)
{
	char buf[128], ifr[128];
	const char *p = field(req, "Range", buf, sizeof(buf));
	const char *cond = field(req, "If-Range", ifr, sizeof(ifr));
	unsigned long long a = 0, b = UINT64_MAX;

	if (!p || strncmp(p, "bytes=", 6) || strchr(p, ',') || (cond && strcmp(cond, tag)))
		return 0;
	p += 6;
	bool suffix = *p == '-';
	if (!suffix && (!digits(&p, &a) || *p != '-'))
		return 0;
	p++;
	if ((*p || suffix) && (!digits(&p, &b) || *p || (!suffix && b < a)))
		return 0; /* does not parse: ignored, as RFC 9110 lets */
	if (suffix) { /* the last b bytes */
		if (!b || !size)
			return -1;
		a = b >= size ? 0 : size - b;
		b = size - 1;
	}
	if (a >= size)
		return -1;
	*off = a;
	*len = (b >= size ? size - 1 : b) - a + 1;
	return 1;
}

/* The body: the whole file (200), one range of it (206), or the 416. */
static int send_body(struct runtime_http_request *req, struct runtime_http_response *res, int fd,
                     uint64_t size, const char *type, const char *tag)
{
	char span[80];
	uint64_t off = 0, len = size;
	int r = runtime_http_method(req).len == 3 ? byte_range(req, tag, size, &off, &len) : 0;

	if (r < 0) {
		snprintf(span, sizeof(span), "bytes */%llu", (unsigned long long)size);
		runtime_http_set_header(res, "Content-Range", span);
		return runtime_http_respond(res, 416, "text/plain", "416 Range Not Satisfiable\n", 26);
	}
	if (r > 0) {
		snprintf(span, sizeof(span), "bytes %llu-%llu/%llu", (unsigned long long)off,
		         (unsigned long long)(off + len - 1), (unsigned long long)size);
		runtime_http_set_header(res, "Content-Range", span);
	}
	return runtime_http_respond_file(res, r ? 206 : 200, type, fd, off, len) < 0 ? -1 : 0;
}

static int send_file(struct runtime_http_request *req, struct runtime_http_response *res, int fd,
                     uint64_t size, const char *type, time_t mtime)
{
	char stamp[40], tag[48];
	struct tm tm;

	gmtime_r(&mtime, &tm);
	strftime(stamp, sizeof(stamp), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	snprintf(tag, sizeof(tag), "W/\"%llx-%llx\"", (unsigned long long)size,
	         (unsigned long long)mtime); /* weak: size and time, as nginx's */
	runtime_http_set_header(res, "Last-Modified", stamp);
	runtime_http_set_header(res, "ETag", tag);
	runtime_http_set_header(res, "Accept-Ranges", "bytes");
	int match = none_match(req, tag);
	if (match > 0 || (match < 0 && not_modified(req, mtime))) {
		/* the length a 200 would have, no body */
		if (runtime_http_start(res, 304, type, (int64_t)size) < 0)
			return -1;
		return runtime_http_end(res);
	}
	return send_body(req, res, fd, size, type, tag);
}

static int not_found(struct runtime_http_response *res, int status)
{
	return runtime_http_respond(res, status, "text/plain", status == 400 ? "400 Bad Request\n" :
	                            "404 Not Found\n", status == 400 ? 16 : 14);
}

/*
 * name under root, opened: by a plain openat2 when the dentry cache
 * resolves it (RESOLVE_CACHED: no disk; O_NONBLOCK, until it is known to
 * be a regular file: no FIFO waits for a writer), else through the ring, whose worker may wait for the disk
 * while the core goes on. The ring trip costs more than the lookup: a
 * 4 KiB file's request is a few of them.
 */
static int open_beneath(int root, const char *name)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK,
	                        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_CACHED };
	long fd = syscall(SYS_openat2, root, name, &how, sizeof(how));

	if (fd >= 0 || (errno != EAGAIN && errno != EINVAL)) /* EINVAL: before Linux 5.12 */
		return fd >= 0 ? (int)fd : -errno;
	how.resolve &= ~(uint64_t)RESOLVE_CACHED;
	return runtime_openat2(root, name, &how);
}

/* The file for path, opened (or reused: file_cache.c) and held, with its
 * attributes; NULL with *err -400, -404, -ECANCELED or -ENOMEM. The
 * attributes are the open inode's (a plain statx: nothing to wait for),
 * and the fd closes with a plain close: a regular file's never waits. */
static struct open_file *open_file(struct server *srv, struct runtime_http_slice path,
                                   int *err)
{
	char name[PATH_MAX_LEN];
	struct statx st;
	struct open_file *f;

	*err = srv->root_fd < 0 ? -404 : file_path(path, name, sizeof(name));
	if (*err < 0)
		return NULL;
	if ((f = file_cache_find(name)))
		return f;
	int fd = open_beneath(srv->root_fd, name);
	if (fd < 0) {
		*err = fd == -ECANCELED ? fd : -404;
		return NULL;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_TYPE | STATX_SIZE | STATX_MTIME, &st) < 0 ||
	    !S_ISREG(st.stx_mode) || fcntl(fd, F_SETFL, 0) < 0) {
		close(fd); /* not O_NONBLOCK: the ring would not wait for the disk */
		*err = -404;
		return NULL;
	}
	f = file_cache_add(name, fd, st.stx_size, st.stx_mtime.tv_sec);
	*err = f ? 0 : -ENOMEM;
	return f;
}

bool file_exists(struct server *srv, struct runtime_http_slice path)
{
	int err;
	struct open_file *f = open_file(srv, path, &err);

	file_cache_put(f);
	return f != NULL;
}

int serve_file(struct server *srv, struct runtime_http_request *req,
               struct runtime_http_response *res)
{
	int err;
	struct open_file *f = open_file(srv, runtime_http_path(req), &err);

	if (!f && (err == -ECANCELED || err == -ENOMEM))
		return err;
	if (!f)
		return not_found(res, -err);
	int rc = send_file(req, res, f->fd, f->size, content_type(f->name), (time_t)f->mtime);
	file_cache_put(f);
	return rc;
}
