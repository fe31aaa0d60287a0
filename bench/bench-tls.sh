#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench-tls.sh: the TLS cost of the project's demo http-server (issues 20
# and 43: an idle connection's bytes at <= 0.25x nginx's)
# against nginx (one worker), h2o (one thread) and Go's crypto/tls with
# net/http (bench/go_https.go, GOMAXPROCS=1), all on the same ECDSA P-256
# test certificate made at start, all over TLS 1.3 with X25519 and
# TLS_AES_128_GCM_SHA256 (the clients offer nothing else: tls_load sets it,
# wrk and openssl s_client get it from an OPENSSL_CONF written here; the
# s_client check printed once per server shows what was negotiated). Modes:
#   keepalive  wrk -c CONNS over https, GET /plaintext: server CPU ns per
#              request (the CONNS handshakes at wrk's start included)
#   handshake  bench/tls_load: a new connection per request (TLS 1.3 full
#              handshake, GET with Connection: close, close_notify), HS_CONNS
#              at a time: server CPU ns per handshake
#   resume     the same, each connection offering the session (ticket) of
#              the one before; fails unless at least 90 % were resumed
#   idle       IDLE_CONNS keep-alive connections, one GET each, all held
#              open (tls_load --hold, from source addresses spread over
#              127.0.0.0/8); after SETTLE seconds, the server's VmRSS growth
#              since before they opened, per connection (user space only:
#              socket buffers are the kernel's)
# Rounds are interleaved (order rotated each round) so machine drift hits
# every server alike; each run starts a fresh server pinned to SERVER_CPU on
# a fresh port of 127.0.0.1, with the load pinned to LOAD_CPU, and (but for
# idle) does one WARMUP-second run first. Server CPU is its utime+stime (all
# threads) from /proc/PID/stat across the measured run. Prints one line per
# run, medians per server and mode, the demo's ratios to nginx (of the
# medians, and paired: the median of the rounds' own ratios) against the
# issue's targets, and a summary table; exits non-zero if a run failed or saw
# errors.
#
# Environment:
#   HTTP_SERVER  demo server (default $BENCH_DIR/../demos/http/http-server)
#   BENCH_DIR    where tls_load is (default: this script's directory)
#   SERVERS      subset of "demo demo_epoll nginx h2o go" (default "demo
#                nginx h2o go"); a peer whose binary (nginx, h2o, go to
#                build go_https) is missing is skipped with a message
#   MODES        "keepalive handshake resume idle" (default all)
#   ROUNDS (3)  SECS (5)  WARMUP (1, seconds; 0: none)  CONNS (64, wrk's)
#   THREADS (1, wrk's)  HS_CONNS (4, tls_load's concurrent connections)
#   IDLE_CONNS (10000)  SETTLE (3, seconds before idle's RSS is read)
#   SERVER_CPU (0)  LOAD_CPU (1)  PORT_BASE (random in 20000-29999)
set -u

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
. "$here/bench-lib.sh"
BENCH_DIR=${BENCH_DIR:-$here}
HTTP_SERVER=${HTTP_SERVER:-$BENCH_DIR/../demos/http/http-server}
TLS_LOAD=$BENCH_DIR/tls_load
GO_SRC=$here/go_https.go
SERVERS=${SERVERS:-demo nginx h2o go}
MODES=${MODES:-keepalive handshake resume idle}
ROUNDS=${ROUNDS:-3} SECS=${SECS:-5} WARMUP=${WARMUP:-1} CONNS=${CONNS:-64}
THREADS=${THREADS:-1} HS_CONNS=${HS_CONNS:-4} IDLE_CONNS=${IDLE_CONNS:-10000}
SETTLE=${SETTLE:-3} SERVER_CPU=${SERVER_CPU:-0} LOAD_CPU=${LOAD_CPU:-1}
PORT_BASE=${PORT_BASE:-$((20000 + RANDOM % 10000))}
STOP_WAIT=60     # tenths of a second between TERM and KILL (the demo has a grace period)
HOLD_WAIT=300    # seconds the holder may take to open IDLE_CONNS connections
HOLD_THREADS=8   # the holder's connections in flight while it opens them
CIPHER=TLS_AES_128_GCM_SHA256 GROUP=X25519

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-tls.XXXXXX")
srv_pid='' hold_pid='' hold_out='' hold_line='' stop_status='' failed=0 next_port=$PORT_BASE names=() modes=()
declare -A checked=()

