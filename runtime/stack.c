/* SPDX-License-Identifier: MIT */
/*
 * stack.c - fiber stacks: mmap'd with a guard page at the low end, kept in a
 * per-core cache for reuse, and a SIGSEGV handler (on an alternate signal
 * stack) that names the fiber whose stack overflowed into its guard.
 *
 * The guard is installed with MADV_GUARD_INSTALL where the kernel has it
 * (6.13+): it adds no VMA, so adjacent stacks merge into few VMAs and a
 * million stacks stay far below vm.max_map_count. Older kernels get
 * mprotect(PROT_NONE), which costs a VMA split per stack (about 32k stacks
 * with the default max_map_count of 65530).
 */
#include "internal.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

enum guard_mode { GUARD_UNKNOWN, GUARD_MADVISE, GUARD_MPROTECT };
static _Atomic int guard_mode = GUARD_UNKNOWN;

size_t runtime__stack_guard_size(void)
{
	static size_t page;
	if (!page)
		page = (size_t)sysconf(_SC_PAGESIZE);
	return page;
}

static int guard_install(void *base, size_t len)
{
	int mode = atomic_load_explicit(&guard_mode, memory_order_relaxed);

	if (mode != GUARD_MPROTECT) {
		if (madvise(base, len, MADV_GUARD_INSTALL) == 0) {
			atomic_store_explicit(&guard_mode, GUARD_MADVISE, memory_order_relaxed);
			return 0;
		}
		if (mode == GUARD_MADVISE)
			return -errno;
		atomic_store_explicit(&guard_mode, GUARD_MPROTECT, memory_order_relaxed);
	}
	return mprotect(base, len, PROT_NONE) == 0 ? 0 : -errno;
}

int runtime__stack_alloc(struct core *c, struct stack *s)
{
	if (c->stack_cached) {
		*s = c->stack_cache[--c->stack_cached];
		return 0;
	}
	size_t guard = runtime__stack_guard_size();
	size_t size = c->rt->cfg.stack_size + guard;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	if (guard_install(p, guard) < 0) {
		munmap(p, size);
		return -ENOMEM;
	}
	s->base = p;
	s->size = size;
	return 0;
}

void runtime__stack_free(struct core *c, struct stack *s)
{
	if (c->stack_cached < c->rt->cfg.stack_cache) {
		c->stack_cache[c->stack_cached++] = *s;
		return;
	}
	munmap(s->base, s->size);
}

void runtime__stack_cache_drain(struct core *c)
{
	while (c->stack_cached) {
		struct stack *s = &c->stack_cache[--c->stack_cached];
		munmap(s->base, s->size);
	}
}

/* ------------------------------------------------------ overflow handler */

static struct sigaction previous_segv;
static _Atomic bool handler_installed;

/* Async-signal-safe decimal formatting. */
static size_t fmt_u64(char *out, uint64_t v)
{
	char tmp[20];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

static void append(char *buf, size_t *len, const char *s)
{
	size_t n = strlen(s);
	memcpy(buf + *len, s, n);
	*len += n;
}

static void on_segv(int sig, siginfo_t *info, void *uctx)
{
	struct core *c = runtime__tls_core;
	struct fiber *f = c ? c->current : NULL;
	char *addr = info->si_addr;

	if (f && !(f->flags & FIBER_LOOP) && addr >= (char *)f->stack.base &&
	    addr < (char *)f->stack.base + runtime__stack_guard_size()) {
		char msg[160];
		size_t len = 0;

		append(msg, &len, "fiber stack overflow: fiber ");
		len += fmt_u64(msg + len, f->id);
		append(msg, &len, ", stack size ");
		len += fmt_u64(msg + len, c->rt->cfg.stack_size);
		append(msg, &len, " bytes\n");
		if (write(STDERR_FILENO, msg, len) < 0) {
			/* nothing more can be done from here */
		}
		abort();
	}
	/* Not ours: give the fault back to whoever handled it before (or the
	 * default action); returning re-executes the faulting instruction. */
	sigaction(SIGSEGV, &previous_segv, NULL);
	(void)sig;
	(void)uctx;
}

int runtime__overflow_handler_install(void)
{
	if (atomic_exchange(&handler_installed, true))
		return 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &previous_segv) < 0) {
		atomic_store(&handler_installed, false);
		return -errno;
	}
	return 0;
}

#define ALTSTACK_SIZE (64 * 1024)

/* The handler needs a stack of its own: the faulting one is exhausted. */
int runtime__altstack_enter(struct core *c)
{
	stack_t old, ss;

	if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE))
		return 0; /* the thread has one already (ASan installs its own) */
	void *p = mmap(NULL, ALTSTACK_SIZE, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	ss.ss_sp = p;
	ss.ss_size = ALTSTACK_SIZE;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL) < 0) {
		munmap(p, ALTSTACK_SIZE);
		return -errno;
	}
	c->altstack = p;
	return 0;
}

void runtime__altstack_leave(struct core *c)
{
	stack_t ss = { .ss_flags = SS_DISABLE };

	if (!c->altstack)
		return;
	sigaltstack(&ss, NULL);
	munmap(c->altstack, ALTSTACK_SIZE);
	c->altstack = NULL;
}
