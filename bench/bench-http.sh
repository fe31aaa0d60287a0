#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-http.sh: HTTP plaintext throughput, p99 latency and server CPU cost
# per request of the project's demo http-server - on io_uring (demo) and on
# its epoll engine (demo_epoll: --engine epoll) - against its floor built here
# (raw_uring_http: io_uring, no fibers, no parsing) and three peers: nginx
# (one worker), h2o (one thread) and Go net/http (GOMAXPROCS=1).  Every
# server answers GET /plaintext ("Hello, World!", h2o: /plaintext/index.txt)
# to `wrk --latency -t1 -c64 -dSECS` in two modes: plain (one request in
# flight per connection) and pipeline (bench/pipeline.lua, DEPTH requests
# written at once).  Rounds are interleaved (order rotated each round) so
# machine drift hits every server alike; each run starts a fresh server pinned
# to SERVER_CPU, does one WARMUP-second wrk run, then the measured one with
# wrk pinned to LOAD_CPU, on 127.0.0.1.  Server CPU per request is the
# server's utime+stime (all threads) from /proc/PID/stat across the measured
# wrk run divided by the requests wrk completed (no perf: the PMU is not
# exposed here), also split into user and system time: on loopback most of
# it is the kernel's, whose floor is raw_uring_http's system time.  p99 comes from wrk's latency distribution; in pipeline mode
# wrk times a whole batch and its coordinated-omission correction often
# zeroes the upper percentiles (wg/wrk#236), so such a p99 is reported n/a.
# Prints one line per run, then medians per server and mode and the demo's
# ratios (of the medians, and paired: the median of the rounds' own ratios);
# exits non-zero if a run failed or saw non-2xx or socket errors.
#
# Environment:
#   HTTP_SERVER  demo server (default $BENCH_DIR/../demos/http/http-server),
#                run as "$HTTP_SERVER --port P --host 127.0.0.1 [--cores N]"
#   BENCH_DIR    where raw_uring_http is (default: this script's directory)
#   PIPELINE_LUA wrk script for pipeline mode (default: next to this script)
#   PEERS_DIR    nginx.conf and h2o.conf (default /work/shared/peers)
#   PEERS_BIN    go_http (default /tmp/peers, built by $PEERS_DIR/build.sh)
#   SERVERS      which servers to run, space-separated subset of
#                "demo demo_epoll raw_uring_http nginx h2o go" (default:
#                all); a peer
#                whose binary is missing is skipped with a message
#   DEMO_VARIANTS more demo runs with extra flags, "name=flags;name=flags"
#                (e.g. "plain=--plain-recv;fixed=--fixed-files"), each
#                reported as demo_NAME
#   MODES        "plain pipeline" (default both)
#   ROUNDS (5)  SECS (5)  WARMUP (1, seconds; 0: none)  CONNS (64)
#   THREADS (wrk threads, 1)  DEPTH (pipeline depth, 16)
#   CORES (1): cores for the demo (--cores N); raw_uring_http is single-
#                threaded and the peers keep their one worker/thread, so with
#                CORES > 1 only the demo scales.  Servers are pinned to
#                CORES CPUs starting at SERVER_CPU and skipping LOAD_CPU when
#                the machine has enough, else sharing LOAD_CPU (a warning).
#   SERVER_CPU (0)  LOAD_CPU (1)  PORT_BASE (random in 20000-29999; demo and
#                raw get fresh free ports, the peers use their fixed ports
#                9101-9103 from their configs)
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$here/bench-lib.sh"
BENCH_DIR=${BENCH_DIR:-$here}
HTTP_SERVER=${HTTP_SERVER:-$BENCH_DIR/../demos/http/http-server}
PIPELINE_LUA=${PIPELINE_LUA:-$here/pipeline.lua}
PEERS_DIR=${PEERS_DIR:-/work/shared/peers}
PEERS_BIN=${PEERS_BIN:-/tmp/peers}
SERVERS=${SERVERS:-demo demo_epoll raw_uring_http nginx h2o go}
MODES=${MODES:-plain pipeline}
ROUNDS=${ROUNDS:-5} SECS=${SECS:-5} WARMUP=${WARMUP:-1} CONNS=${CONNS:-64}
THREADS=${THREADS:-1} DEPTH=${DEPTH:-16} CORES=${CORES:-1}
SERVER_CPU=${SERVER_CPU:-0} LOAD_CPU=${LOAD_CPU:-1}
PORT_BASE=${PORT_BASE:-$((20000 + RANDOM % 10000))}
H2O_ROOT=/tmp/peer-h2o-root
STOP_WAIT=60 # tenths of a second between TERM and KILL (the demo has a grace period)