cleanup() {
	[ -n "$hold_pid" ] && kill -KILL "$hold_pid" 2>/dev/null
	[ -n "$srv_pid" ] && kill -KILL "$srv_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() { echo "bench-tls: $*" >&2; exit 2; }
note() { echo "bench-tls: $*" >&2; }

is_ours() { [[ $1 == demo* ]]; }

check_numbers() {
	local v
	for v in ROUNDS SECS WARMUP CONNS THREADS HS_CONNS IDLE_CONNS SETTLE SERVER_CPU LOAD_CPU \
		PORT_BASE; do
		[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, got '${!v}'"
	done
	if [ "$SECS" -lt 1 ] || [ "$CONNS" -lt 1 ] || [ "$HS_CONNS" -lt 1 ] ||
		[ "$IDLE_CONNS" -lt 1 ] || [ "$THREADS" -lt 1 ]; then
		die "SECS, CONNS, THREADS, HS_CONNS and IDLE_CONNS must be at least 1"
	fi
}

check_modes() {
	local m
	for m in $MODES; do
		case $m in
		keepalive | handshake | resume | idle) modes+=("$m") ;;
		*) die "unknown mode '$m' (keepalive, handshake, resume, idle)" ;;
		esac
	done
	[ "${#modes[@]}" -gt 0 ] || die "no mode to run"
}

# A connection is an fd, in the server and in the holder: the soft limit up
# to the hard one, inherited by both.
check_fds() {
	ulimit -n "$(ulimit -Hn)" 2>/dev/null
	[[ " ${modes[*]} " == *" idle "* ]] || return 0
	[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge $((IDLE_CONNS + 200)) ] ||
		die "IDLE_CONNS=$IDLE_CONNS needs an fd limit above $((IDLE_CONNS + 200)), the hard one is $(ulimit -Hn)"
	command -v ss >/dev/null || note "warning: no ss: idle mode cannot count the open connections"
}

check_tools() {
	local t
	for t in wrk curl openssl; do
		command -v "$t" >/dev/null || die "$t not found"
	done
	[ -x "$TLS_LOAD" ] || die "not executable: $TLS_LOAD (make bench/tls_load; set BENCH_DIR)"
	[ -x "$HTTP_SERVER" ] || die "not executable: $HTTP_SERVER (build it first; set HTTP_SERVER)"
}

# The peers' binaries; Go's is built here from bench/go_https.go.
check_servers() {
	local n
	for n in $SERVERS; do
		case $n in
		demo | demo_epoll) ;;
		nginx | h2o) command -v "$n" >/dev/null || { note "skipping $n: $n not found"; continue; } ;;
		go) build_go "$GO_SRC" go_https || continue ;;
		*) die "unknown server '$n' (demo, demo_epoll, nginx, h2o, go)" ;;
		esac
		names+=("$n")
	done
	[ "${#names[@]}" -gt 0 ] || die "no server to run"
}



