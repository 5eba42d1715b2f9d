# SPDX-License-Identifier: GPL-2.0
# The ECMP testbed: sender S - R1 == N parallel paths == R2 - receiver D.
# R1 spreads IPv6 traffic to D over the paths by a multipath route that hashes
# the flow label (fib_multipath_hash_policy=0), which follows the sender's
# sk_txhash. Each path is rate limited by tbf on R1's egress. Returning ACKs
# take path 0 without a limit. IPv4 takes the same multipath route, hashed on
# addresses only (a control: no flow label in IPv4).
#   S  fd01::1 10.1.0.1   D  fd02::2 10.2.0.2   path i: R1 p$i (fd10:i::1) - R2 q$i (fd10:i::2)
# Additions (issue 11):
#   ecmp_oracle on|off   best static placement in the same topology: R1 pins
#                        new flows to paths round-robin (nft numgen -> fwmark
#                        -> one routing table per path)
#   ecmp_cross_pin PORT  flows to D's PORT always take path 0 (cross traffic)
#   ecmp_vxlan           IPv4 over VXLAN S <-> D across the ECMP underlay, R1
#                        hashing L4 (outer UDP source port follows the inner
#                        socket's txhash): overlay 10.99.0.1 -> 10.99.0.2
#   unequal paths        ecmp_topo 2 100mbit,50mbit (a rate per path)
NS_S=sp-$ID-s; NS_R1=sp-$ID-r1; NS_R2=sp-$ID-r2; NS_D=sp-$ID-d

# ecmp_topo NPATHS RATES: tbf rate of each path, comma separated, e.g. 100mbit
# or 100mbit,50mbit; the last one applies to the paths not named.
ecmp_topo() {
	local n=$1 rates=$2 rate i nh6= nh4=
	for ns in "$NS_S" "$NS_R1" "$NS_R2" "$NS_D"; do mk_netns "$ns"; done
	for ns in "$NS_R1" "$NS_R2"; do
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.forwarding=1 net.ipv4.ip_forward=1
	done
	ip netns exec "$NS_R1" sysctl -qw net.ipv6.fib_multipath_hash_policy=0
	veth "$NS_S" s0 "$NS_R1" r1s
	ip -n "$NS_S" addr add fd01::1/64 dev s0 nodad; ip -n "$NS_R1" addr add fd01::2/64 dev r1s nodad
	ip -n "$NS_S" addr add 10.1.0.1/24 dev s0; ip -n "$NS_R1" addr add 10.1.0.2/24 dev r1s
	veth "$NS_R2" r2d "$NS_D" d0
	ip -n "$NS_R2" addr add fd02::1/64 dev r2d nodad; ip -n "$NS_D" addr add fd02::2/64 dev d0 nodad
	ip -n "$NS_R2" addr add 10.2.0.1/24 dev r2d; ip -n "$NS_D" addr add 10.2.0.2/24 dev d0
	for i in $(seq 0 $((n - 1))); do
		rate=$(echo "$rates" | awk -F, -v i=$((i + 1)) '{ print (i <= NF ? $i : $NF) }')
		veth "$NS_R1" "p$i" "$NS_R2" "q$i"
		ip -n "$NS_R1" addr add "fd10:$i::1/64" dev "p$i" nodad
		ip -n "$NS_R2" addr add "fd10:$i::2/64" dev "q$i" nodad
		ip -n "$NS_R1" addr add "10.10.$i.1/24" dev "p$i"
		ip -n "$NS_R2" addr add "10.10.$i.2/24" dev "q$i"
		# ~5 ms of queue at the rate: enough to fill, small enough to lose.
		ip netns exec "$NS_R1" tc qdisc add dev "p$i" root tbf rate "$rate" burst 32k latency 5ms ||
			fail "tbf on p$i"
		nh6="$nh6 nexthop via fd10:$i::2 dev p$i"
		nh4="$nh4 nexthop via 10.10.$i.2 dev p$i"
	done
	ip -n "$NS_R1" -6 route add fd02::/64 $nh6 || fail "multipath route: exit $?"
	ip -n "$NS_R1" route add 10.2.0.0/24 $nh4 || fail "multipath route v4: exit $?"
	ip -n "$NS_R2" -6 route add fd01::/64 via fd10:0::1 dev q0
	ip -n "$NS_R2" route add 10.1.0.0/24 via 10.10.0.1 dev q0
	ip -n "$NS_S" -6 route add default via fd01::2 dev s0
	ip -n "$NS_S" route add default via 10.1.0.2
	ip -n "$NS_D" -6 route add default via fd02::1 dev d0
	ip -n "$NS_D" route add default via 10.2.0.1
	# Link-local addresses finish DAD a moment after the links come up.
	for i in $(seq 50); do
		ip netns exec "$NS_S" ping -6 -c1 -W1 fd02::2 >/dev/null 2>&1 &&
			ip netns exec "$NS_S" ping -c1 -W1 10.2.0.2 >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "no path S -> D"
}

