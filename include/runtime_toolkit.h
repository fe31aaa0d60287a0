/* SPDX-License-Identifier: MIT */
/*
 * runtime_toolkit.h - the toolkit: what a service needs between the core
 * calls of <runtime.h> and its own logic, so that it does not write it by
 * hand: buffered reading and writing over a small transport interface
 * (a socket, a receive stream, TLS), copying between connections,
 * connections with read and write deadlines, serving on every core,
 * graceful drain and rate limiting. Included by <runtime.h>; built into
 * libruntime from toolkit/, using only the core's public calls.
 *
 * The conventions of <runtime.h> hold here: errors are -errno, calls
 * that wait need fiber context, and each call states its threads, errors
 * and races.
 */
#ifndef RUNTIME_TOOLKIT_H
#define RUNTIME_TOOLKIT_H

#include "runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ transports */

/*
 * A transport is a byte stream the reader, the writer and copy work over:
 * a socket or pipe, a receive stream, a reader's buffered view of either,
 * and anything that fills in these operations (TLS, a connection with
 * deadlines). Calls that wait follow <runtime.h>: fiber context, the
 * fiber's deadline and cancellation apply. One fiber at a time uses a
 * transport in each direction: nothing here locks.
 */
struct runtime_transport_ops {
	/* recv(2): up to len (> 0) bytes into buf, waiting if none has come;
	 * > 0, 0 at end of stream, or -errno. Needed to read. */
	ssize_t (*read)(void *ctx, void *buf, size_t len);
	/* writev(2): bytes written (> 0, may be short), or -errno. Needed to
	 * write. */
	ssize_t (*writev)(void *ctx, const struct iovec *iov, int iovcnt);
	/* Optional: bytes received and not read yet, in place: *data points
	 * at them; returns how many (0: none). Never waits, never fails (an
	 * error shows in the next read). Valid until the next call on the
	 * transport other than peek. */
	size_t (*peek)(void *ctx, const void **data);
	/* Optional, with peek: mark the first n (<= what peek returned)
	 * bytes read. Never waits. */
	void (*consume)(void *ctx, size_t n);
	/* Optional: no more writes, the peer reads end of stream
	 * (shutdown(SHUT_WR)). 0 or -errno; -EOPNOTSUPP counts as no op. */
	int (*close_write)(void *ctx);
	/* Optional: an fd runtime_copy may splice the stream's bytes out of
	 * (read_fd: only if nothing else reads that fd and the transport
	 * holds none of its bytes - peek returns 0) or into (write_fd:
	 * bytes written there reach the peer as they are); -1: none. A
	 * transport that offers one lets copy bypass its read or writev. */
	int (*read_fd)(void *ctx);
	int (*write_fd)(void *ctx);
};

/* Caller storage: the reader, the writer and copy_both keep a copy of
 * the two pointers, not the struct, so it may be temporary; ctx must live
 * as long as its users. */
struct runtime_transport {
	const struct runtime_transport_ops *ops;
	void *ctx;
};

/*
 * A transport over fd. A socket is read with runtime_recv and written with
 * runtime_send / runtime_sendmsg (MSG_NOSIGNAL), half-closed with
 * runtime_sock_shutdown(SHUT_WR); anything else (a pipe, a file) is read
 * and written with runtime_read / runtime_writev at its file offset, and
 * has no close_write. It offers fd for splicing both ways. The fd stays
 * the caller's (never closed here). Any thread (fstat(2) tells sockets
 * apart). Returns 0, -EINVAL (NULL t), -EBADF (fd < 0, or not open).
 */
RUNTIME_API int runtime_transport_fd(struct runtime_transport *t, int fd);

/*
 * A transport over a receive stream: reads through runtime_stream_recv,
 * peeks and consumes the stream's queued bytes in place (so a reader
 * hands out lines without copying them), writes to its socket as
 * runtime_transport_fd does. It offers the socket for splicing into but
 * not out of: the stream's multishot recv may take the socket's bytes at
 * any time. The stream stays the caller's; its core rules apply. Any
 * thread. Returns 0 or -EINVAL (NULL).
 */
RUNTIME_API int runtime_transport_stream(struct runtime_transport *t, struct runtime_stream *s);

/* ------------------------------------------------------ buffered reader */

/*
 * A buffered reader over a transport. Calls that need more bytes than are
 * buffered wait in one transport read each time; bytes already buffered
 * (in the reader, or queued at the transport's peek) are returned without
 * waiting - also to a fiber cancelled or past its deadline, as a buffered
 * channel element is; only a call that must wait reports those. Errors
 * never drop or truncate data silently: what was buffered stays readable.
 * One fiber at a time (any fiber that may use the transport); while a
 * reader is in use, read its transport only through it.
 *
 * Zero copy: when the reader's own buffer is empty and the transport's
 * peek holds a whole line (or the bytes a peek asks for), the reader
 * hands out a pointer into the transport's memory (a receive stream's
 * buffer) and consumes it at its next call.
 */
struct runtime_reader; /* opaque */

/* A reader of size bytes of buffer (the longest line it can assemble)
 * over *t (copied). Any thread. Returns 0, -EINVAL (NULL out or t, no
 * read op, peek without consume, size 0 or above SSIZE_MAX), -ENOMEM. */
RUNTIME_API int runtime_reader_create(struct runtime_reader **out,
                                      const struct runtime_transport *t, size_t size);

/* Free it (NULL: nothing). Bytes handed out are consumed from the
 * transport first, so that it can be read on directly; bytes still in the
 * reader's own buffer are dropped. Never waits. Not while a call on it
 * runs. */
RUNTIME_API void runtime_reader_destroy(struct runtime_reader *r);

