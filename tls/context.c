/* SPDX-License-Identifier: MIT */
/*
 * context.c - a TLS context: one SSL_CTX per certificate, all with the
 * same settings (protocols, suites, ALPN, verification), because OpenSSL
 * picks a certificate per SSL_CTX, not per name. Every handshake starts on
 * the first certificate's; a server's SNI callback moves it to the first
 * certificate whose names match (X509_check_host: subjectAltName,
 * wildcards). Ticket keys hang off the first one, which OpenSSL keeps as
 * the session's context whatever SNI picks, so resumption works across
 * names and cores.
 *
 * The context is counted: its owner and each live session hold a
 * reference, so runtime_tls_destroy while connections use it is safe.
 */
#include "tls.h"

#include <errno.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* TLS 1.2: ECDHE (forward secrecy) with an AEAD only, fastest first. TLS
 * 1.3's suites are all AEAD; AES-128-GCM first for its speed. */
#define TLS12_SUITES                                                                         \
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                         \
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"                         \
	"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384"
#define TLS13_SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define GROUPS "X25519:P-256:P-384"
#define SEC (1000ull * 1000 * 1000)

void runtime_tls_config_init(struct runtime_tls_config *cfg)
{
	if (cfg)
		*cfg = (struct runtime_tls_config){
			.side = RUNTIME_TLS_SERVER,
			.handshake_timeout_ns = 10 * SEC,
			.ticket_rotation_ns = 3600 * SEC,
		};
}

/* "h2,http/1.1" as ALPN's wire format (each name after its length) into
 * out: its length, or -EINVAL (an empty name, one over 255 bytes, none at
 * all, or more than cap bytes). */
ssize_t runtime__tls_alpn_encode(const char *list, unsigned char *out, size_t cap)
{
	unsigned char *p = out;

	for (const char *s = list; *s;) {
		size_t n = strcspn(s, ",");
		if (n == 0 || n > 255 || (size_t)(p - out) + 1 + n > cap)
			return -EINVAL;
		*p++ = (unsigned char)n;
		memcpy(p, s, n);
		p += n;
		s += n + (s[n] == ',');
	}
	return p == out ? -EINVAL : p - out;
}

static int alpn_wire(const char *list, unsigned char **out, size_t *out_len)
{
	size_t cap = strlen(list) + 1;
	unsigned char *w = malloc(cap);

	if (!w)
		return -ENOMEM;
	ssize_t n = runtime__tls_alpn_encode(list, w, cap);
	if (n < 0) {
		free(w);
		return (int)n;
	}
	*out = w;
	*out_len = (size_t)n;
	return 0;
}

/* Server: the first of our protocols the client offers; none in common
 * refuses the handshake (RFC 7301's no_application_protocol). */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *out_len,
                       const unsigned char *in, unsigned in_len, void *arg)
{
	struct runtime_tls *t = arg;
	const struct tls_session *s = SSL_get_app_data(ssl);
	const unsigned char *ours = s && s->alpn_offer ? s->alpn_offer : t->alpn;
	size_t ours_len = s && s->alpn_offer ? s->alpn_offer_len : t->alpn_len;
	unsigned char *chosen;

	if (!ours)
		return SSL_TLSEXT_ERR_NOACK; /* none offered: none agreed */
	if (SSL_select_next_proto(&chosen, out_len, ours, (unsigned)ours_len, in, in_len) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	*out = chosen;
	return SSL_TLSEXT_ERR_OK;
}

/* The host name of a server_name extension's bytes (RFC 6066, 3), copied;
 * NULL if there is none or they do not parse. */
static char *sni_of(const unsigned char *p, size_t len)
{
	size_t list = len >= 2 ? (size_t)p[0] << 8 | p[1] : 0;

	if (list + 2 != len)
		return NULL;
	for (p += 2; list >= 3;) {
		size_t n = (size_t)p[1] << 8 | p[2];
		if (n + 3 > list)
			return NULL;
		if (p[0] == TLSEXT_NAMETYPE_host_name)
			return n ? strndup((const char *)p + 3, n) : NULL;
		p += n + 3;
		list -= n + 3;
	}
	return NULL;
}

/* Server, first of all: the name the client asks for, kept before OpenSSL
 * looks at a ticket - a TLS 1.2 ticket is opened before OpenSSL reads the
 * name, and must not resume under another one (resume.c). */
static int note_name(SSL *ssl, int *alert, void *arg)
{
	struct tls_session *s = SSL_get_app_data(ssl);
	const unsigned char *ext;
	size_t len;

	(void)alert, (void)arg;
	if (s && !s->sni && SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &ext, &len))
		s->sni = sni_of(ext, len);
	return SSL_CLIENT_HELLO_SUCCESS;
}

