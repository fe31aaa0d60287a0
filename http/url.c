/* SPDX-License-Identifier: MIT */
/*
 * url.c - the client's URLs: an absolute http or https URL taken apart
 * (RFC 3986 3, RFC 9110 4.2), and a Location resolved against the URL it
 * answered (RFC 3986 5.2).
 *
 * Strict where a lenient reading would send something other than what
 * was written: userinfo ("user:pw@host") is refused rather than dropped
 * or sent, and so is any byte a request line cannot carry (controls,
 * spaces, non-ASCII: percent-encode them) and a '%' without two hex
 * digits. The host is a DNS name (letters, digits, '-', '.', '_'), an
 * IPv4 address, or an IPv6 one in brackets without a zone; an
 * internationalised name must come in its ASCII (punycode) form. The
 * fragment ("#...") is the client's own and never sent: it is cut off.
 */
#include "client.h"
#include "chars.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- parsing */

/* RFC 3986 3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" at
 * p[0..n). Returns the scheme's length, 0 if p does not start with one. */
static size_t scheme_len(const char *p, size_t n)
{
	size_t i = 1;

	if (n == 0 || !is_alpha((unsigned char)p[0]))
		return 0;
	while (i < n && (is_alpha((unsigned char)p[i]) || is_digit((unsigned char)p[i]) ||
	                 p[i] == '+' || p[i] == '-' || p[i] == '.'))
		i++;
	return i < n && p[i] == ':' ? i : 0;
}

static bool host_byte(unsigned char c)
{
	return is_alpha(c) || is_digit(c) || c == '-' || c == '.' || c == '_';
}

/* The host at a[0..n) (the authority without its port). */
static int parse_host(const char *a, size_t n, struct http_url *u)
{
	size_t i = 0;

	if (n > 0 && a[0] == '[') {
		bool colon = false;
		for (i = 1; i < n - 1 && (is_hex((unsigned char)a[i]) || a[i] == ':' || a[i] == '.'); i++)
			colon |= a[i] == ':';
		if (n < 4 || i != n - 1 || a[i] != ']' || !colon)
			return -EINVAL;
		u->ip6 = true;
		u->host = (struct http_slice){ a + 1, n - 2 };
		return 0;
	}
	while (i < n && host_byte((unsigned char)a[i]))
		i++;
	if (i != n || n == 0 || n > HTTP_HOST_MAX)
		return -EINVAL;
	u->host = (struct http_slice){ a, n };
	return 0;
}

/* The authority at a[0..n): host [":" port], no userinfo. */
static int parse_authority(const char *a, size_t n, struct http_url *u)
{
	size_t h = n, port = 0;

	if (memchr(a, '@', n))
		return -EINVAL;
	for (size_t i = n; i > 0; i--) { /* the last ':' outside brackets */
		if (a[i - 1] == ']')
			break;
		if (a[i - 1] == ':') {
			h = i - 1;
			break;
		}
	}
	if (h + 1 < n) {
		if (n - h - 1 > 5)
			return -EINVAL;
		for (size_t i = h + 1; i < n; i++) {
			if (!is_digit((unsigned char)a[i]))
				return -EINVAL;
			port = port * 10 + (size_t)(a[i] - '0');
		}
		if (port == 0 || port > 65535)
			return -EINVAL;
		u->default_port = port == (u->https ? 443u : 80u);
		u->port = (uint16_t)port;
	}
	return parse_host(a, h, u);
}

/* Path and query at t[0..): visible ASCII and valid escapes up to the
 * fragment or the end. */
static int parse_target(const char *t, struct http_url *u)
{
	size_t i = 0;

	for (; t[i] && t[i] != '#'; i++) {
		unsigned char c = (unsigned char)t[i];
		if (!is_vchar(c))
			return -EINVAL;
		if (c == '%' && (!is_hex((unsigned char)t[i + 1]) || !is_hex((unsigned char)t[i + 2])))
			return -EINVAL;
	}
	u->target = (struct http_slice){ t, i };
	u->slash = i == 0 || t[0] != '/';
	return 0;
}

int runtime__http_url_parse(const char *url, struct http_url *u)
{
	size_t s = scheme_len(url, strlen(url)), a, e;

	if (s == 4 && slice_ieq(url, 4, "http"))
		*u = (struct http_url){ .https = false, .port = 80 };
	else if (s == 5 && slice_ieq(url, 5, "https"))
		*u = (struct http_url){ .https = true, .port = 443 };
	else
		return s ? -EPROTONOSUPPORT : -EINVAL;
	if (url[s + 1] != '/' || url[s + 2] != '/')
		return -EINVAL;
	u->default_port = true;
	a = s + 3;
	for (e = a; url[e] && url[e] != '/' && url[e] != '?' && url[e] != '#'; e++)
		;
	int rc = parse_authority(url + a, e - a, u);
	return rc < 0 ? rc : parse_target(url + e, u);
}

