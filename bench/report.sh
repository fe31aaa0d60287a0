#!/bin/bash
# SPDX-License-Identifier: MIT
# report.sh - the figures behind README's plots, and the plots: run from the
# build directory by `make bench-report` (about 15 minutes, on an idle
# machine: every run is pinned, server or micro on CPU 0, load on CPU 1).
#
#   bench/report.sh OUT
#
# OUT/micro.txt         bench/micro, ROUNDS rounds (the set make bench-micro runs)
# OUT/micro_peers.txt   shared/peers' go_micro and switch_peers, interleaved
#                       with those rounds, pinned alike (PEERS_BIN, default
#                       /tmp/peers: shared/peers/build.sh builds them)
# OUT/echo.txt          make bench-echo (the Go peer too, if PEERS_BIN has it)
# OUT/http.txt          make bench-http (nginx, h2o, Go when present)
# OUT/*.svg             bench/plot.sh OUT OUT
#
# Environment: MICRO_ROUNDS (3); the benchmarks' own variables (ROUNDS,
# SECS... see bench-echo.sh and bench-http.sh) pass through.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
out=$1
here=$(cd "$(dirname "$0")" && pwd)
peers=${PEERS_BIN:-/tmp/peers}
mkdir -p "$out"

micro_rounds=${MICRO_ROUNDS:-3}
: > "$out/micro.txt"
: > "$out/micro_peers.txt"
for ((r = 1; r <= micro_rounds; r++)); do
	echo "report.sh: micro round $r of $micro_rounds"
	taskset -c 0 ./bench/micro switch,yield,spawn,timer,park,sleep,sync,read >> "$out/micro.txt"
	./bench/micro xcore,offload >> "$out/micro.txt"
	for p in go_micro switch_peers; do
		if [ -x "$peers/$p" ]; then
			taskset -c 0 "$peers/$p" >> "$out/micro_peers.txt"
		else
			echo "report.sh: no $peers/$p: its figures are left out" >&2
		fi
	done
done
echo "report.sh: echo"
PEERS_BIN=$peers make -s bench-echo > "$out/echo.txt"
echo "report.sh: http"
make -s bench-http > "$out/http.txt"
"$here/plot.sh" "$out" "$out"
