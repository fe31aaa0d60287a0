/* SPDX-License-Identifier: MIT */
/*
 * parser.c - the strict HTTP/1.1 request parser of parser.h:
 * the request head (request line, header fields, the framing and the
 * connection semantics drawn from them) and an incremental decoder of
 * chunked bodies. Nothing allocates and nothing recurses; all state is in
 * the caller's structures.
 *
 * The head is read left to right, line by line, and every check fires at
 * the first byte that decides it: so a prefix of any input parses either
 * as incomplete (0) or exactly as the whole input does, and an error is
 * reported as soon as the bytes that make it certain have arrived. Only
 * the first head_max bytes are ever looked at; needing more than that is
 * -431.
 *
 * What most requests carry is read by shorter paths: "GET ", the common
 * field names with ": ", a Host that is a reg-name and perhaps a port,
 * Connection keep-alive or close, compared a word at a time. Each takes
 * only input that the general path would read the same way, and falls to
 * it otherwise (tests/check_http_parser.c tries every byte there). Runs
 * of a class (a target, a value, a host, a name) are scanned sixteen
 * bytes a step where SSE2 is, else a word or a byte at a time (chars.h).
 *
 * Choices where the RFCs leave room (all in the strict direction):
 *  - Empty lines (CRLF) before the request line are skipped, as nginx
 *    does (RFC 9112 2.2: a server SHOULD ignore at least one; a client
 *    may send one after a POST body); a bare CR or LF there is -400. The
 *    skipped lines count in head_len, so head_max and the header timeout
 *    bound them.
 *  - The request-target is visible ASCII without '#' (no form carries a
 *    fragment), each '%' the start of an escape of two hex digits (RFC
 *    3986 2.1; the client's rule too, so that a proxy on both never
 *    takes what it cannot send on). "*" only with OPTIONS, authority-form (host:port, the port
 *    required) only and always with CONNECT (RFC 9112 3.2.3, 3.2.4),
 *    absolute-form only for http:// and https:// with a non-empty host
 *    and no userinfo (RFC 9110 4.2.1, 4.2.4).
 *  - Host, and the authority of an absolute-form target: a reg-name
 *    (RFC 3986 characters, valid %XX, but no ',' so that no recipient can
 *    read a list), an IPv4 address, or "[" hex digits, ':' and '.' "]";
 *    the port at most 65535 (it may be empty, as RFC 3986 allows).
 *  - Transfer-Encoding, Connection: list elements must be tokens (-400).
 *    Since chunked is the only coding, "chunked not last" can only be a
 *    second chunked: any other coding is -501 wherever it is. A
 *    Transfer-Encoding whose list is empty is -400 (no final chunked:
 *    RFC 9112 6.3).
 *  - HTTP/1.x only: a higher minor version ("HTTP/1.2") is read as 1.1
 *    (RFC 9110 2.5: a recipient uses the highest minor it implements);
 *    other majors are -505.
 *  - Expect: 100-continue is ignored in HTTP/1.0 (RFC 9110 10.1.1); any
 *    other expectation is -417 in both versions.
 *  - The head's length is returned as an int: head_max is taken as at
 *    most INT_MAX.
 *
 * The chunked decoder is a byte-at-a-time state machine except in chunk
 * data, which is copied in runs. Its size and trailer lines are bounded
 * by head_max each, and the whole trailer section by head_max too (-400).
 * An error is sticky: later calls return it again.
 */
#include "parser.h"
#include "chars.h"

#include <limits.h>
#include <string.h>

/* ------------------------------------------------------------- authority */

/* Length of an IP-literal "[...]" at p[0..n), 0 if there is none. */
static size_t ip_literal_len(const char *p, size_t n)
{
	size_t i = 1;
	bool colon = false;

	while (i < n && (is_hex((unsigned char)p[i]) || p[i] == ':' || p[i] == '.'))
		colon |= p[i++] == ':';
	if (i == n || p[i] != ']' || !colon)
		return 0;
	return i + 1;
}

/* Length of the uri-host at the start of p[0..n): 0 if it is empty or has
 * a bad %-escape. */
static size_t host_len(const char *p, size_t n)
{
	size_t i = 0;

	if (n > 0 && p[0] == '[')
		return ip_literal_len(p, n);
	for (;;) {
		i = skip_class(p, i, n, REGNAME);
		if (i == n || p[i] != '%')
			return i;
		if (n - i < 3 || !is_hex((unsigned char)p[i + 1]) || !is_hex((unsigned char)p[i + 2]))
			return 0;
		i += 3;
	}
}

static bool valid_port(const char *p, size_t n, bool required)
{
	unsigned v = 0;

	if (n == 0)
		return !required;
	if (n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit((unsigned char)p[i]))
			return false;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	return v <= 65535;
}

/* uri-host [":" port], the host non-empty; the port is required if asked. */
static bool valid_authority(const char *p, size_t n, bool port_required)
{
	size_t i = host_len(p, n);

	if (i == 0)
		return false;
	if (i == n)
		return !port_required;
	if (p[i] != ':')
		return false;
	return valid_port(p + i + 1, n - i - 1, port_required);
}

/* absolute-form for http and https: scheme "://" authority, then a path
 * or query (their bytes were checked already). */
