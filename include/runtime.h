/* SPDX-License-Identifier: MIT */
/*
 * runtime.h - an io_uring fiber runtime for Linux.
 *
 * Fibers are stackful coroutines that read, write, sleep and wait as if they
 * were blocking. Underneath, each core thread owns an io_uring ring: an I/O
 * call below is submitted there as an SQE, and the calling fiber is parked
 * until its completions arrive; sleeps and sync waits are the core's own
 * timers and queues. A deadline costs no SQE while the call beats it: it is
 * a timer on the core's heap, and only when it fires is the operation
 * cancelled in the kernel. Nothing blocks a core thread.
 *
 * Conventions, for every function here:
 *  - Errors are returned as -errno (liburing's convention); errno is never set.
 *  - "Fiber context" means the caller is a fiber of this runtime. Blocking
 *    calls made outside fiber context return -EPERM.
 *  - A fiber lives on one core (one thread, one ring) for its whole life:
 *    it never migrates.
 *  - A struct runtime_fiber * is a checked handle, not a pointer: once its
 *    fiber has ended (and, if joinable, been joined or detached), every call
 *    given it returns -ESRCH (runtime_fiber_id: 0), never acting on another
 *    fiber. Handles are valid until runtime_destroy.
 *  - Cancellation is sticky: once a fiber is cancelled, its pending blocking
 *    call and every later one returns -ECANCELED, except runtime_close(),
 *    which always closes so that cleanup cannot leak, and the calls made
 *    inside runtime_cleanup_begin/_end, which holds the cancel back for a
 *    bounded time.
 *  - A per-fiber deadline (runtime_deadline_set) bounds every blocking call;
 *    a call it cuts short returns -ETIMEDOUT.
 *  - A cancel or a deadline always ends the blocking call it hits, whatever
 *    the kernel answers to the first attempt: the runtime keeps cancelling
 *    until the operation has completed.
 *  - An operation whose completion raced a cancel or deadline and succeeded
 *    anyway returns its real result (an accepted fd, bytes read): nothing is
 *    lost or leaked; the next blocking call reports the cancel.
 *  - Delays and timeouts saturate: one so long that now + delay would
 *    overflow means "never", not "at once".
 *  - Misuse - a blocking call outside a fiber, a double join, a handle
 *    used after join, a call from the wrong thread or core, unlocking a
 *    mutex the caller does not hold, starting an armed timer, destroying
 *    a running runtime - returns its error and is reported on stderr
 *    ("runtime: misuse: <function>: <what>"; the first 10 reports of the
 *    process). With RUNTIME_MISUSE=abort in the environment it aborts
 *    instead, for a debugger or core dump. A library configured with
 *    --enable-debug also checks the timer heap on every loop turn (a
 *    timer's storage overwritten or freed while armed) and turns the stall
 *    detector on (runtime_config.stall_ms).
 *
 * What the runtime changes in the process (and gives back):
 *  - SIGSEGV: from the first runtime_create to the last runtime_destroy, a
 *    handler reports a fiber stack overflow ("fiber stack overflow: fiber
 *    N, stack size S bytes") and aborts; every other fault is passed to the
 *    handler installed before (called directly), or to the default action.
 *    The last runtime_destroy restores that handler. A program that sets
 *    its own SIGSEGV handler after runtime_create loses the report.
 *  - Core threads, while runtime_run runs: SIGPIPE blocked (writes to a
 *    gone reader return -EPIPE instead of killing the process; the
 *    SIGPIPEs they raised are taken before the thread's mask is given
 *    back), an alternate signal stack, and with pin_cpus the CPU affinity
 *    (restored on the calling thread).
 *  - runtime_shutdown_on_signals: SIGINT and SIGTERM blocked in the calling
 *    thread (inherited by threads it creates later) and read from a
 *    signalfd; runtime_destroy on that thread unblocks them.
 *  - File descriptors: an io_uring and an eventfd per core (close-on-exec),
 *    held only while the runtime exists (the rings only during a run).
 */
#ifndef RUNTIME_H
#define RUNTIME_H

#include <errno.h> /* the -errno values every call returns */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RUNTIME_API __attribute__((visibility("default")))

/* --------------------------------------------------------------- version */

/*
 * The version this header belongs to (configure reads it from here). A
 * program can compare it with runtime_version(), the library it runs
 * against: the same major version keeps the ABI. Numbers are decimal.
 */
#define RUNTIME_VERSION_MAJOR 0
#define RUNTIME_VERSION_MINOR 2
#define RUNTIME_VERSION_PATCH 0
#define RUNTIME_VERSION \
	((RUNTIME_VERSION_MAJOR << 16) | (RUNTIME_VERSION_MINOR << 8) | RUNTIME_VERSION_PATCH)
#define RUNTIME__STRINGIFY(x) #x
#define RUNTIME__VERSION_STR(a, b, c) RUNTIME__STRINGIFY(a) "." RUNTIME__STRINGIFY(b) "." RUNTIME__STRINGIFY(c)
#define RUNTIME_VERSION_STRING \
	RUNTIME__VERSION_STR(RUNTIME_VERSION_MAJOR, RUNTIME_VERSION_MINOR, RUNTIME_VERSION_PATCH)

/* The loaded library's RUNTIME_VERSION. Any thread, any time. */
RUNTIME_API unsigned runtime_version(void);

/* The loaded library's RUNTIME_VERSION_STRING ("0.2.0"), static storage. */
RUNTIME_API const char *runtime_version_string(void);

/*
 * The symbolic name of an error this library returned, for logs:
 * "ECONNRESET" for -ECONNRESET (strerror(-rc) gives the sentence). "OK"
 * for rc >= 0; "UNKNOWN" for a value that is no errno. Static storage, any
 * thread.
 */
RUNTIME_API const char *runtime_error_name(int rc);

struct runtime;        /* opaque: the runtime and its core threads */
struct runtime_fiber;  /* opaque: a join handle */

/* ---------------------------------------------------------------- config */

#define RUNTIME_DEFAULT_STACK_SIZE (128u * 1024)
#define RUNTIME_MIN_STACK_SIZE (16u * 1024)
#define RUNTIME_DEFAULT_STACK_CACHE 64u
#define RUNTIME_DEFAULT_RING_ENTRIES 256u
#define RUNTIME_DEFAULT_RUN_BUDGET 64u
#define RUNTIME_DEFAULT_SQPOLL_IDLE_MS 50u
#define RUNTIME_DEFAULT_XCORE_SPIN_US 50u
#define RUNTIME_MAX_CORES 1024u
#define RUNTIME_DEBUG_STALL_MS 100u
#define RUNTIME_DEFAULT_OFFLOAD_MAX_THREADS 8u
#define RUNTIME_DEFAULT_OFFLOAD_IDLE_MS 10000u
#define RUNTIME_DEFAULT_OFFLOAD_QUEUE_MAX 1024u
#define RUNTIME_MAX_OFFLOAD_THREADS 1024u
#define RUNTIME_DEFAULT_STREAM_BUFFERS 1024u
#define RUNTIME_DEFAULT_STREAM_BUFFER_SIZE 4096u
#define RUNTIME_MAX_STREAM_BUFFER_SIZE (1u << 20)

/* What runtime_offload does when the offload queue is full. */
enum runtime_offload_policy {
	RUNTIME_OFFLOAD_BLOCK = 0,      /* the fiber waits for room (default) */
	RUNTIME_OFFLOAD_REJECT = 1,     /* -EAGAIN at once */
	RUNTIME_OFFLOAD_CALLER_RUNS = 2,/* the function runs on the core
	                                   thread itself, blocking the core
	                                   and every fiber on it meanwhile */
};

/*
 * The engine every core of a runtime runs: how a blocking call reaches the
 * kernel. io_uring carries each call as an SQE; epoll tries the call at
 * once and parks the fiber on the fd's readiness when it would block
 * (regular files, which epoll cannot wait on, go to the offload pool).
 * Every call keeps its contract on both. epoll is for where io_uring is
 * refused: Docker's and containerd's default seccomp profiles, the sysctl
 * kernel.io_uring_disabled, kernels before 5.19.
 */
enum runtime_engine {
	RUNTIME_ENGINE_AUTO = 0,     /* io_uring if the kernel allows it, else
	                                epoll (default) */
	RUNTIME_ENGINE_IO_URING = 1, /* io_uring or fail (runtime_create) */
	RUNTIME_ENGINE_EPOLL = 2,
};

