/* SPDX-License-Identifier: MIT */
/*
 * log.c - logging from a fiber that never blocks its core: runtime_log
 * appends the message to a buffer of the core's for that fd and returns;
 * a flusher fiber of the core writes the buffer out through the engine
 * (runtime_write_all: it parks, not the core, while a pipe or terminal is
 * full), one buffer while the other fills. A buffer that would grow past
 * LOG_BUFFER_MAX drops the message and counts it: a logger must not
 * become the load, nor take the memory.
 *
 * The flusher runs inside a cleanup, so that what was logged before a
 * shutdown still goes out (for up to LOG_GRACE_NS), and ends once the
 * buffers are empty: it keeps the run alive only while output is pending.
 * Off the cores (a plain thread), runtime_log writes at once.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_BUFFER_MAX (256u * 1024)
#define LOG_GRACE_NS (1000 * 1000 * 1000ull)
#define LOG_FDS 4 /* distinct fds per core; more are written at once */

struct log_out {
	bool used;
	int fd;
	char *buf[2];               /* fill buf[fill]; the flusher writes the other */
	size_t len[2], cap[2];
	uint8_t fill;
	bool flushing;              /* a flusher fiber runs for it */
};

struct core_log {
	struct log_out out[LOG_FDS];
};

static _Atomic uint64_t dropped;

static struct log_out *out_for(struct core *c, int fd)
{
	if (!c->log && !(c->log = calloc(1, sizeof(*c->log))))
		return NULL;
	struct log_out *free_slot = NULL;
	for (unsigned i = 0; i < LOG_FDS; i++) {
		struct log_out *o = &c->log->out[i];
		if (o->used && o->fd == fd)
			return o;
		if (!o->used && !free_slot)
			free_slot = o;
	}
	if (free_slot) {
		free_slot->used = true;
		free_slot->fd = fd;
	}
	return free_slot; /* NULL: LOG_FDS fds in use on this core */
}

/* Room for n more bytes in o's filling buffer. False: over the bound,
 * which counts both buffers (what is being written is not written yet). */
static bool room(struct log_out *o, size_t n)
{
	unsigned b = o->fill;
	size_t want = o->len[b] + n;

	if (o->len[0] + o->len[1] + n > LOG_BUFFER_MAX)
		return false;
	if (want <= o->cap[b])
		return true;
	size_t cap = o->cap[b] ? o->cap[b] : 4096;
	while (cap < want)
		cap *= 2;
	char *p = realloc(o->buf[b], cap);
	if (!p)
		return false;
	o->buf[b] = p;
	o->cap[b] = cap;
	return true;
}

/* The core's flusher for o: swap, write, until nothing is left. */
static void flusher(void *arg)
{
	struct log_out *o = arg;
	struct runtime_cleanup cl;

	runtime_cleanup_begin(&cl, LOG_GRACE_NS); /* a shutdown waits for the log */
	while (o->len[o->fill]) {
		unsigned b = o->fill;
		o->fill ^= 1;
		if (runtime_write_all(o->fd, o->buf[b], o->len[b], NULL) < 0)
			atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
		o->len[b] = 0;
	}
	o->flushing = false;
	runtime_cleanup_end(&cl);
}

static int queue(struct core *c, int fd, const char *msg, size_t n)
{
	struct log_out *o = out_for(c, fd);

	if (!o || !room(o, n)) {
		atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
		return -EAGAIN;
	}
	memcpy(o->buf[o->fill] + o->len[o->fill], msg, n);
	o->len[o->fill] += n;
	if (!o->flushing && runtime__fiber_spawn_here(c, flusher, o) == 0)
		o->flushing = true; /* else the next message tries again */
	return (int)n;
}

int runtime_log_write(int fd, const void *buf, size_t len)
{
	struct core *c = this_core();

	if (fd < 0 || (!buf && len) || len > LOG_BUFFER_MAX)
		return -EINVAL;
	if (!c) {
		ssize_t n = sys_write(fd, buf, len); /* a plain thread may block */
		return n < 0 ? -errno : (int)n;
	}
	return len ? queue(c, fd, buf, len) : 0;
}

int runtime_log(int fd, const char *fmt, ...)
{
	char line[1024], *msg = line;
	va_list ap;

	if (!fmt)
		return -EINVAL;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= sizeof(line)) { /* a long message: whole, never cut */
		if (!(msg = malloc((size_t)n + 1)))
			return -ENOMEM;
		va_start(ap, fmt);
		vsnprintf(msg, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	int rc = runtime_log_write(fd, msg, (size_t)n);
	if (msg != line)
		free(msg);
	return rc;
}

uint64_t runtime_log_dropped(void)
{
	return atomic_load_explicit(&dropped, memory_order_relaxed);
}

/* runtime_destroy: the buffers (their flushers have ended with the run). */
void runtime__log_free(struct core *c)
{
	if (!c->log)
		return;
	for (unsigned i = 0; i < LOG_FDS; i++) {
		free(c->log->out[i].buf[0]);
		free(c->log->out[i].buf[1]);
	}
	free(c->log);
	c->log = NULL;
}
