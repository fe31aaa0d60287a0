/* SPDX-License-Identifier: MIT */
/*
 * internal.h - what the interposition library's files share: libc's own
 * definitions of the calls it wraps (found once with dlsym(RTLD_NEXT)),
 * the per-fd table that remembers O_NONBLOCK and socket timeouts, and the
 * translation of the runtime's -errno results into libc's -1 and errno.
 */
#ifndef PRELOAD_INTERNAL_H
#define PRELOAD_INTERNAL_H

#include "runtime_preload.h"

#include <errno.h>
#include <poll.h>
#include <runtime.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

struct addrinfo;

/* The wrappers are the library's only exported symbols (it is built with
 * -fvisibility=hidden). bench/micro compiles the same sources with
 * PRELOAD_PREFIX defined, which renames every wrapper (read becomes
 * preload_read) so that it can call both without interposing anything. */
#ifdef PRELOAD_PREFIX
#define HOOK(name) preload_##name
#else
#define HOOK(name) name
#endif
#define PRELOAD_API __attribute__((visibility("default")))

/* Every wrapper (libc declares most of them already; the prefixed names
 * and the _FORTIFY_SOURCE ones need it here). */
ssize_t HOOK(read)(int fd, void *buf, size_t len);
ssize_t HOOK(write)(int fd, const void *buf, size_t len);
ssize_t HOOK(readv)(int fd, const struct iovec *iov, int iovcnt);
ssize_t HOOK(writev)(int fd, const struct iovec *iov, int iovcnt);
ssize_t HOOK(pread)(int fd, void *buf, size_t len, off_t offset);
ssize_t HOOK(pwrite)(int fd, const void *buf, size_t len, off_t offset);
ssize_t HOOK(pread64)(int fd, void *buf, size_t len, off64_t offset);
ssize_t HOOK(pwrite64)(int fd, const void *buf, size_t len, off64_t offset);
ssize_t HOOK(recv)(int fd, void *buf, size_t len, int flags);
ssize_t HOOK(recvfrom)(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
                       socklen_t *addrlen);
ssize_t HOOK(send)(int fd, const void *buf, size_t len, int flags);
ssize_t HOOK(sendto)(int fd, const void *buf, size_t len, int flags,
                     const struct sockaddr *addr, socklen_t addrlen);
