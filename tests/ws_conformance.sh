#!/bin/bash
# SPDX-License-Identifier: MIT
# ws_conformance.sh - WebSocket conformance in the spirit of
# Autobahn|Testsuite, against RFC 6455 and RFC 7692 directly
# (tests/ws_conformance.py: raw sockets, frames made by hand): on each
# engine the HTTP demo's /ws echo as the server (the handshake, framing
# at the length boundaries, pings, reserved bits and opcodes, fragments,
# UTF-8, close codes, masking, length limits, permessage-deflate and its
# bomb), then the library's client (examples/ws_echo --connect) against
# the script's own raw server (masks, the handshake it sends and the 101s
# it must refuse, fragmented replies with pings, bad server frames, the
# close, permessage-deflate). Each case's PASS or FAIL line is shown;
# one result per run. Time bounds make a hang fail.
set -u
bound=120
# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh"
temp_dir

python=/usr/bin/python3
[ -x "$python" ] || skip_all --installed "Python 3 (Debian: python3) is missing"
script="${srcdir:-.}/tests/ws_conformance.py"

for engine in io_uring epoll; do
	if ! start_server "$tmp/server.log" ./demos/http/http-server --host 127.0.0.1 \
		--engine "$engine"; then
		result "$engine: the HTTP demo starts" 1
		continue
	fi
	timeout "$bound" "$python" "$script" server-cases "$port" >"$tmp/out" 2>&1
	rc=$?
	sed "s/^/    $engine: /" "$tmp/out"
	result "$engine: the HTTP demo's /ws against RFC 6455 and RFC 7692 (server cases)" "$rc"
	stop_server
	result "$engine: the HTTP demo stops cleanly on SIGTERM (exit 0)" $?
done

WS_ECHO=./examples/ws_echo timeout "$bound" "$python" "$script" client-cases >"$tmp/out" 2>&1
rc=$?
sed "s/^/    /" "$tmp/out"
result "the library's client (ws_echo --connect) against RFC 6455 and RFC 7692" "$rc"

summary