static bool absolute_form(const char *t, size_t n)
{
	size_t a, e;

	if (n >= 7 && slice_ieq(t, 7, "http://"))
		a = 7;
	else if (n >= 8 && slice_ieq(t, 8, "https://"))
		a = 8;
	else
		return false;
	e = a;
	while (e < n && t[e] != '/' && t[e] != '?')
		e++;
	return valid_authority(t + a, e - a, false);
}

/* ------------------------------------------------------------------ head */

enum { MORE = 1, DONE = 2 }; /* line results besides 0 (a line read) and -status */

/* What the fields seen so far said, as bits of one word: one store sets
 * them all clear, where seven bools cost seven, and finish reads them
 * from one load. HAS_CL and CHUNKED are the body's kinds (finish). */
enum {
	HAS_CL = 1, CHUNKED = 2, HAS_TE = 4, HAS_HOST = 8, CLOSE = 16, KEEP = 32, EXPECT = 64,
	TE_PENDING = 128, /* HAS_TE without CHUNKED: kept so, for finish's one test */
};

struct head {
	const char *b;
	size_t view;               /* bytes looked at: min(len, head_max) */
	const struct http_limits *lim;
	size_t line_max;           /* lim->line_max, read by head_init while lim is in a
	                            * register: read by request_line through lim, GCC
	                            * spilled lim and loaded it back (1 fewer a head) */
	struct http_request *req;
	struct http_header *fields_end; /* past the last field allowed */
	unsigned seen;             /* HAS_CL ... TE_PENDING */
};

/* What ends the line whose content stops at q: 0 for CRLF, MORE if that
 * is not known yet, -400 for a bare LF or a CR followed by anything else. */
static int terminator(const struct head *h, size_t q)
{
	if (q >= h->view)
		return MORE;
	if (h->b[q] == '\n')
		return -400;
	if (q + 1 >= h->view)
		return MORE;
	return h->b[q + 1] == '\n' ? 0 : -400;
}

/* Inlined in both callers: out of line, each request paid 13 for it. */
static inline __attribute__((always_inline)) int check_target(struct http_slice method,
                                                              const char *t, size_t n)
{
	bool connect = slice_eq(method, "CONNECT");

	if (t[0] == '/')
		return connect ? -400 : 0;
	if (t[0] == '*')
		return n == 1 && slice_eq(method, "OPTIONS") ? 0 : -400;
	if (connect)
		return valid_authority(t, n, true) ? 0 : -400;
	return absolute_form(t, n) ? 0 : -400;
}

/* HTTP-version at v[0..n), matched as far as it has arrived; *minor set
 * if it is whole. (Not given the head: out of line, its pointer would
 * keep struct head in memory, as every helper here that is not inlined.) */
static int check_version(const char *v, size_t n, bool whole, int *minor)
{
	static const char pattern[] = "HTTP/#.#";

	for (size_t k = 0; k < n; k++) {
		if (k >= sizeof(pattern) - 1)
			return -400;
		if (pattern[k] == '#' ? !is_digit((unsigned char)v[k]) : v[k] != pattern[k])
			return -400;
	}
	if (!whole)
		return 0;
	if (n != sizeof(pattern) - 1)
		return -400;
	if (v[5] != '1')
		return -505;
	*minor = v[7] > '1' ? 1 : v[7] - '0'; /* 1.2 and up: as 1.1 (RFC 9110 2.5) */
	return 0;
}

/* The request line's scan reached lim, the line unfinished: MORE if the
 * input ran out, -414 if line_max did - unless the line ends right there,
 * lacking a part: -400 once its CRLF is whole. */
static int ran_out(const struct head *h, size_t lim)
{
	int term;

	if (lim == h->view)
		return MORE;
	if (h->b[lim] != '\r' && h->b[lim] != '\n')
		return -414;
	term = terminator(h, lim);
	return term == 0 ? -400 : term;
}

/* The version at v and the request line's CRLF (lim as in request_line);
 * on success *pos moves past the CRLF. HTTP/1.1 or 1.0 and a CRLF, the
 * common case, are two compares, when the CRLF lies before lim (lim is at
 * most view: one bound to test). Else the line's end is found, which may
 * lie one byte past lim (a line of exactly line_max bytes). */
static int request_version(struct head *h, size_t v, size_t lim, size_t *pos)
{
	const char *b = h->b;
	size_t stop, q;
	int rc, term;

	if (v + 10 <= lim && !memcmp(b + v + 8, "\r\n", 2) &&
	    (!memcmp(b + v, "HTTP/1.1", 8) || !memcmp(b + v, "HTTP/1.0", 8))) {
		h->req->minor = b[v + 7] - '0';
		*pos = v + 10;
		return 0;
	}
	stop = lim < h->view ? lim + 1 : lim; /* not set before: GCC computed it first */
	q = find_eol(b, v, stop);
	if (q == stop && lim < h->view) {
		rc = check_version(b + v, lim - v, false, &h->req->minor);
		return rc < 0 ? rc : -414;
	}
	term = terminator(h, q);
	if ((rc = check_version(b + v, q - v, term == 0, &h->req->minor)) < 0)
		return rc;
	if (term != 0)
		return term;
	*pos = q + 2;
	return 0;
}

/* b[i] is a '%': the end of its escape (i + 3); or where the target
 * stops: lim if lim cuts the escape (ran_out: more to come, or -414), else
 * i for a bad one - the '%' is no target byte then (-400). A server
 * refuses what its client would (RFC 3986 2.1: '%' begins an escape). */
