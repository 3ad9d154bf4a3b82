#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Inside the debug-kernel VM (tests/runner/failslab.sh starts it): the
# kselftests with kernel allocation failures injected, then probe's error
# unwinding, then the card must still work.
#
#   failslab-guest.sh KSFT_DIR SMI [PROBABILITY [PATTERN...]]
#   (PATTERNs: only the kselftest binaries whose name holds one of them)
#
# 1. failslab and fail_page_alloc fail PROBABILITY % (default 10) of the
#    allocations of tasks that have /proc/<pid>/make-it-fail set
#    (task-filter), sleeping ones too (ignore-gfp-wait=N), whatever their
#    order, made with rbln.ko's code on the stack (require-start/-end: its
#    text; every ioctl, mmap, io_uring command, open and close of an accel
#    file goes through it).  Not the tests' other allocations: the guest's
#    root is the host's over 9p, and a failed allocation in the 9p client
#    leaves the mount failing every later exec and read with EINVAL (seen
#    on the first try).  Not failed either: allocations with
#    rbln_hbm_alloc() on the stack (reject-start/-end): the kernel's buddy
#    allocator (6.12 gpu_buddy) frees a block still linked in its free tree
#    when split_block() fails and the next allocation walks freed memory
#    (kernel/README.md, "A bug in the kernel's buddy allocator").
# 2. Every kselftest binary runs with make-it-fail set (inherited by its
#    children), up to BIN_TIMEOUT s each.  Their verdicts do not count
#    (ioctls may fail with -ENOMEM); a binary still running at its timeout
#    is a hang and fails the run.  The count of injected failures is printed.
#    The binds the tests make (rbln_bind()) clear make-it-fail around the
#    write: the probe runs in the writing task, and a failure injected in
#    drm_sysfs_minor_alloc() crashes 6.12's DRM core (below; it took a
#    whole run down from rbln_removal_test).  The probe's unwinding is 3's.
# 3. Injection off; every card bound again (fault clear + bind); then
#    probe's unwinding: the N-th allocation under rbln.ko of the task that
#    writes the bind attribute fails (/proc/thread-self/fail-nth), for
#    N = 1 .. PROBE_FIRST one by one (every site of the probe's first
#    steps), then every PROBE_STRIDE-th N, until a bind runs without
#    reaching N.  A bind makes ~1100 allocations under rbln.ko on the debug
#    kernel (sysfs, debugfs, hwmon and DRM registration, rings, VM pools,
#    most of them in loops) and a failed one takes 5-20 s under KASAN, so
#    not every N is tried (one run of every N from 1 to 180 found nothing
#    beyond the DRM bug below).  Then a normal bind.  Not failed here: drm_sysfs_minor_alloc() (reject range), whose
#    failure makes 6.12's DRM core put_device() an ERR_PTR in
#    drm_minor_alloc_release() (a general protection fault; found by this
#    loop, kernel/README.md, kernel/patches/drm-minor-alloc-kdev-err-ptr.patch).
# 4. The cards work: plain jobs (rbln_submit_copy_test's fill and signal tests)
#    and rbln-smi -L lists every card.
# rbln-vm --debug-kernel --fault-injection checks the kernel log afterwards
# (allocation-failure reports and the known PAT WARN are told apart there).
set -u
ksft=${1:?usage: failslab-guest.sh KSFT_DIR SMI [PROBABILITY]}
smi=${2:?usage: failslab-guest.sh KSFT_DIR SMI [PROBABILITY]}
prob=${3:-10}
shift 3 2>/dev/null || shift $#
only=("$@")
dbg=/sys/kernel/debug
drv=/sys/bus/pci/drivers/rbln
BIN_TIMEOUT=${BIN_TIMEOUT:-300}
PROBE_FIRST=${PROBE_FIRST:-32}
PROBE_STRIDE=${PROBE_STRIDE:-32}
TIMES=100000000
fails=0

say() { echo "failslab: $*"; }
bad() {
	echo "failslab: FAILED: $*"
	fails=$((fails + 1))
}

for a in failslab fail_page_alloc; do
	[ -d "$dbg/$a" ] || { say "no $dbg/$a (CONFIG_FAILSLAB, CONFIG_FAIL_PAGE_ALLOC)"; exit 2; }
done

