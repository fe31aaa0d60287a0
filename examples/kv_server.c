/* SPDX-License-Identifier: MIT */
/*
 * kv_server.c - a key-value server with a line protocol, served on every
 * core, one table shared by all of them:
 *
 *   GET key          -> VALUE v | NOT_FOUND
 *   SET key value    -> OK              (value: the rest of the line)
 *   DEL key          -> DELETED | NOT_FOUND
 *   COUNT            -> COUNT n         (keys in the table)
 *   QUIT             -> OK, and the server closes the connection
 *   anything else    -> ERR ...
 *
 * Lines end in "\n" ("\r\n" also works). Commands may be pipelined: the
 * replies of everything that came in one read go out in one write. A line
 * longer than MAX_LINE gets "ERR line too long" and the connection is
 * closed. With --rate, each connection may run PER_SEC commands a second,
 * in bursts of up to N; one more gets "ERR rate limited" at once (it is
 * not run, and QUIT is never refused). SIGINT or SIGTERM drains: a
 * connection waiting for its next command is closed at once, one in the
 * middle of a command finishes it first.
 *
 * Shows: runtime_serve on every core, runtime_reader_read_line with a
 * maximum, runtime_writer_printf, runtime_reader_flush_before_wait,
 * runtime_conn_set_idle, runtime_conn_finish, runtime_drain_on_signals,
 * a runtime_mutex per hash bucket shared by fibers of every core,
 * runtime_ratelimit_try_take.
 *
 *   ./kv_server PORT [--cores N] [--rate PER_SEC [--burst N]]
 *   ./kv_server 7100 --cores 2 &
 *   printf 'SET a 1\nGET a\nCOUNT\nQUIT\n' | nc 127.0.0.1 7100
 *
 * Defaults: one core per CPU (--cores 0), no rate limit; --burst defaults
 * to PER_SEC (at least 1). PORT 0 takes a free port. It listens on every
 * IPv4 address and prints "kv_server: listening on PORT".
 */
#include <runtime.h>

#include <getopt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 1024       /* longest command, "\n" included */
#define WRITE_BUFFER 16384  /* replies gathered before a write */
#define BUCKETS 1024
#define GRACE_NS (10 * 1000 * 1000 * 1000ull)
#define LINGER_NS (1000 * 1000 * 1000ull)

static struct {
	uint16_t port;
	unsigned cores;
	double rate; /* 0: no limit */
	unsigned burst;
} opt;

/* ------------------------------------------------------------- the table */

/*
 * A chained hash table, a runtime_mutex per bucket. Fibers of every core
 * lock it; one that finds the bucket taken parks, and its core runs other
 * fibers meanwhile (a pthread mutex would stop the whole core). Nothing
 * inside a lock waits: values are copied out, and replies written after
 * the unlock, so a slow client never holds a bucket.
 */
struct entry {
	struct entry *next;
	char *value;
	char key[]; /* NUL-terminated */
};

static struct bucket {
	struct runtime_mutex mu; /* zeroed: RUNTIME_MUTEX_INIT */
	struct entry *head;
} table[BUCKETS];

static atomic_long keys;

static struct bucket *bucket_of(const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return &table[h % BUCKETS];
}

/* The entry's link in b's chain, or the chain's end: the caller locks. */
static struct entry **find(struct bucket *b, const char *key)
{
	struct entry **e = &b->head;

	while (*e && strcmp((*e)->key, key))
		e = &(*e)->next;
	return e;
}

/* The value into out (size MAX_LINE): 0, -ENOENT, or the lock's -errno
 * (-ECANCELED at shutdown). */
static int table_get(const char *key, char *out)
{
	struct bucket *b = bucket_of(key);
	int rc = runtime_mutex_lock(&b->mu, -1);

	if (rc < 0)
		return rc;
	struct entry *e = *find(b, key);
	if (e)
		snprintf(out, MAX_LINE, "%s", e->value);
	runtime_mutex_unlock(&b->mu);
	return e ? 0 : -ENOENT;
}

static int table_set(const char *key, const char *value)
{
	struct bucket *b = bucket_of(key);
	char *v = strdup(value);

	if (!v)
		return -ENOMEM;
	int rc = runtime_mutex_lock(&b->mu, -1);
	if (rc < 0) {
		free(v);
		return rc;
	}
	struct entry **link = find(b, key), *e = *link;
	if (!e && (e = malloc(sizeof(*e) + strlen(key) + 1))) {
		strcpy(e->key, key);
		e->value = NULL;
		e->next = NULL;
		*link = e;
		atomic_fetch_add(&keys, 1);
	}
	if (e) {
		free(e->value);
		e->value = v;
	}
	runtime_mutex_unlock(&b->mu);
	if (!e)
		free(v);
	return e ? 0 : -ENOMEM;
}

