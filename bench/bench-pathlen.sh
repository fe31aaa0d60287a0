#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-pathlen.sh: user-space instructions per operation, the figure that
# holds still on a loaded machine. Each server runs under
# `valgrind --tool=callgrind` and gets N sequential operations on one
# connection, first SHORT then LONG of them; the difference of the two
# runs' instruction totals divided by LONG - SHORT is the cost of one
# operation, start-up and shut-down cancelled out. Two runs of the same
# build give the same count to within a few instructions.
#
# Operations: an HTTP keep-alive `GET /plaintext` with four header fields
# (Host, User-Agent, Accept, Connection), for the demo http-server (on
# libruntime-http), bench/raw_uring_http (the floor: io_uring, no fibers,
# no real parsing) and nginx (one process, master off); and a 64-byte echo
# round trip for the demo echo-server and its two floors, bench/raw_uring_echo
# (io_uring, no fibers: echo-raw) and bench/epoll_echo (a plain epoll loop:
# echo-epoll). The kernel's share is not counted: callgrind sees user space
# only, which is why the epoll loop's figure is so small.
#
# Environment:
#   BUILD       the build directory (default: this script's ../ from the
#               build tree, i.e. $BENCH_DIR/..)
#   BENCH_DIR   where raw_uring_http and echo_load are (default: $BUILD/bench)
#   SERVERS     "http raw nginx echo echo-raw echo-epoll" (default all); a
#               missing one is
#               skipped with a message
#   SHORT (1000)  LONG (11000)
#   ENGINE      RUNTIME_ENGINE for the demos (default: theirs, io_uring)
#   BREAKDOWN   a number of rows: also print, per server, where an operation's
#               instructions go - per function, inclusive and self
#               (bench/callgrind_perop.py; doc/perf/pathlen.md shows one)
#   DEMO_FLAGS  more flags for the two demos: "--release-after 0" puts every
#               operation on the path of a connection that waited idle with
#               no fiber, "--release-after never" keeps the fiber throughout
#   PIPELINE    HTTP requests sent in one write, their answers read before
#               the next write (default 1); still counted per request, so
#               PIPELINE=16 is the user-space cost of a pipelined request
#               (bench-http's pipelined x16 run)
# Prints one line per server and exits non-zero if a run failed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
BENCH_DIR=${BENCH_DIR:-$here}
BUILD=${BUILD:-$(cd "$BENCH_DIR/.." && pwd)}
SERVERS=${SERVERS:-http raw nginx echo echo-raw echo-epoll}
SHORT=${SHORT:-1000} LONG=${LONG:-11000}
ENGINE=${ENGINE:-}
DEMO_FLAGS=${DEMO_FLAGS:-}
BREAKDOWN=${BREAKDOWN:-}
PIPELINE=${PIPELINE:-1}
LIBS=$BUILD/runtime/.libs:$BUILD/tls/.libs:$BUILD/http/.libs
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
failed=0

command -v valgrind >/dev/null || { echo "bench-pathlen: valgrind is needed (apt-get install valgrind)"; exit 1; }

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() { # PORT: until it accepts (60 s: valgrind starts slowly)
	for _ in $(seq 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.2
	done
	return 1
}

# N keep-alive requests on one connection, PIPELINE of them in one write,
# their answers read whole (Content-Length) before the next write.
http_load() { # PORT N
	python3 - "$1" "$2" "$PIPELINE" <<'PY'
import socket, sys
port, n, depth = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port))
req = (b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\nUser-Agent: bench-pathlen\r\n"
       b"Accept: */*\r\nConnection: keep-alive\r\n\r\n")
buf = b""
for i in range(n):
    if i % depth == 0:
        s.sendall(req * min(depth, n - i))
    while True:
        h = buf.find(b"\r\n\r\n")
        if h >= 0:
            head = buf[:h].decode().lower()
            cl = int(head.split("content-length:")[1].split("\r\n")[0])
            if len(buf) >= h + 4 + cl:
                buf = buf[h + 4 + cl:]
                break
        more = s.recv(65536)
        if not more:
            sys.exit("server closed")
        buf += more
