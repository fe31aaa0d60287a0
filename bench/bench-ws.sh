#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-ws.sh: a WebSocket server's CPU per echoed message and memory per
# idle WebSocket, with and without permessage-deflate. For the project's
# demo HTTP server (/ws: every message echoed as it came), Go's
# gorilla/websocket (bench/go_ws_echo.go, GOMAXPROCS=1) and Node.js's ws
# package (bench/node_ws_echo.js); the load is bench/ws_load (handshakes
# and echoes checked byte for byte).
#
# echo: ECHO_CONNS WebSockets, each a closed loop of one SIZE-byte binary
# message and its echo, for DURATION seconds (after WARMUP seconds of the
# same, not measured, so lazy allocations and Node's JIT are done). The
# figure is
#   cpu_ns_per_msg = server utime+stime (/proc/PID/stat) over the run / msgs
# the window being ws_load's whole run: its ECHO_CONNS handshakes are in
# it, negligible beside the messages. Beside it: msgs/s and the round
# trip's p99 as ws_load saw them. With deflate, the client offers
# permessage-deflate with no context takeover both ways and sends its
# messages uncompressed (RFC 7692 allows it): a server deflates every echo
# and never inflates. The demo compresses messages from 64 bytes at level
# 1, gorilla all at level 1, and the Node peer is set to do as the demo
# does (ws's defaults, 1024 bytes and level 6, would skip 64-byte echoes);
# the "compressed" column says which share of the echoes came compressed.
#
# idle: bytes per idle WebSocket, as bench-idle.sh's figure,
#   bytes_per_conn = (VmRSS after - VmRSS before) * 1024 / held
# ws_load opens CONNS WebSockets (INFLIGHT at a time, source addresses
# spread over 127.1.0.0/16), each with IDLE_SIZE bytes echoed once (0:
# handshake only) - what a server keeps of a WebSocket that was used -
# and holds them idle. "before" is read after WARMUP_CONNS were opened,
# echoed and closed; "after" SETTLE seconds after the last was held. User
# space only: the kernel's socket buffers are not in RSS.
#
# Each run starts a fresh server pinned to SERVER_CPU on a fresh port of
# 127.0.0.1, the load pinned to LOAD_CPU; ROUNDS rounds, the servers'
# order rotated each round. Prints one line per run, then a table per mode
# of the medians over the rounds and their ratio to the best peer's (the
# lower of gorilla's and node-ws's) per deflate setting. A run that fails -
# no listener, an error or a failed check in ws_load, fewer than all
# connections open or held (or, with deflate, any without it agreed), a
# demo not exiting 0 on TERM - says status=... and makes the exit status
# non-zero; the tables are printed all the same. A peer that cannot be
# had is skipped with a note.
#
# Environment:
#   HTTP_SERVER   demo HTTP server (default $BENCH_DIR/../demos/http/http-server)
#   BENCH_DIR     where ws_load is (default: this script's directory)
#   SERVERS       subset of "demo gorilla node-ws" (default all)
#   MODES         subset of "echo idle" (default both)
#   DEFLATE       "0 1" (default): without and with permessage-deflate
#   ROUNDS (3)  SERVER_CPU (0)  LOAD_CPU (1)  PORT_BASE (random in 20000-29999)
#   echo: ECHO_CONNS (64)  SIZE (64 bytes)  DURATION (5 s)  WARMUP (1 s; 0: none)
#   idle: CONNS (10000)  IDLE_SIZE (64; 0: handshake only)  SETTLE (3 s)
#         WARMUP_CONNS (100)  INFLIGHT (512: below somaxconn and
#         tcp_max_syn_backlog, so no SYN is dropped)
#   GORILLA_GOPATH  a GOPATH holding github.com/gorilla/websocket (default
#                 /usr/share/gocode: Debian's golang-github-gorilla-websocket-dev);
#                 go_ws_echo is built from it in GOPATH mode. No go or no
#                 gorilla: skipped.
#   NODE (node)   NODE_WS_DIR (default ~/.cache/runtime-bench/node): where the
#                 ws package is (NODE_WS_DIR/node_modules/ws); if it is not
#                 there, npm installs ws@8 there first. No node, no npm or no
#                 network: skipped.
#
# The fd limit is raised to 1048576 (root with CAP_SYS_RESOURCE) or the
# hard limit; idle runs whose CONNS does not fit fail with status=fd_limit.
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$here/bench-lib.sh"
BENCH_DIR=${BENCH_DIR:-$here}
HTTP_SERVER=${HTTP_SERVER:-$BENCH_DIR/../demos/http/http-server}
WS_LOAD=$BENCH_DIR/ws_load
SERVERS=${SERVERS:-demo gorilla node-ws} MODES=${MODES:-echo idle} DEFLATE=${DEFLATE:-0 1}
ROUNDS=${ROUNDS:-3} SERVER_CPU=${SERVER_CPU:-0} LOAD_CPU=${LOAD_CPU:-1}
PORT_BASE=${PORT_BASE:-$((20000 + RANDOM % 10000))}
ECHO_CONNS=${ECHO_CONNS:-64} SIZE=${SIZE:-64} DURATION=${DURATION:-5} WARMUP=${WARMUP:-1}
CONNS=${CONNS:-10000} IDLE_SIZE=${IDLE_SIZE:-64} SETTLE=${SETTLE:-3}
WARMUP_CONNS=${WARMUP_CONNS:-100} INFLIGHT=${INFLIGHT:-512}
GORILLA_GOPATH=${GORILLA_GOPATH:-/usr/share/gocode}
NODE=${NODE:-node}
NODE_WS_DIR=${NODE_WS_DIR:-${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/runtime-bench/node}
STOP_WAIT=200    # tenths of a second between TERM and KILL: closing many takes a while
HOLD_WAIT=300    # seconds ws_load may take to open CONNS
FD_SLACK=256     # fds a server or ws_load needs besides the connections
IDLE_TIMEOUT_S=300

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-ws.XXXXXX")
srv_pid='' hold_pid='' hold_out='' hold_line='' stop_status='' failed=0 next_port=$PORT_BASE
names=() versions=()

cleanup() {
	[ -n "$hold_pid" ] && kill -KILL "$hold_pid" 2>/dev/null
	[ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "bench-ws: $*" >&2; exit 2; }
note() { echo "bench-ws: $*" >&2; }

is_ours() { [ "$1" = demo ]; }

check_numbers() {
	local v
	for v in ROUNDS SERVER_CPU LOAD_CPU PORT_BASE ECHO_CONNS SIZE DURATION WARMUP CONNS \
		IDLE_SIZE SETTLE WARMUP_CONNS INFLIGHT; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, got '${!v}'"
	done
	for v in ROUNDS ECHO_CONNS DURATION CONNS WARMUP_CONNS INFLIGHT; do
		[ "${!v}" -ge 1 ] || die "$v must be at least 1"
	done
	for v in $MODES; do [[ $v == echo || $v == idle ]] || die "MODES: echo or idle, not '$v'"; done
	for v in $DEFLATE; do [[ $v == [01] ]] || die "DEFLATE: 0 or 1, not '$v'"; done
	[ -n "$MODES" ] || die "MODES must not be empty"
	[ -n "$DEFLATE" ] || die "DEFLATE must not be empty"
}

# The fd limit, inherited by the servers and ws_load: as high as it goes.
check_fds() {
	ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
	fd_limit=$(ulimit -n)
	[ "$fd_limit" = unlimited ] && fd_limit=1048576
	[[ " $MODES " != *" idle "* ]] || fits_fds "$CONNS" ||
		note "warning: CONNS $CONNS needs $((CONNS + FD_SLACK)) fds, the limit is $fd_limit" \
			"(hard $(ulimit -Hn); raising it needs CAP_SYS_RESOURCE): idle runs fail"
}

fits_fds() { [ $(($1 + FD_SLACK)) -le "$fd_limit" ]; }

# INFLIGHT SYNs and accepts at a time must fit the kernel's queues.
check_sysctls() {
	local f v
	for f in net/core/somaxconn net/ipv4/tcp_max_syn_backlog; do
		v=$(cat "/proc/sys/$f" 2>/dev/null) || continue
		[ "$v" -ge "$INFLIGHT" ] || note "warning: $f is $v, below INFLIGHT=$INFLIGHT: SYNs may be dropped"
	done
}

# go_ws_echo, built in GOPATH mode against GORILLA_GOPATH's gorilla.
build_gorilla() {
	local cache
	if ! command -v go >/dev/null; then
		note "skipping gorilla: go not found"
		return 1
	fi
	if [ ! -d "$GORILLA_GOPATH/src/github.com/gorilla/websocket" ]; then
		note "skipping gorilla: no github.com/gorilla/websocket under GORILLA_GOPATH=$GORILLA_GOPATH" \
			"(Debian: golang-github-gorilla-websocket-dev)"
		return 1
	fi
	cache=$(go env GOCACHE 2>/dev/null)
	[ -n "$cache" ] && [ "$cache" != off ] || cache=$tmp/go-cache
	if ! (cd "$tmp" && GOPATH=$GORILLA_GOPATH GO111MODULE=off GOFLAGS='' GOCACHE=$cache \
		go build -o "$tmp/go_ws_echo" "$here/go_ws_echo.go") >"$tmp/go-build.log" 2>&1; then
		note "skipping gorilla: go build failed:"
		sed 's/^/  | /' "$tmp/go-build.log" | tail -5 >&2
		return 1
	fi
	versions+=("$(go env GOVERSION 2>/dev/null)" "gorilla=$(dpkg-query -W -f='${Version}' \
		golang-github-gorilla-websocket-dev 2>/dev/null || echo unknown)")
}

# The ws package in NODE_WS_DIR, installed there by npm if missing.
setup_node() {
	local pkg=$NODE_WS_DIR/node_modules/ws/package.json
	if ! command -v "$NODE" >/dev/null; then
		note "skipping node-ws: $NODE not found"
		return 1
	fi
	if [ ! -f "$pkg" ]; then
		if ! command -v npm >/dev/null; then
			note "skipping node-ws: no ws in $NODE_WS_DIR and no npm to install it"
			return 1
		fi
		note "installing ws@8 into $NODE_WS_DIR with npm"
		if ! { mkdir -p "$NODE_WS_DIR" && timeout 300 npm install --prefix "$NODE_WS_DIR" \
			--no-audit --no-fund ws@8; } >"$tmp/npm.log" 2>&1 || [ ! -f "$pkg" ]; then
			note "skipping node-ws: npm install ws@8 failed (no network?):"
			sed 's/^/  | /' "$tmp/npm.log" | tail -5 >&2
			return 1
		fi
	fi
	versions+=("node=$("$NODE" --version)" \
		"ws=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pkg" | head -1)")
}

check_servers() {
	local n
	for n in $SERVERS; do
		case $n in
		demo) [ -x "$HTTP_SERVER" ] || die "not executable: $HTTP_SERVER (set HTTP_SERVER)" ;;
		gorilla) build_gorilla || continue ;;
		node-ws) setup_node || continue ;;
		*) die "unknown server '$n' (demo, gorilla, node-ws)" ;;
		esac
		names+=("$n")
	done
	[ "${#names[@]}" -gt 0 ] || die "no server to run"
}