static __attribute__((noinline)) size_t escape_end(const char *b, size_t i, size_t lim)
{
	for (size_t k = i + 1; k < i + 3; k++) {
		if (k == lim)
			return lim;
		if (!is_hex((unsigned char)b[k]))
			return i;
	}
	return i + 3;
}

/* The path's run from i: the first byte of it that is not a target's,
 * '?' or '%'. Sixteen bytes a step where SSE2 is. Inlined in
 * target_end's first scan, which most targets end with: a call there
 * cost 40 instructions a request. */
static inline __attribute__((always_inline)) size_t path_run(const char *b, size_t t, size_t i,
                                                             size_t lim)
{
#ifdef __SSE2__
	return SKIP_SHORT_RUN(b, t, i, lim, path_end);
#else
	/* A short path a byte a time (a table's class: the word-at-a-time
	 * scan's set-up costs more than its words save), a long one's rest
	 * a word at a time. */
	size_t e = lim - i > 16 ? i + 16 : lim;
	size_t k = skip_class(b, i, e, PATH);

	return k == e && e < lim ? skip_run(b, t, k, lim, path_end_in, is_path_end) : k;
#endif
}

/* What follows an escape in the path, or in the query: on to the next
 * stop that is not a good escape's '%'. */
static __attribute__((noinline)) size_t escapes(const char *b, size_t t, size_t i, size_t lim,
                                                bool query)
{
	while (i < lim && b[i] == '%') {
		size_t e = escape_end(b, i, lim);
		if (e == i || e == lim)
			return e;
		i = query ? SKIP_RUN(b, t, e, lim, query_end) : path_run(b, t, e, lim);
	}
	return i;
}

/* The request-target's end from t, up to lim: its first byte that is not
 * a target's (the SP after it, if the line is good), *query at its first
 * '?' or there. */
static inline __attribute__((always_inline)) size_t target_end(const char *b, size_t t,
                                                               size_t lim, size_t *query)
{
	size_t i = path_run(b, t, t, lim);

	if (__builtin_expect(i < lim && b[i] == ' ', 1)) { /* no query, no escape: one test */
		*query = i;
		return i;
	}
	i = escapes(b, t, i, lim, false);
	*query = i;
	if (i < lim && b[i] == '?')
		i = escapes(b, t, SKIP_RUN(b, t, i + 1, lim, query_end), lim, true);
	return i;
}

int runtime__http_target_check(struct http_slice method, const char *t, size_t n, size_t *query)
{
	if (!n || target_end(t, 0, n, query) != n)
		return -400;
	if (t[n - 1] == '%' || (n > 1 && t[n - 2] == '%'))
		return -400; /* an escape cut by the end (target_end expects more) */
	return check_target(method, t, n);
}

/* The method at s, up to lim (as in request_line): 0 with *sp at the SP
 * after it, or what the line is so far. */
static int method(const struct head *h, size_t s, size_t lim, size_t *sp)
{
	const char *b = h->b;
	size_t i = skip_tchars(b, s, lim);

	if (i == lim || (i > s && (b[i] == '\r' || b[i] == '\n')))
		return ran_out(h, i); /* more to come, or a line without a target */
	if (i == s || b[i] != ' ') /* also an empty line, or a bare CR or LF */
		return -400;
	*sp = i;
	return 0;
}

/*
 * The request line at *pos, read once left to right: the method, the
 * target, the version and its CRLF; on success *pos moves past the CRLF.
 * Only its first line_max bytes are looked at (ran_out). A part is judged
 * whole only once the line's CRLF has come (a version 2.0 is -505 then).
 * "GET ", most requests' start, is one compare.
 */
static int request_line(struct head *h, size_t *pos)
{
	const char *b = h->b;
	size_t s = *pos, lim = h->view - s > h->line_max ? s + h->line_max : h->view;
	size_t i, t, q;
	int rc;

	if (lim - s >= 4 && !memcmp(b + s, "GET ", 4))
		i = s + 3;
	else if ((rc = method(h, s, lim, &i)) != 0)
		return rc;
	h->req->method = (struct http_slice){ b + s, i - s };
	t = ++i;
	i = target_end(b, t, lim, &q);
	if (i == lim || b[i] != ' ') { /* not the common case: why */
		if (i == lim || (i > t && (b[i] == '\r' || b[i] == '\n')))
			return ran_out(h, i);
		return -400;
	}
	if ((rc = check_target(h->req->method, b + t, i - t)) < 0)
		return rc;
	h->req->target = (struct http_slice){ b + t, i - t }; /* with query: req read once */
	h->req->query = q - t;
	return request_version(h, i + 1, lim, pos);
}

/* A Content-Length's value: 0 with *n, or -status. Out of line, as
 * codings and expectations are: fields that most requests lack, and whose
 * code inlined into the field loop took its registers. None of these is
 * given the head: a pointer to it, passed out of line, kept every field
 * of struct head in memory, where now only their callers (inlined) read
 * and set the head. */
static __attribute__((noinline)) int length_value(struct http_slice v, uint64_t max, uint64_t *n)
{
	uint64_t x = 0;

	if (v.len == 0 || v.len > 19)
		return -400;
	for (size_t i = 0; i < v.len; i++) {
		if (!is_digit((unsigned char)v.p[i]))
			return -400;
		x = x * 10 + (uint64_t)(v.p[i] - '0'); /* 19 digits cannot overflow */
	}
	if (x > max)
		return -413;
	*n = x;
	return 0;
}