# Per server: command (an array, as words), fixed port (0: a fresh one,
# passed as --port), URL path, and whether it is a peer (skippable).
declare -A server_cmd=(
	[demo]="$HTTP_SERVER --host 127.0.0.1 --engine io_uring"
	[demo_epoll]="$HTTP_SERVER --host 127.0.0.1 --engine epoll"
	[raw_uring_http]="$BENCH_DIR/raw_uring_http --bind 127.0.0.1"
	[nginx]="nginx -c $PEERS_DIR/nginx.conf"
	[h2o]="h2o -c $PEERS_DIR/h2o.conf"
	[go]="env GOMAXPROCS=1 $PEERS_BIN/go_http :9101"
)
declare -A server_port=([demo]=0 [demo_epoll]=0 [raw_uring_http]=0 [nginx]=9102 [h2o]=9103
	[go]=9101)
declare -A server_path=([demo]=/plaintext [demo_epoll]=/plaintext [raw_uring_http]=/plaintext
	[nginx]=/plaintext [h2o]=/plaintext/index.txt [go]=/plaintext)
declare -A server_bin=([demo]=$HTTP_SERVER [demo_epoll]=$HTTP_SERVER
	[raw_uring_http]=$BENCH_DIR/raw_uring_http
	[nginx]=nginx [h2o]=h2o [go]=$PEERS_BIN/go_http)
declare -A peer_conf=([nginx]=$PEERS_DIR/nginx.conf [h2o]=$PEERS_DIR/h2o.conf)
variant_names=()
IFS=';' read -r -a variants <<<"${DEMO_VARIANTS:-}"
for v in "${variants[@]}"; do
	[ -n "$v" ] || continue
	n=demo_${v%%=*}
	variant_names+=("$n")
	server_cmd[$n]="$HTTP_SERVER --host 127.0.0.1 ${v#*=}"
	server_port[$n]=0 server_path[$n]=/plaintext server_bin[$n]=$HTTP_SERVER
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-http.XXXXXX")
srv_pid='' stop_status='' failed=0 next_port=$PORT_BASE names=() modes=()

cleanup() {
	[ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "bench-http: $*" >&2; exit 2; }
note() { echo "bench-http: $*" >&2; }

check_setup() {
	local v n m
	for v in ROUNDS SECS WARMUP CONNS THREADS DEPTH CORES SERVER_CPU LOAD_CPU PORT_BASE; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, got '${!v}'"
	done
	if [ "$CORES" -lt 1 ] || [ "$SECS" -lt 1 ] || [ "$CONNS" -lt 1 ]; then
		die "CORES, SECS and CONNS must be at least 1"
	fi
	command -v wrk >/dev/null || die "wrk not found"
	command -v curl >/dev/null || die "curl not found"
	[ -r "$PIPELINE_LUA" ] || die "cannot read $PIPELINE_LUA (set PIPELINE_LUA)"
	for m in $MODES; do
		case $m in
		plain | pipeline) modes+=("$m") ;;
		*) die "unknown mode '$m' (plain, pipeline)" ;;
		esac
	done
	for n in $SERVERS "${variant_names[@]}"; do
		[ -n "${server_bin[$n]:-}" ] || die "unknown server '$n'"
		if is_ours "$n"; then
			[ -x "${server_bin[$n]}" ] ||
				die "not executable: ${server_bin[$n]} (build it first; set HTTP_SERVER or BENCH_DIR)"
		else
			if ! command -v "${server_bin[$n]}" >/dev/null; then
				note "skipping $n: ${server_bin[$n]} not found"
				continue
			fi
			if [ -n "${peer_conf[$n]:-}" ] && [ ! -r "${peer_conf[$n]}" ]; then
				note "skipping $n: ${peer_conf[$n]} not found"
				continue
			fi
		fi
		names+=("$n")
	done
	[ "${#names[@]}" -gt 0 ] || die "no server to run"
	if [ "$CORES" -gt 1 ]; then
		for n in demo demo_epoll "${variant_names[@]}"; do
			server_cmd[$n]+=" --cores $CORES"
		done
	fi
	if command -v taskset >/dev/null && [ "$(nproc --all)" -gt "$LOAD_CPU" ] &&
		[ "$(nproc --all)" -gt "$SERVER_CPU" ]; then
		srv_cpus=$(server_cpus) || exit 2
		pin_srv=(taskset -c "$srv_cpus") pin_load=(taskset -c "$LOAD_CPU")
	else
		note "warning: cannot pin to CPUs $SERVER_CPU/$LOAD_CPU, running unpinned"
		srv_cpus=any pin_srv=() pin_load=()
	fi
	# h2o serves a file: the body the others return.
	{ mkdir -p "$H2O_ROOT" && printf 'Hello, World!' >"$H2O_ROOT/index.txt"; } ||
		die "cannot create $H2O_ROOT/index.txt"
}

