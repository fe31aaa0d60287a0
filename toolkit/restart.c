/* SPDX-License-Identifier: MIT */
/*
 * restart.c - a restart that loses nothing, from the old process's side.
 * On the signal (SIGUSR2) or runtime_restart, core 0's restarter fiber:
 *
 *  1. writes every server's listening sockets into a new link
 *     (handover.c) and starts the successor (posix_spawn: the program
 *     on disk now, the arguments of this process, the link's end at the
 *     fd RUNTIME_HANDOVER_FD names, signals as at a fresh start);
 *  2. waits for its READY - every server of its has taken its sockets
 *     and accepts on them - for ready_timeout. A successor that exits
 *     first, or is not ready in time (it is killed then), is logged with
 *     the reason, and this process serves on as if nothing happened: it
 *     never stopped accepting;
 *  3. on READY, points the handover at the link and drains (grace): the
 *     servers stop accepting without shutting their sockets down, and
 *     idle connections move to the successor instead of closing
 *     (runtime_conn_handover), those in the middle of a request after it.
 *
 * A request made while one is under way is logged and dropped. The
 * process-wide state is one restarter (the signal handler finds it).
 */
#include "toolkit.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SECOND 1000000000ull
#define DRAIN_WAKE (1ull << 40) /* on the eventfd: the drain, not a request */

extern char **environ;

struct restarter {
	struct runtime *rt;
	char *path;                 /* the program, as found at enable */
	char **argv;                /* its arguments (one allocation) */
	char *args;
	uint64_t ready_timeout_ns, grace_ns;
	int signal;
	int wake;                   /* eventfd: a request, or the drain */
};

static struct restarter *_Atomic the;

void runtime_restart_config_init(struct runtime_restart_config *cfg)
{
	if (cfg)
		*cfg = (struct runtime_restart_config){ .ready_timeout_ns = 30 * SECOND,
		                                        .grace_ns = 30 * SECOND,
		                                        .signal = SIGUSR2 };
}

int runtime_restart(void)
{
	struct restarter *r = atomic_load(&the);
	uint64_t one = 1;

	if (!r)
		return -ENOTCONN;
	return write(r->wake, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
}

static void on_signal(int sig)
{
	int saved = errno;

	(void)sig;
	runtime_restart(); /* a write(2): async-signal-safe */
	errno = saved;
}

static void on_drain(void *arg)
{
	struct restarter *r = arg;
	uint64_t mark = DRAIN_WAKE;

	if (write(r->wake, &mark, sizeof(mark)) < 0) {
		/* full: the restarter has a wake-up to read already */
	}
}

/* ------------------------------------------------------- the successor */

/* This process's arguments (/proc/self/cmdline) into r->argv. */
static int own_argv(struct restarter *r)
{
	FILE *f = fopen("/proc/self/cmdline", "re");
	size_t cap = 4096, len = 0, n;

	if (!f)
		return -errno;
	r->args = malloc(cap + 1);
	while (r->args && (n = fread(r->args + len, 1, cap - len, f)) > 0)
		if ((len += n) == cap) {
			char *more = realloc(r->args, (cap *= 2) + 1);
			if (!more)
				break;
			r->args = more;
		}
	fclose(f);
	if (!r->args || len == cap)
		return -ENOMEM;
	r->args[len] = '\0';
	unsigned argc = 0;
	for (size_t i = 0; i < len; i++)
		argc += r->args[i] == '\0';
	if (!(r->argv = calloc(argc + 1, sizeof(char *))))
		return -ENOMEM;
	for (size_t i = 0, k = 0; i < len && k < argc; i += strlen(r->args + i) + 1)
		r->argv[k++] = r->args + i;
	return 0;
}

/* cfg's arguments, copied. */
static int given_argv(struct restarter *r, char *const *argv)
{
	size_t argc = 0, bytes = 0;

	while (argv[argc])
		bytes += strlen(argv[argc++]) + 1;
	r->argv = calloc(argc + 1, sizeof(char *));
	r->args = malloc(bytes ? bytes : 1);
	if (!r->argv || !r->args)
		return -ENOMEM;
	for (size_t i = 0, off = 0; i < argc; i++) {
		r->argv[i] = strcpy(r->args + off, argv[i]);
		off += strlen(argv[i]) + 1;
	}
	return 0;
}

/* The environment with RUNTIME_HANDOVER_FD=fd (and no older one). */
static char **successor_env(int fd, char *var, size_t size)
{
	size_t n = 0;

	while (environ[n])
		n++;
	char **env = calloc(n + 2, sizeof(char *));
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "RUNTIME_HANDOVER_FD=", 20) != 0)
			env[k++] = environ[i];
	snprintf(var, size, "RUNTIME_HANDOVER_FD=%d", fd);
	env[k] = var;
	return env;
}

