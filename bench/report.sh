#!/bin/bash
# SPDX-License-Identifier: MIT
# report.sh - the figures behind README's plots, and the plots: run from the
# build directory by `make bench-report` (about 15 minutes, on an idle
# machine: every run is pinned, server or micro on CPU 0, load on CPU 1).
#
#   bench/report.sh OUT [micro] [echo] [http]     (default: all three)
#
# OUT/micro.txt         bench/micro, MICRO_ROUNDS rounds (the set make
#                       bench-micro runs: one core's figures pinned to CPU 0,
#                       cross-core and offload ones unpinned)
# OUT/micro_peers.txt   shared/peers' go_micro and switch_peers, interleaved
#                       with those rounds and pinned alike; switch_peers'
#                       thread pool also unpinned, as offload runs, its
#                       figures renamed unpinned_pthread_pool_* (PEERS_BIN,
#                       default /tmp/peers: shared/peers/build.sh builds them)
# OUT/echo.txt          make bench-echo (the Go peer too, if PEERS_BIN has it)
# OUT/http.txt          make bench-http (nginx, h2o, Go when present)
# OUT/*.svg             bench/plot.sh OUT OUT
#
# Environment: MICRO_ROUNDS (3); the benchmarks' own variables (ROUNDS,
# SECS... see bench-echo.sh and bench-http.sh) pass through.
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: $0 OUT [micro] [echo] [http]" >&2; exit 2; }
out=$1
shift
parts=${*:-micro echo http}
here=$(cd "$(dirname "$0")" && pwd)
peers=${PEERS_BIN:-/tmp/peers}
mkdir -p "$out"

peer() { # NAME [taskset...]: a peer's figures, or a note that it is missing
	local p=$1
	shift
	if [ -x "$peers/$p" ]; then
		"$@" "$peers/$p"
	else
		echo "report.sh: no $peers/$p: its figures are left out" >&2
	fi
}

micro() {
	local r rounds=${MICRO_ROUNDS:-3}
	: > "$out/micro.txt"
	: > "$out/micro_peers.txt"
	for ((r = 1; r <= rounds; r++)); do
		echo "report.sh: micro round $r of $rounds"
		taskset -c 0 ./bench/micro switch,yield,spawn,timer,park,sleep,sync,read >> "$out/micro.txt"
		./bench/micro xcore,offload >> "$out/micro.txt"
		peer go_micro taskset -c 0 >> "$out/micro_peers.txt"
		peer switch_peers taskset -c 0 >> "$out/micro_peers.txt"
		peer switch_peers | tr ' ' '\n' | sed -n 's/^pthread_pool_/unpinned_pthread_pool_/p' \
			>> "$out/micro_peers.txt"
	done
}

echo_bench() {
	echo "report.sh: echo"
	PEERS_BIN=$peers make -s bench-echo > "$out/echo.txt"
}

http_bench() {
	echo "report.sh: http"
	make -s bench-http > "$out/http.txt"
}

for part in $parts; do
	case $part in
	micro) micro ;;
	echo) echo_bench ;;
	http) http_bench ;;
	*) echo "report.sh: unknown part '$part'" >&2; exit 2 ;;
	esac
done
"$here/plot.sh" "$out" "$out"
