/* SPDX-License-Identifier: MIT */
/*
 * ws_client.c - runtime_ws_connect: the client's WebSocket opening
 * handshake (RFC 6455 4.1) as an upgrade request of the HTTP client, and
 * the 101 checked. The WebSocket keeps the result, which holds the
 * connection, until it closes.
 */
#define _GNU_SOURCE
#define RUNTIME_WS_CONN
#include "http.h"
#include "ws.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define OFFER_MAX 512           /* the Sec-WebSocket-Protocol offered */
#define DEFLATE_OFFER "Sec-WebSocket-Extensions: permessage-deflate; " \
	"server_no_context_takeover; client_no_context_takeover"

/* What the handshake agreed on besides the connection. */
struct agreed {
	const char *protocol;            /* one of cfg's, or NULL */
	bool deflate;
	struct ws_deflate_params dp;
};

/* url's http(s):// twin (malloc'd) for ws(s)://; NULL for another. */
static char *http_url(const char *url)
{
	char *out = NULL;

	if (!strncasecmp(url, "ws://", 5))
		return asprintf(&out, "http://%s", url + 5) < 0 ? NULL : out;
	if (!strncasecmp(url, "wss://", 6))
		return asprintf(&out, "https://%s", url + 6) < 0 ? NULL : out;
	return NULL;
}

/* A fresh key, base64 of 16 random bytes, NUL-terminated. */
static void new_key(char key[WS_KEY_LEN + 1])
{
	unsigned char raw[16];

	arc4random_buf(raw, sizeof(raw));
	runtime__ws_base64(raw, sizeof(raw), key);
}

/* The handshake's fields, then cfg's: NULL-terminated, into f (room for
 * 5 + cfg's); the strings in text. 0, or -EINVAL (offers too long). */
static int fields_of(const char **f, char text[3][OFFER_MAX + 32], const char *key,
                      const struct runtime_ws_config *cfg)
{
	size_t n = 0, used = 0;

	snprintf(text[0], sizeof(text[0]), "Sec-WebSocket-Key: %s", key);
	f[n++] = text[0];
	f[n++] = "Sec-WebSocket-Version: 13";
	if (cfg && cfg->subprotocols && cfg->subprotocols[0]) {
		used = (size_t)snprintf(text[1], sizeof(text[1]), "Sec-WebSocket-Protocol: ");
		for (const char *const *p = cfg->subprotocols; *p && used < sizeof(text[1]); p++)
			used += (size_t)snprintf(text[1] + used, sizeof(text[1]) - used, "%s%s",
			                         p == cfg->subprotocols ? "" : ", ", *p);
		f[n++] = text[1];
	}
	if (cfg && cfg->deflate)
		f[n++] = DEFLATE_OFFER;
	for (const char *const *h = cfg ? cfg->headers : NULL; h && *h; h++)
		f[n++] = *h;
	f[n] = NULL;
	return used < sizeof(text[1]) ? 0 : -EINVAL;
}

/* The extension the 101 names, if any: only permessage-deflate as we
 * offered it - the server keeps no context, and names no window of ours
 * (we offered none: RFC 7692 7.1.2.2). It may name its own
 * (server_max_window_bits, 7.1.2.1: python3-websockets says 12), which
 * our inflater, made for any window, takes as it comes. */
static int check_extension(const struct runtime_http_slice *e,
                           const struct runtime_ws_config *cfg, struct agreed *a)
{
	a->deflate = e != NULL;
	if (!e)
		return 0;
	if (!cfg || !cfg->deflate || !runtime__ws_deflate_parse(e->p, e->len, &a->dp) ||
	    !a->dp.server_no_takeover || a->dp.client_bits)
		return -EPROTO;
	return 0;
}

/* Does the 101 say it upgrades to WebSocket (RFC 6455 4.1: an Upgrade
 * field naming websocket, a Connection field naming upgrade), with each
 * field of the handshake's own at most once (11.3.2 - 11.3.4)? */
