/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http_parser.c - libFuzzer target for libruntime-http's request
 * parser, http/parser.c.
 *
 * The input is a request: its head is parsed with small limits, and a
 * chunked body after it is decoded whole, then fed one byte at a time and
 * split in two. An input starting with a NUL byte (never a valid head) is
 * instead decoded entirely as a chunked body, to reach the decoder's
 * states directly. Besides the sanitizers' findings, any broken invariant
 * traps:
 *   - every prefix of the input parses as incomplete or as the whole input
 *     does (no early success, no error that more bytes would undo);
 *   - a complete head: head_len is the result and at most the input and
 *     head_max, every slice lies inside the head, limits are respected;
 *   - decoding: consumed <= len, produced <= consumed, total <= body_max,
 *     and the same result, consumption and output however it is fed;
 *   - independent oracles for what is accepted: the head is re-checked
 *     against the grammar by a separate, simple scan, and a complete
 *     chunked body is decoded again by a naive reference decoder, which
 *     must give the same body and end.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ihttp \
 *       fuzz/fuzz_http_parser.c http/parser.c -o fuzz_http
 *   ./fuzz_http -dict=fuzz/http.dict fuzz/corpus/http
 */
#define _GNU_SOURCE /* memmem */
#include "parser.h"
#include "fuzz_check.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct http_limits lim = {
	.line_max = 96,
	.head_max = 384,
	.headers_max = 12,
	.body_max = 4096,
};

struct decoding {
	int rc;
	size_t consumed, produced;
	uint64_t total;
};

static void check_request(const char *buf, size_t size, int rc, const struct http_request *req)
{
	CHECK((size_t)rc <= size && (size_t)rc <= lim.head_max && req->head_len == (size_t)rc);
	CHECK(req->minor == 0 || req->minor == 1);
	CHECK(req->nheaders <= lim.headers_max);
	CHECK(inside(req->method, buf, (size_t)rc) && req->method.len > 0);
	CHECK(inside(req->target, buf, (size_t)rc) && req->target.len > 0);
	CHECK(req->method.len + 1 + req->target.len + 9 <= lim.line_max);
	for (unsigned i = 0; i < req->nheaders; i++) {
		const struct http_header *f = &req->headers[i];
		CHECK(inside(f->name, buf, (size_t)rc) && f->name.len > 0);
		CHECK(inside(f->value, buf, (size_t)rc));
	}
	CHECK(!req->host.p || inside(req->host, buf, (size_t)rc));
	CHECK(req->minor == 0 || req->host.p);
	CHECK(req->body != HTTP_BODY_LENGTH || req->content_length <= lim.body_max);
	CHECK(req->body == HTTP_BODY_LENGTH || req->content_length == 0);
	CHECK(req->minor == 1 || req->body != HTTP_BODY_CHUNKED);
}

static bool tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool name_is(struct http_slice s, const char *lit)
{
	return s.len == strlen(lit) && strncasecmp(s.p, lit, s.len) == 0;
}

/* The accepted head, scanned again: CR only in CRLF, no other controls,
 * no line starting with whitespace, one SP between the request line's
 * parts, ending in an empty line. Any empty lines before the request
 * line are skipped (RFC 9112 2.2), not only one. */
static void check_head_bytes(const char *b, size_t n, const struct http_request *req)
{
	size_t start = 0;

	while (start + 2 <= n && b[start] == '\r' && b[start + 1] == '\n')
		start += 2;

	CHECK(n >= 4 && memcmp(b + n - 4, "\r\n\r\n", 4) == 0);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)b[i];
		CHECK(c != '\r' || b[i + 1] == '\n');
		CHECK(c != '\n' || (i > 0 && b[i - 1] == '\r'));
		CHECK(c >= 0x20 || c == '\r' || c == '\n' || c == '\t');
		CHECK(c != 0x7f);
		CHECK(i == 0 || b[i - 1] != '\n' || (c != ' ' && c != '\t'));
	}
	CHECK(req->method.p == b + start && req->method.p[req->method.len] == ' ');
	CHECK(req->target.p == req->method.p + req->method.len + 1);
	CHECK(memcmp(req->target.p + req->target.len, " HTTP/1.", 8) == 0);
	CHECK(req->target.p[req->target.len + 9] == '\r');
	char digit = req->target.p[req->target.len + 8]; /* 1.2 and up: read as 1.1 */
	CHECK(req->minor == (digit > '1' ? 1 : digit - '0'));
}

/* Each field: a token name, a colon, a value without OWS around it; the
 * framing fields as the result says. */
static void check_fields(const struct http_request *req)
{
	unsigned cl = 0, te = 0, host = 0;

	for (unsigned i = 0; i < req->nheaders; i++) {
		const struct http_header *f = &req->headers[i];
		for (size_t k = 0; k < f->name.len; k++)
			CHECK(tchar((unsigned char)f->name.p[k]));
		CHECK(f->name.p[f->name.len] == ':');
		CHECK(f->value.len == 0 || (f->value.p[0] != ' ' && f->value.p[0] != '\t'));
		CHECK(f->value.len == 0 || (f->value.p[f->value.len - 1] != ' ' &&
		                            f->value.p[f->value.len - 1] != '\t'));
		cl += name_is(f->name, "content-length");
		te += name_is(f->name, "transfer-encoding");
		host += name_is(f->name, "host");
	}
	CHECK(cl <= 1 && host <= 1 && !(cl && te));
	CHECK(req->minor == 0 || host == 1);
	CHECK((req->body == HTTP_BODY_LENGTH) == (cl == 1));
	CHECK((req->body == HTTP_BODY_CHUNKED) == (te > 0));
}