static int table_del(const char *key)
{
	struct bucket *b = bucket_of(key);
	int rc = runtime_mutex_lock(&b->mu, -1);

	if (rc < 0)
		return rc;
	struct entry **link = find(b, key), *e = *link;
	if (e) {
		*link = e->next;
		atomic_fetch_sub(&keys, 1);
	}
	runtime_mutex_unlock(&b->mu);
	if (e) {
		free(e->value);
		free(e);
	}
	return e ? 0 : -ENOENT;
}

static void table_free(void)
{
	for (size_t i = 0; i < BUCKETS; i++)
		while (table[i].head) {
			struct entry *e = table[i].head;
			table[i].head = e->next;
			free(e->value);
			free(e);
		}
}

/* ------------------------------------------------------- one connection */

struct client {
	struct runtime_conn *conn;
	struct runtime_reader *r;
	struct runtime_writer *w;
	/* Per connection, not per client address: a limiter per address
	 * needs a table of them shared by the cores, and their expiry; the
	 * price is that a client opening more connections gets more rate.
	 * try_take, not take: a command over the rate is refused at once,
	 * where a take would put the connection's fiber to sleep, holding
	 * back the replies before it. NULL: no limit. */
	struct runtime_ratelimit *rl;
};

/* One command line (NUL-terminated, no "\n") into the writer: < 0 ends
 * the connection (QUIT, or a writer error). */
static int run(struct client *c, char *line)
{
	char *key = strchr(line, ' '), *value = NULL, buf[MAX_LINE];

	if (key) { /* "VERB KEY VALUE...": NULs after VERB and KEY */
		*key++ = '\0';
		value = strchr(key, ' ');
		if (value)
			*value++ = '\0';
	}
	if (!strcmp(line, "QUIT"))
		return runtime_writer_printf(c->w, "OK\n") < 0 ? -1 : -2;
	if (c->rl && runtime_ratelimit_try_take(c->rl, 1) == -EAGAIN)
		return (int)runtime_writer_printf(c->w, "ERR rate limited\n");

	/* Each command that is well formed and succeeds replies; else rc says
	 * what went wrong (-EINVAL: no such command, or wrong arguments). */
	int rc = -EINVAL;
	if (!strcmp(line, "COUNT") && !key)
		return (int)runtime_writer_printf(c->w, "COUNT %ld\n", atomic_load(&keys));
	if (!strcmp(line, "GET") && key && *key && !value && (rc = table_get(key, buf)) == 0)
		return (int)runtime_writer_printf(c->w, "VALUE %s\n", buf);
	if (!strcmp(line, "SET") && key && *key && value && (rc = table_set(key, value)) == 0)
		return (int)runtime_writer_printf(c->w, "OK\n");
	if (!strcmp(line, "DEL") && key && *key && !value && (rc = table_del(key)) == 0)
		return (int)runtime_writer_printf(c->w, "DELETED\n");
	if (rc == -ENOENT)
		return (int)runtime_writer_printf(c->w, "NOT_FOUND\n");
	if (rc == -EINVAL)
		return (int)runtime_writer_printf(c->w, "ERR unknown command or wrong arguments\n");
	return (int)runtime_writer_printf(c->w, "ERR %s\n", strerror(-rc));
}

/*
 * "ERR line too long", then a lingering close (runtime_conn_finish):
 * closing a socket that has input unread sends a reset, which can destroy
 * the reply before the client reads it.
 */
static void refuse_line(struct client *c)
{
	if (runtime_writer_printf(c->w, "ERR line too long\n") >= 0 &&
	    runtime_writer_flush(c->w) >= 0)
		runtime_conn_finish(c->conn, LINGER_NS);
}

