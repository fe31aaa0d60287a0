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
 * The flusher writes for as long as the fd takes (a reader that pauses
 * loses nothing); a shutdown's cancel gives it LOG_GRACE_NS more, inside
 * a cleanup, so that what was logged before it still goes out. It ends
 * once the buffers are empty: it keeps the run alive only while output is
 * pending. A write that fails loses its batch: the messages not fully
 * written count as dropped. Off the cores (a plain thread), runtime_log
 * writes at once.
 */
#include "core.h"
#include "services.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_BUFFER_MAX (256u * 1024)
#define LOG_GRACE_NS (1000 * 1000 * 1000ull)

/* One of the two buffers of an fd: its bytes, and where each message
 * ends (to count those a failed write loses). */
struct log_buf {
	char *bytes;
	size_t len, cap;
	uint32_t *ends;
	size_t n, ends_cap;
};

struct log_out {
	struct log_out *next;       /* the core's, one per fd logged to */
	int fd;
	struct log_buf buf[2];      /* fill buf[fill]; the flusher writes the other */
	uint8_t fill;
	bool flushing;              /* a flusher fiber runs for it */
};

struct core_log {
	struct log_out *outs;
};

static _Atomic uint64_t dropped;

static void count_dropped(uint64_t n)
{
	atomic_fetch_add_explicit(&dropped, n, memory_order_relaxed);
}

static struct log_out *out_for(struct core *c, int fd)
{
	if (!c->log && !(c->log = calloc(1, sizeof(*c->log))))
		return NULL;
	for (struct log_out *o = c->log->outs; o; o = o->next)
		if (o->fd == fd)
			return o;
	struct log_out *o = calloc(1, sizeof(*o));
	if (o) {
		o->fd = fd;
		o->next = c->log->outs;
		c->log->outs = o;
	}
	return o;
}

/* Grow *p (of *cap elements of size) to hold want. */
static bool grow(void **p, size_t *cap, size_t want, size_t size, size_t first)
{
	if (want <= *cap)
		return true;
	size_t cap2 = *cap ? *cap : first;
	while (cap2 < want)
		cap2 *= 2;
	void *q = realloc(*p, cap2 * size);
	if (!q)
		return false;
	*p = q;
	*cap = cap2;
	return true;
}

/* Room for a message of n more bytes in o's filling buffer. False: over
 * the bound, which counts both buffers (what is being written is not
 * written yet), or no memory. */
static bool room(struct log_out *o, size_t n)
{
	struct log_buf *b = &o->buf[o->fill];

	if (o->buf[0].len + o->buf[1].len + n > LOG_BUFFER_MAX)
		return false;
	return grow((void **)&b->bytes, &b->cap, b->len + n, 1, 4096) &&
	       grow((void **)&b->ends, &b->ends_cap, b->n + 1, sizeof(*b->ends), 64);
}

/* Write b out. A shutdown's cancel starts the grace (*grace: the cleanup
 * is open). On failure, the messages not fully written are dropped. */
static void write_out(struct log_out *o, struct log_buf *b, struct runtime_cleanup *cl,
                      bool *grace)
{
	size_t done = 0, more = 0;
	ssize_t rc = runtime_write_all(o->fd, b->bytes, b->len, &done);

	if (rc == -ECANCELED && !*grace) {
		*grace = runtime_cleanup_begin(cl, LOG_GRACE_NS) == 0;
		rc = runtime_write_all(o->fd, b->bytes + done, b->len - done, &more);
		done += more;
	}
	if (rc < 0) {
		size_t whole = 0;
		while (whole < b->n && b->ends[whole] <= done)
			whole++;
		count_dropped(b->n - whole);
	}
	b->len = b->n = 0;
}

/* The core's flusher for o: swap, write, until nothing is left. */
static void flusher(void *arg)
{
	struct log_out *o = arg;
	struct runtime_cleanup cl;
	bool grace = false;

	while (o->buf[o->fill].len) {
		struct log_buf *b = &o->buf[o->fill];
		o->fill ^= 1;
		write_out(o, b, &cl, &grace);
	}
	o->flushing = false;
	if (grace)
		runtime_cleanup_end(&cl);
}

static int queue(struct core *c, int fd, const char *msg, size_t n)
{
	struct log_out *o = out_for(c, fd);

	if (!o || !room(o, n)) {
		count_dropped(1);
		return -EAGAIN;
	}
	struct log_buf *b = &o->buf[o->fill];
	memcpy(b->bytes + b->len, msg, n);
	b->len += n;
	b->ends[b->n++] = (uint32_t)b->len;
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
	for (struct log_out *o = c->log->outs, *next; o; o = next) {
		next = o->next;
		for (int i = 0; i < 2; i++) {
			free(o->buf[i].bytes);
			free(o->buf[i].ends);
		}
		free(o);
	}
	free(c->log);
	c->log = NULL;
}
