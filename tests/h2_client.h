/* SPDX-License-Identifier: MIT */
/*
 * h2_client.h - a blocking HTTP/2 client for the tests, on libnghttp2's
 * client session and a plain socket: no code of the library under test
 * on its side. One connection, any number of streams on it, each answer
 * (status, fields, body, a reset) collected until asked for.
 */
#ifndef H2_CLIENT_H
#define H2_CLIENT_H

#include <check.h>
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#define H2T_STREAMS 256

struct h2t_answer {
	int32_t id;
	int status;                 /* the final one; 0: none yet */
	int interim;                /* a 1xx seen (100) */
	char fields[80 * 1024];     /* "name: value\n" each, of the final head */
	size_t fields_len;
	char *body;
	size_t body_len, body_cap;
	bool ended;                 /* END_STREAM came */
	bool closed;                /* the stream is closed */
	uint32_t reset;             /* its RST_STREAM's code, if closed so */
	/* the request body, sent from here */
	const char *out;
	size_t out_len;
	bool out_hold;              /* deferred until h2t_body_more */
};

struct h2t {
	int fd;
	nghttp2_session *s;
	struct h2t_answer *ans[H2T_STREAMS];
	unsigned n;
	bool eof;                   /* the server closed */
	bool goaway;
	uint32_t goaway_code;
	int32_t goaway_last;
	bool consume_manually;      /* the window is credited by h2t_consume */
};

static struct h2t_answer *h2t_of(struct h2t *t, int32_t id)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->ans[i]->id == id)
			return t->ans[i];
	return NULL;
}

static ssize_t h2t_send_cb(nghttp2_session *s, const uint8_t *data, size_t len, int flags,
                           void *user)
{
	struct h2t *t = user;
	(void)s;
	(void)flags;
	ssize_t n = send(t->fd, data, len, MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN ? NGHTTP2_ERR_WOULDBLOCK : NGHTTP2_ERR_CALLBACK_FAILURE;
	return n;
}

static int h2t_header_cb(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                         size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
	struct h2t_answer *a = h2t_of(user, f->hd.stream_id);
	(void)s;
	(void)flags;
	if (!a || f->hd.type != NGHTTP2_HEADERS)
		return 0;
	if (nlen == 7 && !memcmp(name, ":status", 7)) {
		int st = atoi((const char *)value);
		if (st < 200)
			a->interim = st;
		else
			a->status = st;
		return 0;
	}
	if (a->fields_len + nlen + vlen + 3 < sizeof(a->fields))
		a->fields_len += (size_t)snprintf(a->fields + a->fields_len,
		                                  sizeof(a->fields) - a->fields_len, "%.*s: %.*s\n",
		                                  (int)nlen, name, (int)vlen, value);
	return 0;
}

static int h2t_data_cb(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                       size_t len, void *user)
{
	struct h2t *t = user;
	struct h2t_answer *a = h2t_of(t, id);
	(void)flags;
	if (a) {
		if (a->body_len + len + 1 > a->body_cap) {
			a->body_cap = (a->body_len + len + 1) * 2;
			a->body = realloc(a->body, a->body_cap);
		}
		memcpy(a->body + a->body_len, data, len);
		a->body_len += len;
		a->body[a->body_len] = '\0';
	}
	if (!t->consume_manually)
		nghttp2_session_consume(s, id, len);
	return 0;
}

static int h2t_frame_cb(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
	struct h2t *t = user;
	struct h2t_answer *a = h2t_of(t, f->hd.stream_id);
	(void)s;
	if (f->hd.type == NGHTTP2_GOAWAY) {
		t->goaway = true;
		t->goaway_code = f->goaway.error_code;
		t->goaway_last = f->goaway.last_stream_id;
	}
	if (a && (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
	    (f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS))
		a->ended = true;
	return 0;
}

static int h2t_close_cb(nghttp2_session *s, int32_t id, uint32_t code, void *user)
{
	struct h2t_answer *a = h2t_of(user, id);
	(void)s;
	if (a) {
		a->closed = true;
		a->reset = code;
	}
	return 0;
}

static ssize_t h2t_body_cb(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                           uint32_t *flags, nghttp2_data_source *src, void *user)
{
	struct h2t_answer *a = src->ptr;
	(void)s;
	(void)id;
	(void)user;
	size_t n = a->out_len < len ? a->out_len : len;
	if (!n && a->out_hold)
		return NGHTTP2_ERR_DEFERRED;
	memcpy(buf, a->out, n);
	a->out += n;
	a->out_len -= n;
	if (!a->out_len && !a->out_hold)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

/* A connection to 127.0.0.1:port, its preface and SETTINGS sent
 * (settings: extra entries, n of them; window: the connection's and each
 * stream's receive window). */
static struct h2t *h2t_open_with(uint16_t port, const nghttp2_settings_entry *extra, size_t n,
                                 uint32_t window)
{
	struct h2t *t = calloc(1, sizeof(*t));
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	int one = 1;

	t->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(t->fd, (struct sockaddr *)&to, sizeof(to)), 0);
	setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	nghttp2_session_callbacks_new(&cb);
	nghttp2_session_callbacks_set_send_callback(cb, h2t_send_cb);
	nghttp2_session_callbacks_set_on_header_callback(cb, h2t_header_cb);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, h2t_data_cb);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cb, h2t_frame_cb);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, h2t_close_cb);
	nghttp2_option_new(&opt);
	nghttp2_option_set_no_auto_window_update(opt, 1);
	ck_assert_int_eq(nghttp2_session_client_new2(&t->s, cb, t, opt), 0);
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	nghttp2_settings_entry set[8] = { { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window } };
	if (n)
		memcpy(set + 1, extra, n * sizeof(*extra));
	ck_assert_int_eq(nghttp2_submit_settings(t->s, NGHTTP2_FLAG_NONE, set, n + 1), 0);
	if (window > 65535)
		nghttp2_session_set_local_window_size(t->s, NGHTTP2_FLAG_NONE, 0, (int32_t)window);
	ck_assert_int_eq(nghttp2_session_send(t->s), 0);
	return t;
}

