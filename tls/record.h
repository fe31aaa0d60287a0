/* SPDX-License-Identifier: MIT */
/*
 * record.h - TLS 1.3 record protection (record.c): pure functions of the
 * keys, for tls13.c and the fuzz target. Not installed.
 */
#ifndef RUNTIME_TLS_RECORD_H
#define RUNTIME_TLS_RECORD_H

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define REC_HEADER 5
#define REC_TAG 16
#define REC_IV 12
#define REC_PLAIN_MAX 16384u                   /* 2^14 */
#define REC_CIPHER_MAX (REC_PLAIN_MAX + 256u)  /* a record's longest body */
#define REC_MAX (REC_HEADER + REC_CIPHER_MAX)
#define REC_OVERHEAD (REC_HEADER + 1 + REC_TAG) /* a sealed record's, no padding */
#define REC_SECRET_MAX 48

/* Content types (RFC 8446 5.1). */
#define REC_ALERT 21
#define REC_HANDSHAKE 22
#define REC_APPLICATION_DATA 23

/* Alert descriptions (RFC 8446 6). */
#define REC_ALERT_CLOSE_NOTIFY 0
#define REC_ALERT_UNEXPECTED_MESSAGE 10
#define REC_ALERT_BAD_RECORD_MAC 20
#define REC_ALERT_RECORD_OVERFLOW 22
#define REC_ALERT_ILLEGAL_PARAMETER 47
#define REC_ALERT_DECODE_ERROR 50
#define REC_ALERT_INTERNAL_ERROR 80
#define REC_ALERT_USER_CANCELED 90

struct rec_suite {
	uint16_t id;                 /* TLS's cipher suite number */
	const char *cipher;          /* OpenSSL's AEAD name */
	size_t key_len, hash_len;
};

/* One direction's keys. */
struct rec_dir {
	uint8_t secret[REC_SECRET_MAX]; /* the application traffic secret */
	uint8_t key[32], iv[REC_IV];
	uint64_t seq;                /* the next record's */
	EVP_CIPHER_CTX *ctx;         /* keyed; NULL while idle */
};

/* The suite TLS numbers id (0x1301-0x1303), or NULL: not one of ours. */
const struct rec_suite *runtime__rec_suite_of(uint16_t id);

/* Keys from a traffic secret (seq 0); the next generation's (KeyUpdate).
 * False: OpenSSL failed (the direction is unusable). */
bool runtime__rec_dir_set(struct rec_dir *d, const struct rec_suite *s, const uint8_t *secret);
bool runtime__rec_dir_update(struct rec_dir *d, const struct rec_suite *s);
/* Let the cipher context go (made again at the next record); all of it,
 * wiped. */
void runtime__rec_dir_idle(struct rec_dir *d);
void runtime__rec_dir_wipe(struct rec_dir *d);

/* Seal len bytes of iov as one record of type into out (len +
 * REC_OVERHEAD bytes): its length, or -EMSGSIZE, -EIO (OpenSSL failed,
 * or the sequence numbers ran out). TLS allows REC_PLAIN_MAX bytes; the
 * caller keeps to it (a test seals more, up to what a record can hold). */
ssize_t runtime__rec_seal(struct rec_dir *d, const struct rec_suite *s, uint8_t type,
                 const struct iovec *iov, int iovcnt, size_t len, uint8_t *out);

/* A record's whole length from its header. */
size_t runtime__rec_length(const uint8_t h[REC_HEADER]);

/* Open the record rec[len] (header included, len == rec_length) into out
 * (room for len - REC_HEADER - REC_TAG bytes): 0, *type and *plain_len
 * the inner content's; or the alert to fail with. */
int runtime__rec_open(struct rec_dir *d, const struct rec_suite *s, const uint8_t *rec, size_t len,
             uint8_t *out, size_t *plain_len, uint8_t *type);

#endif
