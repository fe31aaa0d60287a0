/* SPDX-License-Identifier: MIT */
/*
 * http_rejections.h - requests the HTTP demo must refuse, each with the
 * status it answers before it closes the connection: the rejection test
 * (check_http_server) sends each once, the soak's malformed clients
 * (soak_clients) send them over and over.
 */
#ifndef HTTP_REJECTIONS_H
#define HTTP_REJECTIONS_H

struct http_rejection {
	const char *req;
	int status;
};

/* The entries of a struct http_rejection array. */
#define HTTP_REJECTIONS \
	{ "GET / HTTP/1.1\r\n\r\n", 400 },                              /* no Host */ \
	{ "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400 },        /* two Hosts */ \
	{ "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400 },                  /* bad request line */ \
	{ "GET / HTTP/1.x\r\nHost: a\r\n\r\n", 400 },                   /* bad version */ \
	{ "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505 }, \
	{ "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400 },                  /* space before colon */ \
	{ "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400 },     /* obs-fold */ \
	{ "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", 400 },            /* bare CR */ \
	{ "GET / HTTP/1.1\nHost: a\n\n", 400 },                         /* bare LF */ \
	{ "GET / HTTP/1.1\r\nHost: a\r\nX: a\x01" "b\r\n\r\n", 400 },   /* control byte */ \
	{ "GET / HTTP/1.1\r\nHo(st: a\r\n\r\n", 400 },                  /* bad name */ \
	{ "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400 }, \
	{ "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\na", 400 }, \
	{ "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n" \
	  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400 },          /* CL + TE */ \
	{ "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501 }, \
	{ "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n", 501 }, \
	{ "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400 }, \
	{ "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" \
	  "fffffffffffffffffff\r\n", 400 },                              /* chunk overflow */ \
	{ "POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400 }, \
	{ "GET / HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n", 417 }, \
	{ "GET /a/%zz HTTP/1.1\r\nHost: a\r\n\r\n", 400 },             /* bad escape */ \
	{ "GET /a?b=%4 HTTP/1.1\r\nHost: a\r\n\r\n", 400 },

#endif
