#!/bin/bash
# SPDX-License-Identifier: MIT
# gdb_fibers.sh - tools/gdb/runtime.py in gdb on tests/gdb_target, stopped
# at gdb_stop_here() with fibers parked, sleeping, in a recv, a receive
# stream, a channel and (unnamed) a mutex on two cores: "runtime fibers"
# must list each with its wait, "runtime fiber-bt" must show the frames
# of the target's own functions that led to a park and a sleep, and the
# process must then run on to a normal exit (every register put back).
# Where the kernel writes core files into the working directory (plain
# build only), the same is checked on a core file.
#
# No gdb, or a gdb without Python: skip (77; ./build.sh check installs
# gdb). gdb that cannot trace (ptrace not permitted): FAIL, saying so.
set -eu
srcdir=${srcdir:-$(dirname "$0")/..}
script=$(cd "$srcdir/tools/gdb" && pwd)/runtime.py
target=$(pwd)/tests/gdb_target
san=${RUNTIME_SANITIZER:-none}
bound=300 # seconds per gdb session: generous, only against a hang
tmp=$(mktemp -d)
out=$tmp/gdb.out
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/lib.sh
. "$srcdir/tests/lib.sh"

say() { echo "gdb_fibers: $*"; }

fail() {
	echo "gdb_fibers: FAIL: $*" >&2
	[ -s "$out" ] && { echo "--- output:" >&2; cat "$out" >&2; }
	echo "$passed passed, 1 failed, 0 skipped"
	exit 1
}

ok() {
	passed=$((passed + 1))
	say "ok: $*"
}

# --------------------------------------------------------------- set-up

command -v gdb >/dev/null || skip_all --installed "no gdb (Debian: gdb)"
gdb -batch -nx -ex 'python print("py" + "thon ok")' 2>&1 | grep -q "python ok" ||
	skip_all --installed "this gdb has no Python support (Debian's gdb has)"
# The script reads the library's debug info (configure's default -g).
lib=$(pwd)/runtime/.libs/libruntime.so
[ -f "$lib" ] || lib=$target
if command -v readelf >/dev/null && ! readelf -S "$lib" | grep -q '\.debug_info'; then
	skip_all "libruntime has no debug info (build with -g in CFLAGS)"
fi

# Alone, the target must run its scene and exit 0 (77: no io_uring).
rc=0
timeout "$bound" "$target" >"$out" 2>&1 || rc=$?
[ "$rc" -eq 77 ] && skip_all "the runtime cannot start here: $(cat "$out")"
[ "$rc" -eq 0 ] || fail "gdb_target alone exited with $rc"

# gdb's ptrace stops LeakSanitizer (it needs ptrace itself).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# gdb_session OUTPUT [gdb arguments...]
gdb_session() {
	local o=$1
	shift
	timeout "$bound" gdb -batch -nx -x "$script" \
		-ex 'set pagination off' -ex 'set width 0' -ex 'set confirm off' \
		"$@" >"$o" 2>&1 || true
}

# ------------------------------------------------------- live process

gdb_session "$out" \
	-ex 'echo @@before\n' -ex 'runtime fibers' \
	-ex 'break gdb_stop_here' -ex run \
	-ex 'echo @@fibers\n' -ex 'runtime fibers' \
	-ex 'echo @@parker\n' -ex 'eval "runtime fiber-bt %llu", gdb_parker_id' \
	-ex 'echo @@sleeper\n' -ex 'runtime fiber-bt sleeper' \
	-ex 'echo @@stopper\n' -ex 'runtime fiber-bt stopper' \
	-ex 'echo @@nosuch\n' -ex 'runtime fiber-bt nosuch' \
	-ex 'echo @@after\n' -ex 'bt 1' \
	-ex 'echo @@continue\n' -ex continue \
	"$target"

if ! grep -q 'Breakpoint 1, gdb_stop_here' "$out"; then
	if grep -qiE 'ptrace|Operation not permitted|Could not attach|not permitted' "$out"; then
		fail "gdb cannot trace processes here (ptrace not permitted). In a container run" \
			"with --cap-add=SYS_PTRACE (or seccomp unconfined); see also" \
			"/proc/sys/kernel/yama/ptrace_scope"
	fi
	fail "gdb_target never reached gdb_stop_here under gdb"
fi

# section NAME: the output between @@NAME and the next @@ marker.
section() {
	awk -v m="@@$1" '$0 == m { on = 1; next } /^@@/ { on = 0 } on' "$2"
}

# has SECTION-TEXT REGEX WHAT
has() {
	printf '%s\n' "$1" | grep -qE -- "$2" || fail "$3: no line matching /$2/"
}

# frames_in_order TEXT CALLEE CALLER: CALLER's frame is older than CALLEE's.
frames_in_order() {
	local callee caller
	callee=$(printf '%s\n' "$1" | grep -nE "(in | )$2 \(" | head -1 | cut -d: -f1)
	caller=$(printf '%s\n' "$1" | grep -nE "(in | )$3 \(" | head -1 | cut -d: -f1)
	[ -n "$callee" ] || fail "backtrace: no frame of $2"
	[ -n "$caller" ] || fail "backtrace: no frame of $3"
	[ "$caller" -gt "$callee" ] || fail "backtrace: $3 is not the caller of $2"
}

