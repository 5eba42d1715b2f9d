#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# tests/vm/run.sh NAME [PATTERN ...]: boot Debian's kernel NAME (tests/vm/kernels)
# under qemu (TCG: this machine has no /dev/kvm) and run tests/run.sh PATTERN ...
# inside it, against this checkout's build/ (CO-RE: one build for every
# kernel). Without PATTERN: the core set, tests/vm/core-tests.
# The guest sees this machine's root read-only under a tmpfs overlay, so
# it runs the same tools, and this checkout read-only at its own path
# (wherever it is: CI's may be under /tmp, where the guest mounts a tmpfs);
# nothing it writes reaches the host but its log.
# Prints the guest's PASS/FAIL lines with "vm-NAME/" before each name and
# ends with "N passed, N failed, N skipped"; a guest that hangs is killed after
# VM_TIMEOUT seconds (default 1800) and counted as one failure, with the
# last lines of its console.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VM_DIR=${VM_DIR:-$ROOT/build/vm}
name=${1:?usage: tests/vm/run.sh NAME [PATTERN ...]}; shift
timeout=${VM_TIMEOUT:-1800}
build=${SP_VM_BUILD:-$ROOT/build}
if [ $# = 0 ]; then
	set -- $(sed 's/#.*//' "$ROOT/tests/vm/core-tests")
fi

die() { echo "FAIL vm-$name: $*"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
for t in qemu-system-x86_64 cpio; do
	command -v "$t" >/dev/null || die "$t is missing (scripts/install-deps.sh installs it)"
done
case $(LC_ALL=C ldd /bin/busybox 2>&1) in
*"not a dynamic executable"*) ;;
*) die "/bin/busybox is not busybox-static (scripts/install-deps.sh installs it)" ;;
esac
[ -x "$build/stackpilot" ] || die "$build/stackpilot is not built (make)"
kdir=$("$ROOT/tests/vm/fetch.sh" "$name") || die "fetching the kernel failed"
ver=$(cat "$kdir/version")

# The initramfs: busybox, the modules that mount the shares (in the order
# modprobe would load them, decompressed), init.
run=$(mktemp -d "$VM_DIR/run-$name.XXXX")
trap '[ -n "${VM_KEEP:-}" ] && echo "vm-$name: kept $run" || rm -rf "$run"' EXIT
mkdir -p "$run/initrd/bin" "$run/out"
cp /bin/busybox "$run/initrd/bin/busybox"
for d in proc sys dev; do mkdir -p "$run/initrd/$d"; done
: >"$run/initrd/modules.order"
for m in virtio_pci 9pnet_virtio 9p overlay; do
	# "builtin" lines for what the kernel has built in (6.12: virtio_pci).
	modprobe -S "$ver" -d "$kdir" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' | while read -r ko; do
	rel=${ko#"$kdir"/}; rel=${rel%.xz}; rel=${rel%.zst}
	mkdir -p "$run/initrd/$(dirname "$rel")"
	case $ko in
	*.xz) xz -dc "$ko" >"$run/initrd/$rel" ;;
	*.zst) zstd -qdc "$ko" >"$run/initrd/$rel" ;;
	*) cp "$ko" "$run/initrd/$rel" ;;
	esac
	echo "$rel" >>"$run/initrd/modules.order"
done
install -m 0755 "$ROOT/tests/vm/init" "$run/initrd/init"
echo "$ROOT/tests/vm/guest.sh" >"$run/initrd/guest"
(cd "$run/initrd" && find . | cpio -o -H newc --quiet | gzip -1) >"$run/initrd.gz"
{
	echo "SP_ROOT=$ROOT"
	echo "SP_BUILD=$build"
	echo "SP_VM_KERNEL=$name"
	echo "SP_TESTS='$*'"
	echo "SP_LEFTOVERS=1"
	[ -z "${VM_CMD:-}" ] || printf 'SP_CMD=%q\n' "$VM_CMD"
} >"$run/out/job"