# The test certificate, h2o's document, and the clients' OpenSSL settings:
# wrk and s_client cannot be told a suite or group, so OPENSSL_CONF does.
make_files() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 30 -subj /CN=localhost \
		-addext "subjectAltName=DNS:localhost,IP:127.0.0.1" >"$tmp/req.log" 2>&1 ||
		die "openssl req failed: $(tail -3 "$tmp/req.log")"
	if ! mkdir -p "$tmp/h2o-root" "$tmp/nginx" ||
		! printf 'Hello, World!' >"$tmp/h2o-root/plaintext"; then
		die "cannot write to $tmp"
	fi
	cat >"$tmp/openssl.cnf" <<-EOF
		openssl_conf = bench_tls
		[bench_tls]
		ssl_conf = bench_tls_ssl
		[bench_tls_ssl]
		system_default = bench_tls_client
		[bench_tls_client]
		MinProtocol = TLSv1.3
		Ciphersuites = $CIPHER
		Groups = $GROUP
	EOF
}

check_setup() {
	check_numbers
	check_modes
	check_fds
	check_tools
	make_files
	check_servers
	check_pinning
	max_conns=$((IDLE_CONNS + 1000))
}

# nginx.conf for port $1: one worker in the foreground, tickets (its
# default, under its own key), room for max_conns connections.
nginx_conf() {
	local d=$tmp/nginx
	cat >"$d/nginx-$1.conf" <<-EOF
		daemon off;
		master_process off;
		worker_processes 1;
		worker_rlimit_nofile $(ulimit -n);
		pid $d/nginx.pid;
		error_log $d/error.log;
		events { worker_connections $max_conns; }
		http {
		  access_log off;
		  keepalive_requests 1000000;
		  keepalive_timeout 300s;
		  client_body_temp_path $d/body;
		  proxy_temp_path $d/proxy;
		  fastcgi_temp_path $d/fastcgi;
		  uwsgi_temp_path $d/uwsgi;
		  scgi_temp_path $d/scgi;
		  server {
		    listen 127.0.0.1:$1 ssl;
		    ssl_certificate $tmp/cert.pem;
		    ssl_certificate_key $tmp/key.pem;
		    ssl_protocols TLSv1.2 TLSv1.3;
		    ssl_ecdh_curve $GROUP;
		    location /plaintext { default_type text/plain; return 200 "Hello, World!"; }
		  }
		}
	EOF
	echo "$d/nginx-$1.conf"
}

# h2o.conf for port $1: one thread, /plaintext a file, no OCSP fetcher
# (it would run now and then on the CPU measured). Started by root, h2o
# would become nobody, who cannot read the private temp dir: it stays root.
h2o_conf() {
	[ "$(id -u)" -eq 0 ] && echo "user: root" >"$tmp/h2o-$1.conf"
	cat >>"$tmp/h2o-$1.conf" <<-EOF
		num-threads: 1
		max-connections: $max_conns
		http1-request-timeout: 300
		access-log: /dev/null
		error-log: $tmp/h2o-error.log
		listen:
		  port: $1
		  host: 127.0.0.1
		  ssl:
		    certificate-file: $tmp/cert.pem
		    key-file: $tmp/key.pem
		    minimum-version: TLSv1.2
		    ocsp-update-interval: 0
		hosts:
		  default:
		    paths:
		      /plaintext:
		        file.file: $tmp/h2o-root/plaintext
	EOF
	echo "$tmp/h2o-$1.conf"
}

# Sets cmd: server $1's command line on port $2. Timeouts longer than a run
# and room for max_conns, so idle mode's connections stay.
server_argv() {
	local demo=("$HTTP_SERVER" --port "$2" --host 127.0.0.1 --tls-cert "$tmp/cert.pem"
		--tls-key "$tmp/key.pem" --max-conns "$max_conns" --idle-timeout 300000)
	case $1 in
	demo) cmd=("${demo[@]}" --engine io_uring) ;;
	demo_epoll) cmd=("${demo[@]}" --engine epoll) ;;
	nginx) cmd=(nginx -p "$tmp/nginx" -e "$tmp/nginx/error.log" -c "$(nginx_conf "$2")") ;;
	h2o) cmd=(h2o -c "$(h2o_conf "$2")") ;;
	go) cmd=(env GOMAXPROCS=1 "$tmp/go_https" "$2" "$tmp/cert.pem" "$tmp/key.pem") ;;
	esac
}

