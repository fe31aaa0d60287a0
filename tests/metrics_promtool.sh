#!/bin/bash
# SPDX-License-Identifier: MIT
# metrics_promtool.sh - the HTTP demo's /metrics, after requests of
# several methods and statuses, over one and two cores, read by
# Prometheus's own parser: `promtool check metrics` (Debian's prometheus
# package) must find no error (its lint warnings are printed, not
# failed: names are the project's choice). Skips, saying why, without
# promtool or curl (fails in CI, where ./build.sh check installs them).
set -u
srv=./demos/http/http-server
log=$(mktemp)
out=$(mktemp)
pid=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	rm -f "$log" "$out"
}
trap cleanup EXIT

# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh"
for tool in promtool curl; do
	command -v "$tool" >/dev/null 2>&1 ||
		skip_all --installed "no $tool (apt-get install prometheus curl)"
done

for cores in 1 2; do
	start_server "$log" "$srv" --host 127.0.0.1 --cores "$cores" ||
		{ cat "$log"; result "demo starts on $cores core(s)" 1; continue; }
	base=http://127.0.0.1:$port
	curl -s "$base/plaintext" "$base/plaintext" "$base/nothing" >/dev/null
	curl -s -X POST -d hello "$base/echo" >/dev/null
	curl -s -I "$base/plaintext" >/dev/null
	curl -s -X DELETE "$base/x" >/dev/null
	curl -s -X PATCH "$base/x" >/dev/null
	type=$(curl -s -o "$out" -w '%{content_type}' "$base/metrics")
	[ "$type" = "text/plain; version=0.0.4; charset=utf-8" ]
	result "$cores core(s): /metrics is text/plain; version=0.0.4 (got '$type')" $?
	lint=$(promtool check metrics <"$out" 2>&1)
	status=$?
	[ -n "$lint" ] && printf '%s\n' "$lint" | sed 's/^/  promtool: /'
	# promtool exits 3 for lint problems alone, 1 for an unparsable text.
	[ "$status" -eq 0 ] || [ "$status" -eq 3 ]
	result "$cores core(s): promtool parses the exposition (status $status)" $?
	grep -q '^runtime_http_server_requests_total{server="demo",method="DELETE"} 1$' "$out" &&
	grep -q '^runtime_http_server_requests_total{server="demo",method="other"} 1$' "$out"
	result "$cores core(s): DELETE counted as such, PATCH as other" $?
	grep -q "^runtime_fibers_live{core=\"$((cores - 1))\"} " "$out"
	result "$cores core(s): a series per core" $?
	stop_server
	result "$cores core(s): the demo stops cleanly" $?
done
summary
