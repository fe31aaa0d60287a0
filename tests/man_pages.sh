#!/bin/sh
# SPDX-License-Identifier: MIT
# man_pages.sh - the man pages cover the ABI and ship in good order:
#  - every function libruntime.so, libruntime-tls.so and libruntime-http.so
#    export, and every
#    runtime_* function of libruntime-preload.so, has man/<name>.3 (a page, or a '.so' link to
#    one), and that page's SYNOPSIS shows its prototype as the header
#    declares it (whitespace aside);
#  - every man/*.3 and man/*.7 formats without a single groff warning
#    (groff -ww, for the default device and for a terminal as man(1) uses),
#    and '.so' links resolve to a page whose NAME names the link;
#  - every page in man/ is in dist_man_MANS (the lists in man/*.am), and
#    everything listed there exists;
#  - the example program of runtime(7), between its example-begin and
#    example-end comments, compiles without a warning and links against
#    the library just built.
# Run from the build directory (make check does); srcdir as for the other
# tests. Needs nm and groff (Debian: binutils, groff-base).
set -u
srcdir=${srcdir:-.}
lib=runtime/.libs/libruntime.so
preload=preload/.libs/libruntime-preload.so
tls=tls/.libs/libruntime-tls.so
http=http/.libs/libruntime-http.so
man=$srcdir/man
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/lib.sh
. "$srcdir/tests/lib.sh"
finish() { # never a pass with nothing checked
	[ "$passed" -gt 0 ] || result "something was checked" 1
	summary
	exit
}

for tool in nm groff; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		result "$tool is installed (Debian: binutils, groff-base)" 1
		finish
	fi
done

# ------------------------------------------------------------ the exports
: > "$tmp/symbols"
for l in "$lib:^runtime_" "$preload:^runtime_" "$tls:^runtime_" "$http:^runtime_"; do
	file=${l%%:*}
	if [ ! -f "$file" ]; then
		result "$file exists (a static-only build cannot be checked)" 1
		continue
	fi
	exports "$file" "${l#*:}" > "$tmp/one"
	n=$(wc -l < "$tmp/one")
	[ "$n" -gt 0 ]; result "nm finds the functions of $file ($n)" $?
	cat "$tmp/one" >> "$tmp/symbols"
done
sort -u "$tmp/symbols" -o "$tmp/symbols"
[ -s "$tmp/symbols" ] || finish

# The page a man/NAME.3 shows: itself, or the target of its '.so' line.
target() {
	sed -n '1s|^\.so man[37]/\(.*\)$|\1|p' "$man/$1"
}

# Header prototypes, one a line, as "name<TAB>normalised prototype".
# Normalised: no attributes, no spaces around ( ) , * ; and single spaces.
normalise() {
	sed -e 's/[[:space:]][[:space:]]*/ /g' -e 's/ *\([(),*;]\) */\1/g' \
		-e 's/^ //' -e 's/ $//'
}
for h in "$srcdir"/include/runtime*.h "$srcdir/preload/runtime_preload.h"; do
	awk '/^(RUNTIME_API|__attribute__\(\(visibility\("default"\)\)\)) / { decl = ""; on = 1 }
	     on { decl = decl " " $0 }
	     on && /;/ { print decl; on = 0 }' "$h"
done | sed -e 's/RUNTIME_API//' -e 's/__attribute__((visibility("default")))//' \
	-e 's/RUNTIME_PRINTF([0-9, ]*)//' |
	normalise | sed -n 's/^\(.*[ *]\)\?\(runtime_[a-z0-9_]*\)(/\2\t&/p' > "$tmp/protos"
[ -s "$tmp/protos" ]; result "prototypes read from the headers" $?

# A page's SYNOPSIS as one normalised line: groff font requests, quotes
# and escapes removed.
synopsis() {
	sed -n '/^\.SH SYNOPSIS/,/^\.SH /p' "$man/$1" |
		sed -e '/^\.SH/d' -e '/^\.\(nf\|fi\|PP\)$/d' -e 's/^\.[BIR]\{1,2\} //' \
			-e 's/"//g' -e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/\\&//g' |
		tr '\n' ' ' | normalise
}

missing=
while read -r sym; do
	if [ ! -f "$man/$sym.3" ]; then
		missing="$missing $sym"
		continue
	fi
	page=$(target "$sym.3")
	page=${page:-$sym.3}
	proto=$(awk -F '\t' -v s="$sym" '$1 == s { print $2; exit }' "$tmp/protos")
	if [ -z "$proto" ]; then
		result "$sym: declared in include/runtime*.h or preload/runtime_preload.h" 1
	elif [ -f "$man/$page" ] && synopsis "$page" | grep -qF -- "$proto"; then
		result "$sym: man/$page shows its prototype" 0
	else
		echo "  header: $proto"
		result "$sym: man/$page shows its prototype as the header declares it" 1
	fi
