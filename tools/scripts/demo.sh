#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# `make demo`: the stack from a fresh clone to a workload on an emulated
# card, told as a story.  Each build step is one line; its full output goes
# to build/logs/<step>.log, and a failing step prints the log's tail and
# path.  Then a VM with the emulated cards runs tools/scripts/demo-vm.sh
# (rbln-smi, a workload through librbln spread over the chiplets, two
# kselftests said in a sentence each, a process holding HBM), and a closing
# summary says which card, what ran, the result and the time.
#
# Settings come from the Makefile: CARDS, FAMILY, HBM, VMARGS, JOBS.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
logs="$top/build/logs"
mkdir -p "$logs"
cards=${CARDS:-1} family=${FAMILY:-rebel100} hbm=${HBM:-256M} jobs=${JOBS:-$(nproc)}
make=${MAKE:-make}
start=$(date +%s)

secs() { # a number of seconds, as "42 s" or "3 min 5 s"
	if [ "$1" -ge 60 ]; then echo "$(($1 / 60)) min $(($1 % 60)) s"; else echo "$1 s"; fi
}

times=()
step() { # number, what, log name, command...
	local n=$1 what=$2 name=$3 log="$logs/$3.log" t0 rc
	shift 3
	printf '[%s] %s ... ' "$n" "$what"
	t0=$(date +%s)
	"$@" > "$log" 2>&1
	rc=$?
	local t=$(($(date +%s) - t0))
	if [ "$rc" != 0 ]; then
		echo "FAILED (exit $rc)"
		echo
		tail -n 25 "$log" | sed 's/^/    /'
		echo
		echo "make demo: step $n failed; its full log: $log"
		exit "$rc"
	fi
	echo "ok ($(secs "$t"))"
	times+=("$name $(secs "$t")")
}

case $family in
atom) fam=ATOM ;;
*) fam=Rebel100 ;;
esac
plural=$([ "$cards" = 1 ] && echo card || echo cards)
echo "rbln demo: build the driver stack, start a VM with $cards emulated $fam $plural, and run"
echo "a workload on it through librbln.  Full logs: build/logs/."
echo
step 1/4 "Debian packages and the VM kernel (make deps)" deps \
	"$make" -C "$top" --no-print-directory deps
step 2/4 "rbln.ko, the kernel module, for Linux $(cat "$top/build/kver") (make kernel)" rbln.ko \
	"$make" -C "$top" --no-print-directory kernel
step 3/4 "librbln, rbln-smi, rbln-demo, rbln-emu and the tests (make userspace)" user-space \
	"$make" -C "$top" --no-print-directory userspace JOBS="$jobs"

echo "[4/4] a VM (QEMU) with $cards $fam $plural played by rbln-emu, rbln.ko loaded and bound:"
echo
t0=$(date +%s)
vmlog="$logs/vm.log"
# --keep: the run directory holds demo-vm.sh's logs and summary, which are
# copied to build/logs/vm/ below, then it goes.
# shellcheck disable=SC2086 # VMARGS is a list of options
"$top/tools/vm/rbln-vm" -q --keep --cards "$cards" --family "$family" --hbm "$hbm" ${VMARGS:-} -- \
	"$top/tools/scripts/demo-vm.sh" "$top/build/cmake" 2> "$vmlog"
rc=$?
vm_secs=$(($(date +%s) - t0))
run=$(sed -n 's/^rbln-vm: run directory kept: //p' "$vmlog" | tail -n 1)
rm -rf "$logs/vm"
if [ -n "$run" ] && [ -d "$run/results" ]; then
	cp -r "$run/results" "$logs/vm"
	rm -rf "$run"
fi

echo
echo "== summary"
facts="$logs/vm/summary"
if [ -f "$facts" ]; then
	while IFS=$'\t' read -r key value; do
		case $key in
		card) printf '  %-8s %s\n' card "$value" ;;
		ran) printf '  %-8s %s\n' ran "$value" ;;
		esac
	done < "$facts"
	checks=$(awk -F'\t' '$1 == "checks" { printf "%s%s", sep, $2; sep = ", " }' "$facts")
	[ -z "$checks" ] || printf '  %-8s %s\n' checked "kselftests $checks"
fi
if [ "$rc" = 0 ]; then
	printf '  %-8s %s\n' result "PASS"
else
	printf '  %-8s %s\n' result "FAIL (the VM step exited $rc)"
	grep -v '^rbln-vm: run directory kept' "$vmlog" | tail -n 20 | sed 's/^/    /'
fi
steps=$(IFS=,; echo "${times[*]}")
printf '  %-8s %s\n' time "${steps//,/, }; VM $(secs "$vm_secs"); total $(secs $(($(date +%s) - start)))"
echo "  logs     build/logs/: deps, rbln.ko, user-space and vm.log; vm/ from inside the VM"
exit "$rc"
