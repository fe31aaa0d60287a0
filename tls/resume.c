/* SPDX-License-Identifier: MIT */
/*
 * resume.c - resumption, a full handshake saved. The server's side is
 * session ticket keys: a server encrypts the session state it
 * hands the client (a ticket, RFC 5077 and TLS 1.3's) under a key only it
 * knows, and resumes a session from a ticket without any state of its
 * own. The key is random, made in the process, and replaced every
 * rotation period; the one before stays valid for one more period, so a
 * ticket lives at least one period and at most two. Every resumption gets
 * a new ticket, under the current key. One set of keys
 * serves every core (a lock held for a copy of 80 bytes).
 *
 * The ticket's own cipher (AES-256-CBC, then HMAC-SHA256 over it) is
 * OpenSSL's ticket format, not a suite of the connection.
 *
 * The client's side is a small cache of sessions by host name: the last
 * ticket each of the last CLIENT_SESSIONS hosts gave, taken by the next
 * connection to that host (a TLS 1.3 ticket is for one use).
 */
#include "tls.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct ticket_key {
	unsigned char name[16];     /* sent in the clear: which key */
	unsigned char aes[32], hmac[32];
	uint64_t born;              /* runtime_now() */
};

struct tickets {
	pthread_mutex_t lock;
	struct ticket_key now, old; /* old.born == 0: none */
	uint64_t period;
	EVP_CIPHER *aes;            /* fetched once: a fetch per ticket costs */
};

static bool key_make(struct ticket_key *k)
{
	k->born = runtime_now();
	return RAND_bytes(k->name, sizeof(k->name)) == 1 && RAND_bytes(k->aes, sizeof(k->aes)) == 1 &&
	       RAND_bytes(k->hmac, sizeof(k->hmac)) == 1;
}

struct tickets *runtime__tickets_new(uint64_t rotation_ns)
{
	struct tickets *tk = calloc(1, sizeof(*tk));

	if (!tk)
		return NULL;
	pthread_mutex_init(&tk->lock, NULL);
	tk->period = rotation_ns;
	tk->aes = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
	if (!tk->aes || !key_make(&tk->now)) {
		runtime__tickets_free(tk);
		return NULL;
	}
	return tk;
}

void runtime__tickets_free(struct tickets *tk)
{
	if (!tk)
		return;
	EVP_CIPHER_free(tk->aes);
	pthread_mutex_destroy(&tk->lock);
	OPENSSL_cleanse(tk, sizeof(*tk));
	free(tk);
}

/* Under the lock: a new key once the period is over, the current one
 * kept as old; an old one past its second period goes. */
static void rotate(struct tickets *tk, uint64_t now)
{
	if (now - tk->now.born >= tk->period) {
		struct ticket_key next;
		if (key_make(&next)) { /* else keep the current one a while longer */
			tk->old = tk->now;
			tk->now = next;
		}
	}
	if (tk->old.born && now - tk->old.born >= 2 * tk->period)
		memset(&tk->old, 0, sizeof(tk->old));
}

/* The key to encrypt with (name NULL), or the one named (false: none). */
static bool key_for(struct tickets *tk, const unsigned char *name, struct ticket_key *k)
{
	bool found = true;

	pthread_mutex_lock(&tk->lock);
	rotate(tk, runtime_now());
	if (!name || memcmp(name, tk->now.name, sizeof(k->name)) == 0)
		*k = tk->now;
	else if (tk->old.born && memcmp(name, tk->old.name, sizeof(k->name)) == 0)
		*k = tk->old;
	else
		found = false;
	pthread_mutex_unlock(&tk->lock);
	return found;
}

static bool mac_init(EVP_MAC_CTX *hctx, unsigned char *key)
{
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, key, 32),
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	return EVP_MAC_CTX_set_params(hctx, params) == 1;
}

/* OpenSSL's ticket callback: enc 1 makes a ticket (1: done, -1: failed),
 * enc 0 opens one (2: good, and renew it - under the current key; 0: an
 * unknown key, a full handshake; -1: failed). */
