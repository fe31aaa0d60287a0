#!/bin/bash
# SPDX-License-Identifier: MIT
# tests/deb_build.sh - build the Debian packages (debian/) from a clean copy
# of the tree, check them with lintian, install them, use them, remove them.
#
#   tests/deb_build.sh [--check] [--keep] [--no-install] [--symbols]
#
#   --check       run make check inside the package build (dh_auto_test);
#                 by default DEB_BUILD_OPTIONS=nocheck
#   --keep        keep the scratch build tree (always kept on failure)
#   --no-install  build and lint only: no dpkg -i / dpkg -r on this machine
#   --symbols     rewrite debian/libruntime0.symbols,
#                 debian/libruntime-preload0.symbols,
#                 debian/libruntime-tls0.symbols and
#                 debian/libruntime-http0.symbols (the only files it
#                 writes in the tree) from the libraries just built, and
#                 show the diff: known symbols keep their versions, new ones
#                 get debian/changelog's upstream version (dpkg-gensymbols)
#
# Steps: install what is missing (apt-get, as build.sh does); copy the
# git-tracked and the untracked, non-ignored files (git ls-files -co
# --exclude-standard: debian/ is copied before it is committed) into a
# scratch directory under ${TMPDIR:-/tmp}; dpkg-buildpackage -us -uc -b
# there (never in the tree: it writes into the tree and into ../);
# lintian on the .changes, failing on any error (E:); then dpkg -i the
# .debs (not the -dbgsym ones), use them (pkg-config, a program compiled
# and run against the installed library, the installed examples built with
# their Makefile, the echo demo from the PATH, man -w), and dpkg -r them
# again, so the machine is left as it was. Packages that were already
# installed before are not installed over nor removed.
#
# The .debs stay in the scratch directory (printed at the end). The last
# line is "N passed, F failed, S skipped". Time, on two busy cores: about 70 s
# (the package build 40 s, lintian 13 s); with --check, about 110 s.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
check=0 keep=0 install=1 symbols=0
for a in "$@"; do
	case $a in
	--check) check=1 ;;
	--keep) keep=1 ;;
	--no-install) install=0 ;;
	--symbols) symbols=1 ;;
	*) echo "usage: $0 [--check] [--keep] [--no-install] [--symbols]" >&2; exit 2 ;;
	esac
done

# result and summary ("N passed, F failed, S skipped"), start_server, stop_server
# shellcheck source=tests/lib.sh
. "$top/tests/lib.sh"
pass() { result "$*" 0; }
fail() { result "$*" 1; }
finish() {
	summary
	exit
}
die() { fail "$*"; finish; }

# ------------------------------------------------------------ packages
packages="build-essential dpkg-dev debhelper lintian fakeroot pkg-config liburing-dev check groff-base man-db"
need=""
for p in $packages; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need="$need $p"
done
if [ -n "$need" ]; then
	echo "deb_build: installing:$need"
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || die "need root (or sudo) to install:$need"
		sudo=sudo
	fi
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq </dev/null
	# shellcheck disable=SC2086
	$sudo apt-get install -y -qq --no-install-recommends $need </dev/null >/dev/null ||
		die "apt-get install$need"
fi

# ------------------------------------------------------------ the copy
version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version) ||
	die "debian/changelog unreadable"
upstream=${version%-*}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/runtime-deb.XXXXXX")
src="$scratch/runtime-$upstream"
mkdir "$src"
# Tracked files deleted in the work tree are listed too: copy what exists.
(cd "$top" && git ls-files -co --exclude-standard -z |
	while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done |
	tar --null -T - -cf -) | tar -C "$src" -xf - || die "copying the tree to $src"
[ -f "$src/debian/control" ] || die "no debian/control in the copy"
echo "deb_build: building $version in $src"