/* The next command: 1 to go on, 0 to end the connection. */
static int next_command(struct client *c)
{
	const char *line;
	char cmd[MAX_LINE];

	/* Idle until the first byte of a command comes: a drain closes the
	 * connection now, but not with half a command read. The reader
	 * flushes the replies before it waits (flush_before_wait). */
	runtime_conn_set_idle(c->conn, 1);
	ssize_t n = runtime_reader_peek(c->r, 1, &line);
	runtime_conn_set_idle(c->conn, 0);
	if (n > 0)
		n = runtime_reader_read_line(c->r, MAX_LINE, &line);
	if (n == -EMSGSIZE)
		refuse_line(c);
	if (n <= 0) /* 0: the client closed; -ENODATA: it did mid-line; -ESHUTDOWN: a drain */
		return 0;
	n -= n >= 2 && line[n - 2] == '\r' ? 2 : 1;
	memcpy(cmd, line, (size_t)n);
	cmd[n] = '\0';
	if (run(c, cmd) < 0) {
		runtime_writer_flush(c->w); /* QUIT's OK; after an error, a no-op */
		return 0;
	}
	return 1;
}

/* A connection (runtime_serve closes it when this returns). */
static void serve_client(struct runtime_conn *conn, void *arg)
{
	struct client c = { .conn = conn };
	const struct runtime_transport *t = runtime_conn_transport(conn);
	int rc;

	(void)arg;
	if ((rc = runtime_reader_create(&c.r, t, MAX_LINE)) < 0 ||
	    (rc = runtime_writer_create(&c.w, t, WRITE_BUFFER)) < 0 ||
	    (opt.rate > 0 && (rc = runtime_ratelimit_create(&c.rl, opt.rate, opt.burst)) < 0)) {
		runtime_log(2, "kv_server: connection refused: %s\n", strerror(-rc));
	} else {
		runtime_reader_flush_before_wait(c.r, c.w);
		while (next_command(&c))
			;
		runtime_reader_flush_before_wait(c.r, NULL);
	}
	runtime_ratelimit_destroy(c.rl);
	runtime_writer_destroy(c.w);
	runtime_reader_destroy(c.r);
}

/* ------------------------------------------------------------------ main */

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cores", required_argument, NULL, 'c' },
		{ "rate", required_argument, NULL, 'r' },
		{ "burst", required_argument, NULL, 'b' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == '?')
			return -1;
		unsigned long v = strtoul(optarg, &end, 10);
		if (c == 'r')
			opt.rate = strtod(optarg, &end);
		if (!*optarg || *end || *optarg == '-' || (c == 'c' && v > RUNTIME_MAX_CORES) ||
		    (c == 'b' && (v < 1 || v > 1000000000)) || (c == 'r' && !(opt.rate >= 0.001 && opt.rate <= 1e12)))
			return -1;
		if (c == 'c')
			opt.cores = (unsigned)v;
		else if (c == 'b')
			opt.burst = (unsigned)v;
	}
	if (!opt.burst)
		opt.burst = opt.rate > 1 ? (unsigned)opt.rate : 1;
	unsigned long port = optind < argc ? strtoul(argv[optind], &end, 10) : 0;
	if (argc - optind != 1 || !*argv[optind] || *end || port > 65535)
		return -1;
	opt.port = (uint16_t)port;
	return 0;
}

int main(int argc, char **argv)
{
	struct runtime_config cfg;
	struct runtime_serve_config sc;
	struct runtime_server *srv = NULL;
	struct runtime *rt;

	if (parse_args(argc, argv) < 0) {
		fprintf(stderr, "usage: %s PORT [--cores N] [--rate PER_SEC [--burst N]]\n", argv[0]);
		return 2;
	}
	runtime_config_init(&cfg);
	cfg.cores = opt.cores; /* 0: one per CPU */
	int rc = runtime_create(&rt, &cfg);
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %s\n", strerror(-rc));
		return 1;
	}
	runtime_serve_config_init(&sc);
	sc.port = opt.port;
	sc.handler = serve_client;
	if ((rc = runtime_drain_on_signals(rt, GRACE_NS)) < 0 ||
	    (rc = runtime_serve(rt, &sc, &srv)) < 0) {
		fprintf(stderr, "kv_server: listen on port %u: %s\n", opt.port, strerror(-rc));
		runtime_server_destroy(srv);
		runtime_destroy(rt);
		return 1;
	}
	printf("kv_server: listening on %u\n", runtime_server_port(srv));
	fflush(stdout);
	rc = runtime_run(rt); /* until the drain is over */
	struct runtime_server_stats st;
	runtime_server_stats(srv, &st);
	runtime_server_destroy(srv);
	runtime_destroy(rt);
	if (rc < 0) {
		fprintf(stderr, "kv_server: %s\n", strerror(-rc));
		table_free();
		return 1;
	}
	printf("kv_server: stopped after %llu connections, %ld keys\n",
	       (unsigned long long)st.accepted, atomic_load(&keys));
	table_free();
	return 0;
}