static int content_length(struct head *h, struct http_slice v)
{
	int rc;

	if (h->seen & (HAS_CL | HAS_TE))
		return -400;
	if ((rc = length_value(v, h->lim->body_max, &h->req->content_length)) == 0)
		h->seen |= HAS_CL;
	return rc;
}

/* A Transfer-Encoding's codings, chunked already seen or not: whether it
 * is now (1 or 0), or -status. */
static __attribute__((noinline)) int codings(struct http_slice v, bool chunked)
{
	const char *cur = v.p;
	struct http_slice el;
	int rc;

	while ((rc = next_token(&cur, v.p + v.len, &el)) > 0) {
		if (!slice_ieq(el.p, el.len, "chunked"))
			return -501;
		if (chunked)
			return -400;
		chunked = true;
	}
	return rc < 0 ? -400 : chunked;
}

static int transfer_encoding(struct head *h, struct http_slice v)
{
	int rc;

	if (h->req->minor == 0 || (h->seen & HAS_CL))
		return -400;
	h->seen |= HAS_TE;
	if ((rc = codings(v, h->seen & CHUNKED)) < 0)
		return rc;
	h->seen = (h->seen & ~(unsigned)TE_PENDING) | (rc ? CHUNKED : TE_PENDING);
	return 0;
}

/* The Host field. A reg-name without escapes or port, the common case,
 * is told valid by its bytes alone, without valid_authority's call. */
static int host_field(struct head *h, struct http_slice v)
{
	if (h->seen & HAS_HOST)
		return -400;
	h->seen |= HAS_HOST;
	h->req->host = v;
	if (skip_class(v.p, 0, v.len, REGNAME) == v.len)
		return 0; /* empty too */
	return valid_authority(v.p, v.len, false) ? 0 : -400;
}

/* The options read into copies: connection_options is out of line, and
 * pointers into the head would keep it in memory. */
static int connection(struct head *h, struct http_slice v)
{
	bool close = false, keep = false, ok = connection_options(v, &close, &keep);

	h->seen |= (close ? CLOSE : 0) | (keep ? KEEP : 0);
	return ok ? 0 : -400;
}

/* An Expect's expectations: 1 if 100-continue is among them, 0 if none
 * is, or -417. */
static __attribute__((noinline)) int expectations(struct http_slice v)
{
	const char *cur = v.p;
	struct http_slice el;
	int seen = 0;

	while (next_element(&cur, v.p + v.len, &el)) {
		if (el.len == 0)
			continue;
		if (!slice_ieq(el.p, el.len, "100-continue"))
			return -417;
		seen = 1;
	}
	return seen;
}

static int expect(struct head *h, struct http_slice v)
{
	int rc = expectations(v);

	h->seen |= rc > 0 ? EXPECT : 0;
	return rc < 0 ? rc : 0;
}

/* What a field means to the parser, by its name; the last three also say
 * that its value was read and found to be the common one already. */
enum field_kind {
	F_OTHER, F_HOST, F_EXPECT, F_CONNECTION, F_CONTENT_LENGTH, F_TRANSFER_ENCODING,
	F_HOST_REGNAME,  /* Host: a reg-name, no escape, perhaps a port */
	F_KEEP_ALIVE,    /* Connection: keep-alive */
	F_CLOSE,         /* Connection: close */
};

/* The kind of a name read byte by byte: told apart by length first, as
 * most names are none of these. */
static int name_kind(const char *p, size_t n)
{
	switch (n) {
	case 4:
		return slice_ieq(p, 4, "host") ? F_HOST : F_OTHER;
	case 6:
		return slice_ieq(p, 6, "expect") ? F_EXPECT : F_OTHER;
	case 10:
		return slice_ieq(p, 10, "connection") ? F_CONNECTION : F_OTHER;
	case 14:
		return slice_ieq(p, 14, "content-length") ? F_CONTENT_LENGTH : F_OTHER;
	case 17:
		return slice_ieq(p, 17, "transfer-encoding") ? F_TRANSFER_ENCODING : F_OTHER;
	default:
		return F_OTHER;
	}
}

/* name (with its colon and a space after it, a literal) at p: true with
 * *len its length without those and *kind set, or false. */
static inline __attribute__((always_inline)) bool
name_is(const char *p, size_t avail, const char *name, int k, int *kind, size_t *len)
{
	if (!prefix_ieq(p, avail, name))
		return false;
	*kind = k;
	*len = strlen(name) - 2;
	return true;
}

/* c, which the compiler can no longer tell is the value it was: between
 * the tests of known_name, so that they stay the chain they are written
 * as and do not become a jump table again (GCC's if-to-switch). */
static inline unsigned opaque(unsigned c)
{
	__asm__("" : "+r"(c));
	return c;
}

/*
 * A name that most requests carry, its colon and one space, at p (avail
 * bytes there, 12 at least: so that the compares of "user-agent: " and
 * "connection: " need no bound test of their own, 5 fewer a request,
 * measured; a shorter last line, "Host: h", is field_name's): true with
 * *len the name's length and *kind, or false for a line to read byte by
 * byte (field_name); a bool, not a length that is 0 for none, as
 * common_value's. A word or two compared in place of a scan and a
 * lookup; a name matched is all tchars, so nothing else about it needs
 * checking. The first byte picks the candidates, tested in the order of
 * how many requests carry them: two instructions a test, where a jump
 * table cost ten whichever name came (bench-pathlen's Host, User-Agent,
 * Accept and Connection: 8 fewer a request, measured; a name that is
 * none of these, by count up to 5 more, its six tests).
 */
