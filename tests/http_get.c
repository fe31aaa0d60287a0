/* SPDX-License-Identifier: MIT */
/*
 * http_get.c - GETs with the runtime's HTTP client, for
 * tests/http_client_peers.sh: each URL N times in a row on one client,
 * every body read to its end, then what the client's counters say.
 *
 *   http_get [-n N] [--cacert FILE | --insecure] [--h2 | --h2c] URL...
 *
 * --h2 offers h2 before http/1.1 by ALPN (the default offers http/1.1
 * alone); --h2c speaks HTTP/2 to http:// URLs by prior knowledge.
 * For each URL one line, when every GET of it answered the same:
 *   GET URL: N x STATUS, body BYTES bytes, FRAMING
 * (FRAMING: length, chunked, close, unknown - HTTP/2's without a length -
 * or none), and at the end
 *   client: connects C, reused R, retried T, requests Q, h2 H
 * (H of the Q went over HTTP/2)
 * Exit 0; 1 if a GET failed or the answers differed (said on stderr),
 * 2 for a usage error.
 */
#include <runtime_http.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMEOUT_NS (10 * 1000 * 1000 * 1000ull) /* per GET */

static struct {
	unsigned n;
	const char *cacert;
	int insecure, h2, h2c;
	char **urls;
	int nurls;
	int failed;
} opt = { .n = 1 };

struct answer {
	int status;
	size_t bytes;
	const char *framing;
};

static const char *framing(const struct runtime_http_result *res, bool h2)
{
	const struct runtime_http_slice *te = runtime_http_result_header(res, "Transfer-Encoding");
	int64_t len = runtime_http_result_length(res);

	if (te)
		return "chunked";
	if (runtime_http_result_header(res, "Content-Length"))
		return "length";
	int status = runtime_http_result_status(res);
	if (len < 0 && status != 304 && h2)
		return "unknown"; /* HTTP/2: the stream's end ends it */
	return len < 0 && status != 304 ? "close" : "none"; /* GETs: 204's length is 0 */
}

/* One GET, its body read to the end. 0 or -errno (said on stderr). */
static int get_once(struct runtime_http_client *cl, const char *url, struct answer *a)
{
	struct runtime_http_client_request req = { .url = url,
		                                    .deadline_ns = runtime_now() + TIMEOUT_NS };
	struct runtime_http_result *res;
	char buf[16384];
	ssize_t n;
	int rc = runtime_http_request(cl, &req, &res);

	if (rc < 0) {
		fprintf(stderr, "http_get: %s: %s\n", url, strerror(-rc));
		return rc;
	}
	*a = (struct answer){ .status = runtime_http_result_status(res), .framing = framing(res, runtime_http_result_version(res) == 20) };
	while ((n = runtime_http_result_read(res, buf, sizeof(buf))) > 0)
		a->bytes += (size_t)n;
	runtime_http_result_close(res);
	if (n < 0)
		fprintf(stderr, "http_get: %s: body: %s\n", url, strerror((int)-n));
	return (int)n;
}

static void get_url(struct runtime_http_client *cl, const char *url)
{
	struct answer first = { 0 }, a;

	for (unsigned i = 0; i < opt.n; i++) {
		if (get_once(cl, url, &a) < 0) {
			opt.failed = 1;
			return;
		}
		if (i == 0) {
			first = a;
		} else if (a.status != first.status || a.bytes != first.bytes) {
			fprintf(stderr, "http_get: %s: answer %u differs\n", url, i + 1);
			opt.failed = 1;
			return;
		}
	}
	printf("GET %s: %u x %d, body %zu bytes, %s\n", url, opt.n, first.status, first.bytes,
	       first.framing);
}

static struct runtime_tls *client_tls(void)
{
	struct runtime_tls_config cfg;
	struct runtime_tls *tls;

	if (!opt.cacert && !opt.insecure)
		return NULL;
	runtime_tls_config_init(&cfg);
	cfg.side = RUNTIME_TLS_CLIENT;
	cfg.alpn = opt.h2 ? "h2,http/1.1" : "http/1.1";
	cfg.ca_file = opt.cacert;
	if (runtime_tls_create(&tls, &cfg) < 0)
		return NULL;
	if (opt.insecure)
		runtime_tls_insecure_skip_verify(tls);
	return tls;
}

static void run(void *arg)
{
	struct runtime_http_client_config cfg;
	struct runtime_http_client *cl;
	struct runtime_http_client_stats st;

	runtime_http_client_config_init(&cfg);
	cfg.tls = arg;
	cfg.h2c = opt.h2c;
	if (runtime_http_client_create(&cl, &cfg) < 0) {
		opt.failed = 1;
		return;
	}
	for (int i = 0; i < opt.nurls; i++)
		get_url(cl, opt.urls[i]);
	runtime_http_client_stats(cl, &st);
	printf("client: connects %llu, reused %llu, retried %llu, requests %llu, h2 %llu\n",
	       (unsigned long long)st.connects, (unsigned long long)st.reused,
	       (unsigned long long)st.retried, (unsigned long long)st.requests,
	       (unsigned long long)st.h2_requests);
	runtime_http_client_destroy(cl); /* in the fiber: closes the pooled connections */
}

static int usage(void)
{
	fprintf(stderr, "usage: http_get [-n N] [--cacert FILE | --insecure] [--h2 | --h2c] URL...\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cacert", 1, NULL, 'c' }, { "insecure", 0, NULL, 'k' }, { "h2", 0, NULL, '2' },
		{ "h2c", 0, NULL, 'p' }, { NULL, 0, NULL, 0 },
	};
	struct runtime_tls *tls;
	struct runtime *rt;
	int c;

	while ((c = getopt_long(argc, argv, "n:", opts, NULL)) != -1) {
		if (c == 'n' && atoi(optarg) > 0)
			opt.n = (unsigned)atoi(optarg);
		else if (c == 'c')
			opt.cacert = optarg;
		else if (c == 'k')
			opt.insecure = 1;
		else if (c == '2')
			opt.h2 = 1;
		else if (c == 'p')
			opt.h2c = 1;
		else
			return usage();
	}
	if (optind == argc)
		return usage();
	opt.urls = argv + optind;
	opt.nurls = argc - optind;
	tls = client_tls();
	if ((opt.cacert || opt.insecure) && !tls) {
		fprintf(stderr, "http_get: no TLS context\n");
		return 1;
	}
	if (runtime_create(&rt, NULL) < 0 || runtime_spawn(rt, run, tls) < 0)
		return 1;
	runtime_run(rt);
	runtime_destroy(rt);
	runtime_tls_destroy(tls);
	return opt.failed;
}
