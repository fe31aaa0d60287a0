/* SPDX-License-Identifier: MIT */
/*
 * body.c - a whole body into one buffer, for the server's requests and
 * the client's responses alike; an iovec written whole, for the client's
 * requests and WebSocket frames.
 */
#include "body.h"

#include <runtime.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Make room for more of a body of at most max bytes: one byte beyond
 * max is room too, so that a body of max + 1 bytes shows up as too long. */
static int grow(char **buf, size_t *cap, size_t max)
{
	size_t want = *cap * 2 < max + 1 ? *cap * 2 : max + 1;
	char *bigger = realloc(*buf, want + 1);

	if (!bigger)
		return -ENOMEM;
	*buf = bigger;
	*cap = want;
	return 0;
}

int runtime__http_read_all(const struct http_body_source *src, size_t max, char **body, size_t *len)
{
	size_t cap = src->known > 0 ? (size_t)src->known : 4096, got = 0;
	char *buf;
	ssize_t n;

	if (max == SIZE_MAX)
		return -EINVAL;
	if (src->known >= 0 && (uint64_t)src->known > max)
		return (int)src->too_long(src->obj);
	if (!(buf = malloc(cap + 1)))
		return -ENOMEM;
	do {
		bool whole = src->known >= 0 && got == (uint64_t)src->known;
		if (got == cap && !whole && (n = grow(&buf, &cap, max)) < 0)
			break;
		n = src->read(src->obj, buf + got, cap - got);
		got += n > 0 ? (size_t)n : 0;
		if (got > max)
			n = src->too_long(src->obj);
	} while (n > 0);
	if (n < 0) {
		free(buf);
		return (int)n;
	}
	buf[got] = '\0';
	*body = buf;
	*len = got;
	return 0;
}

int runtime__http_writev_all(struct runtime_conn *rc, struct iovec *iov, int cnt)
{
	const struct runtime_transport *t = runtime_conn_transport(rc);

	while (cnt > 0) {
		ssize_t n = t->ops->writev(t->ctx, iov, cnt);
		if (n <= 0)
			return n ? (int)n : -EIO;
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}
