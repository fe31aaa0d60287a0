/* SPDX-License-Identifier: MIT */
/*
 * bio.c - the BIO between OpenSSL and a session: a read takes the bytes
 * the session holds (those one socket read brought, on the reader's stack,
 * then those queued in the connection's receive stream, in place), else
 * says "retry"; a write appends to the session's output block. Nothing
 * here waits or touches the socket: session.c does, between SSL calls.
 * Output blocks come from a small per-thread cache and go back once sent.
 */
#include "tls.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define OUT_CACHE 8              /* blocks kept per thread */

/* ------------------------------------------------------- output blocks */

static __thread struct {
	char *blocks[OUT_CACHE];
	unsigned n;
} cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_drop(void *unused)
{
	(void)unused;
	while (cache.n)
		free(cache.blocks[--cache.n]);
}

static void cache_init(void)
{
	pthread_key_create(&cache_key, cache_drop);
}

static char *block_get(void)
{
	if (cache.n)
		return cache.blocks[--cache.n];
	pthread_once(&cache_once, cache_init);
	pthread_setspecific(cache_key, &cache); /* frees the cache as the thread ends */
	return malloc(OUT_BLOCK);
}

void runtime__tls_block_put(struct out *o)
{
	if (o->buf && cache.n < OUT_CACHE)
		cache.blocks[cache.n++] = o->buf;
	else
		free(o->buf);
	o->buf = NULL;
	o->len = o->off = 0;
}

uint8_t *runtime__tls_out_reserve(struct tls_session *t, size_t need)
{
	struct out *o = &t->out[t->fill];

	if (!o->buf && !(o->buf = block_get()))
		return NULL;
	return o->len + need <= OUT_BLOCK ? (uint8_t *)o->buf + o->len : NULL;
}

/* ----------------------------------------------------------------- BIO */

/* Up to len of the bytes this session can hand OpenSSL now. */
static size_t take_input(struct tls_session *t, char *dst, size_t len)
{
	size_t n = 0;
	const void *p;

	if (t->extra_off < t->extra_len) {
		n = MIN(len, t->extra_len - t->extra_off);
		memcpy(dst, t->extra + t->extra_off, n);
		if ((t->extra_off += n) == t->extra_len) {
			free(t->extra);
			t->extra = NULL;
			t->extra_len = t->extra_off = 0;
		}
	} else if (t->feed_len) {
		n = MIN(len, t->feed_len);
		memcpy(dst, t->feed, n);
		t->feed += n;
		t->feed_len -= n;
	} else {
		ssize_t q = runtime_conn_raw_peek(t->conn, &p);
		if (q > 0) {
			n = MIN(len, (size_t)q);
			memcpy(dst, p, n);
			runtime_conn_raw_consume(t->conn, n);
		}
	}
	return n;
}

static int bio_read(BIO *b, char *dst, size_t len, size_t *got)
{
	struct tls_session *t = BIO_get_data(b);

	BIO_clear_retry_flags(b);
	*got = take_input(t, dst, len);
	if (*got)
		return 1;
	if (!t->raw_end)
		BIO_set_retry_read(b);
	return 0; /* retry, or the end: OpenSSL tells EOF from close_notify */
}

static int bio_write(BIO *b, const char *src, size_t len, size_t *put)
{
	struct tls_session *t = BIO_get_data(b);
	struct out *o = &t->out[t->fill];

	BIO_clear_retry_flags(b);
	*put = 0;
	if (!o->buf && !(o->buf = block_get()))
		return 0; /* no memory: OpenSSL fails the call */
	if (o->len == OUT_BLOCK) {
		BIO_set_retry_write(b); /* full: flush, then again */
		return 0;
	}
	*put = MIN(len, OUT_BLOCK - o->len);
	memcpy(o->buf + o->len, src, *put);
	o->len += *put;
	return 1;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b, (void)num, (void)ptr;
	return cmd == BIO_CTRL_FLUSH; /* flushing is ours, after each call */
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void bio_method_init(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "runtime_conn");

	if (m && BIO_meth_set_read_ex(m, bio_read) && BIO_meth_set_write_ex(m, bio_write) &&
	    BIO_meth_set_ctrl(m, bio_ctrl))
		bio_method = m;
	else
		BIO_meth_free(m);
}

/* After an SSL call: what it left of the feed (on a stack about to go)
 * is kept on the heap. False: no memory (the bytes are lost). */
bool runtime__tls_keep_feed(struct tls_session *t)
{
	bool ok = true;

	if (t->feed_len) { /* the extra bytes went first: there are none */
		ok = (t->extra = malloc(t->feed_len)) != NULL;
		if (ok)
			memcpy(t->extra, t->feed, t->feed_len);
		t->extra_len = ok ? t->feed_len : 0;
		t->extra_off = 0;
	}
	t->feed = NULL;
	t->feed_len = 0;
	return ok;
}

BIO_METHOD *runtime__tls_bio_method(void)
{
	pthread_once(&bio_once, bio_method_init);
	return bio_method;
}
