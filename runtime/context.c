/* SPDX-License-Identifier: MIT */
/*
 * context.c - the first frame of a new fiber, laid out exactly as
 * runtime__switch (switch_<arch>.S) leaves a frame when it switches out, so
 * that the first switch into it "returns" into runtime__fiber_trampoline,
 * which calls entry(arg) from callee-saved registers.
 */
#include "internal.h"

#include <string.h>

#if defined(__x86_64__)
/* Power-on defaults: all FP exceptions masked, round to nearest. */
#define MXCSR_DEFAULT 0x1f80u
#define X87_CW_DEFAULT 0x037fu

void *runtime__context_init(void *top, void (*entry)(void *), void *arg)
{
	uint64_t *frame = (uint64_t *)top - 8; /* 64 bytes; top stays untouched */

	memset(frame, 0, 8 * sizeof(*frame));
	frame[0] = MXCSR_DEFAULT | ((uint64_t)X87_CW_DEFAULT << 32);
	frame[1] = (uint64_t)(uintptr_t)entry;                      /* r12 */
	frame[2] = (uint64_t)(uintptr_t)arg;                        /* r13 */
	frame[6] = 0;                                               /* rbp */
	frame[7] = (uint64_t)(uintptr_t)runtime__fiber_trampoline;  /* ret */
	return frame;
}
#elif defined(__aarch64__)
void *runtime__context_init(void *top, void (*entry)(void *), void *arg)
{
	uint64_t *frame = (uint64_t *)((char *)top - 176);

	memset(frame, 0, 176);
	frame[0] = (uint64_t)(uintptr_t)entry;                      /* x19 */
	frame[1] = (uint64_t)(uintptr_t)arg;                        /* x20 */
	frame[10] = 0;                                              /* x29 */
	frame[11] = (uint64_t)(uintptr_t)runtime__fiber_trampoline; /* x30 */
	frame[20] = 0;                                              /* fpcr */
	return frame;
}
#else
#error "runtime: no context switch for this architecture (x86_64 and aarch64 exist)"
#endif
