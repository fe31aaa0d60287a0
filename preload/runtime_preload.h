/* SPDX-License-Identifier: MIT */
/*
 * runtime_preload.h - libruntime-preload: unmodified blocking code on
 * fibers.
 *
 * The library defines read, write, readv, writev, pread, pwrite, recv,
 * recvfrom, send, sendto, recvmsg, sendmsg, accept, accept4, connect,
 * poll, ppoll, select, nanosleep, clock_nanosleep, usleep, sleep, close
 * and getaddrinfo (and the names _FORTIFY_SOURCE and 64-bit offsets link
 * against: __read_chk, __recv_chk, __recvfrom_chk, __pread_chk,
 * __pread64_chk, __poll_chk, pread64, pwrite64, fcntl64). Load it with
 * LD_PRELOAD, or link it before libc (-lruntime-preload): then libraries
 * that know nothing of fibers - a database client, an HTTP client - park
 * the calling fiber where they would have blocked its thread.
 *
 * Rules:
 *  - Outside a fiber (any thread that is not running a fiber of a runtime,
 *    including the offload pool and a core's own loop), every call is
 *    libc's, unchanged: the next definition, found once with
 *    dlsym(RTLD_NEXT).
 *  - In a fiber, on an fd the program has made non-blocking (O_NONBLOCK,
 *    SOCK_NONBLOCK, FIONBIO) or with MSG_DONTWAIT, the call is libc's too:
 *    EAGAIN stays EAGAIN. On a blocking fd it is one io_uring operation
 *    of the runtime (runtime_read, ...), and the fiber parks until it
 *    completes. Results and errno are libc's: a blocking write or send to
 *    a stream writes everything (or returns the count written before an
 *    error); SO_RCVTIMEO and SO_SNDTIMEO are honoured (EAGAIN, or
 *    EINPROGRESS for connect, when they expire).
 *  - poll, ppoll and select take their answer from libc's call with a
 *    zero timeout and park on one poll SQE (one fd) or on an epoll set
 *    (several: n + 2 extra system calls per wait). ppoll's signal mask
 *    covers those zero-timeout checks, not the time parked.
 *  - Sleeps are runtime_sleep: other fibers run meanwhile.
 *  - close is runtime_close (it releases a fixed-file registration too).
 *  - getaddrinfo runs libc's on the offload pool; its EAI_* result and
 *    errno are libc's.
 *  - fcntl(F_SETFL), ioctl(FIONBIO), setsockopt(SO_RCVTIMEO, SO_SNDTIMEO),
 *    socket, socketpair, accept, dup, dup2, dup3 and close only keep the
 *    library's per-fd table right: they are libc's calls.
 *
 * A cancelled fiber, or one past its deadline (runtime_deadline_set):
 *  - every wrapped call that would park returns -1 with errno ECANCELED,
 *    or ETIMEDOUT; ordinary code treats both as a failed call and
 *    unwinds. Not EINTR or EAGAIN: retry loops would retry at once,
 *    forever, since a cancel or a passed deadline is sticky.
 *  - a write that had written some bytes returns their count; the next
 *    call reports the cancel.
 *  - nanosleep also fills in *rem; sleep returns 0 (never the seconds
 *    left, which "sleep until done" loops would retry forever).
 *  - getaddrinfo returns EAI_SYSTEM with errno ECANCELED or ETIMEDOUT.
 *  - close always closes.
 *
 * Limits: libc's own internal calls (stdio's writes, a resolver's
 * sockets) do not go through these names and still block the thread.
 * The per-fd table is a cache of what the kernel says, refreshed whenever
 * a wrapped call creates, closes or changes an fd; an fd closed and
 * re-created behind the wrappers after its first use in a fiber, or whose
 * O_NONBLOCK another process changes, may be seen with its old flags.
 * Fds past 65,535 are looked up in the kernel on every call (slower,
 * still right). Sanitizers: link the library into the program rather
 * than LD_PRELOAD it (the sanitizer runtime must come first); their
 * interceptors then call these wrappers.
 */
#ifndef RUNTIME_PRELOAD_H
#define RUNTIME_PRELOAD_H

#ifdef __cplusplus
extern "C" {
#endif

/* Returns 1: referencing it keeps a linker that drops unused libraries
 * (--as-needed) from dropping this one. */
__attribute__((visibility("default"))) int runtime_preload_linked(void);

#ifdef __cplusplus
}
#endif
#endif
