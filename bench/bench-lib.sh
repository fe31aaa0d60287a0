# shellcheck shell=bash
# SPDX-License-Identifier: MIT
#
# bench-lib.sh: the helpers bench-echo.sh, bench-http.sh, bench-tls.sh and
# bench-idle.sh share, sourced by them: free ports, waiting for a server to
# listen, stopping it, a process's CPU time, medians and ratios, pinning,
# building a Go peer.  take_port uses the sourcing script's die(),
# PORT_BASE and next_port, and sets port; stop_server its srv_pid and
# STOP_WAIT (tenths of a second, default 30); stopped_clean its is_ours()
# and $tmp/NAME.log; check_pinning its SERVER_CPU, LOAD_CPU and note(),
# and sets pin_srv, pin_load and srv_cpus; build_go its $tmp and note().

listening() { # listening PORT: something listens on 127.0.0.1:PORT
	if command -v ss >/dev/null; then
		[ -n "$(ss -Hltn "( sport = :$1 )" 2>/dev/null)" ]
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

# A port is free if no socket of any state uses it (ss), or, without ss,
# if nothing accepts a connection on it.
port_free() {
	if command -v ss >/dev/null; then
		[ -z "$(ss -Htan "( sport = :$1 )" 2>/dev/null)" ]
	else
		! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

take_port() {
	local tries=0
	while ! port_free "$next_port"; do
		next_port=$((next_port + 1)); tries=$((tries + 1))
		[ "$tries" -lt 1000 ] || die "no free port from $PORT_BASE on"
	done
	# shellcheck disable=SC2034 # read by the sourcing script
	port=$next_port
	next_port=$((next_port + 1))
}

# Bounded (10 s) wait until $2 listens, failing early if server $1 died.
wait_listening() {
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "$1" 2>/dev/null || return 1
		listening "$2" && return 0
		sleep 0.1
	done
	return 1
}

# CPU time of process $1 in clock ticks, all threads, as "utime stime";
# comm (the field in parentheses) may hold spaces or ")".
cpu_split() {
	local s
	s=$(<"/proc/$1/stat") || return 1
	s=${s##*) }
	# shellcheck disable=SC2086 # split into fields on purpose
	set -- $s
	echo "${12} ${13}"
}

# CPU time of process $1: utime + stime in clock ticks.
cpu_ticks() {
	local u s
	read -r u s <<<"$(cpu_split "$1")" && [ -n "$s" ] || return 1
	echo $((u + s))
}

# The median of the numbers on standard input, or n/a if there are none.
median_of() {
	sort -g | awk '{ v[NR] = $1 }
		END { if (!NR) print "n/a"
		      else if (NR % 2) print v[(NR + 1) / 2]
		      else printf "%.10g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

ratio() { # ratio A B: A/B to 3 places, or n/a
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a == "n/a" || b == "n/a" || b == 0) print "n/a"
		else printf "%.3f", a / b }'
}

# paired A B: lines "server value round" on standard input; the median over
# the rounds both ran of A's value over B's, to 3 places, or n/a.  Rounds
# are interleaved, so a paired ratio cancels the drift that moves a whole
# round (on a shared VM, the largest part of the spread).
paired() {
	local m
	m=$(awk -v a="$1" -v b="$2" '$2 != "n/a" && $1 == a { x[$3] = $2 }
		$2 != "n/a" && $1 == b { y[$3] = $2 }
		END { for (r in x) if ((r in y) && y[r] > 0) print x[r] / y[r] }' | median_of)
	ratio "$m" 1
}

# The CPU list servers are pinned to: CORES CPUs from SERVER_CPU on, LOAD_CPU
# last and only if there is no other.  Uses the sourcing script's CORES,
# SERVER_CPU, LOAD_CPU, note() and die().
server_cpus() {
	local n i cpus=() all
	all=$(nproc --all)
	for ((i = 0; i < all && ${#cpus[@]} < CORES; i++)); do
		n=$(((SERVER_CPU + i) % all))
		[ "$n" -eq "$LOAD_CPU" ] || cpus+=("$n")
	done
	if [ "${#cpus[@]}" -lt "$CORES" ] && [ "$LOAD_CPU" -lt "$all" ]; then
		note "warning: only $all CPUs: servers share CPU $LOAD_CPU with the load"
		cpus+=("$LOAD_CPU")
	fi
	[ "${#cpus[@]}" -ge "$CORES" ] || die "CORES=$CORES but only $all CPUs"
	local IFS=,
	echo "${cpus[*]}"
}

# TERM first (every server exits on it), KILL after STOP_WAIT tenths of a
# second. Sets stop_status: "killed" if it took the KILL, else the exit
# status.
stop_server() {
	local i killed=false
	kill -TERM "$srv_pid" 2>/dev/null
	for ((i = 0; i < ${STOP_WAIT:-30}; i++)); do
		kill -0 "$srv_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$srv_pid" 2>/dev/null && killed=true
	wait "$srv_pid" 2>/dev/null
	stop_status=$?
	$killed && stop_status=killed
	srv_pid=
}

# The project's servers must exit 0 on TERM; peers (Go dies of it) may not.
# Prints a warning (TAG first) and fails if it did not go so.
stopped_clean() { # stopped_clean TAG NAME
	if [ "$stop_status" = killed ] || { [ "$stop_status" != 0 ] && is_ours "$2"; }; then
		echo "$1 warning=unclean_stop status=$stop_status"
		# shellcheck disable=SC2154 # tmp: the sourcing script's
		tail -3 "$tmp/$2.log" | sed 's/^/  | /'
		return 1
	fi
}

# Pin the server to SERVER_CPU and the load to LOAD_CPU where the machine
# has them (pin_srv, pin_load: command prefixes; srv_cpus: for the header).
check_pinning() {
	if command -v taskset >/dev/null && [ "$(nproc --all)" -gt "$LOAD_CPU" ] &&
		[ "$(nproc --all)" -gt "$SERVER_CPU" ]; then
		pin_srv=(taskset -c "$SERVER_CPU") pin_load=(taskset -c "$LOAD_CPU")
		srv_cpus=$SERVER_CPU
	else
		note "warning: cannot pin to CPUs $SERVER_CPU/$LOAD_CPU, running unpinned"
		srv_cpus=any pin_srv=() pin_load=()
	fi
}

build_go() { # build_go SRC OUT: a Go peer built into $tmp/OUT, or a note why not
	if ! command -v go >/dev/null; then
		note "skipping go: go not found"
		return 1
	fi
	if ! (cd "$tmp" && GO111MODULE=off GOCACHE=$tmp/go-cache go build -o "$tmp/$2" "$1") \
		>"$tmp/go-build.log" 2>&1; then
		note "skipping go: go build failed:"
		sed 's/^/  | /' "$tmp/go-build.log" | tail -5 >&2
		return 1
	fi
}
