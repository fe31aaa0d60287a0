#!/bin/bash
# SPDX-License-Identifier: MIT
# build.sh - one-command set-up for a fresh Debian 12 machine.
#
#   ./build.sh demo    install what is missing, build, run the echo demo
#   ./build.sh check   install what is missing, build and run every test
#                      suite: a plain build (on io_uring, then again on the
#                      epoll engine), an ASan+UBSan build (on io_uring, then
#                      on epoll with the system calls it can do without
#                      pretended missing), a TSan build, a clang build (its
#                      Check suites, on io_uring, and its install), an
#                      aarch64 cross build (its Check suites under
#                      qemu-user, on epoll); then each fuzz target briefly
#                      (make fuzz, clang), make distcheck (the tarball
#                      builds at -O3 with LTO, installs, passes) and the
#                      Debian packages (tests/deb_build.sh). The last
#                      lines say how long each stage took, why each
#                      skipped test was skipped, and "checks: N passed, F
#                      failed, S skipped".
#   ./build.sh deb     build the Debian packages from a clean copy, lint,
#                      install, use and remove them (tests/deb_build.sh;
#                      its options: --check, --keep, --no-install, --symbols)
#
# Builds go to build/, build-asan/, build-tsan/, build-clang/ and
# build-arm64/ (out of tree). Packages are installed with apt-get only when
# missing (as root, or through sudo).
set -euo pipefail

top=$(cd "$(dirname "$0")" && pwd)
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)} # make -j: JOBS=1 ./build.sh ... for a quiet build
packages="gcc make autoconf automake libtool pkg-config liburing-dev libssl-dev libnghttp2-dev zlib1g-dev check"
# check also runs the aarch64 context switch under qemu-user,
# tools/gdb/runtime.py in gdb (tests/gdb_fibers.sh), and hiredis and
# libcurl on libruntime-preload against redis-server and the HTTP demo
# (tests/check_preload); the man pages through groff and the exports through
# nm (tests/man_pages.sh, tests/abi.sh); TLS against curl, the openssl CLI,
# Python's ssl, nginx and testssl.sh (tests/tls_interop.sh); the HTTP
# client against nginx, h2o and Go's net/http (tests/http_client_peers.sh);
# HTTP/2 against curl, nghttp, h2load and python3-h2's hpack
# (tests/h2_interop.sh); the demo's /metrics through promtool
# (tests/metrics_promtool.sh); the demo under systemd-socket-activate
# (tests/systemd_activate.sh); restarts, with ss showing who holds a
# moved connection and pgrep the generations (tests/restart.sh);
# WebSocket against python3-websockets and Node's ws (tests/ws_interop.sh)
check_packages="iproute2 procps gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user curl nghttp2-client python3-h2 gdb redis-server libhiredis-dev libcurl4-openssl-dev groff-base binutils openssl python3 nginx testssl.sh h2o golang-go prometheus systemd python3-websockets nodejs node-ws"
# make fuzz: clang, libFuzzer and the sanitizer runtimes (only recommended by
# clang, so not installed with --no-install-recommends), llvm-symbolizer
fuzz_packages="clang libclang-rt-dev llvm"
# The aarch64 build's libraries, Debian's multiarch :arm64 packages beside
# the host's (their libc6:arm64 is what qemu-aarch64 runs the suites on).
arm64_packages="liburing-dev:arm64 libssl-dev:arm64 libnghttp2-dev:arm64 zlib1g-dev:arm64 check:arm64 libhiredis-dev:arm64"

# as_root CMD...: CMD as root, through sudo if need be.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		echo "build.sh: need root (or sudo) for: $*" >&2
		exit 1
	fi
}

# add_arm64: dpkg takes arm64 packages too (the next apt-get update reads
# their lists).
add_arm64() {
	dpkg --print-foreign-architectures | grep -qx arm64 || as_root dpkg --add-architecture arm64
}