static bool known_name(const char *p, size_t avail, int *kind, size_t *len)
{
	/* opaque here too: of (unsigned char)p[0] | 0x20 GCC made a byte,
	 * compared as one and widened again at the first opaque below */
	unsigned c = opaque((unsigned char)p[0]) | 0x20;

	if (c == 'h')
		return name_is(p, avail, "host: ", F_HOST, kind, len);
	if (c == 'u')
		return name_is(p, avail, "user-agent: ", F_OTHER, kind, len);
	if ((c = opaque(c)) == 'a')
		return name_is(p, avail, "accept: ", F_OTHER, kind, len) ||
		       name_is(p, avail, "accept-encoding: ", F_OTHER, kind, len) ||
		       name_is(p, avail, "accept-language: ", F_OTHER, kind, len);
	if (c == 'c')
		return name_is(p, avail, "connection: ", F_CONNECTION, kind, len) ||
		       name_is(p, avail, "content-type: ", F_OTHER, kind, len) ||
		       name_is(p, avail, "content-length: ", F_CONTENT_LENGTH, kind, len) ||
		       name_is(p, avail, "cookie: ", F_OTHER, kind, len);
	if ((c = opaque(c)) == 'e')
		return name_is(p, avail, "expect: ", F_EXPECT, kind, len);
	if (c == 't')
		return name_is(p, avail, "transfer-encoding: ", F_TRANSFER_ENCODING, kind, len);
	return false;
}

/* A line that does not start with a name byte: the empty line ending the
 * head (DONE), or what it can be told from so far. */
static int other_line(struct head *h, size_t *pos, const struct http_header *hd)
{
	const char *b = h->b;
	size_t s = *pos;
	int term;

	if (s == h->view || b[s] == '\r' || b[s] == '\n') { /* the empty line */
		if ((term = terminator(h, s)) != 0)
			return term;
		*pos = s + 2;
		return DONE;
	}
	if (is_ows((unsigned char)b[s])) /* obs-fold, or space before the first field */
		return -400;
	return hd == h->fields_end ? -431 : -400;
}

/* A line at *pos that known_name did not take: the empty line or what
 * other_line tells, else a name read byte by byte. 0 with *colon after
 * the name, *value past the OWS after the colon and *kind; or what the
 * line is so far. */
static int field_name(struct head *h, size_t *pos, const struct http_header *hd, size_t *colon,
                      size_t *value, int *kind)
{
	const char *b = h->b;
	size_t s = *pos, i;

	if (h->view - s >= 2 && !memcmp(b + s, "\r\n", 2)) { /* the empty line, whole */
		*pos = s + 2;
		return DONE;
	}
	if (s == h->view || !is_tchar((unsigned char)b[s]))
		return other_line(h, pos, hd);
	if (hd == h->fields_end)
		return -431;
	i = skip_name_class(b, s + 1, h->view, TCHAR);
	if (i == h->view)
		return MORE;
	if (b[i] != ':')
		return -400;
	*colon = i;
	*value = skip_ows(b, i + 1, h->view);
	*kind = name_kind(b + s, i - s);
	return 0;
}

/* A Host's port from p, 1 to 5 digits at most 65535, and its CRLF:
 * where the value ends, or 0 (an empty port, or any other, is the
 * general path's to judge). Out of line: most Hosts have none. */
static __attribute__((noinline)) size_t host_port(const char *b, size_t p, size_t end)
{
	size_t i = p;
	unsigned v = 0;

	while (i < end && i - p < 6 && is_digit((unsigned char)b[i]))
		v = v * 10 + (unsigned)(b[i++] - '0');
	if (i == p || i - p > 5 || v > 65535)
		return 0;
	return i + 1 < end && b[i] == '\r' && b[i + 1] == '\n' ? i : 0;
}

/* A Host's value at v that is a reg-name, or a non-empty one and a port
 * (host_port), and its CRLF: true with *q where the value ends, or false.
 * What valid_authority would find good, read once. A bool and *q, not an
 * index that is 0 for none: GCC tested that index against 0 again, and
 * kept the value's end in more registers (12 fewer a request, measured). */
static bool host_value(const char *b, size_t v, size_t end, size_t *q)
{
	size_t i = skip_name_class_short(b, v, end, REGNAME);

	if (i + 1 < end && !memcmp(b + i, "\r\n", 2))
		return *q = i, true;
	return i > v && i < end && b[i] == ':' && (*q = host_port(b, i + 1, end)) != 0;
}

/*
 * The value of a field of kind at v, if it is the common one, read by
 * the shortest path: a Host that is a reg-name, a port perhaps after it
 * (its class scanned once, not as field bytes and then as a host), a
 * Connection of keep-alive or close (compared as words). true with *q
 * where the value ends, its CRLF there, and *kind saying what it is; else
 * false, *kind unchanged, for the general path. The value has no OWS at
 * its end either way.
 */
