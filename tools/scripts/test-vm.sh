#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The VM tier of `make test`: every case boots the VM kernel with emulated
# cards and rbln.ko from the build tree (or DKMS once); the debug tier (at
# the end) boots a KASAN + lockdep + kmemleak + DMA-API-debug kernel.
#   test-vm.sh [all|production|debug|debug-full]   (default all =
#   production + debug; debug-full: the debug tier with every VM step)
set -uo pipefail
tier=${1:-all}
case "$tier" in all|production|debug|debug-full) ;;
*) echo "usage: test-vm.sh [all|production|debug|debug-full]" >&2; exit 2 ;;
esac
section=production	# the tier of the steps that follow
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
	case "$tier/$section" in
	all/production|all/debug|production/production|debug/debug|debug-full/debug*) ;;
	*) return 0 ;;
	esac
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
		echo "=== $name: FAILED (exit $rc, $(( $(date +%s) - t0 ))s)"
	fi
}

# The test dma-buf importer (tests/dmabuf-importer), built per kernel; the
# kselftests that need it fail without it once RBLN_DMABUF_IMPORTER=1.
importer() { # kernel build dir, output dir
	"$top/tests/dmabuf-importer/build.sh" "$1" "$2" ||
		echo "/nonexistent/rbln_dmabuf_importer.ko (the build failed)"
}
imp_ko=""
case "$tier" in all|production)
	imp_ko=$(importer "/lib/modules/$(cat "$top/build/kver")/build" "$top/build/dmabuf-importer") ;;
esac
with_importer() { # the kselftest command line, with the importer loaded
	echo "insmod '$1' && export RBLN_DMABUF_IMPORTER=1 && '$top/tests/kselftest/run.sh' '$ksft'"
}

step "runner self-test" "$top/tests/runner/run.sh"
# --hotplug: rbln_removal_test's hot unplug (QEMU device_del/device_add).
step "kselftests + rbln-smi + rbln-demo, 1 Rebel100 card" \
	"$vm" -q --hotplug --timeout 900 --modparams "$jobparams" -- bash -c \
	"$(with_importer "$imp_ko") && '$top/tests/vm/smi-check.sh' '$smi' &&
	 '$demo' --size 96,160,72 --dtype all --chiplet 3"
step "kselftests + rbln-smi, 2 ATOM cards" \
	"$vm" -q --hotplug --timeout 900 --cards 2 --family atom --hbm 512M --modparams "$jobparams" -- bash -c \
	"$(with_importer "$imp_ko") && '$top/tests/vm/smi-check.sh' '$smi'"
step "librbln streams, events, copies, memory (explain), host memory, graphs and RDMA into host memory, 2 Rebel100 cards" \
	"$vm" -q --timeout 900 --cards 2 --modparams "$jobparams" -- bash -c \
	"'$top/build/cmake/tests/integration/rbln_umd_vm_tests' &&
	 '$top/build/cmake/tests/integration/rbln_submit_paths_vm_tests' &&
	 '$top/build/cmake/tests/integration/rbln_memory_vm_tests' &&
	 '$top/build/cmake/tests/integration/rbln_host_vm_tests' &&
	 '$top/build/cmake/tests/integration/rbln_graph_vm_tests' &&
	 '$top/tools/scripts/rdma-rxe-setup.sh' &&
	 RBLN_RDMA=1 '$top/build/cmake/tests/integration/rbln_rdma_host_vm_tests'"
# torch_rbln's pytest (tests/torch/README.md): the documented examples and
# the operators, in one Python process (importing PyTorch under TCG takes
# 25-40 s); make test-torch adds the fork, mapping and ATOM tests.
step "torch_rbln pytest (all but the slow ones), 2 Rebel100 cards" \
	"$top/tests/torch/run-vm.sh" quick
# torch.distributed's rbln backend across machines: two ranks in two VMs of
# one card each, joined by a QEMU UDP socket network (~110 s; the two-rank
# test on two cards of one VM is in the pytest above).
step "torch.distributed rbln backend, two VMs over a QEMU socket network" \
	"$top/tests/torch/run-vm.sh" two-vms
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

# --- the debug-kernel tier --------------------------------------------------
# The kernel of tools/scripts/debug-kernel.config (KASAN, lockdep, kmemleak,
# DMA-API debug, KFENCE, DEBUG_LIST, atomic-sleep checks): rbln-vm
# --debug-kernel fails a run on any report, WARN or BUG in the guest log, on
# a kmemleak unreferenced object (two scans after the command and rbln.ko's
# unload) and on a non-zero DMA-API error count.  KASAN makes the guest 4-10x
# slower: only the runner's --timeout grows here (2-3x the production
# steps'); no job timeout needed raising.  Built once per machine and config
# (a fresh clone: ~13 min on two idle cores), then cached under build/.
# `make test` runs every kselftest once (1 card), the librbln VM tests, the
# 4-ATOM firmware-1.2 step and 60 s of the uAPI fuzzer with card faults;
# debug-full (make test-debug) adds the 2-ATOM kselftests and the fuzzer
# without faults and with a client beside the faults.  Budget (2 cores,
# kernel cached): make test's part ~15 min (the kselftests ~7 of them),
# debug-full's ~25 min; the kernel build adds ~13 min once.
section=debug
dbg_t0=$(date +%s)
dbgvm=("$vm" -q --debug-kernel)
step "debug kernel, and rbln.ko against it (built once per config, then cached)" \
	"$top/tools/scripts/build-debug-kernel.sh"