struct runtime_config {
	unsigned cores;         /* core threads, each with its own ring; 0: one
	                           per online CPU; default 1; at most
	                           RUNTIME_MAX_CORES */
	enum runtime_engine engine; /* default RUNTIME_ENGINE_AUTO; RUNTIME_ENGINE
	                           in the environment (auto, io_uring, epoll)
	                           overrides it, for tests */
	int pin_cpus;           /* nonzero: core i runs on CPU i (mod CPUs);
	                           default 0 */
	size_t stack_size;      /* usable bytes per fiber stack; default
	                           RUNTIME_DEFAULT_STACK_SIZE, rounded up to the
	                           page size, at least RUNTIME_MIN_STACK_SIZE */
	unsigned stack_cache;   /* freed stacks each core keeps resident for
	                           reuse however long they go unused; the
	                           others give their pages back once a second
	                           has gone by without their reuse; default
	                           RUNTIME_DEFAULT_STACK_CACHE */
	unsigned ring_entries;  /* SQ entries (a power of two, 8..32768);
	                           default RUNTIME_DEFAULT_RING_ENTRIES; the CQ
	                           gets 4x as many */
	unsigned run_budget;    /* fibers run per loop turn before completions
	                           are reaped; default RUNTIME_DEFAULT_RUN_BUDGET */
	int share_fp_control;   /* nonzero: the fibers of a core share one
	                           floating-point control state (MXCSR and the
	                           x87 control word on x86_64: rounding, FP
	                           exception masks, flush-to-zero) instead of
	                           each keeping its own across switches, as the
	                           ABI has it; a switch then costs about a
	                           fifth (bench/micro switch_shared_fp_ns). A
	                           fiber that changes the state must put it
	                           back before it can block or yield. No
	                           effect on aarch64 (FPCR is kept). Default 0 */
	/* Kernel-bypass options (see README for the measurements). */
	int sqpoll;             /* nonzero: a kernel thread polls the SQ;
	                           default 0 */
	unsigned sqpoll_idle_ms;/* SQPOLL thread idle time; default
	                           RUNTIME_DEFAULT_SQPOLL_IDLE_MS */
	int register_ring_fd;   /* nonzero: io_uring_register_ring_fd; default 1 */
	int fixed_files;        /* nonzero: sockets from runtime_accept are
	                           registered as fixed files (runtime_fd_register);
	                           default 0 */
	unsigned busy_poll_us;  /* spin this long for completions and for work
	                           from other threads before the core blocks in
	                           the kernel, always; default 0 */
	unsigned xcore_spin_us; /* unless busy_poll_us is set: while work from
	                           other threads (unpark, spawn_on, a channel
	                           peer on another core) comes less than this
	                           far apart on average, and some came within
	                           it, a core spins this long for the next
	                           before it sleeps; 0: never; default
	                           RUNTIME_DEFAULT_XCORE_SPIN_US */
	/* The offload pool (runtime_offload), shared by all cores. */
	unsigned offload_min_threads; /* started with each run; default 0 */
	unsigned offload_max_threads; /* 1 .. RUNTIME_MAX_OFFLOAD_THREADS; a
	                                 thread is added only when a job finds
	                                 none idle; default 8 */
	unsigned offload_idle_ms;     /* a thread above the minimum that idles
	                                 this long exits; default 10000 (after
	                                 each job a thread polls the queue for
	                                 50 us before it sleeps) */
	unsigned offload_queue_max;   /* jobs waiting for a thread; 0: no limit;
	                                 default 1024 */
	enum runtime_offload_policy offload_policy; /* when it is full */
	/* Receive streams (runtime_stream_open): each core lends the kernel
	 * this many buffers (a power of two, 1..32768) of this many bytes
	 * (1..RUNTIME_MAX_STREAM_BUFFER_SIZE), mapped on its first stream.
	 * Defaults RUNTIME_DEFAULT_STREAM_BUFFERS, _BUFFER_SIZE (4 MiB). */
	unsigned stream_buffers;
	unsigned stream_buffer_size;
	/* Debugging aids. */
	int dump_signal;        /* nonzero: this signal (e.g. SIGUSR1) makes
	                           every core print its fibers to stderr, as
	                           runtime_dump does (no core that runs a fiber
	                           without yielding can answer); the handler is
	                           installed by runtime_create and the previous
	                           one put back by runtime_destroy; one runtime
	                           per process (else -EBUSY); default 0 */
	unsigned stall_ms;      /* nonzero: a fiber that runs this many ms
	                           without giving up the CPU is reported on
	                           stderr (fiber id, core, how long, and the
	                           system call its thread is blocked in, if
	                           any: a blocking libc call made from a fiber
	                           shows here), once per stall and at most 4
	                           times a minute, by a watcher thread that
	                           runs with runtime_run; default 0: no thread
	                           and no cost (a library built with
	                           --enable-debug: RUNTIME_DEBUG_STALL_MS) */
};

/* Fill *cfg with the defaults above. Any thread. */
RUNTIME_API void runtime_config_init(struct runtime_config *cfg);

/* ------------------------------------------------------------- lifecycle */

/*
 * Create a runtime. cfg NULL means defaults. Chooses the engine (above):
 * probes the kernel's io_uring once, unless epoll was asked for. Any
 * thread not inside a runtime; the calling thread becomes core 0's thread
 * when it calls runtime_run(), which starts a thread for each other core.
 * Returns 0, -EINVAL (bad config, or a RUNTIME_ENGINE that is not auto,
 * io_uring or epoll), -ENOMEM, or, with RUNTIME_ENGINE_IO_URING only,
 * why io_uring cannot run: -EPERM (refused: a seccomp filter or the
 * sysctl), -ENOSYS (not in this kernel), -EOPNOTSUPP (the kernel lacks
 * IORING_FEAT_NODROP or another requirement); runtime_io_uring_check
 * says which, and what to do.
 */
RUNTIME_API int runtime_create(struct runtime **rt, const struct runtime_config *cfg);

/* The engine rt runs: RUNTIME_ENGINE_IO_URING or RUNTIME_ENGINE_EPOLL
 * (RUNTIME_ENGINE_AUTO for NULL). Any thread. */
RUNTIME_API enum runtime_engine runtime_engine(const struct runtime *rt);

/* "io_uring", "epoll" or "auto" (static storage; "unknown" for any other
 * value). Any thread. */
RUNTIME_API const char *runtime_engine_name(enum runtime_engine engine);

/*
 * Why rt runs epoll: the sentence of runtime_io_uring_check when io_uring
 * was refused under RUNTIME_ENGINE_AUTO, or that epoll was asked for. ""
 * for a runtime on io_uring (and for NULL). Valid while rt lives; any
 * thread.
 */
RUNTIME_API const char *runtime_engine_reason(const struct runtime *rt);

/*
 * Can this process run io_uring as cfg (NULL: defaults) asks? Sets up a
 * ring and tears it down. Returns 0, or the -errno runtime_create gives
 * under RUNTIME_ENGINE_IO_URING (-EPERM, -ENOSYS, -EOPNOTSUPP, -ENOMEM);
 * why (len bytes, may be NULL) receives a sentence with the real cause and
 * the remedy, e.g. "io_uring is blocked by a seccomp filter (EPERM), ...:
 * run with --security-opt seccomp=PROFILE allowing io_uring_setup,
 * io_uring_enter and io_uring_register, or let the runtime use epoll
 * ...". Any thread.
 */
RUNTIME_API int runtime_io_uring_check(const struct runtime_config *cfg, char *why, size_t len);

/*
 * Run every core until all fibers on all cores have ended and no timer is
 * armed (or the runtime is shut down and everything has unwound). Call from
 * the thread that created the runtime, not from a fiber. May be called
 * again after it returns, to run fibers spawned since; spawns from other
 * threads that arrive after it returned wait for the next call.
 * Returns 0, -EINVAL (NULL), -EBUSY if already running or called from one
 * of its fibers or timer callbacks, -EPERM from another thread, or:
 *  - -EDEADLK, on a one-core runtime only, when fibers remain but none can
 *    ever be resumed: no timer, sleep or timed wait is armed, no I/O is in
 *    flight, and no fiber is in runtime_park or a sync wait (a fiber there
 *    keeps the run going: any thread may unpark, post, signal or send).
 *    Typically fibers joining each other. The fibers
 *    stay; runtime_shutdown() then a new run unwinds them.
 *  - -errno if a ring or a thread could not be created or a ring broke.
 *    The run stops on every core, nothing is left in flight in the kernel,
 *    pending timers complete with RUNTIME_TIMER_SHUTDOWN, and the runtime
 *    is failed for good: later runs return the same error, spawns return
 *    -ESHUTDOWN, and runtime_destroy frees the fibers that were alive
 *    without running them again.
 */
RUNTIME_API int runtime_run(struct runtime *rt);

/*
 * Ask the runtime to stop: later spawns return -ESHUTDOWN, pending timers
 * complete with RUNTIME_TIMER_SHUTDOWN, and every fiber is cancelled (its
 * blocking calls return -ECANCELED; one inside runtime_cleanup_begin/_end
 * runs on until its cleanup ends or passes its bound) so runtime_run()
 * returns once they have ended. Any thread, any number of times. Each core
 * carries it out from its loop - also the caller's own core, so it happens just after this returns
 * and timer callbacks never run inside the calling fiber; while nothing
 * runs, the creating thread carries it out at once.
 */
RUNTIME_API void runtime_shutdown(struct runtime *rt);

/*
 * Turn SIGINT and SIGTERM into runtime_shutdown(): the two signals are
 * blocked in the calling thread (and so in the core threads runtime_run()
 * starts; create other threads after this call so that they inherit it)
 * and read from a signalfd on core 0's ring; no signal handler is
 * installed. runtime_destroy() unblocks them again; once the runtime was
 * shut down, one still pending then (a second Ctrl-C) is taken rather than
 * left to kill the exiting program. A signal ignored when the program
 * started (SIGINT under nohup or in a shell's background job) never
 * arrives: send SIGTERM. From the creating
 * thread, before runtime_run(). Returns 0, -EINVAL (NULL), -EPERM (another
 * thread, or running) or -errno from signalfd(2).
 */
RUNTIME_API int runtime_shutdown_on_signals(struct runtime *rt);

/*
 * Drain: stop gracefully. Every hook of runtime_on_drain runs,
 * runtime_draining turns true and the drain channel closes (runtime_serve's
 * fibers wait on it and stop accepting), so that fibers can see the stop
 * coming and finish what they are doing; grace_ns later (saturating) runtime_shutdown cancels
 * whatever is left. runtime_run returns as soon as every fiber has ended,
 * which may be well before the grace is over. Any thread, once: a drain
 * cannot be called off, and a second call changes nothing. Returns 0,
 * -EINVAL (NULL), -EALREADY (draining already) or -ESHUTDOWN (shut down
 * already).
 */
RUNTIME_API int runtime_drain(struct runtime *rt, uint64_t grace_ns);

/* 1 once a drain has begun, else 0 (also for NULL). Any thread. */
RUNTIME_API int runtime_draining(const struct runtime *rt);

/*
 * A channel that a drain closes: a receive (or a select) on it waits until
 * the drain begins, then gives -EPIPE, so that a fiber can wait for its
 * work or the drain, whichever comes first. Made on the first call, then
 * the same channel; the runtime owns it (never destroy it). Any thread.
 * NULL for NULL, or out of memory.
 */
struct runtime_chan;
RUNTIME_API struct runtime_chan *runtime_drain_chan(struct runtime *rt);

/*
 * Call fn(arg) when a drain begins (at once if it has begun), once, in the
 * order they were registered, on the thread that begins the drain (core
 * 0's loop for a signal): fn must not block - shut a listening socket
 * down, spawn, post. Hooks live until runtime_destroy. Any thread. Returns
 * 0, -EINVAL or -ENOMEM.
 */
