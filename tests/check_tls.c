/* SPDX-License-Identifier: MIT */
/*
 * check_tls.c - TLS on connections, the runtime on both ends (a server
 * fiber and a client fiber over a loopback pair), certificates made as
 * the tests run (tlsutil.h): handshakes on TLS 1.2 and 1.3 with ALPN and
 * SNI; reading, writing, the buffered reader and copy over TLS, a reader
 * and a writer fiber sharing one session; what a client refuses (an
 * unknown CA, a wrong name, an expired certificate) and what a server
 * refuses (no shared protocol, no client certificate); resumption and
 * ticket rotation; close_notify and truncation; bad input to the API.
 * Hostile clients (garbage, stalls, cut records, renegotiation, old
 * protocols) are in check_tls_hostile.c.
 */
#include "testutil.h"
#include "tlsutil.h"

#include <openssl/ssl.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The certificates every test shares: a CA, a leaf for "a.test" and
 * 127.0.0.1, one for "b.test", one expired, one from an unknown CA. */
static struct pem ca, other_ca, leaf_a, leaf_b, expired, stranger, client_leaf;
static char ca_path[512];
static char tmpdir[] = "/tmp/check_tls.XXXXXX";

static void make_certs(void)
{
	ca = tls_make_cert(NULL, "Test CA", NULL, -3600, 86400);
	other_ca = tls_make_cert(NULL, "Other CA", NULL, -3600, 86400);
	leaf_a = tls_make_cert(&ca, "a.test", "DNS:a.test,IP:127.0.0.1", -3600, 86400);
	leaf_b = tls_make_cert(&ca, "b.test", "DNS:b.test,DNS:*.b.test", -3600, 86400);
	expired = tls_make_cert(&ca, "a.test", "DNS:a.test", -7200, -3600);
	stranger = tls_make_cert(&other_ca, "a.test", "DNS:a.test", -3600, 86400);
	client_leaf = tls_make_cert(&ca, "client", "DNS:client", -3600, 86400);
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	snprintf(ca_path, sizeof(ca_path), "%s", tls_write_file(tmpdir, "ca.pem", ca.cert));
}

static void drop_certs(void)
{
	struct pem *all[] = { &ca, &other_ca, &leaf_a, &leaf_b, &expired, &stranger, &client_leaf };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		tls_free_cert(all[i]);
	unlink(ca_path);
	rmdir(tmpdir);
}

static struct runtime_tls *server_ctx(const struct pem *leaf, const char *alpn, int tls13_only)
{
	struct runtime_tls_config cfg;
	struct runtime_tls *t;

	runtime_tls_config_init(&cfg);
	cfg.alpn = alpn;
	cfg.tls13_only = tls13_only;
	ck_assert_int_eq(runtime_tls_create(&t, &cfg), 0);
	ck_assert_int_eq(runtime_tls_add_cert(t, leaf->cert, leaf->key, RUNTIME_TLS_PEM), 0);
	return t;
}

static struct runtime_tls *client_ctx(const char *alpn, const char *ciphers, int tls13_only)
{
	struct runtime_tls_config cfg;
	struct runtime_tls *t;

	runtime_tls_config_init(&cfg);
	cfg.side = RUNTIME_TLS_CLIENT;
	cfg.ca_file = ca_path;
	cfg.alpn = alpn;
	cfg.ciphers = ciphers;
	cfg.tls13_only = tls13_only;
	ck_assert_int_eq(runtime_tls_create(&t, &cfg), 0);
	return t;
}

/* --------------------------------------------------------- one exchange */

/* What a side agreed on, copied (the info's strings go with the conn). */
struct seen {
	char version[16], cipher[64], alpn[32], server_name[64];
	int resumed, peer_cert;
};

static void see(struct runtime_conn *c, struct seen *s)
{
	struct runtime_tls_info i;

	ck_assert_int_eq(runtime_conn_tls_info(c, &i), 0);
	snprintf(s->version, sizeof(s->version), "%s", i.version);
	snprintf(s->cipher, sizeof(s->cipher), "%s", i.cipher);
	snprintf(s->alpn, sizeof(s->alpn), "%s", i.alpn ? i.alpn : "(none)");
	snprintf(s->server_name, sizeof(s->server_name), "%s",
	         i.server_name ? i.server_name : "(none)");
	s->resumed = i.resumed;
	s->peer_cert = i.peer_cert;
}

/* Both ends of one TLS connection, and what each saw. */
struct duo {
	struct runtime_tls *server, *client;
	const char *host;            /* the client's name for the server */
	int accept_rc, connect_rc;
	struct seen sinfo, cinfo;
	char serr[160], cerr[160];
	struct runtime_conn *sconn, *cconn;
	int fd[2];
	void (*server_then)(struct duo *d); /* after a good handshake */
	void (*client_then)(struct duo *d);
};

