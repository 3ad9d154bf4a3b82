#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Checks rbln-smi inside the rbln VM against what the VM runner started:
# RBLN_VM_CARDS cards of family RBLN_VM_FAMILY with RBLN_VM_HBM bytes of HBM
# per chiplet.
#
#   tests/vm/smi-check.sh [RBLN_SMI [RBLN_HOLD_HBM [RBLN_HOLD_BUSY]]]
#     (defaults build/cmake/tools/rbln-smi/rbln-smi,
#      build/cmake/tests/integration/rbln-hold-hbm, build/cmake/tests/integration/rbln-hold-busy)
#
# - the default view, -L and -j exit 0 and show every card, its family,
#   its chiplets and their HBM used / total; -j is valid JSON
#   (schema_version 2) whose memory figures match sysfs, with a Processes
#   section (empty as root before anything runs, nothing hidden);
# - once the module has GEM buffers (sysfs chiplet<i>/hbm_used_bytes): a
#   process holding an HBM buffer (rbln-hold-hbm, with a dup()ed fd and a
#   forked child sharing the client) is one row of the Processes section
#   under its PID with the buffer's size on the right chiplet, the chiplet's
#   used HBM grows by that size, nobody does not see it but counts it as
#   not inspected, and after it is killed the row and the bytes are gone;
# - utilisation (sysfs chiplet<i>/busy_ns): the default view has a Util
#   column and "util N %" per chiplet, -j the figures, sampled over at least
#   the default 100 ms; while rbln-hold-busy keeps the last chiplet of card
#   0 busy with back-to-back jobs, rbln-smi --interval-ms 500 shows that
#   chiplet (and the card) above 0 %, every other chiplet at 0 %, and the
#   helper's process row above 0 % on that chiplet only (fdinfo
#   drm-engine-chiplet<i>); nobody sees the chiplet busy too (sysfs is
#   world-readable); once the helper is stopped the chiplet is back at 0 %;
#   --no-util shows the counters but no figures;
# - operators: -i selects cards, --query prints CSV whose figures match
#   sysfs, --topo shows each card's PCI path as sysfs resolves it; -l 1
#   stopped by SIGINT (with the default disposition, as a Ctrl-C) exits 0
#   with whole samples only; --reset -i 0 (root): refused as nobody (5),
#   refused while rbln-hold-hbm holds the card (6, naming its PID), done
#   with --force (the holder lives on) and on the idle card, each counted
#   in card_resets with the card ready, and a job runs afterwards
#   (rbln-hold-busy completes jobs on it);
# - as an unprivileged user (no access to /dev/accel/*) rbln-smi still lists
#   the same cards from sysfs, and the card's sysfs and hwmon files are
#   readable; other users' processes are counted as not inspected;
# - a card that fell off the bus (emulator fault surprise-removal; root):
#   the driver unplugs it, -L lists the other cards and names it as
#   "gone: <bdf> (state unplugged ...)" (exit 4 if it was the only card);
#   fault clear + unbind + bind brings it back ready;
# - with every card unbound it exits 4 ("no device") and says so; the cards
#   are bound again afterwards, also when a check failed;
# - each run is timed; the figures are printed at the end, with the time
#   of /bin/true as the baseline of this VM.
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
smi=${1:-$top/build/cmake/tools/rbln-smi/rbln-smi}
hold=${2:-$top/build/cmake/tests/integration/rbln-hold-hbm}
hbusy=${3:-$top/build/cmake/tests/integration/rbln-hold-busy}
py=/usr/bin/python3
nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups --)

fails=0
timings=()
tmp=$(mktemp -d /tmp/smi-check.XXXXXX)

fail() {
	echo "not ok - $*"
	fails=$((fails + 1))
}

pass() {
	echo "ok - $*"
}

die() {
	echo "smi-check: $*" >&2
	exit 2
}

[ -x "$smi" ] || die "no rbln-smi at $smi (build it with cmake)"
[ -x "$py" ] || die "no $py"
[ "${RBLN_VM:-}" = 1 ] || die "run me inside the rbln VM (tools/vm/rbln-vm)"
cards=${RBLN_VM_CARDS:?RBLN_VM_CARDS unset}
family=${RBLN_VM_FAMILY:?RBLN_VM_FAMILY unset}
hbm=${RBLN_VM_HBM:?RBLN_VM_HBM unset}
case $family in
rebel100) chiplets=4 display=Rebel100 ;;
atom) chiplets=1 display=ATOM ;;
*) die "unknown RBLN_VM_FAMILY $family" ;;
esac

# The PCI functions bound to rbln, sorted (what sysfs says, not rbln-smi).
bound_bdfs() {
	local d
	for d in /sys/bus/pci/drivers/rbln/0000:*; do
		[ -e "$d" ] && basename "$d"
	done | sort
}

# run NAME OUTFILE CMD...: runs CMD, keeps stdout in OUTFILE and stderr in
# OUTFILE.err, records the time, returns the exit status.
run() {
	local name=$1 out=$2 t0 t1 rc
	shift 2
	t0=$(date +%s%N)
	"$@" >"$out" 2>"$out.err"
	rc=$?
	t1=$(date +%s%N)
	timings+=("$name $(((t1 - t0) / 1000000)) ms")
	return "$rc"
}

# Baseline for the timings: starting a trivial binary costs this much here
# (TCG and 9p make every exec slow; compare rbln-smi against it, not against
# times taken elsewhere).
run "baseline /bin/true" "$tmp/true" /bin/true

bdfs=$(bound_bdfs)
nbound=$(echo "$bdfs" | grep -c .)
[ "$nbound" = "$cards" ] || fail "sysfs: $nbound functions bound to rbln, RBLN_VM_CARDS=$cards"

# Does the module export the chiplets' memory counters (GEM buffers)?
memory=1
for b in $bdfs; do
	[ -e "/sys/bus/pci/devices/$b/rbln/chiplet0/hbm_used_bytes" ] || memory=0
done
[ "$memory" = 1 ] || echo "# note: rbln.ko has no chiplet<i>/hbm_used_bytes: memory checks expect N/A"
# ... and the chiplets' busy counters (utilisation)?
busy=1
for b in $bdfs; do
	[ -e "/sys/bus/pci/devices/$b/rbln/chiplet0/busy_ns" ] || busy=0
done
[ "$busy" = 1 ] || echo "# note: rbln.ko has no chiplet<i>/busy_ns: utilisation checks expect N/A"

