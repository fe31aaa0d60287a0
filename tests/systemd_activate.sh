#!/bin/bash
# SPDX-License-Identifier: MIT
# systemd_activate.sh - the HTTP demo under systemd's protocols, without
# systemd: systemd-socket-activate (from the systemd package) holds a
# listening socket named "http" and starts the demo on the first
# connection, passing it (LISTEN_FDS, LISTEN_FDNAMES); the demo serves
# that request and later ones on it with two cores, and answers /healthz.
# A notify socket (a unix datagram socket bound by python3, NOTIFY_SOCKET)
# receives READY=1, the demo's STATUS= line, WATCHDOG=1 (WATCHDOG_USEC
# set); SIGUSR2 restarts the demo, whose successor takes the socket over
# and says READY=1 with its MAINPID=; at SIGTERM's drain, STOPPING=1. Skips, saying why, without
# systemd-socket-activate, curl or python3 (fails in CI, where
# ./build.sh check installs them).
set -u
srv=$PWD/demos/http/http-server # the tool runs it from another directory
dir=$(mktemp -d)
pid=
rpid=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	[ -n "$rpid" ] && kill -KILL "$rpid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh"
command -v systemd-socket-activate >/dev/null 2>&1 ||
	skip_all --installed "no systemd-socket-activate (apt-get install systemd)"
for tool in curl python3; do
	command -v "$tool" >/dev/null 2>&1 ||
		skip_all --installed "no $tool (apt-get install $tool)"
done

# The notify socket: each datagram a line of $dir/got, until "quit".
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a") as f:
    while True:
        m = s.recv(4096).decode()
        if m == "quit":
            break
        f.write(m + "\n")
        f.flush()
' "$dir/notify" "$dir/got" &
rpid=$!
for _ in $(seq 200); do [ -S "$dir/notify" ] && break; sleep 0.05; done

# alive PID: PID runs (a zombie does not: the successor is nobody's
# child to reap once its parent has exited).
alive() {
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	[ "${st%% *}" != Z ]
}

# got STATE: the notify socket received STATE (waits up to 60 s).
got() {
	for _ in $(seq 600); do
		grep -qx "$1" "$dir/got" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

for _ in 1 2 3 4 5; do
	port=$((20000 + RANDOM % 10000))
	listening "$port" && continue
	systemd-socket-activate -l "127.0.0.1:$port" --fdname=http \
		-E NOTIFY_SOCKET="$dir/notify" -E WATCHDOG_USEC=400000 \
		"$srv" --listen-name http --cores 2 >"$dir/out" 2>"$dir/err" &
	pid=$!
	for _ in $(seq 600); do
		listening "$port" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	listening "$port" && break
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=
done
[ -n "$pid" ]
result "systemd-socket-activate listens" $?
[ -n "$pid" ] || { cat "$dir/err"; summary; exit; }

base=http://127.0.0.1:$port
body=$(curl -s -m 60 "$base/plaintext")
[ "$body" = "Hello, World!" ]
result "the first connection starts the demo, which answers it (got '$body')" $?
grep -q "(socket activation)" "$dir/out"
result "the demo serves on the socket it was passed" $?
code=$(curl -s -m 60 -o /dev/null -w '%{http_code}' "$base/healthz")
[ "$code" = 200 ]
result "/healthz answers 200 while serving (got $code)" $?
got READY=1
result "READY=1 once both cores listen" $?
got WATCHDOG=1
result "WATCHDOG=1 with WATCHDOG_USEC set" $?
got "STATUS=serving on port $port, 2 cores"
result "the demo's STATUS= line" $?

# A restart without loss (SIGUSR2, as the unit's ExecReload= sends): the
# successor takes the activated socket over and says so, with its pid.
kill -USR2 "$pid"
got "STATUS=took over"
result "SIGUSR2: a successor takes the socket over and says READY=1 again" $?
wait "$pid"
status=$?
[ "$status" -eq 0 ]
result "the old process drains and exits 0 (status $status)" $?
new=$(sed -n 's/^MAINPID=//p' "$dir/got" | tail -1)
[ -n "$new" ] && [ "$new" != "$pid" ] && alive "$new"
result "MAINPID= names the successor ($new)" $?
pid=${new:-}
body=$(curl -s -m 60 "$base/plaintext")
[ "$body" = "Hello, World!" ]
result "the successor serves on the activated socket (got '$body')" $?
kill -TERM "$pid"
for _ in $(seq 600); do alive "$pid" || break; sleep 0.1; done
! alive "$pid" && grep -q "stopped after" "$dir/err"
result "SIGTERM drains the successor, which stops" $?
pid=
got STOPPING=1
result "STOPPING=1 at the drain" $?
[ "$failed" -eq 0 ] || { cat "$dir/out" "$dir/err"; cat "$dir/got"; }
python3 -c 'import socket, sys
socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"quit", sys.argv[1])' "$dir/notify"
wait "$rpid" # it ends by itself: no "Killed" after the tally
rpid=
summary
