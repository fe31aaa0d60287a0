/* SPDX-License-Identifier: MIT */
/*
 * echo_server_common.h - the start-up and bookkeeping code the two floor echo
 * servers (epoll_echo, raw_uring_echo) share, as static functions: die(),
 * option parsing for [--port P] [--bind ADDR] plus at most one server-specific
 * option, the IPv4 listening socket, the SIGINT/SIGTERM signalfd, lifting the
 * fd limit, the bound port, and the doubly linked list of live connections.
 * Nothing here runs per message.  The includer defines _GNU_SOURCE first and
 * ECHO_PROG, its name as a string literal, which prefixes every message.
 */
#ifndef ECHO_SERVER_COMMON_H
#define ECHO_SERVER_COMMON_H

#ifndef ECHO_PROG
#error "define ECHO_PROG (the server's name, a string literal) first"
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

/* err is an errno value: pass errno, or -ret for liburing's -errno. */
static __attribute__((noreturn)) void die(const char *what, int err)
{
	fprintf(stderr, ECHO_PROG ": %s: %s\n", what, strerror(err));
	exit(1);
}

/* Links of the live-connection list, only walked at shutdown. */
struct node {
	struct node *prev, *next;
};

static void list_init(struct node *head)
{
	head->next = head->prev = head;
}

static void list_add(struct node *head, struct node *n)
{
	n->next = head->next;
	n->prev = head;
	head->next->prev = n;
	head->next = n;
}

static void list_del(struct node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
}

/* A server's own option on top of the common ones: --NAME ARG or -KEY ARG,
 * stored in *value when valid(ARG) accepts it. */
struct extra_opt {
	const char *name;
	char key;
	const char *usage; /* appended to the usage line */
	bool (*valid)(const char *arg);
	const char **value;
};

static __attribute__((noreturn)) void usage(const struct extra_opt *extra)
{
	fprintf(stderr, "usage: " ECHO_PROG " [--port P] [--bind ADDR]%s\n",
		extra ? extra->usage : "");
	exit(2);
}

/* [--port P] [--bind ADDR] and extra (NULL: none) into *port, *addr and
 * *extra->value; anything else, --help included, prints the usage and
 * exits 2. */
static void parse_args(int argc, char **argv, const char **addr, int *port,
		       const struct extra_opt *extra)
{
	struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }, /* extra, if any */
		{ 0 },
	};
	char shortopts[8] = "p:b:h";
	char *end;
	int o;

	if (extra) {
		opts[3] = (struct option){ extra->name, required_argument,
					   NULL, extra->key };
		shortopts[5] = extra->key;
		shortopts[6] = ':';
	}
	while ((o = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
		if (o == 'p') {
			*port = (int)strtol(optarg, &end, 10);
			if (*end || *port < 0 || *port > 65535)
				usage(extra);
		} else if (o == 'b') {
			*addr = optarg;
		} else if (extra && o == extra->key && extra->valid(optarg)) {
			*extra->value = optarg;
		} else {
			usage(extra);
		}
	}
	if (optind != argc)
		usage(extra);
}

/* A listening TCP socket on addr:port (port 0: any free one), created with
 * SOCK_CLOEXEC | type_flags; a bad address exits 2, any failure exits 1. */
static int listen_on(const char *addr, int port, int type_flags)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int one = 1, fd;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, ECHO_PROG ": bad IPv4 address '%s'\n", addr);
		exit(2);
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | type_flags, 0);
	if (fd < 0)
		die("socket", errno);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		die("bind", errno);
	if (listen(fd, SOMAXCONN) < 0)
		die("listen", errno);
	return fd;
}

static int bound_port(int fd)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof sa;

	if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		return -1;
	return ntohs(sa.sin_port);
}

/* Ignores SIGPIPE and blocks SIGINT/SIGTERM, which then arrive only through
 * the returned signalfd (SFD_CLOEXEC | flags), read by the event loop itself:
 * there is no window between checking a flag and sleeping in the kernel. */
static int signal_fd(int flags)
{
	sigset_t set;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	fd = signalfd(-1, &set, SFD_CLOEXEC | flags);
	if (fd < 0)
		die("signalfd", errno);
	return fd;
}

/* Many connections need many fds: lift the soft limit to the hard one. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

#endif /* ECHO_SERVER_COMMON_H */
