# SPDX-License-Identifier: GPL-2.0
# fragguard inside a receiver namespace, with real fragment floods.
source "$ROOT/tests/lib_frag.sh"

# The hog (peer 1) fills R's reassembly memory with incomplete datagrams; the
# victim (peer 2) then sends fragmented UDP. Without stackpilot almost nothing
# of the victim's gets through (measured first); with it, most does.
t_fragguard_victim_survives_hog() {
	frag_topo 2; udp_servers 2
	# With stackpilot first: a queue the kernel holds stays for ipfrag_time,
	# so the run without it must come second.
	sp_start --modules fragguard --iface rp1 --iface rp2
	peer 1 "$FRAGFLOOD" 10.50.1.1 3000 >/dev/null || fail "flood: exit $?"
	sleep 0.3
	local mem=$(frag_mem) with=$(udp_delivered 2 2 20M)
	echo "with stackpilot: reassembly memory $mem, victim delivered $with%"
	assert_ge "$(sp_json '.modules.fragguard.refused_peer_limit')" 100 "hog datagrams refused"
	assert_ge "$(sp_json '.modules.fragguard.completed')" 100 "victim datagrams completed"
	# The hog is the top peer, held near its limit (1 MiB default).
	sp_json '.modules.fragguard.top_peers[0].peer' | has -x 10.50.1.2 || fail "top peer is not the hog: $(sp_json '.modules.fragguard.top_peers[0].peer')"
	assert_le "$(sp_num '.modules.fragguard.top_peers[0].mem')" 1100000 "hog memory within its limit"
	sp_stop || fail "stackpilot exit: stackpilot run exited $?; its stderr ends: $(sp_said)"
	peer 1 "$FRAGFLOOD" 10.50.1.1 3000 >/dev/null || fail "flood: exit $?"
	sleep 0.3
	local mem2=$(frag_mem) without=$(udp_delivered 2 2 20M)
	echo "without stackpilot: reassembly memory $mem2, victim delivered $without%"
	awk "BEGIN { exit !($without < 20) }" || fail "baseline: the hog did not block the victim ($without% delivered, expected < 20%)"
	# What fragguard promises a victim under a hog: 95% of what it sent.
	awk "BEGIN { exit !($with >= 95) }" || fail "victim delivered only $with% with stackpilot (95 asked)"
}

# What fragguard charges a peer, against what the kernel reports holding.
t_fragguard_estimate_calibrated() {
	frag_topo 1
	sp_start --modules fragguard --iface rp1
	sp_ctl set fragguard.enforce=0 >/dev/null || fail "set fragguard.enforce=0: exit $?"
	peer 1 "$FRAGFLOOD" 10.50.1.1 500 >/dev/null || fail "flood: exit $?"
	sleep 0.3
	local kmem=$(frag_mem) est=$(sp_json '.modules.fragguard.top_peers[0].mem')
	echo "kernel $kmem bytes, fragguard estimate $est bytes"
	assert_ge "$kmem" 100000 "kernel reassembly memory after 500 datagrams"
	# Within 10% of the kernel's own number.
	awk "BEGIN { r = $est / $kmem; exit !(r > 0.9 && r < 1.1) }" || fail "estimate $est vs kernel $kmem: ratio $(awk "BEGIN { print $est / $kmem }"), expected 0.9 < ratio < 1.1"
}

# Inside `ip netns exec` there is no bpffs: the loader mounts one; no cgroup is needed.
t_fragguard_runs_in_netns_without_cgroup() {
	frag_topo 1
	ip netns exec "$NS_R" sh -c 'mountpoint -q /sys/fs/bpf' && fail "bpffs already in the netns view"
	sp_start --modules fragguard --iface rp1
	sp_json '.cgroup' | has -x '' || fail "fragguard-only run has a cgroup: $(sp_json '.cgroup')"
	bpftool link show | has -E "^[0-9]+: (type 11|tcx) +prog $(sp_json '.programs[] | select(.name == "sp_fragguard") | .id') " || fail "no tcx link"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	tc -n "$NS_R" qdisc show dev rp1 | has clsact && fail "clsact left behind"
	true
}

