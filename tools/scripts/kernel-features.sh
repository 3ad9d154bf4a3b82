#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# kernel-features.sh KDIR OUT
#
# Feature probe for rbln.ko, run before every build (kernel/Makefile, Kbuild
# and DKMS' PRE_BUILD).  KDIR is the target kernel's build directory
# (/lib/modules/<ver>/build); OUT is the header to write (kernel/rbln_config.h).
#
# 1. Refuses a kernel without the DRM accel subsystem (CONFIG_DRM_ACCEL=y)
#    or without DRM, PCI MSI or hwmon, with a message that says what to do.
# 2. Greps the target kernel's headers for the APIs that changed between
#    6.8 and 6.15 and writes one HAVE_* define per API into OUT, which
#    kernel/rbln_compat.h turns into the right calls.
#
# OUT is only rewritten when its content changes, so an unchanged kernel
# does not trigger a rebuild.
set -eu

die() {
	printf 'rbln: %s\n' "$*" >&2
	exit 1
}

[ $# -eq 2 ] || die "usage: kernel-features.sh KDIR OUT"
kdir=$1
out=$2
[ -d "$kdir" ] || die "kernel build directory '$kdir' does not exist (install linux-headers for the target kernel, or pass KDIR=)"

# --- kernel release ----------------------------------------------------
kver=
if [ -r "$kdir/include/config/kernel.release" ]; then
	kver=$(cat "$kdir/include/config/kernel.release")
elif [ -r "$kdir/include/generated/utsrelease.h" ]; then
	kver=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"/\1/p' "$kdir/include/generated/utsrelease.h")
fi
[ -n "$kver" ] || kver="(unknown release at $kdir)"

# --- configuration -----------------------------------------------------
autoconf="$kdir/include/generated/autoconf.h"
config="$kdir/.config"
# conf_val NAME: prints y, m or n.
conf_val() {
	if [ -r "$autoconf" ]; then
		if grep -q "^#define CONFIG_$1 1\$" "$autoconf"; then
			echo y
		elif grep -q "^#define CONFIG_$1_MODULE 1\$" "$autoconf"; then
			echo m
		else
			echo n
		fi
	elif [ -r "$config" ]; then
		v=$(sed -n "s/^CONFIG_$1=\\(.*\\)\$/\\1/p" "$config")
		echo "${v:-n}"
	else
		die "target kernel $kver: neither $autoconf nor $config exists; is '$kdir' a configured kernel build directory?"
	fi
}

if [ "$(conf_val DRM_ACCEL)" != y ]; then
	die "target kernel $kver has no DRM accel subsystem (CONFIG_DRM_ACCEL); Debian 12's default 6.1 kernel has none: install linux-image-6.12.*+deb12-amd64-unsigned and linux-headers from bookworm-security/backports (tools/scripts/install-deps.sh does)"
fi
case $(conf_val DRM) in
y | m) ;;
*) die "target kernel $kver has no DRM (CONFIG_DRM)" ;;
esac
[ "$(conf_val PCI_MSI)" = y ] ||
	die "target kernel $kver has no MSI/MSI-X support (CONFIG_PCI_MSI); the rbln card signals only by MSI-X"
[ "$(conf_val DRM_GEM_SHMEM_HELPER)" != n ] ||
	die "target kernel $kver has no GEM shmem helpers (CONFIG_DRM_GEM_SHMEM_HELPER); rbln's host buffers are GEM shmem objects"
[ "$(conf_val GPU_BUDDY)" = y ] || [ "$(conf_val DRM_BUDDY)" != n ] ||
	die "target kernel $kver has no buddy allocator (CONFIG_GPU_BUDDY or CONFIG_DRM_BUDDY); rbln manages each chiplet's HBM with it"
[ "$(conf_val HWMON)" != n ] ||
	die "target kernel $kver has no hwmon (CONFIG_HWMON); rbln reports temperature and power through it"

# --- where the headers are ---------------------------------------------
# A full tree has include/linux here; Debian splits the headers into an
# -amd64 directory (generated files) whose Makefile includes the -common one.
srctree=
for cand in "$kdir" "$kdir/source" \
	"$(sed -n 's/^include \(.*\)\/Makefile$/\1/p' "$kdir/Makefile" 2>/dev/null | head -n 1)"; do
	if [ -n "$cand" ] && [ -r "$cand/include/linux/fs.h" ]; then
		srctree=$cand
		break
	fi
done
[ -n "$srctree" ] || die "cannot find the kernel headers of $kver (include/linux/fs.h) under $kdir"

