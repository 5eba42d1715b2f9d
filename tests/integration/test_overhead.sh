# SPDX-License-Identifier: GPL-2.0
# Program runs per connection of the sockops modules (issue 28): counted, not
# timed. RTT_CB runs every sockops program of the cgroup on every ACK of a
# socket that has it, so a module that keeps it on makes all of them run per
# ACK: 8 runs per MB each on a veth bulk flow before issue 28. A clean bulk
# flow (no loss) must cost each program a small fixed number of runs per
# connection (connect, established, state changes, close, and the ACKs until
# pmtu's learn_kb is delivered), the same for 50 MB as for 400 MB.

# The most runs a program may make for one clean connection: about 10 for
# the connection's callbacks (TCP_CONNECT, TIMEOUT_INIT, RWND_INIT,
# NEEDS_ECN, ESTABLISHED, 4-5 state changes) plus pmtu's learning ACKs
# (64 KB, a handful of ACKs over veth).
OV_MAX_RUNS=${OV_MAX_RUNS:-48}
# How many more runs a 400 MB connection may make than a 50 MB one (ACK
# timing around the close and learn_kb).
OV_SLACK=${OV_SLACK:-4}

# Namespaces A (client, in the cgroup) and B (a sink on 5301, outside),
# kernel.bpf_stats_enabled on for the test and restored on every exit path
# (cleanup() runs on_exit's commands whatever ends the test). stackpilot
# enables run-time stats itself while it runs (BPF_ENABLE_STATS); the
# sysctl also covers a run that could not.
ov_setup() {
	local was
	was=$(sysctl -n kernel.bpf_stats_enabled) || fail "read kernel.bpf_stats_enabled: exit $?"
	on_exit "sysctl -qw kernel.bpf_stats_enabled=$was"
	sysctl -qw kernel.bpf_stats_enabled=1 || fail "set kernel.bpf_stats_enabled=1: exit $?"
	netns_pair; make_cgroup
	tcp_server 5301
}

# run_cnt of program $1 (sp_tcpstats, sp_rehash, sp_pmtu).
ov_runs() { sp_num ".programs[] | select(.name == \"$1\") | .run_cnt"; }

# Clean means no loss: paced (TCPTOOL_PACE_BPS), as an unpaced flow can
# overflow veth's backlog on a busy machine, and a retransmission is a
# callback (RETRANS_CB) that is not overhead.
OV_PACE=${OV_PACE:-250000000}	# bytes/s: 2 Gbit/s, 400 MB in 1.6 s

# One clean connection of $1 bytes from the cgroup; prints "PROG=RUNS ..."
# for the programs $2..., the runs that connection cost each. A connection
# that retransmitted is tried again (3 tries).
ov_conn() {
	local bytes=$1 p out before=() i try res
	shift
	for try in 1 2 3; do
		before=()
		for p; do before+=("$(ov_runs "$p")"); done
		res=$(in_cgroup ip netns exec "$NS_A" env TCPTOOL_PACE_BPS="$OV_PACE" \
			"$TCPTOOL" client 10.77.0.2 5301 "$bytes") || fail "tcptool client of $bytes bytes: exit $?: $res"
		# The close's state changes come a moment after the client's exit.
		sleep 0.5
		out= i=0
		for p; do
			out+="$p=$(( $(ov_runs "$p") - ${before[i]} )) "
			i=$((i + 1))
		done
		[[ $res == *" retrans=0 "* ]] && { echo "$out"; return; }
		echo "not clean, again: $res; $out" >&2
	done
	fail "no clean connection of $bytes bytes in 3 tries: $res"
}

# With the modules $1 (comma-separated) loaded: a 50 MB and a 400 MB clean
# connection, each program's runs per connection bounded and independent of
# the bytes sent.
ov_check() {
	local mods=$1 progs=() m small big p s b
	for m in ${mods//,/ }; do progs+=("sp_$m"); done
	sp_start --cgroup "$CG" --modules "$mods"
	ov_conn 1000000 "${progs[@]}" >/dev/null	# the first connection asks pmtu's search
	small=$(ov_conn 50000000 "${progs[@]}")
	big=$(ov_conn 400000000 "${progs[@]}")
	echo "modules $mods: 50 MB: $small; 400 MB: $big"
	[ -z "${OV_LOG:-}" ] || echo "modules $mods: 50 MB: $small; 400 MB: $big" >>"$OV_LOG"
	for p in "${progs[@]}"; do
		s=$(echo "$small" | tr ' ' '\n' | sed -n "s/^$p=//p")
		b=$(echo "$big" | tr ' ' '\n' | sed -n "s/^$p=//p")
		assert_ge "$s" 1 "$p runs for a 50 MB connection (modules $mods)"
		assert_le "$s" "$OV_MAX_RUNS" "$p runs for a 50 MB connection (modules $mods)"
		assert_le "$b" "$OV_MAX_RUNS" "$p runs for a 400 MB connection (modules $mods)"
		assert_le "$b" $((s + OV_SLACK)) "$p runs for 400 MB against $s for 50 MB (modules $mods)"
	done
	sp_stop || fail "stackpilot run: exit $?: $(sp_said)"
}

t_overhead_each_module_alone() {
	ov_setup
	ov_check tcpstats
	ov_check rehash
	ov_check pmtu
}

# pmtu asks for RTT_CB at establishment and gives it back once learn_kb is
# delivered: with it, every other program runs on those ACKs too, and then
# on no more.
t_overhead_pairs_with_pmtu() {
	ov_setup
	ov_check tcpstats,pmtu
	ov_check rehash,pmtu
}

t_overhead_all_cgroup_modules() {
	ov_setup
	ov_check tcpstats,rehash,pmtu
}

# pmtu still learns from connections (learned_from_connections counts the
# first proof of a destination's MTU) although RTT_CB goes off after it; and
# a later connection proves again (on a destination whose entry is gone).
t_overhead_pmtu_still_learns() {
	ov_setup
	sp_start --cgroup "$CG" --modules tcpstats,rehash,pmtu
	local l0=$(sp_num .modules.pmtu.learned_from_connections) r
	r=$(ov_conn 50000000 sp_pmtu sp_rehash)
	local l1=$(sp_num .modules.pmtu.learned_from_connections)
	echo "learned_from_connections $l0 -> $l1; runs $r; entry $(sp_json '.modules.pmtu.destinations[0] | tostring')"
	assert_eq "$((l1 - l0))" 1 "connections that proved 10.77.0.2's MTU"
	assert_eq "$(sp_json '.modules.pmtu.destinations[] | select(.dst == "10.77.0.2") | .low_mtu')" 1500 \
		"learned MTU of 10.77.0.2 (veth, MTU 1500)"
	# rehash saw pmtu's few RTT callbacks, and switched none on itself.
	assert_le "$(sp_num .modules.rehash.rtt_callbacks)" "$OV_MAX_RUNS" "rehash RTT callbacks of a clean 50 MB connection"
	assert_eq "$(sp_num .modules.rehash.rtt_cb_switched_on)" 0 "RTT_CB switched on by rehash on a clean flow"
}
