#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-proxy.sh: the CPU a reverse proxy adds per request, ours
# (bench/http_proxy: runtime_http_proxy_handler, a client pooling 256
# connections per core) against nginx's proxy_pass (one worker, master
# off, an upstream block with "keepalive 256", HTTP/1.1 to it, the
# X-Forwarded-For/-Proto/-Host fields ours sets by default, access log
# off), in front of the same upstream: the demo http-server's /plaintext
# (one core). Proxy and upstream are pinned to SERVER_CPU, `wrk -t1
# -cCONNS` to LOAD_CPU. Server CPU per request is the proxy's
# utime+stime plus the upstream's (/proc/PID/stat) across the measured
# run, over the requests wrk completed; the upstream's alone is reported
# too, so the proxy's own share is their difference. Rounds are
# interleaved, the order rotated each round; the ratio to nginx is paired
# (the median of the rounds' own ratios). Each proxy's answer is checked
# once (curl).
#
# Environment: HTTP_SERVER (the demo), HTTP_PROXY_BIN (bench/http_proxy),
#   SERVERS ("runtime nginx"), ROUNDS (3), SECS (5), WARMUP (1), CONNS
#   (16), SERVER_CPU (0), LOAD_CPU (1), PORT_BASE (random).
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$here/bench-lib.sh"
HTTP_SERVER=${HTTP_SERVER:-$PWD/demos/http/http-server}
HTTP_PROXY_BIN=${HTTP_PROXY_BIN:-$PWD/bench/http_proxy}
SERVERS=${SERVERS:-runtime nginx}
ROUNDS=${ROUNDS:-3} SECS=${SECS:-5} WARMUP=${WARMUP:-1} CONNS=${CONNS:-16}
SERVER_CPU=${SERVER_CPU:-0} LOAD_CPU=${LOAD_CPU:-1}
PORT_BASE=${PORT_BASE:-$((20000 + RANDOM % 10000))}
next_port=$PORT_BASE
hz=$(getconf CLK_TCK)
tmp=$(mktemp -d) || exit 2
srv_pid= up_pid=
trap 'for p in $srv_pid $up_pid; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT

die() { echo "bench-proxy: $*" >&2; exit 2; }
note() { echo "# $*"; }
is_ours() { [ "$1" = runtime ]; }

command -v wrk >/dev/null || die "wrk is needed (apt-get install wrk)"
[ -x "$HTTP_SERVER" ] || die "no demo server at $HTTP_SERVER (make demos/http/http-server)"
[ -x "$HTTP_PROXY_BIN" ] || die "no proxy at $HTTP_PROXY_BIN (make bench/http_proxy)"
check_pinning

nginx_conf() { # PORT UPSTREAM_PORT
	cat >"$tmp/nginx.conf" <<EOC
worker_processes 1;
daemon off;
master_process off;
pid $tmp/nginx.pid;
error_log $tmp/nginx.err;
events { worker_connections 4096; }
http {
  access_log off;
  upstream up { server 127.0.0.1:$2; keepalive 256; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:$1;
    keepalive_requests 1000000;
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto \$scheme;
      proxy_set_header X-Forwarded-Host \$host;
    }
  }
}
EOC
}

server_cmd() { # NAME PORT UPSTREAM_PORT
	case $1 in
	runtime) echo "$HTTP_PROXY_BIN --port $2 --upstream http://127.0.0.1:$3" ;;
	nginx) command -v nginx >/dev/null && nginx_conf "$2" "$3" &&
		echo "nginx -e $tmp/nginx.err -c $tmp/nginx.conf" ;;
	esac
}

wrk_run() { # SECONDS URL
	"${pin_load[@]}" timeout $(($1 + 60)) wrk -t1 -c"$CONNS" -d"$1s" "$2" 2>&1
}