RUNTIME_API int runtime_on_drain(struct runtime *rt, void (*fn)(void *arg), void *arg);

/*
 * As runtime_shutdown_on_signals, but the first SIGINT or SIGTERM drains
 * (runtime_drain with grace_ns) and a second one shuts down at once. Same
 * callers and errors. Of the two calls, the later decides.
 */
RUNTIME_API int runtime_drain_on_signals(struct runtime *rt, uint64_t grace_ns);

/*
 * systemd's notification (sd_notify(3), written to the protocol: no
 * libsystemd). Send state - newline-separated "KEY=value" lines such as
 * "READY=1", "STOPPING=1", "STATUS=serving", "WATCHDOG=1" - in one
 * datagram to the unix socket NOTIFY_SOCKET names (an absolute path, or
 * '@' and an abstract name), read at each call. Never waits: a manager
 * whose queue is full loses it. The runtime sends some itself: runtime_serve
 * READY=1 once every core of a server listens (notify_ready), runtime_drain
 * STOPPING=1, and each run WATCHDOG=1 every half of WATCHDOG_USEC (when
 * WATCHDOG_PID is absent or this process) from core 0's loop, only while
 * every core's loop turns - a fiber that never yields stops the pings, so
 * the manager restarts the service. Any thread; not concurrently with
 * setenv(3). Returns 1 (sent), 0 (NOTIFY_SOCKET unset or empty: nothing to
 * do), -EINVAL (NULL or empty state; a NOTIFY_SOCKET that is no unix
 * address, logged on stderr), or sendto(2)'s error (-EAGAIN,
 * -ECONNREFUSED, -ENOENT...).
 */
RUNTIME_API int runtime_notify(const char *state);

/* Free the runtime. Only after runtime_run() has returned (or never ran),
 * with no other thread still using it (while it runs, or from its own
 * fiber, destroy is refused as misuse and frees nothing). Fibers that never ran are discarded
 * unrun; timers that never completed complete here, with
 * RUNTIME_TIMER_SHUTDOWN, on the calling thread. */
RUNTIME_API void runtime_destroy(struct runtime *rt);

/* The runtime of the calling fiber or timer callback, or NULL. */
RUNTIME_API struct runtime *runtime_current(void);

/* One core's counters (totals since runtime_create unless marked "now"). */
struct runtime_core_stats {
	uint64_t fibers_live;       /* now */
	uint64_t fibers_spawned;
	uint64_t sqes_submitted;
	uint64_t cqes_reaped;
	uint64_t enters;            /* trips to the kernel (io_uring_enter) */
	uint64_t timers_armed;      /* now: sleeps, timed waits, timers */
	uint64_t inbox_items;       /* work handed over by other threads */
	uint64_t wakeups_written;   /* eventfd writes that woke it from sleep */
	uint64_t stream_fallbacks;  /* stream reads done as a plain recv: the
	                               core's buffers ran low (or no multishot) */
	uint64_t context_switches;  /* switches between fibers and the loop */
	uint64_t run_queue;         /* now: fibers ready to run */
	uint64_t idle_conns;        /* now: streams waiting with no fiber
	                               (runtime_stream_idle) */
	uint64_t stacks_cached;     /* now: freed stacks kept with their pages
	                               (live fibers hold one each besides) */
	uint64_t cq_overflows;      /* loop turns that left completions in the
	                               kernel for want of CQ room (io_uring) */
	uint64_t stalls;            /* stalls the detector reported (stall_ms) */
};

/*
 * The counters of the first min(max, cores) cores into cores[] (may be
 * NULL), and the offload pool's into *pool (may be NULL). Any thread: each
 * figure is read atomically, not all of them at one instant. Returns the
 * number of cores (0 for NULL rt).
 */
struct runtime_offload_stats;
RUNTIME_API unsigned runtime_stats(const struct runtime *rt, struct runtime_core_stats *cores,
                                   unsigned max, struct runtime_offload_stats *pool);

/* ---------------------------------------------------------------- fibers */

/*
 * Start fn(arg) in a new detached fiber. Any thread. Placement: a fiber of
 * rt spawns on its own core; any other thread spawns round-robin across the
 * cores (queued to the target core, waking it if it sleeps). The new
 * fiber runs later, never inside this call. Returns 0, -EINVAL, -ENOMEM or
 * -ESHUTDOWN.
 */
RUNTIME_API int runtime_spawn(struct runtime *rt, void (*fn)(void *), void *arg);

/* Like runtime_spawn, on core number core (0 .. runtime_cores() - 1).
 * Returns 0, -EINVAL (no such core), -ENOMEM or -ESHUTDOWN. */
RUNTIME_API int runtime_spawn_on(struct runtime *rt, unsigned core, void (*fn)(void *), void *arg);

/* The number of cores. Any thread. */
RUNTIME_API unsigned runtime_cores(const struct runtime *rt);

/* The calling thread's core number, or -1 if it is not a core thread. */
RUNTIME_API int runtime_core_index(void);

/*
 * Like runtime_spawn, but the fiber is joinable: *fiber receives a handle
 * that must be passed to runtime_fiber_join() or runtime_fiber_detach()
 * once (an unjoined handle keeps the fiber's stack; a second join or detach
 * returns -ESRCH). fn's return value is what join reports. The fiber goes
 * on the caller's core: from a fiber of rt, or from the creating thread
 * while runtime_run() is not running (core 0); else -EPERM.
 */
RUNTIME_API int runtime_fiber_spawn(struct runtime *rt, struct runtime_fiber **fiber,
                                    void *(*fn)(void *), void *arg);

/*
 * Wait for a joinable fiber to end, store its result in *result (if not
 * NULL) and release the handle. Fiber context, same core. Returns 0,
 * -EDEADLK (joining itself), -EINVAL (NULL, not joinable, or already being
 * joined), -ESRCH (no such fiber: already joined or detached), -EPERM (a
 * fiber of another core), -ECANCELED or -ETIMEDOUT (the caller was
 * cancelled or hit its deadline; the handle stays valid and may be joined
 * again).
 */
RUNTIME_API int runtime_fiber_join(struct runtime_fiber *fiber, void **result);

/* Give up the handle; the fiber's resources go when it ends. On the
 * fiber's core (or from the creating thread while nothing runs). Returns 0,
 * -EINVAL (NULL, not joinable, or being joined), -ESRCH (already joined or
 * detached) or -EPERM (another thread). */
RUNTIME_API int runtime_fiber_detach(struct runtime_fiber *fiber);

/*
 * Cancel a fiber: its pending or next blocking call returns -ECANCELED, and
 * so does every later one (runtime_close excepted). The fiber keeps running
 * so that it can clean up. A fiber inside a cleanup (runtime_cleanup_begin)
 * is not interrupted: the cancel shows once the cleanup has ended. From a
 * fiber or timer callback on the fiber's core, or from the creating thread
 * while runtime_run() is not running.
 * Returns 0, -EINVAL (NULL), -ESRCH (the fiber has ended) or -EPERM
 * (another thread).
 */
RUNTIME_API int runtime_fiber_cancel(struct runtime_fiber *fiber);

/*
 * End the blocking call a fiber waits in now as if its deadline had passed:
 * the call returns -ETIMEDOUT (an operation that completed anyway returns
 * its result, nothing is lost). Unlike a cancel it is not sticky: the
 * fiber's next calls block as usual. A call that a cancel would not end
 * (close) is left alone. This is how a deadline that belongs to something
 * shared - a connection's read deadline moved by another fiber
 * (runtime_conn_set_read_deadline) - reaches a fiber already waiting. As
 * a deadline does, it ends a call inside a cleanup too. An expire that
 * finds the fiber not waiting is not kept for later. Same callers as
 * runtime_fiber_cancel. Returns 0, -EAGAIN (the fiber is
 * not waiting in a call: nothing happened), -EINVAL (NULL), -ESRCH (the
 * fiber has ended) or -EPERM (another thread).
 */
RUNTIME_API int runtime_fiber_expire(struct runtime_fiber *fiber);

/* The calling fiber's handle, or NULL outside fiber context. For a
 * detached fiber it serves cancel, unpark and id while the fiber lives,
 * and -ESRCH after. */
RUNTIME_API struct runtime_fiber *runtime_fiber_self(void);

/* A fiber's id: unique within its runtime, never 0. Any thread; 0 if the
 * handle names no fiber (any more). */
RUNTIME_API uint64_t runtime_fiber_id(const struct runtime_fiber *fiber);

/* The calling fiber's local storage slot (NULL when a fiber starts). Fiber
 * context; outside it, get returns NULL and set does nothing. */
RUNTIME_API void *runtime_fiber_local_get(void);
RUNTIME_API void runtime_fiber_local_set(void *value);

/*
 * Park the calling fiber until runtime_fiber_unpark() names it, for at most
 * timeout_ns (negative: no limit but the fiber's deadline). An unpark that
 * comes before the park is kept (one permit, as in Java's LockSupport): the
 * park then returns at once. Exactly one of unpark, timeout and cancel wins.
 * Fiber context. Returns 0 (unparked), -ETIMEDOUT, -ECANCELED or -EPERM
 * (not a fiber).
 */
RUNTIME_API int runtime_park(int64_t timeout_ns);

/*
 * Wake fiber if it is parked in runtime_park, else give it the permit.
 * Any thread. Wakes a sleeping core through its eventfd. Returns 0,
 * -EINVAL (NULL) or -ESRCH (the fiber has ended).
 */
RUNTIME_API int runtime_fiber_unpark(struct runtime_fiber *fiber);

/* Let the other ready fibers run. Fiber context. Returns 0, -ECANCELED or
 * -EPERM (not a fiber). */
RUNTIME_API int runtime_yield(void);