/*
 * Up to len bytes into buf: what is buffered, else one transport read
 * (straight into buf when len is at least the reader's size). Returns the
 * bytes (> 0), 0 at end of stream (or len 0), or -errno: the transport's,
 * a flush error (runtime_reader_flush_before_wait), -EINVAL (NULL r, or
 * NULL buf with len > 0). Fiber context when it must wait.
 */
RUNTIME_API ssize_t runtime_reader_read(struct runtime_reader *r, void *buf, size_t len);

/* Exactly len bytes, as runtime_read_exact: returns len, 0 at end of
 * stream before the first byte, -ENODATA after some, or -errno; *done (if
 * not NULL) always receives the bytes stored in buf. */
RUNTIME_API ssize_t runtime_reader_read_exact(struct runtime_reader *r, void *buf, size_t len,
                                              size_t *done);

/*
 * The next line: the bytes up to and including the first delim, at most
 * max of them (1 .. the reader's size). *line points at them, valid until
 * the next call on the reader (not NUL-terminated). Returns the length
 * with the delimiter, 0 at end of stream with nothing buffered, or -errno:
 *  - -EMSGSIZE: no delim within max bytes. They stay buffered: read or
 *    discard them, or call again with a larger max.
 *  - -ENODATA: end of stream after some bytes but before a delim; they
 *    stay buffered (runtime_reader_read returns them).
 *  - the transport's error, or a flush error: what was buffered stays.
 *  - -EINVAL: NULL r or line, max 0 or above the reader's size, delim not
 *    a byte value (0 .. 255).
 * runtime_reader_read_line is read_until with delim '\n' (the line keeps
 * its "\n", and a "\r" before it).
 */
RUNTIME_API ssize_t runtime_reader_read_until(struct runtime_reader *r, int delim, size_t max,
                                              const char **line);
RUNTIME_API ssize_t runtime_reader_read_line(struct runtime_reader *r, size_t max,
                                             const char **line);

/*
 * Wait until n bytes are buffered (n at most the reader's size), or end of
 * stream, without consuming them: *data points at them, valid until the
 * next call on the reader. Returns n, fewer only at end of stream (0: none
 * left), or -errno (what came stays buffered), -EINVAL (NULL r or data, n
 * above the reader's size). n 0 returns 0.
 */
RUNTIME_API ssize_t runtime_reader_peek(struct runtime_reader *r, size_t n, const char **data);

/* Skip n bytes, reading (and dropping) what is not buffered yet. Returns
 * n, fewer only at end of stream, or -errno (the bytes skipped before it
 * are gone), -EINVAL (NULL r). */
RUNTIME_API ssize_t runtime_reader_discard(struct runtime_reader *r, size_t n);

/* Bytes a read returns without waiting: the reader's own and those the
 * transport's peek shows, less any handed out (0 for NULL). Never waits. */
RUNTIME_API size_t runtime_reader_buffered(const struct runtime_reader *r);

struct runtime_writer;

/*
 * Tie w to r: before r waits on its transport (it needs bytes and none
 * are buffered), it flushes w if w holds any, so that a request written
 * and not flushed cannot wait on its own reply (a request/response
 * exchange over one connection deadlocks without it). A flush error is
 * returned by the read that made it. w NULL unties. w must outlive the
 * tie. Any fiber using r.
 */
RUNTIME_API void runtime_reader_flush_before_wait(struct runtime_reader *r,
                                                  struct runtime_writer *w);

/*
 * A transport that reads through r (its buffered bytes first, then its
 * transport, each flush_before_wait included) and writes, half-closes and
 * splices into r's transport: hand it to runtime_copy when bytes may be
 * buffered in r (a proxy that read a request head), so none are lost. It
 * offers a read_fd only while r buffers nothing. Valid while r lives.
 * Any thread. Returns 0 or -EINVAL (NULL).
 */
RUNTIME_API int runtime_transport_reader(struct runtime_transport *t, struct runtime_reader *r);

/* ------------------------------------------------------ buffered writer */

/*
 * A buffered writer: small writes are gathered and go out together in
 * one writev at flush (or when they no longer fit). Errors are sticky:
 * after a transport error the writer no longer knows what reached the
 * peer, so every later write and flush returns the same error. One fiber
 * at a time.
 */

/* A writer of size bytes of buffer over *t (copied). Any thread. Returns
 * 0, -EINVAL (NULL out or t, no writev op, size 0 or above SSIZE_MAX),
 * -ENOMEM. */
RUNTIME_API int runtime_writer_create(struct runtime_writer **out,
                                      const struct runtime_transport *t, size_t size);

/* Free it (NULL: nothing). Never waits, so bytes not flushed are dropped:
 * flush first (runtime_writer_buffered says how many would be). Untie it
 * from any reader first. Not while a call on it runs. */
RUNTIME_API void runtime_writer_destroy(struct runtime_writer *w);

/*
 * Buffer len bytes of buf; when they do not fit in the free room, they go
 * out now together with what is buffered, in one writev (buf is not
 * copied), looping over short writes. Returns len, or -errno (sticky:
 * the transport's, -EIO if a writev took no byte), -EINVAL (NULL w, or
 * NULL buf with len > 0). Fiber context when it writes.
 */
RUNTIME_API ssize_t runtime_writer_write(struct runtime_writer *w, const void *buf, size_t len);

/* printf(3) into the writer's buffer (flushed first when the text does not
 * fit its free room; a text longer than the whole buffer is formatted in
 * a temporary one and written). Returns the bytes formatted, or -errno as
 * runtime_writer_write, -EINVAL (NULL w or fmt, an encoding error),
 * -ENOMEM. */
