/* SPDX-License-Identifier: MIT */
/*
 * services.h - what the runtime's own services offer the rest of the core,
 * each kept in struct runtime and started with a run: signals and the dump
 * signal, the offload pool, the drain, the stall detector, named timers,
 * the log, runtime_dump.
 */
#ifndef RUNTIME_SERVICES_H
#define RUNTIME_SERVICES_H

#include "base.h"

struct core;
struct fiber;
struct runtime;

/* signal.c */
int runtime__signals_acquire(void);
void runtime__signals_release(void);
int runtime__core_signals_enter(struct core *c);
void runtime__core_signals_leave(struct core *c);
void runtime__shutdown_signals_release(struct runtime *rt);
int runtime__dump_signal_install(struct runtime *rt);
void runtime__dump_signal_release(struct runtime *rt);
void runtime__dump_signal_poll(struct core *c);

/* offload.c */
int runtime__offload_finish(struct fiber *f, void *(*fn)(void *), void *arg, void **result);
int runtime__offload_init(struct runtime *rt);
void runtime__offload_free(struct runtime *rt);
int runtime__offload_start(struct runtime *rt);
void runtime__offload_stop(struct runtime *rt);

/* debug.c */
void runtime__dump_signalled(struct core *c);

/* log.c */
void runtime__log_free(struct core *c);

/* drain.c */
int runtime__drain_init(struct runtime *rt);
void runtime__drain_free(struct runtime *rt);
void runtime__signalled(struct runtime *rt);
/* What the first SIGINT or SIGTERM does: drain for grace_ns, or (false)
 * shut down: the later of runtime_drain_on_signals and
 * runtime_shutdown_on_signals decides. */
void runtime__signals_drain(struct runtime *rt, bool drain, uint64_t grace_ns);

/* stall.c */
int runtime__stall_start(struct runtime *rt);
void runtime__stall_stop(struct runtime *rt);

/* notify.c: the systemd watchdog, per run */
int runtime__watchdog_prepare(struct runtime *rt);
void runtime__watchdog_start(struct core *c);
void runtime__watchdog_stop(struct core *c);
void runtime__watchdog_free(struct runtime *rt);

/* named.c */
int runtime__named_init(struct runtime *rt);
void runtime__named_free(struct runtime *rt);

#endif /* RUNTIME_SERVICES_H */