check_setup() {
	check_numbers
	check_fds
	check_sysctls
	[ -x "$WS_LOAD" ] || die "not executable: $WS_LOAD (make bench/ws_load; set BENCH_DIR)"
	command -v ss >/dev/null || note "warning: no ss: the open connections cannot be counted"
	check_servers
	check_pinning
	hz=$(getconf CLK_TCK)
}

# Sets cmd: server $1's command line on port $2, deflate $3, for N $4.
server_argv() {
	case $1 in
	demo) # it accepts permessage-deflate whenever it is offered
		cmd=("$HTTP_SERVER" --port "$2" --host 127.0.0.1 --cores 1 --max-conns $(($4 + FD_SLACK))
			--idle-timeout $((IDLE_TIMEOUT_S * 1000))) ;;
	gorilla) cmd=(env GOMAXPROCS=1 "$tmp/go_ws_echo")
		[ "$3" = 1 ] && cmd+=(-deflate)
		cmd+=("$2") ;;
	node-ws) cmd=(env NODE_PATH="$NODE_WS_DIR/node_modules" "$NODE" "$here/node_ws_echo.js" "$2" "$3") ;;
	esac
}

# Start server $2 (deflate $3, for N $1) on a fresh port: sets srv_pid and
# port; on failure says why (after TAG $4) and stops it.
start_server() { # start_server N NAME DEFLATE TAG
	local cmd=()
	take_port
	server_argv "$2" "$port" "$3" "$1"
	"${pin_srv[@]}" "${cmd[@]}" >"$tmp/$2.log" 2>&1 &
	srv_pid=$!
	if ! wait_listening "$srv_pid" "$port"; then
		echo "$4 status=no_listener port=$port"
		sed 's/^/  | /' "$tmp/$2.log" | tail -5
		stop_server
		return 1
	fi
}

