# SPDX-License-Identifier: GPL-2.0
# The black-hole testbed: sender S - router R - receiver D, and a clean D2.
#   S s0 10.30.1.1 fd30:1::1 (MTU 1500) -- R
#   R rd 10.30.2.1 fd30:2::1 MTU $1 (default 1400)  -- D d0 10.30.2.2 fd30:2::2 MTU 1500
#   (and R forwards from D to S at MTU $1 too: both directions are narrow)
#   R rd2 10.30.3.1 fd30:3::1 -- D2 10.30.3.2 fd30:3::2, all at 1500
# R drops the ICMP "fragmentation needed" / "packet too big" it would send:
# packets over the MTU vanish, a black hole. With $2 = noecho it also drops
# ICMP echo towards D; with $2 = noprobe, also SYNs that carry data (every
# probe stackpilot has is filtered); noprobe4 does that for IPv4 only.
#
# PMTU_OVERLAY=vxlan adds the overlay variant on top: a VXLAN between S and D
# across R (VNI 42, UDP 4789, outer DF set), vx0 at MTU 1450 on both ends:
#   S vx0 10.31.0.1 fd31::1 -- D vx0 10.31.0.2 fd31::2
# An inner packet over 1400 - 50 = 1350 makes an outer one R cannot forward
# and whose ICMP it drops: the black hole is inside the tunnel, where the
# endpoints see a clean 1450. The probe filters ($2) then act on D's vx0
# (R only sees UDP). DST4/DST6 name the destination behind the black hole
# and DST6P its IPv6 entry (prefix6 64) in either variant.
NS_S=sp-$ID-s; NS_RT=sp-$ID-rt; NS_D=sp-$ID-d; NS_D2=sp-$ID-d2
PMTU_OVERLAY=${PMTU_OVERLAY:-}
pmtu_addrs() {
	if [ "$PMTU_OVERLAY" = vxlan ]; then
		DST4=10.31.0.2; DST6=fd31::2; DST6P=fd31::; SRC4=10.31.0.1; SRC6=fd31::1
	else
		DST4=10.30.2.2; DST6=fd30:2::2; DST6P=fd30:2::; SRC4=10.30.1.1; SRC6=fd30:1::1
	fi
}
pmtu_addrs

pmtu_topo() {
	local mtu=${1:-1400}
	pmtu_addrs
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
	# The way back from D to S is just as narrow (a download's black hole).
	# rd's MTU does not do it: a veth receives GSO packets above its MTU.
	# rs at the MTU would narrow D2 -> S too: a route MTU for what comes from rd.
	ip -n "$NS_RT" rule add iif rd lookup 100 pref 100; ip -n "$NS_RT" -6 rule add iif rd lookup 100 pref 100
	ip -n "$NS_RT" route add 10.30.1.0/24 dev rs mtu "$mtu" table 100
	ip -n "$NS_RT" -6 route add fd30:1::/64 dev rs mtu "$mtu" table 100
	printf 'table inet bh {\n chain out {\n type filter hook output priority 0;\n icmp type destination-unreachable icmp code frag-needed drop\n icmpv6 type packet-too-big drop\n }\n chain c_fwd {\n type filter hook forward priority 0;\n }\n}\n' |
		ip netns exec "$NS_RT" nft -f - || fail "nft black hole"
	# Where the probe filters sit: R's forward chain, or D's input from vx0.
	local fns=$NS_RT chain=c_fwd
	if [ "$PMTU_OVERLAY" = vxlan ]; then
		pmtu_vxlan
		fns=$NS_D chain=c_in
	fi
	if [ -n "${2:-}" ]; then
		ip netns exec "$fns" nft add rule inet bh $chain icmp type echo-request drop
		[ "$2" = noprobe4 ] || ip netns exec "$fns" nft add rule inet bh $chain icmpv6 type echo-request drop
	fi
	if [ "${2:-}" = noprobe ] || [ "${2:-}" = noprobe4 ]; then
		ip netns exec "$fns" nft add rule inet bh $chain 'tcp flags & (syn | ack) == syn ip length > 100 drop'
	fi
	if [ "${2:-}" = noprobe ]; then
		ip netns exec "$fns" nft add rule inet bh $chain 'tcp flags & (syn | ack) == syn ip6 length > 100 drop'
	fi
	for _ in $(seq 50); do
		ip netns exec "$NS_S" ping -c1 -W1 "$DST4" >/dev/null 2>&1 &&
			ip netns exec "$NS_S" ping -6 -c1 -W1 "$DST6" >/dev/null 2>&1 && break
		[ -n "${2:-}" ] && break
		sleep 0.1
	done
	ip netns exec "$NS_D" "$TCPTOOL" server 5201 >/dev/null & BG_PIDS+=($!); disown
	ip netns exec "$NS_D2" "$TCPTOOL" server 5201 >/dev/null & BG_PIDS+=($!); disown
	sleep 0.3
	SP_NS=$NS_S
}

# The overlay of PMTU_OVERLAY=vxlan (see the top), over pmtu_topo's underlay.
pmtu_vxlan() {
	local side ns l r a4 a6
	for side in s d; do
		if [ $side = s ]; then ns=$NS_S l=10.30.1.1 r=10.30.2.2 a4=10.31.0.1 a6=fd31::1
		else ns=$NS_D l=10.30.2.2 r=10.30.1.1 a4=10.31.0.2 a6=fd31::2; fi
		ip -n "$ns" link add vx0 type vxlan id 42 local $l remote $r dstport 4789 df set ||
			fail "vxlan in $ns"
		ip -n "$ns" link set vx0 mtu 1450 up
		ip -n "$ns" addr add $a4/24 dev vx0; ip -n "$ns" addr add $a6/64 dev vx0 nodad
	done
	printf 'table inet bh {\n chain c_in {\n type filter hook input priority 0;\n iifname != "vx0" accept\n }\n}\n' |
		ip netns exec "$NS_D" nft -f - || fail "nft probe filter chain in D"
}