# ------------------------------------------------------------ the build
(cd "$src" && dpkg-checkbuilddeps) || die "build dependencies missing (dpkg-checkbuilddeps)"
opts="${DEB_BUILD_OPTIONS:-}"
[ "$check" -eq 1 ] || opts="$opts nocheck"
start=$(date +%s)
if (cd "$src" && DEB_BUILD_OPTIONS="${opts# }" dpkg-buildpackage -us -uc -b -J"$(nproc)") \
	>"$scratch/build.log" 2>&1; then
	pass "dpkg-buildpackage -b ($(($(date +%s) - start)) s, DEB_BUILD_OPTIONS='${opts# }')"
else
	tail -n 80 "$scratch/build.log" >&2
	die "dpkg-buildpackage (log: $scratch/build.log)"
fi
changes=$(ls "$scratch"/*.changes)
debs=$(ls "$scratch"/*.deb)

# ------------------------------------------------------------ symbols
if [ "$symbols" -eq 1 ]; then
	for p in libruntime0 libruntime-preload0 libruntime-tls0 libruntime-http0; do
		if (cd "$src" && dpkg-gensymbols -q -p"$p" -P"debian/$p" -v"$upstream" -O) |
			grep -v '^\* Build-Depends-Package:' |
			sed '1a\* Build-Depends-Package: libruntime-dev' >"$scratch/$p.symbols"; then
			diff -u "$top/debian/$p.symbols" "$scratch/$p.symbols"
			cp "$scratch/$p.symbols" "$top/debian/$p.symbols"
			pass "debian/$p.symbols written"
		else
			fail "dpkg-gensymbols -p$p"
		fi
	done
fi

# ------------------------------------------------------------ lintian
# --fail-on none: its exit status then says only whether lintian itself ran.
lintian --display-info --fail-on none "$changes" >"$scratch/lintian.log" 2>&1
lrc=$?
grep -v '^running with root privileges' "$scratch/lintian.log"
errors=$(grep -c '^E: ' "$scratch/lintian.log")
warnings=$(grep -c '^W: ' "$scratch/lintian.log")
if [ "$lrc" -ne 0 ]; then
	fail "lintian did not run (exit $lrc)"
elif [ "$errors" -eq 0 ]; then
	pass "lintian: no errors ($warnings warnings)"
else
	fail "lintian: $errors errors, $warnings warnings"
fi

# ------------------------------------------------------------ install and use
if [ "$install" -eq 1 ]; then
	mine=""
	for d in $debs; do
		case $d in *-dbgsym_*) continue ;; esac
		p=$(dpkg-deb -f "$d" Package)
		if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
			echo "deb_build: $p is installed already: not installing over it"
		else
			mine="$mine $d"
		fi
	done
	installed="" uring=1
	# shellcheck disable=SC2086
	if [ -n "$mine" ] && dpkg -i $mine >"$scratch/dpkg.log" 2>&1; then
		installed=$(for d in $mine; do dpkg-deb -f "$d" Package; done)
		pass "dpkg -i:$(echo "$installed" | tr '\n' ' ')"
	elif [ -n "$mine" ]; then
		cat "$scratch/dpkg.log" >&2
		fail "dpkg -i"
		# What dpkg did install, half-configured or not, goes again.
		installed=$(for d in $mine; do p=$(dpkg-deb -f "$d" Package);
			dpkg-query -W "$p" >/dev/null 2>&1 && echo "$p"; done)
	fi

	if flags=$(pkg-config --cflags --libs runtime 2>&1) && [ -n "$flags" ]; then
		pass "pkg-config --cflags --libs runtime: $flags"
	else
		fail "pkg-config --cflags --libs runtime: $flags"
	fi

	# A program against the installed header and library: hello from a fiber.
	cat >"$scratch/hello.c" <<'EOF'
#include <runtime.h>
#include <stdio.h>

static int ran;

static void hello(void *arg)
{
	runtime_sleep(1000 * 1000); /* 1 ms: a timeout SQE, the fiber parks */
	ran = *(int *)arg;
}