field() { # field KEY "k=v k=v ...": the value of KEY, or nothing
	local kv
	for kv in $2; do
		[ "${kv%%=*}" = "$1" ] && { echo "${kv#*=}"; return; }
	done
}

# The demo's banner names its engine (io_uring, or epoll where refused).
engine_of() {
	is_ours "$1" || return 0
	sed -n 's/.*engine \([a-z_]*\).*/ engine=\1/p' "$tmp/$1.log" | head -1
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

# Server-side sockets of established connections on the port.
established() {
	command -v ss >/dev/null || { echo n/a; return; }
	ss -Htn state established "( sport = :$port )" | wc -l
}

# Why a run is bad, as "status=failed: a,b" after TAG $1, from the checks
# (pairs of "condition text") that failed; nothing and 0 if none did.
verdict() { # verdict TAG [OK WHY]...
	local tag=$1 why=()
	shift
	while [ $# -ge 2 ]; do
		[ "$1" = 1 ] || why+=("$2")
		shift 2
	done
	[ "${#why[@]}" -eq 0 ] && return 0
	local IFS=,
	echo "$tag status=failed: ${why[*]}"
	return 1
}

is() { "$@" && echo 1 || echo 0; } # is TEST...: 1 if it holds, else 0

# ------------------------------------------------------------------- echo

# Sets largv: ws_load's echo command line, pinned, for deflate $1 and $2 s.
echo_argv() {
	largv=("${pin_load[@]}" timeout $(($2 + 60)) "$WS_LOAD" --mode echo -c "$ECHO_CONNS" -d "$2"
		-s "$SIZE" --path /ws)
	[ "$1" = 1 ] && largv+=(--deflate)
	largv+=(127.0.0.1 "$port")
}

# WARMUP seconds of the same load, not measured; fails (saying why) unless
# it went without an error.
echo_warm_up() { # echo_warm_up TAG DEFLATE
	local out largv=()
	[ "$WARMUP" -gt 0 ] || return 0
	echo_argv "$2" "$WARMUP"
	out=$("${largv[@]}" 2>&1) && return 0
	echo "$1 status=warmup_failed: $(tr '\n' ' ' <<<"$out")"
	return 1
}

# Server CPU per echoed message of the server running: prints the run's
# line, appends "server deflate cpu_ns msgs_per_s p99_us compressed% round".
echo_measure() { # echo_measure TAG NAME DEFLATE ROUND
	local largv=() out rc t0 t1 line msgs errors conns agreed cpu zpct ok_z=1
	echo_warm_up "$1" "$3" || return 1
	echo_argv "$3" "$DURATION"
	t0=$(cpu_ticks "$srv_pid")
	out=$("${largv[@]}" 2>&1)
	rc=$?
	t1=$(cpu_ticks "$srv_pid")
	line=$(grep '^msgs=' <<<"$out")
	msgs=$(field msgs "$line") errors=$(field errors "$line") conns=$(field conns "$line")
	agreed=$(field deflate "$line")
	if [ -z "$t0" ] || [ -z "$t1" ]; then
		echo "$1 status=server_gone"
		tail -5 "$tmp/$2.log" | sed 's/^/  | /'
		return 1
	fi
	if [ -z "$msgs" ] || [ "$msgs" -eq 0 ]; then
		echo "$1 status=load_failed rc=$rc: $(tr '\n' ' ' <<<"$out")"
		return 1
	fi
	cpu=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$msgs" 'BEGIN { printf "%.0f", d * 1e9 / hz / n }')
	zpct=$(awk -v z="$(field deflated "$line")" -v n="$msgs" 'BEGIN { printf "%.0f", 100 * z / n }')
	echo "$1 msgs=$msgs secs=$(field secs "$line") msgs_per_s=$(field rate "$line")" \
		"p50_us=$(field p50_us "$line") p99_us=$(field p99_us "$line") errors=$errors" \
		"conns=$conns/$ECHO_CONNS deflate=$agreed compressed=$zpct% cpu_ticks=$((t1 - t0))" \
		"cpu_ns_per_msg=$cpu$(engine_of "$2")"
	grep -v '^msgs=' <<<"$out" | sed 's/^/  | /'
	echo "$2 $3 $cpu $(field rate "$line") $(field p99_us "$line") $zpct $4" >>"$tmp/echo"
	[ "$3" = 1 ] && [ "$agreed" != "$conns" ] && ok_z=0
	verdict "$1" "$(is [ "$rc" -eq 0 ])" "ws_load exit $rc" "$(is [ "$errors" = 0 ])" "$errors errors" \
		"$(is [ "$conns" = "$ECHO_CONNS" ])" "$conns of $ECHO_CONNS open" \
		"$ok_z" "deflate agreed on $agreed of $conns"
}

run_echo() { # run_echo ROUND NAME DEFLATE
	local tag="round=$1 mode=echo server=$2 deflate=$3" ok=0
	start_server "$ECHO_CONNS" "$2" "$3" "$tag" || return 1
	echo_measure "$tag" "$2" "$3" "$1" || ok=1
	stop_server
	stopped_clean "$tag" "$2" || ok=1
	return $ok
}

# ------------------------------------------------------------------- idle

# Sets largv: ws_load's idle command line, pinned, for N $1, deflate $2 and
# flags after.
idle_argv() { # idle_argv N DEFLATE [ws_load flags...]
	largv=("${pin_load[@]}" "$WS_LOAD" --mode idle -n "$1" -c "$INFLIGHT" -s "$IDLE_SIZE" --path /ws)
	[ "$2" = 1 ] && largv+=(--deflate)
	largv+=("${@:3}" 127.0.0.1 "$port")
}

# WARMUP_CONNS WebSockets opened (and echoed) and closed; fails (saying
# why) unless all were.
idle_warm_up() { # idle_warm_up TAG DEFLATE
	local out largv=()
	idle_argv "$WARMUP_CONNS" "$2" --no-hold
	out=$(timeout "$HOLD_WAIT" "${largv[@]}" 2>&1)
	if [ "$(field held "$(grep '^held=' <<<"$out")")" != "$WARMUP_CONNS" ]; then
		echo "$1 status=warmup_failed: $(tr '\n' ' ' <<<"$out")"
		return 1
	fi
	sleep 1
}

# Start the holder of CONNS (deflate $1) and wait (HOLD_WAIT at most) until
# it says it holds them. Sets hold_pid, hold_out (its output, a file per
# run) and hold_line to what it said (or nothing).
start_holder() {
	local i largv=()
	hold_out=$tmp/hold-$port.out
	idle_argv "$CONNS" "$1"
	"${largv[@]}" >"$hold_out" 2>&1 &
	hold_pid=$!
	for ((i = 0; i < HOLD_WAIT * 10; i++)); do
		grep -q '^held=' "$hold_out" 2>/dev/null && break
		kill -0 "$hold_pid" 2>/dev/null || break
		sleep 0.1
	done
	hold_line=$(grep '^held=' "$hold_out" 2>/dev/null)
}

# TERM (ws_load closes its connections and exits 0), KILL if it does not.
stop_holder() {
	local i
	kill -TERM "$hold_pid" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		kill -0 "$hold_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$hold_pid" 2>/dev/null
	wait "$hold_pid" 2>/dev/null
	hold_pid=
}

# RSS growth per idle WebSocket of the server running: prints the run's
# line, appends "server deflate bytes round".
idle_measure() { # idle_measure TAG NAME DEFLATE ROUND
	local rss0 rss1 held errors agreed open bytes ok_z=1 ok_open=1
	idle_warm_up "$1" "$3" || return 1
	rss0=$(rss_kb "$srv_pid")
	start_holder "$3"
	held=$(field held "$hold_line") errors=$(field errors "$hold_line")
	agreed=$(field deflate "$hold_line")
	[ -n "$held" ] && sleep "$SETTLE"
	rss1=$(rss_kb "$srv_pid") open=$(established)
	stop_holder
	if [ -z "$rss0" ] || [ -z "$rss1" ]; then
		echo "$1 status=server_gone rss_before_kb=${rss0:-none} rss_after_kb=${rss1:-none}"
		tail -5 "$tmp/$2.log" | sed 's/^/  | /'
		return 1
	fi
	if [ -z "$held" ]; then
		echo "$1 status=load_failed: $(tail -3 "$hold_out" | tr '\n' ' ')"
		return 1
	fi
	bytes=$(awk -v a="$rss0" -v b="$rss1" -v n="$held" \
		'BEGIN { printf "%.0f", n ? (b - a) * 1024 / n : 0 }')
	echo "$1 held=$held errors=$errors open=$open deflate=$agreed open_secs=$(field secs "$hold_line")" \
		"rss_before_kb=$rss0 rss_after_kb=$rss1 bytes_per_conn=$bytes$(engine_of "$2")"
	grep -v '^held=' "$hold_out" | sed 's/^/  | /'
	echo "$2 $3 $bytes $4" >>"$tmp/idle"
	[ "$3" = 1 ] && [ "$agreed" != "$held" ] && ok_z=0
	[ "$open" != n/a ] && [ "$open" -lt "$CONNS" ] && ok_open=0
	verdict "$1" "$(is [ "$held" -eq "$CONNS" ])" "held $held of $CONNS" \
		"$(is [ "$errors" = 0 ])" "$errors errors" \
		"$ok_open" "only $open of $CONNS still established" \
		"$ok_z" "deflate agreed on $agreed of $held"
}

run_idle() { # run_idle ROUND NAME DEFLATE
	local tag="round=$1 mode=idle server=$2 deflate=$3 conns=$CONNS" ok=0
	if ! fits_fds "$CONNS"; then
		echo "$tag status=fd_limit need=$((CONNS + FD_SLACK)) fd_limit=$fd_limit"
		return 1
	fi
	start_server "$CONNS" "$2" "$3" "$tag" || return 1
	idle_measure "$tag" "$2" "$3" "$1" || ok=1
	stop_server
	stopped_clean "$tag" "$2" || ok=1
	return $ok
}

# ----------------------------------------------------------------- tables

# The median of column $4 of results $1 for server $2 at deflate $3, or n/a.
median() {
	awk -v s="$2" -v d="$3" -v c="$4" '$1 == s && $2 == d { print $c }' "$tmp/$1" | median_of
}

# The lowest median of column $3 of results $1 among the peers, at deflate
# $2 (lower is better for both figures), or n/a.
best_peer() { # best_peer RESULTS DEFLATE COLUMN
	local s m best=n/a
	for s in "${names[@]}"; do
		is_ours "$s" && continue
		m=$(median "$1" "$s" "$2" "$3")
		[ "$m" = n/a ] && continue
		if [ "$best" = n/a ] || awk -v a="$m" -v b="$best" 'BEGIN { exit !(a < b) }'; then
			best=$m
		fi
	done
	echo "$best"
}

echo_table() {
	local d s m base z
	echo "--- echo: server CPU per echoed $SIZE-byte message, $ECHO_CONNS connections" \
		"(median of $ROUNDS rounds)"
	printf '%-8s %7s %11s %12s %9s %9s %10s\n' server deflate cpu_ns/msg vs_best_peer msgs/s \
		p99_us compressed
	for d in $DEFLATE; do
		base=$(best_peer echo "$d" 3)
		for s in "${names[@]}"; do
			m=$(median echo "$s" "$d" 3) z=$(median echo "$s" "$d" 6)
			[ "$z" = n/a ] || z=$z%
			printf '%-8s %7s %11s %12s %9s %9s %10s\n' "$s" "$d" "$m" "$(ratio "$m" "$base")" \
				"$(median echo "$s" "$d" 4)" "$(median echo "$s" "$d" 5)" "$z"
		done
	done
}

idle_table() {
	local d s m base what="handshake only"
	[ "$IDLE_SIZE" -gt 0 ] && what="one $IDLE_SIZE-byte echo each"
	echo "--- idle: server RSS growth per idle WebSocket, $CONNS connections, $what" \
		"(median of $ROUNDS rounds; user space only)"
	printf '%-8s %7s %11s %12s\n' server deflate bytes/conn vs_best_peer
	for d in $DEFLATE; do
		base=$(best_peer idle "$d" 3)
		for s in "${names[@]}"; do
			m=$(median idle "$s" "$d" 3)
			printf '%-8s %7s %11s %12s\n' "$s" "$d" "$m" "$(ratio "$m" "$base")"
		done
	done
}

main() {
	local r i k d mode
	check_setup
	: >"$tmp/echo"
	: >"$tmp/idle"
	echo "# bench-ws rounds=$ROUNDS modes=$MODES deflate=$DEFLATE echo_conns=$ECHO_CONNS" \
		"size=$SIZE duration=$DURATION warmup=$WARMUP conns=$CONNS idle_size=$IDLE_SIZE" \
		"settle=$SETTLE warmup_conns=$WARMUP_CONNS inflight=$INFLIGHT fd_limit=$fd_limit" \
		"server_cpu=$srv_cpus load_cpu=$LOAD_CPU servers=${names[*]} ${versions[*]}"
	for ((r = 1; r <= ROUNDS; r++)); do
		for mode in $MODES; do
			for d in $DEFLATE; do
				for ((i = 0; i < ${#names[@]}; i++)); do
					k=$(((i + r - 1) % ${#names[@]}))
					"run_$mode" "$r" "${names[$k]}" "$d" || failed=1
				done
			done
		done
	done
	[[ " $MODES " == *" echo "* ]] && echo_table
	[[ " $MODES " == *" idle "* ]] && idle_table
	[ "$failed" -eq 0 ] || note "some runs failed (see status= above)"
	return $failed
}

main
