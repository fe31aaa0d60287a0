/* SPDX-License-Identifier: MIT */
/*
 * stack.c - fiber stacks: carved from slabs of SLAB_STACKS stacks (one mmap
 * each), with a guard page at the low end of each stack; kept per core in a
 * cache of hot stacks (pages still resident, reused at once) and a list of
 * clean ones (pages given back with MADV_DONTNEED, address range kept); and
 * a SIGSEGV handler, on an alternate signal stack, that names the fiber
 * whose stack overflowed into its guard.
 *
 * Guards are installed with MADV_GUARD_INSTALL where the kernel has it
 * (6.13+): it adds no VMA, so a million stacks stay far below
 * vm.max_map_count. Older kernels get mprotect(PROT_NONE), a VMA split per
 * stack (about 32k stacks with the default max_map_count of 65530).
 * Where process_madvise() accepts our own process (6.13+), a whole slab's
 * guards, and a batch of stacks' release, take one syscall instead of one
 * per stack: spawning a million fibers costs a few thousand syscalls.
 */
#include "internal.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

#define SLAB_STACKS 64

enum guard_mode { GUARD_UNKNOWN, GUARD_MADVISE, GUARD_MPROTECT };
static _Atomic int guard_mode = GUARD_UNKNOWN;

/* How to name ourselves to process_madvise: PIDFD_SELF (6.15+), else a
 * pidfd opened per call - never a cached one, which would name the parent
 * after a fork(). UNUSABLE once the kernel refuses to advise us at all. */
enum self_mode { SELF_SENTINEL, SELF_PIDFD, SELF_UNUSABLE };
static _Atomic int self_mode = SELF_SENTINEL;
#define PIDFD_SELF_PROCESS (-20000) /* PIDFD_SELF_THREAD_GROUP */

size_t runtime__stack_guard_size(void)
{
	static size_t page;
	if (!page)
		page = (size_t)sysconf(_SC_PAGESIZE);
	return page;
}

static int guard_one(void *base, size_t len)
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

static long advise_self(const struct iovec *iov, size_t n, int advice)
{
	int mode = atomic_load_explicit(&self_mode, memory_order_relaxed);

	if (mode == SELF_SENTINEL) {
		long done = syscall(SYS_process_madvise, PIDFD_SELF_PROCESS, iov, n, advice, 0);
		if (done >= 0 || errno != EBADF)
			return done;
		atomic_store_explicit(&self_mode, SELF_PIDFD, memory_order_relaxed);
	}
	int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (fd < 0)
		return -1;
	long done = syscall(SYS_process_madvise, fd, iov, n, advice, 0);
	int saved = errno;
	close(fd);
	errno = saved;
	return done;
}

/* Apply advice to n ranges in one syscall if the kernel lets us. A kernel
 * that refuses process_madvise on ourselves is not asked again. */
static bool advise_batch(const struct iovec *iov, size_t n, int advice)
{
	size_t want = 0;

	if (atomic_load_explicit(&self_mode, memory_order_relaxed) == SELF_UNUSABLE)
		return false;
	for (size_t i = 0; i < n; i++)
		want += iov[i].iov_len;
	long done = advise_self(iov, n, advice);
	if (done == (long)want)
		return true;
	if (done < 0 && advice != MADV_POPULATE_WRITE &&
	    (errno == EINVAL || errno == EPERM || errno == ENOSYS)) {
		/* This kernel restricts process_madvise: stop asking. (A refused
		 * populate may only mean that one advice is unknown.) */
		atomic_store_explicit(&self_mode, SELF_UNUSABLE, memory_order_relaxed);
	}
	return false;
}

