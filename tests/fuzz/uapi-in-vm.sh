#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Inside the VM (tools/scripts/test-vm.sh): fuzzes rbln.ko's ioctls with
# rbln_uapi_fuzz for SECONDS, from its seeds.  A failing input is copied to
# the run's results (build/vm-runs/<run>/results, kept on failure).
# With "faults" it also injects card faults through the emulator's control
# port (RBLN_FUZZ_FAULTS=1, see uapi_fuzz.cpp) and checks that the driver
# brings the card back after every input.
# usage: uapi-in-vm.sh FUZZ_BUILD_DIR [SECONDS] [faults]
set -u
bin=$1/tests/fuzz/rbln_uapi_fuzz
secs=${2:-60}
name=uapi
timeout=20
if [ "${3:-}" = faults ]; then
	export RBLN_FUZZ_FAULTS=1
	name="uapi (with card faults)"
	timeout=60	# the harness waits up to 20 s for the card to come back
fi
work=$(mktemp -d)
out=${RBLN_VM_RESULTS:-$work}
RBLN_FUZZ_SEEDS="$work/seeds" "$bin" || exit 1
mkdir -p "$work/corpus"
"$bin" -max_total_time="$secs" -timeout="$timeout" -rss_limit_mb=2048 -print_final_stats=1 \
	-artifact_prefix="$out/uapi-" "$work/corpus" "$work/seeds" > "$work/log" 2>&1
rc=$?
if [ "$rc" != 0 ]; then
	grep -v '^#[0-9]' "$work/log" | tail -n 60
	echo "$name fuzz: failed (rc $rc); input in $out"
	exit 1
fi
grep '^uapi_fuzz: ioctls' "$work/log"
# The driver speaks for its clients: the card rejecting one of its admin
# requests is a driver bug whatever the clients did.
if dmesg | grep -E 'card rejected admin request|VM_UNBIND of asid'; then
	echo "$name fuzz: the card rejected requests of the driver (above)"
	exit 1
fi
echo "$name fuzz: clean: $(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log") inputs" \
	"in ${secs}s, $(grep -o 'cov: [0-9]*' "$work/log" | tail -n 1), taint $(cat /proc/sys/kernel/tainted)"