# ---- the default view
if run "default" "$tmp/table" "$smi"; then
	ok=1
	for b in $bdfs; do
		grep -q "$b" "$tmp/table" || { fail "default view: no row for $b"; ok=0; }
	done
	n=$(grep -c "| $display " "$tmp/table")
	[ "$n" = "$cards" ] || { fail "default view: $n $display rows, want $cards"; ok=0; }
	grep -q "Driver (rbln.ko)" "$tmp/table" || { fail "default view: no driver version"; ok=0; }
	grep -q "| HBM used / total |" "$tmp/table" || { fail "default view: no HBM used / total column"; ok=0; }
	if [ "$memory" = 1 ]; then
		re='^\|  *\| chiplet [0-9]+: HBM [0-9]+ / [0-9]+ MiB, largest free [0-9]+ MiB'
	else
		re='^\|  *\| chiplet [0-9]+: HBM N/A / [0-9]+ MiB'
	fi
	n=$(grep -cE "$re" "$tmp/table")
	[ "$n" = $((cards * chiplets)) ] ||
		{ fail "default view: $n chiplet memory lines like '$re', want $((cards * chiplets))"; ok=0; }
	grep -qE '\| HBM used / total \| +Util \|' "$tmp/table" || { fail "default view: no Util column"; ok=0; }
	if [ "$busy" = 1 ]; then
		re='^\|  *\| chiplet [0-9]+: HBM .*, util [0-9]+ %'
	else
		re='^\|  *\| chiplet [0-9]+: HBM .*, util N/A'
	fi
	n=$(grep -cE "$re" "$tmp/table")
	[ "$n" = $((cards * chiplets)) ] ||
		{ fail "default view: $n chiplet lines like '$re', want $((cards * chiplets))"; ok=0; }
	grep -q '^| Processes ' "$tmp/table" || { fail "default view: no Processes section"; ok=0; }
	grep -q '^| No running processes found ' "$tmp/table" ||
		{ fail "default view: processes before any ran: $(grep -A4 '^| Processes' "$tmp/table")"; ok=0; }
	[ "$ok" = 1 ] && pass "default view lists $cards $display card(s), chiplet memory and utilisation, an empty Processes section"
else
	fail "default view: exit $? ($(head -c 300 "$tmp/table.err"))"
fi

# ---- -L: one line per card
if run "-L" "$tmp/list" "$smi" -L; then
	ok=1
	n=$(grep -c '^NPU [0-9]*: ' "$tmp/list")
	[ "$n" = "$cards" ] || { fail "-L: $n lines, want $cards"; ok=0; }
	if [ "$chiplets" = 1 ]; then want="$display (1 chiplet, "; else want="$display ($chiplets chiplets, "; fi
	n=$(grep -cF "$want" "$tmp/list")
	[ "$n" = "$cards" ] || { fail "-L: $n lines say '$want', want $cards"; ok=0; }
	for b in $bdfs; do
		grep -q " $b " "$tmp/list" || { fail "-L: no line for $b"; ok=0; }
	done
	[ "$ok" = 1 ] && pass "-L: one line per card"
else
	fail "-L: exit $? ($(head -c 300 "$tmp/list.err"))"
fi

# check_json FILE WHO: the JSON document describes the cards of the VM.
check_json() {
	# shellcheck disable=SC2016
	"$py" - "$1" "$2" "$cards" "$family" "$chiplets" "$hbm" "$bdfs" "$memory" "$busy" <<'EOF'
import json, os, sys

path, who, cards, family, chiplets, hbm, bdfs, memory, busy = sys.argv[1:10]
cards, chiplets, hbm, memory, busy = int(cards), int(chiplets), int(hbm), memory == "1", busy == "1"
bdfs = bdfs.split()
errors = []

def check(cond, msg):
    if not cond:
        errors.append(msg)

try:
    doc = json.load(open(path))
except ValueError as e:
    print(f"not ok - -j ({who}): not JSON: {e}")
    sys.exit(1)

check(doc.get("schema_version") == 2, f"schema_version {doc.get('schema_version')!r}")
check(doc.get("driver", {}).get("name") == "rbln", f"driver {doc.get('driver')!r}")
check(bool(doc.get("driver", {}).get("version")), "no driver version")
cs = doc.get("cards")
check(isinstance(cs, list), "no cards array")
cs = cs if isinstance(cs, list) else []
check(len(cs) == cards, f"{len(cs)} cards, want {cards}")
sample = doc.get("utilization_sample_ns")
# rbln-smi waits the default 100 ms from its first sample to its second.
check(isinstance(sample, int) and (sample >= 100000000 or not busy),
      f"utilization_sample_ns {sample!r}, want >= 100 ms")

def percent_ok(u):
    return isinstance(u, int) and 0 <= u <= 100 if busy else u is None
check(sorted(c.get("pci_bdf") for c in cs) == sorted(bdfs),
      f"BDFs {[c.get('pci_bdf') for c in cs]}, sysfs says {bdfs}")
check([c.get("index") for c in cs] == list(range(len(cs))),
      f"indices {[c.get('index') for c in cs]}")
for c in cs:
    n = c.get("pci_bdf")
    check(c.get("family") == family, f"{n}: family {c.get('family')!r}, want {family}")
    check(c.get("chiplet_count") == chiplets, f"{n}: chiplet_count {c.get('chiplet_count')}")
    ch = c.get("chiplets") or []
    check(len(ch) == chiplets, f"{n}: {len(ch)} chiplet entries")
    used_sum = 0
    for i, x in enumerate(ch):
        check(x.get("index") == i, f"{n}: chiplet {i} has index {x.get('index')}")
        check(x.get("hbm_total_bytes") == hbm,
              f"{n}: chiplet {i} HBM {x.get('hbm_total_bytes')}, want {hbm}")
        used, free = x.get("hbm_used_bytes"), x.get("hbm_largest_free_bytes")
        if not memory:
            check(used is None and free is None,
                  f"{n}: chiplet {i}: used {used!r}, free {free!r}: want null without sysfs files")
            continue
        s_used = int(open(f"/sys/bus/pci/devices/{n}/rbln/chiplet{i}/hbm_used_bytes").read())
        check(isinstance(used, int) and 0 <= used <= hbm,
              f"{n}: chiplet {i} hbm_used_bytes {used!r} outside 0..{hbm}")
        check(used == s_used, f"{n}: chiplet {i} hbm_used_bytes {used!r}, sysfs says {s_used}")
        check(isinstance(free, int) and isinstance(used, int) and 0 <= free <= hbm - used,
              f"{n}: chiplet {i} hbm_largest_free_bytes {free!r} with {used!r} of {hbm} used")
        used_sum += used if isinstance(used, int) else 0
    for i, x in enumerate(ch):
        b, u = x.get("busy_ns"), x.get("utilization_percent")
        if not busy:
            check(b is None and u is None, f"{n}: chiplet {i}: busy_ns {b!r}, "
                  f"utilization_percent {u!r}: want null without sysfs busy_ns")
            continue
        s_busy = int(open(f"/sys/bus/pci/devices/{n}/rbln/chiplet{i}/busy_ns").read())
        check(isinstance(b, int) and 0 <= b <= s_busy,
              f"{n}: chiplet {i} busy_ns {b!r}, sysfs says {s_busy} after it (it never goes back)")
        check(percent_ok(u), f"{n}: chiplet {i} utilization_percent {u!r}")
    check(percent_ok(c.get("utilization_percent")),
          f"{n}: utilization_percent {c.get('utilization_percent')!r}")
    cu = c.get("hbm_used_bytes")
    check(cu == (used_sum if memory else None),
          f"{n}: card hbm_used_bytes {cu!r}, its chiplets' sum {used_sum}")
    check(c.get("hbm_total_bytes") == hbm * chiplets,
          f"{n}: hbm_total_bytes {c.get('hbm_total_bytes')}, want {hbm * chiplets}")
    node = c.get("accel_node") or ""
    check(node.startswith("/dev/accel/accel") and os.path.exists(node), f"{n}: node {node!r}")
    check(str(c.get("fw_iface_version", "")).startswith("1."),
          f"{n}: fw_iface_version {c.get('fw_iface_version')!r}")
    check(bool(c.get("serial")), f"{n}: no serial")
    check(bool(c.get("fw_version")), f"{n}: no fw_version")
    check(bool(c.get("state")), f"{n}: no state")
    t = c.get("temperature_mc")
    check(isinstance(t, int) and 0 < t <= 110000, f"{n}: temperature_mc {t!r}")
    p = c.get("power_uw")
    check(isinstance(p, int) and 0 < p < 2000000000, f"{n}: power_uw {p!r}")

procs, hidden = doc.get("processes"), doc.get("processes_not_inspected")
check(isinstance(procs, list), f"processes {procs!r}, want a list")
if who == "root":
    # Nothing holds a card yet, and root can inspect every process.
    check(procs == [], f"processes before any ran: {procs!r}")
    check(hidden == 0, f"processes_not_inspected {hidden!r}, want 0 for root")
else:
    # init at least is another user's process.
    check(isinstance(hidden, int) and hidden >= 1,
          f"processes_not_inspected {hidden!r}, want >= 1 for {who}")

for e in errors:
    print(f"not ok - -j ({who}): {e}")
if errors:
    sys.exit(1)
print(f"ok - -j ({who}): valid JSON, {len(cs)} card(s) as started")
EOF
}

