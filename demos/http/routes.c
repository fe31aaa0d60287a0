/* SPDX-License-Identifier: MIT */
/*
 * routes.c - what the demo server answers: /plaintext (the TechEmpower
 * test), /echo (the request body back), /delay?ms=N (after N ms, on a
 * runtime timer), /limited (a scarce backend behind a resource pool: a
 * short wait for a slot, else 503), /stats (the runtime's counters as
 * JSON), and static files under --root for everything else.
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ull
#define DELAY_MAX_MS 60000
#define LIMITED_WAIT_MS 50     /* how long /limited waits for a slot */
#define LIMITED_WORK_MS 10     /* the backend's work, holding the slot */

/* Inlined, so that strlen(lit) of a literal is folded. */
static inline __attribute__((always_inline)) bool is(const struct http_slice *s, const char *lit)
{
	size_t n = strlen(lit);
	return s->len == n && !memcmp(s->p, lit, n);
}

/* The target's path (before any query) equals path. */
static inline __attribute__((always_inline)) bool path_is(const struct http_request *r,
                                                          const char *path)
{
	size_t n = strlen(path);
	return r->target.len >= n && !memcmp(r->target.p, path, n) &&
	       (r->target.len == n || r->target.p[n] == '?');
}

static int text(struct exchange *ex, int status, const char *body)
{
	return respond(ex, status, "text/plain", NULL, body, strlen(body));
}

static int not_allowed(struct exchange *ex, const char *allow)
{
	char extra[64];
	snprintf(extra, sizeof(extra), "Allow: %s\r\n", allow);
	return respond(ex, 405, "text/plain", extra, "405 Method Not Allowed\n", 23);
}

static int plaintext(struct exchange *ex)
{
	return respond(ex, 200, "text/plain", NULL, "Hello, World!", 13);
}

static int echo(struct exchange *ex)
{
	char *body;
	size_t len;
	int rc = read_body(ex, &body, &len);

	if (rc == -1)
		return -1;
	if (rc < 0) { /* the body broke a rule or a limit: answer, then close */
		ex->close = true;
		return text(ex, -rc, "bad body\n");
	}
	rc = respond(ex, 200, "application/octet-stream", NULL, body, len);
	free(body);
	return rc;
}

/* ms=N in the query, 0..DELAY_MAX_MS; -1 if missing or malformed. */
static long query_ms(const struct http_request *r)
{
	const char *q = memchr(r->target.p, '?', r->target.len);
	if (!q || (size_t)(r->target.p + r->target.len - q) < 5 || memcmp(q, "?ms=", 4))
		return -1;
	long v = 0;
	for (const char *p = q + 4; p < r->target.p + r->target.len; p++) {
		if (*p < '0' || *p > '9' || (v = v * 10 + (*p - '0')) > DELAY_MAX_MS)
			return -1;
	}
	return v;
}

static int delay(struct exchange *ex)
{
	long ms = query_ms(ex->req);
	char body[64];

	if (ms < 0)
		return text(ex, 400, "want /delay?ms=N, N from 0 to 60000\n");
	int rc = runtime_sleep((uint64_t)ms * MS);
	if (rc == -ECANCELED)
		return -1;
	snprintf(body, sizeof(body), "slept %ld ms\n", ms);
	return text(ex, 200, body);
}

/* Seed 003: protect a scarce backend. Wait a short while for a slot;
 * under overload answer 503 at once rather than queue without end.
 * ?ms=N sets how long the backend's work holds the slot (default 10). */
