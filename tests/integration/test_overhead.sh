# SPDX-License-Identifier: GPL-2.0
# Zero steady-state cost: one program run per socket event whatever the
# modules (bpf/chain.bpf.h), and none per ACK once a connection is
# established and its modules have what they wait for (bpf/rttcb.bpf.h),
# counted with the kernel's own run counts (status: programs[].run_cnt), not
# timed. fragguard is a tc filter: it runs per packet by its nature (a
# non-fragment leaves at its first test; its cost is fgcost's, make bench).

# runs_of NAME: the run count of program NAME in the running instance.
runs_of() { num "$(sp_json "[.programs[] | select(.name == \"$1\") | .run_cnt] | add // 0")" "runs of $1"; }

# sockops_runs: the runs of the run's one sockops program, which runs the
# modules' (a tail call is no run of its own).
sockops_runs() { runs_of sp_sockops; }

# rtt_runs: RTT (per-ACK) callbacks of the cgroup's connections, every
# module's: rehash counts each one it runs for (it runs for all of them,
# behind the one sockops program), with state kept or not.
rtt_runs() { sp_num '.modules.rehash | .rtt_callbacks + .rtt_callbacks_other'; }

# A server on B's port 5201, rehash and pmtu on the cgroup, rehash's rounds
# off (they ask for RTT_CB of their own): what RTT callbacks run is pmtu's.
rtt_setup() {
	netns_pair; make_cgroup
	tcp_server 5201
	sp_start --cgroup "$CG" --modules rehash,pmtu
	sp_ctl set rehash.rounds=0 >/dev/null || fail "set rehash.rounds=0"
}

# The names of the programs on $CG, a line each.
cgroup_prog_names() {
	local id
	for id in $(cgroup_progs); do bpftool prog show id "$id" -j | jq -r .name; done
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

# For each combination of the sockops modules: one program on the cgroup,
# and its runs for one 8 MiB connection, then for one 64 MiB connection
# paced at half the rate the first one reached (below what this machine
# carries, a guest under emulation too: no queue to overflow). Per
# connection it runs a fixed few times (connect, established, state
# changes, the first learn_kb's ACKs while pmtu waits for its proof): at
# most per_conn, whatever the size, plus a retransmission callback per
# segment the kernel still had to retransmit; a per-ACK callback left on
# runs thousands of times. Every module of the chain saw both connections
# (tcpstats and pmtu count them; rehash counts nothing on a clean one: its
# place in the chain is between them, or its own tests').
t_overhead_runs_per_connection() {
	local mods small big rate retrans per_conn=32 progs
	netns_pair; make_cgroup
	tcp_server 5201
	for mods in tcpstats rehash pmtu tcpstats,rehash tcpstats,pmtu rehash,pmtu tcpstats,rehash,pmtu; do
		sp_start --cgroup "$CG" --modules "$mods" --bpf-stats
		progs=$(cgroup_prog_names | tr '\n' ' ')
		assert_eq "$progs" "sp_sockops " "$mods: the programs on the cgroup"
		assert_eq "$(chain_progs | wc -l)" "$(echo "${mods//,/ }" | wc -w)" "$mods: the modules behind sp_sockops"
		bulk 8
		small=$(sockops_runs)
		rate=$(awk -v s="$(bulk_field secs)" 'BEGIN { r = 8 * 1048576 / s / 2; print int(r < 268435456 ? r : 268435456) }')
		bulk 64 "$rate"
		retrans=$(num "$(bulk_field retrans)" "retransmits of the 64 MiB connection")
		big=$(sockops_runs)
		case ,$mods, in *,tcpstats,*)
			assert_eq "$(sp_num '.modules.tcpstats.active_opens')" 2 "$mods: tcpstats' connections" ;;
		esac
		case ,$mods, in *,pmtu,*)
			assert_eq "$(sp_num '.modules.pmtu.connects')" 2 "$mods: pmtu's connections" ;;
		esac
		sp_stop || fail "$mods: stop: $(sp_said)"
		assert_le "$small" $per_conn "$mods: runs of sp_sockops for one 8 MiB connection"
		assert_le $((big - small)) $((per_conn + 2 * retrans)) \
			"$mods: runs of sp_sockops for one 64 MiB connection (8 MiB: $small; the client's $(cat "$TMP/bulk"))"
		echo "$mods: sp_sockops runs: 8 MiB $small, 64 MiB $((big - small)), $retrans retransmits" >&2
	done
}

# State callbacks run every sockops program of the cgroup at each of a
# connection's state changes (three or four a connection, one of them its
# close): asked for only where a close is counted. tcpstats asks with
# closes=1 only, and then counts its closing connections; rehash asks with
# reuse on, or for a connection it keeps state for; pmtu for none. With
# none of these, a short connection runs each program no state callback;
# with closes off, another module's ask counts no close in tcpstats.
t_overhead_state_cb_asked() {
	local a b c n=20 closed
	netns_pair; make_cgroup
	tcp_server 5201
	# pmtu too: to a destination it has not proved, all but the first
	# connection of each second leave their proof and ask for no close.
	sp_start --cgroup "$CG" --modules tcpstats,rehash,pmtu --bpf-stats
	ov_short() {
		in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 1000 $n >/dev/null ||
			fail "$n short connections: exit $?"
		sleep 0.3	# the last close (tcp_done) can follow the client's exit
	}
	ov_short
	a=$(runs_of sp_sockops)
	assert_eq "$(sp_num '.modules.tcpstats.closed_segs_out')" 0 "closed_segs_out with closes off"
	sp_ctl set tcpstats.closes=1 >/dev/null || fail "set tcpstats.closes=1"
	ov_short
	b=$(runs_of sp_sockops)
	closed=$(sp_num '.modules.tcpstats.closed_segs_out')
	echo "sp_sockops runs for $n connections: closes off $a, on $((b - a))" >&2
	# Each connection sends its SYN, its request and its FIN at least.
	assert_ge "$closed" $((3 * n)) "closed_segs_out of $n connections with closes on"
	assert_ge $((b - a)) $((a + 2 * n)) "runs for $n connections: closes on against off ($a)"
	sp_ctl set tcpstats.closes=0 rehash.reuse=1 >/dev/null || fail "set tcpstats.closes=0 rehash.reuse=1"
	ov_short
	c=$(runs_of sp_sockops)
	echo "sp_sockops runs for $n connections with rehash.reuse=1: $((c - b))" >&2
	assert_ge $((c - b)) $((a + 2 * n)) "runs for $n connections: rehash.reuse on against off ($a)"
	assert_eq "$(sp_num '.modules.tcpstats.closed_segs_out')" "$closed" \
		"closed_segs_out after closes went off, with rehash's state callbacks"
	# A connection rehash keeps state for (made at its first
	# retransmission: its second data segment is dropped once) asks for
	# its close itself: its bytes count there, not only up to the episode.
	sp_ctl set rehash.reuse=0 >/dev/null || fail "set rehash.reuse=0"
	printf 'table inet sptest {\n chain in {\n type filter hook input priority 0;\n }\n}\n' |
		ip netns exec "$NS_B" nft -f - || fail "nft: exit $?"
	ip netns exec "$NS_B" nft add rule inet sptest in tcp dport 5201 ip length '>' 200 \
		numgen inc mod 1000000 1 drop || fail "nft rule: exit $?"
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 4000000 1 >/dev/null ||
		fail "lossy connection: exit $?"
	for _ in $(seq 20); do	# its close (tcp_done) can follow the client's exit
		[ "$(sp_num '.modules.rehash.bytes_delivered')" -ge 4000000 ] && break
		sleep 0.1
	done
	assert_ge "$(sp_num '.modules.rehash.retrans_seen')" 1 "rehash's retransmissions of the lossy connection"
	assert_ge "$(sp_num '.modules.rehash.bytes_delivered')" 4000000 \
		"rehash's bytes of a 4 MB connection it made state for, at its close"
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
	rtt=$(rtt_runs)
	# 64 MiB of full-size segments are hundreds of ACKs even with GRO and
	# delayed ACKs (about 7 a MiB here): far more than pmtu's few before its proof.
	assert_ge "$rtt" 100 "rehash's RTT callbacks over 64 MiB with rounds on, beside pmtu"
	assert_ge "$(sp_num '.modules.pmtu.learned_from_connections')" 1 "pmtu learned the destination"
	# And with rounds off, rehash asks for nothing: RTT_CB goes off after
	# pmtu's proof, for rehash too.
	sp_ctl set rehash.rounds=0 >/dev/null || fail "set rehash.rounds=0"
	bulk 1
	rtt=$(rtt_runs)
	bulk 64
	assert_le $(( $(rtt_runs) - rtt )) 64 \
		"rehash's RTT callbacks over 64 MiB with rounds off, beside pmtu"
}

# A connection that can teach pmtu nothing (clamped to its destination's
# low, or that low is at least the route's MTU it starts with) asks for no
# per-ACK callback at all: short connections to a learned destination run
# no RTT callback in any module. One to a destination not known yet still
# waits for its proof.
known_destination() {
	local rtt left
	rtt_setup
	bulk 8
	assert_ge "$(sp_num '.modules.pmtu.learned_from_connections')" 1 "pmtu learned the destination"
	rtt=$(rtt_runs)
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 4000 20 >/dev/null || fail "short connections: exit $?"
	assert_eq $(( $(rtt_runs) - rtt )) 0 \
		"RTT callbacks of 20 short connections to a learned destination"
	rtt=$(rtt_runs)
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client fd77::2 5201 4000 1 >/dev/null || fail "IPv6 connection: exit $?"
	assert_ge $(( $(rtt_runs) - rtt )) 1 \
		"RTT callbacks of a connection to a destination pmtu has not learned"
	# Unclamped (enforce off, or a kernel whose bpf_setsockopt() takes no
	# TCP_MAXSEG): the connection that claims the destination's proof at
	# connect (one a second) lets it go at establishment, where it sees
	# its route's MTU is no more than low. Past the last claim first.
	sp_ctl set pmtu.enforce=0 >/dev/null || fail "set pmtu.enforce=0"
	sleep 1.1
	rtt=$(rtt_runs)
	left=$(sp_num '.modules.pmtu.proofs_left_to_another')
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 4000 5 >/dev/null || fail "unclamped connections: exit $?"
	assert_le $(( $(sp_num '.modules.pmtu.proofs_left_to_another') - left )) 4 \
		"of 5 unclamped connections to a learned destination, those that left their proof (one claims it)"
	assert_eq $(( $(rtt_runs) - rtt )) 0 \
		"RTT callbacks of 5 unclamped connections to a learned destination"
}
t_overhead_known_destination() { known_destination; }
# The same where the kernel cannot clamp (before 6.1): each connection's
# role is decided at its establishment, by its route's MTU.
t_overhead_known_destination_no_clamp() { SP_PROBE_OFF=sockops_maxseg known_destination; }

# A socket connected again after a refused connect: the storage its first
# connect made (it claimed an unproved destination's proof and was to wait)
# is the second connection's, which left the proof to it: it waits for
# nothing, so no RTT callback runs for it.
t_overhead_reconnect_fresh_role() {
	local rtt
	# Where the kernel cannot clamp, roles are taken at establishment:
	# a refused connect claims nothing there.
	need_feature sockops_maxseg
	rtt_setup
	rtt=$(rtt_runs)
	in_cgroup ip netns exec "$NS_A" python3 -c '
import socket
s = socket.socket(socket.AF_INET6)
try:
    s.connect(("fd77::2", 5999))
    raise SystemExit("port 5999 answered")
except ConnectionRefusedError:
    pass
s.connect(("fd77::2", 5201))
s.sendall(b"x" * 4000)
s.shutdown(socket.SHUT_WR)
s.recv(1)
' || fail "refused then connected: exit $?"
	assert_eq "$(sp_num '.modules.pmtu.proofs_left_to_another')" 1 "connections that left the proof to the refused one"
	assert_eq $(( $(rtt_runs) - rtt )) 0 \
		"RTT callbacks of a connection made on a socket whose refused connect was to wait"
}

# A socket disconnected (connect AF_UNSPEC) while its connection waited for
# its proof, then connected again: the second connection leaves the proof
# to the first (claimed less than a second ago), so it waits for nothing,
# and the RTT_CB flag the first asked for (the socket keeps it through a
# disconnect) is given up: its 4 MiB run no RTT callback. The first one's
# 1000 bytes run a few (it waits from its establishment on).
t_overhead_disconnect_gives_up_rtt() {
	local rtt left
	rtt_setup
	rtt=$(rtt_runs)
	left=$(sp_num '.modules.pmtu.proofs_left_to_another')
	in_cgroup ip netns exec "$NS_A" python3 -c '
import ctypes, socket, time
libc = ctypes.CDLL(None, use_errno=True)
s = socket.socket(socket.AF_INET6)
s.connect(("fd77::2", 5201))
s.sendall(b"x" * 1000)
time.sleep(0.3)
unspec = ctypes.create_string_buffer(28)  # a sockaddr_in6 of family AF_UNSPEC
if libc.connect(s.fileno(), unspec, 28):
    raise SystemExit("disconnect: errno %d" % ctypes.get_errno())
s.connect(("fd77::2", 5201))
s.sendall(b"x" * (4 << 20))
s.shutdown(socket.SHUT_WR)
s.recv(1)
' || fail "connected, disconnected, connected: exit $?"
	assert_eq $(( $(sp_num '.modules.pmtu.proofs_left_to_another') - left )) 1 \
		"connections that left the proof to the disconnected one"
	assert_le $(( $(rtt_runs) - rtt )) 4 \
		"RTT callbacks of 1000 bytes on a connection that waited, then 4 MiB on the same socket reconnected"
}

# A socket whose connection had an RTO while it waited for its proof,
# disconnected and connected again: the reconnect proves nothing. Before
# 6.1 (TCP_MAXSEG probed off here) the new connection takes its role at
# establishment, after its SYN-ACK's RTT callback ran on the old
# connection's storage: bytes_acked (zeroed by the disconnect) below the
# old RTO's mark must not wrap into a proof of 4 KiB delivered.
reconnect_after_rto() {
	rtt_setup
	in_cgroup ip netns exec "$NS_A" python3 - "$NS_B" <<-'PY' || fail "RTO, disconnect, reconnect: exit $?"
	import ctypes, socket, subprocess, sys, time
	libc = ctypes.CDLL(None, use_errno=True)
	def nft(*a):
	    subprocess.run(["ip", "netns", "exec", sys.argv[1], "nft", *a], check=True)
	s = socket.socket(socket.AF_INET6)
	s.connect(("fd77::2", 5201))
	s.sendall(b"x" * 1000)
	time.sleep(0.2)
	nft("add table inet sprto { chain in { type filter hook input priority 0; tcp dport 5201 drop; }; }")
	s.sendall(b"y" * 1000)
	time.sleep(0.8)                           # an RTO or two
	unspec = ctypes.create_string_buffer(28)  # a sockaddr_in6 of family AF_UNSPEC
	if libc.connect(s.fileno(), unspec, 28):
	    raise SystemExit("disconnect: errno %d" % ctypes.get_errno())
	nft("delete table inet sprto")
	s.connect(("fd77::2", 5201))
	s.close()
	PY
	assert_ge "$(sp_num '.modules.rehash.rto')" 1 "RTOs of the first connection"
	assert_eq "$(sp_num '.modules.pmtu.learned_from_connections')" 0 \
		"proofs from a connection that delivered 1000 bytes and one that delivered none"
}
t_overhead_reconnect_after_rto() { reconnect_after_rto; }
t_overhead_reconnect_after_rto_no_clamp() { SP_PROBE_OFF=sockops_maxseg reconnect_after_rto; }

# A loopback destination teaches pmtu nothing (nothing is searched there):
# its connections wait for no proof, so ask for no per-ACK callback.
t_overhead_loopback_nothing() {
	local rtt a
	netns_pair; make_cgroup
	# The server in the cgroup too: its accepted connections count.
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" server 5201 >/dev/null &
	BG_PIDS+=($!); disown
	sleep 0.2
	sp_start --cgroup "$CG" --modules rehash,pmtu
	sp_ctl set rehash.rounds=0 >/dev/null || fail "set rehash.rounds=0"
	for a in 127.0.0.1 ::1; do
		rtt=$(rtt_runs)
		in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client "$a" 5201 20000 3 >/dev/null ||
			fail "connections to $a: exit $?"
		assert_eq $(( $(rtt_runs) - rtt )) 0 \
			"RTT callbacks of 3 connections to $a"
	done
	assert_eq "$(sp_num '.modules.pmtu.connects')" 6 "connections pmtu saw open"
	assert_eq "$(sp_num '.modules.pmtu.accepts')" 6 "connections pmtu saw accepted"
}

# sk_storage MAP...: from the cgroup and namespace A, one connection to
# B's port 5201 (at DST, default 10.77.0.2) that sends 4000 bytes and, with
# LOSS=1, 1000 more while B drops them for 0.8 s (a retransmission and an
# RTO). Prints for each map (a pin, or id:N), after the clean part and
# again after the loss, 1 if the connection has storage in it (a map
# lookup keyed by the socket's fd), else 0.
sk_storage() {
	in_cgroup python3 - "$NS_A" "$NS_B" "${LOSS:-0}" "${DST:-10.77.0.2}" "$@" <<-'PY' || fail "sk_storage: exit $?"
	import ctypes, errno, fcntl, socket, struct, subprocess, sys, time
	libc = ctypes.CDLL(None, use_errno=True)
	NR_BPF, MAP_LOOKUP, OBJ_GET, SIOCOUTQ = 321, 1, 7, 0x5411
	def bpf(cmd, attr):
	    buf = ctypes.create_string_buffer(attr.ljust(128, b"\0"), 128)
	    r = libc.syscall(ctypes.c_long(NR_BPF), ctypes.c_long(cmd), buf, ctypes.c_long(128))
	    return r if r >= 0 else -ctypes.get_errno()
	def obj_get(path):
	    if path.startswith("id:"):	# a map by id (BPF_MAP_GET_FD_BY_ID)
	        fd = bpf(14, struct.pack("<III", int(path[3:]), 0, 0))
	        if fd < 0:
	            sys.exit(f"{path}: errno {-fd}")
	        return fd
	    p = ctypes.create_string_buffer(path.encode())
	    fd = bpf(OBJ_GET, struct.pack("<QII", ctypes.addressof(p), 0, 0))
	    if fd < 0:
	        sys.exit(f"{path}: errno {-fd}")
	    return fd
	def has(mfd, sfd):
	    key, val = ctypes.c_int(sfd), ctypes.create_string_buffer(4096)
	    r = bpf(MAP_LOOKUP, struct.pack("<IIQQQ", mfd, 0, ctypes.addressof(key), ctypes.addressof(val), 0))
	    if r not in (0, -errno.ENOENT):
	        sys.exit(f"lookup: errno {-r}")
	    return "1" if r == 0 else "0"
	def drained(s, secs):
	    end = time.time() + secs
	    while time.time() < end:
	        if struct.unpack("i", fcntl.ioctl(s, SIOCOUTQ, b"\0" * 4))[0] == 0:
	            return
	        time.sleep(0.01)
	    sys.exit("data not acked")
	# The pins first: `ip netns exec` would mount a /sys without them.
	ns_a, ns_b, loss, dst = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
	maps = [obj_get(p) for p in sys.argv[5:]]
	with open(f"/run/netns/{ns_a}") as f:
	    if libc.setns(f.fileno(), 0x40000000):
	        sys.exit(f"setns {ns_a}: errno {ctypes.get_errno()}")
	s = socket.create_connection((dst, 5201))
	s.sendall(b"x" * 4000)
	drained(s, 5)
	print(" ".join(has(m, s.fileno()) for m in maps))
	if loss:
	    nft = ["ip", "netns", "exec", ns_b, "nft"]
	    subprocess.run(nft + ["add table inet splazy; add chain inet splazy in { type filter hook input priority 0; };"
	                          " add rule inet splazy in tcp dport 5201 drop"], check=True)
	    s.sendall(b"y" * 1000)
	    time.sleep(0.8)
	    subprocess.run(nft + ["delete table inet splazy"], check=True)
	    drained(s, 10)
	    print(" ".join(has(m, s.fileno()) for m in maps))
	s.close()
	PY
}

# A connection that never retransmits gets no per-socket storage from
# rehash (rounds trigger and path memory off, the defaults) nor from pmtu
# (a learned destination); its first retransmission or RTO makes both.
# Storage is most of what the modules cost a short connection
# (docs/bench/overhead.md). With the rounds trigger on, rehash's state is
# made at establishment again. pmtu's fexit programs, where they load,
# know the cgroup's connections by that storage and so get it made for
# every one (t_kernel_pmtu_learns_* rely on it): they are probed off here,
# so that the lazy path is what every kernel of the matrix tests.
t_overhead_lazy_state() {
	local got
	netns_pair; make_cgroup
	tcp_server 5201
	SP_PROBE_OFF=fentry_sk_storage sp_start --cgroup "$CG" --modules rehash,pmtu
	assert_eq "$(sp_json '[.programs[] | select(.name == "sp_pmtu_sync")] | length')" 0 \
		"pmtu's fexit programs loaded with fentry_sk_storage probed off"
	bulk 8
	assert_ge "$(sp_num '.modules.pmtu.learned_from_connections')" 1 "pmtu learned the destination"
	got=$(LOSS=1 sk_storage "$PIN/rehash_sk" "$PIN/pmtu_sk")
	echo "storage (rehash pmtu), clean then after a loss: $(echo $got)"
	assert_eq "$(echo "$got" | sed -n 1p)" "0 0" "storage of a clean connection (rehash, pmtu)"
	assert_eq "$(echo "$got" | sed -n 2p)" "1 1" "storage after a retransmission and an RTO (rehash, pmtu)"
	assert_ge "$(sp_num '.modules.rehash.rto')" 1 "rehash counted the RTO"
	sp_ctl set rehash.rounds=4 >/dev/null || fail "set rehash.rounds=4"
	assert_eq "$(sk_storage "$PIN/rehash_sk")" 1 "rehash storage of a clean connection, rounds trigger on"
}

# Connections to a destination nothing has proved (pmtu runs in the host's
# namespace and cannot probe B's) leave the proof to the first of each
# second (SP_PM_PROVER_T): only it waits (pmtu's storage, the RTT_CB word
# sp_rttcb). One of the others that delivers learn_kb proves the path at
# its close where another module asked for the state callback (pmtu asks
# none: t_overhead_state_cb_asked), here tcpstats with closes on; one that
# takes an RTO gets its storage then and waits for its own proof. The
# 1 MiB connection starts right after a short one (one shell, no status
# read between); an emulated guest under load may still span two windows.
t_overhead_proof_left() {
	local left got rttcb t0 ms
	netns_pair; make_cgroup
	tcp_server 5201
	sp_start --cgroup "$CG" --modules pmtu,tcpstats
	sp_ctl set tcpstats.closes=1 >/dev/null || fail "set tcpstats.closes=1"
	t0=$(date +%s%N)
	in_cgroup ip netns exec "$NS_A" sh -c '"$1" client 10.77.0.2 5201 4000 1 >/dev/null &&
		"$1" client 10.77.0.2 5201 4000 4 >/dev/null &&
		TCPTOOL_PACING=$((256 << 20)) "$1" client 10.77.0.2 5201 $((1 << 20)) 1 120 >/dev/null' \
		sh "$TCPTOOL" || fail "connections: exit $?"
	ms=$((($(date +%s%N) - t0) / 1000000))
	left=$(sp_num '.modules.pmtu.proofs_left_to_another')
	# One prover a window (SP_PM_PROVER_T: 953 x 2^20 ns, 998 ms): 5 left
	# within one. The search the first one asked ends meanwhile; its result
	# is written in place, so the claim stays (before sp_pmtu_save, the
	# loader wrote the whole entry back, and the 6.12 guest saw 4 left). A
	# guest slow enough to take longer than a window (TCG under load) has
	# a prover in each window it spans.
	echo "6 connections in $ms ms: $left left their proof"
	assert_ge "$left" $((5 - ms / 998)) "of 6 connections in $ms ms, those that left their proof"
	assert_le "$left" 5 "of 6 connections in $ms ms, those that left their proof"
	for _ in $(seq 20); do	# the close (tcp_done) can follow the client's exit
		[ "$(sp_num '.modules.pmtu.learned_from_connections')" -ge 1 ] && break
		sleep 0.1
	done
	assert_eq "$(sp_num '.modules.pmtu.learned_from_connections')" 1 \
		"proofs: the 1 MiB connection's at its close (the short ones prove nothing)"
	assert_ge "$(sp_num '[.modules.pmtu.destinations[] | select(.dst == "10.77.0.2") | .low_mtu] | max // 0')" 1400 \
		"low of 10.77.0.2 after the close proof"
	# Proved: the next connection has nothing to learn and leaves nothing.
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client 10.77.0.2 5201 4000 1 >/dev/null || fail "short connection: exit $?"
	assert_eq "$(sp_num '.modules.pmtu.proofs_left_to_another')" "$left" "proofs left by a connection to a proved destination"
	# IPv6, not proved: storage (where no fexit program needs it for every
	# connection, lazy_state) and the RTT_CB word of a connection, clean
	# then after an RTO; whether it waited is read from the counter, so
	# that a guest slow enough to start it after the window still passes.
	rttcb=$(bpftool prog show -j | jq --argjson m "$(bpftool map show pinned "$PIN/pmtu_sk" -j | jq .id)" \
		'[.[] | select((.map_ids // []) | index($m)) | .map_ids[]] | unique | .[]' |
		while read -r id; do bpftool map show id "$id" -j | jq -r 'select(.name == "sp_rttcb") | .id'; done | head -1)
	[ -n "$rttcb" ] || fail "no sp_rttcb map beside $PIN/pmtu_sk"
	in_cgroup ip netns exec "$NS_A" "$TCPTOOL" client fd77::2 5201 4000 1 >/dev/null || fail "IPv6 connection: exit $?"
	left=$(sp_num '.modules.pmtu.proofs_left_to_another')
	got=$(LOSS=1 DST=fd77::2 sk_storage "$PIN/pmtu_sk" "id:$rttcb")
	echo "IPv6 connection's storage (pmtu_sk sp_rttcb), clean then after an RTO: $(echo $got)"
	if [ "$(sp_num '.modules.pmtu.proofs_left_to_another')" = "$left" ]; then
		assert_eq "$(echo "$got" | sed -n 1p | cut -d' ' -f2)" 1 "RTT_CB word of a connection that waits"
	elif [ "$(sp_json '[.programs[] | select(.name == "sp_pmtu_sync")] | length')" = 0 ]; then
		assert_eq "$(echo $got)" "0 0 1 1" "storage of a connection that left its proof, clean then after an RTO"
	else
		assert_eq "$(echo $got | cut -d' ' -f2-4)" "0 1 1" "RTT_CB word of a connection that left its proof, clean then after an RTO"
	fi
}
