#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-idle.sh: a server's memory per idle keep-alive connection. For the
# project's demo HTTP server (GET /plaintext) and echo server (64 bytes
# echoed), nginx (one worker, return 200 on /plaintext) and Go's net/http
# (bench/go_http_idle.go, GOMAXPROCS=1): bench/idle_load opens N
# connections, from source addresses spread over 127.0.0.0/8, INFLIGHT at a
# time; on each one request and its whole reply (checked); then holds them
# all open and idle. The figure is
#   bytes_per_conn = (VmRSS after - VmRSS before) * 1024 / held
# with "before" read once WARMUP_CONNS connections were made and closed
# (so one-time allocations - buffers, pools, lazily touched code - are not
# counted) and "after" SETTLE seconds after the last connection was held.
# User space only: the kernel's socket memory (buffers, struct sock) is not
# in RSS, nor is what a server allocated at start whatever the connections
# (nginx's worker_connections array, sized here for 9/8 N, is touched at
# start, so its ~0.4 KiB per slot is in "before"). No server is tuned
# beyond what holding N needs: the fd limit, max-connections, a 300 s idle
# timeout where there is one, a 4096 listen backlog.
#
# Each run starts a fresh server pinned to SERVER_CPU on a fresh port of
# 127.0.0.1, the load pinned to LOAD_CPU; rounds rotate the servers' order.
# Prints one line per run (held, errors, established connections counted
# by ss, RSS before and after, bytes_per_conn), then a table per server and
# N of the median over the rounds and its ratio to nginx's. A run whose
# holder held fewer than N, saw errors, or whose connections were not all
# still established at the end is reported so and makes the exit status
# non-zero (the table is printed all the same).
#
# Every connection is an fd in the server and one in idle_load: the script
# raises its soft fd limit to 1048576 (root with CAP_SYS_RESOURCE) or else
# to the hard limit; a run whose N does not fit under the limit fails with
# status=fd_limit, not started.
#
# Environment:
#   HTTP_SERVER  demo HTTP server (default $BENCH_DIR/../demos/http/http-server)
#   ECHO_SERVER  demo echo server (default $BENCH_DIR/../demos/echo/echo-server)
#   BENCH_DIR    where idle_load is (default: this script's directory)
#   SERVERS      subset of "demo-http demo-echo nginx go" (default all); nginx
#                or go (to build go_http_idle) missing: skipped with a note.
#                HTTP/2 (h2c, idle_load --mode h2; bench-h2.sh's idle mode):
#                demo-h2, nginx-h2 (listen ... http2) and h2o-h2 (one
#                thread), measured against nginx-h2
#   CONNS        the N to measure (default "10000 100000")
#   ROUNDS (1)  SETTLE (3, seconds)  WARMUP_CONNS (100)  INFLIGHT (512,
#   idle_load's unfinished connections at a time: below somaxconn and
#   tcp_max_syn_backlog, so no SYN is dropped)
#   SERVER_CPU (0)  LOAD_CPU (1)  PORT_BASE (random in 20000-29999)
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$here/bench-lib.sh"
BENCH_DIR=${BENCH_DIR:-$here}
HTTP_SERVER=${HTTP_SERVER:-$BENCH_DIR/../demos/http/http-server}
ECHO_SERVER=${ECHO_SERVER:-$BENCH_DIR/../demos/echo/echo-server}
IDLE_LOAD=$BENCH_DIR/idle_load
GO_SRC=$here/go_http_idle.go
SERVERS=${SERVERS:-demo-http demo-echo nginx go}
CONNS=${CONNS:-10000 100000}
ROUNDS=${ROUNDS:-1} SETTLE=${SETTLE:-3} WARMUP_CONNS=${WARMUP_CONNS:-100}
INFLIGHT=${INFLIGHT:-512} SERVER_CPU=${SERVER_CPU:-0} LOAD_CPU=${LOAD_CPU:-1}
PORT_BASE=${PORT_BASE:-$((20000 + RANDOM % 10000))}
STOP_WAIT=200    # tenths of a second between TERM and KILL: closing 100,000 takes a while
HOLD_WAIT=300    # seconds the holder may take to open N connections
FD_SLACK=256     # fds a server or the holder needs besides the connections
IDLE_TIMEOUT_S=300

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-idle.XXXXXX")
srv_pid='' hold_pid='' hold_out='' hold_line='' stop_status='' failed=0 next_port=$PORT_BASE
names=() conns=()