/*
 * Run fn(arg) on the core's own stack (its thread's) instead of the
 * calling fiber's, and return when fn returns: for deep code that never
 * waits - cryptography, a recursive parser - so that it does not grow
 * every fiber's stack (each page a fiber's stack has touched stays its
 * memory while the fiber lives). fn runs as a timer callback does: no
 * fiber is current (runtime_fiber_self is NULL), and every call that
 * needs a fiber - each that may wait among them - refuses (-EPERM, a
 * misuse) rather than switch away. From a fiber;
 * elsewhere (a callback, a plain thread) fn just runs where it is.
 * Returns 0, or -EINVAL (NULL fn).
 */
RUNTIME_API int runtime_call_on_core_stack(void (*fn)(void *arg), void *arg);

/*
 * Cleanup that a cancel cannot cut short. In a cancelled fiber every
 * blocking call fails at once, so "join my children, flush the reply,
 * close gracefully" could wait for nothing. Between runtime_cleanup_begin
 * and runtime_cleanup_end, the calling fiber's blocking calls ignore
 * cancellation - a cancel already pending, and one that arrives meanwhile,
 * which does not interrupt a call that waits - and are bounded instead by
 * the cleanup's deadline, now + timeout_ns: it replaces the fiber's own
 * deadline (runtime_deadline_set inside may move it earlier, never later),
 * and a call it cuts short returns -ETIMEDOUT. runtime_cleanup_end gives
 * the fiber its deadline back, and a cancel that came before or during
 * the cleanup shows again from the next blocking call.
 *
 * runtime_shutdown cancels every fiber: one inside a cleanup runs on until
 * the cleanup ends (past its bound, its calls return -ETIMEDOUT), and
 * runtime_run waits for it. Cleanups nest: an inner one's bound is the
 * earlier of its own and the enclosing one's, and its end gives the
 * enclosing bound back. The storage is the caller's (a local will do), in
 * use from begin to the matching end; a fiber that ends inside a cleanup
 * just ends.
 *
 * Fiber context, both. runtime_cleanup_begin returns 0, -EINVAL (NULL, or
 * timeout_ns < 0: a cleanup is always bounded, so that a shutdown cannot
 * wait for ever; a huge one saturates) or -EPERM (not a fiber).
 * runtime_cleanup_end returns 0, -EINVAL (NULL, or not the calling fiber's
 * innermost cleanup: misuse, nothing changed) or -EPERM (not a fiber).
 */
struct runtime_cleanup {
	uint64_t opaque_[4]; /* private */
};

RUNTIME_API int runtime_cleanup_begin(struct runtime_cleanup *cleanup, int64_t timeout_ns);
RUNTIME_API int runtime_cleanup_end(struct runtime_cleanup *cleanup);

/*
 * Fiber groups (as Go's errgroup): fibers spawned into a group, cancelled
 * as one, and waited for as one, the wait reporting the first failure. A
 * group belongs to the core that created it: its members run there, and
 * every call but runtime_group_live must come from that core (a fiber or
 * timer callback of it); from anywhere else it is misuse (-EPERM).
 */
struct runtime_group; /* opaque */

/* The first member that fails (returns nonzero) cancels the group. */
#define RUNTIME_GROUP_CANCEL_ON_ERROR 0x1u

/* Create a group on the calling core. flags: 0 or
 * RUNTIME_GROUP_CANCEL_ON_ERROR. Returns 0, -EINVAL (NULL group, other
 * flags), -ENOMEM, -EPERM (not on a core: misuse). */
RUNTIME_API int runtime_group_create(struct runtime_group **group, unsigned flags);

/*
 * Start fn(arg) as a member: a detached fiber on the group's core, which
 * runs later, never inside this call. fn returns 0 or a -errno; the first
 * nonzero one (first in time) is what runtime_group_wait reports. Returns
 * 0, -EINVAL (NULL), -ECANCELED (the group was cancelled: nothing
 * spawned), -ESHUTDOWN, -ENOMEM, -EPERM (another core: misuse).
 */
RUNTIME_API int runtime_group_spawn(struct runtime_group *group, int (*fn)(void *), void *arg);

/*
 * Cancel every live member, as runtime_fiber_cancel would (also members
 * that have not run yet, and the caller if it is one), and refuse later
 * spawns. Members usually return -ECANCELED then, which counts as a
 * result like any other. Returns 0, -EINVAL (NULL) or -EPERM (another
 * core: misuse).
 */
RUNTIME_API int runtime_group_cancel(struct runtime_group *group);

/*
 * Wait at most timeout_ns (negative: no limit but the fiber's deadline;
 * 0: a check) until no member is live - at once if none is - and store
 * in *result (if not NULL) the first nonzero result a member returned
 * since the group was created, or 0. Several fibers may wait. Fiber
 * context, on the group's core. Returns 0 (every member has ended),
 * -ETIMEDOUT or -ECANCELED (the waiter's own timeout, deadline or cancel:
 * members may still live), -EINVAL (NULL group), -EDEADLK (the caller is
 * a member: misuse), -EPERM (not a fiber of the group's core: misuse).
 */
RUNTIME_API int runtime_group_wait(struct runtime_group *group, int64_t timeout_ns, int *result);

/* Free the group: 0 (also for NULL), -EBUSY while members live or fibers
 * wait on it (it stays), -EPERM (another core: misuse). */
RUNTIME_API int runtime_group_destroy(struct runtime_group *group);

/* Members spawned and not yet ended. Any thread: a snapshot, which the
 * group's core changes at once. A NULL group is misuse: reported, and 0. */
RUNTIME_API unsigned runtime_group_live(const struct runtime_group *group);

/* --------------------------------------------------------------- logging */

/* printf's format checks for runtime_log (a macro, so that the man pages'
 * prototypes read as plain C). */
#define RUNTIME_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))

/*
 * Log a message to fd (2: stderr) from a fiber without ever blocking its
 * core: the message (printf's format) goes into a buffer of the core's for
 * fd, and a fiber of the core writes it out, parking - not the core - while
 * a pipe or terminal is full; messages of one core come out in order, each
 * whole. However long the fd stays full, nothing is lost; what was logged
 * before a shutdown is still written, for up to a second after it. A
 * core's buffer for an fd holds at most 256 KiB not yet written: past
 * that a message is dropped and counted (runtime_log_dropped), never
 * waited for; so are the messages a failed write (EPIPE, say) did not
 * write whole. Any number of fds. Off the cores (a plain thread) the
 * message is written at once, with write(2). Returns the bytes logged,
 * -EAGAIN (dropped), -EINVAL (NULL fmt, fd < 0, a message over 256 KiB),
 * -ENOMEM, or write(2)'s error off the cores.
 */
RUNTIME_API RUNTIME_PRINTF(2, 3) int runtime_log(int fd, const char *fmt, ...);

/* runtime_log of len bytes as they are (at most 256 KiB). */
RUNTIME_API int runtime_log_write(int fd, const void *buf, size_t len);

/* Messages dropped so far, process-wide (a full buffer, or a write that
 * failed). Any thread. */
RUNTIME_API uint64_t runtime_log_dropped(void);

/* ------------------------------------------------------------- debugging */

#define RUNTIME_FIBER_NAME_MAX 24 /* bytes of a fiber's name, with its NUL */

/* Name the calling fiber, for runtime_dump (a longer name is cut to
 * RUNTIME_FIBER_NAME_MAX - 1 bytes; NULL or "" clears it). Fiber context.
 * Returns 0 or -EPERM. */
RUNTIME_API int runtime_fiber_name_set(const char *name);

/*
 * Print every live fiber of every core to out, one line each: id, state
 * (ready, running, waiting), what it waits on (for I/O the operation and
 * fd; sleep, park, join, stream, offload; for a mutex, cond, waitgroup,
 * semaphore or pool, or channel, the address of its queue, the same for
 * every fiber waiting on one primitive), for how long (ms, to the core's
 * last loop turn), its deadline and cancel, and its name. For example:
 *
 *   runtime dump: 1 cores
 *   core 0: 3 fibers, 1 timers armed
 *     fiber 1 waiting  stream fd 5 for 5012 ms "acceptor"
 *     fiber 4 running  "admin"
 *     fiber 7 waiting  io recv fd 9 for 130 ms deadline in 870 ms "conn"
 *
 * Any thread or fiber. While the runtime runs, each core writes its own
 * part from its loop and the caller waits up to one second for them: a
 * core that runs a fiber that never yields cannot answer, and is printed
 * as such (runtime_config.stall_ms names the fiber). While it does not
 * run, the caller reads every core itself: then not concurrently with
 * runtime_run. A fiber caller sleeps while it waits (its core runs on).
 * Returns 0, -EINVAL (NULL), -ENOMEM, -ETIMEDOUT (some core did not
 * answer; the rest is printed), -ECANCELED (the calling fiber was
 * cancelled while it waited) or -EIO (out could not be written).
 */
RUNTIME_API int runtime_dump(struct runtime *rt, FILE *out);

/* ------------------------------------------------------- time, deadlines */

/* CLOCK_MONOTONIC in nanoseconds. Any thread. */
RUNTIME_API uint64_t runtime_now(void);
/*
 * runtime_now() as the calling core read it last: its loop reads the
 * clock once a turn, before it polls for events, and after a wait the
 * first call here reads it again - so it is at most a turn old (the run
 * phase before, microseconds on a busy core), for timestamps where a
 * clock read each would cost more than it tells. Never ahead of
 * runtime_now(). Off a core's thread: runtime_now(). Any thread.
 */
RUNTIME_API uint64_t runtime_now_coarse(void);

/*
 * Sleep for ns nanoseconds (a timer of the core; UINT64_MAX: until
 * cancelled). Fiber context. Returns 0 once the time has passed,
 * -ECANCELED, or -ETIMEDOUT if the fiber's deadline comes first.
 */
RUNTIME_API int runtime_sleep(uint64_t ns);

/*
 * Set the calling fiber's deadline: an absolute runtime_now() time after
 * which every blocking call returns -ETIMEDOUT (a call already past it
 * fails at once without touching the fd). 0 (or UINT64_MAX) clears it.
 * Inside a cleanup (runtime_cleanup_begin) the deadline is the cleanup's
 * bound, and can be set earlier but not later: a later one, or 0, gives
 * the bound. Fiber context.
 */
