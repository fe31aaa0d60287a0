#!/bin/bash
# SPDX-License-Identifier: MIT
# preload_ld.sh - libruntime-preload through LD_PRELOAD: tests/preload_target,
# which is not linked with it, must see its blocking read park the fiber
# (without the library that read blocks the core thread for 10 s and the
# program says "blocked").
# Sanitizer builds skip: a sanitizer's runtime must be the first library
# loaded, and an LD_PRELOAD'ed library comes before it (ASan refuses to
# run); tests/check_preload covers the library linked in, under them too.
set -u
# shellcheck source=tests/lib.sh
. "${srcdir:-.}/tests/lib.sh"
case "${RUNTIME_SANITIZER:-none}" in
none) ;;
*)
	skip_all "LD_PRELOAD cannot precede the $RUNTIME_SANITIZER runtime;" \
		"check_preload tests the library linked in instead"
	;;
esac
lib=$PWD/preload/.libs/libruntime-preload.so
[ -f "$lib" ] || { echo "preload_ld: FAIL: no $lib" >&2; exit 1; }
export LD_LIBRARY_PATH=$PWD/runtime/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

out=$(LD_PRELOAD=$lib ./tests/preload_target)
rc=$?
[ "$rc" -eq 77 ] && skip_all "the runtime cannot start here"
[ "$rc" -eq 0 ] && [ "$out" = parked ]
result "with LD_PRELOAD, the read parked its fiber (exit $rc, \"$out\")" $?
summary
