#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-h2.sh: the HTTP/2 cost of the project's demo http-server (issue 39)
# against nginx (one worker, `http2` on) and h2o (one thread), and of its
# client (demos/http/http-load --h2) against h2load. Modes:
#   h2c      h2load -c CONNS -m STREAMS, GET /plaintext over cleartext
#            HTTP/2 by prior knowledge: server CPU ns per request, req/s,
#            and the p99 of h2load's per-request times (--log-file)
#   tls      the same over TLS (ALPN h2; a P-256 test certificate made at
#            start, TLS 1.3), CONNS handshakes included
#   client   against the demo over h2c, CLIENT_CONNS connections of
#            STREAMS streams: the load generator's own CPU ns per request
#            (utime + stime, from the shell's `times`), http-load --h2
#            beside h2load
#   pathlen  user-space instructions per request under callgrind: one h2c
#            connection, PATH_STREAMS streams at a time (h2load -c1 -m1
#            by default), SHORT then LONG requests; the difference over
#            LONG - SHORT (start-up, the connection's set-up and shut-down
#            cancelled out)
#   idle     memory per idle HTTP/2 connection: bench-idle.sh's method
#            (IDLE_CONNS connections, one request each, then held; RSS
#            growth per connection) with idle_load --mode h2
# Each run starts a fresh server pinned to SERVER_CPU on a fresh port of
# 127.0.0.1, the load pinned to LOAD_CPU; rounds are interleaved (order
# rotated) so machine drift hits every server alike; a WARMUP-second run
# comes first. Server CPU is utime + stime of all its threads from
# /proc/PID/stat across the measured run. Prints one line per run, the
# medians, the ratios against the issue's targets (server CPU <= 0.8x
# h2o's, p99 <= h2o's, client CPU <= 1.0x h2load's, idle memory <= nginx's)
# and exits non-zero if a run failed or saw errors.
#
# Environment:
#   HTTP_SERVER  demo server (default $BENCH_DIR/../demos/http/http-server)
#   HTTP_LOAD    demo client (default $BENCH_DIR/../demos/http/http-load)
#   BENCH_DIR    where idle_load is (default: this script's directory)
#   SERVERS      subset of "demo nginx h2o" (default all; a peer not
#                installed is skipped with a note)
#   MODES        subset of "h2c tls client pathlen idle" (default all)
#   ROUNDS (3)  SECS (5)  WARMUP (1)  CONNS (64)  STREAMS (16)
#   CLIENT_CONNS (4)  SHORT (1000)  LONG (11000)  PATH_STREAMS (1)
#   IDLE_CONNS (10000)
#   SERVER_CPU (0)  LOAD_CPU (1)  PORT_BASE (random in 20000-29999)
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$here/bench-lib.sh"
BENCH_DIR=${BENCH_DIR:-$here}
HTTP_SERVER=${HTTP_SERVER:-$BENCH_DIR/../demos/http/http-server}
HTTP_LOAD=${HTTP_LOAD:-$BENCH_DIR/../demos/http/http-load}
SERVERS=${SERVERS:-demo nginx h2o}
MODES=${MODES:-h2c tls client pathlen idle}
ROUNDS=${ROUNDS:-3} SECS=${SECS:-5} WARMUP=${WARMUP:-1} CONNS=${CONNS:-64}
STREAMS=${STREAMS:-16} CLIENT_CONNS=${CLIENT_CONNS:-4} SHORT=${SHORT:-1000}
LONG=${LONG:-11000} PATH_STREAMS=${PATH_STREAMS:-1} IDLE_CONNS=${IDLE_CONNS:-10000}
SERVER_CPU=${SERVER_CPU:-0} LOAD_CPU=${LOAD_CPU:-1}
PORT_BASE=${PORT_BASE:-$((20000 + RANDOM % 10000))}
STOP_WAIT=60 # tenths of a second between TERM and KILL

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-h2.XXXXXX")
srv_pid='' stop_status='' failed=0 next_port=$PORT_BASE names=() modes=()

