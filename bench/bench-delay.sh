#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-delay.sh: the demo HTTP server's /delay under many concurrent slow
# requests (seed 004's example): CONNS connections (10,000) each ask for
# /delay?ms=MS (1000) at the same moment; delay_load reports when the first,
# median, 99th-percentile and last answers arrived, counted from the burst.
# The target: every answer within 1.1 x MS. Server pinned to SERVER_CPU (0),
# load to LOAD_CPU (1), on 127.0.0.1, ROUNDS (3) fresh servers; CORES (1)
# cores for the server. Exits non-zero if a round failed or missed answers.
#
# Environment: HTTP_SERVER, BENCH_DIR (where delay_load is), CONNS, MS,
# ROUNDS, CORES, SERVER_CPU, LOAD_CPU.
set -u

here=$(cd "$(dirname "$0")" && pwd)
BENCH_DIR=${BENCH_DIR:-$here}
HTTP_SERVER=${HTTP_SERVER:-$BENCH_DIR/../demos/http/http-server}
CONNS=${CONNS:-10000} MS=${MS:-1000} ROUNDS=${ROUNDS:-3} CORES=${CORES:-1}
SERVER_CPU=${SERVER_CPU:-0} LOAD_CPU=${LOAD_CPU:-1}

for bin in "$HTTP_SERVER" "$BENCH_DIR/delay_load"; do
	[ -x "$bin" ] || { echo "bench-delay: not executable: $bin (build it first)" >&2; exit 2; }
done
ulimit -n "$(ulimit -Hn)"
status=0
for round in $(seq "$ROUNDS"); do
	log=$(mktemp)
	cpus=$SERVER_CPU
	[ "$CORES" -gt 1 ] && cpus=0-$((CORES - 1))
	taskset -c "$cpus" "$HTTP_SERVER" --port 0 --host 127.0.0.1 --cores "$CORES" \
		--max-conns $((CONNS * 2)) >"$log" 2>&1 &
	pid=$!
	port=""
	for _ in $(seq 100); do
		port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$log")
		[ -n "$port" ] && break
		sleep 0.05
	done
	if [ -z "$port" ]; then
		echo "bench-delay: the server did not start: $(cat "$log")" >&2
		kill "$pid" 2>/dev/null
		exit 1
	fi
	out=$(taskset -c "$LOAD_CPU" "$BENCH_DIR/delay_load" -p "$port" -c "$CONNS" -m "$MS") || status=1
	echo "round=$round cores=$CORES $out"
	kill "$pid"
	wait "$pid" 2>/dev/null
	rm -f "$log"
done
exit $status