static int limited(struct server *srv, struct exchange *ex)
{
	long work_ms = memchr(ex->req->target.p, '?', ex->req->target.len) ?
	               query_ms(ex->req) : LIMITED_WORK_MS;

	if (work_ms < 0)
		return text(ex, 400, "want /limited or /limited?ms=N, N from 0 to 60000\n");
	int rc = runtime_sem_get(srv->backend, NULL, (int64_t)(LIMITED_WAIT_MS * MS));
	if (rc == -ETIMEDOUT)
		return respond(ex, 503, "text/plain", "Retry-After: 1\r\n", "busy, retry\n", 12);
	if (rc < 0)
		return -1;
	rc = runtime_sleep((uint64_t)work_ms * MS); /* the backend's work */
	runtime_sem_post(srv->backend, NULL);
	return rc == 0 ? text(ex, 200, "done\n") : -1;
}

static int stats(struct server *srv, struct exchange *ex)
{
	struct runtime_core_stats cs[64];
	struct runtime_offload_stats pool;
	struct runtime_sem_stats backend;
	struct runtime_server_stats served;
	char body[8192];
	unsigned n = runtime_stats(srv->rt, cs, 64, &pool);
	size_t len = 0;

	runtime_sem_stats(srv->backend, &backend);
	runtime_server_stats(srv->server, &served);
	len += (size_t)snprintf(body + len, sizeof(body) - len, "{\"engine\":\"%s\",\"cores\":[",
	                        runtime_engine_name(runtime_engine(srv->rt)));
	for (unsigned i = 0; i < n && i < 64; i++)
		len += (size_t)snprintf(body + len, sizeof(body) - len,
		        "%s{\"fibers_live\":%llu,\"fibers_spawned\":%llu,\"sqes_submitted\":%llu,"
		        "\"cqes_reaped\":%llu,\"enters\":%llu,\"timers_armed\":%llu,"
		        "\"inbox_items\":%llu,\"wakeups_written\":%llu}", i ? "," : "",
		        (unsigned long long)cs[i].fibers_live, (unsigned long long)cs[i].fibers_spawned,
		        (unsigned long long)cs[i].sqes_submitted, (unsigned long long)cs[i].cqes_reaped,
		        (unsigned long long)cs[i].enters, (unsigned long long)cs[i].timers_armed,
		        (unsigned long long)cs[i].inbox_items, (unsigned long long)cs[i].wakeups_written);
	len += (size_t)snprintf(body + len, sizeof(body) - len,
	        "],\"offload\":{\"alive\":%u,\"idle\":%u,\"largest\":%u,\"queued\":%zu,"
	        "\"completed\":%llu,\"rejected\":%llu},\"limited\":{\"in_use\":%u,\"waiting\":%u},"
	        "\"server\":{\"open\":%u,\"accepted\":%llu,\"refused\":%llu,\"requests\":%llu}}\n",
	        pool.alive, pool.idle, pool.largest, pool.queued, (unsigned long long)pool.completed,
	        (unsigned long long)pool.rejected, backend.in_use, backend.waiting,
	        atomic_load(&srv->open), (unsigned long long)served.accepted,
	        (unsigned long long)served.refused,
	        (unsigned long long)conn_requests(srv));
	return respond(ex, 200, "application/json", NULL, body, len < sizeof(body) ? len : 0);
}

/* Methods this server implements at all; others get 501. */
static bool known_method(const struct http_slice *m)
{
	return is(m, "GET") || is(m, "HEAD") || is(m, "POST");
}

int route(struct server *srv, struct exchange *ex)
{
	const struct http_request *r = ex->req;
	bool get = is(&r->method, "GET") || is(&r->method, "HEAD");

	if (!known_method(&r->method))
		return text(ex, 501, "501 Not Implemented\n");
	if (path_is(r, "/echo"))
		return is(&r->method, "POST") ? echo(ex) : not_allowed(ex, "POST");
	if (!get)
		return not_allowed(ex, "GET, HEAD");
	if (path_is(r, "/plaintext"))
		return plaintext(ex);
	if (path_is(r, "/delay"))
		return delay(ex);
	if (path_is(r, "/limited"))
		return limited(srv, ex);
	if (path_is(r, "/stats"))
		return stats(srv, ex);
	return serve_file(srv, ex);
}
