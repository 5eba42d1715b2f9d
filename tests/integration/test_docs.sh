# SPDX-License-Identifier: GPL-2.0
# Documentation checked against the code, so a new message or module cannot
# be forgotten in it: docs/troubleshooting.md lists every error that tells
# the user to do something, and the README's module table lists every
# module the loader has. These read files and run `stackpilot --help`:
# no namespaces, no cgroup, nothing attached.
# Each t_* runs in its own bash with tests/lib.sh sourced.

# The messages under docs/troubleshooting.md's rule ("Which messages are
# listed"), one a line: the format string of each sp_err, sp_fail, sp_log and
# sp_log_at call in src/ (every folder below it) that tells the user to do
# something, prefixed with FILE:LINE and a tab. Adjacent C string literals
# are joined and their escapes undone, as the compiler does.
docs_instructions() {
	find "$ROOT/src" -name '*.[ch]' -print0 | sort -z | xargs -0 perl -e '
		my $verbs = qr/(?:use|run|try|pass|set|give|pick|choose|install|mount|restart|add|remove|create|check) |name it /;
		local $/;
		for my $f (@ARGV) {
			open(my $fh, "<", $f) or die "$f: $!";
			my $src = <$fh>;
			while ($src =~ /\b(?:sp_err|sp_fail|sp_log|sp_log_at)\s*\(/g) {
				my $pos = pos($src);
				# The level or exit code comes first; the format is the
				# first string literal (a run of adjacent ones).
				next unless substr($src, $pos, 4000) =~
					/\A[^";]*?((?:"(?:[^"\\]|\\.)*"\s*)+)/s;
				my ($lit, $m) = ($1, "");
				$m .= $1 while $lit =~ /"((?:[^"\\]|\\.)*)"/g;
				$m =~ s/\\n//g;
				$m =~ s/\\(.)/$1/g;
				next unless $m =~ /(?:^|: |; |\(|, |\bor )$verbs/	# an imperative
					|| $m =~ /\(see: /				# a command to run
					|| $m =~ /\(is [^)]*\?\)/			# a thing to check
					|| $m =~ /\bmust |\bneeds? /			# a requirement
					|| $m =~ /(?:^|[(;:,] |\bor )--[a-z][a-z-]* [A-Z0-9\/]/;  # an option to give
				(my $rel = $f) =~ s{^\Q$ENV{ROOT}\E/}{};
				my $line = 1 + (substr($src, 0, $pos) =~ tr/\n//);
				print "$rel:$line\t$m\n";
			}
		}' -- 
}

# Every such message is in docs/troubleshooting.md: each piece of it between
# printf conversions (%s, %u, %04o, ...) of 4 characters or more, as written
# (the page shows a conversion as a word in capitals: PATH, N, ...).
t_docs_troubleshooting() {
	local doc=$ROOT/docs/troubleshooting.md loc msg piece n=0 missing=0
	[ -s "$doc" ] || fail "no $doc"
	export ROOT
	docs_instructions >"$TMP/msgs" || fail "extracting the messages from src/ failed"
	while IFS=$'\t' read -r loc msg; do
		n=$((n + 1))
		while IFS= read -r piece; do
			[ ${#piece} -ge 4 ] || continue
			if ! grep -qF -- "$piece" "$doc"; then
				echo "not in docs/troubleshooting.md: $loc: \"$msg\" (the part \"$piece\")"
				missing=$((missing + 1))
				break
			fi
		done < <(printf '%s\n' "$msg" | perl -pe 's/%[-#0 +]*[0-9*]*(?:\.[0-9*]+)?(?:hh|h|ll|l|z|j|t)?[a-zA-Z%]/\n/g')
	done <"$TMP/msgs"
	echo "$n messages under the rule, $missing of them missing"
	# A rule that matches nothing would pass whatever the page says.
	assert_ge "$n" 20 "messages under the rule"
	[ "$missing" = 0 ] || fail "$missing of $n messages missing from docs/troubleshooting.md (listed above)"
}

# The README's Modules table has one row per module the loader has (the
# "Modules:" list of `stackpilot --help`, which is the module table's), and
# no other; so does `stackpilot probe --json`.
t_docs_readme_modules() {
	local listed help probed
	listed=$(awk '/^## Modules/ { on = 1; next } /^## / { on = 0 } on' "$ROOT/README.md" |
		sed -n 's/^| `\([a-z0-9_]*\)` |.*/\1/p' | sort | tr '\n' ' ')
	help=$("$SP" --help | awk '/^Modules:/ { on = 1; next } /^$/ { on = 0 } on { print $1 }' |
		sort | tr '\n' ' ')
	probed=$("$SP" probe --json | jq -r '.modules | if type == "object" then keys[] else .[].name end' |
		sort | tr '\n' ' ')
	[ -n "$help" ] || fail "stackpilot --help lists no modules"
	assert_eq "$listed" "$help" "README module rows vs stackpilot --help's Modules"
	assert_eq "$probed" "$help" "stackpilot probe --json's modules vs --help's"
}

# What a module's declaration cannot generate is held against it: each
# module the loader has gets its man page, named in stackpilot(8)'s SEE
# ALSO, and a row of panels in the Grafana dashboard that query its metrics.
t_docs_module_artifacts() {
	local m missing= dash=$ROOT/dist/grafana/stackpilot.json
	for m in $("$SP" --help | awk '/^Modules:/ { on = 1; next } /^$/ { on = 0 } on { print $1 }'); do
		[ -f "$ROOT/docs/stackpilot-$m.rst" ] || missing="$missing docs/stackpilot-$m.rst"
		grep -q "\*\*stackpilot-$m\*\*" "$ROOT/docs/stackpilot.rst" ||
			missing="$missing stackpilot.rst-SEE-ALSO:$m"
		jq -e --arg m "$m" 'any(.panels[]; .type == "row" and .title == $m)' "$dash" >/dev/null ||
			missing="$missing grafana-row:$m"
		jq -r '.. | .expr? // empty' "$dash" | has "stackpilot_${m}_" ||
			missing="$missing grafana-query:$m"
	done
	[ -n "$m" ] || fail "stackpilot --help lists no modules"
	[ -z "$missing" ] || fail "modules without their artifacts:$missing"
}
