#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-echo.sh: echo throughput and server CPU cost per message of the
# project's demo echo server - on io_uring (demo) and on its epoll engine
# (demo_epoll: --engine epoll) - against two floors built here, the raw
# liburing loop (raw_uring_echo) and plain epoll (epoll_echo).  Rounds are interleaved
# (and their order rotated) so machine drift hits every server alike; each
# server runs pinned to one CPU and echo_load to another, on 127.0.0.1 only,
# on a fresh free port per run.  Server CPU per message is the server's
# utime+stime from /proc/PID/stat across the whole load run divided by every
# round trip echo_load completed (warmup included), so the counting windows
# match; cycles per message comes from `perf stat -e cycles -p PID` when the
# machine's PMU supports it, else it is n/a.  Prints one line per run and
# then medians per server and the ratios demo/raw_uring, demo_epoll/epoll
# and each to Go: of the medians, and paired (the median of the rounds' own ratios, steadier
# on a machine whose speed drifts); exits non-zero if any run failed or saw
# errors.
#
# Environment: ECHO_SERVER (default $BENCH_DIR/../demos/echo/echo-server,
# run as "$ECHO_SERVER --port P"), BENCH_DIR (where raw_uring_echo,
# epoll_echo and echo_load are; default this script's directory), ROUNDS (5),
# CONNS (64), SIZE (64), SECS (5), WARMUP (1), THREADS (load threads, 1),
# SERVER_CPU (0), LOAD_CPU (1), PORT_BASE (random in 20000-29999),
# DEMO_VARIANTS: more demo runs with extra flags, "name=flags;name=flags"
# (e.g. "sqpoll=--sqpoll;fixed=--fixed-files"), each reported as demo_NAME.
# PEERS_BIN (default /tmp/peers, built by shared/peers/build.sh): if it
# holds go_echo, Go's echo server (GOMAXPROCS=1) runs as server "go" too.
# CORES (1): cores for the demo (--cores N); the other servers are single-
# threaded.  Servers are pinned to CORES CPUs from SERVER_CPU on, skipping
# LOAD_CPU unless there is no other (then the demo shares it with the load).
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$here/bench-lib.sh"
BENCH_DIR=${BENCH_DIR:-$here}
ECHO_SERVER=${ECHO_SERVER:-$BENCH_DIR/../demos/echo/echo-server}
ROUNDS=${ROUNDS:-5} CONNS=${CONNS:-64} SIZE=${SIZE:-64} SECS=${SECS:-5}
WARMUP=${WARMUP:-1} THREADS=${THREADS:-1} CORES=${CORES:-1}
SERVER_CPU=${SERVER_CPU:-0} LOAD_CPU=${LOAD_CPU:-1}
PORT_BASE=${PORT_BASE:-$((20000 + RANDOM % 10000))}
LOAD=$BENCH_DIR/echo_load
PERF_LEAD=0.5 # seconds for perf to attach; the server is idle meanwhile

