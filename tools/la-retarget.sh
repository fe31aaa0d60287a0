#!/bin/sh
# SPDX-License-Identifier: MIT
# la-retarget.sh LIBDIR LA... - point libtool libraries of the build tree
# at the directory they are about to be installed in. libtool records the
# libdir a library was linked for in its .la, and refuses to install one
# that it must relink (libruntime-preload links the uninstalled
# libruntime) anywhere else: `make install prefix=DIR` after a plain
# ./configure failed half-way. Only the text changes - libdir, the
# relink command's -rpath, and the installed copy's (.libs/NAME.lai)
# libdir and dependencies in the old libdir - and each file keeps its
# timestamp, so nothing is rebuilt; the relink at install then links for
# LIBDIR (into a temporary file beside the build tree's library, which
# stays as it was). Makefile.am runs it just before the libraries are
# installed.
set -eu
new=$1
shift
for la in "$@"; do
	[ -f "$la" ] || continue
	old=$(sed -n "s/^libdir='\(.*\)'\$/\1/p" "$la")
	[ -n "$old" ] && [ "$old" != "$new" ] || continue
	lai=$(dirname "$la")/.libs/$(basename "$la")i
	for f in "$la" "$lai"; do
		[ -f "$f" ] || continue
		# old, where it stands for the libdir: quoted, after -rpath, or as
		# the directory of a file in it.
		OLD=$old NEW=$new awk '{
			old = ENVIRON["OLD"]; new = ENVIRON["NEW"]; out = ""; s = $0
			while ((i = index(s, old)) > 0) {
				pre = i > 1 ? substr(s, i - 1, 1) : substr(out, length(out), 1)
				rest = substr(s, i + length(old))
				post = substr(rest, 1, 1)
				tail = rest; sub(/[ \047"].*/, "", tail)
				ok = (pre == "\047" || pre == " ") &&
				     (post == "\047" || post == " " || post == "\"" ||
				      (post == "/" && index(substr(tail, 2), "/") == 0))
				out = out substr(s, 1, i - 1) (ok ? new : old)
				s = rest
			}
			print out s
		}' "$f" > "$f.tmp"
		touch -r "$f" "$f.tmp"
		mv -f "$f.tmp" "$f"
	done
	echo "  RETARGET $la: $old -> $new"
done