# ---- -j as root
if run "-j" "$tmp/json" "$smi" -j; then
	check_json "$tmp/json" root || fails=$((fails + 1))
else
	fail "-j: exit $? ($(head -c 300 "$tmp/json.err"))"
fi

# ---- a process holding an HBM buffer shows up in the Processes section
holder=
stop_holder() {
	if [ -n "$holder" ]; then
		kill "$holder" 2>/dev/null
		wait "$holder" 2>/dev/null
		holder=
	fi
}

# check_holder FILE WHO: FILE (rbln-smi -j while the holder runs) shows the
# buffer in card 0's used HBM; for root, one client under the holder's PID
# with the child as a second holder; for anyone else, no such row and at
# least the two processes counted as not inspected.
check_holder() {
	"$py" - "$1" "$2" "$hpid" "$hchild" "$hbytes" "$hchip" "$tmp/json" <<'EOF'
import json, sys

path, who, pid, child, size, chip, before = sys.argv[1:8]
pid, child, size, chip = int(pid), int(child), int(size), int(chip)
doc, base = json.load(open(path)), json.load(open(before))
errors = []

def check(cond, msg):
    if not cond:
        errors.append(msg)

c0, b0 = doc["cards"][0], base["cards"][0]
grown = c0["chiplets"][chip]["hbm_used_bytes"] - b0["chiplets"][chip]["hbm_used_bytes"]
check(grown == size, f"card 0 chiplet {chip}: hbm_used_bytes grew by {grown}, want {size}")
grown = c0["hbm_used_bytes"] - b0["hbm_used_bytes"]
check(grown == size, f"card 0: hbm_used_bytes grew by {grown}, want {size}")
procs = doc.get("processes") or []
mine = [p for p in procs if p.get("pid") in (pid, child)]
hidden = doc.get("processes_not_inspected")
if who == "root":
    check(len(mine) == 1, f"{len(mine)} rows for PIDs {pid} and {child}, want 1: {mine!r}")
    check(hidden == 0, f"processes_not_inspected {hidden!r}")
    for p in mine:
        check(p.get("pid") == pid, f"the row is under PID {p.get('pid')}, want the lowest, {pid}")
        check(p.get("name") == "rbln-hold-hbm", f"name {p.get('name')!r}")
        hp = [h.get("pid") for h in p.get("holders", [])]
        check(hp == [pid, child], f"holders {hp}, want [{pid}, {child}]")
        check(p.get("card_index") == 0, f"card_index {p.get('card_index')!r}, want 0")
        check(p.get("pci_bdf") == c0["pci_bdf"], f"pci_bdf {p.get('pci_bdf')!r}")
        hbm = p.get("hbm") or []
        check(len(hbm) == len(c0["chiplets"]), f"{len(hbm)} hbm entries")
        for h in hbm:
            want = size if h.get("chiplet") == chip else 0
            check(h.get("total_bytes") == want and h.get("resident_bytes") == want,
                  f"hbm{h.get('chiplet')}: total {h.get('total_bytes')!r}, "
                  f"resident {h.get('resident_bytes')!r}, want {want}")
        check(isinstance(p.get("client_id"), int), f"client_id {p.get('client_id')!r}")
        check(isinstance(p.get("asid"), int) and p["asid"] > 0, f"asid {p.get('asid')!r}")
        check(p.get("mmu_faults") == 0, f"mmu_faults {p.get('mmu_faults')!r}")
else:
    check(mine == [], f"{who} sees root's client: {mine!r}")
    check(isinstance(hidden, int) and hidden >= 2,
          f"processes_not_inspected {hidden!r}, want >= 2 (the holder and its child)")
for e in errors:
    print(f"not ok - holder, -j as {who}: {e}")
if errors:
    sys.exit(1)
if who == "root":
    print(f"ok - holder, -j as root: one client under PID {pid} (child {child} a holder), "
          f"{size} bytes on chiplet {chip}, card used HBM grew by as much")
else:
    print(f"ok - holder, -j as {who}: not shown, {hidden} processes not inspected")
EOF
}

