# SPDX-License-Identifier: GPL-2.0
# The one entry point of rbln.  See README.md.
#
#   make               kernel module, librbln, tools and tests
#   make test          dependencies, lint, host unit tests, fuzzing, VM tests,
#                      VM tests on the debug kernel (KASAN, lockdep, kmemleak)
#   make test-debug    every VM step on the debug kernel
#   make torch         torch_rbln, the PyTorch backend (umd/torch) in build/torch
#   make test-torch    every torch_rbln pytest, in the VM (make test runs a part)
#   make bench-dist    torch.distributed's rbln backend vs gloo, DDP step (VM, 2 cards)
#   make soak SECONDS=N  the bounded soak, two cards (default 600 s; make test: 120)
#   make demo          deps, build, then rbln-smi + a workload in the VM (quiet)
#   make bench         benchmarks in the VM (BO create vs vgem, pinning vs mlock)
#   make bench-sqpoll  the submission rows with parallel vCPUs (SQPOLL needs them)
#   make bench-graph   graph upload designs (B0/B1/B2) against eager, in the VM
#   make fuzz          libFuzzer targets, ASan + UBSan (FUZZ_SECONDS per target)
#   make vm CMD="..."  run a command inside the VM with emulated cards
#   make dkms-install  dkms add/build/install for the VM kernel
#   make install       udev rule, rbln-smi and librbln (PREFIX=/usr/local)
#   make lint          checkpatch, W=1 C=1, clang-format, clang-tidy
#   make clean

SHELL   := /bin/bash
TOP     := $(CURDIR)
BUILD   := $(TOP)/build
CMAKE_B := $(BUILD)/cmake
TORCH_B := $(BUILD)/torch
KVER    ?= $(shell cat $(BUILD)/kver 2>/dev/null || \
             ls /boot | sed -n 's/^vmlinuz-\(6\.12\..*-amd64\)$$/\1/p' | sort -V | tail -n 1)
KDIR    ?= /lib/modules/$(KVER)/build
CARDS   ?= 1
FAMILY  ?= rebel100
HBM     ?= 256M
VMARGS  ?=
JOBS    ?= $(shell nproc)
PREFIX  ?= /usr/local

VM      := $(TOP)/tools/vm/rbln-vm
SMI     := $(CMAKE_B)/tools/rbln-smi/rbln-smi

.PHONY: all deps kernel userspace test demo bench bench-sqpoll bench-graph vm dkms-install install lint \
        lint-kernel lint-user test-host test-vm test-vm-debug test-debug fuzz clean help \
        torch test-torch bench-dist

all: kernel userspace

help:
	@sed -n '2,16p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@$(TOP)/tools/scripts/install-deps.sh >/dev/null

kernel:
	@test -n "$(KVER)" || { echo "no VM kernel: run tools/scripts/install-deps.sh"; exit 1; }
	$(MAKE) -C kernel KDIR=$(KDIR)

$(CMAKE_B)/CMakeCache.txt:
	cmake -S $(TOP) -B $(CMAKE_B) -G "Unix Makefiles" >/dev/null || \
		{ rm -f $@; exit 1; }

userspace: $(CMAKE_B)/CMakeCache.txt
	cmake --build $(CMAKE_B) -j$(JOBS)

# torch_rbln (umd/torch/README.md): its own CMake project, built against
# librbln's public headers and librbln.so only; prints its build time.
torch: userspace
	@t=$$(date +%s); \
	cmake -S $(TOP)/umd/torch -B $(TORCH_B) -DRBLN_INCLUDE_DIR=$(TOP)/umd/include \
		-DRBLN_LIBRARY=$(CMAKE_B)/umd/librbln.so >/dev/null && \
	cmake --build $(TORCH_B) -j$(JOBS) && \
	echo "torch_rbln: built in $$(( $$(date +%s) - t ))s"

# Every pytest of tests/torch in the VM (make test-vm runs the quick set).
test-torch: kernel torch
	$(TOP)/tests/torch/run-vm.sh all

# The rbln torch.distributed backend's all_reduce against gloo's, and a DDP
# step against one process's (tests/torch/README.md has the table).
bench-dist: kernel torch
	$(VM) -q --timeout 2400 --cards 2 -- bash -c "cd '$(TOP)/tests/torch' && \
		PYTHONPATH='$(TORCH_B)' PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 bench_dist.py"

lint: lint-kernel lint-user

lint-kernel:
	$(MAKE) -C kernel KDIR=$(KDIR) lint

lint-user: $(CMAKE_B)/CMakeCache.txt
	$(TOP)/tools/scripts/lint-user.sh $(CMAKE_B)

test-host: userspace
	ctest --test-dir $(CMAKE_B) --output-on-failure -j$(JOBS)

# tests/fuzz in its own clang build (build/fuzz); make test fuzzes each
# target for 30 s after its seeds.
fuzz:
	$(TOP)/tools/scripts/fuzz.sh

# Everything that needs the kernel module and the emulated card.
test-vm: kernel userspace torch
	$(TOP)/tools/scripts/test-vm.sh production

# The same on the debug kernel (tools/scripts/build-debug-kernel.sh, built
# once and cached): make test's subset, and test-debug's every step.
test-vm-debug: kernel userspace
	$(TOP)/tools/scripts/test-vm.sh debug