install_missing() { # [extra packages...]
	need=""
	for p in $packages "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need="$need $p"
	done
	[ -z "$need" ] && return 0
	echo "build.sh: installing:$need"
	export DEBIAN_FRONTEND=noninteractive
	as_root apt-get update -qq </dev/null
	# shellcheck disable=SC2086
	as_root apt-get install -y -qq --no-install-recommends $need </dev/null >/dev/null
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
	check_here "$dir" check
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

# check_here STAGE TARGET [make arguments...]: make TARGET (check,
# check-suites) in the current build directory, tallied. The logs of an
# earlier run go first, so that only this run's are counted; a failed run
# prints the failed tests' logs.
check_here() {
	stage=$1; shift
	rm -f tests/*.log tests/*.trs
	make -j"$jobs" "$@" && ok=1 || ok=0
	tally
	if [ "$ok" -ne 1 ]; then
		grep -l -E '^:test-result: (FAIL|ERROR)' tests/*.trs 2>/dev/null |
			while read -r trs; do cat "${trs%.trs}.log"; done >&2
		echo "build.sh: tests failed in $stage" >&2
		summary
		exit 1
	fi
}

# summary: how long each stage took, the reason of every skip, the totals.
summary() {
	printf 'build.sh: time per stage:\n%s  %-46s %5d s\n' "$times" total "$SECONDS"
	[ -z "$skip_reasons" ] || printf 'build.sh: skipped:\n%s' "$skip_reasons"
	echo "checks: $passed passed, $failed failed, $skipped skipped"
}

times=""
# timed NAME CMD [ARGS...]: CMD, and how long it took, kept for the summary.
timed() {
	local name=$1 t0=$SECONDS
	shift
	"$@"
	times="$times$(printf '  %-46s %5d s' "$name" $((SECONDS - t0)))
"
}

# Every suite again on the epoll engine, which runs where io_uring is
# refused (a seccomp filter, kernel.io_uring_disabled).
epoll_checks() {
	cd "$top/build"
	RUNTIME_ENGINE=epoll check_here "plain, epoll" check
}

# The ASan+UBSan build's suites on the epoll engine with the system calls
# it can do without pretended missing (runtime/fault.h), as on an older
# kernel or under qemu-user; and so the fault suite on epoll, whose fault
# points are its own (it sets its own RUNTIME_FAULTS).
missing_syscalls_checks() {
	cd "$top/build-asan"
	RUNTIME_ENGINE=epoll \
	RUNTIME_FAULTS=no_preadv2:1,no_pwritev2:1,no_epoll_pwait2:1,no_openat2:1,no_process_madvise:1 \
		check_here "ASan, epoll, syscalls missing" check-suites
}

# clang builds everything warning-free too (without LTO: configure.ac says
# why); its Check suites run on one engine, io_uring, and its install
# (tests/install_prefix.sh: the installed libruntime.a links without LTO).
clang_checks() {
	configure_in build-clang CC=clang
	check_here "clang" check-suites SUITES_EXTRA=tests/install_prefix.sh
}

# The aarch64 cross build, once, and its Check suites under qemu-user on
# the epoll engine (qemu has no io_uring), slower: Check's timeouts x4.
# The tests of tests/qemu.skip are skipped if tests/emulator_limits.c,
# under the same qemu, finds their limit.
arm64_checks() {
	configure_in build-arm64 --host=aarch64-linux-gnu \
		PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
	aarch64-linux-gnu-gcc -O2 -pthread -o emulator_limits "$top/tests/emulator_limits.c"
	limits=" $(qemu-aarch64 ./emulator_limits | tr '\n' ' ')"
	awk -v limits="$limits" '!/^#/ && NF > 3 { w = $3; sub(/:$/, "", w)
		if (index(limits, " " w " ")) print }' "$top/tests/qemu.skip" > qemu.skip.active
	echo "build.sh: this qemu-user's limits:${limits% }; tests skipped for them: $(wc -l < qemu.skip.active)"
	RUNTIME_ENGINE=epoll RUNTIME_TEST_SKIPS=$PWD/qemu.skip.active CK_TIMEOUT_MULTIPLIER=4 \
		check_here "aarch64 under qemu, epoll" check-suites \
		LOG_COMPILER="$PWD/libtool --mode=execute qemu-aarch64"
}

# make distcheck: the tarball builds - at -O3 with LTO and warnings as
# errors, where the plain build has the default -O2 -, installs, passes.
distcheck() {
	(cd "$top/build" && make -j"$jobs" distcheck \
		DISTCHECK_CONFIGURE_FLAGS="--enable-werror CFLAGS='-O3 -g'" >/dev/null) ||
		{ echo "build.sh: make distcheck failed" >&2; exit 1; }
}

# The Debian packages, tallied (tests/deb_build.sh: 77 when it skipped).
deb_checks() {
	local deb_rc=0 deb_out counts
	deb_out=$("$top/tests/deb_build.sh" 2>&1) || deb_rc=$?
	if [ "$deb_rc" -ne 0 ] && [ "$deb_rc" -ne 77 ]; then
		echo "$deb_out" | tail -n 60 >&2
		echo "build.sh: the Debian packages failed" >&2
		exit 1
	fi
	counts=$(echo "$deb_out" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' | tail -1)
	# shellcheck disable=SC2086 # three numbers
	set -- ${counts:-0 1 0}
	passed=$((passed + $1)) failed=$((failed + $2)) skipped=$((skipped + $3))
	echo "build.sh: Debian packages: $1 passed, $2 failed, $3 skipped"
	echo "$deb_out" | add_skips deb
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
	fuzz_run fuzz_h2_server h2 25000 h2.dict
	fuzz_run fuzz_ws_frame ws 200000
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
	add_arm64
	# shellcheck disable=SC2086 # a list of words
	install_missing $check_packages $fuzz_packages $arm64_packages
	timed "plain, io_uring" run_checks build
	timed "plain, epoll" epoll_checks
	timed "ASan+UBSan, io_uring" run_checks build-asan --enable-sanitizers --enable-debug \
		--enable-fault-injection
	timed "ASan+UBSan, epoll, syscalls missing" missing_syscalls_checks
	timed "TSan, io_uring" run_checks build-tsan --enable-tsan
	timed "clang, io_uring (Check suites, install)" clang_checks
	timed "aarch64 under qemu, epoll (Check suites)" arm64_checks
	timed "fuzz targets, briefly" fuzz_short
	timed "distcheck (-O3, LTO)" distcheck
	timed "Debian packages" deb_checks
	echo "build.sh: every stage passed"
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
