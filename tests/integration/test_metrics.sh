# SPDX-License-Identifier: GPL-2.0
# Prometheus metrics (issue 13): status --prometheus, checked by promtool;
# run --metrics-textfile, served by node_exporter; run --metrics-listen,
# scraped by a Prometheus server; docs/metrics.md's list.
# Each t_* runs in its own bash with tests/lib.sh sourced.

# stackpilot run with every cgroup module and fragguard, inside namespace A
# (its veth) but with the host's /sys: `ip netns exec` would hide the cgroup
# v2 mount. Pins stay on the host's bpffs, so plain sp_ctl reaches them.
mx_start() { # mx_start CGROUP [run options]
	local cg=$1; shift
	mk_netns "$NS_A"
	veth "$NS_A" "v${ID}a" "$NS_A" "v${ID}b"
	ip -n "$NS_A" addr add 10.77.0.1/24 dev "v${ID}a"
	ip -n "$NS_A" addr add 10.77.0.2/24 dev "v${ID}b"
	: >"$TMP/sp.err"
	sp_spawn nsenter --net="/run/netns/$NS_A" "$SP" run --pin-path "$PIN" --interval 0 --cgroup "$cg" \
		--modules all --iface "v${ID}a" "$@"
}

# A metric's value (the first series matching the grep pattern) in file $1.
prom_val() { grep -E "^$2[ {]" "$1" | head -1 | awk '{ print $NF }'; }

# promtool's linter on file $1: nothing to say, and there is something to check.
promtool_clean() {
	[ -s "$1" ] || fail "$1: empty exposition"
	promtool check metrics <"$1" >"$TMP/lint" 2>&1 || fail "promtool check metrics: $(cat "$TMP/lint")"
	[ ! -s "$TMP/lint" ] || fail "promtool check metrics: $(cat "$TMP/lint")"
}

# The exposition of a run of all cgroup modules and fragguard passes promtool;
# counters follow traffic; a cgroup path with " and \ is escaped in labels.
t_metrics_prometheus() {
	need_tool promtool prometheus
	local odd='q"b\c' before after
	make_cgroup
	mkdir "$CG/$odd" || fail "mkdir: exit $?"
	on_exit rmdir "'$CG/$odd'"
	mx_start "$CG/$odd" --bpf-stats
	sp_ctl status --prometheus >"$TMP/p1" || fail "status --prometheus exit $?"
	promtool_clean "$TMP/p1"
	grep -q '^# TYPE stackpilot_bpf_program_runs_total counter$' "$TMP/p1" || fail "no program runs: $(tail -5 "$TMP/p1")"
	grep -q '^# HELP stackpilot_tcpstats_active_opens_total .' "$TMP/p1" || fail "no HELP: $(tail -5 "$TMP/p1")"
	grep -qF "cgroup=\"$CG/q\\\"b\\\\c\"" "$TMP/p1" ||
		fail "cgroup label not escaped: $(grep -m1 cgroup= "$TMP/p1")"
	before=$(prom_val "$TMP/p1" stackpilot_tcpstats_active_opens_total)
	ip netns exec "$NS_A" "$TCPTOOL" server 5201 >/dev/null &
	BG_PIDS+=($!)
	sleep 0.2
	in_cgroup_at "$CG/$odd" \
		nsenter --net="/run/netns/$NS_A" "$TCPTOOL" client 10.77.0.2 5201 10000 3 >/dev/null ||
		fail "client in cgroup"
	sp_ctl status --prometheus >"$TMP/p2" || fail "status --prometheus exit $?"
	promtool_clean "$TMP/p2"
	after=$(prom_val "$TMP/p2" stackpilot_tcpstats_active_opens_total)
	assert_eq "$((after - before))" 3 "active_opens_total increase"
	assert_ge "$(grep '^stackpilot_bpf_program_runs_total{module="chain",program="sp_sockops"}' "$TMP/p2" |
		awk '{ print $NF }')" 3 "sp_sockops runs"
	# ns become seconds: a fraction, never a count of ns.
	grep -E '^stackpilot_bpf_program_run_seconds_total\{module="chain",program="sp_sockops"\} [0-9]+\.[0-9]{9}$' \
		"$TMP/p2" >/dev/null || fail "run_seconds: $(grep run_seconds "$TMP/p2")"
}