test-debug: kernel userspace
	$(TOP)/tools/scripts/test-vm.sh debug-full

# Each phase's wall time is printed (and summed at the end), to keep the
# whole run well inside CI's budget (30 minutes on 2 cores).  clang-tidy,
# the longest part of the lint, runs at nice 19 beside the build and the
# tests rather than before them: the VM runs single-threaded TCG and leaves
# a core mostly idle.  Its findings fail the run at the end; a failing phase
# stops it.  Its output: build/clang-tidy.log.  It runs in a session of its
# own (so that a failing phase can kill all of it), which the scheduler's
# autogroups weigh as the build's equal unless its autogroup is niced too.
test: deps $(CMAKE_B)/CMakeCache.txt
	@set -e; start=$$(date +%s); \
	t=$$(date +%s); $(MAKE) lint-kernel; \
	RBLN_LINT_TIDY=skip $(TOP)/tools/scripts/lint-user.sh $(CMAKE_B); \
	times=" lint $$(( $$(date +%s) - t ))s"; \
	log=$(BUILD)/clang-tidy.log; tidy_start=$$(date +%s); \
	RBLN_LINT_TIDY=only setsid -w sh -c 'echo 19 2>/dev/null > /proc/self/autogroup; \
		exec nice -n 19 "$$0" "$$1"' $(TOP)/tools/scripts/lint-user.sh \
		$(CMAKE_B) > $$log 2>&1 & tidy=$$!; \
	trap 'kill -- -'$$tidy' '$$tidy' 2>/dev/null' EXIT; \
	for phase in all torch test-host fuzz test-vm test-vm-debug; do \
		t=$$(date +%s); $(MAKE) $$phase; \
		times="$$times $$phase $$(( $$(date +%s) - t ))s"; \
	done; \
	t=$$(date +%s); rc=0; wait $$tidy || rc=$$?; trap - EXIT; cat $$log; \
	[ $$rc = 0 ] || { echo "make test: clang-tidy failed (rc $$rc)" >&2; exit 1; }; \
	times="$$times clang-tidy $$(( $$(date +%s) - tidy_start ))s (beside them; waited $$(( $$(date +%s) - t ))s for it)"; \
	echo "make test: passed in $$(( $$(date +%s) - start ))s (after deps):$$times"

# The story for a newcomer (tools/scripts/demo.sh): deps, the kernel module
# and user space one line each (logs in build/logs/), then the VM.
demo:
	@CARDS=$(CARDS) FAMILY=$(FAMILY) HBM=$(HBM) VMARGS="$(VMARGS)" JOBS=$(JOBS) \
		$(TOP)/tools/scripts/demo.sh

bench: deps
	$(MAKE) all
	$(VM) -q --cards $(CARDS) --family $(FAMILY) --hbm $(HBM) $(VMARGS) -- \
		$(TOP)/tests/bench/run.sh $(CMAKE_B)/tests/bench

# The submission rows again with the guest's vCPUs on host threads of their
# own (multi-threaded TCG): what an SQPOLL ring needs (tests/bench/README.md).
bench-sqpoll: deps
	$(MAKE) all
	RBLN_VM_TCG_THREAD=multi $(VM) -q --cards $(CARDS) --family $(FAMILY) --hbm $(HBM) \
		$(VMARGS) -- $(CMAKE_B)/tests/bench/rbln_submit_bench --only jobs

# Graph upload (tests/bench/README.md): a 277-node step replayed 40 times
# per step, B0 inline / B1 per-object / B2 retained / eager interleaved for
# ROUNDS rounds; ends with the "graph-bench:" line.
ROUNDS ?= 12
bench-graph: deps
	$(MAKE) all
	$(VM) -q --cards 1 --family $(FAMILY) --hbm $(HBM) $(VMARGS) -- \
		$(CMAKE_B)/tests/bench/rbln_graph_bench --rounds $(ROUNDS)

# The bounded soak (tests/soak/README.md): two cards, random librbln work
# checked against the CPU, rbln-smi in a loop and chiplet hangs, for
# SECONDS (make test runs 120 s of it in test-vm).
SECONDS ?= 600
.PHONY: soak
soak: deps
	$(MAKE) all
	$(TOP)/tests/soak/run.sh $(SECONDS)

vm: all
	$(VM) --cards $(CARDS) --family $(FAMILY) --hbm $(HBM) $(VMARGS) -- sh -c '$(CMD)'

dkms-install: kernel
	$(TOP)/kernel/dkms-install.sh $(KVER)

install: userspace
	install -D -m 0644 udev/70-rbln.rules /etc/udev/rules.d/70-rbln.rules
	install -D -m 0755 $(SMI) $(PREFIX)/bin/rbln-smi
	DESTDIR="$(DESTDIR)" cmake --install $(CMAKE_B) --prefix $(PREFIX)
	-command -v udevadm >/dev/null && udevadm control --reload-rules

clean:
	-$(MAKE) -C kernel KDIR=$(KDIR) clean
	rm -rf $(CMAKE_B) $(TORCH_B) $(BUILD)/vm $(BUILD)/vm-runs $(BUILD)/runner-warn $(BUILD)/fuzz