cleanup() {
	[ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "bench-h2: $*" >&2; exit 2; }
note() { echo "bench-h2: $*" >&2; }
is_ours() { [[ $1 == demo* ]]; }

check_setup() {
	local v m n
	for v in ROUNDS SECS WARMUP CONNS STREAMS CLIENT_CONNS SHORT LONG PATH_STREAMS IDLE_CONNS SERVER_CPU \
		LOAD_CPU PORT_BASE; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, got '${!v}'"
	done
	[ "$SECS" -ge 1 ] && [ "$CONNS" -ge 1 ] && [ "$STREAMS" -ge 1 ] && [ "$LONG" -gt "$SHORT" ] ||
		die "SECS, CONNS and STREAMS must be at least 1, LONG above SHORT"
	for m in $MODES; do
		[[ " h2c tls client pathlen idle " == *" $m "* ]] ||
			die "unknown mode '$m' (h2c, tls, client, pathlen, idle)"
		modes+=("$m")
	done
	for n in $SERVERS; do
		case $n in
		demo) [ -x "$HTTP_SERVER" ] || die "not executable: $HTTP_SERVER (set HTTP_SERVER)" ;;
		nginx | h2o) command -v "$n" >/dev/null || { note "skipping $n: not found"; continue; } ;;
		*) die "unknown server '$n' (demo, nginx, h2o)" ;;
		esac
		names+=("$n")
	done
	for v in h2load curl openssl; do
		command -v "$v" >/dev/null || die "$v not found (apt-get install nghttp2-client curl openssl)"
	done
	[[ " ${modes[*]} " != *" client "* ]] || [ -x "$HTTP_LOAD" ] || die "not executable: $HTTP_LOAD"
	[[ " ${modes[*]} " != *" pathlen "* ]] || command -v valgrind >/dev/null ||
		die "pathlen needs valgrind (apt-get install valgrind)"
	ulimit -n "$(ulimit -Hn)" 2>/dev/null
	make_files
	check_pinning
}

# The test certificate, h2o's document root, nginx's directory.
make_files() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 30 -subj /CN=localhost \
		-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" >"$tmp/req.log" 2>&1 ||
		die "openssl req failed: $(tail -3 "$tmp/req.log")"
	mkdir -p "$tmp/root" "$tmp/nginx" && printf 'Hello, World!' >"$tmp/root/plaintext" ||
		die "cannot write to $tmp"
}

# nginx.conf for port $1, TLS if $2 is tls: one worker in the foreground.
nginx_conf() {
	local d=$tmp/nginx tls=';'
	[ "$2" = tls ] && tls=" ssl; ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem;"
	cat >"$d/nginx-$1.conf" <<-EOF
		daemon off;
		master_process off;
		worker_processes 1;
		pid $d/nginx.pid;
		error_log $d/error.log;
		events { worker_connections 4096; }
		http {
		  access_log off;
		  keepalive_requests 1000000;
		  keepalive_timeout 300s;
		  http2_max_requests 100000000;
		  client_body_temp_path $d/body;
		  proxy_temp_path $d/proxy;
		  fastcgi_temp_path $d/fastcgi;
		  uwsgi_temp_path $d/uwsgi;
		  scgi_temp_path $d/scgi;
		  server {
		    listen 127.0.0.1:$1 http2$tls
		    location /plaintext { default_type text/plain; return 200 "Hello, World!"; }
		  }
		}
	EOF
	echo "$d/nginx-$1.conf"
}

# h2o.conf for port $1, TLS if $2 is tls: one thread, /plaintext a file,
# no OCSP fetcher. Started by root, h2o would become nobody, who cannot
# read the private temp dir: it stays root.
h2o_conf() {
	local f=$tmp/h2o-$1.conf
	: >"$f"
	[ "$(id -u)" -eq 0 ] && echo "user: root" >"$f"
	cat >>"$f" <<-EOF
		num-threads: 1
		http2-idle-timeout: 300
		access-log: /dev/null
		error-log: $tmp/h2o-error.log
		listen:
		  port: $1
		  host: 127.0.0.1
	EOF
	[ "$2" = tls ] && cat >>"$f" <<-EOF
		  ssl:
		    certificate-file: $tmp/cert.pem
		    key-file: $tmp/key.pem
		    ocsp-update-interval: 0
	EOF
	cat >>"$f" <<-EOF
		hosts:
		  default:
		    paths:
		      /plaintext:
		        file.file: $tmp/root/plaintext
	EOF
	echo "$f"
}

