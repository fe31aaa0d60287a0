#!/bin/sh
# SPDX-License-Identifier: MIT
# gen-pc.sh IN OUT PREFIX EXEC_PREFIX LIBDIR INCLUDEDIR VERSION URL - write
# a pkg-config file from its .in at make time, from make's directories, so
# that `make install prefix=DIR` installs files that name DIR rather than
# the prefix configure was given. A directory below the prefix (or the
# exec prefix) is written relative to it, as configure writes it, so that
# pkg-config --define-variable=prefix=... moves them all. OUT is replaced
# only when its text changes (make runs this every time).
set -eu
[ $# -eq 8 ] || { echo "usage: $0 IN OUT PREFIX EXEC_PREFIX LIBDIR INCLUDEDIR VERSION URL" >&2; exit 2; }
in=$1 out=$2

# rel DIR BASE NAME: DIR, as ${NAME}/rest when it lies below BASE.
rel() {
	case $1 in
	"$2") printf '${%s}' "$3" ;;
	"$2"/*) printf '${%s}%s' "$3" "${1#"$2"}" ;;
	*) printf '%s' "$1" ;;
	esac
}
PC_prefix=$3
PC_exec_prefix=$(rel "$4" "$3" prefix)
PC_libdir=$(rel "$5" "$4" exec_prefix)
PC_includedir=$(rel "$6" "$3" prefix)
PC_PACKAGE_VERSION=$7
PC_PACKAGE_URL=$8
export PC_prefix PC_exec_prefix PC_libdir PC_includedir PC_PACKAGE_VERSION PC_PACKAGE_URL

# @NAME@ -> $PC_NAME, literally (no regex or escape in the values).
awk '{
	out = ""
	while (match($0, /@[A-Za-z_]+@/)) {
		name = substr($0, RSTART + 1, RLENGTH - 2)
		value = ("PC_" name) in ENVIRON ? ENVIRON["PC_" name] : substr($0, RSTART, RLENGTH)
		out = out substr($0, 1, RSTART - 1) value
		$0 = substr($0, RSTART + RLENGTH)
	}
	print out $0
}' "$in" > "$out.tmp"
if cmp -s "$out.tmp" "$out"; then
	rm -f "$out.tmp"
else
	mv -f "$out.tmp" "$out"
	echo "  GEN      $out"
fi
