/* SPDX-License-Identifier: MIT */
/*
 * switch.h - the fiber context switch, inlined where a fiber gives up the
 * CPU (fiber.c's switch_to).
 *
 * x86_64: a switch is a few instructions of inline assembly whose clobber
 * list names every register except rsp and rbp. The compiler then saves
 * only what is live at that call site, in the enclosing function's own
 * frame, instead of a switch function saving every callee-saved register
 * on every switch ("context-aware" switching, as Photon does). What the
 * switch itself keeps on the stack being left, from the saved sp upwards:
 *
 *   0: resume address | 8: rbp | 16: MXCSR (4 bytes), x87 control word
 *   (2 bytes), pad | 24..151: the red zone of the code that switched,
 *   stepped over | 152: the caller's stack pointer before the switch
 *
 * The resume is an indirect jmp, not a ret: a ret would land elsewhere
 * than the return stack predicts on every switch (3x slower here). For the
 * same reason a yield that switched goes back to its caller by a jump
 * (fiber.c, yield_switch); the frame and this switch are the same.
 *
 * The two floating-point control words are callee-saved in the System V
 * ABI: a fiber that calls fesetround() must not change another fiber's
 * rounding. runtime__switch keeps them per fiber. Reading MXCSR is most of
 * a switch's cost on the CPUs measured (bench/micro switch_ns), so a
 * runtime configured with share_fp_control uses runtime__switch_shared_fp,
 * which leaves both words as they are: the fibers of a core share them.
 * A fiber that has ended leaves with runtime__switch_final, which saves
 * nothing.
 *
 * aarch64: an out-of-line switch (switch_aarch64.S) that saves every
 * callee-saved register and FPCR; it keeps FPCR in both variants.
 */
#ifndef RUNTIME_SWITCH_H
#define RUNTIME_SWITCH_H

/* First code a new context runs (switch_<arch>.S). */
void runtime__fiber_trampoline(void);

#if defined(__x86_64__)

/* Bytes of a switch frame at the saved sp, and where the FP words are. */
#define SWITCH_FRAME 152
#define SWITCH_FP_OFFSET 16

#ifdef __AVX512F__
#define SWITCH_CLOBBERS_AVX512 , "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", \
	"xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", \
	"xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4", "k5", "k6", "k7"
#else
#define SWITCH_CLOBBERS_AVX512
#endif

/* Everything but rsp and rbp (saved by hand: it may be the frame pointer),
 * and rdi/rsi, which carry the operands. */
#define SWITCH_CLOBBERS "rax", "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", \
	"r12", "r13", "r14", "r15", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", \
	"xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", \
	"xmm13", "xmm14", "xmm15", "st", "st(1)", "st(2)", "st(3)", "st(4)", \
	"st(5)", "st(6)", "st(7)", "memory", "cc" SWITCH_CLOBBERS_AVX512

/* The halves of a switch as assembler text: leaving (the frame above, the
 * sp stored through rdi) and resuming the context whose sp is in rsp. The
 * FP control words are saved and loaded by what fp_save and fp_load say. */
#define SWITCH_LEAVE(fp_save) \
	"leaq -144(%%rsp), %%rsp\n\t" fp_save "movq %%rbp, (%%rsp)\n\t" \
	"leaq 1f(%%rip), %%rax\n\t" "pushq %%rax\n\t" "movq %%rsp, (%%rdi)\n\t"
#define SWITCH_RESUME(fp_load) \
	"popq %%rax\n\t" fp_load "movq (%%rsp), %%rbp\n\t" "leaq 144(%%rsp), %%rsp\n\t" \
	"jmp *%%rax\n"
#define SWITCH_FP_SAVE "stmxcsr 8(%%rsp)\n\t" "fnstcw 12(%%rsp)\n\t"
#define SWITCH_FP_LOAD "ldmxcsr 8(%%rsp)\n\t" "fldcw 12(%%rsp)\n\t"

#define SWITCH_ASM(save_sp, next_sp, fp_save, fp_load) \
	__asm__ volatile(SWITCH_LEAVE(fp_save) "movq %%rsi, %%rsp\n\t" SWITCH_RESUME(fp_load) "1:" \
	                 : "+D"(save_sp), "+S"(next_sp) : : SWITCH_CLOBBERS)

/* Nothing is saved, so nothing needs to be clobbered. */
#define SWITCH_FINAL_ASM(next_sp, fp_load) \
	__asm__ volatile("movq %0, %%rsp\n\t" SWITCH_RESUME(fp_load) : : "r"(next_sp) : "memory")

/* Save this context's sp in *save_sp and continue the one saved at
 * next_sp; returns when something switches back to *save_sp. */
static inline __attribute__((always_inline)) void runtime__switch(void **save_sp, void *next_sp)
{
	SWITCH_ASM(save_sp, next_sp, SWITCH_FP_SAVE, SWITCH_FP_LOAD);
}

/* The same, leaving MXCSR and the x87 control word alone. */
static inline __attribute__((always_inline)) void runtime__switch_shared_fp(void **save_sp,
                                                                            void *next_sp)
{
	SWITCH_ASM(save_sp, next_sp, "", "");
}

/* Continue the context saved at next_sp, abandoning this one (a fiber that
 * has ended). */
static inline __attribute__((always_inline, noreturn)) void runtime__switch_final(void *next_sp)
{
	SWITCH_FINAL_ASM(next_sp, SWITCH_FP_LOAD);
	__builtin_unreachable();
}

static inline __attribute__((always_inline, noreturn)) void runtime__switch_final_shared_fp(
	void *next_sp)
{
	SWITCH_FINAL_ASM(next_sp, "");
	__builtin_unreachable();
}

#elif defined(__aarch64__)

void runtime__switch_asm(void **save_sp, void *next_sp);

static inline void runtime__switch(void **save_sp, void *next_sp)
{
	runtime__switch_asm(save_sp, next_sp);
}

static inline void runtime__switch_shared_fp(void **save_sp, void *next_sp)
{
	runtime__switch_asm(save_sp, next_sp);
}

static inline __attribute__((noreturn)) void runtime__switch_final(void *next_sp)
{
	void *abandoned;
	runtime__switch_asm(&abandoned, next_sp);
	__builtin_unreachable();
}

static inline __attribute__((noreturn)) void runtime__switch_final_shared_fp(void *next_sp)
{
	runtime__switch_final(next_sp);
}

#else
#error "runtime: no context switch for this architecture (x86_64 and aarch64 exist)"
#endif

/* fn(arg) with the stack pointer at top (16-byte aligned), then back: a
 * call on another stack, not a switch (fn returns, and never switches). */
void runtime__call_on_stack(void (*fn)(void *), void *arg, void *top);
/* Lay out a first frame below top (16-byte aligned) so that switching to
 * the returned sp, with either switch, calls entry(arg); entry must never
 * return. */
void *runtime__context_init(void *top, void (*entry)(void *), void *arg);

#endif
