/* SPDX-License-Identifier: MIT */
/*
 * choose.c - which engine a runtime runs (engine.h): io_uring wherever the
 * kernel allows it, else epoll, unless runtime_config.engine or
 * RUNTIME_ENGINE in the environment says otherwise; and, when io_uring is
 * refused, a sentence that names the real cause and the remedy. The
 * cause is told apart from what the kernel shows of itself: the sysctl
 * kernel.io_uring_disabled, and the Seccomp line of /proc/self/status (a
 * seccomp filter answers EPERM as Docker's default profile does, or
 * ENOSYS as others do).
 */
#include "../core.h"
#include "engine.h"

#include <stdio.h>
#include <string.h>

static const char *const io_names[IO_KINDS] = {
	[IO_READ] = "read",       [IO_WRITE] = "write",     [IO_READV] = "readv",
	[IO_WRITEV] = "writev",   [IO_RECV] = "recv",       [IO_SEND] = "send",
	[IO_RECVMSG] = "recvmsg", [IO_SENDMSG] = "sendmsg", [IO_ACCEPT] = "accept",
	[IO_CONNECT] = "connect", [IO_OPENAT] = "openat",   [IO_OPENAT2] = "openat2",
	[IO_STATX] = "statx",     [IO_SPLICE] = "splice",   [IO_FSYNC] = "fsync",
	[IO_SHUTDOWN] = "shutdown", [IO_POLL] = "poll",     [IO_CLOSE] = "close",
};

const char *runtime__io_wait_name(const struct io_wait *w)
{
	return w->kind < IO_KINDS ? io_names[w->kind] : "op";
}

/* The first number in a /proc file after prefix (prefix NULL: at its
 * start), or -1. */
static long proc_number(const char *path, const char *prefix)
{
	FILE *f = fopen(path, "re");
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		size_t n = prefix ? strlen(prefix) : 0;
		if (!prefix || strncmp(line, prefix, n) == 0) {
			if (sscanf(line + n, "%ld", &v) != 1)
				v = -1;
			break;
		}
	}
	fclose(f);
	return v;
}

static bool under_seccomp_filter(void)
{
	return proc_number("/proc/self/status", "Seccomp:") == 2; /* SECCOMP_MODE_FILTER */
}

#define OR_EPOLL "or let the runtime use epoll (runtime_config.engine " \
	"RUNTIME_ENGINE_AUTO or _EPOLL, or RUNTIME_ENGINE=epoll)"

/* Why io_uring_setup answered EPERM. */
static void explain_eperm(char *why, size_t len)
{
	long disabled = proc_number("/proc/sys/kernel/io_uring_disabled", NULL);

	if (disabled == 2)
		snprintf(why, len, "io_uring is disabled by the sysctl kernel.io_uring_disabled=2 "
		         "(EPERM): set it to 0, " OR_EPOLL);
	else if (disabled == 1)
		snprintf(why, len, "io_uring is restricted to the group kernel.io_uring_group "
		         "(kernel.io_uring_disabled=1, EPERM): run as a member of that group, "
		         "or set the sysctl to 0, " OR_EPOLL);
	else if (under_seccomp_filter())
		snprintf(why, len, "io_uring is blocked by a seccomp filter (EPERM), as in "
		         "Docker's and containerd's default profiles: run with "
		         "--security-opt seccomp=PROFILE allowing io_uring_setup, "
		         "io_uring_enter and io_uring_register, " OR_EPOLL);
	else
		snprintf(why, len, "io_uring_setup was refused (EPERM; no seccomp filter and no "
		         "kernel.io_uring_disabled here: a security module?): " OR_EPOLL);
}