/* -------------------------------------------------------------- resolving */

/* A URI reference's parts (RFC 3986 appendix B); absent parts have a NULL
 * p, present ones may be empty. */
struct ref_parts {
	struct http_slice scheme, authority, path, query;
};

static void split_ref(const char *p, size_t n, struct ref_parts *r)
{
	size_t i = 0, s = scheme_len(p, n), e;

	*r = (struct ref_parts){ { NULL, 0 }, { NULL, 0 }, { NULL, 0 }, { NULL, 0 } };
	if (s) {
		r->scheme = (struct http_slice){ p, s };
		i = s + 1;
	}
	if (n - i >= 2 && p[i] == '/' && p[i + 1] == '/') {
		for (e = i + 2; e < n && p[e] != '/' && p[e] != '?'; e++)
			;
		r->authority = (struct http_slice){ p + i + 2, e - i - 2 };
		i = e;
	}
	for (e = i; e < n && p[e] != '?'; e++)
		;
	r->path = (struct http_slice){ p + i, e - i };
	if (e < n)
		r->query = (struct http_slice){ p + e + 1, n - e - 1 };
}

/* RFC 3986 5.2.4 for an absolute path in[0..n) (anything else is copied
 * as it is): out needs n + 1 bytes. Returns out's length. */
static size_t remove_dots(const char *in, size_t n, char *out)
{
	size_t i = 0, o = 0;

	if (n == 0 || in[0] != '/') {
		memcpy(out, in, n);
		return n;
	}
	while (i < n) { /* in[i] is '/': one "/segment" at a time */
		size_t s = i + 1, e = s;
		while (e < n && in[e] != '/')
			e++;
		bool dot = e - s == 1 && in[s] == '.';
		bool dotdot = e - s == 2 && in[s] == '.' && in[s + 1] == '.';
		if (dotdot)
			while (o > 0 && out[--o] != '/')
				;
		if ((dot || dotdot) && e == n)
			out[o++] = '/'; /* "/a/b/.." is "/a/" */
		if (!dot && !dotdot) {
			memcpy(out + o, in + i, e - i);
			o += e - i;
		}
		i = e;
	}
	return o;
}

static char *put(char *o, struct http_slice s)
{
	if (s.len)
		memcpy(o, s.p, s.len);
	return o + s.len;
}

/* The merged path of RFC 3986 5.2.3 into out: base's up to its last '/',
 * then the reference's ("/" + it when base has none). */
static size_t merge(struct http_slice base, struct http_slice ref, char *out)
{
	size_t k = base.len;

	while (k > 0 && base.p[k - 1] != '/')
		k--;
	if (k == 0)
		out[k++] = '/';
	else
		memcpy(out, base.p, k);
	memcpy(out + k, ref.p, ref.len);
	return k + ref.len;
}

/* The target's path: the reference's (absolute, or merged), or base's. */
static size_t target_path(const struct ref_parts *b, const struct ref_parts *r, char *tmp,
                          char *out)
{
	if (r->scheme.p || r->authority.p || (r->path.len && r->path.p[0] == '/'))
		return remove_dots(r->path.p, r->path.len, out);
	if (r->path.len == 0) {
		memcpy(out, b->path.p, b->path.len);
		return b->path.len;
	}
	return remove_dots(tmp, merge(b->path, r->path, tmp), out);
}

int runtime__http_url_resolve(const char *base, struct http_slice ref, char **out)
{
	const char *hash = memchr(ref.p, '#', ref.len);
	size_t blen = strlen(base), cap = blen + ref.len + 8;
	struct ref_parts b, r;
	char *res = malloc(2 * cap), *tmp = res + cap, *o;

	if (!res)
		return -ENOMEM;
	if (hash)
		ref.len = (size_t)(hash - ref.p);
	if ((hash = strchr(base, '#')))
		blen = (size_t)(hash - base);
	split_ref(base, blen, &b);
	split_ref(ref.p, ref.len, &r);
	const struct ref_parts *auth = r.scheme.p || r.authority.p ? &r : &b;
	o = put(res, r.scheme.p ? r.scheme : b.scheme);
	o = put(put(o, (struct http_slice){ "://", 3 }), auth->authority);
	o += target_path(&b, &r, tmp, o);
	const struct http_slice *q = r.scheme.p || r.authority.p || r.path.len || r.query.p
	                             ? &r.query : &b.query;
	if (q->p)
		o = put(put(o, (struct http_slice){ "?", 1 }), *q);
	*o = '\0';
	*out = res;
	return 0;
}
