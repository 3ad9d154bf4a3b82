#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The VM tier of `make test`: every case boots the VM kernel with emulated
# cards and rbln.ko from the build tree (or DKMS once).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
vm="$top/tools/vm/rbln-vm"
ksft="$top/build/cmake/tests/kselftest"
smi="$top/build/cmake/tools/rbln-smi/rbln-smi"
demo="$top/build/cmake/tools/rbln-demo/rbln-demo"
# The job tests hang chiplets on purpose: a short job timeout makes each
# ring reset take 2 s instead of the default 10 s.
jobparams="job_timeout_ms=2000"
pass=0 fail=0
failed=()

step() { # name, then the command
	local name=$1 t0 rc
	shift
	echo "=== $name"
	t0=$(date +%s)
	"$@"
	rc=$?
	if [ "$rc" = 0 ]; then
		pass=$((pass + 1))
		echo "=== $name: ok ($(( $(date +%s) - t0 ))s)"
	else
		fail=$((fail + 1))
		failed+=("$name")
		echo "=== $name: FAILED (exit $rc)"
	fi
}

step "runner self-test" "$top/tests/runner/run.sh"
step "kselftests + rbln-smi + rbln-demo, 1 Rebel100 card" \
	"$vm" -q --timeout 900 --modparams "$jobparams" -- bash -c \
	"'$top/tests/kselftest/run.sh' '$ksft' && '$top/tests/vm/smi-check.sh' '$smi' &&
	 '$demo' --size 96,160,72 --dtype all --chiplet 3"
step "kselftests + rbln-smi, 2 ATOM cards" \
	"$vm" -q --timeout 900 --cards 2 --family atom --hbm 512M --modparams "$jobparams" -- bash -c \
	"'$top/tests/kselftest/run.sh' '$ksft' && '$top/tests/vm/smi-check.sh' '$smi'"
step "librbln streams, events, copies, memory (explain) and host memory, 2 Rebel100 cards" \
	"$vm" -q --timeout 900 --cards 2 --modparams "$jobparams" -- bash -c \
	"'$top/build/cmake/tests/integration/rbln_umd_vm_tests' &&
	 '$top/build/cmake/tests/integration/rbln_submit_paths_vm_tests' &&
	 '$top/build/cmake/tests/integration/rbln_memory_vm_tests' &&
	 '$top/build/cmake/tests/integration/rbln_host_vm_tests'"
# These four cards speak firmware-iface 1.2, the previous firmware: the
# driver must not send them VM_ABORT or the FAULT_ABORTS job flag (every
# job would fail), and a fault still fails the client's later jobs.
step "librbln logical devices and fork, 4 ATOM cards of firmware-iface 1.2" \
	"$vm" -q --timeout 300 --cards 4 --family atom --hbm 128M --modparams "$jobparams" \
	--emu-arg --iface-minor=2 -- bash -c \
	"'$top/build/cmake/tests/integration/rbln_umd_devices_vm_tests' &&
	 '$top/build/cmake/tests/kselftest/rbln_submit_fault_test' \
		-t mmu_fault_fails_the_job_and_every_later_job_of_the_client \
		-t jobs_already_on_the_rings_behind_a_fault_fail_too &&
	 '$top/build/cmake/tests/kselftest/rbln_release_test'"
# Random and well-formed ioctl structs from many short-lived clients
# (tests/fuzz/README.md); -cpu max: libFuzzer's runtime uses POPCNT.  A
# short job timeout: fuzzed jobs hang rings on purpose.  Then the same with
# injected card faults, after each of which the card must come back, and
# beside it a second client fuzzing without faults through the recoveries.
step "uAPI fuzzing, 60 s, then 45 s with card faults and a client beside, 1 Rebel100 card" bash -c \
	"'$top/tools/scripts/fuzz.sh' --build-only &&
	 '$vm' -q --timeout 400 --cpu max --modparams job_timeout_ms=200 -- bash -c \
	 \"'$top/tests/fuzz/uapi-in-vm.sh' '$top/build/fuzz' 60 &&
	  '$top/tests/fuzz/uapi-in-vm.sh' '$top/build/fuzz' 45 faults+client\""
# The bounded soak (tests/soak/README.md): a process per card doing random
# librbln work checked against the CPU, rbln-smi in a loop, a chiplet hang
# every 40-60 s; the guest's slab and memory, the processes' RSS and open
# files and the HBM in use must stay flat.
step "soak, 120 s, 2 Rebel100 cards with chiplet hangs" "$top/tests/soak/run.sh" 120
step "DKMS-built module" bash -c \
	"'$top/kernel/dkms-install.sh' \"\$(cat '$top/build/kver')\" >/dev/null &&
	 '$vm' -q --dkms --timeout 600 -- '$top/tests/kselftest/run.sh' '$ksft' info;
	 rc=\$?; '$top/kernel/dkms-install.sh' --remove >/dev/null; exit \$rc"

echo
echo "vm-tests: $pass passed, $fail failed"
for f in "${failed[@]}"; do echo "  failed: $f"; done
[ "$fail" = 0 ]