/*
 * A naive decoder of a chunked body already known to be valid: size in
 * hex, skip to CRLF, data, CRLF; after the last chunk, lines up to an
 * empty one. Returns the bytes it spans; the body goes to out.
 */
static size_t reference_decode(const char *in, size_t len, char *out, size_t *produced)
{
	size_t pos = 0, size;
	const char *eol;

	*produced = 0;
	do {
		for (size = 0; isxdigit((unsigned char)in[pos]); pos++)
			size = size * 16 + (size_t)(isdigit((unsigned char)in[pos]) ?
			                            in[pos] - '0' : (in[pos] | 0x20) - 'a' + 10);
		eol = memmem(in + pos, len - pos, "\r\n", 2);
		CHECK(eol && len - (size_t)(eol + 2 - in) >= size);
		pos = (size_t)(eol - in) + 2;
		memcpy(out + *produced, in + pos, size);
		*produced += size;
		pos += size + (size ? 2 : 0);
	} while (size);
	while ((eol = memmem(in + pos, len - pos, "\r\n", 2)) != in + pos) {
		CHECK(eol);
		pos = (size_t)(eol - in) + 2;
	}
	return pos + 2;
}

/* runtime__http_header_get finds each field's name, at it or at an earlier one. */
static void check_lookup(const struct http_request *req)
{
	char name[512];

	for (unsigned i = 0; i < req->nheaders; i++) {
		const struct http_slice *n = &req->headers[i].name, *v;
		CHECK(n->len < sizeof(name));
		memcpy(name, n->p, n->len);
		name[n->len] = '\0';
		v = runtime__http_header_get(req, name);
		CHECK(v && v <= &req->headers[i].value);
		for (size_t k = 0; k < n->len; k++) /* the other case: the same field */
			if ((name[k] | 0x20) >= 'a' && (name[k] | 0x20) <= 'z')
				name[k] ^= 0x20;
		CHECK(runtime__http_header_get(req, name) == v);
	}
}

/* Every prefix gives 0 or the whole input's result (with the same head).
 * Past head_max + 1 bytes a prefix sees what the whole input does. */
static void check_prefixes(const char *buf, size_t size, int whole, const struct http_request *req)
{
	static struct http_request r;
	size_t upto = size < lim.head_max + 1 ? size : lim.head_max + 1;

	for (size_t k = 0; k < upto; k++) {
		int rc = runtime__http_parse_head(buf, k, &lim, &r);
		if (whole > 0 && k >= (size_t)whole)
			CHECK(rc == whole && r.nheaders == req->nheaders &&
			      r.body == req->body && r.keep_alive == req->keep_alive);
		else
			CHECK(rc == 0 || rc == whole);
	}
}

/* Decode in[0..len) fed in pieces of at most step bytes (0: whole). */
static void decode(const char *in, size_t len, size_t step, char *out, struct decoding *d)
{
	struct http_chunked c;
	size_t off = 0;

	runtime__http_chunked_init(&c, &lim);
	*d = (struct decoding){ .rc = 0 };
	do {
		size_t n = step && len - off > step ? step : len - off, used, made;
		d->rc = runtime__http_chunked_decode(&c, in + off, n, out + d->produced, &used, &made);
		CHECK(used <= n && made <= used);
		CHECK(d->rc != 0 || used == n);
		off += used;
		d->produced += made;
		CHECK(c.total == d->produced && c.total <= lim.body_max);
	} while (d->rc == 0 && off < len);
	d->consumed = off;
	d->total = c.total;
	CHECK(d->rc == 1 || d->rc == 0 || d->rc == -400 || d->rc == -413);
}

static void check_body(const char *in, size_t len)
{
	char *a = malloc(len + 1), *b = malloc(len + 1);
	struct decoding whole, other;
	size_t steps[] = { 1, 2, 7, len / 2 + 1 };

	CHECK(a && b);
	decode(in, len, 0, a, &whole);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		decode(in, len, steps[i], b, &other);
		CHECK(other.rc == whole.rc && other.consumed == whole.consumed);
		CHECK(other.produced == whole.produced && other.total == whole.total);
		CHECK(memcmp(a, b, whole.produced) == 0);
	}
	if (whole.rc == 1) { /* the reference agrees; decoding in place too */
		size_t made, end = reference_decode(in, len, b, &made);
		CHECK(end == whole.consumed && made == whole.produced);
		CHECK(memcmp(a, b, made) == 0);
		memcpy(b, in, len);
		decode(b, len, 0, b, &other);
		CHECK(other.rc == 1 && memcmp(a, b, whole.produced) == 0);
	}
	free(a);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_request req;
	const char *buf = (const char *)data;
	int rc;

	if (size > 0 && data[0] == 0) {
		check_body(buf + 1, size - 1);
		return 0;
	}
	rc = runtime__http_parse_head(buf, size, &lim, &req);
	CHECK(rc >= 0 || rc == -400 || rc == -413 || rc == -414 || rc == -417 ||
	      rc == -431 || rc == -501 || rc == -505);
	check_prefixes(buf, size, rc, &req);
	if (rc <= 0)
		return 0;
	check_request(buf, size, rc, &req);
	check_head_bytes(buf, (size_t)rc, &req);
	check_fields(&req);
	check_lookup(&req);
	if (req.body == HTTP_BODY_CHUNKED)
		check_body(buf + rc, size - (size_t)rc);
	return 0;
}
