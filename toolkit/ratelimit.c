/* SPDX-License-Identifier: MIT */
/*
 * ratelimit.c - a token bucket (rate tokens per second, at most burst at
 * once) shared by fibers and threads of any core, kept as one number: the
 * theoretical arrival time (tat) of GCRA, the cell-rate algorithm of ATM
 * networks. The bucket is full while tat is not after now; taking n tokens
 * moves tat n token-costs later, from max(tat, now); a take fits while tat
 * stays within burst token-costs of now. So nothing refills on a timer:
 * the refill is the clock moving past tat, read on demand.
 *
 * A take that does not fit reserves anyway - tat goes past the burst, the
 * bucket into debt - and sleeps until its reservation is due; whoever comes
 * later reserves behind it, so waiters are served in arrival order and a
 * try cannot barge past them. A waiter that is cancelled gives back what no
 * later reservation was made on top of (as Go's x/time/rate does): later
 * waiters keep their wake-up times, so handing them the hole too could let
 * a newcomer and them take the same tokens.
 *
 * Time is kept in units of 2^-20 ns in 128 bits, and a token's cost is
 * rounded up in those units: exact enough for 10^12 tokens per second,
 * never faster than the rate, and without wrap-around for any clock. The
 * state sits under a spinlock held for a few arithmetic operations, never
 * across a call that can block. The toolkit uses only <runtime.h>'s
 * public calls: runtime_now and runtime_sleep do the timing.
 */
#include <runtime.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "spin.h"

#define UNIT_SHIFT 20                    /* a unit is 2^-20 ns */
#define RATE_MIN 1e-3                    /* tokens per second */
#define RATE_MAX 1e12

typedef unsigned __int128 units;

struct runtime_ratelimit {
	_Atomic int lock;
	_Atomic unsigned waiting;   /* fibers asleep on a reservation */
	unsigned burst;
	uint64_t cost;              /* one token, in units, rounded up */
	units tat;                  /* guarded by lock */
};

/* ---------------------------------------------------------------- state */

static units units_of_ns(uint64_t ns)
{
	return (units)ns << UNIT_SHIFT;
}

/* ns rounded up, saturating: a due time, never before its units. */
static uint64_t ns_of_units(units u)
{
	units ns = (u + (((units)1 << UNIT_SHIFT) - 1)) >> UNIT_SHIFT;
	return ns > UINT64_MAX ? UINT64_MAX : (uint64_t)ns;
}

static units burst_units(const struct runtime_ratelimit *rl)
{
	return (units)rl->burst * rl->cost;
}

/* Under the lock: tat after taking n at now (units), and when that take is
 * due - now or later. */
static units reserve_at(const struct runtime_ratelimit *rl, units now, unsigned n, units *due)
{
	units from = rl->tat > now ? rl->tat : now;
	units tat = from + (units)n * rl->cost;
	units b = burst_units(rl);

	*due = tat > now + b ? tat - b : now; /* b may exceed now: no underflow */
	return tat;
}

int runtime_ratelimit_create(struct runtime_ratelimit **out, double rate, unsigned burst)
{
	if (!out || burst == 0 || !(rate >= RATE_MIN && rate <= RATE_MAX))
		return -EINVAL;
	struct runtime_ratelimit *rl = calloc(1, sizeof(*rl));
	if (!rl)
		return -ENOMEM;
	double cost = 1e9 * (double)(1u << UNIT_SHIFT) / rate; /* <= 2^60 */
	rl->burst = burst;
	rl->cost = (uint64_t)cost;
	if ((double)rl->cost < cost)
		rl->cost++; /* rounded up: never faster than the rate */
	rl->tat = units_of_ns(runtime_now()); /* full */
	*out = rl;
	return 0;
}

int runtime_ratelimit_destroy(struct runtime_ratelimit *rl)
{
	if (!rl)
		return 0;
	if (atomic_load(&rl->waiting))
		return -EBUSY;
	free(rl);
	return 0;
}

/* ------------------------------------------------------------------ take */

