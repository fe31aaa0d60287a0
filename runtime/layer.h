/* SPDX-License-Identifier: MIT */
/*
 * layer.h - what the core offers the layers built into the same library
 * (the toolkit, and TLS through it) beyond <runtime.h>: the I/O calls with
 * a deadline of the call's own.
 *
 * A connection's read and write deadlines apply to one call at a time.
 * Through the public calls that took a runtime_deadline_get, a set before
 * the call and one after (the fiber's deadline moved and put back) on
 * every read, write and wait for readiness; these take it as an argument and leave the
 * fiber's alone. The call runs under the earlier of the two: past it,
 * -ETIMEDOUT at once, without touching the fd; reached while it waits,
 * -ETIMEDOUT, and runtime_fiber_expire ends the wait as it does any.
 * Otherwise each returns what the public call does. deadline is an
 * absolute runtime_now() time, 0 for none.
 */
#ifndef RUNTIME_LAYER_H
#define RUNTIME_LAYER_H

#include <runtime.h>

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* runtime_recv. */
ssize_t runtime__recv_by(int fd, void *buf, size_t len, int flags, uint64_t deadline);

/* runtime_send for one iovec, runtime_sendmsg for more. */
ssize_t runtime__send_by(int fd, const struct iovec *iov, int iovcnt, int flags,
                         uint64_t deadline);

/* runtime_poll, waiting until the deadline (no timeout of its own). */
int runtime__poll_by(int fd, short events, uint64_t deadline);

/* runtime_stream_recv. */
ssize_t runtime__stream_recv_by(struct runtime_stream *s, void *buf, size_t len,
                                uint64_t deadline);

/* Cancel the calling fiber (on; off: stop) when the peer's end of stream
 * or an error reaches s while nothing unread is queued and no fiber
 * reads. Returns, off, 1 if the watch had fired since it was set (else
 * 0); on, 0, or 1 if the end had come already (no watch then: taken for
 * a half-close, whose client waits for its answer); -EBUSY while the
 * stream waits idle. The core's fibers; the watcher stops the watch
 * before it ends, and before the stream waits idle. */
int runtime__stream_watch(struct runtime_stream *s, int on);

/* The watch (if any) ends early, what it saw kept for the watcher's off
 * call: the peer's bytes were taken past the reader (a layer such as TLS
 * holds them), so its end would not be a leaving client's. */
void runtime__stream_watch_stop(struct runtime_stream *s);

/* End s's runtime_stream_idle wait now, fn's why being why: 0, or
 * -EALREADY (it does not wait, or its end is under way). A fiber of the
 * stream's core. */
int runtime__stream_idle_wake(struct runtime_stream *s, int why);

#endif /* RUNTIME_LAYER_H */
