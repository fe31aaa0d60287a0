#!/bin/bash
# SPDX-License-Identifier: MIT
# build.sh - one-command set-up for a fresh Debian 12 machine.
#
#   ./build.sh demo    install what is missing, build, run the echo demo
#   ./build.sh check   install what is missing, build and run every test
#                      suite in a plain build (on io_uring, then again on
#                      the epoll engine), an ASan+UBSan and a TSan build,
#                      run each fuzz target briefly (make fuzz, clang),
#                      then make distcheck (tarball builds, installs, passes)
#                      and the Debian packages (tests/deb_build.sh)
#   ./build.sh deb     build the Debian packages from a clean copy, lint,
#                      install, use and remove them (tests/deb_build.sh;
#                      its options: --check, --keep, --no-install, --symbols)
#
# Builds go to build/, build-asan/ and build-tsan/ (out of tree). Packages
# are installed with apt-get only when missing (as root, or through sudo).
set -euo pipefail

top=$(cd "$(dirname "$0")" && pwd)
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)} # make -j: JOBS=1 ./build.sh ... for a quiet build
packages="gcc make autoconf automake libtool pkg-config liburing-dev libssl-dev libnghttp2-dev check"
# check also runs the aarch64 context switch under qemu-user,
# tools/gdb/runtime.py in gdb (tests/gdb_fibers.sh), and hiredis and
# libcurl on libruntime-preload against redis-server and the HTTP demo
# (tests/check_preload); the man pages through groff and the exports through
# nm (tests/man_pages.sh, tests/abi.sh); TLS against curl, the openssl CLI,
# Python's ssl, nginx and testssl.sh (tests/tls_interop.sh); the HTTP
# client against nginx, h2o and Go's net/http (tests/http_client_peers.sh)
check_packages="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user curl nghttp2-client python3-h2 gdb redis-server libhiredis-dev libcurl4-openssl-dev groff-base binutils openssl python3 nginx testssl.sh h2o golang-go"
# make fuzz: clang, libFuzzer and the sanitizer runtimes (only recommended by
# clang, so not installed with --no-install-recommends), llvm-symbolizer
fuzz_packages="clang libclang-rt-dev llvm"

install_missing() { # [extra packages...]
	need=""
	for p in $packages "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need="$need $p"
	done
	[ -z "$need" ] && return 0
	echo "build.sh: installing:$need"
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || { echo "build.sh: need root (or sudo) to install:$need" >&2; exit 1; }
		sudo=sudo
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq </dev/null
	# shellcheck disable=SC2086
	$sudo apt-get install -y -qq --no-install-recommends $need </dev/null >/dev/null
}

# configure_in DIR [configure options...]
configure_in() {
	dir=$1; shift
	if [ ! -x "$top/configure" ] || [ "$top/configure.ac" -nt "$top/configure" ] ||
	   [ "$top/Makefile.am" -nt "$top/configure" ]; then
		(cd "$top" && autoreconf -fi)
	fi
	mkdir -p "$top/$dir"
	cd "$top/$dir"
	if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
		"$top/configure" --enable-werror "$@"
	fi
}

passed=0 failed=0 skipped=0 skip_reasons=""
run_checks() {
	dir=$1; shift
	configure_in "$dir" "$@"
	check_here "$dir"
}