RUNTIME_API void runtime_deadline_set(uint64_t deadline_ns);
RUNTIME_API uint64_t runtime_deadline_get(void);

/*
 * Cancellable timers. The storage belongs to the caller and must stay valid
 * until the callback has run. The callback runs exactly once, from the loop
 * of the core that started the timer - never inside a fiber, and never
 * inside the call that ended the timer - and is told why it ran: its
 * deadline came, it was cancelled, or the runtime shut down. It must not
 * block; it may spawn, and start or cancel timers. (Timers still pending
 * when a failed runtime is destroyed complete on the destroying thread.)
 */
enum runtime_timer_why {
	RUNTIME_TIMER_FIRED = 0,
	RUNTIME_TIMER_CANCELLED = 1,
	RUNTIME_TIMER_SHUTDOWN = 2,
};

/* Storage for a timer: RUNTIME_TIMER_INIT (or zeroed) before its first
 * start; it may be started again once its callback has run - also from
 * inside that callback, which is how a periodic timer re-arms itself. */
struct runtime_timer {
	uint64_t opaque_[10]; /* private */
};

#define RUNTIME_TIMER_INIT { { 0 } }

typedef void runtime_timer_fn(struct runtime_timer *timer, void *arg,
                              enum runtime_timer_why why);

/*
 * Arm a timer to fire after delay_ns (UINT64_MAX: only a cancel or shutdown
 * ends it). From a fiber or timer callback. Returns 0, -EPERM (no core
 * here), -EINVAL, -EBUSY (armed, or its callback has not run yet),
 * -ESHUTDOWN.
 */
RUNTIME_API int runtime_timer_start(struct runtime_timer *timer, uint64_t delay_ns,
                                    runtime_timer_fn *fn, void *arg);

/*
 * As runtime_timer_start, for housekeeping (a cache's sweep, a stats
 * tick): the timer fires while the run goes on for other reasons but does
 * not keep it going - runtime_run returns once only background timers are
 * left, and they stay armed for the next run; runtime_shutdown or
 * runtime_destroy ends them with RUNTIME_TIMER_SHUTDOWN. Same callers and
 * errors.
 */
RUNTIME_API int runtime_timer_start_background(struct runtime_timer *timer, uint64_t delay_ns,
                                               runtime_timer_fn *fn, void *arg);

/*
 * Cancel an armed timer. Same core as runtime_timer_start. Returns 0 when the
 * cancel was taken: the callback runs with RUNTIME_TIMER_CANCELLED from the
 * core's loop after this returns (the storage must stay valid until then).
 * -EALREADY if it fired or was cancelled already, -EPERM from another core,
 * -EINVAL (NULL).
 */
RUNTIME_API int runtime_timer_cancel(struct runtime_timer *timer);

/*
 * Named timers: started and cancelled from any thread, by name, so that
 * work can be called off (up to n timers of one name at once) without
 * keeping a handle - even a timer still on its way to its core. The name
 * is copied; the deadline is taken at the start call. The callback runs
 * exactly once, from the loop of the timer's core (the starter's own
 * core if it is one of rt's, else round-robin) - never inside a fiber or
 * inside the start or cancel call - with the reason that won the race:
 * RUNTIME_TIMER_FIRED, _CANCELLED or _SHUTDOWN. The runtime keeps running
 * until every started timer's callback has run (a timer that never reached
 * a run completes in runtime_destroy, on the destroying thread).
 */
typedef void runtime_named_timer_fn(void *arg, enum runtime_timer_why why);

/* Returns 0, -EINVAL (no name, empty name or no callback), -ENOMEM or
 * -ESHUTDOWN. */
RUNTIME_API int runtime_timer_start_named(struct runtime *rt, const char *name,
                                          uint64_t delay_ns, runtime_named_timer_fn *fn,
                                          void *arg);

/*
 * Cancel up to max timers named name, oldest first - also ones started on
 * another thread and still on their way to their core. Each one cancelled
 * here gets its callback with RUNTIME_TIMER_CANCELLED (possibly after this
 * returns, once its core has disarmed it). Timers that already fired or
 * shut down are not counted. Returns how many were cancelled.
 */
RUNTIME_API size_t runtime_timer_cancel_named(struct runtime *rt, const char *name, size_t max);

/* ------------------------------------------------------------------ sync */

/*
 * Fiber-aware synchronisation, shared by fibers on any core (and of any
 * runtime). Rules common to all of it:
 *  - Waiting (lock, condition wait, get, receive, send, select, wait-group
 *    wait, limiter spawn) is fiber-only: elsewhere it returns -EPERM. What
 *    never waits - unlock excepted, which is the owner's - works from any
 *    thread: runtime_sem_post, _post_n, _try_get and _count,
 *    runtime_cond_signal and _broadcast, runtime_waitgroup_add and _done,
 *    runtime_chan_try_send, _try_recv and _close, and runtime_chan_select
 *    with timeout_ns 0.
 *  - timeout_ns bounds one wait (negative: no limit, or too long to add to
 *    now: none); the fiber's deadline applies too. A wait it ends returns
 *    -ETIMEDOUT, a cancel -ECANCELED.
 *  - A call that can complete without waiting does, even in a cancelled
 *    fiber or past its deadline (so that cleanup code can take a lock or
 *    drain a channel); only a call that would wait reports them.
 *  - A waiter that times out or is cancelled leaves its queue and never
 *    takes a wake-up meant for another: the next waiter gets it. A wake-up
 *    that wins the race against the cancel is kept (the call succeeds; the
 *    cancel shows at the next blocking call).
 *  - Waking a fiber on the caller's core makes no syscall; one on another
 *    core goes through that core's queue (one eventfd write if it sleeps).
 *    Uncontended mutex, semaphore and wait-group calls take no lock.
 *  - Objects with storage here must not be moved or freed while in use; a
 *    destroy call returns -EBUSY while fibers wait. As with runtime_destroy,
 *    a thread's call must have returned before the object is freed.
 */

/* A mutex: RUNTIME_MUTEX_INIT (or zeroed) storage. Owned by a fiber. */
struct runtime_mutex {
	uint64_t opaque_[6]; /* private */
};
#define RUNTIME_MUTEX_INIT { { 0 } }

/*
 * Lock, waiting at most timeout_ns. Waiters get the mutex in the order
 * they came (an unlock hands it to the oldest; no barging). Fiber context.
 * Returns 0, -ETIMEDOUT, -ECANCELED, -EDEADLK (the caller holds it),
 * -EINVAL, -EPERM.
 */
RUNTIME_API int runtime_mutex_lock(struct runtime_mutex *mutex, int64_t timeout_ns);

/* Lock if free. Fiber context. Returns 0, -EBUSY, -EINVAL, -EPERM. */
RUNTIME_API int runtime_mutex_trylock(struct runtime_mutex *mutex);

/* Unlock, handing the mutex to the oldest waiter if any. By the fiber that
 * holds it. Returns 0, -EINVAL, -EPERM (the caller does not hold it). */
RUNTIME_API int runtime_mutex_unlock(struct runtime_mutex *mutex);

/* A condition (a notification): RUNTIME_COND_INIT (or zeroed) storage. */
struct runtime_cond {
	uint64_t opaque_[4]; /* private */
};
#define RUNTIME_COND_INIT { { 0 } }

/*
 * Release mutex (which the caller must hold), wait for a signal, and take
 * the mutex again before returning, whatever ended the wait. Spurious
 * wake-ups do not happen, but a signal may come before the caller looks
 * at its condition: check it in a loop. Fiber context. Returns 0 (woken),
 * -ETIMEDOUT, -ECANCELED (the mutex held again in every case), -EINVAL,
 * -EPERM (not a fiber, or not holding mutex: it is left alone).
 */
RUNTIME_API int runtime_cond_wait(struct runtime_cond *cond, struct runtime_mutex *mutex,
                                  int64_t timeout_ns);

/* Wake the oldest waiter / every waiter. Any thread (a signal from a thread
 * that does not hold the mutex may come before a waiter has queued and be
 * lost, as with pthreads). Returns 0 or -EINVAL. */
RUNTIME_API int runtime_cond_signal(struct runtime_cond *cond);
RUNTIME_API int runtime_cond_broadcast(struct runtime_cond *cond);

/* A wait group: RUNTIME_WAITGROUP_INIT (or zeroed) storage: a count. */
struct runtime_waitgroup {
	uint64_t opaque_[6]; /* private */
};
#define RUNTIME_WAITGROUP_INIT { { 0 } }

/* Add delta to the count; reaching 0 wakes every waiter. Any thread.
 * Returns 0, or -EINVAL (NULL, or the count would go below 0: unchanged). */
RUNTIME_API int runtime_waitgroup_add(struct runtime_waitgroup *wg, int64_t delta);
/* runtime_waitgroup_add(wg, -1). */
RUNTIME_API int runtime_waitgroup_done(struct runtime_waitgroup *wg);
/* Wait until the count is 0 (at once if it is). Fiber context. Returns 0,
 * -ETIMEDOUT, -ECANCELED, -EINVAL, -EPERM. */
RUNTIME_API int runtime_waitgroup_wait(struct runtime_waitgroup *wg, int64_t timeout_ns);

/*
 * A semaphore, or a resource pool: n resources (tokens, or pointers such
 * as backend connections) handed out by get and given back by post, to
 * protect a scarce backend: try_get rejects at once under overload, get
 * queues. Waiters are served in FIFO order, or LIFO with RUNTIME_SEM_LIFO
 * (under overload the newest callers are served while the oldest time
 * out), and a post hands its resource straight to exactly one waiter: a
 * newcomer never barges past the queue.
 */
struct runtime_sem; /* opaque */

#define RUNTIME_SEM_LIFO 0x1u
#define RUNTIME_SEM_MAX (1u << 24)

/* A semaphore of count anonymous resources (each NULL). Any thread.
 * Returns 0, -EINVAL (flags, count > RUNTIME_SEM_MAX) or -ENOMEM. */