names=(demo demo_epoll raw_uring epoll)
declare -A server_cmd=(
	[demo]=$ECHO_SERVER
	[demo_epoll]=$ECHO_SERVER
	[raw_uring]=$BENCH_DIR/raw_uring_echo
	[epoll]=$BENCH_DIR/epoll_echo
)
declare -A server_flags=([demo]="--engine io_uring" [demo_epoll]="--engine epoll")
IFS=';' read -r -a variants <<<"${DEMO_VARIANTS:-}"
for v in "${variants[@]}"; do
	[ -n "$v" ] || continue
	names+=("demo_${v%%=*}")
	server_cmd[demo_${v%%=*}]=$ECHO_SERVER
	server_flags[demo_${v%%=*}]=${v#*=}
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-echo.XXXXXX")
# Go's peer takes ":PORT": a wrapper gives it the "--port P" the others take.
PEERS_BIN=${PEERS_BIN:-/tmp/peers}
if [ -x "$PEERS_BIN/go_echo" ]; then
	printf '#!/bin/sh\nexec env GOMAXPROCS=1 %q ":$2"\n' "$PEERS_BIN/go_echo" > "$tmp/go_echo"
	chmod +x "$tmp/go_echo"
	names+=(go)
	server_cmd[go]=$tmp/go_echo
fi
srv_pid='' perf_pid='' failed=0 next_port=$PORT_BASE

cleanup() {
	[ -n "$perf_pid" ] && kill -INT "$perf_pid" 2>/dev/null
	[ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "bench-echo: $*" >&2; exit 2; }
note() { echo "bench-echo: $*" >&2; }

check_setup() {
	local v n
	for v in ROUNDS CONNS SIZE SECS WARMUP THREADS CORES SERVER_CPU LOAD_CPU PORT_BASE; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, got '${!v}'"
	done
	[ "$CORES" -ge 1 ] || die "CORES must be at least 1"
	if [ "$CORES" -gt 1 ]; then
		for n in "${names[@]}"; do
			[[ $n == demo* ]] && server_flags[$n]="${server_flags[$n]:-} --cores $CORES"
		done
	fi
	for n in "${names[@]}" load; do
		local p=${server_cmd[$n]:-$LOAD}
		[ -x "$p" ] || die "not executable: $p (build it first; set ECHO_SERVER or BENCH_DIR)"
	done
	if command -v taskset >/dev/null && [ "$(nproc --all)" -gt "$LOAD_CPU" ] &&
		[ "$(nproc --all)" -gt "$SERVER_CPU" ]; then
		srv_cpus=$(server_cpus) || exit 2
		pin_srv=(taskset -c "$srv_cpus") pin_load=(taskset -c "$LOAD_CPU")
	else
		echo "bench-echo: warning: cannot pin to CPUs $SERVER_CPU/$LOAD_CPU, running unpinned" >&2
		pin_srv=() pin_load=()
	fi
}

# Cycles only count if the PMU is there: in VMs perf says <not supported>.
probe_cycles() {
	command -v perf >/dev/null || return 1
	perf stat -x, -e cycles true 2>&1 >/dev/null |
		awk -F, '$3 ~ /cycles/ && $1 ~ /^[0-9]+$/ { ok = 1 } END { exit !ok }'
}





start_perf() {
	perf stat -x, -e cycles -p "$srv_pid" -o "$tmp/perf" 2>/dev/null &
	perf_pid=$!
	sleep "$PERF_LEAD"
}

# Prints the cycles perf counted, or nothing.
stop_perf() {
	kill -INT "$perf_pid" 2>/dev/null
	wait "$perf_pid" 2>/dev/null
	perf_pid=
	awk -F, '$3 ~ /cycles/ && $1 ~ /^[0-9]+$/ { print $1 }' "$tmp/perf"
}

field() { # field KEY "k=v k=v ..."
	local kv
	for kv in $2; do
		[ "${kv%%=*}" = "$1" ] && { echo "${kv#*=}"; return; }
	done
}

run_one() { # run_one ROUND NAME
	local round=$1 name=$2 port t0 t1 cycles='' out rc msgs total errors cpu_ns cyc
	take_port
	# shellcheck disable=SC2086 # flags are words by design
	"${pin_srv[@]}" "${server_cmd[$name]}" ${server_flags[$name]:-} --port "$port" >"$tmp/$name.log" 2>&1 &
	srv_pid=$!
	if ! wait_listening "$srv_pid" "$port"; then
		echo "round=$round server=$name status=no_listener port=$port"
		sed 's/^/  | /' "$tmp/$name.log" | tail -5
		stop_server
		return 1
	fi
	$use_perf && start_perf
	t0=$(cpu_ticks "$srv_pid")
	out=$("${pin_load[@]}" timeout $((SECS + WARMUP + 120)) "$LOAD" \
		-p "$port" -c "$CONNS" -s "$SIZE" -d "$SECS" -w "$WARMUP" -t "$THREADS" 2>&1)
	rc=$?
	t1=$(cpu_ticks "$srv_pid")
	$use_perf && cycles=$(stop_perf)
	stop_server

	msgs=$(field msgs_per_s "$out") total=$(field total_msgs "$out")
	errors=$(field errors "$out")
	if [ -z "$msgs" ] || [ -z "$t0" ] || [ -z "$t1" ] || [ "${total:-0}" -eq 0 ]; then
		echo "round=$round server=$name status=load_failed rc=$rc: $out"
		return 1
	fi
	cpu_ns=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$total" \
		'BEGIN { printf "%.0f", d * 1e9 / hz / n }')
	cyc=n/a
	[ -n "$cycles" ] && cyc=$(awk -v c="$cycles" -v n="$total" 'BEGIN { printf "%.0f", c / n }')
	echo "round=$round server=$name msgs_per_s=$msgs p50_us=$(field p50_us "$out")" \
		"p99_us=$(field p99_us "$out") errors=$errors active=$(field active "$out")/$CONNS" \
		"cycles_per_msg=$cyc cpu_ns_per_msg=$cpu_ns"
	echo "$name $msgs $(field p99_us "$out") $cyc $cpu_ns $round" >>"$tmp/results"
	[ "$rc" -eq 0 ] && [ "$errors" = 0 ]
}

# "server value round" for column $1 of the results file (for paired).
column_by_round() { awk -v c="$1" '{ print $1, $c, $6 }' "$tmp/results"; }

# Median of column $2 for server $1 from the results file, or n/a.
median() {
	awk -v s="$1" -v c="$2" '$1 == s && $c != "n/a" { print $c }' "$tmp/results" | median_of
}


summary() {
	local n
	echo "--- medians over $ROUNDS rounds"
	for n in "${names[@]}"; do
		echo "server=$n msgs_per_s=$(median "$n" 2) p99_us=$(median "$n" 3)" \
			"cycles_per_msg=$(median "$n" 4) cpu_ns_per_msg=$(median "$n" 5)"
	done
	local pair a b
	for pair in demo/raw_uring demo/go demo_epoll/epoll demo_epoll/go; do
		a=${pair%/*} b=${pair#*/}
		[[ " ${names[*]} " == *" $a "* && " ${names[*]} " == *" $b "* ]] || continue
		echo "ratio=$a/$b msgs_per_s=$(ratio "$(median "$a" 2)" "$(median "$b" 2)")" \
			"cpu_ns_per_msg=$(ratio "$(median "$a" 5)" "$(median "$b" 5)")" \
			"paired_msgs_per_s=$(column_by_round 2 | paired "$a" "$b")" \
			"paired_cpu_ns_per_msg=$(column_by_round 5 | paired "$a" "$b")"
	done
	return 0
}

main() {
	local r i k
	check_setup
	hz=$(getconf CLK_TCK)
	[ "$CORES" -gt 1 ] &&
		echo "# cores=$CORES: the demo runs --cores $CORES; the others are single-threaded"
	use_perf=false
	probe_cycles && use_perf=true
	: >"$tmp/results"
	echo "# bench-echo rounds=$ROUNDS conns=$CONNS size=$SIZE secs=$SECS warmup=$WARMUP" \
		"load_threads=$THREADS cores=$CORES server_cpus=${srv_cpus:-any} load_cpu=$LOAD_CPU" \
		"cycles=$($use_perf && echo perf || echo unsupported) demo=${server_cmd[demo]}"
	for ((r = 1; r <= ROUNDS; r++)); do
		for ((i = 0; i < ${#names[@]}; i++)); do
			k=$(((i + r - 1) % ${#names[@]}))
			run_one "$r" "${names[$k]}" || failed=1
		done
	done
	summary
	return $failed
}

main