cleanup() {
	[ -n "$hold_pid" ] && kill -KILL "$hold_pid" 2>/dev/null
	[ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "bench-idle: $*" >&2; exit 2; }
note() { echo "bench-idle: $*" >&2; }

is_ours() { [[ $1 == demo* ]]; }

check_numbers() {
	local v n
	for v in ROUNDS SETTLE WARMUP_CONNS INFLIGHT SERVER_CPU LOAD_CPU PORT_BASE; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, got '${!v}'"
	done
	if [ "$INFLIGHT" -lt 1 ] || [ "$WARMUP_CONNS" -lt 1 ]; then
		die "INFLIGHT and WARMUP_CONNS must be at least 1"
	fi
	for n in $CONNS; do
		[[ $n =~ ^[1-9][0-9]*$ ]] || die "CONNS must be numbers of at least 1, got '$n'"
		conns+=("$n")
	done
	[ "${#conns[@]}" -gt 0 ] || die "CONNS is empty"
}

# The fd limit, inherited by the servers and the holder: as high as it
# goes. A smaller one fails only the runs whose N does not fit (fits_fds).
check_fds() {
	ulimit -n 1048576 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
	fd_limit=$(ulimit -n)
	[ "$fd_limit" = unlimited ] && fd_limit=1048576
	local n
	for n in "${conns[@]}"; do
		fits_fds "$n" || note "warning: CONNS $n needs $((n + FD_SLACK)) fds, the limit is" \
			"$fd_limit (hard $(ulimit -Hn); raising it needs CAP_SYS_RESOURCE): those runs fail"
	done
}

fits_fds() { [ $(($1 + FD_SLACK)) -le "$fd_limit" ]; }

# INFLIGHT SYNs and accepts at a time must fit the kernel's queues, and
# the connections the connection tracker's table, if there is one.
check_sysctls() {
	local f v max=0 n
	for n in "${conns[@]}"; do [ "$n" -gt "$max" ] && max=$n; done
	for f in net/core/somaxconn net/ipv4/tcp_max_syn_backlog; do
		v=$(cat "/proc/sys/$f" 2>/dev/null) || continue
		[ "$v" -ge "$INFLIGHT" ] || note "warning: $f is $v, below INFLIGHT=$INFLIGHT: SYNs may be dropped"
	done
	v=$(cat /proc/sys/net/netfilter/nf_conntrack_max 2>/dev/null) || return 0
	[ "$v" -ge $((max + WARMUP_CONNS)) ] ||
		note "warning: nf_conntrack_max is $v, below CONNS $max: connections may be dropped"
}

check_tools() {
	[ -x "$IDLE_LOAD" ] || die "not executable: $IDLE_LOAD (make bench/idle_load; set BENCH_DIR)"
	command -v ss >/dev/null || note "warning: no ss: the open connections cannot be counted"
}

# The servers to run; Go's is built here from bench/go_http_idle.go.
check_servers() {
	local n
	for n in $SERVERS; do
		case $n in
		demo-http) [ -x "$HTTP_SERVER" ] || die "not executable: $HTTP_SERVER (set HTTP_SERVER)" ;;
		demo-echo) [ -x "$ECHO_SERVER" ] || die "not executable: $ECHO_SERVER (set ECHO_SERVER)" ;;
		demo-h2) [ -x "$HTTP_SERVER" ] || die "not executable: $HTTP_SERVER (set HTTP_SERVER)" ;;
		nginx | nginx-h2 | h2o-h2) command -v "${n%-h2}" >/dev/null ||
			{ note "skipping $n: ${n%-h2} not found"; continue; } ;;
		go) build_go "$GO_SRC" go_http_idle || continue ;;
		*) die "unknown server '$n' (demo-http, demo-echo, nginx, go, demo-h2, nginx-h2, h2o-h2)" ;;
		esac
		names+=("$n")
	done
	[ "${#names[@]}" -gt 0 ] || die "no server to run"
}



check_setup() {
	check_numbers
	check_fds
	check_sysctls
	check_tools
	mkdir -p "$tmp/nginx" || die "cannot write to $tmp"
	check_servers
	check_pinning
}