# A clsact qdisc that was there before stays; only ours goes: the tcx link
# (a clsact filter before 6.6) and with it the program.
t_fragguard_keeps_existing_clsact() {
	local id left
	frag_topo 1
	ip -n "$NS_R" link set rp1 down	# nothing flows
	tc -n "$NS_R" qdisc add dev rp1 clsact || fail "clsact: exit $?"
	# Someone else's filter (classic BPF: cls_bpf is the classifier we can count on).
	tc -n "$NS_R" filter add dev rp1 ingress pref 7 bpf bytecode '1,6 0 0 0,' || fail "foreign filter: exit $?"
	sp_start --modules fragguard --iface rp1
	id=$(sp_num '.programs[] | select(.name == "sp_fragguard") | .id')
	bpftool link show | has -E "^[0-9]+: (type 11|tcx) +prog $id " || fail "no tcx link"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	tc -n "$NS_R" filter show dev rp1 ingress | has 'pref 7 bpf' || fail "foreign filter removed: $(tc -n "$NS_R" filter show dev rp1 ingress)"
	tc -n "$NS_R" qdisc show dev rp1 | has clsact || fail "foreign clsact removed: $(tc -n "$NS_R" qdisc show dev rp1)"
	tc -n "$NS_R" filter show dev rp1 ingress | has sp_fragguard && fail "our filter left"
	left=$(progs_loaded "$id")
	[ -z "$left" ] || fail "sp_fragguard ($id) still loaded after exit: $(bpftool link show | grep "prog $id ")"
}

# Random spoofed sources cannot take the memory completing peers use.
t_fragguard_spoofed_flood() {
	frag_topo 2; udp_servers 2
	sp_start --modules fragguard --iface rp1 --iface rp2
	# The victim streams first: known_kb (64) over known_s (2 s) make it known.
	udp_delivered 2 3 5M >/dev/null
	sp_json '.modules.fragguard.top_peers[] | select(.peer == "10.50.2.2") | .known' | has -x true ||
		fail "victim not known after 3 s of streaming" 
	peer 1 "$FRAGFLOOD" 10.50.1.1 20000 10.60.0.0/16 >/dev/null || fail "flood: exit $?"
	local with=$(udp_delivered 2 2 20M)
	echo "victim delivered $with% during a spoofed flood; $(sp_json '.modules.fragguard | {refused_unknown_pool, peers_tracked, admitted}')"
	assert_ge "$(sp_json '.modules.fragguard.refused_unknown_pool')" 1000 "spoofed datagrams refused by the unknown pool"
	awk "BEGIN { exit !($with > 90) }" || fail "victim delivered only $with% during a spoofed flood, expected > 90%"
}

# refused_known counts the refusals of peers in the known pool, and only
# those (what the alert on a refused victim watches): an unknown hog's
# leave it at 0; the known peer, held under load to a limit of 16 KiB while
# it floods, is counted, in JSON and in Prometheus alike.
t_fragguard_refused_known() {
	frag_topo 2; udp_servers 2
	sp_start --modules fragguard --iface rp1 --iface rp2
	udp_delivered 2 3 5M >/dev/null	# peer 2 becomes known
	sp_json '.modules.fragguard.top_peers[] | select(.peer == "10.50.2.2") | .known' | has -x true ||
		fail "peer 2 not known after 3 s of streaming"
	peer 1 "$FRAGFLOOD" 10.50.1.1 3000 >/dev/null || fail "flood: exit $?"
	sleep 0.3
	assert_ge "$(sp_num .modules.fragguard.refused_peer_limit)" 100 "hog datagrams refused"
	assert_eq "$(sp_num .modules.fragguard.refused_known)" 0 "refusals of known peers after an unknown hog"
	sp_ctl set fragguard.peer_limit_kb=16 fragguard.load_pct=1 >/dev/null || fail "set: exit $?"
	peer 2 "$FRAGFLOOD" 10.50.2.1 3000 >/dev/null || fail "flood from the known peer: exit $?"
	sleep 0.3
	local known=$(sp_num .modules.fragguard.refused_known) prom
	echo "refused_known $known; $(sp_json '.modules.fragguard | {refused_peer_limit, refused_fair_share, refused_age}')"
	assert_ge "$known" 100 "refusals of the known peer"
	prom=$(sp_ctl status --prometheus | awk '$1 == "stackpilot_fragguard_refused_known_total" { print $2 }')
	assert_ge "$prom" "$known" "stackpilot_fragguard_refused_known_total"
}

