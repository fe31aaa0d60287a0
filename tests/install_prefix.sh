#!/bin/sh
# SPDX-License-Identifier: MIT
# install_prefix.sh - the build installs anywhere: `make install
# prefix=DIR` from this build directory (configured for another prefix)
# installs into DIR, relinking libruntime-preload for DIR, with .pc files
# that name DIR; README's first program, built as README's "Installing into
# a private prefix" says (pkg-config from DIR, an rpath), finds libruntime
# in DIR and runs; DESTDIR only stages (its .pc names configure's prefix);
# uninstall leaves no file behind; the installed static archive links
# without -flto, and an install whose strip of it fails fails. The build
# tree's .la and .pc files are pointed back at configure's directories at
# the end, whatever happens.
# Run from the build directory (make check does); a few seconds.
set -u
srcdir=${srcdir:-.}
CC=${CC:-cc}
tmp=$(mktemp -d) || exit 1
prefix=$tmp/prefix
# shellcheck source=tests/lib.sh
. "$srcdir/tests/lib.sh"
# A make of its own: not the parent's jobserver or command-line variables.
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${MAKE:-make}" "$@"; }
cleanup() {
	mk -s la-retarget runtime.pc preload/runtime-preload.pc >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
show() { sed 's/^/  /' "$1" | tail -n 20; }

# libdir for a prefix, as make expands configure's (Debian's has a
# multiarch part).
libdir_for() {
	e=$(sed -n 's/^exec_prefix = //p' Makefile | sed "s|\${prefix}|$1|")
	sed -n 's/^libdir = //p' Makefile | sed -e "s|\${exec_prefix}|$e|" -e "s|\${prefix}|$1|"
}
# make install builds what is out of date: never while other tests run on
# this tree's libraries and demos (make check builds them before its tests;
# make -n cannot tell, config.h's stamp fools it).
newer() { # FILE DIR...: a source in DIR... is newer than FILE
	f=$1
	shift
	[ -n "$(find "$@" -newer "$f" -type f \( -name '*.[chS]' -o -name '*.map' \) 2>/dev/null | head -n 1)" ]
}
# Each library against its own sources (a header of the HTTP library's
# changed leaves libruntime.la as it was, up to date).
if newer runtime/libruntime.la "$srcdir/runtime" "$srcdir/toolkit" "$srcdir/include/runtime.h" \
	"$srcdir/include/runtime_toolkit.h" ||
	newer tls/libruntime-tls.la "$srcdir/tls" "$srcdir/include/runtime_tls.h" ||
	newer http/libruntime-http.la "$srcdir/http" "$srcdir/include/runtime_http.h" ||
	newer preload/libruntime-preload.la "$srcdir/preload" ||
	newer demos/http/http-server "$srcdir/demos"; then
	result "the build tree is up to date (run make first)" 1
	summary
	exit
fi
configured=$(sed -n 's/^prefix = //p' Makefile)
[ -n "$configured" ] && [ "$configured" != "$prefix" ]
result "configured for another prefix ($configured)" $?
lib=$(libdir_for "$prefix")
case $lib in "$prefix"/*) ok=0 ;; *) ok=1 ;; esac
result "libdir follows the prefix ($lib)" $ok

# ------------------------------------------------------ make install prefix=
mk install prefix="$prefix" > "$tmp/install.log" 2>&1
ok=$?
[ $ok -eq 0 ] || show "$tmp/install.log"
result "make install prefix=$prefix" $ok
for f in "$lib/libruntime.so.0" "$lib/libruntime-preload.so.0" "$prefix/include/runtime.h" \
	"$prefix/include/runtime_toolkit.h" "$lib/pkgconfig/runtime.pc" \
	"$lib/pkgconfig/runtime-preload.pc"; do
	[ -e "$f" ]; result "installed $f" $?
done
export PKG_CONFIG_PATH="$lib/pkgconfig"
pc_prefix=$(pkg-config --variable=prefix runtime)
[ "$pc_prefix" = "$prefix" ]; result "runtime.pc names the prefix (got '$pc_prefix')" $?
pkg-config --libs runtime-preload | grep -q -- "-L$lib -lruntime-preload"
result "runtime-preload.pc links from the prefix" $?
# The relink at install: the preload library finds libruntime in the
# prefix, never in this build tree.
runpath=$(readelf -d "$lib/libruntime-preload.so.0" 2>/dev/null | sed -n 's/.*R\(UN\)\?PATH.*\[\(.*\)\]/\2/p')
case ":$runpath:" in *":$lib:"*) ok=0 ;; *) ok=1 ;; esac
case $runpath in *"$(pwd)"*) ok=1 ;; esac
result "libruntime-preload's runpath is the prefix's lib (got '$runpath')" $ok

# ---------------------------------------------- README's first program
awk '/^## A first program/ { on = 1 } on && /^```c$/ { code = 1; next }
     code && /^```$/ { exit } code { print }' "$srcdir/README.md" > "$tmp/hello.c"
grep -q 'int main' "$tmp/hello.c"; result "README has its first program" $?
# README's private-prefix compile line, with this build's sanitizer flags.
# shellcheck disable=SC2046,SC2086
$CC ${SAN_CFLAGS:-} "$tmp/hello.c" $(pkg-config --cflags --libs runtime) \
	-Wl,-rpath,"$(pkg-config --variable=libdir runtime)" -o "$tmp/hello" > "$tmp/cc.log" 2>&1
ok=$?
[ $ok -eq 0 ] || show "$tmp/cc.log"
result "README's first program builds against the prefix through runtime.pc" $ok
found=$(env -u LD_LIBRARY_PATH ldd "$tmp/hello" 2>/dev/null | awk '$1 == "libruntime.so.0" { print $3 }')
[ "$found" = "$lib/libruntime.so.0" ]
result "it loads libruntime from the prefix (ldd: '$found')" $?
# No echo server listens on 127.0.0.1:7000 here (or one does): either way
# the program ran, which a missing library would not let it.
env -u LD_LIBRARY_PATH timeout 120 "$tmp/hello" > "$tmp/run.out" 2> "$tmp/run.err"
status=$?
{ [ $status -eq 0 ] && grep -q 'bytes back' "$tmp/run.out"; } ||
	{ [ $status -eq 1 ] && grep -q '^connect: ' "$tmp/run.err"; }
ok=$?
[ $ok -eq 0 ] || show "$tmp/run.err"
result "it runs (exit $status)" $ok

# The installed static archive holds machine code (the install stripped
# any link-time bytecode): a program links it without -flto.
# shellcheck disable=SC2046,SC2086
$CC ${SAN_CFLAGS:-} -fno-lto "$tmp/hello.c" -I"$prefix/include" "$lib/libruntime.a" \
	$(pkg-config --libs liburing libssl libcrypto) -lpthread -o "$tmp/hello-static" \
	> "$tmp/static.log" 2>&1
ok=$?
[ $ok -eq 0 ] || show "$tmp/static.log"
result "README's first program links the installed libruntime.a without -flto" $ok

# A step of the install that fails fails it: here objcopy, stripping the
# bytecode of an LTO build, cannot read a member - and exits 0, as it does
# then, saying so on stderr only. (A build without LTO strips nothing.)
if [ -n "$(sed -n 's/^LTO_CFLAGS = //p' Makefile)" ]; then
	mk install prefix="$tmp/bad" "OBJCOPY=sh -c 'echo cannot read a member >&2' objcopy" \
		> "$tmp/bad.log" 2>&1
	ok=$?
	said=1
	grep -q 'cannot strip' "$tmp/bad.log" && said=0
	[ $ok -ne 0 ] && [ $said -eq 0 ]
	result "make install fails when objcopy cannot strip an archive (exit $ok)" $?
	mk uninstall prefix="$tmp/bad" > /dev/null 2>&1
fi

# -------------------------------------------------------- DESTDIR, uninstall
mk install DESTDIR="$tmp/stage" > "$tmp/stage.log" 2>&1
ok=$?
[ $ok -eq 0 ] || show "$tmp/stage.log"
result "make install DESTDIR=..." $ok
staged=$(sed -n 's/^prefix=//p' "$tmp/stage$(libdir_for "$configured")/pkgconfig/runtime.pc" 2>/dev/null)
[ "$staged" = "$configured" ]; result "a staged runtime.pc names the final prefix (got '$staged')" $?

mk uninstall prefix="$prefix" > "$tmp/uninstall.log" 2>&1
ok=$?
left=$(find "$prefix" -type f 2>/dev/null | head -n 5)
[ -z "$left" ] || printf '  left: %s\n' $left
[ $ok -eq 0 ] && [ -z "$left" ]; result "make uninstall prefix=... leaves no file" $?

summary
