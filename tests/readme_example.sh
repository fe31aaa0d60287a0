#!/bin/bash
# SPDX-License-Identifier: MIT
# readme_example.sh - README's first program, exactly as printed there,
# builds with the compile line printed there (its pkg-config flags pointed
# at this build tree) and prints what README says it prints when the echo
# demo is running. Only the port changes: 7000 may be taken here.
set -u
srcdir=${srcdir:-.}
tmp=$(mktemp -d) || exit 1
pid=
cleanup() {
	[ -n "$pid" ] && stop_server
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
	echo "readme_example: FAIL: $*" >&2
	cat "$tmp/log" >&2 2>/dev/null
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
}

# The first ```c block after "## A first program", and the output line
# README shows after the compile line.
awk '/^## A first program/ { on = 1 } on && /^```c$/ { code = 1; next }
     code && /^```$/ { exit } code { print }' "$srcdir/README.md" > "$tmp/hello.c"
expect=$(awk '/^## A first program/ { on = 1 }
     on && /pkg-config --cflags --libs runtime\) -o hello/ { getline; sub(/^ +/, ""); print; exit }' \
	"$srcdir/README.md")
grep -q 'runtime_tcp_connect("127.0.0.1", 7000)' "$tmp/hello.c" || fail "no first program in README.md"
[ -n "$expect" ] || fail "no expected output in README.md"

# shellcheck source=tests/lib.sh
. "$srcdir/tests/lib.sh"
start_server "$tmp/log" ./demos/echo/echo-server --host 127.0.0.1 --quiet ||
	fail "echo server did not start"
sed -i "s/7000/$port/" "$tmp/hello.c"

# shellcheck disable=SC2046,SC2086
${CC:-cc} ${SAN_CFLAGS:-} "$tmp/hello.c" $(pc --cflags --libs runtime) -o "$tmp/hello" \
	2>"$tmp/log" || fail "README's first program does not build"
got=$(LD_LIBRARY_PATH=runtime/.libs timeout 120 "$tmp/hello" 2>"$tmp/log")
status=$?
[ "$got" = "$expect" ] && [ "$status" -eq 0 ] ||
	fail "it printed '$got' (exit $status), README says '$expect'"
echo "ok: README's first program prints '$got' and exits 0"

# With no server: README's error line and exit status 1.
stop_server
LD_LIBRARY_PATH=runtime/.libs timeout 120 "$tmp/hello" >/dev/null 2>"$tmp/log"
status=$?
[ "$status" -eq 1 ] && grep -q '^connect: Connection refused$' "$tmp/log" ||
	fail "with no server: exit $status, stderr '$(cat "$tmp/log")'"
echo "ok: with no server it says 'connect: Connection refused' and exits 1"
echo "2 passed, 0 failed, 0 skipped"
