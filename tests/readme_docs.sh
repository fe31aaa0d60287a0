#!/bin/bash
# SPDX-License-Identifier: MIT
# readme_docs.sh - keeps README.md and the documents under doc/ honest.
#
# Links: every relative link and image of README.md, doc/, examples/ and
# fuzz/regressions/ Markdown resolves to a file or directory of the source
# tree, and a "#anchor" on a Markdown file to one of its headings (GitHub's
# slugs). Web links are not fetched (no network in CI).
#
# Commands: every line of README's shell blocks (indented by four spaces)
# is one this test knows, and each is run - here, or by the test named
# beside it in KNOWN below:
#   - the demos, started as README shows them (on a free port, since 7000
#     and 8080 may be taken), answer as README says (curl's output line);
#   - the first program's compile line and output: tests/readme_example.sh;
#   - `make install && ldconfig`: tests/install_prefix.sh installs into a
#     prefix (a test must not write /usr/local);
#   - `./build.sh demo`: run, and its echo server answers, where this
#     build directory is the tree's build/ (CI's plain build) and every
#     package build.sh would install is there: it then configures nothing
#     and builds nothing new (elsewhere it would start a whole new build in
#     build/, or install packages, from inside make check: noted, not run);
#   - `./build.sh check`: CI runs it (.ci/run); it cannot run inside the
#     make check it starts. build.sh must still offer it (its usage line).
# A line README gains that is none of these fails the test until it is
# added here with a way to run it.
set -u
srcdir=${srcdir:-.}
tmp=$(mktemp -d) || exit 1
pid=
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# shellcheck source=tests/lib.sh
. "$srcdir/tests/lib.sh"

# ------------------------------------------------------------------ links

# slugs FILE: its headings as GitHub anchors (lower case, punctuation but
# '-' and '_' dropped, spaces to '-').
slugs() {
	awk '/^```/ { fence = !fence } !fence && /^#+ / {
		sub(/^#+ +/, ""); s = tolower($0)
		gsub(/[^a-z0-9 _-]/, "", s); gsub(/ /, "-", s); print s }' "$1"
}

# links FILE: "target" per relative link or image, outside code.
links() {
	awk '/^```/ { fence = !fence; next } fence || /^    / { next }
		{ gsub(/`[^`]*`/, "")
		  while (match($0, /\]\([^) ]+\)/)) {
			print substr($0, RSTART + 2, RLENGTH - 3)
			$0 = substr($0, RSTART + RLENGTH) } }' "$1"
}

check_links() { # FILE
	local file=$1 dir target path anchor bad=0
	dir=$(dirname "$file")
	while IFS= read -r target; do
		case $target in http://* | https://* | mailto:*) continue ;; esac
		path=${target%%#*}
		anchor=
		[ "$path" != "$target" ] && anchor=${target#*#}
		[ -z "$path" ] && path=$(basename "$file")
		if [ ! -e "$dir/$path" ]; then
			echo "  $file: link to $target: no such file" >&2
			bad=1
		elif [ -n "$anchor" ] && ! slugs "$dir/$path" | grep -qx -- "$anchor"; then
			echo "  $file: link to $target: no such heading" >&2
			bad=1
		fi
	done < <(links "$file")
	return "$bad"
}

docs=$(cd "$srcdir" && ls README.md doc/*.md doc/*/*.md examples/README.md \
	fuzz/regressions/README.md 2>/dev/null)
for f in $docs; do
	(cd "$srcdir" && check_links "$f")
	result "every link of $f resolves" $?
done
for f in doc/tutorial.md doc/architecture.md doc/building.md doc/perf/README.md; do
	[ -e "$srcdir/$f" ]
	result "README's $f exists" $?
done

# --------------------------------------------------------------- commands

# README's shell lines: the indented blocks outside fenced code.
awk '/^```/ { fence = !fence; next } !fence && /^    [^ ]/ { sub(/^    /, ""); print }' \
	"$srcdir/README.md" > "$tmp/lines"

# KNOWN: each line README may show, and what runs it.
declare -A KNOWN=(
	["./build.sh demo"]="build.sh usage"
	["./build.sh check"]="build.sh usage; CI: .ci/run"
	["cd build && make install && ldconfig"]="tests/install_prefix.sh"
	['cc hello.c $(pkg-config --cflags --libs runtime) -o hello && ./hello']="tests/readme_example.sh"
	["6 bytes back: hello"]="tests/readme_example.sh"
	["./demos/echo/echo-server --port 7000"]="here"
	["./demos/http/http-server --port 8080"]="here"
	["curl -s 127.0.0.1:8080/plaintext"]="here"
	["Hello, World!"]="here"
)
unknown=0
while IFS= read -r line; do
	[ -n "${KNOWN[$line]+x}" ] && continue
	echo "  README shows a line this test does not run: $line" >&2
	unknown=1
done < "$tmp/lines"
result "every command README shows is one this test runs or names" "$unknown"
for line in "${!KNOWN[@]}"; do
	grep -qxF -- "    $line" "$srcdir/README.md"
	result "README still shows: $line" $?
done

usage=$("$srcdir/build.sh" --no-such-mode 2>&1)
case $usage in *"usage: "*"demo|check"*) status=0 ;; *) status=1 ;; esac
result "build.sh offers demo and check ($usage)" "$status"