/* A sentence for a failed io_uring probe (rc < 0). */
static void explain(int rc, char *why, size_t len)
{
	switch (rc) {
	case -EPERM:
		explain_eperm(why, len);
		break;
	case -ENOSYS:
		if (under_seccomp_filter())
			snprintf(why, len, "io_uring is hidden by a seccomp filter (ENOSYS): allow "
			         "io_uring_setup, io_uring_enter and io_uring_register in its "
			         "profile, " OR_EPOLL);
		else if (proc_number("/proc/sys/kernel/io_uring_disabled", NULL) >= 0)
			/* the sysctl exists only in a kernel built with io_uring */
			snprintf(why, len, "io_uring_setup answers ENOSYS though the kernel has "
			         "io_uring (kernel.io_uring_disabled is there): an emulator "
			         "(qemu-user has none) or a sandbox hides it; run outside it, "
			         OR_EPOLL);
		else
			snprintf(why, len, "this kernel has no io_uring (ENOSYS: built without "
			         "CONFIG_IO_URING, or an emulator such as qemu-user): run a "
			         "kernel with it, " OR_EPOLL);
		break;
	case -EOPNOTSUPP:
		snprintf(why, len, "this kernel's io_uring lacks what the runtime needs "
		         "(IORING_FEAT_NODROP and the opcodes of Linux 5.19, EOPNOTSUPP): "
		         "upgrade the kernel, " OR_EPOLL);
		break;
	case -ENOMEM:
		snprintf(why, len, "io_uring rings could not be set up (ENOMEM): on kernels "
		         "before 5.12 they count against RLIMIT_MEMLOCK (raise ulimit -l, or "
		         "lower runtime_config.ring_entries), " OR_EPOLL);
		break;
	default:
		snprintf(why, len, "io_uring could not be set up (%s), " OR_EPOLL,
		         runtime_error_name(rc));
		break;
	}
}

int runtime_io_uring_check(const struct runtime_config *cfg, char *why, size_t len)
{
	struct runtime_config defaults;

	if (!cfg) {
		runtime_config_init(&defaults);
		cfg = &defaults;
	}
	int rc = runtime__uring_probe(cfg);
	if (rc >= 0)
		rc = 0;
	if (why && len)
		rc < 0 ? explain(rc, why, len) : (void)snprintf(why, len, "io_uring is available");
	return rc;
}

/* RUNTIME_ENGINE, if set: the engine it names, or -EINVAL. */
static int engine_from_env(int current)
{
	const char *env = getenv("RUNTIME_ENGINE");

	if (!env || !*env)
		return current;
	if (!strcmp(env, "auto"))
		return RUNTIME_ENGINE_AUTO;
	if (!strcmp(env, "io_uring") || !strcmp(env, "uring"))
		return RUNTIME_ENGINE_IO_URING;
	if (!strcmp(env, "epoll"))
		return RUNTIME_ENGINE_EPOLL;
	return runtime__misuse(-EINVAL, "runtime_create", "RUNTIME_ENGINE must be auto, "
	                       "io_uring or epoll");
}

int runtime__engine_choose(struct runtime *rt)
{
	int choice = engine_from_env((int)rt->cfg.engine);

	if (choice < 0)
		return choice;
	if (choice == RUNTIME_ENGINE_EPOLL) {
		rt->eng = &runtime__engine_epoll;
		snprintf(rt->engine_reason, sizeof(rt->engine_reason), "asked for by %s",
		         getenv("RUNTIME_ENGINE") && *getenv("RUNTIME_ENGINE")
		                 ? "RUNTIME_ENGINE=epoll" : "runtime_config.engine");
		return 0;
	}
	int rc = runtime__uring_probe(&rt->cfg);
	if (rc >= 0) {
		rt->eng = &runtime__engine_uring;
		rt->setup_flags = (unsigned)rc;
		rt->engine_reason[0] = '\0';
		return 0;
	}
	if (choice == RUNTIME_ENGINE_IO_URING)
		return rc; /* runtime_io_uring_check says why */
	rt->eng = &runtime__engine_epoll;
	explain(rc, rt->engine_reason, sizeof(rt->engine_reason));
	return 0;
}

enum runtime_engine runtime_engine(const struct runtime *rt)
{
	return rt ? (enum runtime_engine)rt->eng->id : RUNTIME_ENGINE_AUTO;
}

const char *runtime_engine_name(enum runtime_engine engine)
{
	switch (engine) {
	case RUNTIME_ENGINE_IO_URING: return runtime__engine_uring.name;
	case RUNTIME_ENGINE_EPOLL: return runtime__engine_epoll.name;
	case RUNTIME_ENGINE_AUTO: return "auto";
	}
	return "unknown";
}

const char *runtime_engine_reason(const struct runtime *rt)
{
	return rt ? rt->engine_reason : "";
}