# IPv6 fragments of a peer are tracked and delivered.
t_fragguard_ipv6_stream() {
	frag_topo 1; udp_servers 1
	sp_start --modules fragguard --iface rp1
	local d=$(peer 1 iperf3 -6 -u -l 4000 -b 10M -t 1 -c fd50:1::1 -p 5201 -J |
		jq '.end | 100 * .sum_received.bytes / .sum_sent.bytes')
	awk "BEGIN { exit !($d > 95) }" || fail "IPv6 delivered $d%, expected > 95%"
	assert_ge "$(sp_json '.modules.fragguard.completed')" 100 "IPv6 datagrams completed"
	sp_json '.modules.fragguard.top_peers[].peer' | has '^fd50:1::$' || fail "IPv6 peer (/64) not shown: $(sp_json '.modules.fragguard.top_peers[].peer')"
}

# Tunables written from outside are clamped (peer_limit_kb 0 acts as 16 KiB).
t_fragguard_bpftool_clamp() {
	frag_topo 1
	sp_start --modules fragguard --iface rp1
	# prefix4, prefix6, peer_limit_kb = 0, unknown_pct, load_pct, enforce = 9, known_kb, known_s
	nsenter -t "$SP_PID" -m -n bpftool map update pinned "$PIN/fragguard_cfg" key 0 0 0 0 value \
		32 0 0 0  64 0 0 0  0 0 0 0  50 0 0 0  50 0 0 0  9 0 0 0  64 0 0 0  2 0 0 0 || fail "bpftool: exit $?"
	peer 1 "$FRAGFLOOD" 10.50.1.1 200 >/dev/null || fail "flood: exit $?"
	local mem ref
	mem=$(sp_num '.modules.fragguard.top_peers[0].mem') ref=$(sp_num .modules.fragguard.refused_peer_limit)
	echo "peer $(sp_json '.modules.fragguard.top_peers[0].peer') memory $mem, refused $ref"
	assert_ge "$ref" 150 "refused with peer_limit_kb=0 (acts as 16)"
	assert_le "$mem" 16384 "peer memory under the clamped limit"
	# Admitted up to it (a datagram here is charged about 2.5 KB): not 0.
	assert_ge "$mem" 8192 "peer memory up to the clamped limit"
	assert_ge "$(sp_json '.modules.fragguard.dropped')" "$ref" "enforce=9 acts as 1"
}

# The kernel is the oracle: generated datagrams (any size, MTUs 68..9000,
# shuffled, duplicated, overlapping, truncated, ...) through fragguard in
# count-only mode; each one's verdict must be the kernel's, and the memory
# estimate within 10% of sockstat throughout.
# differential [SETTING...]: fragdiff's datagrams through fragguard and the
# kernel, with SETTINGs besides the ones fragdiff needs.
differential() {
	frag_topo 1
	ip -n "$NS_R" link set rp1 mtu 9200; ip -n "sp-$ID-p1" link set pr1 mtu 9200
	ip netns exec "$NS_R" sysctl -qw net.ipv4.ipfrag_time=1 net.ipv6.ip6frag_time=1 \
		net.ipv4.ipfrag_high_thresh=536870912 net.ipv6.ip6frag_high_thresh=536870912
	sp_start --modules fragguard --iface rp1
	sp_ctl set fragguard.enforce=0 fragguard.prefix4=32 fragguard.prefix6=128 "$@" >/dev/null ||
		fail "set fragguard.enforce=0 fragguard.prefix4=32 fragguard.prefix6=128 $*: exit $?"
	local mac=$(ip -n "$NS_R" -j link show rp1 | jq -r '.[0].address') seed=${FRAGDIFF_SEED:-$RANDOM}
	nsenter -t "$SP_PID" -m "$BUILD/fragdiff" "$PIN" "$NS_R" "sp-$ID-p1" pr1 "$mac" \
		"${FRAGDIFF_COUNT:-100000}" "$seed" | tee "$TMP/diff.out" | grep -v "^batch .* 0 disagreements" | tail -12
	[ "${PIPESTATUS[0]}" = 0 ] || fail "fragguard disagrees with the kernel (seed $seed)"
	echo "fragdiff: seed $seed"
	grep -q ' 0 disagreements' "$TMP/diff.out" || fail "no summary: $(tail -5 "$TMP/diff.out")"
}

