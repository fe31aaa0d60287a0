/* SPDX-License-Identifier: MIT */
/*
 * routes.c - what the demo server answers: /plaintext (the TechEmpower
 * test), /echo (the request body back), /delay?ms=N (after N ms, on a
 * runtime timer), /limited (a scarce backend behind a resource pool: a
 * short wait for a slot, else 503), /stats (the runtime's counters as
 * JSON), /metrics (the runtime's and the server's, for Prometheus:
 * runtime_http_metrics_handler), /ws (a WebSocket echo: each message
 * back as it came; permessage-deflate if the client offers it), and static files under --root for everything else. Routed by
 * the target's path, of an absolute-form target too. The routes with work
 * of their own are kept out of line (noinline), so that route's own frame
 * stays small for the answers it makes at once.
 */
#include "server.h"

#include <runtime_ws.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ull
#define DELAY_MAX_MS 60000
#define LIMITED_WAIT_MS 50     /* how long /limited waits for a slot */
#define LIMITED_WORK_MS 10     /* the backend's work, holding the slot */

/* Inlined, so that strlen(lit) of a literal is folded. */
static inline __attribute__((always_inline)) bool is(struct runtime_http_slice s, const char *lit)
{
	size_t n = strlen(lit);
	return s.len == n && !memcmp(s.p, lit, n);
}

static int text(struct runtime_http_response *res, int status, const char *body)
{
	return runtime_http_respond(res, status, "text/plain", body, strlen(body));
}

static __attribute__((noinline)) int not_allowed(struct runtime_http_response *res,
                                                 const char *allow)
{
	runtime_http_set_header(res, "Allow", allow);
	return text(res, 405, "405 Method Not Allowed\n");
}

static __attribute__((noinline)) int echo(struct runtime_http_request *req,
                                          struct runtime_http_response *res,
                                          const struct server *srv)
{
	char *body;
	size_t len;
	int rc = runtime_http_body_read_all(req, &body, &len, (size_t)srv->opt.body_max);

	if (rc < 0) /* the library answers: 413 over the limit, 400 bad framing, 408 */
		return rc;
	rc = runtime_http_respond(res, 200, "application/octet-stream", body, len);
	free(body);
	return rc;
}

/* ms=N in the query, 0..DELAY_MAX_MS; -1 if missing or malformed. */
static long query_ms(const struct runtime_http_request *req)
{
	struct runtime_http_slice q = runtime_http_query(req);
	long v = 0;

	if (q.len < 4 || memcmp(q.p, "ms=", 3))
		return -1;
	for (size_t i = 3; i < q.len; i++)
		if (q.p[i] < '0' || q.p[i] > '9' || (v = v * 10 + (q.p[i] - '0')) > DELAY_MAX_MS)
			return -1;
	return v;
}

static __attribute__((noinline)) int delay(struct runtime_http_request *req,
                                           struct runtime_http_response *res)
{
	long ms = query_ms(req);
	char body[64];

	if (ms < 0)
		return text(res, 400, "want /delay?ms=N, N from 0 to 60000\n");
	int rc = runtime_sleep((uint64_t)ms * MS);
	if (rc == -ECANCELED)
		return rc;
	snprintf(body, sizeof(body), "slept %ld ms\n", ms);
	return text(res, 200, body);
}

/* Seed 003: protect a scarce backend. Wait a short while for a slot;
 * under overload answer 503 at once rather than queue without end.
 * ?ms=N sets how long the backend's work holds the slot (default 10). */
static __attribute__((noinline)) int limited(struct server *srv, struct runtime_http_request *req,
                                             struct runtime_http_response *res)
{
	struct runtime_http_slice t = runtime_http_target(req);
	long work_ms = memchr(t.p, '?', t.len) ? query_ms(req) : LIMITED_WORK_MS;

	if (work_ms < 0)
		return text(res, 400, "want /limited or /limited?ms=N, N from 0 to 60000\n");
	int rc = runtime_sem_get(srv->backend, NULL, (int64_t)(LIMITED_WAIT_MS * MS));
	if (rc == -ETIMEDOUT) {
		runtime_http_set_header(res, "Retry-After", "1");
		return text(res, 503, "busy, retry\n");
	}
	if (rc < 0)
		return rc;
	rc = runtime_sleep((uint64_t)work_ms * MS); /* the backend's work */
	runtime_sem_post(srv->backend, NULL);
	return rc == 0 ? text(res, 200, "done\n") : rc;
}

/* The runtime's per-core counters, as JSON, into body. Its length. */
static size_t core_stats(const struct server *srv, char *body, size_t cap)
{
	struct runtime_core_stats cs[64];
	unsigned n = runtime_stats(srv->rt, cs, 64, NULL);
	size_t len = 0;

	for (unsigned i = 0; i < n && i < 64 && len < cap; i++)
		len += (size_t)snprintf(body + len, cap - len,
		        "%s{\"fibers_live\":%llu,\"fibers_spawned\":%llu,\"sqes_submitted\":%llu,"
		        "\"cqes_reaped\":%llu,\"enters\":%llu,\"timers_armed\":%llu,"
		        "\"inbox_items\":%llu,\"wakeups_written\":%llu,\"requests\":%llu}", i ? "," : "",
		        (unsigned long long)cs[i].fibers_live, (unsigned long long)cs[i].fibers_spawned,
		        (unsigned long long)cs[i].sqes_submitted, (unsigned long long)cs[i].cqes_reaped,
		        (unsigned long long)cs[i].enters, (unsigned long long)cs[i].timers_armed,
		        (unsigned long long)cs[i].inbox_items, (unsigned long long)cs[i].wakeups_written,
		        (unsigned long long)runtime_http_server_core_requests(srv->http, i));
	return len < cap ? len : cap;
}