# -cpu qemu64: a plain x86-64, as every Debian kernel runs on; TCG
# emulates it about an eighth faster than -cpu max (71 s against 82 s for
# two tests on 6.1). VM_CPU overrides.
# thread=single: both vCPUs on one host thread. With a thread each (TCG's
# default here) a vCPU now and then runs a stale translation of code the
# other vCPU has just patched: the guest dies on an int3 or in the middle
# of a static-key nop (sched_clock_cpu at boot, NF_HOOK, and
# __netif_receive_skb_core on 6.12, all outside any BPF program). VM_TCG
# overrides ("multi" brings the race back).
boot() {
	timeout -k 10 "$timeout" qemu-system-x86_64 -machine q35 -accel tcg,thread=${VM_TCG:-single} \
		-cpu ${VM_CPU:-qemu64} -smp 2 -m 3072 \
		-nographic -no-reboot -nic none \
		-kernel "$kdir/vmlinuz" -initrd "$run/initrd.gz" \
		-append "console=ttyS0 quiet panic=-1 oops=panic" \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs local,path="$kdir/lib/modules",mount_tag=modules,security_model=none,readonly=on \
		-virtfs local,path="$run/out",mount_tag=out,security_model=none \
		-virtfs local,path="$ROOT",mount_tag=checkout,security_model=none,readonly=on,multidevs=remap \
		</dev/null >"$run/console" 2>&1
}
start=$(date +%s)
boot
qrc=$?
# A guest that died before the job began is booted once more; later deaths
# count. (With a TCG thread a vCPU, the race above killed 6.12 at boot once
# in some 30: int3 in sched_clock_cpu.)
if [ ! -e "$run/out/log" ] && [ ! -e "$run/out/rc" ] && [ $qrc != 124 ] && [ $qrc != 137 ]; then
	echo "vm-$name: the guest died while booting, booted again; its console's last lines:"
	grep -a -m3 -E 'Oops|panic|BUG' "$run/console" | sed 's/^/    /'
	boot
	qrc=$?
fi
secs=$(( $(date +%s) - start ))

# VM_CMD: its output and status, as they are.
if [ -n "${VM_CMD:-}" ]; then
	cat "$run/out/log" 2>/dev/null || tail -25 "$run/console"
	exit "$(cat "$run/out/rc" 2>/dev/null || echo 1)"
fi
# The guest's own lines, renamed; its closing line is replaced by ours.
pass=0 failn=0 skipn=0
if [ -s "$run/out/log" ]; then
	while IFS= read -r l; do
		case $l in
		"PASS "*) pass=$((pass + 1)); echo "PASS vm-$name/${l#PASS }" ;;
		"FAIL "*) failn=$((failn + 1)); echo "FAIL vm-$name/${l#FAIL }" ;;
		"SKIP "*) skipn=$((skipn + 1)); echo "SKIP vm-$name/${l#SKIP }" ;;
		"failed: "*|*" passed, "*" failed"*) ;;
		*) echo "$l" ;;
		esac
	done <"$run/out/log"
fi
rc=$(cat "$run/out/rc" 2>/dev/null)
if [ -z "$rc" ]; then
	failn=$((failn + 1))
	if [ $qrc = 124 ] || [ $qrc = 137 ]; then
		echo "FAIL vm-$name: killed after ${timeout} s; the console's last lines:"
	else
		echo "FAIL vm-$name: the guest ended (qemu status $qrc) without finishing; the console's last lines:"
	fi
	tail -25 "$run/console" | sed 's/^/    /'
elif [ "$rc" != 0 ] && [ "$failn" = 0 ]; then
	failn=1; echo "FAIL vm-$name: tests/run.sh exited $rc"
fi
echo "vm-$name: kernel $ver, ${secs} s"
echo "$pass passed, $failn failed, $skipn skipped"
[ "$failn" = 0 ]
