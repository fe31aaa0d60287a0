/* SPDX-License-Identifier: MIT */
/*
 * tls13.c - a TLS 1.3 server connection after its handshake, without
 * OpenSSL's SSL object.
 *
 * OpenSSL does the handshake. Its SSL object then holds some 11 KiB per
 * connection (the connection and its session, cipher contexts, the
 * handshake's leftovers) for as long as the connection lives, which is
 * most of an idle HTTPS keep-alive connection's memory. Once a TLS 1.3
 * handshake is done, a server takes over the records itself (record.c):
 * the application traffic secrets (from OpenSSL's key log callback, the
 * documented way to learn them), a key and IV per direction, sequence
 * numbers; the SSL is freed. An idle connection keeps about 300 bytes
 * of TLS state, and none of its cipher contexts.
 *
 * The sequence numbers must be exact: a write nonce used twice breaks
 * AES-GCM. The read side starts at 0 by construction (the client's
 * Finished was the last record OpenSSL read: read-ahead is off for the
 * handshake, and the bytes after it stay ours). On the write side OpenSSL
 * has sent its tickets under the first secret, a number of records we do
 * not count: it sends a KeyUpdate, and we start the next secret at 0.
 *
 * After the handshake a client may send application data, alerts, and
 * KeyUpdate (answered when it asks); anything else is an
 * unexpected_message. Not taken over, the SSL stays: TLS 1.2, a server
 * that asks for client certificates (their checks live in the SSL), a
 * context made with keep_ssl, a suite not in record.c.
 */
#include "tls.h"

#include <limits.h>
#include <openssl/err.h>
#include <stdlib.h>
#include <string.h>

#define IN_CAP REC_MAX           /* a partial record, gathered */
#define PIECES 16                /* iovecs sealed in one record */
#define READ_ON INT_MIN          /* a record with nothing for the reader */

struct tls13 {
	const struct rec_suite *suite;
	struct rec_dir rd, wr;
	bool have_rd, have_wr;       /* the key log gave their secrets */
	bool update_owed;            /* the peer asked for our KeyUpdate */
	bool read_over;              /* close_notify or a failure: reads end */
	uint8_t hs[5], hs_len;       /* a KeyUpdate coming in pieces */
	uint8_t *in;                 /* ciphertext not yet a whole record */
	size_t in_len, in_off;
	const uint8_t *feed;         /* one read's bytes, on the reader's stack:
	                                during runtime__tls13_read only */
	size_t feed_len;
	uint8_t *plain;              /* a record's plaintext the reader left */
	size_t plain_len, plain_off;
};

static __thread uint8_t opened[REC_CIPHER_MAX]; /* a record that did not fit the reader's buffer */

static int append(struct tls13 *v, const void *p, size_t n);

/* ------------------------------------------------------------ take over */

