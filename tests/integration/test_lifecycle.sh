# SPDX-License-Identifier: GPL-2.0
# The loader's lifecycle under faults: signals at any time, a blocked module,
# kill -9, vanishing targets, concurrent runs. Each t_* is one promise.
source "$ROOT/tests/lib_pmtu.sh"

# What a run may not leave: programs on the test cgroup, its pin folder.
nothing_attached() {
	[ -z "$(cgroup_progs)" ] || fail "$1: programs left on $CG: $(cgroup_progs)"
	[ ! -e "$PIN" ] || fail "$1: pin folder $PIN left behind"
}

# A SIGTERM at any moment of start-up ends the run cleanly: exit 0 (or a
# one-line error), never death by the signal (rc 143), nothing left attached.
# Until main() runs (exec, the dynamic loader) stackpilot cannot act on a
# signal; so the run starts with the signals blocked (env --block-signal),
# as if one had arrived before main(): a run must still take it (from its
# signalfd) and end cleanly.
# The delay counts from the exec of stackpilot, not from the fork: until
# its exec the child is this bash, and a SIGTERM there runs the trap it
# inherited from lib.sh, whose pending state the child then drops before
# it execs env. On a loaded machine the child waited up to 200 ms for a
# CPU, and such signals were lost (traced: signal_generate to the child
# while comm was bash, signal_deliver to bash's trap handler, then the
# execs of env and stackpilot): the run never saw a signal, and 5 s later
# the test found it in its loop. That was this test's CI flake, not the
# loader's.
t_lifecycle_sigterm_during_startup() {
	make_cgroup
	local i rc pid delay comm bad=0 early=0
	for i in $(seq 40); do
		env --block-signal=INT,TERM,HUP "$SP" run --pin-path "$PIN" --cgroup "$CG" \
			--modules tcpstats,pmtu --interval 0 >"$TMP/out" 2>"$TMP/err" &
		pid=$!
		BG_PIDS=("$pid")	# a run that ignores the signal dies with the test
		for _ in $(seq 5000); do
			read -r comm <"/proc/$pid/comm" 2>/dev/null || break
			[ "$comm" = stackpilot ] && break
			sleep 0.001
		done
		[ "$comm" = stackpilot ] || fail "cycle $i: the run did not exec stackpilot (comm '$comm')"
		delay=$((5 + RANDOM % 120))
		sleep "0.$(printf %03d "$delay")"
		grep -q '^stackpilot: attached' "$TMP/out" || early=$((early + 1))
		kill -TERM "$pid"
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$pid" 2>/dev/null; then
			# What a future failure needs to be explained: where the run
			# waits, and whether the signal is still pending (blocked) or gone.
			echo "cycle $i: SIGTERM after ${delay} ms: still running 5 s later:" \
				"$(tr '\n' ' ' <"/proc/$pid/status" | grep -oE '(SigPnd|ShdPnd|SigBlk):\s+[0-9a-f]+' | tr -s '\t\n ' ' ')" \
				"wchan $(cat "/proc/$pid/wchan" 2>/dev/null)," \
				"$(grep -c . "$TMP/out") lines of stdout"
			kill -TERM "$pid"
			for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -0 "$pid" 2>/dev/null && echo "  a second SIGTERM: still running 2 s later" ||
				echo "  a second SIGTERM: it ended"
			kill -KILL "$pid" 2>/dev/null; wait "$pid"
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
	pmtu_probe_counter
	sp_start --modules pmtu,fragguard --cgroup "sp-test-$ID" --iface s0 --mtu-probing 1 --interval 1
	sp_ctl set pmtu.max_probes=10 pmtu.probe_timeout_ms=10000 >/dev/null || fail "set pmtu.max_probes=10 pmtu.probe_timeout_ms=10000: exit $?"
	xfer 10.30.2.2 1000000 >/dev/null &
	BG_PIDS+=($!); disown
	for _ in $(seq 100); do
		[ "$(sp_json '.modules.pmtu.black_hole_suspects')" -ge 1 ] 2>/dev/null && break
		sleep 0.1
	done
	assert_ge "$(sp_json '.modules.pmtu.black_hole_suspects')" 1 "black-hole suspects reported"
	# The search has begun: its first probe is out, waiting up to 10 s.
	for _ in $(seq 50); do
		grep -q '10.30.2.2: .*searching its path MTU' "$TMP/sp.err" && break
		sleep 0.1
	done
	grep -q '10.30.2.2: .*searching its path MTU' "$TMP/sp.err" || fail "no search started: $(cat "$TMP/sp.err")"
	for _ in $(seq 20); do [ "$(pmtu_probes)" -ge 1 ] && break; sleep 0.1; done
	assert_ge "$(pmtu_probes)" 1 "probes sent towards 10.30.2.2 (S's output)"
	# Incomplete datagrams into S: reassembly memory the sample must see.
	ip netns exec "$NS_RT" "$FRAGFLOOD" 10.30.1.1 200 >/dev/null || fail "fragflood: exit $?"
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
	grep -q '10.30.2.2: path MTU\|10.30.2.2 answers neither\|10.30.2.2 stopped answering' "$TMP/sp.err" &&
		fail "search ended before the checks: $(grep 10.30.2.2 "$TMP/sp.err")"
	# A signal ends the run at once, search in flight or not.
	local t0=$(date +%s%N)
	sp_stop || fail "exit during a search: stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_ge 1000 $(( ($(date +%s%N) - t0) / 1000000 )) "ms to exit during a search"
}

