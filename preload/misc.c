/* SPDX-License-Identifier: MIT */
/*
 * misc.c - the wrappers that do not move data: sleeps, close,
 * getaddrinfo, and the calls that create fds or change what the fd table
 * remembers of them (socket, socketpair, dup, dup2, dup3, fcntl, ioctl
 * FIONBIO, setsockopt SO_RCVTIMEO/SO_SNDTIMEO).
 *
 * A sleep cut short by a cancel or the fiber's deadline: nanosleep and
 * usleep return -1 with ECANCELED or ETIMEDOUT (nanosleep fills in *rem,
 * as for EINTR); sleep returns 0. Not EINTR and not the time left: both
 * make the usual "sleep again until done" loops spin forever on a cancel,
 * which is sticky.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <fcntl.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

PRELOAD_API int runtime_preload_linked(void)
{
	return 1;
}

/* -------------------------------------------------------------- sleeps */

/* Sleep ns in the fiber: 0, or -ECANCELED / -ETIMEDOUT with *left_ns. */
static int fiber_sleep(uint64_t ns, uint64_t *left_ns)
{
	uint64_t start = runtime_now();
	int rc = runtime_sleep(ns);
	if (rc < 0 && left_ns) {
		uint64_t slept = runtime_now() - start;
		*left_ns = slept >= ns ? 0 : ns - slept;
	}
	return rc;
}

static struct timespec ns_timespec(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000),
		                  .tv_nsec = (long)(ns % 1000000000) };
}

PRELOAD_API int HOOK(nanosleep)(const struct timespec *req, struct timespec *rem)
{
	int64_t ns = runtime__preload_timespec_ns(req);
	uint64_t left = 0;

	if (!preload_in_fiber() || ns < 0)
		return REAL(nanosleep)(req, rem); /* EFAULT or EINVAL at once */
	int rc = fiber_sleep((uint64_t)ns, &left);
	if (rc == 0)
		return 0;
	if (rem)
		*rem = ns_timespec(left);
	errno = -rc;
	return -1;
}

/* As nanosleep, for the clocks a fiber can sleep on (the CPU-time clocks
 * go to libc); TIMER_ABSTIME sleeps until the clock reads req. Returns
 * the error number, as clock_nanosleep does: 0, ECANCELED or ETIMEDOUT. */
PRELOAD_API int HOOK(clock_nanosleep)(clockid_t clock, int flags, const struct timespec *req,
                                      struct timespec *rem)
{
	bool wall = clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC || clock == CLOCK_BOOTTIME;
	int64_t ns = runtime__preload_timespec_ns(req);
	uint64_t left = 0;
	struct timespec now;

	if (!preload_in_fiber() || !wall || ns < 0)
		return REAL(clock_nanosleep)(clock, flags, req, rem);
	if (flags & TIMER_ABSTIME) {
		int64_t at = clock_gettime(clock, &now) == 0 ? runtime__preload_timespec_ns(&now) : -1;
		if (at < 0)
			return REAL(clock_nanosleep)(clock, flags, req, rem);
		ns = ns > at ? ns - at : 0;
		rem = NULL; /* an absolute sleep has no time left to report */
	}
	int rc = fiber_sleep((uint64_t)ns, &left);
	if (rc < 0 && rem)
		*rem = ns_timespec(left);
	return -rc;
}

PRELOAD_API int HOOK(usleep)(useconds_t us)
{
	if (!preload_in_fiber())
		return REAL(usleep)(us);
	return (int)preload_ret(fiber_sleep((uint64_t)us * 1000, NULL));
}

PRELOAD_API unsigned HOOK(sleep)(unsigned seconds)
{
	if (!preload_in_fiber())
		return REAL(sleep)(seconds);
	int rc = fiber_sleep((uint64_t)seconds * 1000000000, NULL);
	if (rc < 0)
		errno = -rc;
	return 0;
}

/* --------------------------------------------------------------- close */

/* The runtime's close (always closes; releases a fixed-file registration
 * first). Where it calls close(2) itself (its ThreadSanitizer builds),
 * that call must reach libc: this flag says the thread is inside it. */
static __thread bool closing;

PRELOAD_API int HOOK(close)(int fd)
{
	runtime__preload_fd_forget(fd);
	if (closing || !preload_in_fiber())
		return REAL(close)(fd);
	closing = true;
	int rc = runtime_close(fd);
	closing = false;
	runtime__preload_fd_forget(fd);
	/* The ring refuses to close an io_uring fd: libc closes it. (Only if
	 * it is open: a second close of a number another thread may have
	 * reused meanwhile must not close that thread's file.) */
	if (rc == -EBADF && REAL(fcntl)(fd, F_GETFD) >= 0)
		return REAL(close)(fd);
	return (int)preload_ret(rc);
}

/* --------------------------------------------------------- getaddrinfo */

/* A lookup on the offload pool. It owns copies of its inputs: a fiber that
 * gives up (cancel, deadline) leaves it to finish on its own. */
struct lookup {
	char *node, *service;
	struct addrinfo hints;
	bool has_hints;
	int rc, err;
	struct addrinfo *res;
};

