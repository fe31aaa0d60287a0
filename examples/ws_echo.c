/* SPDX-License-Identifier: MIT */
/*
 * ws_echo.c - the echo server again, over WebSocket (runtime_ws.h), and
 * its client. As a server it answers the handshake on any path and sends
 * every message back as it came, text or binary, until the client closes,
 * holding no fiber between messages (runtime_ws_serve); SIGINT or SIGTERM
 * drains, and each WebSocket waiting for a message is closed with 1001
 * (going away). As a client (--connect URL) it sends
 * each further argument as a text message, prints each echo on a line,
 * and closes with 1000.
 *
 * Shows: runtime_ws_accept, runtime_ws_serve (the server), runtime_ws_recv
 * (the client), runtime_ws_send, runtime_ws_close, runtime_ws_connect
 * (through runtime_http_client), and a drain reaching WebSockets.
 *
 *   ./ws_echo [PORT]                             # default 7001; 0: any
 *   ./ws_echo --connect ws://127.0.0.1:7001/ hello world
 *   ./ws_echo --connect ws://127.0.0.1:7001/ --deflate hello  # compressed
 *   python3 -m websockets ws://127.0.0.1:7001/   # any client will do
 *
 * The server prints "ws_echo: listening on port P", and "ws_echo: stopped"
 * after a signal; the client "ws_echo: closed with 1000" at its end.
 */
#include <runtime_ws.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRACE_NS (5 * 1000 * 1000 * 1000ull) /* a drain's, for the closes */

/* ------------------------------------------------------------- server */

/* Each message back as it came; rc <= 0 is the end (0: closed), after
 * which the library frees ws. */
static void echo_message(struct runtime_ws *ws, int rc, const struct runtime_ws_message *m,
                         void *arg)
{
	(void)arg;
	if (rc > 0)
		runtime_ws_send(ws, rc, m->data, m->len); /* a failure ends ws */
}

/* One request: a WebSocket echo, or the handshake's refusal (400, 426),
 * which runtime_ws_accept answers itself. The handler returns at once:
 * the library receives, with no fiber while the socket is idle. */
static int echo(struct runtime_http_request *req, struct runtime_http_response *res, void *arg)
{
	struct runtime_ws *ws;
	(void)arg;

	if (runtime_ws_accept(req, res, NULL, &ws) == 0 &&
	    runtime_ws_serve(ws, echo_message, NULL) < 0)
		runtime_ws_close(ws, RUNTIME_WS_NORMAL, NULL);
	return 0;
}

static int serve(unsigned port)
{
	struct runtime_http_server_config cfg;
	struct runtime_http_server *srv = NULL;
	struct runtime *rt;
	int rc = runtime_create(&rt, NULL);

	if (rc < 0)
		return rc;
	runtime_http_server_config_init(&cfg);
	cfg.serve.host = "127.0.0.1";
	cfg.serve.port = (uint16_t)port;
	cfg.handler = echo;
	if ((rc = runtime_drain_on_signals(rt, GRACE_NS)) == 0 &&
	    (rc = runtime_http_serve(rt, &cfg, &srv)) == 0) {
		printf("ws_echo: listening on port %u\n", runtime_http_server_port(srv));
		fflush(stdout);
		rc = runtime_run(rt);
		printf("ws_echo: stopped\n");
	}
	runtime_http_server_destroy(srv);
	runtime_destroy(rt);
	return rc;
}

/* ------------------------------------------------------------- client */

struct client {
	const char *url;
	char **words;
	int deflate;             /* offer permessage-deflate */
	int rc;
};

/* Each word out, its echo printed; then the close. */
static int converse(struct runtime_ws *ws, char **words)
{
	struct runtime_ws_message m;
	int rc = 0;

	for (; *words && rc >= 0; words++) {
		rc = runtime_ws_send(ws, RUNTIME_WS_TEXT, *words, strlen(*words));
		if (rc == 0 && (rc = runtime_ws_recv(ws, &m)) > 0)
			printf("%.*s\n", (int)m.len, (const char *)m.data);
		else if (rc == 0)
			rc = -ECONNRESET; /* closed by the server before its echo */
	}
	return rc < 0 ? rc : 0;
}

static void client_main(void *arg)
{
	struct client *c = arg;
	const struct runtime_ws_config cfg = { .deflate = c->deflate };
	struct runtime_http_client *cl;
	struct runtime_ws *ws;

	if ((c->rc = runtime_http_client_create(&cl, NULL)) < 0)
		return;
	if ((c->rc = runtime_ws_connect(cl, c->url, &cfg, &ws)) == 0) {
		c->rc = converse(ws, c->words);
		int closed = runtime_ws_close(ws, RUNTIME_WS_NORMAL, NULL);
		if (c->rc == 0 && closed == 0)
			printf("ws_echo: closed with %d\n", RUNTIME_WS_NORMAL);
		c->rc = c->rc < 0 ? c->rc : closed;
	}
	runtime_http_client_destroy(cl);
}

static int connect_to(const char *url, char **words)
{
	int deflate = *words && !strcmp(*words, "--deflate");
	struct client c = { url, words + deflate, deflate, 0 };
	struct runtime *rt;
	int rc = runtime_create(&rt, NULL);

	if (rc < 0)
		return rc;
	rc = runtime_spawn(rt, client_main, &c);
	if (rc == 0)
		rc = runtime_run(rt);
	runtime_destroy(rt);
	return rc < 0 ? rc : c.rc;
}

int main(int argc, char **argv)
{
	int rc;

	if (argc >= 3 && !strcmp(argv[1], "--connect"))
		rc = connect_to(argv[2], argv + 3);
	else if (argc <= 2 && (argc == 1 || argv[1][0] != '-'))
		rc = serve(argc == 2 ? (unsigned)atoi(argv[1]) : 7001);
	else {
		fprintf(stderr, "usage: %s [PORT] | --connect URL [--deflate] [WORD...]\n", argv[0]);
		return 2;
	}
	if (rc < 0)
		fprintf(stderr, "ws_echo: %s\n", strerror(-rc));
	return rc < 0;
}
