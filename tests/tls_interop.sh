#!/bin/bash
# SPDX-License-Identifier: MIT
# tls_interop.sh - the TLS layer against real peers, both ways.
#
# Our servers (demos/http/http-server serving HTTPS, demos/echo/echo-server
# serving TLS) under real clients:
#  - curl, TLS 1.2 and 1.3: the certificate checked against the test CA,
#    ALPN http/1.1, the answer; 200 KB POSTed and echoed; trusting another
#    CA, curl refuses;
#  - openssl s_client, TLS 1.2 and 1.3: verified, ALPN, the answer; the
#    session saved (-sess_out) and resumed (-sess_in: "Reused"); through
#    the echo demo 48 KB back exactly, a TLS 1.3 key update asked both ways
#    mid-stream, a TLS 1.2 renegotiation refused (no_renegotiation);
#  - Python's ssl: certificate and host name checked, version, ALPN, the
#    answer ended by close_notify (ssl raises on a bare close); another
#    host name refused;
#  - Go's crypto/tls (a program written here, standard library only, built
#    with go build), TLS 1.2 and 1.3: certificate verified, version, ALPN;
#    on ONE keep-alive connection GET, 200 KB POSTed to /echo and back
#    byte-exact, GET, 1 KB POSTed, GET - records flowing after the
#    server's TLS 1.3 KeyUpdate - then a second connection resumes the
#    session; through the echo demo 200 KB back exactly;
#  - nginx as a reverse proxy (plain HTTP in front, the HTTPS demo behind
#    it: proxy_ssl_protocols TLSv1.3, proxy_ssl_verify with the test CA and
#    name, keep-alive upstream connections): curl through it, GETs and a
#    200 KB POST echoed exactly, all on one upstream TLS connection (ss
#    shows the same one); with another CA to trust, nginx refuses (502);
#  - h2o 2.2 as a reverse proxy likewise (proxy.ssl.verify-peer with the
#    test CA; its proxy has no TLS version setting: it speaks TLS 1.3 by
#    default, as a trace of openssl s_server offering 1.2 and 1.3 shows,
#    and over TLS 1.3 it checks the chain but not the host name); another
#    CA refused (502);
#  - testssl.sh on the HTTPS demo with an RSA certificate (-p -s -U -e) and
#    with an ECDSA one (-e), its JSON findings judged: only TLS 1.2 and
#    1.3; no NULL, anonymous, export, low, 3DES or CBC suite - every suite
#    accepted AEAD with ECDHE, or TLS 1.3's -; secure renegotiation only,
#    client-initiated renegotiation refused; no compression; each of its
#    vulnerability checks ran and none says VULNERABLE or potentially so;
#    nothing rated LOW or worse, no scan problem. The scans run in the
#    background while the rest goes on.
# The runtime's client (examples/tls_client) against openssl s_server -www,
# a Go crypto/tls HTTPS server, nginx and h2o, TLS 1.2 and 1.3 each (h2o
# held to TLS 1.2 by an OpenSSL configuration file), twice in a row: the
# second connection resumes the first's session, as both sides say
# (s_server's and Go's answers, nginx's and h2o's logs), also by a ticket
# alone (s_server -no_cache); against our own HTTPS demo likewise. It
# refuses a server whose certificate comes from another CA, names another
# host, or has expired - saying which - and the server gets the right
# alert; a TLS 1.3-only client refuses a TLS 1.2 server. At the end the
# demos still answer and stop cleanly (exit 0).
#
# Certificates are made here with the openssl CLI (a CA and leaves it
# signs; the expired one through "openssl ca", which takes any dates on
# OpenSSL 3.0) in a temporary directory, removed at the end with every
# process this started (trap). nginx runs as whoever runs this: one
# process (master_process off, so no user to switch to), every path in the
# temporary directory; h2o likewise (one thread; as root it is told to stay
# root); Go builds with its caches in the temporary directory. Servers take
# free ports themselves (port 0) and say which; nginx and h2o get free ones
# picked here.
#
# Without the openssl CLI nothing can run: SKIP (77). Without curl,
# python3, go, nginx, h2o, ss or testssl, their checks are skipped, saying
# so, and the whole test reports SKIP (77) unless something failed - as
# tests/gdb_fibers.sh does for gdb; ./build.sh check installs them all,
# and in CI (CI=true) a missing one is a failure.
# It asserts behaviour, not speed; the time bounds are only there so that
# a hang fails instead of hanging CI.
set -u
bound=60       # seconds for one client run
scan_bound=600 # seconds for one testssl scan
tmp=$(mktemp -d)
pids=
scan_groups= # process groups: the testssl scans