t_fragguard_differential() {
	differential
}

# The same with every source known before its datagram (as many as the
# known map holds): datagrams in known peers' slots, and in the hash maps
# for those whose block another peer holds.
t_fragguard_differential_known() {
	FRAGDIFF_KNOWN=1 FRAGDIFF_COUNT=${FRAGDIFF_COUNT:-20000} differential
	local least=$(awk '/blocks of slots taken/ { print $3 }' "$TMP/diff.out" | sort -n | head -1)
	assert_ge "${least:-0}" 100 "blocks of slots taken in every batch"
}

# Regression (fragguard v2, item 1): a 65000-byte datagram has more 8-byte
# slots than v1's 64-bit duplicate mask; fragments collided, datagrams never
# completed and the sender hit its peer limit (48% delivered at MTU 1280).
t_fragguard_large_datagrams() {
	frag_topo 1; udp_servers 1
	sp_start --modules fragguard --iface rp1
	local fam mtu addr d
	for fam in 6 4; do
		if [ $fam = 6 ]; then mtu=1280 addr=fd50:1::1; else mtu=576 addr=10.50.1.1; fi
		ip -n "$NS_R" link set rp1 mtu $mtu; ip -n "sp-$ID-p1" link set pr1 mtu $mtu
		d=$(peer 1 iperf3 -$fam -u -l 65000 -b 4M -t 3 -c $addr -p 5201 -J |
			jq '.end | 100 * .sum_received.bytes / .sum_sent.bytes')
		echo "IPv$fam MTU $mtu, 65000-byte datagrams: $d% delivered"
		awk "BEGIN { exit !($d >= 99) }" || fail "IPv$fam at MTU $mtu: $d% delivered, expected >= 99%"
	done
	assert_eq "$(sp_json '.modules.fragguard.dropped')" 0 "fragments dropped"
}

# Regression (item 2): spoofed sources completing two tiny datagrams each
# bought "known" and evicted the real known peer; a first-fragment flood
# then took the victim's memory. Known now costs known_kb over known_s.
t_fragguard_completing_spoofers() {
	frag_topo 2; udp_servers 2
	sp_start --modules fragguard --iface rp1 --iface rp2
	local fam dst spoof flood with
	for fam in 4 6; do
		if [ $fam = 4 ]; then dst=10.50.1.1 spoof=10.70.0.0/16 flood=10.60.0.0/16
		else dst=fd50:1::1 spoof=fd70::/64 flood=fd60::/64; fi
		udp_delivered 2 3 5M $fam >/dev/null	# the victim becomes known
		peer 1 "$FRAGFLOOD" $dst 10000 $spoof 0 8 complete >/dev/null || fail "completing spoofers: exit $?"
		assert_ge "$(sp_json '.modules.fragguard.completed')" $((fam == 4 ? 10000 : 20000)) \
			"spoofed datagrams completed"
		# Only the victims are known: 1 after IPv4, 2 after IPv6.
		assert_eq "$(sp_json '.modules.fragguard.peers_known')" $((fam == 4 ? 1 : 2)) \
			"known peers after IPv$fam spoofers"
		peer 1 "$FRAGFLOOD" $dst 40000 $flood 20000 >/dev/null &
		BG_PIDS+=($!)
		sleep 0.5
		with=$(udp_delivered 2 2 50M $fam)
		echo "IPv$fam: victim delivered $with% during completing spoofers + flood"
		awk "BEGIN { exit !($with >= 80) }" || fail "IPv$fam victim delivered only $with%, expected >= 80%"
		wait "${BG_PIDS[-1]}"
	done
}

