#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Tests of the debug tier's checkers (run on the host; each case boots the
# debug kernel of tools/scripts/build-debug-kernel.sh with rbln-vm
# --debug-kernel and loads debug-module/, built against it):
#  - an allocation leaked in the guest fails a run whose command succeeded,
#    and the runner shows kmemleak's report of it;
#  - a use-after-free in the guest fails such a run with KASAN's report.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
vm="$top/tools/vm/rbln-vm"
"$top/tools/scripts/build-debug-kernel.sh" --print >/dev/null ||
	{ echo "debug-checks: no debug kernel (run tools/scripts/build-debug-kernel.sh)"; exit 1; }
kdir="$top/build/debug-kernel/current/linux"
mdir="$top/build/debug-kernel/selftest"
ko="$mdir/rbln_vmtest_debug.ko"
pass=0 fail=0

check() { # name expected-rc actual-rc pattern-of-the-runner's-stderr log
	if [ "$2" = "$3" ] && grep -Eq "$4" "$5"; then
		echo "ok - $1"
		pass=$((pass + 1))
		# the runner keeps a failed run's directory: this failure was the point
		rm -rf "$(sed -n 's/^rbln-vm: run directory kept: //p' "$5")"
	else
		echo "not ok - $1 (expected exit $2 and /$4/ in the runner's output, got exit $3):"
		tail -n 30 "$5"
		fail=$((fail + 1))
	fi
}

rm -rf "$mdir"
mkdir -p "$mdir"
cp "$top/tests/runner/debug-module/"* "$mdir/"
make -s -C "$kdir" M="$mdir" modules >/dev/null || { echo "debug-checks: cannot build $ko"; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT

"$vm" -q --debug-kernel --no-module --timeout 600 -- insmod "$ko" fault=leak > "$log" 2>&1
check "a leaked allocation fails the run, with kmemleak's report" 126 $? \
	'unreferenced object.*size 128' "$log"

"$vm" -q --debug-kernel --no-module --timeout 600 -- insmod "$ko" fault=uaf > "$log" 2>&1
check "a use-after-free fails the run, with KASAN's report" 126 $? \
	'BUG: KASAN: slab-use-after-free in rbln_vmtest_debug_init' "$log"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
