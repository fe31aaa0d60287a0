/* SPDX-License-Identifier: MIT */
/*
 * engine.h - the small interface between the core and the kernel's I/O
 * interface (never installed). Each runtime picks one engine at
 * runtime_create and every core runs it:
 *
 *  - engine/uring.c: io_uring, wherever the kernel allows it. An operation
 *    is an SQE; the fiber parks until every CQE that names it has come.
 *  - engine/epoll.c: readiness, where io_uring is refused (a seccomp
 *    filter, kernel.io_uring_disabled, an old kernel). An operation is
 *    tried at once without blocking; on EAGAIN the fiber parks on the fd's
 *    readiness in the core's epoll set. Regular files, which epoll cannot
 *    wait on, go to the offload pool.
 *
 * The core calls an engine for five things: start and stop a core, run
 * one operation for a fiber (io), arm what will wake a core that is about
 * to sleep, and the loop's one trip to the kernel per turn (poll). Above
 * this line nothing knows which engine runs; below it, each engine keeps
 * the fiber's contract: deadlines, cancellation that never leaves the
 * kernel writing to a stack that moved on, no fd leaked by a cancelled
 * accept or open.
 */
#ifndef RUNTIME_ENGINE_H
#define RUNTIME_ENGINE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "sys.h"

struct core;
struct fiber;
struct mshot;
struct runtime;
struct runtime_config;
struct open_how;
struct statx;

/* ------------------------------------------------------------ operations */

/* Every blocking call of io.c, as one request to the engine. */
enum io_kind {
	IO_READ, IO_WRITE, IO_READV, IO_WRITEV, IO_RECV, IO_SEND, IO_RECVMSG,
	IO_SENDMSG, IO_ACCEPT, IO_CONNECT, IO_OPENAT, IO_OPENAT2, IO_STATX,
	IO_SPLICE, IO_FSYNC, IO_SHUTDOWN, IO_POLL, IO_CLOSE,
	IO_KINDS
};


/*
 * One operation, on the calling fiber's stack for the length of the call.
 * Only the fields its kind names are set; the engine reads no other.
 */
struct io_req {
	uint8_t kind;               /* enum io_kind */
	int fd;                     /* splice: fd_in; openat, statx: dirfd */
	int flags;                  /* recv/send/msg flags, accept4 flags,
	                               openat and statx flags, shutdown how,
	                               poll events, fsync datasync, splice flags */
	unsigned len;               /* bytes (capped at RW_MAX), iovcnt, statx
	                               mask */
	union {
		void *buf;
		const void *cbuf;
		const struct iovec *iov;
		struct msghdr *msg;
		struct sockaddr *addr;          /* accept (may be NULL) */
		const struct sockaddr *caddr;   /* connect */
		const char *path;               /* openat, openat2, statx */
	};
	union {
		socklen_t *addrlen;             /* accept */
		socklen_t alen;                 /* connect */
		unsigned mode;                  /* openat */
		const struct open_how *how;     /* openat2 */
		struct statx *stx;              /* statx */
		int fd_out;                     /* splice */
	};
	int64_t off;                /* read/write: the offset, -1 for the
	                               file's own; splice: off_in */
	int64_t off_out;            /* splice */
	uint64_t deadline;          /* the call's own (absolute ns), NEVER for
	                               none; the fiber's deadline applies too */
};

/* Linux's own cap on one read or write (MAX_RW_COUNT). */
#define RW_MAX 0x7ffff000u

/*
 * What a fiber blocked in I/O waits on: the wait_obj of BLOCK_IO. Each
 * engine's wait record begins with it, so that runtime_dump and the gdb
 * script can name the operation whatever the engine.
 */
struct io_wait {
	uint8_t kind;               /* enum io_kind */
	int fd;
};

/* The syscall's name of w's kind ("recv"), for runtime_dump. */
const char *runtime__io_wait_name(const struct io_wait *w);

/* r, an IO_SEND of len bytes (r->len or fewer) or an IO_SENDMSG, as one
 * system call with flags added to its own (MSG_DONTWAIT: never blocking)
 * and MSG_NOSIGNAL, as io_uring's send: bytes sent or -errno. Raw system
 * calls: libruntime-preload's send() would come back here. Both engines':
 * each of epoll's sends, io_uring's sends made at once. */
static inline long runtime__send_syscall(const struct io_req *r, size_t len, int flags)
{
	flags |= r->flags | MSG_NOSIGNAL;
	if (r->kind == IO_SENDMSG)
		return runtime__sys6(SYS_sendmsg, r->fd, (long)r->msg, flags, 0, 0, 0);
	return runtime__sys6(SYS_sendto, r->fd, (long)r->cbuf, (long)len, flags, 0, 0);
}