static int hex_value(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* "<label> <client random> <secret>" (NSS's key log format) into out:
 * true if the line is label's, with a secret of len bytes. */
static bool parse_secret(const char *line, const char *label, uint8_t *out, size_t len)
{
	size_t l = strlen(label);
	const char *hex = strchr(line, ' ');

	if (strncmp(line, label, l) || line[l] != ' ' || !hex || !(hex = strchr(hex + 1, ' ')))
		return false;
	hex++;
	if (strlen(hex) != 2 * len)
		return false;
	for (size_t i = 0; i < len; i++) {
		int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return true;
}

void runtime__tls13_keylog(const SSL *ssl, const char *line)
{
	struct tls_session *t = SSL_get_app_data(ssl);
	struct tls13 *v = t ? t->v13 : NULL;
	const SSL_CIPHER *c = SSL_get_current_cipher(ssl);
	const EVP_MD *md = c ? SSL_CIPHER_get_handshake_digest(c) : NULL;
	int len = md ? EVP_MD_get_size(md) : 0;

	if (!v || len <= 0 || len > REC_SECRET_MAX)
		return;
	if (parse_secret(line, "CLIENT_TRAFFIC_SECRET_0", v->rd.secret, (size_t)len))
		v->have_rd = true;
	else if (parse_secret(line, "SERVER_TRAFFIC_SECRET_0", v->wr.secret, (size_t)len))
		v->have_wr = true;
}

bool runtime__tls13_prepare(struct tls_session *t)
{
	if (t->tls->side != RUNTIME_TLS_SERVER || t->tls->keep_ssl ||
	    t->tls->client_certs != RUNTIME_TLS_CLIENT_CERT_NONE)
		return true;
	if (!(t->v13 = calloc(1, sizeof(*t->v13))))
		return false;
	SSL_set_read_ahead(t->ssl, 0); /* what follows the Finished stays ours */
	return true;
}

void runtime__tls13_free(struct tls_session *t)
{
	struct tls13 *v = t->v13;

	if (!v)
		return;
	runtime__rec_dir_wipe(&v->rd);
	runtime__rec_dir_wipe(&v->wr);
	free(v->in);
	free(v->plain);
	OPENSSL_cleanse(v, sizeof(*v));
	free(v);
	t->v13 = NULL;
}

/* Whether this handshake's connection can go on without its SSL. */
static bool can_take(struct tls_session *t)
{
	struct tls13 *v = t->v13;
	const SSL_CIPHER *c = SSL_get_current_cipher(t->ssl);

	if (!c || SSL_version(t->ssl) != TLS1_3_VERSION || !v->have_rd || !v->have_wr ||
	    SSL_get_verify_mode(t->ssl) != SSL_VERIFY_NONE) /* a peer certificate to keep */
		return false;
	v->suite = runtime__rec_suite_of(SSL_CIPHER_get_protocol_id(c));
	return v->suite && !SSL_has_pending(t->ssl);
}

/* OpenSSL's KeyUpdate, after what it wrote so far (its tickets), so that
 * our writes start a new secret at 0. It goes out with the handshake's
 * last flight. */
static int hand_over_writes(struct tls_session *t)
{
	if (!SSL_key_update(t->ssl, SSL_KEY_UPDATE_NOT_REQUESTED) ||
	    runtime__tls_ssl_call(t, CALL_HANDSHAKE, NULL, 0, NULL) != 1) {
		runtime__tls_failure(&t->failure, t->ssl, SSL_ERROR_SSL, 0);
		return t->failure.err ? t->failure.err : -EPROTO;
	}
	return 0;
}

int runtime__tls13_take(struct tls_session *t)
{
	struct tls13 *v = t->v13;
	int rc;

	if (!v)
		return 0;
	if (!can_take(t)) {
		runtime__tls13_free(t);
		SSL_set_read_ahead(t->ssl, 1);
		return 0;
	}
	if ((rc = hand_over_writes(t)) < 0)
		return rc;
	if (!runtime__rec_dir_set(&v->rd, v->suite, v->rd.secret) ||
	    !runtime__rec_dir_set(&v->wr, v->suite, v->wr.secret) ||
	    !runtime__rec_dir_update(&v->wr, v->suite))
		return -ENOMEM;
	if (t->extra_off < t->extra_len && /* what the client sent after its Finished */
	    (rc = append(v, t->extra + t->extra_off, t->extra_len - t->extra_off)) < 0)
		return rc;
	free(t->extra);
	t->extra = NULL;
	t->extra_len = t->extra_off = 0;
	t->info_cipher = SSL_CIPHER_get_name(SSL_get_current_cipher(t->ssl)); /* static */
	SSL_free(t->ssl);
	t->ssl = NULL;
	return 0;
}

/* ------------------------------------------------------------ sending */

/* Seal one record of type into the output block: 0, or -errno. */
static int seal(struct tls_session *t, uint8_t type, const struct iovec *iov, int iovcnt,
                size_t len)
{
	struct tls13 *v = t->v13;
	uint8_t *at = runtime__tls_out_reserve(t, len + REC_OVERHEAD);

	if (!at)
		return -ENOMEM;
	ssize_t n = runtime__rec_seal(&v->wr, v->suite, type, iov, iovcnt, len, at);
	if (n < 0)
		return (int)n;
	t->out[t->fill].len += (size_t)n;
	return 0;
}

static int seal_bytes(struct tls_session *t, uint8_t type, const void *p, size_t len)
{
	struct iovec iov = { (void *)p, len };

	return seal(t, type, &iov, 1, len);
}

/* Our KeyUpdate, then the next write secret. */
static int send_key_update(struct tls_session *t)
{
	static const uint8_t msg[5] = { 24, 0, 0, 1, 0 }; /* update_not_requested */
	int rc = seal_bytes(t, REC_HANDSHAKE, msg, sizeof(msg));

	if (rc == 0 && !runtime__rec_dir_update(&t->v13->wr, t->v13->suite))
		rc = -EIO;
	if (rc == 0)
		t->v13->update_owed = false;
	return rc;
}

/* An alert out with what is queued (best effort: it goes with the next
 * flush, if there is room). */
static void seal_alert(struct tls_session *t, uint8_t desc)
{
	uint8_t alert[2] = { desc == REC_ALERT_CLOSE_NOTIFY ? 1 : 2, desc };

	if (!t->write_err)
		seal_bytes(t, REC_ALERT, alert, sizeof(alert));
}

int runtime__tls13_close_notify(struct tls_session *t)
{
	seal_alert(t, REC_ALERT_CLOSE_NOTIFY);
	return 0;
}

/* The iovecs of the next record, up to REC_PLAIN_MAX bytes from k on:
 * their count (in piece), *len their bytes. */
static int next_pieces(const struct iovec *iov, int iovcnt, struct tls_cursor *k,
                       struct iovec piece[PIECES], size_t *len)
{
	int n = 0;

	*len = 0;
	for (; k->i < iovcnt && n < PIECES && *len < REC_PLAIN_MAX; k->i++, k->off = 0) {
		size_t m = MIN(iov[k->i].iov_len - k->off, REC_PLAIN_MAX - *len);
		if (!m)
			continue;
		piece[n++] = (struct iovec){ (char *)iov[k->i].iov_base + k->off, m };
		*len += m;
		if ((k->off += m) < iov[k->i].iov_len)
			break;
	}
	return n;
}

ssize_t runtime__tls13_seal_records(struct tls_session *t, const struct iovec *iov, int iovcnt)
{
	struct tls_cursor k = { 0, 0 };
	struct iovec piece[PIECES];
	size_t taken = 0, len;
	int n, rc = 0;

	if (t->v13->update_owed && (rc = send_key_update(t)) < 0)
		return rc;
	while (runtime__tls_room_for_record(t) && (n = next_pieces(iov, iovcnt, &k, piece, &len))) {
		if ((rc = seal(t, REC_APPLICATION_DATA, piece, n, len)) < 0)
			return rc;
		taken += len;
	}
	return (ssize_t)taken;
}

/* ------------------------------------------------------------ receiving */

/* A failure of the records': the alert to the peer (if we found it),
 * recorded as OpenSSL would word it. reason: OpenSSL's. */
static int fail(struct tls_session *t, uint8_t alert, int reason)
{
	if (alert) {
		seal_alert(t, alert);
		if (!t->flushing)
			runtime__tls_flush(t); /* a failure of its own sticks */
	}
	runtime__tls_failure_reason(&t->failure, reason);
	t->v13->read_over = true;
	if (!t->write_err)
		t->write_err = t->failure.err;
	return t->failure.err;
}

/* OpenSSL's reason for the alert we send. */
static int reason_of(int alert)
{
	switch (alert) {
	case REC_ALERT_BAD_RECORD_MAC: return SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC;
	case REC_ALERT_RECORD_OVERFLOW: return SSL_R_DATA_LENGTH_TOO_LONG;
	case REC_ALERT_ILLEGAL_PARAMETER: return SSL_R_BAD_KEY_UPDATE;
	case REC_ALERT_DECODE_ERROR: return SSL_R_BAD_LENGTH;
	case REC_ALERT_INTERNAL_ERROR: return ERR_R_INTERNAL_ERROR;
	default: return SSL_R_UNEXPECTED_MESSAGE;
	}
}

static int fail_with(struct tls_session *t, int alert)
{
	return fail(t, (uint8_t)alert, reason_of(alert));
}

/* A handshake record's bytes: KeyUpdate (RFC 8446 4.6.3), the only
 * message a client may send now, ending its record. 0 or an alert. */
static int handshake_bytes(struct tls_session *t, const uint8_t *p, size_t n)
{
	struct tls13 *v = t->v13;

	if (!n)
		return REC_ALERT_UNEXPECTED_MESSAGE;
	for (size_t i = 0; i < n; i++) {
		v->hs[v->hs_len++] = p[i];
		if (v->hs_len == 1 && v->hs[0] != 24)
			return REC_ALERT_UNEXPECTED_MESSAGE;
		if (v->hs_len == 4 && (v->hs[1] || v->hs[2] || v->hs[3] != 1))
			return REC_ALERT_DECODE_ERROR;
		if (v->hs_len < 5)
			continue;
		if (i != n - 1) /* no message may follow a key change in its record */
			return REC_ALERT_UNEXPECTED_MESSAGE;
		if (v->hs[4] > 1)
			return REC_ALERT_ILLEGAL_PARAMETER;
		if (!runtime__rec_dir_update(&v->rd, v->suite))
			return REC_ALERT_INTERNAL_ERROR;
		v->update_owed |= v->hs[4] == 1;
		v->hs_len = 0;
	}
	return 0;
}

/* The peer's alert: 0 for close_notify (the end), 1 to read on
 * (user_canceled), else the failure. */
static int alert_bytes(struct tls_session *t, const uint8_t *p, size_t n)
{
	if (n != 2)
		return fail_with(t, REC_ALERT_DECODE_ERROR);
	if (p[1] == REC_ALERT_USER_CANCELED)
		return 1;
	if (p[1] == REC_ALERT_CLOSE_NOTIFY) {
		t->v13->read_over = true;
		return 0;
	}
	return fail(t, 0, SSL_AD_REASON_OFFSET + p[1]); /* every other alert is fatal */
}

/* Plaintext of an application data record for the reader: in buf
 * already, or in out, of which what does not fit is kept. */
static ssize_t deliver(struct tls13 *v, const uint8_t *out, size_t n, void *buf, size_t len)
{
	if (out == buf)
		return (ssize_t)n;
	size_t m = MIN(n, len);
	memcpy(buf, out, m);
	if (m < n) {
		if (!(v->plain = malloc(n - m)))
			return -ENOMEM;
		memcpy(v->plain, out + m, n - m);
		v->plain_len = n - m;
		v->plain_off = 0;
	}
	return (ssize_t)m;
}

/* An opened record's content: bytes for the reader (> 0), 0 at the
 * peer's close_notify, READ_ON, or the failure. */
static ssize_t inner(struct tls_session *t, uint8_t type, const uint8_t *out, size_t n, void *buf,
                     size_t len)
{
	struct tls13 *v = t->v13;
	int rc;

	if (v->hs_len && type != REC_HANDSHAKE) /* no interleaving with a partial message */
		return fail_with(t, REC_ALERT_UNEXPECTED_MESSAGE);
	switch (type) {
	case REC_APPLICATION_DATA:
		return n ? deliver(v, out, n, buf, len) : READ_ON;
	case REC_ALERT:
		rc = alert_bytes(t, out, n);
		return rc == 1 ? READ_ON : rc;
	case REC_HANDSHAKE:
		if ((rc = handshake_bytes(t, out, n)))
			return fail_with(t, rc);
		if (v->update_owed && send_key_update(t) == 0 && !t->flushing)
			runtime__tls_flush(t);
		return READ_ON;
	default:
		return fail_with(t, REC_ALERT_UNEXPECTED_MESSAGE);
	}
}

/* Bytes into the gathering buffer: 0, or -ENOMEM. */
static int append(struct tls13 *v, const void *p, size_t n)
{
	if (!v->in && !(v->in = malloc(IN_CAP)))
		return -ENOMEM; /* nothing consumed: the bytes wait */
	if (v->in_off) {
		memmove(v->in, v->in + v->in_off, v->in_len - v->in_off);
		v->in_len -= v->in_off;
		v->in_off = 0;
	}
	if (n)
		memcpy(v->in + v->in_len, p, n);
	v->in_len += n;
	return 0;
}

/* Where the next record's bytes are: the gathering buffer while it holds
 * some, else this read's feed, else the stream's queue (in place). */
enum source { FROM_IN, FROM_FEED, FROM_STREAM };

static enum source source_of(struct tls_session *t, const uint8_t **p, size_t *avail)
{
	struct tls13 *v = t->v13;
	const void *q = NULL;
	ssize_t n;

	if (v->in_off < v->in_len) {
		*p = v->in + v->in_off;
		*avail = v->in_len - v->in_off;
		return FROM_IN;
	}
	if (v->feed_len) {
		*p = v->feed;
		*avail = v->feed_len;
		return FROM_FEED;
	}
	n = runtime_conn_raw_peek(t->conn, &q);
	*p = q;
	*avail = n > 0 ? (size_t)n : 0;
	return FROM_STREAM;
}

/* One wait for the peer's bytes into buf: their count, 0 at the socket's
 * end, or -errno (recorded). */
static int wait_read(struct tls_session *t, void *buf, size_t len)
{
	runtime__tls_wait_begin(t);
	ssize_t n = runtime_conn_raw_read(t->conn, buf, len);
	runtime__tls_wait_end(t);
	return n > 0 ? (int)n : runtime__tls_read_end(t, (int)n);
}

/* More of the record that starts at p (avail of its need bytes there):
 * a start outside the gathering buffer moves into it; the buffer takes
 * what the stream queued, else the next read. With nothing at all, the
 * read goes to the feed, on the reader's stack: a reader waiting for a
 * record to begin holds no buffer, and a record that comes whole is
 * opened where it landed. 1, 0 at the socket's end, or -errno. */
static int gather(struct tls_session *t, uint8_t *feed, enum source src, const uint8_t *p,
                  size_t avail, size_t need)
{
	struct tls13 *v = t->v13;
	const void *q;
	int rc;

	if (src != FROM_IN && avail) { /* all of it is this record's */
		if ((rc = append(v, p, avail)) < 0)
			return rc;
		if (src == FROM_FEED)
			v->feed_len = 0;
		else
			runtime_conn_raw_consume(t->conn, avail);
		return 1;
	}
	if (src == FROM_STREAM) {
		if ((rc = wait_read(t, feed, FEED_SIZE)) > 0) {
			v->feed = feed;
			v->feed_len = (size_t)rc;
		}
		return rc > 0 ? 1 : rc;
	}
	ssize_t n = runtime_conn_raw_peek(t->conn, &q);
	size_t want = need - avail;
	if (n > 0) {
		n = (ssize_t)MIN((size_t)n, want);
		if ((rc = append(v, q, (size_t)n)) == 0)
			runtime_conn_raw_consume(t->conn, (size_t)n);
		return rc < 0 ? rc : 1;
	}
	append(v, NULL, 0); /* compacted: room for want at the end */
	if ((rc = wait_read(t, v->in + v->in_len, want)) > 0)
		v->in_len += (size_t)rc;
	return rc > 0 ? 1 : rc;
}

/* The next whole record, and where it is. 1 (*rec, *len), 0 at the
 * socket's end, or -errno. */
static int next_record(struct tls_session *t, uint8_t *feed, const uint8_t **rec, size_t *len,
                       enum source *src)
{
	for (int rc;;) {
		const uint8_t *p;
		size_t avail;
		*src = source_of(t, &p, &avail);
		size_t need = avail >= REC_HEADER ? runtime__rec_length(p) : REC_HEADER;
		if (need > REC_MAX)
			return fail_with(t, REC_ALERT_RECORD_OVERFLOW);
		if (avail >= need) {
			*rec = p;
			*len = need;
			return 1;
		}
		if ((rc = gather(t, feed, *src, p, avail, need)) <= 0)
			return rc;
	}
}

static void consume(struct tls_session *t, size_t len, enum source src)
{
	struct tls13 *v = t->v13;

	if (src == FROM_STREAM) {
		runtime_conn_raw_consume(t->conn, len);
	} else if (src == FROM_FEED) {
		v->feed += len;
		v->feed_len -= len;
	} else if ((v->in_off += len) == v->in_len) {
		v->in_off = v->in_len = 0;
	}
}

static ssize_t take_plain(struct tls13 *v, void *buf, size_t len)
{
	size_t m = MIN(len, v->plain_len - v->plain_off);

	memcpy(buf, v->plain + v->plain_off, m);
	if ((v->plain_off += m) == v->plain_len) {
		free(v->plain);
		v->plain = NULL;
		v->plain_len = v->plain_off = 0;
	}
	return (ssize_t)m;
}

/* One record opened: what inner() says of it. */
static ssize_t open_one(struct tls_session *t, uint8_t *feed, void *buf, size_t len)
{
	struct tls13 *v = t->v13;
	const uint8_t *rec = NULL;
	size_t rec_len = 0, n;
	enum source src = FROM_IN;
	uint8_t type;
	int rc = next_record(t, feed, &rec, &rec_len, &src);

	if (rc <= 0) /* the socket's end, with no close_notify: OpenSSL's words */
		return rc == 0 ? fail(t, 0, SSL_R_UNEXPECTED_EOF_WHILE_READING) : rc;
	uint8_t *out = len >= rec_len - REC_HEADER - REC_TAG ? buf : opened;
	int alert = runtime__rec_open(&v->rd, v->suite, rec, rec_len, out, &n, &type);
	consume(t, rec_len, src);
	return alert ? fail_with(t, alert) : inner(t, type, out, n, buf, len);
}

ssize_t runtime__tls13_read(struct tls_session *t, void *buf, size_t len)
{
	struct tls13 *v = t->v13;
	uint8_t feed[FEED_SIZE];
	ssize_t rc;

	if (v->plain)
		return take_plain(v, buf, len);
	do {
		if (v->read_over) {
			rc = t->failure.err && !t->failure.in_handshake ? t->failure.err : 0;
			break;
		}
		rc = open_one(t, feed, buf, len);
	} while (rc == READ_ON);
	if (v->feed_len && append(v, v->feed, v->feed_len) < 0) /* the feed goes with the stack */
		rc = fail(t, REC_ALERT_INTERNAL_ERROR, ERR_R_MALLOC_FAILURE);
	v->feed_len = 0;
	return rc;
}

/* ----------------------------------------------------------- its state */

bool runtime__tls13_pending(const struct tls_session *t)
{
	const struct tls13 *v = t->v13;

	return v->plain || v->in_off < v->in_len;
}

void runtime__tls13_idle(struct tls_session *t)
{
	struct tls13 *v = t->v13;

	runtime__rec_dir_idle(&v->rd);
	runtime__rec_dir_idle(&v->wr);
	if (v->in && v->in_off == v->in_len) { /* no reader reads into it: it is empty */
		free(v->in);
		v->in = NULL;
		v->in_len = v->in_off = 0;
	}
}
