#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# scripts/man-page.sh PAGE.rst STACKPILOT: PAGE with its @TUNABLES@ and
# @COUNTERS@ lines replaced by what the loader says of the page's module
# (docs/stackpilot-MODULE.rst; docs/stackpilot.rst has none), on stdout.
# The Makefile renders this; the man-page test reads it.
set -eu
page=$1 sp=$2
mod=$(basename "$page" .rst); mod=${mod#stackpilot}; mod=${mod#-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/t"; : >"$tmp/c"
if [ -n "$mod" ]; then
	"$sp" tunables --rst "$mod" >"$tmp/t"
	"$sp" counters --rst "$mod" >"$tmp/c"
fi
awk -v t="$tmp/t" -v c="$tmp/c" '
	/^@TUNABLES@$/ { while ((getline l < t) > 0) print l; next }
	/^@COUNTERS@$/ { while ((getline l < c) > 0) print l; next }
	{ print }' "$page"