static struct h2t *h2t_open(uint16_t port)
{
	return h2t_open_with(port, NULL, 0, 1 << 20);
}

/* Send what the session has; read for up to ms milliseconds (0: what is
 * there now), feeding the session. false once the server has closed. */
static bool h2t_pump(struct h2t *t, int ms)
{
	char buf[16384];
	struct pollfd p = { .fd = t->fd, .events = POLLIN };

	nghttp2_session_send(t->s);
	if (t->eof || poll(&p, 1, ms) != 1)
		return !t->eof;
	ssize_t n = recv(t->fd, buf, sizeof(buf), 0);
	if (n <= 0) {
		t->eof = true;
		return false;
	}
	nghttp2_session_mem_recv(t->s, (const uint8_t *)buf, (size_t)n);
	nghttp2_session_send(t->s);
	return true;
}

/* A request: fields "name", "value" pairs (NULL-terminated, may be NULL),
 * a body of len bytes (NULL: none, END_STREAM with the head; hold: more
 * comes by h2t_body_more). Returns its answer, filled as frames come. */
static struct h2t_answer *h2t_submit(struct h2t *t, const char *method, const char *path,
                                     const char *const *fields, const char *body, size_t len,
                                     bool hold)
{
	nghttp2_nv nv[32];
	size_t n = 0;
	struct h2t_answer *a = calloc(1, sizeof(*a));
#define NV(nm, v) (nghttp2_nv){ (uint8_t *)(nm), (uint8_t *)(v), strlen(nm), strlen(v), 0 }
	nv[n++] = NV(":method", method);
	nv[n++] = NV(":scheme", "http");
	nv[n++] = NV(":path", path);
	nv[n++] = NV(":authority", "h");
	for (size_t i = 0; fields && fields[i]; i += 2)
		nv[n++] = NV(fields[i], fields[i + 1]);
#undef NV
	a->out = body;
	a->out_len = len;
	a->out_hold = hold;
	nghttp2_data_provider src = { .source.ptr = a, .read_callback = h2t_body_cb };
	a->id = nghttp2_submit_request(t->s, NULL, nv, n, body || hold ? &src : NULL, NULL);
	ck_assert_int_gt(a->id, 0);
	ck_assert_uint_lt(t->n, H2T_STREAMS);
	t->ans[t->n++] = a;
	nghttp2_session_send(t->s);
	return a;
}

/* More body for a held request (end: the last of it). */
static void h2t_body_more(struct h2t *t, struct h2t_answer *a, const char *body, size_t len,
                          bool end)
{
	a->out = body;
	a->out_len = len;
	a->out_hold = !end;
	nghttp2_session_resume_data(t->s, a->id);
	nghttp2_session_send(t->s);
}

/* Pump until a's stream is closed (or the connection), 10 s at most. */
static bool h2t_wait(struct h2t *t, struct h2t_answer *a)
{
	for (int i = 0; i < 1000 && !a->closed; i++)
		if (!h2t_pump(t, 10) && !a->closed)
			return false;
	return a->closed;
}

/* One whole exchange on t: the answer (the caller frees it with t). */
static struct h2t_answer *h2t_ask(struct h2t *t, const char *method, const char *path,
                                  const char *const *fields, const char *body, size_t len)
{
	struct h2t_answer *a = h2t_submit(t, method, path, fields, body, len, false);
	ck_assert_msg(h2t_wait(t, a), "stream %d of %s %s not closed", a->id, method, path);
	return a;
}

/* Does the answer carry "name: value"? */
static bool h2t_has(const struct h2t_answer *a, const char *field)
{
	return strstr(a->fields, field) != NULL;
}

/* The server closed: end of stream within 10 s. */
static bool h2t_closed_by_server(struct h2t *t)
{
	for (int i = 0; i < 1000 && !t->eof; i++)
		h2t_pump(t, 10);
	return t->eof;
}

static void h2t_close(struct h2t *t)
{
	for (unsigned i = 0; i < t->n; i++) {
		free(t->ans[i]->body);
		free(t->ans[i]);
	}
	nghttp2_session_del(t->s);
	close(t->fd);
	free(t);
}

#endif
