#!/bin/bash
# SPDX-License-Identifier: MIT
# plot.sh - the README's performance plots, drawn by gnuplot (Debian's
# gnuplot-nox) from what the benchmarks print:
#
#   bench/plot.sh RESULTS OUT
#
# RESULTS holds the output of make bench-echo (echo.txt), make bench-http
# (http.txt), make bench-micro (micro.txt) and the peers' micro figures
# (micro_peers.txt: shared/peers' go_micro and switch_peers), each as
# printed; a missing one is skipped with a note. OUT gets one SVG per
# plot: echo.svg (msgs/s and p99 per server), http.svg (requests/s, plain
# and pipelined, and the plain p99 per server) and micro.svg (ns per
# operation against the peer's). echo.txt and http.txt give their
# "--- medians" lines (each bar is the median of the interleaved rounds);
# the micro files may hold several rounds, and each bar is their median.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 RESULTS OUT" >&2; exit 2; }
results=$1 out=$2
command -v gnuplot >/dev/null || { echo "plot.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# medians FILE: the lines after "--- medians", one per server.
medians() { sed -n '/^--- medians/,$p' "$1" | grep -E '^(mode|server)='; }

# field KEY: the value of KEY=... on each stdin line ("n/a" stays).
field() { sed -n "s/.*\\<$1=\\([^ ]*\\).*/\\1/p"; }

# A header every plot shares: SVG, one font, light grid, bars.
style() {
	cat <<-EOF
	set terminal svg size ${1:-820},${2:-420} font "sans,11" background "white"
	set style fill solid 0.85 border -1
	set boxwidth 0.7
	set grid ytics lc rgb "#dddddd"
	set key off
	set yrange [0:*]
	set xtics nomirror noenhanced rotate by -35
	set bmargin 6
	set ytics nomirror
	set border 3
	EOF
}

# panel TITLE DATA COLUMN SCALE COLOR: one bar chart of DATA's COLUMN
# divided by SCALE, each bar labelled with its value, servers on the x axis.
panel() {
	cat <<-EOF
	set title "$1"
	plot "$2" using 0:(\$$3 / $4):xtic(1) with boxes lc rgb "$5", \
	     "" using 0:(\$$3 / $4):(sprintf("%.0f", \$$3 / $4)) with labels offset 0,0.7 font ",9"
	EOF
}

plot_echo() {
	local f=$results/echo.txt
	[ -f "$f" ] || { echo "plot.sh: no $f: echo.svg skipped"; return; }
	medians "$f" | while read -r line; do
		printf '%s %s %s\n' "$(field server <<<"$line")" "$(field msgs_per_s <<<"$line")" \
			"$(field p99_us <<<"$line")"
	done > "$tmp/echo.dat"
	{
		style 820 420
		cat <<-EOF
		set output "$out/echo.svg"
		set multiplot layout 1,2 title "Echo, 64 connections x 64-byte messages, server on one core (median of rounds)"
		EOF
		panel "thousand messages per second (higher is better)" "$tmp/echo.dat" 2 1000 "#4477aa"
		panel "p99 latency, us (lower is better)" "$tmp/echo.dat" 3 1 "#cc6677"
		echo "unset multiplot"
	} | gnuplot
	echo "plot.sh: $out/echo.svg"
}

# The HTTP servers in the order of the plain run, with plain and pipelined
# requests/s side by side, and the plain p99.
plot_http() {
	local f=$results/http.txt
	[ -f "$f" ] || { echo "plot.sh: no $f: http.svg skipped"; return; }
	medians "$f" > "$tmp/http.med"
	grep '^mode=plain' "$tmp/http.med" | field server | while read -r s; do
		local plain pipe p99
		plain=$(grep "^mode=plain server=$s " "$tmp/http.med" | field rps)
		pipe=$(grep "^mode=pipeline server=$s " "$tmp/http.med" | field rps || true)
		p99=$(grep "^mode=plain server=$s " "$tmp/http.med" | field p99_us)
		printf '%s %s %s %s\n' "$s" "$plain" "${pipe:-0}" "${p99/n\/a/0}"
	done > "$tmp/http.dat"
	{
		style 980 440
		cat <<-EOF
		set output "$out/http.svg"
		set multiplot layout 1,3 title "HTTP GET /plaintext, wrk -c64, server on one core (median of rounds)"
		EOF
		panel "thousand requests/s, no pipelining" "$tmp/http.dat" 2 1000 "#4477aa"
		panel "thousand requests/s, pipelined x16" "$tmp/http.dat" 3 1000 "#228833"
		panel "p99 latency, us, no pipelining" "$tmp/http.dat" 4 1 "#cc6677"
		echo "unset multiplot"
	} | gnuplot
	echo "plot.sh: $out/http.svg"
}

# The micro figures that have a peer (shared/peers' go_micro and
# switch_peers), as "ours:peer's:label:who".
micro_pairs="switch_ns:boost_fcontext_ns:switch:Boost fcontext
yield_ns:go_yield_ns:yield:Go
spawn_join_ns:go_spawn_join_ns:spawn+join:Go
chan_pingpong_ns:go_chan_pingpong_ns:channel ping-pong:Go
mutex_uncontended_ns:pthread_mutex_ns:mutex lock+unlock:pthread
offload_roundtrip_ns:unpinned_pthread_pool_roundtrip_ns:offload round trip:pthread pool"

# median KEY FILE...: the median of every KEY=value in the files (rounds).
median() {
	local key=$1
	shift
	tr ' ' '\n' < <(cat "$@") | sed -n "s/^$key=\([0-9.]*\)$/\1/p" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# micro.txt (make bench-micro) against micro_peers.txt (the peers' output),
# both possibly several rounds: the median of each, in ns per operation.
plot_micro() {
	local f=$results/micro.txt peers=$results/micro_peers.txt
	[ -f "$f" ] && [ -f "$peers" ] ||
		{ echo "plot.sh: no $f or $peers: micro.svg skipped"; return; }
	while IFS=: read -r ours theirs label who; do
		local a b
		a=$(median "$ours" "$f") b=$(median "$theirs" "$peers")
		[ -n "$a" ] && [ -n "$b" ] && printf '"%s\\n(%s)" %s %s\n' "$label" "$who" "$a" "$b"
	done <<<"$micro_pairs" > "$tmp/micro.dat"
	[ -s "$tmp/micro.dat" ] || { echo "plot.sh: no figure with a peer in $f" >&2; return 1; }
	{
		style 1000 460
		cat <<-EOF
		set output "$out/micro.svg"
		set title "Micro figures against peers, ns per operation, one core (median of rounds; log scale, lower is better)"
		set logscale y
		set yrange [1:*]
		set key top left
		set xtics norotate
		set style data histograms
		set style histogram clustered gap 1
		set boxwidth 0.9
		plot "$tmp/micro.dat" using 2:xtic(1) title "runtime" lc rgb "#4477aa", \
		     "" using 3 title "peer" lc rgb "#bbbbbb", \
		     "" using (\$0 - 0.15):2:(sprintf(\$2 < 100 ? "%.3g" : "%.0f", \$2)) with labels offset 0,0.7 font ",9" notitle, \
		     "" using (\$0 + 0.15):3:(sprintf(\$3 < 100 ? "%.3g" : "%.0f", \$3)) with labels offset 0,0.7 font ",9" notitle
		EOF
	} | gnuplot
	echo "plot.sh: $out/micro.svg"
}

plot_echo
plot_http
plot_micro
