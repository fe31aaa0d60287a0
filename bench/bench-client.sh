#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-client.sh: the HTTP client's cost, as the load generator built on
# it (demos/http/http-load) against wrk, on the same server: CPU time of
# the load generator per request (utime + stime of its process, from the
# shell's `times`: no PMU here), beside the requests per second each got.
# Both run closed loop, one thread (`wrk -t1`, `http-load --cores 1`),
# CONNS connections, SECS seconds, keep-alive GET /plaintext, pinned to
# LOAD_CPU; the server is the demo http-server, pinned to SERVER_CPU, one
# fresh process per run. Rounds are interleaved (order rotated) so drift
# hits both alike. Prints one line per run, then medians and the ratio
# http-load/wrk (of the medians, and paired per round). Exits non-zero if
# a run failed or saw errors.
#
# Environment:
#   HTTP_SERVER  the server (default $BENCH_DIR/../demos/http/http-server)
#   HTTP_LOAD    the client (default $BENCH_DIR/../demos/http/http-load)
#   BENCH_DIR    default: this script's directory
#   ROUNDS (3)  SECS (5)  CONNS (64)  SERVER_CPU (0)  LOAD_CPU (1)
#   PORT_BASE    first port tried (default: random in 20000-29999)
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$here/bench-lib.sh"
BENCH_DIR=${BENCH_DIR:-$here}
HTTP_SERVER=${HTTP_SERVER:-$BENCH_DIR/../demos/http/http-server}
HTTP_LOAD=${HTTP_LOAD:-$BENCH_DIR/../demos/http/http-load}
ROUNDS=${ROUNDS:-3} SECS=${SECS:-5} CONNS=${CONNS:-64}
SERVER_CPU=${SERVER_CPU:-0} LOAD_CPU=${LOAD_CPU:-1}
PORT_BASE=${PORT_BASE:-$((20000 + RANDOM % 10000))}
next_port=$PORT_BASE
tmp=$(mktemp -d) || exit 1
srv_pid=
trap '[ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
failed=0

note() { echo "# $*" >&2; }
die() { echo "bench-client: $*" >&2; exit 1; }
is_ours() { true; }

# The children's CPU of running "$@": `times` prints the shell's line,
# then its children's "Um.mmms Sm.mmms"; in ticks of 1 ms.
run_timed() { # OUT_FILE COMMAND...: CPU ms on stdout, the command's output in OUT_FILE
	local out=$1
	shift
	( "$@" >"$out" 2>&1; times ) | awk 'NR == 2 {
		split($1, u, "m"); split($2, s, "m")
		printf "%.0f\n", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * 1000 }'
}

# Requests a client completed, from its own report.
requests_of() { # CLIENT OUT_FILE
	case $1 in
	wrk) awk '/ requests in / { print $1 }' "$2" ;;
	http-load) awk '$1 == "requests" { print $2 }' "$2" ;;
	esac
}

errors_of() { # CLIENT OUT_FILE: 0 if the run saw none
	case $1 in
	wrk) awk '/Socket errors|Non-2xx/ { bad = 1 } END { print bad + 0 }' "$2" ;;
	http-load) awk '$1 == "errors" && $2 != "none" { bad = 1 } END { print bad + 0 }' "$2" ;;
	esac
}

run_one() { # ROUND CLIENT
	local url ms n
	take_port
	"${pin_srv[@]}" "$HTTP_SERVER" --host 127.0.0.1 --port "$port" >"$tmp/server.log" 2>&1 &
	srv_pid=$!
	wait_listening "$srv_pid" "$port" || { echo "round=$1 client=$2 status=no_listener"; return 1; }
	url=http://127.0.0.1:$port/plaintext
	case $2 in
	wrk) ms=$(run_timed "$tmp/out" "${pin_load[@]}" wrk -t1 -c"$CONNS" -d"${SECS}s" "$url") ;;
	http-load) ms=$(run_timed "$tmp/out" "${pin_load[@]}" "$HTTP_LOAD" -c "$CONNS" -d "$SECS" "$url") ;;
	esac
	stop_server
	n=$(requests_of "$2" "$tmp/out")
	if [ -z "$n" ] || [ "$n" -eq 0 ] || [ "$(errors_of "$2" "$tmp/out")" -ne 0 ]; then
		echo "round=$1 client=$2 status=load_failed"
		sed 's/^/  | /' "$tmp/out" | tail -8
		return 1
	fi
	local rps=$((n / SECS)) cpu_ns
	cpu_ns=$(awk -v ms="$ms" -v n="$n" 'BEGIN { printf "%.0f", ms * 1e6 / n }')
	echo "round=$1 client=$2 requests=$n rps=$rps client_cpu_ns_per_req=$cpu_ns"
	echo "$2 $cpu_ns $1 $rps" >>"$tmp/results"
}

main() {
	local r clients=(wrk http-load) c
	[ -x "$HTTP_SERVER" ] && [ -x "$HTTP_LOAD" ] || die "build the demos first ($HTTP_SERVER, $HTTP_LOAD)"
	command -v wrk >/dev/null || die "wrk is needed (apt-get install wrk)"
	check_pinning
	: >"$tmp/results"
	echo "# bench-client rounds=$ROUNDS secs=$SECS conns=$CONNS server_cpu=$srv_cpus load_cpu=$LOAD_CPU"
	for ((r = 1; r <= ROUNDS; r++)); do
		for ((c = 0; c < 2; c++)); do
			run_one "$r" "${clients[$(((c + r) % 2))]}" || failed=1
		done
	done
	local w h
	w=$(awk '$1 == "wrk" { print $2 }' "$tmp/results" | median_of)
	h=$(awk '$1 == "http-load" { print $2 }' "$tmp/results" | median_of)
	echo "--- medians over $ROUNDS rounds"
	echo "client=wrk client_cpu_ns_per_req=$w rps=$(awk '$1 == "wrk" { print $4 }' "$tmp/results" | median_of)"
	echo "client=http-load client_cpu_ns_per_req=$h rps=$(awk '$1 == "http-load" { print $4 }' "$tmp/results" | median_of)"
	echo "ratio=http-load/wrk client_cpu_ns_per_req=$(ratio "$h" "$w")" \
		"paired=$(awk '{ print $1, $2, $3 }' "$tmp/results" | paired http-load wrk)"
	exit $failed
}

main
