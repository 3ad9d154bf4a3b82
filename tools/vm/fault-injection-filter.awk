# SPDX-License-Identifier: GPL-2.0
#
# rbln-vm --fault-injection: drops from a kernel log the reports that
# injected allocation failures cause by design, so that the runner's splat
# check sees only the others; prints the log without them and, at the end,
# "#tolerated <alloc-failure reports> <PAT WARNs>" on stderr.
#
# Tolerated:
# - the allocator's own report of a failed allocation (warn_alloc(): "page
#   allocation failure", "vmalloc error"), from its first line to the end
#   of its stack trace (</TASK>);
# - the WARN in get_pat_info() (arch/x86/mm/pat/memtype.c) when its stack
#   holds remap_pfn_range and rbln_hbm_bo_mmap: remap_pfn_range() whose
#   page-table allocation failed zaps the VMA, and the zap's untrack_pfn()
#   looks up a PFN at vm_start that was never mapped (the kernel's PAT
#   untrack path, kernel/README.md).  Any other get_pat_info WARN stays.
# Timestamps ("[ 12.345678] ") are ignored when matching.
# With -v summary=FILE, each tolerated report is also listed there in one
# line: its first line, then its first reliable frame in rbln.ko ("<-
# rbln_..."; not the "? " ones the unwinder only guessed).

function body(line) {
	sub(/^\[[ 0-9.]*\] /, "", line)
	return line
}

function frame(b) {
	if (first_rbln == "" && b !~ /^ *\? / && b ~ /rbln_[A-Za-z0-9_]+\+0x/) {
		first_rbln = b
		sub(/^ */, "", first_rbln)
	}
}

function listed(head) {
	if (summary != "")
		print head " <- " (first_rbln == "" ? "no rbln.ko frame" : first_rbln) > summary
}

BEGIN { mode = ""; allocs = 0; pats = 0; n = 0 }

mode == "alloc" {
	b = body($0)
	frame(b)
	if (b ~ /^ *<\/TASK>/) {
		listed(head)
		mode = ""
	}
	next
}

mode == "warn" {
	buf[n++] = $0
	b = body($0)
	if (b ~ /remap_pfn_range/)
		has_remap = 1
	if (b ~ /rbln_hbm_bo_mmap/)
		has_rbln = 1
	frame(b)
	if (b ~ /---\[ end trace/) {
		if (has_remap && has_rbln) {
			pats++
			listed(head)
		} else {
			for (i = 0; i < n; i++)
				print buf[i]
		}
		mode = ""
		n = 0
	}
	next
}

{
	b = body($0)
	if (b ~ /page allocation failure: order:/ || b ~ /vmalloc error: size/) {
		allocs++
		mode = "alloc"
		head = b
		first_rbln = ""
		next
	}
	if (b ~ /^WARNING: .* at arch\/x86\/mm\/pat\/memtype\.c:[0-9]+ get_pat_info/) {
		mode = "warn"
		n = 0
		has_remap = 0
		has_rbln = 0
		head = b
		first_rbln = ""
		buf[n++] = $0
		next
	}
	print
}

END {
	# an unfinished WARN block is not tolerated
	for (i = 0; i < n; i++)
		print buf[i]
	printf "#tolerated %d %d\n", allocs, pats > "/dev/stderr"
}
