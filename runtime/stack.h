/* SPDX-License-Identifier: MIT */
/*
 * stack.h - fiber stacks (stack.c): slabs of SLAB_STACKS stacks with guard
 * pages, a per-core cache of freed ones, and the handles that name a
 * fiber by its stack slot and that slot's generation (a stale handle
 * names no fiber, whatever now runs on the stack).
 */
#ifndef RUNTIME_STACK_H
#define RUNTIME_STACK_H

#include "base.h"
#include "timer.h"

struct core;
struct fiber;

#define SLAB_STACKS 64  /* stacks per mmap, and per batch given back */

/* SLAB_STACKS stacks of `each` bytes (guard page first), and for each the
 * generation that handles carry: bumped when the stack is released, so a
 * handle kept past its fiber's end names no fiber (stack.c). */
struct slab {
	char *base;
	size_t each;
	struct core *core;                    /* whose stacks these are */
	uint32_t id;                          /* in the process-wide directory */
	_Atomic uint32_t gen[SLAB_STACKS];
};

struct stack {
	struct slab *slab;
	unsigned idx;
};

static inline char *stack_base(const struct stack *s)
{
	return s->slab->base + (size_t)s->idx * s->slab->each;
}

/* Usable top of a stack (page aligned, exclusive). */
static inline char *stack_top(const struct stack *s)
{
	return stack_base(s) + s->slab->each;
}

/* Stacks by the slot: each list of a core can hold every stack there is. */
struct stack_list {
	struct stack *v;
	size_t len, cap;
};

/* A core's stacks (stack.c): those freed with their pages still there,
 * those whose pages went back, and what decays the first into the second. */
struct stack_cache {
	struct stack_list resident; /* freed stacks, pages still there; the
	                               last freed is the first reused */
	unsigned resident_low;      /* the fewest resident this decay period */
	struct timer decay;         /* gives back what was not reused */
	struct stack_list clean;    /* stacks whose pages were given back */
	struct {                    /* freed stacks awaiting MADV_DONTNEED */
		struct stack v[SLAB_STACKS];
		unsigned len;
	} pending;
	struct slab **slabs;        /* every slab, unmapped at destroy */
	unsigned nslabs, slab_cap;
	void *altstack;             /* the core thread's signal stack */
};

int runtime__stack_alloc(struct core *c, struct stack *s);
void runtime__stack_free(struct core *c, const struct stack *s);
void runtime__stacks_free(struct core *c);
size_t runtime__page_size(void);

/*
 * Handles: (generation << 32 | slab id << 6 | stack index). Every slab has
 * an id in a process-wide directory of SLAB_DIR_CHUNKS chunks of
 * SLAB_DIR_CHUNK entries (64M slabs over the life of the process), found
 * here without a call: join, cancel and unpark resolve a handle each time.
 */
#define HANDLE_IDX_BITS 6
#define SLAB_DIR_CHUNK 4096u
#define SLAB_DIR_CHUNKS 16384u
_Static_assert(SLAB_STACKS == 1u << HANDLE_IDX_BITS, "a handle holds a stack index");
_Static_assert((uint64_t)SLAB_DIR_CHUNKS * SLAB_DIR_CHUNK << HANDLE_IDX_BITS <= 1ull << 32,
               "a handle holds a slab id in 32 bits beside its generation");

typedef struct slab *_Atomic *_Atomic slab_dir_chunk;
extern slab_dir_chunk runtime__slab_dir[SLAB_DIR_CHUNKS];

static inline struct slab *slab_lookup(uint32_t id)
{
	if (id == 0 || id / SLAB_DIR_CHUNK >= SLAB_DIR_CHUNKS)
		return NULL;
	struct slab *_Atomic *chunk =
		atomic_load_explicit(&runtime__slab_dir[id / SLAB_DIR_CHUNK], memory_order_acquire);
	return chunk ? atomic_load_explicit(&chunk[id % SLAB_DIR_CHUNK], memory_order_acquire)
	             : NULL;
}

static inline struct runtime_fiber *handle_make(const struct stack *s, uint32_t *gen)
{
	*gen = atomic_load_explicit(&s->slab->gen[s->idx], memory_order_relaxed);
	uint64_t h = (uint64_t)*gen << 32 | (uint64_t)s->slab->id << HANDLE_IDX_BITS | s->idx;
	return (struct runtime_fiber *)(uintptr_t)h;
}

/* What a handle names: the fiber at its stack slot, that stack's core, and
 * the generation the handle was made under. */
struct handle_ref {
	struct fiber *fiber;
	struct core *core;
	uint32_t gen;
	const _Atomic uint32_t *live; /* the slot's generation now */
};

/* Does ref still name the fiber it named? */
static inline bool handle_current(const struct handle_ref *ref)
{
	return atomic_load_explicit(ref->live, memory_order_acquire) == ref->gen;
}

#endif /* RUNTIME_STACK_H */