if [ "$memory" != 1 ]; then
	echo "# skip - Processes section with an HBM buffer: rbln.ko has no GEM buffers yet"
elif [ ! -x "$hold" ]; then
	fail "no helper at $hold (build tests/integration)"
else
	trap stop_holder EXIT
	node0=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["cards"][0]["accel_node"])' \
		"$tmp/json")
	hchip=$((chiplets - 1)) # the last chiplet: on Rebel100 the column must be the right one
	"$hold" "$node0" $((4 << 20)) "$hchip" --fork >"$tmp/hold.out" 2>"$tmp/hold.err" &
	holder=$!
	for _ in $(seq 300); do
		grep -q '^ready ' "$tmp/hold.out" && break
		kill -0 "$holder" 2>/dev/null || break
		sleep 0.1
	done
	line=$(grep '^ready ' "$tmp/hold.out")
	if [ -z "$line" ]; then
		fail "rbln-hold-hbm $node0: not ready ($(head -c 300 "$tmp/hold.err"))"
		stop_holder
	else
		echo "# rbln-hold-hbm: $line"
		hpid=$(echo "$line" | sed -n 's/.* pid=\([0-9]*\).*/\1/p')
		hchild=$(echo "$line" | sed -n 's/.* child=\([0-9]*\).*/\1/p')
		hbytes=$(echo "$line" | sed -n 's/.* size=\([0-9]*\).*/\1/p')
		[ "$hpid" = "$holder" ] || fail "rbln-hold-hbm says it is PID $hpid, started as $holder"

		if run "-j with a holder" "$tmp/json-hold" "$smi" -j; then
			check_holder "$tmp/json-hold" root || fails=$((fails + 1))
		else
			fail "-j with a holder: exit $? ($(head -c 300 "$tmp/json-hold.err"))"
		fi

		if run "default with a holder" "$tmp/table-hold" "$smi"; then
			ok=1
			procs=$(sed -n '/^| Processes /,$p' "$tmp/table-hold")
			mib=$((hbytes >> 20))
			echo "$procs" | grep -qE "^\| +$hpid  rbln-hold-hbm +0 .* $mib MiB " ||
				{ fail "table: no row for PID $hpid with $mib MiB: $procs"; ok=0; }
			echo "$procs" | grep -q "also held by PID $hchild (rbln-hold-hbm)" ||
				{ fail "table: child $hchild not listed as another holder: $procs"; ok=0; }
			! echo "$procs" | grep -qE "^\| +$hchild  " ||
				{ fail "table: child $hchild has a row of its own (one client counted twice)"; ok=0; }
			[ "$ok" = 1 ] && pass "table: PID $hpid holds $mib MiB on chiplet $hchip, child $hchild listed under it"
		else
			fail "default with a holder: exit $? ($(head -c 300 "$tmp/table-hold.err"))"
		fi

		if run "-j as nobody with a holder" "$tmp/json-hold-nobody" "${nobody[@]}" "$smi" -j; then
			check_holder "$tmp/json-hold-nobody" nobody || fails=$((fails + 1))
		else
			fail "-j as nobody with a holder: exit $? ($(head -c 300 "$tmp/json-hold-nobody.err"))"
		fi
		if run "default as nobody with a holder" "$tmp/table-hold-nobody" "${nobody[@]}" "$smi"; then
			msg=$(grep -oE '^\| [0-9]+ processes could not be inspected \(permission denied; run as root\)' \
				"$tmp/table-hold-nobody")
			if [ -n "$msg" ] && ! grep -qE "^\| +$hpid  " "$tmp/table-hold-nobody"; then
				pass "table as nobody: the holder is not shown; '${msg#| }'"
			else
				fail "table as nobody: $(sed -n '/^| Processes /,$p' "$tmp/table-hold-nobody")"
			fi
		else
			fail "default as nobody with a holder: exit $?"
		fi

		stop_holder
		if run "-j after the holder" "$tmp/json-after" "$smi" -j &&
			"$py" - "$tmp/json-after" "$tmp/json" <<'EOF'; then
import json, sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])

def used(d):
    return [[c["hbm_used_bytes"] for c in card["chiplets"]] for card in d["cards"]]

if a["processes"] != [] or used(a) != used(b):
    print(f"# after: processes {a['processes']!r}, used {used(a)}; before: used {used(b)}")
    sys.exit(1)
EOF
			pass "after the holder is killed: no processes, HBM used as before"
		else
			fail "after the holder is killed: a row or its HBM bytes remain"
		fi
	fi
	trap - EXIT
fi

# ---- utilisation under load: rbln-hold-busy keeps one chiplet's ring busy
interval=500 # ms: several of the helper's 20 ms jobs complete in every sample
busy_pid=
stop_busy() {
	if [ -n "$busy_pid" ]; then
		kill "$busy_pid" 2>/dev/null
		wait "$busy_pid"
		busy_rc=$?
		busy_pid=
	fi
}