# The address range of rbln_hbm_alloc() in rbln.ko: from its symbol to the
# next one of the module.
range=$(grep '\[rbln\]$' /proc/kallsyms | sort |
	awk '$3 == "rbln_hbm_alloc" { s = $1; next } s != "" && $1 != s { print s, $1; exit }')
read -r hbm_start hbm_end <<< "$range"
[ -n "${hbm_start:-}" ] || { say "rbln_hbm_alloc not in /proc/kallsyms"; exit 2; }
# rbln.ko's text: its first function to a page past its last.
range=$(grep '\[rbln\]$' /proc/kallsyms | awk '$2 ~ /^[tT]$/ { print $1 }' | sort |
	awk 'NR == 1 { s = $1 } { e = $1 } END { print s, e }')
read -r mod_start mod_last <<< "$range"
mod_end=$(printf '%x' $((0x$mod_last + 4096)))

inject() { # probability
	local a
	for a in failslab fail_page_alloc; do
		echo "$1" > "$dbg/$a/probability"
		echo 1 > "$dbg/$a/interval"
		echo "$TIMES" > "$dbg/$a/times"
		echo 0 > "$dbg/$a/space"
		echo 0 > "$dbg/$a/verbose"
		echo Y > "$dbg/$a/task-filter"
		echo N > "$dbg/$a/ignore-gfp-wait"
		echo 64 > "$dbg/$a/stacktrace-depth"
		echo "0x$mod_start" > "$dbg/$a/require-start"
		echo "0x$mod_end" > "$dbg/$a/require-end"
		echo "0x$hbm_start" > "$dbg/$a/reject-start"
		echo "0x$hbm_end" > "$dbg/$a/reject-end"
	done
	echo N > "$dbg/fail_page_alloc/ignore-gfp-highmem"
	echo 0 > "$dbg/fail_page_alloc/min-order"
}
injected() { # failures injected since inject()
	echo $(( (TIMES - $(cat "$dbg/failslab/times")) + (TIMES - $(cat "$dbg/fail_page_alloc/times")) ))
}

rbln_functions() {
	local d
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/driver_override" 2>/dev/null)" = rbln ] && basename "$d"
	done
}
rebind_all() {
	local f i=0
	for f in $(rbln_functions); do
		# card i's emulator is the i-th function (tests/kselftest/README.md)
		if [ -e "/dev/virtio-ports/rbln-emu.$i" ]; then
			exec 3<>"/dev/virtio-ports/rbln-emu.$i" && {
				echo "fault clear" >&3
				read -r -t 5 _ <&3
				exec 3>&-
			}
		fi
		i=$((i + 1))
		[ -e "$drv/$f" ] && [ "$(cat "/sys/bus/pci/devices/$f/rbln/state" 2>/dev/null)" != ready ] &&
			echo "$f" > "$drv/unbind"
		[ -e "$drv/$f" ] || echo "$f" > "$drv/bind" || bad "bind $f after the injection"
	done
}

say "failing $prob % of the allocations of the test tasks (slab and pages, sleeping ones too)" \
	"made under rbln.ko (0x$mod_start-0x$mod_end); not under rbln_hbm_alloc (0x$hbm_start-0x$hbm_end): the kernel's buddy allocator" \
	"frees a linked block when split_block() fails (kernel/README.md)"

