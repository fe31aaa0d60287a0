#!/bin/bash
# SPDX-License-Identifier: MIT
# restart.sh - the HTTP demo restarts on SIGUSR2 without losing anything
# (runtime_restart_enable):
#  - a client's keep-alive connection, idle across a restart, is answered
#    on the same socket by the successor, whose counts say it took the
#    connection over and accepted none;
#  - under http-load (64 connections, 30 s) with a restart every 2 s, no
#    request fails, none is retried, no connection errs;
#  - bad successors leave the old process serving, the reason logged: one
#    that exits at once, one never ready (killed after --ready-timeout),
#    one that says something else on the link (killed);
#  - a second SIGUSR2 during a handover starts no second successor.
# Every generation logs to the same file, which says each successor's
# pid. Skips, saying why, without python3 or curl (fails in CI).
set -u
srv=$PWD/demos/http/http-server
load=$PWD/demos/http/http-load
dir=$(mktemp -d)
pid=
cleanup() {
	# every generation of the demo started here (their args name $dir)
	pkill -KILL -f "http-server.*$dir" 2>/dev/null
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh"
for tool in curl python3; do
	command -v "$tool" >/dev/null 2>&1 || skip_all --installed "no $tool (apt-get install $tool)"
done

# alive PID: PID runs (a zombie does not: a successor is nobody's child
# to reap once its parent has exited).
alive() {
	local st
	st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	st=${st##*) }
	[ "${st%% *}" != Z ]
}

# ended PID: SIGTERM, then wait (60 s at most) until it has exited.
ended() {
	kill -TERM "$1" 2>/dev/null
	for _ in $(seq 600); do alive "$1" || return 0; sleep 0.1; done
	return 1
}

# current: the pid serving now - the last successor the log names ready
# and alive, else the first process.
current() {
	local p
	p=$(sed -n 's/^runtime: restart: successor \([0-9]*\) ready.*/\1/p' "$dir/log" | tail -1)
	echo "${p:-$pid}"
}

# restarted N: the log has named N successors ready, and every process
# before the last has exited (waits up to 60 s).
restarted() {
	local n
	for _ in $(seq 600); do
		n=$(grep -c "ready: handing over" "$dir/log")
		if [ "$n" -ge "$1" ] && [ "$(pgrep -c -f "http-server.*$dir")" -eq 1 ]; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# logged TEXT: the log has TEXT (waits up to 60 s).
logged() {
	for _ in $(seq 600); do
		grep -q "$1" "$dir/log" && return 0
		sleep 0.1
	done
	return 1
}

# A successor that never reports ready, one that says something else on
# the link, and one that takes a second.
# Each names its own path in its arguments, which is what "gone" looks for
# (pgrep -f): nothing else on the machine matches it.
printf '#!/bin/sh\nexec python3 -c "import time; time.sleep(600)" "%s"\n' "$dir/never-ready" \
	>"$dir/never-ready"
printf '#!/bin/sh\nexec python3 -c "import os, time\nos.write(int(os.environ[\x27RUNTIME_HANDOVER_FD\x27]), b\x27junk\x27)\ntime.sleep(600)" "%s"\n' "$dir/junk" >"$dir/junk"
printf '#!/bin/sh\nsleep 1\nexec "%s" "$@"\n' "$srv" >"$dir/slow"
chmod +x "$dir/never-ready" "$dir/junk" "$dir/slow"

# ----------------------------------------------- an idle connection moves

start_server "$dir/log" "$srv" --cores 2 --grace 5000 --root "$dir"
result "the demo starts" $?
[ -n "$pid" ] || { summary; exit; }
first=$pid
python3 - "$port" "$first" "$dir" >"$dir/ka" 2>&1 <<'EOF'
import os, re, signal, socket, subprocess, sys, time
port, old, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(60)
def get(path):
    s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: t\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536) or sys.exit("closed before a head")
    head, body = data.split(b"\r\n\r\n", 1)
    n = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(body) < n:
        body += s.recv(65536) or sys.exit("closed in a body")
    return head, body
print("before:", get(b"/plaintext")[1].decode())
def running(pid):                        # not exited (a zombie has)
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False
os.kill(old, signal.SIGUSR2)
for _ in range(600):
    if not running(old):
        break
    time.sleep(0.1)
print("after:", get(b"/plaintext")[1].decode())
metrics = get(b"/metrics")[1].decode()
for name in ("taken_over", "accepted"):
    m = re.search(r'runtime_server_connections_%s_total\{server="demo"\} (\d+)' % name, metrics)
    print(name, m.group(1) if m else "none")
port_here = s.getsockname()[1]
ss = subprocess.run(["ss", "-Htnp", "state", "established", "( dport = :%d )" % port_here],
                    capture_output=True, text=True).stdout
# the processes holding it (one may hold it by two fds for a moment)
print("holder:", ",".join(sorted(set(re.findall(r"pid=(\d+)", ss)))))
print("ss:", " ".join(ss.split()))
EOF
status=$? # before the message's $(...) sets it
result "the keep-alive client's script ran (it says: $(tr '\n' ' ' <"$dir/ka"))" $status
new=$(current)
[ "$new" != "$first" ] && ! kill -0 "$first" 2>/dev/null
result "SIGUSR2 started a successor ($new), and the old process ($first) exited" $?
grep -q "^after: Hello, World!" "$dir/ka"
result "the idle keep-alive connection is answered after the restart, on the same socket" $?
grep -q "^taken_over 1$" "$dir/ka" && grep -q "^accepted 0$" "$dir/ka"
result "the successor took that connection over and accepted none" $?
grep -q "^holder: $new$" "$dir/ka"
status=$? # before the message's $(...) sets it
result "the server's end of the connection is the successor's socket ($(grep '^ss:' "$dir/ka"))" $status

# ------------------------------------------------ load, a restart every 2 s

pid=$new
"$load" -c 64 -d 30 "http://127.0.0.1:$port/plaintext" >"$dir/load" 2>&1 &
lpid=$!
for i in $(seq 15); do
	sleep 2
	kill -USR2 "$(current)" 2>/dev/null
	restarted $((i + 1)) || break
done
wait "$lpid"
result "http-load ran through the restarts" $?
[ "$(grep -c "ready: handing over" "$dir/log")" -eq 16 ]
result "15 restarts under load (each successor ready)" $?
grep -q "errors    none" "$dir/load"
status=$? # before the message's $(...) sets it
result "no request failed, no connection erred: $(grep -E 'requests|errors' "$dir/load" | tr -s ' ' | tr '\n' ' ')" $status
grep -q " 0 retried" "$dir/load"
status=$? # before the message's $(...) sets it
result "no request was retried: $(grep conns "$dir/load" | tr -s ' ')" $status
answered=$(sed -n 's/^ *requests *\([0-9]*\) answered.*/\1/p' "$dir/load")
[ "${answered:-0}" -gt 0 ]
result "requests were answered ($answered)" $?
pid=$(current)

# ---------------------------------------------------------------- HTTPS

# A TLS server's socket moves too; its connections (TLS state is the old
# process's) end as at a drain, and clients reconnect to the successor.
ended "$pid"
pid=
if ! command -v openssl >/dev/null 2>&1; then
	missing "HTTPS restart" openssl
elif test_certs "$dir" restart-ca 2>/dev/null; then
	mv "$dir/log" "$dir/log.tls0"
	start_server "$dir/log" "$srv" --cores 2 --tls-cert "$dir/leaf.crt" \
		--tls-key "$dir/leaf.key" --root "$dir"
	first=$pid
	url=https://127.0.0.1:$port/plaintext
	before=$(curl -s -m 60 --cacert "$dir/ca.crt" "$url")
	kill -USR2 "$pid"
	restarted 1
	after=$(curl -s -m 60 --cacert "$dir/ca.crt" "$url")
	pid=$(current)
	[ "$before" = "Hello, World!" ] && [ "$after" = "Hello, World!" ] && [ "$pid" != "$first" ]
	result "HTTPS: the successor serves on the handed TLS socket ('$before', '$after')" $?
else
	result "test certificates made" 1
fi

# ------------------------------------------------------- bad successors

# bad_successor N TEXT LOGGED SERVES GONE FLAGS...: the demo with FLAGS
# (its successor's), then SIGUSR2: the log says TEXT (result LOGGED),
# and the old process serves on with no process matching GONE left
# (result SERVES). The log before it is kept as log.N.
bad_successor() {
	local n=$1 text=$2 logged_what=$3 serves_what=$4 gone=$5 body
	shift 5
	mv "$dir/log" "$dir/log.$n"
	start_server "$dir/log" "$srv" --cores 2 --root "$dir" "$@"
	kill -USR2 "$pid"
	logged "$text"
	result "$logged_what" $?
	body=$(curl -s -m 60 "http://127.0.0.1:$port/plaintext")
	[ "$body" = "Hello, World!" ] && kill -0 "$pid" && ! pgrep -f "$gone" >/dev/null
	result "$serves_what" $?
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null
	pid=
}

ended "$pid"
pid=
bad_successor 1 "exited before it was ready (exit status 1): serving on" \
	"a successor that exits at once is logged" "and the old process serves on" \
	"^/bin/false" --restart-with /bin/false
bad_successor 2 "was not ready in time, killed (signal 9): serving on" \
	"a successor never ready is killed after --ready-timeout, and logged" \
	"the old process serves on, and the successor is gone" "time.sleep.*$dir/never-ready" \
	--restart-with "$dir/never-ready" --ready-timeout 1000
bad_successor 3 "spoke no handover, killed (signal 9): serving on" \
	"a successor that says something else on the link is killed, and logged" \
	"the old process serves on, and that successor is gone" "junk.*$dir/junk" \
	--restart-with "$dir/junk"

mv "$dir/log" "$dir/log.4"
start_server "$dir/log" "$srv" --cores 2 --restart-with "$dir/slow" --root "$dir"
first=$pid
kill -USR2 "$pid"
sleep 0.3
kill -USR2 "$pid"
restarted 1
result "two SIGUSR2s in a row: the handover completes" $?
logged "1 requests during the restart ignored"
result "the second is logged as ignored" $?
sleep 2 # a second successor would have been ready by now
[ "$(grep -c "ready: handing over" "$dir/log")" -eq 1 ] &&
	[ "$(pgrep -c -f "http-server.*$dir")" -eq 1 ]
result "exactly one successor runs" $?
pid=$(current)
body=$(curl -s -m 60 "http://127.0.0.1:$port/plaintext")
[ "$body" = "Hello, World!" ] && [ "$pid" != "$first" ]
result "the successor serves" $?
ended "$pid"
result "the successor drains on SIGTERM and exits" $?
pid=
! grep -E "Sanitizer|runtime error" "$dir"/log*
result "no generation reported a sanitizer finding or a leak at its exit" $?
[ "$failed" -eq 0 ] || cat "$dir"/log* "$dir/load" 2>/dev/null
summary
