/* SPDX-License-Identifier: MIT */
/*
 * net.c - TCP conveniences over the fiber I/O calls: listen on a numeric
 * address, connect to a numeric address or a name (resolved on the
 * offload pool, so nothing here blocks a core), and an address's name.
 * The whole-buffer loops (runtime_write_all...) are the toolkit's
 * (toolkit/transport.c), on the one loop its writers share.
 */
#include "core.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

/* Fill *ss from a numeric IPv4/IPv6 address; NULL or "" is INADDR_ANY. */
static int parse_addr(const char *host, uint16_t port, struct sockaddr_storage *ss,
                      socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (host && strchr(host, ':')) {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			return -EINVAL;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		*len = sizeof(*a6);
		return 0;
	}
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	if (!host || !*host)
		a4->sin_addr.s_addr = htonl(INADDR_ANY);
	else if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
		return -EINVAL;
	a4->sin_family = AF_INET;
	a4->sin_port = htons(port);
	*len = sizeof(*a4);
	return 0;
}

static int set_flag(int fd, int level, int name)
{
	int one = 1;
	return setsockopt(fd, level, name, &one, sizeof(one)) < 0 ? -errno : 0;
}

/* Is the address free of other sockets, SO_REUSEPORT ones included? A
 * bind without SO_REUSEPORT (SO_REUSEADDR alone, so that connections in
 * TIME_WAIT do not count) is refused while any holds the port. 0 or
 * -errno (-EADDRINUSE). */
static int port_free(const struct sockaddr_storage *ss, socklen_t len)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return -errno;
	rc = set_flag(fd, SOL_SOCKET, SO_REUSEADDR);
	if (!rc && bind(fd, (const struct sockaddr *)ss, len) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

#define LISTEN_FLAGS (RUNTIME_LISTEN_REUSEPORT | RUNTIME_LISTEN_NODELAY | RUNTIME_LISTEN_EXCLUSIVE)

int runtime_tcp_listen(const char *host, uint16_t port, int backlog, unsigned flags)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int rc = parse_addr(host, port, &ss, &len);

	if (rc < 0)
		return rc;
	if (flags & ~LISTEN_FLAGS)
		return -EINVAL;
	if (port && (flags & RUNTIME_LISTEN_EXCLUSIVE) && (rc = port_free(&ss, len)) < 0)
		return rc; /* port 0: the kernel picks a free one */
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = set_flag(fd, SOL_SOCKET, SO_REUSEADDR);
	if (!rc && (flags & RUNTIME_LISTEN_REUSEPORT))
		rc = set_flag(fd, SOL_SOCKET, SO_REUSEPORT);
	if (!rc && (flags & RUNTIME_LISTEN_NODELAY))
		rc = set_flag(fd, IPPROTO_TCP, TCP_NODELAY);
	if (!rc && bind(fd, (struct sockaddr *)&ss, len) < 0)
		rc = -errno;
	if (!rc && listen(fd, backlog > 0 ? backlog : SOMAXCONN) < 0)
		rc = -errno;
	if (rc < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

/* A new socket connected to one address; the fd or -errno. */
static int connect_to(const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int rc = runtime_connect(fd, sa, len);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	set_flag(fd, IPPROTO_TCP, TCP_NODELAY); /* request/response latency */
	return fd;
}

/* A name: resolved off the core, each address tried in turn (the fiber's
 * deadline bounds them all); the first connection, or the last error. */
static int connect_by_name(const char *host, uint16_t port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
	                          .ai_flags = AI_ADDRCONFIG };
	struct addrinfo *res = NULL;
	char service[8];

	snprintf(service, sizeof(service), "%u", (unsigned)port);
	int rc = runtime_getaddrinfo(host, service, &hints, &res);
	if (rc < 0)
		return rc;
	rc = -EHOSTUNREACH;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		rc = connect_to(ai->ai_addr, ai->ai_addrlen);
		if (rc >= 0 || rc == -ECANCELED || rc == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	return rc;
}

int runtime_tcp_connect(const char *host, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len;

	if (!this_fiber())
		return runtime__misuse(-EPERM, __func__, MISUSE_OUTSIDE_FIBER);
	if (parse_addr(host, port, &ss, &len) == 0)
		return connect_to((struct sockaddr *)&ss, len);
	if (strchr(host, ':')) /* NULL parsed as 0.0.0.0 above */
		return -EINVAL; /* not a name: a malformed IPv6 address */
	return connect_by_name(host, port);
}

int runtime_sockaddr_name(const struct sockaddr *sa, socklen_t len, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN];
	int n;

	if (!sa || !buf || !size || len < (socklen_t)sizeof(sa->sa_family))
		return -EINVAL;
	if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		n = snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		n = snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else if (sa->sa_family == AF_UNIX) {
		const struct sockaddr_un *un = (const struct sockaddr_un *)sa;
		size_t path = (size_t)len - offsetof(struct sockaddr_un, sun_path);
		bool abstract = path && !un->sun_path[0];
		n = snprintf(buf, size, "unix:%s%.*s", abstract ? "@" : "", (int)(path - abstract),
		             un->sun_path + abstract);
	} else {
		return sa->sa_family == AF_INET || sa->sa_family == AF_INET6 ? -EINVAL : -EAFNOSUPPORT;
	}
	return (size_t)n < size ? n : -ENOSPC;
}
