# SPDX-License-Identifier: MIT
# lib.sh - sourced by the shell tests (POSIX sh and bash): a tally of
# named results that ends in the "N passed, F failed, S skipped" line
# build.sh reads, and the start and stop of a demo server on a free port.

passed=0 failed=0 skipped=0
me=$(basename "$0" .sh)

# result NAME STATUS: one named result, ok when STATUS is 0.
result() {
	if [ "$2" -eq 0 ]; then
		passed=$((passed + 1))
		echo "ok: $1"
	else
		failed=$((failed + 1))
		echo "FAIL: $1"
	fi
}

# skip NAME REASON: a check that cannot run here, said so and counted.
skip() {
	skipped=$((skipped + 1))
	echo "SKIP: $me: $1: $2"
}

# in_ci: run by CI (CI=true), where ./build.sh check installed every
# package the tests use.
in_ci() { [ "${CI:-}" = true ]; }

# missing NAME WHAT: NAME needs WHAT, which ./build.sh check installs and
# which is not here: a failure in CI, a skip elsewhere.
missing() {
	if in_ci; then
		result "$1: $2 is missing in CI, where ./build.sh check installs it" 1
	else
		skip "$1" "$2 is missing (./build.sh check installs it)"
	fi
}

# skip_all REASON: nothing of this test can run here: exit 77 (automake's
# SKIP), or in CI, if REASON is something build.sh check installs
# (skip_all --installed REASON), 1.
skip_all() {
	if [ "$1" = --installed ]; then
		shift
		if in_ci; then
			echo "FAIL: $me: $* (missing in CI, where ./build.sh check installs it)"
			echo "0 passed, 1 failed, 0 skipped"
			exit 1
		fi
	fi
	echo "SKIP: $me: $*"
	echo "0 passed, 0 failed, 1 skipped"
	exit 77
}

# pc ARGS...: pkg-config on this build tree's uninstalled runtime.pc and
# runtime-preload.pc, pointed at the source headers and built libraries.
pc() {
	PKG_CONFIG_PATH=.:preload:tls:http pkg-config --define-variable=includedir="$srcdir/include" \
		--define-variable=libdir="$PWD/runtime/.libs" "$@"
}

# exports LIB PATTERN: the functions LIB defines and exports whose names
# match PATTERN, without version suffixes; never runtime_faults_*, a
# fault-injection build's test hook and no part of the ABI.
exports() {
	nm -D --defined-only "$1" | awk -v pat="$2" \
		'$2 == "T" { sub(/@.*/, "", $3); if ($3 ~ pat && $3 !~ /^runtime_faults_/) print $3 }'
}

# summary: the tally; its status is the tests': 1 if one failed, else 77
# (automake's SKIP) if one was skipped, else 0.
summary() {
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ] || return 1
	[ "$skipped" -eq 0 ] || return 77
}

# listening PORT: something accepts on 127.0.0.1:PORT.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_listening LOG CMD [ARGS...]: runs CMD ARGS in the background with
# $port set to a port nobody listens on (below the ephemeral range; CMD,
# a function, puts it where its program wants it, and execs that), stderr
# to LOG, and sets port and pid; another port if it exits before it
# listens (a parallel test took it first); fails if it never listens. The
# wait is generous: a sanitizer build on a loaded machine starts slowly.
start_listening() {
	local log=$1 try
	shift
	for try in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 10000))
		listening "$port" && continue
		"$@" 2>"$log" &
		pid=$!
		for _ in $(seq 600); do
			listening "$port" && return 0
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		pid=
	done
	return 1
}

# start_server LOG CMD [ARGS...]: start_listening of CMD ARGS --port P.
with_port() { exec "$@" --port "$port"; }
start_server() {
	local log=$1
	shift
	start_listening "$log" with_port "$@"
}

# stop_server: SIGTERM, and the exit status (0: a clean stop).
stop_server() {
	local status=0
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" || status=$?
	pid=
	return "$status"
}

# temp_dir: $tmp, a fresh directory, removed when the test exits, and
# $pid (a server start_listening started, if still set) killed then.
temp_dir() {
	tmp=$(mktemp -d) || exit 1
	pid=
	trap temp_dir_cleanup EXIT
}
temp_dir_cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}

# cpu_ticks PID: user + system time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# test_certs DIR CA_NAME: with the openssl CLI, a CA (DIR/ca.crt, ca.key)
# and a leaf for localhost and 127.0.0.1 signed by it (DIR/leaf.crt,
# leaf.key), ECDSA P-256, valid 2 days. Fails as openssl does.
test_certs() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=$2" -keyout "$1/ca.key" -out "$1/ca.crt" &&
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
		-keyout "$1/leaf.key" -out "$1/leaf.csr" &&
	printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$1/ext" &&
	openssl x509 -req -in "$1/leaf.csr" -CA "$1/ca.crt" -CAkey "$1/ca.key" -CAcreateserial \
		-days 2 -extfile "$1/ext" -out "$1/leaf.crt"
}
