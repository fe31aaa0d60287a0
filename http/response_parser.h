/* SPDX-License-Identifier: MIT */
/*
 * response_parser.h - a strict, allocation-free parser for HTTP/1.1
 * response heads (RFC 9112 4, 5, 6.3), for the client. The body's
 * framing is decided here once, by the rules of RFC 9112 6.3; a chunked
 * body is then read with parser.h's decoder, the request side's own.
 *
 * Strict as the request parser is (parser.h), and for the same reason:
 * a response that a lenient client and a strict one (or a proxy in
 * between) could frame differently is an error, never a guess. Errors
 * are -errno here, as the client returns them:
 *
 *   -EBADMSG  a status line other than "HTTP/1.0" or "HTTP/1.1", SP,
 *             three digits from 100 to 599, SP, a reason of field bytes
 *             (the SP before an empty reason too); a field name that is
 *             not a token, whitespace before the colon or at the start of
 *             a line (obs-fold, or before the first field), a value byte
 *             that is a control other than HTAB, or DEL; a CR not followed
 *             by LF, or a LF without its CR, anywhere; Content-Length that
 *             is not 1*DIGIT (a list "5, 5" neither), or overflows, or
 *             comes twice (even with one value); Transfer-Encoding with
 *             Content-Length, or in an HTTP/1.0 response, or empty, or
 *             with a coding other than chunked, or chunked twice;
 *             Connection elements that are not tokens; Transfer-Encoding,
 *             or a Content-Length other than 0, in a 1xx or 204 response
 *             (RFC 9110 8.6, RFC 9112 6.1: a server must not send them)
 *   -EMSGSIZE the status line longer than line_max, the head longer than
 *             head_max, more fields than headers_max (or
 *             HTTP_HEADERS_MAX), a Content-Length that frames a body
 *             larger than body_max
 *
 * Choices where RFC 9112 6.3 leaves room, in the strict direction: a
 * Transfer-Encoding whose last coding is not chunked would be read until
 * the close; here any coding but chunked is an error (-EBADMSG), so the
 * only close-delimited bodies are those without either field.
 */
#ifndef HTTP_RESPONSE_PARSER_H
#define HTTP_RESPONSE_PARSER_H

#include "parser.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum http_framing {
	HTTP_FRAME_NONE,     /* no body: HEAD, 1xx, 204, 304 */
	HTTP_FRAME_LENGTH,   /* content_length bytes (may be 0) */
	HTTP_FRAME_CHUNKED,  /* chunked: struct http_chunked */
	HTTP_FRAME_CLOSE,    /* until the server closes (HTTP/1.0 style) */
};

struct http_response {
	int status;                  /* 100 .. 599 */
	int minor;                   /* 0: HTTP/1.0, 1: HTTP/1.1 */
	struct http_slice reason;    /* as sent, may be empty */
	struct http_header headers[HTTP_HEADERS_MAX];
	unsigned nheaders;
	enum http_framing body;
	bool has_length;             /* a Content-Length field came */
	uint64_t content_length;     /* its value (also of a HEAD's or 304's) */
	bool keep_alive;             /* the connection may carry another
	                                request: 1.1 without "Connection:
	                                close", 1.0 with "Connection:
	                                keep-alive"; never with CLOSE framing */
	size_t head_len;             /* bytes of the head, final CRLF included */
};

#define HTTP_RESPONSE_TO_HEAD 0x1u /* the request was HEAD: no body */

/*
 * Parse a response head at buf[0..len). Returns the head's length (> 0,
 * res filled in), 0 if incomplete so far (read more), or -EBADMSG /
 * -EMSGSIZE (see the top). Only the first head_max bytes are looked at,
 * and every complete line is checked as it is found, the status line
 * also while incomplete: a prefix of any input parses as incomplete or
 * exactly as the whole input does. Calling again with more bytes re-reads
 * from the start. A 1xx interim response is returned as any other (its
 * framing NONE): the caller skips it and parses what follows.
 */
int runtime__http_parse_response(const char *buf, size_t len, const struct http_limits *lim,
                                 unsigned flags, struct http_response *res);

/* Case-insensitive lookup of a field's value: NULL if absent. */
const struct http_slice *runtime__http_response_header(const struct http_response *res,
                                                       const char *name);

#endif /* HTTP_RESPONSE_PARSER_H */
