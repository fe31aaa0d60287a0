#!/bin/bash
# SPDX-License-Identifier: MIT
# http_client_peers.sh - the runtime's HTTP client (tests/http_get) against
# real servers: nginx, h2o and Go's net/http, each over HTTP and HTTPS.
# Against each, 20 GETs of a Content-Length body and 20 of a chunked one
# (1234 bytes each, the same every time) must all answer 200, whole, on
# one connection: the client's counters say "connects 1, reused 39".
# HTTPS is checked against a CA made here with the openssl CLI (the
# server's certificate names 127.0.0.1), verification on; and HTTPS with
# h2 offered: every server agrees on HTTP/2 (nginx with http2 on).
#
# Servers run as whoever runs this, everything in a temporary directory
# removed at the end with every process this started (trap), on free
# ports picked here. nginx: one process (master_process off); h2o: its
# mruby handler streams the chunked body; Go: a server written here and
# built with `go build`. A peer that is not installed is skipped, saying
# so, and the test then reports SKIP (77) unless something failed - as
# tests/tls_interop.sh does; without the openssl CLI nothing runs (77).
# In CI (CI=true), where ./build.sh check installs them all, a missing
# peer is a failure.
# Time bounds are there so that a hang fails instead of hanging CI.
set -u
bound=30 # seconds for one client run
tmp=$(mktemp -d)
pids=
get=./tests/http_get

cleanup() {
	local p
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh" # listening PORT, the tally, missing, skip_all

pass() { echo "http_client_peers: PASS: $*"; passed=$((passed + 1)); }
fail() {
	echo "http_client_peers: FAIL: $*"
	[ -s "$tmp/out" ] && sed 's/^/    out: /' "$tmp/out"
	[ -s "$tmp/err" ] && tail -n 20 "$tmp/err" | sed 's/^/    err: /'
	failed=$((failed + 1))
}

free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 10000))
		listening "$p" || { echo "$p"; return 0; }
	done
	return 1
}

# wait_listening PORT PID: up to 10 s for PORT to accept, while PID lives.
wait_listening() {
	for _ in $(seq 200); do
		listening "$1" && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

command -v openssl >/dev/null 2>&1 ||
	skip_all --installed "no openssl CLI to make certificates (Debian: openssl)"
if [ ! -x "$get" ]; then
	echo "http_client_peers: FAIL: $get is not built"
	exit 1
fi

# ------------------------------------------------------------ the content
c=$tmp/certs
mkdir -p "$c" "$tmp/www"
test_certs "$c" peers-test-ca >"$tmp/err" 2>&1 || { fail "certificates made with openssl"; exit 1; }
# 1234 bytes of text, the body every server sends
awk 'BEGIN { for (i = 0; i < 1234; i++) printf "%c", 97 + i % 26 }' > "$tmp/www/fixed.txt"
cp "$tmp/www/fixed.txt" "$tmp/www/page.html"

# check_peer NAME HTTP_PORT HTTPS_PORT: 20 GETs of each body over each,
# and over HTTPS again with h2 offered by ALPN (all 40 over HTTP/2, on one
# connection, the streams one after another).
check_peer() {
	local name=$1 scheme port args base conns unknown
	for scheme in http https h2; do
		case $scheme in
		http) port=$2 args= ;;
		https) port=$3 args="--cacert $c/ca.crt" ;;
		h2) port=$3 args="--cacert $c/ca.crt --h2" ;;
		esac
		base=${scheme%h2}://127.0.0.1:$port
		[ "$scheme" = h2 ] && base=https://127.0.0.1:$port
		# shellcheck disable=SC2086 # args: words
		timeout "$bound" "$get" -n 20 $args "$base/fixed" "$base/chunked" >"$tmp/out" 2>"$tmp/err"
		local rc=$?
		if [ "$rc" -ne 0 ]; then
			fail "$name over $scheme: http_get exit $rc"
			continue
		fi
		unknown=chunked
		[ "$scheme" = h2 ] && unknown=unknown # HTTP/2: no chunked coding
		if grep -qx "GET $base/fixed: 20 x 200, body 1234 bytes, length" "$tmp/out" &&
			grep -qx "GET $base/chunked: 20 x 200, body 1234 bytes, $unknown" "$tmp/out"; then
			pass "$name over $scheme: Content-Length and chunked bodies, 20 GETs each"
		else
			fail "$name over $scheme: Content-Length and chunked bodies, 20 GETs each"
		fi
		conns="client: connects 1, reused 39, retried 0, requests 40, h2 0"
		[ "$scheme" = h2 ] && conns="client: connects 1, reused 0, retried 0, requests 40, h2 40"
		if grep -qx "$conns" "$tmp/out"; then
			pass "$name over $scheme: 40 requests on 1 connection"
		else
			fail "$name over $scheme: 40 requests on 1 connection"
		fi
	done
}

# start NAME CMD...: CMD in the background, its output in $tmp/NAME.log;
# sets pid.
start() {
	local name=$1
	shift
	"$@" >"$tmp/$name.log" 2>&1 &
	pid=$!
	pids="$pids $pid"
}

stop() {
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}