int main(void)
{
	struct runtime *rt;
	struct runtime_config cfg;
	runtime_config_init(&cfg);
	int rc = runtime_create(&rt, &cfg);
	if (rc < 0) {
		fprintf(stderr, "runtime_create: %d\n", rc);
		return 77; /* no io_uring here */
	}
	static int value = 42;
	runtime_spawn(rt, hello, &value);
	rc = runtime_run(rt);
	runtime_destroy(rt);
	printf("hello from a fiber: %d\n", ran);
	return rc == 0 && ran == 42 ? 0 : 1;
}
EOF
	# shellcheck disable=SC2046 # pkg-config's words
	if gcc -Wall -Werror -o "$scratch/hello" "$scratch/hello.c" $(pkg-config --cflags --libs runtime) \
		2>"$scratch/hello.err"; then
		pass "a program compiles and links against the installed library"
		# ldd's whole output first: under pipefail, grep -q quitting at
		# the first match can kill ldd with SIGPIPE and fail the pipe.
		libs=$(ldd "$scratch/hello")
		if grep -Eq "libruntime.so.0 => /(usr/)?lib/" <<<"$libs"; then
			pass "it loads the system's libruntime.so.0"
		else
			fail "it does not load the system's libruntime.so.0: $libs"
		fi
		out=$("$scratch/hello" 2>&1); rc=$?
		case $rc in
		0) pass "it runs: $out" ;;
		77) skip "the installed library runs" "the runtime cannot start here: $out"; uring=0 ;;
		*) fail "it runs: exit $rc: $out" ;;
		esac
	else
		cat "$scratch/hello.err" >&2
		fail "a program compiles and links against the installed library"
	fi

	# The installed examples, with their Makefile, against the installed
	# library (a copy: /usr/share/doc is no place to build in).
	ex=/usr/share/doc/libruntime-dev/examples
	if [ -f "$ex/Makefile" ]; then
		rm -rf "$scratch/examples" && cp -r "$ex" "$scratch/examples"
		if make -s -C "$scratch/examples" CFLAGS="-O2 -Wall -Werror" >"$scratch/examples.log" 2>&1; then
			pass "the installed examples build against the installed library"
		else
			cat "$scratch/examples.log" >&2
			fail "the installed examples build against the installed library"
		fi
	else
		fail "no $ex/Makefile"
	fi

	# The echo demo, from the PATH: one line there and back, a clean stop.
	if [ "$uring" -eq 1 ]; then
		if start_server "$scratch/echo.log" runtime-echo-server --quiet; then
			line=$( (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'hello\n' >&3 &&
				timeout 10 head -n 1 <&3) 2>&1)
			stop_server; rc=$?
			if [ "$line" = hello ] && [ "$rc" -eq 0 ]; then
				pass "runtime-echo-server echoes a line and stops cleanly"
			else
				fail "runtime-echo-server: got '$line', exit $rc: $(cat "$scratch/echo.log")"
			fi
		else
			fail "runtime-echo-server does not listen: $(cat "$scratch/echo.log")"
		fi
	fi

	for s in runtime-echo-server runtime-http-server; do
		if "$s" --help >/dev/null 2>&1 && man -w "$s" >/dev/null 2>&1; then
			pass "$s --help, and its manual page"
		else
			fail "$s --help, or its manual page"
		fi
	done
	for page in runtime_create runtime; do
		if where=$(man -w "$page" 2>&1) && dpkg -S "$where" >/dev/null 2>&1; then
			pass "man -w $page: $where"
		else
			fail "man -w $page: $where"
		fi
	done

	if [ -n "$installed" ]; then
		# shellcheck disable=SC2086
		if dpkg -r $installed >>"$scratch/dpkg.log" 2>&1; then
			pass "dpkg -r: the machine is left as it was"
		else
			cat "$scratch/dpkg.log" >&2
			fail "dpkg -r$(echo "$installed" | tr '\n' ' ')"
		fi
	fi
fi

# ------------------------------------------------------------ report
echo "deb_build: packages in $scratch:"
for d in $debs; do echo "  $(basename "$d")"; done
if [ "$failed" -eq 0 ] && [ "$keep" -eq 0 ]; then
	rm -rf "$src"
else
	echo "deb_build: build tree kept: $src"
fi
finish
