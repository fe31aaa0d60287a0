/* SPDX-License-Identifier: MIT */
/*
 * io.c - the data-moving wrappers: read, write, readv, writev, pread,
 * pwrite, recv, recvfrom, send, sendto, recvmsg, sendmsg, accept,
 * accept4, connect (and the _FORTIFY_SOURCE and 64-bit-offset names that
 * programs link against instead).
 *
 * In a fiber, on an fd the program has not made non-blocking, each is the
 * runtime's call of the same shape: one SQE, and the fiber parks until
 * the kernel answers (the kernel polls the fd for it). Everywhere else,
 * and for non-blocking fds and MSG_DONTWAIT, libc's call runs as it is,
 * so EAGAIN stays EAGAIN.
 *
 * Two differences between a ring operation and a blocking syscall are
 * made up for here: a ring write or send to a stream may stop short where
 * a blocking one goes on until everything is written, so writes loop (a
 * short count comes back only when an error, a timeout or a cancel stops
 * the loop, as from a blocking call interrupted mid-way); and the ring
 * ignores SO_RCVTIMEO and SO_SNDTIMEO, so the wrapper lowers the fiber's
 * deadline for the call and reports the timeout as the kernel would:
 * EAGAIN (EINPROGRESS for connect).
 */
#define _GNU_SOURCE
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Linux's cap on one read or write (MAX_RW_COUNT). */
#define RW_MAX 0x7ffff000ul

/* The fd's state if the call may park; false: the call is libc's. */
static inline bool may_park(int fd, struct fd_info *fi)
{
	return preload_in_fiber() && runtime__preload_fd_info(fd, fi) && !fi->nonblock;
}

/* ------------------------------------------------------------- reading */

PRELOAD_API ssize_t HOOK(read)(int fd, void *buf, size_t len)
{
	struct fd_info fi;
	struct preload_timeout t;

	if (!may_park(fd, &fi))
		return REAL(read)(fd, buf, len);
	runtime__preload_timeout_begin(&t, fi.rcvtimeo_ns);
	long rc = runtime_read(fd, buf, len);
	return preload_ret(runtime__preload_timeout_end(&t, rc, EAGAIN));
}

PRELOAD_API ssize_t HOOK(readv)(int fd, const struct iovec *iov, int iovcnt)
{
	struct fd_info fi;
	struct preload_timeout t;

	if (!may_park(fd, &fi))
		return REAL(readv)(fd, iov, iovcnt);
	runtime__preload_timeout_begin(&t, fi.rcvtimeo_ns);
	long rc = runtime_readv(fd, iov, iovcnt);
	return preload_ret(runtime__preload_timeout_end(&t, rc, EAGAIN));
}

PRELOAD_API ssize_t HOOK(pread)(int fd, void *buf, size_t len, off_t offset)
{
	struct fd_info fi;

	if (!may_park(fd, &fi) || !fi.seekable)
		return REAL(pread)(fd, buf, len, offset); /* ESPIPE at once */
	return preload_ret(runtime_pread(fd, buf, len, offset));
}

PRELOAD_API ssize_t HOOK(pread64)(int fd, void *buf, size_t len, off64_t offset)
{
	return HOOK(pread)(fd, buf, len, offset);
}

PRELOAD_API ssize_t HOOK(recv)(int fd, void *buf, size_t len, int flags)
{
	struct fd_info fi;
	struct preload_timeout t;

	if ((flags & MSG_DONTWAIT) || !may_park(fd, &fi))
		return REAL(recv)(fd, buf, len, flags);
	runtime__preload_timeout_begin(&t, fi.rcvtimeo_ns);
	long rc = runtime_recv(fd, buf, len, flags);
	return preload_ret(runtime__preload_timeout_end(&t, rc, EAGAIN));
}

PRELOAD_API ssize_t HOOK(recvmsg)(int fd, struct msghdr *msg, int flags)
{
	struct fd_info fi;
	struct preload_timeout t;

	if ((flags & MSG_DONTWAIT) || !may_park(fd, &fi))
		return REAL(recvmsg)(fd, msg, flags);
	runtime__preload_timeout_begin(&t, fi.rcvtimeo_ns);
	long rc = runtime_recvmsg(fd, msg, flags);
	return preload_ret(runtime__preload_timeout_end(&t, rc, EAGAIN));
}

/* recvfrom with an address is a recvmsg: the kernel fills in the sender
 * and its length as recvfrom(2) would. */
PRELOAD_API ssize_t HOOK(recvfrom)(int fd, void *buf, size_t len, int flags,
                                   struct sockaddr *addr, socklen_t *addrlen)
{
	struct fd_info fi;
	struct preload_timeout t;

