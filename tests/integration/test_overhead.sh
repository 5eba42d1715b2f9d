# SPDX-License-Identifier: GPL-2.0
# Zero steady-state cost: no sockops program runs per ACK once a connection
# is established and its modules have what they wait for (bpf/rttcb.bpf.h),
# counted with the kernel's own run counts (status: programs[].run_cnt), not
# timed. fragguard is a tc filter: it runs per packet by its nature (a
# non-fragment leaves at its first test; its cost is fgcost's, make bench).

# runs_of NAME: the run count of program NAME in the running instance.
runs_of() { num "$(sp_json "[.programs[] | select(.name == \"$1\") | .run_cnt] | add // 0")" "runs of $1"; }

# sockops_runs: every sockops program's runs, "name=N" words, sorted.
sockops_runs() {
	sp_json '.programs[] | select(.name | test("^sp_(tcpstats|rehash|pmtu)$")) | "\(.name)=\(.run_cnt)"' | sort
}

# bulk MB [RATE]: one connection from the cgroup that sends MB MiB, paced
# at RATE bytes/s (default 256 MiB/s), and waits until all of it is acked.
# $TMP/bulk: seconds, MSS, retransmits, RTOs.
bulk() {
	in_cgroup ip netns exec "$NS_A" env TCPTOOL_PACING=${2:-$((256 << 20))} \
		"$TCPTOOL" client 10.77.0.2 5201 $(($1 << 20)) 1 120 >"$TMP/bulk" ||
		fail "bulk $1 MiB: exit $?"
}
bulk_field() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" "$TMP/bulk"; }

# For each combination of the sockops modules: the runs of one 8 MiB
# connection, then of one 64 MiB connection paced at half the rate the
# first one reached (below what this machine carries, a guest under
# emulation too: no queue to overflow). Per connection a program runs a
# fixed few times (connect, established, state changes, the first
# learn_kb's ACKs while pmtu waits for its proof): at most per_conn,
# whatever the size, plus a retransmission callback per segment the
# kernel still had to retransmit; a per-ACK callback left on runs
# thousands of times.
t_overhead_runs_per_connection() {
	local mods p small big one two rate retrans per_conn=32
	netns_pair; make_cgroup
	tcp_server 5201
	for mods in tcpstats rehash pmtu tcpstats,rehash tcpstats,pmtu rehash,pmtu tcpstats,rehash,pmtu; do
		sp_start --cgroup "$CG" --modules "$mods" --bpf-stats
		bulk 8
		small=$(sockops_runs)
		rate=$(awk -v s="$(bulk_field secs)" 'BEGIN { r = 8 * 1048576 / s / 2; print int(r < 268435456 ? r : 268435456) }')
		bulk 64 "$rate"
		retrans=$(num "$(bulk_field retrans)" "retransmits of the 64 MiB connection")
		big=$(sockops_runs)
		sp_stop || fail "$mods: stop: $(sp_said)"
		for p in ${mods//,/ }; do
			one=$(echo "$small" | sed -n "s/^sp_$p=//p")
			two=$(echo "$big" | sed -n "s/^sp_$p=//p")
			two=$(num "$two" "$mods: runs of sp_$p after two connections")
			one=$(num "$one" "$mods: runs of sp_$p after one connection")
			assert_le "$one" $per_conn "$mods: runs of sp_$p for one 8 MiB connection"
			assert_le $((two - one)) $((per_conn + 2 * retrans)) \
				"$mods: runs of sp_$p for one 64 MiB connection (8 MiB: $one; the client's $(cat "$TMP/bulk"))"
			echo "$mods: sp_$p runs: 8 MiB $one, 64 MiB $((two - one)), $retrans retransmits" >&2
		done
	done
}

# The flag word is shared: pmtu gives up RTT_CB once its connection proved
# its MTU, and rehash, which asks for it for the connection's life with the
# rounds trigger on, keeps getting it. Whichever module asked first, the
# last one to give up switches it off; neither switches off the other's.
t_overhead_rtt_shared() {
	local rtt
	netns_pair; make_cgroup
	tcp_server 5201
	sp_start --cgroup "$CG" --modules rehash,pmtu --bpf-stats
	sp_ctl set rehash.rounds=3 >/dev/null || fail "set rehash.rounds=3"
	bulk 64
	rtt=$(sp_num '.modules.rehash.rtt_callbacks')
	# 64 MiB of full-size segments are hundreds of ACKs even with GRO and
	# delayed ACKs (about 7 a MiB here): far more than pmtu's few before its proof.
	assert_ge "$rtt" 100 "rehash's RTT callbacks over 64 MiB with rounds on, beside pmtu"
	assert_ge "$(sp_num '.modules.pmtu.learned_from_connections')" 1 "pmtu learned the destination"
	# And with rounds off, rehash asks for nothing: RTT_CB goes off after
	# pmtu's proof, for rehash too.
	sp_ctl set rehash.rounds=0 >/dev/null || fail "set rehash.rounds=0"
	bulk 1
	rtt=$(sp_num '.modules.rehash.rtt_callbacks')
	bulk 64
	assert_le $(( $(sp_num '.modules.rehash.rtt_callbacks') - rtt )) 64 \
		"rehash's RTT callbacks over 64 MiB with rounds off, beside pmtu"
}

# A connection that can teach pmtu nothing (its destination's low is at
# least the route's MTU it starts with) asks for no per-ACK callback at
# all: short connections to a learned destination run no RTT callback in
# any module. One to a destination not known yet still waits for its proof.
t_overhead_known_destination() {
	local rtt
	netns_pair; make_cgroup
	tcp_server 5201
	sp_start --cgroup "$CG" --modules rehash,pmtu
	sp_ctl set rehash.rounds=0 >/dev/null || fail "set rehash.rounds=0"
	bulk 8
	assert_ge "$(sp_num '.modules.pmtu.learned_from_connections')" 1 "pmtu learned the destination"
	rtt=$(sp_num '.modules.rehash.rtt_callbacks')
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 4000 20 >/dev/null || fail "short connections: exit $?"
	assert_eq $(( $(sp_num '.modules.rehash.rtt_callbacks') - rtt )) 0 \
		"RTT callbacks of 20 short connections to a learned destination"
	rtt=$(sp_num '.modules.rehash.rtt_callbacks')
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client fd77::2 5201 4000 1 >/dev/null || fail "IPv6 connection: exit $?"
	assert_ge $(( $(sp_num '.modules.rehash.rtt_callbacks') - rtt )) 1 \
		"RTT callbacks of a connection to a destination pmtu has not learned"
}