/* Start the successor with the link's end fd (kept open across the exec:
 * a dup2 onto itself clears close-on-exec), its signals unblocked and at
 * their defaults. Returns its pid or -errno. */
static pid_t spawn_successor(const struct restarter *r, int fd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dflt;
	char var[48];
	char **env = successor_env(fd, var, sizeof(var));
	pid_t pid = -1;

	if (!env)
		return -ENOMEM;
	static const int reset[] = { SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM, SIGUSR1, SIGUSR2 };

	sigemptyset(&none);
	sigemptyset(&dflt);
	for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
		sigaddset(&dflt, reset[i]);
	if (r->signal)
		sigaddset(&dflt, r->signal);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, fd);
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dflt);
	int rc = posix_spawn(&pid, r->path, &fa, &at, r->argv, env);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	free(env);
	return rc ? -rc : pid;
}

/* Collect a successor that failed (within a second of its kill, if it
 * was killed), and say how it ended. */
static void reap(pid_t pid, const char *why)
{
	int status = 0;
	pid_t got = 0;

	for (int i = 0; i < 200 && (got = waitpid(pid, &status, WNOHANG)) == 0; i++)
		runtime_sleep(5 * 1000 * 1000);
	if (got == pid && WIFEXITED(status))
		fprintf(stderr, "runtime: restart: successor %d %s (exit status %d): "
		        "serving on\n", (int)pid, why, WEXITSTATUS(status));
	else if (got == pid && WIFSIGNALED(status))
		fprintf(stderr, "runtime: restart: successor %d %s (signal %d): serving on\n",
		        (int)pid, why, WTERMSIG(status));
	else
		fprintf(stderr, "runtime: restart: successor %d %s: serving on\n", (int)pid, why);
}

/* Wait for the successor's READY on link. 0, or the reason it failed
 * (logged). A successor that does not say READY is killed whatever else
 * it did - closed the link, sent something else, took too long - so
 * that it cannot go on accepting on the sockets beside this process. */
static int await_ready(const struct restarter *r, int link, pid_t pid)
{
	struct handover_msg m;
	unsigned n = 0;
	ssize_t got = runtime__handover_recv(link, &m, NULL, &n, (int64_t)r->ready_timeout_ns);

	if (got > 0 && m.kind == HANDOVER_READY)
		return 0;
	bool gone = got == 0 || got == -ECONNRESET; /* the link's end: it exited */
	kill(pid, SIGKILL); /* nothing if it has exited */
	reap(pid, gone ? "exited before it was ready" :
	          got == -ETIMEDOUT ? "was not ready in time, killed" :
	          got > 0 || got == -EPROTO ? "spoke no handover, killed" : "was stopped");
	return gone ? -ECHILD : got < 0 ? (int)got : -EPROTO;
}

/* ------------------------------------------------------------ a restart */

/* One restart: 0 once the successor is ready and this process drains;
 * else -errno, this process serving on. */