# check_busy FILE WHO: FILE (rbln-smi -j --interval-ms $interval while the
# helper runs) shows card 0's chiplet $bchip above 0 % and busier than
# before, every other chiplet at 0 %; for root also the helper's row, busy
# on $bchip only.
check_busy() {
	"$py" - "$1" "$2" "$bpid" "$bchip" "$interval" "$tmp/busy-before" <<'EOF'
import json, sys

path, who, pid, chip, interval, before = sys.argv[1:7]
pid, chip, interval = int(pid), int(chip), int(interval)
doc = json.load(open(path))
before = [int(x) for x in open(before).read().split()]
errors = []

def check(cond, msg):
    if not cond:
        errors.append(msg)

s = doc.get("utilization_sample_ns")
check(isinstance(s, int) and s >= interval * 1000000,
      f"utilization_sample_ns {s!r}, want >= {interval} ms")
figures = []
for ci, card in enumerate(doc["cards"]):
    for x in card["chiplets"]:
        i, u = x["index"], x.get("utilization_percent")
        figures.append(f"{ci}.{i}={u}")
        if ci == 0 and i == chip:
            check(isinstance(u, int) and 0 < u <= 100,
                  f"card 0 chiplet {i} (busy): utilization_percent {u!r}, want 1..100")
            b = x.get("busy_ns")
            check(isinstance(b, int) and b > before[i],
                  f"card 0 chiplet {i}: busy_ns {b!r}, {before[i]} before the helper started")
        else:
            check(u == 0, f"card {ci} chiplet {i} (idle): utilization_percent {u!r}, want 0")
cu = doc["cards"][0].get("utilization_percent")
check(isinstance(cu, int) and 0 < cu <= 100, f"card 0: utilization_percent {cu!r}, want 1..100")
if who == "root":
    mine = [p for p in doc.get("processes") or [] if p.get("pid") == pid]
    check(len(mine) == 1, f"{len(mine)} rows for the helper's PID {pid}")
    for p in mine:
        eng = p.get("engines") or []
        check(len(eng) == len(doc["cards"][0]["chiplets"]), f"{len(eng)} engines entries")
        for e in eng:
            u = e.get("utilization_percent")
            figures.append(f"pid{pid}.{e.get('chiplet')}={u}")
            if e.get("chiplet") == chip:
                check(isinstance(u, int) and 0 < u <= 100,
                      f"helper engine {chip}: utilization_percent {u!r}, want 1..100")
                check(isinstance(e.get("busy_ns"), int) and e["busy_ns"] > 0,
                      f"helper engine {chip}: busy_ns {e.get('busy_ns')!r}")
            else:
                check(u == 0 and e.get("busy_ns") == 0,
                      f"helper engine {e.get('chiplet')}: {u!r} % / {e.get('busy_ns')!r} ns, want 0")
for e in errors:
    print(f"not ok - under load, -j as {who}: {e}")
if errors:
    sys.exit(1)
print(f"ok - under load, -j as {who}: sampled {s / 1e6:.1f} ms, " + " ".join(figures))
EOF
}

if [ "$busy" != 1 ]; then
	echo "# skip - utilisation under load: rbln.ko has no chiplet<i>/busy_ns"
elif [ ! -x "$hbusy" ]; then
	fail "no helper at $hbusy (build tests/integration)"
else
	trap stop_busy EXIT
	node0=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["cards"][0]["accel_node"])' \
		"$tmp/json")
	bdf0=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["cards"][0]["pci_bdf"])' \
		"$tmp/json")
	bchip=$((chiplets - 1)) # the last chiplet: the figure must be in the right place
	for ((i = 0; i < chiplets; i++)); do
		cat "/sys/bus/pci/devices/$bdf0/rbln/chiplet$i/busy_ns"
	done >"$tmp/busy-before"
	"$hbusy" "$node0" "$bchip" 20 >"$tmp/busy.out" 2>"$tmp/busy.err" &
	busy_pid=$!
	for _ in $(seq 300); do
		grep -q '^ready ' "$tmp/busy.out" && break
		kill -0 "$busy_pid" 2>/dev/null || break
		sleep 0.1
	done
	line=$(grep '^ready ' "$tmp/busy.out")
	if [ -z "$line" ]; then
		fail "rbln-hold-busy $node0 $bchip: not ready ($(head -c 300 "$tmp/busy.err"))"
		stop_busy
	else
		echo "# rbln-hold-busy: $line"
		bpid=$busy_pid
		if run "-j --interval-ms $interval under load" "$tmp/json-busy" "$smi" -j --interval-ms "$interval"; then
			check_busy "$tmp/json-busy" root || fails=$((fails + 1))
		else
			fail "-j under load: exit $? ($(head -c 300 "$tmp/json-busy.err"))"
		fi

		if run "default --interval-ms $interval under load" "$tmp/table-busy" "$smi" --interval-ms "$interval"; then
			ok=1
			# card 0's chiplet lines come first
			u=$(grep -m1 -E "^\|  *\| chiplet $bchip: " "$tmp/table-busy" | sed -nE 's/.*, util ([0-9]+) %.*/\1/p')
			if [ -z "$u" ] || [ "$u" -le 0 ]; then
				fail "table under load: chiplet $bchip: util '$u', want > 0: $(grep -m1 "chiplet $bchip: " "$tmp/table-busy")"
				ok=0
			fi
			row=$(grep -E "^\| +$bpid  rbln-hold-busy " "$tmp/table-busy")
			# (no process substitution: the VM has no /dev/fd)
			read -ra pct <<<"$(echo "$row" | grep -oE '[0-9]+ %' | grep -oE '^[0-9]+' | tr '\n' ' ')"
			if [ "${#pct[@]}" != "$chiplets" ] || [ "${pct[$bchip]:-0}" -le 0 ]; then
				fail "table under load: helper row '$row': want $chiplets Util figures, #$bchip > 0"
				ok=0
			fi
			[ "$ok" = 1 ] && pass "table under load: chiplet $bchip util $u %, PID $bpid's Util$bchip ${pct[$bchip]} %"
		else
			fail "default under load: exit $? ($(head -c 300 "$tmp/table-busy.err"))"
		fi

		if run "-j as nobody under load" "$tmp/json-busy-nobody" "${nobody[@]}" "$smi" -j --interval-ms "$interval"; then
			check_busy "$tmp/json-busy-nobody" nobody || fails=$((fails + 1))
		else
			fail "-j as nobody under load: exit $? ($(head -c 300 "$tmp/json-busy-nobody.err"))"
		fi

		stop_busy
		trap - EXIT
		jobs_done=$(sed -n 's/^done jobs=\([0-9]*\)$/\1/p' "$tmp/busy.out")
		if [ "$busy_rc" = 0 ] && [ -n "$jobs_done" ] && [ "$jobs_done" -gt 0 ]; then
			pass "rbln-hold-busy ran $jobs_done jobs and exited cleanly"
		else
			fail "rbln-hold-busy: exit $busy_rc, '$(tail -n1 "$tmp/busy.out")' ($(head -c 300 "$tmp/busy.err"))"
		fi
		# Idle again: the chiplet that was busy is back at 0 %.
		if run "-j --interval-ms 300 after the load" "$tmp/json-idle" "$smi" -j --interval-ms 300 &&
			"$py" - "$tmp/json-idle" "$bchip" <<'EOF'; then
