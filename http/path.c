/* SPDX-License-Identifier: MIT */
/*
 * path.c - runtime_http_path_clean: a request's path in one canonical
 * form, so that what a proxy or a router checks is what the upstream or
 * the file system will see. RFC 3986's normalisations that keep the
 * meaning (6.2.2: escapes of unreserved characters decoded, hex in upper
 * case) come first, so that "%2e%2e" is the ".." it means; then repeated
 * slashes become one and dot segments go (5.2.4), ".." never above the
 * root. Escapes of reserved characters ("%2F") stay escapes: they are data,
 * not structure.
 */
#include "http.h"
#include "chars.h"

#include <stdbool.h>
#include <string.h>

struct path_out {
	char *p;
	size_t n, cap;
};

static bool unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

static int put(struct path_out *o, char c)
{
	if (o->n + 1 >= o->cap) /* room for the NUL too */
		return -ENOBUFS;
	o->p[o->n++] = c;
	return 0;
}

/* One character of the segment at s[*i], normalised, onto o. */
static int put_char(struct path_out *o, const char *s, size_t len, size_t *i)
{
	static const char hex[] = "0123456789ABCDEF";
	unsigned char c = (unsigned char)s[*i];

	if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#')
		return -EINVAL; /* not in a path: a parser let it by, or a query */
	if (c != '%')
		return put(o, (char)c);
	if (len - *i < 3 || !is_hex((unsigned char)s[*i + 1]) || !is_hex((unsigned char)s[*i + 2]))
		return -EINVAL;
	c = (unsigned char)(hex_value((unsigned char)s[*i + 1]) << 4 |
	                    hex_value((unsigned char)s[*i + 2]));
	*i += 2;
	if (!c)
		return -EINVAL; /* an encoded NUL */
	if (unreserved(c))
		return put(o, (char)c);
	int rc = put(o, '%');
	if (rc == 0 && (rc = put(o, hex[c >> 4])) == 0)
		rc = put(o, hex[c & 15]);
	return rc;
}

/* The segment s[*i..) up to the next '/', after a '/', onto o; "." and
 * ".." taken back at once (".." with the segment before it). Returns 1 if
 * taken back (the path so far names a directory), 0 if kept. */
static int put_segment(struct path_out *o, const char *s, size_t len, size_t *i)
{
	size_t start = o->n;
	int rc = put(o, '/');

	for (; rc == 0 && *i < len && s[*i] != '/'; (*i)++)
		rc = put_char(o, s, len, i);
	if (rc < 0)
		return rc;
	const char *seg = o->p + start + 1;
	size_t seg_len = o->n - start - 1;
	if (seg_len == 2 && !memcmp(seg, "..", 2)) {
		o->n = start;
		while (o->n > 0 && o->p[o->n - 1] != '/')
			o->n--;
		o->n -= o->n > 0; /* the parent's own '/' */
		return 1;
	}
	if (seg_len == 0 || (seg_len == 1 && seg[0] == '.')) {
		o->n = start; /* "//" or "/./" */
		return 1;
	}
	return 0;
}

ssize_t runtime_http_path_clean(struct runtime_http_slice path, char *out, size_t cap)
{
	struct path_out o = { out, 0, cap };
	size_t i = 0;
	int rc = 0;

	if (!path.p || !path.len || path.p[0] != '/' || !out || !cap)
		return -EINVAL;
	while (rc >= 0 && i < path.len) {
		i++; /* the '/' */
		rc = put_segment(&o, path.p, path.len, &i);
	}
	if (rc == 1) /* ends as a directory: "/a/", "/a/.", "/a/b/.." */
		rc = put(&o, '/');
	if (rc < 0)
		return rc;
	out[o.n] = '\0';
	return (ssize_t)o.n;
}
