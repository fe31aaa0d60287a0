#!/bin/bash
# SPDX-License-Identifier: MIT
# echo_demo.sh - end to end: demos/echo/echo-server serves 1,000 concurrent
# connections exchanging 64 KiB messages until each has made 3 round trips,
# then 64 connections of 64-byte messages until each has made 200, then
# 10,000 connections of 64 bytes until each has made 3, with
# every echoed byte verified by bench/echo_load and no connection starved
# while the others are served; SIGTERM then stops it cleanly (exit status 0).
# Loopback only. It asserts behaviour, not speed: each load runs until its
# goal is met, however slow the build or machine, and the time bound is only
# there so that a hung server fails instead of hanging CI.
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
# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh"
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 2200 ]; then
	skip_all "the fd limit here is $(ulimit -n), below the 2200 it needs"
fi
start_server "$log" "$srv" --host 127.0.0.1 || fail "server did not start"

bound=300 # seconds per load; generous, see the top

field() { # field KEY "k=v k=v ..."
	local kv
	for kv in $2; do
		[ "${kv%%=*}" = "$1" ] && { echo "${kv#*=}"; return; }
	done
}
at_least() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -ge "$2" ]; } # at_least N MIN
below() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -lt "$2" ]; }     # below N LIMIT

# Starvation, independent of speed: max_overtaken is the most round trips
# of other connections that completed while one message waited for its echo
# (its connection's first included, which also waits to be accepted). A
# fair server stays at a few times conns: a fiber per connection and a FIFO
# run queue serve each ready connection once per loop turn, and the
# acceptor takes the whole backlog at once, so while a message waits every
# other connection gets about one round trip per turn, and a message needs
# only a few turns (a 64 KiB one arrives and leaves in chunks). A slow build
# or a loaded machine stretches every turn alike and does not move it. A
# server that leaves one connection waiting while it serves the others
# makes it grow with the wait: 50 x conns means the others made some 50
# round trips each while one message waited.
overtaken_factor=50

check_load() { # conns size rounds
	local out
	out=$("$load" -p "$port" -c "$1" -s "$2" -n "$3" -d "$bound") ||
		fail "load $1 x $2 B, $3 round trips each: $out"
	echo "echo_demo: $1 x $2 B: $out"
	[ "$(field errors "$out")" = 0 ] || fail "errors in: $out"
	[ "$(field mismatches "$out")" = 0 ] || fail "mismatches in: $out"
	[ "$(field active "$out")" = "$1" ] || fail "not all $1 connections active: $out"
	at_least "$(field min_msgs "$out")" "$3" ||
		fail "a connection made fewer than $3 round trips: $out"
	below "$(field max_overtaken "$out")" $((overtaken_factor * $1)) ||
		fail "a connection starved (max_overtaken >= $overtaken_factor x $1): $out"
}

check_load 1000 65536 3
check_load 64 64 200
# 10,000 connections at once, each fairly served (the server raises its own
# fd limit to the hard one). ThreadSanitizer cannot hold that many fibers
# (it dies past 8,128 live ones), and some machines cap fds lower.
if [ "${RUNTIME_SANITIZER:-}" = tsan ]; then
	echo "echo_demo: 10,000 connections: skipped under ThreadSanitizer"
elif [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 10100 ]; then
	echo "echo_demo: 10,000 connections: skipped, fd limit $(ulimit -n)"
else
	check_load 10000 64 3
fi

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[ "$status" -eq 0 ] || fail "server exited with $status after SIGTERM"
grep -q "stopped after" "$log" || fail "no clean-stop message"
echo "1 passed, 0 failed, 0 skipped"