# nginx.conf for port $1 and N $2: one worker in the foreground, keep-alive
# for longer than a run, room for N connections. nginx closes keep-alive
# connections to reuse them once fewer than 1/16 of worker_connections are
# free ("worker_connections are not enough, reusing connections"), so it
# gets an eighth more than N. $3, if given, is a listen parameter (http2).
nginx_conf() {
	local d=$tmp/nginx
	cat >"$d/nginx-$1.conf" <<-EOF
		daemon off;
		master_process off;
		worker_processes 1;
		worker_rlimit_nofile $fd_limit;
		pid $d/nginx.pid;
		error_log $d/error.log;
		events { worker_connections $(($2 + $2 / 8 + FD_SLACK)); }
		http {
		  access_log off;
		  keepalive_requests 1000000;
		  keepalive_timeout ${IDLE_TIMEOUT_S}s;
		  client_body_temp_path $d/body;
		  proxy_temp_path $d/proxy;
		  fastcgi_temp_path $d/fastcgi;
		  uwsgi_temp_path $d/uwsgi;
		  scgi_temp_path $d/scgi;
		  server {
		    listen 127.0.0.1:$1 backlog=4096 ${3:-};
		    location /plaintext { default_type text/plain; return 200 "Hello, World!"; }
		  }
		}
	EOF
	echo "$d/nginx-$1.conf"
}

# Sets cmd (server $1's command line on port $2, for N $3) and mode
# (idle_load's).
server_argv() {
	case $1 in
	demo-http)
		cmd=("$HTTP_SERVER" --port "$2" --host 127.0.0.1 --cores 1 --max-conns $(($3 + FD_SLACK))
			--idle-timeout $((IDLE_TIMEOUT_S * 1000)))
		mode=http ;;
	demo-echo) cmd=("$ECHO_SERVER" --port "$2" --host 127.0.0.1 --cores 1) mode=echo ;;
	nginx) cmd=(nginx -p "$tmp/nginx" -e "$tmp/nginx/error.log" -c "$(nginx_conf "$2" "$3")")
		mode=http ;;
	go) cmd=(env GOMAXPROCS=1 "$tmp/go_http_idle" "$2") mode=http ;;
	demo-h2) server_argv demo-http "$2" "$3"; mode=h2 ;;
	nginx-h2) cmd=(nginx -p "$tmp/nginx" -e "$tmp/nginx/error.log" -c "$(nginx_conf "$2" "$3" http2)")
		mode=h2 ;;
	h2o-h2) cmd=(h2o -c "$(h2o_conf "$2" "$3")") mode=h2 ;;
	esac
}

# h2o.conf for port $1 and N $2: one thread, /plaintext a file, idle
# HTTP/2 connections kept for longer than a run. Started by root, h2o
# would become nobody, who cannot read the private temp dir: it stays root.
h2o_conf() {
	local f=$tmp/h2o-$1.conf
	: >"$f"
	[ "$(id -u)" -eq 0 ] && echo "user: root" >"$f"
	printf 'Hello, World!' >"$tmp/plaintext"
	cat >>"$f" <<-EOF
		num-threads: 1
		max-connections: $(($2 + FD_SLACK))
		http2-idle-timeout: $IDLE_TIMEOUT_S
		access-log: /dev/null
		error-log: $tmp/h2o-error.log
		listen:
		  port: $1
		  host: 127.0.0.1
		hosts:
		  default:
		    paths:
		      /plaintext:
		        file.file: $tmp/plaintext
	EOF
	echo "$f"
}