	if ((flags & MSG_DONTWAIT) || !may_park(fd, &fi) || (addr && !addrlen))
		return REAL(recvfrom)(fd, buf, len, flags, addr, addrlen);
	if (!addr)
		return HOOK(recv)(fd, buf, len, flags);
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = {
		.msg_name = addr, .msg_namelen = *addrlen, .msg_iov = &iov, .msg_iovlen = 1,
	};
	runtime__preload_timeout_begin(&t, fi.rcvtimeo_ns);
	long rc = runtime__preload_timeout_end(&t, runtime_recvmsg(fd, &msg, flags), EAGAIN);
	if (rc >= 0)
		*addrlen = msg.msg_namelen;
	return preload_ret(rc);
}

/* ------------------------------------------------------------- writing */

enum out_kind { OUT_WRITE, OUT_SEND, OUT_PWRITE };

/* A blocking write: everything, or what was written before an error,
 * timeout or cancel stopped it (the error shows at the next call). */
static ssize_t out_all(int fd, const struct fd_info *fi, enum out_kind kind, const char *buf,
                       size_t len, int flags, off_t offset)
{
	struct preload_timeout t;
	size_t done = 0;
	long rc;

	if (len > RW_MAX)
		len = RW_MAX;
	runtime__preload_timeout_begin(&t, fi->sndtimeo_ns);
	do {
		if (kind == OUT_WRITE)
			rc = runtime_write(fd, buf + done, len - done);
		else if (kind == OUT_SEND)
			rc = runtime_send(fd, buf + done, len - done, flags);
		else
			rc = runtime_pwrite(fd, buf + done, len - done, offset + (off_t)done);
		if (rc > 0)
			done += (size_t)rc;
	} while (rc > 0 && fi->stream && done < len);
	rc = runtime__preload_timeout_end(&t, rc, EAGAIN);
	return done ? (ssize_t)done : preload_ret(rc);
}

PRELOAD_API ssize_t HOOK(write)(int fd, const void *buf, size_t len)
{
	struct fd_info fi;

	if (!may_park(fd, &fi))
		return REAL(write)(fd, buf, len);
	return out_all(fd, &fi, OUT_WRITE, buf, len, 0, 0);
}

PRELOAD_API ssize_t HOOK(pwrite)(int fd, const void *buf, size_t len, off_t offset)
{
	struct fd_info fi;

	if (!may_park(fd, &fi) || !fi.seekable)
		return REAL(pwrite)(fd, buf, len, offset); /* ESPIPE at once */
	return out_all(fd, &fi, OUT_PWRITE, buf, len, 0, offset);
}

PRELOAD_API ssize_t HOOK(pwrite64)(int fd, const void *buf, size_t len, off64_t offset)
{
	return HOOK(pwrite)(fd, buf, len, offset);
}

PRELOAD_API ssize_t HOOK(send)(int fd, const void *buf, size_t len, int flags)
{
	struct fd_info fi;

	if ((flags & MSG_DONTWAIT) || !may_park(fd, &fi))
		return REAL(send)(fd, buf, len, flags);
	return out_all(fd, &fi, OUT_SEND, buf, len, flags, 0);
}

/* The rest of a vector after done bytes, in a copy (malloc'd: only a
 * short write to a stream gets here). NULL: no memory. */
static struct iovec *iov_rest(const struct iovec *iov, size_t cnt, size_t done, size_t *rest_cnt)
{
	while (cnt && done >= iov->iov_len) {
		done -= iov->iov_len;
		iov++;
		cnt--;
	}
	struct iovec *copy = malloc((cnt ? cnt : 1) * sizeof(*copy));
	if (!copy)
		return NULL;
	memcpy(copy, iov, cnt * sizeof(*copy));
	if (cnt) {
		copy[0].iov_base = (char *)copy[0].iov_base + done;
		copy[0].iov_len -= done;
	}
	*rest_cnt = cnt;
	return copy;
}