RUNTIME_API int runtime_sem_create(struct runtime_sem **sem, unsigned count, unsigned flags);

/* A pool of the n resources given (the array is copied). Any thread.
 * Returns 0, -EINVAL or -ENOMEM. */
RUNTIME_API int runtime_pool_create(struct runtime_sem **pool, void *const *resources,
                                    unsigned n, unsigned flags);

/* Free it: 0 (also for NULL), or -EBUSY while fibers wait on it (it stays). */
RUNTIME_API int runtime_sem_destroy(struct runtime_sem *sem);

/* Take a resource (into *resource if not NULL), waiting at most timeout_ns.
 * Fiber context. Returns 0, -ETIMEDOUT, -ECANCELED, -EINVAL, -EPERM. */
RUNTIME_API int runtime_sem_get(struct runtime_sem *sem, void **resource, int64_t timeout_ns);

/* Take a resource if one is free, else -EBUSY at once (counted as
 * rejected): for rejecting work under overload. Any thread. -EINVAL for
 * NULL. */
RUNTIME_API int runtime_sem_try_get(struct runtime_sem *sem, void **resource);

/* Give a resource back (any one, not necessarily the one taken; NULL for a
 * semaphore): to the next waiter if any. Any thread. Returns 0, -EINVAL,
 * or -EOVERFLOW, refused: a pool given more than was taken, a semaphore
 * counted past RUNTIME_SEM_MAX. (A semaphore may be posted more than it
 * was taken: it counts up, as sem_post does.) */
RUNTIME_API int runtime_sem_post(struct runtime_sem *sem, void *resource);

/* Give n anonymous resources back to a semaphore at once, as n
 * runtime_sem_post calls would: up to n waiters, served in turn (FIFO or
 * LIFO), each get its resource by direct hand-off, and the rest count as
 * free - but all or nothing: n that would count the semaphore past
 * RUNTIME_SEM_MAX is refused whole. n 0 does nothing. Any thread. Returns
 * 0, -EINVAL (NULL, or a pool: its resources go back one by one with
 * runtime_sem_post) or -EOVERFLOW (nothing changed). */
RUNTIME_API int runtime_sem_post_n(struct runtime_sem *sem, unsigned n);

/* The resources free now: a semaphore's count, a pool's idle resources (0
 * while fibers wait). Any thread; a snapshot that another thread's get or
 * post may change at once. A NULL sem is misuse: reported, and 0. */
RUNTIME_API unsigned runtime_sem_count(const struct runtime_sem *sem);

struct runtime_sem_stats {
	unsigned in_use;    /* taken and not posted back (0 once posts catch up) */
	unsigned waiting;   /* fibers queued in get */
	uint64_t rejected;  /* try_get refusals */
};

/* A snapshot (any thread; each figure exact, the three not taken at once).
 * A NULL sem is misuse: reported, and *st zeroed. */
RUNTIME_API void runtime_sem_stats(const struct runtime_sem *sem, struct runtime_sem_stats *st);

/*
 * A task limiter: at most n fibers spawned through it are alive at once
 * (a spawn waits for a slot, or try_spawn refuses). Fibers go on the
 * caller's core and give their slot back as they end.
 */
struct runtime_limiter; /* opaque */

/* Any thread. Returns 0, -EINVAL (n == 0) or -ENOMEM. */
RUNTIME_API int runtime_limiter_create(struct runtime_limiter **lim, unsigned n);
/* 0 (also for NULL), or -EBUSY while fibers of it live or spawners wait
 * (it stays). */
RUNTIME_API int runtime_limiter_destroy(struct runtime_limiter *lim);
/* Spawn fn(arg), first waiting at most timeout_ns for a slot. Fiber
 * context. Returns 0, -ETIMEDOUT, -ECANCELED, -ENOMEM, -ESHUTDOWN, -EINVAL,
 * -EPERM. */
RUNTIME_API int runtime_limiter_spawn(struct runtime_limiter *lim, void (*fn)(void *), void *arg,
                                      int64_t timeout_ns);
/* Spawn only if a slot is free, else -EBUSY. Fiber context. */
RUNTIME_API int runtime_limiter_try_spawn(struct runtime_limiter *lim, void (*fn)(void *),
                                          void *arg);
/* Fibers of it alive now. Any thread. NULL: misuse, 0. */
RUNTIME_API unsigned runtime_limiter_in_flight(const struct runtime_limiter *lim);

/*
 * Channels: bounded, multi-producer multi-consumer, across cores, holding
 * elements of a fixed size (copied in and out). Capacity 0 is a rendezvous:
 * a send completes when a receiver takes the element. After close, sends
 * fail with -EPIPE, receivers get what is buffered and then -EPIPE, and
 * every blocked sender and receiver wakes with -EPIPE.
 */
struct runtime_chan; /* opaque */

#define RUNTIME_CHAN_ELEM_MAX (64u * 1024)
#define RUNTIME_CHAN_CAP_MAX (1u << 24)
#define RUNTIME_SELECT_MAX 64

/* Any thread. Returns 0, -EINVAL (size 0 or > RUNTIME_CHAN_ELEM_MAX,
 * capacity > RUNTIME_CHAN_CAP_MAX) or -ENOMEM. */
RUNTIME_API int runtime_chan_create(struct runtime_chan **chan, size_t elem_size,
                                    size_t capacity);
/* Free it: 0 (also for NULL), or -EBUSY while fibers wait on it (it stays).
 * Elements still buffered are dropped. */
RUNTIME_API int runtime_chan_destroy(struct runtime_chan *chan);

/* Send a copy of *elem, waiting at most timeout_ns for room (or, capacity
 * 0, for a receiver). Fiber context (timeout 0: any thread). Returns 0,
 * -EPIPE (closed), -EAGAIN (timeout 0, would wait), -ETIMEDOUT,
 * -ECANCELED, -EINVAL, -EPERM. */
RUNTIME_API int runtime_chan_send(struct runtime_chan *chan, const void *elem,
                                  int64_t timeout_ns);
/* Receive into *elem. Same rules; -EPIPE once closed and drained. */
RUNTIME_API int runtime_chan_recv(struct runtime_chan *chan, void *elem, int64_t timeout_ns);
/* runtime_chan_send / _recv with timeout 0: never wait. Any thread. */
RUNTIME_API int runtime_chan_try_send(struct runtime_chan *chan, const void *elem);
RUNTIME_API int runtime_chan_try_recv(struct runtime_chan *chan, void *elem);
/* Close. Any thread. Returns 0, -EALREADY (closed before), -EINVAL. */
RUNTIME_API int runtime_chan_close(struct runtime_chan *chan);

enum runtime_chan_dir {
	RUNTIME_CHAN_SEND = 0,
	RUNTIME_CHAN_RECV = 1,
};

/* One operation of a select. */
struct runtime_chan_op {
	struct runtime_chan *chan;
	enum runtime_chan_dir dir;
	void *elem;     /* send: the element; receive: where it goes */
	int result;     /* out: 0, or -EPIPE (the channel is closed) */
};

/*
 * Wait until one of n operations (1 .. RUNTIME_SELECT_MAX; a channel may
 * appear in several) can complete, complete exactly that one, and return
 * its index; its result says 0 or -EPIPE (a send to, or a receive from, a
 * closed and drained channel is ready with -EPIPE). When several are ready
 * one is chosen at random, so none is starved. Fiber context (timeout 0:
 * any thread). Returns the index, -EAGAIN (timeout 0, none ready),
 * -ETIMEDOUT, -ECANCELED, -EINVAL, -EPERM.
 */
RUNTIME_API int runtime_chan_select(struct runtime_chan_op *ops, size_t n, int64_t timeout_ns);

/* --------------------------------------------------------------- offload */

/*
 * Whenever runtime_offload returns -ECANCELED or -ETIMEDOUT, arg belongs to
 * this callback, called exactly once: on a pool thread with ran 1 and the
 * function's result if the function had started (it runs to the end, and
 * nothing it returns leaks), else within runtime_offload with ran 0 and
 * result NULL (the function never runs). It is never called for a call
 * that returned 0 or another error: the caller keeps arg then.
 */
typedef void runtime_offload_cleanup_fn(void *arg, void *result, int ran);

/*
 * Run fn(arg) on the offload pool (a thread that may block) and suspend
 * the calling fiber until it returns; *result (if not NULL) receives what
 * it returned. The core thread never blocks, except under
 * RUNTIME_OFFLOAD_CALLER_RUNS with the queue full. The fiber's deadline
 * applies. Fiber context. Returns 0, -ECANCELED or -ETIMEDOUT (the caller
 * gave up: cleanup, if not NULL, gets arg - see above), -EAGAIN (queue full
 * under RUNTIME_OFFLOAD_REJECT; nothing ran), -ENOMEM or -errno (no thread
 * could be started; nothing ran), -ESHUTDOWN, -EINVAL, -EPERM.
 */
RUNTIME_API int runtime_offload(void *(*fn)(void *), void *arg, void **result,
                                runtime_offload_cleanup_fn *cleanup);

struct runtime_offload_stats {
	unsigned alive;      /* threads now */
	unsigned idle;       /* of them, waiting for work */
	unsigned largest;    /* most threads ever at once */
	size_t queued;       /* jobs waiting for a thread */
	uint64_t completed;  /* functions that returned */
	uint64_t rejected;   /* -EAGAIN under RUNTIME_OFFLOAD_REJECT */
};

/* A snapshot. Any thread. A NULL rt is misuse: reported, and *st zeroed. */
RUNTIME_API void runtime_offload_stats(const struct runtime *rt, struct runtime_offload_stats *st);

/*
 * getaddrinfo(3) on the offload pool, so a lookup never blocks a core.
 * Fiber context. On 0, free *res with freeaddrinfo(3). Errors are -errno:
 * -ENOENT (no such name: EAI_NONAME), -ENODATA (no address of that kind),
 * -EAGAIN (temporary failure, or no resolver reachable), -EIO (permanent
 * failure), -EAFNOSUPPORT, -ESOCKTNOSUPPORT, -EINVAL (bad hints or flags),
 * -ENOMEM, -ECANCELED, -ETIMEDOUT, or the errno of EAI_SYSTEM.
 */
