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
	peer 1 "$FRAGFLOOD" 10.50.1.1 3000 >/dev/null || fail "flood"
	sleep 0.3
	local mem=$(frag_mem) with=$(udp_delivered 2 2 20M)
	echo "with stackpilot: reassembly memory $mem, victim delivered $with%"
	assert_ge "$(sp_json '.modules.fragguard.refused_peer_limit')" 100 "hog datagrams refused"
	assert_ge "$(sp_json '.modules.fragguard.completed')" 100 "victim datagrams completed"
	# The hog is the top peer, held near its limit (1 MiB default).
	sp_json '.modules.fragguard.top_peers[0].peer' | grep -qx 10.50.1.2 || fail "top peer is not the hog"
	assert_ge $((1100000 - $(sp_json '.modules.fragguard.top_peers[0].mem'))) 0 "hog memory within its limit"
	sp_stop || fail "stackpilot exit"
	peer 1 "$FRAGFLOOD" 10.50.1.1 3000 >/dev/null || fail "flood"
	sleep 0.3
	local mem2=$(frag_mem) without=$(udp_delivered 2 2 20M)
	echo "without stackpilot: reassembly memory $mem2, victim delivered $without%"
	awk "BEGIN { exit !($without < 20) }" || fail "baseline: the hog did not block the victim ($without%)"
	awk "BEGIN { exit !($with > 90) }" || fail "victim delivered only $with% with stackpilot"
}

# What fragguard charges a peer, against what the kernel reports holding.
t_fragguard_estimate_calibrated() {
	frag_topo 1
	sp_start --modules fragguard --iface rp1
	sp_ctl set fragguard.enforce=0 >/dev/null || fail set
	peer 1 "$FRAGFLOOD" 10.50.1.1 500 >/dev/null || fail flood
	sleep 0.3
	local kmem=$(frag_mem) est=$(sp_json '.modules.fragguard.top_peers[0].mem')
	echo "kernel $kmem bytes, fragguard estimate $est bytes"
	assert_ge "$kmem" 100000 "kernel reassembly memory after 500 datagrams"
	# Within 10% of the kernel's own number.
	awk "BEGIN { r = $est / $kmem; exit !(r > 0.9 && r < 1.1) }" || fail "estimate $est vs kernel $kmem"
}

# Inside `ip netns exec` there is no bpffs: the loader mounts one; no cgroup is needed.
t_fragguard_runs_in_netns_without_cgroup() {
	frag_topo 1
	ip netns exec "$NS_R" sh -c 'mountpoint -q /sys/fs/bpf' && fail "bpffs already in the netns view"
	sp_start --modules fragguard --iface rp1
	sp_json '.cgroup' | grep -qx '' || fail "fragguard-only run has a cgroup"
	bpftool link show | grep -Eq "^[0-9]+: (type 11|tcx) +prog $(sp_json '.programs[] | select(.name == "sp_fragguard") | .id') " || fail "no tcx link"
	sp_stop || fail "exit"
	tc -n "$NS_R" qdisc show dev rp1 | grep -q clsact && fail "clsact left behind"
	true
}

# A clsact qdisc that was there before stays; only our filter goes.
t_fragguard_keeps_existing_clsact() {
	frag_topo 1
	ip -n "$NS_R" link set rp1 down	# nothing flows
	tc -n "$NS_R" qdisc add dev rp1 clsact || fail clsact
	# Someone else's filter (classic BPF: cls_bpf is the classifier we can count on).
	tc -n "$NS_R" filter add dev rp1 ingress pref 7 bpf bytecode '1,6 0 0 0,' || fail "foreign filter"
	sp_start --modules fragguard --iface rp1
	bpftool link show | grep -Eq "^[0-9]+: (type 11|tcx) +prog $(sp_json '.programs[] | select(.name == "sp_fragguard") | .id') " || fail "no tcx link"
	sp_stop || fail exit
	tc -n "$NS_R" filter show dev rp1 ingress | grep -q 'pref 7 bpf' || fail "foreign filter removed"
	tc -n "$NS_R" qdisc show dev rp1 | grep -q clsact || fail "foreign clsact removed"
	tc -n "$NS_R" filter show dev rp1 ingress | grep -q sp_fragguard && fail "our filter left"
	true
}

# Random spoofed sources cannot take the memory completing peers use.
t_fragguard_spoofed_flood() {
	frag_topo 2; udp_servers 2
	sp_start --modules fragguard --iface rp1 --iface rp2
	# The victim completes datagrams first (it becomes a known peer).
	udp_delivered 2 1 5M >/dev/null
	peer 1 "$FRAGFLOOD" 10.50.1.1 20000 10.60.0.0/16 >/dev/null || fail flood
	local with=$(udp_delivered 2 2 20M)
	echo "victim delivered $with% during a spoofed flood; $(sp_json '.modules.fragguard | {refused_unknown_pool, peers_tracked, admitted}')"
	assert_ge "$(sp_json '.modules.fragguard.refused_unknown_pool')" 1000 "spoofed datagrams refused by the unknown pool"
	awk "BEGIN { exit !($with > 90) }" || fail "victim delivered only $with% during a spoofed flood"
}

# IPv6 fragments of a peer are tracked and delivered.
t_fragguard_ipv6_stream() {
	frag_topo 1; udp_servers 1
	sp_start --modules fragguard --iface rp1
	local d=$(peer 1 iperf3 -6 -u -l 4000 -b 10M -t 1 -c fd50:1::1 -p 5201 -J |
		jq '.end | 100 * .sum_received.bytes / .sum_sent.bytes')
	awk "BEGIN { exit !($d > 95) }" || fail "IPv6 delivered $d%"
	assert_ge "$(sp_json '.modules.fragguard.completed')" 100 "IPv6 datagrams completed"
	sp_json '.modules.fragguard.top_peers[].peer' | grep -q '^fd50:1::$' || fail "IPv6 peer (/64) not shown"
}

# Tunables written from outside are clamped (peer_limit_kb 0 acts as 16 KiB).
t_fragguard_bpftool_clamp() {
	frag_topo 1
	sp_start --modules fragguard --iface rp1
	# prefix4, prefix6, peer_limit_kb = 0, unknown_pct, load_pct, enforce = 9
	nsenter -t "$SP_PID" -m -n bpftool map update pinned "$PIN/fragguard_cfg" key 0 0 0 0 value \
		32 0 0 0  64 0 0 0  0 0 0 0  50 0 0 0  50 0 0 0  9 0 0 0 || fail bpftool
	peer 1 "$FRAGFLOOD" 10.50.1.1 200 >/dev/null || fail flood
	local mem=$(sp_json '.modules.fragguard.top_peers[0].mem') ref=$(sp_json '.modules.fragguard.refused_peer_limit')
	echo "peer memory $mem, refused $ref"
	assert_ge "$ref" 150 "refused with peer_limit_kb=0 (acts as 16)"
	assert_ge $((16384 - mem)) 0 "peer memory under the clamped limit"
	assert_ge "$(sp_json '.modules.fragguard.dropped')" "$ref" "enforce=9 acts as 1"
}