# Sets cmd: server $1's command line on port $2 (TLS if $3 is tls).
server_argv() {
	local tls=()
	[ "$3" = tls ] && tls=(--tls-cert "$tmp/cert.pem" --tls-key "$tmp/key.pem")
	case $1 in
	demo) cmd=("$HTTP_SERVER" --port "$2" --host 127.0.0.1 --cores 1 --idle-timeout 300000 "${tls[@]}") ;;
	nginx) cmd=(nginx -p "$tmp/nginx" -e "$tmp/nginx/error.log" -c "$(nginx_conf "$2" "$3")") ;;
	h2o) cmd=(h2o -c "$(h2o_conf "$2" "$3")") ;;
	esac
}

url_of() { # url_of h2c|tls
	if [ "$1" = tls ]; then echo "https://127.0.0.1:$port/plaintext"; else echo "http://127.0.0.1:$port/plaintext"; fi
}

# Start server $2 on a fresh port for mode $1 (sets srv_pid and port) and
# check that it answers /plaintext over HTTP/2; on failure says why.
start_server() { # start_server MODE NAME TAG
	local cmd=() got proto=--http2-prior-knowledge
	take_port
	server_argv "$2" "$port" "$1"
	"${pin_srv[@]}" "${cmd[@]}" >"$tmp/$2.log" 2>&1 &
	srv_pid=$!
	if ! wait_listening "$srv_pid" "$port"; then
		echo "$3 status=no_listener"
		tail -5 "$tmp/$2.log" | sed 's/^/  | /'
		stop_server
		return 1
	fi
	[ "$1" = tls ] && proto=--http2
	got=$(curl -s "$proto" --max-time 5 --cacert "$tmp/cert.pem" -w ' %{http_version}' "$(url_of "$1")")
	if [ "$got" != "Hello, World! 2" ]; then
		echo "$3 status=bad_response got='$got'"
		stop_server
		return 1
	fi
}

h2load_run() { # h2load_run SECONDS CONNS URL [flags...]
	"${pin_load[@]}" timeout $(($1 + 60)) h2load -t1 -c"$2" -m"$STREAMS" -D "$1" "${@:4}" "$3" 2>&1
}

# The p99 of h2load's per-request times (third column of its log, us).
p99_ms() {
	sort -n -k3,3 "$1" | awk '{ v[NR] = $3 } END {
		if (!NR) print "n/a"; else printf "%.3f", v[int(NR * 0.99 + 0.5) ? int(NR * 0.99 + 0.5) : 1] / 1000 }'
}

# Keep-alive load on the running server; prints the run's figures and
# appends "server mode rate cost p99 round" to the results.
measure_load() { # measure_load TAG NAME ROUND MODE
	local out t0 t1 n ok bad cpu rps p99
	[ "$WARMUP" -gt 0 ] && h2load_run "$WARMUP" "$CONNS" "$(url_of "$4")" >/dev/null
	t0=$(cpu_ticks "$srv_pid")
	out=$(h2load_run "$SECS" "$CONNS" "$(url_of "$4")" --log-file="$tmp/log")
	t1=$(cpu_ticks "$srv_pid")
	n=$(awk '/^requests:/ { print $8 }' <<<"$out")
	ok=$(awk '/^status codes:/ { print $3 }' <<<"$out")
	bad=$(awk '/^requests:/ { print $10 + $12 + $14 }' <<<"$out")
	if [ -z "$n" ] || [ "$n" -eq 0 ] || [ -z "$t0" ] || [ -z "$t1" ]; then
		echo "$1 status=load_failed:"
		tail -8 <<<"$out" | sed 's/^/  | /'
		return 1
	fi
	cpu=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.0f", d * 1e9 / hz / n }')
	rps=$(awk -v n="$n" -v s="$SECS" 'BEGIN { printf "%.0f", n / s }')
	p99=$(p99_ms "$tmp/log")
	echo "$1 req_per_s=$rps requests=$n ok=$ok failed=$bad cpu_ns_per_req=$cpu p99_ms=$p99"
	echo "$2 $4 $rps $cpu $p99 $3" >>"$tmp/results"
	[ "$bad" -eq 0 ] && [ "${ok:-0}" -ge "$n" ] # h2load may count one status more
}

