#!/bin/sh
# SPDX-License-Identifier: MIT
# fuzz_replay.sh - make check's share of the fuzzing: every input in the
# fuzzers' seed corpora and every crash they ever found (fuzz/regressions/)
# runs again through the same LLVMFuzzerTestOneInput, built with the
# ordinary compiler (tests/replay_http_parser, tests/replay_http_server,
# tests/replay_https_server, tests/replay_http_response,
# tests/replay_h2_server, tests/replay_ws_frame).
# An input that crashes, aborts or trips a sanitizer fails the test; when a
# batch fails, each of its inputs runs alone to name the culprits.
set -u
fuzz=${srcdir:-.}/fuzz
log=$(mktemp)
trap 'rm -f "$log"' EXIT
passed=0 failed=0

# replay PROGRAM DIR... (a directory that does not exist is skipped: git
# keeps no empty one)
replay() {
	prog=./tests/$1
	shift
	n=$#
	for dir; do
		[ -d "$dir" ] && set -- "$@" "$dir"
	done
	shift "$n"
	if "$prog" "$@" 2>"$log"; then
		n=$(sed -n 's/^replay: \([0-9]*\) inputs, all passed$/\1/p' "$log")
		passed=$((passed + n))
		return
	fi
	for dir in "$@"; do
		for f in "$dir"/*; do
			[ -f "$f" ] || continue
			if "$prog" "$f" 2>"$log"; then
				passed=$((passed + 1))
			else
				failed=$((failed + 1))
				echo "fuzz_replay: FAIL: $prog $f" >&2
				tail -n 40 "$log" >&2
			fi
		done
	done
	[ "$failed" -gt 0 ] || { echo "fuzz_replay: FAIL: $prog failed as a batch" >&2; cat "$log" >&2; failed=1; }
}

replay replay_http_parser "$fuzz/corpus/http" "$fuzz/regressions/parser"
replay replay_http_server "$fuzz/corpus/server" "$fuzz/regressions/server"
replay replay_https_server "$fuzz/corpus/https" "$fuzz/regressions/https"
replay replay_http_response "$fuzz/corpus/http_response" "$fuzz/regressions/response"
replay replay_h2_server "$fuzz/corpus/h2" "$fuzz/regressions/h2"
replay replay_ws_frame "$fuzz/corpus/ws" "$fuzz/regressions/ws"
echo "$passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