static bool common_value(const struct head *h, size_t v, int *kind, size_t *q)
{
	const char *b = h->b;
	size_t end = h->view;

	if (*kind == F_HOST) {
		if (!host_value(b, v, end, q))
			return false;
		*kind = F_HOST_REGNAME;
		return true;
	}
	if (*kind != F_CONNECTION)
		return false;
	if (prefix_ieq(b + v, end - v, "keep-alive\r\n")) {
		*kind = F_KEEP_ALIVE;
		return *q = v + 10, true;
	}
	if (prefix_ieq(b + v, end - v, "close\r\n")) {
		*kind = F_CLOSE;
		return *q = v + 5, true;
	}
	return false;
}

/* Record a complete field line in slot and apply what it means. */
static int add_field(struct head *h, struct http_header *slot, int kind, struct http_slice name,
                     struct http_slice value)
{
	*slot = (struct http_header){ name, value };
	if (kind == F_OTHER) /* most fields, then the common values: no switch */
		return 0;
	if (kind == F_HOST_REGNAME) {
		if (h->seen & HAS_HOST)
			return -400;
		h->seen |= HAS_HOST;
		h->req->host = value;
		return 0;
	}
	if (kind == F_KEEP_ALIVE)
		return h->seen |= KEEP, 0;
	switch (kind) {
	case F_HOST:
		return host_field(h, value);
	case F_CLOSE:
		h->seen |= CLOSE;
		return 0;
	case F_CONNECTION:
		return connection(h, value);
	case F_EXPECT:
		return expect(h, value);
	case F_CONTENT_LENGTH:
		return content_length(h, value);
	case F_TRANSFER_ENCODING:
		return transfer_encoding(h, value);
	default:
		return 0;
	}
}

/* The end of a field value at q that is not CRLF: what the line is so far
 * (never 0). */
static int value_end_error(const struct head *h, size_t q)
{
	if (q < h->view && h->b[q] != '\r' && h->b[q] != '\n')
		return -400; /* a control byte in the value */
	return terminator(h, q);
}

/* The end of the field value at v: 0 with *q at its CRLF, else what the
 * line is so far. As field_value_end, but the CRLF, the common case, is
 * tested for before a tab is. */
static inline int value_end(const struct head *h, size_t v, size_t *q)
{
	const char *b = h->b;
	size_t end = h->view, i = SKIP_SHORT_RUN(b, v, v, end, non_field);

	if (i + 1 < end && !memcmp(b + i, "\r\n", 2))
		return *q = i, 0;
	if (i == end || b[i] != '\t')
		return value_end_error(h, i);
	i = past_tabs(b, i, end);
	if (i + 1 < end && !memcmp(b + i, "\r\n", 2))
		return *q = i, 0;
	return value_end_error(h, i);
}

/* [*v, *ve), field bytes, without the SP and HTAB at either end. */
static void trim_ows(const char *b, size_t *v, size_t *ve)
{
	while (*v < *ve && (unsigned char)b[*v] <= ' ')
		++*v;
	while (*ve > *v && (unsigned char)b[*ve - 1] <= ' ')
		--*ve;
}

/* The field line (or the empty line ending the head) at *pos, read left
 * to right once: the name, the colon, the value up to its line's end,
 * recorded in the slot *hd, which moves on (a pointer, not a count: no
 * slot's address to compute at each line). A whole line ending in CRLF,
 * the common case, is read by the shortest path; any other is told apart
 * by other_line and value_end_error. */
static int field_line(struct head *h, size_t *pos, struct http_header **hd)
{
	const char *b = h->b;
	size_t s = *pos, end = h->view, i, n, v, q, ve;
	int kind = F_OTHER, rc;

	if (end - s >= 12 && known_name(b + s, end - s, &kind, &n)) {
		if (*hd == h->fields_end)
			return -431;
		/* n, the name's length, is a constant on each of known_name's
		 * ways: kept apart from the colon's index, GCC stores it as one
		 * (8 fewer a request, measured), where it subtracted s from s + n */
		v = s + n + 2; /* OWS after the one SP: not skipped yet (below) */
	} else if ((rc = field_name(h, pos, *hd, &i, &v, &kind)) != 0) {
		return rc;
	} else {
		n = i - s;
	}
	if (kind != F_OTHER && common_value(h, v, &kind, &q)) { /* most: one test */
		ve = q;
	} else {
		if ((rc = value_end(h, v, &q)) != 0)
			return rc;
		/* The value's bytes are field bytes: of those, only SP and
		 * HTAB are not above SP. The byte before q is the value's last,
		 * or the colon or OWS before an empty one: readable. OWS before
		 * the value is dropped here, after the scan found its end, not
		 * before it: a common value never has it (common_value takes
		 * none, so one with OWS comes here), and the test is one
		 * branch with the trailing OWS's. */
		ve = q;
		if ((unsigned char)b[v] <= ' ' || (unsigned char)b[q - 1] <= ' ')
			trim_ows(b, &v, &ve);
	}
	*pos = q + 2;
	return add_field(h, (*hd)++, kind, (struct http_slice){ b + s, n },
	                 (struct http_slice){ b + v, ve - v });
}

/* The checks only the end of the head can make, and the results, in two
 * ways, one a version: one test of seen each (TE_PENDING is HAS_TE without
 * CHUNKED), and keep_alive by a bit or two. HAS_CL and CHUNKED never hold
 * together (content_length and transfer_encoding each refuse the other),
 * so the body's kind is those two bits. */
