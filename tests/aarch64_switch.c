/* SPDX-License-Identifier: MIT */
/*
 * aarch64_switch.c - built with an aarch64 cross compiler and run under
 * qemu-aarch64 by aarch64_switch.sh, so that the aarch64 context switch is
 * exercised on an x86_64 machine: a context entered with its argument,
 * callee-saved general (x19) and FP (d8) registers surviving 1,000 round
 * trips, FP work on the other context's stack, and FPCR kept per context;
 * and a call on another stack (runtime__call_on_stack) that comes back.
 */
#include <stdint.h>
#include <stdio.h>

void runtime__switch_asm(void **save_sp, void *next_sp);
void *runtime__context_init(void *top, void (*entry)(void *), void *arg);
void runtime__call_on_stack(void (*fn)(void *), void *arg, void *top);

static char other[16384] __attribute__((aligned(16)));

/* Runs on other[]: says whether its locals are there. */
static void on_other(void *arg)
{
	char here;
	*(int *)arg = &here > other && &here < other + sizeof(other);
}

static void *main_sp, *co_sp;
static volatile double acc;

static uint64_t fpcr_get(void)
{
	uint64_t v;
	__asm__ volatile("mrs %0, fpcr" : "=r"(v));
	return v;
}

static void fpcr_set(uint64_t v)
{
	__asm__ volatile("msr fpcr, %0" : : "r"(v));
}

#define FPCR_RMODE_ZERO (3ull << 22)

/* Runs on its own stack; changes its rounding mode, which must not leak. */
static void co(void *arg)
{
	long *n = arg;
	double x = 1.0;

	fpcr_set(FPCR_RMODE_ZERO);
	for (;;) {
		x *= 1.5;
		acc = x;
		(*n)++;
		runtime__switch_asm(&co_sp, main_sp);
	}
}

int main(void)
{
	static char stack[65536] __attribute__((aligned(16)));
	long n = 0;
	register long keep19 __asm__("x19") = 0x1919;
	double d8 = 3.25;
	int ok = 1;

	co_sp = runtime__context_init(stack + sizeof(stack), co, &n);
	for (int i = 0; i < 1000; i++) {
		runtime__switch_asm(&main_sp, co_sp);
		__asm__ volatile("" : "+r"(keep19), "+w"(d8));
		if (fpcr_get() & FPCR_RMODE_ZERO)
			ok = 0; /* the other context's rounding mode leaked */
	}
	ok = ok && n == 1000 && keep19 == 0x1919 && d8 == 3.25 && acc > 1.0;
	printf("aarch64 switch: %ld round trips, x19=%#lx d8=%.2f fpcr kept: %s\n", n, keep19,
	       d8, ok ? "yes" : "NO");
	int there = 0;
	runtime__call_on_stack(on_other, &there, other + sizeof(other));
	__asm__ volatile("" : "+r"(keep19), "+w"(d8));
	int called = there && keep19 == 0x1919 && d8 == 3.25;
	printf("aarch64 call on another stack: %s\n", called ? "ran there and came back" : "NO");
	printf("%d passed, %d failed\n", ok + called, !ok + !called);
	return !(ok && called);
}
