#!/bin/bash
# SPDX-License-Identifier: MIT
# echo_limits.sh - the echo demo refuses bad flags with a message naming
# the flag, and at its fd limit it backs off instead of spinning, keeps
# serving the connections it has, reports accept errors at most about once
# a second, and serves again once fds free up. Loopback only; behaviour,
# not speed: every wait is for a condition, with a generous bound.
set -u
srcdir=${srcdir:-.}
srv=./demos/echo/echo-server
tmp=$(mktemp -d) || exit 1
pid=
# shellcheck source=tests/lib.sh
. "$srcdir/tests/lib.sh"
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# A failure shows the end of the server's log.
check() { # NAME STATUS
	result "$1" "$2"
	[ "$2" -eq 0 ] || sed 's/^/  /' "$tmp/log" 2>/dev/null | tail -5
}
finish() { summary; exit; }

# ------------------------------------------------------------- flags
bad_flag() { # FLAG VALUE: exit 2, and a message that names the flag
	local status=0
	"$srv" "--$1" "$2" >/dev/null 2>"$tmp/log" || status=$?
	[ "$status" -eq 2 ] && grep -q -- "--$1" "$tmp/log"
	check "--$1 '$2' refused, named" $?
}
bad_flag port abc
bad_flag port 70000
bad_flag cores 2x
bad_flag busy-poll -1
bad_flag stream-buffer-size ''
"$srv" --bogus >/dev/null 2>"$tmp/log"
[ $? -eq 2 ] && grep -q bogus "$tmp/log"
check "an unknown option refused, named" $?
"$srv" --help > "$tmp/log" 2>&1 && grep -q -- '--stream-buffers' "$tmp/log"
check "--help lists every option, exit 0" $?

# ---------------------------------------------------- at the fd limit
# 40 fds, soft and hard, so the server cannot raise it: some 30
# connections fit; 60 clients connect (the backlog holds the rest).
limit=40 clients=60
start_server "$tmp/log" prlimit --nofile=$limit:$limit "$srv" --host 127.0.0.1 --quiet ||
	{ check "server started under an fd limit of $limit" 1; finish; }
declare -a conn
for _ in $(seq $clients); do
	exec {fd}<>"/dev/tcp/127.0.0.1/$port" || break
	conn+=("$fd")
done
[ ${#conn[@]} -eq $clients ]
check "$clients clients connected" $?

open_fds() { find "/proc/$pid/fd" -mindepth 1 2>/dev/null | wc -l; }
for _ in $(seq 1200); do # 60 s
	[ "$(open_fds)" -ge $((limit - 1)) ] && grep -q 'accept:' "$tmp/log" && break
	sleep 0.05
done
[ "$(open_fds)" -ge $((limit - 1)) ] && grep -q 'accept:' "$tmp/log"
status=$? # before the message's $(...) sets it
check "the server reached its fd limit and said so ($(open_fds) fds)" $status

# Spinning on EMFILE would take a whole CPU; the back-off sleeps 10 ms a
# try. Half a CPU-second in 2 s leaves a sanitizer build room.
hz=$(getconf CLK_TCK)
t0=$(cpu_ticks "$pid") s0=$SECONDS
sleep 2
used=$(($(cpu_ticks "$pid") - t0))
[ "$used" -lt "$hz" ]
check "at the limit it backs off: $used of $((2 * hz)) ticks in 2 s" $?

# The connections it holds are still served.
printf 'ping\n' >&"${conn[0]}"
IFS= read -r -t 60 line <&"${conn[0]}"
[ "${line:-}" = ping ]
check "a held connection is still echoed" $?

# A report a second at most: the errors came for $SECONDS - s0 seconds and more.
reports=$(grep -c 'accept:' "$tmp/log")
[ "$reports" -le $((SECONDS - s0 + 4)) ]
check "accept errors reported $reports times, at most about once a second" $?

# Fds free up: every client goes, then new ones are served.
for fd in "${conn[@]}"; do exec {fd}>&-; done
out=$(./bench/echo_load -p "$port" -c 8 -s 64 -n 50 -d 300) &&
	[[ $out == *errors=0* ]] && [[ $out == *" active=8 "* ]]
check "once fds free up it serves again: ${out:-no output}" $?

stop_server
check "SIGTERM stops it cleanly" $?
finish
