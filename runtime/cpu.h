/* SPDX-License-Identifier: MIT */
/*
 * cpu.h - the one spin-wait hint, for every loop that waits on another
 * thread's store (spinlocks, the offload queue, the rate limiter): it
 * tells the CPU a spin is under way, so a sibling hyperthread runs and
 * the loop's exit is not mispredicted. Depends on nothing, so that the
 * toolkit may include it too.
 */
#ifndef RUNTIME_CPU_H
#define RUNTIME_CPU_H

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

#endif /* RUNTIME_CPU_H */
