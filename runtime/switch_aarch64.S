/* SPDX-License-Identifier: MIT */
/*
 * switch_aarch64.S - the fiber context switch for aarch64 (AAPCS64).
 *
 * Only the callee-saved state is kept: x19-x28, the frame pointer x29, the
 * link register x30, the low halves d8-d15 of v8-v15, and FPCR (rounding and
 * trap control; FPSR holds only sticky status and is not preserved). The
 * state lives on the stack being left; only sp is stored, in *save_sp.
 *
 * Frame, from the saved sp upwards (176 bytes, 16-byte aligned):
 *   0: x19 x20, 16: x21 x22, 32: x23 x24, 48: x25 x26, 64: x27 x28,
 *  80: x29 x30, 96: d8 d9, 112: d10 d11, 128: d12 d13, 144: d14 d15,
 * 160: fpcr, pad
 *
 * Built for aarch64 but not yet run on one by this project's CI.
 */
#if defined(__aarch64__)
	.text

/* void runtime__switch_asm(void **save_sp, void *next_sp): switch.h calls it */
	.globl	runtime__switch_asm
	.hidden	runtime__switch_asm
	.type	runtime__switch_asm, %function
	.p2align 4
runtime__switch_asm:
	sub	sp, sp, #176
	stp	x19, x20, [sp, #0]
	stp	x21, x22, [sp, #16]
	stp	x23, x24, [sp, #32]
	stp	x25, x26, [sp, #48]
	stp	x27, x28, [sp, #64]
	stp	x29, x30, [sp, #80]
	stp	d8, d9, [sp, #96]
	stp	d10, d11, [sp, #112]
	stp	d12, d13, [sp, #128]
	stp	d14, d15, [sp, #144]
	mrs	x9, fpcr
	str	x9, [sp, #160]
	mov	x9, sp
	str	x9, [x0]
	mov	sp, x1
	ldr	x9, [sp, #160]
	msr	fpcr, x9
	ldp	x19, x20, [sp, #0]
	ldp	x21, x22, [sp, #16]
	ldp	x23, x24, [sp, #32]
	ldp	x25, x26, [sp, #48]
	ldp	x27, x28, [sp, #64]
	ldp	x29, x30, [sp, #80]
	ldp	d8, d9, [sp, #96]
	ldp	d10, d11, [sp, #112]
	ldp	d12, d13, [sp, #128]
	ldp	d14, d15, [sp, #144]
	add	sp, sp, #176
	ret
	.size	runtime__switch_asm, .-runtime__switch_asm

/* First code a new context runs: x19 holds the entry function, x20 its
 * argument, x29 is zero. The entry function must never return. */
	.globl	runtime__fiber_trampoline
	.hidden	runtime__fiber_trampoline
	.type	runtime__fiber_trampoline, %function
	.p2align 4
runtime__fiber_trampoline:
	.cfi_startproc
	.cfi_undefined x30	/* the outermost frame: unwinders stop here */
	mov	x0, x20
	blr	x19
	brk	#0
	.cfi_endproc
	.size	runtime__fiber_trampoline, .-runtime__fiber_trampoline

/* void runtime__call_on_stack(void (*fn)(void *), void *arg, void *top):
 * fn(arg) with sp at top (16-byte aligned), then back; see the x86_64
 * file. x29 keeps the caller's frame, as the CFI says. */
	.globl	runtime__call_on_stack
	.hidden	runtime__call_on_stack
	.type	runtime__call_on_stack, %function
	.p2align 4
runtime__call_on_stack:
	.cfi_startproc
	stp	x29, x30, [sp, #-16]!
	.cfi_def_cfa_offset 16
	.cfi_offset x29, -16
	.cfi_offset x30, -8
	mov	x29, sp
	.cfi_def_cfa_register x29
	mov	sp, x2
	mov	x9, x0
	mov	x0, x1
	blr	x9
	mov	sp, x29
	.cfi_def_cfa_register sp
	ldp	x29, x30, [sp], #16
	.cfi_def_cfa_offset 0
	.cfi_restore x29
	.cfi_restore x30
	ret
	.cfi_endproc
	.size	runtime__call_on_stack, .-runtime__call_on_stack

#endif

/* Fiber stacks are data: never ask for an executable stack. */
#if defined(__linux__) && defined(__ELF__)
	.section .note.GNU-stack,"",%progbits
#endif