PY
}

nginx_conf() { # PORT: a config file for one process in $work
	mkdir -p "$work/nginx"
	cat > "$work/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
events { worker_connections 1000; }
http {
  access_log off;
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$1;
    location /plaintext { default_type text/plain; return 200 "Hello, World!"; }
  }
}
EOF
	echo "$work/nginx/nginx.conf"
}

# The command line of a server on PORT, or nothing if it is not here.
server_cmd() { # NAME PORT
	case $1 in
	http) [ -x "$BUILD/demos/http/.libs/http-server" ] &&
		echo "$BUILD/demos/http/.libs/http-server --host 127.0.0.1 --port $2 $DEMO_FLAGS" ;;
	echo) [ -x "$BUILD/demos/echo/.libs/echo-server" ] && [ -x "$BENCH_DIR/echo_load" ] &&
		echo "$BUILD/demos/echo/.libs/echo-server --host 127.0.0.1 --port $2 --quiet $DEMO_FLAGS" ;;
	raw) [ -x "$BENCH_DIR/raw_uring_http" ] && echo "$BENCH_DIR/raw_uring_http --bind 127.0.0.1 --port $2" ;;
	echo-raw) [ -x "$BENCH_DIR/raw_uring_echo" ] && [ -x "$BENCH_DIR/echo_load" ] &&
		echo "$BENCH_DIR/raw_uring_echo --bind 127.0.0.1 --port $2" ;;
	echo-epoll) [ -x "$BENCH_DIR/epoll_echo" ] && [ -x "$BENCH_DIR/echo_load" ] &&
		echo "$BENCH_DIR/epoll_echo --bind 127.0.0.1 --port $2" ;;
	nginx) command -v nginx >/dev/null && echo "nginx -e stderr -c $(nginx_conf "$2")" ;;
	esac
}

# Instructions of one callgrind run of NAME over N operations.
instructions() { # NAME N (the profile stays in $work/cg.N.out)
	local port cmd out=$work/cg.$2.out pid
	port=$(free_port)
	cmd=$(server_cmd "$1" "$port")
	# shellcheck disable=SC2086
	RUNTIME_ENGINE=$ENGINE LD_LIBRARY_PATH=$LIBS valgrind --tool=callgrind \
		--callgrind-out-file="$out" $cmd >/dev/null 2>"$work/err" &
	pid=$!
	if ! wait_port "$port"; then
		kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
		return 1
	fi
	local ok=0
	if [ "${1%%-*}" = echo ]; then
		"$BENCH_DIR/echo_load" -p "$port" -c 1 -n "$2" -s 64 -d 300 >/dev/null || ok=1
	else
		http_load "$port" "$2" || ok=1
	fi
	kill -TERM $pid; wait $pid 2>/dev/null # a failed load too: nothing left running
	[ $ok -eq 0 ] && awk '/^totals:/ { print $2 }' "$out"
}

for name in $SERVERS; do
	if [ -z "$(server_cmd "$name" 1)" ]; then
		echo "$name: not here, skipped"
		continue
	fi
	if ! { a=$(instructions "$name" "$SHORT") && b=$(instructions "$name" "$LONG") &&
		[ -n "$a" ] && [ -n "$b" ]; }; then
		echo "$name: a run failed"; failed=1
		continue
	fi
	unit=request
	[ "${name%%-*}" = echo ] && unit="64-byte round trip"
	printf '%-10s %6d instructions per %s (%s ops: %s, %s ops: %s)\n' "$name" \
		$(( (b - a) / (LONG - SHORT) )) "$unit" "$SHORT" "$a" "$LONG" "$b"
	[ -n "$BREAKDOWN" ] && python3 "$here/callgrind_perop.py" "$work/cg.$SHORT.out" \
		"$work/cg.$LONG.out" $((LONG - SHORT)) "$BREAKDOWN"
done
exit $failed
