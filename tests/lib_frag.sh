# SPDX-License-Identifier: GPL-2.0
# The fragment testbed: a receiver R with one veth per peer namespace.
#   R rp$i 10.50.$i.1 / fd50:$i::1  <->  peer P$i 10.50.$i.2 / fd50:$i::2
# stackpilot runs inside R (SP_NS), on every rp$i.
NS_R=sp-$ID-r

frag_topo() { # frag_topo NPEERS
	local i
	mk_netns "$NS_R"
	for i in $(seq 1 "$1"); do
		mk_netns "sp-$ID-p$i"
		veth "$NS_R" "rp$i" "sp-$ID-p$i" "pr$i"
		ip -n "$NS_R" addr add "10.50.$i.1/24" dev "rp$i"
		ip -n "$NS_R" addr add "fd50:$i::1/64" dev "rp$i" nodad
		ip -n "sp-$ID-p$i" addr add "10.50.$i.2/24" dev "pr$i"
		ip -n "sp-$ID-p$i" addr add "fd50:$i::2/64" dev "pr$i" nodad
		ip -n "sp-$ID-p$i" route add default via "10.50.$i.1"
	done
	# Spoofed sources arrive on rp1: accept them, and answer nothing.
	ip netns exec "$NS_R" sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
	for i in $(seq 1 "$1"); do
		ip netns exec "$NS_R" sysctl -qw "net.ipv4.conf.rp$i.rp_filter=0"
	done
	SP_NS=$NS_R
}

peer() { local i=$1; shift; ip netns exec "sp-$ID-p$i" "$@"; }

# Reassembly memory of R now (sockstat FRAG memory).
frag_mem() { ip netns exec "$NS_R" awk '/^FRAG:/ { print $5 }' /proc/net/sockstat; }

# Fragmented UDP from peer $1 to R for $2 s at $3 (e.g. 50M), over IPv$4
# (default 4): percent delivered. An iperf3 that failed or sent nothing
# fails the test (its 0 % would pass for a blocked victim).
udp_delivered() {
	local i=$1 secs=$2 rate=$3 port=$((5200 + $1)) dst=10.50.$1.1 d
	[ "${4:-4}" = 6 ] && dst=fd50:$1::1
	d=$(peer "$i" iperf3 -"${4:-4}" -u -l 4000 -b "$rate" -t "$secs" -c "$dst" -p "$port" -J 2>/dev/null |
		jq '.end | select(.sum_sent.bytes > 0) | 100 * .sum_received.bytes / .sum_sent.bytes') ||
		fail "iperf3 from peer $i to $dst port $port failed"
	[[ $d =~ ^[0-9]+(\.[0-9]+)?(e-?[0-9]+)?$ ]] || fail "iperf3 from peer $i to $dst port $port sent nothing: '$d'"
	echo "$d"
}

udp_servers() { # one iperf3 server per peer
	local i
	for i in $(seq 1 "$1"); do
		ip netns exec "$NS_R" iperf3 -s -D -p $((5200 + i)) >/dev/null || fail "iperf3 server: exit $?"
	done
	sleep 0.2
}
