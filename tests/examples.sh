#!/bin/bash
# SPDX-License-Identifier: MIT
# examples.sh - runs each program of examples/ briefly and checks what it
# prints: tcp_server answers hello_client (upper-cased), closes an idle
# connection, and stops cleanly on SIGTERM with a connection open;
# hello_client reports a refused connection; worker_pool's sum is right;
# periodic_timer ticks N times and exits 0, and stops on SIGTERM;
# guarded_backend reports its wait timeouts and its try_get rejection;
# offload_dns resolves localhost and numeric addresses (no network needed);
# preload_blocking's 50 blocking clients all finish, several in progress at
# once on one core; tls_client reports a refused connection, a missing CA
# file and a usage error (tests/tls_interop.sh runs it against servers);
# proxy, in front of the echo demo, gives back every byte
# (5000 bytes, 1 MiB, 4 x 1 MiB at once), passes a half-close on (to an
# upstream that answers only after it: tests/tcp_pipe), closes an idle
# connection after its timeout, closes a client's connection when the
# upstream refuses, and on SIGTERM refuses new connections, lets an open
# one go on, exits 0 - or cuts it when the grace is over; kv_server
# answers 6 clients at once on 2 cores, pipelined commands in order,
# refuses a line too long and closes, refuses a burst past its rate limit,
# and on SIGTERM closes a connection waiting for a command at once while
# one in the middle of a command finishes it; echo_server gives back every
# byte (5000 bytes, 1 MiB) and on SIGTERM closes a connection left open
# and exits 0; deadlines reports each scene's outcome (a deadline's
# ETIMEDOUT, a sticky ECANCELED, a send inside a cleanup, the join's
# result, a group cancelled by its first failure); http_service answers
# each route (status, body, the handler's fields) over HTTP, logs each
# request, and on SIGTERM closes an idle keep-alive connection and exits
# 0; over HTTPS (a certificate made with the openssl CLI) it answers
# tls_client's GET and curl's POST and 404. Without the openssl CLI or
# curl those checks are skipped, saying so (in CI, where ./build.sh check
# installs both, they fail), and the test reports SKIP (77) unless
# something failed. Every run must also leave stderr empty
# (a sanitizer's report, a misuse report or a leak fails it).
# It asserts behaviour, not speed: it waits for conditions, never for a
# time window, and the time bound (per program) is only there so that a
# hang fails instead of hanging CI (TSan on a loaded machine: 10-50x).
set -u
# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh" # test_certs, missing, skip_all, summary
ex=./examples
bound=300
tmp=$(mktemp -d)
pids=