static size_t iov_total(const struct iovec *iov, size_t cnt)
{
	size_t total = 0;
	for (size_t i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	return total;
}

/* writev (msg NULL) or sendmsg, looping like out_all. Ancillary data goes
 * with the first piece only. */
static ssize_t outv_all(int fd, const struct fd_info *fi, const struct iovec *iov, size_t cnt,
                        const struct msghdr *msg, int flags)
{
	const struct iovec *all = iov;
	const size_t all_cnt = cnt;
	struct preload_timeout t;
	struct msghdr m = msg ? *msg : (struct msghdr){ 0 };
	struct iovec *rest = NULL;
	size_t done = 0;
	long rc;

	runtime__preload_timeout_begin(&t, fi->sndtimeo_ns);
	for (;;) {
		m.msg_iov = (struct iovec *)iov;
		m.msg_iovlen = cnt;
		rc = msg ? runtime_sendmsg(fd, &m, flags) : runtime_writev(fd, iov, (int)cnt);
		if (rc <= 0)
			break;
		done += (size_t)rc;
		if (!fi->stream || done >= iov_total(all, all_cnt))
			break;
		free(rest);
		rest = iov_rest(all, all_cnt, done, &cnt);
		if (!rest)
			break;
		iov = rest;
		m.msg_control = NULL;
		m.msg_controllen = 0;
	}
	free(rest);
	rc = runtime__preload_timeout_end(&t, rc, EAGAIN);
	return done ? (ssize_t)done : preload_ret(rc);
}

PRELOAD_API ssize_t HOOK(writev)(int fd, const struct iovec *iov, int iovcnt)
{
	struct fd_info fi;

	if (!may_park(fd, &fi) || iovcnt < 0)
		return REAL(writev)(fd, iov, iovcnt);
	return outv_all(fd, &fi, iov, (size_t)iovcnt, NULL, 0);
}

PRELOAD_API ssize_t HOOK(sendmsg)(int fd, const struct msghdr *msg, int flags)
{
	struct fd_info fi;

	if ((flags & MSG_DONTWAIT) || !msg || !may_park(fd, &fi))
		return REAL(sendmsg)(fd, msg, flags);
	return outv_all(fd, &fi, msg->msg_iov, msg->msg_iovlen, msg, flags);
}

PRELOAD_API ssize_t HOOK(sendto)(int fd, const void *buf, size_t len, int flags,
                                 const struct sockaddr *addr, socklen_t addrlen)
{
	struct fd_info fi;

	if ((flags & MSG_DONTWAIT) || !may_park(fd, &fi))
		return REAL(sendto)(fd, buf, len, flags, addr, addrlen);
	if (!addr)
		return out_all(fd, &fi, OUT_SEND, buf, len, flags, 0);
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = {
		.msg_name = (void *)addr, .msg_namelen = addrlen, .msg_iov = &iov, .msg_iovlen = 1,
	};
	return outv_all(fd, &fi, &iov, 1, &msg, flags);
}

/* --------------------------------------------------- accept and connect */

PRELOAD_API int HOOK(accept4)(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
	struct fd_info fi;
	struct preload_timeout t;
	int rc;

	if (!may_park(fd, &fi)) {
		rc = REAL(accept4)(fd, addr, addrlen, flags);
	} else {
		runtime__preload_timeout_begin(&t, fi.rcvtimeo_ns);
		long res = runtime_accept(fd, addr, addrlen, flags);
		rc = (int)preload_ret(runtime__preload_timeout_end(&t, res, EAGAIN));
	}
	if (rc >= 0)
		runtime__preload_fd_forget(rc);
	return rc;
}

PRELOAD_API int HOOK(accept)(int fd, struct sockaddr *addr, socklen_t *addrlen)
{
	struct fd_info fi;

	if (!may_park(fd, &fi)) {
		int rc = REAL(accept)(fd, addr, addrlen);
		if (rc >= 0)
			runtime__preload_fd_forget(rc);
		return rc;
	}
	return HOOK(accept4)(fd, addr, addrlen, 0);
}

/* A blocking connect cut short by SO_SNDTIMEO fails with EINPROGRESS and
 * goes on in the background, as in the kernel. */
PRELOAD_API int HOOK(connect)(int fd, const struct sockaddr *addr, socklen_t addrlen)
{
	struct fd_info fi;
	struct preload_timeout t;

	if (!may_park(fd, &fi))
		return REAL(connect)(fd, addr, addrlen);
	runtime__preload_timeout_begin(&t, fi.sndtimeo_ns);
	long rc = runtime_connect(fd, addr, addrlen);
	return (int)preload_ret(runtime__preload_timeout_end(&t, rc, EINPROGRESS));
}

/* ------------------------------------------- _FORTIFY_SOURCE's names */

PRELOAD_API ssize_t HOOK(__read_chk)(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		__chk_fail();
	return HOOK(read)(fd, buf, len);
}

PRELOAD_API ssize_t HOOK(__pread_chk)(int fd, void *buf, size_t len, off_t offset, size_t buflen)
{
	if (len > buflen)
		__chk_fail();
	return HOOK(pread)(fd, buf, len, offset);
}

PRELOAD_API ssize_t HOOK(__pread64_chk)(int fd, void *buf, size_t len, off64_t offset,
                                        size_t buflen)
{
	if (len > buflen)
		__chk_fail();
	return HOOK(pread)(fd, buf, len, offset);
}

PRELOAD_API ssize_t HOOK(__recv_chk)(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	if (len > buflen)
		__chk_fail();
	return HOOK(recv)(fd, buf, len, flags);
}

PRELOAD_API ssize_t HOOK(__recvfrom_chk)(int fd, void *buf, size_t len, size_t buflen, int flags,
                                         struct sockaddr *addr, socklen_t *addrlen)
{
	if (len > buflen)
		__chk_fail();
	return HOOK(recvfrom)(fd, buf, len, flags, addr, addrlen);
}
