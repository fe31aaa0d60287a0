#!/bin/bash
# SPDX-License-Identifier: MIT
# bench-redis.sh - hiredis's blocking API on libruntime-preload (make
# bench-redis). redis-server runs on CPU 1, every client on CPU 0:
#   redis_fibers_rps     1,000 fibers on one core, each its own connection,
#                        SET + GET in a loop (bench/redis_load fibers)
#   redis_thread_rps     one plain blocking thread doing the same
#   redis_benchmark_rps  redis-benchmark -c 1000 -t set,get (the mean of its
#                        SET and GET figures)
# ROUNDS (default 3) interleaved rounds, medians printed, RUN_SECONDS (default
# 5) per client run. Needs redis-server, redis-benchmark and libhiredis-dev.
set -u
BENCH_DIR=${BENCH_DIR:-./bench}
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${RUN_SECONDS:-5}
CLIENTS=${CLIENTS:-1000}
# shellcheck source=bench/bench-lib.sh
. "$(dirname "$0")/bench-lib.sh"

die() { echo "bench-redis: $*" >&2; exit 1; }
for tool in redis-server redis-benchmark taskset; do
	command -v "$tool" >/dev/null || die "needs $tool"
done
ulimit -n "$(ulimit -Hn)" 2>/dev/null
PORT_BASE=$((20000 + RANDOM % 9000)) next_port=$PORT_BASE
take_port
taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	--loglevel warning --maxclients 10000 --tcp-backlog 1024 >/dev/null 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null' EXIT
wait_listening "$pid" "$port" || die "redis-server did not start on $port"

fibers=() thread=() tool=()
for ((r = 1; r <= ROUNDS; r++)); do
	out=$(taskset -c 0 "$BENCH_DIR/redis_load" "$port" fibers "$CLIENTS" "$SECONDS_PER_RUN") ||
		die "redis_load fibers failed: $out"
	fibers+=("${out#rps=}")
	out=$(taskset -c 0 "$BENCH_DIR/redis_load" "$port" thread "$SECONDS_PER_RUN") ||
		die "redis_load thread failed: $out"
	thread+=("${out#rps=}")
	out=$(taskset -c 0 redis-benchmark -p "$port" -c "$CLIENTS" -n 200000 -t set,get -q 2>/dev/null |
		tr '\r' '\n' | awk '/requests per second/ { for (i = 1; i <= NF; i++)
			if ($(i + 1) == "requests") { s += $i; n++ } } END { if (n) printf "%.0f", s / n }')
	[ -n "$out" ] || die "redis-benchmark printed no figure"
	tool+=("$out")
	echo "round $r: fibers ${fibers[-1]} thread ${thread[-1]} redis-benchmark ${tool[-1]}"
done
f=$(printf '%s\n' "${fibers[@]}" | median_of)
t=$(printf '%s\n' "${thread[@]}" | median_of)
b=$(printf '%s\n' "${tool[@]}" | median_of)
echo "redis_fibers_rps=$f"
echo "redis_thread_rps=$t"
echo "redis_benchmark_rps=$b"
echo "fibers_vs_redis_benchmark=$(ratio "$f" "$b") (target >= 0.8)"
echo "fibers_vs_thread=$(ratio "$f" "$t") (target >= 1.8)"