# What s_client, on the clients' settings, negotiates with the server on
# port $2 (once per server): printed, and a failure unless it is TLS 1.3
# with CIPHER and GROUP and the certificate verifies.
tls_check() { # tls_check NAME PORT
	local out proto suite group verify
	out=$(OPENSSL_CONF=$tmp/openssl.cnf timeout 10 openssl s_client -brief \
		-connect "127.0.0.1:$2" -servername localhost -CAfile "$tmp/cert.pem" \
		-verify_hostname localhost -verify_return_error </dev/null 2>&1)
	proto=$(sed -n 's/^Protocol version: //p' <<<"$out")
	suite=$(sed -n 's/^Ciphersuite: //p' <<<"$out")
	group=$(sed -n 's/^Server Temp Key: \([^,]*\).*/\1/p' <<<"$out")
	verify=$(sed -n 's/^Verification: //p' <<<"$out")
	echo "# tls server=$1 protocol=${proto:-?} cipher=${suite:-?} group=${group:-?}" \
		"verification=${verify:-?}"
	checked[$1]=1
	[ "$proto" = TLSv1.3 ] && [ "$suite" = "$CIPHER" ] && [ "$group" = "$GROUP" ] &&
		[ "$verify" = OK ]
}

# Start server $3 on a fresh port (sets srv_pid and port) and check it
# answers /plaintext over TLS; on failure says why and stops it.
start_server() { # start_server ROUND MODE NAME
	local tag="round=$1 mode=$2 server=$3" body cmd=()
	take_port
	server_argv "$3" "$port"
	"${pin_srv[@]}" "${cmd[@]}" >"$tmp/$3.log" 2>&1 &
	srv_pid=$!
	if ! wait_listening "$srv_pid" "$port"; then
		echo "$tag status=no_listener port=$port"
		sed 's/^/  | /' "$tmp/$3.log" | tail -5
		stop_server
		return 1
	fi
	body=$(curl -sf --http1.1 --max-time 5 --cacert "$tmp/cert.pem" \
		"https://127.0.0.1:$port/plaintext")
	if [ "$body" != "Hello, World!" ]; then
		echo "$tag status=bad_response body='$body'"
		stop_server
		return 1
	fi
	if [ -z "${checked[$3]:-}" ] && ! tls_check "$3" "$port"; then
		echo "$tag status=tls_mismatch"
		stop_server
		return 1
	fi
}

field() { # field KEY "k=v k=v ...": the value of KEY, or nothing
	local kv
	for kv in $2; do
		[ "${kv%%=*}" = "$1" ] && { echo "${kv#*=}"; return; }
	done
}

per_op_ns() { # per_op_ns TICKS OPS: CPU ns per operation
	awk -v d="$1" -v hz="$hz" -v n="$2" 'BEGIN { printf "%.0f", d * 1e9 / hz / n }'
}

wrk_run() { # wrk_run SECONDS
	OPENSSL_CONF=$tmp/openssl.cnf "${pin_load[@]}" timeout $(($1 + 60)) \
		wrk -t"$THREADS" -c"$CONNS" -d"$1s" "https://127.0.0.1:$port/plaintext" 2>&1
}