# echo_answers PORT: a line sent to PORT comes back.
echo_answers() {
	local back
	exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
	printf 'hello, readme\n' >&3
	IFS= read -r -t 120 back <&3
	exec 3<&-
	[ "${back:-}" = "hello, readme" ]
}

# ./build.sh demo, where it neither builds afresh nor installs.
packages=$(sed -n 's/^packages="\(.*\)"$/\1/p' "$srcdir/build.sh")
missing=
for p in $packages; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ "$(cd "$srcdir/build" 2>/dev/null && pwd -P)" != "$(pwd -P)" ]; then
	echo "readme_docs: note: ./build.sh demo not run: this is not $srcdir/build"
elif [ -n "$missing" ] || [ -z "$packages" ]; then
	echo "readme_docs: note: ./build.sh demo not run: it would install:$missing"
else
	for try in 1 2 3; do
		port=$((20000 + RANDOM % 10000))
		listening "$port" || break
	done
	PORT=$port JOBS=1 "$srcdir/build.sh" demo >"$tmp/demo.log" 2>&1 &
	pid=$!
	for _ in $(seq 6000); do # a make that finds nothing to do, on a loaded machine
		listening "$port" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	echo_answers "$port"
	result "./build.sh demo builds and runs the echo demo, which answers" $?
	stop_server
	result "./build.sh demo's echo server stops cleanly on SIGTERM" $?
fi

# The echo demo, as README starts it: bytes come back.
if start_server "$tmp/echo.log" ./demos/echo/echo-server --quiet; then
	echo_answers "$port"
	result "README's echo demo echoes a line" $?
	stop_server
	result "README's echo demo stops cleanly on SIGTERM" $?
else
	result "README's echo demo starts: $(cat "$tmp/echo.log")" 1
fi

# The HTTP demo and README's curl line, with its output.
if ! command -v curl >/dev/null; then
	missing "README's curl line" "curl (Debian: curl)"
elif start_server "$tmp/http.log" ./demos/http/http-server; then
	want=$(grep -A1 -xF "    curl -s 127.0.0.1:8080/plaintext" "$srcdir/README.md" | tail -1)
	got=$(curl -s --max-time 120 "127.0.0.1:$port/plaintext")
	[ "    $got" = "$want" ]
	result "README's curl line prints what README says ('$got')" $?
	stop_server
	result "README's HTTP demo stops cleanly on SIGTERM" $?
else
	result "README's HTTP demo starts: $(cat "$tmp/http.log")" 1
fi

summary