/* ------------------------------------------------- multishot results */

/*
 * What an engine reports of a multishot request (struct mshot, a receive
 * stream's recv or a listener's accept) with each result, to
 * runtime__mshot_deliver(m, res, flags): res is the bytes received, an
 * accepted fd, 0 (the end of stream) or -errno; flags say
 *   MSHOT_F_MORE    the request goes on (else this result is its last:
 *                   -ENOBUFS when the engine's receive buffers ran out),
 *   MSHOT_F_BUFFER  the bytes are in buffer (flags >> MSHOT_BUF_SHIFT) of
 *                   the core's pool (bufpool.h), taken by the engine.
 * The values are io_uring's CQE flags (the io_uring engine passes a CQE's
 * flags through; it checks that they agree), chosen so for that alone.
 */
#define MSHOT_F_BUFFER 0x1u
#define MSHOT_F_MORE 0x2u
#define MSHOT_BUF_SHIFT 16

/* ---------------------------------------------------------------- engines */

struct engine {
	const char *name;           /* "io_uring", "epoll": runtime_engine_name */
	int id;                     /* enum runtime_engine */
	/* On the core's own thread, at the start of each run; -errno if the
	 * core cannot run (the run fails). */
	int (*core_start)(struct core *c);
	/* At the end of a run: nothing in the kernel names a fiber or the
	 * core any more once it returns. */
	void (*core_stop)(struct core *c);
	/* Run r for fiber f (its core's thread; f may block) and return the
	 * syscall's result or -errno: -ECANCELED, -ETIMEDOUT for r->deadline
	 * or the fiber's. IO_CLOSE always closes: no cancel, no deadline. */
	long (*io)(struct fiber *f, struct io_req *r);
	/* The core has nothing to run: arm whatever must wake it (the nearest
	 * timer, the eventfd other threads write). */
	void (*prepare_sleep)(struct core *c);
	/* The loop's one trip to the kernel per turn: hand over prepared work
	 * and, if block, wait for at least one completion or readiness, or
	 * the nearest timer. Then resume whom it concerns. 0, or -errno when
	 * the engine itself broke (the run fails). */
	int (*poll)(struct core *c, bool block);
	/* Spin up to ns before sleeping (loop.c says when); true if work
	 * came. */
	bool (*busy_poll)(struct core *c, uint64_t ns);
	/* Core 0 of a runtime with runtime_shutdown_on_signals: watch the
	 * signalfd (runtime_shutdown when it reads a signal). */
	void (*watch_signals)(struct core *c);
	/* A multishot request of a receive stream or listener (struct mshot,
	 * mshot.h): arm it to feed runtime__mshot_deliver (io_uring: one
	 * SQE; epoll: reads or accepts on each readiness), and stop it (once
	 * nothing more can come, !m->armed; io_uring gets there
	 * asynchronously, and calls runtime__mshot_quiet then). */
	void (*mshot_arm)(struct mshot *m);
	void (*mshot_stop)(struct mshot *m);
	/* A new fd reached fiber code on core c (an accept): take it up as
	 * the engine's features want (io_uring: a fixed file, where
	 * runtime_config.fixed_files asks). NULL: nothing to do. */
	void (*fd_adopt)(struct core *c, int fd);
};

/*
 * Before fd is closed, anywhere in the process and whatever the calling
 * runtime's engine: a registration of its number in some io_uring ring
 * (a fixed file, engine/uring_fixed.c) is released, so that no ring keeps
 * the file open under a number the kernel hands out again. Returns 0
 * (nothing registered, or released: the caller closes fd), 1 (handed to
 * the holding core, which closes it) or -ENOMEM (fd left open).
 */
int runtime__fixed_release(int fd);

extern const struct engine runtime__engine_uring;
extern const struct engine runtime__engine_epoll;

/*
 * Can io_uring run here, as cfg asks? Returns the ring setup flags to use
 * (>= 0), or -errno: -EPERM (refused: a seccomp filter, or
 * kernel.io_uring_disabled), -ENOSYS (no io_uring in this kernel),
 * -EOPNOTSUPP (a feature the runtime needs is missing), -ENOMEM.
 * runtime_io_uring_check (choose.c) turns the error into a sentence.
 */
int runtime__uring_probe(const struct runtime_config *cfg);

/* The engine for cfg and the environment (RUNTIME_ENGINE), probing
 * io_uring where it may be used: 0 with rt->eng, rt->setup_flags and
 * rt->engine_reason set, or -errno (runtime__uring_probe's refusals when
 * io_uring alone was asked for, -EINVAL for a bad RUNTIME_ENGINE). */
int runtime__engine_choose(struct runtime *rt);

#endif /* RUNTIME_ENGINE_H */
