# SPDX-License-Identifier: GPL-2.0
# The black-hole testbed: sender S - router R - receiver D, and a clean D2.
#   S s0 10.30.1.1 fd30:1::1 (MTU 1500) -- R
#   R rd 10.30.2.1 fd30:2::1 MTU $1 (default 1400)  -- D d0 10.30.2.2 fd30:2::2 MTU 1500
#   R rd2 10.30.3.1 fd30:3::1 -- D2 10.30.3.2 fd30:3::2, all at 1500
# R drops the ICMP "fragmentation needed" / "packet too big" it would send:
# packets over the MTU vanish, a black hole. With $2 = noecho it also drops
# ICMP echo towards D; with $2 = noprobe, also SYNs that carry data (every
# probe stackpilot has is filtered); noprobe4 does that for IPv4 only.
NS_S=sp-$ID-s; NS_RT=sp-$ID-rt; NS_D=sp-$ID-d; NS_D2=sp-$ID-d2

pmtu_topo() {
	local mtu=${1:-1400}
	for ns in "$NS_S" "$NS_RT" "$NS_D" "$NS_D2"; do mk_netns "$ns"; done
	ip netns exec "$NS_RT" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
	veth "$NS_S" s0 "$NS_RT" rs
	veth "$NS_RT" rd "$NS_D" d0
	veth "$NS_RT" rd2 "$NS_D2" d0
	ip -n "$NS_RT" link set rd mtu "$mtu"
	ip -n "$NS_S" addr add 10.30.1.1/24 dev s0; ip -n "$NS_S" addr add fd30:1::1/64 dev s0 nodad
	ip -n "$NS_RT" addr add 10.30.1.2/24 dev rs; ip -n "$NS_RT" addr add fd30:1::2/64 dev rs nodad
	ip -n "$NS_RT" addr add 10.30.2.1/24 dev rd; ip -n "$NS_RT" addr add fd30:2::1/64 dev rd nodad
	ip -n "$NS_D" addr add 10.30.2.2/24 dev d0; ip -n "$NS_D" addr add fd30:2::2/64 dev d0 nodad
	ip -n "$NS_RT" addr add 10.30.3.1/24 dev rd2; ip -n "$NS_RT" addr add fd30:3::1/64 dev rd2 nodad
	ip -n "$NS_D2" addr add 10.30.3.2/24 dev d0; ip -n "$NS_D2" addr add fd30:3::2/64 dev d0 nodad
	ip -n "$NS_S" route add default via 10.30.1.2; ip -n "$NS_S" -6 route add default via fd30:1::2
	ip -n "$NS_D" route add default via 10.30.2.1; ip -n "$NS_D" -6 route add default via fd30:2::1
	ip -n "$NS_D2" route add default via 10.30.3.1; ip -n "$NS_D2" -6 route add default via fd30:3::1
	printf 'table inet bh {\n chain out {\n type filter hook output priority 0;\n icmp type destination-unreachable icmp code frag-needed drop\n icmpv6 type packet-too-big drop\n }\n chain c_fwd {\n type filter hook forward priority 0;\n }\n}\n' |
		ip netns exec "$NS_RT" nft -f - || fail "nft black hole"
	if [ -n "${2:-}" ]; then
		ip netns exec "$NS_RT" nft add rule inet bh c_fwd icmp type echo-request drop
		[ "$2" = noprobe4 ] || ip netns exec "$NS_RT" nft add rule inet bh c_fwd icmpv6 type echo-request drop
	fi
	if [ "${2:-}" = noprobe ] || [ "${2:-}" = noprobe4 ]; then
		ip netns exec "$NS_RT" nft add rule inet bh c_fwd 'tcp flags & (syn | ack) == syn ip length > 100 drop'
	fi
	if [ "${2:-}" = noprobe ]; then
		ip netns exec "$NS_RT" nft add rule inet bh c_fwd 'tcp flags & (syn | ack) == syn ip6 length > 100 drop'
	fi
	for _ in $(seq 50); do
		ip netns exec "$NS_S" ping -c1 -W1 10.30.2.2 >/dev/null 2>&1 &&
			ip netns exec "$NS_S" ping -6 -c1 -W1 fd30:2::2 >/dev/null 2>&1 && break
		[ -n "${2:-}" ] && break
		sleep 0.1
	done
	ip netns exec "$NS_D" "$TCPTOOL" server 5201 >/dev/null & BG_PIDS+=($!); disown
	ip netns exec "$NS_D2" "$TCPTOOL" server 5201 >/dev/null & BG_PIDS+=($!); disown
	sleep 0.3
	SP_NS=$NS_S
}

# One transfer of $2 bytes from S to $1 in the cgroup (or outside with $3 = outside):
# prints "secs mss retrans".
xfer() {
	local pre=in_cgroup
	[ "${3:-}" = outside ] && pre=
	$pre ip netns exec "$NS_S" "$TCPTOOL" client "$1" 5201 "$2" 1 "${4:-30}" |
		sed -n 's/^conn secs=\([0-9.]*\) mss=\([0-9]*\) retrans=\([0-9]*\).*done=1$/\1 \2 \3/p'
}

pm_entry() { # pm_entry DST FIELD
	sp_json ".modules.pmtu.destinations[] | select(.dst == \"$1\") | .$2"
}
