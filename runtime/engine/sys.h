/* SPDX-License-Identifier: MIT */
/*
 * sys.h - raw system calls for the hot paths: the kernel's result as it
 * comes (>= 0, or -errno), no errno, no libc.
 *
 * The runtime makes its own system calls where libruntime-preload would
 * otherwise intercept them (its send() comes back into the runtime), and
 * glibc's syscall(2) costs a dozen instructions and an errno store per
 * call: on a message's path (the ring's enter, a send made at once) that
 * is a few per cent of the runtime's share. x86_64 and aarch64 trap
 * inline; any other architecture goes through syscall(2).
 *
 * Sanitizers and valgrind see these calls as they see syscall(2)'s: the
 * kernel's reads and writes of user memory are not checked either way.
 */
#ifndef RUNTIME_SYS_H
#define RUNTIME_SYS_H

#include <errno.h>
#include <unistd.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
static inline long runtime__sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall"
	                 : "=a"(ret)
	                 : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
	                 : "rcx", "r11", "memory");
	return ret;
}
#elif defined(__aarch64__)
static inline long runtime__sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;

	__asm__ volatile("svc 0"
	                 : "+r"(x0)
	                 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
	                 : "memory");
	return x0;
}
#else
static inline long runtime__sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	long ret = syscall(nr, a, b, c, d, e, f);
	return ret < 0 ? -errno : ret;
}
#endif

#endif
