/* SPDX-License-Identifier: MIT */
/*
 * context.c - the first frame of a new fiber, laid out exactly as the
 * switch (switch.h, switch_<arch>.S) leaves a frame when it switches out,
 * so that the first switch into it lands in runtime__fiber_trampoline,
 * which calls entry(arg).
 */
#include <stdint.h>
#include <string.h>

#include "switch.h"

#if defined(__x86_64__)
/* Power-on defaults: all FP exceptions masked, round to nearest. */
#define MXCSR_DEFAULT 0x1f80u
#define X87_CW_DEFAULT 0x037fu

/* Below top: entry and arg, where the trampoline finds them once the
 * switch has popped the frame (16 bytes, so its rsp is 16-byte aligned),
 * and below them the switch frame itself. */
void *runtime__context_init(void *top, void (*entry)(void *), void *arg)
{
	uint64_t *call = (uint64_t *)top - 2;
	uint64_t *frame = (uint64_t *)((char *)call - SWITCH_FRAME);

	call[0] = (uint64_t)(uintptr_t)entry;
	call[1] = (uint64_t)(uintptr_t)arg;
	frame[0] = (uint64_t)(uintptr_t)runtime__fiber_trampoline; /* resume at */
	frame[1] = 0;                                              /* rbp */
	frame[SWITCH_FP_OFFSET / 8] = MXCSR_DEFAULT | ((uint64_t)X87_CW_DEFAULT << 32);
	return frame; /* the rest of the frame is the red zone: never read */
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
#endif