import json, sys

doc, chip = json.load(open(sys.argv[1])), int(sys.argv[2])
u = doc["cards"][0]["chiplets"][chip]["utilization_percent"]
if u != 0:
    print(f"# after the load: card 0 chiplet {chip} utilization_percent {u!r}")
    sys.exit(1)
EOF
			pass "after the load: chiplet $bchip back at 0 %"
		else
			fail "after the load: chiplet $bchip not at 0 % ($(head -c 300 "$tmp/json-idle.err"))"
		fi
	fi
fi

# ---- --no-util: the counters, no figures, no Util column
if run "-j --no-util" "$tmp/json-noutil" "$smi" -j --no-util &&
	"$py" - "$tmp/json-noutil" "$busy" <<'EOF'; then
import json, sys

doc, busy = json.load(open(sys.argv[1])), sys.argv[2] == "1"
bad = []
if doc.get("utilization_sample_ns") is not None:
    bad.append(f"utilization_sample_ns {doc.get('utilization_sample_ns')!r}")
for c in doc["cards"]:
    if c.get("utilization_percent") is not None:
        bad.append(f"{c['pci_bdf']}: utilization_percent {c.get('utilization_percent')!r}")
    for x in c["chiplets"]:
        if x.get("utilization_percent") is not None or isinstance(x.get("busy_ns"), int) != busy:
            bad.append(f"{c['pci_bdf']} chiplet {x['index']}: {x.get('busy_ns')!r} ns, "
                       f"{x.get('utilization_percent')!r} %")
if bad:
    print(f"# --no-util: {bad}")
    sys.exit(1)
EOF
	if run "default --no-util" "$tmp/table-noutil" "$smi" --no-util && ! grep -qi util "$tmp/table-noutil"; then
		pass "--no-util: counters in -j, no utilisation figures, no Util column"
	else
		fail "--no-util: the table still shows utilisation: $(grep -i -m2 util "$tmp/table-noutil")"
	fi
else
	fail "--no-util: -j has utilisation figures or lacks the counters"
fi

# ---- as nobody: no access to the node, sysfs and hwmon suffice
for b in $bdfs; do
	for n in /sys/class/accel/accel*; do
		[ "$(basename "$(readlink -f "$n/device")")" = "$b" ] || continue
		node=/dev/accel/$(basename "$n")
		if "${nobody[@]}" sh -c "exec 3<>$node" 2>/dev/null; then
			echo "# note: nobody can open $node (mode $(stat -c %a "$node")); the sysfs path is not exercised"
		fi
	done
	ok=1
	files="family chiplet_count hbm_total_bytes fw_version fw_iface_version serial state"
	[ "$memory" = 1 ] && files="$files chiplet0/hbm_used_bytes chiplet0/hbm_largest_free_bytes"
	for f in $files; do
		v=$("${nobody[@]}" cat "/sys/bus/pci/devices/$b/rbln/$f" 2>&1) ||
			{ fail "nobody: cannot read $b/rbln/$f: $v"; ok=0; }
	done
	hw=
	for h in "/sys/bus/pci/devices/$b"/hwmon/hwmon*; do
		[ "$(cat "$h/name" 2>/dev/null)" = rbln ] && hw=$h
	done
	if [ -z "$hw" ]; then
		fail "$b: no hwmon device named rbln"
		ok=0
	else
		t=$("${nobody[@]}" cat "$hw/temp1_input" 2>&1)
		if ! [[ "$t" =~ ^[0-9]+$ ]] || [ "$t" -le 0 ] || [ "$t" -gt 110000 ]; then
			fail "nobody: $hw/temp1_input: '$t'"
			ok=0
		fi
		p=$("${nobody[@]}" cat "$hw/power1_input" 2>&1)
		[[ "$p" =~ ^[0-9]+$ ]] || { fail "nobody: $hw/power1_input: '$p'"; ok=0; }
	fi
	[ "$ok" = 1 ] && pass "nobody reads the sysfs and hwmon of $b"
done

if run "-j as nobody" "$tmp/json-nobody" "${nobody[@]}" "$smi" -j; then
	check_json "$tmp/json-nobody" nobody || fails=$((fails + 1))
	# the same cards, as far as sysfs tells
	"$py" - "$tmp/json" "$tmp/json-nobody" <<'EOF' || fails=$((fails + 1))
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ("index", "family", "pci_bdf", "chiplet_count", "hbm_total_bytes", "chiplets",
        "fw_version", "fw_iface_version", "serial")
# busy_ns and utilization_percent are read at each run: not compared
moving = ("busy_ns", "utilization_percent")

def same(k, x):
    if k != "chiplets":
        return x
    return [{kk: v for kk, v in ch.items() if kk not in moving} for ch in x or []]

bad = [(ca.get("pci_bdf"), k) for ca, cb in zip(a["cards"], b["cards"]) for k in keys
       if same(k, ca.get(k)) != same(k, cb.get(k))]
if bad or len(a["cards"]) != len(b["cards"]):
    print(f"not ok - nobody sees other cards than root: {bad}")
    sys.exit(1)
print("ok - nobody sees the same cards as root")
EOF
else
	fail "-j as nobody: exit $? ($(head -c 300 "$tmp/json-nobody.err"))"
fi
if run "-L as nobody" "$tmp/list-nobody" "${nobody[@]}" "$smi" -L; then
	n=$(grep -c '^NPU [0-9]*: ' "$tmp/list-nobody")
	if [ "$n" = "$cards" ]; then
		pass "-L as nobody: $n card(s)"
	else
		fail "-L as nobody: $n lines, want $cards"
	fi
else
	fail "-L as nobody: exit $? ($(head -c 300 "$tmp/list-nobody.err"))"
fi

# ---- operators: -i, --query, --topo
want=$("$py" - "$tmp/json" <<'EOF'
import json, sys
for c in json.load(open(sys.argv[1]))["cards"]:
    print(f'{c["index"]},{c["pci_bdf"]},{c["hbm_total_bytes"] >> 20},ready,0')
EOF
)
if run "--query" "$tmp/query" "$smi" --query=index,pci_bdf,hbm_total,state,open_files \
	--format=csv,noheader,nounits && [ "$(cat "$tmp/query")" = "$want" ]; then
	pass "--query: $(tr '\n' ' ' <"$tmp/query")"