# Regression (item 3): v1 leaked active_peers and the unknown pool on LRU
# evictions, until every new peer was refused. Three floods from more
# sources than the peer LRU holds, each expired: every aggregate is 0 again.
t_fragguard_floods_drain_to_zero() {
	frag_topo 2; udp_servers 2
	ip netns exec "$NS_R" sysctl -qw net.ipv4.ipfrag_time=2
	sp_start --modules fragguard --iface rp1 --iface rp2
	sp_ctl set fragguard.unknown_pct=100 >/dev/null || fail "set fragguard.unknown_pct=100: exit $?"
	local i
	for i in 1 2 3; do
		peer 1 "$FRAGFLOOD" 10.50.1.1 30000 10.60.0.0/16 0 >/dev/null || fail "flood: exit $?"
		sleep 3
		sp_json '.modules.fragguard | [.active_peers, .datagrams_in_progress, .tracked_mem.ipv4,
			.tracked_mem.ipv6, .unknown_mem.ipv4, .unknown_mem.ipv6] | map(tostring) | join(" ")' |
			has -x '0 0 0 0 0 0' || fail "aggregates after flood $i: $(sp_json '.modules.fragguard')"
	done
	assert_ge "$(sp_json '.modules.fragguard.expired')" 1000 "flood datagrams expired"
	local d=$(udp_delivered 2 1 10M)
	awk "BEGIN { exit !($d > 95) }" || fail "a new peer after the floods: $d% delivered, expected > 95%"
}

