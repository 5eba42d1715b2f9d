#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# tests/vm/matrix.sh [NAME ...]: tests/vm/run.sh for each kernel of
# tests/vm/kernels (or those named), one after the other (each guest takes
# both CPUs), then "N passed, N failed, N skipped" over all of them.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM_DIR=${VM_DIR:-$ROOT/build/vm}
mkdir -p "$VM_DIR"
[ $# = 0 ] && set -- $(awk '!/^#/ && NF { print $1 }' "$ROOT/tests/vm/kernels")
pass=0 failn=0 skipn=0
for k in "$@"; do
	log=$VM_DIR/matrix-$k.log
	"$ROOT/tests/vm/run.sh" "$k" | tee "$log" | grep -v ' passed, .* failed'
	read -r p _ f _ s _ < <(tail -1 "$log")
	pass=$((pass + ${p:-0})) failn=$((failn + ${f:-1})) skipn=$((skipn + ${s:-0}))
done
echo "$pass passed, $failn failed, $skipn skipped"
[ "$failn" = 0 ]
