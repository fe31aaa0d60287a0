#!/bin/sh
# SPDX-License-Identifier: MIT
# abi.sh - the ABI is written down once and kept, for libruntime and
# libruntime-http each: the functions its headers declare RUNTIME_API, the
# ones its map (runtime/libruntime.map, http/libruntime-http.map) exports
# and the ones the built library exports are the same set; the soname is
# NAME.so.0; and the header's version agrees with the package's and
# with runtime_version() (checked by tests/check_core).
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
	soname=$(objdump -p "$lib" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
	[ "$soname" = "$name.so.0" ]; result "soname $name.so.0 (got '$soname')" $?
}

# libruntime: runtime.h and the headers it includes (toolkit, TLS);
# libruntime-http: runtime_http.h.
set --
for h in "$srcdir"/include/runtime*.h; do
	[ "${h##*/}" = runtime_http.h ] || set -- "$@" "$h"
done
check_lib libruntime runtime/libruntime.map RUNTIME_0 "$@"
check_lib libruntime-http http/libruntime-http.map RUNTIME_HTTP_0 "$srcdir/include/runtime_http.h"

version=$(sed -n 's/^#define RUNTIME_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
	"$srcdir/include/runtime.h" | paste -sd.)
package=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' config.h)
[ -n "$version" ] && [ "$version" = "$package" ]
result "header version $version = package version $package" $?

summary