ssize_t HOOK(recvmsg)(int fd, struct msghdr *msg, int flags);
ssize_t HOOK(sendmsg)(int fd, const struct msghdr *msg, int flags);
int HOOK(accept)(int fd, struct sockaddr *addr, socklen_t *addrlen);
int HOOK(accept4)(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
int HOOK(connect)(int fd, const struct sockaddr *addr, socklen_t addrlen);
int HOOK(poll)(struct pollfd *fds, nfds_t nfds, int timeout_ms);
int HOOK(ppoll)(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
                const sigset_t *sigmask);
int HOOK(select)(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv);
int HOOK(nanosleep)(const struct timespec *req, struct timespec *rem);
int HOOK(clock_nanosleep)(clockid_t clock, int flags, const struct timespec *req,
                          struct timespec *rem);
int HOOK(usleep)(useconds_t us);
unsigned HOOK(sleep)(unsigned seconds);
int HOOK(close)(int fd);
int HOOK(getaddrinfo)(const char *node, const char *service, const struct addrinfo *hints,
                      struct addrinfo **res);
int HOOK(socket)(int domain, int type, int protocol);
int HOOK(socketpair)(int domain, int type, int protocol, int sv[2]);
int HOOK(dup)(int oldfd);
int HOOK(dup2)(int oldfd, int newfd);
int HOOK(dup3)(int oldfd, int newfd, int flags);
int HOOK(fcntl)(int fd, int cmd, ...);
int HOOK(fcntl64)(int fd, int cmd, ...);
int HOOK(ioctl)(int fd, unsigned long request, ...);
int HOOK(setsockopt)(int fd, int level, int name, const void *value, socklen_t len);
ssize_t HOOK(__read_chk)(int fd, void *buf, size_t len, size_t buflen);
ssize_t HOOK(__pread_chk)(int fd, void *buf, size_t len, off_t offset, size_t buflen);
ssize_t HOOK(__pread64_chk)(int fd, void *buf, size_t len, off64_t offset, size_t buflen);
ssize_t HOOK(__recv_chk)(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t HOOK(__recvfrom_chk)(int fd, void *buf, size_t len, size_t buflen, int flags,
                             struct sockaddr *addr, socklen_t *addrlen);
int HOOK(__poll_chk)(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
void __chk_fail(void) __attribute__((noreturn));

/* libc's definitions, each resolved on first use (an atomic pointer). */
struct preload_real {
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*pread)(int, void *, size_t, off_t);
	ssize_t (*pwrite)(int, const void *, size_t, off_t);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*nanosleep)(const struct timespec *, struct timespec *);
	int (*clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
	int (*usleep)(useconds_t);
	unsigned (*sleep)(unsigned);
	int (*close)(int);
	int (*getaddrinfo)(const char *, const char *, const struct addrinfo *,
	                   struct addrinfo **);
	int (*fcntl)(int, int, ...);
	int (*ioctl)(int, unsigned long, ...);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*socket)(int, int, int);
	int (*socketpair)(int, int, int, int[2]);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
};

extern struct preload_real runtime__preload_real_;

/* libc's name, resolved once: REAL(read)(fd, buf, len). */
void *runtime__preload_resolve(void **slot, const char *name);
#define REAL(name)                                                                  \
	((__typeof__(runtime__preload_real_.name))(                                          \
		__atomic_load_n((void **)&runtime__preload_real_.name, __ATOMIC_ACQUIRE)     \
			?: runtime__preload_resolve((void **)&runtime__preload_real_.name, #name)))

/* What the table knows of an fd, for the call at hand. */
struct fd_info {
	bool nonblock;       /* O_NONBLOCK: the call goes to libc as it is */
	bool socket;
	bool seekable;       /* pread and pwrite work; else libc's ESPIPE
	                        (the ring waits for a socket's data instead) */
	bool stream;         /* a SOCK_STREAM socket, a pipe or a file: a
	                        blocking write writes everything */
	int64_t rcvtimeo_ns; /* SO_RCVTIMEO, 0: none */
	int64_t sndtimeo_ns; /* SO_SNDTIMEO, 0: none */
};

/* True if the caller is a fiber of a runtime, on its core thread: the
 * only case in which a wrapper does anything but call libc. */
static inline bool preload_in_fiber(void)
{
	return runtime_fiber_self() != NULL;
}

/*
 * What fd is, from the table, asking the kernel (F_GETFL, SO_TYPE,
 * SO_RCVTIMEO, SO_SNDTIMEO, lseek) the first time the number is used after it
 * was created or closed. Returns false for a number the kernel does not
 * know (the caller lets libc report EBADF).
 */
bool runtime__preload_fd_info(int fd, struct fd_info *info);

/* The number now names a new file (or none): forget what was known. */
void runtime__preload_fd_forget(int fd);
/* fd's file is now shared with another number (dup): a change of flags
 * through one must be seen through the other. */
void runtime__preload_fd_shared(int fd);
/* The program changed O_NONBLOCK or a socket timeout of fd. */
void runtime__preload_fd_changed(int fd);

/* A timeval in ns, saturated; negative: none (NULL) or invalid. */
int64_t runtime__preload_timeval_ns(const struct timeval *tv);
/* A valid timespec (what nanosleep and ppoll accept) in ns, saturating at
 * INT64_MAX: too long to count is "never", not "at once". -1 if invalid. */
int64_t runtime__preload_timespec_ns(const struct timespec *ts);

/*
 * Run a blocking runtime call under an extra timeout (a socket's
 * SO_RCVTIMEO): the fiber's deadline is lowered for the call and put back.
 * runtime__preload_timeout_end returns rc, with -ETIMEDOUT turned into
 * timeout_errno when it was this timeout, not the fiber's own deadline,
 * that ended the call.
 */
struct preload_timeout {
	uint64_t saved;  /* the fiber's deadline (0: none) */
	uint64_t mine;   /* the one set here (0: none) */
};
void runtime__preload_timeout_begin(struct preload_timeout *t, int64_t timeout_ns);
long runtime__preload_timeout_end(const struct preload_timeout *t, long rc, int timeout_errno);

/* libc's convention: rc >= 0 as is, else errno = -rc and -1. */
static inline long preload_ret(long rc)
{
	if (rc >= 0)
		return rc;
	errno = (int)-rc;
	return -1;
}

/* Wait until one of fds may be ready or deadline_ns (absolute, 0: none)
 * passes: 0 (look again), -ETIMEDOUT (that deadline), -ECANCELED, or
 * -ETIMEDOUT with the fiber's own deadline past (the caller tells them
 * apart). Fiber context. */
int runtime__preload_wait_any(const struct pollfd *fds, nfds_t nfds, uint64_t deadline_ns);

#endif
