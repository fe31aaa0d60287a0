/* SPDX-License-Identifier: MIT */
/*
 * spin.h - the toolkit's spinlock (the rate limiters'): held for a few
 * instructions, by fibers and plain threads of any core. Its holder may
 * be a thread the kernel has preempted (cores often share CPUs), so a long
 * spin gives the CPU up. Header only: the toolkit uses no core internals.
 */
#ifndef RUNTIME_TOOLKIT_SPIN_H
#define RUNTIME_TOOLKIT_SPIN_H

#include <sched.h>
#include <stdatomic.h>

#include "../runtime/cpu.h"

static inline void toolkit_spin_lock(_Atomic int *held)
{
	for (unsigned spins = 0; atomic_exchange_explicit(held, 1, memory_order_acquire);)
		while (atomic_load_explicit(held, memory_order_relaxed))
			if (++spins % 128 == 0)
				sched_yield();
			else
				cpu_relax();
}

static inline void toolkit_spin_unlock(_Atomic int *held)
{
	atomic_store_explicit(held, 0, memory_order_release);
}

#endif /* RUNTIME_TOOLKIT_SPIN_H */
