#!/bin/bash
# SPDX-License-Identifier: MIT
# ws_many_idle.sh - 10,000 idle WebSockets on the HTTP demo's /ws (served
# by runtime_ws_serve): bench/ws_load opens them, one echo each checked
# byte for byte, and holds them; every one is held, and the server grew
# by less than 4 KiB each (a WebSocket that kept its receiver's stack
# would cost 16 KiB and more: this is the "no stack while idle" promise,
# not a figure - make bench-ws measures that); then SIGTERM drains: each
# of them gets its close (ws_load counts the server's ends) and the demo
# exits 0. With an fd limit under 10,000 (each side holds one fd a
# WebSocket) it uses what the limit allows, from 1,000; below that it is
# skipped, saying so. A sanitizer build holds 1,000 and skips the memory
# check (its allocator keeps freed memory and pads what it gives).
set -u
load=./bench/ws_load
# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh"
temp_dir

hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
want=10000
[ -n "${SAN_CFLAGS:-}" ] && want=1000
n=$((hard - 500 < want ? hard - 500 : want))
[ "$n" -ge 1000 ] || skip_all "the fd limit ($hard) holds fewer than 1,000 WebSockets a side"
ulimit -n "$hard" 2>/dev/null || ulimit -n $((n + 500))

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

if ! start_server "$tmp/server.log" ./demos/http/http-server --host 127.0.0.1 \
	--max-conns $((n + 100)); then
	result "the HTTP demo starts" 1
	summary
	exit
fi
# One-time allocations (buffers, pools, code) before the measure.
timeout 60 "$load" --mode idle -n 200 -s 64 --no-hold 127.0.0.1 "$port" >"$tmp/warm" 2>&1
before=$(rss_kb "$pid")
timeout 300 "$load" --mode idle -n "$n" -s 64 127.0.0.1 "$port" >"$tmp/load" 2>"$tmp/load.err" &
lpid=$!
for _ in $(seq 600); do grep -q '^held=' "$tmp/load" && break; sleep 0.1; done
grep -q "^held=$n errors=0 " "$tmp/load"
status=$? # before the message's $(...) sets it
result "$n WebSockets opened, one echo each, all held ($(cat "$tmp/load"))" $status
sleep 2
after=$(rss_kb "$pid")
per=$(((after - before) * 1024 / n))
if [ -n "${SAN_CFLAGS:-}" ]; then
	skip "the server's growth per WebSocket ($per bytes)" "a sanitizer's allocator keeps and pads memory"
else
	[ "$per" -lt 4096 ]
	result "the server grew by $per bytes a WebSocket (under 4 KiB: no stack held)" $?
fi

stop_server
result "SIGTERM drains them and the demo exits 0" $?
sleep 1
kill -TERM "$lpid" 2>/dev/null
wait "$lpid"
grep -q "closed_early=$n\$" "$tmp/load.err"
status=$? # before the message's $(...) sets it
result "every WebSocket was closed by the drain ($(tr '\n' ' ' <"$tmp/load.err"))" $status
summary