static void *server_side(void *arg)
{
	struct duo *d = arg;

	ck_assert_int_eq(runtime_conn_open(&d->sconn, d->fd[1], 0), 0);
	d->accept_rc = runtime_conn_tls_accept(d->sconn, d->server);
	runtime_conn_tls_error(d->sconn, d->serr, sizeof(d->serr));
	if (d->accept_rc == 0) {
		see(d->sconn, &d->sinfo);
		if (d->server_then)
			d->server_then(d);
	}
	ck_assert_int_eq(runtime_conn_close(d->sconn), 0);
	return NULL;
}

static void *client_side(void *arg)
{
	struct duo *d = arg;

	ck_assert_int_eq(runtime_conn_open(&d->cconn, d->fd[0], 0), 0);
	d->connect_rc = runtime_conn_tls_connect(d->cconn, d->client, d->host);
	runtime_conn_tls_error(d->cconn, d->cerr, sizeof(d->cerr));
	if (d->connect_rc == 0) {
		see(d->cconn, &d->cinfo);
		if (d->client_then)
			d->client_then(d);
	}
	ck_assert_int_eq(runtime_conn_close(d->cconn), 0);
	return NULL;
}

static void duo_main(void *arg)
{
	struct duo *d = arg;

	tcp_pair(d->fd);
	struct runtime_fiber *s = start(server_side, d), *c = start(client_side, d);
	join(c);
	join(s);
}

static void duo_run(struct duo *d)
{
	ck_assert_int_eq(run_fiber(NULL, duo_main, d), 0);
}

/* -------------------------------------------------------------- hello */

static void say_hello(struct duo *d)
{
	char buf[16];
	ck_assert_int_eq(runtime_conn_write(d->cconn, "hello", 5, NULL), 5);
	ck_assert_int_eq(runtime_conn_read(d->cconn, buf, sizeof(buf)), 5);
	ck_assert_int_eq(memcmp(buf, "HELLO", 5), 0);
	ck_assert_int_eq(runtime_conn_close_write(d->cconn), 0); /* close_notify */
	ck_assert_int_eq(runtime_conn_read(d->cconn, buf, sizeof(buf)), 0); /* the server's */
}

static void shout_back(struct duo *d)
{
	char buf[16];
	ssize_t n = runtime_conn_read(d->sconn, buf, sizeof(buf));
	ck_assert_int_eq(n, 5);
	for (int i = 0; i < 5; i++)
		buf[i] = (char)(buf[i] - 32);
	ck_assert_int_eq(runtime_conn_write(d->sconn, buf, 5, NULL), 5);
	ck_assert_int_eq(runtime_conn_read(d->sconn, buf, sizeof(buf)), 0); /* clean end */
	ck_assert_int_eq(runtime_conn_close_write(d->sconn), 0);
}

START_TEST(test_tls_hello_on_1_3_and_1_2)
{
	for (int v = 0; v < 2; v++) {
		struct duo d = { .host = "a.test", .server_then = shout_back, .client_then = say_hello };
		d.server = server_ctx(&leaf_a, "http/1.1", 0);
		/* The client names a TLS 1.2 suite only, or none (1.3). */
		d.client = client_ctx("h2,http/1.1", v ? "ECDHE-ECDSA-AES128-GCM-SHA256" : NULL, 0);
		if (v) /* no TLS 1.3: the 1.2 suite list alone cannot keep it out */
			SSL_CTX_set_max_proto_version(runtime_tls_ssl_ctx(d.client), TLS1_2_VERSION);
		duo_run(&d);
		ck_assert_int_eq(d.accept_rc, 0);
		ck_assert_int_eq(d.connect_rc, 0);
		ck_assert_str_eq(d.cinfo.version, v ? "TLSv1.2" : "TLSv1.3");
		ck_assert_str_eq(d.sinfo.version, d.cinfo.version);
		ck_assert_str_eq(d.cinfo.alpn, "http/1.1");
		ck_assert_str_eq(d.sinfo.alpn, "http/1.1");
		ck_assert_str_eq(d.sinfo.server_name, "a.test"); /* SNI */
		ck_assert_str_eq(d.cinfo.cipher, v ? "ECDHE-ECDSA-AES128-GCM-SHA256"
		                                   : "TLS_AES_128_GCM_SHA256");
		ck_assert_int_eq(d.cinfo.peer_cert, 1);
		ck_assert_int_eq(d.sinfo.peer_cert, 0);
		runtime_tls_destroy(d.server);
		runtime_tls_destroy(d.client);
	}
}
END_TEST

static Suite *tls_suite(void)
{
	Suite *s = suite_create("tls");
	TCase *tc = tcase_create("tls");

	tcase_add_unchecked_fixture(tc, make_certs, drop_certs);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_tls_hello_on_1_3_and_1_2);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(tls_suite)
