/* SPDX-License-Identifier: MIT */
/*
 * http-server - the runtime's HTTP/1.1 demo: served on every core by
 * runtime_serve (a SO_REUSEPORT socket and an acceptor per core, a fiber
 * per connection) through libruntime-http, and a graceful stop
 * (runtime_drain_on_signals): on SIGINT or SIGTERM it stops accepting,
 * closes the connections waiting for a request, lets the requests in
 * flight finish (up to a grace period), and exits 0. A second signal
 * stops at once. With --tls-cert and --tls-key it serves HTTPS (ALPN
 * http/1.1; runtime_serve does each handshake); large files then go
 * through user space, not splice.
 *
 * Under systemd (examples/runtime-http.service and .socket) it serves on
 * the socket the manager passes (socket activation; --listen-name picks
 * it by name), says READY=1 once every core listens, STOPPING=1 at the
 * drain, and pings the watchdog (WatchdogSec=) while every core turns:
 * the library does each, the demo only asks for the socket by name.
 *
 * On SIGUSR2 it restarts without loss (runtime_restart_enable): its
 * successor - this program as it is on disk now, or --restart-with's -
 * takes its listening sockets and idle keep-alive connections, and it
 * drains once the successor serves.
 */
#define _GNU_SOURCE
#include "server.h"
#include "../cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MS 1000000ull

static struct server srv;
static bool activated; /* systemd passed sockets (runtime_listen_fds) */

/* -------------------------------------------------------------- startup */

static void usage(FILE *to)
{
	fprintf(to,
	        "usage: http-server [--port P] [--host ADDR] [--cores N] [--engine E] [--root DIR]\n"
	        "                   [--file-cache-ms MS]\n"
	        "                   [--limit N] [--max-conns N] [--body-max BYTES]\n"
	        "                   [--header-timeout MS] [--idle-timeout MS] [--grace MS]\n"
	        "                   [--release-after MS|never]\n"
	        "                   [--access-log[=json]] [--fixed-files] [--stall-ms MS] [--help]\n"
	        "                   [--tls-cert FILE --tls-key FILE]  (HTTPS: chain and key, PEM)\n"
	        "                   [--listen-name NAME]  (systemd's socket of that name)\n"
	        "                   [--restart-with PROGRAM] [--ready-timeout MS]  (SIGUSR2)\n"
	        "Measuring aids: --plain-recv, --plain-accept, --no-batch, --file-copy,\n"
	        "--no-metrics turn off the receive stream, the listener, response batching,\n"
	        "splice, the request-duration histogram and method counts.\n"
	        "Routes: /plaintext, POST /echo, /delay?ms=N, /limited, /stats, /metrics\n"
	        "(Prometheus), /healthz (503 once draining), files under\n"
	        "--root. Defaults: port 8080, host 0.0.0.0, 1 core, limit 4, max-conns\n"
	        "10000, body-max 1048576, header-timeout 10000, idle-timeout 60000, grace 5000,\n"
	        "release-after 10 (a connection quiet this long waits with no fiber stack),\n"
	        "file-cache-ms 1000 (a file opened this recently is served from its open fd;\n"
	        "0: opened for each request), ready-timeout 30000, stall-ms 0 (none; else a fiber that runs this long\n"
	        "without yielding is reported on stderr: runtime_config.stall_ms), "
	        "engine auto (io_uring if the kernel allows it, else epoll; or io_uring, epoll).\n");
}

/* --access-log[=common|json]: the library's line per response, stdout. */
static bool access_log_format(const char *arg, int *format)
{
	if (!arg || !strcmp(arg, "common"))
		*format = RUNTIME_HTTP_LOG_COMMON;
	else if (!strcmp(arg, "json"))
		*format = RUNTIME_HTTP_LOG_JSON;
	else
		return false;
	return true;
}

/* --release-after: milliseconds, or "never" (UINT64_MAX). */
static bool release_after(const char *arg, uint64_t *ms)
{
	if (strcmp(arg, "never") != 0)
		return demo_number(arg, 1u << 30, ms);
	*ms = UINT64_MAX;
	return true;
}