# wrk's time with its unit (us, ms, s, m, h) in microseconds; n/a for junk.
to_us() {
	awk -v t="$1" 'BEGIN {
		if (!match(t, /^[0-9.]+/)) { print "n/a"; exit }
		v = substr(t, 1, RLENGTH); u = substr(t, RLENGTH + 1)
		m = u == "us" ? 1 : u == "ms" ? 1e3 : u == "s" ? 1e6 : u == "m" ? 6e7 : u == "h" ? 3.6e9 : -1
		if (m < 0) print "n/a"; else printf "%.0f\n", v * m }'
}

wrk_run() { # wrk_run MODE SECONDS URL
	local script=() args=()
	[ "$1" = pipeline ] && script=(-s "$PIPELINE_LUA") args=(-- "$DEPTH")
	"${pin_load[@]}" timeout $(($2 + 60)) wrk --latency -t"$THREADS" -c"$CONNS" \
		-d"$2s" "${script[@]}" "$3" "${args[@]}" 2>&1
}

is_ours() { [[ $1 == demo* ]] || [ "$1" = raw_uring_http ]; }

per_req() { # TICKS REQUESTS: nanoseconds per request
	awk -v d="$1" -v hz="$hz" -v n="$2" 'BEGIN { printf "%.0f", d * 1e9 / hz / n }'
}

