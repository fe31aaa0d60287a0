#!/bin/bash
# SPDX-License-Identifier: MIT
# echo_demo.sh - end to end: demos/echo/echo-server serves 1,000 concurrent
# connections exchanging 64 KiB messages, then 64 connections of 64-byte
# messages, with every echoed byte verified by bench/echo_load; SIGTERM then
# stops it cleanly (exit status 0). Loopback only; bounded in time.
set -u
srv=./demos/echo/echo-server
load=./bench/echo_load
log=$(mktemp)
pid=

cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	rm -f "$log"
}
trap cleanup EXIT

fail() {
	echo "echo_demo: FAIL: $*" >&2
	cat "$log" >&2
	exit 1
}

# 1,000 connections need about 2,100 fds between server and load.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 2200 ]; then
	echo "echo_demo: SKIP: fd limit $(ulimit -n) is below 2200" >&2
	exit 77
fi

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A port that nobody listens on; the server fails fast if it is taken.
for _ in 1 2 3 4 5; do
	port=$((30000 + RANDOM % 20000))
	listening "$port" && continue
	"$srv" --host 127.0.0.1 --port "$port" 2>"$log" &
	pid=$!
	for _ in $(seq 100); do
		listening "$port" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	listening "$port" && break
	wait "$pid" 2>/dev/null
	pid=
done
[ -n "$pid" ] || fail "server did not start"

check_load() { # conns size secs
	out=$("$load" -p "$port" -c "$1" -s "$2" -d "$3" -w 0) || fail "load $1x$2: $out"
	echo "echo_demo: $1 x $2 B: $out"
	case "$out" in *" errors=0 "*) ;; *) fail "errors in: $out" ;; esac
	case "$out" in *" mismatches=0 "*) ;; *) fail "mismatches in: $out" ;; esac
	case "$out" in *" active=$1 "*) ;; *) fail "not all $1 connections active: $out" ;; esac
	case "$out" in *" total_msgs=0"*) fail "no messages: $out" ;; esac
}

check_load 1000 65536 6 # long enough for sanitizer builds under a parallel make check
check_load 64 64 1

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[ "$status" -eq 0 ] || fail "server exited with $status after SIGTERM"
grep -q "stopped after" "$log" || fail "no clean-stop message"
echo "1 passed, 0 failed"