static int guards_install(char *slab, size_t each, unsigned n)
{
	size_t guard = runtime__stack_guard_size();
	struct iovec iov[SLAB_STACKS];

	for (unsigned i = 0; i < n; i++) {
		iov[i].iov_base = slab + i * each;
		iov[i].iov_len = guard;
	}
	if (atomic_load_explicit(&guard_mode, memory_order_relaxed) == GUARD_MADVISE &&
	    advise_batch(iov, n, MADV_GUARD_INSTALL))
		return 0;
	for (unsigned i = 0; i < n; i++) {
		int rc = guard_one(iov[i].iov_base, guard);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Fault in each stack's top page (fiber struct and first frames) in one
 * call, instead of one page fault per spawn. Best effort: where it fails,
 * the faults simply happen on first use. */
static void populate_tops(char *slab, size_t each)
{
	size_t page = runtime__stack_guard_size();
	struct iovec iov[SLAB_STACKS];

	for (unsigned i = 0; i < SLAB_STACKS; i++) {
		iov[i].iov_base = slab + (i + 1) * each - page;
		iov[i].iov_len = page;
	}
	advise_batch(iov, SLAB_STACKS, MADV_POPULATE_WRITE);
}

static int slab_refill(struct core *c)
{
	size_t each = c->rt->cfg.stack_size + runtime__stack_guard_size();
	size_t total = each * SLAB_STACKS;

	if (c->nslabs == c->slab_cap) {
		unsigned cap = c->slab_cap ? c->slab_cap * 2 : 16;
		void **slabs = realloc(c->slabs, cap * sizeof(*slabs));
		if (!slabs)
			return -ENOMEM;
		c->slabs = slabs;
		c->slab_cap = cap;
	}
	/* The clean list must be able to hold every stack there is. */
	size_t need = (size_t)(c->nslabs + 1) * SLAB_STACKS;
	if (need > c->clean.cap) {
		size_t cap = c->clean.cap * 2 > need ? c->clean.cap * 2 : need;
		void **v = realloc(c->clean.v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		c->clean.v = v;
		c->clean.cap = cap;
	}
	char *slab = mmap(NULL, total, PROT_READ | PROT_WRITE,
	                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (slab == MAP_FAILED)
		return -ENOMEM;
	if (guards_install(slab, each, SLAB_STACKS) < 0) {
		munmap(slab, total);
		return -ENOMEM;
	}
	populate_tops(slab, each);
	c->slabs[c->nslabs++] = slab;
	/* Lowest address last, so stacks are handed out in address order. */
	for (unsigned i = SLAB_STACKS; i-- > 0;)
		c->clean.v[c->clean.len++] = slab + i * each;
	return 0;
}

int runtime__stack_alloc(struct core *c, struct stack *s)
{
	s->size = c->rt->cfg.stack_size + runtime__stack_guard_size();
	if (c->stack_cached) {
		s->base = c->stack_cache[--c->stack_cached].base;
		return 0;
	}
	if (!c->clean.len) {
		int rc = slab_refill(c);
		if (rc < 0)
			return rc;
	}
	s->base = c->clean.v[--c->clean.len];
	return 0;
}

/* Give the pages of the pending stacks back to the kernel; keep their
 * addresses (and guards) on the clean list for reuse. */
static void release_pending(struct core *c)
{
	size_t guard = runtime__stack_guard_size();
	size_t usable = c->rt->cfg.stack_size;
	struct iovec iov[SLAB_STACKS];
	unsigned n = c->pending.len;

	for (unsigned i = 0; i < n; i++) {
		iov[i].iov_base = (char *)c->pending.v[i] + guard;
		iov[i].iov_len = usable;
	}
	if (!advise_batch(iov, n, MADV_DONTNEED))
		for (unsigned i = 0; i < n; i++)
			madvise(iov[i].iov_base, usable, MADV_DONTNEED);
	for (unsigned i = 0; i < n; i++)
		c->clean.v[c->clean.len++] = c->pending.v[i];
	c->pending.len = 0;
}

void runtime__stack_free(struct core *c, struct stack *s)
{
	if (c->stack_cached < c->rt->cfg.stack_cache) {
		c->stack_cache[c->stack_cached++] = *s;
		return;
	}
	/* The clean list has room: it is sized for every stack there is. */
	c->pending.v[c->pending.len++] = s->base;
	if (c->pending.len == SLAB_STACKS)
		release_pending(c);
}

void runtime__stack_cache_drain(struct core *c)
{
	size_t each = c->rt->cfg.stack_size + runtime__stack_guard_size();

	for (unsigned i = 0; i < c->nslabs; i++)
		munmap(c->slabs[i], each * SLAB_STACKS);
	free(c->slabs);
	free(c->clean.v);
	c->slabs = NULL;
	c->clean.v = NULL;
	c->nslabs = c->slab_cap = 0;
	c->clean.len = c->clean.cap = 0;
	c->stack_cached = 0;
	c->pending.len = 0;
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
