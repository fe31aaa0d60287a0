/* SPDX-License-Identifier: MIT */
/*
 * switch_x86_64.S - the fiber context switch for x86_64 (System V ABI).
 *
 * A switch is a function call, so only what the ABI says a callee must
 * preserve is saved: rbx, rbp, r12-r15, the stack pointer, and the two FP
 * control words (MXCSR's control bits and the x87 control word), which the
 * ABI also makes callee-saved: a fiber that calls fesetround() must not
 * change another fiber's rounding. Everything else is caller-saved and
 * already spilled by the compiler at the call site. The state lives on the
 * stack being left; only rsp is stored, in *save_sp.
 *
 * Two choices are measured (bench/micro switch_ns; README):
 *  - The switch returns with an indirect jmp, not ret: a ret would land
 *    somewhere else than the return stack predicts on every switch and
 *    cost a misprediction each time (about 3x slower here).
 *  - Reading MXCSR (stmxcsr) is most of the remaining cost; it is kept
 *    because the ABI requires it.
 *
 * Frame, from the saved rsp upwards (64 bytes):
 *   0x00: mxcsr (4 bytes) | x87 cw (2 bytes) | pad
 *   0x08: r12, r13, r14, r15, rbx, rbp, then the return address at 0x38
 */
#if defined(__x86_64__)
	.text

/* void runtime__switch(void **save_sp, void *next_sp) */
	.globl	runtime__switch
	.hidden	runtime__switch
	.type	runtime__switch, @function
	.p2align 4
runtime__switch:
	.cfi_startproc
	leaq	-0x38(%rsp), %rsp
	.cfi_adjust_cfa_offset 0x38
	stmxcsr	(%rsp)
	fnstcw	0x4(%rsp)
	movq	%r12, 0x08(%rsp)
	movq	%r13, 0x10(%rsp)
	movq	%r14, 0x18(%rsp)
	movq	%r15, 0x20(%rsp)
	movq	%rbx, 0x28(%rsp)
	movq	%rbp, 0x30(%rsp)
	movq	%rsp, (%rdi)
	movq	%rsi, %rsp
	movq	0x38(%rsp), %rcx	/* return address first: the jmp waits on it */
	ldmxcsr	(%rsp)
	fldcw	0x4(%rsp)
	movq	0x08(%rsp), %r12
	movq	0x10(%rsp), %r13
	movq	0x18(%rsp), %r14
	movq	0x20(%rsp), %r15
	movq	0x28(%rsp), %rbx
	movq	0x30(%rsp), %rbp
	leaq	0x40(%rsp), %rsp
	.cfi_adjust_cfa_offset -0x40
	jmp	*%rcx
	.cfi_endproc
	.size	runtime__switch, .-runtime__switch

/*
 * First code a new context runs: runtime__context_init leaves the entry
 * function in r12, its argument in r13 and a zero rbp (ends frame-pointer
 * unwinding here). rsp is 16-byte aligned, so the call below enters C with
 * the alignment the ABI requires. The entry function must never return.
 */
	.globl	runtime__fiber_trampoline
	.hidden	runtime__fiber_trampoline
	.type	runtime__fiber_trampoline, @function
	.p2align 4
runtime__fiber_trampoline:
	.cfi_startproc
	.cfi_undefined rip
	movq	%r13, %rdi
	call	*%r12
	ud2
	.cfi_endproc
	.size	runtime__fiber_trampoline, .-runtime__fiber_trampoline

/*
 * void runtime__call_on_stack(void (*fn)(void *), void *arg, void *top)
 *
 * Call fn(arg) with the stack pointer at top (16-byte aligned, below
 * anything live on that stack), then come back to the caller's stack. A
 * plain call, not a switch: fn must return, and must not switch contexts
 * while on the other stack. rbp keeps the caller's frame, and the CFI
 * says so, so that debuggers and unwinders walk from fn back across.
 */
	.globl	runtime__call_on_stack
	.hidden	runtime__call_on_stack
	.type	runtime__call_on_stack, @function
	.p2align 4
runtime__call_on_stack:
	.cfi_startproc
	pushq	%rbp
	.cfi_def_cfa_offset 16
	.cfi_offset %rbp, -16
	movq	%rsp, %rbp
	.cfi_def_cfa_register %rbp
	movq	%rdx, %rsp
	movq	%rdi, %rax
	movq	%rsi, %rdi
	call	*%rax
	movq	%rbp, %rsp
	popq	%rbp
	.cfi_def_cfa %rsp, 8
	ret
	.cfi_endproc
	.size	runtime__call_on_stack, .-runtime__call_on_stack

#endif

/* Fiber stacks are data: never ask for an executable stack. */
#if defined(__linux__) && defined(__ELF__)
	.section .note.GNU-stack,"",%progbits
#endif
