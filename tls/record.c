/* SPDX-License-Identifier: MIT */
/*
 * record.c - TLS 1.3 record protection (RFC 8446 5.2-5.5, 7.1-7.3): the
 * keys of one direction made from its traffic secret, their next
 * generation for a KeyUpdate, and one record sealed or opened. No I/O and
 * no state but the keys: tls13.c drives it, and fuzz/ drives it alone.
 *
 * A direction idle for a while keeps its secret, key, IV and sequence
 * number (about 100 bytes) and lets its cipher context go (some 700 bytes
 * with AES's key schedule and GHASH's table); the next record makes it
 * again from the key.
 */
#include "record.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <string.h>

static const struct rec_suite suites[] = {
	{ 0x1301, "AES-128-GCM", 16, 32 },       /* TLS_AES_128_GCM_SHA256 */
	{ 0x1302, "AES-256-GCM", 32, 48 },       /* TLS_AES_256_GCM_SHA384 */
	{ 0x1303, "ChaCha20-Poly1305", 32, 32 }, /* TLS_CHACHA20_POLY1305_SHA256 */
};
#define NSUITES (sizeof(suites) / sizeof(suites[0]))

/* The ciphers, fetched once: an implicit fetch at every init costs more
 * than the record. */
static EVP_CIPHER *ciphers[NSUITES];
static pthread_once_t fetch_once = PTHREAD_ONCE_INIT;

static void fetch_ciphers(void)
{
	for (size_t i = 0; i < NSUITES; i++)
		ciphers[i] = EVP_CIPHER_fetch(NULL, suites[i].cipher, NULL);
}

const struct rec_suite *runtime__rec_suite_of(uint16_t id)
{
	pthread_once(&fetch_once, fetch_ciphers);
	for (size_t i = 0; i < NSUITES; i++)
		if (suites[i].id == id && ciphers[i])
			return &suites[i];
	return NULL;
}

static const EVP_CIPHER *cipher_of(const struct rec_suite *s)
{
	return ciphers[s - suites];
}

static const EVP_MD *md_of(const struct rec_suite *s)
{
	return s->hash_len == 48 ? EVP_sha384() : EVP_sha256();
}

/*
 * HKDF-Expand-Label(secret, label, "", len) (RFC 8446 7.1): for len up to
 * the hash's length HKDF-Expand is one HMAC, of HkdfLabel and 0x01.
 */
static bool expand_label(const struct rec_suite *s, const uint8_t *secret, const char *label,
                         uint8_t *out, size_t len)
{
	uint8_t info[2 + 1 + 6 + 32 + 1 + 1], md[EVP_MAX_MD_SIZE];
	size_t l = strlen(label), n = 0;
	unsigned md_len = 0;

	if (len > s->hash_len || l > 32)
		return false;
	info[n++] = (uint8_t)(len >> 8);
	info[n++] = (uint8_t)len;
	info[n++] = (uint8_t)(6 + l);
	memcpy(info + n, "tls13 ", 6);
	memcpy(info + n + 6, label, l);
	n += 6 + l;
	info[n++] = 0; /* an empty context */
	info[n++] = 1; /* T(1) */
	bool ok = HMAC(md_of(s), secret, (int)s->hash_len, info, n, md, &md_len) != NULL &&
	          md_len == s->hash_len;
	if (ok)
		memcpy(out, md, len);
	OPENSSL_cleanse(md, sizeof(md));
	return ok;
}

bool runtime__rec_dir_set(struct rec_dir *d, const struct rec_suite *s, const uint8_t *secret)
{
	runtime__rec_dir_idle(d);
	if (secret != d->secret)
		memcpy(d->secret, secret, s->hash_len);
	d->seq = 0;
	return expand_label(s, d->secret, "key", d->key, s->key_len) &&
	       expand_label(s, d->secret, "iv", d->iv, REC_IV);
}

bool runtime__rec_dir_update(struct rec_dir *d, const struct rec_suite *s)
{
	uint8_t next[REC_SECRET_MAX];
	bool ok = expand_label(s, d->secret, "traffic upd", next, s->hash_len) &&
	          runtime__rec_dir_set(d, s, next);

	OPENSSL_cleanse(next, sizeof(next));
	return ok;
}

void runtime__rec_dir_idle(struct rec_dir *d)
{
	EVP_CIPHER_CTX_free(d->ctx);
	d->ctx = NULL;
}

void runtime__rec_dir_wipe(struct rec_dir *d)
{
	runtime__rec_dir_idle(d);
	OPENSSL_cleanse(d, sizeof(*d));
}

/* The direction's cipher context, keyed (made again after an idle). */
static EVP_CIPHER_CTX *ctx_of(struct rec_dir *d, const struct rec_suite *s, int enc)
{
	if (d->ctx)
		return d->ctx;
	if (!(d->ctx = EVP_CIPHER_CTX_new()))
		return NULL;
	if (!EVP_CipherInit_ex2(d->ctx, cipher_of(s), d->key, NULL, enc, NULL))
		runtime__rec_dir_idle(d);
	return d->ctx;
}