# Keep-alive requests; prints the run's figures, appends them to results.
measure_keepalive() { # measure_keepalive TAG NAME ROUND
	local out rc t0 t1 rps total non2xx errors cpu
	[ "$WARMUP" -gt 0 ] && wrk_run "$WARMUP" >/dev/null
	t0=$(cpu_ticks "$srv_pid")
	out=$(wrk_run "$SECS")
	rc=$?
	t1=$(cpu_ticks "$srv_pid")
	rps=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' <<<"$out")
	total=$(awk '/ requests in / { print $1 }' <<<"$out")
	non2xx=$(awk '/^ *Non-2xx/ { print $NF }' <<<"$out")
	errors=$(awk -F'[ ,]+' '/Socket errors:/ { print $5 + $7 + $9 + $11 }' <<<"$out")
	if [ "$rc" -ne 0 ] || [ -z "$rps" ] || [ "${total:-0}" -eq 0 ] || [ -z "$t0" ] ||
		[ -z "$t1" ]; then
		echo "$1 status=load_failed rc=$rc:"
		tail -8 <<<"$out" | sed 's/^/  | /'
		return 1
	fi
	cpu=$(per_op_ns $((t1 - t0)) "$total")
	echo "$1 req_per_s=$rps requests=$total non2xx=${non2xx:-0} socket_errors=${errors:-0}" \
		"cpu_ns_per_req=$cpu"
	echo "$2 keepalive $rps $cpu n/a $3" >>"$tmp/results"
	[ "${non2xx:-0}" -eq 0 ] && [ "${errors:-0}" -eq 0 ]
}

load_run() { # load_run SECONDS [--resume]
	"${pin_load[@]}" timeout $(($1 + 60)) "$TLS_LOAD" -p "$port" -c "$HS_CONNS" -d "$1" "${@:2}" 2>&1
}

# A new connection per request, full handshakes or (MODE resume) resumed.
measure_handshake() { # measure_handshake TAG NAME ROUND MODE
	local out rc t0 t1 conns resumed errors frac cpu flag=()
	[ "$4" = resume ] && flag=(--resume)
	[ "$WARMUP" -gt 0 ] && load_run "$WARMUP" "${flag[@]}" >/dev/null
	t0=$(cpu_ticks "$srv_pid")
	out=$(load_run "$SECS" "${flag[@]}")
	rc=$?
	t1=$(cpu_ticks "$srv_pid")
	conns=$(field connections "$out") resumed=$(field resumed "$out") errors=$(field errors "$out")
	if [ -z "$conns" ] || [ "$conns" -eq 0 ] || [ -z "$t0" ] || [ -z "$t1" ] ||
		[ "$(field cipher "$out")/$(field group "$out")" != "$CIPHER/$GROUP" ]; then
		echo "$1 status=load_failed rc=$rc: $out"
		return 1
	fi
	cpu=$(per_op_ns $((t1 - t0)) "$conns")
	frac=$(awk -v r="$resumed" -v n="$conns" 'BEGIN { printf "%.3f", r / n }')
	echo "$1 conn_per_s=$(field conn_per_s "$out") connections=$conns resumed=$resumed" \
		"resumed_frac=$frac errors=$errors cpu_ns_per_handshake=$cpu"
	echo "$2 $4 $(field conn_per_s "$out") $cpu $frac $3" >>"$tmp/results"
	[ "$rc" -eq 0 ] && [ "$errors" = 0 ] || return 1
	# Full handshakes are never resumed; a resuming server resumes nearly all.
	if [ "$4" = resume ] && [ $((resumed * 10)) -lt $((conns * 9)) ]; then
		echo "$1 status=not_resumed resumed=$resumed of $conns"
		return 1
	fi
	[ "$4" = resume ] || [ "$resumed" -eq 0 ]
}

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

# Server-side sockets of established connections on the port.
established() {
	command -v ss >/dev/null || { echo n/a; return; }
	ss -Htn state established "( sport = :$port )" | wc -l
}

# Start the holder and wait (HOLD_WAIT at most) until it says it holds its
# connections. Sets hold_pid, hold_out (its output: a file of its own, so
# an earlier run's line cannot be taken for its), and hold_line to what it
# said (or nothing).
start_holder() {
	local i
	hold_out=$tmp/hold-$port.out
	"${pin_load[@]}" "$TLS_LOAD" -p "$port" -c "$HOLD_THREADS" --hold "$IDLE_CONNS" \
		-d $((HOLD_WAIT + 600)) >"$hold_out" 2>&1 &
	hold_pid=$!
	for ((i = 0; i < HOLD_WAIT * 10; i++)); do
		grep -q '^held=' "$hold_out" 2>/dev/null && break
		kill -0 "$hold_pid" 2>/dev/null || break
		sleep 0.1
	done
	hold_line=$(grep '^held=' "$hold_out" 2>/dev/null)
}

