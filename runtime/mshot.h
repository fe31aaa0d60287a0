/* SPDX-License-Identifier: MIT */
/*
 * mshot.h - requests that outlive any one call (multishot.c): a receive
 * stream's recv (stream.c) or a listener's accept (listener.c), armed and
 * stopped by the engine; and the wait of a stream with no fiber (idle.c).
 */
#ifndef RUNTIME_MSHOT_H
#define RUNTIME_MSHOT_H

#include "base.h"
#include "bufpool.h"
#include "inbox.h"
#include "timer.h"

struct core;
struct fiber;

struct mshot;

struct mshot_ops {
	/* Every result of the request (a CQE on io_uring, a read or accept
	 * on epoll), the terminal one (no MSHOT_F_MORE) last; also after
	 * close (m->closed), to give back what it carries. */
	void (*cqe)(struct mshot *m, int res, unsigned flags);
	/* Closed and quiet: give back what is queued, free the object. */
	void (*release)(struct mshot *m);
};

enum mshot_kind {
	MSHOT_RECV,     /* into the core's buffer pool (CQE flags name the buffer) */
	MSHOT_ACCEPT,   /* each result an accepted fd */
};

/* A multishot request and its owner's lifecycle (multishot.c); the engine
 * arms and stops the request (engine.h). The first member of its owner,
 * which must be 16-aligned (io_uring's cancel bit). */
struct mshot {
	_Alignas(16) struct core *core;
	struct dnode link;          /* in the core's mshots */
	const struct mshot_ops *ops;
	int fd;
	uint8_t kind;               /* enum mshot_kind */
	int flags;                  /* MSHOT_ACCEPT: accept4's flags */
	bool armed;                 /* its terminal result is due */
	bool stopping;              /* io_uring: cancel until the terminal CQE */
	bool cancel_in_flight;
	bool closed;                /* the owner let go: free when quiet */
	uint8_t retries;
	struct fiber *waiter;       /* a fiber waiting for the next result */
	struct timer retry;         /* io_uring: sends the next cancel */
};

void runtime__mshot_init(struct mshot *m, struct core *c, int fd, enum mshot_kind kind,
                         int flags, const struct mshot_ops *ops);
void runtime__mshot_arm(struct mshot *m);
void runtime__mshot_stop(struct mshot *m);
void runtime__mshot_close(struct mshot *m);
int runtime__mshot_wait(struct mshot *m, struct fiber *f, uint64_t deadline);
int runtime__mshot_quiesce(struct mshot *m, struct fiber *f, uint64_t deadline);
void runtime__mshot_deliver(struct mshot *m, int res, unsigned flags);
void runtime__mshot_quiet(struct mshot *m);
/* runtime__mshot_deliver's full way, for a result of any kind. */
void runtime__mshot_result(struct mshot *m, int res, unsigned flags);
/* A receive stream's result (stream.c): a waiting reader's bytes handed
 * over at once, anything else to runtime__mshot_result. */
void runtime__stream_deliver(struct mshot *m, int res, unsigned flags);
void runtime__mshots_free(struct core *c);

/* ------------------------------------------------------------ idle streams */

enum idle_state {
	IDLE_NONE,
	IDLE_WAITING,   /* its continuation waits for what ends the wait */
	IDLE_WAKING,    /* its continuation's fiber is due to start */
};

/* A stream waiting with no fiber (idle.c), inside the stream. */
struct idle {
	struct lazy_deadline dl;    /* the wait's deadline; then a failed
	                               spawn's retry */
	runtime_stream_idle_fn *fn;
	void *arg;
	union {
		struct runtime_fiber *poller; /* polling: the fiber, once in its poll */
		struct fiber *watcher;  /* no wait under way: the fiber a stream
		                           cancels at the peer's end (stream.c:
		                           runtime__stream_watch); a watched
		                           stream's fiber is busy, an idle one's
		                           gone, so the two never meet */
	};
	int fd;
	int16_t why;                /* what ended the wait, for fn: 0 or -errno */
	uint8_t state;              /* enum idle_state */
	bool polling;               /* a fiber polls: the engine cannot watch */
};

void runtime__idle_begin(struct core *c, struct idle *w, int fd, uint64_t deadline,
                         runtime_stream_idle_fn *fn, void *arg, bool polling);
/* End w's wait (if it waits) with why: its continuation starts. */
void runtime__idle_wake(struct idle *w, int why);
/* A drain (-ESHUTDOWN) or a shutdown (-ECANCELED): every idle stream of
 * the core (stream.c). */
void runtime__idle_wake_all(struct core *c, int why);
void runtime__idle_forget(struct idle *w);

/* A core's receive streams and listeners: their buffers, every request
 * open or closing, and the node a drain sends to wake the idle ones. */
struct core_streams {
	struct bufpool pool;        /* receive streams' buffers (bufpool.c) */
	struct dlist mshots;        /* streams and listeners, open or closing */
	struct inbox_node idle_drain; /* a drain wakes its idle streams */
};

#endif /* RUNTIME_MSHOT_H */