RUNTIME_API ssize_t runtime_writer_printf(struct runtime_writer *w, const char *fmt, ...);
ssize_t runtime_writer_printf(struct runtime_writer *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Write out everything buffered. Returns 0 (also with nothing buffered),
 * or -errno as runtime_writer_write. Fiber context when it writes. */
RUNTIME_API int runtime_writer_flush(struct runtime_writer *w);

/* Bytes buffered and not written yet (0 for NULL). */
RUNTIME_API size_t runtime_writer_buffered(const struct runtime_writer *w);

/* ------------------------------------------------------------------ copy */

#define RUNTIME_COPY_DEFAULT_CHUNK (64u * 1024)
#define RUNTIME_COPY_NO_SPLICE 0x1u   /* copy through a buffer only */
#define RUNTIME_COPY_KEEP_OPEN 0x2u   /* at src's end, leave dst open for
                                         writing (no close_write) */

/*
 * Move bytes from src to dst until src's end of stream, then pass the
 * half-close on (dst's close_write, unless RUNTIME_COPY_KEEP_OPEN). Where
 * src offers a read_fd and dst a write_fd, bytes go through a pipe with
 * runtime_splice, never through user space (chunk: the pipe size to ask
 * for, F_SETPIPE_SZ; a poll for POLLIN before each splice keeps an idle
 * copy out of the kernel's worker threads); else through a chunk-byte
 * buffer, one transport read and one complete write at a time (so bytes
 * src holds itself, a reader's, come first: it offers no read_fd while it
 * holds any). A splice the kernel refuses
 * (-EINVAL: an fd that cannot splice) falls back to the buffer, losing
 * nothing. chunk 0: RUNTIME_COPY_DEFAULT_CHUNK. Fiber context; the
 * fiber's deadline and cancel end it. Returns the bytes copied, or -errno
 * (the first error of either side: -ECONNRESET, -EPIPE, -ECANCELED,
 * -ETIMEDOUT, -EIO if a write took no byte, -EINVAL: NULL dst or src, a
 * missing read or writev, unknown flags; -ENOMEM, or pipe2's error);
 * *done (if not NULL) always receives the bytes that reached dst.
 */
RUNTIME_API ssize_t runtime_copy(const struct runtime_transport *dst,
                                 const struct runtime_transport *src, size_t chunk,
                                 unsigned flags, size_t *done);

/*
 * Copy a to b and b to a at once, each as runtime_copy(chunk, flags) in a
 * fiber of its own on the caller's core (inheriting its deadline), until
 * both have ended, or until the first error: then the other direction is
 * cancelled, and the call returns once both fibers have ended. *a_to_b
 * and *b_to_a (either may be NULL) receive the bytes each way. Fiber
 * context. Returns 0, the first error, -ECANCELED or -ETIMEDOUT (the
 * caller's), -EINVAL, -ENOMEM, -ESHUTDOWN, -EPERM (not a fiber).
 *
 * A caller cancelled (or past its deadline) while it waits still waits
 * for both fibers to end, inside a cleanup (runtime_cleanup_begin):
 * they are cancelled and end as soon as their transport calls return,
 * so a and b may be freed once this returns. Only a transport that does
 * not honour cancellation for 10 s leaves a fiber running past the return
 * (detached; a and b must then outlive it).
 */
RUNTIME_API int runtime_copy_both(const struct runtime_transport *a,
                                  const struct runtime_transport *b, size_t chunk,
                                  unsigned flags, size_t *a_to_b, size_t *b_to_a);

/* ------------------------------------------------------------ connections */

/*
 * A connection: a connected socket (read through a receive stream unless
 * RUNTIME_CONN_PLAIN_RECV), with a read and a write deadline that any
 * fiber of its core may set or move at any time, as Go's SetReadDeadline
 * and SetWriteDeadline do: moving one earlier than what a blocked read or
 * write waits under wakes it, and it fails with -ETIMEDOUT once the
 * deadline is past (or waits on under the new one until then). A read or
 * write runs under the earlier of that deadline and the calling fiber's
 * own. Nothing read is lost to a deadline: a read that completed as it
 * expired returns its bytes.
 *
 * A connection belongs to the core of the fiber that opened it: only
 * fibers of that core use it (else -EPERM), one reading and one writing
 * at a time. It offers a transport (runtime_conn_transport) for the
 * reader, the writer and copy; copy moves its bytes through a buffer, not
 * splice, so that its deadlines hold there too.
 */
struct runtime_conn; /* opaque */

#define RUNTIME_CONN_PLAIN_RECV 0x1u /* a recv per read, no receive stream */

/* Make fd (a connected socket; the connection owns it from now on) a
 * connection of the calling fiber's core. Fiber context. Returns 0,
 * -EINVAL (NULL, other flags), -EBADF (fd < 0), -ENOMEM (fd left open),
 * -EPERM (not a fiber). */
RUNTIME_API int runtime_conn_open(struct runtime_conn **conn, int fd, unsigned flags);

/* Close the socket and free the connection. Returns 0 (also for NULL) or
 * runtime_close's error (the connection is gone all the same, as after
 * free(3)), or -EBUSY (a fiber reads or writes it) or -EPERM (another
 * core): nothing changed then. */
RUNTIME_API int runtime_conn_close(struct runtime_conn *conn);

/*
 * Read up to len bytes (recv(2)), waiting under the read deadline if none
 * has come. Returns the bytes (> 0), 0 at end of stream, or -errno:
 * -ETIMEDOUT (the read deadline or the fiber's), -ECANCELED, -ESHUTDOWN
 * (the connection is idle - runtime_conn_set_idle - and the runtime
 * drains: close it), -EAGAIN (it is idle, and has been quiet for the
 * server's release_after: wait with runtime_conn_idle, or read again),
 * -ECONNRESET and the socket's other errors, -EINVAL, -EPERM (another
 * core, or another fiber reads it).
 */
RUNTIME_API ssize_t runtime_conn_read(struct runtime_conn *conn, void *buf, size_t len);

/* Write all len bytes under the write deadline. Returns len or -errno
 * (-ETIMEDOUT, -EPIPE, -ECONNRESET, -ECANCELED, -EINVAL, -EPERM, -EIO: a
 * send took no byte); *done
 * (if not NULL) receives the bytes written either way. */
RUNTIME_API ssize_t runtime_conn_write(struct runtime_conn *conn, const void *buf, size_t len,
                                       size_t *done);

/* Half-close: no more writes, the peer reads end of stream. Fibers of its
 * core. Returns 0 or -errno (-EPERM: another core). */
RUNTIME_API int runtime_conn_close_write(struct runtime_conn *conn);

/*
 * Set or move the read or the write deadline: an absolute runtime_now()
 * time, 0 for none. A read or write blocked under a later one wakes and
 * looks again. Any fiber of the connection's core. Returns 0, -EINVAL
 * (NULL) or -EPERM (another core).
 */
RUNTIME_API int runtime_conn_set_read_deadline(struct runtime_conn *conn, uint64_t deadline_ns);
RUNTIME_API int runtime_conn_set_write_deadline(struct runtime_conn *conn, uint64_t deadline_ns);

/*
 * An idle timeout: a read or write fails with -ETIMEDOUT once no byte has
 * moved either way on the connection for timeout_ns (0: none), whatever
 * the direction that waits - for a proxy, a connection whose two sides
 * are both silent. Each byte read or written starts it again; once it
 * has run out, every call fails -ETIMEDOUT until it is set again. Same
 * callers and errors as the deadline calls.
 */
RUNTIME_API int runtime_conn_set_idle_timeout(struct runtime_conn *conn, uint64_t timeout_ns);

/*
 * Mark the connection idle (waiting for its next request; nonzero) or
 * busy. While the runtime drains (runtime_drain), an idle connection's
 * reads give -ESHUTDOWN instead of waiting (unless bytes have come to its
 * receive stream), and runtime_serve wakes one waiting already: keep-alive
 * connections close at once while those in the middle of a request
 * finish it. Mark it idle only while nothing of the next request has been
 * read: with a buffered reader, around runtime_reader_peek(r, 1), not
 * around a read_line that may have taken half a line already. Same
 * callers and errors as the deadline calls.
 */
RUNTIME_API int runtime_conn_set_idle(struct runtime_conn *conn, int idle);

/*
 * Finish gracefully (a lingering close): shut the write side down, so that
 * the peer reads everything sent and then end of stream, and read and drop
 * what the peer still sends until its end of stream or timeout_ns. A
 * close with input unread makes the kernel reset the connection, which can
 * destroy the last reply before the peer reads it (an error answer to a
 * request whose body was not read). Close the connection after. Returns 0
 * (the peer's end of stream), -ETIMEDOUT, or the socket's error; a
 * cancelled fiber gets -ECANCELED at once (finish inside a cleanup,
 * runtime_cleanup_begin, to finish anyway).
 */
RUNTIME_API int runtime_conn_finish(struct runtime_conn *conn, uint64_t timeout_ns);

/* The socket (the connection's: do not close it). -EINVAL for NULL. */
RUNTIME_API int runtime_conn_fd(const struct runtime_conn *conn);

/*
 * Has the peer sent anything not read yet - bytes (in the receive stream
 * or a layer such as TLS), its end of stream, an error? 1 if so, 0 if
 * not, -EINVAL (NULL) or -EPERM (another core). No system call while the
 * receive stream watches the socket (runtime_stream_pending); one
 * non-blocking peek at the socket otherwise. Never waits. What a client
 * asks before it sends on a connection that sat idle: bytes that came
 * unasked (a stray answer, a 408) or the server's close mean the next
 * answer read there would not be the next request's. Fibers of its core.
 */
RUNTIME_API int runtime_conn_pending(const struct runtime_conn *conn);

/*
 * Cancel the calling fiber (runtime_fiber_cancel) when the peer closes or
 * resets the connection while the fiber does something else - a server's
 * handler waiting on a backend for a client that left. With on nonzero
 * the watch begins; with 0 it ends, and must end before the fiber does or
 * the connection waits idle. It fires when the receive stream, which
 * reads ahead of its user, gets the peer's end of stream or an error with
 * nothing unread queued before it and no fiber reading (a reader gets the
 * end itself). An end that came before the watch began is taken for a
 * half-close - a client that shut its side after its request and waits
 * for the answer - and not watched; one that comes during the watch
 * counts as gone, as nginx and Go count it. Bytes of the peer's held
 * by a layer (TLS), when the watch begins or after a read, mean more is
 * asked: no watch then, or none from then on. Returns, on: 0, or 1 if
 * the peer's end had come already or bytes wait in the layer (no watch);
 * off: 1 if the watch fired since it began, else 0; or -EINVAL (NULL),
 * -EPERM (another core,
 * not a fiber), -EOPNOTSUPP (on, but no receive stream:
 * RUNTIME_CONN_PLAIN_RECV), -EBUSY (the connection waits idle). A stream
 * that stopped reading ahead (64 KiB unread, or the buffers ran out)
 * notices no close until read. Fibers of its core.
 */
RUNTIME_API int runtime_conn_cancel_on_close(struct runtime_conn *conn, int on);

/* The peer's address and its length in *len (may be NULL), or NULL if it
 * cannot be known (the peer reset before it was asked). Looked up until
 * found, then kept. Fibers of its core. */
RUNTIME_API const struct sockaddr *runtime_conn_peer(struct runtime_conn *conn, socklen_t *len);

/* The connection as a transport (storage inside the connection, valid as
 * long as it is). NULL for NULL. */
RUNTIME_API const struct runtime_transport *runtime_conn_transport(struct runtime_conn *conn);

/* ------------------------------------------------------ connection layers */

/*
 * A layer between a connection's calls and its socket: a protocol that
 * transforms the bytes, as TLS does (libruntime-tls, <runtime_tls.h>,
 * sets one). Once set, runtime_conn_read, _write, the transport's writev,
 * _close_write (so _finish), _pending, _idle and _close go through it,
 * after the connection's own checks (core, arguments, the drain), each
 * with the state it was set with. The layer makes its own socket I/O with
 * the raw calls below, under the connection's deadlines, idle timeout
 * and drain; one layer reader and one layer writer may be in it at once
 * (the connection leaves their exclusion to it: a TLS reader sends the
 * alert its read made while the writer writes).
 */
struct runtime_conn_layer {
	ssize_t (*read)(struct runtime_conn *conn, void *state, void *buf, size_t len);
	ssize_t (*writev)(struct runtime_conn *conn, void *state, const struct iovec *iov,
	                  int iovcnt);
	int (*close_write)(struct runtime_conn *conn, void *state);
	/* Nonzero: bytes of the peer's held in the layer, that a read
	 * returns without the socket (a drain reads them first). */
	int (*pending)(const struct runtime_conn *conn, const void *state);
	/* The connection now waits with no fiber (runtime_conn_idle): give
	 * back what an idle connection need not hold. NULL: nothing. */
	void (*idle)(struct runtime_conn *conn, void *state);
	/* From runtime_conn_close, before the socket closes; never waits:
	 * frees the state (0), or -EBUSY (a fiber is in it: nothing changed,
	 * and the close fails -EBUSY). */
	int (*close)(struct runtime_conn *conn, void *state);
};

/*
 * Set conn's layer (layer and state stay the caller's until its close
 * runs). Fibers of its core, while no fiber reads or writes it. Returns 0,
 * -EINVAL (NULL conn or layer, or a layer lacking an operation but idle),
 * -EPERM (another core), -EBUSY (a fiber reads, writes or waits on it),
 * -EALREADY (it has a layer).
 */
RUNTIME_API int runtime_conn_set_layer(struct runtime_conn *conn,
                                       const struct runtime_conn_layer *layer, void *state);

/* conn's layer's state if its layer is layer (any layer, for NULL); NULL
 * if it has none, or another. Any thread, while conn is open. */
RUNTIME_API void *runtime_conn_layer(const struct runtime_conn *conn,
                                     const struct runtime_conn_layer *layer);

/*
 * A layer's own socket I/O (no layer in between), under the connection's
 * deadlines, idle timeout and drain, as runtime_conn_read and one send of
 * runtime_conn_write are without a layer: bytes (> 0; a send may be
 * short), 0 at end of stream, or -errno. runtime_conn_raw_peek points
 * *data at the receive stream's bytes queued in place (0: none queued, or
 * no stream: read), and runtime_conn_raw_consume marks n of them read;
 * as runtime_stream_peek and _consume, and the idle timeout starts again.
 * Fibers of the connection's core (-EPERM otherwise; -EINVAL for NULL).
 */
RUNTIME_API ssize_t runtime_conn_raw_read(struct runtime_conn *conn, void *buf, size_t len);
RUNTIME_API ssize_t runtime_conn_raw_send(struct runtime_conn *conn, const struct iovec *iov,
                                          int iovcnt);
RUNTIME_API ssize_t runtime_conn_raw_peek(struct runtime_conn *conn, const void **data);
RUNTIME_API int runtime_conn_raw_consume(struct runtime_conn *conn, size_t n);

/* ---------------------------------------------------------------- serving */

/*
 * Serve TCP on every core of a runtime: a listening socket per core with
 * SO_REUSEPORT (so that the kernel spreads connections over the cores; the
 * port must be free of other processes' sockets unless share_port), an
 * acceptor fiber per core, and a fiber per connection that runs
 * handler(conn, arg) and closes the connection when it returns (fibers the
 * handler started on it must have ended by then: a fiber group). At most
 * max_conns connections live at once over all cores: one more is accepted
 * and closed at once, and counted as refused. A drain (runtime_drain)
 * stops the acceptors and closes the idle connections
 * (runtime_conn_set_idle); those in the middle of a request go on. A
 * handler that serves one request at a time can end between requests
 * with runtime_conn_idle: an idle connection then holds no fiber.
 */
typedef void runtime_serve_fn(struct runtime_conn *conn, void *arg);

/* An accept-time layer (runtime_serve_config.layer): 0, and the handler
 * runs; or a negative errno, and the connection closes unserved, counted
 * in layer_failed. It may set a connection layer (runtime_conn_set_layer). */
typedef int runtime_serve_layer_fn(struct runtime_conn *conn, void *arg);

/*
 * Wait for the connection's next bytes with no fiber (runtime_stream_idle):
 * an idle keep-alive connection then costs no stack and no buffer. Call it
 * when nothing of the next request has been read, as the last thing before
 * the calling fiber returns; from then on only fn's fiber reads conn
 * (other fibers of its core may write it). fn(conn, arg) runs once, in a
 * new fiber of the connection's core, when bytes come (or the end of
 * stream, or an error), the read deadline or idle timeout passes, the
 * runtime drains or it shuts down, or runtime_conn_wake asks; the first
 * read in that fiber gives the reason if it was not bytes (-ETIMEDOUT,
 * -ESHUTDOWN, -ECANCELED, -EINTR). The connection is marked idle
 * (runtime_conn_set_idle) from the call on, until marked busy.
 *
 * For a connection of runtime_serve's, fn NULL means the server's handler:
 * the handler (or fn) runs again as when the connection came, and the
 * server closes the connection once one returns without having called
 * this. Any other connection needs fn, which then owns it.
 *
 * Without a receive stream (RUNTIME_CONN_PLAIN_RECV) fn's fiber starts at
 * once and waits for readiness itself, holding its stack; with bytes held
 * in a layer (TLS) it starts at once. A fiber of the connection's core.
 * Returns 0, or -errno and fn will not run: -EINVAL (NULL conn, or fn NULL
 * for a connection runtime_serve did not make), -EPERM (another core, not
 * a fiber), -EBUSY (another fiber reads or writes it, or it waits
 * already), -ECANCELED, -ETIMEDOUT (the caller's own state), -ENOMEM;
 * or 1 if a read would not wait (bytes, the end of stream or an error
 * have come to the receive stream): nothing waits, read in this fiber (fn
 * will not run).
 */
RUNTIME_API int runtime_conn_idle(struct runtime_conn *conn, runtime_serve_fn *fn, void *arg);

/*
 * End runtime_conn_idle's wait now, for another fiber of the core with
 * news for the connection's owner (a WebSocket closed from outside its
 * receiver): fn runs, and its first read returns -EINTR unless bytes came
 * first. Writes need no wake: while the wait lasts, fibers of the core may
 * write the connection. A fiber of the connection's core. Returns 0, or
 * -EALREADY (no wait, or its end is under way), -EINVAL (NULL), -EPERM
 * (another core).
 */
RUNTIME_API int runtime_conn_wake(struct runtime_conn *conn);

struct runtime_serve_config {
	const char *host;      /* a numeric address (runtime_tcp_listen's
	                          rules: NULL or "" is every IPv4 address,
	                          "::" every IPv6 one) */
	uint16_t port;         /* 0: a free port, the same on every core
	                          (runtime_server_port says which) */
	int backlog;           /* each socket's; <= 0: SOMAXCONN */
	int share_port;        /* nonzero: other processes may listen on the
	                          port too, and the kernel spreads connections
	                          over theirs and ours (a restart that hands
	                          over); default 0: a port another socket
	                          holds fails with -EADDRINUSE */
	unsigned max_conns;    /* 0: no limit */
	int nodelay;           /* nonzero: TCP_NODELAY on every connection
	                          (default 1) */
	int plain_recv;        /* nonzero: connections read with a recv each,
	                          not a receive stream (default 0) */
	int plain_accept;      /* nonzero: an accept per connection, not a
	                          listener's multishot (to measure what the
	                          listener saves; default 0) */
	runtime_serve_layer_fn *layer; /* an accept-time layer, run on each
	                          connection's fiber before the handler sees
	                          it (TLS's handshake: runtime_tls_serve in
	                          <runtime_tls.h> sets it); NULL: none */
	void *layer_arg;       /* its argument */
	runtime_serve_fn *handler;
	void *arg;
	const char *listen_name; /* socket activation (runtime_listen_fds):
	                          serve on the inherited socket of this name
	                          (LISTEN_FDNAMES); NULL: on the first one
	                          untaken whose port is port (any, for port
	                          0). No socket inherited, or none of that
	                          port: bind as usual */
	int notify_ready;      /* nonzero: runtime_notify("READY=1") once
	                          every core's acceptor runs (default 1) */
	uint64_t release_after_ns; /* nonzero: a read of a connection marked
	                          idle (runtime_conn_set_idle) that has waited
	                          this long - up to twice as long: a sweep per
	                          period - returns -EAGAIN, for the handler to
	                          hand the connection to runtime_conn_idle and
	                          give its stack back (default 0: never) */
	int log_fd;            /* accepts that fail (out of fds or memory: the
	                          acceptor retries every 10 ms) are told here,
	                          a line a second at most for the server, with
	                          how many failed (runtime_log; default 2:
	                          standard error; -1: none) */
};

/*
 * systemd's socket activation (sd_listen_fds(3), written to the protocol:
 * no libsystemd). When LISTEN_PID is this process, take the LISTEN_FDS
 * sockets it passed at fds 3 .. 3+LISTEN_FDS-1, with their LISTEN_FDNAMES
 * names, into a process-wide table for runtime_serve, each checked (a
 * listening stream socket) and marked close-on-exec, and unset the three
 * variables so that children do not take them (a LISTEN_PID of another
 * process is dropped so too). runtime_serve calls it; call it first to
 * know, or to have bad values reported before anything starts. A
 * runtime_serve with sockets inherited serves on one of them instead of
 * binding, on every core: the one named listen_name - none untaken of
 * that name is -ENOENT - or else the first whose port is the config's
 * (any for port 0); with none of that port it binds as usual. The
 * server owns the socket from then (it closes it when destroyed); the
 * config's host is not checked (the manager chose the address), and a
 * stop or drain leaves the socket listening for the manager. Any thread;
 * not concurrently with getenv/setenv. Returns the number of sockets
 * inherited (0: none, or none for us), or -EINVAL (a variable is not a
 * number, LISTEN_FDS over 4096, LISTEN_FDNAMES does not name each fd, an
 * fd is not a listening stream socket), -EBADF (an fd is not open),
 * -ENOMEM; the reason is logged on stderr and nothing is taken.
 */
RUNTIME_API int runtime_listen_fds(void);

/* The defaults above, handler NULL. Any thread. */
RUNTIME_API void runtime_serve_config_init(struct runtime_serve_config *cfg);

struct runtime_server; /* opaque */

/*
 * Start serving: the sockets are open and listening when this returns,
 * and the fibers are spawned (they run with runtime_run). From the
 * creating thread before runtime_run, or a fiber. The server lives until
 * runtime_server_destroy, after runtime_run has returned. Returns 0,
 * -EINVAL (NULL, no handler, a tls context that cannot serve; socket
 * activation's errors: runtime_listen_fds), -ENOENT (no inherited socket
 * has listen_name),
 * -ESHUTDOWN (shut down or draining), -ENOMEM,
 * or runtime_tcp_listen's error (-EADDRINUSE...); *srv is NULL and
 * nothing is left open then - except when some of the server's fibers
 * started and a later one could not be (-ENOMEM, or -ESHUTDOWN: shut down
 * meanwhile): *srv is set all the same, stopped; destroy it after the run.
 */
RUNTIME_API int runtime_serve(struct runtime *rt, const struct runtime_serve_config *cfg,
                              struct runtime_server **srv);

/* The port every core listens on. Any thread. 0 for NULL. */
RUNTIME_API uint16_t runtime_server_port(const struct runtime_server *srv);

struct runtime_server_stats {
	uint64_t accepted;     /* connections accepted (with an accept-time
	                          layer, those it refused too: layer_failed) */
	uint64_t refused;      /* over max_conns, or no memory for them */
	uint64_t errors;       /* accepts that failed (-EMFILE...): each
	                          core's acceptor backs off 10 ms and goes on */
	uint64_t layer_failed; /* connections the accept-time layer refused
	                          (TLS: handshakes that failed), closed
	                          unserved */
	unsigned live;         /* open now */
	uint64_t moved_in;     /* idle connections a predecessor handed over
	                          (a restart: runtime_restart_enable) */
	uint64_t moved_out;    /* idle connections handed to a successor */
};

/* A snapshot (each figure read atomically). Any thread. Zeroed for NULL. */
RUNTIME_API void runtime_server_stats(const struct runtime_server *srv,
                                      struct runtime_server_stats *st);

/* Stop accepting (every core's acceptor ends; live connections go on).
 * Any thread, any number of times. Returns 0 or -EINVAL (NULL). */
RUNTIME_API int runtime_server_stop(struct runtime_server *srv);

/* Close the sockets and free the server: after runtime_run has returned
 * (its fibers have ended). NULL: nothing. */
RUNTIME_API void runtime_server_destroy(struct runtime_server *srv);

/* -------------------------------------------------------------- restarts */

/*
 * A restart that loses nothing (as nginx's binary upgrade, and more): on
 * the signal (SIGUSR2) or runtime_restart, the process starts its
 * successor - the program on disk now, with this process's arguments -
 * and hands it every server's listening sockets (SCM_RIGHTS over a unix
 * socket pair; the successor finds it in RUNTIME_HANDOVER_FD, and its
 * runtime_serve takes the sockets of its port instead of binding). Once
 * every server of the successor's that took sockets accepts on them, it
 * reports ready; then this process stops accepting (leaving the sockets
 * listening: connections waiting in their backlogs go to the successor),
 * hands its idle HTTP/1.1 keep-alive connections over (a connection with
 * no request in progress and no byte read ahead: runtime_conn_handover;
 * clients keep their pooled connections) and drains (runtime_drain with
 * grace_ns): requests in progress finish, their connections closing
 * after the answer. A successor that fails to start, exits, or is not
 * ready within ready_timeout_ns (it is killed then) leaves this process
 * serving, the reason logged on stderr; a request while a restart is
 * under way is logged and dropped. TLS and HTTP/2 connections are not
 * handed over (their state is this process's): they end as at a drain.
 * The successor must serve at least the ports it is handed, or it never
 * reports ready. Under systemd, the unit needs NotifyAccess=all (the
 * successor says READY=1 with STATUS=took over); its main PID changes.
 */
struct runtime_restart_config {
	const char *path;          /* the successor's program; NULL: this
	                              process's (its path when enabled) */
	char *const *argv;         /* its arguments (copied); NULL: this
	                              process's (/proc/self/cmdline) */
	uint64_t ready_timeout_ns; /* 0: 30 s */
	uint64_t grace_ns;         /* the drain after the handover; 0: 30 s */
	int signal;                /* the signal that restarts (default
	                              SIGUSR2); 0: none, runtime_restart only */
};

/* The defaults above. NULL: nothing. */
RUNTIME_API void runtime_restart_config_init(struct runtime_restart_config *cfg);

/*
 * Restart on cfg->signal (a handler is installed for it) and on
 * runtime_restart; cfg NULL: the defaults. Spawns the restarter on core 0
 * (it ends at the drain). Once per process, from the thread that runs rt
 * before runtime_run (or a fiber). Returns 0, -EINVAL (NULL rt, a bad
 * signal), -EBUSY (enabled already), -ENOENT (this program's path cannot
 * be read), -ENOMEM, or -errno of eventfd(2), sigaction(2) or the spawn.
 */
RUNTIME_API int runtime_restart_enable(struct runtime *rt,
                                       const struct runtime_restart_config *cfg);

/* Ask for a restart (as the signal does): the restarter starts one unless
 * one is under way. Any thread, even a signal handler. Returns 0, or
 * -ENOTCONN (not enabled). */
RUNTIME_API int runtime_restart(void);

/*
 * Hand an idle connection of runtime_serve's to the successor during a
 * restart's handover: what a protocol calls at a boundary between its
 * messages, when a read returned -ESHUTDOWN and it holds nothing of the
 * peer's (the HTTP/1.1 server does, between requests). The connection's
 * receive stream is stopped first (runtime_stream_stop): if bytes came
 * meanwhile, nothing moves and the caller reads them (1). After 0 the
 * socket is the successor's: close the connection (runtime_conn_close),
 * which can no longer reach the peer. A fiber of its core, none other
 * reading or writing it. Returns 0, 1, -ENOTCONN (no handover under way,
 * or not a connection of runtime_serve's), -EPROTONOSUPPORT (a layer,
 * such as TLS, holds its state), -EBUSY (another fiber reads or writes
 * it), -ECONNRESET (the peer has closed: nothing to move), or -errno of
 * the stop or of sendmsg(2) (then close it as usual).
 */
RUNTIME_API int runtime_conn_handover(struct runtime_conn *conn);

/* ---------------------------------------------------------- rate limits */

/*
 * A rate limiter (a token bucket): tokens come back at rate per second, up
 * to burst at once, and a bucket starts full. One limiter may be shared by
 * fibers and threads of every core (no lock is held across a wait), and
 * it arms no timer: it refills on demand from runtime_now(). Waiters are
 * served in arrival order: a take that must wait reserves its tokens at
 * once (the bucket goes into debt) and sleeps until its reservation is
 * due, so later takes and tries queue behind it; one that is cancelled, or
 * whose deadline passes, gives back what of its reservation no later one
 * was made on top of.
 */
struct runtime_ratelimit; /* opaque */

/* rate: tokens per second, 0.001 to 10^12 (a fraction: e.g. 1/60.0 is one
 * a minute); burst >= 1. Any thread. Returns 0, -EINVAL or -ENOMEM. */
RUNTIME_API int runtime_ratelimit_create(struct runtime_ratelimit **rl, double rate,
                                         unsigned burst);

/* Free it: 0 (also for NULL), or -EBUSY while fibers wait in take (it
 * stays). As for the sync objects, every thread's call must have returned
 * before it is freed. */
RUNTIME_API int runtime_ratelimit_destroy(struct runtime_ratelimit *rl);

/* Take n tokens if they are there now and nobody waits before the
 * caller, else -EAGAIN (nothing taken). n 0 takes nothing. Any thread.
 * Returns 0, -EAGAIN, -EINVAL (NULL, n > burst). */
RUNTIME_API int runtime_ratelimit_try_take(struct runtime_ratelimit *rl, unsigned n);

/*
 * Take n tokens, waiting for them if need be: at most timeout_ns (negative:
 * no limit but the fiber's deadline). A wait that would outlast the
 * timeout or the fiber's deadline fails at once with -ETIMEDOUT, taking
 * nothing. Tokens there now are taken even by a cancelled fiber or one
 * past its deadline. Fiber context. Returns 0, -ETIMEDOUT, -ECANCELED (its
 * reservation given back), -EINVAL (NULL, n > burst: it could never
 * fit), -EPERM (not a fiber).
 */
RUNTIME_API int runtime_ratelimit_take(struct runtime_ratelimit *rl, unsigned n,
                                       int64_t timeout_ns);

/* Whole tokens there now (burst at most); negative while waiters have
 * reserved beyond the bucket: what they owe. Any thread; a snapshot. NULL:
 * 0. */
RUNTIME_API int64_t runtime_ratelimit_available(const struct runtime_ratelimit *rl);

/*
 * Token buckets by key (a client's address, an API key: any bytes, at
 * most RUNTIME_RATELIMIT_KEY_MAX of them), each as runtime_ratelimit's:
 * rate tokens per second, at most burst at once, full when first seen.
 * One limiter serves every core and thread. Memory is bounded: at most
 * max_keys keys are held (about 130 bytes each, made at create), in shards
 * that each evict their least recently used key when full; a key evicted
 * and seen again starts full. A call hashes its key under a secret made
 * at create (a client cannot aim its keys at one chain), then holds one
 * shard's spinlock for a lookup and a few operations: one lock, no other
 * atomic, nothing allocated. Callers that need waiting use a
 * runtime_ratelimit per key of their own.
 */
#define RUNTIME_RATELIMIT_KEY_MAX 64
#define RUNTIME_RATELIMIT_KEYS_MOST (1u << 24)
struct runtime_ratelimit_keyed; /* opaque */

/* rate as runtime_ratelimit_create's; burst >= 1; max_keys 1 to
 * RUNTIME_RATELIMIT_KEYS_MOST. Any thread. 0, -EINVAL or -ENOMEM. */
RUNTIME_API int runtime_ratelimit_keyed_create(struct runtime_ratelimit_keyed **rl, double rate,
                                               unsigned burst, size_t max_keys);
/* Free it (NULL: nothing). Every thread's call must have returned. */
RUNTIME_API void runtime_ratelimit_keyed_destroy(struct runtime_ratelimit_keyed *rl);
/*
 * Take n tokens from key[0..len)'s bucket if they are there now: 0, else
 * -EAGAIN (nothing taken) and, if wait_ns is not NULL, the nanoseconds
 * until they would be (e.g. for a Retry-After field). n 0 takes nothing.
 * -EINVAL: NULL rl or key, len over RUNTIME_RATELIMIT_KEY_MAX, n over
 * burst. Any thread; never waits but for the shard's lock.
 */
RUNTIME_API int runtime_ratelimit_keyed_try_take(struct runtime_ratelimit_keyed *rl,
                                                 const void *key, size_t len, unsigned n,
                                                 uint64_t *wait_ns);
/* The keys held now (max_keys at most). Any thread; a snapshot. */
RUNTIME_API size_t runtime_ratelimit_keyed_keys(struct runtime_ratelimit_keyed *rl);

#ifdef __cplusplus
}
#endif
#endif /* RUNTIME_TOOLKIT_H */
