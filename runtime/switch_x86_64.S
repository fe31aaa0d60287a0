/* SPDX-License-Identifier: MIT */
/*
 * switch_x86_64.S - what the x86_64 fiber switch cannot do inline: a new
 * fiber's first instructions, and a call on another stack. The switch
 * itself is inline assembly in switch.h, which describes its frame.
 */
#if defined(__x86_64__)
	.text

/*
 * First code a new context runs: the switch has popped its frame, and
 * runtime__context_init left the entry function and its argument just above
 * it, at a 16-byte aligned rsp, so that the call enters C with the alignment
 * the ABI requires. rbp is zero (ends frame-pointer unwinding here). The
 * entry function must never return.
 */
	.globl	runtime__fiber_trampoline
	.hidden	runtime__fiber_trampoline
	.type	runtime__fiber_trampoline, @function
	.p2align 4
runtime__fiber_trampoline:
	.cfi_startproc
	.cfi_undefined rip
	movq	8(%rsp), %rdi
	movq	(%rsp), %rax
	call	*%rax
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

/*
 * The return thunk: what a function compiled with GCC's
 * function_return("thunk-extern") jumps to instead of a ret (GCC names it).
 * fiber.c's yield_switch alone is: its return is predicted as an indirect
 * jump, from the branch history, rather than from the return stack, which
 * holds another fiber's calls after a switch. r11 is scratch at a return
 * in every x86_64 convention. Weak: a program that brings its own thunk
 * (it must behave as a ret) has it used instead, correctly, if slower.
 * (.weak alone makes it global: .globl before it, clang's assembler warns.)
 */
	.weak	__x86_return_thunk
	.hidden	__x86_return_thunk
	.type	__x86_return_thunk, @function
	.p2align 4
__x86_return_thunk:
	.cfi_startproc
	popq	%r11
	.cfi_adjust_cfa_offset -8
	.cfi_register rip, r11
	jmp	*%r11
	.cfi_endproc
	.size	__x86_return_thunk, .-__x86_return_thunk

#endif

/* Fiber stacks are data: never ask for an executable stack. */
#if defined(__linux__) && defined(__ELF__)
	.section .note.GNU-stack,"",%progbits
#endif