stop_holder() {
	kill -TERM "$hold_pid" 2>/dev/null
	wait "$hold_pid" 2>/dev/null
	hold_pid=
}

# RSS growth per idle keep-alive connection.
measure_idle() { # measure_idle TAG NAME ROUND
	local rss0 rss1 held errors open bytes
	sleep 1
	rss0=$(rss_kb "$srv_pid")
	start_holder
	held=$(field held "$hold_line") errors=$(field errors "$hold_line")
	sleep "$SETTLE"
	rss1=$(rss_kb "$srv_pid") open=$(established)
	stop_holder
	if [ -z "$rss0" ] || [ -z "$rss1" ]; then
		echo "$1 status=server_gone rss_before_kb=${rss0:-none} rss_after_kb=${rss1:-none}"
		tail -5 "$tmp/$2.log" | sed 's/^/  | /'
		return 1
	fi
	if [ -z "$held" ]; then
		echo "$1 status=load_failed: $(tail -3 "$hold_out")"
		return 1
	fi
	bytes=$(awk -v a="$rss0" -v b="$rss1" -v n="$held" \
		'BEGIN { printf "%.0f", n ? (b - a) * 1024 / n : 0 }')
	echo "$1 conns=$IDLE_CONNS held=$held errors=$errors open=$open rss_before_kb=$rss0" \
		"rss_after_kb=$rss1 bytes_per_conn=$bytes"
	echo "$2 idle n/a $bytes n/a $3" >>"$tmp/results"
	[ "$held" -eq "$IDLE_CONNS" ] && [ "$errors" = 0 ] || return 1
	if [ "$open" != n/a ] && [ "$open" -lt "$IDLE_CONNS" ]; then
		echo "$1 status=closed_early open=$open of $IDLE_CONNS"
		return 1
	fi
}

run_one() { # run_one ROUND MODE NAME
	local tag="round=$1 mode=$2 server=$3" ok=0
	start_server "$@" || return 1
	case $2 in
	keepalive) measure_keepalive "$tag" "$3" "$1" || ok=1 ;;
	handshake | resume) measure_handshake "$tag" "$3" "$1" "$2" || ok=1 ;;
	idle) measure_idle "$tag" "$3" "$1" || ok=1 ;;
	esac
	stop_server
	stopped_clean "$tag" "$3" || ok=1
	return $ok
}

# The results file: server mode rate cost resumed_frac round.
column_by_round() { awk -v m="$1" -v c="$2" '$2 == m { print $1, $c, $6 }' "$tmp/results"; }

# Median of column $3 for server $1 in mode $2 from the results file, or n/a.
median() {
	awk -v s="$1" -v m="$2" -v c="$3" '$1 == s && $2 == m && $c != "n/a" { print $c }' \
		"$tmp/results" | median_of
}

# Per mode: the rate's and the cost's names, and the issues' targets for the
# demo's cost over nginx's.
declare -A rate_key=([keepalive]=req_per_s [handshake]=conn_per_s [resume]=conn_per_s [idle]='')
declare -A cost_key=([keepalive]=cpu_ns_per_req [handshake]=cpu_ns_per_handshake
	[resume]=cpu_ns_per_handshake [idle]=bytes_per_conn)
declare -A target=([keepalive]=0.8 [handshake]=1.0 [resume]=1.0 [idle]=0.25)