static int restart_once(struct restarter *r)
{
	int sv[2], rc;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	if ((rc = runtime__serve_offer(sv[0])) < 0) {
		fprintf(stderr, "runtime: restart: %s\n", rc == -ENOENT ?
		        "no server to hand over" : strerror(-rc));
	} else {
		pid_t pid = spawn_successor(r, sv[1]);
		close(sv[1]);
		sv[1] = -1;
		if (pid < 0)
			fprintf(stderr, "runtime: restart: cannot start %s: %s: serving on\n",
			        r->path, strerror(-(rc = pid)));
		else if ((rc = await_ready(r, sv[0], pid)) == 0)
			fprintf(stderr, "runtime: restart: successor %d ready: handing over\n",
			        (int)pid);
	}
	if (rc == 0) {
		runtime__handover_begin(sv[0]); /* open until this process ends */
		runtime_drain(r->rt, r->grace_ns);
		return 0;
	}
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return rc;
}

/* The requests that came (0 for none; the drain's wake-up is none). */
static uint64_t requests(struct restarter *r)
{
	uint64_t n = 0;

	return read(r->wake, &n, sizeof(n)) == sizeof(n) ? n % DRAIN_WAKE : 0;
}

/* Core 0's: a restart per request until one succeeds or the drain. */
static void restarter(void *arg)
{
	struct restarter *r = arg;

	while (runtime_poll(r->wake, POLLIN, -1) > 0 && !runtime_draining(r->rt)) {
		uint64_t asked = requests(r);
		if (asked > 1)
			fprintf(stderr, "runtime: restart: %llu requests at once: one restart\n",
			        (unsigned long long)asked);
		int rc = asked ? restart_once(r) : -EAGAIN;
		if ((asked = requests(r)) > 0)
			fprintf(stderr, "runtime: restart: %llu requests during the restart "
			        "ignored\n", (unsigned long long)asked);
		if (rc == 0)
			break;
	}
}

/* --------------------------------------------------------------- enable */

static void restarter_free(struct restarter *r)
{
	if (r->wake >= 0)
		close(r->wake);
	free(r->path);
	free(r->argv);
	free(r->args);
	free(r);
}

static int restarter_fill(struct restarter *r, const struct runtime_restart_config *cfg)
{
	char exe[PATH_MAX];
	ssize_t len;

	r->ready_timeout_ns = cfg->ready_timeout_ns ? cfg->ready_timeout_ns : 30 * SECOND;
	r->grace_ns = cfg->grace_ns ? cfg->grace_ns : 30 * SECOND;
	r->signal = cfg->signal;
	if (cfg->path)
		r->path = strdup(cfg->path);
	else if ((len = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) > 0)
		r->path = strndup(exe, (size_t)len);
	if (!r->path)
		return cfg->path ? -ENOMEM : -ENOENT;
	if ((r->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return -errno;
	return cfg->argv ? given_argv(r, cfg->argv) : own_argv(r);
}

/* The signal starts a restart: a handler (one write), not a signalfd, so
 * that no thread's mask changes. */
static int catch_signal(int sig)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };

	if (sig == 0)
		return 0;
	sigemptyset(&sa.sa_mask);
	return sigaction(sig, &sa, NULL) < 0 ? -errno : 0;
}

int runtime_restart_enable(struct runtime *rt, const struct runtime_restart_config *cfg)
{
	struct runtime_restart_config dflt;
	struct restarter *r;
	int rc;

	runtime_restart_config_init(&dflt);
	if (!cfg)
		cfg = &dflt;
	if (!rt || cfg->signal < 0 || cfg->signal >= NSIG)
		return -EINVAL;
	if (atomic_load(&the))
		return -EBUSY;
	if (!(r = calloc(1, sizeof(*r))))
		return -ENOMEM;
	r->rt = rt;
	r->wake = -1;
	if ((rc = restarter_fill(r, cfg)) < 0 || (rc = runtime_on_drain(rt, on_drain, r)) < 0) {
		restarter_free(r);
		return rc;
	}
	/* From here the drain hook holds r: it stays, even on a failure. */
	if ((rc = runtime_spawn_on(rt, 0, restarter, r)) < 0)
		return rc;
	atomic_store(&the, r);
	return catch_signal(r->signal);
}
