#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-files.sh: server CPU per request for static files of several sizes,
# the demo http-server (--root; it reuses a file opened in the last
# second, --file-cache-ms) against nginx (one worker, master off, sendfile
# on, open_file_cache off: its default), nginx-ofc (the same with
# open_file_cache on and valid for a second, as the demo's) and h2o (one
# thread, file.dir), in the same run. Each server serves the same
# directory of files (SIZES, in KiB, random bytes), pinned to SERVER_CPU;
# `wrk -t1 -cCONNS` on LOAD_CPU fetches one file per run (a WARMUP-second
# run first). Server CPU per request is the server's utime+stime (all
# threads, /proc/PID/stat) across the measured run over the requests wrk
# completed. Rounds are interleaved, the servers' order rotated each round;
# the demo's ratios to nginx and nginx-ofc are paired (the median of the
# rounds' own ratios). Every body is checked once against the file (md5).
#
# UNCACHED=1: the file is dropped from the page cache
# (POSIX_FADV_DONTNEED) before each measured run, as after a cold start;
# the first requests then read the disk: the demo sends a file by
# sendfile from its core only when cachestat(2) finds all of it cached,
# else it reads through io_uring (the wait is the kernel's, not the
# core's). The demo then runs with its stall detector on (--stall-ms
# STALL_MS, default 1): each round says how many times a fiber held its
# core that long or longer, and the longest seen (at least that long: the
# detector reports a stall when it sees it, half a threshold apart).
#
# Environment: HTTP_SERVER (default $BENCH_DIR/../demos/http/http-server),
#   SERVERS ("demo nginx nginx-ofc h2o"), SIZES ("1 4 64 256 1024"), ROUNDS (2),
#   SECS (5), WARMUP (1), CONNS (16), SERVER_CPU (0), LOAD_CPU (1),
#   PORT_BASE (random), UNCACHED (0), STALL_MS (1 with UNCACHED=1, else 0;
#   its watcher thread wakes twice per threshold, on the server's CPU).
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$here/bench-lib.sh"
BENCH_DIR=${BENCH_DIR:-$here}
HTTP_SERVER=${HTTP_SERVER:-$BENCH_DIR/../demos/http/http-server}
[ -x "$HTTP_SERVER" ] || HTTP_SERVER=$PWD/demos/http/http-server # run from a build tree
SERVERS=${SERVERS:-demo nginx nginx-ofc h2o}
SIZES=${SIZES:-1 4 64 256 1024}
ROUNDS=${ROUNDS:-2} SECS=${SECS:-5} WARMUP=${WARMUP:-1} CONNS=${CONNS:-16}
SERVER_CPU=${SERVER_CPU:-0} LOAD_CPU=${LOAD_CPU:-1} UNCACHED=${UNCACHED:-0}
STALL_MS=${STALL_MS:-$([ "$UNCACHED" = 1 ] && echo 1 || echo 0)}
PORT_BASE=${PORT_BASE:-$((20000 + RANDOM % 10000))}
next_port=$PORT_BASE
hz=$(getconf CLK_TCK)
tmp=$(mktemp -d) || exit 2
srv_pid=
trap '[ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null; rm -rf "$tmp"' EXIT

die() { echo "bench-files: $*" >&2; exit 2; }
note() { echo "# $*"; }
is_ours() { [ "$1" = demo ]; }

command -v wrk >/dev/null || die "wrk is needed (apt-get install wrk)"
mkdir -p "$tmp/www" && chmod 755 "$tmp" "$tmp/www" # h2o run as root reads as nobody
for kib in $SIZES; do
	head -c $((kib * 1024)) /dev/urandom >"$tmp/www/f$kib" || die "cannot write files"
done
sync # written back: every server meets clean pages in the cache
check_pinning

nginx_conf() { # PORT [DIRECTIVES]: to $tmp/nginx.conf
	cat >"$tmp/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process off;
pid $tmp/nginx.pid;
error_log $tmp/nginx.err;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  ${2:-}
  server { listen 127.0.0.1:$1; root $tmp/www; }
}
EOF
}

h2o_conf() { # PORT
	cat >"$tmp/h2o.conf" <<EOF
listen: { port: $1, host: 127.0.0.1 }
num-threads: 1
hosts: { default: { paths: { /: { file.dir: $tmp/www } } } }
error-log: $tmp/h2o.err
EOF
}

# The command line of NAME on PORT, or nothing if it is not here.
server_cmd() {
	case $1 in
	demo) [ -x "$HTTP_SERVER" ] &&
		echo "$HTTP_SERVER --host 127.0.0.1 --port $2 --root $tmp/www --stall-ms $STALL_MS" ;;
	nginx) command -v nginx >/dev/null && nginx_conf "$2" &&
		echo "nginx -e $tmp/nginx.err -c $tmp/nginx.conf" ;;
	nginx-ofc) command -v nginx >/dev/null &&
		nginx_conf "$2" "open_file_cache max=1000 inactive=20s; open_file_cache_valid 1s;" &&
		echo "nginx -e $tmp/nginx.err -c $tmp/nginx.conf" ;;
	h2o) command -v h2o >/dev/null && h2o_conf "$2" && echo "h2o -c $tmp/h2o.conf" ;;
	esac
}