cleanup() {
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

pass() { echo "examples: PASS: $*"; passed=$((passed + 1)); }
fail() {
	echo "examples: FAIL: $*" >&2
	for f in "$tmp/out" "$tmp/err"; do
		[ -s "$f" ] && sed "s|^|    ${f##*/}: |" "$f" >&2
	done
	failed=$((failed + 1))
}
check() { # check DESCRIPTION CONDITION...: pass or fail on the condition
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}

# run NAME ARGS...: run an example to its end; stdout in $tmp/out, stderr
# in $tmp/err, exit status in $rc.
run() {
	local name=$1
	shift
	timeout -k 10 "$bound" "$ex/$name" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
}
has() { grep -q -e "$1" "$tmp/out"; }   # has REGEX: in stdout
quiet() { ! [ -s "$tmp/err" ]; }        # nothing on stderr
ok() { [ "$rc" -eq 0 ] && quiet; }       # exit 0, stderr empty

# wait_for FILE REGEX PID: until FILE has a line matching REGEX; false if
# PID ends first or the bound passes.
wait_for() {
	local i
	for ((i = 0; i < bound * 10; i++)); do
		grep -q -e "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || { grep -q -e "$2" "$1" 2>/dev/null; return; }
		sleep 0.1
	done
	return 1
}

# No io_uring here (an old kernel, a sandbox): skip rather than fail.
run periodic_timer 1 1
if [ "$rc" -ne 0 ] && grep -q "runtime_create: \(Function not implemented\|Operation not supported\)" "$tmp/err"; then
	skip_all "the runtime cannot start here: $(cat "$tmp/err")"
fi

# wait_exit PID: until PID (a background job of this shell) has ended, at
# most the bound (then it is killed); its exit status in $rc. The servers
# run without timeout(1) in front: signalled, timeout sends the signal on
# to its child and to the process group, i.e. twice, and a second SIGTERM
# still pending when runtime_destroy() unblocks it kills the program.
wait_exit() {
	local i
	for ((i = 0; i < bound * 10; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1"
	rc=$?
}

# ---- tcp_server and hello_client
# start_server IDLE_SECONDS NAME: a tcp_server on a free port (it binds
# port 0 and prints the one it got); sets srv_pid, port, and
# $tmp/NAME.out and .err.
start_server() {
	: >"$tmp/$2.out"
	"$ex/tcp_server" 0 "$1" >"$tmp/$2.out" 2>"$tmp/$2.err" &
	srv_pid=$!
	pids="$pids $srv_pid"
	port=
	wait_for "$tmp/$2.out" "^listening on 127.0.0.1:[0-9]*$" "$srv_pid" &&
		port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$tmp/$2.out")
	[ -n "$port" ]
}
# stop_server NAME: SIGTERM, wait for the exit ($rc); its output becomes
# $tmp/out and $tmp/err, for ok and has.
stop_server() {
	kill -TERM "$srv_pid"
	wait_exit "$srv_pid"
	cp "$tmp/$1.out" "$tmp/out"
	cp "$tmp/$1.err" "$tmp/err"
}

if start_server 600 long; then
	run hello_client "127.0.0.1:$port" "hello, examples"
	check "hello_client gets tcp_server's answer" eval 'ok && has "^reply: HELLO, EXAMPLES$"'

	# A connection left open across the shutdown: its fiber is cancelled.
	exec 4<>"/dev/tcp/127.0.0.1/$port"
	printf 'ping\n' >&4
	IFS= read -r -t "$bound" line <&4
	[ "${line:-}" = PING ] || fail "tcp_server: open connection answered '${line:-}'"
	stop_server long
	check "tcp_server stops cleanly on SIGTERM, cancelling an open connection" eval \
		'ok && has "closed by shutdown" && has "^server stopped cleanly$"'
	IFS= read -r -t "$bound" line <&4
	check "tcp_server closed the open connection at shutdown" [ $? -ne 0 ] # EOF
	exec 4<&-

	# Nobody listens on that port any more.
	run hello_client "127.0.0.1:$port"
	check "hello_client reports a refused connection" eval \
		'[ "$rc" -eq 1 ] && grep -q "Connection refused" "$tmp/err"'
	run tls_client --insecure "127.0.0.1:$port" /
	check "tls_client reports a refused connection" eval \
		'[ "$rc" -eq 1 ] && grep -q "^tls_client: connect to 127\.0\.0\.1:$port: Connection refused$" "$tmp/err"'
else
	fail "tcp_server did not start: $(cat "$tmp/long.err")"
fi

if start_server 1 idle; then
	exec 3<>"/dev/tcp/127.0.0.1/$port"
	IFS= read -r -t "$bound" line <&3
	check "tcp_server closes an idle connection, saying why" \
		[ "${line:-}" = "idle for too long, bye" ]
	exec 3<&-
	stop_server idle
	check "tcp_server reports the idle timeout and stops" eval \
		'ok && has "idle timeout" && has "^server stopped cleanly$"'
else
	fail "tcp_server did not start: $(cat "$tmp/idle.err")"
fi

# ---- tls_client: what needs no server (tests/tls_interop.sh runs it
# against real ones)
run tls_client
check "tls_client without a server to ask prints its usage, exit 2" eval \
	'[ "$rc" -eq 2 ] && grep -q "^usage: .*HOST\[:PORT\] \[PATH\]$" "$tmp/err"'
run tls_client --cacert "$tmp/none.pem" 127.0.0.1:1
check "tls_client says a CA file is unreadable, exit 1" eval \
	'[ "$rc" -eq 1 ] && grep -q "^tls_client: TLS context: No such file or directory: .*none\.pem" "$tmp/err"'

# ---- worker_pool: 2000 jobs on 8 workers over every core
run worker_pool 2000 8
jobs=$(awk '/^worker [0-9]+: [0-9]+ jobs$/ { n += $3 } END { print n + 0 }' "$tmp/out")
check "worker_pool sums 1..2000 squared and every job is done once" eval \
	'ok && has "^sum of squares 1..2000 = 2668667000 (expected 2668667000)$" && [ "$jobs" -eq 2000 ]'

# ---- periodic_timer: N ticks then exit, or a signal
run periodic_timer 3 20
check "periodic_timer ticks 3 times and exits 0" eval \
	'ok && [ "$(grep -c "^tick [0-9]*$" "$tmp/out")" -eq 3 ] && has "^tick 3$" &&
	has "^done after 3 ticks$"'

# Emptied here, not by the background job's redirection, which may come
# after wait_for has read the last run's "tick 2".
: >"$tmp/out"
"$ex/periodic_timer" 0 20 >"$tmp/out" 2>"$tmp/err" &
tpid=$!
pids="$pids $tpid"
if wait_for "$tmp/out" "^tick 2$" "$tpid"; then
	kill -TERM "$tpid"
	wait_exit "$tpid"
	check "periodic_timer stops on SIGTERM with exit 0" eval \
		'ok && has "^shut down after [0-9]* ticks$" && ! has "^done after"'
else
	fail "periodic_timer 0 20 did not tick twice"
fi

# ---- guarded_backend: an exhausted pool, timeouts, back-off, try_get
run guarded_backend
served=$(sed -n 's/^served \([0-9]*\), gave up \([0-9]*\),.*/\1+\2/p' "$tmp/out")
check "guarded_backend times out waits, backs off, rejects a try_get" eval \
	'ok && has "^try_get while exhausted: Device or resource busy$" &&
	has "pool exhausted (Connection timed out), backing off" &&
	has "wait timeouts [1-9][0-9]*, rejected by try_get 1, in use 0$" &&
	[ -n "$served" ] && [ $((served)) -eq 8 ]'

# ---- offload_dns: no network needed for its defaults
run offload_dns
check "offload_dns resolves localhost and numeric addresses" eval \
	'ok && has "^localhost:.* \(127\.0\.0\.1\|::1\)" && has "^127\.0\.0\.1: 127\.0\.0\.1$" &&
	has "^::1: ::1$" && has "^offload pool: [1-9][0-9]* jobs done"'
run offload_dns localhost 192.0.2.7
check "offload_dns resolves names from its command line" eval \
	'ok && has "^localhost:" && has "^192\.0\.2\.7: 192\.0\.2\.7$"'

# ---- preload_blocking: blocking libc code, many fibers, one core
run preload_blocking
peak=$(sed -n 's/^peak: \([0-9]*\) of 50 clients.*/\1/p' "$tmp/out")
check "preload_blocking: 50 blocking clients all done, several at once" eval \
	'ok && has "^50 clients done, 150 echoes verified$" && [ "${peak:-0}" -ge 2 ]'

# ---- servers in the background: proxy, kv_server (and their upstreams)
# start_bg NAME REGEX CMD...: CMD in the background, stdout in
# $tmp/NAME.out and stderr in $tmp/NAME.err; waits for a line of stdout
# matching REGEX, whose first number is the port it listens on. Sets
# bg_pid and bg_port; false if it never says so.
start_bg() {
	local name=$1 regex=$2
	shift 2
	: >"$tmp/$name.out"
	"$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	bg_pid=$!
	pids="$pids $bg_pid"
	bg_port=
	wait_for "$tmp/$name.out" "$regex" "$bg_pid" &&
		bg_port=$(grep -m1 -e "$regex" "$tmp/$name.out" | sed 's/^[^0-9]*\([0-9]*\).*/\1/')
	[ -n "$bg_port" ]
}
# finish PID NAME: wait for PID's exit ($rc); NAME's output becomes
# $tmp/out and $tmp/err, for ok and has. stop PID NAME: SIGTERM first.
finish() {
	wait_exit "$1"
	cp "$tmp/$2.out" "$tmp/out"
	cp "$tmp/$2.err" "$tmp/err"
}
stop() {
	kill -TERM "$1"
	finish "$@"
}
# closed ST: a read's status ST says end of stream or an error (1..128),
# not a timeout (> 128) nor a line (0).
closed() { [ "$1" -ge 1 ] && [ "$1" -le 128 ]; }
# term_open NAME PORT PID: a connection to PORT is open and echoes; then
# PID gets SIGTERM. The read that follows on it: its status (closed) in
# term_read.
term_open() {
	exec 4<>"/dev/tcp/127.0.0.1/$2"
	printf 'ping\n' >&4
	IFS= read -r -t "$bound" line <&4
	[ "${line:-}" = ping ] || fail "$1: open connection answered '${line:-}'"
	kill -TERM "$3"
	IFS= read -r -t "$bound" line <&4
	term_read=$?
	exec 4<&-
}
# until_refused PORT PID: until nothing accepts on PORT (PID still runs).
until_refused() {
	local i
	for ((i = 0; i < bound * 10; i++)); do
		(exec 5<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null || return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# pipe PORT <IN >OUT: tests/tcp_pipe, bounded; its status in $rc.
pipe() {
	timeout -k 10 "$bound" ./tests/tcp_pipe "$1" 2>>"$tmp/pipe.err"
	rc=$?
}

# ---- proxy, in front of the echo demo
# The echo demo prints its port on stderr.
"./demos/echo/echo-server" --host 127.0.0.1 --port 0 2>"$tmp/echo.out" >/dev/null &
echo_pid=$!
pids="$pids $echo_pid"
echo_port=
wait_for "$tmp/echo.out" "listening on 127.0.0.1:[0-9]" "$echo_pid" &&
	echo_port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$tmp/echo.out")
head -c 5000 /dev/urandom >"$tmp/small"
head -c 1048576 /dev/urandom >"$tmp/big"
: >"$tmp/pipe.err"

if [ -z "$echo_port" ]; then
	fail "the echo demo did not start: $(cat "$tmp/echo.out")"
elif start_bg proxy "^proxy: listening on [0-9]* -> 127.0.0.1:$echo_port$" \
	"$ex/proxy" 0 "127.0.0.1:$echo_port" --cores 2; then
	p_pid=$bg_pid p_port=$bg_port
	# tcp_pipe half-closes at the end of its input and exits 0 at the
	# end of stream, which the echo demo gives only after its own.
	pipe "$p_port" <"$tmp/small" >"$tmp/small.got"
	check "proxy: 5000 bytes come back exactly, half-closes pass both ways" eval \
		'[ "$rc" -eq 0 ] && cmp -s "$tmp/small" "$tmp/small.got"'
	pipe "$p_port" <"$tmp/big" >"$tmp/big.got"
	check "proxy: 1 MiB comes back exactly" eval \
		'[ "$rc" -eq 0 ] && cmp -s "$tmp/big" "$tmp/big.got"'
	cpids=
	for i in 1 2 3 4; do
		(pipe "$p_port" <"$tmp/big" >"$tmp/big.got$i"; exit "$rc") &
		cpids="$cpids $!"
	done
	bad=0
	for p in $cpids; do wait "$p" || bad=$((bad + 1)); done
	for i in 1 2 3 4; do cmp -s "$tmp/big" "$tmp/big.got$i" || bad=$((bad + 1)); done
	check "proxy: 4 clients of 1 MiB at once, every byte back" [ "$bad" -eq 0 ]

	# SIGTERM with a connection open: new connections are refused, the
	# open one goes on until its client closes, then the proxy exits.
	exec 4<>"/dev/tcp/127.0.0.1/$p_port"
	printf 'ping\n' >&4
	IFS= read -r -t "$bound" line <&4
	[ "${line:-}" = ping ] || fail "proxy: open connection answered '${line:-}'"
	kill -TERM "$p_pid"
	check "proxy: refuses new connections once SIGTERM drains it" until_refused "$p_port" "$p_pid"
	printf 'again\n' >&4
	IFS= read -r -t "$bound" line <&4
	check "proxy: a connection open across SIGTERM goes on" [ "${line:-}" = again ]
	exec 4>&-
	finish "$p_pid" proxy
	check "proxy: exits 0 once its last connection has closed, logging it" eval \
		'ok && has ": 11 bytes up, 11 bytes down: closed$" && has "^proxy: stopped$" &&
		has ": 1048576 bytes up, 1048576 bytes down: closed$"'
else
	fail "proxy did not start: $(cat "$tmp/proxy.err")"
fi

# An upstream that answers only after its client's end of stream.
"./tests/tcp_pipe" --after-eof >"$tmp/after.out" 2>/dev/null &
after_pid=$!
pids="$pids $after_pid"
after_port=
wait_for "$tmp/after.out" "^port [0-9]*$" "$after_pid" && after_port=$(sed -n 's/^port //p' "$tmp/after.out")
if [ -n "$after_port" ] && start_bg half "^proxy: listening on [0-9]" \
	"$ex/proxy" 0 "127.0.0.1:$after_port" --cores 1; then
	head -c 3000 "$tmp/small" | pipe "$bg_port" >"$tmp/half.got"
	check "proxy: a client's half-close reaches the upstream, whose answer comes back after it" \
		eval '[ "$rc" -eq 0 ] && [ "$(cat "$tmp/half.got")" = "3000 bytes" ]'
	stop "$bg_pid" half
	check "proxy logs the half-closed connection and stops on SIGTERM" eval \
		'ok && has ": 3000 bytes up, 11 bytes down: closed$"'
else
	fail "proxy or its upstream did not start: $(cat "$tmp/half.err" 2>/dev/null)"
fi
kill -TERM "$after_pid" 2>/dev/null
wait "$after_pid" 2>/dev/null

# The idle timeout: a connection that sends nothing is closed after it
# (at least that long: what a loaded machine adds is not measured).
if [ -n "$echo_port" ] && start_bg idle "^proxy: listening on [0-9]" \
	"$ex/proxy" 0 "127.0.0.1:$echo_port" --idle-timeout 200; then
	i_pid=$bg_pid i_port=$bg_port
	t0=$(date +%s%N) # before the connect: the proxy's clock starts at its accept
	exec 3<>"/dev/tcp/127.0.0.1/$i_port"
	IFS= read -r -t "$bound" line <&3
	st=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	exec 3<&-
	check "proxy closes a connection idle for 200 ms (after $ms ms)" eval \
		'closed "$st" && [ "$ms" -ge 200 ]'
	check "proxy logs the idle timeout" wait_for "$tmp/idle.out" ": 0 bytes up, 0 bytes down: idle for 200 ms$" "$i_pid"

	# The upstream gone: the client sees its connection closed.
	kill -TERM "$echo_pid"
	wait_exit "$echo_pid"
	exec 3<>"/dev/tcp/127.0.0.1/$i_port"
	IFS= read -r -t "$bound" line <&3
	st=$?
	exec 3<&-
	check "proxy: an upstream that refuses, and the client sees its connection closed" closed "$st"
	check "proxy logs the refusal" wait_for "$tmp/idle.out" \
		": upstream 127.0.0.1:$echo_port: Connection refused$" "$i_pid"
	stop "$i_pid" idle
	check "proxy stops on SIGTERM with nothing open" eval 'ok && has "^proxy: stopped$"'
else
	fail "proxy (idle timeout) did not start: $(cat "$tmp/idle.err" 2>/dev/null)"
fi

# A connection that outlives the drain's grace is cut, and the proxy
# still exits 0 (its copy fibers have let go of the connections first).
# The first echo demo's banner is emptied here: the redirection below may
# come after wait_for has read it, and sed then finds no port.
: >"$tmp/echo.out"
"./demos/echo/echo-server" --host 127.0.0.1 --port 0 2>"$tmp/echo.out" >/dev/null &
echo_pid=$!
pids="$pids $echo_pid"
echo_port=
wait_for "$tmp/echo.out" "listening on 127.0.0.1:[0-9]" "$echo_pid" &&
	echo_port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$tmp/echo.out")
if [ -n "$echo_port" ] && start_bg grace "^proxy: listening on [0-9]" \
	"$ex/proxy" 0 "127.0.0.1:$echo_port" --cores 2 --grace 200; then
	g_pid=$bg_pid
	term_open proxy "$bg_port" "$g_pid"
	check "proxy cuts a connection still open when the grace is over" closed "$term_read"
	finish "$g_pid" grace
	check "proxy exits 0 after the grace, logging the cut connection" eval \
		'ok && has ": 5 bytes up, 5 bytes down: cut at the end of the drain$" &&
		has "^proxy: stopped$"'
else
	fail "proxy (grace) did not start: $(cat "$tmp/grace.err" 2>/dev/null)"
fi
kill -TERM "$echo_pid" 2>/dev/null && wait_exit "$echo_pid"

# ---- kv_server
# kv ID: a client of its own keys, one command at a time: 20 SETs, 20
# GETs, 10 DELs, then a GET of a deleted key and QUIT, every reply checked.
kv() {
	local id=$1 j line
	exec 3<>"/dev/tcp/127.0.0.1/$kv_port" || return 1
	ask() { # ask COMMAND REPLY
		printf '%s\n' "$1" >&3
		IFS= read -r -t "$bound" line <&3 && [ "$line" = "$2" ] ||
			{ echo "kv $id: '$1' got '${line:-}', not '$2'" >&2; return 1; }
	}
	for ((j = 0; j < 20; j++)); do ask "SET k$id.$j v$id $j" OK || return 1; done
	for ((j = 0; j < 20; j++)); do ask "GET k$id.$j" "VALUE v$id $j" || return 1; done
	for ((j = 0; j < 20; j += 2)); do ask "DEL k$id.$j" DELETED || return 1; done
	ask "GET k$id.0" NOT_FOUND && ask QUIT OK || return 1
	IFS= read -r -t "$bound" line <&3
	closed $? || { echo "kv $id: not closed after QUIT" >&2; return 1; }
}
# replies PORT TEXT: TEXT in one write, then every reply line on stdout,
# and "<closed>" if the server closed the connection (not a timeout).
replies() {
	local line st
	exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
	printf '%s' "$2" >&3
	while IFS= read -r -t "$bound" line <&3; st=$?; [ "$st" -eq 0 ]; do
		printf '%s\n' "$line"
	done
	closed "$st" && echo "<closed>"
	exec 3<&-
}
# same GOT WANT: equal, or both said on stderr.
same() {
	[ "$1" = "$2" ] && return 0
	printf 'got:\n%s\nwanted:\n%s\n' "$1" "$2" | sed 's/^/    /' >&2
	return 1
}

if start_bg kv "^kv_server: listening on [0-9]*$" "$ex/kv_server" 0 --cores 2; then
	kv_pid=$bg_pid kv_port=$bg_port
	cpids=
	for i in 1 2 3 4 5 6; do
		kv "$i" 2>>"$tmp/kv.clients" &
		cpids="$cpids $!"
	done
	bad=0
	for p in $cpids; do wait "$p" || bad=$((bad + 1)); done
	check "kv_server: 6 clients at once SET, GET and DEL keys (on 2 cores)" eval \
		'[ "$bad" -eq 0 ] || { cat "$tmp/kv.clients" >&2; false; }'

	got=$(replies "$kv_port" $'SET p 1\nGET p\nSET p two words\nGET p\nDEL p\nDEL p\nGET p\nCOUNT\nGET\nBOGUS x\nQUIT\nCOUNT\n')
	want=$'OK\nVALUE 1\nOK\nVALUE two words\nDELETED\nNOT_FOUND\nNOT_FOUND\nCOUNT 60'
	want+=$'\nERR unknown command or wrong arguments\nERR unknown command or wrong arguments\nOK'
	want+=$'\n<closed>'
	check "kv_server: pipelined commands in one write, every reply in order, none after QUIT" \
		same "$got" "$want"

	got=$(replies "$kv_port" "SET long $(head -c 2000 /dev/zero | tr '\0' x)"$'\nCOUNT\n')
	check "kv_server: a line too long gets ERR, and the connection is closed" \
		same "$got" $'ERR line too long\n<closed>'

	# SIGTERM: a connection waiting for its next command is closed at
	# once; one with half a command in (read with a COUNT before it, in
	# the same write) finishes it. If the idle one had waited for the
	# grace, the other would have been cut with it.
	exec 4<>"/dev/tcp/127.0.0.1/$kv_port"
	printf 'COUNT\n' >&4
	IFS= read -r -t "$bound" line <&4
	[ "${line:-}" = "COUNT 60" ] || fail "kv_server: idle connection got '${line:-}'"
	exec 5<>"/dev/tcp/127.0.0.1/$kv_port"
	printf 'COUNT\nSET late ' >&5
	IFS= read -r -t "$bound" line <&5
	[ "${line:-}" = "COUNT 60" ] || fail "kv_server: busy connection got '${line:-}'"
	kill -TERM "$kv_pid"
	IFS= read -r -t "$bound" line <&4
	check "kv_server: SIGTERM closes a connection waiting for a command" closed $?
	printf 'value\n' >&5
	IFS= read -r -t "$bound" line <&5
	check "kv_server: a command half in when SIGTERM came is finished" [ "${line:-}" = OK ]
	IFS= read -r -t "$bound" line <&5
	check "kv_server: ... and then its connection is closed" closed $?
	exec 4<&- 5<&-
	finish "$kv_pid" kv
	check "kv_server exits 0 after the drain" eval \
		'ok && has "^kv_server: stopped after [0-9]* connections, 61 keys$"'
else
	fail "kv_server did not start: $(cat "$tmp/kv.err")"
fi

# The rate limit: 5 commands at once, then 1 a second; 20 in one write
# get 5 answers and then "ERR rate limited" (at least once: a slow
# machine may earn a token or two meanwhile). QUIT is never refused.
if start_bg rate "^kv_server: listening on [0-9]*$" "$ex/kv_server" 0 --cores 1 \
	--rate 1 --burst 5; then
	got=$(replies "$bg_port" "$(printf 'GET r\n%.0s' {1..20})"$'\nQUIT\n')
	limited=$(grep -c '^ERR rate limited$' <<<"$got")
	rate_ok() { # 5 answers first; the rest answered or refused; QUIT's OK; closed
		[ "$(head -n 5 <<<"$got" | grep -c '^NOT_FOUND$')" -eq 5 ] && [ "$limited" -ge 1 ] &&
			[ "$(grep -c -v '^\(NOT_FOUND\|ERR rate limited\)$' <<<"$got")" -eq 2 ] &&
			[ "$(tail -n 2 <<<"$got")" = $'OK\n<closed>' ] ||
			{ printf '%s\n' "$got" | sed 's/^/    got: /' >&2; false; }
	}
	check "kv_server: a burst past the rate limit is refused ($limited of 20)" rate_ok
	stop "$bg_pid" rate
	check "kv_server (rate limited) stops on SIGTERM" ok
else
	fail "kv_server --rate did not start: $(cat "$tmp/rate.err")"
fi
# ---- echo_server: every byte back; a clean stop with a connection open
# Its banner names the address: the port is after "127.0.0.1:" (start_bg
# would take the 127).
if start_bg echo_ex "^echo_server: listening on 127\.0\.0\.1:[0-9]*$" "$ex/echo_server" 0; then
	e_pid=$bg_pid
	e_port=$(sed -n 's/^echo_server: listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/echo_ex.out")
	pipe "$e_port" <"$tmp/small" >"$tmp/echo_ex.got"
	check "echo_server: 5000 bytes come back exactly, closed at the client's end of stream" eval \
		'[ "$rc" -eq 0 ] && cmp -s "$tmp/small" "$tmp/echo_ex.got"'
	pipe "$e_port" <"$tmp/big" >"$tmp/echo_ex.got"
	check "echo_server: 1 MiB comes back exactly" eval \
		'[ "$rc" -eq 0 ] && cmp -s "$tmp/big" "$tmp/echo_ex.got"'
	term_open echo_server "$e_port" "$e_pid"
	check "echo_server: SIGTERM closes a connection left open" closed "$term_read"
	finish "$e_pid" echo_ex
	check "echo_server stops cleanly on SIGTERM (exit 0, stderr empty)" eval \
		'ok && has "^echo_server: stopped$"'
else
	fail "echo_server did not start: $(cat "$tmp/echo_ex.err")"
fi

# ---- ws_echo: the echo over WebSocket, its own client, a clean stop
if start_bg ws_ex "^ws_echo: listening on port [0-9]*$" "$ex/ws_echo" 0; then
	w_pid=$bg_pid
	timeout "$bound" "$ex/ws_echo" --connect "ws://127.0.0.1:$bg_port/" one 'two ✓' \
		>"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "ws_echo --connect: each message echoed, then closed with 1000" eval \
		'ok && [ "$(cat "$tmp/out")" = "$(printf "one\ntwo ✓\nws_echo: closed with 1000")" ]'
	stop "$w_pid" ws_ex
	check "ws_echo stops cleanly on SIGTERM (exit 0, stderr empty)" eval \
		'ok && has "^ws_echo: stopped$"'
else
	fail "ws_echo did not start: $(cat "$tmp/ws_ex.err")"
fi

# ---- deadlines: what ends a wait, scene by scene
run deadlines
check "deadlines: a deadline turns a waiting recv into ETIMEDOUT, later calls too, until cleared" \
	eval 'ok && has "^deadline: recv gave up after [0-9]* ms: ETIMEDOUT (Connection timed out)$" &&
	has "^deadline: past it, a 10 ms sleep fails at once: ETIMEDOUT$" &&
	has "^deadline: cleared, the same sleep returns OK$"'
check "deadlines: a cancel ends a blocked recv, and is sticky" eval \
	'ok && has "^cancel: the worker.s recv returned ECANCELED (Operation canceled)$" &&
	has "^cancel: its next call, a sleep, returned ECANCELED too: a cancel is sticky$"'
check "deadlines: a send works inside a cleanup; the cancel shows after it; join gets the result" \
	eval 'ok && has "^cleanup: inside runtime_cleanup_begin/_end a send works: 4 bytes$" &&
	has "^cleanup: after runtime_cleanup_end the cancel shows again: ECANCELED$" &&
	has "^join: the worker returned ECANCELED$"'
check "deadlines: a group member's failure cancels the others; the wait reports it" eval \
	'ok && has "^group: member 1 (100 ms deadline) ended: ETIMEDOUT$" &&
	has "^group: member 2 (no deadline) ended: ECANCELED$" &&
	has "^group: member 3 (no deadline) ended: ECANCELED$" &&
	has "^group: every member has ended; the first failure: ETIMEDOUT (Connection timed out)$" &&
	has "^done$"'

# ---- http_service, over HTTP
# http PORT REQUEST: REQUEST (whole, with "Connection: close") over
# /dev/tcp; the answer in $tmp/resp, CRs removed; its status in $rc.
http() {
	timeout -k 10 "$bound" bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "%s" "$2" >&3 &&
		tr -d "\r" <&3' _ "$1" "$2" >"$tmp/resp" 2>"$tmp/resp.err"
	rc=$?
}
status() { [ "$rc" -eq 0 ] && [ "$(head -n 1 "$tmp/resp")" = "HTTP/1.1 $1" ]; } # status "200 OK"
field() { sed '/^$/q' "$tmp/resp" | grep -q -x -e "$1"; } # field REGEX: a line of the head
body() { [ "$(sed '1,/^$/d' "$tmp/resp")" = "$1" ]; }     # body TEXT: all of it, exactly
get() { http "$1" "GET $2 HTTP/1.1"$'\r\n'"Host: t"$'\r\n'"Connection: close"$'\r\n\r\n'; }
post() { # post PORT PATH BODY
	http "$1" "POST $2 HTTP/1.1"$'\r\n'"Host: t"$'\r\n'"Connection: close"$'\r\n'"Content-Length: ${#3}"$'\r\n\r\n'"$3"
}

if start_bg hs "^http_service: listening on port [0-9]* (HTTP), 2 cores$" "$ex/http_service" \
	--port 0 --cores 2; then
	h_pid=$bg_pid h_port=$bg_port
	get "$h_port" "/hello?name=Ada%20Lovelace"
	check "http_service: GET /hello?name=... is 200 with the name decoded and the handler's fields" \
		eval 'status "200 OK" && body "Hello, Ada Lovelace!" && field "Cache-Control: no-store" &&
		field "X-Core: [01]" && field "Content-Type: text/plain; charset=utf-8"'
	get "$h_port" /hello
	check "http_service: GET /hello without a name greets the world" eval \
		'status "200 OK" && body "Hello, world!"'
	post "$h_port" /sum "1 2 39"
	check "http_service: POST /sum reads the body and answers its sum" eval \
		'status "200 OK" && body 42'
	post "$h_port" /sum "1 two"
	check "http_service: POST /sum of something else is 400" eval \
		'status "400 Bad Request" && body "want whole numbers separated by spaces"'
	get "$h_port" /sum
	check "http_service: GET /sum is 405 with Allow: POST" eval \
		'status "405 Method Not Allowed" && field "Allow: POST"'
	get "$h_port" /nope
	check "http_service: another path is 404" eval 'status "404 Not Found" && body "not found"'

	# A keep-alive connection waiting for its next request when SIGTERM
	# comes: the drain closes it, and the service exits 0.
	exec 4<>"/dev/tcp/127.0.0.1/$h_port"
	printf 'GET /hello HTTP/1.1\r\nHost: t\r\n\r\n' >&4
	while IFS= read -r -t "$bound" line <&4 && [ -n "${line%$'\r'}" ]; do :; done # the head
	IFS= read -r -t "$bound" line <&4
	[ "${line:-}" = "Hello, world!" ] || fail "http_service: keep-alive GET answered '${line:-}'"
	kill -TERM "$h_pid"
	IFS= read -r -t "$bound" line <&4
	check "http_service: SIGTERM closes an idle keep-alive connection" closed $?
	exec 4<&-
	finish "$h_pid" hs
	check "http_service drains and exits 0 on SIGTERM, having logged each request" eval \
		'ok && has "^127.0.0.1 - - \[.*\] \"GET /hello?name=Ada%20Lovelace HTTP/1.1\" 200 " &&
		has "\"POST /sum HTTP/1.1\" 200 " && has "\"POST /sum HTTP/1.1\" 400 " &&
		has "\"GET /sum HTTP/1.1\" 405 " && has "\"GET /nope HTTP/1.1\" 404 " &&
		has "^http_service: stopped after 7 requests$"'
else
	fail "http_service did not start: $(cat "$tmp/hs.err")"
fi

# ---- http_service over HTTPS: tls_client's GET, curl's POST; a CA and a
# leaf for 127.0.0.1 made here with the openssl CLI.
https_checks() {
	local c=$tmp/certs
	mkdir -p "$c"
	test_certs "$c" examples-test-ca >"$tmp/out" 2>"$tmp/err" || { fail "certificates made with openssl"; return; }
	if ! start_bg hss "^http_service: listening on port [0-9]* (HTTPS), 2 cores$" \
		"$ex/http_service" --port 0 --cores 2 --tls-cert "$c/leaf.crt" --tls-key "$c/leaf.key"; then
		fail "http_service (HTTPS) did not start: $(cat "$tmp/hss.err")"
		return
	fi
	local s_pid=$bg_pid s_port=$bg_port requests=1
	run tls_client --cacert "$c/ca.crt" "127.0.0.1:$s_port" "/hello?name=TLS"
	check "http_service over HTTPS: tls_client's GET /hello, verified, ALPN http/1.1" eval \
		'ok && has "^HTTP/1.1 200 OK" && has "^Hello, TLS!$" &&
		has "^tls 1: TLSv1\.[23], [A-Z0-9_-]*, ALPN http/1\.1, resumed no$"'
	if command -v curl >/dev/null 2>&1; then
		timeout -k 10 "$bound" curl -sS --cacert "$c/ca.crt" -d "20 22" -w ' %{http_code}' \
			"https://127.0.0.1:$s_port/sum" >"$tmp/out" 2>"$tmp/err"
		rc=$?
		check "http_service over HTTPS: curl's POST /sum is 200 with the sum" eval \
			'ok && [ "$(cat "$tmp/out")" = "42
 200" ]'
		timeout -k 10 "$bound" curl -sS --cacert "$c/ca.crt" -w ' %{http_code}' \
			"https://localhost:$s_port/nope" >"$tmp/out" 2>"$tmp/err"
		rc=$?
		check "http_service over HTTPS: curl's GET of another path is 404" eval \
			'ok && [ "$(cat "$tmp/out")" = "not found
 404" ]'
		requests=3
	else
		missing "http_service over HTTPS with curl (POST /sum, 404)" "curl (Debian: curl)"
	fi
	stop "$s_pid" hss
	check "http_service (HTTPS) exits 0 on SIGTERM, having served all $requests request(s)" eval \
		'ok && has "^http_service: stopped after $requests requests$"'
}
if command -v openssl >/dev/null 2>&1; then
	https_checks
else
	missing "http_service over HTTPS" "the openssl CLI, to make a certificate (Debian: openssl)"
fi

# ---- gateway: in front of two of the HTTP demo (files under $tmp/gw,
# POST /echo), over HTTP and, with the openssl CLI, HTTPS; 50 MB each way
# checked by hash, the routes, 404, 504, 502, 429, and the drain.
gw_code_lines() { # lines of code: blank lines and comments not counted
	awk '/^[ \t]*$/ { next } c { if (/\*\//) c = 0; next }
		/^[ \t]*\/\*/ { if (!/\*\//) c = 1; next } { n++ } END { print n }' "$1"
}
gw_curl() { # gw_curl OUT URL ARGS...: curl's "%{http_code}" in $code
	code=$(timeout -k 10 "$bound" curl -sS -o "$1" -w '%{http_code}' "${@:3}" "$2" 2>>"$tmp/curl.err")
}
gw_both_ways() { # gw_both_ways SCHEME PORT CURL_ARGS...: 50 MB down and up
	local base=$1://127.0.0.1:$2
	shift 2
	gw_curl "$tmp/gw/down" "$base/api/b/big.bin" "$@"
	check "gateway ($base): a 50 MB download from upstream b, whole" eval \
		'[ "$code" = 200 ] && cmp -s "$tmp/gw/down" "$tmp/gw/big.bin"'
	gw_curl "$tmp/gw/up" "$base/api/a/echo" --data-binary "@$tmp/gw/big.bin" "$@"
	check "gateway ($base): a 50 MB upload to upstream a, echoed whole" eval \
		'[ "$code" = 200 ] && cmp -s "$tmp/gw/up" "$tmp/gw/big.bin"'
}
gateway_checks() {
	local lines tls_args=() certs=$tmp/certs
	lines=$(gw_code_lines "${srcdir:-.}/examples/gateway.c")
	check "gateway.c is at most 200 lines of code ($lines)" [ "$lines" -le 200 ]
	mkdir -p "$tmp/gw" && head -c 52428800 /dev/urandom >"$tmp/gw/big.bin" &&
		printf 'small\n' >"$tmp/gw/small.txt"
	local up=(./demos/http/http-server --host 127.0.0.1 --port 0 --root "$tmp/gw" --body-max 67108864)
	start_bg gwa "listening on 127\.0\.0\.1:" "${up[@]}" || { fail "gateway: upstream a did not start"; return; }
	local a_pid=$bg_pid a_port
	a_port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$tmp/gwa.out")
	start_bg gwb "listening on 127\.0\.0\.1:" "${up[@]}" || { fail "gateway: upstream b did not start"; return; }
	local b_pid=$bg_pid b_port
	b_port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$tmp/gwb.out")
	if command -v openssl >/dev/null 2>&1 && mkdir -p "$certs" &&
		test_certs "$certs" examples-test-ca >/dev/null 2>&1; then
		tls_args=(--tls-port 0 --cert "$certs/leaf.crt" --key "$certs/leaf.key")
	else
		missing "gateway over HTTPS" "the openssl CLI, to make a certificate (Debian: openssl)"
	fi
	start_bg gw "^gateway: listening on port [0-9]*$" "$ex/gateway" --port 0 "${tls_args[@]}" \
		--upstream-a "http://127.0.0.1:$a_port" --upstream-b "http://127.0.0.1:$b_port/" \
		--timeout-ms 500 --cores 2 || { fail "gateway did not start: $(cat "$tmp/gw.err")"; return; }
	local g_pid=$bg_pid g_port=$bg_port base=http://127.0.0.1:$bg_port
	gw_both_ways http "$g_port"
	if [ ${#tls_args[@]} -gt 0 ]; then
		wait_for "$tmp/gw.out" "^gateway: TLS on port [0-9]*$" "$g_pid"
		gw_both_ways https "$(sed -n 's/^gateway: TLS on port \([0-9]*\)$/\1/p' "$tmp/gw.out")" \
			--cacert "$certs/ca.crt"
	fi
	gw_curl "$tmp/gw/r" "$base/api/b/small.txt"
	check "gateway: /api/b/small.txt is upstream b's /small.txt" eval \
		'[ "$code" = 200 ] && [ "$(cat "$tmp/gw/r")" = small ]'
	gw_curl "$tmp/gw/r" "$base/healthz"
	check "gateway: /healthz is 200 ok" eval '[ "$code" = 200 ] && [ "$(cat "$tmp/gw/r")" = ok ]'
	gw_curl "$tmp/gw/r" "$base/metrics"
	check "gateway: /metrics has both servers' and the client's figures" eval '[ "$code" = 200 ] &&
		grep -q "^runtime_http_server_requests_total{server=\"http\"" "$tmp/gw/r" &&
		grep -q "^runtime_http_client_requests_total{client=\"upstreams\"} [1-9]" "$tmp/gw/r"'
	gw_curl "$tmp/gw/r" "$base/api/a/../b/small.txt" --path-as-is
	local dots=$code
	gw_curl "$tmp/gw/r" "$base/nope"
	check "gateway: a path that leaves /api/a by dot segments is 404, so is another one" eval \
		'[ "$dots" = 404 ] && [ "$code" = 404 ]'
	local t0=$SECONDS
	gw_curl "$tmp/gw/r" "$base/api/a/delay?ms=5000"
	check "gateway: an upstream later than --timeout-ms is 504, before it answers" eval \
		'[ "$code" = 504 ] && [ $((SECONDS - t0)) -lt 5 ]'
	kill -KILL "$b_pid"
	wait "$b_pid" 2>/dev/null
	gw_curl "$tmp/gw/r" "$base/api/b/small.txt"
	check "gateway: an upstream that is gone is 502" [ "$code" = 502 ]
	stop "$g_pid" gw
	check "gateway drains and exits 0 on SIGTERM, every answer logged, only the proxy's reasons on stderr" \
		eval '[ "$rc" -eq 0 ] && has "\"GET /api/b/big.bin HTTP/1.1\" 200 52428800" &&
		has "\"POST /api/a/echo HTTP/1.1\" 200 52428800" && has "\"GET /api/a/delay?ms=5000 HTTP/1.1\" 504 " &&
		has "\"GET /api/b/small.txt HTTP/1.1\" 502 " && ! grep -v "^proxy: http://" "$tmp/err"'
	# The rate: one a second, burst one, per client address.
	start_bg gw1 "^gateway: listening on port [0-9]*$" "$ex/gateway" --port 0 --rate 1 \
		--upstream-a "http://127.0.0.1:$a_port" --upstream-b "http://127.0.0.1:$a_port" ||
		{ fail "gateway (--rate 1) did not start: $(cat "$tmp/gw1.err")"; return; }
	local r_pid=$bg_pid
	gw_curl "$tmp/gw/r" "http://127.0.0.1:$bg_port/api/a/small.txt"
	local first=$code
	gw_curl "$tmp/gw/r" "http://127.0.0.1:$bg_port/api/a/small.txt" -D "$tmp/gw/head"
	check "gateway --rate 1: a second request at once is 429 with Retry-After" eval \
		'[ "$first" = 200 ] && [ "$code" = 429 ] && grep -qi "^Retry-After: 1" "$tmp/gw/head"'
	stop "$r_pid" gw1
	check "gateway --rate 1 exits 0 on SIGTERM, stderr empty" ok
	stop "$a_pid" gwa
}
if command -v curl >/dev/null 2>&1; then
	gateway_checks
else
	missing "gateway" "curl (Debian: curl)"
fi

check "tcp_pipe, the test's client, saw no error" eval '! [ -s "$tmp/pipe.err" ]'

# Never a pass for what did not run: SKIP (77) when a group was skipped.
summary
