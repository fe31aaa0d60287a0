/* SPDX-License-Identifier: MIT */
/*
 * ratelimit_keyed.c - a token bucket per key (a client's address, an API
 * key), shared by every core, in bounded memory.
 *
 * Each key's bucket is one number, GCRA's theoretical arrival time, as in
 * ratelimit.c (and in the same units, 2^-20 ns). The keys live in shards,
 * each a fixed table of entries made at create (nothing is allocated per
 * call): a hash chain per bucket of a power-of-two index, and a list from
 * the most to the least recently used. A shard that is full evicts its
 * least recently used key, so the whole is LRU within each shard; a key
 * evicted and seen again starts with a full bucket, as a new one does.
 *
 * A call hashes its key outside any lock (SipHash-1-3 under a random key
 * made at create, so that a client cannot aim keys at one chain), then
 * holds its shard's spinlock for the lookup, the move to the front and a
 * few arithmetic operations: one lock, no other atomic, on every path.
 */
#include <runtime_toolkit.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "spin.h"

#define UNIT_SHIFT 20                    /* a unit is 2^-20 ns */
#define RATE_MIN 1e-3
#define RATE_MAX 1e12
#define SHARDS_MAX 64
#define KEYS_PER_SHARD_MIN 16            /* fewer keys, fewer shards */
#define NONE UINT32_MAX

typedef unsigned __int128 units;

struct entry {
	units tat;
	uint64_t hash;
	uint32_t chain;              /* the next in its hash chain, or NONE */
	uint32_t newer, older;       /* the recency list, NONE at its ends */
	uint8_t key_len;
	char key[RUNTIME_RATELIMIT_KEY_MAX];
};

struct shard {
	_Atomic int lock;
	uint32_t used, cap;          /* entries taken, of cap */
	uint32_t newest, oldest;     /* NONE while empty */
	uint32_t mask;               /* heads: mask + 1 chains */
	uint32_t *heads;
	struct entry *entries;
} __attribute__((aligned(64)));

struct runtime_ratelimit_keyed {
	uint64_t sip[2];             /* the hash's key */
	uint64_t cost;               /* one token, in units, rounded up */
	unsigned burst;
	unsigned nshards;            /* a power of two */
	struct shard shards[];
};

/* ------------------------------------------------------------- hashing */

static inline uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

static inline void sip_round(uint64_t v[4])
{
	v[0] += v[1], v[1] = rotl(v[1], 13), v[1] ^= v[0], v[0] = rotl(v[0], 32);
	v[2] += v[3], v[3] = rotl(v[3], 16), v[3] ^= v[2];
	v[0] += v[3], v[3] = rotl(v[3], 21), v[3] ^= v[0];
	v[2] += v[1], v[1] = rotl(v[1], 17), v[1] ^= v[2], v[2] = rotl(v[2], 32);
}

/* SipHash-1-3 of p[0..n) under k. */
static uint64_t siphash(const uint64_t k[2], const unsigned char *p, size_t n)
{
	uint64_t v[4] = { k[0] ^ 0x736f6d6570736575ull, k[1] ^ 0x646f72616e646f6dull,
		          k[0] ^ 0x6c7967656e657261ull, k[1] ^ 0x7465646279746573ull };
	uint64_t m, last = (uint64_t)n << 56;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&m, p + i, 8);
		v[3] ^= m, sip_round(v), v[0] ^= m;
	}
	for (unsigned s = 0; i < n; i++, s += 8)
		last |= (uint64_t)p[i] << s;
	v[3] ^= last, sip_round(v), v[0] ^= last;
	v[2] ^= 0xff;
	sip_round(v), sip_round(v), sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* ------------------------------------------------------------- a shard */

static void list_unlink(struct shard *s, uint32_t i)
{
	struct entry *e = &s->entries[i];

	if (e->newer != NONE)
		s->entries[e->newer].older = e->older;
	else
		s->newest = e->older;
	if (e->older != NONE)
		s->entries[e->older].newer = e->newer;
	else
		s->oldest = e->newer;
}

static void list_push(struct shard *s, uint32_t i)
{
	struct entry *e = &s->entries[i];

	e->newer = NONE;
	e->older = s->newest;
	if (s->newest != NONE)
		s->entries[s->newest].newer = i;
	else
		s->oldest = i;
	s->newest = i;
}

/* Take entry i out of its hash chain. */
static void chain_unlink(struct shard *s, uint32_t i)
{
	uint32_t *at = &s->heads[s->entries[i].hash & s->mask];

	while (*at != i)
		at = &s->entries[*at].chain;
	*at = s->entries[i].chain;
}

static uint32_t find(const struct shard *s, uint64_t hash, const void *key, size_t len)
{
	for (uint32_t i = s->heads[hash & s->mask]; i != NONE; i = s->entries[i].chain) {
		const struct entry *e = &s->entries[i];
		if (e->hash == hash && e->key_len == len && !memcmp(e->key, key, len))
			return i;
	}
	return NONE;
}

/* A new entry for key, its bucket full (tat now): a free one, else the
 * least recently used one's. */
static uint32_t add(struct shard *s, uint64_t hash, const void *key, size_t len, units now)
{
	uint32_t i;

	if (s->used < s->cap) {
		i = s->used++;
	} else { /* full: cap >= 1, so there is an oldest */
		i = s->oldest;
		chain_unlink(s, i);
		list_unlink(s, i);
	}
	struct entry *e = &s->entries[i];
	e->tat = now;
	e->hash = hash;
	e->key_len = (uint8_t)len;
	memcpy(e->key, key, len);
	uint32_t *head = &s->heads[hash & s->mask];
	e->chain = *head;
	*head = i;
	list_push(s, i);
	return i;
}

