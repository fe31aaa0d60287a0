/* SPDX-License-Identifier: MIT */
/*
 * cli.h - what the two demo servers' start-up shares: reading a number
 * from the command line, and room for many connections.
 */
#ifndef DEMOS_CLI_H
#define DEMOS_CLI_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
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