if [ "$section" = debug ] && ! "$top/tools/scripts/build-debug-kernel.sh" --print >/dev/null; then
	# no kernel: nothing below can run (and already failed above)
	section=none
fi
step "debug kernel: its checkers fail a run on a leak (kmemleak) and a use-after-free (KASAN)" \
	"$top/tests/runner/debug-checks.sh"
[ "$section" = debug ] &&
	imp_ko=$(importer "$top/build/debug-kernel/current/linux" "$top/build/debug-kernel/dmabuf-importer")
# --hotplug as in the production steps: rbln_removal_test's hot unplug
# (acpiphp: CONFIG_HOTPLUG_PCI_ACPI in the fragment).
step "debug kernel: kselftests, 1 Rebel100 card" \
	"${dbgvm[@]}" --hotplug --timeout 2400 --modparams "$jobparams" -- bash -c "$(with_importer "$imp_ko")"
step "debug kernel: librbln streams, events, copies, memory and host memory, 2 Rebel100 cards" \
	"${dbgvm[@]}" --timeout 1200 --cards 2 --modparams "$jobparams" -- bash -c \
	"'$top/build/cmake/tests/integration/rbln_umd_vm_tests' &&
	 '$top/build/cmake/tests/integration/rbln_submit_paths_vm_tests' &&
	 '$top/build/cmake/tests/integration/rbln_memory_vm_tests' &&
	 '$top/build/cmake/tests/integration/rbln_host_vm_tests'"
step "debug kernel: librbln logical devices and fork, 4 ATOM cards of firmware-iface 1.2" \
	"${dbgvm[@]}" --timeout 1200 --cards 4 --family atom --hbm 128M --modparams "$jobparams" \
	--emu-arg --iface-minor=2 -- bash -c \
	"'$top/build/cmake/tests/integration/rbln_umd_devices_vm_tests' &&
	 '$top/build/cmake/tests/kselftest/rbln_submit_fault_test' \
		-t mmu_fault_fails_the_job_and_every_later_job_of_the_client \
		-t jobs_already_on_the_rings_behind_a_fault_fail_too &&
	 '$top/build/cmake/tests/kselftest/rbln_release_test'"
step "debug kernel: uAPI fuzzing, 60 s with card faults, 1 Rebel100 card" bash -c \
	"'$top/tools/scripts/fuzz.sh' --build-only &&
	 '$vm' -q --debug-kernel --timeout 900 --cpu max --modparams job_timeout_ms=200 -- \
	 '$top/tests/fuzz/uapi-in-vm.sh' '$top/build/fuzz' 60 faults"
[ "$section" = debug ] && section=debug-extra	# debug-full only
step "debug kernel: kselftests + rbln-smi, 2 ATOM cards" \
	"${dbgvm[@]}" --hotplug --timeout 2400 --cards 2 --family atom --hbm 512M --modparams "$jobparams" -- bash -c \
	"$(with_importer "$imp_ko") && '$top/tests/vm/smi-check.sh' '$smi'"
# failslab + fail_page_alloc (10 %, the test tasks, under rbln.ko) over
# every kselftest, probe's unwinding by fail-nth, then a working card.
step "debug kernel: kselftests with kernel allocation failures injected, probe unwinding, 1 Rebel100 card" \
	"$top/tests/runner/failslab.sh" 10
step "debug kernel: uAPI fuzzing, 60 s, then 45 s with card faults and a client beside" bash -c \
	"'$top/tools/scripts/fuzz.sh' --build-only &&
	 '$vm' -q --debug-kernel --timeout 1800 --cpu max --modparams job_timeout_ms=200 -- bash -c \
	 \"'$top/tests/fuzz/uapi-in-vm.sh' '$top/build/fuzz' 60 &&
	  '$top/tests/fuzz/uapi-in-vm.sh' '$top/build/fuzz' 45 faults+client\""
[ "$tier" = production ] || echo "=== debug-kernel tier: $(( $(date +%s) - dbg_t0 ))s"

echo
echo "vm-tests: $pass passed, $fail failed"
for f in "${failed[@]}"; do echo "  failed: $f"; done
[ "$fail" = 0 ]