cleanup() {
	local p
	for p in $scan_groups; do kill -KILL -- "-$p" 2>/dev/null; done
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
	for p in $pids $scan_groups; do wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh" # listening PORT, the tally, missing, skip_all

pass() { echo "tls_interop: PASS: $*"; passed=$((passed + 1)); }
# fail WHAT: says so, with the last command's output ($tmp/out, $tmp/err).
fail() {
	local f
	echo "tls_interop: FAIL: $*"
	for f in "$tmp/out" "$tmp/err"; do
		[ -s "$f" ] && tail -n 30 "$f" | sed "s|^|    ${f##*/}: |"
	done
	failed=$((failed + 1))
}
check() { # check DESCRIPTION CONDITION...: pass or fail on the condition
	local what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}
# have TOOL PACKAGE WHAT: TOOL is there; else WHAT is skipped, saying so
# (a failure in CI).
have() {
	command -v "$1" >/dev/null 2>&1 && return 0
	missing "$3" "$1 (Debian: $2)"
	return 1
}
# finish: the tally, and the status: 1 if a check failed, else 77 if one
# was skipped (never a pass for what did not run), else 0.
finish() {
	[ "$passed" -gt 0 ] || fail "something was checked"
	echo "tls_interop: done in $SECONDS s"
	summary
	exit
}

# run CMD...: CMD bounded, stdin empty, stdout in $tmp/out and stderr in
# $tmp/err, its status in $rc.
run() {
	timeout -k 5 "$bound" "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
	rc=$?
}
has() { grep -q -e "$1" "$tmp/out"; }    # has REGEX: in stdout
has_err() { grep -q -e "$1" "$tmp/err"; } # has_err REGEX: in stderr
quiet() { ! [ -s "$tmp/err" ]; }         # nothing on stderr

# wait_for FILE REGEX PID: until FILE has a line matching REGEX; false if
# PID ends first or the bound passes.
wait_for() {
	local i
	for ((i = 0; i < bound * 10; i++)); do
		grep -q -e "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || { grep -q -e "$2" "$1" 2>/dev/null; return; }
		sleep 0.1
	done
	return 1
}

# start NAME PREFIX CMD...: CMD in the background, stdout and stderr in
# $tmp/NAME.log, until it prints PREFIX followed by the port it listens on
# (each server here takes a free one itself). Sets bg_pid and bg_port;
# false if it never says so.
start() {
	local name=$1 prefix=$2
	shift 2
	: >"$tmp/$name.log"
	"$@" </dev/null >"$tmp/$name.log" 2>&1 &
	bg_pid=$!
	pids="$pids $bg_pid"
	bg_port=
	wait_for "$tmp/$name.log" "${prefix}[0-9]" "$bg_pid" &&
		bg_port=$(sed -n "s/.*$prefix\([0-9]*\).*/\1/p" "$tmp/$name.log" | head -n 1)
	[ -n "$bg_port" ] || { echo "tls_interop: $name did not start:"; sed 's/^/    /' "$tmp/$name.log"; }
	[ -n "$bg_port" ]
}
# stop PID: SIGTERM, then its exit status in $rc (at most the bound, then
# it is killed).
stop() {
	local i
	kill -TERM "$1" 2>/dev/null
	for ((i = 0; i < bound * 10; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1"
	rc=$?
}

# ------------------------------------------------------------ certificates
# A CA, and leaves it signs for localhost and 127.0.0.1 (ECDSA P-256 and
# RSA 2048); another CA and a leaf of its; a leaf for another name; a leaf
# that expired in 2020 (openssl ca: -startdate and -enddate).
command -v openssl >/dev/null 2>&1 ||
	skip_all --installed "no openssl command to make certificates with (Debian: openssl)"
c=$tmp/certs
mkdir -p "$c/db"

# ca NAME: a self-signed CA, NAME.crt and NAME.key.
ca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-keyout "$c/$1.key" -out "$c/$1.crt" -subj "/CN=tls_interop $1" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign
}
# leaf NAME CA SAN [ALGORITHM OPTION]: NAME.crt and NAME.key, signed by CA,
# valid 2 days, named by SAN (its first name also the CN); ECDSA P-256
# unless ALGORITHM and its key option say otherwise.
leaf() {
	local cn=${3#DNS:}
	printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
		"$3" >"$c/$1.ext"
	openssl req -new -newkey "${4:-ec}" -pkeyopt "${5:-ec_paramgen_curve:P-256}" -nodes \
		-keyout "$c/$1.key" -out "$c/$1.csr" -subj "/CN=${cn%%,*}" &&
		openssl x509 -req -in "$c/$1.csr" -CA "$c/$2.crt" -CAkey "$c/$2.key" -CAcreateserial \
			-days 2 -extfile "$c/$1.ext" -out "$c/$1.crt"
}
# expired NAME CA: NAME.crt, for localhost, valid in January 2020 only.
expired() {
	cat >"$c/ca.cnf" <<-EOF
		[ca]
		default_ca = test
		[test]
		database = $c/db/index.txt
		new_certs_dir = $c/db
		serial = $c/db/serial
		default_md = sha256
		policy = any
		unique_subject = no
		[any]
		commonName = supplied
		[leaf]
		subjectAltName = DNS:localhost,IP:127.0.0.1
		basicConstraints = CA:FALSE
		extendedKeyUsage = serverAuth
	EOF
	: >"$c/db/index.txt"
	echo 01 >"$c/db/serial"
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$c/$1.key" -out "$c/$1.csr" -subj "/CN=localhost" &&
		openssl ca -batch -config "$c/ca.cnf" -cert "$c/$2.crt" -keyfile "$c/$2.key" \
			-in "$c/$1.csr" -out "$c/$1.crt" -extensions leaf -notext \
			-startdate 20200101000000Z -enddate 20200201000000Z
}
{
	ca ca && ca other &&
		leaf ec ca "DNS:localhost,IP:127.0.0.1" &&
		leaf rsa ca "DNS:localhost,IP:127.0.0.1" rsa rsa_keygen_bits:2048 &&
		leaf stranger other "DNS:localhost,IP:127.0.0.1" &&
		leaf wrongname ca "DNS:wrong.example" &&
		expired old ca
} >"$tmp/certs.log" 2>&1
made=$?
# Each as its CA sees it: the expired one must fail for its dates alone.
verified() { openssl verify -CAfile "$c/$2.crt" "$c/$1.crt" >>"$tmp/certs.log" 2>&1; }
certs_ok() {
	[ "$made" -eq 0 ] && verified ec ca && verified rsa ca && verified stranger other &&
		verified wrongname ca && ! verified old ca &&
		grep -q "certificate has expired" "$tmp/certs.log"
}
check "the test certificates are made (CA, ECDSA and RSA leaves, another CA's, another name's, an expired one)" \
	certs_ok
if [ "$failed" -gt 0 ]; then
	sed 's/^/    /' "$tmp/certs.log"
	finish
fi
cacert=$c/ca.crt

# ----------------------------------------------------------- our servers
client=./examples/tls_client
https_port='' echo_port=''
if start https 'listening on 127\.0\.0\.1:' ./demos/http/http-server --host 127.0.0.1 --port 0 \
	--tls-cert "$c/rsa.crt" --tls-key "$c/rsa.key"; then
	https_pid=$bg_pid https_port=$bg_port
fi
check "the HTTPS demo starts (RSA certificate)" [ -n "$https_port" ]
if start echo 'listening on 127\.0\.0\.1:' ./demos/echo/echo-server --host 127.0.0.1 --port 0 \
	--tls-cert "$c/ec.crt" --tls-key "$c/ec.key"; then
	echo_pid=$bg_pid echo_port=$bg_port
fi
check "the TLS echo demo starts (ECDSA certificate)" [ -n "$echo_port" ]

# --------------------------------------------------- testssl, started
# The scans take a while: they run in the background (a session of their
# own, so that cleanup stops all of testssl's processes) while the other
# peers' checks go on; judged at the end. One on the HTTPS demo (RSA),
# everything; one on a demo with the ECDSA certificate, its suites alone.
# scan_start NAME PORT ARGS...: testssl ARGS on 127.0.0.1:PORT as
# localhost (no DNS lookups), findings in $tmp/NAME.json.
scan_start() {
	local name=$1 port=$2
	shift 2
	printf '%s\n' "$*" >"$tmp/$name.args"
	(cd "$tmp" && exec setsid timeout -k 10 "$scan_bound" testssl --quiet --color 0 \
		--warnings off --ip 127.0.0.1 --nodns none --connect-timeout 30 --openssl-timeout 30 \
		"$@" --jsonfile "$tmp/$name.json" "https://localhost:$port") </dev/null \
		>"$tmp/$name.scan" 2>&1 &
	echo $! >"$tmp/$name.pid"
	scan_groups="$scan_groups $!"
}
scans=
if [ -n "$https_port" ] && have testssl testssl.sh "testssl.sh on the HTTPS demo" &&
	have python3 python3 "testssl.sh's findings (read with python3)"; then
	if start https-ec 'listening on 127\.0\.0\.1:' ./demos/http/http-server --host 127.0.0.1 \
		--port 0 --tls-cert "$c/ec.crt" --tls-key "$c/ec.key"; then
		https_ec_pid=$bg_pid
		scan_start RSA "$https_port" -p -s -U -e
		scan_start ECDSA "$bg_port" -e
		scans=yes
	else
		fail "the HTTPS demo starts with the ECDSA certificate"
	fi
fi

# ------------------------------------------------------------------ curl
url=https://localhost:$https_port
if [ -n "$https_port" ] && have curl curl "curl against the HTTPS demo"; then
	for v in 1.2 1.3; do
		if [ "$v" = 1.2 ]; then flags=(--tlsv1.2 --tls-max 1.2); else flags=(--tlsv1.3); fi
		run curl -sS -v --max-time "$bound" --cacert "$cacert" --http1.1 "${flags[@]}" \
			"$url/plaintext"
		check "curl ${flags[*]} --http1.1 --cacert: TLSv$v, certificate verified, ALPN http/1.1, 200, the body" \
			eval '[ "$rc" -eq 0 ] && has_err "SSL connection using TLSv$v / " &&
			has_err "SSL certificate verify ok" &&
			has_err "ALPN[:,] server accepted \(to use \)\?http/1\.1" &&
			has_err "^< HTTP/1\.1 200 OK" && [ "$(cat "$tmp/out")" = "Hello, World!" ]'
		run curl -sS -v --max-time "$bound" --cacert "$cacert" --http2 "${flags[@]}" \
			"$url/plaintext"
		check "curl ${flags[*]} --http2 --cacert: TLSv$v, ALPN h2, HTTP/2 200, the body" \
			eval '[ "$rc" -eq 0 ] && has_err "SSL connection using TLSv$v / " &&
			has_err "ALPN[:,] server accepted \(to use \)\?h2" &&
			has_err "^< HTTP/2 200" && [ "$(cat "$tmp/out")" = "Hello, World!" ]'
	done
	# Some 200 KB, many records each way.
	head -c 150000 /dev/urandom | base64 >"$tmp/body"
	run curl -sS --max-time "$bound" --cacert "$cacert" --tlsv1.3 -H 'Expect:' \
		--data-binary "@$tmp/body" "$url/echo"
	check "curl POSTs 200 KB to /echo over TLS 1.3 and gets every byte back" \
		eval '[ "$rc" -eq 0 ] && cmp -s "$tmp/body" "$tmp/out"'
	# Verification is real: trusting another CA, curl must refuse.
	run curl -sS --max-time "$bound" --cacert "$c/other.crt" "$url/plaintext"
	check "curl trusting another CA refuses the demo's certificate (exit 60)" eval '[ "$rc" -eq 60 ]'
fi

# ------------------------------------------------------- openssl s_client
# sclient ARGS...: a GET through s_client to the HTTPS demo; it reads on
# after its input ends (-ign_eof) until the server closes, so a TLS 1.3
# ticket, sent after the handshake, is in before it exits.
sclient() {
	printf 'GET /plaintext HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' |
		timeout -k 5 "$bound" openssl s_client -connect "127.0.0.1:$https_port" \
			-servername localhost -CAfile "$cacert" -verify_return_error -alpn http/1.1 \
			-ign_eof "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
}
if [ -n "$https_port" ]; then
	for v in 1.2 1.3; do
		sess=$tmp/session-$v.pem
		sclient "-tls1_${v#1.}" -sess_out "$sess"
		check "s_client -tls1_${v#1.}: a new TLSv$v session, certificate verified, ALPN http/1.1, the answer" \
			eval '[ "$rc" -eq 0 ] && has "^New, TLSv$v, Cipher is " &&
			has "Verify return code: 0 (ok)" && has "^ALPN protocol: http/1\.1$" &&
			has "^HTTP/1\.1 200 OK" && has "Hello, World!" && [ -s "$sess" ]'
		sclient "-tls1_${v#1.}" -sess_in "$sess"
		check "s_client -tls1_${v#1.} -sess_in: that session is resumed (Reused), ALPN again, the answer" \
			eval '[ "$rc" -eq 0 ] && has "^Reused, TLSv$v, Cipher is " &&
			has "^ALPN protocol: http/1\.1$" && has "^HTTP/1\.1 200 OK" && has "Hello, World!"'
	done
fi

# An s_client session with the echo demo: session ARGS... starts s_client
# in the background (spid), its input a fifo written through fd 7 (say
# LINE), stdout in $tmp/out, stderr in $tmp/err; session_end ends its input
# - which makes it close (-no_ign_eof) - and waits: its status in $rc.
# Without -nocommands, a line "K" asks s_client for a TLS 1.3 key update
# and "R" for a TLS 1.2 renegotiation.
session() {
	rm -f "$tmp/fifo"
	mkfifo "$tmp/fifo"
	: >"$tmp/out"
	: >"$tmp/err"
	timeout -k 5 "$bound" openssl s_client -connect "127.0.0.1:$echo_port" -servername localhost \
		-CAfile "$cacert" -verify_return_error -no_ign_eof "$@" \
		<"$tmp/fifo" >"$tmp/out" 2>"$tmp/err" &
	spid=$!
	pids="$pids $spid"
	exec 7>"$tmp/fifo" # meets s_client's end of it: neither open returns alone
}
say() { (printf '%s\n' "$1" >&7) 2>/dev/null; } # a subshell: s_client gone is a SIGPIPE
session_end() {
	exec 7>&-
	wait "$spid"
	rc=$?
}
# got_all FILE: until $tmp/out is as long as FILE (or s_client has ended).
got_all() {
	local want i
	want=$(stat -c %s "$1")
	for ((i = 0; i < bound * 10; i++)); do
		[ "$(stat -c %s "$tmp/out")" -ge "$want" ] && return 0
		kill -0 "$spid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
if [ -n "$echo_port" ]; then
	# TLS 1.3 key update, asked of the server too (update_requested): it
	# must answer with its own, and the echo go on under the new keys.
	session -tls1_3 -msg
	say before
	wait_for "$tmp/out" "^before$" "$spid" && say K && wait_for "$tmp/err" "^KEYUPDATE$" "$spid" &&
		say after && wait_for "$tmp/out" "^after$" "$spid"
	session_end
	check "s_client -tls1_3 asks for a key update both ways mid-stream: the echo demo answers with its own, echoes on" \
		eval '[ "$rc" -eq 0 ] && has "^>>> TLS 1\.3, Handshake \[length [0-9a-f]*\], KeyUpdate$" &&
		has "^<<< TLS 1\.3, Handshake \[length [0-9a-f]*\], KeyUpdate$" && has "^after$"'

	# TLS 1.2 renegotiation: refused (no_renegotiation), no new handshake.
	session -tls1_2 -msg
	say before
	wait_for "$tmp/out" "^before$" "$spid" && say R
	wait_for "$tmp/err" "no renegotiation" "$spid"
	session_end
	check "s_client -tls1_2 asks to renegotiate: the echo demo refuses (no_renegotiation alert), no second handshake" \
		eval 'has "^before$" && has "^<<< TLS 1\.2, Alert \[length 0002\], warning no_renegotiation$" &&
		[ "$(grep -c "^<<< TLS 1\.2, Handshake .*, ServerHello$" "$tmp/out")" -eq 1 ]'

	# 48 KB of lines, written at once (-nocommands: no line is a command).
	head -c 36000 /dev/urandom | base64 >"$tmp/message"
	for v in 1.2 1.3; do
		session -brief -nocommands "-tls1_${v#1.}"
		cat "$tmp/message" >&7
		got_all "$tmp/message"
		session_end
		check "s_client -tls1_${v#1.} through the TLS echo demo: TLSv$v, verified, 48 KB back exactly" \
			eval '[ "$rc" -eq 0 ] && has_err "^Protocol version: TLSv$v$" &&
			has_err "^Verification: OK$" && cmp -s "$tmp/message" "$tmp/out"'
	done
fi

# ------------------------------------------------------------ Python ssl
cat >"$tmp/client.py" <<'EOF'
"""An HTTPS request with Python's ssl module, trusting one CA file; prints
what the connection agreed on, then the answer's status and body (or the
body into OUT_FILE). The answer is read to the end of stream, which must
be the server's close_notify: ssl raises SSLEOFError on a bare close.
usage: client.py PORT CA_FILE 1.2|1.3 HOST_NAME METHOD PATH [IN_FILE OUT_FILE]"""
import socket
import ssl
import sys

port, cafile, version, name, method, path = sys.argv[1:7]
body = open(sys.argv[7], "rb").read() if len(sys.argv) > 7 else b""
ctx = ssl.create_default_context(cafile=cafile)  # that CA only; name checked
ctx.minimum_version = ctx.maximum_version = {
    "1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}[version]
ctx.set_alpn_protocols(["http/1.1"])
head = (f"{method} {path} HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n"
        f"Content-Length: {len(body)}\r\n\r\n").encode()
with socket.create_connection(("127.0.0.1", int(port)), timeout=30) as raw:
    with ctx.wrap_socket(raw, server_hostname=name) as tls:
        print("checks", ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname)
        print("version", tls.version())
        print("alpn", tls.selected_alpn_protocol())
        print("names", " ".join(v for _, v in tls.getpeercert()["subjectAltName"]))
        tls.sendall(head + body)
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
status, _, rest = answer.partition(b"\r\n")
content = rest.partition(b"\r\n\r\n")[2]
print("status", status.decode())
if len(sys.argv) > 8:
    open(sys.argv[8], "wb").write(content)
else:
    print("body", content.decode())
EOF
if [ -n "$https_port" ] && have python3 python3 "Python's ssl client against the HTTPS demo"; then
	run python3 "$tmp/client.py" "$https_port" "$cacert" 1.3 localhost GET /plaintext
	check "Python ssl (TLS 1.3): certificate and name checked, TLSv1.3, ALPN http/1.1, the answer, close_notify" \
		eval '[ "$rc" -eq 0 ] && quiet && has "^checks True$" && has "^version TLSv1\.3$" &&
		has "^alpn http/1\.1$" && has "^names localhost 127\.0\.0\.1$" &&
		has "^status HTTP/1\.1 200 OK$" && has "^body Hello, World!$"'
	head -c 20000 /dev/urandom >"$tmp/binary"
	run python3 "$tmp/client.py" "$https_port" "$cacert" 1.2 localhost POST /echo \
		"$tmp/binary" "$tmp/binary.got"
	check "Python ssl (TLS 1.2): TLSv1.2, ALPN http/1.1, 20 KB POSTed to /echo come back, close_notify" \
		eval '[ "$rc" -eq 0 ] && quiet && has "^version TLSv1\.2$" && has "^alpn http/1\.1$" &&
		has "^status HTTP/1\.1 200 OK$" && cmp -s "$tmp/binary" "$tmp/binary.got"'
	run python3 "$tmp/client.py" "$https_port" "$cacert" 1.3 wrong.example GET /plaintext
	check "Python ssl refuses the demo's certificate for another host name" \
		eval '[ "$rc" -ne 0 ] && has_err "CERTIFICATE_VERIFY_FAILED" && has_err "Hostname mismatch"'
fi

# -------------------------------------------------------------------- Go
# 200 KB of random bytes, POSTed to /echo by Go, and through nginx and h2o.
head -c 204800 /dev/urandom >"$tmp/post"
cat >"$tmp/peer.go" <<'EOF'
// A peer in Go's crypto/tls, standard library only.
//
// client PORT CA_FILE 1.2|1.3 BODY_FILE: one connection to 127.0.0.1:PORT
// for "localhost", the certificate checked against CA_FILE, that TLS
// version only, ALPN http/1.1 offered; on it, one after another, GET
// /plaintext, POST /echo with BODY_FILE, GET /plaintext, POST /echo with
// its first 1000 bytes, GET /plaintext. Prints what the handshake agreed
// on and a line per answer; then a second connection, which should resume
// the first's session, and one GET on it.
//
// stream PORT CA_FILE 1.2|1.3 FILE: one connection likewise (no ALPN), FILE
// written on it while as many bytes are read back; says if they are the
// same.
//
// server 1.2|1.3 CERT_FILE KEY_FILE: HTTPS on 127.0.0.1, a free port (it
// prints "listening on 127.0.0.1:PORT"), that TLS version only; every
// request is answered "hello from Go: TLSv1.x, resumed yes|no, ALPN x".
//
// Exits 1 at the first error, saying it on stderr.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

var versions = map[string]uint16{"1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13}
var names = map[uint16]string{tls.VersionTLS12: "TLSv1.2", tls.VersionTLS13: "TLSv1.3"}

func die(err error) {
	fmt.Fprintln(os.Stderr, "go peer:", err)
	os.Exit(1)
}

func read(name string) []byte {
	b, err := os.ReadFile(name)
	if err != nil {
		die(err)
	}
	return b
}

// dial: a TLS connection to 127.0.0.1:port, its handshake done.
func dial(port string, conf *tls.Config) *tls.Conn {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp",
		"127.0.0.1:"+port, conf)
	if err != nil {
		die(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	s := c.ConnectionState()
	fmt.Printf("tls: %s, %s, ALPN %s, verified %t, resumed %t\n", names[s.Version],
		tls.CipherSuiteName(s.CipherSuite), s.NegotiatedProtocol, len(s.VerifiedChains) > 0,
		s.DidResume)
	return c
}

// config: for "localhost", verified against caFile's CA, that version only.
func config(caFile, version string) *tls.Config {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(read(caFile)) {
		die(fmt.Errorf("no certificate in %s", caFile))
	}
	return &tls.Config{RootCAs: roots, ServerName: "localhost",
		MinVersion: versions[version], MaxVersion: versions[version]}
}

// exchange: one request on the connection, its answer read whole; prints
// a line on it.
func exchange(n int, c net.Conn, br *bufio.Reader, method, path string, body []byte) {
	req, err := http.NewRequest(method, "https://localhost"+path, bytes.NewReader(body))
	if err != nil {
		die(err)
	}
	if err = req.Write(c); err != nil {
		die(fmt.Errorf("%s %s: %w", method, path, err))
	}
	res, err := http.ReadResponse(br, req)
	if err != nil {
		die(fmt.Errorf("%s %s: the answer: %w", method, path, err))
	}
	got, err := io.ReadAll(res.Body)
	if err != nil {
		die(fmt.Errorf("%s %s: the body: %w", method, path, err))
	}
	res.Body.Close()
	what := fmt.Sprintf("%q", got)
	if method == "POST" {
		what = fmt.Sprintf("%d bytes, the same as sent: %t", len(got), bytes.Equal(got, body))
	}
	fmt.Printf("answer %d: %s %s: %s, keep-alive %t, %s\n", n, method, path, res.Status,
		!res.Close, what)
}

func client(port, caFile, version, bodyFile string) {
	body := read(bodyFile)
	conf := config(caFile, version)
	conf.NextProtos = []string{"http/1.1"}
	conf.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	c := dial(port, conf)
	br := bufio.NewReader(c)
	exchange(1, c, br, "GET", "/plaintext", nil)
	exchange(2, c, br, "POST", "/echo", body)
	exchange(3, c, br, "GET", "/plaintext", nil)
	exchange(4, c, br, "POST", "/echo", body[:1000])
	exchange(5, c, br, "GET", "/plaintext", nil)
	if err := c.Close(); err != nil { // close_notify
		die(err)
	}
	c = dial(port, conf)
	exchange(6, c, bufio.NewReader(c), "GET", "/plaintext", nil)
	c.Close()
}

func stream(port, caFile, version, file string) {
	data := read(file)
	c := dial(port, config(caFile, version))
	go func() {
		if _, err := c.Write(data); err != nil {
			die(err)
		}
	}()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil {
		die(fmt.Errorf("the echo: %w", err))
	}
	fmt.Printf("echoed %d bytes, the same as sent: %t\n", len(got), bytes.Equal(got, data))
	c.Close()
}

func server(version, certFile, keyFile string) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		die(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		die(err)
	}
	fmt.Printf("listening on %s\n", l.Addr())
	srv := &http.Server{
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert},
			MinVersion: versions[version], MaxVersion: versions[version]},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			resumed := map[bool]string{true: "yes", false: "no"}[r.TLS.DidResume]
			fmt.Fprintf(w, "hello from Go: %s, resumed %s, ALPN %s\n", names[r.TLS.Version],
				resumed, r.TLS.NegotiatedProtocol)
		}),
	}
	die(srv.ServeTLS(l, "", ""))
}

func main() {
	a := os.Args
	switch {
	case len(a) == 6 && a[1] == "client" && versions[a[4]] != 0:
		client(a[2], a[3], a[4], a[5])
	case len(a) == 6 && a[1] == "stream" && versions[a[4]] != 0:
		stream(a[2], a[3], a[4], a[5])
	case len(a) == 5 && a[1] == "server" && versions[a[2]] != 0:
		server(a[2], a[3], a[4])
	default:
		die(fmt.Errorf("usage: client|stream PORT CA 1.2|1.3 FILE | server 1.2|1.3 CERT KEY"))
	}
}
EOF
# Built once, its caches here (no network: the standard library only).
goes=
if have go golang-go "Go's crypto/tls, client of our servers and server of the runtime's client"; then
	mkdir -p "$tmp/go/cache" "$tmp/go/path"
	run env GOCACHE="$tmp/go/cache" GOPATH="$tmp/go/path" GOENV=off GOPROXY=off \
		GOTOOLCHAIN=local GO111MODULE=off go build -o "$tmp/go/peer" "$tmp/peer.go"
	check "a Go program with crypto/tls builds (go build, the standard library only)" \
		eval '[ "$rc" -eq 0 ] && [ -x "$tmp/go/peer" ]'
	[ "$rc" -eq 0 ] && goes=yes
fi
if [ -n "$goes" ] && [ -n "$https_port" ]; then
	for v in 1.3 1.2; do
		run "$tmp/go/peer" client "$https_port" "$cacert" "$v" "$tmp/post"
		seen=$(sed -n '1s/^tls: \(.*\), verified .*/\1/p' "$tmp/out") # what Go saw
		check "Go crypto/tls client (TLS $v only): ${seen:-no handshake}, certificate verified; on one keep-alive connection GET, 200 KB POSTed to /echo back exact, GET, 1 KB POST, GET; then resumed" \
			eval '[ "$rc" -eq 0 ] && quiet && [ "$(grep -c "^tls: " "$tmp/out")" -eq 2 ] &&
			sed -n 1p "$tmp/out" | grep -q "^tls: TLSv$v, .*, ALPN http/1\.1, verified true, resumed false$" &&
			sed -n 7p "$tmp/out" | grep -q "^tls: TLSv$v, .*, ALPN http/1\.1, verified true, resumed true$" &&
			[ "$(grep -c "^answer [1356]: GET /plaintext: 200 OK, keep-alive true, \"Hello, World!\"$" "$tmp/out")" -eq 4 ] &&
			has "^answer 2: POST /echo: 200 OK, keep-alive true, 204800 bytes, the same as sent: true$" &&
			has "^answer 4: POST /echo: 200 OK, keep-alive true, 1000 bytes, the same as sent: true$"'
	done
fi
if [ -n "$goes" ] && [ -n "$echo_port" ]; then
	for v in 1.3 1.2; do
		run "$tmp/go/peer" stream "$echo_port" "$cacert" "$v" "$tmp/post"
		check "Go crypto/tls (TLS $v only) through the TLS echo demo: TLSv$v, verified, 200 KB back exactly" \
			eval '[ "$rc" -eq 0 ] && quiet && has "^tls: TLSv$v, .*, verified true, resumed false$" &&
			has "^echoed 204800 bytes, the same as sent: true$"'
	done
fi

# ------------------------------------------ the runtime's client: servers
# s_server NAME CERT ARGS...: openssl s_server -www (its answer says
# "New, TLSv1.3, ..." or "Reused, ...": the server's view of the session)
# with CERT's certificate, on a free port; sets bg_pid and bg_port.
s_server() {
	local name=$1 cert=$2
	shift 2
	start "$name" 'ACCEPT 127\.0\.0\.1:' openssl s_server -accept 127.0.0.1:0 -www \
		-cert "$c/$cert.crt" -key "$c/$cert.key" "$@"
}

for v in 1.2 1.3; do
	if ! s_server "s_server-$v" ec "-tls1_${v#1.}"; then
		fail "openssl s_server -tls1_${v#1.} did not start"
		continue
	fi
	run "$client" --cacert "$cacert" --twice "localhost:$bg_port" /
	check "tls_client against openssl s_server -tls1_${v#1.}: TLSv$v, then the session resumed (both sides say so)" \
		eval '[ "$rc" -eq 0 ] && quiet && has "^tls 1: TLSv$v, .*, resumed no$" &&
		has "^tls 2: TLSv$v, .*, resumed yes$" && has "^New, TLSv$v, " && has "^Reused, TLSv$v, "'
	if [ "$v" = 1.2 ]; then # and a client for TLS 1.3 only finds nothing in common
		run "$client" --cacert "$cacert" --tls13 "localhost:$bg_port" /
		check "tls_client --tls13 refuses a TLS 1.2 server: exit 1, 'protocol version (Protocol not available)'" \
			eval '[ "$rc" -eq 1 ] && ! has "^HTTP/" &&
			has_err "handshake with localhost: .*protocol version (Protocol not available)$"'
	fi
	stop "$bg_pid"
done
# TLS 1.2 resumption by a ticket alone: s_server keeps no session cache.
if s_server s_server-tickets ec -tls1_2 -no_cache; then
	run "$client" --cacert "$cacert" --twice "localhost:$bg_port" /
	check "tls_client against openssl s_server -tls1_2 -no_cache: the session resumed from its ticket alone" \
		eval '[ "$rc" -eq 0 ] && quiet && has "^tls 2: TLSv1\.2, .*, resumed yes$" &&
		has "^Reused, TLSv1\.2, "'
	stop "$bg_pid"
else
	fail "openssl s_server -tls1_2 -no_cache did not start"
fi

# refused NAME CERT WHAT WORDS ALERT: the client refuses s_server with CERT
# - exit 1, no answer, WORDS on stderr - and s_server logs ALERT from it.
refused() {
	local name=$1 what=$3 words=$4 alert=$5
	if ! s_server "$name" "$2"; then
		fail "openssl s_server with the certificate of $what did not start"
		return
	fi
	run "$client" --cacert "$cacert" "localhost:$bg_port" /
	wait_for "$tmp/$name.log" "$alert" "$bg_pid"
	check "tls_client refuses $what: exit 1, '$words', alert '$alert' sent" \
		eval '[ "$rc" -eq 1 ] && ! has "^HTTP/" && has_err "handshake with localhost: $words$" &&
		grep -q -e "$alert" "$tmp/$name.log"'
	stop "$bg_pid"
}
refused stranger stranger "a certificate from another CA" \
	"certificate verify failed: unable to get local issuer certificate (Key was rejected by service)" \
	"alert unknown ca"
refused wrongname wrongname "a certificate for another host name" \
	"certificate verify failed: hostname mismatch (Key was rejected by service)" \
	"alert bad certificate"
refused expired old "an expired certificate" \
	"certificate verify failed: certificate has expired (Key has expired)" \
	"alert certificate expired"

# A Go crypto/tls HTTPS server (net/http), TLS 1.2 only, then 1.3 only:
# its answer says what it saw (version, resumed, ALPN).
if [ -n "$goes" ]; then
	for v in 1.2 1.3; do
		if ! start "go-server-$v" 'listening on 127\.0\.0\.1:' "$tmp/go/peer" server "$v" \
			"$c/ec.crt" "$c/ec.key"; then
			fail "the Go crypto/tls server (TLS $v only) starts"
			continue
		fi
		run "$client" --cacert "$cacert" --twice "localhost:$bg_port" /
		check "tls_client against a Go crypto/tls server (TLS $v only): TLSv$v, ALPN http/1.1, then resumed (Go agrees)" \
			eval '[ "$rc" -eq 0 ] && quiet &&
			has "^tls 1: TLSv$v, .*, ALPN http/1\.1, resumed no$" &&
			has "^tls 2: TLSv$v, .*, ALPN http/1\.1, resumed yes$" &&
			has "^hello from Go: TLSv$v, resumed no, ALPN http/1\.1$" &&
			has "^hello from Go: TLSv$v, resumed yes, ALPN http/1\.1$"'
		stop "$bg_pid"
	done
fi

# The runtime's client and server together.
if [ -n "$https_port" ]; then
	run "$client" --cacert "$cacert" --twice "localhost:$https_port" /plaintext
	check "tls_client against the HTTPS demo: TLSv1.3, ALPN http/1.1, the answer, then resumed" \
		eval '[ "$rc" -eq 0 ] && quiet && [ "$(grep -c "^Hello, World!$" "$tmp/out")" -eq 2 ] &&
		has "^tls 1: TLSv1\.3, .*, ALPN http/1\.1, resumed no$" &&
		has "^tls 2: TLSv1\.3, .*, ALPN http/1\.1, resumed yes$"'
fi

# ----------------------------------------------------- reverse proxies
# nginx and h2o as TLS clients: reverse proxies, plain HTTP in front, the
# HTTPS demo behind them, curl through them.
printf 'Hello, World!' >"$tmp/hello"
# via PORT PATH [FILE]: curl GETs http://127.0.0.1:PORT/PATH (or POSTs
# FILE there); true if the answer is 200 and its body "Hello, World!" (or
# FILE's bytes exactly). A line on it in $tmp/out, curl's stderr in
# $tmp/err.
via() {
	local port=$1 path=$2 want=$tmp/hello code
	shift 2
	if [ $# -gt 0 ]; then
		want=$1
		set -- -H 'Expect:' --data-binary "@$1"
	fi
	rm -f "$tmp/got"
	code=$(curl -sS --max-time "$bound" -o "$tmp/got" -w '%{http_code}' "$@" \
		"http://127.0.0.1:$port$path" </dev/null 2>>"$tmp/err")
	if [ "$code" = 200 ] && cmp -s "$want" "$tmp/got"; then
		echo "$path: 200, $(stat -c %s "$tmp/got") bytes, right" >>"$tmp/out"
	else
		echo "$path: ${code:-no answer}, $(stat -c %s "$tmp/got" 2>/dev/null || echo 0) bytes, WRONG" \
			>>"$tmp/out"
		return 1
	fi
}
# upstream_conns PID: the local ends of PID's established TCP connections
# to the HTTPS demo (ss), a line each.
upstream_conns() {
	ss -Htnp state established "( dport = :$https_port )" 2>/dev/null |
		awk -v pid="pid=$1," 'index($0, pid) { print $3 }' | sort
}
# proxied NAME PORT PID WHAT: through NAME, a reverse proxy (process PID)
# on 127.0.0.1:PORT in front of the HTTPS demo, WHAT saying how it speaks
# to it: GET /plaintext, GET, 200 KB POSTed to /echo, GET, GET - each on a
# connection of its own to NAME, which can keep its upstream one. Checks
# the answers; and, with ss, that one upstream connection carried them
# all: the same one after the first request as after the last.
proxied() {
	local name=$1 port=$2 pid=$3 what=$4 ok=yes first last
	: >"$tmp/out"
	: >"$tmp/err"
	via "$port" /plaintext || ok=
	first=$(upstream_conns "$pid")
	via "$port" /plaintext || ok=
	via "$port" /echo "$tmp/post" || ok=
	via "$port" /plaintext || ok=
	via "$port" /plaintext || ok=
	last=$(upstream_conns "$pid")
	check "$name as a TLS client ($what) in front of the HTTPS demo: curl through it, 4 GETs answered, 200 KB POSTed to /echo back exact" \
		[ -n "$ok" ]
	if have ss iproute2 "whether $name kept its upstream TLS connection"; then
		printf 'upstream connections after the first request: %s; after the last: %s\n' \
			"$(printf '%s' "${first:-none}" | tr '\n' ' ')" \
			"$(printf '%s' "${last:-none}" | tr '\n' ' ')" >>"$tmp/out"
		check "$name kept one upstream TLS connection to the HTTPS demo for all 5 requests (ss: the same one after the first and the last)" \
			eval '[ -n "$first" ] && [ "$first" = "$last" ] && [ "$(echo "$first" | wc -l)" -eq 1 ]'
	fi
}
# refused_via PORT PATH LOG REGEX: curl GETs PATH through a proxy that
# trusts another CA: 502, and the proxy's error LOG has a line matching
# REGEX (then in $tmp/out).
refused_via() {
	local i
	run curl -sS --max-time "$bound" -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$1$2"
	for ((i = 0; i < 50; i++)); do
		grep -q -e "$4" "$3" 2>/dev/null && break
		sleep 0.1
	done
	grep -e "$4" "$3" >>"$tmp/out" 2>/dev/null
	[ "$rc" -eq 0 ] && [ "$(head -n 1 "$tmp/out")" = 502 ] && grep -q -e "$4" "$3"
}
# OpenSSL's words for a chain that does not lead to a CA trusted.
unchained='unable to \(get local issuer certificate\|verify the first certificate\)'

# ----------------------------------------------------------------- nginx
# nginx_start: nginx in the foreground, one process (no master, so no
# user to switch to: it runs as whoever runs this), everything in
# $tmp/nginx, serving "hello from nginx" with TLS 1.2 only on port p12 and
# TLS 1.3 only on p13, free ports picked here (again if taken meanwhile).
# Its access log says per request: port, protocol, reused ("r" or "."),
# ALPN. With the HTTPS demo up, it also proxies plain HTTP on port pp to
# it: TLS 1.3 only, the certificate verified against the test CA and for
# the name localhost, upstream connections kept (keepalive, HTTP/1.1, no
# Connection header passed on); under /other-ca/ trusting another CA, on
# a connection of its own (no keepalive, no session reused). Sets ng_pid,
# p12, p13, pp.
nginx_conf() {
	local d=$1
	cat <<-EOF
		worker_processes 1;
		daemon off;
		master_process off;
		pid $d/nginx.pid;
		lock_file $d/nginx.lock;
		error_log $d/error.log notice;
		events { worker_connections 64; }
		http {
		    default_type text/plain;
		    log_format tls '\$server_port \$ssl_protocol \$ssl_session_reused \$ssl_alpn_protocol';
		    access_log $d/access.log tls;
		    client_body_temp_path $d/body;
		    proxy_temp_path $d/proxy;
		    fastcgi_temp_path $d/fastcgi;
		    uwsgi_temp_path $d/uwsgi;
		    scgi_temp_path $d/scgi;
		    ssl_certificate $c/ec.crt;
		    ssl_certificate_key $c/ec.key;
		    server {
		        listen 127.0.0.1:$p12 ssl;
		        ssl_protocols TLSv1.2;
		        location / { return 200 "hello from nginx\n"; }
		    }
		    server {
		        listen 127.0.0.1:$p13 ssl;
		        ssl_protocols TLSv1.3;
		        location / { return 200 "hello from nginx\n"; }
		    }
	EOF
	[ -n "$https_port" ] && cat <<-EOF
		    upstream demo {
		        server 127.0.0.1:$https_port;
		        keepalive 4;
		    }
		    server {
		        listen 127.0.0.1:$pp;
		        client_max_body_size 1m;
		        proxy_http_version 1.1;
		        proxy_set_header Connection "";
		        proxy_ssl_protocols TLSv1.3;
		        proxy_ssl_verify on;
		        proxy_ssl_trusted_certificate $cacert;
		        proxy_ssl_name localhost;
		        proxy_ssl_server_name on;
		        location / { proxy_pass https://demo; }
		        location /other-ca/ {
		            proxy_pass https://127.0.0.1:$https_port/;
		            proxy_ssl_trusted_certificate $c/other.crt;
		            proxy_ssl_session_reuse off;
		        }
		    }
	EOF
	echo "}"
}
free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 10000))
		listening "$p" || { echo "$p"; return 0; }
	done
	return 1
}
# came_up PID PORT...: until PID listens on every PORT (at most the
# bound); else PID is killed and reaped, and it returns 1.
came_up() {
	local pid=$1 i p up
	shift
	for ((i = 0; i < bound * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		up=1
		for p in "$@"; do listening "$p" || { up=; break; }; done
		[ -n "$up" ] && return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 1
}
nginx_start() {
	local d=$tmp/nginx
	mkdir -p "$d"
	for _ in 1 2 3 4 5; do
		p12=$(free_port) && p13=$(free_port) && pp=$(free_port) &&
			[ "$p12" != "$p13" ] && [ "$pp" != "$p12" ] && [ "$pp" != "$p13" ] || continue
		nginx_conf "$d" >"$d/nginx.conf"
		"$nginx" -p "$d" -c "$d/nginx.conf" -e "$d/error.log" </dev/null >"$d/out" 2>&1 &
		ng_pid=$!
		pids="$pids $ng_pid"
		came_up "$ng_pid" "$p12" "$p13" ${https_port:+"$pp"} && return 0
	done
	echo "tls_interop: nginx did not start:"
	sed 's/^/    /' "$d/out" "$d/error.log" 2>/dev/null
	return 1
}
# logged PORT N [LOG]: until nginx's access log (or LOG) has N lines for
# PORT (it writes each after its answer has gone), at most the bound.
logged() {
	local i
	for ((i = 0; i < bound * 10; i++)); do
		[ "$(grep -c "^$1 " "${3:-$tmp/nginx/access.log}" 2>/dev/null)" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
# Debian's nginx is in /usr/sbin, off a plain user's PATH.
nginx=$(PATH=$PATH:/usr/sbin:/sbin command -v nginx)
if have "${nginx:-nginx}" nginx "the runtime's client against nginx, nginx proxying to the HTTPS demo"; then
	if nginx_start; then
		for v in 1.2 1.3; do
			if [ "$v" = 1.2 ]; then port=$p12; else port=$p13; fi
			run "$client" --cacert "$cacert" --twice "localhost:$port" /
			logged "$port" 2
			check "tls_client against nginx (TLS $v only): TLSv$v, ALPN http/1.1, then resumed (nginx's log agrees)" \
				eval '[ "$rc" -eq 0 ] && quiet && [ "$(grep -c "^hello from nginx$" "$tmp/out")" -eq 2 ] &&
				has "^tls 1: TLSv$v, .*, ALPN http/1\.1, resumed no$" &&
				has "^tls 2: TLSv$v, .*, ALPN http/1\.1, resumed yes$" &&
				[ "$(grep "^$port " "$tmp/nginx/access.log")" = "$port TLSv$v . http/1.1
$port TLSv$v r http/1.1" ]'
		done
		if [ -n "$https_port" ] && have curl curl "curl through nginx to the HTTPS demo"; then
			proxied nginx "$pp" "$ng_pid" "TLS 1.3 only, the certificate verified for localhost"
			check "nginx trusting another CA refuses the HTTPS demo's certificate (502, its log: upstream SSL certificate verify error)" \
				refused_via "$pp" /other-ca/plaintext "$tmp/nginx/error.log" \
				"upstream SSL certificate verify error: ([0-9]*:$unchained)"
		fi
		stop "$ng_pid"
	else
		fail "nginx starts (as this user, in a temporary directory)"
	fi
fi

# ------------------------------------------------------------------- h2o
# h2o_conf DIR: h2o in the foreground, one thread, everything in DIR, on
# free ports picked here: plain HTTP on hp, HTTPS (the ECDSA certificate)
# on hs; its access log says per request: port, status, TLS version,
# session reused (1 or 0), protocol. It serves "hello from h2o" at /hello.
# With the HTTPS demo up it proxies / to it, the certificate checked
# against the test CA (proxy.ssl.verify-peer, proxy.ssl.cafile; h2o 2.2
# checks the host name over TLS 1.2 only - and cannot match an IP address
# - so the chain is what is checked), /other-ca/ likewise but trusting
# another CA; and /probe/ to openssl s_server (probe_port), which offers
# TLS 1.2 and 1.3 and traces the handshake: it shows which version h2o's
# proxy speaks, h2o having no setting for it. As root, h2o would switch to
# nobody: it is told to stay.
h2o_conf() {
	local d=$1
	[ "$(id -u)" -eq 0 ] && echo "user: root"
	cat <<-EOF
		pid-file: $d/h2o.pid
		error-log: $d/error.log
		num-threads: 1
		access-log:
		  path: $d/access.log
		  format: "%{local}p %s %{ssl.protocol-version}x %{ssl.session-reused}x %H"
		listen:
		  host: 127.0.0.1
		  port: $hp
		listen:
		  host: 127.0.0.1
		  port: $hs
		  ssl:
		    certificate-file: $c/ec.crt
		    key-file: $c/ec.key
		hosts:
		  default:
		    paths:
		      /hello:
		        file.file: $tmp/hello-h2o
	EOF
	[ -n "$probe_port" ] && cat <<-EOF
		      /probe/:
		        proxy.reverse.url: "https://127.0.0.1:$probe_port/"
		        proxy.ssl.verify-peer: ON
		        proxy.ssl.cafile: $cacert
	EOF
	[ -n "$https_port" ] && cat <<-EOF
		      /other-ca/:
		        proxy.reverse.url: "https://127.0.0.1:$https_port/"
		        proxy.ssl.verify-peer: ON
		        proxy.ssl.cafile: $c/other.crt
		      /:
		        proxy.reverse.url: "https://127.0.0.1:$https_port/"
		        proxy.ssl.verify-peer: ON
		        proxy.ssl.cafile: $cacert
		        proxy.timeout.keepalive: 30000
	EOF
}
# h2o_start DIR [VAR=VALUE...]: h2o as h2o_conf says, in its environment
# VAR=VALUE...; sets h2o_pid, hp and hs.
h2o_start() {
	local d=$1
	shift
	mkdir -p "$d"
	for _ in 1 2 3 4 5; do
		hp=$(free_port) && hs=$(free_port) && [ "$hp" != "$hs" ] || continue
		h2o_conf "$d" >"$d/h2o.conf"
		env "$@" "$h2o" -c "$d/h2o.conf" </dev/null >"$d/out" 2>&1 &
		h2o_pid=$!
		pids="$pids $h2o_pid"
		came_up "$h2o_pid" "$hp" "$hs" && return 0
	done
	echo "tls_interop: h2o did not start:"
	sed 's/^/    /' "$d/out" "$d/error.log" 2>/dev/null
	return 1
}
# tls_client_h2o V DIR: the runtime's client twice against h2o's HTTPS
# port, which speaks TLS V: the answers, and h2o's log agrees.
tls_client_h2o() {
	local v=$1 log=$2/access.log
	run "$client" --cacert "$cacert" --twice "localhost:$hs" /hello
	logged "$hs" 2 "$log"
	check "tls_client against h2o (TLS $v): TLSv$v, ALPN http/1.1, then resumed (h2o's log agrees)" \
		eval '[ "$rc" -eq 0 ] && quiet && [ "$(grep -c "^hello from h2o$" "$tmp/out")" -eq 2 ] &&
		has "^tls 1: TLSv$v, .*, ALPN http/1\.1, resumed no$" &&
		has "^tls 2: TLSv$v, .*, ALPN http/1\.1, resumed yes$" &&
		[ "$(grep "^$hs " "$log")" = "$hs 200 TLSv$v 0 HTTP/1.1
$hs 200 TLSv$v 1 HTTP/1.1" ]'
}
h2o=$(command -v h2o)
if have "${h2o:-h2o}" h2o "the runtime's client against h2o, h2o proxying to the HTTPS demo"; then
	echo "hello from h2o" >"$tmp/hello-h2o"
	# The probe: s_server -HTTP serves a file from its directory, the
	# answer's head included (a Content-Length: h2o 2.2 waits out its I/O
	# timeout on an answer that ends at the close); -msg traces the
	# handshake.
	printf 'HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nprobe\n' \
		>"$tmp/probe.http"
	probe_port=
	if start probe 'ACCEPT 127\.0\.0\.1:' env -C "$tmp" openssl s_server -accept 127.0.0.1:0 \
		-HTTP -msg -cert "$c/ec.crt" -key "$c/ec.key"; then
		probe_pid=$bg_pid probe_port=$bg_port
	else
		fail "openssl s_server (for h2o's proxy to speak to) did not start"
	fi
	if h2o_start "$tmp/h2o"; then
		tls_client_h2o 1.3 "$tmp/h2o"
		if have curl curl "curl through h2o"; then
			if [ -n "$probe_port" ]; then
				run curl -sS --max-time "$bound" "http://127.0.0.1:$hp/probe/probe.http"
				check "h2o's proxy (no TLS version setting in h2o 2.2) speaks TLS 1.3 to a server offering 1.2 and 1.3 (s_server -msg: ServerHello, EncryptedExtensions), the answer through it" \
					eval '[ "$rc" -eq 0 ] && [ "$(cat "$tmp/out")" = probe ] &&
					grep -q "^>>> TLS 1\.3, Handshake \[length [0-9a-f]*\], ServerHello$" "$tmp/probe.log" &&
					grep -q "^>>> TLS 1\.3, Handshake \[length [0-9a-f]*\], EncryptedExtensions$" "$tmp/probe.log"'
			fi
			if [ -n "$https_port" ]; then
				proxied h2o "$hp" "$h2o_pid" "TLS 1.3, its proxy's default: not settable in h2o 2.2; the chain verified"
				check "h2o trusting another CA refuses the HTTPS demo's certificate (502, its log: the chain does not verify)" \
					refused_via "$hp" /other-ca/plaintext "$tmp/h2o/error.log" \
					"\[lib/core/proxy\.c\] in request:.*plaintext:$unchained$"
			fi
		fi
		stop "$h2o_pid"
	else
		fail "h2o starts (as this user, in a temporary directory)"
	fi
	[ -n "$probe_port" ] && stop "$probe_pid"
	# h2o 2.2 ignores max-version: TLS 1.2 only through OpenSSL's
	# configuration (its system_default section), in h2o's environment.
	printf '%s\n' "openssl_conf = conf" "[conf]" "ssl_conf = ssl" "[ssl]" \
		"system_default = tls12" "[tls12]" "MaxProtocol = TLSv1.2" >"$tmp/tls12.cnf"
	probe_port=
	if h2o_start "$tmp/h2o-tls12" OPENSSL_CONF="$tmp/tls12.cnf"; then
		tls_client_h2o 1.2 "$tmp/h2o-tls12"
		stop "$h2o_pid"
	else
		fail "h2o starts held to TLS 1.2 (OPENSSL_CONF)"
	fi
fi

# --------------------------------------------------------------- testssl
# testssl.sh's JSON findings, judged: one line per check, "PASS<TAB>what"
# or "FAIL<TAB>what<TAB>why". Mode "full" (-p -s -f -U -e) or "ciphers"
# (-e only). The suites accepted must be AEAD with ECDHE (TLS 1.2) or TLS
# 1.3's, as runtime_tls.h promises.
cat >"$tmp/judge.py" <<'EOF'
import json
import re
import sys

path, mode, label = sys.argv[1:4]
try:
    with open(path) as f:
        findings = json.load(f)
except (OSError, ValueError) as e:
    print(f"FAIL\t{label}: its JSON findings\t{e}")
    sys.exit()
by_id = {}
for f in findings:
    by_id.setdefault(f["id"], []).append(f)


def check(ok, what, why=""):
    print(("PASS\t" if ok else "FAIL\t") + f"{label}: {what}" + ("" if ok else f"\t{why}"))


def said(what, ids, pattern):
    """A check: each id present, and each of its findings matches pattern."""
    bad = [f"{i}: {' / '.join(f['finding'] for f in by_id.get(i, [])) or '(missing)'}"
           for i in ids
           if not by_id.get(i) or not all(re.match(pattern, f["finding"]) for f in by_id[i])]
    check(not bad, what, "; ".join(bad))


GOOD = re.compile(r"TLS_(AES_(128|256)_GCM_SHA(256|384)|CHACHA20_POLY1305_SHA256)$"
                  r"|TLS_ECDHE_(RSA|ECDSA)_WITH_(AES_(128|256)_GCM_SHA(256|384)"
                  r"|CHACHA20_POLY1305_SHA256)$")
suites = [f["finding"].split()[-1] for f in findings if f["id"].startswith("cipher_x")]
bad = [s for s in suites if not GOOD.match(s)]
check(bad == [] and any(s.startswith("TLS_ECDHE_") for s in suites) and
      any(not s.startswith("TLS_ECDHE_") for s in suites),
      f"every suite accepted is AEAD with forward secrecy, TLS 1.2's and 1.3's ({len(suites)})",
      "accepted: " + " ".join(suites))
# About the scanner's machine, not the server: its openssl lacks the GOST
# engine (OpenSSL 3 without the engine configuration says so).
SCANNER_ONLY = {"engine_problem"}
worse = [f"{f['id']} {f['severity']}: {f['finding']}" for f in findings
         if f["severity"] not in ("OK", "INFO") and f["id"] not in SCANNER_ONLY]
check(worse == [], "nothing rated LOW or worse, no scan problem (WARN, FATAL)", "; ".join(worse))
if mode == "ciphers":
    sys.exit()
said("SSLv2, SSLv3, TLS 1.0, TLS 1.1 not offered", ["SSLv2", "SSLv3", "TLS1", "TLS1_1"],
     "not offered")
said("TLS 1.2 and TLS 1.3 offered", ["TLS1_2", "TLS1_3"], "offered")
said("no NULL, anonymous, export, low (DES, RC2, RC4), 3DES or IDEA suite",
     ["cipherlist_NULL", "cipherlist_aNULL", "cipherlist_EXPORT", "cipherlist_LOW",
      "cipherlist_3DES_IDEA"], "not offered")
said("no CBC suite (obsolete CBC ciphers)", ["cipherlist_AVERAGE"], "not offered")
said("secure renegotiation (RFC 5746) only", ["secure_renego"], "supported")
said("client-initiated renegotiation refused", ["secure_client_renego"], "not vulnerable")
said("no TLS compression (CRIME)", ["CRIME_TLS"], "not vulnerable")
vulns = ["heartbleed", "CCS", "ticketbleed", "ROBOT", "secure_client_renego", "CRIME_TLS",
         "BREACH", "POODLE_SSL", "fallback_SCSV", "SWEET32", "FREAK", "DROWN", "LOGJAM",
         "BEAST", "LUCKY13", "RC4"]
missing = [i for i in vulns if i not in by_id]
flagged = [f"{f['id']}: {f['finding']}" for f in findings
           if "vulnerable" in f["finding"].lower()
           and not f["finding"].lower().startswith("not vulnerable")]
check(missing == [] and flagged == [],
      f"each of its {len(vulns)} vulnerability checks ran, none VULNERABLE or potentially",
      "; ".join(["did not run: " + " ".join(missing)] * bool(missing) + flagged))
EOF

# scan_judge NAME MODE: waits for NAME's scan, which must exit 0, and
# judges its findings.
scan_judge() {
	local name=$1 mode=$2 pid verdict what why n=0
	pid=$(cat "$tmp/$name.pid")
	wait "$pid"
	rc=$?
	cp "$tmp/$name.scan" "$tmp/out"
	: >"$tmp/err"
	check "testssl $(cat "$tmp/$name.args") on the HTTPS demo ($name certificate) completes (exit 0)" \
		[ "$rc" -eq 0 ]
	: >"$tmp/out"
	while IFS=$'\t' read -r verdict what why; do
		n=$((n + 1))
		if [ "$verdict" = PASS ]; then pass "testssl: $what"; else fail "testssl: $what${why:+: $why}"; fi
	done < <(python3 "$tmp/judge.py" "$tmp/$name.json" "$mode" "$name certificate")
	[ "$n" -gt 0 ] || fail "testssl: the findings on the $name certificate could be judged"
}
if [ -n "$scans" ]; then
	scan_judge RSA full
	scan_judge ECDSA ciphers
	stop "$https_ec_pid"
	check "the HTTPS demo with the ECDSA certificate stops cleanly after its scan (exit 0)" [ "$rc" -eq 0 ]
fi

# ------------------------------------------------------------ the end
if [ -n "$https_port" ]; then
	run "$client" --cacert "$cacert" "localhost:$https_port" /plaintext
	check "the HTTPS demo still answers after all of it" eval '[ "$rc" -eq 0 ] && has "^Hello, World!$"'
	stop "$https_pid"
	cp "$tmp/https.log" "$tmp/out"
	: >"$tmp/err"
	check "the HTTPS demo stops cleanly on SIGTERM (exit 0)" [ "$rc" -eq 0 ]
fi
if [ -n "$echo_port" ]; then
	stop "$echo_pid"
	cp "$tmp/echo.log" "$tmp/out"
	: >"$tmp/err"
	check "the TLS echo demo stops cleanly on SIGTERM (exit 0)" [ "$rc" -eq 0 ]
fi
finish
