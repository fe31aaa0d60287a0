/* SPDX-License-Identifier: MIT */
/*
 * debug.c - what a user sees when something hangs: fiber names, and
 * runtime_dump, which prints every fiber with what it waits for and since
 * when (the dump signal prints the same, signal.c).
 *
 * A core's fibers are its own, so while the runtime runs each core writes
 * its own section, from its loop, into a buffer of a shared dump job; the
 * caller waits (a bounded time) and prints the sections in core order. A
 * core that does not answer is running a fiber that does not yield: the
 * dump says so rather than wait for it (the stall detector, stall.c, says
 * which fiber).
 */
#include "core.h"
#include "engine/engine.h"
#include "services.h"
#include "wait.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DUMP_WAIT_NS (1000 * 1000 * 1000ull) /* for each core to answer */

int runtime_fiber_name_set(const char *name)
{
	struct fiber *f = this_fiber();

	if (!f)
		return -EPERM;
	size_t n = name ? strnlen(name, sizeof(f->name) - 1) : 0;
	memcpy(f->name, name ? name : "", n);
	f->name[n] = '\0';
	return 0;
}

/* ------------------------------------------------------------ one fiber */

static const char *const block_names[BLOCK_KINDS] = {
	[BLOCK_NONE] = "-",           [BLOCK_IO] = "io",
	[BLOCK_STREAM] = "stream",    [BLOCK_SLEEP] = "sleep",
	[BLOCK_PARK] = "park",        [BLOCK_JOIN] = "join",
	[BLOCK_MUTEX] = "mutex",      [BLOCK_COND] = "cond",
	[BLOCK_WAITGROUP] = "waitgroup", [BLOCK_SEM] = "sem/pool",
	[BLOCK_CHAN] = "chan",        [BLOCK_OFFLOAD] = "offload",
	[BLOCK_CLOSE] = "close",
};

/* The object a sync wait is queued on: its first waiter's queue, the same
 * address for every fiber waiting on one primitive. */
static const void *wait_target(const struct fiber *f)
{
	const struct wait *w = f->wait_obj;
	return w && w->nwaiters ? (const void *)w->waiters[0].q : NULL;
}

/* What f waits for, e.g. "io recv fd 7" or "mutex 0x55d0c0". */
static void what(FILE *out, const struct fiber *f)
{
	unsigned kind = f->block < BLOCK_KINDS ? f->block : BLOCK_NONE;

	fputs(block_names[kind], out);
	switch (kind) {
	case BLOCK_IO: {
		const struct io_wait *w = f->wait_obj;
		fprintf(out, " %s fd %d", runtime__io_wait_name(w), w->fd);
		break;
	}
	case BLOCK_STREAM:
		fprintf(out, " fd %d", ((const struct mshot *)f->wait_obj)->fd);
		break;
	case BLOCK_MUTEX: case BLOCK_COND: case BLOCK_WAITGROUP: case BLOCK_SEM: case BLOCK_CHAN:
		fprintf(out, " %p", wait_target(f));
		break;
	default:
		break;
	}
}

static const char *state_name(const struct fiber *f)
{
	static const char *const names[] = { "ready", "running", "waiting", "done" };
	return f->state < 4 ? names[f->state] : "?";
}

static void fiber_line(FILE *out, const struct fiber *f, uint64_t now)
{
	fprintf(out, "  fiber %llu %-8s ", (unsigned long long)f->id, state_name(f));
	if (f->state == FIBER_SUSPENDED) {
		what(out, f);
		uint64_t ms = now > f->block_since ? (now - f->block_since) / 1000000 : 0;
		fprintf(out, " for %llu ms", (unsigned long long)ms);
	}
	if (f->flags & FIBER_CANCELLED)
		fputs(" cancelled", out);
	if (f->flags & FIBER_SHIELDED)
		fputs(" in cleanup", out);
	if (f->deadline != NEVER)
		fprintf(out, " deadline in %lld ms", (long long)(f->deadline - now) / 1000000);
	if (f->name[0])
		fprintf(out, " \"%s\"", f->name);
	fputc('\n', out);
}

/* Core c's section. On c's own thread, or while nothing runs. */
static void core_section(FILE *out, const struct core *c)
{
	uint64_t now = runtime_now();
	unsigned n = 0;

	dlist_for_each(node, &c->sched.fibers)
		n++;
	fprintf(out, "core %u: %u fibers, %u timers armed\n", c->index, n, c->timers.armed);
	dlist_for_each(node, &c->sched.fibers)
		fiber_line(out, container_of(node, struct fiber, all), now);
}

