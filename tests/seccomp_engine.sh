#!/bin/bash
# SPDX-License-Identifier: MIT
# seccomp_engine.sh - the demos where io_uring is forbidden, as in a
# default Docker container: tests/seccomp_launch runs them under a seccomp
# filter that answers io_uring_setup, io_uring_enter and io_uring_register
# with EPERM (or ENOSYS). The choice of engine is automatic:
#  - with --engine io_uring they refuse to start, naming the real cause
#    (the filter, EPERM; or ENOSYS) and the remedy, never a bare ENOSYS;
#  - by default they run on epoll and say so in their banner and /stats;
#    the echo demo serves 1,000 connections, every byte verified, and the
#    HTTP demo answers every route; SIGTERM stops both cleanly.
# Behaviour only: each load runs to its goal, however slow the machine.
set -u
launch=./tests/seccomp_launch
echo_srv=./demos/echo/echo-server
http_srv=./demos/http/http-server
load=./bench/echo_load
tmp=$(mktemp -d)
pid=

cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh"

# The choice under test is the automatic one (CI also runs every suite with
# RUNTIME_ENGINE=epoll, which would override it).
unset RUNTIME_ENGINE

ulimit -n "$(ulimit -Hn)" 2>/dev/null

# The filter itself: a plain program sees EPERM from io_uring_setup.
"$launch" true || skip_all "this kernel refuses a seccomp filter"

# ------------------------------------------- io_uring only: a clear refusal
refuses() { # NAME ERRNO-OPTION EXPECTED-TEXT SERVER
	local out status=0
	out=$("$launch" $2 "$4" --engine io_uring --port 1 2>&1 </dev/null) || status=$?
	[ "$status" -ne 0 ] && grep -qF -- "$3" <<<"$out"
	result "$1 (got: $out)" $?
}
refuses "echo demo, io_uring only, EPERM filter: names the filter and the remedy" "" \
	"io_uring is blocked by a seccomp filter (EPERM)" "$echo_srv"
refuses "the remedy is spelled out" "" \
	"--security-opt seccomp=PROFILE allowing io_uring_setup, io_uring_enter and io_uring_register" \
	"$echo_srv"
refuses "echo demo, io_uring only, ENOSYS filter" "--errno ENOSYS" \
	"io_uring is hidden by a seccomp filter (ENOSYS)" "$echo_srv"
refuses "HTTP demo, io_uring only, EPERM filter" "" \
	"io_uring is blocked by a seccomp filter (EPERM)" "$http_srv"

stop() { # NAME: SIGTERM, then exit status 0
	local status=0
	kill -TERM "$pid"
	wait "$pid" || status=$?
	pid=
	result "$1 stops cleanly on SIGTERM (status $status)" "$status"
}

# ------------------------------------------------ echo demo: 1,000 clients
if start_server "$tmp/echo.log" "$launch" "$echo_srv" --host 127.0.0.1; then
	# The banner follows the listen: wait for it (10 s at most).
	for _ in $(seq 200); do
		grep -q "engine epoll (io_uring is blocked by a seccomp filter (EPERM)" "$tmp/echo.log" &&
			break
		sleep 0.05
	done
	grep -q "engine epoll (io_uring is blocked by a seccomp filter (EPERM)" "$tmp/echo.log"
	result "echo demo falls back to epoll and its banner says why" $?
	out=$("$load" -p "$port" -c 1000 -s 64 -n 20 -d 300)
	status=$?
	echo "seccomp_engine: echo 1000 x 64 B, 20 round trips each: $out"
	[ "$status" -eq 0 ] && [[ $out == *" errors=0 "* ]] && [[ $out == *" active=1000 "* ]]
	result "echo demo on epoll serves 1,000 connections, every byte verified" $?
	stop "echo demo"
else
	result "echo demo starts under the filter" 1
	cat "$tmp/echo.log" >&2
fi

# --------------------------------------------------- HTTP demo: every route
mkdir -p "$tmp/root" && printf 'static file\n' > "$tmp/root/hello.txt"
get() { # PATH [CURL ARGS...]: status and body
	curl -s -m 30 -o - -w ' %{http_code}' "${@:2}" "http://127.0.0.1:$port$1"
}
if start_server "$tmp/http.out" "$launch" "$http_srv" --host 127.0.0.1 --root "$tmp/root" \
	--limit 2; then
	[[ $(get /plaintext) == "Hello, World! 200" ]]
	result "HTTP on epoll: GET /plaintext" $?
	[[ $(get /echo --data-binary 'posted bytes') == "posted bytes 200" ]]
	result "HTTP on epoll: POST /echo" $?
	[[ $(get '/delay?ms=20') == *" 200" ]]
	result "HTTP on epoll: GET /delay?ms=20" $?
	[[ $(get /limited) == *" 200" ]]
	result "HTTP on epoll: GET /limited" $?
	[[ $(get /stats) == '{"engine":"epoll",'*" 200" ]]
	result "HTTP on epoll: GET /stats names the engine" $?
	[[ $(get /hello.txt) == $'static file\n 200' ]]
	result "HTTP on epoll: GET a static file" $?
	[[ $(get /hello.txt -I) == *"Content-Length: 12"*" 200" ]]
	result "HTTP on epoll: HEAD a static file" $?
	[[ $(get /missing) == *" 404" ]]
	result "HTTP on epoll: 404" $?
	stop "HTTP demo"
else
	result "HTTP demo starts under the filter" 1
fi
cat "$tmp/http.out" 2>/dev/null | head -3
summary
