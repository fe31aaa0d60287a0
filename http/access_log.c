/* SPDX-License-Identifier: MIT */
/*
 * access_log.c - what is known of an answered request (its start, bytes
 * both ways, a slot of the user's), the access log line in the Common Log
 * Format or as a JSON object, and the library's part after every
 * response, the parser's refusals included: the line written through the
 * non-blocking logger (runtime_log_write), then the user's on_response.
 */
#include "http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

uint64_t runtime_http_request_start(const struct runtime_http_request *req)
{
	return req ? req->start : 0;
}

uint64_t runtime_http_request_bytes(const struct runtime_http_request *req)
{
	return req ? req->bytes_in : 0;
}

uint64_t runtime_http_response_bytes(const struct runtime_http_response *res)
{
	return res ? res->head_bytes + res->sent : 0;
}

void runtime_http_request_set_data(struct runtime_http_request *req, void *data)
{
	if (req)
		req->data = data;
}

void *runtime_http_request_data(const struct runtime_http_request *req)
{
	return req ? req->data : NULL;
}

/* ------------------------------------------------------------ the line */

#define METHOD_MOST 64    /* bytes of a method, of a target in a line: */
#define TARGET_MOST 1024  /* escaped at most 6 each, with the rest under */
#define LINE_MOST 8192    /* this, which runtime_http_log_line documents */

/* The line being made: what fits of it, and whether all did. */
struct line {
	char *p;
	size_t n, cap;
	bool full;
};

static void add(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add(struct line *l, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int n = l->full ? 0 : vsnprintf(l->p + l->n, l->cap - l->n, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= l->cap - l->n)
		l->full = true;
	else
		l->n += (size_t)n;
}

/* s as a quoted string's contents: JSON's escapes (json), or the Common
 * Log Format's as nginx writes them (\" \\ and \xHH for the rest); past
 * max bytes, "..." instead of the rest (a line stays under LINE_MOST). */
static void add_quoted(struct line *l, struct runtime_http_slice s, bool json, size_t max)
{
	if (s.len > max) {
		add_quoted(l, (struct runtime_http_slice){ s.p, max }, json, max);
		add(l, "...");
		return;
	}
	for (size_t i = 0; i < s.len && !l->full; i++) {
		unsigned char c = (unsigned char)s.p[i];
		if (c == '"' || c == '\\')
			add(l, "\\%c", c);
		else if (c >= 0x20 && c < 0x7f)
			add(l, "%c", c);
		else
			add(l, json ? "\\u%04x" : "\\x%02X", c);
	}
}

int runtime__http_peer_address(const struct runtime_http_request *req, char *out, size_t cap,
                               const char *none)
{
	socklen_t len = 0;
	const struct sockaddr *sa = runtime_conn_peer(runtime_http_conn(req), &len);

	snprintf(out, cap, "%s", none);
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)cap);
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
		          (socklen_t)cap);
	return sa ? sa->sa_family : AF_UNSPEC;
}

static const char *proto(const struct runtime_http_request *req)
{
	switch (runtime_http_version(req)) {
	case 20: return "HTTP/2.0";
	case 10: return "HTTP/1.0";
	default: return "HTTP/1.1";
	}
}

/* 127.0.0.1 - - [02/Dec/2026:23:10:00 +0000] "GET /a HTTP/1.1" 200 512;
 * a head the parser refused has "-" for its request line, as Apache's. */
static void common(struct line *l, const struct runtime_http_request *req,
                   const struct runtime_http_response *res, const char *peer, time_t now)
{
	struct tm tm;
	char when[32];

	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%d/%b/%Y:%H:%M:%S +0000", &tm);
	add(l, "%s - - [%s] \"", peer, when);
	if (runtime_http_method(req).len) {
		add_quoted(l, runtime_http_method(req), false, METHOD_MOST);
		add(l, " ");
		add_quoted(l, runtime_http_target(req), false, TARGET_MOST);
		add(l, " %s", proto(req));
	} else {
		add(l, "-");
	}
	add(l, "\" %d %llu\n", runtime_http_status(res),
	    (unsigned long long)runtime_http_body_sent(res));
}

static void json(struct line *l, const struct runtime_http_request *req,
                 const struct runtime_http_response *res, const char *peer, time_t now)
{
	struct tm tm;
	char when[32];
	uint64_t start = runtime_http_request_start(req), end = runtime_now();

	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	add(l, "{\"time\":\"%s\",\"remote\":\"%s\",\"method\":\"", when, peer);
	add_quoted(l, runtime_http_method(req), true, METHOD_MOST);
	add(l, "\",\"target\":\"");
	add_quoted(l, runtime_http_target(req), true, TARGET_MOST);
	add(l, "\",\"proto\":\"%s\",\"status\":%d,\"bytes_in\":%llu,\"bytes_out\":%llu,"
	       "\"duration_us\":%llu}\n", proto(req), runtime_http_status(res),
	    (unsigned long long)runtime_http_request_bytes(req),
	    (unsigned long long)runtime_http_response_bytes(res),
	    (unsigned long long)(start && end > start ? (end - start) / 1000 : 0));
}

ssize_t runtime_http_log_line(const struct runtime_http_request *req,
                              const struct runtime_http_response *res, int format, char *buf,
                              size_t cap)
{
	struct line l = { buf, 0, cap, false };
	char peer[INET6_ADDRSTRLEN];

	if (!req || !res || !buf || !cap ||
	    (format != RUNTIME_HTTP_LOG_COMMON && format != RUNTIME_HTTP_LOG_JSON))
		return -EINVAL;
	runtime__http_peer_address(req, peer, sizeof(peer), "-");
	if (format == RUNTIME_HTTP_LOG_COMMON)
		common(&l, req, res, peer, time(NULL));
	else
		json(&l, req, res, peer, time(NULL));
	return l.full ? -ENOBUFS : (ssize_t)l.n;
}

/* ---------------------------------------------------- after a response */

void runtime__http_responded(const struct runtime_http_server *srv,
                             const struct runtime_http_request *req,
                             const struct runtime_http_response *res)
{
	const struct runtime_http_server_config *cfg = &srv->cfg;

	if (cfg->access_log_format) {
		char line[LINE_MOST];
		ssize_t n = runtime_http_log_line(req, res, cfg->access_log_format, line, sizeof(line));
		if (n > 0)
			runtime_log_write(cfg->access_log_fd, line, (size_t)n);
	}
	if (cfg->on_response)
		cfg->on_response(req, res, cfg->arg);
}