/* A section as one string, so that cores writing at once do not mix. */
static char *section_text(const struct core *c, size_t *len)
{
	char *text = NULL;
	FILE *mem = open_memstream(&text, len);

	if (!mem)
		return NULL;
	core_section(mem, c);
	if (fclose(mem) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

/* ------------------------------------------------------------- dump job */

/* One runtime_dump while the runtime runs. Freed by whichever of the
 * caller and the cores' nodes lets go last: a core that answers after
 * the caller gave up still finds it. */
struct dump_job {
	_Atomic unsigned refs;
	_Atomic unsigned left;             /* sections still due */
	struct dump_section {
		struct inbox_node node;    /* to its core (section_ops) */
		struct dump_job *job;
		char *text;                /* the caller's once ready */
		size_t len;
		_Atomic bool ready;
	} sec[];
};

static void job_put(struct dump_job *job)
{
	if (atomic_fetch_sub(&job->refs, 1) != 1)
		return;
	for (unsigned i = 0; job->sec[i].job; i++)
		free(job->sec[i].text);
	free(job);
}

/* Fill a section: on its core's thread, or while nothing runs. */
static void section_fill(struct dump_section *s, const struct core *c)
{
	s->text = section_text(c, &s->len);
	atomic_store_explicit(&s->ready, true, memory_order_release);
	atomic_fetch_sub(&s->job->left, 1);
}

/* A section's node reached its core (inbox.c). */
static int section_arrived(struct core *c, struct inbox_node *n)
{
	struct dump_section *s = container_of(n, struct dump_section, node);
	struct dump_job *job = s->job;

	section_fill(s, c);
	job_put(job);
	return 0;
}

/* runtime_destroy: a section no run will answer. */
static void section_discard(struct runtime *rt, struct inbox_node *n)
{
	(void)rt;
	job_put(container_of(n, struct dump_section, node)->job);
}

static const struct inbox_ops section_ops = { section_arrived, section_discard };

static struct dump_job *job_new(unsigned ncores)
{
	struct dump_job *job = calloc(1, sizeof(*job) + (ncores + 1) * sizeof(job->sec[0]));

	if (!job)
		return NULL;
	atomic_init(&job->refs, 1);
	atomic_init(&job->left, ncores);
	for (unsigned i = 0; i < ncores; i++) {
		job->sec[i].job = job;
		job->sec[i].node.ops = &section_ops;
	}
	return job; /* sec[ncores].job == NULL ends the array */
}

/* Each core's section: filled here if nothing runs or it is the caller's
 * own core, else asked of the core through its inbox. */
static void job_start(struct dump_job *job, struct runtime *rt)
{
	for (unsigned i = 0; i < rt->ncores; i++) {
		struct core *c = &rt->cores[i];
		if (!runtime__is_running(rt) || this_core() == c) {
			section_fill(&job->sec[i], c);
			continue;
		}
		atomic_fetch_add(&job->refs, 1);
		runtime__inbox_push(c, &job->sec[i].node);
	}
}

/* Until every section is in or the deadline passes. A dump is rare: the
 * caller polls every millisecond (a fiber sleeps, so its core runs on). */
static int job_wait(struct dump_job *job, uint64_t deadline)
{
	while (atomic_load(&job->left) && runtime_now() < deadline) {
		if (this_fiber()) {
			int rc = runtime_sleep(1000 * 1000);
			if (rc < 0)
				return rc;
		} else {
			nanosleep(&(struct timespec){ 0, 1000 * 1000 }, NULL);
		}
	}
	return atomic_load(&job->left) ? -ETIMEDOUT : 0;
}

static void job_print(struct dump_job *job, const struct runtime *rt, FILE *out)
{
	fprintf(out, "runtime dump: %u cores\n", rt->ncores);
	for (unsigned i = 0; i < rt->ncores; i++) {
		struct dump_section *s = &job->sec[i];
		if (!atomic_load_explicit(&s->ready, memory_order_acquire))
			fprintf(out, "core %u: no answer: a fiber there runs without yielding\n", i);
		else if (!s->text)
			fprintf(out, "core %u: out of memory\n", i);
		else
			fwrite(s->text, 1, s->len, out);
	}
}

int runtime_dump(struct runtime *rt, FILE *out)
{
	if (!rt || !out)
		return -EINVAL;
	struct dump_job *job = job_new(rt->ncores);
	if (!job)
		return -ENOMEM;
	job_start(job, rt);
	int rc = job_wait(job, deadline_add(runtime_now(), DUMP_WAIT_NS));
	job_print(job, rt, out);
	job_put(job);
	if (fflush(out) != 0 && rc == 0)
		rc = -EIO;
	return rc;
}

/* The dump signal came (signal.c): this core prints its section. */
void runtime__dump_signalled(struct core *c)
{
	size_t len;
	char *text = section_text(c, &len);

	if (text) {
		fwrite(text, 1, len, stderr);
		free(text);
	}
}