/* Options into srv.opt. Returns -1 to go on, else an exit status. */
static int parse_options(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", 1, NULL, 'p' }, { "host", 1, NULL, 'h' }, { "cores", 1, NULL, 'c' },
		{ "engine", 1, NULL, 'e' },
		{ "root", 1, NULL, 'r' }, { "limit", 1, NULL, 'l' }, { "max-conns", 1, NULL, 'm' },
		{ "body-max", 1, NULL, 'b' }, { "header-timeout", 1, NULL, 't' },
		{ "idle-timeout", 1, NULL, 'i' }, { "grace", 1, NULL, 'g' },
		{ "release-after", 1, NULL, 'R' },
		{ "access-log", 2, NULL, 'a' }, { "fixed-files", 0, NULL, 'f' },
		{ "plain-recv", 0, NULL, 'P' }, { "plain-accept", 0, NULL, 'A' },
		{ "no-batch", 0, NULL, 'B' }, { "file-copy", 0, NULL, 'C' },
		{ "no-metrics", 0, NULL, 'M' },
		{ "tls-cert", 1, NULL, 'T' }, { "tls-key", 1, NULL, 'K' },
		{ "listen-name", 1, NULL, 'N' },
		{ "restart-with", 1, NULL, 'W' }, { "ready-timeout", 1, NULL, 'Y' },
		{ "stall-ms", 1, NULL, 'S' }, { "file-cache-ms", 1, NULL, 'F' },
		{ "help", 0, NULL, 'H' }, { NULL, 0, NULL, 0 },
	};
	struct options *o = &srv.opt;
	uint64_t v = 0;
	int c;

	*o = (struct options){ .host = "0.0.0.0", .port = 8080, .cores = 1, .limit = 4,
		.max_conns = 10000, .body_max = 1 << 20, .header_timeout_ms = 10000,
		.idle_timeout_ms = 60000, .grace_ms = 5000, .release_after_ms = 10,
		.ready_timeout_ms = 30000, .file_cache_ms = 1000 };
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		bool ok = true;
		switch (c) {
		case 'p': ok = demo_number(optarg, 65535, &v); o->port = (unsigned)v; break;
		case 'h': o->host = optarg; break;
		case 'c': ok = demo_number(optarg, RUNTIME_MAX_CORES, &v); o->cores = (unsigned)v; break;
		case 'e': ok = demo_engine(optarg, &o->engine); break;
		case 'r': o->root = optarg; break;
		case 'l': ok = demo_number(optarg, 1u << 20, &v) && v; o->limit = (unsigned)v; break;
		case 'm': ok = demo_number(optarg, 1u << 24, &v) && v; o->max_conns = (unsigned)v; break;
		case 'b': ok = demo_number(optarg, 1ull << 32, &o->body_max) && o->body_max; break;
		case 't': ok = demo_number(optarg, 1u << 30, &o->header_timeout_ms) &&
		                 o->header_timeout_ms; break;
		case 'i': ok = demo_number(optarg, 1u << 30, &o->idle_timeout_ms); break;
		case 'g': ok = demo_number(optarg, 1u << 30, &o->grace_ms); break;
		case 'R': ok = release_after(optarg, &o->release_after_ms); break;
		case 'a': ok = access_log_format(optarg, &o->access_log); break;
		case 'f': o->fixed_files = true; break;
		case 'P': o->plain_recv = true; break;
		case 'A': o->plain_accept = true; break;
		case 'B': o->no_batch = true; break;
		case 'C': o->file_copy = true; break;
		case 'M': o->no_metrics = true; break;
		case 'T': o->tls_cert = optarg; break;
		case 'K': o->tls_key = optarg; break;
		case 'N': o->listen_name = optarg; break;
		case 'W': o->restart_with = optarg; break;
		case 'Y': ok = demo_number(optarg, 1u << 30, &o->ready_timeout_ms) &&
		                 o->ready_timeout_ms; break;
		case 'S': ok = demo_number(optarg, 1u << 30, &v); o->stall_ms = (unsigned)v; break;
		case 'F': ok = demo_number(optarg, 1u << 30, &o->file_cache_ms); break;
		case 'H': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (!ok) {
			const struct option *bad = opts;
			while (bad->val != c)
				bad++;
			fprintf(stderr, "http-server: bad value for --%s: '%s'\n", bad->name, optarg);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	return -1;
}

static int serve(void)
{
	struct runtime_http_server_config cfg;

	server_http_config(&srv, &cfg);
	int rc = runtime_http_serve(srv.rt, &cfg, &srv.http);
	if (rc == 0)
		srv.opt.port = runtime_http_server_port(srv.http);
	if (rc == 0 && (rc = runtime_metrics_create(srv.rt, 0, &srv.metrics)) == 0 &&
	    (rc = runtime_metrics_add_runtime(srv.metrics)) == 0)
		rc = runtime_http_metrics_add_server(srv.metrics, srv.http, "demo");
	return rc;
}

static int start(void)
{
	struct runtime_config cfg;
	int rc;

	if (srv.opt.root && (srv.root_fd = open(srv.opt.root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	file_cache_set_validity(srv.opt.file_cache_ms * MS);
	if (!demo_tls("http-server", srv.opt.tls_cert, srv.opt.tls_key, "http/1.1", &srv.tls))
		return 1;
	runtime_config_init(&cfg);
	cfg.cores = srv.opt.cores;
	cfg.fixed_files = srv.opt.fixed_files;
	cfg.engine = srv.opt.engine;
	if (srv.opt.stall_ms)
		cfg.stall_ms = srv.opt.stall_ms;
	if ((rc = runtime_create(&srv.rt, &cfg)) < 0) {
		demo_create_failed("http-server", rc, &cfg);
		return 1;
	}
	if ((rc = runtime_listen_fds()) < 0) /* bad LISTEN_* values: said why */
		return 1;
	activated = rc > 0;
	struct runtime_restart_config restart;
	runtime_restart_config_init(&restart);
	restart.path = srv.opt.restart_with;
	restart.ready_timeout_ns = srv.opt.ready_timeout_ms * MS;
	restart.grace_ns = srv.opt.grace_ms * MS;
	if ((rc = runtime_drain_on_signals(srv.rt, srv.opt.grace_ms * MS)) < 0 ||
	    (rc = runtime_restart_enable(srv.rt, &restart)) < 0 ||
	    (rc = runtime_sem_create(&srv.backend, srv.opt.limit, 0)) < 0)
		return rc;
	return serve();
}

int main(int argc, char **argv)
{
	int rc = parse_options(argc, argv);

	if (rc >= 0)
		return rc;
	demo_raise_fd_limit(); /* room for --max-conns connections */
	srv.root_fd = -1;
	if ((rc = start()) != 0) {
		if (rc < 0) /* else start said why */
			fprintf(stderr, "http-server: cannot start on %s:%u: %s%s\n", srv.opt.host,
			        srv.opt.port, strerror(-rc), demo_listen_hint(rc));
		return 1;
	}
	char engine[600];
	demo_engine_line(engine, sizeof(engine), srv.rt);
	printf("http-server: listening on %s:%u%s%s, %u core%s, root %s, %s\n", srv.opt.host,
	       srv.opt.port, srv.tls ? " (HTTPS)" : "", activated ? " (socket activation)" : "", srv.opt.cores, srv.opt.cores == 1 ? "" : "s",
	       srv.opt.root ? srv.opt.root : "(none)", engine);
	fflush(stdout);
	char status[64]; /* systemctl status shows it; READY=1 comes from the server */
	snprintf(status, sizeof(status), "STATUS=serving on port %u, %u core%s", srv.opt.port,
	         srv.opt.cores, srv.opt.cores == 1 ? "" : "s");
	runtime_notify(status);
	rc = runtime_run(srv.rt);
	struct runtime_http_server_stats st;
	runtime_http_server_stats(srv.http, &st);
	uint64_t requests = st.requests;
	runtime_metrics_destroy(srv.metrics);
	runtime_http_server_destroy(srv.http);
	runtime_destroy(srv.rt);
	runtime_tls_destroy(srv.tls);
	fprintf(stderr, "http-server: stopped after %llu requests\n", (unsigned long long)requests);
	if (rc < 0) {
		fprintf(stderr, "http-server: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
