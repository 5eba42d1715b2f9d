# SPDX-License-Identifier: GPL-2.0
# rehash: Brakmo's scenarios on the ECMP testbed, side by side per run.
# Configurations (switched with `stackpilot set` between runs; run i of every
# configuration is done before run i+1 of any, so drift hits all alike):
#   kernel   prob=0: only the kernel's own RTO rehash
#   p20m0    prob=20 mode=0 (the patch's default)
#   p20m1    prob=20 mode=1
#   rounds   prob=0, rounds trigger: rounds=RH_ROUNDS, delay_pct=150
# Per run: aggregate goodput as a fraction of capacity, and fairness =
# fastest / slowest flow. Capacity = paths x the tbf rate (a path that drops
# half its packets counts 0). TCP/IP headers cost ~4%, so ~0.96 is full.
source "$ROOT/tests/lib_ecmp.sh"
RUNS=${RUNS:-10}
SECS=${SECS:-8}
RATE_MBIT=${RATE_MBIT:-100}
RATE=${RATE_MBIT}mbit
RH_ROUNDS=${RH_ROUNDS:-8}
CONFIGS="kernel p20m0 p20m1 rounds"

set_config() {
	case $1 in
	kernel) "$SP" set --pin-path "$PIN" rehash.prob=0 rehash.mode=0 rehash.rounds=0 ;;
	p20m0) "$SP" set --pin-path "$PIN" rehash.prob=20 rehash.mode=0 rehash.rounds=0 ;;
	p20m1) "$SP" set --pin-path "$PIN" rehash.prob=20 rehash.mode=1 rehash.rounds=0 ;;
	rounds) "$SP" set --pin-path "$PIN" rehash.prob=0 rehash.mode=1 rehash.rounds=$RH_ROUNDS ;;
	esac >/dev/null || fail "set $1"
}

# One iperf3 run with N flows from the cgroup: prints "goodput_bps fairness".
run_flows() {
	in_cgroup ip netns exec "$NS_S" iperf3 -6 -c fd02::2 -p 5201 -t "$SECS" -P "$1" -J |
		jq -r '[.end.streams[].receiver.bits_per_second] as $b |
			"\($b | add) \(($b | max) / ([($b | min), 1] | max))"'
}

scenario() { # scenario NAME PATHS FLOWS [lossy]
	local name=$1 paths=$2 flows=$3 lossy=${4:-} cfg r cap=$(($2 * RATE_MBIT * 1000000))
	cleanup_topo
	ecmp_topo "$paths" "$RATE"
	ip netns exec "$NS_D" iperf3 -s -D -p 5201 >/dev/null || fail iperf3
	sleep 0.2
	if [ -n "$lossy" ]; then	# path 1 drops half of what R1 sends on it
		printf 'table inet sp {\n chain c_fwd {\n type filter hook forward priority 0;\n oifname "p1" numgen random mod 2 == 0 drop\n }\n}\n' |
			ip netns exec "$NS_R1" nft -f - || fail "nft lossy path"
		cap=$(((paths - 1) * RATE_MBIT * 1000000))
	fi
	for r in $(seq "$RUNS"); do
		for cfg in $CONFIGS; do
			set_config "$cfg"
			echo "$name $cfg $cap $(run_flows "$flows")" >>"$TMP/rh.raw"
		done
	done
}

cleanup_topo() {
	local p
	for p in "${NETNS[@]}"; do ip netns pids "$p" | xargs -r kill -KILL; ip netns del "$p"; done 2>/dev/null
	NETNS=()
}

make_cgroup
sp_start --cgroup "$CG" --modules rehash
: >"$TMP/rh.raw"
scenario "2 paths, 2 flows" 2 2
scenario "2 paths, 7 flows" 2 7
scenario "3 paths, 6 flows" 3 6
scenario "3 paths, 16 flows" 3 16
scenario "2 paths (one drops 50%), 7 flows" 2 7 lossy
cp "$TMP/rh.raw" "$ROOT/results/rehash-raw-$ID.txt" 2>/dev/null

echo "## rehash: goodput and fairness on ECMP (IPv6 flow label hashing)"
echo
echo "Paths of $RATE (tbf, 5 ms queue). $RUNS runs of $SECS s per cell, fresh connections each run."
echo "goodput = aggregate / (paths x rate; the 50%-loss path counts 0); ~0.96 is full after headers."
echo "fairness = fastest / slowest flow. mean (worst) over runs."
echo
echo "| scenario | kernel (prob=0) | prob=20 mode=0 | prob=20 mode=1 | rounds=$RH_ROUNDS (prob=0) |"
echo "|---|---|---|---|---|"
awk '
	{ n = split($0, f, " "); cfg = f[n - 3]; cap = f[n - 2]; g = f[n - 1] / cap; fair = f[n]
	  name = $0; sub(" " cfg " .*", "", name)
	  k = name SUBSEP cfg; cnt[k]++; gs[k] += g; fs[k] += fair
	  if (!(k in gw) || g < gw[k]) gw[k] = g
	  if (!(k in fw) || fair > fw[k]) fw[k] = fair
	  if (!(name in seen)) { seen[name] = 1; order[++no] = name } }
	END {
	  split("kernel p20m0 p20m1 rounds", cf, " ")
	  for (i = 1; i <= no; i++) {
		line = "| " order[i] " goodput |"; line2 = "| " order[i] " fairness |"
		for (j = 1; j <= 4; j++) { k = order[i] SUBSEP cf[j]
			line = line sprintf(" %.3f (%.3f) |", gs[k] / cnt[k], gw[k])
			line2 = line2 sprintf(" %.2f (%.2f) |", fs[k] / cnt[k], fw[k]) }
		print line; print line2 } }' "$TMP/rh.raw"
echo
echo "rehash counters over the whole benchmark: $(sp_json '.modules.rehash | del(.connections) | tostring')"
