#!/bin/sh
# SPDX-License-Identifier: MIT
# abi.sh - the ABI is written down once and kept: the functions the header
# declares RUNTIME_API, the ones runtime/libruntime.map exports and the
# ones the built libruntime.so exports are the same set; the soname is
# libruntime.so.0; and the header's version agrees with the package's and
# with runtime_version() (checked by tests/check_core).
set -u
srcdir=${srcdir:-.}
lib=runtime/.libs/libruntime.so
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/lib.sh
. "$srcdir/tests/lib.sh"
same() { # NAME FILE1 FILE2: equal sets, and neither empty
	if [ -s "$2" ] && [ -s "$3" ] && cmp -s "$2" "$3"; then result "$1" 0
	else diff "$2" "$3" | sed 's/^/  /'; result "$1" 1; fi
}

# Every public header: runtime.h and those it includes (toolkit, TLS).
sed -n 's/^RUNTIME_API.*[ *]\(runtime_[a-z0-9_]*\)(.*/\1/p' "$srcdir"/include/runtime*.h |
	sort > "$tmp/header"
sed -n 's/^[[:space:]]*\(runtime_[a-z0-9_]*\);.*/\1/p' "$srcdir/runtime/libruntime.map" |
	sort > "$tmp/map"
if [ -f "$lib" ]; then
	exports "$lib" '^runtime_' | sort > "$tmp/exported"
else
	echo "no $lib (a static-only build?)" > "$tmp/exported"
fi
same "header RUNTIME_API = libruntime.map" "$tmp/header" "$tmp/map"
same "libruntime.map = exported by $lib" "$tmp/map" "$tmp/exported"

# Every export carries the map's version node.
objdump -T "$lib" 2>/dev/null |
	awk '$4 == ".text" && $(NF-1) == "RUNTIME_0" && $NF !~ /^runtime_faults_/ { print $NF }' |
	sort > "$tmp/tagged"
same "every export is in version node RUNTIME_0" "$tmp/map" "$tmp/tagged"

soname=$(objdump -p "$lib" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = libruntime.so.0 ]; result "soname libruntime.so.0 (got '$soname')" $?

version=$(sed -n 's/^#define RUNTIME_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
	"$srcdir/include/runtime.h" | paste -sd.)
package=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' config.h)
[ -n "$version" ] && [ "$version" = "$package" ]
result "header version $version = package version $package" $?

summary