int runtime__tickets_cb(SSL *ssl, unsigned char *name, unsigned char *iv, EVP_CIPHER_CTX *ectx,
                        EVP_MAC_CTX *hctx, int enc)
{
	struct runtime_tls *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
	struct tickets *tk = t->tickets;
	struct ticket_key k;
	int rc = -1;

	if (!key_for(tk, enc ? NULL : name, &k))
		return 0;
	if (enc) {
		memcpy(name, k.name, sizeof(k.name));
		if (RAND_bytes(iv, EVP_MAX_IV_LENGTH) == 1 &&
		    EVP_EncryptInit_ex2(ectx, tk->aes, k.aes, iv, NULL) == 1 && mac_init(hctx, k.hmac))
			rc = 1;
	} else if (EVP_DecryptInit_ex2(ectx, tk->aes, k.aes, iv, NULL) == 1 && mac_init(hctx, k.hmac)) {
		rc = 2; /* renew: a TLS 1.3 server sends no new ticket otherwise, and a
		           client uses each once */
	}
	OPENSSL_cleanse(&k, sizeof(k));
	return rc;
}

/*
 * A ticket opened: used only under the name it was made for. A session of
 * one name (one certificate, one tenant) must not resume under another -
 * RFC 6066, section 3 - and a client that resumes checks no certificate.
 */
SSL_TICKET_RETURN runtime__ticket_check(SSL *ssl, SSL_SESSION *sess, const unsigned char *key,
                                        size_t key_len, SSL_TICKET_STATUS status, void *arg)
{
	(void)key, (void)key_len, (void)arg;
	if (status == SSL_TICKET_FATAL_ERR_MALLOC || status == SSL_TICKET_FATAL_ERR_OTHER)
		return SSL_TICKET_RETURN_ABORT;
	if (status != SSL_TICKET_SUCCESS && status != SSL_TICKET_SUCCESS_RENEW)
		return SSL_TICKET_RETURN_IGNORE_RENEW; /* none, or not ours: a full one */
	const struct tls_session *t = SSL_get_app_data(ssl);
	const char *was = SSL_SESSION_get0_hostname(sess);
	const char *now = t ? t->sni : NULL; /* OpenSSL has not read it yet (1.2) */
	if ((was || now) && (!was || !now || strcasecmp(was, now) != 0))
		return SSL_TICKET_RETURN_IGNORE_RENEW;
	return SSL_TICKET_RETURN_USE_RENEW;
}

/* ------------------------------------------------------------- clients */

#define CLIENT_SESSIONS 64

struct client_sessions {
	pthread_mutex_t lock;
	struct {
		char *host;         /* NULL: free */
		SSL_SESSION *sess;
	} slot[CLIENT_SESSIONS];
	unsigned next;          /* the slot a new host takes (round robin) */
};

struct client_sessions *runtime__client_sessions_new(void)
{
	struct client_sessions *cs = calloc(1, sizeof(*cs));

	if (cs)
		pthread_mutex_init(&cs->lock, NULL);
	return cs;
}

void runtime__client_sessions_free(struct client_sessions *cs)
{
	if (!cs)
		return;
	for (unsigned i = 0; i < CLIENT_SESSIONS; i++) {
		free(cs->slot[i].host);
		SSL_SESSION_free(cs->slot[i].sess);
	}
	pthread_mutex_destroy(&cs->lock);
	free(cs);
}

/* Under the lock: host's slot, or -1. */
static int slot_of(const struct client_sessions *cs, const char *host)
{
	for (int i = 0; i < CLIENT_SESSIONS; i++)
		if (cs->slot[i].host && strcmp(cs->slot[i].host, host) == 0)
			return i;
	return -1;
}

/* OpenSSL's new-session callback on a client: keep it for host. 1: we
 * took the reference. */
int runtime__client_session_keep(struct client_sessions *cs, const char *host, SSL_SESSION *sess)
{
	char *copy = NULL;

	pthread_mutex_lock(&cs->lock);
	int i = slot_of(cs, host);
	if (i < 0 && (copy = strdup(host))) {
		i = (int)(cs->next++ % CLIENT_SESSIONS);
		free(cs->slot[i].host);
		cs->slot[i].host = copy;
	}
	if (i >= 0) {
		SSL_SESSION_free(cs->slot[i].sess);
		cs->slot[i].sess = sess;
	}
	pthread_mutex_unlock(&cs->lock);
	return i >= 0;
}

/* The session kept for host, taken out (the caller frees it), or NULL. */
SSL_SESSION *runtime__client_session_take(struct client_sessions *cs, const char *host)
{
	SSL_SESSION *sess = NULL;

	pthread_mutex_lock(&cs->lock);
	int i = slot_of(cs, host);
	if (i >= 0) {
		sess = cs->slot[i].sess;
		cs->slot[i].sess = NULL;
	}
	pthread_mutex_unlock(&cs->lock);
	return sess;
}
