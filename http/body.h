/* SPDX-License-Identifier: MIT */
/*
 * body.h - what the server's request bodies and the client's response
 * bodies share: reading a whole body into one buffer.
 */
#ifndef HTTP_BODY_H
#define HTTP_BODY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

#endif
