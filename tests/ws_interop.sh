#!/bin/bash
# SPDX-License-Identifier: MIT
# ws_interop.sh - WebSocket against an independent peer, on each engine:
# Debian's python3-websockets as the client of the HTTP demo's /ws echo
# (tests/ws_interop.py: subprotocols, UTF-8 text, binary at the length
# boundaries and 4 MiB, fragments, pings, permessage-deflate, the close),
# and as the server of the library's client (examples/ws_echo --connect:
# the echoes, the close with 1000).
# Without python3-websockets the test is skipped, saying so (a failure in
# CI, where ./build.sh check installs it). Time bounds make a hang fail.
set -u
bound=120
tmp=$(mktemp -d)
pid=

cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh"

python=/usr/bin/python3
for engine in io_uring epoll; do
	if ! [ -x "$python" ] || ! "$python" -c 'import websockets' 2>/dev/null; then
		missing "$engine: python3-websockets against /ws" "Python 3 with websockets (Debian: python3-websockets)"
		continue
	fi
	if ! start_server "$tmp/server.log" ./demos/http/http-server --host 127.0.0.1 \
		--engine "$engine"; then
		result "$engine: the HTTP demo starts" 1
		continue
	fi
	timeout "$bound" "$python" "${srcdir:-.}/tests/ws_interop.py" "$port" >"$tmp/out" 2>&1
	rc=$?
	sed "s/^/    $engine: /" "$tmp/out"
	result "$engine: python3-websockets against /ws" "$rc"
	stop_server
	result "$engine: the HTTP demo stops cleanly on SIGTERM (exit 0)" $?
done

# The library's client against python3-websockets' server.
if [ -x "$python" ] && "$python" -c 'import websockets' 2>/dev/null; then
	"$python" "${srcdir:-.}/tests/ws_interop.py" serve >"$tmp/py.out" 2>&1 &
	pid=$!
	for _ in $(seq 100); do grep -q '^port ' "$tmp/py.out" && break; sleep 0.1; done
	py_port=$(sed -n 's/^port //p' "$tmp/py.out")
	timeout "$bound" ./examples/ws_echo --connect "ws://127.0.0.1:${py_port:-1}/" \
		hello 'wide ✓ text' >"$tmp/out" 2>&1
	rc=$?
	printf 'hello\nwide ✓ text\nws_echo: closed with 1000\n' >"$tmp/want"
	cmp -s "$tmp/want" "$tmp/out" || sed 's/^/    client: /' "$tmp/out"
	result "the library's client against python3-websockets: echoes, close 1000" \
		$((rc != 0 || $(cmp -s "$tmp/want" "$tmp/out"; echo $?)))
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=
else
	missing "the library's client against python3-websockets" "Python 3 with websockets (Debian: python3-websockets)"
fi

summary