else
	fail "--query: '$(cat "$tmp/query")' want '$want' ($(head -c 300 "$tmp/query.err"))"
fi
last=$((cards - 1))
lastbdf=$(echo "$want" | sed -n "${cards}p" | cut -d, -f2)
if run "-L -i $last" "$tmp/list-i" "$smi" -L -i "$last" &&
	[ "$(grep -c '^NPU ' "$tmp/list-i")" = 1 ] && grep -q "^NPU $last: .* $lastbdf " "$tmp/list-i"; then
	pass "-i $last: only NPU $last ($lastbdf)"
else
	fail "-i $last: $(cat "$tmp/list-i" "$tmp/list-i.err")"
fi
if run "--topo" "$tmp/topo" "$smi" --topo; then
	ok=1
	for b in $bdfs; do
		path=$(realpath --relative-to=/sys/devices "/sys/bus/pci/devices/$b" | sed 's|/| > |g')
		grep -qxF "  PCI path   $path" "$tmp/topo" || { fail "--topo: no '  PCI path   $path'"; ok=0; }
	done
	if [ "$cards" -gt 1 ]; then
		grep -q '^Connections:' "$tmp/topo" || { fail "--topo: no connection matrix"; ok=0; }
	fi
	[ "$ok" = 1 ] && pass "--topo: the PCI path of every card"
else
	fail "--topo: exit $? ($(head -c 300 "$tmp/topo.err"))"
fi

# ---- -l until SIGINT: whole samples, exit 0
set -m # job control: the background job does not ignore SIGINT, as under a terminal
"$smi" -l 1 --query=index,state --format=csv >"$tmp/loop" 2>"$tmp/loop.err" &
lpid=$!
set +m
for _ in $(seq 300); do
	[ "$(grep -c . "$tmp/loop")" -ge $((1 + 2 * cards)) ] && break
	sleep 0.1
done
t0=$(date +%s%N)
kill -INT "$lpid"
wait "$lpid"
lrc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
lines=$(grep -c . "$tmp/loop")
bad=$(grep -cvE '^(index,state|[0-9]+,ready)$' "$tmp/loop")
if [ "$lrc" = 0 ] && [ "$lines" -ge $((1 + 2 * cards)) ] && [ $(((lines - 1) % cards)) = 0 ] &&
	[ "$bad" = 0 ] && [ "$(head -n1 "$tmp/loop")" = "index,state" ] && [ ! -s "$tmp/loop.err" ]; then
	pass "-l 1 stopped by SIGINT after $ms ms: exit 0, $(((lines - 1) / cards)) whole samples"
else
	fail "-l 1 and SIGINT: exit $lrc, $lines lines ($bad malformed): $(head -c 300 "$tmp/loop") $(head -c 300 "$tmp/loop.err")"
fi

# ---- --reset (root): refused as nobody and while held, --force, idle; the card works after
node0=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["cards"][0]["accel_node"])' "$tmp/json")
bdf0=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["cards"][0]["pci_bdf"])' "$tmp/json")
rdir=/sys/bus/pci/devices/$bdf0/rbln
reset_holder=
stop_reset_holder() {
	if [ -n "$reset_holder" ]; then
		kill "$reset_holder" 2>/dev/null
		wait "$reset_holder" 2>/dev/null
		reset_holder=
	fi
}
if [ "$(id -u)" != 0 ]; then
	echo "# skip - --reset: not root"
elif [ ! -e "$rdir/reset" ]; then
	fail "--reset: rbln.ko has no $rdir/reset"
elif [ ! -x "$hold" ] || [ ! -x "$hbusy" ]; then
	fail "--reset: no helpers at $hold / $hbusy (build tests/integration)"
else
	r0=$(cat "$rdir/card_resets")
	run "--reset as nobody" "$tmp/reset-nobody" "${nobody[@]}" "$smi" --reset -i 0
	rc=$?
	if [ "$rc" = 5 ] && grep -q 'needs root' "$tmp/reset-nobody.err" && [ "$(cat "$rdir/card_resets")" = "$r0" ]; then
		pass "--reset as nobody: exit 5, nothing reset"
	else
		fail "--reset as nobody: exit $rc, card_resets $(cat "$rdir/card_resets") (was $r0): $(head -c 300 "$tmp/reset-nobody.err")"
	fi

	trap stop_reset_holder EXIT
	"$hold" "$node0" $((1 << 20)) 0 >"$tmp/rhold.out" 2>"$tmp/rhold.err" &
	reset_holder=$!
	for _ in $(seq 300); do
		grep -q '^ready ' "$tmp/rhold.out" && break
		kill -0 "$reset_holder" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q '^ready ' "$tmp/rhold.out"; then
		fail "rbln-hold-hbm $node0 for --reset: not ready ($(head -c 300 "$tmp/rhold.err"))"
	else
		run "--reset with a holder" "$tmp/reset-held" "$smi" --reset -i 0
		rc=$?
		if [ "$rc" = 6 ] && grep -q "is in use: PID $reset_holder (rbln-hold-hbm)" "$tmp/reset-held.err" &&
			[ "$(cat "$rdir/card_resets")" = "$r0" ]; then
			pass "--reset while PID $reset_holder holds NPU 0: refused (exit 6), nothing reset"
		else
			fail "--reset with a holder: exit $rc, card_resets $(cat "$rdir/card_resets") (was $r0): $(head -c 400 "$tmp/reset-held.err")"
		fi
		run "--reset --force with a holder" "$tmp/reset-force" "$smi" --reset --force -i 0
		rc=$?
		if [ "$rc" = 0 ] && [ "$(cat "$rdir/card_resets")" = $((r0 + 1)) ] &&
			[ "$(cat "$rdir/state")" = ready ] && kill -0 "$reset_holder" 2>/dev/null &&
			grep -q "reset, card_resets $((r0 + 1))" "$tmp/reset-force"; then
			pass "--reset --force: NPU 0 reset while held (card_resets $((r0 + 1)), ready, the holder lives on)"
		else
			fail "--reset --force: exit $rc, card_resets $(cat "$rdir/card_resets") (was $r0), state $(cat "$rdir/state"): $(cat "$tmp/reset-force") $(head -c 300 "$tmp/reset-force.err")"
		fi
	fi
	stop_reset_holder
	trap - EXIT

	r1=$(cat "$rdir/card_resets")
	run "--reset idle" "$tmp/reset-idle" "$smi" --reset -i 0
	rc=$?
	r2=$(cat "$rdir/card_resets")
	if [ "$rc" = 0 ] && [ "$r2" = $((r1 + 1)) ] && [ "$(cat "$rdir/state")" = ready ] &&
		[ "$(cat "$tmp/reset-idle")" = "NPU 0 ($bdf0): reset, card_resets $r2" ]; then
		pass "--reset -i 0: $(cat "$tmp/reset-idle") (was $r1)"
	else
		fail "--reset -i 0: exit $rc, '$(cat "$tmp/reset-idle")', card_resets $r2 (was $r1): $(head -c 300 "$tmp/reset-idle.err")"
	fi
	# the card runs jobs after the reset
	"$hbusy" "$node0" 0 20 >"$tmp/rbusy.out" 2>"$tmp/rbusy.err" &
	rbusy=$!
	for _ in $(seq 300); do
		grep -q '^ready ' "$tmp/rbusy.out" && break
		kill -0 "$rbusy" 2>/dev/null || break
		sleep 0.1
	done
	sleep 0.5
	kill "$rbusy" 2>/dev/null
	wait "$rbusy"
	rc=$?
	jobs_done=$(sed -n 's/^done jobs=\([0-9]*\)$/\1/p' "$tmp/rbusy.out")
	if [ "$rc" = 0 ] && [ -n "$jobs_done" ] && [ "$jobs_done" -gt 0 ]; then
		pass "after the resets NPU 0 runs jobs ($jobs_done)"
	else
		fail "after the resets: rbln-hold-busy exit $rc, '$(tail -n1 "$tmp/rbusy.out")' ($(head -c 300 "$tmp/rbusy.err"))"
	fi
