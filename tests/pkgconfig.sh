#!/bin/sh
# SPDX-License-Identifier: MIT
# pkgconfig.sh - a program builds from runtime.pc's flags alone, shared and
# with --static, and runs, and links no OpenSSL; runtime-preload.pc,
# runtime-tls.pc and runtime-http.pc put their library before libruntime
# (runtime-http's before runtime-tls's), and programs build from the last
# two. The uninstalled .pc files are used, pointed at the build tree.
set -u
srcdir=${srcdir:-.}
CC=${CC:-cc}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/lib.sh
. "$srcdir/tests/lib.sh"
cat > "$tmp/hello.c" <<'PROGRAM'
#include <runtime.h>
#include <stdio.h>
#include <string.h>

static void hello(void *arg)
{
	(void)arg;
	printf("hello from a fiber, runtime %s\n", runtime_version_string());
}

int main(void)
{
	struct runtime *rt;
	int rc = runtime_create(&rt, NULL);
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %s\n", strerror(-rc));
		return 1;
	}
	runtime_spawn(rt, hello, NULL);
	rc = runtime_run(rt);
	runtime_destroy(rt);
	return rc < 0;
}
PROGRAM
expect="hello from a fiber, runtime $(pc --modversion runtime)"

# A sanitizer build's library needs the program built with the same
# sanitizer (SAN_CFLAGS, from the Makefile), and cannot be linked -static.
# shellcheck disable=SC2046,SC2086
$CC ${SAN_CFLAGS:-} "$tmp/hello.c" $(pc --cflags --libs runtime) -o "$tmp/shared" 2> "$tmp/err" &&
	[ "$(LD_LIBRARY_PATH=runtime/.libs "$tmp/shared")" = "$expect" ]
result "shared: built from pkg-config --cflags --libs runtime, ran" $?
if [ -z "${SAN_CFLAGS:-}" ]; then
	# shellcheck disable=SC2046
	$CC -static "$tmp/hello.c" $(pc --cflags runtime) $(pc --static --libs runtime) \
		-o "$tmp/static" 2>> "$tmp/err" && [ "$("$tmp/static")" = "$expect" ]
	result "static: built from pkg-config --static --libs runtime, ran" $?
else
	echo "not here: -static (a sanitizer build; the plain build runs it)"
fi
# Only errors: glibc warns that a static getaddrinfo needs its libraries.
grep -v "statically linked applications requires\|in function .gai_run" "$tmp/err" | sed 's/^/  /'

# runtime-http.pc: the HTTP library, and libruntime through Requires.
cat > "$tmp/http.c" <<'PROGRAM'
#include <runtime_http.h>
#include <stdio.h>

int main(void)
{
	struct runtime_http_server_config cfg;
	runtime_http_server_config_init(&cfg);
	printf("idle %llu s\n", (unsigned long long)(cfg.idle_timeout_ns / 1000000000u));
	return 0;
}
PROGRAM
# shellcheck disable=SC2046,SC2086
$CC ${SAN_CFLAGS:-} "$tmp/http.c" $(pc --cflags --libs runtime-http) -Lhttp/.libs -Ltls/.libs \
	-o "$tmp/http" 2> "$tmp/err" &&
	[ "$(LD_LIBRARY_PATH=runtime/.libs:tls/.libs:http/.libs "$tmp/http")" = "idle 60 s" ]
result "runtime-http: built from pkg-config --cflags --libs runtime-http, ran" $?
pc --libs runtime-http | grep -q -- '-lruntime-http .*-lruntime-tls .*-lruntime'
result "runtime-http's library comes before libruntime-tls's, and that before libruntime" $?

# runtime-tls.pc: a TLS context made and destroyed; libruntime, and no
# OpenSSL, for a program of the core alone.
cat > "$tmp/tls.c" <<'PROGRAM'
#include <runtime_tls.h>
#include <stdio.h>

int main(void)
{
	struct runtime_tls *tls;
	int rc = runtime_tls_create(&tls, NULL);
	printf("tls %d\n", rc);
	runtime_tls_destroy(tls);
	return rc < 0;
}
PROGRAM
# shellcheck disable=SC2046,SC2086
$CC ${SAN_CFLAGS:-} "$tmp/tls.c" $(pc --cflags --libs runtime-tls) -Ltls/.libs -o "$tmp/tls" \
	2> "$tmp/err" && [ "$(LD_LIBRARY_PATH=runtime/.libs:tls/.libs "$tmp/tls")" = "tls 0" ]
result "runtime-tls: built from pkg-config --cflags --libs runtime-tls, ran" $?
pc --libs runtime-tls | grep -q -- '-lruntime-tls .*-lruntime'
result "runtime-tls's library comes before libruntime" $?
! pc --libs --static runtime | grep -q -- '-lssl\|-lcrypto'
result "runtime.pc asks for no OpenSSL, even --static" $?
! objdump -p "$tmp/shared" | grep -q 'NEEDED.*lib\(ssl\|crypto\)'
result "a program of the core alone needs no libssl" $?

pc --cflags runtime | grep -q -- '-fstack-clash-protection'
result "Cflags carry -fstack-clash-protection" $?
pc --libs runtime-preload | grep -q -- '-lruntime-preload .*-lruntime'
result "runtime-preload's library comes before libruntime" $?

summary