# Review finding: returning TC_ACT_OK ended the ingress filter chain, so an
# operator's own filters behind ours (here: drop everything, at tc's default
# preference) silently stopped running. Ours passes on to the next filter:
# it saw the fragments and dropped none, the filter behind dropped them,
# and with that filter gone the same pings pass ours.
t_fragguard_filters_behind_still_run() {
	frag_topo 1
	# The peer knows R's MAC: the filter would drop ARP too, and pings would
	# never leave the peer.
	ip -n "sp-$ID-p1" neigh replace 10.50.1.1 dev pr1 nud permanent \
		lladdr "$(ip -n "$NS_R" -j link show rp1 | jq -r '.[0].address')" || fail "neighbour: exit $?"
	# A direct-action filter that drops everything (no gact/matchall here).
	printf '%s\n' '__attribute__((section("tc"), used)) int drop(void *ctx) { return 2; }' \
		'char _license[] __attribute__((section("license"), used)) = "GPL";' >"$TMP/drop.c"
	clang -O2 -target bpf -c "$TMP/drop.c" -o "$TMP/drop.o" || fail "clang: exit $?"
	tc -n "$NS_R" qdisc add dev rp1 clsact || fail "clsact: exit $?"
	tc -n "$NS_R" filter add dev rp1 ingress pref 49152 bpf da obj "$TMP/drop.o" sec tc ||
		fail "drop filter"
	peer 1 ping -c 1 -W 1 10.50.1.1 >/dev/null && fail "baseline: the drop filter did not drop"
	sp_start --modules fragguard --iface rp1
	peer 1 ping -c 2 -W 1 10.50.1.1 >/dev/null && fail "ping passed: the filter behind ours was skipped"
	peer 1 ping -c 2 -W 1 -s 3000 10.50.1.1 >/dev/null && fail "fragmented ping passed the drop filter"
	assert_ge "$(sp_num .modules.fragguard.fragments)" 6 "fragments sp_fragguard saw (2 pings of 3)"
	assert_ge "$(sp_num .modules.fragguard.admitted)" 2 "datagrams sp_fragguard admitted"
	assert_eq "$(sp_num .modules.fragguard.dropped)" 0 "fragments sp_fragguard dropped"
	tc -n "$NS_R" filter del dev rp1 ingress pref 49152 || fail "removing the drop filter: exit $?"
	peer 1 ping -c 2 -W 1 10.50.1.1 >/dev/null || fail "ping with sp_fragguard alone on rp1: exit $?"
	peer 1 ping -c 2 -W 1 -s 3000 10.50.1.1 >/dev/null || fail "fragmented ping with sp_fragguard alone on rp1: exit $?"
	assert_ge "$(sp_num .modules.fragguard.completed)" 2 "datagrams completed with sp_fragguard alone"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# Review finding (metrics2 helper): interface indexes repeat in every
# namespace, and the kernel-drop program filtered on the index alone, so
# another namespace's fragment drops (expiries, duplicates) on an interface
# with our interface's index were counted, and could reach our datagrams.
t_fragguard_other_netns_drops_not_counted() {
	frag_topo 1
	local idx nc=sp-$ID-c nd=sp-$ID-d k
	idx=$(ip -n "$NS_R" -j link show rp1 | jq '.[0].ifindex')
	mk_netns "$nc"; mk_netns "$nd"
	ip -n "$nc" link add cx index "$idx" type veth peer name dx netns "$nd" || fail "veth with index $idx"
	ip -n "$nc" addr add 10.70.0.1/24 dev cx; ip -n "$nc" link set cx up
	ip -n "$nd" addr add 10.70.0.2/24 dev dx; ip -n "$nd" link set dx up
	ip netns exec "$nc" sysctl -qw net.ipv4.ipfrag_time=1
	ip netns exec "$NS_R" sysctl -qw net.ipv4.ipfrag_time=1
	sp_start --modules fragguard --iface rp1
	# The same seed twice: the second flood's fragments duplicate queued ones
	# (fewer than ipfrag_max_dist datagrams apart, or the kernel restarts the
	# queue instead: FRAG_TOO_FAR).
	for _ in 1 2; do
		FRAGFLOOD_SEED=7 ip netns exec "$nd" "$FRAGFLOOD" 10.70.0.1 30 >/dev/null || fail "flood: exit $?"
	done
	sleep 2.5
	assert_ge "$(ip netns exec "$nc" nstat -az IpReasmTimeout | awk '$1 == "IpReasmTimeout" { print $2 }')" 30 \
		"expiries in the other namespace"
	k=$(sp_json '.modules.fragguard | [.kernel_drop_timeout, .kernel_drop_dup] | map(tostring) | join(" ")')
	[ "$k" = "0 0" ] || fail "the other namespace's drops were counted (timeout, dup): $k"
	# The control: the same in our namespace is counted.
	for _ in 1 2; do FRAGFLOOD_SEED=7 peer 1 "$FRAGFLOOD" 10.50.1.1 30 >/dev/null || fail "flood: exit $?"; done
	sleep 2.5
	assert_ge "$(sp_json '.modules.fragguard.kernel_drop_dup')" 30 "our duplicates counted"
	assert_ge "$(sp_json '.modules.fragguard.kernel_drop_timeout')" 30 "our expiries counted"
}

# Review finding: ipfrag_time 0 or below (the sysctl takes any int) makes the
# kernel expire a queue at its next tick, and fragguard read it as 30 s (0,
# its "not written") or as 73 years (-5, read unsigned): a peer's incomplete
# datagrams, long gone from the kernel, stayed charged and its next ones
# were refused. With each value, a flood of incomplete datagrams from the
# peer, then its own fragmented UDP: what the kernel alone delivers.
t_fragguard_ipfrag_time_zero_or_below() {
	frag_topo 1; udp_servers 1
	local t d r0
	for t in -5 0; do
		ip netns exec "$NS_R" sysctl -qw net.ipv4.ipfrag_time=$t || fail "ipfrag_time=$t"
		sp_start --modules fragguard --iface rp1
		peer 1 "$FRAGFLOOD" 10.50.1.1 3000 >/dev/null || fail "flood: exit $?"
		sleep 0.3
		# During the flood the kernel held the peer's datagrams for a
		# tick, and fragguard may refuse some; after it, neither holds any.
		assert_le "$(frag_mem)" 100000 "kernel reassembly memory after the flood, ipfrag_time=$t"
		sp_json '.modules.fragguard | [.datagrams_in_progress, .tracked_mem.ipv4] | map(tostring) | join(" ")' |
			has -x '0 0' || fail "ipfrag_time=$t: fragguard still holds after the flood: $(sp_json '.modules.fragguard')"
		r0=$(sp_json '.modules.fragguard.refused_peer_limit')
		d=$(udp_delivered 1 2 20M)
		echo "ipfrag_time=$t: the flood refused $r0 at the peer's limit; after it, the peer's own datagrams $d% delivered"
		assert_eq "$(sp_json '.modules.fragguard.refused_peer_limit')" "$r0" "datagrams refused after the flood, ipfrag_time=$t"
		awk "BEGIN { exit !($d >= 95) }" || fail "ipfrag_time=$t: $d% delivered, expected >= 95%"
		sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	done
}
