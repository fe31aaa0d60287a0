/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http_response.c - libFuzzer target for the client's response-head
 * parser (http/response_parser.c) and, after a chunked head, the chunked
 * decoder it shares with the server (http/parser.c).
 *
 * The first input byte picks the request the response answers (bit 0:
 * a HEAD); the rest is what the server sent: heads are parsed one after
 * another as the client does (interim 1xx ones skipped), with small
 * limits, and a chunked body after the final head is decoded whole and
 * one byte at a time. Besides the sanitizers' findings, any broken
 * invariant traps:
 *   - every prefix of a head parses as incomplete or as the whole input
 *     does (no early success, no error that more bytes would undo);
 *   - a complete head: its length is the result, within the input and
 *     head_max; status 100..599, minor 0 or 1, at most headers_max
 *     fields, every slice inside the head, each field found by lookup;
 *   - an independent scan of the accepted bytes: CR only before LF, LF
 *     only after CR, no control but HTAB, no DEL, no line starting with
 *     whitespace, the status line "HTTP/1.x NNN " and the empty line at
 *     the end; field names tokens followed by a colon;
 *   - the framing is RFC 9112 6.3's, computed again from the fields: no
 *     body for HEAD, 1xx, 204, 304; chunked with Transfer-Encoding (and
 *     never with Content-Length); Content-Length within body_max; else
 *     until the close, never kept alive;
 *   - decoding: the same result, consumption and bytes however the input
 *     is fed.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ihttp \
 *       fuzz/fuzz_http_response.c http/response_parser.c http/parser.c
 *   ./a.out -dict=fuzz/http_response.dict fuzz/corpus/http_response
 */
#include "response_parser.h"
#include "fuzz_check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct http_limits lim = {
	.line_max = 64,
	.head_max = 320,
	.headers_max = 10,
	.body_max = 4096,
};

static bool tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool name_is(struct http_slice s, const char *lit)
{
	return s.len == strlen(lit) && strncasecmp(s.p, lit, s.len) == 0;
}

/* The accepted head's bytes, scanned again without the parser's code. */
static void check_bytes(const char *b, size_t n, const struct http_response *res)
{
	CHECK(n >= 17 && memcmp(b + n - 4, "\r\n\r\n", 4) == 0); /* "HTTP/1.1 200 \r\n\r\n" */
	CHECK(memcmp(b, "HTTP/1.", 7) == 0 && b[8] == ' '); /* 1.2 and up: read as 1.1 */
	CHECK(res->minor == (b[7] > '1' ? 1 : b[7] - '0'));
	CHECK(b[12] == ' ' && (b[9] - '0') * 100 + (b[10] - '0') * 10 + (b[11] - '0') == res->status);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)b[i];
		CHECK(c != '\r' || (i + 1 < n && b[i + 1] == '\n'));
		CHECK(c != '\n' || (i > 0 && b[i - 1] == '\r'));
		CHECK(c >= 0x20 || c == '\r' || c == '\n' || c == '\t');
		CHECK(c != 0x7f);
		CHECK(i == 0 || b[i - 1] != '\n' || (c != ' ' && c != '\t'));
	}
}

/* Each field: a token, a colon right after it, a value without OWS
 * around it, found again by name. */
static void check_fields(const char *b, size_t n, const struct http_response *res)
{
	char name[400];

	CHECK(res->nheaders <= lim.headers_max);
	CHECK(inside(res->reason, b, n));
	for (unsigned i = 0; i < res->nheaders; i++) {
		const struct http_header *f = &res->headers[i];
		CHECK(inside(f->name, b, n) && inside(f->value, b, n) && f->name.len > 0);
		for (size_t k = 0; k < f->name.len; k++)
			CHECK(tchar((unsigned char)f->name.p[k]));
		CHECK(f->name.p[f->name.len] == ':');
		CHECK(!f->value.len || (f->value.p[0] != ' ' && f->value.p[0] != '\t'));
		CHECK(!f->value.len || (f->value.p[f->value.len - 1] != ' ' &&
		                        f->value.p[f->value.len - 1] != '\t'));
		CHECK(f->name.len < sizeof(name));
		memcpy(name, f->name.p, f->name.len);
		name[f->name.len] = '\0';
		const struct http_slice *v = runtime__http_response_header(res, name);
		CHECK(v && v <= &res->headers[i].value);
	}
}

