#!/bin/bash
# SPDX-License-Identifier: MIT
# h2_interop.sh - the HTTP/2 server (the HTTP demo, cleartext h2c) against
# real clients and a protocol suite, on each engine:
#  - tests/h2_conformance.py: RFC 9113 and RFC 7541 in h2spec's sections,
#    and the published attacks (rapid reset, CONTINUATION flood, HPACK
#    bomb, SETTINGS, PING and empty-frame floods, a zero window, slow
#    streams), frames made by hand on Debian's python3-hpack, the server's
#    memory bounded over the run;
#  - curl --http2-prior-knowledge: a GET, a 200 KB POST echoed whole;
#  - nghttp: a GET, and a file of 2 MiB through flow control;
#  - h2load: 4 connections, 10 streams each at once, every request 200.
# Over TLS (ALPN h2) the clients run in tests/tls_interop.sh. A client
# that is not installed is skipped, saying so, and the test then reports
# SKIP (77) unless something failed; ./build.sh check installs them all,
# and in CI (CI=true) a missing one is a failure. Time bounds make a hang
# fail.
set -u
bound=120 # seconds for one client run
# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh" # start_server, stop_server, the tally, missing
temp_dir

pass() { echo "h2_interop: PASS: $*"; passed=$((passed + 1)); }
fail() {
	echo "h2_interop: FAIL: $*"
	[ -s "$tmp/out" ] && tail -n 30 "$tmp/out" | sed 's/^/    out: /'
	failed=$((failed + 1))
}
check() { # NAME CMD...: pass if CMD succeeds
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name"; fi
}

python=/usr/bin/python3
mkdir -p "$tmp/root"
head -c 2097152 /dev/urandom >"$tmp/root/big"
head -c 150000 /dev/urandom | base64 >"$tmp/body"

for engine in io_uring epoll; do
	if ! start_server "$tmp/server.log" ./demos/http/http-server --host 127.0.0.1 \
		--root "$tmp/root" --idle-timeout 3000 --engine "$engine"; then
		fail "$engine: the HTTP demo starts"
		continue
	fi
	url=http://127.0.0.1:$port
	if [ -x "$python" ] && "$python" -c 'import hpack' 2>/dev/null; then
		SERVER_PID=$pid timeout "$bound" "$python" "${srcdir:-.}/tests/h2_conformance.py" \
			"$port" "$tmp/root/big" >"$tmp/out" 2>&1
		rc=$?
		grep '^FAIL' "$tmp/out" | sed "s/^/    $engine: /"
		check "$engine: the protocol suite: $(tail -n 1 "$tmp/out")" [ "$rc" -eq 0 ]
	else
		missing "$engine: the protocol suite" "Python 3 with hpack (Debian: python3-h2)"
	fi
	if command -v curl >/dev/null; then
		timeout "$bound" curl -sS --http2-prior-knowledge -w ' %{http_version}' \
			"$url/plaintext" >"$tmp/out" 2>&1
		check "$engine: curl --http2-prior-knowledge GET: HTTP/2, the body" \
			[ "$(cat "$tmp/out")" = "Hello, World! 2" ]
		timeout "$bound" curl -sS --http2-prior-knowledge --data-binary "@$tmp/body" \
			"$url/echo" >"$tmp/out" 2>&1
		check "$engine: curl --http2-prior-knowledge POSTs 200 KB, every byte comes back" \
			cmp -s "$tmp/body" "$tmp/out"
	else
		missing "$engine: curl --http2-prior-knowledge" "curl (Debian: curl)"
	fi
	if command -v nghttp >/dev/null; then
		timeout "$bound" nghttp "$url/plaintext" >"$tmp/out" 2>&1
		check "$engine: nghttp GET" [ "$(cat "$tmp/out")" = "Hello, World!" ]
		timeout "$bound" nghttp "$url/big" >"$tmp/out" 2>&1
		check "$engine: nghttp gets 2 MiB through flow control, whole" \
			cmp -s "$tmp/root/big" "$tmp/out"
	else
		missing "$engine: nghttp" "nghttp (Debian: nghttp2-client)"
	fi
	if command -v h2load >/dev/null; then
		timeout "$bound" h2load -n 2000 -c 4 -m 10 "$url/plaintext" >"$tmp/out" 2>&1
		check "$engine: h2load -n 2000 -c 4 -m 10: every request 200" \
			grep -q '^status codes: 2000 2xx' "$tmp/out"
	else
		missing "$engine: h2load" "h2load (Debian: nghttp2-client)"
	fi
	stop_server
	check "$engine: the HTTP demo stops cleanly on SIGTERM (exit 0)" [ $? -eq 0 ]
done

summary