/* Server: the certificate for the name the client asked for (SNI). */
static int pick_cert(SSL *ssl, int *alert, void *arg)
{
	struct runtime_tls *t = arg;
	const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);

	(void)alert;
	if (!name)
		return SSL_TLSEXT_ERR_NOACK;
	for (unsigned i = 0; i < t->ncerts; i++) {
		if (X509_check_host(t->certs[i].leaf, name, 0, 0, NULL) == 1) {
			if (i > 0 && !SSL_set_SSL_CTX(ssl, t->certs[i].ctx))
				return SSL_TLSEXT_ERR_ALERT_FATAL;
			return SSL_TLSEXT_ERR_OK;
		}
	}
	return SSL_TLSEXT_ERR_OK; /* the first certificate */
}

/* Protocol versions and suites: 0, or -EPROTO (OpenSSL refused them). */
static int set_protocols(const struct runtime_tls *t, SSL_CTX *ctx)
{
	long opts = SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
	            SSL_OP_NO_COMPRESSION;

	if (t->side == RUNTIME_TLS_SERVER && !t->tickets)
		opts |= SSL_OP_NO_TICKET; /* a client takes the tickets it is given */
	SSL_CTX_set_options(ctx, opts);
	if (!SSL_CTX_set_min_proto_version(ctx, t->tls13_only ? TLS1_3_VERSION : TLS1_2_VERSION) ||
	    !SSL_CTX_set_cipher_list(ctx, t->ciphers ? t->ciphers : TLS12_SUITES) ||
	    !SSL_CTX_set_ciphersuites(ctx, TLS13_SUITES) || !SSL_CTX_set1_groups_list(ctx, GROUPS)) {
		runtime__tls_config_error("the protocols or cipher suites");
		return -EPROTO;
	}
	return 0;
}

/* Whom to trust, and whether to ask: 0, or -ENOENT (ca_file). */
static int set_verification(const struct runtime_tls *t, SSL_CTX *ctx)
{
	int mode = SSL_VERIFY_NONE;

	if (t->side == RUNTIME_TLS_CLIENT && t->verify)
		mode = SSL_VERIFY_PEER;
	else if (t->side == RUNTIME_TLS_SERVER && t->client_certs != RUNTIME_TLS_CLIENT_CERT_NONE)
		mode = SSL_VERIFY_PEER | (t->client_certs == RUNTIME_TLS_CLIENT_CERT_REQUIRED
		                                  ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0);
	SSL_CTX_set_verify(ctx, mode, NULL);
	if (mode == SSL_VERIFY_NONE)
		return 0;
	if (t->ca_file && access(t->ca_file, R_OK) < 0) { /* OpenSSL would say "system lib" */
		runtime__tls_config_errno(t->ca_file, errno);
		return -ENOENT;
	}
	if (t->ca_file ? !SSL_CTX_load_verify_locations(ctx, t->ca_file, NULL)
	               : !SSL_CTX_set_default_verify_paths(ctx)) {
		runtime__tls_config_error(t->ca_file ? t->ca_file : "the system's CA store");
		return t->ca_file ? -EPROTO : -ENOENT; /* read, but no certificate in it */
	}
	if (t->side == RUNTIME_TLS_SERVER && t->ca_file) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(t->ca_file);
		if (names)
			SSL_CTX_set_client_CA_list(ctx, names); /* what to ask for */
	}
	return 0;
}