/* key's entry, found or added, made the most recently used. */
static struct entry *lookup(struct shard *s, uint64_t hash, const void *key, size_t len,
                            units now)
{
	uint32_t i = find(s, hash, key, len);

	if (i == NONE) {
		i = add(s, hash, key, len, now);
	} else if (s->newest != i) {
		list_unlink(s, i);
		list_push(s, i);
	}
	return &s->entries[i];
}

/* ------------------------------------------------------------- the API */

static int shard_init(struct shard *s, uint32_t cap)
{
	uint32_t chains = 1;

	while (chains < cap)
		chains *= 2;
	s->cap = cap;
	s->mask = chains - 1;
	s->newest = s->oldest = NONE;
	s->heads = malloc(chains * sizeof(*s->heads));
	s->entries = calloc(cap, sizeof(*s->entries));
	if (!s->heads || !s->entries)
		return -ENOMEM;
	memset(s->heads, 0xff, chains * sizeof(*s->heads)); /* NONE each */
	return 0;
}

static unsigned shards_for(size_t max_keys)
{
	unsigned n = 1;

	while (n < SHARDS_MAX && (size_t)n * 2 * KEYS_PER_SHARD_MIN <= max_keys)
		n *= 2;
	return n;
}

static void hash_key(uint64_t k[2])
{
	if (getrandom(k, 2 * sizeof(k[0]), GRND_NONBLOCK) != 2 * sizeof(k[0])) {
		k[0] = runtime_now() * 0x9e3779b97f4a7c15ull; /* no entropy yet: */
		k[1] = (uint64_t)(uintptr_t)k ^ rotl(k[0], 29); /* better than none */
	}
}

int runtime_ratelimit_keyed_create(struct runtime_ratelimit_keyed **out, double rate,
                                   unsigned burst, size_t max_keys)
{
	if (!out || burst == 0 || !(rate >= RATE_MIN && rate <= RATE_MAX) || max_keys == 0 ||
	    max_keys > RUNTIME_RATELIMIT_KEYS_MOST)
		return -EINVAL;
	unsigned n = shards_for(max_keys);
	struct runtime_ratelimit_keyed *rl = calloc(1, sizeof(*rl) + n * sizeof(rl->shards[0]));
	if (!rl)
		return -ENOMEM;
	double cost = 1e9 * (double)(1u << UNIT_SHIFT) / rate; /* <= 2^60 */
	rl->cost = (uint64_t)cost + ((double)(uint64_t)cost < cost); /* rounded up */
	rl->burst = burst;
	rl->nshards = n;
	hash_key(rl->sip);
	int rc = 0;
	for (unsigned i = 0; i < n && rc == 0; i++) /* max_keys in all, exactly */
		rc = shard_init(&rl->shards[i], (uint32_t)(max_keys / n + (i < max_keys % n)));
	if (rc < 0) {
		runtime_ratelimit_keyed_destroy(rl);
		return rc;
	}
	*out = rl;
	return 0;
}

void runtime_ratelimit_keyed_destroy(struct runtime_ratelimit_keyed *rl)
{
	if (!rl)
		return;
	for (unsigned i = 0; i < rl->nshards; i++) {
		free(rl->shards[i].heads);
		free(rl->shards[i].entries);
	}
	free(rl);
}

/* GCRA on e's bucket: n tokens taken if they fit now (0), else -EAGAIN
 * and, in *wait, the units until they would. */
static int take(const struct runtime_ratelimit_keyed *rl, struct entry *e, units now,
                unsigned n, units *wait)
{
	units tat = (e->tat > now ? e->tat : now) + (units)n * rl->cost;
	units limit = now + (units)rl->burst * rl->cost;

	if (tat <= limit) {
		e->tat = tat;
		return 0;
	}
	*wait = tat - limit;
	return -EAGAIN;
}

int runtime_ratelimit_keyed_try_take(struct runtime_ratelimit_keyed *rl, const void *key,
                                     size_t len, unsigned n, uint64_t *wait_ns)
{
	if (!rl || !key || len > RUNTIME_RATELIMIT_KEY_MAX || n > rl->burst)
		return -EINVAL;
	if (n == 0)
		return 0;
	uint64_t hash = siphash(rl->sip, key, len);
	struct shard *s = &rl->shards[(hash >> 40) & (rl->nshards - 1)];
	units now = (units)runtime_now() << UNIT_SHIFT, wait = 0;
	toolkit_spin_lock(&s->lock);
	int rc = take(rl, lookup(s, hash, key, len, now), now, n, &wait);
	toolkit_spin_unlock(&s->lock);
	if (rc < 0 && wait_ns) { /* rounded up: never too early */
		units ns = (wait + ((units)1 << UNIT_SHIFT) - 1) >> UNIT_SHIFT;
		*wait_ns = ns > UINT64_MAX ? UINT64_MAX : (uint64_t)ns;
	}
	return rc;
}

size_t runtime_ratelimit_keyed_keys(struct runtime_ratelimit_keyed *rl)
{
	size_t n = 0;

	for (unsigned i = 0; rl && i < rl->nshards; i++) {
		toolkit_spin_lock(&rl->shards[i].lock);
		n += rl->shards[i].used;
		toolkit_spin_unlock(&rl->shards[i].lock);
	}
	return n;
}