inc=$srctree/include

# have NAME FILE REGEX: defines HAVE_NAME when FILE matches the extended REGEX.
defs=
have() {
	if grep -Eq "$3" "$inc/$2" 2>/dev/null; then
		defs="$defs#define HAVE_$1 1
"
	else
		defs="$defs/* #undef HAVE_$1 */
"
	fi
}

# struct_has NAME FILE STRUCT REGEX: like have, but only inside "struct STRUCT {".
struct_has() {
	if awk -v s="struct $3 {" -v re="$4" '
		index($0, s) == 1 { inside = 1; next }
		inside && /^};/ { inside = 0 }
		inside && $0 ~ re { found = 1 }
		END { exit !found }' "$inc/$2" 2>/dev/null; then
		defs="$defs#define HAVE_$1 1
"
	else
		defs="$defs/* #undef HAVE_$1 */
"
	fi
}

# 6.12: file_operations.fop_flags, FOP_UNSIGNED_OFFSET (accel_open refuses
# files without it).
have FOP_UNSIGNED_OFFSET linux/fs.h '^#define FOP_UNSIGNED_OFFSET'
# 6.11: managed BAR helpers.
have PCIM_IOMAP_RANGE linux/pci.h 'pcim_iomap_range\('
have PCIM_IOMAP_REGION linux/pci.h 'pcim_iomap_region\('
have PCIM_REQUEST_REGION linux/pci.h 'int pcim_request_region\('
# 6.14 removed drm_driver.date.
struct_has DRM_DRIVER_DATE drm/drm_drv.h drm_driver 'char \*date;'
# 6.5: drm_driver.show_fdinfo + drm_show_fdinfo().
struct_has DRM_DRIVER_SHOW_FDINFO drm/drm_drv.h drm_driver 'show_fdinfo\)'
# 6.3: drm_debugfs_add_file().
have DRM_DEBUGFS_ADD_FILE drm/drm_debugfs.h 'void drm_debugfs_add_file\('
# 6.13: MODULE_IMPORT_NS() takes the namespace as a string literal.
have MODULE_IMPORT_NS_STRING linux/module.h 'MODULE_INFO\(import_ns, ns\)'
# 6.11: sysfs group visibility may hide a whole named group.
have SYSFS_GROUP_INVISIBLE linux/sysfs.h 'SYSFS_GROUP_INVISIBLE'

# 6.12.y stable (and 6.19): drm_buddy became the shared gpu_buddy
# (linux/gpu_buddy.h, gpu_buddy_* in vmlinux).
have GPU_BUDDY linux/gpu_buddy.h 'int gpu_buddy_init\('
# Free blocks kept in per-order rb-trees (free_trees) rather than lists.
if [ -r "$inc/linux/gpu_buddy.h" ]; then
	struct_has BUDDY_FREE_TREES linux/gpu_buddy.h gpu_buddy 'free_trees;'
else
	struct_has BUDDY_FREE_TREES drm/drm_buddy.h drm_buddy 'free_trees;'
fi

# 6.15 (and 6.12.y stable): drm_sched_init() takes struct drm_sched_init_args.
have DRM_SCHED_INIT_ARGS drm/gpu_scheduler.h '^struct drm_sched_init_args \{'
# 6.17 (and 6.12.y stable): drm_sched_job_init() takes the DRM client id.
have DRM_SCHED_JOB_INIT_CLIENT_ID drm/gpu_scheduler.h 'u64 drm_client_id\);'
# io_uring_cmd_done() with a res2 argument (the CQE32 extra) before 6.18.
have IO_URING_CMD_DONE_RES2 linux/io_uring/cmd.h 'void io_uring_cmd_done\(struct io_uring_cmd \*cmd, ssize_t ret, u64 res2,'

tmp=$(mktemp "${out}.XXXXXX")
trap 'rm -f "$tmp"' EXIT
{
	echo "/* SPDX-License-Identifier: GPL-2.0 */"
	echo "/* Generated by tools/scripts/kernel-features.sh for $kver; do not edit. */"
	echo "#ifndef RBLN_CONFIG_H"
	echo "#define RBLN_CONFIG_H"
	echo
	printf '#define RBLN_CONFIG_KERNEL "%s"\n' "$kver"
	printf '%s' "$defs"
	echo
	echo "#endif /* RBLN_CONFIG_H */"
} >"$tmp"

if [ -f "$out" ] && cmp -s "$tmp" "$out"; then
	exit 0
fi
mv "$tmp" "$out"
trap - EXIT
