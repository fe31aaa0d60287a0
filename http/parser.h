/* SPDX-License-Identifier: MIT */
/*
 * parser.h - a strict, allocation-free parser for HTTP/1.1 requests
 * (RFC 9112 message syntax, RFC 9110 semantics), for libruntime-http.
 *
 * Strict means: whatever a lenient server and a strict one could read
 * differently (the request-smuggling and HTTP Garden classes) is an error,
 * reported as the HTTP status to answer with before closing the
 * connection. Nothing here allocates; every pointer a result holds points
 * into the caller's buffer.
 *
 * Errors are negative HTTP status codes:
 *   -400  malformed or ambiguous: request line, version syntax, header
 *         name or value bytes (NUL, CR, LF, other controls, DEL),
 *         whitespace before a colon or at the start of the header section,
 *         obs-fold, bare CR or bare LF anywhere, Content-Length that is not
 *         1*DIGIT or overflows, Content-Length more than once or as a list,
 *         Transfer-Encoding together with Content-Length, Transfer-Encoding
 *         in an HTTP/1.0 request, "chunked" not last or more than once,
 *         missing or repeated Host in HTTP/1.1, bad chunk size, extension
 *         or trailer syntax, chunk size overflow
 *   -413  body larger than limits.body_max
 *   -414  request line longer than limits.line_max
 *   -417  an Expect other than 100-continue
 *   -431  header section larger than limits.head_max, or more fields than
 *         limits.headers_max (or HTTP_HEADERS_MAX)
 *   -501  a transfer coding other than chunked
 *   -505  an HTTP major version other than 1 (well-formed, e.g. 2.0);
 *         1.2 and up are read as 1.1
 */
#ifndef HTTP_PARSER_H
#define HTTP_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_HEADERS_MAX 64

struct http_limits {
	size_t line_max;        /* request line, CRLF excluded */
	size_t head_max;        /* request line + header section + final CRLF */
	unsigned headers_max;   /* at most HTTP_HEADERS_MAX */
	uint64_t body_max;      /* decoded body bytes */
};

struct http_slice {
	const char *p;
	size_t len;
};

struct http_header {
	struct http_slice name;  /* as sent (compare case-insensitively) */
	struct http_slice value; /* leading and trailing OWS removed */
};

enum http_body {
	HTTP_BODY_NONE,      /* no Content-Length, no Transfer-Encoding */
	HTTP_BODY_LENGTH,    /* content_length bytes follow (may be 0) */
	HTTP_BODY_CHUNKED,   /* chunked: use struct http_chunked */
};

struct http_request {
	struct http_slice method;
	struct http_slice target;
	size_t query;                /* offset in target of its first '?', or
	                                target.len if it has none */
	int minor;                   /* 0: HTTP/1.0, 1: HTTP/1.1 */
	struct http_header headers[HTTP_HEADERS_MAX];
	unsigned nheaders;
	struct http_slice host;      /* the Host field's value, if any */
	enum http_body body;
	uint64_t content_length;     /* HTTP_BODY_LENGTH */
	bool keep_alive;             /* 1.1 unless "Connection: close"; 1.0 only
	                                with "Connection: keep-alive" */
	bool expect_continue;        /* "Expect: 100-continue" */
	size_t head_len;             /* bytes of the head, final CRLF included */
};

/*
 * Parse a request head at buf[0..len). Returns:
 *   > 0  complete: the head's length (req filled in; the body, if any,
 *        starts at buf + the result)
 *   0    incomplete so far (no error in what is there): read more
 *   < 0  -status (see the top)
 * (req is the result of a complete head only: after 0 or an error it is
 * left part filled.)
 * Incomplete input is reported as an error as soon as it is certain to be
 * one: a request line already longer than line_max (-414), a head already
 * longer than head_max (-431), an invalid byte (-400). Calling again with
 * more bytes re-reads from the start (the head is small: at most head_max).
 */
int runtime__http_parse_head(const char *buf, size_t len, const struct http_limits *lim,
                             struct http_request *req);

/* A request-target alone, t[0..n) for method, by the rules of a request
 * line's (HTTP/2's :path, or :authority for CONNECT): 0 and *query (the
 * offset of its first '?', or n), or -400. */
int runtime__http_target_check(struct http_slice method, const char *t, size_t n, size_t *query);

/* Case-insensitive lookup of a header's value: NULL if absent. */
const struct http_slice *runtime__http_header_get(const struct http_request *req, const char *name);

/*
 * Incremental decoder of a chunked body (RFC 9112 7.1): chunk sizes in
 * hex, chunk extensions (parsed, checked, ignored), the last chunk, and
 * trailer fields (checked as header fields are, ignored).
 */
struct http_chunked {
	int state;               /* private */
	uint64_t remaining;      /* private: data left in the current chunk */
	uint64_t total;          /* decoded bytes so far */
	uint64_t body_max;
	size_t line;             /* private: bytes of the current size/trailer line */
	size_t head_max;         /* bound on one size or trailer line */
};

void runtime__http_chunked_init(struct http_chunked *c, const struct http_limits *lim);

/*
 * Decode from in[0..len): body bytes are copied to out (which may be in,
 * or any buffer of at least len bytes: output never exceeds input).
 * *consumed receives the input bytes used and *produced the body bytes
 * written. Returns 1 once the body (trailers included) is complete (bytes
 * after it in the input are the next request's: they are not consumed),
 * 0 if more input is needed, or -400 / -413 (see the top).
 */
int runtime__http_chunked_decode(struct http_chunked *c, const char *in, size_t len, char *out,
                                 size_t *consumed, size_t *produced);

#endif /* HTTP_PARSER_H */