# tally: the results of the make check just run in the current build
# directory (tests/*.trs and their logs), added to the totals (of $stage). A Check
# suite's log says "Checks: N, Failures: F, Errors: E" and "Skipped: S"
# (tests/testutil.h), a shell test's "N passed, F failed, S skipped"
# (tests/lib.sh); a test that printed neither counts once, as automake saw
# it, and one that failed without a failed check counts as a failure.
# Every skip's reason ("SKIP: ...") is kept for the summary.
tally() {
	local trs res counts
	for trs in tests/*.trs; do
		[ -e "$trs" ] || continue
		res=$(sed -n 's/^:test-result: //p' "$trs")
		counts=$(awk -v res="$res" '
			match($0, /Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+/) {
				split(substr($0, RSTART, RLENGTH), a, /[^0-9]+/)
				n = a[2]; f = a[3] + a[4]; check = found = 1
			}
			/^Skipped: [0-9]+$/ { s = $2 }
			/^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$/ {
				p = $1; f = $3; s = $5 + 0; found = 1; check = 0
			}
			END {
				if (check) p = n - f - s
				bad = res == "FAIL" || res == "ERROR"
				if (!found) { p = res == "PASS"; f = bad; s = res == "SKIP" }
				else if (bad && f == 0) f = 1
				print p + 0, f + 0, s + 0
			}' "${trs%.trs}.log")
		# shellcheck disable=SC2086 # three numbers
		set -- $counts
		passed=$((passed + $1)) failed=$((failed + $2)) skipped=$((skipped + $3))
		[ "$3" -eq 0 ] || add_skips "$stage" <"${trs%.trs}.log"
	done
}

# add_skips STAGE: the "SKIP: ..." lines of stdin, kept for the summary.
add_skips() {
	skip_reasons="$skip_reasons$(sed -n "s|^SKIP: |  [$1] |p")
"
}

# check_here STAGE [make check arguments...]: make check in the current
# build directory, tallied. The logs of an earlier run go first, so that
# only this run's are counted; a failed run prints the failed tests' logs.
check_here() {
	stage=$1; shift
	rm -f tests/*.log tests/*.trs
	make -j"$jobs" check "$@" && ok=1 || ok=0
	tally
	if [ "$ok" -ne 1 ]; then
		grep -l -E '^:test-result: (FAIL|ERROR)' tests/*.trs 2>/dev/null |
			while read -r trs; do cat "${trs%.trs}.log"; done >&2
		echo "build.sh: tests failed in $stage" >&2
		summary
		exit 1
	fi
}

# summary: the totals, and the reason of every skip.
summary() {
	[ -z "$skip_reasons" ] || printf 'build.sh: skipped:\n%s' "$skip_reasons"
	echo "checks: $passed passed, $failed failed, $skipped skipped"
}

# faults_on_epoll: the fault suite again on the epoll engine, whose fault
# points are its own (in the current directory: the fault-injection build).
faults_on_epoll() {
	RUNTIME_ENGINE=epoll check_here "fault suite on epoll" TESTS=tests/check_faults
}

# fuzz_run TARGET CORPUS RUNS [DICT]: a fuzz target of build/ for a fixed
# number of executions from its seed corpus, with fuzz/DICT (http.dict).
# libFuzzer adds what it finds to its first corpus directory: a scratch
# one, never the tree. A failing input is kept in build/fuzz-crashes/
# (./fuzz/TARGET FILE runs it again).
fuzz_run() {
	scratch=$(mktemp -d)
	if ! "./fuzz/$1" -runs="$3" -timeout=60 -dict="$top/fuzz/${4:-http.dict}" \
		-artifact_prefix="$scratch/" "$scratch" "$top/fuzz/corpus/$2" >"$scratch.log" 2>&1; then
		mkdir -p fuzz-crashes
		cp "$scratch"/crash-* "$scratch"/timeout-* "$scratch"/leak-* fuzz-crashes/ 2>/dev/null || true
		grep -a 'Seed:' "$scratch.log" >&2 || true
		tail -n 60 "$scratch.log" >&2
		rm -rf "$scratch" "$scratch.log"
		echo "build.sh: $1 failed; its input is in build/fuzz-crashes/" >&2
		exit 1
	fi
	echo "build.sh: $1: $(grep -a '^Done' "$scratch.log")"
	rm -rf "$scratch" "$scratch.log"
}

fuzz_short() {
	(cd "$top/build" && make -j"$jobs" fuzz >/dev/null) ||
		{ echo "build.sh: make fuzz failed" >&2; exit 1; }
	cd "$top/build"
	fuzz_run fuzz_http_parser http 200000
	fuzz_run fuzz_http_response http_response 200000 http_response.dict
	fuzz_run fuzz_http_server server 30000
	# A TLS handshake per input: a few hundred a second.
	fuzz_run fuzz_https_server https 6000 https.dict
}

case "${1:-}" in
demo)
	install_missing
	configure_in build
	make -j"$jobs"
	echo "build.sh: echo server on port ${PORT:-7000}; try: nc 127.0.0.1 ${PORT:-7000}" \
		"(Debian's netcat-openbsd), or README's first program (Ctrl-C stops it)"
	exec ./demos/echo/echo-server --port "${PORT:-7000}"
	;;
check)
	# shellcheck disable=SC2086 # a list of words
	install_missing $check_packages $fuzz_packages
	run_checks build
	# Every suite again on the epoll engine, which runs where io_uring is
	# refused (a seccomp filter, kernel.io_uring_disabled).
	RUNTIME_ENGINE=epoll check_here "build (epoll engine)"
	run_checks build-asan --enable-sanitizers --enable-debug --enable-fault-injection
	faults_on_epoll
	run_checks build-tsan --enable-tsan
	fuzz_short
	(cd "$top/build" && make -j"$jobs" distcheck >/dev/null) ||
		{ echo "build.sh: make distcheck failed" >&2; exit 1; }
	deb_rc=0
	deb_out=$("$top/tests/deb_build.sh" 2>&1) || deb_rc=$?
	if [ "$deb_rc" -ne 0 ] && [ "$deb_rc" -ne 77 ]; then # 77: something skipped
		echo "$deb_out" | tail -n 60 >&2
		echo "build.sh: the Debian packages failed" >&2
		exit 1
	fi
	deb_counts=$(echo "$deb_out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' | tail -1)
	# shellcheck disable=SC2086 # three numbers
	set -- ${deb_counts:-0 1 0}
	passed=$((passed + $1)) failed=$((failed + $2)) skipped=$((skipped + $3))
	echo "build.sh: Debian packages: $1 passed, $2 failed, $3 skipped"
	echo "$deb_out" | add_skips deb
	echo "build.sh: all test suites passed (plain on io_uring and on epoll, ASan+UBSan with the fault suite on both engines, TSan), the short fuzz runs, distcheck and the Debian packages"
	summary
	;;
deb)
	shift
	exec "$top/tests/deb_build.sh" "$@"
	;;
*)
	echo "usage: $0 demo|check|deb" >&2
	exit 2
	;;
esac
