#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The part of `make demo` that runs inside the VM (tools/scripts/demo.sh
# starts it): shows the cards with rbln-smi, runs a real workload through
# librbln (rbln-demo: y = relu(x @ w) * scale with x's rows split over each
# card's chiplets, checked against the CPU; a wrong result fails the demo),
# says in a sentence what two of the driver's kselftests checked, shows a
# process that holds card memory, and leaves the facts of the closing
# summary in $RBLN_VM_RESULTS/summary.  Full logs go to $RBLN_VM_RESULTS.
#
#   demo-vm.sh BUILD_DIR    (build/cmake)
set -uo pipefail
build=$1
smi="$build/tools/rbln-smi/rbln-smi"
work="$build/tools/rbln-demo/rbln-demo"
ksft="$build/tests/kselftest"
hold="$build/tests/integration/rbln-hold-hbm"
res=${RBLN_VM_RESULTS:-/tmp}
summary="$res/summary"
: > "$summary"
failed=0

fact() { printf '%s\t%s\n' "$1" "$2" >> "$summary"; }

echo "== the cards, as rbln-smi (librbln's discovery, sysfs, hwmon, fdinfo) sees them"
"$smi" || failed=1
# (No process substitution: the VM's chroot has no /dev/fd.)
"$smi" -L > "$res/rbln-smi-L.txt" 2>&1
while read -r line; do fact card "$line"; done < "$res/rbln-smi-L.txt"

echo
echo "== a workload through librbln, as a framework runs it: y = relu(x @ w) * scale,"
echo "   x's rows split over the chiplets (one stream and its storages per chiplet),"
echo "   checked against a CPU reference within the bound firmware-iface allows"
# Every type on the first card, fp32 on each further one.
n=0
for node in /dev/accel/accel*; do
	[ -e "$node" ] || continue
	types=fp32
	[ "$n" = 0 ] && types=all
	[ "$n" = 0 ] || echo
	log="$res/rbln-demo-$(basename "$node").log"
	"$work" --device "$node" --dtype "$types" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	over=$(sed -n "s/.*x's rows split over \(chiplets [0-9, -]*\) .*/\1/p; s/.*all on \(chiplet [0-9]*\)$/\1/p" "$log" | head -n 1)
	names=$([ "$types" = all ] && echo "fp32, bf16 and fp16" || echo fp32)
	if [ "$rc" = 0 ]; then
		fact ran "y = relu(x @ w) * 0.375, 256x256x256 in $names on $node, over ${over:-its chiplets}, through librbln: PASS"
	else
		fact ran "y = relu(x @ w) * 0.375 on $node: FAILED (rbln-demo exited $rc)"
		failed=1
	fi
	n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "demo: no /dev/accel/accel* node" >&2; failed=1; }

echo
echo "== the driver, checked by two of its kselftests"
# Each test binary: one sentence of what it checks, its TAP in a log.
ksft_step() { # binary, sentence
	local bin=$ksft/$1 log=$res/$1.log pass fail skip
	if [ ! -x "$bin" ]; then
		echo "  --  $2: not built ($bin)"
		return
	fi
	"$bin" > "$log" 2>&1
	local rc=$?
	pass=$(grep -c '^ok .*' "$log" | tr -d ' ')
	skip=$(grep -c '^ok .*# SKIP' "$log" | tr -d ' ')
	fail=$(grep -c '^not ok ' "$log" | tr -d ' ')
	pass=$((pass - skip))
	if [ "$rc" = 0 ] && [ "$fail" = 0 ]; then
		echo "  ok  $2 ($pass cases passed${skip:+, $skip skipped})" | sed 's/, 0 skipped//'
		fact checks "$1: $pass passed"
	else
		echo "  FAILED  $2: $fail of $((pass + fail)) cases failed:"
		grep '^not ok ' "$log" | sed 's/^not ok [0-9]* /    /'
		echo "    (TAP output: $log)"
		fact checks "$1: $fail FAILED"
		failed=1
	fi
}
ksft_step rbln_get_info_test \
	"GET_INFO tells each card's family, chiplets, HBM, PCI address and firmware as sysfs does, and telemetry comes from a round trip on the card's admin ring"
ksft_step rbln_coherence_test \
	"the card reads and writes host, HBM, userptr and imported buffers through its MMU, each byte where the CPU expects it"

if [ -x "$hold" ] && [ -e /dev/accel/accel0 ]; then
	echo
	echo "== a process holding 64 MiB of HBM on chiplet 0, as rbln-smi sees it"
	fifo=$(mktemp -u /tmp/rbln-demo.XXXXXX)
	mkfifo "$fifo"
	"$hold" /dev/accel/accel0 $((64 << 20)) 0 > "$fifo" &
	pid=$!
	read -r _ < "$fifo" || true
	rm -f "$fifo"
	"$smi" || failed=1
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
fi
fact result "$([ "$failed" = 0 ] && echo PASS || echo FAIL)"
exit "$failed"