fi

# ---- a card that fell off the bus (emulator surprise-removal): gone
emu_cmd() { # card, command: the emulator's one-line reply
	local reply=""
	exec 3<>"/dev/virtio-ports/rbln-emu.$1" || return 1
	printf '%s\n' "$2" >&3
	read -r -t 10 reply <&3
	exec 3>&-
	echo "$reply"
	case $reply in ok*) return 0 ;; *) return 1 ;; esac
}
if [ "$(id -u)" = 0 ] && [ -e /dev/virtio-ports/rbln-emu.0 ]; then
	b0=$(echo "$bdfs" | head -n1)
	replug() {
		emu_cmd 0 "fault clear" >/dev/null
		echo "$b0" >/sys/bus/pci/drivers/rbln/unbind 2>/dev/null
		echo "$b0" >/sys/bus/pci/drivers/rbln/bind
	}
	trap replug EXIT
	reply=$(emu_cmd 0 "fault surprise-removal") || fail "emulator: fault surprise-removal: '$reply'"
	state=""
	for _ in $(seq 100); do
		state=$(cat "/sys/bus/pci/devices/$b0/rbln/state" 2>/dev/null)
		[ "$state" = unplugged ] && break
		sleep 0.1
	done
	[ "$state" = unplugged ] || fail "card 0 gone: sysfs state '$state' after 10 s, want unplugged"
	run "-L with card 0 gone" "$tmp/gone" "$smi" -L
	rc=$?
	want=0
	[ "$cards" = 1 ] && want=4
	if [ "$rc" = "$want" ] && grep -q "^gone: $b0 (state unplugged" "$tmp/gone" "$tmp/gone.err" &&
		[ "$(grep -c '^NPU ' "$tmp/gone")" = $((cards - 1)) ]; then
		pass "card 0 gone: rbln-smi -L exit $rc names it ($(grep -h "^gone: " "$tmp/gone" "$tmp/gone.err"))"
	else
		fail "card 0 gone: rbln-smi -L exit $rc (want $want), '$(head -c 300 "$tmp/gone")' '$(head -c 300 "$tmp/gone.err")'"
	fi
	replug
	trap - EXIT
	sleep 0.2
	[ "$(bound_bdfs)" = "$bdfs" ] || fail "card 0 not bound again after the replug: $(bound_bdfs | tr '\n' ' ')"
	if [ "$(cat "/sys/bus/pci/devices/$b0/rbln/state" 2>/dev/null)" = ready ]; then
		pass "card 0 ready again after fault clear + rebind"
	else
		fail "card 0 after fault clear + rebind: state '$(cat "/sys/bus/pci/devices/$b0/rbln/state" 2>/dev/null)'"
	fi
fi

# ---- no card bound: exit 4, and the cards come back afterwards
rebind() {
	local b
	for b in $bdfs; do
		[ -e "/sys/bus/pci/drivers/rbln/$b" ] || echo "$b" >/sys/bus/pci/drivers/rbln/bind
	done
}
if [ "$(id -u)" = 0 ]; then
	trap rebind EXIT
	for b in $bdfs; do
		echo "$b" >/sys/bus/pci/drivers/rbln/unbind || fail "unbind $b"
	done
	run "-L without cards" "$tmp/none" "$smi" -L
	rc=$?
	if [ "$rc" = 4 ] && [ -s "$tmp/none.err" ]; then
		pass "no card bound: exit 4 ($(head -n1 "$tmp/none.err"))"
	else
		fail "no card bound: exit $rc, stderr '$(head -c 200 "$tmp/none.err")', want exit 4 and a message"
	fi
	rebind
	trap - EXIT
	sleep 0.2
	[ "$(bound_bdfs)" = "$bdfs" ] || fail "cards not bound again: $(bound_bdfs | tr '\n' ' ')"
	if run "-L after rebind" "$tmp/again" "$smi" -L &&
		[ "$(grep -c '^NPU ' "$tmp/again")" = "$cards" ]; then
		pass "rbln-smi -L after rebinding"
	else
		fail "rbln-smi -L after rebinding"
	fi
fi

echo "# rbln-smi timings: $(printf '%s; ' "${timings[@]}")"
if [ -n "${RBLN_VM_RESULTS:-}" ]; then
	mkdir -p "$RBLN_VM_RESULTS/smi-check" &&
		cp "$tmp"/* "$RBLN_VM_RESULTS/smi-check/" 2>/dev/null
	printf '%s\n' "${timings[@]}" >"$RBLN_VM_RESULTS/smi-check/timings.txt" 2>/dev/null
fi
rm -rf "$tmp"
if [ "$fails" = 0 ]; then
	echo "# smi-check: all checks passed"
	exit 0
fi
echo "# smi-check: $fails check(s) failed"
exit 1