# The children's CPU ms of running "$@" (output in $1): `times` prints the
# shell's line, then its children's "Um.mmms Sm.mmms".
run_timed() {
	local out=$1
	shift
	("$@" >"$out" 2>&1; times) | awk 'NR == 2 {
		split($1, u, "m"); split($2, s, "m")
		printf "%.0f\n", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * 1000 }'
}

# One client against a fresh demo over h2c: its own CPU per request.
measure_client() { # measure_client TAG CLIENT ROUND
	local ms n bad url
	url=$(url_of h2c)
	case $2 in
	h2load) ms=$(run_timed "$tmp/out" "${pin_load[@]}" h2load -t1 -c"$CLIENT_CONNS" \
		-m"$STREAMS" -D "$SECS" "$url")
		n=$(awk '/^status codes:/ { print $3 }' "$tmp/out")
		bad=$(awk '/^requests:/ { print $10 + $12 + $14 }' "$tmp/out") ;;
	http-load) ms=$(run_timed "$tmp/out" "${pin_load[@]}" "$HTTP_LOAD" --h2 -c "$CLIENT_CONNS" \
		-m "$STREAMS" -d "$SECS" "$url")
		n=$(awk '$1 == "requests" { print $2 }' "$tmp/out")
		bad=$(awk '$1 == "errors" { print ($2 == "none") ? 0 : 1 }' "$tmp/out") ;;
	esac
	if [ -z "$n" ] || [ "$n" -eq 0 ] || [ -z "$ms" ]; then
		echo "$1 status=load_failed:"
		tail -5 "$tmp/out" | sed 's/^/  | /'
		return 1
	fi
	echo "$1 req_per_s=$((n / SECS)) requests=$n client_cpu_ms=$ms" \
		"client_cpu_ns_per_req=$((ms * 1000000 / n))"
	echo "$2 client $((n / SECS)) $((ms * 1000000 / n)) n/a $3" >>"$tmp/results"
	[ "${bad:-1}" -eq 0 ]
}

run_one() { # run_one ROUND MODE NAME
	local tag="round=$1 mode=$2 server=$3" ok=0 srv=$3
	[ "$2" = client ] && srv=demo tag="round=$1 mode=client client=$3"
	start_server "${2/client/h2c}" "$srv" "$tag" || return 1
	case $2 in
	client) measure_client "$tag" "$3" "$1" || ok=1 ;;
	*) measure_load "$tag" "$3" "$1" "$2" || ok=1 ;;
	esac
	stop_server
	stopped_clean "$tag" "$srv" || ok=1
	return $ok
}

# Sets cmd: server $1 on port $2 under callgrind (profile in $3); the
# demo's real binary behind libtool's wrapper, with its libraries' path.
valgrind_argv() { # valgrind_argv NAME PORT OUT
	local bin build env=()
	server_argv "$1" "$2" h2c
	bin=$(dirname "$HTTP_SERVER")/.libs/$(basename "$HTTP_SERVER")
	if [ "$1" = demo ] && [ -x "$bin" ]; then
		build=$(cd "$(dirname "$HTTP_SERVER")/../.." && pwd)
		env=(env "LD_LIBRARY_PATH=$build/runtime/.libs:$build/tls/.libs:$build/http/.libs")
		cmd[0]=$bin
	fi
	cmd=("${env[@]}" valgrind --tool=callgrind --callgrind-out-file="$3" "${cmd[@]}")
}

# Instructions of one callgrind run of server $1 over $2 requests.
instructions() { # instructions NAME N
	local cmd=() pid rc=0 out=$tmp/cg.$1.$2.out
	take_port
	valgrind_argv "$1" "$port" "$out"
	"${cmd[@]}" >"$tmp/$1.log" 2>&1 &
	pid=$!
	for _ in $(seq 300); do listening "$port" && break; sleep 0.2; done
	h2load -c1 -m"$PATH_STREAMS" -n "$2" "http://127.0.0.1:$port/plaintext" >"$tmp/out" 2>&1 || rc=1
	grep -q "^status codes: $2 2xx" "$tmp/out" || rc=1
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[ "$rc" -eq 0 ] && awk '/^totals:/ { t += $2 } END { if (t) print t }' "$out"*
}

