/* SPDX-License-Identifier: MIT */
/*
 * switch_x86_64.S - the fiber context switch for x86_64 (System V ABI).
 *
 * A switch is a function call, so only what the ABI says a callee must
 * preserve is saved: rbx, rbp, r12-r15, the stack pointer, and the two FP
 * control words (MXCSR's control bits and the x87 control word), which the
 * ABI also makes callee-saved. Everything else is caller-saved and already
 * spilled by the compiler at the call site. The saved state lives on the
 * stack being left; only rsp is stored, in *save_sp.
 *
 * Frame, from the saved rsp upwards:
 *   0: mxcsr (4 bytes) | x87 cw (2 bytes) | pad
 *   8: r15, r14, r13, r12, rbx, rbp, return address
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
	pushq	%rbp
	pushq	%rbx
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	subq	$8, %rsp
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)
	movq	%rsp, (%rdi)
	movq	%rsi, %rsp
	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	addq	$8, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	ret
	.cfi_endproc
	.size	runtime__switch, .-runtime__switch

/*
 * First code a new fiber runs: runtime__context_init leaves the fiber in
 * r12 and a zero rbp (ends frame-pointer unwinding here). rsp is 16-byte
 * aligned, so the call below enters C with the alignment the ABI requires.
 */
	.globl	runtime__fiber_trampoline
	.hidden	runtime__fiber_trampoline
	.type	runtime__fiber_trampoline, @function
	.p2align 4
runtime__fiber_trampoline:
	.cfi_startproc
	.cfi_undefined rip
	movq	%r12, %rdi
	call	runtime__fiber_main
	ud2
	.cfi_endproc
	.size	runtime__fiber_trampoline, .-runtime__fiber_trampoline

#endif

/* Fiber stacks are data: never ask for an executable stack. */
#if defined(__linux__) && defined(__ELF__)
	.section .note.GNU-stack,"",%progbits
#endif