struct addrinfo;
RUNTIME_API int runtime_getaddrinfo(const char *node, const char *service,
                                    const struct addrinfo *hints, struct addrinfo **res);

/* ftruncate(2) and fstat(2), which the ring does not offer, on the offload
 * pool. Fiber context. Return 0 or -errno (-ECANCELED, -ETIMEDOUT). */
struct stat;
RUNTIME_API int runtime_ftruncate(int fd, off_t length);
RUNTIME_API int runtime_fstat(int fd, struct stat *st);

/* ------------------------------------------------------------------- I/O */

/* Each of these is one io_uring SQE with the shape and result of the
 * syscall it names: a byte count, an fd or 0, else -errno (-ECANCELED,
 * -ETIMEDOUT as above, -EPERM outside fiber context, -EPIPE for a write to
 * a gone reader: never SIGPIPE). Buffers must stay valid until the call
 * returns (they may live on the fiber's stack). Where io_uring differs
 * from the syscall: a call waits for readiness whether or not the fd is
 * O_NONBLOCK (MSG_DONTWAIT gives -EAGAIN on sockets; runtime_poll with
 * timeout 0 checks without waiting), and runtime_pread/pwrite on a pipe or
 * socket read and write it as a stream (the offset is ignored; no
 * -ESPIPE). */
RUNTIME_API ssize_t runtime_read(int fd, void *buf, size_t len);
RUNTIME_API ssize_t runtime_write(int fd, const void *buf, size_t len);
RUNTIME_API ssize_t runtime_readv(int fd, const struct iovec *iov, int iovcnt);
RUNTIME_API ssize_t runtime_writev(int fd, const struct iovec *iov, int iovcnt);
RUNTIME_API ssize_t runtime_pread(int fd, void *buf, size_t len, off_t offset);
RUNTIME_API ssize_t runtime_pwrite(int fd, const void *buf, size_t len, off_t offset);
RUNTIME_API ssize_t runtime_recv(int fd, void *buf, size_t len, int flags);
RUNTIME_API ssize_t runtime_send(int fd, const void *buf, size_t len, int flags);
RUNTIME_API ssize_t runtime_recvmsg(int fd, struct msghdr *msg, int flags);
RUNTIME_API ssize_t runtime_sendmsg(int fd, const struct msghdr *msg, int flags);
/* flags: SOCK_NONBLOCK / SOCK_CLOEXEC, as accept4(2). */
RUNTIME_API int runtime_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
RUNTIME_API int runtime_connect(int fd, const struct sockaddr *addr, socklen_t addrlen);
/*
 * Close fd: never cancelled and never cut short by a deadline, so the fd is
 * always closed. Any thread (outside a fiber it is close(2)). With fixed
 * files, the registration is released first on whichever core holds it
 * (a fiber of another core waits for that; any other thread hands the
 * close itself to that core and returns 0 at once). Returns 0, -EBADF, or
 * -ENOMEM (the handover of a registered fd failed: it is still open).
 */
RUNTIME_API int runtime_close(int fd);
RUNTIME_API int runtime_openat(int dirfd, const char *path, int flags, mode_t mode);
/* openat2(2): how->resolve confines the walk (RESOLVE_BENEATH keeps it
 * under dirfd: no "..", absolute path or symlink out of it). */
struct open_how;
RUNTIME_API int runtime_openat2(int dirfd, const char *path, const struct open_how *how);
/* statx(2) (struct statx from <sys/stat.h> with _GNU_SOURCE). */
struct statx;
RUNTIME_API int runtime_statx(int dirfd, const char *path, int flags, unsigned mask,
                              struct statx *st);
/* splice(2): one end must be a pipe; off -1 means "the file's offset".
 * Moves file pages to a socket without a copy through user space. The
 * kernel runs each splice in its io-wq worker threads (a hand-off per
 * call), so move much per call: a 1 MiB pipe (F_SETPIPE_SZ) cost a fifth
 * of the server CPU per 1 MiB file that a 64 KiB pipe did in the HTTP
 * demo. For files under a few hundred KiB, read + send was cheaper. */
RUNTIME_API ssize_t runtime_splice(int fd_in, int64_t off_in, int fd_out, int64_t off_out,
                                   size_t len, unsigned flags);
/* datasync nonzero: fdatasync(2) semantics. */
RUNTIME_API int runtime_fsync(int fd, int datasync);
/* shutdown(2) on a socket. */
RUNTIME_API int runtime_sock_shutdown(int fd, int how);

/*
 * Wait until fd is ready for events (POLLIN, POLLOUT, ...), for at most
 * timeout_ns (negative, or too long to add to now: no limit other than the
 * fiber's deadline). Returns the ready events (> 0), -ETIMEDOUT,
 * -ECANCELED or -errno.
 * timeout_ns == 0 is a readiness check, not a wait: it never blocks, so it
 * works from any thread and ignores cancellation and deadlines. It answers
 * as poll(2) does, so a closed fd gives POLLNVAL (> 0) there, where a wait
 * returns -EBADF.
 */
RUNTIME_API int runtime_poll(int fd, short events, int64_t timeout_ns);

/* -------------------------------------------------------- receive streams */

/*
 * A receive stream reads a connected socket through one multishot recv
 * (Linux 6.0+) into buffers the core lends the kernel
 * (runtime_config.stream_buffers): data arrives while the fiber does
 * something else, and a read that finds data waiting costs no SQE and no
 * trip to the kernel. Where the kernel lacks multishot recv, or the core's
 * buffers run low, a read is a plain recv into the caller's buffer - the
 * same results, never a stall. A stream stops pulling data while 64 KiB
 * sit unread, so a fast sender cannot take every buffer.
 *
 * A stream belongs to the calling fiber's core: only fibers of that core
 * may use it (-EPERM otherwise), one reading at a time. It lives until
 * runtime_stream_close or the end of the run. Close the stream before the
 * socket: until then the kernel holds the socket open.
 */
struct runtime_stream;

/* Open a stream on socket fd. Fiber context. Returns 0, -EINVAL (NULL
 * out), -EBADF (fd < 0), -ENOMEM, -EPERM. A bad fd shows in the first
 * read. */
RUNTIME_API int runtime_stream_open(struct runtime_stream **out, int fd);

/*
 * recv(2) through the stream: up to len bytes of what has arrived, waiting
 * if nothing has. Returns the bytes copied (> 0), 0 at end of stream (the
 * peer shut down its side; again on every later call), or -errno: the
 * socket's error (sticky), -ECANCELED, -ETIMEDOUT (the fiber's deadline),
 * -EINVAL (NULL s, or NULL buf with len > 0), -EPERM (outside a fiber of
 * the stream's core, stream closed, or another fiber is reading it),
 * -EBUSY (it waits in runtime_stream_idle).
 */
RUNTIME_API ssize_t runtime_stream_recv(struct runtime_stream *s, void *buf, size_t len);

/* Bytes that have arrived and not been read: a read of this many returns
 * at once. Any fiber of the stream's core. */
RUNTIME_API size_t runtime_stream_buffered(const struct runtime_stream *s);

/*
 * Has anything come that a read would return at once - bytes not read,
 * the end of stream, an error? 1 if so; 0 if not, and the stream watches
 * the socket (its multishot recv is armed, so whatever the peer sends
 * lands here: the answer is the socket's too, with no system call);
 * -EAGAIN if nothing is queued but the stream does not watch the socket
 * now (before its first read, after a read that fell back to a plain
 * recv, on a kernel without multishot recv): only the socket can tell
 * (a peek, or runtime_poll). -EINVAL for NULL. Any fiber of the stream's
 * core. What a client asks of a pooled connection before it sends on it:
 * an answer nobody asked for, or the server's close, has come already.
 */
RUNTIME_API int runtime_stream_pending(const struct runtime_stream *s);

/*
 * Read in place, without waiting or copying (what the toolkit's buffered
 * reader builds on): runtime_stream_peek points *data at the bytes queued
 * at the head of the stream - those of one buffer, so possibly fewer than
 * runtime_stream_buffered - and returns how many (0, *data NULL: none
 * queued; it never arms the stream or waits: a read does). They stay
 * valid, unchanged, until the next recv, consume or close of s.
 * runtime_stream_consume marks the first n queued bytes read (n at most
 * runtime_stream_buffered, across buffers); a buffer emptied goes back to
 * the kernel at once, as after a recv. Neither checks cancellation or the
 * deadline: they never wait. A fiber (or timer callback) of the stream's
 * core, not while another fiber waits in runtime_stream_recv. Return the
 * byte count / 0, or -EINVAL (NULL, n too large: nothing consumed),
 * -EPERM (another core, or another fiber reading it) or -EBUSY (it waits
 * in runtime_stream_idle).
 */
RUNTIME_API ssize_t runtime_stream_peek(struct runtime_stream *s, const void **data);
RUNTIME_API int runtime_stream_consume(struct runtime_stream *s, size_t n);

/* The socket the stream reads (as given to runtime_stream_open), or
 * -EINVAL for NULL. Any thread, while the stream is open. Write to it as
 * usual; never read it around the stream, whose recv may be armed. */
RUNTIME_API int runtime_stream_fd(const struct runtime_stream *s);

/*
 * Wait for the stream's next bytes with no fiber: the calling fiber hands
 * the stream to its core and then returns (ends), so that an idle
 * connection holds no stack and no buffer, only the stream and what arg
 * points at. Exactly once, later, fn(arg, why) runs in a new fiber of the
 * stream's core, when the first of these comes:
 *   0           bytes, the end of stream or an error arrived (read to see);
 *   -ETIMEDOUT  deadline_ns passed (an absolute runtime_now() time; 0:
 *               none);
 *   -ESHUTDOWN  the runtime began to drain (runtime_drain; at once if it
 *               has);
 *   -ECANCELED  the runtime shuts down (fn's fiber is cancelled).
 * While it waits the stream counts as work, as a fiber blocked in a read
 * would (the run goes on), and belongs to its core: recv, peek, consume
 * and close get -EBUSY until fn's fiber starts. Nothing is allocated; if
 * no stack can be had when the wait ends, the core tries again each
 * millisecond. Where the kernel has no multishot recv (before 6.0) fn's
 * fiber starts at once and waits for readiness itself: the same results,
 * with a stack held. If the run ends otherwise (a failure), fn never runs.
 * Fiber context, a fiber of the stream's core. Returns 0; or 1 if a read
 * would not wait (bytes are queued, the end of stream or an error came):
 * nothing waits, read in this fiber; or -EINVAL (NULL s or fn), -EBUSY (it
 * waits already), -ECANCELED or -ETIMEDOUT (the caller's state, as for a
 * read), -EPERM (another core's stream, closed, or another fiber reads
 * it). fn runs only after 0.
 */