# The upstream, for the whole run: up_pid, up_port.
take_port
up_port=$port
"${pin_srv[@]}" "$HTTP_SERVER" --host 127.0.0.1 --port "$up_port" >"$tmp/upstream.log" 2>&1 &
up_pid=$!
wait_listening "$up_pid" "$up_port" || die "the upstream did not listen: $(cat "$tmp/upstream.log")"

# One proxy, one run: "name ns_total ns_upstream round".
run_proxy() { # ROUND NAME
	local round=$1 name=$2 cmd u0 s0 u1 s1 v0 w0 v1 w1 out total url
	take_port
	cmd=$(server_cmd "$name" "$port" "$up_port") || { note "$name: not here, skipped"; return 0; }
	# shellcheck disable=SC2086 # a command line
	"${pin_srv[@]}" $cmd >"$tmp/$name.log" 2>&1 &
	srv_pid=$!
	wait_listening "$srv_pid" "$port" || { note "$name: did not listen"; stop_server; return 1; }
	url=http://127.0.0.1:$port/plaintext
	if [ "$round" -eq 1 ] && [ "$(curl -s "$url")" != "Hello, World!" ]; then
		note "$name: wrong answer: $(curl -si "$url" | head -3 | tr '\r\n' '  ')"
		stop_server
		return 1
	fi
	[ "$WARMUP" -gt 0 ] && wrk_run "$WARMUP" "$url" >/dev/null
	read -r u0 s0 <<<"$(cpu_split "$srv_pid")"
	read -r v0 w0 <<<"$(cpu_split "$up_pid")"
	out=$(wrk_run "$SECS" "$url")
	read -r u1 s1 <<<"$(cpu_split "$srv_pid")"
	read -r v1 w1 <<<"$(cpu_split "$up_pid")"
	total=$(awk '/ requests in / { print $1 }' <<<"$out")
	stop_server
	if [ "${total:-0}" -eq 0 ] || grep -q "Non-2xx\|Socket errors" <<<"$out"; then
		note "$name: $(tr '\n' ' ' <<<"$out")"
		return 1
	fi
	awk -v n="$name" -v p=$((u1 + s1 - u0 - s0)) -v u=$((v1 + w1 - v0 - w0)) -v hz="$hz" \
		-v t="$total" -v r="$round" -v s="$SECS" \
		'BEGIN { printf "%s %.0f %.0f %d %.0f\n", n, (p + u) * 1e9 / hz / t, u * 1e9 / hz / t, r, t / s }'
}

note "bench-proxy: proxy + upstream CPU per request (ns), /plaintext, $CONNS connections," \
	"${SECS}s runs, $ROUNDS rounds, servers on CPU $srv_cpus, load on CPU $LOAD_CPU"
read -r -a order <<<"$SERVERS"
for ((r = 1; r <= ROUNDS; r++)); do
	for ((i = 0; i < ${#order[@]}; i++)); do
		run_proxy "$r" "${order[(i + r - 1) % ${#order[@]}]}"
	done
done | tee "$tmp/runs"
echo
printf '%-10s %14s %14s %14s %12s\n' proxy "total ns/req" "upstream ns" "proxy ns/req" "req/s"
for name in $SERVERS; do
	t=$(awk -v n="$name" '$1 == n { print $2 }' "$tmp/runs" | median_of)
	u=$(awk -v n="$name" '$1 == n { print $3 }' "$tmp/runs" | median_of)
	q=$(awk -v n="$name" '$1 == n { print $5 }' "$tmp/runs" | median_of)
	printf '%-10s %14s %14s %14s %12s\n' "$name" "$t" "$u" \
		"$(awk -v t="$t" -v u="$u" 'BEGIN { if (t + 0 > 0) printf "%.0f", t - u; else print "n/a" }')" "$q"
done
echo "runtime/nginx, total (paired): $(awk '{ print $1, $2, $4 }' "$tmp/runs" | paired runtime nginx)"
echo "runtime/nginx, the proxy's own (paired): $(awk '{ print $1, $2 - $3, $4 }' "$tmp/runs" | paired runtime nginx)"
srv_pid=$up_pid up_pid=
stop_server
