/* SPDX-License-Identifier: MIT */
/*
 * signal.c - everything the runtime does to signals, and how it gives it
 * back (the public header lists these effects):
 *
 *  - SIGSEGV: while any runtime exists, a handler (on an alternate stack
 *    per core thread) reports a fiber that overflowed into its stack's
 *    guard page and aborts. Any other fault goes to the handler that was
 *    installed before the first runtime, called directly every time (or
 *    to the default action). The last runtime_destroy puts that handler
 *    back, unless the program has replaced ours meanwhile.
 *  - SIGPIPE: blocked in each core thread while it runs, so that a write to
 *    a gone reader returns -EPIPE instead of killing the process; the
 *    SIGPIPEs raised meanwhile (directed at that thread) are taken before
 *    the mask is given back.
 *  - SIGINT/SIGTERM: runtime_shutdown_on_signals blocks them in the
 *    creating thread; runtime_destroy unblocks what it blocked.
 */
#include "core.h"
#include "services.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* --------------------------------------------------------------- SIGSEGV */

static pthread_mutex_t segv_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned segv_users;             /* live runtimes; under segv_lock */
static struct sigaction previous_segv;  /* written before ours is installed */

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

/* The running fiber, if addr is in its stack's guard page. */
static struct fiber *overflowed(const void *addr)
{
	struct core *c = runtime__tls_core;
	struct fiber *f = c ? c->sched.current : NULL;

	if (!f || (f->flags & FIBER_LOOP))
		return NULL;
	const char *guard = stack_base(&f->stack);
	return (const char *)addr >= guard && (const char *)addr < guard + runtime__page_size()
	               ? f
	               : NULL;
}

static void report_overflow(struct fiber *f)
{
	char msg[160];
	size_t len = 0;

	append(msg, &len, "fiber stack overflow: fiber ");
	len += fmt_u64(msg + len, f->id);
	append(msg, &len, ", stack size ");
	len += fmt_u64(msg + len, f->core->rt->cfg.stack_size);
	append(msg, &len, " bytes\n");
	if (sys_write(STDERR_FILENO, msg, len) < 0) {
		/* nothing more can be done from here */
	}
	abort();
}

/* Not a fiber overflow: what the program had before us handles it. With
 * the default action, restore it and return: the fault recurs and the
 * process dies of it as it would have without us. */
static void chain(int sig, siginfo_t *info, void *uctx)
{
	const struct sigaction *p = &previous_segv;

	if (p->sa_flags & SA_SIGINFO)
		p->sa_sigaction(sig, info, uctx);
	else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN)
		p->sa_handler(sig);
	else
		signal(SIGSEGV, SIG_DFL);
}

static void on_segv(int sig, siginfo_t *info, void *uctx)
{
	struct fiber *f = overflowed(info->si_addr);

	if (f)
		report_overflow(f);
	chain(sig, info, uctx);
}

/* runtime_create: the first runtime installs the handler. */
int runtime__signals_acquire(void)
{
	int rc = 0;

	pthread_mutex_lock(&segv_lock);
	if (segv_users == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_segv;
		sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGSEGV, &sa, &previous_segv) < 0)
			rc = -errno;
	}
	if (rc == 0)
		segv_users++;
	pthread_mutex_unlock(&segv_lock);
	return rc;
}

/* runtime_destroy: the last runtime gives the program its handler back. */
void runtime__signals_release(void)
{
	pthread_mutex_lock(&segv_lock);
	if (--segv_users == 0) {
		struct sigaction now;
		if (sigaction(SIGSEGV, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) &&
		    now.sa_sigaction == on_segv)
			sigaction(SIGSEGV, &previous_segv, NULL);
	}
	pthread_mutex_unlock(&segv_lock);
}

/* ------------------------------------------------------- core threads */

#define ALTSTACK_SIZE (64 * 1024)

/* The handler needs a stack of its own: the faulting one is exhausted. */
static int altstack_enter(struct core *c)
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
	c->stacks.altstack = p;
	return 0;
}

static void altstack_leave(struct core *c)
{
	stack_t ss = { .ss_flags = SS_DISABLE };

	if (!c->stacks.altstack)
		return;
	sigaltstack(&ss, NULL);
	munmap(c->stacks.altstack, ALTSTACK_SIZE);
	c->stacks.altstack = NULL;
}

/* On the core's thread as its run starts: SIGPIPE blocked, altstack on. */
int runtime__core_signals_enter(struct core *c)
{
	sigset_t pipe;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, &c->saved_mask);
	int rc = altstack_enter(c);
	if (rc < 0)
		pthread_sigmask(SIG_SETMASK, &c->saved_mask, NULL);
	return rc;
}

