#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Inside the VM (tools/scripts/test-vm.sh): fuzzes rbln.ko's ioctls with
# rbln_uapi_fuzz for SECONDS, from its seeds.  A failing input is copied to
# the run's results (build/vm-runs/<run>/results, kept on failure).
# With "faults" it also injects card faults through the emulator's control
# port (RBLN_FUZZ_FAULTS=1, see uapi_fuzz.cpp) and checks that the driver
# brings the card back after every input.  "faults+client" runs a second
# fuzzer beside it, without faults, for the same time: another client's
# random work goes on through every recovery, and both must end clean.
# usage: uapi-in-vm.sh FUZZ_BUILD_DIR [SECONDS] [faults|faults+client]
set -u
bin=$1/tests/fuzz/rbln_uapi_fuzz
secs=${2:-60}
mode=${3:-}
work=$(mktemp -d)
out=${RBLN_VM_RESULTS:-$work}

# fuzz NAME TAG FAULTS TIMEOUT: one libFuzzer run in $work/TAG; 0 if clean.
fuzz() {
	name=$1 dir=$work/$2
	mkdir -p "$dir/corpus"
	RBLN_FUZZ_FAULTS=$3 RBLN_FUZZ_SEEDS="$dir/seeds" "$bin" || return 1
	RBLN_FUZZ_FAULTS=$3 "$bin" -max_total_time="$secs" -timeout="$4" -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$out/$2-" "$dir/corpus" "$dir/seeds" \
		> "$dir/log" 2>&1
	rc=$?
	if [ "$rc" != 0 ]; then
		grep -v '^#[0-9]' "$dir/log" | tail -n 60
		echo "$name fuzz: failed (rc $rc); input in $out"
		return 1
	fi
	grep '^uapi_fuzz: ioctls' "$dir/log"
	echo "$name fuzz: clean: $(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log")" \
		"inputs in ${secs}s, $(grep -o 'cov: [0-9]*' "$dir/log" | tail -n 1)"
}

status=0
case $mode in
"")
	fuzz uapi uapi 0 20 || status=1 ;;
faults)
	# the harness waits up to 20 s for the card to come back
	fuzz "uapi (with card faults)" uapi 1 60 || status=1 ;;
faults+client)
	fuzz "uapi (the client beside the faults)" client 0 60 > "$work/client.out" 2>&1 &
	client=$!
	fuzz "uapi (with card faults)" uapi 1 60 || status=1
	wait "$client" || status=1
	cat "$work/client.out" ;;
*)
	echo "usage: uapi-in-vm.sh FUZZ_BUILD_DIR [SECONDS] [faults|faults+client]" >&2
	exit 2 ;;
esac
# The driver speaks for its clients: the card rejecting one of its admin
# requests is a driver bug whatever the clients did.
if dmesg | grep -E 'card rejected admin request|VM_UNBIND of asid'; then
	echo "uapi fuzz: the card rejected requests of the driver (above)"
	status=1
fi
echo "uapi fuzz: taint $(cat /proc/sys/kernel/tainted)"
exit "$status"