typedef void runtime_stream_idle_fn(void *arg, int why);
RUNTIME_API int runtime_stream_idle(struct runtime_stream *s, uint64_t deadline_ns,
                                    runtime_stream_idle_fn *fn, void *arg);

/*
 * Stop the stream's watch on the socket and wait until the kernel's recv
 * has ended for good, keeping what it brought: afterwards no byte of the
 * socket's can land in the stream any more, and every byte not queued
 * here is still in the socket - which may then move (to another process,
 * over SCM_RIGHTS) with nothing lost. A later read queues again as
 * usual. Fiber context, a fiber of the stream's core, no other reading
 * it. Returns 0 (nothing queued: the socket holds all that is unread), 1
 * (bytes, the end of stream or an error came: read them), or -ECANCELED,
 * -ETIMEDOUT (the fiber's deadline: the recv may not have ended), -EINVAL
 * (NULL), -EBUSY (it waits in runtime_stream_idle), -EPERM (another
 * core's, closed, or another fiber reads it).
 */
RUNTIME_API int runtime_stream_stop(struct runtime_stream *s);

/* Stop reading and free the stream: its buffers go back at once, and the
 * kernel's recv is cancelled behind the scenes (it never blocks). Does not
 * close the socket. Returns 0 (also for NULL), -EBUSY (another fiber is
 * reading it, or it waits in runtime_stream_idle: nothing changed) or
 * -EPERM (another core's stream). After
 * 0, s is gone, as after free(3). */
RUNTIME_API int runtime_stream_close(struct runtime_stream *s);

/* -------------------------------------------------------------- listeners */

/*
 * A listener accepts through one multishot accept: the kernel accepts each
 * connection as it arrives and queues its fd here, so a burst is taken in
 * one go and an accept that finds a connection waiting costs no SQE. Past
 * 256 queued, it stops accepting and the rest wait in the listen backlog.
 * Same core and lifetime rules as a receive stream (above). With
 * runtime_config.fixed_files, what it hands out is registered as
 * runtime_accept does.
 *
 * To serve on several cores, give each core its own listening socket with
 * SO_REUSEPORT (runtime_tcp_listen's RUNTIME_LISTEN_REUSEPORT;
 * runtime_serve does it all): the kernel spreads connections over them.
 * One socket shared by listeners on several cores also works - each of
 * them then accepts one connection per call, so that a core waiting in
 * accept gets the next connection while the others are busy, where a
 * multishot would let one core take them all - but it costs an SQE per
 * connection.
 */
struct runtime_listener;

/* Open a listener on listening socket fd; flags (SOCK_CLOEXEC,
 * SOCK_NONBLOCK) apply to accepted sockets. Fiber context. Returns 0,
 * -EINVAL (NULL out, other flags), -EBADF (fd < 0), -ENOMEM, -EPERM. */
RUNTIME_API int runtime_listener_open(struct runtime_listener **out, int fd, int flags);

/*
 * The next connection's fd, waiting for one if none is queued; with addr
 * not NULL, its peer's address too, as accept(2) gives it (*addrlen: in,
 * addr's size; out, the address's). Returns the fd or -errno: an error
 * that stopped the kernel's accepting (-EMFILE, -ENFILE, -ENOMEM: returned
 * once, so that the caller can back off; the next call accepts again;
 * -EINVAL once the socket is shut down or not listening), -ECANCELED,
 * -ETIMEDOUT (the fiber's deadline), -EINVAL (NULL l, or addr without
 * addrlen), -EPERM (outside a fiber of its core, closed, or another fiber
 * is accepting).
 */
RUNTIME_API int runtime_listener_accept(struct runtime_listener *l, struct sockaddr *addr,
                                        socklen_t *addrlen);

/*
 * Stop the kernel's accepting and wait until it has ended for good:
 * afterwards every connection the listener took is queued here (take
 * them with runtime_listener_accept, which returns the queued without
 * waiting, and arms again only once they are gone) and every other one
 * waits in the socket's backlog - so that the socket can pass to another
 * listener or process with no connection lost. Fiber context, a fiber of
 * its core, none accepting on it. Returns the number queued (0 or more),
 * or -ECANCELED, -ETIMEDOUT (the fiber's deadline: the accept may not
 * have ended), -EINVAL (NULL), -EPERM (another core's, closed, or another
 * fiber accepts on it).
 */
RUNTIME_API int runtime_listener_stop(struct runtime_listener *l);

/* Stop accepting and free the listener; connections it accepted and did
 * not hand out are closed. Does not close the listening socket. Returns 0
 * (also for NULL), -EBUSY (a fiber is accepting: nothing changed), -EPERM
 * (another core's). After 0, l is gone. */
RUNTIME_API int runtime_listener_close(struct runtime_listener *l);

/* --------------------------------------------------------------- helpers */

#define RUNTIME_LISTEN_REUSEPORT 0x1u /* SO_REUSEPORT: a socket per core */
#define RUNTIME_LISTEN_NODELAY 0x2u   /* TCP_NODELAY, which accepted sockets
                                         inherit: a small answer is sent at
                                         once, not held for the ACK of the
                                         one before it (Nagle) */
#define RUNTIME_LISTEN_EXCLUSIVE 0x4u /* -EADDRINUSE if any socket holds the
                                         port already, one with SO_REUSEPORT
                                         too: with RUNTIME_LISTEN_REUSEPORT,
                                         for the first socket of a group (the
                                         others join with REUSEPORT alone),
                                         so that a second process - a stale
                                         copy of the service - cannot share
                                         the port and take half its
                                         connections */

/*
 * A listening TCP socket on a numeric address (IPv4 or IPv6; NULL or "" is
 * every IPv4 address; no name lookups, so it never blocks), with SO_REUSEADDR
 * and, as flags ask, SO_REUSEPORT and TCP_NODELAY. backlog <= 0 means
 * SOMAXCONN. RUNTIME_LISTEN_EXCLUSIVE first binds a socket without
 * SO_REUSEPORT to the address (refused while any other socket holds the
 * port), then closes it and binds the real one: a process that takes the
 * port in between, microseconds, is not seen. Any thread. Returns the fd
 * or -errno (-EINVAL for an address that is not numeric, or other flags;
 * -EADDRINUSE).
 */
RUNTIME_API int runtime_tcp_listen(const char *host, uint16_t port, int backlog,
                                   unsigned flags);

/* Connect a new TCP socket to host: a numeric address (NULL or "" is
 * 0.0.0.0, this host), or a name resolved on the offload pool
 * (runtime_getaddrinfo), whose addresses are tried in turn within the
 * fiber's deadline. The socket has TCP_NODELAY: request and response
 * protocols want each message out at once. Fiber context. Returns the fd
 * or -errno: the last address's error, or runtime_getaddrinfo's; no fd is
 * left behind on error. */
RUNTIME_API int runtime_tcp_connect(const char *host, uint16_t port);

/*
 * An address as text for a log: "192.0.2.1:80", "[2001:db8::1]:443",
 * "unix:/path" ("unix:@name" for an abstract one). Any thread. Returns the
 * length written (NUL-terminated), -EINVAL (NULL, len too short for the
 * family), -EAFNOSUPPORT (another family) or -ENOSPC (size too small;
 * buf then holds what fits). RUNTIME_SOCKADDR_NAME_MAX bytes fit any.
 */
#define RUNTIME_SOCKADDR_NAME_MAX 128
RUNTIME_API int runtime_sockaddr_name(const struct sockaddr *sa, socklen_t len, char *buf,
                                      size_t size);

/*
 * Write all len bytes, looping over short writes. Returns len, or -errno
 * (-EIO if a write took no byte); *done (if not NULL) always receives the
 * bytes written, so nothing is lost.
 */
RUNTIME_API ssize_t runtime_write_all(int fd, const void *buf, size_t len, size_t *done);

/*
 * runtime_write_all through IORING_OP_SEND with MSG_NOSIGNAL: on a socket
 * the kernel's send path is shorter than a write's (the echo demo used
 * 6 % less server CPU per message with it). An fd that is not a socket is written
 * as runtime_write_all would. Same results and *done.
 */
RUNTIME_API ssize_t runtime_send_all(int fd, const void *buf, size_t len, size_t *done);

/*
 * Read exactly len bytes. Returns len; 0 at end of file before the first
 * byte; -ENODATA at end of file after some bytes; or -errno. *done (if not
 * NULL) always receives the bytes read.
 */
RUNTIME_API ssize_t runtime_read_exact(int fd, void *buf, size_t len, size_t *done);

/*
 * Register fd as a fixed file of the calling core's ring, so that I/O on it
 * from this core skips the kernel's fd lookup (other cores use it as a
 * plain fd). Close it only with runtime_close(), from any thread: close(2)
 * would leave the registration holding the file under a number the kernel
 * reuses. Fiber context. Returns 0 (also if already registered here),
 * -EBADF, -EBUSY (registered on another core), -ENOSPC (fd past the table),
 * -EOPNOTSUPP (fixed_files off, or the kernel lacks it), -EPERM.
 */
RUNTIME_API int runtime_fd_register(int fd);

#ifdef __cplusplus
}
#endif

/* The toolkit (buffered streams, copy, serving, drain...) built on the
 * calls above, and TLS on its connections. */
#include "runtime_toolkit.h"

#endif /* RUNTIME_H */
