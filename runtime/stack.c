/* SPDX-License-Identifier: MIT */
/*
 * stack.c - fiber stacks: carved from slabs of SLAB_STACKS stacks (one mmap
 * each), with a guard page at the low end of each stack; kept per core on a
 * list of resident stacks (pages still there, the last freed reused first)
 * and a list of clean ones (pages given back with MADV_DONTNEED, address
 * range kept); and the generations behind fiber handles. (The SIGSEGV handler that names
 * a fiber whose stack overflowed into its guard is in signal.c.)
 *
 * Guards are installed with MADV_GUARD_INSTALL where the kernel has it
 * (6.13+): it adds no VMA, so a million stacks stay far below
 * vm.max_map_count. Older kernels get mprotect(PROT_NONE), a VMA split per
 * stack (about 32k stacks with the default max_map_count of 65530).
 * Where process_madvise() accepts our own process (6.13+), a whole slab's
 * guards, and a batch of stacks' release, take one syscall instead of one
 * per stack: spawning a million fibers costs a few thousand syscalls.
 *
 * Handles. A fiber lives at the top of its stack, so a stack slot names a
 * fiber - until the stack is reused. Each slab has an id in a process-wide
 * directory, and each of its stacks a generation, bumped whenever the stack
 * is released: a handle is (generation, slab id, stack index), and one kept
 * after its fiber ended names no fiber at all, from any thread. Slabs stay
 * mapped until runtime_destroy, so reading a stale slot is always safe.
 */
#include "core.h"

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

enum guard_mode { GUARD_UNKNOWN, GUARD_MADVISE, GUARD_MPROTECT };
static _Atomic int guard_mode = GUARD_UNKNOWN;

/* How to name ourselves to process_madvise: PIDFD_SELF (6.15+), else a
 * pidfd opened per call - never a cached one, which would name the parent
 * after a fork(). UNUSABLE once the kernel refuses to advise us at all. */
enum self_mode { SELF_SENTINEL, SELF_PIDFD, SELF_UNUSABLE };
static _Atomic int self_mode = SELF_SENTINEL;
#define PIDFD_SELF_PROCESS (-20000) /* PIDFD_SELF_THREAD_GROUP */

size_t runtime__page_size(void)
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

	if (runtime__fault(FAULT_NO_PROCESS_MADVISE)) {
		errno = ENOSYS; /* as before 5.10 */
		return -1;
	}
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
	size_t guard = runtime__page_size();
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
	size_t page = runtime__page_size();
	struct iovec iov[SLAB_STACKS];

	for (unsigned i = 0; i < SLAB_STACKS; i++) {
		iov[i].iov_base = slab + (i + 1) * each - page;
		iov[i].iov_len = page;
	}
	advise_batch(iov, SLAB_STACKS, MADV_POPULATE_WRITE);
}

/* ------------------------------------------------------- slab directory */

/* Slab ids are never reused in a process, so a handle from a destroyed
 * runtime names nothing (stack.h has the lookup). */
slab_dir_chunk runtime__slab_dir[SLAB_DIR_CHUNKS];
static uint32_t next_slab_id = 1; /* 0 is no slab; under directory_lock */
static pthread_mutex_t directory_lock = PTHREAD_MUTEX_INITIALIZER;

static int slab_register(struct slab *sl)
{
	int rc = 0;

	pthread_mutex_lock(&directory_lock);
	uint32_t id = next_slab_id;
	struct slab *_Atomic *chunk = NULL;
	if (id / SLAB_DIR_CHUNK >= SLAB_DIR_CHUNKS) {
		rc = -ENOMEM;
	} else if (!(chunk = atomic_load(&runtime__slab_dir[id / SLAB_DIR_CHUNK]))) {
		chunk = calloc(SLAB_DIR_CHUNK, sizeof(*chunk));
		if (chunk)
			atomic_store_explicit(&runtime__slab_dir[id / SLAB_DIR_CHUNK], chunk,
			                      memory_order_release);
		else
			rc = -ENOMEM;
	}
	if (rc == 0) {
		next_slab_id++;
		sl->id = id;
		atomic_store_explicit(&chunk[id % SLAB_DIR_CHUNK], sl, memory_order_release);
	}
	pthread_mutex_unlock(&directory_lock);
	return rc;
}

static void slab_unregister(const struct slab *sl)
{
	struct slab *_Atomic *chunk = atomic_load(&runtime__slab_dir[sl->id / SLAB_DIR_CHUNK]);
	atomic_store_explicit(&chunk[sl->id % SLAB_DIR_CHUNK], NULL, memory_order_release);
}

