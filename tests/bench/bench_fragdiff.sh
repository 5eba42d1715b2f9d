# SPDX-License-Identifier: GPL-2.0
# Page: docs/bench/fragguard.md (tests/bench/run.sh writes what this prints there)
# fragguard against the kernel at scale: tests/tools/fragdiff over COUNT
# generated datagrams (the test suite runs 100000 of them).
source "$ROOT/tests/lib.sh"
source "$ROOT/tests/integration/test_fragguard.sh"
COUNT=${COUNT:-500000}
echo "## fragguard against the kernel"
echo
FRAGDIFF_COUNT=$COUNT t_fragguard_differential >"$TMP/out" 2>&1
rc=$?
echo "\`tests/tools/fragdiff\`, $COUNT datagrams, seed printed below; exit $rc:"
echo
grep '^fragdiff:' "$TMP/out" | sed 's/^/    /'