done < "$tmp/symbols"
if [ -n "$missing" ]; then
	echo "functions without a page in man/:"
	for sym in $missing; do echo "  $sym"; done
fi
[ -z "$missing" ]; result "every exported function has man/<name>.3" $?

# -------------------------------------------------------------- rendering
# '.so man3/x.3' is resolved as man(1) does after installation: from a
# directory with man3/ and man7/ (both the source man/ here).
case $man in /*) absman=$man ;; *) absman=$(pwd)/$man ;; esac
mkdir "$tmp/root" && ln -s "$absman" "$tmp/root/man3" && ln -s "$absman" "$tmp/root/man7"
pages=$(cd "$man" && ls -- *.3 *.7 2>/dev/null)
[ -n "$pages" ]; result "man/ has pages" $?
for p in $pages; do
	sec=${p##*.}
	out=$(cd "$tmp/root" &&
		groff -ww -z -man "man$sec/$p" 2>&1 &&
		groff -ww -z -man -Tutf8 -rLL=78n "man$sec/$p" 2>&1)
	ok=$?
	[ -z "$out" ] || { ok=1; printf '%s\n' "$out" | sed 's/^/  /'; }
	result "$p formats without warnings" $ok
	t=$(target "$p")
	if [ -n "$t" ]; then
		# A link: its target is a page (not a link) whose NAME names it.
		name=${p%.*}
		[ -f "$man/$t" ] && [ -z "$(target "$t")" ] &&
			sed -n '/^\.SH NAME/{n;p;}' "$man/$t" | tr ',' ' ' |
			grep -qw -- "$name"
		result "$p links to $t, whose NAME lists $name" $?
	else
		th=$(sed -n 's/^\.TH \([^ ]*\) \([^ ]*\) .*/\1.\2/p' "$man/$p")
		[ "$th" = "$p" ]; result "$p: .TH names it ($th)" $?
	fi
done

# --------------------------------------------------------- dist_man_MANS
# Each man/*.am lists a part's pages in one MAN_ variable; Makefile.am
# includes every one of them and installs every variable.
cat "$man"/*.am 2>/dev/null |
	grep -o 'man/[A-Za-z0-9_.-]*\.[37]' | sed 's|^man/||' | sort > "$tmp/listed"
printf '%s\n' $pages | sort > "$tmp/present"
installs=$(sed -n 's/^dist_man_MANS = //p' "$srcdir/Makefile.am")
ok=0
for am in "$man"/*.am; do
	var=$(sed -n 's/^\(MAN_[A-Z_]*\) =.*/\1/p' "$am")
	grep -q "^include \$(srcdir)/man/${am##*/}\$" "$srcdir/Makefile.am" || ok=1
	case " $installs " in *" \$($var) "*) ;; *) ok=1 ;; esac
done
result "Makefile.am includes every man/*.am and installs its MAN_ list" $ok
unlisted=$(comm -23 "$tmp/present" "$tmp/listed")
[ -z "$unlisted" ] || printf '  not listed: %s\n' $unlisted
[ -z "$unlisted" ]; result "every page in man/ is in a man/*.am list" $?
absent=$(comm -13 "$tmp/present" "$tmp/listed")
[ -z "$absent" ] || printf '  listed, no such file: %s\n' $absent
[ -z "$absent" ]; result "every page listed exists" $?
dups=$(uniq -d "$tmp/listed")
[ -z "$dups" ] || printf '  listed twice: %s\n' $dups
[ -z "$dups" ]; result "no page is listed twice" $?

# ----------------------------------------------- runtime(7)'s example
sed -n '/^\.\\" example-begin/,/^\.\\" example-end/p' "$man/runtime.7" |
	sed -e '/^\.\\"/d' -e '/^\.EX$/d' -e '/^\.EE$/d' \
		-e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/\\&//g' > "$tmp/example.c"
grep -q 'int main' "$tmp/example.c"; result "runtime(7) has an example program" $?
if [ -f "$lib" ]; then
	# shellcheck disable=SC2086 # SAN_CFLAGS: words
	${CC:-cc} ${SAN_CFLAGS:-} -Wall -Wextra -Werror -I"$srcdir/include" -o "$tmp/example" "$tmp/example.c" \
		-Lruntime/.libs -lruntime > "$tmp/cc.log" 2>&1
	ok=$?
	sed 's/^/  /' "$tmp/cc.log"
	result "runtime(7)'s example compiles and links against $lib" $ok
fi

finish
