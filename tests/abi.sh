#!/bin/sh
# SPDX-License-Identifier: MIT
# abi.sh - the ABI is written down once and kept, for libruntime,
# libruntime-tls and libruntime-http each: the functions its headers
# declare RUNTIME_API, the ones its map (runtime/libruntime.map,
# tls/libruntime-tls.map, http/libruntime-http.map) exports and the ones
# the built library exports are the same set, and so are the ones its
# Debian symbols file lists (where debian/ is there: not in a tarball);
# the soname is NAME.so.0; no global symbol of any library, shared or
# static, lacks the project's prefix (runtime_, runtime__ for the internal
# ones a static archive must keep global across its files) but the libc
# calls libruntime-preload replaces and GCC's __x86_return_thunk; and the
# header's version agrees with the package's and with runtime_version()
# (tests/check_core).
set -u
srcdir=${srcdir:-.}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/lib.sh
. "$srcdir/tests/lib.sh"
same() { # NAME FILE1 FILE2: equal sets, and neither empty
	if [ -s "$2" ] && [ -s "$3" ] && cmp -s "$2" "$3"; then result "$1" 0
	else diff "$2" "$3" | sed 's/^/  /'; result "$1" 1; fi
}

# check_lib NAME MAP NODE HEADERS...: the functions the headers declare
# RUNTIME_API, the ones MAP exports and the ones NAME.so exports are the
# same set, each export in version node NODE, soname NAME.so.0.
check_lib() {
	name=$1 map=$2 node=$3 lib=$(dirname "$2")/.libs/$1.so
	shift 3
	sed -n 's/^RUNTIME_API.*[ *]\(runtime_[a-z0-9_]*\)(.*/\1/p' "$@" | sort > "$tmp/header"
	sed -n 's/^[[:space:]]*\(runtime_[a-z0-9_]*\);.*/\1/p' "$srcdir/$map" | sort > "$tmp/map"
	if [ -f "$lib" ]; then
		exports "$lib" '^runtime_' | sort > "$tmp/exported"
	else
		echo "no $lib (a static-only build?)" > "$tmp/exported"
	fi
	same "$name: header RUNTIME_API = $map" "$tmp/header" "$tmp/map"
	same "$name.map = exported by $lib" "$tmp/map" "$tmp/exported"
	objdump -T "$lib" 2>/dev/null |
		awk -v node="$node" '$4 == ".text" && $(NF-1) == node && $NF !~ /^runtime_faults_/ { print $NF }' |
		sort > "$tmp/tagged"
	same "$name: every export is in version node $node" "$tmp/map" "$tmp/tagged"
	symbols=$srcdir/debian/${name}0.symbols
	if [ -d "$srcdir/debian" ]; then
		sed -n "s/^ \(runtime_[a-z0-9_]*\)@$node .*/\1/p" "$symbols" 2>/dev/null |
			sort > "$tmp/symbols"
		same "$name.map = ${symbols#"$srcdir"/}" "$tmp/map" "$tmp/symbols"
	fi
	soname=$(objdump -p "$lib" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
	[ "$soname" = "$name.so.0" ]; result "soname $name.so.0 (got '$soname')" $?
}

# libruntime: runtime.h, the toolkit's header it includes, runtime_metrics.h;
# libruntime-tls: runtime_tls.h; libruntime-http: runtime_http.h, runtime_ws.h.
check_lib libruntime runtime/libruntime.map RUNTIME_0 "$srcdir/include/runtime.h" \
	"$srcdir/include/runtime_toolkit.h" "$srcdir/include/runtime_metrics.h"
check_lib libruntime-tls tls/libruntime-tls.map RUNTIME_TLS_0 "$srcdir/include/runtime_tls.h"
check_lib libruntime-http http/libruntime-http.map RUNTIME_HTTP_0 "$srcdir/include/runtime_http.h" \
	"$srcdir/include/runtime_ws.h"

# Symbol hygiene: every global symbol a library defines, in its .so and
# its .a (an archive's objects keep their cross-file internals global,
# where a program's own names could clash with them). The preload
# library's libc replacements are its purpose (the names its .so exports
# besides runtime_*: its .a may define those and no others);
# __x86_return_thunk is the name GCC calls (the fiber switch's return,
# runtime/switch_x86_64.S); __odr_asan.* are AddressSanitizer's, one per
# global of an instrumented build.
libc_wrappers=$(nm -D --defined-only preload/.libs/libruntime-preload.so 2>/dev/null |
	awk 'NF == 3 && $3 !~ /^runtime_/ { sub(/@.*/, "", $3); print $3 }' | sort -u)
for lib in runtime/.libs/libruntime tls/.libs/libruntime-tls http/.libs/libruntime-http \
           preload/.libs/libruntime-preload; do
	for f in "$lib.so" "$lib.a"; do
		[ -f "$f" ] || continue
		flag=-g; [ "${f##*.}" = so ] && flag=-D
		nm $flag --defined-only "$f" 2>/dev/null | awk 'NF == 3 { sub(/@.*/, "", $3); print $3 }' |
			grep -v -e '^runtime_' -e '^RUNTIME_' -e '^__x86_return_thunk$' -e '^__odr_asan\.' |
			grep -vxF "$libc_wrappers" | sort -u > "$tmp/stray"
		[ ! -s "$tmp/stray" ] || sed 's/^/  unprefixed: /' "$tmp/stray"
		[ ! -s "$tmp/stray" ]; result "no unprefixed global symbol in $f" $?
	done
done

# libruntime needs no OpenSSL: TLS is libruntime-tls's (a program that
# only spawns fibers links no libssl).
if [ -f runtime/.libs/libruntime.so ]; then
	! objdump -p runtime/.libs/libruntime.so | grep -E 'NEEDED +lib(ssl|crypto)'
	result "libruntime.so needs no libssl or libcrypto" $?
fi

version=$(sed -n 's/^#define RUNTIME_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
	"$srcdir/include/runtime.h" | paste -sd.)
package=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' config.h)
[ -n "$version" ] && [ "$version" = "$package" ]
result "header version $version = package version $package" $?

summary
