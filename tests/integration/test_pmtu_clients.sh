# SPDX-License-Identifier: GPL-2.0
# pmtu with real clients (tests/lib_pmtu.sh: curl against python3's
# http.server, 5 MB a fetch, a new connection each) through the black hole,
# plain and overlay. Client-only: stackpilot and curl in S's cgroup, the
# server in D. Server-only: the server in S's cgroup, curl in D.
source "$ROOT/tests/lib_pmtu.sh"

# fetches FROM-NS HOST METHOD [cgroup]: fetch 1 (12 s at most), then 2..5,
# which must each complete in under 1 s: a stall into the black hole costs
# seconds (the kernel's detection, or an RTO at least), the oracle ~0.02 s.
fetches() {
	local i r
	r=$(http_fetch "$@"); echo "fetch 1: $r"
	FETCH1=$r
	for i in 2 3 4 5; do
		r=$(http_fetch "$@")
		echo "fetch $i: $r"
		[ "${r#* }" = 1 ] || fail "fetch $i did not complete in 12 s ($r)"
		awk -v t="${r% *}" 'BEGIN { exit !(t < 1) }' || fail "fetch $i took ${r% *} s, expected < 1 s"
	done
}

# Today's case: uploads (curl PUT) to D, stackpilot on the client.
t_pmtu_clients_upload_client_only() {
	need_clamp	# without pmtu.route, the clamp is what starts 2..5 right
	pmtu_topo 1400; make_cgroup
	http_serve "$NS_D"
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	fetches "$NS_S" "$DST4" PUT cgroup
	[ "${FETCH1#* }" = 1 ] || fail "fetch 1 did not complete: $FETCH1"
}

# Downloads (curl GET) from D with stackpilot on the client only (needs the
# search on a destination's first connection: pmtu2): the client has no RTO
# of its own to learn from; 2..5 must start at the learned MSS.
pmtu_download_client_only() {
	need_clamp	# the MSS the client's SYN announces
	pmtu_topo 1400; make_cgroup
	http_serve "$NS_D"
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	fetches "$NS_S" "$DST4" GET cgroup
	echo "entry: $(sp_json '.modules.pmtu.destinations | tostring')"
}
t_pmtu_clients_download_plain_client_only() { pmtu_download_client_only; }
t_pmtu_clients_download_overlay_client_only() { PMTU_OVERLAY=vxlan pmtu_download_client_only; }

# Downloads from a server in the cgroup (stackpilot on the server only,
# pmtu.route=1) to a client behind the black hole (needs server-side
# suspects: pmtu2): the route MTU rescues fetch 1 in under 1.5 s.
t_pmtu_clients_download_server_only_route() {
	pmtu_topo 1400; make_cgroup
	http_serve "$NS_S" cgroup
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	sp_ctl set pmtu.route=1 >/dev/null || fail "set pmtu.route=1: exit $?"
	fetches "$NS_D" "$SRC4" GET
	echo "routes: $(ip -n "$NS_S" route show proto 0xa5)"
	[ "${FETCH1#* }" = 1 ] || fail "fetch 1 did not complete: $FETCH1"
	awk -v t="${FETCH1% *}" 'BEGIN { exit !(t < 1.5) }' || fail "fetch 1 took ${FETCH1% *} s, expected < 1.5 s"
}

# What a new destination costs in probe packets (issue: at most 20), and a
# known one none: counted on S's way out while the uploads run.
t_pmtu_clients_probes_per_destination() {
	pmtu_topo 1400; make_cgroup
	pmtu_probe_counter
	http_serve "$NS_D"
	sp_start --modules pmtu --cgroup "sp-test-$ID" --mtu-probing 1
	http_fetch "$NS_S" "$DST4" PUT cgroup >/dev/null
	# Everything fetch 1 causes counts for the new destination: searches
	# that start late (from the stalled connection's RTOs) too. Done when
	# the count has not moved for 2 s.
	local first=-1 n
	for _ in $(seq 10); do
		n=$(pmtu_probes)
		[ "$n" = "$first" ] && break
		first=$n
		sleep 2
	done
	echo "entry: $(sp_json '.modules.pmtu.destinations | tostring'); probe packets $first; $(grep 'pmtu:' "$TMP/sp.err")"
	[ "$(pm_entry "$DST4" state)" = searched ] || fail "destination not searched: state '$(pm_entry "$DST4" state)'"
	[ "$first" -ge 1 ] && [ "$first" -le 20 ] ||
		fail "$first probe packets for a new destination, expected 1 to 20 (searches: $(grep -c 'searching its path MTU' "$TMP/sp.err"))"
	http_fetch "$NS_S" "$DST4" PUT cgroup >/dev/null
	http_fetch "$NS_S" "$DST4" GET cgroup >/dev/null
	assert_eq "$(pmtu_probes)" "$first" "probe packets after 2 more fetches to a known destination"
}