pathlen() {
	local n a b per
	echo "--- pathlen: user-space instructions per request, one h2c connection," \
		"h2load -c1 -m$PATH_STREAMS"
	for n in "${names[@]}"; do
		if ! a=$(instructions "$n" "$SHORT") || ! b=$(instructions "$n" "$LONG") ||
			[ -z "$a" ] || [ -z "$b" ]; then
			echo "mode=pathlen server=$n status=failed"
			tail -3 "$tmp/out" "$tmp/$n.log" | sed 's/^/  | /'
			failed=1
			continue
		fi
		per=$(((b - a) / (LONG - SHORT)))
		echo "mode=pathlen server=$n instructions_per_req=$per ($SHORT: $a, $LONG: $b)"
		echo "$n pathlen n/a $per n/a 1" >>"$tmp/results"
	done
}

idle() {
	local s=() n
	for n in "${names[@]}"; do s+=("$n-h2"); done
	echo "--- idle: bench-idle.sh with idle_load --mode h2"
	SERVERS="${s[*]}" CONNS=$IDLE_CONNS ROUNDS=$ROUNDS BENCH_DIR=$BENCH_DIR \
		HTTP_SERVER=$HTTP_SERVER bash "$here/bench-idle.sh" || failed=1
}

median() { # median NAME MODE COLUMN
	awk -v s="$1" -v m="$2" -v c="$3" '$1 == s && $2 == m && $c != "n/a" { print $c }' \
		"$tmp/results" | median_of
}

verdict() { awk -v r="$1" -v t="$2" 'BEGIN { print r == "n/a" ? "n/a" : r <= t ? "met" : "missed" }'; }

report() {
	local m n r
	echo "--- medians over $ROUNDS rounds"
	for m in h2c tls; do
		[[ " ${modes[*]} " == *" $m "* ]] || continue
		for n in "${names[@]}"; do
			echo "mode=$m server=$n req_per_s=$(median "$n" "$m" 3)" \
				"cpu_ns_per_req=$(median "$n" "$m" 4) p99_ms=$(median "$n" "$m" 5)"
		done
		for n in h2o nginx; do
			[[ " ${names[*]} " == *" demo "* && " ${names[*]} " == *" $n "* ]] || continue
			r=$(ratio "$(median demo "$m" 4)" "$(median "$n" "$m" 4)")
			echo -n "ratio=demo/$n mode=$m cpu_ns_per_req=$r"
			echo -n " paired=$(awk -v m="$m" '$2 == m { print $1, $4, $6 }' "$tmp/results" | paired demo "$n")"
			echo -n " p99=$(ratio "$(median demo "$m" 5)" "$(median "$n" "$m" 5)")"
			[ "$n" = h2o ] && echo -n " target: cpu<=0.8 $(verdict "$r" 0.8)," \
				"p99<=1.0 $(verdict "$(ratio "$(median demo "$m" 5)" "$(median h2o "$m" 5)")" 1.0)"
			echo
		done
	done
	[[ " ${modes[*]} " == *" client "* ]] || return 0
	for n in http-load h2load; do
		echo "mode=client client=$n req_per_s=$(median "$n" client 3) cpu_ns_per_req=$(median "$n" client 4)"
	done
	r=$(ratio "$(median http-load client 4)" "$(median h2load client 4)")
	echo "ratio=http-load/h2load mode=client cpu_ns_per_req=$r target: <=1.0 $(verdict "$r" 1.0)"
}

main() {
	local r i k m list
	check_setup
	hz=$(getconf CLK_TCK)
	: >"$tmp/results"
	echo "# bench-h2 rounds=$ROUNDS secs=$SECS warmup=$WARMUP conns=$CONNS streams=$STREAMS" \
		"client_conns=$CLIENT_CONNS server_cpu=$srv_cpus load_cpu=$LOAD_CPU servers=${names[*]}" \
		"modes=${modes[*]} demo=$HTTP_SERVER"
	for ((r = 1; r <= ROUNDS; r++)); do
		for m in "${modes[@]}"; do
			case $m in
			h2c | tls) list=("${names[@]}") ;;
			client) list=(http-load h2load) ;;
			*) continue ;;
			esac
			for ((i = 0; i < ${#list[@]}; i++)); do
				k=$(((i + r - 1) % ${#list[@]}))
				run_one "$r" "$m" "${list[$k]}" || failed=1
			done
		done
	done
	[[ " ${modes[*]} " == *" pathlen "* ]] && pathlen
	report
	[[ " ${modes[*]} " == *" idle "* ]] && idle
	return $failed
}

main