# Bytes R1 has sent on path i.
path_tx() { ip -n "$NS_R1" -j -s link show dev "p$1" | jq '.[0].stats64.tx.bytes'; }

ecmp_paths() { ip -n "$NS_R1" -o link show | grep -c ' p[0-9]*@'; }

# Per-path routing tables (100 + i) on R1, for the oracle and pinned flows,
# and the mark R1 gives each new flow: 1 + (flow number mod paths), kept in
# conntrack so every packet of a flow carries it. Marks do nothing until
# ecmp_oracle on adds the rules that route by them.
ecmp_tables() {
	local n=$(ecmp_paths) i
	for i in $(seq 0 $((n - 1))); do
		ip -n "$NS_R1" -6 route add fd02::/64 via "fd10:$i::2" dev "p$i" table $((100 + i))
		ip -n "$NS_R1" route add 10.2.0.0/24 via "10.10.$i.2" dev "p$i" table $((100 + i))
	done
	# Consecutive new flows (TCP to D, or VXLAN's outer UDP) alternate over
	# the paths: the flows of one iperf3 -P run are opened back to back, so
	# they land one per path whatever the counter stood at before. "ct mark
	# 0", not "ct state new": VXLAN's outer flows get no UDP reply (D answers
	# from another source port), so conntrack calls every packet new.
	printf 'table inet sporacle {\n chain pre {\n type filter hook prerouting priority mangle;\n iifname "r1s" ct mark 0 meta l4proto { tcp, udp } ct mark set numgen inc mod %d offset 1\n iifname "r1s" meta mark set ct mark\n }\n}\n' "$n" |
		ip netns exec "$NS_R1" nft -f - || fail "nft oracle marks"
}

ecmp_oracle() { # ecmp_oracle on|off
	local n=$(ecmp_paths) i op=del
	[ "$1" = on ] && op=add
	[ "$(ip netns exec "$NS_R1" nft list tables 2>/dev/null | grep -c sporacle)" = 1 ] || ecmp_tables
	for i in $(seq 0 $((n - 1))); do
		ip -n "$NS_R1" -6 rule $op fwmark $((i + 1)) table $((100 + i)) pref $((1000 + i))
		ip -n "$NS_R1" -4 rule $op fwmark $((i + 1)) table $((100 + i)) pref $((1000 + i))
	done 2>/dev/null
	# The sender's kernel must not rehash either: an outer VXLAN port change
	# is a new flow to R1's counter.
	ip netns exec "$NS_S" sysctl -qw net.core.txrehash=$([ "$1" = on ] && echo 0 || echo 1)
	return 0
}

# Flows to D's TCP port PORT always take path 0 (before the oracle's rules).
ecmp_cross_pin() {
	[ "$(ip netns exec "$NS_R1" nft list tables 2>/dev/null | grep -c sporacle)" = 1 ] || ecmp_tables
	ip -n "$NS_R1" -6 rule add ipproto tcp dport "$1" table 100 pref 900 || fail "cross rule: exit $?"
	ip -n "$NS_R1" -4 rule add ipproto tcp dport "$1" table 100 pref 900 || fail "cross rule v4: exit $?"
}

# IPv4 over VXLAN from S to D across the paths. R1 hashes L4 for IPv4, so the
# outer UDP source port (VXLAN derives it from the inner skb's hash, that is
# the inner socket's sk_txhash) picks the path. vx0 takes its MTU (1450)
# from the underlay device.
ecmp_vxlan() {
	ip netns exec "$NS_R1" sysctl -qw net.ipv4.fib_multipath_hash_policy=1
	ip -n "$NS_S" link add vx0 type vxlan id 42 local 10.1.0.1 remote 10.2.0.2 dstport 4789 dev s0 ||
		fail "vxlan S"
	ip -n "$NS_D" link add vx0 type vxlan id 42 local 10.2.0.2 remote 10.1.0.1 dstport 4789 dev d0 ||
		fail "vxlan D"
	ip -n "$NS_S" addr add 10.99.0.1/24 dev vx0; ip -n "$NS_D" addr add 10.99.0.2/24 dev vx0
	ip -n "$NS_S" link set vx0 up; ip -n "$NS_D" link set vx0 up
	for i in $(seq 50); do
		ip netns exec "$NS_S" ping -c1 -W1 10.99.0.2 >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "no overlay path S -> D"
}

# Outer UDP source ports of full-size VXLAN packets R1 forwarded (bulk data:
# ARP, ping and handshakes take their own ports), recorded from now on.
ecmp_vxlan_record() {
	printf 'table ip spvx {\n set sports { type inet_service; size 65536; }\n chain c_fwd {\n type filter hook forward priority 0;\n udp dport 4789 ip daddr 10.2.0.2 ip length > 1000 add @sports { udp sport }\n }\n}\n' |
		ip netns exec "$NS_R1" nft -f - || fail "nft vxlan sports"
}
ecmp_vxlan_sports() {
	ip netns exec "$NS_R1" nft -j list set ip spvx sports | jq '[.nftables[].set.elem // empty | .[]] | length'
}