# rehash's tables on the ECMP testbed with prob=100: JSON has the most
# rehashed connections and, per destination, their sums; Prometheus has the
# destinations (same numbers), not the connections (ports would make new
# series for every connection) nor the windows.
t_metrics_rehash_tables() {
	need_tool promtool prometheus
	source "$ROOT/tests/lib_ecmp.sh"
	local q='.modules.rehash' sum dst prom
	ecmp_topo 2 100mbit
	ip netns exec "$NS_D" iperf3 -s -D -p 5201 >/dev/null || fail "iperf3: exit $?"
	make_cgroup
	sp_start --cgroup "$CG" --modules rehash
	"$SP" set --pin-path "$PIN" rehash.prob=100 rehash.mode=1 >/dev/null || fail "set rehash.prob=100 rehash.mode=1: exit $?"
	in_cgroup ip netns exec "$NS_S" iperf3 -6 -c fd02::2 -p 5201 -t 3 -P 2 >/dev/null || fail "iperf3: exit $?"
	sp_ctl status --json >"$TMP/s.json" || fail "status --json: exit $?"
	sp_ctl status --prometheus >"$TMP/p" || fail "status --prometheus: exit $?"
	promtool_clean "$TMP/p"
	sum=$(jq "[$q.connections[] | select(.dst == \"fd02::2\") | .rehashes] | add // 0" "$TMP/s.json")
	assert_ge "$sum" 2 "rehashes of the connections to fd02::2"
	dst=$(jq -c "$q.destinations[] | select(.dst == \"fd02::2\")" "$TMP/s.json")
	assert_eq "$(echo "$dst" | jq .rehashes)" "$sum" "destination's rehashes vs its connections'"
	assert_eq "$(echo "$dst" | jq .connections)" \
		"$(jq "[$q.connections[] | select(.dst == \"fd02::2\")] | length" "$TMP/s.json")" \
		"destination's connections"
	prom=$(grep -F 'stackpilot_rehash_destination_rehashes{' "$TMP/p" | grep -F 'destination="fd02::2"' |
		awk '{ print $NF }')
	assert_eq "$prom" "$sum" "stackpilot_rehash_destination_rehashes of fd02::2"
	assert_eq "$(prom_val "$TMP/p" stackpilot_rehash_now_total)" "$(jq "$q.rehash_now" "$TMP/s.json")" \
		"rehash_now in Prometheus and JSON"
	assert_ge "$(prom_val "$TMP/p" stackpilot_rehash_delivered_bytes_total)" 1000000 "delivered bytes"
	! grep -qE 'sport=|stackpilot_rehash_(connections|windows)_|per_mb' "$TMP/p" || fail "connections or windows exposed"
}

# docs/metrics.md, "Every metric", lists every exposed metric with its type,
# and no other.
t_metrics_docs_list() {
	make_cgroup
	mx_start "$CG"
	sp_ctl status --prometheus >"$TMP/p" || fail "status --prometheus exit $?"
	awk '$1 == "#" && $2 == "TYPE" { print $3, $4 }' "$TMP/p" | sort >"$TMP/exposed"
	# Rows of the section's table: | `name` | type | labels | meaning |
	awk '/^## Every metric/ { on = 1; next } /^## / { on = 0 } on' "$ROOT/docs/metrics.md" |
		sed -n 's/^| `\(stackpilot_[a-z0-9_]*\)` | \([a-z]*\) |.*/\1 \2/p' | sort >"$TMP/listed"
	[ -s "$TMP/listed" ] || fail "docs/metrics.md has no Every metric list"
	diff "$TMP/listed" "$TMP/exposed" >"$TMP/d" ||
		fail "docs/metrics.md vs exposition (< listed only, > exposed only): $(cat "$TMP/d")"
}

# dist/grafana/stackpilot.json: a dashboard whose every panel queries
# something, and every metric it names is in the exposition of a run of all
# modules (t_metrics_prometheus_server checks that its queries parse).
t_metrics_grafana_dashboard() {
	local dash=$ROOT/dist/grafana/stackpilot.json m missing=
	jq -e '(.panels | length) > 0 and ([.panels[].id] | length == (unique | length)) and
		all(.panels[] | select(.type != "row"); (.targets | length) > 0 and all(.targets[]; .expr | length > 0))' \
		"$dash" >/dev/null || fail "$dash: not a dashboard with a query in every panel"
	make_cgroup
	mx_start "$CG"
	sp_ctl status --prometheus >"$TMP/p" || fail "status --prometheus exit $?"
	jq -r '.. | .expr? // .definition? // empty' "$dash" | grep -o 'stackpilot_[a-z0-9_]*' | sort -u >"$TMP/named"
	assert_ge "$(wc -l <"$TMP/named")" 20 "metrics the dashboard names"
	for m in $(cat "$TMP/named"); do
		grep -q "^# TYPE $m " "$TMP/p" || missing="$missing $m"
	done
	[ -z "$missing" ] || fail "the dashboard names metrics that are not exposed:$missing"
	# A fleet's dashboard: runs chosen by instance, then by cgroup, and the
	# cgroup modules' queries follow the cgroup variable.
	jq -e '[.templating.list[].name] | index("instance") and index("cgroup")' "$dash" >/dev/null ||
		fail "no instance and cgroup variables: $(jq -c '[.templating.list[].name]' "$dash")"
	missing=$(jq -r '.panels[].targets[]?.expr' "$dash" | grep -E 'stackpilot_(tcpstats|rehash|pmtu)_' |
		grep -v 'cgroup=~"\$cgroup"')
	[ -z "$missing" ] || fail "cgroup module queries without the cgroup variable: $missing"
}

# --metrics-textfile: the file appears, complete, is rewritten every
# interval through a rename, and node_exporter's textfile collector serves it.
t_metrics_textfile() {
	need_tool promtool prometheus
	local dir=$TMP/textfile ino1 ino2 port held
	mkdir "$dir" && chmod 755 "$TMP" "$dir"
	make_cgroup
	mx_start "$CG" --interval 1 --metrics-textfile "$dir"
	for _ in $(seq 30); do [ -e "$dir/stackpilot.prom" ] && break; sleep 0.1; done
	[ -e "$dir/stackpilot.prom" ] || fail "no $dir/stackpilot.prom"
	cp "$dir/stackpilot.prom" "$TMP/t1"
	promtool_clean "$TMP/t1"
	# Complete: the last metric of the exposition is there.
	grep -q '^# TYPE stackpilot_bpf_program_run_seconds_total counter' "$TMP/t1" || fail "truncated: $(tail -5 "$TMP/t1")"
	# Held open meanwhile: ext4 would give a freed inode number to the next
	# file, and after two rewrites the path could have this one's again.
	exec {held}<"$dir/stackpilot.prom"
	ino1=$(stat -c %i "$dir/stackpilot.prom")
	sleep 2.2
	ino2=$(stat -c %i "$dir/stackpilot.prom")
	exec {held}<&-
	[ "$ino1" != "$ino2" ] || fail "not rewritten (same inode after 2 s)"
	[ "$(ls -A "$dir")" = stackpilot.prom ] || fail "other files in $dir: $(ls -A "$dir")"
	if command -v prometheus-node-exporter >/dev/null; then
		port=$((20000 + RANDOM % 20000))
		ip netns exec "$NS_A" prometheus-node-exporter --web.listen-address="127.0.0.1:$port" \
			--collector.disable-defaults --collector.textfile \
			--collector.textfile.directory="$dir" >"$TMP/ne.log" 2>&1 &
		BG_PIDS+=($!); disown
		for _ in $(seq 50); do
			ip netns exec "$NS_A" curl -sf "http://127.0.0.1:$port/metrics" >"$TMP/ne" && break
			sleep 0.1
		done
		grep -q '^stackpilot_tcpstats_active_opens_total{' "$TMP/ne" ||
			fail "node_exporter does not serve the textfile: $(tail -3 "$TMP/ne.log")"
		grep -q '^node_textfile_scrape_error 0' "$TMP/ne" || fail "node_exporter: textfile scrape error: $(tail -5 "$TMP/ne")"
	fi
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	[ ! -e "$dir/stackpilot.prom" ] || fail "stackpilot.prom left after the run stopped"
	# Everything else was checked: without node_exporter, its part is a skip.
	need_tool prometheus-node-exporter prometheus-node-exporter
}

# --metrics-textfile: a folder another user owns or can write is refused
# with one line (they could put metrics in our name, or have root replace a
# file of theirs); the folder is held from the start, so moved away and
# replaced by a symlink, the file is still written in it, never through the
# symlink; after kill -9, the next run in the namespace removes the file,
# whose counters would otherwise look current for good.
t_metrics_textfile_folder_checked() {
	local dir=$TMP/tf out rc ino held
	mkdir -m 755 "$dir" "$TMP/other"
	make_cgroup
	# A namespace of its own: the state file of the killed run is for our next run only.
	mk_netns "$NS_A"
	SP_NS=$NS_A
	refused() {	# EXPECTED-TEXT
		out=$(timeout 10 "$SP" run --pin-path "$PIN" --cgroup "$CG" --modules tcpstats \
			--metrics-textfile "$dir" 2>&1); rc=$?
		assert_eq "$rc" 1 "exit of a run with that folder: $out"
		[[ $out == "stackpilot: --metrics-textfile $dir: $1"*"refusing it" ]] || fail "run said: $out"
	}
	chown nobody "$dir"; refused "owned by uid 65534, mode 0755"
	chown root "$dir"; chmod 777 "$dir"; refused "owned by uid 0, mode 0777"
	chmod 755 "$dir"
	sp_start --cgroup "sp-test-$ID" --modules tcpstats --interval 1 --metrics-textfile "$dir"
	for _ in $(seq 30); do [ -e "$dir/stackpilot.prom" ] && break; sleep 0.1; done
	[ -e "$dir/stackpilot.prom" ] || fail "no $dir/stackpilot.prom"
	mv "$dir" "$TMP/tf.moved" && ln -s "$TMP/other" "$dir" || fail "swap: exit $?"
	exec {held}<"$TMP/tf.moved/stackpilot.prom"	# its inode number not reused meanwhile
	ino=$(stat -c %i "$TMP/tf.moved/stackpilot.prom")
	sleep 2.2
	[ "$(stat -c %i "$TMP/tf.moved/stackpilot.prom")" != "$ino" ] || fail "not rewritten in the folder it opened"
	exec {held}<&-
	assert_eq "$(ls -A "$TMP/other")" "" "files written through the symlink"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	[ ! -e "$TMP/tf.moved/stackpilot.prom" ] || fail "stackpilot.prom left after the run stopped"
	rm "$dir" && mv "$TMP/tf.moved" "$dir" || fail "swap back: exit $?"
	sp_start --cgroup "sp-test-$ID" --modules tcpstats --interval 1 --metrics-textfile "$dir"
	for _ in $(seq 30); do [ -e "$dir/stackpilot.prom" ] && break; sleep 0.1; done
	sp_stop KILL
	[ -e "$dir/stackpilot.prom" ] || fail "no stackpilot.prom from the killed run"
	sp_start --cgroup "sp-test-$ID" --modules tcpstats
	grep -q "undid 'promfile $dir' left by a killed run" "$TMP/sp.err" || fail "no log line: $(cat "$TMP/sp.err")"
	[ ! -e "$dir/stackpilot.prom" ] || fail "a killed run's stackpilot.prom after the next start"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

t_metrics_usage_errors() {
	"$SP" run --pin-path "$PIN" --metrics-textfile relative/dir >/dev/null 2>"$TMP/e"
	assert_eq "$?" 2 "relative --metrics-textfile"
	grep -q "expected an existing folder" "$TMP/e" || fail "$(cat "$TMP/e")"
	"$SP" run --pin-path "$PIN" --metrics-textfile "/nonexistent-$ID" >/dev/null 2>&1
	assert_eq "$?" 2 "missing --metrics-textfile folder"
	"$SP" status --pin-path "$PIN" --prometheus --json >/dev/null 2>&1
	assert_eq "$?" 2 "--prometheus --json"
	"$SP" get --pin-path "$PIN" --prometheus >/dev/null 2>&1
	assert_eq "$?" 2 "get --prometheus"
	"$SP" run --pin-path "$PIN" --metrics-listen 127.0.0.1:0 >/dev/null 2>"$TMP/e"
	assert_eq "$?" 2 "--metrics-listen port 0"
	grep -q "expected PORT, ADDR:PORT" "$TMP/e" || fail "$(cat "$TMP/e")"
	"$SP" run --pin-path "$PIN" --metrics-listen nohost:9 >/dev/null 2>&1
	assert_eq "$?" 2 "--metrics-listen with a name, not an address"
	"$SP" status --pin-path "$PIN" --prometheus >"$TMP/o" 2>/dev/null
	assert_eq "$?" 1 "status --prometheus without a run"
	[ ! -s "$TMP/o" ] || fail "output without a run: $(cat "$TMP/o")"
	[ ! -e "$PIN" ] || fail "pins made"
}

# --metrics-listen: /metrics over HTTP from the event loop (libmicrohttpd),
# inside namespace A on 127.0.0.1; junk gets an error and does not block a
# scrape; the loop goes on (the textfile is still rewritten meanwhile).
t_metrics_listen() {
	need_tool promtool prometheus
	local port=$((20000 + RANDOM % 20000)) url code i
	url=http://127.0.0.1:$port
	make_cgroup
	# Under `make check` the loader is built with ASan, whose quarantine holds
	# freed memory back (256 MiB by default): RSS would measure the quarantine,
	# not us. Without it ASan still reuses freed memory; a plain build ignores this.
	export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0
	mx_start "$CG" --metrics-listen "$port"
	mx() { ip netns exec "$NS_A" "$@"; }
	mx curl -sf --max-time 5 "$url/metrics" >"$TMP/m" || fail "scrape: curl exit $?"
	promtool_clean "$TMP/m"
	grep -q '^stackpilot_bpf_program_runs_total{' "$TMP/m" || fail "no program runs in the scrape: $(tail -5 "$TMP/m")"
	code=$(mx curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url/nope")
	assert_eq "$code" 404 "GET /nope"
	code=$(mx curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST -d x "$url/metrics")
	assert_eq "$code" 405 "POST /metrics"
	code=$(mx curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "X-Junk: $(head -c 40000 /dev/zero | tr '\0' a)" "$url/metrics")
	[ "$code" -ge 400 ] || fail "oversized header: HTTP $code, expected >= 400"
	# A slowloris: half a request line, held open; scrapes still go through,
	# and the server drops it after 5 s of silence (the client would wait
	# 10 s; the seconds it waited go to $TMP/slow).
	mx bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; printf 'GET /met' >&3; t0=\$(date +%s%N)
		timeout 10 cat <&3 >/dev/null; echo \$(( (\$(date +%s%N) - t0) / 1000000 )) >'$TMP/slow'" &
	BG_PIDS+=($!); disown
	sleep 0.3
	for i in $(seq 20); do
		mx curl -sf --max-time 2 "$url/metrics" >/dev/null || fail "scrape $i with a partial request open"
	done
	# Load: 1000 scrapes in a row, then 50 at once; the run's memory stays.
	local rss0 rss1 t0 t1
	mx curl -sf --max-time 5 $(for i in $(seq 50); do echo "$url/metrics"; done) >/dev/null || fail "warm-up: exit $?"
	rss0=$(awk '/^VmRSS/ { print $2 }' "/proc/$SP_PID/status")
	t0=$(date +%s.%N)
	mx curl -sf --max-time 120 $(for i in $(seq 1000); do echo "$url/metrics"; done) >"$TMP/seq" || fail "1000 scrapes: exit $?"
	t1=$(date +%s.%N)
	assert_eq "$(grep -c '^# TYPE stackpilot_running ' "$TMP/seq")" 1000 "answers to 1000 scrapes"
	mx curl -sf --no-progress-meter --max-time 60 --parallel --parallel-immediate --parallel-max 50 \
		$(for i in $(seq 50); do echo "$url/metrics"; done) >"$TMP/par" || fail "50 concurrent scrapes: exit $?"
	assert_eq "$(grep -c '^# TYPE stackpilot_running ' "$TMP/par")" 50 "answers to 50 concurrent scrapes"
	rss1=$(awk '/^VmRSS/ { print $2 }' "/proc/$SP_PID/status")
	echo "1000 scrapes in $(echo "$t1 - $t0" | bc) s; RSS $rss0 kB before, $rss1 kB after" >&2
	[ "$rss1" -le $((rss0 + 2048)) ] || fail "RSS grew from $rss0 kB to $rss1 kB"
	# The loop measured its own lateness under that load (published each
	# second): above 0 (it did measure), below its 100 ms tick.
	for _ in $(seq 120); do [ -s "$TMP/slow" ] && break; sleep 0.1; done
	echo "a silent client dropped after $(cat "$TMP/slow" 2>/dev/null) ms" >&2
	assert_le "$(cat "$TMP/slow" 2>/dev/null)" 7000 "ms until the server dropped a silent client (timeout 5 s)"
	sleep 1.1
	mx curl -sf --max-time 5 "$url/metrics" >"$TMP/m2" || fail "scrape after the load: exit $?"
	local late=$(prom_val "$TMP/m2" stackpilot_loop_delay_max_seconds)
	echo "event loop late by at most $late s since start" >&2
	awk -v l="$late" 'BEGIN { exit !(l > 0 && l < 0.1) }' ||
		fail "loop delay under 1000 + 50 scrapes: $late s (the tick is 0.1 s)"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# --metrics-listen keeps answering whatever clients do: a burst of 33
# connections closed after 0.5 s (once stopped it for 60 s), then 200
# connections held open (opened again as soon as closed) and 40 slowloris
# connections trickling a request a byte every 2 s: a scrape every second
# for 30 s each answers within 1 s, and the server closed held connections
# (each has 5 s to send its request; beyond 32, the longest waiting goes).
t_metrics_listen_held_connections() {
	local port=$((20000 + RANDOM % 20000)) url i t0
	url=http://127.0.0.1:$port/metrics
	make_cgroup
	# 512 fds: room for 128 connections, fewer than the clients below.
	ulimit -n 512
	mx_start "$CG" --metrics-listen "$port"
	grep -q 'at most 128 connections at once' "$TMP/sp.err" || fail "$(grep metrics "$TMP/sp.err")"
	mx() { ip netns exec "$NS_A" "$@"; }
	mx curl -sf --max-time 5 "$url" >/dev/null || fail "first scrape: exit $?"
	for i in 1 2 3; do
		mx "$TCPTOOL" hold 127.0.0.1 "$port" 33 0.5 >/dev/null || fail "burst of 33: exit $?"
		mx curl -sf --max-time 1 "$url" >/dev/null || fail "scrape after burst $i of 33 connections"
	done
	mx "$TCPTOOL" hold 127.0.0.1 "$port" 200 33 >"$TMP/hold" &
	BG_PIDS+=($!)
	mx "$TCPTOOL" hold 127.0.0.1 "$port" 40 33 2 >"$TMP/trickle" &
	BG_PIDS+=($!)
	sleep 1
	for i in $(seq 30); do
		t0=$(date +%s.%N)
		mx curl -sf --max-time 1 "$url" >/dev/null ||
			fail "scrape $i of 30 with 200 connections held and 40 trickling: curl exit $?"
		sleep "$(echo "1 - ($(date +%s.%N) - $t0)" | bc | sed 's/^-.*/0/')"
	done
	wait "${BG_PIDS[@]}"
	echo "holders: $(cat "$TMP/hold"); tricklers: $(cat "$TMP/trickle")" >&2
	assert_ge "$(sed -n 's/.*closed_by_peer=\([0-9]*\).*/\1/p' "$TMP/hold")" 1 "held connections the server closed"
	assert_ge "$(sed -n 's/.*closed_by_peer=\([0-9]*\).*/\1/p' "$TMP/trickle")" 40 "slowloris connections the server closed"
	kill -0 "$SP_PID" || fail "the run died: $(sp_said)"
	sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
}

# The real thing: Debian's Prometheus server scrapes --metrics-listen inside
# namespace A every second; its HTTP API shows the counter grow by the
# connections made in the cgroup.
t_metrics_prometheus_server() {
	need_tool prometheus prometheus
	local port=$((20000 + RANDOM % 10000)) pport=$((30000 + RANDOM % 10000)) q v
	make_cgroup
	mx_start "$CG" --metrics-listen "$port"
	cat >"$TMP/prom.yml" <<-EOC
	global: { scrape_interval: 1s, scrape_timeout: 1s }
	scrape_configs:
	  - job_name: stackpilot
	    static_configs: [ { targets: ["127.0.0.1:$port"] } ]
	EOC
	ip netns exec "$NS_A" prometheus --config.file="$TMP/prom.yml" --storage.tsdb.path="$TMP/tsdb" \
		--web.listen-address="127.0.0.1:$pport" >"$TMP/prom.log" 2>&1 &
	BG_PIDS+=($!); disown
	q() { # the value of instant query $1, or nothing
		ip netns exec "$NS_A" curl -sf --max-time 2 "http://127.0.0.1:$pport/api/v1/query" \
			--data-urlencode "query=$1" | jq -r '.data.result[0].value[1] // empty'
	}
	for _ in $(seq 100); do
		[ -n "$(q stackpilot_tcpstats_active_opens_total)" ] && break
		sleep 0.2
	done
	assert_eq "$(q stackpilot_tcpstats_active_opens_total)" 0 "first scrape"
	ip netns exec "$NS_A" "$TCPTOOL" server 5201 >/dev/null &
	BG_PIDS+=($!); disown
	sleep 0.2
	in_cgroup nsenter --net="/run/netns/$NS_A" "$TCPTOOL" client 10.77.0.2 5201 10000 5 >/dev/null ||
		fail "client in cgroup"
	for _ in $(seq 50); do
		v=$(q stackpilot_tcpstats_active_opens_total)
		[ "$v" = 5 ] && break
		sleep 0.2
	done
	assert_eq "$v" 5 "active_opens_total in Prometheus after 5 connections"
	assert_eq "$(q 'up{job="stackpilot"}')" 1 "up"
	# Every query of the Grafana dashboard parses and runs, with its
	# variables as Grafana would fill them.
	local e st
	jq -r '.panels[].targets[]?.expr' "$ROOT/dist/grafana/stackpilot.json" |
		sed -e 's/\$__rate_interval/1m/g' -e 's/\$instance/.*/g' -e 's/\$cgroup/.*/g' >"$TMP/exprs"
	assert_ge "$(wc -l <"$TMP/exprs")" 20 "dashboard queries"
	while IFS= read -r e; do
		st=$(ip netns exec "$NS_A" curl -s --max-time 2 "http://127.0.0.1:$pport/api/v1/query" \
			--data-urlencode "query=$e" | jq -r '.status + " " + (.error // "")')
		[ "$st" = "success " ] || fail "dashboard query $e: $st"
	done <"$TMP/exprs"
}

# The man pages against the code: each module page, as `make man` renders
# it (tunables and counters spliced from the loader), names every key of the
# module's `status --json` object and every metric of the module in a live
# exposition of all modules; docs/stackpilot.rst names the metrics of no
# module; no page names a metric that is not exposed.
t_metrics_man_pages() {
	local p m mod page key missing= stale=
	make_cgroup
	mx_start "$CG"
	sp_ctl status --prometheus >"$TMP/p" || fail "status --prometheus exit $?"
	sp_ctl status --json >"$TMP/s.json" || fail "status --json exit $?"
	for p in "$ROOT"/docs/stackpilot*.rst; do
		"$ROOT/scripts/man-page.sh" "$p" "$SP" >"$TMP/$(basename "$p")" ||
			fail "scripts/man-page.sh $p: exit $?"
		rst2man --halt=warning "$TMP/$(basename "$p")" >/dev/null || fail "rst2man $(basename "$p")"
	done
	for m in $(awk '$1 == "#" && $2 == "TYPE" { print $3 }' "$TMP/p"); do
		page=stackpilot.rst
		for mod in $(jq -r '.modules | keys[]' "$TMP/s.json"); do
			case $m in stackpilot_${mod}_*) page=stackpilot-$mod.rst;; esac
		done
		grep -qw -- "$m" "$TMP/$page" || missing="$missing $m ($page)"
	done
	for mod in $(jq -r '.modules | keys[]' "$TMP/s.json"); do
		for key in $(jq -r ".modules.$mod | keys[] | select(. != \"cfg\")" "$TMP/s.json"); do
			grep -qw -- "$key" "$TMP/stackpilot-$mod.rst" || missing="$missing $mod.$key"
		done
	done
	for m in $(cat "$TMP"/stackpilot*.rst | grep -o 'stackpilot_[a-z0-9_]*' | sort -u); do
		grep -q "^# TYPE $m " "$TMP/p" || stale="$stale $m"
	done
	[ -z "$missing" ] || fail "not in the man pages:$missing"
	[ -z "$stale" ] || fail "named by a man page, not exposed:$stale"
}

# What a fleet keeps for months (issue 27): in the exposition of a run of
# every module with a pmtu destination and a target in its tables, no
# counter series has a label that is a state (state, method, known) or an
# id, no metric name repeats a word (stackpilot_rehash_rehash_now_total),
# states are gauges, and programs are named by module and full name.
t_metrics_fleet_labels() {
	local bad
	make_cgroup
	mx_start "$CG"
	ip netns exec "$NS_A" "$TCPTOOL" server 5201 >/dev/null &
	BG_PIDS+=($!)
	sleep 0.2
	in_cgroup nsenter --net="/run/netns/$NS_A" "$TCPTOOL" client 10.77.0.2 5201 10000 2 >/dev/null ||
		fail "client in cgroup"
	sp_ctl status --prometheus >"$TMP/p" || fail "status --prometheus exit $?"
	# The tables are there to be judged: a destination, a target.
	has '^stackpilot_pmtu_destination_probes_total{.*destination="10.77.0.2"' "$TMP/p" ||
		fail "no pmtu destination row: $(grep destination_ "$TMP/p" | head -3)"
	has '^stackpilot_target_changes_total{' "$TMP/p" || fail "no target row"
	# One pass: the counters by their TYPE line, then the label names of each of their series.
	bad=$(awk '$1 == "#" && $2 == "TYPE" { counter[$3] = $4 == "counter"; next }
		/^#/ { next }
		{ name = $1; sub(/\{.*/, "", name); n++
		  if (!counter[name]) next
		  c++; labels = $1; sub(/^[^{]*/, "", labels)
		  while (match(labels, /[{,][a-z_]+="/)) {
			k = substr(labels, RSTART + 1, RLENGTH - 3)
			if (k ~ /^(state|method|known|id)$/) print name " has label " k
			labels = substr(labels, RSTART + RLENGTH)
			sub(/^([^"\\]|\\.)*"/, "", labels)
		  } }
		END { if (c < 60) print "only " c " counter series of " n }' "$TMP/p")
	[ -z "$bad" ] || fail "$bad"
	bad=$(awk '$1 == "#" && $2 == "TYPE" { print $3 }' "$TMP/p" | grep -E '_([a-z0-9]+)_\1(_|$)')
	[ -z "$bad" ] || fail "names that repeat a word: $bad"
	# The states are gauges: a destination's state and method, a peer's known, a target's state.
	grep -q '^# TYPE stackpilot_pmtu_destination_state gauge$' "$TMP/p" || fail "no pmtu destination state gauge"
	has '^stackpilot_pmtu_destination_state{.*destination="10.77.0.2",state="[a-z_]*",method="[a-z]*"} 1$' "$TMP/p" ||
		fail "state of 10.77.0.2: $(grep destination_state "$TMP/p")"
	grep -q '^# TYPE stackpilot_fragguard_peer_known gauge$' "$TMP/p" || fail "no peer known gauge"
	has '^stackpilot_target_state{kind="iface",name="v'"$ID"'a",state="attached"} 1$' "$TMP/p" ||
		fail "target state: $(grep target_ "$TMP/p")"
	# Programs: module and full name (the kernel's would be sp_fragguard_dr).
	has '^stackpilot_bpf_program_runs_total{module="fragguard",program="sp_fragguard_drops"} ' "$TMP/p" ||
		{ need_feature frag_drop_reasons; fail "programs: $(grep program_runs "$TMP/p")"; }
	has '^stackpilot_bpf_program_runs_total{module="chain",program="sp_sockops"} ' "$TMP/p" ||
		fail "programs: $(grep program_runs "$TMP/p")"
}

# stackpilot_build_info carries the version `stackpilot --version` prints,
# once; a module the kernel refuses (bpf_loop switched off for the run:
# fragguard cannot run) is module_loaded 0, the others 1.
t_metrics_build_info() {
	local v
	v=$("$SP" --version | awk '{ print $2 }')
	[ -n "$v" ] || fail "stackpilot --version: $("$SP" --version)"
	make_cgroup
	SP_PROBE_OFF=bpf_loop mx_start "$CG"
	grep -q 'fragguard.*not started' "$TMP/sp.err" || fail "fragguard not refused: $(sp_said)"
	sp_ctl status --prometheus >"$TMP/p" || fail "status --prometheus exit $?"
	assert_eq "$(grep -c '^stackpilot_build_info' "$TMP/p")" 1 "build_info series"
	has "^stackpilot_build_info{version=\"$v\"} 1\$" "$TMP/p" || fail "build_info: $(grep build_info "$TMP/p")"
	has '^stackpilot_module_loaded{module="fragguard"} 0$' "$TMP/p" ||
		fail "refused fragguard: $(grep module_loaded "$TMP/p")"
	has "^stackpilot_module_loaded{module=\"pmtu\",cgroup=\"$CG\"} 1\$" "$TMP/p" ||
		fail "pmtu loaded: $(grep module_loaded "$TMP/p")"
	! has '^stackpilot_fragguard_' "$TMP/p" || fail "fragguard series of a module not loaded"
}

# run --metrics-top N: each module's table has at most N rows in the
# metrics (status keeps them all), pmtu's busiest first; 0: none. 30 pmtu
# destinations restored from a crafted state file, and connections to one
# of them (clamped, so the busiest).
t_metrics_top_cap() {
	local f cookie now i n clamped
	make_cgroup
	local STATE=$TMP/state
	mkdir -m 700 "$STATE"
	mk_netns "$NS_A"
	now=$(date +%s)
	cookie=$(ip netns exec "$NS_A" python3 -c 'import socket; s = socket.socket(); print(int.from_bytes(s.getsockopt(socket.SOL_SOCKET, 71, 8), "little"))')
	f=$STATE/cgroup-sp-test-$ID.pmtu
	{
		echo "cgroup sp-test-$ID"
		echo "boot $(cat /proc/sys/kernel/random/boot_id)"
		for i in $(seq 30); do
			echo "dst 4 10.78.0.$i netns=$cookie nsino=0 low=1400 high=1401 state=2 expires=$((now + 300))"
		done
		echo "dst 4 10.77.0.2 netns=$cookie nsino=0 low=1400 high=1401 state=2 expires=$((now + 300))"
	} >"$f"
	chmod 600 "$f"
	veth "$NS_A" "v${ID}a" "$NS_A" "v${ID}b"
	ip -n "$NS_A" addr add 10.77.0.1/24 dev "v${ID}a"
	ip -n "$NS_A" addr add 10.77.0.2/24 dev "v${ID}b"
	top() { # top N: the run with --metrics-top N (none: the default), its exposition in $TMP/p$1
		: >"$TMP/sp.err"
		sp_spawn nsenter --net="/run/netns/$NS_A" "$SP" run --pin-path "$PIN" --interval 0 \
			--cgroup "sp-test-$ID" --modules pmtu --state-dir "$STATE" --persist ${1:+--metrics-top "$1"}
		ip netns exec "$NS_A" "$TCPTOOL" server 5201 >/dev/null &
		local srv=$!
		sleep 0.2
		in_cgroup nsenter --net="/run/netns/$NS_A" "$TCPTOOL" client 10.77.0.2 5201 1000 3 >/dev/null ||
			fail "client in cgroup"
		kill "$srv"; wait "$srv" 2>/dev/null
		sp_ctl status --prometheus >"$TMP/p${1:-d}" || fail "status --prometheus exit $?"
		assert_ge "$(sp_json '.modules.pmtu.destinations | length')" 31 "destinations in status"
		clamped=$(sp_json '.modules.pmtu.destinations[] | select(.dst == "10.77.0.2") | .clamped')
		sp_stop || fail "stackpilot run exited $?; its stderr ends: $(sp_said)"
	}
	top 5
	top 0
	top
	for n in 5 d; do
		# Every per-destination metric: at most N series, and the busiest first.
		awk '/^stackpilot_pmtu_destination_/ { sub(/\{.*/, "", $1); c[$1]++ } END { for (m in c) print m, c[m] }' \
			"$TMP/p$n" >"$TMP/c$n"
		assert_eq "$(wc -l <"$TMP/c$n")" 10 "per-destination metrics with --metrics-top $n"
		assert_eq "$(awk '{ print $2 }' "$TMP/c$n" | sort -u)" "$([ $n = d ] && echo 20 || echo 5)" \
			"series of each per-destination metric with --metrics-top $n: $(cat "$TMP/c$n")"
		# Where the kernel refuses the clamp (before 6.1), nothing is busier than another.
		[ "$clamped" = 0 ] ||
			assert_eq "$(grep '^stackpilot_pmtu_destination_clamped_total{' "$TMP/p$n" | head -1 |
				sed 's/.*destination="\([^"]*\)".*/\1/')" 10.77.0.2 "busiest destination first"
	done
	! grep -q '^stackpilot_pmtu_destination_' "$TMP/p0" || fail "--metrics-top 0: $(grep -m3 destination_ "$TMP/p0")"
	has '^stackpilot_pmtu_entries_searched{.*} 31$' "$TMP/p0" || fail "entries by state: $(grep entries_ "$TMP/p0")"
	echo "series: $(grep -vc '^#' "$TMP/p0") with --metrics-top 0, $(grep -vc '^#' "$TMP/p5") with 5," \
		"$(grep -vc '^#' "$TMP/pd") with the default (20); 31 destinations"
	"$SP" run --pin-path "$PIN" --metrics-top 101 >/dev/null 2>"$TMP/e"
	assert_eq "$?" 2 "--metrics-top 101"
	grep -q -- "--metrics-top 101: expected rows in \[0, 100\]" "$TMP/e" || fail "$(cat "$TMP/e")"
}

# dist/prometheus/alerts.yml is a valid rule file, and its unit tests
# (alerts_test.yml: a series that fires each alert, one that does not) pass.
t_metrics_alert_rules() {
	need_tool promtool prometheus
	local d=$ROOT/dist/prometheus a m
	promtool check rules "$d/alerts.yml" >"$TMP/o" 2>&1 || fail "promtool check rules: $(cat "$TMP/o")"
	grep -q 'SUCCESS: 5 rules found' "$TMP/o" || fail "$(cat "$TMP/o")"
	promtool test rules "$d/alerts_test.yml" >"$TMP/o" 2>&1 || fail "promtool test rules: $(cat "$TMP/o")"
	# Every alert has a test, and every metric a rule names is exposed by name in docs/metrics.md.
	for a in $(sed -n 's/^ *- alert: //p' "$d/alerts.yml"); do
		grep -q "alertname: $a\$" "$d/alerts_test.yml" || fail "no test of $a"
	done
	for m in $(grep -o 'stackpilot_[a-z0-9_]*' "$d/alerts.yml" | sort -u); do
		grep -q "^| \`$m\` |" "$ROOT/docs/metrics.md" || fail "$m: not a metric of docs/metrics.md"
	done
}