/* As the run ends: the SIGPIPEs that fibers raised are taken (they were
 * answered with -EPIPE already), then SIGPIPE is unblocked if we blocked
 * it. A thread that blocked SIGPIPE itself keeps its pending ones. */
void runtime__core_signals_leave(struct core *c)
{
	altstack_leave(c);
	if (sigismember(&c->saved_mask, SIGPIPE))
		return;
	sigset_t pipe;
	struct timespec zero = { 0, 0 };
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	while (sigtimedwait(&pipe, NULL, &zero) == SIGPIPE)
		;
	pthread_sigmask(SIG_UNBLOCK, &pipe, NULL);
}

/* --------------------------------------------------- SIGINT and SIGTERM */

/*
 * SIGINT and SIGTERM become runtime_shutdown(): they are blocked in the
 * calling thread (core threads inherit the mask when runtime_run starts
 * them) and read from a signalfd by core 0's ring - no signal handler runs.
 */
int runtime_shutdown_on_signals(struct runtime *rt)
{
	sigset_t set, old;

	if (!rt)
		return -EINVAL;
	if (!runtime__on_owner_thread(rt) || runtime__is_running(rt))
		return -EPERM;
	runtime__signals_drain(rt, false, 0); /* runtime_drain_on_signals sets it after */
	if (rt->signal_fd >= 0)
		return 0;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	int err = pthread_sigmask(SIG_BLOCK, &set, &old);
	if (err) {
		close(fd);
		return -err;
	}
	sigemptyset(&rt->signals_blocked);
	for (int sig = SIGINT; sig <= SIGTERM; sig++)
		if (sigismember(&set, sig) && !sigismember(&old, sig))
			sigaddset(&rt->signals_blocked, sig);
	rt->signal_fd = fd;
	return 0;
}

/* runtime_destroy: close the signalfd and unblock what we blocked (only
 * the creating thread's mask is ours to change). Once the runtime has been
 * shut down, a SIGINT or SIGTERM still pending (a second Ctrl-C, or
 * timeout(1) signalling the whole group) asked for what already happened:
 * it is taken, not let loose to kill the program before it can exit. */
void runtime__shutdown_signals_release(struct runtime *rt)
{
	static const struct timespec zero;

	if (rt->signal_fd < 0)
		return;
	close(rt->signal_fd);
	rt->signal_fd = -1;
	if (!runtime__on_owner_thread(rt))
		return;
	if (atomic_load(&rt->stop))
		while (sigtimedwait(&rt->signals_blocked, NULL, &zero) > 0)
			;
	pthread_sigmask(SIG_UNBLOCK, &rt->signals_blocked, NULL);
}

/* ------------------------------------------------------- the dump signal */

/*
 * runtime_config.dump_signal: a handler makes every core print its fibers
 * (runtime__dump_signalled), from its loop. The handler only bumps the
 * runtime's dump generation and writes each core's eventfd, both
 * async-signal-safe; a core notices the new generation at its next loop
 * turn. One runtime per process may have it (the handler finds it here).
 */
static struct runtime *_Atomic dump_rt;
static struct sigaction previous_dump;

static void on_dump_signal(int sig)
{
	struct runtime *rt = atomic_load(&dump_rt);
	uint64_t one = 1;
	int saved = errno;

	(void)sig;
	if (!rt)
		return;
	atomic_fetch_add(&rt->dump_gen, 1);
	for (unsigned i = 0; i < rt->ncores; i++)
		if (sys_write(rt->cores[i].inbox.wake_fd, &one, sizeof(one)) < 0) {
			/* the counter is full: the core is awake anyway */
		}
	errno = saved;
}

int runtime__dump_signal_install(struct runtime *rt)
{
	int sig = rt->cfg.dump_signal;
	struct runtime *none = NULL;
	struct sigaction sa;

	if (!sig)
		return 0;
	if (!atomic_compare_exchange_strong(&dump_rt, &none, rt))
		return -EBUSY;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_dump_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, &previous_dump) < 0) {
		int rc = -errno;
		atomic_store(&dump_rt, NULL);
		return rc;
	}
	return 0;
}

/* runtime_destroy, before the eventfds close. */
void runtime__dump_signal_release(struct runtime *rt)
{
	if (!rt->cfg.dump_signal || atomic_load(&dump_rt) != rt)
		return;
	sigaction(rt->cfg.dump_signal, &previous_dump, NULL);
	atomic_store(&dump_rt, NULL);
}

/* Each loop turn: has the dump signal come since this core last looked? */
void runtime__dump_signal_poll(struct core *c)
{
	unsigned gen = atomic_load_explicit(&c->rt->dump_gen, memory_order_relaxed);

	if (unlikely(gen != c->dump_seen)) {
		c->dump_seen = gen;
		runtime__dump_signalled(c);
	}
}
