/* SPDX-License-Identifier: MIT */
/*
 * offload_dns.c - blocking work on the offload pool: name lookups, several
 * at once, each in its own fiber. getaddrinfo(3) blocks its thread (files,
 * DNS), so the runtime runs it on a pool thread (runtime_getaddrinfo) while
 * the fiber waits and the core keeps serving other fibers. Your own
 * blocking code goes there the same way, with runtime_offload(): here a
 * plain stdio scan of /etc/hosts.
 *
 * Shows: runtime_getaddrinfo and its -errno results, runtime_offload with
 * a result and a cleanup callback, a per-fiber deadline on offloaded work,
 * runtime_offload_stats.
 *
 *   ./offload_dns                          # localhost 127.0.0.1 ::1 (no network needed)
 *   ./offload_dns example.org localhost    # names of your own (DNS if not in /etc/hosts)
 *
 * Prints "NAME: ADDRESS..." per name, and what /etc/hosts says about it;
 * exits 0 if every name resolved.
 */
#include <runtime.h>

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define DEADLINE_NS (5ull * 1000 * 1000 * 1000)

static int failures;

/* Ordinary blocking code (fopen, fgets: file I/O that parks the thread),
 * meant for a pool thread: the first /etc/hosts line that mentions name,
 * as a malloc'ed string, or NULL. */
static void *hosts_line(void *arg)
{
	const char *name = arg;
	char line[512], words[512], *found = NULL;
	FILE *f = fopen("/etc/hosts", "re");

	if (!f)
		return NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "#\n")] = '\0';
		memcpy(words, line, sizeof(words)); /* strtok_r cuts what it scans */
		for (char *save, *w = strtok_r(words, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
			if (strcmp(w, name) == 0) {
				found = strdup(line); /* NULL if out of memory: "not listed" */
				break;
			}
	}
	fclose(f);
	return found;
}

/* Called instead of the caller when it gave up (deadline, cancel) on a
 * job that had already started: the result is ours to free, so nothing
 * leaks whoever gives up. With ran == 0 the function never ran. */
static void hosts_line_cleanup(void *arg, void *result, int ran)
{
	(void)arg; (void)ran;
	free(result);
}

static void lookup(void *arg)
{
	const char *name = arg;
	char out[1024];
	size_t len = (size_t)snprintf(out, sizeof(out), "%s:", name);

	/* One deadline bounds everything below: a lookup stuck on an
	 * unreachable DNS server returns -ETIMEDOUT here after 5 s (the pool
	 * thread finishes it in the background). */
	runtime_deadline_set(runtime_now() + DEADLINE_NS);

	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	int rc = runtime_getaddrinfo(name, NULL, &hints, &res);
	if (rc < 0) {
		/* getaddrinfo's EAI_* codes come back as -errno: -ENOENT is
		 * "no such name" (EAI_NONAME), -EAGAIN "no resolver reachable
		 * (no network?), try later", -ETIMEDOUT our deadline. */
		printf("%s: %s%s\n", name, strerror(-rc), rc == -ENOENT ? " (no such name)" : "");
		failures++; /* one core: fibers never run at the same time */
		return;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		char addr[NI_MAXHOST];
		/* NI_NUMERICHOST: formatting only, no lookup, never blocks. */
		if (getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, sizeof(addr), NULL, 0,
		                NI_NUMERICHOST) == 0 && len < sizeof(out))
			len += (size_t)snprintf(out + len, sizeof(out) - len, " %s", addr);
	}
	freeaddrinfo(res); /* runtime_getaddrinfo's result is getaddrinfo's */

	/* Any blocking function: fn(arg) runs on a pool thread, the fiber
	 * waits, and *result receives what fn returned. */
	void *line = NULL;
	rc = runtime_offload(hosts_line, (void *)name, &line, hosts_line_cleanup);
	if (rc == 0 && len < sizeof(out))
		snprintf(out + len, sizeof(out) - len, "\n  /etc/hosts: %s",
		         line ? (char *)line : "(not listed)");
	else if (rc < 0 && len < sizeof(out)) /* -ETIMEDOUT, -ECANCELED, -EAGAIN... */
		snprintf(out + len, sizeof(out) - len, "\n  /etc/hosts: %s", strerror(-rc));
	free(line);
	printf("%s\n", out); /* one printf per name: lines do not interleave */
}

int main(int argc, char **argv)
{
	static char *defaults[] = { "localhost", "127.0.0.1", "::1" };
	char **names = argc > 1 ? argv + 1 : defaults;
	int n = argc > 1 ? argc - 1 : 3;

	struct runtime *rt;
	int rc = runtime_create(&rt, NULL); /* one core; the pool has 8 threads */
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %s\n", strerror(-rc));
		return 1;
	}
	/* One fiber per name: their lookups run at the same time, each on a
	 * pool thread, and the answers come back in whatever order they end. */
	for (int i = 0; rc == 0 && i < n; i++)
		rc = runtime_spawn(rt, lookup, names[i]);
	if (rc == 0)
		rc = runtime_run(rt); /* also stops the pool's threads */
	if (rc < 0)
		fprintf(stderr, "runtime: %s\n", strerror(-rc));

	struct runtime_offload_stats st;
	runtime_offload_stats(rt, &st);
	printf("offload pool: %llu jobs done, at most %u threads at once\n",
	       (unsigned long long)st.completed, st.largest);
	runtime_destroy(rt);
	return rc == 0 && failures == 0 ? 0 : 1;
}
