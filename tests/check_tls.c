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
 * And hostile clients, each while a good one is served: garbage, a
 * ClientHello cut short or stalled, oversized and cut records, old
 * protocols and weak suites only, a renegotiation.
 */
#include "testutil.h"
#include "tlsutil.h"
#include "record.h"
#include <runtime_tls.h>

#include <openssl/ssl.h>

#include <ctype.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The certificates every test shares: a CA, a leaf for "a.test" and
 * 127.0.0.1, one for "b.test", one expired, one from an unknown CA. */
static struct pem ca, other_ca, leaf_a, leaf_b, expired, stranger, client_leaf;
static char ca_path[512];
static char tmpdir[64];

static void make_certs(void)
{
	ca = tls_make_cert(NULL, "Test CA", NULL, -3600, 86400);
	other_ca = tls_make_cert(NULL, "Other CA", NULL, -3600, 86400);
	leaf_a = tls_make_cert(&ca, "a.test", "DNS:a.test,IP:127.0.0.1", -3600, 86400);
	leaf_b = tls_make_cert(&ca, "b.test", "DNS:b.test,DNS:*.b.test", -3600, 86400);
	expired = tls_make_cert(&ca, "a.test", "DNS:a.test", -7200, -3600);
	stranger = tls_make_cert(&other_ca, "a.test", "DNS:a.test", -3600, 86400);
	client_leaf = tls_make_cert(&ca, "client", "DNS:client", -3600, 86400);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/check_tls.XXXXXX"); /* each test case's */
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
	int listener;                /* > 0: connect through it */
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

/* A connected pair through listener (a client session is kept by the
 * server's host and port: resumption needs the same port each time). */
static void pair_on(int listener, int fd[2])
{
	fd[0] = runtime_tcp_connect("127.0.0.1", bound_port(listener));
	ck_assert_int_ge(fd[0], 0);
	fd[1] = runtime_accept(listener, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fd[1], 0);
}

static void duo_main(void *arg)
{
	struct duo *d = arg;

	if (d->listener > 0)
		pair_on(d->listener, d->fd);
	else
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

/* --------------------------------------------- what a client refuses */

static void refused_case(const struct pem *leaf, const char *host, int want_client,
                         int want_server, const char *words)
{
	struct duo d = { .host = host };

	d.server = server_ctx(leaf, NULL, 0);
	d.client = client_ctx(NULL, NULL, 0);
	duo_run(&d);
	ck_assert_msg(d.connect_rc == want_client, "%s: client %d (%s)", host, d.connect_rc, d.cerr);
	ck_assert_msg(strstr(d.cerr, words), "%s: client says '%s'", host, d.cerr);
	ck_assert_msg(d.accept_rc == want_server, "%s: server %d (%s)", host, d.accept_rc, d.serr);
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}

START_TEST(test_tls_client_refuses_bad_certificates)
{
	refused_case(&stranger, "a.test", -EKEYREJECTED, -EKEYREJECTED,
	             "unable to get local issuer certificate");
	refused_case(&leaf_a, "c.test", -EKEYREJECTED, -EKEYREJECTED, "hostname mismatch");
	refused_case(&leaf_a, "127.0.0.2", -EKEYREJECTED, -EKEYREJECTED, "IP address mismatch");
	refused_case(&expired, "a.test", -EKEYEXPIRED, -EKEYEXPIRED, "certificate has expired");
}
END_TEST

/* ----------------------------------------------------- SNI and ALPN */

/* The common name of the certificate the client was shown. */
static char shown_cn[64];

static void note_cert(struct duo *d)
{
	X509 *x = SSL_get0_peer_certificate(runtime_conn_tls_ssl(d->cconn));
	ck_assert_ptr_nonnull(x);
	X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, shown_cn,
	                          sizeof(shown_cn));
}

static void sni_case(struct runtime_tls *server, const char *host, const char *want_cn)
{
	struct duo d = { .host = host, .server = server, .client_then = note_cert };

	d.client = client_ctx(NULL, NULL, 0);
	shown_cn[0] = '\0';
	duo_run(&d);
	ck_assert_msg(d.connect_rc == 0, "%s: %d %s", host, d.connect_rc, d.cerr);
	ck_assert_str_eq(shown_cn, want_cn);
	runtime_tls_destroy(d.client);
}

START_TEST(test_tls_sni_picks_the_certificate)
{
	struct runtime_tls *server = server_ctx(&leaf_a, NULL, 0);

	ck_assert_int_eq(runtime_tls_add_cert(server, leaf_b.cert, leaf_b.key, RUNTIME_TLS_PEM), 0);
	sni_case(server, "b.test", "b.test");
	sni_case(server, "x.b.test", "b.test"); /* its wildcard */
	sni_case(server, "a.test", "a.test");
	sni_case(server, "127.0.0.1", "a.test"); /* no SNI: the first */
	runtime_tls_destroy(server);
}
END_TEST

static void no_common_case(struct runtime_tls *server, struct runtime_tls *client,
                           const char *words)
{
	struct duo d = { .host = "a.test", .server = server, .client = client };

	duo_run(&d);
	ck_assert_msg(d.accept_rc == -ENOPROTOOPT, "server %d (%s)", d.accept_rc, d.serr);
	ck_assert_msg(d.connect_rc == -ENOPROTOOPT, "client %d (%s)", d.connect_rc, d.cerr);
	ck_assert_msg(strstr(d.serr, words), "server says '%s'", d.serr);
	runtime_tls_destroy(server);
	runtime_tls_destroy(client);
}

START_TEST(test_tls_nothing_in_common)
{
	no_common_case(server_ctx(&leaf_a, "http/1.1", 0), client_ctx("h2", NULL, 0),
	               "no application protocol");
	struct runtime_tls *old = client_ctx(NULL, NULL, 0);
	SSL_CTX_set_max_proto_version(runtime_tls_ssl_ctx(old), TLS1_2_VERSION);
	no_common_case(server_ctx(&leaf_a, NULL, 1), old, "unsupported protocol");

	/* A client without ALPN is served by a server with it: none agreed. */
	struct duo d = { .host = "a.test" };
	d.server = server_ctx(&leaf_a, "http/1.1", 0);
	d.client = client_ctx(NULL, NULL, 0);
	duo_run(&d);
	ck_assert_int_eq(d.connect_rc, 0);
	ck_assert_str_eq(d.sinfo.alpn, "(none)");
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}
END_TEST

/* ------------------------------------------------------- resumption */

/* One connection of client to server; did it resume (both sides agree)?
 * The same server port each time (a plain listener of the test's). */
static int same_port = -1;

static int resumed(struct runtime_tls *server, struct runtime_tls *client)
{
	struct duo d = { .host = "a.test", .server = server, .client = client,
	                 .server_then = shout_back, .client_then = say_hello };

	if (same_port < 0) {
		same_port = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in sa = { .sin_family = AF_INET,
		                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		ck_assert_int_eq(bind(same_port, (struct sockaddr *)&sa, sizeof(sa)), 0);
		ck_assert_int_eq(listen(same_port, 8), 0);
	}
	d.listener = same_port;
	duo_run(&d);
	ck_assert_msg(d.connect_rc == 0 && d.accept_rc == 0, "%s / %s", d.cerr, d.serr);
	ck_assert_int_eq(d.sinfo.resumed, d.cinfo.resumed);
	ck_assert_int_eq(d.sinfo.peer_cert, 0);
	return d.cinfo.resumed;
}

START_TEST(test_tls_resumption_and_ticket_rotation)
{
	for (int v = 0; v < 2; v++) { /* 1.3, then 1.2 */
		struct runtime_tls_config cfg;
		struct runtime_tls *server, *client = client_ctx(NULL, NULL, 0);

		if (v)
			SSL_CTX_set_max_proto_version(runtime_tls_ssl_ctx(client), TLS1_2_VERSION);
		runtime_tls_config_init(&cfg);
		cfg.ticket_rotation_ns = 2000 * MS;
		ck_assert_int_eq(runtime_tls_create(&server, &cfg), 0);
		ck_assert_int_eq(runtime_tls_add_cert(server, leaf_a.cert, leaf_a.key,
		                                      RUNTIME_TLS_PEM), 0);
		ck_assert_int_eq(resumed(server, client), 0); /* the first: full */
		ck_assert_msg(resumed(server, client) == 1, "TLS 1.%d: not resumed", v ? 2 : 3);
		ck_assert_int_eq(resumed(server, client), 1); /* a new ticket each time */
		/* Past two rotations, the key that made the last ticket is gone. */
		usleep(4200 * 1000);
		ck_assert_int_eq(resumed(server, client), 0);
		ck_assert_int_eq(resumed(server, client), 1);
		/* runtime_tls_stats: 5 handshakes, 3 resumed, on either side */
		struct runtime_tls_stats ss, cs;
		runtime_tls_stats(server, &ss);
		runtime_tls_stats(client, &cs);
		ck_assert_uint_eq(ss.handshakes, 5);
		ck_assert_uint_eq(ss.resumed, 3);
		ck_assert_uint_eq(ss.failed, 0);
		ck_assert_uint_eq(cs.handshakes, 5);
		ck_assert_uint_eq(cs.resumed, 3);
		runtime_tls_destroy(server);
		runtime_tls_destroy(client);
	}
	struct runtime_tls_stats none = { .failed = 7 };
	runtime_tls_stats(NULL, &none);
	ck_assert_uint_eq(none.failed, 0);
	runtime_tls_stats(NULL, NULL);
}
END_TEST

/* A ticket is kept for its server's host and port: another port's server
 * (another service) is not offered it, and it is not used up there. */
static int resumed_elsewhere(struct runtime_tls *server, struct runtime_tls *client)
{
	struct duo d = { .host = "a.test", .server = server, .client = client,
	                 .server_then = shout_back, .client_then = say_hello };

	duo_run(&d); /* a pair of its own: a new port */
	ck_assert_int_eq(d.connect_rc, 0);
	return d.cinfo.resumed;
}

START_TEST(test_tls_tickets_kept_by_port)
{
	struct runtime_tls *server = server_ctx(&leaf_a, NULL, 0), *client = client_ctx(NULL, NULL, 0);

	ck_assert_int_eq(resumed(server, client), 0);
	ck_assert_int_eq(resumed_elsewhere(server, client), 0);
	ck_assert_int_eq(resumed(server, client), 1);
	runtime_tls_destroy(server);
	runtime_tls_destroy(client);
}
END_TEST

/* A session of one name does not resume under another (RFC 6066, 3): a
 * client that resumes checks no certificate. OpenSSL's own client on a
 * thread offers a.test's session with SNI b.test. */
struct other_name {
	uint16_t port;
	struct runtime_server *srv;
	int reused[3];
	char cn[3][32];
};

static SSL *name_client(struct other_name *o, SSL_CTX *ctx, const char *sni, SSL_SESSION *sess,
                        int *fd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(o->port),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	SSL *ssl = SSL_new(ctx);

	*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(*fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	SSL_set_fd(ssl, *fd);
	SSL_set_tlsext_host_name(ssl, sni);
	if (sess)
		SSL_set_session(ssl, sess);
	ck_assert_int_eq(SSL_connect(ssl), 1);
	return ssl;
}

static void *names_thread(void *arg)
{
	struct other_name *o = arg;
	static const char *sni[3] = { "a.test", "b.test", "a.test" };
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_SESSION *sess = NULL;

	SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION); /* the session in the handshake */
	for (int i = 0; i < 3; i++) {
		int fd;
		SSL *ssl = name_client(o, ctx, sni[i], sess, &fd);
		o->reused[i] = SSL_session_reused(ssl);
		X509_NAME_get_text_by_NID(X509_get_subject_name(SSL_get0_peer_certificate(ssl)),
		                          NID_commonName, o->cn[i], sizeof(o->cn[i]));
		if (i == 0)
			sess = SSL_get1_session(ssl); /* a.test's */
		SSL_shutdown(ssl);
		SSL_free(ssl);
		close(fd);
	}
	SSL_SESSION_free(sess);
	SSL_CTX_free(ctx);
	runtime_server_stop(o->srv);
	return NULL;
}

static void quiet_handler(struct runtime_conn *c, void *arg)
{
	char b[8];
	(void)arg;
	runtime_conn_read(c, b, sizeof(b));
}

START_TEST(test_tls_no_resumption_under_another_name)
{
	struct runtime_serve_config sc;
	struct runtime_tls_serve ts = { .tls = server_ctx(&leaf_a, NULL, 0) };
	struct other_name o = { 0 };
	struct runtime *rt;
	pthread_t th;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	runtime_serve_config_init(&sc);
	sc.host = "127.0.0.1";
	ck_assert_int_eq(runtime_tls_add_cert(ts.tls, leaf_b.cert, leaf_b.key, RUNTIME_TLS_PEM), 0);
	ck_assert_int_eq(runtime_tls_serve(&sc, &ts), 0);
	sc.handler = quiet_handler;
	ck_assert_int_eq(runtime_serve(rt, &sc, &o.srv), 0);
	o.port = runtime_server_port(o.srv);
	ck_assert_int_eq(pthread_create(&th, NULL, names_thread, &o), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(o.reused[1], 0); /* b.test: a full handshake, b's certificate */
	ck_assert_str_eq(o.cn[1], "b.test");
	ck_assert_int_eq(o.reused[2], 1); /* a.test again: resumed */
	runtime_server_destroy(o.srv);
	runtime_destroy(rt);
	runtime_tls_destroy(ts.tls);
}
END_TEST

START_TEST(test_tls_no_tickets_no_resumption)
{
	struct runtime_tls_config cfg;
	struct runtime_tls *server, *client = client_ctx(NULL, NULL, 0);

	runtime_tls_config_init(&cfg);
	cfg.ticket_rotation_ns = 0;
	ck_assert_int_eq(runtime_tls_create(&server, &cfg), 0);
	ck_assert_int_eq(runtime_tls_add_cert(server, leaf_a.cert, leaf_a.key, RUNTIME_TLS_PEM), 0);
	ck_assert_int_eq(resumed(server, client), 0);
	ck_assert_int_eq(resumed(server, client), 0);
	runtime_tls_destroy(server);
	runtime_tls_destroy(client);
}
END_TEST

/* ------------------------------------------------ client certificates */

static struct runtime_tls *asking_server(int mode)
{
	struct runtime_tls_config cfg;
	struct runtime_tls *t;

	runtime_tls_config_init(&cfg);
	cfg.client_certs = mode;
	cfg.ca_file = ca_path;
	ck_assert_int_eq(runtime_tls_create(&t, &cfg), 0);
	ck_assert_int_eq(runtime_tls_add_cert(t, leaf_a.cert, leaf_a.key, RUNTIME_TLS_PEM), 0);
	return t;
}

/* In TLS 1.3 the client's handshake ends before the server has checked
 * its certificate: the refusal reaches it at its first read. */
static int client_read_rc;

static void read_verdict(struct duo *d)
{
	char b[4];
	client_read_rc = (int)runtime_conn_read(d->cconn, b, sizeof(b));
	runtime_conn_tls_error(d->cconn, d->cerr, sizeof(d->cerr));
}

static void client_cert_case(int mode, const struct pem *mine, int want_server, int want_read,
                             int want_peer_cert)
{
	struct duo d = { .host = "a.test", .client_then = read_verdict };

	d.server = asking_server(mode);
	d.client = client_ctx(NULL, NULL, 0);
	if (mine)
		ck_assert_int_eq(runtime_tls_add_cert(d.client, mine->cert, mine->key,
		                                      RUNTIME_TLS_PEM), 0);
	client_read_rc = 1;
	duo_run(&d);
	ck_assert_msg(d.accept_rc == want_server, "server %d (%s)", d.accept_rc, d.serr);
	ck_assert_int_eq(d.connect_rc, 0);
	ck_assert_msg(client_read_rc == want_read, "client read %d (%s)", client_read_rc, d.cerr);
	if (want_server == 0)
		ck_assert_int_eq(d.sinfo.peer_cert, want_peer_cert);
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}

START_TEST(test_tls_client_certificates)
{
	/* Served: the server closes (close_notify) without a word: 0. */
	client_cert_case(RUNTIME_TLS_CLIENT_CERT_REQUIRED, &client_leaf, 0, 0, 1);
	client_cert_case(RUNTIME_TLS_CLIENT_CERT_OPTIONAL, NULL, 0, 0, 0);
	client_cert_case(RUNTIME_TLS_CLIENT_CERT_OPTIONAL, &client_leaf, 0, 0, 1);
	client_cert_case(RUNTIME_TLS_CLIENT_CERT_REQUIRED, NULL, -EKEYREJECTED, -EKEYREJECTED, 0);
	client_cert_case(RUNTIME_TLS_CLIENT_CERT_REQUIRED, &stranger, -EKEYREJECTED, -EKEYREJECTED, 0);
}
END_TEST

/* ------------------------------------------ bulk, both ways at once */

#define BULK (1u << 20)

/* The server echoes through runtime_copy over its TLS transport. */
static void echo_back(struct duo *d)
{
	const struct runtime_transport *t = runtime_conn_transport(d->sconn);
	size_t done = 0;
	ck_assert_int_eq(runtime_copy(t, t, 0, 0, &done), BULK);
	ck_assert_uint_eq(done, BULK);
}

static void *bulk_writer(void *arg)
{
	struct duo *d = arg;
	char *buf = malloc(BULK);

	for (size_t i = 0; i < BULK; i++)
		buf[i] = (char)(i * 7 + i / 4093);
	ck_assert_int_eq(runtime_conn_write(d->cconn, buf, BULK, NULL), BULK);
	ck_assert_int_eq(runtime_conn_close_write(d->cconn), 0);
	free(buf);
	return NULL;
}

/* A writer fiber and this one, the reader, share the client's session:
 * 1 MiB goes out while the echo comes back. */
static void send_and_check_bulk(struct duo *d)
{
	struct runtime_fiber *w = start(bulk_writer, d);
	char *got = malloc(BULK + 1);
	size_t n = 0;
	ssize_t r;

	while ((r = runtime_conn_read(d->cconn, got + n, BULK + 1 - n)) > 0)
		n += (size_t)r;
	ck_assert_int_eq(r, 0);
	ck_assert_uint_eq(n, BULK);
	for (size_t i = 0; i < BULK; i++)
		ck_assert_int_eq(got[i], (char)(i * 7 + i / 4093));
	join(w);
	free(got);
}

START_TEST(test_tls_bulk_both_ways_with_copy)
{
	struct duo d = { .host = "a.test", .server_then = echo_back,
	                 .client_then = send_and_check_bulk };

	d.server = server_ctx(&leaf_a, NULL, 0);
	d.client = client_ctx(NULL, NULL, 0);
	duo_run(&d);
	ck_assert_int_eq(d.connect_rc, 0);
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}
END_TEST

/* ----------------------------------------- the buffered reader on TLS */

static void lines_out(struct duo *d)
{
	struct iovec iov[3] = { { "first line\r\nsec", 15 }, { "ond line\n", 9 }, { "tail", 4 } };
	const struct runtime_transport *t = runtime_conn_transport(d->sconn);
	ck_assert_int_eq(t->ops->writev(t->ctx, iov, 3), 28); /* one record of three */
	ck_assert_int_eq(runtime_conn_close_write(d->sconn), 0);
}

static void lines_in(struct duo *d)
{
	struct runtime_reader *r;
	const char *line;

	ck_assert_int_eq(runtime_reader_create(&r, runtime_conn_transport(d->cconn), 64), 0);
	ck_assert_int_eq(runtime_reader_read_line(r, 64, &line), 12);
	ck_assert_int_eq(memcmp(line, "first line\r\n", 12), 0);
	ck_assert_int_eq(runtime_reader_read_line(r, 64, &line), 12);
	ck_assert_int_eq(memcmp(line, "second line\n", 12), 0);
	ck_assert_int_eq(runtime_reader_read_line(r, 64, &line), -ENODATA); /* "tail", then EOF */
	runtime_reader_destroy(r);
}

START_TEST(test_tls_reader_reads_lines)
{
	struct duo d = { .host = "a.test", .server_then = lines_out, .client_then = lines_in };

	d.server = server_ctx(&leaf_a, NULL, 0);
	d.client = client_ctx(NULL, NULL, 0);
	duo_run(&d);
	ck_assert_int_eq(d.connect_rc, 0);
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}
END_TEST

/* -------------------------------------- close_notify, or a cut stream */

static void cut_short(struct duo *d)
{
	ck_assert_int_eq(runtime_conn_write(d->sconn, "abc", 3, NULL), 3);
	/* The socket's end, without close_notify: a truncation attack. */
	ck_assert_int_eq(runtime_sock_shutdown(runtime_conn_fd(d->sconn), SHUT_WR), 0);
	char b[4];
	ck_assert_int_eq(runtime_conn_read(d->sconn, b, sizeof(b)), -ECONNABORTED);
}

static int cut_rc;

static void see_cut(struct duo *d)
{
	char b[8];
	ck_assert_int_eq(runtime_conn_read(d->cconn, b, sizeof(b)), 3);
	cut_rc = (int)runtime_conn_read(d->cconn, b, sizeof(b));
	runtime_conn_tls_error(d->cconn, d->cerr, sizeof(d->cerr));
	ck_assert_int_eq(runtime_sock_shutdown(runtime_conn_fd(d->cconn), SHUT_WR), 0);
}

START_TEST(test_tls_truncation_is_no_clean_end)
{
	struct duo d = { .host = "a.test", .server_then = cut_short, .client_then = see_cut };

	d.server = server_ctx(&leaf_a, NULL, 0);
	d.client = client_ctx(NULL, NULL, 0);
	duo_run(&d);
	ck_assert_int_eq(cut_rc, -ECONNABORTED);
	ck_assert_msg(strstr(d.cerr, "close_notify"), "'%s'", d.cerr);
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}
END_TEST

/* ---------------------------------- deadlines, idle timeout, drain */

static int waits_rc[3];

/* A read deadline ends a TLS read as it ends a plain one, and the session
 * goes on; then the idle timeout; then a drain ends an idle read. */
static void waits(struct duo *d)
{
	char b[8];

	runtime_conn_set_read_deadline(d->sconn, runtime_now() + 100 * MS);
	waits_rc[0] = (int)runtime_conn_read(d->sconn, b, sizeof(b));
	runtime_conn_set_read_deadline(d->sconn, 0);
	ck_assert_int_eq(runtime_conn_read(d->sconn, b, sizeof(b)), 2); /* "go" */
	runtime_conn_set_idle_timeout(d->sconn, 100 * MS);
	waits_rc[1] = (int)runtime_conn_read(d->sconn, b, sizeof(b));
	runtime_conn_set_idle_timeout(d->sconn, 0);
	runtime_conn_set_idle(d->sconn, 1);
	ck_assert_int_eq(runtime_drain(runtime_current(), 60000 * MS), 0);
	waits_rc[2] = (int)runtime_conn_read(d->sconn, b, sizeof(b));
	ck_assert_int_eq(runtime_conn_write(d->sconn, "bye", 3, NULL), 3); /* writes go on */
}

static void go_later(struct duo *d)
{
	char b[8];
	runtime_sleep(300 * MS);
	ck_assert_int_eq(runtime_conn_write(d->cconn, "go", 2, NULL), 2);
	ck_assert_int_eq(runtime_conn_read(d->cconn, b, sizeof(b)), 3);
}

/* A cancel ends a TLS read (and a handshake) as it ends a plain one. */
static void *tls_reader(void *arg)
{
	char b[8];
	return (void *)(intptr_t)runtime_conn_read(arg, b, sizeof(b));
}

static void cancel_read(struct duo *d)
{
	struct runtime_fiber *r = start(tls_reader, d->sconn);
	runtime_sleep(50 * MS);
	ck_assert_int_eq(runtime_fiber_cancel(r), 0);
	ck_assert_int_eq(join(r), -ECANCELED);
}

static void stay_a_while(struct duo *d)
{
	(void)d;
	runtime_sleep(300 * MS);
}

START_TEST(test_tls_cancel_ends_a_read)
{
	struct duo d = { .host = "a.test", .server_then = cancel_read, .client_then = stay_a_while };

	d.server = server_ctx(&leaf_a, NULL, 0);
	d.client = client_ctx(NULL, NULL, 0);
	duo_run(&d);
	ck_assert_int_eq(d.accept_rc, 0);
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}
END_TEST

/* runtime_conn_cancel_on_close over TLS. Two records came in one socket
 * read (corked into one segment) while the server read the first: the
 * layer holds the second, so the peer asked for more and its end (a
 * socket shutdown, no close_notify) is not its leaving - the watch ends
 * with that read. With one record, read whole, the same end cancels the
 * sleep, as over TCP. */
static int held_mode, held_sleep_rc, held_fired;
static size_t held_rest;

static void watch_with_bytes_held(struct duo *d)
{
	char b[8];
	ssize_t n;

	ck_assert_int_eq(runtime_conn_cancel_on_close(d->sconn, 1), 0);
	ck_assert_int_eq(runtime_conn_read(d->sconn, b, sizeof(b)), 2); /* waits for "ab" */
	held_sleep_rc = runtime_sleep(held_mode ? 2000 * MS : 400 * MS);
	held_fired = runtime_conn_cancel_on_close(d->sconn, 0);
	held_rest = 0;
	while ((n = runtime_conn_read(d->sconn, b, sizeof(b))) > 0)
		held_rest += (size_t)n;
}

static void send_then_shut(struct duo *d)
{
	int on = 1, off = 0;
	char b[8];

	runtime_sleep(100 * MS); /* the server reads by now */
	setsockopt(d->fd[0], IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
	ck_assert_int_eq(runtime_conn_write(d->cconn, "ab", 2, NULL), 2);
	if (!held_mode)
		ck_assert_int_eq(runtime_conn_write(d->cconn, "cd", 2, NULL), 2);
	setsockopt(d->fd[0], IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
	runtime_sleep(200 * MS); /* read by now */
	ck_assert_int_eq(shutdown(d->fd[0], SHUT_WR), 0);
	runtime_conn_set_read_deadline(d->cconn, runtime_now() + 5000 * MS);
	while (runtime_conn_read(d->cconn, b, sizeof(b)) > 0)
		;
}

START_TEST(test_tls_bytes_held_by_the_layer_are_no_leaving)
{
	for (held_mode = 0; held_mode < 2; held_mode++) {
		struct duo d = { .host = "a.test", .server_then = watch_with_bytes_held,
		                 .client_then = send_then_shut };
		d.server = server_ctx(&leaf_a, NULL, 0);
		d.client = client_ctx(NULL, NULL, 0);
		duo_run(&d);
		ck_assert_int_eq(d.accept_rc, 0);
		ck_assert_int_eq(held_sleep_rc, held_mode ? -ECANCELED : 0);
		ck_assert_int_eq(held_fired, held_mode);
		ck_assert_uint_eq(held_rest, held_mode ? 0 : 2); /* "cd" */
		runtime_tls_destroy(d.server);
		runtime_tls_destroy(d.client);
	}
}
END_TEST

START_TEST(test_tls_deadlines_idle_and_drain)
{
	struct duo d = { .host = "a.test", .server_then = waits, .client_then = go_later };

	d.server = server_ctx(&leaf_a, NULL, 0);
	d.client = client_ctx(NULL, NULL, 0);
	duo_run(&d);
	ck_assert_int_eq(waits_rc[0], -ETIMEDOUT);
	ck_assert_int_eq(waits_rc[1], -ETIMEDOUT);
	ck_assert_int_eq(waits_rc[2], -ESHUTDOWN);
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}
END_TEST

/* A write cut short by its deadline loses nothing: the next one goes on
 * where it stopped, and every byte arrives in order. */
#define STALL (4u << 20)

static void write_past_deadline(struct duo *d)
{
	char *buf = malloc(STALL);
	size_t done = 0;

	for (size_t i = 0; i < STALL; i++)
		buf[i] = (char)(i % 251);
	runtime_conn_set_write_deadline(d->sconn, runtime_now() + 200 * MS);
	ck_assert_int_eq(runtime_conn_write(d->sconn, buf, STALL, &done), -ETIMEDOUT);
	ck_assert_uint_gt(done, 0);
	ck_assert_uint_lt(done, STALL);
	runtime_conn_set_write_deadline(d->sconn, 0);
	ck_assert_int_eq(runtime_conn_write(d->sconn, buf + done, STALL - done, NULL),
	                 (ssize_t)(STALL - done));
	ck_assert_int_eq(runtime_conn_close_write(d->sconn), 0);
	free(buf);
}

static void read_late(struct duo *d)
{
	char *got = malloc(STALL + 1);
	size_t n = 0;
	ssize_t r;

	runtime_sleep(600 * MS); /* the server's first write times out meanwhile */
	while ((r = runtime_conn_read(d->cconn, got + n, STALL + 1 - n)) > 0)
		n += (size_t)r;
	ck_assert_int_eq(r, 0);
	ck_assert_uint_eq(n, STALL);
	for (size_t i = 0; i < STALL; i++)
		ck_assert_int_eq(got[i], (char)(i % 251));
	free(got);
}

START_TEST(test_tls_write_deadline_loses_nothing)
{
	struct duo d = { .host = "a.test", .server_then = write_past_deadline,
	                 .client_then = read_late };

	d.server = server_ctx(&leaf_a, NULL, 0);
	d.client = client_ctx(NULL, NULL, 0);
	duo_run(&d);
	ck_assert_int_eq(d.accept_rc, 0);
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}
END_TEST

/* runtime_conn_finish over TLS: a peer that closes without close_notify
 * (as many do) has ended all the same. */
static int finish_rc = -999;

static void finish_it(struct duo *d)
{
	ck_assert_int_eq(runtime_conn_write(d->sconn, "bye", 3, NULL), 3);
	finish_rc = runtime_conn_finish(d->sconn, 5000 * MS);
}

static void read_then_drop(struct duo *d)
{
	char b[8];
	ck_assert_int_eq(runtime_conn_read(d->cconn, b, sizeof(b)), 3);
	ck_assert_int_eq(runtime_conn_read(d->cconn, b, sizeof(b)), 0); /* its close_notify */
	runtime_sock_shutdown(runtime_conn_fd(d->cconn), SHUT_WR); /* none of ours */
}

START_TEST(test_tls_finish_takes_a_bare_close)
{
	struct duo d = { .host = "a.test", .server_then = finish_it, .client_then = read_then_drop };

	d.server = server_ctx(&leaf_a, NULL, 0);
	d.client = client_ctx(NULL, NULL, 0);
	duo_run(&d);
	ck_assert_int_eq(finish_rc, 0);
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}
END_TEST

/* ------------------------------------------------ runtime_serve on TLS */

struct served {
	uint16_t port;
	struct runtime_server *srv;
	struct runtime_tls *client;
	int good_rc;
};

static void greet(struct runtime_conn *c, void *arg)
{
	struct runtime_tls_info info;
	(void)arg;
	ck_assert_int_eq(runtime_conn_tls_info(c, &info), 0); /* handshaken already */
	runtime_conn_write(c, "hi", 2, NULL);
}

static void serve_clients(void *arg)
{
	struct served *s = arg;
	struct runtime_conn *c;
	char b[8];

	int fd = runtime_tcp_connect("127.0.0.1", s->port); /* garbage, no handshake */
	ck_assert_int_eq(runtime_write(fd, "GET / HTTP/1.1\r\n\r\n", 18), 18);
	ck_assert_int_ge(runtime_read(fd, b, sizeof(b)), 0); /* closed at once (an alert maybe) */
	runtime_close(fd);
	fd = runtime_tcp_connect("127.0.0.1", s->port);
	ck_assert_int_eq(runtime_conn_open(&c, fd, 0), 0);
	s->good_rc = runtime_conn_tls_connect(c, s->client, "a.test");
	ck_assert_int_eq(runtime_conn_read(c, b, sizeof(b)), 2);
	runtime_conn_close(c);
	runtime_server_stop(s->srv);
}

static int hook_err;
static char hook_why[128], hook_peer[RUNTIME_SOCKADDR_NAME_MAX];

static void handshake_failed(struct runtime_conn *c, int err, void *arg)
{
	socklen_t len;
	const struct sockaddr *sa = runtime_conn_peer(c, &len);

	(void)arg;
	hook_err = err;
	runtime_conn_tls_error(c, hook_why, sizeof(hook_why));
	ck_assert_ptr_nonnull(sa);
	ck_assert_int_gt(runtime_sockaddr_name(sa, len, hook_peer, sizeof(hook_peer)), 0);
}

START_TEST(test_tls_runtime_serve_handshakes_first)
{
	struct runtime_serve_config sc;
	struct runtime_server_stats st;
	struct served s = { .client = client_ctx(NULL, NULL, 0) };
	struct runtime_tls_serve ts = { .tls = s.client }; /* a client context cannot serve */
	struct runtime_tls *bare;
	struct runtime *rt;

	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	runtime_serve_config_init(&sc);
	sc.host = "127.0.0.1";
	sc.handler = greet;
	ck_assert_int_eq(runtime_tls_serve(&sc, &ts), -EINVAL);
	ck_assert_int_eq(runtime_tls_create(&bare, NULL), 0);
	ts.tls = bare; /* nor one without a certificate */
	ck_assert_int_eq(runtime_tls_serve(&sc, &ts), -EINVAL);
	ck_assert_int_eq(runtime_tls_serve(NULL, &ts), -EINVAL);
	ck_assert_int_eq(runtime_tls_serve(&sc, NULL), -EINVAL);
	ck_assert_ptr_null(sc.layer);
	runtime_tls_destroy(bare);
	ts = (struct runtime_tls_serve){ .tls = server_ctx(&leaf_a, NULL, 0),
		                         .on_error = handshake_failed };
	ck_assert_int_eq(runtime_tls_serve(&sc, &ts), 0);
	ck_assert_int_eq(runtime_serve(rt, &sc, &s.srv), 0);
	s.port = runtime_server_port(s.srv);
	ck_assert_int_eq(runtime_spawn(rt, serve_clients, &s), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_server_stats(s.srv, &st);
	ck_assert_int_eq(s.good_rc, 0);
	ck_assert_uint_eq(st.accepted, 2);
	ck_assert_uint_eq(st.layer_failed, 1);
	ck_assert_int_eq(hook_err, -EPROTO); /* told, with why and who */
	ck_assert_msg(strstr(hook_why, "http request"), "'%s'", hook_why);
	ck_assert_ptr_nonnull(strstr(hook_peer, "127.0.0.1:"));
	runtime_server_destroy(s.srv);
	runtime_destroy(rt);
	runtime_tls_destroy(ts.tls); /* after the server: it may still be in use */
	runtime_tls_destroy(s.client);
}
END_TEST

/* Over TLS too, a connection quiet past release_after waits with no
 * fiber, and its next records are read as if it had waited in place. */
struct released {
	struct served base;
	_Atomic int eagain;
	uint64_t live_idle;
	char got[2][8];
};

static void tls_release_echo(struct runtime_conn *c, void *arg)
{
	struct released *r = arg;
	char buf[64];

	for (;;) {
		runtime_conn_set_idle(c, 1);
		ssize_t n = runtime_conn_read(c, buf, sizeof(buf));
		runtime_conn_set_idle(c, 0);
		if (n == -EAGAIN) {
			atomic_fetch_add(&r->eagain, 1);
			if (runtime_conn_idle(c, NULL, NULL) != 1)
				return;
			continue;
		}
		if (n <= 0 || runtime_conn_write(c, buf, (size_t)n, NULL) < 0)
			return;
	}
}

static void released_client(void *arg)
{
	struct released *r = arg;
	struct runtime_conn *c;

	int fd = runtime_tcp_connect("127.0.0.1", r->base.port);
	ck_assert_int_eq(runtime_conn_open(&c, fd, 0), 0);
	ck_assert_int_eq(runtime_conn_tls_connect(c, r->base.client, "a.test"), 0);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(runtime_conn_write(c, i ? "two" : "one", 3, NULL), 3);
		ck_assert_int_eq(runtime_conn_read(c, r->got[i], sizeof(r->got[i]) - 1), 3);
		for (int j = 0; j < 5000 && !i && fibers_live(runtime_current()) > 3; j++)
			runtime_sleep(MS);
		if (!i)
			r->live_idle = fibers_live(runtime_current()); /* watcher, acceptor, this one */
	}
	runtime_conn_close(c);
	runtime_server_stop(r->base.srv);
}

START_TEST(test_tls_released_connection_reads_on)
{
	struct runtime_serve_config sc;
	static struct released r;
	struct runtime *rt;

	r.base.client = client_ctx(NULL, NULL, 0);
	ck_assert_int_eq(runtime_create(&rt, NULL), 0);
	runtime_serve_config_init(&sc);
	sc.host = "127.0.0.1";
	sc.handler = tls_release_echo;
	sc.arg = &r;
	sc.release_after_ns = 10 * MS;
	struct runtime_tls_serve ts = { .tls = server_ctx(&leaf_a, NULL, 0) };
	ck_assert_int_eq(runtime_tls_serve(&sc, &ts), 0);
	ck_assert_int_eq(runtime_serve(rt, &sc, &r.base.srv), 0);
	r.base.port = runtime_server_port(r.base.srv);
	ck_assert_int_eq(runtime_spawn(rt, released_client, &r), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	runtime_server_destroy(r.base.srv);
	runtime_destroy(rt);
	runtime_tls_destroy(ts.tls);
	runtime_tls_destroy(r.base.client);
	ck_assert_str_eq(r.got[0], "one");
	ck_assert_str_eq(r.got[1], "two");
	ck_assert_int_ge(r.eagain, 1);
	ck_assert_uint_eq(r.live_idle, 3);
}
END_TEST

/* ------------------------------- TLS 1.3 records after the handshake */

/* The client counts the KeyUpdates it reads (OpenSSL's message callback). */
static int client_key_updates;

static void count_key_updates(int write_p, int version, int type, const void *buf, size_t len,
                              SSL *ssl, void *arg)
{
	(void)version, (void)ssl, (void)arg;
	if (!write_p && type == SSL3_RT_HANDSHAKE && len && *(const uint8_t *)buf == 24)
		client_key_updates++;
}

/* The server echoes in capitals until the client's close_notify. */
static void shout_until_end(struct duo *d)
{
	static char buf[70000];
	ssize_t n;

	while ((n = runtime_conn_read(d->sconn, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			buf[i] = (char)toupper((unsigned char)buf[i]);
		ck_assert_int_eq(runtime_conn_write(d->sconn, buf, (size_t)n, NULL), n);
	}
	ck_assert_int_eq(n, 0);
	ck_assert_ptr_null(runtime_conn_tls_ssl(d->sconn)); /* tls13.c's records */
}

/* Rounds of a key update (asking for the server's on even rounds), then
 * a message of growing size, read back whole. */
static void update_and_talk(struct duo *d)
{
	static char out[65536], in[65536];
	SSL *ssl = runtime_conn_tls_ssl(d->cconn);

	SSL_set_msg_callback(ssl, count_key_updates);
	for (int r = 0; r < 6; r++) {
		size_t len = (size_t)1 << (2 * r + 5); /* 32 B to 32 KiB */
		memset(out, 'a' + r, len);
		ck_assert_int_eq(SSL_key_update(ssl, r % 2 ? SSL_KEY_UPDATE_NOT_REQUESTED
		                                           : SSL_KEY_UPDATE_REQUESTED), 1);
		ck_assert_int_eq(runtime_conn_write(d->cconn, out, len, NULL), (ssize_t)len);
		for (size_t got = 0; got < len;) {
			ssize_t n = runtime_conn_read(d->cconn, in + got, len - got);
			ck_assert_int_gt(n, 0);
			got += (size_t)n;
		}
		ck_assert_int_eq(in[0], 'A' + r);
		ck_assert_int_eq(in[len - 1], 'A' + r);
	}
	ck_assert_int_eq(runtime_conn_close_write(d->cconn), 0);
}

START_TEST(test_tls13_key_updates_both_ways)
{
	struct duo d = { .host = "a.test", .server_then = shout_until_end,
	                 .client_then = update_and_talk };

	client_key_updates = 0;
	d.server = server_ctx(&leaf_a, NULL, 0);
	d.client = client_ctx(NULL, NULL, 0);
	duo_run(&d);
	ck_assert_int_eq(d.accept_rc, 0);
	ck_assert_int_eq(d.connect_rc, 0);
	/* The server's own after its handshake, and one per request. */
	ck_assert_int_eq(client_key_updates, 1 + 3);
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}
END_TEST

/*
 * Records a client may not send, sealed with its own keys (tls/record.c,
 * compiled in: the client's application traffic secret from OpenSSL's key
 * log, and OpenSSL never writes under it here), so that only what is
 * inside them is wrong. The server reads what comes, then says why it
 * stopped.
 */
static struct rec_dir client_dir;
static bool client_secret_seen;

static void client_keylog(const SSL *ssl, const char *line)
{
	static const char label[] = "CLIENT_TRAFFIC_SECRET_0 ";
	const char *hex = strrchr(line, ' ');

	(void)ssl;
	if (strncmp(line, label, sizeof(label) - 1) || strlen(hex + 1) != 64)
		return;
	for (int i = 0; i < 32; i++)
		sscanf(hex + 1 + 2 * i, "%2hhx", &client_dir.secret[i]);
	client_secret_seen = true;
}

#define STEPS 4

struct hostile_record {
	const char *what;
	struct step {
		uint8_t type;           /* sealed as this content type; 0: none */
		const char *p;          /* its content (or raw bytes), NULL: zeros */
		size_t len, pad;        /* and zeros after the type */
		bool raw;               /* sent as it is, not sealed */
		bool corrupt;           /* a bit of the ciphertext flipped */
		bool rekey;             /* our keys move on after it (KeyUpdate) */
	} steps[STEPS];
	const char *read;           /* what the server reads, in all */
	int end;                    /* its last read: 0 or -errno */
	const char *words;          /* runtime_conn_tls_error's */
};

#define DATA(s) { REC_APPLICATION_DATA, s, sizeof(s) - 1, 0, 0, 0, 0 }
#define HS(s) { REC_HANDSHAKE, s, sizeof(s) - 1, 0, 0, 0, 0 }
#define ALERT(s) { REC_ALERT, s, 2, 0, 0, 0, 0 }
#define CLOSE ALERT("\1\0")
#define KEY_UPDATE(req) { REC_HANDSHAKE, "\x18\0\0\1" req, 5, 0, 0, 0, 1 }

static const struct hostile_record hostile_records[] = {
	{ "padding, an empty record, user_canceled, then close_notify",
	  { { REC_APPLICATION_DATA, "ab", 2, 300, 0, 0, 0 }, DATA(""), ALERT("\1\x5a"), CLOSE },
	  "ab", 0, "" },
	{ "a KeyUpdate cut in two records, then data under the new keys",
	  { HS("\x18\0"), { REC_HANDSHAKE, "\0\1\0", 3, 0, 0, 0, 1 }, DATA("cd"), CLOSE },
	  "cd", 0, "" },
	{ "an unknown content type", { { 99, "x", 1, 0, 0, 0, 0 } }, "", -EPROTO,
	  "unexpected message" },
	{ "nothing but padding", { { 0, NULL, 0, 20, 0, 0, 0 } }, "", -EPROTO,
	  "unexpected message" },
	{ "a record of 2^14 + 1 bytes", { { REC_APPLICATION_DATA, NULL, 16385, 0, 0, 0, 0 } }, "",
	  -EPROTO, "data length too long" },
	{ "a header saying 2^14 + 257 bytes", { { 0, "\x17\3\3\x41\1", 5, 0, 1, 0, 0 } }, "",
	  -EPROTO, "data length too long" },
	{ "a flipped bit", { DATA("ok"), { REC_APPLICATION_DATA, "xy", 2, 0, 0, 1, 0 } }, "ok",
	  -EPROTO, "decryption failed or bad record mac" },
	{ "data after a KeyUpdate in its record",
	  { { REC_HANDSHAKE, "\x18\0\0\1\0\x18", 6, 0, 0, 0, 0 } }, "", -EPROTO,
	  "unexpected message" },
	{ "a KeyUpdate asking for 2", { KEY_UPDATE("\2") }, "", -EPROTO, "bad key update" },
	{ "a KeyUpdate of two bytes", { HS("\x18\0\0\2\0\0") }, "", -EPROTO, "bad length" },
	{ "a NewSessionTicket from the client", { HS("\4\0\0\1\0") }, "", -EPROTO,
	  "unexpected message" },
	{ "data amid a handshake message", { HS("\x18\0"), DATA("z") }, "", -EPROTO,
	  "unexpected message" },
	{ "a plain ChangeCipherSpec", { { 0, "\x14\3\3\0\1\1", 6, 0, 1, 0, 0 } }, "", -EPROTO,
	  "unexpected message" },
	{ "the peer's decrypt_error alert", { DATA("q"), ALERT("\2\x33") }, "q", -EPROTO,
	  "tlsv1 alert decrypt error" },
	{ "an end with no close_notify", { DATA("r") }, "r", -ECONNABORTED,
	  "unexpected eof while reading" },
};

static const struct hostile_record *hostile_now;
static char big_zeros[16385];
static char server_read[64], server_words[160];
static int server_end;

/* One step: the inner plaintext (content, type, zeros) sealed whole - as
 * rec_seal's content all but its last byte, and that as the type - or
 * raw bytes. */
static void send_step(struct duo *d, const struct step *st)
{
	static uint8_t rec[REC_MAX + 512], inner[16385 + 300];
	const struct rec_suite *suite = runtime__rec_suite_of(0x1301);
	size_t n = st->len;

	if (st->raw) {
		struct iovec v = { (void *)st->p, n };
		ck_assert_int_eq(runtime_conn_raw_send(d->cconn, &v, 1), (ssize_t)n);
		return;
	}
	memcpy(inner, st->p ? st->p : big_zeros, n);
	if (st->type)
		inner[n++] = st->type;
	memset(inner + n, 0, st->pad);
	n += st->pad;
	struct iovec iov = { inner, n - 1 };
	ssize_t m = runtime__rec_seal(&client_dir, suite, inner[n - 1], &iov, 1, n - 1, rec);
	ck_assert_int_gt(m, 0);
	if (st->corrupt)
		rec[REC_HEADER + 1] ^= 1;
	if (st->rekey)
		ck_assert(runtime__rec_dir_update(&client_dir, suite));
	struct iovec v = { rec, (size_t)m };
	ck_assert_int_eq(runtime_conn_raw_send(d->cconn, &v, 1), m);
}

static void send_hostile(struct duo *d)
{
	ck_assert(client_secret_seen);
	ck_assert(runtime__rec_dir_set(&client_dir, runtime__rec_suite_of(0x1301), client_dir.secret));
	for (int i = 0; i < STEPS && (hostile_now->steps[i].type || hostile_now->steps[i].len ||
	                              hostile_now->steps[i].pad); i++)
		send_step(d, &hostile_now->steps[i]);
	runtime_sock_shutdown(runtime_conn_fd(d->cconn), SHUT_WR);
	runtime__rec_dir_wipe(&client_dir);
}

static void read_hostile(struct duo *d)
{
	size_t got = 0;
	ssize_t n;

	while ((n = runtime_conn_read(d->sconn, server_read + got, sizeof(server_read) - 1 - got)) > 0)
		got += (size_t)n;
	server_read[got] = '\0';
	server_end = (int)n;
	runtime_conn_tls_error(d->sconn, server_words, sizeof(server_words));
}

START_TEST(test_tls13_hostile_records)
{
	for (size_t i = 0; i < sizeof(hostile_records) / sizeof(hostile_records[0]); i++) {
		struct duo d = { .host = "a.test", .server_then = read_hostile,
		                 .client_then = send_hostile };
		hostile_now = &hostile_records[i];
		client_secret_seen = false;
		d.server = server_ctx(&leaf_a, NULL, 0);
		d.client = client_ctx(NULL, NULL, 1);
		SSL_CTX_set_keylog_callback(runtime_tls_ssl_ctx(d.client), client_keylog);
		duo_run(&d);
		ck_assert_int_eq(d.accept_rc, 0);
		ck_assert_msg(!strcmp(server_read, hostile_now->read), "%s: read '%s'",
		              hostile_now->what, server_read);
		ck_assert_msg(server_end == hostile_now->end, "%s: ended %d", hostile_now->what,
		              server_end);
		ck_assert_msg(strstr(server_words, hostile_now->words), "%s: '%s'", hostile_now->what,
		              server_words);
		runtime_tls_destroy(d.server);
		runtime_tls_destroy(d.client);
	}
}
END_TEST

/* Every core at once on one server context and one client context: the
 * ticket keys, the client's sessions and the counts are shared. */
#define MANY 40

struct crowd {
	uint16_t port;
	struct runtime_server *srv;
	struct runtime_tls *client;
	_Atomic int served, resumed, left;
};

static void crowd_client(void *arg)
{
	struct crowd *s = arg;
	struct runtime_conn *c;
	struct runtime_tls_info info;
	char b[8];

	int fd = runtime_tcp_connect("127.0.0.1", s->port);
	ck_assert_int_eq(runtime_conn_open(&c, fd, 0), 0);
	if (runtime_conn_tls_connect(c, s->client, "a.test") == 0 &&
	    runtime_conn_read(c, b, sizeof(b)) == 2) {
		atomic_fetch_add(&s->served, 1);
		runtime_conn_tls_info(c, &info);
		atomic_fetch_add(&s->resumed, info.resumed);
	}
	runtime_conn_close(c);
	if (atomic_fetch_sub(&s->left, 1) == 1)
		runtime_server_stop(s->srv);
}

START_TEST(test_tls_every_core_shares_the_contexts)
{
	struct runtime_config cfg;
	struct runtime_serve_config sc;
	struct crowd s = { .client = client_ctx(NULL, NULL, 0), .left = MANY };
	struct runtime *rt;

	runtime_config_init(&cfg);
	cfg.cores = 2;
	ck_assert_int_eq(runtime_create(&rt, &cfg), 0);
	runtime_serve_config_init(&sc);
	sc.host = "127.0.0.1";
	struct runtime_tls_serve ts = { .tls = server_ctx(&leaf_a, NULL, 0) };
	ck_assert_int_eq(runtime_tls_serve(&sc, &ts), 0);
	sc.handler = greet;
	ck_assert_int_eq(runtime_serve(rt, &sc, &s.srv), 0);
	s.port = runtime_server_port(s.srv);
	for (int i = 0; i < MANY; i++)
		ck_assert_int_eq(runtime_spawn_on(rt, (unsigned)i % 2, crowd_client, &s), 0);
	ck_assert_int_eq(runtime_run(rt), 0);
	ck_assert_int_eq(atomic_load(&s.served), MANY);
	/* Those that came after a ticket resumed; the first of each host did not. */
	ck_assert_int_lt(atomic_load(&s.resumed), MANY);
	runtime_server_destroy(s.srv);
	runtime_destroy(rt);
	runtime_tls_destroy(ts.tls);
	runtime_tls_destroy(s.client);
}
END_TEST

/* An idle connection gives back what it need not hold: the server waits
 * for a second request that does not come. With keep_ssl, OpenSSL's
 * record buffers go (tls/idle.c); by default a TLS 1.3 server holds no SSL
 * at all once its handshake is done (tls/tls13.c: runtime_conn_tls_ssl
 * says NULL), and its cipher contexts go. The heap in use, as malloc - or
 * the sanitizer's allocator - counts it. */
static size_t heap_before, heap_after;
static bool server_kept_ssl;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
size_t __sanitizer_get_current_allocated_bytes(void); /* GCC ships no header for it */
static size_t heap_in_use(void)
{
	return __sanitizer_get_current_allocated_bytes();
}
#else
static size_t heap_in_use(void)
{
	return mallinfo2().uordblks;
}
#endif

static void answer_then_wait(struct duo *d)
{
	char b[16];
	ck_assert_int_eq(runtime_conn_read(d->sconn, b, sizeof(b)), 5);
	ck_assert_int_eq(runtime_conn_write(d->sconn, "HELLO", 5, NULL), 5);
	server_kept_ssl = runtime_conn_tls_ssl(d->sconn) != NULL;
	ck_assert_int_eq(runtime_conn_read(d->sconn, b, sizeof(b)), 0); /* long after */
}

static void hello_then_idle(struct duo *d)
{
	char b[16];
	ck_assert_int_eq(runtime_conn_write(d->cconn, "hello", 5, NULL), 5);
	ck_assert_int_eq(runtime_conn_read(d->cconn, b, sizeof(b)), 5);
	heap_before = heap_in_use();
	runtime_sleep(3500 * MS); /* two ticks of the sweep, and then some */
	heap_after = heap_in_use();
}

/* One idle connection: the heap before and after the sweep. */
static void idle_run(int keep_ssl, size_t heap[2])
{
	struct runtime_tls_config cfg;
	struct duo d = { .host = "a.test", .server_then = answer_then_wait,
	                 .client_then = hello_then_idle };

	runtime_tls_config_init(&cfg);
	cfg.keep_ssl = keep_ssl;
	ck_assert_int_eq(runtime_tls_create(&d.server, &cfg), 0);
	ck_assert_int_eq(runtime_tls_add_cert(d.server, leaf_a.cert, leaf_a.key, RUNTIME_TLS_PEM), 0);
	d.client = client_ctx(NULL, NULL, 0);
	duo_run(&d);
	ck_assert_int_eq(d.accept_rc, 0);
	ck_assert_int_eq(d.connect_rc, 0);
	ck_assert_int_eq(server_kept_ssl, keep_ssl);
	ck_assert_str_eq(d.sinfo.version, "TLSv1.3");
	ck_assert_str_eq(d.sinfo.cipher, "TLS_AES_128_GCM_SHA256");
	heap[0] = heap_before;
	heap[1] = heap_after;
	runtime_tls_destroy(d.server);
	runtime_tls_destroy(d.client);
}

START_TEST(test_tls_idle_connection_frees_its_buffers)
{
	size_t kept[2], lean[2];

	idle_run(1, kept);
	idle_run(0, lean);
	/* The server's read and write buffers, some 17 KiB each. */
	ck_assert_msg(kept[0] > kept[1] + 20000, "heap %zu -> %zu", kept[0], kept[1]);
	/* Without the SSL, what goes is the cipher contexts (and a buffer,
	 * this connection having no receive stream); how much an idle one
	 * holds in all is make bench-tls's to tell (idle mode): the heap
	 * drifts between runs by as much as the SSL. */
	ck_assert_msg(lean[0] > lean[1] + 1000, "heap %zu -> %zu", lean[0], lean[1]);
}
END_TEST

/* ------------------------------------------------------- bad input */

START_TEST(test_tls_bad_input_gets_clear_errors)
{
	struct runtime_tls_config cfg;
	struct runtime_tls *t, *c;
	char why[256];

	runtime_tls_config_init(&cfg);
	ck_assert_int_eq(runtime_tls_create(NULL, &cfg), -EINVAL);
	cfg.side = 7;
	ck_assert_int_eq(runtime_tls_create(&t, &cfg), -EINVAL);
	ck_assert_ptr_null(t);
	runtime_tls_config_init(&cfg);
	cfg.alpn = "h2,,http/1.1";
	ck_assert_int_eq(runtime_tls_create(&t, &cfg), -EINVAL);
	cfg.alpn = "";
	ck_assert_int_eq(runtime_tls_create(&t, &cfg), -EINVAL); /* once freed a buffer twice */
	cfg.alpn = NULL;
	cfg.ciphers = "NO-SUCH-SUITE";
	ck_assert_int_eq(runtime_tls_create(&t, &cfg), -EPROTO);
	ck_assert_int_gt(runtime_tls_error_text(why, sizeof(why)), 0);
	cfg.ciphers = NULL;
	cfg.ca_file = "/nonexistent/ca.pem";
	cfg.client_certs = RUNTIME_TLS_CLIENT_CERT_REQUIRED;
	ck_assert_int_eq(runtime_tls_create(&t, &cfg), -ENOENT);
	ck_assert_ptr_nonnull(strstr((runtime_tls_error_text(why, sizeof(why)), why), "/nonexistent"));
	ck_assert_int_eq(runtime_tls_create(&t, NULL), 0); /* a server's defaults */

	ck_assert_int_eq(runtime_tls_add_cert(t, "/nonexistent.pem", "/x.pem", 0), -ENOENT);
	ck_assert_int_eq(runtime_tls_add_cert(t, "not PEM", leaf_a.key, RUNTIME_TLS_PEM), -EPROTO);
	ck_assert_int_eq(runtime_tls_add_cert(t, leaf_a.cert, "not PEM", RUNTIME_TLS_PEM), -EPROTO);
	ck_assert_int_eq(runtime_tls_add_cert(t, leaf_a.cert, leaf_b.key, RUNTIME_TLS_PEM),
	                 -EKEYREJECTED);
	runtime_tls_error_text(why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "does not match"));
	/* An encrypted key: refused, never a passphrase prompt. */
	BIO *plain = BIO_new_mem_buf(leaf_a.key, -1);
	EVP_PKEY *k = PEM_read_bio_PrivateKey(plain, NULL, NULL, NULL);
	BIO_free(plain);
	BIO *enc = BIO_new(BIO_s_mem());
	ck_assert_int_eq(PEM_write_bio_PrivateKey(enc, k, EVP_aes_128_cbc(),
	                                          (unsigned char *)"secret", 6, NULL, NULL), 1);
	char *enc_pem;
	long enc_len = BIO_get_mem_data(enc, &enc_pem);
	char *enc_key = strndup(enc_pem, (size_t)enc_len);
	ck_assert_int_eq(runtime_tls_add_cert(t, leaf_a.cert, enc_key, RUNTIME_TLS_PEM), -EPROTO);
	runtime_tls_error_text(why, sizeof(why));
	ck_assert_msg(strstr(why, "encrypted"), "'%s'", why);
	free(enc_key);
	BIO_free(enc);
	EVP_PKEY_free(k);
	/* A success clears the text; the SSL_CTX stays the same one. */
	void *ctx = runtime_tls_ssl_ctx(t);
	ck_assert_int_eq(runtime_tls_add_cert(t, leaf_a.cert, leaf_a.key, RUNTIME_TLS_PEM), 0);
	ck_assert_int_eq(runtime_tls_error_text(why, sizeof(why)), 0);
	ck_assert_ptr_eq(runtime_tls_ssl_ctx(t), ctx);
	ck_assert_int_eq(runtime_tls_add_cert(t, leaf_a.cert, leaf_a.key, 0x80), -EINVAL);
	ck_assert_int_eq(runtime_tls_add_cert(NULL, leaf_a.cert, leaf_a.key, RUNTIME_TLS_PEM),
	                 -EINVAL);
	ck_assert_int_eq(runtime_tls_insecure_skip_verify(t), -EINVAL); /* a server */
	ck_assert_int_eq(runtime_tls_insecure_skip_verify(NULL), -EINVAL);

	c = client_ctx(NULL, NULL, 0);
	ck_assert_int_eq(runtime_tls_add_cert(c, client_leaf.cert, client_leaf.key,
	                                      RUNTIME_TLS_PEM), 0);
	ck_assert_int_eq(runtime_tls_add_cert(c, leaf_a.cert, leaf_a.key, RUNTIME_TLS_PEM),
	                 -EEXIST);
	ck_assert_int_eq(runtime_tls_destroy(NULL), 0);
	runtime_tls_destroy(t);
	runtime_tls_destroy(c);
}
END_TEST

/* Misuse on connections: checked before anything is sent. */
static void conn_misuse(void *arg)
{
	struct runtime_tls *server = server_ctx(&leaf_a, NULL, 0), *client = client_ctx(NULL, NULL, 0);
	struct runtime_tls *bare;
	struct runtime_tls_info info;
	struct runtime_conn *c;
	int fd[2];
	char why[64];

	(void)arg;
	tcp_pair(fd);
	ck_assert_int_eq(runtime_conn_open(&c, fd[1], 0), 0);
	ck_assert_int_eq(runtime_conn_tls_accept(c, client), -EINVAL);
	ck_assert_int_eq(runtime_conn_tls_connect(c, server, "a.test"), -EINVAL);
	ck_assert_int_eq(runtime_conn_tls_connect(c, client, NULL), -EINVAL); /* verify, no host */
	ck_assert_int_eq(runtime_tls_create(&bare, NULL), 0);
	ck_assert_int_eq(runtime_conn_tls_accept(c, bare), -EINVAL); /* no certificate */
	ck_assert_int_eq(runtime_conn_tls_accept(NULL, server), -EINVAL);
	ck_assert_int_eq(runtime_conn_tls_info(c, &info), -ENOTCONN);
	ck_assert_int_eq(runtime_conn_tls_info(NULL, &info), -EINVAL);
	ck_assert_int_eq(runtime_conn_tls_error(c, why, sizeof(why)), 0);
	ck_assert_ptr_null(runtime_conn_tls_ssl(c));
	ck_assert_ptr_null(runtime_tls_ssl_ctx(NULL));
	/* Plain still works after refused TLS calls. */
	ck_assert_int_eq(runtime_write(fd[0], "x", 1), 1);
	ck_assert_int_eq(runtime_conn_read(c, why, 1), 1);
	runtime_conn_close(c);
	runtime_close(fd[0]);
	runtime_tls_destroy(bare);
	runtime_tls_destroy(server);
	runtime_tls_destroy(client);
}

START_TEST(test_tls_conn_misuse)
{
	ck_assert_int_eq(run_fiber(NULL, conn_misuse, NULL), 0);
}
END_TEST

/* ----------------------------------------------------------- hostile */

/*
 * A ClientHello from an OpenSSL client of versions [min, max] and TLS 1.2
 * suites ciphers (NULL: its defaults), at security level 0 so that old
 * protocols and weak suites are offered at all; made in memory.
 */
static size_t client_hello(unsigned char *out, size_t size, int min, int max,
                           const char *ciphers)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_security_level(ctx, 0);
	SSL_CTX_set_min_proto_version(ctx, min);
	SSL_CTX_set_max_proto_version(ctx, max);
	if (ciphers)
		ck_assert_int_eq(SSL_CTX_set_cipher_list(ctx, ciphers), 1);
	SSL *ssl = SSL_new(ctx);
	BIO *rd = BIO_new(BIO_s_mem()), *wr = BIO_new(BIO_s_mem());
	SSL_set_bio(ssl, rd, wr);
	SSL_set_connect_state(ssl);
	ck_assert_int_le(SSL_do_handshake(ssl), 0); /* wants the server's answer */
	int n = BIO_read(wr, out, (int)size);
	ck_assert_int_gt(n, 0);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

/* One hostile connection against a server with a short handshake timeout,
 * while a good client is served on another (it must not be disturbed). */
struct attack {
	void (*send)(struct attack *a, int fd);
	int fd[2];
	int accept_rc;
	char why[160];
	uint64_t took;
	bool server_done;
	struct runtime_tls *server;
};

#define HANDSHAKE_TIMEOUT (300 * MS)

static struct runtime_tls *short_server(void)
{
	struct runtime_tls_config cfg;
	struct runtime_tls *t;

	runtime_tls_config_init(&cfg);
	cfg.handshake_timeout_ns = HANDSHAKE_TIMEOUT;
	ck_assert_int_eq(runtime_tls_create(&t, &cfg), 0);
	ck_assert_int_eq(runtime_tls_add_cert(t, leaf_a.cert, leaf_a.key, RUNTIME_TLS_PEM), 0);
	return t;
}

static void *attacked_server(void *arg)
{
	struct attack *a = arg;
	struct runtime_conn *c;

	ck_assert_int_eq(runtime_conn_open(&c, a->fd[1], 0), 0);
	uint64_t t0 = runtime_now();
	a->accept_rc = runtime_conn_tls_accept(c, a->server);
	a->took = runtime_now() - t0;
	runtime_conn_tls_error(c, a->why, sizeof(a->why));
	a->server_done = true;
	ck_assert_int_eq(runtime_conn_close(c), 0);
	return NULL;
}

static void *attacker(void *arg)
{
	struct attack *a = arg;
	a->send(a, a->fd[0]);
	return NULL;
}

static void attack_main(void *arg)
{
	struct attack *a = arg;
	struct duo good = { .host = "a.test", .server = a->server,
	                    .server_then = shout_back, .client_then = say_hello };

	good.client = client_ctx(NULL, NULL, 0);
	tcp_pair(a->fd);
	tcp_pair(good.fd);
	struct runtime_fiber *s = start(attacked_server, a), *x = start(attacker, a);
	struct runtime_fiber *gs = start(server_side, &good), *gc = start(client_side, &good);
	join(gc);
	join(gs);
	ck_assert_int_eq(good.accept_rc, 0); /* the good client was served */
	ck_assert_int_eq(good.connect_rc, 0);
	join(s);
	join(x);
	runtime_close(a->fd[0]);
	runtime_tls_destroy(good.client);
}

static void attack(struct attack *a, int want, const char *words)
{
	a->server = short_server();
	ck_assert_int_eq(run_fiber(NULL, attack_main, a), 0);
	ck_assert_msg(a->accept_rc == want, "accept %d, want %d (%s)", a->accept_rc, want, a->why);
	ck_assert_msg(strstr(a->why, words), "says '%s', want '%s'", a->why, words);
	runtime_tls_destroy(a->server);
}

/* Writes, then waits for the server's verdict with the socket open. */
static void send_and_wait(int fd, const void *p, size_t n, const struct attack *a)
{
	ck_assert_int_eq(runtime_write(fd, p, n), (ssize_t)n);
	while (!a->server_done)
		runtime_sleep(10 * MS);
}

static void garbage(struct attack *a, int fd)
{
	unsigned char junk[300];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 37 + 11);
	send_and_wait(fd, junk, sizeof(junk), a);
}

static void hello_cut_then_close(struct attack *a, int fd)
{
	unsigned char hello[2048];
	(void)a;
	client_hello(hello, sizeof(hello), TLS1_2_VERSION, TLS1_3_VERSION, NULL);
	ck_assert_int_eq(runtime_write(fd, hello, 40), 40);
	runtime_sock_shutdown(fd, SHUT_WR);
}

static void hello_cut_then_stall(struct attack *a, int fd)
{
	unsigned char hello[2048];
	client_hello(hello, sizeof(hello), TLS1_2_VERSION, TLS1_3_VERSION, NULL);
	send_and_wait(fd, hello, 40, a);
}

static void oversized_record(struct attack *a, int fd)
{
	unsigned char rec[5 + 64] = { 22, 3, 3, 0x48, 0x01 }; /* 18433 bytes, over the limit */
	send_and_wait(fd, rec, sizeof(rec), a);
}

static void tls10_only(struct attack *a, int fd)
{
	unsigned char hello[2048];
	size_t n = client_hello(hello, sizeof(hello), TLS1_VERSION, TLS1_VERSION, NULL);
	send_and_wait(fd, hello, n, a);
}

static void weak_suites_only(struct attack *a, int fd)
{
	unsigned char hello[2048];
	size_t n = client_hello(hello, sizeof(hello), TLS1_2_VERSION, TLS1_2_VERSION,
	                        "AES128-SHA:DES-CBC3-SHA:NULL-SHA256:RC4-SHA");
	send_and_wait(fd, hello, n, a);
}

START_TEST(test_tls_hostile_handshakes)
{
	struct attack a = { .send = garbage };
	attack(&a, -EPROTO, "wrong version number");

	a = (struct attack){ .send = hello_cut_then_close };
	attack(&a, -ECONNABORTED, "during the handshake");

	a = (struct attack){ .send = hello_cut_then_stall };
	attack(&a, -ETIMEDOUT, "handshake timed out");
	ck_assert_uint_ge(a.took, HANDSHAKE_TIMEOUT);

	a = (struct attack){ .send = oversized_record };
	attack(&a, -EPROTO, "too long");

	a = (struct attack){ .send = tls10_only };
	attack(&a, -ENOPROTOOPT, "unsupported protocol");

	a = (struct attack){ .send = weak_suites_only };
	attack(&a, -ENOPROTOOPT, "no shared cipher");
}
END_TEST

/*
 * A client of OpenSSL's own on a plain thread (blocking), to do what our
 * client never would: renegotiate, or write raw bytes after a handshake.
 */
struct rogue {
	int fd;
	int max_version;
	void (*after)(struct rogue *r, SSL *ssl); /* once the handshake is done */
	int reneg_rc;                            /* SSL_do_handshake's, renegotiating */
	int server_read;                         /* what the server's read said */
};

static void *rogue_client(void *arg)
{
	struct rogue *r = arg;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_max_proto_version(ctx, r->max_version);
	SSL *ssl = SSL_new(ctx);

	fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) & ~O_NONBLOCK); /* blocking, whatever made it */
	SSL_set_fd(ssl, r->fd);
	ck_assert_int_eq(SSL_connect(ssl), 1);
	r->after(r, ssl);
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	close(r->fd);
	return NULL;
}

static void renegotiate(struct rogue *r, SSL *ssl)
{
	ck_assert_int_eq(SSL_write(ssl, "a", 1), 1);
	SSL_renegotiate(ssl);
	r->reneg_rc = SSL_do_handshake(ssl);
	if (r->reneg_rc == 1) { /* it went through? then it must have been refused */
		char b;
		r->reneg_rc = SSL_read(ssl, &b, 1) > 0 ? 1 : 0;
	}
}

static void raw_oversized(struct rogue *r, SSL *ssl)
{
	unsigned char rec[5 + 64] = { 23, 3, 3, 0x48, 0x01 }; /* application data, too long */
	(void)ssl;
	ck_assert_int_eq(write(r->fd, rec, sizeof(rec)), (ssize_t)sizeof(rec));
	usleep(200 * 1000);
}

static void raw_truncated(struct rogue *r, SSL *ssl)
{
	unsigned char rec[5 + 20] = { 23, 3, 3, 0, 100 }; /* 100 announced, 20 come */
	(void)ssl;
	ck_assert_int_eq(write(r->fd, rec, sizeof(rec)), (ssize_t)sizeof(rec));
	shutdown(r->fd, SHUT_WR);
}

struct rogue_run {
	struct rogue *r;
	struct runtime_tls *tls;
	int listener;
};

static void rogue_server(void *arg)
{
	struct rogue_run *run = arg;
	struct rogue *r = run->r;
	struct runtime_tls *tls = run->tls;
	struct runtime_conn *c;
	char b[8];

	int fd = runtime_accept(run->listener, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(runtime_conn_open(&c, fd, 0), 0);
	ck_assert_int_eq(runtime_conn_tls_accept(c, tls), 0);
	ssize_t n;
	while ((n = runtime_conn_read(c, b, sizeof(b))) > 0)
		;
	r->server_read = (int)n;
	runtime_conn_close(c);
}

static void rogue_run(struct rogue *r)
{
	struct runtime_tls *tls = server_ctx(&leaf_a, NULL, 0);
	int l = runtime_tcp_listen("127.0.0.1", 0, 4, 0);
	struct rogue_run args = { r, tls, l };
	pthread_t th;

	ck_assert_int_ge(l, 0);
	r->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(bound_port(l)),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_int_eq(connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, rogue_client, r), 0);
	ck_assert_int_eq(run_fiber(NULL, rogue_server, &args), 0);
	pthread_join(th, NULL);
	close(l);
	runtime_tls_destroy(tls);
}

START_TEST(test_tls_hostile_after_the_handshake)
{
	struct rogue r = { .max_version = TLS1_2_VERSION, .after = renegotiate, .reneg_rc = 1 };
	rogue_run(&r);
	ck_assert_int_le(r.reneg_rc, 0); /* refused */
	ck_assert_int_le(r.server_read, 0);

	r = (struct rogue){ .max_version = TLS1_3_VERSION, .after = raw_oversized };
	rogue_run(&r);
	ck_assert_int_eq(r.server_read, -EPROTO);

	r = (struct rogue){ .max_version = TLS1_3_VERSION, .after = raw_truncated };
	rogue_run(&r);
	ck_assert_int_eq(r.server_read, -ECONNABORTED);
}
END_TEST

static Suite *tls_suite(void)
{
	Suite *s = suite_create("tls");
	TCase *tc = tcase_create("tls");

	tcase_add_unchecked_fixture(tc, make_certs, drop_certs);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_tls_hello_on_1_3_and_1_2);
	tcase_add_test(tc, test_tls_client_refuses_bad_certificates);
	tcase_add_test(tc, test_tls_sni_picks_the_certificate);
	tcase_add_test(tc, test_tls_nothing_in_common);
	tcase_add_test(tc, test_tls_resumption_and_ticket_rotation);
	tcase_add_test(tc, test_tls_no_tickets_no_resumption);
	tcase_add_test(tc, test_tls_tickets_kept_by_port);
	tcase_add_test(tc, test_tls_no_resumption_under_another_name);
	tcase_add_test(tc, test_tls_client_certificates);
	tcase_add_test(tc, test_tls_bulk_both_ways_with_copy);
	tcase_add_test(tc, test_tls13_key_updates_both_ways);
	tcase_add_test(tc, test_tls_reader_reads_lines);
	tcase_add_test(tc, test_tls_truncation_is_no_clean_end);
	tcase_add_test(tc, test_tls_deadlines_idle_and_drain);
	tcase_add_test(tc, test_tls_cancel_ends_a_read);
	tcase_add_test(tc, test_tls_bytes_held_by_the_layer_are_no_leaving);
	tcase_add_test(tc, test_tls_write_deadline_loses_nothing);
	tcase_add_test(tc, test_tls_finish_takes_a_bare_close);
	tcase_add_test(tc, test_tls_runtime_serve_handshakes_first);
	tcase_add_test(tc, test_tls_released_connection_reads_on);
	tcase_add_test(tc, test_tls_every_core_shares_the_contexts);
	tcase_add_test(tc, test_tls_idle_connection_frees_its_buffers);
	tcase_add_test(tc, test_tls_bad_input_gets_clear_errors);
	tcase_add_test(tc, test_tls_conn_misuse);
	suite_add_tcase(s, tc);
	tc = tcase_create("hostile");
	tcase_add_unchecked_fixture(tc, make_certs, drop_certs);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_tls_hostile_handshakes);
	tcase_add_test(tc, test_tls_hostile_after_the_handshake);
	tcase_add_test(tc, test_tls13_hostile_records);
	suite_add_tcase(s, tc);
	return s;
}

TEST_MAIN(tls_suite)