static __attribute__((noinline)) int stats(struct server *srv, struct runtime_http_response *res)
{
	struct runtime_offload_stats pool;
	struct runtime_sem_stats backend;
	struct runtime_http_server_stats st;
	char body[8192];
	size_t len = 0;

	runtime_stats(srv->rt, NULL, 0, &pool);
	runtime_sem_stats(srv->backend, &backend);
	runtime_http_server_stats(srv->http, &st);
	len += (size_t)snprintf(body, sizeof(body), "{\"engine\":\"%s\",\"cores\":[",
	                        runtime_engine_name(runtime_engine(srv->rt)));
	len += core_stats(srv, body + len, sizeof(body) - len);
	if (len < sizeof(body))
		len += (size_t)snprintf(body + len, sizeof(body) - len,
		        "],\"offload\":{\"alive\":%u,\"idle\":%u,\"largest\":%u,\"queued\":%zu,"
		        "\"completed\":%llu,\"rejected\":%llu},\"limited\":{\"in_use\":%u,\"waiting\":%u},"
		        "\"server\":{\"open\":%u,\"accepted\":%llu,\"refused\":%llu,\"requests\":%llu,"
		        "\"rejected\":%llu}}\n",
		        pool.alive, pool.idle, pool.largest, pool.queued, (unsigned long long)pool.completed,
		        (unsigned long long)pool.rejected, backend.in_use, backend.waiting,
		        st.conns.live, (unsigned long long)st.conns.accepted,
		        (unsigned long long)st.conns.refused, (unsigned long long)st.requests,
		        (unsigned long long)st.rejected);
	return runtime_http_respond(res, 200, "application/json", body, len < sizeof(body) ? len : 0);
}

/* The TechEmpower plaintext answer. */
static inline int plaintext(struct runtime_http_response *res)
{
	return runtime_http_respond(res, 200, "text/plain", "Hello, World!", 13);
}

/* /ws's: each message back as it came. */
static void ws_echo_message(struct runtime_ws *ws, int type, const struct runtime_ws_message *m,
                            void *arg)
{
	(void)arg;
	if (type > 0)
		runtime_ws_send(ws, type, m->data, m->len); /* a failure ends ws */
}

/* /ws: an echo until the peer closes (or a drain: 1001), served by the
 * library: between messages a WebSocket holds no fiber. A bad handshake
 * is answered 400 or 426 by accept. */
static __attribute__((noinline)) int ws_echo(struct runtime_http_request *req,
                                             struct runtime_http_response *res)
{
	static const char *const protocols[] = { "echo", NULL };
	const struct runtime_ws_config cfg = { .subprotocols = protocols, .deflate = 1 };
	struct runtime_ws *ws;

	if (runtime_ws_accept(req, res, &cfg, &ws) < 0)
		return 0; /* answered, or the connection is gone */
	if (runtime_ws_serve(ws, ws_echo_message, NULL) < 0)
		runtime_ws_close(ws, RUNTIME_WS_NORMAL, NULL);
	return 0;
}

/* Methods this server implements at all; others get 501. */
static bool known_method(struct runtime_http_slice m)
{
	return is(m, "GET") || is(m, "HEAD") || is(m, "POST");
}

/* A GET or HEAD resource; anything else there is 405. */
static int get_only(struct server *srv, struct runtime_http_request *req,
                    struct runtime_http_response *res, struct runtime_http_slice path)
{
	if (is(path, "/plaintext"))
		return plaintext(res);
	if (is(path, "/delay"))
		return delay(req, res);
	if (is(path, "/limited"))
		return limited(srv, req, res);
	if (is(path, "/stats"))
		return stats(srv, res);
	if (is(path, "/metrics"))
		return runtime_http_metrics_handler(req, res, srv->metrics);
	if (is(path, "/healthz")) /* 503 from the drain on: balancers stop first */
		return runtime_http_health_handler(req, res, srv->rt);
	if (is(path, "/ws"))
		return ws_echo(req, res);
	return serve_file(srv, req, res);
}

static bool get_resource(struct server *srv, struct runtime_http_slice path)
{
	return is(path, "/plaintext") || is(path, "/delay") || is(path, "/limited") ||
	       is(path, "/stats") || is(path, "/metrics") || is(path, "/healthz") ||
	       is(path, "/ws") || file_exists(srv, path);
}

static __attribute__((noinline)) int route_any(struct runtime_http_request *req,
                                               struct runtime_http_response *res,
                                               struct server *srv)
{
	struct runtime_http_slice m = runtime_http_method(req), path = runtime_http_path(req);
	bool get = is(m, "GET") || is(m, "HEAD");

	if (!known_method(m))
		return text(res, 501, "501 Not Implemented\n");
	if (is(path, "/echo"))
		return is(m, "POST") ? echo(req, res, srv) : not_allowed(res, "POST");
	if (get)
		return get_only(srv, req, res, path);
	/* Not GET: 405 where the resource exists, 404 where nothing does. */
	return get_resource(srv, path) ? not_allowed(res, "GET, HEAD") : text(res, 404, "404 Not Found\n");
}

/* GET /plaintext first, as route_any would answer it, with nothing kept
 * across the method's call but the arguments: the target as sent, which
 * is the path when it is "/plaintext" whole (runtime_http_target: no
 * split); every other request as route_any says (a query, absolute-form). */
int route(struct runtime_http_request *req, struct runtime_http_response *res, void *arg)
{
	if (is(runtime_http_target(req), "/plaintext") && is(runtime_http_method(req), "GET"))
		return plaintext(res);
	return route_any(req, res, arg);
}

