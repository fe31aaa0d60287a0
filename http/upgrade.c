/* SPDX-License-Identifier: MIT */
/*
 * upgrade.c - runtime_http_upgrade: a handler takes its HTTP/1.1
 * connection over after a 101 (RFC 9110 7.8), for WebSocket or a protocol
 * of its own. The library writes the 101 with the handler's fields, gives
 * the handler the connection and the bytes the client sent after the
 * request (read already), clears the deadlines it had set, and once the
 * handler returns closes the connection: no HTTP follows on it.
 */
#define _GNU_SOURCE
#include "http.h"
#include "chars.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool runtime__http_has_token(struct runtime_http_slice v, const char *token)
{
	size_t n = strlen(token);

	for (size_t i = 0; i < v.len;) {
		while (i < v.len && (v.p[i] == ' ' || v.p[i] == '\t' || v.p[i] == ','))
			i++;
		size_t start = i;
		while (i < v.len && v.p[i] != ',' && v.p[i] != ' ' && v.p[i] != '\t')
			i++;
		if (i - start == n && !strncasecmp(v.p + start, token, n))
			return true;
		while (i < v.len && v.p[i] != ',')
			i++;
	}
	return false;
}

bool runtime__http_upgrade_asked(const struct runtime_http_request *req, const char *protocol)
{
	struct runtime_http_slice name, value;
	bool upgrade = false, connection = false;

	for (unsigned i = 0; runtime_http_header_at(req, i, &name, &value) == 0; i++) {
		if (name.len == 7 && !strncasecmp(name.p, "upgrade", 7))
			upgrade |= runtime__http_has_token(value, protocol);
		else if (name.len == 10 && !strncasecmp(name.p, "connection", 10))
			connection |= runtime__http_has_token(value, "upgrade");
	}
	return upgrade && connection;
}

static bool token(const char *s)
{
	size_t i = 0;

	while (is_tchar((unsigned char)s[i]) || s[i] == '/')
		i++;
	return i > 0 && !s[i] && i < 64;
}

/* The 101's head into a buffer of its own: its length, or -ENOMEM. */
static ssize_t head_101(struct runtime_http_response *res, const char *protocol, char **out)
{
	static const char line[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: ";
	static const char conn[] = "\r\nConnection: Upgrade\r\n";
	size_t pl = strlen(protocol), n = sizeof(line) - 1 + pl + sizeof(conn) - 1;
	char *h = malloc(n + res->fields_len + 2), *p = h;

	if (!h)
		return -ENOMEM;
	p = mempcpy(p, line, sizeof(line) - 1);
	p = mempcpy(p, protocol, pl);
	p = mempcpy(p, conn, sizeof(conn) - 1);
	p = mempcpy(p, http_fields(res), res->fields_len);
	p = mempcpy(p, "\r\n", 2);
	*out = h;
	return p - h;
}

/* The connection is the handler's now: no deadline of the library's on
 * it, not idle, the early bytes taken out of the library's buffer. */
static void hand_over(struct http_conn *c, struct runtime_http_upgraded *up)
{
	runtime__http_unwatch(c); /* the peer's end is the handler's to read */
	runtime__http_not_idle(c);
	http_read_deadline(c, 0);
	runtime_conn_set_write_deadline(c->rc, 0);
	c->wr_told = 0; /* not known: the library tells it again if it writes */
	up->conn = c->rc;
	up->early = (struct runtime_http_slice){ c->in + c->in_off, c->in_len - c->in_off };
	c->in_off = c->in_len;
}

int runtime_http_upgrade(struct runtime_http_response *res, const char *protocol,
                         struct runtime_http_upgraded *up)
{
	if (!res || !protocol || !up || !token(protocol) || !res->req)
		return -EINVAL;
	if (res->h2 || res->req->head.minor == 0)
		return -EPROTONOSUPPORT; /* HTTP/2 has no Upgrade; 1.0 none either */
	if (res->state != RES_NONE)
		return -EALREADY;
	if (!runtime__http_upgrade_asked(res->req, protocol))
		return -EINVAL;
	struct http_conn *c = res->conn;
	if (!res->req->body_done && runtime__http_body_discard(res->req) < 0)
		return -EPIPE;
	char *head;
	ssize_t n = head_101(res, protocol, &head);
	if (n < 0)
		return (int)n;
	http_write_deadline(c, runtime__http_deadline_in(c->srv->cfg.idle_timeout_ns));
	int rc = runtime__http_flush(c) < 0 || runtime__http_write_out(c, head, (size_t)n) < 0;
	free(head);
	res->state = RES_DONE;
	res->close = true; /* no HTTP after it, whatever happens */
	if (rc)
		return -EPIPE;
	res->status = 101;
	res->head_bytes = (uint64_t)n;
	http_count(&res->core->responses[1]);
	res->req->answered = true;
	hand_over(c, up);
	return 0;
}

enum http_idle_way runtime__http_hand_off(struct runtime_http_response *res,
                                          runtime_serve_fn *fn, void *arg)
{
	struct http_conn *c = res->conn;

	c->hand_off = fn;
	c->hand_off_arg = arg;
	if (!c->may_idle)
		return HTTP_IDLE_NEVER;
	return c->srv->cfg.serve.release_after_ns ? HTTP_IDLE_WHEN_QUIET : HTTP_IDLE_AT_ONCE;
}
