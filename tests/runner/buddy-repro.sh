#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs tests/runner/buddy-repro/ (a reproducer of a use-after-free in the
# kernel's buddy allocator, see the module's comment) on the debug kernel
# of tools/scripts/build-debug-kernel.sh.  Not part of make test: on an
# unpatched kernel the expected outcome is KASAN's report, which this
# script checks for and prints (exit 0 = reproduced; 1 = not reproduced,
# e.g. on a kernel with kernel/patches/gpu-buddy-undo-failed-split.patch).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
"$top/tools/scripts/build-debug-kernel.sh" --print >/dev/null ||
	{ echo "buddy-repro: no debug kernel (run tools/scripts/build-debug-kernel.sh)"; exit 2; }
kdir="$top/build/debug-kernel/current/linux"
mdir="$top/build/debug-kernel/buddy-repro"
rm -rf "$mdir" && mkdir -p "$mdir" && cp "$top/tests/runner/buddy-repro/"* "$mdir/"
make -s -C "$kdir" M="$mdir" modules >/dev/null || { echo "buddy-repro: build failed"; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$top/tools/vm/rbln-vm" -q --debug-kernel --no-module --timeout 600 -- bash -c \
	"echo N > /sys/kernel/debug/failslab/ignore-gfp-wait && insmod '$mdir/rbln_buddy_repro.ko'" > "$log" 2>&1
rc=$?
grep -E 'rbln_buddy_repro:|BUG: KASAN|kernel BUG' "$log" | head -n 8
dir=$(sed -n 's/^rbln-vm: run directory kept: //p' "$log")
if [ "$rc" = 126 ] && grep -q 'BUG: KASAN: slab-use-after-free' "$log"; then
	echo "buddy-repro: reproduced (guest log: $dir/results/dmesg.txt)"
	exit 0
fi
echo "buddy-repro: not reproduced (runner exit $rc)"
tail -n 20 "$log"
exit 1
