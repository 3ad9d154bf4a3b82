#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Inside the VM (tests/soak/run.sh): the bounded soak of tests/soak/README.md.
# One rbln-soak per card, rbln-smi in a loop, and a fault injector that
# hangs a chiplet every 40-60 s through the card's emulator control port;
# the guest's memory, the soaks' RSS and open files and every chiplet's HBM
# in use sampled before, at the start, every 30 s and after; then the pass
# criteria (README: "Pass criteria", tolerances and why) and the table.
# usage: in-vm.sh CMAKE_BUILD_DIR [SECONDS]
set -u
build=$1
secs=${2:-600}
soak_bin=$build/tests/soak/rbln-soak
smi=$build/tools/rbln-smi/rbln-smi
work=$(mktemp -d)
out=${RBLN_VM_RESULTS:-$work}

# ---- tolerances (README.md, "Pass criteria": what each is and why) ----
warmup=30         # s: samples from here on must stay flat
period=30         # s between samples
slab_tol=4096     # KiB: Slab may grow this much over the first sample after warm-up
unrecl_tol=2048   # KiB: SUnreclaim likewise, and after the run over before it
avail_tol=65536   # KiB: MemAvailable may fall this much
rss_tol=16384     # KiB: a soak's RSS (live set and caches: the quiet points are the tight check)
fd_tol=2          # open files of a soak beyond its count after warm-up
hbm_tol=$((64 << 20)) # bytes: a card's HBM in use over its count after warm-up
first_hang=20     # s: the first injection
hang_gap_min=40   # s between injections: 40 ..
hang_gap_max=60   #   .. 60
recover_max=60    # s: a hang must be recovered within this
quiet_end=30      # s: no injection this close to the end

fail=0
problem() {
	echo "soak: FAIL: $*"
	fail=1
}
now() { date +%s; }
kib() { awk -v k="$1" '$1 == k":" { print $2 }' /proc/meminfo; }

# ---- the cards: sysfs dir, chiplets, control port (matched by serial) ----
declare -a dirs chiplets
for a in /sys/class/accel/accel*; do
	d=$(readlink -f "$a/device")/rbln
	[ -r "$d/state" ] || continue
	dirs+=("$d")
	chiplets+=("$(cat "$d/chiplet_count")")