/* A client's new session (a ticket): kept for its host, to resume. */
static int keep_session(SSL *ssl, SSL_SESSION *sess)
{
	struct runtime_tls *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
	const char *key = runtime__tls_resume_key_of(ssl);

	return key && t->sessions ? runtime__client_session_keep(t->sessions, key, sess) : 0;
}

static int configure_client(struct runtime_tls *t, SSL_CTX *ctx)
{
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(ctx, keep_session);
	return t->alpn && SSL_CTX_set_alpn_protos(ctx, t->alpn, (unsigned)t->alpn_len) ? -ENOMEM : 0;
}

/* Everything but the certificate, alike on each of the context's. */
static int configure(struct runtime_tls *t, SSL_CTX *ctx)
{
	static const unsigned char sid_ctx[] = "runtime";
	int rc;

	SSL_CTX_set_app_data(ctx, t);
	/* Not SSL_MODE_RELEASE_BUFFERS: buffers freed and made again for every
	 * record cost more than the records; idle.c frees them when idle. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_read_ahead(ctx, 1); /* take what a read brought, not a record at a time */
	if ((rc = set_protocols(t, ctx)) < 0 || (rc = set_verification(t, ctx)) < 0)
		return rc;
	if (t->side == RUNTIME_TLS_CLIENT)
		return configure_client(t, ctx);
	/* Tickets carry the state: nothing stored, but a session ID is still
	 * sent (with none, a TLS 1.2 client - OpenSSL's, curl's - keeps no
	 * session to resume with). */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER | SSL_SESS_CACHE_NO_INTERNAL);
	SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof(sid_ctx) - 1);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, t); /* runtime_tls_serve may offer some */
	SSL_CTX_set_client_hello_cb(ctx, note_name, NULL);
	if (!t->keep_ssl && t->client_certs == RUNTIME_TLS_CLIENT_CERT_NONE)
		SSL_CTX_set_keylog_callback(ctx, runtime__tls13_keylog); /* tls13.c takes over */
	SSL_CTX_set_tlsext_servername_callback(ctx, pick_cert);
	SSL_CTX_set_tlsext_servername_arg(ctx, t);
	if (!t->tickets) {
		SSL_CTX_set_num_tickets(ctx, 0); /* TLS 1.3 would send some, of no use */
	} else {
		SSL_CTX_set_num_tickets(ctx, 1);
		SSL_CTX_set_timeout(ctx, (long)(2 * t->ticket_rotation_ns / SEC));
		SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, runtime__tickets_cb);
		SSL_CTX_set_session_ticket_cb(ctx, NULL, runtime__ticket_check, NULL);
	}
	return 0;
}