_Static_assert(HTTP_BODY_NONE == 0 && (int)HTTP_BODY_LENGTH == HAS_CL &&
                       (int)HTTP_BODY_CHUNKED == CHUNKED,
               "finish takes the body's kind from seen");

static int finish(struct head *h, size_t len, const struct http_header *hd)
{
	struct http_request *req = h->req;
	unsigned seen = h->seen;

	req->nheaders = (unsigned)(hd - req->headers); /* here: req read once */

	if (req->minor == 1) {
		if ((seen & (TE_PENDING | HAS_HOST)) != HAS_HOST)
			return -400;
		req->keep_alive = !(seen & CLOSE);
		req->expect_continue = seen & EXPECT;
	} else {
		if (seen & TE_PENDING)
			return -400;
		if (!(seen & HAS_HOST)) /* 1.1 requires a Host: set by then */
			req->host = (struct http_slice){ NULL, 0 };
		req->keep_alive = (seen & (KEEP | CLOSE)) == KEEP;
		req->expect_continue = false;
	}
	req->body = (enum http_body)(seen & (HAS_CL | CHUNKED));
	req->head_len = len;
	return (int)len;
}

static void head_init(struct head *h, const char *buf, size_t len,
                      const struct http_limits *lim, struct http_request *req)
{
	size_t head_max = lim->head_max < INT_MAX ? lim->head_max : INT_MAX;

	*h = (struct head){ .b = buf, .lim = lim, .line_max = lim->line_max, .req = req };
	h->view = len < head_max ? len : head_max;
	h->fields_end = req->headers +
	                (lim->headers_max < HTTP_HEADERS_MAX ? lim->headers_max : HTTP_HEADERS_MAX);
	/* What only some heads set; the rest of req is set on the way to
	 * any complete head (an incomplete or bad one's req is no result).
	 * The host, which every complete 1.1 head sets, is cleared by
	 * finish, in 1.0's branch only. */
	req->content_length = 0;
}

/* The length of the empty lines (CRLFs) at b[0..view). Out of line, and
 * given no pointer to the caller's position: one kept in memory for it
 * cost every request 11 instructions. */
static __attribute__((noinline)) size_t empty_lines(const char *b, size_t view)
{
	size_t i = 0;

	while (i + 1 < view && b[i] == '\r' && b[i + 1] == '\n')
		i += 2;
	return i;
}

int runtime__http_parse_head(const char *buf, size_t len, const struct http_limits *lim,
                             struct http_request *req)
{
	struct head h;
	size_t pos = 0;
	struct http_header *hd = req->headers;
	int rc = 0;

	head_init(&h, buf, len, lim, req);
	if (h.view > 0 && (unsigned char)buf[0] <= '\r') { /* CR, LF: one test for both */
		pos = empty_lines(buf, h.view);
		if (pos < h.view && (buf[pos] == '\r' || buf[pos] == '\n'))
			rc = buf[pos] == '\n' ? -400 : terminator(&h, pos); /* MORE, or -400 */
	}
	if (rc == 0)
		rc = request_line(&h, &pos);
	while (rc == 0)
		rc = field_line(&h, &pos, &hd);
	if (rc == DONE)
		return finish(&h, pos, hd);
	req->nheaders = (unsigned)(hd - req->headers);
	if (rc == MORE)
		return len > h.view ? -431 : 0;
	return rc;
}

const struct http_slice *runtime__http_header_get(const struct http_request *req, const char *name)
{
	for (unsigned i = 0; i < req->nheaders; i++) {
		const struct http_slice *n = &req->headers[i].name;
		if (slice_ieq(n->p, n->len, name))
			return &req->headers[i].value;
	}
	return NULL;
}

/* --------------------------------------------------------------- chunked */

enum {
	C_SIZE0,        /* the first hex digit of a chunk size */
	C_SIZE,         /* more hex digits */
	C_SIZE_BWS,     /* whitespace after the size: a ';' must follow */
	C_EXT_NAME0,    /* after ';': BWS, then an extension name */
	C_EXT_NAME,
	C_EXT_NAME_BWS, /* whitespace after a name: '=' or ';' must follow */
	C_EXT_VAL0,     /* after '=': BWS, then a token or a quoted-string */
	C_EXT_TOKEN,
	C_EXT_QUOTED,
	C_EXT_QPAIR,    /* after a backslash in a quoted-string */
	C_EXT_VAL_END,  /* after the closing quote */
	C_EXT_VAL_BWS,  /* whitespace after a value: ';' must follow */
	C_SIZE_LF,      /* the size line's CR seen */
	C_DATA,
	C_DATA_CR,      /* the CRLF after a chunk's data */
	C_DATA_LF,
	C_TR_LINE0,     /* the start of a trailer line or of the final CRLF */
	C_TR_NAME,
	C_TR_VALUE,
	C_TR_LF,
	C_FINAL_LF,
	C_DONE,
};

void runtime__http_chunked_init(struct http_chunked *c, const struct http_limits *lim)
{
	*c = (struct http_chunked){ .state = C_SIZE0, .body_max = lim->body_max,
	                            .head_max = lim->head_max };
}

/* The size has all its digits: it must fit in what body_max leaves. */
static int size_end(struct http_chunked *c, unsigned char ch)
{
	if (c->remaining > c->body_max - c->total)
		return -413;
	if (ch == ';')
		return C_EXT_NAME0;
	if (is_ows(ch))
		return C_SIZE_BWS;
	return ch == '\r' ? C_SIZE_LF : -400;
}