/* This record's nonce: the IV with the sequence number XORed into its
 * last eight bytes (RFC 8446 5.3). */
static void nonce_of(const struct rec_dir *d, uint8_t nonce[REC_IV])
{
	memcpy(nonce, d->iv, REC_IV);
	for (int i = 0; i < 8; i++)
		nonce[REC_IV - 1 - i] ^= (uint8_t)(d->seq >> (8 * i));
}

static void header_of(uint8_t h[REC_HEADER], size_t ct_len)
{
	h[0] = REC_APPLICATION_DATA; /* opaque_type */
	h[1] = 3;
	h[2] = 3; /* legacy_record_version */
	h[3] = (uint8_t)(ct_len >> 8);
	h[4] = (uint8_t)ct_len;
}

/* Begin a record under d: nonce set, header as additional data. */
static EVP_CIPHER_CTX *begin(struct rec_dir *d, const struct rec_suite *s, int enc,
                             const uint8_t h[REC_HEADER])
{
	uint8_t nonce[REC_IV];
	EVP_CIPHER_CTX *ctx = d->seq == UINT64_MAX ? NULL : ctx_of(d, s, enc);
	int n;

	nonce_of(d, nonce);
	if (!ctx || !EVP_CipherInit_ex2(ctx, NULL, NULL, nonce, enc, NULL) ||
	    !EVP_CipherUpdate(ctx, NULL, &n, h, REC_HEADER))
		return NULL;
	return ctx;
}

ssize_t runtime__rec_seal(struct rec_dir *d, const struct rec_suite *s, uint8_t type,
                 const struct iovec *iov, int iovcnt, size_t len, uint8_t *out)
{
	EVP_CIPHER_CTX *ctx;
	size_t ct_len = len + 1 + REC_TAG, off = REC_HEADER;
	int n;

	if (len > REC_CIPHER_MAX - REC_TAG - 1)
		return -EMSGSIZE; /* more than a record can carry */
	header_of(out, ct_len);
	if (!(ctx = begin(d, s, 1, out)))
		return -EIO;
	for (int i = 0; i < iovcnt && off < REC_HEADER + len; i++) {
		size_t m = iov[i].iov_len < REC_HEADER + len - off ? iov[i].iov_len
		                                                     : REC_HEADER + len - off;
		if (m && !EVP_CipherUpdate(ctx, out + off, &n, iov[i].iov_base, (int)m))
			return -EIO;
		off += m;
	}
	if (off != REC_HEADER + len || !EVP_CipherUpdate(ctx, out + off, &n, &type, 1) ||
	    !EVP_CipherFinal_ex(ctx, out + off + 1, &n) ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, REC_TAG, out + off + 1) <= 0)
		return -EIO;
	d->seq++;
	return (ssize_t)(REC_HEADER + ct_len);
}

size_t runtime__rec_length(const uint8_t h[REC_HEADER])
{
	return REC_HEADER + ((size_t)h[3] << 8 | h[4]);
}

/* The inner plaintext's content type, after its zero padding (RFC 8446
 * 5.4): its offset, or -1 if all zeros. */
static ssize_t strip_padding(const uint8_t *p, size_t n)
{
	while (n && !p[n - 1])
		n--;
	return n ? (ssize_t)n - 1 : -1;
}

int runtime__rec_open(struct rec_dir *d, const struct rec_suite *s, const uint8_t *rec, size_t len,
             uint8_t *out, size_t *plain_len, uint8_t *type)
{
	size_t ct_len = len - REC_HEADER;
	uint8_t tag[REC_TAG];
	EVP_CIPHER_CTX *ctx;
	int n, m;

	if (rec[0] != REC_APPLICATION_DATA)
		return REC_ALERT_UNEXPECTED_MESSAGE; /* nothing plain after the handshake */
	if (ct_len > REC_CIPHER_MAX || ct_len > REC_PLAIN_MAX + 1 + REC_TAG)
		return REC_ALERT_RECORD_OVERFLOW; /* padding included (RFC 8446 5.4) */
	if (ct_len <= REC_TAG || !(ctx = begin(d, s, 0, rec)))
		return REC_ALERT_BAD_RECORD_MAC;
	memcpy(tag, rec + len - REC_TAG, REC_TAG);
	if (!EVP_CipherUpdate(ctx, out, &n, rec + REC_HEADER, (int)(ct_len - REC_TAG)) ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, REC_TAG, tag) <= 0 ||
	    EVP_CipherFinal_ex(ctx, out + n, &m) <= 0)
		return REC_ALERT_BAD_RECORD_MAC;
	d->seq++;
	ssize_t at = strip_padding(out, ct_len - REC_TAG);
	if (at < 0)
		return REC_ALERT_UNEXPECTED_MESSAGE;
	*type = out[at];
	*plain_len = (size_t)at;
	return 0;
}
