/* SPDX-License-Identifier: MIT */
/*
 * http_proxy.c - libruntime-http's reverse proxy alone, for make
 * bench-proxy: every request on to one upstream through a client whose
 * pools hold 256 idle connections per core (as nginx's "keepalive 256"),
 * no access log, the default forwarding fields.
 *
 *   http_proxy --port P --upstream URL [--cores N]
 *
 * It prints "http_proxy: listening on port P" and exits 0 on SIGTERM.
 */
#include <runtime_http.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", 1, NULL, 'p' }, { "upstream", 1, NULL, 'u' }, { "cores", 1, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	struct runtime_http_server_config sc;
	struct runtime_http_client_config cc;
	struct runtime_http_proxy_config pc;
	struct runtime_http_server *srv = NULL;
	struct runtime_http_client *cl = NULL;
	struct runtime_http_proxy *px = NULL;
	struct runtime_config cfg;
	struct runtime *rt = NULL;
	const char *upstream = NULL;
	unsigned port = 0, cores = 1;
	int c, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'p' || c == 'c')
			*(c == 'p' ? &port : &cores) = (unsigned)strtoul(optarg, NULL, 10);
		else if (c == 'u')
			upstream = optarg;
		else
			return 2;
	}
	if (!upstream || port > 65535) {
		fprintf(stderr, "usage: %s --port P --upstream URL [--cores N]\n", argv[0]);
		return 2;
	}
	runtime_config_init(&cfg);
	cfg.cores = cores;
	runtime_http_client_config_init(&cc);
	cc.max_per_origin = 256;
	runtime_http_proxy_config_init(&pc);
	pc.upstream = upstream;
	runtime_http_server_config_init(&sc);
	sc.serve.host = "127.0.0.1";
	sc.serve.port = (uint16_t)port;
	sc.handler = runtime_http_proxy_handler;
	if ((rc = runtime_create(&rt, &cfg)) < 0 || (rc = runtime_http_client_create(&cl, &cc)) < 0 ||
	    (pc.client = cl, rc = runtime_http_proxy_create(&px, &pc)) < 0 ||
	    (sc.arg = px, rc = runtime_http_serve(rt, &sc, &srv)) < 0 ||
	    (rc = runtime_shutdown_on_signals(rt)) < 0) {
		fprintf(stderr, "http_proxy: %s\n", strerror(-rc));
		return 1;
	}
	printf("http_proxy: listening on port %u\n", runtime_http_server_port(srv));
	fflush(stdout);
	rc = runtime_run(rt);
	runtime_http_server_destroy(srv);
	runtime_http_proxy_destroy(px);
	runtime_destroy(rt);
	/* The client's pooled connections went with the runtime's end: its
	 * memory is the process's to give back. */
	return rc < 0;
}