static int step_size(struct http_chunked *c, unsigned char ch)
{
	if (c->state == C_SIZE0 || (c->state == C_SIZE && is_hex(ch))) {
		if (!is_hex(ch) || c->line > 16)
			return -400;
		c->remaining = c->remaining << 4 | hex_value(ch);
		return C_SIZE;
	}
	if (c->state == C_SIZE)
		return size_end(c, ch);
	if (is_ows(ch))
		return C_SIZE_BWS;
	return ch == ';' ? C_EXT_NAME0 : -400;
}

/* After an extension's name or value: bws_state on whitespace, ';' for
 * the next one, CR ends the line (unless after whitespace). */
static int ext_next(unsigned char ch, int bws_state, bool cr_ok)
{
	if (is_ows(ch))
		return bws_state;
	if (ch == ';')
		return C_EXT_NAME0;
	return ch == '\r' && cr_ok ? C_SIZE_LF : -400;
}

static int step_ext(struct http_chunked *c, unsigned char ch)
{
	int s = c->state;

	if ((s == C_EXT_NAME0 || s == C_EXT_VAL0) && is_ows(ch))
		return s;
	if ((s == C_EXT_NAME0 || s == C_EXT_NAME) && is_tchar(ch))
		return C_EXT_NAME;
	if ((s == C_EXT_VAL0 || s == C_EXT_TOKEN) && is_tchar(ch))
		return C_EXT_TOKEN;
	if ((s == C_EXT_NAME || s == C_EXT_NAME_BWS) && ch == '=')
		return C_EXT_VAL0;
	if (s == C_EXT_VAL0 && ch == '"')
		return C_EXT_QUOTED;
	if (s == C_EXT_QUOTED) {
		if (ch == '"')
			return C_EXT_VAL_END;
		if (ch == '\\')
			return C_EXT_QPAIR;
		return is_field_byte(ch) ? C_EXT_QUOTED : -400; /* qdtext */
	}
	if (s == C_EXT_QPAIR)
		return is_field_byte(ch) ? C_EXT_QUOTED : -400;
	if (s == C_EXT_NAME || s == C_EXT_NAME_BWS)
		return ext_next(ch, C_EXT_NAME_BWS, s == C_EXT_NAME);
	if (s == C_EXT_TOKEN || s == C_EXT_VAL_END || s == C_EXT_VAL_BWS)
		return ext_next(ch, C_EXT_VAL_BWS, s != C_EXT_VAL_BWS);
	return -400;
}

/* Trailer fields: checked as header fields are (RFC 9112 7.1.2). */
static int step_trailer(struct http_chunked *c, unsigned char ch)
{
	switch (c->state) {
	case C_TR_LINE0:
		if (ch == '\r')
			return C_FINAL_LF;
		return is_tchar(ch) ? C_TR_NAME : -400;
	case C_TR_NAME:
		if (ch == ':')
			return C_TR_VALUE;
		return is_tchar(ch) ? C_TR_NAME : -400;
	case C_TR_VALUE:
		if (ch == '\r')
			return C_TR_LF;
		return is_field_byte(ch) ? C_TR_VALUE : -400;
	case C_TR_LF:
		c->line = 0;
		return ch == '\n' ? C_TR_LINE0 : -400;
	default: /* C_FINAL_LF */
		return ch == '\n' ? C_DONE : -400;
	}
}

/* One byte outside chunk data: the next state, or -status. */
static int step(struct http_chunked *c, unsigned char ch)
{
	int s = c->state;

	if (s >= C_TR_LINE0 && ++c->remaining > c->head_max) /* trailer bytes */
		return -400;
	if (s != C_DATA_CR && s != C_DATA_LF && ch != '\r' && ch != '\n' &&
	    ++c->line > c->head_max)
		return -400;
	if (s <= C_SIZE_BWS)
		return step_size(c, ch);
	if (s < C_SIZE_LF)
		return step_ext(c, ch);
	if (s >= C_TR_LINE0)
		return step_trailer(c, ch);
	if (s == C_DATA_CR)
		return ch == '\r' ? C_DATA_LF : -400;
	if (ch != '\n')
		return -400;
	c->line = 0;
	if (s == C_DATA_LF)
		return C_SIZE0;
	return c->remaining > 0 ? C_DATA : C_TR_LINE0; /* C_SIZE_LF */
}

/* Copy chunk data from in[*i..len) to out + *o. */
static void copy_data(struct http_chunked *c, const char *in, size_t len, size_t *i,
                      char *out, size_t *o)
{
	size_t n = len - *i;

	if (n > c->remaining)
		n = (size_t)c->remaining;
	memmove(out + *o, in + *i, n);
	*i += n;
	*o += n;
	c->remaining -= n;
	c->total += n;
	if (c->remaining == 0)
		c->state = C_DATA_CR;
}

int runtime__http_chunked_decode(struct http_chunked *c, const char *in, size_t len, char *out,
                                 size_t *consumed, size_t *produced)
{
	size_t i = 0, o = 0;

	while (i < len && c->state >= 0 && c->state != C_DONE) {
		if (c->state == C_DATA)
			copy_data(c, in, len, &i, out, &o);
		else
			c->state = step(c, (unsigned char)in[i++]);
	}
	*consumed = i;
	*produced = o;
	if (c->state < 0)
		return c->state;
	return c->state == C_DONE;
}