int runtime_ratelimit_try_take(struct runtime_ratelimit *rl, unsigned n)
{
	if (!rl || n > rl->burst)
		return -EINVAL;
	if (n == 0)
		return 0;
	units now = units_of_ns(runtime_now()), due;
	toolkit_spin_lock(&rl->lock);
	units tat = reserve_at(rl, now, n, &due);
	bool fits = due == now;
	if (fits)
		rl->tat = tat;
	toolkit_spin_unlock(&rl->lock);
	return fits ? 0 : -EAGAIN;
}

/* A waiter gives its reservation (n tokens, which moved tat to mine) back:
 * all of it while no reservation was made on top of it, less what later
 * ones reserved otherwise. (tat 0, long past, is as good as a full
 * bucket.) */
static void give_back(struct runtime_ratelimit *rl, units mine, unsigned n)
{
	units cost = (units)n * rl->cost;

	toolkit_spin_lock(&rl->lock);
	units later = rl->tat > mine ? rl->tat - mine : 0;
	if (later < cost) {
		units back = cost - later;
		rl->tat = rl->tat > back ? rl->tat - back : 0;
	}
	toolkit_spin_unlock(&rl->lock);
}

/* The wait's deadline, ns: the earlier of the fiber's and now + timeout
 * (negative, or too long to add: none); UINT64_MAX for none. */
static uint64_t wait_deadline(uint64_t now, int64_t timeout_ns)
{
	uint64_t d = runtime_deadline_get();
	uint64_t t = timeout_ns < 0 || (uint64_t)timeout_ns > UINT64_MAX - now
	             ? UINT64_MAX : now + (uint64_t)timeout_ns;

	if (d == 0)
		d = UINT64_MAX;
	return d < t ? d : t;
}

/* Sleep until due (ns); on a cancel or deadline, give the reservation
 * back. */
static int sleep_until_due(struct runtime_ratelimit *rl, uint64_t due, units mine, unsigned n)
{
	uint64_t now = runtime_now();
	int rc = due > now ? runtime_sleep(due - now) : 0;

	if (rc)
		give_back(rl, mine, n);
	atomic_fetch_sub(&rl->waiting, 1);
	return rc;
}

int runtime_ratelimit_take(struct runtime_ratelimit *rl, unsigned n, int64_t timeout_ns)
{
	if (!runtime_fiber_self())
		return -EPERM;
	if (!rl || n > rl->burst)
		return -EINVAL;
	if (n == 0)
		return 0;
	uint64_t now_ns = runtime_now();
	uint64_t deadline = wait_deadline(now_ns, timeout_ns);
	units now = units_of_ns(now_ns), due;
	toolkit_spin_lock(&rl->lock);
	units tat = reserve_at(rl, now, n, &due);
	uint64_t due_ns = ns_of_units(due);
	bool wait = due > now;
	if (!wait || due_ns <= deadline)
		rl->tat = tat; /* taken, or reserved */
	if (wait && due_ns <= deadline)
		atomic_fetch_add(&rl->waiting, 1); /* before destroy can look */
	toolkit_spin_unlock(&rl->lock);
	if (!wait)
		return 0;
	if (due_ns > deadline)
		return -ETIMEDOUT; /* it would outlast the deadline: nothing taken */
	return sleep_until_due(rl, due_ns, tat, n);
}

int64_t runtime_ratelimit_available(const struct runtime_ratelimit *crl)
{
	struct runtime_ratelimit *rl = (struct runtime_ratelimit *)crl; /* the lock */

	if (!rl)
		return 0;
	units now = units_of_ns(runtime_now());
	toolkit_spin_lock(&rl->lock);
	units from = rl->tat > now ? rl->tat : now;
	toolkit_spin_unlock(&rl->lock);
	units room = now + burst_units(rl);
	if (room >= from)
		return (int64_t)((room - from) / rl->cost);
	units debt = from - room; /* reserved by waiters beyond the bucket */
	return -(int64_t)((debt + rl->cost - 1) / rl->cost);
}