# ----------------------------------------------------------------- nginx
# SSI on a page without directives: the same bytes, chunked (the length
# is not known before the filter has run).
nginx_conf() {
	local d=$tmp/nginx
	cat <<-EOF
		worker_processes 1;
		daemon off;
		master_process off;
		pid $d/nginx.pid;
		lock_file $d/nginx.lock;
		error_log $d/error.log notice;
		events { worker_connections 64; }
		http {
		    access_log off;
		    client_body_temp_path $d/body;
		    proxy_temp_path $d/proxy;
		    fastcgi_temp_path $d/fastcgi;
		    uwsgi_temp_path $d/uwsgi;
		    scgi_temp_path $d/scgi;
		    root $tmp/www;
		    ssl_certificate $c/leaf.crt;
		    ssl_certificate_key $c/leaf.key;
		    server {
		        listen 127.0.0.1:$hp;
		        listen 127.0.0.1:$sp ssl http2;
		        location = /fixed { try_files /fixed.txt =404; }
		        location = /chunked { ssi on; ssi_types *; try_files /page.html =404; }
		    }
		}
	EOF
}

if [ -x /usr/sbin/nginx ]; then
	mkdir -p "$tmp/nginx"
	hp=$(free_port) && sp=$(free_port)
	nginx_conf > "$tmp/nginx/nginx.conf"
	start nginx /usr/sbin/nginx -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf"
	if wait_listening "$hp" "$pid" && wait_listening "$sp" "$pid"; then
		check_peer nginx "$hp" "$sp"
	else
		fail "nginx starts"; sed 's/^/    /' "$tmp/nginx.log" "$tmp/nginx/error.log" 2>/dev/null
	fi
	stop
else
	missing "the nginx peer" "/usr/sbin/nginx (Debian: nginx)"
fi

# ------------------------------------------------------------------- h2o
# The chunked body from a mruby handler whose body is no Array (an Array
# gets a Content-Length); as root, h2o would switch to nobody: it stays.
h2o_conf() {
	[ "$(id -u)" -eq 0 ] && echo "user: root"
	cat <<-EOF
		pid-file: $tmp/h2o.pid
		error-log: $tmp/h2o-error.log
		listen:
		  host: 127.0.0.1
		  port: $hp
		listen:
		  host: 127.0.0.1
		  port: $sp
		  ssl:
		    certificate-file: $c/leaf.crt
		    key-file: $c/leaf.key
		hosts:
		  default:
		    paths:
		      /fixed:
		        file.file: $tmp/www/fixed.txt
		      /chunked:
		        mruby.handler: |
		          class Parts
		            def each
		              yield "$(cat "$tmp/www/fixed.txt")"
		            end
		          end
		          Proc.new do |env|
		            [200, {"content-type" => "text/plain"}, Parts.new]
		          end
	EOF
}

if [ -x /usr/bin/h2o ]; then
	hp=$(free_port) && sp=$(free_port)
	h2o_conf > "$tmp/h2o.conf"
	start h2o /usr/bin/h2o -c "$tmp/h2o.conf"
	if wait_listening "$hp" "$pid" && wait_listening "$sp" "$pid"; then
		check_peer h2o "$hp" "$sp"
	else
		fail "h2o starts"; sed 's/^/    /' "$tmp/h2o.log" "$tmp/h2o-error.log" 2>/dev/null
	fi
	stop
else
	missing "the h2o peer" "/usr/bin/h2o (Debian: h2o)"
fi

# -------------------------------------------------------------------- Go
# net/http: a Content-Length set by hand, and a body flushed in two parts
# (chunked). HTTP and HTTPS on two listeners of one process.
go_server() {
	cat <<-'EOF'
		package main

		import (
			"net/http"
			"os"
		)

		func main() {
			body, err := os.ReadFile(os.Args[1])
			if err != nil {
				panic(err)
			}
			http.HandleFunc("/fixed", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "1234")
				w.Write(body)
			})
			http.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
				w.Write(body[:600])
				w.(http.Flusher).Flush()
				w.Write(body[600:])
			})
			go func() { panic(http.ListenAndServe(os.Args[2], nil)) }()
			panic(http.ListenAndServeTLS(os.Args[3], os.Args[4], os.Args[5], nil))
		}
	EOF
}

if [ -x /usr/bin/go ]; then
	mkdir -p "$tmp/go"
	go_server > "$tmp/go/main.go"
	# The user's build cache if it is usable (a warm one builds in a
	# second), else one in $tmp.
	cache=$(go env GOCACHE 2>/dev/null)
	{ [ -n "$cache" ] && mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ]; } ||
		export GOCACHE=$tmp/gocache
	if (cd "$tmp/go" && timeout 120 go build -o server main.go) >"$tmp/err" 2>&1; then
		hp=$(free_port) && sp=$(free_port)
		start go "$tmp/go/server" "$tmp/www/fixed.txt" "127.0.0.1:$hp" "127.0.0.1:$sp" \
			"$c/leaf.crt" "$c/leaf.key"
		if wait_listening "$hp" "$pid" && wait_listening "$sp" "$pid"; then
			check_peer "Go net/http" "$hp" "$sp"
		else
			fail "the Go server starts"; sed 's/^/    /' "$tmp/go.log"
		fi
		stop
	else
		fail "the Go server builds"
	fi
else
	missing "the Go peer" "/usr/bin/go (Debian: golang-go)"
fi

summary