static bool upgrade_said(const struct runtime_http_result *res)
{
	static const char *const once[] = { "sec-websocket-accept", "sec-websocket-extensions",
	                                    "sec-websocket-protocol" };
	struct runtime_http_slice n, v;
	unsigned seen[3] = { 0 };
	bool upgrade = false, connection = false;

	for (unsigned i = 0; runtime_http_result_header_at(res, i, &n, &v) == 0; i++) {
		if (n.len == 7 && !strncasecmp(n.p, "upgrade", 7))
			upgrade |= runtime__http_has_token(v, "websocket");
		else if (n.len == 10 && !strncasecmp(n.p, "connection", 10))
			connection |= runtime__http_has_token(v, "upgrade");
		for (int k = 0; k < 3; k++)
			seen[k] += n.len == strlen(once[k]) && !strncasecmp(n.p, once[k], n.len);
	}
	return upgrade && connection && seen[0] <= 1 && seen[1] <= 1 && seen[2] <= 1;
}

/* The 101's fields as RFC 6455 4.1 wants them: the upgrade said, the
 * key's answer, a subprotocol we offered, an extension as offered. 0 or
 * -EPROTO. */
static int check_101(struct runtime_http_result *res, const char *key,
                     const struct runtime_ws_config *cfg, struct agreed *a)
{
	const struct runtime_http_slice *acc = runtime_http_result_header(res, "sec-websocket-accept");
	const struct runtime_http_slice *p = runtime_http_result_header(res, "sec-websocket-protocol");
	char want[WS_ACCEPT_LEN + 1];

	a->protocol = NULL;
	runtime__ws_accept_of(key, want);
	if (!upgrade_said(res) || !acc || acc->len != WS_ACCEPT_LEN ||
	    memcmp(acc->p, want, WS_ACCEPT_LEN))
		return -EPROTO;
	if (check_extension(runtime_http_result_header(res, "sec-websocket-extensions"), cfg, a) < 0)
		return -EPROTO;
	for (const char *const *o = cfg && p ? cfg->subprotocols : NULL; o && *o; o++)
		if (strlen(*o) == p->len && !memcmp(*o, p->p, p->len))
			a->protocol = *o;
	return p && !a->protocol ? -EPROTO : 0;
}

static size_t count(const char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

/* The upgrade request and its 101: *res, and the subprotocol. */
static int handshake(struct runtime_http_client *cl, const char *url,
                     const struct runtime_ws_config *cfg, struct runtime_http_result **res,
                     struct agreed *a)
{
	char key[WS_KEY_LEN + 1], text[3][OFFER_MAX + 32];
	const char **fields = malloc((5 + count(cfg ? cfg->headers : NULL)) * sizeof(*fields));
	char *http = http_url(url);
	int rc = !fields ? -ENOMEM : !http ? -EPROTONOSUPPORT : 0;

	if (rc == 0) {
		new_key(key);
		rc = fields_of(fields, text, key, cfg);
	}
	if (rc == 0) {
		struct runtime_http_client_request r = {
			.url = http, .headers = fields, .upgrade = "websocket",
			.deadline_ns = cfg ? cfg->deadline_ns : 0,
		};
		rc = runtime_http_request(cl, &r, res);
	}
	if (rc == 0 && runtime_http_result_status(*res) != 101)
		rc = -ECONNREFUSED;
	if (rc == 0)
		rc = check_101(*res, key, cfg, a);
	if (rc < 0 && *res) {
		runtime_http_result_close(*res);
		*res = NULL;
	}
	free(fields);
	free(http);
	return rc;
}

int runtime_ws_connect(struct runtime_http_client *cl, const char *url,
                       const struct runtime_ws_config *cfg, struct runtime_ws **ws)
{
	struct runtime_http_result *res = NULL;
	struct runtime_http_upgraded up;
	struct agreed a;

	if (!cl || !url || !ws)
		return -EINVAL;
	*ws = NULL;
	int rc = handshake(cl, url, cfg, &res, &a);
	if (rc == 0)
		rc = runtime_http_result_upgraded(res, &up);
	if (rc == 0)
		rc = runtime__ws_new(ws, up.conn, true, cfg, a.protocol, up.early.p, up.early.len,
		                     a.deflate ? &a.dp : NULL);
	if (rc < 0) {
		if (res)
			runtime_http_result_close(res);
		return rc;
	}
	(*ws)->result = res;
	(*ws)->result_close = runtime_http_result_close;
	return 0;
}