SSL_CTX *runtime__tls_new_ctx(struct runtime_tls *t, int *rc)
{
	SSL_CTX *ctx = SSL_CTX_new(t->side == RUNTIME_TLS_CLIENT ? TLS_client_method()
	                                                         : TLS_server_method());
	if (!ctx) {
		*rc = -ENOMEM;
		return NULL;
	}
	if ((*rc = configure(t, ctx)) < 0) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static int check_config(const struct runtime_tls_config *cfg)
{
	if (cfg->side != RUNTIME_TLS_SERVER && cfg->side != RUNTIME_TLS_CLIENT)
		return -EINVAL;
	if (cfg->client_certs < RUNTIME_TLS_CLIENT_CERT_NONE ||
	    cfg->client_certs > RUNTIME_TLS_CLIENT_CERT_REQUIRED)
		return -EINVAL;
	return 0;
}

/* The config's copies and derived settings into t: 0 or -errno. */
static int take_config(struct runtime_tls *t, const struct runtime_tls_config *cfg)
{
	t->side = cfg->side;
	t->verify = true;
	t->client_certs = cfg->client_certs;
	t->tls13_only = cfg->tls13_only != 0;
	t->keep_ssl = cfg->keep_ssl != 0;
	t->handshake_timeout_ns = cfg->handshake_timeout_ns;
	t->ticket_rotation_ns = cfg->ticket_rotation_ns;
	if ((cfg->ciphers && !(t->ciphers = strdup(cfg->ciphers))) ||
	    (cfg->ca_file && !(t->ca_file = strdup(cfg->ca_file))))
		return -ENOMEM;
	if (cfg->alpn) {
		int rc = alpn_wire(cfg->alpn, &t->alpn, &t->alpn_len);
		if (rc < 0) {
			runtime__tls_config_error(rc == -EINVAL ? "the ALPN list does not parse" : NULL);
			return rc;
		}
	}
	if (t->side == RUNTIME_TLS_SERVER && t->ticket_rotation_ns &&
	    !(t->tickets = runtime__tickets_new(t->ticket_rotation_ns)))
		return -ENOMEM;
	if (t->side == RUNTIME_TLS_CLIENT && !(t->sessions = runtime__client_sessions_new()))
		return -ENOMEM;
	return 0;
}

int runtime_tls_create(struct runtime_tls **out, const struct runtime_tls_config *cfg)
{
	struct runtime_tls_config defaults;
	int rc;

	runtime__tls_config_error_clear();
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!cfg) {
		runtime_tls_config_init(&defaults);
		cfg = &defaults;
	}
	if ((rc = check_config(cfg)) < 0)
		return rc;
	struct runtime_tls *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	atomic_init(&t->refs, 1);
	if ((rc = take_config(t, cfg)) < 0 || !(t->ctx = runtime__tls_new_ctx(t, &rc))) {
		runtime__tls_unref(t);
		return rc;
	}
	*out = t;
	return 0;
}

void runtime__tls_unref(struct runtime_tls *t)
{
	if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	for (unsigned i = 1; i < t->ncerts; i++) /* certs[0].ctx is t->ctx */
		SSL_CTX_free(t->certs[i].ctx);
	SSL_CTX_free(t->ctx);
	runtime__tickets_free(t->tickets);
	runtime__client_sessions_free(t->sessions);
	free(t->certs);
	free(t->ciphers);
	free(t->ca_file);
	free(t->alpn);
	free(t);
}

int runtime_tls_destroy(struct runtime_tls *t)
{
	runtime__tls_unref(t);
	return 0;
}

int runtime_tls_insecure_skip_verify(struct runtime_tls *t)
{
	if (!t || t->side != RUNTIME_TLS_CLIENT)
		return -EINVAL;
	t->verify = false;
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_NONE, NULL); /* a client's only one */
	return 0;
}

/* runtime_serve's accept-time layer: the handshake, with the server's
 * ALPN list if it has one (encoded again each time: a few bytes against
 * a handshake), or its failure told. */
static int serve_layer(struct runtime_conn *conn, void *arg)
{
	struct runtime_tls_serve *ts = arg;
	unsigned char wire[ALPN_WIRE_MAX];
	ssize_t n = ts->alpn ? runtime__tls_alpn_encode(ts->alpn, wire, sizeof(wire)) : 0;
	int rc = runtime__tls_accept(conn, ts->tls, n > 0 ? wire : NULL, n > 0 ? (size_t)n : 0);

	if (rc < 0 && ts->on_error)
		ts->on_error(conn, rc, ts->arg);
	return rc;
}

int runtime_tls_serve(struct runtime_serve_config *cfg, struct runtime_tls_serve *ts)
{
	unsigned char wire[ALPN_WIRE_MAX];

	if (!cfg || !ts || !ts->tls || ts->tls->side != RUNTIME_TLS_SERVER || !ts->tls->ncerts ||
	    (ts->alpn && runtime__tls_alpn_encode(ts->alpn, wire, sizeof(wire)) < 0))
		return -EINVAL;
	cfg->layer = serve_layer;
	cfg->layer_arg = ts;
	return 0;
}

struct runtime_tls_serve *runtime_tls_serve_of(const struct runtime_serve_config *cfg)
{
	return cfg && cfg->layer == serve_layer ? cfg->layer_arg : NULL;
}

void *runtime_tls_ssl_ctx(struct runtime_tls *t)
{
	return t ? t->ctx : NULL;
}
