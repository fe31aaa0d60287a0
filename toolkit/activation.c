/* SPDX-License-Identifier: MIT */
/*
 * activation.c - systemd's socket activation (sd_listen_fds(3)), written
 * to the protocol as notify.c is, and for the same reason: no libsystemd
 * for a dozen lines. The manager passes listening sockets at fds 3 ..
 * 3+LISTEN_FDS-1 to the process LISTEN_PID names, with their names
 * (FileDescriptorName=, else the socket unit's) in LISTEN_FDNAMES, ':'
 * separated.
 *
 * The first call that finds LISTEN_PID takes the sockets into a
 * process-wide table and unsets the three variables (as
 * sd_listen_fds(1) does), so that a child does not take them for its
 * own; a later call finding them again (a test) replaces the table. Each
 * fd is checked - open (-EBADF), a listening stream socket (-EINVAL) -
 * and marked close-on-exec. runtime_serve then claims one per server
 * (runtime__listen_claim): the table remembers which are taken.
 */
#include "toolkit.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LISTEN_FDS_START 3
#define LISTEN_FDS_MAX 4096   /* far above any unit's; a bound for bad values */
#define LISTEN_NAME_MAX 255   /* systemd's limit for FileDescriptorName= */

struct inherited {
	int fd;
	bool taken;
	char name[LISTEN_NAME_MAX + 1];
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct inherited *table;   /* under table_lock */
static unsigned table_len;

/* A decimal number with nothing after it, at most max. */
static int parse_count(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end || *out > max ? -EINVAL : 0;
}

/* fd is open, a listening stream socket: then close-on-exec. */
static int check_fd(int fd)
{
	int type = 0, listening = 0;
	socklen_t tlen = sizeof(type), llen = sizeof(listening);

	if (fcntl(fd, F_GETFD) < 0) {
		fprintf(stderr, "runtime: LISTEN_FDS: fd %d is not open\n", fd);
		return -EBADF;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 || type != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &llen) < 0 || !listening) {
		fprintf(stderr, "runtime: LISTEN_FDS: fd %d is not a listening stream socket\n", fd);
		return -EINVAL;
	}
	return fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ? -errno : 0;
}

/* LISTEN_FDNAMES's names into t[0 .. n-1] (systemd's "unknown" without
 * the variable); -EINVAL if their count is not n or one is too long. */
static int take_names(const char *names, struct inherited *t, unsigned n)
{
	unsigned count = 1;

	if (!names) {
		for (unsigned i = 0; i < n; i++)
			strcpy(t[i].name, "unknown");
		return 0;
	}
	for (const char *p = names; *p; p++)
		count += *p == ':';
	if (count != n)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		size_t len = strcspn(names, ":");
		if (len > LISTEN_NAME_MAX)
			return -EINVAL;
		memcpy(t[i].name, names, len);
		t[i].name[len] = '\0';
		names += len + (names[len] == ':');
	}
	return 0;
}

/* The variables' sockets into *out (n of them; NULL, 0 for none). Under
 * table_lock; the caller unsets the variables. */
static int parse_env(struct inherited **out, unsigned *n)
{
	unsigned long long pid, count;

	*out = NULL;
	*n = 0;
	if (parse_count(getenv("LISTEN_PID"), INT_MAX, &pid) < 0) {
		fprintf(stderr, "runtime: LISTEN_PID is not a process id\n");
		return -EINVAL;
	}
	if (pid != (unsigned long long)getpid())
		return 0; /* meant for another process */
	if (parse_count(getenv("LISTEN_FDS"), LISTEN_FDS_MAX, &count) < 0) {
		fprintf(stderr, "runtime: LISTEN_FDS is not a number of fds up to %d\n",
		        LISTEN_FDS_MAX);
		return -EINVAL;
	}
	if (count == 0)
		return 0;
	struct inherited *t = calloc(count, sizeof(*t));
	if (!t)
		return -ENOMEM;
	int rc = take_names(getenv("LISTEN_FDNAMES"), t, (unsigned)count);
	if (rc < 0)
		fprintf(stderr, "runtime: LISTEN_FDNAMES does not name each of the %llu fds "
		        "(':' between names of up to %d bytes)\n", count, LISTEN_NAME_MAX);
	for (unsigned i = 0; rc == 0 && i < count; i++)
		rc = check_fd(t[i].fd = LISTEN_FDS_START + (int)i);
	if (rc < 0) {
		free(t);
		return rc;
	}
	*out = t;
	*n = (unsigned)count;
	return 0;
}

/* Under table_lock: take the variables if they are there. */
static int refresh(void)
{
	if (!getenv("LISTEN_PID"))
		return 0;
	struct inherited *t;
	unsigned n;
	int rc = parse_env(&t, &n);
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	free(table); /* unclaimed ones stay open: they are the process's */
	table = t;
	table_len = n;
	return rc;
}

int runtime_listen_fds(void)
{
	pthread_mutex_lock(&table_lock);
	int rc = refresh();
	if (rc == 0)
		rc = (int)table_len;
	pthread_mutex_unlock(&table_lock);
	return rc;
}

/* The inherited socket's port, 0 if it is not TCP. */
static uint16_t fd_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

/* Which untaken entry serves cfg: by name, else by port (any TCP socket
 * for port 0); -1 for none. */
static int pick(const struct runtime_serve_config *cfg)
{
	for (unsigned i = 0; i < table_len; i++) {
		struct inherited *e = &table[i];
		if (e->taken)
			continue;
		uint16_t port = fd_port(e->fd);
		if (cfg->listen_name ? strcmp(e->name, cfg->listen_name) == 0
		                     : port && (!cfg->port || port == cfg->port))
			return (int)i;
	}
	return -1;
}

/*
 * For runtime_serve: the inherited socket that serves cfg, taken (the
 * server owns it from now), in *fd: returns 1; 0 if none does (bind as
 * usual); -ENOENT if cfg names a socket and sockets were inherited but
 * none untaken has that name (logged), -EINVAL if the one named is not
 * TCP; or the environment's error (runtime_listen_fds).
 */
int runtime__listen_claim(const struct runtime_serve_config *cfg, int *fd)
{
	pthread_mutex_lock(&table_lock);
	int rc = refresh(), i = rc < 0 ? -1 : pick(cfg);
	if (i >= 0 && !fd_port(table[i].fd)) {
		fprintf(stderr, "runtime: serve: the inherited socket \"%s\" is not TCP\n",
		        cfg->listen_name);
		rc = -EINVAL;
	} else if (i >= 0) {
		table[i].taken = true;
		*fd = table[i].fd;
		rc = 1;
	} else if (rc == 0 && cfg->listen_name && table_len) {
		fprintf(stderr, "runtime: serve: no inherited socket is named \"%s\" "
		        "(LISTEN_FDNAMES), or it is taken\n", cfg->listen_name);
		rc = -ENOENT;
	}
	pthread_mutex_unlock(&table_lock);
	return rc;
}
