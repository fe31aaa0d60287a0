#!/bin/bash
# SPDX-License-Identifier: MIT
# aarch64_switch.sh - cross-build tests/aarch64_switch.c with the aarch64
# context switch and run it under qemu-aarch64. Skips (77) where the cross
# compiler or qemu-user is missing; fails then in CI (./build.sh check
# installs both).
set -u
srcdir=${srcdir:-$(dirname "$0")/..}
# shellcheck source=tests/lib.sh
. "$srcdir/tests/lib.sh"
cc=aarch64-linux-gnu-gcc
if ! command -v "$cc" >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
	skip_all --installed "needs $cc and qemu-aarch64 (Debian: gcc-aarch64-linux-gnu qemu-user)"
fi
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
"$cc" -std=gnu11 -O2 -static -I. -I"$srcdir/include" -o "$bin" \
	"$srcdir/tests/aarch64_switch.c" "$srcdir/runtime/context.c" "$srcdir/runtime/switch_aarch64.S" ||
	{ echo "aarch64_switch: FAIL: cross build" >&2; exit 1; }
exec qemu-aarch64 "$bin"