# Start server $2 on a fresh port for N $1 (sets srv_pid, port and mode);
# on failure says why (after TAG $3) and stops it.
start_server() { # start_server N NAME TAG
	local cmd=()
	take_port
	server_argv "$2" "$port" "$1"
	"${pin_srv[@]}" "${cmd[@]}" >"$tmp/$2.log" 2>&1 &
	srv_pid=$!
	if ! wait_listening "$srv_pid" "$port"; then
		echo "$3 status=no_listener port=$port"
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

# The demos' banner names their engine (io_uring, or epoll where refused).
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

# Sets largv: idle_load's command line, pinned, for N $1 and flags after.
load_argv() { # load_argv N [idle_load flags...]
	largv=("${pin_load[@]}" "$IDLE_LOAD" --mode "$mode" -n "$1" -c "$INFLIGHT" "${@:2}"
		127.0.0.1 "$port")
}

# WARMUP_CONNS connections made and closed; fails (saying why) unless all
# were answered.
warm_up() { # warm_up TAG
	local out largv=()
	load_argv "$WARMUP_CONNS" --no-hold
	out=$(timeout "$HOLD_WAIT" "${largv[@]}" 2>&1)
	if [ "$(field held "$(grep '^held=' <<<"$out")")" != "$WARMUP_CONNS" ]; then
		echo "$1 status=warmup_failed: $(tr '\n' ' ' <<<"$out")"
		return 1
	fi
	sleep 1
}

# Start the holder of N $1 and wait (HOLD_WAIT at most) until it says it
# holds its connections. Sets hold_pid, hold_out (its output: a file of its
# own per run) and hold_line to what it said (or nothing).
start_holder() {
	local i largv=()
	hold_out=$tmp/hold-$port.out
	load_argv "$1"
	"${largv[@]}" >"$hold_out" 2>&1 &
	hold_pid=$!
	for ((i = 0; i < HOLD_WAIT * 10; i++)); do
		grep -q '^held=' "$hold_out" 2>/dev/null && break
		kill -0 "$hold_pid" 2>/dev/null || break
		sleep 0.1
	done
	hold_line=$(grep '^held=' "$hold_out" 2>/dev/null)
}

# TERM (idle_load closes its connections and exits 0), KILL if it does not.
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

# RSS growth per idle connection of the server running, for N $3; prints
# the run's line, appends "server N bytes round" to the results.
measure() { # measure TAG NAME N ROUND
	local rss0 rss1 held errors open bytes
	warm_up "$1" || return 1
	rss0=$(rss_kb "$srv_pid")
	start_holder "$3"
	held=$(field held "$hold_line") errors=$(field errors "$hold_line")
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
	echo "$1 held=$held errors=$errors open=$open open_secs=$(field secs "$hold_line")" \
		"rss_before_kb=$rss0 rss_after_kb=$rss1 bytes_per_conn=$bytes$(engine_of "$2")"
	grep -v '^held=' "$hold_out" | sed 's/^/  | /'
	echo "$2 $3 $bytes $4" >>"$tmp/results"
	verdict "$1" "$3" "$held" "$errors" "$open"
}

# A run is good if all N were held without an error and still open.
verdict() { # verdict TAG N HELD ERRORS OPEN
	local why=()
	[ "$3" -eq "$2" ] || why+=("held $3 of $2")
	[ "$4" = 0 ] || why+=("$4 errors")
	[ "$5" = n/a ] || [ "$5" -ge "$2" ] || why+=("only $5 of $2 still established")
	[ "${#why[@]}" -eq 0 ] && return 0
	local IFS=,
	echo "$1 status=failed: ${why[*]}"
	return 1
}

run_one() { # run_one ROUND N NAME
	local tag="round=$1 server=$3 conns=$2" ok=0 mode=''
	if ! fits_fds "$2"; then
		echo "$tag status=fd_limit need=$(($2 + FD_SLACK)) fd_limit=$fd_limit"
		return 1
	fi
	start_server "$2" "$3" "$tag" || return 1
	measure "$tag" "$3" "$2" "$1" || ok=1
	stop_server
	stopped_clean "$tag" "$3" || ok=1
	return $ok
}

# Median bytes per connection of server $1 at N $2 over the rounds, or n/a.
median() { awk -v s="$1" -v n="$2" '$1 == s && $2 == n { print $3 }' "$tmp/results" | median_of; }

table() {
	local n s m base
	echo "--- server RSS growth per idle connection (median of $ROUNDS rounds; user space only)"
	printf '%-10s %8s %12s %9s\n' server conns bytes/conn vs_nginx
	for n in "${conns[@]}"; do
		for s in "${names[@]}"; do
			base=$(median nginx "$n")
			[[ $s == *-h2 ]] && base=$(median nginx-h2 "$n")
			m=$(median "$s" "$n")
			printf '%-10s %8s %12s %9s\n' "$s" "$n" "$m" "$(ratio "$m" "$base")"
		done
	done
}

main() {
	local r n i k
	check_setup
	: >"$tmp/results"
	echo "# bench-idle rounds=$ROUNDS conns=${conns[*]} settle=$SETTLE warmup_conns=$WARMUP_CONNS" \
		"inflight=$INFLIGHT fd_limit=$fd_limit server_cpu=$srv_cpus load_cpu=$LOAD_CPU" \
		"servers=${names[*]} somaxconn=$(cat /proc/sys/net/core/somaxconn)" \
		"syn_backlog=$(cat /proc/sys/net/ipv4/tcp_max_syn_backlog)"
	for ((r = 1; r <= ROUNDS; r++)); do
		for n in "${conns[@]}"; do
			for ((i = 0; i < ${#names[@]}; i++)); do
				k=$(((i + r - 1) % ${#names[@]}))
				run_one "$r" "$n" "${names[$k]}" || failed=1
			done
		done
	done
	table
	[ "$failed" -eq 0 ] || note "some runs failed (see status= above)"
	return $failed
}

main