# kill -9 leaves the route and the sysctl a run set; the next run in the
# namespace removes the one and restores the other.
t_lifecycle_sigkill_restores_route_and_sysctl() {
	pmtu_topo 1400; make_cgroup
	# Connections start at full size even with tcp_mtu_probing=2: they stall
	# into the black hole, and the search installs a route.
	ip netns exec "$NS_S" sysctl -qw net.ipv4.tcp_base_mss=1460
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 2
	sp_ctl set pmtu.route=1 >/dev/null || fail "set pmtu.route=1: exit $?"
	xfer 10.30.2.2 1000000 >/dev/null || true
	for _ in $(seq 50); do
		[ -n "$(ip -n "$NS_S" route show proto 0xa5)" ] && break
		sleep 0.1
	done
	[ -n "$(ip -n "$NS_S" route show proto 0xa5)" ] || fail "no route installed: $(cat "$TMP/sp.err")"
	assert_eq "$(ip netns exec "$NS_S" sysctl -n net.ipv4.tcp_mtu_probing)" 2 "tcp_mtu_probing while running"
	sp_stop KILL
	[ -n "$(ip -n "$NS_S" route show proto 0xa5)" ] || fail "the killed run's route went by itself"
	sp_start --modules pmtu --cgroup "sp-test-$ID"
	echo "after kill -9, the next run: $(grep 'killed run' "$TMP/sp.err")"
	assert_eq "$(ip -n "$NS_S" route show proto 0xa5)" "" "routes of a killed run after the next start"
	assert_eq "$(ip netns exec "$NS_S" sysctl -n net.ipv4.tcp_mtu_probing)" 0 "tcp_mtu_probing after the next start"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# kill -9 of a run of every module, then a run of tcpstats alone on the same
# pin folder: the dead run's pins of the other modules go at its start (get
# shows tcpstats only, a set of rehash fails), and its exit leaves nothing.
t_lifecycle_sigkill_fewer_modules_pins_removed() {
	local rc
	make_cgroup
	mk_netns "$NS_A"
	veth "$NS_A" "v${ID}a" "$NS_A" "v${ID}b"
	: >"$TMP/sp.err"
	sp_spawn nsenter --net="/run/netns/$NS_A" "$SP" run --pin-path "$PIN" --interval 0 \
		--cgroup "$CG" --modules all --iface "v${ID}a"
	[ -e "$PIN/rehash_cfg" ] && [ -e "$PIN/pmtu_cfg" ] && [ -e "$PIN/fragguard_cfg" ] ||
		fail "pins of every module: $(ls "$PIN")"
	sp_stop KILL
	sp_start --cgroup "$CG" --modules tcpstats
	grep -q "removed [0-9]* pins a killed run left in $PIN" "$TMP/sp.err" ||
		fail "no log line: $(cat "$TMP/sp.err")"
	assert_eq "$(ls "$PIN" | grep -Ev '^(tcpstats_.*|meta|targets)$' | tr '\n' ' ')" "" \
		"pins of other modules after the start of tcpstats alone"
	assert_eq "$(sp_ctl get | grep -v '^tcpstats\.' | tr '\n' ' ')" "" "tunables of other modules in get"
	sp_ctl set rehash.prob=77 >/dev/null 2>"$TMP/e"; rc=$?
	assert_eq "$rc" 1 "exit of set rehash.prob=77 with no rehash running ($(cat "$TMP/e"))"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	grep -q 'detached, pins removed' "$TMP/sp.out" || fail "no 'detached' line: $(tail -5 "$TMP/sp.out")"
	[ ! -e "$PIN" ] || fail "left in $PIN after the exit: $(ls "$PIN" | tr '\n' ' ')"
}

# One run per namespace sets tcp_mtu_probing: a second one asking for it is
# refused with one line and attaches nothing; the first one's exit restores
# the value from before it.
t_lifecycle_second_mtu_probing_refused() {
	netns_pair; make_cgroup
	SP_NS=$NS_A
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	local progs=$(cgroup_progs) rc
	# A child cgroup: the same one would be refused by its own lock first.
	mkdir "$CG/c2" || fail "mkdir $CG/c2"
	on_exit rmdir "$CG/c2"
	timeout 5 ip netns exec "$NS_A" "$SP" run --pin-path "$PIN-2" --modules pmtu --cgroup "sp-test-$ID/c2" \
		--mtu-probing 2 --interval 0 >"$TMP/out2" 2>"$TMP/err2"; rc=$?
	cat "$TMP/err2"
	assert_eq "$rc" 1 "exit of the second run"
	assert_eq "$(wc -l <"$TMP/err2")" 1 "stderr lines of the second run"
	grep -q "pid $SP_PID already set tcp_mtu_probing" "$TMP/err2" || fail "unclear refusal: $(tail -5 "$TMP/err2")"
	assert_eq "$(cgroup_progs)" "$progs" "programs on the cgroup after the refused run"
	assert_eq "$(ip netns exec "$NS_A" sysctl -n net.ipv4.tcp_mtu_probing)" 1 "tcp_mtu_probing after the refused run"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_eq "$(ip netns exec "$NS_A" sysctl -n net.ipv4.tcp_mtu_probing)" 0 "tcp_mtu_probing after the first run's exit"
}

# fragguard's tc program is held by a tcx link of the run: kill -9 takes it
# along. Fragments then reach the kernel as if stackpilot had never run, and
# nothing of ours stays on the device. Without tcx (before 6.6) the clsact
# filter outlives the run, and from SP_FG_STALE_NS (2 s) after the run's
# last tick it lets every fragment through; the next start replaces it.
t_lifecycle_fragguard_sigkill_leaves_nothing() {
	source "$ROOT/tests/lib_frag.sh"
	local attach id inuse
	attach=$("$SP" probe --json | jq -r .modules.fragguard.mechanisms.attach.uses)
	frag_topo 1
	sp_start --modules fragguard --iface rp1
	sp_ctl set fragguard.peer_limit_kb=16 >/dev/null || fail "set fragguard.peer_limit_kb=16: exit $?"	# a stale program would refuse nearly all
	id=$(sp_json '.programs[] | select(.name == "sp_fragguard") | .id')
	[ -n "$id" ] || fail "no sp_fragguard program in status"
	sp_stop KILL
	sleep 0.3
	if [ "$attach" = tcx ]; then
		assert_eq "$(tc -n "$NS_R" filter show dev rp1 ingress)" "" "tc filters on rp1 after kill -9"
		bpftool link show | has -E "prog $id( |$)" && fail "a link of program $id after kill -9"
		bpftool prog show id "$id" >/dev/null 2>&1 && fail "program $id still loaded after kill -9"
	else
		assert_eq "$attach" clsact "attach mechanism"
		tc -n "$NS_R" filter show dev rp1 ingress | has "id $id " ||
			fail "the killed run's clsact filter is not there: $(tc -n "$NS_R" filter show dev rp1 ingress)"
		sleep 2
	fi
	peer 1 "$FRAGFLOOD" 10.50.1.1 200 >/dev/null || fail "flood: exit $?"
	sleep 0.2
	inuse=$(ip netns exec "$NS_R" awk '/^FRAG:/ { print $3 }' /proc/net/sockstat)
	echo "after kill -9 ($attach): $inuse of 200 incomplete datagrams queued by the kernel"
	assert_ge "$inuse" 195 "datagrams that reached reassembly after kill -9"
	if [ "$attach" = tcx ]; then
		# A filter with our handle, as a killed run of an older version (or of a
		# kernel without tcx) leaves it, is removed by the next start.
		tc -n "$NS_R" qdisc add dev rp1 clsact || fail "clsact: exit $?"
		tc -n "$NS_R" filter add dev rp1 ingress pref 21328 handle 0x5350 bpf bytecode '1,6 0 0 0,' || fail "stale filter: exit $?"
		sp_start --modules fragguard --iface rp1
		assert_eq "$(tc -n "$NS_R" filter show dev rp1 ingress)" "" "tc filters on rp1 after the next start"
		grep -q 'removed a stale filter on rp1' "$TMP/sp.err" || fail "no log line for the stale filter: $(tail -5 "$TMP/sp.err")"
	else
		sp_start --modules fragguard --iface rp1
		tc -n "$NS_R" filter show dev rp1 ingress | has "id $id " && fail "the killed run's filter stayed"
	fi
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	tc -n "$NS_R" filter show dev rp1 ingress | has sp_fragguard && fail "a filter of ours after exit"
	true
}

# Without tcx (forced with SP_PROBE_OFF=tcx), fragguard's clsact filter
# outlives a run killed with SIGKILL; the next run in the namespace removes
# it, whatever its modules, not only a fragguard start on that device. A
# run that exits leaves no record of it.
t_lifecycle_fragguard_clsact_removed_by_any_run() {
	source "$ROOT/tests/lib_frag.sh"
	local id pid
	frag_topo 1; make_cgroup
	export SP_PROBE_OFF=tcx
	sp_start --modules fragguard --iface rp1
	id=$(sp_json '.programs[] | select(.name == "sp_fragguard") | .id')
	tc -n "$NS_R" filter show dev rp1 ingress | grep -q "id $id " || fail "no clsact filter of program $id"
	sp_stop KILL
	sleep 0.3
	tc -n "$NS_R" filter show dev rp1 ingress | grep -q "id $id " || fail "the killed run's filter went by itself"
	unset SP_PROBE_OFF
	sp_start --modules tcpstats --cgroup "sp-test-$ID"
	grep -q "undid 'fgfilter [0-9]* $id' left by a killed run" "$TMP/sp.err" || fail "no log line: $(cat "$TMP/sp.err")"
	assert_eq "$(tc -n "$NS_R" filter show dev rp1 ingress)" "" "filters on rp1 after the start of tcpstats"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	export SP_PROBE_OFF=tcx
	sp_start --modules fragguard --iface rp1
	pid=$SP_PID
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	ls /run/stackpilot/state-*-"$pid" >/dev/null 2>&1 && fail "a state file of a run that exited: $(cat /run/stackpilot/state-*-"$pid")"
	assert_eq "$(tc -n "$NS_R" filter show dev rp1 ingress)" "" "filters on rp1 after the exit"
}

# The cgroup is removed under a run: it says so in a log line and in status,
# and goes on until told to stop.
t_lifecycle_cgroup_removed() {
	make_cgroup
	sp_start --modules tcpstats --cgroup "$CG"
	rmdir "$CG" || fail "rmdir $CG"
	for _ in $(seq 20); do grep -q 'was removed' "$TMP/sp.err" && break; sleep 0.1; done
	grep -q "cgroup $CG was removed" "$TMP/sp.err" || fail "no log line: $(cat "$TMP/sp.err")"
	assert_eq "$(sp_json '.cgroup')" "$CG (removed)" "cgroup in status"
	assert_eq "$(sp_json '.alive')" true "alive in status"
	sp_stop || fail "exit after the cgroup went: stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# An --iface device is deleted: logged and shown in status by its name, as
# gone; when a device of that name comes back, fragguard is attached to it
# again.
t_lifecycle_iface_deleted_and_back() {
	source "$ROOT/tests/lib_frag.sh"
	frag_topo 1
	sp_start --modules fragguard --iface rp1
	ip -n "$NS_R" link del rp1 || fail "link del: exit $?"
	for _ in $(seq 20); do grep -q 'rp1.*is gone' "$TMP/sp.err" && break; sleep 0.1; done
	grep -q 'interface rp1 (index [0-9]*) is gone' "$TMP/sp.err" || fail "no log line: $(cat "$TMP/sp.err")"
	assert_eq "$(sp_json '.ifaces | join(",")')" "rp1 (gone)" "ifaces in status while rp1 is gone"
	sp_ctl status --all | grep -qx 'iface rp1 (gone)' || fail "text status while rp1 is gone: $(sp_ctl status --all | grep iface)"
	veth "$NS_R" rp1 "sp-$ID-p1" pr1
	ip -n "$NS_R" addr add 10.50.1.1/24 dev rp1
	ip -n "sp-$ID-p1" addr add 10.50.1.2/24 dev pr1
	for _ in $(seq 20); do grep -q 'rp1 is back' "$TMP/sp.err" && break; sleep 0.1; done
	grep -q 'interface rp1 is back (index [0-9]*): attached again' "$TMP/sp.err" || fail "not attached again: $(cat "$TMP/sp.err")"
	assert_eq "$(sp_json '.ifaces | join(",")')" rp1 "ifaces in status after rp1 came back"
	local before=$(sp_json '.modules.fragguard.fragments')
	peer 1 "$FRAGFLOOD" 10.50.1.1 50 >/dev/null || fail "flood: exit $?"
	sleep 0.2
	assert_ge "$(sp_json '.modules.fragguard.fragments')" $((before + 50)) "fragments seen on the new rp1"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	assert_eq "$(tc -n "$NS_R" filter show dev rp1 ingress)" "" "filters on rp1 after exit"
}

# Log lines: one per action, at most a burst of 5 then 5 a second from one
# place (the rest counted in one line); debug lines only with --verbose.
t_lifecycle_log_rate_limited() {
	source "$ROOT/tests/lib_frag.sh"
	frag_topo 1
	sp_start --modules fragguard --iface rp1
	local i t0=$(date +%s.%N)
	for i in $(seq 15); do
		ip -n "$NS_R" link del rp1 || fail "link del: exit $?"
		ip -n "$NS_R" link add rp1 type veth peer name pr1 || fail "link add: exit $?"
	done
	echo "15 flaps in $(echo "$(date +%s.%N) - $t0" | bc) s"
	sleep 1.2
	ip -n "$NS_R" link del rp1 || fail "link del: exit $?"
	sleep 0.3
	cat "$TMP/sp.err"
	local gone=$(grep -c 'interface rp1 (index [0-9]*) is gone' "$TMP/sp.err")
	[ "$gone" -ge 5 ] && [ "$gone" -lt 16 ] || fail "'is gone' lines for 16 deletions: $gone, expected a burst of 5, then fewer"
	grep -q 'similar lines suppressed' "$TMP/sp.err" || fail "no count of suppressed lines: $(tail -5 "$TMP/sp.err")"
	grep -q 'debug:' "$TMP/sp.err" && fail "debug lines without --verbose"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	ip -n "$NS_R" link add rp1 type veth peer name pr1 || fail "link add: exit $?"
	sp_start --modules fragguard --iface rp1 --verbose
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	grep -q 'debug: signal 15: detaching' "$TMP/sp.err" || fail "no debug line with --verbose: $(cat "$TMP/sp.err")"
}
