# SPDX-License-Identifier: GPL-2.0
# Page: docs/bench/scrape.md (tests/bench/run.sh writes what this prints there)
# Scrape load on run --metrics-listen (issue 13). Each round starts a run of
# every module (veth pair in namespace A) and scrapes it: N scrapes in a row
# over one kept-alive connection (what Prometheus does), N with a new
# connection each, then PAR at once (curl --parallel); scrapes/s of each, the
# run's memory (VmRSS, VmHWM) before and after, and how late the event loop
# got (stackpilot_loop_delay_max_seconds; the loop's tick is 100 ms).
# SP_OTHER=path/to/stackpilot (e.g. a build of an older commit) adds a run
# of that binary to every round, interleaved, for a side-by-side comparison.
ROUNDS=${ROUNDS:-3}
N=${N:-1000}
PAR=${PAR:-50}

netns_pair
make_cgroup
mx() { ip netns exec "$NS_A" "$@"; }
mem() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$SP_PID/status"; }
late() { # the loop's largest lateness since start, ms, as last published (each second)
	sleep 1.1
	mx curl -sf --max-time 5 "$url" | awk '$1 == "stackpilot_loop_delay_max_seconds" { printf "%.1f", $2 * 1000 }'
}
urls() { for _ in $(seq "$1"); do echo "$url"; done; }
rate() { # rate COUNT CMD...: COUNT / seconds CMD took (fails on curl errors)
	local n=$1 t0 t1
	shift
	t0=$(date +%s.%N)
	"$@" >/dev/null || fail "$* failed"
	t1=$(date +%s.%N)
	echo "$n / ($t1 - $t0)" | bc
}

one() { # one LABEL BINARY: a table row
	local port=$((20000 + RANDOM % 20000)) rss0 hwm0 late0 ka nc par
	url=http://127.0.0.1:$port/metrics
	: >"$TMP/sp.err"
	sp_spawn nsenter --net="/run/netns/$NS_A" "$2" run --pin-path "$PIN" --interval 0 --cgroup "$CG" \
		--modules all --iface "v${ID}a" --metrics-listen "$port"
	mx curl -sf --max-time 5 $(urls 20) >/dev/null || fail "warm-up"
	bytes=$(mx curl -sf --max-time 5 "$url" | wc -c)
	rss0=$(mem VmRSS) hwm0=$(mem VmHWM) late0=$(late)
	ka=$(rate "$N" mx curl -sf --max-time 120 $(urls "$N")) || fail "$1: $N scrapes"
	nc=$(rate "$N" mx curl -sf --max-time 120 -H 'Connection: close' $(urls "$N")) ||
		fail "$1: $N scrapes, new connections"
	par=$(rate "$PAR" mx curl -sf --no-progress-meter --max-time 60 --parallel --parallel-immediate \
		--parallel-max "$PAR" $(urls "$PAR")) || fail "$1: $PAR scrapes at once"
	echo "| $r | $1 | $ka | $nc | $par | $rss0 -> $(mem VmRSS) | $hwm0 -> $(mem VmHWM) | $late0 -> $(late) |" \
		>>"$TMP/rows"
	sp_stop
}

for r in $(seq "$ROUNDS"); do
	one "this build" "$SP"
	[ -z "${SP_OTHER:-}" ] || one "SP_OTHER" "$SP_OTHER"
done
echo "## Scrape load"
echo
echo "\`run --metrics-listen\` with every module attached, scraped from its namespace by curl (exposition $bytes bytes): $N scrapes in a row over one connection (keep-alive), $N with a new connection each, $PAR at once; a fresh run per row${SP_OTHER:+, SP_OTHER = $SP_OTHER interleaved}."
echo
echo "| round | binary | $N kept-alive: scrapes/s | $N new connections: scrapes/s | $PAR at once: scrapes/s | VmRSS kB before -> after | VmHWM kB before -> after | loop late by, max ms: before -> after |"
echo "|---|---|---|---|---|---|---|---|"
cat "$TMP/rows"
