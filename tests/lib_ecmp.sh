# SPDX-License-Identifier: GPL-2.0
# The ECMP testbed: sender S - R1 == N parallel paths == R2 - receiver D.
# R1 spreads IPv6 traffic to D over the paths by a multipath route that hashes
# the flow label (fib_multipath_hash_policy=0), which follows the sender's
# sk_txhash. Each path is rate limited by tbf on R1's egress. Returning ACKs
# take path 0 without a limit. IPv4 takes the same multipath route, hashed on
# addresses only (a control: no flow label in IPv4).
#   S  fd01::1 10.1.0.1   D  fd02::2 10.2.0.2   path i: R1 p$i (fd10:i::1) - R2 q$i (fd10:i::2)
NS_S=sp-$ID-s; NS_R1=sp-$ID-r1; NS_R2=sp-$ID-r2; NS_D=sp-$ID-d

ecmp_topo() { # ecmp_topo NPATHS RATE (tbf rate, e.g. 100mbit)
	local n=$1 rate=$2 i nh6= nh4=
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
	ip -n "$NS_R1" -6 route add fd02::/64 $nh6 || fail "multipath route"
	ip -n "$NS_R1" route add 10.2.0.0/24 $nh4 || fail "multipath route v4"
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
