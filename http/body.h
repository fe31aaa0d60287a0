/* SPDX-License-Identifier: MIT */
/*
 * body.h - what the server's request bodies and the client's response
 * bodies share: reading a whole body into one buffer; and what the
 * client and WebSocket share to send one: an iovec written whole.
 */
#ifndef HTTP_BODY_H
#define HTTP_BODY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct runtime_conn;

/* The source of a body: read(obj, buf, len) as runtime_http_body_read;
 * too_long(obj) makes -EMSGSIZE the body's sticky error and returns it. */
struct http_body_source {
	ssize_t (*read)(void *obj, void *buf, size_t len);
	ssize_t (*too_long)(void *obj);
	void *obj;
	int64_t known;  /* the length it announced, or -1 */
};

/* The whole body into a malloc'd buffer (*body, NUL-terminated after *len
 * bytes), at most max bytes. 0, -EMSGSIZE, -ENOMEM or the read's error. */
int runtime__http_read_all(const struct http_body_source *src, size_t max, char **body,
                           size_t *len);

/* All of iov[0..cnt) (modified) to rc, in as few writes as the socket
 * takes, under rc's deadlines. 0 or -errno (-EIO: a write took none). */
int runtime__http_writev_all(struct runtime_conn *rc, struct iovec *iov, int cnt);

#endif