# The largest IPv4 (or with $2 = -6, IPv6) packet that reaches $1 from S,
# found with DF pings (ping -M do): the kernel is the oracle of the true MTU.
pmtu_true_mtu() {
	local lo=1200 hi=1501 mid hdr=28
	[ "${2:-}" = -6 ] && hdr=48
	while [ $((hi - lo)) -gt 1 ]; do
		mid=$(((lo + hi) / 2))
		if ip netns exec "$NS_S" ping ${2:-} -M do -c1 -W 0.2 -s $((mid - hdr)) "$1" >/dev/null 2>&1 ||
		   ip netns exec "$NS_S" ping ${2:-} -M do -c1 -W 0.2 -s $((mid - hdr)) "$1" >/dev/null 2>&1; then
			lo=$mid
		else
			hi=$mid
		fi
	done
	echo "$lo"
}

# The sender's retransmission timeouts so far (TcpExtTCPTimeouts).
s_rtos() { ip netns exec "$NS_S" nstat -az TcpExtTCPTimeouts | awk '$1 == "TcpExtTCPTimeouts" { print $2 }'; }

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

# Real clients: python3's http.server (Debian's python3) serving $HTTP_SIZE
# bytes as /file, and taking PUT/POST bodies (read and dropped: the upload
# case); curl as the client.
HTTP_SIZE=${HTTP_SIZE:-5000000}
HTTP_PORT=8080
PYTHON3=$(command -v /usr/bin/python3 python3 | head -1)

# http_serve NS [cgroup]: a server in NS (in the test cgroup with "cgroup"),
# on [::]:$HTTP_PORT for IPv4 and IPv6; it dies with the test.
http_serve() {
	local pre=
	[ "${2:-}" = cgroup ] && pre=in_cgroup
	mkdir -p "$TMP/www"
	[ -s "$TMP/www/file" ] || head -c "$HTTP_SIZE" /dev/zero >"$TMP/www/file"
	$pre ip netns exec "$1" "$PYTHON3" -c '
import http.server, socket, sys
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_PUT(self):
        n = int(self.headers.get("Content-Length", 0))
        while n > 0:
            b = self.rfile.read(min(n, 65536))
            if not b: return
            n -= len(b)
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    do_POST = do_PUT
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True
import functools
S(("::", int(sys.argv[1])), functools.partial(H, directory=sys.argv[2])).serve_forever()
' "$HTTP_PORT" "$TMP/www" >/dev/null 2>&1 &
	BG_PIDS+=($!); disown
	for _ in $(seq 50); do
		ip netns exec "$1" ss -Hltn "sport = :$HTTP_PORT" | has . && return 0
		sleep 0.1
	done
	fail "http server in $1 not listening"
}

# http_fetch NS HOST METHOD [cgroup] [LIMIT]: one curl from NS (in the test
# cgroup with "cgroup") of /file (GET: download) or of a $HTTP_SIZE body to
# it (PUT/POST: upload), new connection, at most LIMIT s (12). Prints
# "secs ok": ok 1 when the whole body went through, else 0 and secs = the
# time until curl gave up.
http_fetch() {
	local pre= host=$2 w data=()
	[ "${4:-}" = cgroup ] && pre=in_cgroup
	case $host in *:*) host="[$host]" ;; esac
	# No "Expect: 100-continue": a PUT would wait for it, not for the path.
	[ "$3" = GET ] || data=(-H 'Expect:' --data-binary "@$TMP/www/file")
	w=$($pre ip netns exec "$1" curl -s -o /dev/null -X "$3" "${data[@]}" --max-time "${5:-12}" \
		-w '%{time_total} %{http_code} %{size_download} %{size_upload}' "http://$host:$HTTP_PORT/file")
	set -- $w
	if [ "${2:-0}" = 200 ] && { [ "${3:-0}" = "$HTTP_SIZE" ] || [ "${4:-0}" = "$HTTP_SIZE" ]; }; then
		echo "$1 1"
	else
		echo "${1:-0} 0"
	fi
}

# Probe packets S sends towards D: DF echo requests and SYNs that carry data
# (what stackpilot probes with; a plain SYN is 60 bytes), counted on S's
# way out, inside the tunnel in the overlay variant (R only sees UDP there).
pmtu_probe_counter() {
	printf 'table inet sp_cnt {\n chain out {\n type filter hook output priority 0;\n ip daddr %s icmp type echo-request counter\n ip6 daddr %s icmpv6 type echo-request counter\n ip daddr %s tcp flags & (syn | ack) == syn ip length > 100 counter\n ip6 daddr %s tcp flags & (syn | ack) == syn ip6 length > 100 counter\n }\n}\n' \
		"$DST4" "$DST6" "$DST4" "$DST6" | ip netns exec "$NS_S" nft -f - || fail "nft probe counter"
}
# pmtu_probes [bytes]: probe packets (or their IP bytes) counted so far.
pmtu_probes() {
	ip netns exec "$NS_S" nft list chain inet sp_cnt out |
		awk -v f="${1:-packets}" '{ for (i = 1; i < NF; i++) if ($i == f) n += $(i + 1) } END { print n + 0 }'
}