run_one() { # run_one ROUND MODE NAME
	local round=$1 mode=$2 name=$3 port out rc body url cmd u0 s0 u1 s1
	local rps total p50 p99 non2xx errors cpu_ns user_ns sys_ns ok=0
	port=${server_port[$name]}
	read -r -a cmd <<<"${server_cmd[$name]}"
	if [ "$port" -eq 0 ]; then
		take_port
		cmd+=(--port "$port")
	elif listening "$port"; then
		echo "round=$round mode=$mode server=$name status=port_busy port=$port"
		return 1
	fi
	"${pin_srv[@]}" "${cmd[@]}" >"$tmp/$name.log" 2>&1 &
	srv_pid=$!
	url=http://127.0.0.1:$port${server_path[$name]}
	if ! wait_listening "$srv_pid" "$port"; then
		echo "round=$round mode=$mode server=$name status=no_listener port=$port"
		sed 's/^/  | /' "$tmp/$name.log" | tail -5
		stop_server
		return 1
	fi
	body=$(curl -sf --max-time 5 "$url")
	if [ "$body" != "Hello, World!" ]; then
		echo "round=$round mode=$mode server=$name status=bad_response url=$url body='$body'"
		stop_server
		return 1
	fi
	[ "$WARMUP" -gt 0 ] && wrk_run "$mode" "$WARMUP" "$url" >/dev/null
	read -r u0 s0 <<<"$(cpu_split "$srv_pid")"
	out=$(wrk_run "$mode" "$SECS" "$url")
	rc=$?
	read -r u1 s1 <<<"$(cpu_split "$srv_pid")"
	stop_server
	stopped_clean "round=$round mode=$mode server=$name" "$name" || ok=1

	rps=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' <<<"$out")
	total=$(awk '/ requests in / { print $1 }' <<<"$out")
	p50=$(to_us "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
	p99=$(to_us "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
	non2xx=$(awk '/^ *Non-2xx/ { print $NF }' <<<"$out")
	errors=$(awk -F'[ ,]+' '/Socket errors:/ { print $5 + $7 + $9 + $11 }' <<<"$out")
	if [ "$rc" -ne 0 ] || [ -z "$rps" ] || [ "${total:-0}" -eq 0 ] ||
		[ -z "$s0" ] || [ -z "$s1" ]; then
		echo "round=$round mode=$mode server=$name status=load_failed rc=$rc:"
		tail -8 <<<"$out" | sed 's/^/  | /'
		return 1
	fi
	# See the top: a zero or non-monotonic distribution is wrk's, not data.
	if [ "$p99" = n/a ] || [ "$p50" = n/a ] || [ "$p99" -eq 0 ] || [ "$p99" -lt "$p50" ]; then
		p99=n/a
	fi
	cpu_ns=$(per_req $((u1 + s1 - u0 - s0)) "$total")
	user_ns=$(per_req $((u1 - u0)) "$total")
	sys_ns=$(per_req $((s1 - s0)) "$total")
	echo "round=$round mode=$mode server=$name rps=$rps p50_us=$p50 p99_us=$p99" \
		"non2xx=${non2xx:-0} socket_errors=${errors:-0} requests=$total cpu_ns_per_req=$cpu_ns" \
		"user_ns_per_req=$user_ns sys_ns_per_req=$sys_ns"
	echo "$name $mode $rps $p99 ${non2xx:-0} $cpu_ns $round $user_ns $sys_ns" >>"$tmp/results"
	[ "${non2xx:-0}" -eq 0 ] && [ "${errors:-0}" -eq 0 ] && return $ok
	return 1
}

# "server value round" for mode $1, column $2 of the results file (paired).
column_by_round() { awk -v m="$1" -v c="$2" '$2 == m { print $1, $c, $7 }' "$tmp/results"; }

# Median of column $3 for server $1 in mode $2 from the results file, or n/a.
median() {
	awk -v s="$1" -v m="$2" -v c="$3" '$1 == s && $2 == m && $c != "n/a" { print $c }' \
		"$tmp/results" | median_of
}


summary() {
	local n m p
	echo "--- medians over $ROUNDS rounds"
	for m in "${modes[@]}"; do
		for n in "${names[@]}"; do
			echo "mode=$m server=$n rps=$(median "$n" "$m" 3) p99_us=$(median "$n" "$m" 4)" \
				"non2xx=$(median "$n" "$m" 5) cpu_ns_per_req=$(median "$n" "$m" 6)" \
				"user_ns_per_req=$(median "$n" "$m" 8) sys_ns_per_req=$(median "$n" "$m" 9)"
		done
	done
	local pair a
	for m in "${modes[@]}"; do
		for pair in demo/nginx demo/h2o demo/raw_uring_http demo_epoll/nginx demo_epoll/go; do
			a=${pair%/*} p=${pair#*/}
			echo "ratio=$a/$p mode=$m rps=$(ratio "$(median "$a" "$m" 3)" "$(median "$p" "$m" 3)")" \
				"cpu_ns_per_req=$(ratio "$(median "$a" "$m" 6)" "$(median "$p" "$m" 6)")" \
				"paired_rps=$(column_by_round "$m" 3 | paired "$a" "$p")" \
				"paired_cpu_ns_per_req=$(column_by_round "$m" 6 | paired "$a" "$p")"
		done
		echo "p99 mode=$m demo_us=$(median demo "$m" 4) nginx_us=$(median nginx "$m" 4)" \
			"demo/nginx=$(ratio "$(median demo "$m" 4)" "$(median nginx "$m" 4)")"
	done
}

main() {
	local r i k m
	check_setup
	hz=$(getconf CLK_TCK)
	: >"$tmp/results"
	echo "# bench-http rounds=$ROUNDS secs=$SECS warmup=$WARMUP conns=$CONNS" \
		"wrk_threads=$THREADS depth=$DEPTH cores=$CORES server_cpus=$srv_cpus" \
		"load_cpu=$LOAD_CPU servers=${names[*]} modes=${modes[*]} demo=$HTTP_SERVER"
	[ "$CORES" -gt 1 ] &&
		echo "# cores=$CORES: demo runs --cores $CORES; raw_uring_http is single-threaded;" \
			"nginx, h2o and go keep one worker/thread"
	for ((r = 1; r <= ROUNDS; r++)); do
		for m in "${modes[@]}"; do
			for ((i = 0; i < ${#names[@]}; i++)); do
				k=$(((i + r - 1) % ${#names[@]}))
				run_one "$r" "$m" "${names[$k]}" || failed=1
			done
		done
	done
	summary
	return $failed
}

main