line=$(grep '^gdb_target: reader fd' "$out" | head -1)
reader_fd=$(printf '%s\n' "$line" | sed -n 's/.*reader fd \([0-9]*\),.*/\1/p')
stream_fd=$(printf '%s\n' "$line" | sed -n 's/.*streamer fd \([0-9]*\),.*/\1/p')
if [ -z "$reader_fd" ] || [ -z "$stream_fd" ]; then
	fail "no fds from gdb_target"
fi

fibers=$(section fibers "$out")
has "$fibers" '^runtime 0x[0-9a-f]+: 2 cores$' "runtime fibers"
has "$fibers" '^core 0: 4 fibers, [0-9]+ timers armed; thread [0-9]+ ' "core 0"
has "$fibers" '^core 1: 3 fibers, [0-9]+ timers armed; thread [0-9]+ ' "core 1"
w='^  fiber [0-9]+ waiting  ' for='for [0-9]+ ms'
has "$fibers" '^\* fiber [0-9]+ running +"stopper"$' "the running fiber"
has "$fibers" "${w}park $for \"parker\"\$" "parker"
has "$fibers" "${w}sleep $for \"sleeper\"\$" "sleeper"
has "$fibers" "${w}io recv fd $reader_fd $for \"reader\"\$" "reader"
# A kernel without multishot recv: the stream reads with a plain recv.
has "$fibers" "${w}(stream|io recv) fd $stream_fd $for \"streamer\"\$" "streamer"
has "$fibers" "${w}chan 0x[0-9a-f]+ $for \"boss1\"\$" "boss1"
has "$fibers" "${w}mutex 0x[0-9a-f]+ $for\$" "the unnamed fiber"
n=$(printf '%s\n' "$fibers" | grep -cE '^[* ] fiber ' || true)
[ "$n" -eq 7 ] || fail "runtime fibers: $n fiber lines, not 7"
ok "runtime fibers lists all 7 fibers with their waits (sanitizer: $san)"
has "$(section before "$out")" '^runtime: no process' "runtime fibers before run"
has "$(section nosuch "$out")" '^runtime: no fiber nosuch' "fiber-bt of no fiber"
ok "clear errors: no process yet, no such fiber"

check_parked_backtrace() { # TEXT WHAT
	has "$1" '^fiber [0-9]+ waiting  park .*"parker", core 0' "$2: header"
	frames_in_order "$1" runtime_park parked_fiber
}

check_parked_backtrace "$(section parker "$out")" "fiber-bt of the parker (by id)"
ok "runtime fiber-bt <id>: parked_fiber -> runtime_park"
sleeper=$(section sleeper "$out")
has "$sleeper" '^fiber [0-9]+ waiting  sleep .*"sleeper"' "fiber-bt sleeper: header"
frames_in_order "$sleeper" runtime_sleep sleeping_fiber
ok "runtime fiber-bt <name>: sleeping_fiber -> runtime_sleep"
stopper=$(section stopper "$out")
has "$stopper" 'running: the backtrace of thread' "fiber-bt stopper"
frames_in_order "$stopper" gdb_stop_here stopper
ok "runtime fiber-bt of the running fiber: its thread's frames"
has "$(section after "$out")" '^#0 +gdb_stop_here \(' "bt after fiber-bt"
has "$(section continue "$out")" 'exited normally' "continue after fiber-bt"
grep -q '^gdb_target: done' "$out" || fail "gdb_target did not finish its scene"
ok "registers restored: the process ran on to a normal exit"

# ------------------------------------------------------------ core file

core_file_check() {
	local pattern dir=$tmp/core
	pattern=$(cat /proc/sys/kernel/core_pattern 2>/dev/null || echo '?')
	case $pattern in
	core*) ;;
	*)
		say "core file: not checked (core_pattern is '$pattern', not a file here)"
		return 0
		;;
	esac
	mkdir "$dir"
	(
		cd "$dir"
		ulimit -c unlimited 2>/dev/null || ulimit -c "$(ulimit -Hc)"
		gdb_session "$dir/make.out" -ex 'break gdb_stop_here' -ex run \
			-ex 'signal SIGQUIT' "$target"
	)
	core=$(find "$dir" -maxdepth 1 -name 'core*' -type f | head -1)
	if [ -z "$core" ]; then
		say "core file: not checked (no core was written; ulimit -c $(ulimit -Hc))"
		return 0
	fi
	gdb_session "$out" -ex 'echo @@fibers\n' -ex 'runtime fibers' \
		-ex 'echo @@parker\n' -ex 'runtime fiber-bt parker' "$target" "$core"
	has "$(section fibers "$out")" '^  fiber [0-9]+ waiting  park for [0-9]+ ms "parker"$' \
		"core file: runtime fibers"
	parker=$(section parker "$out")
	check_parked_backtrace "$parker" "core file: fiber-bt parker"
	how="registers written"
	printf '%s\n' "$parker" | grep -q 'registers cannot be written here' &&
		how="through the unwinder: gdb writes no registers of a core"
	ok "core file: listing and the parker's backtrace ($how)"
}

if [ "$san" = none ]; then
	core_file_check
else
	say "core file: not checked in the $san build (sanitizers keep cores off)"
fi
echo "$passed passed, 0 failed, 0 skipped"
