#!/bin/bash
# SPDX-License-Identifier: MIT
# metrics_prometheus.sh - a real Prometheus (Debian's prometheus package)
# scrapes the HTTP demo's /metrics every second while http-load sends it
# requests; its HTTP API must answer up == 1 for the demo's job, and a
# positive rate over the demo's request counter (two scrapes or more
# summed the per-core counts into series Prometheus understood). Skips,
# saying why, without prometheus, curl or python3 (fails in CI, where
# ./build.sh check installs them).
set -u
srv=$PWD/demos/http/http-server
load=$PWD/demos/http/http-load
dir=$(mktemp -d)
pid=
ppid_=
lpid=
cleanup() {
	for p in "$pid" "$ppid_" "$lpid"; do
		[ -n "$p" ] && kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh"
for tool in prometheus curl python3; do
	command -v "$tool" >/dev/null 2>&1 ||
		skip_all --installed "no $tool (apt-get install prometheus curl python3)"
done

start_server "$dir/demo.log" "$srv" --host 127.0.0.1 --cores 2
result "the demo starts" $?
[ -n "$pid" ] || { summary; exit; }
demo=$port

# Prometheus scraping the demo every second, on a port below the
# ephemeral range; another one if a parallel test took it first (Prometheus
# then exits: "bind: address already in use": start_listening).
cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: demo
    static_configs:
      - targets: ['127.0.0.1:$demo']
EOF
# Prometheus on $port (start_listening's), its storage its own.
prometheus_on_port() {
	exec prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data.$port" \
		--web.listen-address="127.0.0.1:$port" --log.level=warn
}
demo_pid=$pid
start_listening "$dir/prom.log" prometheus_on_port
status=$?
ppid_=$pid pport=$port pid=$demo_pid
result "Prometheus starts" $status
[ "$status" -eq 0 ] || { cat "$dir/prom.log"; summary; exit; }
"$load" -c 2 -d 60 --rate 200 "http://127.0.0.1:$demo/plaintext" >"$dir/load.log" 2>&1 &
lpid=$!

# query EXPR: the first value of an instant query, or nothing.
query() {
	curl -s -m 5 --get --data-urlencode "query=$1" "http://127.0.0.1:$pport/api/v1/query" |
		python3 -c 'import json, sys
try:
    r = json.load(sys.stdin)["data"]["result"]
    print(r[0]["value"][1] if r else "")
except Exception:
    pass'
}

# until EXPR TEST: wait up to 60 s for query EXPR's value to pass TEST
# (a python3 expression of v); its last value in $got.
until_value() {
	for _ in $(seq 120); do
		got=$(query "$1")
		[ -n "$got" ] && python3 -c "import sys; v = float(sys.argv[1]); sys.exit(0 if $2 else 1)" \
			"$got" && return 0
		kill -0 "$ppid_" 2>/dev/null || return 1
		sleep 0.5
	done
	return 1
}

until_value 'up{job="demo"}' 'v == 1'
result "Prometheus scrapes the demo: up == 1 (got '${got:-}')" $?
until_value 'sum(rate(runtime_http_server_requests_total{job="demo",method="GET"}[5s]))' 'v > 0'
result "a rate over the demo's request counter (got '${got:-}' per second)" $?
until_value 'count(runtime_fibers_live{job="demo"})' 'v == 2'
result "a series per core (got '${got:-}')" $?
samples=$(curl -s -m 10 "http://127.0.0.1:$demo/metrics" | grep -vc '^#')
until_value 'scrape_samples_scraped{job="demo"}' "v == $samples"
result "every sample of the exposition taken ($samples; got '${got:-}')" $?
[ "$failed" -eq 0 ] || cat "$dir/prom.log" "$dir/demo.log"
kill -KILL "$lpid" 2>/dev/null # its report is not needed
kill -TERM "$ppid_" 2>/dev/null
wait "$lpid" "$ppid_" 2>/dev/null
lpid=''
ppid_=
stop_server
result "the demo stops cleanly" $?
summary
