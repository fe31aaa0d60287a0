/* SPDX-License-Identifier: MIT */
/*
 * ws_handshake.c - the server's WebSocket opening handshake (RFC 6455
 * 4.2) over runtime_http_upgrade, and the key's answer both sides check
 * (SHA-1 and base64: ws_sha1.c). The client's side is ws_client.c.
 */
#define _GNU_SOURCE
#define RUNTIME_WS_CONN
#include "http.h"
#include "ws.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

void runtime__ws_accept_of(const char *key, char out[WS_ACCEPT_LEN + 1])
{
	char in[WS_KEY_LEN + sizeof(WS_GUID) - 1];
	uint8_t digest[20];

	memcpy(in, key, WS_KEY_LEN);
	memcpy(in + WS_KEY_LEN, WS_GUID, sizeof(WS_GUID) - 1);
	runtime__ws_sha1(in, sizeof(in), digest);
	runtime__ws_base64(digest, sizeof(digest), out);
}

/* A key as RFC 6455 4.1 makes it: 16 bytes in base64, 24 characters. */
static bool key_ok(const struct runtime_http_slice *k)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	if (!k || k->len != WS_KEY_LEN || k->p[22] != '=' || k->p[23] != '=')
		return false;
	for (size_t i = 0; i < 22; i++)
		if (!k->p[i] || !strchr(b64, k->p[i]))
			return false;
	return true;
}

/* ------------------------------------------------------------- server */

/* The refusal: 400, or 426 naming the version spoken. -EPROTO. */
static int refuse(struct runtime_http_response *res, int status)
{
	static const char bad[] = "not a WebSocket handshake\n";
	static const char version[] = "WebSocket version 13 only\n";

	if (status == 426)
		runtime_http_set_header(res, "Sec-WebSocket-Version", "13");
	runtime_http_respond(res, status, "text/plain", status == 426 ? version : bad,
	                     status == 426 ? sizeof(version) - 1 : sizeof(bad) - 1);
	return -EPROTO;
}

/* Is protocol among the client's offers (every Sec-WebSocket-Protocol)? */
static bool offered(const struct runtime_http_request *req, const char *protocol)
{
	struct runtime_http_slice name, value;

	for (unsigned i = 0; runtime_http_header_at(req, i, &name, &value) == 0; i++)
		if (name.len == 22 && !strncasecmp(name.p, "sec-websocket-protocol", 22) &&
		    runtime__http_has_token(value, protocol))
			return true;
	return false;
}

/* The server's first subprotocol the client offers, or NULL. */
static const char *choose(const struct runtime_http_request *req, const char *const *ours)
{
	for (; ours && *ours; ours++)
		if (offered(req, *ours))
			return *ours;
	return NULL;
}

/* The client's permessage-deflate offers (every Sec-WebSocket-Extensions
 * field): the first we take, into o. */
static bool deflate_offered(const struct runtime_http_request *req, struct ws_deflate_params *o)
{
	struct runtime_http_slice name, value;

	for (unsigned i = 0; runtime_http_header_at(req, i, &name, &value) == 0; i++)
		if (name.len == 24 && !strncasecmp(name.p, "sec-websocket-extensions", 24) &&
		    runtime__ws_deflate_parse(value.p, value.len, o))
			return true;
	return false;
}

/* The fields of the 101 beyond the library's: the key's answer, the
 * subprotocol, the extension. 0 or -errno. */
static int answer_fields(struct runtime_http_response *res, const char *protocol,
                         const struct ws_deflate_params *dp, const char *key)
{
	char accept[WS_ACCEPT_LEN + 1], ext[128];
	int rc = 0;

	runtime__ws_accept_of(key, accept);
	if (protocol)
		rc = runtime_http_set_header(res, "Sec-WebSocket-Protocol", protocol);
	if (rc == 0 && dp) {
		runtime__ws_deflate_answer(dp, ext, sizeof(ext));
		rc = runtime_http_set_header(res, "Sec-WebSocket-Extensions", ext);
	}
	return rc < 0 ? rc : runtime_http_set_header(res, "Sec-WebSocket-Accept", accept);
}

/* How many fields called name (lower case) req has. */
static unsigned fields_named(const struct runtime_http_request *req, const char *name)
{
	struct runtime_http_slice n, v;
	size_t len = strlen(name);
	unsigned count = 0;

	for (unsigned i = 0; runtime_http_header_at(req, i, &n, &v) == 0; i++)
		count += n.len == len && !strncasecmp(n.p, name, len);
	return count;
}

/* The request's handshake: 0, or the status to refuse it with. The key
 * and the version come once (RFC 6455 11.3.1, 11.3.5). */
static int handshake_status(const struct runtime_http_request *req)
{
	struct runtime_http_slice m = runtime_http_method(req);
	const struct runtime_http_slice *v = runtime_http_header(req, "sec-websocket-version");

	if (m.len != 3 || memcmp(m.p, "GET", 3) || !runtime__http_upgrade_asked(req, "websocket"))
		return 400;
	if (!key_ok(runtime_http_header(req, "sec-websocket-key")) ||
	    fields_named(req, "sec-websocket-key") != 1 ||
	    fields_named(req, "sec-websocket-version") > 1)
		return 400;
	if (!v || v->len != 2 || memcmp(v->p, "13", 2))
		return 426;
	return 0;
}

int runtime_ws_accept(struct runtime_http_request *req, struct runtime_http_response *res,
                      const struct runtime_ws_config *cfg, struct runtime_ws **ws)
{
	struct runtime_http_upgraded up;
	struct ws_deflate_params dp;

	if (!req || !res || !ws)
		return -EINVAL;
	*ws = NULL;
	if (runtime_http_version(req) != 11) {
		refuse(res, 400);
		return -EPROTONOSUPPORT;
	}
	int status = handshake_status(req);
	if (status)
		return refuse(res, status);
	const char *protocol = choose(req, cfg ? cfg->subprotocols : NULL);
	bool deflate = cfg && cfg->deflate && deflate_offered(req, &dp);
	int rc = answer_fields(res, protocol, deflate ? &dp : NULL,
	                       runtime_http_header(req, "sec-websocket-key")->p);
	if (rc == 0)
		rc = runtime_http_upgrade(res, "websocket", &up);
	if (rc < 0)
		return rc;
	rc = runtime__ws_new(ws, up.conn, false, cfg, protocol, up.early.p, up.early.len,
	                     deflate ? &dp : NULL);
	if (rc == 0)
		(*ws)->res = res; /* for runtime_ws_serve's hand-off */
	return rc;
}