static void *lookup_run(void *arg)
{
	struct lookup *l = arg;
	l->rc = REAL(getaddrinfo)(l->node, l->service, l->has_hints ? &l->hints : NULL, &l->res);
	l->err = errno;
	return NULL;
}

static void lookup_free(struct lookup *l)
{
	free(l->node);
	free(l->service);
	free(l);
}

static void lookup_abandoned(void *arg, void *result, int ran)
{
	struct lookup *l = arg;
	if (ran && l->rc == 0)
		freeaddrinfo(l->res);
	lookup_free(l);
}

static struct lookup *lookup_new(const char *node, const char *service,
                                 const struct addrinfo *hints)
{
	struct lookup *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->node = node ? strdup(node) : NULL;
	l->service = service ? strdup(service) : NULL;
	if ((node && !l->node) || (service && !l->service)) {
		lookup_free(l);
		return NULL;
	}
	if (hints) {
		l->has_hints = true;
		l->hints = (struct addrinfo){ .ai_flags = hints->ai_flags,
			                      .ai_family = hints->ai_family,
			                      .ai_socktype = hints->ai_socktype,
			                      .ai_protocol = hints->ai_protocol };
	}
	return l;
}

/* A cancel or deadline: EAI_SYSTEM with errno ECANCELED or ETIMEDOUT. */
PRELOAD_API int HOOK(getaddrinfo)(const char *node, const char *service,
                                  const struct addrinfo *hints, struct addrinfo **res)
{
	if (!preload_in_fiber())
		return REAL(getaddrinfo)(node, service, hints, res);
	struct lookup *l = lookup_new(node, service, hints);
	if (!l)
		return EAI_MEMORY;
	int rc = runtime_offload(lookup_run, l, NULL, lookup_abandoned);
	if (rc == -ECANCELED || rc == -ETIMEDOUT) {
		errno = -rc; /* l is lookup_abandoned's now */
		return EAI_SYSTEM;
	}
	if (rc < 0) {
		lookup_free(l);
		errno = -rc;
		return rc == -EAGAIN ? EAI_AGAIN : rc == -ENOMEM ? EAI_MEMORY : EAI_SYSTEM;
	}
	rc = l->rc;
	if (rc == 0)
		*res = l->res;
	errno = l->err;
	lookup_free(l);
	return rc;
}

/* ------------------------------------------- fd creation and fd flags */

PRELOAD_API int HOOK(socket)(int domain, int type, int protocol)
{
	int fd = REAL(socket)(domain, type, protocol);
	runtime__preload_fd_forget(fd);
	return fd;
}

PRELOAD_API int HOOK(socketpair)(int domain, int type, int protocol, int sv[2])
{
	int rc = REAL(socketpair)(domain, type, protocol, sv);
	if (rc == 0) {
		runtime__preload_fd_forget(sv[0]);
		runtime__preload_fd_forget(sv[1]);
	}
	return rc;
}

static int dup_done(int oldfd, int newfd)
{
	if (newfd >= 0) {
		runtime__preload_fd_shared(oldfd);
		runtime__preload_fd_shared(newfd);
	}
	return newfd;
}

PRELOAD_API int HOOK(dup)(int oldfd)
{
	return dup_done(oldfd, REAL(dup)(oldfd));
}

PRELOAD_API int HOOK(dup2)(int oldfd, int newfd)
{
	return dup_done(oldfd, REAL(dup2)(oldfd, newfd));
}

PRELOAD_API int HOOK(dup3)(int oldfd, int newfd, int flags)
{
	return dup_done(oldfd, REAL(dup3)(oldfd, newfd, flags));
}

/* fcntl's third argument is an int or a pointer, or absent: passed on as
 * a pointer-sized value, which the x86_64 and aarch64 ABIs allow. */
static int fcntl_tracked(int fd, int cmd, void *arg)
{
	int rc = REAL(fcntl)(fd, cmd, arg);
	if (rc < 0)
		return rc;
	if (cmd == F_SETFL)
		runtime__preload_fd_changed(fd);
	else if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		dup_done(fd, rc);
	return rc;
}

PRELOAD_API int HOOK(fcntl)(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_tracked(fd, cmd, arg);
}

PRELOAD_API int HOOK(fcntl64)(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_tracked(fd, cmd, arg);
}

PRELOAD_API int HOOK(ioctl)(int fd, unsigned long request, ...)
{
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	int rc = REAL(ioctl)(fd, request, arg);
	if (rc == 0 && request == FIONBIO)
		runtime__preload_fd_changed(fd);
	return rc;
}

static bool is_timeout_option(int level, int name)
{
	if (level != SOL_SOCKET)
		return false;
#ifdef SO_RCVTIMEO_NEW
	if (name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW)
		return true;
#endif
	return name == SO_RCVTIMEO || name == SO_SNDTIMEO;
}

PRELOAD_API int HOOK(setsockopt)(int fd, int level, int name, const void *value, socklen_t len)
{
	int rc = REAL(setsockopt)(fd, level, name, value, len);
	if (rc == 0 && is_timeout_option(level, name))
		runtime__preload_fd_changed(fd);
	return rc;
}
