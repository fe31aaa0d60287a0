#!/bin/bash
# SPDX-License-Identifier: MIT
# metrics_promtool.sh - the HTTP demo's /metrics, after requests of
# several methods and statuses, over one and two cores (and HTTP/2's
# durations and bytes, TLS's handshakes by result), read by
# Prometheus's own parser: `promtool check metrics` (Debian's prometheus
# package) must find no error (its lint warnings are printed, not
# failed: names are the project's choice). Skips, saying why, without
# promtool or curl (fails in CI, where ./build.sh check installs them).
set -u
srv=./demos/http/http-server
log=$(mktemp)
out=$(mktemp)
certs=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	rm -rf "$log" "$out" "$certs"
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

# HTTP/2 counts too: five h2c requests, then /metrics over h2c (its own
# duration counts once it has ended). A connection each: Debian 12's
# curl (7.88.1) breaks a second request on a reused h2c connection, with
# any server (h2o's too).
start_server "$log" "$srv" --host 127.0.0.1 --cores 1 ||
	{ cat "$log"; result "demo starts" 1; }
base=http://127.0.0.1:$port
for _ in 1 2 3 4 5; do
	curl -s --http2-prior-knowledge -o /dev/null "$base/plaintext"
done
curl -s --http2-prior-knowledge -o "$out" "$base/metrics"
series() { sed -n "s/^$1{server=\"demo\"} //p" "$out"; }
count=$(series runtime_http_server_request_duration_seconds_count)
[ "$count" = 5 ]
result "h2: five streams in the duration histogram (got '$count')" $?
in=$(series runtime_http_server_received_bytes_total)
sent=$(series runtime_http_server_sent_bytes_total)
[ "${in:-0}" -gt 0 ] && [ "${sent:-0}" -gt 0 ]
result "h2: bytes received and sent counted (got '$in', '$sent')" $?
stop_server
result "the demo stops cleanly" $?

# TLS handshakes by result: one the client refuses (no CA), a full one,
# a resumed one (curl resumes its session on a second connection: HTTP/1.1
# with a close, as HTTP/2 would keep the first), and /metrics's own.
if ! command -v openssl >/dev/null 2>&1; then
	missing "TLS handshakes" openssl
elif test_certs "$certs" metrics-ca 2>/dev/null; then
	start_server "$log" "$srv" --host 127.0.0.1 --tls-cert "$certs/leaf.crt" \
		--tls-key "$certs/leaf.key" || { cat "$log"; result "TLS demo starts" 1; }
	base=https://127.0.0.1:$port
	curl -s -o /dev/null "$base/plaintext" # refused: unknown CA
	curl -s --http1.1 --cacert "$certs/ca.crt" -H 'Connection: close' -o /dev/null \
		-o /dev/null "$base/plaintext" "$base/plaintext"
	curl -s --cacert "$certs/ca.crt" -o "$out" "$base/metrics"
	tls() { sed -n "s/^runtime_tls_handshakes_total{server=\"demo\",result=\"$1\"} //p" "$out"; }
	hs_full=$(tls full) hs_resumed=$(tls resumed) hs_failed=$(tls failed)
	# failed: the refused one, and start_server's probe (a connect, no hello)
	[ "$hs_full" = 2 ] && [ "$hs_resumed" = 1 ] && [ "$hs_failed" = 2 ]
	result "TLS handshakes: 2 full, 1 resumed, 2 failed (got '$hs_full', '$hs_resumed', '$hs_failed')" $?
	stop_server
	result "the TLS demo stops cleanly" $?
else
	result "test certificates made" 1
fi
summary
