#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Runs inside the VM for `make demo`: shows the cards with rbln-smi, runs a
# real workload on them (rbln-demo: y = relu(x @ w) * scale in HBM, checked
# against the CPU; a wrong result fails the demo), then puts the card to
# work through the driver: identity and telemetry round trips, buffers in
# host RAM and HBM that the card reads and writes through its MMU, and
# rbln-smi showing a process that holds card memory.
set -euo pipefail
smi=$1
top=$(cd "$(dirname "$0")/../.." && pwd)
echo
"$smi"
echo
"$smi" -L

work="$top/build/cmake/tools/rbln-demo/rbln-demo"
[ -x "$work" ] || { echo "demo: $work is not built (make userspace)" >&2; exit 1; }
echo
echo "== a workload: y = relu(x @ w) * scale as one job (copies, MATMUL, RELU, SCALE), checked against the CPU =="
# Every type on the first card, fp32 on each further one.
first=1
for node in /dev/accel/accel*; do
	[ -e "$node" ] || continue
	if [ "$first" = 1 ]; then
		"$work" --device "$node" --dtype all
		first=0
	else
		echo
		"$work" --device "$node" --dtype fp32
	fi
done
[ "$first" = 0 ] || { echo "demo: no /dev/accel/accel* node" >&2; exit 1; }

demo="$top/build/cmake/tests/kselftest/rbln_get_info_test"
if [ -x "$demo" ]; then
	echo
	echo "== identity and telemetry through the driver (GET_INFO, admin ring round trips) =="
	"$demo" | grep -E "^(ok|not ok|# PASSED|# FAILED)"
fi

coh="$top/build/cmake/tests/kselftest/rbln_coherence_test"
if [ -x "$coh" ]; then
	echo
	echo "== buffers: the card reads and writes host, HBM, userptr and imported buffers through its MMU =="
	"$coh" | grep -E "^(ok|not ok|# PASSED|# FAILED)"
fi
hold="$top/build/cmake/tests/umd/rbln-hold-hbm"
if [ -x "$hold" ] && [ -e /dev/accel/accel0 ]; then
	echo
	echo "== a process holding 64 MiB of HBM on chiplet 0, as rbln-smi sees it =="
	fifo=$(mktemp -u /tmp/rbln-demo.XXXXXX)
	mkfifo "$fifo"
	"$hold" /dev/accel/accel0 $((64 << 20)) 0 >"$fifo" &
	pid=$!
	read -r _ <"$fifo" || true
	rm -f "$fifo"
	"$smi"
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
fi
