/* SPDX-License-Identifier: MIT */
/*
 * cli.h - what the two demo servers' start-up shares: reading a number
 * or an engine from the command line, room for many connections, saying
 * which engine runs and why a runtime could not be made, and a TLS
 * context from --tls-cert and --tls-key.
 */
#ifndef DEMOS_CLI_H
#define DEMOS_CLI_H

#include <errno.h>
#include <runtime.h>
#include <runtime_tls.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* A decimal number from 0 to max and nothing else ("-1", "2x" and "" are
 * not). */
static inline bool demo_number(const char *s, uint64_t max, uint64_t *out)
{
	char *end;

	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v > max || *s == '-')
		return false;
	*out = v;
	return true;
}

/* --engine: auto, io_uring or epoll. */
static inline bool demo_engine(const char *s, enum runtime_engine *out)
{
	static const enum runtime_engine all[] = { RUNTIME_ENGINE_AUTO, RUNTIME_ENGINE_IO_URING,
	                                           RUNTIME_ENGINE_EPOLL };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(s, runtime_engine_name(all[i]))) {
			*out = all[i];
			return true;
		}
	return false;
}

/* "engine io_uring", or "engine epoll (why)", for a start banner. */
static inline void demo_engine_line(char *out, size_t len, const struct runtime *rt)
{
	const char *why = runtime_engine_reason(rt);

	snprintf(out, len, "engine %s%s%s%s", runtime_engine_name(runtime_engine(rt)),
	         *why ? " (" : "", why, *why ? ")" : "");
}

/* runtime_create failed with rc: say why on stderr - when io_uring alone
 * was asked for (--engine, or RUNTIME_ENGINE) and refused, with the
 * sentence that names the cause and the remedy. */
static inline void demo_create_failed(const char *prog, int rc, const struct runtime_config *cfg)
{
	char why[512];
	bool refused = rc == -EPERM || rc == -ENOSYS || rc == -EOPNOTSUPP || rc == -ENOMEM;

	if (refused && runtime_io_uring_check(cfg, why, sizeof(why)) < 0)
		fprintf(stderr, "%s: cannot start: %s\n", prog, why);
	else
		fprintf(stderr, "%s: cannot start: runtime: %s\n", prog, strerror(-rc));
}

/* A server TLS context for --tls-cert FILE --tls-key FILE (both, or
 * neither: *out NULL) offering alpn. False, said on stderr, if they do
 * not make one. */
static inline bool demo_tls(const char *prog, const char *cert, const char *key,
                            const char *alpn, struct runtime_tls **out)
{
	struct runtime_tls_config cfg;
	char why[256];
	int rc;

	*out = NULL;
	if (!cert && !key)
		return true;
	if (!cert || !key) {
		fprintf(stderr, "%s: --tls-cert and --tls-key go together\n", prog);
		return false;
	}
	runtime_tls_config_init(&cfg);
	cfg.alpn = alpn;
	if ((rc = runtime_tls_create(out, &cfg)) < 0 ||
	    (rc = runtime_tls_add_cert(*out, cert, key, 0)) < 0) {
		runtime_tls_error_text(why, sizeof(why));
		fprintf(stderr, "%s: TLS: %s%s%s\n", prog, strerror(-rc), *why ? ": " : "", why);
		runtime_tls_destroy(*out);
		*out = NULL;
		return false;
	}
	return true;
}

/* What to add to a listen error's message: the likely cause of the one a
 * user meets most. */
static inline const char *demo_listen_hint(int rc)
{
	return rc == -EADDRINUSE ? " (another process listens on that port: a copy of this "
	                           "server still running?)" : "";
}

/* The soft fd limit up to the hard one: a connection is an fd. */
static inline void demo_raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

#endif