medians() {
	local m n line
	echo "--- medians over $ROUNDS rounds"
	for m in "${modes[@]}"; do
		for n in "${names[@]}"; do
			line="mode=$m server=$n"
			[ -n "${rate_key[$m]}" ] && line+=" ${rate_key[$m]}=$(median "$n" "$m" 3)"
			line+=" ${cost_key[$m]}=$(median "$n" "$m" 4)"
			[ "$m" = resume ] && line+=" resumed_frac=$(median "$n" "$m" 5)"
			echo "$line"
		done
	done
}

verdict() { # verdict RATIO TARGET: met, missed or n/a
	awk -v r="$1" -v t="$2" 'BEGIN { print r == "n/a" ? "n/a" : r <= t ? "met" : "missed" }'
}

ratios() {
	local m a p r line
	for m in "${modes[@]}"; do
		for a in demo demo_epoll; do
			for p in nginx h2o go; do
				[[ " ${names[*]} " == *" $a "* && " ${names[*]} " == *" $p "* ]] || continue
				r=$(ratio "$(median "$a" "$m" 4)" "$(median "$p" "$m" 4)")
				line="ratio=$a/$p mode=$m ${cost_key[$m]}=$r"
				line+=" paired_${cost_key[$m]}=$(column_by_round "$m" 4 | paired "$a" "$p")"
				[ -n "${rate_key[$m]}" ] &&
					line+=" ${rate_key[$m]}=$(ratio "$(median "$a" "$m" 3)" "$(median "$p" "$m" 3)")"
				[ "$p" = nginx ] && [ -n "${target[$m]:-}" ] &&
					line+=" target=<=${target[$m]} $(verdict "$r" "${target[$m]}")"
				echo "$line"
			done
		done
	done
}

table_row() { # table_row LABEL VALUE...
	printf '%-12s %10s %10s %10s %10s %10s %10s %8s %11s\n' "$@"
}

# One row per server of medians, and the demo's ratios to nginx.
table() {
	local n m cols
	echo "--- summary (medians; ka: keep-alive GET, hs: full handshake, res: resumed)"
	table_row server "ka ns/req" "ka req/s" "hs ns/hs" "hs conn/s" "res ns/hs" \
		"res conn/s" resumed "idle B/conn"
	for n in "${names[@]}"; do
		cols=()
		for m in keepalive handshake resume; do
			cols+=("$(median "$n" "$m" 4)" "$(median "$n" "$m" 3)")
		done
		table_row "$n" "${cols[@]}" "$(median "$n" resume 5)" "$(median "$n" idle 4)"
	done
	[[ " ${names[*]} " == *" demo "* && " ${names[*]} " == *" nginx "* ]] || return 0
	cols=()
	for m in keepalive handshake resume; do
		cols+=("$(ratio "$(median demo "$m" 4)" "$(median nginx "$m" 4)")"
			"$(ratio "$(median demo "$m" 3)" "$(median nginx "$m" 3)")")
	done
	table_row demo/nginx "${cols[@]}" "" "$(ratio "$(median demo idle 4)" "$(median nginx idle 4)")"
}

main() {
	local r i k m
	check_setup
	hz=$(getconf CLK_TCK)
	: >"$tmp/results"
	echo "# bench-tls rounds=$ROUNDS secs=$SECS warmup=$WARMUP conns=$CONNS wrk_threads=$THREADS" \
		"hs_conns=$HS_CONNS idle_conns=$IDLE_CONNS settle=$SETTLE server_cpu=$srv_cpus" \
		"load_cpu=$LOAD_CPU servers=${names[*]} modes=${modes[*]} demo=$HTTP_SERVER"
	echo "# clients: TLSv1.3 $CIPHER $GROUP, certificate ECDSA P-256 (CN=localhost)"
	for ((r = 1; r <= ROUNDS; r++)); do
		for m in "${modes[@]}"; do
			for ((i = 0; i < ${#names[@]}; i++)); do
				k=$(((i + r - 1) % ${#names[@]}))
				run_one "$r" "$m" "${names[$k]}" || failed=1
			done
		done
	done
	medians
	ratios
	table
	return $failed
}

main
