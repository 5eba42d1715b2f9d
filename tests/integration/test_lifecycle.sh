# SPDX-License-Identifier: GPL-2.0
# The loader's lifecycle under faults: signals at any time, a blocked module,
# kill -9, vanishing targets, concurrent runs. Each t_* is one promise.
source "$ROOT/tests/lib_pmtu.sh"

# Programs attached to the test cgroup (empty when none) and our pin folder.
nothing_attached() {
	[ -z "$(cgroup_progs)" ] || fail "$1: programs left on $CG: $(cgroup_progs)"
	[ ! -e "$PIN" ] || fail "$1: pin folder $PIN left behind"
}

# A SIGTERM at any moment of start-up ends the run cleanly: exit 0 (or a
# one-line error), never death by the signal (rc 143), nothing left attached.
# Until main() runs (fork, exec, the dynamic loader) no program can act on a
# signal, and that window is too short to hit at will; so the run starts
# with the signals blocked (env --block-signal), as if one had arrived before
# main(): a run must still take it (from its signalfd) and end cleanly.
t_lifecycle_sigterm_during_startup() {
	make_cgroup
	local i rc pid delay bad=0 early=0
	for i in $(seq 40); do
		env --block-signal=INT,TERM,HUP "$SP" run --pin-path "$PIN" --cgroup "$CG" \
			--modules tcpstats,pmtu --interval 0 >"$TMP/out" 2>"$TMP/err" &
		pid=$!
		delay=$((5 + RANDOM % 120))
		sleep "0.$(printf %03d "$delay")"
		grep -q '^stackpilot: attached' "$TMP/out" || early=$((early + 1))
		kill -TERM "$pid"
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$pid" 2>/dev/null; then
			echo "cycle $i: SIGTERM after ${delay} ms: still running 5 s later"
			kill -KILL "$pid"; wait "$pid"
			bad=$((bad + 1)); [ "$bad" -ge 3 ] && break; continue
		fi
		wait "$pid"; rc=$?
		if [ "$rc" != 0 ] && ! { [ "$rc" = 1 ] && [ "$(wc -l <"$TMP/err")" = 1 ]; }; then
			echo "cycle $i: SIGTERM after ${delay} ms: exit $rc, stderr: $(cat "$TMP/err")"
			bad=$((bad + 1))
		fi
		nothing_attached "cycle $i (SIGTERM after ${delay} ms)"
	done
	echo "40 cycles, $early signalled before 'attached'"
	assert_eq "$bad" 0 "runs that died by the signal, hung or failed unclearly"
	assert_ge "$early" 1 "cycles signalled during start-up"
}

# A pmtu search of a destination that answers nothing (10 tries of 10 s per
# size) runs beside everything else: fragguard's memory sample and the
# status line keep coming every interval.
t_lifecycle_search_does_not_block() {
	pmtu_topo 1400 noprobe; make_cgroup
	sp_start --modules pmtu,fragguard --cgroup "sp-test-$ID" --iface s0 --mtu-probing 1 --interval 1
	sp_ctl set pmtu.max_probes=10 pmtu.probe_timeout_ms=10000 >/dev/null || fail set
	xfer 10.30.2.2 1000000 >/dev/null &
	BG_PIDS+=($!)
	for _ in $(seq 100); do
		[ "$(sp_json '.modules.pmtu.black_hole_suspects')" -ge 1 ] 2>/dev/null && break
		sleep 0.1
	done
	assert_ge "$(sp_json '.modules.pmtu.black_hole_suspects')" 1 "black-hole suspects reported"
	sleep 0.5	# the search has begun: its base probes wait 10 s each
	# Incomplete datagrams into S: reassembly memory the sample must see.
	ip netns exec "$NS_RT" "$FRAGFLOOD" 10.30.1.1 200 >/dev/null || fail fragflood
	local kmem lines0 lines1 mem
	kmem=$(ip netns exec "$NS_S" awk '/^FRAG:/ { print $5 }' /proc/net/sockstat)
	assert_ge "$kmem" 100000 "reassembly memory in S"
	sleep 1.5
	mem=$(sp_json '.modules.fragguard.ipv4.mem')
	echo "kernel $kmem, fragguard sample $mem, while: $(tail -1 "$TMP/sp.err")"
	assert_ge "$mem" $((kmem / 2)) "fragguard's sample of reassembly memory during the search"
	lines0=$(grep -c '^stackpilot pid' "$TMP/sp.out")
	sleep 3.2
	lines1=$(grep -c '^stackpilot pid' "$TMP/sp.out")
	assert_ge $((lines1 - lines0)) 3 "status lines in 3.2 s with --interval 1"
	grep -q 'cannot probe it' "$TMP/sp.err" && fail "search ended before the checks"
	# A signal ends the run at once, search in flight or not.
	local t0=$(date +%s%N)
	sp_stop || fail "exit during a search"
	assert_ge 1000 $(( ($(date +%s%N) - t0) / 1000000 )) "ms to exit during a search"
}
