#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# tests/vm/fetch.sh NAME: fetch Debian's kernel package for NAME (tests/vm/kernels)
# with apt-get through a private configuration (the machine's own sources and
# lists stay untouched), extract it, and print the folder that holds vmlinuz
# and lib/modules/VERSION. Cached under $VM_DIR (default build/vm).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM_DIR=${VM_DIR:-$ROOT/build/vm}
name=${1:?usage: fetch.sh NAME}
suite=$(awk -v n="$name" '$1 == n { print $2 }' "$ROOT/tests/vm/kernels")
[ -n "$suite" ] || { echo "fetch.sh: no kernel '$name' in tests/vm/kernels" >&2; exit 2; }

apt=$VM_DIR/apt
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$VM_DIR/debs"
# apt runs unlocked (Debug::NoLocking, a private configuration): two
# fetches at once would update the same lists and fail; one at a time.
exec 9>"$VM_DIR/fetch.lock"
flock 9
key=/usr/share/keyrings/debian-archive-keyring.gpg
{
	echo "deb [signed-by=$key] http://deb.debian.org/debian bullseye main"
	echo "deb [signed-by=$key] http://deb.debian.org/debian-security bullseye-security main"
	echo "deb [signed-by=$key] http://deb.debian.org/debian bookworm main"
	echo "deb [signed-by=$key] http://deb.debian.org/debian-security bookworm-security main"
	echo "deb [signed-by=$key] http://deb.debian.org/debian bookworm-backports main"
} >"$apt/sources.list"
O=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::Etc::preferencesparts=-"
   -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Debug::NoLocking=1
   -o APT::Sandbox::User=root -q)

# The package: VM_PKG overrides (for one kernel at a time); else what the
# suite's metapackage depends on. The lists are refreshed at most daily.
pkg=${VM_PKG:-}
if [ -z "$pkg" ]; then
	if [ -z "$(find "$apt/lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
		apt-get "${O[@]}" update >"$apt/update.log" 2>&1 ||
			{ tail -5 "$apt/update.log" >&2; echo "fetch.sh: apt-get update failed" >&2; exit 1; }
	fi
	pkg=$(apt-cache "${O[@]}" show linux-image-amd64 | awk -v n="$name." '
		/^Version: / { v = $2 }
		/^Depends: / && index(v, n) == 1 { print v, $2 }' |
		sort -V | tail -1 | awk '{ print $2 "-unsigned" }')
	[ -n "$pkg" ] || { echo "fetch.sh: no linux-image-amd64 $name.* in $suite" >&2; exit 1; }
fi

out=$VM_DIR/kernel-$pkg
if [ ! -e "$out/.done" ]; then
	rm -rf "$out"
	deb=$(ls "$VM_DIR/debs/${pkg}"_*.deb 2>/dev/null | tail -1 || true)
	if [ -z "$deb" ]; then
		(cd "$VM_DIR/debs" && apt-get "${O[@]}" download "$pkg" >"$apt/download.log" 2>&1) ||
			{ tail -5 "$apt/download.log" >&2; echo "fetch.sh: apt-get download $pkg failed" >&2; exit 1; }
		deb=$(ls "$VM_DIR/debs/${pkg}"_*.deb | tail -1)
	fi
	mkdir -p "$out.tmp"
	dpkg-deb -x "$deb" "$out.tmp"
	ver=$(ls "$out.tmp/lib/modules")
	cp "$out.tmp/boot/vmlinuz-$ver" "$out.tmp/vmlinuz"
	rm -rf "$out.tmp/boot" "$out.tmp/usr"
	depmod -b "$out.tmp" "$ver"
	echo "$ver" >"$out.tmp/version"
	mv "$out.tmp" "$out"
	touch "$out/.done"
fi
echo "$out"