/* ------------------------------------------------------------- handles */

/* The stack is released: handles to its fiber name nothing from now on. */
static void handle_retire(const struct stack *s)
{
	atomic_fetch_add_explicit(&s->slab->gen[s->idx], 1, memory_order_release);
}

/* --------------------------------------------------------------- stacks */

/* Room for n stacks on a list; doubling, so a list costs O(1) per stack. */
static int list_reserve(struct stack_list *l, size_t n)
{
	if (n <= l->cap)
		return 0;
	size_t cap = l->cap * 2 > n ? l->cap * 2 : n;
	struct stack *v = realloc(l->v, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	l->v = v;
	l->cap = cap;
	return 0;
}

static int grow_bookkeeping(struct core *c)
{
	if (c->stacks.nslabs == c->stacks.slab_cap) {
		unsigned cap = c->stacks.slab_cap ? c->stacks.slab_cap * 2 : 16;
		struct slab **slabs = realloc(c->stacks.slabs, cap * sizeof(*slabs));
		if (!slabs)
			return -ENOMEM;
		c->stacks.slabs = slabs;
		c->stacks.slab_cap = cap;
	}
	/* Each list must be able to hold every stack there is: pushing a
	 * freed stack can then never fail. */
	size_t need = (size_t)(c->stacks.nslabs + 1) * SLAB_STACKS;
	int rc = list_reserve(&c->stacks.clean, need);
	return rc < 0 ? rc : list_reserve(&c->stacks.resident, need);
}

static int slab_map(struct slab *sl, size_t stack_size)
{
	sl->each = stack_size + runtime__page_size();
	sl->base = mmap(NULL, sl->each * SLAB_STACKS, PROT_READ | PROT_WRITE,
	                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (sl->base == MAP_FAILED)
		return -ENOMEM;
	if (guards_install(sl->base, sl->each, SLAB_STACKS) < 0) {
		munmap(sl->base, sl->each * SLAB_STACKS);
		return -ENOMEM;
	}
	populate_tops(sl->base, sl->each);
	return 0;
}

static int slab_refill(struct core *c)
{
	int rc = grow_bookkeeping(c);
	if (rc < 0)
		return rc;
	struct slab *sl = calloc(1, sizeof(*sl));
	if (!sl)
		return -ENOMEM;
	if ((rc = slab_map(sl, c->rt->cfg.stack_size)) < 0) {
		free(sl);
		return rc;
	}
	if ((rc = slab_register(sl)) < 0) {
		munmap(sl->base, sl->each * SLAB_STACKS);
		free(sl);
		return rc;
	}
	sl->core = c;
	for (unsigned i = 0; i < SLAB_STACKS; i++)
		atomic_init(&sl->gen[i], 1);
	c->stacks.slabs[c->stacks.nslabs++] = sl;
	/* Lowest address last, so stacks are handed out in address order. */
	for (unsigned i = SLAB_STACKS; i-- > 0;)
		c->stacks.clean.v[c->stacks.clean.len++] = (struct stack){ sl, i };
	return 0;
}

int runtime__stack_alloc(struct core *c, struct stack *s)
{
	if (runtime__fault(FAULT_STACK))
		return -ENOMEM;
	if (c->stacks.resident.len) {
		*s = c->stacks.resident.v[--c->stacks.resident.len];
		stat_add(&c->stats.stacks_cached, -1);
		if (c->stacks.resident.len < c->stacks.resident_low)
			c->stacks.resident_low = (unsigned)c->stacks.resident.len;
		return 0;
	}
	if (!c->stacks.clean.len) {
		int rc = slab_refill(c);
		if (rc < 0)
			return rc;
	}
	*s = c->stacks.clean.v[--c->stacks.clean.len];
	return 0;
}

/* Give the pages of the pending stacks back to the kernel; keep their
 * addresses (and guards) on the clean list for reuse. */
static void release_pending(struct core *c)
{
	size_t guard = runtime__page_size();
	size_t usable = c->rt->cfg.stack_size;
	struct iovec iov[SLAB_STACKS];
	unsigned n = c->stacks.pending.len;

	for (unsigned i = 0; i < n; i++) {
		iov[i].iov_base = stack_base(&c->stacks.pending.v[i]) + guard;
		iov[i].iov_len = usable;
	}
	if (!advise_batch(iov, n, MADV_DONTNEED))
		for (unsigned i = 0; i < n; i++)
			madvise(iov[i].iov_base, usable, MADV_DONTNEED);
	for (unsigned i = 0; i < n; i++)
		c->stacks.clean.v[c->stacks.clean.len++] = c->stacks.pending.v[i];
	c->stacks.pending.len = 0;
}

/*
 * Resident stacks decay. Those the core did not use all through a period
 * of STACK_DECAY_NS - the low-water mark of the resident list over the
 * period - give their pages back, beyond the first stack_cache
 * (runtime_config). A burst of fibers thus costs no page
 * faults when another burst follows within a period or two, and leaves no
 * resident stacks behind for long when none does: a burst of connections
 * that then wait idle with no fiber keeps only stack_cache stacks. The
 * pages go back at most STACK_RELEASE_SLICE stacks per timer firing, a
 * millisecond apart, so that releasing a million stacks never stalls the
 * core for the second it takes. The timer runs only while there is more
 * than stack_cache to decay; it lingers (c->timers.lingering): it is nobody's
 * pending work.
 */
#define STACK_DECAY_NS (1000 * 1000 * 1000ull)
#define STACK_RELEASE_SLICE 1024u
#define STACK_RELEASE_GAP_NS (1000 * 1000ull)

static void decay_rearm(struct core *c, uint64_t after_ns)
{
	runtime__timer_start(c, &c->stacks.decay, deadline_add(c->now, after_ns));
	c->timers.lingering++;
}

/* Give back n of the stacks unused all period (the bottom resident_low of
 * the list), the top n of them: only the stacks used since, above them,
 * move down - not the million below, slice after slice. */
static void release_unused(struct core *c, unsigned n)
{
	struct stack *v = c->stacks.resident.v;
	unsigned from = c->stacks.resident_low - n;

	for (unsigned i = from; i < c->stacks.resident_low; i++) {
		c->stacks.pending.v[c->stacks.pending.len++] = v[i];
		if (c->stacks.pending.len == SLAB_STACKS)
			release_pending(c);
	}
	release_pending(c);
	memmove(v + from, v + c->stacks.resident_low, (c->stacks.resident.len - c->stacks.resident_low) * sizeof(*v));
	c->stacks.resident.len -= n;
	c->stacks.resident_low -= n;
	stat_add(&c->stats.stacks_cached, -(int64_t)n);
}

/* A period starts: what stays unused all through it decays. */
static void decay_period(struct core *c)
{
	c->stacks.resident_low = (unsigned)c->stacks.resident.len;
	if (c->stacks.resident.len > c->rt->cfg.stack_cache)
		decay_rearm(c, STACK_DECAY_NS);
}

static void decay_fire(struct timer *t, enum runtime_timer_why why)
{
	struct core *c = t->core;
	unsigned keep = c->rt->cfg.stack_cache;

	(void)why;
	c->timers.lingering--;
	if (c->stacks.resident_low > keep) {
		unsigned n = c->stacks.resident_low - keep;
		release_unused(c, n < STACK_RELEASE_SLICE ? n : STACK_RELEASE_SLICE);
	}
	if (c->stacks.resident_low > keep)
		decay_rearm(c, STACK_RELEASE_GAP_NS);
	else
		decay_period(c);
}

static void decay_arm(struct core *c)
{
	c->stacks.decay.core = c;
	c->stacks.decay.fire = decay_fire;
	decay_period(c);
}

/* Release a stack: its handle's generation moves on, then the stack goes
 * on the resident list, the first to be reused. */
void runtime__stack_free(struct core *c, const struct stack *s)
{
	handle_retire(s);
	c->stacks.resident.v[c->stacks.resident.len++] = *s;
	stat_add(&c->stats.stacks_cached, 1);
	if (c->stacks.resident.len > c->rt->cfg.stack_cache && c->stacks.decay.state != TIMER_ARMED)
		decay_arm(c);
}

/* Unmap every slab of the core (runtime_destroy). */
void runtime__stacks_free(struct core *c)
{
	for (unsigned i = 0; i < c->stacks.nslabs; i++) {
		struct slab *sl = c->stacks.slabs[i];
		slab_unregister(sl);
		munmap(sl->base, sl->each * SLAB_STACKS);
		free(sl);
	}
	free(c->stacks.slabs);
	free(c->stacks.clean.v);
	free(c->stacks.resident.v);
	c->stacks.slabs = NULL;
	c->stacks.nslabs = c->stacks.slab_cap = 0;
	c->stacks.clean = (struct stack_list){ 0 };
	c->stacks.resident = (struct stack_list){ 0 };
	c->stacks.pending.len = 0;
}