/* RFC 9112 6.3, from the fields again. */
static void check_framing(const struct http_response *res, bool head)
{
	unsigned cl = 0, te = 0;

	for (unsigned i = 0; i < res->nheaders; i++) {
		cl += name_is(res->headers[i].name, "content-length");
		te += name_is(res->headers[i].name, "transfer-encoding");
	}
	CHECK(cl <= 1 && !(cl && te) && (cl == 1) == res->has_length);
	CHECK(res->minor == 1 || te == 0);
	bool none = head || res->status < 200 || res->status == 204 || res->status == 304;
	CHECK(!(res->status < 200 || res->status == 204) || (!te && (!cl || !res->content_length)));
	if (none)
		CHECK(res->body == HTTP_FRAME_NONE);
	else if (te)
		CHECK(res->body == HTTP_FRAME_CHUNKED);
	else if (cl)
		CHECK(res->body == HTTP_FRAME_LENGTH && res->content_length <= lim.body_max);
	else
		CHECK(res->body == HTTP_FRAME_CLOSE && !res->keep_alive);
}

/* Every prefix: incomplete, or the whole input's result. */
static void check_prefixes(const char *b, size_t size, unsigned flags, int whole)
{
	static struct http_response r;
	size_t upto = size < lim.head_max + 1 ? size : lim.head_max + 1;

	for (size_t k = 0; k < upto; k++) {
		int rc = runtime__http_parse_response(b, k, &lim, flags, &r);
		if (whole > 0 && k >= (size_t)whole)
			CHECK(rc == whole);
		else
			CHECK(rc == 0 || rc == whole);
	}
}

/* A chunked body decoded with the input fed in pieces of step bytes
 * (0: whole): result, bytes consumed and made. */
static int decode(const char *in, size_t len, size_t step, char *out, size_t *consumed,
                  size_t *produced)
{
	struct http_chunked c;
	size_t off = 0, made_all = 0;
	int rc;

	runtime__http_chunked_init(&c, &lim);
	do {
		size_t n = step && len - off > step ? step : len - off, used, made;
		rc = runtime__http_chunked_decode(&c, in + off, n, out + made_all, &used, &made);
		CHECK(used <= n && made <= used && (rc != 0 || used == n));
		off += used;
		made_all += made;
		CHECK(c.total == made_all && c.total <= lim.body_max);
	} while (rc == 0 && off < len);
	CHECK(rc == 1 || rc == 0 || rc == -400 || rc == -413);
	*consumed = off;
	*produced = made_all;
	return rc;
}

static void check_body(const char *in, size_t len)
{
	char *a = malloc(len + 1), *b = malloc(len + 1);
	size_t used_a, made_a, used_b, made_b;

	CHECK(a && b);
	int whole = decode(in, len, 0, a, &used_a, &made_a);
	int bytewise = decode(in, len, 1, b, &used_b, &made_b);
	CHECK(whole == bytewise && used_a == used_b && made_a == made_b);
	CHECK(memcmp(a, b, made_a) == 0);
	free(a);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct http_response res;
	unsigned flags = size && (data[0] & 1) ? HTTP_RESPONSE_TO_HEAD : 0;
	const char *b = (const char *)data + (size ? 1 : 0);
	size_t left = size ? size - 1 : 0;

	for (int heads = 0; heads < 20; heads++) {
		int rc = runtime__http_parse_response(b, left, &lim, flags, &res);
		CHECK(rc >= 0 || rc == -EBADMSG || rc == -EMSGSIZE);
		check_prefixes(b, left, flags, rc);
		if (rc <= 0)
			return 0;
		CHECK((size_t)rc <= left && (size_t)rc <= lim.head_max && res.head_len == (size_t)rc);
		CHECK(res.status >= 100 && res.status <= 599 && (res.minor == 0 || res.minor == 1));
		check_bytes(b, (size_t)rc, &res);
		check_fields(b, (size_t)rc, &res);
		check_framing(&res, flags & HTTP_RESPONSE_TO_HEAD);
		b += rc;
		left -= (size_t)rc;
		if (res.status >= 200)
			break;
	}
	if (res.body == HTTP_FRAME_CHUNKED)
		check_body(b, left);
	return 0;
}