# ---- 2. the kselftests under injection
inject "$prob"
total=0
for t in "$ksft"/rbln_*_test; do
	[ -x "$t" ] || continue
	if [ ${#only[@]} -gt 0 ]; then
		keep=0
		for p in "${only[@]}"; do
			case $(basename "$t") in *"$p"*) keep=1 ;; esac
		done
		[ "$keep" = 1 ] || continue
	fi
	n0=$(injected)
	s0=$SECONDS
	timeout -s KILL "$BIN_TIMEOUT" bash -c 'echo 1 > /proc/self/make-it-fail && exec "$@"' _ "$t" \
		> "/tmp/failslab-$(basename "$t").log" 2>&1
	rc=$?
	n=$(( $(injected) - n0 ))
	total=$((total + n))
	if [ "$rc" = 137 ]; then
		bad "$(basename "$t") still running after ${BIN_TIMEOUT}s (a hang?); $n failures injected"
	else
		say "$(basename "$t"): exit $rc in $((SECONDS - s0))s, $n allocation failures injected," \
			"$(grep -c '^ok ' "/tmp/failslab-$(basename "$t").log") tests ok"
	fi
	# a test that died half way may have left its card unbound or faulted
	echo 0 > "$dbg/failslab/probability"
	echo 0 > "$dbg/fail_page_alloc/probability"
	rebind_all
	inject "$prob"
done
echo 0 > "$dbg/failslab/probability"
echo 0 > "$dbg/fail_page_alloc/probability"
say "kselftests: $total allocation failures injected in all"
[ "$total" -gt 0 ] || bad "no allocation failure was injected"
rebind_all

# ---- 3. probe's unwinding: fail the N-th allocation of the bind
f0=$(rbln_functions | head -n 1)
[ -n "$f0" ] || { bad "no PCI function with driver_override rbln for the probe loop"; exit 1; }
say "probe loop on $f0"
probe_fails=0
last=0
range=$(grep '\[drm\]$' /proc/kallsyms | sort |
	awk '$3 == "drm_sysfs_minor_alloc" { s = $1; next } s != "" && $1 != s { print s, $1; exit }')
read -r minor_start minor_end <<< "$range"
[ -n "${minor_start:-}" ] || { bad "drm_sysfs_minor_alloc not in /proc/kallsyms"; minor_start=0 minor_end=0; }
say "probe: not failing drm_sysfs_minor_alloc (0x$minor_start-0x$minor_end): 6.12's" \
	"drm_minor_alloc_release() then puts an ERR_PTR (kernel/README.md)"
for a in failslab fail_page_alloc; do
	echo 0 > "$dbg/$a/probability"	# fail-nth alone decides
	echo N > "$dbg/$a/task-filter"
	echo -1 > "$dbg/$a/times"
	echo "0x$minor_start" > "$dbg/$a/reject-start"
	echo "0x$minor_end" > "$dbg/$a/reject-end"
done
n=0 tried=0
while [ "$n" -lt 4000 ]; do
	if [ "$n" -lt "$PROBE_FIRST" ]; then
		n=$((n + 1))
	else
		n=$((n + PROBE_STRIDE))
	fi
	tried=$((tried + 1))
	[ -e "$drv/$f0" ] && echo "$f0" > "$drv/unbind"
	# One bash task: fail-nth applies to the task that writes the bind
	# attribute (the writes and the read are builtins of the same shell;
	# a child, such as cat, has its own fail-nth of 0).
	out=$(bash -c 'echo '"$n"' > /proc/thread-self/fail-nth &&
		{ echo '"$f0"' > '"$drv"'/bind; } 2>/dev/null; rc=$?
		read -r left < /proc/thread-self/fail-nth; echo "$rc $left"' 2>&1)
	read -r rc left <<< "$out"
	if [ "${rc:-1}" = 0 ] && [ "${left:-0}" != 0 ]; then
		last=$n
		break
	fi
	[ "${rc:-0}" != 0 ] && probe_fails=$((probe_fails + 1))
	[ "$tried" -le 3 ] && say "probe: N = $n: bind exit ${rc:-?}, fail-nth left ${left:-?} ($out)"
done
for a in failslab fail_page_alloc; do
	echo Y > "$dbg/$a/task-filter"
done
if [ "$last" = 0 ]; then
	bad "the bind still reached its N-th allocation at N = $n"
else
	say "probe: $tried binds with the N-th allocation under rbln.ko failed (N = 1..$PROBE_FIRST," \
		"then in steps of $PROBE_STRIDE): $probe_fails binds failed and unwound; the bind with" \
		"N = $last made fewer allocations and succeeded"
fi
[ -e "$drv/$f0" ] || echo "$f0" > "$drv/bind" || bad "normal bind of $f0 after the probe failures"

# ---- 4. the cards work
rebind_all
if "$ksft/rbln_submit_copy_test" -t fills_repeat_1_2_4_8_byte_patterns_little_endian \
	-t signal_stores_64_bit_values_and_packets_see_earlier_stores > /tmp/failslab-after.log 2>&1; then
	say "after the injection: plain jobs succeed (rbln_submit_copy_test: fills, signals)"
else
	bad "after the injection: rbln_submit_copy_test failed: $(tail -n 5 /tmp/failslab-after.log)"
fi
ncards=$("$smi" -L 2>/dev/null | grep -c '^NPU ')
[ "$ncards" = "${RBLN_VM_CARDS:-1}" ] || bad "rbln-smi -L lists $ncards cards, want ${RBLN_VM_CARDS:-1}"
[ "$fails" = 0 ] && say "passed" && exit 0
say "$fails check(s) failed"
exit 1
