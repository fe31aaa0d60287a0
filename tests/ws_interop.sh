#!/bin/bash
# SPDX-License-Identifier: MIT
# ws_interop.sh - WebSocket against an independent peer, on each engine:
# Debian's python3-websockets as the client of the HTTP demo's /ws echo
# (tests/ws_interop.py: subprotocols, UTF-8 text, binary at the length
# boundaries and 4 MiB, fragments, pings, permessage-deflate, the close),
# and as the server of the library's client (examples/ws_echo --connect:
# the echoes, the close with 1000); then Node's ws package the same two
# ways, each without and with permessage-deflate
# (tests/ws_interop_node.js).
# Without python3-websockets or Node's ws that part is skipped, saying so
# (a failure in CI, where ./build.sh check installs them). Time bounds make a hang fail.
set -u
bound=120
# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh"
temp_dir

python=/usr/bin/python3
for engine in io_uring epoll; do
	if ! [ -x "$python" ] || ! "$python" -c 'import websockets' 2>/dev/null; then
		missing "$engine: python3-websockets against /ws" "Python 3 with websockets (Debian: python3-websockets)"
		continue
	fi
	if ! start_server "$tmp/server.log" ./demos/http/http-server --host 127.0.0.1 \
		--engine "$engine"; then
		result "$engine: the HTTP demo starts" 1
		continue
	fi
	timeout "$bound" "$python" "${srcdir:-.}/tests/ws_interop.py" "$port" >"$tmp/out" 2>&1
	rc=$?
	sed "s/^/    $engine: /" "$tmp/out"
	result "$engine: python3-websockets against /ws" "$rc"
	stop_server
	result "$engine: the HTTP demo stops cleanly on SIGTERM (exit 0)" $?
done

# The library's client against python3-websockets' server, without and
# with permessage-deflate.
if [ -x "$python" ] && "$python" -c 'import websockets' 2>/dev/null; then
	"$python" "${srcdir:-.}/tests/ws_interop.py" serve >"$tmp/py.out" 2>&1 &
	pid=$!
	for _ in $(seq 100); do grep -q '^port ' "$tmp/py.out" && break; sleep 0.1; done
	py_port=$(sed -n 's/^port //p' "$tmp/py.out")
	printf 'hello\nwide ✓ text\nws_echo: closed with 1000\n' >"$tmp/want"
	for flag in "" --deflate; do
		# shellcheck disable=SC2086 # no flag: no argument
		timeout "$bound" ./examples/ws_echo --connect "ws://127.0.0.1:${py_port:-1}/" $flag \
			hello 'wide ✓ text' >"$tmp/out" 2>&1
		rc=$?
		cmp -s "$tmp/want" "$tmp/out" || sed 's/^/    client: /' "$tmp/out"
		result "the library's client against python3-websockets (${flag:-plain}): echoes, close 1000" \
			$((rc != 0 || $(cmp -s "$tmp/want" "$tmp/out"; echo $?)))
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=
else
	missing "the library's client against python3-websockets" "Python 3 with websockets (Debian: python3-websockets)"
fi

# Node's ws package (Debian: node-ws), both ways: its client against /ws
# on each engine, and the library's client against its server, each
# without and with permessage-deflate.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
if ! command -v node >/dev/null || ! node -e "require('ws')" 2>/dev/null; then
	missing "Node's ws, both ways" "Node.js with ws (Debian: nodejs, node-ws)"
	summary
	exit
fi
for engine in io_uring epoll; do
	if ! start_server "$tmp/server.log" ./demos/http/http-server --host 127.0.0.1 \
		--engine "$engine"; then
		result "$engine: the HTTP demo starts" 1
		continue
	fi
	timeout "$bound" node "${srcdir:-.}/tests/ws_interop_node.js" client "$port" >"$tmp/out" 2>&1
	rc=$?
	sed "s/^/    $engine: /" "$tmp/out"
	result "$engine: Node's ws against /ws, plain and compressed" "$rc"
	stop_server
done
long=$(head -c 3000 /dev/zero | tr '\0' z)
for deflate in 0 1; do
	flag=; agreed=none
	[ "$deflate" = 1 ] && flag=--deflate && agreed=permessage-deflate
	node "${srcdir:-.}/tests/ws_interop_node.js" serve "$deflate" >"$tmp/node.out" 2>&1 &
	pid=$!
	for _ in $(seq 100); do grep -q '^port ' "$tmp/node.out" && break; sleep 0.1; done
	node_port=$(sed -n 's/^port //p' "$tmp/node.out")
	# shellcheck disable=SC2086 # no flag: no argument
	timeout "$bound" ./examples/ws_echo --connect "ws://127.0.0.1:${node_port:-1}/" $flag \
		hello 'wide ✓ text' "$long" >"$tmp/out" 2>&1
	rc=$?
	printf 'hello\nwide ✓ text\n%s\nws_echo: closed with 1000\n' "$long" >"$tmp/want"
	cmp -s "$tmp/want" "$tmp/out" || sed 's/^/    client: /' "$tmp/out" | cut -c1-100
	grep -q "^agreed: $agreed" "$tmp/node.out" || sed 's/^/    node: /' "$tmp/node.out"
	result "the library's client against Node's ws (${flag:-plain}): echoes, close 1000" \
		$((rc != 0 || $(cmp -s "$tmp/want" "$tmp/out"; echo $?) ||
			$(grep -q "^agreed: $agreed" "$tmp/node.out"; echo $?)))
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=
done

summary