done
ncards=${#dirs[@]}
if [ "$ncards" -lt 1 ]; then
	echo "soak: no rbln card"
	exit 1
fi

# One open port per card for the whole run: a command line in, a reply
# line out (tools/rbln-emu/README.md, "Control protocol").
declare -a portfd
ask() { # fd command...: the reply line
	local fd=$1 reply
	shift
	while read -r -t 0.05 _ <&"$fd"; do :; done # leftovers
	printf '%s\n' "$*" >&"$fd"
	read -r -t 10 reply <&"$fd" || reply="error no reply"
	echo "$reply"
}
emu() { # card command...
	local c=$1
	shift
	ask "${portfd[c]}" "$@"
}
for ((p = 0; p < ncards; p++)); do
	exec {fd}<>"/dev/virtio-ports/rbln-emu.$p" || { echo "soak: no control port $p"; exit 1; }
	serial=$(ask "$fd" status | sed -n 's/.* serial=\([^ ]*\).*/\1/p')
	for ((c = 0; c < ncards; c++)); do
		[ "$(cat "${dirs[c]}/serial")" = "$serial" ] && portfd[c]=$fd
	done
done
for ((c = 0; c < ncards; c++)); do
	if [ -z "${portfd[c]:-}" ]; then
		echo "soak: card ${dirs[c]} has no control port with its serial"
		exit 1
	fi
done

resets() { # card chiplet
	cat "${dirs[$1]}/chiplet$2/ring_resets"
}
hbm_card() { # card: bytes in use on all its chiplets
	local c=$1 i sum=0
	for ((i = 0; i < chiplets[c]; i++)); do
		sum=$((sum + $(cat "${dirs[$c]}/chiplet$i/hbm_used_bytes")))
	done
	echo "$sum"
}
hbm_chiplets() { # card: "a/b/c/d" MiB, rounded up
	local c=$1 i s=""
	for ((i = 0; i < chiplets[c]; i++)); do
		s+="${s:+/}$((($(cat "${dirs[$c]}/chiplet$i/hbm_used_bytes") + (1 << 20) - 1) >> 20))"
	done
	echo "$s"
}

# ---- samples: one line per sample in $work/samples ----
# label t slab unreclaimable available free rss0 fds0 rss1 fds1 ... hbm0 hbm1 ... chiplets0 ...
declare -a pids
sample() { # label
	local row c v
	row="$1 $(( $(now) - t0 )) $(kib Slab) $(kib SUnreclaim) $(kib MemAvailable) $(kib MemFree)"
	for ((c = 0; c < ncards; c++)); do
		v=-
		[ -n "${pids[c]:-}" ] && v=$(awk '/^VmRSS:/ { print $2 }' "/proc/${pids[c]}/status" 2>/dev/null)
		row+=" ${v:--}"
		v=-
		[ -n "${pids[c]:-}" ] && [ -d "/proc/${pids[c]}/fd" ] && v=$(find "/proc/${pids[c]}/fd" -mindepth 1 -maxdepth 1 | wc -l)
		row+=" $v"
	done
	for ((c = 0; c < ncards; c++)); do row+=" $(hbm_card "$c")"; done
	for ((c = 0; c < ncards; c++)); do row+=" $(hbm_chiplets "$c")"; done
	echo "$row" >> "$work/samples"
}

# ---- the fault injector ----
injector() {
	local next=$first_hang n=0 c i before t_inj st hung r
	while :; do
		[ $((next + quiet_end)) -le "$secs" ] || break
		while [ $(( $(now) - t0 )) -lt "$next" ]; do
			[ -e "$work/stop" ] && return
			sleep 1
		done
		c=$((n % ncards))
		i=$((RANDOM % chiplets[c]))
		before=$(resets "$c" "$i")
		t_inj=$(now)
		r=$(emu "$c" "fault hang chiplet=$i")
		if [ "${r%% *}" != ok ]; then
			echo "hang $n card $c chiplet $i: not injected: $r" >> "$work/hangs"
			echo "FAILED" >> "$work/hang-status"
			return
		fi
		# Recovered: the ring was reset (ring_resets), the hang ended
		# (the emulator's hung mask), the card is ready.
		while :; do
			st=$(cat "${dirs[$c]}/state")
			hung=$(emu "$c" status | sed -n 's/.* hung=\([^ ]*\).*/\1/p')
			if [ "$(resets "$c" "$i")" -gt "$before" ] && [ "$st" = ready ] &&
				[ -n "$hung" ] && [ $((hung)) -eq 0 ]; then
				echo "hang $n card $c chiplet $i at $((t_inj - t0))s: recovered in" \
					"$(( $(now) - t_inj ))s (ring_resets $before -> $(resets "$c" "$i"), state $st)" \
					>> "$work/hangs"
				echo "ok $c" >> "$work/hang-status"
				break
			fi
			if [ $(( $(now) - t_inj )) -gt "$recover_max" ]; then
				echo "hang $n card $c chiplet $i at $((t_inj - t0))s: NOT recovered after" \
					"${recover_max}s (ring_resets $before -> $(resets "$c" "$i"), state $st," \
					"emulator hung=$hung)" >> "$work/hangs"
				echo "FAILED" >> "$work/hang-status"
				return
			fi
			sleep 0.5
		done
		n=$((n + 1))
		next=$(( $(now) - t0 + hang_gap_min + RANDOM % (hang_gap_max - hang_gap_min + 1) ))
	done
}

# ---- rbln-smi in a loop, beside everything ----
smi_loop() {
	local n=0 bad=0 listed=0
	while [ ! -e "$work/stop" ]; do
		if ! "$smi" > "$work/smi.txt" 2>&1; then
			bad=$((bad + 1))
			cp "$work/smi.txt" "$out/smi-failed-$bad.txt" 2>/dev/null
		fi
		if ! "$smi" -j > "$work/smi.json" 2> "$work/smi.err" ||
			! grep -q '"schema_version"' "$work/smi.json"; then
			bad=$((bad + 1))
			cat "$work/smi.err" > "$out/smi-failed-$bad.txt" 2>/dev/null
		fi
		grep -q rbln-soak "$work/smi.txt" && listed=$((listed + 1))
		n=$((n + 1))
		sleep 1
	done
	echo "$n $bad $listed" > "$work/smi-result"
}

# ---- the run ----
t0=$(now)
sample pre
echo "soak: $ncards card(s), ${secs}s; rbln-soak $soak_bin; job_timeout_ms" \
	"$(cat /sys/module/rbln/parameters/job_timeout_ms 2>/dev/null)"
for ((c = 0; c < ncards; c++)); do
	"$soak_bin" --device "$c" --seconds "$secs" --tolerate-timeouts \
		> "$work/soak$c.log" 2>&1 &
	pids[c]=$!
done
t0=$(now)
sample start
smi_loop &
smi_pid=$!
injector &
inj_pid=$!

next=$period
while :; do
	alive=0
	for ((c = 0; c < ncards; c++)); do
		kill -0 "${pids[c]}" 2>/dev/null && alive=1
	done
	[ "$alive" = 1 ] || break
	if [ $(( $(now) - t0 )) -ge "$next" ]; then
		[ "$next" -lt "$secs" ] && sample "$next"
		next=$((next + period))
	fi
	sleep 1
done
for ((c = 0; c < ncards; c++)); do
	wait "${pids[c]}"
	rc=$?
	echo "--- rbln-soak on card $c (exit $rc):"
	grep -Ev '^rbln-soak: device [0-9]* (t=|checkpoint)' "$work/soak$c.log" | tail -n 20
	grep '^rbln-soak: device [0-9]* t=' "$work/soak$c.log" | tail -n 1
	echo "quiet points of soak $c (RSS KiB/open files/heap in use KiB):" \
		"$(sed -n 's/.* checkpoint [0-9]*: rss=\([0-9]*\) KiB fds=\([0-9]*\) heap=\([0-9]*\) .*/\1 \2 \3/p' \
			"$work/soak$c.log" | awk '{ printf "%s%d/%d/%d", (NR > 1 ? " " : ""), $1, $2, $3 / 1024 }')"
	[ "$rc" = 0 ] || problem "rbln-soak on card $c exited $rc"
	cp "$work/soak$c.log" "$out/" 2>/dev/null
done
touch "$work/stop"
wait "$inj_pid" "$smi_pid"
unset 'pids[@]'
sleep 2 # the driver frees a closed file's buffers after its jobs
sample post

# ---- criteria ----
echo "--- fault injection:"
cat "$work/hangs" 2>/dev/null || echo "(no hang injected)"
grep -q FAILED "$work/hang-status" 2>/dev/null && problem "a chiplet hang was not recovered (above)"
hangs=$(grep -c '^ok' "$work/hang-status" 2>/dev/null)
hangs=${hangs:-0}
if [ "$secs" -ge $((first_hang + quiet_end)) ] && [ "$hangs" -lt 1 ]; then
	problem "no chiplet hang was injected and recovered"
fi
for ((c = 0; c < ncards; c++)); do
	on_card=$(grep -c "^ok $c\$" "$work/hang-status" 2>/dev/null)
	tol=$(sed -n 's/.* PASS .* tolerated=\([0-9]*\) .*/\1/p' "$work/soak$c.log")
	if [ -n "$tol" ] && [ "$tol" -gt "${on_card:-0}" ]; then
		problem "rbln-soak on card $c lost $tol round(s) to job failures, but only" \
			"${on_card:-0} hang(s) were injected into its card"
	fi
	echo "card $c: ${on_card:-0} hang(s) injected and recovered, ${tol:-?} round(s) of its soak lost to them"
done
read -r smi_runs smi_bad smi_listed < "$work/smi-result"
echo "--- rbln-smi: $smi_runs runs (table and JSON each), $smi_bad failed," \
	"the table listed the soaks in $smi_listed"
[ "$smi_bad" = 0 ] || problem "rbln-smi failed $smi_bad time(s) (outputs in the results)"
[ "$smi_runs" -ge 1 ] || problem "rbln-smi never ran"

# The table, then the flatness checks against the first sample after warm-up.
awk -v n="$ncards" '
{
	printf "%-6s %5s %9.1f %9.1f %9.1f %9.1f", $1, $2, $3 / 1024, $4 / 1024, $5 / 1024, $6 / 1024
	for (c = 0; c < n; c++) {
		rss = $(7 + 2 * c); fds = $(8 + 2 * c)
		printf " %8s %4s", rss == "-" ? "-" : sprintf("%.1f", rss / 1024), fds
	}
	for (c = 0; c < n; c++) printf " %13s", $(7 + 3 * n + c)
	printf "\n"
}
BEGIN {
	printf "%-6s %5s %9s %9s %9s %9s", "sample", "t(s)", "Slab", "SUnrecl", "MemAvail", "MemFree"
	for (c = 0; c < n; c++) printf " %8s %4s", "RSS" c, "fd" c
	for (c = 0; c < n; c++) printf " %13s", "HBM" c " MiB"
	printf "\n"
}' "$work/samples" > "$work/table"
echo "--- samples (memory in MiB; HBM in use per chiplet, MiB rounded up):"
cat "$work/table"
cp "$work/table" "$work/samples" "$work/hangs" "$out/" 2>/dev/null

verdict=$(awk -v n="$ncards" -v warm="$warmup" -v slab_tol="$slab_tol" \
	-v unrecl_tol="$unrecl_tol" -v avail_tol="$avail_tol" -v rss_tol="$rss_tol" \
	-v fd_tol="$fd_tol" -v hbm_tol="$hbm_tol" '
function bad(s) { print "FAIL: " s; failed = 1 }
$1 == "pre" { for (c = 0; c < n; c++) hbm_pre[c] = $(7 + 2 * n + c); unrecl_pre = $4; next }
$1 == "post" {
	for (c = 0; c < n; c++)
		if ($(7 + 2 * n + c) != hbm_pre[c])
			bad("card " c ": " $(7 + 2 * n + c) " bytes of HBM in use after the soaks ended, " hbm_pre[c] " before")
	if ($4 - unrecl_pre > unrecl_tol)
		bad("SUnreclaim after the soaks ended is " $4 - unrecl_pre " KiB over before (tolerance " unrecl_tol ")")
	next
}
$2 < warm { next }
!have_ref { have_ref = 1; slab = $3; unrecl = $4; avail = $5
	for (c = 0; c < n; c++) { rss[c] = $(7 + 2 * c); fds[c] = $(8 + 2 * c); hbm[c] = $(7 + 2 * n + c) }
	samples++; next }
{
	samples++
	if ($3 - slab > slab_tol) bad("Slab grew " $3 - slab " KiB by t=" $2 "s (tolerance " slab_tol ")")
	if ($4 - unrecl > unrecl_tol) bad("SUnreclaim grew " $4 - unrecl " KiB by t=" $2 "s (tolerance " unrecl_tol ")")
	if (avail - $5 > avail_tol) bad("MemAvailable fell " avail - $5 " KiB by t=" $2 "s (tolerance " avail_tol ")")
	for (c = 0; c < n; c++) {
		r = $(7 + 2 * c); f = $(8 + 2 * c); h = $(7 + 2 * n + c)
		if (r != "-" && r - rss[c] > rss_tol) bad("soak " c " RSS grew " r - rss[c] " KiB by t=" $2 "s (tolerance " rss_tol ")")
		if (f != "-" && f - fds[c] > fd_tol) bad("soak " c " holds " f - fds[c] " more open files at t=" $2 "s (tolerance " fd_tol ")")
		if (h - hbm[c] > hbm_tol) bad("card " c " HBM in use grew " h - hbm[c] " bytes by t=" $2 "s (tolerance " hbm_tol ")")
	}
}
END { if (!failed) print "flat: " samples " samples after warm-up within the tolerances" }
' "$work/samples")
echo "$verdict"
grep -q '^FAIL' <<< "$verdict" && problem "a sampled figure grew (above)"

# The driver speaks for its clients: nothing it sent may be refused.
if dmesg | grep -E 'card rejected admin request|VM_UNBIND of asid'; then
	problem "the card rejected requests of the driver (above)"
fi
if [ "$fail" = 0 ]; then
	echo "soak: PASS (${secs}s, $ncards cards, $hangs chiplet hang(s) recovered)"
else
	echo "soak: FAILED (work files in $out)"
fi
exit "$fail"