drop_cache() { # FILE
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"
}

wrk_run() { # SECONDS URL
	"${pin_load[@]}" timeout $(($1 + 60)) wrk -t1 -c"$CONNS" -d"$1s" "$2" 2>&1
}

# One server, every size: lines "name size ns round".
run_server() { # ROUND NAME
	local round=$1 name=$2 cmd u0 s0 u1 s1 out total kib url
	take_port
	cmd=$(server_cmd "$name" "$port") || { note "$name: not here, skipped"; return 0; }
	# shellcheck disable=SC2086 # a command line
	"${pin_srv[@]}" $cmd >"$tmp/$name.log" 2>&1 &
	srv_pid=$!
	wait_listening "$srv_pid" "$port" || { note "$name: did not listen"; stop_server; return 1; }
	for kib in $SIZES; do
		url=http://127.0.0.1:$port/f$kib
		if [ "$round" -eq 1 ] && [ "$(curl -s "$url" | md5sum)" != "$(md5sum <"$tmp/www/f$kib")" ]; then
			note "$name: f$kib: wrong body"
			continue
		fi
		[ "$WARMUP" -gt 0 ] && wrk_run "$WARMUP" "$url" >/dev/null
		[ "$UNCACHED" = 1 ] && drop_cache "$tmp/www/f$kib"
		read -r u0 s0 <<<"$(cpu_split "$srv_pid")"
		out=$(wrk_run "$SECS" "$url")
		read -r u1 s1 <<<"$(cpu_split "$srv_pid")"
		total=$(awk '/ requests in / { print $1 }' <<<"$out")
		if [ "${total:-0}" -eq 0 ] || grep -q "Non-2xx\|Socket errors" <<<"$out"; then
			note "$name f$kib: $(tr '\n' ' ' <<<"$out")"
			continue
		fi
		echo "$name $kib $(awk -v d=$((u1 + s1 - u0 - s0)) -v hz="$hz" -v n="$total" \
			'BEGIN { printf "%.0f", d * 1e9 / hz / n }') $round"
	done
	stop_server
	if is_ours "$name" && [ "$STALL_MS" -gt 0 ]; then stalls "$tmp/$name.log"; fi
}

# stalls LOG: the stall detector's reports in the demo's LOG, summed up.
stalls() {
	grep "runtime: stall:" "$1" | head -3 | sed 's/^/# /'
	awk -v ms="$STALL_MS" '/runtime: stall: fiber/ { n++; for (i = 1; i < NF; i++)
		if ($i == "run" && $(i + 1) + 0 > max) max = $(i + 1) + 0 }
		END { if (n) printf "# demo: %d stalls of %d ms or more, the longest seen %d ms\n", n, ms, max
		      else printf "# demo: no fiber held its core %d ms or more\n", ms }' "$1"
}

note "bench-files: server CPU per request (ns), $CONNS connections, ${SECS}s runs," \
	"$ROUNDS rounds, server on CPU $srv_cpus, load on CPU $LOAD_CPU," \
	"$([ "$UNCACHED" = 1 ] && echo "dropped from the page cache before each run" || echo cached)"
read -r -a order <<<"$SERVERS"
for ((r = 1; r <= ROUNDS; r++)); do
	for ((i = 0; i < ${#order[@]}; i++)); do
		run_server "$r" "${order[(i + r - 1) % ${#order[@]}]}"
	done
done | tee "$tmp/runs"
echo
printf '%-8s' "KiB"
for name in $SERVERS; do printf '%12s' "$name"; done
printf '%14s' "demo/nginx"
has_ofc=$([[ " $SERVERS " == *" nginx-ofc "* ]] && echo 1)
[ -n "$has_ofc" ] && printf '%16s' "demo/nginx-ofc"
echo
for kib in $SIZES; do
	printf '%-8s' "$kib"
	for name in $SERVERS; do
		printf '%12s' "$(awk -v n="$name" -v k="$kib" '$1 == n && $2 == k { print $3 }' \
			"$tmp/runs" | median_of)"
	done
	printf '%14s' "$(awk -v k="$kib" '$2 == k { print $1, $3, $4 }' "$tmp/runs" |
		paired demo nginx)"
	[ -n "$has_ofc" ] && printf '%16s' "$(awk -v k="$kib" '$2 == k { print $1, $3, $4 }' \
		"$tmp/runs" | paired demo nginx-ofc)"
	echo
done
